/* Models, datasets and error maps: one table, keyed (kind, tenant, id), so two tenants
 * uploading the same bytes get a row each over one blob, and a tenant never
 * sees, or learns of, another's rows. */
#include "store/store_impl.h"

#include <stdlib.h>
#include <string.h>

#define ITEM_COLS "seq, id, tenant, name, size, summary_json, created, corrupt"

const char *bfd_kind_name(bfd_kind k)
{
    return k == BFD_MODEL ? "model" : k == BFD_DATASET ? "dataset" : "error map";
}
#define kind_name bfd_kind_name

static bf_status check_kind(bfd_kind k, bf_error *err)
{
    if ((unsigned)k >= BFD_KIND_COUNT) return bf_error_set(err, BF_EINVAL, "unknown item kind %d", (int)k);
    return BF_OK;
}

void bfd_item_clear(bfd_item *it)
{
    if (!it) return;
    free(it->tenant);
    free(it->name);
    free(it->summary_json);
    memset(it, 0, sizeof *it);
}

static bf_status read_item(bfd_store *s, sqlite3_stmt *q, bfd_item *it, bf_error *err)
{
    memset(it, 0, sizeof *it);
    it->seq = sqlite3_column_int64(q, 0);
    if (bfd__col_fixed(q, 1, it->id, sizeof it->id))
        return bf_error_set(err, BF_EFORMAT, "%s: item %lld has an id longer than 64 characters", s->path,
                            (long long)it->seq);
    if (bfd__col_text(q, 2, &it->tenant) || bfd__col_text(q, 3, &it->name) ||
        bfd__col_text(q, 5, &it->summary_json)) {
        bfd_item_clear(it);
        return bf_error_set(err, BF_ENOMEM, "%s: out of memory reading item %lld", s->path, (long long)it->seq);
    }
    it->size = sqlite3_column_int64(q, 4);
    it->created = sqlite3_column_double(q, 6);
    it->corrupt = sqlite3_column_int(q, 7) != 0;
    return BF_OK;
}

bf_status bfd_item_put(bfd_store *s, bfd_kind k, const bfd_item *it, int *existed, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL, *heal = NULL;
    int rc, added;
    if (existed) *existed = 0;
    if ((st = check_kind(k, err))) return st;
    if (!it->tenant) return bf_error_set(err, BF_EINVAL, "%s %.64s has no tenant", kind_name(k), it->id);
    if ((st = bfd__stmt(s, ST_ITEM_PUT,
                        "INSERT INTO items (kind, tenant, id, name, size, summary_json, created)"
                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (kind, tenant, id) DO NOTHING",
                        &q, err)))
        goto out;
    /* the id is a fixed array: bound by its size, not by trust in a NUL */
    if ((rc = sqlite3_bind_int(q, 1, (int)k)) || (rc = bfd__bind_text(q, 2, it->tenant)) ||
        (rc = sqlite3_bind_text(q, 3, it->id, (int)strnlen(it->id, sizeof it->id - 1), SQLITE_STATIC)) ||
        (rc = bfd__bind_text(q, 4, it->name ? it->name : "")) ||
        (rc = sqlite3_bind_int64(q, 5, it->size)) ||
        (rc = bfd__bind_text(q, 6, it->summary_json ? it->summary_json : "{}")) ||
        (rc = sqlite3_bind_double(q, 7, it->created))) {
        st = bfd__fail(s, rc, "cannot bind an item", err);
        goto out;
    }
    if ((st = bfd__stmt(s, ST_ITEM_HEALED, "UPDATE items SET corrupt = 0 WHERE kind = ?1 AND id = ?2 AND corrupt",
                        &heal, err)))
        goto out;
    if ((rc = sqlite3_bind_int(heal, 1, (int)k)) ||
        (rc = sqlite3_bind_text(heal, 2, it->id, (int)strnlen(it->id, sizeof it->id - 1), SQLITE_STATIC))) {
        st = bfd__fail(s, rc, "cannot bind an item", err);
        goto out;
    }
    if ((st = bfd__begin(s, err))) goto out;
    if ((st = bfd__exec(s, q, "cannot store an item", err))) goto out;
    added = sqlite3_changes(s->db) != 0;
    if ((st = bfd__exec(s, heal, "cannot clear an item's corrupt mark", err))) goto out;
    if ((st = bfd__commit(s, err))) goto out;
    if (existed) *existed = !added;

out:
    bfd__release(q);
    bfd__release(heal);
    if (st) bfd__rollback(s);
    return st;
}

bf_status bfd_item_get(bfd_store *s, bfd_kind k, const char *tenant, const char *id, bfd_item *out, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    memset(out, 0, sizeof *out);
    if ((st = check_kind(k, err))) return st;
    if ((st = bfd__stmt(s, ST_ITEM_GET,
                        "SELECT " ITEM_COLS " FROM items WHERE kind = ?1 AND tenant = ?2 AND id = ?3", &q, err)))
        goto out;
    if ((rc = sqlite3_bind_int(q, 1, (int)k)) || (rc = bfd__bind_text(q, 2, tenant)) ||
        (rc = bfd__bind_text(q, 3, id))) {
        st = bfd__fail(s, rc, "cannot bind an item lookup", err);
        goto out;
    }
    rc = sqlite3_step(q);
    if (rc == SQLITE_DONE)   /* another tenant's looks the same as none: ids do not leak */
        st = bf_error_set(err, BF_ENOTFOUND, "%s %.80s not found", kind_name(k), id ? id : "(null)");
    else if (rc != SQLITE_ROW)
        st = bfd__fail(s, rc, "cannot look up an item", err);
    else
        st = read_item(s, q, out, err);

out:
    bfd__release(q);
    return st;
}

bf_status bfd_item_list(bfd_store *s, bfd_kind k, const char *tenant, int64_t after_seq, int limit,
                        bfd_item **items, size_t *n, int *more, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    bfd_item *v = NULL;
    size_t len = 0, cap = 0;
    int rc;
    *items = NULL;
    *n = 0;
    *more = 0;
    if ((st = check_kind(k, err))) return st;
    if (limit <= 0) return bf_error_set(err, BF_EINVAL, "page size %d: must be at least 1", limit);
    if ((st = bfd__stmt(s, ST_ITEM_LIST,
                        "SELECT " ITEM_COLS " FROM items WHERE kind = ?1 AND tenant = ?2 AND seq > ?3"
                        " ORDER BY seq LIMIT ?4",
                        &q, err)))
        goto out;
    /* one row past the page says whether there is a next page, in the same read */
    if ((rc = sqlite3_bind_int(q, 1, (int)k)) || (rc = bfd__bind_text(q, 2, tenant)) ||
        (rc = sqlite3_bind_int64(q, 3, after_seq)) || (rc = sqlite3_bind_int64(q, 4, (int64_t)limit + 1))) {
        st = bfd__fail(s, rc, "cannot bind an item listing", err);
        goto out;
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (len == (size_t)limit) {
            *more = 1;
            break;
        }
        if (bfd__grow((void **)&v, &cap, len, sizeof *v)) {
            st = bf_error_set(err, BF_ENOMEM, "%s: out of memory listing %ss", s->path, kind_name(k));
            goto out;
        }
        if ((st = read_item(s, q, &v[len], err))) goto out;
        len++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = bfd__fail(s, rc, "cannot list items", err);
        goto out;
    }
    *items = v;
    *n = len;
    v = NULL;

out:
    if (st) *more = 0;
    bfd__release(q);
    bfd_item_list_free(v, len);
    return st;
}

void bfd_item_list_free(bfd_item *items, size_t n)
{
    if (!items) return;
    for (size_t i = 0; i < n; i++) bfd_item_clear(&items[i]);
    free(items);
}

bf_status bfd_item_delete(bfd_store *s, bfd_kind k, const char *tenant, const char *id, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    if ((st = check_kind(k, err))) return st;
    if ((st = bfd__stmt(s, ST_ITEM_DELETE, "DELETE FROM items WHERE kind = ?1 AND tenant = ?2 AND id = ?3", &q,
                        err)))
        goto out;
    if ((rc = sqlite3_bind_int(q, 1, (int)k)) || (rc = bfd__bind_text(q, 2, tenant)) ||
        (rc = bfd__bind_text(q, 3, id))) {
        st = bfd__fail(s, rc, "cannot bind an item deletion", err);
        goto out;
    }
    if ((st = bfd__exec(s, q, "cannot delete an item", err))) goto out;
    if (sqlite3_changes(s->db) == 0)
        st = bf_error_set(err, BF_ENOTFOUND, "%s %.80s not found", kind_name(k), id ? id : "(null)");

out:
    bfd__release(q);
    return st;
}

bf_status bfd_item_mark_corrupt(bfd_store *s, bfd_kind k, const char *sha, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    if ((st = check_kind(k, err))) return st;
    if ((st = bfd__stmt(s, ST_ITEM_CORRUPT, "UPDATE items SET corrupt = 1 WHERE kind = ?1 AND id = ?2", &q, err)))
        goto out;
    if ((rc = sqlite3_bind_int(q, 1, (int)k)) || (rc = bfd__bind_text(q, 2, sha))) {
        st = bfd__fail(s, rc, "cannot bind a corrupt mark", err);
        goto out;
    }
    st = bfd__exec(s, q, "cannot mark an item corrupt", err);

out:
    bfd__release(q);
    return st;
}

bf_status bfd_blob_refs(bfd_store *s, const char *sha, int64_t *refs, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3_stmt *q = NULL;
    int rc;
    if ((st = bfd__stmt(s, ST_BLOB_REFS, "SELECT count(*) FROM items WHERE id = ?1", &q, err))) goto out;
    if ((rc = bfd__bind_text(q, 1, sha))) {
        st = bfd__fail(s, rc, "cannot bind a blob reference count", err);
        goto out;
    }
    if ((rc = sqlite3_step(q)) != SQLITE_ROW) {
        st = bfd__fail(s, rc, "cannot count blob references", err);
        goto out;
    }
    *refs = sqlite3_column_int64(q, 0);

out:
    bfd__release(q);
    return st;
}
