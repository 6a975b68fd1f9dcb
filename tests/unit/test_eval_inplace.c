/* An evaluation reads each batch's input where the eval set holds it
 * (bf__plan_input_view, exec/eval.c run_batch) when it can, and copies it
 * when it cannot, and either way the eval set's bytes are never written
 * and the outputs are the hand-worked ones:
 *
 *   - a graph whose input x [B, 2, H, W] is read by a 1x1 Conv fused with
 *     its Relu and then by a Reshape, its last reader, which the shared
 *     arena lays over x's own place (bf__plan_share_offsets), followed by a
 *     Relu and an Add: y = flat(relu(conv(x))) + relu(flat(x)). Its values
 *     are quarters and its weights halves and small integers, so every sum
 *     is exact whatever its order and the reference is plain arithmetic
 *     here.
 *   - batches of 1, 3, 4 and 10 over 10 samples (a short last batch of 1
 *     and of 2, one batch), on 1 and 2 threads, fusing and sharing the
 *     arena or neither: each time the eval set is unchanged byte for byte
 *     and the outputs are the reference. Rows of 128 bytes are viewed in
 *     every batch (the plans count their views: checked on one thread); rows of 24 bytes (H = 1,
 *     W = 3) only in batches that start 64-byte aligned, and the others
 *     are copied, with the same outputs.
 *   - value faults on x, the step that writes where the input lies: a
 *     batch a fault strikes is copied (the fault lands in the copy), the
 *     others viewed; the outputs are the reference on the faulted values,
 *     and the eval set is unchanged. (With the fault check taken out of
 *     bf__plan_input_view this test fails: the fault lands in the eval set.)
 *   - an eval set in float16, cast to the float32 input: copied, never
 *     viewed, the same outputs.
 *   - a graph of ten inputs, two more than eval.c's VIEW_INPUTS: eight
 *     viewed in every batch, the rest copied, the sums hand-worked.
 *   - every allocation of the set's load, the evaluator and its run refused
 *     in turn: a clean BF_ENOMEM, then the reference. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"
#include "alloc_fail.h"
#include "onnx_graph.h"
#include "st_build.h"

#define N 10   /* samples */
#define C 2    /* channels in and out */

static const float W[C][C] = {{1.0f, -2.0f}, {0.5f, 3.0f}};
static const float B[C] = {0.25f, -1.0f};

static bf_model *graph(int64_t h, int64_t w)
{
    tg_graph g = {.opset = 13};
    tg_init_f32(&g, "w", 4, (int64_t[]){C, C, 1, 1}, &W[0][0]);
    tg_init_f32(&g, "b", 1, (int64_t[]){C}, B);
    tg_init_i64(&g, "shape", 1, (int64_t[]){2}, (int64_t[]){-1, C * h * w});
    Onnx__NodeProto *n = tg_node(&g, "Conv", "conv", (const char *[]){"x", "w", "b"}, 3, "c");
    tg_attr_ints(&g, n, "kernel_shape", 2, (int64_t[]){1, 1});
    tg_node(&g, "Relu", "act", (const char *[]){"c"}, 1, "a");
    tg_node(&g, "Reshape", "flat_x", (const char *[]){"x", "shape"}, 2, "f");   /* x's last reader */
    tg_node(&g, "Relu", "relu_x", (const char *[]){"f"}, 1, "g");
    tg_node(&g, "Reshape", "flat_a", (const char *[]){"a", "shape"}, 2, "af");
    tg_node(&g, "Add", "sum", (const char *[]){"af", "g"}, 2, "y");
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){-1, C, h, w});
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, (int64_t[]){-1, C * h * w});
    return tg_load(&g, "inplace");
}

/* quarters in [-4, 4): exact in float16 too */
static void fill(float *x, int64_t n)
{
    for (int64_t k = 0; k < n; k++) x[k] = (float)((k * 37 + 11) % 32 - 16) * 0.25f;
}

static float relu(float v) { return v > 0.0f ? v : 0.0f; }

/* y for samples [0, N) of x, by hand */
static void reference(const float *x, int64_t hw, float *y)
{
    for (int64_t s = 0; s < N; s++) {
        const float *xs = x + s * C * hw;
        float *ys = y + s * C * hw;
        for (int o = 0; o < C; o++)
            for (int64_t p = 0; p < hw; p++)
                ys[o * hw + p] = relu(W[o][0] * xs[p] + W[o][1] * xs[hw + p] + B[o]) + relu(xs[o * hw + p]);
    }
}

/* x's bits in float16, for these exact values (normal or zero) */
static uint16_t half(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) == 0) return (uint16_t)(u >> 16);
    return (uint16_t)(((u >> 16) & 0x8000u) | ((((u >> 23) & 0xffu) - 127 + 15) << 10) | ((u >> 13) & 0x3ffu));
}

static bf_dataset *eval_set(const float *x, int64_t h, int64_t w, int f16)
{
    int64_t n = N * C * h * w;
    uint16_t *hx = malloc((size_t)n * sizeof *hx);
    assert_non_null(hx);
    for (int64_t k = 0; k < n; k++) hx[k] = half(x[k]);
    th_st_tensor t = {.name = "x", .dtype = f16 ? "F16" : "F32", .ndim = 4, .dims = {N, C, h, w},
                      .data = f16 ? (const void *)hx : (const void *)x, .bytes = (size_t)n * (f16 ? 2 : 4)};
    size_t len = 0;
    uint8_t *buf = th_st_build(&t, 1, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, len, "inplace", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    free(buf);
    free(hx);
    return ds;
}

/* the views the plans of a one-thread evaluator took (bf__evaluator_plan
 * reaches its first plan and the short batch's alone) */
static uint64_t views(bf_evaluator *ev)
{
    const bf_plan *p = bf__evaluator_plan(ev, 0), *r = bf__evaluator_plan(ev, 1);
    return p->n_input_views + (r ? r->n_input_views : 0);
}

/* One pass: outputs against want, the eval set's bytes against what they
 * were; returns the views the pass took. */
static uint64_t pass(bf_evaluator *ev, const bf_dataset *ds, const float *want, int64_t cols, const char *what)
{
    const bf_tensor *t = bf_dataset_find(ds, "x");
    size_t nb = bf_tensor_nbytes(t);
    void *before = malloc(nb);
    assert_non_null(before);
    memcpy(before, t->data, nb);
    uint64_t v0 = views(ev);
    bf_eval_result r = {0};
    bf_error err = {0};
    if (bf_evaluator_run(ev, NULL, 0, &r, &err) != BF_OK) fail_msg("%s: %s", what, err.msg);
    assert_int_equal(r.out_cols, cols);
    if (memcmp(r.outputs, want, (size_t)(N * cols) * sizeof(float)) != 0) fail_msg("%s: outputs differ", what);
    if (memcmp(before, t->data, nb) != 0) fail_msg("%s: the eval set was written", what);
    free(before);
    return views(ev) - v0;
}

static bf_evaluator *evaluator(const bf_model *m, const bf_dataset *ds, int64_t batch, int threads, int fuse)
{
    bf_eval_opts o = {.batch = batch, .threads = threads, .fuse_activations = fuse, .share_buffers = fuse};
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    if (bf_evaluator_create(m, ds, &o, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
    return ev;
}

/* The graph over H x W maps, its eval set x (float16 with f16), and the
 * reference y; what every test below starts from. */
typedef struct {
    bf_model *m;
    float *x, *y;
    bf_dataset *ds;
    int64_t hw;
} fixture;

static fixture setup(int64_t h, int64_t w, int f16)
{
    fixture f = {.m = graph(h, w), .hw = h * w};
    f.x = malloc(sizeof(float) * (size_t)(N * C * f.hw));
    f.y = malloc(sizeof(float) * (size_t)(N * C * f.hw));
    assert_true(f.x && f.y);
    fill(f.x, N * C * f.hw);
    reference(f.x, f.hw, f.y);
    f.ds = eval_set(f.x, h, w, f16);
    return f;
}

static void teardown(fixture *f)
{
    bf_dataset_free(f->ds);
    bf_model_free(f->m);
    free(f->x), free(f->y);
}

static void batches_read_in_place(void **state)
{
    (void)state;
    const int64_t shapes[2][2] = {{4, 4}, {1, 3}}, batches[] = {1, 3, 4, 10};
    for (int k = 0; k < 2; k++) {
        fixture fx = setup(shapes[k][0], shapes[k][1], 0);
        const bf_model *m = fx.m;
        int64_t hw = fx.hw, row = C * hw * 4;
        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
            for (int threads = 1; threads <= 2; threads++)
                for (int fuse = 0; fuse <= 1; fuse++) {
                    bf_evaluator *ev = evaluator(m, fx.ds, batches[b], threads, fuse);
                    /* the shared arena lays the Reshape's output over x's own place */
                    const bf_plan *p0 = bf__evaluator_plan(ev, 0);
                    int same = bf_plan_value(p0, bf_model_find_value(m, "f"))->data == bf_plan_value(p0, bf_model_find_value(m, "x"))->data;
                    assert_int_equal(same, fuse);
                    char what[96];
                    snprintf(what, sizeof what, "rows of %lld bytes, batch %lld, %d threads, fuse %d", (long long)row,
                             (long long)batches[b], threads, fuse);
                    /* the batches whose first row lies 64-byte aligned (the
                     * set's storage is: dataset.c) */
                    uint64_t aligned = 0;
                    for (int64_t s = 0; s < N; s += batches[b]) aligned += (s * row) % 64 == 0;
                    for (int rep = 0; rep < 2; rep++) {
                        uint64_t v = pass(ev, fx.ds, fx.y, C * hw, what);
                        if (threads == 1 && v != aligned) fail_msg("%s: %llu views, wanted %llu", what, (unsigned long long)v, (unsigned long long)aligned);
                    }
                    if (k == 0) assert_int_equal(aligned, (N + batches[b] - 1) / batches[b]);
                    bf_evaluator_free(ev);
                }
        teardown(&fx);
    }
}

static void input_faults_are_copied(void **state)
{
    (void)state;
    fixture fx = setup(4, 4, 0);
    const bf_model *m = fx.m;
    int64_t hw = fx.hw;
    float *xf = malloc(sizeof(float) * N * C * 16), *yf = malloc(sizeof(float) * N * C * 16);
    assert_true(xf && yf);
    /* the sign bit of sample 5's element 7, then of element 20 in every sample */
    bf_value_fault f[2] = {{.value = bf_model_find_value(m, "x"), .sample = 5, .index = 7, .model = BF_FAULT_BITFLIP,
                            .mask = 0x80000000u, .repr = BF_REPR_FP32},
                           {.value = bf_model_find_value(m, "x"), .sample = -1, .index = 20, .model = BF_FAULT_BITFLIP,
                            .mask = 0x80000000u, .repr = BF_REPR_FP32}};
    for (int threads = 1; threads <= 2; threads++)
        for (int every = 0; every <= 1; every++) {
            memcpy(xf, fx.x, sizeof(float) * N * C * 16);
            for (int64_t s = 0; s < N; s++)
                if (every || s == 5) xf[s * C * hw + f[every].index] = -xf[s * C * hw + f[every].index];
            reference(xf, hw, yf);
            bf_evaluator *ev = evaluator(m, fx.ds, 4, threads, 1);
            bf_error err = {0};
            if (bf_evaluator_set_value_faults(ev, &f[every], 1, &err) != BF_OK) fail_msg("%s", err.msg);
            /* batches 0, 1 and 2 (2 samples): the one holding sample 5, or all, copied */
            uint64_t v = pass(ev, fx.ds, yf, C * hw, every ? "a fault on x in every sample" : "a fault on x in sample 5");
            if (threads == 1) assert_int_equal(v, every ? 0 : 2);
            if (bf_evaluator_set_value_faults(ev, NULL, 0, &err) != BF_OK) fail_msg("%s", err.msg);
            v = pass(ev, fx.ds, fx.y, C * hw, "the faults taken off");
            if (threads == 1) assert_int_equal(v, 3);
            bf_evaluator_free(ev);
        }
    teardown(&fx);
    free(xf), free(yf);
}

static void a_cast_is_copied(void **state)
{
    (void)state;
    fixture fx = setup(4, 4, 1);
    assert_int_equal(bf_dataset_find(fx.ds, "x")->dtype, BF_F16);
    bf_evaluator *ev = evaluator(fx.m, fx.ds, 4, 1, 1);
    assert_int_equal(pass(ev, fx.ds, fx.y, C * 16, "a float16 eval set"), 0);
    bf_evaluator_free(ev);
    teardown(&fx);
}

/* A graph of more inputs than VIEW_INPUTS (eval.c: 8): x0 + x1 + ... + x9,
 * each [B, 16] (rows of 64 bytes: every batch aligned). The first eight are
 * viewed in every batch, the last two copied, and the sums are the
 * hand-worked ones. */
#define WIDE 10
static void inputs_past_the_bound_are_copied(void **state)
{
    (void)state;
    tg_graph g = {.opset = 13};
    char names[WIDE][16], sums[WIDE][16];   /* 16: gcc -O0 sizes %d for any int */
    th_st_tensor t[WIDE];
    float x[WIDE][N * 16], want[N * 16] = {0};
    for (int i = 0; i < WIDE; i++) {
        snprintf(names[i], sizeof names[i], "x%d", i);
        snprintf(sums[i], sizeof sums[i], i == WIDE - 1 ? "y" : "s%d", i);
        g.ins[g.n_ins++] = tg_value_info(&g, names[i], 1, 2, (int64_t[]){-1, 16});
        if (i > 0)
            tg_node(&g, "Add", sums[i], (const char *[]){i == 1 ? names[0] : sums[i - 1], names[i]}, 2, sums[i]);
        fill(x[i], N * 16);
        for (int k = 0; k < N * 16; k++) x[i][k] += (float)i;   /* quarters: every sum exact */
        for (int k = 0; k < N * 16; k++) want[k] += x[i][k];
        t[i] = (th_st_tensor){.name = names[i], .dtype = "F32", .ndim = 2, .dims = {N, 16}, .data = x[i],
                              .bytes = sizeof x[i]};
    }
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, (int64_t[]){-1, 16});
    bf_model *m = tg_load(&g, "wide");
    assert_int_equal(bf_model_num_inputs(m), WIDE);
    size_t len = 0;
    uint8_t *buf = th_st_build(t, WIDE, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, len, "wide", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    free(buf);
    for (int threads = 1; threads <= 2; threads++) {
        bf_evaluator *ev = evaluator(m, ds, 4, threads, 1);
        uint64_t v0 = views(ev);
        bf_eval_result r = {0};
        if (bf_evaluator_run(ev, NULL, 0, &r, &err) != BF_OK) fail_msg("%s", err.msg);
        assert_int_equal(r.out_cols, 16);
        assert_memory_equal(r.outputs, want, sizeof want);
        /* three batches (4, 4 and 2 samples), eight inputs viewed in each */
        if (threads == 1) assert_int_equal(views(ev) - v0, 3 * 8);
        for (int i = 0; i < WIDE; i++) assert_memory_equal(bf_dataset_find(ds, names[i])->data, x[i], sizeof x[i]);
        bf_evaluator_free(ev);
    }
    bf_dataset_free(ds);
    bf_model_free(m);
}

static void allocation_failures_fail_cleanly(void **state)
{
    (void)state;
    bf_model *m = graph(4, 4);
    float *x = malloc(sizeof(float) * N * C * 16), *y = malloc(sizeof(float) * N * C * 16);
    assert_true(x && y);
    fill(x, N * C * 16);
    reference(x, 16, y);
    th_st_tensor t = {.name = "x", .dtype = "F32", .ndim = 4, .dims = {N, C, 4, 4}, .data = x, .bytes = sizeof(float) * N * C * 16};
    size_t len = 0;
    uint8_t *buf = th_st_build(&t, 1, &len);
    int done = 0;
    for (long n = 0; n < 100000 && !done; n++) {
        bf_dataset *ds = NULL;
        bf_evaluator *ev = NULL;
        bf_eval_opts o = {.batch = 3, .threads = 2, .fuse_activations = 1, .share_buffers = 1};
        bf_eval_result r = {0};
        bf_error err = {0};
        bf_test_alloc_fail_after(n);
        bf_status st = bf_dataset_load_buffer(buf, len, "inplace", &ds, &err);
        if (st == BF_OK) st = bf_evaluator_create(m, ds, &o, &ev, &err);
        if (st == BF_OK) st = bf_evaluator_run(ev, NULL, 0, &r, &err);
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) {
            done = 1;
            assert_int_equal(r.out_cols, C * 16);
            assert_memory_equal(r.outputs, y, sizeof(float) * N * C * 16);
            assert_memory_equal(bf_dataset_find(ds, "x")->data, x, sizeof(float) * N * C * 16);
        } else if (st != BF_ENOMEM) {
            fail_msg("allocation %ld refused gave status %d: %s", n, st, err.msg);
        }
        bf_evaluator_free(ev);
        bf_dataset_free(ds);
    }
    assert_true(done);
    free(buf);
    bf_model_free(m);
    free(x), free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batches_read_in_place),
        cmocka_unit_test(input_faults_are_copied),
        cmocka_unit_test(a_cast_is_copied),
        cmocka_unit_test(inputs_past_the_bound_are_copied),
        cmocka_unit_test(allocation_failures_fail_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
