/* The scheduler (work/scheduler.h): an executor from the table, and the
 * outbox it reports into. */
#include "work/scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "work/executor.h"

/* --executor NAME: the first is the default. */
static const bfd_executor_ops *const executors[] = {&bfd_local_executor, &bfd_slurm_executor};
#define N_EXECUTORS (sizeof executors / sizeof executors[0])

struct bfd_sched {
    bfd *d;
    const bfd_executor_ops *ops;
    void *ex;                 /* the executor's own state */
    bfd_outbox out;
};

static void clear_inflight(bfd *d)
{
    bf_error err = {0};
    if (d->store && bfd_campaign_inflight_clear(d->store, &err) != BF_OK)
        bfd_log(d, "error", "clearing the chunks in flight: %s (the next start will count a death)", err.msg);
}

bf_status bfd_sched_new(bfd *d, bfd_sched **out, bf_error *err)
{
    bf_status st = BF_OK;
    const char *name = d->cfg.executor ? d->cfg.executor : executors[0]->name;
    const bfd_executor_ops *ops = NULL;
    *out = NULL;
    for (size_t i = 0; i < N_EXECUTORS; i++)
        if (!strcmp(executors[i]->name, name)) ops = executors[i];
    if (!ops) return bf_error_set(err, BF_EINVAL, "--executor must be local or slurm, got '%s'", name);
    bfd_sched *s = calloc(1, sizeof *s);
    if (!s) return bf_error_set(err, BF_ENOMEM, "out of memory");
    s->d = d;
    s->ops = ops;
    bfd_outbox_init(&s->out, &d->wake);
    if ((st = ops->start(d, &s->out, &s->ex, err)) != BF_OK) {
        clear_inflight(d);   /* as a stop would: workers that did start were killed */
        bfd_outbox_clear(&s->out);
        free(s);
        return st;
    }
    *out = s;
    return BF_OK;
}

void bfd_sched_free(bfd_sched *s)
{
    if (!s) return;
    s->ops->stop(s->ex);
    /* chunks that were running are redone at the next start, not counted as deaths */
    clear_inflight(s->d);
    bfd_outbox_clear(&s->out);
    free(s);
}

bf_status bfd_sched_add(bfd_sched *s, const bfd_job_spec *js, const int *pending, size_t n_pending, int started,
                        bf_error *err)
{
    if (!s) return bf_error_set(err, BF_ECANCELED, "the daemon is shutting down");
    return s->ops->submit(s->ex, js, pending, n_pending, started, err);
}

void bfd_sched_cancel(bfd_sched *s, const char *id)
{
    if (!s) return;   /* shut down: nothing runs */
    s->ops->cancel(s->ex, id);
}

bfd_msg *bfd_sched_take(bfd_sched *s)
{
    return s ? bfd_outbox_take(&s->out) : NULL;
}

void bfd_sched_load(bfd_sched *s, int *running, int *queued)
{
    *running = *queued = 0;
    if (s) s->ops->load(s->ex, running, queued);
}
