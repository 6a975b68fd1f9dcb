/* bitflipd — the children's side: the hidden modes main() hands over to
 * before anything of the daemon starts. See proc.h for why they exist. */
#ifndef BFD_WORKER_H
#define BFD_WORKER_H

/* `bitflipd --worker --job-memory BYTES`: runs chunks sent on stdin
 * (worker.c). Returns the exit status. */
int bfd_worker_main(int argc, char **argv);
/* `bitflipd --check-model PATH --job-memory BYTES` (or --check-dataset):
 * loads the file with the engine and writes one frame to stdout,
 * {"summary": {...}} or {"error": "...", "oom": bool, "limit": bool};
 * `--check-campaign MODEL DATASET` reads the spec as a frame on stdin and
 * answers {"estimate": {"bytes": N}} or the same error (check.c). */
int bfd_check_main(int argc, char **argv);
/* Any of the above when argv names one (child.c); -1 when it does not:
 * then this process is the daemon. */
int bfd_child_main(int argc, char **argv);

#endif
