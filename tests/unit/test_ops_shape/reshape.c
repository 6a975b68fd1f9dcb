/* test_ops_shape: Flatten, Reshape, Squeeze, Unsqueeze and Transpose. */
#include "test_ops_shape.h"

/* ---- Flatten, Reshape, Squeeze, Unsqueeze: same bytes, new shape ---- */

static bf_tensor with_shape(const bf_tensor *x, int ndim, const int64_t *dims)
{
    bf_tensor t = mk(x->dtype, ndim, dims);
    assert_int_equal(bf_tensor_nbytes(&t), bf_tensor_nbytes(x));
    if (bf_tensor_nbytes(x)) memcpy(t.data, x->data, bf_tensor_nbytes(x));
    return t;
}

void flatten_op(void **state)
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

void reshape_op(void **state)
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

void squeeze_unsqueeze_ops(void **state)
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

void transpose_op(void **state)
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
