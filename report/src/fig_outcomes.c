/* Figure: how often each outcome happened (masked, tolerable, critical,
 * DUE), with Wilson intervals, one bar per result or protection. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_impl.h"

#define W 760
#define L 210   /* outcome names */
#define VW 150  /* value text */
#define R 16
#define T 64

static const char *const keys[4] = {"masked", "tolerable", "critical", "due"};
static const char *const names[4] = {"masked", "tolerable", "critical", "DUE"};
static const char *const meaning[4] = {"outputs bit-identical", "outputs differ, same predictions", "a prediction changed",
                                       "detected: NaN/Inf or a check fired"};

int bfr__fig_outcomes(const bfr__set *set, json_t *figs)
{
    int ns = (int)set->n_series, bh = ns > 1 ? 14 : 20, gap = 18;
    if (!ns) return 0;
    int group = ns * (bh + 3) + gap;
    char *labels[BFR_MAX_SERIES];
    for (int i = 0; i < ns; i++) labels[i] = set->series[i].label;
    int legend_rows = ns > 1 ? bfr__legend_rows(labels, ns, W - L - R) : 0;
    int plot = 4 * group, h = T + plot + 52 + (legend_rows ? 18 * legend_rows + 14 : 0);
    double conf = bfr__confidence(set, 0);
    char title[] = "What the faults did: outcome of each trial", sub[200], alt[512];
    snprintf(sub, sizeof sub, "share of trials with each outcome; whiskers: %.0f%% Wilson interval", 100 * conf);
    snprintf(alt, sizeof alt, "Bar chart of outcome rates");
    bfr__buf b = {0};
    bfr__svg_open(&b, W, h, title, sub);
    bfr__svg_text(&b, 16, 24, "start", "t", title, 0);
    bfr__svg_text(&b, 16, 44, "start", "s", sub, 0);
    double lo = 0, hi = 1, ticks[8];
    int nt = bfr__ticks(&lo, &hi, 0, ticks, 6);
    bfr__scale sx = {lo, hi, L, W - R - VW, 0};
    bfr__axis_x(&b, &sx, T + plot, ticks, nt, 'p', "share of trials (%)", T);
    for (int o = 0; o < 4; o++) {
        double y0 = T + o * group + gap / 2.0;
        bfr__svg_text(&b, L - 10, y0 + (ns * (bh + 3)) / 2.0, "end", "lb", names[o], 0);
        bfr__svg_text(&b, L - 10, y0 + (ns * (bh + 3)) / 2.0 + 14, "end", "n", meaning[o], 0);
        for (int i = 0; i < ns; i++) {
            const bfr__series *s = &set->series[i];
            double r, rl, rh;
            if (!bfr__rate(json_object_get(s->summary, "rates"), keys[o], &r, &rl, &rh)) continue;
            long long k = json_integer_value(json_object_get(json_object_get(s->summary, "outcomes"), keys[o]));
            long long n = json_integer_value(json_object_get(s->summary, "trials"));
            char v[64], kc[32], nc[32], tip[256];
            bfr__pct_ci(v, sizeof v, r, rl, rh);
            bfr__count(kc, sizeof kc, k), bfr__count(nc, sizeof nc, n);
            snprintf(tip, sizeof tip, "%.60s: %s %s (%s of %s trials)", s->label, names[o], v, kc, nc);
            bfr__hbar(&b, &sx, y0 + i * (bh + 3), bh, r, rl, rh, bfr__palette[i % BFR_MAX_SERIES], tip, v, W - R - VW + 8);
            if (o == 2 && strlen(alt) < 400) {
                size_t al = strlen(alt);
                snprintf(alt + al, sizeof alt - al, "%s%.40s critical %s", i ? "; " : ": ", s->label, v);
            }
        }
    }
    if (ns > 1) {
        bfr__legend(&b, L, T + plot + 62, W - L - R, labels, bfr__palette, ns, 0);
    }
    bfr__svg_close(&b);
    char *svg = bfr__buf_take(&b);
    return svg ? bfr__fig_add(figs, "outcomes", title, alt, svg) : 1;
}
