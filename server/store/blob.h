/* bitflipd — content-addressed blobs in the data directory.
 *
 * Layout: DIR/blobs/ab/abcdef... (the full sha256 hex), DIR/tmp/ for uploads in
 * flight. A blob is written to a temp file as its bytes arrive, fsync'd, and
 * renamed into place (then the directory fsync'd), so a blob path either does
 * not exist or holds the whole, verified content: a crash never leaves half a
 * blob under its name (bitflip/api/atomic_file.h does the writing). Storing bytes that are already there just drops the
 * temp file. Temp files left by a crash are removed by bfd_blobs_open. */
#ifndef BFD_BLOB_H
#define BFD_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/api/atomic_file.h"
#include "bitflip/error.h"

typedef struct bfd_blobs bfd_blobs;
typedef struct bfd_upload bfd_upload;

/* Creates DIR/blobs and DIR/tmp if needed, and empties DIR/tmp. */
bf_status bfd_blobs_open(const char *dir, bfd_blobs **out, bf_error *err);
void bfd_blobs_close(bfd_blobs *b);

/* Starts an upload: a new temp file. Not thread-bound: one upload may be
 * written from one thread at a time; several uploads may run at once. */
bf_status bfd_upload_begin(bfd_blobs *b, bfd_upload **out, bf_error *err);
/* Appends and hashes; fails on a write error (disk full names the file). */
bf_status bfd_upload_write(bfd_upload *u, const void *data, size_t len, bf_error *err);
int64_t bfd_upload_size(const bfd_upload *u);
/* Finishes: fsync, rename to the content address (or drop if present),
 * fsync the directory. Fills sha_hex (65 bytes) and frees u either way. */
bf_status bfd_upload_finish(bfd_upload *u, char sha_hex[65], bf_error *err);
/* Drops the temp file and frees u (NULL is fine). */
void bfd_upload_abort(bfd_upload *u);

/* Path of a blob (malloc'd; NULL when out of memory); whether it exists is
 * the caller's question. sha_hex must be 64 lower-case hex digits. */
char *bfd_blob_path(const bfd_blobs *b, const char *sha_hex);
/* Rewrites an engine message about the blob at `path` (DIR/blobs/xx/ID) so
 * that it names the blob by its id alone: every "DIR/blobs/xx/" is cut
 * out. A message for a client never shows the data dir (docs/SERVICE.md). */
void bfd_blob_scrub(char *msg, const char *path);
/* Removes a blob (no error if absent). */
bf_status bfd_blob_remove(bfd_blobs *b, const char *sha_hex, bf_error *err);

/* Checks that the blob at `path` still holds the bytes its name promises:
 * the file's name is its sha256 hex, and its content is hashed again,
 * streaming (constant memory, any size). `what` ("model", "dataset", "error map") names
 * it in the message. Returns BF_OK when they match; BF_EFORMAT with
 * "<what> blob <id> is corrupt (sha256 mismatch)..." when they do not (a bit
 * flipped on disk, a truncated copy); BF_ENOTFOUND when the file is gone;
 * BF_EIO when it cannot be read; BF_EINVAL when the name is not a sha256.
 * Reads only: safe from any thread or process, beside the daemon. */
bf_status bfd_blob_verify(const char *path, const char *what, bf_error *err);
/* The (kind word, id) of the blob a bfd_blob_verify message calls corrupt,
 * wherever it sits in `msg` (prefixes added on the way up are fine): how the
 * store learns of a corrupt blob from a campaign's error text, which is what
 * crosses from a worker to the daemon. Returns 1 and fills what (16 bytes)
 * and id (65 bytes), or 0. */
int bfd_blob_corrupt_named(const char *msg, char what[16], char id[65]);

/* Disk full. Writes that fail with ENOSPC or EDQUOT (and SQLite's
 * SQLITE_FULL, store.c) carry BFD_DISK_FULL in their message, so a reply can
 * be 507 instead of 500 however far the error travelled. */
#define BFD_DISK_FULL BF_DISK_FULL   /* what bitflip/api/atomic_file.h writes */
int bfd_error_disk_full(const bf_error *err);

#endif
