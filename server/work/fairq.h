/* bitflipd — the fair queue: which campaign's chunk a free worker takes next.
 *
 * A campaign enters with the chunk indices it still has to run. A free
 * worker is given a chunk of the tenant with the fewest chunks running now
 * (ties: the tenant served longest ago, then the tenant whose campaign was
 * queued first); within a tenant, campaigns that started run before new ones
 * start, oldest first; a tenant has at most `tenant_running` campaigns
 * started at once (one that started and still has chunks running counts).
 * A campaign's chunks are taken in the order given; a chunk put back
 * (its worker died) is taken next.
 *
 * Nothing here knows about processes, pipes or the loop: the local executor
 * (work/local.c) asks and reports, and tests/server/test_fairq.c checks the
 * order by hand. All calls on one thread. */
#ifndef BFD_FAIRQ_H
#define BFD_FAIRQ_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"
#include "work/scheduler.h"

typedef struct bfd_fairq bfd_fairq;

/* One campaign in the queue. The executor reads these fields; only the
 * bfd_fairq_* calls change them. */
typedef struct bfd_fq_job {
    bfd_job_spec spec;        /* owned copies; errmap_path "" when none */
    int *pending;             /* chunk indices, taken from `head` on */
    size_t n_pending, head;
    int running;              /* chunks taken and not yet settled */
    int started;              /* a chunk was taken (or it ran before a restart) */
    int over;                 /* canceled or failed: nothing of it runs again */
    struct bfd_fq_job *next;
} bfd_fq_job;

/* tenant_running < 1 is taken as 1. */
bf_status bfd_fairq_new(int tenant_running, bfd_fairq **out, bf_error *err);
/* Frees the queue and every campaign still in it. */
void bfd_fairq_free(bfd_fairq *q);

/* Queues a campaign (the spec's strings are copied) with the chunks
 * `pending`, in that order; `started` says it ran before (a restart), so it
 * does not wait for its tenant's turn to start. */
bf_status bfd_fairq_add(bfd_fairq *q, const bfd_job_spec *js, const int *pending, size_t n_pending, int started,
                        bf_error *err);

/* The campaign whose chunk should run next, fairly, with the chunk in
 * *chunk; NULL if none may run now. Takes nothing: call bfd_fairq_take once
 * the chunk is handed over (a hand-over that fails changes nothing). */
bfd_fq_job *bfd_fairq_pick(bfd_fairq *q, int *chunk);
/* The picked chunk is running. Returns 1 if it is the campaign's first
 * chunk ever taken (the caller reports that it started), else 0. */
int bfd_fairq_take(bfd_fairq *q, bfd_fq_job *j);

/* What bfd_fairq_settle says about the campaign afterwards. */
enum {
    BFD_FQ_EXHAUSTED = 1,     /* none of its chunks is left to take */
    BFD_FQ_FREED = 2          /* nothing runs either: it left the queue, j is freed */
};
/* A running chunk of j is over: reported, or its worker died. With
 * `requeue` (and j not over) it goes back to be taken next. Returns
 * BFD_FQ_* flags. */
int bfd_fairq_settle(bfd_fairq *q, bfd_fq_job *j, int chunk, int requeue);
/* j failed: no more of its chunks are taken; running ones are settled as usual. */
void bfd_fairq_fail(bfd_fairq *q, bfd_fq_job *j);
/* Cancels the campaign `id`: nothing more of it is taken. Returns it if
 * chunks of it still run (the caller stops them, and settles them as they
 * stop); NULL if it is gone (freed now, or never there). */
bfd_fq_job *bfd_fairq_cancel(bfd_fairq *q, const char *id);

/* Chunks running and chunks waiting, over all campaigns. */
void bfd_fairq_load(const bfd_fairq *q, int *running, int *queued);

#endif
