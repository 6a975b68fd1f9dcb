/* The bitflip command-line tool: shared declarations of its subcommands. */
#ifndef BF_CLI_H
#define BF_CLI_H

#include <stdio.h>

#include "bitflip/bitflip.h"
#include "bitflip/api/spec.h"

/* Exit codes, as DESIGN.md gives them for CI use. */
enum { EXIT_OK = 0, EXIT_GATE = 1, EXIT_USAGE = 2, EXIT_INFRA = 3 };

int cmd_info(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_ops(int argc, char **argv);

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

/* Parses a byte count: 4096, 64K, 512M, 2G (powers of 1024); 0 or EXIT_USAGE. */
int parse_size(const char *cmd, const char *opt, const char *v, long long *out);

/* The parsers' limits and the job memory limit (docs/LIMITS.md). */
#define CLI_JOB_MEMORY_DEFAULT (4LL << 30)
typedef struct cli_limits {
    bf_load_limits model;
    bf_dataset_limits data;
    bf_spec_limits spec;
    bf_errmap_limits errmap;
    long long job_memory;   /* bytes; the default is CLI_JOB_MEMORY_DEFAULT */
} cli_limits;

void cli_limits_init(cli_limits *l);
/* If argv[*i] is --limit KEY=VALUE or --job-memory SIZE: parses it (and its
 * value, advancing *i), sets *rc (0 or an exit code) and returns 1; the flag
 * --no-fuse sets model.no_fuse and returns 1; else 0. */
int cli_limit_option(const char *cmd, int argc, char **argv, int *i, cli_limits *l, int *rc);
/* 0 if the job's budget fits `limit`; else prints why (the plan, or the job's
 * parts, and the largest buffer) and returns EXIT_INFRA. `job` names it:
 * "campaign", "evaluation". */
int check_job_memory(const char *cmd, const char *job, const bf_job_budget *b, long long limit);

/* Help text for the options above, shared by the commands that take them. */
#define CLI_LIMITS_HELP \
    "  --job-memory SIZE    refuse to start if the job's memory, computed from shapes\n" \
    "                       before anything is allocated, exceeds SIZE (default 4G)\n" \
    "  --limit KEY=VALUE    a parser limit, e.g. model.graph-depth=16, data.bytes=1G,\n" \
    "                       spec.array=1000 (repeatable; docs/LIMITS.md lists them)\n" \
    "  --no-fuse            run LayerNorm, GELU and Hardswish as exported, node by\n" \
    "                       node, not as the one op PyTorch ran (docs/OPS.md)\n"

#endif
