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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "bitflip/bitflip.h"
#include "bitflip/fault.h"
#include "onnx_graph.h"

static bf_model *load(tg_graph *g, int opset)
{
    size_t len;
    g->opset = opset;
    uint8_t *buf = tg_pack(g, "dyn", &len);
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_buffer(buf, len, "dyn.onnx", &m, &err) != BF_OK) print_error("%s\n", err.msg);
    free(buf);
    assert_non_null(m);
    return m;
}

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
 * value of a dynamic step, faulted. A plan of one sample: the whole value is
 * the sample's (docs/ENGINE.md). */
static void value_fault_on_a_dynamic_value(void **state)
{
    (void)state;
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, 4});
    tg_node(&g, "NonZero", "nz", (const char *[]){"x"}, 1, "idx");
    Onnx__NodeProto *c = tg_node(&g, "Cast", "to_float", (const char *[]){"idx"}, 1, "f");
    tg_attr_int(&g, c, "to", 1);
    tg_node(&g, "Neg", "neg", (const char *[]){"f"}, 1, "z");
    g.outs[g.n_outs++] = tg_value_info(&g, "z", 1, -1, NULL);
    bf_model *m = load(&g, 13);
    bf_plan *p = NULL;
    bf_error err = {0};
    if (bf_plan_create(m, 1, &p, &err) != BF_OK) fail_msg("%s", err.msg);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nonzero_of_an_input_runs_per_run),
        cmocka_unit_test(second_run_allocates_nothing),
        cmocka_unit_test(run_time_limit_names_the_step),
        cmocka_unit_test(value_fault_on_a_dynamic_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
