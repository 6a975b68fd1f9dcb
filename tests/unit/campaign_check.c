/* Checks shared by the campaign tests (see campaign_check.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "bitflip/eval.h"
#include "campaign_check.h"

bf_campaign *tc_make(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    if (bf_campaign_create(m, ds, s, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    return c;
}

tc_alloc_plan tc_alloc_plan_get(void)
{
    tc_alloc_plan p = {.paths = TC_ALLOC_PATHS, .step = TC_ALLOC_STEP};
    const char *e = getenv("BF_ALLOC_LOOP");
    if (!e || !*e) return p;
    char *end = NULL;
    long n = strtol(e, &end, 10);
    if (strcmp(e, "each") == 0) p = (tc_alloc_plan){.paths = 0, .step = 1};
    else if (strcmp(e, "paths") == 0) p = (tc_alloc_plan){.paths = 1, .step = 1};
    else if (end != e && *end == '\0' && n >= 1) p = (tc_alloc_plan){.paths = 0, .step = n};
    else fail_msg("BF_ALLOC_LOOP=%s: not each, paths or a number from 1", e);
    return p;
}

void tc_alloc_arm(const tc_alloc_plan *p, long n)
{
    if (!p->paths) {
        bf_test_alloc_fail_after(n);
        return;
    }
    if (n == 0) bf_test_alloc_paths_forget();   /* a new loop */
    bf_test_alloc_fail_new_path_from(n);
}

long tc_alloc_next(const tc_alloc_plan *p, long n, long at)
{
    return p->paths ? at + 1 : n + p->step;
}

long tc_alloc_failures(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, const bf_mitigation *mit,
                       const bf_campaign_prep *prep, int64_t trials, long max_n)
{
    /* One clean create and run first: the model keeps caches of its own
     * that its first use fills and its free gives back (the products'
     * packed weights, base/wpack.h), which are not a round's to return.
     * Then core's bytes: every failed round must give them all back (the
     * release build has no leak checker; under ASan LeakSanitizer checks too) */
    {
        bf_campaign *c = NULL;
        bf_campaign_result res;
        bf_error err = {0};
        bf_campaign_opts o = {.threads = 1};
        bf_status st = bf_campaign_create_prepared(m, ds, s, mit, prep, &c, &err);
        if (st == BF_OK) st = bf_campaign_run(c, &o, &res, &err);
        if (st != BF_OK) fail_msg("the clean run before the sweep failed: %s", err.msg);
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
    }
    size_t live = bf_test_alloc_live();
    long rounds = 0;
    tc_alloc_plan plan = tc_alloc_plan_get();
    for (long n = 0; n < max_n; rounds++) {
        bf_campaign *c = NULL;
        bf_campaign_result res;
        bf_error err = {0};
        bf_campaign_opts o = {.threads = 1};
        tc_alloc_arm(&plan, n);
        bf_status st = bf_campaign_create_prepared(m, ds, s, mit, prep, &c, &err);
        if (st == BF_OK) st = bf_campaign_run(c, &o, &res, &err);
        long at = bf_test_alloc_failed_at(), asked = bf_test_alloc_count();
        bf_test_alloc_fail_after(-1);
        bf_campaign_free(c);
        if (st == BF_OK) {
            if (at >= 0) fail_msg("allocation %ld failed and the run still succeeded", at);
            assert_int_equal(res.trials_done, trials);
            bf_campaign_result_free(&res);
            if (bf_test_alloc_live() != live) fail_msg("the clean run left %zu bytes held", bf_test_alloc_live() - live);
            if (plan.paths)
                print_message("%ld of %ld allocations failed, one per call path\n", rounds, asked);
            else
                print_message("%ld of %ld allocations failed, every %ld-th\n", rounds, asked, plan.step);
            return asked;
        }
        if (st != BF_ENOMEM) fail_msg("allocation %ld failing gave status %d: %s", at, st, err.msg);
        if (bf_test_alloc_live() != live)
            fail_msg("allocation %ld failing left %zu bytes held", at, bf_test_alloc_live() - live);
        n = tc_alloc_next(&plan, n, at);
    }
    fail_msg("no create and run succeeded within %ld allocations", max_n);
    return max_n;
}

double tc_round_half_even(double x)
{
    double r = floor(x), d = x - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2) != 0)) r += 1;
    return r;
}

uint16_t tc_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t hi = u >> 16, lo = u & 0xffff;
    if (lo > 0x8000u || (lo == 0x8000u && (hi & 1))) hi++;
    return (uint16_t)hi;
}

float tc_bf16_decode(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

bf_campaign_spec tc_uniform_spec(int64_t batch)
{
    static char *all[] = {"*"};
    bf_campaign_spec s = {0};
    s.seed = 42;
    s.trials = 32;
    s.tensors = all;
    s.n_tensors = 1;
    s.model_kind = BF_FAULT_BITFLIP;
    s.bits = 1;
    s.repr = BF_REPR_FP32;
    s.sampling = BF_SAMPLE_UNIFORM;
    s.critical_metric = -1;
    s.stop_confidence = 0.95;
    s.batch = batch;
    return s;
}

void tc_assert_same_aggregates(const bf_campaign_result *a, const bf_campaign_result *b)
{
    assert_int_equal(a->trials_done, b->trials_done);
    assert_int_equal(a->trials_planned, b->trials_planned);
    assert_int_equal(a->stopped_early, b->stopped_early);
    assert_memory_equal(&a->total, &b->total, sizeof a->total);
    assert_int_equal(a->n_sites, b->n_sites);
    assert_memory_equal(a->by_site, b->by_site, a->n_sites * sizeof *a->by_site);
    assert_memory_equal(a->by_bit, b->by_bit, sizeof a->by_bit);
    if (a->by_site_bit && b->by_site_bit)
        assert_memory_equal(a->by_site_bit, b->by_site_bit, a->n_sites * 64 * sizeof *a->by_site_bit);
    assert_memory_equal(a->metric, b->metric, sizeof a->metric);
    assert_int_equal(a->n_rates, b->n_rates);
    if (a->n_rates) {
        assert_memory_equal(a->by_rate, b->by_rate, a->n_rates * sizeof *a->by_rate);
        assert_memory_equal(a->rate_metric, b->rate_metric, a->n_rates * BF_METRIC_COUNT * sizeof *a->rate_metric);
    }
}

void tc_assert_same_record(const bf_trial_record *a, const bf_trial_record *b)
{
    assert_int_equal(a->trial, b->trial);
    assert_int_equal(a->outcome, b->outcome);
    assert_int_equal(a->rate_index, b->rate_index);
    assert_int_equal(a->n_faults, b->n_faults);
    assert_int_equal(a->n_kept, b->n_kept);
    assert_int_equal(a->changed, b->changed);
    for (int i = 0; i < a->n_kept; i++) {
        assert_int_equal(a->faults[i].site, b->faults[i].site);
        assert_int_equal(a->faults[i].index, b->faults[i].index);
        assert_int_equal(a->faults[i].sample, b->faults[i].sample);
        assert_int_equal(a->faults[i].mask, b->faults[i].mask);
        assert_memory_equal(&a->faults[i].old_value, &b->faults[i].old_value, sizeof(float));
        assert_memory_equal(&a->faults[i].new_value, &b->faults[i].new_value, sizeof(float));
    }
    assert_memory_equal(a->metrics, b->metrics, sizeof a->metrics);
}

void tc_keep(void *user, const bf_trial_record *rec)
{
    tc_recs *k = user;
    k->r[k->n++] = *rec;
}

bf_campaign *tc_create_prepared(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s,
                                const bf_campaign_prep *prep)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    if (bf_campaign_create_prepared(m, ds, s, NULL, prep, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    return c;
}

void tc_run_keep(bf_campaign *c, int exact, int threads, int64_t shard, int64_t shards, bf_trial_record *out,
                 bf_campaign_result *res)
{
    bf_error err = {0};
    tc_recs k = {out, 0};
    bf_campaign_opts o = {.threads = threads, .exact = exact, .shard_index = shard, .shard_count = shards,
                          .on_trial = tc_keep, .user = &k};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(res->trials_done, k.n);
    bf_campaign_free(c);
}

void tc_open_files(const char *model, const char *data, bf_model **m, bf_dataset **ds)
{
    bf_error err = {0};
    if (bf_model_load_file(model, m, &err)) fail_msg("%s", err.msg);
    if (bf_dataset_load_file(data, ds, &err)) fail_msg("%s", err.msg);
}

void tc_open(const char *stem, bf_model **m, bf_dataset **ds)
{
    char mp[4096], dp[4096];
    snprintf(mp, sizeof mp, "%s.onnx", stem);
    snprintf(dp, sizeof dp, "%s.eval.safetensors", stem);
    tc_open_files(mp, dp, m, ds);
}

void tc_open_real(const char *name, bf_model **m, bf_dataset **ds)
{
    char stem[512];
    snprintf(stem, sizeof stem, BF_FIXTURES "/real/%s", name);
    tc_open(stem, m, ds);
}

void tc_open_fixed(const char *stem, const char *const *names, const char *const *from, size_t n, bf_model **base,
                   bf_model **m, bf_dataset **ds)
{
    int64_t sizes[8];
    bf_error err = {0};
    assert_true(n <= sizeof sizes / sizeof *sizes);
    tc_open(stem, base, ds);
    for (size_t i = 0; i < n; i++) {
        const bf_tensor *t = bf_dataset_find(*ds, from[i]);
        assert_non_null(t);
        sizes[i] = t->dims[1];
    }
    if (bf_model_with_dims(*base, names, sizes, n, m, &err) != BF_OK) fail_msg("%s", err.msg);
}

double tc_load(const char *stem, bf_model **m, bf_dataset **ds)
{
    tc_open(stem, m, ds);
    return tc_out_scale(*m, *ds);
}

tc_loaded tc_conformance(const char *fx)
{
    char stem[512];
    snprintf(stem, sizeof stem, BF_FIXTURES "/conformance/%s", fx);
    tc_loaded l = {0};
    tc_open(stem, &l.m, &l.ds);
    return l;
}

void tc_unload(tc_loaded *l)
{
    bf_model_free(l->m);
    bf_dataset_free(l->ds);
}

bf_status tc_try_open(const char *stem, bf_model **m, bf_dataset **ds, bf_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.onnx", stem);
    bf_status st = bf_model_load_file(path, m, err);
    if (st != BF_OK) return st;
    snprintf(path, sizeof path, "%s.eval.safetensors", stem);
    return bf_dataset_load_file(path, ds, err);
}

int tc_group_open(void **state, const char *stem)
{
    tc_loaded *l = calloc(1, sizeof *l);
    bf_error err = {0};
    if (!l || tc_try_open(stem, &l->m, &l->ds, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = l;
    return 0;
}

int tc_group_close(void **state)
{
    tc_loaded *l = *state;
    tc_unload(l);
    free(l);
    return 0;
}

bf_campaign_spec tc_all_weights_spec(uint64_t seed, int64_t trials)
{
    static char *all[] = {"*"};
    bf_campaign_spec s = {0};
    s.seed = seed;
    s.trials = trials;
    s.target = BF_TARGET_WEIGHTS;
    s.tensors = all;
    s.n_tensors = 1;
    s.model_kind = BF_FAULT_BITFLIP;
    s.bits = 1;
    s.repr = BF_REPR_FP32;
    s.critical_metric = -1;
    s.critical_delta = -1;
    return s;
}

bf_campaign *tc_run_mitigated(const tc_loaded *l, const bf_campaign_spec *s, const bf_mitigation *mit, int exact,
                              tc_recs *out, bf_campaign_result *res)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    if (bf_campaign_create_mitigated(l->m, l->ds, s, mit, &c, &err) != BF_OK)
        fail_msg("%s: %s", mit && mit->name ? mit->name : "none", err.msg);
    if (out) {
        out->r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *out->r);
        out->n = 0;
        assert_non_null(out->r);
    }
    bf_campaign_opts o = {.threads = 2, .exact = exact, .on_trial = out ? tc_keep : NULL, .user = out};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("%s", err.msg);
    return c;
}

/* The scale of an output ulp. */
double tc_out_scale(const bf_model *m, const bf_dataset *ds)
{
    bf_evaluator *ev = NULL;
    bf_eval_result r;
    bf_error err = {0};
    bf_eval_opts o = {.batch = 7, .threads = 1};
    if (bf_evaluator_create(m, ds, &o, &ev, &err) || bf_evaluator_run(ev, NULL, 0, &r, &err)) fail_msg("%s", err.msg);
    double s = 1;
    for (int64_t i = 0; i < r.samples * r.out_cols; i++)
        if (isfinite(r.outputs[i]) && fabs(r.outputs[i]) > s) s = fabs(r.outputs[i]);
    bf_evaluator_free(ev);
    return s;
}

/* Whether two records are the same, field by field and bit for bit (NaN
 * metrics too: the judge writes one NaN, campaign_judge.c). */
static int same_record(const bf_trial_record *a, const bf_trial_record *b)
{
    int same = a->trial == b->trial && a->outcome == b->outcome && a->rate_index == b->rate_index &&
               a->n_faults == b->n_faults && a->n_kept == b->n_kept && a->changed == b->changed &&
               memcmp(a->metrics, b->metrics, sizeof a->metrics) == 0;
    for (int i = 0; same && i < a->n_kept && i < BF_TRIAL_FAULTS_MAX; i++)
        same = a->faults[i].site == b->faults[i].site && a->faults[i].index == b->faults[i].index &&
               a->faults[i].sample == b->faults[i].sample && a->faults[i].mask == b->faults[i].mask &&
               memcmp(&a->faults[i].old_value, &b->faults[i].old_value, sizeof(float)) == 0 &&
               memcmp(&a->faults[i].new_value, &b->faults[i].new_value, sizeof(float)) == 0;
    return same;
}

/* The near-exact engine's rules (bf_campaign_opts.near_exact, t->near): the
 * outcome equal or a near tie, metrics within 1e-6. */
static void compare_near(const char *fix, const char *label, const bf_trial_record *x, const bf_trial_record *y,
                         double scale, tc_tally *t)
{
    double dx = x->metrics[BF_METRIC_MAX_ABS], dy = y->metrics[BF_METRIC_MAX_ABS];
    if (x->outcome != y->outcome) {
        t->disagree++;
        /* a near tie: both runs moved the outputs by ulps at most, and
         * both moved them (masked is decided exactly) */
        int near = (isnan(dx) || dx <= 1e-5 * scale) && (isnan(dy) || dy <= 1e-5 * scale) &&
                   x->outcome != BF_OUTCOME_MASKED && y->outcome != BF_OUTCOME_MASKED;
        t->unexplained += !near;
        printf("  %s, %s, trial %lld: %s vs %s; max output deviation %.3g vs %.3g (%s)\n", fix, label,
               (long long)x->trial, bf_outcome_name(x->outcome), bf_outcome_name(y->outcome), dx, dy,
               near ? "a near tie: an ulp-level change kept or rounded away" : "UNEXPLAINED");
        return;
    }
    for (int k = 0; k < BF_METRIC_COUNT; k++) {
        double u = x->metrics[k], v = y->metrics[k];
        if (isnan(u) && isnan(v)) continue;
        if (isinf(u) && u == v) continue;
        double tol = k == BF_METRIC_MAX_ABS ? 1e-6 * scale
                   : k == BF_METRIC_MSE ? 1e-6 * scale * scale + 2e-6 * scale * (isfinite(u) ? sqrt(fabs(u)) : 0)
                   : 1e-6;
        if (1e-6 * fmax(fabs(u), fabs(v)) > tol) tol = 1e-6 * fmax(fabs(u), fabs(v));
        if (!(fabs(u - v) <= tol)) {
            t->metric_off++;
            printf("  %s, %s, trial %lld: %s %.17g vs %.17g\n", fix, label, (long long)x->trial, bf_metric_name(k), u,
                   v);
            return;
        }
    }
}

void tc_compare(const char *fix, const char *label, const tc_recs *a, const tc_recs *b, double scale, tc_tally *t)
{
    assert_int_equal(a->n, b->n);
    for (int64_t i = 0; i < a->n; i++) {
        const bf_trial_record *x = &a->r[i], *y = &b->r[i];
        assert_int_equal(x->trial, y->trial);
        t->trials++;
        if (t->near) {
            compare_near(fix, label, x, y, scale, t);
            continue;
        }
        if (same_record(x, y)) continue;
        /* the rule: a differential record is the full run's, bit for bit */
        if (x->outcome != y->outcome) t->disagree++;
        else t->metric_off++;
        printf("  %s, %s, trial %lld: records differ: %s vs %s, changed %lld vs %lld", fix, label, (long long)x->trial,
               bf_outcome_name(x->outcome), bf_outcome_name(y->outcome), (long long)x->changed, (long long)y->changed);
        for (int k = 0; k < BF_METRIC_COUNT; k++)
            if (memcmp(&x->metrics[k], &y->metrics[k], sizeof(double)) != 0)
                printf("; %s %.17g vs %.17g", bf_metric_name(k), x->metrics[k], y->metrics[k]);
        printf(" (outputs' scale %g)\n", scale);
    }
}

void tc_assert_agree(const char *what, const tc_tally *t, int64_t min_trials)
{
    printf("%s%s: %lld trials, %lld outcome disagreements (%lld unexplained), %lld %s\n", what,
           t->near ? " (near-exact engine)" : "", (long long)t->trials, (long long)t->disagree, (long long)t->unexplained,
           (long long)t->metric_off, t->near ? "metric mismatches" : "other records that differ");
    assert_true(t->trials >= min_trials);
    if (t->near) {
        /* two in 1,000: the DLRM fixture's sample 247 outputs exactly 0.5 (the
         * threshold) since its interaction rounds each product as PyTorch's small
         * bmm does, so any ulp of an update decides it (docs/ENGINE.md) */
        assert_true(t->disagree * 500 <= t->trials);
        assert_int_equal(t->unexplained, 0);
    } else {
        assert_int_equal(t->disagree, 0);
    }
    assert_int_equal(t->metric_off, 0);
}

uint8_t *tc_pack_model(Onnx__GraphProto *g, int opset, size_t *len)
{
    Onnx__OperatorSetIdProto ops;
    onnx__operator_set_id_proto__init(&ops);
    ops.domain = (char *)"";
    ops.has_version = 1;
    ops.version = opset;
    Onnx__OperatorSetIdProto *opsp = &ops;
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1;
    m.ir_version = 7;
    m.producer_name = (char *)"bitflip-test";
    m.graph = g;
    m.n_opset_import = 1;
    m.opset_import = &opsp;
    *len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    onnx__model_proto__pack(&m, buf);
    return buf;
}

void tc_budgets_match_exact(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int64_t extra_budget)
{
    tc_recs ex = {0};
    for (int run = 0; run < (extra_budget ? 7 : 5); run++) {
        int exact = run == 0, threads = run % 2 ? 1 : 2;
        int64_t budget = run >= 5 ? extra_budget : run >= 3 ? 1 : 0;
        bf_campaign *c = tc_make(m, ds, s);
        tc_recs r = {0};
        r.r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *r.r);
        assert_non_null(r.r);
        bf_campaign_opts o = {.threads = threads, .exact = exact, .cache_budget = budget, .on_trial = tc_keep,
                              .user = &r};
        bf_campaign_result res;
        bf_error err = {0};
        if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s", err.msg);
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
        if (exact) {
            ex = r;
            continue;
        }
        assert_int_equal(r.n, ex.n);
        for (int64_t i = 0; i < r.n; i++) {
            if (ex.r[i].outcome != r.r[i].outcome || ex.r[i].changed != r.r[i].changed ||
                memcmp(ex.r[i].metrics, r.r[i].metrics, sizeof ex.r[i].metrics) != 0)
                print_message("%d threads, budget %lld: trial %lld is not the exact engine's\n", threads,
                              (long long)budget, (long long)i);
            tc_assert_same_record(&ex.r[i], &r.r[i]);
        }
        free(r.r);
    }
    free(ex.r);
}

int64_t tc_run_engines(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, const char *label,
                       int no_full_pass, tc_recs r[2])
{
    int64_t due = 0;
    for (int exact = 1; exact >= 0; exact--) {
        bf_campaign *c = tc_make(m, ds, s);
        r[exact].r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *r[exact].r);
        r[exact].n = 0;
        assert_non_null(r[exact].r);
        bf_campaign_opts o = {.threads = 2, .exact = exact, .no_full_pass = no_full_pass && !exact, .on_trial = tc_keep,
                              .user = &r[exact]};
        bf_campaign_result res;
        bf_error err = {0};
        if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s: %s", label, err.msg);
        assert_int_equal(res.trials_done, r[exact].n);
        if (exact) due = res.total.n[BF_OUTCOME_DUE];
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
    }
    return due;
}

void tc_both(const bf_model *m, const bf_dataset *ds, double scale, const char *fix, const bf_campaign_spec *s,
             const char *label, tc_tally *t, tc_recs *exact_out)
{
    tc_recs r[2] = {{0}};
    t->exact_due += tc_run_engines(m, ds, s, label, 0, r);
    tc_compare(fix, label, &r[1], &r[0], scale, t);
    if (s->model_kind == BF_FAULT_BER) {
        /* and without the full-pass shortcut, as its many faults would run */
        tc_recs z = {0};
        bf_campaign *c = tc_make(m, ds, s);
        z.r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *z.r);
        assert_non_null(z.r);
        bf_campaign_opts o = {.threads = 2, .no_full_pass = 1, .on_trial = tc_keep, .user = &z};
        bf_campaign_result res;
        bf_error err = {0};
        if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s: %s", label, err.msg);
        assert_int_equal(res.trials_done, z.n);
        assert_int_equal(res.full_trials, 0);
        char l2[160];
        snprintf(l2, sizeof l2, "%s, never a full pass", label);
        tc_compare(fix, l2, &r[1], &z, scale, t);
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
        free(z.r);
    }
    if (exact_out) *exact_out = r[1];
    else free(r[1].r);
    free(r[0].r);
}

bf_campaign_spec tc_config_spec(const tc_config *cf, uint64_t seed, int64_t trials, int64_t batch, char **pats,
                                size_t n)
{
    bf_campaign_spec s = {0};
    s.seed = seed;
    s.trials = trials;
    s.target = cf->target;
    s.tensors = pats;
    s.n_tensors = n;
    s.model_kind = cf->kind;
    s.bits = cf->bits;
    s.repr = cf->repr;
    s.persistence = cf->persistence;
    s.critical_metric = -1;
    s.critical_delta = -1;
    s.batch = batch;
    return s;
}

bf_campaign_spec tc_base_spec(int64_t batch)
{
    bf_campaign_spec s = {0};
    s.target = BF_TARGET_WEIGHTS;
    s.model_kind = BF_FAULT_BITFLIP;
    s.bits = 1;
    s.repr = BF_REPR_FP32;
    s.critical_metric = -1;
    s.critical_delta = -1;
    s.batch = batch;
    return s;
}

bf_campaign_spec tc_site_spec(int64_t batch, uint64_t seed, int64_t trials, char **tensor, bf_target target, int bits,
                              bf_persistence persist)
{
    bf_campaign_spec s = tc_base_spec(batch);
    s.seed = seed;
    s.trials = trials;
    s.tensors = tensor;
    s.n_tensors = 1;
    s.target = target;
    s.bits = bits;
    s.persistence = persist;
    return s;
}

void tc_cap_init(tc_capture *c, int64_t n)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->rec = calloc((size_t)n + 1, sizeof *c->rec);
    assert_non_null(c->rec);
}

void tc_cap_free(tc_capture *c)
{
    free(c->rec);
    free(c->out);
}

void tc_cap_trial(void *user, const bf_trial_record *rec)
{
    tc_capture *c = user;
    if (rec->trial >= 0 && rec->trial < c->n) c->rec[rec->trial] = *rec;
}

void tc_cap_outputs(void *user, int64_t trial, const float *out, int64_t samples, int64_t cols)
{
    tc_capture *c = user;
    if (!c->out) {
        c->samples = samples;
        c->cols = cols;
        c->out = calloc((size_t)(c->n * samples * cols) + 1, sizeof(float));
        assert_non_null(c->out);
    }
    if (trial >= 0 && trial < c->n) memcpy(c->out + trial * samples * cols, out, (size_t)(samples * cols) * sizeof(float));
}

uint32_t tc_bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

float tc_float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

void tc_same_bits(float a, float b)
{
    if (tc_bits_of(a) != tc_bits_of(b)) fail_msg("%.9g (0x%08x) != %.9g (0x%08x)", a, tc_bits_of(a), b, tc_bits_of(b));
}
