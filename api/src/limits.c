/* The KEY=VALUE table of the parsers' limits (bitflip/api/limits.h). */
#include "bitflip/api/limits.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bf_parse_size(const char *s, int64_t *out)
{
    if (!s) return -1;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    double unit = 1;
    if (end == s || errno || !(x >= 0)) return -1;
    switch (*end) {
    case 'k': case 'K': unit = 1024.0; end++; break;
    case 'm': case 'M': unit = 1024.0 * 1024; end++; break;
    case 'g': case 'G': unit = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': unit = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (unit > 1 && end[0] == 'i' && end[1] == 'B') end += 2;
    else if (*end == 'B' || *end == 'b') end++;
    /* 9.2e18 < INT64_MAX: the conversion below cannot overflow */
    if (*end || x * unit >= 9.2e18) return -1;
    *out = (int64_t)(x * unit);
    return 0;
}

typedef enum { K_COUNT, K_SIZE } kind;
typedef enum { T_INT, T_I64, T_SIZE_T } ctype;

#define INT_MAX_LIMIT 1000000000LL
/* counts held in 64 bits: well past any file, and far from overflow when
 * the parsers multiply or add them */
#define I64_MAX_LIMIT (1LL << 62)

static const struct {
    const char *key;
    kind k;
    ctype t;
    size_t off;   /* into bf_limits */
} keys[] = {
    {"model.graph-depth", K_COUNT, T_INT, offsetof(bf_limits, model.max_graph_depth)},
    {"model.type-depth", K_COUNT, T_INT, offsetof(bf_limits, model.max_type_depth)},
    {"model.field-bytes", K_SIZE, T_I64, offsetof(bf_limits, model.max_field_bytes)},
    {"model.nodes", K_COUNT, T_I64, offsetof(bf_limits, model.max_nodes)},
    {"model.initializers", K_COUNT, T_I64, offsetof(bf_limits, model.max_initializers)},
    {"model.attributes", K_COUNT, T_I64, offsetof(bf_limits, model.max_attributes)},
    {"model.messages", K_COUNT, T_I64, offsetof(bf_limits, model.max_messages)},
    {"model.rank", K_COUNT, T_INT, offsetof(bf_limits, model.max_rank)},
    {"model.tensor-elements", K_COUNT, T_I64, offsetof(bf_limits, model.max_tensor_elements)},
    {"data.header-bytes", K_SIZE, T_I64, offsetof(bf_limits, data.max_header_bytes)},
    {"data.json-depth", K_COUNT, T_INT, offsetof(bf_limits, data.max_json_depth)},
    {"data.tensors", K_COUNT, T_I64, offsetof(bf_limits, data.max_tensors)},
    {"data.bytes", K_SIZE, T_I64, offsetof(bf_limits, data.max_bytes)},
    {"spec.bytes", K_SIZE, T_SIZE_T, offsetof(bf_limits, spec.max_bytes)},
    {"spec.depth", K_COUNT, T_INT, offsetof(bf_limits, spec.max_depth)},
    {"spec.array", K_COUNT, T_SIZE_T, offsetof(bf_limits, spec.max_array)},
    {"spec.string", K_SIZE, T_SIZE_T, offsetof(bf_limits, spec.max_string)},
    {"spec.new-tokens", K_COUNT, T_I64, offsetof(bf_limits, spec.max_new_tokens)},
    {"errmap.header-bytes", K_SIZE, T_I64, offsetof(bf_limits, errmap.max_header_bytes)},
    {"errmap.cells", K_COUNT, T_I64, offsetof(bf_limits, errmap.max_cells)},
    {"errmap.bits", K_COUNT, T_I64, offsetof(bf_limits, errmap.max_bits)},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

const char *bf_limits_key(size_t i)
{
    return i < N_KEYS ? keys[i].key : NULL;
}

bf_status bf_limits_set(bf_limits *l, const char *kv, bf_error *err)
{
    const char *eq = kv ? strchr(kv, '=') : NULL;
    if (!eq) return bf_error_set(err, BF_EINVAL, "--limit wants KEY=VALUE, e.g. model.graph-depth=16 (keys: docs/LIMITS.md)");
    size_t kl = (size_t)(eq - kv);
    const char *v = eq + 1;
    for (size_t i = 0; i < N_KEYS; i++) {
        if (strlen(keys[i].key) != kl || strncmp(kv, keys[i].key, kl)) continue;
        int64_t n = 0;
        if (keys[i].k == K_SIZE) {
            if (bf_parse_size(v, &n) != 0)
                return bf_error_set(err, BF_EINVAL, "%s wants a size such as 4096, 64M or 2G, got '%s'", keys[i].key, v);
        } else {
            long long max = keys[i].t == T_INT ? INT_MAX_LIMIT : I64_MAX_LIMIT;
            char *end;
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (*v == '\0' || *end != '\0' || errno || x < 1 || x > max)
                return bf_error_set(err, BF_EINVAL, "%s must be an integer from 1 to %lld, got '%s'", keys[i].key, max, v);
            n = x;
        }
        /* 0 would mean "the default" to the parsers: not what a user asking for 0 wants */
        if (n < 1) return bf_error_set(err, BF_EINVAL, "%s must be at least 1", keys[i].key);
        char *p = (char *)l + keys[i].off;
        if (keys[i].t == T_INT) *(int *)p = (int)n;
        else if (keys[i].t == T_SIZE_T) *(size_t *)p = (size_t)n;
        else *(int64_t *)p = n;
        return BF_OK;
    }
    char list[1024];
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < N_KEYS && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", keys[i].key);
        if (w < 0) break;
        used += (size_t)w;
    }
    return bf_error_set(err, BF_EINVAL, "--limit: no limit '%.*s'; the limits are %s", (int)kl, kv, list);
}
