/* The fair queue (work/fairq.h). Tenants and campaigns are few (tens), so
 * a pick walks the list; what matters is that the order is the documented one. */
#include "work/fairq.h"

#include <stdlib.h>
#include <string.h>

typedef struct served {
    char *tenant;
    uint64_t last;
} served;

struct bfd_fairq {
    bfd_fq_job *head;         /* in submission order */
    int tenant_running;
    served *served;           /* when each tenant was last given a chunk */
    size_t n_served;
    uint64_t clock;
};

static void job_free(bfd_fq_job *j)
{
    if (!j) return;
    free((char *)j->spec.id);
    free((char *)j->spec.tenant);
    free((char *)j->spec.spec_json);
    free((char *)j->spec.model_path);
    free((char *)j->spec.dataset_path);
    free((char *)j->spec.errmap_path);
    free((char *)j->spec.trials_dir);
    free(j->pending);
    free(j);
}

static void unlink_job(bfd_fairq *q, bfd_fq_job *j)
{
    for (bfd_fq_job **p = &q->head; *p; p = &(*p)->next)
        if (*p == j) { *p = j->next; break; }
    job_free(j);
}

bf_status bfd_fairq_new(int tenant_running, bfd_fairq **out, bf_error *err)
{
    bfd_fairq *q = calloc(1, sizeof *q);
    *out = NULL;
    if (!q) return bf_error_set(err, BF_ENOMEM, "out of memory");
    q->tenant_running = tenant_running > 0 ? tenant_running : 1;
    *out = q;
    return BF_OK;
}

void bfd_fairq_free(bfd_fairq *q)
{
    if (!q) return;
    while (q->head) unlink_job(q, q->head);
    for (size_t i = 0; i < q->n_served; i++) free(q->served[i].tenant);
    free(q->served);
    free(q);
}

static char *dup_or(const char *a, int *fail)
{
    char *s = strdup(a ? a : "");
    if (!s) *fail = 1;
    return s;
}

bf_status bfd_fairq_add(bfd_fairq *q, const bfd_job_spec *js, const int *pending, size_t n_pending, int started,
                        bf_error *err)
{
    bfd_fq_job *j = calloc(1, sizeof *j);
    if (!j) return bf_error_set(err, BF_ENOMEM, "out of memory");
    int fail = 0;
    j->spec.id = dup_or(js->id, &fail);
    j->spec.tenant = dup_or(js->tenant, &fail);
    j->spec.spec_json = dup_or(js->spec_json, &fail);
    j->spec.model_path = dup_or(js->model_path, &fail);
    j->spec.dataset_path = dup_or(js->dataset_path, &fail);
    j->spec.errmap_path = dup_or(js->errmap_path, &fail);
    j->spec.trials_dir = dup_or(js->trials_dir, &fail);
    j->spec.n_chunks = js->n_chunks;
    j->spec.queued_at = js->queued_at;
    j->pending = malloc((n_pending + 1) * sizeof *j->pending);
    if (fail || !j->pending) {
        job_free(j);
        return bf_error_set(err, BF_ENOMEM, "out of memory");
    }
    if (n_pending) memcpy(j->pending, pending, n_pending * sizeof *pending);
    j->n_pending = n_pending;
    j->started = started;
    bfd_fq_job **p = &q->head;
    while (*p) p = &(*p)->next;
    *p = j;
    return BF_OK;
}

static uint64_t last_served(const bfd_fairq *q, const char *tenant)
{
    for (size_t i = 0; i < q->n_served; i++)
        if (!strcmp(q->served[i].tenant, tenant)) return q->served[i].last;
    return 0;
}

static void mark_served(bfd_fairq *q, const char *tenant)
{
    q->clock++;
    for (size_t i = 0; i < q->n_served; i++)
        if (!strcmp(q->served[i].tenant, tenant)) { q->served[i].last = q->clock; return; }
    served *n = realloc(q->served, (q->n_served + 1) * sizeof *n);
    if (!n) return;   /* fairness degrades to first-come; nothing breaks */
    q->served = n;
    n[q->n_served].tenant = strdup(tenant);
    if (!n[q->n_served].tenant) return;
    n[q->n_served++].last = q->clock;
}

bfd_fq_job *bfd_fairq_pick(bfd_fairq *q, int *chunk)
{
    bfd_fq_job *best = NULL;
    int best_running = 0;
    uint64_t best_served = 0;
    for (bfd_fq_job *e = q->head; e; e = e->next) {
        if (e->head == e->n_pending) continue;
        int t_running = 0, t_started = 0;
        bfd_fq_job *first = NULL;   /* the tenant's campaign to serve: started ones first, then the oldest */
        for (bfd_fq_job *f = q->head; f; f = f->next) {
            if (strcmp(f->spec.tenant, e->spec.tenant)) continue;
            t_running += f->running;
            t_started += f->started;
            if (f->head < f->n_pending && (!first || (f->started && !first->started))) first = f;
        }
        if (first != e) continue;   /* each tenant is weighed once, through its first campaign */
        if (!e->started && t_started >= q->tenant_running) continue;
        uint64_t sv = last_served(q, e->spec.tenant);
        if (!best || t_running < best_running || (t_running == best_running && sv < best_served)) {
            best = e;
            best_running = t_running;
            best_served = sv;
        }
    }
    if (best) *chunk = best->pending[best->head];
    return best;
}

int bfd_fairq_take(bfd_fairq *q, bfd_fq_job *j)
{
    j->head++;
    j->running++;
    mark_served(q, j->spec.tenant);
    int first = !j->started;
    j->started = 1;
    return first;
}

int bfd_fairq_settle(bfd_fairq *q, bfd_fq_job *j, int chunk, int requeue)
{
    j->running--;
    if (requeue && !j->over) j->pending[--j->head] = chunk;   /* the slot before head is a taken one */
    int flags = j->head == j->n_pending ? BFD_FQ_EXHAUSTED : 0;
    if (j->running == 0 && j->head == j->n_pending) {
        unlink_job(q, j);
        flags |= BFD_FQ_FREED;
    }
    return flags;
}

void bfd_fairq_fail(bfd_fairq *q, bfd_fq_job *j)
{
    (void)q;
    j->over = 1;
    j->head = j->n_pending;
}

bfd_fq_job *bfd_fairq_cancel(bfd_fairq *q, const char *id)
{
    for (bfd_fq_job *j = q->head; j; j = j->next) {
        if (strcmp(j->spec.id, id)) continue;
        j->over = 1;
        j->head = j->n_pending;
        if (j->running == 0) {
            unlink_job(q, j);
            return NULL;
        }
        return j;
    }
    return NULL;
}

void bfd_fairq_load(const bfd_fairq *q, int *running, int *queued)
{
    *running = *queued = 0;
    for (const bfd_fq_job *j = q->head; j; j = j->next) {
        *running += j->running;
        *queued += (int)(j->n_pending - j->head);
    }
}
