/* Conv's fast paths give the bits of a plain reference written here from
 * the contract each path keeps (docs/ENGINE.md, "The convolution path"),
 * on awkward shapes, on every CPU path this machine has: the scalar
 * reference (BITFLIP_SIMD=ref), AVX2 (BITFLIP_SIMD=avx2), AVX-512
 * (BITFLIP_SIMD=avx512: AVX2's bits where the CPU stops there). Not the
 * default (unset) as well: that is the best path the CPU has, which
 * BITFLIP_SIMD=avx512 already runs (lowered as the default is), the same
 * code on the same inputs (the random shapes, which skip avx512, run
 * unset). Which path a shape takes is the op's own rule; what each computes per output element is:
 *
 *   im2col (any Conv but the two below): s = 0, then s = fma(w, x, s) over
 *     the taps in the column matrix's row order (blocks of 16 input
 *     channels, tap-major within a block), a tap in the padding
 *     contributing fma(w, 0, s); then y = s + bias (+ 0 without a bias)
 *   1x1, stride 1, no padding: the same chain over the channels in order,
 *     then y = s + bias, or y = s without a bias
 *   depthwise (one input and one output channel per group): y = bias (or
 *     0), then y = y + w * x (a rounded product, then a rounded sum) over
 *     the taps in (kh, kw) order, taps in the padding skipped
 *
 * With an activation fused into the Conv (a plan's Relu or Clip run in the
 * Conv's epilogue, bf__act), every path must give the reference followed
 * by the activation written here: v < lo ? lo : v, then > hi ? hi : it,
 * for Relu and for Clip with both bounds, the lower only, the upper only,
 * and crossed bounds (lo > hi: every element hi); and HardSwish, torch's
 * x * clamp(x + 3, 0, 6) / 6 (a pass after the paths, linalg_conv.c).
 *
 * With a residual Add fused too (Conv -> Add -> activation, op.h), every
 * path must give the Add op's own bits on the reference's output, then the
 * activation (the product paths add it in their epilogue). With a
 * BatchNormalization fused before them (op.h, bf__ctx's bn), the BN's
 * fmaf(v, a, b) with PyTorch's a and b comes first (linalg_conv_pwseg.c
 * computes all of it in the product's epilogue on the 1x1 maps of 256-1024
 * positions).
 *
 * The shapes are sized so that the column-matrix-free product (one image
 * per product; on AVX-512 at stride 1 the product straight off the padded
 * planes, no panel packed) and the old batched one both run, with panels that wrap
 * output rows (outputs narrower than 16), a K past the 1024-deep stack
 * panel, groups, stride 2, dilation, asymmetric padding. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#if defined(__x86_64__)
#include <immintrin.h>   /* ref_chain_hw */
#endif

#include "base/simd.h"
#include "exec/ops/linalg_pwseg.h"
#include "exec/ops/sgemm.h"
#include "test_conv_exact/test_conv_exact.h"


/* The im2col and 1x1 paths' chain for output (i, j) of one output channel
 * (weights wo) over its group's input planes xg: s = fma(w, x, s) in the
 * column matrix's row order, a padding tap contributing fma(w, 0, s). Written
 * once for the two copies below. */
#define REF_CHAIN_BODY(FMA)                                                                              \
    float s = 0.0f;                                                                                      \
    for (int64_t cb = 0; cb < cg; cb += 16) {                                                            \
        int64_t width = cg - cb < 16 ? cg - cb : 16;                                                     \
        for (int64_t tap = 0; tap < ksp; tap++)                                                          \
            for (int64_t c = cb; c < cb + width; c++) {                                                  \
                int64_t a = tap / k->kw, e = tap % k->kw;                                                \
                int64_t ih = i * k->s - k->pads[0] + a * k->d, iw = j * k->s - k->pads[1] + e * k->d;    \
                int in = ih >= 0 && ih < k->h && iw >= 0 && iw < k->w;                                   \
                float xv = in ? xg[(c * k->h + ih) * k->w + iw] : 0.0f;                                  \
                s = FMA(wo[c * ksp + tap], xv, s);                                                       \
            }                                                                                            \
    }                                                                                                    \
    return s;

static float ref_chain(const conv_case *k, const float *xg, const float *wo, int64_t cg, int64_t ksp, int64_t i,
                       int64_t j)
{
    REF_CHAIN_BODY(fmaf)
}

/* The same chain with the FMA instruction where the CPU has one: this file is
 * built for any x86-64, where libm's fmaf is a call per product (the intrinsic
 * is the instruction at every optimisation level). Measured (24th session,
 * alternated, loaded host): the test 15.4 -> 13.6 CPU-s in the release build,
 * 31 -> 29 under ASan; the rest is the engine's own scalar path
 * (BITFLIP_SIMD=ref), which calls fmaf by design. Both round once per
 * product and sum, so both copies give the same bits on every CPU: which one
 * runs changes the test's speed, never its reference. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("fma"))) static inline float fma_hw(float a, float b, float c)
{
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

__attribute__((target("fma"))) static float ref_chain_hw(const conv_case *k, const float *xg, const float *wo,
                                                         int64_t cg, int64_t ksp, int64_t i, int64_t j)
{
    REF_CHAIN_BODY(fma_hw)
}
#define HW_FMA_AVAILABLE() __builtin_cpu_supports("fma")
#else
#define ref_chain_hw ref_chain
#define HW_FMA_AVAILABLE() 0
#endif

/* The reference of the contract above; y is [n, m, oh, ow]. */
static void ref_conv(const conv_case *k, const float *x, const float *wt, const float *b, float *y, int64_t oh,
                     int64_t ow)
{
    int64_t cg = k->c / k->group, mg = k->m / k->group, ksp = k->kh * k->kw;
    int pointwise = k->kh == 1 && k->kw == 1 && k->s == 1 && !k->pads[0] && !k->pads[1] && !k->pads[2] && !k->pads[3];
    int depthwise = cg == 1 && mg == 1 && k->kw <= 16;
    int hw_fma = HW_FMA_AVAILABLE();
    for (int64_t n = 0; n < k->n; n++)
        for (int64_t oc = 0; oc < k->m; oc++) {
            int64_t g = oc / mg;
            const float *wo = wt + oc * cg * ksp;
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    float v;
                    if (depthwise) {
                        const float *xc = x + (n * k->c + g) * k->h * k->w;
                        v = k->bias ? b[oc] : 0.0f;
                        for (int64_t a = 0; a < k->kh; a++)
                            for (int64_t e = 0; e < k->kw; e++) {
                                int64_t ih = i * k->s - k->pads[0] + a * k->d, iw = j * k->s - k->pads[1] + e * k->d;
                                if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                                float t = wo[a * k->kw + e] * xc[ih * k->w + iw];
                                v = v + t;
                            }
                    } else {
                        const float *xg = x + (n * k->c + g * cg) * k->h * k->w;
                        float s = hw_fma ? ref_chain_hw(k, xg, wo, cg, ksp, i, j) : ref_chain(k, xg, wo, cg, ksp, i, j);
                        v = pointwise && !k->bias ? s : s + (k->bias ? b[oc] : 0.0f);
                    }
                    y[((n * k->m + oc) * oh + i) * ow + j] = v;
                }
        }
}

/* The activations: Relu, Clip(-0.2, 0.3), Clip(min 0.1), Clip(max -0.05), Clip(0.5, -0.5), HardSwish. */
const bf__act acts[] = {{.lo = 0.0f, .hi = INFINITY},      {.lo = -0.2f, .hi = 0.3f},
                               {.lo = 0.1f, .hi = INFINITY},      {.lo = -INFINITY, .hi = -0.05f},
                               {.lo = 0.5f, .hi = -0.5f},          {.lo = -INFINITY, .hi = INFINITY, .hswish = 1}};
const size_t n_acts = sizeof acts / sizeof *acts;
#define N_ACTS n_acts

float ref_act(const bf__act *a, float v)
{
    if (a->hswish) {   /* torch's x * clamp(x + 3, 0, 6) / 6 (docs/NUMERICS.md), NaN passing the clamp */
        float t = v + 3.0f;
        if (t < 0.0f) t = 0.0f;
        if (t > 6.0f) t = 6.0f;
        return v * t / 6.0f;
    }
    if (v < a->lo) v = a->lo;
    if (v > a->hi) v = a->hi;
    return v;
}


static void case_open(const conv_case *k, prepared *p)
{
    int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {k->m, k->c / k->group, k->kh, k->kw}, bd[1] = {k->m};
    p->k = k;
    p->x = th_tensor_rand(11, 4, xd), p->wt = th_tensor_rand(12, 4, wd), p->b = th_tensor_rand(13, 1, bd);
    /* a few exact zeros and negative zeros, where the order of +0 and -0 shows */
    float *xv = p->x.data;
    for (int64_t i = 0; i < k->n * k->c * k->h * k->w; i += 7) xv[i] = (i / 7) % 2 ? -0.0f : 0.0f;
    if (k->special == 1) ((float *)p->wt.data)[0] = INFINITY;
    if (k->special >= 2) {
        float *wv = p->wt.data, *bv = p->b.data;
        for (int64_t i = 0; i < k->n * k->c * k->h * k->w; i++) xv[i] = -1e-30f;
        for (int64_t i = 0; i < k->m * (k->c / k->group) * k->kh * k->kw; i++) wv[i] = (fabsf(wv[i]) + 0.01f) * 1e-20f;
        for (int64_t i = 0; i < k->m; i++) bv[i] = k->special == 2 && i % 2 == 0 ? -0.0f : 0.0f;
    }
    p->oh = (k->h + k->pads[0] + k->pads[2] - k->d * (k->kh - 1) - 1) / k->s + 1;
    p->ow = (k->w + k->pads[1] + k->pads[3] - k->d * (k->kw - 1) - 1) / k->s + 1;
    p->numel = k->n * k->m * p->oh * p->ow;
    p->ref = malloc(sizeof(float) * (size_t)p->numel + 1);
    assert_non_null(p->ref);
    ref_conv(k, p->x.data, p->wt.data, p->b.data, p->ref, p->oh, p->ow);
}

static void case_close(prepared *p)
{
    free(p->ref);
    th_tensor_free(&p->x), th_tensor_free(&p->wt), th_tensor_free(&p->b);
}

void case_attrs_of(const conv_case *k, case_attrs *ca)
{
    ca->ks[0] = k->kh, ca->ks[1] = k->kw, ca->st[0] = ca->st[1] = k->s, ca->dl[0] = ca->dl[1] = k->d;
    ca->a[0] = th_attr_ints("kernel_shape", ca->ks, 2), ca->a[1] = th_attr_ints("strides", ca->st, 2);
    ca->a[2] = th_attr_ints("dilations", ca->dl, 2), ca->a[3] = th_attr_ints("pads", k->pads, 4);
    ca->a[4] = th_attr_int("group", k->group);
}

void case_run_of(const prepared *p, case_run *cr)
{
    const conv_case *k = p->k;
    case_attrs_of(k, &cr->ca);
    cr->in[0] = &p->x, cr->in[1] = &p->wt, cr->in[2] = k->bias ? &p->b : NULL;
    cr->nin = k->bias ? 3 : 2;
    cr->od[0] = k->n, cr->od[1] = k->m, cr->od[2] = p->oh, cr->od[3] = p->ow;
}

/* q: the activation (acts[q]), or N_ACTS for none */
static void run_case(const prepared *p, const char *level, size_t q)
{
    const conv_case *k = p->k;
    case_run cr;
    case_run_of(p, &cr);
    bf_tensor out;
    bf_error err = {0};
    if (level) setenv("BITFLIP_SIMD", level, 1);
    else unsetenv("BITFLIP_SIMD");
    const bf__act *act = q < N_ACTS ? &acts[q] : NULL;
    bf_status stt = th_run_op_act("Conv", 13, cr.ca.a, 5, cr.in, cr.nin, &out, 1, act, &err);
    unsetenv("BITFLIP_SIMD");
    if (stt != BF_OK) fail_msg("%s: %s", k->what, err.msg);
    int64_t numel = p->numel;
    assert_int_equal(out.dims[2], p->oh);
    assert_int_equal(out.dims[3], p->ow);
    float *want = malloc(sizeof(float) * (size_t)numel + 1);
    assert_non_null(want);
    memcpy(want, p->ref, sizeof(float) * (size_t)numel);
    if (act)
        for (int64_t i = 0; i < numel; i++) want[i] = ref_act(act, want[i]);
    if (memcmp(want, out.data, sizeof(float) * (size_t)numel) != 0) {
        const float *got = out.data;
        int64_t i = 0;
        while (memcmp(&want[i], &got[i], sizeof(float)) == 0) i++;
        fail_msg("%s (BITFLIP_SIMD=%s, activation %zu): element %lld is %.9g, the reference %.9g", k->what,
                 level ? level : "unset", q, (long long)i, got[i], want[i]);
    }
    free(want);
    th_free(&out, 1);
}

const conv_case cases[] = {
    {"3x3 stride 1, asymmetric pads (padded planes)", 2, 13, 31, 29, 19, 1, 3, 3, 1, 1, {1, 2, 0, 1}, 1, 0},
    {"3x3 stride 1, no bias (+0 added)", 1, 13, 31, 29, 19, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 0, 0},
    {"3x3 stride 2, dilation 2 (column matrix, bias in the kernel)", 2, 29, 31, 29, 19, 1, 3, 3, 2, 2, {1, 2, 0, 1}, 1, 0},
    {"groups 2, 3x3 stride 1", 1, 16, 37, 37, 6, 2, 3, 3, 1, 1, {1, 1, 1, 1}, 0, 0},
    {"output 3 wide: panels wrap six output rows", 1, 64, 40, 3, 5, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"output 1 wide, 3x1 kernel", 1, 64, 300, 1, 5, 1, 3, 1, 1, 1, {1, 0, 1, 0}, 1, 0},
    {"K = 1170 past the stack panel", 1, 130, 8, 8, 7, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"7x7 stride 2, 3 channels (a first layer)", 1, 3, 64, 61, 9, 1, 7, 7, 2, 1, {3, 3, 3, 3}, 1, 0},
    /* stride 1 on AVX-512, one image a product: straight off the padded
     * planes (linalg_conv_planes.c), positions in the planes' coordinates,
     * the padding columns' lanes dropped; blocks of 8 rows x 48 positions
     * where the padded rows are 48 wide or more, else 12 x 32; K cut at
     * each block of 16 channels, the sums kept between */
    {"3x3 stride 1, 50 wide (8 x 48 blocks), 40 channels (three blocks of K), an Inf weight", 2, 40, 9, 50, 13, 1, 3,
     3, 1, 1, {1, 1, 1, 1}, 1, 1},
    {"3x3 stride 1, 14x14, 33 channels, 25 rows (blocks of 9, 8, 8), no bias", 2, 33, 14, 14, 25, 1, 3, 3, 1, 1,
     {1, 1, 1, 1}, 0, 0},
    {"5x5 stride 1, pads 2 and 1, 61 wide, 17 rows", 1, 18, 6, 61, 17, 1, 5, 5, 1, 1, {2, 1, 2, 1}, 1, 1},
    {"3x3 stride 1, no padding, 12 wide: each row's last two lanes dropped", 1, 20, 12, 12, 12, 1, 3, 3, 1, 1,
     {0, 0, 0, 0}, 1, 0},
    /* the planes written whole, a padded row 16 floats at a time (AVX-512):
     * chunks of padding alone; rows past 32 chunks zeroed and copied */
    {"3x3 stride 1, pads 17 left and 20 right: chunks of the padded rows all padding", 2, 5, 6, 10, 7, 1, 3, 3, 1, 1,
     {2, 17, 1, 20}, 1, 0},
    {"3x3 stride 1, 516 wide: padded rows past 512 floats, zeroed then copied", 1, 3, 4, 516, 5, 1, 3, 3, 1, 1,
     {1, 1, 1, 1}, 1, 1},
    /* horizontal stride 2 on AVX-512: panels gathered from the padded planes,
     * a permute per run of outputs (runs wrap output rows, end the input) */
    {"3x3 stride 2, outputs 7 wide: a panel spans three output rows", 1, 20, 14, 14, 13, 1, 3, 3, 2, 1, {1, 1, 1, 1}, 1, 0},
    {"3x3 stride 2, asymmetric pads, odd sizes, an Inf weight", 1, 17, 31, 33, 11, 1, 3, 3, 2, 1, {0, 1, 2, 0}, 0, 1},
    {"3x3 stride 2, K = 1170 past the stack panel", 1, 130, 9, 9, 7, 1, 3, 3, 2, 1, {1, 1, 1, 1}, 1, 0},
    {"1x3 stride 2, output 1 wide", 1, 5, 6, 3, 4, 1, 1, 3, 2, 1, {0, 0, 0, 0}, 1, 0},
    /* stride 2 and no padding on AVX-512: the panels gathered from x in
     * place, no planes copied (several images a product where one group
     * lays them out as the planes would; with groups, planes again) */
    {"1x1 stride 2 in place, 13x14 to 7x7, 5 images (four a product, then one), an Inf weight", 5, 40, 13, 14, 24, 1, 1,
     1, 2, 1, {0, 0, 0, 0}, 1, 1},
    {"1x1 stride 2 in place, 57x56 to 29x28, 2 images, no bias", 2, 21, 57, 56, 18, 1, 1, 1, 2, 1, {0, 0, 0, 0}, 0, 0},
    {"3x3 stride 2 in place, 15x16 to 7x7, 3 images in one product", 3, 20, 15, 16, 12, 1, 3, 3, 2, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1 stride 2, groups 2 on 14x14 to 7x7, 3 images: planes copied", 3, 32, 14, 14, 16, 2, 1, 1, 2, 1, {0, 0, 0, 0}, 1,
     1},
    {"1x1 stride 2 with pads 1: planes copied", 2, 19, 12, 13, 10, 1, 1, 1, 2, 1, {1, 1, 1, 1}, 1, 0},
    /* small maps: several images side by side in one product (four of 7x7) */
    {"7x7 maps, 5 images: four in one product, then one", 5, 64, 7, 7, 100, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"3x3 stride 2 to 7x7, 3 images in one product, no bias", 3, 64, 14, 14, 100, 1, 3, 3, 2, 1, {1, 1, 1, 1}, 0, 0},
    {"groups 2 on 7x7 maps, 3 images in one product", 3, 128, 7, 7, 200, 2, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1},
    {"small, several images per product", 3, 5, 9, 11, 7, 1, 3, 3, 1, 1, {1, 0, 2, 1}, 1, 0},
    /* the output channels in the lanes, the input broadcast (linalg_conv_bcast.c:
     * M a multiple of 16, K of 576 or more; stride 2, or stride 1 on padded
     * rows 64 wide or narrower): on AVX-512 blocks of 6 positions of any
     * image x 16-64 channels, each block of 16 channels' weights packed as
     * 16 x 16 tiles transposed, or one float at a time; the epilogue on
     * 16 x 16 tiles of sums transposed where 16 positions are consecutive
     * outputs of one image, else scattered (a tile's last positions, an
     * image's edge: 7x7 maps of several images a call). At AVX2
     * linalg_conv_bcast8.c's: 6 positions x 16 channels a slice, the row
     * block's slices in turn, K in chunks of 32 channels (72: a last block of
     * 8 channels, its runs 8 k terms), weights as 8 x 8 tiles or a float at a
     * time, the epilogue on 8 x 8 tiles or a position's 8 channels */
    {"bcast: 7x7 maps, 9 images (8 a call, then 1), 48 rows (three vectors), an Inf weight", 9, 128, 7, 7, 48, 1, 3, 3, 1,
     1, {1, 1, 1, 1}, 1, 1},
    {"bcast: 3x3 stride 2 to 7x7, 80 channels and rows (64 + 16), no bias", 2, 80, 14, 14, 80, 1, 3, 3, 2, 1,
     {1, 1, 1, 1}, 0, 0},
    {"bcast: 3x3 stride 2, asymmetric pads, odd sizes, groups 2 of 32 rows", 2, 256, 13, 11, 64, 2, 3, 3, 2, 1,
     {0, 1, 2, 0}, 1, 1},
    {"bcast: 14x14, 72 channels (a last chunk of 8, packed a float at a time), 32 rows", 1, 72, 14, 14, 32, 1, 3, 3, 1,
     1, {1, 1, 1, 1}, 1, 0},
    {"bcast: 3x3 stride 2 dilation 2, 64 channels, 16 rows", 1, 64, 15, 17, 16, 1, 3, 3, 2, 2, {2, 1, 1, 2}, 1, 0},
    /* the padding taps left out where W is the model's copy packed once
     * and finite and no bias is -0 (bc_sched): the -0 sums where that
     * would show, and shapes whose positions fall in several classes (top
     * and bottom rows, left and right columns; 5x5's two rows and columns
     * of padding; K in chunks, a class's k terms in ranges across them) */
    {"bcast: -0 sums, a -0 bias in every other row: every tap computed", 2, 128, 7, 7, 48, 1, 3, 3, 1, 1, {1, 1, 1, 1},
     1, 2},
    {"bcast: -0 sums, +0 biases: the padding taps left out", 2, 128, 7, 7, 48, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 3},
    {"bcast: 9x9, 152 channels (chunks of 128 and 24), 2 images, 48 rows: the padding taps left out", 2, 152, 9, 9, 48,
     1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"bcast: 5x5 pads 2 and 1, 11x13, 32 channels, 3 images, 64 rows", 3, 32, 11, 13, 64, 1, 5, 5, 1, 1, {2, 1, 1, 2},
     1, 0},
    {"bcast: 3x3 stride 2 dilation 2, asymmetric pads, 20x19, 80 channels, 32 rows", 2, 80, 20, 19, 32, 1, 3, 3, 2, 2,
     {3, 0, 1, 2}, 1, 0},
    /* chunks of K of up to 128 channels (8 blocks of 16) for 3x3: 152
     * channels run as a chunk of 128, then one of 16 + 8, the sums kept
     * between; 272 at stride 2 as 128, 128, 16 */
    {"bcast: 9x9, 152 channels (chunks of 128 and 24), 2 images, 32 rows, an Inf weight", 2, 152, 9, 9, 32, 1, 3, 3, 1,
     1, {1, 1, 1, 1}, 1, 1},
    {"bcast: 3x3 stride 2, 272 channels (chunks of 128, 128, 16), 80 rows (64 + 16), no bias", 1, 272, 10, 9, 80, 1, 3,
     3, 2, 1, {1, 1, 1, 1}, 0, 0},
    /* 784 positions of one image a call: two tiles of 392, each running a
     * row block's weights (the copy packed once: prefetched for the next
     * row block while the first runs) */
    {"bcast: 28x28, 64 channels, 2 images (two tiles a call), 80 rows (64 + 16), an Inf weight", 2, 64, 28, 28, 80, 1,
     3, 3, 1, 1, {1, 1, 1, 1}, 1, 1},
    /* a first Conv (linalg_conv_stem.c: under 16 input channels, K up to
     * 160, M a multiple of 16 on AVX-512, of 8 on AVX2, horizontal stride
     * 2): on AVX-512 blocks of 12 positions x 32 channels (16 x 16 for a
     * last 16), on AVX2 6 x 16 (12 x 8 for a last 8), tiles of 48
     * positions stored through 16 x 16 (8 x 8) transposes, a tile's last
     * rows masked; blocks inside one output row read one pointer, the
     * others (rows wrapping, 1 wide, past the image's end) a pointer a
     * position */
    {"stem: 7x7 stride 2, 3 channels, 64 rows, 45x52, pads 3, 2 images, an Inf weight", 2, 3, 45, 52, 64, 1, 7, 7, 2, 1,
     {3, 3, 3, 3}, 1, 1},
    {"stem: 3x3 stride 2, 3 -> 48 (a last 16 rows), asymmetric pads, no bias", 1, 3, 37, 41, 48, 1, 3, 3, 2, 1,
     {0, 1, 2, 0}, 0, 0},
    {"stem: 5x5 stride 2 dilation 2, 6 -> 16, K = 150", 1, 6, 29, 23, 16, 1, 5, 5, 2, 2, {2, 2, 1, 3}, 1, 1},
    {"stem: 3x3 stride 2, 1 wide output, 3 -> 32", 2, 3, 40, 2, 32, 1, 3, 3, 2, 1, {1, 1, 1, 0}, 1, 0},
    {"stem: groups 2 of 2 -> 16, 3x3 stride 2", 1, 4, 19, 19, 32, 2, 3, 3, 2, 1, {1, 1, 1, 1}, 1, 0},
    {"stem: 3x3 stride 2, 3 -> 40 (AVX2: a last 8 rows), 31x29 (a last tile of 35), 3 images, an Inf weight", 3, 3, 61,
     58, 40, 1, 3, 3, 2, 1, {1, 1, 1, 1}, 1, 1},
    {"1x1 stride 1 with bias (bias in the kernel)", 2, 17, 5, 7, 13, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1 stride 1, no bias", 2, 17, 5, 7, 13, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
    {"1x1 stride 2", 1, 200, 20, 20, 8, 1, 1, 1, 2, 1, {0, 0, 0, 0}, 1, 0},
    /* 1x1 on AVX-512 (linalg_conv_pointwise.c): 8-32 rows over 784 or more
     * positions, B read in place, 32 columns by near-equal blocks of up to
     * 12 rows, the last columns masked (tails of 3 and of 17); and small maps
     * with K past 256, several images side by side in one product, panels
     * across images (K of 256 or less: one image a product) */
    {"1x1, 24 rows (blocks of 12) over 48x48: B in place, an Inf weight", 2, 37, 48, 48, 24, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"1x1, 25 rows (blocks of 9, 8, 8) over 45x47: a 3-column tail", 1, 20, 45, 47, 25, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1, 8 rows from 3 channels over 61x37: a 17-column tail", 1, 3, 61, 37, 8, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1, 32 rows over 28x28 (784 positions, the fewest it takes)", 2, 30, 28, 28, 32, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1, 32 rows (blocks of 11, 11, 10) over 20x112", 1, 16, 20, 112, 32, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1, groups 2 of 12 rows over 48x48", 1, 18, 48, 48, 24, 2, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1, 24 rows over 48x48, no bias (the product, then + 0)", 1, 9, 48, 48, 24, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
    {"1x1 on 7x7 maps, 5 images: four in one product, then one; an Inf weight", 5, 300, 7, 7, 30, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 1, 1},
    {"1x1 on 3x5 maps, 9 images in one product: panels across three images", 9, 260, 3, 5, 17, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 1, 0},
    {"1x1 on 1x1 maps, 20 images: a panel of 16 images", 20, 270, 1, 1, 12, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    /* maps of one position (a squeeze-excitation block's 1x1 Convs on
     * [N, C, 1, 1]) side by side at any K, 16 images a product */
    {"1x1 on 1x1 maps, 18 images, K 240 (16 a product, then 2), 96 rows, an Inf weight", 18, 240, 1, 1, 96, 1, 1, 1,
     1, 1, {0, 0, 0, 0}, 1, 1},
    {"1x1 on 1x1 maps, 5 images, K 24, 30 rows", 5, 24, 1, 1, 30, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1 on 1x1 maps, K 24 without a bias: one image a product", 4, 24, 1, 1, 32, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
    {"1x1 on 1x1 maps, K 300, 48 rows (the lanes' shape but for one position)", 17, 300, 1, 1, 48, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 1, 1},
    {"1x1 groups 2 on 7x7 maps, 3 images", 3, 520, 7, 7, 14, 2, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1 on 7x7 maps, 3 images, no bias: one image a product", 3, 300, 7, 7, 14, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
    {"1x1 on 7x7 maps, K = 1030 past the stack panel: one image a product", 2, 1030, 7, 7, 9, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 1, 0},
    {"1x1 on 7x7 maps, 1400 rows: a product past 512 KiB, one image a product", 2, 260, 7, 7, 1400, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 1, 0},
    /* on AVX2 at any K (linalg_conv_pointwise.c, pw_pack_avx2): panels that
     * take their columns from two or more images, a last panel of few */
    {"1x1 on 7x7 maps, K 24, 5 images (four a product, then one), an Inf weight", 5, 24, 7, 7, 40, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 1, 1},
    {"1x1 on 3x3 maps, K 40, 9 images: panels of two and three images' columns", 9, 40, 3, 3, 20, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 1, 0},
    {"1x1 on 7x7 maps, K = 256: one image a product", 3, 256, 7, 7, 9, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    /* 1x1 on AVX-512 with the output channels in the lanes (linalg_conv_pwlanes.c:
     * M a multiple of 16, a bias, maps under 96 positions, K past 256): blocks
     * of 6 positions of any image x 16-64 channels, 8 images of 49 a call, K
     * in near-equal chunks (a last one not a multiple of 16: its weights
     * packed a float at a time), the row blocks near-equal (5 vectors: 3 and
     * 2; 10: 4, 3, 3), the sums transposed back 16 positions of one image at
     * a time (a last group of 1) */
    {"1x1 lanes: 7x7 maps, 9 images (8 a call, then 1), K 300, 48 rows, an Inf weight", 9, 300, 7, 7, 48, 1, 1, 1, 1,
     1, {0, 0, 0, 0}, 1, 1},
    {"1x1 lanes: 5x5 maps, 3 images, K 400 (chunks 144, 144, 112), 80 rows (3 + 2 vectors)", 3, 400, 5, 5, 80, 1, 1, 1,
     1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1 lanes: 2x1 maps, 20 images, K 257, 160 rows (4 + 3 + 3 vectors)", 20, 257, 2, 1, 160, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 1, 0},
    {"1x1 lanes: groups 2 of 16 rows and K 260 on 6x7 maps, 2 images", 2, 520, 6, 7, 32, 2, 1, 1, 1, 1, {0, 0, 0, 0},
     1, 1},
    /* the lanes for the projections of maps under 256 positions (K >= 128,
     * K > M): 14x14 maps of 3 images (2 a tile, then 1), K 200 in chunks
     * of 112 and 88, 48 rows; 15x13 with K 130 (one chunk) and 32 rows */
    {"1x1 lanes: 14x14 projection, 3 images (2 a call, then 1), K 200 (chunks 112, 88), 48 rows", 3, 200, 14, 14,
     48, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"1x1 lanes: 15x13 projection, 2 images, K 130, 32 rows", 2, 130, 15, 13, 32, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    /* a strided 1x1 without padding on a map under 96 positions (resnet18's
     * downsamples, im2col's path otherwise): the input read in place at the
     * stride; odd sizes whose last row and column are read, stride 3,
     * groups, K in two chunks */
    {"1x1 lanes: stride 2 over 14x14 (7x7 out), 9 images (8 a call, then 1), K 64, 48 rows, an Inf weight", 9, 64, 14,
     14, 48, 1, 1, 1, 2, 1, {0, 0, 0, 0}, 1, 1},
    {"1x1 lanes: stride 2 over 13x11 (7x6 out), 3 images, K 200 (chunks 112, 88), 80 rows", 3, 200, 13, 11, 80, 1, 1,
     1, 2, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1 lanes: stride 3 over 16x20 (6x7 out), 2 images, K 32, 32 rows", 2, 32, 16, 20, 32, 1, 1, 1, 3, 1,
     {0, 0, 0, 0}, 1, 0},
    {"1x1 lanes: stride 2, groups 2 of 16 rows and K 24 over 10x10", 2, 48, 10, 10, 32, 2, 1, 1, 2, 1, {0, 0, 0, 0}, 1,
     1},
    /* a shape the product takes (K 160 <= 256 on 7x7 maps, mobilenet_v2's
     * expansions), which the lanes take only with a list of positions
     * (bf__conv_pwl_list_ok; test_conv_exact/cpos.c) */
    {"1x1 lanes' list: 7x7 maps, 5 images, K 160, 64 rows, an Inf weight", 5, 160, 7, 7, 64, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 1, 1},
    {"1x1 stride 2 with padding: im2col's path still", 2, 32, 10, 10, 32, 1, 1, 1, 2, 1, {1, 1, 1, 1}, 1, 0},
    {"1x1 lanes' shape without a bias: the product instead", 2, 300, 7, 7, 16, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
    {"depthwise 3x3 stride 1", 2, 6, 9, 37, 6, 6, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"depthwise 3x3 stride 2", 2, 6, 10, 37, 6, 6, 3, 3, 2, 1, {1, 1, 1, 1}, 0, 0},
    {"depthwise 3x3 stride 2, even width: the last 8 (16 on AVX-512) outputs end the input", 1, 2, 6, 34, 2, 2, 3, 3, 2, 1,
     {1, 1, 1, 1}, 1, 0},
    {"depthwise 3x3 stride 2, 40 wide: two 16-lane chunks, an 8-lane one, scalar", 1, 3, 7, 81, 3, 3, 3, 3, 2, 1,
     {1, 1, 1, 1}, 1, 1},
    {"depthwise 5x5", 1, 4, 12, 23, 4, 4, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 0},
    {"depthwise 3x3 dilation 2", 1, 4, 12, 23, 4, 4, 3, 3, 1, 2, {2, 2, 2, 2}, 1, 0},
    {"depthwise asymmetric pads", 1, 4, 12, 23, 4, 4, 3, 3, 1, 1, {0, 1, 2, 0}, 1, 0},
    {"depthwise 3x5", 1, 4, 12, 23, 4, 4, 3, 5, 1, 1, {1, 2, 1, 2}, 0, 0},
    {"depthwise 2x2 input, 3x3 kernel: no inside column", 1, 3, 2, 2, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    /* rows of up to 8 outputs: one masked chunk per row on AVX2 */
    {"depthwise 3x3 on 7x7 (mobilenet_v2's last maps)", 2, 5, 7, 7, 5, 5, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"depthwise 3x3 on 7x7, an Inf weight", 1, 3, 7, 7, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1},
    {"depthwise 3x3, output exactly 8 wide", 1, 3, 5, 8, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, 0, 0},
    {"depthwise 3x3, output 1 wide", 1, 3, 5, 1, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"depthwise 5x5 dilation 2, asymmetric pads, 6 wide", 1, 4, 9, 6, 4, 4, 5, 5, 1, 2, {2, 3, 1, 4}, 1, 1},
    {"depthwise 3x5, 4 wide, no padding on the left", 1, 4, 6, 8, 4, 4, 3, 5, 1, 1, {1, 0, 1, 0}, 1, 0},
    /* stride 1, rows as wide as the input's: on AVX-512 the plane runs as one
     * run of outputs, 16-lane chunks across the row ends */
    {"depthwise 3x3 on 14x14: chunks across row ends", 2, 5, 14, 14, 5, 5, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"depthwise 3x3 on 14x14, an Inf weight", 1, 3, 14, 14, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, 0, 1},
    {"depthwise 3x3 on 3x17: rows wider than a chunk, one row of taps", 1, 3, 3, 17, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1},
    {"depthwise 5x5 dilation 2, same size, pads 3 and 5", 1, 3, 11, 9, 3, 3, 5, 5, 1, 2, {3, 5, 5, 3}, 1, 1},
    /* 5x5 (linalg_conv_flat5.c): the table's masks, 25 taps unrolled, four
     * chunks interleaved, then one at a time (a last partial chunk); rows
     * exactly 16 wide: one vector a row, four rows interleaved, the column
     * masks in registers, rows outside skipped as a whole, then the rows
     * left over one at a time */
    {"depthwise 5x5 on 13x13 (11 chunks: 4 + 4, then 3, the last partial), an Inf weight", 2, 3, 13, 13, 3, 3, 5, 5,
     1, 1, {2, 2, 2, 2}, 1, 1},
    {"depthwise 5x5 on 32x32, no bias", 1, 3, 32, 32, 3, 3, 5, 5, 1, 1, {2, 2, 2, 2}, 0, 0},
    {"depthwise 5x5 on 16x16 rows, dilation 2 (lraspp's last stage), an Inf weight", 2, 3, 16, 16, 3, 3, 5, 5, 1, 2,
     {4, 4, 4, 4}, 1, 1},
    {"depthwise 5x5 on 16-wide rows, 10 tall (4 + 4, then 2 alone), pads 2", 1, 3, 10, 16, 3, 3, 5, 5, 1, 1,
     {2, 2, 2, 2}, 1, 0},
    {"depthwise 5x5 on 16-wide rows, 7 tall, dilation 3, asymmetric pads, no bias, an Inf weight", 1, 2, 7, 16, 2, 2,
     5, 5, 1, 3, {5, 7, 7, 5}, 0, 1},
    {"depthwise 3x3, 1 wide and 40 tall, same size", 1, 2, 40, 1, 2, 2, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"depthwise 3x3 on 61x61 (61 chunks per 16 rows), no bias", 1, 2, 61, 61, 2, 2, 3, 3, 1, 1, {1, 1, 1, 1}, 0, 0},
    {"depthwise 3x3 on 130x130: past the mask table, the rows instead", 1, 1, 130, 130, 1, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    /* on AVX2 the same planes in 8-lane chunks (linalg_conv_dw8.c): the full
     * chunks (every tap inside for every lane) four at a time, then one at a
     * time, plain loads; the partial ones the same, masked loads and a blend */
    {"depthwise 3x3 on 56x56 (7 chunks a row, two partial), an Inf weight", 1, 3, 56, 56, 3, 3, 3, 3, 1, 1,
     {1, 1, 1, 1}, 1, 1},
    {"depthwise 3x3 on 28x28, every product -0, the bias -0 in every other channel", 2, 4, 28, 28, 4, 4, 3, 3, 1, 1,
     {1, 1, 1, 1}, 1, 2},
    {"depthwise 3x3 on 7x7, every product -0, no bias", 1, 5, 7, 7, 5, 5, 3, 3, 1, 1, {1, 1, 1, 1}, 0, 2},
    {"depthwise 5x5 on 9x9, pads 2 on top and none below (7 rows out of 9)", 1, 3, 9, 9, 3, 3, 5, 5, 1, 1,
     {2, 2, 0, 2}, 1, 1},
    {"depthwise 1x3 on 5x37, no vertical padding: no partial chunk but the edges'", 1, 3, 5, 37, 3, 3, 1, 3, 1, 1,
     {0, 1, 0, 1}, 1, 0},
    /* stride 2 on AVX2: the input plane as its four phases (even and odd
     * rows and columns), then the same chunks across the output's row ends */
    {"depthwise 3x3 stride 2, 112x112 -> 56x56 (mobilenet_v2's first), an Inf weight", 1, 2, 112, 112, 2, 2, 3, 3, 2,
     1, {1, 1, 1, 1}, 1, 1},
    {"depthwise 3x3 stride 2, 27x29 (odd sizes), every product -0", 1, 3, 27, 29, 3, 3, 3, 3, 2, 1, {1, 1, 1, 1}, 1,
     2},
    {"depthwise 5x5 stride 2, pads 2 and 1, 14x14 -> 6x6 and 7x7", 2, 3, 14, 14, 3, 3, 5, 5, 2, 1, {2, 2, 1, 2}, 1, 1},
    {"depthwise 3x3 stride 2, dilation 2, 21x20", 1, 3, 21, 20, 3, 3, 3, 3, 2, 2, {2, 2, 2, 2}, 0, 0},
    {"depthwise 3x3 stride 2, 15 wide, no padding: a tap past the phases' rows, the rows path", 1, 2, 9, 15, 2, 2, 3,
     3, 2, 1, {0, 0, 0, 0}, 1, 0},
    /* stride 2, 3 wide: on AVX-512 every chunk of a row masked, edges included */
    {"depthwise 3x3 stride 2 on 14x14 (7 wide: one masked chunk)", 2, 5, 14, 14, 5, 5, 3, 3, 2, 1, {1, 1, 1, 1}, 1, 1},
    /* stride 2, 3 wide, output rows of at most 7: two rows to a vector
     * (linalg_conv_dwpair.c), the last pair half empty where the rows are odd */
    {"depthwise 3x3 stride 2, two rows a vector: 12x12 -> 6x6, an Inf weight", 2, 4, 12, 12, 4, 4, 3, 3, 2, 1,
     {1, 1, 1, 1}, 1, 1},
    {"depthwise 3x3 stride 2, two rows a vector: pads 2 top and left, 0 bottom and right", 1, 3, 11, 13, 3, 3, 3, 3, 2,
     1, {2, 2, 0, 0}, 0, 1},
    {"depthwise 3x3 stride 2, two rows a vector: one output column, no padding", 1, 3, 9, 3, 3, 3, 3, 3, 2, 1,
     {0, 0, 0, 0}, 1, 1},
    {"depthwise 3x3 stride 2, no padding, 17 wide", 1, 3, 9, 35, 3, 3, 3, 3, 2, 1, {0, 0, 0, 0}, 1, 0},
    {"depthwise 3x3 stride 2, pads 2 left and 0 right, odd width", 1, 3, 9, 33, 3, 3, 3, 3, 2, 1, {1, 2, 0, 0}, 0, 1},
    {"depthwise 5x5 stride 2 (mobilenet_v3's), 28 -> 14", 1, 4, 28, 28, 4, 4, 5, 5, 2, 1, {2, 2, 2, 2}, 1, 1},
    {"depthwise 3x7 stride 2, 23 wide", 1, 3, 7, 45, 3, 3, 3, 7, 2, 1, {1, 3, 1, 3}, 1, 0},
    {"depthwise 2x4 stride 2, an even kernel width", 1, 3, 6, 19, 3, 3, 2, 4, 2, 1, {0, 1, 1, 2}, 0, 1},
    /* stride 2 on AVX-512, rows of several chunks: mobilenet_v2's widest,
     * rows of 128 and 129 outputs, pads of 3 and 4 (output 0's taps start
     * three floats before the row), a single kernel row (a kernel tried in
     * h20-conv, not kept, was checked on these) */
    {"depthwise 3x3 stride 2, 112 -> 56 (mobilenet_v2's features.2): four chunks, the last half", 2, 3, 9, 112, 3, 3,
     3, 3, 2, 1, {1, 1, 1, 1}, 1, 1},
    {"depthwise 3x3 stride 2, 256 wide -> 128 (eight chunks)", 1, 2, 5, 256, 2, 2, 3, 3, 2, 1,
     {1, 1, 1, 1}, 0, 0},
    {"depthwise 3x3 stride 2, 258 wide -> 129 (nine chunks, the last of one output)", 1, 2, 5, 258, 2, 2, 3, 3, 2,
     1, {1, 1, 1, 1}, 1, 0},
    {"depthwise 5x5 stride 2, pads 3 and 4, 47 wide, 12 tall", 1, 3, 12, 47, 3, 3, 5, 5, 2, 1, {3, 3, 4, 4}, 1, 1},
    {"depthwise 1x3 stride 2, 16 wide -> 8", 2, 3, 4, 16, 3, 3, 1, 3, 2, 1, {0, 1, 0, 1}, 0, 1},
    /* on AVX2, 8 channels in the lanes (linalg_conv_dwc8.c: maps of up to
     * 4096 positions at stride 1, 16384 at stride 2): blocks of 8 channels,
     * the rest a plane at a time (dw8); at stride 1 and 3 wide the inside
     * columns eight at a time, then four, then (and the others) one at a
     * time over their own kernel columns */
    {"dwc8: 3x3 on 7x7, 2 images, 19 channels (two blocks, then 3 planes), an Inf weight", 2, 19, 7, 7, 19, 19, 3, 3,
     1, 1, {1, 1, 1, 1}, 1, 1},
    {"dwc8: 3x3 on 14x14, 16 channels, every product -0, the bias -0 in every other channel", 1, 16, 14, 14, 16, 16, 3,
     3, 1, 1, {1, 1, 1, 1}, 1, 2},
    {"dwc8: 3x3 on 6x13, 8 channels: 11 inside columns (8, then 3 alone), an Inf weight", 2, 8, 6, 13, 8, 8, 3, 3, 1,
     1, {1, 1, 1, 1}, 1, 1},
    {"dwc8: 3x3 on 5x10, 8 channels, no padding on the left: 8 inside columns, then 2 alone", 1, 8, 5, 10, 8, 8, 3,
     3, 1, 1, {1, 0, 1, 1}, 0, 0},
    {"dwc8: 3x3 stride 2, 14x14 -> 7x7, 8 channels, every product -0, no bias", 2, 8, 14, 14, 8, 8, 3, 3, 2, 1,
     {1, 1, 1, 1}, 0, 2},
    {"dwc8: 3x3 stride 2, 112x112 -> 56x56, 9 channels, an Inf weight", 1, 9, 112, 112, 9, 9, 3, 3, 2, 1,
     {1, 1, 1, 1}, 1, 1},
    {"dwc8: 5x5 dilation 2, asymmetric pads, 9x11, 8 channels (any kernel width)", 1, 8, 9, 11, 8, 8, 5, 5, 1, 2,
     {2, 3, 1, 4}, 1, 1},
    {"dwc8: 3x3 on 2x2, 8 channels: no inside column", 1, 8, 2, 2, 8, 8, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0},
    {"dwc8: 3x3 on 5x3, 8 channels: an inside column but no four", 1, 8, 5, 3, 8, 8, 3, 3, 1, 1, {1, 1, 1, 1}, 0, 1},
    {"dwc8: 1x3 on 5x37, 8 channels, no vertical padding", 1, 8, 5, 37, 8, 8, 1, 3, 1, 1, {0, 1, 0, 1}, 1, 0},
    {"dwc8: 3x7 stride 2, 7x45, 10 channels, pads 1 and 3", 1, 10, 7, 45, 10, 10, 3, 7, 2, 1, {1, 3, 1, 3}, 1, 1},
    {"dwc8: 2x4 stride 2, even kernel width, 8 channels", 1, 8, 6, 19, 8, 8, 2, 4, 2, 1, {0, 1, 1, 2}, 0, 1},
    {"dwc8: 3x3 on 64x64, 8 channels: the largest stride-1 map it takes", 1, 8, 64, 64, 8, 8, 3, 3, 1, 1,
     {1, 1, 1, 1}, 1, 0},
    {"dwc8: 3x3 on 65x64, 8 channels: past it, the planes", 1, 8, 65, 64, 8, 8, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1},
    {"dwc8: 3x3 with pads 3 on 5x6, 8 channels: border outputs with no tap inside (the bias alone)", 2, 8, 5, 6, 8, 8,
     3, 3, 1, 1, {3, 3, 3, 3}, 1, 1},
    /* 1x1 on maps of 256-1024 positions on AVX-512 (linalg_conv_pwseg.c):
     * K cut into near-equal blocks of at most 256, the sums through y
     * between them; rows in blocks of up to 12; the epilogue in registers */
    {"1x1 on 16x16, K 300 in two blocks, M 25 (9 + 8 + 8 rows), no bias", 2, 300, 16, 16, 25, 1, 1, 1, 1, 1,
     {0, 0, 0, 0}, 0, 1},
    {"1x1 on 16x16, K 20 in one block, M 16 (8 + 8 rows)", 1, 20, 16, 16, 16, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"1x1 on 32x32, K 520 in three blocks, M 17", 1, 520, 32, 32, 17, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"1x1 on 8x32 (256 positions), K 40, M 30", 1, 40, 8, 32, 30, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
};

/* Each case's inputs and reference, made on its first use and kept for the
 * five tests below that check every case (the group's teardown frees them):
 * each test made them again, the reference too (tests/history/
 * round21-h25-trims.md). Nothing writes to them after case_open. */
#define N_CASES (sizeof cases / sizeof *cases)
const size_t n_cases = N_CASES;
static prepared made[N_CASES];

prepared case_get(size_t i)
{
    if (!made[i].k) {
        prepared p;
        case_open(&cases[i], &p);
        made[i] = p;
    }
    return made[i];
}

static int cases_free(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++)
        if (made[i].k) case_close(&made[i]), made[i].k = NULL;
    return 0;
}

/* Under the sanitizers (BF_SANITIZED, tests/CMakeLists.txt) each case runs
 * at each CPU path bare, with HardSwish and with one of the five clamps
 * (Relu and the Clips), the clamp turning with the case and the path; the
 * release build runs all seven. Every kernel reads lo and hi into vectors
 * and clamps the same way whatever their values (linalg_conv*.c), and
 * HardSwish is its own pass: the same lines run (gcov), each clamp still
 * runs on every kernel family, and the release build checks every
 * combination's bits (tests/history/round21-h25-trims.md). The residual
 * and packed-weight tests below trim alike. */
static int act_here(size_t i, int l, size_t q)
{
#ifdef BF_SANITIZED
    return q == N_ACTS || q == N_ACTS - 1 || q == (i + (size_t)l) % (N_ACTS - 1);
#else
    (void)i, (void)l, (void)q;
    return 1;
#endif
}

/* The residual's and the packed copy's runs under the sanitizers: half of
 * each case's at a path, by the parity of i + l + j (j: the residual's
 * order + the activation's index; the form), so that each path still runs
 * both orders on every case, two of the four packed forms at ref and avx2
 * (turning with the case) and all four at avx512, the one path that reads
 * the copy; every combination runs on some cases. All of them in the
 * release build (act_here says why). */
int half_here(size_t i, int l, int j)
{
#ifdef BF_SANITIZED
    return (i + (size_t)l + (size_t)j) % 2 == 0;
#else
    (void)i, (void)l, (void)j;
    return 1;
#endif
}

/* Random shapes, every Conv path (depthwise, pointwise, grouped, dense),
 * each CPU path against the reference: odd sizes, strides, dilations,
 * pads, an Inf weight now and then. A fixed seed, so a failure repeats. */
static void conv_random_shapes_match_reference(void **state)
{
    (void)state;
    uint32_t r = 12345;
#define RND(n) ((r = r * 1103515245u + 12345u), (int64_t)((r >> 16) % (uint32_t)(n)))
    const char *levels[] = {"ref", "avx2", NULL};
    for (int t = 0; t < 80; t++) {
        /* drawn one statement at a time, in the fields' order: inside one
         * initializer list the order of the draws is unspecified (clang's
         * -Wunsequenced), and gcc and clang would build different cases */
        conv_case k = {"random", 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0};
        k.n = 1 + RND(2);
        k.h = 1 + RND(12);
        k.w = 1 + RND(12);
        k.kh = 1 + RND(5);
        k.kw = 1 + RND(5);
        k.s = 1 + RND(3);
        k.d = 1 + RND(2);
        for (int j = 0; j < 4; j++) k.pads[j] = RND(3);
        k.bias = (int)RND(2);
        k.special = RND(4) == 0;
        int kind = (int)RND(4);
        int64_t c = 1 + RND(9);
        if (kind == 0) k.c = k.m = k.group = c;                             /* depthwise */
        else if (kind == 1) k.c = c, k.m = 1 + RND(20), k.kh = k.kw = 1;     /* pointwise (stride, pads too) */
        else if (kind == 2) k.group = 2, k.c = 2 * c, k.m = 2 * (1 + RND(4)); /* grouped */
        else k.c = c, k.m = 1 + RND(9);                                      /* dense */
        if (kind == 1 && RND(2)) k.s = 1, memset(k.pads, 0, sizeof k.pads);  /* the direct 1x1 path */
        int64_t oh = (k.h + k.pads[0] + k.pads[2] - k.d * (k.kh - 1) - 1), ow = (k.w + k.pads[1] + k.pads[3] - k.d * (k.kw - 1) - 1);
        if (oh < 0 || ow < 0) {
            t--;
            continue;
        }
        char what[160];
        snprintf(what, sizeof what, "random %d: n %lld c %lld %lldx%lld m %lld group %lld kernel %lldx%lld stride %lld "
                 "dilation %lld pads %lld,%lld,%lld,%lld, inf weight %d", t, (long long)k.n, (long long)k.c, (long long)k.h,
                 (long long)k.w, (long long)k.m, (long long)k.group, (long long)k.kh, (long long)k.kw, (long long)k.s,
                 (long long)k.d, (long long)k.pads[0], (long long)k.pads[1], (long long)k.pads[2], (long long)k.pads[3],
                 k.special);
        k.what = what;
        prepared p;
        case_open(&k, &p);
        for (int l = 0; l < 3; l++) {
            run_case(&p, levels[l], N_ACTS);
            run_case(&p, levels[l], (size_t)t % N_ACTS);
        }
        case_close(&p);
    }
#undef RND
}

static void conv_paths_match_reference(void **state)
{
    (void)state;
    const char *levels[] = {"ref", "avx2", "avx512"};   /* not unset too: the head comment */
    int best = bf__sgemm_best();
    print_message("CPU paths here: reference%s%s\n", best >= BF_SGEMM_AVX2 ? ", AVX2" : " (no AVX2: its kernel is not exercised)",
                  best >= BF_SGEMM_AVX512 ? ", AVX-512" : best >= BF_SGEMM_AVX2 ? " (no AVX-512: its kernels are not exercised)" : "");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        prepared p = case_get(i);
        for (int l = 0; l < 3; l++)
            for (size_t q = 0; q <= N_ACTS; q++)
                if (act_here(i, l, q)) run_case(&p, levels[l], q);
    }
}

/* The same cases one output channel at a time (bf__conv_channel: the
 * differential engine's recomputation), on every CPU path, against the
 * reference: a channel alone must get the bits the whole Conv gives it. */
static void conv_channels_match_reference(void **state)
{
    (void)state;
    const char *levels[] = {"ref", "avx2", "avx512"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        prepared p = case_get(i);
        const conv_case *k = p.k;
        case_run cr;
        case_run_of(&p, &cr);
        for (int l = 0; l < 3; l++) {
            bf_tensor out;
            bf_error err = {0};
            setenv("BITFLIP_SIMD", levels[l], 1);
            bf_status stt = th_run_conv_channels(cr.ca.a, 5, cr.in, cr.nin, &out, &err);
            unsetenv("BITFLIP_SIMD");
            if (stt != BF_OK) fail_msg("%s, by channel: %s", k->what, err.msg);
            const float *got = out.data;
            for (int64_t e = 0; e < p.numel; e++)
                if (memcmp(&got[e], &p.ref[e], sizeof(float)) != 0)
                    fail_msg("%s, by channel (BITFLIP_SIMD=%s): element %lld is %.9g, the reference %.9g", k->what,
                             levels[l], (long long)e, got[e], p.ref[e]);
            th_free(&out, 1);
        }
    }
}

/* A residual Add fused into the Conv (a plan's Conv -> Add -> Relu or
 * Clip, or the Add alone: op.h, bf__ctx's res; the product paths add it in
 * their epilogue, the others in a pass after), every case on every CPU
 * path, the residual as the Add's A and as its B: the bits of the Add op's
 * own kernel run on the reference's output, then the activation. The
 * residual holds NaNs of another payload than the Conv's own NaNs (the
 * Inf-weight cases' padding taps), infinities (Inf - Inf) and -0, where
 * the operands' order shows. */
static void conv_residual_matches_add(void **state)
{
    (void)state;
    const char *levels[] = {"ref", "avx2", "avx512"};   /* not unset too: the head comment */
    static const bf__act racts[2][2] = {{{-INFINITY, INFINITY, 0, NULL, 0, NULL, 0, NULL}, {0.0f, INFINITY, 0, NULL, 0, NULL, 0, NULL}},
                                        {{-INFINITY, INFINITY, 0, NULL, 0, NULL, 0, NULL}, {-0.2f, 0.3f, 0, NULL, 0, NULL, 0, NULL}}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        prepared p = case_get(i);
        const conv_case *k = p.k;
        case_run cr;
        case_run_of(&p, &cr);
        bf_tensor r = th_tensor_rand(14, 4, cr.od), conv = th_tensor(BF_F32, p.ref, 4, cr.od);
        float *rv = r.data;
        const uint32_t nan_bits = 0x7fc0abcdu;   /* not the default NaN an invalid operation gives */
        for (int64_t e = 0; e < p.numel; e++) {
            if (e % 5 == 0) memcpy(&rv[e], &nan_bits, sizeof nan_bits);
            else if (e % 11 == 0) rv[e] = e % 2 ? INFINITY : -INFINITY;
            else if (e % 13 == 0) rv[e] = -0.0f;
        }
        for (int res_a = 0; res_a < 2; res_a++) {
            const bf_tensor *ain[2] = {res_a ? &r : &conv, res_a ? &conv : &r};
            bf_tensor sum;
            bf_error err = {0};
            if (th_run_op("Add", 14, NULL, 0, ain, 2, &sum, 1, &err) != BF_OK) fail_msg("%s: Add: %s", k->what, err.msg);
            const float *want = sum.data;
            for (int l = 0; l < 3; l++)
                for (int q = 0; q < 2; q++) {
                    if (!half_here(i, l, res_a + q)) continue;   /* both orders at every path still */
                    const bf__act *act = &racts[res_a][q];
                    bf_tensor out;
                    if (levels[l]) setenv("BITFLIP_SIMD", levels[l], 1);
                    else unsetenv("BITFLIP_SIMD");
                    bf_status stt = th_run_conv_res(cr.ca.a, 5, cr.in, cr.nin, &out, act, rv, res_a, &err);
                    unsetenv("BITFLIP_SIMD");
                    if (stt != BF_OK) fail_msg("%s, residual: %s", k->what, err.msg);
                    const float *got = out.data;
                    for (int64_t e = 0; e < p.numel; e++) {
                        float w = ref_act(act, want[e]);
                        uint32_t gb, wb;
                        memcpy(&gb, &got[e], sizeof gb), memcpy(&wb, &w, sizeof wb);
                        if (gb != wb)
                            fail_msg("%s, residual as %s, activation %d (BITFLIP_SIMD=%s): element %lld is %.9g "
                                     "(0x%08x), the Add then the activation %.9g (0x%08x)", k->what, res_a ? "A" : "B",
                                     q, levels[l] ? levels[l] : "unset", (long long)e, got[e], gb, w, wb);
                    }
                    th_free(&out, 1);
                }
            th_free(&sum, 1);
        }
        th_tensor_free(&r), th_tensor_free(&conv);
    }
}

/* A BatchNormalization fused after the Conv too (op.h, bf__ctx's bn: a
 * plan's Conv -> BN [-> Add] [-> activation]), on the 1x1 cases over maps
 * of 256-1024 positions (where linalg_conv_pwseg.c takes them, asserted for
 * the four written for it, it computes the BN in the product's epilogue;
 * the others, strided or 784 positions, and a padded-plane case take
 * linalg_conv.c's pass after the Conv), every CPU path: each element fmaf(v, a, b) with PyTorch's
 * invstd = 1 / sqrtf(var + eps), a = invstd * scale, b = fmaf(-mean, a,
 * bias) (docs/NUMERICS.md), then the Add op's own kernel with the residual
 * as its A and as its B, or no Add, then the activation (none, Relu,
 * HardSwish). Channels with a zero variance (a = Inf), a NaN mean and a -0
 * scale put infinities, NaNs and signed zeros through the epilogue. */
static void conv_bn_matches_steps(void **state)
{
    (void)state;
    const char *levels[] = {"ref", "avx2", "avx512"};   /* not unset too: the head comment */
    static const bf__act bacts[3] = {{.lo = -INFINITY, .hi = INFINITY}, {.lo = 0.0f, .hi = INFINITY},
                                     {.lo = -INFINITY, .hi = INFINITY, .hswish = 1}};
    int npws = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const conv_case *k = &cases[i];
        int64_t hw = k->h * k->w;
        if (i != 0 && !(k->kh == 1 && k->kw == 1 && hw >= 256 && hw <= 1024)) continue;
        int pws = k->kh == 1 && k->kw == 1 && k->s == 1 && k->group == 1 && !k->pads[0] && !k->pads[1] &&
                  !k->pads[2] && !k->pads[3] && hw % 32 == 0 && k->c >= 16 && k->m >= 16;
        npws += pws;
        if (pws) {   /* the shapes linalg_conv_pwseg.c takes wherever AVX-512 is here */
            bf__conv_params cp = {.n = k->n, .c = k->c, .m = k->m, .group = 1, .cg = k->c, .mg = k->m, .isp = hw,
                                  .osp = hw, .ksp = 1, .kc = k->c, .path = BF__CONV_POINTWISE,
                                  .simd = BF_SGEMM_AVX512};
            assert_int_equal(bf__conv_pws_ok(&cp), bf__simd_cpu() >= BF_SGEMM_AVX512);
        }
        prepared p = case_get(i);
        int64_t md[1] = {k->m};
        case_run cr;
        case_run_of(&p, &cr);
        bf_tensor sc = th_tensor_rand(21, 1, md), bi = th_tensor_rand(22, 1, md), mu = th_tensor_rand(23, 1, md),
                  va = th_tensor_rand(24, 1, md);
        float *scv = sc.data, *muv = mu.data, *vav = va.data, *biv = bi.data, eps = 1e-5f;
        for (int64_t c = 0; c < k->m; c++) vav[c] = fabsf(vav[c]) * 4.0f, scv[c] *= 3.0f;
        vav[1] = -eps, muv[2] = NAN, scv[3] = -0.0f;
        bf__bnorm bn = {scv, biv, muv, vav, eps};
        int64_t osp = p.oh * p.ow;
        bf_tensor normed = th_tensor(BF_F32, p.ref, 4, cr.od), r = th_tensor_rand(14, 4, cr.od);
        float *nv = normed.data, *rv = r.data;
        for (int64_t e = 0; e < p.numel; e++) {
            int64_t c = e / osp % k->m;
            float invstd = 1.0f / sqrtf(vav[c] + eps), a = invstd * scv[c], b = fmaf(-muv[c], a, biv[c]);
            nv[e] = fmaf(nv[e], a, b);
            if (e % 5 == 0) rv[e] = -0.0f;
            else if (e % 11 == 0) rv[e] = e % 2 ? INFINITY : -INFINITY;
        }
        for (int res = 0; res < 3; res++) {   /* no Add, the residual as the Add's A, as its B */
            const bf_tensor *ain[2] = {res == 1 ? &r : &normed, res == 1 ? &normed : &r};
            bf_tensor sum;
            bf_error err = {0};
            if (res && th_run_op("Add", 14, NULL, 0, ain, 2, &sum, 1, &err) != BF_OK)
                fail_msg("%s: Add: %s", k->what, err.msg);
            const float *want = res ? sum.data : nv;
            for (int l = 0; l < 3; l++)
                for (int q = 0; q < 3; q++) {
                    bf_tensor out;
                    if (levels[l]) setenv("BITFLIP_SIMD", levels[l], 1);
                    else unsetenv("BITFLIP_SIMD");
                    bf_status stt = th_run_conv_bn(cr.ca.a, 5, cr.in, cr.nin, &out, &bacts[q], &bn,
                                                   res ? rv : NULL, res == 1, &err);
                    unsetenv("BITFLIP_SIMD");
                    if (stt != BF_OK) fail_msg("%s, BN: %s", k->what, err.msg);
                    const float *got = out.data;
                    for (int64_t e = 0; e < p.numel; e++) {
                        float w = ref_act(&bacts[q], want[e]);
                        uint32_t gb, wb;
                        memcpy(&gb, &got[e], sizeof gb), memcpy(&wb, &w, sizeof wb);
                        if (gb != wb)
                            fail_msg("%s, BN, residual %d, activation %d (BITFLIP_SIMD=%s): element %lld is %.9g "
                                     "(0x%08x), the steps %.9g (0x%08x)", k->what, res, q,
                                     levels[l] ? levels[l] : "unset", (long long)e, got[e], gb, w, wb);
                    }
                    th_free(&out, 1);
                }
            if (res) th_free(&sum, 1);
        }
        th_tensor_free(&sc), th_tensor_free(&bi), th_tensor_free(&mu), th_tensor_free(&va);
        th_tensor_free(&normed), th_tensor_free(&r);
    }
    assert_true(npws >= 4);   /* the four cases written for it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conv_paths_match_reference),
        cmocka_unit_test(conv_channels_match_reference),
        cmocka_unit_test(conv_random_shapes_match_reference),
        cmocka_unit_test(conv_residual_matches_add),
        cmocka_unit_test(conv_bn_matches_steps),
        cmocka_unit_test(conv_packed_weights_match_reference),   /* test_conv_exact/packed.c */
        cmocka_unit_test(conv_dw8_takes_its_shapes),             /* test_conv_exact/dw8.c */
        cmocka_unit_test(conv_dw8_without_memory_leaves_y),      /* test_conv_exact/dw8.c */
        cmocka_unit_test(conv_dwc8_takes_its_shapes),            /* test_conv_exact/dw8.c */
        cmocka_unit_test(conv_dwc8_runs_whole_blocks),           /* test_conv_exact/dw8.c */
        cmocka_unit_test(conv_pw_images_by_level),               /* test_conv_exact/dw8.c */
        cmocka_unit_test(conv_positions_match_reference),        /* test_conv_exact/cpos.c */
    };
    return cmocka_run_group_tests(tests, NULL, cases_free);
}
