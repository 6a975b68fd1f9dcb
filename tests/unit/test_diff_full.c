/* The differential engine hands a trial to a full pass when that costs
 * less (diffexec.c, full_pass_cheaper): more faults than a batch has
 * samples, reaching nearly every batch and step, as BER at a high rate
 * over a recommender's tables does (issue 21: on FM at BER 1e-3 the
 * differential engine once took 24x an exact pass).
 *
 * On the DeepFM fixture (first- and second-order embedding tables, the FM
 * pairwise term and an MLP; tests/fixtures/real, 64 samples, batches of 8):
 * - weight BER at 1e-2 (about 490 flips a trial over 1,530 parameters):
 *   every trial takes the full pass (the result's full_trials counts them),
 *   and its records are those of the exact engine, field by field and
 *   bit for bit (a full pass is the exact engine's pass);
 * - activation BER at 1e-2 (about 90 flips a trial): the same for value
 *   faults;
 * - weight BER at 1e-4 (a few flips): no trial takes it, and the records
 *   agree with the exact engine under test_diff.c's rules;
 * - BER confined to the MLP's last weight (about 256 flips of its 512 bits,
 *   more than a batch has samples, but reaching only the last few steps):
 *   no trial takes it either (the cost is weighed, not only the faults
 *   counted), and the records agree as above.
 * Each campaign runs differentially a second time with the shortcut off
 * (bf_campaign_opts.no_full_pass): no full pass, every trial's many faults
 * re-run differentially, and the records agree with the exact engine under
 * test_diff.c's rules.
 * The exact engine is the reference (checked against PyTorch by the
 * conformance fixtures), never the differential engine's own output. */
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

#define FIX BF_FIXTURES "/real/deepfm"
#define BATCH 8
#define REPEATS 12

typedef struct run {
    tc_recs recs;
    int64_t full_trials, trials;
} run;

static bf_campaign_spec ber_spec(bf_target target, double *rate, char **tensors)
{
    bf_campaign_spec s = tc_base_spec(BATCH);
    s.seed = 2121;
    s.target = target;
    s.model_kind = BF_FAULT_BER;
    s.persistence = BF_PERSIST_PERMANENT;
    s.rates = rate;
    s.n_rates = 1;
    s.repeats = REPEATS;
    if (tensors) {
        s.tensors = tensors;
        s.n_tensors = 1;
    }
    return s;
}

/* mode: 1 exact, 0 differential, 2 differential never taking a full pass */
static void run_one(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int mode, run *out)
{
    bf_campaign *c = tc_make(m, ds, s);
    out->recs.r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *out->recs.r);
    out->recs.n = 0;
    assert_non_null(out->recs.r);
    bf_campaign_opts o = {.threads = 2, .exact = mode == 1, .no_full_pass = mode == 2, .on_trial = tc_keep,
                          .user = &out->recs};
    bf_campaign_result res;
    bf_error err = {0};
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s", err.msg);
    out->full_trials = res.full_trials;
    out->trials = res.trials_done;
    assert_int_equal(res.trials_done, out->recs.n);
    assert_int_equal(res.exact, mode == 1);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
}

/* Runs s both ways; returns the differential run's full_trials. Records
 * identical when `identical`, else agreeing as test_diff.c requires; and
 * differentially with the shortcut off, agreeing so. */
static int64_t both(const char *label, const bf_campaign_spec *s, int identical)
{
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    double scale = tc_load(FIX, &m, &ds);
    run ex = {0}, df = {0}, off = {0};
    run_one(m, ds, s, 1, &ex);
    run_one(m, ds, s, 0, &df);
    run_one(m, ds, s, 2, &off);
    assert_int_equal(off.full_trials, 0);
    assert_int_equal(ex.full_trials, 0);   /* counted by the differential engine only */
    assert_int_equal(ex.recs.n, REPEATS);
    assert_int_equal(df.recs.n, REPEATS);
    int64_t faults = 0, many = 0;
    for (int64_t t = 0; t < ex.recs.n; t++) {
        faults += ex.recs.r[t].n_faults;
        many += ex.recs.r[t].n_faults > BATCH;
    }
    printf("  %s: %.1f faults a trial, %lld with more than a batch's %d samples; %lld of %lld trials as full passes\n",
           label, (double)faults / REPEATS, (long long)many, BATCH, (long long)df.full_trials, (long long)df.trials);
    /* never a trial with no more faults than a batch has samples */
    assert_true(df.full_trials <= many);
    if (identical) {
        for (int64_t t = 0; t < ex.recs.n; t++) tc_assert_same_record(&ex.recs.r[t], &df.recs.r[t]);
    } else {
        tc_tally tl = {0};
        tc_compare("deepfm", label, &ex.recs, &df.recs, scale, &tl);
        tc_assert_agree(label, &tl, REPEATS);
    }
    tc_tally to = {0};
    char l2[128];
    snprintf(l2, sizeof l2, "%s, never a full pass", label);
    tc_compare("deepfm", l2, &ex.recs, &off.recs, scale, &to);
    tc_assert_agree(l2, &to, REPEATS);
    free(off.recs.r);
    free(ex.recs.r);
    free(df.recs.r);
    bf_model_free(m);
    bf_dataset_free(ds);
    return df.full_trials;
}

static void high_ber_weights_run_in_full(void **state)
{
    (void)state;
    double rate = 1e-2;
    bf_campaign_spec s = ber_spec(BF_TARGET_WEIGHTS, &rate, NULL);
    assert_int_equal(both("weights ber 1e-2", &s, 1), REPEATS);
}

static void high_ber_activations_run_in_full(void **state)
{
    (void)state;
    double rate = 1e-2;
    bf_campaign_spec s = ber_spec(BF_TARGET_ACTIVATIONS, &rate, NULL);
    assert_int_equal(both("activations ber 1e-2", &s, 1), REPEATS);
}

static void few_faults_stay_differential(void **state)
{
    (void)state;
    double rate = 1e-4;   /* 1,530 x 32 bits: about 5 flips a trial, mostly fewer than a batch's 8 samples */
    bf_campaign_spec s = ber_spec(BF_TARGET_WEIGHTS, &rate, NULL);
    assert_int_equal(both("weights ber 1e-4", &s, 0), 0);
}

static void many_faults_in_the_last_layer_stay_differential(void **state)
{
    (void)state;
    double rate = 0.5;
    char *last[] = {"deep.2.weight"};   /* 16 weights, 512 bits: about 256 flips, past every sample */
    bf_campaign_spec s = ber_spec(BF_TARGET_WEIGHTS, &rate, last);
    assert_int_equal(both("deep.2.weight ber 0.5", &s, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(high_ber_weights_run_in_full),
        cmocka_unit_test(high_ber_activations_run_in_full),
        cmocka_unit_test(few_faults_stay_differential),
        cmocka_unit_test(many_faults_in_the_last_layer_stay_differential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
