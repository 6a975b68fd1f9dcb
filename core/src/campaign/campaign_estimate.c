/* Rates of the fault population from a campaign's counts, whatever the
 * design drew (docs/STATISTICS.md, "Estimators and intervals").
 *
 * Every design is read as strata h with a population weight W_h and
 * counts x_h of n_h trials: uniform one stratum; per_tensor the tensors
 * (W_h their elements); per_bit the bit positions (equal weights);
 * adaptive and exhaustive the (tensor, position) cells. A domain (a
 * tensor, a bit, both, or all) takes the strata it holds; a domain that
 * cuts across a design's strata (a bit under per_tensor) is post-
 * stratified on its cells. The rate is sum W_h x_h / n_h over sum W_h, so
 * every design estimates what uniform does. Its variance uses each
 * stratum's rate shrunk towards 1/2 by half a trial, p~_h = (x_h + 1/2) /
 * (n_h + 1), so a stratum with no event so far still adds the doubt its
 * n_h leaves; the effective sample size p~(1 - p~) / V (Korn and Graubard
 * 1998) then carries Wilson's interval, which keeps its coverage near 0
 * and 1 where a normal interval does not. One stratum gives Wilson's
 * interval on the raw counts exactly. */
#include <math.h>
#include <string.h>

#include "campaign/campaign_impl.h"

typedef struct strat {
    double w;         /* sum of W_h over the strata with trials */
    double rate;      /* sum W_h x_h / n_h */
    double prior;     /* sum W_h p~_h */
    double var;       /* sum W_h^2 p~_h (1 - p~_h) / n_h */
    int64_t n;
    int strata;       /* with trials */
    int exact;        /* every stratum enumerated in full */
} strat;

static int64_t total_of(const bf_outcome_counts *c)
{
    int64_t n = 0;
    for (int o = 0; o < BF_OUTCOME_COUNT; o++) n += c->n[o];
    return n;
}

static void add(strat *s, double w, const bf_outcome_counts *c, unsigned o, int64_t population)
{
    int64_t n = total_of(c);
    if (n <= 0 || !(w > 0)) {
        if (w > 0) s->exact = 0;
        return;
    }
    double x = 0;
    for (int k = 0; k < BF_OUTCOME_COUNT; k++) x += o >> k & 1 ? (double)c->n[k] : 0;
    double p = x / (double)n, q = (x + 0.5) / ((double)n + 1);
    s->w += w;
    s->rate += w * p;
    s->prior += w * q;
    s->var += w * w * q * (1 - q) / (double)n;
    s->n += n;
    s->strata++;
    if (n != population) s->exact = 0;
}

void bf_wilson_eff(double p, double n, double confidence, double *lo, double *hi)
{
    if (!(n > 0) || !(p >= 0 && p <= 1)) {
        *lo = 0;
        *hi = 1;
        return;
    }
    double z = bf_z_for_confidence(confidence), z2 = z * z;
    double den = 1 + z2 / n;
    double center = (p + z2 / (2 * n)) / den;
    double half = z / den * sqrt(p * (1 - p) / n + z2 / (4 * n * n));
    *lo = p <= 0 ? 0 : center - half < 0 ? 0 : center - half;
    *hi = p >= 1 ? 1 : center + half > 1 ? 1 : center + half;
}

void bf_campaign_design(const bf_campaign *c, bf_design *d)
{
    memset(d, 0, sizeof *d);
    d->sampling = c->faults.sampling;
    d->n_sites = c->surface.n_sites;
    /* a multi-bit upset's population counts (word, bit) members per site */
    d->prefix = c->faults.mbu ? c->faults.mbu_prefix : c->surface.prefix;
    if (c->faults.kind == BF_FAULT_RANDOM_VALUE || c->faults.kind == BF_FAULT_BER || c->faults.kind == BF_FAULT_PROFILED)
        return;
    d->n_pos = c->faults.burst ? c->faults.n_starts : c->faults.n_allowed;
    d->pos = c->faults.burst ? c->faults.starts : c->faults.allowed;
    d->draws = c->faults.persistence == BF_PERSIST_TRANSIENT ? c->golden.samples : 1;
}

static const bf_outcome_counts *cell(const bf_campaign_result *r, size_t s, int b)
{
    return &r->by_site_bit[s * 64 + (size_t)b];
}

/* The strata of domain (site, bit) under the design. */
static void gather(const bf_design *d, const bf_campaign_result *r, int64_t site, int bit, unsigned o, strat *s)
{
    size_t s0 = site < 0 ? 0 : (size_t)site, s1 = site < 0 ? d->n_sites : (size_t)site + 1;
    bf_sampling design = d->sampling;
    /* per_tensor's bits and per_bit's tensors cut across the design's
     * strata: post-stratified on their cells, so that a bit's rate does not
     * lean on the tensors that drew more trials, nor a tensor's on the bits
     * that did (per_bit gives its first t mod B positions one more) */
    int cells = design == BF_SAMPLE_ADAPTIVE || design == BF_SAMPLE_EXHAUSTIVE ||
                (design == BF_SAMPLE_PER_TENSOR && bit >= 0) || (design == BF_SAMPLE_PER_BIT && site >= 0);
    if (!r->by_site_bit && (cells || (site >= 0 && bit >= 0))) return;   /* a document without the cells */
    /* a single tensor-bit cell is one stratum in every design */
    if (site >= 0 && bit >= 0) {
        add(s, 1, cell(r, (size_t)site, bit), o, (d->prefix[site + 1] - d->prefix[site]) * d->draws);
        return;
    }
    if (cells) {
        for (size_t i = s0; i < s1; i++)
            for (int k = 0; k < d->n_pos; k++)
                if (bit < 0 || d->pos[k] == bit) add(s, (double)(d->prefix[i + 1] - d->prefix[i]), cell(r, i, d->pos[k]), o, (d->prefix[i + 1] - d->prefix[i]) * d->draws);
        return;
    }
    if (design == BF_SAMPLE_PER_TENSOR && site < 0) {
        for (size_t i = 0; i < d->n_sites; i++) add(s, (double)(d->prefix[i + 1] - d->prefix[i]), &r->by_site[i], o, -1);
        return;
    }
    if (design == BF_SAMPLE_PER_BIT && site < 0 && bit < 0) {
        for (int k = 0; k < d->n_pos; k++) add(s, 1, &r->by_bit[d->pos[k]], o, -1);
        return;
    }
    /* one stratum: the whole of a uniform design, or a domain a stratified
     * design samples in proportion (a tensor under per_tensor, a bit under
     * per_bit) */
    add(s, 1, site >= 0 ? &r->by_site[site] : bit >= 0 ? &r->by_bit[bit] : &r->total, o, -1);
}

void bf_rate_estimate(const bf_design *d, const bf_campaign_result *r, int64_t site, int bit, bf_outcome o,
                      double confidence, bf_estimate *e)
{
    bf_rate_estimate_any(d, r, site, bit, (int)o >= 0 && o < BF_OUTCOME_COUNT ? 1u << o : 0, confidence, e);
}

void bf_rate_estimate_any(const bf_design *d, const bf_campaign_result *r, int64_t site, int bit, unsigned outcomes,
                          double confidence, bf_estimate *e)
{
    unsigned o = outcomes;
    strat s = {.exact = d->sampling == BF_SAMPLE_EXHAUSTIVE};
    e->rate = e->se = e->n_eff = e->lo = e->hi = NAN;
    e->trials = 0;
    if ((site >= 0 && (size_t)site >= d->n_sites) || bit >= 64 || o == 0 || o >> BF_OUTCOME_COUNT) return;
    gather(d, r, site, bit, o, &s);
    e->trials = s.n;
    if (!(s.w > 0)) return;
    e->rate = s.rate / s.w;
    if (s.exact) {
        e->se = 0;
        e->n_eff = (double)s.n;
        e->lo = e->hi = e->rate;
        return;
    }
    double v = s.var / (s.w * s.w), q = s.prior / s.w;
    e->se = sqrt(v);
    /* one stratum: Wilson's interval on the counts, to the last bit */
    e->n_eff = s.strata == 1 || !(v > 0) ? (double)s.n : q * (1 - q) / v;
    bf_wilson_eff(e->rate, e->n_eff, confidence, &e->lo, &e->hi);
}

/* --- the stop rule */

/* The stop targets: the overall margin holds for every outcome's rate (as
 * it always has), except under "adaptive", whose allocation serves the
 * critical and DUE rates; the per-tensor and per-bit margins hold for the
 * critical and DUE rates, the ones by_tensor and by_bit report. */
#define ALL_OUTCOMES 0xfu
#define CRIT_DUE (1u << BF_OUTCOME_CRITICAL | 1u << BF_OUTCOME_DUE)

static int within(const bf_design *d, const bf_campaign_result *r, int64_t site, int bit, double margin, double conf,
                  unsigned outcomes)
{
    for (int o = 0; o < BF_OUTCOME_COUNT; o++) {
        if (!(outcomes >> o & 1)) continue;
        bf_estimate e;
        bf_rate_estimate(d, r, site, bit, (bf_outcome)o, conf, &e);
        if (!((e.hi - e.lo) / 2 <= margin)) return 0;
    }
    return 1;
}

int bf__stop_holds(const bf_campaign *c, bf_campaign_result *acc)
{
    bf_design d;
    bf_campaign_design(c, &d);
    double conf = c->judge.stop_confidence;
    const double margin[3] = {c->judge.stop_margin, c->judge.stop_tensor_margin, c->judge.stop_bit_margin};
    int all = 1;
    for (int k = 0; k < 3; k++) {
        if (!(margin[k] > 0)) continue;
        int ok = 1;   /* every target must hold at the same check; met_at keeps the first */
        if (k == 0) ok = within(&d, acc, -1, -1, margin[0], conf, d.sampling == BF_SAMPLE_ADAPTIVE ? CRIT_DUE : ALL_OUTCOMES);
        for (size_t i = 0; k == 1 && ok && i < d.n_sites; i++) ok = within(&d, acc, (int64_t)i, -1, margin[1], conf, CRIT_DUE);
        for (int b = 0; k == 2 && ok && b < d.n_pos; b++) ok = within(&d, acc, -1, d.pos[b], margin[2], conf, CRIT_DUE);
        if (ok && acc->stop_met_at[k] <= 0) acc->stop_met_at[k] = acc->trials_done;
        all &= ok;
    }
    return all;
}
