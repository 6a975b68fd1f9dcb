/* test_ops_elementwise: the reductions and zero-size tensors. */
#include "test_ops_elementwise.h"

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

void reduce_random(void **state)
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

void reduce_hand(void **state)
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
void reduce_middle_axis(void **state)
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

void reduce_errors(void **state)
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
void empty_tensors(void **state)
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
