/* Chain mode's Conv update (core/src/diffchain.c, bf__conv_update): cases
 * worked by hand, then the AVX2 copy against the plain loop, bit for bit,
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

#include "diff_impl.h"
#include "ops/sgemm.h"

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
#define NEXT() (seed = seed * 1103515245u + 12345u, seed >> 4)
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(by_hand),
        cmocka_unit_test(simd_matches_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
