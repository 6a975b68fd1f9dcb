/* Dynamic steps (core/src/exec/plan_dyn.c, docs/ENGINE.md "Dynamic steps"):
 * a NonZero of a graph input is prepared on every run, and so is every step
 * reading what it computes (a Shape of it included); the outputs take each
 * run's shape; a run whose shapes an earlier run had allocates nothing; the
 * run-time arena's limit fails a run naming the step; a value fault on a
 * dynamic value applies each run, its element checked then. The op cases
 * (tests/ops/cases/dynamic.py) check the values against PyTorch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "bitflip/bitflip.h"
#include "bitflip/fault.h"
#include "onnx_graph.h"
#include "exec/plan_impl.h"

static bf_model *load_tie(tg_graph *g, int opset, int tie_order)
{
    g->opset = opset;
    bf_model *m = NULL;
    bf_error err = {0};
    bf_load_limits lim = {.tie_order = tie_order};
    if (tg_load_opts(g, "dyn", &lim, &m, &err) != BF_OK) fail_msg("%s", err.msg);
    return m;
}

static bf_model *load(tg_graph *g, int opset) { return load_tie(g, opset, BF_TIE_ORDER_ONNX); }

/* x [2, 4] float -> y = NonZero(x) [2, count], s = Shape(y) */
static bf_model *nonzero_model(tg_graph *g)
{
    g->ins[g->n_ins++] = tg_value_info(g, "x", 1, 2, (int64_t[]){-1, 4});
    tg_node(g, "NonZero", "nz", (const char *[]){"x"}, 1, "y");
    tg_node(g, "Shape", "shape_of_y", (const char *[]){"y"}, 1, "s");
    g->outs[g->n_outs++] = tg_value_info(g, "y", 7, -1, NULL);
    g->outs[g->n_outs++] = tg_value_info(g, "s", 7, -1, NULL);
    return load(g, 13);
}

/* feeds x, runs, checks y against the indices of x's non-zeros in row-major order */
static void run_and_check(bf_plan *p, const float *x)
{
    bf_error err = {0};
    memcpy(bf_plan_input(p, 0)->data, x, 8 * sizeof *x);
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("run: %s", err.msg);
    int64_t want[2][8], n = 0;
    for (int i = 0; i < 8; i++)
        if (x[i] != 0) want[0][n] = i / 4, want[1][n] = i % 4, n++;
    const bf_tensor *y = bf_plan_output(p, 0), *s = bf_plan_output(p, 1);
    assert_int_equal(y->dtype, BF_I64);
    assert_int_equal(y->ndim, 2);
    assert_int_equal(y->dims[0], 2);
    assert_int_equal(y->dims[1], n);
    const int64_t *yd = y->data, *sd = s->data;
    for (int64_t k = 0; k < n; k++) {
        assert_int_equal(yd[k], want[0][k]);
        assert_int_equal(yd[n + k], want[1][k]);
    }
    assert_int_equal(s->dims[0], 2);
    assert_int_equal(sd[0], 2);
    assert_int_equal(sd[1], n);
}

static void nonzero_of_an_input_runs_per_run(void **state)
{
    (void)state;
    tg_graph g = {0};
    bf_model *m = nonzero_model(&g);
    bf_plan *p = NULL;
    bf_error err = {0};
    /* an estimate counts no dynamic value and does not fail */
    bf_plan_budget bud;
    if (bf_plan_estimate(m, 2, &bud, &err) != BF_OK) fail_msg("%s", err.msg);
    if (bf_plan_create(m, 2, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    /* NonZero and the Shape reading it are both steps, run at run time */
    assert_int_equal(bf_plan_num_steps(p), 2);
    static const float a[8] = {0, 1, 0, 2, 0, 0, 3, 0}, b[8] = {1, 1, 0, 2, 0, 5, 3, 0}, z[8] = {0};
    run_and_check(p, a);
    run_and_check(p, b);
    run_and_check(p, z);   /* nothing kept: y [2, 0] */
    run_and_check(p, a);
    bf_plan_free(p);
    bf_model_free(m);
    tg_free(&g);
}

/* NonZero's scans (one loop per dtype; bytes skipped 8 at a time where all
 * are 0: ops/index_make.c) against a plain reference: every element tested
 * by its dtype's rule, row-major, the indices spread over the dims. Inputs
 * x [B, 3, 13] of elem type `elem` (1 float, 6 int32, 7 int64, 9 bool, 2
 * uint8), B = 3: 117 elements, so words of 8 bytes straddle rows and the
 * last is partial; patterns sparse, dense, and set at word edges. */
static void nonzero_scans_match_a_plain_reference(void **state)
{
    (void)state;
    static const int elems[] = {1, 6, 7, 9, 2};
    enum { N = 3 * 3 * 13 };
    for (size_t e = 0; e < sizeof elems / sizeof *elems; e++) {
        tg_graph g = {0};
        g.ins[g.n_ins++] = tg_value_info(&g, "x", elems[e], 3, (int64_t[]){-1, 3, 13});
        tg_node(&g, "NonZero", "nz", (const char *[]){"x"}, 1, "y");
        g.outs[g.n_outs++] = tg_value_info(&g, "y", 7, -1, NULL);
        bf_model *m = load(&g, 13);
        bf_plan *p = NULL;
        bf_error err = {0};
        if (bf_plan_create(m, 3, &p, &err) != BF_OK) fail_msg("%s", err.msg);
        bf_tensor *x = bf_plan_input(p, 0);
        size_t es = bf_dtype_size(x->dtype);
        assert_int_equal(bf_tensor_numel(x), N);
        for (int pat = 0; pat < 6; pat++) {
            int on[N];
            unsigned r = 12345u + (unsigned)pat;
            for (int i = 0; i < N; i++) {
                r = r * 1103515245u + 12345u;
                on[i] = pat == 0 ? 0 : pat == 1 ? 1 : pat == 2 ? (r >> 16) % 17 == 0 : pat == 3 ? (r >> 16) % 2
                        : pat == 4 ? i % 8 == 7 || i % 8 == 0 : i == N - 1;
            }
            unsigned char *d = x->data;
            for (int i = 0; i < N; i++) {
                /* a non-zero of each dtype, and zeros with bits set where they may be (-0) */
                float f = on[i] ? (i % 3 ? -2.5f : 1e-40f) : (i % 2 ? -0.0f : 0.0f);
                int64_t v = on[i] ? (i % 2 ? -(int64_t)i - 1 : (int64_t)1 << 40 | 1) : 0;
                int32_t w = on[i] ? (int32_t)(i + 1) * (i % 2 ? -1 : 1) : 0;
                uint8_t b = on[i] ? (uint8_t)(elems[e] == 9 ? 1 : i % 255 + 1) : 0;
                const void *src = elems[e] == 1 ? (const void *)&f : elems[e] == 7 ? (const void *)&v
                                  : elems[e] == 6 ? (const void *)&w : (const void *)&b;
                memcpy(d + (size_t)i * es, src, es);
            }
            if (bf_plan_run(p, &err) != BF_OK) fail_msg("run: %s", err.msg);
            const bf_tensor *y = bf_plan_output(p, 0);
            int64_t n = 0;
            for (int i = 0; i < N; i++) n += on[i];
            assert_int_equal(y->ndim, 2);
            assert_int_equal(y->dims[0], 3);
            assert_int_equal(y->dims[1], n);
            const int64_t *yd = y->data;
            for (int i = 0, k = 0; i < N; i++) {
                if (!on[i]) continue;
                assert_int_equal(yd[k], i / 39);
                assert_int_equal(yd[n + k], i / 13 % 3);
                assert_int_equal(yd[2 * n + k], i % 13);
                k++;
            }
        }
        bf_plan_free(p);
        bf_model_free(m);
        tg_free(&g);
    }
}

static void second_run_allocates_nothing(void **state)
{
    (void)state;
    tg_graph g = {0};
    bf_model *m = nonzero_model(&g);
    bf_plan *p = NULL;
    bf_error err = {0};
    if (bf_plan_create(m, 2, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    static const float a[8] = {0, 1, 0, 2, 0, 0, 3, 0}, b[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    run_and_check(p, b);
    /* every allocation fails from here: runs of shapes no larger still work */
    bf_test_alloc_fail_after(0);
    run_and_check(p, b);
    run_and_check(p, a);
    assert_int_equal(bf_test_alloc_failures(), 0);
    bf_test_alloc_fail_after(-1);
    bf_plan_free(p);
    bf_model_free(m);
    tg_free(&g);
}

static void run_time_limit_names_the_step(void **state)
{
    (void)state;
    tg_graph g = {0};
    bf_model *m = nonzero_model(&g);
    bf_plan *p = NULL;
    bf_error err = {0};
    bf_plan_opts o = {.max_run_bytes = 64};
    if (bf_plan_create_opts(m, 2, &o, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    static const float b[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    memcpy(bf_plan_input(p, 0)->data, b, sizeof b);
    assert_int_equal(bf_plan_run(p, &err), BF_ELIMIT);
    if (!strstr(err.msg, "node 'nz' (NonZero) output 0") || !strstr(err.msg, "max_run_bytes"))
        fail_msg("%s", err.msg);
    bf_plan_free(p);
    bf_model_free(m);
    tg_free(&g);
}

/* x [1, 4] -> f = Cast(NonZero(x), float) [2, count] -> z = Neg(f): a float
 * value of a dynamic step, faulted. A one-sample graph's plan
 * (bf_plan_opts.unbatched): the whole value is the sample's (docs/ENGINE.md). */
static void value_fault_on_a_dynamic_value(void **state)
{
    (void)state;
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){1, 4});
    tg_node(&g, "NonZero", "nz", (const char *[]){"x"}, 1, "idx");
    Onnx__NodeProto *c = tg_node(&g, "Cast", "to_float", (const char *[]){"idx"}, 1, "f");
    tg_attr_int(&g, c, "to", 1);
    tg_node(&g, "Neg", "neg", (const char *[]){"f"}, 1, "z");
    g.outs[g.n_outs++] = tg_value_info(&g, "z", 1, -1, NULL);
    bf_model *m = load(&g, 13);
    bf_plan *p = NULL;
    bf_error err = {0};
    bf_plan_opts one = {.unbatched = 1};
    if (bf_plan_create_opts(m, 1, &one, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    /* element 3 of f: row 1 (the column indices), entry 1 */
    bf_value_fault f[2] = {
        {.value = bf_model_find_value(m, "f"), .sample = 0, .index = 3, .model = BF_FAULT_BITFLIP,
         .mask = 0x80000000u, .repr = BF_REPR_FP32},
        {.value = bf_model_find_value(m, "f"), .sample = 0, .index = 100, .model = BF_FAULT_BITFLIP,
         .mask = 0x80000000u, .repr = BF_REPR_FP32},
    };
    if (bf_plan_set_value_faults(p, f, 2, &err) != BF_OK) fail_msg("%s", err.msg);
    static const float x[4] = {0, 5, 0, 7};   /* f = [[0, 0], [1, 3]] */
    memcpy(bf_plan_input(p, 0)->data, x, sizeof x);
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
    const bf_tensor *z = bf_plan_output(p, 0);
    assert_int_equal(z->ndim, 2);
    assert_int_equal(z->dims[1], 2);
    const float *zd = z->data;
    /* -0, -0, -1, then -(-3) = 3 */
    assert_true(zd[0] == 0 && zd[1] == 0 && zd[2] == -1.0f && zd[3] == 3.0f);
    float was, now;
    bf_plan_value_fault_seen(p, 0, &was, &now);
    assert_true(was == 3.0f && now == -3.0f);
    bf_plan_value_fault_seen(p, 1, &was, &now);   /* past this run's 4 elements: nothing */
    assert_true(was != was && now != now);
    bf_plan_free(p);
    bf_model_free(m);
    tg_free(&g);
}

/* ---- If and Loop: hostile graphs (the op cases run the good ones) ---- */

/* y = If(cond, then: Mul(x, W), else: Neg(x)); cond's element type `cond_elem`
 * (9 bool); the else branch gives `else_outs` outputs; then reads `then_reads` */
static bf_status load_if(int cond_elem, int else_outs, const char *then_reads, bf_model **m, bf_error *err)
{
    tg_graph g = {0}, t = {0}, e = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, 3});
    g.ins[g.n_ins++] = tg_value_info(&g, "c", cond_elem, 1, (int64_t[]){1});
    tg_init_f32(&g, "W", 1, (int64_t[]){3}, (float[]){1, 2, 3});
    tg_node(&t, "Mul", "then_mul", (const char *[]){"x", then_reads}, 2, "ty");
    t.outs[t.n_outs++] = tg_value_info(&t, "ty", 1, -1, NULL);
    tg_node(&e, "Neg", "else_neg", (const char *[]){"x"}, 1, "ey");
    for (int k = 0; k < else_outs; k++) e.outs[e.n_outs++] = tg_value_info(&e, "ey", 1, -1, NULL);
    Onnx__NodeProto *n = tg_node(&g, "If", "if", (const char *[]){"c"}, 1, "y");
    tg_attr_graph(&g, n, "then_branch", tg_subgraph(&g, &t, "then"));
    tg_attr_graph(&g, n, "else_branch", tg_subgraph(&g, &e, "else"));
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, -1, NULL);
    g.opset = 13;
    bf_status st = tg_load_opts(&g, "if", NULL, m, err);
    tg_free(&t), tg_free(&e);
    return st;
}

static void if_reads_outer_values_and_their_faults(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_error err = {0};
    if (load_if(9, 1, "W", &m, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_plan *p = NULL;
    if (bf_plan_create(m, 1, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    float *x = bf_plan_input(p, 0)->data;
    unsigned char *c = bf_plan_input(p, 1)->data;
    x[0] = 1, x[1] = 1, x[2] = 1;
    c[0] = 1;
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    const float *y = bf_plan_output(p, 0)->data;
    assert_true(y[0] == 1 && y[1] == 2 && y[2] == 3);
    /* a weight fault in W, which only the branch reads, lands */
    float *w = NULL;
    assert_int_equal(bf_plan_param_mut(p, 0, &w, &err), BF_OK);
    w[1] = -8;
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    y = bf_plan_output(p, 0)->data;
    assert_true(y[1] == -8);
    c[0] = 0;   /* the other branch */
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    y = bf_plan_output(p, 0)->data;
    assert_true(y[0] == -1 && y[1] == -1 && y[2] == -1);
    bf_plan_free(p);
    bf_model_free(m);
}

static void if_hostile(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_plan *p = NULL;
    bf_error err = {0};
    /* cond not bool: refused when the plan is built */
    if (load_if(1, 1, "W", &m, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_plan_create(m, 1, &p, &err), BF_EFORMAT);
    if (!strstr(err.msg, "node 'if' (If): input 'cond' is float32; it must be bool")) fail_msg("%s", err.msg);
    bf_model_free(m);
    /* branches with different output counts */
    if (load_if(9, 2, "W", &m, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_plan_create(m, 1, &p, &err), BF_EFORMAT);
    if (!strstr(err.msg, "the node has 1 outputs, its then_branch 1 and its else_branch 2")) fail_msg("%s", err.msg);
    bf_model_free(m);
    /* a branch reading a name nothing defines: a load error */
    assert_int_equal(load_if(9, 1, "nope", &m, &err), BF_EFORMAT);
    assert_null(m);
    if (!strstr(err.msg, "node 'if' (If): its subgraph reads 'nope', which neither the subgraph nor the graph around "
                         "it defines"))
        fail_msg("%s", err.msg);
}

/* Loop(M = 2^62, no cond, v0 = x) whose body keeps going: stops at the
 * iteration limit, naming the node, having allocated a bounded amount */
static void loop_huge_trip_count(void **state)
{
    (void)state;
    tg_graph g = {0}, b = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, 3});
    tg_init_i64(&g, "M", 0, NULL, (int64_t[]){(int64_t)1 << 62});
    b.ins[b.n_ins++] = tg_value_info(&b, "it", 7, 0, NULL);
    b.ins[b.n_ins++] = tg_value_info(&b, "cin", 9, 0, NULL);
    b.ins[b.n_ins++] = tg_value_info(&b, "vin", 1, -1, NULL);
    tg_node(&b, "Identity", "keep_going", (const char *[]){"cin"}, 1, "cout");
    tg_node(&b, "Identity", "carry", (const char *[]){"vin"}, 1, "vout");
    b.outs[b.n_outs++] = tg_value_info(&b, "cout", 9, -1, NULL);
    b.outs[b.n_outs++] = tg_value_info(&b, "vout", 1, -1, NULL);
    Onnx__NodeProto *n = tg_node(&g, "Loop", "loop", (const char *[]){"M", "", "x"}, 3, "y");
    tg_attr_graph(&g, n, "body", tg_subgraph(&g, &b, "body"));
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, -1, NULL);
    bf_model *m = load(&g, 13);
    tg_free(&b);
    bf_plan *p = NULL;
    bf_error err = {0};
    if (bf_plan_create(m, 1, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_plan_run(p, &err), BF_ELIMIT);
    if (!strstr(err.msg, "node 'loop' (Loop): more than 100000 iterations (trip count 4611686018427387904)"))
        fail_msg("%s", err.msg);
    /* and with a small run-time limit, the arena's cap comes first */
    bf_plan_free(p);
    bf_plan_opts o = {.max_run_bytes = 1 << 16};
    if (bf_plan_create_opts(m, 1, &o, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_plan_run(p, &err), BF_ELIMIT);
    if (!strstr(err.msg, "over the run-time limit of 64.0 KiB")) fail_msg("%s", err.msg);
    bf_plan_free(p);
    bf_model_free(m);
    tg_free(&g);
}

/* Loop(M = 0, v0 = x) with a scan output: no iteration runs, so the carried
 * value is x and the scan output is the empty float32 [0] (no slice says its
 * type). The fuzzer found this path reading the slices array before it
 * existed. */
static void loop_zero_iterations_with_a_scan_output(void **state)
{
    (void)state;
    tg_graph g = {0}, b = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){1, 3});
    tg_init_i64(&g, "M", 0, NULL, (int64_t[]){0});
    b.ins[b.n_ins++] = tg_value_info(&b, "it", 7, 0, NULL);
    b.ins[b.n_ins++] = tg_value_info(&b, "cin", 9, 0, NULL);
    b.ins[b.n_ins++] = tg_value_info(&b, "vin", 1, -1, NULL);
    tg_node(&b, "Identity", "keep_going", (const char *[]){"cin"}, 1, "cout");
    tg_node(&b, "Neg", "carry", (const char *[]){"vin"}, 1, "vout");
    tg_node(&b, "Abs", "scan", (const char *[]){"vin"}, 1, "sout");
    b.outs[b.n_outs++] = tg_value_info(&b, "cout", 9, -1, NULL);
    b.outs[b.n_outs++] = tg_value_info(&b, "vout", 1, -1, NULL);
    b.outs[b.n_outs++] = tg_value_info(&b, "sout", 1, -1, NULL);
    Onnx__NodeProto *n = tg_node(&g, "Loop", "loop", (const char *[]){"M", "", "x"}, 3, "y");
    n->n_output = 2;
    n->output = tg_alloc(&g, 2 * sizeof *n->output);
    n->output[0] = tg_str(&g, "y");
    n->output[1] = tg_str(&g, "s");
    tg_attr_graph(&g, n, "body", tg_subgraph(&g, &b, "body"));
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, -1, NULL);
    g.outs[g.n_outs++] = tg_value_info(&g, "s", 1, -1, NULL);
    bf_model *m = load(&g, 13);
    tg_free(&b);
    bf_plan *p = NULL;
    bf_error err = {0};
    if (bf_plan_create(m, 1, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    float *x = bf_plan_input(p, 0)->data;
    x[0] = 1, x[1] = -2, x[2] = 3;
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
    const bf_tensor *y = bf_plan_output(p, 0), *sc = bf_plan_output(p, 1);
    const float *yd = y->data;
    assert_true(bf_tensor_numel(y) == 3 && yd[0] == 1 && yd[1] == -2 && yd[2] == 3);
    assert_int_equal(sc->dtype, BF_F32);
    assert_int_equal(sc->ndim, 1);
    assert_int_equal(sc->dims[0], 0);
    bf_plan_free(p);
    bf_model_free(m);
    tg_free(&g);
}

/* y = If(c, then: [tm = Mul(x, W); If(c, then: Neg(tm), else: Abs(tm))],
 * else: Neg(x)): an If in a branch reading a value of that branch (an
 * implicit local) and a parameter of the graph, as torchvision's batched_nms
 * export has one */
static void nested_if_reads_its_parent_branch(void **state)
{
    (void)state;
    tg_graph g = {0}, t = {0}, e = {0}, it = {0}, ie = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, 3});
    g.ins[g.n_ins++] = tg_value_info(&g, "c", 9, 1, (int64_t[]){1});
    g.ins[g.n_ins++] = tg_value_info(&g, "c2", 9, 1, (int64_t[]){1});
    tg_init_f32(&g, "W", 1, (int64_t[]){3}, (float[]){1, 2, 3});
    tg_node(&it, "Neg", "inner_neg", (const char *[]){"tm"}, 1, "iy");
    it.outs[it.n_outs++] = tg_value_info(&it, "iy", 1, -1, NULL);
    tg_node(&ie, "Abs", "inner_abs", (const char *[]){"tm"}, 1, "iz");
    ie.outs[ie.n_outs++] = tg_value_info(&ie, "iz", 1, -1, NULL);
    tg_node(&t, "Mul", "then_mul", (const char *[]){"x", "W"}, 2, "tm");
    Onnx__NodeProto *in_if = tg_node(&t, "If", "inner_if", (const char *[]){"c2"}, 1, "ty");
    tg_attr_graph(&t, in_if, "then_branch", tg_subgraph(&t, &it, "a"));
    tg_attr_graph(&t, in_if, "else_branch", tg_subgraph(&t, &ie, "b"));
    t.outs[t.n_outs++] = tg_value_info(&t, "ty", 1, -1, NULL);
    tg_node(&e, "Neg", "else_neg", (const char *[]){"x"}, 1, "ey");
    e.outs[e.n_outs++] = tg_value_info(&e, "ey", 1, -1, NULL);
    Onnx__NodeProto *n = tg_node(&g, "If", "if", (const char *[]){"c"}, 1, "y");
    tg_attr_graph(&g, n, "then_branch", tg_subgraph(&g, &t, "then"));
    tg_attr_graph(&g, n, "else_branch", tg_subgraph(&g, &e, "else"));
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, -1, NULL);
    bf_model *m = load(&g, 13);
    tg_free(&it), tg_free(&ie), tg_free(&t), tg_free(&e), tg_free(&g);
    bf_plan *p = NULL;
    bf_error err = {0};
    if (bf_plan_create(m, 1, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    float *x = bf_plan_input(p, 0)->data;
    unsigned char *c = bf_plan_input(p, 1)->data, *c2 = bf_plan_input(p, 2)->data;
    x[0] = 1, x[1] = -1, x[2] = 2;
    static const unsigned char cs[3][2] = {{1, 1}, {1, 0}, {0, 1}};
    static const float want[3][3] = {{-1, 2, -6}, {1, 2, 6}, {-1, 1, -2}};
    for (int k = 0; k < 3; k++) {
        c[0] = cs[k][0], c2[0] = cs[k][1];
        if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
        const float *y = bf_plan_output(p, 0)->data;
        for (int i = 0; i < 3; i++)
            if (y[i] != want[k][i]) fail_msg("case %d: y[%d] = %g, want %g", k, i, y[i], want[k][i]);
    }
    bf_plan_free(p);
    bf_model_free(m);
}

/* ---- a detector's class selections computed together (plan_csel.c) ---- */

#define CS_N 37    /* anchors: not a multiple of 8 (the mask scan's tail) */
#define CS_C 9     /* classes: eight columns side by side and one (bf__gather_columns) */
#define CS_K 5     /* each class's top k at most */

static void cs_name(char *b, size_t n, const char *what, int c) { snprintf(b, n, "%s%d", what, c); }

/* torchvision SSD's per-class selection, as it exports, for CS_C classes of
 * scores [CS_N, CS_C] and boxes [CS_N, 4]. The masks: Or(Greater(x, t),
 * Greater(x, t)) for classes 0, 1, 2, 6, 7 and 8; for 3 and 4 Or(Greater(x, t),
 * IsNaN(x)), which NaN scores pass (Greater's never do), so TopK sees
 * NaNs; for 5 Not(Not(that)), made after the other
 * classes' NonZeros (the plan orders steps by depth), so its class runs as
 * steps among the others' (plan_csel.c: a mask must be there at the
 * first). */
static bf_model *csel_model_tie(tg_graph *g, int tie_order)
{
    char x[16], m[16], nz0[16], t0[16], sc[16], nz1[16], t1[16], bx[16], sh[16], ga[16], un[16], ca[16],
        rm[16], kk[16], tv[16], ti[16], tb[16], sh2[16], lab[16], ic[16], nm[24];
    g->ins[g->n_ins++] = tg_value_info(g, "scores", 1, 2, (int64_t[]){CS_N, CS_C});
    g->ins[g->n_ins++] = tg_value_info(g, "boxes", 1, 2, (int64_t[]){CS_N, 4});
    tg_init_f32(g, "thr", 0, NULL, (float[]){0.5f});
    tg_init_i64(g, "zero", 0, NULL, (int64_t[]){0});
    tg_init_i64(g, "ax0", 1, (int64_t[]){1}, (int64_t[]){0});
    tg_init_i64(g, "K", 1, (int64_t[]){1}, (int64_t[]){CS_K});
    tg_init_i64(g, "one", 1, (int64_t[]){1}, (int64_t[]){1});
    const char *tvs[CS_C], *tbs[CS_C], *labs[CS_C];
    for (int c = 0; c < CS_C; c++) {
#define N(v, w) cs_name(v, sizeof v, w, c)
        N(x, "x"), N(m, "m"), N(nz0, "nz0_"), N(t0, "t0_"), N(sc, "sc"), N(nz1, "nz1_"), N(t1, "t1_");
        N(bx, "bx"), N(sh, "sh"), N(ga, "ga"), N(un, "un"), N(ca, "ca"), N(rm, "rm"), N(kk, "kk"), N(tv, "tv");
        N(ti, "ti"), N(tb, "tb"), N(sh2, "shb"), N(lab, "lab"), N(ic, "ic");
#undef N
        tg_init_i64(g, ic, 0, NULL, (int64_t[]){c});
        snprintf(nm, sizeof nm, "col%d", c);
        tg_attr_int(g, tg_node(g, "Gather", nm, (const char *[]){"scores", ic}, 2, x), "axis", 1);
        snprintf(nm, sizeof nm, "mask%d", c);
        {
            char gt[16], nn[16], o[16], o2[16];
            cs_name(gt, sizeof gt, "gt", c), cs_name(nn, sizeof nn, "nan", c), cs_name(o, sizeof o, "or", c);
            cs_name(o2, sizeof o2, "nor", c);
            tg_node(g, "Greater", nm, (const char *[]){x, "thr"}, 2, gt);
            snprintf(nm, sizeof nm, "isnan%d", c);
            int nan = c >= 3 && c <= 5;
            if (nan) tg_node(g, "IsNaN", nm, (const char *[]){x}, 1, nn);
            snprintf(nm, sizeof nm, "or%d", c);
            tg_node(g, "Or", nm, (const char *[]){gt, nan ? nn : gt}, 2, c == 5 ? o : m);
            if (c == 5) {
                snprintf(nm, sizeof nm, "not%d", c);
                tg_node(g, "Not", nm, (const char *[]){o}, 1, o2);
                snprintf(nm, sizeof nm, "notnot%d", c);
                tg_node(g, "Not", nm, (const char *[]){o2}, 1, m);
            }
        }
        snprintf(nm, sizeof nm, "nz0_%d", c);
        tg_node(g, "NonZero", nm, (const char *[]){m}, 1, nz0);
        snprintf(nm, sizeof nm, "tr0_%d", c);
        tg_attr_ints(g, tg_node(g, "Transpose", nm, (const char *[]){nz0}, 1, t0), "perm", 2, (int64_t[]){1, 0});
        snprintf(nm, sizeof nm, "gnd0_%d", c);
        tg_node(g, "GatherND", nm, (const char *[]){x, t0}, 2, sc);
        snprintf(nm, sizeof nm, "nz1_%d", c);
        tg_node(g, "NonZero", nm, (const char *[]){m}, 1, nz1);
        snprintf(nm, sizeof nm, "tr1_%d", c);
        tg_attr_ints(g, tg_node(g, "Transpose", nm, (const char *[]){nz1}, 1, t1), "perm", 2, (int64_t[]){1, 0});
        snprintf(nm, sizeof nm, "gnd1_%d", c);
        tg_node(g, "GatherND", nm, (const char *[]){"boxes", t1}, 2, bx);
        snprintf(nm, sizeof nm, "shape%d", c);
        tg_node(g, "Shape", nm, (const char *[]){sc}, 1, sh);
        snprintf(nm, sizeof nm, "count%d", c);
        tg_attr_int(g, tg_node(g, "Gather", nm, (const char *[]){sh, "zero"}, 2, ga), "axis", 0);
        snprintf(nm, sizeof nm, "unsq%d", c);
        tg_node(g, "Unsqueeze", nm, (const char *[]){ga, "ax0"}, 2, un);
        snprintf(nm, sizeof nm, "cat%d", c);
        /* class 1 puts the count first */
        tg_attr_int(g, tg_node(g, "Concat", nm, (const char *[]){c == 1 ? un : "K", c == 1 ? "K" : un}, 2, ca),
                    "axis", 0);
        snprintf(nm, sizeof nm, "rmin%d", c);
        tg_attr_int(g, tg_node(g, "ReduceMin", nm, (const char *[]){ca}, 1, rm), "keepdims", 0);
        snprintf(nm, sizeof nm, "resh%d", c);
        tg_node(g, "Reshape", nm, (const char *[]){rm, "one"}, 2, kk);
        snprintf(nm, sizeof nm, "topk%d", c);
        Onnx__NodeProto *tk = tg_node(g, "TopK", nm, (const char *[]){sc, kk}, 2, tv);
        char **outs = tg_alloc(g, 2 * sizeof *outs);
        outs[0] = tk->output[0];
        outs[1] = tg_str(g, ti);
        tk->output = outs;
        tk->n_output = 2;
        tg_attr_int(g, tk, "axis", -1), tg_attr_int(g, tk, "largest", 1), tg_attr_int(g, tk, "sorted", 1);
        snprintf(nm, sizeof nm, "gbox%d", c);
        tg_attr_int(g, tg_node(g, "Gather", nm, (const char *[]){bx, ti}, 2, tb), "axis", 0);
        snprintf(nm, sizeof nm, "shape2_%d", c);
        tg_node(g, "Shape", nm, (const char *[]){tv}, 1, sh2);
        snprintf(nm, sizeof nm, "label%d", c);
        Onnx__NodeProto *cs = tg_node(g, "ConstantOfShape", nm, (const char *[]){sh2}, 1, lab);
        snprintf(nm, sizeof nm, "labval%d", c);
        tg_attr(g, cs, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
            tg_init_i64(g, nm, 1, (int64_t[]){1}, (int64_t[]){c + 1});
        tvs[c] = tg_str(g, tv), tbs[c] = tg_str(g, tb), labs[c] = tg_str(g, lab);
    }
    tg_attr_int(g, tg_node(g, "Concat", "all_scores", tvs, CS_C, "out_scores"), "axis", 0);
    tg_attr_int(g, tg_node(g, "Concat", "all_boxes", tbs, CS_C, "out_boxes"), "axis", 0);
    tg_attr_int(g, tg_node(g, "Concat", "all_labels", labs, CS_C, "out_labels"), "axis", 0);
    g->outs[g->n_outs++] = tg_value_info(g, "out_scores", 1, -1, NULL);
    g->outs[g->n_outs++] = tg_value_info(g, "out_boxes", 1, -1, NULL);
    g->outs[g->n_outs++] = tg_value_info(g, "out_labels", 7, -1, NULL);
    return load_tie(g, 13, tie_order);
}

static bf_model *csel_model(tg_graph *g) { return csel_model_tie(g, BF_TIE_ORDER_ONNX); }

/* every value a class selection computes, and the outputs: the same type,
 * shape and bytes in both plans */
static void cs_same(const bf_model *m, const bf_plan *a, const bf_plan *b)
{
    static const char *const what[] = {"x", "nz0_", "t0_", "sc", "nz1_", "t1_", "bx", "sh", "ga", "un", "ca", "rm",
                                       "kk", "tv", "ti", "tb", "shb", "lab"};
    char nm[24];
    for (int c = 0; c <= CS_C; c++)
        for (size_t w = 0; w < (c < CS_C ? sizeof what / sizeof *what : 3); w++) {
            static const char *const outs[] = {"out_scores", "out_boxes", "out_labels"};
            if (c < CS_C) cs_name(nm, sizeof nm, what[w], c);
            else snprintf(nm, sizeof nm, "%s", outs[w]);
            int64_t v = bf_model_find_value(m, nm);
            assert_true(v >= 0);
            const bf_tensor *x = bf_plan_value(a, v), *y = bf_plan_value(b, v);
            if (x->dtype != y->dtype || x->ndim != y->ndim) fail_msg("%s: type or rank differ", nm);
            for (int d = 0; d < x->ndim; d++)
                if (x->dims[d] != y->dims[d]) fail_msg("%s: dim %d: %lld, %lld", nm, d, (long long)x->dims[d],
                                                       (long long)y->dims[d]);
            size_t nb = bf_tensor_nbytes(x);
            if (nb && memcmp(x->data, y->data, nb)) fail_msg("%s: bytes differ", nm);
        }
}

static void cs_run(bf_plan *p, const float *sc, const float *bx, bf_status want, bf_error *err)
{
    memcpy(bf_plan_input(p, 0)->data, sc, CS_N * CS_C * sizeof *sc);
    memcpy(bf_plan_input(p, 1)->data, bx, CS_N * 4 * sizeof *bx);
    bf_status st = bf_plan_run(p, err);
    if (st != want) fail_msg("run: %d, want %d: %s", (int)st, (int)want, err->msg);
}

/* sc and bx through the fused plan f, whose selections must have been
 * computed (plan_csel.c) or not as `fused` says, and through u, which runs
 * each step: the same values */
static void cs_both(const bf_model *m, bf_plan *f, bf_plan *u, const float *sc, const float *bx, int fused)
{
    bf_error err = {0};
    cs_run(f, sc, bx, BF_OK, &err);
    int computed = !fused;
    bf__plan_csel_classes(f, &computed);
    assert_int_equal(computed, fused);
    cs_run(u, sc, bx, BF_OK, &err);
    cs_same(m, f, u);
}

/* The fused plan (plan_csel.c) against one running each step (no fusion),
 * on hostile scores: NaN (which class 3's mask lets through to TopK), ties,
 * -0 and +0, infinities, every score under the threshold, more candidates
 * than k and fewer; then a value fault on a selected value (the steps run
 * one by one, the fault where it lands) and a run-time limit (the same
 * error, naming the same node). */
static void class_selections_fused_equal_steps(void **state)
{
    (void)state;
    tg_graph g = {0};
    bf_model *m = csel_model(&g);
    bf_error err = {0};
    bf_plan_opts fo = {.unbatched = 1, .fuse_activations = 1, .share_buffers = 1}, po = {.unbatched = 1};
    bf_plan *f = NULL, *u = NULL;
    if (bf_plan_create_opts(m, 1, &fo, &f, &err) != BF_OK || bf_plan_create_opts(m, 1, &po, &u, &err) != BF_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(bf__plan_csel_classes(f, NULL), CS_C - 1);   /* not class 5 */
    assert_int_equal(bf__plan_csel_classes(u, NULL), 0);
    float sc[CS_N * CS_C], bx[CS_N * 4];
    uint32_t r = 12345;
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < CS_N * 4; i++) bx[i] = (float)(i * 7 % 23) - 3.5f;
        for (int i = 0; i < CS_N * CS_C; i++) {
            r = r * 1103515245u + 12345u;
            float v = (float)(r >> 8 & 0xffff) / 65536.0f;   /* in [0, 1) */
            switch (round) {
            case 0: sc[i] = v; break;
            case 1: sc[i] = v < 0.5f ? v : 0.75f; break;                /* ties */
            case 2: sc[i] = v < 0.2f ? NAN : v < 0.3f ? -NAN : v; break;   /* NaNs */
            case 3: sc[i] = v * 0.5f; break;                             /* all under */
            case 4: sc[i] = v < 0.9f ? 0.0f : 0.6f; break;               /* fewer than k */
            case 5: sc[i] = v < 0.3f ? INFINITY : v < 0.5f ? -INFINITY : v; break;
            case 6: sc[i] = v < 0.5f ? -0.0f : 0.0f; break;              /* +0 and -0, none over */
            default: sc[i] = (i % 3) ? NAN : 0.9f; break;
            }
        }
        if (round == 6)   /* NaNs alone through class 3's and 5's masks, -0 and +0 under them */
            for (int a = 0; a < CS_N; a++) sc[a * CS_C + 3] = sc[a * CS_C + 5] = a % 2 ? NAN : (a % 4 ? -0.0f : 0.0f);
        cs_both(m, f, u, sc, bx, 1);
    }
    /* a value fault on class 2's top scores: the fused plan runs the steps */
    bf_value_fault vf = {.value = bf_model_find_value(m, "tv2"), .sample = 0, .index = 1, .model = BF_FAULT_BITFLIP,
                         .mask = 0x40000000u, .repr = BF_REPR_FP32};
    if (bf_plan_set_value_faults(f, &vf, 1, &err) != BF_OK || bf_plan_set_value_faults(u, &vf, 1, &err) != BF_OK)
        fail_msg("%s", err.msg);
    for (int i = 0; i < CS_N * CS_C; i++) sc[i] = (float)((i * 13) % 37) / 37.0f;
    cs_both(m, f, u, sc, bx, 0);
    bf_plan_free(f);
    bf_plan_free(u);
    /* a run-time limit passed inside the selections: the same error */
    fo.max_run_bytes = po.max_run_bytes = 3000;
    if (bf_plan_create_opts(m, 1, &fo, &f, &err) != BF_OK || bf_plan_create_opts(m, 1, &po, &u, &err) != BF_OK)
        fail_msg("%s", err.msg);
    bf_error ef = {0}, eu = {0};
    cs_run(f, sc, bx, BF_ELIMIT, &ef);
    cs_run(u, sc, bx, BF_ELIMIT, &eu);
    assert_string_equal(ef.msg, eu.msg);
    bf_plan_free(f);
    bf_plan_free(u);
    bf_model_free(m);
    tg_free(&g);
}

/* Under --tie-order pytorch a class's TopK keeps equal scores in torch.topk's
 * order (ops/reduce.c, torch_order.c), and the fused selections must too:
 * they sorted stably (ONNX's order) whatever the model's tie order, so
 * `bitflip eval --tie-order pytorch` and a campaign's golden pass (plans
 * that fuse) kept other anchors among an untrained SSDlite's equal scores
 * than the steps run one by one (bitflip-conformance's direct path), which
 * match PyTorch (docs/OPS.md, "Held-out detectors and segmenters").
 * Scores with many ties, more candidates than k (torch.topk's nth_element
 * path, whose order among ties is not the stable one: checked here on the
 * plan without fusion, so the case can tell the two orders apart). */
static void class_selections_fused_keep_pytorch_tie_order(void **state)
{
    (void)state;
    tg_graph g = {0};
    bf_model *m = csel_model_tie(&g, BF_TIE_ORDER_PYTORCH);
    bf_error err = {0};
    bf_plan_opts fo = {.unbatched = 1, .fuse_activations = 1, .share_buffers = 1}, po = {.unbatched = 1};
    bf_plan *f = NULL, *u = NULL;
    if (bf_plan_create_opts(m, 1, &fo, &f, &err) != BF_OK || bf_plan_create_opts(m, 1, &po, &u, &err) != BF_OK)
        fail_msg("%s", err.msg);
    float sc[CS_N * CS_C], bx[CS_N * 4];
    uint32_t r = 777;
    int unstable = 0;
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < CS_N * 4; i++) bx[i] = (float)(i * 5 % 31) - 2.5f;
        for (int i = 0; i < CS_N * CS_C; i++) {
            r = r * 1103515245u + 12345u;
            float v = (float)(r >> 8 & 0xffff) / 65536.0f;
            /* two or three levels over the threshold, most scores tied */
            sc[i] = round % 2 ? (v < 0.3f ? 0.25f : v < 0.7f ? 0.75f : 0.875f) : (v < 0.2f ? 0.1f : 0.6f);
        }
        cs_both(m, f, u, sc, bx, 1);
        /* the steps' indices among equal scores are not ascending somewhere */
        char nm[24];
        for (int c = 0; c < CS_C; c++) {
            cs_name(nm, sizeof nm, "ti", c);
            const bf_tensor *ti = bf_plan_value(u, bf_model_find_value(m, nm));
            cs_name(nm, sizeof nm, "tv", c);
            const bf_tensor *tv = bf_plan_value(u, bf_model_find_value(m, nm));
            const int64_t *ix = ti->data;
            const float *vv = tv->data;
            for (int64_t t = 1; t < ti->dims[0]; t++) unstable |= vv[t] == vv[t - 1] && ix[t] < ix[t - 1];
        }
    }
    assert_true(unstable);
    bf_plan_free(f);
    bf_plan_free(u);
    bf_model_free(m);
    tg_free(&g);
}

/* The grouped class-column Gathers (plan_fuse.c, p->tab.gcol) and the class
 * selections (plan_csel.c) are extras a plan may go without: when their
 * memory is refused the plan is built all the same and its steps run one by
 * one, with the same values as a plan that never grouped them. Every
 * allocation of the plan's making refused in turn (each and all after it,
 * then none while it runs); then the selections' buffer refused in a run. */
static void class_groups_without_memory_run_as_steps(void **state)
{
    (void)state;
    tg_graph g = {0};
    bf_model *m = csel_model(&g);
    bf_error err = {0};
    bf_plan_opts fo = {.unbatched = 1, .fuse_activations = 1, .share_buffers = 1}, po = {.unbatched = 1};
    bf_plan *u = NULL;
    if (bf_plan_create_opts(m, 1, &po, &u, &err) != BF_OK) fail_msg("%s", err.msg);
    float sc[CS_N * CS_C], bx[CS_N * 4];
    for (int i = 0; i < CS_N * CS_C; i++) sc[i] = (float)((i * 29) % 41) / 41.0f;
    for (int i = 0; i < CS_N * 4; i++) bx[i] = (float)i * 0.25f;
    cs_run(u, sc, bx, BF_OK, &err);
    int no_gcol = 0, no_csel = 0, grouped = 0;
    for (long n = 0;; n++) {
        bf_plan *f = NULL;
        bf_test_alloc_fail_after(n);
        bf_status st = bf_plan_create_opts(m, 1, &fo, &f, &err);
        long refused = bf_test_alloc_failures();
        bf_test_alloc_fail_after(-1);
        if (st != BF_OK) {
            assert_int_equal(st, BF_ENOMEM);
            continue;
        }
        if (!refused) {   /* every allocation it asks for succeeded: the end */
            assert_non_null(f->tab.gcol);
            assert_int_equal(bf__plan_csel_classes(f, NULL), CS_C - 1);
            bf_plan_free(f);
            break;
        }
        no_gcol += !f->tab.gcol;
        no_csel += !bf__plan_csel_classes(f, NULL);
        grouped += f->tab.gcol != NULL;
        cs_run(f, sc, bx, BF_OK, &err);
        cs_same(m, f, u);
        bf_plan_free(f);
    }
    /* at run time: the selections' buffer cannot grow (a run with more
     * candidates than any before), so the run computes them step by step */
    bf_plan *f = NULL;
    if (bf_plan_create_opts(m, 1, &fo, &f, &err) != BF_OK) fail_msg("%s", err.msg);
    float low[CS_N * CS_C];
    for (int i = 0; i < CS_N * CS_C; i++) low[i] = 0.25f;
    cs_run(f, low, bx, BF_OK, &err);
    bf_test_alloc_fail_after(0);
    cs_run(f, sc, bx, BF_OK, &err);
    long refused = bf_test_alloc_failures();
    bf_test_alloc_fail_after(-1);
    int computed = 1;
    bf__plan_csel_classes(f, &computed);
    assert_true(refused > 0 && !computed);
    cs_same(m, f, u);
    cs_run(f, sc, bx, BF_OK, &err);   /* and with memory, together again */
    bf__plan_csel_classes(f, &computed);
    assert_true(computed);
    cs_same(m, f, u);
    bf_plan_free(f);
    assert_true(no_gcol > 0);   /* the column groups' table refused */
    assert_true(no_csel > 0);   /* the selections' */
    assert_true(grouped > 0);   /* the columns grouped, the selections' memory refused */
    bf_plan_free(u);
    bf_model_free(m);
    tg_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nonzero_of_an_input_runs_per_run),
        cmocka_unit_test(loop_zero_iterations_with_a_scan_output),
        cmocka_unit_test(nonzero_scans_match_a_plain_reference),
        cmocka_unit_test(second_run_allocates_nothing),
        cmocka_unit_test(run_time_limit_names_the_step),
        cmocka_unit_test(value_fault_on_a_dynamic_value),
        cmocka_unit_test(if_reads_outer_values_and_their_faults),
        cmocka_unit_test(if_hostile),
        cmocka_unit_test(loop_huge_trip_count),
        cmocka_unit_test(nested_if_reads_its_parent_branch),
        cmocka_unit_test(class_selections_fused_equal_steps),
        cmocka_unit_test(class_selections_fused_keep_pytorch_tie_order),
        cmocka_unit_test(class_groups_without_memory_run_as_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
