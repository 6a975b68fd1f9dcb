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
#include "work/executor.h"
#include "work/slurm_cmd.h"   /* bfd_slurm_task_seconds and the commands */
#include "work/scheduler.h"

/* The executor's ops (work/executor.h), under the name "slurm". start
 * checks the settings (the shared directory is made if missing) and starts
 * the poll timer; submit sends the chunks `pending` as one array (or, for a
 * campaign that ran before, follows the array recorded for it); cancel
 * scancels the array and nothing more of the campaign is reported; load
 * counts chunks not yet done of started campaigns as running, of the others
 * as queued; stop stops polling and leaves the arrays running (a restart
 * re-attaches). */
extern const bfd_executor_ops bfd_slurm_executor;

#endif
