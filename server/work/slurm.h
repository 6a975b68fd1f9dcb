/* bitflipd — the Slurm executor (--executor slurm): a campaign's chunks
 * run as the tasks of one Slurm array job instead of on local workers.
 *
 * Chunk i is array task i, which runs 'bitflip run --local --shard i/N' on
 * the campaign's spec (its model and dataset as the blobs' paths), writing
 * the chunk's result document to SLURM_DIR/<campaign>/part-i.json and its
 * per-trial records to the data dir's trials/<campaign>/i.jsonl and the
 * run's start and end times to part-i.time, each by rename, so a file that
 * exists is whole. The data dir and --slurm-dir must
 * therefore be paths every node sees (a shared file system).
 *
 * The daemon polls (--slurm-poll-seconds): a new part becomes the same DONE
 * message a local worker's chunk gives, so checkpoints, merging, progress
 * (chunks done of total), events and results are the local ones; a task that
 * Slurm reports failed fails the campaign with the tail of its log. sbatch,
 * squeue and scancel run on libuv's thread pool, never on the loop.
 *
 * The array's job id is kept in the store (and in SLURM_DIR/<campaign>/
 * array_job, written the moment sbatch answers): a restarted daemon
 * re-attaches to the running array instead of submitting again, and picks
 * up the parts written while it was away. A job Slurm no longer knows
 * whose parts are missing (it ended long ago) is submitted again for those
 * chunks. A daemon that stops leaves its arrays running; cancel scancels. */
#ifndef BFD_SLURM_H
#define BFD_SLURM_H

#include "daemon.h"
#include "work/scheduler.h"

typedef struct bfd_slurm bfd_slurm;

/* Checks the settings (the shared directory is made if missing) and starts
 * the poll timer on d->loop. */
bf_status bfd_slurm_new(bfd *d, bfd_slurm **out, bf_error *err);
/* Stops polling; arrays keep running on the cluster (a restart re-attaches). */
void bfd_slurm_free(bfd_slurm *sl);
/* As bfd_sched_add: the chunks `pending` are submitted as one array (or,
 * for a campaign that ran before, the array recorded for it is followed). */
bf_status bfd_slurm_add(bfd_slurm *sl, const bfd_job_spec *js, const int *pending, size_t n_pending, int started,
                        bf_error *err);
/* scancel of the campaign's array; nothing more of it is reported. */
void bfd_slurm_cancel(bfd_slurm *sl, const char *id);
/* Messages since the last call, oldest first (the caller frees them). */
bfd_msg *bfd_slurm_take(bfd_slurm *sl);
/* A task's run time in seconds from its part-i.time ("START END", each
 * `date +%s.%N`), or -1 if the text is not that: a chunk's DONE carries it,
 * as a local worker's carries its chunk's time, for the trial-duration
 * histogram. */
double bfd_slurm_task_seconds(const char *text);
/* Chunks not yet done of started campaigns (running), and of the others (queued). */
void bfd_slurm_load(bfd_slurm *sl, int *running, int *queued);

#endif
