/* Campaigns. A campaign's state only moves forward: queued → running → one
 * final state, and the first final state wins, so a worker reporting after a
 * cancel cannot overwrite it. Its chunk checkpoints (store_chunk.c) exist
 * only while it is unfinished: finishing drops them in the same transaction,
 * because the final result now holds what they did. */
#include "store/store_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/blob.h"

#define CAMP_COLS_HEAD                                                                                           \
    "seq, id, tenant, state, spec_json, gates_json, model_id, dataset_id, idem_key, idem_hash, created, started, " \
    "finished, trials_planned, n_chunks, "
#define CAMP_COLS CAMP_COLS_HEAD "result_json, error, verdict"
/* Listings: results can be large, so a listed row's result_json holds only
 * the summary's trials and outcomes, cut out by SQLite (what a listing's
 * progress shows: without it, every finished campaign listed 0 trials done). */
#define CAMP_COLS_NO_RESULT                                                                                   \
    CAMP_COLS_HEAD                                                                                            \
    "CASE WHEN json_valid(result_json) THEN json_object('summary', json_object("                             \
    "'trials', json_extract(result_json, '$.summary.trials'), "                                               \
    "'outcomes', json(ifnull(json_extract(result_json, '$.summary.outcomes'), '{}')))) END, error, verdict"

static const char *const state_names[BFD_STATE_COUNT] = {"queued", "running", "succeeded", "failed", "canceled"};

const char *bfd_state_name(bfd_state st)
{
    return (unsigned)st < BFD_STATE_COUNT ? state_names[st] : "unknown";
}

int bfd_state_parse(const char *name)
{
    for (int i = 0; name && i < BFD_STATE_COUNT; i++)
        if (!strcmp(name, state_names[i])) return i;
    return -1;
}

void bfd_campaign_row_clear(bfd_campaign_row *r)
{
    if (!r) return;
    free(r->tenant);
    free(r->spec_json);
    free(r->gates_json);
    free(r->idem_key);
    free(r->result_json);
    free(r->error);
    free(r->verdict);
    memset(r, 0, sizeof *r);
}

void bfd_campaign_rows_free(bfd_campaign_row *rows, size_t n)
{
    if (!rows) return;
    for (size_t i = 0; i < n; i++) bfd_campaign_row_clear(&rows[i]);
    free(rows);
}

/* Binds a fixed array by its size, so a missing NUL cannot run past it. */
static int bind_fixed(sqlite3_stmt *q, int i, const char *a, size_t size)
{
    return sqlite3_bind_text(q, i, a, (int)strnlen(a, size - 1), SQLITE_STATIC);
}

static bf_status read_row(bfd_store *s, sqlite3_stmt *q, bfd_campaign_row *r, bf_error *err)
{
    memset(r, 0, sizeof *r);
    r->seq = sqlite3_column_int64(q, 0);
    int state = sqlite3_column_int(q, 3);
    if (bfd__col_fixed(q, 1, r->id, sizeof r->id) || bfd__col_fixed(q, 6, r->model_id, sizeof r->model_id) ||
        bfd__col_fixed(q, 7, r->dataset_id, sizeof r->dataset_id) ||
        bfd__col_fixed(q, 9, r->idem_hash, sizeof r->idem_hash) || state < 0 || state >= BFD_STATE_COUNT)
        return bf_error_set(err, BF_EFORMAT, "%s: campaign row %lld has an oversized id or unknown state %d",
                            s->path, (long long)r->seq, state);
    r->state = (bfd_state)state;
    if (bfd__col_text(q, 2, &r->tenant) || bfd__col_text(q, 4, &r->spec_json) ||
        bfd__col_text(q, 5, &r->gates_json) || bfd__col_text(q, 8, &r->idem_key) ||
        bfd__col_text(q, 15, &r->result_json) || bfd__col_text(q, 16, &r->error) ||
        bfd__col_text(q, 17, &r->verdict)) {
        bfd_campaign_row_clear(r);
        return bf_error_set(err, BF_ENOMEM, "%s: out of memory reading campaign row %lld", s->path,
                            (long long)r->seq);
    }
    r->created = sqlite3_column_double(q, 10);
    r->started = sqlite3_column_double(q, 11);
    r->finished = sqlite3_column_double(q, 12);
    r->trials_planned = sqlite3_column_int64(q, 13);
    r->n_chunks = sqlite3_column_int(q, 14);
    return BF_OK;
}

/* Steps a bound query for at most one row. */
static bf_status get_one(bfd_store *s, sqlite3_stmt *q, const char *what, bfd_campaign_row *out, bf_error *err)
{
    int rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) return bf_error_set(err, BF_ENOTFOUND, "%s not found", what);
    if (rc != SQLITE_ROW) return bfd__fail(s, rc, "cannot look up a campaign", err);
    return read_row(s, q, out, err);
}

/* Reads every row of a bound query; limit > 0 stops there and sets *more if
 * another row follows (the query asks for limit + 1). */
static bf_status read_rows(bfd_store *s, sqlite3_stmt *q, int limit, bfd_campaign_row **rows, size_t *n, int *more,
                           bf_error *err)
{
    bf_status st = BF_OK;
    bfd_campaign_row *v = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (limit > 0 && len == (size_t)limit) {
            *more = 1;
            break;
        }
        if (bfd__grow((void **)&v, &cap, len, sizeof *v)) {
            st = bf_error_set(err, BF_ENOMEM, "%s: out of memory listing campaigns", s->path);
            goto out;
        }
        if ((st = read_row(s, q, &v[len], err))) goto out;
        len++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = bfd__fail(s, rc, "cannot list campaigns", err);
        goto out;
    }
    *rows = v;
    *n = len;
    v = NULL;

out:
    bfd_campaign_rows_free(v, len);
    return st;
}

bf_status bfd_campaign_insert(bfd_store *s, bfd_campaign_row *r, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    char what[80];
    int rc;
    if (!r->id[0] || !r->tenant || !r->spec_json || (unsigned)r->state >= BFD_STATE_COUNT)
        return bf_error_set(err, BF_EINVAL, "campaign '%.32s' needs an id, a tenant, a spec and a valid state",
                            r->id);
    if ((st = bfd__stmt(s, ST_CAMP_INSERT,
                        "INSERT INTO campaigns (id, tenant, state, spec_json, gates_json, model_id, dataset_id,"
                        " idem_key, idem_hash, created, started, finished, trials_planned, n_chunks, result_json,"
                        " error, verdict)"
                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                        &q, err)))
        goto out;
    if ((rc = bind_fixed(q, 1, r->id, sizeof r->id)) || (rc = bfd__bind_text(q, 2, r->tenant)) ||
        (rc = sqlite3_bind_int(q, 3, (int)r->state)) || (rc = bfd__bind_text(q, 4, r->spec_json)) ||
        (rc = bfd__bind_text(q, 5, r->gates_json)) || (rc = bind_fixed(q, 6, r->model_id, sizeof r->model_id)) ||
        (rc = bind_fixed(q, 7, r->dataset_id, sizeof r->dataset_id)) || (rc = bfd__bind_text(q, 8, r->idem_key)) ||
        (rc = bind_fixed(q, 9, r->idem_hash, sizeof r->idem_hash)) ||
        (rc = sqlite3_bind_double(q, 10, r->created)) || (rc = sqlite3_bind_double(q, 11, r->started)) ||
        (rc = sqlite3_bind_double(q, 12, r->finished)) || (rc = sqlite3_bind_int64(q, 13, r->trials_planned)) ||
        (rc = sqlite3_bind_int(q, 14, r->n_chunks)) || (rc = bfd__bind_text(q, 15, r->result_json)) ||
        (rc = bfd__bind_text(q, 16, r->error)) || (rc = bfd__bind_text(q, 17, r->verdict))) {
        st = bfd__fail(s, rc, "cannot bind a campaign", err);
        goto out;
    }
    /* a duplicate id, or idempotency key for the tenant, fails here as BF_EINVAL */
    snprintf(what, sizeof what, "cannot store campaign %.32s", r->id);
    if ((st = bfd__exec(s, q, what, err))) goto out;
    r->seq = sqlite3_last_insert_rowid(s->db);

out:
    bfd__release(q);
    return st;
}

bf_status bfd_campaign_get(bfd_store *s, const char *tenant, const char *id, bfd_campaign_row *out, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    char what[64];
    int rc;
    memset(out, 0, sizeof *out);
    if ((st = bfd__stmt(s, ST_CAMP_GET,
                        "SELECT " CAMP_COLS " FROM campaigns WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)", &q,
                        err)))
        goto out;
    if ((rc = bfd__bind_text(q, 1, id)) || (rc = bfd__bind_text(q, 2, tenant))) {
        st = bfd__fail(s, rc, "cannot bind a campaign lookup", err);
        goto out;
    }
    snprintf(what, sizeof what, "campaign %.40s", id ? id : "(null)");
    st = get_one(s, q, what, out, err);

out:
    bfd__release(q);
    return st;
}

bf_status bfd_campaign_find_idem(bfd_store *s, const char *tenant, const char *key, bfd_campaign_row *out,
                                 bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    memset(out, 0, sizeof *out);
    if ((st = bfd__stmt(s, ST_CAMP_IDEM, "SELECT " CAMP_COLS " FROM campaigns WHERE tenant = ?1 AND idem_key = ?2",
                        &q, err)))
        goto out;
    if ((rc = bfd__bind_text(q, 1, tenant)) || (rc = bfd__bind_text(q, 2, key))) {
        st = bfd__fail(s, rc, "cannot bind an idempotency lookup", err);
        goto out;
    }
    st = get_one(s, q, "campaign for that Idempotency-Key", out, err);

out:
    bfd__release(q);
    return st;
}

bf_status bfd_campaign_list(bfd_store *s, const char *tenant, int state, int64_t after_seq, int limit,
                            bfd_campaign_row **rows, size_t *n, int *more, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    *rows = NULL;
    *n = 0;
    *more = 0;
    if (limit <= 0) return bf_error_set(err, BF_EINVAL, "page size %d: must be at least 1", limit);
    if (state >= BFD_STATE_COUNT) return bf_error_set(err, BF_EINVAL, "unknown campaign state %d", state);
    if ((st = bfd__stmt(s, ST_CAMP_LIST,
                        "SELECT " CAMP_COLS_NO_RESULT " FROM campaigns"
                        " WHERE tenant = ?1 AND (?2 < 0 OR state = ?2) AND seq > ?3 ORDER BY seq LIMIT ?4",
                        &q, err)))
        goto out;
    if ((rc = bfd__bind_text(q, 1, tenant)) || (rc = sqlite3_bind_int(q, 2, state)) ||
        (rc = sqlite3_bind_int64(q, 3, after_seq)) || (rc = sqlite3_bind_int64(q, 4, (int64_t)limit + 1))) {
        st = bfd__fail(s, rc, "cannot bind a campaign listing", err);
        goto out;
    }
    st = read_rows(s, q, limit, rows, n, more, err);

out:
    if (st) *more = 0;
    bfd__release(q);
    return st;
}

bf_status bfd_campaign_unfinished(bfd_store *s, bfd_campaign_row **rows, size_t *n, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int more = 0;
    *rows = NULL;
    *n = 0;
    if ((st = bfd__stmt(s, ST_CAMP_UNFINISHED, "SELECT " CAMP_COLS " FROM campaigns WHERE state IN (0, 1) ORDER BY seq",
                        &q, err)))
        goto out;
    st = read_rows(s, q, 0, rows, n, &more, err);

out:
    bfd__release(q);
    return st;
}

bf_status bfd_campaign_using(bfd_store *s, const char *tenant, bfd_kind k, const char *id, int64_t *count,
                             bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    if ((unsigned)k >= BFD_KIND_COUNT) return bf_error_set(err, BF_EINVAL, "unknown item kind %d", (int)k);
    /* an error map has no column: a spec names it, and few campaigns are unfinished */
    if ((st = bfd__stmt(s, ST_CAMP_USING,
                        "SELECT count(*) FROM campaigns WHERE tenant = ?1 AND state IN (0, 1)"
                        " AND (CASE ?2 WHEN 0 THEN model_id WHEN 1 THEN dataset_id"
                        " ELSE substr(json_extract(spec_json, '$.faults.error_map'), 8) END) = ?3",
                        &q, err)))
        goto out;
    if ((rc = bfd__bind_text(q, 1, tenant)) || (rc = sqlite3_bind_int(q, 2, (int)k)) ||
        (rc = bfd__bind_text(q, 3, id))) {
        st = bfd__fail(s, rc, "cannot bind a campaign usage count", err);
        goto out;
    }
    if ((rc = sqlite3_step(q)) != SQLITE_ROW) {
        st = bfd__fail(s, rc, "cannot count the campaigns using an item", err);
        goto out;
    }
    *count = sqlite3_column_int64(q, 0);

out:
    bfd__release(q);
    return st;
}

bf_status bfd_campaign_set_running(bfd_store *s, const char *id, double started, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    bfd_state cur;
    int n_chunks, rc;
    if ((st = bfd__stmt(s, ST_CAMP_RUN, "UPDATE campaigns SET state = 1, started = ?2 WHERE id = ?1", &q, err)))
        goto out;
    if ((st = bfd__begin(s, err))) goto out;
    if ((st = bfd__campaign_state(s, id, &cur, &n_chunks, err))) goto out;
    /* running again is allowed: a restart resumes what was running */
    if (cur > BFD_RUNNING) {
        st = bf_error_set(err, BF_EINVAL, "campaign %.40s is already %s", id, bfd_state_name(cur));
        goto out;
    }
    if ((rc = bfd__bind_text(q, 1, id)) || (rc = sqlite3_bind_double(q, 2, started))) {
        st = bfd__fail(s, rc, "cannot bind a campaign start", err);
        goto out;
    }
    if ((st = bfd__exec(s, q, "cannot mark a campaign running", err))) goto out;
    st = bfd__commit(s, err);

out:
    bfd__release(q);
    if (st) bfd__rollback(s);
    return st;
}

bf_status bfd_campaign_finish(bfd_store *s, const char *id, bfd_state st_final, double finished,
                              const char *result_json, const char *error, const char *verdict, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    bfd_state cur;
    int n_chunks, rc;
    if (st_final < BFD_SUCCEEDED || st_final >= BFD_STATE_COUNT)
        return bf_error_set(err, BF_EINVAL, "campaign %.40s cannot finish as %s", id, bfd_state_name(st_final));
    if ((st = bfd__stmt(s, ST_CAMP_FINISH,
                        "UPDATE campaigns SET state = ?2, finished = ?3, result_json = ?4, error = ?5, verdict = ?6"
                        " WHERE id = ?1",
                        &q, err)))
        goto out;
    if ((st = bfd__begin(s, err))) goto out;
    if ((st = bfd__campaign_state(s, id, &cur, &n_chunks, err))) goto out;
    if (cur > BFD_RUNNING) {   /* the first final state stands */
        st = bf_error_set(err, BF_EINVAL, "campaign %.40s is already %s", id, bfd_state_name(cur));
        goto out;
    }
    if ((rc = bfd__bind_text(q, 1, id)) || (rc = sqlite3_bind_int(q, 2, (int)st_final)) ||
        (rc = sqlite3_bind_double(q, 3, finished)) || (rc = bfd__bind_text(q, 4, result_json)) ||
        (rc = bfd__bind_text(q, 5, error)) || (rc = bfd__bind_text(q, 6, verdict))) {
        st = bfd__fail(s, rc, "cannot bind a campaign's end", err);
        goto out;
    }
    if ((st = bfd__exec(s, q, "cannot finish a campaign", err))) goto out;
    if ((st = bfd__chunks_drop(s, id, err))) goto out;
    char what[16], sha[65];
    if (st_final == BFD_FAILED && bfd_blob_corrupt_named(error, what, sha) &&
        (st = bfd_item_mark_corrupt(s, !strcmp(what, "model") ? BFD_MODEL : !strcmp(what, "dataset") ? BFD_DATASET
                                                                                                   : BFD_ERRMAP, sha, err)))
        goto out;
    st = bfd__commit(s, err);

out:
    bfd__release(q);
    if (st) bfd__rollback(s);
    return st;
}

bf_status bfd_campaign_delete(bfd_store *s, const char *id, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    if ((st = bfd__stmt(s, ST_CAMP_DELETE, "DELETE FROM campaigns WHERE id = ?1", &q, err))) goto out;
    if ((st = bfd__begin(s, err))) goto out;
    /* explicitly, rather than trusting ON DELETE CASCADE to be switched on */
    if ((st = bfd__chunks_drop(s, id, err))) goto out;
    if ((rc = bfd__bind_text(q, 1, id))) {
        st = bfd__fail(s, rc, "cannot bind a campaign deletion", err);
        goto out;
    }
    if ((st = bfd__exec(s, q, "cannot delete a campaign", err))) goto out;
    if (sqlite3_changes(s->db) == 0) {
        st = bf_error_set(err, BF_ENOTFOUND, "campaign %.40s not found", id ? id : "(null)");
        goto out;
    }
    st = bfd__commit(s, err);

out:
    bfd__release(q);
    if (st) bfd__rollback(s);
    return st;
}

bf_status bfd_campaign_counts(bfd_store *s, int64_t counts[BFD_STATE_COUNT], bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    for (int i = 0; i < BFD_STATE_COUNT; i++) counts[i] = 0;
    if ((st = bfd__stmt(s, ST_CAMP_COUNTS, "SELECT state, count(*) FROM campaigns GROUP BY state", &q, err)))
        goto out;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int state = sqlite3_column_int(q, 0);
        if (state >= 0 && state < BFD_STATE_COUNT) counts[state] = sqlite3_column_int64(q, 1);
    }
    if (rc != SQLITE_DONE) st = bfd__fail(s, rc, "cannot count campaigns", err);

out:
    bfd__release(q);
    return st;
}

bf_status bfd__campaign_lookup(bfd_store *s, enum bfd__stmt_id sid, const char *sql, const char *id, const char *what,
                               sqlite3_stmt **out, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc;
    bf_status st = bfd__stmt(s, sid, sql, &q, err);
    *out = NULL;
    if (st) return st;
    if ((rc = bfd__bind_text(q, 1, id)))
        st = bfd__fail(s, rc, "cannot bind a campaign id", err);
    else if ((rc = sqlite3_step(q)) == SQLITE_DONE)
        st = bf_error_set(err, BF_ENOTFOUND, "campaign %.40s not found", id ? id : "(null)");
    else if (rc != SQLITE_ROW)
        st = bfd__fail(s, rc, what, err);
    if (st) bfd__release(q);
    else *out = q;
    return st;
}

bf_status bfd__campaign_state(bfd_store *s, const char *id, bfd_state *state, int *n_chunks, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    bf_status st = bfd__campaign_lookup(s, ST_CAMP_STATE, "SELECT state, n_chunks FROM campaigns WHERE id = ?1", id,
                                        "cannot read a campaign's state", &q, err);
    if (st) return st;
    *state = (bfd_state)sqlite3_column_int(q, 0);
    *n_chunks = sqlite3_column_int(q, 1);
    bfd__release(q);
    return BF_OK;
}
