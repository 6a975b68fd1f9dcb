/* test_ops_linalg: Gemm and MatMul. */
#include "test_ops_linalg.h"

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

void gemm_random(void **state)
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

void gemm_hand(void **state)
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

void gemm_errors(void **state)
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

void matmul_random(void **state)
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

void matmul_hand(void **state)
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

void matmul_errors(void **state)
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
