/* The vectorised PyTorch-order float sums (core/src/exec/ops/reduce_torchsum.c)
 * give, on every shape and at every CPU path this machine runs (the
 * baseline build and the AVX2 copy; BITFLIP_SIMD=ref and avx2 through the
 * op), the bits of the plain scalar loops they replaced. Those loops are
 * kept below as the reference: ATen's SumKernel.cpp cascade written one
 * float at a time (docs/NUMERICS.md, "ReduceMean and ReduceSum"); that
 * they are PyTorch's order is checked against torch.sum/torch.mean by the
 * op cases rorder_* (tests/ops/cases/reduce_order.py, ctest ops_cases and,
 * under each CPU path, simd_levels).
 *
 * Values: half of the cases mix magnitudes 2^-20 .. 2^20 of both signs,
 * where any other order rounds differently; the others hold values near
 * +-3.4e38, where it overflows differently; with -0, +-Inf and NaN
 * sprinkled in. Shapes: every path of the kernel (rows below 8, of 8 to 31,
 * long rows; middle axes of 1..70 columns, blocks of 32, of 8, of 4 and
 * leftovers), row counts across the cascade's level boundaries (16, 256,
 * 4096 rows) and one past 2^19 rows, where the level width grows. */
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
#include "op_harness.h"

/* ---- the reference: the scalar loops the kernel replaced ---- */

static int64_t ref_ceil_log2(int64_t x)
{
    if (x <= 2) return 1;
    int64_t r = 0;
    for (uint64_t v = (uint64_t)(x - 1); v; v >>= 1) r++;
    return r;
}

static void ref_cascade_rows(const float *x, int64_t rs, int64_t cs, int nk, int w, int64_t size, float *out)
{
    enum { LEVELS = 4, LANES = 32 };
    float acc[LEVELS][LANES] = {{0}};
    int lanes = nk * w;
    int64_t lp = ref_ceil_log2(size) / LEVELS;
    if (lp < 4) lp = 4;
    int64_t step = (int64_t)1 << lp, mask = step - 1, i = 0;
    while (i + step <= size) {
        for (int64_t j = 0; j < step; j++, i++)
            for (int k = 0; k < nk; k++)
                for (int l = 0; l < w; l++) acc[0][k * w + l] += x[i * rs + k * cs + l];
        for (int j = 1; j < LEVELS; j++) {
            for (int k = 0; k < lanes; k++) {
                acc[j][k] += acc[j - 1][k];
                acc[j - 1][k] = 0.0f;
            }
            if (i & (mask << (j * lp))) break;
        }
    }
    for (; i < size; i++)
        for (int k = 0; k < nk; k++)
            for (int l = 0; l < w; l++) acc[0][k * w + l] += x[i * rs + k * cs + l];
    for (int j = 1; j < LEVELS; j++)
        for (int k = 0; k < lanes; k++) acc[0][k] += acc[j][k];
    memcpy(out, acc[0], (size_t)lanes * sizeof *out);
}

static void ref_row_sum(const float *x, int64_t es, int64_t size, int w, float *out)
{
    float part[32];
    int64_t n4 = size / 4;
    ref_cascade_rows(x, 4 * es, es, 4, w, n4, part);
    for (int64_t i = n4 * 4; i < size; i++)
        for (int l = 0; l < w; l++) part[l] += x[i * es + l];
    for (int k = 1; k < 4; k++)
        for (int l = 0; l < w; l++) part[l] += part[k * w + l];
    memcpy(out, part, (size_t)w * sizeof *out);
}

static float ref_inner_sum(const float *x, int64_t n)
{
    float s;
    if (n < 8) {
        ref_row_sum(x, 1, n, 1, &s);
        return s;
    }
    int64_t nv = n / 8;
    float lanes[8];
    ref_row_sum(x, 8, nv, 8, lanes);
    s = 0.0f;
    for (int64_t k = nv * 8; k < n; k++) s += x[k];
    for (int l = 0; l < 8; l++) s += lanes[l];
    return s;
}

static void ref_outer_sum(const float *x, int64_t n, int64_t inner, float *out)
{
    int64_t j = 0;
    if (inner >= 8) {
        for (; j + 32 <= inner; j += 32) ref_cascade_rows(x + j, inner, 8, 4, 8, n, out + j);
        for (; j + 8 <= inner; j += 8) ref_row_sum(x + j, inner, n, 8, out + j);
    } else {
        for (; j + 4 <= inner; j += 4) ref_cascade_rows(x + j, inner, 1, 4, 1, n, out + j);
    }
    for (; j < inner; j++) ref_row_sum(x + j, inner, n, 1, out + j);
}

static void ref_torch_sum(const float *x, int64_t outer, int64_t n, int64_t inner, float *out)
{
    if (inner == 1)
        for (int64_t r = 0; r < outer; r++) out[r] = ref_inner_sum(x + r * n, n);
    else
        for (int64_t o = 0; o < outer; o++) ref_outer_sum(x + o * n * inner, n, inner, out + o * inner);
}

/* ---- inputs ---- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* mode 0: magnitudes 2^-20 .. 2^20, both signs; 1: near +-3.4e38 (a few
 * of them in a row overflow); both with 1 in 500 special values */
static void fill(float *x, int64_t n, uint64_t *s, int mode)
{
    static const float special[] = {-0.0f, INFINITY, -INFINITY, NAN, 0.0f};
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(s);
        float m = 1.0f + (float)(r >> 40) / 16777216.0f;    /* [1, 2) */
        float sign = r & 1 ? -1.0f : 1.0f;
        if ((r >> 8) % 500 == 0) x[i] = special[(r >> 20) % 5];
        else if (mode) x[i] = sign * m * 1.0e38f;
        else x[i] = sign * ldexpf(m, (int)((r >> 24) % 41) - 20);
    }
}

/* A NaN's sign and payload are not results (which operand's NaN an add
 * returns is the compiler's choice of operand order; simd_levels.sh and
 * conformance.c's dump_floats treat them so too): any NaN equals any NaN. */
static int same_bits(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    uint32_t ua, ub;
    memcpy(&ua, &a, 4), memcpy(&ub, &b, 4);
    return ua == ub;
}

/* The kernel at each path the CPU has against the reference on [outer, n,
 * inner]; returns the number of paths checked. */
static int check_shape(int64_t outer, int64_t n, int64_t inner, uint64_t *s, int mode)
{
    int64_t nx = outer * n * inner, no = outer * inner;
    float *x = malloc((size_t)nx * sizeof *x), *want = malloc((size_t)no * sizeof *want),
          *got = malloc((size_t)no * sizeof *got);
    assert_non_null(x), assert_non_null(want), assert_non_null(got);
    fill(x, nx, s, mode);
    ref_torch_sum(x, outer, n, inner, want);
    int paths = 0;
    for (int simd = 0; simd <= 1; simd++) {
        if (simd && !bf__cpu_avx2()) continue;
        memset(got, 0xff, (size_t)no * sizeof *got);
        bf__torch_sum_f32(x, outer, n, inner, got, simd);
        for (int64_t i = 0; i < no; i++)
            if (!same_bits(got[i], want[i]))
                fail_msg("[%lld, %lld, %lld] mode %d simd %d: output %lld is %.9g, the reference %.9g",
                         (long long)outer, (long long)n, (long long)inner, mode, simd, (long long)i,
                         (double)got[i], (double)want[i]);
        paths++;
    }
    free(x), free(want), free(got);
    return paths;
}

static void kernel_shapes(void **state)
{
    (void)state;
    uint64_t s = 0x9E3779B97F4A7C15u;
    /* every row length up to 80 and every column count up to 70, short and
     * level-crossing row counts */
    static const int64_t ns[] = {1, 2, 3, 4, 5, 7, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1023, 1024, 1030};
    for (int mode = 0; mode <= 1; mode++) {
        for (int64_t n = 1; n <= 80; n++) check_shape(3, n, 1, &s, mode);
        for (int64_t inner = 2; inner <= 70; inner++)
            for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
                if (ns[k] * inner <= 40000) check_shape(2, ns[k], inner, &s, mode);
    }
    /* long rows across the cascade's levels: 16, 256, 4096 vectors of rows */
    static const int64_t rows[] = {128 * 32 + 5, 256 * 32 + 31, 4096 * 32 + 7, 4097 * 32 + 9, 100003};
    for (size_t k = 0; k < sizeof rows / sizeof *rows; k++)
        for (int mode = 0; mode <= 1; mode++) check_shape(2, rows[k], 1, &s, mode);
    /* middle axes of 4096+ rows: one block of 32, one of 8, 4 and leftovers */
    check_shape(1, 4100, 32, &s, 0);
    check_shape(1, 4097 * 4 + 3, 8, &s, 1);
    check_shape(1, 4099, 5, &s, 0);
    check_shape(1, 70000, 3, &s, 1);
    /* past 2^19 rows the level width is 2^5: the 4-lane cascade and the
     * one-lane row sum (its cascade has n / 4 rows), and the 32-lane one */
    check_shape(1, 600000, 4, &s, 0);
    check_shape(1, 4 * 530000 + 3, 1 + 4, &s, 1);
    assert_true(check_shape(1, 530000, 32, &s, 0) >= 1);
}

/* Random shapes of 1 to 4 dims, a random run of adjacent axes reduced.
 * Under the sanitizers (BF_SANITIZED, tests/CMakeLists.txt) the first 500
 * of the 2000 (the same draws): kernel_shapes above reaches every path of
 * the kernel by construction, and the 500 reach the lines the 2000 do
 * (gcov: tests/history/round21-h25-trims.md); 65% of the test's ASan time. */
#ifdef BF_SANITIZED
#define RANDOM_SHAPES 500
#else
#define RANDOM_SHAPES 2000
#endif
static void kernel_random(void **state)
{
    (void)state;
    uint64_t s = 12345;
    for (int t = 0; t < RANDOM_SHAPES; t++) {
        int64_t outer = 1 + (int64_t)(rng_next(&s) % 4);
        int64_t n = 1 + (int64_t)(rng_next(&s) % (t % 3 == 0 ? 3000 : 60));
        int64_t inner = rng_next(&s) % 3 == 0 ? 1 : 1 + (int64_t)(rng_next(&s) % 100);
        check_shape(outer, n, inner, &s, t & 1);
    }
}

/* Through the op, as a plan runs it: ReduceSum and ReduceMean over every
 * run of adjacent axes of shapes with odd sizes and dims of 1 (the op
 * reads its [outer, n, inner] view of them), keepdims or not, under each
 * CPU path (BITFLIP_SIMD); the reference sums the same view. */
static void op_axes(void **state)
{
    (void)state;
    static const struct { int nd; int64_t d[4]; } shapes[] = {
        {1, {37}}, {2, {5, 300}}, {3, {3, 20, 44}}, {3, {4, 1, 33}}, {4, {2, 7, 1, 9}},
        {4, {3, 5, 6, 7}}, {3, {64, 2, 16}}, {2, {1, 5000}}, {3, {2, 70, 5}}};
    const char *levels[] = {"ref", "avx2"};
    uint64_t s = 777;
    for (int lv = 0; lv < 2; lv++) {
        if (lv == 1 && !bf__cpu_avx2()) continue;
        setenv("BITFLIP_SIMD", levels[lv], 1);
        for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
            int nd = shapes[k].nd;
            const int64_t *d = shapes[k].d;
            for (int a = 0; a < nd; a++)
                for (int b = a; b < nd; b++)
                    for (int mean = 0; mean <= 1; mean++) {
                        int64_t outer = 1, n = 1, inner = 1, numel = 1, axes[4];
                        for (int i = 0; i < nd; i++) {
                            numel *= d[i];
                            if (i < a) outer *= d[i];
                            else if (i <= b) n *= d[i];
                            else inner *= d[i];
                        }
                        for (int i = a; i <= b; i++) axes[i - a] = i;
                        float *xv = malloc((size_t)numel * sizeof *xv), *want = malloc((size_t)(outer * inner) * sizeof *want);
                        assert_non_null(xv), assert_non_null(want);
                        fill(xv, numel, &s, (int)(k & 1));
                        ref_torch_sum(xv, outer, n, inner, want);
                        for (int64_t i = 0; i < outer * inner; i++) {
                            want[i] = 0.0f + want[i];
                            if (mean) want[i] /= (float)n;
                        }
                        bf_tensor x = th_tensor_f32(xv, nd, d), y;
                        bf__attr attrs[2] = {th_attr_ints("axes", axes, (size_t)(b - a + 1)),
                                             th_attr_int("keepdims", (a + b) & 1)};
                        const bf_tensor *in[1] = {&x};
                        bf_error err = {0};
                        bf_status st = th_run_op(mean ? "ReduceMean" : "ReduceSum", 11, attrs, 2, in, 1, &y, 1, &err);
                        if (st != BF_OK) fail_msg("%s", err.msg);
                        assert_int_equal(bf_tensor_numel(&y), outer * inner);
                        const float *g = y.data;
                        for (int64_t i = 0; i < outer * inner; i++)
                            if (!same_bits(g[i], want[i]))
                                fail_msg("%s shape %zu axes %d..%d (%s): output %lld is %.9g, the reference %.9g",
                                         mean ? "ReduceMean" : "ReduceSum", k, a, b, levels[lv], (long long)i,
                                         (double)g[i], (double)want[i]);
                        th_free(&y, 1);
                        th_tensor_free(&x);
                        free(xv), free(want);
                    }
        }
    }
    unsetenv("BITFLIP_SIMD");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kernel_shapes),
        cmocka_unit_test(kernel_random),
        cmocka_unit_test(op_axes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
