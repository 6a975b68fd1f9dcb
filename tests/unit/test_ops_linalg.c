/* The linalg family (Gemm, MatMul, Conv, MaxPool, AveragePool,
 * GlobalAveragePool, BatchNormalization, LayerNormalization) against plain
 * references written straight from the ONNX spec, computed in double; plus
 * tiny cases worked out by hand and the errors prepare must report. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "op_harness.h"

#define TOL_ATOL 1e-5
#define TOL_RTOL 1e-5

static int64_t numel(int nd, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

/* Runs a one-output op, compares with want, frees the output. */
static void expect_close(const char *op, bf__attr *attrs, size_t na, const bf_tensor *const *in, int nin,
                         const bf_tensor *want, double atol, double rtol)
{
    bf_tensor out;
    bf_error err = {0};
    bf_status st = th_run_op(op, 17, attrs, na, in, nin, &out, 1, &err);
    if (st != BF_OK) fail_msg("%s failed: %s", op, err.msg);
    double r = th_compare(&out, want, atol, rtol);
    if (!(r <= 1.0)) fail_msg("%s: mismatch, ratio %g", op, r);
    th_free(&out, 1);
}

/* Runs an op expected to fail in prepare with `status` and a message containing `needle`. */
static void expect_error(const char *op, bf__attr *attrs, size_t na, const bf_tensor *const *in, int nin,
                         int nout, bf_status status, const char *needle)
{
    bf_tensor out[3];
    bf_error err = {0};
    bf_status st = th_run_op(op, 17, attrs, na, in, nin, out, nout, &err);
    if (st == BF_OK) {
        th_free(out, nout);
        fail_msg("%s: expected an error containing '%s'", op, needle);
    }
    assert_int_equal(st, status);
    if (!strstr(err.msg, needle)) fail_msg("%s: message '%s' lacks '%s'", op, err.msg, needle);
}

/* ------------------------------------------------------------------ Gemm */

static void ref_gemm(const bf_tensor *a, const bf_tensor *b, const bf_tensor *c, float alpha,
                     float beta, int ta, int tb, bf_tensor *y)
{
    int64_t m = ta ? a->dims[1] : a->dims[0], k = ta ? a->dims[0] : a->dims[1];
    int64_t n = tb ? b->dims[0] : b->dims[1];
    int64_t dims[2] = {m, n};
    *y = th_tensor_f32(NULL, 2, dims);
    const float *A = a->data, *B = b->data;
    float *Y = y->data;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++) {
                double av = ta ? A[l * m + i] : A[i * k + l];
                double bv = tb ? B[j * k + l] : B[l * n + j];
                s += av * bv;
            }
            s *= alpha;
            if (c && beta != 0) {
                /* numpy broadcast of C against [m, n] */
                int64_t cr = c->ndim >= 2 ? c->dims[c->ndim - 2] : 1;
                int64_t cc = c->ndim >= 1 ? c->dims[c->ndim - 1] : 1;
                double cv = ((const float *)c->data)[(cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j)];
                s += beta * cv;
            }
            Y[i * n + j] = (float)s;
        }
}

static void gemm_random(void **state)
{
    (void)state;
    int64_t sizes[][3] = {{1, 1, 1}, {3, 4, 5}, {17, 9, 33}, {64, 10, 128}, {5, 1, 7}};
    uint64_t seed = 1;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int cshape = 0; cshape < 7; cshape++) {
                    int64_t m = sizes[si][0], n = sizes[si][1], k = sizes[si][2];
                    int64_t ad[2] = {ta ? k : m, ta ? m : k}, bd[2] = {tb ? n : k, tb ? k : n};
                    /* no C, scalar, [N], [1,N], [M,1], [M,N], [1] */
                    int64_t cd[6][2] = {{0}, {0}, {n}, {1, n}, {m, 1}, {m, n}};
                    int cnd[7] = {0, 0, 1, 2, 2, 2, 1};
                    bf_tensor a = th_tensor_rand(seed++, 2, ad), b = th_tensor_rand(seed++, 2, bd);
                    bf_tensor c = {0};
                    if (cshape == 6) { int64_t one = 1; c = th_tensor_rand(seed++, 1, &one); }
                    else if (cshape > 0) c = th_tensor_rand(seed++, cnd[cshape], cd[cshape]);
                    float alpha = (cshape % 2) ? 0.5f : 1.0f, beta = (cshape % 3) ? 1.0f : -2.0f;
                    bf__attr at[4] = {th_attr_int("transA", ta), th_attr_int("transB", tb),
                                      th_attr_float("alpha", alpha), th_attr_float("beta", beta)};
                    const bf_tensor *in[3] = {&a, &b, cshape ? &c : NULL};
                    bf_tensor want;
                    ref_gemm(&a, &b, cshape ? &c : NULL, alpha, beta, ta, tb, &want);
                    expect_close("Gemm", at, 4, in, cshape ? 3 : 2, &want, TOL_ATOL, TOL_RTOL);
                    th_tensor_free(&want);
                    th_tensor_free(&a), th_tensor_free(&b);
                    if (cshape) th_tensor_free(&c);
                }
}

static void gemm_hand(void **state)
{
    (void)state;
    /* A = [[1,2],[3,4]], B = [[5,6],[7,8]], C = [10, 20], alpha 2, beta 0.5:
     * AB = [[19,22],[43,50]]; 2AB + 0.5C = [[43,54],[91,110]] */
    float av[] = {1, 2, 3, 4}, bv[] = {5, 6, 7, 8}, cv[] = {10, 20}, yv[] = {43, 54, 91, 110};
    int64_t d2[2] = {2, 2}, d1[1] = {2};
    bf_tensor a = th_tensor_f32(av, 2, d2), b = th_tensor_f32(bv, 2, d2), c = th_tensor_f32(cv, 1, d1);
    bf_tensor want = th_tensor_f32(yv, 2, d2);
    bf__attr at[2] = {th_attr_float("alpha", 2.0f), th_attr_float("beta", 0.5f)};
    const bf_tensor *in[3] = {&a, &b, &c};
    expect_close("Gemm", at, 2, in, 3, &want, 0, 0);
    /* transB: B' = [[5,7],[6,8]]; AB' = [[17,23],[39,53]], plus C (beta 1) */
    float y2[] = {27, 43, 49, 73};
    bf_tensor want2 = th_tensor_f32(y2, 2, d2);
    bf__attr at2[1] = {th_attr_int("transB", 1)};
    expect_close("Gemm", at2, 1, in, 3, &want2, 0, 0);
    /* beta = 0 ignores C entirely, NaN included (as PyTorch addmm and ORT) */
    ((float *)c.data)[0] = NAN;
    float y3[] = {19, 22, 43, 50};
    bf_tensor want3 = th_tensor_f32(y3, 2, d2);
    bf__attr at3[1] = {th_attr_float("beta", 0.0f)};
    expect_close("Gemm", at3, 1, in, 3, &want3, 0, 0);
    /* Inf in A propagates: row 0 = [inf*5 + 2*7, inf*6 + 2*8] = [inf, inf] */
    ((float *)a.data)[0] = INFINITY;
    bf_tensor out;
    bf_error err;
    assert_int_equal(th_run_op("Gemm", 17, NULL, 0, in, 2, &out, 1, &err), BF_OK);
    assert_true(isinf(((float *)out.data)[0]) && isinf(((float *)out.data)[1]));
    assert_true(((float *)out.data)[2] == 43.0f);
    th_free(&out, 1);
    th_tensor_free(&a), th_tensor_free(&b), th_tensor_free(&c);
    th_tensor_free(&want), th_tensor_free(&want2), th_tensor_free(&want3);
}

static void gemm_errors(void **state)
{
    (void)state;
    int64_t ad[2] = {3, 4}, bd[2] = {5, 6}, b3[3] = {4, 2, 2}, cd[2] = {2, 6};
    bf_tensor a = th_tensor_rand(1, 2, ad), b = th_tensor_rand(2, 2, bd), bb = th_tensor_rand(3, 3, b3);
    bf_tensor c = th_tensor_rand(4, 2, cd);
    const bf_tensor *in[2] = {&a, &b};
    expect_error("Gemm", NULL, 0, in, 2, 1, BF_ESHAPE, "K = 4");
    const bf_tensor *in3[2] = {&a, &bb};
    expect_error("Gemm", NULL, 0, in3, 2, 1, BF_ESHAPE, "2-D");
    /* B [5,6] with transA on A [3,4]: K = 3 */
    bf__attr ta[1] = {th_attr_int("transA", 2)};
    expect_error("Gemm", ta, 1, in, 2, 1, BF_EFORMAT, "must be 0 or 1");
    bf__attr tf[1] = {th_attr_string("alpha", "x")};
    expect_error("Gemm", tf, 1, in, 2, 1, BF_EFORMAT, "'alpha'");
    /* C [2,6] does not broadcast to [3,6] */
    int64_t b46[2] = {4, 6};
    bf_tensor b2 = th_tensor_rand(5, 2, b46);
    const bf_tensor *inc[3] = {&a, &b2, &c};
    expect_error("Gemm", NULL, 0, inc, 3, 1, BF_ESHAPE, "input C has shape [2, 6]");
    th_tensor_free(&a), th_tensor_free(&b), th_tensor_free(&bb), th_tensor_free(&c), th_tensor_free(&b2);
}

/* ---------------------------------------------------------------- MatMul */

static void ref_matmul(const bf_tensor *a, const bf_tensor *b, bf_tensor *y)
{
    /* Promote 1-D, broadcast batch dims, multiply, drop the promoted dims. */
    int64_t ad[BF_MAX_DIMS], bd[BF_MAX_DIMS];
    int na = a->ndim, nb = b->ndim;
    memcpy(ad, a->dims, sizeof(int64_t) * (size_t)na);
    memcpy(bd, b->dims, sizeof(int64_t) * (size_t)nb);
    if (na == 1) { ad[1] = ad[0]; ad[0] = 1; na = 2; }
    if (nb == 1) { bd[1] = 1; nb = 2; }
    int64_t m = ad[na - 2], k = ad[na - 1], n = bd[nb - 1];
    int nbat = (na > nb ? na : nb) - 2;
    int64_t od[BF_MAX_DIMS];
    for (int i = 0; i < nbat; i++) {
        int ia = i - (nbat - (na - 2)), ib = i - (nbat - (nb - 2));
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
        od[i] = da > db ? da : db;
    }
    int64_t batch = numel(nbat, od);
    int ond = 0;
    int64_t ydims[BF_MAX_DIMS];
    for (int i = 0; i < nbat; i++) ydims[ond++] = od[i];
    if (a->ndim > 1) ydims[ond++] = m;
    if (b->ndim > 1) ydims[ond++] = n;
    *y = th_tensor_f32(NULL, ond, ydims);
    const float *A = a->data, *B = b->data;
    float *Y = y->data;
    for (int64_t t = 0; t < batch; t++) {
        /* decompose t into the output batch index, map to A's and B's batch offsets */
        int64_t rem = t, oa = 0, ob = 0, sa = 1, sb = 1;
        for (int i = nbat - 1; i >= 0; i--) {
            int64_t idx = rem % od[i];
            rem /= od[i];
            int ia = i - (nbat - (na - 2)), ib = i - (nbat - (nb - 2));
            if (ia >= 0) { oa += (ad[ia] == 1 ? 0 : idx) * sa; sa *= ad[ia]; }
            if (ib >= 0) { ob += (bd[ib] == 1 ? 0 : idx) * sb; sb *= bd[ib]; }
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t l = 0; l < k; l++)
                    s += (double)A[oa * m * k + i * k + l] * B[ob * k * n + l * n + j];
                Y[t * m * n + i * n + j] = (float)s;
            }
    }
}

static void matmul_random(void **state)
{
    (void)state;
    struct { int na; int64_t a[5]; int nb; int64_t b[5]; } cases[] = {
        {2, {3, 4}, 2, {4, 5}},
        {1, {7}, 1, {7}},                          /* dot product, scalar result */
        {1, {6}, 2, {6, 3}},
        {2, {4, 6}, 1, {6}},
        {3, {5, 8, 16}, 2, {16, 12}},              /* [B,T,D]@[D,E]: folded */
        {4, {2, 3, 5, 4}, 4, {2, 3, 4, 5}},        /* attention scores */
        {4, {2, 1, 5, 4}, 3, {3, 4, 6}},           /* broadcast both ways */
        {2, {5, 4}, 3, {3, 4, 2}},                 /* A broadcast over B's batch */
        {3, {1, 3, 4}, 4, {2, 1, 4, 3}},
        {1, {4}, 3, {2, 4, 3}},
        {3, {2, 3, 4}, 1, {4}},
        {4, {2, 3, 5, 4}, 4, {1, 1, 4, 2}},        /* B batch all ones: folded */
        {2, {3, 0}, 2, {0, 4}},                    /* K = 0: zeros */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bf_tensor a = th_tensor_rand(10 + i, cases[i].na, cases[i].a);
        bf_tensor b = th_tensor_rand(50 + i, cases[i].nb, cases[i].b);
        bf_tensor want;
        ref_matmul(&a, &b, &want);
        const bf_tensor *in[2] = {&a, &b};
        expect_close("MatMul", NULL, 0, in, 2, &want, TOL_ATOL, TOL_RTOL);
        th_tensor_free(&want), th_tensor_free(&a), th_tensor_free(&b);
    }
}

static void matmul_hand(void **state)
{
    (void)state;
    /* [1,2,3] . [4,5,6] = 4 + 10 + 18 = 32, a scalar */
    float av[] = {1, 2, 3}, bv[] = {4, 5, 6}, yv[] = {32};
    int64_t d3[1] = {3};
    bf_tensor a = th_tensor_f32(av, 1, d3), b = th_tensor_f32(bv, 1, d3), want = th_tensor_f32(yv, 0, NULL);
    const bf_tensor *in[2] = {&a, &b};
    expect_close("MatMul", NULL, 0, in, 2, &want, 0, 0);
    /* batch of 2 [1,2] @ shared [2,1]: [[1,2]],[[3,4]] @ [[1],[10]] = [[21]], [[43]] */
    float a2[] = {1, 2, 3, 4}, b2[] = {1, 10}, y2[] = {21, 43};
    int64_t da[3] = {2, 1, 2}, db[2] = {2, 1}, dy[3] = {2, 1, 1};
    bf_tensor a3 = th_tensor_f32(a2, 3, da), b3 = th_tensor_f32(b2, 2, db), w3 = th_tensor_f32(y2, 3, dy);
    const bf_tensor *in2[2] = {&a3, &b3};
    expect_close("MatMul", NULL, 0, in2, 2, &w3, 0, 0);
    th_tensor_free(&a), th_tensor_free(&b), th_tensor_free(&want);
    th_tensor_free(&a3), th_tensor_free(&b3), th_tensor_free(&w3);
}

static void matmul_errors(void **state)
{
    (void)state;
    int64_t ad[3] = {2, 3, 4}, bd[3] = {3, 4, 5}, cd[2] = {5, 6};
    bf_tensor a = th_tensor_rand(1, 3, ad), b = th_tensor_rand(2, 3, bd), c = th_tensor_rand(3, 2, cd);
    const bf_tensor *in[2] = {&a, &b};
    expect_error("MatMul", NULL, 0, in, 2, 1, BF_ESHAPE, "do not broadcast (2 vs 3)");
    const bf_tensor *in2[2] = {&a, &c};
    expect_error("MatMul", NULL, 0, in2, 2, 1, BF_ESHAPE, "K = 4");
    bf_tensor s = th_tensor_f32((float[]){1}, 0, NULL);
    const bf_tensor *in3[2] = {&s, &c};
    expect_error("MatMul", NULL, 0, in3, 2, 1, BF_ESHAPE, "rank >= 1");
    int64_t one = 4, iv[4] = {1, 2, 3, 4};
    bf_tensor i64 = th_tensor_i64(iv, 1, &one);
    const bf_tensor *in4[2] = {&i64, &i64};
    expect_error("MatMul", NULL, 0, in4, 2, 1, BF_EUNSUPPORTED, "int64");
    th_tensor_free(&a), th_tensor_free(&b), th_tensor_free(&c), th_tensor_free(&s), th_tensor_free(&i64);
}

/* ------------------------------------------------------- windows (spec) */

typedef struct wcfg {
    int r;                      /* spatial rank */
    int64_t in[3], k[3], s[3], d[3], pads[6];
    const char *auto_pad;       /* NULL: NOTSET */
    int ceil_mode;
} wcfg;

/* Output size and begin pad for spatial dim i, from the ONNX spec formulas. */
static void ref_out_size(const wcfg *w, int i, int64_t *out, int64_t *pb, int64_t *pe)
{
    int64_t in = w->in[i], ek = (w->k[i] - 1) * w->d[i] + 1;
    if (w->auto_pad && strncmp(w->auto_pad, "SAME", 4) == 0) {
        *out = (int64_t)ceil((double)in / (double)w->s[i]);
        int64_t total = (*out - 1) * w->s[i] + ek - in;
        if (total < 0) total = 0;
        int upper = strcmp(w->auto_pad, "SAME_UPPER") == 0;
        *pb = upper ? total / 2 : (total + 1) / 2;
        *pe = total - *pb;
        return;
    }
    int valid = w->auto_pad && strcmp(w->auto_pad, "VALID") == 0;
    *pb = valid ? 0 : w->pads[i];
    *pe = valid ? 0 : w->pads[w->r + i];
    double q = (double)(in + *pb + *pe - ek) / (double)w->s[i];
    *out = (int64_t)(w->ceil_mode ? ceil(q) : floor(q)) + 1;
    if (w->ceil_mode && (*out - 1) * w->s[i] >= in + *pb) (*out)--;   /* PyTorch rule */
}

static int set_window_attrs(const wcfg *w, bf__attr *at, int with_kernel, int with_dilations)
{
    int n = 0;
    if (with_kernel) at[n++] = th_attr_ints("kernel_shape", w->k, (size_t)w->r);
    at[n++] = th_attr_ints("strides", w->s, (size_t)w->r);
    if (with_dilations) at[n++] = th_attr_ints("dilations", w->d, (size_t)w->r);
    if (w->auto_pad) at[n++] = th_attr_string("auto_pad", w->auto_pad);
    else at[n++] = th_attr_ints("pads", w->pads, (size_t)(2 * w->r));
    return n;
}

/* Iterates a multi-index over dims[0..r): returns 0 when done. */
static int next_index(int64_t *idx, const int64_t *dims, int r)
{
    for (int i = r - 1; i >= 0; i--) {
        if (++idx[i] < dims[i]) return 1;
        idx[i] = 0;
    }
    return 0;
}

/* ------------------------------------------------------------------ Conv */

static void ref_conv(const wcfg *w, const bf_tensor *x, const bf_tensor *wt, const bf_tensor *b,
                     int64_t group, bf_tensor *y)
{
    int r = w->r;
    int64_t N = x->dims[0], C = x->dims[1], M = wt->dims[0], cg = C / group, mg = M / group;
    int64_t out[3], pb[3], pe[3];
    for (int i = 0; i < r; i++) ref_out_size(w, i, &out[i], &pb[i], &pe[i]);
    int64_t yd[5] = {N, M};
    for (int i = 0; i < r; i++) yd[2 + i] = out[i];
    *y = th_tensor_f32(NULL, 2 + r, yd);
    const float *X = x->data, *W = wt->data;
    float *Y = y->data;
    int64_t isp = numel(r, w->in), osp = numel(r, out), ksp = numel(r, w->k);
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            int64_t g = m / mg;
            int64_t o[3] = {0};
            do {
                double s = b ? ((const float *)b->data)[m] : 0.0;
                for (int64_t c = 0; c < cg; c++) {
                    int64_t kk[3] = {0};
                    do {
                        int64_t xi = 0, wi = 0, inside = 1;
                        for (int i = 0; i < r; i++) {
                            int64_t p = o[i] * w->s[i] - pb[i] + kk[i] * w->d[i];
                            if (p < 0 || p >= w->in[i]) inside = 0;
                            xi = xi * w->in[i] + p;
                            wi = wi * w->k[i] + kk[i];
                        }
                        if (inside)
                            s += (double)X[(n * C + g * cg + c) * isp + xi] * W[(m * cg + c) * ksp + wi];
                    } while (next_index(kk, w->k, r));
                }
                int64_t oi = 0;
                for (int i = 0; i < r; i++) oi = oi * out[i] + o[i];
                Y[(n * M + m) * osp + oi] = (float)s;
            } while (next_index(o, out, r));
        }
}

typedef struct conv_case {
    wcfg w;
    int64_t n, c, m, group;
    int bias, kernel_attr;
} conv_case;

static void conv_random(void **state)
{
    (void)state;
    conv_case cases[] = {
        /* 2-D: 3x3 pad 1, bias */
        {{2, {9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 0}, 2, 4, 6, 1, 1, 1},
        /* 1x1 stride 1: the pointwise fast path, grouped */
        {{2, {5, 7}, {1, 1}, {1, 1}, {1, 1}, {0}, NULL, 0}, 2, 6, 4, 2, 1, 0},
        /* strided, dilated, asymmetric pads, no bias */
        {{2, {11, 10}, {3, 2}, {2, 3}, {2, 1}, {1, 0, 2, 1}, NULL, 0}, 1, 3, 5, 1, 0, 1},
        /* depthwise with multiplier 2, stride 2 (im2col) */
        {{2, {10, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 0}, 2, 4, 8, 4, 1, 1},
        /* depthwise stride 1 dilation 2 */
        {{2, {8, 8}, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, NULL, 0}, 1, 3, 3, 3, 1, 0},
        /* 1-D */
        {{1, {20}, {5}, {2}, {1}, {2, 1}, NULL, 0}, 2, 3, 4, 1, 1, 1},
        {{1, {16}, {3}, {1}, {3}, {0, 0}, NULL, 0}, 1, 4, 4, 2, 0, 0},
        /* 3-D */
        {{3, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 1, 0}, NULL, 0}, 2, 2, 3, 1, 1, 1},
        /* auto_pad */
        {{2, {7, 9}, {3, 4}, {2, 2}, {1, 1}, {0}, "SAME_UPPER", 0}, 1, 2, 3, 1, 1, 1},
        {{2, {7, 9}, {3, 4}, {2, 2}, {1, 1}, {0}, "SAME_LOWER", 0}, 1, 2, 3, 1, 1, 1},
        {{2, {7, 9}, {3, 4}, {2, 3}, {1, 1}, {0}, "VALID", 0}, 1, 2, 3, 1, 0, 1},
        {{1, {13}, {4}, {3}, {2}, {0}, "SAME_UPPER", 0}, 1, 2, 2, 1, 1, 0},
        /* 1x1 stride 2: im2col gathers */
        {{2, {6, 6}, {1, 1}, {2, 2}, {1, 1}, {0}, NULL, 0}, 1, 3, 2, 1, 1, 1},
        /* a larger layer: 32 -> 64, 3x3 over 14x14 */
        {{2, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 0}, 2, 32, 64, 1, 1, 1},
        /* direct depthwise path: 5 wide, stride 2; kernel wider than the input
         * (no interior columns); 3-D. And a one-channel 1-D first layer. */
        {{2, {6, 12}, {3, 5}, {1, 2}, {1, 1}, {1, 2, 1, 2}, NULL, 0}, 2, 3, 3, 3, 1, 1},
        {{1, {10}, {3}, {1}, {1}, {1, 1}, NULL, 0}, 1, 1, 4, 1, 1, 1},
        {{2, {4, 2}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 0}, 1, 2, 2, 2, 1, 1},
        {{3, {4, 5, 6}, {2, 3, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1, 1, 1, 1}, NULL, 0}, 1, 2, 2, 2, 1, 1},
        /* huge pads: outputs wholly in the padding equal the bias */
        {{2, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {3, 3, 3, 3}, NULL, 0}, 1, 2, 2, 1, 1, 1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        conv_case *cc = &cases[ci];
        wcfg *w = &cc->w;
        int64_t xd[5] = {cc->n, cc->c}, wd[5] = {cc->m, cc->c / cc->group};
        for (int i = 0; i < w->r; i++) xd[2 + i] = w->in[i], wd[2 + i] = w->k[i];
        bf_tensor x = th_tensor_rand(100 + ci, 2 + w->r, xd), wt = th_tensor_rand(200 + ci, 2 + w->r, wd);
        bf_tensor b = th_tensor_rand(300 + ci, 1, &cc->m);
        bf__attr at[6];
        int na = set_window_attrs(w, at, cc->kernel_attr, 1);
        at[na++] = th_attr_int("group", cc->group);
        const bf_tensor *in[3] = {&x, &wt, cc->bias ? &b : NULL};
        bf_tensor want;
        ref_conv(w, &x, &wt, cc->bias ? &b : NULL, cc->group, &want);
        expect_close("Conv", at, (size_t)na, in, cc->bias ? 3 : 2, &want, TOL_ATOL, TOL_RTOL);
        th_tensor_free(&want), th_tensor_free(&x), th_tensor_free(&wt), th_tensor_free(&b);
    }
}

static void conv_hand(void **state)
{
    (void)state;
    /* X = 1..9 as 3x3, W = ones 2x2, bias 1, no pad:
     * [1+2+4+5, 2+3+5+6; 4+5+7+8, 5+6+8+9] + 1 = [13, 17; 25, 29] */
    float xv[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, wv[] = {1, 1, 1, 1}, bv[] = {1}, yv[] = {13, 17, 25, 29};
    int64_t xd[4] = {1, 1, 3, 3}, wd[4] = {1, 1, 2, 2}, bd[1] = {1}, yd[4] = {1, 1, 2, 2};
    bf_tensor x = th_tensor_f32(xv, 4, xd), wt = th_tensor_f32(wv, 4, wd), b = th_tensor_f32(bv, 1, bd);
    bf_tensor want = th_tensor_f32(yv, 4, yd);
    const bf_tensor *in[3] = {&x, &wt, &b};
    expect_close("Conv", NULL, 0, in, 3, &want, 0, 0);
    /* stride 2, pads 1: windows at (-1,-1),(-1,1),(1,-1),(1,1) cover
     * {1}, {2,3}, {4,7}, {5,6,8,9}: [1, 5; 11, 28] + 1 */
    float y2[] = {2, 6, 12, 29};
    bf_tensor want2 = th_tensor_f32(y2, 4, yd);
    int64_t s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1};
    bf__attr at[2] = {th_attr_ints("strides", s2, 2), th_attr_ints("pads", p1, 4)};
    expect_close("Conv", at, 2, in, 3, &want2, 0, 0);
    th_tensor_free(&x), th_tensor_free(&wt), th_tensor_free(&b), th_tensor_free(&want), th_tensor_free(&want2);
}

static void conv_errors(void **state)
{
    (void)state;
    int64_t xd[4] = {1, 4, 5, 5}, wd[4] = {6, 2, 3, 3}, bd[1] = {5}, w3[3] = {6, 4, 3}, x5[4] = {1, 4, 2, 2};
    bf_tensor x = th_tensor_rand(1, 4, xd), wt = th_tensor_rand(2, 4, wd), b = th_tensor_rand(3, 1, bd);
    bf_tensor wbad = th_tensor_rand(4, 3, w3), xs = th_tensor_rand(5, 4, x5);
    const bf_tensor *in[2] = {&x, &wt};
    /* W has C/group = 2 but group defaults to 1 with C = 4 */
    expect_error("Conv", NULL, 0, in, 2, 1, BF_ESHAPE, "C/group = 4");
    bf__attr g3[1] = {th_attr_int("group", 3)};
    expect_error("Conv", g3, 1, in, 2, 1, BF_EFORMAT, "'group' is 3");
    bf__attr g2[2] = {th_attr_int("group", 2), th_attr_string("auto_pad", "SAME")};
    expect_error("Conv", g2, 2, in, 2, 1, BF_EFORMAT, "SAME_UPPER");
    int64_t k2[2] = {2, 2};
    bf__attr ks[2] = {th_attr_int("group", 2), th_attr_ints("kernel_shape", k2, 2)};
    expect_error("Conv", ks, 2, in, 2, 1, BF_ESHAPE, "W has 3");
    int64_t s1[1] = {1};
    bf__attr st1[2] = {th_attr_int("group", 2), th_attr_ints("strides", s1, 1)};
    expect_error("Conv", st1, 2, in, 2, 1, BF_EFORMAT, "'strides' has 1 values; expected 2");
    const bf_tensor *inb[3] = {&x, &wt, &b};
    expect_error("Conv", g2, 1, inb, 3, 1, BF_ESHAPE, "input B has shape [5]; expected [M] = [6]");
    const bf_tensor *inw[2] = {&x, &wbad};
    expect_error("Conv", NULL, 0, inw, 2, 1, BF_ESHAPE, "same rank");
    const bf_tensor *ins[2] = {&xs, &wt};
    expect_error("Conv", g2, 1, ins, 2, 1, BF_ESHAPE, "smaller than the kernel extent 3");
    const bf_tensor *inn[2] = {&x, NULL};
    expect_error("Conv", NULL, 0, inn, 2, 1, BF_EFORMAT, "input W is required");
    th_tensor_free(&x), th_tensor_free(&wt), th_tensor_free(&b), th_tensor_free(&wbad), th_tensor_free(&xs);
}

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
static void pool_levels_same_bits(void **state)
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

static void maxpool_levels_match_reference(void **state)
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

static void maxpool_random(void **state) { (void)state; pool_random("MaxPool", 1); }
static void avgpool_random(void **state) { (void)state; pool_random("AveragePool", 0); }

static void pool_hand(void **state)
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

static void pool_errors(void **state)
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

static void gap_random(void **state)
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

/* ------------------------------------------------------------ BatchNorm */

static void bn_random(void **state)
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

static void bn_hand_and_errors(void **state)
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
static void bn_training(void **state)
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

static void ln_random(void **state)
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

static void ln_hand_and_errors(void **state)
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_random),     cmocka_unit_test(gemm_hand),
        cmocka_unit_test(gemm_errors),     cmocka_unit_test(matmul_random),
        cmocka_unit_test(matmul_hand),     cmocka_unit_test(matmul_errors),
        cmocka_unit_test(conv_random),     cmocka_unit_test(conv_hand),
        cmocka_unit_test(conv_errors),     cmocka_unit_test(maxpool_random),
        cmocka_unit_test(avgpool_random),  cmocka_unit_test(pool_hand), cmocka_unit_test(pool_levels_same_bits),
        cmocka_unit_test(maxpool_levels_match_reference),
        cmocka_unit_test(pool_errors),     cmocka_unit_test(gap_random),
        cmocka_unit_test(bn_random),       cmocka_unit_test(bn_hand_and_errors),
        cmocka_unit_test(bn_training),
        cmocka_unit_test(ln_random),       cmocka_unit_test(ln_hand_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
