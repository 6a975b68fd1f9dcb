/* dtype conversions checked against values worked out by hand from the
 * IEEE 754 binary16 / bfloat16 layouts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bitflip/tensor.h"

static void f16_known_values(void **state)
{
    (void)state;
    assert_true(bf_f16_to_f32(0x3c00) == 1.0f);
    assert_true(bf_f16_to_f32(0xc000) == -2.0f);
    assert_true(bf_f16_to_f32(0x7bff) == 65504.0f);            /* largest normal */
    assert_true(bf_f16_to_f32(0x0001) == 0x1p-24f);             /* smallest subnormal */
    assert_true(bf_f16_to_f32(0x0400) == 0x1p-14f);             /* smallest normal */
    assert_true(isinf(bf_f16_to_f32(0x7c00)));
    assert_true(isnan(bf_f16_to_f32(0x7e00)));
    assert_int_equal(bf_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(bf_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(bf_f32_to_f16(65520.0f), 0x7c00);          /* rounds up to inf */
    assert_int_equal(bf_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(bf_f32_to_f16(0x1p-26f), 0x0000);          /* below half the smallest */
    /* 1 + 2^-11 is halfway between 1 and 1+2^-10: ties to even -> 1 */
    assert_int_equal(bf_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(bf_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
}

static void f16_round_trip_all(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = bf_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        assert_int_equal(bf_f32_to_f16(f), h);
    }
}

static void bf16_known_values(void **state)
{
    (void)state;
    assert_true(bf_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(bf_bf16_to_f32(0xc040) == -3.0f);
    assert_int_equal(bf_f32_to_bf16(1.0f), 0x3f80);
    /* 1 + 2^-8 is halfway between bf16 neighbours 1 and 1+2^-7: ties to even */
    assert_int_equal(bf_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    assert_int_equal(bf_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
}

static void convert_truncates(void **state)
{
    (void)state;
    float src[4] = {1.9f, -1.9f, 3.0f, -0.5f};
    int64_t dst[4];
    assert_int_equal(bf_convert(dst, BF_I64, src, BF_F32, 4, NULL), BF_OK);
    assert_int_equal(dst[0], 1);
    assert_int_equal(dst[1], -1);
    assert_int_equal(dst[2], 3);
    assert_int_equal(dst[3], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(f16_known_values),
        cmocka_unit_test(f16_round_trip_all),
        cmocka_unit_test(bf16_known_values),
        cmocka_unit_test(convert_truncates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
