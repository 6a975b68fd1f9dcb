/* Writes bf_gates_junit's report for gates made up here, to stdout, for
 * junit_check.sh: one that holds, one that does not, and one whose text has
 * every character XML needs escaped plus a control character it cannot carry.
 * With an argument "none": the report of no gates. */
#include <math.h>
#include <string.h>

#include "bitflip/api/gate.h"

int main(int argc, char **argv)
{
    bf_gate g[3];
    double vals[3] = {0.02, 0.5, INFINITY};
    int ok[3] = {1, 0, 0};
    memset(g, 0, sizeof g);
    if (bf_gate_parse("critical_rate<=0.05", &g[0], NULL) != BF_OK) return 1;
    if (bf_gate_parse("masked_rate>=0.9", &g[1], NULL) != BF_OK) return 1;
    strcpy(g[2].expr, "a\"b'c&d<e>f\tg\x01h");
    strcpy(g[2].name, "x&y\"z");
    strcpy(g[2].op, "<");
    size_t n = argc > 1 && !strcmp(argv[1], "none") ? 0 : 3;
    bf_gates_junit(stdout, g, n, vals, ok);
    return 0;
}
