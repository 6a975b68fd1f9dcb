/* bitflipd --check: is a data directory whole? Read-only: it may run beside
 * a daemon using the same directory (SQLite reads alongside the writer).
 *
 * What it checks: the database (PRAGMA integrity_check), every blob that a
 * model or dataset names (present, and hashing to its name), and every file
 * under blobs/ (named by a model or dataset, else an orphan). */
#ifndef BFD_CHECK_H
#define BFD_CHECK_H

#include <stdio.h>

#include "bitflip/error.h"

/* Writes one line per problem to `out`, then a summary, and sets *problems
 * to their number. Fails (without counting) only when it cannot do its
 * job at all: out of memory. A missing or unreadable database is a problem,
 * not a failure. */
bf_status bfd_check_data_dir(const char *dir, FILE *out, int *problems, bf_error *err);

#endif
