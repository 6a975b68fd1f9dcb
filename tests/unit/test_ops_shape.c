/* The shape op family checked against plain reference implementations
 * written here straight from the ONNX spec (one output element at a time,
 * by multi-index), on random inputs of every dtype, plus tiny cases worked
 * out by hand and the errors each op must report. These ops only move bytes,
 * so results must be bit-identical to the reference. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "op_harness.h"

/* ---- helpers ---- */

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int64_t rand_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1)); }

static bf_tensor mk(bf_dtype dt, int ndim, const int64_t *dims)
{
    bf_tensor t = th_tensor(dt, NULL, ndim, dims);
    assert_non_null(t.data);
    return t;
}

/* Random contents of any dtype; floats include NaN and Inf now and then,
 * which must travel through unchanged. */
static bf_tensor rnd(bf_dtype dt, int ndim, const int64_t *dims)
{
    bf_tensor t = mk(dt, ndim, dims);
    int64_t n = bf_tensor_numel(&t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng();
        switch (dt) {
        case BF_F32: {
            float v = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            if (r % 97 == 0) v = NAN;
            if (r % 89 == 0) v = -INFINITY;
            ((float *)t.data)[i] = v;
            break;
        }
        case BF_I64: ((int64_t *)t.data)[i] = (int64_t)r; break;
        case BF_I32: ((int32_t *)t.data)[i] = (int32_t)r; break;
        default: ((uint8_t *)t.data)[i] = (uint8_t)(r & 1); break;
        }
    }
    return t;
}

static bf_tensor ints(int n, const int64_t *v)
{
    int64_t d = n;
    return th_tensor_i64(v, 1, &d);
}

static void rand_dims(int ndim, int64_t lo, int64_t hi, int64_t *dims)
{
    for (int i = 0; i < ndim; i++) dims[i] = rand_in(lo, hi);
}

static const bf_dtype all_dtypes[] = {BF_F32, BF_I64, BF_I32, BF_BOOL};

static void unravel(int64_t flat, int ndim, const int64_t *dims, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = flat % dims[d];
        flat /= dims[d];
    }
}

static int64_t ravel(int ndim, const int64_t *dims, const int64_t *idx)
{
    int64_t flat = 0;
    for (int d = 0; d < ndim; d++) flat = flat * dims[d] + idx[d];
    return flat;
}

static void copy_elem(bf_tensor *out, int64_t o, const bf_tensor *in, int64_t i)
{
    size_t es = bf_dtype_size(in->dtype);
    memcpy((char *)out->data + o * (int64_t)es, (const char *)in->data + i * (int64_t)es, es);
}

/* Same dtype, shape and bytes (bit-identical, NaN payloads included). */
static void expect_same(const bf_tensor *got, const bf_tensor *want)
{
    assert_int_equal(got->dtype, want->dtype);
    assert_int_equal(got->ndim, want->ndim);
    for (int i = 0; i < want->ndim; i++) assert_int_equal(got->dims[i], want->dims[i]);
    assert_true(th_compare(got, want, 1e-30, 0) == 0.0);
    assert_memory_equal(got->data, want->data, bf_tensor_nbytes(want) ? bf_tensor_nbytes(want) : 1);
}

static void expect_dims(const bf_tensor *t, int ndim, const int64_t *dims)
{
    assert_int_equal(t->ndim, ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(t->dims[i], dims[i]);
}

/* Runs an op that must fail; checks the status and that every fragment
 * appears in the message. */
static void expect_error(const char *op, int64_t opset, bf__attr *attrs, size_t na,
                         const bf_tensor *const *in, int n_in, int n_out, bf_status want, ...)
{
    bf_tensor out[2];
    bf_error err = {0};
    bf_status st = th_run_op(op, opset, attrs, na, in, n_in, out, n_out, &err);
    if (st != want) print_error("status %d, message: %s\n", st, err.msg);
    assert_int_equal(st, want);
    va_list ap;
    va_start(ap, want);
    for (const char *frag; (frag = va_arg(ap, const char *));) {
        if (!strstr(err.msg, frag)) print_error("'%s' not in: %s\n", frag, err.msg);
        assert_non_null(strstr(err.msg, frag));
    }
    va_end(ap);
}

static void run_ok(const char *op, int64_t opset, bf__attr *attrs, size_t na,
                   const bf_tensor *const *in, int n_in, bf_tensor *out, int n_out)
{
    bf_error err = {0};
    bf_status st = th_run_op(op, opset, attrs, na, in, n_in, out, n_out, &err);
    if (st != BF_OK) print_error("%s failed: %s\n", op, err.msg);
    assert_int_equal(st, BF_OK);
}

/* ---- Shape ---- */

static void shape_op(void **state)
{
    (void)state;
    assert_int_equal(bf__op_find("Shape")->shape_only, 1);
    int64_t d[3] = {2, 3, 4};
    bf_tensor x = rnd(BF_F32, 3, d), out;
    const bf_tensor *in[1] = {&x};

    /* whole shape: [2, 3, 4] */
    run_ok("Shape", 13, NULL, 0, in, 1, &out, 1);
    assert_int_equal(out.dtype, BF_I64);
    expect_dims(&out, 1, (int64_t[]){3});
    assert_memory_equal(out.data, d, sizeof d);
    th_free(&out, 1);

    /* start=1: [3, 4]; start=-2, end=-1: [3]; start=-10 end=10 clamp: [2, 3, 4]; start=2 end=1: [] */
    struct { int64_t s, e; int n; int64_t want[3]; } cases[] = {
        {1, 3, 2, {3, 4}}, {-2, -1, 1, {3}}, {-10, 10, 3, {2, 3, 4}}, {2, 1, 0, {0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        bf__attr a[2] = {th_attr_int("start", cases[k].s), th_attr_int("end", cases[k].e)};
        run_ok("Shape", 15, a, 2, in, 1, &out, 1);
        expect_dims(&out, 1, (int64_t[]){cases[k].n});
        if (cases[k].n) assert_memory_equal(out.data, cases[k].want, sizeof(int64_t) * (size_t)cases[k].n);
        th_free(&out, 1);
    }
    th_tensor_free(&x);

    /* a scalar has shape []: a 1-D tensor of 0 elements */
    bf_tensor s = rnd(BF_I64, 0, NULL);
    in[0] = &s;
    run_ok("Shape", 15, NULL, 0, in, 1, &out, 1);
    expect_dims(&out, 1, (int64_t[]){0});
    th_free(&out, 1);
    th_tensor_free(&s);

    /* random ranks and windows against the spec's slice of the dims */
    for (int it = 0; it < 50; it++) {
        int r = (int)rand_in(0, 6);
        int64_t dims[8];
        rand_dims(r, 0, 5, dims);
        bf_tensor t = mk(BF_BOOL, r, dims);
        in[0] = &t;
        int64_t st = rand_in(-8, 8), en = rand_in(-8, 8);
        bf__attr a[2] = {th_attr_int("start", st), th_attr_int("end", en)};
        run_ok("Shape", 15, a, 2, in, 1, &out, 1);
        if (st < 0) st += r;
        if (en < 0) en += r;
        st = st < 0 ? 0 : st > r ? r : st;
        en = en < 0 ? 0 : en > r ? r : en;
        int64_t n = en > st ? en - st : 0;
        expect_dims(&out, 1, &n);
        for (int64_t i = 0; i < n; i++) assert_int_equal(((int64_t *)out.data)[i], dims[st + i]);
        th_free(&out, 1);
        th_tensor_free(&t);
    }
}

/* ---- Constant, ConstantOfShape ---- */

static void constant_op(void **state)
{
    (void)state;
    bf_tensor out;
    /* value: a 2x2 float tensor comes back as is */
    float v[4] = {1, -2, NAN, 4};
    bf_tensor t = th_tensor_f32(v, 2, (int64_t[]){2, 2});
    bf__attr a = {.name = "value", .type = BF__ATTR_TENSOR, .t = &t};
    run_ok("Constant", 13, &a, 1, NULL, 0, &out, 1);
    expect_same(&out, &t);
    th_free(&out, 1);

    /* value: an int64 scalar */
    int64_t seven = 7;
    bf_tensor ts = th_tensor_i64(&seven, 0, NULL);
    a.t = &ts;
    run_ok("Constant", 13, &a, 1, NULL, 0, &out, 1);
    expect_same(&out, &ts);
    th_free(&out, 1);
    th_tensor_free(&ts);

    /* value_float 2.5 -> float32 scalar 2.5 */
    bf__attr f = th_attr_float("value_float", 2.5f);
    run_ok("Constant", 13, &f, 1, NULL, 0, &out, 1);
    assert_int_equal(out.dtype, BF_F32);
    assert_int_equal(out.ndim, 0);
    assert_true(*(float *)out.data == 2.5f);
    th_free(&out, 1);

    /* value_floats [0.5, -1] -> float32 [2] */
    float fl[2] = {0.5f, -1};
    bf__attr fs = {.name = "value_floats", .type = BF__ATTR_FLOATS, .floats = fl, .n = 2};
    run_ok("Constant", 13, &fs, 1, NULL, 0, &out, 1);
    assert_int_equal(out.dtype, BF_F32);
    expect_dims(&out, 1, (int64_t[]){2});
    assert_memory_equal(out.data, fl, sizeof fl);
    th_free(&out, 1);

    /* value_int -3 -> int64 scalar; value_ints [4, 5, 6] -> int64 [3] */
    bf__attr i1 = th_attr_int("value_int", -3);
    run_ok("Constant", 13, &i1, 1, NULL, 0, &out, 1);
    assert_int_equal(out.dtype, BF_I64);
    assert_int_equal(out.ndim, 0);
    assert_int_equal(*(int64_t *)out.data, -3);
    th_free(&out, 1);
    int64_t iv[3] = {4, 5, 6};
    bf__attr is = th_attr_ints("value_ints", iv, 3);
    run_ok("Constant", 13, &is, 1, NULL, 0, &out, 1);
    assert_int_equal(out.dtype, BF_I64);
    expect_dims(&out, 1, (int64_t[]){3});
    assert_memory_equal(out.data, iv, sizeof iv);
    th_free(&out, 1);

    /* errors */
    a.t = &t;
    bf__attr two[2] = {a, f};
    expect_error("Constant", 13, two, 2, NULL, 0, 1, BF_EINVAL, "'value'", "'value_float'", NULL);
    bf__attr other = th_attr_int("foo", 1);
    expect_error("Constant", 13, &other, 1, NULL, 0, 1, BF_EINVAL, "no value attribute", NULL);
    bf__attr str = th_attr_string("value_string", "hello");
    expect_error("Constant", 13, &str, 1, NULL, 0, 1, BF_EUNSUPPORTED, "value_string", NULL);
    bf__attr sparse = {.name = "sparse_value", .type = BF__ATTR_OTHER};
    expect_error("Constant", 13, &sparse, 1, NULL, 0, 1, BF_EUNSUPPORTED, "sparse_value", NULL);
    bf__attr badf = th_attr_string("value_float", "x");
    expect_error("Constant", 13, &badf, 1, NULL, 0, 1, BF_EFORMAT, "value_float", NULL);
    th_tensor_free(&t);
}

static void constant_of_shape_op(void **state)
{
    (void)state;
    bf_tensor out;
    /* default value: float32 zeros of shape [2, 3] */
    bf_tensor sh = ints(2, (int64_t[]){2, 3});
    const bf_tensor *in[1] = {&sh};
    run_ok("ConstantOfShape", 13, NULL, 0, in, 1, &out, 1);
    bf_tensor zeros = mk(BF_F32, 2, (int64_t[]){2, 3});
    expect_same(&out, &zeros);
    th_free(&out, 1);
    th_tensor_free(&zeros);

    /* value of every dtype fills every element */
    for (size_t k = 0; k < 4; k++) {
        bf_tensor val = rnd(all_dtypes[k], 1, (int64_t[]){1});
        bf__attr a = {.name = "value", .type = BF__ATTR_TENSOR, .t = &val};
        run_ok("ConstantOfShape", 13, &a, 1, in, 1, &out, 1);
        bf_tensor want = mk(val.dtype, 2, (int64_t[]){2, 3});
        for (int64_t i = 0; i < 6; i++) copy_elem(&want, i, &val, 0);
        expect_same(&out, &want);
        th_free(&out, 1);
        th_tensor_free(&want);
        th_tensor_free(&val);
    }
    th_tensor_free(&sh);

    /* shape [] -> a scalar; shape [0, 4] -> empty */
    int64_t one = 1;
    bf_tensor val = th_tensor_i64(&one, 1, (int64_t[]){1});
    bf__attr a = {.name = "value", .type = BF__ATTR_TENSOR, .t = &val};
    bf_tensor empty = ints(0, NULL);
    in[0] = &empty;
    run_ok("ConstantOfShape", 13, &a, 1, in, 1, &out, 1);
    assert_int_equal(out.ndim, 0);
    assert_int_equal(*(int64_t *)out.data, 1);
    th_free(&out, 1);
    th_tensor_free(&empty);
    bf_tensor z = ints(2, (int64_t[]){0, 4});
    in[0] = &z;
    run_ok("ConstantOfShape", 13, &a, 1, in, 1, &out, 1);
    expect_dims(&out, 2, (int64_t[]){0, 4});
    th_free(&out, 1);
    th_tensor_free(&z);

    /* errors: negative dim, shape unknown at plan time, multi-element value */
    bf_tensor neg = ints(2, (int64_t[]){2, -1});
    in[0] = &neg;
    expect_error("ConstantOfShape", 13, NULL, 0, in, 1, 1, BF_EINVAL, "[2, -1]", "negative", NULL);
    th_tensor_free(&neg);
    bf_tensor unknown = {.dtype = BF_I64, .ndim = 1, .dims = {2}};
    in[0] = &unknown;
    expect_error("ConstantOfShape", 13, NULL, 0, in, 1, 1, BF_EUNSUPPORTED, "'input'",
                 "known when the plan is built", NULL);
    bf_tensor two = ints(2, (int64_t[]){1, 2});
    bf_tensor sh2 = ints(1, (int64_t[]){3});
    in[0] = &sh2;
    a.t = &two;
    expect_error("ConstantOfShape", 13, &a, 1, in, 1, 1, BF_EINVAL, "one element", NULL);
    th_tensor_free(&two);
    th_tensor_free(&sh2);
    th_tensor_free(&val);
}

/* ---- Identity, Dropout ---- */

static void identity_op(void **state)
{
    (void)state;
    for (int it = 0; it < 20; it++) {
        int r = (int)rand_in(0, 4);
        int64_t dims[8];
        rand_dims(r, 0, 6, dims);
        bf_tensor x = rnd(all_dtypes[it % 4], r, dims), out;
        const bf_tensor *in[1] = {&x};
        run_ok("Identity", 13, NULL, 0, in, 1, &out, 1);
        expect_same(&out, &x);
        th_free(&out, 1);
        th_tensor_free(&x);
    }
}

static void dropout_op(void **state)
{
    (void)state;
    int64_t dims[3] = {2, 3, 5};
    bf_tensor x = rnd(BF_F32, 3, dims), out[2];
    bf_tensor ratio = th_tensor_f32((float[]){0.3f}, 0, NULL);
    bf_tensor tm = mk(BF_BOOL, 0, NULL);   /* false */
    const bf_tensor *in[3] = {&x, &ratio, &tm};

    /* inference: output = input, mask all true */
    run_ok("Dropout", 13, NULL, 0, in, 3, out, 2);
    expect_same(&out[0], &x);
    assert_int_equal(out[1].dtype, BF_BOOL);
    expect_dims(&out[1], 3, dims);
    for (int i = 0; i < 30; i++) assert_int_equal(((uint8_t *)out[1].data)[i], 1);
    th_free(out, 2);

    /* one input, one output; opset 11 with the ratio attribute */
    run_ok("Dropout", 13, NULL, 0, in, 1, out, 1);
    expect_same(&out[0], &x);
    th_free(out, 1);
    bf__attr r = th_attr_float("ratio", 0.1f);
    run_ok("Dropout", 11, &r, 1, in, 1, out, 1);
    expect_same(&out[0], &x);
    th_free(out, 1);

    /* a scalar passes through */
    bf_tensor s = rnd(BF_F32, 0, NULL);
    const bf_tensor *sc_in[1] = {&s};
    run_ok("Dropout", 13, NULL, 0, sc_in, 1, out, 2);
    expect_same(&out[0], &s);
    assert_int_equal(*(uint8_t *)out[1].data, 1);
    th_free(out, 2);
    th_tensor_free(&s);

    /* errors: training mode, a non-bool training_mode, a string ratio */
    *(uint8_t *)tm.data = 1;
    expect_error("Dropout", 13, NULL, 0, in, 3, 2, BF_EUNSUPPORTED, "training_mode is true", "ratio 0.3",
                 "deterministic", NULL);
    /* training mode with ratio 0 (torchvision 0.14's Swin): the identity */
    *(float *)ratio.data = 0.0f;
    run_ok("Dropout", 13, NULL, 0, in, 3, out, 2);
    expect_same(&out[0], &x);
    for (int i = 0; i < 30; i++) assert_int_equal(((uint8_t *)out[1].data)[i], 1);
    th_free(out, 2);
    /* an omitted ratio is 0.5 */
    in[1] = NULL;
    expect_error("Dropout", 13, NULL, 0, in, 3, 1, BF_EUNSUPPORTED, "training_mode is true", "ratio 0.5", NULL);
    in[1] = &ratio;
    bf_tensor tmi = th_tensor_i64((int64_t[]){0}, 0, NULL);
    in[2] = &tmi;
    expect_error("Dropout", 13, NULL, 0, in, 3, 1, BF_EFORMAT, "training_mode", "bool", NULL);
    bf__attr rs = th_attr_string("ratio", "half");
    expect_error("Dropout", 11, &rs, 1, in, 1, 1, BF_EFORMAT, "'ratio'", NULL);
    th_tensor_free(&tmi);
    th_tensor_free(&tm);
    th_tensor_free(&ratio);
    th_tensor_free(&x);
}

/* ---- Flatten, Reshape, Squeeze, Unsqueeze: same bytes, new shape ---- */

static bf_tensor with_shape(const bf_tensor *x, int ndim, const int64_t *dims)
{
    bf_tensor t = mk(x->dtype, ndim, dims);
    assert_int_equal(bf_tensor_nbytes(&t), bf_tensor_nbytes(x));
    if (bf_tensor_nbytes(x)) memcpy(t.data, x->data, bf_tensor_nbytes(x));
    return t;
}

static void flatten_op(void **state)
{
    (void)state;
    bf_tensor out;
    /* [2, 3, 4] axis 1 -> [2, 12]; axis 0 -> [1, 24]; axis 3 -> [24, 1]; axis -1 -> [6, 4] */
    int64_t d[3] = {2, 3, 4};
    bf_tensor x = rnd(BF_F32, 3, d);
    const bf_tensor *in[1] = {&x};
    struct { int64_t axis, a, b; } cases[] = {{1, 2, 12}, {0, 1, 24}, {3, 24, 1}, {-1, 6, 4}};
    for (size_t k = 0; k < 4; k++) {
        bf__attr a = th_attr_int("axis", cases[k].axis);
        run_ok("Flatten", 13, &a, 1, in, 1, &out, 1);
        bf_tensor want = with_shape(&x, 2, (int64_t[]){cases[k].a, cases[k].b});
        expect_same(&out, &want);
        th_free(&out, 1);
        th_tensor_free(&want);
    }
    /* default axis 1 */
    run_ok("Flatten", 13, NULL, 0, in, 1, &out, 1);
    expect_dims(&out, 2, (int64_t[]){2, 12});
    th_free(&out, 1);
    bf__attr bad = th_attr_int("axis", 4);
    expect_error("Flatten", 13, &bad, 1, in, 1, 1, BF_ERANGE, "axis 4", "-3..3", NULL);
    th_tensor_free(&x);

    /* random shapes and every valid axis against the spec's formula */
    for (int it = 0; it < 30; it++) {
        int r = (int)rand_in(0, 5);
        int64_t dims[8];
        rand_dims(r, 0, 4, dims);
        bf_tensor t = rnd(all_dtypes[it % 4], r, dims);
        in[0] = &t;
        for (int64_t axis = -r; axis <= r; axis++) {
            bf__attr a = th_attr_int("axis", axis);
            run_ok("Flatten", 13, &a, 1, in, 1, &out, 1);
            int64_t ax = axis < 0 ? axis + r : axis, outer = 1, inner = 1;
            for (int i = 0; i < r; i++) *(i < ax ? &outer : &inner) *= dims[i];
            bf_tensor want = with_shape(&t, 2, (int64_t[]){outer, inner});
            expect_same(&out, &want);
            th_free(&out, 1);
            th_tensor_free(&want);
        }
        th_tensor_free(&t);
    }
}

static void reshape_op(void **state)
{
    (void)state;
    bf_tensor out;
    int64_t d[3] = {2, 3, 4};
    bf_tensor x = rnd(BF_I32, 3, d);
    struct { int n; int64_t req[4]; int m; int64_t want[4]; } cases[] = {
        {2, {4, -1}, 2, {4, 6}},          /* 24 / 4 = 6 */
        {2, {0, -1}, 2, {2, 12}},         /* 0 copies dim 0 (2), -1 = 24 / 2 */
        {4, {0, 0, 2, 2}, 4, {2, 3, 2, 2}},
        {1, {-1}, 1, {24}},
        {3, {2, 3, 4}, 3, {2, 3, 4}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        bf_tensor sh = ints(cases[k].n, cases[k].req);
        const bf_tensor *in[2] = {&x, &sh};
        run_ok("Reshape", 13, NULL, 0, in, 2, &out, 1);
        bf_tensor want = with_shape(&x, cases[k].m, cases[k].want);
        expect_same(&out, &want);
        th_free(&out, 1);
        th_tensor_free(&want);
        th_tensor_free(&sh);
    }

    /* scalar <-> [1] <-> [] */
    bf_tensor s = rnd(BF_F32, 0, NULL);
    bf_tensor one = ints(1, (int64_t[]){1}), none = ints(0, NULL);
    const bf_tensor *in[2] = {&s, &one};
    run_ok("Reshape", 13, NULL, 0, in, 2, &out, 1);
    expect_dims(&out, 1, (int64_t[]){1});
    th_free(&out, 1);
    in[1] = &none;
    run_ok("Reshape", 13, NULL, 0, in, 2, &out, 1);
    expect_same(&out, &s);
    th_free(&out, 1);
    th_tensor_free(&s);
    th_tensor_free(&one);
    th_tensor_free(&none);

    /* allowzero=1 (opset 14): 0 is a real zero. [0, 3] -> [3, 0] */
    bf_tensor e = mk(BF_F32, 2, (int64_t[]){0, 3});
    bf_tensor sh30 = ints(2, (int64_t[]){3, 0});
    bf__attr az = th_attr_int("allowzero", 1);
    in[0] = &e;
    in[1] = &sh30;
    run_ok("Reshape", 14, &az, 1, in, 2, &out, 1);
    expect_dims(&out, 2, (int64_t[]){3, 0});
    th_free(&out, 1);
    /* without allowzero, 0 copies the input's dim 1 (3): [3, 3] has 9 elements, not 0 */
    expect_error("Reshape", 14, NULL, 0, in, 2, 1, BF_ESHAPE, "[0, 3]", "[3, 0]", NULL);
    th_tensor_free(&sh30);
    th_tensor_free(&e);

    /* errors name the requested shape and the input's */
    in[0] = &x;
    bf_tensor bad = ints(2, (int64_t[]){5, -1});
    in[1] = &bad;
    expect_error("Reshape", 13, NULL, 0, in, 2, 1, BF_ESHAPE, "[5, -1]", "[2, 3, 4]", "24", NULL);
    th_tensor_free(&bad);
    bad = ints(2, (int64_t[]){5, 5});
    in[1] = &bad;
    expect_error("Reshape", 13, NULL, 0, in, 2, 1, BF_ESHAPE, "[5, 5]", "[2, 3, 4]", NULL);
    th_tensor_free(&bad);
    bad = ints(3, (int64_t[]){-1, 2, -1});
    in[1] = &bad;
    expect_error("Reshape", 13, NULL, 0, in, 2, 1, BF_EINVAL, "more than one -1", NULL);
    th_tensor_free(&bad);
    bad = ints(2, (int64_t[]){0, -1});
    in[1] = &bad;
    expect_error("Reshape", 14, &az, 1, in, 2, 1, BF_EINVAL, "both 0 and -1", NULL);
    th_tensor_free(&bad);
    bad = ints(2, (int64_t[]){4, -2});
    in[1] = &bad;
    expect_error("Reshape", 13, NULL, 0, in, 2, 1, BF_EINVAL, "-2", NULL);
    th_tensor_free(&bad);
    bad = ints(4, (int64_t[]){1, 1, 1, 0});
    in[1] = &bad;
    expect_error("Reshape", 13, NULL, 0, in, 2, 1, BF_ESHAPE, "copies dim 3", NULL);
    th_tensor_free(&bad);
    bf_tensor unknown = {.dtype = BF_I64, .ndim = 1, .dims = {2}};
    in[1] = &unknown;
    expect_error("Reshape", 13, NULL, 0, in, 2, 1, BF_EUNSUPPORTED, "'shape'", NULL);
    in[1] = NULL;   /* an empty name in a required slot */
    expect_error("Reshape", 13, NULL, 0, in, 2, 1, BF_EINVAL, "input 1 is required", NULL);
    th_tensor_free(&x);

    /* random: split the element count over a random new rank, maybe with -1 and 0 */
    for (int it = 0; it < 40; it++) {
        int r = (int)rand_in(1, 4);
        int64_t dims[8];
        rand_dims(r, 1, 5, dims);
        bf_tensor t = rnd(all_dtypes[it % 4], r, dims);
        /* new shape: the input dims shuffled into a different grouping */
        int64_t req[8], want[8];
        int m = 0;
        for (int i = 0; i < r; i++) {
            if (m > 0 && rng() % 2) want[m - 1] *= dims[i];
            else want[m++] = dims[i];
        }
        for (int i = 0; i < m; i++) req[i] = want[i];
        req[rng() % (uint64_t)m] = -1;
        if (want[0] == dims[0] && req[0] != -1) req[0] = 0;
        bf_tensor sh = ints(m, req);
        const bf_tensor *rin[2] = {&t, &sh};
        run_ok("Reshape", 13, NULL, 0, rin, 2, &out, 1);
        bf_tensor w = with_shape(&t, m, want);
        expect_same(&out, &w);
        th_free(&out, 1);
        th_tensor_free(&w);
        th_tensor_free(&sh);
        th_tensor_free(&t);
    }
}

static void squeeze_unsqueeze_ops(void **state)
{
    (void)state;
    bf_tensor out;
    /* [1, 3, 1, 2]: squeeze all -> [3, 2]; axes [0] -> [3, 1, 2]; axes [-2] -> [1, 3, 2] */
    int64_t d[4] = {1, 3, 1, 2};
    bf_tensor x = rnd(BF_F32, 4, d);
    const bf_tensor *in[2] = {&x, NULL};
    run_ok("Squeeze", 13, NULL, 0, in, 1, &out, 1);
    bf_tensor want = with_shape(&x, 2, (int64_t[]){3, 2});
    expect_same(&out, &want);
    th_free(&out, 1);
    th_tensor_free(&want);
    bf_tensor ax0 = ints(1, (int64_t[]){0}), axm2 = ints(1, (int64_t[]){-2});
    in[1] = &ax0;
    run_ok("Squeeze", 13, NULL, 0, in, 2, &out, 1);
    expect_dims(&out, 3, (int64_t[]){3, 1, 2});
    th_free(&out, 1);
    in[1] = &axm2;
    run_ok("Squeeze", 13, NULL, 0, in, 2, &out, 1);
    expect_dims(&out, 3, (int64_t[]){1, 3, 2});
    th_free(&out, 1);
    /* opset 11: axes as an attribute */
    bf__attr a0 = th_attr_ints("axes", (int64_t[]){0, 2}, 2);
    run_ok("Squeeze", 11, &a0, 1, in, 1, &out, 1);
    expect_dims(&out, 2, (int64_t[]){3, 2});
    th_free(&out, 1);
    /* [1] -> scalar */
    bf_tensor o1 = rnd(BF_I64, 1, (int64_t[]){1});
    const bf_tensor *in1[1] = {&o1};
    run_ok("Squeeze", 13, NULL, 0, in1, 1, &out, 1);
    bf_tensor sc = with_shape(&o1, 0, NULL);
    expect_same(&out, &sc);
    th_free(&out, 1);

    /* errors: a non-1 dim names the axis and the dim; axis out of range;
     * an attribute at opset 13 */
    bf_tensor ax1 = ints(1, (int64_t[]){1});
    in[1] = &ax1;
    expect_error("Squeeze", 13, NULL, 0, in, 2, 1, BF_ESHAPE, "axis 1", "dim is 3", NULL);
    bf_tensor ax9 = ints(1, (int64_t[]){9});
    in[1] = &ax9;
    expect_error("Squeeze", 13, NULL, 0, in, 2, 1, BF_ERANGE, "axis 9", NULL);
    expect_error("Squeeze", 13, &a0, 1, in, 1, 1, BF_EINVAL, "opset 13", NULL);

    /* Unsqueeze: scalar axes [0] -> [1]; [3, 2] axes [0, 3] -> [1, 3, 2, 1]; axes [-1] -> [3, 2, 1] */
    in[0] = &sc;
    in[1] = &ax0;
    run_ok("Unsqueeze", 13, NULL, 0, in, 2, &out, 1);
    expect_same(&out, &o1);
    th_free(&out, 1);
    bf_tensor y = rnd(BF_BOOL, 2, (int64_t[]){3, 2});
    bf_tensor ax03 = ints(2, (int64_t[]){0, 3}), axm1 = ints(1, (int64_t[]){-1});
    in[0] = &y;
    in[1] = &ax03;
    run_ok("Unsqueeze", 13, NULL, 0, in, 2, &out, 1);
    want = with_shape(&y, 4, (int64_t[]){1, 3, 2, 1});
    expect_same(&out, &want);
    th_free(&out, 1);
    th_tensor_free(&want);
    in[1] = &axm1;
    run_ok("Unsqueeze", 13, NULL, 0, in, 2, &out, 1);
    expect_dims(&out, 3, (int64_t[]){3, 2, 1});
    th_free(&out, 1);
    bf__attr a03 = th_attr_ints("axes", (int64_t[]){0, 3}, 2);
    run_ok("Unsqueeze", 11, &a03, 1, in, 1, &out, 1);
    expect_dims(&out, 4, (int64_t[]){1, 3, 2, 1});
    th_free(&out, 1);
    /* errors: duplicate axis, missing axes, out of range */
    bf_tensor dup = ints(2, (int64_t[]){1, -3});
    in[1] = &dup;
    expect_error("Unsqueeze", 13, NULL, 0, in, 2, 1, BF_EINVAL, "axis 1", "more than once", NULL);
    expect_error("Unsqueeze", 13, NULL, 0, in, 1, 1, BF_EINVAL, "'axes' is required", NULL);
    expect_error("Unsqueeze", 11, NULL, 0, in, 1, 1, BF_EINVAL, "'axes' is required", NULL);
    bf_tensor ax5 = ints(1, (int64_t[]){5});
    in[1] = &ax5;
    expect_error("Unsqueeze", 13, NULL, 0, in, 2, 1, BF_ERANGE, "axis 5", NULL);

    /* random: unsqueeze random axes then squeeze them back */
    for (int it = 0; it < 40; it++) {
        int r = (int)rand_in(0, 4), k = (int)rand_in(1, 3), R = r + k;
        int64_t dims[8], axes[8], want_dims[8];
        rand_dims(r, 2, 4, dims);
        bf_tensor t = rnd(all_dtypes[it % 4], r, dims);
        int mark[8] = {0};
        for (int i = 0; i < k; i++) {
            int64_t a;
            do a = rand_in(0, R - 1); while (mark[a]);
            mark[a] = 1;
            axes[i] = rng() % 2 ? a : a - R;
        }
        for (int i = 0, j = 0; i < R; i++) want_dims[i] = mark[i] ? 1 : dims[j++];
        bf_tensor ax = ints(k, axes);
        const bf_tensor *uin[2] = {&t, &ax};
        run_ok("Unsqueeze", 13, NULL, 0, uin, 2, &out, 1);
        bf_tensor w = with_shape(&t, R, want_dims);
        expect_same(&out, &w);
        const bf_tensor *back_in[2] = {&out, &ax};
        bf_tensor back;
        run_ok("Squeeze", 13, NULL, 0, back_in, 2, &back, 1);
        expect_same(&back, &t);
        th_free(&back, 1);
        th_free(&out, 1);
        th_tensor_free(&w);
        th_tensor_free(&ax);
        th_tensor_free(&t);
    }
    th_tensor_free(&ax5);
    th_tensor_free(&dup);
    th_tensor_free(&ax03);
    th_tensor_free(&axm1);
    th_tensor_free(&y);
    th_tensor_free(&ax9);
    th_tensor_free(&ax1);
    th_tensor_free(&sc);
    th_tensor_free(&o1);
    th_tensor_free(&ax0);
    th_tensor_free(&axm2);
    th_tensor_free(&x);
}

/* ---- Transpose ---- */

static bf_tensor ref_transpose(const bf_tensor *x, const int64_t *perm)
{
    int r = x->ndim;
    int64_t dims[8], oi[8], ii[8];
    for (int d = 0; d < r; d++) dims[d] = x->dims[perm[d]];
    bf_tensor y = mk(x->dtype, r, dims);
    for (int64_t f = 0; f < bf_tensor_numel(&y); f++) {
        unravel(f, r, dims, oi);
        for (int d = 0; d < r; d++) ii[perm[d]] = oi[d];   /* out[i] = in[i permuted back] */
        copy_elem(&y, f, x, ravel(r, x->dims, ii));
    }
    return y;
}

static void check_transpose(const bf_tensor *x, const int64_t *perm, int with_attr)
{
    bf_tensor out;
    const bf_tensor *in[1] = {x};
    bf__attr a = th_attr_ints("perm", perm, (size_t)x->ndim);
    run_ok("Transpose", 13, &a, with_attr ? 1 : 0, in, 1, &out, 1);
    bf_tensor want = ref_transpose(x, perm);
    expect_same(&out, &want);
    th_free(&out, 1);
    th_tensor_free(&want);
}

static void transpose_op(void **state)
{
    (void)state;
    /* [[1, 2, 3], [4, 5, 6]] -> [[1, 4], [2, 5], [3, 6]] */
    bf_tensor x = th_tensor_f32((float[]){1, 2, 3, 4, 5, 6}, 2, (int64_t[]){2, 3}), out;
    const bf_tensor *in[1] = {&x};
    run_ok("Transpose", 13, NULL, 0, in, 1, &out, 1);
    expect_dims(&out, 2, (int64_t[]){3, 2});
    float want[6] = {1, 4, 2, 5, 3, 6};
    assert_memory_equal(out.data, want, sizeof want);
    th_free(&out, 1);
    th_tensor_free(&x);

    /* the fast paths: 2-D tiles (edges not multiples of the tile), batched
     * 2-D, permutations keeping the last dim, NCHW <-> NHWC, general */
    struct { int r; int64_t dims[5]; int64_t perm[5]; } cases[] = {
        {2, {100, 70}, {1, 0}},      {2, {37, 45}, {1, 0}},          {2, {1, 9}, {1, 0}},
        {3, {3, 33, 40}, {0, 2, 1}}, {4, {2, 5, 3, 7}, {0, 2, 1, 3}}, {4, {2, 3, 6, 5}, {0, 2, 3, 1}},
        {4, {2, 6, 5, 3}, {0, 3, 1, 2}}, {3, {4, 5, 6}, {2, 1, 0}},   {4, {2, 3, 4, 5}, {3, 2, 1, 0}},
        {5, {2, 3, 1, 4, 2}, {4, 0, 2, 3, 1}}, {3, {3, 0, 2}, {2, 0, 1}}, {1, {7}, {0}},
        {0, {0}, {0}},
        /* a DLRM interaction's: 8 x 8 register blocks and their edges */
        {3, {64, 9, 16}, {0, 2, 1}}, {3, {64, 9, 9}, {1, 2, 0}}, {2, {36, 64}, {1, 0}}, {2, {8, 8}, {1, 0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (size_t t = 0; t < 4; t++) {
            bf_tensor r = rnd(all_dtypes[t], cases[k].r, cases[k].dims);
            check_transpose(&r, cases[k].perm, 1);
            th_tensor_free(&r);
        }

    /* random ranks, dims and permutations; without perm: reversed */
    for (int it = 0; it < 120; it++) {
        int r = (int)rand_in(0, 6);
        int64_t dims[8], perm[8];
        rand_dims(r, 1, r > 4 ? 3 : 9, dims);
        for (int d = 0; d < r; d++) perm[d] = d;
        for (int d = r - 1; d > 0; d--) {
            int64_t j = rand_in(0, d), tmp = perm[d];
            perm[d] = perm[j];
            perm[j] = tmp;
        }
        bf_tensor t = rnd(all_dtypes[it % 4], r, dims);
        check_transpose(&t, perm, 1);
        for (int d = 0; d < r; d++) perm[d] = r - 1 - d;
        check_transpose(&t, perm, 0);
        th_tensor_free(&t);
    }

    /* errors */
    bf_tensor e = rnd(BF_F32, 3, (int64_t[]){2, 3, 4});
    in[0] = &e;
    bf__attr dupp = th_attr_ints("perm", (int64_t[]){0, 1, 1}, 3);
    expect_error("Transpose", 13, &dupp, 1, in, 1, 1, BF_EINVAL, "[0, 1, 1]", "permutation", NULL);
    bf__attr shortp = th_attr_ints("perm", (int64_t[]){1, 0}, 2);
    expect_error("Transpose", 13, &shortp, 1, in, 1, 1, BF_ESHAPE, "2 entries", "rank 3", NULL);
    th_tensor_free(&e);
}

/* ---- Concat ---- */

static bf_tensor ref_concat(const bf_tensor *const *xs, int n, int axis)
{
    int r = xs[0]->ndim;
    int64_t dims[8], idx[8];
    memcpy(dims, xs[0]->dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < n; i++) dims[axis] += xs[i]->dims[axis];
    bf_tensor y = mk(xs[0]->dtype, r, dims);
    for (int64_t f = 0; f < bf_tensor_numel(&y); f++) {
        unravel(f, r, dims, idx);
        int i = 0;
        while (idx[axis] >= xs[i]->dims[axis]) idx[axis] -= xs[i++]->dims[axis];
        copy_elem(&y, f, xs[i], ravel(r, xs[i]->dims, idx));
    }
    return y;
}

static void concat_op(void **state)
{
    (void)state;
    /* [[1, 2]] ++ [[3, 4], [5, 6]] on axis 0 -> [[1, 2], [3, 4], [5, 6]];
     * [[1], [2]] ++ [[3, 4], [5, 6]] on axis -1 -> [[1, 3, 4], [2, 5, 6]] */
    bf_tensor a = th_tensor_i64((int64_t[]){1, 2}, 2, (int64_t[]){1, 2});
    bf_tensor b = th_tensor_i64((int64_t[]){3, 4, 5, 6}, 2, (int64_t[]){2, 2});
    bf_tensor c = th_tensor_i64((int64_t[]){1, 2}, 2, (int64_t[]){2, 1});
    bf_tensor out;
    const bf_tensor *in[3] = {&a, &b};
    bf__attr ax = th_attr_int("axis", 0);
    run_ok("Concat", 13, &ax, 1, in, 2, &out, 1);
    expect_dims(&out, 2, (int64_t[]){3, 2});
    assert_memory_equal(out.data, ((int64_t[]){1, 2, 3, 4, 5, 6}), 48);
    th_free(&out, 1);
    in[0] = &c;
    ax.i = -1;
    run_ok("Concat", 13, &ax, 1, in, 2, &out, 1);
    expect_dims(&out, 2, (int64_t[]){2, 3});
    assert_memory_equal(out.data, ((int64_t[]){1, 3, 4, 2, 5, 6}), 48);
    th_free(&out, 1);

    /* errors: mixed dtype, dims differing off the axis, a scalar, no axis */
    bf_tensor f = rnd(BF_F32, 2, (int64_t[]){2, 2});
    in[0] = &b;
    in[1] = &f;
    ax.i = 0;
    expect_error("Concat", 13, &ax, 1, in, 2, 1, BF_ESHAPE, "input 1 is float32", "int64", NULL);
    in[1] = &c;
    expect_error("Concat", 13, &ax, 1, in, 2, 1, BF_ESHAPE, "input 1 has shape [2, 1]", "[2, 2]",
                 "axis 0", NULL);
    bf_tensor s = rnd(BF_F32, 0, NULL);
    in[0] = &s;
    expect_error("Concat", 13, &ax, 1, in, 1, 1, BF_ESHAPE, "scalar", NULL);
    in[0] = &b;
    expect_error("Concat", 13, NULL, 0, in, 1, 1, BF_EINVAL, "'axis'", NULL);
    ax.i = 2;
    expect_error("Concat", 13, &ax, 1, in, 1, 1, BF_ERANGE, "axis 2", NULL);
    th_tensor_free(&s);
    th_tensor_free(&f);
    th_tensor_free(&a);
    th_tensor_free(&b);
    th_tensor_free(&c);

    /* random: 1..6 inputs (some empty along the axis), every axis */
    for (int it = 0; it < 80; it++) {
        int r = (int)rand_in(1, 4), n = (int)rand_in(1, 6);
        int axis = (int)rand_in(0, r - 1);
        int64_t dims[8];
        rand_dims(r, 1, 4, dims);
        bf_tensor xs[6];
        const bf_tensor *xp[6];
        bf_dtype dt = all_dtypes[it % 4];
        for (int i = 0; i < n; i++) {
            dims[axis] = rand_in(0, 4);
            xs[i] = rnd(dt, r, dims);
            xp[i] = &xs[i];
        }
        bf__attr aa = th_attr_int("axis", rng() % 2 ? axis : axis - r);
        run_ok("Concat", 13, &aa, 1, xp, n, &out, 1);
        bf_tensor want = ref_concat(xp, n, axis);
        expect_same(&out, &want);
        th_free(&out, 1);
        th_tensor_free(&want);
        for (int i = 0; i < n; i++) th_tensor_free(&xs[i]);
    }
}

/* ---- Gather ---- */

static int64_t idx_at(const bf_tensor *ind, int64_t j)
{
    return ind->dtype == BF_I64 ? ((int64_t *)ind->data)[j] : ((int32_t *)ind->data)[j];
}

/* output[i_0..i_{axis-1}, j_0..j_{q-1}, k...] = data[i..., indices[j...], k...] */
static bf_tensor ref_gather(const bf_tensor *x, const bf_tensor *ind, int axis)
{
    int r = x->ndim, q = ind->ndim, R = r - 1 + q;
    int64_t dims[8], oi[8], xi[8];
    for (int d = 0; d < axis; d++) dims[d] = x->dims[d];
    for (int d = 0; d < q; d++) dims[axis + d] = ind->dims[d];
    for (int d = axis + 1; d < r; d++) dims[q + d - 1] = x->dims[d];
    bf_tensor y = mk(x->dtype, R, dims);
    for (int64_t f = 0; f < bf_tensor_numel(&y); f++) {
        unravel(f, R, dims, oi);
        for (int d = 0; d < axis; d++) xi[d] = oi[d];
        int64_t v = idx_at(ind, ravel(q, ind->dims, oi + axis));
        xi[axis] = v < 0 ? v + x->dims[axis] : v;
        for (int d = axis + 1; d < r; d++) xi[d] = oi[q + d - 1];
        copy_elem(&y, f, x, ravel(r, x->dims, xi));
    }
    return y;
}

static void gather_op(void **state)
{
    (void)state;
    /* data [[1, 2], [3, 4], [5, 6]], indices [[0, 2], [-1, 1]], axis 0
     * -> [[[1, 2], [5, 6]], [[5, 6], [3, 4]]]; axis 1 with indices [1] -> [[2], [4], [6]];
     * scalar index 1 on axis 0 -> [3, 4] */
    bf_tensor x = th_tensor_f32((float[]){1, 2, 3, 4, 5, 6}, 2, (int64_t[]){3, 2}), out;
    bf_tensor ind = th_tensor_i64((int64_t[]){0, 2, -1, 1}, 2, (int64_t[]){2, 2});
    const bf_tensor *in[2] = {&x, &ind};
    run_ok("Gather", 13, NULL, 0, in, 2, &out, 1);
    expect_dims(&out, 3, (int64_t[]){2, 2, 2});
    assert_memory_equal(out.data, ((float[]){1, 2, 5, 6, 5, 6, 3, 4}), 32);
    th_free(&out, 1);
    bf_tensor i1 = th_tensor_i64((int64_t[]){1}, 1, (int64_t[]){1});
    bf__attr ax1 = th_attr_int("axis", 1);
    in[1] = &i1;
    run_ok("Gather", 13, &ax1, 1, in, 2, &out, 1);
    expect_dims(&out, 2, (int64_t[]){3, 1});
    assert_memory_equal(out.data, ((float[]){2, 4, 6}), 12);
    th_free(&out, 1);
    bf_tensor is = th_tensor_i64((int64_t[]){1}, 0, NULL);
    in[1] = &is;
    run_ok("Gather", 13, NULL, 0, in, 2, &out, 1);
    expect_dims(&out, 1, (int64_t[]){2});
    assert_memory_equal(out.data, ((float[]){3, 4}), 8);
    th_free(&out, 1);

    /* out of range at run time: names the value, its position and the range */
    bf_tensor bad = th_tensor_i64((int64_t[]){0, 1, 2, 3}, 2, (int64_t[]){2, 2});
    in[1] = &bad;
    expect_error("Gather", 13, NULL, 0, in, 2, 1, BF_ERANGE, "index 3", "indices[1, 1]", "size 3",
                 "-3..2", NULL);
    ((int64_t *)bad.data)[3] = -4;
    expect_error("Gather", 13, NULL, 0, in, 2, 1, BF_ERANGE, "index -4", "-3..2", NULL);
    /* bad axis, float indices, scalar data */
    bf__attr ax2 = th_attr_int("axis", 2);
    expect_error("Gather", 13, &ax2, 1, in, 2, 1, BF_ERANGE, "axis 2", NULL);
    in[1] = &x;
    expect_error("Gather", 13, NULL, 0, in, 2, 1, BF_EFORMAT, "'indices'", "float32", NULL);
    bf_tensor s = rnd(BF_F32, 0, NULL);
    in[0] = &s;
    in[1] = &is;
    expect_error("Gather", 13, NULL, 0, in, 2, 1, BF_ESHAPE, "scalar", NULL);
    in[1] = NULL;
    expect_error("Gather", 13, NULL, 0, in, 2, 1, BF_EINVAL, "input 1 is required", NULL);
    th_tensor_free(&s);
    th_tensor_free(&bad);
    th_tensor_free(&is);
    th_tensor_free(&i1);
    th_tensor_free(&ind);
    th_tensor_free(&x);

    /* an embedding lookup: few rows of a tall table */
    bf_tensor table = rnd(BF_F32, 2, (int64_t[]){100000, 16});
    bf_tensor tok = th_tensor_i64((int64_t[]){99999, 0, 4242, -1, 7}, 2, (int64_t[]){1, 5});
    in[0] = &table;
    in[1] = &tok;
    run_ok("Gather", 13, NULL, 0, in, 2, &out, 1);
    bf_tensor want = ref_gather(&table, &tok, 0);
    expect_same(&out, &want);
    th_free(&out, 1);
    th_tensor_free(&want);
    th_tensor_free(&tok);
    th_tensor_free(&table);

    /* random data, axes, indices rank 0..3 (int64 and int32, negative too) */
    for (int it = 0; it < 120; it++) {
        int r = (int)rand_in(1, 4), q = (int)rand_in(0, 3);
        int axis = (int)rand_in(0, r - 1);
        int64_t dims[8], idims[8];
        rand_dims(r, 1, 5, dims);
        rand_dims(q, 0, 3, idims);
        bf_tensor t = rnd(all_dtypes[it % 4], r, dims);
        bf_tensor id = mk(it % 3 ? BF_I64 : BF_I32, q, idims);
        for (int64_t j = 0; j < bf_tensor_numel(&id); j++) {
            int64_t v = rand_in(-dims[axis], dims[axis] - 1);
            if (id.dtype == BF_I64) ((int64_t *)id.data)[j] = v;
            else ((int32_t *)id.data)[j] = (int32_t)v;
        }
        bf__attr aa = th_attr_int("axis", rng() % 2 ? axis : axis - r);
        const bf_tensor *gin[2] = {&t, &id};
        run_ok("Gather", 13, &aa, 1, gin, 2, &out, 1);
        bf_tensor w = ref_gather(&t, &id, axis);
        expect_same(&out, &w);
        th_free(&out, 1);
        th_tensor_free(&w);
        th_tensor_free(&id);
        th_tensor_free(&t);
    }
}

/* ---- Slice ---- */

/* Per the spec, written out plainly: the input positions an axis keeps. */
static int ref_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *pos)
{
    if (dim == 0) return 0;
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
    } else {
        start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    }
    int n = 0;
    for (int64_t v = start; step > 0 ? v < end : v > end; v += step) pos[n++] = v;
    return n;
}

static bf_tensor ref_slice(const bf_tensor *x, int n, const int64_t *starts, const int64_t *ends,
                           const int64_t *axes, const int64_t *steps)
{
    int r = x->ndim;
    int64_t pos[8][64], dims[8], oi[8], xi[8];
    for (int d = 0; d < r; d++) {
        dims[d] = x->dims[d];
        for (int64_t k = 0; k < dims[d]; k++) pos[d][k] = k;
    }
    for (int i = 0; i < n; i++) {
        int a = (int)(axes[i] < 0 ? axes[i] + r : axes[i]);
        dims[a] = ref_slice_axis(x->dims[a], starts[i], ends[i], steps[i], pos[a]);
    }
    bf_tensor y = mk(x->dtype, r, dims);
    for (int64_t f = 0; f < bf_tensor_numel(&y); f++) {
        unravel(f, r, dims, oi);
        for (int d = 0; d < r; d++) xi[d] = pos[d][oi[d]];
        copy_elem(&y, f, x, ravel(r, x->dims, xi));
    }
    return y;
}

static void slice_op(void **state)
{
    (void)state;
    bf_tensor out;
    /* x = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
     * starts [1, 0] ends [3, INT64_MAX] steps [1, 2] -> [[4, 6], [8, 10]]
     * axes [1] starts [-1] ends [INT64_MIN] steps [-1] -> each row reversed
     * axes [0] starts [2] ends [-10] steps [-2] -> rows 2, 0 */
    int64_t v[12];
    for (int i = 0; i < 12; i++) v[i] = i;
    bf_tensor x = th_tensor_i64(v, 2, (int64_t[]){3, 4});
    bf_tensor st = ints(2, (int64_t[]){1, 0}), en = ints(2, (int64_t[]){3, INT64_MAX});
    bf_tensor stp = ints(2, (int64_t[]){1, 2});
    const bf_tensor *in[5] = {&x, &st, &en, NULL, &stp};
    run_ok("Slice", 13, NULL, 0, in, 5, &out, 1);
    expect_dims(&out, 2, (int64_t[]){2, 2});
    assert_memory_equal(out.data, ((int64_t[]){4, 6, 8, 10}), 32);
    th_free(&out, 1);
    th_tensor_free(&st);
    th_tensor_free(&en);
    th_tensor_free(&stp);

    bf_tensor ax = ints(1, (int64_t[]){1});
    st = ints(1, (int64_t[]){-1});
    en = ints(1, (int64_t[]){INT64_MIN});
    stp = ints(1, (int64_t[]){-1});
    const bf_tensor *in2[5] = {&x, &st, &en, &ax, &stp};
    run_ok("Slice", 13, NULL, 0, in2, 5, &out, 1);
    expect_dims(&out, 2, (int64_t[]){3, 4});
    assert_memory_equal(out.data, ((int64_t[]){3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8}), 96);
    th_free(&out, 1);
    th_tensor_free(&st);
    th_tensor_free(&en);
    th_tensor_free(&stp);
    th_tensor_free(&ax);

    ax = ints(1, (int64_t[]){0});
    st = ints(1, (int64_t[]){2});
    en = ints(1, (int64_t[]){-10});
    stp = ints(1, (int64_t[]){-2});
    run_ok("Slice", 13, NULL, 0, in2, 5, &out, 1);
    expect_dims(&out, 2, (int64_t[]){2, 4});
    assert_memory_equal(out.data, ((int64_t[]){8, 9, 10, 11, 0, 1, 2, 3}), 64);
    th_free(&out, 1);
    th_tensor_free(&stp);

    /* huge steps take one element: rows 2 only (INT64_MIN step), row 0 only (INT64_MAX) */
    stp = ints(1, (int64_t[]){INT64_MIN});
    run_ok("Slice", 13, NULL, 0, in2, 5, &out, 1);
    expect_dims(&out, 2, (int64_t[]){1, 4});
    assert_memory_equal(out.data, ((int64_t[]){8, 9, 10, 11}), 32);
    th_free(&out, 1);
    th_tensor_free(&stp);
    th_tensor_free(&st);
    th_tensor_free(&en);
    st = ints(1, (int64_t[]){0});
    en = ints(1, (int64_t[]){INT64_MAX});
    stp = ints(1, (int64_t[]){INT64_MAX});
    run_ok("Slice", 13, NULL, 0, in2, 5, &out, 1);
    expect_dims(&out, 2, (int64_t[]){1, 4});
    assert_memory_equal(out.data, ((int64_t[]){0, 1, 2, 3}), 32);
    th_free(&out, 1);
    th_tensor_free(&stp);

    /* start past the end -> empty */
    th_tensor_free(&st);
    st = ints(1, (int64_t[]){5});
    in2[4] = NULL;
    run_ok("Slice", 13, NULL, 0, in2, 5, &out, 1);
    expect_dims(&out, 2, (int64_t[]){0, 4});
    th_free(&out, 1);

    /* opset 9 attribute form: starts [1] ends [2] axes [1] -> column 1 */
    bf__attr at[3] = {th_attr_ints("starts", (int64_t[]){1}, 1), th_attr_ints("ends", (int64_t[]){2}, 1),
                      th_attr_ints("axes", (int64_t[]){1}, 1)};
    run_ok("Slice", 9, at, 3, in2, 1, &out, 1);
    expect_dims(&out, 2, (int64_t[]){3, 1});
    assert_memory_equal(out.data, ((int64_t[]){1, 5, 9}), 24);
    th_free(&out, 1);

    /* errors: zero step, duplicate axes, length mismatch, unknown starts, axis range */
    stp = ints(1, (int64_t[]){0});
    in2[4] = &stp;
    expect_error("Slice", 13, NULL, 0, in2, 5, 1, BF_EINVAL, "steps[0] is 0", NULL);
    th_tensor_free(&stp);
    th_tensor_free(&ax);
    ax = ints(2, (int64_t[]){0, -2});
    th_tensor_free(&st);
    th_tensor_free(&en);
    st = ints(2, (int64_t[]){0, 0});
    en = ints(2, (int64_t[]){1, 1});
    in2[4] = NULL;
    expect_error("Slice", 13, NULL, 0, in2, 5, 1, BF_EINVAL, "axis 0", "more than once", NULL);
    th_tensor_free(&ax);
    ax = ints(1, (int64_t[]){0});
    expect_error("Slice", 13, NULL, 0, in2, 5, 1, BF_ESHAPE, "axes has 1", "starts has 2", NULL);
    th_tensor_free(&ax);
    ax = ints(2, (int64_t[]){0, 2});
    expect_error("Slice", 13, NULL, 0, in2, 5, 1, BF_ERANGE, "axis 2", NULL);
    th_tensor_free(&en);
    en = ints(1, (int64_t[]){1});
    expect_error("Slice", 13, NULL, 0, in2, 3, 1, BF_ESHAPE, "starts has 2", "ends has 1", NULL);
    bf_tensor unknown = {.dtype = BF_I64, .ndim = 1, .dims = {1}};
    in2[1] = &unknown;
    expect_error("Slice", 13, NULL, 0, in2, 3, 1, BF_EUNSUPPORTED, "'starts'", NULL);
    expect_error("Slice", 13, at, 3, in2, 1, 1, BF_EINVAL, "opset 10", NULL);
    th_tensor_free(&ax);
    th_tensor_free(&st);
    th_tensor_free(&en);
    th_tensor_free(&x);

    /* random: every dtype, some axes, random (even silly) starts, ends, steps */
    for (int it = 0; it < 300; it++) {
        int r = (int)rand_in(1, 5);
        int64_t dims[8];
        rand_dims(r, 0, r > 3 ? 4 : 9, dims);
        bf_tensor t = rnd(all_dtypes[it % 4], r, dims);
        int n = (int)rand_in(1, r);
        int64_t starts[8], ends[8], axes[8], steps[8];
        int mark[8] = {0};
        int with_axes = rng() % 3 != 0, with_steps = rng() % 3 != 0;
        for (int i = 0; i < n; i++) {
            int a;
            if (with_axes) {
                do a = (int)rand_in(0, r - 1); while (mark[a]);
                mark[a] = 1;
                axes[i] = rng() % 2 ? a : a - r;
            } else {
                a = i;
                axes[i] = i;
            }
            int64_t dim = dims[a];
            starts[i] = rand_in(-dim - 2, dim + 2);
            ends[i] = rand_in(-dim - 2, dim + 2);
            steps[i] = with_steps ? rand_in(1, 3) * (rng() % 2 ? 1 : -1) : 1;
            if (rng() % 8 == 0) ends[i] = steps[i] > 0 ? INT64_MAX : INT64_MIN;
            if (rng() % 8 == 0) starts[i] = steps[i] > 0 ? INT64_MIN : INT64_MAX;
        }
        bf_tensor ts = ints(n, starts), te = ints(n, ends), ta = ints(n, axes), tp = ints(n, steps);
        const bf_tensor *sl_in[5] = {&t, &ts, &te, with_axes ? &ta : NULL, with_steps ? &tp : NULL};
        run_ok("Slice", 13, NULL, 0, sl_in, with_steps ? 5 : with_axes ? 4 : 3, &out, 1);
        bf_tensor w = ref_slice(&t, n, starts, ends, axes, steps);
        expect_same(&out, &w);
        th_free(&out, 1);
        th_tensor_free(&w);
        th_tensor_free(&ts);
        th_tensor_free(&te);
        th_tensor_free(&ta);
        th_tensor_free(&tp);
        th_tensor_free(&t);
    }
}

/* ---- Expand ---- */

static bf_tensor ref_expand(const bf_tensor *x, int n, const int64_t *shape)
{
    int r = x->ndim, R = r > n ? r : n;
    int64_t dims[8], oi[8], xi[8];
    for (int d = 0; d < R; d++) {
        int64_t a = d - (R - r) >= 0 ? x->dims[d - (R - r)] : 1;
        int64_t b = d - (R - n) >= 0 ? shape[d - (R - n)] : 1;
        dims[d] = a == 1 ? b : a;
    }
    bf_tensor y = mk(x->dtype, R, dims);
    for (int64_t f = 0; f < bf_tensor_numel(&y); f++) {
        unravel(f, R, dims, oi);
        for (int d = 0; d < r; d++) xi[d] = x->dims[d] == 1 ? 0 : oi[d + (R - r)];
        copy_elem(&y, f, x, ravel(r, x->dims, xi));
    }
    return y;
}

static void expand_op(void **state)
{
    (void)state;
    /* [[1], [2]] expanded to [2, 3] -> [[1, 1, 1], [2, 2, 2]];
     * to [2, 1, 1] (bidirectional) -> [2, 2, 1] */
    bf_tensor x = th_tensor_f32((float[]){1, 2}, 2, (int64_t[]){2, 1}), out;
    bf_tensor sh = ints(2, (int64_t[]){2, 3});
    const bf_tensor *in[2] = {&x, &sh};
    run_ok("Expand", 13, NULL, 0, in, 2, &out, 1);
    expect_dims(&out, 2, (int64_t[]){2, 3});
    assert_memory_equal(out.data, ((float[]){1, 1, 1, 2, 2, 2}), 24);
    th_free(&out, 1);
    th_tensor_free(&sh);
    sh = ints(3, (int64_t[]){2, 1, 1});
    in[1] = &sh;
    run_ok("Expand", 13, NULL, 0, in, 2, &out, 1);
    expect_dims(&out, 3, (int64_t[]){2, 2, 1});
    assert_memory_equal(out.data, ((float[]){1, 2, 1, 2}), 16);
    th_free(&out, 1);
    th_tensor_free(&sh);

    /* errors: incompatible shapes, negative dim */
    sh = ints(2, (int64_t[]){3, 3});
    expect_error("Expand", 13, NULL, 0, in, 2, 1, BF_ESHAPE, "[2, 1]", "[3, 3]", NULL);
    th_tensor_free(&sh);
    sh = ints(2, (int64_t[]){-1, 3});
    in[1] = &sh;
    expect_error("Expand", 13, NULL, 0, in, 2, 1, BF_EINVAL, "negative", NULL);
    th_tensor_free(&sh);
    th_tensor_free(&x);

    /* random: input dims 1 or the target's, ranks differing either way, scalars */
    for (int it = 0; it < 150; it++) {
        int r = (int)rand_in(0, 5), n = (int)rand_in(0, 5), R = r > n ? r : n;
        int64_t full[8], dims[8], shape[8];
        rand_dims(R, 0, 4, full);
        for (int d = 0; d < r; d++) dims[d] = rng() % 2 ? 1 : full[d + R - r];
        for (int d = 0; d < n; d++) shape[d] = rng() % 2 ? 1 : full[d + R - n];
        bf_tensor t = rnd(all_dtypes[it % 4], r, dims);
        bf_tensor s = ints(n, shape);
        const bf_tensor *ein[2] = {&t, &s};
        run_ok("Expand", 13, NULL, 0, ein, 2, &out, 1);
        bf_tensor w = ref_expand(&t, n, shape);
        expect_same(&out, &w);
        th_free(&out, 1);
        th_tensor_free(&w);
        th_tensor_free(&s);
        th_tensor_free(&t);
    }
    /* a transformer mask: [1, 1, S, S] -> [B, H, S, S] */
    bf_tensor m = rnd(BF_BOOL, 4, (int64_t[]){1, 1, 9, 9});
    bf_tensor s = ints(4, (int64_t[]){3, 4, 9, 9});
    const bf_tensor *min[2] = {&m, &s};
    run_ok("Expand", 13, NULL, 0, min, 2, &out, 1);
    bf_tensor w = ref_expand(&m, 4, (int64_t[]){3, 4, 9, 9});
    expect_same(&out, &w);
    th_free(&out, 1);
    th_tensor_free(&w);
    th_tensor_free(&s);
    th_tensor_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shape_op),        cmocka_unit_test(constant_op),
        cmocka_unit_test(constant_of_shape_op), cmocka_unit_test(identity_op),
        cmocka_unit_test(dropout_op),      cmocka_unit_test(flatten_op),
        cmocka_unit_test(reshape_op),      cmocka_unit_test(squeeze_unsqueeze_ops),
        cmocka_unit_test(transpose_op),    cmocka_unit_test(concat_op),
        cmocka_unit_test(gather_op),       cmocka_unit_test(slice_op),
        cmocka_unit_test(expand_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
