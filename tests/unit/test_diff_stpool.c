/* A stem pair (a network's first Conv and the MaxPool after its
 * activation, run together over bands of rows: plan_impl.h, pwdw;
 * core/src/exec/ops/linalg_conv_stpool.c) inside a campaign's golden pass
 * (diff/gcache.c, pass_pairs), as `bitflip run` prepares it: the pass runs
 * the pair where the cache keeps neither of the values it leaves unwritten
 * (the stem's output and its Relu's), writes the pool's output into the
 * cache, and every trial's record is the exact engine's, bit for bit.
 *
 * The graph, built here: x [N, 3, 40, 40] -> stem Conv (32 channels, 7x7
 * stride 2, pads 3: resnet18's stem on a small image) -> Relu -> MaxPool
 * (3x3 stride 2, pads 1) -> Conv B (16 channels, 3x3) -> Relu ->
 * GlobalAveragePool -> Flatten -> Gemm (4 classes). 10 samples at batch 4:
 * two full batches and a partial one.
 *
 * Checked, on 1 and 2 threads: weight faults in B (the trials re-run from
 * the pool's output, read from the cache: the pass runs the pair in every
 * batch) and value faults on the stem's Relu output (which the cache then
 * keeps: the pass runs the pair in none); every record equal to --exact's.
 * And a planted error in what the pair wrote (one pool row of the first
 * image copied over the next, in every channel, as a band carried wrong
 * would leave it) changes records: the comparison would catch a pair that
 * got the golden pass wrong.
 *
 * And the same on torchvision's stem as PyTorch exports it
 * (tests/fixtures/real/resnet_stem: the BatchNorm folded into the stem's
 * bias, BasicBlocks after the pool; 16 samples at batch 5, the last batch
 * one sample): weight faults in the second stage's first Conv, the pair
 * run in every batch of the pass, every record the exact engine's, and
 * the same planted error (in the first block's output, which the trials
 * read) caught the same way.
 *
 * Where the CPU has no AVX2 no pair runs
 * (the stem kernel is AVX2's and AVX-512's): the records are still checked, and
 * the test says so and counts as skipped, not passed. */
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
#include "campaign/campaign_impl.h"   /* the prepared golden pass's cache */
#include "campaign_check.h"
#include "diff/diff.h"
#include "diff_graph.h"
#include "exec/ops/sgemm.h"
#include "onnx_graph.h"

#define SAMPLES 10
#define BATCH 4
#define BATCHES 3
#define TRIALS 24
#define HW 40
#define STEM 32
#define POOL 10   /* the pool's output rows and columns: 40 -> 20 -> 10 */
#define COUT 16
#define CLASSES 4

static void build(bf_model **m, bf_dataset **ds)
{
    tg_graph g = {0};
    uint64_t rng = 23;
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){-1, 3, HW, HW});
    dg_conv(&g, &rng, "stem", "x", 3, STEM, 7, 2, 3, "s");
    tg_node(&g, "Relu", "relu_s", (const char *const[]){"s"}, 1, "rs");
    Onnx__NodeProto *mp = tg_node(&g, "MaxPool", "pool", (const char *const[]){"rs"}, 1, "mp");
    tg_attr_ints(&g, mp, "kernel_shape", 2, (int64_t[]){3, 3});
    tg_attr_ints(&g, mp, "pads", 4, (int64_t[]){1, 1, 1, 1});
    tg_attr_ints(&g, mp, "strides", 2, (int64_t[]){2, 2});
    dg_conv(&g, &rng, "conv_b", "mp", STEM, COUT, 3, 1, 1, "b");
    tg_node(&g, "Relu", "relu_b", (const char *const[]){"b"}, 1, "rb");
    dg_head(&g, &rng, "rb", COUT, CLASSES);
    dg_finish_images(&g, &rng, SAMPLES, 3, HW, CLASSES, "stpool", m, ds);
}

static bf_campaign_spec spec_of(char **tensors, bf_target target)
{
    return tc_site_spec(BATCH, 5, TRIALS, tensors, target, 1, BF_PERSIST_PERMANENT);
}

/* a value the cache keeps, square planes: its name, channels, and rows (= columns) */
typedef struct cached_planes {
    const char *value;
    int64_t ch, hw;
} cached_planes;

static const cached_planes built_pool = {"mp", STEM, POOL};

/* The value of the first image in batch 0 as the cache holds it (the
 * pool's output in the graph built here): row hw / 2 replaced by the row
 * above, in every channel */
static void plant(const bf_model *m, const bf__gcache *gc, const cached_planes *at)
{
    int64_t v = bf_model_find_value(m, at->value);
    assert_true(v >= 0 && bf__gcache_has(gc, v));
    float *y = (float *)bf__gcache_block(gc, v, 0);
    assert_non_null(y);
    for (int64_t c = 0; c < at->ch; c++) {
        float *row = y + (c * at->hw + at->hw / 2) * at->hw;
        memcpy(row, row - at->hw, sizeof(float) * (size_t)at->hw);
    }
}

/* spec s run exact (threads 0) or differential on a prepared golden pass
 * on `threads` threads, planted there (or not: NULL); returns the pairs the
 * pass ran */
static int64_t run(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int threads,
                   const cached_planes *planted, bf_trial_record *out)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_campaign_prep prep = {.differential = 1, .threads = threads};
    if (bf_campaign_create_prepared(m, ds, s, NULL, threads ? &prep : NULL, &c, &err) != BF_OK)
        fail_msg("create: %s", err.msg);
    int64_t pairs = 0;
    if (threads) {
        const bf__gcache *gc = bf__dx_shared_cache(c->golden.gdx);
        pairs = bf__gcache_pairs(gc);
        if (planted) plant(m, gc, planted);
    }
    tc_recs k = {out, 0};
    bf_campaign_opts o = {.threads = threads ? threads : 1, .exact = !threads, .on_trial = tc_keep, .user = &k};
    bf_campaign_result res;
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(res.trials_done, TRIALS);
    assert_int_equal(k.n, TRIALS);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    return pairs;
}

static void stem_pair_in_golden_pass(void **state)
{
    (void)state;
    unsetenv("BITFLIP_SIMD");
    int paired = bf__sgemm_best() >= BF_SGEMM_AVX2;   /* the stem kernel's levels */
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    build(&m, &ds);
    char *wb[] = {"conv_b.weight"}, *rs[] = {"rs"};
    struct {
        bf_campaign_spec s;
        const char *what;
        int64_t pairs;   /* a batch: the pass runs the pair in each, or in none */
    } cases[] = {{spec_of(wb, BF_TARGET_WEIGHTS), "conv_b.weight", paired},
                 {spec_of(rs, BF_TARGET_ACTIVATIONS), "the stem's Relu output", 0}};
    bf_trial_record ex[2][TRIALS], got[TRIALS];
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        run(m, ds, &cases[k].s, 0, NULL, ex[k]);
        for (int t = 1; t <= 2; t++) {
            int64_t pairs = run(m, ds, &cases[k].s, t, NULL, got);
            if (pairs != cases[k].pairs * BATCHES)
                fail_msg("%s, %d thread(s): the golden pass ran %lld pairs, expected %lld", cases[k].what, t,
                         (long long)pairs, (long long)(cases[k].pairs * BATCHES));
            for (int i = 0; i < TRIALS; i++) tc_assert_same_record(&got[i], &ex[k][got[i].trial]);
            print_message("%s, %d thread(s): %lld pairs in the golden pass, every record the exact engine's\n",
                          cases[k].what, t, (long long)pairs);
        }
    }
    /* the planted error: the weight faults' trials read the pool's output */
    run(m, ds, &cases[0].s, 1, &built_pool, got);
    int differ = 0;
    for (int i = 0; i < TRIALS; i++) differ += !dg_same_record(&got[i], &ex[0][got[i].trial]);
    print_message("planted error in the pair's output: %d of %d records differ from the exact engine's\n", differ,
                  TRIALS);
    assert_true(differ > 0);
    bf_dataset_free(ds);
    bf_model_free(m);
    if (!paired) {
        print_message("test_diff_stpool: SKIP: no AVX2 on this CPU, so no stem pair ran in the golden pass "
                      "(linalg_conv_stpool.c, AVX2 and AVX-512); the records were still checked against --exact\n");
        skip();
    }
}

static void real_export_golden_pass(void **state)
{
    (void)state;
    unsetenv("BITFLIP_SIMD");
    int paired = bf__sgemm_best() >= BF_SGEMM_AVX2;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_open_real("resnet_stem", &m, &ds);
    char *w[] = {"onnx::Conv_72"};   /* layers.1.0.conv1's weight, its BatchNorm folded in */
    bf_campaign_spec s = spec_of(w, BF_TARGET_WEIGHTS);
    s.batch = 5;
    const int64_t batches = 4;   /* 16 samples: 5, 5, 5, 1 */
    bf_trial_record ex[TRIALS], got[TRIALS];
    run(m, ds, &s, 0, NULL, ex);
    for (int t = 1; t <= 2; t++) {
        int64_t pairs = run(m, ds, &s, t, NULL, got);
        if (pairs != paired * batches)
            fail_msg("resnet_stem, %d thread(s): the golden pass ran %lld pairs, expected %lld", t, (long long)pairs,
                     (long long)(paired * batches));
        int changed = 0;
        for (int i = 0; i < TRIALS; i++) {
            tc_assert_same_record(&got[i], &ex[got[i].trial]);
            changed += got[i].changed > 0;
        }
        print_message("resnet_stem, %d thread(s): %lld pairs in the golden pass, every record the exact engine's "
                      "(%d of %d trials changed a prediction)\n",
                      t, (long long)pairs, changed, TRIALS);
    }
    /* the comparison has teeth here too: the same planted error changes
     * records (in what the trials read, the first block's output that the
     * pair's output feeds: the cache keeps no value in between) */
    static const cached_planes block_out = {"/layers/layers.0/layers.0.0/relu_1/Relu_output_0", 16, 10};
    run(m, ds, &s, 1, &block_out, got);
    int differ = 0;
    for (int i = 0; i < TRIALS; i++) differ += !dg_same_record(&got[i], &ex[got[i].trial]);
    print_message("resnet_stem, planted error in the first block's output: %d of %d records differ\n", differ, TRIALS);
    assert_true(differ > 0);
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stem_pair_in_golden_pass),
        cmocka_unit_test(real_export_golden_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
