/* The limits every command that reads a model, an eval set or a spec takes:
 * --limit KEY=VALUE for the parsers (docs/LIMITS.md lists the keys) and
 * --job-memory SIZE for what an evaluation or a campaign may hold. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* A byte count with an optional K, M or G suffix (powers of 1024). */
int parse_size(const char *cmd, const char *opt, const char *v, long long *out)
{
    if (!v) return usage_error(cmd, "%s needs a value such as 512M", opt);
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    double unit = 1;
    if (*end == 'K' || *end == 'k') unit = 1024, end++;
    else if (*end == 'M' || *end == 'm') unit = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') unit = 1024.0 * 1024 * 1024, end++;
    else if (*end == 'T' || *end == 't') unit = 1024.0 * 1024 * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (errno || end == v || *end || !(x >= 0) || x * unit > 1e18)
        return usage_error(cmd, "%s wants a size such as 4096, 64M or 2G, got '%s'", opt, v);
    *out = (long long)(x * unit);
    return 0;
}

typedef enum { K_INT, K_SIZE } kind;

static const struct {
    const char *key;
    kind k;
    size_t off;     /* into cli_limits */
    int is_int;     /* the field is an int (else int64_t / size_t) */
} keys[] = {
    {"model.graph-depth", K_INT, offsetof(cli_limits, model.max_graph_depth), 1},
    {"model.type-depth", K_INT, offsetof(cli_limits, model.max_type_depth), 1},
    {"model.field-bytes", K_SIZE, offsetof(cli_limits, model.max_field_bytes), 0},
    {"model.nodes", K_INT, offsetof(cli_limits, model.max_nodes), 0},
    {"model.initializers", K_INT, offsetof(cli_limits, model.max_initializers), 0},
    {"model.attributes", K_INT, offsetof(cli_limits, model.max_attributes), 0},
    {"model.messages", K_INT, offsetof(cli_limits, model.max_messages), 0},
    {"model.rank", K_INT, offsetof(cli_limits, model.max_rank), 1},
    {"model.tensor-elements", K_INT, offsetof(cli_limits, model.max_tensor_elements), 0},
    {"data.header-bytes", K_SIZE, offsetof(cli_limits, data.max_header_bytes), 0},
    {"data.json-depth", K_INT, offsetof(cli_limits, data.max_json_depth), 1},
    {"data.tensors", K_INT, offsetof(cli_limits, data.max_tensors), 0},
    {"data.bytes", K_SIZE, offsetof(cli_limits, data.max_bytes), 0},
    {"spec.bytes", K_SIZE, offsetof(cli_limits, spec.max_bytes), 2},
    {"spec.depth", K_INT, offsetof(cli_limits, spec.max_depth), 1},
    {"spec.array", K_INT, offsetof(cli_limits, spec.max_array), 2},
    {"spec.string", K_SIZE, offsetof(cli_limits, spec.max_string), 2},
};

static int set_limit(const char *cmd, const char *kv, cli_limits *l)
{
    const char *eq = kv ? strchr(kv, '=') : NULL;
    if (!eq) return usage_error(cmd, "--limit wants KEY=VALUE, e.g. model.graph-depth=16 (keys: docs/LIMITS.md)");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strlen(keys[i].key) != (size_t)(eq - kv) || strncmp(kv, keys[i].key, (size_t)(eq - kv))) continue;
        long long v;
        int rc = keys[i].k == K_SIZE ? parse_size(cmd, keys[i].key, eq + 1, &v)
                                     : parse_count(cmd, keys[i].key, eq + 1, 1, keys[i].is_int == 1 ? 1000000000LL : (1LL << 62), &v);
        if (rc) return rc;
        if (v < 1) return usage_error(cmd, "%s must be at least 1", keys[i].key);
        char *p = (char *)l + keys[i].off;
        if (keys[i].is_int == 1) {
            if (v > 1000000000LL) return usage_error(cmd, "%s is at most 1000000000", keys[i].key);
            *(int *)p = (int)v;
        } else if (keys[i].is_int == 2) *(size_t *)p = (size_t)v;
        else *(int64_t *)p = (int64_t)v;
        return 0;
    }
    char list[1024] = "";
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, keys[i].key);
    }
    return usage_error(cmd, "--limit: no limit '%.*s'; the limits are %s", (int)(eq - kv), kv, list);
}

int cli_limit_option(const char *cmd, int argc, char **argv, int *i, cli_limits *l, int *rc)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--limit")) {
        *rc = set_limit(cmd, v, l);
    } else if (!strcmp(a, "--job-memory")) {
        *rc = parse_size(cmd, a, v, &l->job_memory);
        if (!*rc && l->job_memory < 1) *rc = usage_error(cmd, "--job-memory must be more than 0");
    } else {
        return 0;
    }
    (*i)++;
    return 1;
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
