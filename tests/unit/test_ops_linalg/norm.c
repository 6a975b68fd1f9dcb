/* test_ops_linalg: BatchNormalization and LayerNormalization. */
#include "test_ops_linalg.h"

/* ------------------------------------------------------------ BatchNorm */

void bn_random(void **state)
{
    (void)state;
    int64_t shapes[][5] = {{2, 3, 5, 4}, {4, 6}, {2, 5, 7}, {1, 2, 2, 3, 2}};
    int nds[] = {4, 2, 3, 5};
    for (int si = 0; si < 4; si++) {
        int64_t c = shapes[si][1];
        bf_tensor x = th_tensor_rand(600 + si, nds[si], shapes[si]);
        bf_tensor sc = th_tensor_rand(610 + si, 1, &c), b = th_tensor_rand(620 + si, 1, &c);
        bf_tensor mean = th_tensor_rand(630 + si, 1, &c), var = th_tensor_rand(640 + si, 1, &c);
        for (int64_t i = 0; i < c; i++) ((float *)var.data)[i] += 1.5f;    /* positive */
        float eps = si == 1 ? 1e-3f : 1e-5f;
        bf_tensor want = th_tensor_f32(NULL, nds[si], shapes[si]);
        int64_t inner = numel(nds[si] - 2, shapes[si] + 2);
        for (int64_t n = 0; n < shapes[si][0]; n++)
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t i = 0; i < inner; i++) {
                    int64_t at = (n * c + ch) * inner + i;
                    double xv = ((float *)x.data)[at];
                    double y = (xv - ((float *)mean.data)[ch]) / sqrt((double)((float *)var.data)[ch] + eps) *
                                   ((float *)sc.data)[ch] + ((float *)b.data)[ch];
                    ((float *)want.data)[at] = (float)y;
                }
        bf__attr at[1] = {th_attr_float("epsilon", eps)};
        const bf_tensor *in[5] = {&x, &sc, &b, &mean, &var};
        expect_close("BatchNormalization", at, 1, in, 5, &want, TOL_ATOL, TOL_RTOL);
        th_tensor_free(&x), th_tensor_free(&sc), th_tensor_free(&b), th_tensor_free(&mean);
        th_tensor_free(&var), th_tensor_free(&want);
    }
}

void bn_hand_and_errors(void **state)
{
    (void)state;
    /* one channel, x = [1, 3], mean 2, var 3.99999 ~ 4 - eps, scale 2, B 1:
     * (x - 2) / 2 * 2 + 1 = [0, 2] */
    float xv[] = {1, 3}, sv[] = {2}, bv[] = {1}, mv[] = {2}, vv[] = {4.0f - 1e-5f}, yv[] = {0, 2};
    int64_t xd[3] = {1, 1, 2}, cd[1] = {1};
    bf_tensor x = th_tensor_f32(xv, 3, xd), sc = th_tensor_f32(sv, 1, cd), b = th_tensor_f32(bv, 1, cd);
    bf_tensor m = th_tensor_f32(mv, 1, cd), v = th_tensor_f32(vv, 1, cd), want = th_tensor_f32(yv, 3, xd);
    const bf_tensor *in[5] = {&x, &sc, &b, &m, &v};
    expect_close("BatchNormalization", NULL, 0, in, 5, &want, 1e-6, 1e-6);
    /* running statistics read in inference mode: the node has Y alone */
    expect_error("BatchNormalization", NULL, 0, in, 5, 3, BF_EFORMAT, "training_mode = 0");
    int64_t c2 = 2;
    bf_tensor m2 = th_tensor_rand(1, 1, &c2);
    const bf_tensor *in2[5] = {&x, &sc, &b, &m2, &v};
    expect_error("BatchNormalization", NULL, 0, in2, 5, 1, BF_ESHAPE, "input_mean has shape [2]; expected [C] = [1]");
    /* a negative variance (a flipped sign bit) gives NaN, as sqrt does */
    ((float *)v.data)[0] = -4.0f;
    bf_tensor out;
    bf_error err;
    assert_int_equal(th_run_op("BatchNormalization", 17, NULL, 0, in, 5, &out, 1, &err), BF_OK);
    assert_true(isnan(((float *)out.data)[0]));
    th_free(&out, 1);
    th_tensor_free(&x), th_tensor_free(&sc), th_tensor_free(&b), th_tensor_free(&m);
    th_tensor_free(&v), th_tensor_free(&want), th_tensor_free(&m2);
}

/* Training mode (batch statistics) by hand: one channel, x = [1, 3]: mean
 * 2, variance 1 (biased), y = 2 (x - 2) / sqrt(1 + eps) + 1; the running
 * statistics as PyTorch updates its buffers with momentum 1 - 0.9: mean
 * 0.1 * 2 + 0.9 * 2, variance 0.1 * 2 (unbiased) + 0.9 * 4; before opset 14
 * also the batch's mean and biased variance. Then what is refused. */
void bn_training(void **state)
{
    (void)state;
    float xv[] = {1, 3}, sv[] = {2}, bv[] = {1}, mv[] = {2}, vv[] = {4};
    int64_t xd[3] = {1, 1, 2}, cd[1] = {1};
    bf_tensor x = th_tensor_f32(xv, 3, xd), sc = th_tensor_f32(sv, 1, cd), b = th_tensor_f32(bv, 1, cd);
    bf_tensor m = th_tensor_f32(mv, 1, cd), v = th_tensor_f32(vv, 1, cd);
    const bf_tensor *in[5] = {&x, &sc, &b, &m, &v};
    double is = 1.0 / sqrt(1.0 + 1e-5);
    double want[5][2] = {{1 - 2 * is, 1 + 2 * is}, {2}, {0.1 * 2 + 0.9 * 4}, {2}, {1}};
    bf__attr tm[1] = {th_attr_int("training_mode", 1)};
    for (int k = 0; k < 2; k++) {
        int opset = k ? 13 : 14, nout = k ? 5 : 3;
        bf_tensor out[5];
        bf_error err = {0};
        bf_status st = th_run_op("BatchNormalization", opset, k ? NULL : tm, k ? 0 : 1, in, 5, out, nout, &err);
        if (st != BF_OK) fail_msg("opset %d: %s", opset, err.msg);
        for (int o = 0; o < nout; o++)
            for (int64_t i = 0; i < bf_tensor_numel(&out[o]); i++)
                if (fabs(((float *)out[o].data)[i] - want[o][i]) > 1e-6 * (1 + fabs(want[o][i])))
                    fail_msg("opset %d output %d [%lld]: %.9g, want %.9g", opset, o, (long long)i,
                             ((float *)out[o].data)[i], want[o][i]);
        th_free(out, nout);
    }
    /* training_mode 2; opset 14's three outputs at most; one value per channel */
    bf__attr t2[1] = {th_attr_int("training_mode", 2)};
    expect_error("BatchNormalization", t2, 1, in, 5, 1, BF_EFORMAT, "must be 0 or 1");
    bf_tensor out[5];
    bf_error err = {0};
    assert_int_equal(th_run_op("BatchNormalization", 17, tm, 1, in, 5, out, 5, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "at most 3"));
    int64_t x1d[3] = {1, 1, 1};
    bf_tensor x1 = th_tensor_f32(xv, 3, x1d);
    const bf_tensor *in1[5] = {&x1, &sc, &b, &m, &v};
    expect_error("BatchNormalization", tm, 1, in1, 5, 1, BF_ESHAPE, "one value per channel");
    /* without training_mode at opset 14, one output: inference, the running statistics */
    bf_tensor y;
    assert_int_equal(th_run_op("BatchNormalization", 14, NULL, 0, in, 5, &y, 1, &err), BF_OK);
    assert_true(fabs(((float *)y.data)[1] - (2 * 1 / sqrt(4 + 1e-5) + 1)) < 1e-6);
    th_free(&y, 1);
    th_tensor_free(&x), th_tensor_free(&x1), th_tensor_free(&sc), th_tensor_free(&b), th_tensor_free(&m);
    th_tensor_free(&v);
}

/* ------------------------------------------------------------ LayerNorm */

void ln_random(void **state)
{
    (void)state;
    /* scale_mode: 0 full, 1 one value, 2 with a leading 1; bias: 0 none, 1 full, 2 one value */
    struct { int nd; int64_t d[4]; int axis; int scale_mode; int bias; } cases[] = {
        {3, {2, 5, 16}, -1, 0, 1},
        {2, {7, 768}, -1, 0, 1},
        {3, {2, 3, 20}, 1, 0, 1},      /* normalise over the last two dims */
        {3, {4, 3, 5}, -1, 1, 0},      /* scalar scale, no bias */
        {4, {2, 2, 3, 33}, -2, 2, 1},  /* scale [1, 3, 33] */
        {2, {3, 4}, 0, 0, 1},          /* everything in one row */
        {3, {2, 3, 8}, -1, 1, 2},      /* scalar scale and scalar bias */
    };
    for (int ci = 0; ci < 7; ci++) {
        int nd = cases[ci].nd, axis = cases[ci].axis < 0 ? cases[ci].axis + nd : cases[ci].axis;
        bf_tensor x = th_tensor_rand(700 + ci, nd, cases[ci].d);
        /* an offset makes the mean nonzero, so the variance needs care */
        for (int64_t i = 0; i < numel(nd, cases[ci].d); i++) ((float *)x.data)[i] = ((float *)x.data)[i] * 3 + 10;
        int64_t dsize = numel(nd - axis, cases[ci].d + axis), rows = numel(axis, cases[ci].d);
        bf_tensor sc, b = cases[ci].bias == 2 ? th_tensor_f32((float[]){-0.75f}, 1, (int64_t[]){1})
                                              : th_tensor_rand(720 + ci, nd - axis, cases[ci].d + axis);
        if (cases[ci].scale_mode == 1) sc = th_tensor_f32((float[]){1.5f}, 0, NULL);
        else if (cases[ci].scale_mode == 2) {
            int64_t sd[4] = {1};
            memcpy(sd + 1, cases[ci].d + axis, sizeof(int64_t) * (size_t)(nd - axis));
            sc = th_tensor_rand(710 + ci, nd - axis + 1, sd);
        } else sc = th_tensor_rand(710 + ci, nd - axis, cases[ci].d + axis);
        bf_tensor want = th_tensor_f32(NULL, nd, cases[ci].d);
        const float *X = x.data, *S = sc.data, *B = b.data;
        for (int64_t r = 0; r < rows; r++) {
            double mean = 0, var = 0;
            for (int64_t i = 0; i < dsize; i++) mean += X[r * dsize + i];
            mean /= (double)dsize;
            for (int64_t i = 0; i < dsize; i++) var += (X[r * dsize + i] - mean) * (X[r * dsize + i] - mean);
            var /= (double)dsize;
            for (int64_t i = 0; i < dsize; i++) {
                double s = cases[ci].scale_mode == 1 ? S[0] : S[i];
                double y = (X[r * dsize + i] - mean) / sqrt(var + 1e-5) * s + (cases[ci].bias ? B[cases[ci].bias == 2 ? 0 : i] : 0.0);
                ((float *)want.data)[r * dsize + i] = (float)y;
            }
        }
        bf__attr at[1] = {th_attr_int("axis", cases[ci].axis)};
        const bf_tensor *in[3] = {&x, &sc, &b};
        expect_close("LayerNormalization", at, 1, in, cases[ci].bias ? 3 : 2, &want, TOL_ATOL, TOL_RTOL);
        th_tensor_free(&x), th_tensor_free(&sc), th_tensor_free(&b), th_tensor_free(&want);
    }
}

void ln_hand_and_errors(void **state)
{
    (void)state;
    /* x = [1, 3]: mean 2, var 1; eps 0; y = [-1, 1] * [2, 3] + [1, 1] = [-1, 4] */
    float xv[] = {1, 3}, sv[] = {2, 3}, bv[] = {1, 1}, yv[] = {-1, 4};
    int64_t d[2] = {1, 2}, d1[1] = {2};
    bf_tensor x = th_tensor_f32(xv, 2, d), sc = th_tensor_f32(sv, 1, d1), b = th_tensor_f32(bv, 1, d1);
    bf_tensor want = th_tensor_f32(yv, 2, d);
    bf__attr at[1] = {th_attr_float("epsilon", 0.0f)};
    const bf_tensor *in[3] = {&x, &sc, &b};
    expect_close("LayerNormalization", at, 1, in, 3, &want, 0, 0);
    expect_error("LayerNormalization", NULL, 0, in, 3, 2, BF_EUNSUPPORTED, "Mean and InvStdDev");
    bf__attr ax[1] = {th_attr_int("axis", 2)};
    expect_error("LayerNormalization", ax, 1, in, 3, 1, BF_ERANGE, "axis 2 out of range");
    int64_t d3[1] = {3};
    bf_tensor s3 = th_tensor_rand(1, 1, d3);
    const bf_tensor *in3[3] = {&x, &s3, &b};
    expect_error("LayerNormalization", NULL, 0, in3, 3, 1, BF_ESHAPE, "input Scale has shape [3]");
    /* huge values (exponent bit flips), with what PyTorch 1.13 gives for
     * them (F.layer_norm on CPU): at 3e19 the squared deviation overflows
     * float, the variance is Inf and the row collapses to B; at 1e30 the
     * Welford merge multiplies an overflowed delta^2 by 0 and the row is NaN */
    bf_tensor out;
    bf_error err;
    ((float *)x.data)[1] = 3e19f;
    assert_int_equal(th_run_op("LayerNormalization", 17, NULL, 0, in, 3, &out, 1, &err), BF_OK);
    assert_true(((float *)out.data)[0] == 1.0f && ((float *)out.data)[1] == 1.0f);
    th_free(&out, 1);
    ((float *)x.data)[1] = 1e30f;
    assert_int_equal(th_run_op("LayerNormalization", 17, NULL, 0, in, 3, &out, 1, &err), BF_OK);
    assert_true(isnan(((float *)out.data)[0]) && isnan(((float *)out.data)[1]));
    th_free(&out, 1);
    th_tensor_free(&x), th_tensor_free(&sc), th_tensor_free(&b), th_tensor_free(&want), th_tensor_free(&s3);
}

/* LayerNormalization's rows in the kernel's float order (linalg_norm.c,
 * ln_rows), written out plainly for rows whose statistics take the fast
 * form (finite, every |x| below sqrt(1e37 / (4 d))): the mean a sum in 16
 * lanes (element i to lane i % 16) folded 8, 4, 2, 1, over d; the variance
 * the same lanes over (x - mean)^2, over d; rstd = 1 / sqrtf(var + eps);
 * y = (x * rstd + -rstd * mean) * scale, then + bias. */
static void ln_row_ref(const float *x, int64_t d, float eps, const float *scale, const float *bias, float *y)
{
    float acc[16] = {0}, sq[16] = {0};
    for (int64_t i = 0; i < d; i++) acc[i % 16] += x[i];
    for (int h = 8; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) acc[j] += acc[j + h];
    float mean = acc[0] / (float)d;
    for (int64_t i = 0; i < d; i++) {
        float t = x[i] - mean;
        sq[i % 16] += t * t;
    }
    for (int h = 8; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) sq[j] += sq[j + h];
    float var = sq[0] / (float)d, rstd = 1.0f / sqrtf(var + eps), shift = -rstd * mean;
    for (int64_t i = 0; i < d; i++) {
        float v = x[i] * rstd;
        v = v + shift;
        v = v * scale[i];
        y[i] = v + bias[i];
    }
}

/* Every CPU path (BITFLIP_SIMD ref, avx2, avx512: 4, 8 and 16 lanes, the
 * AVX-512 one where the CPU has it, else the highest it has) against the
 * plain rows above, byte for byte, on widths around the vectors' (1 to
 * 33, ViT's 384, BERT's 768, 1000); and, on rows with NaN, Inf or values
 * past the fast form's bound (PyTorch's Welford order), each path against
 * the reference path. */
void ln_levels_match_reference(void **state)
{
    (void)state;
    static const int64_t widths[] = {1, 2, 7, 15, 16, 17, 31, 32, 33, 384, 768, 1000};
    static const char *const levels[] = {"ref", "avx2", "avx512"};
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (int odd = 0; odd < 2; odd++) {
            int64_t rows = 6, d = widths[wi], xd[2] = {rows, d};
            bf_tensor x = th_tensor_rand(900 + wi, 2, xd), sc = th_tensor_rand(920 + wi, 1, &d),
                      b = th_tensor_rand(940 + wi, 1, &d);
            float *xv = x.data;
            for (int64_t i = 0; i < rows * d; i++) xv[i] = xv[i] * 3 + 10;   /* a mean far from 0 */
            if (odd) {   /* row 1 NaN, row 2 +Inf, row 3 past the bound (Welford), row 4 -0 and 3e38 */
                xv[1 * d + d / 2] = NAN, xv[2 * d] = INFINITY, xv[3 * d + d - 1] = 1e18f;
                xv[4 * d] = -0.0f, xv[4 * d + d / 3] = 3e38f;
            }
            bf__attr at[2] = {th_attr_int("axis", -1), th_attr_float("epsilon", 1e-6f)};
            const bf_tensor *in[3] = {&x, &sc, &b};
            bf_tensor out[3];
            bf_error err = {0};
            for (int l = 0; l < 3; l++) {
                setenv("BITFLIP_SIMD", levels[l], 1);
                bf_status st = th_run_op("LayerNormalization", 17, at, 2, in, 3, &out[l], 1, &err);
                unsetenv("BITFLIP_SIMD");
                if (st != BF_OK) fail_msg("%s", err.msg);
            }
            float *want = malloc(sizeof(float) * (size_t)(rows * d));
            assert_non_null(want);
            for (int64_t r = 0; r < rows; r++) ln_row_ref(xv + r * d, d, 1e-6f, sc.data, b.data, want + r * d);
            for (int l = 0; l < 3; l++)
                for (int64_t r = 0; r < rows; r++) {
                    const float *got = (const float *)out[l].data + r * d;
                    /* the odd rows: against the reference path (Welford rows have no plain form here) */
                    const float *exp = odd && r >= 1 && r <= 4 ? (const float *)out[0].data + r * d : want + r * d;
                    int differ = 0;   /* a NaN's sign and payload aside (docs/engine/exactness.md) */
                    for (int64_t i = 0; i < d; i++)
                        differ |= isnan(got[i]) ? !isnan(exp[i]) : memcmp(&got[i], &exp[i], sizeof(float)) != 0;
                    if (differ)
                        fail_msg("width %lld, %s, row %lld: %s differs from the %s", (long long)d,
                                 odd ? "odd rows" : "plain rows", (long long)r, levels[l],
                                 exp == want + r * d ? "plain rows" : "reference path");
                }
            free(want), th_free(out, 1), th_free(out + 1, 1), th_free(out + 2, 1);
            th_tensor_free(&x), th_tensor_free(&sc), th_tensor_free(&b);
        }
}
