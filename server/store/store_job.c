/* The cluster scheduler's job of a campaign (store.h, "executor jobs"). */
#include <string.h>

#include "store/store_impl.h"

bf_status bfd_campaign_set_job(bfd_store *s, const char *id, const char *job, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc;
    if (strlen(job) > 63) return bf_error_set(err, BF_EINVAL, "job id '%.70s' is longer than 63 characters", job);
    bf_status st = bfd__stmt(s, ST_JOB_SET, "UPDATE campaigns SET executor_job = ?2 WHERE id = ?1", &q, err);
    if (st) return st;
    if ((rc = bfd__bind_text(q, 1, id)) || (rc = bfd__bind_text(q, 2, job)))
        st = bfd__fail(s, rc, "cannot bind a job id", err);
    else if ((st = bfd__exec(s, q, "cannot record a campaign's job", err)) == BF_OK && sqlite3_changes(s->db) == 0)
        st = bf_error_set(err, BF_ENOTFOUND, "campaign %.40s not found", id);
    bfd__release(q);
    return st;
}

bf_status bfd_campaign_job(bfd_store *s, const char *id, char *job, size_t n, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc;
    job[0] = 0;
    bf_status st = bfd__stmt(s, ST_JOB_GET, "SELECT executor_job FROM campaigns WHERE id = ?1", &q, err);
    if (st) return st;
    if ((rc = bfd__bind_text(q, 1, id))) {
        st = bfd__fail(s, rc, "cannot bind a job id", err);
        goto out;
    }
    rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) {
        st = bf_error_set(err, BF_ENOTFOUND, "campaign %.40s not found", id);
        goto out;
    }
    if (rc != SQLITE_ROW) {
        st = bfd__fail(s, rc, "cannot read a campaign's job", err);
        goto out;
    }
    const unsigned char *t = sqlite3_column_text(q, 0);
    if (t) {
        size_t k = strlen((const char *)t);
        if (k >= n) k = n - 1;
        memcpy(job, t, k);
        job[k] = 0;
    }
out:
    bfd__release(q);
    return st;
}
