/* The Slurm executor (work/slurm.h), its loop side: arrays submitted,
 * polled and canceled through Slurm's own clients on libuv's thread pool,
 * a poll timer, and what they learn posted to the outbox. What the clients
 * are told and how their answers read is work/slurm_cmd.c. */
#define _GNU_SOURCE   /* pipe2 */
#include "work/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bitflip/api/atomic_file.h"
#include "work/slurm_cmd.h"

extern char **environ;

/* One campaign on the cluster. Fields above `posted` are set at add and
 * never change, so a work item on the thread pool may read them; the rest
 * belongs to the loop and is copied into a work item when one starts. */
typedef struct sjob {
    char *id, *spec_json, *model_path, *dataset_path, *trials_dir, *dir;
    char *model_id, *dataset_id;   /* what the result names, as a local campaign's does */
    char *errmap_path, *errmap_ref;   /* a profiled campaign's map: its blob, and "sha256:ID" (NULL: none) */
    int n_chunks;
    double queued_at;
    unsigned char *posted;    /* chunk's DONE posted (or checkpointed before) */
    int *submit;              /* chunks to submit when array_job is empty */
    size_t n_submit;
    char array_job[32];
    int started;              /* STARTED posted (or it ran before a restart) */
    int over;                 /* canceled, failed or done: nothing more is posted */
    int scancel;              /* the array is to be canceled (campaign canceled or failed) */
    int busy;                 /* a work item runs for it */
    struct sjob *next;
} sjob;

typedef struct bfd_slurm {
    bfd *d;
    uv_timer_t *timer;        /* its own allocation: closed after the executor is gone */
    sjob *head;
    bfd_outbox *out;          /* the scheduler's */
    struct swork *items;      /* in flight, to be told when the executor goes */
} bfd_slurm;

typedef enum { W_POLL, W_CANCEL } wkind;

typedef struct swork {
    uv_work_t req;
    bfd_slurm *sl;            /* NULL once the executor is gone */
    sjob *j;                  /* may be freed before the item: n_chunks is kept here */
    int n_chunks;
    wkind kind;
    /* inputs: the loop's state when the item started, and the settings */
    char array_job[32];
    unsigned char *posted;
    int *submit;
    size_t n_submit;
    char *bitflip, *partition, *account;
    char *limits;             /* the daemon's --limit, "k=v,k=v" (or "") */
    int64_t job_memory;
    /* outputs */
    char new_job[32];         /* submitted now */
    char **results;           /* per chunk: the part's document, NULL if not there */
    double *seconds;          /* per chunk with a result: its task's run time, or -1 if not known */
    int running;              /* Slurm says a task runs (or ran) */
    int lost;                 /* Slurm no longer knows the job and parts are missing: submit them again */
    char *error;              /* the campaign fails with this */
    char *note;               /* logged */
    struct swork *next;
} swork;

static char *xstrdup(const char *s, int *fail)
{
    char *p = strdup(s ? s : "");
    if (!p) *fail = 1;
    return p;
}


static void job_free(sjob *j)
{
    if (!j) return;
    free(j->id);
    free(j->spec_json);
    free(j->model_path);
    free(j->dataset_path);
    free(j->trials_dir);
    free(j->dir);
    free(j->model_id);
    free(j->dataset_id);
    free(j->errmap_path);
    free(j->errmap_ref);
    free(j->posted);
    free(j->submit);
    free(j);
}

static void unlink_job(bfd_slurm *sl, sjob *j)
{
    for (sjob **p = &sl->head; *p; p = &(*p)->next)
        if (*p == j) { *p = j->next; break; }
    job_free(j);
}

/* --- on the thread pool: Slurm's clients, files */

/* Runs argv (on PATH) with stdout into *out (malloc'd) and stderr into the
 * file errpath; its exit status, or -1 if it did not run. */
static int run_client(char *const argv[], const char *errpath, char **out)
{
    int fd[2], status = 0;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    *out = NULL;
    if (!buf) return -1;
    if (pipe2(fd, O_CLOEXEC) != 0) { free(buf); return -1; }
    if (posix_spawn_file_actions_init(&fa) != 0) { close(fd[0]); close(fd[1]); free(buf); return -1; }
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (e != 0) { close(fd[0]); free(buf); errno = e; return -1; }
    for (;;) {
        if (n + 1 >= cap) {
            char *p = cap < (1u << 24) ? realloc(buf, cap * 2) : NULL;
            if (!p) break;   /* more than 16 MiB from squeue: the rest is not read */
            buf = p;
            cap *= 2;
        }
        ssize_t k = read(fd[0], buf + n, cap - n - 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        n += (size_t)k;
    }
    buf[n] = 0;
    close(fd[0]);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) { free(buf); return -1; }
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* The last line of a small text file (a client's stderr, a task's log), for messages. */
static void last_line(const char *path, char *line, size_t n)
{
    char buf[8192];
    line[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        fseek(f, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    }
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = 0;
    while (k && (buf[k - 1] == '\n' || buf[k - 1] == '\r')) buf[--k] = 0;
    const char *s = strrchr(buf, '\n');
    s = s ? s + 1 : buf;
    size_t len = strlen(s) < n - 1 ? strlen(s) : n - 1;
    memcpy(line, s, len);
    line[len] = 0;
}

/* The spec the tasks run: the stored one with the blobs' paths for the ids. */
static bf_status write_task_spec(swork *w, const char *path, bf_error *err)
{
    json_t *spec = json_loads(w->j->spec_json, 0, NULL);
    if (!spec || json_object_set_new(spec, "model", json_string(w->j->model_path)) != 0 ||
        json_object_set_new(spec, "dataset", json_string(w->j->dataset_path)) != 0 ||
        (w->j->errmap_path &&
         json_object_set_new(json_object_get(spec, "faults"), "error_map", json_string(w->j->errmap_path)) != 0)) {
        json_decref(spec);
        return bf_error_set(err, BF_ENOMEM, "%s: out of memory making the tasks' spec", path);
    }
    char *text = json_dumps(spec, JSON_INDENT(2));
    json_decref(spec);
    /* the tasks run as the daemon's user; the directory is 0750 */
    bf_status st = text ? bf_write_atomic(path, text, strlen(text), 0640, err)
                        : bf_error_set(err, BF_ENOMEM, "%s: out of memory making the tasks' spec", path);
    free(text);
    return st;
}

static void submit(swork *w)
{
    sjob *j = w->j;
    char *spec = bfd_fmt("%s/spec.json", j->dir), *errf = bfd_fmt("%s/sbatch.err", j->dir), *out = NULL, *list = NULL;
    char **argv = NULL;
    bf_error err = {0};
    if (!spec || !errf || !(list = bfd_slurm_array_list(w->submit, w->n_submit))) goto oom;
    if ((mkdir(j->dir, 0750) != 0 && errno != EEXIST) || (mkdir(j->trials_dir, 0750) != 0 && errno != EEXIST)) {
        w->error = bfd_fmt("cannot make %s or %s: %s", j->dir, j->trials_dir, strerror(errno));
        goto out;
    }
    if (write_task_spec(w, spec, &err) != BF_OK) { w->error = bfd_fmt("cannot write the tasks' spec: %s", err.msg); goto out; }
    bfd_sbatch_in in = {.campaign_id = j->id, .dir = j->dir, .trials_dir = j->trials_dir, .bitflip = w->bitflip,
                        .spec_path = spec, .partition = w->partition, .account = w->account, .limits = w->limits,
                        .job_memory = w->job_memory, .n_chunks = j->n_chunks, .chunks = w->submit, .n_submit = w->n_submit};
    if (bfd_sbatch_argv(&in, &argv, &err) != BF_OK) goto oom;
    int rc = run_client(argv, errf, &out);
    if (rc != 0) {
        char line[300];
        last_line(errf, line, sizeof line);
        w->error = rc < 0 ? bfd_fmt("cannot run sbatch: %s (is Slurm installed on the daemon's host?)", strerror(errno))
                          : bfd_fmt("sbatch refused the array (exit %d): %s", rc, line);
        goto out;
    }
    if (!bfd_sbatch_job_id(out, w->new_job, sizeof w->new_job)) {
        w->error = bfd_fmt("sbatch printed '%.100s', not a job id", out);
        goto out;
    }
    char *rec = bfd_fmt("%s/array_job", j->dir), *text = bfd_fmt("%s\n", w->new_job);
    if (!rec || !text || bf_write_atomic(rec, text, strlen(text), 0640, &err) != BF_OK)
        w->note = bfd_fmt("cannot record the job id %s in %s/array_job (%s): a restart will submit the array again", w->new_job,
                      j->dir, rec && text ? err.msg : "out of memory");
    free(rec);
    free(text);
    w->note = w->note ? w->note : bfd_fmt("array job %s: chunks %s of %d", w->new_job, list, j->n_chunks);
    goto out;
oom:
    w->error = bfd_fmt("out of memory submitting the array");
out:
    free(spec);
    free(errf);
    free(list);
    bfd_argv_free(argv);
    free(out);
}

/* The chunk's part as a local worker's chunk document: the campaign names
 * the model and dataset by id, and "shard" (how it was computed) goes. */
static char *read_part(swork *w, int i, const char *path)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) { w->error = bfd_fmt("chunk %d's part %s does not parse: %s", i, path, je.text); return NULL; }
    json_t *sh = json_object_get(doc, "shard"), *camp = json_object_get(doc, "campaign");
    if (!json_is_object(sh) || json_integer_value(json_object_get(sh, "index")) != i ||
        json_integer_value(json_object_get(sh, "count")) != w->j->n_chunks || !json_is_object(camp)) {
        w->error = bfd_fmt("%s is not shard %d/%d of this campaign", path, i, w->j->n_chunks);
        json_decref(doc);
        return NULL;
    }
    json_object_del(doc, "shard");
    json_object_set_new(camp, "model", json_string(w->j->model_id));
    json_object_set_new(camp, "dataset", json_string(w->j->dataset_id));
    json_t *em = json_object_get(camp, "error_map");   /* the map as the spec names it, not the blob's path */
    if (w->j->errmap_ref && json_is_object(em)) json_object_set_new(em, "path", json_string(w->j->errmap_ref));
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!text) w->error = bfd_fmt("out of memory reading %s", path);
    return text;
}

/* Chunk i's task run time from its part-i.time, or -1 (a task submitted by
 * a daemon from before these files, or a file that is not one). */
static double part_seconds(const sjob *j, int i)
{
    char path[4200], text[128];
    snprintf(path, sizeof path, "%s/part-%d.time", j->dir, i);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    return bfd_slurm_task_seconds(text);
}

static int part_exists(const sjob *j, int i)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/part-%d.json", j->dir, i);
    return access(path, F_OK) == 0;
}

/* What squeue says of the array's tasks: any running, any ended without its part. */
static void check_queue(swork *w)
{
    sjob *j = w->j;
    char *errf = bfd_fmt("%s/squeue.err", j->dir), *out = NULL;
    char *argv[9];
    bfd_squeue_argv(w->array_job, argv);
    if (!errf) { w->error = bfd_fmt("out of memory polling Slurm"); return; }
    int rc = run_client(argv, errf, &out);
    if (rc != 0) {
        char line[300];
        last_line(errf, line, sizeof line);
        /* purged after MinJobAge: the tasks are over, so missing parts are lost */
        if (bfd_squeue_job_gone(rc, line)) w->lost = 1;
        else w->note = bfd_fmt("squeue -j %s failed (exit %d): %s; trying again", w->array_job, rc, line);
        free(errf);
        free(out);
        return;
    }
    int seen = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        int task;
        char state[40];
        if (!bfd_squeue_line(line, &task, state)) continue;
        seen = 1;
        if (bfd_slurm_state_ran(state)) w->running = 1;
        if (task < 0 || task >= j->n_chunks || w->posted[task] || w->results[task] || w->error) continue;
        if (bfd_slurm_state_alive(state)) continue;
        if (part_exists(j, task)) continue;   /* it finished since the scan: the next poll reads it */
        char log[4200], tail[300];
        snprintf(log, sizeof log, "%s/task-%d.log", j->dir, task);
        last_line(log, tail, sizeof tail);
        w->error = bfd_fmt("Slurm array task %s_%d ended %s%s%s (log: %s)", w->array_job, task, state, tail[0] ? ": " : "",
                       tail, log);
    }
    if (!seen) w->lost = 1;   /* known to Slurm no more */
    free(errf);
    free(out);
}

static void work_poll(swork *w)
{
    sjob *j = w->j;
    if (!w->array_job[0] && w->n_submit) {
        submit(w);
        if (w->error) return;
        snprintf(w->array_job, sizeof w->array_job, "%s", w->new_job);
    }
    int missing = 0;
    char path[4200];
    for (int i = 0; i < j->n_chunks && !w->error; i++) {
        if (w->posted[i]) continue;
        snprintf(path, sizeof path, "%s/part-%d.json", j->dir, i);
        if (access(path, F_OK) == 0) {
            w->results[i] = read_part(w, i, path);
            w->seconds[i] = part_seconds(j, i);
        } else {
            missing++;
        }
    }
    if (missing && !w->error && w->array_job[0]) check_queue(w);
}

static void work_cancel(swork *w)
{
    char *errf = bfd_fmt("%s/scancel.err", w->j->dir), *out = NULL;
    char *argv[3];
    bfd_scancel_argv(w->array_job, argv);
    if (!errf) return;
    int rc = run_client(argv, errf, &out);
    if (rc != 0) {
        char line[300];
        last_line(errf, line, sizeof line);
        w->note = bfd_fmt("scancel %s failed (exit %d): %s", w->array_job, rc, line);
    }
    free(errf);
    free(out);
}

static void on_work(uv_work_t *req)
{
    swork *w = req->data;
    if (w->kind == W_CANCEL) work_cancel(w);
    else work_poll(w);
}

/* --- back on the loop */

static void item_free(swork *w)
{
    if (w->results)
        for (int i = 0; i < w->n_chunks; i++) free(w->results[i]);
    free(w->results);
    free(w->seconds);
    free(w->posted);
    free(w->submit);
    free(w->bitflip);
    free(w->partition);
    free(w->account);
    free(w->limits);
    free(w->error);
    free(w->note);
    free(w);
}

static void start_item(bfd_slurm *sl, sjob *j, wkind kind);

static void after_work(uv_work_t *req, int status)
{
    swork *w = req->data;
    bfd_slurm *sl = w->sl;
    sjob *j = w->j;
    if (sl)
        for (swork **p = &sl->items; *p; p = &(*p)->next)
            if (*p == w) { *p = w->next; break; }
    j->busy = 0;
    if (!sl) {   /* the executor is gone; the arrays run on, the restart re-attaches */
        job_free(j);
        item_free(w);
        return;
    }
    bfd *d = sl->d;
    if (w->note) bfd_log(d, "info", "campaign %s: %s", j->id, w->note);
    if (status == 0 && w->kind == W_POLL) {
        if (w->new_job[0]) {
            snprintf(j->array_job, sizeof j->array_job, "%s", w->new_job);
            j->n_submit = 0;
            bf_error err = {0};
            if (bfd_campaign_set_job(d->store, j->id, j->array_job, &err) != BF_OK)
                bfd_log(d, "error", "campaign %s: recording its Slurm job %s: %s (DIR/array_job still has it)", j->id,
                        j->array_job, err.msg);
        }
        if (!j->over) {
            int any = 0;
            for (int i = 0; i < j->n_chunks; i++) any |= w->results[i] != NULL;
            if (!j->started && (w->running || any)) {
                bfd_msg *m = bfd_msg_new(BFD_MSG_STARTED, j->id, 0);
                if (m) m->seconds = bfd_now() - j->queued_at;
                bfd_outbox_post(sl->out, m);
                j->started = 1;
            }
            for (int i = 0; i < j->n_chunks; i++) {
                if (!w->results[i] || j->posted[i]) continue;
                json_t *doc = json_loads(w->results[i], 0, NULL), *sum = json_object_get(doc, "summary");
                bfd_msg *m = bfd_msg_new(BFD_MSG_DONE, j->id, i);
                if (m) {
                    m->result_json = w->results[i];
                    w->results[i] = NULL;
                    m->done = json_integer_value(json_object_get(sum, "trials"));
                    m->seconds = w->seconds[i];
                    for (int k = 0; k < BF_OUTCOME_COUNT; k++)
                        m->outcomes[k] = json_integer_value(
                            json_object_get(json_object_get(sum, "outcomes"), bf_outcome_name((bf_outcome)k)));
                }
                bfd_outbox_post(sl->out, m);   /* dropped when out of memory: the restart repairs the state */
                json_decref(doc);
                j->posted[i] = 1;
            }
            if (w->error) {
                bfd_msg *m = bfd_msg_new(BFD_MSG_FAILED, j->id, -1);
                if (m) m->error = strdup(w->error);
                bfd_outbox_post(sl->out, m);
                j->over = j->scancel = 1;
            } else if (w->lost) {
                /* Slurm forgot the array; what it did not write runs again */
                size_t n = 0;
                for (int i = 0; i < j->n_chunks; i++)
                    if (!j->posted[i]) j->submit[n++] = i;
                j->n_submit = n;
                bfd_log(d, "warn", "campaign %s: Slurm no longer knows job %s and %zu chunks have no part: submitting them again",
                        j->id, j->array_job, n);
                j->array_job[0] = 0;
            }
            int left = 0;
            for (int i = 0; i < j->n_chunks; i++) left += !j->posted[i];
            if (!left) j->over = 1;
        }
    }
    /* canceled while this item ran, or failed: what still runs is stopped */
    if (j->scancel && j->array_job[0] && w->kind == W_POLL) start_item(sl, j, W_CANCEL);
    if (j->over && !j->busy) unlink_job(sl, j);
    item_free(w);
}

static void start_item(bfd_slurm *sl, sjob *j, wkind kind)
{
    const bfd_config *c = &sl->d->cfg;
    swork *w = calloc(1, sizeof *w);
    int fail = !w;
    if (w) {
        w->sl = sl;
        w->j = j;
        w->n_chunks = j->n_chunks;
        w->kind = kind;
        snprintf(w->array_job, sizeof w->array_job, "%s", j->array_job);
        w->posted = malloc((size_t)j->n_chunks);
        w->results = calloc((size_t)j->n_chunks, sizeof *w->results);
        w->seconds = malloc((size_t)j->n_chunks * sizeof *w->seconds);
        w->submit = malloc((j->n_submit + 1) * sizeof *w->submit);
        w->bitflip = xstrdup(c->slurm_bitflip, &fail);
        w->partition = xstrdup(c->slurm_partition, &fail);
        w->account = xstrdup(c->slurm_account, &fail);
        w->limits = xstrdup(c->limits_arg, &fail);
        w->job_memory = c->job_memory;
        fail |= !w->posted || !w->results || !w->seconds || !w->submit;
    }
    if (fail) {
        if (w) item_free(w);
        bfd_log(sl->d, "error", "campaign %s: out of memory polling Slurm; trying again", j->id);
        return;
    }
    memcpy(w->posted, j->posted, (size_t)j->n_chunks);
    memcpy(w->submit, j->submit, j->n_submit * sizeof *w->submit);
    w->n_submit = j->n_submit;
    w->req.data = w;
    if (uv_queue_work(sl->d->loop, &w->req, on_work, after_work) != 0) {
        item_free(w);
        return;
    }
    j->busy = 1;
    w->next = sl->items;
    sl->items = w;
}

static void on_tick(uv_timer_t *t)
{
    bfd_slurm *sl = t->data;
    if (!sl) return;
    for (sjob *j = sl->head; j; j = j->next)
        if (!j->busy && !j->over) start_item(sl, j, W_POLL);
}

static void on_timer_closed(uv_handle_t *h)
{
    free(h);
}

static bf_status slurm_start(bfd *d, bfd_outbox *ob, void **out, bf_error *err)
{
    bfd_config *c = &d->cfg;
    if (!c->slurm_dir) {
        size_t n = strlen(c->data_dir) + 8;
        if (!(c->slurm_dir = malloc(n))) return bf_error_set(err, BF_ENOMEM, "out of memory");
        snprintf(c->slurm_dir, n, "%s/slurm", c->data_dir);
    }
    if (mkdir(c->slurm_dir, 0750) != 0 && errno != EEXIST)
        return bf_error_set(err, BF_EIO, "--slurm-dir %s: cannot make it: %s", c->slurm_dir, strerror(errno));
    /* the tasks need absolute paths: they run in other directories, on other nodes */
    char *abs = realpath(c->slurm_dir, NULL);
    if (!abs) return bf_error_set(err, BF_EIO, "--slurm-dir %s: %s", c->slurm_dir, strerror(errno));
    free(c->slurm_dir);
    c->slurm_dir = abs;
    if (!c->slurm_bitflip) {
        /* the bitflip beside this bitflipd: the same build, so the same results */
        char self[4096];
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        if (k <= 0) return bf_error_set(err, BF_EINVAL, "where is bitflip? give --slurm-bitflip PATH");
        self[k] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        size_t n = strlen(self) + 16;
        if (!(c->slurm_bitflip = malloc(n))) return bf_error_set(err, BF_ENOMEM, "out of memory");
        snprintf(c->slurm_bitflip, n, "%s/bitflip", self);
    }
    if (access(c->slurm_bitflip, X_OK) != 0)
        return bf_error_set(err, BF_EINVAL, "--slurm-bitflip %s: %s (the tasks run it: give the path of the bitflip CLI)",
                            c->slurm_bitflip, strerror(errno));
    bfd_slurm *sl = calloc(1, sizeof *sl);
    if (!sl || !(sl->timer = calloc(1, sizeof *sl->timer))) {
        free(sl);
        return bf_error_set(err, BF_ENOMEM, "out of memory");
    }
    sl->d = d;
    sl->out = ob;
    uv_timer_init(d->loop, sl->timer);
    sl->timer->data = sl;
    uint64_t every = (uint64_t)(c->slurm_poll_seconds * 1000);
    uv_timer_start(sl->timer, on_tick, every, every ? every : 1);
    bfd_log(d, "info", "executor slurm: each campaign an array of '%s run --shard' tasks%s%s%s%s, parts in %s", c->slurm_bitflip,
            c->slurm_partition ? ", partition " : "", c->slurm_partition ? c->slurm_partition : "",
            c->slurm_account ? ", account " : "", c->slurm_account ? c->slurm_account : "", c->slurm_dir);
    *out = sl;
    return BF_OK;
}

static void slurm_stop(void *self)
{
    bfd_slurm *sl = self;
    if (!sl) return;
    sl->timer->data = NULL;
    uv_timer_stop(sl->timer);
    uv_close((uv_handle_t *)sl->timer, on_timer_closed);
    for (swork *w = sl->items; w; w = w->next) w->sl = NULL;   /* their jobs go with them */
    sjob *j = sl->head;
    while (j) {
        sjob *n = j->next;
        if (!j->busy) job_free(j);
        j = n;
    }
    free(sl);
}

/* The array recorded for a campaign by an earlier run of the daemon: in the
 * store, or else in DIR/array_job, which the work item writes as soon as
 * sbatch answers (a daemon killed before the store heard of the job). */
static void read_recorded(bfd *d, sjob *j)
{
    bf_error err = {0};
    if (bfd_campaign_job(d->store, j->id, j->array_job, sizeof j->array_job, &err) != BF_OK)
        bfd_log(d, "error", "campaign %s: reading its Slurm job: %s", j->id, err.msg);
    if (j->array_job[0]) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/array_job", j->dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char buf[64] = "";
    if (fgets(buf, sizeof buf, f)) {
        size_t k = strspn(buf, "0123456789");
        if (k > 0 && k < sizeof j->array_job) { memcpy(j->array_job, buf, k); j->array_job[k] = 0; }
    }
    fclose(f);
}

static bf_status slurm_submit(void *self, const bfd_job_spec *js, const int *pending, size_t n_pending, int started,
                              bf_error *err)
{
    bfd_slurm *sl = self;
    sjob *j = calloc(1, sizeof *j);
    int fail = !j;
    if (j) {
        json_t *spec = json_loads(js->spec_json, 0, NULL);
        j->id = xstrdup(js->id, &fail);
        j->spec_json = xstrdup(js->spec_json, &fail);
        j->model_path = xstrdup(js->model_path, &fail);
        j->dataset_path = xstrdup(js->dataset_path, &fail);
        j->trials_dir = xstrdup(js->trials_dir, &fail);
        j->model_id = xstrdup(json_string_value(json_object_get(spec, "model")), &fail);
        j->dataset_id = xstrdup(json_string_value(json_object_get(spec, "dataset")), &fail);
        if (js->errmap_path) {
            j->errmap_path = xstrdup(js->errmap_path, &fail);
            j->errmap_ref = xstrdup(json_string_value(json_object_get(json_object_get(spec, "faults"), "error_map")), &fail);
        }
        json_decref(spec);
        j->dir = bfd_fmt("%s/%s", sl->d->cfg.slurm_dir, js->id);
        j->n_chunks = js->n_chunks;
        j->queued_at = js->queued_at;
        j->started = started;
        j->posted = malloc((size_t)(js->n_chunks > 0 ? js->n_chunks : 1));
        j->submit = malloc((size_t)(js->n_chunks > 0 ? js->n_chunks : 1) * sizeof *j->submit);
        fail |= !j->dir || !j->posted || !j->submit;
    }
    if (fail) { job_free(j); return bf_error_set(err, BF_ENOMEM, "out of memory"); }
    memset(j->posted, 1, (size_t)j->n_chunks);   /* checkpointed: not pending */
    for (size_t i = 0; i < n_pending; i++)
        if (pending[i] >= 0 && pending[i] < j->n_chunks) {
            j->posted[pending[i]] = 0;
            j->submit[j->n_submit++] = pending[i];
        }
    if (started) {
        read_recorded(sl->d, j);
        if (j->array_job[0]) bfd_log(sl->d, "info", "campaign %s: re-attaching to Slurm array job %s", j->id, j->array_job);
    }
    j->next = sl->head;
    sl->head = j;
    start_item(sl, j, W_POLL);   /* submit now, not at the next tick */
    return BF_OK;
}

static void slurm_cancel(void *self, const char *id)
{
    bfd_slurm *sl = self;
    for (sjob *j = sl->head; j; j = j->next) {
        if (strcmp(j->id, id) || j->over) continue;
        j->over = j->scancel = 1;
        if (j->busy) return;   /* its item ends it (and scancels what it submitted) */
        if (j->array_job[0]) start_item(sl, j, W_CANCEL);
        if (!j->busy) unlink_job(sl, j);
        return;
    }
}

static void slurm_load(void *self, int *running, int *queued)
{
    bfd_slurm *sl = self;
    *running = *queued = 0;
    for (sjob *j = sl->head; j; j = j->next) {
        int left = 0;
        for (int i = 0; i < j->n_chunks; i++) left += !j->posted[i];
        if (j->started) *running += left;
        else *queued += left;
    }
}

const bfd_executor_ops bfd_slurm_executor = {
    .name = "slurm",
    .start = slurm_start,
    .submit = slurm_submit,
    .cancel = slurm_cancel,
    .load = slurm_load,
    .stop = slurm_stop,
};
