/* test_conv_exact: which depthwise shapes the AVX2 plane kernel takes
 * (linalg_conv_dw8.c, bf__dw8_ok), worked by hand. Its bits are the cases'
 * (every depthwise case runs under BITFLIP_SIMD=avx2); this holds the rule
 * that keeps a stride-2 tap inside its phase's row. */
#include "exec/ops/linalg_window.h"
#include "test_conv_exact.h"

/* a 2-D window: input h x w, kernel kh x kw, stride s, dilation d, pads
 * top/left (pb) and bottom/right (pe); the output by ONNX's formula */
static bf__window win(int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t s, int64_t d, int64_t pt, int64_t pl,
                      int64_t pbo, int64_t pr)
{
    bf__window x = {.rank = 2};
    x.in[0] = x.out[0] = x.k[0] = x.s[0] = x.d[0] = 1;
    x.in[1] = h, x.in[2] = w, x.k[1] = kh, x.k[2] = kw, x.s[1] = x.s[2] = s, x.d[1] = x.d[2] = d;
    x.pb[1] = pt, x.pb[2] = pl, x.pe[1] = pbo, x.pe[2] = pr;
    x.out[1] = (h + pt + pbo - d * (kh - 1) - 1) / s + 1;
    x.out[2] = (w + pl + pr - d * (kw - 1) - 1) / s + 1;
    return x;
}

void conv_dw8_takes_its_shapes(void **state)
{
    (void)state;
#if defined(__x86_64__) && defined(__GNUC__)
    /* stride 1: rows as wide as the input's only (one offset per tap) */
    bf__window a = win(14, 14, 3, 3, 1, 1, 1, 1, 1, 1);
    assert_true(bf__dw8_ok(&a));
    a = win(14, 14, 3, 3, 1, 1, 1, 0, 1, 0);   /* 12 wide out of 14 */
    assert_false(bf__dw8_ok(&a));
    /* stride 2, 112 -> 56 with pads 1: the taps read phase columns ow - 1,
     * ow and ow (kw 0, 1, 2): all below 56 */
    a = win(112, 112, 3, 3, 2, 1, 1, 1, 1, 1);
    assert_int_equal(a.out[2], 56);
    assert_true(bf__dw8_ok(&a));
    /* stride 2, 15 wide, no padding: 7 out; kw 2 reads even column
     * 2 ow + 2, phase column ow + 1, and at ow = 6 column 14 is inside the
     * input: phase column 7 is past its row of 7 */
    a = win(9, 15, 3, 3, 2, 1, 0, 0, 0, 0);
    assert_int_equal(a.out[2], 7);
    assert_false(bf__dw8_ok(&a));
    /* 16 wide, no padding: 7 out again; at ow = 6 kw 2 reads column 14,
     * inside the input, phase column 7: refused too */
    a = win(9, 16, 3, 3, 2, 1, 0, 0, 0, 0);
    assert_false(bf__dw8_ok(&a));
    /* with pads 1 on both sides, 15 -> 8: kw 2 reads 2 ow + 1, phase
     * column ow: inside */
    a = win(15, 15, 3, 3, 2, 1, 1, 1, 1, 1);
    assert_int_equal(a.out[2], 8);
    assert_true(bf__dw8_ok(&a));
    /* other strides, 3-D, uneven strides: not taken */
    a = win(14, 14, 3, 3, 3, 1, 1, 1, 1, 1);
    assert_false(bf__dw8_ok(&a));
    a = win(14, 14, 3, 3, 1, 1, 1, 1, 1, 1);
    a.s[1] = 2;
    assert_false(bf__dw8_ok(&a));
    a = win(14, 14, 3, 3, 1, 1, 1, 1, 1, 1);
    a.in[0] = a.out[0] = 2;
    assert_false(bf__dw8_ok(&a));
#else
    skip();
#endif
}
