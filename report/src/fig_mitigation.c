/* Figure: what each protection recovers of the metric the faults took, with
 * its paired-bootstrap interval, and what it costs (run time, storage). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_impl.h"

#define W 760
#define L 230
#define VW 240
#define R 16
#define T 64
#define BH 20

int bfr__fig_mitigation(const bfr__set *set, json_t *figs)
{
    int idx[BFR_MAX_SERIES], n = 0;
    double lo = 0, hi = 1;
    const char *metric = NULL;
    for (size_t i = 0; i < set->n_series; i++) {
        const bfr__series *s = &set->series[i];
        if (!json_is_object(s->recovery)) continue;
        const json_t *v = json_object_get(s->recovery, "value"), *ci = json_object_get(s->recovery, "ci");
        if (!metric) metric = json_string_value(json_object_get(s->recovery, "metric"));
        if (json_is_number(v)) lo = fmin(lo, json_number_value(v)), hi = fmax(hi, json_number_value(v));
        if (json_is_number(json_array_get(ci, 0))) lo = fmin(lo, json_number_value(json_array_get(ci, 0)));
        if (json_is_number(json_array_get(ci, 1))) hi = fmax(hi, json_number_value(json_array_get(ci, 1)));
        idx[n++] = (int)i;
    }
    if (!n) return 0;
    if (lo < -2) lo = -2;   /* a protection that makes things much worse: the bar is cut, the number is not */
    if (hi > 2) hi = 2;
    if (!metric || (strcmp(metric, "auc") && strcmp(metric, "accuracy"))) metric = "accuracy";
    const char *mname = !strcmp(metric, "auc") ? "AUC" : "accuracy";
    double conf = bfr__confidence(set, 0);
    int plot = n * (BH + 10), h = T + plot + 78;
    char title[128], sub[300], alt[640], xl[128];
    snprintf(title, sizeof title, "What each protection recovers, and what it costs");
    snprintf(sub, sizeof sub, "share of the %s the faults took that the protection wins back, on the same faults; whiskers: %.0f%% paired bootstrap",
             mname, 100 * conf);
    snprintf(xl, sizeof xl, "recovery (%% of the %s lost to faults; 100%%: all of it)", mname);
    snprintf(alt, sizeof alt, "Bar chart of the recovery of each protection: ");
    double ticks[10];
    int nt = bfr__ticks(&lo, &hi, 0, ticks, 7);
    bfr__scale sx = {lo, hi, L, W - R - VW, 0};
    bfr__buf b = {0};
    bfr__svg_open(&b, W, h, title, sub);
    bfr__svg_text(&b, 16, 24, "start", "t", title, 0);
    bfr__svg_text(&b, 16, 44, "start", "s", sub, 0);
    bfr__axis_x(&b, &sx, T + plot, ticks, nt, 'p', xl, T);
    bfr__svg_text(&b, W - R - VW + 8, T - 4, "start", "tk", "recovery [interval]; cost: time, storage", 0);
    for (int k = 0; k < n; k++) {
        const bfr__series *s = &set->series[idx[k]];
        const json_t *v = json_object_get(s->recovery, "value"), *ci = json_object_get(s->recovery, "ci");
        double y = T + 6 + k * (BH + 10);
        double rv = json_number_value(v), rl = NAN, rh = NAN;
        if (json_is_number(json_array_get(ci, 0)) && json_is_number(json_array_get(ci, 1)))
            rl = json_number_value(json_array_get(ci, 0)), rh = json_number_value(json_array_get(ci, 1));
        char val[96], cost[96], text[200], tip[320];
        if (!json_is_number(v)) {
            const char *note = json_string_value(json_object_get(s->recovery, "note"));
            snprintf(val, sizeof val, "n/a: %.48s", note ? note : "no value");
        } else if (isfinite(rl)) {
            char a[24], l[24], u[24];
            bfr__pct(a, sizeof a, rv, 0, 1), bfr__pct(l, sizeof l, rl, 0, 0), bfr__pct(u, sizeof u, rh, 0, 0);
            snprintf(val, sizeof val, "%s [%s, %s]", a, l, u);
        } else {
            bfr__pct(val, sizeof val, rv, 0, 1);
        }
        double tr = json_number_value(json_object_get(s->cost, "time_ratio"));
        double so = json_number_value(json_object_get(s->cost, "storage_overhead"));
        char so_s[24];
        bfr__pct(so_s, sizeof so_s, so, so > 0 && so < 0.01 ? 2 : 1, 1);
        if (json_is_number(json_object_get(s->cost, "time_ratio")))
            snprintf(cost, sizeof cost, "%.2f\xc3\x97 time, +%s storage", tr, so_s);
        else
            snprintf(cost, sizeof cost, "cost not measured");
        snprintf(text, sizeof text, "%s; %s", val, cost);
        snprintf(tip, sizeof tip, "%.60s recovers %s of the %s lost to faults; %s", s->label, val, mname, cost);
        bfr__svg_text(&b, L - 8, y + BH / 2.0 + 4, "end", "lb", s->label, 32);
        if (json_is_number(v)) bfr__hbar(&b, &sx, y, BH, rv, rl, rh, bfr__palette[idx[k] % BFR_MAX_SERIES], tip, text, W - R - VW + 8);
        else bfr__svg_text(&b, W - R - VW + 8, y + BH / 2.0 + 4, "start", "v", text, 0);
        if (strlen(alt) < 500) {
            size_t al = strlen(alt);
            snprintf(alt + al, sizeof alt - al, "%s%.40s %s", k ? "; " : "", s->label, val);
        }
    }
    /* 0 and 100% are the two lines a reader measures against */
    double x100 = bfr__map(&sx, 1), x0 = bfr__map(&sx, 0);
    bfr__printf(&b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#444\" stroke-dasharray=\"4 3\"/>\n", x100, x100, T, T + plot);
    bfr__printf(&b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", x0, x0, T, T + plot);
    bfr__svg_text(&b, 16, h - 8, "start", "n",
                 "cost: the protected model's fault-free run time over the unprotected one's, and the extra storage it needs", 0);
    bfr__svg_close(&b);
    char *svg = bfr__buf_take(&b);
    return svg ? bfr__fig_add(figs, "mitigation", title, alt, svg) : 1;
}
