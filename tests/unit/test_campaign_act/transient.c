/* test_campaign_act: transient faults, BER on activations, threads and shards, DLRM's inputs. */
#include "test_campaign_act.h"

/* --- (3) a transient fault touches one sample; threads and shards agree */

/* Runs the spec with 1 thread, 3 threads, and as 3 shards on 2 threads:
 * identical records, outputs and aggregates. Returns the 1-thread capture. */
static void threads_shards(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, capture *c1,
                           bf_campaign_result *a)
{
    bf_campaign *c = tc_make(m, ds, s);
    int64_t n = bf_campaign_num_trials(c);
    capture c3, cs;
    bf_campaign_result b, merged = {0};
    capture_init(c1, n);
    capture_init(&c3, n);
    capture_init(&cs, n);
    run(c, 1, 0, 1, c1, a);
    run(c, 3, 0, 1, &c3, &b);
    assert_int_equal(a->trials_done, n);
    tc_assert_same_aggregates(a, &b);
    for (int64_t i = 0; i < 3; i++) {
        bf_campaign_result part;
        run(c, 2, i, 3, &cs, &part);
        bf_error err = {0};
        assert_int_equal(bf_campaign_result_merge(&merged, &part, &err), BF_OK);
        bf_campaign_result_free(&part);
    }
    tc_assert_same_aggregates(a, &merged);
    for (int64_t t = 0; t < n; t++) {
        tc_assert_same_record(&c1->rec[t], &c3.rec[t]);
        tc_assert_same_record(&c1->rec[t], &cs.rec[t]);
    }
    size_t bytes = (size_t)(n * c1->samples * c1->cols) * sizeof(float);
    assert_memory_equal(c1->out, c3.out, bytes);
    assert_memory_equal(c1->out, cs.out, bytes);
    bf_campaign_result_free(&b);
    bf_campaign_result_free(&merged);
    capture_free(&c3);
    capture_free(&cs);
    bf_campaign_free(c);
}

void transient_hits_one_sample(void **state)
{
    fx *f = *state;
    int64_t no;
    float *golden = plain_pass(f->digits, f->digits_ds, 1, &no);
    const int64_t cols = 10;
    bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT);
    s.trials = 40;
    s.positions[0] = 30;    /* the exponent's top bit: hardly ever masked */
    s.positions[1] = 31;
    s.n_positions = 2;
    capture cap;
    bf_campaign_result res;
    threads_shards(f->digits, f->digits_ds, &s, &cap, &res);
    int other_samples_seen = 0;
    int64_t hit[360] = {0};
    for (int64_t t = 0; t < s.trials; t++) {
        const bf_trial_record *r = &cap.rec[t];
        assert_int_equal(r->n_kept, 1);
        int64_t smp = r->faults[0].sample;
        assert_true(smp >= 0 && smp < 360);
        hit[smp]++;
        const float *out = trial_out(&cap, t);
        for (int64_t i = 0; i < 360; i++)
            if (i != smp) assert_memory_equal(out + i * cols, golden + i * cols, (size_t)cols * sizeof(float));
        other_samples_seen |= smp >= BATCH;
        assert_true(r->changed <= 1);
    }
    assert_true(other_samples_seen);
    assert_true(res.total.n[BF_OUTCOME_MASKED] < s.trials);
    bf_campaign_result_free(&res);
    capture_free(&cap);

    /* permanent: every record's sample is -1 */
    s.persistence = BF_PERSIST_PERMANENT;
    s.trials = 12;
    threads_shards(f->digits, f->digits_ds, &s, &cap, &res);
    for (int64_t t = 0; t < s.trials; t++) assert_int_equal(cap.rec[t].faults[0].sample, -1);
    bf_campaign_result_free(&res);
    capture_free(&cap);
    free(golden);
}

/* BER on activations: the flips land in one sample's positions, repeated in
 * every sample (permanent) or in one drawn sample (transient). */
void ber_on_activations(void **state)
{
    fx *f = *state;
    int64_t no;
    float *golden = plain_pass(f->digits, f->digits_ds, 1, &no);
    double rates[] = {1e-4, 1e-3};
    char *relu[] = {"op:Relu"};
    bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT);
    s.model_kind = BF_FAULT_BER;
    s.rates = rates;
    s.n_rates = 2;
    s.repeats = 4;
    s.tensors = relu;
    s.repr = BF_REPR_BF16;
    capture cap;
    bf_campaign_result res;
    threads_shards(f->digits, f->digits_ds, &s, &cap, &res);
    int64_t flips = 0;
    for (int64_t t = 0; t < 8; t++) {
        const bf_trial_record *r = &cap.rec[t];
        flips += r->n_faults;
        int64_t smp = r->n_kept ? r->faults[0].sample : -1;
        for (int k = 0; k < r->n_kept; k++) {
            assert_int_equal(r->faults[k].sample, smp);
            assert_true(r->faults[k].mask != 0 && r->faults[k].mask <= 0xffffu);
        }
        const float *out = trial_out(&cap, t);
        for (int64_t i = 0; i < 360; i++)
            if (i != smp) assert_memory_equal(out + i * 10, golden + i * 10, 10 * sizeof(float));
    }
    /* (512 + 1024) x 16 bits per sample: 2.5 and 25 flips per trial expected */
    assert_true(flips > 20 && flips < 200);
    assert_int_equal(res.by_rate[0].n[0] + res.by_rate[0].n[1] + res.by_rate[0].n[2] + res.by_rate[0].n[3], 4);
    bf_campaign_result_free(&res);
    capture_free(&cap);

    s.persistence = BF_PERSIST_PERMANENT;
    s.repr = BF_REPR_INT8;
    threads_shards(f->digits, f->digits_ds, &s, &cap, &res);
    for (int64_t t = 0; t < 8; t++)
        for (int k = 0; k < cap.rec[t].n_kept; k++) assert_int_equal(cap.rec[t].faults[k].sample, -1);
    bf_campaign_result_free(&res);
    capture_free(&cap);
    free(golden);
}

/* Inputs of a binary model with an integer input: only the float one is a
 * site; per-tensor and per-bit strata work on it. */
void dlrm_inputs(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = base_spec(BF_TARGET_INPUTS, BF_PERSIST_TRANSIENT);
    s.batch = 0;
    s.trials = 16;
    s.sampling = BF_SAMPLE_PER_BIT;
    s.positions[0] = 30;
    s.positions[1] = 31;
    s.n_positions = 2;
    capture cap;
    bf_campaign_result res;
    bf_campaign *c = tc_make(f->dlrm, f->dlrm_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 1);
    assert_string_equal(bf_campaign_site(c, 0)->name, "dense");
    assert_string_equal(bf_campaign_site(c, 0)->op, "Gemm");
    bf_campaign_free(c);
    threads_shards(f->dlrm, f->dlrm_ds, &s, &cap, &res);
    assert_int_equal(res.task, BF_TASK_BINARY);
    assert_int_equal(res.by_bit[30].n[0] + res.by_bit[30].n[1] + res.by_bit[30].n[2] + res.by_bit[30].n[3], 8);
    assert_int_equal(res.metric[BF_METRIC_AUC].n, 16);
    bf_campaign_result_free(&res);
    capture_free(&cap);
}
