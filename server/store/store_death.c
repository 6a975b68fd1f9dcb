/* Worker deaths and chunks in flight, per campaign (see store.h): the
 * durable half of "a campaign whose workers died twice is failed". */
#include "store/store_impl.h"

#include <stdlib.h>
#include <string.h>

bf_status bfd_campaign_inflight(bfd_store *s, const char *id, int delta, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc;
    bf_status st = bfd__stmt(s, ST_DEATH_INFLIGHT, "UPDATE campaigns SET inflight = max(inflight + ?2, 0) WHERE id = ?1",
                             &q, err);
    if (st) return st;
    if ((rc = bfd__bind_text(q, 1, id)) || (rc = sqlite3_bind_int(q, 2, delta)))
        st = bfd__fail(s, rc, "cannot bind an in-flight count", err);
    else
        st = bfd__exec(s, q, "cannot count a chunk in flight", err);
    bfd__release(q);
    return st;
}

bf_status bfd_campaign_inflight_clear(bfd_store *s, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    bf_status st = bfd__stmt(s, ST_DEATH_CLEAR, "UPDATE campaigns SET inflight = 0 WHERE inflight != 0", &q, err);
    if (st) return st;
    st = bfd__exec(s, q, "cannot clear the chunks in flight", err);
    bfd__release(q);
    return st;
}

/* reasons may be NULL (not wanted) */
static bf_status read_deaths(bfd_store *s, const char *id, int *deaths, int *inflight, char **reasons, bf_error *err)
{
    sqlite3_stmt *q = NULL;
    bf_status st = bfd__campaign_lookup(s, ST_DEATH_GET, "SELECT deaths, inflight, death_reasons FROM campaigns WHERE id = ?1",
                                        id, "cannot read a death count", &q, err);
    if (st) return st;
    *deaths = sqlite3_column_int(q, 0);
    *inflight = sqlite3_column_int(q, 1);
    if (reasons && bfd__col_text(q, 2, reasons))
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory reading the death reasons of campaign %.40s", s->path, id);
    bfd__release(q);
    return st;
}

bf_status bfd_campaign_deaths(bfd_store *s, const char *id, int *deaths, int *inflight, bf_error *err)
{
    return read_deaths(s, id, deaths, inflight, NULL, err);
}

bf_status bfd_campaign_death(bfd_store *s, const char *id, const char *reason, int all, int *deaths, char **reasons,
                             bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *add = NULL;
    int rc, inflight = 0;
    *reasons = NULL;
    if ((st = bfd__stmt(s, ST_DEATH_ADD,
                        "UPDATE campaigns SET deaths = deaths + 1,"
                        " death_reasons = CASE WHEN death_reasons IS NULL THEN ?2 ELSE death_reasons || '; ' || ?2 END,"
                        " inflight = CASE WHEN ?3 THEN 0 ELSE max(inflight - 1, 0) END WHERE id = ?1",
                        &add, err)))
        goto out;
    if ((st = bfd__begin(s, err))) goto out;
    if ((rc = bfd__bind_text(add, 1, id)) || (rc = bfd__bind_text(add, 2, reason)) ||
        (rc = sqlite3_bind_int(add, 3, all != 0))) {
        st = bfd__fail(s, rc, "cannot bind a worker death", err);
        goto out;
    }
    if ((st = bfd__exec(s, add, "cannot record a worker death", err))) goto out;
    if (sqlite3_changes(s->db) != 1) {
        st = bf_error_set(err, BF_ENOTFOUND, "campaign %.40s not found", id);
        goto out;
    }
    if ((st = read_deaths(s, id, deaths, &inflight, reasons, err))) goto out;
    st = bfd__commit(s, err);

out:
    bfd__release(add);
    if (st) {
        bfd__rollback(s);
        free(*reasons);
        *reasons = NULL;
    }
    return st;
}
