/* A 2-D Conv with the output channels in the vector lanes, the input
 * broadcast (AVX-512; on AVX2 the same schedule with the blocks, epilogue
 * and weight packing of linalg_conv_bcast8.c, linalg_bcast.h): ONNX
 * Runtime's NCHWc kernel's structure over NCHW tensors (docs/ENGINE.md,
 * "The convolution path"; measured in docs/BENCHMARKS.md, "Output
 * channels in the lanes", and on AVX2 in docs/perf/conv/h43.md).
 *
 * A block is NP output positions x NV vectors of 16 output channels: per
 * k term, NV loads of packed weights (row block, k, 16 NV channels), NP
 * broadcasts of the input float each position reads at that k, NP x NV
 * fused multiply-adds. A position is any output position of any of the
 * images whose padded planes bf__conv_packed filled (pin: its first
 * float), so a block never holds a padding lane: resnet18's layer4 (7x7
 * maps, 49 positions an image, where 16-lane position vectors waste a
 * quarter of the lanes) and the stride-2 Convs (the tap's floats of
 * consecutive positions are every other float) run with every lane an
 * output. k runs over the column matrix's rows in their order
 * (bf__conv_krow), each sum from +0, one fused multiply-add per k (its
 * two factors the weight and the input, as the other paths have them;
 * the taps in the padding left out where that gives the same bits:
 * bc_sched),
 * then (1 * s) + bias, the residual Add in the Add's operand order,
 * Relu's or Clip's comparisons: every output gets bf__conv_packed's bits.
 * K is cut into chunks of whole blocks of 16 input channels (up to 128
 * channels of a 3x3 kernel: BC_KCHUNK): a row block's weights for one
 * chunk (288 KiB for 128 channels of 3x3 and NV = 4) stay in L2 while
 * every position block of a tile runs that chunk, the sums going to `acc`
 * between chunks (a float stored and loaded is the same float).
 * The lanes hold 16 channels of one position, which NCHW keeps osp floats
 * apart: a tile's last chunk stores its sums to `acc` too, and bc_epi
 * transposes 16 positions x 16 channels at a time, so each channel's 16
 * consecutive outputs are one vector (its residual one load, its store
 * one store), once per output, after the whole chain; a scatter only
 * where 16 positions are not consecutive outputs of one image. */
#include <stdint.h>
#include <string.h>

#include "asan_region.h"
#include "linalg_bcast.h"
#include "linalg_window.h"
#include "sgemm.h"
#include "transpose8.h"

#define BC_NP 6          /* positions a block */
#define BC_TILE 516      /* positions a tile at most (a multiple of BC_NP): its sums 129 KiB */
#define BC_MAXKSP 49     /* kernel positions it takes (7 x 7): a channel block's map on the stack */
/* k terms a chunk of K at most (whole blocks of 16 input channels, at
 * least one): 1152, 128 channels of a 3x3 kernel, whose weights for a row
 * block (288 KiB) stay in L2. Longer chunks store and reload each
 * position's sums fewer times; measured against 16, 32, 64 and all
 * channels a chunk in docs/perf/conv.md, "Longer chunks of K" */
#define BC_KCHUNK 1152
/* AVX2's: 288, 32 channels of a 3x3 kernel, a 16-channel slice's weights
 * 18 KiB, in L1 across the tile's blocks (bc_run). resnet18's 3x3 Convs at
 * batch 4 on a Zen 2, against 576 and 1152: level to 3% slower on layers
 * 1-3, 1-3% faster on layer4 (docs/perf/conv/h43.md, h43-bcast8) */
#define BC_KCHUNK8 288

/* Whether a step runs the AVX2 half (linalg_conv_bcast8.c): its blocks,
 * chunks and packed layout, else AVX-512's */
static int bc_avx2(const bf__conv_params *cp) { return cp->simd < BF_SGEMM_AVX512; }

/* channel blocks a chunk (avx2: the AVX2 half's) */
static int64_t bc_chunk(int64_t ksp, int avx2)
{
    int64_t b = (avx2 ? BC_KCHUNK8 : BC_KCHUNK) / (BF__CONV_CBLOCK * ksp);
    return b > 1 ? b : 1;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))

/* Under AddressSanitizer (build-asan: GCC defines __SANITIZE_ADDRESS__)
 * the blocks (bc_NP_NV, inlined into bc_dispatch) are not instrumented
 * (NO_ASAN), as sgemm.c's rows are not: ASan checked each of a block's NP
 * broadcasts and NV loads a k step inline, which made this file's compile
 * three times dearer and the blocks slower (tests/history/
 * round22-h26-build.md). Instead bc_asan checks, before a chunk of K runs
 * over a tile of positions, every byte its blocks read or write (bc_asan
 * says which), with asan_region.h's bf__asan_bytes: ASan's usual report
 * for a poisoned byte (tests/unit/asan_bcast_oob.c plants an input and a
 * weight one float short). What it no longer sees, as in
 * sgemm.c: an index a block computes wrongly inside those spans. The
 * release build compiles none of this: NO_ASAN and BC_ASAN are empty there
 * and its machine code is unchanged. */
#if defined(__SANITIZE_ADDRESS__)
#define BC_ASAN(...) bc_asan(__VA_ARGS__)
#else
#define BC_ASAN(...) ((void)0)
#endif


/* x86's first source is the one returned when both are NaN: the Add's A
 * keeps its payload (sgemm.c's add_first16) */
AVX512 static inline __attribute__((always_inline)) __m512 add_first(__m512 a, __m512 b)
{
    __m512 o;
    __asm__("vaddps %2, %1, %0" : "=v"(o) : "v"(a), "v"(b));
    return o;
}

/* positions rows[0 .. NP) of the tile starting at t0 (acc rows; the
 * positions t0 + rows[i]) of a row block of 16 NV rows (weights wb: the row
 * block's, [k][16 NV]), k terms [p0, p1) (BC_BLOCK) or the ranges rg[0 ..
 * 2 nrg) in order (BC_BLOCKM: a block whose positions leave out padding
 * taps, bc_sched); acc: the tile's sums, [q - t0][64], from +0 (first) or
 * as the last chunk left them, stored back for the next chunk or bc_epi.
 * The two share the k step, so a k term's operations are the same in both. */
#define BC_KSTEP(NP, NV)                                                                                             \
    {                                                                                                                \
        _mm_prefetch(pf, _MM_HINT_T1);                                                                               \
        int64_t o = j->off[p];                                                                                       \
        __m512 wv[NV];                                                                                               \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) wv[v] = _mm512_loadu_ps(wk + 16 * v);                   \
        _Pragma("GCC unroll 6") for (int i = 0; i < NP; i++) {                                                       \
            __m512 xv = _mm512_set1_ps(xb[i][o]);                                                                    \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = _mm512_fmadd_ps(wv[v], xv, s[i][v]);      \
        }                                                                                                            \
    }
#define BC_OPEN(NP, NV)                                                                                              \
    __m512 s[NP][NV];                                                                                                \
    _Pragma("GCC unroll 6") for (int i = 0; i < NP; i++)                                                             \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] =                                               \
        first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + rows[i] * 64 + 16 * v);                                 \
    const float *xb[NP];                                                                                             \
    _Pragma("GCC unroll 6") for (int i = 0; i < NP; i++) xb[i] = j->xp + j->pin[t0 + rows[i]];
#define BC_CLOSE(NP, NV)                                                                                             \
    _Pragma("GCC unroll 6") for (int i = 0; i < NP; i++)                                                             \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) _mm512_storeu_ps(acc + rows[i] * 64 + 16 * v, s[i][v]);
#define BC_BLOCK(NP, NV)                                                                                             \
    NO_ASAN AVX512 static inline __attribute__((always_inline)) void bc_##NP##_##NV(                                 \
        const bcast_job *j, const float *wb, const char *pf, const int32_t *rows, int64_t t0, int64_t p0, int64_t p1, \
        float *acc, int first)                                                                                       \
    {                                                                                                                \
        BC_OPEN(NP, NV)                                                                                              \
        const float *wk = wb + p0 * 16 * NV;                                                                         \
        _Pragma("GCC unroll 2") for (int64_t p = p0; p < p1; p++, wk += 16 * NV, pf += 16) BC_KSTEP(NP, NV)         \
        BC_CLOSE(NP, NV)                                                                                             \
    }                                                                                                                \
    NO_ASAN AVX512 static inline __attribute__((always_inline)) void bcm_##NP##_##NV(                                \
        const bcast_job *j, const float *wb, const char *pf, const int32_t *rows, int64_t t0, const int32_t *rg,     \
        int nrg, float *acc, int first)                                                                              \
    {                                                                                                                \
        BC_OPEN(NP, NV)                                                                                              \
        for (int r = 0; r < nrg; r++) {                                                                              \
            int64_t p1 = rg[2 * r + 1];                                                                              \
            const float *wk = wb + (int64_t)rg[2 * r] * 16 * NV;                                                     \
            for (int64_t p = rg[2 * r]; p < p1; p++, wk += 16 * NV, pf += 16) BC_KSTEP(NP, NV)                       \
        }                                                                                                            \
        BC_CLOSE(NP, NV)                                                                                             \
    }

#define BC_NPS(NV) BC_BLOCK(1, NV) BC_BLOCK(2, NV) BC_BLOCK(3, NV) BC_BLOCK(4, NV) BC_BLOCK(5, NV) BC_BLOCK(6, NV)
BC_NPS(1)
BC_NPS(2)
BC_NPS(3)
BC_NPS(4)

/* the block function of np positions: F##NP##_##NV ARGS (bc_: k terms
 * [p0, p1); bcm_: the ranges) */
#define BC_CASE(F, NP, NV, ARGS) \
    case NP: F##NP##_##NV ARGS; break;
#define BC_SWITCH(F, NV, ARGS)                                                                                       \
    switch (np) {                                                                                                    \
        BC_CASE(F, 1, NV, ARGS) BC_CASE(F, 2, NV, ARGS) BC_CASE(F, 3, NV, ARGS) BC_CASE(F, 4, NV, ARGS)              \
        BC_CASE(F, 5, NV, ARGS) default: F##6_##NV ARGS;                                                             \
    }
#define BC_DISPATCH(F, ARGS)                                                                                         \
    if (nv == 4) BC_SWITCH(F, 4, ARGS)                                                                               \
    else if (nv == 3) BC_SWITCH(F, 3, ARGS)                                                                          \
    else if (nv == 2) BC_SWITCH(F, 2, ARGS)                                                                          \
    else BC_SWITCH(F, 1, ARGS)

#if defined(__SANITIZE_ADDRESS__)
/* what the blocks of positions q0 .. q1 (a tile), nv vectors, k terms
 * [p0, p1) read and write, checked once before bc_run dispatches them:
 * their sums in acc, the positions' first floats, the k terms' offsets and
 * weights, and the input from the lowest position's lowest offset to the
 * highest's highest (the floats the blocks broadcast lie in that span, all
 * in the one buffer of planes). Instrumented: it reads the tables once
 * they are checked. */
__attribute__((noinline)) static void bc_asan(const bcast_job *j, int nv, int64_t q0, int64_t q1, const float *wb,
                                              int64_t p0, int64_t p1, const float *acc)
{
    if (q1 <= q0) return;
    bf__asan_bytes(acc, sizeof(float) * (size_t)((q1 - q0 - 1) * 64 + 16 * nv));
    bf__asan_bytes(j->pin + q0, sizeof(int32_t) * (size_t)(q1 - q0));
    if (p1 <= p0) return;
    bf__asan_bytes(j->off + p0, sizeof(int32_t) * (size_t)(p1 - p0));
    bf__asan_bytes(wb + p0 * 16 * nv, sizeof(float) * (size_t)((p1 - p0) * 16 * nv));
    int64_t lo = j->off[p0], hi = lo, qlo = j->pin[q0], qhi = qlo;
    for (int64_t p = p0 + 1; p < p1; p++) {
        if (j->off[p] < lo) lo = j->off[p];
        if (j->off[p] > hi) hi = j->off[p];
    }
    for (int64_t q = q0 + 1; q < q1; q++) {
        if (j->pin[q] < qlo) qlo = j->pin[q];
        if (j->pin[q] > qhi) qhi = j->pin[q];
    }
    bf__asan_bytes(j->xp + qlo + lo, sizeof(float) * (size_t)(qhi + hi - qlo - lo + 1));
}
#endif

NO_ASAN AVX512 __attribute__((noinline)) static void bc_dispatch(const bcast_job *j, int nv, int np, const float *wb,
                                                                 const char *pf, const int32_t *rows, int64_t t0,
                                                                 int64_t p0, int64_t p1, float *acc, int first)
{
    BC_DISPATCH(bc_, (j, wb, pf, rows, t0, p0, p1, acc, first))
}

NO_ASAN AVX512 __attribute__((noinline)) static void bc_dispatchm(const bcast_job *j, int nv, int np, const float *wb,
                                                                  const char *pf, const int32_t *rows, int64_t t0,
                                                                  const int32_t *rg, int nrg, float *acc, int first)
{
    BC_DISPATCH(bcm_, (j, wb, pf, rows, t0, rg, nrg, acc, first))
}

/* The n weights of a channel block of rows 0 .. nr (wt: row 0's first,
 * rows kc apart), each to wb[kmap[t] nr + r] as 16 x 16 tiles transposed
 * (n and nr whole tiles: bc_pack_block's case) */
AVX512 static void bc_pack(const bcast_job *j, const float *wt, int64_t nr, int64_t n, const int32_t *kmap, float *wb)
{
    for (int64_t r = 0; r < nr; r += 16)
        for (int64_t t0 = 0; t0 < n; t0 += 16) {
            __m512 v[16];
            for (int i = 0; i < 16; i++) v[i] = _mm512_loadu_ps(wt + (r + i) * j->kc + t0);
            bf__transpose16(v);
            for (int i = 0; i < 16; i++) _mm512_storeu_ps(wb + kmap[t0 + i] * nr + r, v[i]);
        }
}

/* The weights of rows r0 .. r0 + nr (wt: [rows][c][taps], as stored), k
 * terms of channel block cb, into wb as [k - p0][nr], each stored weight
 * to its k term's place (kmap[t]: tap-major inside the block, as
 * bf__conv_krow orders it): a plan passes the model's copy of all of W
 * packed once this way (bf__conv_bcast_pack, base/wpack.h) while the step
 * reads the model's own tensor; a plan whose W holds a fault packs it
 * here a chunk at a time as bc_run uses it. Tiles of the level's lanes
 * transposed (bc_pack, bf__bc8_pack) where the block is whole tiles, else
 * one float at a time; moves only, so the weights keep their bits. */
static void bc_pack_block(const bcast_job *j, const float *wt, int64_t nr, int64_t cb, float *wb)
{
    int64_t c0 = cb * BF__CONV_CBLOCK, width = j->cg - c0 < BF__CONV_CBLOCK ? j->cg - c0 : BF__CONV_CBLOCK;
    int64_t n = width * j->ksp;
    int32_t kmap[BF__CONV_CBLOCK * BC_MAXKSP];
    for (int64_t c = 0; c < width; c++)
        for (int64_t tap = 0; tap < j->ksp; tap++) kmap[c * j->ksp + tap] = (int32_t)(tap * width + c);
    wt += c0 * j->ksp;
    if (n % (j->avx2 ? 8 : 16)) {
        for (int64_t r = 0; r < nr; r++)
            for (int64_t t = 0; t < n; t++) wb[kmap[t] * nr + r] = wt[r * j->kc + t];
    } else if (j->avx2) {
        bf__bc8_pack(j, wt, nr, n, kmap, wb);
    } else {
        bc_pack(j, wt, nr, n, kmap, wb);
    }
}

/* (bc_dispatch is not inlined: in bc_run the six positions' pointers
 * found no registers, and each broadcast loaded its pointer first) */

/* The epilogue of a tile's positions t0 .. t1, rows r0 .. r0 + 16 nv, from
 * their finished sums in acc ([q - t0][64]): sixteen positions that are
 * consecutive outputs of one image go as a 16 x 16 tile transposed (moves
 * only), each channel's sixteen outputs then one vector, its residual one
 * load and its store one store; other positions (a tile's last, an image's
 * edge) one vector of 16 channels, gathered and scattered. Either way each
 * output gets (1 * s) + bias, the residual Add in the Add's operand order,
 * Relu's or Clip's comparisons, as bc_NP_NV's scatter gave it. */
AVX512 static void bc_epi(const bcast_job *j, int64_t r0, int nv, int64_t t0, int64_t t1)
{
    const bf__act *act = j->act;
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    const __m512i vidx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32((int)j->osp));
    /* 16 channels at a time over the whole tile: their 16 output planes
     * are written front to back, 16 streams, where a position-major walk
     * wrote one line in each of 16 nv planes in turn */
    for (int v = 0; v < nv; v++)
        for (int64_t q = t0; q < t1;) {
            const float *aq = j->acc + (q - t0) * 64;
            if (q + 16 <= t1 && j->pout[q + 15] - j->pout[q] == 15) {
                __m512 r[16];
                for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(aq + i * 64 + 16 * v);
                bf__transpose16(r);
                for (int c = 0; c < 16; c++) {
                    int64_t ch = r0 + 16 * v + c, at = j->pout[q] + ch * j->osp;
                    __m512 t = _mm512_add_ps(_mm512_mul_ps(one, r[c]), _mm512_set1_ps(j->bias[ch]));
                    if (act && act->res) {
                        _mm_prefetch((const char *)(act->res + at + BC_RESPF), _MM_HINT_T0);
                        __m512 rv = _mm512_loadu_ps(act->res + at);
                        t = act->res_a ? add_first(rv, t) : add_first(t, rv);
                    }
                    if (act) t = _mm512_min_ps(hi, _mm512_max_ps(lo, t));
                    _mm_prefetch((const char *)(j->y + at + BC_YPF), _MM_HINT_T0);
                    _mm512_storeu_ps(j->y + at, t);
                }
                q += 16;
                continue;
            }
            int64_t at = j->pout[q] + (r0 + 16 * v) * j->osp;
            __m512 t = _mm512_add_ps(_mm512_mul_ps(one, _mm512_loadu_ps(aq + 16 * v)), _mm512_loadu_ps(j->bias + r0 + 16 * v));
            if (act && act->res) {
                __m512 rv = _mm512_i32gather_ps(vidx, act->res + at, 4);
                t = act->res_a ? add_first(rv, t) : add_first(t, rv);
            }
            if (act) t = _mm512_min_ps(hi, _mm512_max_ps(lo, t));
            _mm512_i32scatter_ps(j->y + at, vidx, t, 4);
            q++;
        }
}

/* The padding taps left out. A tap that falls in the padding adds
 * fma(w, +0, s): with w finite that is s itself, but for the sign of a zero
 * sum (-0 + (+0) is +0). So a sum that leaves such taps out differs from
 * the one that computes them at most in the sign of a zero (both zero, or
 * the same float, after every k term: a nonzero product added to +0 or -0
 * gives the same float), and the epilogue's (1 * s) + bias erases that
 * difference unless the bias is -0 (+0 + -0 is +0, -0 + -0 is -0). Where
 * every weight is finite (the model's W packed once: bf__conv_bcast_pack
 * refuses a W with an Inf or NaN, which then packs per call and computes
 * every tap) and no bias is -0 (checked a call), leaving them out gives
 * every output the bits of the chain with them (docs/ENGINE.md, "The
 * convolution path"), on every chunk's sums too (a trial that resumes from
 * them: bf__psum). MLAS leaves them out as well; on resnet18 they are 7.9%
 * of the 3x3 Convs' multiply-adds (18% of layer4's 7x7 maps).
 *
 * A tile's positions are put in classes by the taps they may leave out:
 * those of their padded kernel rows and columns (the corners: both), else
 * of their padded rows (the top and bottom output rows), else of their
 * padded columns, else none; each class's positions, in order, form the blocks, up to
 * BC_NP each and as even as the class allows. A class's k terms in a chunk
 * are ranges of bf__conv_krow's order (tap-major in each block of 16
 * channels: a tap's channels are consecutive k terms). */
#define BC_CLS 16     /* classes a tile at most; a position past them computes every tap */
#define BC_RNG 96     /* k ranges of one class in one chunk at most; else its taps all computed */
#define BC_BLKS (BC_TILE / BC_NP + BC_CLS + 1)
#define BC_CRUNS 16   /* runs of columns of one class along a row at most; else no column's taps left out */
typedef struct bc_sched {
    /* the call's: the classes, and each output row's and column's (0: none) */
    int ncls;
    uint64_t mask[BC_CLS];    /* the taps a class leaves out (0: none) */
    const int8_t *rowcls;
    int ncr;                  /* a row's runs of columns of one class: [cra, crb) of class crc */
    int32_t cra[BC_CRUNS], crb[BC_CRUNS];
    int8_t crc[BC_CRUNS];
    /* a row class's positions in a column class's run: the class of both
     * masks (corner[r][0]: r; r where that class could not be made, which
     * computes the run's padded columns) */
    int8_t corner[BC_CLS][BC_CLS];
    /* the tile's */
    int32_t ord[BC_TILE];     /* the tile's acc rows (q - t0) in block order */
    int32_t at[BC_BLKS];      /* block b: its rows ord[at[b] .. at[b + 1]) */
    int8_t cls[BC_BLKS];      /* block b's class */
    int nb;
    int64_t t0, t1;           /* the tile planned (-1: none) */
    /* the chunk's */
    int64_t cb0;              /* the chunk whose ranges rg holds (-1: none) */
    int32_t rg[BC_CLS][2 * BC_RNG];
    int nrg[BC_CLS];
    int64_t kt[BC_CLS];       /* the k terms a class runs in the chunk */
} bc_sched;

/* maximal runs of taps not in m, of ksp */
static int bc_runs(uint64_t m, int64_t ksp)
{
    int n = 0;
    for (int64_t t = 0; t < ksp; t++)
        if (!(m >> t & 1) && (t == 0 || (m >> (t - 1) & 1))) n++;
    return n;
}

/* the class of the taps in m (0 where none is left out: m is 0, too many
 * ranges, no class left) */
static int8_t bc_class(bc_sched *sc, uint64_t m, int64_t ksp, int64_t chb)
{
    if (!m || bc_runs(m, ksp) * chb > BC_RNG) return 0;
    int c = 1;
    while (c < sc->ncls && sc->mask[c] != m) c++;
    if (c == sc->ncls) {
        if (c == BC_CLS) return 0;
        sc->mask[sc->ncls++] = m;
    }
    return (int8_t)c;
}

/* the taps whose kernel row (axis 1) or column (axis 2) falls in the
 * padding at output row or column o: all the taps of that row or column */
static uint64_t bc_padmask(const bf__window *w, int axis, int64_t o)
{
    uint64_t m = 0;
    for (int64_t a = 0; a < w->k[axis]; a++) {
        int64_t i = o * w->s[axis] - w->pb[axis] + a * w->d[axis];
        if (i >= 0 && i < w->in[axis]) continue;
        for (int64_t b = 0; b < w->k[3 - axis]; b++) m |= (uint64_t)1 << (axis == 1 ? a * w->k[2] + b : b * w->k[2] + a);
    }
    return m;
}

/* The call's classes: each output row's by the kernel rows that fall in
 * the padding there (all their taps; rowcls: out[1] bytes), and a row's
 * runs of columns of one class by the kernel columns. Without skip, one
 * class. */
static void bc_plan_call(const bcast_job *j, int64_t chb, int8_t *rowcls, bc_sched *sc)
{
    const bf__window *w = j->win;
    sc->ncls = 1, sc->mask[0] = 0, sc->rowcls = rowcls, sc->t0 = sc->t1 = sc->cb0 = -1;
    sc->ncr = 1, sc->cra[0] = 0, sc->crb[0] = (int32_t)w->out[2], sc->crc[0] = 0;
    if (!j->skip) return;
    for (int64_t oh = 0; oh < w->out[1]; oh++) rowcls[oh] = bc_class(sc, bc_padmask(w, 1, oh), j->ksp, chb);
    int n = 0;
    for (int64_t ow = 0; ow < w->out[2]; ow++) {
        int8_t c = bc_class(sc, bc_padmask(w, 2, ow), j->ksp, chb);
        if (n && sc->crc[n - 1] == c) {
            sc->crb[n - 1] = (int32_t)ow + 1;
            continue;
        }
        if (n == BC_CRUNS) {   /* too many: every column computes its taps */
            n = 1, sc->cra[0] = 0, sc->crb[0] = (int32_t)w->out[2], sc->crc[0] = 0;
            break;
        }
        sc->cra[n] = (int32_t)ow, sc->crb[n] = (int32_t)ow + 1, sc->crc[n++] = c;
    }
    sc->ncr = n;
    /* the corners' classes, once the rows' and columns' are all made */
    int nrc = sc->ncls;
    for (int r = 1; r < nrc; r++) {
        sc->corner[r][0] = (int8_t)r;
        for (int c = 1; c < nrc; c++) {
            int8_t k = bc_class(sc, sc->mask[r] | sc->mask[c], j->ksp, chb);
            sc->corner[r][c] = k ? k : (int8_t)r;
        }
    }
}

/* the blocks of tile [t0, t1): a position's class that of its row's and
 * column's classes together (bc_plan_call's corner), its row's, or its
 * column's; with one class, today's blocks (BC_NP consecutive positions).
 * The tile's positions go by runs of one class (a row's run of columns of
 * one class), each run's positions then written in order. */
static void bc_plan_tile(const bcast_job *j, int64_t t0, int64_t t1, bc_sched *sc)
{
    int64_t n = t1 - t0;
    int32_t cnt[BC_CLS] = {0}, start[BC_CLS], pos = 0;
    int32_t ra[BC_TILE], rl[BC_TILE];   /* run r: positions ra .. ra + rl of class rk */
    int8_t rk[BC_TILE];
    if (sc->t0 == t0 && sc->t1 == t1) return;   /* the next row block's tile: planned */
    sc->t0 = t0, sc->t1 = t1;
    if (sc->ncls == 1) {
        for (int64_t i = 0; i < n; i++) sc->ord[i] = (int32_t)i;
        cnt[0] = (int32_t)n;
    } else if (j->sub) {
        /* listed positions: each its own class, from its own row and column */
        int64_t ow_n = j->win->out[2];
        int8_t *kq = rk;
        for (int64_t i = 0; i < n; i++) {
            int64_t r = j->pout[t0 + i] % j->ipl, oh = r / ow_n, ow = r % ow_n;
            int c = 0;
            while (c + 1 < sc->ncr && sc->crb[c] <= ow) c++;
            int8_t rc = sc->rowcls[oh];
            kq[i] = rc ? sc->corner[rc][sc->crc[c]] : sc->crc[c];
            cnt[kq[i]]++;
        }
        for (int c = 0; c < sc->ncls; c++) start[c] = pos, pos += cnt[c];
        for (int64_t i = 0; i < n; i++) sc->ord[start[kq[i]]++] = (int32_t)i;
    } else {
        int64_t ow_n = j->win->out[2], oh_n = j->win->out[1], r = t0 % j->osp, oh = r / ow_n, ow = r % ow_n;
        int nr = 0;
        for (int64_t i = 0; i < n;) {
            int64_t len = ow_n - ow < n - i ? ow_n - ow : n - i;
            for (int c = 0; c < sc->ncr; c++) {
                int64_t a = sc->cra[c] > ow ? sc->cra[c] : ow, b = sc->crb[c] < ow + len ? sc->crb[c] : ow + len;
                if (a >= b) continue;
                int8_t r = sc->rowcls[oh];
                rk[nr] = r ? sc->corner[r][sc->crc[c]] : sc->crc[c];
                ra[nr] = (int32_t)(i + a - ow), rl[nr] = (int32_t)(b - a), cnt[rk[nr]] += rl[nr], nr++;
            }
            i += len, ow = 0, oh = oh + 1 == oh_n ? 0 : oh + 1;
        }
        for (int c = 0; c < sc->ncls; c++) start[c] = pos, pos += cnt[c];
        for (int q = 0; q < nr; q++)
            for (int32_t x = 0; x < rl[q]; x++) sc->ord[start[rk[q]]++] = ra[q] + x;
    }
    sc->nb = 0, pos = 0;
    for (int c = 0; c < sc->ncls; c++) {
        int32_t nc = cnt[c], nblk = (nc + BC_NP - 1) / BC_NP;
        for (int32_t b = 0; b < nblk; b++) {
            /* as even as the class allows, save where nothing is left out:
             * there BC_NP a block as before, the last the rest */
            int32_t sz = c ? nc / nblk + (b < nc % nblk) : (nc - b * BC_NP < BC_NP ? nc - b * BC_NP : BC_NP);
            sc->at[sc->nb] = pos, sc->cls[sc->nb++] = (int8_t)c, pos += sz;
        }
    }
    sc->at[sc->nb] = pos;
}

/* each class's k ranges in the segment of channel blocks [cb0, cb1) (a
 * chunk, or its part before or after a checkpoint: bc_run), kept while the
 * next segment starts where this one did (the next tile's or row block's) */
static void bc_plan_chunk(const bcast_job *j, int64_t cb0, int64_t cb1, bc_sched *sc)
{
    if (sc->cb0 == cb0) return;
    sc->cb0 = cb0;
    for (int c = 1; c < sc->ncls; c++) {
        int n = 0;
        int64_t kt = 0;
        for (int64_t cb = cb0; cb < cb1; cb++) {
            int64_t c0 = cb * BF__CONV_CBLOCK, width = j->cg - c0 < BF__CONV_CBLOCK ? j->cg - c0 : BF__CONV_CBLOCK;
            int64_t base = c0 * j->ksp;
            for (int64_t t = 0; t < j->ksp;) {
                if (sc->mask[c] >> t & 1) {
                    t++;
                    continue;
                }
                int64_t ta = t;
                while (t < j->ksp && !(sc->mask[c] >> t & 1)) t++;
                int32_t a = (int32_t)(base + ta * width), b = (int32_t)(base + t * width);
                kt += b - a;
                if (n && sc->rg[c][2 * n - 1] == a) sc->rg[c][2 * n - 1] = b;
                else sc->rg[c][2 * n] = a, sc->rg[c][2 * n + 1] = b, n++;
            }
        }
        sc->nrg[c] = n, sc->kt[c] = kt;
    }
}

/* row blocks of 64, tiles of positions, chunks of K (whole blocks of 16
 * input channels, up to BC_KCHUNK k terms: bc_chunk), position blocks: a
 * tile's sums (tile x 64 floats) and a chunk's weights stay in L2 while
 * the chunk runs over the tile. Each block of 16 channels is packed with
 * its own k map, the chunk's blocks one after the other in wb, in k order
 * (bf__conv_krow orders k by channel block first). */
static void bc_run(const bcast_job *j, const float *wt, const float *wpk, int64_t m, int64_t npos, float *wb,
                          int8_t *rowcls, bc_sched *sc)
{
    int64_t ncb = (j->cg + BF__CONV_CBLOCK - 1) / BF__CONV_CBLOCK, chb = bc_chunk(j->ksp, j->avx2);
    bc_plan_call(j, chb, rowcls, sc);
    int64_t ntiles = (npos + BC_TILE - 1) / BC_TILE, tile = (npos + ntiles - 1) / ntiles;
    tile = (tile + BC_NP - 1) / BC_NP * BC_NP;
    for (int64_t r0 = 0; r0 < m; r0 += 64) {
        int nv = m - r0 >= 64 ? 4 : (int)((m - r0) / 16);
        for (int64_t t0 = 0; t0 < npos; t0 += tile) {
            int64_t t1 = t0 + tile < npos ? t0 + tile : npos;
            size_t tfl = (size_t)(t1 - t0) * 64;
            bc_plan_tile(j, t0, t1, sc);
            /* segments of K: a chunk, cut where a checkpoint falls inside
             * it; a resume starts at its checkpoint's block, the blocks
             * before it the golden ones, their sums the checkpoint's */
            int64_t kq = 0, ck = (r0 / 64) * j->rstride + t0 * 64, cb1;
            for (int64_t cb0 = j->load ? j->from / BF__CONV_CBLOCK : 0; cb0 < ncb; cb0 = cb1) {
                cb1 = (cb0 / chb + 1) * chb < ncb ? (cb0 / chb + 1) * chb : ncb;
                if (j->save && kq < j->nck && j->ckat[kq] / BF__CONV_CBLOCK < cb1) cb1 = j->ckat[kq] / BF__CONV_CBLOCK;
                if (j->load && cb0 * BF__CONV_CBLOCK == j->from && !j->sub) memcpy(j->acc, j->load + ck, sizeof(float) * tfl);
                for (int64_t q = t0; j->load && j->sub && cb0 * BF__CONV_CBLOCK == j->from && q < t1; q++) {
                    int64_t at = j->pout[q] / j->ipl * j->osp + j->pout[q] % j->ipl;   /* its row in the call's sums */
                    memcpy(j->acc + (q - t0) * 64, j->load + (r0 / 64) * j->rstride + at * 64, sizeof(float) * 64);
                }
                /* the row block's slices: all of it at once (AVX-512's
                 * blocks: one slice of 16 nv rows), or 16 rows at a time
                 * (AVX2's: nv slices one after the other over the tile's
                 * blocks, a slice's weights for the segment then in L1
                 * across the blocks); a slice's weights [k][sw] */
                int ns = j->avx2 ? nv : 1;
                int64_t sw = j->avx2 ? 16 : 16 * nv;
                /* the segment's k terms [p0, p1): its channels' (the last block may be narrower) */
                int64_t p0 = cb0 * BF__CONV_CBLOCK * j->ksp;
                int64_t p1 = (cb1 * BF__CONV_CBLOCK < j->cg ? cb1 * BF__CONV_CBLOCK : j->cg) * j->ksp, len = p1 - p0;
                for (int64_t cb = cb0; cb < cb1 && !wpk; cb++)
                    for (int v = 0; v < ns; v++)
                        bc_pack_block(j, wt + (r0 + v * sw) * j->kc, sw, cb,
                                      wb + v * sw * len + (cb - cb0) * BF__CONV_CBLOCK * j->ksp * sw);
                if (sc->ncls > 1) bc_plan_chunk(j, cb0, cb1, sc);
                for (int v = 0; v < ns; v++) {
                    /* the slice's weights, [k][sw] over all of K: the
                     * model's copy packed once, or this segment's just packed */
                    const float *wr = wpk ? wpk + (r0 + v * sw) * j->kc : wb + v * sw * len - p0 * sw;
                    float *acc = j->acc + v * sw;
                    /* the copy's next weights (the next chunk's, or the next
                     * slice's first: the copy is in this loop's order) into
                     * L2 while this segment runs, a line every 4 k terms of
                     * a block until a segment's worth is asked for;
                     * otherwise the prefetch touches this segment's own
                     * weights, in cache */
                    int64_t nx = (r0 + v * sw) * j->kc + p1 * sw, nend = nx + (p1 - p0) * sw;
                    if (nend > m * j->kc) nend = m * j->kc;
                    BC_ASAN(j, (int)(sw / 16), t0, t1, wr, p0, p1, acc);
                    for (int b = 0; b < sc->nb; b++) {
                        int np = sc->at[b + 1] - sc->at[b], c = sc->cls[b];
                        const int32_t *rows = sc->ord + sc->at[b];
                        int64_t kt = sc->mask[c] ? sc->kt[c] : p1 - p0;
                        const char *pf = (const char *)(wpk && nx + kt * 4 <= nend ? wpk + nx : wr + p0 * sw);
                        if (sc->mask[c] && j->avx2)
                            bf__bc8_dispatchm(j, np, wr, pf, rows, t0, sc->rg[c], sc->nrg[c], acc, cb0 == 0);
                        else if (sc->mask[c])
                            bc_dispatchm(j, nv, np, wr, pf, rows, t0, sc->rg[c], sc->nrg[c], acc, cb0 == 0);
                        else if (j->avx2)
                            bf__bc8_dispatch(j, np, wr, pf, rows, t0, p0, p1, acc, cb0 == 0);
                        else
                            bc_dispatch(j, nv, np, wr, pf, rows, t0, p0, p1, acc, cb0 == 0);
                        nx += kt * 4;
                    }
                }
                /* the sums at a checkpoint, as they go to the next segment */
                if (j->save && kq < j->nck && j->ckat[kq] / BF__CONV_CBLOCK == cb1)
                    memcpy(j->save + kq++ * j->slab + ck, j->acc, sizeof(float) * tfl);
                if (cb1 == ncb && j->avx2) bf__bc8_epi(j, r0, nv, t0, t1);
                else if (cb1 == ncb) bc_epi(j, r0, nv, t0, t1);
            }
        }
    }
}
#endif

int bf__conv_bcast_ok(const bf__conv_params *cp)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const bf__window *w = &cp->w;
    int s2 = !bf__conv_padded_ok(w) && bf__conv_strided_ok(w);
    if (cp->simd < BF_SGEMM_AVX2 || cp->nb != 1 || cp->kc <= 0 || cp->mg % 16 || cp->ksp > BC_MAXKSP ||
        (!bf__conv_padded_ok(w) && !s2))
        return 0;
    /* offsets and output indices as int32 */
    int64_t imgs = bf__conv_bcast_images(cp);
    if ((double)imgs * (double)cp->cg * (double)bf__conv_padded_plane(w) >= (double)INT32_MAX ||
        (double)imgs * (double)cp->m * (double)cp->osp >= (double)INT32_MAX / 2)
        return 0;
    return 1;
#else
    (void)cp;
    return 0;
#endif
}

/* The shapes where it beat the other paths (bench/conv_bcast.c, docs/
 * BENCHMARKS.md, "Output channels in the lanes"): stride 2 (resnet18's
 * three 3x3/2: 1.06-1.36x), and stride 1 on padded rows 64 floats wide or
 * narrower (layer4's 7x7 maps 1.26-1.49x, layer3's 14x14 1.07-1.10x,
 * layer2's 28x28 1.01-1.09x; layer1's 56x56, 58 floats, 1.04-1.10x on the
 * Zen 5 host of h21-eval, 0.82-0.89x on the Intel one before the longer
 * chunks and transposed epilogue), where the direct kernel's position
 * vectors hold padding lanes or its blocks span few rows; with at least 16
 * input channels and K of 576 or more, since the epilogue's scatter of each
 * output costs the same whatever K (the 1x1 stride-2 downsamples, K
 * 64-256, 0.70-1.25x; the stems of 3 channels 0.60-0.77x). The same shapes
 * on AVX2 (a Zen 2, W packed once against sgemm.c's panels from the
 * planes; docs/perf/conv/h43.md): layer4 1.44x, layer4.0.conv1 1.30x,
 * layer3 1.15x, layer3.0.conv1 1.11x, layer2 1.05x, layer1 and
 * layer2.0.conv1 1.02-1.03x; the downsamples 0.60-0.66x and resnet18's
 * stem 0.82x (W packed a call). */
int bf__conv_bcast_want(const bf__conv_params *cp)
{
    const bf__window *w = &cp->w;
    if (!bf__conv_bcast_ok(cp) || cp->cg < 16 || cp->kc < 576) return 0;
    return !bf__conv_padded_ok(w) || w->in[2] + w->pb[2] + w->pe[2] <= 64;
}

/* Images a call: enough for about BC_POS positions, so that each chunk of
 * weights packed serves that many (resnet18's layer4: 8 images of 49) */
#define BC_POS 384
int64_t bf__conv_bcast_images(const bf__conv_params *cp)
{
    if (cp->osp <= 0 || cp->osp >= BC_POS) return 1;
    int64_t k = (BC_POS + cp->osp - 1) / cp->osp;
    return k < cp->n ? k : cp->n > 0 ? cp->n : 1;
}

/* acc (the positions rounded up to blocks, 64 floats each), a chunk's
 * weights, the offsets and the positions' tables */
static size_t acc_floats(int64_t npos)
{
    return (size_t)((npos < BC_TILE ? npos + BC_NP - 1 : BC_TILE) / BC_NP * BC_NP) * 64;
}

size_t bf__conv_bcast_floats(const bf__conv_params *cp)
{
    int64_t npos = bf__conv_bcast_images(cp) * cp->osp;
    return acc_floats(npos) + (size_t)(64 * BF__CONV_CBLOCK * cp->ksp * bc_chunk(cp->ksp, bc_avx2(cp))) + (((size_t)cp->kc + 15) & ~(size_t)15) +
           2 * (((size_t)npos + 15) & ~(size_t)15) + (((size_t)cp->w.out[1] + 63) & ~(size_t)63) / 4;
}

/* chunks of K a run takes, and the input channels of each but the last */
int64_t bf__conv_bcast_chunks(const bf__conv_params *cp, int64_t *channels)
{
    int64_t chb = bc_chunk(cp->ksp, bc_avx2(cp)), ncb = (cp->cg + BF__CONV_CBLOCK - 1) / BF__CONV_CBLOCK;
    if (channels) *channels = chb * BF__CONV_CBLOCK;
    return (ncb + chb - 1) / chb;
}

size_t bf__conv_psum_floats(const bf__conv_params *cp)
{
    return bf__conv_bcast_chunks(cp, NULL) > 1 ? (size_t)((cp->mg + 63) / 64) * (size_t)(cp->n * cp->osp) * 64 : 0;
}

/* The whole of W in bc_run's layout: per group, per row block of 64
 * rows (16 nv for a last narrower one), [k][16 nv] over all of K in
 * bf__conv_krow's order, which is what bc_run packs a chunk at a time,
 * by the same bc_pack: so m x kc floats, the same floats moved. */
size_t bf__conv_bcast_pack_floats(const bf__conv_params *cp)
{
    return cp->bcast ? (size_t)(cp->m * cp->kc) : 0;
}

int bf__conv_bcast_pack(const bf__conv_params *cp, const float *wt, float *out)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (!cp->bcast || cp->simd < BF_SGEMM_AVX2) return 0;
    /* a W with an Inf or NaN is not packed once: its calls pack it per chunk
     * and compute every padding tap (bc_sched: 0 * Inf is NaN) */
    for (int64_t e = 0; e < cp->m * cp->kc; e++) {
        uint32_t u;
        memcpy(&u, &wt[e], sizeof u);
        if ((u & 0x7f800000u) == 0x7f800000u) return 0;
    }
    bcast_job j = {.kc = cp->kc, .ksp = cp->ksp, .cg = cp->cg, .avx2 = bc_avx2(cp)};
    int64_t ncb = (cp->cg + BF__CONV_CBLOCK - 1) / BF__CONV_CBLOCK, rb = j.avx2 ? 16 : 64;
    for (int64_t g = 0; g < cp->group; g++)
        for (int64_t r0 = 0; r0 < cp->mg; r0 += rb) {
            int64_t nr = cp->mg - r0 >= rb ? rb : cp->mg - r0, at = (g * cp->mg + r0) * cp->kc;
            for (int64_t cb = 0; cb < ncb; cb++)
                bc_pack_block(&j, wt + at, nr, cb, out + at + cb * BF__CONV_CBLOCK * cp->ksp * nr);
        }
    return 1;
#else
    (void)cp, (void)wt, (void)out;
    return 0;
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
static int bc_any_pad(const bf__window *w)
{
    return w->pb[1] || w->pe[1] || w->pb[2] || w->pe[2];
}

/* checkpoints at[0 .. n) where bc_run can take them: whole 16-channel
 * blocks, increasing, inside K (else the sums are neither saved nor
 * loaded, `used` stays 0 and the caller runs the Conv whole) */
static int bc_ckat_ok(const int64_t *at, int64_t n, int64_t cg)
{
    if (!at || n < 1) return 0;
    for (int64_t k = 0; k < n; k++)
        if (at[k] <= (k ? at[k - 1] : 0) || at[k] >= cg || at[k] % BF__CONV_CBLOCK) return 0;
    return 1;
}

/* a bias of -0 somewhere in b[0 .. n): bc_sched says why that keeps every tap */
static int bc_neg_zero(const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &b[i], sizeof u);
        if (u == 0x80000000u) return 1;
    }
    return 0;
}
#endif

void bf__conv_bcast(const bf__conv_params *cp, const float *wt, const float *wpk, int64_t ni, const float *xp,
                    float *buf, const float *bias, const bf__act *act, float *y, bf__psum *ps, int64_t img0,
                    const int32_t *sel, int64_t nsel)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const bf__window *w = &cp->w;
    int64_t wpd = w->in[2] + w->pb[2] + w->pe[2], plane = bf__conv_padded_plane(w), npos = sel ? nsel : ni * cp->osp;
    float *acc = buf, *wb = acc + acc_floats(bf__conv_bcast_images(cp) * cp->osp);
    int32_t *off = (int32_t *)(wb + 64 * BF__CONV_CBLOCK * cp->ksp * bc_chunk(cp->ksp, bc_avx2(cp)));
    int32_t *pin = off + (((size_t)cp->kc + 15) & ~(size_t)15);
    int32_t *pout = pin + (((size_t)bf__conv_bcast_images(cp) * cp->osp + 15) & ~(size_t)15);
    int8_t *rowcls = (int8_t *)(pout + (((size_t)bf__conv_bcast_images(cp) * cp->osp + 15) & ~(size_t)15));
    for (int64_t c = 0; c < cp->cg; c++)
        for (int64_t tap = 0; tap < cp->ksp; tap++)
            off[bf__conv_krow(cp, c, tap)] =
                (int32_t)(c * plane + tap / w->k[2] * w->d[1] * wpd + tap % w->k[2] * w->d[2]);
    for (int64_t i = 0, q = 0; i < ni && !sel; i++)
        for (int64_t oh = 0; oh < w->out[1]; oh++)
            for (int64_t ow = 0; ow < w->out[2]; ow++, q++) {
                pin[q] = (int32_t)(i * cp->cg * plane + oh * w->s[1] * wpd + ow * w->s[2]);
                pout[q] = (int32_t)(i * cp->m * cp->osp + oh * w->out[2] + ow);
            }
    /* the listed positions (bf__cpos: the whole step's, ascending), in the
     * call's images: the same tables for those alone */
    for (int64_t q = 0; sel && q < nsel; q++) {
        int64_t at = sel[q] - img0 * cp->osp, i = at / cp->osp, oh = at % cp->osp / w->out[2], ow = at % w->out[2];
        pin[q] = (int32_t)(i * cp->cg * plane + oh * w->s[1] * wpd + ow * w->s[2]);
        pout[q] = (int32_t)(i * cp->m * cp->osp + oh * w->out[2] + ow);
    }
    bcast_job j = {xp, bias, act, y, acc, off, pin, pout, cp->kc, cp->ksp, cp->cg, cp->osp, NULL, NULL, 0, NULL, 0, 0, 0,
                   wpk && bc_any_pad(w) && !bc_neg_zero(bias, cp->mg), w, bc_avx2(cp), plane, 0, 0, sel != NULL, cp->m * cp->osp};
    j.lastk = (cp->cg - 1) / BF__CONV_CBLOCK * BF__CONV_CBLOCK * cp->ksp;
    j.lastw = cp->cg - (cp->cg - 1) / BF__CONV_CBLOCK * BF__CONV_CBLOCK;
    /* (a list of positions only ever resumes: the golden pass saves every position's sums) */
    if (ps && (ps->save ? !sel && bc_ckat_ok(ps->at, ps->n, cp->cg)
                        : ps->load && ps->lk >= 0 && bc_ckat_ok(&ps->from, 1, cp->cg))) {
        int64_t at = img0 * cp->osp * 64;
        j.rstride = cp->n * cp->osp * 64;
        j.slab = (cp->mg + 63) / 64 * j.rstride;
        if (ps->save) j.save = ps->save + at, j.ckat = ps->at, j.nck = ps->n;
        else j.load = ps->load + ps->lk * j.slab + at, j.from = ps->from;
        ps->used = 1;
    }
    bc_sched sc;
    bc_run(&j, wt, wpk, cp->mg, npos, wb, rowcls, &sc);
#else
    (void)cp, (void)wt, (void)wpk, (void)ni, (void)xp, (void)buf, (void)bias, (void)act, (void)y, (void)ps, (void)img0;
    (void)sel, (void)nsel;
#endif
}
