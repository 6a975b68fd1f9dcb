/* bitflipd — the scheduler and its worker processes.
 *
 * A campaign is cut into n_chunks chunks: chunk i runs the trials t with
 * t % n_chunks == i (a shard, in the engine's terms), so finished chunks
 * merge exactly into the result an uncut run gives, in any order. Workers
 * take chunks fairly across tenants: the tenant with the fewest chunks
 * running goes first (ties: the one served longest ago), and a tenant has at
 * most `tenant_running` campaigns started at once. Within a tenant, started
 * campaigns finish before new ones start.
 *
 * Workers are processes (proc.h, worker.c), a pool of cfg.workers kept
 * full: a chunk is sent down a worker's stdin, its progress and outcome come
 * back on its stdout. Everything here runs on the loop thread. What the
 * campaigns need to hear (a campaign started, a chunk's progress, a chunk
 * done with its result document, failed or stopped) goes into an outbox and
 * a uv_async_send, so the loop handles it on its next turn, never from
 * inside the scheduler's own callbacks.
 *
 * A worker that dies (a signal, or a malformed message that gets it killed)
 * costs its chunk: the death is recorded in the store first (store.h,
 * "worker deaths"), then the chunk runs again on a new worker; at the
 * campaign's second death the campaign fails with the reasons. */
#ifndef BFD_SCHEDULER_H
#define BFD_SCHEDULER_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "bitflip/api/limits.h"
#include "bitflip/campaign.h"
#include "bitflip/error.h"

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

typedef enum bfd_msg_kind {
    BFD_MSG_STARTED = 0,      /* the campaign's first chunk was taken */
    BFD_MSG_PROGRESS,         /* a chunk's trials so far */
    BFD_MSG_DONE,             /* a chunk finished: result_json */
    BFD_MSG_FAILED,           /* a chunk failed: error (the campaign fails) */
    BFD_MSG_STOPPED           /* a chunk was stopped by cancel or shutdown */
} bfd_msg_kind;

typedef struct bfd_msg {
    bfd_msg_kind kind;
    char id[33];
    int chunk;
    int64_t done;                         /* PROGRESS, DONE: trials of this chunk done */
    int64_t outcomes[BF_OUTCOME_COUNT];   /* ... and their outcomes */
    char *result_json;                    /* DONE: the chunk's result document */
    char *error;                          /* FAILED */
    double seconds;                       /* DONE: the chunk's run time (-1: not known); STARTED: time queued */
    struct bfd_msg *next;
} bfd_msg;

void bfd_msg_free(bfd_msg *list);

struct bfd;
/* Starts d->cfg.workers worker processes on d->loop; news goes to d->wake. */
bf_status bfd_sched_new(struct bfd *d, bfd_sched **out, bf_error *err);
/* A clean stop: kills the workers (their chunks are redone at the next
 * start, which does not count this as a death), frees. */
void bfd_sched_free(bfd_sched *s);

/* Queues the chunks `pending` of a campaign (a resumed one may have fewer
 * than all). `started` says the campaign ran before (a restart). */
bf_status bfd_sched_add(bfd_sched *s, const bfd_job_spec *spec, const int *pending, size_t n_pending, int started,
                        bf_error *err);
/* Drops the campaign's queued chunks and stops its running ones (within a
 * trial); they report STOPPED. */
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
typedef void (*bfd_progress_fn)(void *user, int64_t done, const int64_t outcomes[BF_OUTCOME_COUNT]);
/* Runs chunk `idx` of the campaign: *result_json is the chunk's result
 * document (malloc'd). BF_ECANCELED when `cancel` was raised. */
bf_status bfd_job_run(bfd_worker_cache *wc, const bfd_job_spec *js, int idx, const int *cancel,
                      bfd_progress_fn progress, void *user, char **result_json, bf_error *err);

#endif
