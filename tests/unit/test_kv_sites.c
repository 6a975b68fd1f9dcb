/* KV-cache fault sites (bitflip/sites.h k_cache.K, v_cache.K) and campaign
 * target kv_cache on the language-model fixtures of tests/fixtures/lm:
 *
 * - the sites each export has, and where (head, position, dim) lie in them,
 *   against the shapes the PyTorch code gives by hand (GPT-2's c_attn split
 *   [N, T, heads*D]; Llama's RoPE output [N, H_kv, T, D] or, interleaved,
 *   [N, H_kv, T, D/2, 2]; its v_proj [N, T, H_kv*D]; a present
 *   [N, H_kv, P+T, D]);
 * - causality: a flip in the cached entry at position p of one sample leaves
 *   every logit of that sample's positions before p, and every other
 *   sample, bit-identical (masked_fill exports: masked scores are -inf
 *   whatever the key holds), and changes position p's;
 * - the campaign: sites, cells and records follow faults.kv, and bad
 *   filters (layer, head or position out of range, duplicates, no
 *   attention) are refused naming the field.
 * (tests/conformance/kv_campaign.py compares the records with PyTorch.) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "bitflip/sites.h"
#include "campaign_check.h"

#define LM BF_FIXTURES "/lm/"

typedef struct fx {
    bf_model *m;
    bf_dataset *ds;
} fx;

static fx load(const char *name)
{
    char mp[256], dp[256];
    snprintf(mp, sizeof mp, LM "%s.onnx", name);
    snprintf(dp, sizeof dp, LM "%s.eval.safetensors", name);
    fx f = {0};
    bf_error err = {0};
    if (bf_model_load_file(mp, &f.m, &err) != BF_OK) fail_msg("%s", err.msg);
    if (bf_dataset_load_file(dp, &f.ds, &err) != BF_OK) fail_msg("%s", err.msg);
    if (bf_model_bind_dims(&f.m, f.ds, &err) != BF_OK) fail_msg("%s", err.msg);
    return f;
}

static void unload(fx *f)
{
    bf_model_free(f->m);
    bf_dataset_free(f->ds);
}

static bf_named_site find_site(const bf_model *m, bf_named_site_kind kind, int layer)
{
    bf_named_site ns[64];
    size_t n = bf_model_named_sites(m, ns, 64);
    for (size_t i = 0; i < n && i < 64; i++)
        if (ns[i].kind == kind && ns[i].index == layer) return ns[i];
    fail_msg("no %s.%d", bf_named_site_kind_name(kind), layer);
    return ns[0];
}

typedef struct want {
    const char *fixture, *k_value, *v_value;
    bf_kv_site_layout k, v;
} want;

/* heads, positions, dim; strides head, pos, dim; elements per sample */
static const want WANT[] = {
    {"lm_gpt2_op14", "/h.1/Split_output_1", "/h.1/Split_output_2", {4, 16, 8, 8, 32, 1, 512}, {4, 16, 8, 8, 32, 1, 512}},
    {"lm_gpt2_kv_op15", "present.1.key", "present.1.value", {4, 16, 8, 128, 8, 1, 512}, {4, 16, 8, 128, 8, 1, 512}},
    {"lm_llama_half_ri_triu_op15", "/layers.1/self_attn/Add_1_output_0", "/layers.1/self_attn/v_proj/MatMul_output_0",
     {2, 16, 8, 128, 8, 1, 256}, {2, 16, 8, 8, 16, 1, 256}},
    {"lm_llama_il_expand_buf_op16", "/layers.1/self_attn/Concat_5_output_0", "/layers.1/self_attn/v_proj/MatMul_output_0",
     {2, 16, 8, 128, 8, 1, 256}, {2, 16, 8, 8, 16, 1, 256}},
    {"lm_llama_kv_op17", "present.1.key", "present.1.value", {2, 16, 8, 128, 8, 1, 256}, {2, 16, 8, 128, 8, 1, 256}},
};

static void same_layout(const char *what, const bf_kv_site_layout *got, const bf_kv_site_layout *w)
{
    if (memcmp(got, w, sizeof *w) != 0)
        fail_msg("%s: heads %lld positions %lld dim %lld strides %lld %lld %lld elements %lld; wanted %lld %lld %lld, "
                 "%lld %lld %lld, %lld", what, (long long)got->heads, (long long)got->positions, (long long)got->dim,
                 (long long)got->stride_head, (long long)got->stride_pos, (long long)got->stride_dim,
                 (long long)got->elements, (long long)w->heads, (long long)w->positions, (long long)w->dim,
                 (long long)w->stride_head, (long long)w->stride_pos, (long long)w->stride_dim, (long long)w->elements);
}

static void layouts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof WANT / sizeof *WANT; i++) {
        fx f = load(WANT[i].fixture);
        bf_plan *p = NULL;
        bf_error err = {0};
        if (bf_plan_create(f.m, 2, &p, &err) != BF_OK) fail_msg("%s", err.msg);
        bf_named_site k = find_site(f.m, BF_SITE_K_CACHE, 1), v = find_site(f.m, BF_SITE_V_CACHE, 1);
        assert_string_equal(k.value_name, WANT[i].k_value);
        assert_string_equal(v.value_name, WANT[i].v_value);
        assert_int_equal(bf_model_named_site_value(f.m, "k_cache.1"), k.value);
        assert_int_equal(bf_model_named_site_value(f.m, "v_cache.1"), v.value);
        bf_kv_site_layout lk, lv;
        if (bf_plan_kv_site_layout(p, &k, &lk, &err) != BF_OK) fail_msg("%s k: %s", WANT[i].fixture, err.msg);
        if (bf_plan_kv_site_layout(p, &v, &lv, &err) != BF_OK) fail_msg("%s v: %s", WANT[i].fixture, err.msg);
        same_layout(WANT[i].fixture, &lk, &WANT[i].k);
        same_layout(WANT[i].fixture, &lv, &WANT[i].v);
        /* not a KV site */
        bf_named_site probs = find_site(f.m, BF_SITE_ATTN_PROBS, 0);
        assert_int_equal(bf_plan_kv_site_layout(p, &probs, &lk, &err), BF_EINVAL);
        bf_plan_free(p);
        unload(&f);
    }
}

/* A classifier has no attention: no KV site, and target kv_cache is refused
 * saying so. */
static void no_attention(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_load(BF_FIXTURES "/conformance/demo_digits", &m, &ds);
    bf_named_site ns[8];
    size_t n = bf_model_named_sites(m, ns, 8);
    for (size_t i = 0; i < n && i < 8; i++) assert_true(ns[i].kind != BF_SITE_K_CACHE && ns[i].kind != BF_SITE_V_CACHE);
    bf_campaign_spec s = tc_base_spec(6);
    s.target = BF_TARGET_KV_CACHE;
    s.persistence = BF_PERSIST_TRANSIENT;
    s.trials = 4;
    bf_campaign *c = NULL;
    bf_error err = {0};
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "faults.target: 'kv_cache' needs attention layers"));
    assert_null(c);
    bf_model_free(m);
    bf_dataset_free(ds);
}

/* Runs plan p on the eval set's first rows (all inputs by name). */
static void feed(bf_plan *p, const bf_model *m, const bf_dataset *ds)
{
    for (size_t i = 0; i < bf_model_num_inputs(m); i++) {
        bf_tensor *in = bf_plan_input(p, i);
        const bf_tensor *src = bf_dataset_find(ds, bf_model_input(m, i)->name);
        assert_non_null(src);
        assert_true(bf_tensor_nbytes(src) >= bf_tensor_nbytes(in));
        memcpy(in->data, src->data, bf_tensor_nbytes(in));
    }
}

/* A flip of bit `bit` of entry (head, pos, dim) of site s in sample `row`:
 * logits of positions before `pos - past` of that row, and of every other
 * row, stay bit-identical; position pos - past's change (if it is a new
 * position) or, for a past position, some do. */
static void causal_case(const char *name, bf_named_site_kind kind, int layer, int64_t head, int64_t pos, int64_t dim,
                        int bit, int64_t past)
{
    fx f = load(name);
    int64_t batch = 4, row = 2;
    bf_plan *p = NULL;
    bf_error err = {0};
    if (bf_plan_create(f.m, batch, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    feed(p, f.m, f.ds);
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
    const bf_tensor *out = bf_plan_output(p, 0);   /* logits [batch, T, V] */
    assert_int_equal(out->ndim, 3);
    int64_t t = out->dims[1], v = out->dims[2];
    size_t bytes = bf_tensor_nbytes(out);
    float *golden = malloc(bytes);
    assert_non_null(golden);
    memcpy(golden, out->data, bytes);
    bf_named_site s = find_site(f.m, kind, layer);
    bf_kv_site_layout l;
    if (bf_plan_kv_site_layout(p, &s, &l, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_value_fault vf = {.value = s.value, .sample = row, .index = head * l.stride_head + pos * l.stride_pos + dim * l.stride_dim,
                         .model = BF_FAULT_BITFLIP, .mask = UINT32_C(1) << bit, .repr = BF_REPR_FP32, .scale = 1};
    if (bf_plan_set_value_faults(p, &vf, 1, &err) != BF_OK) fail_msg("%s", err.msg);
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
    const float *faulty = bf_plan_output(p, 0)->data;
    int64_t first = pos - past;   /* the first new position that reads the entry */
    int changed_at_or_after = 0;
    for (int64_t r = 0; r < batch; r++)
        for (int64_t q = 0; q < t; q++) {
            int same = memcmp(&golden[(r * t + q) * v], &faulty[(r * t + q) * v], (size_t)v * sizeof *faulty) == 0;
            if (r != row || q < first) {
                if (!same) fail_msg("%s %s.%d head %lld pos %lld bit %d: row %lld position %lld changed", name,
                                    bf_named_site_kind_name(kind), layer, (long long)head, (long long)pos, bit,
                                    (long long)r, (long long)q);
            } else {
                changed_at_or_after |= !same;
                if (q == first && same)
                    fail_msg("%s: position %lld, which reads the flipped entry first, is unchanged", name, (long long)q);
            }
        }
    assert_true(changed_at_or_after);
    free(golden);
    bf_plan_free(p);
    unload(&f);
}

/* The rule holds while what the fault makes stays finite where a later
 * layer's values are read: a NaN in position p's value of a later layer
 * reaches every position, since its probability 0 times NaN is NaN (in
 * PyTorch as in bitflip). So the last layer takes the largest flip (bit 30:
 * |x| < 2 becomes ~1e38, an infinite score, masked); earlier layers bit 29
 * (a factor 2^64 or 2^-64, finite). */
static void causality(void **state)
{
    (void)state;
    /* masked_fill exports */
    causal_case("lm_gpt2_op14", BF_SITE_K_CACHE, 0, 1, 5, 3, 29, 0);
    causal_case("lm_gpt2_op14", BF_SITE_V_CACHE, 1, 3, 9, 7, 30, 0);
    causal_case("lm_gpt2_op14", BF_SITE_K_CACHE, 1, 2, 4, 6, 30, 0);
    causal_case("lm_gpt2_op14", BF_SITE_V_CACHE, 1, 0, 0, 0, 29, 0);   /* position 0 reads its own value */
    causal_case("lm_llama_half_ri_triu_op15", BF_SITE_K_CACHE, 0, 1, 7, 2, 29, 0);
    causal_case("lm_llama_half_ri_triu_op15", BF_SITE_V_CACHE, 1, 0, 11, 5, 30, 0);
    /* with past_key_values (P = 8): a new position, and a past one (every new position reads it) */
    causal_case("lm_gpt2_kv_op15", BF_SITE_K_CACHE, 0, 2, 11, 4, 29, 8);
    causal_case("lm_gpt2_kv_op15", BF_SITE_V_CACHE, 1, 1, 3, 1, 30, 8);
    /* additive masks: causal for a flip whose scores stay finite */
    causal_case("lm_llama_il_expand_buf_op16", BF_SITE_K_CACHE, 1, 1, 6, 0, 25, 0);
    causal_case("lm_llama_kv_op17", BF_SITE_V_CACHE, 0, 0, 12, 6, 29, 8);
}

/* --- the campaign */

static bf_campaign_spec kv_spec(void)
{
    bf_campaign_spec s = tc_base_spec(6);
    s.target = BF_TARGET_KV_CACHE;
    s.persistence = BF_PERSIST_TRANSIENT;
    s.sampling = BF_SAMPLE_UNIFORM;
    s.trials = 40;
    s.seed = 9;
    s.n_tensors = 0;
    s.tensors = NULL;
    return s;
}

static bf_status create(fx *f, bf_campaign_spec *s, bf_campaign **c, bf_error *err)
{
    return bf_campaign_create(f->m, f->ds, s, c, err);
}

static void campaign_filters(void **state)
{
    (void)state;
    fx f = load("lm_llama_kv_op17");
    bf_campaign_spec s = kv_spec();
    int64_t layers[] = {1}, heads[] = {1}, positions[] = {15, 2, 9};
    s.kv = (bf_kv_filter){.layers = layers, .n_layers = 1, .heads = heads, .n_heads = 1, .positions = positions,
                          .n_positions = 3, .kinds = 2};
    bf_campaign *c = NULL;
    bf_error err = {0};
    if (create(&f, &s, &c, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_campaign_num_sites(c), 1);
    const bf_site *site = bf_campaign_site(c, 0);
    assert_string_equal(site->name, "present.1.value");
    assert_string_equal(site->site, "v_cache.1");
    assert_int_equal(site->kv_layer, 1);
    assert_int_equal(site->kv_kind, 'v');
    assert_int_equal(site->elements, 1 * 3 * 8);   /* heads x positions x dims */
    /* every cell is drawn, and only those: 40 trials over 24 cells x 32 bits */
    bf_campaign_result r = {0};
    tc_recs kept = {.r = calloc(40, sizeof *kept.r)};
    assert_non_null(kept.r);
    bf_campaign_opts o = {.threads = 1, .on_trial = tc_keep, .user = &kept};
    if (bf_campaign_run(c, &o, &r, &err) != BF_OK) fail_msg("%s", err.msg);
    int64_t n = kept.n;
    const bf_trial_record *recs = kept.r;
    assert_int_equal(n, 40);
    for (int64_t i = 0; i < n; i++) {
        int64_t h, p, d;
        assert_int_equal(recs[i].faults[0].site, 0);
        bf_site_kv_entry(site, recs[i].faults[0].index, &h, &p, &d);
        assert_int_equal(h, 1);
        assert_true(p == 2 || p == 9 || p == 15);
        assert_true(d >= 0 && d < 8);
        assert_int_equal(recs[i].faults[0].index, h * 128 + p * 8 + d);
        assert_true(recs[i].faults[0].sample >= 0);
    }
    free(kept.r);
    bf_campaign_result_free(&r);
    bf_campaign_free(c);
    unload(&f);
}

/* The differential engine against the exact one on kv_cache faults (every
 * layer, both kinds, bits that matter): the same records. */
static void campaign_differential(void **state)
{
    (void)state;
    static const char *const fixtures[] = {"lm_gpt2_op14", "lm_llama_kv_op17"};
    for (size_t i = 0; i < 2; i++) {
        fx f = load(fixtures[i]);
        bf_model *m = f.m;
        bf_dataset *ds = f.ds;
        double scale = tc_out_scale(m, ds);
        bf_campaign_spec s = kv_spec();
        s.trials = 60;
        int bits[] = {22, 26, 29, 30, 31};
        memcpy(s.positions, bits, sizeof bits);
        s.n_positions = 5;
        tc_tally t = {0};
        tc_both(m, ds, scale, fixtures[i], &s, "kv_cache", &t, NULL);
        tc_assert_agree(fixtures[i], &t, 60);
        bf_model_free(m);
        bf_dataset_free(ds);
    }
}

static void refused(fx *f, bf_campaign_spec *s, bf_status want, const char *needle)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_status st = create(f, s, &c, &err);
    if (st != want || !strstr(err.msg, needle)) fail_msg("wanted %d with '%s', got %d: %s", want, needle, st, err.msg);
    assert_null(c);
}

static void campaign_hostile(void **state)
{
    (void)state;
    fx f = load("lm_gpt2_op14");
    bf_campaign_spec s = kv_spec();
    int64_t bad_layer[] = {0, 2}, bad_head[] = {4}, bad_pos[] = {16}, dup[] = {1, 1}, neg[] = {-1};
    s.kv = (bf_kv_filter){.layers = bad_layer, .n_layers = 2};
    refused(&f, &s, BF_ERANGE, "faults.kv.layers.1: layer 2 does not exist");
    s.kv = (bf_kv_filter){.heads = bad_head, .n_heads = 1};
    refused(&f, &s, BF_ERANGE, "faults.kv.heads.0: head 4 does not exist (k_cache.0 has 4: 0..3)");
    s.kv = (bf_kv_filter){.positions = bad_pos, .n_positions = 1};
    refused(&f, &s, BF_ERANGE, "faults.kv.positions.0: position 16 does not exist");
    s.kv = (bf_kv_filter){.positions = neg, .n_positions = 1};
    refused(&f, &s, BF_ERANGE, "faults.kv.positions.0: position -1 does not exist");
    s.kv = (bf_kv_filter){.heads = dup, .n_heads = 2};
    refused(&f, &s, BF_EINVAL, "faults.kv.heads.1: head 1 is already listed");
    s.kv = (bf_kv_filter){.kinds = 4};
    refused(&f, &s, BF_EINVAL, "faults.kv.kinds");
    s.kv = (bf_kv_filter){.n_heads = 3};   /* a count and no list */
    refused(&f, &s, BF_EINVAL, "faults.kv");
    s.kv = (bf_kv_filter){.heads = bad_head, .n_heads = (size_t)BF_KV_FILTER_MAX + 1};
    refused(&f, &s, BF_ELIMIT, "faults.kv.heads");
    /* a list entry outside the filters, or past the value's elements */
    bf_fault_entry list[] = {{.tensor = "k_cache.0", .index = 8 * 0 + 32 * 3, .bit = 30, .sample = 0}};
    int64_t heads[] = {1};
    s.sampling = BF_SAMPLE_LIST;
    s.list = list;
    s.n_list = 1;
    s.kv = (bf_kv_filter){.heads = heads, .n_heads = 1};
    refused(&f, &s, BF_EINVAL, "list entry 0: index 96 of k_cache.0 is head 0, which faults.kv.heads leaves out");
    list[0].index = 512;
    refused(&f, &s, BF_ERANGE, "list entry 0: '/h.0/Split_output_1' (k_cache.0) has 512 elements per sample");
    list[0].index = 8 * 1 + 32 * 3 + 5;   /* head 1, position 3, dim 5: fine */
    bf_campaign *c = NULL;
    bf_error err = {0};
    if (create(&f, &s, &c, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_campaign_free(c);
    unload(&f);
}

/* The allocations of creating and running a kv_cache campaign failing
 * (each call path once under ASan, every 13th in release: campaign_check.h,
 * tc_alloc_plan): BF_ENOMEM each time, nothing leaked (ASan), then the full run. */
static void allocation_failures(void **state)
{
    (void)state;
    fx f = load("lm_gpt2_kv_op15");
    bf_campaign_spec s = kv_spec();
    s.trials = 4;
    int64_t heads[] = {2, 0}, positions[] = {9, 1};
    s.kv = (bf_kv_filter){.heads = heads, .n_heads = 2, .positions = positions, .n_positions = 2};
    bf_campaign_prep prep = {.differential = 1};
    long n = tc_alloc_failures(f.m, f.ds, &s, NULL, &prep, 4, 40000);
    print_message("%ld allocations in the clean run\n", n);
    assert_true(n > 10);
    unload(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layouts),
        cmocka_unit_test(no_attention),
        cmocka_unit_test(causality),
        cmocka_unit_test(campaign_filters),
        cmocka_unit_test(campaign_hostile),
        cmocka_unit_test(campaign_differential),
        cmocka_unit_test(allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
