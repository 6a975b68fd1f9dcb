/* test_ops_linalg: MaxPool, AveragePool and GlobalAveragePool. */
#include "test_ops_linalg.h"

/* ----------------------------------------------------------------- pools */

static void ref_pool(const wcfg *w, int is_max, int count_include_pad, const bf_tensor *x, bf_tensor *y)
{
    int r = w->r;
    int64_t planes = x->dims[0] * x->dims[1];
    int64_t out[3], pb[3], pe[3];
    for (int i = 0; i < r; i++) ref_out_size(w, i, &out[i], &pb[i], &pe[i]);
    int64_t yd[5] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < r; i++) yd[2 + i] = out[i];
    *y = th_tensor_f32(NULL, 2 + r, yd);
    const float *X = x->data;
    float *Y = y->data;
    int64_t isp = numel(r, w->in), osp = numel(r, out);
    for (int64_t pl = 0; pl < planes; pl++) {
        int64_t o[3] = {0}, oi = 0;
        do {
            double acc = is_max ? -INFINITY : 0.0;
            int64_t valid = 0, padded = 0, kk[3] = {0};
            int any_nan = 0;
            do {
                int64_t xi = 0, inside = 1, in_padded = 1;
                for (int i = 0; i < r; i++) {
                    int64_t p = o[i] * w->s[i] - pb[i] + kk[i] * w->d[i];
                    if (p < 0 || p >= w->in[i]) inside = 0;
                    if (p >= w->in[i] + pe[i]) in_padded = 0;   /* past the end padding */
                    xi = xi * w->in[i] + p;
                }
                padded += in_padded;
                if (!inside) continue;
                double v = X[pl * isp + xi];
                valid++;
                if (isnan(v)) any_nan = 1;
                if (is_max) acc = v > acc ? v : acc;
                else acc += v;
            } while (next_index(kk, w->k, r));
            if (is_max) Y[pl * osp + oi] = any_nan ? NAN : (float)acc;
            else Y[pl * osp + oi] = (float)(acc / (double)(count_include_pad ? padded : valid));
            oi++;
        } while (next_index(o, out, r));
    }
}

static wcfg pool_cases[] = {
    {2, {8, 8}, {2, 2}, {2, 2}, {1, 1}, {0}, NULL, 0},
    {2, {9, 7}, {2, 2}, {2, 2}, {1, 1}, {0}, NULL, 0},                 /* 2x2 fast path, odd sizes */
    {2, {9, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 0},
    {2, {9, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 1},       /* ceil_mode */
    {2, {10, 10}, {3, 3}, {3, 3}, {1, 1}, {0, 0, 0, 0}, NULL, 1},     /* ceil: partial last window */
    {2, {5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 1},       /* ceil: last window dropped */
    {2, {11, 8}, {2, 3}, {1, 2}, {1, 1}, {1, 0, 0, 2}, NULL, 0},               /* asymmetric */
    {1, {17}, {4}, {3}, {1}, {2, 1}, NULL, 1},
    {3, {5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {1, 1, 1}, {1, 1, 0, 0, 1, 1}, NULL, 0},
    {2, {7, 9}, {3, 2}, {2, 2}, {1, 1}, {0}, "SAME_UPPER", 0},
    {2, {7, 9}, {3, 2}, {2, 2}, {1, 1}, {0}, "SAME_LOWER", 0},
    {2, {7, 9}, {3, 2}, {2, 2}, {1, 1}, {0}, "VALID", 1},
    {2, {5, 5}, {5, 5}, {1, 1}, {1, 1}, {0}, NULL, 0},                         /* global window */
};

static void pool_random(const char *op, int is_max)
{
    size_t nc = sizeof pool_cases / sizeof pool_cases[0];
    for (size_t ci = 0; ci < nc + 2; ci++)
        for (int cip = 0; cip < (is_max ? 1 : 2); cip++) {
            wcfg w = ci < nc ? pool_cases[ci] : (wcfg){0};
            if (ci == nc) /* dilated (MaxPool only) */
                w = (wcfg){2, {9, 10}, {3, 2}, {2, 1}, {2, 3}, {1, 2, 2, 1}, NULL, 1};
            if (ci == nc + 1) w = (wcfg){1, {12}, {3}, {2}, {3}, {2, 2}, NULL, 0};
            if (!is_max && ci >= nc) continue;
            int64_t xd[5] = {2, 3};
            for (int i = 0; i < w.r; i++) xd[2 + i] = w.in[i];
            bf_tensor x = th_tensor_rand(400 + ci, 2 + w.r, xd);
            if (is_max) ((float *)x.data)[5] = NAN;      /* NaN propagates through its windows */
            bf__attr at[6];
            int na = set_window_attrs(&w, at, 1, is_max);    /* AveragePool: no dilations before opset 19 */
            at[na++] = th_attr_int("ceil_mode", w.ceil_mode);
            if (!is_max) at[na++] = th_attr_int("count_include_pad", cip);
            const bf_tensor *in[1] = {&x};
            bf_tensor want;
            ref_pool(&w, is_max, cip, &x, &want);
            expect_close(op, at, (size_t)na, in, 1, &want, TOL_ATOL, TOL_RTOL);
            th_tensor_free(&want), th_tensor_free(&x);
        }
}

/* The pools' AVX2 copy (the same source compiled for AVX2) against the
 * reference path, byte for byte, on every case above and on rows wide
 * enough for whole vectors, with NaN, infinities and both zeros in the
 * windows: max and sum per element in the same order, so the same bits. */
void pool_levels_same_bits(void **state)
{
    (void)state;
    size_t nc = sizeof pool_cases / sizeof pool_cases[0];
    for (size_t ci = 0; ci <= nc; ci++)
        for (int kind = 0; kind < 3; kind++) {   /* MaxPool, AveragePool, AveragePool counting the pads */
            wcfg w = ci < nc ? pool_cases[ci] : (wcfg){2, {29, 45}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 0};
            int64_t xd[5] = {2, 3};
            for (int i = 0; i < w.r; i++) xd[2 + i] = w.in[i];
            bf_tensor x = th_tensor_rand(700 + ci, 2 + w.r, xd);
            float *xv = x.data;
            int64_t n = 6;
            for (int i = 0; i < w.r; i++) n *= w.in[i];
            static const float odd[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 3e38f, -3e38f};
            for (int64_t i = 0; i < n; i += 5) xv[i] = odd[(i / 5) % 7];
            bf__attr at[6];
            int na = set_window_attrs(&w, at, 1, kind == 0);
            at[na++] = th_attr_int("ceil_mode", w.ceil_mode);
            if (kind) at[na++] = th_attr_int("count_include_pad", kind == 2);
            const bf_tensor *in[1] = {&x};
            bf_tensor a, b;
            bf_error err = {0};
            const char *op = kind ? "AveragePool" : "MaxPool";
            setenv("BITFLIP_SIMD", "ref", 1);
            assert_int_equal(th_run_op(op, 17, at, (size_t)na, in, 1, &a, 1, &err), BF_OK);
            unsetenv("BITFLIP_SIMD");
            assert_int_equal(th_run_op(op, 17, at, (size_t)na, in, 1, &b, 1, &err), BF_OK);
            assert_int_equal(bf_tensor_nbytes(&a), bf_tensor_nbytes(&b));
            if (memcmp(a.data, b.data, bf_tensor_nbytes(&a)) != 0) fail_msg("%s case %zu: the paths differ", op, ci);
            th_free(&a, 1), th_free(&b, 1), th_tensor_free(&x);
        }
}

/* MaxPool's elements in the order every path keeps (linalg_pool.c,
 * pool_plane_body; the 2x2 stride-2 loop excepted), written out plainly:
 * for each window column in order, the window's rows max_nan'd in order
 * from the first, then those columns max_nan'd in order from -Inf, where
 * max_nan(m, v) = (v > m or v is NaN) ? v : m. So a tie of +0 and -0
 * keeps the first met and of two NaNs the last. Every CPU path (the
 * AVX-512 one of horizontal stride 2 among them) against it, byte for
 * byte, on windows full of zeros of both signs, NaNs of both signs,
 * infinities: padding, ceil_mode, dilations, strides, rows past 16
 * outputs with a tail. */
static float max_nan_ref(float m, float v) { return (v > m || isnan(v)) ? v : m; }

void maxpool_levels_match_reference(void **state)
{
    (void)state;
    static const wcfg cs[] = {
        {2, {40, 70}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 0},        /* resnet18's: 35 wide, 16 + 16 + 2 inside */
        {2, {33, 69}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 1},        /* ceil_mode, odd */
        {2, {23, 41}, {5, 3}, {3, 2}, {2, 1}, {2, 1, 0, 2}, NULL, 0},        /* vertical stride 3, dilation 2 */
        {2, {4, 50}, {1, 3}, {1, 2}, {1, 1}, {0, 0, 0, 0}, NULL, 0},         /* one row a window */
        {2, {9, 33}, {3, 4}, {2, 2}, {1, 1}, {0, 3, 1, 3}, NULL, 1},         /* wide pads, an even kernel */
        {2, {6, 3}, {2, 3}, {1, 2}, {1, 1}, {0, 1, 0, 1}, NULL, 0},          /* no inside column */
        {2, {11, 37}, {3, 3}, {2, 2}, {1, 2}, {1, 2, 1, 2}, NULL, 0},        /* dilated across: the AVX2 copy's */
    };
    const char *levels[] = {"ref", "avx2", "avx512", NULL};
    static const float odd[] = {NAN, -NAN, INFINITY, -INFINITY, 3e38f, -3e38f};
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        const wcfg *w = &cs[ci];
        int64_t out[2], pb[2], pe[2];
        for (int i = 0; i < 2; i++) ref_out_size(w, i, &out[i], &pb[i], &pe[i]);
        int64_t xd[4] = {2, 3, w->in[0], w->in[1]}, isp = w->in[0] * w->in[1], osp = out[0] * out[1];
        bf_tensor x = th_tensor_rand(900 + ci, 4, xd);
        float *xv = x.data;
        for (int64_t i = 0; i < 6 * isp; i++)
            if (i % 3 == 0) xv[i] = (i / 3) % 2 ? -0.0f : 0.0f;
            else if (i % 11 == 1) xv[i] = odd[(i / 11) % 6];
        float *want = malloc(sizeof(float) * (size_t)(6 * osp));
        assert_non_null(want);
        for (int64_t pl = 0; pl < 6; pl++)
            for (int64_t oh = 0; oh < out[0]; oh++)
                for (int64_t ow = 0; ow < out[1]; ow++) {
                    float y = -INFINITY;
                    for (int64_t kw = 0; kw < w->k[1]; kw++) {
                        int64_t iw = ow * w->s[1] - pb[1] + kw * w->d[1], rows = 0;
                        float col = 0.0f;
                        for (int64_t kh = 0; kh < w->k[0] && iw >= 0 && iw < w->in[1]; kh++) {
                            int64_t ih = oh * w->s[0] - pb[0] + kh * w->d[0];
                            if (ih < 0 || ih >= w->in[0]) continue;
                            float v = xv[pl * isp + ih * w->in[1] + iw];
                            col = rows++ ? max_nan_ref(col, v) : v;
                        }
                        if (rows) y = max_nan_ref(y, col);
                    }
                    want[pl * osp + oh * out[1] + ow] = y;
                }
        bf__attr at[6];
        int na = set_window_attrs(w, at, 1, 1);
        at[na++] = th_attr_int("ceil_mode", w->ceil_mode);
        const bf_tensor *in[1] = {&x};
        for (int l = 0; l < 4; l++) {
            bf_tensor got;
            bf_error err = {0};
            if (levels[l]) setenv("BITFLIP_SIMD", levels[l], 1);
            assert_int_equal(th_run_op("MaxPool", 12, at, (size_t)na, in, 1, &got, 1, &err), BF_OK);
            unsetenv("BITFLIP_SIMD");
            assert_int_equal(got.dims[2], out[0]);
            assert_int_equal(got.dims[3], out[1]);
            if (memcmp(got.data, want, sizeof(float) * (size_t)(6 * osp)) != 0) {
                const float *g = got.data;
                int64_t i = 0;
                while (memcmp(&g[i], &want[i], sizeof(float)) == 0) i++;
                fail_msg("MaxPool case %zu (BITFLIP_SIMD=%s): element %lld is %g (sign %d), the reference %g (sign %d)",
                         ci, levels[l] ? levels[l] : "unset", (long long)i, g[i], signbit(g[i]) != 0, want[i],
                         signbit(want[i]) != 0);
            }
            th_free(&got, 1);
        }
        free(want);
        th_tensor_free(&x);
    }
}

void maxpool_random(void **state) { (void)state; pool_random("MaxPool", 1); }
void avgpool_random(void **state) { (void)state; pool_random("AveragePool", 0); }

void pool_hand(void **state)
{
    (void)state;
    /* X = 1..16 as 4x4, kernel 2 stride 2: max [6, 8; 14, 16], avg [3.5, 5.5; 11.5, 13.5] */
    float xv[16];
    for (int i = 0; i < 16; i++) xv[i] = (float)(i + 1);
    int64_t xd[4] = {1, 1, 4, 4}, yd[4] = {1, 1, 2, 2}, k2[2] = {2, 2};
    float ymax[] = {6, 8, 14, 16}, yavg[] = {3.5f, 5.5f, 11.5f, 13.5f};
    bf_tensor x = th_tensor_f32(xv, 4, xd), wmax = th_tensor_f32(ymax, 4, yd), wavg = th_tensor_f32(yavg, 4, yd);
    bf__attr at[2] = {th_attr_ints("kernel_shape", k2, 2), th_attr_ints("strides", k2, 2)};
    const bf_tensor *in[1] = {&x};
    expect_close("MaxPool", at, 2, in, 1, &wmax, 0, 0);
    expect_close("AveragePool", at, 2, in, 1, &wavg, 0, 0);
    /* kernel 3 stride 3 pads 1 on 4x4, ceil_mode 0: out 2x2, windows rows/cols {-1..1}, {2..4}.
     * count_include_pad 0: [avg(1,2,5,6), avg(3,4,7,8); avg(9,10,13,14), avg(11,12,15,16)]
     *                    = [3.5, 5.5; 11.5, 13.5]
     * count_include_pad 1: divisor 9 everywhere (every window fits in the padded 6x6):
     *                      [14/9, 22/9; 46/9, 54/9] */
    int64_t k3[2] = {3, 3}, p1[4] = {1, 1, 1, 1};
    float yin[] = {14.f / 9, 22.f / 9, 46.f / 9, 54.f / 9};
    bf_tensor winc = th_tensor_f32(yin, 4, yd);
    bf__attr at3[4] = {th_attr_ints("kernel_shape", k3, 2), th_attr_ints("strides", k3, 2),
                       th_attr_ints("pads", p1, 4), th_attr_int("count_include_pad", 0)};
    expect_close("AveragePool", at3, 4, in, 1, &wavg, 1e-6, 1e-6);
    at3[3] = th_attr_int("count_include_pad", 1);
    expect_close("AveragePool", at3, 4, in, 1, &winc, 1e-6, 1e-6);
    /* ceil_mode, kernel 3 stride 2, no pads on 4x4: out ceil(1/2)+1 = 2; windows {0..2}, {2..3}
     * count_include_pad 1 divides by the clipped window: (2,2) window = {11,12,15,16} / 4 = 13.5;
     * (0,1) window rows 0-2, cols 2-3 = (3+4+7+8+11+12)/6 = 7.5 */
    bf__attr atc[4] = {th_attr_ints("kernel_shape", k3, 2), th_attr_ints("strides", k2, 2),
                       th_attr_int("ceil_mode", 1), th_attr_int("count_include_pad", 1)};
    bf_tensor out;
    bf_error err;
    assert_int_equal(th_run_op("AveragePool", 17, atc, 4, in, 1, &out, 1, &err), BF_OK);
    assert_int_equal(out.dims[2], 2);
    assert_true(fabsf(((float *)out.data)[1] - 7.5f) < 1e-6f);
    assert_true(fabsf(((float *)out.data)[3] - 13.5f) < 1e-6f);
    th_free(&out, 1);
    /* NaN in a window: MaxPool gives NaN there only; -Inf and huge values pass through */
    ((float *)x.data)[0] = NAN;
    ((float *)x.data)[3] = -INFINITY;
    ((float *)x.data)[15] = 3e38f;
    assert_int_equal(th_run_op("MaxPool", 17, at, 2, in, 1, &out, 1, &err), BF_OK);
    float *o = out.data;
    assert_true(isnan(o[0]) && o[1] == 8 && o[2] == 14 && o[3] == 3e38f);
    th_free(&out, 1);
    th_tensor_free(&x), th_tensor_free(&wmax), th_tensor_free(&wavg), th_tensor_free(&winc);
}

void pool_errors(void **state)
{
    (void)state;
    int64_t xd[4] = {1, 2, 5, 5}, k2[2] = {2, 2}, k3[3] = {2, 2, 2}, p2[4] = {2, 0, 0, 0}, d2[2] = {2, 2};
    bf_tensor x = th_tensor_rand(1, 4, xd);
    const bf_tensor *in[1] = {&x};
    expect_error("MaxPool", NULL, 0, in, 1, 1, BF_EFORMAT, "'kernel_shape' is required");
    bf__attr k[1] = {th_attr_ints("kernel_shape", k3, 3)};
    expect_error("MaxPool", k, 1, in, 1, 1, BF_EFORMAT, "has 3 values; expected 2");
    bf__attr ok[1] = {th_attr_ints("kernel_shape", k2, 2)};
    expect_error("MaxPool", ok, 1, in, 1, 2, BF_EUNSUPPORTED, "Indices");
    bf__attr pads[2] = {th_attr_ints("kernel_shape", k2, 2), th_attr_ints("pads", p2, 4)};
    expect_error("AveragePool", pads, 2, in, 1, 1, BF_EUNSUPPORTED, "smaller than the kernel extent");
    bf__attr dil[2] = {th_attr_ints("kernel_shape", k2, 2), th_attr_ints("dilations", d2, 2)};
    expect_error("AveragePool", dil, 2, in, 1, 1, BF_EUNSUPPORTED, "'dilations'");
    bf__attr cm[2] = {th_attr_ints("kernel_shape", k2, 2), th_attr_int("ceil_mode", 2)};
    expect_error("MaxPool", cm, 2, in, 1, 1, BF_EFORMAT, "'ceil_mode' is 2");
    bf__attr cip[2] = {th_attr_ints("kernel_shape", k2, 2), th_attr_int("count_include_pad", 5)};
    expect_error("AveragePool", cip, 2, in, 1, 1, BF_EFORMAT, "'count_include_pad'");
    int64_t x2d[2] = {3, 4};
    bf_tensor x2 = th_tensor_rand(2, 2, x2d);
    const bf_tensor *in2[1] = {&x2};
    expect_error("MaxPool", ok, 1, in2, 1, 1, BF_EUNSUPPORTED, "spatial dims");
    expect_error("GlobalAveragePool", NULL, 0, in2, 1, 1, BF_ESHAPE, "spatial dim");
    th_tensor_free(&x), th_tensor_free(&x2);
}

void gap_random(void **state)
{
    (void)state;
    int64_t shapes[][5] = {{2, 3, 7, 7}, {1, 5, 33}, {2, 2, 3, 4, 5}, {3, 4, 1, 1}, {1, 2, 100, 100}};
    int nds[] = {4, 3, 5, 4, 4};
    for (int si = 0; si < 5; si++) {
        bf_tensor x = th_tensor_rand(500 + si, nds[si], shapes[si]);
        int64_t yd[5], size = numel(nds[si] - 2, shapes[si] + 2);
        for (int i = 0; i < nds[si]; i++) yd[i] = i < 2 ? shapes[si][i] : 1;
        bf_tensor want = th_tensor_f32(NULL, nds[si], yd);
        for (int64_t pl = 0; pl < shapes[si][0] * shapes[si][1]; pl++) {
            double s = 0;
            for (int64_t i = 0; i < size; i++) s += ((float *)x.data)[pl * size + i];
            ((float *)want.data)[pl] = (float)(s / (double)size);
        }
        const bf_tensor *in[1] = {&x};
        expect_close("GlobalAveragePool", NULL, 0, in, 1, &want, TOL_ATOL, TOL_RTOL);
        th_tensor_free(&x), th_tensor_free(&want);
    }
    /* by hand: [[1,2],[3,4]] -> 2.5; Inf in a plane gives Inf */
    float xv[] = {1, 2, 3, 4, 1, INFINITY, 0, 0};
    int64_t xd[4] = {1, 2, 2, 2};
    bf_tensor x = th_tensor_f32(xv, 4, xd);
    const bf_tensor *in[1] = {&x};
    bf_tensor out;
    bf_error err;
    assert_int_equal(th_run_op("GlobalAveragePool", 17, NULL, 0, in, 1, &out, 1, &err), BF_OK);
    assert_int_equal(out.ndim, 4);
    assert_true(out.dims[2] == 1 && out.dims[3] == 1);
    assert_true(((float *)out.data)[0] == 2.5f && isinf(((float *)out.data)[1]));
    th_free(&out, 1);
    th_tensor_free(&x);
}

/* GlobalAveragePool's sum by hand, as bf__sum16_f32 defines it (op.h):
 * 16 lanes from +0, lane j adding x[j], x[16 + j], ... in turn, the tail's
 * floats into lanes 0, 1, ..., then acc[j] += acc[j + h] for h = 8, 4, 2,
 * 1; the mean is that sum over the count. */
static float gap_sum16_ref(const float *x, int64_t n)
{
    float acc[16];
    for (int j = 0; j < 16; j++) acc[j] = 0.0f;
    int64_t body = n / 16 * 16;
    for (int64_t i = 0; i < body; i++) acc[i % 16] = acc[i % 16] + x[i];
    for (int64_t i = body; i < n; i++) acc[i - body] = acc[i - body] + x[i];
    for (int h = 8; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) acc[j] = acc[j] + acc[j + h];
    return acc[0] / (float)n;
}

/* The pool's vector copies (AVX2, and AVX-512 where the CPU has it, else
 * the highest it has) and the plain build's, each byte for byte against the
 * sum by hand above, on plane sizes around the vectors' (1 to 40, 48, 49,
 * 63-65, 196, 3136), over random floats of mixed scales and planes holding
 * a NaN, an Inf, -Inf and +Inf (NaN), 3e38s that overflow, all -0, and
 * subnormals (a NaN's sign and payload aside). */
void gap_levels_match_reference(void **state)
{
    (void)state;
    static const char *const levels[] = {"ref", "avx2", "avx512"};
    int64_t sizes[48], ns = 0;
    for (int64_t s = 1; s <= 40; s++) sizes[ns++] = s;
    static const int64_t more[] = {48, 49, 63, 64, 65, 196, 3136};
    for (size_t k = 0; k < sizeof more / sizeof *more; k++) sizes[ns++] = more[k];
    for (int64_t si = 0; si < ns; si++) {
        int64_t n = sizes[si], planes = 9, xd[3] = {3, 3, n};
        bf_tensor x = th_tensor_rand(1300 + (unsigned)si, 3, xd);
        float *xv = x.data;
        for (int64_t i = 0; i < planes * n; i++) xv[i] *= (i % 7 == 0) ? 1e6f : (i % 5 == 0 ? 1e-3f : 1.0f);
        xv[1 * n + n / 2] = NAN;
        xv[2 * n + n - 1] = INFINITY;
        xv[3 * n] = -INFINITY, xv[3 * n + n / 3] += INFINITY;   /* with n = 1 both land on one float: -Inf + Inf */
        for (int64_t i = 0; i < n; i++) xv[4 * n + i] = 3e38f;
        for (int64_t i = 0; i < n; i++) xv[5 * n + i] = -0.0f;
        for (int64_t i = 0; i < n; i++) xv[6 * n + i] = (i % 2 ? -1.0f : 1.0f) * 1e-39f;
        const bf_tensor *in[1] = {&x};
        for (int l = 0; l < 3; l++) {
            bf_tensor out;
            bf_error err = {0};
            setenv("BITFLIP_SIMD", levels[l], 1);
            bf_status st = th_run_op("GlobalAveragePool", 17, NULL, 0, in, 1, &out, 1, &err);
            unsetenv("BITFLIP_SIMD");
            if (st != BF_OK) fail_msg("%s", err.msg);
            const float *got = out.data;
            for (int64_t pl = 0; pl < planes; pl++) {
                float want = gap_sum16_ref(xv + pl * n, n);
                int differ = isnan(want) ? !isnan(got[pl]) : memcmp(&got[pl], &want, sizeof want) != 0;
                if (differ)
                    fail_msg("plane size %lld, plane %lld: %s gives %a, the sum by hand %a", (long long)n,
                             (long long)pl, levels[l], (double)got[pl], (double)want);
            }
            th_free(&out, 1);
        }
        th_tensor_free(&x);
    }
}
