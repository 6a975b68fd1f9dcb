/* Sampling "adaptive" in shards (docs/SCALE.md).
 *
 * Unsharded, each round's allocation is made when the round before it is
 * folded. What it reads is the pilot's outcomes (which fix every stratum's
 * share pi_h) and, after that, only how many trials each stratum has had:
 * counts the design chose, never outcomes (campaign_adapt.c). So once the
 * pilot is known the whole sequence of rounds is: every shard runs the
 * whole pilot (its trials are a function of (seed, t) like any other's),
 * plans every round from it here exactly as the unsharded run would one at
 * a time, and runs its share of the trials after the pilot, t mod N = I.
 * The shards' counts then add up to the unsharded run's. What a shard
 * cannot do is stop early: the stop rule reads outcomes of every shard's
 * trials, so a sharded adaptive campaign runs all its trials. */
#include <string.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"

/* Appends the round just allocated (ad_first, ad_prefix) to the plan. */
static bf_status keep_round(bf_campaign *c, int64_t *cap, bf_error *err)
{
    const bf__faults *f = &c->faults;
    size_t w = (size_t)f->n_strata + 1;
    if (c->adapt.sched_n == *cap) {
        int64_t nc = *cap ? 2 * *cap : 16;
        int64_t *nf = bf__realloc(c->adapt.sched_first, (size_t)nc * sizeof *nf);
        if (nf) c->adapt.sched_first = nf;
        int64_t *np = nf ? bf__realloc(c->adapt.sched_prefix, (size_t)nc * w * sizeof *np) : NULL;
        if (!np) return bf_error_set(err, BF_ENOMEM, "out of memory for the plan of %lld adaptive rounds over %lld strata",
                                     (long long)nc, (long long)f->n_strata);
        c->adapt.sched_prefix = np;
        *cap = nc;
    }
    c->adapt.sched_first[c->adapt.sched_n] = c->adapt.ad_first;
    memcpy(c->adapt.sched_prefix + (size_t)c->adapt.sched_n * w, c->adapt.ad_prefix, w * sizeof *c->adapt.ad_prefix);
    c->adapt.sched_n++;
    return BF_OK;
}

bf_status bf__adapt_plan_rounds(bf_campaign *c, const bf_campaign_result *acc, int64_t first, int align, int64_t *rounds,
                                bf_error *err)
{
    bf__faults *f = &c->faults;
    bf_campaign_result plan = {0};   /* what the unsharded run's acc would count: trials per stratum */
    int64_t cap = 0, n = f->n_trials;
    c->adapt.sched_n = 0;
    bf_status st = bf__result_init(&plan, c->surface.n_sites, 0, err);
    if (st != BF_OK) return st;
    plan.adaptive_pilot = acc->adaptive_pilot;
    plan.adaptive_rounds = acc->adaptive_rounds;
    /* the first round after the pilot reads the pilot's outcomes; the rest
     * only the counts so far, which `plan` holds */
    const bf_campaign_result *from = acc;
    while (first < n && st == BF_OK) {
        int64_t round;
        bf__adapt_next_round(c, from, first, n - first, align, &round);
        if ((st = keep_round(c, &cap, err)) != BF_OK) break;
        for (int64_t h = 0; h < f->n_strata; h++) {
            int64_t site = h / f->n_pos;
            int bit = f->burst ? f->starts[h % f->n_pos] : f->allowed[h % f->n_pos];
            plan.by_site_bit[(size_t)site * 64 + (size_t)bit].n[BF_OUTCOME_MASKED] += c->adapt.ad_prefix[h + 1] - c->adapt.ad_prefix[h];
        }
        plan.trials_done += round;
        plan.adaptive_rounds++;
        from = &plan;
        first += round;
    }
    *rounds = c->adapt.sched_n;
    bf_campaign_result_free(&plan);
    return st;
}

int64_t bf__adapt_plan_stratum(const bf_campaign *c, int64_t t)
{
    const bf__faults *f = &c->faults;
    int64_t lo = 0, hi = c->adapt.sched_n;   /* the round: sched_first[lo] <= t */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (c->adapt.sched_first[mid] <= t) lo = mid;
        else hi = mid;
    }
    const int64_t *p = c->adapt.sched_prefix + (size_t)lo * ((size_t)f->n_strata + 1);
    int64_t j = t - c->adapt.sched_first[lo], a = 0, b = f->n_strata;   /* p[a] <= j < p[b] */
    while (b - a > 1) {
        int64_t mid = a + (b - a) / 2;
        if (p[mid] <= j) a = mid;
        else b = mid;
    }
    return a;
}
