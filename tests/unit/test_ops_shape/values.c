/* test_ops_shape: Shape, Constant, ConstantOfShape, Identity and Dropout. */
#include "test_ops_shape.h"

/* ---- Shape ---- */

void shape_op(void **state)
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

void constant_op(void **state)
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

void constant_of_shape_op(void **state)
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

void identity_op(void **state)
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

void dropout_op(void **state)
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
