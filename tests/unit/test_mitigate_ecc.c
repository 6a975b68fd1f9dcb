/* The "ecc" mitigation on campaigns (bitflip/mitigate.h, campaign_ecc.c),
 * on the DLRM and MLP fixtures:
 *
 * - every single-bit weight fault, in every representation (fp32, fp16,
 *   bf16, int8) and at every bit position, is corrected: 100% masked,
 *   where the unprotected model is not;
 * - two flipped bits in one value are two errors in one word: every such
 *   trial is DUE, and its record lists the fault as drawn;
 * - three flipped bits in one fp32 value: the trial is DUE exactly when
 *   the syndrome (computed here from H rebuilt from Hsiao's definition,
 *   with the value's bits at (index mod 2) * 32 + bit of its word) is no
 *   column of H, and otherwise the value is left wrong (miscorrected: a
 *   fourth bit flipped, never one of the three);
 * - BER at 1e-3: some trials DUE; each record pairs with the unprotected
 *   model's (the same faults drawn: site, element, mask, stored value);
 * - the multi-bit upsets of campaign_mbu.c, against the code: two adjacent
 *   bits of one 64-bit word (a burst, which may span two fp32 values) are a
 *   double error, so every trial is DUE; the same bit in 4 neighbouring
 *   words is one error per word, so every trial is corrected (masked),
 *   where the unprotected model is hurt by both;
 * - differential and exact runs agree trial by trial;
 * - the storage cost is 8 check bits per word: sum over the tensors of 8 *
 *   ceil(n / k) (k values per word) over sum of n * m bits;
 * - setup errors name the culprit: activations, check_bits_faulty with a
 *   single-bit model, tensors that match nothing;
 * - allocations failing (campaign_check.h's tc_alloc_plan) are reported,
 *   and nothing leaks. */
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
#include "bitflip/model.h"
#include "campaign_check.h"

static bf_campaign_spec weight_spec(int64_t trials)
{
    return tc_all_weights_spec(1234, trials);
}

static bf_mitigation ecc_mit(void)
{
    bf_mitigation m = {.name = "ecc"};
    m.ecc.enabled = 1;
    return m;
}

static const char *fxs[] = {"dlrm_ops_op13", "mlp_ops_op13"};

static void single_bits_corrected(void **state)
{
    (void)state;
    static const bf_repr reprs[] = {BF_REPR_FP32, BF_REPR_FP16, BF_REPR_BF16, BF_REPR_INT8};
    bf_mitigation ecc = ecc_mit();
    for (size_t f = 0; f < sizeof fxs / sizeof *fxs; f++) {
        tc_loaded l = tc_conformance(fxs[f]);
        for (size_t k = 0; k < sizeof reprs / sizeof *reprs; k++) {
            bf_campaign_spec s = weight_spec(bf_repr_bits(reprs[k]) * 8);
            s.repr = reprs[k];
            s.sampling = BF_SAMPLE_PER_BIT;
            bf_campaign_result r0, r;
            bf_campaign *c0 = tc_run_mitigated(&l, &s, NULL, 0, NULL, &r0), *c = tc_run_mitigated(&l, &s, &ecc, 0, NULL, &r);
            assert_true(r0.total.n[BF_OUTCOME_MASKED] < r0.trials_done);   /* unprotected, they matter */
            if (r.total.n[BF_OUTCOME_MASKED] != r.trials_done)
                fail_msg("%s %s: %lld of %lld single-bit faults not masked under ecc", fxs[f], bf_repr_name(reprs[k]),
                         (long long)(r.trials_done - r.total.n[BF_OUTCOME_MASKED]), (long long)r.trials_done);
            for (int b = 0; b < bf_repr_bits(reprs[k]); b++) assert_int_equal(r.by_bit[b].n[BF_OUTCOME_MASKED], 8);
            bf_campaign_result_free(&r0);
            bf_campaign_result_free(&r);
            bf_campaign_free(c0);
            bf_campaign_free(c);
        }
        tc_unload(&l);
    }
}

static void double_in_value_due(void **state)
{
    (void)state;
    bf_mitigation ecc = ecc_mit();
    tc_loaded l = tc_conformance("dlrm_ops_op13");
    bf_campaign_spec s = weight_spec(200);
    s.bits = 2;
    tc_recs a, b;
    bf_campaign_result r0, r;
    bf_campaign *c0 = tc_run_mitigated(&l, &s, NULL, 0, &a, &r0), *c = tc_run_mitigated(&l, &s, &ecc, 0, &b, &r);
    assert_int_equal(r.total.n[BF_OUTCOME_DUE], r.trials_done);
    for (int64_t i = 0; i < a.n; i++) {
        assert_int_equal(b.r[i].n_kept, 1);
        assert_int_equal(a.r[i].faults[0].site, b.r[i].faults[0].site);
        assert_int_equal(a.r[i].faults[0].index, b.r[i].faults[0].index);
        assert_int_equal(a.r[i].faults[0].mask, b.r[i].faults[0].mask);
    }
    /* by tensor: every trial counted where its fault was */
    int64_t by_site = 0;
    for (size_t k = 0; k < r.n_sites; k++) by_site += r.by_site[k].n[BF_OUTCOME_DUE];
    assert_int_equal(by_site, r.trials_done);
    free(a.r);
    free(b.r);
    bf_campaign_result_free(&r0);
    bf_campaign_result_free(&r);
    bf_campaign_free(c0);
    bf_campaign_free(c);
    tc_unload(&l);
}

/* H from Hsiao's definition, as test_ecc.c's reference: weight-3 columns in
 * lexicographic order of rows, 8 cyclic runs of 5 rows, the identity. */
static void hsiao_columns(uint8_t col[72])
{
    int j = 0;
    for (int a = 0; a < 8; a++)
        for (int b = a + 1; b < 8; b++)
            for (int c = b + 1; c < 8; c++) col[j++] = (uint8_t)(1u << a | 1u << b | 1u << c);
    for (int k = 0; k < 8; k++) {
        unsigned m = 0;
        for (int r = 0; r < 5; r++) m |= 1u << ((k + r) & 7);
        col[j++] = (uint8_t)m;
    }
    for (int i = 0; i < 8; i++) col[j++] = (uint8_t)(1u << i);
}

static void triples_by_syndrome(void **state)
{
    (void)state;
    uint8_t col[72];
    hsiao_columns(col);
    bf_mitigation ecc = ecc_mit();
    tc_loaded l = tc_conformance("dlrm_ops_op13");
    bf_campaign_spec s = weight_spec(400);
    s.bits = 3;
    tc_recs b;
    bf_campaign_result r;
    bf_campaign *c = tc_run_mitigated(&l, &s, &ecc, 0, &b, &r);
    int64_t due = 0, wrong = 0;
    for (int64_t i = 0; i < b.n; i++) {
        const bf_applied_fault *f = &b.r[i].faults[0];
        uint8_t syn = 0;
        for (int bit = 0; bit < 32; bit++)
            if (f->mask >> bit & 1) syn ^= col[(f->index % 2) * 32 + bit];
        int is_col = 0;
        for (int j = 0; j < 72; j++) is_col |= col[j] == syn;
        if (!is_col) {
            assert_int_equal(b.r[i].outcome, BF_OUTCOME_DUE);
            assert_true(b.r[i].metrics[BF_METRIC_MAX_ABS] == 0);   /* a detection: golden's outputs */
            due++;
        } else {
            /* miscorrected: the value stays wrong; DUE only through the
             * outputs (NaN or Inf: a detection's metrics are golden's) */
            assert_true(memcmp(&f->old_value, &f->new_value, sizeof(float)) != 0);
            if (b.r[i].outcome == BF_OUTCOME_DUE) {
                double m = b.r[i].metrics[BF_METRIC_MAX_ABS];
                printf("trial %lld: miscorrected to %g (was %g), DUE by its outputs (max deviation %g)\n", (long long)i,
                       f->new_value, f->old_value, m);
                assert_true(!(m == 0));
            }
            wrong++;
        }
    }
    printf("triple errors in one fp32 value: %lld detected, %lld miscorrected\n", (long long)due, (long long)wrong);
    assert_true(due > 0 && wrong > 0);
    free(b.r);
    bf_campaign_result_free(&r);
    bf_campaign_free(c);
    tc_unload(&l);
}

static void ber_paired_and_due(void **state)
{
    (void)state;
    static double rates[] = {1e-5, 1e-3};
    bf_mitigation cfg[2] = {ecc_mit(), ecc_mit()};
    cfg[1].name = "ecc-clean-check";
    cfg[1].ecc.check_bits_faulty = BF_ECC_CHECK_CLEAN;
    tc_loaded l = tc_conformance("dlrm_ops_op13");
    bf_campaign_spec s = weight_spec(0);
    s.model_kind = BF_FAULT_BER;
    s.rates = rates;
    s.n_rates = 2;
    s.repeats = 30;
    tc_recs base;
    bf_campaign_result r0;
    bf_campaign *c0 = tc_run_mitigated(&l, &s, NULL, 0, &base, &r0);
    for (int k = 0; k < 2; k++) {
        tc_recs x;
        bf_campaign_result r;
        bf_campaign *c = tc_run_mitigated(&l, &s, &cfg[k], 0, &x, &r);
        assert_int_equal(x.n, base.n);
        for (int64_t i = 0; i < x.n; i++) {
            const bf_trial_record *p = &base.r[i], *q = &x.r[i];
            assert_int_equal(p->n_faults, q->n_faults);
            assert_int_equal(p->n_kept, q->n_kept);
            for (int j = 0; j < p->n_kept; j++) {
                assert_int_equal(p->faults[j].site, q->faults[j].site);
                assert_int_equal(p->faults[j].index, q->faults[j].index);
                assert_int_equal(p->faults[j].mask, q->faults[j].mask);
                assert_memory_equal(&p->faults[j].old_value, &q->faults[j].old_value, sizeof(float));
            }
            /* one flipped data bit and nothing else can only be corrected
             * (a check-bit flip in the same word is the only way to a DUE) */
            if (k == 1 && p->n_faults <= 1) assert_int_equal(q->outcome, BF_OUTCOME_MASKED);
        }
        printf("%s: DUE at 1e-5 %lld, at 1e-3 %lld of %lld; unprotected not masked at 1e-3: %lld\n", cfg[k].name,
               (long long)r.by_rate[0].n[BF_OUTCOME_DUE], (long long)r.by_rate[1].n[BF_OUTCOME_DUE], (long long)s.repeats,
               (long long)(s.repeats - r0.by_rate[1].n[BF_OUTCOME_MASKED]));
        assert_true(r.by_rate[1].n[BF_OUTCOME_DUE] > 0);
        free(x.r);
        bf_campaign_result_free(&r);
        bf_campaign_free(c);
    }
    free(base.r);
    bf_campaign_result_free(&r0);
    bf_campaign_free(c0);
    tc_unload(&l);
}

/* Word bursts and column upsets (campaign_mbu.c) meet SECDED as the code's
 * definition says they must: a 2-bit burst inside one word is detected in
 * every trial, a column of single bits over 4 words is corrected in every
 * trial. Both hurt the unprotected model, so the test can fail. */
static void upsets_in_words(void **state)
{
    (void)state;
    bf_mitigation ecc = ecc_mit();
    tc_loaded l = tc_conformance("mlp_ops_op13");
    for (int kind = 0; kind < 2; kind++) {
        bf_campaign_spec s = weight_spec(300);
        if (kind == 0) s.burst = BF_BURST_WORD, s.bits = 2;
        else s.words = 4;
        bf_campaign_result r0, r;
        bf_campaign *c0 = tc_run_mitigated(&l, &s, NULL, 0, NULL, &r0), *c = tc_run_mitigated(&l, &s, &ecc, 0, NULL, &r);
        assert_true(r0.total.n[BF_OUTCOME_MASKED] < r0.trials_done);
        assert_int_equal(r.trials_done, 300);
        int outcome = kind == 0 ? BF_OUTCOME_DUE : BF_OUTCOME_MASKED;
        if (r.total.n[outcome] != r.trials_done)
            fail_msg("%s under ecc: %lld of %lld trials %s", kind == 0 ? "2-bit word bursts" : "4-word columns",
                     (long long)r.total.n[outcome], (long long)r.trials_done, kind == 0 ? "DUE" : "masked");
        bf_campaign_result_free(&r0);
        bf_campaign_result_free(&r);
        bf_campaign_free(c0);
        bf_campaign_free(c);
    }
    tc_unload(&l);
}

static void exact_agrees(void **state)
{
    (void)state;
    static double rate = 3e-4;
    bf_mitigation ecc = ecc_mit();
    tc_loaded l = tc_conformance("dlrm_ops_op13");
    bf_campaign_spec specs[3] = {weight_spec(60), weight_spec(60), weight_spec(0)};
    specs[1].bits = 3;
    specs[2].model_kind = BF_FAULT_BER;
    specs[2].rates = &rate;
    specs[2].n_rates = 1;
    specs[2].repeats = 60;
    for (int k = 0; k < 3; k++) {
        tc_recs a, b;
        bf_campaign_result ra, rb;
        bf_campaign *ca = tc_run_mitigated(&l, &specs[k], &ecc, 1, &a, &ra);
        bf_campaign *cb = tc_run_mitigated(&l, &specs[k], &ecc, 0, &b, &rb);
        assert_int_equal(a.n, b.n);
        for (int64_t i = 0; i < a.n; i++) tc_assert_same_record(&a.r[i], &b.r[i]);
        free(a.r);
        free(b.r);
        bf_campaign_result_free(&ra);
        bf_campaign_result_free(&rb);
        bf_campaign_free(ca);
        bf_campaign_free(cb);
    }
    tc_unload(&l);
}

static void storage_cost(void **state)
{
    (void)state;
    static const bf_repr reprs[] = {BF_REPR_FP32, BF_REPR_FP16, BF_REPR_INT8, BF_REPR_INT3};
    bf_mitigation ecc = ecc_mit();
    tc_loaded l = tc_conformance("mlp_ops_op13");
    for (size_t k = 0; k < sizeof reprs / sizeof *reprs; k++) {
        bf_campaign_spec s = weight_spec(1);
        s.repr = reprs[k];
        bf_campaign *c = NULL;
        bf_error err = {0};
        if (bf_campaign_create_mitigated(l.m, l.ds, &s, &ecc, &c, &err) != BF_OK) fail_msg("%s", err.msg);
        int m = bf_repr_bits(reprs[k]), per = 64 / m;
        double check = 0, bits = 0;
        for (size_t p = 0; p < bf_model_num_params(l.m); p++) {
            int64_t n = bf_tensor_numel(bf_model_param(l.m, p)->tensor);
            check += 8.0 * (double)((n + per - 1) / per);
            bits += (double)n * m;
        }
        double got = bf_campaign_storage_overhead(c);
        printf("%s: ecc storage %.6f (expected %.6f)\n", bf_repr_name(reprs[k]), got, check / bits);
        assert_true(fabs(got - check / bits) < 1e-12);
        bf_campaign_free(c);
    }
    tc_unload(&l);
}

static void setup_errors(void **state)
{
    (void)state;
    tc_loaded l = tc_conformance("mlp_ops_op13");
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_mitigation ecc = ecc_mit();
    bf_campaign_spec s = weight_spec(4);
    s.target = BF_TARGET_ACTIVATIONS;
    assert_int_equal(bf_campaign_create_mitigated(l.m, l.ds, &s, &ecc, &c, &err), BF_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "target 'weights'"));
    s = weight_spec(4);
    ecc.ecc.check_bits_faulty = BF_ECC_CHECK_FAULTY;
    assert_int_equal(bf_campaign_create_mitigated(l.m, l.ds, &s, &ecc, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "check_bits_faulty"));
    ecc.ecc.check_bits_faulty = BF_ECC_CHECK_DEFAULT;
    char *none[] = {"no_such_tensor"};
    ecc.ecc.tensors = none;
    ecc.ecc.n_tensors = 1;
    assert_int_equal(bf_campaign_create_mitigated(l.m, l.ds, &s, &ecc, &c, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "ecc"));
    assert_null(c);
    tc_unload(&l);
}

/* Every allocation of an ecc campaign (its setup, the trial scratch, the
 * check-bit draws, appended miscorrections) failing (as campaign_check.h's
 * tc_alloc_plan picks them): each reported
 * as out of memory, nothing leaked (ASan checks). One worker thread: the
 * countdown allocator is not thread-safe. */
static void allocation_failures(void **state)
{
    (void)state;
    tc_loaded l = tc_conformance("mlp_ops_op13");
    bf_mitigation mit = ecc_mit();
    static double rates[] = {1e-3, 1e-2};
    bf_campaign_spec s = weight_spec(0);
    s.model_kind = BF_FAULT_BER;
    s.rates = rates;
    s.n_rates = 2;
    s.repeats = 2;
    long n = tc_alloc_failures(l.m, l.ds, &s, &mit, NULL, 4, 20000);
    printf("ecc campaign: %ld allocations in the clean run, each failure clean\n", n);
    tc_unload(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(single_bits_corrected),
        cmocka_unit_test(double_in_value_due),
        cmocka_unit_test(triples_by_syndrome),
        cmocka_unit_test(ber_paired_and_due),
        cmocka_unit_test(upsets_in_words),
        cmocka_unit_test(exact_agrees),
        cmocka_unit_test(storage_cost),
        cmocka_unit_test(setup_errors),
        cmocka_unit_test(allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
