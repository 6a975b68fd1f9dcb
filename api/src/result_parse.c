/* A result document parsed back into a bf_campaign_result (shards merged,
 * results resumed): the inverse of result_json.c's rendering. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/result.h"
#include "bitflip/bitflip.h"
#include "result_table.h"

static bf_status bad(bf_error *err, const char *ptr) { return bf_error_set(err, BF_EFORMAT, "%s: missing or malformed", ptr); }

static bf_status parse_counts(const json_t *o, const char *ptr, bf_outcome_counts *c, bf_error *err)
{
    if (!json_is_object(o)) return bad(err, ptr);
    for (int i = 0; i < BF_OUTCOME_COUNT; i++) {
        const json_t *v = json_object_get(o, bf__outcome_keys[i]);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            char p[256];
            snprintf(p, sizeof p, "%s/%s", ptr, bf__outcome_keys[i]);
            return bad(err, p);
        }
        c->n[i] = json_integer_value(v);
    }
    return BF_OK;
}

/* An "ivmod" object back into its sums; absent (a document of another task
 * or an older bitflip): zeros */
static bf_status parse_ivmod(const json_t *g, const char *ptr, bf_ivmod_sums *v, bf_error *err)
{
    const json_t *o = json_object_get(g, "ivmod");
    if (!o) return BF_OK;
    const json_t *t = json_object_get(o, "trials"), *k = json_object_get(o, "critical_images"),
                 *q = json_object_get(o, "critical_images_sumsq");
    if (!json_is_integer(t) || !json_is_integer(k) || !json_is_integer(q) || json_integer_value(t) < 0 ||
        json_integer_value(k) < 0 || json_integer_value(q) < 0) {
        char p[256];
        snprintf(p, sizeof p, "%s/ivmod", ptr);
        return bad(err, p);
    }
    v->trials = json_integer_value(t);
    v->critical = json_integer_value(k);
    v->critical_sq = json_integer_value(q);
    return BF_OK;
}

static bf_status parse_sums(const json_t *o, bf_metric_sums *s)
{
    s->n = json_integer_value(json_object_get(o, "n"));
    s->sum = json_number_value(json_object_get(o, "sum"));
    s->sumsq = json_number_value(json_object_get(o, "sumsq"));
    return BF_OK;
}

/* groups_render's rows back: the groups' shape from campaign.fault_groups
 * (their sites), their by_tensor rows after group 0's */
static bf_status groups_parse(const json_t *doc, const json_t *camp, bf_campaign_result *r, bf_error *err)
{
    const json_t *fgs = json_object_get(camp, "fault_groups"), *bt = json_object_get(doc, "by_tensor");
    if (!fgs) return BF_OK;
    if (!json_is_array(fgs) || json_array_size(fgs) > BF_FAULT_GROUPS_MAX - 1) return bad(err, "/campaign/fault_groups");
    r->n_extra_groups = json_array_size(fgs);
    for (size_t g = 0; g < r->n_extra_groups; g++) {
        const json_t *s = json_object_get(json_array_get(fgs, g), "sites");
        if (!json_is_array(s)) {   /* written before groups had rows of their own: none */
            r->n_extra_groups = 0;
            r->n_group_sites = 0;
            return BF_OK;
        }
        r->group_site0[g] = r->n_group_sites;
        r->n_group_sites += json_array_size(s);
    }
    if (!(r->group_by_site = calloc(r->n_group_sites + 1, sizeof *r->group_by_site)))
        return bf_error_set(err, BF_ENOMEM, "out of memory");
    for (size_t i = 0; i < r->n_group_sites; i++) {
        char p[64];
        snprintf(p, sizeof p, "/by_tensor/%zu/outcomes", r->n_sites + i);
        bf_status st = parse_counts(json_object_get(json_array_get(bt, r->n_sites + i), "outcomes"), p, &r->group_by_site[i], err);
        if (st) return st;
    }
    return BF_OK;
}

bf_status bf_result_parse(const json_t *doc, bf_campaign_result *r, bf_error *err)
{
    memset(r, 0, sizeof *r);
    const json_t *camp = json_object_get(doc, "campaign"), *summary = json_object_get(doc, "summary");
    if (!json_is_object(camp)) return bad(err, "/campaign");
    if (!json_is_object(summary)) return bad(err, "/summary");
    const json_t *sites = json_object_get(camp, "sites"), *rates = json_object_get(camp, "rates");
    if (!json_is_array(sites)) return bad(err, "/campaign/sites");
    r->trials_done = json_integer_value(json_object_get(summary, "trials"));
    r->trials_planned = json_integer_value(json_object_get(summary, "planned"));
    r->stopped_early = json_is_true(json_object_get(summary, "stopped_early"));
    const json_t *stop = json_object_get(summary, "stop"), *ad = json_object_get(summary, "adaptive");
    for (int k = 0; k < 3; k++) {
        const json_t *t = json_object_get(stop, bf__stop_keys[k]);
        if (t) r->stop_met_at[k] = json_is_true(json_object_get(t, "met")) ? json_integer_value(json_object_get(t, "trials")) : -1;
        if (t && r->stop_met_at[k] == 0) r->stop_met_at[k] = -1;
    }
    r->adaptive_pilot = json_integer_value(json_object_get(ad, "pilot"));
    r->adaptive_rounds = json_integer_value(json_object_get(ad, "rounds"));
    bf_status st = parse_counts(json_object_get(summary, "outcomes"), "/summary/outcomes", &r->total, err);
    if (st) return st;
    const json_t *metrics = json_object_get(summary, "metrics");
    for (int m = 0; m < BF_METRIC_COUNT; m++) {
        const json_t *o = json_object_get(metrics, bf_metric_name((bf_metric_id)m));
        if (o) parse_sums(o, &r->metric[m]);
    }
    r->n_sites = json_array_size(sites);
    r->by_site = calloc(r->n_sites + 1, sizeof *r->by_site);
    r->by_site_bit = calloc((r->n_sites + 1) * 64, sizeof *r->by_site_bit);
    r->ivmod_by_site = calloc(r->n_sites + 1, sizeof *r->ivmod_by_site);
    r->ivmod_by_site_bit = calloc((r->n_sites + 1) * 64, sizeof *r->ivmod_by_site_bit);
    if (!r->by_site || !r->by_site_bit || !r->ivmod_by_site || !r->ivmod_by_site_bit)
        return bf_error_set(err, BF_ENOMEM, "out of memory");
    const json_t *bt = json_object_get(doc, "by_tensor");
    if ((st = groups_parse(doc, camp, r, err))) return st;
    if (json_array_size(bt) != r->n_sites + r->n_group_sites) return bad(err, "/by_tensor");
    for (size_t i = 0; i < r->n_sites; i++) {
        char p[64];
        snprintf(p, sizeof p, "/by_tensor/%zu/outcomes", i);
        if ((st = parse_counts(json_object_get(json_array_get(bt, i), "outcomes"), p, &r->by_site[i], err))) return st;
        snprintf(p, sizeof p, "/by_tensor/%zu", i);
        if ((st = parse_ivmod(json_array_get(bt, i), p, &r->ivmod_by_site[i], err))) return st;
        /* absent in documents written before bitflip kept the split: zeros */
        size_t j;
        const json_t *gb;
        json_array_foreach(json_object_get(json_array_get(bt, i), "by_bit"), j, gb) {
            json_int_t b = json_integer_value(json_object_get(gb, "bit"));
            snprintf(p, sizeof p, "/by_tensor/%zu/by_bit/%zu", i, j);
            if (b < 0 || b >= 64) return bad(err, p);
            if ((st = parse_ivmod(gb, p, &r->ivmod_by_site_bit[i * 64 + (size_t)b], err))) return st;
            strncat(p, "/outcomes", sizeof p - strlen(p) - 1);
            if ((st = parse_counts(json_object_get(gb, "outcomes"), p, &r->by_site_bit[i * 64 + (size_t)b], err))) return st;
        }
    }
    size_t k;
    const json_t *g;
    json_array_foreach(json_object_get(doc, "by_bit"), k, g) {
        json_int_t b = json_integer_value(json_object_get(g, "bit")), gr = json_integer_value(json_object_get(g, "group"));
        char p[64];
        snprintf(p, sizeof p, "/by_bit/%zu", k);
        if (b < 0 || b >= 64 || gr < 0 || (size_t)gr > r->n_extra_groups) return bad(err, p);
        if (gr > 0) {   /* a fault group's row (groups_render) */
            strncat(p, "/outcomes", sizeof p - strlen(p) - 1);
            if ((st = parse_counts(json_object_get(g, "outcomes"), p, &r->group_by_bit[gr - 1][b], err))) return st;
            continue;
        }
        if ((st = parse_ivmod(g, p, &r->ivmod_by_bit[b], err))) return st;
        strncat(p, "/outcomes", sizeof p - strlen(p) - 1);
        if ((st = parse_counts(json_object_get(g, "outcomes"), p, &r->by_bit[b], err))) return st;
    }
    r->n_rates = json_array_size(rates);
    if (r->n_rates) {
        const json_t *br = json_object_get(doc, "by_rate");
        if (json_array_size(br) != r->n_rates) return bad(err, "/by_rate");
        r->by_rate = calloc(r->n_rates, sizeof *r->by_rate);
        r->rate_metric = calloc(r->n_rates * BF_METRIC_COUNT, sizeof *r->rate_metric);
        if (!r->by_rate || !r->rate_metric) return bf_error_set(err, BF_ENOMEM, "out of memory");
        for (size_t i = 0; i < r->n_rates; i++) {
            const json_t *e = json_array_get(br, i);
            char p[64];
            snprintf(p, sizeof p, "/by_rate/%zu/outcomes", i);
            if ((st = parse_counts(json_object_get(e, "outcomes"), p, &r->by_rate[i], err))) return st;
            for (int m = 0; m < BF_METRIC_COUNT; m++) {
                const json_t *o = json_object_get(json_object_get(e, "metrics"), bf_metric_name((bf_metric_id)m));
                if (o) parse_sums(o, &r->rate_metric[i * BF_METRIC_COUNT + (size_t)m]);
            }
        }
    }
    return BF_OK;
}
