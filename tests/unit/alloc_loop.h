/* The allocation-failure loop of the tests that load a model file from a
 * buffer and do something with it (test_embedding_bag, test_moe_index,
 * test_repeat_interleave): core's allocations fail one at a time, each
 * failure must come back as BF_ENOMEM (and, under ASan, free everything). */
#ifndef BF_TEST_ALLOC_LOOP_H
#define BF_TEST_ALLOC_LOOP_H

#include <stddef.h>
#include <sys/resource.h>

#include "bitflip/error.h"

/* One round: load the model from buf (len bytes, named `name`, the file's
 * base name) and do the test's work with it; free all it made, whatever
 * it returns; return the first status that is not BF_OK, or BF_OK. */
typedef bf_status (*th_alloc_round)(const unsigned char *buf, size_t len, const char *name, bf_error *err);

/* Reads the file at path (under 64 KiB) and runs `round` with core's
 * allocation n failing, n = 0, 1, ..., max_n - 1, until a round returns
 * BF_OK; every other round must return BF_ENOMEM (the test fails naming
 * n, the status and the message otherwise). Fails the test if no round
 * succeeds. */
void th_alloc_failures_loading(const char *path, long max_n, th_alloc_round round);

/* Runs the process out of file descriptors (memfd_create, open, dup then
 * fail with EMFILE): RLIMIT_NOFILE's soft limit set to the lowest free
 * descriptor; *old gets the limit to restore with setrlimit. Fails the test
 * if the limits cannot be read or set. */
void th_no_free_descriptors(struct rlimit *old);

#endif
