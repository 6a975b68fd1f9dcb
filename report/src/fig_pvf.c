/* Figure: each tensor's PVF (Meta's parameter vulnerability factor, arXiv
 * 2405.01741): the probability that a fault in the tensor makes the output
 * incorrect, critical or DUE, by_tensor[].pvf with the design's interval
 * (docs/STATISTICS.md). Beside the vulnerable-tensors figure, which draws
 * the critical rate alone, it counts a NaN or Inf output as incorrect too,
 * so a tensor whose faults mostly end in DUE ranks where it belongs. One
 * figure per result that carries pvf ("pvf"; "pvf_2", "pvf_3"... for the
 * others). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

typedef struct row {
    const json_t *group;
    double rate, lo, hi, critical, due;   /* critical, due: the tensor's rates, for the tooltip */
} row;

static int by_pvf_desc(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->rate != y->rate) return x->rate < y->rate ? 1 : -1;
    return strcmp(bfr__tensor_name(x->group, NULL, 0), bfr__tensor_name(y->group, NULL, 0));
}

static double num_or_nan(const json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

/* a tensor with a finite pvf */
static int pvf_row(void *row_, const json_t *g, const void *ctx)
{
    const json_t *p = json_object_get(g, "pvf"), *ci = json_object_get(p, "ci");
    double rate = num_or_nan(json_object_get(p, "rate"));
    (void)ctx;
    if (!isfinite(rate)) return 0;
    row *r = row_;
    r->group = g;
    r->rate = rate;
    r->lo = num_or_nan(json_array_get(ci, 0));
    r->hi = num_or_nan(json_array_get(ci, 1));
    r->critical = num_or_nan(json_object_get(json_object_get(g, "critical"), "rate"));
    r->due = num_or_nan(json_object_get(json_object_get(g, "due"), "rate"));
    return 1;
}

static int one(const bfr__set *set, size_t d, json_t *figs)
{
    int oom = 0;
    size_t n = 0;
    /* the tensors with a finite pvf, most vulnerable first */
    row *rows = bfr__rows(json_object_get(set->docs[d].root, "by_tensor"), sizeof(row), pvf_row, NULL, by_pvf_desc, &n, &oom);
    if (!rows) return oom;
    size_t shown = n > set->max_tensors ? set->max_tensors : n;
    double conf = bfr__confidence(set, d);
    char title[160], sub[256], alt[640], name[32];
    bfr__fig_title(title, sizeof title, set, d, "PVF per tensor", "the chance a fault in it makes the output wrong");
    snprintf(sub, sizeof sub, "parameter vulnerability factor: critical or DUE outcomes of the faults in each tensor, most first; "
             "whiskers: %.0f%% interval", 100 * conf);
    snprintf(alt, sizeof alt, "Bar chart of the PVF per tensor, %zu tensor%s; highest: ", n, n > 1 ? "s" : "");
    double hi = 0;
    for (size_t i = 0; i < shown; i++) hi = bfr__bar_top(hi, rows[i].rate, rows[i].hi);
    bfr__hchart c;
    bfr__hchart_open(&c, shown, n, hi, title, sub, "PVF (% of the faults in the tensor: critical or DUE)");
    for (size_t i = 0; i < shown; i++) {
        const row *r = &rows[i];
        char v[64], cr[32], du[32], tip[400], gl[160];
        const char *tn = bfr__tensor_name(r->group, gl, sizeof gl);
        bfr__pct_maybe_ci(v, sizeof v, r->rate, r->lo, r->hi, 0);
        bfr__pct(cr, sizeof cr, isfinite(r->critical) ? r->critical : 0, 1, 0);
        bfr__pct(du, sizeof du, isfinite(r->due) ? r->due : 0, 1, 0);
        snprintf(tip, sizeof tip, "%.120s: PVF %s (critical %s, DUE %s)", tn, v, cr, du);
        /* the numbers as the result document has them, for a reader's script */
        bfr__puts(&c.b, "<g class=\"bfr-pvf\" data-tensor=\"");
        bfr__xml(&c.b, tn, 0);
        bfr__printf(&c.b, "\" data-pvf=\"%.17g\" data-lo=\"%.17g\" data-hi=\"%.17g\">\n", r->rate, r->lo, r->hi);
        bfr__hchart_row(&c, i, tn, r->rate, r->lo, r->hi, bfr__palette[3], tip, v);
        bfr__puts(&c.b, "</g>\n");
        bfr__hchart_alt(alt, sizeof alt, i, "", tn, v);
    }
    free(rows);
    snprintf(name, sizeof name, "pvf");
    return bfr__hchart_done(&c, n, "highest", figs, name, d, title, alt);
}

int bfr__fig_pvf(const bfr__set *set, json_t *figs)
{
    for (size_t d = 0; d < set->n_docs; d++)
        if (one(set, d, figs)) return 1;
    return 0;
}
