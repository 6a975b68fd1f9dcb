/* bitflipd — what the store_*.c files share: the handle, its cache
 * of prepared statements, and the helpers every query goes through. */
#ifndef BFD_STORE_IMPL_H
#define BFD_STORE_IMPL_H

#include <sqlite3.h>

#include "store/store.h"

/* One slot per query: each is prepared on first use and kept for the life
 * of the store, so the SQL text sits next to the code that binds it. */
enum bfd__stmt_id {
    ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
    ST_BOOT_BUMP, ST_BOOT_GET,
    ST_ITEM_PUT, ST_ITEM_GET, ST_ITEM_LIST, ST_ITEM_DELETE, ST_BLOB_REFS, ST_ITEM_CORRUPT, ST_ITEM_HEALED,
    ST_TOKEN_PUT, ST_TOKEN_LOOKUP, ST_TOKEN_COUNT,
    ST_CAMP_INSERT, ST_CAMP_GET, ST_CAMP_IDEM, ST_CAMP_LIST, ST_CAMP_UNFINISHED, ST_CAMP_USING,
    ST_CAMP_STATE, ST_CAMP_RUN, ST_CAMP_FINISH, ST_CAMP_DELETE, ST_CAMP_COUNTS,
    ST_CHUNK_PUT, ST_CHUNK_LIST, ST_CHUNK_DROP,
    ST_DEATH_INFLIGHT, ST_DEATH_ADD, ST_DEATH_GET, ST_DEATH_CLEAR,
    ST_JOB_SET, ST_JOB_GET,
    ST_COUNT
};

struct bfd_store {
    sqlite3 *db;
    char *path;                       /* for messages */
    sqlite3_stmt *stmt[ST_COUNT];
};

/* The cached statement for `id`, prepared from `sql` the first time. */
bf_status bfd__stmt(bfd_store *s, enum bfd__stmt_id id, const char *sql, sqlite3_stmt **out, bf_error *err);
/* Makes a cached statement ready for its next use (NULL is fine). */
void bfd__release(sqlite3_stmt *q);
/* Maps an SQLite result code to a bf_status and a message naming the
 * database file and `what` was being done. */
bf_status bfd__fail(bfd_store *s, int rc, const char *what, bf_error *err);
/* Steps a statement that returns no rows. */
bf_status bfd__exec(bfd_store *s, sqlite3_stmt *q, const char *what, bf_error *err);

/* BEGIN IMMEDIATE: functions of more than one statement take the write lock
 * up front, so they never fail halfway on a lock upgrade. */
bf_status bfd__begin(bfd_store *s, bf_error *err);
bf_status bfd__commit(bfd_store *s, bf_error *err);
/* Rolls back if a transaction is open; for `out:` paths. */
void bfd__rollback(bfd_store *s);

/* Binds a string, or SQL NULL for a NULL pointer. */
int bfd__bind_text(sqlite3_stmt *q, int i, const char *text);
/* A text column, malloc'd; SQL NULL gives NULL. Returns -1 when out of memory. */
int bfd__col_text(sqlite3_stmt *q, int col, char **out);
/* A text column into a fixed array; -1 if it does not fit (SQL NULL gives ""). */
int bfd__col_fixed(sqlite3_stmt *q, int col, char *dst, size_t size);
/* Steps the cached statement `sid` (`sql`: one campaign's columns, its id
 * bound to ?1) to the campaign's row: BF_OK with *out on it, for the caller
 * to read and then bfd__release; BF_ENOTFOUND naming the campaign; or the
 * failure, `what` saying what was being read (*out is released then). */
bf_status bfd__campaign_lookup(bfd_store *s, enum bfd__stmt_id sid, const char *sql, const char *id, const char *what,
                               sqlite3_stmt **out, bf_error *err);
/* Inside a transaction: the campaign's state and chunk count, or BF_ENOTFOUND. */
bf_status bfd__campaign_state(bfd_store *s, const char *id, bfd_state *state, int *n_chunks, bf_error *err);
/* Deletes the campaign's chunk rows (part of the caller's transaction). */
bf_status bfd__chunks_drop(bfd_store *s, const char *id, bf_error *err);

/* Room for one more element in a growing array of `elem`-sized items. */
int bfd__grow(void **arr, size_t *cap, size_t n, size_t elem);

#endif
