/* bitflipd — the scheduler: the daemon's one door to whatever runs
 * campaigns' chunks.
 *
 * A campaign is cut into n_chunks chunks: chunk i runs the trials t with
 * t % n_chunks == i (a shard, in the engine's terms), so finished chunks
 * merge exactly into the result an uncut run gives, in any order.
 *
 * The scheduler starts the executor --executor names (work/executor.h: local
 * worker processes with the fair queue across tenants, work/local.c and
 * work/fairq.h; or Slurm arrays, work/slurm.h), forwards campaigns and
 * cancels to it, and owns the one outbox (work/outbox.h) every executor
 * reports into: a campaign started, a chunk's progress, a chunk done with
 * its result document, failed or stopped. The loop takes those on its next
 * turn (bfd_sched_take), never from inside an executor's callbacks.
 * Everything here runs on the loop thread. */
#ifndef BFD_SCHEDULER_H
#define BFD_SCHEDULER_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "bitflip/api/limits.h"
#include "bitflip/campaign.h"
#include "bitflip/error.h"
#include "work/outbox.h"

typedef struct bfd_sched bfd_sched;

/* What a worker needs to run a campaign's chunks (copied by bfd_sched_add). */
typedef struct bfd_job_spec {
    const char *id;
    const char *tenant;
    const char *spec_json;    /* as stored; model and dataset are ids */
    const char *model_path;   /* blob paths */
    const char *dataset_path;
    const char *errmap_path;  /* a profiled campaign's error map blob, or NULL */
    const char *trials_dir;   /* per-trial records go to TRIALS_DIR/<chunk>.jsonl */
    int n_chunks;
    double queued_at;         /* for the queue-wait histogram */
} bfd_job_spec;

struct bfd;
/* Starts the executor d->cfg.executor names ("local" when NULL) on
 * d->loop; news goes to d->wake. BF_EINVAL for a name no executor has. */
bf_status bfd_sched_new(struct bfd *d, bfd_sched **out, bf_error *err);
/* A clean stop: the executor stops (local workers are killed and their
 * chunks redone at the next start, which does not count this as a death;
 * Slurm arrays run on), frees. */
void bfd_sched_free(bfd_sched *s);

/* Queues the chunks `pending` of a campaign (a resumed one may have fewer
 * than all). `started` says the campaign ran before (a restart). */
bf_status bfd_sched_add(bfd_sched *s, const bfd_job_spec *spec, const int *pending, size_t n_pending, int started,
                        bf_error *err);
/* Drops the campaign's queued chunks and stops its running ones (local: within a
 * trial, and they report STOPPED; Slurm: scancel, nothing more reported). */
void bfd_sched_cancel(bfd_sched *s, const char *id);
/* The outbox, oldest first (the caller frees it with bfd_msg_free). */
bfd_msg *bfd_sched_take(bfd_sched *s);
/* Chunks running and queued, over all campaigns (for /ready and logs). */
void bfd_sched_load(bfd_sched *s, int *running, int *queued);

/* job.c: a worker process's side. The cache keeps the last campaign's model,
 * dataset and engine state (its golden pass), since a worker usually takes
 * several chunks of one campaign in a row. */
typedef struct bfd_worker_cache bfd_worker_cache;
/* `lim`: the parsers' limits every load is held to (NULL: the defaults). */
bfd_worker_cache *bfd_worker_cache_new(const bf_limits *lim);
void bfd_worker_cache_free(bfd_worker_cache *wc);
/* Lets go of the campaign it holds (its last chunk has been taken). */
void bfd_worker_cache_drop(bfd_worker_cache *wc);
typedef void (*bfd_progress_fn)(void *user, int64_t done, const int64_t outcomes[BF_OUTCOME_COUNT], const bfd_intervals *iv);
/* Runs chunk `idx` of the campaign: *result_json is the chunk's result
 * document (malloc'd). BF_ECANCELED when `cancel` was raised. */
bf_status bfd_job_run(bfd_worker_cache *wc, const bfd_job_spec *js, int idx, const int *cancel,
                      bfd_progress_fn progress, void *user, char **result_json, bf_error *err);

#endif
