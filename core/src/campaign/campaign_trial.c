/* One trial of a campaign on a worker (campaign_run.c runs the workers):
 * its faults drawn, written into the worker's evaluator (weights) or handed
 * to its plans (activations, inputs), the pass run (differential or exact),
 * everything restored, the outcome classified (campaign_judge.c). */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/grow.h"
#include "campaign/campaign_impl.h"
#include "campaign/run.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"

/* --- one trial (campaign_judge.c classifies it) */

/* A trial through the differential executor: outputs from the golden pass
 * plus what the faults changed; metrics recomputed only if anything did.
 * *full 1: the executor found a full pass cheaper and ran nothing; the
 * caller runs the trial as the exact engine does. */
static bf_status run_differential(worker *w, const bf__dx_weight *dw, size_t n_dw, const bf_value_fault *vf, size_t n_vf,
                                  bf_eval_result *res, int *full)
{
    const bf_campaign *c = w->rn->c;
    const float *outs;
    const int64_t *rows;
    int64_t n_rows;
    w->rows = NULL;   /* unknown: classify scans every row */
    bf_status st = bf__dx_run(w->dx, dw, n_dw, vf, n_vf, &outs, &rows, &n_rows, w->vf_old, w->vf_new, full, &w->err);
    if (st != BF_OK || *full) return st;
    w->rows = rows;
    w->n_rows = n_rows;
    if (n_rows) {
        bf__score(w->rn->scorer, &w->sc, w->ev, outs, rows, n_rows, res);
        return BF_OK;
    }
    bf__eval_result_clear(res);
    res->task = c->golden.task;
    res->samples = c->golden.samples;
    res->out_cols = c->golden.out_cols;
    res->outputs = (float *)outs;
    res->accuracy = c->golden.metric[BF_METRIC_ACCURACY];
    res->auc = c->golden.metric[BF_METRIC_AUC];
    res->logloss = c->golden.metric[BF_METRIC_LOGLOSS];
    res->perplexity = c->golden.metric[BF_METRIC_PERPLEXITY];
    res->token_accuracy = c->golden.metric[BF_METRIC_TOKEN_ACCURACY];
    res->choice_accuracy = c->golden.metric[BF_METRIC_CHOICE_ACCURACY];
    res->miou = c->golden.metric[BF_METRIC_MIOU];
    res->pixel_accuracy = c->golden.metric[BF_METRIC_PIXEL_ACCURACY];
    res->map = c->golden.metric[BF_METRIC_MAP];
    res->map50 = c->golden.metric[BF_METRIC_MAP50];
    res->recall = c->golden.metric[BF_METRIC_RECALL];
    return BF_OK;
}

/* The places in a trial's record that group `group`'s faults (0: the
 * spec's own; g: fault group g) may fill: each later group with a fault
 * keeps one, so that a BER group of many flips leaves a trace of the rest. */
static int keep_for(const worker *w, size_t group)
{
    const bf_campaign *c = w->rn->c;
    int keep = BF_TRIAL_FAULTS_MAX;
    for (size_t k = group; k < c->groups.n; k++) keep -= w->dg[k].n > 0;
    return keep;
}

/* w->dw's entry for (param, index), or where a new one goes: its slot in
 * the open-addressed w->dw_at (which holds 1 + the entry, 0 when free). */
static size_t *dw_slot(worker *w, size_t param, int64_t index)
{
    uint64_t h = ((uint64_t)param * UINT64_C(0x9e3779b97f4a7c15)) ^ ((uint64_t)index * UINT64_C(0xbf58476d1ce4e5b9));
    size_t mask = w->dw_at_cap - 1;
    for (size_t i = (size_t)(h ^ h >> 29) & mask;; i = (i + 1) & mask) {
        size_t e = w->dw_at[i];
        if (!e || (w->dw[e - 1].param == param && w->dw[e - 1].index == index)) return &w->dw_at[i];
    }
}

/* Weights fault groups (after group 0, in order): each fault strikes the
 * value the trial's earlier faults left in that element (or the stored
 * one), so w->dw keeps one entry per element, the stored value and the
 * last; the evaluator gets each value as written. Records after group 0's.
 * The protections act as on group 0's faults: ECC rewrote a protected
 * value's faults as the bit flips its decoded word holds, SBP restores the
 * protected bits; the range check reads the values after (range_late). */
static bf_status group_weights(worker *w, bf_trial_record *rec, size_t *n_dw)
{
    const bf_campaign *c = w->rn->c;
    size_t more = 0;
    for (size_t g = 0; g < c->groups.n; g++) more += c->groups.sub[g]->faults.target == BF_TARGET_WEIGHTS ? w->dg[g].n : 0;
    if (!more) return BF_OK;
    size_t need = *n_dw + more, cap = 16;
    while (cap < 2 * need) cap *= 2;
    if (need > w->dw_cap) {
        bf__dx_weight *dw = bf__realloc(w->dw, need * sizeof *dw);
        if (!dw) return bf_error_set(&w->err, BF_ENOMEM, "out of memory for a trial's faults");
        w->dw = dw;
        w->dw_cap = need;
    }
    if (cap > w->dw_at_cap) {
        size_t *at = bf__realloc(w->dw_at, cap * sizeof *at);
        if (!at) return bf_error_set(&w->err, BF_ENOMEM, "out of memory for a trial's faults");
        w->dw_at = at;
        w->dw_at_cap = cap;
    }
    memset(w->dw_at, 0, w->dw_at_cap * sizeof *w->dw_at);
    for (size_t i = 0; i < *n_dw; i++) *dw_slot(w, w->dw[i].param, w->dw[i].index) = i + 1;
    bf_status st = BF_OK;
    for (size_t g = 0; g < c->groups.n && st == BF_OK; g++) {
        const bf_campaign *s = c->groups.sub[g];
        if (s->faults.target != BF_TARGET_WEIGHTS) continue;
        bf_fault_model kind = s->faults.kind == BF_FAULT_BER ? BF_FAULT_BITFLIP : s->faults.kind;
        int keep = keep_for(w, g + 1);
        for (size_t i = 0; i < w->dg[g].n && st == BF_OK; i++) {
            const bf__efault *f = &w->dg[g].f[i];
            size_t p = s->surface.site_param[f->site], *at = dw_slot(w, p, f->index);
            float old = *at ? w->dw[*at - 1].new_value : bf__stored(&c->store, p, f->index);
            float now = bf__wcorrupt(&c->store, p, old, bf__ecc_covers(c, g + 1, f->site) ? BF_FAULT_BITFLIP : kind, f);
            bf__mitigate_group_weight(c, s, f, old, &now);
            if (!*at) {
                w->dw[*n_dw] = (bf__dx_weight){.param = p, .index = f->index, .old_value = old, .new_value = now};
                *at = ++*n_dw;
            } else {
                w->dw[*at - 1].new_value = now;
            }
            st = bf_evaluator_write_param(w->ev, p, f->index, now, &w->err);
            if (rec->n_kept < keep)
                rec->faults[rec->n_kept++] = (bf_applied_fault){.site = f->site, .index = f->index, .sample = -1,
                                                                .mask = f->mask | f->set0 | f->set1, .old_value = old,
                                                                .new_value = now, .group = (int)g + 1};
        }
    }
    return st;
}

/* The range check with weights fault groups: each value the trial wrote,
 * as every group's faults left it, against its tensor's bounds; out of
 * range it is zeroed (in the evaluator, w->dw, and the record of the last
 * fault on it) or, flagging, the trial is DUE. */
static bf_status range_late(worker *w, bf_trial_record *rec, size_t n_dw)
{
    const bf_campaign *c = w->rn->c;
    const float *lo = c->protect.range_plo, *hi = c->protect.range_phi;
    for (size_t i = 0; i < n_dw; i++) {
        bf__dx_weight *x = &w->dw[i];
        if (lo[x->param] > hi[x->param] || (x->new_value >= lo[x->param] && x->new_value <= hi[x->param])) continue;
        if (c->protect.range_flag) return bf_error_set(&w->err, BF_EDETECTED, "range check: a stored value is out of range");
        x->new_value = 0;
        bf_status st = bf_evaluator_write_param(w->ev, x->param, x->index, 0, &w->err);
        if (st != BF_OK) return st;
        for (int k = rec->n_kept; k-- > 0;) {
            bf_applied_fault *a = &rec->faults[k];
            const bf_campaign *s = a->group ? c->groups.sub[a->group - 1] : c;
            if (s->faults.target != BF_TARGET_WEIGHTS || s->surface.site_param[a->site] != x->param || a->index != x->index) continue;
            a->new_value = 0;
            break;
        }
    }
    return BF_OK;
}

/* Fault groups 1.. (campaign_groups.c): trial t's draws of every group,
 * on activations, as value faults into w->vf (group by group, in order),
 * their count in *n. They run in the same pass as group 0's weight faults. */
static bf_status group_values(worker *w, size_t *n)
{
    const bf_campaign *c = w->rn->c;
    size_t total = 0;
    for (size_t g = 0; g < c->groups.n; g++) total += c->groups.sub[g]->faults.target == BF_TARGET_WEIGHTS ? 0 : w->dg[g].n;
    *n = 0;
    if (total > w->vf_cap) {
        bf_value_fault *vf = bf__realloc(w->vf, total * sizeof *vf);
        if (!vf) return bf_error_set(&w->err, BF_ENOMEM, "out of memory for a trial's faults");
        w->vf = vf;
        float *o = bf__realloc(w->vf_old, 2 * total * sizeof *o);
        if (!o) return bf_error_set(&w->err, BF_ENOMEM, "out of memory for a trial's faults");
        w->vf_old = o;
        w->vf_new = o + total;
        w->vf_cap = total;
    }
    for (size_t g = 0; g < c->groups.n; g++) {
        const bf_campaign *s = c->groups.sub[g];
        bf_fault_model kind = s->faults.kind == BF_FAULT_BER ? BF_FAULT_BITFLIP : s->faults.kind;
        for (size_t i = 0; s->faults.target != BF_TARGET_WEIGHTS && i < w->dg[g].n; i++) {
            const bf__efault *f = &w->dg[g].f[i];
            w->vf[(*n)++] = (bf_value_fault){.value = s->surface.site_value[f->site], .sample = f->sample, .index = f->index,
                                             .model = kind, .mask = bf__mitigate_value_mask(s, f), .repr = s->store.repr,
                                             .scale = s->surface.site_scale[f->site]};
        }
    }
    return BF_OK;
}

/* ... and their records after group 0's (as many as the record keeps):
 * what each found and left, from the differential run or (full) the
 * evaluator's pass, whose value faults are cleared here. */
static void group_records(worker *w, bf_trial_record *rec, int full, bf_status st)
{
    const bf_campaign *c = w->rn->c;
    size_t k = 0;
    for (size_t g = 0; g < c->groups.n; g++) {
        if (c->groups.sub[g]->faults.target == BF_TARGET_WEIGHTS) continue;   /* group_weights recorded them */
        int keep = keep_for(w, g + 1);
        for (size_t i = 0; i < w->dg[g].n; i++, k++) {
            if ((st != BF_OK && st != BF_EDETECTED) || rec->n_kept >= keep) continue;
            const bf__efault *f = &w->dg[g].f[i];
            bf_applied_fault *a = &rec->faults[rec->n_kept++];
            *a = (bf_applied_fault){.site = f->site, .index = f->index, .sample = f->sample, .mask = f->mask, .group = (int)g + 1};
            if (full) bf_evaluator_value_fault_seen(w->ev, k, &a->old_value, &a->new_value);
            else a->old_value = w->vf_old[k], a->new_value = w->vf_new[k];
        }
    }
    if (full) bf_evaluator_set_value_faults(w->ev, NULL, 0, &w->err);
}

/* Weights: each fault written into every plan's copy of its parameter for
 * the pass, then the stored values written back. */
bf_status bf__campaign_fault_writes(const bf_campaign *c, size_t p, int64_t index, float old, float now,
                                   bf__dx_weight **dw, size_t *cap, size_t *n, bf_error *err)
{
    int64_t at, stride, span = bf__fault_span(&c->store, p, index, &at, &stride);
    if (!bf__grow(dw, cap, *n + (size_t)span, sizeof **dw, 16))
        return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's faults");
    for (int64_t j = 0; j < span; j++, at += stride) {
        float ov = c->store.scales ? bf__stored_weight(&c->store, p, at) : old;
        float nv = c->store.scales ? bf__rescaled(&c->store, p, at, now) : now;
        (*dw)[(*n)++] = (bf__dx_weight){.param = p, .index = at, .old_value = ov, .new_value = nv};
    }
    return BF_OK;
}

static bf_status run_weight_trial(worker *w, bf_trial_record *rec, bf_eval_result *res)
{
    const bf_campaign *c = w->rn->c;
    const bf__draw *d = &w->d;
    /* the record keeps a place for each other group's first fault: a BER
     * group 0 of many flips would otherwise leave no trace of them */
    int keep0 = keep_for(w, 0);
    bf_status st = c->protect.ecc ? bf__ecc_apply(c, &w->d, w->dg, rec->trial, rec, &w->err) : BF_OK;   /* BF_EDETECTED: DUE */
    if (st == BF_EDETECTED && c->groups.n) {
        /* ECC detected group 0's error: nothing runs, so the other groups'
         * faults are recorded as drawn, their values NaN (never applied) */
        if (rec->n_kept > keep0) rec->n_kept = keep0;
        for (size_t g = 0; g < c->groups.n; g++)
            for (size_t i = 0; i < w->dg[g].n && rec->n_kept < keep_for(w, g + 1); i++) {
                const bf__efault *f = &w->dg[g].f[i];
                rec->faults[rec->n_kept++] = (bf_applied_fault){.site = f->site, .index = f->index, .sample = f->sample,
                                                                .mask = f->mask, .old_value = NAN, .new_value = NAN,
                                                                .group = (int)g + 1};
            }
    }
    if (st != BF_OK) return st;
    if (d->n > w->old_cap) {
        float *o = bf__realloc(w->old, d->n * sizeof *o);
        if (!o) return bf_error_set(&w->err, BF_ENOMEM, "out of memory for a trial's faults");
        w->old = o;
        w->old_cap = d->n;
    }
    bf_fault_model kind = c->faults.kind == BF_FAULT_BER || c->protect.ecc ? BF_FAULT_BITFLIP : c->faults.kind;
    size_t applied = 0, n_dw = 0;   /* dw: every weight written, to restore (a scale fault writes its group) */
    for (; applied < d->n && st == BF_OK; applied++) {
        const bf__efault *f = &d->f[applied];
        size_t p = c->surface.site_param[f->site];
        float old = bf__stored(&c->store, p, f->index);
        float now = bf__wcorrupt(&c->store, p, old, kind, f);
        if ((c->protect.sbp_mask || c->protect.range_lo) && bf__mitigate_weight(c, f, old, kind, &now)) {
            /* the range check flagged it at load: nothing runs */
            if (rec->n_kept < keep0)
                rec->faults[rec->n_kept++] = (bf_applied_fault){.site = f->site, .index = f->index, .sample = -1,
                                                                .mask = f->mask | f->set0 | f->set1, .old_value = old,
                                                                .new_value = now};
            st = bf_error_set(&w->err, BF_EDETECTED, "range check: a stored value is out of range");
            break;
        }
        w->old[applied] = old;
        size_t from = n_dw;
        if ((st = bf__campaign_fault_writes(c, p, f->index, old, now, &w->dw, &w->dw_cap, &n_dw, &w->err)) != BF_OK) break;
        for (size_t j = from; j < n_dw && st == BF_OK; j++)   /* restored below: those written */
            if ((st = bf_evaluator_write_param(w->ev, p, w->dw[j].index, w->dw[j].new_value, &w->err)) != BF_OK) n_dw = j;
        if (st != BF_OK) break;
        if (rec->n_kept < keep0)
            rec->faults[rec->n_kept++] = (bf_applied_fault){.site = f->site, .index = f->index, .sample = -1,
                                                            .mask = f->mask | f->set0 | f->set1, .old_value = old,
                                                                .new_value = now};
    }
    int full = w->dx == NULL;
    size_t n_dw0 = n_dw;   /* group 0's writes; the weights groups' follow */
    if (st == BF_OK && c->groups.n) st = group_weights(w, rec, &n_dw);
    if (st == BF_OK && c->protect.range_late) st = range_late(w, rec, n_dw);
    w->n_dw = n_dw;
    size_t n_vf = 0;   /* the other fault groups' value faults (campaign_groups.c) */
    if (st == BF_OK && c->groups.n) st = group_values(w, &n_vf);
    if (st == BF_OK && w->dx) st = run_differential(w, w->dw, n_dw, n_vf ? w->vf : NULL, n_vf, res, &full);
    if (st == BF_OK && full && w->rn->ckpt) bf__campaign_ckpt_weights(c, w->ev, w->dw, n_dw);
    if (st == BF_OK && full && n_vf) st = bf_evaluator_set_value_faults(w->ev, w->vf, n_vf, &w->err);
    if (st == BF_OK && full)   /* an image-major sweep ran it already (campaign_imaj.c) */
        st = w->rn->ckpt && bf__campaign_imaj_has(c, rec->trial)
                 ? bf__campaign_imaj_result(c, w->ev, rec->trial, res, &w->err)
                 : bf_evaluator_run(w->ev, NULL, 0, res, &w->err);
    if (n_vf) group_records(w, rec, full, st);
    /* Restore in reverse order, exactly the stored values, whatever happened. */
    for (size_t i = n_dw; i-- > 0;) {
        bf_status u = bf_evaluator_write_param(w->ev, w->dw[i].param, w->dw[i].index, w->dw[i].old_value, &w->err);
        if (u != BF_OK && st == BF_OK) st = u;
    }
    /* every fault written back: the plans read the model's tensors again
     * and the private pages go (a BER trial's thousands are not kept until
     * the next); once per tensor (a BER draw lists its faults by tensor) */
    for (size_t i = 0; st == BF_OK && i < applied; i++)
        if (i == 0 || d->f[i].site != d->f[i - 1].site)
            bf__evaluator_param_golden(w->ev, c->surface.site_param[d->f[i].site]);
    for (size_t i = n_dw0; st == BF_OK && i < n_dw; i++)   /* weights groups' (group_weights) */
        if (i == n_dw0 || w->dw[i].param != w->dw[i - 1].param) bf__evaluator_param_golden(w->ev, w->dw[i].param);
    if (c->protect.ecc) bf__ecc_record(c, d, rec);
    return st;
}

/* Activations and inputs: value faults the evaluator's plans apply during
 * the pass (every sample, or the one a transient fault hits); what each
 * found and left is read back for the record. */
static bf_status run_value_trial(worker *w, bf_trial_record *rec, bf_eval_result *res)
{
    const bf_campaign *c = w->rn->c;
    const bf__draw *d = &w->d;
    if (d->n > w->vf_cap) {
        bf_value_fault *vf = bf__realloc(w->vf, d->n * sizeof *vf);
        if (!vf) return bf_error_set(&w->err, BF_ENOMEM, "out of memory for a trial's faults");
        w->vf = vf;
        float *o = bf__realloc(w->vf_old, 2 * d->n * sizeof *o);
        if (!o) return bf_error_set(&w->err, BF_ENOMEM, "out of memory for a trial's faults");
        w->vf_old = o;
        w->vf_new = o + d->n;
        w->vf_cap = d->n;
    }
    bf_fault_model kind = c->faults.kind == BF_FAULT_BER ? BF_FAULT_BITFLIP : c->faults.kind;
    for (size_t i = 0; i < d->n; i++) {
        const bf__efault *f = &d->f[i];
        w->vf[i] = (bf_value_fault){.value = c->surface.site_value[f->site], .sample = f->sample, .index = f->index,
                                    .model = kind, .mask = bf__mitigate_value_mask(c, f), .repr = c->store.repr,
                                    .scale = c->surface.site_scale[f->site],
                                    .drawn = c->surface.sites[f->site].dynamic && c->faults.sampling != BF_SAMPLE_LIST};
    }
    int full = w->dx == NULL;
    if (w->dx) {
        bf_status st = run_differential(w, NULL, 0, w->vf, d->n, res, &full);
        for (size_t i = 0; !full && (st == BF_OK || st == BF_EDETECTED) && i < d->n && i < BF_TRIAL_FAULTS_MAX; i++) {
            const bf__efault *f = &d->f[i];
            rec->faults[rec->n_kept++] = (bf_applied_fault){.site = f->site, .index = f->index, .sample = f->sample,
                                                            .mask = f->mask, .old_value = w->vf_old[i], .new_value = w->vf_new[i]};
        }
        if (st != BF_OK || !full) return st;
    }
    bf_status st = bf_evaluator_set_value_faults(w->ev, w->vf, d->n, &w->err);
    if (w->rn->ckpt) bf__campaign_ckpt_values(c, w->ev, w->vf, d->n);
    /* A transient trial's faults all hit one sample (the draw makes sure):
     * every other batch would reproduce the golden outputs bit for bit
     * (worker_init checked this evaluator's golden pass), so only that
     * sample's batch is computed (BER with no flip: batch 0, golden). */
    if (st == BF_OK && c->faults.persistence == BF_PERSIST_TRANSIENT)
        st = bf_evaluator_run_sample(w->ev, d->n ? d->f[0].sample : 0, c->golden.out, res, &w->err);
    else if (st == BF_OK)
        st = bf_evaluator_run(w->ev, NULL, 0, res, &w->err);
    for (size_t i = 0; (st == BF_OK || st == BF_EDETECTED) && i < d->n && i < BF_TRIAL_FAULTS_MAX; i++) {
        const bf__efault *f = &d->f[i];
        bf_applied_fault *a = &rec->faults[rec->n_kept++];
        *a = (bf_applied_fault){.site = f->site, .index = f->index, .sample = f->sample, .mask = f->mask};
        bf_evaluator_value_fault_seen(w->ev, i, &a->old_value, &a->new_value);
        if (c->surface.sites[f->site].dynamic) bf__evaluator_value_fault_at(w->ev, i, &a->index, &a->run_elements);
    }
    bf_status u = bf_evaluator_set_value_faults(w->ev, NULL, 0, &w->err);
    return st != BF_OK ? st : u;
}

/* A detector's trial, image by image against the golden detections
 * (metrics_det.h's rule): w->det_crit[i] 1 when image i is critical. An
 * image whose outputs are bit-identical is not looked at. */
static bf_status det_judge(worker *w, const bf_eval_result *res)
{
    const bf_campaign *c = w->rn->c;
    int64_t n = c->golden.samples;
    if (!w->det_crit && !(w->det_crit = bf__calloc((size_t)n + 1, sizeof *w->det_crit)))
        return bf_error_set(&w->err, BF_ENOMEM, "out of memory for a trial's per-image outcomes");
    bf__dets faulty;
    bf_status st = bf__det_view(&c->golden.det.task, res->ragged, n, &w->det_labels, &w->det_cap, &faulty, &w->err);
    for (int64_t i = 0; st == BF_OK && i < n; i++) {
        int crit = 0;
        if (!bf__ragged_sample_same(res->ragged, c->golden.rag.view, res->n_ragged, i))
            st = bf__det_image_critical(&c->golden.det.view, &faulty, i, c->judge.critical_score, &crit, &w->err);
        w->det_crit[i] = crit;
    }
    return st;
}

bf_status bf__run_trial(worker *w, int64_t t, bf_trial_record *rec, bf__first *first, float *outputs, bf__ragcopy *rag)
{
    w->sc.has_pred = 0;
    const bf_campaign *c = w->rn->c;
    bf_status st = bf__campaign_draw(c, t, &w->d, &w->err);
    if (st != BF_OK) return st;
    const bf__draw *d = &w->d;
    memset(rec, 0, sizeof *rec);
    rec->trial = t;
    rec->rate_index = d->rate_index;
    rec->n_faults = d->n_faults;
    first->bit = d->first_bit;
    if (c->groups.n && (st = bf__campaign_groups_draw(c, t, w->dg, &w->err)) != BF_OK) return st;
    for (size_t g = 0; g < c->groups.n; g++) {
        rec->n_faults += w->dg[g].n_faults;
        /* a BER group's trial is its rate's, as group 0's is (bf__result_fold) */
        int ber = c->groups.sub[g]->faults.kind == BF_FAULT_BER;
        first->gsite[g] = !ber && w->dg[g].n ? w->dg[g].f[0].site : -1;
        first->gbit[g] = !ber && w->dg[g].n ? w->dg[g].first_bit : -1;
    }
    bf_eval_result res;
    st = c->faults.target == BF_TARGET_WEIGHTS ? run_weight_trial(w, rec, &res) : run_value_trial(w, rec, &res);
    if (st == BF_EDETECTED) {
        /* A detector fired (ABFT, the range check): the trial is DUE. Its
         * metrics are the golden ones, since a system that detects an error
         * re-executes from a clean state rather than use the outputs. */
        w->rows = NULL;
        w->n_rows = 0;
        rec->outcome = BF_OUTCOME_DUE;
        rec->changed = 0;
        for (int m = 0; m < BF_METRIC_COUNT; m++)
            rec->metrics[m] = c->judge.metrics >> m & 1 ? c->golden.metric[m] : NAN;
        if (outputs) memcpy(outputs, c->golden.out, (size_t)(c->golden.samples * c->golden.out_cols) * sizeof *outputs);
        return rag ? bf__ragcopy_set(rag, c->golden.rag.view, c->golden.rag.n, c->golden.samples, &w->err) : BF_OK;
    }
    if (st != BF_OK) return st;
    double gen[3];
    int weights = c->faults.target == BF_TARGET_WEIGHTS;
    if (w->gen && (st = bf__campaign_gen_trial(c, w->gen, weights ? w->dw : NULL, weights ? w->n_dw : 0, weights ? NULL : w->vf,
                                               weights ? 0 : d->n, w->gen_tokens, gen, &w->err)) != BF_OK)
        return st;
    /* the scorer's argmax of each changed row, when it took them of these rows */
    int rows_known = w->dx && w->rows && w->rn->golden_finite;
    const int64_t *pred = rows_known && w->sc.has_pred ? w->sc.pred : NULL;
    if (c->golden.task == BF_TASK_DETECTION) {   /* the exact engine's pass: every image, in order */
        if ((st = det_judge(w, &res)) != BF_OK) return st;
        pred = w->det_crit;
        rows_known = 0;
    }
    bf__classify(c, &res, rows_known ? w->rows : NULL, w->n_rows, pred, w->gen ? gen : NULL, rec);
    if (outputs) memcpy(outputs, res.outputs, (size_t)(c->golden.samples * c->golden.out_cols) * sizeof *outputs);
    return rag ? bf__ragcopy_set(rag, res.ragged, res.n_ragged, c->golden.samples, &w->err) : BF_OK;
}
