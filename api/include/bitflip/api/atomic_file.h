/* bitflip — publishing a file atomically: a reader sees the old file or the
 * whole new one, never a part, and after a crash (power cut included) the
 * name holds one or the other.
 *
 * Why it lives in api/: both bitflipd (blobs, the port file, trial records,
 * the Slurm executor's task spec) and the CLI (results, shard parts, Slurm
 * records) publish files, and the dependency direction is one way
 * (server, clients -> api -> core). api/ is the lowest library both link
 * that is not the engine: core/include/bitflip/ is the engine's vocabulary
 * and knows nothing of where results go, so a file-publishing helper there
 * would widen the engine's surface for the sake of its callers.
 *
 * The recipe, every step checked and reported by path in a bf_error:
 *   1. a temp file unique to this writer (mkstemp) in the target's own
 *      directory, so the rename never crosses a filesystem, and hidden
 *      (".NAME.tmp-XXXXXX") so globs over the directory (part-*.json) never
 *      match one;
 *   2. write(2) the bytes (buffered here; write(2), not stdio, so a test's
 *      LD_PRELOAD full disk, tests/server/enospc_shim.c, sees them);
 *   3. fsync the file, then close it (both can report a write failed late);
 *   4. rename over the target (the commit point);
 *   5. fsync the directory, so the new name itself survives a crash.
 * A failure before the rename unlinks the temp file; after the rename the
 * temp name is never unlinked (another writer may have drawn it).
 * Writes that fail with ENOSPC or EDQUOT carry BF_DISK_FULL at the start of
 * their message, so a daemon can answer 507 however far the error went.
 *
 * Not thread-bound: one bf_afile is used from one thread at a time; any
 * number may be open at once. */
#ifndef BITFLIP_API_ATOMIC_FILE_H
#define BITFLIP_API_ATOMIC_FILE_H

#include <stddef.h>

#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BF_DISK_FULL "disk full: "

typedef struct bf_afile bf_afile;

/* Starts a file to be published at `path`, with permission bits `mode`
 * exactly (not masked by the umask: callers that want the umask apply it,
 * since reading it is not thread-safe). The temp file is beside `path`. */
bf_status bf_afile_open(const char *path, unsigned mode, bf_afile **out, bf_error *err);
/* The same, for a file whose name is known only at the end (a blob named by
 * its hash): the temp file "upload-XXXXXX" is made in `tmp_dir`, which must
 * be on the filesystem of the final name given to bf_afile_commit. */
bf_status bf_afile_open_in(const char *tmp_dir, unsigned mode, bf_afile **out, bf_error *err);
/* Each later write goes to the file at once instead of through the 64 KiB
 * buffer: for a caller streaming large pieces (an HTTP upload) that must
 * learn of a full disk at the piece that hit it, not at the commit. */
void bf_afile_unbuffered(bf_afile *f);
/* Appends. After a failed write the file is spoiled: later writes and the
 * commit fail too ("an earlier write failed"). */
bf_status bf_afile_write(bf_afile *f, const void *data, size_t len, bf_error *err);
/* Steps 3-5 of the recipe onto `path` (NULL: the path given to
 * bf_afile_open). Frees f whatever happens; on failure the target is left
 * as it was. */
bf_status bf_afile_commit(bf_afile *f, const char *path, bf_error *err);
/* Drops the temp file and frees f (NULL is fine). */
void bf_afile_abort(bf_afile *f);

/* The whole recipe for bytes already in memory. */
bf_status bf_write_atomic(const char *path, const void *data, size_t len, unsigned mode, bf_error *err);

/* fsync of a directory, so a rename or mkdir in it is durable (a filesystem
 * that cannot sync directories, EINVAL, is not an error). */
bf_status bf_sync_dir(const char *dir, bf_error *err);

#ifdef __cplusplus
}
#endif

#endif
