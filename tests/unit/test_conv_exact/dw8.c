/* test_conv_exact: the AVX2 paths' rules, worked by hand: which depthwise
 * shapes the AVX2 plane kernel takes (linalg_conv_dw8.c, bf__dw8_ok) and
 * what it does when its table finds no memory; which the channels-in-lanes
 * one takes (linalg_conv_dwc8.c) and how much of a call it runs; how many images a small
 * map's 1x1 product takes side by side at each level (bf__conv_pw_images). Its bits are the cases' (every depthwise case
 * runs under BITFLIP_SIMD=avx2); this holds the rule that keeps a stride-2
 * tap inside its phase's row. */
#include "../alloc_fail.h"
#include "base/simd.h"
#include "exec/ops/linalg_window.h"
#include "exec/ops/sgemm.h"
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

/* Inputs of the two runs below, and the chain every depthwise kernel must
 * give, written out: per channel c (planes of the window's size one after
 * the other), bias, then v + w * x over the taps inside the input, in
 * (kh, kw) order; a rounded product and a rounded sum each. */
static void dw_inputs(float *x, int nx, float *wt, int nw)
{
    for (int i = 0; i < nx; i++) x[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
    for (int i = 0; i < nw; i++) wt[i] = (float)((i * 11) % 13) / 5.0f - 1.2f;
}

static void dw_chain(const bf__window *w, int channels, const float *x, const float *wt, const float *bias,
                     float *want)
{
    int64_t IH = w->in[1], IW = w->in[2], OH = w->out[1], OW = w->out[2], KH = w->k[1], KW = w->k[2];
    for (int64_t c = 0; c < channels; c++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                float v = bias[c];
                for (int64_t kh = 0; kh < KH; kh++)
                    for (int64_t kw = 0; kw < KW; kw++) {
                        int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1], iw = ow * w->s[2] - w->pb[2] + kw * w->d[2];
                        if (ih < 0 || ih >= IH || iw < 0 || iw >= IW) continue;
                        float p = wt[c * KH * KW + kh * KW + kw] * x[c * IH * IW + ih * IW + iw];
                        v = v + p;
                    }
                want[c * OH * OW + oh * OW + ow] = v;
            }
}

/* Out of memory for its table, bf__dw8_run says it did not run and leaves
 * y as it was (bf__conv_direct's rows path then computes the step); with
 * memory, it runs and gives the plain sequence written here: bias, then
 * v + w * x over the taps inside, in (kh, kw) order. A 3x3 stride-2 Conv,
 * 2 channels of 9x10, pads 1: the phases and the masks both in the table. */
void conv_dw8_without_memory_leaves_y(void **state)
{
    (void)state;
#if defined(__x86_64__) && defined(__GNUC__)
    if (bf__simd_cpu() < BF__SIMD_AVX2) skip();
    bf__conv_params cp = {.w = win(9, 10, 3, 3, 2, 1, 1, 1, 1, 1)};
    cp.n = 1, cp.c = cp.m = cp.group = 2, cp.cg = cp.mg = 1;
    cp.isp = 90, cp.osp = cp.w.out[1] * cp.w.out[2], cp.ksp = cp.kc = 9;
    cp.path = BF__CONV_DEPTHWISE, cp.simd = BF_SGEMM_AVX2;
    assert_int_equal(cp.osp, 25);   /* 5x5 out */
    float x[180], wt[18], bias[2] = {0.25f, -1.5f}, y[50], want[50];
    dw_inputs(x, 180, wt, 18);
    dw_chain(&cp.w, 2, x, wt, bias, want);
    for (int i = 0; i < 50; i++) y[i] = -7.0f;
    bf_test_alloc_fail_after(0);
    int ran = bf__dw8_run(&cp, x, wt, bias, NULL, y, 0, 2);
    long refused = bf_test_alloc_failures();
    bf_test_alloc_fail_after(-1);
    assert_int_equal(ran, 0);
    assert_true(refused >= 1);
    for (int i = 0; i < 50; i++) assert_true(y[i] == -7.0f);
    assert_int_equal(bf__dw8_run(&cp, x, wt, bias, NULL, y, 0, 2), 1);
    assert_memory_equal(y, want, sizeof want);
#else
    skip();
#endif
}

/* Which depthwise Convs the channels-in-lanes kernel takes
 * (linalg_conv_dwc8.c, bf__dwc8_want): AVX2 only, 2-D, input maps of at
 * most 4096 positions at stride 1 and 16384 past it, outputs of at most
 * 16384, any padding and dilation. */
void conv_dwc8_takes_its_shapes(void **state)
{
    (void)state;
#if defined(__x86_64__) && defined(__GNUC__)
    bf__conv_params cp = {.w = win(64, 64, 3, 3, 1, 1, 1, 1, 1, 1)};
    cp.n = 1, cp.c = cp.m = cp.group = 8, cp.cg = cp.mg = 1, cp.kc = 9;
    cp.path = BF__CONV_DEPTHWISE, cp.simd = BF_SGEMM_AVX2;
    cp.isp = 4096, cp.osp = 4096;
    assert_true(bf__dwc8_want(&cp));
    cp.w = win(65, 64, 3, 3, 1, 1, 1, 1, 1, 1), cp.isp = cp.osp = 4160;   /* past 4096 at stride 1 */
    assert_false(bf__dwc8_want(&cp));
    cp.w = win(128, 128, 3, 3, 2, 1, 1, 1, 1, 1), cp.isp = 16384, cp.osp = 64 * 64;
    assert_true(bf__dwc8_want(&cp));
    cp.w = win(129, 128, 3, 3, 2, 1, 1, 1, 1, 1), cp.isp = 129 * 128, cp.osp = 65 * 64;
    assert_false(bf__dwc8_want(&cp));
    cp.w = win(14, 14, 5, 5, 1, 2, 4, 4, 4, 4), cp.isp = cp.osp = 196;   /* dilation, a wider kernel */
    assert_true(bf__dwc8_want(&cp));
    /* an output past 16384 positions (its buffer holds 8 output planes):
     * 8x8 with pads 60 is 126x126 = 15876 out, with pads 70 146x146 */
    cp.w = win(8, 8, 3, 3, 1, 1, 60, 60, 60, 60), cp.isp = 64, cp.osp = cp.w.out[1] * cp.w.out[2];
    assert_int_equal(cp.osp, 15876);
    assert_true(bf__dwc8_want(&cp));
    cp.w = win(8, 8, 3, 3, 1, 1, 70, 70, 70, 70), cp.osp = cp.w.out[1] * cp.w.out[2];
    assert_false(bf__dwc8_want(&cp));
    cp.simd = BF_SGEMM_AVX512;   /* that level keeps its own kernels and bits */
    assert_false(bf__dwc8_want(&cp));
    cp.simd = BF_SGEMM_REF;
    assert_false(bf__dwc8_want(&cp));
    cp.simd = BF_SGEMM_AVX2, cp.path = BF__CONV_IM2COL;
    assert_false(bf__dwc8_want(&cp));
    cp.path = BF__CONV_DEPTHWISE, cp.w.in[0] = cp.w.out[0] = 2;   /* 3-D */
    assert_false(bf__dwc8_want(&cp));
#else
    skip();
#endif
}

/* bf__dwc8_run on 10 channels of a 5x6 map, 3x3 stride 1, pads 1: one
 * block of 8, channels 8 and 9 left to the caller (y untouched there, and
 * it returns 8); out of memory for its buffer it runs none (returns 0, y
 * untouched); with memory each output is the plain sequence written here:
 * bias, then v + w * x over the taps inside, in (kh, kw) order. */
void conv_dwc8_runs_whole_blocks(void **state)
{
    (void)state;
#if defined(__x86_64__) && defined(__GNUC__)
    if (bf__simd_cpu() < BF__SIMD_AVX2) skip();
    bf__conv_params cp = {.w = win(5, 6, 3, 3, 1, 1, 1, 1, 1, 1)};
    cp.n = 1, cp.c = cp.m = cp.group = 10, cp.cg = cp.mg = 1;
    cp.isp = cp.osp = 30, cp.ksp = cp.kc = 9;
    cp.path = BF__CONV_DEPTHWISE, cp.simd = BF_SGEMM_AVX2;
    float x[300], wt[90], bias[10], y[300], want[300];
    dw_inputs(x, 300, wt, 90);
    for (int c = 0; c < 10; c++) bias[c] = 0.125f * (float)c - 0.5f;
    dw_chain(&cp.w, 8, x, wt, bias, want);
    for (int i = 240; i < 300; i++) want[i] = -7.0f;   /* channels 8 and 9: the caller's */
    for (int i = 0; i < 300; i++) y[i] = -7.0f;
    bf_test_alloc_fail_after(0);
    int64_t left = bf__dwc8_run(&cp, x, wt, bias, NULL, y, 0, 10);
    long refused = bf_test_alloc_failures();
    bf_test_alloc_fail_after(-1);
    assert_int_equal(left, 0);
    assert_true(refused >= 1);
    for (int i = 0; i < 300; i++) assert_true(y[i] == -7.0f);
    assert_int_equal(bf__dwc8_run(&cp, x, wt, bias, NULL, y, 0, 10), 8);
    assert_memory_equal(y, want, sizeof want);
    assert_int_equal(bf__dwc8_run(&cp, x, wt, bias, NULL, y, 2, 9), 2);   /* 7 channels: no block */
#else
    skip();
#endif
}

/* bf__conv_pw_images on 7x7 maps (ceil(192 / 49) = 4 images a product,
 * 2 here: the batch) by level: AVX2 at any K up to a product of
 * BF__PW_TMPMAX_AVX2 floats (2 x 49 x 5349 = 524,202 <= 524,288; 5350 rows
 * 524,300 past it), AVX-512 only past K 256 and up to BF__PW_TMPMAX
 * (1337 rows 131,026 <= 131,072; 1338 past), the reference never. */
void conv_pw_images_by_level(void **state)
{
    (void)state;
#if defined(__x86_64__) && defined(__GNUC__)
    bf__conv_params cp = {.w = win(7, 7, 1, 1, 1, 1, 0, 0, 0, 0)};
    cp.n = 2, cp.group = 1, cp.osp = 49, cp.path = BF__CONV_POINTWISE;
    cp.simd = BF_SGEMM_AVX2, cp.kc = 16;
    cp.mg = 5349;
    assert_int_equal(bf__conv_pw_images(&cp), 2);
    cp.mg = 5350;
    assert_int_equal(bf__conv_pw_images(&cp), 1);
    cp.simd = BF_SGEMM_AVX512, cp.mg = 100;
    assert_int_equal(bf__conv_pw_images(&cp), 1);   /* K 16: not past 256 */
    cp.kc = 300, cp.mg = 1337;
    assert_int_equal(bf__conv_pw_images(&cp), 2);
    cp.mg = 1338;
    assert_int_equal(bf__conv_pw_images(&cp), 1);
    cp.simd = BF_SGEMM_REF, cp.mg = 100;
    assert_int_equal(bf__conv_pw_images(&cp), 1);
    /* AVX2 on maps of 96-255 positions short of whole 16-column panels
     * (14x14: 196 = 12 x 16 + 4): 16 / gcd(osp, 16) images (4 for 196, 16
     * for 13x13's 169), fewer where the batch is smaller or the product
     * would pass BF__PW_TMPMAX_AVX2 (524,288 floats: 668 rows x 4 x 196 =
     * 523,712 fit four, 669 rows three, 2,675 rows not two); whole panels
     * (16x16) or 256 positions and more: one image a product */
    cp.w = win(14, 14, 1, 1, 1, 1, 0, 0, 0, 0);
    cp.simd = BF_SGEMM_AVX2, cp.n = 8, cp.osp = 196, cp.kc = 384, cp.mg = 64;
    assert_int_equal(bf__conv_pw_images(&cp), 4);
    cp.n = 3;
    assert_int_equal(bf__conv_pw_images(&cp), 3);
    cp.n = 8, cp.mg = 668;
    assert_int_equal(bf__conv_pw_images(&cp), 4);
    cp.mg = 669;
    assert_int_equal(bf__conv_pw_images(&cp), 3);
    cp.mg = 2675;
    assert_int_equal(bf__conv_pw_images(&cp), 1);
    cp.mg = 64, cp.osp = 169;
    assert_int_equal(bf__conv_pw_images(&cp), 8);
    cp.n = 20;
    assert_int_equal(bf__conv_pw_images(&cp), 16);
    cp.osp = 100;
    assert_int_equal(bf__conv_pw_images(&cp), 4);
    cp.osp = 256;
    assert_int_equal(bf__conv_pw_images(&cp), 1);
    cp.osp = 260;
    assert_int_equal(bf__conv_pw_images(&cp), 1);
    cp.osp = 196, cp.simd = BF_SGEMM_AVX512;   /* that level: one image a product past 96 positions */
    assert_int_equal(bf__conv_pw_images(&cp), 1);
#else
    skip();
#endif
}
