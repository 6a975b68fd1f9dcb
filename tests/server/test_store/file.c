/* test_store: the database file (reopen, garbage, newer and older schemas), corrupt blobs, error maps. */
#include "test_store.h"

/* --- the database file */

void test_persists_across_reopen(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_item it;
    bfd_campaign_row got;
    char *tenant = NULL;
    int64_t boot = 0;
    put_item(f->s, BFD_MODEL, "alice", ID_A, "kept.onnx", NULL);
    bfd_campaign_row r = campaign("cpersist000000000", "alice");
    insert(f->s, &r);
    assert_int_equal(bfd_campaign_set_running(f->s, r.id, 1700000200, &err), BF_OK);
    assert_int_equal(bfd_chunk_put(f->s, r.id, 1, "{\"c\":1}", &err), BF_OK);
    assert_int_equal(bfd_token_put(f->s, ID_C, "alice", &err), BF_OK);
    assert_int_equal(bfd_store_boot(f->s, &boot, &err), BF_OK);
    assert_int_equal(boot, 1);
    assert_int_equal(bfd_store_boot(f->s, &boot, &err), BF_OK);
    assert_int_equal(boot, 2);

    reopen(f);
    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "alice", ID_A, &it, &err), BF_OK);
    assert_string_equal(it.name, "kept.onnx");
    bfd_item_clear(&it);
    assert_int_equal(bfd_campaign_get(f->s, "alice", r.id, &got, &err), BF_OK);
    assert_int_equal(got.state, BFD_RUNNING);
    assert_int_equal(got.seq, r.seq);
    bfd_campaign_row_clear(&got);
    assert_int_equal(chunk_count(f->s, r.id), 1);
    assert_int_equal(bfd_token_lookup(f->s, ID_C, &tenant, &err), BF_OK);
    assert_string_equal(tenant, "alice");
    free(tenant);
    assert_int_equal(bfd_store_boot(f->s, &boot, &err), BF_OK);
    assert_int_equal(boot, 3);

    /* the file is in WAL mode, as another connection sees it */
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    sqlite3_close(db);
}

void test_garbage_file_refused(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_store *s = (bfd_store *)1;
    char path[160];
    snprintf(path, sizeof path, "%s/garbage.db", f->dir);
    FILE *g = fopen(path, "wb");
    assert_non_null(g);
    for (int i = 0; i < 200; i++) fputs("this is certainly not an SQLite database. ", g);
    assert_int_equal(fclose(g), 0);
    bf_status st = bfd_store_open(path, &s, &err);
    assert_int_equal(st, BF_EFORMAT);
    assert_null(s);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "not a database"));
}

void test_newer_schema_refused(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_store *s = NULL;
    char path[160];
    snprintf(path, sizeof path, "%s/future.db", f->dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(bfd_store_open(path, &s, &err), BF_EUNSUPPORTED);
    assert_null(s);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "99"));
}

/* --- corrupt blobs */

static int corrupt_of(bfd_store *s, bfd_kind k, const char *tenant, const char *id)
{
    bfd_item it;
    bf_error err = {0};
    assert_int_equal(bfd_item_get(s, k, tenant, id, &it, &err), BF_OK);
    int c = it.corrupt;
    bfd_item_clear(&it);
    return c;
}

void test_corrupt_mark_and_heal(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    int existed = -1;
    put_item(f->s, BFD_MODEL, "alice", ID_A, "m", NULL);
    put_item(f->s, BFD_MODEL, "bob", ID_A, "m", NULL);
    put_item(f->s, BFD_DATASET, "alice", ID_A, "d", NULL);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "alice", ID_A), 0);
    /* one blob, every tenant's row of that kind */
    assert_int_equal(bfd_item_mark_corrupt(f->s, BFD_MODEL, ID_A, &err), BF_OK);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "alice", ID_A), 1);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "bob", ID_A), 1);
    assert_int_equal(corrupt_of(f->s, BFD_DATASET, "alice", ID_A), 0);
    bfd_item *items = NULL;
    size_t n = 0;
    int more = 0;
    assert_int_equal(bfd_item_list(f->s, BFD_MODEL, "bob", 0, 10, &items, &n, &more, &err), BF_OK);
    assert_int_equal(n, 1);
    assert_int_equal(items[0].corrupt, 1);
    bfd_item_list_free(items, n);
    /* uploading the bytes again (by anyone) rewrites the blob: all rows heal */
    put_item(f->s, BFD_MODEL, "alice", ID_A, "m", &existed);
    assert_int_equal(existed, 1);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "alice", ID_A), 0);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "bob", ID_A), 0);
    assert_int_equal(bfd_item_mark_corrupt(f->s, 7, ID_A, &err), BF_EINVAL);
}

void test_finish_marks_corrupt(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    put_item(f->s, BFD_MODEL, "alice", ID_A, "m", NULL);
    put_item(f->s, BFD_DATASET, "alice", ID_B, "d", NULL);
    bfd_campaign_row r = campaign("c0000000000000001", "alice");
    insert(f->s, &r);
    /* the message as a worker's bfd_blob_verify words it, with context before it */
    assert_int_equal(bfd_campaign_finish(f->s, r.id, BFD_FAILED, 1.0, NULL,
                                         "chunk 2: dataset blob " ID_B " is corrupt (sha256 mismatch): its bytes hash to "
                                         "0123456789abcdef... now",
                                         NULL, &err),
                     BF_OK);
    assert_int_equal(corrupt_of(f->s, BFD_DATASET, "alice", ID_B), 1);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "alice", ID_A), 0);
    /* other failures mark nothing */
    bfd_campaign_row r2 = campaign("c0000000000000002", "alice");
    insert(f->s, &r2);
    assert_int_equal(bfd_campaign_finish(f->s, r2.id, BFD_FAILED, 1.0, NULL, "model blob " ID_A " is fine", NULL, &err),
                     BF_OK);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "alice", ID_A), 0);
}

/* A database of schema 1 (before items.corrupt and the worker-death
 * columns) gains them, 0 for all. */
void test_schema_1_upgraded(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    put_item(f->s, BFD_MODEL, "alice", ID_A, "m", NULL);
    bfd_store_close(f->s);
    f->s = NULL;
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "ALTER TABLE items DROP COLUMN corrupt; ALTER TABLE campaigns DROP COLUMN deaths; "
                                      "ALTER TABLE campaigns DROP COLUMN death_reasons; "
                                      "ALTER TABLE campaigns DROP COLUMN inflight; "
                                      "ALTER TABLE campaigns DROP COLUMN executor_job; PRAGMA user_version = 1", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(bfd_store_open(f->db, &f->s, &err), BF_OK);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "alice", ID_A), 0);
    assert_int_equal(bfd_item_mark_corrupt(f->s, BFD_MODEL, ID_A, &err), BF_OK);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "alice", ID_A), 1);
    reopen(f);   /* now at the current version: opening again changes nothing */
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "alice", ID_A), 1);
}

/* A database of schema 3 (items limited to models and datasets) takes error
 * maps once upgraded; its rows keep their seq numbers, and the next row's
 * seq is past every one given out before (a page token stays good). */
void test_schema_3_takes_error_maps(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_item it = {0};
    put_item(f->s, BFD_MODEL, "alice", ID_A, "m", NULL);
    put_item(f->s, BFD_DATASET, "alice", ID_B, "d", NULL);
    assert_int_equal(bfd_item_delete(f->s, BFD_DATASET, "alice", ID_B, &err), BF_OK);   /* seq 2 is spent */
    bfd_store_close(f->s);
    f->s = NULL;
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    /* the v3 table, by hand: kind limited to 0 and 1 */
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE items_old (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                                      " kind INTEGER NOT NULL CHECK (kind IN (0, 1)), tenant TEXT NOT NULL,"
                                      " id TEXT NOT NULL, name TEXT NOT NULL, size INTEGER NOT NULL,"
                                      " summary_json TEXT NOT NULL, created REAL NOT NULL,"
                                      " corrupt INTEGER NOT NULL DEFAULT 0, UNIQUE (kind, tenant, id));"
                                      "INSERT INTO items_old SELECT seq, kind, tenant, id, name, size, summary_json,"
                                      " created, corrupt FROM items;"
                                      "UPDATE sqlite_sequence SET seq = 2 WHERE name = 'items_old';"
                                      "DROP TABLE items; ALTER TABLE items_old RENAME TO items;"
                                      "PRAGMA user_version = 3", NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "INSERT INTO items (kind, tenant, id, name, size, summary_json, created)"
                                      " VALUES (2, 'a', 'x', '', 0, '{}', 0)", NULL, NULL, NULL),
                     SQLITE_CONSTRAINT);
    sqlite3_close(db);
    assert_int_equal(bfd_store_open(f->db, &f->s, &err), BF_OK);
    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "alice", ID_A, &it, &err), BF_OK);
    assert_int_equal(it.seq, 1);
    bfd_item_clear(&it);
    put_item(f->s, BFD_ERRMAP, "alice", ID_C, "chip.bfmap", NULL);
    assert_int_equal(bfd_item_get(f->s, BFD_ERRMAP, "alice", ID_C, &it, &err), BF_OK);
    assert_int_equal(it.seq, 3);
    assert_string_equal(it.name, "chip.bfmap");
    bfd_item_clear(&it);
    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "alice", ID_C, &it, &err), BF_ENOTFOUND);   /* kinds apart */
    reopen(f);   /* now at the current version: opening again changes nothing */
    assert_int_equal(bfd_item_get(f->s, BFD_ERRMAP, "alice", ID_C, &it, &err), BF_OK);
    bfd_item_clear(&it);
}

/* An unfinished campaign holds the error map its spec names ("sha256:ID"). */
void test_campaign_uses_error_map(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    int64_t count = -1;
    bfd_campaign_row r = campaign("c0000000000000001", "alice");
    r.spec_json = (char *)"{\"faults\":{\"model\":\"profiled\",\"error_map\":\"sha256:" ID_C "\"}}";
    insert(f->s, &r);
    assert_int_equal(bfd_campaign_using(f->s, "alice", BFD_ERRMAP, ID_C, &count, &err), BF_OK);
    assert_int_equal(count, 1);
    assert_int_equal(bfd_campaign_using(f->s, "alice", BFD_ERRMAP, ID_A, &count, &err), BF_OK);
    assert_int_equal(count, 0);   /* ID_A is its model */
    assert_int_equal(bfd_campaign_using(f->s, "bob", BFD_ERRMAP, ID_C, &count, &err), BF_OK);
    assert_int_equal(count, 0);
    assert_int_equal(bfd_campaign_finish(f->s, r.id, BFD_SUCCEEDED, 2.0, "{}", NULL, NULL, &err), BF_OK);
    assert_int_equal(bfd_campaign_using(f->s, "alice", BFD_ERRMAP, ID_C, &count, &err), BF_OK);
    assert_int_equal(count, 0);   /* finished: the map may go */
    assert_int_equal(bfd_campaign_using(f->s, "alice", (bfd_kind)7, ID_C, &count, &err), BF_EINVAL);
    /* a worker that found the map's blob rotten: the map is marked, not the model of the same bytes */
    put_item(f->s, BFD_ERRMAP, "alice", ID_C, "chip.bfmap", NULL);
    put_item(f->s, BFD_MODEL, "alice", ID_C, "m", NULL);
    bfd_campaign_row r2 = campaign("c0000000000000002", "alice");
    insert(f->s, &r2);
    assert_int_equal(bfd_campaign_finish(f->s, r2.id, BFD_FAILED, 3.0, NULL,
                                         "chunk 0: error map blob " ID_C " is corrupt (sha256 mismatch)", NULL, &err),
                     BF_OK);
    assert_int_equal(corrupt_of(f->s, BFD_ERRMAP, "alice", ID_C), 1);
    assert_int_equal(corrupt_of(f->s, BFD_MODEL, "alice", ID_C), 0);
}
