/* A Conv re-run at the output positions its moved input reaches alone
 * (docs/ENGINE.md, step 4; core/src/diff/diffpos.c).
 *
 * The graph, built here, a residual block on 7x7 maps: x [N, 16, 7, 7] ->
 * Conv A (128 channels, 3x3) -> Relu "ra" -> Conv B (128 channels, 3x3, K
 * = 1152: linalg_conv_bcast.c's kernel, which prepare gives a Conv of one
 * image a product: at 64 channels two 7x7 images share one, cp->nb) ->
 * Add(ra, b) -> Relu "rb" (the Add
 * and Relu fused into B's epilogue, the residual as the Add's A) -> Conv C
 * (the same shape) -> Relu -> GlobalAveragePool -> Flatten -> Gemm (4
 * classes). 20 samples at batch 8: two full batches (one bcast call of 8
 * images) and a partial one (a plan of 4).
 *
 * A permanent fault on one element of ra moves one position of one channel
 * in every image: B's input there (its outputs in the 3x3 window around it
 * move) and B's residual (that position itself), so B's re-run computes
 * those positions alone; rb then moves on up to 9 positions, and C's
 * re-run computes the up to 25 positions they reach. A weight fault in A
 * moves a whole channel of ra, whose Relu leaves most positions moved:
 * those re-runs mostly run whole (POS_SHARE), some on lists.
 *
 * Checked: every record of the differential engine is the exact engine's,
 * bit for bit, on 1 and 2 threads and in a shard; and on a CPU with AVX2
 * (where B and C take the kernel that computes a list) the value faults'
 * re-runs did run on lists, of fewer positions than their batches hold.
 * A reach that left out a window's taps (a mutation tried: each moved
 * input position reaching its own output position alone) changes records
 * here, and fails this test; residual_outside_the_reach's graph (below)
 * fails when the residual's positions are left out of the list.
 * pointwise_lanes_match_exact does the same for the 1x1 Convs' lists
 * (build_lanes). The same lists on torch.onnx.export's graph:
 * tests/cli/psum_torch.py. */
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
#include "bitflip/model.h"
#include "campaign_check.h"
#include "diff_graph.h"
#include "exec/ops/sgemm.h"
#include "onnx_graph.h"

#define SAMPLES 20
#define BATCH 8
#ifdef BF_SANITIZED
#define TRIALS 12
#else
#define TRIALS 30
#endif
#define CIN 16
#define MID 128
#define WIDE 192
#define HW 7
#define CLASSES 4

static void build(bf_model **m, bf_dataset **ds)
{
    tg_graph g = {0};
    uint64_t rng = 23;
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){-1, CIN, HW, HW});
    dg_conv(&g, &rng, "conv_a", "x", CIN, MID, 3, 1, 1, "a");
    tg_node(&g, "Relu", "relu_a", (const char *const[]){"a"}, 1, "ra");
    dg_conv(&g, &rng, "conv_b", "ra", MID, MID, 3, 1, 1, "b");
    tg_node(&g, "Add", "add_b", (const char *const[]){"ra", "b"}, 2, "sb");
    tg_node(&g, "Relu", "relu_b", (const char *const[]){"sb"}, 1, "rb");
    dg_conv(&g, &rng, "conv_c", "rb", MID, MID, 3, 1, 1, "c");
    tg_node(&g, "Relu", "relu_c", (const char *const[]){"c"}, 1, "rc");
    dg_head(&g, &rng, "rc", MID, CLASSES);
    dg_finish_images(&g, &rng, SAMPLES, CIN, HW, CLASSES, "pos", m, ds);
}

/* The residual moved where the Conv's input did not: x -> Conv A -> Relu
 * "t" -> Conv S (5x5, pads 2, every weight 0 but the top left tap's: its
 * output at (y, x) moves only where t moved at (y - 2, x - 2), a product
 * by a weight of 0 leaving the sum's bits as they were) -> "s" -> Conv B
 * (3x3) -> Add(t, b) -> Relu -> the head. A fault on t at p moves B's
 * input at p + (2, 2) alone, whose window reaches p + (1..3, 1..3) and not
 * p, where B's residual t moved: B's list must hold p too. */
static void build_shift(bf_model **m, bf_dataset **ds)
{
    tg_graph g = {0};
    uint64_t rng = 29;
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){-1, CIN, HW, HW});
    dg_conv(&g, &rng, "conv_a", "x", CIN, MID, 3, 1, 1, "a");
    tg_node(&g, "Relu", "relu_a", (const char *const[]){"a"}, 1, "t");
    int64_t wd[4] = {MID, MID, 5, 5}, bd[1] = {MID}, nw = MID * MID * 25;
    float *w = tg_alloc(&g, sizeof(float) * (size_t)nw), *b = tg_alloc(&g, sizeof(float) * MID);
    memset(w, 0, sizeof(float) * (size_t)nw);
    for (int64_t o = 0; o < MID; o++) w[(o * MID + o) * 25] = 0.5f + 0.25f * dg_uniform(&rng);
    dg_fill(&rng, b, MID, 0.1);
    tg_init_f32(&g, "conv_s.weight", 4, wd, w);
    tg_init_f32(&g, "conv_s.bias", 1, bd, b);
    Onnx__NodeProto *n = tg_node(&g, "Conv", "conv_s", (const char *const[]){"t", "conv_s.weight", "conv_s.bias"}, 3, "s");
    tg_attr_ints(&g, n, "kernel_shape", 2, (int64_t[]){5, 5});
    tg_attr_ints(&g, n, "pads", 4, (int64_t[]){2, 2, 2, 2});
    dg_conv(&g, &rng, "conv_b", "s", MID, MID, 3, 1, 1, "b");
    tg_node(&g, "Add", "add_b", (const char *const[]){"t", "b"}, 2, "sb");
    tg_node(&g, "Relu", "relu_b", (const char *const[]){"sb"}, 1, "rb");
    dg_head(&g, &rng, "rb", MID, CLASSES);
    dg_finish_images(&g, &rng, SAMPLES, CIN, HW, CLASSES, "pos_shift", m, ds);
}

/* 1x1 Convs on 7x7 maps (the lanes, linalg_conv_pwlanes.c, on AVX-512; the
 * gathered product on AVX2), a mobilenet_v2
 * block's shape: x -> Conv A (3x3) -> Relu "ra" -> Conv E (1x1, 128 ->
 * 192: K 128, a shape the lanes take with a list alone) -> Clip(0, 6) ->
 * Conv F (1x1, 192 -> 128: a projection, the lanes' shape) -> Add(ra, f)
 * -> Relu -> the head. A fault on ra at p moves E's input, and F's
 * residual, at p alone: both re-run on lists of one position an image
 * (on AVX2 too: the gathered product takes any unit 1x1's list). */
static void build_lanes(bf_model **m, bf_dataset **ds)
{
    tg_graph g = {.opset = 13};
    uint64_t rng = 31;
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){-1, CIN, HW, HW});
    tg_init_f32(&g, "lo", 0, NULL, (float[]){0.0f});
    tg_init_f32(&g, "hi", 0, NULL, (float[]){6.0f});
    dg_conv(&g, &rng, "conv_a", "x", CIN, MID, 3, 1, 1, "a");
    tg_node(&g, "Relu", "relu_a", (const char *const[]){"a"}, 1, "ra");
    dg_conv(&g, &rng, "conv_e", "ra", MID, WIDE, 1, 1, 0, "e");
    tg_node(&g, "Clip", "clip_e", (const char *const[]){"e", "lo", "hi"}, 3, "re");
    dg_conv(&g, &rng, "conv_f", "re", WIDE, MID, 1, 1, 0, "pf");
    tg_node(&g, "Add", "add_f", (const char *const[]){"ra", "pf"}, 2, "sf");
    tg_node(&g, "Relu", "relu_f", (const char *const[]){"sf"}, 1, "rf");
    dg_head(&g, &rng, "rf", MID, CLASSES);
    dg_finish_images(&g, &rng, SAMPLES, CIN, HW, CLASSES, "pos_lanes", m, ds);
}

static bf_campaign_spec spec_of(char **tensors, bf_target target)
{
    return tc_site_spec(BATCH, 5, TRIALS, tensors, target, 1, BF_PERSIST_PERMANENT);
}

/* spec s run exact (prep NULL) or on a prepared differential golden pass */
static void run(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, const bf_campaign_prep *prep,
                int threads, int64_t shard, int64_t shards, bf_trial_record *out, bf_campaign_result *res)
{
    tc_run_keep(tc_create_prepared(m, ds, s, prep), prep == NULL, threads, shard, shards, out, res);
}

/* exact and differential (1 and 2 threads, a shard of 2): the same
 * records; the 1-thread run's lists in *pos */
static void check_exact(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, const char *label,
                        bf_campaign_result *pos)
{
    bf_trial_record ex[TRIALS], got[TRIALS];
    bf_campaign_result res;
    run(m, ds, s, NULL, 1, 0, 0, ex, &res);
    bf_campaign_result_free(&res);
    for (int t = 1; t <= 3; t++) {
        bf_campaign_prep prep = {.differential = 1, .threads = t == 2 ? 2 : 1, .shard_index = t == 3,
                                 .shard_count = t == 3 ? 2 : 0};
        run(m, ds, s, &prep, t == 2 ? 2 : 1, t == 3, t == 3 ? 2 : 0, got, &res);
        for (int64_t k = 0; k < res.trials_done; k++) tc_assert_same_record(&got[k], &ex[got[k].trial]);
        printf("%s, %s: %lld Conv re-runs on lists, %lld of their batches' %lld positions\n", label,
               t == 1 ? "1 thread" : t == 2 ? "2 threads" : "shard 1/2", (long long)res.pos.runs,
               (long long)res.pos.positions, (long long)res.pos.of);
        if (t == 1) pos->pos = res.pos;
        bf_campaign_result_free(&res);
    }
}

/* where the CPU has `level`, the value faults' re-runs (at least min_runs)
 * took lists of fewer than half their batches' positions; elsewhere the
 * Convs take paths that compute every position (why) */
static void expect_lists(const bf_campaign_result *r, int level, int64_t min_runs, const char *why)
{
    if (bf__sgemm_best() < level) {
        printf("%s\n", why);
        return;
    }
    assert_true(r->pos.runs >= min_runs);
    assert_true(r->pos.positions > 0 && r->pos.positions < r->pos.of / 2);
}

static void positions_match_exact(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    build(&m, &ds);
    char *wa[] = {"conv_a.weight"}, *ra[] = {"ra"};
    bf_campaign_spec sw = spec_of(wa, BF_TARGET_WEIGHTS), sv = spec_of(ra, BF_TARGET_ACTIVATIONS);
    bf_campaign_result pw = {0}, pv = {0};
    check_exact(m, ds, &sw, "conv_a.weight, 1 bit", &pw);
    check_exact(m, ds, &sv, "relu_a's output, permanent", &pv);
    /* B's and C's re-runs on lists, each of fewer positions than its batch */
    expect_lists(&pv, BF_SGEMM_AVX2, 2, "no AVX2: B and C take another path, which computes every position");
    bf_dataset_free(ds);
    bf_model_free(m);
}

static void residual_outside_the_reach(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    build_shift(&m, &ds);
    char *tv[] = {"t"};
    bf_campaign_spec sv = spec_of(tv, BF_TARGET_ACTIVATIONS);
    bf_campaign_result pv = {0};
    check_exact(m, ds, &sv, "t, permanent (shifted)", &pv);
    expect_lists(&pv, BF_SGEMM_AVX2, 1, "no AVX2: B takes another path, which computes every position");
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* The 1x1 Convs' lists (the lanes' on AVX-512, the product on gathered
 * columns on AVX2: linalg_conv_pwlist.c), and a weight fault in E: one
 * channel of its Clip moved wherever the Clip leaves it, F's re-runs on
 * lists or whole */
static void pointwise_lanes_match_exact(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    build_lanes(&m, &ds);
    char *rv[] = {"ra"}, *we[] = {"conv_e.weight"};
    bf_campaign_spec sv = spec_of(rv, BF_TARGET_ACTIVATIONS), sw = spec_of(we, BF_TARGET_WEIGHTS);
    bf_campaign_result pv = {0}, pw = {0};
    check_exact(m, ds, &sv, "ra, permanent (1x1 Convs)", &pv);
    check_exact(m, ds, &sw, "conv_e.weight, 1 bit (1x1 Convs)", &pw);
    expect_lists(&pv, BF_SGEMM_AVX2, 2, "no AVX2: E and F take paths that compute every position");
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(positions_match_exact),
        cmocka_unit_test(residual_outside_the_reach),
        cmocka_unit_test(pointwise_lanes_match_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
