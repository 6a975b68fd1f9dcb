/* Fault groups with the mitigations that filter faults (docs/CAMPAIGNS.md,
 * "Fault groups"; docs/MITIGATIONS.md): they protect the model, whichever
 * group's fault reaches what they protect. Each case runs trials whose
 * groups share a tensor (so some trials strike one value twice) and checks
 * every trial against a plain evaluator given the faults by hand:
 * - SBP: every group's fault, weights or activations (fp16 here), loses
 *   its protected bits (sign and exponent of its own representation);
 * - range: the check reads each weight after every group's faults (two
 *   flips of one bit on one value cancel, and the value stays), zeroing
 *   what is out of range, or making the trial DUE when it flags;
 * - ECC: two weights groups' faults land in the same 64-bit words, as do a
 *   third and fourth group's in a tensor group 0 does not name (words of
 *   its own): single-bit errors are corrected, two in one word detected
 *   (DUE), whichever groups flipped them.
 * The differential engine gives the exact engine's records; the storage
 * overhead counts a tensor two groups name once. */
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
#include "campaign_check.h"

#define FIX BF_FIXTURES "/conformance/"
#define BATCH 64          /* digits: 360 samples */
#define T 64

typedef tc_loaded fx;

static int setup(void **state) { return tc_group_open(state, FIX "demo_digits"); }

static int teardown(void **state) { return tc_group_close(state); }

static char *all_tensors[] = {"*"}, *bias[] = {"conv1.bias"}, *fc_bias[] = {"fc.bias"};

/* c's T trials, exact (one thread) and differential (two): the same
 * records and outputs, kept in *cap. */
static void run_both(bf_campaign *c, tc_capture *cap)
{
    tc_capture dif;
    tc_capture *caps[2] = {cap, &dif};
    for (int k = 0; k < 2; k++) {
        memset(caps[k], 0, sizeof *caps[k]);
        caps[k]->n = T;
        caps[k]->rec = calloc(T + 1, sizeof *caps[k]->rec);
        assert_non_null(caps[k]->rec);
        bf_error err = {0};
        bf_campaign_result res;
        bf_campaign_opts o = {.threads = k + 1, .on_trial = tc_cap_trial, .on_outputs = tc_cap_outputs, .user = caps[k], .exact = !k};
        if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
        bf_campaign_result_free(&res);
    }
    for (int64_t t = 0; t < T; t++) {
        tc_assert_same_record(&cap->rec[t], &dif.rec[t]);
        for (int i = 0; i < cap->rec[t].n_kept; i++) assert_int_equal(cap->rec[t].faults[i].group, dif.rec[t].faults[i].group);
    }
    assert_memory_equal(cap->out, dif.out, (size_t)(T * cap->samples * cap->cols) * sizeof(float));
    free(dif.rec);
    free(dif.out);
}

/* group 0: single-bit flips in conv1.bias (8 values); `extra` more groups */
static bf_campaign_spec spec_of(bf_fault_group *g, size_t extra)
{
    bf_campaign_spec s = tc_all_weights_spec(23, T);
    s.sampling = BF_SAMPLE_UNIFORM;
    s.critical_metric = -1;
    s.stop_confidence = 0.95;
    s.batch = BATCH;
    s.tensors = bias;
    s.n_tensors = 1;
    s.trials = T;
    s.groups = g;
    s.n_groups = extra;
    return s;
}

static bf_fault_group weights_group(char **tensors, int bit)
{
    bf_fault_group g = {.target = BF_TARGET_WEIGHTS, .tensors = tensors, .n_tensors = 1, .model_kind = BF_FAULT_BITFLIP, .bits = 1,
                        .repr = BF_REPR_FP32, .persistence = BF_PERSIST_PERMANENT};
    if (bit >= 0) g.positions[0] = bit, g.n_positions = 1;
    return g;
}

static bf_fault_group act_group(bf_repr r)
{
    return (bf_fault_group){.target = BF_TARGET_ACTIVATIONS, .tensors = all_tensors, .n_tensors = 1,
                            .model_kind = BF_FAULT_BITFLIP, .bits = 1, .repr = r, .persistence = BF_PERSIST_TRANSIENT};
}

static bf_campaign *make(const fx *f, const bf_campaign_spec *s, const bf_mitigation *mit)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    if (bf_campaign_create_mitigated(f->m, f->ds, s, mit, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    return c;
}

static bf_evaluator *evaluator(const fx *f)
{
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_eval_opts eo = {.batch = BATCH, .threads = 1};
    if (bf_evaluator_create(f->m, f->ds, &eo, &ev, &err) != BF_OK) fail_msg("evaluator: %s", err.msg);
    return ev;
}

/* A trial's weights as the faults leave them, by hand: up to 8 values. */
typedef struct hand {
    int64_t p[8], i[8];
    float v[8];
    int n;
} hand;

static float *hand_at(hand *h, int64_t p, int64_t i, const fx *f)
{
    for (int k = 0; k < h->n; k++)
        if (h->p[k] == p && h->i[k] == i) return &h->v[k];
    assert_true(h->n < 8);
    h->p[h->n] = p, h->i[h->n] = i;
    h->v[h->n] = ((const float *)bf_model_param(f->m, (size_t)p)->tensor->data)[i];
    return &h->v[h->n++];
}

/* Writes h into ev (restore: the stored values back), with the activation
 * faults vf; runs; the outputs must be the trial's (or *due: it must be DUE). */
static void check_by_hand(const fx *f, bf_evaluator *ev, const hand *h, const bf_value_fault *vf, size_t n_vf,
                          const tc_capture *cap, int64_t t)
{
    bf_error err = {0};
    for (int k = 0; k < h->n; k++) assert_int_equal(bf_evaluator_write_param(ev, (size_t)h->p[k], h->i[k], h->v[k], &err), BF_OK);
    assert_int_equal(bf_evaluator_set_value_faults(ev, vf, n_vf, &err), BF_OK);
    bf_eval_result res;
    if (bf_evaluator_run(ev, NULL, 0, &res, &err) != BF_OK) fail_msg("by hand: %s", err.msg);
    assert_int_not_equal(cap->rec[t].outcome, BF_OUTCOME_DUE);
    assert_memory_equal(res.outputs, cap->out + t * cap->samples * cap->cols, (size_t)(cap->samples * cap->cols) * sizeof(float));
    assert_int_equal(bf_evaluator_set_value_faults(ev, NULL, 0, &err), BF_OK);
    for (int k = h->n; k-- > 0;) {
        float stored = ((const float *)bf_model_param(f->m, (size_t)h->p[k])->tensor->data)[h->i[k]];
        assert_int_equal(bf_evaluator_write_param(ev, (size_t)h->p[k], h->i[k], stored, &err), BF_OK);
    }
}

static int64_t param_of(const fx *f, const bf_campaign *c, const bf_applied_fault *a)
{
    int64_t p = bf_model_find_param(f->m, bf_campaign_group_site(c, (size_t)a->group, (size_t)a->site)->name);
    assert_true(p >= 0);
    return p;
}

/* SBP (default: sign and exponent) with groups 0 and 1 on conv1.bias and
 * group 2 on activations in fp16: each fault by hand without its protected
 * bits (fp32 0xff800000, fp16 0xfc00), group 1 finding what group 0 left. */
static void sbp_by_hand(void **state)
{
    fx *f = *state;
    bf_fault_group g[2] = {weights_group(bias, -1), act_group(BF_REPR_FP16)};
    bf_campaign_spec s = spec_of(g, 2);
    bf_mitigation sbp = {.name = "sbp", .sbp = {.enabled = 1}};
    bf_campaign *c = make(f, &s, &sbp);
    tc_capture cap;
    run_both(c, &cap);
    bf_evaluator *ev = evaluator(f);
    const uint32_t k32 = 0xff800000u, k16 = 0xfc00u;
    int hit_w = 0, hit_a = 0, shared = 0;
    for (int64_t t = 0; t < T; t++) {
        const bf_trial_record *r = &cap.rec[t];
        assert_int_equal(r->n_kept, 3);
        hand h = {.n = 0};
        bf_value_fault vf = {0};
        for (int i = 0; i < 3; i++) {
            const bf_applied_fault *a = &r->faults[i];
            assert_int_equal(a->group, i);
            if (i < 2) {
                float *v = hand_at(&h, param_of(f, c, a), a->index, f);
                shared += i == 1 && h.n == 1;
                tc_same_bits(a->old_value, *v);
                *v = tc_float_of(tc_bits_of(*v) ^ (a->mask & ~k32));
                tc_same_bits(a->new_value, *v);
                hit_w += (a->mask & k32) != 0;
            } else {
                int64_t val = bf_model_find_value(f->m, bf_campaign_group_site(c, 2, (size_t)a->site)->name);
                assert_true(val >= 0);
                vf = (bf_value_fault){.value = val, .sample = a->sample, .index = a->index, .model = BF_FAULT_BITFLIP,
                                      .mask = a->mask & ~k16, .repr = BF_REPR_FP16, .scale = 1};
                hit_a += (a->mask & k16) != 0;
            }
        }
        check_by_hand(f, ev, &h, &vf, 1, &cap, t);
    }
    /* storage: conv1.bias's 8 x 9 bits once (group 1 names it too), and
     * fp16's 6 per activation element, over the weights' 32-bit words */
    double extra = 8.0 * 9;
    for (size_t i = 0; i < bf_campaign_group_num_sites(c, 2); i++) extra += 6.0 * (double)bf_campaign_group_site(c, 2, i)->elements;
    double all = 32.0 * (double)bf_model_param_elements(f->m);
    if (fabs(bf_campaign_storage_overhead(c) - extra / all) > 1e-12 * (extra / all))
        fail_msg("storage overhead %.17g, by hand %.17g", bf_campaign_storage_overhead(c), extra / all);
    print_message("sbp: %d weight and %d activation faults on protected bits; %d trials share a value\n", hit_w, hit_a, shared);
    assert_true(hit_w > 0 && hit_a > 0 && shared > 0);
    bf_evaluator_free(ev);
    tc_cap_free(&cap);
    bf_campaign_free(c);
}

/* The range check (profiled: conv1.bias's own min and max) with groups 0
 * and 1 flipping bit 30 of a conv1.bias value (to about 1e37: out of
 * range) and group 2 on activations: a value both flip is as stored, in
 * range; any other struck value is zeroed (or, flagging, the trial DUE). */
static void range_by_hand(void **state)
{
    fx *f = *state;
    bf_fault_group g[2] = {weights_group(bias, 30), act_group(BF_REPR_FP32)};
    bf_campaign_spec s = spec_of(g, 2);
    s.positions[0] = 30;
    s.n_positions = 1;
    int64_t pb = bf_model_find_param(f->m, "conv1.bias");
    assert_true(pb >= 0);
    const float *stored = bf_model_param(f->m, (size_t)pb)->tensor->data;
    float lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < 8; i++) lo = fminf(lo, stored[i]), hi = fmaxf(hi, stored[i]);
    bf_evaluator *ev = evaluator(f);
    for (int flag = 0; flag < 2; flag++) {
        bf_mitigation range = {.name = "range", .range = {.enabled = 1, .flag = flag}};
        bf_campaign *c = make(f, &s, &range);
        tc_capture cap;
        run_both(c, &cap);
        int cancel = 0, due = 0;
        for (int64_t t = 0; t < T; t++) {
            const bf_trial_record *r = &cap.rec[t];
            const bf_applied_fault *w0 = &r->faults[0], *w1 = &r->faults[1];
            assert_int_equal(w0->mask, 1u << 30);
            assert_int_equal(w1->mask, 1u << 30);
            int same = w0->index == w1->index;
            cancel += same;
            if (flag) {   /* out of range somewhere unless the flips cancel */
                assert_int_equal(r->outcome == BF_OUTCOME_DUE, !same);
                due += !same;
                if (!same) continue;
            }
            assert_int_equal(r->n_kept, 3);
            hand h = {.n = 0};
            for (int i = 0; i < 2; i++) {
                float *v = hand_at(&h, pb, r->faults[i].index, f);
                *v = tc_float_of(tc_bits_of(*v) ^ r->faults[i].mask);
            }
            for (int k = 0; k < h.n; k++)
                if (!(h.v[k] >= lo && h.v[k] <= hi)) h.v[k] = 0;
            /* the last fault on each value shows what the check left */
            tc_same_bits(w1->new_value, *hand_at(&h, pb, w1->index, f));
            if (!same) tc_same_bits(w0->new_value, 0.0f);
            const bf_applied_fault *a = &r->faults[2];
            int64_t val = bf_model_find_value(f->m, bf_campaign_group_site(c, 2, (size_t)a->site)->name);
            bf_value_fault vf = {.value = val, .sample = a->sample, .index = a->index, .model = BF_FAULT_BITFLIP,
                                 .mask = a->mask, .repr = BF_REPR_FP32, .scale = 1};
            check_by_hand(f, ev, &h, &vf, 1, &cap, t);
        }
        print_message("range (%s): %d of %d trials flip one value twice (it stays); %d DUE\n", flag ? "flag" : "zero", cancel,
                      T, due);
        assert_true(cancel > 0 && cancel < T);
        tc_cap_free(&cap);
        bf_campaign_free(c);
    }
    bf_evaluator_free(ev);
}

/* ECC: groups 0 and 1 single-bit flips in conv1.bias (4 words of 2 fp32
 * values), groups 2 and 3 in fc.bias (5 words, which only the later groups
 * name): a trial is DUE exactly when two faults of a pair lie in one word
 * and are not the same bit of the same value (that pair cancels); every
 * other trial is corrected, its outputs the golden ones. The records keep
 * the faults as drawn: the unprotected campaign's. */
static void ecc_by_hand(void **state)
{
    fx *f = *state;
    bf_fault_group g[3] = {weights_group(bias, -1), weights_group(fc_bias, -1), weights_group(fc_bias, -1)};
    bf_campaign_spec s = spec_of(g, 3);
    bf_mitigation ecc = {.name = "ecc", .ecc = {.enabled = 1}};
    bf_campaign *c = make(f, &s, &ecc), *plain = make(f, &s, NULL);
    tc_capture cap, none;
    run_both(c, &cap);
    run_both(plain, &none);
    bf_evaluator *ev = evaluator(f);
    int due = 0, same_word = 0, extra = 0;
    for (int64_t t = 0; t < T; t++) {
        const bf_trial_record *r = &cap.rec[t], *u = &none.rec[t];
        assert_int_equal(u->n_kept, 4);
        int want_due = 0;
        for (int pair = 0; pair < 2; pair++) {
            const bf_applied_fault *x = &u->faults[2 * pair], *y = &u->faults[2 * pair + 1];
            int one_word = x->index / 2 == y->index / 2, cancels = x->index == y->index && x->mask == y->mask;
            same_word += one_word;
            extra += pair == 1 && one_word;
            want_due |= one_word && !cancels;
        }
        assert_int_equal(r->outcome == BF_OUTCOME_DUE, want_due);
        due += want_due;
        if (want_due) continue;
        assert_int_equal(r->n_kept, 4);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(r->faults[i].group, u->faults[i].group);
            assert_int_equal(r->faults[i].site, u->faults[i].site);
            assert_int_equal(r->faults[i].index, u->faults[i].index);
            assert_int_equal(r->faults[i].mask, u->faults[i].mask);
        }
        hand h = {.n = 0};   /* corrected: the stored weights */
        check_by_hand(f, ev, &h, NULL, 0, &cap, t);
        assert_int_equal(r->outcome, BF_OUTCOME_MASKED);
    }
    /* storage: 8 check bits for each of conv1.bias's 4 words and fc.bias's 5 */
    double bits = 8.0 * (4 + 5), all = 32.0 * (double)bf_model_param_elements(f->m);
    if (fabs(bf_campaign_storage_overhead(c) - bits / all) > 1e-12 * (bits / all))
        fail_msg("storage overhead %.17g, by hand %.17g", bf_campaign_storage_overhead(c), bits / all);
    print_message("ecc: %d of %d trials DUE; %d pairs in one word (%d in fc.bias's own words)\n", due, T, same_word, extra);
    assert_true(due > 0 && due < T && extra > 0);
    bf_evaluator_free(ev);
    tc_cap_free(&cap);
    tc_cap_free(&none);
    bf_campaign_free(c);
    bf_campaign_free(plain);
}

/* SBP with random_value activation faults stays refused, naming the group. */
static void sbp_random_refused(void **state)
{
    fx *f = *state;
    bf_fault_group g[1] = {act_group(BF_REPR_FP32)};
    g[0].model_kind = BF_FAULT_RANDOM_VALUE;
    g[0].bits = 0;
    bf_campaign_spec s = spec_of(g, 1);
    bf_mitigation sbp = {.name = "sbp", .sbp = {.enabled = 1}};
    bf_campaign *c = NULL;
    bf_error err = {0};
    assert_int_equal(bf_campaign_create_mitigated(f->m, f->ds, &s, &sbp, &c, &err), BF_EUNSUPPORTED);
    assert_null(c);
    if (!strstr(err.msg, "faults.1") || !strstr(err.msg, "random_value")) fail_msg("'%s'", err.msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sbp_by_hand),
        cmocka_unit_test(range_by_hand),
        cmocka_unit_test(ecc_by_hand),
        cmocka_unit_test(sbp_random_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
