/* The bitflip command-line tool: shared declarations of its subcommands. */
#ifndef BF_CLI_H
#define BF_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "bitflip/bitflip.h"
#include "bitflip/api/spec.h"

/* Exit codes, as DESIGN.md gives them for CI use. */
enum { EXIT_OK = 0, EXIT_GATE = 1, EXIT_USAGE = 2, EXIT_INFRA = 3 };

int cmd_info(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_slurm(int argc, char **argv);

/* Options. Every command parses its argv with getopt_long through
 * cli_parser (opts.c), so that --opt=value and --opt value both work and
 * every error names the option; new commands (cmd_report.c, cmd_slurm.c)
 * too, with their -h added to tests/cli/test_options.sh. The pattern
 * (cmd_plan.c is a short one):
 *
 *   enum { OPT_OUT = CLI_OPT_FIRST, OPT_FORMAT };   long-only options
 *   static const struct option longopts[] = {
 *       {"help", no_argument, NULL, 'h'},
 *       {"out", required_argument, NULL, OPT_OUT},
 *       {"format", required_argument, NULL, OPT_FORMAT},
 *       CLI_LIMITS_OPTIONS,                          if it reads a model/data/spec
 *       {NULL, 0, NULL, 0}};
 *   cli_parser p;
 *   const char *v;
 *   int c, rc = 0;
 *   cli_parser_init(&p, "report", argc, argv, "h", longopts);
 *   while (!rc && (c = cli_parser_next(&p, &v)) != CLI_END) {
 *       switch (c) {
 *       case 'h': fputs(help, stdout); return EXIT_OK;
 *       case OPT_OUT: out = v; break;
 *       case CLI_ARG: the next argument (not an option), in order
 *       case CLI_BAD: return EXIT_USAGE;             already explained
 *       default: if (!cli_limit_option("report", c, v, &lim, &rc)) rc = EXIT_USAGE;
 *       }
 *   }
 *
 * Values are parsed with parse_count / parse_size, passing "--name" for the
 * message; a new shared option gets its CLI_OPT_ value below. */
enum {
    CLI_END = -1,            /* no more words */
    CLI_BAD = -2,            /* unknown option or missing value: printed, exit EXIT_USAGE */
    CLI_ARG = 1,             /* an argument; its text in *arg */
    CLI_OPT_FIRST = 0x100,   /* a command's own long-only options start here */
    /* shared options, handled by the functions that own them */
    CLI_OPT_LIMIT = 0x200,
    CLI_OPT_JOB_MEMORY,
    CLI_OPT_NO_FUSE,
    CLI_OPT_TIE_ORDER,
    CLI_OPT_RUN_MEMORY,
};
typedef struct cli_parser {
    const char *cmd;
    int argc;
    char **argv;
    const struct option *longopts;
    int rest;                /* past "--": every word is an argument */
    char optstring[64];
} cli_parser;
/* shortopts: getopt's short options without any prefix, e.g. "h". */
void cli_parser_init(cli_parser *p, const char *cmd, int argc, char **argv, const char *shortopts,
                     const struct option *longopts);
/* The next option's val (its value in *arg), CLI_ARG, CLI_END or CLI_BAD. */
int cli_parser_next(cli_parser *p, const char **arg);

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

/* Progress on stderr (progress.c): --progress=auto|bar|plain|none and
 * --progress-interval SECONDS. auto is bar on a terminal, plain otherwise. */
enum { CLI_PROGRESS_AUTO, CLI_PROGRESS_BAR, CLI_PROGRESS_PLAIN, CLI_PROGRESS_NONE };
#define CLI_PROGRESS_INTERVAL_DEFAULT 5.0
typedef struct cli_progress {
    const char *cmd;
    int mode;                /* bar, plain or none: auto is resolved */
    double interval;         /* seconds between plain lines */
    double start, last;      /* cli_now() at the start and at the last line */
    size_t shown;            /* the bar's width on screen (0: nothing to clear) */
} cli_progress;
int cli_progress_parse(const char *cmd, const char *v, int *mode);
int cli_progress_interval(const char *cmd, const char *v, double *out);
void cli_progress_start(cli_progress *p, const char *cmd, int mode, double interval);
/* 1 if a report is due now; final: the last one, always shown. */
int cli_progress_due(cli_progress *p, int final);
/* The report: "\r  TEXT" on a bar, "bitflip CMD: TEXT\n" on plain, nothing on none. */
void cli_progress_print(cli_progress *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Blanks the bar, before other output or at the end. */
void cli_progress_clear(cli_progress *p);
#define CLI_PROGRESS_HELP \
    "  --progress MODE      auto (the default: bar on a terminal, plain otherwise),\n" \
    "                       bar (one line redrawn with \\r), plain (a line every\n" \
    "                       --progress-interval seconds, for logs) or none. No\n" \
    "                       colour or ANSI escapes either way (NO_COLOR holds)\n" \
    "  --progress-interval S  seconds between plain lines (default 5; 0: every update)\n"

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
    long long run_memory;   /* --run-memory, bytes (bf_plan_opts.max_run_bytes); 0: the plans' default */
} cli_limits;

void cli_limits_init(cli_limits *l);
/* The getopt_long entries of --limit KEY=VALUE, --job-memory SIZE and
 * --no-fuse, for a command's option table (all three, or one each). */
#define CLI_OPTION_LIMIT {"limit", required_argument, NULL, CLI_OPT_LIMIT}
#define CLI_OPTION_JOB_MEMORY {"job-memory", required_argument, NULL, CLI_OPT_JOB_MEMORY}
#define CLI_OPTION_NO_FUSE {"no-fuse", no_argument, NULL, CLI_OPT_NO_FUSE}
#define CLI_OPTION_TIE_ORDER {"tie-order", required_argument, NULL, CLI_OPT_TIE_ORDER}
#define CLI_LIMITS_OPTIONS CLI_OPTION_LIMIT, CLI_OPTION_JOB_MEMORY, CLI_OPTION_NO_FUSE, CLI_OPTION_TIE_ORDER
/* --run-memory SIZE: the commands whose plans may have dynamic steps (eval,
 * run, plan) add it to their table; cli_limit_option applies it */
#define CLI_OPTION_RUN_MEMORY {"run-memory", required_argument, NULL, CLI_OPT_RUN_MEMORY}
/* If option c (from cli_parser_next, its value v) is one of those: applies
 * it, sets *rc (0 or an exit code, having printed why) and returns 1; else 0. */
int cli_limit_option(const char *cmd, int c, const char *v, cli_limits *l, int *rc);
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
    "                       node, not as the one op PyTorch ran (docs/OPS.md)\n" \
    "  --tie-order ORDER    which of several equal values a TopK or NMS keeps: onnx\n" \
    "                       (the default: the spec's, lower index first) or pytorch\n" \
    "                       (PyTorch 1.13's CPU order, as its goldens have it:\n" \
    "                       untrained detectors tie; docs/OPS.md, \"Ties\")\n"
#define CLI_RUN_MEMORY_HELP \
    "  --run-memory SIZE    cap on the memory one plan run takes for shapes that are\n" \
    "                       data (NMS, NonZero, If/Loop: dynamic steps); a run over it\n" \
    "                       fails naming the step (default 4G, or what --job-memory\n" \
    "                       leaves; docs/LIMITS.md)\n"

#endif
