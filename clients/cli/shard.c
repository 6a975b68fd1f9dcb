/* Shards: --shard I/N as given, or --shard auto from the scheduler's
 * environment (Slurm arrays, Kubernetes Indexed Jobs, AWS Batch arrays, or
 * BITFLIP_SHARD_INDEX for anything else), and the names of their parts,
 * PREFIX.part-I-of-N.json (docs/SCALE.md). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "shard.h"

/* The environment variable `name` as an integer in [min, max]: 1 when set
 * and valid, 0 when unset (or empty), -1 (having printed why) otherwise. */
static int env_int(const char *name, long long min, long long max, long long *out)
{
    const char *s = getenv(name);
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < min || v > max) {
        usage_error("run", "--shard auto: %s is '%s', not an integer from %lld to %lld", name, s, min, max);
        return -1;
    }
    *out = v;
    return 1;
}

int shard_parse(const char *cmd, const char *s, long long *i, long long *n)
{
    char *end;
    *i = strtoll(s, &end, 10);
    if (end == s || *end != '/') return usage_error(cmd, "--shard wants I/N (e.g. 0/4) or auto, got '%s'", s);
    const char *ns = end + 1;
    *n = strtoll(ns, &end, 10);
    if (end == ns || *end || *n < 1 || *n > SHARDS_MAX || *i < 0 || *i >= *n)
        return usage_error(cmd, "--shard wants I/N with 0 <= I < N <= %d, got '%s'", SHARDS_MAX, s);
    return 0;
}

/* One scheduler's view: found 1 (index, count, and the variables' names
 * for messages), 0 absent, -1 malformed (printed). */
typedef struct sched_view {
    const char *name;
    long long index, count;   /* count 0: the scheduler does not say */
    char why[160];
} sched_view;

static int from_slurm(sched_view *s)
{
    long long id, min, cnt, step = 1, max;
    int r = env_int("SLURM_ARRAY_TASK_ID", 0, LLONG_MAX / 2, &id);
    if (r <= 0) return r;
    if (env_int("SLURM_ARRAY_TASK_MIN", 0, LLONG_MAX / 2, &min) != 1 ||
        env_int("SLURM_ARRAY_TASK_COUNT", 1, SHARDS_MAX, &cnt) != 1) {
        usage_error("run", "--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_MIN or SLURM_ARRAY_TASK_COUNT "
                           "is not (or is not a number): run it as an array job, sbatch --array=0-N-1");
        return -1;
    }
    if (env_int("SLURM_ARRAY_TASK_STEP", 1, LLONG_MAX / 2, &step) < 0) return -1;
    int have_max = env_int("SLURM_ARRAY_TASK_MAX", 0, LLONG_MAX / 2, &max);
    if (have_max < 0) return -1;
    /* a list (--array=1,3,7) has no index from 0 to N-1 a task can work out */
    if (id < min || (id - min) % step || (id - min) / step >= cnt || (have_max && (max - min) / step + 1 != cnt)) {
        usage_error("run", "--shard auto: the Slurm array's variables do not make one range of %lld tasks "
                           "(SLURM_ARRAY_TASK_ID %lld, _MIN %lld, _STEP %lld): submit it as --array=0-%lld "
                           "(a %% limit is fine)",
                    cnt, id, min, step, cnt - 1);
        return -1;
    }
    s->name = "Slurm";
    s->index = (id - min) / step;
    s->count = cnt;
    snprintf(s->why, sizeof s->why, "SLURM_ARRAY_TASK_ID %lld - SLURM_ARRAY_TASK_MIN %lld, of SLURM_ARRAY_TASK_COUNT %lld",
             id, min, cnt);
    return 1;
}

static int from_pair(sched_view *s, const char *name, const char *index_var, const char *count_var)
{
    long long i, n = 0;
    int r = env_int(index_var, 0, SHARDS_MAX - 1, &i);
    if (r <= 0) return r;
    if (count_var && env_int(count_var, 1, SHARDS_MAX, &n) < 0) return -1;
    s->name = name;
    s->index = i;
    s->count = n;
    if (n) snprintf(s->why, sizeof s->why, "%s %lld of %s %lld", index_var, i, count_var, n);
    else snprintf(s->why, sizeof s->why, "%s %lld", index_var, i);
    return 1;
}

int shard_auto(const char *cmd, long long shards_opt, long long *index, long long *count, char *from, size_t from_len)
{
    sched_view v[4];
    int n = 0, r;
    memset(v, 0, sizeof v);
    if ((r = from_slurm(&v[n])) < 0) return EXIT_USAGE;
    n += r;
    if ((r = from_pair(&v[n], "Kubernetes", "JOB_COMPLETION_INDEX", NULL)) < 0) return EXIT_USAGE;
    n += r;
    if ((r = from_pair(&v[n], "AWS Batch", "AWS_BATCH_JOB_ARRAY_INDEX", "AWS_BATCH_JOB_ARRAY_SIZE")) < 0) return EXIT_USAGE;
    n += r;
    if ((r = from_pair(&v[n], "BITFLIP_SHARD_INDEX", "BITFLIP_SHARD_INDEX", NULL)) < 0) return EXIT_USAGE;
    n += r;
    if (n == 0)
        return usage_error(cmd, "--shard auto: no shard index in the environment; it comes from a Slurm array "
                                "(SLURM_ARRAY_TASK_ID), a Kubernetes Indexed Job (JOB_COMPLETION_INDEX), an AWS Batch "
                                "array (AWS_BATCH_JOB_ARRAY_INDEX) or BITFLIP_SHARD_INDEX; outside one, give --shard I/N");
    long long env_n = 0;
    if (env_int("BITFLIP_SHARDS", 1, SHARDS_MAX, &env_n) < 0) return EXIT_USAGE;
    /* the count: the scheduler's, else --shards, else BITFLIP_SHARDS; any two given must agree */
    long long cnt = 0;
    const char *cnt_from = NULL;
    for (int k = 0; k < n; k++) {
        if (v[k].count && cnt && v[k].count != cnt)
            return usage_error(cmd, "--shard auto: %s says %lld shards (%s) but %s says %lld; unset one", v[k].name,
                               v[k].count, v[k].why, cnt_from, cnt);
        if (v[k].count) { cnt = v[k].count; cnt_from = v[k].name; }
        if (k && v[k].index != v[0].index)
            return usage_error(cmd, "--shard auto: %s says shard %lld (%s) but %s says %lld; unset one", v[k].name,
                               v[k].index, v[k].why, v[0].name, v[0].index);
    }
    if (shards_opt && cnt && shards_opt != cnt)
        return usage_error(cmd, "--shards %lld, but %s runs %lld tasks (%s): make them the same", shards_opt, cnt_from, cnt,
                           v[0].why);
    if (env_n && cnt && env_n != cnt)
        return usage_error(cmd, "BITFLIP_SHARDS is %lld, but %s runs %lld tasks: make them the same", env_n, cnt_from, cnt);
    if (shards_opt && env_n && shards_opt != env_n)
        return usage_error(cmd, "--shards %lld, but BITFLIP_SHARDS is %lld: make them the same", shards_opt, env_n);
    if (!cnt) cnt = shards_opt ? shards_opt : env_n;
    if (!cnt)
        return usage_error(cmd, "--shard auto: %s gives the index (%s) but not how many shards there are: add --shards N "
                                "(the Job's completions) or set BITFLIP_SHARDS", v[0].name, v[0].why);
    if (v[0].index >= cnt)
        return usage_error(cmd, "--shard auto: index %lld (%s) is not below the %lld shards; the Job's completions and "
                                "--shards N must be the same", v[0].index, v[0].why, cnt);
    *index = v[0].index;
    *count = cnt;
    snprintf(from, from_len, "%s: %s", v[0].name, v[0].why);
    return 0;
}

int shard_part_name(const char *prefix, long long index, long long count, char *out, size_t len)
{
    int n = snprintf(out, len, "%s.part-%lld-of-%lld.json", prefix, index, count);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

int shard_part_parse(const char *name, char *prefix, size_t prefix_len, long long *index, long long *count)
{
    const char *p = NULL;
    /* the last ".part-": a prefix may itself contain one */
    for (const char *q = strstr(name, ".part-"); q; q = strstr(q + 1, ".part-")) p = q;
    if (!p || p == name || name[0] == '.') return -1;   /* no prefix, or a hidden (temporary) file */
    char *end;
    const char *s = p + 6;
    if (*s < '0' || *s > '9') return -1;
    long long i = strtoll(s, &end, 10);
    if (strncmp(end, "-of-", 4)) return -1;
    s = end + 4;
    if (*s < '0' || *s > '9') return -1;
    long long n = strtoll(s, &end, 10);
    if (strcmp(end, ".json") || n < 1 || n > SHARDS_MAX || i < 0 || i >= n) return -1;
    size_t pl = (size_t)(p - name);
    if (pl >= prefix_len) return -1;
    memcpy(prefix, name, pl);
    prefix[pl] = '\0';
    *index = i;
    *count = n;
    return 0;
}
