/* libbitflip-report's insides (named bfr__..., as core's are bf__...): a
 * growable text buffer with XML escaping, number formats for people, scales
 * and ticks, the SVG frame every figure shares, the result documents read into series, and one function per
 * figure. Nothing here is public; bitflip/report.h is the contract. */
#ifndef BFR_REPORT_IMPL_H
#define BFR_REPORT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "bitflip/report.h"

/* Limits of what a figure draws (docs/REPORT.md); the rest is counted in a
 * note under the figure, never silently dropped. */
#define BFR_MAX_SERIES 12    /* curves and bar groups overlaid in one figure: the colours
                              * told apart (bfr__palette), so not a flag */
#define BFR_LABEL_CHARS 40   /* a tensor name or legend entry is cut (with an ellipsis) past this */

/* --- buffer.c: text that grows; an allocation failure is remembered and
 * reported once, by bfr__buf_take. */
typedef struct bfr__buf {
    char *p;
    size_t len, cap;
    int oom;
} bfr__buf;

void bfr__put(bfr__buf *b, const char *s, size_t n);
void bfr__puts(bfr__buf *b, const char *s);
void bfr__printf(bfr__buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* s as XML/HTML text or attribute value: & < > " ' as entities, bytes XML
 * forbids (controls, U+FFFE/U+FFFF) as U+FFFD. At most max_chars characters
 * (0: all), the cut marked with an ellipsis. */
void bfr__xml(bfr__buf *b, const char *s, size_t max_chars);
/* A coordinate: finite and bounded whatever the data, one decimal. */
void bfr__coord(bfr__buf *b, double v);
/* The text, owned by the caller; NULL if an allocation failed. */
char *bfr__buf_take(bfr__buf *b);
void bfr__buf_free(bfr__buf *b);

/* --- format.c: numbers as people write them */
/* The decimals a percentage needs so that rate and interval read apart:
 * 1 from 1%, 2 below it, 3 below 0.1%. */
int bfr__pct_decimals(double frac, double lo, double hi);
/* "4.5%" (with_sign) or "4.5"; trailing zeros kept so columns align. */
void bfr__pct(char *out, size_t n, double frac, int decimals, int with_sign);
/* "4.5% [3.8, 5.2]" */
void bfr__pct_ci(char *out, size_t n, double frac, double lo, double hi);
/* "12,800" */
void bfr__count(char *out, size_t n, long long v);
/* A bit error rate: "10⁻⁵", "2.5×10⁻⁵" */
void bfr__sci(char *out, size_t n, double v);
/* A plain number with `sig` significant digits, no exponent for 1e-3..1e6 */
void bfr__num(char *out, size_t n, double v, int sig);

/* --- scale.c: data -> pixels, and ticks at round values */
typedef struct bfr__scale {
    double d0, d1;   /* data range */
    double r0, r1;   /* pixel range */
    int log;         /* log10 axis (d0, d1 > 0) */
} bfr__scale;

double bfr__map(const bfr__scale *s, double v);
/* Round tick values covering [lo, hi]: the range is widened to them. Linear:
 * 1, 2, 5 x 10^k steps; log: the decades. Returns the count (<= max). */
int bfr__ticks(double *lo, double *hi, int log, double *ticks, int max);

/* --- svg.c: the frame of every figure */
extern const char *const bfr__palette[BFR_MAX_SERIES];
/* <svg ...><title>title</title><desc>desc</desc> and the shared style */
void bfr__svg_open(bfr__buf *b, int w, int h, const char *title, const char *desc);
void bfr__svg_close(bfr__buf *b);
/* text at (x, y); anchor "start", "middle" or "end"; cls a style class */
void bfr__svg_text(bfr__buf *b, double x, double y, const char *anchor, const char *cls, const char *text, size_t max_chars);
/* An axis with its ticks, tick labels (fmt: 'p' percent, 's' scientific,
 * 'n' number) and its label (with unit). */
void bfr__axis_x(bfr__buf *b, const bfr__scale *s, double y, const double *ticks, int nt, char fmt, const char *label,
                double grid_top);
void bfr__axis_y(bfr__buf *b, const bfr__scale *s, double x, const double *ticks, int nt, char fmt, const char *label,
                double grid_right);
/* A legend: a swatch and an entry per series, in rows from (x, y). Series i
 * is drawn in bfr__palette[i] in every figure; FAULT_FREE is the colour of
 * the fault-free line. */
#define BFR_FAULT_FREE "#555555"
void bfr__legend(bfr__buf *b, double x, double y, double width, char *const *labels, const char *const *colors, int n,
                int dashed_first);
/* the rows bfr__legend takes for these labels */
int bfr__legend_rows(char *const *labels, int n, double width);

/* --- bars.c: a horizontal bar from 0 (or the scale's start) to v, with a
 * whisker over [lo, hi] (NaN: none), a tooltip, and value_text at text_x */
void bfr__hbar(bfr__buf *b, const bfr__scale *sx, double y, double h, double v, double lo, double hi, const char *color,
              const char *tip, const char *value_text, double text_x);

/* --- bars.c: a chart of one horizontal bar per row (a tensor, a bit), the
 * frame the vulnerable-tensor, PVF and IVMOD figures share: the layout, the axis
 * scaled to the largest value or upper whisker, the rows, and the note that
 * says when rows were left out */
typedef struct bfr__hchart {
    bfr__buf b;
    bfr__scale sx;
    size_t shown;
    int plot, h;
} bfr__hchart;

/* opens a chart of `shown` rows (of n; n > shown leaves room for a note)
 * whose values and upper whiskers are at most max_hi (the axis is 0..1 at
 * most), under title and sub, with xlabel under the axis */
void bfr__hchart_open(bfr__hchart *c, size_t shown, size_t n, double max_hi, const char *title, const char *sub,
                      const char *xlabel);
/* row i: its label, a bar of v with whiskers [lo, hi] (NaN: none) in color,
 * the tooltip and the value text beside it */
void bfr__hchart_row(bfr__hchart *c, size_t i, const char *label, double v, double lo, double hi, const char *color,
                     const char *tip, const char *value_text);
/* closes the chart (with `note` under it, if not NULL) and adds it to figs
 * as figure `name`; 1 on out of memory */
int bfr__hchart_finish(bfr__hchart *c, const char *note, json_t *figs, const char *name, const char *title,
                       const char *alt);
/* row i (< 3) into the alt text: "label value" after `lead` (the first) or
 * ", " (the next two); a reader hears the top of the chart */
void bfr__hchart_alt(char *alt, size_t cap, size_t i, const char *lead, const char *label, const char *value);
/* bfr__hchart_finish for the chart of document d of n tensors: figure
 * `base` for the first document, base_2, base_3... for the others; when rows
 * were left out, the note "the <shown> <which> of <n> tensors that were hit" */
int bfr__hchart_done(bfr__hchart *c, size_t n, const char *which, json_t *figs, const char *base, size_t d,
                     const char *title, const char *alt);
/* top, or a row's value or finite upper whisker if larger: the axis's
 * extent over the rows shown */
double bfr__bar_top(double top, double v, double hi);
/* a rate with its interval when both ends are finite, else alone */
void bfr__pct_maybe_ci(char *out, size_t cap, double rate, double lo, double hi, int with_sign);

/* --- input.c: result documents, read once into what the figures draw */
typedef struct bfr__series {
    char *label;               /* legend entry */
    const json_t *summary;     /* trials, outcomes, rates, metrics */
    const json_t *golden;      /* the fault-free metrics */
    const json_t *by_rate;     /* BER sweeps, else NULL */
    const json_t *recovery;    /* mitigations but the baseline, else NULL */
    const json_t *cost;
    const char *mitigation;    /* the configuration's name, else NULL */
    size_t doc;                /* which input */
} bfr__series;

typedef struct bfr__doc {
    const json_t *root;        /* the result proper (unwrapped from a daemon campaign) */
    const json_t *campaign;
    char *label;
} bfr__doc;

typedef struct bfr__set {
    bfr__doc *docs;
    size_t n_docs;
    bfr__series *series;        /* one per result, or per configuration of a paired comparison */
    size_t n_series;
    size_t n_hidden;           /* series past BFR_MAX_SERIES, left out (and said so) */
    size_t max_tensors;        /* bfr_options.max_tensors, resolved */
} bfr__set;

bf_status bfr__set_read(const bfr_input *in, size_t n, const bfr_options *opt, bfr__set *set, bf_error *err);
void bfr__set_free(bfr__set *set);
/* The task metric the figures show: "auc", "accuracy", or NULL */
const char *bfr__task_metric(const bfr__set *set);
/* rates.<outcome> of a summary: rate and interval; 0 if absent */
int bfr__rate(const json_t *rates, const char *outcome, double *rate, double *lo, double *hi);
/* A tensor's name for people: torch_name where present, else the ONNX name */
/* A by_tensor entry's name: its PyTorch name, else its tensor; a fault
 * group 1..'s entry (docs/CAMPAIGNS.md, "Fault groups") as "[group G] name"
 * in buf (n bytes), when buf is given. */
const char *bfr__tensor_name(const json_t *group, char *buf, size_t n);

/* --- one file per figure; each appends {name, title, alt, svg} to figs, or
 * nothing when its inputs lack what it needs. Non-zero only when out of memory. */
int bfr__fig_ber(const bfr__set *set, json_t *figs);
int bfr__fig_outcomes(const bfr__set *set, json_t *figs);
int bfr__fig_tensors(const bfr__set *set, json_t *figs);
/* (bars.c) the title of document d's figure: "head: <its label>" among
 * several results, "head: single" for one */
void bfr__fig_title(char *title, size_t cap, const bfr__set *set, size_t d, const char *head, const char *single);
int bfr__fig_heatmap(const bfr__set *set, json_t *figs);
int bfr__fig_mitigation(const bfr__set *set, json_t *figs);
int bfr__fig_ivmod(const bfr__set *set, json_t *figs);
/* --- fig_pvf.c: each tensor's PVF (critical or DUE) with its interval */
int bfr__fig_pvf(const bfr__set *set, json_t *figs);
/* Appends the figure; takes svg (freed); non-zero when out of memory. */
int bfr__fig_add(json_t *figs, const char *name, const char *title, const char *alt, char *svg);

/* --- png.c: an RGB image (height x width x 3 bytes) as a base64 PNG;
 * NULL when out of memory or a side is out of 1..BFR_PICTURE_MAX_SIDE */
char *bfr__png_base64(const unsigned char *rgb, int width, int height);

/* --- headline.c */
char *bfr__headline(const bfr__set *set);

/* --- tensors.c: by_tensor entries with trials, most critical first (the
 * order of the bar chart and of the heatmap's rows); and the rows of any
 * figure read from a document's groups */
/* The confidence level of input d's campaign: 0.95 when it has none in
 * (0, 1). */
double bfr__confidence(const bfr__set *set, size_t d);
/* A figure's rows from the entries of JSON array arr: fill(row, entry,
 * ctx) writes the row (size bytes) of an entry it keeps and returns 1, or
 * returns 0 to pass the entry over; the kept rows sorted by cmp. NULL with
 * *n = 0 if none is kept (or out of memory: *oom set). */
void *bfr__rows(const json_t *arr, size_t size, int (*fill)(void *row, const json_t *g, const void *ctx),
                const void *ctx, int (*cmp)(const void *, const void *), size_t *n, int *oom);
typedef struct bfr__tensor_row {
    const json_t *group;
    double rate, lo, hi;
    long long trials, critical;
} bfr__tensor_row;
/* rows of input `doc`, sorted; *n their count; NULL with *n = 0 if none
 * (or out of memory: *oom set) */
bfr__tensor_row *bfr__tensor_rows(const bfr__set *set, size_t doc, size_t *n, int *oom);

/* metrics.c: a row per (result, task metric) the results report, in the
 * table's order; at most max rows, their count returned. Every field is
 * plain ASCII made here (numbers, a name from a fixed list). */
typedef struct bfr__metric_row {
    size_t doc;                /* index into set->docs */
    const char *name;          /* "perplexity", ... */
    char golden[24], mean[24], ci[56], over[48];
} bfr__metric_row;
#define BFR__MAX_METRIC_ROWS 64
int bfr__metric_rows(const bfr__set *set, bfr__metric_row *rows, int max);

#endif
