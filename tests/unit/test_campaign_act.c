/* Campaigns on activations (node outputs) and graph inputs, permanent and
 * transient, checked against references computed without the fault
 * machinery: an input fault must give exactly the outputs of a plain pass
 * over an eval set with that input changed (written here as safetensors); a
 * fault on the logits must change exactly that logit to the faulted value
 * (fp32, bf16, int8 with the profiled scale recomputed here); a transient
 * fault leaves every other sample bit-identical to golden; threads and
 * shards change nothing; patterns and errors; allocation failures. */
#include "test_campaign_act/test_campaign_act.h"
#include "campaign_check.h"

int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    bf_error err = {0};
    if (!f || tc_try_open(FIX "demo_digits", &f->digits, &f->digits_ds, &err) ||
        tc_try_open(FIX "dlrm_ops_op13", &f->dlrm, &f->dlrm_ds, &err)) {
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
    bf_dataset_free(f->digits_ds);
    bf_dataset_free(f->dlrm_ds);
    free(f);
    return 0;
}

/* --- helpers */

char *all_tensors[] = {"*"};

bf_campaign_spec base_spec(bf_target target, bf_persistence persistence)
{
    bf_campaign_spec s = tc_uniform_spec(BATCH);
    s.seed = 7;
    s.trials = 24;
    s.target = target;
    s.persistence = persistence;
    s.tensors = all_tensors;
    return s;
}

void cap_trial(void *user, const bf_trial_record *rec)
{
    capture *c = user;
    if (rec->trial >= 0 && rec->trial < c->n) c->rec[rec->trial] = *rec;
    c->last_trial = rec->trial;
    c->trials++;
}

void cap_outputs(void *user, int64_t trial, const float *out, int64_t samples, int64_t cols)
{
    capture *c = user;
    if (trial != c->last_trial || c->outputs + 1 != c->trials) c->paired = 0;
    c->outputs++;
    if (!c->out) {
        c->samples = samples;
        c->cols = cols;
        c->out = calloc((size_t)(c->n * samples * cols) + 1, sizeof(float));
    }
    if (trial >= 0 && trial < c->n && samples == c->samples && cols == c->cols)
        memcpy(c->out + trial * samples * cols, out, (size_t)(samples * cols) * sizeof(float));
}

void capture_init(capture *c, int64_t n)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->rec = calloc((size_t)n + 1, sizeof *c->rec);
    c->last_trial = -1;
    c->paired = 1;
}

void capture_free(capture *c)
{
    free(c->rec);
    free(c->out);
}

const float *trial_out(const capture *c, int64_t t) { return c->out + t * c->samples * c->cols; }

void run(bf_campaign *c, int threads, int64_t si, int64_t sn, capture *cap, bf_campaign_result *res)
{
    bf_error err = {0};
    bf_campaign_opts o = {.threads = threads, .shard_index = si, .shard_count = sn, .on_trial = cap_trial,
                          .on_outputs = cap_outputs, .user = cap};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_true(cap->paired);
    assert_int_equal(cap->trials, cap->outputs);
}

/* One plain pass (no fault machinery) over `ds`; the outputs, malloc'd. */
float *plain_pass(const bf_model *m, const bf_dataset *ds, int threads, int64_t *n_out)
{
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_eval_opts eo = {.batch = BATCH, .threads = threads};
    if (bf_evaluator_create(m, ds, &eo, &ev, &err) != BF_OK) fail_msg("evaluator: %s", err.msg);
    bf_eval_result r;
    if (bf_evaluator_run(ev, NULL, 0, &r, &err) != BF_OK) fail_msg("run: %s", err.msg);
    *n_out = r.samples * r.out_cols;
    float *o = malloc((size_t)*n_out * sizeof *o);
    memcpy(o, r.outputs, (size_t)*n_out * sizeof *o);
    bf_evaluator_free(ev);
    return o;
}

/* The dataset again, as a new safetensors buffer, with float tensor `name`
 * changed by `mod` (over all of it: samples x row floats). */
bf_dataset *dataset_with(const bf_dataset *ds, const char *name, mod_fn mod, void *ctx)
{
    char header[4096];
    size_t data_len = 0;
    int hl = snprintf(header, sizeof header, "{");
    for (size_t i = 0; i < bf_dataset_num_tensors(ds); i++) {
        const bf_tensor *t = bf_dataset_tensor(ds, i);
        const char *dt = t->dtype == BF_F32 ? "F32" : t->dtype == BF_I64 ? "I64" : NULL;
        assert_non_null(dt);
        hl += snprintf(header + hl, sizeof header - (size_t)hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
                       t->name, dt);
        for (int d = 0; d < t->ndim; d++)
            hl += snprintf(header + hl, sizeof header - (size_t)hl, "%s%lld", d ? "," : "", (long long)t->dims[d]);
        hl += snprintf(header + hl, sizeof header - (size_t)hl, "],\"data_offsets\":[%zu,%zu]}", data_len,
                       data_len + bf_tensor_nbytes(t));
        data_len += bf_tensor_nbytes(t);
    }
    hl += snprintf(header + hl, sizeof header - (size_t)hl, "}");
    size_t total = 8 + (size_t)hl + data_len, off = 8 + (size_t)hl;
    unsigned char *buf = malloc(total);
    for (int k = 0; k < 8; k++) buf[k] = (unsigned char)((uint64_t)hl >> (8 * k));
    memcpy(buf + 8, header, (size_t)hl);
    for (size_t i = 0; i < bf_dataset_num_tensors(ds); i++) {
        const bf_tensor *t = bf_dataset_tensor(ds, i);
        memcpy(buf + off, t->data, bf_tensor_nbytes(t));
        if (strcmp(t->name, name) == 0) {
            assert_int_equal(t->dtype, BF_F32);
            float *x = malloc(bf_tensor_nbytes(t) + 1);
            memcpy(x, t->data, bf_tensor_nbytes(t));
            mod(x, t->dims[0], bf_tensor_numel(t) / t->dims[0], ctx);
            memcpy(buf + off, x, bf_tensor_nbytes(t));
            free(x);
        }
        off += bf_tensor_nbytes(t);
    }
    bf_dataset *out = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, total, "modified", &out, &err) != BF_OK) fail_msg("dataset: %s", err.msg);
    free(buf);
    return out;
}

uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* The stored int8 q of x at `scale`, as the format defines it. */
int8_t my_q(float x, float scale)
{
    double q = tc_round_half_even((double)(x / scale));
    if (q > 127) q = 127;
    if (q < -127) q = -127;
    return (int8_t)q;
}

float my_corrupt(const elem_fault *e, float x)
{
    switch (e->repr) {
    case BF_REPR_FP32: return float_of(bits_of(x) ^ e->mask);
    case BF_REPR_BF16: return tc_bf16_decode((uint16_t)(tc_bf16(x) ^ e->mask));
    case BF_REPR_INT8: return (float)(int8_t)(uint8_t)((uint8_t)my_q(x, e->scale) ^ e->mask) * e->scale;
    default: fail_msg("representation not covered here");
    }
    return 0;
}

void mod_elem(float *x, int64_t samples, int64_t row, void *ctx)
{
    const elem_fault *e = ctx;
    for (int64_t s = 0; s < samples; s++)
        if (e->sample < 0 || e->sample == s) x[s * row + e->index] = my_corrupt(e, x[s * row + e->index]);
}

float max_abs(const float *x, int64_t n)
{
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(input_faults_match_changed_dataset),
        cmocka_unit_test(logit_faults_change_one_value),
        cmocka_unit_test(inner_activation_faults),
        cmocka_unit_test(transient_hits_one_sample),
        cmocka_unit_test(ber_on_activations),
        cmocka_unit_test(dlrm_inputs),
        cmocka_unit_test(patterns_and_errors),
        cmocka_unit_test(evaluator_value_faults),
        cmocka_unit_test(weight_outputs),
        cmocka_unit_test(allocation_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
