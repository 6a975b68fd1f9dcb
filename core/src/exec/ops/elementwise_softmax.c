/* Softmax (moved from elementwise.c, whose table registers it): the rows'
 * kernels in their plain, AVX2 and AVX-512 copies, the strided-axis form,
 * and the row pass a MatMul runs on its own output (plan_fuse.c). Each row's
 * bits are the plain body's, whatever copy or grouping computes it
 * (tests/unit/test_fastmath_avx2.c). */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "exec/op.h"
#include "elementwise_impl.h"
#include "fastmath_impl.h"
#include "exec/step_access.h"

/* ---- Softmax ----------------------------------------------------------- */

/* Opset < 13 flattens the input to 2-D at `axis` (default 1) and normalises
 * each row of the trailing product; opset 13+ normalises along the one axis
 * (default -1). Both become [outer, n, inner] with the sum over n.
 *
 * Subtracting the max keeps exp in range. IEEE does the rest as PyTorch's
 * does: a NaN anywhere, or +Inf (Inf - Inf = NaN), makes the whole row NaN,
 * and so does a row of -Inf. */
typedef struct softmax_params {
    int64_t outer, n, inner;
} softmax_params;
static_assert(sizeof(softmax_params) <= BF__OP_PARAMS_MAX, "Softmax params too large");

bf_status bf__softmax_layout(bf__prep *p, int64_t *outer, int64_t *n, int64_t *inner, bf_error *err)
{
    bf_status st = bf__want_f32(p, 0, "'input'", err);
    if (st != BF_OK) return st;
    const bf_tensor *x = p->in[0];
    int legacy = p->opset < 13, axis;
    int64_t a;
    st = bf__attr_int(p->node, "axis", legacy ? 1 : -1, &a, err);
    if (st == BF_OK) st = bf__norm_axis(p->node, a, x->ndim, &axis, err);
    if (st != BF_OK) return st;
    *outer = *n = *inner = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i < axis) *outer *= x->dims[i];
        else if (i == axis || legacy) *n *= x->dims[i];
        else *inner *= x->dims[i];
    }
    bf__set_shape(p->out[0], BF_F32, x->ndim, x->dims);
    return BF_OK;
}

bf_status bf__softmax_prepare(bf__prep *p, bf_error *err)
{
    softmax_params *q = (softmax_params *)p->params;
    bf_status st = bf__softmax_layout(p, &q->outer, &q->n, &q->inner, err);
    if (st != BF_OK) return st;
    /* column sums (double) then maxima (float) for a strided axis */
    p->scratch = q->inner > 1 ? (size_t)q->inner * (sizeof(float) + sizeof(double)) : 0;
    return BF_OK;
}

/* exp(x - m), its sum and the scaling, in the plain, AVX2 and AVX-512
 * copies of one loop (fastmath_impl.h: the same bits); the vector levels
 * run it for rows under 8 or 16 and rows with a NaN, their own kernels
 * below (exp8, exp16) the rest, with its bits. The sum is
 * bf__sum_f32_dacc's, operation for operation: eight double lanes, lane j
 * adding y[i + j] for i = 0, 8, 16, ... in order, the last n % 8 values
 * into t one by one, then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
 * + t. It runs in the exp's pass, 16 values at a time while they are in
 * registers, and the row's last n % 16 go through a 16-float copy padded
 * with m (its extra lanes computed, never stored nor summed), so every
 * value takes the vector loop: on a ViT's 197-wide rows the exp's scalar
 * tail, the separate sum's pass (compiled for SSE2) and the 8-lane max
 * were half of Softmax's time (docs/perf/vit.md, h15-vit). */
typedef double softmax_d8 __attribute__((vector_size(64)));   /* the eight double lanes */
typedef float softmax_f8 __attribute__((vector_size(32)));

/* e's first eight values added to the lanes: a vector of GCC's own, which
 * each copy lowers to its width (SSE2: 4 x 2 doubles, AVX2: 2 x 4, AVX-512:
 * one register), where the compiler left a double array's lanes scalar */
BF__ALWAYS_INLINE void softmax_dadd8(softmax_d8 *s, const float *e)
{
    softmax_f8 v;
    memcpy(&v, e, sizeof v);
    *s += __builtin_convertvector(v, softmax_d8);
}

BF__ALWAYS_INLINE void softmax_row_body(float *y, const float *x, int64_t n, int simd)
{
    if (n == 0) return;
    float m = bf__max_f32_at(x, n, x[0], simd), e[16];
    softmax_d8 s = {0};
    double t = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 16; j++) e[j] = exp_f32(x[i + j] - m);
        memcpy(y + i, e, sizeof e);
        softmax_dadd8(&s, e);
        softmax_dadd8(&s, e + 8);
    }
    int64_t r = n - i;
    if (r > 0) {
        float xt[16];
        for (int j = 0; j < 16; j++) xt[j] = j < r ? x[i + j] : m;
        for (int j = 0; j < 16; j++) e[j] = exp_f32(xt[j] - m);
        memcpy(y + i, e, sizeof(float) * (size_t)r);
        int64_t h = 0;
        if (r >= 8) softmax_dadd8(&s, e), h = 8;
        for (int64_t j = h; j < r; j++) t += e[j];
    }
    float rc = (float)(1.0 / (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t));
    for (int64_t j = 0; j < n; j++) y[j] *= rc;
}
static void softmax_row_plain(float *y, const float *x, int64_t n) { softmax_row_body(y, x, n, 0); }
#ifdef BF__HAVE_AVX2_COPY
BF__AVX2 static void softmax_row_body_avx2(float *y, const float *x, int64_t n) { softmax_row_body(y, x, n, 1); }
/* exp_f32's operations on cnt vectors of P's lanes (P: _mm256 or _mm512; V
 * and VI its float and integer vectors, SI its cast's suffix), each step
 * for all of them before the next: exp8_n's and exp16_n's one body, their
 * operations one for one in exp_f32's order (no contraction: separate
 * multiplies and adds), so each lane has its bits; the halving of n rounds
 * toward zero as C's division does.
 * The scale: p * 2^n1 * 2^n2 with n1 + n2 = n: p (in [0.7, 1.42]) times
 * 2^n1 (n1 in -75 .. 64: normal) is exact, so the product rounds once, at
 * the second multiply, the exact p * 2^n. Where 2^n is a normal float (n in
 * -126 .. 127 in every lane, NORMAL(nb - 1, 253): nb - 1 <= 253 as unsigned;
 * a softmax's x - max above -87.3) one multiply by it rounds that same
 * value once: the same bits, 5 of the 35 instructions fewer. A NaN lane
 * (n garbage) gives p's NaN either way. */
#define EXP_EACH _Pragma("GCC unroll 4") for (int j = 0; j < cnt; j++)
#define EXP_N_BODY(P, V, VI, SI, MAXN, NORMAL)                                                                        \
    const V lo = P##_set1_ps(-104.0f), hi = P##_set1_ps(89.0f), big = P##_set1_ps(12582912.0f);                       \
    V x[MAXN], t[MAXN], n[MAXN], r[MAXN], p[MAXN];                                                                    \
    VI ni[MAXN];                                                                                                      \
    /* clamp_f32's selects as one instruction each: vmaxps/vminps return the second operand unless the                \
     * comparison holds, so lo > x ? lo : x and hi < x ? hi : x, a NaN kept, as x < lo and x > hi select */           \
    EXP_EACH x[j] = P##_min_ps(hi, P##_max_ps(lo, xv[j]));                                                            \
    EXP_EACH t[j] = P##_add_ps(P##_mul_ps(x[j], P##_set1_ps(1.44269504088896341f)), big);                             \
    EXP_EACH n[j] = P##_sub_ps(t[j], big);                                                                            \
    EXP_EACH ni[j] = P##_sub_epi32(P##_castps_##SI(t[j]), P##_set1_epi32(0x4B400000));                                \
    EXP_EACH r[j] = P##_sub_ps(x[j], P##_mul_ps(n[j], P##_set1_ps(0.693359375f)));                                    \
    EXP_EACH r[j] = P##_sub_ps(r[j], P##_mul_ps(n[j], P##_set1_ps(-2.12194440e-4f)));                                 \
    EXP_EACH p[j] = P##_add_ps(P##_mul_ps(P##_set1_ps(1.9875691500e-4f), r[j]), P##_set1_ps(1.3981999507e-3f));       \
    EXP_EACH p[j] = P##_add_ps(P##_mul_ps(p[j], r[j]), P##_set1_ps(8.3334519073e-3f));                                \
    EXP_EACH p[j] = P##_add_ps(P##_mul_ps(p[j], r[j]), P##_set1_ps(4.1665795894e-2f));                                \
    EXP_EACH p[j] = P##_add_ps(P##_mul_ps(p[j], r[j]), P##_set1_ps(1.6666665459e-1f));                                \
    EXP_EACH p[j] = P##_add_ps(P##_mul_ps(p[j], r[j]), P##_set1_ps(5.0000001201e-1f));                                \
    EXP_EACH p[j] = P##_add_ps(P##_add_ps(P##_mul_ps(p[j], P##_mul_ps(r[j], r[j])), r[j]), P##_set1_ps(1.0f));        \
    const VI bias = P##_set1_epi32(127), top = P##_set1_epi32(253);                                                   \
    EXP_EACH {                                                                                                        \
        VI nb = P##_add_epi32(ni[j], bias);                                                                           \
        if (NORMAL(P##_sub_epi32(nb, P##_set1_epi32(1)), top)) {                                                      \
            xv[j] = P##_mul_ps(p[j], P##_cast##SI##_ps(P##_slli_epi32(nb, 23)));                                      \
            continue;                                                                                                 \
        }                                                                                                             \
        VI n1 = P##_srai_epi32(P##_add_epi32(ni[j], P##_srli_epi32(ni[j], 31)), 1);                                   \
        VI n2 = P##_sub_epi32(ni[j], n1);                                                                             \
        V s1 = P##_cast##SI##_ps(P##_slli_epi32(P##_add_epi32(n1, bias), 23));                                        \
        V s2 = P##_cast##SI##_ps(P##_slli_epi32(P##_add_epi32(n2, bias), 23));                                        \
        xv[j] = P##_mul_ps(P##_mul_ps(p[j], s1), s2);                                                                 \
    }
/* exp_f32 (fastmath_impl.h) in 8 lanes, on cnt vectors at once: EXP_N_BODY's
 * operations in AVX2 (no fused multiply-add: BF__AVX2 enables
 * none), the same one-multiply scale where 2^n is a normal float in every
 * lane, so each lane has exp_f32's bits. AVX2 has no unsigned compare:
 * nb - 1 <= 253 as unsigned is max_epu32(nb - 1, 253) == 253.
 * Each step runs for every vector before the next (cnt a constant where
 * inlined): one vector's steps are a chain of ~20 dependent operations,
 * and with two rows' vectors one after the other the FP scheduler filled
 * with the waiting ones; four vectors interleaved took the Softmax of
 * ViT-S/16's attention rows (197) from 1.17 to 0.96 ns an element on a
 * Zen 2 core, and six were within 2% of four (docs/perf/vit.md, h47-sm). */
#define EXP8_MAX 4
#define EXP8_NORMAL(v, top) \
    (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_max_epu32(v, top), top))) == 0xFF)
BF__AVX2 BF__ALWAYS_INLINE void exp8_n(__m256 *xv, const int cnt)
{
    EXP_N_BODY(_mm256, __m256, __m256i, si256, EXP8_MAX, EXP8_NORMAL)
}

BF__AVX2 static inline __m256 exp8(__m256 x)
{
    exp8_n(&x, 1);
    return x;
}

/* The lanes of the last partial 8 of a row of n (n % 8 of them; all 8 when
 * n is a multiple of 8) */
BF__AVX2 static inline __m256i tail8(int64_t n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int r = (int)(n % 8);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(r ? r : 8), idx);
}

/* Up to SOFTMAX_GROUP8 rows of n >= 8 (nr of them, nr >= 1) with their
 * instructions interleaved, each with the body's bits: the max of 8 lanes
 * (no NaN: one value whatever the order; a NaN anywhere sends every row of
 * the call to the body, which keeps it), exp8 of x - m 8 values at a time,
 * the last n % 8 loaded masked with m in the other lanes (exp(0), never
 * stored), the double sum lane for lane as bf__sum_f32_dacc adds it (lanes
 * 0-3 and 4-7 two vectors of 4 doubles, the full 8s in order, the last
 * n % 8 into t one by one, then the tree), and y * (float)(1 / sum).
 * The sum is a pass of its own over y (in L1), as softmax_row_avx512's:
 * summed in the exp's pass, each row's two double vectors spilled to the
 * stack beside exp8's constants (16 ymm registers). Measured on a Zen 2
 * (rows of 197, ViT-S/16's attention at batch 4; docs/perf/vit.md,
 * h45-sm8): the body's AVX2 copy about 2.4 ns an element in the pass; this
 * with the sum in the exp's pass, four rows, 1.42; a pass of its own, four
 * rows, 1.21; two rows 1.18-1.22, three 1.20 (rows of 91 and 64 alike). */
#define SOFTMAX_GROUP8 2
static_assert(2 * SOFTMAX_GROUP8 <= EXP8_MAX, "the exp loop takes two vectors of each row at once");
BF__AVX2 BF__ALWAYS_INLINE void softmax_rows8_body(float *y, const float *x, int64_t n, const int nr)
{
    const float *xr[SOFTMAX_GROUP8];
    float *yr[SOFTMAX_GROUP8];
    __m256 mv[SOFTMAX_GROUP8], nanv = _mm256_setzero_ps();
    const __m256i kt = tail8(n);
    const int64_t full = n & ~(int64_t)7;
    for (int r = 0; r < nr; r++) {
        xr[r] = x + r * n, yr[r] = y + r * n;
        mv[r] = _mm256_loadu_ps(xr[r]);
        nanv = _mm256_or_ps(nanv, _mm256_cmp_ps(mv[r], mv[r], _CMP_UNORD_Q));
        for (int64_t i = 8; i < full; i += 8) {
            __m256 v = _mm256_loadu_ps(xr[r] + i);
            nanv = _mm256_or_ps(nanv, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            mv[r] = _mm256_max_ps(mv[r], v);
        }
        if (full < n) {   /* the tail's other lanes: the row's first 8 again (no new max) */
            __m256 v = _mm256_blendv_ps(mv[r], _mm256_maskload_ps(xr[r] + full, kt), _mm256_castsi256_ps(kt));
            nanv = _mm256_or_ps(nanv, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            mv[r] = _mm256_max_ps(mv[r], v);
        }
    }
    if (_mm256_movemask_ps(nanv)) {
        for (int r = 0; r < nr; r++) softmax_row_body_avx2(yr[r], xr[r], n);
        return;
    }
    __m256 vm[SOFTMAX_GROUP8];
    __m256d a0[SOFTMAX_GROUP8], a1[SOFTMAX_GROUP8];
    for (int r = 0; r < nr; r++) {
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(mv[r]), _mm256_extractf128_ps(mv[r], 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
        vm[r] = _mm256_set1_ps(_mm_cvtss_f32(h));
        a0[r] = a1[r] = _mm256_setzero_pd();
    }
    int64_t i = 0;
    for (; i + 16 <= full; i += 16) {   /* two vectors of each row, the exps interleaved (exp8_n) */
        __m256 e[2 * SOFTMAX_GROUP8];
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++) {
            e[2 * r] = _mm256_sub_ps(_mm256_loadu_ps(xr[r] + i), vm[r]);
            e[2 * r + 1] = _mm256_sub_ps(_mm256_loadu_ps(xr[r] + i + 8), vm[r]);
        }
        exp8_n(e, 2 * nr);
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++) {
            _mm256_storeu_ps(yr[r] + i, e[2 * r]);
            _mm256_storeu_ps(yr[r] + i + 8, e[2 * r + 1]);
        }
    }
    for (; i < full; i += 8)
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)   /* nr <= SOFTMAX_GROUP8 */
            _mm256_storeu_ps(yr[r] + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(xr[r] + i), vm[r])));
    for (int64_t i = 0; i < full; i += 8)
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++) {
            a0[r] = _mm256_add_pd(a0[r], _mm256_cvtps_pd(_mm_loadu_ps(yr[r] + i)));
            a1[r] = _mm256_add_pd(a1[r], _mm256_cvtps_pd(_mm_loadu_ps(yr[r] + i + 4)));
        }
    for (int r = 0; r < nr; r++) {
        double t = 0, l[8];
        if (full < n) {
            __m256 v = _mm256_blendv_ps(vm[r], _mm256_maskload_ps(xr[r] + full, kt), _mm256_castsi256_ps(kt));
            float e[8];
            _mm256_storeu_ps(e, exp8(_mm256_sub_ps(v, vm[r])));
            for (int64_t j = 0; j < n - full; j++) yr[r][full + j] = e[j], t += e[j];
        }
        _mm256_storeu_pd(l, a0[r]);
        _mm256_storeu_pd(l + 4, a1[r]);
        __m256 sc = _mm256_set1_ps((float)(1.0 / (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + t)));
        for (int64_t i = 0; i < full; i += 8) _mm256_storeu_ps(yr[r] + i, _mm256_mul_ps(_mm256_loadu_ps(yr[r] + i), sc));
        for (int64_t j = full; j < n; j++) yr[r][j] *= _mm256_cvtss_f32(sc);
    }
}

/* one row of n >= 8; SOFTMAX_GROUP8 at once */
BF__AVX2 static void softmax_row8(float *y, const float *x, int64_t n) { softmax_rows8_body(y, x, n, 1); }
BF__AVX2 static void softmax_rows8g(float *y, const float *x, int64_t n) { softmax_rows8_body(y, x, n, SOFTMAX_GROUP8); }

/* AVX2's row: the 8-lane kernel above, or the body's AVX2 copy under 8 */
static void softmax_row_avx2(float *y, const float *x, int64_t n)
{
    if (n < 8) softmax_row_body_avx2(y, x, n);
    else softmax_row8(y, x, n);
}
/* exp_f32 (fastmath_impl.h) in 16 lanes, on cnt vectors at once (a
 * constant where inlined): EXP_N_BODY's operations, as exp8_n's, with
 * AVX-512's unsigned compare for the scale's test. One vector's steps are
 * a chain of ~20 dependent operations, and the four rows' exps one after
 * the other (the scale's branch between them) left the scheduler waiting
 * on each chain (docs/perf/vit.md, h49-sm16). */
#define EXP16_MAX 4
#define EXP16_NORMAL(v, top) (!_mm512_cmp_epu32_mask(v, top, _MM_CMPINT_GT))
BF__AVX512 BF__ALWAYS_INLINE void exp16_n(__m512 *xv, const int cnt)
{
    EXP_N_BODY(_mm512, __m512, __m512i, si512, EXP16_MAX, EXP16_NORMAL)
}

BF__AVX512 static inline __m512 exp16(__m512 x)
{
    exp16_n(&x, 1);
    return x;
}

/* The same row in 16 lanes with the body's bits. The body's max (32 lanes
 * reduced one by one) and its double sum (bf__sum_f32_dacc, an SSE2 call)
 * were 40% of a detector's Softmax (SSDlite320: 3234 rows of 91, 0.6 ms an
 * image, run again by every trial whose fault reaches the class logits).
 * Without a NaN the max of a row is one value whatever the order, and its
 * bits are the body's but for a zero (the body keeps the first zero seen,
 * +0 or -0), whose sign moves no output: x - m is x, or a zero whose exp
 * is 1. A row with a NaN runs the body. The sum
 * is bf__sum_f32_dacc's, lane for lane: lane j adds elements j, j + 8, ...
 * in order, the elements past the last 8 go to t, and the lanes are added
 * in its tree. exp is exp16, the row's last partial 16 masked (the
 * compiler's copy of the body ran its last 11 of SSDlite's 91 one by
 * one). */
BF__AVX512 static void softmax_row_avx512(float *y, const float *x, int64_t n)
{
    if (n < 16) {
        softmax_row_body(y, x, n, 1);
        return;
    }
    __m512 mv = _mm512_loadu_ps(x);
    __mmask16 nan = _mm512_cmp_ps_mask(mv, mv, _CMP_UNORD_Q);
    int64_t i = 16;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        mv = _mm512_max_ps(mv, v);
    }
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        nan |= _mm512_mask_cmp_ps_mask(k, v, v, _CMP_UNORD_Q);
        mv = _mm512_mask_max_ps(mv, k, mv, v);
    }
    float m = _mm512_reduce_max_ps(mv);
    if (nan) {
        softmax_row_body(y, x, n, 1);
        return;
    }
    __m512 vm = _mm512_set1_ps(m);
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm)));
    }
    __m512d acc = _mm512_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_loadu_ps(y + i)));
    double t = 0, l[8];
    for (; i < n; i++) t += y[i];
    _mm512_storeu_pd(l, acc);
    __m512 r = _mm512_set1_ps((float)(1.0 / (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + t)));
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), r));
    }
}

/* Four rows at once, each with softmax_row_avx512's operations in its
 * order: the same max, exp16, double sum lane for lane (then t, then the
 * tree) and scaling, so every row has that kernel's bits. What changes is
 * only which row's instructions come next: one row's passes are chains
 * the core waits on (its sum: 25 dependent double adds for a row of 197,
 * its max, each exp16's 30 dependent steps, more than the scheduler holds
 * for the next vector), and four rows' chains side by side fill those
 * waits. A ViT-S/16 head's 197 rows of 197: 0.76 -> 0.59 ns an element,
 * SSDlite's rows of 91: 1.05 -> 0.62 (docs/perf/vit.md, h24-vit; two rows
 * at once gave 0.63 and 0.79, eight 0.59 and 0.64). A group with a NaN in
 * any row runs each row alone (the NaN-aware body); rows shorter than 16
 * and the last count % 4 rows run alone. */
#define SOFTMAX_GROUP 4
static_assert(SOFTMAX_GROUP <= EXP16_MAX, "the exp loop takes one vector of each row at once");
BF__AVX512 static void softmax_rows4_avx512(float *y, const float *x, int64_t n)
{
    const float *xr[SOFTMAX_GROUP];
    float *yr[SOFTMAX_GROUP];
    __m512 mv[SOFTMAX_GROUP];
    __mmask16 nan = 0;
    _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++) {
        xr[r] = x + r * n, yr[r] = y + r * n;
        mv[r] = _mm512_loadu_ps(xr[r]);
        nan |= _mm512_cmp_ps_mask(mv[r], mv[r], _CMP_UNORD_Q);
    }
    int64_t i = 16;
    for (; i + 16 <= n; i += 16)
        _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++) {
            __m512 v = _mm512_loadu_ps(xr[r] + i);
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            mv[r] = _mm512_max_ps(mv[r], v);
        }
    const __mmask16 kt = (__mmask16)((1u << (n - i)) - 1);   /* the last partial 16 (n - i < 16) */
    if (i < n)
        _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++) {
            __m512 v = _mm512_maskz_loadu_ps(kt, xr[r] + i);
            nan |= _mm512_mask_cmp_ps_mask(kt, v, v, _CMP_UNORD_Q);
            mv[r] = _mm512_mask_max_ps(mv[r], kt, mv[r], v);
        }
    if (nan) {
        for (int r = 0; r < SOFTMAX_GROUP; r++) softmax_row_avx512(yr[r], xr[r], n);
        return;
    }
    __m512 vm[SOFTMAX_GROUP];
    _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++) vm[r] = _mm512_set1_ps(_mm512_reduce_max_ps(mv[r]));
    for (i = 0; i + 16 <= n; i += 16) {   /* the four rows' exps interleaved (exp16_n) */
        __m512 e[SOFTMAX_GROUP];
        _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++)
            e[r] = _mm512_sub_ps(_mm512_loadu_ps(xr[r] + i), vm[r]);
        exp16_n(e, SOFTMAX_GROUP);
        _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++) _mm512_storeu_ps(yr[r] + i, e[r]);
    }
    if (i < n) {
        __m512 e[SOFTMAX_GROUP];
        _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++)
            e[r] = _mm512_sub_ps(_mm512_maskz_loadu_ps(kt, xr[r] + i), vm[r]);
        exp16_n(e, SOFTMAX_GROUP);
        _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++) _mm512_mask_storeu_ps(yr[r] + i, kt, e[r]);
    }
    __m512d acc[SOFTMAX_GROUP];
    _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++) acc[r] = _mm512_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8)
        _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++)
            acc[r] = _mm512_add_pd(acc[r], _mm512_cvtps_pd(_mm256_loadu_ps(yr[r] + i)));
    __m512 sc[SOFTMAX_GROUP];
    _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++) {
        double t = 0, l[8];
        for (int64_t j = i; j < n; j++) t += yr[r][j];
        _mm512_storeu_pd(l, acc[r]);
        sc[r] = _mm512_set1_ps((float)(1.0 / (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + t)));
    }
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : kt;
        _Pragma("GCC unroll 4") for (int r = 0; r < SOFTMAX_GROUP; r++)
            _mm512_mask_storeu_ps(yr[r] + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, yr[r] + i), sc[r]));
    }
}
#endif

/* Softmax over the middle axis of [n, inner]: every step is a contiguous
 * loop over inner. */
static void softmax_cols(float *y, const float *x, int64_t n, int64_t inner, float *m, double *s)
{
    if (n == 0) return;
    memcpy(m, x, (size_t)inner * sizeof *m);
    for (int64_t k = 1; k < n; k++) {
        const float *xk = x + k * inner;
        for (int64_t j = 0; j < inner; j++) m[j] = xk[j] > m[j] ? xk[j] : m[j];
    }
    memset(s, 0, (size_t)inner * sizeof *s);
    for (int64_t k = 0; k < n; k++) {
        const float *xk = x + k * inner;
        float *yk = y + k * inner;
        for (int64_t j = 0; j < inner; j++) {
            yk[j] = exp_f32(xk[j] - m[j]);
            s[j] += yk[j];
        }
    }
    for (int64_t j = 0; j < inner; j++) m[j] = (float)(1.0 / s[j]);
    for (int64_t k = 0; k < n; k++) {
        float *yk = y + k * inner;
        for (int64_t j = 0; j < inner; j++) yk[j] *= m[j];
    }
}

/* a Softmax over count contiguous rows of n */
static void softmax_rows(float *y, const float *x, int64_t count, int64_t n)
{
#ifdef BF__HAVE_AVX2_COPY
    int level = bf__simd_level();
    if (level >= BF__SIMD_AVX512) {
        int64_t o = 0;
        if (n >= 16)
            for (; o + SOFTMAX_GROUP <= count; o += SOFTMAX_GROUP) softmax_rows4_avx512(y + o * n, x + o * n, n);
        for (; o < count; o++) softmax_row_avx512(y + o * n, x + o * n, n);
        return;
    }
    if (level >= BF__SIMD_AVX2) {
        int64_t o = 0;
        if (n >= 8)
            for (; o + SOFTMAX_GROUP8 <= count; o += SOFTMAX_GROUP8) softmax_rows8g(y + o * n, x + o * n, n);
        for (; o < count; o++) softmax_row_avx2(y + o * n, x + o * n, n);
        return;
    }
#endif
    for (int64_t o = 0; o < count; o++) softmax_row_plain(y + o * n, x + o * n, n);
}

void bf__softmax_row_copy(float *y, const float *x, int64_t n, int copy)
{
#ifdef BF__HAVE_AVX2_COPY
    if (copy == 2) softmax_row_avx512(y, x, n);
    else if (copy == 1) softmax_row_avx2(y, x, n);
    else softmax_row_plain(y, x, n);
#else
    (void)copy;
    softmax_row_plain(y, x, n);
#endif
}

int bf__softmax_rows(const bf__step *s, int64_t *rows, int64_t *n)
{
    if (s->dyn || s->n_out != 1 || s->n_in != 1 || s->node->op->run != bf__softmax_run) return 0;
    const softmax_params *q = s->params;
    if (q->inner != 1) return 0;
    *rows = q->outer, *n = q->n;
    return 1;
}

void bf__softmax_inplace(float *y, int64_t count, int64_t n) { softmax_rows(y, y, count, n); }
void bf__softmax_rows_run(float *y, const float *x, int64_t count, int64_t n) { softmax_rows(y, x, count, n); }

bf_status bf__softmax_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const softmax_params *q = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    int64_t block = q->n * q->inner;
    if (q->inner == 1) {
        softmax_rows(y, x, q->outer, q->n);
        return BF_OK;
    }
    double *s = c->scratch;
    float *m = (float *)(s + q->inner);
    for (int64_t o = 0; o < q->outer; o++)
        softmax_cols(y + o * block, x + o * block, q->n, q->inner, m, s);
    return BF_OK;
}

