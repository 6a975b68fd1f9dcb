/* Sampling "exhaustive" and "adaptive" (docs/STATISTICS.md).
 *
 * Both see the population as strata: (site, position) cells, position one
 * of the first bits a fault may have (the allowed bits, or a burst's
 * starts). Exhaustive enumerates every fault once, trial t a pure function
 * of t.
 *
 * Adaptive: a pilot of ad_pilot trials per stratum, then rounds. The pilot
 * fixes the allocation: each stratum's share pi_h is a defensive mixture
 * (Hesterberg 1995) of Neyman's, its share of the population times its
 * standard deviation estimated with half a trial of prior (p~ = (x + 1/2) /
 * (n + 1), so a stratum with no event keeps a share), and the population
 * share itself (DEFENSIVE of the trials). The pilot's outcomes serve the
 * allocation only: the estimates rest on the trials after it, whose counts
 * per stratum do not depend on their outcomes. Re-allocating from the
 * outcomes as they come (x_h / n_h with n_h chosen by x_h's first trials)
 * biases every rate low: a stratum whose first trials found nothing gets
 * few more and keeps its underestimate, one that found much gets many and
 * is corrected (test_honesty measured 5 standard errors). Rounds keep each
 * stratum's count at its share of the trials so far (the first gives every
 * stratum one), so the stop rule, checked at each round's end, sees the
 * design at any point. Each round's allocation depends only on trials
 * before it, folded in order, so a campaign draws the same faults on any
 * number of threads. Inside a round trial t's stratum is where t falls in
 * the round's prefix sums, and its element a draw from (seed, t). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"

/* trials per stratum in the pilot: two, so that every stratum's shrunk
 * variance rests on more than one outcome before the first allocation */
#define PILOT_PER_STRATUM 2
/* a round after the pilot is a quarter of the trials so far, at least
 * this many: the stop rule is checked at each round's end */
#define ROUND_MIN 256
/* the population-proportional share of the allocation after the pilot */
#define DEFENSIVE 0.1

bf_status bf__campaign_strata(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    bf__faults *f = &c->faults;
    if (f->sampling != BF_SAMPLE_EXHAUSTIVE && f->sampling != BF_SAMPLE_ADAPTIVE) return BF_OK;
    const char *name = f->sampling == BF_SAMPLE_EXHAUSTIVE ? "exhaustive" : "adaptive";
    for (size_t i = 0; i < c->surface.n_sites; i++)
        if (c->surface.sites[i].dynamic)
            return bf_error_set(err, BF_EINVAL, "sampling '%s': site '%s' is computed by a dynamic step (its element count "
                                "is data), so its faults cannot be enumerated or stratified; choose other tensors or "
                                "sampling 'uniform'", name, c->surface.sites[i].name);
    f->n_pos = f->burst ? f->n_starts : f->n_allowed;
    f->n_strata = (int64_t)c->surface.n_sites * f->n_pos;
    if (f->sampling == BF_SAMPLE_EXHAUSTIVE) {
        double pop = (double)c->surface.elements * (double)f->n_pos;
        if (pop > (double)BF_EXHAUSTIVE_MAX)
            return bf_error_set(err, BF_ERANGE, "sampling 'exhaustive': the population is %.0f faults (%lld elements x %d "
                                "bit positions), over the limit of %lld; choose fewer tensors or bits, or sampling "
                                "'adaptive'", pop, (long long)c->surface.elements, f->n_pos, (long long)BF_EXHAUSTIVE_MAX);
        f->n_trials = (int64_t)pop;
        return BF_OK;
    }
    f->ad_pilot = PILOT_PER_STRATUM;
    /* the pilot, and the first round after it gives every stratum one */
    if ((double)f->n_strata * (f->ad_pilot + 1) > (double)spec->trials)
        return bf_error_set(err, BF_EINVAL, "sampling 'adaptive': the pilot round needs %lld trials in each of %lld strata "
                            "(%zu tensors x %d bit positions) and the next round one more each, %lld trials, more than the "
                            "%lld asked for; raise trials or choose fewer tensors or bits", (long long)f->ad_pilot,
                            (long long)f->n_strata, c->surface.n_sites, f->n_pos,
                            (long long)(f->n_strata * (f->ad_pilot + 1)), (long long)spec->trials);
    f->ad_prefix = bf__calloc((size_t)f->n_strata + 1, sizeof *f->ad_prefix);
    f->ad_w = bf__calloc((size_t)f->n_strata, sizeof *f->ad_w);
    f->ad_n = bf__calloc((size_t)f->n_strata, sizeof *f->ad_n);
    f->ad_frac = bf__calloc((size_t)f->n_strata, sizeof *f->ad_frac);
    if (!f->ad_prefix || !f->ad_w || !f->ad_n || !f->ad_frac) return bf_error_set(err, BF_ENOMEM, "out of memory for %lld strata", (long long)f->n_strata);
    return BF_OK;
}

int64_t bf__adapt_stratum(const bf_campaign *c, int64_t t)
{
    if (c->faults.sched_n && t >= c->faults.sched_first[0]) return bf__adapt_plan_stratum(c, t);   /* sharded */
    const int64_t *p = c->faults.ad_prefix;
    int64_t j = t - c->faults.ad_first, lo = 0, hi = c->faults.n_strata;   /* p[lo] <= j < p[hi] */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (p[mid] <= j) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* The Neyman weight of stratum h: its share of the population (elements)
 * times the larger shrunk standard deviation of its critical and DUE
 * rates (the ones the design serves; masked and tolerable are what is
 * left, and a low mantissa bit's tolerable rate near 1/2 would otherwise
 * take the trials the rare outcomes need). */
static double neyman(const bf_campaign *c, const bf_campaign_result *acc, int64_t h, int64_t *n)
{
    int64_t site = h / c->faults.n_pos;
    int bit = c->faults.burst ? c->faults.starts[h % c->faults.n_pos] : c->faults.allowed[h % c->faults.n_pos];
    const bf_outcome_counts *k = &acc->by_site_bit[(size_t)site * 64 + (size_t)bit];
    *n = 0;
    for (int o = 0; o < BF_OUTCOME_COUNT; o++) *n += k->n[o];
    double sd = 0;
    for (int o = BF_OUTCOME_CRITICAL; o <= BF_OUTCOME_DUE; o++) {
        double q = ((double)k->n[o] + 0.5) / ((double)*n + 1);
        if (sqrt(q * (1 - q)) > sd) sd = sqrt(q * (1 - q));
    }
    return (double)(c->surface.prefix[site + 1] - c->surface.prefix[site]) * sd;
}

/* Trials per stratum for a round of `round` trials, written into ad_prefix
 * as counts: each stratum's deficit against its Neyman share of all trials
 * once the round is done (or, with no deficit anywhere, its share), scaled
 * to the round; the rounding's remainder goes to the largest fractions,
 * ties to the lower stratum, so the allocation is a pure function of acc. */
static int by_fraction(const void *a, const void *b)
{
    const bf__frac *x = a, *y = b;
    if (x->fr != y->fr) return x->fr > y->fr ? -1 : 1;
    return (x->h > y->h) - (x->h < y->h);
}

/* pi_h from the pilot's counts in acc (into ad_w). */
static void shares(bf_campaign *c, const bf_campaign_result *acc)
{
    bf__faults *f = &c->faults;
    double total_w = 0, total_n = (double)c->surface.elements * f->n_pos;
    for (int64_t h = 0; h < f->n_strata; h++) total_w += (f->ad_w[h] = neyman(c, acc, h, &f->ad_n[h]));
    for (int64_t h = 0; h < f->n_strata; h++) {
        int64_t site = h / f->n_pos;
        double pop = (double)(c->surface.prefix[site + 1] - c->surface.prefix[site]) / total_n;
        f->ad_w[h] = (1 - DEFENSIVE) * (total_w > 0 ? f->ad_w[h] / total_w : pop) + DEFENSIVE * pop;
    }
}

/* Trials per stratum for a round of `round` trials, written into ad_prefix
 * as counts: at least `floor` each, the rest by each stratum's deficit
 * against pi_h of all trials once the round is done; the rounding's
 * remainder goes to the largest fractions, ties to the lower stratum. The
 * counts depend on pi and the counts so far, never on outcomes. */
static void allocate(bf_campaign *c, const bf_campaign_result *acc, int fresh, int64_t round, int64_t floor_n)
{
    bf__faults *f = &c->faults;
    int64_t H = f->n_strata, *cnt = f->ad_prefix + 1;   /* cnt[h] = trials of stratum h this round */
    const double *pi = f->ad_w;
    double deficit = 0, all = (double)((fresh ? 0 : acc->trials_done) + round);
    bf__frac *fr = f->ad_frac;
    for (int64_t h = 0; h < H; h++) {
        int64_t site = h / f->n_pos;
        int bit = f->burst ? f->starts[h % f->n_pos] : f->allowed[h % f->n_pos];
        const bf_outcome_counts *k = &acc->by_site_bit[(size_t)site * 64 + (size_t)bit];
        int64_t n = floor_n;
        for (int o = 0; !fresh && o < BF_OUTCOME_COUNT; o++) n += k->n[o];
        double target = all * pi[h];
        fr[h].fr = target > (double)n ? target - (double)n : 0;
        deficit += fr[h].fr;
    }
    int64_t rest = round - floor_n * H, given = 0;
    for (int64_t h = 0; h < H; h++) {
        double share = deficit > 0 ? fr[h].fr / deficit : pi[h];
        double x = (double)rest * share;
        cnt[h] = floor_n + (int64_t)floor(x);
        fr[h] = (bf__frac){.fr = x - floor(x), .h = h};
        given += cnt[h];
    }
    if (given < round) {
        qsort(fr, (size_t)H, sizeof *fr, by_fraction);
        for (int64_t k = 0; given < round; k = (k + 1) % H, given++) cnt[fr[k].h]++;
    }
    f->ad_prefix[0] = 0;
    for (int64_t h = 0; h < H; h++) f->ad_prefix[h + 1] += f->ad_prefix[h];
}

void bf__adapt_next_round(bf_campaign *c, const bf_campaign_result *acc, int64_t first, int64_t left, int align, int64_t *round)
{
    bf__faults *f = &c->faults;
    int pilot = first == 0, after_pilot = first > 0 && acc->adaptive_rounds == 1;
    int64_t floor_n = pilot ? f->ad_pilot : after_pilot ? 1 : 0;
    int64_t r = pilot ? 0 : (first - acc->adaptive_pilot) / 4;
    if (!pilot && r < ROUND_MIN) r = ROUND_MIN;
    if (r < floor_n * f->n_strata) r = floor_n * f->n_strata;
    r = (r + align - 1) / align * align;
    if (r > left) r = left;
    f->ad_first = first;
    if (pilot) {
        for (int64_t h = 0; h < f->n_strata; h++) f->ad_w[h] = 1.0 / (double)f->n_strata;
    } else if (after_pilot) {
        shares(c, acc);
    }
    /* after the pilot its counts are set aside (the runner clears acc): the
     * first round after it counts from zero */
    allocate(c, acc, pilot || after_pilot, r, floor_n);
    *round = r;
}
