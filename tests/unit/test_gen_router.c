/* --act-flip on a MoE router's logits (issue 30): Mixtral-style dispatch
 * computes them on the tokens flattened across the batch, [B*T, E], with no
 * sample axis. A generator's plans take a value fault there (plan_impl.h,
 * flat_rows), prompt p being rows p*T .. p*T+T-1 (batch-major, as a reshape
 * of [B, T, E] gives). Checked on both MoE fixtures of tests/fixtures/lm: a
 * fault on one prompt, run with every prompt in one batch, gives the tokens
 * the same fault gives when that prompt runs alone (batch 1, where the
 * slice is the whole tensor): a wrong row offset would strike another
 * prompt, or the right one at the wrong token. Only that prompt's tokens
 * change. Campaigns keep refusing the value as an activation site (the
 * differential engine's rows are samples). */
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

#define M 4

static int64_t *gen(const bf_model *m, const bf_tensor *ids, int64_t batch, const bf_gen_value_fault *vf)
{
    bf_error err = {0};
    bf_generator *g = NULL;
    bf_gen_opts o = {.new_tokens = M, .batch = batch};
    if (bf_generator_create(m, ids, &o, &g, &err) != BF_OK) fail_msg("%s", err.msg);
    int64_t *t = calloc((size_t)(bf_generator_prompts(g) * M), sizeof *t);
    assert_non_null(t);
    bf_gen_faults f = {.values = vf, .n_values = vf ? 1 : 0};
    if (bf_generator_run(g, vf ? &f : NULL, t, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_generator_free(g);
    return t;
}

static void router_in(const char *stem)
{
    char path[512], data[512];
    snprintf(path, sizeof path, BF_FIXTURES "/lm/%s.onnx", stem);
    snprintf(data, sizeof data, BF_FIXTURES "/lm/%s.eval.safetensors", stem);
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_model_load_file(path, &m, &err) || bf_dataset_load_file(data, &ds, &err)) fail_msg("%s", err.msg);
    const bf_tensor *ids = bf_dataset_find(ds, "input_ids");
    int64_t n = ids->dims[0], T = ids->dims[1];
    int64_t v = bf_model_named_site_value(m, "router_logits.0");
    assert_true(v >= 0);
    int64_t *golden = gen(m, ids, 0, NULL);
    /* E: one prompt's slice is [T, E], so the largest index a fault takes is T*E - 1 */
    int64_t E = 0;
    {
        bf_generator *g = NULL;
        bf_gen_opts o = {.new_tokens = 1, .batch = 1};
        assert_int_equal(bf_generator_create(m, ids, &o, &g, &err), BF_OK);
        bf_gen_value_fault probe = {.fault = {.value = v, .sample = 0, .model = BF_FAULT_BITFLIP, .mask = 1,
                                              .repr = BF_REPR_FP32}};
        bf_gen_faults f = {.values = &probe, .n_values = 1};
        for (E = 1; E < 1024; E++) {
            probe.fault.index = T * E;
            if (bf_generator_check(g, &f, &err) != BF_OK) break;
        }
        assert_non_null(strstr(err.msg, "does not exist"));
        bf_generator_free(g);
    }
    assert_true(E >= 2 && E < 1024);
    int changed = 0, tried = 0;
    /* prompts 0, 5 and the last; the last token (whose logits step 0 decodes from) and the first; every expert */
    const int64_t prompts[] = {0, 5, n - 1}, tokens[] = {T - 1, 0};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++)
            for (int64_t e = 0; e < E; e++) {
                bf_gen_value_fault vf = {.step = 0,
                                         .fault = {.value = v, .sample = prompts[a], .index = tokens[b] * E + e,
                                                   .model = BF_FAULT_BITFLIP, .mask = UINT32_C(1) << 30,
                                                   .repr = BF_REPR_FP32}};
                int64_t *all = gen(m, ids, 0, &vf), *alone = gen(m, ids, 1, &vf);
                for (int64_t r = 0; r < n; r++)
                    for (int64_t s = 0; s < M; s++) {
                        assert_int_equal(all[r * M + s], alone[r * M + s]);
                        if (r != prompts[a]) assert_int_equal(all[r * M + s], golden[r * M + s]);
                    }
                changed += memcmp(all, golden, (size_t)(n * M) * sizeof *all) != 0;
                tried++;
                free(all);
                free(alone);
            }
    printf("%s: %d of %d router faults changed their prompt's tokens\n", stem, changed, tried);
    assert_true(changed >= 3);

    /* a campaign's activation sites keep the sample on dim 0 */
    assert_int_equal(bf_model_bind_dims(&m, ds, &err), BF_OK);
    bf_fault_entry e = {.tensor = "router_logits.0", .index = 0, .bit = 30, .sample = -1};
    bf_campaign_spec s = tc_base_spec(0);
    s.target = BF_TARGET_ACTIVATIONS;
    s.sampling = BF_SAMPLE_LIST;
    s.list = &e;
    s.n_list = 1;
    bf_campaign *c = NULL;
    assert_int_not_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_OK);
    printf("campaign: %s\n", err.msg);
    assert_null(c);
    free(golden);
    bf_model_free(m);
    bf_dataset_free(ds);
}

static void router_faults(void **state)
{
    (void)state;
    router_in("lm_moe_scatter_op14");
    router_in("lm_moe_index_tril_op17");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(router_faults)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
