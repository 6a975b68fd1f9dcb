/* Hostile graphs against the per-call decision: bf_model_bind_dims runs a
 * graph one eval-set image per call (fed as a batch of one) when its input
 * takes a batch of one or a symbolic batch and an output's size is data: a
 * NonZero, NonMaxSuppression, Unique or Compress the outputs depend on,
 * directly or inside an If or Loop at any depth (model/model_dims.c,
 * bf__model_data_shaped; exec/bind.c, bind_per_call). What each case must do:
 *
 * - a selection in an If's else-branch only: per call (either branch may
 *   run); the same graph with a Shape there instead stays batched; run on
 *   two images, each call sees a batch of one (Shape gives [1, 4], where a
 *   batched run would give [2, 4]);
 * - a selection in a Loop's body: per call;
 * - a selection nested 62 Ifs deep (the deepest the loader's default
 *   graph-depth limit, 64, lets a file be): per call; the walk follows the
 *   nesting as deep as the loader let it (it cut off at 8 before, which
 *   missed this one and ran the detector batched), and with the limit set
 *   to 200 a selection 150 deep is found too: the walk's recursion is bounded
 *   by the loader's documented limit (model.graph-depth), which refuses one
 *   graph deeper by name, before anything walks it, so there is no stack to
 *   overflow;
 * - a subgraph, or a subgraph's subgraph, reading a value nothing defines:
 *   refused at load, naming the value and the node;
 * - the input's batch dim a symbolic name, unnamed, or 1: per call; 0 (a
 *   batch of no images) or 2: not per call, so batched, which the evaluator
 *   refuses, naming the input (a fixed batch of 0) or the output whose
 *   shape is data and the If it comes from (2); -1: refused at load, naming
 *   the input and the dim. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "model/graph.h"
#include "onnx_graph.h"
#include "st_build.h"

static bf_status load_lim(tg_graph *g, int depth_limit, bf_model **m, bf_error *err)
{
    g->opset = 13;
    bf_load_limits lim = {.max_graph_depth = depth_limit};
    return tg_load_opts(g, "per_call", &lim, m, err);
}

/* x [batch, 4] and c = ReduceMax(x) > 0, the If's condition, in g */
static void x_and_cond(tg_graph *g, const int64_t *xdims)
{
    g->ins[g->n_ins++] = tg_value_info(g, "x", 1, 2, xdims);
    tg_init_f32(g, "zero", 0, NULL, (float[]){0});
    tg_attr_int(g, tg_node(g, "ReduceMax", "max", (const char *[]){"x"}, 1, "mx"), "keepdims", 0);
    tg_node(g, "Greater", "gt", (const char *[]){"mx", "zero"}, 2, "c");
}

/* y = If(c, then: Shape(x), else: `else_op`(x)): int64 either way */
static void if_graph(tg_graph *g, tg_graph *t, tg_graph *e, const int64_t *xdims, const char *else_op)
{
    x_and_cond(g, xdims);
    tg_node(t, "Shape", "then_shape", (const char *[]){"x"}, 1, "ty");
    t->outs[t->n_outs++] = tg_value_info(t, "ty", 7, -1, NULL);
    tg_node(e, else_op, "else_op", (const char *[]){"x"}, 1, "ey");
    e->outs[e->n_outs++] = tg_value_info(e, "ey", 7, -1, NULL);
    Onnx__NodeProto *n = tg_node(g, "If", "if", (const char *[]){"c"}, 1, "y");
    tg_attr_graph(g, n, "then_branch", tg_subgraph(g, t, "then"));
    tg_attr_graph(g, n, "else_branch", tg_subgraph(g, e, "else"));
    g->outs[g->n_outs++] = tg_value_info(g, "y", 7, -1, NULL);
}

/* An eval set of two images x [2, 4], all positive (the If takes its then-branch) */
static bf_dataset *two_images(void)
{
    static const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    th_st_tensor t = {"x", "F32", 2, {2, 4}, x, sizeof x};
    size_t len;
    uint8_t *buf = th_st_build(&t, 1, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, len, "two.safetensors", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    free(buf);
    return ds;
}

/* Binds m to the two images: 1 when it became a per-call model (a new
 * model, input dim 0 fixed at 1), 0 when it was left as it was. */
static int binds_per_call(bf_model **m, const bf_dataset *ds)
{
    bf_model *base = *m;
    bf_error err = {0};
    if (bf_model_bind_dims(m, ds, &err) != BF_OK) fail_msg("%s", err.msg);
    if (*m == base) return 0;
    assert_true((*m)->per_call);
    assert_int_equal(bf_model_input(*m, 0)->dims[0], 1);
    return 1;
}

static void else_branch_only(void **state)
{
    (void)state;
    bf_dataset *ds = two_images();
    const char *ops[2] = {"NonZero", "Shape"};
    for (int k = 0; k < 2; k++) {
        tg_graph g = {0}, t = {0}, e = {0};
        if_graph(&g, &t, &e, (int64_t[]){-1, 4}, ops[k]);
        bf_model *m = NULL;
        bf_error err = {0};
        if (load_lim(&g, 0, &m, &err) != BF_OK) fail_msg("%s", err.msg);
        tg_free(&t), tg_free(&e), tg_free(&g);
        int per_call = binds_per_call(&m, ds);
        assert_int_equal(per_call, k == 0);   /* NonZero in the else-branch: per call; Shape: batched */
        if (per_call) {
            bf_evaluator *ev = NULL;
            if (bf_evaluator_create(m, ds, NULL, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
            bf_eval_result r;
            if (bf_evaluator_run(ev, NULL, 0, &r, &err) != BF_OK) fail_msg("%s", err.msg);
            assert_int_equal(r.samples, 2);
            assert_int_equal(r.n_ragged, 1);
            /* each call's x is [1, 4]: Shape gives 1, 4 per image */
            for (int i = 0; i < 2; i++) {
                const int64_t *off = r.ragged[0].offsets;
                assert_int_equal(off[i + 1] - off[i], 2);
                assert_true(r.ragged[0].data[off[i]] == 1.0f && r.ragged[0].data[off[i] + 1] == 4.0f);
            }
            bf_evaluator_free(ev);
        }
        bf_model_free(m);
    }
    bf_dataset_free(ds);
}

/* y = Loop(M = 1, cond = "", v = x) whose body scans out NonZero(v) */
static void loop_body(void **state)
{
    (void)state;
    tg_graph g = {0}, b = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, 4});
    tg_init_i64(&g, "M", 0, NULL, (int64_t[]){1});
    b.ins[b.n_ins++] = tg_value_info(&b, "it", 7, 0, NULL);
    b.ins[b.n_ins++] = tg_value_info(&b, "cin", 9, 0, NULL);
    b.ins[b.n_ins++] = tg_value_info(&b, "vin", 1, -1, NULL);
    tg_node(&b, "Identity", "keep", (const char *[]){"cin"}, 1, "cout");
    tg_node(&b, "Identity", "carry", (const char *[]){"vin"}, 1, "vout");
    tg_node(&b, "NonZero", "select", (const char *[]){"vin"}, 1, "sel");
    b.outs[b.n_outs++] = tg_value_info(&b, "cout", 9, -1, NULL);
    b.outs[b.n_outs++] = tg_value_info(&b, "vout", 1, -1, NULL);
    b.outs[b.n_outs++] = tg_value_info(&b, "sel", 7, -1, NULL);
    Onnx__NodeProto *n = tg_node(&g, "Loop", "loop", (const char *[]){"M", "", "x"}, 3, "v_final");
    n->n_output = 2;
    n->output = tg_alloc(&g, 2 * sizeof *n->output);
    n->output[0] = tg_str(&g, "v_final");
    n->output[1] = tg_str(&g, "y");
    tg_attr_graph(&g, n, "body", tg_subgraph(&g, &b, "body"));
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 7, -1, NULL);
    bf_model *m = NULL;
    bf_error err = {0};
    if (load_lim(&g, 0, &m, &err) != BF_OK) fail_msg("%s", err.msg);
    tg_free(&b), tg_free(&g);
    bf_dataset *ds = two_images();
    assert_true(binds_per_call(&m, ds));
    bf_model_free(m);
    bf_dataset_free(ds);
}

/* y = If_0(c, then: If_1(c, then: ... If_{levels-1}(c, then: `inner`(x))));
 * every else-branch Shape(x). The main graph is graph 1 of the loader's
 * count, so `levels` Ifs make levels + 1 graphs. `reads` is what the
 * innermost node reads (x, or a name nothing defines). */
static bf_status nested(int levels, int depth_limit, const char *inner, const char *reads, bf_model **m, bf_error *err)
{
    tg_graph *gs = calloc((size_t)levels + 1, sizeof *gs), *es = calloc((size_t)levels, sizeof *es);
    assert_true(gs && es);
    x_and_cond(&gs[0], (int64_t[]){-1, 4});
    tg_node(&gs[levels], inner, "innermost", (const char *[]){reads}, 1, "z");
    gs[levels].outs[gs[levels].n_outs++] = tg_value_info(&gs[levels], "z", 7, -1, NULL);
    for (int k = levels - 1; k >= 0; k--) {
        char name[32], out[32], eout[32];
        snprintf(name, sizeof name, "if_%d", k);
        snprintf(out, sizeof out, k ? "y%d" : "y", k);
        snprintf(eout, sizeof eout, "e%d", k);
        tg_node(&es[k], "Shape", "else_shape", (const char *[]){"x"}, 1, eout);
        es[k].outs[es[k].n_outs++] = tg_value_info(&es[k], eout, 7, -1, NULL);
        Onnx__NodeProto *n = tg_node(&gs[k], "If", name, (const char *[]){"c"}, 1, out);
        tg_attr_graph(&gs[k], n, "then_branch", tg_subgraph(&gs[k], &gs[k + 1], "then"));
        tg_attr_graph(&gs[k], n, "else_branch", tg_subgraph(&gs[k], &es[k], "else"));
        if (k) gs[k].outs[gs[k].n_outs++] = tg_value_info(&gs[k], out, 7, -1, NULL);
    }
    gs[0].outs[gs[0].n_outs++] = tg_value_info(&gs[0], "y", 7, -1, NULL);
    bf_status st = load_lim(&gs[0], depth_limit, m, err);
    for (int k = 0; k <= levels; k++) tg_free(&gs[k]);
    for (int k = 0; k < levels; k++) tg_free(&es[k]);
    free(gs);
    free(es);
    return st;
}

static void deep_nesting(void **state)
{
    (void)state;
    bf_dataset *ds = two_images();
    static const struct { int levels, limit; const char *op; int per_call; } cases[] = {
        {62, 0, "NonZero", 1},     /* 63 graphs: within the default limit of 64 */
        {62, 0, "Shape", 0},       /* the same nesting, no selection: batched */
        {150, 200, "NonZero", 1},  /* a limit raised to 200: found 150 deep */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bf_model *m = NULL;
        bf_error err = {0};
        if (nested(cases[i].levels, cases[i].limit, cases[i].op, "x", &m, &err) != BF_OK) fail_msg("%s", err.msg);
        if (binds_per_call(&m, ds) != cases[i].per_call)
            fail_msg("%d Ifs deep, %s innermost: per call should be %d", cases[i].levels, cases[i].op,
                     cases[i].per_call);
        bf_model_free(m);
    }
    /* 64 Ifs are 65 graphs: refused at load (a limit), naming it and the node */
    bf_model *m = NULL;
    bf_error err = {0};
    assert_int_equal(nested(64, 0, "NonZero", "x", &m, &err), BF_ELIMIT);
    assert_null(m);
    if (!strstr(err.msg, "the limit is 64 (max_graph_depth)") || !strstr(err.msg, "if_63")) fail_msg("%s", err.msg);
    bf_dataset_free(ds);
}

static void missing_values(void **state)
{
    (void)state;
    /* the innermost of 3 nested Ifs reads a name nothing defines */
    bf_model *m = NULL;
    bf_error err = {0};
    assert_int_equal(nested(3, 0, "NonZero", "nope", &m, &err), BF_EFORMAT);
    assert_null(m);
    if (!strstr(err.msg, "node 'if_2' (If): its subgraph reads 'nope', which neither the subgraph nor the graph around "
                         "it defines"))
        fail_msg("%s", err.msg);
    /* one level: the else-branch reads it */
    tg_graph g = {0}, t = {0}, e = {0};
    if_graph(&g, &t, &e, (int64_t[]){-1, 4}, "NonZero");
    e.nodes[0]->input[0] = tg_str(&e, "missing");
    assert_int_equal(load_lim(&g, 0, &m, &err), BF_EFORMAT);
    tg_free(&t), tg_free(&e), tg_free(&g);
    if (!strstr(err.msg, "node 'if' (If): its subgraph reads 'missing'")) fail_msg("%s", err.msg);
}

/* The NonZero-in-the-else-branch graph with the input's dim 0 declared as
 * each of: a name, nothing, 1, 0, 2, -1 */
static void batch_dim_forms(void **state)
{
    (void)state;
    bf_dataset *ds = two_images();
    enum { NAMED, UNNAMED, ONE, ZERO, TWO, NEGATIVE };
    for (int form = NAMED; form <= NEGATIVE; form++) {
        tg_graph g = {0}, t = {0}, e = {0};
        int64_t d0 = form == ONE ? 1 : form == ZERO ? 0 : form == TWO ? 2 : -1;
        if_graph(&g, &t, &e, (int64_t[]){d0, 4}, "NonZero");
        Onnx__TensorShapeProto__Dimension *dim = g.ins[0]->type->tensor_type->shape->dim[0];
        if (form == UNNAMED) dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
        if (form == NEGATIVE) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = -1;
        }
        bf_model *m = NULL;
        bf_error err = {0};
        bf_status st = load_lim(&g, 0, &m, &err);
        tg_free(&t), tg_free(&e), tg_free(&g);
        if (form == NEGATIVE) {
            assert_int_equal(st, BF_EFORMAT);
            if (!strstr(err.msg, "graph input 'x' dim 0 is negative (-1)")) fail_msg("%s", err.msg);
            continue;
        }
        if (st != BF_OK) fail_msg("%s", err.msg);
        int per_call = binds_per_call(&m, ds);
        assert_int_equal(per_call, form == NAMED || form == UNNAMED || form == ONE);
        if (form == ZERO || form == TWO) {
            /* not a batch of one: run batched, which the evaluator refuses,
             * naming the input (a batch of 0) or the output whose shape is
             * data and the node it comes from (a batch of 2) */
            bf_evaluator *ev = NULL;
            st = bf_evaluator_create(m, ds, NULL, &ev, &err);
            if (st == BF_OK) fail_msg("dim 0 = %lld: an evaluator was made", (long long)d0);
            const char *want = form == ZERO ? "graph input 'x' has a fixed batch of 0"
                                            : "output 'y' has a shape that is data: it depends on node 'if' (If)";
            if (!strstr(err.msg, want)) fail_msg("dim 0 = %lld: %s", (long long)d0, err.msg);
        }
        bf_model_free(m);
    }
    bf_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(else_branch_only),
        cmocka_unit_test(loop_body),
        cmocka_unit_test(deep_nesting),
        cmocka_unit_test(missing_values),
        cmocka_unit_test(batch_dim_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
