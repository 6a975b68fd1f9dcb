/* A campaign's protections (bitflip/mitigate.h): the graph ones through
 * mitigate.c, and the fault filters, which act on each fault as drawn, so
 * that every configuration of a paired comparison sees the same draws. */
#include <fnmatch.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"
#include "mitigate/mitigate_impl.h"

/* Sign and exponent: the bits whose flips do the damage; for fixed point
 * the most significant bit (the sign of int<m>, half the range of uint<m>). */
static uint32_t default_protected(bf_repr r)
{
    switch (r) {
    case BF_REPR_FP32: return 0xFF800000u;   /* 31..23 */
    case BF_REPR_FP16: return 0xFC00u;       /* 15..10 */
    case BF_REPR_BF16: return 0xFF80u;       /* 15..7 */
    default: return bf_repr_is_fixed(r) ? 1u << (bf_repr_bits(r) - 1) : 0;
    }
}

/* As the campaign's own patterns: the ONNX name or the PyTorch one. */
int bf__site_matches(const char *pat, const bf_site *s)
{
    if (strncmp(pat, "op:", 3) == 0) return s->op && strcmp(s->op, pat + 3) == 0;
    return strcmp(pat, s->name) == 0 || fnmatch(pat, s->name, 0) == 0 ||
           (s->torch_name && (strcmp(pat, s->torch_name) == 0 || fnmatch(pat, s->torch_name, 0) == 0));
}

/* SBP's masks on c's sites (c: the campaign, or one of its fault groups,
 * each in its own representation); need_hit: 'tensors' must match one of
 * them (group 0; a group may have none of the protected tensors). */
static bf_status setup_sbp(bf_campaign *c, const bf_sbp_opts *o, int need_hit, bf_error *err)
{
    uint32_t mask = 0;
    for (int i = 0; i < o->n_positions; i++) {
        if (o->positions[i] < 0 || o->positions[i] >= c->store.repr_bits)
            return bf_error_set(err, BF_EINVAL, "sbp: bit %d does not exist in %s (bits 0-%d)", o->positions[i],
                                bf_repr_name(c->store.repr), c->store.repr_bits - 1);
        mask |= 1u << o->positions[i];
    }
    if (!o->n_positions) mask = default_protected(c->store.repr);
    if (c->faults.kind == BF_FAULT_RANDOM_VALUE && c->faults.target != BF_TARGET_WEIGHTS)
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "sbp with random_value faults is only for weights: on activations and inputs the value a "
                            "fault replaces is not known until the pass runs");
    c->protect.sbp_mask = bf__calloc(c->surface.n_sites + 1, sizeof *c->protect.sbp_mask);
    if (!c->protect.sbp_mask) return bf_error_set(err, BF_ENOMEM, "out of memory");
    size_t hit = 0;
    for (size_t s = 0; s < c->surface.n_sites; s++) {
        int on = o->n_tensors == 0;
        for (size_t i = 0; !on && i < o->n_tensors; i++) on = bf__site_matches(o->tensors[i], &c->surface.sites[s]);
        if (on) c->protect.sbp_mask[s] = mask, hit++;
    }
    if (!hit && need_hit) return bf_error_set(err, BF_ENOTFOUND, "sbp: no fault site matches its 'tensors'");
    return BF_OK;
}

static bf_status setup_range(bf_campaign *c, const bf_range_opts *o, bf_error *err)
{
    if (c->faults.target != BF_TARGET_WEIGHTS)
        return bf_error_set(err, BF_EUNSUPPORTED, "range checks stored weights: it needs faults with target 'weights'");
    c->protect.range_lo = bf__malloc((c->surface.n_sites + 1) * sizeof *c->protect.range_lo);
    c->protect.range_hi = bf__malloc((c->surface.n_sites + 1) * sizeof *c->protect.range_hi);
    if (!c->protect.range_lo || !c->protect.range_hi) return bf_error_set(err, BF_ENOMEM, "out of memory");
    c->protect.range_flag = o->flag;
    for (size_t s = 0; s < c->surface.n_sites; s++) {
        if (o->declared) {
            c->protect.range_lo[s] = o->lo;
            c->protect.range_hi[s] = o->hi;
            continue;
        }
        size_t p = c->surface.site_param[s];
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < c->surface.sites[s].elements; i++) {
            float v = bf__stored(&c->store, p, i);
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
        c->protect.range_lo[s] = lo;
        c->protect.range_hi[s] = hi;
    }
    return BF_OK;
}

bf_status bf__campaign_mitigate(bf_campaign *c, const bf_mitigation *mit, bf_error *err)
{
    bf_status st;
    if (mit->sbp.enabled && (st = setup_sbp(c, &mit->sbp, 1, err)) != BF_OK) return st;
    if (mit->range.enabled && (st = setup_range(c, &mit->range, err)) != BF_OK) return st;
    if (mit->ecc.enabled && (st = bf__ecc_setup(c, &mit->ecc, err)) != BF_OK) return st;
    if (!mit->clip.enabled && !mit->abft.enabled) return BF_OK;
    st = bf__mitigate_model(c->model, c->ds, (const float *const *)c->store.values, c->batch, mit, &c->protect.own_model, err);
    if (st != BF_OK) return bf_error_prefix(err, "mitigation '%s'", mit->name ? mit->name : "");
    c->model = c->store.model = c->protect.own_model;
    return BF_OK;
}

/* The range check's bounds per parameter, for every weights site of c and
 * of its weights groups: declared, or the stored tensor's own range. */
static bf_status setup_range_late(bf_campaign *c, const bf_range_opts *o, bf_error *err)
{
    const bf_model *m = c->store.model;
    c->protect.range_plo = bf__malloc((m->n_params + 1) * sizeof *c->protect.range_plo);
    c->protect.range_phi = bf__malloc((m->n_params + 1) * sizeof *c->protect.range_phi);
    if (!c->protect.range_plo || !c->protect.range_phi) return bf_error_set(err, BF_ENOMEM, "out of memory");
    for (size_t p = 0; p < m->n_params; p++) c->protect.range_plo[p] = 1, c->protect.range_phi[p] = 0;   /* unset */
    for (size_t g = 0; g <= c->groups.n; g++) {
        const bf_campaign *s = g ? c->groups.sub[g - 1] : c;
        if (s->faults.target != BF_TARGET_WEIGHTS) continue;
        for (size_t k = 0; k < s->surface.n_sites; k++) {
            size_t p = s->surface.site_param[k];
            float lo = o->declared ? o->lo : INFINITY, hi = o->declared ? o->hi : -INFINITY;
            for (int64_t i = 0; !o->declared && i < s->surface.sites[k].elements; i++) {
                float v = bf__stored(&c->store, p, i);
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
            c->protect.range_plo[p] = lo, c->protect.range_phi[p] = hi;
        }
    }
    c->protect.range_late = 1;
    return BF_OK;
}

bf_status bf__campaign_groups_mitigate(bf_campaign *c, const bf_mitigation *mit, bf_error *err)
{
    bf_status st;
    int weights = 0;
    for (size_t g = 0; g < c->groups.n; g++) {
        bf_campaign *s = c->groups.sub[g];
        weights |= s->faults.target == BF_TARGET_WEIGHTS;
        if (mit->sbp.enabled && (st = setup_sbp(s, &mit->sbp, 0, err)) != BF_OK)
            return bf_error_prefix(err, "faults.%zu", g + 1);
        if (mit->ecc.enabled && s->faults.target == BF_TARGET_WEIGHTS && (st = bf__ecc_add_group(c, g, &mit->ecc, err)) != BF_OK)
            return bf_error_prefix(err, "faults.%zu", g + 1);
    }
    /* one group on weights: its faults are checked as they land, as ever */
    if (mit->range.enabled && weights && (st = setup_range_late(c, &mit->range, err)) != BF_OK) return st;
    return BF_OK;
}

void bf__mitigate_group_weight(const bf_campaign *c, const bf_campaign *s, const bf__efault *f, float old, float *now)
{
    uint32_t keep = s->protect.sbp_mask ? s->protect.sbp_mask[f->site] : 0;
    if (!keep) return;
    size_t p = s->surface.site_param[f->site];
    uint32_t ob = bf__wencode(&c->store, p, f->index, old), nb = bf__wencode(&c->store, p, f->index, *now);
    *now = bf__wdecode(&c->store, p, f->index, (nb & ~keep) | (ob & keep));
}

int bf__mitigate_weight(const bf_campaign *c, const bf__efault *f, float old, bf_fault_model kind, float *now)
{
    uint32_t keep = c->protect.sbp_mask ? c->protect.sbp_mask[f->site] : 0;
    if (keep) {
        /* ECC on the protected bits: they read back as stored */
        size_t p = c->surface.site_param[f->site];
        uint32_t ob = bf__wencode(&c->store, p, f->index, old);
        uint32_t nb = bf__fault_bits(&c->store, ob, kind, f);
        *now = bf__wdecode(&c->store, p, f->index, (nb & ~keep) | (ob & keep));
    }
    if (c->protect.range_lo && !c->protect.range_late &&
        !(*now >= c->protect.range_lo[f->site] && *now <= c->protect.range_hi[f->site])) {
        if (c->protect.range_flag) return 1;
        *now = 0;
    }
    return 0;
}

uint32_t bf__mitigate_value_mask(const bf_campaign *c, const bf__efault *f)
{
    return c->protect.sbp_mask ? f->mask & ~c->protect.sbp_mask[f->site] : f->mask;
}

/* --- what the protections cost */

double bf_campaign_storage_overhead(const bf_campaign *c)
{
    const bf_model *m = c->protect.base_model ? c->protect.base_model : c->model;
    double all = (double)bf_model_param_elements(m) * (c->faults.target == BF_TARGET_WEIGHTS ? c->store.repr_bits : 32), extra = 0;
    if (all <= 0) return 0;
    for (size_t s = 0; c->protect.sbp_mask && s < c->surface.n_sites; s++) {
        uint32_t k = c->protect.sbp_mask[s];
        int bits = 0;
        for (; k; k &= k - 1) bits++;
        /* activation sites protect one buffer per sample slot: counted once */
        extra += (double)bits * (double)c->surface.sites[s].elements;
    }
    /* a fault group's SBP-protected tensors that no earlier group names
     * (by name: a weights group's tensor may be group 0's) */
    for (size_t g = 0; g < c->groups.n; g++)
        for (size_t k = 0; c->groups.sub[g]->protect.sbp_mask && k < c->groups.sub[g]->surface.n_sites; k++) {
            const bf_campaign *s = c->groups.sub[g];
            int seen = 0;
            for (size_t h = 0; !seen && h <= g; h++) {
                const bf_campaign *o = h ? c->groups.sub[h - 1] : c;
                for (size_t j = 0; !seen && j < o->surface.n_sites; j++) seen = !strcmp(o->surface.sites[j].name, s->surface.sites[k].name);
            }
            int bits = 0;
            for (uint32_t m = s->protect.sbp_mask[k]; m; m &= m - 1) bits++;
            if (!seen) extra += (double)bits * (double)s->surface.sites[k].elements;
        }
    if (c->protect.range_lo) extra += 64.0 * (double)c->surface.n_sites;   /* two floats per tensor */
    extra += bf__ecc_storage_bits(c);   /* 8 check bits per 64-bit word */
    if (c->protect.own_model)   /* ABFT checksums and clip bounds: the values the derived model added */
        for (size_t v = m->n_values; v < c->protect.own_model->n_values; v++) {
            const bf__value *val = &c->protect.own_model->values[v];
            if (val->kind == BF__VAL_CONST && val->init) extra += 32.0 * (double)bf_tensor_numel(val->init);
            else if (val->kind == BF__VAL_NODE && val->producer >= 0 &&
                     strcmp(c->protect.own_model->nodes[val->producer].op_type, "bf.Clip") == 0)
                extra += 64.0;
        }
    return extra / all;
}

bf_status bf_campaign_golden_seconds(const bf_campaign *c, int repeats, double *seconds, bf_error *err)
{
    bf_evaluator *ev = NULL;
    bf_eval_opts eo = {.batch = c->batch, .threads = 1, .max_run_bytes = c->max_run_bytes};
    bf_status st = bf_evaluator_create(c->model, c->ds, &eo, &ev, err);
    for (size_t p = 0; st == BF_OK && p < c->model->n_params; p++)
        if (c->store.values[p]) st = bf_evaluator_set_param(ev, p, c->store.values[p], err);
    double best = INFINITY;
    for (int r = 0; st == BF_OK && r < (repeats > 0 ? repeats : 1); r++) {
        struct timespec a, b;
        bf_eval_result res;
        clock_gettime(CLOCK_MONOTONIC, &a);
        st = bf_evaluator_run(ev, NULL, 0, &res, err);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double t = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        if (t < best) best = t;
    }
    bf_evaluator_free(ev);
    *seconds = best;
    return st;
}
