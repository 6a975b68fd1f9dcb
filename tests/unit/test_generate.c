/* Greedy generation under faults (bitflip/generate.h) against PyTorch's own
 * greedy decoding: tests/fixtures/gen/make_gen.py exports one small GPT-style
 * decoder with and without a KV cache and records PyTorch's tokens golden and
 * under weight, KV-cache and logit faults (reference.json). bitflip's tokens
 * must equal them; the metrics equal hand computation; hostile input is
 * refused with a message naming the culprit. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "alloc_fail.h"

#define DIR BF_FIXTURES "/gen/"

/* Model families of reference.json: gpt (this generator's), llama
 * (lm_models.py's: grouped-query attention, 2 key/value heads under 4). */
#define FAMILIES 2

typedef struct fx {
    bf_model *plains[FAMILIES], *kvs[FAMILIES];
    bf_model *plain, *kv;     /* the family under test */
    json_t *fam;              /* its part of reference.json */
    bf_dataset *ds;
    json_t *ref;
    int64_t n, p, m, v;
} fx;

static void use(fx *f, int k)
{
    f->plain = f->plains[k];
    f->kv = f->kvs[k];
    f->fam = json_array_get(json_object_get(f->ref, "models"), (size_t)k);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    bf_error err = {0};
    json_error_t je;
    if (!f || !(f->ref = json_load_file(DIR "reference.json", 0, &je))) {
        fprintf(stderr, "setup: reference.json: %s\n", je.text);
        return -1;
    }
    for (int k = 0; k < FAMILIES; k++) {
        json_t *fam = json_array_get(json_object_get(f->ref, "models"), (size_t)k);
        char a[256], b[256];
        snprintf(a, sizeof a, DIR "%s", json_string_value(json_object_get(fam, "model")));
        snprintf(b, sizeof b, DIR "%s", json_string_value(json_object_get(fam, "model_kv")));
        if (bf_model_load_file(a, &f->plains[k], &err) || bf_model_load_file(b, &f->kvs[k], &err)) {
            fprintf(stderr, "setup: %s\n", err.msg);
            return -1;
        }
    }
    if (bf_dataset_load_file(DIR "prompts.safetensors", &f->ds, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    use(f, 0);
    f->n = bf_dataset_num_samples(f->ds);
    f->p = json_integer_value(json_object_get(f->ref, "prompt_len"));
    f->m = json_integer_value(json_object_get(f->ref, "new_tokens"));
    f->v = json_integer_value(json_object_get(f->ref, "vocab"));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    for (int k = 0; k < FAMILIES; k++) bf_model_free(f->plains[k]), bf_model_free(f->kvs[k]);
    bf_dataset_free(f->ds);
    json_decref(f->ref);
    free(f);
    return 0;
}

static const bf_tensor *prompts(fx *f) { return bf_dataset_find(f->ds, "input_ids"); }

static bf_generator *make(fx *f, bf_model *m, int no_cache, int64_t batch)
{
    bf_error err = {0};
    bf_generator *g = NULL;
    bf_gen_opts o = {.new_tokens = f->m, .batch = batch, .no_cache = no_cache};
    if (bf_generator_create(m, prompts(f), &o, &g, &err) != BF_OK) fail_msg("%s", err.msg);
    return g;
}

static int64_t *run(fx *f, bf_generator *g, const bf_gen_faults *faults)
{
    bf_error err = {0};
    int64_t *t = calloc((size_t)(f->n * f->m), sizeof *t);
    if (bf_generator_run(g, faults, t, &err) != BF_OK) fail_msg("%s", err.msg);
    return t;
}

/* The case's token lists under `key` ("tokens": re-run prefix, "tokens_kv":
 * the cache) equal `got`. */
static void expect_tokens(fx *f, json_t *c, const char *key, const int64_t *got, const char *what)
{
    json_t *rows = json_object_get(c, key);
    assert_non_null(rows);
    assert_int_equal(json_array_size(rows), f->n);
    for (int64_t i = 0; i < f->n; i++)
        for (int64_t s = 0; s < f->m; s++) {
            int64_t want = json_integer_value(json_array_get(json_array_get(rows, (size_t)i), (size_t)s));
            if (got[i * f->m + s] != want)
                fail_msg("%s (%s): prompt %lld token %lld is %lld, PyTorch's %lld", what, key, (long long)i, (long long)s,
                         (long long)got[i * f->m + s], (long long)want);
        }
}

static json_t *golden_case(fx *f) { return json_array_get(json_object_get(f->fam, "cases"), 0); }

static void golden_matches_torch_in(fx *f)
{
    bf_generator *plain = make(f, f->plain, 0, 0), *kv = make(f, f->kv, 0, 0), *kv_off = make(f, f->kv, 1, 0);
    assert_int_equal(bf_generator_kv(plain).layers, 0);
    assert_int_equal(bf_generator_kv(kv).layers, 2);
    assert_int_equal(bf_generator_kv(kv).heads, json_integer_value(json_object_get(f->fam, "kv_heads")));
    assert_int_equal(bf_generator_kv(kv).head_dim, json_integer_value(json_object_get(f->fam, "head_dim")));
    assert_int_equal(bf_generator_kv(kv_off).layers, 0);
    assert_int_equal(bf_generator_vocab(kv), f->v);
    int64_t *a = run(f, plain, NULL), *b = run(f, kv, NULL), *c = run(f, kv_off, NULL);
    expect_tokens(f, golden_case(f), "tokens", a, "golden, no cache");
    expect_tokens(f, golden_case(f), "tokens_kv", b, "golden, KV cache");
    /* the cache export run without it: an empty past each step, the prefix re-run */
    expect_tokens(f, golden_case(f), "tokens", c, "golden, KV export re-run");
    free(a), free(b), free(c);
    bf_generator_free(plain), bf_generator_free(kv), bf_generator_free(kv_off);
}

static void golden_matches_torch(void **state)
{
    fx *f = *state;
    for (int k = 0; k < FAMILIES; k++) {
        use(f, k);
        golden_matches_torch_in(f);
    }
    use(f, 0);
}

/* Batches of 4 over 6 prompts (the last filled up with copies) and of 1 give the same tokens. */
static void batching_keeps_tokens_in(fx *f)
{
    for (int64_t batch = 1; batch <= 4; batch += 3) {
        bf_generator *g = make(f, f->kv, 0, batch);
        assert_int_equal(bf_generator_batch(g), batch);
        int64_t *t = run(f, g, NULL);
        expect_tokens(f, golden_case(f), "tokens_kv", t, "golden, batch 1 and 4");
        free(t);
        bf_generator_free(g);
    }
}

static void batching_keeps_tokens(void **state)
{
    fx *f = *state;
    for (int k = 0; k < FAMILIES; k++) {
        use(f, k);
        batching_keeps_tokens_in(f);
    }
    use(f, 0);
}

static void weight_faults_match_torch_in(fx *f)
{
    bf_generator *plain = make(f, f->plain, 0, 4), *kv = make(f, f->kv, 0, 0);
    json_t *cases = json_object_get(f->fam, "cases"), *c;
    size_t i, seen = 0;
    json_array_foreach(cases, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "kind")), "weight") != 0) continue;
        bf_bitflip fl = {.bit = (int)json_integer_value(json_object_get(c, "bit"))};
        char what[160];
        for (int form = 0; form < 2; form++) {
            /* each form's initializer and index (a Linear's weight is exported transposed, under the exporter's name) */
            const char *name = json_string_value(json_object_get(c, form ? "param_kv" : "param"));
            fl.index = json_integer_value(json_object_get(c, form ? "index_kv" : "index"));
            snprintf(what, sizeof what, "%s (%s)[%lld] bit %d", name, json_string_value(json_object_get(c, "torch")),
                     (long long)fl.index, fl.bit);
            bf_model *m = form ? f->kv : f->plain;
            int64_t p = bf_model_find_param(m, name);
            assert_true(p >= 0);
            fl.param = (size_t)p;
            bf_gen_faults faults = {.flips = &fl, .n_flips = 1};
            int64_t *t = run(f, form ? kv : plain, &faults);
            expect_tokens(f, c, form ? "tokens_kv" : "tokens", t, what);
            free(t);
        }
        seen++;
    }
    assert_true(seen >= 2);
    /* the weights are back: golden again */
    int64_t *t = run(f, kv, NULL);
    expect_tokens(f, golden_case(f), "tokens_kv", t, "golden after the faults");
    free(t);
    bf_generator_free(plain), bf_generator_free(kv);
}

static void weight_faults_match_torch(void **state)
{
    fx *f = *state;
    for (int k = 0; k < FAMILIES; k++) {
        use(f, k);
        weight_faults_match_torch_in(f);
    }
    use(f, 0);
}

static bf_kv_fault kv_fault_of(json_t *c)
{
    return (bf_kv_fault){.layer = (int)json_integer_value(json_object_get(c, "layer")),
                         .value = !strcmp(json_string_value(json_object_get(c, "kv")), "v"),
                         .head = json_integer_value(json_object_get(c, "head")),
                         .pos = json_integer_value(json_object_get(c, "pos")),
                         .dim = json_integer_value(json_object_get(c, "dim")),
                         .bit = (int)json_integer_value(json_object_get(c, "bit")),
                         .prompt = -1};
}

static void kv_faults_match_torch_in(fx *f)
{
    bf_generator *kv = make(f, f->kv, 0, 4);
    json_t *cases = json_object_get(f->fam, "cases"), *c;
    size_t i, seen = 0;
    json_array_foreach(cases, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "kind")), "kv") != 0) continue;
        bf_kv_fault kf = kv_fault_of(c);
        bf_gen_faults faults = {.kv = &kf, .n_kv = 1};
        int64_t *t = run(f, kv, &faults);
        char what[96];
        snprintf(what, sizeof what, "KV fault layer %d %s head %lld pos %lld", kf.layer, kf.value ? "v" : "k",
                 (long long)kf.head, (long long)kf.pos);
        expect_tokens(f, c, "tokens_kv", t, what);
        /* the same fault on one prompt: that prompt as above, every other golden */
        json_t *gold = json_object_get(golden_case(f), "tokens_kv");
        for (kf.prompt = 0; kf.prompt < f->n; kf.prompt += 5) {
            int64_t *one = run(f, kv, &faults);
            for (int64_t r = 0; r < f->n; r++)
                for (int64_t s = 0; s < f->m; s++) {
                    int64_t want = r == kf.prompt ? t[r * f->m + s]
                                                  : json_integer_value(json_array_get(json_array_get(gold, (size_t)r), (size_t)s));
                    assert_int_equal(one[r * f->m + s], want);
                }
            free(one);
        }
        free(t);
        seen++;
    }
    assert_true(seen >= 2);
    bf_generator_free(kv);
}

static void kv_faults_match_torch(void **state)
{
    fx *f = *state;
    for (int k = 0; k < FAMILIES; k++) {
        use(f, k);
        kv_faults_match_torch_in(f);
    }
    use(f, 0);
}

/* A bit of the last position's logit, one step: a value fault on the graph
 * output 'logits', whose slice per prompt is [tokens of the step, vocab]. */
static void logit_faults_match_torch_in(fx *f)
{
    bf_generator *plain = make(f, f->plain, 0, 0), *kv = make(f, f->kv, 0, 3);
    json_t *cases = json_object_get(f->fam, "cases"), *c;
    size_t i, seen = 0;
    json_array_foreach(cases, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "kind")), "logit") != 0) continue;
        int64_t step = json_integer_value(json_object_get(c, "step")), vi = json_integer_value(json_object_get(c, "vocab_index"));
        int bit = (int)json_integer_value(json_object_get(c, "bit"));
        for (int form = 0; form < 2; form++) {
            bf_model *m = form ? f->kv : f->plain;
            int64_t seq = form ? (step == 0 ? f->p : 1) : f->p + step;
            bf_gen_value_fault vf = {.step = step,
                                     .fault = {.value = bf_model_find_value(m, "logits"), .sample = -1,
                                               .index = (seq - 1) * f->v + vi, .model = BF_FAULT_BITFLIP,
                                               .mask = UINT32_C(1) << bit, .repr = BF_REPR_FP32}};
            bf_gen_faults faults = {.values = &vf, .n_values = 1};
            int64_t *t = run(f, form ? kv : plain, &faults);
            expect_tokens(f, c, form ? "tokens_kv" : "tokens", t, "logit fault");
            free(t);
        }
        seen++;
    }
    assert_true(seen >= 2);
    bf_generator_free(plain), bf_generator_free(kv);
}

static void logit_faults_match_torch(void **state)
{
    fx *f = *state;
    for (int k = 0; k < FAMILIES; k++) {
        use(f, k);
        logit_faults_match_torch_in(f);
    }
    use(f, 0);
}

/* A bit of one attention probability (the site attn_probs.LAYER, found by
 * structure), at one step, in every prompt: the GPT family's "probs" cases. */
static void probs_faults_match_torch(void **state)
{
    fx *f = *state;
    bf_generator *plain = make(f, f->plain, 0, 0), *kv = make(f, f->kv, 0, 4);
    json_t *cases = json_object_get(f->fam, "cases"), *c;
    size_t i, seen = 0;
    json_array_foreach(cases, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "kind")), "probs") != 0) continue;
        char site[32];
        snprintf(site, sizeof site, "attn_probs.%lld", (long long)json_integer_value(json_object_get(c, "layer")));
        for (int form = 0; form < 2; form++) {
            bf_model *m = form ? f->kv : f->plain;
            bf_gen_value_fault vf = {.step = json_integer_value(json_object_get(c, "step")),
                                     .fault = {.value = bf_model_named_site_value(m, site), .sample = -1,
                                               .index = json_integer_value(json_object_get(c, form ? "index_kv" : "index")),
                                               .model = BF_FAULT_BITFLIP,
                                               .mask = UINT32_C(1) << json_integer_value(json_object_get(c, "bit")),
                                               .repr = BF_REPR_FP32}};
            assert_true(vf.fault.value >= 0);
            bf_gen_faults faults = {.values = &vf, .n_values = 1};
            int64_t *t = run(f, form ? kv : plain, &faults);
            expect_tokens(f, c, form ? "tokens_kv" : "tokens", t, site);
            /* on prompt 5 alone (the last, in a batch padded with its copies): that row as above, the rest golden */
            vf.fault.sample = 5;
            int64_t *one = run(f, form ? kv : plain, &faults);
            json_t *gold = json_object_get(golden_case(f), form ? "tokens_kv" : "tokens");
            for (int64_t r = 0; r < f->n; r++)
                for (int64_t s = 0; s < f->m; s++)
                    assert_int_equal(one[r * f->m + s],
                                     r == 5 ? t[r * f->m + s]
                                            : json_integer_value(json_array_get(json_array_get(gold, (size_t)r), (size_t)s)));
            free(one);
            free(t);
        }
        seen++;
    }
    assert_true(seen >= 2);
    bf_generator_free(plain), bf_generator_free(kv);
}

/* The named sites by structure: each model's Softmax over Q.K^T and its
 * input, the MoE's routers (a committed h-lmgen fixture), then each
 * attention layer's KV cache (test_kv_sites checks those), none in an MLP
 * classifier whose Softmax reads a weight product; the ONNX values as the
 * exporter named them (read with onnx from the files). */
static void named_sites_found(void **state)
{
    fx *f = *state;
    static const char *const gpt[4][2] = {{"attn_scores.0", "/blocks.0/Where_output_0"},
                                          {"attn_probs.0", "/blocks.0/Softmax_output_0"},
                                          {"attn_scores.1", "/blocks.1/Where_output_0"},
                                          {"attn_probs.1", "/blocks.1/Softmax_output_0"}};
    bf_named_site s[12];
    assert_int_equal(bf_model_named_sites(f->plains[0], s, 12), 8);   /* and k_cache.0, v_cache.0, k_cache.1, v_cache.1 */
    assert_int_equal(s[4].kind, BF_SITE_K_CACHE);
    assert_int_equal(s[7].kind, BF_SITE_V_CACHE);
    assert_int_equal(s[7].index, 1);
    for (int k = 0; k < 4; k++) {
        char name[48];
        snprintf(name, sizeof name, "%s.%d", bf_named_site_kind_name(s[k].kind), s[k].index);
        assert_string_equal(name, gpt[k][0]);
        assert_string_equal(s[k].value_name, gpt[k][1]);
        assert_int_equal(bf_model_named_site_value(f->plains[0], gpt[k][0]), bf_model_find_value(f->plains[0], gpt[k][1]));
    }
    assert_int_equal(bf_model_named_sites(f->kvs[1], NULL, 0), 8);   /* llama: masked by Where(mask, -inf, scores) */
    assert_int_equal(bf_model_named_site_value(f->plains[0], "attn_probs.2"), -1);
    assert_int_equal(bf_model_named_site_value(f->plains[0], "attn_probs.x"), -1);
    assert_int_equal(bf_model_named_site_value(f->plains[0], "attn_probs.-1"), -1);
    assert_int_equal(bf_model_named_site_value(f->plains[0], "router_logits.0"), -1);
    assert_int_equal(bf_model_named_site_value(f->plains[0], "logits.0"), -1);
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_file(BF_FIXTURES "/lm/lm_moe_scatter_op14.onnx", &m, &err)) fail_msg("%s", err.msg);
    assert_int_equal(bf_model_named_sites(m, s, 12), 10);
    assert_int_equal(s[4].kind, BF_SITE_ROUTER_LOGITS);
    assert_int_equal(s[6].kind, BF_SITE_K_CACHE);
    assert_string_equal(s[4].value_name, "/layers.0/mlp/gate/MatMul_output_0");
    assert_string_equal(s[5].value_name, "/layers.1/mlp/gate/MatMul_output_0");
    assert_int_equal(bf_model_named_site_value(m, "router_logits.1"), bf_model_find_value(m, s[5].value_name));
    bf_model_free(m);
    if (bf_model_load_file(BF_FIXTURES "/conformance/mlp_ops_op13.onnx", &m, &err)) fail_msg("%s", err.msg);
    assert_int_equal(bf_model_named_sites(m, s, 12), 0);
    bf_model_free(m);
}

/* Worked by hand. golden 1 2 3 4 / faulty 1 3 4 5: the first change at
 * position 1, and 2 edits (drop the 2, add the 5). golden 7 7 7 7 / faulty
 * 7 7 7 7: no change, first divergence M = 4, distance 0. golden 1 2 3 4 /
 * faulty 4 3 2 1: the first change at 0, distance 4 (four substitutions;
 * keeping any one common token aligned costs a delete and an insert plus
 * two substitutions, 4 again). Means over the three: match 1/3, first
 * divergence (1 + 4 + 0) / 3, distance (2 + 0 + 4) / 3. And
 * kitten / sittin (6 letters each as tokens): 2 substitutions. */
static void metrics_by_hand(void **state)
{
    (void)state;
    const int64_t golden[12] = {1, 2, 3, 4, 7, 7, 7, 7, 1, 2, 3, 4}, faulty[12] = {1, 3, 4, 5, 7, 7, 7, 7, 4, 3, 2, 1};
    int64_t row[10];
    assert_int_equal(bf_gen_edit_distance(golden, faulty, 4, row), 2);
    assert_int_equal(bf_gen_edit_distance(golden + 8, faulty + 8, 4, row), 4);
    const int64_t kitten[6] = {10, 8, 19, 19, 4, 13}, sittin[6] = {18, 8, 19, 19, 8, 13};
    int64_t row6[14];
    assert_int_equal(bf_gen_edit_distance(kitten, sittin, 6, row6), 2);
    bf_gen_metrics mt;
    bf_error err = {0};
    assert_int_equal(bf_gen_compare(golden, faulty, 3, 4, NULL, &mt, &err), BF_OK);
    assert_int_equal(mt.prompts, 3);
    assert_true(mt.generation_match == 1.0 / 3.0);
    assert_true(mt.first_divergence == 5.0 / 3.0);
    assert_true(mt.edit_distance == 6.0 / 3.0);
    assert_int_equal(bf_gen_compare(golden, faulty, 0, 4, NULL, &mt, &err), BF_EINVAL);
}

/* The metrics of the reference's KV faults, counted from its token lists. */
static void metrics_of_reference(void **state)
{
    fx *f = *state;
    json_t *gold = json_object_get(golden_case(f), "tokens_kv"), *cases = json_object_get(f->fam, "cases"), *c;
    int64_t *a = calloc((size_t)(f->n * f->m), sizeof *a), *b = calloc((size_t)(f->n * f->m), sizeof *b);
    size_t i;
    json_array_foreach(cases, i, c) {
        json_t *rows = json_object_get(c, "tokens_kv");
        if (!rows) continue;
        int64_t same = 0, first = 0;
        for (int64_t r = 0; r < f->n; r++) {
            int64_t k = -1;
            for (int64_t s = 0; s < f->m; s++) {
                a[r * f->m + s] = json_integer_value(json_array_get(json_array_get(gold, (size_t)r), (size_t)s));
                b[r * f->m + s] = json_integer_value(json_array_get(json_array_get(rows, (size_t)r), (size_t)s));
                if (k < 0 && a[r * f->m + s] != b[r * f->m + s]) k = s;
            }
            same += k < 0;
            first += k < 0 ? f->m : k;
        }
        bf_gen_metrics mt;
        assert_int_equal(bf_gen_compare(a, b, f->n, f->m, NULL, &mt, NULL), BF_OK);
        assert_true(mt.generation_match == (double)same / (double)f->n);
        assert_true(mt.first_divergence == (double)first / (double)f->n);
        assert_true(mt.edit_distance <= (double)(f->m - mt.first_divergence) + 1e-12);   /* substitutions past the first change */
        if (same == f->n) assert_true(mt.edit_distance == 0);
    }
    free(a), free(b);
}

static void expect_refusal(bf_status got, bf_status want, const bf_error *err, const char *needle)
{
    if (got != want || !strstr(err->msg, needle))
        fail_msg("status %d (want %d), message '%s' (want it to say '%s')", got, want, err->msg, needle);
}

static void hostile_inputs_refused(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bf_generator *g = NULL;
    bf_gen_opts o = {.new_tokens = 0};
    expect_refusal(bf_generator_create(f->kv, prompts(f), &o, &g, &err), BF_ERANGE, &err, "new tokens must be 1 .. 1024");
    o.new_tokens = BF_GEN_MAX_NEW_TOKENS + 1;
    expect_refusal(bf_generator_create(f->kv, prompts(f), &o, &g, &err), BF_ERANGE, &err, "got 1025");
    /* past the positional table (32 positions): the Gather refuses at run time, naming itself */
    o.new_tokens = 40;
    assert_int_equal(bf_generator_create(f->kv, prompts(f), &o, &g, &err), BF_OK);
    int64_t *t = calloc((size_t)(f->n * 40), sizeof *t);
    bf_status st = bf_generator_run(g, NULL, t, &err);
    assert_int_not_equal(st, BF_OK);
    assert_non_null(strstr(err.msg, "step"));
    free(t);
    bf_generator_free(g);
    g = NULL;
    /* ids outside the vocabulary */
    int64_t bad[2 * 3] = {1, 2, 3, 4, 48, 6};
    bf_tensor pt = {.name = "input_ids", .dtype = BF_I64, .ndim = 2, .dims = {2, 3}, .data = bad};
    o.new_tokens = 2;
    expect_refusal(bf_generator_create(f->kv, &pt, &o, &g, &err), BF_ERANGE, &err, "prompt 1, position 1: token id 48");
    bad[4] = -1;
    expect_refusal(bf_generator_create(f->plain, &pt, &o, &g, &err), BF_ERANGE, &err, "token id -1");
    float fl[6] = {0};
    bf_tensor ft = {.name = "input_ids", .dtype = BF_F32, .ndim = 2, .dims = {2, 3}, .data = fl};
    expect_refusal(bf_generator_create(f->kv, &ft, &o, &g, &err), BF_EFORMAT, &err, "int64 [prompts, length]");
    assert_null(g);
    /* the plans over a memory limit: refused before they are made */
    o.max_bytes = 1000;
    expect_refusal(bf_generator_create(f->kv, prompts(f), &o, &g, &err), BF_ELIMIT, &err, "over the limit of");
}

/* Exports whose cache is not one (make_gen.py's hostile_caches): refused by
 * name, by the layout and by a generator alike; and one with a fixed sequence. */
static void hostile_caches_refused(void **state)
{
    fx *f = *state;
    static const char *const files[3][2] = {
        {DIR "kv_no_present.onnx", "graph output 'present.0.value' is missing"},
        {DIR "kv_gap.onnx", "'past_key_values.2.key' names layer 2, but the KV cache's layers run 0 .. 0"},
        {DIR "kv_rank3.onnx", "a KV cache is float32 [batch, heads, length, head size]"}};
    for (int k = 0; k < 3; k++) {
        bf_model *m = NULL;
        bf_error err = {0};
        bf_kv_layout kv;
        bf_generator *g = NULL;
        if (bf_model_load_file(files[k][0], &m, &err)) fail_msg("%s", err.msg);
        expect_refusal(bf_model_kv_layout(m, &kv, &err), BF_EFORMAT, &err, files[k][1]);
        bf_gen_opts o = {.new_tokens = 2, .no_cache = 1};
        expect_refusal(bf_generator_create(m, prompts(f), &o, &g, &err), BF_EFORMAT, &err, files[k][1]);
        assert_null(g);
        bf_model_free(m);
    }
    /* a sequence length fixed at export: step 1 feeds P + 1 tokens (else it would be written past the buffer) */
    bf_model *m = NULL;
    bf_generator *g = NULL;
    bf_error err = {0};
    bf_gen_opts o = {.new_tokens = 3};
    if (bf_model_load_file(DIR "fixed_seq.onnx", &m, &err)) fail_msg("%s", err.msg);
    expect_refusal(bf_generator_create(m, prompts(f), &o, &g, &err), BF_ESHAPE, &err,
                   "step 1 (6 tokens over a past of 0): fixed_seq.onnx: graph input 'input_ids' dim 1 is 5, fed 6");
    assert_null(g);
    bf_model_free(m);
    bf_kv_layout kv;
    assert_int_equal(bf_model_kv_layout(f->plains[0], &kv, NULL), BF_OK);
    assert_int_equal(kv.layers, 0);
    assert_int_equal(bf_model_kv_layout(f->kvs[1], &kv, NULL), BF_OK);
    assert_int_equal(kv.layers, 2);
    assert_int_equal(kv.heads, 2);
}

static void hostile_faults_refused(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bf_generator *kv = make(f, f->kv, 0, 0), *plain = make(f, f->plain, 0, 0);
    int64_t *t = calloc((size_t)(f->n * f->m), sizeof *t);
    bf_kv_fault kf = {.layer = 0, .head = 0, .pos = f->p + f->m - 1, .dim = 0, .bit = 30, .prompt = -1};
    bf_gen_faults faults = {.kv = &kf, .n_kv = 1};
    expect_refusal(bf_generator_run(kv, &faults, t, &err), BF_ERANGE, &err, "position 12 is never written");
    kf.pos = f->p + f->m - 2;   /* written by the last step, read by none: allowed, changes nothing */
    assert_int_equal(bf_generator_run(kv, &faults, t, &err), BF_OK);
    expect_tokens(f, golden_case(f), "tokens_kv", t, "a fault on the last position written");
    kf.pos = 0;
    kf.layer = 2;
    expect_refusal(bf_generator_run(kv, &faults, t, &err), BF_ERANGE, &err, "layer 2 does not exist (the cache has layers 0 .. 1)");
    kf.layer = 0, kf.head = 4;
    expect_refusal(bf_generator_run(kv, &faults, t, &err), BF_ERANGE, &err, "head 4 does not exist");
    kf.head = 0, kf.dim = 8;
    expect_refusal(bf_generator_run(kv, &faults, t, &err), BF_ERANGE, &err, "dim 8 does not exist");
    kf.dim = 0, kf.bit = 32;
    expect_refusal(bf_generator_run(kv, &faults, t, &err), BF_ERANGE, &err, "bit 32");
    kf.bit = 1, kf.prompt = f->n;
    expect_refusal(bf_generator_run(kv, &faults, t, &err), BF_ERANGE, &err, "prompt 6 does not exist");
    kf.prompt = -1;
    expect_refusal(bf_generator_run(plain, &faults, t, &err), BF_EUNSUPPORTED, &err, "this export has no KV cache");
    bf_gen_value_fault vf = {.step = f->m, .fault = {.value = bf_model_find_value(f->kv, "logits"), .sample = -1,
                                                     .mask = 1, .repr = BF_REPR_FP32}};
    bf_gen_faults vfs = {.values = &vf, .n_values = 1};
    expect_refusal(bf_generator_run(kv, &vfs, t, &err), BF_ERANGE, &err, "step 8 does not exist");
    vf.step = 1;
    vf.fault.index = f->v;   /* step 1 feeds one token: the slice is [1, vocab] */
    assert_int_not_equal(bf_generator_run(kv, &vfs, t, &err), BF_OK);
    assert_non_null(strstr(err.msg, "value fault 0 at step 1"));
    bf_bitflip fl = {.param = 0, .index = 1 << 30, .bit = 3};
    bf_gen_faults wf = {.flips = &fl, .n_flips = 1};
    expect_refusal(bf_generator_run(kv, &wf, t, &err), BF_ERANGE, &err, "weight fault 0");
    /* nothing of the refused runs stayed */
    assert_int_equal(bf_generator_run(kv, NULL, t, &err), BF_OK);
    expect_tokens(f, golden_case(f), "tokens_kv", t, "golden after refusals");
    free(t);
    bf_generator_free(kv), bf_generator_free(plain);
}

/* Every allocation of a generator's create and of a faulty run failing in
 * turn: BF_ENOMEM (or a failure that says out of memory), everything freed
 * (ASan's leak check), and after a failed run the generator still gives
 * golden tokens (the weights restored). */
static void allocation_failures(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bf_gen_opts o = {.new_tokens = 3, .batch = 4};
    long n;
    for (n = 0;; n++) {
        bf_generator *g = NULL;
        bf_test_alloc_fail_after(n);
        bf_status st = bf_generator_create(f->kvs[0], prompts(f), &o, &g, &err);
        long failed = bf_test_alloc_failures();
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) {
            assert_int_equal(failed, 0);
            bf_generator_free(g);
            break;
        }
        assert_null(g);
        assert_true(failed > 0);
        assert_int_equal(st, BF_ENOMEM);
    }
    assert_true(n > 10);
    bf_generator *g = NULL;
    assert_int_equal(bf_generator_create(f->kvs[0], prompts(f), &o, &g, &err), BF_OK);
    int64_t *t = calloc((size_t)(f->n * 3), sizeof *t), *gold = calloc((size_t)(f->n * 3), sizeof *gold);
    assert_int_equal(bf_generator_run(g, NULL, gold, &err), BF_OK);
    bf_bitflip fl[2] = {{.param = (size_t)bf_model_find_param(f->kvs[0], "gpt.blocks.0.w_k"), .index = 37, .bit = 30},
                        {.param = (size_t)bf_model_find_param(f->kvs[0], "gpt.wte"), .index = 3, .bit = 30}};
    bf_gen_value_fault vf = {.step = 1, .fault = {.value = bf_model_find_value(f->kvs[0], "logits"), .sample = 2,
                                                  .mask = 1u << 30, .repr = BF_REPR_FP32}};
    bf_gen_faults faults = {.flips = fl, .n_flips = 2, .values = &vf, .n_values = 1};
    for (n = 0;; n++) {
        bf_test_alloc_fail_after(n);
        bf_status st = bf_generator_run(g, &faults, t, &err);
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) break;
        assert_int_equal(st, BF_ENOMEM);
        assert_int_equal(bf_generator_run(g, NULL, t, &err), BF_OK);
        assert_memory_equal(t, gold, (size_t)(f->n * 3) * sizeof *t);
    }
    assert_true(n > 0);
    free(t), free(gold);
    bf_generator_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_matches_torch),      cmocka_unit_test(batching_keeps_tokens),
        cmocka_unit_test(weight_faults_match_torch), cmocka_unit_test(kv_faults_match_torch),
        cmocka_unit_test(logit_faults_match_torch),  cmocka_unit_test(probs_faults_match_torch),
        cmocka_unit_test(named_sites_found),         cmocka_unit_test(metrics_by_hand),
        cmocka_unit_test(metrics_of_reference),      cmocka_unit_test(hostile_inputs_refused),
        cmocka_unit_test(hostile_faults_refused),    cmocka_unit_test(hostile_caches_refused),
        cmocka_unit_test(allocation_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
