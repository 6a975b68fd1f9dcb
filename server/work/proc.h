/* bitflipd — worker processes: what the daemon and its children share.
 *
 * The engine never runs inside the daemon. Campaign chunks run in a pool of
 * long-lived worker processes (`bitflipd --worker`, worker.c), and uploads
 * are parsed by one-shot ones (`bitflipd --check-model PATH`, check.c): the
 * same binary, re-executed through /proc/self/exe. Each child caps its own
 * address space at the job memory limit and dies with the daemon, so a parser
 * that recurses off its stack, a model that asks for 8 GiB, or a bug in a
 * kernel costs one child, which the daemon reaps and explains in words.
 *
 * The pipes carry frames: a 4-byte big-endian length, then that many bytes
 * of JSON. What a child sends is hostile input to the daemon: a frame over
 * BFD_FRAME_MAX, or one that is not the JSON expected, gets the child
 * killed. */
#ifndef BFD_PROC_H
#define BFD_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "bitflip/api/limits.h"
#include "bitflip/error.h"

/* A chunk's result document is the largest thing sent; results hold
 * aggregates (by layer, by bit), not per-trial records, so this is ample. */
#define BFD_FRAME_MAX ((size_t)64 << 20)
/* Smaller limits leave a worker no room for its own code and libraries. */
#define BFD_JOB_MEMORY_MIN ((int64_t)128 << 20)
#define BFD_JOB_MEMORY_DEFAULT ((int64_t)4 << 30)

/* --- frames ------------------------------------------------------------- */

/* A malloc'd frame holding `payload` (len bytes); NULL when out of memory or
 * len is over BFD_FRAME_MAX. */
char *bfd_frame_encode(const char *payload, size_t len, size_t *frame_len);

/* Reassembles frames from a byte stream that arrives in arbitrary pieces. */
typedef struct bfd_frame_reader {
    char *buf;
    size_t len, cap;
    size_t max;               /* largest payload accepted (0: BFD_FRAME_MAX) */
} bfd_frame_reader;

/* Appends bytes. BF_ERANGE when a frame announces more than `max` (nothing
 * is buffered past a bad header, so a hostile peer cannot make it grow). */
bf_status bfd_frame_feed(bfd_frame_reader *r, const char *data, size_t n, bf_error *err);
/* The next whole frame's payload, malloc'd and NUL-terminated (an embedded
 * NUL is the caller's to refuse: *len says the real length): 1; 0 when no
 * whole frame is buffered; BF_ENOMEM. */
int bfd_frame_next(bfd_frame_reader *r, char **payload, size_t *len);
void bfd_frame_reader_free(bfd_frame_reader *r);

/* Blocking helpers for the children, whose stdin and stdout are the pipes:
 * 1 read a frame, 0 EOF at a frame boundary, <0 error (err says which). */
int bfd_frame_read_fd(int fd, char **payload, size_t *len, bf_error *err);
bf_status bfd_frame_write_fd(int fd, const char *payload, size_t len, bf_error *err);

/* --- words for what happened -------------------------------------------- */

/* "4.0 GiB", "512 MiB", "100 KiB", "12 bytes". */
void bfd_size_text(int64_t bytes, char *buf, size_t size);
/* "512M", "4G", "4GiB", "1.5G", "1073741824" (bytes); K, M, G, T are powers
 * of 1024. */
bf_status bfd_parse_size(const char *s, int64_t *out, bf_error *err);
/* How a child ended, for a person: "killed by SIGSEGV", "killed by SIGKILL
 * (out of memory? the job memory limit is 4.0 GiB)", "exited with status 3". */
void bfd_exit_reason(int64_t exit_status, int term_signal, int64_t job_memory, char *buf, size_t size);
/* What a child says when the engine ran out of memory under the limit. */
void bfd_oom_reason(int64_t job_memory, const char *detail, char *buf, size_t size);

/* --- processes ---------------------------------------------------------- */

/* Starts this binary with `args` (args[0] is the mode, e.g. "--worker"; NULL
 * terminated) and --job-memory appended, and `--limits LIST` unless limits
 * is NULL or "" (bfd_config.limits_arg). `in` and `out` become the child's
 * stdin and stdout (either may be NULL: /dev/null); stderr is the daemon's,
 * so the child's log lines land in the same log. The pipes must be
 * initialised (uv_pipe_init) and not yet open. */
bf_status bfd_proc_spawn(uv_loop_t *loop, uv_process_t *p, uv_exit_cb on_exit, const char *const *args, uv_pipe_t *in,
                         uv_pipe_t *out, int64_t job_memory, const char *limits, bf_error *err);

/* In a child, first thing: the address-space limit, no core files, and
 * death with the parent (PR_SET_PDEATHSIG), then a check that the parent is
 * still the one that started us (it may have died before the prctl). */
bf_status bfd_proc_child_init(int64_t job_memory, bf_error *err);
/* A child's --job-memory argument (the default if absent or unreadable). */
int64_t bfd_proc_arg_memory(int argc, char **argv);
/* "k=v,k=v" (bitflipd --limit, as bf_limits_set takes each) into *l. */
bf_status bfd_limits_parse_list(bf_limits *l, const char *list, bf_error *err);
/* In a child: the --limits LIST that bfd_proc_spawn appended, into *l (left
 * zeroed, the defaults, without one). */
bf_status bfd_proc_arg_limits(int argc, char **argv, bf_limits *l, bf_error *err);

#endif
