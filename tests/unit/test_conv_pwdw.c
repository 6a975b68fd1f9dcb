/* A 1x1 Conv and the depthwise Conv after its activation, run together a
 * block of channels of one image at a time (plan_impl.h, pwdw;
 * core/src/exec/ops/linalg_conv_pwdw.c), give the outputs of the steps run
 * apart, bit for bit, and run where they may:
 *
 *   - a graph built here with three pairs over maps of 29x31 and 28x28
 *     (over BF__PWDW_NMIN positions): 5 -> 40 channels (blocks of 32 and
 *     8) -> 3x3 stride 1 -> Clip(0, 6); 40 -> 20 (one block) -> Relu ->
 *     3x3 stride 2, no bias, no activation after; 40 -> 12 -> Clip(-0.2,
 *     0.3) -> 3x3 stride 1 -> Clip; and one that may not pair (the
 *     activation's output also a graph output). Its input holds NaNs of
 *     two payloads, infinities and -0.
 *   - bitflip eval's plan (fused, one shared arena) against a plan that
 *     fuses nothing and shares nothing, at every CPU path
 *     (BITFLIP_SIMD=ref, avx2, avx512, unset): the same outputs; the pairs
 *     run on AVX-512 only (3 of them), nowhere else.
 *     below_avx512 (ref and avx2) runs on every CPU, and its verdict does
 *     not depend on it: no pair is marked or run, and every output (and
 *     every faulted output below) is the unfused plan's bytes. at_avx512
 *     (avx512 and unset) needs a CPU with AVX-512; elsewhere it is counted
 *     as skipped (cmocka's SKIPPED, and a "test_conv_pwdw: SKIP:" line
 *     that `make test` repeats at the end), never passed.
 *   - value faults on each value of a pair: on the 1x1's output or its
 *     activation's or the depthwise Conv's own, that pair runs as steps; on
 *     the depthwise chain's last value past an activation (after its Clip),
 *     it still pairs;
 *     the outputs are the unfused plan's under the same fault.
 *   (that a pair ran: the plan's count of the pairs its last run ran)
 *   - a campaign's golden pass (diff/gcache.c, pass_pairs) on plans that
 *     neither fuse nor share (the differential engine's), over two
 *     batches: it runs the pairs whose unwritten values the cache keeps
 *     none of (all three when only the graph's outputs are wanted; not
 *     the first when its activation's output k1o is), writes a kept
 *     depthwise output (k2o) into its slot, and every block the cache
 *     holds is the value of a plain run of the same batch, on one thread
 *     and on two (a plan each); afterwards the plans pair no more.
 *
 * Each path's own bits against a plain reference: test_conv_exact.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "diff/diff.h"
#include "exec/ops/sgemm.h"
#include "exec/step_access.h"
#include "model/graph.h"
#include "onnx_graph.h"
#include "plan_pairs.h"

#define BATCH 3

static void conv(tg_graph *g, const char *name, const char *x, int64_t c, int64_t m, int dw, int stride, int bias,
                 const char *out)
{
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "%s.w", name), snprintf(bn, sizeof bn, "%s.b", name);
    int64_t k = dw ? 3 : 1;
    pp_weights(g, wn, 4, (int64_t[]){m, dw ? 1 : c, k, k}, (uint64_t)(m * 31 + c));
    if (bias) pp_weights(g, bn, 1, (int64_t[]){m}, (uint64_t)(m * 17 + c));
    Onnx__NodeProto *n = tg_node(g, "Conv", name, (const char *[]){x, wn, bias ? bn : NULL}, bias ? 3 : 2, out);
    tg_attr_ints(g, n, "kernel_shape", 2, (int64_t[]){k, k});
    if (dw) {
        tg_attr_int(g, n, "group", m);
        tg_attr_ints(g, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
        tg_attr_ints(g, n, "strides", 2, (int64_t[]){stride, stride});
    }
}

static bf_model *graph(void)
{
    tg_graph g = {.opset = 13};
    tg_init_f32(&g, "lo", 0, NULL, (float[]){0.0f});
    tg_init_f32(&g, "hi", 0, NULL, (float[]){6.0f});
    tg_init_f32(&g, "lo2", 0, NULL, (float[]){-0.2f});
    tg_init_f32(&g, "hi2", 0, NULL, (float[]){0.3f});
    conv(&g, "c1", "x", 5, 40, 0, 1, 1, "c1o");   /* pair 1: 40 channels, blocks of 32 and 8 */
    tg_node(&g, "Clip", "k1", (const char *[]){"c1o", "lo", "hi"}, 3, "k1o");
    conv(&g, "c2", "k1o", 40, 40, 1, 1, 1, "c2o");
    tg_node(&g, "Clip", "k2", (const char *[]){"c2o", "lo", "hi"}, 3, "k2o");
    conv(&g, "c3", "k2o", 40, 20, 0, 1, 1, "c3o");   /* pair 2: one block; stride 2, no bias, no activation */
    tg_node(&g, "Relu", "k3", (const char *[]){"c3o"}, 1, "k3o");
    conv(&g, "c4", "k3o", 20, 20, 1, 2, 0, "y1");
    conv(&g, "c5", "k2o", 40, 12, 0, 1, 1, "c5o");   /* pair 3: 12 channels */
    tg_node(&g, "Clip", "k5", (const char *[]){"c5o", "lo2", "hi2"}, 3, "k5o");
    conv(&g, "c6", "k5o", 12, 12, 1, 1, 1, "c6o");
    tg_node(&g, "Clip", "k6", (const char *[]){"c6o", "lo2", "hi2"}, 3, "y2");
    conv(&g, "c7", "y3", 8, 16, 0, 1, 1, "c7o");   /* no pair: its activation's output is a graph output */
    tg_node(&g, "Relu", "k7", (const char *[]){"c7o"}, 1, "y4");
    conv(&g, "c8", "y4", 16, 16, 1, 1, 1, "y5");
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){BATCH, 5, 29, 31});
    g.ins[g.n_ins++] = tg_value_info(&g, "y3", 1, 4, (int64_t[]){BATCH, 8, 28, 28});
    g.outs[g.n_outs++] = tg_value_info(&g, "y1", 1, 4, (int64_t[]){BATCH, 20, 15, 16});
    g.outs[g.n_outs++] = tg_value_info(&g, "y2", 1, 4, (int64_t[]){BATCH, 12, 29, 31});
    g.outs[g.n_outs++] = tg_value_info(&g, "y4", 1, 4, (int64_t[]){BATCH, 16, 28, 28});
    g.outs[g.n_outs++] = tg_value_info(&g, "y5", 1, 4, (int64_t[]){BATCH, 16, 28, 28});
    return tg_load(&g, "pwdw");
}

static size_t pairs_marked(const bf_plan *p) { return pp_marked(p, bf__conv_pwdw_pair); }

/* The pairs at one CPU path (BITFLIP_SIMD=level; NULL: unset): marked
 * and run (3) where the caller says the path is AVX-512 (avx512), none
 * elsewhere; the outputs the unfused plan's, with and without value faults. */
static void pairs_match_steps(bf_model *m, const char *level, int avx512)
{
    if (level) setenv("BITFLIP_SIMD", level, 1);
    else unsetenv("BITFLIP_SIMD");
    bf_plan *a = tg_plan(m, BATCH, 0, 0), *b = tg_plan(m, BATCH, 1, 1);
    unsetenv("BITFLIP_SIMD");
    const char *at = level ? level : "unset";
    if (pairs_marked(b) != (avx512 ? 3u : 0u) || pairs_marked(a) != 0)
        fail_msg("BITFLIP_SIMD=%s: %zu pairs marked, expected %d", at, pairs_marked(b), avx512 ? 3 : 0);
    pp_run(a), pp_run(b);
    assert_int_equal(b->tab.n_pwdw, avx512 ? 3 : 0);
    pp_same_outputs(a, b, at);
    print_message("BITFLIP_SIMD=%s: %zu pairs run, outputs the same bits\n", at, b->tab.n_pwdw);
    /* value faults: on a pair's inner values it runs as steps, on the
     * depthwise chain's last value it pairs */
    static const pp_vfault vf[] = {{"c1o", 2}, {"k1o", 2}, {"c2o", 2}, {"k2o", 3}, {"c3o", 2},
                                   {"k3o", 2}, {"y1", 2},  {"k5o", 2}, {"y2", 3}};
    pp_faults_match(m, a, b, vf, sizeof vf / sizeof *vf, &b->tab.n_pwdw, avx512, at);
    bf_plan_free(a), bf_plan_free(b);
}

/* the paths below AVX-512: no pair, on any CPU */
static void below_avx512(void **state)
{
    (void)state;
    bf_model *m = graph();
    pairs_match_steps(m, "ref", 0);
    pairs_match_steps(m, "avx2", 0);
    bf_model_free(m);
}

/* the AVX-512 path, chosen or the default: the pairs run (skipped, saying
 * so, on a CPU without AVX-512, where BITFLIP_SIMD=avx512 would lower to
 * AVX2 and repeat below_avx512) */
static void at_avx512(void **state)
{
    (void)state;
    unsetenv("BITFLIP_SIMD");
    if (bf__sgemm_best() < BF_SGEMM_AVX512) {
        print_message("test_conv_pwdw: SKIP: no AVX-512 on this CPU, so the 1x1 + depthwise pairs "
                      "(linalg_conv_pwdw.c, AVX-512 only) were not run; at_avx512 is skipped, not passed "
                      "(below_avx512 ran: no pair at ref and avx2, the unfused steps' bytes)\n");
        skip();
    }
    bf_model *m = graph();
    pairs_match_steps(m, "avx512", 1);
    pairs_match_steps(m, NULL, 1);
    bf_model_free(m);
}

/* The golden pass over two batches (the inputs fill's, then their
 * negation) on `threads` threads, one plan each, with the values `want`
 * names kept: blocks against a plain run of each batch, and the pairs it
 * ran */
static void golden_pass(const bf_model *m, const char *const *want_names, size_t n_want, int threads, int64_t pairs,
                        const char *at)
{
    enum { BATCHES = 2 };
    bf_plan *p[2] = {tg_plan(m, BATCH, 0, 0), tg_plan(m, BATCH, 0, 0)}, *ref = tg_plan(m, BATCH, 0, 0);
    size_t n_in = bf_model_num_inputs(m), nv = m->n_values;
    bf_tensor feed[2];
    const bf_tensor *feeds[2];
    assert_true(n_in == 2);
    pp_fill(ref);
    for (size_t i = 0; i < n_in; i++) {   /* batch 1: batch 0 negated (NaNs and -0 too) */
        const bf_tensor *t = bf_plan_input(ref, i);
        size_t bytes = bf_tensor_nbytes(t);
        feed[i] = *t;
        feed[i].dims[0] = BATCHES * BATCH;
        assert_non_null(feed[i].data = malloc(BATCHES * bytes));
        memcpy(feed[i].data, t->data, bytes);
        float *y = (float *)((char *)feed[i].data + bytes);
        for (int64_t k = 0; k < bf_tensor_numel(t); k++) y[k] = -((const float *)t->data)[k];
        feeds[i] = &feed[i];
    }
    unsigned char *want = calloc(nv + 1, 1);
    assert_non_null(want);
    for (size_t k = 0; k < n_want; k++) {
        int64_t v = bf_model_find_value(m, want_names[k]);
        assert_true(v >= 0);
        want[v] = 1;
    }
    size_t out_bytes = bf_tensor_nbytes(bf_plan_output(ref, 0));
    float *gold = malloc(BATCHES * out_bytes);
    assert_non_null(gold);
    bf__gcache *gc = NULL;
    bf_error err = {0};
    if (bf__gcache_build(p, NULL, threads, feeds, BATCHES * BATCH, BF_CACHE_BUDGET_DEFAULT, NULL, want, 0, NULL, NULL, NULL,
                         gold, NULL, 0, &gc, &err) != BF_OK)
        fail_msg("%s: %s", at, err.msg);
    if (bf__gcache_pairs(gc) != pairs * BATCHES)
        fail_msg("%s: the golden pass ran %lld pairs, expected %lld", at, (long long)bf__gcache_pairs(gc),
                 (long long)(pairs * BATCHES));
    assert_null(p[0]->tab.pwdw);   /* taken off: trials and exact runs never pair */
    assert_null(p[1]->tab.pwdw);
    for (int64_t b = 0; b < BATCHES; b++) {
        bf_error e2 = {0};
        for (size_t i = 0; i < n_in; i++)
            if (bf_dataset_copy_rows(feeds[i], b * BATCH, BATCH, bf_plan_input(ref, i), &e2) != BF_OK)
                fail_msg("%s", e2.msg);
        if (bf_plan_run(ref, &e2) != BF_OK) fail_msg("%s", e2.msg);
        for (size_t v = 0; v < nv; v++) {
            const void *blk = bf__gcache_has(gc, (int64_t)v) ? bf__gcache_block(gc, (int64_t)v, b) : NULL;
            const bf_tensor *t = bf_plan_value(ref, (int)v);
            if (blk && memcmp(blk, t->data, bf_tensor_nbytes(t)) != 0)
                fail_msg("%s: the cache's '%s' of batch %lld is not a plain run's", at, m->values[v].name,
                         (long long)b);
        }
        if (memcmp((char *)gold + b * out_bytes, bf_plan_output(ref, 0)->data, out_bytes) != 0)
            fail_msg("%s: the golden outputs of batch %lld are not a plain run's", at, (long long)b);
    }
    bf__gcache_free(gc);
    free(gold), free(want), free(feed[0].data), free(feed[1].data);
    bf_plan_free(p[0]), bf_plan_free(p[1]), bf_plan_free(ref);
}

static void golden_pass_pairs(void **state)
{
    (void)state;
    static const char *const outs[] = {"y1", "y2", "y4", "y5"}, *const k1[] = {"k1o", "y1", "y2"},
                              *const k2[] = {"k2o", "y1", "y2", "y5"};
    const char *levels[] = {"avx2", NULL};
    bf_model *m = graph();
    for (int l = 0; l < 2; l++) {
        if (levels[l]) setenv("BITFLIP_SIMD", levels[l], 1);
        int avx512 = bf__sgemm_best() >= BF_SGEMM_AVX512;
        const char *at = levels[l] ? levels[l] : "unset";
        char what[96];
        snprintf(what, sizeof what, "BITFLIP_SIMD=%s, the outputs kept", at);
        golden_pass(m, outs, 4, 1, avx512 ? 3 : 0, what);
        snprintf(what, sizeof what, "BITFLIP_SIMD=%s, the outputs kept, 2 threads", at);
        golden_pass(m, outs, 4, 2, avx512 ? 3 : 0, what);
        snprintf(what, sizeof what, "BITFLIP_SIMD=%s, k1o kept", at);
        golden_pass(m, k1, 3, 1, avx512 ? 2 : 0, what);
        snprintf(what, sizeof what, "BITFLIP_SIMD=%s, k2o kept", at);
        golden_pass(m, k2, 4, 2, avx512 ? 3 : 0, what);
        unsetenv("BITFLIP_SIMD");
    }
    bf_model_free(m);
}

/* Small maps (at least BF__PWDW_NMIN positions; under BF__PWDW_SMALL, blocks
 * of up to BF__PWDW_BLK_SMALL channels): 40 -> 72 channels on 7x9 maps
 * (63 positions: blocks of 64 and 8) -> Clip(0, 6) -> 3x3 stride 2 ->
 * Clip, and 40 -> 16 on 6x8 (48 positions, under the bound: no pair) ->
 * Relu -> 3x3 stride 1. On AVX-512 the first pair runs and the second
 * does not; the outputs are the unfused plan's bytes at every path. */
static bf_model *small_graph(void)
{
    tg_graph g = {.opset = 13};
    tg_init_f32(&g, "lo", 0, NULL, (float[]){0.0f});
    tg_init_f32(&g, "hi", 0, NULL, (float[]){6.0f});
    conv(&g, "s1", "x", 40, 72, 0, 1, 1, "s1o");
    tg_node(&g, "Clip", "t1", (const char *[]){"s1o", "lo", "hi"}, 3, "t1o");
    conv(&g, "s2", "t1o", 72, 72, 1, 2, 1, "s2o");
    tg_node(&g, "Clip", "t2", (const char *[]){"s2o", "lo", "hi"}, 3, "z1");
    conv(&g, "s3", "x2", 40, 16, 0, 1, 1, "s3o");
    tg_node(&g, "Relu", "t3", (const char *[]){"s3o"}, 1, "t3o");
    conv(&g, "s4", "t3o", 16, 16, 1, 1, 1, "z2");
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){BATCH, 40, 7, 9});
    g.ins[g.n_ins++] = tg_value_info(&g, "x2", 1, 4, (int64_t[]){BATCH, 40, 6, 8});
    g.outs[g.n_outs++] = tg_value_info(&g, "z1", 1, 4, (int64_t[]){BATCH, 72, 4, 5});
    g.outs[g.n_outs++] = tg_value_info(&g, "z2", 1, 4, (int64_t[]){BATCH, 16, 6, 8});
    bf_model *m = tg_load(&g, "pwdw_small");
    return m;
}

static void small_maps(void **state)
{
    (void)state;
    bf_model *m = small_graph();
    const char *levels[] = {"ref", "avx2", "avx512", NULL};
    for (int l = 0; l < 4; l++) {
        if (levels[l]) setenv("BITFLIP_SIMD", levels[l], 1);
        else unsetenv("BITFLIP_SIMD");
        int avx512 = bf__sgemm_best() >= BF_SGEMM_AVX512;
        bf_plan *a = tg_plan(m, BATCH, 0, 0), *b = tg_plan(m, BATCH, 1, 1);
        unsetenv("BITFLIP_SIMD");
        const char *at = levels[l] ? levels[l] : "unset";
        if (pairs_marked(b) != (avx512 ? 1u : 0u) || pairs_marked(a) != 0)
            fail_msg("small maps, BITFLIP_SIMD=%s: %zu pairs marked, expected %d", at, pairs_marked(b), avx512);
        pp_run(a), pp_run(b);
        assert_int_equal(b->tab.n_pwdw, avx512 ? 1 : 0);
        char what[96];
        snprintf(what, sizeof what, "small maps, BITFLIP_SIMD=%s", at);
        pp_same_outputs(a, b, what);
        bf_plan_free(a), bf_plan_free(b);
    }
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(below_avx512),
        cmocka_unit_test(at_avx512),
        cmocka_unit_test(golden_pass_pairs),
        cmocka_unit_test(small_maps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
