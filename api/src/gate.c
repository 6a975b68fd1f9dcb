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

/* Text for an attribute value or element content: the five markup
 * characters as entities, tab and line breaks as character references (an
 * attribute would turn them into spaces), and the other control characters,
 * which XML 1.0 cannot carry at all, as '?'. */
static void xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        case '\t': case '\n': case '\r': fprintf(f, "&#%d;", c); break;
        default: fputc(c < 0x20 ? '?' : c, f);
        }
    }
}

/* The counts every suite carries (tests/api/junit-10.xsd requires them);
 * a gate is never an error or skipped: one that cannot be evaluated stops
 * the report before it is written (bf_gates_eval). */
static void junit_counts(FILE *f, size_t n, size_t failed, int skipped)
{
    fprintf(f, " tests=\"%zu\" failures=\"%zu\" errors=\"0\"", n, failed);
    if (skipped) fputs(" skipped=\"0\"", f);
    fputs(" time=\"0\"", f);
}

void bf_gates_junit(FILE *f, const bf_gate *g, size_t n, const double *vals, const int *ok)
{
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) failed += !ok[i];
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"bitflip\"", f);
    junit_counts(f, n, failed, 0);   /* the dialect has no skipped on testsuites */
    fputs(">\n  <testsuite name=\"bitflip\"", f);
    junit_counts(f, n, failed, 1);
    fputs(">\n", f);
    for (size_t i = 0; i < n; i++) {
        fputs("    <testcase classname=\"bitflip.gate\" name=\"", f);
        xml_escape(f, g[i].expr);
        fputs("\" time=\"0\">", f);
        if (!ok[i]) {
            char value[64];
            snprintf(value, sizeof value, " = %.6g", vals[i]);
            fputs("<failure type=\"gate\" message=\"", f);
            xml_escape(f, g[i].name);
            xml_escape(f, value);
            fputs("\">", f);
            xml_escape(f, g[i].expr);
            fputs(" does not hold</failure>", f);
        }
        fputs("</testcase>\n", f);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
}
