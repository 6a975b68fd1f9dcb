/* test_campaign: BER rates and counts, binary metrics. */
#include "test_campaign.h"

/* --- (4) BER */

void ber_rates_and_counts(void **state)
{
    fx *f = *state;
    double zero = 0;
    bf_campaign_spec s = base_spec();
    s.model_kind = BF_FAULT_BER;
    s.rates = &zero;
    s.n_rates = 1;
    s.repeats = 5;
    bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_num_trials(c), 5);
    records rs;
    records_init(&rs, 5);
    bf_campaign_result res;
    run(c, 2, 0, 1, &rs, &res);
    assert_int_equal(res.total.n[BF_OUTCOME_MASKED], 5);
    assert_int_equal(res.n_rates, 1);
    assert_int_equal(res.by_rate[0].n[BF_OUTCOME_MASKED], 5);
    for (int t = 0; t < 5; t++) {
        assert_int_equal(rs.r[t].n_faults, 0);
        assert_int_equal(rs.r[t].rate_index, 0);
    }
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);

    double rates[] = {1e-5, 1e-4, 1e-3};
    s.rates = rates;
    s.n_rates = 3;
    s.repeats = 4;
    c = tc_make(f->digits, f->digits_ds, &s);
    double pop = bf_campaign_population(c);
    assert_true(pop == 3818.0 * 32);
    assert_int_equal(bf_campaign_num_trials(c), 12);
    records_init(&rs, 12);
    run(c, 2, 0, 1, &rs, &res);
    assert_int_equal(res.trials_done, 12);
    double mean[3] = {0};
    for (int t = 0; t < 12; t++) {
        assert_int_equal(rs.r[t].rate_index, t / 4);
        mean[t / 4] += (double)rs.r[t].n_faults / 4;
        assert_true(rs.r[t].n_kept <= BF_TRIAL_FAULTS_MAX);
        assert_true(rs.r[t].n_kept <= rs.r[t].n_faults);
    }
    for (int i = 0; i < 3; i++) assert_int_equal(outcomes(&res.by_rate[i]), 4);
    /* expected 1.2, 12 and 122 flips per trial; the mean of 4 is well within */
    assert_true(mean[0] <= 6);
    assert_true(mean[1] > 5 && mean[1] < 22);
    assert_true(mean[2] > 90 && mean[2] < 155);
    /* at 1e-3 a hundred random flips in fp32 hit exponents: not all masked */
    assert_true(res.by_rate[2].n[BF_OUTCOME_MASKED] < 4);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);

    /* BER over allowed positions only: the population is elements x 1 */
    s.positions[0] = 30;
    s.n_positions = 1;
    double high = 0.01;
    s.rates = &high;
    s.n_rates = 1;
    s.repeats = 3;
    c = tc_make(f->digits, f->digits_ds, &s);
    assert_true(bf_campaign_population(c) == 3818.0);
    records_init(&rs, 3);
    run(c, 1, 0, 1, &rs, &res);
    for (int t = 0; t < 3; t++) {
        assert_true(rs.r[t].n_faults > 10 && rs.r[t].n_faults < 80);
        assert_int_equal(rs.r[t].n_kept, BF_TRIAL_FAULTS_MAX);
        for (int k = 0; k < rs.r[t].n_kept; k++) {
            assert_int_equal(rs.r[t].faults[k].mask, 1u << 30);
            if (k) assert_true(rs.r[t].faults[k].site > rs.r[t].faults[k - 1].site ||
                               rs.r[t].faults[k].index > rs.r[t].faults[k - 1].index);
        }
    }
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);
}

/* A binary model: AUC, log loss and NE per trial, the golden ones set. */
void binary_metrics(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = base_spec();
    s.trials = 24;
    s.positions[0] = 30;
    s.positions[1] = 29;
    s.n_positions = 2;
    bf_campaign *c = tc_make(f->dlrm, f->dlrm_ds, &s);
    records rs;
    records_init(&rs, 24);
    bf_campaign_result res;
    run(c, 2, 0, 1, &rs, &res);
    assert_int_equal(res.task, BF_TASK_BINARY);
    assert_true(res.golden[BF_METRIC_AUC] > 0.5 && res.golden[BF_METRIC_AUC] <= 1);
    assert_true(isfinite(res.golden[BF_METRIC_LOGLOSS]) && isfinite(res.golden[BF_METRIC_NE]));
    assert_true(isnan(res.golden[BF_METRIC_ACCURACY]));
    assert_int_equal(res.metric[BF_METRIC_ACCURACY].n, 0);
    int64_t finite_auc = 0;
    for (int t = 0; t < 24; t++) {
        const bf_trial_record *r = &rs.r[t];
        assert_true(isnan(r->metrics[BF_METRIC_ACCURACY]));
        if (r->outcome == BF_OUTCOME_MASKED) {
            assert_true(r->metrics[BF_METRIC_AUC] == res.golden[BF_METRIC_AUC]);
            assert_true(r->metrics[BF_METRIC_MSE] == 0);
        }
        if (r->outcome == BF_OUTCOME_DUE) assert_true(isinf(r->metrics[BF_METRIC_MSE]));
        if (r->outcome == BF_OUTCOME_CRITICAL) assert_true(r->changed > 0);
        finite_auc += isfinite(r->metrics[BF_METRIC_AUC]) != 0;
        if (isfinite(r->metrics[BF_METRIC_LOGLOSS]))
            assert_true(fabs(r->metrics[BF_METRIC_NE] * (res.golden[BF_METRIC_LOGLOSS] / res.golden[BF_METRIC_NE]) -
                             r->metrics[BF_METRIC_LOGLOSS]) < 1e-9);
    }
    assert_int_equal(res.metric[BF_METRIC_AUC].n, finite_auc);
    /* the sum is within the grid's rounding of the plain sum */
    double sum = 0;
    for (int t = 0; t < 24; t++)
        if (isfinite(rs.r[t].metrics[BF_METRIC_AUC])) sum += rs.r[t].metrics[BF_METRIC_AUC];
    assert_true(fabs(sum - res.metric[BF_METRIC_AUC].sum) < 1e-6);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);

    /* a metric threshold makes a small AUC drop critical */
    s.sampling = BF_SAMPLE_UNIFORM;
    s.n_positions = 0;
    s.trials = 40;
    s.critical_metric = BF_METRIC_AUC;
    s.critical_delta = 0;
    c = tc_make(f->dlrm, f->dlrm_ds, &s);
    records_init(&rs, 40);
    run(c, 2, 0, 1, &rs, &res);
    for (int t = 0; t < 40; t++)
        if (rs.r[t].outcome == BF_OUTCOME_TOLERABLE) assert_false(rs.r[t].metrics[BF_METRIC_AUC] < res.golden[BF_METRIC_AUC]);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);

    /* ... and AUC on a classifier is refused */
    bf_campaign *bad = NULL;
    bf_error err = {0};
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &bad, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "auc"));
}
