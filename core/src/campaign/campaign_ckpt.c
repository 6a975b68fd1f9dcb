/* A one-sample graph's campaign (a detector: one image per call, steps
 * whose shapes are data) with the golden pass's checkpoints (exec/ckpt.h):
 * made before the golden pass, which records them; each trial's window
 * (the first and last step its faults touch) handed to the worker's
 * evaluator before its pass; what the trials re-ran, for --stats.
 * docs/ENGINE.md, "One image per call". */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"
#include "diff/diff.h"
#include "exec/ckpt.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"

/* Each step's golden time, from the second of two runs of sample 0 on ev's
 * plan: the first touches the plan's arena and scratch for the first time,
 * which made SSDlite's early steps look several times their cost and the
 * cuts' saving far larger than it was. */
static bf_status step_times(bf_evaluator *ev, double *cost, bf_error *err)
{
    bf_plan *p = bf__evaluator_plan(ev, 0);
    const bf_model *m = bf_plan_model(p);
    for (size_t i = 0; i < m->n_inputs; i++) {
        bf_status st = bf__eval_feed_sample(bf__evaluator_feed(ev, i), 0, bf_plan_input(p, i), err);
        if (st != BF_OK) return st;
    }
    bf__plan_watch w = {.step_time = cost};
    bf_status st = bf__plan_run_from(p, 0, &w, NULL, err);
    if (st != BF_OK) return st;
    memset(cost, 0, bf_plan_num_steps(p) * sizeof *cost);
    return bf__plan_run_from(p, 0, &w, NULL, err);
}

/* Each step's cost from its counted work (bf_campaign_prep.timed_costs 0):
 * the same on any machine. Nanoseconds a count, about this project's
 * kernels on one core (an AVX-512 product, an elementwise pass); a
 * dynamic step's shapes are data, so it counts a microsecond. */
#define NS_PER_MAC 0.03
#define NS_PER_ELEMENT 0.5
#define NS_DYNAMIC 1000.0
static void step_counts(bf_evaluator *ev, double *cost)
{
    bf_plan *p = bf__evaluator_plan(ev, 0);
    for (size_t i = 0; i < bf_plan_num_steps(p); i++) {
        int product = 0;
        double w = p->steps[i].dyn ? 0 : bf__dx_step_work(p, i, &product);
        cost[i] = 1e-9 * (p->steps[i].dyn ? NS_DYNAMIC : w * (product ? NS_PER_MAC : NS_PER_ELEMENT));
    }
}

/* The campaign's trials as the evaluator will see them (run_weight_trial,
 * run_value_trial: bf__campaign_ckpt_weights' and _values' calls), drawn
 * now, before the golden pass, exactly as the trials will draw them
 * (bf__campaign_draw is a function of the seed and the trial's number; a
 * shard's alone, t % N == I): the checkpoints' store then keeps only what
 * they put back (bf__ckpt_opts.drawn). Where they are not known here, as
 * campaign_golden.c's drawn_roots finds for the golden cache (fault groups,
 * mitigations, BER and profiled maps, adaptive sampling, dynamic and
 * kv_cache sites, more than DRAWN_MAX trials), NULL: the whole store. */
#define DRAWN_MAX (INT64_C(1) << 18)
static int drawn_known(const bf_campaign *c)
{
    const bf__faults *f = &c->faults;
    if (c->groups.n || c->protect.own_model || c->protect.ecc || c->protect.sbp_mask || c->protect.range_lo ||
        c->protect.range_plo || f->kind == BF_FAULT_BER || f->kind == BF_FAULT_PROFILED ||
        f->sampling == BF_SAMPLE_ADAPTIVE || f->target == BF_TARGET_KV_CACHE || c->surface.site_kv ||
        f->n_trials > DRAWN_MAX || (f->target == BF_TARGET_WEIGHTS ? !c->surface.site_param : !c->surface.site_value))
        return 0;
    for (size_t s = 0; s < c->surface.n_sites; s++)
        if (c->surface.sites[s].dynamic) return 0;
    return 1;
}

typedef struct drawn_ctx {
    const bf_campaign *c;
    const bf_campaign_prep *prep;
} drawn_ctx;

static bf_status drawn_trials(void *user, const bf__ckpt *ck, bf__ckpt_trial *tr, bf_error *err)
{
    const drawn_ctx *x = user;
    const bf_campaign *c = x->c;
    const bf_campaign_prep *prep = x->prep;
    int weights = c->faults.target == BF_TARGET_WEIGHTS;
    int sharded = prep->shard_count > 1 && prep->shard_index >= 0 && prep->shard_index < prep->shard_count;
    int64_t first = sharded ? prep->shard_index : 0, step = sharded ? prep->shard_count : 1;
    bf__draw d = {0};
    bf_status st = BF_OK;
    for (int64_t t = first; t < c->faults.n_trials; t += step) {
        if ((st = bf__campaign_draw(c, t, &d, err)) != BF_OK) break;
        bf__ckpt_trial_begin(ck, tr);
        for (size_t k = 0; k < d.n; k++) {
            const bf__efault *f = &d.f[k];
            if (!weights) {
                bf__ckpt_trial_value(ck, tr, c->surface.site_value[f->site]);
                continue;
            }
            size_t q = c->surface.site_param[f->site];
            int64_t at, stride, span = bf__fault_span(&c->store, q, f->index, &at, &stride);
            bf__ckpt_trial_param(ck, tr, q);
            for (int64_t j = 0; j < span; j++, at += stride) bf__ckpt_trial_element(ck, tr, q, at);
        }
        bf__ckpt_trial_end(ck, tr);
    }
    bf__draw_free(&d);
    return st;
}

const bf_host_pages *bf__campaign_host(bf_campaign *c, const bf_campaign_prep *prep)
{
    if (!c->host.measured) c->host = prep && prep->host_pages.measured ? prep->host_pages : bf_host_pages_measure();
    return &c->host;
}

bf_status bf__campaign_ckpt_prepare(bf_campaign *c, bf_evaluator *ev, const bf_campaign_prep *prep, bf_error *err)
{
    if (!bf_evaluator_unbatched(ev) || !prep || !prep->differential || c->gen.m > 0) return BF_OK;
    bf_plan *p = bf__evaluator_plan(ev, 0);
    const bf_model *m = c->model;
    size_t n = bf_plan_num_steps(p);
    int64_t samples = bf_dataset_num_samples(c->ds);
    double *cost = bf__calloc(n + 1, sizeof *cost);
    double *pm = bf__calloc(m->n_params + 1, sizeof *pm), *vm = bf__calloc(m->n_values + 1, sizeof *vm);
    bf_status st = BF_OK;
    if (!cost || !pm || !vm) { st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden checkpoints"); goto out; }
    if (!prep->timed_costs) step_counts(ev, cost);
    else if ((st = step_times(ev, cost, err)) != BF_OK) goto out;
    for (size_t s = 0; s < c->surface.n_sites; s++) {
        double e = (double)c->surface.sites[s].elements;
        if (c->surface.site_param) pm[c->surface.site_param[s]] += e;
        else if (c->surface.site_value && c->surface.site_value[s] >= 0) vm[c->surface.site_value[s]] += e;
    }
    int64_t budget = prep->cache_budget > 0 ? prep->cache_budget : BF_CACHE_BUDGET_DEFAULT;
    bf__ckpt *ck = NULL;
    drawn_ctx dx = {.c = c, .prep = prep};
    /* recorded bytes priced at what fresh pages cost this host (ckpt.h),
     * measured once a process by the caller or once a campaign, or as a
     * test pinned it (campaign_pin.h) */
    if (!(c->ckpt_price > 0)) {
        const bf_host_pages *h = bf__campaign_host(c, prep);
        c->ckpt_price = bf__ckpt_price_for(h->small_cost);
        c->ckpt_huge = h->huge;
    }
    /* image-major (campaign_imaj.c): one image's block, reused image after image */
    c->golden.imaj_off = bf__campaign_imaj_off(c, prep, drawn_known(c));
    bf__ckpt_opts co = {.drawn = drawn_known(c) ? drawn_trials : NULL, .user = &dx, .byte_s = c->ckpt_price,
                        .huge = c->ckpt_huge};
    if (!c->golden.imaj_off) {   /* a block a thread of the images asked for, or of as many as fit the default bytes */
        co.slots = bf__campaign_imaj_threads(c, prep) * (prep->image_block > 0 ? bf__campaign_imaj_block(c, prep) : 1);
        co.slot_bytes = prep->image_block > 0         ? 0
                        : prep->image_block_bytes > 0 ? prep->image_block_bytes
                                                      : BF_IMAJ_BLOCK_BYTES_DEFAULT;
    }
    if ((st = bf__ckpt_create(p, samples, c->faults.n_trials, cost, pm, vm, (size_t)budget, &co, &ck, err)) != BF_OK)
        goto out;
    if (bf__ckpt_num_cuts(ck) == 0) {   /* nothing fits or nothing to save: every trial in full */
        bf__ckpt_free(ck);
        goto out;
    }
    c->golden.ckpt = ck;
    st = bf__evaluator_ckpt(ev, NULL, ck, NULL, err);   /* the golden pass records them */
out:
    bf__free(cost);
    bf__free(pm);
    bf__free(vm);
    return st;
}

/* What the trial's faults reach (exec/ckpt.h): the steps reading each
 * faulted parameter, or computing each faulted value, and what depends on
 * them; the evaluator's next pass skips the rest. */
void bf__campaign_ckpt_mark(const bf__ckpt *ck, bf__ckpt_trial *tr, const struct bf__dx_weight *dw, size_t n)
{
    bf__ckpt_trial_begin(ck, tr);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || dw[i].param != dw[i - 1].param) bf__ckpt_trial_param(ck, tr, dw[i].param);
        bf__ckpt_trial_element(ck, tr, dw[i].param, dw[i].index);
    }
    bf__ckpt_trial_end(ck, tr);
}

void bf__campaign_ckpt_weights(const bf_campaign *c, bf_evaluator *ev, const struct bf__dx_weight *dw, size_t n)
{
    bf__ckpt_trial *tr = bf__evaluator_ckpt_trial(ev);
    if (tr) bf__campaign_ckpt_mark(c->golden.ckpt, tr, dw, n);
}

void bf__campaign_ckpt_values(const bf_campaign *c, bf_evaluator *ev, const bf_value_fault *vf, size_t n)
{
    bf__ckpt_trial *tr = bf__evaluator_ckpt_trial(ev);
    if (!tr) return;
    bf__ckpt_trial_begin(c->golden.ckpt, tr);
    for (size_t i = 0; i < n; i++) bf__ckpt_trial_value(c->golden.ckpt, tr, vf[i].value);
    bf__ckpt_trial_end(c->golden.ckpt, tr);
}

void bf__campaign_ckpt_summary(const bf_campaign *c, bf_evaluator *const *evs, int n, bf_campaign_result *acc)
{
    const bf__ckpt *ck = c->golden.ckpt;
    bf__ckpt_counts k = {0};
    for (int i = 0; i < n; i++) {
        if (!evs[i]) continue;
        bf__ckpt_counts e = bf__evaluator_ckpt_counts(evs[i]);
        bf__ckpt_counts_add(&k, &e);
    }
    acc->chan_steps += k.chan + k.chan_follow;
    acc->chan_kinds.ckpt_follow += k.chan_follow;
    acc->chan_kinds.ckpt_conv += k.chan;
    acc->chan_kinds.ckpt_fused += k.chan_fused;
    acc->ckpt.early_chan = k.chan_stop;
    acc->ckpt.early_tail = k.tail_stop;
    acc->ckpt.tail_off = bf__ckpt_tail_off(ck);
    acc->ckpt.cuts = bf__ckpt_num_cuts(ck);
    acc->ckpt.bytes = bf__ckpt_bytes(ck);
    acc->ckpt.expected_skip = bf__ckpt_saved_share(ck);
    acc->ckpt.early = k.early;
    acc->ckpt.skipped = k.skipped;
    acc->ckpt.stored = bf__ckpt_num_stored(ck);
    acc->ckpt.store_bytes = bf__ckpt_store_bytes(ck);
    acc->ckpt.byte_price = bf__ckpt_byte_price(ck);
    acc->ckpt.huge_pages = bf__ckpt_huge(ck);
    acc->ckpt.image_major = c->golden.imaj != NULL;
    acc->ckpt.imaj_off = c->golden.imaj_off;
    acc->ckpt.image_block = bf__campaign_imaj_block_ran(c);
    double pass = (double)bf__ckpt_pass_ns(ck) * (double)c->golden.samples * (double)acc->trials_done;
    acc->work_fraction = pass > 0 ? (double)k.work / pass : NAN;
}
