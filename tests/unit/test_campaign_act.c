/* Campaigns on activations (node outputs) and graph inputs, permanent and
 * transient, checked against references computed without the fault
 * machinery: an input fault must give exactly the outputs of a plain pass
 * over an eval set with that input changed (written here as safetensors); a
 * fault on the logits must change exactly that logit to the faulted value
 * (fp32, bf16, int8 with the profiled scale recomputed here); a transient
 * fault leaves every other sample bit-identical to golden; threads and
 * shards change nothing; patterns and errors; allocation failures. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"
#include "alloc_fail.h"
#include "campaign_check.h"

#define FIX BF_FIXTURES "/conformance/"
#define BATCH 64          /* digits: 360 samples, five full batches and one of 40 */

typedef struct fx {
    bf_model *digits, *dlrm;
    bf_dataset *digits_ds, *dlrm_ds;
} fx;

static int setup(void **state)
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

static int teardown(void **state)
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

static char *all_tensors[] = {"*"};

static bf_campaign_spec base_spec(bf_target target, bf_persistence persistence)
{
    bf_campaign_spec s = {0};
    s.seed = 7;
    s.trials = 24;
    s.target = target;
    s.persistence = persistence;
    s.tensors = all_tensors;
    s.n_tensors = 1;
    s.model_kind = BF_FAULT_BITFLIP;
    s.bits = 1;
    s.repr = BF_REPR_FP32;
    s.sampling = BF_SAMPLE_UNIFORM;
    s.critical_metric = -1;
    s.stop_confidence = 0.95;
    s.batch = BATCH;
    return s;
}

/* Every trial's record and outputs, by trial number. */
typedef struct capture {
    int64_t n, samples, cols;
    bf_trial_record *rec;
    float *out;               /* n x samples x cols */
    int64_t trials, outputs;  /* calls */
    int64_t last_trial;       /* on_trial's trial, which on_outputs must repeat */
    int paired;               /* every on_outputs came right after its on_trial */
} capture;

static void cap_trial(void *user, const bf_trial_record *rec)
{
    capture *c = user;
    if (rec->trial >= 0 && rec->trial < c->n) c->rec[rec->trial] = *rec;
    c->last_trial = rec->trial;
    c->trials++;
}

static void cap_outputs(void *user, int64_t trial, const float *out, int64_t samples, int64_t cols)
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

static void capture_init(capture *c, int64_t n)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->rec = calloc((size_t)n + 1, sizeof *c->rec);
    c->last_trial = -1;
    c->paired = 1;
}

static void capture_free(capture *c)
{
    free(c->rec);
    free(c->out);
}

static const float *trial_out(const capture *c, int64_t t) { return c->out + t * c->samples * c->cols; }

static void run(bf_campaign *c, int threads, int64_t si, int64_t sn, capture *cap, bf_campaign_result *res)
{
    bf_error err = {0};
    bf_campaign_opts o = {.threads = threads, .shard_index = si, .shard_count = sn, .on_trial = cap_trial,
                          .on_outputs = cap_outputs, .user = cap};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_true(cap->paired);
    assert_int_equal(cap->trials, cap->outputs);
}

/* One plain pass (no fault machinery) over `ds`; the outputs, malloc'd. */
static float *plain_pass(const bf_model *m, const bf_dataset *ds, int threads, int64_t *n_out)
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
typedef void (*mod_fn)(float *x, int64_t samples, int64_t row, void *ctx);

static bf_dataset *dataset_with(const bf_dataset *ds, const char *name, mod_fn mod, void *ctx)
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

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static uint16_t my_bf16(float x)   /* round to nearest even, from the definition */
{
    uint32_t u = bits_of(x), hi = u >> 16, lo = u & 0xffff;
    if (lo > 0x8000u || (lo == 0x8000u && (hi & 1))) hi++;
    return (uint16_t)hi;
}

static float my_bf16_decode(uint16_t h) { return float_of((uint32_t)h << 16); }

/* The stored int8 q of x at `scale`, as the format defines it. */
static int8_t my_q(float x, float scale)
{
    double q = tc_round_half_even((double)(x / scale));
    if (q > 127) q = 127;
    if (q < -127) q = -127;
    return (int8_t)q;
}

/* What a fault does to one element, per representation, written here. */
typedef struct elem_fault {
    int64_t sample;           /* -1: every sample */
    int64_t index;
    uint32_t mask;
    bf_repr repr;
    float scale;
} elem_fault;

static float my_corrupt(const elem_fault *e, float x)
{
    switch (e->repr) {
    case BF_REPR_FP32: return float_of(bits_of(x) ^ e->mask);
    case BF_REPR_BF16: return my_bf16_decode((uint16_t)(my_bf16(x) ^ e->mask));
    case BF_REPR_INT8: return (float)(int8_t)(uint8_t)((uint8_t)my_q(x, e->scale) ^ e->mask) * e->scale;
    default: fail_msg("representation not covered here");
    }
    return 0;
}

static void mod_elem(float *x, int64_t samples, int64_t row, void *ctx)
{
    const elem_fault *e = ctx;
    for (int64_t s = 0; s < samples; s++)
        if (e->sample < 0 || e->sample == s) x[s * row + e->index] = my_corrupt(e, x[s * row + e->index]);
}

static float max_abs(const float *x, int64_t n)
{
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

/* --- (1) input faults = a plain pass over a changed eval set */

static void input_faults_match_changed_dataset(void **state)
{
    fx *f = *state;
    const bf_tensor *in = bf_dataset_find(f->digits_ds, "input");
    const float *x = in->data;
    const int64_t row = 64, n = 360;
    /* samples in the first, middle and last (partial) batches */
    bf_fault_entry list[] = {
        {.tensor = "input", .index = 10, .bit = 30, .sample = 0},
        {.tensor = "input", .index = 27, .bit = 31, .sample = 63},
        {.tensor = "input", .index = 36, .bit = 23, .sample = 64},
        {.tensor = "input", .index = 0, .bit = 22, .sample = 200},
        {.tensor = "input", .index = 63, .bit = 29, .sample = 359},
        {.tensor = "input", .index = 44, .bit = 0, .sample = 330},
    };
    const size_t N = sizeof list / sizeof list[0];
    bf_campaign_spec s = base_spec(BF_TARGET_INPUTS, BF_PERSIST_TRANSIENT);
    s.sampling = BF_SAMPLE_LIST;
    s.list = list;
    s.n_list = N;
    bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 1);
    assert_string_equal(bf_campaign_site(c, 0)->name, "input");
    assert_string_equal(bf_campaign_site(c, 0)->op, "Conv");
    assert_int_equal(bf_campaign_site(c, 0)->elements, row);
    assert_true(bf_campaign_population(c) == 64.0 * 32 * 360);
    capture cap;
    capture_init(&cap, (int64_t)N);
    bf_campaign_result res;
    run(c, 2, 0, 1, &cap, &res);
    int64_t no;
    float *golden = plain_pass(f->digits, f->digits_ds, 1, &no);
    int changed_any = 0;
    for (size_t i = 0; i < N; i++) {
        elem_fault e = {.sample = list[i].sample, .index = list[i].index, .mask = 1u << list[i].bit, .repr = BF_REPR_FP32};
        bf_dataset *mod = dataset_with(f->digits_ds, "input", mod_elem, &e);
        float *want = plain_pass(f->digits, mod, 1, &no);
        assert_memory_equal(trial_out(&cap, (int64_t)i), want, (size_t)no * sizeof(float));
        const bf_trial_record *r = &cap.rec[i];
        assert_int_equal(r->n_kept, 1);
        assert_int_equal(r->faults[0].sample, list[i].sample);
        assert_int_equal(r->faults[0].index, list[i].index);
        float old = x[list[i].sample * row + list[i].index], now = my_corrupt(&e, old);
        assert_memory_equal(&r->faults[0].old_value, &old, 4);
        assert_memory_equal(&r->faults[0].new_value, &now, 4);
        int same = memcmp(want, golden, (size_t)no * sizeof(float)) == 0;
        assert_int_equal(r->outcome == BF_OUTCOME_MASKED, same);
        changed_any |= !same;
        free(want);
        bf_dataset_free(mod);
    }
    assert_true(changed_any);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    capture_free(&cap);

    /* permanent: the same element of every sample; fp32 and bf16, and int8
     * with scale max |input| / 127 over the eval set */
    struct { bf_repr repr; int64_t index; int bit; } perm[] = {
        {BF_REPR_FP32, 27, 30}, {BF_REPR_FP32, 5, 31}, {BF_REPR_BF16, 27, 14}, {BF_REPR_BF16, 40, 3},
        {BF_REPR_INT8, 27, 6}, {BF_REPR_INT8, 19, 7},
    };
    float in_scale = max_abs(x, n * row) / 127.0f;
    for (size_t k = 0; k < sizeof perm / sizeof perm[0]; k++) {
        bf_fault_entry e1 = {.tensor = "input", .index = perm[k].index, .bit = perm[k].bit, .sample = -1};
        s = base_spec(BF_TARGET_INPUTS, BF_PERSIST_PERMANENT);
        s.sampling = BF_SAMPLE_LIST;
        s.list = &e1;
        s.n_list = 1;
        s.repr = perm[k].repr;
        c = tc_make(f->digits, f->digits_ds, &s);
        assert_int_equal(bf_campaign_site(c, 0)->bits, bf_repr_bits(perm[k].repr));
        capture_init(&cap, 1);
        run(c, 1, 0, 1, &cap, &res);
        elem_fault e = {.sample = -1, .index = perm[k].index, .mask = 1u << perm[k].bit, .repr = perm[k].repr,
                        .scale = in_scale};
        bf_dataset *mod = dataset_with(f->digits_ds, "input", mod_elem, &e);
        float *want = plain_pass(f->digits, mod, 2, &no);
        assert_memory_equal(trial_out(&cap, 0), want, (size_t)no * sizeof(float));
        assert_int_equal(cap.rec[0].faults[0].sample, -1);
        /* the record shows sample 0's element, as stored and as faulted */
        float now = my_corrupt(&e, x[perm[k].index]);
        assert_memory_equal(&cap.rec[0].faults[0].new_value, &now, 4);
        assert_int_equal(cap.rec[0].outcome == BF_OUTCOME_MASKED, memcmp(want, golden, (size_t)no * sizeof(float)) == 0);
        free(want);
        bf_dataset_free(mod);
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
        capture_free(&cap);
    }
    free(golden);
}

/* --- (2) a fault on the logits changes exactly that logit to the faulted value */

static void logit_faults_change_one_value(void **state)
{
    fx *f = *state;
    const int64_t cols = 10, n = 360;
    int64_t no;
    float *golden = plain_pass(f->digits, f->digits_ds, 1, &no);
    assert_int_equal(no, n * cols);
    float scale = max_abs(golden, no) / 127.0f;
    struct { bf_repr repr; bf_persistence p; int64_t index, sample; int bit; } cases[] = {
        {BF_REPR_FP32, BF_PERSIST_TRANSIENT, 3, 5, 30},   {BF_REPR_FP32, BF_PERSIST_TRANSIENT, 9, 359, 31},
        {BF_REPR_FP32, BF_PERSIST_TRANSIENT, 0, 100, 2},  {BF_REPR_BF16, BF_PERSIST_TRANSIENT, 7, 64, 13},
        {BF_REPR_INT8, BF_PERSIST_TRANSIENT, 4, 300, 5},  {BF_REPR_FP32, BF_PERSIST_PERMANENT, 6, -1, 27},
        {BF_REPR_BF16, BF_PERSIST_PERMANENT, 2, -1, 15},  {BF_REPR_INT8, BF_PERSIST_PERMANENT, 1, -1, 7},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        bf_fault_entry e1 = {.tensor = "logits", .index = cases[k].index, .bit = cases[k].bit, .sample = cases[k].sample};
        bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, cases[k].p);
        s.sampling = BF_SAMPLE_LIST;
        s.list = &e1;
        s.n_list = 1;
        s.repr = cases[k].repr;
        bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
        capture cap;
        capture_init(&cap, 1);
        bf_campaign_result res;
        run(c, 2, 0, 1, &cap, &res);
        elem_fault e = {.sample = cases[k].sample, .index = cases[k].index, .mask = 1u << cases[k].bit,
                        .repr = cases[k].repr, .scale = scale};
        const float *out = trial_out(&cap, 0);
        for (int64_t smp = 0; smp < n; smp++)
            for (int64_t j = 0; j < cols; j++) {
                float g = golden[smp * cols + j], want = g;
                if (j == e.index && (e.sample < 0 || e.sample == smp)) want = my_corrupt(&e, g);
                if (bits_of(out[smp * cols + j]) != bits_of(want))
                    fail_msg("case %zu: sample %lld logit %lld is %a, want %a (golden %a)", k, (long long)smp, (long long)j,
                             out[smp * cols + j], want, g);
            }
        const bf_applied_fault *a = &cap.rec[0].faults[0];
        assert_int_equal(a->sample, cases[k].sample);
        float g0 = golden[(cases[k].sample < 0 ? 0 : cases[k].sample) * cols + cases[k].index];
        float now = my_corrupt(&e, g0);
        assert_memory_equal(&a->new_value, &now, 4);
        if (cases[k].repr == BF_REPR_FP32) assert_memory_equal(&a->old_value, &g0, 4);
        if (cases[k].repr == BF_REPR_INT8) assert_true(a->old_value == (float)my_q(g0, scale) * scale);
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
        capture_free(&cap);
    }

    /* a stuck-at that changes no stored bit leaves the value as computed,
     * even in bf16, where the value is not a bf16 number: masked */
    int64_t j = 0;
    while (golden[j] == my_bf16_decode(my_bf16(golden[j])) || golden[j] < 0) j++;
    bf_fault_entry e2 = {.tensor = "logits", .index = j % cols, .bit = 15, .sample = j / cols};
    bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT);
    s.sampling = BF_SAMPLE_LIST;
    s.list = &e2;
    s.n_list = 1;
    s.repr = BF_REPR_BF16;
    s.model_kind = BF_FAULT_STUCK_AT_0;
    bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
    capture cap;
    capture_init(&cap, 1);
    bf_campaign_result res;
    run(c, 1, 0, 1, &cap, &res);
    assert_int_equal(cap.rec[0].outcome, BF_OUTCOME_MASKED);
    assert_memory_equal(trial_out(&cap, 0), golden, (size_t)no * sizeof(float));
    assert_true(cap.rec[0].faults[0].old_value == cap.rec[0].faults[0].new_value);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    capture_free(&cap);
    free(golden);
}

/* A fault inside the network: Flatten only reshapes, so element k of the
 * MaxPool output and element k of the Flatten output are the same number,
 * and faulting either gives the same outputs bit for bit. The logits then
 * move by fc.weight[j][k] x (new - old), to rounding. */
static void inner_activation_faults(void **state)
{
    fx *f = *state;
    const int64_t cols = 10, k = 77, smp = 123;
    int64_t no;
    float *golden = plain_pass(f->digits, f->digits_ds, 1, &no);
    float *outs[2];
    float old = 0, now = 0;
    const char *names[] = {"/MaxPool_output_0", "/Flatten_output_0"};
    for (int i = 0; i < 2; i++) {
        bf_fault_entry e = {.tensor = (char *)names[i], .index = k, .bit = 30, .sample = smp};
        bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT);
        s.sampling = BF_SAMPLE_LIST;
        s.list = &e;
        s.n_list = 1;
        bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
        assert_int_equal(bf_campaign_site(c, (size_t)4 + (size_t)i)->elements, 256);
        assert_string_equal(bf_campaign_site(c, (size_t)4 + (size_t)i)->name, names[i]);
        capture cap;
        capture_init(&cap, 1);
        bf_campaign_result res;
        run(c, 1, 0, 1, &cap, &res);
        outs[i] = malloc((size_t)no * sizeof(float));
        memcpy(outs[i], trial_out(&cap, 0), (size_t)no * sizeof(float));
        if (i == 1) {
            assert_memory_equal(&old, &cap.rec[0].faults[0].old_value, 4);
            assert_memory_equal(&now, &cap.rec[0].faults[0].new_value, 4);
        }
        old = cap.rec[0].faults[0].old_value;
        now = cap.rec[0].faults[0].new_value;
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
        capture_free(&cap);
    }
    assert_memory_equal(outs[0], outs[1], (size_t)no * sizeof(float));
    assert_true(now == float_of(bits_of(old) ^ (1u << 30)));
    const float *w = bf_model_param(f->digits, (size_t)bf_model_find_param(f->digits, "fc.weight"))->tensor->data;
    for (int64_t j = 0; j < cols; j++) {
        double delta = (double)outs[0][smp * cols + j] - golden[smp * cols + j];
        double want = (double)w[j * 256 + k] * ((double)now - old);
        assert_true(fabs(delta - want) <= 1e-4 * (fabs(want) + 1));
    }
    free(outs[0]);
    free(outs[1]);
    free(golden);
}

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

static void transient_hits_one_sample(void **state)
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
static void ber_on_activations(void **state)
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
static void dlrm_inputs(void **state)
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

/* --- (4) patterns and errors */

static void patterns_and_errors(void **state)
{
    fx *f = *state;
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_PERMANENT);

    /* every activation of the digits CNN, in execution order */
    c = tc_make(f->digits, f->digits_ds, &s);
    const char *acts[] = {"/conv1/Conv_output_0", "/Relu_output_0", "/conv2/Conv_output_0", "/Relu_1_output_0",
                          "/MaxPool_output_0", "/Flatten_output_0", "logits"};
    const int64_t elems[] = {512, 512, 1024, 1024, 256, 256, 10};
    assert_int_equal(bf_campaign_num_sites(c), 7);
    double pop = 0;
    for (size_t i = 0; i < 7; i++) {
        assert_string_equal(bf_campaign_site(c, i)->name, acts[i]);
        assert_int_equal(bf_campaign_site(c, i)->elements, elems[i]);
        pop += (double)elems[i] * 32;
    }
    assert_string_equal(bf_campaign_site(c, 6)->op, "Gemm");
    assert_true(bf_campaign_population(c) == pop);
    bf_campaign_free(c);
    s.persistence = BF_PERSIST_TRANSIENT;
    c = tc_make(f->digits, f->digits_ds, &s);
    assert_true(bf_campaign_population(c) == pop * 360);
    bf_campaign_free(c);

    char *relu[] = {"op:Relu"};
    s.tensors = relu;
    c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 2);
    assert_string_equal(bf_campaign_site(c, 0)->name, "/Relu_output_0");
    assert_string_equal(bf_campaign_site(c, 1)->name, "/Relu_1_output_0");
    assert_string_equal(bf_campaign_site(c, 1)->op, "Relu");
    bf_campaign_free(c);
    char *glob[] = {"/conv?/*", "logits"};
    s.tensors = glob;
    s.n_tensors = 2;
    c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 3);
    bf_campaign_free(c);
    s.n_tensors = 1;

    char *nope[] = {"nope"};
    s.tensors = nope;
    c = NULL;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);
    assert_null(c);
    assert_non_null(strstr(err.msg, "'nope'"));
    assert_non_null(strstr(err.msg, "node output"));
    assert_non_null(strstr(err.msg, "/conv1/Conv_output_0"));
    assert_non_null(strstr(err.msg, "and 1 more"));
    char *lstm[] = {"op:LSTM"};
    s.tensors = lstm;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "LSTM"));
    assert_non_null(strstr(err.msg, "Relu"));
    /* a weight is not an activation */
    char *w[] = {"fc.weight"};
    s.tensors = w;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);

    /* DLRM: the sparse ids are int64, as are the node outputs slicing them */
    char *sparse[] = {"sparse"};
    s.target = BF_TARGET_INPUTS;
    s.tensors = sparse;
    assert_int_equal(bf_campaign_create(f->dlrm, f->dlrm_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'sparse'"));
    assert_non_null(strstr(err.msg, "int64"));
    assert_non_null(strstr(err.msg, "not fault sites"));
    assert_non_null(strstr(err.msg, "dense"));
    char *gather[] = {"/Gather_output_0"};
    s.target = BF_TARGET_ACTIVATIONS;
    s.tensors = gather;
    assert_int_equal(bf_campaign_create(f->dlrm, f->dlrm_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "/Gather_output_0"));
    assert_non_null(strstr(err.msg, "int64"));
    /* '*' over DLRM's activations skips the integer ones */
    s.tensors = all_tensors;
    c = tc_make(f->dlrm, f->dlrm_ds, &s);
    for (size_t i = 0; i < bf_campaign_num_sites(c); i++) assert_null(strstr(bf_campaign_site(c, i)->name, "Slice"));
    bf_campaign_free(c);
    c = NULL;

    /* spec rules */
    s = base_spec(BF_TARGET_WEIGHTS, BF_PERSIST_TRANSIENT);
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "transient"));
    s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_PERMANENT);
    s.repr = BF_REPR_INT8;
    s.per_channel = 1;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "per_channel"));

    /* list entries */
    bf_fault_entry e = {.tensor = "logits", .index = 3, .bit = 1, .sample = -1};
    s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT);
    s.sampling = BF_SAMPLE_LIST;
    s.list = &e;
    s.n_list = 1;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'sample' required for 'transient' faults"));
    e.sample = 360;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "360"));
    e.sample = 3;
    e.index = 10;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ERANGE);
    assert_string_equal(err.msg, "list entry 0: tensor 'logits' has 10 elements per sample, index 10 is out of range");
    e.index = 0;
    s.persistence = BF_PERSIST_PERMANENT;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'sample' applies only to 'transient' faults"));
    e.sample = -1;
    e.tensor = "logit";
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "'logit'"));
    assert_non_null(strstr(err.msg, "node output"));
    assert_null(c);
}

/* --- (5) the evaluator's value faults directly */

static void evaluator_value_faults(void **state)
{
    fx *f = *state;
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_eval_opts eo = {.batch = BATCH, .threads = 3};
    assert_int_equal(bf_evaluator_create(f->digits, f->digits_ds, &eo, &ev, &err), BF_OK);
    bf_eval_result r;
    assert_int_equal(bf_evaluator_run(ev, NULL, 0, &r, &err), BF_OK);
    float *golden = malloc((size_t)(r.samples * r.out_cols) * sizeof(float));
    memcpy(golden, r.outputs, (size_t)(r.samples * r.out_cols) * sizeof(float));
    int64_t logits = bf_model_find_value(f->digits, "logits");
    assert_true(logits >= 0);
    assert_int_equal(bf_model_find_value(f->digits, "nope"), -1);

    /* two faults on two samples of the last batch, one on the first */
    bf_value_fault vf[] = {
        {.value = logits, .sample = 350, .index = 2, .model = BF_FAULT_STUCK_AT_1, .mask = 1u << 30, .repr = BF_REPR_FP32},
        {.value = logits, .sample = 359, .index = 9, .model = BF_FAULT_RANDOM_VALUE, .mask = 0x3f800000u, .repr = BF_REPR_FP32},
        {.value = logits, .sample = 1, .index = 0, .model = BF_FAULT_BITFLIP, .mask = 1u << 31, .repr = BF_REPR_FP32},
    };
    assert_int_equal(bf_evaluator_set_value_faults(ev, vf, 3, &err), BF_OK);
    for (int pass = 0; pass < 2; pass++) {   /* they stay set */
        assert_int_equal(bf_evaluator_run(ev, NULL, 0, &r, &err), BF_OK);
        for (int64_t i = 0; i < r.samples * 10; i++) {
            float want = golden[i];
            if (i == 350 * 10 + 2) want = float_of(bits_of(want) | 1u << 30);
            if (i == 359 * 10 + 9) want = 1.0f;
            if (i == 1 * 10 + 0) want = -want;
            assert_int_equal(bits_of(r.outputs[i]), bits_of(want));
        }
        float o, n;
        bf_evaluator_value_fault_seen(ev, 1, &o, &n);
        assert_true(o == golden[359 * 10 + 9] && n == 1.0f);
    }
    /* one batch computed, the rest from a base: only the faults of sample
     * 350's batch (the last, partial one) apply */
    float *base = malloc((size_t)(r.samples * 10) * sizeof(float));
    for (int64_t i = 0; i < r.samples * 10; i++) base[i] = (float)i;
    assert_int_equal(bf_evaluator_run_sample(ev, 350, base, &r, &err), BF_OK);
    for (int64_t i = 0; i < r.samples * 10; i++) {
        float want = i < 320 * 10 ? base[i] : golden[i];
        if (i == 350 * 10 + 2) want = float_of(bits_of(want) | 1u << 30);
        if (i == 359 * 10 + 9) want = 1.0f;
        assert_int_equal(bits_of(r.outputs[i]), bits_of(want));
    }
    assert_true(r.accuracy < 0.5);   /* metrics over the outputs as given */
    float o, n;
    bf_evaluator_value_fault_seen(ev, 2, &o, &n);
    assert_true(isnan(o) && isnan(n));   /* sample 1's batch did not run */
    assert_int_equal(bf_evaluator_run_sample(ev, 360, base, &r, &err), BF_ERANGE);
    free(base);

    assert_int_equal(bf_evaluator_set_value_faults(ev, NULL, 0, &err), BF_OK);
    assert_int_equal(bf_evaluator_run(ev, NULL, 0, &r, &err), BF_OK);
    assert_memory_equal(r.outputs, golden, (size_t)(r.samples * 10) * sizeof(float));
    assert_int_equal(bf_evaluator_run_sample(ev, 5, golden, &r, &err), BF_OK);
    assert_memory_equal(r.outputs, golden, (size_t)(r.samples * 10) * sizeof(float));

    /* what is not a run-time float value per sample */
    bf_value_fault bad = {.value = bf_model_find_value(f->digits, "fc.weight"), .sample = -1, .repr = BF_REPR_FP32};
    assert_int_equal(bf_evaluator_set_value_faults(ev, &bad, 1, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "initializer"));
    bad.value = logits;
    bad.index = 10;
    assert_int_equal(bf_evaluator_set_value_faults(ev, &bad, 1, &err), BF_ERANGE);
    bad.index = 0;
    bad.sample = 360;
    assert_int_equal(bf_evaluator_set_value_faults(ev, &bad, 1, &err), BF_ERANGE);
    bad.sample = 0;
    bad.repr = BF_REPR_INT8;
    assert_int_equal(bf_evaluator_set_value_faults(ev, &bad, 1, &err), BF_EINVAL);
    bad.value = 1 << 30;
    assert_int_equal(bf_evaluator_set_value_faults(ev, &bad, 1, &err), BF_ERANGE);
    /* a failed set leaves none */
    assert_int_equal(bf_evaluator_run(ev, NULL, 0, &r, &err), BF_OK);
    assert_memory_equal(r.outputs, golden, (size_t)(r.samples * 10) * sizeof(float));
    bf_evaluator_free(ev);

    /* DLRM: int64 input and int64 activations are refused by name */
    eo.batch = 0;
    assert_int_equal(bf_evaluator_create(f->dlrm, f->dlrm_ds, &eo, &ev, &err), BF_OK);
    bad = (bf_value_fault){.value = bf_model_find_value(f->dlrm, "sparse"), .sample = -1, .repr = BF_REPR_FP32};
    assert_int_equal(bf_evaluator_set_value_faults(ev, &bad, 1, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "graph input 'sparse' is int64"));
    bf_evaluator_free(ev);
    free(golden);
}

/* on_outputs for weight faults: the outputs of a pass with that bit flipped. */
static void weight_outputs(void **state)
{
    fx *f = *state;
    bf_fault_entry e = {.tensor = "fc.bias", .index = 4, .bit = 30, .sample = -1};
    bf_campaign_spec s = base_spec(BF_TARGET_WEIGHTS, BF_PERSIST_PERMANENT);
    s.sampling = BF_SAMPLE_LIST;
    s.list = &e;
    s.n_list = 1;
    bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
    capture cap;
    capture_init(&cap, 1);
    bf_campaign_result res;
    run(c, 2, 0, 1, &cap, &res);
    assert_int_equal(cap.rec[0].faults[0].sample, -1);
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_eval_opts eo = {.batch = BATCH};
    assert_int_equal(bf_evaluator_create(f->digits, f->digits_ds, &eo, &ev, &err), BF_OK);
    bf_bitflip flip = {.param = (size_t)bf_model_find_param(f->digits, "fc.bias"), .index = 4, .bit = 30};
    bf_eval_result r;
    assert_int_equal(bf_evaluator_run(ev, &flip, 1, &r, &err), BF_OK);
    assert_memory_equal(trial_out(&cap, 0), r.outputs, (size_t)(r.samples * r.out_cols) * sizeof(float));
    bf_evaluator_free(ev);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    capture_free(&cap);
}

/* Every allocation of create and run may fail: a clean BF_ENOMEM and no
 * leak. One worker thread: the countdown allocator is not thread-safe.
 * Every 8th under TSan (TC_ALLOC_STEP), one per call path under ASan
 * (TC_ALLOC_PATHS; campaign_check.h says why). */
static void allocation_failures(void **state)
{
    fx *f = *state;
    double rate = 1e-3;
    bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT);
    s.model_kind = BF_FAULT_BER;
    s.rates = &rate;
    s.n_rates = 1;
    s.repeats = 2;
    s.repr = BF_REPR_INT8;
    s.batch = 0;
    int succeeded = 0;
    size_t live = bf_test_alloc_live();
#if TC_ALLOC_PATHS
    bf_test_alloc_paths_forget();
#endif
    for (long n = 0; n < 5000 && !succeeded;) {
        bf_campaign *c = NULL;
        bf_campaign_result res;
        bf_error err = {0};
        capture cap;
        capture_init(&cap, 2);
        bf_campaign_opts o = {.threads = 1, .on_trial = cap_trial, .on_outputs = cap_outputs, .user = &cap};
#if TC_ALLOC_PATHS
        bf_test_alloc_fail_new_path_from(n);
#else
        bf_test_alloc_fail_after(n);
#endif
        bf_status st = bf_campaign_create(f->dlrm, f->dlrm_ds, &s, &c, &err);
        if (st == BF_OK) st = bf_campaign_run(c, &o, &res, &err);
        long at = bf_test_alloc_failed_at();
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) {
            succeeded = 1;
            assert_int_equal(res.trials_done, 2);
            bf_campaign_result_free(&res);
        } else if (st != BF_ENOMEM) {
            fail_msg("allocation %ld failing gave status %d: %s", at, st, err.msg);
        }
        capture_free(&cap);
        bf_campaign_free(c);
        if (bf_test_alloc_live() != live)
            fail_msg("allocation %ld failing left %zu bytes held", at, bf_test_alloc_live() - live);
        n = TC_ALLOC_PATHS ? at + 1 : n + TC_ALLOC_STEP;   /* every 8th under TSan */
    }
    assert_true(succeeded);
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
