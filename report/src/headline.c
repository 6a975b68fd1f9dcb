/* The sentence on top of a report: the critical rate with its interval and
 * the fault load it was measured at, the tensor that holds the largest
 * share of critical faults, and the protection that recovers most. Plain
 * text (UTF-8): the writers escape it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

/* "critical rate 4.5% [3.8, 5.2], DUE 0.1% [0.0, 0.3] at 1 bit per trial (3,200 trials)" */
static void rate_part(bfr__buf *b, const bfr__doc *d)
{
    const json_t *summary = json_object_get(d->root, "summary"), *camp = d->campaign;
    const char *fm = json_string_value(json_object_get(camp, "fault_model"));
    const json_t *br = json_object_get(d->root, "by_rate"), *top = NULL;
    double r, lo, hi;
    long long trials = json_integer_value(json_object_get(summary, "trials"));
    char load[96], ci[64], tc[32];
    size_t i;
    const json_t *g;
    /* a sweep: the highest rate, where the effect is largest and surest */
    json_array_foreach(br, i, g)
        if (json_integer_value(json_object_get(g, "trials")) > 0 &&
            (!top || json_number_value(json_object_get(g, "rate")) > json_number_value(json_object_get(top, "rate"))))
            top = g;
    if (top) {
        char rs[48];
        if (!bfr__rate(top, "critical", &r, &lo, &hi)) return;
        bfr__sci(rs, sizeof rs, json_number_value(json_object_get(top, "rate")));
        snprintf(load, sizeof load, "at bit error rate %s", rs);
        trials = json_integer_value(json_object_get(top, "trials"));
    } else {
        if (!bfr__rate(json_object_get(summary, "rates"), "critical", &r, &lo, &hi)) return;
        json_int_t bits = json_integer_value(json_object_get(camp, "bits"));
        if (fm && !strcmp(fm, "bitflip") && bits > 0)
            snprintf(load, sizeof load, "at %lld bit%s per trial", (long long)bits, bits > 1 ? "s" : "");
        else if (fm && *fm)
            snprintf(load, sizeof load, "at one %.40s fault per trial", fm);
        else
            snprintf(load, sizeof load, "per trial");
    }
    bfr__pct_ci(ci, sizeof ci, r, lo, hi);
    bfr__count(tc, sizeof tc, trials);
    bfr__printf(b, "critical rate %s", ci);
    /* beside it the detected errors: a protection that turns NaN into a
     * wrong but finite output raises the critical rate alone */
    if (bfr__rate(top ? top : json_object_get(summary, "rates"), "due", &r, &lo, &hi)) {
        bfr__pct_ci(ci, sizeof ci, r, lo, hi);
        bfr__printf(b, ", DUE %s", ci);
    }
    bfr__printf(b, " %s (%s trials)", load, tc);
}

/* "tensor fc1.weight holds 60% of critical faults" */
static void tensor_part(bfr__buf *b, const bfr__set *set, int *oom)
{
    size_t n = 0;
    bfr__tensor_row *rows = bfr__tensor_rows(set, 0, &n, oom);
    double total = 0;   /* a sum over a document's entries: no integer to overflow */
    const bfr__tensor_row *best = NULL;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].critical <= 0 || rows[i].critical > (1LL << 50)) continue;
        /* group 0's tensors: another fault group's rows count the same trials again */
        if (json_integer_value(json_object_get(rows[i].group, "group")) > 0) continue;
        total += (double)rows[i].critical;
        if (!best || rows[i].critical > best->critical) best = &rows[i];
    }
    if (best && total > 0 && n > 1) {
        double share = (double)best->critical / total;
        char s[32];
        bfr__pct(s, sizeof s, share, share >= 0.1 ? 0 : 1, 1);
        if (set->n_docs > 1) bfr__printf(b, "; in %s, tensor %s holds %s of critical faults", set->docs[0].label, bfr__tensor_name(best->group, NULL, 0), s);
        else bfr__printf(b, "; tensor %s holds %s of critical faults", bfr__tensor_name(best->group, NULL, 0), s);
    }
    free(rows);
}

/* "clip recovers 72% [65, 78] of the accuracy lost to faults" */
static void recovery_part(bfr__buf *b, const bfr__set *set)
{
    const bfr__series *best = NULL;
    for (size_t i = 0; i < set->n_series; i++) {
        const json_t *v = json_object_get(set->series[i].recovery, "value");
        if (json_is_number(v) &&
            (!best || json_number_value(v) > json_number_value(json_object_get(best->recovery, "value"))))
            best = &set->series[i];
    }
    if (!best) return;
    const json_t *ci = json_object_get(best->recovery, "ci");
    const char *metric = json_string_value(json_object_get(best->recovery, "metric"));
    char v[24], l[24], h[24];
    bfr__pct(v, sizeof v, json_number_value(json_object_get(best->recovery, "value")), 0, 1);
    bfr__printf(b, "; %s recovers %s", best->label, v);
    if (json_is_number(json_array_get(ci, 0)) && json_is_number(json_array_get(ci, 1))) {
        bfr__pct(l, sizeof l, json_number_value(json_array_get(ci, 0)), 0, 0);
        bfr__pct(h, sizeof h, json_number_value(json_array_get(ci, 1)), 0, 0);
        bfr__printf(b, " [%s, %s]", l, h);
    }
    bfr__printf(b, " of the %s lost to faults", metric && !strcmp(metric, "auc") ? "AUC" : "accuracy");
}

char *bfr__headline(const bfr__set *set)
{
    bfr__buf b = {0};
    int oom = 0;
    for (size_t d = 0; d < set->n_docs && d < 3; d++) {
        size_t before = b.len;
        if (d) bfr__puts(&b, "; ");
        if (set->n_docs > 1) bfr__printf(&b, "%s: ", set->docs[d].label);
        size_t mark = b.len;
        rate_part(&b, &set->docs[d]);
        if (b.len == mark) b.len = before;   /* nothing to say about this one */
        if (b.p) b.p[b.len] = '\0';
    }
    tensor_part(&b, set, &oom);
    recovery_part(&b, set);
    if (oom) { bfr__buf_free(&b); return NULL; }
    /* a sentence of its own when it does not start with the rate */
    if (b.len >= 2 && !strncmp(b.p, "; ", 2)) {
        memmove(b.p, b.p + 2, b.len - 1);
        b.len -= 2;
    }
    return bfr__buf_take(&b);
}
