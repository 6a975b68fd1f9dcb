/* Horizontal bars with interval whiskers and a value beside each: the
 * shape of the outcome, tensor and mitigation figures; and the chart of one
 * such bar per row that the tensor, PVF and IVMOD figures share, with their
 * titles, axis extent and value texts. */
#include <math.h>
#include <string.h>

#include "report_impl.h"

void bfr__hbar(bfr__buf *b, const bfr__scale *sx, double y, double h, double v, double lo, double hi, const char *color,
              const char *tip, const char *value_text, double text_x)
{
    double x0 = bfr__map(sx, sx->d0 < 0 && sx->d1 > 0 ? 0 : sx->d0), x1 = bfr__map(sx, fmin(fmax(v, sx->d0), sx->d1));
    bfr__puts(b, "<g class=\"bfr-bar\"><rect x=\"");
    bfr__coord(b, fmin(x0, x1));
    bfr__puts(b, "\" y=\"");
    bfr__coord(b, y);
    bfr__puts(b, "\" width=\"");
    bfr__coord(b, fabs(x1 - x0));
    bfr__puts(b, "\" height=\"");
    bfr__coord(b, h);
    bfr__printf(b, "\" fill=\"%s\" fill-opacity=\"0.85\"><title>", color);
    bfr__xml(b, tip, 0);
    bfr__puts(b, "</title></rect>\n");
    if (isfinite(lo) && isfinite(hi) && hi > lo) {
        double a = bfr__map(sx, fmax(lo, sx->d0)), c = bfr__map(sx, fmin(hi, sx->d1)), m = y + h / 2;
        bfr__puts(b, "<path stroke=\"#222\" stroke-width=\"1.3\" fill=\"none\" d=\"M");
        bfr__coord(b, a);
        bfr__puts(b, " ");
        bfr__coord(b, m);
        bfr__puts(b, "H");
        bfr__coord(b, c);
        bfr__puts(b, "M");
        bfr__coord(b, a);
        bfr__puts(b, " ");
        bfr__coord(b, y + 2);
        bfr__puts(b, "V");
        bfr__coord(b, y + h - 2);
        bfr__puts(b, "M");
        bfr__coord(b, c);
        bfr__puts(b, " ");
        bfr__coord(b, y + 2);
        bfr__puts(b, "V");
        bfr__coord(b, y + h - 2);
        bfr__puts(b, "\"/>\n");
    }
    if (value_text) bfr__svg_text(b, text_x, y + h / 2 + 4, "start", "v", value_text, 0);
    bfr__puts(b, "</g>\n");
}

/* the one-bar-per-row chart's layout (pixels) */
#define HC_W 760
#define HC_L 270   /* row labels */
#define HC_VW 190  /* value text */
#define HC_R 16
#define HC_T 64
#define HC_BH 16

void bfr__hchart_open(bfr__hchart *c, size_t shown, size_t n, double max_hi, const char *title, const char *sub,
                      const char *xlabel)
{
    memset(c, 0, sizeof *c);
    c->shown = shown;
    c->plot = (int)shown * (HC_BH + 6);
    c->h = HC_T + c->plot + 58 + (n > shown ? 16 : 0);
    double lo = 0, hi = max_hi, ticks[8];
    if (!(hi > 0)) hi = 0.01;
    if (hi > 1) hi = 1;
    int nt = bfr__ticks(&lo, &hi, 0, ticks, 6);
    c->sx = (bfr__scale){lo, hi, HC_L, HC_W - HC_R - HC_VW, 0};
    bfr__svg_open(&c->b, HC_W, c->h, title, sub);
    bfr__svg_text(&c->b, 16, 24, "start", "t", title, 0);
    bfr__svg_text(&c->b, 16, 44, "start", "s", sub, 0);
    bfr__axis_x(&c->b, &c->sx, HC_T + c->plot, ticks, nt, 'p', xlabel, HC_T);
}

void bfr__hchart_row(bfr__hchart *c, size_t i, const char *label, double v, double lo, double hi, const char *color,
                     const char *tip, const char *value_text)
{
    double y = HC_T + 3 + (double)i * (HC_BH + 6);
    bfr__svg_text(&c->b, HC_L - 8, y + HC_BH / 2.0 + 4, "end", "lb", label, BFR_LABEL_CHARS);
    bfr__hbar(&c->b, &c->sx, y, HC_BH, v, lo, hi, color, tip, value_text, HC_W - HC_R - HC_VW + 8);
}

int bfr__hchart_finish(bfr__hchart *c, const char *note, json_t *figs, const char *name, const char *title,
                       const char *alt)
{
    if (note) bfr__svg_text(&c->b, HC_L, c->h - 8, "start", "n", note, 0);
    bfr__svg_close(&c->b);
    char *svg = bfr__buf_take(&c->b);
    if (!svg) return 1;
    return bfr__fig_add(figs, name, title, alt, svg);
}

void bfr__hchart_alt(char *alt, size_t cap, size_t i, const char *lead, const char *label, const char *value)
{
    if (i >= 3) return;
    size_t al = strlen(alt);
    snprintf(alt + al, cap - al, "%s%.60s %s", i ? ", " : lead, label, value);
}

int bfr__hchart_done(bfr__hchart *c, size_t n, const char *which, json_t *figs, const char *base, size_t d,
                     const char *title, const char *alt)
{
    char note[96], name[48];
    if (n > c->shown) snprintf(note, sizeof note, "the %zu %s of %zu tensors that were hit", c->shown, which, n);
    if (d == 0) snprintf(name, sizeof name, "%s", base);
    else snprintf(name, sizeof name, "%s_%zu", base, d + 1);
    return bfr__hchart_finish(c, n > c->shown ? note : NULL, figs, name, title, alt);
}

void bfr__fig_title(char *title, size_t cap, const bfr__set *set, size_t d, const char *head, const char *single)
{
    if (set->n_docs > 1) snprintf(title, cap, "%s: %.80s", head, set->docs[d].label);
    else snprintf(title, cap, "%s: %s", head, single);
}

double bfr__bar_top(double top, double v, double hi)
{
    return fmax(top, isfinite(hi) ? fmax(hi, v) : v);
}

void bfr__pct_maybe_ci(char *out, size_t cap, double rate, double lo, double hi, int with_sign)
{
    if (isfinite(lo) && isfinite(hi)) bfr__pct_ci(out, cap, rate, lo, hi);
    else bfr__pct(out, cap, rate, bfr__pct_decimals(rate, rate, rate), with_sign);
}
