/* The bitflip command-line tool: shared declarations of its subcommands. */
#ifndef BF_CLI_H
#define BF_CLI_H

#include <stdio.h>

#include "bitflip/bitflip.h"

/* Exit codes, as DESIGN.md gives them for CI use. */
enum { EXIT_OK = 0, EXIT_GATE = 1, EXIT_USAGE = 2, EXIT_INFRA = 3 };

int cmd_info(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_plan(int argc, char **argv);

/* Prints "bitflip CMD: message" to stderr and returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints the bf_error with the command name and returns EXIT_INFRA. */
int report_error(const char *cmd, const bf_error *err);

/* Monotonic seconds, for progress lines and timings. */
double cli_now(void);

/* Parses a positive integer option value; returns 0 on success. */
int parse_count(const char *cmd, const char *opt, const char *s, long long min, long long max,
                long long *out);

#endif
