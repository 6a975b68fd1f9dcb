/* Model loading and plans: models are built here as protobuf structs with the
 * generated protobuf-c code, packed to bytes, and loaded as a user's file
 * would be. Checks the graph checks (unsupported op, cycle, missing input,
 * external data, opset), hostile bytes (every truncation, random corruption),
 * allocation failure at every point, dynamic-batch shape folding, and that
 * a plan computes what a hand calculation says; symbolic dims past the
 * batch sized from an eval set. */
#include <math.h>
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
#include "st_build.h"

/* --- building models (onnx_graph.h): everything lives in one graph, freed per test */

typedef tg_graph builder;

/* A node on up to three inputs (NULL ends them early). */
static Onnx__NodeProto *node(builder *b, const char *op, const char *name, const char *in0, const char *in1,
                             const char *in2, const char *out)
{
    const char *ins[3] = {in0, in1, in2};
    return tg_node(b, op, name, ins, 3, out);
}

static uint8_t *pack(builder *b, size_t *len) { return tg_pack(b, "test", len); }

/* x[batch,3] -> Gemm(W[2,3], bias[2], transB) -> Relu -> y[batch,2] */
static const float W[6] = {1, 2, 3, -1, 0.5f, 0.25f};
static const float BIAS[2] = {0.5f, -4};

static void build_mlp(builder *b)
{
    int64_t xd[2] = {-1, 3}, yd[2] = {-1, 2}, wd[2] = {2, 3}, bd[1] = {2};
    b->ins[b->n_ins++] = tg_value_info(b, "x", 1, 2, xd);
    b->outs[b->n_outs++] = tg_value_info(b, "y", 1, 2, yd);
    tg_init_f32(b, "fc.weight", 2, wd, W);
    tg_init_f32(b, "fc.bias", 1, bd, BIAS);
    Onnx__NodeProto *g = node(b, "Gemm", "fc", "x", "fc.weight", "fc.bias", "h");
    tg_attr_int(b, g, "transB", 1);
    node(b, "Relu", "act", "h", NULL, NULL, "y");
}

static bf_status load(builder *b, bf_model **m, bf_error *err)
{
    size_t len;
    uint8_t *buf = pack(b, &len);
    bf_status st = bf_model_load_buffer(buf, len, "test.onnx", m, err);
    free(buf);
    return st;
}

static void mlp_runs_and_matches_hand_arithmetic(void **state)
{
    (void)state;
    builder b = {0};
    bf_model *m = NULL;
    bf_plan *p = NULL;
    bf_error err = {0};
    build_mlp(&b);
    assert_int_equal(load(&b, &m, &err), BF_OK);
    assert_int_equal(bf_model_num_inputs(m), 1);
    assert_int_equal(bf_model_num_params(m), 2);
    assert_int_equal(bf_model_param_elements(m), 8);
    assert_string_equal(bf_model_param(m, 0)->reader_op, "Gemm");
    assert_int_equal(bf_model_input(m, 0)->dims[0], -1);
    assert_string_equal(bf_model_input(m, 0)->dim_names[0], "batch");

    assert_int_equal(bf_plan_create(m, 2, &p, &err), BF_OK);
    float *x = bf_plan_input(p, 0)->data;
    /* sample 0: x = (1, 1, 1): h = (1+2+3+0.5, -1+0.5+0.25-4) = (6.5, -4.25) -> y = (6.5, 0)
     * sample 1: x = (0, 2, -1): h = (4-3+0.5, 1-0.25-4) = (1.5, -3.25) -> y = (1.5, 0) */
    const float xs[6] = {1, 1, 1, 0, 2, -1};
    memcpy(x, xs, sizeof xs);
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    const float *y = bf_plan_output(p, 0)->data;
    assert_float_equal(y[0], 6.5f, 1e-6);
    assert_float_equal(y[1], 0.0f, 0);
    assert_float_equal(y[2], 1.5f, 1e-6);
    assert_float_equal(y[3], 0.0f, 0);

    /* a fault lives in the plan only;
     * flip bit 30 of W[0][0]: 1.0 = 0x3f800000 -> 0x7f800000 = +inf */
    bf_bitflip f = {.param = 0, .index = 0, .bit = 30};
    float old_v, new_v;
    assert_int_equal(bf_plan_flip_bit(p, &f, &old_v, &new_v, &err), BF_OK);
    assert_true(old_v == 1.0f);
    assert_true(isinf(new_v));
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    assert_true(isinf(y[0]) && y[0] > 0);
    /* sample 1 has x[0] = 0, and 0 * inf is NaN in IEEE arithmetic (as in
     * PyTorch): the NaN reaches y, Relu keeps it */
    assert_true(isnan(y[2]));
    assert_true(((const float *)bf_model_param(m, 0)->tensor->data)[0] == 1.0f);   /* model untouched */
    assert_int_equal(bf_plan_flip_bit(p, &f, NULL, NULL, &err), BF_OK);           /* undo */
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    assert_float_equal(y[0], 6.5f, 1e-6);

    bf_plan_free(p);
    bf_model_free(m);
    tg_free(&b);
}

static void expect_load_error(builder *b, bf_status want, const char *needle1, const char *needle2)
{
    bf_model *m = NULL;
    bf_error err = {0};
    bf_status st = load(b, &m, &err);
    if (st != want || !strstr(err.msg, needle1) || (needle2 && !strstr(err.msg, needle2)))
        fail_msg("status %d, message: %s (wanted %d with '%s')", st, err.msg, want, needle1);
    assert_null(m);
}

static void unsupported_op_is_named(void **state)
{
    (void)state;
    builder b = {0};
    build_mlp(&b);
    node(&b, "MaxRoiPool", "roipool", "y", NULL, NULL, "z");
    expect_load_error(&b, BF_EUNSUPPORTED, "MaxRoiPool", "'roipool'");
    tg_free(&b);
}

static void missing_input_is_named(void **state)
{
    (void)state;
    builder b = {0};
    build_mlp(&b);
    node(&b, "Relu", "r2", "nowhere", NULL, NULL, "z");
    expect_load_error(&b, BF_EFORMAT, "'nowhere'", "'r2'");
    tg_free(&b);
}

static void cycle_is_named(void **state)
{
    (void)state;
    builder b = {0};
    int64_t xd[2] = {-1, 3};
    b.ins[b.n_ins++] = tg_value_info(&b, "x", 1, 2, xd);
    b.outs[b.n_outs++] = tg_value_info(&b, "c", 1, 2, xd);
    node(&b, "Add", "loop_a", "x", "c", NULL, "a");
    node(&b, "Relu", "loop_b", "a", NULL, NULL, "c");
    expect_load_error(&b, BF_EFORMAT, "cycle", "loop_");
    tg_free(&b);
}

static void external_data_is_refused(void **state)
{
    (void)state;
    builder b = {0};
    build_mlp(&b);
    Onnx__TensorProto *t = b.inits[0];
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    expect_load_error(&b, BF_EUNSUPPORTED, "external", "fc.weight");
    tg_free(&b);
}

static void wrong_data_length_is_refused(void **state)
{
    (void)state;
    builder b = {0};
    build_mlp(&b);
    b.inits[1]->n_float_data = 1;   /* bias dims say 2 */
    expect_load_error(&b, BF_EFORMAT, "fc.bias", "float_data");
    tg_free(&b);
}

static void old_opset_is_refused(void **state)
{
    (void)state;
    builder b = {0};
    build_mlp(&b);
    b.opset = 9;
    expect_load_error(&b, BF_EUNSUPPORTED, "opset 9", "11");
    tg_free(&b);
}

static void duplicate_output_is_refused(void **state)
{
    (void)state;
    builder b = {0};
    build_mlp(&b);
    node(&b, "Relu", "again", "h", NULL, NULL, "y");
    expect_load_error(&b, BF_EFORMAT, "'again'", "'y'");
    tg_free(&b);
}

static void shape_mismatch_names_node(void **state)
{
    (void)state;
    builder b = {0};
    int64_t xd[2] = {-1, 4}, yd[2] = {-1, 2}, wd[2] = {2, 3}, bd[1] = {2};   /* x has 4 features, W wants 3 */
    b.ins[b.n_ins++] = tg_value_info(&b, "x", 1, 2, xd);
    b.outs[b.n_outs++] = tg_value_info(&b, "y", 1, 2, yd);
    tg_init_f32(&b, "fc.weight", 2, wd, W);
    tg_init_f32(&b, "fc.bias", 1, bd, BIAS);
    Onnx__NodeProto *g = node(&b, "Gemm", "fc", "x", "fc.weight", "fc.bias", "y");
    tg_attr_int(&b, g, "transB", 1);
    bf_model *m = NULL;
    bf_plan *p = NULL;
    bf_error err = {0};
    assert_int_equal(load(&b, &m, &err), BF_OK);
    assert_int_not_equal(bf_plan_create(m, 4, &p, &err), BF_OK);
    assert_null(p);
    if (!strstr(err.msg, "'fc'") || !strstr(err.msg, "Gemm")) fail_msg("message: %s", err.msg);
    bf_model_free(m);
    tg_free(&b);
}

static void every_truncation_fails_cleanly(void **state)
{
    (void)state;
    builder b = {0};
    build_mlp(&b);
    size_t len;
    uint8_t *buf = pack(&b, &len);
    int offsets_named = 0;
    for (size_t cut = 0; cut < len; cut++) {
        bf_model *m = NULL;
        bf_error err = {0};
        uint8_t *copy = malloc(cut + 1);   /* exact size, so ASan sees any overread */
        memcpy(copy, buf, cut);
        bf_status st = bf_model_load_buffer(copy, cut, "cut.onnx", &m, &err);
        free(copy);
        if (st == BF_OK) fail_msg("a model cut to %zu of %zu bytes loaded", cut, len);
        assert_null(m);
        assert_true(err.msg[0] != '\0');
        offsets_named += strstr(err.msg, "byte offset") != NULL;
    }
    /* most cuts land inside a field, and those name where */
    assert_true(offsets_named > (int)len / 2);
    free(buf);
    tg_free(&b);
}

static void random_corruption_never_crashes(void **state)
{
    (void)state;
    builder b = {0};
    build_mlp(&b);
    size_t len;
    uint8_t *buf = pack(&b, &len);
    uint8_t *copy = malloc(len);
    uint64_t s = 12345;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(copy, buf, len);
        for (int k = 0; k < 1 + iter % 4; k++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            copy[s % len] ^= (uint8_t)(1u << ((s >> 32) % 8));
        }
        bf_model *m = NULL;
        bf_error err = {0};
        if (bf_model_load_buffer(copy, len, "bad.onnx", &m, &err) == BF_OK) {
            /* a flip in a float's bytes is still a valid model: it must also plan or fail cleanly */
            bf_plan *p = NULL;
            if (bf_plan_create(m, 2, &p, &err) == BF_OK) {
                assert_int_equal(bf_plan_run(p, &err), BF_OK);
                bf_plan_free(p);
            }
            bf_model_free(m);
        } else {
            assert_true(err.msg[0] != '\0');
        }
    }
    free(copy);
    free(buf);
    tg_free(&b);
}

static void allocation_failures_are_clean(void **state)
{
    (void)state;
    builder b = {0};
    build_mlp(&b);
    size_t len;
    uint8_t *buf = pack(&b, &len);
    int succeeded = 0;
    for (long n = 0; n < 400 && !succeeded; n++) {
        bf_model *m = NULL;
        bf_plan *p = NULL;
        bf_error err = {0};
        bf_test_alloc_fail_after(n);
        bf_status st = bf_model_load_buffer(buf, len, "t.onnx", &m, &err);
        if (st == BF_OK) st = bf_plan_create(m, 3, &p, &err);
        if (st == BF_OK) st = bf_plan_run(p, &err);
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) succeeded = 1;
        else if (st != BF_ENOMEM) fail_msg("allocation %ld failing gave status %d: %s", n, st, err.msg);
        bf_plan_free(p);
        bf_model_free(m);
    }
    assert_true(succeeded);
    free(buf);
    tg_free(&b);
}

/* What PyTorch exports for x.view(x.size(0), -1) style code:
 * Shape(x) -> Gather(0) -> Unsqueeze -> Concat([b], [6]) -> Reshape(x). The
 * plan must fold all of it, leaving only the Reshape, for any batch. */
static void dynamic_batch_reshape_is_folded(void **state)
{
    (void)state;
    builder b = {0};
    int64_t xd[3] = {-1, 2, 3}, yd[2] = {-1, 6}, one[1] = {1}, zero = 0, six = 6;
    b.ins[b.n_ins++] = tg_value_info(&b, "x", 1, 3, xd);
    b.outs[b.n_outs++] = tg_value_info(&b, "y", 1, 2, yd);
    tg_init_i64(&b, "idx0", 0, NULL, &zero);
    tg_init_i64(&b, "axes0", 1, one, &zero);
    tg_init_i64(&b, "six", 1, one, &six);
    node(&b, "Shape", "shape", "x", NULL, NULL, "s");
    Onnx__NodeProto *gather = node(&b, "Gather", "batch", "s", "idx0", NULL, "b");
    tg_attr_int(&b, gather, "axis", 0);
    node(&b, "Unsqueeze", "unsq", "b", "axes0", NULL, "b1");
    Onnx__NodeProto *cat = node(&b, "Concat", "cat", "b1", "six", NULL, "shape2");
    tg_attr_int(&b, cat, "axis", 0);
    node(&b, "Reshape", "reshape", "x", "shape2", NULL, "y");

    bf_model *m = NULL;
    bf_error err = {0};
    if (load(&b, &m, &err) != BF_OK) fail_msg("%s", err.msg);
    for (int64_t batch = 1; batch <= 5; batch += 2) {
        bf_plan *p = NULL;
        if (bf_plan_create(m, batch, &p, &err) != BF_OK) fail_msg("%s", err.msg);
        assert_int_equal(bf_plan_num_steps(p), 1);
        const bf_tensor *y = bf_plan_output(p, 0);
        assert_int_equal(y->ndim, 2);
        assert_int_equal(y->dims[0], batch);
        assert_int_equal(y->dims[1], 6);
        float *x = bf_plan_input(p, 0)->data;
        for (int64_t i = 0; i < batch * 6; i++) x[i] = (float)i;
        assert_int_equal(bf_plan_run(p, &err), BF_OK);
        for (int64_t i = 0; i < batch * 6; i++) assert_true(((const float *)y->data)[i] == (float)i);
        bf_plan_free(p);
    }
    bf_model_free(m);
    tg_free(&b);
}

static void fixed_batch_mismatch_is_explained(void **state)
{
    (void)state;
    builder b = {0};
    int64_t xd[2] = {1, 3}, yd[2] = {1, 3};
    b.ins[b.n_ins++] = tg_value_info(&b, "x", 1, 2, xd);
    b.outs[b.n_outs++] = tg_value_info(&b, "y", 1, 2, yd);
    node(&b, "Relu", "r", "x", NULL, NULL, "y");
    bf_model *m = NULL;
    bf_plan *p = NULL;
    bf_error err = {0};
    assert_int_equal(load(&b, &m, &err), BF_OK);
    assert_int_equal(bf_plan_create(m, 4, &p, &err), BF_ESHAPE);
    assert_non_null(strstr(err.msg, "fixed batch of 1"));
    assert_int_equal(bf_plan_create(m, 1, &p, &err), BF_OK);
    bf_plan_free(p);
    bf_model_free(m);
    tg_free(&b);
}

/* A one-image graph (images [3, H, W], H and W symbolic, as a detector's
 * export at dynamic_axes) against the eval set's [N, 3, H, W]: the sizes
 * come from the eval tensor's dims past N, so the evaluator runs it a
 * sample at a time with output [3, 5, 7]. An eval set of neither rank is
 * left to evaluation, which names the tensor. */
static void one_sample_symbolic_dims_are_bound(void **state)
{
    (void)state;
    builder b = {0};
    int64_t d[3] = {3, -1, -1};
    Onnx__ValueInfoProto *in = tg_value_info(&b, "images", 1, 3, d);
    in->type->tensor_type->shape->dim[1]->dim_param = tg_str(&b, "height");
    in->type->tensor_type->shape->dim[2]->dim_param = tg_str(&b, "width");
    b.ins[b.n_ins++] = in;
    b.outs[b.n_outs++] = tg_value_info(&b, "y", 1, 3, d);
    node(&b, "Relu", "r", "images", NULL, NULL, "y");
    bf_model *m = NULL;
    bf_error err = {0};
    assert_int_equal(load(&b, &m, &err), BF_OK);
    static float zeros[2 * 3 * 5 * 7];
    th_st_tensor t = {"images", "F32", 4, {2, 3, 5, 7}, zeros, sizeof zeros};
    size_t len;
    uint8_t *buf = th_st_build(&t, 1, &len);
    bf_dataset *ds = NULL;
    assert_int_equal(bf_dataset_load_buffer(buf, len, "one.safetensors", &ds, &err), BF_OK);
    free(buf);
    bf_model *base = m;
    assert_int_equal(bf_model_bind_dims(&m, ds, &err), BF_OK);
    assert_ptr_not_equal(m, base);
    bf_evaluator *ev = NULL;
    assert_int_equal(bf_evaluator_create(m, ds, NULL, &ev, &err), BF_OK);
    assert_true(bf_evaluator_unbatched(ev));
    bf_eval_result r;
    assert_int_equal(bf_evaluator_run(ev, NULL, 0, &r, &err), BF_OK);
    assert_int_equal(r.samples, 2);
    assert_int_equal(r.n_ragged, 1);
    assert_int_equal(r.ragged[0].offsets[1], 3 * 5 * 7);   /* one image's y: [3, 5, 7] */
    assert_int_equal(r.ragged[0].row_elems, 5 * 7);
    bf_evaluator_free(ev);
    bf_dataset_free(ds);
    bf_model_free(m);

    /* [N, 105]: neither one sample's rank nor the batch's; left alone, and evaluation says which tensor */
    assert_int_equal(load(&b, &m, &err), BF_OK);
    th_st_tensor t3 = {"images", "F32", 2, {2, 105}, zeros, sizeof zeros};
    buf = th_st_build(&t3, 1, &len);
    assert_int_equal(bf_dataset_load_buffer(buf, len, "flat.safetensors", &ds, &err), BF_OK);
    free(buf);
    base = m;
    assert_int_equal(bf_model_bind_dims(&m, ds, &err), BF_OK);
    assert_ptr_equal(m, base);
    assert_int_not_equal(bf_evaluator_create(m, ds, NULL, &ev, &err), BF_OK);
    assert_non_null(strstr(err.msg, "images"));
    bf_dataset_free(ds);
    bf_model_free(m);
    tg_free(&b);
}

static void missing_file_names_path(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_error err = {0};
    assert_int_equal(bf_model_load_file("/nonexistent/model.onnx", &m, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "/nonexistent/model.onnx"));
    assert_int_equal(bf_model_load_buffer("", 0, "empty.onnx", &m, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "empty"));
}

/* A safetensors file of float32 zeros, one tensor per (name, rows, cols). */
static bf_dataset *zeros_set(int n, const char *const *names, const int64_t (*dims)[2])
{
    char header[512];
    size_t off = 0, data = 0;
    int w = snprintf(header, sizeof header, "{");
    off = (size_t)w;
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)(dims[i][0] * dims[i][1]) * 4;
        w = snprintf(header + off, sizeof header - off, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                     i ? "," : "", names[i], (long long)dims[i][0], (long long)dims[i][1], data, data + bytes);
        off += (size_t)w;
        data += bytes;
    }
    off += (size_t)snprintf(header + off, sizeof header - off, "}");
    size_t len = 8 + off + data;
    uint8_t *buf = calloc(1, len);
    assert_non_null(buf);
    for (int k = 0; k < 8; k++) buf[k] = (uint8_t)((uint64_t)off >> (8 * k));
    memcpy(buf + 8, header, off);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, len, "zeros.safetensors", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    free(buf);
    return ds;
}

/* x[batch, seq] -> Relu -> y: a plan refuses the symbolic seq until an eval
 * set sizes it (bf_model_bind_dims), then has the eval set's length; two
 * inputs sharing the symbol must agree. */
static void symbolic_dims_are_bound_from_the_eval_set(void **state)
{
    (void)state;
    builder b = {0};
    int64_t xd[2] = {-1, -1};
    b.ins[b.n_ins++] = tg_value_info(&b, "x", 1, 2, xd);
    b.ins[b.n_ins++] = tg_value_info(&b, "z", 1, 2, xd);
    b.outs[b.n_outs++] = tg_value_info(&b, "y", 1, 2, xd);
    node(&b, "Add", "add", "x", "z", NULL, "s");
    node(&b, "Relu", "r", "s", NULL, NULL, "y");
    bf_model *m = NULL;
    bf_plan *p = NULL;
    bf_error err = {0};
    assert_int_equal(load(&b, &m, &err), BF_OK);
    assert_int_equal(bf_plan_create(m, 3, &p, &err), BF_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "dim 1 is symbolic"));

    const char *names[2] = {"x", "z"};
    const int64_t same[2][2] = {{3, 5}, {3, 5}}, differ[2][2] = {{3, 5}, {3, 7}};
    bf_dataset *ds = zeros_set(2, names, same);
    bf_model *base = m;
    assert_int_equal(bf_model_bind_dims(&m, ds, &err), BF_OK);
    assert_ptr_not_equal(m, base);   /* a derived model owning the loaded one */
    assert_int_equal(bf_plan_create(m, 3, &p, &err), BF_OK);
    assert_int_equal(bf_plan_output(p, 0)->dims[0], 3);
    assert_int_equal(bf_plan_output(p, 0)->dims[1], 5);
    bf_plan_free(p);
    bf_dataset_free(ds);

    bf_model_free(m);   /* frees the loaded model too (ASan would see a leak) */

    assert_int_equal(load(&b, &m, &err), BF_OK);
    base = m;
    ds = zeros_set(2, names, differ);
    assert_int_equal(bf_model_bind_dims(&m, ds, &err), BF_ESHAPE);
    assert_ptr_equal(m, base);
    assert_non_null(strstr(err.msg, "'z'"));
    assert_non_null(strstr(err.msg, "fed 7"));
    assert_non_null(strstr(err.msg, "is 5"));
    bf_dataset_free(ds);
    bf_model_free(m);
    tg_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mlp_runs_and_matches_hand_arithmetic),
        cmocka_unit_test(unsupported_op_is_named),
        cmocka_unit_test(missing_input_is_named),
        cmocka_unit_test(cycle_is_named),
        cmocka_unit_test(external_data_is_refused),
        cmocka_unit_test(wrong_data_length_is_refused),
        cmocka_unit_test(old_opset_is_refused),
        cmocka_unit_test(duplicate_output_is_refused),
        cmocka_unit_test(shape_mismatch_names_node),
        cmocka_unit_test(every_truncation_fails_cleanly),
        cmocka_unit_test(random_corruption_never_crashes),
        cmocka_unit_test(allocation_failures_are_clean),
        cmocka_unit_test(dynamic_batch_reshape_is_folded),
        cmocka_unit_test(fixed_batch_mismatch_is_explained),
        cmocka_unit_test(missing_file_names_path),
        cmocka_unit_test(symbolic_dims_are_bound_from_the_eval_set),
        cmocka_unit_test(one_sample_symbolic_dims_are_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
