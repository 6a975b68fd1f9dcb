/* The elementwise op family against plain references written straight from
 * the ONNX spec (naive loops, double precision where it matters), on random
 * inputs across shapes and attributes, plus hand-computed cases and errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "op_harness.h"

/* ---- helpers ----------------------------------------------------------- */

static bf_tensor mk(bf_dtype dt, int ndim, const int64_t *dims, const void *data)
{
    bf_tensor t = th_tensor(dt, data, ndim, dims);
    assert_non_null(t.data);
    return t;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static int64_t rnd_int(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* random ints in [lo, hi], never 0 if nonzero is set */
static bf_tensor rand_int(bf_dtype dt, int ndim, const int64_t *dims, int64_t lo, int64_t hi, int nonzero)
{
    bf_tensor t = mk(dt, ndim, dims, NULL);
    for (int64_t i = 0; i < bf_tensor_numel(&t); i++) {
        int64_t v;
        do v = rnd_int(lo, hi); while (nonzero && v == 0);
        if (dt == BF_I64) ((int64_t *)t.data)[i] = v;
        else if (dt == BF_I32) ((int32_t *)t.data)[i] = (int32_t)v;
        else ((uint8_t *)t.data)[i] = (uint8_t)(v != 0);
    }
    return t;
}

static bf_tensor rand_f32(int ndim, const int64_t *dims, float scale)
{
    bf_tensor t = th_tensor_rand(rnd(), ndim, dims);
    float *d = t.data;
    for (int64_t i = 0; i < bf_tensor_numel(&t); i++) d[i] *= scale;
    return t;
}

static float *F(const bf_tensor *t) { return t->data; }
static int64_t *I64(const bf_tensor *t) { return t->data; }

/* Runs an op with one output and asserts success, printing the error if not. */
static void run_ok(const char *op, int64_t opset, bf__attr *attrs, size_t n_attrs,
                   const bf_tensor *const *in, int n_in, bf_tensor *out)
{
    bf_error err = {0};
    bf_status st = th_run_op(op, opset, attrs, n_attrs, in, n_in, out, 1, &err);
    if (st != BF_OK) fprintf(stderr, "%s failed: %s\n", op, err.msg);
    assert_int_equal(st, BF_OK);
}

/* Runs an op expecting failure with `status` and a message containing each
 * of the NULL-terminated strings. */
static void run_fail(const char *op, int64_t opset, bf__attr *attrs, size_t n_attrs,
                     const bf_tensor *const *in, int n_in, bf_status status, ...)
{
    bf_error err = {0};
    bf_tensor out = {0};
    bf_status st = th_run_op(op, opset, attrs, n_attrs, in, n_in, &out, 1, &err);
    if (st != status) fprintf(stderr, "%s: status %d, want %d (%s)\n", op, st, status, err.msg);
    assert_int_equal(st, status);
    assert_non_null(strstr(err.msg, "'test'"));
    va_list ap;
    va_start(ap, status);
    for (const char *s; (s = va_arg(ap, const char *));) {
        if (!strstr(err.msg, s)) fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, s);
        assert_non_null(strstr(err.msg, s));
    }
    va_end(ap);
}

static void expect_close(const bf_tensor *got, const bf_tensor *want, double atol, double rtol)
{
    double r = th_compare(got, want, atol, rtol);
    if (!(r <= 1.0)) fprintf(stderr, "compare ratio %g\n", r);
    assert_true(r <= 1.0);
}

/* Flat index into t of the element that broadcasts to output index oidx. */
static int64_t bidx(const bf_tensor *t, const int64_t *oidx, int ond)
{
    int64_t f = 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t d = t->dims[i], k = oidx[i + ond - t->ndim];
        f = f * d + (d == 1 ? 0 : k);
    }
    return f;
}

static void unravel(int64_t f, const int64_t *dims, int nd, int64_t *idx)
{
    for (int i = nd - 1; i >= 0; i--) { idx[i] = dims[i] ? f % dims[i] : 0; f = dims[i] ? f / dims[i] : 0; }
}

static int bshape(const bf_tensor *a, const bf_tensor *b, int64_t *dims)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        dims[i] = da == 1 ? db : da;
    }
    return nd;
}

typedef struct shp { int nd; int64_t d[4]; } shp;

/* Broadcast pairs covering every fast path and the general walk. */
static const shp pairs[][2] = {
    {{2, {3, 4}}, {2, {3, 4}}},                 /* same shape */
    {{3, {2, 3, 5}}, {0, {0}}},                 /* scalar B */
    {{0, {0}}, {2, {4, 6}}},                    /* scalar A */
    {{1, {1}}, {3, {2, 2, 9}}},                 /* [1] */
    {{3, {2, 3, 17}}, {1, {17}}},               /* row vector */
    {{2, {17, 1}}, {2, {17, 5}}},               /* column vector */
    {{4, {2, 3, 4, 5}}, {4, {1, 3, 1, 1}}},     /* per channel */
    {{3, {3, 1, 4}}, {2, {5, 1}}},              /* both broadcast */
    {{4, {2, 1, 3, 1}}, {3, {4, 1, 6}}},        /* interleaved */
    {{3, {1, 1, 1}}, {2, {1, 1}}},              /* all ones */
    {{2, {0, 3}}, {1, {3}}},                    /* empty */
    {{1, {40}}, {1, {40}}},                     /* longer than a vector */
};
enum { N_PAIRS = sizeof pairs / sizeof pairs[0] };

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

static void unary_random(void **state)
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
static void unary_special(void **state)
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

static void math_sweep(void **state)
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

static void neg_int(void **state)
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

static void unary_errors(void **state)
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

static double get(const bf_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case BF_F32: return F(t)[i];
    case BF_I64: return (double)I64(t)[i];
    case BF_I32: return ((const int32_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
    }
}

static void set(bf_tensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case BF_F32: F(t)[i] = (float)v; break;
    case BF_I64: I64(t)[i] = (int64_t)v; break;
    case BF_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    default: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    }
}

static void binary_random(void **state)
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
static void binary_hand(void **state)
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

static void pow_random(void **state)
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

static void binary_errors(void **state)
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

/* ---- Where ------------------------------------------------------------- */

static void where_random(void **state)
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
static void where_hand(void **state)
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

static void where_errors(void **state)
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

static void clip_all(void **state)
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

static void softmax_random(void **state)
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

static void softmax_hand(void **state)
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

static void cast_all(void **state)
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

/* ---- reductions -------------------------------------------------------- */

/* Reduces x over the axes marked in red[] into the keepdims-shaped want. */
static void ref_reduce(int kind, const bf_tensor *x, const int *red, bf_tensor *want)
{
    int nd = x->ndim;
    int64_t n_out = bf_tensor_numel(want), count = 1, idx[BF_MAX_DIMS], kd[BF_MAX_DIMS];
    for (int i = 0; i < nd; i++) { kd[i] = red[i] ? 1 : x->dims[i]; if (red[i]) count *= x->dims[i]; }
    double *acc = calloc((size_t)(n_out ? n_out : 1), sizeof *acc);
    for (int64_t o = 0; o < n_out; o++) acc[o] = kind == 2 ? -INFINITY : 0;
    for (int64_t i = 0; i < bf_tensor_numel(x); i++) {
        unravel(i, x->dims, nd, idx);
        int64_t o = 0;
        for (int k = 0; k < nd; k++) o = o * kd[k] + (red[k] ? 0 : idx[k]);
        double v = get(x, i);
        if (kind != 2) acc[o] += v;
        else if (!isnan(acc[o]) && (isnan(v) || v > acc[o])) acc[o] = v;   /* NaN wins */
    }
    for (int64_t o = 0; o < n_out; o++) {
        double v = kind == 1 ? acc[o] / (double)count : acc[o];
        if (want->dtype == BF_I64 && kind == 1) v = (double)((int64_t)acc[o] / count);
        set(want, o, v);
    }
    free(acc);
}

static const char *const reduce_ops[] = {"ReduceSum", "ReduceMean", "ReduceMax"};

static void reduce_random(void **state)
{
    (void)state;
    static const shp shapes[] = {{1, {50}}, {2, {7, 33}}, {3, {4, 5, 6}}, {4, {2, 3, 4, 5}},
                                 {3, {3, 1, 9}}};
    for (int kind = 0; kind < 3; kind++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int nd = shapes[s].nd;
            for (int mask = 0; mask < (1 << nd); mask++) {     /* every subset of axes */
                for (int form = 0; form < 4; form++) {
                    /* form bit 0: keepdims; bit 1: axes as input (new opset) vs attribute */
                    int keep = form & 1, as_input = form >> 1;
                    int64_t opset = as_input ? (kind == 0 ? 13 : 18) : (kind == 0 ? 11 : 13);
                    bf_dtype dt = (mask + form) % 3 == 0 ? BF_I64 : BF_F32;
                    bf_tensor x = dt == BF_F32 ? rand_f32(nd, shapes[s].d, 10.0f)
                                               : rand_int(BF_I64, nd, shapes[s].d, -100, 100, 0);
                    int64_t axes[BF_MAX_DIMS];
                    int red[BF_MAX_DIMS] = {0}, n_axes = 0;
                    for (int i = 0; i < nd; i++)
                        if (mask >> i & 1) {
                            red[i] = 1;
                            /* alternate negative and positive spellings */
                            axes[n_axes] = (i + n_axes) % 2 ? i - nd : i;
                            n_axes++;
                        }
                    if (n_axes == 0)        /* no axes: reduce everything */
                        for (int i = 0; i < nd; i++) red[i] = 1;
                    bf__attr attrs[2] = {th_attr_int("keepdims", keep), th_attr_ints("axes", axes, (size_t)n_axes)};
                    int64_t na[1] = {n_axes};
                    bf_tensor ax = mk(BF_I64, 1, na, axes);
                    const bf_tensor *in[2] = {&x, &ax};
                    int n_in = as_input && n_axes ? 2 : 1;
                    size_t n_attrs = !as_input && n_axes ? 2 : 1;
                    bf_tensor y;
                    run_ok(reduce_ops[kind], opset, attrs, n_attrs, in, n_in, &y);

                    int64_t kd[BF_MAX_DIMS], od[BF_MAX_DIMS];
                    int ond = 0;
                    for (int i = 0; i < nd; i++) {
                        kd[i] = red[i] ? 1 : shapes[s].d[i];
                        if (!red[i] || keep) od[ond++] = kd[i];
                    }
                    bf_tensor want = mk(dt, nd, kd, NULL);
                    ref_reduce(kind, &x, red, &want);
                    want.ndim = ond;
                    memcpy(want.dims, od, sizeof od);
                    expect_close(&y, &want, 1e-5, 1e-5);
                    th_free(&y, 1);
                    th_tensor_free(&want);
                    th_tensor_free(&x);
                    th_tensor_free(&ax);
                }
            }
        }
    }
}

static void reduce_hand(void **state)
{
    (void)state;
    /* x = [[1, 2, 3], [4, nan, 6]]; ReduceMax axis 1 -> [3, nan];
     * axis 0 -> [4, nan, 6]; ReduceSum axis 1 -> [6, nan]; ReduceMean axis 0
     * -> [2.5, nan, 4.5] */
    int64_t d[2] = {2, 3};
    float xs[6] = {1, 2, 3, 4, NAN, 6};
    bf_tensor x = mk(BF_F32, 2, d, xs), y;
    const bf_tensor *in[2] = {&x, NULL};
    int64_t a1[1] = {1}, a0[1] = {0};
    bf__attr ax1 = th_attr_ints("axes", a1, 1), ax0 = th_attr_ints("axes", a0, 1);
    run_ok("ReduceMax", 13, &ax1, 1, in, 1, &y);
    assert_true(y.ndim == 2 && y.dims[0] == 2 && y.dims[1] == 1);
    assert_true(F(&y)[0] == 3.0f && isnan(F(&y)[1]));
    th_free(&y, 1);
    run_ok("ReduceMax", 13, &ax0, 1, in, 1, &y);
    assert_true(F(&y)[0] == 4.0f && isnan(F(&y)[1]) && F(&y)[2] == 6.0f);
    th_free(&y, 1);
    run_ok("ReduceSum", 11, &ax1, 1, in, 1, &y);
    assert_true(F(&y)[0] == 6.0f && isnan(F(&y)[1]));
    th_free(&y, 1);
    run_ok("ReduceMean", 13, &ax0, 1, in, 1, &y);
    assert_true(F(&y)[0] == 2.5f && isnan(F(&y)[1]) && F(&y)[2] == 4.5f);
    th_free(&y, 1);

    /* NaN first in a long row, then larger values: still NaN */
    int64_t dl[1] = {37};
    bf_tensor l = mk(BF_F32, 1, dl, NULL);
    for (int i = 0; i < 37; i++) F(&l)[i] = (float)i;
    F(&l)[0] = NAN;
    in[0] = &l;
    run_ok("ReduceMax", 13, NULL, 0, in, 1, &y);
    assert_true(y.ndim == 1 && isnan(F(&y)[0]));
    th_free(&y, 1);
    /* all -inf -> -inf; with keepdims 0 the result is a scalar */
    for (int i = 0; i < 37; i++) F(&l)[i] = -INFINITY;
    bf__attr k0 = th_attr_int("keepdims", 0);
    run_ok("ReduceMax", 13, &k0, 1, in, 1, &y);
    assert_true(y.ndim == 0 && F(&y)[0] == -INFINITY);
    th_free(&y, 1);

    /* noop_with_empty_axes: no axes (absent, or an empty tensor) -> identity */
    in[0] = &x;
    bf__attr noop = th_attr_int("noop_with_empty_axes", 1);
    bf_tensor empty = mk(BF_I64, 1, (int64_t[]){0}, NULL);
    in[1] = &empty;
    for (int n_in = 1; n_in <= 2; n_in++) {
        run_ok("ReduceSum", 13, &noop, 1, in, n_in, &y);
        assert_true(y.ndim == 2 && y.dims[0] == 2 && y.dims[1] == 3);
        assert_true(F(&y)[0] == 1.0f && isnan(F(&y)[4]) && F(&y)[5] == 6.0f);
        th_free(&y, 1);
    }
    /* ... and without noop, an empty axes input reduces everything: 1+...+6 with nan = nan */
    xs[4] = 5;
    th_tensor_free(&x);
    x = mk(BF_F32, 2, d, xs);
    in[0] = &x;
    run_ok("ReduceSum", 13, NULL, 0, in, 2, &y);
    assert_true(y.ndim == 2 && y.dims[0] == 1 && y.dims[1] == 1 && F(&y)[0] == 21.0f);
    th_free(&y, 1);

    /* int64: [[1, 2, 3], [4, 5, 7]]: sum axis 1 -> [6, 16]; mean -> [2, 5]
     * (16/3 truncates); max axis 0 -> [4, 5, 7] */
    int64_t is[6] = {1, 2, 3, 4, 5, 7};
    bf_tensor xi = mk(BF_I64, 2, d, is);
    bf_tensor a1t = mk(BF_I64, 1, (int64_t[]){1}, a1);
    in[0] = &xi;
    in[1] = &a1t;
    run_ok("ReduceSum", 13, &k0, 1, in, 2, &y);
    assert_true(y.ndim == 1 && I64(&y)[0] == 6 && I64(&y)[1] == 16);
    th_free(&y, 1);
    run_ok("ReduceMean", 18, &k0, 1, in, 2, &y);
    assert_true(I64(&y)[0] == 2 && I64(&y)[1] == 5);
    th_free(&y, 1);
    run_ok("ReduceMax", 13, &ax0, 1, in, 1, &y);
    assert_true(I64(&y)[0] == 4 && I64(&y)[1] == 5 && I64(&y)[2] == 7);
    th_free(&y, 1);

    /* a scalar input reduces to itself */
    float sv = 2.5f;
    bf_tensor sc = mk(BF_F32, 0, NULL, &sv);
    in[0] = &sc;
    run_ok("ReduceMean", 13, NULL, 0, in, 1, &y);
    assert_true(y.ndim == 0 && F(&y)[0] == 2.5f);
    th_free(&y, 1);

    th_tensor_free(&x);
    th_tensor_free(&l);
    th_tensor_free(&empty);
    th_tensor_free(&xi);
    th_tensor_free(&a1t);
    th_tensor_free(&sc);
}

/* [B, K, D] summed over K, as an embedding bag: the middle-axis path, and
 * large values that stay finite only when accumulated exactly. */
static void reduce_middle_axis(void **state)
{
    (void)state;
    int64_t d[3] = {3, 50, 70}, a1[1] = {1};
    bf_tensor x = rand_f32(3, d, 1.0f), y;
    bf__attr ax = th_attr_ints("axes", a1, 1);
    const bf_tensor *in[1] = {&x};
    run_ok("ReduceSum", 11, &ax, 1, in, 1, &y);
    int red[3] = {0, 1, 0};
    bf_tensor want = mk(BF_F32, 3, (int64_t[]){3, 1, 70}, NULL);
    ref_reduce(0, &x, red, &want);
    expect_close(&y, &want, 1e-6, 1e-6);
    th_free(&y, 1);
    th_tensor_free(&want);
    th_tensor_free(&x);
}

static void reduce_errors(void **state)
{
    (void)state;
    int64_t d[3] = {2, 3, 4};
    bf_tensor x = mk(BF_F32, 3, d, NULL);
    const bf_tensor *in[2] = {&x, NULL};
    int64_t dup[2] = {1, -2}, far[1] = {3};
    bf__attr a = th_attr_ints("axes", dup, 2);
    run_fail("ReduceSum", 11, &a, 1, in, 1, BF_EFORMAT, "twice", NULL);
    a = th_attr_ints("axes", far, 1);
    run_fail("ReduceMean", 13, &a, 1, in, 1, BF_ERANGE, "axis 3", "rank 3", NULL);
    /* axes input that is only known at run time */
    bf_tensor ax = {0};
    ax.dtype = BF_I64;
    ax.ndim = 1;
    ax.dims[0] = 1;
    in[1] = &ax;
    run_fail("ReduceSum", 13, NULL, 0, in, 2, BF_EUNSUPPORTED, "axes", "known", NULL);
    bf_tensor axf = mk(BF_F32, 1, (int64_t[]){1}, NULL);
    in[1] = &axf;
    run_fail("ReduceMax", 18, NULL, 0, in, 2, BF_EFORMAT, "axes", "int64", NULL);
    bf__attr bad = th_attr_string("keepdims", "yes");
    in[1] = NULL;
    run_fail("ReduceMax", 13, &bad, 1, in, 1, BF_EFORMAT, "keepdims", NULL);
    bf_tensor xi = mk(BF_I32, 3, d, NULL);
    in[0] = &xi;
    run_fail("ReduceSum", 13, NULL, 0, in, 1, BF_EUNSUPPORTED, "int32", NULL);
    th_tensor_free(&x);
    th_tensor_free(&axf);
    th_tensor_free(&xi);
}

/* Zero-size tensors: right shapes, identity values for empty reductions
 * (sum 0, mean NaN as 0/0, max -inf), and nothing read or written. */
static void empty_tensors(void **state)
{
    (void)state;
    int64_t d[2] = {0, 3}, a0[1] = {0};
    bf_tensor x = mk(BF_F32, 2, d, NULL), y;
    const bf_tensor *in[3] = {&x, NULL, NULL};
    bf__attr ax = th_attr_ints("axes", a0, 1);
    const char *ops[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
    for (int k = 0; k < 3; k++) {
        run_ok(ops[k], 13, &ax, 1, in, 1, &y);
        assert_true(y.ndim == 2 && y.dims[0] == 1 && y.dims[1] == 3);
        float v = F(&y)[2];
        assert_true(k == 0 ? v == 0.0f : k == 1 ? isnan(v) : v == -INFINITY);
        th_free(&y, 1);
    }
    const char *same[] = {"Relu", "Sigmoid", "Clip", "Softmax"};
    for (int k = 0; k < 4; k++) {
        run_ok(same[k], 13, NULL, 0, in, 1, &y);
        assert_true(y.ndim == 2 && y.dims[0] == 0 && y.dims[1] == 3);
        th_free(&y, 1);
    }
    bf__attr to = th_attr_int("to", 7);
    run_ok("Cast", 13, &to, 1, in, 1, &y);
    assert_true(y.dtype == BF_I64 && y.ndim == 2 && y.dims[0] == 0);
    th_free(&y, 1);
    bf__attr axis0 = th_attr_int("axis", 0);
    run_ok("Softmax", 13, &axis0, 1, in, 1, &y);     /* the strided path with n = 0 */
    th_free(&y, 1);
    th_tensor_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unary_random),
        cmocka_unit_test(unary_special),
        cmocka_unit_test(math_sweep),
        cmocka_unit_test(neg_int),
        cmocka_unit_test(unary_errors),
        cmocka_unit_test(binary_random),
        cmocka_unit_test(binary_hand),
        cmocka_unit_test(pow_random),
        cmocka_unit_test(binary_errors),
        cmocka_unit_test(where_random),
        cmocka_unit_test(where_hand),
        cmocka_unit_test(where_errors),
        cmocka_unit_test(clip_all),
        cmocka_unit_test(softmax_random),
        cmocka_unit_test(softmax_hand),
        cmocka_unit_test(cast_all),
        cmocka_unit_test(reduce_random),
        cmocka_unit_test(reduce_hand),
        cmocka_unit_test(reduce_middle_axis),
        cmocka_unit_test(reduce_errors),
        cmocka_unit_test(empty_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
