/* Names, results and statistics of campaigns.
 *
 * Metric sums must merge exactly: the sum over shards 0..N-1 has to be the
 * same bytes as the unsharded run's, and the same for any thread count. Float
 * addition is not associative, so each trial's value enters the sums rounded
 * to a fixed grid (2^-fsum for the sum, 2^-fsq for the square) and clamped to
 * [0, bound]; the grid is chosen per campaign (campaign.c) so that the whole
 * campaign's sum stays below 2^52 grid units, where every partial sum is an
 * exact double whatever the order of additions. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"

static const char *const metric_names[BF_METRIC_COUNT] = {
    "accuracy", "top1_mismatch", "auc", "logloss", "ne", "mse", "max_abs", "perplexity", "token_accuracy",
    "choice_accuracy", "generation_match", "first_divergence", "edit_distance", "miou", "pixel_accuracy", "map", "map50",
    "recall",
};
static const char *const outcome_names[BF_OUTCOME_COUNT] = {"masked", "tolerable", "critical", "due"};

const char *bf_metric_name(bf_metric_id m)
{
    return (int)m >= 0 && m < BF_METRIC_COUNT ? metric_names[m] : "invalid";
}

int bf_metric_parse(const char *name)
{
    for (int i = 0; name && i < BF_METRIC_COUNT; i++)
        if (strcmp(name, metric_names[i]) == 0) return i;
    return -1;
}

const char *bf_outcome_name(bf_outcome o)
{
    return (int)o >= 0 && o < BF_OUTCOME_COUNT ? outcome_names[o] : "invalid";
}

/* --- results */

void bf_campaign_result_free(bf_campaign_result *r)
{
    if (!r) return;
    bf__free(r->by_site);
    bf__free(r->by_site_bit);
    bf__free(r->ivmod_by_site);
    bf__free(r->ivmod_by_site_bit);
    bf__free(r->by_rate);
    bf__free(r->rate_metric);
    bf__free(r->group_by_site);
    memset(r, 0, sizeof *r);
}

bf_status bf__result_init(bf_campaign_result *r, size_t n_sites, size_t n_rates, bf_error *err)
{
    memset(r, 0, sizeof *r);
    for (int m = 0; m < BF_METRIC_COUNT; m++) r->golden[m] = NAN;
    r->n_sites = n_sites;
    r->n_rates = n_rates;
    r->by_site = bf__calloc(n_sites + 1, sizeof *r->by_site);
    r->by_site_bit = bf__calloc((n_sites + 1) * 64, sizeof *r->by_site_bit);
    r->ivmod_by_site = bf__calloc(n_sites + 1, sizeof *r->ivmod_by_site);
    r->ivmod_by_site_bit = bf__calloc((n_sites + 1) * 64, sizeof *r->ivmod_by_site_bit);
    r->by_rate = n_rates ? bf__calloc(n_rates, sizeof *r->by_rate) : NULL;
    r->rate_metric = n_rates ? bf__calloc(n_rates * BF_METRIC_COUNT, sizeof *r->rate_metric) : NULL;
    if (!r->by_site || !r->by_site_bit || !r->ivmod_by_site || !r->ivmod_by_site_bit || (n_rates && (!r->by_rate || !r->rate_metric))) {
        bf_campaign_result_free(r);
        return bf_error_set(err, BF_ENOMEM, "out of memory for a campaign result");
    }
    return BF_OK;
}

bf_status bf__result_shape_groups(bf_campaign_result *r, size_t n, const size_t *site0, size_t n_sites, bf_error *err)
{
    if (n > BF_FAULT_GROUPS_MAX - 1)
        return bf_error_set(err, BF_EINVAL, "%zu fault groups after the first; at most %d", n, BF_FAULT_GROUPS_MAX - 1);
    bf__free(r->group_by_site);
    r->group_by_site = NULL;
    r->n_extra_groups = n;
    r->n_group_sites = n_sites;
    memset(r->group_site0, 0, sizeof r->group_site0);
    for (size_t g = 0; g < n; g++) r->group_site0[g] = site0[g];
    memset(r->group_by_bit, 0, sizeof r->group_by_bit);
    if (n && !(r->group_by_site = bf__calloc(n_sites + 1, sizeof *r->group_by_site)))
        return bf_error_set(err, BF_ENOMEM, "out of memory for a campaign result's fault groups");
    return BF_OK;
}

bf_status bf__result_init_groups(bf_campaign_result *r, const bf_campaign *c, bf_error *err)
{
    size_t site0[BF_FAULT_GROUPS_MAX] = {0}, n = 0;
    for (size_t g = 0; g < c->groups.n && g < BF_FAULT_GROUPS_MAX - 1; g++) {
        site0[g] = n;
        n += c->groups.sub[g]->surface.n_sites;
    }
    return bf__result_shape_groups(r, c->groups.n, site0, n, err);
}

void bf__result_clear_counts(bf_campaign_result *r)
{
    if (r->group_by_site) memset(r->group_by_site, 0, (r->n_group_sites + 1) * sizeof *r->group_by_site);
    memset(r->group_by_bit, 0, sizeof r->group_by_bit);
    r->trials_done = 0;
    memset(&r->total, 0, sizeof r->total);
    memset(r->by_bit, 0, sizeof r->by_bit);
    memset(r->ivmod_by_bit, 0, sizeof r->ivmod_by_bit);
    memset(r->metric, 0, sizeof r->metric);
    memset(r->by_site, 0, (r->n_sites + 1) * sizeof *r->by_site);
    memset(r->by_site_bit, 0, (r->n_sites + 1) * 64 * sizeof *r->by_site_bit);
    memset(r->ivmod_by_site, 0, (r->n_sites + 1) * sizeof *r->ivmod_by_site);
    memset(r->ivmod_by_site_bit, 0, (r->n_sites + 1) * 64 * sizeof *r->ivmod_by_site_bit);
    if (r->n_rates) {
        memset(r->by_rate, 0, r->n_rates * sizeof *r->by_rate);
        memset(r->rate_metric, 0, r->n_rates * BF_METRIC_COUNT * sizeof *r->rate_metric);
    }
}

static void counts_add(bf_outcome_counts *a, const bf_outcome_counts *b)
{
    for (int o = 0; o < BF_OUTCOME_COUNT; o++) a->n[o] += b->n[o];
}

void bf__ivmod_add(bf_ivmod_sums *a, int64_t trials, int64_t critical, int64_t critical_sq)
{
    a->trials += trials;
    a->critical += critical;
    a->critical_sq += critical_sq;
}

/* One trial's record into acc (campaign_run.c folds in trial order). */
void bf__result_fold(const bf_campaign *c, bf_campaign_result *acc, const bf_trial_record *rec, const bf__first *first)
{
    bf_outcome o = rec->outcome;
    int first_bit = first->bit;
    /* groups 1..: each under its own first fault, beside group 0's counts */
    for (size_t g = 0; g < acc->n_extra_groups && acc->group_by_site; g++) {
        if (first->gsite[g] >= 0) acc->group_by_site[acc->group_site0[g] + (size_t)first->gsite[g]].n[o]++;
        if (first->gbit[g] >= 0) acc->group_by_bit[g][first->gbit[g]].n[o]++;
    }
    acc->trials_done++;
    acc->total.n[o]++;
    /* by_site and by_bit describe single faults; a BER trial is a rate's */
    /* IVMOD's parts, grouped the same way: the trial's critical images */
    int iv = c->golden.task == BF_TASK_DETECTION || c->golden.task == BF_TASK_SEGMENTATION;
    int64_t k = rec->changed;
    if (rec->rate_index < 0 && rec->n_kept > 0 && rec->faults[0].group == 0) {   /* group 0's sites */
        size_t site = (size_t)rec->faults[0].site;
        acc->by_site[site].n[o]++;
        if (first_bit >= 0) acc->by_site_bit[site * 64 + (size_t)first_bit].n[o]++;
        if (iv) bf__ivmod_add(&acc->ivmod_by_site[site], 1, k, k * k);
        if (iv && first_bit >= 0) bf__ivmod_add(&acc->ivmod_by_site_bit[site * 64 + (size_t)first_bit], 1, k, k * k);
    }
    if (first_bit >= 0) acc->by_bit[first_bit].n[o]++;
    if (iv && first_bit >= 0) bf__ivmod_add(&acc->ivmod_by_bit[first_bit], 1, k, k * k);
    if (rec->rate_index >= 0) acc->by_rate[rec->rate_index].n[o]++;
    for (int m = 0; m < BF_METRIC_COUNT; m++) {
        double v = rec->metrics[m];
        if (!isfinite(v)) continue;
        bf__sums_add(&acc->metric[m], v, c->judge.bound[m], c->judge.fsum[m], c->judge.fsq[m]);
        if (rec->rate_index >= 0)
            bf__sums_add(&acc->rate_metric[(size_t)rec->rate_index * BF_METRIC_COUNT + m], v, c->judge.bound[m], c->judge.fsum[m], c->judge.fsq[m]);
    }
}

static void sums_merge(bf_metric_sums *a, const bf_metric_sums *b)
{
    a->n += b->n;
    a->sum += b->sum;
    a->sumsq += b->sumsq;
}

bf_status bf_campaign_result_merge(bf_campaign_result *a, const bf_campaign_result *b, bf_error *err)
{
    /* An empty (zeroed) result takes b's shape: merging starts from nothing. */
    if (!a->by_site && a->n_sites == 0 && a->trials_planned == 0) {
        bf_status st = bf__result_init(a, b->n_sites, b->n_rates, err);
        if (st == BF_OK) st = bf__result_shape_groups(a, b->n_extra_groups, b->group_site0, b->n_group_sites, err);
        if (st != BF_OK) return st;
        memcpy(a->golden, b->golden, sizeof a->golden);
        a->task = b->task;
        a->samples = b->samples;
    }
    if (a->n_sites != b->n_sites || a->n_rates != b->n_rates)
        return bf_error_set(err, BF_EINVAL,
                            "cannot merge results of different campaigns: %zu sites and %zu rates vs %zu sites and %zu rates",
                            a->n_sites, a->n_rates, b->n_sites, b->n_rates);
    if (a->task != b->task || a->samples != b->samples)
        return bf_error_set(err, BF_EINVAL, "cannot merge results of different campaigns: %s task on %lld samples vs %s on %lld",
                            bf_task_name(a->task), (long long)a->samples, bf_task_name(b->task), (long long)b->samples);
    a->trials_planned += b->trials_planned;
    a->trials_done += b->trials_done;
    a->stopped_early |= b->stopped_early;
    /* each shard applies the stop rule to itself: the merged target was met
     * when every shard's was, after their trials together */
    for (int k = 0; k < 3; k++)
        a->stop_met_at[k] = a->stop_met_at[k] < 0 || b->stop_met_at[k] < 0 ? -1 : a->stop_met_at[k] + b->stop_met_at[k];
    /* every shard of an adaptive campaign ran the same pilot and planned
     * the same rounds (campaign_adapt_shard.c) */
    if (b->adaptive_pilot > a->adaptive_pilot) a->adaptive_pilot = b->adaptive_pilot;
    if (b->adaptive_rounds > a->adaptive_rounds) a->adaptive_rounds = b->adaptive_rounds;
    if (a->n_extra_groups != b->n_extra_groups || a->n_group_sites != b->n_group_sites)
        return bf_error_set(err, BF_EINVAL, "cannot merge results of different campaigns: %zu fault groups with %zu sites vs %zu "
                            "with %zu", a->n_extra_groups + 1, a->n_group_sites, b->n_extra_groups + 1, b->n_group_sites);
    counts_add(&a->total, &b->total);
    for (size_t i = 0; a->group_by_site && b->group_by_site && i < a->n_group_sites; i++)
        counts_add(&a->group_by_site[i], &b->group_by_site[i]);
    for (size_t g = 0; g < a->n_extra_groups; g++)
        for (int i = 0; i < 64; i++) counts_add(&a->group_by_bit[g][i], &b->group_by_bit[g][i]);
    for (size_t i = 0; i < a->n_sites; i++) counts_add(&a->by_site[i], &b->by_site[i]);
    for (int i = 0; i < 64; i++) counts_add(&a->by_bit[i], &b->by_bit[i]);
    for (size_t i = 0; a->by_site_bit && b->by_site_bit && i < a->n_sites * 64; i++)
        counts_add(&a->by_site_bit[i], &b->by_site_bit[i]);
    /* a result parsed from a document of an older bitflip may lack them */
    for (size_t i = 0; a->ivmod_by_site && b->ivmod_by_site && i < a->n_sites; i++)
        bf__ivmod_add(&a->ivmod_by_site[i], b->ivmod_by_site[i].trials, b->ivmod_by_site[i].critical, b->ivmod_by_site[i].critical_sq);
    for (size_t i = 0; a->ivmod_by_site_bit && b->ivmod_by_site_bit && i < a->n_sites * 64; i++)
        bf__ivmod_add(&a->ivmod_by_site_bit[i], b->ivmod_by_site_bit[i].trials, b->ivmod_by_site_bit[i].critical,
                      b->ivmod_by_site_bit[i].critical_sq);
    for (int i = 0; i < 64; i++)
        bf__ivmod_add(&a->ivmod_by_bit[i], b->ivmod_by_bit[i].trials, b->ivmod_by_bit[i].critical, b->ivmod_by_bit[i].critical_sq);
    for (int m = 0; m < BF_METRIC_COUNT; m++) sums_merge(&a->metric[m], &b->metric[m]);
    for (size_t i = 0; i < a->n_rates; i++) {
        counts_add(&a->by_rate[i], &b->by_rate[i]);
        for (int m = 0; m < BF_METRIC_COUNT; m++)
            sums_merge(&a->rate_metric[i * BF_METRIC_COUNT + m], &b->rate_metric[i * BF_METRIC_COUNT + m]);
    }
    a->seconds += b->seconds;   /* machine time over the shards */
    return BF_OK;
}

static double on_grid(double v, int f) { return ldexp(round(ldexp(v, f)), -f); }

void bf__sums_add(bf_metric_sums *s, double v, double bound, int fsum, int fsq)
{
    if (!(v > 0)) v = 0;
    if (v > bound) v = bound;
    s->n++;
    s->sum += on_grid(v, fsum);
    s->sumsq += on_grid(v * v, fsq);
}

/* --- statistics */

void bf_wilson(int64_t k, int64_t n, double confidence, double *lo, double *hi)
{
    if (n <= 0) {
        *lo = 0;
        *hi = 1;
        return;
    }
    double z = bf_z_for_confidence(confidence), z2 = z * z, nn = (double)n;
    double p = (double)k / nn;
    double den = 1 + z2 / nn;
    double center = (p + z2 / (2 * nn)) / den;
    double half = z / den * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
    *lo = center - half < 0 ? 0 : center - half;
    *hi = center + half > 1 ? 1 : center + half;
    /* k = 0 and k = n give exact bounds, not rounding residue */
    if (k <= 0) *lo = 0;
    if (k >= n) *hi = 1;
}

/* Acklam's rational approximation of the normal quantile (relative error
 * 1.15e-9), refined by one Halley step on erfc, which brings it to about
 * machine precision. */
static double norm_quantile(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    const double plow = 0.02425;
    double x, q, r;
    if (p <= 0) return -INFINITY;
    if (p >= 1) return INFINITY;
    if (p < plow) {
        q = sqrt(-2 * log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    } else if (p <= 1 - plow) {
        q = p - 0.5;
        r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    } else {
        q = sqrt(-2 * log1p(-p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    }
    double e = 0.5 * erfc(-x / sqrt(2.0)) - p;
    double u = e * 2.5066282746310002 * exp(x * x / 2);   /* sqrt(2 pi) */
    return x - u / (1 + x * u / 2);
}

double bf_z_for_confidence(double confidence)
{
    if (!(confidence > 0)) return 0;
    if (confidence >= 1) return INFINITY;
    return norm_quantile(1 - (1 - confidence) / 2);
}

int64_t bf_leveugle_trials(double population, double margin, double confidence)
{
    if (!(population > 0)) return 0;
    if (!(margin > 0)) return (int64_t)ceil(population);
    double z = bf_z_for_confidence(confidence);
    double n = population / (1 + margin * margin * (population - 1) / (z * z * 0.25));
    /* a hair of tolerance so an exact integer is not pushed up by rounding */
    double up = ceil(n - 1e-9);
    return up < 1 ? 1 : (int64_t)up;
}
