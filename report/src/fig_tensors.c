/* Figure: which tensors are vulnerable. The critical rate of the faults
 * injected into each tensor, most critical first, with Wilson intervals;
 * one figure per result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

static int one(const bfr__set *set, size_t d, json_t *figs)
{
    int oom = 0;
    size_t n = 0;
    bfr__tensor_row *rows = bfr__tensor_rows(set, d, &n, &oom);
    if (!rows) return oom;
    size_t shown = n > set->max_tensors ? set->max_tensors : n;
    double conf = bfr__confidence(set, d);
    char title[160], sub[256], alt[640], name[32];
    bfr__fig_title(title, sizeof title, set, d, "Vulnerable tensors", "critical rate of the faults in each");
    snprintf(sub, sizeof sub, "share of the faults injected into a tensor that changed a prediction, most first; whiskers: %.0f%% Wilson interval",
             100 * conf);
    snprintf(alt, sizeof alt, "Bar chart of the critical rate per tensor, %zu tensor%s; most vulnerable: ", n, n > 1 ? "s" : "");
    double hi = 0;
    for (size_t i = 0; i < shown; i++) hi = bfr__bar_top(hi, rows[i].rate, rows[i].hi);   /* (hi is always finite here) */
    bfr__hchart c;
    bfr__hchart_open(&c, shown, n, hi, title, sub, "critical rate (% of the faults in the tensor)");
    for (size_t i = 0; i < shown; i++) {
        const bfr__tensor_row *r = &rows[i];
        char v[64], kc[32], nc[32], tip[400], val[120], gl[160];
        const char *tn = bfr__tensor_name(r->group, gl, sizeof gl), *onnx = json_string_value(json_object_get(r->group, "tensor"));
        bfr__pct_ci(v, sizeof v, r->rate, r->lo, r->hi);
        bfr__count(kc, sizeof kc, r->critical), bfr__count(nc, sizeof nc, r->trials);
        snprintf(val, sizeof val, "%s of %s", v, nc);
        snprintf(tip, sizeof tip, "%.120s%s%.120s%s: %s critical of %s faults, %s", tn, onnx && strcmp(onnx, tn) ? " (ONNX " : "",
                 onnx && strcmp(onnx, tn) ? onnx : "", onnx && strcmp(onnx, tn) ? ")" : "", kc, nc, v);
        bfr__hchart_row(&c, i, tn, r->rate, r->lo, r->hi, bfr__palette[1], tip, val);
        bfr__hchart_alt(alt, sizeof alt, i, "", tn, v);
    }
    free(rows);
    snprintf(name, sizeof name, "tensors");
    return bfr__hchart_done(&c, n, "most vulnerable", figs, name, d, title, alt);
}

int bfr__fig_tensors(const bfr__set *set, json_t *figs)
{
    for (size_t d = 0; d < set->n_docs; d++)
        if (one(set, d, figs)) return 1;
    return 0;
}
