/* Fault groups as a document says them (docs/CAMPAIGNS.md, "Fault
 * groups"): a one-group list is a spelling of the object form, so their
 * campaigns give the same records bit for bit; a two-group list gives the
 * records of the C struct it stands for; every record's JSON says each
 * fault's group and names the tensor from that group's sites. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "bitflip/api/result.h"
#include "bitflip/api/spec.h"
#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"

#define FIX BF_FIXTURES "/conformance/"

typedef struct recs {
    int64_t n;
    bf_trial_record r[64];
} recs;

static void keep(void *user, const bf_trial_record *rec)
{
    recs *k = user;
    if (rec->trial >= 0 && rec->trial < 64) k->r[rec->trial] = *rec;
    k->n++;
}

static void run(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, recs *k, bf_campaign **keep_c)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    if (bf_campaign_create(m, ds, s, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    bf_campaign_result res;
    bf_campaign_opts o = {.threads = 2, .on_trial = keep, .user = k};
    memset(k, 0, sizeof *k);
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    bf_campaign_result_free(&res);
    if (keep_c) *keep_c = c;
    else bf_campaign_free(c);
}

/* Two records the same, bit for bit, in every field a run gives. */
static void same(const bf_trial_record *a, const bf_trial_record *b)
{
    assert_int_equal(a->trial, b->trial);
    assert_int_equal(a->outcome, b->outcome);
    assert_int_equal(a->rate_index, b->rate_index);
    assert_int_equal(a->n_faults, b->n_faults);
    assert_int_equal(a->n_kept, b->n_kept);
    assert_int_equal(a->changed, b->changed);
    assert_memory_equal(a->metrics, b->metrics, sizeof a->metrics);
    for (int i = 0; i < a->n_kept; i++) {
        const bf_applied_fault *x = &a->faults[i], *y = &b->faults[i];
        assert_int_equal(x->site, y->site);
        assert_int_equal(x->index, y->index);
        assert_int_equal(x->sample, y->sample);
        assert_int_equal(x->mask, y->mask);
        assert_int_equal(x->group, y->group);
        assert_memory_equal(&x->old_value, &y->old_value, sizeof x->old_value);
        assert_memory_equal(&x->new_value, &y->new_value, sizeof x->new_value);
    }
}

static void parse(const char *json, bf_campaign_spec *s)
{
    bf_spec_problems pr = {0};
    if (bf_spec_parse(json, strlen(json), s, &pr) != BF_OK)
        fail_msg("%s: %s", pr.count ? pr.items[0].pointer : "?", pr.count ? pr.items[0].message : "?");
    bf_spec_problems_free(&pr);
}

static void list_form(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_model_load_file(FIX "demo_digits.onnx", &m, &err) ||
        bf_dataset_load_file(FIX "demo_digits.eval.safetensors", &ds, &err))
        fail_msg("fixture: %s", err.msg);
    static const char *const pairs[][2] = {
        {"{\"model\": \"m\", \"dataset\": \"d\", \"seed\": 5, \"batch\": 64, \"faults\": {\"model\": \"ber\", \"rate\": 1e-4}}",
         "{\"model\": \"m\", \"dataset\": \"d\", \"seed\": 5, \"batch\": 64, \"faults\": [{\"model\": \"ber\", \"rate\": 1e-4}]}"},
        {"{\"model\": \"m\", \"dataset\": \"d\", \"seed\": 9, \"trials\": 20, \"faults\": {\"bits\": 2, \"positions\": [29, 30, 31]}}",
         "{\"model\": \"m\", \"dataset\": \"d\", \"seed\": 9, \"trials\": 20, \"faults\": [{\"bits\": 2, \"positions\": [29, 30, 31]}]}"},
    };
    recs *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    for (size_t p = 0; p < 2; p++) {
        bf_campaign_spec so = {0}, sl = {0};
        parse(pairs[p][0], &so);
        parse(pairs[p][1], &sl);
        run(m, ds, &so, a, NULL);
        run(m, ds, &sl, b, NULL);
        assert_true(a->n > 0);
        assert_int_equal(a->n, b->n);
        for (int64_t t = 0; t < a->n; t++) same(&a->r[t], &b->r[t]);
        bf_campaign_spec_free(&so);
        bf_campaign_spec_free(&sl);
    }

    /* two groups in JSON: the C struct's campaign, and JSON records with groups */
    bf_campaign_spec sj = {0};
    parse("{\"model\": \"m\", \"dataset\": \"d\", \"seed\": 3, \"trials\": 12, "
          "\"faults\": [{\"model\": \"stuck_at_1\", \"positions\": [30]}, "
          "{\"tensors\": [\"*\"], \"persistence\": \"transient\", \"representation\": \"bf16\", \"positions\": [14]}]}",
          &sj);
    static char *all[] = {"*"};
    bf_fault_group g = {.target = BF_TARGET_ACTIVATIONS, .tensors = all, .n_tensors = 1, .model_kind = BF_FAULT_BITFLIP,
                        .bits = 1, .positions = {14}, .n_positions = 1, .repr = BF_REPR_BF16,
                        .persistence = BF_PERSIST_TRANSIENT};
    bf_campaign_spec sc = {.seed = 3, .trials = 12, .target = BF_TARGET_WEIGHTS, .tensors = all, .n_tensors = 1,
                           .model_kind = BF_FAULT_STUCK_AT_1, .bits = 1, .positions = {30}, .n_positions = 1,
                           .repeats = 1, .critical_metric = -1, .groups = &g, .n_groups = 1};
    bf_campaign *cj = NULL;
    run(m, ds, &sj, a, &cj);
    run(m, ds, &sc, b, NULL);
    assert_int_equal(a->n, 12);
    for (int64_t t = 0; t < a->n; t++) {
        same(&a->r[t], &b->r[t]);
        assert_int_equal(a->r[t].n_kept, 2);
        assert_int_equal(a->r[t].faults[1].mask, 1u << 14);   /* bf16 bit 14: the exponent's top bit */
        json_t *j = bf_trial_to_json(cj, &sj, &a->r[t]);
        json_t *f = json_object_get(j, "faults");
        assert_int_equal(json_array_size(f), 2);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(f, 0), "group")), 0);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(f, 1), "group")), 1);
        const bf_site *site = bf_campaign_group_site(cj, 1, (size_t)a->r[t].faults[1].site);
        assert_string_equal(json_string_value(json_object_get(json_array_get(f, 1), "tensor")), site->name);
        assert_non_null(json_object_get(json_array_get(f, 1), "sample"));
        json_decref(j);
    }
    bf_campaign_free(cj);
    bf_campaign_spec_free(&sj);
    free(a);
    free(b);
    bf_model_free(m);
    bf_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(list_form)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
