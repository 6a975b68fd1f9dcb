/* A stride-1 2-D Conv straight off its zero-padded planes on AVX-512, no
 * panel packed (docs/ENGINE.md, "The convolution path"; measured in
 * docs/BENCHMARKS.md, "A direct 3x3 kernel off the padded planes").
 *
 * Output positions are counted in the padded plane's own coordinates,
 * q = oh * wp + ow with ow < wp (the padded row's width), so tap (kh, kw)
 * of input channel c for 16 consecutive q is 16 consecutive floats of the
 * padded planes, at q + c * plane + kh * wp + kw: one unaligned load, no
 * gather. The lanes whose ow falls in the last KW - 1 columns are no
 * outputs: they are computed (on the planes' zeros and their neighbours)
 * and dropped, a compress putting the others side by side before the
 * store, where they are consecutive outputs of y.
 *
 * A block is MR output channels x NV vectors of 16 positions, each weight
 * broadcast once per k for the block's NV vectors, as sgemm.c's block512
 * does; k runs over the column matrix's rows in their order
 * (bf__conv_krow: channel blocks of 16, tap-major inside), each sum
 * starting from +0, one fused multiply-add per k, then (1 * s) + bias, the
 * residual Add in the Add's operand order, Relu's or Clip's comparisons:
 * block512's operations on the same floats in the same order, so every
 * output is the bits bf__conv_packed's panels give it (the tap in the
 * padding is fma(w, +0, s) in both). K is cut at each block of 16 input
 * channels: a block of rows runs one such chunk over every position before
 * the next, its weights (MR x 16 x taps floats) staying in L1, and the sums
 * go to `acc` between chunks and come back: a float stored and loaded is
 * the same float, so each output is still one chain over K in order. */
#include <stdint.h>
#include <string.h>

#include "linalg_window.h"
#include "sgemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))

typedef struct planes_job {
    const float *a;          /* reordered weights, rows of lda */
    const float *xp;         /* the image's padded planes */
    const float *bias;
    const bf__act *act;      /* NULL: none; act->res laid out as y */
    float *y, *acc;
    const int32_t *off;      /* off[p]: k term p's offset in the planes (c * plane + kh * wp + kw) */
    int64_t lda, plane, wp, kh_n, kw_n, cg, q_n, ow_n, osp, lacc;
} planes_job;

/* x86's first source is the one returned when both are NaN: the Add's A
 * keeps its payload (sgemm.c's add_first16) */
AVX512 static inline __attribute__((always_inline)) __m512 add_first(__m512 a, __m512 b)
{
    __m512 o;
    __asm__("vaddps %2, %1, %0" : "=v"(o) : "v"(a), "v"(b));
    return o;
}

/* the lanes of positions q0 .. q0 + 16 that are outputs, and the output
 * index of the first of them */
static inline unsigned lanes_of(const planes_job *j, int64_t q0, int64_t *first)
{
    unsigned m = 0;
    *first = 0;
    int64_t oh = q0 / j->wp, ow = q0 % j->wp;
    for (int l = 0; l < 16; l++, ow++) {
        if (ow == j->wp) ow = 0, oh++;
        if (oh * j->wp + ow >= j->q_n || ow >= j->ow_n) continue;
        if (!m) *first = oh * j->ow_n + ow;
        m |= 1u << l;
    }
    return m;
}

/* rows i0 .. i0 + mr, positions q0 .. q0 + 16 NV, k terms of channel block
 * cb; first: the sums start at +0, last: the epilogue into y (else into
 * acc) */
#define PLANES_BLOCK(NAME, MRMAX, NV)                                                                                  \
    AVX512 static inline __attribute__((always_inline)) void NAME(int mr, const planes_job *j, int64_t i0, int64_t q0,  \
                                                                  int64_t cb, int first, int last)                    \
    {                                                                                                                  \
        __m512 s[MRMAX][NV];                                                                                           \
        float *acc = j->acc + i0 * j->lacc + q0;                                                                       \
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++)                                                          \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) s[i][v] =                                             \
            first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i * j->lacc + 16 * v);                                 \
        /* the k terms of channel block cb: [p0, p1) */                                                               \
        int64_t ksp = j->kh_n * j->kw_n, p0 = cb * 16 * ksp, p1 = p0 + ksp * (j->cg - cb * 16 < 16 ? j->cg - cb * 16 : 16); \
        /* the rows of A as four bases three rows apart, as block512 holds them */                                     \
        const char *ab[4];                                                                                             \
        const int64_t ldab = j->lda * (int64_t)sizeof(float);                                                          \
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) ab[q] = (const char *)(j->a + (i0 + 3 * q) * j->lda);     \
        const float *xq = j->xp + q0;                                                                                  \
        _Pragma("GCC unroll 2") for (int64_t p = p0; p < p1; p++) {                                                    \
            const float *b = xq + j->off[p];                                                                           \
            __m512 bv[NV];                                                                                             \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(b + 16 * v);                 \
            _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) {                                                    \
                __m512 av = _mm512_set1_ps(*(const float *)(ab[i / 3] + (i % 3) * ldab + p * 4));                      \
                _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) s[i][v] = _mm512_fmadd_ps(av, bv[v], s[i][v]);     \
            }                                                                                                          \
        }                                                                                                              \
        if (!last) {                                                                                                   \
            _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++)                                                      \
                _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) _mm512_storeu_ps(acc + i * j->lacc + 16 * v, s[i][v]); \
            return;                                                                                                    \
        }                                                                                                              \
        unsigned vm[NV];                                                                                               \
        int64_t o0[NV];                                                                                                \
        for (int v = 0; v < NV; v++) vm[v] = lanes_of(j, q0 + 16 * v, &o0[v]);                                         \
        const bf__act *act = j->act;                                                                                   \
        const __m512 one = _mm512_set1_ps(1.0f);                                                                       \
        const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);             \
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++)                                                          \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) {                                                     \
                if (!vm[v]) continue;                                                                                  \
                __mmask16 keep = (__mmask16)((1u << __builtin_popcount(vm[v])) - 1u);                                  \
                int64_t at = (i0 + i) * j->osp + o0[v];                                                                \
                /* block512's epilogue on the outputs' lanes, side by side (a                                          \
                 * vector of 16 outputs needs no compress) */                                                          \
                __m512 t = vm[v] == 0xffffu ? s[i][v] : _mm512_maskz_compress_ps((__mmask16)vm[v], s[i][v]);           \
                t = _mm512_add_ps(_mm512_mul_ps(one, t), _mm512_set1_ps(j->bias[i0 + i]));                             \
                if (act && act->res) {                                                                                 \
                    __m512 r = _mm512_maskz_loadu_ps(keep, act->res + at);                                             \
                    t = act->res_a ? add_first(r, t) : add_first(t, r);                                                \
                }                                                                                                      \
                if (act) t = _mm512_min_ps(hi, _mm512_max_ps(lo, t));                                                  \
                _mm512_mask_storeu_ps(j->y + at, keep, t);                                                             \
            }                                                                                                          \
    }

PLANES_BLOCK(block_12x2, 12, 2)
PLANES_BLOCK(block_8x3, 8, 3)

/* every row block, channel block and run of positions; mr constant where
 * it is the block's size or one less (near-equal blocks, as rows_avx512
 * cuts them) */
#define PLANES_RUN(NAME, BLOCK, MRMAX, NV)                                                                             \
    AVX512 static void NAME(const planes_job *j, int64_t m)                                                            \
    {                                                                                                                  \
        int64_t nblk = (m + MRMAX - 1) / MRMAX, base = m / nblk, extra = m % nblk, ncb = (j->cg + 15) / 16;            \
        for (int64_t b = 0, i0 = 0; b < nblk; b++) {                                                                   \
            int mr = (int)(base + (b < extra));                                                                        \
            for (int64_t cb = 0; cb < ncb; cb++)                                                                       \
                for (int64_t q0 = 0; q0 < j->q_n; q0 += 16 * NV) {                                                     \
                    int first = cb == 0, last = cb == ncb - 1;                                                         \
                    if (mr == MRMAX) BLOCK(MRMAX, j, i0, q0, cb, first, last);                                         \
                    else if (mr == MRMAX - 1) BLOCK(MRMAX - 1, j, i0, q0, cb, first, last);                            \
                    else BLOCK(mr, j, i0, q0, cb, first, last);                                                        \
                }                                                                                                      \
            i0 += mr;                                                                                                  \
        }                                                                                                              \
    }

PLANES_RUN(run_12x2, block_12x2, 12, 2)
PLANES_RUN(run_8x3, block_8x3, 8, 3)

/* 8 x 3 vectors where the padded rows are wide (resnet18's layer1, 58
 * floats), 12 x 2 below: measured per shape (bench/conv_direct.c) */
static int wide_rows(const bf__window *w) { return w->in[2] + w->pb[2] + w->pe[2] >= 48; }
#endif

int bf__conv_planes_ok(const bf__conv_params *cp)
{
#if defined(__x86_64__) && defined(__GNUC__)
    return cp->simd >= BF_SGEMM_AVX512 && cp->nb == 1 && bf__conv_padded_ok(&cp->w) &&
           bf__conv_packed_images(cp) == 1 && cp->kc > 0 && bf__conv_planes_floats(cp) < (size_t)INT32_MAX;
#else
    (void)cp;
    return 0;
#endif
}

/* acc's row: the positions rounded up to whole blocks of either kind (32
 * and 48 positions) */
static int64_t acc_row(int64_t q) { return (q + 95) / 96 * 96; }

/* floats read past the planes, in dropped lanes: a block's last vector
 * ends at most 16 NV + KW - 3 floats past the last plane */
static size_t slack(const bf__window *w) { return (size_t)(64 + w->k[2]) & ~(size_t)15; }

size_t bf__conv_planes_floats(const bf__conv_params *cp)
{
    const bf__window *w = &cp->w;
    int64_t wp = w->in[2] + w->pb[2] + w->pe[2], q = w->out[1] * wp;
    size_t planes = ((size_t)(cp->cg * bf__conv_padded_plane(w)) + 15) & ~(size_t)15;
    return planes + slack(w) + (((size_t)cp->mg + 31) & ~(size_t)15) + (size_t)(cp->mg * acc_row(q)) +
           (((size_t)cp->kc + 15) & ~(size_t)15);
}

float *bf__conv_planes_zeros(const bf__conv_params *cp, float *buf)
{
    size_t planes = ((size_t)(cp->cg * bf__conv_padded_plane(&cp->w)) + 15) & ~(size_t)15;
    memset(buf + planes, 0, sizeof(float) * slack(&cp->w));
    return buf + planes + slack(&cp->w);
}

void bf__conv_planes(const bf__conv_params *cp, const float *a, int64_t m, float *buf, const float *bias,
                     const bf__act *act, float *y)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const bf__window *w = &cp->w;
    int64_t wp = w->in[2] + w->pb[2] + w->pe[2], q = w->out[1] * wp;
    /* past the planes: the slack (zeros), the bias of zeros, then acc */
    size_t planes = ((size_t)(cp->cg * bf__conv_padded_plane(w)) + 15) & ~(size_t)15;
    float *acc = buf + planes + slack(w) + (((size_t)cp->mg + 31) & ~(size_t)15);
    int32_t *off = (int32_t *)(acc + cp->mg * acc_row(q));
    int64_t plane = bf__conv_padded_plane(w);
    for (int64_t c = 0; c < cp->cg; c++)
        for (int64_t tap = 0; tap < cp->ksp; tap++)
            off[bf__conv_krow(cp, c, tap)] = (int32_t)(c * plane + tap / w->k[2] * wp + tap % w->k[2]);
    planes_job j = {a, buf, bias, act, y, acc, off, cp->kc, plane, wp, w->k[1], w->k[2], cp->cg, q,
                    w->out[2], cp->osp, acc_row(q)};
    if (wide_rows(w)) run_8x3(&j, m);
    else run_12x2(&j, m);
#else
    (void)cp, (void)a, (void)m, (void)buf, (void)bias, (void)act, (void)y;
#endif
}
