/* The AVX2 and AVX-512 copies of the fast float math (fastmath_impl.h's
 * BF__MAP_VEC, used by the elementwise ops and Softmax) give the plain
 * copy's bits on every input: 8- and 16-wide vectors, same operations, no
 * contraction. Checked over a million float bit patterns spread over the
 * whole range (subnormals, 1e38, +-Inf, NaN, -0 included), where a
 * contracted multiply-add or a reordered sum would show. The plain copy's
 * accuracy against PyTorch is tests/ops' and the conformance tests'. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "exec/ops/elementwise_impl.h"
#include "exec/ops/fastmath_impl.h"
#include "exec/ops/sgemm.h"
#include "bitflip/plan.h"
#include "exec/step_access.h"

static inline float gelu(float x) { return 0.5f * x * (1.0f + erf_f32(x * 0.70710678118654752f)); }
static inline float gelu_tanh(float x)
{
    float x3 = x * x * x;
    return 0.5f * x * (1.0f + tanh_f32(0.79788456080286536f * (x + 0.044715f * x3)));
}

BF__MAP_VEC(m_exp, exp_f32)
BF__MAP_VEC(m_sigmoid, sigmoid_f32)
BF__MAP_VEC(m_tanh, tanh_f32)
BF__MAP_VEC(m_erf, erf_f32)
BF__MAP_VEC(m_gelu, gelu)
BF__MAP_VEC(m_gelu_tanh, gelu_tanh)

#define N (1 << 20)

static void same_bits(void **state)
{
    (void)state;
#ifdef BF__HAVE_AVX2_COPY
    if (!bf__cpu_avx2()) skip();
    float *x = malloc(sizeof(float) * N), *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    assert_non_null(x), assert_non_null(a), assert_non_null(b);
    static const float special[] = {0.0f, -0.0f, 1e38f, -1e38f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f,
                                    88.7f, -104.0f, 9.0f, -9.0f, 4e-4f, 3.4e38f};
    uint64_t s = 0x9E3779B97F4A7C15u;
    for (int i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 32);
        /* half the inputs anywhere in the bit space, half in [-16, 16] */
        x[i] = i & 1 ? bits_f32(u) : (float)((int32_t)u) * (16.0f / 2147483648.0f);
    }
    memcpy(x, special, sizeof special);
    void (*const avx2[])(float *, const float *, int64_t) = {m_exp_avx2, m_sigmoid_avx2, m_tanh_avx2,
                                                             m_erf_avx2, m_gelu_avx2, m_gelu_tanh_avx2};
    /* what the ops call: picks the AVX2 copy on this CPU */
    void (*const entry[])(float *, const float *, int64_t) = {m_exp, m_sigmoid, m_tanh, m_erf, m_gelu, m_gelu_tanh};
    void (*const plain[])(float *, const float *, int64_t) = {m_exp_plain, m_sigmoid_plain, m_tanh_plain,
                                                              m_erf_plain, m_gelu_plain, m_gelu_tanh_plain};
    /* the 16-lane copies, where the CPU runs AVX-512 */
    void (*const avx512[])(float *, const float *, int64_t) = {m_exp_avx512, m_sigmoid_avx512, m_tanh_avx512,
                                                               m_erf_avx512, m_gelu_avx512, m_gelu_tanh_avx512};
    int wide = bf__simd_cpu() >= BF__SIMD_AVX512;
    if (!wide) print_message("no AVX-512 on this CPU: its copies not compared\n");
    static const char *const name[] = {"exp", "sigmoid", "tanh", "erf", "gelu", "gelu_tanh"};
    static const char *const what[] = {"AVX2 copy", "entry", "AVX-512 copy"};
    for (size_t f = 0; f < sizeof name / sizeof *name; f++) {
        plain[f](b, x, N);
        for (int copy = 0; copy < 2 + wide; copy++) {
            (copy == 2 ? avx512 : copy ? entry : avx2)[f](a, x, N);
            for (int i = 0; i < N; i++)
                if (memcmp(a + i, b + i, 4) != 0)
                    fail_msg("%s(%.9g): %s %.9g, plain %.9g", name[f], (double)x[i], what[copy], (double)a[i],
                             (double)b[i]);
        }
    }
    /* the Gelu the op and a MatMul's fused epilogue run (bf__gelu_kernel: on
     * AVX2 elementwise.c's gelu8, two vectors at a time, the tail through the
     * compiler's copy), at each level this CPU has, on offsets 0-15 so every
     * tail length shows */
    m_gelu_plain(b, x, N);
    const char *was = getenv("BITFLIP_SIMD");
    char *keep = was ? strdup(was) : NULL;
    assert_true(!was || keep);
    for (int level = 1; level <= 1 + wide; level++) {
        if (level == 1) setenv("BITFLIP_SIMD", "avx2", 1);
        else unsetenv("BITFLIP_SIMD");
        bf__map_fn g = bf__gelu_kernel();
        for (int off = 0; off < 16; off++) {
            g(a + off, x + off, N - off);
            for (int i = off; i < N; i++)
                if (memcmp(a + i, b + i, 4) != 0)
                    fail_msg("gelu(%.9g) at %s, offset %d: kernel %.9g, plain %.9g", (double)x[i], bf_cpu_path(), off,
                             (double)a[i], (double)b[i]);
        }
    }
    if (keep) setenv("BITFLIP_SIMD", keep, 1);
    else unsetenv("BITFLIP_SIMD");
    free(keep);
    free(x), free(a), free(b);
#else
    skip();
#endif
}

/* Row `row` of n logits into x, from the xorshift state *st: the kinds of
 * row softmax_rows_same_bits lists (row % 13 picks the kind). */
static void softmax_fill_row(float *x, int n, int row, uint64_t *st)
{
    uint64_t s = *st;
    for (int i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 32);
        /* logits as a detector's class head gives them, some rows far apart */
        x[i] = (float)((int32_t)u) * ((row % 7 == 0 ? 80.0f : 12.0f) / 2147483648.0f);
    }
    int k = (int)((s >> 8) % (uint64_t)n);
    switch (row % 13) {
    case 1: x[k] = NAN; break;
    case 2: x[k] = INFINITY; break;
    case 3: x[k] = -INFINITY; break;
    case 4: for (int i = 0; i < n; i++) x[i] = -INFINITY; break;
    case 5: for (int i = 0; i < n; i++) x[i] = -fabsf(x[i]) - 1.0f; x[k] = -0.0f; x[(k + 1) % n] = 0.0f; break;
    case 6: for (int i = 0; i < n; i++) x[i] = -fabsf(x[i]) - 1.0f; x[k] = 0.0f; x[(k + 3) % n] = -0.0f; break;
    case 7: x[k] = 3.0e38f; break;
    case 8: x[k] = 1e-45f; break;
    case 9:   /* finite bit patterns anywhere: exp's clamps, subnormal and overflowing scales */
        for (int i = 0; i < n; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            uint32_t u = (uint32_t)(s >> 32) & 0xBFFFFFFFu;   /* exponent below 255: no NaN or Inf */
            x[i] = bits_f32(u);
        }
        break;
    case 10: for (int i = 0; i < n; i++) x[i] *= 8.0f; break;
    case 11:   /* a max of 0 and exps down through the subnormals to the clamp at -104 */
        for (int i = 0; i < n; i++) x[i] = -fabsf(x[i]) * (110.0f / 80.0f);
        x[k] = 0.0f;
        break;
    case 12:   /* a max of 0 and x - max in -88.3 .. -87.0: exp's scale 2^n at n = -125, -126 and -127, where
                * the AVX-512 exp's one-multiply scale (n >= -126 in all 16 lanes) meets its two-multiply one */
        for (int i = 0; i < n; i++) x[i] = -87.0f - fabsf(x[i]) * (1.3f / 12.0f);
        x[k] = 0.0f;
        break;
    default: break;
    }
    *st = s;
}

/* Softmax's rows: the AVX-512 and AVX2 copies take their own max, exp and
 * double sum (elementwise_softmax.c: exp16 and exp8, the sum's lanes as
 * vectors of doubles), rows under 8 the body's AVX2 copy; both must give the plain
 * copy's bits on every row: SSDlite's 91 logits, lengths 1 to 130 (the
 * 16- and 8-lane max's tails, the sum's 8-lane tail), and rows with a NaN, an
 * Inf, all -Inf, a max of +0 or -0 (the body keeps the first zero seen),
 * and exps whose scale 2^n sits at the edge of the normal floats, where the
 * AVX-512 exp changes from one multiply by 2^n to two. */
static void softmax_rows_same_bits(void **state)
{
    (void)state;
#ifdef BF__HAVE_AVX2_COPY
    if (!bf__cpu_avx2()) skip();
    enum { ROWS = 20000, MAXN = 130 };
    float *x = malloc(sizeof(float) * MAXN), *a = malloc(sizeof(float) * MAXN), *b = malloc(sizeof(float) * MAXN);
    assert_non_null(x), assert_non_null(a), assert_non_null(b);
    int wide = bf__simd_cpu() >= BF__SIMD_AVX512;
    uint64_t s = 0x243F6A8885A308D3u;
    for (int row = 0; row < ROWS; row++) {
        int n = row < 4 * MAXN ? 1 + row % MAXN : 91;
        softmax_fill_row(x, n, row, &s);
        bf__softmax_row_copy(b, x, n, 0);
        for (int copy = 1; copy < 2 + wide; copy++) {
            bf__softmax_row_copy(a, x, n, copy);
            for (int i = 0; i < n; i++)
                if (memcmp(a + i, b + i, 4) != 0)
                    fail_msg("softmax row %d (n %d) element %d: %s copy %.9g, plain %.9g", row, n, i,
                             copy == 2 ? "AVX-512" : "AVX2", (double)a[i], (double)b[i]);
        }
    }
    free(x), free(a), free(b);
#else
    skip();
#endif
}

/* The Softmax step's rows (bf__softmax_inplace, what a Softmax op and a
 * MatMul with its Softmax fused in run): four rows at a time with their
 * instructions interleaved (elementwise_softmax.c; AVX-512's and AVX2's
 * kernels, each level this CPU has: BITFLIP_SIMD=avx2 picks AVX2's on an
 * AVX-512 CPU), each row with the plain row's bits. Blocks of 1-11 rows
 * (every remainder of the groups of four) of widths around the 8- and
 * 16-lane edges, ViT's 197 and a detector's 91, the rows of each block of
 * every kind above, so a NaN row sits beside finite ones in a group; a
 * swapped row, a lane summed out of order or a group that lets its NaN
 * row's path take the others fails. */
static void softmax_grouped_at_level(void);
static void softmax_grouped_rows_same_bits(void **state)
{
    (void)state;
    if (bf__sgemm_best() < BF_SGEMM_AVX2) {   /* the grouped rows are the vector levels' */
        print_message("test_fastmath_avx2: SKIP: no AVX2 on this CPU, so softmax_grouped_rows_same_bits "
                      "would compare the plain row with itself; skipped, not passed\n");
        skip();
    }
    const char *was = getenv("BITFLIP_SIMD");
    char *keep = was ? strdup(was) : NULL;
    assert_true(!was || keep);
    int top = bf__sgemm_best() >= BF_SGEMM_AVX512 ? 2 : 1;
    for (int level = 1; level <= top; level++) {
        if (level == 1) setenv("BITFLIP_SIMD", "avx2", 1);
        else unsetenv("BITFLIP_SIMD");
        softmax_grouped_at_level();
    }
    if (keep) setenv("BITFLIP_SIMD", keep, 1);
    else unsetenv("BITFLIP_SIMD");
    free(keep);
}

static void softmax_grouped_at_level(void)
{
    static const int widths[] = {1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 91, 130, 197};
    enum { MAXN = 197, MAXR = 11 };
    float *x = malloc(sizeof(float) * MAXN * MAXR), *b = malloc(sizeof(float) * MAXN * MAXR);
    assert_non_null(x), assert_non_null(b);
    uint64_t s = 0x13198A2E03707344u;
    int kind = 0;
    for (int rep = 0; rep < 40; rep++)
        for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
            int n = widths[w], count = 1 + (rep + (int)w) % MAXR;
            for (int r = 0; r < count; r++) {
                softmax_fill_row(x + r * n, n, kind++, &s);
                bf__softmax_row_copy(b + r * n, x + r * n, n, 0);
            }
            bf__softmax_inplace(x, count, n);
            for (int i = 0; i < count * n; i++)
                if (memcmp(x + i, b + i, 4) != 0)
                    fail_msg("softmax block of %d rows (n %d, %s), row %d element %d: %.9g, plain row %.9g", count,
                             n, bf_cpu_path(), i / n, i % n, (double)x[i], (double)b[i]);
        }
    free(x), free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(same_bits), cmocka_unit_test(softmax_rows_same_bits),
                                       cmocka_unit_test(softmax_grouped_rows_same_bits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
