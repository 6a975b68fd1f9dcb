/* Figure: the task metric against the bit error rate, one curve per result
 * or protection, each with the confidence band of its mean, and the
 * fault-free value as a dashed line. BER sweeps only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

#define W 760
#define H0 408
#define L 96
#define R 24
#define T 64
#define PH 270   /* plot height */

typedef struct pt {
    double x, y, lo, hi;
    long long trials;
} pt;

/* The points of one curve: the metric's mean and interval at each rate, or
 * (no metric) the critical rate with its Wilson interval. */
static int points(const bfr__series *s, const char *metric, pt *p)
{
    int n = 0;
    size_t i;
    const json_t *g;
    json_array_foreach(s->by_rate, i, g) {
        double x = json_number_value(json_object_get(g, "rate"));
        if (!(x > 0) || !isfinite(x)) continue;
        p[n].x = x;
        p[n].trials = json_integer_value(json_object_get(g, "trials"));
        if (metric) {
            const json_t *m = json_object_get(json_object_get(g, "metrics"), metric), *ci = json_object_get(m, "ci");
            if (!json_is_number(json_object_get(m, "mean"))) continue;
            p[n].y = json_number_value(json_object_get(m, "mean"));
            p[n].lo = json_is_number(json_array_get(ci, 0)) ? json_number_value(json_array_get(ci, 0)) : p[n].y;
            p[n].hi = json_is_number(json_array_get(ci, 1)) ? json_number_value(json_array_get(ci, 1)) : p[n].y;
        } else if (!bfr__rate(g, "critical", &p[n].y, &p[n].lo, &p[n].hi)) {
            continue;
        }
        if (!isfinite(p[n].y)) continue;
        n++;
    }
    return n;
}

static int cmp_x(const void *a, const void *b)
{
    double x = ((const pt *)a)->x, y = ((const pt *)b)->x;
    return (x > y) - (x < y);
}

/* One curve: its confidence band, its line, and a point per rate with the
 * numbers in its tooltip (the band clipped to the axis's range). */
static void draw_curve(bfr__buf *b, const bfr__scale *sx, const bfr__scale *sy, const pt *p, int n, const char *col,
                       const char *label, int pct, const char *mname)
{
    bfr__printf(b, "<g class=\"bfr-curve\"><polygon fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" points=\"", col);
    for (int k = 0; k < n; k++) {
        bfr__coord(b, bfr__map(sx, p[k].x));
        bfr__puts(b, ",");
        bfr__coord(b, bfr__map(sy, fmin(p[k].hi, sy->d1)));
        bfr__puts(b, " ");
    }
    for (int k = n - 1; k >= 0; k--) {
        bfr__coord(b, bfr__map(sx, p[k].x));
        bfr__puts(b, ",");
        bfr__coord(b, bfr__map(sy, fmax(p[k].lo, sy->d0)));
        bfr__puts(b, " ");
    }
    bfr__printf(b, "\"/>\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
    for (int k = 0; k < n; k++) {
        bfr__coord(b, bfr__map(sx, p[k].x));
        bfr__puts(b, ",");
        bfr__coord(b, bfr__map(sy, p[k].y));
        bfr__puts(b, " ");
    }
    bfr__puts(b, "\"/>\n");
    for (int k = 0; k < n; k++) {
        char xs[48], ys[96], ts[32];
        bfr__sci(xs, sizeof xs, p[k].x);
        if (pct) bfr__pct_ci(ys, sizeof ys, p[k].y, p[k].lo, p[k].hi);
        else {
            char a[24], l[24], u[24];
            bfr__num(a, sizeof a, p[k].y, 4), bfr__num(l, sizeof l, p[k].lo, 4), bfr__num(u, sizeof u, p[k].hi, 4);
            snprintf(ys, sizeof ys, "%s [%s, %s]", a, l, u);
        }
        bfr__count(ts, sizeof ts, p[k].trials);
        bfr__printf(b, "<circle r=\"3.5\" fill=\"%s\" cx=\"", col);
        bfr__coord(b, bfr__map(sx, p[k].x));
        bfr__puts(b, "\" cy=\"");
        bfr__coord(b, bfr__map(sy, p[k].y));
        bfr__puts(b, "\"><title>");
        bfr__xml(b, label, 0);
        bfr__printf(b, ": bit error rate %s, %s %s, %s trials</title></circle>\n", xs, mname, ys, ts);
    }
}

int bfr__fig_ber(const bfr__set *set, json_t *figs)
{
    const char *metric = bfr__task_metric(set);
    /* every rate of every curve: as many points as the documents hold */
    size_t stride = 1;
    for (size_t i = 0; i < set->n_series; i++)
        if (set->series[i].by_rate && json_array_size(set->series[i].by_rate) > stride) stride = json_array_size(set->series[i].by_rate);
    pt *pts = calloc((size_t)BFR_MAX_SERIES * stride, sizeof *pts);
    int np[BFR_MAX_SERIES] = {0}, idx[BFR_MAX_SERIES], nc = 0;
    if (!pts) return 1;
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY, golden = NAN;
    for (size_t i = 0; i < set->n_series && nc < BFR_MAX_SERIES; i++) {
        const bfr__series *s = &set->series[i];
        if (!s->by_rate) continue;
        pt *p = pts + (size_t)nc * stride;
        int n = points(s, metric, p);
        if (!n) continue;
        qsort(p, (size_t)n, sizeof *p, cmp_x);
        for (int k = 0; k < n; k++) {
            xlo = fmin(xlo, p[k].x), xhi = fmax(xhi, p[k].x);
            ylo = fmin(ylo, fmin(p[k].lo, p[k].y)), yhi = fmax(yhi, fmax(p[k].hi, p[k].y));
        }
        if (metric && isnan(golden) && json_is_number(json_object_get(s->golden, metric)))
            golden = json_number_value(json_object_get(s->golden, metric));
        np[nc] = n;
        idx[nc++] = (int)i;
    }
    if (!nc) { free(pts); return 0; }
    if (isfinite(golden)) ylo = fmin(ylo, golden), yhi = fmax(yhi, golden);
    int pct = !metric || !strcmp(metric, "accuracy");
    if (pct || !strcmp(metric, "auc")) {
        if (ylo < 0) ylo = 0;
        if (yhi > 1) yhi = 1;
    }
    double xt[16], yt[16];
    int nxt = bfr__ticks(&xlo, &xhi, 1, xt, 8), nyt = bfr__ticks(&ylo, &yhi, 0, yt, 7);
    char *labels[BFR_MAX_SERIES + 1];
    const char *colors[BFR_MAX_SERIES + 1];
    int nl = 0;
    if (isfinite(golden)) colors[nl] = BFR_FAULT_FREE, labels[nl++] = (char *)"without faults";
    for (int c = 0; c < nc; c++) colors[nl] = bfr__palette[idx[c] % BFR_MAX_SERIES], labels[nl++] = set->series[idx[c]].label;
    int legend_rows = bfr__legend_rows(labels, nl, W - L - R);
    int h = H0 + 18 * legend_rows + (set->n_hidden ? 16 : 0);
    double conf = bfr__confidence(set, 0);

    char title[128], sub[256], ylab[96], alt[512];
    const char *mname = !metric ? "critical rate" : !strcmp(metric, "auc") ? "AUC" : "accuracy";
    snprintf(title, sizeof title, "%s under bit errors", !metric ? "Critical rate" : !strcmp(metric, "auc") ? "AUC" : "Accuracy");
    if (metric)
        snprintf(sub, sizeof sub, "mean over the trials at each rate; shaded: %.0f%% confidence interval of the mean%s", 100 * conf,
                 isfinite(golden) ? "; dashed: without faults" : "");
    else
        snprintf(sub, sizeof sub, "share of trials where a prediction changed; shaded: %.0f%% Wilson interval", 100 * conf);
    snprintf(ylab, sizeof ylab, "%s%s", metric ? (pct ? "accuracy under faults" : "AUC under faults") : "critical rate",
             pct ? " (%)" : "");
    snprintf(alt, sizeof alt, "%s against the bit error rate (log scale), %d curve%s: ", title, nc, nc > 1 ? "s" : "");

    bfr__buf b = {0};
    bfr__svg_open(&b, W, h, title, sub);
    bfr__svg_text(&b, L, 24, "start", "t", title, 0);
    bfr__svg_text(&b, L, 44, "start", "s", sub, 0);
    bfr__scale sx = {xlo, xhi, L + 10, W - R - 10, 1}, sy = {ylo, yhi, T + PH, T, 0};
    bfr__axis_y(&b, &sy, L, yt, nyt, pct ? 'p' : 'n', ylab, W - R);
    bfr__axis_x(&b, &sx, T + PH, xt, nxt, 's', "bit error rate (share of stored bits flipped, log scale)", T);
    if (isfinite(golden)) {
        double gy = bfr__map(&sy, golden);
        bfr__printf(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"", L, W - R);
        bfr__coord(&b, gy);
        bfr__puts(&b, "\" y2=\"");
        bfr__coord(&b, gy);
        bfr__puts(&b, "\" stroke=\"" BFR_FAULT_FREE "\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\n");
    }
    for (int c = 0; c < nc; c++) {
        const pt *p = pts + (size_t)c * stride;
        const char *col = bfr__palette[idx[c] % BFR_MAX_SERIES];
        const bfr__series *s = &set->series[idx[c]];
        draw_curve(&b, &sx, &sy, p, np[c], col, s->label, pct, mname);
        bfr__puts(&b, "</g>\n");
        if (c < 3) {
            size_t al = strlen(alt);
            snprintf(alt + al, sizeof alt - al, "%s%.40s", c ? "; " : "", s->label);
        }
    }
    bfr__legend(&b, L, T + PH + 62, W - L - R, labels, colors, nl, isfinite(golden));
    if (set->n_hidden) {
        char note[96];
        snprintf(note, sizeof note, "%zu more configuration%s not drawn (at most %d curves)", set->n_hidden,
                 set->n_hidden > 1 ? "s" : "", BFR_MAX_SERIES);
        bfr__svg_text(&b, L, h - 8, "start", "n", note, 0);
    }
    bfr__svg_close(&b);
    free(pts);
    char *svg = bfr__buf_take(&b);
    if (!svg) return 1;
    return bfr__fig_add(figs, "ber_curve", title, alt, svg);
}
