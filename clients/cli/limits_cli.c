/* The limits every command that reads a model, an eval set or a spec takes:
 * --limit KEY=VALUE for the parsers (docs/LIMITS.md lists the keys) and
 * --job-memory SIZE for what an evaluation or a campaign may hold; and
 * --no-fuse, which loads the model with its exported patterns unfused. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/limits.h"
#include "cli.h"

/* A byte count with an optional K, M, G or T suffix (powers of 1024): the
 * daemon's parser (bitflip/api/limits.h), with the CLI's message. */
int parse_size(const char *cmd, const char *opt, const char *v, long long *out)
{
    if (!v) return usage_error(cmd, "%s needs a value such as 512M", opt);
    int64_t n;
    if (bf_parse_size(v, &n) != 0 || n > 1000000000000000000LL)
        return usage_error(cmd, "%s wants a size such as 4096, 64M or 2G, got '%s'", opt, v);
    *out = (long long)n;
    return 0;
}

/* The table and its messages are api/'s, shared with bitflipd --limit. */
static int set_limit(const char *cmd, const char *kv, cli_limits *l)
{
    bf_limits all = {.model = l->model, .data = l->data, .spec = l->spec, .errmap = l->errmap};
    bf_error err = {0};
    if (bf_limits_set(&all, kv, &err) != BF_OK) return usage_error(cmd, "%s", err.msg);
    l->model = all.model;
    l->data = all.data;
    l->spec = all.spec;
    l->errmap = all.errmap;
    return 0;
}

int cli_limit_option(const char *cmd, int c, const char *v, cli_limits *l, int *rc)
{
    switch (c) {
    case CLI_OPT_NO_FUSE: l->model.no_fuse = 1; *rc = 0; return 1;
    case CLI_OPT_TIE_ORDER:
        *rc = 0;
        if (v && !strcmp(v, "onnx")) l->model.tie_order = BF_TIE_ORDER_ONNX;
        else if (v && !strcmp(v, "pytorch")) l->model.tie_order = BF_TIE_ORDER_PYTORCH;
        else *rc = usage_error(cmd, "--tie-order must be onnx or pytorch, got '%s'", v ? v : "");
        return 1;
    case CLI_OPT_LIMIT: *rc = set_limit(cmd, v, l); return 1;
    case CLI_OPT_RUN_MEMORY:
        *rc = parse_size(cmd, "--run-memory", v, &l->run_memory);
        if (!*rc && l->run_memory < 1) *rc = usage_error(cmd, "--run-memory must be more than 0");
        return 1;
    case CLI_OPT_JOB_MEMORY:
        *rc = parse_size(cmd, "--job-memory", v, &l->job_memory);
        if (!*rc && l->job_memory < 1) *rc = usage_error(cmd, "--job-memory must be more than 0");
        return 1;
    default: return 0;
    }
}

void cli_limits_init(cli_limits *l)
{
    memset(l, 0, sizeof *l);
    l->job_memory = CLI_JOB_MEMORY_DEFAULT;
}

int check_job_memory(const char *cmd, const char *job, const bf_job_budget *b, long long limit)
{
    bf_error err = {0};
    if (limit <= 0 || bf_job_budget_check(b, (uint64_t)limit, job, "--job-memory", &err) == BF_OK) return 0;
    return report_error(cmd, &err);
}
