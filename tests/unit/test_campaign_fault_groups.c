/* Fault groups (docs/CAMPAIGNS.md, "Fault groups"): a trial that combines
 * group 0's weight faults with group 1's activation faults must give
 * exactly the outputs of a plain evaluator with those faults applied by
 * hand (the weight written flipped, the value fault set), each fault's
 * bits as its group's model says; the differential engine, threads and
 * shards change nothing; group 0's draws do not move when a group is
 * added; a BER group's counts follow the binomial law (the JSON list form:
 * tests/api/test_spec_groups.c); bf_campaign_create's errors name the group.
 * Mitigations: ECC follows group 0 as without groups and leaves group 1's
 * faults alone; clip and ABFT give, trial by trial, a plain evaluator's
 * outputs on the clipped (checked) model with both groups' faults applied
 * by hand, and an ABFT detection is the trial's DUE (SBP, the range check
 * and ECC over two weights groups: test_campaign_fault_groups_mit.c). */
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
#include "mitigate/mitigate_impl.h"

#define FIX BF_FIXTURES "/conformance/"
#define BATCH 64          /* digits: 360 samples */
#define TRIALS 24

/* the digits classifier, opened by the group setup (campaign_check.c) */
typedef tc_loaded fx;

static int setup(void **state) { return tc_group_open(state, FIX "demo_digits"); }

static int teardown(void **state) { return tc_group_close(state); }

static char *all_tensors[] = {"*"};
static bf_fault_group act_group;

/* group 0: single-bit weight flips; group 1 (n_groups 1): transient
 * single-bit activation flips in fp32 */
static bf_campaign_spec spec_of(int n_groups)
{
    bf_campaign_spec s = tc_all_weights_spec(11, TRIALS);
    s.sampling = BF_SAMPLE_UNIFORM;
    s.critical_metric = -1;
    s.stop_confidence = 0.95;
    s.batch = BATCH;
    act_group = (bf_fault_group){.target = BF_TARGET_ACTIVATIONS, .tensors = all_tensors, .n_tensors = 1,
                                 .model_kind = BF_FAULT_BITFLIP, .bits = 1, .repr = BF_REPR_FP32,
                                 .persistence = BF_PERSIST_TRANSIENT};
    s.groups = n_groups ? &act_group : NULL;
    s.n_groups = (size_t)n_groups;
    return s;
}

/* Runs c (exact or differential, threads, shard si of sn) into cap. */
static void run(bf_campaign *c, int exact, int threads, int64_t si, int64_t sn, tc_capture *cap)
{
    bf_error err = {0};
    bf_campaign_result res;
    bf_campaign_opts o = {.threads = threads, .shard_index = si, .shard_count = sn, .on_trial = tc_cap_trial,
                          .on_outputs = tc_cap_outputs, .user = cap, .exact = exact};
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    bf_campaign_result_free(&res);
}

/* Each trial: one weight fault of group 0 and one activation fault of
 * group 1, each a single-bit flip of the value it found; the trial's
 * outputs are a plain evaluator's with both applied by hand. */
static void records_by_hand(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = spec_of(1);
    bf_campaign *c = tc_make(f->m, f->ds, &s);
    assert_int_equal(bf_campaign_num_groups(c), 2);
    assert_true(bf_campaign_group_num_sites(c, 1) > 0);
    assert_null(bf_campaign_group_site(c, 2, 0));
    tc_capture cap;
    tc_cap_init(&cap, TRIALS);
    run(c, 1, 1, 0, 1, &cap);

    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_eval_opts eo = {.batch = BATCH, .threads = 1};
    if (bf_evaluator_create(f->m, f->ds, &eo, &ev, &err) != BF_OK) fail_msg("evaluator: %s", err.msg);
    int64_t samples = bf_dataset_num_samples(f->ds);
    for (int64_t t = 0; t < TRIALS; t++) {
        const bf_trial_record *r = &cap.rec[t];
        assert_int_equal(r->trial, t);
        assert_int_equal(r->n_faults, 2);
        assert_int_equal(r->n_kept, 2);
        const bf_applied_fault *w = &r->faults[0], *a = &r->faults[1];
        assert_int_equal(w->group, 0);
        assert_int_equal(a->group, 1);
        assert_int_equal(w->sample, -1);
        assert_true(a->sample >= 0 && a->sample < samples);   /* transient: one sample */
        /* single bits, each flipping the value it found */
        assert_int_equal(__builtin_popcount(w->mask), 1);
        assert_int_equal(__builtin_popcount(a->mask), 1);
        const bf_site *ws = bf_campaign_group_site(c, 0, (size_t)w->site), *as = bf_campaign_group_site(c, 1, (size_t)a->site);
        assert_non_null(ws);
        assert_non_null(as);
        int64_t p = bf_model_find_param(f->m, ws->name), v = bf_model_find_value(f->m, as->name);
        assert_true(p >= 0 && v >= 0);
        assert_true(w->index >= 0 && w->index < bf_tensor_numel(bf_model_param(f->m, (size_t)p)->tensor));
        assert_true(a->index >= 0 && a->index < as->elements);
        float stored = ((const float *)bf_model_param(f->m, (size_t)p)->tensor->data)[w->index];
        tc_same_bits(w->old_value, stored);
        tc_same_bits(w->new_value, tc_float_of(tc_bits_of(stored) ^ w->mask));
        tc_same_bits(a->new_value, tc_float_of(tc_bits_of(a->old_value) ^ a->mask));

        /* by hand: the weight written flipped, the activation fault set, a plain pass */
        assert_int_equal(bf_evaluator_write_param(ev, (size_t)p, w->index, tc_float_of(tc_bits_of(stored) ^ w->mask), &err), BF_OK);
        bf_value_fault vf = {.value = v, .sample = a->sample, .index = a->index, .model = BF_FAULT_BITFLIP, .mask = a->mask,
                             .repr = BF_REPR_FP32, .scale = 1};
        assert_int_equal(bf_evaluator_set_value_faults(ev, &vf, 1, &err), BF_OK);
        bf_eval_result res;
        if (bf_evaluator_run(ev, NULL, 0, &res, &err) != BF_OK) fail_msg("by hand: %s", err.msg);
        float seen_old, seen_new;
        bf_evaluator_value_fault_seen(ev, 0, &seen_old, &seen_new);
        tc_same_bits(a->old_value, seen_old);
        assert_int_equal(res.samples * res.out_cols, cap.samples * cap.cols);
        assert_memory_equal(res.outputs, cap.out + t * cap.samples * cap.cols, (size_t)(cap.samples * cap.cols) * sizeof(float));
        assert_int_equal(bf_evaluator_set_value_faults(ev, NULL, 0, &err), BF_OK);
        assert_int_equal(bf_evaluator_write_param(ev, (size_t)p, w->index, stored, &err), BF_OK);
    }
    bf_evaluator_free(ev);
    tc_cap_free(&cap);
    bf_campaign_free(c);
}

static void same_records(const tc_capture *a, const tc_capture *b)
{
    for (int64_t t = 0; t < a->n; t++) {
        tc_assert_same_record(&a->rec[t], &b->rec[t]);
        for (int i = 0; i < a->rec[t].n_kept; i++) assert_int_equal(a->rec[t].faults[i].group, b->rec[t].faults[i].group);
    }
    assert_memory_equal(a->out, b->out, (size_t)(a->n * a->samples * a->cols) * sizeof(float));
}

/* Exact on one thread, differential on one and two, and two shards of two
 * threads: the same records and outputs, trial by trial. */
static void engines_threads_shards(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = spec_of(1);
    bf_campaign_prep prep = {.differential = 1};
    bf_campaign *c = NULL;
    bf_error err = {0};
    if (bf_campaign_create_prepared(f->m, f->ds, &s, NULL, &prep, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    tc_capture exact, d1, d2, sh;
    tc_cap_init(&exact, TRIALS);
    tc_cap_init(&d1, TRIALS);
    tc_cap_init(&d2, TRIALS);
    tc_cap_init(&sh, TRIALS);
    run(c, 1, 1, 0, 1, &exact);
    run(c, 0, 1, 0, 1, &d1);
    run(c, 0, 2, 0, 1, &d2);
    run(c, 0, 2, 0, 2, &sh);
    run(c, 0, 2, 1, 2, &sh);
    same_records(&exact, &d1);
    same_records(&exact, &d2);
    same_records(&exact, &sh);
    tc_cap_free(&exact);
    tc_cap_free(&d1);
    tc_cap_free(&d2);
    tc_cap_free(&sh);
    bf_campaign_free(c);
}

/* Group 0's draws are a function of (seed, trial) alone: adding group 1
 * leaves every trial's weight fault where it was. */
static void group0_unchanged(void **state)
{
    fx *f = *state;
    bf_campaign_spec s1 = spec_of(0), s2 = spec_of(1);
    bf_campaign *c1 = tc_make(f->m, f->ds, &s1), *c2 = tc_make(f->m, f->ds, &s2);
    tc_capture a, b;
    tc_cap_init(&a, TRIALS);
    tc_cap_init(&b, TRIALS);
    run(c1, 1, 1, 0, 1, &a);
    run(c2, 1, 1, 0, 1, &b);
    int moved = 0;
    for (int64_t t = 0; t < TRIALS; t++) {
        const bf_applied_fault *x = &a.rec[t].faults[0], *y = &b.rec[t].faults[0];
        assert_int_equal(a.rec[t].n_kept, 1);
        assert_int_equal(x->site, y->site);
        assert_int_equal(x->index, y->index);
        assert_int_equal(x->mask, y->mask);
        tc_same_bits(x->old_value, y->old_value);
        tc_same_bits(x->new_value, y->new_value);
        /* and the activation faults changed some trial's outputs */
        moved |= memcmp(a.out + t * a.samples * a.cols, b.out + t * b.samples * b.cols, (size_t)(a.samples * a.cols) * 4) != 0;
    }
    assert_true(moved);
    tc_cap_free(&a);
    tc_cap_free(&b);
    bf_campaign_free(c1);
    bf_campaign_free(c2);
}

/* Group 1 as BER on activations (permanent): each trial flips each bit of
 * one sample's activations with probability r, so over T trials the flips
 * are Binomial(T x N, r), N = elements per sample x 32; their sum must lie
 * within 5 standard deviations of T N r (the draws are seeded, so this is
 * one fixed draw, and 5 sigma leaves no doubt the count follows r, not,
 * say, 2r or r/2: at T N r = 480 those lie 22 sigma away). Group 0 still
 * flips exactly one bit. */
static void ber_counts(void **state)
{
    fx *f = *state;
    const int64_t T = 160;
    bf_campaign_spec s = spec_of(1);
    s.trials = T;
    bf_campaign *probe = tc_make(f->m, f->ds, &s);
    double n_bits = 0;
    for (size_t i = 0; i < bf_campaign_group_num_sites(probe, 1); i++)
        n_bits += 32.0 * (double)bf_campaign_group_site(probe, 1, i)->elements;
    bf_campaign_free(probe);
    act_group.model_kind = BF_FAULT_BER;
    act_group.persistence = BF_PERSIST_PERMANENT;
    act_group.rate = 3.0 / n_bits;   /* three flips a trial on average */
    bf_campaign *c = tc_make(f->m, f->ds, &s);
    tc_capture cap;
    tc_cap_init(&cap, T);
    run(c, 1, 2, 0, 1, &cap);
    int64_t sum = 0;
    for (int64_t t = 0; t < T; t++) {
        const bf_trial_record *r = &cap.rec[t];
        assert_int_equal(r->faults[0].group, 0);
        int64_t g1 = r->n_faults - 1;
        sum += g1;
        for (int i = 1; i < r->n_kept; i++) {
            assert_int_equal(r->faults[i].group, 1);
            assert_int_equal(r->faults[i].sample, -1);
            assert_int_equal(__builtin_popcount(r->faults[i].mask), 1);
        }
        assert_int_equal(r->n_kept, 1 + (g1 < BF_TRIAL_FAULTS_MAX - 1 ? g1 : BF_TRIAL_FAULTS_MAX - 1));
    }
    double mean = (double)T * n_bits * act_group.rate, sd = sqrt(mean * (1 - act_group.rate));
    if (fabs((double)sum - mean) > 5 * sd) fail_msg("group 1 flipped %lld bits; binomial mean %.1f, sd %.1f", (long long)sum, mean, sd);
    tc_cap_free(&cap);
    bf_campaign_free(c);
}

/* ECC (mitigation "ecc") with fault groups protects group 0's stored
 * weights as it does without them: its check bits fault at group 0's BER
 * rate, it corrects and detects group 0's faults alone, so every trial's
 * group-0 faults as ECC left them, and its DUEs, are the one-group
 * campaign's. */
static void ecc_follows_group0(void **state)
{
    fx *f = *state;
    static double rate[] = {3e-5};
    bf_campaign_spec s0 = spec_of(0), s1 = spec_of(1);
    bf_campaign_spec *ss[2] = {&s0, &s1};
    for (int k = 0; k < 2; k++) {
        ss[k]->model_kind = BF_FAULT_BER;
        ss[k]->rates = rate;
        ss[k]->n_rates = 1;
        ss[k]->repeats = 40;
        ss[k]->trials = 40;
    }
    bf_mitigation ecc = {.name = "ecc", .ecc = {.enabled = 1}};
    bf_campaign *c[2] = {NULL, NULL};
    bf_error err = {0};
    for (int k = 0; k < 2; k++)
        if (bf_campaign_create_mitigated(f->m, f->ds, ss[k], &ecc, &c[k], &err) != BF_OK) fail_msg("create: %s", err.msg);
    tc_capture a, b;
    tc_cap_init(&a, 40);
    tc_cap_init(&b, 40);
    run(c[0], 1, 1, 0, 1, &a);
    run(c[1], 1, 2, 0, 1, &b);
    int due = 0, extra = 0;
    for (int64_t t = 0; t < 40; t++) {
        const bf_trial_record *x = &a.rec[t], *y = &b.rec[t];
        assert_int_equal(x->rate_index, y->rate_index);
        if (x->outcome == BF_OUTCOME_DUE) assert_int_equal(y->outcome, BF_OUTCOME_DUE);
        due += x->outcome == BF_OUTCOME_DUE;
        int k = 0;
        for (int i = 0; i < y->n_kept; i++) {
            if (y->faults[i].group != 0) continue;
            assert_true(k < x->n_kept);
            const bf_applied_fault *p = &x->faults[k++], *q = &y->faults[i];
            assert_int_equal(p->site, q->site);
            assert_int_equal(p->index, q->index);
            assert_int_equal(p->mask, q->mask);
            tc_same_bits(p->old_value, q->old_value);
            tc_same_bits(p->new_value, q->new_value);
        }
        if (y->outcome != BF_OUTCOME_DUE) {
            assert_true(y->n_faults >= x->n_faults);   /* group 1's on top */
            extra += y->n_faults > x->n_faults;
        }
        /* group 1's faults stay in the record (ECC does not touch them) */
        int g1 = 0;
        for (int i = 0; i < y->n_kept; i++) g1 += y->faults[i].group == 1;
        assert_int_equal(g1, 1);
        assert_int_equal(y->faults[y->n_kept - 1].group, 1);
    }
    assert_true(extra > 0);
    print_message("ecc: %d DUE trials of 40\n", due);
    tc_cap_free(&a);
    tc_cap_free(&b);
    bf_campaign_free(c[0]);
    bf_campaign_free(c[1]);
}

/* clip (profiled bounds; then fixed ones tight enough to bite) and ABFT
 * (detect) with the two groups: each trial's outputs (or, when ABFT fires,
 * its DUE) are a plain evaluator's on the derived model, the model with
 * the bf.Clip / bf.AbftCheck nodes, given the trial's weight fault and
 * activation fault by hand; the activation fault strikes the guarded value
 * before the clip or the check reads it (docs/MITIGATIONS.md). */
static void clip_abft_by_hand(void **state)
{
    fx *f = *state;
    bf_mitigation cfg[3] = {{.name = "clip"}, {.name = "clip-tight"}, {.name = "abft"}};
    cfg[0].clip.enabled = 1;
    cfg[1].clip.enabled = cfg[1].clip.nan_to_zero = 1;
    cfg[1].clip.lo = -2;
    cfg[1].clip.hi = 2;
    cfg[1].clip.bounds = BF_CLIP_FIXED;
    cfg[2].abft.enabled = 1;
    bf_campaign_spec s = spec_of(1);
    tc_capture none;
    tc_cap_init(&none, TRIALS);
    bf_campaign *c0 = tc_make(f->m, f->ds, &s);
    run(c0, 1, 1, 0, 1, &none);
    bf_campaign_free(c0);
    for (int k = 0; k < 3; k++) {
        bf_error err = {0};
        bf_campaign *c = NULL;
        if (bf_campaign_create_mitigated(f->m, f->ds, &s, &cfg[k], &c, &err) != BF_OK) fail_msg("%s: %s", cfg[k].name, err.msg);
        tc_capture cap, dif;
        tc_cap_init(&cap, TRIALS);
        tc_cap_init(&dif, TRIALS);
        run(c, 1, 1, 0, 1, &cap);
        run(c, 0, 2, 0, 1, &dif);   /* the differential engine: the same */
        same_records(&cap, &dif);
        bf_model *own = NULL;
        if (bf__mitigate_model(f->m, f->ds, NULL, BATCH, &cfg[k], &own, &err) != BF_OK) fail_msg("derive: %s", err.msg);
        bf_evaluator *ev = NULL;
        bf_eval_opts eo = {.batch = BATCH, .threads = 1};
        if (bf_evaluator_create(own, f->ds, &eo, &ev, &err) != BF_OK) fail_msg("evaluator: %s", err.msg);
        int differs = 0, due = 0;
        for (int64_t t = 0; t < TRIALS; t++) {
            const bf_trial_record *r = &cap.rec[t];
            /* the same faults as without the mitigation */
            assert_int_equal(r->n_kept, 2);
            for (int i = 0; i < 2; i++) {
                const bf_applied_fault *x = &r->faults[i], *y = &none.rec[t].faults[i];
                assert_int_equal(x->group, y->group);
                assert_int_equal(x->site, y->site);
                assert_int_equal(x->index, y->index);
                assert_int_equal(x->sample, y->sample);
                assert_int_equal(x->mask, y->mask);
            }
            const bf_applied_fault *w = &r->faults[0], *a = &r->faults[1];
            int64_t p = bf_model_find_param(own, bf_campaign_group_site(c, 0, (size_t)w->site)->name);
            int64_t v = bf_model_find_value(own, bf_campaign_group_site(c, 1, (size_t)a->site)->name);
            assert_true(p >= 0 && v >= 0);
            float stored = ((const float *)bf_model_param(own, (size_t)p)->tensor->data)[w->index];
            assert_int_equal(bf_evaluator_write_param(ev, (size_t)p, w->index, tc_float_of(tc_bits_of(stored) ^ w->mask), &err), BF_OK);
            bf_value_fault vf = {.value = v, .sample = a->sample, .index = a->index, .model = BF_FAULT_BITFLIP, .mask = a->mask,
                                 .repr = BF_REPR_FP32, .scale = 1};
            assert_int_equal(bf_evaluator_set_value_faults(ev, &vf, 1, &err), BF_OK);
            bf_eval_result res;
            bf_status st = bf_evaluator_run(ev, NULL, 0, &res, &err);
            if (st == BF_EDETECTED) {
                assert_int_equal(r->outcome, BF_OUTCOME_DUE);
                due++;
            } else {
                if (st != BF_OK) fail_msg("by hand: %s", err.msg);
                assert_memory_equal(res.outputs, cap.out + t * cap.samples * cap.cols, (size_t)(cap.samples * cap.cols) * sizeof(float));
                differs |= memcmp(res.outputs, none.out + t * none.samples * none.cols, (size_t)(none.samples * none.cols) * 4) != 0;
            }
            assert_int_equal(bf_evaluator_set_value_faults(ev, NULL, 0, &err), BF_OK);
            assert_int_equal(bf_evaluator_write_param(ev, (size_t)p, w->index, stored, &err), BF_OK);
        }
        print_message("%s: %d DUE of %d; outputs differ from unprotected: %d\n", cfg[k].name, due, TRIALS, differs);
        if (k == 1) assert_true(differs);   /* tight bounds change something */
        if (k == 2) assert_true(due > 0);    /* ABFT catches some of these faults */
        bf_evaluator_free(ev);
        bf_model_free(own);
        tc_cap_free(&cap);
        tc_cap_free(&dif);
        bf_campaign_free(c);
    }
    tc_cap_free(&none);
}

/* Four groups: group 0 single-bit flips in conv1.bias (8 values), group 1
 * a burst of 2 adjacent bits in the same tensor (so some trials strike one
 * value twice), group 2 transient flips and group 3 permanent stuck-at-1
 * bits in activations. Group 1's fault finds the value group 0 left when
 * they share an element (group order); the outputs are a plain
 * evaluator's with the four faults applied by hand in that order; the
 * differential engine and two threads give the same records. */
static void stacked_groups_by_hand(void **state)
{
    fx *f = *state;
    const int64_t T = 64;
    static char *bias[] = {"conv1.bias"}, *relu[] = {"/Relu_output_0"};
    bf_campaign_spec s = spec_of(1);
    s.trials = T;
    s.tensors = bias;
    s.n_tensors = 1;
    bf_fault_group g[3] = {
        {.target = BF_TARGET_WEIGHTS, .tensors = bias, .n_tensors = 1, .model_kind = BF_FAULT_BITFLIP, .bits = 2, .burst = 1,
         .repr = BF_REPR_FP32, .persistence = BF_PERSIST_PERMANENT},
        act_group,
        {.target = BF_TARGET_ACTIVATIONS, .tensors = relu, .n_tensors = 1, .model_kind = BF_FAULT_STUCK_AT_1, .bits = 1,
         .repr = BF_REPR_FP32, .persistence = BF_PERSIST_PERMANENT},
    };
    s.groups = g;
    s.n_groups = 3;
    bf_campaign *c = tc_make(f->m, f->ds, &s);
    assert_int_equal(bf_campaign_num_groups(c), 4);
    tc_capture cap, dif;
    tc_cap_init(&cap, T);
    tc_cap_init(&dif, T);
    run(c, 1, 1, 0, 1, &cap);
    run(c, 0, 2, 0, 1, &dif);
    same_records(&cap, &dif);

    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_eval_opts eo = {.batch = BATCH, .threads = 1};
    if (bf_evaluator_create(f->m, f->ds, &eo, &ev, &err) != BF_OK) fail_msg("evaluator: %s", err.msg);
    int64_t p = bf_model_find_param(f->m, "conv1.bias");
    assert_true(p >= 0);
    const float *stored = bf_model_param(f->m, (size_t)p)->tensor->data;
    int shared = 0;
    for (int64_t t = 0; t < T; t++) {
        const bf_trial_record *r = &cap.rec[t];
        assert_int_equal(r->n_faults, 4);
        assert_int_equal(r->n_kept, 4);
        for (int k = 0; k < 4; k++) assert_int_equal(r->faults[k].group, k);
        const bf_applied_fault *w0 = &r->faults[0], *w1 = &r->faults[1], *a2 = &r->faults[2], *a3 = &r->faults[3];
        assert_int_equal(__builtin_popcount(w1->mask), 2);
        assert_true(w1->mask & (w1->mask << 1));   /* adjacent */
        /* by hand, in group order: group 1 finds what group 0 left */
        float v0 = tc_float_of(tc_bits_of(stored[w0->index]) ^ w0->mask);
        tc_same_bits(w0->old_value, stored[w0->index]);
        tc_same_bits(w0->new_value, v0);
        float before1 = w1->index == w0->index ? v0 : stored[w1->index];
        shared += w1->index == w0->index;
        tc_same_bits(w1->old_value, before1);
        tc_same_bits(w1->new_value, tc_float_of(tc_bits_of(before1) ^ w1->mask));
        assert_int_equal(bf_evaluator_write_param(ev, (size_t)p, w0->index, v0, &err), BF_OK);
        assert_int_equal(bf_evaluator_write_param(ev, (size_t)p, w1->index, w1->new_value, &err), BF_OK);
        int64_t v2 = bf_model_find_value(f->m, bf_campaign_group_site(c, 2, (size_t)a2->site)->name);
        int64_t v3 = bf_model_find_value(f->m, "/Relu_output_0");
        assert_true(v2 >= 0 && v3 >= 0);
        assert_int_equal(a3->sample, -1);   /* permanent: every sample */
        bf_value_fault vf[2] = {
            {.value = v2, .sample = a2->sample, .index = a2->index, .model = BF_FAULT_BITFLIP, .mask = a2->mask,
             .repr = BF_REPR_FP32, .scale = 1},
            {.value = v3, .sample = -1, .index = a3->index, .model = BF_FAULT_STUCK_AT_1, .mask = a3->mask,
             .repr = BF_REPR_FP32, .scale = 1},
        };
        assert_int_equal(bf_evaluator_set_value_faults(ev, vf, 2, &err), BF_OK);
        bf_eval_result res;
        if (bf_evaluator_run(ev, NULL, 0, &res, &err) != BF_OK) fail_msg("by hand: %s", err.msg);
        assert_memory_equal(res.outputs, cap.out + t * cap.samples * cap.cols, (size_t)(cap.samples * cap.cols) * sizeof(float));
        tc_same_bits(a2->new_value, tc_float_of(tc_bits_of(a2->old_value) ^ a2->mask));
        tc_same_bits(a3->new_value, tc_float_of(tc_bits_of(a3->old_value) | a3->mask));
        assert_int_equal(bf_evaluator_set_value_faults(ev, NULL, 0, &err), BF_OK);
        assert_int_equal(bf_evaluator_write_param(ev, (size_t)p, w1->index, stored[w1->index], &err), BF_OK);
        assert_int_equal(bf_evaluator_write_param(ev, (size_t)p, w0->index, stored[w0->index], &err), BF_OK);
    }
    assert_true(shared > 0);   /* the fixed draw has trials where groups 0 and 1 share a value */
    print_message("stacked: %d of %lld trials with groups 0 and 1 on one value\n", shared, (long long)T);
    bf_evaluator_free(ev);
    tc_cap_free(&cap);
    tc_cap_free(&dif);
    bf_campaign_free(c);
}

/* bf_campaign_create: a group's own errors name it. */
static void create_errors(void **state)
{
    fx *f = *state;
    static char *nowhere[] = {"no_such_value"};
    bf_campaign_spec s = spec_of(1);
    act_group.tensors = nowhere;
    bf_campaign *c = NULL;
    bf_error err = {0};
    assert_int_not_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_OK);
    assert_null(c);
    if (strncmp(err.msg, "faults.1: ", 10) != 0) fail_msg("'%s' does not name the group", err.msg);
    s = spec_of(1);
    s.sampling = BF_SAMPLE_PER_BIT;
    assert_int_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "sampling: must be 'uniform' with fault groups"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(records_by_hand),   cmocka_unit_test(engines_threads_shards), cmocka_unit_test(group0_unchanged),
        cmocka_unit_test(ber_counts),             cmocka_unit_test(create_errors),
        cmocka_unit_test(ecc_follows_group0),     cmocka_unit_test(clip_abft_by_hand),
        cmocka_unit_test(stacked_groups_by_hand),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
