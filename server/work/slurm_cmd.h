/* bitflipd — the Slurm executor's command-line side: what it asks of
 * sbatch, squeue and scancel, and how it reads their answers.
 *
 * Pure functions (inputs in, argv, script text or a parsed answer out; no
 * files, processes or clocks), so every word the daemon sends to Slurm and
 * every answer it acts on is checked by tests/server/test_slurm_cmd.c
 * without a cluster. work/slurm.c is the loop side: it runs these commands
 * on libuv's thread pool, polls on a timer and posts what it learns.
 * Strings returned are malloc'd (NULL: out of memory). */
#ifndef BFD_SLURM_CMD_H
#define BFD_SLURM_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"

/* A printf into new memory (free it); NULL when out of memory. Both sides
 * of the Slurm executor build their commands and paths with it. */
char *bfd_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

/* `s` as one sh word in single quotes ("it's" -> 'it'\''s'). */
char *bfd_sh_quote(const char *s);
/* The chunks as Slurm's --array list, runs of consecutive indices as
 * ranges: {0,1,2,3,5,7,8} -> "0-3,5,7-8" (n == 0: ""). */
char *bfd_slurm_array_list(const int *chunks, size_t n);
/* The daemon's limits as the CLI takes them, so a task refuses what a local
 * worker would: " --job-memory N" and " --limit 'k=v'" for each of the
 * comma-separated `limits` (NULL or "": none). */
char *bfd_slurm_limit_opts(const char *limits, int64_t job_memory);

/* One campaign's array, as sbatch is to get it. */
typedef struct bfd_sbatch_in {
    const char *campaign_id;  /* the job's name: bitflipd-<first 12 characters> */
    const char *dir;          /* SLURM_DIR/<campaign>: parts, times, logs (absolute) */
    const char *trials_dir;   /* where per-trial records go (absolute) */
    const char *bitflip;      /* the CLI the tasks run */
    const char *spec_path;    /* the spec the tasks run (blob paths for ids) */
    const char *partition;    /* NULL or "": Slurm's default */
    const char *account;      /* NULL or "": Slurm's default */
    const char *limits;       /* the daemon's --limit, "k=v,k=v" */
    int64_t job_memory;
    int n_chunks;             /* the campaign's chunks: chunk i is shard i/n_chunks */
    const int *chunks;        /* the chunks to submit (array indices) */
    size_t n_submit;
} bfd_sbatch_in;

/* The shell text of every task: run shard $SLURM_ARRAY_TASK_ID of the
 * spec into temp names unique to the job ($SLURM_JOB_ID), then rename the
 * trial records, the start/end times (part-i.time) and last the part
 * (part-i.json) into place, so a part that exists is whole and has the
 * others beside it. */
char *bfd_slurm_task_script(const bfd_sbatch_in *in);
/* sbatch's argv (NULL-terminated; free with bfd_argv_free): --parsable,
 * the job name, --array, --output DIR/task-%a.log, --chdir DIR, one CPU per
 * task, the partition and account if given, and --wrap with the script. */
bf_status bfd_sbatch_argv(const bfd_sbatch_in *in, char ***argv, bf_error *err);
void bfd_argv_free(char **argv);
/* The job id sbatch --parsable printed ("1234" or "1234;cluster", then a
 * newline): 1 and the digits in id (of `size` bytes), or 0 if `out` does not
 * start with one that fits. */
int bfd_sbatch_job_id(const char *out, char *id, size_t size);

/* squeue's argv for the array's tasks, one per line as "%K %T" (index and
 * state), every state: argv has room for 9 entries, `job` is kept by pointer. */
void bfd_squeue_argv(const char *job, char *argv[9]);
/* One line of that output: 1 with the task and its state (40 bytes), or 0
 * for a line that is not one (a header, a blank). */
int bfd_squeue_line(const char *line, int *task, char state[40]);
/* A failed squeue whose stderr's last line says Slurm no longer knows the
 * job (purged after MinJobAge): its tasks are over. */
int bfd_squeue_job_gone(int exit_code, const char *err_line);
/* The state says the task runs or ran (RUNNING, COMPLETING, COMPLETED). */
int bfd_slurm_state_ran(const char *state);
/* The state says the task may still write its part (pending, running or
 * about to run again); any other state without a part is a failed task. */
int bfd_slurm_state_alive(const char *state);
/* scancel's argv for the array (argv has room for 3 entries). */
void bfd_scancel_argv(const char *job, char *argv[3]);

/* A task's run time in seconds from its part-i.time ("START END", each
 * `date +%s.%N`), or -1 if the text is not that: a chunk's DONE carries it,
 * as a local worker's carries its chunk's time, for the trial-duration
 * histogram. */
double bfd_slurm_task_seconds(const char *text);

#endif
