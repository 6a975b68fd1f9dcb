/* bitflip slurm: a sharded campaign as a Slurm array job plus a merge job
 * that runs when every task succeeded (--dependency=afterok), and the status
 * and cancel of such a submission.
 *
 * Slurm's own clients (sbatch, squeue, scancel) do the talking: their
 * command lines are the interface sites document and allow, where the REST
 * API (slurmrestd) is optional and often off. A submission is remembered in
 * DIR/PREFIX.slurm.json, which status and cancel read. */
#define _XOPEN_SOURCE 700   /* realpath */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "campaign_cli.h"
#include "cli.h"

extern char **environ;

static const char help[] =
    "usage: bitflip slurm submit --shards N [OPTIONS] SPEC.json\n"
    "       bitflip slurm status DIR/PREFIX.slurm.json\n"
    "       bitflip slurm cancel DIR/PREFIX.slurm.json\n"
    "\n"
    "submit runs the campaign as a Slurm array of N tasks: task I runs\n"
    "'bitflip run --local SPEC.json --shard I/N' and writes DIR/PREFIX.part-I-of-N.json;\n"
    "a second job, held until every task succeeded (--dependency=afterok), merges\n"
    "the parts into DIR/PREFIX.result.json, the result the unsharded run gives. It prints\n"
    "the two job ids ('array_job ID', 'merge_job ID', 'result PATH') and records\n"
    "them in DIR/PREFIX.slurm.json. DIR must be on a file system every node sees;\n"
    "the spec's model and dataset too. status prints the parts done, the jobs'\n"
    "states and whether the result is there; cancel cancels both jobs (scancel).\n"
    "\n"
    "  --shards N           array tasks, 1 to 100000 (Slurm's MaxArraySize, 1001\n"
    "                       by default, may allow fewer)\n"
    "  --dir DIR            shared directory for parts, result and logs (default .)\n"
    "  --prefix P           file name prefix (default: SPEC's name without .json)\n"
    "  --partition P        sbatch --partition\n"
    "  --account A          sbatch --account\n"
    "  --time T             each task's time limit, as sbatch takes it (e.g. 30,\n"
    "                       2:00:00, 1-0)\n"
    "  --cpus-per-task C    cores per task, the threads of its 'bitflip run'\n"
    "                       (default 1)\n"
    "  --max-running K      at most K tasks at once (sbatch --array=...%K)\n"
    "  --only LIST          submit only these shard indexes (e.g. 3,7 or 2-5), to\n"
    "                       redo failed tasks; the merge job still takes all N parts\n"
    "  --bitflip PATH       the bitflip the tasks run (default: this one)\n"
    "  --dry-run            print the sbatch command lines, submit nothing\n"
    "\n"
    "Exit codes: 0 submitted (status: the result is there), 2 usage error, 3 sbatch,\n"
    "squeue or scancel failed, or a file could not be written (status: not done yet).\n";

typedef struct submit_opts {
    const char *spec, *dir, *prefix, *partition, *account, *time_limit, *only, *bitflip;
    long long shards, cpus, max_running;
    int dry_run;
} submit_opts;

/* A growable string; `oom` sticks once an append failed. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s)
{
    size_t k = strlen(s);
    if (b->oom) return;
    if (b->n + k + 1 > b->cap) {
        size_t cap = (b->n + k + 1) * 2;
        char *p = realloc(b->s, cap);
        if (!p) { b->oom = 1; return; }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, k + 1);
    b->n += k;
}

static int plain_word(const char *s)
{
    return *s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=:/.,%@+") == strlen(s);
}

/* s as one sh word, in single quotes unless it is plain, so any path
 * survives the job's shell and the usual ones stay readable. */
static void sb_quote(sbuf *b, const char *s)
{
    if (plain_word(s)) { sb_add(b, s); return; }
    sb_add(b, "'");
    for (const char *p = s; *p; p++) {
        char c[2] = {*p, 0};
        sb_add(b, *p == '\'' ? "'\\''" : c);
    }
    sb_add(b, "'");
}

static char *sb_take(sbuf *b)
{
    char *s = b->oom ? NULL : b->s;
    if (b->oom) free(b->s);
    b->s = NULL;
    return s;
}

/* Runs argv (found on PATH) with its stdout in *out (malloc'd, NUL-ended),
 * its stderr passed through; returns its exit status, or -1 if it could not
 * run (errno says why). */
static int run_capture(char *const argv[], char **out)
{
    int fd[2], status = 0;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    sbuf b = {0};
    *out = NULL;
    if (pipe(fd) != 0) return -1;
    if (posix_spawn_file_actions_init(&fa) != 0) { close(fd[0]); close(fd[1]); return -1; }
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (e != 0) { close(fd[0]); errno = e; return -1; }
    char chunk[4096];
    ssize_t k;
    sb_add(&b, "");
    while ((k = read(fd[0], chunk, sizeof chunk - 1)) != 0) {
        if (k < 0) {
            if (errno == EINTR) continue;
            break;
        }
        chunk[k] = 0;
        sb_add(&b, chunk);
    }
    close(fd[0]);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) { free(sb_take(&b)); errno = ECHILD; return -1; }
    *out = sb_take(&b);
    if (!*out) { errno = ENOMEM; return -1; }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static void print_argv(char *const argv[])
{
    for (size_t i = 0; argv[i]; i++) {
        sbuf b = {0};
        sb_quote(&b, argv[i]);
        char *q = sb_take(&b);
        printf("%s%s", i ? " " : "", q ? q : argv[i]);
        free(q);
    }
    putchar('\n');
}

/* Runs a Slurm client, returning its stdout; NULL after saying why. */
static char *slurm_client(const char *cmd, char *const argv[])
{
    char *out = NULL;
    int rc = run_capture(argv, &out);
    if (rc < 0) {
        fprintf(stderr, "bitflip slurm %s: cannot run %s: %s%s\n", cmd, argv[0], strerror(errno),
                errno == ENOENT ? " (is this a Slurm login node? Slurm's clients must be on PATH)" : "");
        return NULL;
    }
    if (rc != 0) {
        fprintf(stderr, "bitflip slurm %s: %s exited with %d (its message is above)\n", cmd, argv[0], rc);
        free(out);
        return NULL;
    }
    return out;
}

/* sbatch --parsable prints "JOBID" or "JOBID;CLUSTER". */
static int parse_job_id(const char *out, char id[32])
{
    size_t k = strspn(out, "0123456789");
    if (k == 0 || k >= 32 || (out[k] && !strchr(";\n", out[k]))) return -1;
    memcpy(id, out, k);
    id[k] = 0;
    return 0;
}

/* "3,7" or "2-5" within [0, n): Slurm's --array syntax, checked here so a
 * typo is a usage error, not a job with the wrong shards. */
static int check_only(const char *s, long long n)
{
    const char *p = s;
    while (*p) {
        char *end;
        long long a = strtoll(p, &end, 10), b = a;
        if (end == p || a < 0) return -1;
        if (*end == '-') {
            p = end + 1;
            b = strtoll(p, &end, 10);
            if (end == p || b < a) return -1;
        }
        if (b >= n) return -1;
        if (*end == ',') end++;
        else if (*end) return -1;
        p = end;
    }
    return *s ? 0 : -1;
}

static int parse_submit(int argc, char **argv, submit_opts *o)
{
    enum { O_DIR = CLI_OPT_FIRST, O_PREFIX, O_PART, O_ACCOUNT, O_TIME, O_CPUS, O_MAXRUN, O_ONLY, O_BITFLIP, O_DRY, O_SHARDS };
    static const struct option lo[] = {
        {"shards", required_argument, NULL, O_SHARDS}, {"dir", required_argument, NULL, O_DIR},
        {"prefix", required_argument, NULL, O_PREFIX}, {"partition", required_argument, NULL, O_PART},
        {"account", required_argument, NULL, O_ACCOUNT}, {"time", required_argument, NULL, O_TIME},
        {"cpus-per-task", required_argument, NULL, O_CPUS}, {"max-running", required_argument, NULL, O_MAXRUN},
        {"only", required_argument, NULL, O_ONLY}, {"bitflip", required_argument, NULL, O_BITFLIP},
        {"dry-run", no_argument, NULL, O_DRY}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    cli_parser p;
    const char *v;
    const char *extra = NULL;
    int c, rc = 0;
    o->cpus = 1;
    o->dir = ".";
    cli_parser_init(&p, "slurm", argc, argv, "h", lo);
    while (!rc && (c = cli_parser_next(&p, &v)) != CLI_END) {
        switch (c) {
        case 'h': fputs(help, stdout); return -1;
        case O_SHARDS: rc = parse_count("slurm", "--shards", v, 1, 100000, &o->shards); break;
        case O_DIR: o->dir = v; break;
        case O_PREFIX: o->prefix = v; break;
        case O_PART: o->partition = v; break;
        case O_ACCOUNT: o->account = v; break;
        case O_TIME: o->time_limit = v; break;
        case O_CPUS: rc = parse_count("slurm", "--cpus-per-task", v, 1, 256, &o->cpus); break;
        case O_MAXRUN: rc = parse_count("slurm", "--max-running", v, 1, 100000, &o->max_running); break;
        case O_ONLY: o->only = v; break;
        case O_BITFLIP: o->bitflip = v; break;
        case O_DRY: o->dry_run = 1; break;
        case CLI_ARG:
            if (!o->spec) o->spec = v;
            else if (!extra) extra = v;
            break;
        default: return EXIT_USAGE;   /* CLI_BAD: already explained */
        }
    }
    if (rc) return rc;
    if (!o->spec) return usage_error("slurm", "which campaign? usage: bitflip slurm submit --shards N SPEC.json");
    if (extra) return usage_error("slurm", "one spec at a time (got '%s' and '%s')", o->spec, extra);
    if (!o->shards) return usage_error("slurm", "how many tasks? add --shards N ('bitflip plan SPEC' helps choose)");
    if (o->only && check_only(o->only, o->shards) != 0)
        return usage_error("slurm", "--only wants shard indexes below %lld such as 3,7 or 2-5, got '%s'", o->shards, o->only);
    if (o->prefix && (!*o->prefix || strchr(o->prefix, '/')))
        return usage_error("slurm", "--prefix is a file name prefix without '/', got '%s'", o->prefix);
    return 0;
}

/* The spec's file name without its directory and .json. */
static char *default_prefix(const char *spec)
{
    const char *base = strrchr(spec, '/');
    base = base ? base + 1 : spec;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".json")) n -= 5;
    char *p = malloc(n + 1);
    if (p) { memcpy(p, base, n); p[n] = 0; }
    return p;
}

static int write_record(const char *path, const char *spec, long long shards, const char *array_id, const char *merge_id,
                        const char *dir, const char *prefix, const char *result)
{
    json_t *j = json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:s}", "spec", spec, "shards", (json_int_t)shards, "array_job",
                          array_id, "merge_job", merge_id, "dir", dir, "prefix", prefix, "result", result);
    char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    int rc = text ? write_text_atomic("slurm submit", path, text) : EXIT_INFRA;
    if (!text) fprintf(stderr, "bitflip slurm submit: out of memory writing %s\n", path);
    if (rc != 0)
        fprintf(stderr, "bitflip slurm submit: the jobs are submitted; scancel %s %s to undo\n", array_id, merge_id);
    free(text);
    return rc;
}

/* The absolute paths the jobs are given (they run elsewhere, later): the
 * spec, the directory (made unless --dry-run), this bitflip (or --bitflip)
 * and the working directory. 0, or the exit code after the message. */
static int resolve_paths(const submit_opts *o, char spec[PATH_MAX], char dir[PATH_MAX], char self[PATH_MAX],
                         char cwd[PATH_MAX])
{
    if (!realpath(o->spec, spec)) {
        fprintf(stderr, "bitflip slurm submit: cannot read the spec %s: %s\n", o->spec, strerror(errno));
        return EXIT_USAGE;
    }
    if (!o->dry_run && mkdir(o->dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "bitflip slurm submit: cannot make the directory %s: %s\n", o->dir, strerror(errno));
        return EXIT_INFRA;
    }
    if (!realpath(o->dir, dir)) {
        if (!o->dry_run || o->dir[0] != '/' || strlen(o->dir) >= PATH_MAX) {
            fprintf(stderr, "bitflip slurm submit: --dir %s: %s\n", o->dir, strerror(errno));
            return EXIT_INFRA;
        }
        strcpy(dir, o->dir);
    }
    if (!getcwd(cwd, PATH_MAX)) { fprintf(stderr, "bitflip slurm submit: getcwd: %s\n", strerror(errno)); return EXIT_INFRA; }
    if (o->bitflip) {
        if (!realpath(o->bitflip, self)) {
            fprintf(stderr, "bitflip slurm submit: --bitflip %s: %s\n", o->bitflip, strerror(errno));
            return EXIT_USAGE;
        }
    } else {
        ssize_t k = readlink("/proc/self/exe", self, PATH_MAX - 1);
        if (k <= 0) { fprintf(stderr, "bitflip slurm submit: where is this bitflip? add --bitflip PATH\n"); return EXIT_USAGE; }
        self[k] = 0;
    }
    return 0;
}

/* The task: its shard index is the array index and N is fixed here, not
 * taken from SLURM_ARRAY_TASK_COUNT ('--shard auto'), so that --only can
 * resubmit a few indexes as a list. --out-dir writes the part atomically:
 * a part that exists is whole, and a retried task writes the same bytes. */
static char *task_script(const char *self, const char *spec, const char *dir, const char *prefix, long long shards,
                         long long cpus)
{
    char n_str[32], cpus_str[32];
    snprintf(n_str, sizeof n_str, "%lld", shards);
    snprintf(cpus_str, sizeof cpus_str, "%lld", cpus);
    sbuf b = {0};
    sb_quote(&b, self);
    sb_add(&b, " run --local ");
    sb_quote(&b, spec);
    sb_add(&b, " --shard \"$SLURM_ARRAY_TASK_ID/");
    sb_add(&b, n_str);
    sb_add(&b, "\" --threads ");
    sb_add(&b, cpus_str);
    sb_add(&b, " --out-dir ");
    sb_quote(&b, dir);
    sb_add(&b, " --prefix ");
    sb_quote(&b, prefix);
    sb_add(&b, " --progress plain --format json >/dev/null");
    return sb_take(&b);
}

/* The merge: every part in DIR with the prefix; a missing one is named
 * (exit 3), and the result is written atomically. */
static char *merge_script(const char *self, const char *dir, const char *prefix)
{
    sbuf m = {0};
    sb_quote(&m, self);
    sb_add(&m, " merge --prefix ");
    sb_quote(&m, prefix);
    sb_add(&m, " --format json --out ");
    sb_quote(&m, dir);
    sb_add(&m, "/");
    sb_quote(&m, prefix);
    sb_add(&m, ".result.json ");
    sb_quote(&m, dir);
    sb_add(&m, " >/dev/null");
    return sb_take(&m);
}

static int slurm_submit(int argc, char **argv)
{
    submit_opts o = {0};
    int rc = parse_submit(argc, argv, &o);
    char spec[PATH_MAX], dir[PATH_MAX], self[PATH_MAX], cwd[PATH_MAX];
    char array_id[32] = "DRYRUN_ARRAY", merge_id[32] = "DRYRUN_MERGE";
    char *prefix = NULL, *task = NULL, *merge = NULL, *out = NULL;
    char *a_array = NULL, *a_log = NULL, *a_mlog = NULL, *a_name = NULL, *a_mname = NULL, *a_dep = NULL, *a_cpus = NULL;
    char *result = NULL, *record = NULL;
    if (rc) return rc < 0 ? EXIT_OK : rc;
    if ((rc = resolve_paths(&o, spec, dir, self, cwd)) != 0) return rc;
    prefix = o.prefix ? strdup(o.prefix) : default_prefix(spec);
    if (!prefix) { rc = EXIT_INFRA; goto out; }

    task = task_script(self, spec, dir, prefix, o.shards, o.cpus);
    merge = merge_script(self, dir, prefix);

    size_t dl = strlen(dir) + strlen(prefix) + 64;
    a_array = malloc(96 + strlen(o.only ? o.only : ""));
    a_log = malloc(dl);
    a_mlog = malloc(dl);
    a_name = malloc(strlen(prefix) + 32);
    a_mname = malloc(strlen(prefix) + 32);
    a_dep = malloc(64);
    a_cpus = malloc(48);
    result = malloc(dl);
    record = malloc(dl);
    if (!task || !merge || !a_array || !a_log || !a_mlog || !a_name || !a_mname || !a_dep || !a_cpus || !result || !record) {
        fprintf(stderr, "bitflip slurm submit: out of memory\n");
        rc = EXIT_INFRA;
        goto out;
    }
    if (o.only) sprintf(a_array, "--array=%s", o.only);
    else sprintf(a_array, "--array=0-%lld", o.shards - 1);
    if (o.max_running) sprintf(a_array + strlen(a_array), "%%%lld", o.max_running);
    sprintf(a_log, "--output=%s/%s.slurm-%%A_%%a.log", dir, prefix);
    sprintf(a_mlog, "--output=%s/%s.merge-%%j.log", dir, prefix);
    sprintf(a_name, "--job-name=bitflip-%s", prefix);
    sprintf(a_mname, "--job-name=bitflip-%s-merge", prefix);
    sprintf(a_cpus, "--cpus-per-task=%lld", o.cpus);
    sprintf(result, "%s/%s.result.json", dir, prefix);
    sprintf(record, "%s/%s.slurm.json", dir, prefix);
    if (!strcmp(result, spec) || !strcmp(record, spec)) {
        rc = usage_error("slurm", "the result or record would overwrite the spec %s: choose another --prefix or --dir", spec);
        goto out;
    }

    /* sbatch OPTIONS --wrap=SCRIPT; the optional ones only when given */
    for (int pass = 0; pass < 2; pass++) {
        char *args[24], opt_part[300], opt_acct[300], opt_time[300], chdir_opt[PATH_MAX + 16];
        size_t n = 0;
        args[n++] = "sbatch";
        args[n++] = "--parsable";
        args[n++] = pass ? a_mname : a_name;
        if (pass == 0) { args[n++] = a_array; args[n++] = a_cpus; }
        else {
            snprintf(a_dep, 64, "--dependency=afterok:%s", array_id);
            args[n++] = a_dep;
            /* a failed task would otherwise leave the merge pending forever */
            args[n++] = "--kill-on-invalid-dep=yes";
        }
        args[n++] = pass ? a_mlog : a_log;
        snprintf(chdir_opt, sizeof chdir_opt, "--chdir=%s", cwd);
        args[n++] = chdir_opt;
        if (o.partition) { snprintf(opt_part, sizeof opt_part, "--partition=%s", o.partition); args[n++] = opt_part; }
        if (o.account) { snprintf(opt_acct, sizeof opt_acct, "--account=%s", o.account); args[n++] = opt_acct; }
        if (o.time_limit) { snprintf(opt_time, sizeof opt_time, "--time=%s", o.time_limit); args[n++] = opt_time; }
        args[n++] = "--wrap";
        args[n++] = pass ? merge : task;
        args[n] = NULL;
        if (o.dry_run) { print_argv(args); continue; }
        free(out);
        if (!(out = slurm_client("submit", args))) {
            if (pass) fprintf(stderr, "bitflip slurm submit: the array job %s is submitted; scancel %s to undo\n", array_id, array_id);
            rc = EXIT_INFRA;
            goto out;
        }
        if (parse_job_id(out, pass ? merge_id : array_id) != 0) {
            fprintf(stderr, "bitflip slurm submit: sbatch printed '%s', not a job id\n", out);
            rc = EXIT_INFRA;
            goto out;
        }
    }
    if (o.dry_run) goto out;
    if ((rc = write_record(record, spec, o.shards, array_id, merge_id, dir, prefix, result)) != 0) goto out;
    printf("array_job %s\nmerge_job %s\nresult %s\n", array_id, merge_id, result);
    fprintf(stderr, "bitflip slurm: %lld shards; parts in %s/%s.part-I-of-%lld.json; 'bitflip slurm status %s'\n",
            o.shards, dir, prefix, o.shards, record);
out:
    free(prefix);
    free(task);
    free(merge);
    free(out);
    free(a_array);
    free(a_log);
    free(a_mlog);
    free(a_name);
    free(a_mname);
    free(a_dep);
    free(a_cpus);
    free(result);
    free(record);
    return rc;
}

/* The record submit wrote; NULL after saying why. */
static json_t *read_record(const char *cmd, int argc, char **argv)
{
    json_error_t je;
    if (argc != 2 || argv[1][0] == '-') {
        usage_error("slurm", "usage: bitflip slurm %s DIR/PREFIX.slurm.json (written by 'bitflip slurm submit')", cmd);
        return NULL;
    }
    json_t *j = json_load_file(argv[1], 0, &je);
    if (!j) { fprintf(stderr, "bitflip slurm %s: %s: %s\n", cmd, argv[1], je.text); return NULL; }
    if (!json_is_string(json_object_get(j, "array_job")) || !json_is_string(json_object_get(j, "merge_job")) ||
        !json_is_string(json_object_get(j, "dir")) || !json_is_string(json_object_get(j, "prefix")) ||
        !json_is_string(json_object_get(j, "result")) || !json_is_integer(json_object_get(j, "shards")) ||
        json_integer_value(json_object_get(j, "shards")) < 1 || json_integer_value(json_object_get(j, "shards")) > 100000) {
        fprintf(stderr, "bitflip slurm %s: %s is not a record of 'bitflip slurm submit' (array_job, merge_job, dir, prefix, "
                        "result, shards)\n", cmd, argv[1]);
        json_decref(j);
        return NULL;
    }
    return j;
}

static const char *jstr(const json_t *j, const char *k) { return json_string_value(json_object_get(j, k)); }

static int slurm_status(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { fputs(help, stdout); return EXIT_OK; }
    json_t *r = read_record("status", argc, argv);
    if (!r) return EXIT_USAGE;
    long long n = json_integer_value(json_object_get(r, "shards")), done = 0;
    char path[PATH_MAX], jobs[80];
    sbuf missing = {0};
    sb_add(&missing, "");
    for (long long i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s.part-%lld-of-%lld.json", jstr(r, "dir"), jstr(r, "prefix"), i, n);
        if (access(path, F_OK) == 0) done++;
        else if (missing.n < 200) {
            char k[32];
            snprintf(k, sizeof k, "%s%lld", missing.n ? "," : "", i);
            sb_add(&missing, k);
        } else if (!strstr(missing.s ? missing.s : "", "...")) sb_add(&missing, ",...");
    }
    char *miss = sb_take(&missing);
    printf("parts %lld/%lld done%s%s%s\n", done, n, miss && *miss ? " (missing: " : "", miss && *miss ? miss : "",
           miss && *miss ? ")" : "");
    free(miss);
    snprintf(jobs, sizeof jobs, "%s,%s", jstr(r, "array_job"), jstr(r, "merge_job"));
    char *args[] = {"squeue", "-h", "--states=all", "-j", jobs, "-o", "%i %T %r", NULL};
    char *out = NULL;
    if (run_capture(args, &out) == 0 && out) {
        if (*out) printf("jobs (squeue):\n%s", out);
        else printf("jobs: no longer known to squeue (finished a while ago)\n");
    } else printf("jobs: squeue did not answer\n");
    free(out);
    int have = access(jstr(r, "result"), F_OK) == 0;
    printf("result %s%s\n", jstr(r, "result"), have ? "" : " (not yet)");
    json_decref(r);
    return have ? EXIT_OK : EXIT_INFRA;
}

static int slurm_cancel(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { fputs(help, stdout); return EXIT_OK; }
    json_t *r = read_record("cancel", argc, argv);
    if (!r) return EXIT_USAGE;
    char *args[] = {"scancel", (char *)jstr(r, "array_job"), (char *)jstr(r, "merge_job"), NULL};
    char *out = slurm_client("cancel", args);
    int rc = out ? EXIT_OK : EXIT_INFRA;
    if (out) printf("canceled jobs %s and %s\n", args[1], args[2]);
    free(out);
    json_decref(r);
    return rc;
}

int cmd_slurm(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(help, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (!strcmp(argv[1], "submit")) return slurm_submit(argc - 1, argv + 1);
    if (!strcmp(argv[1], "status")) return slurm_status(argc - 1, argv + 1);
    if (!strcmp(argv[1], "cancel")) return slurm_cancel(argc - 1, argv + 1);
    return usage_error("slurm", "no subcommand '%s' (submit, status or cancel)", argv[1]);
}
