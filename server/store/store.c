/* The metadata database: opening and its schema, the helpers every store
 * file uses, tokens, the boot counter. Models and datasets are in
 * store_item.c, campaigns in store_campaign.c, their checkpoints in
 * store_chunk.c.
 *
 * seq columns are AUTOINCREMENT so a deleted row's seq is never handed out
 * again: a page token (the last seq a client saw) stays meaningful after
 * deletes. Single-statement functions rely on SQLite's implicit transaction;
 * the others take BEGIN IMMEDIATE. */
#include "store/store_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/blob.h"
#include "store/sha256.h"

#define SCHEMA_VERSION 4
#define BFD_XSTR(x) #x
#define BFD_STR(x) BFD_XSTR(x)
#define BUSY_TIMEOUT_MS 5000   /* `bitflipd token` may hold the lock briefly */
#define TOKEN_PREFIX 8         /* hex digits of a token hash the index narrows by */

static const char schema_v1[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE items ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  kind INTEGER NOT NULL CHECK (kind IN (0, 1)),"
    "  tenant TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL,"
    "  size INTEGER NOT NULL, summary_json TEXT NOT NULL, created REAL NOT NULL,"
    "  UNIQUE (kind, tenant, id));"
    "CREATE INDEX items_page ON items (kind, tenant, seq);"
    "CREATE INDEX items_blob ON items (id);"
    "CREATE TABLE campaigns ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,"
    "  state INTEGER NOT NULL CHECK (state BETWEEN 0 AND 4),"
    "  spec_json TEXT NOT NULL, gates_json TEXT,"
    "  model_id TEXT NOT NULL, dataset_id TEXT NOT NULL,"
    "  idem_key TEXT, idem_hash TEXT NOT NULL,"
    "  created REAL NOT NULL, started REAL NOT NULL, finished REAL NOT NULL,"
    "  trials_planned INTEGER NOT NULL, n_chunks INTEGER NOT NULL,"
    "  result_json TEXT, error TEXT, verdict TEXT,"
    "  UNIQUE (tenant, idem_key));"   /* NULL keys are distinct: campaigns without one never collide */
    "CREATE INDEX campaigns_page ON campaigns (tenant, seq);"
    "CREATE INDEX campaigns_state ON campaigns (state, seq);"
    "CREATE TABLE chunks ("
    "  campaign_id TEXT NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL, result_json TEXT NOT NULL,"
    "  PRIMARY KEY (campaign_id, idx)) WITHOUT ROWID;"
    "CREATE TABLE tokens (hash TEXT PRIMARY KEY, tenant TEXT NOT NULL) WITHOUT ROWID;";

/* v2: worker deaths per campaign (store_death.c): `inflight` counts chunks
 * handed to workers and not yet back, so a restart can tell a daemon that
 * died mid-chunk (a death) from one that was stopped cleanly (not one); and
 * items whose blob no longer matches its sha256 (store_item.c). */
static const char schema_v2[] =
    "ALTER TABLE campaigns ADD COLUMN deaths INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE campaigns ADD COLUMN death_reasons TEXT;"
    "ALTER TABLE campaigns ADD COLUMN inflight INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE items ADD COLUMN corrupt INTEGER NOT NULL DEFAULT 0;";

/* v3: the cluster scheduler's job of a campaign (store_job.c). */
static const char schema_v3[] = "ALTER TABLE campaigns ADD COLUMN executor_job TEXT;";

/* v4: error maps are items too (kind 2). SQLite cannot change a CHECK in
 * place, so the table is made again, rows, seq numbers and the AUTOINCREMENT
 * counter kept (page tokens are seq numbers: one given out stays good). */
static const char schema_v4[] =
    "CREATE TABLE items_v4 ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  kind INTEGER NOT NULL CHECK (kind IN (0, 1, 2)),"
    "  tenant TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL,"
    "  size INTEGER NOT NULL, summary_json TEXT NOT NULL, created REAL NOT NULL,"
    "  corrupt INTEGER NOT NULL DEFAULT 0,"
    "  UNIQUE (kind, tenant, id));"
    "INSERT INTO items_v4 (seq, kind, tenant, id, name, size, summary_json, created, corrupt)"
    "  SELECT seq, kind, tenant, id, name, size, summary_json, created, corrupt FROM items;"
    "DELETE FROM sqlite_sequence WHERE name = 'items_v4';"
    "INSERT INTO sqlite_sequence (name, seq) SELECT 'items_v4', seq FROM sqlite_sequence WHERE name = 'items';"
    "DROP TABLE items;"
    "ALTER TABLE items_v4 RENAME TO items;"
    "CREATE INDEX items_page ON items (kind, tenant, seq);"
    "CREATE INDEX items_blob ON items (id);";

/* --- helpers shared with store_campaign.c */

bf_status bfd__fail(bfd_store *s, int rc, const char *what, bf_error *err)
{
    bf_status st;
    switch (rc & 0xff) {
    case SQLITE_NOMEM: st = BF_ENOMEM; break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: st = BF_EFORMAT; break;
    case SQLITE_CONSTRAINT: st = BF_EINVAL; break;
    default: st = BF_EIO; break;
    }
    /* a full disk is the operator's to fix, and the client's reply says so (507) */
    return bf_error_set(err, st, "%s%s: %s: %s", (rc & 0xff) == SQLITE_FULL ? BFD_DISK_FULL : "", s->path, what,
                        s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
}

bf_status bfd__stmt(bfd_store *s, enum bfd__stmt_id id, const char *sql, sqlite3_stmt **out, bf_error *err)
{
    if (!s->stmt[id]) {
        int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[id], NULL);
        if (rc != SQLITE_OK) {
            s->stmt[id] = NULL;
            return bfd__fail(s, rc, "cannot prepare a query", err);
        }
    }
    *out = s->stmt[id];
    return BF_OK;
}

void bfd__release(sqlite3_stmt *q)
{
    if (!q) return;
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);   /* so no pointer to a caller's string outlives the call */
}

bf_status bfd__exec(bfd_store *s, sqlite3_stmt *q, const char *what, bf_error *err)
{
    int rc = sqlite3_step(q);
    bf_status st = rc == SQLITE_DONE ? BF_OK : bfd__fail(s, rc, what, err);
    sqlite3_reset(q);
    return st;
}

bf_status bfd__begin(bfd_store *s, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    bf_status st = bfd__stmt(s, ST_BEGIN, "BEGIN IMMEDIATE", &q, err);
    return st ? st : bfd__exec(s, q, "cannot begin a transaction", err);
}

bf_status bfd__commit(bfd_store *s, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    bf_status st = bfd__stmt(s, ST_COMMIT, "COMMIT", &q, err);
    return st ? st : bfd__exec(s, q, "cannot commit", err);
}

void bfd__rollback(bfd_store *s)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_get_autocommit(s->db)) return;   /* nothing open (or SQLite already rolled back) */
    if (bfd__stmt(s, ST_ROLLBACK, "ROLLBACK", &q, NULL) == BF_OK) bfd__exec(s, q, "cannot roll back", NULL);
}

int bfd__bind_text(sqlite3_stmt *q, int i, const char *text)
{
    return text ? sqlite3_bind_text(q, i, text, -1, SQLITE_STATIC) : sqlite3_bind_null(q, i);
}

int bfd__col_text(sqlite3_stmt *q, int col, char **out)
{
    *out = NULL;
    if (sqlite3_column_type(q, col) == SQLITE_NULL) return 0;
    const char *t = (const char *)sqlite3_column_text(q, col);   /* NULL here means out of memory */
    if (!t || !(*out = strdup(t))) return -1;
    return 0;
}

int bfd__col_fixed(sqlite3_stmt *q, int col, char *dst, size_t size)
{
    dst[0] = '\0';
    if (sqlite3_column_type(q, col) == SQLITE_NULL) return 0;
    const char *t = (const char *)sqlite3_column_text(q, col);
    size_t n = (size_t)sqlite3_column_bytes(q, col);
    if (!t || n >= size) return -1;
    memcpy(dst, t, n + 1);
    return 0;
}

int bfd__grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, c * elem);
    if (!p) return -1;
    *arr = p;
    *cap = c;
    return 0;
}

/* --- opening */

static bf_status exec_sql(bfd_store *s, const char *sql, const char *what, bf_error *err)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? BF_OK : bfd__fail(s, rc, what, err);
}

/* journal_mode answers with the mode it ended up in, which is not always the
 * one asked for (a database on some network filesystems cannot do WAL). */
static bf_status set_wal(bfd_store *s, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    bf_status st = BF_OK;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &q, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(q);
    if (rc != SQLITE_ROW) {
        st = bfd__fail(s, rc, "cannot switch to WAL", err);
        goto out;
    }
    const char *mode = (const char *)sqlite3_column_text(q, 0);
    if (!mode || strcmp(mode, "wal") != 0)
        st = bf_error_set(err, BF_EIO, "%s: cannot switch to WAL: journal mode stays '%s'", s->path,
                          mode ? mode : "?");

out:
    sqlite3_finalize(q);
    return st;
}

static bf_status user_version(bfd_store *s, int *version, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    bf_status st = BF_OK;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &q, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(q);
    if (rc != SQLITE_ROW)
        st = bfd__fail(s, rc, "cannot read the schema version", err);
    else
        *version = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return st;
}

/* Creates the schema on a new database, or brings an older one up to date,
 * in one transaction with setting its version, so a crash cannot leave half
 * a schema that claims to be whole. */
static bf_status migrate(bfd_store *s, bf_error *err)
{
    bf_status st = BF_OK;
    int version = 0;
    if ((st = bfd__begin(s, err))) goto out;
    if ((st = user_version(s, &version, err))) goto out;
    if (version > SCHEMA_VERSION) {
        st = bf_error_set(err, BF_EUNSUPPORTED,
                          "%s: schema version %d is newer than this bitflipd understands (%d): "
                          "was the database written by a later release?",
                          s->path, version, SCHEMA_VERSION);
        goto out;
    }
    /* one step per version, each from the one before */
    if (version < 1 && (st = exec_sql(s, schema_v1, "cannot create the schema", err))) goto out;
    if (version < 2 && (st = exec_sql(s, schema_v2, "cannot add the schema 2 columns (worker deaths, corrupt items)", err))) goto out;
    if (version < 3 && (st = exec_sql(s, schema_v3, "cannot add the schema 3 column (executor jobs)", err))) goto out;
    if (version < 4 && (st = exec_sql(s, schema_v4, "cannot make the schema 4 items table (error maps)", err))) goto out;
    if (version < SCHEMA_VERSION &&
        (st = exec_sql(s, "PRAGMA user_version = " BFD_STR(SCHEMA_VERSION), "cannot set the schema version", err)))
        goto out;
    st = bfd__commit(s, err);

out:
    if (st) bfd__rollback(s);
    return st;
}

bf_status bfd_store_open(const char *path, bfd_store **out, bf_error *err)
{
    bf_status st = BF_OK;
    bfd_store *s = NULL;
    *out = NULL;
    if (!(s = calloc(1, sizeof *s)) || !(s->path = strdup(path))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory opening the database", path);
        goto out;
    }
    int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        st = bfd__fail(s, rc, "cannot open the database", err);
        goto out;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    /* WAL lets readers run beside the writer; FULL syncs the WAL at every
     * commit, so a committed checkpoint survives a power cut, not just a crash. */
    if ((st = set_wal(s, err))) goto out;
    if ((st = exec_sql(s, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON",
                       "cannot set the connection's pragmas", err)))
        goto out;
    if ((st = migrate(s, err))) goto out;
    *out = s;
    s = NULL;

out:
    bfd_store_close(s);
    return st;
}

void bfd_store_close(bfd_store *s)
{
    if (!s) return;
    for (int i = 0; i < ST_COUNT; i++) sqlite3_finalize(s->stmt[i]);
    sqlite3_close(s->db);   /* every statement is finalized, so this cannot be left busy */
    free(s->path);
    free(s);
}

bf_status bfd_store_boot(bfd_store *s, int64_t *boot, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *bump = NULL, *get = NULL;
    int rc;
    if ((st = bfd__stmt(s, ST_BOOT_BUMP,
                        "INSERT INTO meta (key, value) VALUES ('boot', 1)"
                        " ON CONFLICT (key) DO UPDATE SET value = value + 1",
                        &bump, err)) ||
        (st = bfd__stmt(s, ST_BOOT_GET, "SELECT value FROM meta WHERE key = 'boot'", &get, err)))
        goto out;
    if ((st = bfd__begin(s, err))) goto out;
    if ((st = bfd__exec(s, bump, "cannot count the boot", err))) goto out;
    if ((rc = sqlite3_step(get)) != SQLITE_ROW) {
        st = bfd__fail(s, rc, "cannot read the boot counter", err);
        goto out;
    }
    int64_t n = sqlite3_column_int64(get, 0);
    sqlite3_reset(get);   /* a reader still stepping would hold the commit back */
    if ((st = bfd__commit(s, err))) goto out;
    *boot = n;

out:
    bfd__release(get);
    if (st) bfd__rollback(s);
    return st;
}

/* --- tokens */

bf_status bfd_token_put(bfd_store *s, const char *hash_hex, const char *tenant, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    if ((st = bfd__stmt(s, ST_TOKEN_PUT, "INSERT INTO tokens (hash, tenant) VALUES (?1, ?2)", &q, err))) goto out;
    if ((rc = bfd__bind_text(q, 1, hash_hex)) || (rc = bfd__bind_text(q, 2, tenant))) {
        st = bfd__fail(s, rc, "cannot bind a token", err);
        goto out;
    }
    st = bfd__exec(s, q, "cannot store a token", err);

out:
    bfd__release(q);
    return st;
}

bf_status bfd_token_lookup(bfd_store *s, const char *hash_hex, char **tenant, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    char lo[TOKEN_PREFIX + 1], hi[TOKEN_PREFIX + 2];
    *tenant = NULL;
    if (strlen(hash_hex) != 64) return bf_error_set(err, BF_ENOTFOUND, "unknown token");
    /* The index finds candidates by the hash's first digits (hashes are hex,
     * so [P, P+"g") holds exactly those starting with P); the whole hash is
     * then compared in constant time, so how long a lookup takes says
     * nothing about how close a guess came to a stored hash. */
    memcpy(lo, hash_hex, TOKEN_PREFIX);
    lo[TOKEN_PREFIX] = '\0';
    snprintf(hi, sizeof hi, "%sg", lo);
    if ((st = bfd__stmt(s, ST_TOKEN_LOOKUP, "SELECT hash, tenant FROM tokens WHERE hash >= ?1 AND hash < ?2", &q,
                        err)))
        goto out;
    if ((rc = bfd__bind_text(q, 1, lo)) || (rc = bfd__bind_text(q, 2, hi))) {
        st = bfd__fail(s, rc, "cannot bind a token lookup", err);
        goto out;
    }
    int found = 0;
    while (!found && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *h = (const char *)sqlite3_column_text(q, 0);
        if (h && sqlite3_column_bytes(q, 0) == 64 && bfd_digest_equal(h, hash_hex)) found = 1;
    }
    if (found) {
        if (bfd__col_text(q, 1, tenant) || !*tenant)
            st = bf_error_set(err, BF_ENOMEM, "%s: out of memory reading a token's tenant", s->path);
    } else if (rc == SQLITE_DONE) {
        st = bf_error_set(err, BF_ENOTFOUND, "unknown token");   /* never echo a credential */
    } else {
        st = bfd__fail(s, rc, "cannot look up a token", err);
    }

out:
    bfd__release(q);
    return st;
}

bf_status bfd_token_count(bfd_store *s, int64_t *count, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    if ((st = bfd__stmt(s, ST_TOKEN_COUNT, "SELECT count(*) FROM tokens", &q, err))) goto out;
    if ((rc = sqlite3_step(q)) != SQLITE_ROW) {
        st = bfd__fail(s, rc, "cannot count tokens", err);
        goto out;
    }
    *count = sqlite3_column_int64(q, 0);

out:
    bfd__release(q);
    return st;
}
