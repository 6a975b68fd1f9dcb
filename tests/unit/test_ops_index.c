/* The index family's guards, which the op cases (tests/ops/cases/index.py,
 * resize.py) cannot show because they only hold graphs that run: an index
 * out of range is a run-time error naming the node and the index; NonZero
 * on data known only at run time is a dynamic step (test_plan_dyn); hostile
 * repeats, pads and ranges are refused before anything is sized, and a huge
 * but well-formed output is refused by the plan's memory budget, never
 * allocated. Also the opset-18 forms onnx 1.12 cannot write (Split's
 * num_outputs, Pad's and Resize's axes), against values worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "bitflip/bitflip.h"
#include "onnx_graph.h"
#include "op_harness.h"

/* ---- single ops ---- */

static void expect_error(const char *op, int64_t opset, bf__attr *attrs, size_t na, const bf_tensor *const *in,
                         int n_in, int n_out, bf_status want, ...)
{
    bf_tensor out[4];
    bf_error err = {0};
    bf_status st = th_run_op(op, opset, attrs, na, in, n_in, out, n_out, &err);
    if (st != want) print_error("%s: status %d, message: %s\n", op, st, err.msg);
    assert_int_equal(st, want);
    va_list ap;
    va_start(ap, want);
    for (const char *frag; (frag = va_arg(ap, const char *));) {
        if (!strstr(err.msg, frag)) print_error("'%s' not in: %s\n", frag, err.msg);
        assert_non_null(strstr(err.msg, frag));
    }
    va_end(ap);
}

static bf_tensor i64s(int ndim, const int64_t *dims, const int64_t *v) { return th_tensor_i64(v, ndim, dims); }

static void index_out_of_range_is_a_run_error(void **state)
{
    (void)state;
    int64_t xd[2] = {3, 4}, id[2] = {2, 2}, one[1] = {1}, nd2[2] = {1, 2};
    bf_tensor x = th_tensor_rand(1, 2, xd);
    int64_t iv[4] = {0, 1, 4, 2};   /* 4 at [1, 0]: axis 1 has 4 */
    bf_tensor ind = i64s(2, id, iv);
    bf__attr ax1 = th_attr_int("axis", 1);
    const bf_tensor *ge[2] = {&x, &ind};
    expect_error("GatherElements", 13, &ax1, 1, ge, 2, 1, BF_ERANGE, "node 'test' (GatherElements)",
                 "index 4 at indices[1, 0] is out of range for axis 1 of size 4 (valid: -4..3)", NULL);
    float uv[4] = {0};
    bf_tensor upd = th_tensor_f32(uv, 2, id);
    const bf_tensor *se[3] = {&x, &ind, &upd};
    expect_error("ScatterElements", 13, &ax1, 1, se, 3, 1, BF_ERANGE, "(ScatterElements)", "index 4 at indices[1, 0]",
                 NULL);
    int64_t neg[2] = {-4, 0};   /* -4 on axis 0 of size 3 */
    bf_tensor t = i64s(2, nd2, neg);
    const bf_tensor *gn[2] = {&x, &t};
    expect_error("GatherND", 13, NULL, 0, gn, 2, 1, BF_ERANGE, "(GatherND)",
                 "index -4 at indices[0, 0] is out of range for axis 0 of size 3 (valid: -3..2)", NULL);
    float u4[4] = {0};
    int64_t ud[2] = {1, 4};
    bf_tensor u = th_tensor_f32(u4, 2, ud);
    int64_t big[1] = {3};
    bf_tensor t1 = i64s(2, (int64_t[2]){1, 1}, big);
    const bf_tensor *sn[3] = {&x, &t1, &u};
    expect_error("ScatterND", 13, NULL, 0, sn, 3, 1, BF_ERANGE, "(ScatterND)", "index 3 at indices[0, 0]", NULL);
    (void)one;
    th_tensor_free(&x);
    th_tensor_free(&ind);
    th_tensor_free(&upd);
    th_tensor_free(&t);
    th_tensor_free(&u);
    th_tensor_free(&t1);
}

static void hostile_values_are_refused_in_prepare(void **state)
{
    (void)state;
    int64_t xd[2] = {2, 3}, two[1] = {2}, four[1] = {4}, none[1] = {0};
    bf_tensor x = th_tensor_rand(2, 2, xd);
    int64_t reps[2] = {INT64_MAX / 2, 3};
    bf_tensor r = i64s(1, two, reps);
    const bf_tensor *tile[2] = {&x, &r};
    expect_error("Tile", 13, NULL, 0, tile, 2, 1, BF_EUNSUPPORTED, "(Tile)", "make axis 0 too large", NULL);
    int64_t reps2[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    bf_tensor r2 = i64s(1, two, reps2);
    const bf_tensor *tile2[2] = {&x, &r2};
    expect_error("Tile", 13, NULL, 0, tile2, 2, 1, BF_EUNSUPPORTED, "(Tile)", "too many elements", NULL);
    int64_t neg[2] = {1, -1};
    bf_tensor r3 = i64s(1, two, neg);
    const bf_tensor *tile3[2] = {&x, &r3};
    expect_error("Tile", 13, NULL, 0, tile3, 2, 1, BF_EINVAL, "repeats [1, -1] has a negative value", NULL);

    int64_t pads[4] = {0, INT64_MAX, 0, 0};
    bf_tensor pd = i64s(1, four, pads);
    const bf_tensor *pad[2] = {&x, &pd};
    expect_error("Pad", 13, NULL, 0, pad, 2, 1, BF_EUNSUPPORTED, "(Pad)", "too large", NULL);
    int64_t crop[4] = {-3, 0, 0, 0};
    bf_tensor pc = i64s(1, four, crop);
    const bf_tensor *pad2[2] = {&x, &pc};
    expect_error("Pad", 13, NULL, 0, pad2, 2, 1, BF_ESHAPE, "crop axis 0 of input [2, 3] below zero", NULL);
    int64_t refl[4] = {0, 3, 0, 0};
    bf_tensor pr = i64s(1, four, refl);
    const bf_tensor *pad3[2] = {&x, &pr};
    bf__attr reflect = th_attr_string("mode", "reflect");
    expect_error("Pad", 13, &reflect, 1, pad3, 2, 1, BF_EINVAL, "reflect pads 3, 0 of axis 1 must be less than", NULL);

    int64_t s = INT64_MIN, l = INT64_MAX, d = 1;
    bf_tensor ts = i64s(0, none, &s), tl = i64s(0, none, &l), td = i64s(0, none, &d);
    const bf_tensor *range[3] = {&ts, &tl, &td};
    expect_error("Range", 13, NULL, 0, range, 3, 1, BF_EUNSUPPORTED, "(Range)", "18446744073709551615 elements, too many",
                 NULL);
    int64_t z = 0;
    bf_tensor tz = i64s(0, none, &z);
    const bf_tensor *range0[3] = {&ts, &tl, &tz};
    expect_error("Range", 13, NULL, 0, range0, 3, 1, BF_EINVAL, "delta is 0", NULL);

    int64_t dep = (int64_t)1 << 62;
    bf_tensor tdep = i64s(0, none, &dep);
    float ov[2] = {0, 1};
    bf_tensor vals = th_tensor_f32(ov, 1, two);
    const bf_tensor *oh[3] = {&r, &tdep, &vals};
    expect_error("OneHot", 13, NULL, 0, oh, 3, 1, BF_EUNSUPPORTED, "(OneHot)", "is too large", NULL);

    bf__attr bs = th_attr_int("blocksize", (int64_t)1 << 40);
    int64_t x4d[4] = {1, 4, 2, 2};
    bf_tensor x4 = th_tensor_rand(3, 4, x4d);
    const bf_tensor *d2s[1] = {&x4};
    expect_error("DepthToSpace", 13, &bs, 1, d2s, 1, 1, BF_EINVAL, "blocksize 1099511627776 must be at least 1",
                 NULL);
    th_tensor_free(&x);
    th_tensor_free(&r);
    th_tensor_free(&r2);
    th_tensor_free(&r3);
    th_tensor_free(&pd);
    th_tensor_free(&pc);
    th_tensor_free(&pr);
    th_tensor_free(&ts);
    th_tensor_free(&tl);
    th_tensor_free(&td);
    th_tensor_free(&tz);
    th_tensor_free(&tdep);
    th_tensor_free(&vals);
    th_tensor_free(&x4);
}

static void expect_f32(const bf_tensor *t, int ndim, const int64_t *dims, const float *want)
{
    assert_int_equal(t->dtype, BF_F32);
    assert_int_equal(t->ndim, ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(t->dims[i], dims[i]);
    for (int64_t i = 0; i < bf_tensor_numel(t); i++) assert_true(((const float *)t->data)[i] == want[i]);
}

static void opset18_forms(void **state)
{
    (void)state;
    bf_error err = {0};
    /* Split num_outputs: 7 into chunks of ceil(7 / 3) = 3: 3, 3, 1 */
    int64_t d7[1] = {7};
    float x7[7] = {0, 1, 2, 3, 4, 5, 6};
    bf_tensor x = th_tensor_f32(x7, 1, d7);
    bf__attr num = th_attr_int("num_outputs", 3);
    const bf_tensor *in[1] = {&x};
    bf_tensor out[3];
    assert_int_equal(th_run_op("Split", 18, &num, 1, in, 1, out, 3, &err), BF_OK);
    expect_f32(&out[0], 1, (int64_t[]){3}, (float[]){0, 1, 2});
    expect_f32(&out[1], 1, (int64_t[]){3}, (float[]){3, 4, 5});
    expect_f32(&out[2], 1, (int64_t[]){1}, (float[]){6});
    th_free(out, 3);
    /* 5 into 4 chunks of 2 would need 6 for the first three: refused */
    int64_t d5[1] = {5};
    bf_tensor x2 = th_tensor_f32(x7, 1, d5);
    const bf_tensor *in2[1] = {&x2};
    bf__attr num4 = th_attr_int("num_outputs", 4);
    expect_error("Split", 18, &num4, 1, in2, 1, 4, BF_ESHAPE, "cannot split axis 0 of size 5 into 4 chunks", NULL);

    /* Pad with axes [-1]: pads [1, 2] on the last dim only, constant 9 */
    int64_t xd[2] = {2, 2}, two[1] = {2}, one[1] = {1};
    float xv[4] = {1, 2, 3, 4}, nine = 9;
    bf_tensor xp = th_tensor_f32(xv, 2, xd);
    int64_t pv[2] = {1, 2}, av[1] = {-1};
    bf_tensor pads = th_tensor_i64(pv, 1, two), axes = th_tensor_i64(av, 1, one);
    bf_tensor cv = th_tensor_f32(&nine, 0, NULL);
    const bf_tensor *pin[4] = {&xp, &pads, &cv, &axes};
    bf_tensor po[1];
    assert_int_equal(th_run_op("Pad", 18, NULL, 0, pin, 4, po, 1, &err), BF_OK);
    expect_f32(&po[0], 2, (int64_t[]){2, 5}, (float[]){9, 1, 2, 9, 9, 9, 3, 4, 9, 9});
    th_free(po, 1);

    /* Resize with axes [1]: sizes [4] on dim 1 only, nearest (asymmetric, floor) */
    int64_t sz[1] = {4};
    bf_tensor sizes = th_tensor_i64(sz, 1, one);
    bf__attr ra[4] = {th_attr_ints("axes", (int64_t[]){1}, 1), th_attr_string("coordinate_transformation_mode", "asymmetric"),
                      th_attr_string("nearest_mode", "floor"), th_attr_string("mode", "nearest")};
    const bf_tensor *rin[4] = {&xp, NULL, NULL, &sizes};
    bf_tensor ro[1];
    assert_int_equal(th_run_op("Resize", 18, ra, 4, rin, 4, ro, 1, &err), BF_OK);
    expect_f32(&ro[0], 2, (int64_t[]){2, 4}, (float[]){1, 1, 2, 2, 3, 3, 4, 4});
    th_free(ro, 1);
    bf__attr aa = th_attr_int("antialias", 1);
    expect_error("Resize", 18, &aa, 1, rin, 4, 1, BF_EUNSUPPORTED, "antialias=1 is not supported", NULL);
    th_tensor_free(&x);
    th_tensor_free(&x2);
    th_tensor_free(&xp);
    th_tensor_free(&pads);
    th_tensor_free(&axes);
    th_tensor_free(&cv);
    th_tensor_free(&sizes);
}

/* ---- random shapes against one-element-at-a-time references ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* Random bytes as elements of dt (bools 0 or 1). */
static bf_tensor rnd_tensor(bf_dtype dt, int ndim, const int64_t *dims)
{
    bf_tensor t = th_tensor(dt, NULL, ndim, dims);
    assert_non_null(t.data);
    unsigned char *p = t.data;
    for (size_t i = 0; i < bf_tensor_nbytes(&t); i++) p[i] = dt == BF_BOOL ? (unsigned char)(rnd() & 1) : (unsigned char)rnd();
    return t;
}

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

static const bf_dtype dtypes[] = {BF_F32, BF_I64, BF_I32, BF_BOOL};

/* Pad, every mode, pads in -2..3 (negative crops), against the spec's
 * definition per output element: constant outside, reflect about the edge
 * element, repeat the edge element. */
static void pad_random(void **state)
{
    (void)state;
    static const char *const modes[] = {"constant", "reflect", "edge"};
    for (int iter = 0; iter < 300; iter++) {
        int r = (int)rnd_in(1, 4), mode = (int)rnd_in(0, 2);
        bf_dtype dt = dtypes[rnd() % 4];
        int64_t dims[4], pads[8], odims[4];
        for (int d = 0; d < r; d++) {
            dims[d] = rnd_in(mode == 1 ? 2 : 1, 4);
            int64_t hi = mode == 1 ? dims[d] - 1 : 3;
            pads[d] = rnd_in(-1, hi);
            pads[r + d] = rnd_in(-1, hi);
            if (dims[d] + pads[d] + pads[r + d] < 0) pads[r + d] = 0;   /* cropped to nothing and past */
            odims[d] = dims[d] + pads[d] + pads[r + d];
        }
        bf_tensor x = rnd_tensor(dt, r, dims);
        int64_t np = 2 * r;
        bf_tensor pt = th_tensor_i64(pads, 1, &np);
        bf_tensor cv = rnd_tensor(dt, 0, NULL);
        bf__attr a = th_attr_string("mode", modes[mode]);
        const bf_tensor *in[3] = {&x, &pt, &cv};
        bf_tensor out[1];
        bf_error err = {0};
        if (th_run_op("Pad", 13, &a, 1, in, 3, out, 1, &err) != BF_OK) print_error("%s\n", err.msg);
        for (int d = 0; d < r; d++) assert_int_equal(out[0].dims[d], odims[d]);
        size_t es = bf_dtype_size(dt);
        int64_t n = bf_tensor_numel(&out[0]), oi[4], ii[4];
        for (int64_t k = 0; k < n; k++) {
            unravel(k, r, odims, oi);
            int outside = 0;
            for (int d = 0; d < r; d++) {
                int64_t i = oi[d] - pads[d];
                if (i < 0 || i >= dims[d]) {
                    if (mode == 0) outside = 1;
                    else if (mode == 1) i = i < 0 ? -i : 2 * (dims[d] - 1) - i;
                    else i = i < 0 ? 0 : dims[d] - 1;
                }
                ii[d] = i;
            }
            const unsigned char *want = outside ? cv.data : (const unsigned char *)x.data + ravel(r, dims, ii) * (int64_t)es;
            assert_memory_equal((const unsigned char *)out[0].data + k * (int64_t)es, want, es);
        }
        th_free(out, 1);
        th_tensor_free(&x);
        th_tensor_free(&pt);
        th_tensor_free(&cv);
    }
}

/* Tile: output element at idx reads input idx % dims. */
static void tile_random(void **state)
{
    (void)state;
    for (int iter = 0; iter < 200; iter++) {
        int r = (int)rnd_in(1, 4);
        bf_dtype dt = dtypes[rnd() % 4];
        int64_t dims[4], reps[4], odims[4], rr = r;
        for (int d = 0; d < r; d++) {
            dims[d] = rnd_in(1, 4);
            reps[d] = rnd_in(0, 3);
            odims[d] = dims[d] * reps[d];
        }
        bf_tensor x = rnd_tensor(dt, r, dims), rt = th_tensor_i64(reps, 1, &rr);
        const bf_tensor *in[2] = {&x, &rt};
        bf_tensor out[1];
        bf_error err = {0};
        assert_int_equal(th_run_op("Tile", 13, NULL, 0, in, 2, out, 1, &err), BF_OK);
        size_t es = bf_dtype_size(dt);
        int64_t n = bf_tensor_numel(&out[0]), oi[4], ii[4];
        assert_int_equal(out[0].ndim, r);
        for (int d = 0; d < r; d++) assert_int_equal(out[0].dims[d], odims[d]);
        for (int64_t k = 0; k < n; k++) {
            unravel(k, r, odims, oi);
            for (int d = 0; d < r; d++) ii[d] = oi[d] % dims[d];
            assert_memory_equal((const unsigned char *)out[0].data + k * (int64_t)es,
                                (const unsigned char *)x.data + ravel(r, dims, ii) * (int64_t)es, es);
        }
        th_free(out, 1);
        th_tensor_free(&x);
        th_tensor_free(&rt);
    }
}

/* DepthToSpace and SpaceToDepth are inverse permutations in each mode
 * (SpaceToDepth is the inverse of DCR), and CRD's element (n, c, h*b+i,
 * w*b+j) is input channel c*b*b + i*b + j, by the spec's reshapes. */
static void depth_space_random(void **state)
{
    (void)state;
    for (int iter = 0; iter < 100; iter++) {
        int64_t b = rnd_in(1, 3), dims[4] = {rnd_in(1, 2), b * b * rnd_in(1, 3), rnd_in(1, 3), rnd_in(1, 3)};
        bf_dtype dt = dtypes[rnd() % 4];
        size_t es = bf_dtype_size(dt);
        bf_tensor x = rnd_tensor(dt, 4, dims);
        bf__attr at[2] = {th_attr_int("blocksize", b), th_attr_string("mode", "CRD")};
        const bf_tensor *in[1] = {&x};
        bf_tensor y[1], z[1];
        bf_error err = {0};
        assert_int_equal(th_run_op("DepthToSpace", 13, at, 2, in, 1, y, 1, &err), BF_OK);
        int64_t n = bf_tensor_numel(&y[0]), oi[4], ii[4];
        for (int64_t k = 0; k < n; k++) {
            unravel(k, 4, y[0].dims, oi);
            ii[0] = oi[0];
            ii[1] = oi[1] * b * b + (oi[2] % b) * b + oi[3] % b;
            ii[2] = oi[2] / b;
            ii[3] = oi[3] / b;
            assert_memory_equal((const unsigned char *)y[0].data + k * (int64_t)es,
                                (const unsigned char *)x.data + ravel(4, dims, ii) * (int64_t)es, es);
        }
        th_free(y, 1);
        /* DCR then SpaceToDepth gives x back */
        assert_int_equal(th_run_op("DepthToSpace", 13, at, 1, in, 1, y, 1, &err), BF_OK);
        const bf_tensor *yin[1] = {&y[0]};
        assert_int_equal(th_run_op("SpaceToDepth", 13, at, 1, yin, 1, z, 1, &err), BF_OK);
        assert_memory_equal(z[0].data, x.data, bf_tensor_nbytes(&x));
        th_free(y, 1);
        th_free(z, 1);
        th_tensor_free(&x);
    }
}

/* ---- plans: models built with protobuf-c ---- */

typedef tg_graph builder;

static bf_model *load(builder *b, int opset)
{
    b->opset = opset;
    return tg_load(b, "test");
}

/* x[batch, 4] float; y = op(x, init...) with y of any shape */
static bf_model *one_op_on_input(builder *b, const char *op, int elem_y)
{
    int64_t xd[2] = {-1, 4};
    b->ins[b->n_ins++] = tg_value_info(b, "x", 1, 2, xd);
    b->outs[b->n_outs++] = tg_value_info(b, "y", elem_y, -1, NULL);
    (void)op;
    return load(b, 13);
}

static void nonzero_on_run_time_data_is_a_dynamic_step(void **state)
{
    (void)state;
    builder b = {0};
    tg_node(&b, "NonZero", "mask_idx", (const char *[]){"x"}, 1, "y");
    bf_model *m = one_op_on_input(&b, "NonZero", 7);
    bf_plan *p = NULL;
    bf_error err = {0};
    /* prepared on every run (test_plan_dyn checks the runs) */
    if (bf_plan_create(m, 2, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_plan_num_steps(p), 1);
    bf_plan_free(p);
    bf_model_free(m);
    tg_free(&b);
}

/* An output the budget sees before anything is allocated: refused with a
 * limit, counted by the estimate, and never asked of the allocator. */
static void expect_budget_refusal(bf_model *m, const char *node, const char *what, uint64_t at_least)
{
    bf_error err = {0};
    bf_plan_budget bud;
    bf_test_alloc_track_largest(1);
    assert_int_equal(bf_plan_estimate(m, 1, &bud, &err), BF_OK);
    assert_true(bud.total_bytes >= at_least);
    assert_string_equal(bud.largest.node, node);
    assert_string_equal(bud.largest.what, what);
    bf_plan *p = NULL;
    bf_plan_opts o = {.max_bytes = (uint64_t)1 << 30};
    assert_int_equal(bf_plan_create_opts(m, 1, &o, &p, &err), BF_ELIMIT);
    assert_null(p);
    assert_true(bf_test_alloc_largest() < ((size_t)2 << 20));
    bf_test_alloc_track_largest(0);
    char want[160];
    snprintf(want, sizeof want, "node '%s'", node);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, "over the limit of 1.0 GiB"));
}

static void huge_outputs_are_refused_by_the_budget(void **state)
{
    (void)state;
    /* Tile of a run-time input: [1, 4] x [2^16, 2^14] = 2^32 floats, 16 GiB */
    builder b = {0};
    int64_t two[1] = {2}, reps[2] = {(int64_t)1 << 16, (int64_t)1 << 14};
    tg_init_i64(&b, "reps", 1, two, reps);
    tg_node(&b, "Tile", "tile_bomb", (const char *[]){"x", "reps"}, 2, "y");
    bf_model *m = one_op_on_input(&b, "Tile", 1);
    expect_budget_refusal(m, "tile_bomb", "output", (uint64_t)16 << 30);
    bf_model_free(m);
    tg_free(&b);

    /* Range of constants: 2^31 int64, 16 GiB, folded at build time */
    int64_t z = 0, lim = (int64_t)1 << 31, one = 1;
    tg_init_i64(&b, "s", 0, NULL, &z);
    tg_init_i64(&b, "l", 0, NULL, &lim);
    tg_init_i64(&b, "d", 0, NULL, &one);
    tg_node(&b, "Range", "range_bomb", (const char *[]){"s", "l", "d"}, 3, "y");
    m = one_op_on_input(&b, "Range", 7);
    expect_budget_refusal(m, "range_bomb", "folded", (uint64_t)16 << 30);
    bf_model_free(m);
    tg_free(&b);

    /* Pad of a run-time input by 2^30 columns: 4 GiB per sample */
    int64_t four[1] = {4}, pads[4] = {0, 0, 0, (int64_t)1 << 30};
    tg_init_i64(&b, "pads", 1, four, pads);
    tg_node(&b, "Pad", "pad_bomb", (const char *[]){"x", "pads"}, 2, "y");
    m = one_op_on_input(&b, "Pad", 1);
    expect_budget_refusal(m, "pad_bomb", "output", (uint64_t)4 << 30);
    bf_model_free(m);
    tg_free(&b);

    /* Resize to [1, 2^31]: 8 GiB of output, and its tap tables (12 bytes
     * per output index of the resized dim) the largest buffer */
    int64_t sizes[2] = {1, (int64_t)1 << 31};
    tg_init_i64(&b, "sizes", 1, two, sizes);
    tg_node(&b, "Resize", "resize_bomb", (const char *[]){"x", "", "", "sizes"}, 4, "y");
    m = one_op_on_input(&b, "Resize", 1);
    expect_budget_refusal(m, "resize_bomb", "scratch", (uint64_t)8 << 30);
    bf_model_free(m);
    tg_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(index_out_of_range_is_a_run_error),
        cmocka_unit_test(hostile_values_are_refused_in_prepare),
        cmocka_unit_test(opset18_forms),
        cmocka_unit_test(pad_random),
        cmocka_unit_test(tile_random),
        cmocka_unit_test(depth_space_random),
        cmocka_unit_test(nonzero_on_run_time_data_is_a_dynamic_step),
        cmocka_unit_test(huge_outputs_are_refused_by_the_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
