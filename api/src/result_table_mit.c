/* The comparison of protections in the result's table: one row per
 * configuration, every one on the same faults.
 *
 * Critical and DUE stand side by side, each with its interval, because a
 * protection moves trials between them: clipping or selective bit
 * protection turn a NaN (DUE, detected) into a finite but wrong output
 * (critical, silent), ABFT turns a silent corruption into a detection. A
 * critical column alone makes such a protection look harmful; the pair,
 * and the metric it recovers, say what it does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "result_table.h"

/* "39.0% [32.5, 45.9]", or "-" without a rate */
static void pct_ci(char *out, size_t n, const json_t *g, const char *which)
{
    const json_t *r = json_object_get(g, which), *ci = json_object_get(r, "ci");
    if (!json_is_number(json_object_get(r, "rate"))) {
        snprintf(out, n, "-");
        return;
    }
    double v = json_number_value(json_object_get(r, "rate"));
    if (json_is_number(json_array_get(ci, 0)) && json_is_number(json_array_get(ci, 1)))
        snprintf(out, n, "%.1f%% [%.1f, %.1f]", 100 * v, 100 * json_number_value(json_array_get(ci, 0)),
                 100 * json_number_value(json_array_get(ci, 1)));
    else
        snprintf(out, n, "%.1f%%", 100 * v);
}

static void print_recovery(FILE *f, const json_t *rec)
{
    const json_t *v = json_object_get(rec, "value"), *ci = json_object_get(rec, "ci");
    if (!json_is_number(v)) {
        fprintf(f, "  %-22s", "-");
        return;
    }
    char buf[64];
    if (json_is_number(json_array_get(ci, 0)))
        snprintf(buf, sizeof buf, "%+.2f [%+.2f, %+.2f]", json_number_value(v), json_number_value(json_array_get(ci, 0)),
                 json_number_value(json_array_get(ci, 1)));
    else
        snprintf(buf, sizeof buf, "%+.2f", json_number_value(v));
    fprintf(f, "  %-22s", buf);
}

/* For a sweep: each configuration's critical and DUE rates at each rate,
 * then the recovery at each. */
static void print_by_rate(FILE *f, const json_t *mits)
{
    const json_t *br0 = json_object_get(json_array_get(mits, 0), "by_rate"), *m, *g;
    size_t i, j;
    if (!json_array_size(br0)) return;
    fprintf(f, "\n  critical / DUE by bit error rate (%% of the trials at that rate)\n  %-18s", "name");
    json_array_foreach(br0, j, g) fprintf(f, " %15.3g", json_number_value(json_object_get(g, "rate")));
    fputc('\n', f);
    json_array_foreach(mits, i, m) {
        fprintf(f, "  %-18.18s", json_string_value(json_object_get(m, "name")));
        json_array_foreach(json_object_get(m, "by_rate"), j, g) {
            char cell[48];
            snprintf(cell, sizeof cell, "%.1f / %.1f", 100 * json_number_value(json_object_get(json_object_get(g, "critical"), "rate")),
                     100 * json_number_value(json_object_get(json_object_get(g, "due"), "rate")));
            fprintf(f, " %15s", cell);
        }
        fputc('\n', f);
    }
    fprintf(f, "\n  recovery by bit error rate\n  %-18s", "name");
    json_array_foreach(br0, j, g) fprintf(f, " %15.3g", json_number_value(json_object_get(g, "rate")));
    fputc('\n', f);
    json_array_foreach(mits, i, m) {
        if (i == 0) continue;
        fprintf(f, "  %-18.18s", json_string_value(json_object_get(m, "name")));
        json_array_foreach(json_object_get(m, "by_rate"), j, g) {
            const json_t *v = json_object_get(json_object_get(g, "recovery"), "value");
            if (json_is_number(v)) fprintf(f, " %+15.2f", json_number_value(v));
            else fprintf(f, " %15s", "-");
        }
        fputc('\n', f);
    }
}

void bf__print_mitigations(FILE *f, const json_t *mits, double conf)
{
    if (!json_array_size(mits)) return;
    const json_t *r0 = json_object_get(json_array_get(mits, 0), "recovery");
    const char *metric = json_string_value(json_object_get(r0, "metric"));
    if (!metric) metric = "metric";
    fprintf(f, "\nmitigations (each on the same faults; %.0f%% intervals)\n", 100 * conf);
    fprintf(f, "  critical: a prediction changed, silently; DUE: a detector fired or an output became NaN/Inf (the\n"
               "  error is seen). A protection can move trials from DUE to critical: read the two together.\n"
               "  recovery: the share of the %s lost to faults that the protection wins back (paired bootstrap;\n"
               "  a DUE counts as recovered: it is caught, not silent)\n",
            metric);
    fprintf(f, "  %-18s %-20s %-20s %8s %8s  %-22s %7s %8s\n", "name", "critical", "DUE", "golden", "faulty", "recovery",
            "time", "storage");
    size_t i;
    const json_t *m;
    json_array_foreach(mits, i, m) {
        const json_t *rec = json_object_get(m, "recovery"), *cost = json_object_get(m, "cost");
        const json_t *rates = json_object_get(json_object_get(m, "summary"), "rates");
        char cr[48], du[48];
        pct_ci(cr, sizeof cr, rates, "critical");
        pct_ci(du, sizeof du, rates, "due");
        double g = json_number_value(json_object_get(json_object_get(m, "golden"), metric));
        double mm = json_number_value(json_object_get(rec, "mitigated"));
        fprintf(f, "  %-18.18s %-20s %-20s %8.4f %8.4f", json_string_value(json_object_get(m, "name")), cr, du, g, mm);
        print_recovery(f, rec);
        fprintf(f, " %6.2fx %7.2f%%\n", json_number_value(json_object_get(cost, "time_ratio")),
                100 * json_number_value(json_object_get(cost, "storage_overhead")));
    }
    print_by_rate(f, mits);
}
