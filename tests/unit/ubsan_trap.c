/* ASan + UBSan build only: a planted signed overflow, a shift past the width
 * and a misaligned load must each still stop the program with a report that
 * names this file, now that UBSan's checks are traps (CMakeLists.txt,
 * BF_UBSAN_TRAP; tests/README.md, "The nineteenth round").
 *
 * argv[1] picks the kind. Each computes from argv-given (so not constant
 * folded) values an operation UBSan checks and ASan does not: a trap raises
 * SIGILL, and under the suite's ASAN_OPTIONS (handle_sigill=1) ASan prints
 * "AddressSanitizer: ILL" and the stack, whose frame #0 is the planted
 * statement's line: the test's PASS_REGULAR_EXPRESSION is this file's name
 * and the line of the comment "planted: KIND" (tests/CMakeLists.txt finds
 * it), so a report at any other line, the trap of some other check, fails. Built with -fsanitize=undefined but no
 * trap (BF_UBSAN_TRAP=OFF), UBSan's reporter prints "runtime error" instead
 * and the test's other expression matches that. A build that lost the check
 * prints the result and exits 0: the test fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    const char *kind = argv[1];
    int v = atoi(argv[2]);
    if (strcmp(kind, "overflow") == 0) {
        int r = v + 2147483647; /* planted: overflow (v = 1: signed overflow) */
        printf("%d\n", r);
    } else if (strcmp(kind, "shift") == 0) {
        unsigned r = 1u << (v + 31); /* planted: shift (v = 1: shift by 32) */
        printf("%u\n", r);
    } else if (strcmp(kind, "align") == 0) {
        static double buf[4];
        const char *base = (const char *)buf;
        const double *d = (const double *)(base + v);
        double r = *d; /* planted: align (v = 1: a misaligned load) */
        printf("%g\n", r);
    } else {
        return 2;
    }
    return 0;
}
