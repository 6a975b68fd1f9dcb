/* Parameter-only values (core/src/diff/dxparam.c) on the GPT-2 fixture
 * tests/fixtures/lm/lm_gpt2_op14: its logits read the tied token table
 * through Transpose(wte.weight) and every Linear reads Transpose(W), values
 * the differential engine computes once and never re-runs; a fault in wte
 * or W is written as one element into the worker's private view of the
 * transposed copy and taken back after the trial.
 *
 * What must hold: the campaign reports the values it holds (at least the
 * transposed table's bytes), and every trial's record, metrics to the bit,
 * equals the exact engine's (docs/ENGINE.md: a differential trial equals a
 * full run bit for bit): faults in wte, listed (sign, exponent and
 * mantissa bits, rows at both ends of the table, a batch that divides the
 * 24 sequences and one that leaves a partial batch), one after another on
 * the same workers, so a view not put back would show in the trials after
 * it; then uniform faults over every weight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "campaign_check.h"

#define FIX BF_FIXTURES "/lm/lm_gpt2_op14"

typedef struct fixture {
    tc_loaded l;   /* first: tc_group_close frees the fixture */
    size_t wte_bytes;
    int64_t wte_numel;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    bf_error err = {0};
    /* the sequence axis is symbolic: sized from the eval set */
    if (bf_model_load_file(FIX ".onnx", &f->l.m, &err) != BF_OK ||
        bf_dataset_load_file(FIX ".eval.safetensors", &f->l.ds, &err) != BF_OK ||
        bf_model_bind_dims(&f->l.m, f->l.ds, &err) != BF_OK)
        fail_msg("%s", err.msg);
    for (size_t q = 0; q < bf_model_num_params(f->l.m); q++) {
        const bf_tensor *t = bf_model_param(f->l.m, q)->tensor;
        if (strcmp(t->name, "wte.weight") == 0) {
            f->wte_bytes = bf_tensor_nbytes(t);
            f->wte_numel = bf_tensor_numel(t);
        }
    }
    assert_true(f->wte_numel > 0);
    *state = f;
    return 0;
}

/* Runs s exact and differential (2 threads each); every record must be the
 * same, and the differential run must hold at least min_bytes of
 * parameter-only values. */
static void same_records(const fixture *f, const bf_campaign_spec *s, size_t min_bytes)
{
    tc_recs r[2] = {{0}};
    for (int exact = 1; exact >= 0; exact--) {
        bf_campaign *c = tc_make(f->l.m, f->l.ds, s);
        r[exact].r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *r[exact].r);
        assert_non_null(r[exact].r);
        bf_campaign_opts o = {.threads = 2, .exact = exact, .on_trial = tc_keep, .user = &r[exact]};
        bf_campaign_result res;
        bf_error err = {0};
        if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s", err.msg);
        assert_int_equal(res.trials_done, r[exact].n);
        if (!exact) assert_true(res.param_bytes >= min_bytes);
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
    }
    assert_int_equal(r[0].n, r[1].n);
    for (int64_t i = 0; i < r[0].n; i++) tc_assert_same_record(&r[1].r[i], &r[0].r[i]);
    free(r[0].r);
    free(r[1].r);
}

static bf_campaign_spec lm_spec(int64_t batch)
{
    bf_campaign_spec s = tc_base_spec(batch);
    s.metrics = 1u << BF_METRIC_PERPLEXITY | 1u << BF_METRIC_TOKEN_ACCURACY;
    return s;
}

static void tied_table_faults_match_exact(void **state)
{
    const fixture *f = *state;
    const int64_t index[] = {0, 5, f->wte_numel / 2 + 3, f->wte_numel - 1};
    static const int bits[] = {31, 30, 23, 2};
    bf_fault_entry list[16];
    size_t n = 0;
    for (size_t i = 0; i < sizeof index / sizeof *index; i++)
        for (size_t k = 0; k < sizeof bits / sizeof *bits; k++)
            list[n++] = (bf_fault_entry){.tensor = "wte.weight", .index = index[i], .bit = bits[k], .sample = -1};
    static const int64_t batches[] = {4, 5};   /* 24 sequences: 6 batches, or 5 with a partial last one */
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
        bf_campaign_spec s = lm_spec(batches[b]);
        s.sampling = BF_SAMPLE_LIST;
        s.list = list;
        s.n_list = n;
        same_records(f, &s, f->wte_bytes);
    }
}

static void uniform_weight_faults_match_exact(void **state)
{
    const fixture *f = *state;
    bf_campaign_spec s = lm_spec(5);
    s.seed = 11;
    s.trials = 40;
    same_records(f, &s, f->wte_bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tied_table_faults_match_exact),
        cmocka_unit_test(uniform_weight_faults_match_exact),
    };
    return cmocka_run_group_tests(tests, setup, tc_group_close);
}
