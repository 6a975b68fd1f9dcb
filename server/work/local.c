/* The local executor (work/executor.h): chunks on a pool of cfg.workers
 * worker processes (proc.h, worker.c), kept full, given out by the fair
 * queue (work/fairq.h). A chunk is sent down a worker's stdin; its progress
 * and outcome come back on its stdout.
 *
 * A worker that dies (a signal, or a malformed message that gets it killed)
 * costs its chunk: the death is recorded in the store first (store.h,
 * "worker deaths"), then the chunk runs again on a new worker; at the
 * campaign's second death the campaign fails with the reasons. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "work/executor.h"
#include "work/fairq.h"
#include "work/proc.h"
#include "work/scheduler.h"

/* A worker that died without running anything is started again after this,
 * not at once: one that cannot start at all must not spin the loop. */
#define RESPAWN_MS 1000

typedef struct bfd_local bfd_local;

typedef struct wproc {
    bfd_local *s;             /* NULL once the executor let go of it */
    int slot;
    uv_process_t proc;
    uv_pipe_t in, out;
    int open;                 /* handles not yet closed */
    int exited, closing;
    bfd_fq_job *cur;          /* the chunk's campaign, NULL when idle */
    int chunk;
    int stop_sent;
    int bad;                  /* sent something malformed: killed */
    char bad_why[160];
    bfd_frame_reader rd;
    char rbuf[65536];
} wproc;

struct bfd_local {
    bfd *d;
    bfd_fairq *q;
    wproc **w;                /* cfg.workers slots; NULL: to be (re)started */
    int n_w;
    bfd_outbox *out;
    uv_timer_t *respawn;      /* its own allocation: it is closed after the executor is gone */
};

static void dispatch(bfd_local *s);

/* --- talking to a worker */

typedef struct wreq {
    uv_write_t req;
    char *buf;
} wreq;

static void on_written(uv_write_t *req, int status)
{
    (void)status;   /* a worker that is gone is noticed by its exit */
    wreq *w = (wreq *)req;
    free(w->buf);
    free(w);
}

static int send_json(wproc *w, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    size_t n = 0;
    wreq *r = calloc(1, sizeof *r);
    char *f = text ? bfd_frame_encode(text, strlen(text), &n) : NULL;
    free(text);
    if (!r || !f || w->closing) goto fail;
    r->buf = f;
    uv_buf_t b = uv_buf_init(f, (unsigned)n);
    if (uv_write(&r->req, (uv_stream_t *)&w->in, &b, 1, on_written) != 0) goto fail;
    return 0;
fail:
    free(f);
    free(r);
    return -1;
}

static void store_inflight(bfd_local *s, const char *id, int delta)
{
    bf_error err = {0};
    if (bfd_campaign_inflight(s->d->store, id, delta, &err) != BF_OK)
        bfd_log(s->d, "error", "campaign %s: counting its chunks in flight: %s", id, err.msg);
}

/* The worker's chunk is over (reported, or the worker died): the campaign
 * has one chunk fewer running; `requeue` puts the chunk back to run again. */
static void settle(bfd_local *s, wproc *w, int requeue)
{
    bfd_fq_job *e = w->cur;
    w->cur = NULL;
    w->stop_sent = 0;
    int left = bfd_fairq_settle(s->q, e, w->chunk, requeue);   /* e may be freed now */
    /* nothing more of this campaign to run: its model and golden pass go */
    if ((left & BFD_FQ_EXHAUSTED) && !w->exited) send_json(w, json_pack("{s:s}", "t", "drop"));
}

static void kill_bad(wproc *w, const char *what)
{
    if (w->bad) return;
    w->bad = 1;
    snprintf(w->bad_why, sizeof w->bad_why, "%.150s", what);
    uv_read_stop((uv_stream_t *)&w->out);
    if (!w->exited) uv_process_kill(&w->proc, SIGKILL);
}

/* One frame from a worker: hostile input, checked field by field. */
static void on_frame(bfd_local *s, wproc *w, const char *payload, size_t len)
{
    json_t *j = json_loadb(payload, len, 0, NULL);
    const char *t = json_string_value(json_object_get(j, "t"));
    json_t *chunk = json_object_get(j, "chunk");
    bfd_fq_job *e = w->cur;
    if (!t || !json_is_integer(chunk)) { kill_bad(w, "not a message"); goto out; }
    if (!e || json_integer_value(chunk) != w->chunk) { kill_bad(w, "news of a chunk it was not running"); goto out; }
    if (!strcmp(t, "progress")) {
        json_t *done = json_object_get(j, "done"), *oc = json_object_get(j, "outcomes");
        if (!json_is_integer(done) || json_integer_value(done) < 0 || json_array_size(oc) != BF_OUTCOME_COUNT) {
            kill_bad(w, "a malformed progress report");
            goto out;
        }
        bfd_msg *m = bfd_msg_new(BFD_MSG_PROGRESS, e->spec.id, w->chunk);
        if (!m) goto out;
        m->done = json_integer_value(done);
        for (int k = 0; k < BF_OUTCOME_COUNT; k++) {
            json_t *v = json_array_get(oc, (size_t)k);
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                free(m);
                kill_bad(w, "a malformed progress report");
                goto out;
            }
            m->outcomes[k] = json_integer_value(v);
        }
        /* the estimates, if sent: 9 rates and half-widths in [0, 1], or null (not a target) */
        json_t *iv = json_object_get(j, "iv");
        if (json_array_size(iv) == 9) {
            double *dst[3] = {m->iv.critical, m->iv.due, m->iv.half_width};
            m->iv.set = 1;
            for (int k = 0; k < 9; k++) {
                json_t *v = json_array_get(iv, (size_t)k);
                double x = json_is_number(v) ? json_number_value(v) : NAN;
                if (!json_is_null(v) && !(x >= 0 && x <= 1)) m->iv.set = 0;
                dst[k / 3][k % 3] = x;
            }
        }
        if (!e->over) bfd_outbox_post(s->out, m);
        else free(m);
    } else if (!strcmp(t, "done")) {
        const char *res = json_string_value(json_object_get(j, "result"));
        json_t *secs = json_object_get(j, "seconds");
        if (!res || !json_is_number(secs)) { kill_bad(w, "a malformed result"); goto out; }
        bfd_msg *m = bfd_msg_new(BFD_MSG_DONE, e->spec.id, w->chunk);
        if (m && !(m->result_json = strdup(res))) { free(m); m = NULL; }
        if (m) m->seconds = json_number_value(secs);
        store_inflight(s, e->spec.id, -1);
        if (!e->over) bfd_outbox_post(s->out, m);
        else bfd_msg_free(m);
        settle(s, w, !m);   /* out of memory keeping it: run it again rather than lose it */
        dispatch(s);
    } else if (!strcmp(t, "failed")) {
        const char *why = json_string_value(json_object_get(j, "error"));
        if (!why) { kill_bad(w, "a malformed failure"); goto out; }
        bfd_msg *m = bfd_msg_new(BFD_MSG_FAILED, e->spec.id, w->chunk);
        if (m && !(m->error = strndup(why, 2000))) { free(m); m = NULL; }
        store_inflight(s, e->spec.id, -1);
        if (m && !e->over) {   /* one failure fails the campaign */
            bfd_outbox_post(s->out, m);
            bfd_fairq_fail(s->q, e);
        } else {
            bfd_msg_free(m);   /* out of memory telling it: the chunk runs again, and fails again */
        }
        settle(s, w, !m);
        dispatch(s);
    } else if (!strcmp(t, "stopped")) {
        /* asked for (cancel), or a stop meant for the chunk before (see worker.c): then run it again */
        store_inflight(s, e->spec.id, -1);
        settle(s, w, !e->over);
        dispatch(s);
    } else {
        kill_bad(w, "a message of an unknown type");
    }
out:
    json_decref(j);
}

static void on_bytes(bfd_local *s, wproc *w, const char *buf, size_t n)
{
    bf_error err = {0};
    if (w->bad) return;
    if (bfd_frame_feed(&w->rd, buf, n, &err) != BF_OK) {
        kill_bad(w, err.status == BF_ERANGE ? "an oversized frame" : "a frame the daemon could not keep");
        return;
    }
    char *p = NULL;
    size_t len = 0;
    int got;
    while (!w->bad && (got = bfd_frame_next(&w->rd, &p, &len)) == 1) {
        on_frame(s, w, p, len);
        free(p);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    wproc *w = h->data;
    buf->base = w->rbuf;
    buf->len = sizeof w->rbuf;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    wproc *w = st->data;
    if (n < 0) {   /* EOF or an error: the worker is exiting; its exit says how */
        uv_read_stop(st);
        return;
    }
    if (n > 0 && w->s) on_bytes(w->s, w, buf->base, (size_t)n);
}

/* --- a worker's life */

static void on_closed(uv_handle_t *h)
{
    wproc *w = h->data;
    if (--w->open > 0) return;
    bfd_frame_reader_free(&w->rd);
    free(w);
}

static void close_worker(wproc *w)
{
    if (w->closing) return;
    w->closing = 1;
    uv_close((uv_handle_t *)&w->proc, on_closed);
    uv_close((uv_handle_t *)&w->in, on_closed);
    uv_close((uv_handle_t *)&w->out, on_closed);
}

/* What the worker wrote before it died counts: a chunk reported done just
 * before an unrelated crash is done. The pipe is non-blocking. */
static void drain_output(bfd_local *s, wproc *w)
{
    uv_os_fd_t fd;
    if (w->bad || uv_fileno((uv_handle_t *)&w->out, &fd) != 0) return;
    for (int i = 0; i < 1024 && !w->bad; i++) {
        ssize_t n = read(fd, w->rbuf, sizeof w->rbuf);
        if (n <= 0) break;
        on_bytes(s, w, w->rbuf, (size_t)n);
    }
}

static void died(bfd_local *s, wproc *w, int64_t status, int sig)
{
    bfd_fq_job *e = w->cur;
    char how[200], reason[400];
    if (w->bad) snprintf(how, sizeof how, "worker sent %s and was killed", w->bad_why);
    else {
        char r[160];
        bfd_exit_reason(status, sig, s->d->cfg.job_memory, r, sizeof r);
        snprintf(how, sizeof how, "worker %s", r);
    }
    snprintf(reason, sizeof reason, "chunk %d: %s", w->chunk, how);
    bfd_metrics_worker_death(s->d->metrics);
    if (e->over) {   /* canceled or failed already: nothing to decide */
        store_inflight(s, e->spec.id, -1);
        settle(s, w, 0);
        return;
    }
    /* recorded before deciding: if the daemon dies next, the count stands */
    int deaths = 2;
    char *reasons = NULL;
    bf_error err = {0};
    if (bfd_campaign_death(s->d->store, e->spec.id, reason, 0, &deaths, &reasons, &err) != BF_OK) {
        bfd_log(s->d, "error", "campaign %s: recording a worker death failed (%s): failing it rather than risk a crash loop",
                e->spec.id, err.msg);
        deaths = 2;
    }
    bfd_log(s->d, "warn", "campaign %s: %s (death %d; a campaign fails at 2)", e->spec.id, reason, deaths);
    if (deaths >= 2) {
        bfd_msg *m = bfd_msg_new(BFD_MSG_FAILED, e->spec.id, w->chunk);
        char *text = malloc(strlen(reasons ? reasons : reason) + 64);
        if (text) sprintf(text, "crashed twice, so it is not run again: %s", reasons ? reasons : reason);
        if (m) m->error = text;
        else free(text);
        bfd_outbox_post(s->out, m);
        bfd_fairq_fail(s->q, e);
        settle(s, w, 0);
    } else {
        settle(s, w, 1);
    }
    free(reasons);
}

static bf_status spawn_worker(bfd_local *s, int slot, bf_error *err);
static void on_respawn(uv_timer_t *t);

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    wproc *w = p->data;
    bfd_local *s = w->s;
    w->exited = 1;
    if (!s) { close_worker(w); return; }
    s->w[w->slot] = NULL;
    drain_output(s, w);
    int ran = w->cur != NULL;
    if (w->cur) died(s, w, status, sig);
    else {
        char r[160];
        bfd_exit_reason(status, sig, s->d->cfg.job_memory, r, sizeof r);
        bfd_log(s->d, "warn", "an idle worker %s; starting another in %d ms", r, RESPAWN_MS);
    }
    int slot = w->slot;
    close_worker(w);
    bf_error err = {0};
    /* one that ran a chunk started fine before: replace it now */
    if (ran && spawn_worker(s, slot, &err) != BF_OK) bfd_log(s->d, "error", "%s", err.msg);
    if (!s->w[slot] && !uv_is_active((uv_handle_t *)s->respawn)) uv_timer_start(s->respawn, on_respawn, RESPAWN_MS, 0);
    dispatch(s);
}

static void on_respawn(uv_timer_t *t)
{
    bfd_local *s = t->data;
    bf_error err = {0};
    for (int i = 0; i < s->n_w; i++)
        if (!s->w[i] && spawn_worker(s, i, &err) != BF_OK) bfd_log(s->d, "error", "%s", err.msg);
    dispatch(s);
}

static bf_status spawn_worker(bfd_local *s, int slot, bf_error *err)
{
    wproc *w = calloc(1, sizeof *w);
    if (!w) return bf_error_set(err, BF_ENOMEM, "out of memory starting a worker");
    w->s = s;
    w->slot = slot;
    w->rd.max = BFD_FRAME_MAX;
    w->proc.data = w->in.data = w->out.data = w;
    uv_pipe_init(s->d->loop, &w->in, 0);
    uv_pipe_init(s->d->loop, &w->out, 0);
    w->open = 3;
    const char *args[] = {"--worker", NULL};
    bf_status st = bfd_proc_spawn(s->d->loop, &w->proc, on_exit_cb, args, &w->in, &w->out, s->d->cfg.job_memory, s->d->cfg.limits_arg, err);
    if (st == BF_OK && uv_read_start((uv_stream_t *)&w->out, on_alloc, on_read) != 0) {
        uv_process_kill(&w->proc, SIGKILL);
        w->s = NULL;   /* its exit only closes it */
        uv_timer_start(s->respawn, on_respawn, RESPAWN_MS, 0);
        return bf_error_set(err, BF_EIO, "cannot read from a worker");
    }
    if (st != BF_OK) {
        close_worker(w);
        uv_timer_start(s->respawn, on_respawn, RESPAWN_MS, 0);
        return st;
    }
    s->w[slot] = w;
    return BF_OK;
}

/* Gives every idle worker a chunk, fairly, while there are chunks to give. */
static void dispatch(bfd_local *s)
{
    for (int i = 0; i < s->n_w; i++) {
        wproc *w = s->w[i];
        if (!w || w->exited || w->bad || w->cur) continue;
        int idx;
        bfd_fq_job *e = bfd_fairq_pick(s->q, &idx);
        if (!e) return;
        const bfd_job_spec *js = &e->spec;
        json_t *run = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i}", "t", "run", "id", js->id, "tenant",
                                js->tenant, "spec", js->spec_json, "model", js->model_path, "dataset", js->dataset_path,
                                "errmap", js->errmap_path, "trials", js->trials_dir, "n_chunks", js->n_chunks, "chunk", idx);
        /* in flight before it is sent: a daemon that dies from here on counts it */
        store_inflight(s, js->id, +1);
        if (send_json(w, run) != 0) {   /* not taken: the queue is as it was */
            store_inflight(s, js->id, -1);
            bfd_log(s->d, "error", "campaign %s: cannot send chunk %d to a worker (out of memory?)", js->id, idx);
            return;
        }
        w->cur = e;
        w->chunk = idx;
        if (bfd_fairq_take(s->q, e)) {
            bfd_msg *m = bfd_msg_new(BFD_MSG_STARTED, js->id, idx);
            if (m) m->seconds = bfd_now() - js->queued_at;
            bfd_outbox_post(s->out, m);
        }
    }
}

/* --- the executor's ops */

static void on_timer_closed(uv_handle_t *h)
{
    free(h);
}

static void local_stop(void *self)
{
    bfd_local *s = self;
    if (!s) return;
    for (int i = 0; s->w && i < s->n_w; i++) {
        wproc *w = s->w[i];
        if (!w) continue;
        /* its chunk is simply redone at the next start: a clean stop is no death */
        w->s = NULL;
        w->cur = NULL;
        if (!w->exited) uv_process_kill(&w->proc, SIGKILL);
        close_worker(w);
    }
    if (s->respawn) {
        s->respawn->data = NULL;
        uv_close((uv_handle_t *)s->respawn, on_timer_closed);
    }
    free(s->w);
    bfd_fairq_free(s->q);
    free(s);
}

static bf_status local_start(bfd *d, bfd_outbox *out, void **self, bf_error *err)
{
    bf_status st = BF_OK;
    bfd_local *s = calloc(1, sizeof *s);
    *self = NULL;
    if (!s) return bf_error_set(err, BF_ENOMEM, "out of memory");
    s->d = d;
    s->out = out;
    s->n_w = d->cfg.workers > 0 ? d->cfg.workers : 1;
    s->w = calloc((size_t)s->n_w, sizeof *s->w);
    s->respawn = calloc(1, sizeof *s->respawn);
    if (!s->w || !s->respawn) {
        free(s->respawn);
        s->respawn = NULL;
        st = bf_error_set(err, BF_ENOMEM, "out of memory");
        goto out;
    }
    uv_timer_init(d->loop, s->respawn);
    s->respawn->data = s;
    if ((st = bfd_fairq_new(d->cfg.tenant_running, &s->q, err)) != BF_OK) goto out;
    for (int i = 0; i < s->n_w; i++) {
        if ((st = spawn_worker(s, i, err)) != BF_OK) {
            bf_error_prefix(err, "worker %d", i);
            goto out;
        }
    }
    *self = s;
    s = NULL;
out:
    local_stop(s);
    return st;
}

static bf_status local_submit(void *self, const bfd_job_spec *js, const int *pending, size_t n_pending, int started,
                              bf_error *err)
{
    bfd_local *s = self;
    bf_status st = bfd_fairq_add(s->q, js, pending, n_pending, started, err);
    if (st == BF_OK) dispatch(s);
    return st;
}

static void local_cancel(void *self, const char *id)
{
    bfd_local *s = self;
    bfd_fq_job *e = bfd_fairq_cancel(s->q, id);   /* NULL: nothing of it runs (any more) */
    for (int i = 0; e && i < s->n_w; i++) {
        wproc *w = s->w[i];
        if (w && w->cur == e && !w->stop_sent && !w->exited) {
            w->stop_sent = 1;
            uv_process_kill(&w->proc, SIGUSR1);   /* the engine stops within a trial; the worker says "stopped" */
        }
    }
    dispatch(s);   /* a tenant's slot may have freed */
}

static void local_load(void *self, int *running, int *queued)
{
    bfd_local *s = self;
    bfd_fairq_load(s->q, running, queued);
}

const bfd_executor_ops bfd_local_executor = {
    .name = "local",
    .start = local_start,
    .submit = local_submit,
    .cancel = local_cancel,
    .load = local_load,
    .stop = local_stop,
};
