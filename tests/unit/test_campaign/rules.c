/* test_campaign: errors that name the culprit, the stop rule, statistics. */
#include "test_campaign.h"

/* --- (5) errors name the culprit */

void errors_name_the_culprit(void **state)
{
    fx *f = *state;
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_campaign_spec s = base_spec();

    char *nope[] = {"fc.*", "nope*"};
    s.tensors = nope;
    s.n_tensors = 2;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);
    assert_null(c);
    assert_non_null(strstr(err.msg, "'nope*'"));
    assert_non_null(strstr(err.msg, "conv1.weight"));

    char *op[] = {"op:LSTM"};
    s.tensors = op;
    s.n_tensors = 1;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "LSTM"));
    assert_non_null(strstr(err.msg, "Gemm"));

    /* op:Gemm selects fc.weight and fc.bias; a glob with ? works too */
    char *gemm[] = {"op:Gemm"};
    s.tensors = gemm;
    c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 2);
    assert_string_equal(bf_campaign_site(c, 0)->name, "fc.weight");
    assert_string_equal(bf_campaign_site(c, 1)->op, "Gemm");
    assert_true(bf_campaign_population(c) == 2570.0 * 32);
    bf_campaign_free(c);
    char *glob[] = {"conv?.bias", "fc.bias"};
    s.tensors = glob;
    s.n_tensors = 2;
    c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 3);
    assert_int_equal(bf_campaign_site(c, 1)->elements, 16);
    bf_campaign_free(c);
    s.tensors = all_tensors;
    s.n_tensors = 1;

    bf_fault_entry list[] = {{.tensor = "fc.bias", .index = 9, .bit = 3, .sample = -1},
                             {.tensor = "fc.weight", .index = 9999, .bit = 3, .sample = -1}};
    s.sampling = BF_SAMPLE_LIST;
    s.list = list;
    s.n_list = 2;
    c = NULL;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ERANGE);
    assert_string_equal(err.msg, "list entry 1: tensor 'fc.weight' has 2560 elements, index 9999 is out of range");
    list[1].tensor = "fc.weights";
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "list entry 1"));
    assert_non_null(strstr(err.msg, "'fc.weights'"));
    s.sampling = BF_SAMPLE_UNIFORM;

    /* weights are permanent only (activations and inputs: test_campaign_act.c) */
    s.persistence = BF_PERSIST_TRANSIENT;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "transient"));
    s.persistence = BF_PERSIST_PERMANENT;

    s.positions[0] = 16;
    s.n_positions = 1;
    s.repr = BF_REPR_FP16;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "16"));
    assert_non_null(strstr(err.msg, "fp16"));
    s.repr = BF_REPR_FP32;
    s.bits = 2;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ERANGE);
    s.n_positions = 0;
    s.bits = 1;

    bf_campaign_result res;
    c = tc_make(f->digits, f->digits_ds, &s);
    bf_campaign_opts o = {.shard_index = 3, .shard_count = 3};
    assert_int_equal(bf_campaign_run(c, &o, &res, &err), BF_EINVAL);
    int cancel = 1;
    o = (bf_campaign_opts){.threads = 2, .cancel = &cancel};
    assert_int_equal(bf_campaign_run(c, &o, &res, &err), BF_ECANCELED);
    assert_non_null(strstr(err.msg, "canceled"));
    bf_campaign_free(c);
}

/* --- (6) the stop rule */

void stop_rule_is_deterministic(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = base_spec();
    /* flipping a low mantissa bit: mostly masked or tolerable, a clear split */
    s.positions[0] = 0;
    s.n_positions = 1;
    s.trials = 2000;
    s.stop_margin = 0.1;
    bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
    bf_campaign_result a, b;
    records ra, rb;
    records_init(&ra, 2000);
    records_init(&rb, 2000);
    run(c, 1, 0, 1, &ra, &a);
    run(c, 3, 0, 1, &rb, &b);
    assert_true(a.stopped_early);
    assert_true(a.trials_done < 2000);
    assert_int_equal(a.trials_done % 64, 0);
    assert_int_equal(ra.calls, a.trials_done);
    assert_int_equal(rb.calls, b.trials_done);
    assert_int_equal(a.trials_planned, 2000);
    tc_assert_same_aggregates(&a, &b);
    for (int64_t t = 0; t < a.trials_done; t++) tc_assert_same_record(&ra.r[t], &rb.r[t]);
    /* the rule holds where it stopped, and did not one check earlier */
    for (int o = 0; o < BF_OUTCOME_COUNT; o++) {
        double lo, hi;
        bf_wilson(a.total.n[o], a.trials_done, 0.95, &lo, &hi);
        assert_true((hi - lo) / 2 <= 0.1);
    }
    bf_campaign_result_free(&a);
    bf_campaign_result_free(&b);
    bf_campaign_free(c);
    free(ra.r);
    free(rb.r);
}

/* --- (7) statistics */

void statistics(void **state)
{
    (void)state;
    double lo, hi;
    bf_wilson(0, 10, 0.95, &lo, &hi);
    assert_true(lo == 0);
    assert_true(fabs(hi - 0.2775) < 5e-5);
    bf_wilson(5, 10, 0.95, &lo, &hi);
    assert_true(fabs(lo - 0.2366) < 5e-5);
    assert_true(fabs(hi - 0.7634) < 5e-5);
    bf_wilson(10, 10, 0.95, &lo, &hi);
    assert_true(hi == 1 && fabs(lo - 0.7225) < 5e-5);
    bf_wilson(0, 0, 0.95, &lo, &hi);
    assert_true(lo == 0 && hi == 1);

    assert_true(fabs(bf_z_for_confidence(0.95) - 1.959963984540054) < 1e-12);
    assert_true(fabs(bf_z_for_confidence(0.99) - 2.5758293035489004) < 1e-12);
    assert_true(fabs(bf_z_for_confidence(0.90) - 1.6448536269514722) < 1e-12);
    assert_true(fabs(bf_z_for_confidence(0.999999) - 4.891638475698358) < 1e-9);

    /* N / (1 + e^2 (N - 1) / (z^2 / 4)) = 1e6 / (1 + 99.9999 / 0.960365) = 9512.3 */
    assert_int_equal(bf_leveugle_trials(1e6, 0.01, 0.95), 9513);
    double z = 1.959963984540054, n = 1e6 / (1 + 1e-4 * (1e6 - 1) / (z * z * 0.25));
    assert_int_equal(bf_leveugle_trials(1e6, 0.01, 0.95), (int64_t)ceil(n));
    assert_int_equal(bf_leveugle_trials(100, 0.01, 0.95), 99);   /* almost the whole population */
    assert_int_equal(bf_leveugle_trials(0, 0.01, 0.95), 0);

    assert_string_equal(bf_metric_name(BF_METRIC_TOP1_MISMATCH), "top1_mismatch");
    assert_int_equal(bf_metric_parse("max_abs"), BF_METRIC_MAX_ABS);
    assert_int_equal(bf_metric_parse("nope"), -1);
    for (int m = 0; m < BF_METRIC_COUNT; m++) assert_int_equal(bf_metric_parse(bf_metric_name(m)), m);
    assert_string_equal(bf_outcome_name(BF_OUTCOME_DUE), "due");
    assert_string_equal(bf_outcome_name(BF_OUTCOME_MASKED), "masked");
}
