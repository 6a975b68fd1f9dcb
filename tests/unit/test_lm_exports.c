/* A decoder-only language model as users export it (tests/fixtures/
 * lm_exports/llama_kv_op14, by make_lm_exports.py: a small Llama with
 * grouped-query attention by repeat_interleave and a KV cache, dynamic batch
 * and sequence axes) run with an empty cache (past length 0, inputs with no
 * element), its symbolic dims sized from the eval set (bf_plan_dims_from,
 * bf_model_with_dims):
 *
 * - a plan feeds the empty cache and returns the present keys and values
 *   of the 4 new positions;
 * - fault campaigns, differential and exact, agree trial by trial
 *   (test_diff.c's rules) for weight faults and for transient activation
 *   faults anywhere, the empty cache inputs among the values of the graph.
 * The model's outputs against PyTorch's are ops cases (tests/ops/cases/lm.py). */
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
#include "bitflip/plan.h"
#include "campaign_check.h"

#define LM BF_FIXTURES "/lm_exports/llama_kv_op14"

typedef struct fixture {
    bf_model *base, *m;
    bf_dataset *ds;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    bf_error err = {0};
    if (bf_model_load_file(LM ".onnx", &f->base, &err) || bf_dataset_load_file(LM ".eval.safetensors", &f->ds, &err))
        fail_msg("%s", err.msg);
    const int64_t *shapes[8];
    int nd[8];
    size_t n_in = bf_model_num_inputs(f->base), n = 0;
    assert_true(n_in <= 8);
    for (size_t i = 0; i < n_in; i++) {
        const bf_tensor *t = bf_dataset_find(f->ds, bf_model_input(f->base, i)->name);
        assert_non_null(t);
        shapes[i] = t->dims;
        nd[i] = t->ndim;
    }
    const char *names[16];
    int64_t sizes[16];
    if (bf_plan_dims_from(f->base, shapes, nd, names, sizes, 16, &n, &err) ||
        bf_model_with_dims(f->base, names, sizes, n, &f->m, &err))
        fail_msg("%s", err.msg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    bf_model_free(f->m);
    bf_model_free(f->base);
    bf_dataset_free(f->ds);
    free(f);
    return 0;
}

static void empty_cache_runs(void **state)
{
    const fixture *f = *state;
    bf_plan *p = NULL;
    bf_error err = {0};
    if (bf_plan_create(f->m, 3, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_model_num_inputs(f->m), 3);
    assert_int_equal(bf_tensor_numel(bf_plan_input(p, 1)), 0);   /* [3, 2, 0, 2] */
    memset(bf_plan_input(p, 0)->data, 0, bf_tensor_nbytes(bf_plan_input(p, 0)));
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
    const bf_tensor *logits = bf_plan_output(p, 0), *key = bf_plan_output(p, 1);
    assert_int_equal(logits->ndim, 3);
    assert_int_equal(logits->dims[1], 4);
    assert_int_equal(logits->dims[2], 16);
    assert_int_equal(key->ndim, 4);
    assert_int_equal(key->dims[1], 2);
    assert_int_equal(key->dims[2], 4);
    bf_plan_free(p);
}

static void campaigns_agree_differential_and_exact(void **state)
{
    const fixture *f = *state;
    double scale = tc_out_scale(f->m, f->ds);
    tc_tally t = {0};
    bf_campaign_spec s = tc_base_spec(4);
    s.seed = 3;
    s.trials = 60;
    tc_both(f->m, f->ds, scale, "llama_kv", &s, "weight bit flips, batch 4", &t, NULL);
    s = tc_base_spec(4);
    s.seed = 5;
    s.trials = 60;
    s.target = BF_TARGET_ACTIVATIONS;
    s.persistence = BF_PERSIST_TRANSIENT;
    tc_both(f->m, f->ds, scale, "llama_kv", &s, "transient activation bit flips, batch 4", &t, NULL);
    tc_assert_agree("KV-cache Llama, past length 0, differential vs exact", &t, 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_cache_runs),
        cmocka_unit_test(campaigns_agree_differential_and_exact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
