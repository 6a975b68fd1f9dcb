/* The scheduler: chunks of campaigns, fair across tenants, on a pool of
 * worker processes; what they report goes to an outbox for the loop. */
#include "work/scheduler.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "work/proc.h"
#include "work/slurm.h"

/* A worker that died without running anything is started again after this,
 * not at once: one that cannot start at all must not spin the loop. */
#define RESPAWN_MS 1000

typedef struct entry {
    char *id, *tenant, *spec_json, *model_path, *dataset_path, *errmap_path, *trials_dir;   /* errmap_path "": none */
    int n_chunks;
    double queued_at;
    int *pending;             /* chunk indices still to run, taken from `head` */
    size_t n_pending, head;
    int running;              /* chunks on workers now */
    int started;
    int over;                 /* canceled or failed: nothing of it runs again */
    struct entry *next;
} entry;

typedef struct wproc {
    bfd_sched *s;             /* NULL once the scheduler let go of it */
    int slot;
    uv_process_t proc;
    uv_pipe_t in, out;
    int open;                 /* handles not yet closed */
    int exited, closing;
    entry *cur;               /* the chunk's campaign, NULL when idle */
    int chunk;
    int stop_sent;
    int bad;                  /* sent something malformed: killed */
    char bad_why[160];
    bfd_frame_reader rd;
    char rbuf[65536];
} wproc;

typedef struct served {
    char *tenant;
    uint64_t last;
} served;

struct bfd_sched {
    bfd *d;
    entry *head;              /* in submission order */
    wproc **w;                /* cfg.workers slots; NULL: to be (re)started */
    int n_w;
    int tenant_running;
    uv_async_t *wake;
    bfd_msg *out_head, *out_tail;
    served *served;           /* when each tenant was last given a chunk */
    size_t n_served;
    uint64_t clock;
    uv_timer_t *respawn;      /* its own allocation: it is closed after the scheduler is gone */
    bfd_slurm *slurm;         /* --executor slurm: campaigns go there, no workers run here */
};

static void dispatch(bfd_sched *s);

void bfd_msg_free(bfd_msg *m)
{
    while (m) {
        bfd_msg *n = m->next;
        free(m->result_json);
        free(m->error);
        free(m);
        m = n;
    }
}

static void entry_free(entry *e)
{
    if (!e) return;
    free(e->id);
    free(e->tenant);
    free(e->spec_json);
    free(e->model_path);
    free(e->dataset_path);
    free(e->errmap_path);
    free(e->trials_dir);
    free(e->pending);
    free(e);
}

static void unlink_entry(bfd_sched *s, entry *e)
{
    for (entry **p = &s->head; *p; p = &(*p)->next)
        if (*p == e) { *p = e->next; break; }
    entry_free(e);
}

/* A message the loop must see; dropped only when out of memory (then the
 * campaign's state is repaired at the next restart). */
static void post(bfd_sched *s, bfd_msg *m)
{
    if (!m) return;
    m->next = NULL;
    if (s->out_tail) s->out_tail->next = m;
    else s->out_head = m;
    s->out_tail = m;
    uv_async_send(s->wake);
}

static bfd_msg *msg_new(bfd_msg_kind kind, const char *id, int chunk)
{
    bfd_msg *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->kind = kind;
    snprintf(m->id, sizeof m->id, "%s", id);
    m->chunk = chunk;
    return m;
}

static uint64_t last_served(bfd_sched *s, const char *tenant)
{
    for (size_t i = 0; i < s->n_served; i++)
        if (!strcmp(s->served[i].tenant, tenant)) return s->served[i].last;
    return 0;
}

static void mark_served(bfd_sched *s, const char *tenant)
{
    s->clock++;
    for (size_t i = 0; i < s->n_served; i++)
        if (!strcmp(s->served[i].tenant, tenant)) { s->served[i].last = s->clock; return; }
    served *n = realloc(s->served, (s->n_served + 1) * sizeof *n);
    if (!n) return;   /* fairness degrades to first-come; nothing breaks */
    s->served = n;
    n[s->n_served].tenant = strdup(tenant);
    if (!n[s->n_served].tenant) return;
    n[s->n_served++].last = s->clock;
}

/* The next chunk's campaign, fairly; NULL if nothing may run now. */
static entry *pick(bfd_sched *s)
{
    entry *best = NULL;
    int best_running = 0;
    uint64_t best_served = 0;
    for (entry *e = s->head; e; e = e->next) {
        if (e->head == e->n_pending) continue;
        int t_running = 0, t_started = 0;
        entry *first = NULL;   /* the tenant's campaign to serve: started ones first, then the oldest */
        for (entry *f = s->head; f; f = f->next) {
            if (strcmp(f->tenant, e->tenant)) continue;
            t_running += f->running;
            t_started += f->started;
            if (f->head < f->n_pending && (!first || (f->started && !first->started))) first = f;
        }
        if (first != e) continue;   /* each tenant is weighed once, through its first campaign */
        if (!e->started && t_started >= s->tenant_running) continue;
        uint64_t sv = last_served(s, e->tenant);
        if (!best || t_running < best_running || (t_running == best_running && sv < best_served)) {
            best = e;
            best_running = t_running;
            best_served = sv;
        }
    }
    return best;
}

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

static void store_inflight(bfd_sched *s, const char *id, int delta)
{
    bf_error err = {0};
    if (bfd_campaign_inflight(s->d->store, id, delta, &err) != BF_OK)
        bfd_log(s->d, "error", "campaign %s: counting its chunks in flight: %s", id, err.msg);
}

/* The worker's chunk is over (reported, or the worker died): the campaign
 * has one chunk fewer running; `requeue` puts the chunk back to run again. */
static void settle(bfd_sched *s, wproc *w, int requeue)
{
    entry *e = w->cur;
    w->cur = NULL;
    w->stop_sent = 0;
    e->running--;
    if (requeue && !e->over) e->pending[--e->head] = w->chunk;   /* the slot before head is a taken one */
    /* nothing more of this campaign to run: its model and golden pass go */
    if (e->head == e->n_pending && !w->exited) send_json(w, json_pack("{s:s}", "t", "drop"));
    if (e->running == 0 && e->head == e->n_pending) unlink_entry(s, e);
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
static void on_frame(bfd_sched *s, wproc *w, const char *payload, size_t len)
{
    json_t *j = json_loadb(payload, len, 0, NULL);
    const char *t = json_string_value(json_object_get(j, "t"));
    json_t *chunk = json_object_get(j, "chunk");
    entry *e = w->cur;
    if (!t || !json_is_integer(chunk)) { kill_bad(w, "not a message"); goto out; }
    if (!e || json_integer_value(chunk) != w->chunk) { kill_bad(w, "news of a chunk it was not running"); goto out; }
    if (!strcmp(t, "progress")) {
        json_t *done = json_object_get(j, "done"), *oc = json_object_get(j, "outcomes");
        if (!json_is_integer(done) || json_integer_value(done) < 0 || json_array_size(oc) != BF_OUTCOME_COUNT) {
            kill_bad(w, "a malformed progress report");
            goto out;
        }
        bfd_msg *m = msg_new(BFD_MSG_PROGRESS, e->id, w->chunk);
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
        if (!e->over) post(s, m);
        else free(m);
    } else if (!strcmp(t, "done")) {
        const char *res = json_string_value(json_object_get(j, "result"));
        json_t *secs = json_object_get(j, "seconds");
        if (!res || !json_is_number(secs)) { kill_bad(w, "a malformed result"); goto out; }
        bfd_msg *m = msg_new(BFD_MSG_DONE, e->id, w->chunk);
        if (m && !(m->result_json = strdup(res))) { free(m); m = NULL; }
        if (m) m->seconds = json_number_value(secs);
        store_inflight(s, e->id, -1);
        if (!e->over) post(s, m);
        else bfd_msg_free(m);
        settle(s, w, !m);   /* out of memory keeping it: run it again rather than lose it */
        dispatch(s);
    } else if (!strcmp(t, "failed")) {
        const char *why = json_string_value(json_object_get(j, "error"));
        if (!why) { kill_bad(w, "a malformed failure"); goto out; }
        bfd_msg *m = msg_new(BFD_MSG_FAILED, e->id, w->chunk);
        if (m && !(m->error = strndup(why, 2000))) { free(m); m = NULL; }
        store_inflight(s, e->id, -1);
        if (m && !e->over) {   /* one failure fails the campaign */
            post(s, m);
            e->over = 1;
            e->head = e->n_pending;
        } else {
            bfd_msg_free(m);   /* out of memory telling it: the chunk runs again, and fails again */
        }
        settle(s, w, !m);
        dispatch(s);
    } else if (!strcmp(t, "stopped")) {
        /* asked for (cancel), or a stop meant for the chunk before (see worker.c): then run it again */
        store_inflight(s, e->id, -1);
        settle(s, w, !e->over);
        dispatch(s);
    } else {
        kill_bad(w, "a message of an unknown type");
    }
out:
    json_decref(j);
}

static void on_bytes(bfd_sched *s, wproc *w, const char *buf, size_t n)
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
static void drain_output(bfd_sched *s, wproc *w)
{
    uv_os_fd_t fd;
    if (w->bad || uv_fileno((uv_handle_t *)&w->out, &fd) != 0) return;
    for (int i = 0; i < 1024 && !w->bad; i++) {
        ssize_t n = read(fd, w->rbuf, sizeof w->rbuf);
        if (n <= 0) break;
        on_bytes(s, w, w->rbuf, (size_t)n);
    }
}

static void died(bfd_sched *s, wproc *w, int64_t status, int sig)
{
    entry *e = w->cur;
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
        store_inflight(s, e->id, -1);
        settle(s, w, 0);
        return;
    }
    /* recorded before deciding: if the daemon dies next, the count stands */
    int deaths = 2;
    char *reasons = NULL;
    bf_error err = {0};
    if (bfd_campaign_death(s->d->store, e->id, reason, 0, &deaths, &reasons, &err) != BF_OK) {
        bfd_log(s->d, "error", "campaign %s: recording a worker death failed (%s): failing it rather than risk a crash loop",
                e->id, err.msg);
        deaths = 2;
    }
    bfd_log(s->d, "warn", "campaign %s: %s (death %d; a campaign fails at 2)", e->id, reason, deaths);
    if (deaths >= 2) {
        bfd_msg *m = msg_new(BFD_MSG_FAILED, e->id, w->chunk);
        char *text = malloc(strlen(reasons ? reasons : reason) + 64);
        if (text) sprintf(text, "crashed twice, so it is not run again: %s", reasons ? reasons : reason);
        if (m) m->error = text;
        else free(text);
        post(s, m);
        e->over = 1;
        e->head = e->n_pending;
        settle(s, w, 0);
    } else {
        settle(s, w, 1);
    }
    free(reasons);
}

static bf_status spawn_worker(bfd_sched *s, int slot, bf_error *err);
static void on_respawn(uv_timer_t *t);

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    wproc *w = p->data;
    bfd_sched *s = w->s;
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
    bfd_sched *s = t->data;
    bf_error err = {0};
    for (int i = 0; i < s->n_w; i++)
        if (!s->w[i] && spawn_worker(s, i, &err) != BF_OK) bfd_log(s->d, "error", "%s", err.msg);
    dispatch(s);
}

static bf_status spawn_worker(bfd_sched *s, int slot, bf_error *err)
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
static void dispatch(bfd_sched *s)
{
    for (int i = 0; i < s->n_w; i++) {
        wproc *w = s->w[i];
        if (!w || w->exited || w->bad || w->cur) continue;
        entry *e = pick(s);
        if (!e) return;
        int idx = e->pending[e->head++];
        json_t *run = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i}", "t", "run", "id", e->id, "tenant",
                                e->tenant, "spec", e->spec_json, "model", e->model_path, "dataset", e->dataset_path,
                                "errmap", e->errmap_path, "trials", e->trials_dir, "n_chunks", e->n_chunks, "chunk", idx);
        /* in flight before it is sent: a daemon that dies from here on counts it */
        store_inflight(s, e->id, +1);
        if (send_json(w, run) != 0) {
            store_inflight(s, e->id, -1);
            e->head--;
            bfd_log(s->d, "error", "campaign %s: cannot send chunk %d to a worker (out of memory?)", e->id, idx);
            return;
        }
        w->cur = e;
        w->chunk = idx;
        e->running++;
        mark_served(s, e->tenant);
        if (!e->started) {
            e->started = 1;
            bfd_msg *m = msg_new(BFD_MSG_STARTED, e->id, idx);
            if (m) m->seconds = bfd_now() - e->queued_at;
            post(s, m);
        }
    }
}

/* --- the loop's calls */

static void on_timer_closed(uv_handle_t *h)
{
    free(h);
}

bf_status bfd_sched_new(bfd *d, bfd_sched **out, bf_error *err)
{
    bfd_sched *s = calloc(1, sizeof *s);
    if (!s) return bf_error_set(err, BF_ENOMEM, "out of memory");
    s->d = d;
    s->wake = &d->wake;
    s->tenant_running = d->cfg.tenant_running > 0 ? d->cfg.tenant_running : 1;
    s->n_w = d->cfg.workers > 0 ? d->cfg.workers : 1;
    s->w = calloc((size_t)s->n_w, sizeof *s->w);
    s->respawn = calloc(1, sizeof *s->respawn);
    if (!s->w || !s->respawn) {
        free(s->w);
        free(s->respawn);
        free(s);
        return bf_error_set(err, BF_ENOMEM, "out of memory");
    }
    uv_timer_init(d->loop, s->respawn);
    s->respawn->data = s;
    const char *ex = d->cfg.executor ? d->cfg.executor : "local";
    if (strcmp(ex, "local") && strcmp(ex, "slurm")) {
        bfd_sched_free(s);
        return bf_error_set(err, BF_EINVAL, "--executor must be local or slurm, got '%s'", ex);
    }
    if (!strcmp(ex, "slurm")) {
        s->n_w = 0;
        bf_status st = bfd_slurm_new(d, &s->slurm, err);
        if (st != BF_OK) bfd_sched_free(s);
        else *out = s;
        return st;
    }
    for (int i = 0; i < s->n_w; i++) {
        if (spawn_worker(s, i, err) != BF_OK) {
            bfd_sched_free(s);
            return bf_error_prefix(err, "worker %d", i);
        }
    }
    *out = s;
    return BF_OK;
}

void bfd_sched_free(bfd_sched *s)
{
    if (!s) return;
    bfd_slurm_free(s->slurm);
    for (int i = 0; i < s->n_w; i++) {
        wproc *w = s->w[i];
        if (!w) continue;
        /* its chunk is simply redone at the next start: a clean stop is no death */
        w->s = NULL;
        w->cur = NULL;
        if (!w->exited) uv_process_kill(&w->proc, SIGKILL);
        close_worker(w);
    }
    bf_error err = {0};
    if (s->d->store && bfd_campaign_inflight_clear(s->d->store, &err) != BF_OK)
        bfd_log(s->d, "error", "clearing the chunks in flight: %s (the next start will count a death)", err.msg);
    s->respawn->data = NULL;
    uv_close((uv_handle_t *)s->respawn, on_timer_closed);
    free(s->w);
    while (s->head) unlink_entry(s, s->head);
    bfd_msg_free(s->out_head);
    for (size_t i = 0; i < s->n_served; i++) free(s->served[i].tenant);
    free(s->served);
    free(s);
}

static char *dup_or(const char *a, int *fail)
{
    char *s = strdup(a ? a : "");
    if (!s) *fail = 1;
    return s;
}

bf_status bfd_sched_add(bfd_sched *s, const bfd_job_spec *js, const int *pending, size_t n_pending, int started,
                        bf_error *err)
{
    if (!s) return bf_error_set(err, BF_ECANCELED, "the daemon is shutting down");
    if (s->slurm) return bfd_slurm_add(s->slurm, js, pending, n_pending, started, err);
    entry *e = calloc(1, sizeof *e);
    if (!e) return bf_error_set(err, BF_ENOMEM, "out of memory");
    int fail = 0;
    e->id = dup_or(js->id, &fail);
    e->tenant = dup_or(js->tenant, &fail);
    e->spec_json = dup_or(js->spec_json, &fail);
    e->model_path = dup_or(js->model_path, &fail);
    e->dataset_path = dup_or(js->dataset_path, &fail);
    e->errmap_path = dup_or(js->errmap_path, &fail);
    e->trials_dir = dup_or(js->trials_dir, &fail);
    e->pending = malloc((n_pending + 1) * sizeof *e->pending);
    if (fail || !e->pending) { entry_free(e); return bf_error_set(err, BF_ENOMEM, "out of memory"); }
    memcpy(e->pending, pending, n_pending * sizeof *pending);
    e->n_pending = n_pending;
    e->n_chunks = js->n_chunks;
    e->queued_at = js->queued_at;
    e->started = started;
    entry **p = &s->head;
    while (*p) p = &(*p)->next;
    *p = e;
    dispatch(s);
    return BF_OK;
}

void bfd_sched_cancel(bfd_sched *s, const char *id)
{
    if (!s) return;   /* shut down: nothing runs */
    if (s->slurm) { bfd_slurm_cancel(s->slurm, id); return; }
    for (entry *e = s->head; e; e = e->next) {
        if (strcmp(e->id, id)) continue;
        e->over = 1;
        e->head = e->n_pending;
        for (int i = 0; i < s->n_w; i++) {
            wproc *w = s->w[i];
            if (w && w->cur == e && !w->stop_sent && !w->exited) {
                w->stop_sent = 1;
                uv_process_kill(&w->proc, SIGUSR1);   /* the engine stops within a trial; the worker says "stopped" */
            }
        }
        if (e->running == 0) unlink_entry(s, e);
        break;
    }
    dispatch(s);   /* a tenant's slot may have freed */
}

bfd_msg *bfd_sched_take(bfd_sched *s)
{
    if (!s) return NULL;
    if (s->slurm) return bfd_slurm_take(s->slurm);
    bfd_msg *m = s->out_head;
    s->out_head = s->out_tail = NULL;
    return m;
}

void bfd_sched_load(bfd_sched *s, int *running, int *queued)
{
    *running = *queued = 0;
    if (!s) return;
    if (s->slurm) { bfd_slurm_load(s->slurm, running, queued); return; }
    for (entry *e = s->head; e; e = e->next) {
        *running += e->running;
        *queued += (int)(e->n_pending - e->head);
    }
}
