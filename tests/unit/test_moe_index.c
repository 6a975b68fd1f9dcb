/* A Mixtral-style MoE whose experts pick their tokens by index
 * (torch.where -> h[tok] -> expert -> index_add, exported with a NonZero
 * per expert), run with static shapes: core/src/exec/fuse_moe.c rewrites
 * each expert's dispatch into bf.MoEIndexAdd (ops/moe_index_add.c). On the
 * files of tests/fixtures/make_moe_near_misses.py:
 *
 * - the export loads with no NonZero or ScatterElements left, one
 *   bf.MoEIndexAdd per expert, and gives PyTorch's logits on the eval set
 *   (at a sequence length other than the traced one) to within rounding;
 * - near misses (an expert whose rows are not independent, the weight read
 *   from another slot) are not rewritten: their NonZeros are dynamic steps
 *   (exec/plan_dyn.c) and the graph runs node by node;
 * - the NonZero's value, named as a fault site, is refused naming the node
 *   that computes it now;
 * - campaigns agree, differential and exact, trial by trial (weights,
 *   transient activation faults);
 * - every allocation failing in turn while loading (the rewrite included)
 *   is a clean BF_ENOMEM. */
#include <math.h>
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
#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "alloc_loop.h"
#include "campaign_check.h"
#include "op_harness.h"

#define MOE BF_FIXTURES "/moe/"


static bf_model *load(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, MOE "%s.onnx", name);
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_file(path, &m, &err) != BF_OK) fail_msg("%s: %s", name, err.msg);
    return m;
}


static void export_gives_pytorch_logits(void **state)
{
    (void)state;
    bf_model *m = load("moe_classifier_op17");
    assert_int_equal(th_count_op(m, "bf.MoEIndexAdd"), 4);
    assert_int_equal(th_count_op(m, "NonZero") + th_count_op(m, "ScatterElements"), 0);
    bf_dataset *ds = NULL, *ref = NULL;
    bf_error err = {0};
    if (bf_dataset_load_file(MOE "moe_classifier_op17.eval.safetensors", &ds, &err) ||
        bf_dataset_load_file(MOE "moe_classifier_op17.torch.safetensors", &ref, &err))
        fail_msg("%s", err.msg);
    const bf_tensor *x = bf_dataset_find(ds, "x"), *want = bf_dataset_find(ref, "logits");
    assert_non_null(x);
    assert_non_null(want);
    bf_plan *p = NULL;
    if (th_plan_for(m, x->dims, 3, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_tensor *in = bf_plan_input(p, 0);
    assert_int_equal(bf_tensor_numel(in), bf_tensor_numel(x));
    memcpy(in->data, x->data, (size_t)bf_tensor_numel(x) * sizeof(float));
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
    const bf_tensor *y = bf_plan_output(p, 0);
    assert_int_equal(bf_tensor_numel(y), bf_tensor_numel(want));
    const float *yd = y->data, *wd = want->data;
    /* the MoE's rows are PyTorch's bit for bit (conformance_lm checks that on
     * the LM); the pooling and head after it, as everywhere, to rounding */
    for (int64_t i = 0; i < bf_tensor_numel(y); i++)
        if (!(fabsf(yd[i] - wd[i]) <= 1e-6f * (1.0f + fabsf(wd[i]))))
            fail_msg("logits[%lld] = %.9g, PyTorch %.9g", (long long)i, yd[i], wd[i]);
    /* the NonZero is gone: its value as a fault site names the node computing it now */
    bf_value_fault f = {.value = bf_model_find_value(m, "/moe/NonZero_output_0"), .sample = 0, .index = 0,
                        .model = BF_FAULT_BITFLIP, .mask = 1, .repr = BF_REPR_FP32};
    assert_true(f.value >= 0);
    assert_int_not_equal(bf_plan_set_value_faults(p, &f, 1, &err), BF_OK);
    assert_non_null(strstr(err.msg, "bf.MoEIndexAdd"));
    bf_plan_free(p);
    bf_model_free(m);
    bf_dataset_free(ds);
    bf_dataset_free(ref);
}

static void near_misses_run_as_dynamic_steps(void **state)
{
    (void)state;
    static const char *const files[] = {"near_cross_token_op17", "near_slot0_op17"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        bf_model *m = load(files[f]);
        assert_int_equal(th_count_op(m, "bf.MoEIndexAdd"), 0);
        assert_int_equal(th_count_op(m, "NonZero"), 4);
        bf_plan *p = NULL;
        bf_error err = {0};
        /* not rewritten: each NonZero, and what reads it, is prepared on
         * every run (exec/plan_dyn.c), and the graph runs node by node */
        if (th_plan_for(m, (int64_t[]){2, 3, 8}, 3, &p, &err) != BF_OK) fail_msg("%s: %s", files[f], err.msg);
        bf_tensor *in = bf_plan_input(p, 0);
        float *x = in->data;
        for (int64_t i = 0; i < bf_tensor_numel(in); i++) x[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
        if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s: %s", files[f], err.msg);
        const bf_tensor *y = bf_plan_output(p, 0);
        assert_int_equal(y->dims[0], 2);
        for (int64_t i = 0; i < bf_tensor_numel(y); i++) assert_true(isfinite(((const float *)y->data)[i]));
        bf_plan_free(p);
        bf_model_free(m);
    }
}

/* Campaigns on the classifier (its sequence axis fixed at the eval set's
 * length): the differential engine agrees with the exact one trial by trial
 * (test_diff.c's rules), for weight faults (the experts' included) and
 * transient activation faults anywhere a sample leads (the MoE's own values
 * are [batch * seq, d]: no sample axis, no activation site). */
static void campaigns_agree_differential_and_exact(void **state)
{
    (void)state;
    bf_model *base = NULL, *m = NULL;
    bf_dataset *ds = NULL;
    tc_open_fixed(MOE "moe_classifier_op17", (const char *[]){"seq"}, (const char *[]){"x"}, 1, &base, &m, &ds);
    double scale = tc_out_scale(m, ds);
    tc_tally t = {0};
    bf_campaign_spec s = tc_base_spec(5);
    s.seed = 3;
    s.trials = 140;
    tc_both(m, ds, scale, "moe_classifier", &s, "weight bit flips, batch 5", &t, NULL);
    s = tc_base_spec(4);
    s.seed = 12;
    s.trials = 80;
    s.target = BF_TARGET_ACTIVATIONS;
    s.persistence = BF_PERSIST_TRANSIENT;
    tc_both(m, ds, scale, "moe_classifier", &s, "transient activation faults, batch 4", &t, NULL);
    tc_assert_agree("MoE by index, differential vs exact", &t, 200);
    bf_model_free(m);
    bf_model_free(base);
    bf_dataset_free(ds);
}

/* Loading the MoE classifier, whose MoE blocks fuse to bf.MoEIndexAdd. */
static bf_status load_moe(const unsigned char *buf, size_t len, const char *name, bf_error *err)
{
    bf_model *m = NULL;
    bf_status st = bf_model_load_buffer(buf, len, name, &m, err);
    if (st == BF_OK) assert_int_equal(th_count_op(m, "bf.MoEIndexAdd"), 4);
    bf_model_free(m);
    return st;
}

static void allocation_failures_are_clean(void **state)
{
    (void)state;
    th_alloc_failures_loading(MOE "moe_classifier_op17.onnx", 20000, load_moe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(export_gives_pytorch_logits),
        cmocka_unit_test(near_misses_run_as_dynamic_steps),
        cmocka_unit_test(campaigns_agree_differential_and_exact),
        cmocka_unit_test(allocation_failures_are_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
