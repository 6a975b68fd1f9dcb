/* bitflip — every parser limit by name, for the command line and the daemon.
 *
 * `bitflip --limit KEY=VALUE` and `bitflipd --limit KEY=VALUE` take the same
 * keys (docs/LIMITS.md lists them with their defaults): one table here, so
 * the two cannot drift apart. */
#ifndef BITFLIP_API_LIMITS_H
#define BITFLIP_API_LIMITS_H

#include <stdint.h>

#include "bitflip/api/spec.h"
#include "bitflip/errmap.h"
#include "bitflip/error.h"
#include "bitflip/limits.h"

#ifdef __cplusplus
extern "C" {
#endif

/* All the parsers' limits; zeroed, every field takes its default. */
typedef struct bf_limits {
    bf_load_limits model;      /* model.* */
    bf_dataset_limits data;    /* data.* */
    bf_spec_limits spec;       /* spec.* */
    bf_errmap_limits errmap;   /* errmap.* (profiled error maps) */
} bf_limits;

/* Sets one limit from "KEY=VALUE", e.g. "model.graph-depth=16" or
 * "data.bytes=1G" (sizes take K, M, G, T suffixes, powers of 1024). BF_EINVAL
 * with err saying why (no '=', an unknown key, with the list of keys, or a
 * value out of range); *l is unchanged then. */
bf_status bf_limits_set(bf_limits *l, const char *key_eq_value, bf_error *err);

/* The i-th key ("model.graph-depth", ...), NULL past the last. */
const char *bf_limits_key(size_t i);

/* A byte count: "4096", "64K", "512M", "1.5G", "4GiB", "2GB" (K, M, G, T are
 * powers of 1024). 0, or -1 when it is not one or is past INT64_MAX. The one
 * size parser of the CLI and the daemon. */
int bf_parse_size(const char *s, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
