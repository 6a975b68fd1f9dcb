/* The Slurm executor's command-line side (work/slurm_cmd.h). */
#include "work/slurm_cmd.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *bfd_fmt(const char *f, ...)
{
    va_list ap, ap2;
    va_start(ap, f);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (p) vsnprintf(p, (size_t)n + 1, f, ap2);
    va_end(ap2);
    return p;
}

char *bfd_sh_quote(const char *s)
{
    size_t n = 3;
    for (const char *p = s; *p; p++) n += *p == '\'' ? 4 : 1;
    char *q = malloc(n), *o = q;
    if (!q) return NULL;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') { memcpy(o, "'\\''", 4); o += 4; }
        else *o++ = *p;
    }
    *o++ = '\'';
    *o = 0;
    return q;
}

char *bfd_slurm_array_list(const int *c, size_t n)
{
    char *s = malloc(n * 24 + 1), *o = s;   /* two ints, a dash and a comma at most per entry */
    if (!s) return NULL;
    *o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (k + 1 < n && c[k + 1] == c[k] + 1) k++;
        o += sprintf(o, "%s%d", o == s ? "" : ",", c[i]);
        if (k > i) o += sprintf(o, "-%d", c[k]);
        i = k + 1;
    }
    return s;
}

char *bfd_slurm_limit_opts(const char *limits, int64_t job_memory)
{
    char *out = bfd_fmt(" --job-memory %lld", (long long)job_memory);
    char *copy = strdup(limits ? limits : ""), *save = NULL;
    if (!out || !copy) { free(out); free(copy); return NULL; }
    for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *q = bfd_sh_quote(kv), *n = q ? bfd_fmt("%s --limit %s", out, q) : NULL;
        free(q);
        free(out);
        if (!(out = n)) break;
    }
    free(copy);
    return out;
}

char *bfd_slurm_task_script(const bfd_sbatch_in *in)
{
    char *q_dir = bfd_sh_quote(in->dir), *q_trials = bfd_sh_quote(in->trials_dir);
    char *q_bf = bfd_sh_quote(in->bitflip), *q_spec = bfd_sh_quote(in->spec_path);
    char *q_lim = bfd_slurm_limit_opts(in->limits, in->job_memory), *script = NULL;
    /* chunk i is shard i of N; the part, the trial records and the run's
     * start and end times (part-i.time: for the trial-duration metric, as a
     * local worker times its chunk) appear whole (renamed), the part last,
     * so a part that exists has the others */
    if (q_dir && q_trials && q_bf && q_spec && q_lim)
        script = bfd_fmt("set -e; i=$SLURM_ARRAY_TASK_ID; t=.tmp$SLURM_JOB_ID; d=%s; r=%s; s=$(date +%%s.%%N); "
                     "%s run --local %s --shard \"$i/%d\" --threads 1%s --format json --out \"$d/part-$i.json$t\" "
                     "--trials-out \"$r/$i.jsonl$t\" >/dev/null; echo \"$s $(date +%%s.%%N)\" >\"$d/part-$i.time$t\"; "
                     "mv -f \"$r/$i.jsonl$t\" \"$r/$i.jsonl\"; mv -f \"$d/part-$i.time$t\" \"$d/part-$i.time\"; "
                     "mv -f \"$d/part-$i.json$t\" \"$d/part-$i.json\"",
                     q_dir, q_trials, q_bf, q_spec, in->n_chunks, q_lim);
    free(q_dir);
    free(q_trials);
    free(q_bf);
    free(q_spec);
    free(q_lim);
    return script;
}

void bfd_argv_free(char **argv)
{
    if (!argv) return;
    for (char **a = argv; *a; a++) free(*a);
    free(argv);
}

bf_status bfd_sbatch_argv(const bfd_sbatch_in *in, char ***out, bf_error *err)
{
    enum { MAX_ARGS = 16 };
    bf_status st = BF_OK;
    char **argv = calloc(MAX_ARGS, sizeof *argv), *list = NULL;
    size_t n = 0;
    *out = NULL;
    if (!argv || !(list = bfd_slurm_array_list(in->chunks, in->n_submit))) goto oom;
    /* each entry is checked as it is made: a NULL would end argv early */
#define ARG(expr) do { if (!(argv[n++] = (expr))) goto oom; } while (0)
    ARG(strdup("sbatch"));
    ARG(strdup("--parsable"));
    ARG(bfd_fmt("--job-name=bitflipd-%.12s", in->campaign_id));
    ARG(bfd_fmt("--array=%s", list));
    ARG(bfd_fmt("--output=%s/task-%%a.log", in->dir));
    ARG(bfd_fmt("--chdir=%s", in->dir));
    ARG(strdup("--cpus-per-task=1"));
    if (in->partition && *in->partition) ARG(bfd_fmt("--partition=%s", in->partition));
    if (in->account && *in->account) ARG(bfd_fmt("--account=%s", in->account));
    ARG(strdup("--wrap"));
    ARG(bfd_slurm_task_script(in));
#undef ARG
    argv[n] = NULL;
    *out = argv;
    argv = NULL;
    goto out;
oom:
    st = bf_error_set(err, BF_ENOMEM, "out of memory submitting the array");
out:
    bfd_argv_free(argv);
    free(list);
    return st;
}

int bfd_sbatch_job_id(const char *out, char *id, size_t size)
{
    size_t k = out ? strspn(out, "0123456789") : 0;
    if (k == 0 || k >= size) return 0;
    memcpy(id, out, k);
    id[k] = 0;
    return 1;
}

void bfd_squeue_argv(const char *job, char *argv[9])
{
    char *const a[] = {"squeue", "-h", "-r", "--states=all", "-j", (char *)job, "-o", "%K %T", NULL};
    memcpy(argv, a, sizeof a);
}

int bfd_squeue_line(const char *line, int *task, char state[40])
{
    return sscanf(line, "%d %39s", task, state) == 2;
}

int bfd_squeue_job_gone(int exit_code, const char *err_line)
{
    return exit_code > 0 && strstr(err_line, "Invalid job id") != NULL;
}

int bfd_slurm_state_ran(const char *state)
{
    return !strcmp(state, "RUNNING") || !strcmp(state, "COMPLETING") || !strcmp(state, "COMPLETED");
}

int bfd_slurm_state_alive(const char *state)
{
    static const char *const alive[] = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING",
                                        "SUSPENDED"};
    for (size_t i = 0; i < sizeof alive / sizeof alive[0]; i++)
        if (!strcmp(state, alive[i])) return 1;
    return 0;
}

void bfd_scancel_argv(const char *job, char *argv[3])
{
    argv[0] = "scancel";
    argv[1] = (char *)job;
    argv[2] = NULL;
}

double bfd_slurm_task_seconds(const char *text)
{
    double t0, t1;
    char end;
    if (!text || sscanf(text, "%lf %lf %c", &t0, &t1, &end) != 2) return -1;
    /* the difference of two clock readings on one node: negative or absurd
     * is a file that is not ours, or a clock stepped back mid-run */
    if (!isfinite(t0) || !isfinite(t1) || t1 < t0 || t1 - t0 > 1e7) return -1;
    return t1 - t0;
}
