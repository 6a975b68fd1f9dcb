/* The scheduler: chunks of campaigns, fair across tenants, on worker
 * threads; an outbox back to the loop. */
#include "work/scheduler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

typedef struct entry {
    char *id, *tenant, *spec_json, *model_path, *dataset_path, *trials_dir;
    int n_chunks;
    double queued_at;
    int *pending;             /* chunk indices still to run, taken from `head` */
    size_t n_pending, head;
    int running;              /* chunks on workers now */
    int started;
    struct entry *next;
} entry;

typedef struct worker {
    bfd_sched *s;
    pthread_t th;
    entry *cur;
    atomic_int cancel;
    bfd_worker_cache *wc;
    int joined;
} worker;

typedef struct served {
    char *tenant;
    uint64_t last;
} served;

struct bfd_sched {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    entry *head;              /* in submission order */
    worker *w;
    int n_w;
    int stopping;
    int tenant_running;
    uv_async_t *wake;
    bfd_msg *out_head, *out_tail;
    served *served;           /* when each tenant was last given a chunk */
    size_t n_served;
    uint64_t clock;
};

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

/* With the lock held. A message the loop must see; dropped only when out of
 * memory (then the campaign's state is repaired at the next restart). */
static void post_locked(bfd_sched *s, bfd_msg *m)
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

typedef struct progress_ctx {
    worker *w;
    int chunk;
} progress_ctx;

static void progress_chunk(void *user, int64_t done, const int64_t outcomes[BF_OUTCOME_COUNT])
{
    progress_ctx *p = user;
    bfd_msg *m = msg_new(BFD_MSG_PROGRESS, p->w->cur->id, p->chunk);
    if (!m) return;
    m->done = done;
    memcpy(m->outcomes, outcomes, sizeof m->outcomes);
    pthread_mutex_lock(&p->w->s->mu);
    post_locked(p->w->s, m);
    pthread_mutex_unlock(&p->w->s->mu);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    bfd_sched *s = w->s;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        entry *e = pick(s);
        if (!e) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        int idx = e->pending[e->head++];
        e->running++;
        mark_served(s, e->tenant);
        if (!e->started) {
            e->started = 1;
            bfd_msg *m = msg_new(BFD_MSG_STARTED, e->id, idx);
            if (m) m->seconds = bfd_now() - e->queued_at;
            post_locked(s, m);
        }
        w->cur = e;
        atomic_store(&w->cancel, 0);
        bfd_job_spec js = {.id = e->id, .tenant = e->tenant, .spec_json = e->spec_json, .model_path = e->model_path,
                           .dataset_path = e->dataset_path, .trials_dir = e->trials_dir, .n_chunks = e->n_chunks,
                           .queued_at = e->queued_at};
        pthread_mutex_unlock(&s->mu);

        /* the entry stays alive while running > 0, so js's strings do too */
        char *result = NULL;
        bf_error err = {0};
        progress_ctx pc = {w, idx};
        double t0 = bfd_mono();
        bf_status st = bfd_job_run(w->wc, &js, idx, &w->cancel, progress_chunk, &pc, &result, &err);
        double secs = bfd_mono() - t0;

        pthread_mutex_lock(&s->mu);
        /* nothing more of this campaign to run: its model and golden pass go */
        int last = e->head == e->n_pending;
        bfd_msg *m = msg_new(st == BF_OK ? BFD_MSG_DONE : st == BF_ECANCELED ? BFD_MSG_STOPPED : BFD_MSG_FAILED, e->id, idx);
        if (m) {
            m->seconds = secs;
            m->result_json = result;
            result = NULL;
            if (st != BF_OK && st != BF_ECANCELED) m->error = strdup(err.msg[0] ? err.msg : bf_strerror(st));
        }
        free(result);
        post_locked(s, m);
        w->cur = NULL;
        e->running--;
        if (st != BF_OK && st != BF_ECANCELED) e->head = e->n_pending;   /* one failure fails the campaign */
        if (e->running == 0 && e->head == e->n_pending) unlink_entry(s, e);
        pthread_cond_broadcast(&s->cv);   /* a tenant's slot may have freed */
        if (last) {
            pthread_mutex_unlock(&s->mu);
            bfd_worker_cache_drop(w->wc);
            pthread_mutex_lock(&s->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

bf_status bfd_sched_new(int workers, int tenant_running, uv_async_t *wake, bfd_sched **out, bf_error *err)
{
    bfd_sched *s = calloc(1, sizeof *s);
    if (!s) return bf_error_set(err, BF_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->wake = wake;
    s->tenant_running = tenant_running > 0 ? tenant_running : 1;
    s->w = calloc((size_t)workers, sizeof *s->w);
    if (!s->w) { bfd_sched_free(s); return bf_error_set(err, BF_ENOMEM, "out of memory"); }
    for (int i = 0; i < workers; i++) {
        worker *w = &s->w[i];
        w->s = s;
        w->wc = bfd_worker_cache_new();
        if (!w->wc) { bfd_sched_free(s); return bf_error_set(err, BF_ENOMEM, "out of memory"); }
        if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
            bfd_worker_cache_free(w->wc);
            w->wc = NULL;
            bfd_sched_free(s);
            return bf_error_set(err, BF_EIO, "cannot start worker thread %d", i);
        }
        s->n_w++;
    }
    *out = s;
    return BF_OK;
}

void bfd_sched_free(bfd_sched *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    for (int i = 0; i < s->n_w; i++) atomic_store(&s->w[i].cancel, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_w; i++) {
        pthread_join(s->w[i].th, NULL);
        bfd_worker_cache_free(s->w[i].wc);
    }
    free(s->w);
    while (s->head) unlink_entry(s, s->head);
    bfd_msg_free(s->out_head);
    for (size_t i = 0; i < s->n_served; i++) free(s->served[i].tenant);
    free(s->served);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
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
    entry *e = calloc(1, sizeof *e);
    if (!e) return bf_error_set(err, BF_ENOMEM, "out of memory");
    int fail = 0;
    e->id = dup_or(js->id, &fail);
    e->tenant = dup_or(js->tenant, &fail);
    e->spec_json = dup_or(js->spec_json, &fail);
    e->model_path = dup_or(js->model_path, &fail);
    e->dataset_path = dup_or(js->dataset_path, &fail);
    e->trials_dir = dup_or(js->trials_dir, &fail);
    e->pending = malloc((n_pending + 1) * sizeof *e->pending);
    if (fail || !e->pending) { entry_free(e); return bf_error_set(err, BF_ENOMEM, "out of memory"); }
    memcpy(e->pending, pending, n_pending * sizeof *pending);
    e->n_pending = n_pending;
    e->n_chunks = js->n_chunks;
    e->queued_at = js->queued_at;
    e->started = started;
    pthread_mutex_lock(&s->mu);
    entry **p = &s->head;
    while (*p) p = &(*p)->next;
    *p = e;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return BF_OK;
}

void bfd_sched_cancel(bfd_sched *s, const char *id)
{
    if (!s) return;   /* shut down: nothing runs */
    pthread_mutex_lock(&s->mu);
    for (entry *e = s->head; e; e = e->next) {
        if (strcmp(e->id, id)) continue;
        e->head = e->n_pending;
        for (int i = 0; i < s->n_w; i++)
            if (s->w[i].cur == e) atomic_store(&s->w[i].cancel, 1);
        if (e->running == 0) unlink_entry(s, e);
        break;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

bfd_msg *bfd_sched_take(bfd_sched *s)
{
    if (!s) return NULL;
    pthread_mutex_lock(&s->mu);
    bfd_msg *m = s->out_head;
    s->out_head = s->out_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    return m;
}

void bfd_sched_load(bfd_sched *s, int *running, int *queued)
{
    *running = *queued = 0;
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    for (entry *e = s->head; e; e = e->next) {
        *running += e->running;
        *queued += (int)(e->n_pending - e->head);
    }
    pthread_mutex_unlock(&s->mu);
}
