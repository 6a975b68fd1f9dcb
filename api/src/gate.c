/* CI gates: parse, evaluate against a result document, write JUnit. */
#include "bitflip/api/gate.h"

#include <stdlib.h>
#include <string.h>

#include "bitflip/api/result.h"

bf_status bf_gate_parse(const char *expr, bf_gate *g, bf_error *err)
{
    /* two-character operators first, so "<=" is not read as "<" then "=..." */
    static const char *const ops[] = {"<=", ">=", "==", "<", ">"};
    memset(g, 0, sizeof *g);
    if (strlen(expr) >= sizeof g->expr)
        return bf_error_set(err, BF_EINVAL, "gate '%.40s...' is too long (at most %zu characters)", expr, sizeof g->expr - 1);
    strcpy(g->expr, expr);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        const char *p = strstr(expr, ops[k]);
        if (!p) continue;
        size_t nl = (size_t)(p - expr);
        while (nl && expr[nl - 1] == ' ') nl--;
        const char *vs = p + strlen(ops[k]);
        char *end;
        double v = strtod(vs, &end);
        while (*end == ' ') end++;
        if (nl == 0 || nl >= sizeof g->name || end == vs || *end)
            return bf_error_set(err, BF_EINVAL, "gate '%s': wants METRIC OP NUMBER, e.g. 'critical_rate<=0.01'", expr);
        memcpy(g->name, expr, nl);
        g->name[nl] = '\0';
        strcpy(g->op, ops[k]);
        g->value = v;
        return BF_OK;
    }
    return bf_error_set(err, BF_EINVAL, "gate '%s': no comparison (<=, >=, ==, <, >)", expr);
}

static int holds(double x, const char *op, double v)
{
    if (!strcmp(op, "<=")) return x <= v;
    if (!strcmp(op, ">=")) return x >= v;
    if (!strcmp(op, "<")) return x < v;
    if (!strcmp(op, ">")) return x > v;
    return x == v;
}

bf_status bf_gates_eval(const json_t *doc, const bf_gate *g, size_t n, double *vals, int *ok, bf_error *err)
{
    for (size_t i = 0; i < n; i++) {
        int k = bf_result_gate_value(doc, g[i].name, &vals[i]);
        if (k < 0)
            return bf_error_set(err, BF_ENOTFOUND, "gate '%s': unknown metric '%s'; known: %s", g[i].expr, g[i].name,
                                bf_result_gate_names());
        if (k > 0)
            return bf_error_set(err, BF_ENOTFOUND, "gate '%s': this campaign has no '%s' (wrong task for the model?)",
                                g[i].expr, g[i].name);
        ok[i] = holds(vals[i], g[i].op, g[i].value);
    }
    return BF_OK;
}

static void xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

void bf_gates_junit(FILE *f, const bf_gate *g, size_t n, const double *vals, const int *ok)
{
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) failed += !ok[i];
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"bitflip\" tests=\"%zu\" failures=\"%zu\">\n",
            n, failed);
    for (size_t i = 0; i < n; i++) {
        fputs("    <testcase classname=\"bitflip.gate\" name=\"", f);
        xml_escape(f, g[i].expr);
        fputs("\">", f);
        if (!ok[i]) {
            fprintf(f, "<failure message=\"%s = %.6g\">", g[i].name, vals[i]);
            xml_escape(f, g[i].expr);
            fputs(" does not hold</failure>", f);
        }
        fputs("</testcase>\n", f);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
}
