/* Fault groups 1.. (bf_campaign_spec.groups; docs/CAMPAIGNS.md, "Fault
 * groups"): each is drawn by a campaign of its own that only draws, made
 * from a spec that is the parent's with the group's fault fields, so it
 * resolves its sites and bits, and draws, exactly as a one-group campaign
 * with those fields would (campaign.c, campaign_sample.c). Its seed is
 * derived from the spec's and the group's index, a stream of its own:
 * group 0's draws are the same with or without the other groups. */
#include <string.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"

/* Group g's seed: the first word of the spec seed's stream 2^64 - g, a
 * stream no trial uses (trials are 0 .. BF_SPEC_MAX_TRIALS - 1). */
static uint64_t group_seed(uint64_t seed, size_t g)
{
    bf_rng r = bf_rng_make(seed, UINT64_MAX - (uint64_t)g);
    return bf_rng_u64(&r);
}

/* The spec a group's campaign draws with. It starts from nothing and takes
 * from the parent only what a group shares: the model, the eval set, the
 * seed (replaced by group_seed later) and how outcomes are judged and run
 * (critical, metrics, batch); its fault fields are the group's own. A
 * field added to bf_campaign_spec later is therefore off in a group until
 * it is copied here on purpose: per_channel, w_max, words, error maps,
 * lists, mitigations, generation, nested groups and the stratified
 * samplings stay at zero (uniform sampling). */
static bf_campaign_spec group_spec(const bf_campaign *c, const bf_campaign_spec *spec, const bf_fault_group *g, double *rate)
{
    bf_campaign_spec s;
    memset(&s, 0, sizeof s);
    s.model = spec->model;
    s.dataset = spec->dataset;
    s.seed = spec->seed;
    s.metrics = spec->metrics;
    s.critical_metric = spec->critical_metric;
    s.critical_delta = spec->critical_delta;
    s.critical_pixels = spec->critical_pixels;
    s.critical_pixels_set = spec->critical_pixels_set;
    s.critical_score = spec->critical_score;
    s.critical_score_set = spec->critical_score_set;
    s.batch = spec->batch;
    s.sampling = BF_SAMPLE_UNIFORM;

    s.target = g->target;
    s.tensors = g->tensors;
    s.n_tensors = g->n_tensors;
    s.model_kind = g->model_kind;
    s.bits = g->bits;
    memcpy(s.positions, g->positions, sizeof s.positions);
    s.n_positions = g->n_positions;
    s.burst = g->burst;
    s.repr = g->repr;
    s.persistence = g->persistence;
    *rate = g->rate;
    s.rates = g->model_kind == BF_FAULT_BER ? rate : NULL;
    s.n_rates = g->model_kind == BF_FAULT_BER;
    /* one rate for every trial of group 0: trial t's rate index t / repeats is 0 */
    s.repeats = c->faults.n_trials > 0 ? c->faults.n_trials : 1;
    s.trials = c->faults.n_trials;
    return s;
}

bf_status bf__campaign_groups(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    if (spec->n_groups == 0) return BF_OK;
    if (!(c->groups.sub = bf__calloc(spec->n_groups, sizeof *c->groups.sub)))
        return bf_error_set(err, BF_ENOMEM, "out of memory for %zu fault groups", spec->n_groups);
    c->groups.n = spec->n_groups;
    for (size_t i = 0; i < spec->n_groups; i++) {
        bf_campaign *g = c->groups.sub[i] = bf__calloc(1, sizeof *g);
        if (!g) return bf_error_set(err, BF_ENOMEM, "out of memory for fault group %zu", i + 1);
        g->model = g->store.model = c->protect.base_model ? c->protect.base_model : c->model;
        g->ds = c->ds;
        double rate;
        bf_campaign_spec s = group_spec(c, spec, &spec->groups[i], &rate);
        bf_error e = {0};
        bf_status st = bf__campaign_draws(g, &s, &e);
        if (st != BF_OK) return bf_error_set(err, st, "faults.%zu: %s", i + 1, e.msg);
        for (size_t k = 0; k < g->surface.n_sites; k++)
            if (g->surface.sites[k].dynamic)
                return bf_error_set(err, BF_EUNSUPPORTED, "faults.%zu: '%s' is a dynamic site (its elements vary by run); "
                                    "a fault group takes static ones: name the group's tensors", i + 1, g->surface.sites[k].name);
        g->faults.seed = group_seed(spec->seed, i + 1);
        g->golden.samples = c->golden.samples;   /* a transient fault's sample */
    }
    return BF_OK;
}

bf_status bf__campaign_groups_draw(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err)
{
    for (size_t i = 0; i < c->groups.n; i++) {
        bf_status st = bf__campaign_draw(c->groups.sub[i], t, &d[i], err);
        if (st != BF_OK) return st;
    }
    return BF_OK;
}

void bf__campaign_groups_free(bf_campaign *c)
{
    for (size_t i = 0; i < c->groups.n; i++) bf_campaign_free(c->groups.sub[i]);
    bf__free(c->groups.sub);
    c->groups.sub = NULL;
    c->groups.n = 0;
}

size_t bf_campaign_num_groups(const bf_campaign *c) { return 1 + c->groups.n; }

size_t bf_campaign_group_num_sites(const bf_campaign *c, size_t g)
{
    if (g == 0) return c->surface.n_sites;
    return g <= c->groups.n ? c->groups.sub[g - 1]->surface.n_sites : 0;
}

const bf_site *bf_campaign_group_site(const bf_campaign *c, size_t g, size_t i)
{
    if (g == 0) return bf_campaign_site(c, i);
    return g <= c->groups.n ? bf_campaign_site(c->groups.sub[g - 1], i) : NULL;
}
