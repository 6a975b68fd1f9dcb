/* test_ops_shape: Concat, Gather, Slice and Expand. */
#include "test_ops_shape.h"

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

void concat_op(void **state)
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

void gather_op(void **state)
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

void slice_op(void **state)
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

void expand_op(void **state)
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
