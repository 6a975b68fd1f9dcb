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
 * share itself (DEFENSIVE of the trials); with stop targets, the Neyman
 * part is replaced by the largest trials any target (overall, each tensor,
 * each bit) needs of the stratum, each target's own optimum for the
 * estimator's variance (steer). The pilot's outcomes serve the
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
/* with stop targets: the weight, in trials, of a bit position's pilot
 * rate over every tensor in each stratum's rate (pilot_rates) */
#define PRIOR_TRIALS 2.0

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
        if (pop > (double)BF_EXHAUSTIVE_MAX) {
            size_t big = 0;   /* the largest tensor: the one to leave out first */
            for (size_t i = 1; i < c->surface.n_sites; i++)
                if (c->surface.prefix[i + 1] - c->surface.prefix[i] > c->surface.prefix[big + 1] - c->surface.prefix[big]) big = i;
            return bf_error_set(err, BF_ERANGE, "sampling 'exhaustive': the population is %.0f faults (%lld elements x %d "
                                "bit positions; the largest tensor, '%s', has %lld elements), over the limit of %lld; "
                                "choose fewer tensors or bits, or sampling 'adaptive'", pop, (long long)c->surface.elements,
                                f->n_pos, c->surface.sites[big].name,
                                (long long)(c->surface.prefix[big + 1] - c->surface.prefix[big]), (long long)BF_EXHAUSTIVE_MAX);
        }
        f->n_trials = (int64_t)pop;
        return BF_OK;
    }
    c->adapt.ad_pilot = PILOT_PER_STRATUM;
    /* the pilot, and the first round after it gives every stratum one */
    if ((double)f->n_strata * (c->adapt.ad_pilot + 1) > (double)spec->trials)
        return bf_error_set(err, BF_EINVAL, "sampling 'adaptive': the pilot round needs %lld trials in each of %lld strata "
                            "(%zu tensors x %d bit positions) and the next round one more each, %lld trials, more than the "
                            "%lld asked for; raise trials or choose fewer tensors or bits", (long long)c->adapt.ad_pilot,
                            (long long)f->n_strata, c->surface.n_sites, f->n_pos,
                            (long long)(f->n_strata * (c->adapt.ad_pilot + 1)), (long long)spec->trials);
    c->adapt.ad_prefix = bf__calloc((size_t)f->n_strata + 1, sizeof *c->adapt.ad_prefix);
    c->adapt.ad_w = bf__calloc((size_t)f->n_strata, sizeof *c->adapt.ad_w);
    c->adapt.ad_n = bf__calloc((size_t)f->n_strata, sizeof *c->adapt.ad_n);
    c->adapt.ad_frac = bf__calloc((size_t)f->n_strata, sizeof *c->adapt.ad_frac);
    c->adapt.ad_p = bf__calloc((size_t)f->n_strata, sizeof *c->adapt.ad_p);
    c->adapt.ad_alloc = bf__calloc((size_t)f->n_strata, sizeof *c->adapt.ad_alloc);
    if (!c->adapt.ad_prefix || !c->adapt.ad_w || !c->adapt.ad_n || !c->adapt.ad_frac || !c->adapt.ad_p || !c->adapt.ad_alloc) return bf_error_set(err, BF_ENOMEM, "out of memory for %lld strata", (long long)f->n_strata);
    return BF_OK;
}

int64_t bf__adapt_stratum(const bf_campaign *c, int64_t t)
{
    if (c->adapt.sched_n && t >= c->adapt.sched_first[0]) return bf__adapt_plan_stratum(c, t);   /* sharded */
    const int64_t *p = c->adapt.ad_prefix;
    int64_t j = t - c->adapt.ad_first, lo = 0, hi = c->faults.n_strata;   /* p[lo] <= j < p[hi] */
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
static const bf_outcome_counts *counts(const bf_campaign *c, const bf_campaign_result *acc, int64_t h)
{
    int64_t site = h / c->faults.n_pos;
    int bit = c->faults.burst ? c->faults.starts[h % c->faults.n_pos] : c->faults.allowed[h % c->faults.n_pos];
    return &acc->by_site_bit[(size_t)site * 64 + (size_t)bit];
}

static double elements(const bf_campaign *c, int64_t h)
{
    int64_t site = h / c->faults.n_pos;
    return (double)(c->surface.prefix[site + 1] - c->surface.prefix[site]);
}

static double neyman(const bf_campaign *c, const bf_campaign_result *acc, int64_t h, int64_t *n)
{
    int64_t site = h / c->faults.n_pos;
    const bf_outcome_counts *k = counts(c, acc, h);
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

/* The variance campaign_estimate.c gives a stratum (per W_h^2) after n
 * trials if its rate is p: p~ (1 - p~) / n with p~ = (x + 1/2) / (n + 1)
 * at x = p n; and (into dv) its derivative in n. For p = 0 it falls as
 * 1/(2 n^2), not as p (1 - p) / n = 0: a stratum with no event still
 * needs trials before its interval is narrow. */
static double cell_var(double p, double n, double *dv)
{
    double q = (p * n + 0.5) / (n + 1), dq = (p - 0.5) / ((n + 1) * (n + 1));
    *dv = ((1 - 2 * q) * dq * n - q * (1 - q)) / (n * n);
    return q * (1 - q) / n;
}

/* Each stratum's rate as the pilot sees it (into ad_p): its own trials
 * shrunk towards its bit position's pilot rate over every tensor, with the
 * weight of PRIOR_TRIALS trials (empirical Bayes: in a float the bit
 * position decides most of what a flip does, and two trials alone cannot
 * tell a rate of 0 from one of 0.2). Of the critical and DUE rates, the
 * one nearer 1/2 (the larger variance). */
static void pilot_rates(bf_campaign *c, const bf_campaign_result *acc)
{
    bf__faults *f = &c->faults;
    double x[64][2] = {{0}}, n[64] = {0};
    for (int64_t h = 0; h < f->n_strata; h++) {
        const bf_outcome_counts *k = counts(c, acc, h);
        int j = (int)(h % f->n_pos);
        for (int o = 0; o < BF_OUTCOME_COUNT; o++) n[j] += (double)k->n[o];
        x[j][0] += (double)k->n[BF_OUTCOME_CRITICAL];
        x[j][1] += (double)k->n[BF_OUTCOME_DUE];
    }
    for (int64_t h = 0; h < f->n_strata; h++) {
        const bf_outcome_counts *k = counts(c, acc, h);
        int j = (int)(h % f->n_pos);
        double tot = 0, best = 0;
        for (int o = 0; o < BF_OUTCOME_COUNT; o++) tot += (double)k->n[o];
        for (int o = 0; o < 2; o++) {
            double pooled = (x[j][o] + 0.5) / (n[j] + 1);
            double p = ((double)k->n[o ? BF_OUTCOME_DUE : BF_OUTCOME_CRITICAL] + PRIOR_TRIALS * pooled) / (tot + PRIOR_TRIALS);
            if (p * (1 - p) > best * (1 - best)) best = p;
        }
        c->adapt.ad_p[h] = best;
    }
}

/* Trials a stratum with rate p and weight cw = (W_h / W_D)^2 takes at
 * price lambda: the n >= 1 minimising n + lambda cw V(n), where the
 * marginal variance bought by a trial equals its price (cw V is convex). */
static double cell_need(double p, double cw, double lambda)
{
    double dv, lo = 0, hi = 45;   /* log n */
    cell_var(p, 1, &dv);
    if (-lambda * cw * dv <= 1) return 1;
    for (int i = 0; i < 50; i++) {
        double mid = (lo + hi) / 2;
        cell_var(p, exp(mid), &dv);
        if (-lambda * cw * dv > 1) lo = mid;
        else hi = mid;
    }
    return exp(hi);
}

/* One target: domain (site, position j; -1 for all) with its variance at
 * most `target`. The fewest trials that reach it, by the Lagrange
 * condition above with the price found by bisection (Neyman's allocation
 * inside the domain, for the estimator's own variance); each stratum's
 * share raises ad_alloc[h] to it, so that ad_alloc meets every target. */
static void domain_need(bf_campaign *c, int64_t site, int j, double target)
{
    bf__faults *f = &c->faults;
    int64_t h0 = site >= 0 ? site * f->n_pos : 0, h1 = site >= 0 ? h0 + f->n_pos : f->n_strata;
    double wd = 0, lo = -10, hi = 150, dv;   /* log lambda */
    for (int64_t h = h0; h < h1; h++)
        if (j < 0 || h % f->n_pos == j) wd += elements(c, h);
    for (int i = 0; i < 60; i++) {
        double mid = (lo + hi) / 2, v = 0;
        for (int64_t h = h0; h < h1; h++) {
            if (j >= 0 && h % f->n_pos != j) continue;
            double cw = elements(c, h) / wd * (elements(c, h) / wd);
            v += cw * cell_var(c->adapt.ad_p[h], cell_need(c->adapt.ad_p[h], cw, exp(mid)), &dv);
        }
        if (v > target) lo = mid;
        else hi = mid;
    }
    for (int64_t h = h0; h < h1; h++) {
        if (j >= 0 && h % f->n_pos != j) continue;
        double cw = elements(c, h) / wd * (elements(c, h) / wd), n = cell_need(c->adapt.ad_p[h], cw, exp(hi));
        if (n > c->adapt.ad_alloc[h]) c->adapt.ad_alloc[h] = n;
    }
}

/* pi_h when the campaign has stop targets: the largest trials any target
 * needs of each stratum (each target's own optimum inside its domain; the
 * maximum meets them all), made defensive like the untargeted shares;
 * ad_need the trials at which every stratum gets its need. */
static void steer(bf_campaign *c, const bf_campaign_result *acc)
{
    bf__faults *f = &c->faults;
    double z = bf_z_for_confidence(c->judge.stop_confidence), sum = 0;
    double m[3] = {c->judge.stop_margin / z, c->judge.stop_tensor_margin / z, c->judge.stop_bit_margin / z};
    pilot_rates(c, acc);
    for (int64_t h = 0; h < f->n_strata; h++) c->adapt.ad_alloc[h] = 1;
    if (m[0] > 0) domain_need(c, -1, -1, m[0] * m[0]);
    for (size_t i = 0; m[1] > 0 && i < c->surface.n_sites; i++) domain_need(c, (int64_t)i, -1, m[1] * m[1]);
    for (int j = 0; m[2] > 0 && j < f->n_pos; j++) domain_need(c, -1, j, m[2] * m[2]);
    for (int64_t h = 0; h < f->n_strata; h++) sum += c->adapt.ad_alloc[h];
    double total_n = (double)c->surface.elements * f->n_pos;
    for (int64_t h = 0; h < f->n_strata; h++)
        c->adapt.ad_w[h] = (1 - DEFENSIVE) * c->adapt.ad_alloc[h] / sum + DEFENSIVE * elements(c, h) / total_n;
    c->adapt.ad_need = sum / (1 - DEFENSIVE);
}

/* pi_h from the pilot's counts in acc (into ad_w). */
static void shares(bf_campaign *c, const bf_campaign_result *acc)
{
    bf__faults *f = &c->faults;
    c->adapt.ad_need = 0;
    if (c->judge.stop_margin > 0 || c->judge.stop_tensor_margin > 0 || c->judge.stop_bit_margin > 0) {
        steer(c, acc);
        return;
    }
    double total_w = 0, total_n = (double)c->surface.elements * f->n_pos;
    for (int64_t h = 0; h < f->n_strata; h++) total_w += (c->adapt.ad_w[h] = neyman(c, acc, h, &c->adapt.ad_n[h]));
    for (int64_t h = 0; h < f->n_strata; h++) {
        int64_t site = h / f->n_pos;
        double pop = (double)(c->surface.prefix[site + 1] - c->surface.prefix[site]) / total_n;
        c->adapt.ad_w[h] = (1 - DEFENSIVE) * (total_w > 0 ? c->adapt.ad_w[h] / total_w : pop) + DEFENSIVE * pop;
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
    int64_t H = f->n_strata, *cnt = c->adapt.ad_prefix + 1;   /* cnt[h] = trials of stratum h this round */
    const double *pi = c->adapt.ad_w;
    double deficit = 0, all = (double)((fresh ? 0 : acc->trials_done) + round);
    bf__frac *fr = c->adapt.ad_frac;
    for (int64_t h = 0; h < H; h++) {
        const bf_outcome_counts *k = counts(c, acc, h);
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
    c->adapt.ad_prefix[0] = 0;
    for (int64_t h = 0; h < H; h++) c->adapt.ad_prefix[h + 1] += c->adapt.ad_prefix[h];
}

void bf__adapt_next_round(bf_campaign *c, const bf_campaign_result *acc, int64_t first, int64_t left, int align, int64_t *round)
{
    bf__faults *f = &c->faults;
    int pilot = first == 0, after_pilot = first > 0 && acc->adaptive_rounds == 1;
    int64_t floor_n = pilot ? c->adapt.ad_pilot : after_pilot ? 1 : 0;
    if (pilot) {
        for (int64_t h = 0; h < f->n_strata; h++) c->adapt.ad_w[h] = 1.0 / (double)f->n_strata;
    } else if (after_pilot) {
        shares(c, acc);
    }
    int64_t done = pilot ? 0 : first - acc->adaptive_pilot;
    int64_t r = done / 4;
    if (!pilot && r < ROUND_MIN) r = ROUND_MIN;
    /* with targets, a round ends where they are predicted to hold if that
     * comes first, so that the stop rule is checked there */
    if (!pilot && c->adapt.ad_need > (double)done && (double)(done + r) > c->adapt.ad_need) r = (int64_t)ceil(c->adapt.ad_need) - done;
    if (r < floor_n * f->n_strata) r = floor_n * f->n_strata;
    r = (r + align - 1) / align * align;
    if (r > left) r = left;
    c->adapt.ad_first = first;
    /* after the pilot its counts are set aside (the runner clears acc): the
     * first round after it counts from zero */
    allocate(c, acc, pilot || after_pilot, r, floor_n);
    *round = r;
}
