/* A MatMul's bias Add and Gelu fused into the product's epilogue
 * (plan_build.c's MatMul -> Add(bias) [-> Gelu] chains; sgemm.h,
 * bf__sgemm_colepi; docs/ENGINE.md, "A bias and Gelu fused into the
 * MatMul") give the bits of the steps one by one:
 *
 *   - the kernel on every CPU path this machine has (the scalar reference,
 *     AVX2, AVX-512), with and without op(B) packed whole, the bias as the
 *     Add's A and as its B, with and without the Gelu, on shapes whose
 *     columns end inside a panel and whose rows end inside a block, against
 *     the steps written out plainly: each element's in-order fmaf chain,
 *     then the Add's `a + b`, then the Gelu step's own kernel over the row.
 *     A, B and the bias hold NaNs, infinities and -0 (a NaN compares as a
 *     NaN: its payload is left open, docs/ENGINE.md "Same bits on every CPU").
 *   - a graph built here (MatMul -> Add(b, mm) -> the exporter's GELU,
 *     Div/Erf/Add/Mul/Mul, which the loader fuses into one Gelu; MatMul ->
 *     Add(mm, b) read twice; and the refusals: a MatMul read twice, a bias
 *     that is no row vector): the plan with fusion against the one without,
 *     every output, at every SIMD level, on inputs with NaN, infinities and
 *     -0, under value faults on each value of a chain (those before its last
 *     step make it run unfused) and a weight fault in a bias.
 *
 * A planted error (the bias added to the wrong column, or the Add's
 * operands swapped) fails the first part: see the commit that added this. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "exec/op.h"
#include "exec/ops/fastmath_impl.h"
#include "exec/ops/sgemm.h"
#include "exec/plan_impl.h"
#include "alloc_fail.h"
#include "exec/step_access.h"
#include "onnx_graph.h"

static uint64_t rs = 0x2545F4914F6CDD1Dull;

static float rnd(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    double u = (double)(rs >> 11) / 9007199254740992.0;
    return (float)((u * 2.0 - 1.0) * ldexp(1.0, (int)(rs % 7) - 3));
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* x[0..n) random, with the special values planted every `every` floats */
static void fill_special(float *x, size_t n, size_t every)
{
    static const uint32_t sp[] = {0x7fc00123u, 0xffc00456u, 0x7f800000u, 0xff800000u, 0x80000000u, 0x00000001u};
    for (size_t i = 0; i < n; i++) x[i] = rnd();
    for (size_t i = 3, k = 0; every && i < n; i += every, k++) x[i] = bits_f(sp[k % 6]);
}

/* same bits, or both NaN */
static void same_floats(const float *x, const float *y, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i]) && isnan(y[i])) continue;
        if (memcmp(&x[i], &y[i], sizeof(float)) != 0)
            fail_msg("%s: element %zu: %a (fused) against %a (steps)", what, i, (double)x[i], (double)y[i]);
    }
}

/* the steps one by one, written out */
static void steps_ref(int m, int n, int k, const float *a, const float *b, const float *bias, int bias_a, int gelu,
                      float *y)
{
    bf__map_fn g = bf__gelu_kernel();
    float *t = malloc(sizeof(float) * (size_t)n + 1);
    assert_non_null(t);
    for (int i = 0; i < m; i++) {
        float *yr = y + (size_t)i * n;
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++) s = fmaf(a[(size_t)i * k + p], b[(size_t)p * n + j], s);
            yr[j] = bias_a ? bias[j] + s : s + bias[j];
        }
        if (gelu) {
            g(t, yr, n);
            memcpy(yr, t, sizeof(float) * (size_t)n);
        }
    }
    free(t);
}

static void kernel_levels(void **state)
{
    (void)state;
    static const int shapes[][3] = {{1, 1, 1},   {5, 7, 3},    {13, 16, 8},  {12, 33, 64}, {25, 40, 300},
                                    {40, 100, 24}, {30, 64, 384}, {7, 385, 20}, {64, 48, 260}};
    static const int levels[] = {BF_SGEMM_REF, BF_SGEMM_AVX2, BF_SGEMM_AVX512};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n);
        float *bias = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)m * n);
        float *want = malloc(sizeof(float) * (size_t)m * n);
        size_t wf = bf__sgemm_work_floats(m, n, k, 0, n);
        float *work = wf ? aligned_alloc(64, (wf * sizeof(float) + 63) / 64 * 64) : NULL;
        assert_true(a && b && bias && y && want && (!wf || work));
        fill_special(a, (size_t)m * k, 97);
        fill_special(b, (size_t)k * n, 131);
        fill_special(bias, (size_t)n, 11);
        for (int bias_a = 0; bias_a < 2; bias_a++)
            for (int gelu = 0; gelu < 2; gelu++) {
                steps_ref(m, n, k, a, b, bias, bias_a, gelu, want);
                for (size_t l = 0; l < 3; l++)
                    for (int w = 0; w < 2; w++) {
                        bf__act act = {.lo = -INFINITY, .hi = INFINITY, .cbias = bias, .cbias_a = bias_a,
                                       .map = gelu ? bf__gelu_kernel() : NULL};
                        memset(y, 0x5a, sizeof(float) * (size_t)m * n);
                        bf__sgemm_colepi(levels[l], m, n, k, a, k, b, n, &act, y, n, w ? work : NULL, NULL);
                        char what[128];
                        snprintf(what, sizeof what, "%dx%dx%d level %d bias_a %d gelu %d work %d", m, n, k,
                                 levels[l], bias_a, gelu, w && work);
                        same_floats(y, want, (size_t)m * n, what);
                    }
            }
        free(a), free(b), free(bias), free(y), free(want), free(work);
    }
}

/* ---- the plan: fused against unfused ---- */

#define T 5   /* tokens per sample */
#define E 24
#define H 40
#define O 33
#define BATCH 3

static void init_rand(tg_graph *g, const char *name, int ndim, const int64_t *dims)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= dims[d];
    float *v = tg_alloc(g, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = rnd();
    tg_init_f32(g, name, ndim, dims, v);
}

/* a Constant node, as exporters write the GELU's constants (an
 * initializer would be a parameter, which the loader's GELU pattern does
 * not take for a constant) */
static void init_scalar(tg_graph *g, const char *name, float v)
{
    Onnx__NodeProto *n = tg_node(g, "Constant", name, NULL, 0, name);
    tg_attr_float(g, n, "value_float", v);
}

/* x [batch, T, E]:
 *   mm1 = x @ w1; h1 = b1 + mm1; gelu (the exporter's five nodes) -> g1   fused: MatMul -> Add -> Gelu
 *   mm2 = g1 @ w2; h2 = mm2 + b2 (mm as A); out_a = Relu(h2), out_b = h2 * h2   fused: MatMul -> Add
 *   mm3 = x @ w3, read by an Add and a graph output: not fused
 *   mm4 = x @ w4; h4 = mm4 + c4 ([T, O]: not a row vector): not fused */
static bf_model *graph(void)
{
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 3, (int64_t[]){-1, T, E});
    init_rand(&g, "w1", 2, (int64_t[]){E, H});
    init_rand(&g, "b1", 1, (int64_t[]){H});
    init_rand(&g, "w2", 2, (int64_t[]){H, O});
    init_rand(&g, "b2", 3, (int64_t[]){1, 1, O});
    init_rand(&g, "w3", 2, (int64_t[]){E, O});
    init_rand(&g, "b3", 1, (int64_t[]){O});
    init_rand(&g, "w4", 2, (int64_t[]){E, O});
    init_rand(&g, "c4", 2, (int64_t[]){T, O});
    init_scalar(&g, "sqrt2", 1.4142135381698608f);
    init_scalar(&g, "one", 1.0f);
    init_scalar(&g, "half", 0.5f);
    tg_node(&g, "MatMul", "mm1", (const char *[]){"x", "w1"}, 2, "mm1");
    tg_node(&g, "Add", "h1", (const char *[]){"b1", "mm1"}, 2, "h1");
    tg_node(&g, "Div", "gd", (const char *[]){"h1", "sqrt2"}, 2, "gd");
    tg_node(&g, "Erf", "ge", (const char *[]){"gd"}, 1, "ge");
    tg_node(&g, "Add", "ga", (const char *[]){"ge", "one"}, 2, "ga");
    tg_node(&g, "Mul", "gm", (const char *[]){"h1", "ga"}, 2, "gm");
    tg_node(&g, "Mul", "g1", (const char *[]){"gm", "half"}, 2, "g1");
    tg_node(&g, "MatMul", "mm2", (const char *[]){"g1", "w2"}, 2, "mm2");
    tg_node(&g, "Add", "h2", (const char *[]){"mm2", "b2"}, 2, "h2");
    tg_node(&g, "Relu", "out_a", (const char *[]){"h2"}, 1, "out_a");
    tg_node(&g, "Mul", "out_b", (const char *[]){"h2", "h2"}, 2, "out_b");
    tg_node(&g, "MatMul", "mm3", (const char *[]){"x", "w3"}, 2, "mm3");
    tg_node(&g, "Add", "h3", (const char *[]){"b3", "mm3"}, 2, "h3");
    tg_node(&g, "MatMul", "mm4", (const char *[]){"x", "w4"}, 2, "mm4");
    tg_node(&g, "Add", "h4", (const char *[]){"mm4", "c4"}, 2, "h4");
    static const char *const outs[] = {"out_a", "out_b", "mm3", "h3", "h4"};
    for (size_t i = 0; i < 5; i++) g.outs[g.n_outs++] = tg_value_info(&g, outs[i], 1, -1, NULL);
    bf_model *m = tg_load(&g, "matmul_fuse");
    return m;
}

static bf_plan *plan(const bf_model *m, int fuse, int share) { return tg_plan(m, BATCH, fuse, share); }

static void run(bf_plan *p)
{
    bf_error err = {0};
    rs = 0x9E3779B97F4A7C15ull;   /* the same input for every plan and run */
    bf_tensor *t = bf_plan_input(p, 0);
    fill_special(t->data, (size_t)bf_tensor_numel(t), 113);
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
}

static void same_outputs(const bf_model *m, const bf_plan *a, const bf_plan *b, const char *what)
{
    for (size_t i = 0; i < bf_model_num_outputs(m); i++) {
        const bf_tensor *x = bf_plan_output(a, i), *y = bf_plan_output(b, i);
        assert_int_equal(bf_tensor_nbytes(x), bf_tensor_nbytes(y));
        char w[160];
        snprintf(w, sizeof w, "%s, output %zu", what, i);
        same_floats(x->data, y->data, (size_t)bf_tensor_numel(x), w);
    }
}

static int64_t value(const bf_model *m, const char *name)
{
    int64_t v = bf_model_find_value(m, name);
    if (v < 0) fail_msg("no value '%s'", name);
    return v;
}

/* Parameter `name` of m flipped at element k (bit b) in plan p's own copy. */
static void flip_param(const bf_model *m, bf_plan *p, const char *name, int64_t k, int b)
{
    bf_error err = {0};
    float *d = NULL;
    int64_t i = bf_model_find_param(m, name);
    if (i < 0) fail_msg("no parameter '%s'", name);
    if (bf_plan_param_mut(p, (size_t)i, &d, &err) != BF_OK) fail_msg("%s", err.msg);
    uint32_t u;
    memcpy(&u, &d[k], 4);
    u ^= 1u << b;
    memcpy(&d[k], &u, 4);
}

static void plan_levels(void **state)
{
    (void)state;
    bf_model *m = graph();
    static const char *const lv[] = {"ref", "avx2", "avx512"};
    for (size_t l = 0; l < 3; l++) {
        setenv("BITFLIP_SIMD", lv[l], 1);
        bf_plan *a = plan(m, 0, 0), *b = plan(m, 1, 0), *c = plan(m, 1, 1);
        run(a), run(b), run(c);
        size_t sites = 0;
        assert_int_equal(bf_plan_num_fused(b, &sites), 2);
        assert_int_equal(sites, 2);
        assert_int_equal(bf_plan_num_fused(c, NULL), 2);
        same_outputs(m, a, b, lv[l]);
        same_outputs(m, a, c, lv[l]);
        /* the specials reach the outputs */
        for (size_t q = 0; q < 2; q++) {
            const bf_tensor *o = bf_plan_output(a, q);
            int nan = 0, fin = 0;
            for (int64_t i = 0; i < bf_tensor_numel(o); i++) {
                float v = ((float *)o->data)[i];
                nan += isnan(v), fin += isfinite(v);
            }
            assert_true(nan > 0 && fin > 0);
        }

        /* value faults on each value of the chains: before the last step the
         * chain runs unfused, on the last it stays fused */
        static const char *const at[] = {"mm1", "h1", "g1", "mm2", "h2"};
        static const int fused[] = {1, 1, 2, 1, 2};
        bf_error err = {0};
        for (size_t k = 0; k < 5; k++) {
            bf_value_fault f = {.value = value(m, at[k]), .sample = 1, .index = 7, .model = BF_FAULT_BITFLIP,
                                .mask = 1u << 29, .repr = BF_REPR_FP32};
            if (bf_plan_set_value_faults(a, &f, 1, &err) != BF_OK || bf_plan_set_value_faults(b, &f, 1, &err) != BF_OK ||
                bf_plan_set_value_faults(c, &f, 1, &err) != BF_OK)
                fail_msg("%s", err.msg);
            run(a), run(b), run(c);
            assert_int_equal(bf_plan_num_fused(b, NULL), fused[k]);
            assert_int_equal(bf_plan_num_fused(c, NULL), fused[k]);
            same_outputs(m, a, b, at[k]);
            same_outputs(m, a, c, at[k]);
            float oa, na, ob, nb;
            bf_plan_value_fault_seen(a, 0, &oa, &na);
            bf_plan_value_fault_seen(b, 0, &ob, &nb);
            assert_true((oa == ob || (isnan(oa) && isnan(ob))) && (na == nb || (isnan(na) && isnan(nb))));
        }
        if (bf_plan_set_value_faults(a, NULL, 0, &err) != BF_OK || bf_plan_set_value_faults(b, NULL, 0, &err) != BF_OK)
            fail_msg("%s", err.msg);
        /* a weight fault in b1 (the fused epilogue reads the plan's copy as it
         * holds now): an exponent bit, in each plan's own copy, then back */
        for (int k = 0; k < 2; k++) {
            flip_param(m, a, "b1", 5, 30), flip_param(m, b, "b1", 5, 30);
            if (k) break;
            run(a), run(b);
            assert_int_equal(bf_plan_num_fused(b, NULL), 2);
            same_outputs(m, a, b, "weight fault in b1");
        }
        bf_plan_free(a), bf_plan_free(b), bf_plan_free(c);
    }
    unsetenv("BITFLIP_SIMD");
    bf_model_free(m);
}

/* The interaction of a DLRM, X @ X^T: a Transpose (perm 0, 2, 1) whose
 * only reader is the batched MatMul, with X its A, is folded into the
 * product's read (plan_build.c, find_tfolds): a plan that fuses skips it and
 * reads X transposed (bf__ctx.bt), and gives the unfused plan's outputs
 * bit for bit on every CPU path, NaNs, infinities and -0 in X included; a
 * value fault on the Transpose's output runs both as steps (the fault
 * lands), one on the MatMul's output lands too. A second graph reads
 * the Transpose twice (also a graph output): no fold. [B, 27, 16] as the
 * Criteo-shaped DLRM's, 27 x 27 x 16 past the plain bmm's size. */
static bf_model *tfold_graph(int twice)
{
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 3, (int64_t[]){-1, 27, 16});
    Onnx__NodeProto *t = tg_node(&g, "Transpose", "t", (const char *[]){"x"}, 1, "xt");
    tg_attr_ints(&g, t, "perm", 3, (int64_t[]){0, 2, 1});
    tg_node(&g, "MatMul", "z", (const char *[]){"x", "xt"}, 2, "z");
    g.outs[g.n_outs++] = tg_value_info(&g, "z", 1, -1, NULL);
    if (twice) g.outs[g.n_outs++] = tg_value_info(&g, "xt", 1, -1, NULL);
    bf_model *m = tg_load(&g, "tfold");
    return m;
}

static void transpose_folded(void **state)
{
    (void)state;
    static const char *const levels[] = {"avx512", "avx2", "ref"};
    for (int twice = 0; twice < 2; twice++) {
        bf_model *m = tfold_graph(twice);
        for (int l = 0; l < 3; l++) {
            setenv("BITFLIP_SIMD", levels[l], 1);
            bf_plan *a = plan(m, 0, 0), *b = plan(m, 1, 1);
            assert_null(a->tab.tfold);   /* only plans that fuse */
            if (twice) assert_null(b->tab.tfold);
            else assert_non_null(b->tab.tfold);
            run(a), run(b);
            same_outputs(m, a, b, levels[l]);
            static const char *const at[] = {"xt", "z"};
            for (int k = 0; k < 2; k++) {
                bf_value_fault f = {.value = value(m, at[k]), .sample = 2, .index = 40,
                                    .model = BF_FAULT_BITFLIP, .mask = 1u << 30, .repr = BF_REPR_FP32};
                bf_error err = {0};
                if (bf_plan_set_value_faults(a, &f, 1, &err) != BF_OK ||
                    bf_plan_set_value_faults(b, &f, 1, &err) != BF_OK)
                    fail_msg("%s", err.msg);
                run(a), run(b);
                same_outputs(m, a, b, at[k]);
                float was, now;
                bf_plan_value_fault_seen(b, 0, &was, &now);
                assert_true(was != now);
                if (bf_plan_set_value_faults(a, NULL, 0, &err) != BF_OK ||
                    bf_plan_set_value_faults(b, NULL, 0, &err) != BF_OK)
                    fail_msg("%s", err.msg);
            }
            run(a), run(b);
            same_outputs(m, a, b, "faults gone");
            bf_plan_free(a), bf_plan_free(b);
        }
        bf_model_free(m);
    }
    unsetenv("BITFLIP_SIMD");
}

/* Out of memory for the fold's table (plan_fuse.c, bf__plan_find_tfolds,
 * the plan's last allocation): the plan is still made, folds nothing and
 * runs the Transpose as a step, so its outputs are the unfused plan's bit
 * for bit. Every earlier allocation refused fails the build with ENOMEM.
 * The countdown allocator refuses the n-th allocation and every one after
 * it: each n from 0 to the count of a clean build is tried, and at least
 * one (the table) must give a plan. */
static void transpose_fold_out_of_memory(void **state)
{
    (void)state;
    bf_model *m = tfold_graph(0);
    bf_plan *a = plan(m, 0, 0);
    run(a);
    bf_plan_opts o = {.fuse_activations = 1, .share_buffers = 1};
    bf_plan *b = NULL;
    bf_error err = {0};
    bf_test_alloc_fail_after(1L << 30);   /* counts, refuses none */
    if (bf_plan_create_opts(m, BATCH, &o, &b, &err) != BF_OK) fail_msg("%s", err.msg);
    long n_allocs = bf_test_alloc_count();
    bf_test_alloc_fail_after(-1);
    assert_non_null(b->tab.tfold);   /* a clean build folds it */
    bf_plan_free(b);
    int made = 0;
    for (long n = 0; n < n_allocs; n++) {
        b = NULL;
        err = (bf_error){0};
        bf_test_alloc_fail_after(n);
        bf_status st = bf_plan_create_opts(m, BATCH, &o, &b, &err);
        long refused = bf_test_alloc_failures();
        bf_test_alloc_fail_after(-1);
        assert_true(refused > 0);
        if (st != BF_OK) {
            assert_int_equal(st, BF_ENOMEM);
            assert_null(b);
            continue;
        }
        made++;
        assert_null(b->tab.tfold);   /* the fallback: no fold */
        run(b);
        same_outputs(m, a, b, "fold table refused");
        bf_plan_free(b);
    }
    assert_true(made >= 1);
    bf_plan_free(a);
    bf_model_free(m);
}

/* A batched MatMul's Softmax over its last axis run on each output matrix
 * right after its product (plan_fuse.c, matmul_softmax; op.h, bf__act's
 * rows): x [B, 20, 16], y [B, 16, 25] inputs;
 *   p1 = Softmax(x @ y)                        fused (rows of 25: 16 + 9)
 *   p2 = Softmax(x @ Transpose(x, 0 2 1))      fused, the Transpose folded too (rows of 20: 16 + 4)
 *   p3 = Softmax(x @ y, axis 1)                not fused (not the last axis)
 *   s4 = x @ y, a graph output, and Softmax(s4)   not fused (read twice)
 * The fused plan's outputs against the unfused plan's and against the
 * steps written out here (each element's in-order fmaf chain; the row's
 * NaN-sticky max, exp_f32 of x - max, the sum in eight double lanes in
 * order, the tail last, scaled by (float)(1 / sum): elementwise.c's
 * Softmax) at every SIMD level, with NaN, infinities and -0 in the inputs;
 * a value fault on a product runs its pair unfused, one on a Softmax
 * keeps it fused. */
#define SX 20
#define SK 16
#define SY 25

static bf_model *softmax_graph(void)
{
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 3, (int64_t[]){-1, SX, SK});
    g.ins[g.n_ins++] = tg_value_info(&g, "y", 1, 3, (int64_t[]){-1, SK, SY});
    tg_node(&g, "MatMul", "s1", (const char *[]){"x", "y"}, 2, "s1");
    tg_node(&g, "Softmax", "p1", (const char *[]){"s1"}, 1, "p1");
    Onnx__NodeProto *t = tg_node(&g, "Transpose", "t", (const char *[]){"x"}, 1, "xt");
    tg_attr_ints(&g, t, "perm", 3, (int64_t[]){0, 2, 1});
    tg_node(&g, "MatMul", "s2", (const char *[]){"x", "xt"}, 2, "s2");
    tg_node(&g, "Softmax", "p2", (const char *[]){"s2"}, 1, "p2");
    tg_node(&g, "MatMul", "s3", (const char *[]){"x", "y"}, 2, "s3");
    Onnx__NodeProto *p3 = tg_node(&g, "Softmax", "p3", (const char *[]){"s3"}, 1, "p3");
    tg_attr_int(&g, p3, "axis", 1);
    tg_node(&g, "MatMul", "s4", (const char *[]){"x", "y"}, 2, "s4");
    tg_node(&g, "Softmax", "p4", (const char *[]){"s4"}, 1, "p4");
    static const char *const outs[] = {"p1", "p2", "p3", "s4", "p4"};
    for (size_t i = 0; i < 5; i++) g.outs[g.n_outs++] = tg_value_info(&g, outs[i], 1, -1, NULL);
    bf_model *m = tg_load(&g, "matmul_softmax");
    return m;
}

static void softmax_inputs(bf_plan *p)
{
    bf_error err = {0};
    rs = 0x51ED2701F3A5C9B1ull;
    for (size_t i = 0; i < 2; i++) {
        bf_tensor *t = bf_plan_input(p, i);
        fill_special(t->data, (size_t)bf_tensor_numel(t), i ? 389 : 277);
    }
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
}

/* y[0..n) = Softmax of x[0..n), elementwise.c's operations written out */
static void softmax_ref(const float *x, float *y, int n)
{
    float m = x[0];
    for (int i = 0; i < n; i++) m = (x[i] > m || x[i] != x[i]) ? x[i] : m;
    double s[8] = {0}, t = 0;
    for (int i = 0; i < n; i++) y[i] = exp_f32(x[i] - m);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += y[i + j];
    for (; i < n; i++) t += y[i];
    float r = (float)(1.0 / (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t));
    for (i = 0; i < n; i++) y[i] *= r;
}

/* p1 and p2 of plan p (run) against the steps written out */
static void softmax_against_ref(bf_plan *p, const char *what)
{
    const float *x = bf_plan_input(p, 0)->data, *yv = bf_plan_input(p, 1)->data;
    float s[SY], want[SY];
    for (int which = 0; which < 2; which++) {
        int n = which ? SX : SY;
        const float *got = bf_plan_output(p, (size_t)which)->data;
        for (int b = 0; b < BATCH; b++)
            for (int i = 0; i < SX; i++) {
                const float *xr = x + ((size_t)b * SX + i) * SK;
                for (int j = 0; j < n; j++) {
                    float acc = 0.0f;
                    for (int q = 0; q < SK; q++)
                        acc = fmaf(xr[q], which ? x[((size_t)b * SX + j) * SK + q] : yv[((size_t)b * SK + q) * SY + j], acc);
                    s[j] = acc;
                }
                softmax_ref(s, want, n);
                char w[160];
                snprintf(w, sizeof w, "%s: p%d sample %d row %d", what, which + 1, b, i);
                same_floats(got + ((size_t)b * SX + i) * n, want, (size_t)n, w);
            }
    }
}

static void softmax_fused(void **state)
{
    (void)state;
    bf_model *m = softmax_graph();
    static const char *const lv[] = {"ref", "avx2", "avx512"};
    for (size_t l = 0; l < 3; l++) {
        setenv("BITFLIP_SIMD", lv[l], 1);
        bf_plan *a = plan(m, 0, 0), *b = plan(m, 1, 0), *c = plan(m, 1, 1);
        softmax_inputs(a), softmax_inputs(b), softmax_inputs(c);
        assert_int_equal(bf_plan_num_fused(a, NULL), 0);
        assert_int_equal(bf_plan_num_fused(b, NULL), 2);
        assert_int_equal(bf_plan_num_fused(c, NULL), 2);
        assert_non_null(c->tab.tfold);
        same_outputs(m, a, b, lv[l]);
        same_outputs(m, a, c, lv[l]);
        softmax_against_ref(a, lv[l]);
        softmax_against_ref(b, lv[l]);   /* (c's shared arena reuses its inputs' bytes) */
        /* some rows NaN (a NaN in x or y), some finite */
        const bf_tensor *o = bf_plan_output(c, 0);
        int nan = 0, fin = 0;
        for (int64_t i = 0; i < bf_tensor_numel(o); i++) {
            float v = ((float *)o->data)[i];
            nan += isnan(v), fin += isfinite(v);
        }
        assert_true(nan > 0 && fin > 0);
        static const char *const at[] = {"s1", "p1", "s2", "p2"};
        static const int fused[] = {1, 2, 1, 2};
        bf_error err = {0};
        for (size_t k = 0; k < 4; k++) {
            bf_value_fault f = {.value = value(m, at[k]), .sample = 1, .index = 31, .model = BF_FAULT_BITFLIP,
                                .mask = 1u << 30, .repr = BF_REPR_FP32};
            if (bf_plan_set_value_faults(a, &f, 1, &err) != BF_OK || bf_plan_set_value_faults(c, &f, 1, &err) != BF_OK)
                fail_msg("%s", err.msg);
            softmax_inputs(a), softmax_inputs(c);
            assert_int_equal(bf_plan_num_fused(c, NULL), fused[k]);
            same_outputs(m, a, c, at[k]);
            float was, now;
            bf_plan_value_fault_seen(c, 0, &was, &now);
            assert_true(memcmp(&was, &now, sizeof was) != 0);
        }
        bf_plan_free(a), bf_plan_free(b), bf_plan_free(c);
    }
    unsetenv("BITFLIP_SIMD");
    bf_model_free(m);
}

/* A residual Add after a MatMul's bias Add, in plans that fuse (plan_fuse.c,
 * matmul_chain; op.h, bf__act's res): x [B, T, E];
 *   r5 = x + (x @ w5 + b5)              fused, the residual as the Add's A
 *   r6 = (b6 + x @ w6) + x, then Relu   fused up to r6 (its Relu runs apart)
 *   r7 = (x @ w7 + b7) + q, q = Sigmoid(x) after the MatMul: the bias alone
 * The fused plan's outputs against the unfused plan's at every SIMD level,
 * with NaNs (two NaNs added keep the Add's A's), infinities and -0; value
 * faults before a chain's last step run it unfused (h5's: the residual Add
 * is in its chain), on r5 it stays fused. */
static bf_model *residual_graph(void)
{
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 3, (int64_t[]){-1, T, E});
    static const char *const w[] = {"w5", "w6", "w7"}, *const b[] = {"b5", "b6", "b7"};
    for (int i = 0; i < 3; i++) {
        init_rand(&g, w[i], 2, (int64_t[]){E, E});
        init_rand(&g, b[i], 1, (int64_t[]){E});
    }
    tg_node(&g, "MatMul", "mm5", (const char *[]){"x", "w5"}, 2, "mm5");
    tg_node(&g, "Add", "h5", (const char *[]){"mm5", "b5"}, 2, "h5");
    tg_node(&g, "Add", "r5", (const char *[]){"x", "h5"}, 2, "r5");
    tg_node(&g, "MatMul", "mm6", (const char *[]){"x", "w6"}, 2, "mm6");
    tg_node(&g, "Add", "h6", (const char *[]){"b6", "mm6"}, 2, "h6");
    tg_node(&g, "Add", "r6", (const char *[]){"h6", "x"}, 2, "r6");
    tg_node(&g, "Relu", "o6", (const char *[]){"r6"}, 1, "o6");
    tg_node(&g, "MatMul", "mm7", (const char *[]){"x", "w7"}, 2, "mm7");
    tg_node(&g, "Sigmoid", "q", (const char *[]){"x"}, 1, "q");
    tg_node(&g, "Add", "h7", (const char *[]){"mm7", "b7"}, 2, "h7");
    tg_node(&g, "Add", "r7", (const char *[]){"h7", "q"}, 2, "r7");
    static const char *const outs[] = {"r5", "o6", "r7"};
    for (size_t i = 0; i < 3; i++) g.outs[g.n_outs++] = tg_value_info(&g, outs[i], 1, -1, NULL);
    bf_model *m = tg_load(&g, "matmul_residual");
    return m;
}

static void residual_fused(void **state)
{
    (void)state;
    bf_model *m = residual_graph();
    static const char *const lv[] = {"ref", "avx2", "avx512"};
    for (size_t l = 0; l < 3; l++) {
        setenv("BITFLIP_SIMD", lv[l], 1);
        bf_plan *a = plan(m, 0, 0), *b = plan(m, 1, 0), *c = plan(m, 1, 1);
        run(a), run(b), run(c);
        assert_int_equal(bf_plan_num_fused(a, NULL), 0);
        assert_int_equal(bf_plan_num_fused(b, NULL), 3);
        assert_int_equal(bf_plan_num_fused(c, NULL), 3);
        same_outputs(m, a, b, lv[l]);
        same_outputs(m, a, c, lv[l]);
        static const char *const at[] = {"mm5", "h5", "r5"};
        static const int fused[] = {2, 2, 3};
        bf_error err = {0};
        for (size_t k = 0; k < 3; k++) {
            bf_value_fault f = {.value = value(m, at[k]), .sample = 2, .index = 17, .model = BF_FAULT_BITFLIP,
                                .mask = 1u << 30, .repr = BF_REPR_FP32};
            if (bf_plan_set_value_faults(a, &f, 1, &err) != BF_OK || bf_plan_set_value_faults(c, &f, 1, &err) != BF_OK)
                fail_msg("%s", err.msg);
            run(a), run(c);
            assert_int_equal(bf_plan_num_fused(c, NULL), fused[k]);
            same_outputs(m, a, c, at[k]);
        }
        bf_plan_free(a), bf_plan_free(b), bf_plan_free(c);
    }
    unsetenv("BITFLIP_SIMD");
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kernel_levels),
        cmocka_unit_test(plan_levels),
        cmocka_unit_test(transpose_folded),
        cmocka_unit_test(transpose_fold_out_of_memory),
        cmocka_unit_test(softmax_fused),
        cmocka_unit_test(residual_fused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
