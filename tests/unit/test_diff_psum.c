/* The partial-sum resume (docs/ENGINE.md, step 4): a Conv re-run because
 * its input moved in one channel c alone starts at the last checkpoint at
 * or before c's block of 16 channels, from the sums the golden pass kept
 * there (core/src/diff/diffpsum.c).
 *
 * The graph, built here: x [N, 16, 7, 7] -> Conv A (384 channels, 3x3) ->
 * BatchNormalization -> Relu -> Conv B (32 channels, 3x3, 384 input channels: three chunks of
 * 128 where linalg_conv_bcast.c runs it on AVX-512, twelve of 32 on
 * AVX2: chunk_channels) -> Relu ->
 * GlobalAveragePool -> Flatten -> Gemm (4 classes). A fault in A's weights
 * moves one channel of A's output, which the BN and Relu keep in it,
 * so B's re-run resumes at or before that channel. 28 samples at batch 12:
 * two full batches (bcast calls of 8 and 4 images) and a partial one (a
 * plan of 4 images, whose checkpoints lie closer together).
 *
 * Checked: every record of the differential engine with the resume (a
 * prepared golden pass, as `bitflip run` makes it) is the exact engine's,
 * bit for bit (weight faults in A on 1 and 2 threads, two-bit faults,
 * value faults on A's Relu output, a shard); and each planted error
 * (diff/diff_plant.h, made in the saved checkpoints after the golden pass:
 * a checkpoint of the wrong chunk, the sums of one chunk later, sums saved
 * before their chunk's adds at some positions) changes some record: the
 * comparison would catch it. The golden pass writes only the checkpoints
 * the drawn weight faults' trials resume from: of 1 to 8 trials, the
 * bytes are those of the checkpoints listed by hand from the faults'
 * channels (the channel of A's output a weight index moves is index /
 * (16 x 3 x 3); one checkpoint for each chunk of chunk_channels but the
 * first holding a drawn channel, at the 16-channel block of the lowest of
 * them), each checkpoint's bytes a value-fault campaign's (which keeps one
 * at each chunk's start but the first's: two) over its count, and the
 * records the exact engine's. Where the CPU has no
 * AVX2, B takes another path, nothing resumes, and only the first part
 * can be checked (the test says so). */
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
#include "campaign/campaign_impl.h"   /* the prepared golden pass's state, for the planted errors */
#include "campaign_check.h"
#include "diff/diff_plant.h"
#include "diff_graph.h"
#include "exec/ops/sgemm.h"
#include "onnx_graph.h"

#define SAMPLES 28
#define BATCH 12
/* Under the sanitizers (BF_SANITIZED, tests/CMakeLists.txt) 16 trials a
 * campaign rather than 40: every step and assertion as in the release build,
 * and at 16 they still hold where they could fail: re-runs resume on 1 and 2
 * threads and in a shard (21, 21, 9 for conv_a's one-bit faults; 40 trials:
 * 63, 63, 30), from both checkpoints (882 KiB kept, as at 40), and each planted
 * error changes 7 of the 16 records (21 of 40): tests/README.md, "The
 * twentieth round". The exact engine's whole passes, most of the test's time
 * under ASan, scale with the count. */
#ifdef BF_SANITIZED
#define TRIALS 16
#else
#define TRIALS 40
#endif
#define CIN 16
#define MID 384
#define COUT 32
#define HW 7
#define CLASSES 4

/* the graph and its eval set (safetensors: x and labels) */
static void build(bf_model **m, bf_dataset **ds)
{
    tg_graph g = {0};
    uint64_t rng = 17;
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){-1, CIN, HW, HW});
    dg_conv(&g, &rng, "conv_a", "x", CIN, MID, 3, 1, 1, "a");
    /* a BatchNormalization in A's fused chain, as in a ResNet: the cache
     * then keeps no value of the chain but its end, so no chain mode
     * starts at A (diffchain.c) and A's faults take the whole-batch path */
    const char *bnp[4] = {"bn_a.weight", "bn_a.bias", "bn_a.running_mean", "bn_a.running_var"};
    for (int k = 0; k < 4; k++) {
        float *v = tg_alloc(&g, sizeof(float) * MID);
        dg_fill(&rng, v, MID, 0.2);
        for (int i = 0; k == 0 && i < MID; i++) v[i] += 1.0f;
        for (int i = 0; k == 3 && i < MID; i++) v[i] = 1.0f + fabsf(v[i]);
        tg_init_f32(&g, bnp[k], 1, (int64_t[]){MID}, v);
    }
    tg_node(&g, "BatchNormalization", "bn_a", (const char *const[]){"a", bnp[0], bnp[1], bnp[2], bnp[3]}, 5, "na");
    tg_node(&g, "Relu", "relu_a", (const char *const[]){"na"}, 1, "ra");
    dg_conv(&g, &rng, "conv_b", "ra", MID, COUT, 3, 1, 1, "b");
    tg_node(&g, "Relu", "relu_b", (const char *const[]){"b"}, 1, "rb");
    dg_head(&g, &rng, "rb", COUT, CLASSES);
    dg_finish_images(&g, &rng, SAMPLES, CIN, HW, CLASSES, "psum", m, ds);
}

static bf_campaign_spec spec_of(char **tensors, bf_target target, int bits, bf_persistence persist)
{
    return tc_site_spec(BATCH, 11, TRIALS, tensors, target, bits, persist);
}

/* spec s run exact (prep NULL) or on a prepared differential golden pass,
 * planted error `plant` (diff_plant.h; 0: none) made in its checkpoints */
static void run(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, const bf_campaign_prep *prep,
                int plant, int threads, int64_t shard, int64_t shards, bf_trial_record *out, bf_campaign_result *res)
{
    bf_campaign *c = tc_create_prepared(m, ds, s, prep);
    if (plant) assert_true(bf__dx_shared_psum_plant(c->golden.gdx, plant) > 0);
    tc_run_keep(c, prep == NULL, threads, shard, shards, out, res);
}

/* exact and differential (1 and 2 threads, and a shard of 2): the same
 * records; returns the resumes of the 1-thread run, and the exact records
 * in keep when it is not NULL (the planted errors' reference, which was
 * the same exact run of the same spec made a second time) */
static int64_t check_exact(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, const char *label,
                           bf_trial_record *keep)
{
    bf_trial_record exs[TRIALS], got[TRIALS], *ex = keep ? keep : exs;
    bf_campaign_result res;
    run(m, ds, s, NULL, 0, 1, 0, 0, ex, &res);
    bf_campaign_result_free(&res);
    int64_t resumed = 0;
    for (int t = 1; t <= 3; t++) {
        bf_campaign_prep prep = {.differential = 1, .threads = t == 2 ? 2 : 1, .shard_index = t == 3,
                                 .shard_count = t == 3 ? 2 : 0};
        run(m, ds, s, &prep, 0, t == 2 ? 2 : 1, t == 3, t == 3 ? 2 : 0, got, &res);
        for (int64_t k = 0; k < res.trials_done; k++) tc_assert_same_record(&got[k], &ex[got[k].trial]);
        if (t == 1) resumed = res.psum.resumed;
        printf("%s, %s: %lld re-runs resumed, %.1f%% of the Conv work skipped, checkpoints %.1f KiB of %d Conv(s)\n",
               label, t == 1 ? "1 thread" : t == 2 ? "2 threads" : "shard 1/2", (long long)res.psum.resumed,
               100 * res.psum.conv_skipped, (double)res.psum.bytes / 1024.0, res.psum.convs);
        bf_campaign_result_free(&res);
    }
    return resumed;
}

/* B's chunks of K on this CPU, by hand from linalg_conv_bcast.c's
 * BC_KCHUNK (1152 k terms on AVX-512) and BC_KCHUNK8 (288 on AVX2): whole
 * blocks of 16 of its 3 x 3 kernel's input channels */
static int chunk_channels(void)
{
    return bf__sgemm_best() >= BF_SGEMM_AVX512 ? 128 : 32;
}

static void resume_matches_exact(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    build(&m, &ds);
    char *wa[] = {"conv_a.weight"}, *ra[] = {"ra"};
    bf_campaign_spec s1 = spec_of(wa, BF_TARGET_WEIGHTS, 1, BF_PERSIST_PERMANENT);
    bf_campaign_spec s2 = spec_of(wa, BF_TARGET_WEIGHTS, 2, BF_PERSIST_PERMANENT);
    bf_campaign_spec sv = spec_of(ra, BF_TARGET_ACTIVATIONS, 1, BF_PERSIST_PERMANENT);
    bf_campaign_spec st = spec_of(ra, BF_TARGET_ACTIVATIONS, 1, BF_PERSIST_TRANSIENT);
    bf_trial_record ex[TRIALS], got[TRIALS];
    int64_t resumed = check_exact(m, ds, &s1, "conv_a.weight, 1 bit", ex);
    int64_t r2 = check_exact(m, ds, &s2, "conv_a.weight, 2 bits", NULL);
    int64_t rv = check_exact(m, ds, &sv, "relu_a's output, permanent", NULL);
    int64_t rt = check_exact(m, ds, &st, "relu_a's output, transient", NULL);
    if (!resumed) {
        printf("no re-run resumed (B takes another path on this CPU: no AVX2): the planted errors cannot show\n");
    } else {
        /* the resume at work on weight and permanent value faults (a
         * transient one's batch runs on its one sample's row, diffrows.c,
         * in a plan of other images: no checkpoint of that layout) */
        assert_true(r2 > 0 && rv > 0);
        (void)rt;
        bf_campaign_result res;
        for (int plant = BF__PSUM_PLANT_WRONG_CHUNK; plant <= BF__PSUM_PLANT_EARLY; plant++) {
            bf_campaign_prep prep = {.differential = 1, .threads = 1};
            run(m, ds, &s1, &prep, plant, 1, 0, 0, got, &res);
            assert_true(res.psum.resumed > 0);
            int differ = 0;
            for (int64_t k = 0; k < res.trials_done; k++) differ += !dg_same_record(&got[k], &ex[got[k].trial]);
            printf("planted error %d: %d of %lld records differ from the exact engine's\n", plant, differ,
                   (long long)res.trials_done);
            assert_true(differ > 0);
            bf_campaign_result_free(&res);
        }
    }
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* the checkpoints a weight-fault campaign of `trials` keeps: those listed
 * by hand from its exact records (above), each `one` bytes */
static void kept_matches_channels(const bf_model *m, const bf_dataset *ds, int trials, size_t one)
{
    char *wa[] = {"conv_a.weight"};
    bf_campaign_spec s = spec_of(wa, BF_TARGET_WEIGHTS, 1, BF_PERSIST_PERMANENT);
    s.trials = trials;
    bf_trial_record ex[TRIALS], got[TRIALS];
    bf_campaign_result res;
    run(m, ds, &s, NULL, 0, 1, 0, 0, ex, &res);
    bf_campaign_result_free(&res);
    const int ch = chunk_channels();
    int64_t lowest[MID / 16] = {0};   /* per chunk of B's input: its checkpoint's block (0: none) */
    int n_need = 0, n_after = 0;   /* n_after: the trials whose channel lies at or after a checkpoint */
    for (int t = 0; t < trials; t++) {
        assert_int_equal(ex[t].n_kept, 1);
        int64_t c = ex[t].faults[0].index / (CIN * 9), q = c / ch, at = c / 16 * 16;
        if (q >= 1 && (!lowest[q] || at < lowest[q])) lowest[q] = at;
        n_after += q >= 1;
    }
    for (int q = 0; q < MID / ch; q++) n_need += lowest[q] > 0;
    bf_campaign_prep prep = {.differential = 1, .threads = 1};
    run(m, ds, &s, &prep, 0, 1, 0, 0, got, &res);
    for (int64_t k = 0; k < res.trials_done; k++) tc_assert_same_record(&got[k], &ex[got[k].trial]);
    char at[MID / 16 * 8] = "", *e = at;
    for (int q = 1; q < MID / ch; q++)
        if (lowest[q]) e += snprintf(e, (size_t)(at + sizeof at - e), " %lld", (long long)lowest[q]);
    printf("%d trial(s): %d checkpoint(s) kept (%.1f KiB), at channels%s, %lld re-runs resumed (chunks of %d)\n", trials,
           n_need, (double)res.psum.bytes / 1024.0, n_need ? at : " (none)", (long long)res.psum.resumed, ch);
    assert_int_equal(res.psum.bytes, (size_t)n_need * one);
    assert_int_equal(res.psum.convs, n_need > 0);
    /* each such trial re-runs B on the three batches (its channel of A's
     * output moves in every image), each from a checkpoint; the others none */
    assert_int_equal(res.psum.resumed, 3 * n_after);
    bf_campaign_result_free(&res);
}

static void checkpoints_follow_the_drawn_channels(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    build(&m, &ds);
    char *ra[] = {"ra"};
    bf_campaign_spec sv = spec_of(ra, BF_TARGET_ACTIVATIONS, 1, BF_PERSIST_PERMANENT);
    bf_trial_record got[TRIALS];
    bf_campaign_result res;
    bf_campaign_prep prep = {.differential = 1, .threads = 1};
    run(m, ds, &sv, &prep, 0, 1, 0, 0, got, &res);   /* an activation's channel is not known: every checkpoint */
    size_t all = res.psum.bytes;
    bf_campaign_result_free(&res);
    if (!all) {
        printf("no checkpoint (B takes another path on this CPU: no AVX2)\n");
    } else {
        for (int trials = 1; trials <= 8; trials++)
            kept_matches_channels(m, ds, trials, all / (MID / chunk_channels() - 1));
    }
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resume_matches_exact),
        cmocka_unit_test(checkpoints_follow_the_drawn_channels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
