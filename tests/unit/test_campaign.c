/* Campaigns on real models: outcomes consistent with PyTorch's reference
 * faults, results independent of threads and shards, fp16/bf16/int8 values
 * checked against conversions written here from the format definitions,
 * BER counts, sampling strata, the stop rule, errors that name the culprit,
 * and the statistics against hand-computed values. */
#include "test_campaign/test_campaign.h"

int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    bf_error err = {0};
    if (!f || tc_try_open(FIX "demo_digits", &f->digits, &f->digits_ds, &err) ||
        tc_try_open(FIX "dlrm_ops_op13", &f->dlrm, &f->dlrm_ds, &err) ||
        tc_try_open(FIX "mlp_ops_op13", &f->mlp, &f->mlp_ds, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = f;
    return 0;
}

int teardown(void **state)
{
    fx *f = *state;
    bf_model_free(f->digits);
    bf_model_free(f->dlrm);
    bf_model_free(f->mlp);
    bf_dataset_free(f->digits_ds);
    bf_dataset_free(f->dlrm_ds);
    bf_dataset_free(f->mlp_ds);
    free(f);
    return 0;
}

/* --- helpers */

char *all_tensors[] = {"*"};

bf_campaign_spec base_spec(void) { return tc_uniform_spec(64); }

void on_trial(void *user, const bf_trial_record *rec)
{
    records *rs = user;
    if (rec->trial >= 0 && rec->trial < rs->n) rs->r[rec->trial] = *rec;
    if (rec->trial <= rs->last) rs->in_order = 0;
    rs->last = rec->trial;
    rs->calls++;
    if (!pthread_equal(pthread_self(), rs->caller)) rs->off_thread = 1;
}

void records_init(records *rs, int64_t n)
{
    memset(rs, 0, sizeof *rs);
    rs->r = calloc((size_t)n + 1, sizeof *rs->r);
    rs->n = n;
    rs->last = -1;
    rs->in_order = 1;
    rs->caller = pthread_self();
}

void run(bf_campaign *c, int threads, int64_t si, int64_t sn, records *rs, bf_campaign_result *res)
{
    bf_error err = {0};
    bf_campaign_opts o = {.threads = threads, .shard_index = si, .shard_count = sn,
                          .on_trial = rs ? on_trial : NULL, .user = rs};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("run: %s", err.msg);
}

int64_t outcomes(const bf_outcome_counts *c)
{
    int64_t n = 0;
    for (int o = 0; o < BF_OUTCOME_COUNT; o++) n += c->n[o];
    return n;
}

/* The aggregates, byte for byte (not timings). */
const float *param_data(const bf_model *m, const char *name, int64_t *numel)
{
    int64_t p = bf_model_find_param(m, name);
    assert_true(p >= 0);
    const bf_tensor *t = bf_model_param(m, (size_t)p)->tensor;
    if (numel) *numel = bf_tensor_numel(t);
    return t->data;
}

/* The first n samples of a dataset, as a new safetensors buffer. */
bf_dataset *subset(const bf_dataset *ds, int64_t n)
{
    char header[2048];
    size_t off = 0, data_len = 0;
    int hl = 0;
    hl += snprintf(header + hl, sizeof header - (size_t)hl, "{");
    for (size_t i = 0; i < bf_dataset_num_tensors(ds); i++) {
        const bf_tensor *t = bf_dataset_tensor(ds, i);
        size_t row = bf_tensor_nbytes(t) / (size_t)t->dims[0];
        const char *dt = t->dtype == BF_F32 ? "F32" : t->dtype == BF_I64 ? "I64" : NULL;
        assert_non_null(dt);
        hl += snprintf(header + hl, sizeof header - (size_t)hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld", i ? "," : "",
                       t->name, dt, (long long)n);
        for (int d = 1; d < t->ndim; d++) hl += snprintf(header + hl, sizeof header - (size_t)hl, ",%lld", (long long)t->dims[d]);
        hl += snprintf(header + hl, sizeof header - (size_t)hl, "],\"data_offsets\":[%zu,%zu]}", data_len, data_len + row * (size_t)n);
        data_len += row * (size_t)n;
    }
    hl += snprintf(header + hl, sizeof header - (size_t)hl, "}");
    size_t total = 8 + (size_t)hl + data_len;
    unsigned char *buf = malloc(total);
    uint64_t h = (uint64_t)hl;
    for (int k = 0; k < 8; k++) buf[k] = (unsigned char)(h >> (8 * k));
    memcpy(buf + 8, header, (size_t)hl);
    off = 8 + (size_t)hl;
    for (size_t i = 0; i < bf_dataset_num_tensors(ds); i++) {
        const bf_tensor *t = bf_dataset_tensor(ds, i);
        size_t row = bf_tensor_nbytes(t) / (size_t)t->dims[0];
        memcpy(buf + off, t->data, row * (size_t)n);
        off += row * (size_t)n;
    }
    bf_dataset *out = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, total, "subset", &out, &err) != BF_OK) fail_msg("subset: %s", err.msg);
    free(buf);
    return out;
}

/* Every allocation of create and run may fail: a clean BF_ENOMEM, no leak
 * (ASan checks), and the campaign works once allocations succeed. One
 * worker thread: the countdown allocator is not thread-safe. */
void allocation_failures(void **state)
{
    fx *f = *state;
    double rate = 1e-3;
    bf_campaign_spec s = base_spec();
    s.model_kind = BF_FAULT_BER;
    s.rates = &rate;
    s.n_rates = 1;
    s.repeats = 3;
    s.repr = BF_REPR_INT8;
    s.per_channel = 1;
    /* also prepared: the golden pass made by the differential engine, its
     * evaluator adopted by the run (on one thread, as above) */
    bf_campaign_prep prep = {.differential = 1, .threads = 1};
    tc_alloc_failures(f->mlp, f->mlp_ds, &s, NULL, NULL, 3, 8000);
    tc_alloc_failures(f->mlp, f->mlp_ds, &s, NULL, &prep, 3, 8000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_faults_classified),
        cmocka_unit_test(threads_and_shards_agree),
        cmocka_unit_test(reduced_precision_values),
        cmocka_unit_test(ber_rates_and_counts),
        cmocka_unit_test(binary_metrics),
        cmocka_unit_test(errors_name_the_culprit),
        cmocka_unit_test(stop_rule_is_deterministic),
        cmocka_unit_test(statistics),
        cmocka_unit_test(strata_are_equal),
        cmocka_unit_test(seed_matters),
        cmocka_unit_test(allocation_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
