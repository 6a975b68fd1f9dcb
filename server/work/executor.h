/* bitflipd — executors: what runs a campaign's chunks.
 *
 * The scheduler (work/scheduler.h) is the daemon's one door to them: it
 * picks an executor by --executor NAME from a table of these ops, owns the
 * outbox (work/outbox.h) and forwards to the executor it started. Two exist:
 *   local  (work/local.c)  a pool of worker processes on this machine,
 *                          chunks given out by the fair queue (work/fairq.h);
 *   slurm  (work/slurm.c)  each campaign one Slurm array job, chunk i its
 *                          task i (work/slurm.h).
 * Adding one (Kubernetes Indexed Jobs, AWS Batch arrays) is a new file with
 * a table of these ops and a line in the scheduler's table; campaigns,
 * checkpoints and results do not change, because every executor reports
 * through the same messages.
 *
 * The contract every executor keeps. All calls on the loop thread.
 *  - start: sets itself up on d->loop; messages go to `out` (which outlives
 *    it). Fails with a message naming the setting at fault.
 *  - submit: the chunks `pending` of the campaign (the spec is copied) are to
 *    run; `started` says the campaign ran before (a restart). Each chunk ends
 *    in exactly one DONE, FAILED or STOPPED message, or none if the campaign
 *    is canceled or fails first; STARTED is posted once, when the campaign
 *    first runs (not for a restarted one).
 *  - cancel: nothing more of the campaign is reported but the STOPPED of
 *    chunks already running (an executor that cannot say, Slurm, reports
 *    nothing more at all).
 *  - load: chunks running and chunks waiting, over all campaigns.
 *  - stop: stops and frees; chunks still running are not a failure (a
 *    restart runs or re-attaches to them). Callbacks still pending on the
 *    loop must post nothing after it. */
#ifndef BFD_EXECUTOR_H
#define BFD_EXECUTOR_H

#include <stddef.h>

#include "bitflip/error.h"
#include "work/outbox.h"

struct bfd;
struct bfd_job_spec;

typedef struct bfd_executor_ops {
    const char *name;         /* the --executor value */
    bf_status (*start)(struct bfd *d, bfd_outbox *out, void **self, bf_error *err);
    bf_status (*submit)(void *self, const struct bfd_job_spec *js, const int *pending, size_t n_pending, int started,
                        bf_error *err);
    void (*cancel)(void *self, const char *id);
    void (*load)(void *self, int *running, int *queued);
    void (*stop)(void *self);
} bfd_executor_ops;

extern const bfd_executor_ops bfd_local_executor;   /* work/local.c */
extern const bfd_executor_ops bfd_slurm_executor;   /* work/slurm.c */

#endif
