/* libbitflip-report's insides: a growable text buffer with XML escaping,
 * number formats for people, scales and ticks, the SVG frame every figure
 * shares, the result documents read into series, and one function per
 * figure. Nothing here is public; bitflip/report.h is the contract. */
#ifndef BFR_REPORT_IMPL_H
#define BFR_REPORT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "bitflip/report.h"

/* Limits of what a figure draws (docs/REPORT.md); the rest is counted in a
 * note under the figure, never silently dropped. */
#define BFR_MAX_BARS 20      /* tensors in the bar chart and the heatmap */
#define BFR_MAX_SERIES 12    /* curves and bar groups overlaid in one figure */
#define BFR_MAX_POINTS 64    /* bit error rates on one curve */
#define BFR_LABEL_CHARS 40   /* a tensor name or legend entry is cut (with an ellipsis) past this */

/* --- buffer.c: text that grows; an allocation failure is remembered and
 * reported once, by bfr_buf_take. */
typedef struct bfr_buf {
    char *p;
    size_t len, cap;
    int oom;
} bfr_buf;

void bfr_put(bfr_buf *b, const char *s, size_t n);
void bfr_puts(bfr_buf *b, const char *s);
void bfr_printf(bfr_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* s as XML/HTML text or attribute value: & < > " ' as entities, bytes XML
 * forbids (controls, U+FFFE/U+FFFF) as U+FFFD. At most max_chars characters
 * (0: all), the cut marked with an ellipsis. */
void bfr_xml(bfr_buf *b, const char *s, size_t max_chars);
/* A coordinate: finite and bounded whatever the data, one decimal. */
void bfr_coord(bfr_buf *b, double v);
/* The text, owned by the caller; NULL if an allocation failed. */
char *bfr_buf_take(bfr_buf *b);
void bfr_buf_free(bfr_buf *b);

/* --- format.c: numbers as people write them */
/* The decimals a percentage needs so that rate and interval read apart:
 * 1 from 1%, 2 below it, 3 below 0.1%. */
int bfr_pct_decimals(double frac, double lo, double hi);
/* "4.5%" (with_sign) or "4.5"; trailing zeros kept so columns align. */
void bfr_pct(char *out, size_t n, double frac, int decimals, int with_sign);
/* "4.5% [3.8, 5.2]" */
void bfr_pct_ci(char *out, size_t n, double frac, double lo, double hi);
/* "12,800" */
void bfr_count(char *out, size_t n, long long v);
/* A bit error rate: "10⁻⁵", "2.5×10⁻⁵" */
void bfr_sci(char *out, size_t n, double v);
/* A plain number with `sig` significant digits, no exponent for 1e-3..1e6 */
void bfr_num(char *out, size_t n, double v, int sig);

/* --- scale.c: data -> pixels, and ticks at round values */
typedef struct bfr_scale {
    double d0, d1;   /* data range */
    double r0, r1;   /* pixel range */
    int log;         /* log10 axis (d0, d1 > 0) */
} bfr_scale;

double bfr_map(const bfr_scale *s, double v);
/* Round tick values covering [lo, hi]: the range is widened to them. Linear:
 * 1, 2, 5 x 10^k steps; log: the decades. Returns the count (<= max). */
int bfr_ticks(double *lo, double *hi, int log, double *ticks, int max);

/* --- svg.c: the frame of every figure */
extern const char *const bfr_palette[BFR_MAX_SERIES];
/* <svg ...><title>title</title><desc>desc</desc> and the shared style */
void bfr_svg_open(bfr_buf *b, int w, int h, const char *title, const char *desc);
void bfr_svg_close(bfr_buf *b);
/* text at (x, y); anchor "start", "middle" or "end"; cls a style class */
void bfr_svg_text(bfr_buf *b, double x, double y, const char *anchor, const char *cls, const char *text, size_t max_chars);
/* An axis with its ticks, tick labels (fmt: 'p' percent, 's' scientific,
 * 'n' number) and its label (with unit). */
void bfr_axis_x(bfr_buf *b, const bfr_scale *s, double y, const double *ticks, int nt, char fmt, const char *label,
                double grid_top);
void bfr_axis_y(bfr_buf *b, const bfr_scale *s, double x, const double *ticks, int nt, char fmt, const char *label,
                double grid_right);
/* A legend: a swatch and an entry per series, in rows from (x, y). Series i
 * is drawn in bfr_palette[i] in every figure; FAULT_FREE is the colour of
 * the fault-free line. */
#define BFR_FAULT_FREE "#555555"
void bfr_legend(bfr_buf *b, double x, double y, double width, char *const *labels, const char *const *colors, int n,
                int dashed_first);
/* the rows bfr_legend takes for these labels */
int bfr_legend_rows(char *const *labels, int n, double width);

/* --- bars.c: a horizontal bar from 0 (or the scale's start) to v, with a
 * whisker over [lo, hi] (NaN: none), a tooltip, and value_text at text_x */
void bfr_hbar(bfr_buf *b, const bfr_scale *sx, double y, double h, double v, double lo, double hi, const char *color,
              const char *tip, const char *value_text, double text_x);

/* --- input.c: result documents, read once into what the figures draw */
typedef struct bfr_series {
    char *label;               /* legend entry */
    const json_t *summary;     /* trials, outcomes, rates, metrics */
    const json_t *golden;      /* the fault-free metrics */
    const json_t *by_rate;     /* BER sweeps, else NULL */
    const json_t *recovery;    /* mitigations but the baseline, else NULL */
    const json_t *cost;
    const char *mitigation;    /* the configuration's name, else NULL */
    size_t doc;                /* which input */
} bfr_series;

typedef struct bfr_doc {
    const json_t *root;        /* the result proper (unwrapped from a daemon campaign) */
    const json_t *campaign;
    char *label;
} bfr_doc;

typedef struct bfr_set {
    bfr_doc *docs;
    size_t n_docs;
    bfr_series *series;        /* one per result, or per configuration of a paired comparison */
    size_t n_series;
    size_t n_hidden;           /* series past BFR_MAX_SERIES, left out (and said so) */
} bfr_set;

bf_status bfr_set_read(const bfr_input *in, size_t n, bfr_set *set, bf_error *err);
void bfr_set_free(bfr_set *set);
/* The task metric the figures show: "auc", "accuracy", or NULL */
const char *bfr_task_metric(const bfr_set *set);
/* rates.<outcome> of a summary: rate and interval; 0 if absent */
int bfr_rate(const json_t *rates, const char *outcome, double *rate, double *lo, double *hi);
/* A tensor's name for people: torch_name where present, else the ONNX name */
const char *bfr_tensor_name(const json_t *group);

/* --- one file per figure; each appends {name, title, alt, svg} to figs, or
 * nothing when its inputs lack what it needs. Non-zero only when out of memory. */
int bfr_fig_ber(const bfr_set *set, json_t *figs);
int bfr_fig_outcomes(const bfr_set *set, json_t *figs);
int bfr_fig_tensors(const bfr_set *set, json_t *figs);
int bfr_fig_heatmap(const bfr_set *set, json_t *figs);
int bfr_fig_mitigation(const bfr_set *set, json_t *figs);
/* Appends the figure; takes svg (freed); non-zero when out of memory. */
int bfr_fig_add(json_t *figs, const char *name, const char *title, const char *alt, char *svg);

/* --- headline.c */
char *bfr_headline(const bfr_set *set);

/* --- tensors.c: by_tensor entries with trials, most critical first (the
 * order of the bar chart and of the heatmap's rows) */
typedef struct bfr_tensor_row {
    const json_t *group;
    double rate, lo, hi;
    long long trials, critical;
} bfr_tensor_row;
/* rows of input `doc`, sorted; *n their count; NULL with *n = 0 if none
 * (or out of memory: *oom set) */
bfr_tensor_row *bfr_tensor_rows(const bfr_set *set, size_t doc, size_t *n, int *oom);

#endif
