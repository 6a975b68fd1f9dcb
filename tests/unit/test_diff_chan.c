/* Channel-local steps of the differential engine (diff/diffchan.c): a
 * value changed in one channel alone is followed through the steps that
 * keep it there (BatchNormalization, unary activations and Clip, depthwise
 * Conv, Add/Mul with a golden operand or the same channel, pooling), each
 * computing and comparing that channel only. Every trial's record must be
 * the exact engine's, bit for bit (outcome, changed predictions, every
 * metric: test_diff.c's rules), on 1 and on 2 threads, and the channel path
 * must have been taken (bf_campaign_result.chan_steps, `--stats`).
 *
 * Fixtures (tests/fixtures/real, make_real_models.py; fuse/conv_bn):
 * resnet_basic (Conv -> Relu, MaxPool, residual Add, GlobalAveragePool),
 * mobilenet_v2 (expand 1x1 -> Clip(0, 6) -> depthwise -> Clip -> project,
 * residual Add; BN folded), mobilenet_v3_small_bn (BatchNormalization kept,
 * HardSwish as HardSigmoid and Mul of the same channel, squeeze-excitation:
 * GlobalAveragePool, two 1x1 Convs, HardSigmoid, Mul), conv_bn (a kept BN
 * before HardSwish, Relu, Clip, Add), efficientnet_bn and lraspp (below).
 * Faults: single-bit weight flips in
 * every tensor (expand, depthwise and project convolutions among them),
 * 2-bit flips confined to BatchNormalization parameters, and activation
 * flips, permanent (one element of every sample: one channel) and
 * transient. The classifier Gemm of mobilenet_v3_small_bn also runs once
 * over every batch's changed rows (diff/diffout.c), asserted taken. */
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

/* Trials per campaign: 60, or 30 under the sanitizers (ASan took 55 s for
 * 60 on a loaded machine; every path is still taken, the counters say so) */
#ifdef BF_SANITIZED
#define TRIALS 30
#else
#define TRIALS 60
#endif

/* the differential runs' channel-local steps by kind (chan_kinds) */
typedef struct kinds {
    int64_t resize, concat, conv, gate, reduce;
} kinds;

/* Runs s on `threads` threads, exact or differential (never a full pass),
 * every record into r; adds the differential run's channel-local steps to
 * *chan, by kind to *k, and its output Gemms run once over every batch
 * (diffout.c) to *outb (k, outb NULL: not counted). */
static void run_one_k(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int threads, int exact,
                      const char *label, tc_recs *r, int64_t *chan, int64_t *outb, kinds *k)
{
    bf_campaign *c = tc_make(m, ds, s);
    r->r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *r->r);
    r->n = 0;
    assert_non_null(r->r);
    bf_campaign_opts o = {.threads = threads, .exact = exact, .no_full_pass = !exact, .on_trial = tc_keep, .user = r};
    bf_campaign_result res;
    bf_error err = {0};
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s: %s", label, err.msg);
    assert_int_equal(res.trials_done, r->n);
    if (exact) assert_int_equal(res.chan_steps, 0);   /* the exact engine runs whole steps */
    else *chan += res.chan_steps;
    if (exact) assert_int_equal(res.out_batched, 0);
    else if (outb) *outb += res.out_batched;
    if (k && !exact) {
        k->resize += res.chan_kinds.resize, k->concat += res.chan_kinds.concat, k->conv += res.chan_kinds.conv;
        k->gate += res.chan_kinds.gate, k->reduce += res.chan_kinds.reduce;
    }
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
}

static void run_one(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int threads, int exact,
                    const char *label, tc_recs *r, int64_t *chan, int64_t *outb)
{
    run_one_k(m, ds, s, threads, exact, label, r, chan, outb, NULL);
}

/* The same differential with the near-exact updates (a Conv channel moved
 * by an update where its change is clear, then the channel-local steps on
 * it), 2 threads. */
static void run_near(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, tc_recs *r, int64_t *chan)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_campaign_prep prep = {.differential = 1, .near_exact = 1};
    if (bf_campaign_create_prepared(m, ds, s, NULL, &prep, &c, &err) != BF_OK) fail_msg("near-exact: %s", err.msg);
    r->r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *r->r);
    r->n = 0;
    assert_non_null(r->r);
    bf_campaign_opts o = {.threads = 2, .near_exact = 1, .no_full_pass = 1, .on_trial = tc_keep, .user = r};
    bf_campaign_result res;
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("near-exact: %s", err.msg);
    assert_int_equal(res.trials_done, r->n);
    *chan += res.chan_steps;
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
}

typedef struct fx_case {
    const char *label;
    tc_config cf;
    char **pats;
    size_t n_pats;
} fx_case;

/* Every case of one fixture: exact once (2 threads), differential on 1 and
 * on 2 threads, each compared with it; returns the channel-local steps
 * (by kind into *kd), and adds the output Gemms run over every batch at
 * once to *outb (kd, outb NULL: not counted). */
static int64_t fixture_cases_k(const char *stem, const char *name, const fx_case *cs, size_t n, int64_t trials,
                               tc_tally *t, int64_t *outb, kinds *kd)
{
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_open(stem, &m, &ds);
    double scale = tc_out_scale(m, ds);
    int64_t chan = 0;
    for (size_t k = 0; k < n; k++) {
        /* batch 5: a partial last batch too */
        bf_campaign_spec s = tc_config_spec(&cs[k].cf, 31 + k, trials, 5, cs[k].pats, cs[k].n_pats);
        tc_recs ex = {0};
        run_one(m, ds, &s, 2, 1, cs[k].label, &ex, &chan, NULL);
        for (int th = 1; th <= 2; th++) {
            tc_recs df = {0};
            char label[160];
            snprintf(label, sizeof label, "%s, %d thread%s", cs[k].label, th, th > 1 ? "s" : "");
            run_one_k(m, ds, &s, th, 0, label, &df, &chan, outb, kd);
            tc_compare(name, label, &ex, &df, scale, t);
            free(df.r);
        }
        free(ex.r);
    }
    printf("%s: %lld steps run on one channel\n", name, (long long)chan);
    bf_dataset_free(ds);
    bf_model_free(m);
    return chan;
}

static int64_t fixture_cases(const char *stem, const char *name, const fx_case *cs, size_t n, int64_t trials,
                             tc_tally *t, int64_t *outb)
{
    return fixture_cases_k(stem, name, cs, n, trials, t, outb, NULL);
}

/* fixture_cases on each of tests/fixtures/real/NETS, asserting each took
 * the channel-local path (not only the old one). */
static void real_cases(const char *const *nets, size_t n_nets, const fx_case *cs, size_t n_cs, tc_tally *t)
{
    for (size_t n = 0; n < n_nets; n++) {
        char stem[512];
        snprintf(stem, sizeof stem, "%s/real/%s", BF_FIXTURES, nets[n]);
        int64_t chan = fixture_cases(stem, nets[n], cs, n_cs, TRIALS, t, NULL);
        assert_true(chan > 0);
    }
}

#define W1 {"w", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1}
#define W2 {"w2", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 2}
#define AP {"ap", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1}
#define AT {"at", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_TRANSIENT, 1}

static char *all[] = {"*"};

static void cnn_records_match_exact(void **state)
{
    (void)state;
    static const char *const nets[] = {"resnet_basic", "mobilenet_v2"};
    const fx_case cs[] = {
        {"weights bitflip fp32", W1, all, 1},
        {"activations bitflip fp32 permanent", AP, all, 1},
        {"activations bitflip fp32 transient", AT, all, 1},
    };
    tc_tally t = {0};
    real_cases(nets, sizeof nets / sizeof *nets, cs, sizeof cs / sizeof *cs, &t);
    tc_assert_agree("channel-local steps (resnet_basic, mobilenet_v2), differential vs exact", &t, 12 * TRIALS);
}

static void mobilenet_v3_records_match_exact(void **state)
{
    (void)state;
    static char *bn[] = {"*running_mean", "*running_var", "*.1.weight", "*.1.bias"};
    const fx_case cs[] = {
        {"weights bitflip fp32", W1, all, 1},
        {"BN parameters 2-bit bitflip fp32", W2, bn, 4},
        {"activations bitflip fp32 permanent", AP, all, 1},
        {"activations bitflip fp32 transient", AT, all, 1},
    };
    tc_tally t = {0};
    int64_t outb = 0;
    int64_t chan = fixture_cases(BF_FIXTURES "/real/mobilenet_v3_small_bn", "mobilenet_v3_small_bn", cs,
                                 sizeof cs / sizeof *cs, TRIALS, &t, &outb);
    assert_true(chan > 0);
    /* its classifier Gemm ran once over every batch's changed rows in some
     * weight-fault trials (diffout.c), their records still exact's */
    printf("mobilenet_v3_small_bn: %lld output Gemms over every batch at once\n", (long long)outb);
    assert_true(outb > 0);
    tc_assert_agree("channel-local steps (mobilenet_v3_small_bn), differential vs exact", &t, 8 * TRIALS);
}

static void conv_bn_records_match_exact(void **state)
{
    (void)state;
    static char *bn[] = {"bn*"};
    const fx_case cs[] = {
        {"weights bitflip fp32", W1, all, 1},
        {"BN parameters 2-bit bitflip fp32", W2, bn, 1},
        {"activations bitflip fp32 permanent", AP, all, 1},
    };
    tc_tally t = {0};
    int64_t chan = fixture_cases(BF_FIXTURES "/fuse/conv_bn", "conv_bn", cs, sizeof cs / sizeof *cs, TRIALS, &t, NULL);
    assert_true(chan > 0);
    tc_assert_agree("channel-local steps (conv_bn: BN, HardSwish, Clip, Add), differential vs exact", &t, 6 * TRIALS);
}

/* More of the mobilenet_v3 family: efficientnet_bn (BatchNormalization
 * kept, SiLU as x * Sigmoid(x), a Mul of one channel by itself, and
 * squeeze-excitation) and lraspp (a mobilenet_v3 trunk with its segmentation
 * head: Sigmoid-gated Mul, Resize). */
static void v3_family_records_match_exact(void **state)
{
    (void)state;
    static const char *const nets[] = {"efficientnet_bn", "lraspp"};
    const fx_case cs[] = {
        {"weights bitflip fp32", W1, all, 1},
        {"activations bitflip fp32 permanent", AP, all, 1},
    };
    tc_tally t = {0};
    real_cases(nets, sizeof nets / sizeof *nets, cs, sizeof cs / sizeof *cs, &t);
    tc_assert_agree("channel-local steps (efficientnet_bn, lraspp), differential vs exact", &t, 8 * TRIALS);
}

/* Segmenters' heads (tests/fixtures/det: lraspp, deeplabv3, unet; and
 * chan/chan_seg, make_chan_seg.py): a channel followed through Resize, a
 * Concat on the channels, a grouped Conv (two input channels a group, one
 * output), a ReduceMean over the plane and the squeeze-excitation gate it
 * feeds, broadcast over the plane into a Mul. Weight faults everywhere, in
 * the heads alone, and in chan_seg's stem alone (whose one moved channel
 * can reach the grouped Conv only through the channel path), activation
 * faults; each kind of step asserted taken. */
static void segmenter_heads_match_exact(void **state)
{
    (void)state;
    static char *cls[] = {"classifier.*"};
    static char *unet[] = {"e3.*", "up2.*", "d2.*"};
    static char *chan[] = {"grouped.*", "dw.*", "fc1.*", "fc2.*", "b.*"};
    static char *stem[] = {"stem.*"}, *se[] = {"/fc2/Conv_output_0"};
    const struct {
        const char *stem, *name;
        char **heads;
        size_t n_heads;
        int64_t trials;
    } fx[] = {
        {BF_FIXTURES "/det/lraspp", "lraspp", cls, 1, TRIALS / 2},
        {BF_FIXTURES "/det/deeplabv3", "deeplabv3", cls, 1, TRIALS / 2},
        {BF_FIXTURES "/det/unet", "unet", unet, 3, TRIALS / 2},
        {BF_FIXTURES "/chan/chan_seg", "chan_seg", chan, 5, TRIALS},
    };
    tc_tally t = {0};
    kinds k = {0}, kc = {0};
    int64_t want = 0;
    for (size_t n = 0; n < sizeof fx / sizeof *fx; n++) {
        const fx_case cs[] = {
            {"weights bitflip fp32", W1, all, 1},
            {"head weights bitflip fp32", W1, fx[n].heads, fx[n].n_heads},
            {"activations bitflip fp32 permanent", AP, all, 1},
        };
        assert_true(fixture_cases_k(fx[n].stem, fx[n].name, cs, 3, fx[n].trials, &t, NULL, &k) > 0);
        want += 2 * 3 * fx[n].trials;
    }
    /* 60 trials whatever the build: most stem faults go to chain mode, or
     * are masked before the grouped Conv (30 under the sanitizers took the
     * channel path none of the times); and activation faults on the SE
     * block's second Conv's output alone (one channel of the gate before its
     * HardSigmoid, which a Mul broadcasts over the plane; chain mode takes
     * that Conv's weight faults) */
    const fx_case st[] = {{"stem weights bitflip fp32", W1, stem, 1}, {"SE gate activations bitflip fp32", AP, se, 1}};
    assert_true(fixture_cases_k(BF_FIXTURES "/chan/chan_seg", "chan_seg stem, SE", st, 2, 60, &t, NULL, &kc) > 0);
    want += 2 * 2 * 60;
    printf("segmenters: %lld Resize, %lld Concat, %lld Conv, %lld gates, %lld ReduceMean; chan_seg's stem and SE: "
           "%lld Conv, %lld gates\n", (long long)k.resize, (long long)k.concat, (long long)k.conv, (long long)k.gate,
           (long long)k.reduce, (long long)kc.conv, (long long)kc.gate);
    assert_true(k.resize > 0 && k.concat > 0 && k.conv > 0 && k.reduce > 0);
    assert_true(kc.conv > 0);   /* the grouped Conv, which the stem's channel reaches first */
    assert_true(kc.gate > 0);
    tc_assert_agree("channel-local steps (segmenters' heads), differential vs exact", &t, want);
}

/* --near-exact: its own rules against exact (campaign_check.h: outcomes
 * equal or a near tie, metrics within 1e-6), the channel path taken after
 * a Conv channel's update (try_conv's bf__conv_delta) too. */
static void near_exact_agrees(void **state)
{
    (void)state;
    static const char *const nets[] = {"mobilenet_v2", "mobilenet_v3_small_bn"};
    const tc_config w1 = W1;
    tc_tally t = {.near = 1};
    int64_t near_chan = 0;
    for (size_t n = 0; n < sizeof nets / sizeof *nets; n++) {
        bf_model *m = NULL;
        bf_dataset *ds = NULL;
        tc_open_real(nets[n], &m, &ds);
        double scale = tc_out_scale(m, ds);
        bf_campaign_spec s = tc_config_spec(&w1, 41, 5 * TRIALS / 3, 5, all, 1);
        tc_recs ex = {0}, ne = {0};
        int64_t chan = 0;
        run_one(m, ds, &s, 2, 1, "exact", &ex, &chan, NULL);
        run_near(m, ds, &s, &ne, &chan);
        tc_compare(nets[n], "near-exact weights bitflip fp32", &ex, &ne, scale, &t);
        printf("%s near-exact: %lld steps run on one channel\n", nets[n], (long long)chan);
        near_chan += chan;
        free(ex.r);
        free(ne.r);
        bf_dataset_free(ds);
        bf_model_free(m);
    }
    /* chain mode takes most single Conv faults there; the rest run batches */
    assert_true(near_chan > 0);
    tc_assert_agree("channel-local steps under --near-exact, against exact", &t, 10 * TRIALS / 3);
}

/* The graph's output written in place (diff/diffexec.c, own): a
 * segmenter's re-run steps write a batch's changed output straight into
 * the trial's outputs, whole (the final Resize over every channel) or on
 * the one channel a fault moved (the channel-local Resize, whose changed
 * samples bf__chan_rows finds), and it is never copied there afterwards.
 * Every trial's record and outputs must be the exact engine's, byte for
 * byte, on 1 and 2 threads (batch 5: the partial last batch's plan too),
 * and both paths taken (bf_campaign_result.out_in_place and
 * out_in_place_chan, `--stats`). The fixture's single weight faults go to
 * chain mode (its eval set is small), which writes the outputs row by row
 * as before; activation faults run batches. */
static void run_cap(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int threads, int exact,
                    tc_capture *cap, int64_t in_place[3])
{
    bf_campaign *c = tc_make(m, ds, s);
    tc_cap_init(cap, bf_campaign_num_trials(c));
    bf_campaign_opts o = {.threads = threads, .exact = exact, .no_full_pass = !exact, .on_trial = tc_cap_trial,
                          .on_outputs = tc_cap_outputs, .user = cap};
    bf_campaign_result res;
    bf_error err = {0};
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("in place: %s", err.msg);
    if (exact) assert_int_equal(res.out_in_place + res.plane_resizes, 0);
    else in_place[0] += res.out_in_place, in_place[1] += res.out_in_place_chan, in_place[2] += res.plane_resizes;
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
}

static void segmenter_outputs_in_place(void **state)
{
    (void)state;
    /* the head's logits before the final Resize (low and high classifiers,
     * their sum): a permanent fault is one channel of every sample, which
     * the channel-local Add and Resize carry to the output */
    static char *logits[] = {"t34", "t35", "t36"};
    const struct {
        const char *label;
        tc_config cf;
        char **pats;
        size_t n_pats;
    } cs[] = {{"weights bitflip fp32", W1, all, 1}, {"activations bitflip fp32 permanent", AP, all, 1},
              {"activations bitflip fp32 transient", AT, all, 1},
              {"head logits activations bitflip fp32 permanent", AP, logits, 3}};
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    int64_t acts[2] = {0, 0}, planes = 0;
    tc_open(BF_FIXTURES "/det/lraspp", &m, &ds);
    for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
        bf_campaign_spec s = tc_config_spec(&cs[k].cf, 51 + k, TRIALS, 5, cs[k].pats, cs[k].n_pats);
        tc_capture ex, df;
        int64_t in_place[3] = {0, 0, 0};
        run_cap(m, ds, &s, 2, 1, &ex, in_place);
        for (int th = 1; th <= 2; th++) {
            run_cap(m, ds, &s, th, 0, &df, in_place);
            int64_t n = ex.n, per = ex.samples * ex.cols;
            assert_int_equal(df.n, n);
            assert_int_equal(df.samples * df.cols, per);
            for (int64_t t = 0; t < n; t++) {
                tc_assert_same_record(&ex.rec[t], &df.rec[t]);
                if (memcmp(ex.out + t * per, df.out + t * per, (size_t)per * sizeof(float)) != 0)
                    fail_msg("lraspp, %s, %d thread(s): trial %lld's outputs differ from exact's", cs[k].label, th,
                             (long long)t);
            }
            tc_cap_free(&df);
        }
        printf("lraspp, %s: %lld batches' outputs written in place, %lld of them on one channel; %lld Resizes on "
               "their changed planes\n",
               cs[k].label, (long long)in_place[0], (long long)in_place[1], (long long)in_place[2]);
        planes += in_place[2];
        if (cs[k].cf.target == BF_TARGET_ACTIVATIONS) acts[0] += in_place[0], acts[1] += in_place[1];
        tc_cap_free(&ex);
    }
    assert_true(acts[0] > 0);
    assert_true(acts[1] > 0);
    assert_true(planes > 0);   /* diffplane.c's Resize on the planes that moved, its outputs compared above */
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* A Conv's fused chain whose output only depthwise Convs read
 * (mobilenet_v2's expansion -> Clip): the golden cache leaves it out where
 * the pass runs such chains lean (diffshared.c, root_values; bf__own_chan_all),
 * and a trial with a fault in that Conv writes its one moved channel with
 * nothing to compare it with, the depthwise Conv comparing its own
 * (diffchan.c, bf__dx_chain_channel); where a depthwise Conv must read it
 * whole (its own output not held either, under a small budget), the chain
 * runs whole from the cache's inputs (chain_whole). Cache budgets of 100 KB
 * and 1 MB on the fixture (batch 5: 20 and 24 such whole runs of the
 * 60 trials, seen with a temporary count when this was written), 1 and 2
 * threads: every record the exact engine's. */
static void chain_without_golden_matches_exact(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_open(BF_FIXTURES "/real/mobilenet_v2", &m, &ds);
    double scale = tc_out_scale(m, ds);
    const tc_config w1 = W1;
    bf_campaign_spec s = tc_config_spec(&w1, 5, TRIALS, 5, all, 1);
    tc_tally t = {0};
    tc_recs ex = {0};
    int64_t chan = 0;
    run_one(m, ds, &s, 2, 1, "exact", &ex, &chan, NULL);
    static const int64_t budgets[] = {100000, 1000000};
    for (size_t k = 0; k < 2; k++)
        for (int th = 1; th <= 2; th++) {
            bf_campaign *c = tc_make(m, ds, &s);
            tc_recs df = {0};
            df.r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *df.r);
            assert_non_null(df.r);
            bf_campaign_opts o = {.threads = th, .no_full_pass = 1, .cache_budget = budgets[k], .on_trial = tc_keep,
                                  .user = &df};
            bf_campaign_result res;
            bf_error err = {0};
            char label[96];
            snprintf(label, sizeof label, "budget %lld, %d thread%s", (long long)budgets[k], th, th > 1 ? "s" : "");
            if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s: %s", label, err.msg);
            assert_int_equal(res.trials_done, df.n);
            chan += res.chan_steps;
            bf_campaign_result_free(&res);
            bf_campaign_free(c);
            tc_compare("mobilenet_v2, chains without golden", label, &ex, &df, scale, &t);
            free(df.r);
        }
    free(ex.r);
    assert_true(chan > 0);
    tc_assert_agree("chains without golden (mobilenet_v2), differential vs exact", &t, 4 * TRIALS);
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cnn_records_match_exact),
        cmocka_unit_test(mobilenet_v3_records_match_exact),
        cmocka_unit_test(conv_bn_records_match_exact),
        cmocka_unit_test(v3_family_records_match_exact),
        cmocka_unit_test(segmenter_heads_match_exact),
        cmocka_unit_test(near_exact_agrees),
        cmocka_unit_test(segmenter_outputs_in_place),
        cmocka_unit_test(chain_without_golden_matches_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
