/* Shards of a campaign: where a task's index comes from, and what its part
 * is called (shard.c; docs/SCALE.md). */
#ifndef BF_CLI_SHARD_H
#define BF_CLI_SHARD_H

#include <stddef.h>

#include "cli.h"

/* The most shards a campaign is split into (--shard, --shards, a scheduler's count). */
#define SHARDS_MAX 1000000

/* "I/N" with 0 <= I < N <= SHARDS_MAX; 0 or EXIT_USAGE (printed). */
int shard_parse(const char *cmd, const char *s, long long *i, long long *n);
/* --shard auto: the index and count from the environment (Slurm array,
 * Kubernetes Indexed Job, AWS Batch array, BITFLIP_SHARD_INDEX), the count
 * also from shards_opt (--shards, 0 if not given) or BITFLIP_SHARDS; every
 * source given must agree. `from` says where they came from, for the log.
 * 0 or EXIT_USAGE, having said what is missing or inconsistent. */
int shard_auto(const char *cmd, long long shards_opt, long long *index, long long *count, char *from, size_t from_len);

/* PREFIX.part-I-of-N.json; -1 if it does not fit. */
int shard_part_name(const char *prefix, long long index, long long count, char *out, size_t len);
/* The inverse, for a file name (not a path); -1 if `name` is not a part's. */
int shard_part_parse(const char *name, char *prefix, size_t prefix_len, long long *index, long long *count);

#endif
