/* A network's first Conv and the MaxPool after its activation, run
 * together over bands of rows of one image at a time (plan_impl.h, pwdw;
 * core/src/exec/ops/linalg_conv_stpool.c), give the outputs of the steps
 * run apart, bit for bit, and run where they may:
 *
 *   - a graph built here with three pairs: resnet18's stem (3 -> 64,
 *     7x7/2, pads 3, bias, Relu, MaxPool 3x3/2 pads 1) on 230x220 images,
 *     115x110 maps: bands of 18 pool rows (37 stem rows under
 *     BF__STPOOL_FLOATS, one carried from band to band), the last band
 *     short and its last window clipped at the bottom; 3 -> 32, 3x3/2
 *     without a bias, Clip(-0.2, 0.3), then a 5x5/2 MaxPool with pads 2
 *     (bands of 45 pool rows, then 5: three stem rows carried from the
 *     first band to the second); 3 -> 16, 5x5/2 dilation 2, Relu,
 *     a MaxPool of 2x3 windows at vertical stride 3 (no window shares a
 *     row, one row in three read by none); and one that may not pair (the
 *     activation's output also a graph output). Its inputs hold NaNs of
 *     two payloads, infinities and -0.
 *   - bitflip eval's plan (fused, one shared arena) against a plan that
 *     fuses nothing and shares nothing, at every CPU path
 *     (BITFLIP_SIMD=ref, avx2, avx512): the same outputs; the pairs
 *     run on AVX2 (8 channels a vector) and AVX-512 (16), 3 of them, not
 *     at the reference. (Not BITFLIP_SIMD
 *     unset as well: that is the best path this CPU has, which one of the
 *     three already is, the same code on the same inputs.)
 *   - value faults on each value of a pair: on the Conv's output, its
 *     activation's or the pool's, that pair runs as steps; the outputs are
 *     the unfused plan's under the same fault. At the paths where pairs
 *     run: where none is marked (ref) a fault has no pair to split,
 *     and a fault on a fused Conv + activation with the reference's
 *     kernels is test_conv_fuse's (the split, level-independent
 *     planning) and test_conv_exact's (each path's kernels with each
 *     activation); the loop at ref was 90% of this test's CPU time
 *     (tests/README.md, "The sixteenth round").
 *   - torchvision's stem as PyTorch exports it (tests/fixtures/real/
 *     resnet_stem, make_real_models.py: Conv 7x7/2 pads 3 with the
 *     BatchNorm folded into its bias, Relu, MaxPool 3x3/2 pads 1, on 40x40
 *     images, then BasicBlocks): the plan marks and runs that one pair, the
 *     unfused plan's bytes, at batch 2 and 5, with value faults on the
 *     pair's three values as above, at BITFLIP_SIMD=avx2 and at the best
 *     path the CPU has. conformance_real checks the same file
 *     against PyTorch's outputs, the pair apart (its plans do not share an
 *     arena), so together they tie the pair to PyTorch's outputs on a real
 *     export, not only to our own steps on a graph built here.
 *   (that a pair ran: the plan's count of the pairs its last run ran)
 *
 * Each kernel's own bits against a plain reference: test_conv_exact.c
 * (the stem kernel) and test_ops_linalg.c (the pool). */
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
#include "exec/ops/sgemm.h"
#include "exec/step_access.h"
#include "model/graph.h"
#include "onnx_graph.h"
#include "plan_pairs.h"

#define BATCH 2

/* a Conv of k x k taps at stride 2, pads p, dilation d */
static void conv(tg_graph *g, const char *name, const char *x, int64_t c, int64_t m, int64_t k, int64_t p, int64_t d,
                 int bias, const char *out)
{
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "%s.w", name), snprintf(bn, sizeof bn, "%s.b", name);
    pp_weights(g, wn, 4, (int64_t[]){m, c, k, k}, (uint64_t)(m * 31 + c + k));
    if (bias) pp_weights(g, bn, 1, (int64_t[]){m}, (uint64_t)(m * 17 + c));
    Onnx__NodeProto *n = tg_node(g, "Conv", name, (const char *[]){x, wn, bias ? bn : NULL}, bias ? 3 : 2, out);
    tg_attr_ints(g, n, "kernel_shape", 2, (int64_t[]){k, k});
    tg_attr_ints(g, n, "pads", 4, (int64_t[]){p, p, p, p});
    tg_attr_ints(g, n, "strides", 2, (int64_t[]){2, 2});
    tg_attr_ints(g, n, "dilations", 2, (int64_t[]){d, d});
}

static void maxpool(tg_graph *g, const char *name, const char *x, int64_t kh, int64_t kw, int64_t sh, int64_t p,
                    const char *out)
{
    Onnx__NodeProto *n = tg_node(g, "MaxPool", name, (const char *[]){x}, 1, out);
    tg_attr_ints(g, n, "kernel_shape", 2, (int64_t[]){kh, kw});
    tg_attr_ints(g, n, "pads", 4, (int64_t[]){p, p, p, p});
    tg_attr_ints(g, n, "strides", 2, (int64_t[]){sh, 2});
}

static bf_model *graph(void)
{
    tg_graph g = {.opset = 13};
    tg_init_f32(&g, "lo", 0, NULL, (float[]){-0.2f});
    tg_init_f32(&g, "hi", 0, NULL, (float[]){0.3f});
    conv(&g, "c1", "x", 3, 64, 7, 3, 1, 1, "c1o");   /* pair 1: resnet18's stem and pool */
    tg_node(&g, "Relu", "k1", (const char *[]){"c1o"}, 1, "k1o");
    maxpool(&g, "p1", "k1o", 3, 3, 2, 1, "y1");
    conv(&g, "c2", "x2", 3, 32, 3, 1, 1, 0, "c2o");   /* pair 2: no bias, Clip, 5x5 windows */
    tg_node(&g, "Clip", "k2", (const char *[]){"c2o", "lo", "hi"}, 3, "k2o");
    maxpool(&g, "p2", "k2o", 5, 5, 2, 2, "y2");
    conv(&g, "c3", "x2", 3, 16, 5, 2, 2, 1, "c3o");   /* pair 3: dilated, pool rows at stride 3 */
    tg_node(&g, "Relu", "k3", (const char *[]){"c3o"}, 1, "k3o");
    maxpool(&g, "p3", "k3o", 2, 3, 3, 0, "y3");
    conv(&g, "c4", "x2", 3, 16, 3, 1, 1, 1, "c4o");   /* no pair: its activation's output is a graph output */
    tg_node(&g, "Relu", "k4", (const char *[]){"c4o"}, 1, "y4");
    maxpool(&g, "p4", "y4", 3, 3, 2, 1, "y5");
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){BATCH, 3, 230, 220});
    g.ins[g.n_ins++] = tg_value_info(&g, "x2", 1, 4, (int64_t[]){BATCH, 3, 200, 180});
    g.outs[g.n_outs++] = tg_value_info(&g, "y1", 1, 4, (int64_t[]){BATCH, 64, 58, 55});
    g.outs[g.n_outs++] = tg_value_info(&g, "y2", 1, 4, (int64_t[]){BATCH, 32, 50, 45});
    g.outs[g.n_outs++] = tg_value_info(&g, "y3", 1, 4, (int64_t[]){BATCH, 16, 33, 43});
    g.outs[g.n_outs++] = tg_value_info(&g, "y4", 1, 4, (int64_t[]){BATCH, 16, 100, 90});
    g.outs[g.n_outs++] = tg_value_info(&g, "y5", 1, 4, (int64_t[]){BATCH, 16, 50, 45});
    return tg_load(&g, "stpool");
}

/* the Conv -> MaxPool pairs the plan marked */
static size_t pairs_marked(const bf_plan *p) { return pp_marked(p, bf__conv_stpool_pair); }

static void pairs_match_steps(void **state)
{
    (void)state;
    const char *levels[] = {"ref", "avx2", "avx512"};
    bf_model *m = graph();
    for (int l = 0; l < 3; l++) {
        setenv("BITFLIP_SIMD", levels[l], 1);
        int paired = bf__sgemm_best() >= BF_SGEMM_AVX2;   /* the stem kernel's levels */
        bf_plan *a = tg_plan(m, BATCH, 0, 0), *b = tg_plan(m, BATCH, 1, 1);
        const char *at = levels[l];
        if (pairs_marked(b) != (paired ? 3u : 0u) || pairs_marked(a) != 0)
            fail_msg("BITFLIP_SIMD=%s: %zu pairs marked, expected %d", at, pairs_marked(b), paired ? 3 : 0);
        pp_run(a), pp_run(b);
        assert_int_equal(b->tab.n_stpool, paired ? 3 : 0);
        assert_int_equal(b->tab.n_pwdw, 0);
        pp_same_outputs(a, b, at);
        print_message("BITFLIP_SIMD=%s: %zu pairs run, outputs the same bits\n", at, b->tab.n_stpool);
        /* value faults: on any value of a pair it runs as steps (where pairs run: the
         * head comment says why not at ref) */
        static const pp_vfault vf[] = {{"c1o", 2}, {"k1o", 2}, {"y1", 2},  {"c2o", 2}, {"k2o", 2},
                                       {"y2", 2},  {"k3o", 2}, {"y4", 3}, {"y5", 3}};
        if (paired) pp_faults_match(m, a, b, vf, sizeof vf / sizeof *vf, &b->tab.n_stpool, paired, at);
        unsetenv("BITFLIP_SIMD");
        bf_plan_free(a), bf_plan_free(b);
    }
    bf_model_free(m);
    /* on a CPU without AVX2 every level above lowered to the reference:
     * no pair was run, so the test says so and counts as skipped, not passed
     * (as test_conv_pwdw's at_avx512) */
    if (bf__sgemm_best() < BF_SGEMM_AVX2) {
        print_message("test_conv_stpool: SKIP: no AVX2 on this CPU, so the stem Conv + MaxPool pairs "
                      "(linalg_conv_stpool.c, AVX2 and AVX-512) were not run; the ref checks above ran "
                      "(no pair marked, the unfused steps' bytes)\n");
        skip();
    }
}

static void real_export_pair(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_file(BF_FIXTURES "/real/resnet_stem.onnx", &m, &err) != BF_OK) fail_msg("%s", err.msg);
    /* AVX2 (8 channels a vector) and the best path this CPU has (16 on AVX-512) */
    const char *levels[] = {"avx2", NULL};
    static const int64_t batches[] = {2, 5};
    for (int l = 0; l < 2; l++) {
        if (levels[l]) setenv("BITFLIP_SIMD", levels[l], 1);
        else unsetenv("BITFLIP_SIMD");
        const char *at = levels[l] ? levels[l] : "unset";
        int paired = bf__sgemm_best() >= BF_SGEMM_AVX2;
        for (size_t k = 0; k < sizeof batches / sizeof *batches; k++) {
            bf_plan *a = tg_plan(m, batches[k], 0, 0), *b = tg_plan(m, batches[k], 1, 1);
            if (pairs_marked(b) != (paired ? 1u : 0u) || pairs_marked(a) != 0)
                fail_msg("BITFLIP_SIMD=%s, resnet_stem at batch %d: %zu pairs marked, expected %d", at,
                         (int)batches[k], pairs_marked(b), paired);
            pp_run(a), pp_run(b);
            assert_int_equal(b->tab.n_stpool, paired ? 1 : 0);
            char what[64];
            snprintf(what, sizeof what, "BITFLIP_SIMD=%s, resnet_stem at batch %d", at, (int)batches[k]);
            pp_same_outputs(a, b, what);
            static const pp_vfault vf[] = {{"/conv1/Conv_output_0", 0},
                                           {"/relu/Relu_output_0", 0},
                                           {"/maxpool/MaxPool_output_0", 0},
                                           {"/layers/layers.0/layers.0.0/conv1/Conv_output_0", 1}};
            pp_faults_match(m, a, b, vf, sizeof vf / sizeof *vf, &b->tab.n_stpool, paired, at);
            print_message("BITFLIP_SIMD=%s, resnet_stem at batch %d: %zu pairs run, outputs the same bits\n", at,
                          (int)batches[k], b->tab.n_stpool);
            bf_plan_free(a), bf_plan_free(b);
        }
    }
    unsetenv("BITFLIP_SIMD");
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pairs_match_steps),
        cmocka_unit_test(real_export_pair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
