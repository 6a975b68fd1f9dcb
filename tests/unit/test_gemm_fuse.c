/* A plan that fuses (bf_plan_opts.fuse_activations) a Gemm's only Relu or
 * Clip into the product's epilogue (plan_build.c, find_fusions; linalg.c,
 * gemm_run) gives the outputs of a plan that does not, bit for bit, at every
 * CPU path of the product (BITFLIP_SIMD: avx512, avx2, ref), and fuses the
 * pairs it may and no others. The graph, built here: an MLP
 *
 *   x [B, 24] -> Gemm(W1^T, b1) -> Relu -> Gemm(W2^T, b2) -> Clip -> ...
 *
 * spelled out in mlp(): five fusable pairs (transB with a bias row, a Clip,
 * plain B with alpha and a bias row, C a full [B, n] matrix with beta,
 * n = 1),
 * and three Gemms
 * that must not fuse (output read twice; a graph output; HardSwish after
 * it). Inputs hold NaNs, infinities and -0; a value fault on a Gemm's
 * output makes its pair run unfused (the fault lands), one on the Relu's
 * output leaves it fused; a weight fault moves the outputs the same in
 * both. A bias row with beta 1 is accumulated onto in the product
 * (sgemm.h, crow) rather than copied into y first: the unfused plans run
 * that too, so test_sgemm checks it against the reference. The differential engine's plans do not fuse Gemms (they read a
 * Gemm's own output), which a plan without fuse_activations shows: no
 * Gemm sites at all. packed_weight_faulted: weights the model keeps packed
 * once (base/wpack.h) and a plan's fault in one of them (its outputs those
 * of a model storing the weight faulted; another plan stays golden). */
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
#include "base/wpack.h"
#include "exec/ops/sgemm.h"
#include "exec/plan_impl.h"
#include "model/graph.h"
#include "onnx_graph.h"

#define BATCH 40   /* past two row blocks of either kernel: B packed whole where transposed */

static float urand(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static void weights(tg_graph *g, const char *name, int64_t r, int64_t c, uint64_t seed)
{
    int64_t n = c ? r * c : r;   /* c 0: a vector of r */
    float *w = tg_alloc(g, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) w[i] = urand(&seed) * 0.5f;
    tg_init_f32(g, name, c ? 2 : 1, (int64_t[]){r, c}, w);
}

static Onnx__NodeProto *gemm(tg_graph *g, const char *name, const char *x, const char *w, const char *c,
                             const char *out, int trans_b)
{
    Onnx__NodeProto *n = tg_node(g, "Gemm", name, (const char *[]){x, w, c}, c ? 3 : 2, out);
    if (trans_b) tg_attr_int(g, n, "transB", 1);
    return n;
}

/* The MLP of the opening comment, packed. Fusable: g1 -> r1 (transB, bias
 * [40]), g2 -> k2 (Clip(-0.5, 0.75) from constant inputs, transB, bias),
 * g3 -> r3 (plain B [17, 33] read in place, alpha 0.5, bias [33]), g4 -> r4 (C [B, 33], beta
 * -1.5, transB), g7 -> r7 (n = 1). Not: g5 (read by r5 and by y5, an Add),
 * g6 (a graph output too), g8 (HardSwish). */
static bf_model *mlp(void)
{
    tg_graph g = {.opset = 14};
    uint64_t s = 0x1234567;
    weights(&g, "w1", 40, 24, s++), weights(&g, "b1", 40, 0, s++);
    weights(&g, "w2", 17, 40, s++), weights(&g, "b2", 17, 0, s++);
    weights(&g, "w3", 17, 33, s++), weights(&g, "b3", 33, 0, s++);
    weights(&g, "w4", 33, 33, s++), weights(&g, "c4", BATCH, 33, s++);
    weights(&g, "w5", 33, 33, s++), weights(&g, "w6", 33, 33, s++), weights(&g, "w7", 1, 33, s++);
    weights(&g, "w8", 8, 33, s++);
    tg_init_f32(&g, "lo", 0, NULL, (float[]){-0.5f});
    tg_init_f32(&g, "hi", 0, NULL, (float[]){0.75f});
    gemm(&g, "g1", "x", "w1", "b1", "h1", 1);
    tg_node(&g, "Relu", "r1", (const char *[]){"h1"}, 1, "a1");
    gemm(&g, "g2", "a1", "w2", "b2", "h2", 1);
    tg_node(&g, "Clip", "k2", (const char *[]){"h2", "lo", "hi"}, 3, "a2");
    Onnx__NodeProto *n3 = gemm(&g, "g3", "a2", "w3", "b3", "h3", 0);
    tg_attr_float(&g, n3, "alpha", 0.5f);
    tg_node(&g, "Relu", "r3", (const char *[]){"h3"}, 1, "a3");
    Onnx__NodeProto *n4 = gemm(&g, "g4", "a3", "w4", "c4", "h4", 1);
    tg_attr_float(&g, n4, "beta", -1.5f);
    tg_node(&g, "Relu", "r4", (const char *[]){"h4"}, 1, "a4");
    gemm(&g, "g5", "a4", "w5", NULL, "h5", 1);
    tg_node(&g, "Relu", "r5", (const char *[]){"h5"}, 1, "a5");
    tg_node(&g, "Add", "y5", (const char *[]){"a5", "h5"}, 2, "s5");
    gemm(&g, "g6", "s5", "w6", NULL, "h6", 1);
    tg_node(&g, "Relu", "r6", (const char *[]){"h6"}, 1, "a6");
    gemm(&g, "g7", "a6", "w7", NULL, "h7", 1);
    tg_node(&g, "Relu", "r7", (const char *[]){"h7"}, 1, "a7");
    gemm(&g, "g8", "a6", "w8", NULL, "h8", 1);
    tg_node(&g, "HardSwish", "s8", (const char *[]){"h8"}, 1, "a8");
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){BATCH, 24});
    g.outs[g.n_outs++] = tg_value_info(&g, "a7", 1, 2, (int64_t[]){BATCH, 1});
    g.outs[g.n_outs++] = tg_value_info(&g, "h6", 1, 2, (int64_t[]){BATCH, 33});
    g.outs[g.n_outs++] = tg_value_info(&g, "a8", 1, 2, (int64_t[]){BATCH, 8});
    return tg_load(&g, "mlp");
}

static bf_plan *plan(const bf_model *m, int fuse, int share) { return tg_plan(m, BATCH, fuse, share); }

/* Inputs in [-1, 1) with NaNs of two payloads, infinities and -0 in some rows. */
static void run(bf_plan *p)
{
    float *x = bf_plan_input(p, 0)->data;
    uint64_t s = 99;
    for (int i = 0; i < BATCH * 24; i++) x[i] = urand(&s) * 2.0f;
    uint32_t nan_p = 0x7fc00123u, nan_q = 0xffc00456u;
    memcpy(&x[3 * 24 + 5], &nan_p, 4);
    memcpy(&x[7 * 24 + 0], &nan_q, 4);
    x[11 * 24 + 2] = INFINITY;
    x[12 * 24 + 9] = -INFINITY;
    for (int k = 0; k < 24; k++) x[20 * 24 + k] = -0.0f;
    bf_error err = {0};
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
}

static void same_outputs(const bf_model *m, const bf_plan *a, const bf_plan *b, const char *what)
{
    for (size_t i = 0; i < bf_model_num_outputs(m); i++) {
        const bf_tensor *x = bf_plan_output(a, i), *y = bf_plan_output(b, i);
        assert_int_equal(bf_tensor_nbytes(x), bf_tensor_nbytes(y));
        if (memcmp(x->data, y->data, bf_tensor_nbytes(x)) != 0) fail_msg("%s: output %zu differs", what, i);
    }
}

static void fused_as_unfused(void **state)
{
    (void)state;
    bf_model *m = mlp();
    bf_error err = {0};
    static const char *const levels[] = {"avx512", "avx2", "ref"};
    for (int l = 0; l < 3; l++) {
        setenv("BITFLIP_SIMD", levels[l], 1);
        bf_plan *a = plan(m, 0, 0), *b = plan(m, 1, 0), *c = plan(m, 1, 1);
        run(a), run(b), run(c);
        size_t sites = 9;
        assert_int_equal(bf_plan_num_fused(a, &sites), 0);
        assert_int_equal(sites, 0);   /* no Gemm pair where nothing fuses */
        assert_int_equal(bf_plan_num_fused(b, &sites), 5);
        assert_int_equal(sites, 5);
        assert_int_equal(bf_plan_num_fused(c, NULL), 5);
        same_outputs(m, a, b, levels[l]);
        same_outputs(m, a, c, levels[l]);
        /* the specials reached the outputs: NaN rows */
        const float *y7 = bf_plan_output(a, 0)->data;
        int nans = 0;
        for (int i = 0; i < BATCH; i++) nans += isnan(y7[i]);
        assert_true(nans > 0 && nans < BATCH);

        /* a fault on a fused Gemm's output (h1, h4): that pair unfused; on its
         * Relu's output (a1): still fused; every output a's */
        static const char *const at[] = {"h1", "h4", "a1"};
        for (int k = 0; k < 3; k++) {
            bf_value_fault f = {.value = bf_model_find_value(m, at[k]), .sample = 2, .index = 5,
                                .model = BF_FAULT_BITFLIP, .mask = 1u << 30, .repr = BF_REPR_FP32};
            assert_true(f.value >= 0);
            if (bf_plan_set_value_faults(a, &f, 1, &err) != BF_OK || bf_plan_set_value_faults(b, &f, 1, &err) != BF_OK ||
                bf_plan_set_value_faults(c, &f, 1, &err) != BF_OK)
                fail_msg("%s", err.msg);
            run(a), run(b), run(c);
            assert_int_equal(bf_plan_num_fused(b, NULL), k < 2 ? 4 : 5);
            assert_int_equal(bf_plan_num_fused(c, NULL), k < 2 ? 4 : 5);
            same_outputs(m, a, b, at[k]);
            same_outputs(m, a, c, at[k]);
            float oa, na;
            bf_plan_value_fault_seen(a, 0, &oa, &na);
            assert_true(na != oa);
        }
        for (bf_plan *p = a; p; p = p == a ? b : p == b ? c : NULL)
            if (bf_plan_set_value_faults(p, NULL, 0, &err) != BF_OK) fail_msg("%s", err.msg);

        /* a weight fault (exponent bit of W4 and of the C matrix): the
         * fused epilogue reads the faulted parameter, as the step does */
        static const char *const wq[] = {"w4", "c4", "w1"};
        for (int k = 0; k < 3; k++) {
            int64_t q = bf_model_find_param(m, wq[k]);
            assert_true(q >= 0);
            bf_bitflip f = {.param = (size_t)q, .index = 37, .bit = 30};
            for (bf_plan *p = a; p; p = p == a ? b : p == b ? c : NULL)
                if (bf_plan_flip_bit(p, &f, NULL, NULL, &err) != BF_OK) fail_msg("%s", err.msg);
            run(a), run(b), run(c);
            same_outputs(m, a, b, wq[k]);
            same_outputs(m, a, c, wq[k]);
            for (bf_plan *p = a; p; p = p == a ? b : p == b ? c : NULL)
                if (bf_plan_flip_bit(p, &f, NULL, NULL, &err) != BF_OK) fail_msg("%s", err.msg);
        }
        bf_plan_free(a), bf_plan_free(b), bf_plan_free(c);
    }
    unsetenv("BITFLIP_SIMD");
    bf_model_free(m);
}

/* Products whose weight B the plan passes packed once, from the model's
 * shared copy (base/wpack.h; plan.c, packed_of): x [B, 24] -> Gemm(wg^T,
 * bg) -> Relu (transposed B: packed), x2 [B, 260] -> MatMul(wm) (260 deep:
 * packed) and -> MatMul(wa) -> Add(ba) (the bias epilogue). flip: the bit
 * of `flip_w`'s element `at` stored flipped (the reference model). */
static int64_t pbatch = BATCH;   /* packed_net's batch: BATCH, or 4 (one block of rows) */

static bf_model *packed_net(const char *flip_w, int64_t at, int bit)
{
    tg_graph g = {.opset = 14};
    uint64_t s = 0x7777;
    static const char *const names[] = {"wg", "wm", "wa"};
    static const int64_t rows[] = {40, 260, 260}, cols[] = {24, 20, 20};
    for (int i = 0; i < 3; i++) {
        float *w = tg_alloc(&g, sizeof(float) * (size_t)(rows[i] * cols[i]));
        for (int64_t e = 0; e < rows[i] * cols[i]; e++) w[e] = urand(&s) * 0.5f;
        if (flip_w && !strcmp(flip_w, names[i])) {
            uint32_t u;
            memcpy(&u, &w[at], 4);
            u ^= 1u << bit;
            memcpy(&w[at], &u, 4);
        }
        tg_init_f32(&g, names[i], 2, (int64_t[]){rows[i], cols[i]}, w);
    }
    weights(&g, "bg", 40, 0, s++), weights(&g, "ba", 20, 0, s++);
    gemm(&g, "g", "x", "wg", "bg", "hg", 1);
    tg_node(&g, "Relu", "r", (const char *[]){"hg"}, 1, "yg");
    tg_node(&g, "MatMul", "m", (const char *[]){"x2", "wm"}, 2, "ym");
    tg_node(&g, "MatMul", "ma", (const char *[]){"x2", "wa"}, 2, "ha");
    tg_node(&g, "Add", "a", (const char *[]){"ha", "ba"}, 2, "ya");
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){pbatch, 24});
    g.ins[g.n_ins++] = tg_value_info(&g, "x2", 1, 2, (int64_t[]){pbatch, 260});
    g.outs[g.n_outs++] = tg_value_info(&g, "yg", 1, 2, (int64_t[]){pbatch, 40});
    g.outs[g.n_outs++] = tg_value_info(&g, "ym", 1, 2, (int64_t[]){pbatch, 20});
    g.outs[g.n_outs++] = tg_value_info(&g, "ya", 1, 2, (int64_t[]){pbatch, 20});
    return tg_load(&g, "packed");
}

static void run2(bf_plan *p)
{
    uint64_t s = 5;
    float *x = bf_plan_input(p, 0)->data, *x2 = bf_plan_input(p, 1)->data;
    for (int i = 0; i < pbatch * 24; i++) x[i] = urand(&s) * 2.0f;
    for (int i = 0; i < pbatch * 260; i++) x2[i] = urand(&s) * 2.0f;
    bf_error err = {0};
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
}

/* A fault in a weight the model keeps packed: the faulted plan computes
 * with the faulted weight (its outputs those of a model storing the weight
 * flipped, whose own packing is of the flipped bits), while another plan
 * of the same model, run in between, still computes golden outputs, and
 * the faulted plan is golden again once the bit is flipped back. Each
 * CPU path of the product, plans with and without fusion. */
static void packed_faulted_at(int64_t nb)
{
    static const char *const levels[] = {"avx512", "avx2", "ref"};
    static const char *const wq[] = {"wg", "wm", "wa"};
    static const int64_t at[] = {37, 50 * 20 + 3, 259 * 20 + 19};
    pbatch = nb;
    bf_model *m = packed_net(NULL, 0, 0);
    for (int l = 0; l < 3; l++) {
        setenv("BITFLIP_SIMD", levels[l], 1);
        for (int fuse = 0; fuse < 2; fuse++) {
            bf_plan *a = tg_plan(m, nb, fuse, fuse), *b = tg_plan(m, nb, fuse, 0), *g = tg_plan(m, nb, 0, 0);
            assert_true(a->tab.packed || !bf__sgemm_simd());   /* the plan passes the model's copies */
            run2(g);
            for (int k = 0; k < 3; k++) {
                bf_model *mf = packed_net(wq[k], at[k], 30);
                bf_plan *r = tg_plan(mf, nb, fuse, 0);
                run2(r);
                bf_bitflip f = {.param = (size_t)bf_model_find_param(m, wq[k]), .index = at[k], .bit = 30};
                bf_error err = {0};
                if (bf_plan_flip_bit(a, &f, NULL, NULL, &err) != BF_OK) fail_msg("%s", err.msg);
                run2(a), run2(b);
                same_outputs(m, a, r, wq[k]);   /* the faulted weight's product */
                same_outputs(m, b, g, "the other plan");
                /* the fault reached an output: the flipped element's column */
                const bf_tensor *ya = bf_plan_output(a, (size_t)k), *yg = bf_plan_output(g, (size_t)k);
                assert_true(memcmp(ya->data, yg->data, bf_tensor_nbytes(yg)) != 0);
                if (bf_plan_flip_bit(a, &f, NULL, NULL, &err) != BF_OK) fail_msg("%s", err.msg);
                run2(a);
                same_outputs(m, a, g, "flipped back");
                bf_plan_free(r);
                bf_model_free(mf);
            }
            bf_plan_free(a), bf_plan_free(b), bf_plan_free(g);
        }
    }
    unsetenv("BITFLIP_SIMD");
    /* the weights kept packed (where the CPU has the kernel): 16-column
     * panels, 24 x 48 floats for wg^T, 260 x 32 for wm and wa; at a batch
     * of 4 (one block of rows) only the transposed Gemm's, which the kernel
     * repacks panel by panel at every call otherwise (the MatMuls read
     * theirs in place) */
    if (bf__sgemm_simd())
        assert_int_equal(bf__wpack_bytes(m->wpack), sizeof(float) * (24 * 48 + (nb > 24 ? 2 * 260 * 32 : 0)));
    /* and the plan's estimate counts them (on any CPU: it cannot know) */
    bf_plan_budget pb;
    bf_error err = {0};
    assert_int_equal(bf_plan_estimate(m, nb, &pb, &err), BF_OK);
    assert_int_equal(pb.packed_bytes, sizeof(float) * (24 * 48 + (nb > 24 ? 2 * 260 * 32 : 0)));
    bf_model_free(m);
    pbatch = BATCH;
}

static void packed_weight_faulted(void **state)
{
    (void)state;
    packed_faulted_at(BATCH);
    packed_faulted_at(4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fused_as_unfused),
        cmocka_unit_test(packed_weight_faulted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
