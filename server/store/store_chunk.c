/* Checkpoints: the finished chunks of an unfinished campaign, one row per
 * chunk index. A restart reads them back and runs only the rest; finishing
 * or deleting the campaign drops them (see store_campaign.c). */
#include "store/store_impl.h"

#include <stdlib.h>
#include <string.h>

bf_status bfd__chunks_drop(bfd_store *s, const char *id, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc;
    bf_status st = bfd__stmt(s, ST_CHUNK_DROP, "DELETE FROM chunks WHERE campaign_id = ?1", &q, err);
    if (st) return st;
    if ((rc = bfd__bind_text(q, 1, id)))
        st = bfd__fail(s, rc, "cannot bind a chunk deletion", err);
    else
        st = bfd__exec(s, q, "cannot drop a campaign's chunks", err);
    bfd__release(q);
    return st;
}

bf_status bfd_chunk_put(bfd_store *s, const char *campaign_id, int idx, const char *result_json, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    bfd_state cur;
    int n_chunks, rc;
    if (!result_json) return bf_error_set(err, BF_EINVAL, "chunk %d of campaign %.40s has no result", idx, campaign_id);
    /* the same chunk twice (a retry after a restart) replaces: both hold the same trials */
    if ((st = bfd__stmt(s, ST_CHUNK_PUT,
                        "INSERT INTO chunks (campaign_id, idx, result_json) VALUES (?1, ?2, ?3)"
                        " ON CONFLICT (campaign_id, idx) DO UPDATE SET result_json = excluded.result_json",
                        &q, err)))
        goto out;
    if ((st = bfd__begin(s, err))) goto out;
    if ((st = bfd__campaign_state(s, campaign_id, &cur, &n_chunks, err))) goto out;
    /* a finished campaign's chunks are gone for good: a late one would linger */
    if (cur > BFD_RUNNING) {
        st = bf_error_set(err, BF_EINVAL, "campaign %.40s is already %s: chunk %d not kept", campaign_id,
                          bfd_state_name(cur), idx);
        goto out;
    }
    if (idx < 0 || idx >= n_chunks) {
        st = bf_error_set(err, BF_ERANGE, "chunk %d of campaign %.40s is outside 0..%d", idx, campaign_id,
                          n_chunks - 1);
        goto out;
    }
    if ((rc = bfd__bind_text(q, 1, campaign_id)) || (rc = sqlite3_bind_int(q, 2, idx)) ||
        (rc = bfd__bind_text(q, 3, result_json))) {
        st = bfd__fail(s, rc, "cannot bind a chunk", err);
        goto out;
    }
    if ((st = bfd__exec(s, q, "cannot store a chunk", err))) goto out;
    st = bfd__commit(s, err);

out:
    bfd__release(q);
    if (st) bfd__rollback(s);
    return st;
}

bf_status bfd_chunk_list(bfd_store *s, const char *campaign_id, int **idx, char ***json, size_t *n, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int *iv = NULL;
    char **jv = NULL;
    size_t len = 0, icap = 0, jcap = 0;
    int rc;
    *idx = NULL;
    *json = NULL;
    *n = 0;
    if ((st = bfd__stmt(s, ST_CHUNK_LIST, "SELECT idx, result_json FROM chunks WHERE campaign_id = ?1 ORDER BY idx",
                        &q, err)))
        goto out;
    if ((rc = bfd__bind_text(q, 1, campaign_id))) {
        st = bfd__fail(s, rc, "cannot bind a chunk listing", err);
        goto out;
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (bfd__grow((void **)&iv, &icap, len, sizeof *iv) || bfd__grow((void **)&jv, &jcap, len, sizeof *jv) ||
            bfd__col_text(q, 1, &jv[len]) || !jv[len]) {
            st = bf_error_set(err, BF_ENOMEM, "%s: out of memory reading the chunks of campaign %.40s", s->path,
                              campaign_id);
            goto out;
        }
        iv[len] = sqlite3_column_int(q, 0);
        len++;
    }
    if (rc != SQLITE_DONE) {
        st = bfd__fail(s, rc, "cannot list chunks", err);
        goto out;
    }
    *idx = iv;
    *json = jv;
    *n = len;
    iv = NULL;
    jv = NULL;

out:
    bfd__release(q);
    bfd_chunk_list_free(iv, jv, len);
    return st;
}

void bfd_chunk_list_free(int *idx, char **json, size_t n)
{
    if (json)
        for (size_t i = 0; i < n; i++) free(json[i]);
    free(json);
    free(idx);
}
