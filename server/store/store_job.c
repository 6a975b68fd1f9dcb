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
    job[0] = 0;
    bf_status st = bfd__campaign_lookup(s, ST_JOB_GET, "SELECT executor_job FROM campaigns WHERE id = ?1", id,
                                        "cannot read a campaign's job", &q, err);
    if (st) return st;
    const unsigned char *t = sqlite3_column_text(q, 0);
    if (t) {
        size_t k = strlen((const char *)t);
        if (k >= n) k = n - 1;
        memcpy(job, t, k);
        job[k] = 0;
    }
    bfd__release(q);
    return BF_OK;
}
