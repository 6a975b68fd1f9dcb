/* bitflip api — CI gates on a result document: "critical_rate<=0.05".
 * Shared by the CLI (--gate, --junit) and the daemon (a campaign's "gates",
 * its verdict and results?format=junit). */
#ifndef BITFLIP_API_GATE_H
#define BITFLIP_API_GATE_H

#include <jansson.h>
#include <stdio.h>

#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bf_gate {
    char expr[128];           /* as written */
    char name[64];            /* a name bf_result_gate_value knows */
    char op[3];               /* <=, >=, ==, <, > */
    double value;
} bf_gate;

/* Parses NAME OP NUMBER; the message says what a gate looks like. The name
 * is checked against a result only by bf_gates_eval. */
bf_status bf_gate_parse(const char *expr, bf_gate *out, bf_error *err);

/* Evaluates every gate on a result document: vals[i] the metric, ok[i]
 * whether the gate holds. Fails (BF_ENOTFOUND) on a metric the document
 * cannot have, naming it and, for unknown names, the known ones. */
bf_status bf_gates_eval(const json_t *doc, const bf_gate *g, size_t n, double *vals, int *ok, bf_error *err);

/* JUnit XML in the dialect of Jenkins' junit-10.xsd (tests/api/junit-10.xsd
 * is bitflip's rendition): one testsuite "bitflip", one testcase per gate
 * (none when there are none), a <failure> in each gate that does not hold.
 * Every suite carries tests, failures, errors (always 0), skipped (0) and
 * time, every testcase time; times are 0: the gates are checked on a
 * finished result, and the report is the same bytes for the same result. */
void bf_gates_junit(FILE *f, const bf_gate *g, size_t n, const double *vals, const int *ok);

#ifdef __cplusplus
}
#endif
#endif
