/* linalg_conv_bcast.c's kernel on AVX2: the output channels in the lanes,
 * the input broadcast, 8 lanes a vector. Why a kernel of its own and not
 * the panels of sgemm.c: on AVX2 a 3x3 Conv's product packed its panels
 * from the padded planes (a gather of K rows of 64 bytes per 16 columns,
 * 8-15% of resnet18's 3x3 Convs on a Zen 2) and computed every padding
 * tap; this reads the planes as they are and leaves those taps out where
 * that is exact (bc_sched), as ONNX Runtime's NCHWc kernel does.
 *
 * The schedule (row blocks of up to 64 channels, tiles of positions,
 * chunks of K, the padding classes, the partial sums) is
 * linalg_conv_bcast.c's bc_run, with two AVX2 choices there: a row block
 * runs as slices of 16 channels one after the other over the tile's
 * blocks (a slice's weights for a chunk, 18 KiB at its 288 k terms,
 * BC_KCHUNK8, stay in L1 across the blocks), and its weights are packed
 * as row blocks of 16 ([k][16] a slice, contiguous; the copy's own wpack
 * kind), the sums keeping the AVX-512 layout ([q - t0][64], a slice at
 * 16 v). This file is the three ISA-bound parts, each the AVX-512 one's
 * twin:
 * - the blocks: NP positions (up to 6) x one slice, two vectors of 8
 *   (12 sums, 2 weights and a broadcast: 15 of the 16 ymm registers;
 *   sgemm.c's AVX2 block has the same shape and reaches the core's peak
 *   on warm data), k taken as runs of one tap's channels (the run's
 *   first input from the offsets, each next channel a plane on: no
 *   offset load a k term). Per k term the chain is the AVX-512 block's:
 *   s = fma(w, x, s) from +0 (or the previous chunk's sums), over the
 *   column matrix's rows in order (bf__conv_krow), the same k terms left
 *   out;
 * - the epilogue: (1 * s) + bias, the residual Add in the Add's operand
 *   order, Relu's or Clip's max and min in sgemm.c's operand order, on
 *   8 x 8 tiles of sums transposed where 8 positions are consecutive
 *   outputs of one image, else a position's 8 channels a float at a time;
 * - the weights' packing, the same floats to the same places (8 x 8 tiles
 *   transposed where whole, else a float at a time). */
#include <stdint.h>
#include <string.h>

#include "add_first8.h"
#include "asan_region.h"
#include "linalg_bcast.h"
#include "transpose8.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

/* one k term of a slice: its two weight vectors, each position's input
 * float broadcast, two multiply-adds a position (the AVX-512 BC_KSTEP's
 * operands: fma(w, x, s)); pf: the copy's next lines asked for */
#define B8_KSTEP(NP)                                                                                            \
    {                                                                                                           \
        _mm_prefetch(pf, _MM_HINT_T1);                                                                          \
        __m256 w0 = _mm256_loadu_ps(wk), w1 = _mm256_loadu_ps(wk + 8);                                          \
        _Pragma("GCC unroll 6") for (int i = 0; i < NP; i++) {                                                  \
            __m256 xv = _mm256_broadcast_ss((const float *)(xo + xb[i]));                                       \
            s[i][0] = _mm256_fmadd_ps(w0, xv, s[i][0]);                                                         \
            s[i][1] = _mm256_fmadd_ps(w1, xv, s[i][1]);                                                         \
        }                                                                                                       \
    }
/* k terms [a, b) as runs of one tap's channels (bf__conv_krow: a block's
 * tap by tap, its channels in order; a, b and every run start a tap), the
 * run's first input from the offsets, the next channel's a plane on: no
 * offset load a k term */
#define B8_RUNS(NP, a, b)                                                                                       \
    for (int64_t p = (a); p < (b);) {                                                                           \
        int64_t e = p + (p >= j->lastk ? j->lastw : BF__CONV_CBLOCK);                                           \
        const char *xo = xp + 4 * (int64_t)j->off[p];                                                           \
        __asm__("" : "+r"(xo)); /* a register: GCC would fold xp into each address again */                   \
        _Pragma("GCC unroll 2") for (; p < e; p++, wk += 16, pf += 16, xo += pl) B8_KSTEP(NP)                  \
    }
#define B8_OPEN(NP)                                                                                             \
    __m256 s[NP][2];                                                                                            \
    float *av = acc;                                                                                            \
    _Pragma("GCC unroll 6") for (int i = 0; i < NP; i++) {                                                      \
        s[i][0] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(av + rows[i] * 64);                            \
        s[i][1] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(av + rows[i] * 64 + 8);                        \
    }                                                                                                           \
    /* each position's first float as a byte offset from the planes, k term \
     * p's as a pointer: one base + index address a broadcast */            \
    const char *xp = (const char *)j->xp;                                                                       \
    const int64_t pl = 4 * j->plane;                                                                            \
    int64_t xb[NP];                                                                                             \
    _Pragma("GCC unroll 6") for (int i = 0; i < NP; i++) xb[i] = 4 * (int64_t)j->pin[t0 + rows[i]];
#define B8_CLOSE(NP)                                                                                            \
    _Pragma("GCC unroll 6") for (int i = 0; i < NP; i++) {                                                      \
        _mm256_storeu_ps(av + rows[i] * 64, s[i][0]);                                                           \
        _mm256_storeu_ps(av + rows[i] * 64 + 8, s[i][1]);                                                       \
    }
/* a slice of 16 channels (weights wb, [k][16]; sums from acc) of positions
 * rows[0 .. NP): k terms [p0, p1) (b8_),
 * or the ranges rg[0 .. 2 nrg) in order (bm8_: a class that leaves out
 * padding taps) */
#define B8_BLOCK(NP)                                                                                            \
    NO_ASAN AVX2 static inline __attribute__((always_inline)) void b8_##NP(                                     \
        const bcast_job *j, const float *wb, const char *pf, const int32_t *rows, int64_t t0, int64_t p0,       \
        int64_t p1, float *acc, int first)                                                                      \
    {                                                                                                           \
        B8_OPEN(NP)                                                                                             \
        const float *wk = wb + p0 * 16;                                                                         \
        B8_RUNS(NP, p0, p1)                                                                                     \
        B8_CLOSE(NP)                                                                                            \
    }                                                                                                           \
    NO_ASAN AVX2 static inline __attribute__((always_inline)) void bm8_##NP(                                    \
        const bcast_job *j, const float *wb, const char *pf, const int32_t *rows, int64_t t0, const int32_t *rg, \
        int nrg, float *acc, int first)                                                                         \
    {                                                                                                           \
        B8_OPEN(NP)                                                                                             \
        for (int r = 0; r < nrg; r++) {                                                                         \
            const float *wk = wb + (int64_t)rg[2 * r] * 16;                                                     \
            B8_RUNS(NP, rg[2 * r], rg[2 * r + 1])                                                               \
        }                                                                                                       \
        B8_CLOSE(NP)                                                                                            \
    }
B8_BLOCK(1)
B8_BLOCK(2)
B8_BLOCK(3)
B8_BLOCK(4)
B8_BLOCK(5)
B8_BLOCK(6)

/* the block function of np positions */
#define B8_CASE(F, NP, ARGS) \
    case NP: F##NP ARGS; break;
#define B8_SWITCH(F, ARGS)                                                                                      \
    switch (np) {                                                                                               \
        B8_CASE(F, 1, ARGS) B8_CASE(F, 2, ARGS) B8_CASE(F, 3, ARGS) B8_CASE(F, 4, ARGS) B8_CASE(F, 5, ARGS)     \
    default: F##6 ARGS;                                                                                         \
    }

/* (not inlined into bc_run, for the AVX-512 twins' reason: the positions'
 * pointers find registers only here) */
NO_ASAN AVX2 __attribute__((noinline)) void bf__bc8_dispatch(const bcast_job *j, int np, const float *wb, const char *pf,
                                                             const int32_t *rows, int64_t t0, int64_t p0, int64_t p1,
                                                             float *acc, int first)
{
    B8_SWITCH(b8_, (j, wb, pf, rows, t0, p0, p1, acc, first))
}

NO_ASAN AVX2 __attribute__((noinline)) void bf__bc8_dispatchm(const bcast_job *j, int np, const float *wb,
                                                              const char *pf, const int32_t *rows, int64_t t0,
                                                              const int32_t *rg, int nrg, float *acc, int first)
{
    B8_SWITCH(bm8_, (j, wb, pf, rows, t0, rg, nrg, acc, first))
}

/* one output vector's epilogue: (1 * s) + bias, the residual r (loaded by
 * the caller) in the Add's order, the activation */
AVX2 static inline __attribute__((always_inline)) __m256 b8_out(const bf__act *act, __m256 s, __m256 bias, __m256 r,
                                                                __m256 lo, __m256 hi)
{
    __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(1.0f), s), bias);
    if (act && act->res) t = act->res_a ? add_first8(r, t) : add_first8(t, r);
    if (act) t = _mm256_min_ps(hi, _mm256_max_ps(lo, t));
    return t;
}

/* The epilogue of a tile's positions t0 .. t1, rows r0 .. r0 + 16 nv, from
 * their finished sums in acc ([q - t0][64]), 8 channels at a time over the
 * whole tile (their planes written front to back): 8 positions that are
 * consecutive outputs of one image as an 8 x 8 tile transposed (moves
 * only), each channel's 8 outputs then one vector, its residual one load,
 * its store one store; any other position its 8 channels, the residual
 * read and the outputs written a float at a time. */
AVX2 void bf__bc8_epi(const bcast_job *j, int64_t r0, int nv, int64_t t0, int64_t t1)
{
    const bf__act *act = j->act;
    const __m256 lo = _mm256_set1_ps(act ? act->lo : 0.0f), hi = _mm256_set1_ps(act ? act->hi : 0.0f);
    const __m256 none = _mm256_setzero_ps();
    for (int v = 0; v < 2 * nv; v++)
        for (int64_t q = t0; q < t1;) {
            const float *aq = j->acc + (q - t0) * 64 + 8 * v;
            if (q + 8 <= t1 && j->pout[q + 7] - j->pout[q] == 7) {
                float tr[64];   /* tr[8 c + i]: channel c of position q + i */
                bf__transpose8(aq, 64, tr, 8);
                for (int c = 0; c < 8; c++) {
                    int64_t ch = r0 + 8 * v + c, at = j->pout[q] + ch * j->osp;
                    __m256 r = none;
                    if (act && act->res) {
                        _mm_prefetch((const char *)(act->res + at + BC_RESPF), _MM_HINT_T0);
                        r = _mm256_loadu_ps(act->res + at);
                    }
                    __m256 t = b8_out(act, _mm256_loadu_ps(tr + 8 * c), _mm256_set1_ps(j->bias[ch]), r, lo, hi);
                    _mm_prefetch((const char *)(j->y + at + BC_YPF), _MM_HINT_T0);
                    _mm256_storeu_ps(j->y + at, t);
                }
                q += 8;
                continue;
            }
            int64_t at = j->pout[q] + (r0 + 8 * v) * j->osp;
            float rr[8], out[8];
            for (int c = 0; act && act->res && c < 8; c++) rr[c] = act->res[at + c * j->osp];
            __m256 r = act && act->res ? _mm256_loadu_ps(rr) : none;
            _mm256_storeu_ps(out, b8_out(act, _mm256_loadu_ps(aq), _mm256_loadu_ps(j->bias + r0 + 8 * v), r, lo, hi));
            for (int c = 0; c < 8; c++) j->y[at + c * j->osp] = out[c];
            q++;
        }
}

/* bc_pack's: the n weights of a channel block of rows 0 .. nr (wt: row
 * 0's first, rows kc apart), each to wb[kmap[t] nr + r], as 8 x 8 tiles
 * transposed (n and nr whole tiles: bc_pack_block's case); moves only */
AVX2 void bf__bc8_pack(const bcast_job *j, const float *wt, int64_t nr, int64_t n, const int32_t *kmap, float *wb)
{
    for (int64_t r = 0; r < nr; r += 8)
        for (int64_t t0 = 0; t0 < n; t0 += 8) {
            float tr[64];   /* tr[8 i + rr]: row r + rr's weight t0 + i */
            bf__transpose8(wt + r * j->kc + t0, j->kc, tr, 8);
            for (int i = 0; i < 8; i++) memcpy(wb + kmap[t0 + i] * nr + r, tr + 8 * i, 8 * sizeof(float));
        }
}
#endif

