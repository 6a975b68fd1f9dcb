/* Campaigns that generate (bf_campaign_spec.gen_new_tokens, docs/LM.md):
 * every trial decodes M tokens greedily from each eval-set prompt with its
 * faults and records generation_match, first_divergence and edit_distance.
 *
 * Checked against PyTorch: tests/fixtures/gen/reference.json holds PyTorch's
 * own greedy decodings of two small decoders (make_gen.py), golden and under
 * weight faults and a step-0 attention-probability fault; a listed-fault
 * campaign on the same faults must record the metrics of those token lists
 * (bf_gen_compare of PyTorch's golden and faulty tokens, the function
 * test_generate checks by hand). Checked against `bitflip generate`'s
 * engine: a sampled campaign's every trial against bf_generator_run with the
 * trial's faults as --flip gives them. And the refusals: no language model,
 * M out of range, target inputs, mitigations, every allocation failing. */
#include <jansson.h>
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
#include "campaign_check.h"

#define DIR BF_FIXTURES "/gen/"
#define MAX_TRIALS 64

typedef struct fx {
    bf_model *gpt, *llama;
    bf_dataset *ds;           /* the prompts with next-token labels: a language_model eval set */
    json_t *ref;
    int64_t n, p, m;
    uint8_t *buf;
} fx;

/* prompts.safetensors' input_ids, and labels = the next token (-100 at the end) */
static uint8_t *eval_set(const bf_tensor *ids, size_t *len)
{
    int64_t n = ids->dims[0], p = ids->dims[1];
    const int64_t *x = ids->data;
    int64_t *lab = malloc((size_t)(n * p) * sizeof *lab);
    assert_non_null(lab);
    for (int64_t i = 0; i < n; i++)
        for (int64_t t = 0; t < p; t++) lab[i * p + t] = t + 1 < p ? x[i * p + t + 1] : -100;
    char header[512];
    size_t bytes = (size_t)(n * p) * sizeof(int64_t);
    int h = snprintf(header, sizeof header,
                     "{\"input_ids\":{\"dtype\":\"I64\",\"shape\":[%lld,%lld],\"data_offsets\":[0,%zu]},"
                     "\"labels\":{\"dtype\":\"I64\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}}",
                     (long long)n, (long long)p, bytes, (long long)n, (long long)p, bytes, 2 * bytes);
    while (h % 8) header[h++] = ' ';
    uint8_t *buf = malloc(8 + (size_t)h + 2 * bytes);
    assert_non_null(buf);
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)((uint64_t)h >> (8 * b));
    memcpy(buf + 8, header, (size_t)h);
    memcpy(buf + 8 + h, x, bytes);
    memcpy(buf + 8 + h + bytes, lab, bytes);
    free(lab);
    *len = 8 + (size_t)h + 2 * bytes;
    return buf;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    bf_error err = {0};
    json_error_t je;
    bf_dataset *prompts = NULL;
    if (!f || !(f->ref = json_load_file(DIR "reference.json", 0, &je))) return -1;
    if (bf_model_load_file(DIR "gpt.onnx", &f->gpt, &err) || bf_model_load_file(DIR "llama.onnx", &f->llama, &err) ||
        bf_dataset_load_file(DIR "prompts.safetensors", &prompts, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    size_t len;
    f->buf = eval_set(bf_dataset_find(prompts, "input_ids"), &len);
    bf_dataset_free(prompts);
    if (bf_dataset_load_buffer(f->buf, len, "prompts+labels", &f->ds, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    /* the sequence axis at the eval set's length, as bitflip run does */
    if (bf_model_bind_dims(&f->gpt, f->ds, &err) || bf_model_bind_dims(&f->llama, f->ds, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    f->n = bf_dataset_num_samples(f->ds);
    f->p = json_integer_value(json_object_get(f->ref, "prompt_len"));
    f->m = json_integer_value(json_object_get(f->ref, "new_tokens"));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    bf_model_free(f->gpt);
    bf_model_free(f->llama);
    bf_dataset_free(f->ds);
    free(f->buf);
    json_decref(f->ref);
    free(f);
    return 0;
}

static json_t *family(fx *f, int k) { return json_array_get(json_object_get(f->ref, "models"), (size_t)k); }

/* n x m token ids of a reference case's list */
static int64_t *tokens_of(fx *f, json_t *c)
{
    int64_t *t = malloc((size_t)(f->n * f->m) * sizeof *t);
    assert_non_null(t);
    json_t *rows = json_object_get(c, "tokens");
    for (int64_t r = 0; r < f->n; r++)
        for (int64_t s = 0; s < f->m; s++)
            t[r * f->m + s] = json_integer_value(json_array_get(json_array_get(rows, (size_t)r), (size_t)s));
    return t;
}

static void expect_metrics(const bf_trial_record *rec, const bf_gen_metrics *want, const char *what)
{
    if (rec->metrics[BF_METRIC_GENERATION_MATCH] != want->generation_match ||
        rec->metrics[BF_METRIC_FIRST_DIVERGENCE] != want->first_divergence ||
        rec->metrics[BF_METRIC_EDIT_DISTANCE] != want->edit_distance)
        fail_msg("%s: generation_match %g first_divergence %g edit_distance %g, want %g %g %g", what,
                 rec->metrics[BF_METRIC_GENERATION_MATCH], rec->metrics[BF_METRIC_FIRST_DIVERGENCE],
                 rec->metrics[BF_METRIC_EDIT_DISTANCE], want->generation_match, want->first_divergence, want->edit_distance);
    /* a changed generation is a changed arg-max: critical (or DUE, when the
     * eval pass met a NaN or Inf) */
    if (want->generation_match < 1) assert_true(rec->outcome == BF_OUTCOME_CRITICAL || rec->outcome == BF_OUTCOME_DUE);
}

static void run_recs(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int exact, int threads,
                     tc_recs *out, bf_campaign_result *res)
{
    bf_campaign *c = tc_make(m, ds, s);
    out->n = 0;
    bf_campaign_opts o = {.threads = threads, .exact = exact, .on_trial = tc_keep, .user = out};
    bf_error err = {0};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_campaign_free(c);
}

/* The reference's weight cases of family k as a list campaign; each trial's
 * metrics are PyTorch's tokens' (exact and differential, 1 and 2 threads). */
static void weights_match_torch_in(fx *f, int k)
{
    json_t *fam = family(f, k), *cases = json_object_get(fam, "cases"), *c;
    const bf_model *m = k ? f->llama : f->gpt;
    bf_fault_entry list[16];
    bf_gen_metrics want[16];
    size_t i, n = 0;
    int64_t *golden = tokens_of(f, json_array_get(cases, 0));
    json_array_foreach(cases, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "kind")), "weight") != 0) continue;
        list[n] = (bf_fault_entry){.tensor = (char *)json_string_value(json_object_get(c, "param")),
                                   .index = json_integer_value(json_object_get(c, "index")),
                                   .bit = (int)json_integer_value(json_object_get(c, "bit")), .sample = -1};
        int64_t *t = tokens_of(f, c);
        bf_error err = {0};
        assert_int_equal(bf_gen_compare(golden, t, f->n, f->m, NULL, &want[n], &err), BF_OK);
        free(t);
        n++;
    }
    assert_true(n >= 4);
    bf_campaign_spec s = tc_base_spec(0);
    s.sampling = BF_SAMPLE_LIST;
    s.list = list;
    s.n_list = n;
    s.gen_new_tokens = f->m;
    int changed = 0;
    for (int run = 0; run < 3; run++) {
        bf_trial_record recs[MAX_TRIALS];
        tc_recs kept = {recs, 0};
        bf_campaign_result r;
        run_recs(m, f->ds, &s, run != 1, run == 2 ? 2 : 1, &kept, &r);
        assert_int_equal(kept.n, (int64_t)n);
        for (size_t j = 0; j < n; j++) {
            char what[200];
            snprintf(what, sizeof what, "%s %s[%lld] bit %d (run %d)", json_string_value(json_object_get(fam, "name")),
                     list[j].tensor, (long long)list[j].index, list[j].bit, run);
            expect_metrics(&recs[j], &want[j], what);
            changed += want[j].generation_match < 1;
        }
        /* golden: the decoding against itself */
        assert_true(r.golden[BF_METRIC_GENERATION_MATCH] == 1 && r.golden[BF_METRIC_FIRST_DIVERGENCE] == (double)f->m &&
                    r.golden[BF_METRIC_EDIT_DISTANCE] == 0);
        assert_int_equal(r.metric[BF_METRIC_EDIT_DISTANCE].n, (int64_t)n);
        bf_campaign_result_free(&r);
    }
    assert_true(changed > 0);
    free(golden);
}

static void weights_match_torch(void **state)
{
    fx *f = *state;
    weights_match_torch_in(f, 0);
    weights_match_torch_in(f, 1);
}

/* The GPT's step-0 attention-probability fault (every prompt), as a
 * permanent activation fault; and on prompt 5 alone, as a transient one:
 * that prompt's tokens PyTorch's faulty ones, the rest golden. */
static void activation_matches_torch(void **state)
{
    fx *f = *state;
    json_t *cases = json_object_get(family(f, 0), "cases"), *c, *probs = NULL;
    size_t i;
    json_array_foreach(cases, i, c)
        if (!strcmp(json_string_value(json_object_get(c, "kind")), "probs") && json_integer_value(json_object_get(c, "step")) == 0)
            probs = c;
    assert_non_null(probs);
    char site[32];
    snprintf(site, sizeof site, "attn_probs.%lld", (long long)json_integer_value(json_object_get(probs, "layer")));
    int64_t *golden = tokens_of(f, json_array_get(cases, 0)), *faulty = tokens_of(f, probs);
    bf_fault_entry e = {.tensor = site, .index = json_integer_value(json_object_get(probs, "index")),
                        .bit = (int)json_integer_value(json_object_get(probs, "bit")), .sample = -1};
    bf_campaign_spec s = tc_base_spec(0);
    s.target = BF_TARGET_ACTIVATIONS;
    s.sampling = BF_SAMPLE_LIST;
    s.list = &e;
    s.n_list = 1;
    s.gen_new_tokens = f->m;
    bf_gen_metrics want;
    bf_error err = {0};
    assert_int_equal(bf_gen_compare(golden, faulty, f->n, f->m, NULL, &want, &err), BF_OK);
    assert_true(want.generation_match < 1);
    for (int exact = 0; exact < 2; exact++) {
        bf_trial_record rec[1];
        tc_recs kept = {rec, 0};
        bf_campaign_result r;
        run_recs(f->gpt, f->ds, &s, exact, 1, &kept, &r);
        expect_metrics(&rec[0], &want, "attn_probs permanent");
        bf_campaign_result_free(&r);
    }
    /* transient, prompt 5 */
    int64_t *one = malloc((size_t)(f->n * f->m) * sizeof *one);
    assert_non_null(one);
    for (int64_t k = 0; k < f->n * f->m; k++) one[k] = k / f->m == 5 ? faulty[k] : golden[k];
    assert_int_equal(bf_gen_compare(golden, one, f->n, f->m, NULL, &want, &err), BF_OK);
    s.persistence = BF_PERSIST_TRANSIENT;
    e.sample = 5;
    bf_trial_record rec[1];
    tc_recs kept = {rec, 0};
    bf_campaign_result r;
    run_recs(f->gpt, f->ds, &s, 0, 1, &kept, &r);
    expect_metrics(&rec[0], &want, "attn_probs transient on prompt 5");
    bf_campaign_result_free(&r);
    free(one), free(golden), free(faulty);
}

/* A sampled campaign (exponent bits, so that many generations change):
 * each trial's metrics are what `bitflip generate --flip` computes for its
 * fault (bf_generator_run with it as a bf_bitflip, bf_gen_compare). */
static void sampled_matches_generate(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = tc_base_spec(0);
    s.trials = 40;
    s.seed = 7;
    s.positions[0] = 30;
    s.positions[1] = 29;
    s.n_positions = 2;
    s.gen_new_tokens = 6;
    bf_trial_record recs[MAX_TRIALS];
    tc_recs kept = {recs, 0};
    bf_campaign_result r;
    run_recs(f->llama, f->ds, &s, 0, 2, &kept, &r);
    assert_int_equal(kept.n, 40);
    bf_campaign *c = tc_make(f->llama, f->ds, &s);
    bf_generator *g = NULL;
    bf_error err = {0};
    bf_gen_opts o = {.new_tokens = 6};
    bf_model *unbound = NULL;   /* as bitflip generate loads it: the sequence axis free */
    assert_int_equal(bf_model_load_file(DIR "llama.onnx", &unbound, &err), BF_OK);
    assert_int_equal(bf_generator_create(unbound, bf_dataset_find(f->ds, "input_ids"), &o, &g, &err), BF_OK);
    int64_t *golden = malloc((size_t)(f->n * 6) * sizeof *golden), *t = malloc((size_t)(f->n * 6) * sizeof *t);
    assert_true(golden && t);
    assert_int_equal(bf_generator_run(g, NULL, golden, &err), BF_OK);
    int changed = 0, critical = 0;
    for (int64_t j = 0; j < kept.n; j++) {
        const bf_applied_fault *a = &recs[j].faults[0];
        int bit = 0;
        while (!(a->mask >> bit & 1)) bit++;
        bf_bitflip fl = {.param = (size_t)bf_model_find_param(f->llama, bf_campaign_site(c, (size_t)a->site)->name),
                         .index = a->index, .bit = bit};
        bf_gen_faults gf = {.flips = &fl, .n_flips = 1};
        assert_int_equal(bf_generator_run(g, &gf, t, &err), BF_OK);
        bf_gen_metrics want;
        assert_int_equal(bf_gen_compare(golden, t, f->n, 6, NULL, &want, &err), BF_OK);
        expect_metrics(&recs[j], &want, "sampled trial");
        changed += want.generation_match < 1;
        critical += recs[j].outcome == BF_OUTCOME_CRITICAL;
    }
    printf("%d of 40 trials changed a generation, %d critical\n", changed, critical);
    assert_true(changed > 0 && changed < 40);
    /* the summary's means are the records' */
    double sum = 0;
    for (int64_t j = 0; j < kept.n; j++) sum += recs[j].metrics[BF_METRIC_GENERATION_MATCH];
    assert_true(fabs(r.metric[BF_METRIC_GENERATION_MATCH].sum - sum) < 1e-9);
    free(golden), free(t);
    bf_generator_free(g);
    bf_model_free(unbound);
    bf_campaign_free(c);
    bf_campaign_result_free(&r);
}

static void refused(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, bf_status want, const char *needle)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_status st = bf_campaign_create(m, ds, s, &c, &err);
    if (st != want || !strstr(err.msg, needle)) fail_msg("wanted %d with '%s', got %d: %s", want, needle, st, err.msg);
    printf("refused: %s\n", err.msg);
    assert_null(c);
}

static void hostile_specs_refused(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = tc_base_spec(0);
    s.trials = 3;
    s.gen_new_tokens = 1025;
    refused(f->gpt, f->ds, &s, BF_ERANGE, "generate.new_tokens: must be 1..1024 new tokens, got 1025");
    s.gen_new_tokens = -1;
    refused(f->gpt, f->ds, &s, BF_ERANGE, "got -1");
    s.gen_new_tokens = 4;
    s.target = BF_TARGET_INPUTS;
    refused(f->gpt, f->ds, &s, BF_EINVAL, "not target 'inputs'");
    s.target = BF_TARGET_WEIGHTS;
    s.gen_new_tokens = 0;
    s.metrics = 1u << BF_METRIC_FIRST_DIVERGENCE;
    refused(f->gpt, f->ds, &s, BF_EINVAL, "metrics: generation_match, first_divergence and edit_distance need");
    /* a CTR model (task binary): no language model to decode */
    bf_model *mlp = NULL;
    bf_dataset *digits = NULL;
    tc_load(BF_FIXTURES "/real/deepfm", &mlp, &digits);
    s = tc_base_spec(0);
    s.trials = 3;
    s.gen_new_tokens = 4;
    refused(mlp, digits, &s, BF_EINVAL, "generation applies to a language_model task");
    bf_model_free(mlp);
    bf_dataset_free(digits);
}

/* The campaign's estimate counts each worker's generator: the plans
 * bf_generator_plan_bytes says a generator of the same model and prompts
 * holds, once per thread. */
static void estimate_counts_generators(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = tc_base_spec(0);
    s.trials = 2;
    bf_campaign_opts o = {.threads = 3};
    bf_job_budget plain, gen;
    bf_error err = {0};
    assert_int_equal(bf_campaign_estimate(f->llama, f->ds, &s, &o, &plain, &err), BF_OK);
    s.gen_new_tokens = 7;
    assert_int_equal(bf_campaign_estimate(f->llama, f->ds, &s, &o, &gen, &err), BF_OK);
    bf_model *unbound = NULL;
    assert_int_equal(bf_model_load_file(DIR "llama.onnx", &unbound, &err), BF_OK);
    bf_generator *g = NULL;
    bf_gen_opts go = {.new_tokens = 7};
    assert_int_equal(bf_generator_create(unbound, bf_dataset_find(f->ds, "input_ids"), &go, &g, &err), BF_OK);
    assert_true(bf_generator_plan_bytes(g) > 0);
    assert_true(gen.plans_bytes - plain.plans_bytes == 3 * bf_generator_plan_bytes(g));
    assert_true(gen.total_bytes - plain.total_bytes == 3 * bf_generator_plan_bytes(g));
    bf_generator_free(g);
    bf_model_free(unbound);
}

/* The allocations of creating and running a generating campaign failing
 * (each call path once under ASan, every 13th in release: campaign_check.h,
 * tc_alloc_plan): BF_ENOMEM, all freed (ASan), then a clean run. */
static void allocation_failures(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = tc_base_spec(0);
    s.trials = 2;
    s.gen_new_tokens = 2;
    long n = tc_alloc_failures(f->gpt, f->ds, &s, NULL, NULL, 2, 200000);
    printf("%ld allocations in the clean run\n", n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(weights_match_torch),     cmocka_unit_test(activation_matches_torch),
        cmocka_unit_test(sampled_matches_generate), cmocka_unit_test(hostile_specs_refused),
        cmocka_unit_test(estimate_counts_generators), cmocka_unit_test(allocation_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
