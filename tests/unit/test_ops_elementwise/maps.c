/* test_ops_elementwise: unary and binary maps (Relu, ..., Add, ..., Pow). */
#include "test_ops_elementwise.h"

/* ---- unary ------------------------------------------------------------- */

static double ref_unary(const char *op, double x, double alpha)
{
    if (!strcmp(op, "Relu")) return isnan(x) ? x : x < 0 ? 0 : x;
    if (!strcmp(op, "LeakyRelu")) return x < 0 ? x * alpha : x;
    if (!strcmp(op, "Sigmoid")) return 1.0 / (1.0 + exp(-x));
    if (!strcmp(op, "Tanh")) return tanh(x);
    if (!strcmp(op, "Erf")) return erf(x);
    if (!strcmp(op, "Sqrt")) return sqrt(x);
    if (!strcmp(op, "Neg")) return -x;
    if (!strcmp(op, "Exp")) return exp(x);
    return log(x);
}

static const char *const unary_ops[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf",
                                        "Sqrt", "Neg", "Exp", "Log"};

void unary_random(void **state)
{
    (void)state;
    static const shp shapes[] = {{0, {0}}, {1, {7}}, {2, {3, 5}}, {3, {2, 3, 17}}};
    for (size_t o = 0; o < sizeof unary_ops / sizeof unary_ops[0]; o++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (int with_alpha = 0; with_alpha < 2; with_alpha++) {
                const char *op = unary_ops[o];
                if (with_alpha && strcmp(op, "LeakyRelu")) continue;
                /* Sqrt and Log get negatives too: NaN positions must match */
                bf_tensor x = rand_f32(shapes[s].nd, shapes[s].d, 8.0f), y, want;
                bf__attr alpha = th_attr_float("alpha", 0.2f);
                const bf_tensor *in[1] = {&x};
                run_ok(op, 13, &alpha, with_alpha ? 1 : 0, in, 1, &y);
                want = mk(BF_F32, x.ndim, x.dims, NULL);
                for (int64_t i = 0; i < bf_tensor_numel(&x); i++)
                    F(&want)[i] = (float)ref_unary(op, F(&x)[i], with_alpha ? 0.2 : 0.01);
                expect_close(&y, &want, 1e-6, 1e-5);
                th_free(&y, 1);
                th_tensor_free(&want);
                th_tensor_free(&x);
            }
        }
    }
}

/* Special values: faulted models produce NaN, Inf and 1e38. */
void unary_special(void **state)
{
    (void)state;
    float nan = NAN, inf = INFINITY;
    int64_t d[1] = {7};
    float xs[7] = {nan, inf, -inf, 1e38f, -1e38f, 100.0f, -100.0f};
    struct { const char *op; float want[7]; } cases[] = {
        {"Relu", {nan, inf, 0, 1e38f, 0, 100, 0}},
        {"LeakyRelu", {nan, inf, -inf, 1e38f, -1e36f, 100, -1}},
        /* sigmoid(-100) = e^-100 / (1 + e^-100) = 3.7200760e-44, a subnormal, not 0 */
        {"Sigmoid", {nan, 1, 0, 1, 0, 1, 3.7200760e-44f}},
        {"Tanh", {nan, 1, -1, 1, -1, 1, -1}},
        {"Erf", {nan, 1, -1, 1, -1, 1, -1}},
        {"Sqrt", {nan, inf, nan, 1e19f, nan, 10, nan}},
        {"Neg", {nan, -inf, inf, -1e38f, 1e38f, -100, 100}},
        {"Exp", {nan, inf, 0, inf, 0, inf, 3.7200760e-44f}},
        {"Log", {nan, inf, nan, 87.49823f, nan, 4.6051702f, nan}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        bf_tensor x = mk(BF_F32, 1, d, xs), want = mk(BF_F32, 1, d, cases[c].want), y;
        const bf_tensor *in[1] = {&x};
        run_ok(cases[c].op, 13, NULL, 0, in, 1, &y);
        expect_close(&y, &want, 1e-45, 1e-6);
        th_free(&y, 1);
        th_tensor_free(&x);
        th_tensor_free(&want);
    }
    /* hand values: leaky(-2, alpha 0.1) = -0.2; sigmoid(0) = 0.5; sigmoid(ln 3) = 0.75 */
    float hx[3] = {-2.0f, 0.0f, logf(3.0f)};
    int64_t hd[1] = {3};
    bf_tensor x = mk(BF_F32, 1, hd, hx), y;
    const bf_tensor *in[1] = {&x};
    bf__attr alpha = th_attr_float("alpha", 0.1f);
    run_ok("LeakyRelu", 13, &alpha, 1, in, 1, &y);
    assert_true(fabsf(F(&y)[0] + 0.2f) < 1e-7f && F(&y)[1] == 0.0f);
    th_free(&y, 1);
    run_ok("Sigmoid", 13, NULL, 0, in, 1, &y);
    assert_true(F(&y)[1] == 0.5f && fabsf(F(&y)[2] - 0.75f) < 1e-7f);
    th_free(&y, 1);
    th_tensor_free(&x);
}

/* The vectorised exp, sigmoid, tanh and erf against libm in double over
 * float inputs spread across the whole range (every 40009th bit pattern:
 * normal, subnormal, huge, Inf, NaN). Measured worst cases are 5e-7
 * relative; the bound here is 1e-6, plus an absolute floor for results in
 * the subnormal range, where one ulp is a large relative error. */
static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

void math_sweep(void **state)
{
    (void)state;
    static const struct { const char *op; double (*ref)(double); } fns[] = {
        {"Exp", exp}, {"Sigmoid", sigmoid_d}, {"Tanh", tanh}, {"Erf", erf},
    };
    int64_t n = 0, d[1];
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 40009) n++;
    d[0] = n;
    bf_tensor x = mk(BF_F32, 1, d, NULL);
    n = 0;
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 40009) {
        uint32_t b = (uint32_t)u;
        memcpy(&F(&x)[n++], &b, 4);
    }
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        bf_tensor y;
        const bf_tensor *in[1] = {&x};
        run_ok(fns[f].op, 13, NULL, 0, in, 1, &y);
        for (int64_t i = 0; i < n; i++) {
            double want = fns[f].ref(F(&x)[i]), got = F(&y)[i];
            int ok;
            if (isnan(want)) ok = isnan(got);
            else if (fabs(want) >= 3.4028234e38) ok = fabs(got) >= 3.4028234e38 && (got > 0) == (want > 0);
            else ok = fabs(got - want) <= 1e-37 + 1e-6 * fabs(want);
            if (!ok) fprintf(stderr, "%s(%.9g) = %.9g, want %.9g\n", fns[f].op, F(&x)[i], got, want);
            assert_true(ok);
        }
        th_free(&y, 1);
    }
    th_tensor_free(&x);
}

void neg_int(void **state)
{
    (void)state;
    int64_t d[1] = {4};
    int64_t a[4] = {3, -7, 0, INT64_MIN};
    bf_tensor x = mk(BF_I64, 1, d, a), y;
    const bf_tensor *in[1] = {&x};
    run_ok("Neg", 13, NULL, 0, in, 1, &y);
    assert_int_equal(y.dtype, BF_I64);
    assert_true(I64(&y)[0] == -3 && I64(&y)[1] == 7 && I64(&y)[2] == 0 && I64(&y)[3] == INT64_MIN);
    th_free(&y, 1);
    th_tensor_free(&x);
    int32_t b[4] = {3, -7, 0, 5};
    x = mk(BF_I32, 1, d, b);
    run_ok("Neg", 13, NULL, 0, in, 1, &y);
    const int32_t *r = y.data;
    assert_true(r[0] == -3 && r[1] == 7 && r[2] == 0 && r[3] == -5);
    th_free(&y, 1);
    th_tensor_free(&x);
}

void unary_errors(void **state)
{
    (void)state;
    int64_t d[1] = {2};
    bf_tensor x = mk(BF_I64, 1, d, NULL), f = mk(BF_F32, 1, d, NULL);
    const bf_tensor *in[1] = {&x};
    run_fail("Relu", 13, NULL, 0, in, 1, BF_EUNSUPPORTED, "int64", "float32", NULL);
    run_fail("Sqrt", 13, NULL, 0, in, 1, BF_EUNSUPPORTED, "int64", NULL);
    in[0] = &f;
    bf__attr bad = th_attr_string("alpha", "big");
    run_fail("LeakyRelu", 13, &bad, 1, in, 1, BF_EFORMAT, "alpha", NULL);
    th_tensor_free(&x);
    th_tensor_free(&f);
}

/* ---- binary ------------------------------------------------------------ */

static const char *const arith_ops[] = {"Add", "Sub", "Mul", "Div"};

static float ref_f32(int op, float x, float y)
{
    switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    default: return x / y;
    }
}

static int64_t ref_int(int op, int64_t x, int64_t y)
{
    switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    default: return x / y;      /* C truncates toward zero, as ONNX Runtime */
    }
}

void binary_random(void **state)
{
    (void)state;
    const bf_dtype dts[] = {BF_F32, BF_I64, BF_I32};
    for (int op = 0; op < 4; op++) {
        for (size_t t = 0; t < 3; t++) {
            for (int p = 0; p < N_PAIRS; p++) {
                for (int swap = 0; swap < 2; swap++) {
                    const shp *sa = &pairs[p][swap], *sb = &pairs[p][!swap];
                    bf_dtype dt = dts[t];
                    bf_tensor a, b, y, want;
                    if (dt == BF_F32) {
                        a = rand_f32(sa->nd, sa->d, 4.0f);
                        b = rand_f32(sb->nd, sb->d, 4.0f);
                    } else {
                        a = rand_int(dt, sa->nd, sa->d, -1000, 1000, 0);
                        b = rand_int(dt, sb->nd, sb->d, -50, 50, 1);
                    }
                    const bf_tensor *in[2] = {&a, &b};
                    run_ok(arith_ops[op], 14, NULL, 0, in, 2, &y);
                    int64_t od[BF_MAX_DIMS], idx[BF_MAX_DIMS];
                    int ond = bshape(&a, &b, od);
                    want = mk(dt, ond, od, NULL);
                    for (int64_t i = 0; i < bf_tensor_numel(&want); i++) {
                        unravel(i, od, ond, idx);
                        int64_t ia = bidx(&a, idx, ond), ib = bidx(&b, idx, ond);
                        if (dt == BF_F32) F(&want)[i] = ref_f32(op, F(&a)[ia], F(&b)[ib]);
                        else set(&want, i, (double)ref_int(op, (int64_t)get(&a, ia), (int64_t)get(&b, ib)));
                    }
                    expect_close(&y, &want, 0, 0);   /* the same float operation: exact */
                    th_free(&y, 1);
                    th_tensor_free(&want);
                    th_tensor_free(&a);
                    th_tensor_free(&b);
                }
            }
        }
    }
}

/* Hand cases: truncating integer division, wrap-around, float specials. */
void binary_hand(void **state)
{
    (void)state;
    int64_t d[1] = {4};
    int64_t a[4] = {7, -7, 7, INT64_MIN}, b[4] = {2, 2, -2, -1};
    bf_tensor x = mk(BF_I64, 1, d, a), z = mk(BF_I64, 1, d, b), y;
    const bf_tensor *in[2] = {&x, &z};
    /* 7/2 = 3, -7/2 = -3, 7/-2 = -3, MIN/-1 wraps to MIN */
    run_ok("Div", 14, NULL, 0, in, 2, &y);
    assert_true(I64(&y)[0] == 3 && I64(&y)[1] == -3 && I64(&y)[2] == -3 && I64(&y)[3] == INT64_MIN);
    th_free(&y, 1);
    /* INT64_MIN + -1 wraps to INT64_MAX, as PyTorch's int64 does */
    run_ok("Add", 14, NULL, 0, in, 2, &y);
    assert_true(I64(&y)[0] == 9 && I64(&y)[3] == INT64_MAX);
    th_free(&y, 1);
    th_tensor_free(&x);
    th_tensor_free(&z);

    /* 1/0 = inf, 0/0 = nan, inf - inf = nan, 1e38 * 10 = inf */
    float fa[4] = {1, 0, INFINITY, 1e38f}, fb[4] = {0, 0, INFINITY, 10};
    x = mk(BF_F32, 1, d, fa);
    z = mk(BF_F32, 1, d, fb);
    run_ok("Div", 14, NULL, 0, in, 2, &y);
    assert_true(isinf(F(&y)[0]) && isnan(F(&y)[1]) && F(&y)[2] != F(&y)[2]);
    th_free(&y, 1);
    run_ok("Sub", 14, NULL, 0, in, 2, &y);
    assert_true(isnan(F(&y)[2]));
    th_free(&y, 1);
    run_ok("Mul", 14, NULL, 0, in, 2, &y);
    assert_true(isinf(F(&y)[3]));
    th_free(&y, 1);
    th_tensor_free(&x);
    th_tensor_free(&z);

    /* [[1], [2]] + [10, 20, 30] = [[11, 21, 31], [12, 22, 32]] */
    int64_t d21[2] = {2, 1}, d3[1] = {3};
    float c1[2] = {1, 2}, r3[3] = {10, 20, 30};
    x = mk(BF_F32, 2, d21, c1);
    z = mk(BF_F32, 1, d3, r3);
    run_ok("Add", 14, NULL, 0, in, 2, &y);
    float want[6] = {11, 21, 31, 12, 22, 32};
    assert_int_equal(y.ndim, 2);
    assert_true(y.dims[0] == 2 && y.dims[1] == 3);
    assert_memory_equal(y.data, want, sizeof want);
    th_free(&y, 1);
    th_tensor_free(&x);
    th_tensor_free(&z);
}

void pow_random(void **state)
{
    (void)state;
    for (int p = 0; p < N_PAIRS; p++) {
        for (int ek = 0; ek < 3; ek++) {    /* exponent float32, int64, int32 */
            const shp *sa = &pairs[p][0], *sb = &pairs[p][1];
            bf_tensor a = rand_f32(sa->nd, sa->d, 3.0f), b, y, want;
            if (ek == 0) {
                b = rand_f32(sb->nd, sb->d, 3.0f);
                for (int64_t i = 0; i < bf_tensor_numel(&a); i++) F(&a)[i] = fabsf(F(&a)[i]) + 0.05f;
            } else {
                b = rand_int(ek == 1 ? BF_I64 : BF_I32, sb->nd, sb->d, -3, 4, 0);
            }
            const bf_tensor *in[2] = {&a, &b};
            run_ok("Pow", 15, NULL, 0, in, 2, &y);
            int64_t od[BF_MAX_DIMS], idx[BF_MAX_DIMS];
            int ond = bshape(&a, &b, od);
            want = mk(BF_F32, ond, od, NULL);
            for (int64_t i = 0; i < bf_tensor_numel(&want); i++) {
                unravel(i, od, ond, idx);
                F(&want)[i] = (float)pow(F(&a)[bidx(&a, idx, ond)], get(&b, bidx(&b, idx, ond)));
            }
            expect_close(&y, &want, 1e-6, 1e-5);
            th_free(&y, 1);
            th_tensor_free(&want);
            th_tensor_free(&a);
            th_tensor_free(&b);
        }
    }
    /* hand: [-3, 2, nan]^2 = [9, 4, nan]; 4^0.5 = 2; (-8)^(1/3) = nan as powf */
    int64_t d3[1] = {3};
    float xs[3] = {-3, 2, NAN}, two = 2.0f, half = 0.5f;
    bf_tensor x = mk(BF_F32, 1, d3, xs), e = mk(BF_F32, 0, NULL, &two), y;
    const bf_tensor *in[2] = {&x, &e};
    run_ok("Pow", 15, NULL, 0, in, 2, &y);
    assert_true(F(&y)[0] == 9.0f && F(&y)[1] == 4.0f && isnan(F(&y)[2]));
    th_free(&y, 1);
    F(&e)[0] = half;
    F(&x)[1] = 4.0f;
    run_ok("Pow", 15, NULL, 0, in, 2, &y);
    assert_true(isnan(F(&y)[0]) && F(&y)[1] == 2.0f);
    th_free(&y, 1);
    th_tensor_free(&x);
    th_tensor_free(&e);
}

void binary_errors(void **state)
{
    (void)state;
    int64_t d34[2] = {3, 4}, d5[1] = {5}, d4[1] = {4};
    bf_tensor a = mk(BF_F32, 2, d34, NULL), b = mk(BF_F32, 1, d5, NULL), c = mk(BF_I64, 1, d4, NULL),
              zero = mk(BF_I64, 1, d4, NULL), u = mk(BF_U8, 1, d4, NULL);
    const bf_tensor *in[2] = {&a, &b};
    run_fail("Add", 14, NULL, 0, in, 2, BF_ESHAPE, "[3, 4]", "[5]", "broadcast", NULL);
    in[1] = &c;
    run_fail("Mul", 14, NULL, 0, in, 2, BF_EFORMAT, "same dtype", "int64", "float32", NULL);
    in[0] = &c;
    in[1] = &zero;
    run_fail("Div", 14, NULL, 0, in, 2, BF_ERANGE, "division by zero", NULL);
    run_fail("Pow", 15, NULL, 0, in, 2, BF_EUNSUPPORTED, "float32 base", NULL);
    in[0] = &u;
    in[1] = &u;
    run_fail("Sub", 14, NULL, 0, in, 2, BF_EUNSUPPORTED, "uint8", NULL);
    in[0] = &a;
    run_fail("Pow", 15, NULL, 0, in, 2, BF_EUNSUPPORTED, "exponent", NULL);
    in[1] = NULL;
    run_fail("Add", 14, NULL, 0, in, 2, BF_EFORMAT, "required", NULL);
    th_tensor_free(&a);
    th_tensor_free(&b);
    th_tensor_free(&c);
    th_tensor_free(&zero);
    th_tensor_free(&u);
}
