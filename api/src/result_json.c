/* Campaign results to JSON: the result document (header, summary, rates by
 * tensor, bit and group) and the NDJSON trial records. Parsing it back is
 * result_parse.c; its text table, CSV and gates are result_print.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/result.h"
#include "bitflip/bitflip.h"
#include "result_table.h"

const char *const bf__outcome_keys[BF_OUTCOME_COUNT] = {"masked", "tolerable", "critical", "due"};

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static int64_t counts_total(const bf_outcome_counts *c)
{
    int64_t n = 0;
    for (int i = 0; i < BF_OUTCOME_COUNT; i++) n += c->n[i];
    return n;
}

static json_t *rate_json(int64_t k, int64_t n, double conf)
{
    double lo = NAN, hi = NAN;
    if (n > 0) bf_wilson(k, n, conf, &lo, &hi);
    return json_pack("{s:o, s:[o, o]}", "rate", n > 0 ? json_real((double)k / (double)n) : json_null(), "ci", num(lo), num(hi));
}

static const char *const sampling_names[] = {"uniform", "per_tensor", "per_bit", "list", "exhaustive", "adaptive"};
#define COUNT_SAMPLING (sizeof sampling_names / sizeof sampling_names[0])
const char *const bf__stop_keys[3] = {"overall", "per_tensor", "per_bit"};

/* The design of a result document's campaign, for its estimates: from the
 * header's sampling, sites and positions. prefix: n_sites + 1, allocated
 * here, freed by the caller; NULL design (raw counts) when the header lacks
 * them. */
static const bf_design *design_of(const json_t *camp, bf_design *d, int64_t **prefix, int *pos, size_t n_sites)
{
    const json_t *sites = json_object_get(camp, "sites"), *ps = json_object_get(camp, "positions");
    const char *name = json_string_value(json_object_get(camp, "sampling"));
    memset(d, 0, sizeof *d);
    *prefix = NULL;
    if (!name || json_array_size(sites) != n_sites || json_array_size(ps) > 64) return NULL;
    for (size_t k = 0; k < COUNT_SAMPLING; k++)
        if (strcmp(name, sampling_names[k]) == 0) d->sampling = (bf_sampling)k;
    if (!(*prefix = calloc(n_sites + 1, sizeof **prefix))) return NULL;
    for (size_t i = 0; i < n_sites; i++) {
        json_int_t e = json_integer_value(json_object_get(json_array_get(sites, i), "elements"));
        (*prefix)[i + 1] = (*prefix)[i] + (e > 0 ? e : 0);
    }
    for (size_t k = 0; k < json_array_size(ps); k++) {
        json_int_t b = json_integer_value(json_array_get(ps, k));
        if (b < 0 || b > 63) return NULL;
        pos[d->n_pos++] = (int)b;
    }
    d->n_sites = n_sites;
    d->prefix = *prefix;
    d->pos = pos;
    d->draws = 1;
    return d;
}

/* An outcome's rate over a domain with its interval: the design's
 * estimator (docs/STATISTICS.md), or Wilson's on the counts without one. */
static json_t *estimate_json(const bf_design *d, const bf_campaign_result *r, int64_t site, int bit, bf_outcome o,
                             const bf_outcome_counts *c, double conf)
{
    if (!d) return rate_json(c->n[o], counts_total(c), conf);
    bf_estimate e;
    bf_rate_estimate(d, r, site, bit, o, conf, &e);
    return json_pack("{s:o, s:[o, o], s:o, s:o}", "rate", num(e.rate), "ci", num(e.lo), num(e.hi), "se", num(e.se), "n_eff",
                     num(e.n_eff));
}

double bf__result_confidence(const json_t *header)
{
    double c = json_number_value(json_object_get(json_object_get(header, "campaign"), "confidence"));
    return c > 0 && c < 1 ? c : 0.95;
}

json_t *bf_result_header(const bf_campaign_spec *spec, const bf_campaign *c, const bf_campaign_result *r)
{
    json_t *h = json_object(), *camp = json_object(), *sites = json_array(), *golden = json_object();
    json_object_set_new(camp, "model", json_string(spec->model ? spec->model : ""));
    json_object_set_new(camp, "dataset", json_string(spec->dataset ? spec->dataset : ""));
    json_object_set_new(camp, "seed", json_integer((json_int_t)spec->seed));
    json_object_set_new(camp, "trials", json_integer(bf_campaign_num_trials(c)));
    static const char *const targets[] = {"weights", "activations", "inputs", "kv_cache"};
    json_object_set_new(camp, "target", json_string((unsigned)spec->target < 4 ? targets[spec->target] : "?"));
    json_object_set_new(camp, "fault_model", json_string(bf_fault_model_name(spec->model_kind)));
    json_object_set_new(camp, "bits", json_integer(spec->bits));
    /* a multi-bit upset in 64-bit words (docs/CAMPAIGNS.md) */
    if (spec->burst == BF_BURST_WORD) json_object_set_new(camp, "burst", json_string("word"));
    if (spec->words > 0) json_object_set_new(camp, "words", json_integer(spec->words));
    json_object_set_new(camp, "representation", json_string(bf_repr_name(spec->repr)));
    json_object_set_new(camp, "persistence", json_string(spec->persistence == BF_PERSIST_PERMANENT ? "permanent" : "transient"));
    /* the order a TopK or NMS kept equal values in (--tie-order), where the
     * model has one: what `bitflip report --trial` re-runs it with */
    const char *ties = bf_campaign_tie_order(c);
    if (ties) json_object_set_new(camp, "tie_order", json_string(ties));
    /* faults as a list: groups 1.. (group 0 is the fields above) */
    if (spec->n_groups) json_object_set_new(camp, "fault_groups", bf__result_fault_groups(spec, c));
    json_object_set_new(camp, "sampling", json_string((unsigned)spec->sampling < COUNT_SAMPLING ? sampling_names[spec->sampling] : "?"));
    /* what the estimators need beyond the sites: the first-bit positions of
     * the population (the strata's second axis) */
    bf_design design;
    bf_campaign_design(c, &design);
    if (design.n_pos) {
        json_t *pos = json_array();
        for (int k = 0; k < design.n_pos; k++) json_array_append_new(pos, json_integer(design.pos[k]));
        json_object_set_new(camp, "positions", pos);
    }
    if (spec->stop_margin > 0) {
        json_t *stop = json_pack("{s:f}", "margin", spec->stop_margin);
        if (spec->stop_tensor_margin > 0) json_object_set_new(stop, "per_tensor_margin", json_real(spec->stop_tensor_margin));
        if (spec->stop_bit_margin > 0) json_object_set_new(stop, "per_bit_margin", json_real(spec->stop_bit_margin));
        json_object_set_new(camp, "stop", stop);
    }
    json_object_set_new(camp, "population", json_real(bf_campaign_population(c)));
    json_object_set_new(camp, "confidence", json_real(spec->stop_confidence > 0 ? spec->stop_confidence : 0.95));
    if (spec->n_rates) {
        json_t *rates = json_array();
        for (size_t i = 0; i < spec->n_rates; i++) json_array_append_new(rates, json_real(spec->rates[i]));
        json_object_set_new(camp, "rates", rates);
        json_object_set_new(camp, "repeats", json_integer(spec->repeats));
    }
    if (spec->w_max > 0) json_object_set_new(camp, "w_max", json_real(spec->w_max));
    if (spec->group_size > 0) json_object_set_new(camp, "group_size", json_integer((json_int_t)spec->group_size));
    if (spec->fault_scales) json_object_set_new(camp, "fault_scales", json_true());
    if (spec->gen_new_tokens > 0)
        json_object_set_new(camp, "generate", json_pack("{s:I}", "new_tokens", (json_int_t)spec->gen_new_tokens));
    if (spec->model_kind == BF_FAULT_PROFILED && spec->errmap) {
        const bf_errmap *m = spec->errmap;
        json_t *em = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "path", spec->error_map ? spec->error_map : "",
                               "rows", (json_int_t)m->rows, "cols", (json_int_t)m->cols, "flip", (json_int_t)m->n[0],
                               "stuck_at_0", (json_int_t)m->n[1], "stuck_at_1", (json_int_t)m->n[2]);
        if (em && m->voltage == m->voltage) json_object_set_new(em, "voltage", json_real(m->voltage));
        if (em && m->chip) json_object_set_new(em, "chip", json_string(m->chip));
        json_object_set_new(camp, "error_map", em);
        json_object_set_new(camp, "repeats", json_integer(spec->repeats));
    }
    for (size_t i = 0; i < bf_campaign_num_sites(c); i++) {
        const bf_site *s = bf_campaign_site(c, i);
        json_t *site = json_pack("{s:s, s:s?, s:I, s:i}", "name", s->name, "op", s->op, "elements",
                                 (json_int_t)s->elements, "bits", s->bits);
        /* absent when nothing was recovered (bitflip/model.h) */
        if (site && s->torch_name) json_object_set_new(site, "torch_name", json_string(s->torch_name));
        if (site && s->torch_note) json_object_set_new(site, "torch_note", json_string(s->torch_note));
        /* the named site (bitflip/sites.h) this node output is, when it is one */
        if (site && s->site) json_object_set_new(site, "site", json_string(s->site));
        /* a dynamic step computes it: `elements` is the golden mean per sample (bitflip/campaign.h) */
        if (site && s->dynamic) json_object_set_new(site, "dynamic", json_true());
        /* kv_cache: the layer and kind, and the entries' extent in this value */
        if (site && s->kv_kind)
            json_object_set_new(site, "kv", json_pack("{s:i, s:s, s:I, s:I, s:I}", "layer", s->kv_layer, "kind",
                                                      s->kv_kind == 'k' ? "k" : "v", "heads", (json_int_t)s->kv.heads,
                                                      "positions", (json_int_t)s->kv.positions, "dim",
                                                      (json_int_t)s->kv.dim));
        json_array_append_new(sites, site);
    }
    json_object_set_new(camp, "sites", sites);
    json_object_set_new(golden, "task", json_string(bf_task_name(r->task)));
    json_object_set_new(golden, "samples", json_integer(r->samples));
    /* the task metrics; deviations from golden are 0 by definition here */
    for (int m = 0; m < BF_METRIC_COUNT; m++)
        if (m != BF_METRIC_TOP1_MISMATCH && m != BF_METRIC_MSE && m != BF_METRIC_MAX_ABS && isfinite(r->golden[m]))
            json_object_set_new(golden, bf_metric_name((bf_metric_id)m), json_real(r->golden[m]));
    json_object_set_new(h, "bitflip", json_string(BITFLIP_VERSION));
    json_object_set_new(h, "campaign", camp);
    json_object_set_new(h, "golden", golden);
    return h;
}

static json_t *counts_json(const bf_outcome_counts *c)
{
    json_t *o = json_object();
    for (int i = 0; i < BF_OUTCOME_COUNT; i++) json_object_set_new(o, bf__outcome_keys[i], json_integer(c->n[i]));
    return o;
}



/* Two-sided Student t quantile with nu degrees of freedom: the
 * Cornish-Fisher expansion around z (within 0.2% of the exact value for
 * nu >= 3 at 95%; exact for nu -> infinity), closed forms for nu 1 and 2. Small repeat counts (10 draws
 * per BER rate) need t, not z. */
static double t_quantile(double conf, double nu)
{
    double z = bf_z_for_confidence(conf), p = 1 - (1 - conf) / 2;
    if (nu < 1) return NAN;
    /* one and two degrees of freedom (IVMOD of a bit hit twice or three
     * times), where the expansion is far off (9.6 for 12.7 at 95%): the
     * closed forms of the quantile */
    if (nu == 1) return tan(3.14159265358979323846 * (p - 0.5));
    if (nu == 2) return (2 * p - 1) / sqrt(2 * p * (1 - p));
    double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
    return z + (z3 + z) / (4 * nu) + (5 * z5 + 16 * z3 + 3 * z) / (96 * nu * nu) +
           (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * nu * nu * nu);
}

/* Metrics that live in [0, 1]: their intervals are clipped to it. */
static int unit_metric(const char *name)
{
    return !strcmp(name, "accuracy") || !strcmp(name, "auc") || !strcmp(name, "top1_mismatch") || !strcmp(name, "token_accuracy") ||
           !strcmp(name, "choice_accuracy") || !strcmp(name, "generation_match") || !strcmp(name, "miou") ||
           !strcmp(name, "pixel_accuracy") || !strcmp(name, "map") || !strcmp(name, "map50") || !strcmp(name, "recall");
}

static json_t *metric_json(const char *name, const bf_metric_sums *s, double conf)
{
    double mean = s->n ? s->sum / (double)s->n : NAN;
    double var = s->n > 1 ? (s->sumsq - s->sum * mean) / (double)(s->n - 1) : NAN;
    double sd = var > 0 ? sqrt(var) : (s->n > 1 ? 0 : NAN);
    double half = s->n > 1 ? t_quantile(conf, (double)(s->n - 1)) * sd / sqrt((double)s->n) : NAN;
    double lo = mean - half, hi = mean + half;
    if (unit_metric(name)) {
        if (lo < 0) lo = 0;
        if (hi > 1) hi = 1;
    }
    return json_pack("{s:I, s:f, s:f, s:o, s:o, s:[o, o]}", "n", (json_int_t)s->n, "sum", s->sum, "sumsq", s->sumsq,
                     "mean", num(mean), "std", num(sd), "ci", num(lo), num(hi));
}

/* IVMOD of a group (detection, segmentation): the images its trials' faults
 * made critical over trials x samples, and the Student-t interval of the
 * per-trial share (the one summary.metrics.top1_mismatch has). The integer
 * sums are kept so that shards merge exactly. */
static json_t *ivmod_json(const bf_ivmod_sums *v, int64_t samples, double conf)
{
    double s = (double)samples, t = (double)v->trials, images = t * s;
    double mean = images > 0 ? (double)v->critical / images : NAN;
    double var = v->trials > 1 ? ((double)v->critical_sq / (s * s) - t * mean * mean) / (t - 1) : NAN;
    double sd = var > 0 ? sqrt(var) : (v->trials > 1 ? 0 : NAN);
    double half = v->trials > 1 ? t_quantile(conf, t - 1) * sd / sqrt(t) : NAN;
    double lo = mean - half < 0 ? 0 : mean - half, hi = mean + half > 1 ? 1 : mean + half;
    return json_pack("{s:I, s:I, s:I, s:I, s:o, s:[o, o]}", "trials", (json_int_t)v->trials, "images",
                     (json_int_t)(v->trials * samples), "critical_images", (json_int_t)v->critical,
                     "critical_images_sumsq", (json_int_t)v->critical_sq, "rate", num(mean), "ci", num(lo), num(hi));
}

/* samples of the golden pass when the task has IVMOD (detection,
 * segmentation), else 0 */
static int64_t ivmod_samples(const json_t *header)
{
    const json_t *g = json_object_get(header, "golden");
    const char *task = json_string_value(json_object_get(g, "task"));
    if (!task || (strcmp(task, "detection") && strcmp(task, "segmentation"))) return 0;
    json_int_t n = json_integer_value(json_object_get(g, "samples"));
    return n > 0 ? n : 0;
}

/* Counts, the critical rate and its interval: one entry of by_tensor etc. */
static json_t *group_json(const bf_outcome_counts *c, double conf)
{
    int64_t n = counts_total(c);
    json_t *g = json_object();
    json_object_set_new(g, "trials", json_integer(n));
    json_object_set_new(g, "outcomes", counts_json(c));
    json_object_set_new(g, "critical", rate_json(c->n[BF_OUTCOME_CRITICAL], n, conf));
    json_object_set_new(g, "due", rate_json(c->n[BF_OUTCOME_DUE], n, conf));
    return g;
}

/* ... a tensor's or a bit's, its rates the design's estimates */
static json_t *domain_json(const bf_design *d, const bf_campaign_result *r, int64_t site, int bit,
                           const bf_outcome_counts *c, double conf)
{
    json_t *g = group_json(c, conf);
    json_object_set_new(g, "critical", estimate_json(d, r, site, bit, BF_OUTCOME_CRITICAL, c, conf));
    json_object_set_new(g, "due", estimate_json(d, r, site, bit, BF_OUTCOME_DUE, c, conf));
    /* a tensor's PVF (Meta's parameter vulnerability factor, arXiv
     * 2405.01741): the probability that a fault in it makes the output
     * wrong, critical or DUE (docs/STATISTICS.md) */
    if (site >= 0 && bit < 0) {
        bf_estimate e;
        unsigned wrong = 1u << BF_OUTCOME_CRITICAL | 1u << BF_OUTCOME_DUE;
        if (d) bf_rate_estimate_any(d, r, site, -1, wrong, conf, &e);
        else {
            int64_t n = counts_total(c), k = c->n[BF_OUTCOME_CRITICAL] + c->n[BF_OUTCOME_DUE];
            e.rate = n > 0 ? (double)k / (double)n : NAN;
            e.lo = e.hi = NAN;
            if (n > 0) bf_wilson(k, n, conf, &e.lo, &e.hi);
        }
        json_object_set_new(g, "pvf", json_pack("{s:o, s:[o, o]}", "rate", num(e.rate), "ci", num(e.lo), num(e.hi)));
    }
    return g;
}

/* Fault groups 1..: their rows of by_tensor and by_bit, after group 0's,
 * each with "group" (docs/CAMPAIGNS.md, "Fault groups"); Wilson intervals
 * on the counts (the groups sample uniformly). */
static void groups_render(const bf_campaign_result *r, const json_t *fgs, double conf, json_t *by_tensor, json_t *by_bit)
{
    for (size_t g = 0; g < r->n_extra_groups && r->group_by_site; g++) {
        const json_t *sites = json_object_get(json_array_get(fgs, g), "sites");
        size_t end = g + 1 < r->n_extra_groups ? r->group_site0[g + 1] : r->n_group_sites;
        for (size_t i = r->group_site0[g]; i < end; i++) {
            json_t *row = domain_json(NULL, r, (int64_t)i, -1, &r->group_by_site[i], conf);
            json_object_set_new(row, "tensor", json_incref(json_object_get(json_array_get(sites, i - r->group_site0[g]), "name")));
            json_object_set_new(row, "group", json_integer((json_int_t)g + 1));
            json_array_append_new(by_tensor, row);
        }
        for (int b = 0; b < 64; b++) {
            if (!counts_total(&r->group_by_bit[g][b])) continue;
            json_t *row = domain_json(NULL, r, -1, b, &r->group_by_bit[g][b], conf);
            json_object_set_new(row, "bit", json_integer(b));
            json_object_set_new(row, "group", json_integer((json_int_t)g + 1));
            json_array_append_new(by_bit, row);
        }
    }
}

/* summary.stop: each target the spec set, whether it was met and at how
 * many trials (the first check where it held) */
static json_t *stop_json(const bf_campaign_result *r)
{
    json_t *o = json_object();
    for (int k = 0; k < 3; k++)
        if (r->stop_met_at[k])
            json_object_set_new(o, bf__stop_keys[k], json_pack("{s:b, s:o}", "met", r->stop_met_at[k] > 0, "trials",
                                                           r->stop_met_at[k] > 0 ? json_integer(r->stop_met_at[k]) : json_null()));
    return o;
}

json_t *bf_result_render(json_t *header, const bf_campaign_result *r, int64_t shards)
{
    double conf = bf__result_confidence(header);
    bf_design dd;
    int64_t *prefix;
    int pos[64];
    const bf_design *d = design_of(json_object_get(header, "campaign"), &dd, &prefix, pos, r->n_sites);
    int64_t iv_samples = r->ivmod_by_site && r->ivmod_by_site_bit ? ivmod_samples(header) : 0;
    json_t *doc = header, *summary = json_object(), *rates = json_object(), *metrics = json_object();
    const json_t *camp = json_object_get(header, "campaign");
    json_object_set_new(doc, "shards", json_integer(shards));
    json_object_set_new(summary, "trials", json_integer(r->trials_done));
    json_object_set_new(summary, "planned", json_integer(r->trials_planned));
    json_object_set_new(summary, "stopped_early", json_boolean(r->stopped_early));
    json_object_set_new(summary, "outcomes", counts_json(&r->total));
    for (int i = 0; i < BF_OUTCOME_COUNT; i++)
        json_object_set_new(rates, bf__outcome_keys[i], estimate_json(d, r, -1, -1, (bf_outcome)i, &r->total, conf));
    json_object_set_new(summary, "rates", rates);
    if (r->stop_met_at[0] || r->stop_met_at[1] || r->stop_met_at[2]) json_object_set_new(summary, "stop", stop_json(r));
    if (r->adaptive_rounds)
        json_object_set_new(summary, "adaptive", json_pack("{s:I, s:I}", "pilot", (json_int_t)r->adaptive_pilot, "rounds",
                                                           (json_int_t)r->adaptive_rounds));
    for (int m = 0; m < BF_METRIC_COUNT; m++)
        if (r->metric[m].n)
            json_object_set_new(metrics, bf_metric_name((bf_metric_id)m),
                                metric_json(bf_metric_name((bf_metric_id)m), &r->metric[m], conf));
    json_object_set_new(summary, "metrics", metrics);
    json_object_set_new(doc, "summary", summary);

    const json_t *sites = json_object_get(camp, "sites");
    json_t *by_tensor = json_array();
    for (size_t i = 0; i < r->n_sites; i++) {
        json_t *g = domain_json(d, r, (int64_t)i, -1, &r->by_site[i], conf);
        const json_t *site = json_array_get(sites, i), *torch = json_object_get(site, "torch_name");
        json_object_set_new(g, "tensor", json_incref(json_object_get(site, "name")));
        if (torch) json_object_set_new(g, "torch_name", json_incref((json_t *)torch));
        if (json_object_get(site, "site")) json_object_set_new(g, "site", json_incref(json_object_get(site, "site")));
        if (iv_samples) json_object_set_new(g, "ivmod", ivmod_json(&r->ivmod_by_site[i], iv_samples, conf));
        /* the tensor's counts split by the fault's lowest bit (the tensor x
         * bit heatmap); only the bits that were hit, to keep documents small */
        json_t *bits = json_array();
        for (int b = 0; r->by_site_bit && b < 64; b++) {
            const bf_outcome_counts *cb = &r->by_site_bit[i * 64 + (size_t)b];
            if (!counts_total(cb)) continue;
            json_t *e = json_pack("{s:i, s:I, s:o}", "bit", b, "trials", (json_int_t)counts_total(cb), "outcomes", counts_json(cb));
            if (e && iv_samples) json_object_set_new(e, "ivmod", ivmod_json(&r->ivmod_by_site_bit[i * 64 + (size_t)b], iv_samples, conf));
            json_array_append_new(bits, e);
        }
        json_object_set_new(g, "by_bit", bits);
        if (r->n_extra_groups) json_object_set_new(g, "group", json_integer(0));
        json_array_append_new(by_tensor, g);
    }
    json_t *by_bit = json_array();
    groups_render(r, json_object_get(camp, "fault_groups"), conf, by_tensor, by_bit);
    json_object_set_new(doc, "by_tensor", by_tensor);
    size_t b_rows = 0;   /* group 0's rows come first, then groups_render's */
    for (int b = 0; b < 64; b++) {
        if (!counts_total(&r->by_bit[b])) continue;
        json_t *g = domain_json(d, r, -1, b, &r->by_bit[b], conf);
        json_object_set_new(g, "bit", json_integer(b));
        if (iv_samples) json_object_set_new(g, "ivmod", ivmod_json(&r->ivmod_by_bit[b], iv_samples, conf));
        if (r->n_extra_groups) json_object_set_new(g, "group", json_integer(0));
        json_array_insert_new(by_bit, b_rows++, g);
    }
    json_object_set_new(doc, "by_bit", by_bit);
    /* A campaign has one fault model; the aggregate is kept so that results of
     * several campaigns (or, later, mixed campaigns) read the same way. */
    json_t *bm = group_json(&r->total, conf);
    json_object_set_new(bm, "fault_model", json_incref(json_object_get(camp, "fault_model")));
    json_object_set_new(doc, "by_fault_model", json_pack("[o]", bm));
    if (r->n_rates) {
        const json_t *rl = json_object_get(camp, "rates");
        json_t *by_rate = json_array();
        for (size_t i = 0; i < r->n_rates; i++) {
            json_t *g = group_json(&r->by_rate[i], conf), *ms = json_object();
            json_object_set_new(g, "rate", json_incref(json_array_get(rl, i)));
            for (int m = 0; m < BF_METRIC_COUNT; m++) {
                const bf_metric_sums *s = &r->rate_metric[i * BF_METRIC_COUNT + (size_t)m];
                if (s->n) json_object_set_new(ms, bf_metric_name((bf_metric_id)m), metric_json(bf_metric_name((bf_metric_id)m), s, conf));
            }
            json_object_set_new(g, "metrics", ms);
            json_array_append_new(by_rate, g);
        }
        json_object_set_new(doc, "by_rate", by_rate);
    }
    free(prefix);
    return doc;
}

json_t *bf_trial_to_json(const bf_campaign *c, const bf_campaign_spec *spec, const bf_trial_record *rec)
{
    json_t *t = json_object(), *faults = json_array(), *metrics = json_object();
    json_object_set_new(t, "trial", json_integer(rec->trial));
    json_object_set_new(t, "outcome", json_string(bf_outcome_name(rec->outcome)));
    if (rec->rate_index >= 0 && (size_t)rec->rate_index < spec->n_rates)
        json_object_set_new(t, "rate", json_real(spec->rates[rec->rate_index]));
    json_object_set_new(t, "n_faults", json_integer(rec->n_faults));
    const char *ties = bf_campaign_tie_order(c);
    if (ties) json_object_set_new(t, "tie_order", json_string(ties));   /* the result's campaign.tie_order */
    if (spec->model_kind == BF_FAULT_PROFILED)
        json_object_set_new(t, "offset", json_integer(bf_campaign_map_offset(c, rec->trial)));
    for (int i = 0; i < rec->n_kept; i++) {
        const bf_applied_fault *f = &rec->faults[i];
        json_t *bits = json_array();
        for (int b = 0; b < 32; b++)
            if (f->mask & (UINT32_C(1) << b)) json_array_append_new(bits, json_integer(b));
        const bf_site *site = bf_campaign_group_site(c, (size_t)f->group, (size_t)f->site);
        json_t *jf = json_pack("{s:s, s:I, s:o, s:o, s:o}", "tensor", site->name, "index", (json_int_t)f->index, "bits",
                               bits, "old", num(f->old_value), "new", num(f->new_value));
        if (spec->n_groups) json_object_set_new(jf, "group", json_integer(f->group));   /* faults as a list: which group */
        if (site->torch_name) json_object_set_new(jf, "torch_name", json_string(site->torch_name));
        if (site->site) json_object_set_new(jf, "site", json_string(site->site));
        if (site->kv_kind) {   /* the entry, as a KV cache indexes it */
            int64_t h, p, d;
            bf_site_kv_entry(site, f->index, &h, &p, &d);
            json_object_set_new(jf, "layer", json_integer(site->kv_layer));
            json_object_set_new(jf, "kind", json_string(site->kv_kind == 'k' ? "k" : "v"));
            json_object_set_new(jf, "head", json_integer(h));
            json_object_set_new(jf, "position", json_integer(p));
            json_object_set_new(jf, "dim", json_integer(d));
        }
        if (!isfinite(f->new_value) && !(site->dynamic && f->index < 0))   /* a fault that struck nothing: null */
            json_object_set_new(jf, "new", json_string(isnan(f->new_value) ? "NaN" : f->new_value > 0 ? "Infinity" : "-Infinity"));
        if (f->sample >= 0) json_object_set_new(jf, "sample", json_integer(f->sample));
        /* a dynamic site: the elements the value had where the fault struck (0: it did nothing) */
        if (site->dynamic) json_object_set_new(jf, "run_elements", json_integer(f->run_elements));
        json_array_append_new(faults, jf);
    }
    json_object_set_new(t, "faults", faults);
    for (int m = 0; m < BF_METRIC_COUNT; m++)
        if ((!spec->metrics || (spec->metrics & (1u << m))) && !isnan(rec->metrics[m]))
            json_object_set_new(metrics, bf_metric_name((bf_metric_id)m), num(rec->metrics[m]));
    json_object_set_new(t, "metrics", metrics);
    json_object_set_new(t, "changed_predictions", json_integer(rec->changed));
    return t;
}
