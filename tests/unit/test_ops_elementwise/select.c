/* test_ops_elementwise: Where, Clip, Softmax and Cast. */
#include "test_ops_elementwise.h"

/* ---- Where ------------------------------------------------------------- */

void where_random(void **state)
{
    (void)state;
    static const shp triples[][3] = {
        {{2, {3, 4}}, {2, {3, 4}}, {2, {3, 4}}},
        {{4, {2, 1, 1, 7}}, {4, {2, 3, 5, 7}}, {0, {0}}},        /* attention mask */
        {{1, {7}}, {0, {0}}, {3, {2, 3, 7}}},
        {{2, {3, 1}}, {1, {4}}, {3, {2, 1, 1}}},
        {{0, {0}}, {2, {2, 9}}, {2, {2, 9}}},
        {{3, {2, 3, 4}}, {1, {1}}, {2, {3, 1}}},
    };
    const bf_dtype dts[] = {BF_F32, BF_I64, BF_BOOL};
    for (size_t t = 0; t < sizeof triples / sizeof triples[0]; t++) {
        for (size_t k = 0; k < 3; k++) {
            bf_tensor cd = rand_int(BF_BOOL, triples[t][0].nd, triples[t][0].d, 0, 1, 0);
            bf_tensor x, y, out, want;
            if (dts[k] == BF_F32) {
                x = rand_f32(triples[t][1].nd, triples[t][1].d, 5);
                y = rand_f32(triples[t][2].nd, triples[t][2].d, 5);
            } else {
                x = rand_int(dts[k], triples[t][1].nd, triples[t][1].d, -9, 9, 0);
                y = rand_int(dts[k], triples[t][2].nd, triples[t][2].d, -9, 9, 0);
            }
            const bf_tensor *in[3] = {&cd, &x, &y};
            run_ok("Where", 16, NULL, 0, in, 3, &out);
            int64_t d1[BF_MAX_DIMS] = {0}, od[BF_MAX_DIMS], idx[BF_MAX_DIMS];
            bf_tensor tmp = {0};
            tmp.ndim = bshape(&cd, &x, d1);
            memcpy(tmp.dims, d1, sizeof d1);
            int ond = bshape(&tmp, &y, od);
            want = mk(dts[k], ond, od, NULL);
            for (int64_t i = 0; i < bf_tensor_numel(&want); i++) {
                unravel(i, od, ond, idx);
                int c = ((uint8_t *)cd.data)[bidx(&cd, idx, ond)];
                set(&want, i, c ? get(&x, bidx(&x, idx, ond)) : get(&y, bidx(&y, idx, ond)));
            }
            expect_close(&out, &want, 0, 0);
            th_free(&out, 1);
            th_tensor_free(&want);
            th_tensor_free(&cd);
            th_tensor_free(&x);
            th_tensor_free(&y);
        }
    }
}

/* where([0, 1, 2], [1, 2, 3], [-1, -2, -3]) = [-1, 2, 3]: any nonzero byte is true */
void where_hand(void **state)
{
    (void)state;
    int64_t d[1] = {3};
    uint8_t cs[3] = {0, 1, 2};
    float xs[3] = {1, 2, 3}, ys[3] = {-1, -2, -3}, want[3] = {-1, 2, 3};
    bf_tensor c = mk(BF_BOOL, 1, d, cs), x = mk(BF_F32, 1, d, xs), y = mk(BF_F32, 1, d, ys), out;
    const bf_tensor *in[3] = {&c, &x, &y};
    run_ok("Where", 16, NULL, 0, in, 3, &out);
    assert_memory_equal(out.data, want, sizeof want);
    th_free(&out, 1);
    th_tensor_free(&c);
    th_tensor_free(&x);
    th_tensor_free(&y);
}

void where_errors(void **state)
{
    (void)state;
    int64_t d3[1] = {3}, d4[1] = {4};
    bf_tensor f = mk(BF_F32, 1, d3, NULL), c = mk(BF_BOOL, 1, d3, NULL), i = mk(BF_I64, 1, d3, NULL),
              f4 = mk(BF_F32, 1, d4, NULL);
    const bf_tensor *in[3] = {&f, &f, &f};
    run_fail("Where", 16, NULL, 0, in, 3, BF_EFORMAT, "condition", "bool", NULL);
    in[0] = &c;
    in[2] = &i;
    run_fail("Where", 16, NULL, 0, in, 3, BF_EFORMAT, "same dtype", NULL);
    in[2] = &f4;
    run_fail("Where", 16, NULL, 0, in, 3, BF_ESHAPE, "[3]", "[4]", NULL);
    th_tensor_free(&f);
    th_tensor_free(&c);
    th_tensor_free(&i);
    th_tensor_free(&f4);
}

/* ---- Clip -------------------------------------------------------------- */

void clip_all(void **state)
{
    (void)state;
    int64_t d[2] = {5, 13};
    float lo = -0.3f, hi = 0.6f;
    for (int form = 0; form < 6; form++) {
        /* 0: both inputs, 1: min only, 2: max only (min as NULL), 3: none,
         * 4: attributes, 5: lo > hi (everything becomes hi) */
        bf_tensor x = rand_f32(2, d, 1.0f), y, want = mk(BF_F32, 2, d, NULL);
        F(&x)[3] = NAN;
        float l = form == 5 ? 0.9f : lo, h = form == 5 ? 0.1f : hi;
        bf_tensor tl = mk(BF_F32, 0, NULL, &l), th = mk(BF_F32, 0, NULL, &h);
        const bf_tensor *in[3] = {&x, &tl, &th};
        int n_in = 3, use_lo = 1, use_hi = 1;
        bf__attr attrs[2] = {th_attr_float("min", lo), th_attr_float("max", hi)};
        size_t n_attrs = 0;
        if (form == 1) { n_in = 2; use_hi = 0; }
        if (form == 2) { in[1] = NULL; use_lo = 0; }
        if (form == 3) { n_in = 1; use_lo = use_hi = 0; }
        if (form == 4) { n_in = 1; n_attrs = 2; }
        run_ok("Clip", form == 4 ? 11 : 13, attrs, n_attrs, in, n_in, &y);
        for (int64_t i = 0; i < 65; i++) {
            float v = F(&x)[i];
            if (use_lo && v < l) v = l;
            if (use_hi && v > h) v = h;
            F(&want)[i] = v;
        }
        assert_true(isnan(F(&y)[3]));
        expect_close(&y, &want, 0, 0);
        th_free(&y, 1);
        th_tensor_free(&x);
        th_tensor_free(&want);
        th_tensor_free(&tl);
        th_tensor_free(&th);
    }
    /* int64: clip([-5, 0, 3, 9], 0, 4) = [0, 0, 3, 4] */
    int64_t d4[1] = {4}, xs[4] = {-5, 0, 3, 9}, l = 0, h = 4, one[1] = {1};
    bf_tensor x = mk(BF_I64, 1, d4, xs), tl = mk(BF_I64, 1, one, &l), th = mk(BF_I64, 0, NULL, &h), y;
    const bf_tensor *in[3] = {&x, &tl, &th};
    run_ok("Clip", 13, NULL, 0, in, 3, &y);
    assert_true(I64(&y)[0] == 0 && I64(&y)[1] == 0 && I64(&y)[2] == 3 && I64(&y)[3] == 4);
    th_free(&y, 1);
    /* errors: a bound that is not a scalar, or of another dtype */
    bf_tensor two = mk(BF_I64, 1, (int64_t[]){2}, NULL), fl = mk(BF_F32, 0, NULL, NULL);
    in[1] = &two;
    run_fail("Clip", 13, NULL, 0, in, 3, BF_ESHAPE, "min", "scalar", NULL);
    in[1] = &tl;
    in[2] = &fl;
    run_fail("Clip", 13, NULL, 0, in, 3, BF_EFORMAT, "max", "float32", NULL);
    th_tensor_free(&x);
    th_tensor_free(&tl);
    th_tensor_free(&th);
    th_tensor_free(&two);
    th_tensor_free(&fl);
}

/* ---- Softmax ----------------------------------------------------------- */

/* Straight from the spec: the input as [outer, n, inner], softmax over n. */
static void ref_softmax(const float *x, float *y, int64_t outer, int64_t n, int64_t inner)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            const float *xs = x + o * n * inner + j;
            float *ys = y + o * n * inner + j;
            double m = -INFINITY, s = 0;
            for (int64_t k = 0; k < n; k++) m = xs[k * inner] > m ? xs[k * inner] : m;
            for (int64_t k = 0; k < n; k++) s += exp(xs[k * inner] - m);
            for (int64_t k = 0; k < n; k++) ys[k * inner] = (float)(exp(xs[k * inner] - m) / s);
        }
}

void softmax_random(void **state)
{
    (void)state;
    static const shp shapes[] = {{1, {10}}, {2, {3, 37}}, {3, {2, 3, 4}}, {4, {2, 3, 5, 6}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int nd = shapes[s].nd;
        for (int64_t opset = 11; opset <= 13; opset += 2) {
            for (int axis = -nd - 1; axis < nd; axis++) {   /* -nd-1: the default */
                int has_attr = axis >= -nd;
                if (!has_attr && opset < 13 && nd == 1) continue;   /* default axis 1: rank 1 has none */
                bf_tensor x = rand_f32(nd, shapes[s].d, 6.0f), y, want = mk(BF_F32, nd, shapes[s].d, NULL);
                bf__attr a = th_attr_int("axis", axis);
                const bf_tensor *in[1] = {&x};
                run_ok("Softmax", opset, &a, has_attr ? 1 : 0, in, 1, &y);
                int ax = has_attr ? (axis < 0 ? axis + nd : axis) : opset < 13 ? 1 : nd - 1;
                int64_t outer = 1, n = 1, inner = 1;
                for (int i = 0; i < nd; i++) {
                    if (i < ax) outer *= shapes[s].d[i];
                    else if (i == ax || opset < 13) n *= shapes[s].d[i];
                    else inner *= shapes[s].d[i];
                }
                ref_softmax(F(&x), F(&want), outer, n, inner);
                expect_close(&y, &want, 1e-7, 1e-5);
                th_free(&y, 1);
                th_tensor_free(&want);
                th_tensor_free(&x);
            }
        }
    }
}

void softmax_hand(void **state)
{
    (void)state;
    /* rows: [0, ln 3] -> [1/4, 3/4]; [-inf, 0] -> [0, 1]; [inf, 1] -> inf - inf = nan:
     * [nan, nan] as PyTorch; [nan, 0] -> [nan, nan]; [1e38, -1e38] -> [1, 0] */
    int64_t d[2] = {5, 2};
    float xs[10] = {0, logf(3), -INFINITY, 0, INFINITY, 1, NAN, 0, 1e38f, -1e38f};
    bf_tensor x = mk(BF_F32, 2, d, xs), y;
    const bf_tensor *in[1] = {&x};
    for (int64_t opset = 11; opset <= 13; opset += 2) {
        run_ok("Softmax", opset, NULL, 0, in, 1, &y);
        float *r = F(&y);
        assert_true(fabsf(r[0] - 0.25f) < 1e-7f && fabsf(r[1] - 0.75f) < 1e-7f);
        assert_true(r[2] == 0.0f && r[3] == 1.0f);
        assert_true(isnan(r[4]) && isnan(r[5]) && isnan(r[6]) && isnan(r[7]));
        assert_true(r[8] == 1.0f && r[9] == 0.0f);
        th_free(&y, 1);
    }
    /* the same along a strided axis (opset 13, axis 0 of the transpose) */
    float xt[10] = {0, -INFINITY, INFINITY, NAN, 1e38f, logf(3), 0, 1, 0, -1e38f};
    int64_t dt[2] = {2, 5};
    bf_tensor x2 = mk(BF_F32, 2, dt, xt);
    bf__attr a = th_attr_int("axis", 0);
    in[0] = &x2;
    run_ok("Softmax", 13, &a, 1, in, 1, &y);
    float *r = F(&y);
    assert_true(fabsf(r[0] - 0.25f) < 1e-7f && fabsf(r[5] - 0.75f) < 1e-7f);
    assert_true(r[1] == 0.0f && r[6] == 1.0f);
    assert_true(isnan(r[2]) && isnan(r[7]) && isnan(r[3]) && isnan(r[8]));
    assert_true(r[4] == 1.0f && r[9] == 0.0f);
    th_free(&y, 1);
    /* errors: axis out of range; int input */
    a = th_attr_int("axis", 2);
    run_fail("Softmax", 13, &a, 1, in, 1, BF_ERANGE, "axis 2", "rank 2", NULL);
    bf_tensor i = mk(BF_I64, 2, dt, NULL);
    in[0] = &i;
    run_fail("Softmax", 13, NULL, 0, in, 1, BF_EUNSUPPORTED, "int64", NULL);
    th_tensor_free(&i);
    th_tensor_free(&x);
    th_tensor_free(&x2);
}

/* ---- Cast -------------------------------------------------------------- */

void cast_all(void **state)
{
    (void)state;
    int64_t d[1] = {8};
    float xs[8] = {1.9f, -1.9f, 0.0f, -0.0f, NAN, 300.0f, 1.0f + 0x1p-11f, 0.1f};
    bf_tensor x = mk(BF_F32, 1, d, xs), y;
    const bf_tensor *in[1] = {&x};
    bf__attr to;

    to = th_attr_int("to", 7);   /* INT64: truncation toward zero; NaN -> 0 (we saturate) */
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_int_equal(y.dtype, BF_I64);
    assert_true(I64(&y)[0] == 1 && I64(&y)[1] == -1 && I64(&y)[2] == 0 && I64(&y)[5] == 300);
    th_free(&y, 1);

    to = th_attr_int("to", 6);   /* INT32 */
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_int_equal(y.dtype, BF_I32);
    assert_true(((int32_t *)y.data)[1] == -1 && ((int32_t *)y.data)[5] == 300);
    th_free(&y, 1);

    to = th_attr_int("to", 9);   /* BOOL: nonzero (NaN too) is true, +-0 false */
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_int_equal(y.dtype, BF_BOOL);
    uint8_t wb[8] = {1, 1, 0, 0, 1, 1, 1, 1};
    assert_memory_equal(y.data, wb, 8);
    th_free(&y, 1);

    to = th_attr_int("to", 2);   /* UINT8 saturates 300 -> 255 */
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_int_equal(y.dtype, BF_U8);
    assert_int_equal(((uint8_t *)y.data)[5], 255);
    th_free(&y, 1);

    to = th_attr_int("to", 10);  /* FLOAT16: 1 + 2^-11 ties to even -> 1; 0.1 -> 0.0999755859375 */
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_int_equal(y.dtype, BF_F32);
    assert_true(F(&y)[6] == 1.0f && F(&y)[7] == 0.0999755859375f && F(&y)[0] == 1.900390625f);
    assert_true(isnan(F(&y)[4]) && F(&y)[5] == 300.0f);
    th_free(&y, 1);

    to = th_attr_int("to", 16);  /* BFLOAT16: 1.9 -> 1.8984375, 0.1 -> 0.10009765625 */
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_true(F(&y)[0] == 1.8984375f && F(&y)[7] == 0.10009765625f && F(&y)[6] == 1.0f);
    th_free(&y, 1);

    for (int64_t t = 1; t <= 11; t += 10) {  /* FLOAT and DOUBLE: unchanged float32 */
        to = th_attr_int("to", t);
        run_ok("Cast", 13, &to, 1, in, 1, &y);
        assert_int_equal(y.dtype, BF_F32);
        assert_memory_equal(y.data, xs, sizeof xs);
        th_free(&y, 1);
    }

    /* int64, bool, int32 -> float */
    int64_t is[3] = {-3, 0, 1ll << 40};
    int64_t d3[1] = {3};
    bf_tensor xi = mk(BF_I64, 1, d3, is);
    in[0] = &xi;
    to = th_attr_int("to", 1);
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_true(F(&y)[0] == -3.0f && F(&y)[1] == 0.0f && F(&y)[2] == 0x1p40f);
    th_free(&y, 1);
    to = th_attr_int("to", 6);
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_true(((int32_t *)y.data)[0] == -3);
    th_free(&y, 1);
    uint8_t bs[3] = {1, 0, 1};
    bf_tensor xb = mk(BF_BOOL, 1, d3, bs);
    in[0] = &xb;
    to = th_attr_int("to", 1);
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_true(F(&y)[0] == 1.0f && F(&y)[1] == 0.0f && F(&y)[2] == 1.0f);
    th_free(&y, 1);
    to = th_attr_int("to", 7);
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_true(I64(&y)[0] == 1 && I64(&y)[1] == 0);
    th_free(&y, 1);

    /* errors: STRING (8) is not supported; `to` missing */
    in[0] = &x;
    to = th_attr_int("to", 8);
    run_fail("Cast", 13, &to, 1, in, 1, BF_EUNSUPPORTED, "'to' = 8", "FLOAT", NULL);
    run_fail("Cast", 13, NULL, 0, in, 1, BF_EFORMAT, "'to'", "required", NULL);
    th_tensor_free(&x);
    th_tensor_free(&xi);
    th_tensor_free(&xb);
}
