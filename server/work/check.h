/* bitflipd — the deep check of an upload, in a child process (proc.h):
 * the engine loads the stored file and summarises it, under the job memory
 * limit, so that a file crafted to crash or exhaust the parser costs that
 * child and the upload gets a 422. Loop thread only. */
#ifndef BFD_CHECK_H
#define BFD_CHECK_H

#include "daemon.h"

typedef struct bfd_check_result {
    bf_status st;             /* BF_OK: summary; else why says what is wrong */
    char *summary;            /* JSON text, malloc'd, the callback's to keep or free */
    int refused;              /* the engine or the limit refused the file (a 422), vs. the check could not run */
    char why[768];            /* for the reply: the engine's message, or what happened to the parser */
} bfd_check_result;

typedef void (*bfd_check_done)(void *user, bfd_check_result *res);

/* Starts checking the model or dataset (kind: BFD_MODEL, BFD_DATASET) at
 * `path`; `done` is called once, later, on the loop. */
bf_status bfd_check_start(bfd *d, int kind, const char *path, bfd_check_done done, void *user, bf_error *err);

#endif
