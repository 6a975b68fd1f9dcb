/* Chain mode's Conv update (bf__conv_update, core/src/exec/ops/linalg_conv.c) and its
 * linear segments' rows (core/src/diff/difflinear.c, bf__lin_rows): cases
 * worked by hand, then the AVX2 copies against the plain loops, bit for bit,
 * on random channels full of the values that make floats differ (zeros of
 * both signs, NaN, infinities, subnormals, huge changes) and on lengths
 * that leave a tail past the eight-lane blocks. NaN is NaN either way, but
 * not always the same NaN: with two NaN operands x86 returns the first, and
 * the compiler picks the order of a product's operands (so does -O0 against
 * -O3); a NaN output is a DUE whichever it is. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "diff/diff_impl.h"
#include "exec/ops/sgemm.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void by_hand(void **state)
{
    (void)state;
    /* taps read x[2], x[0], padding, x[1]; dw = 0.5 */
    const float x[3] = {4.0f, 0.0f, -2.0f};
    const int32_t tap[4] = {2, 0, 0, 1};
    const float tapm[4] = {1, 1, 0, 1};
    const float yg[4] = {3.0f, -0.0f, -0.0f, 7.0f};
    for (int simd = 0; simd < 2; simd++) {
        float e[4];
        int moved = -1;
        int huge = bf__conv_update(simd, x, tap, tapm, yg, 0.5f, 4, e, &moved);
        assert_int_equal(huge, 0);
        assert_int_equal(moved, 1);
        assert_true(e[0] == 2.0f);                     /* 3 + 0.5 * -2 */
        assert_true(e[1] == 2.0f);                     /* -0 + 0.5 * 4 */
        assert_int_equal(bits(e[2]), bits(-0.0f));     /* padding: golden, -0 kept */
        assert_int_equal(bits(e[3]), bits(7.0f));      /* x = 0: golden */
        /* nothing moves when every tap reads zero */
        const float z[3] = {0, 0, 0};
        huge = bf__conv_update(simd, z, tap, tapm, yg, 0.5f, 4, e, &moved);
        assert_int_equal(moved, 0);
        assert_int_equal(huge, 0);
        /* a change past HUGE_CHANGE (256) times max(1, |yg|) is huge; NaN too */
        const float big[3] = {1e3f, 0, 0};
        assert_int_equal(bf__conv_update(simd, big, tap, tapm, yg, 1.0f, 4, e, &moved), 1);
        const float nan[3] = {NAN, 0, 0};
        assert_int_equal(bf__conv_update(simd, nan, tap, tapm, yg, 1.0f, 4, e, &moved), 1);
    }
}

/* The next number of a test's LCG, `seed` in the caller's scope. */
#define NEXT() (seed = seed * 1103515245u + 12345u, seed >> 4)

static float pick(unsigned r)
{
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-40f, -1e-40f, 3e38f, -3e38f, INFINITY, -INFINITY,
                                    NAN, 256.0f, 257.0f};
    if (r % 4 == 0) return special[(r / 4) % (sizeof special / sizeof *special)];
    return ((float)(r % 20001) - 10000.0f) * 1e-3f;
}

static void simd_matches_plain(void **state)
{
    (void)state;
    if (!bf__sgemm_simd()) skip();   /* no AVX2 here: the plain loop is the only one */
    unsigned seed = 12345;
    for (int round = 0; round < 2000; round++) {
        int n = 1 + (int)(NEXT() % 70), nx = 1 + (int)(NEXT() % 40);
        float x[40], yg[70], tapm[70], a[70], b[70];
        int32_t tap[70];
        for (int i = 0; i < nx; i++) x[i] = pick(NEXT());
        for (int p = 0; p < n; p++) {
            tap[p] = (int32_t)(NEXT() % (unsigned)nx);
            tapm[p] = NEXT() % 5 ? 1.0f : 0.0f;
            yg[p] = pick(NEXT());
        }
        float dw = pick(NEXT());
        int ma, mb;
        int ha = bf__conv_update(0, x, tap, tapm, yg, dw, n, a, &ma);
        int hb = bf__conv_update(1, x, tap, tapm, yg, dw, n, b, &mb);
        assert_int_equal(ha, hb);
        assert_int_equal(ma, mb);
        for (int p = 0; p < n; p++) {
            if (isnan(a[p]) && isnan(b[p])) continue;   /* which NaN: see the top of this file */
            if (bits(a[p]) != bits(b[p])) fail_msg("round %d, n %d, p %d: %a vs %a", round, n, p, a[p], b[p]);
        }
    }
}

/* A segment of 3 samples, input width 2, output width 3, by hand. J of
 * (column c, sample r) is (c + 1, r, -1) / 4; the radii make column 0 of
 * sample 1 safe up to |d| = 1/2 (inverse radius 1) and column 1 of sample
 * 2 never (infinite). */
static void lin_rows_by_hand(void **state)
{
    (void)state;
    enum { S = 3, K = 2, N = 3 };
    float jac[K * S * N], inv[K * S];
    for (int c = 0; c < K; c++)
        for (int r = 0; r < S; r++) {
            float *j = jac + (c * S + r) * N;
            j[0] = (float)(c + 1) / 4, j[1] = (float)r / 4, j[2] = -0.25f;
            inv[c * S + r] = c == 1 && r == 2 ? INFINITY : 1.0f;
        }
    bf__lin L = {.last = 0, .k = K, .n = N, .jac = jac, .inv_radius = inv};
    const float gin[S * K] = {1, 2, 3, 4, 5, 6};     /* golden input rows */
    const float gout[S * N] = {0, 0, 0, 8, 8, 8, 1, 1, 1};
    const int col[1] = {0};
    for (int simd = 0; simd < 2; simd++) {
        /* rows 0, 1, 2 changed in column 0: by 0.25 (kept), 0 (kept, comes
         * back golden, not appended), 1 (|d| inv = 1 > 1/2: left) */
        int64_t row[3] = {0, 1, 2}, yrow[3], left = -1;
        float v[3] = {1.25f, 3.0f, 6.0f}, yv[3 * N];
        int64_t n = bf__lin_rows(simd, &L, S, 3, row, v, col, 1, gin, gout, yrow, yv, &left);
        assert_int_equal(n, 1);
        assert_int_equal(yrow[0], 0);
        assert_true(yv[0] == 0.0625f && yv[1] == 0.0f && yv[2] == -0.0625f);   /* 0 + 0.25 (1/4, 0, -1/4) */
        assert_int_equal(left, 1);
        assert_int_equal(row[0], 2);
        assert_true(v[0] == 6.0f);
        /* two columns: sample 1 moved by (0.125, 0.125): 0.25 <= 1/2,
         * out 8 + 0.125 (1/4, 1/4, -1/4) + 0.125 (2/4, 1/4, -1/4); sample 2
         * by (0, 0.5) in column 1, whose radius is infinite: left */
        const int col2[2] = {0, 1};
        int64_t row2[2] = {1, 2};
        float v2[4] = {3.125f, 4.125f, 5.0f, 6.5f};
        n = bf__lin_rows(simd, &L, S, 2, row2, v2, col2, 2, gin, gout, yrow, yv, &left);
        assert_int_equal(n, 1);
        assert_int_equal(yrow[0], 1);
        assert_true(yv[0] == 8.09375f && yv[1] == 8.0625f && yv[2] == 7.9375f);
        assert_int_equal(left, 1);
        assert_int_equal(row2[0], 2);
        assert_true(v2[0] == 5.0f && v2[1] == 6.5f);
    }
}

/* pick without the values that make a NaN (whose payload depends on the
 * order of an operation's operands, see the top of this file): zeros of
 * both signs, subnormals and ordinary values. */
static float pick_finite(unsigned r)
{
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-40f, -1e-40f, 256.0f, 257.0f, 1e-30f};
    if (r % 4 == 0) return special[(r / 4) % (sizeof special / sizeof *special)];
    return ((float)(r % 20001) - 10000.0f) * 1e-3f;
}

/* bf__lin_rows' AVX2 rows against the plain ones, bit for bit, on random
 * segments of output widths across the eight-lane blocks. */
static void lin_rows_simd_matches_plain(void **state)
{
    (void)state;
    if (!bf__sgemm_simd()) skip();
    unsigned seed = 777;
    enum { S = 16, K = 5, NMAX = 21 };
    static float jac[K * S * NMAX], inv[K * S], gin[S * K], gout[S * NMAX];
    int64_t taken = 0;
    for (int round = 0; round < 500; round++) {
        int n_out = 1 + (int)(NEXT() % NMAX), nc = 1 + (int)(NEXT() % 3);
        bf__lin L = {.k = K, .n = n_out, .jac = jac, .inv_radius = inv};
        for (int i = 0; i < K * S * n_out; i++) jac[i] = pick_finite(NEXT());
        for (int i = 0; i < K * S; i++) inv[i] = NEXT() % 3 ? (float)(NEXT() % 100) * 1e-3f : NEXT() % 2 ? INFINITY : 0.0f;
        for (int i = 0; i < S * K; i++) gin[i] = pick_finite(NEXT());
        for (int i = 0; i < S * n_out; i++) gout[i] = pick_finite(NEXT());
        int col[3];
        for (int q = 0; q < nc; q++) col[q] = q + (int)(NEXT() % 2) * q;   /* ascending, < K */
        int64_t row[2][S], yrow[2][S], left[2];
        float v[2][S * 3], yv[2][S * NMAX];
        for (int r = 0; r < S; r++) {
            row[0][r] = row[1][r] = r;
            for (int q = 0; q < nc; q++) {
                float scale = NEXT() % 2 ? 1e-3f : 1.0f;   /* small changes too: those the radii keep */
                v[0][r * nc + q] = v[1][r * nc + q] = gin[r * K + col[q]] + pick_finite(NEXT()) * scale;
            }
        }
        int64_t na = bf__lin_rows(0, &L, S, S, row[0], v[0], col, nc, gin, gout, yrow[0], yv[0], &left[0]);
        int64_t nb = bf__lin_rows(1, &L, S, S, row[1], v[1], col, nc, gin, gout, yrow[1], yv[1], &left[1]);
        assert_int_equal(na, nb);
        assert_int_equal(left[0], left[1]);
        assert_memory_equal(row[0], row[1], (size_t)left[0] * sizeof **row);
        assert_memory_equal(yrow[0], yrow[1], (size_t)na * sizeof **yrow);
        for (int64_t i = 0; i < na * n_out; i++)
            if (bits(yv[0][i]) != bits(yv[1][i]))
                fail_msg("round %d, element %lld: %a vs %a", round, (long long)i, yv[0][i], yv[1][i]);
        taken += na;
    }
    assert_true(taken > 500);   /* rows took the segment, not only the links */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(by_hand),
        cmocka_unit_test(simd_matches_plain),
        cmocka_unit_test(lin_rows_by_hand),
        cmocka_unit_test(lin_rows_simd_matches_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
