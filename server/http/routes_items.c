/* Models, datasets and error maps: uploads (checked by the engine in a
 * child process), list, get, delete. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "work/campaigns.h"
#include "work/check.h"
#include "http/routes.h"

static const char *kind_word(int k) { return bfd_kind_name((bfd_kind)k); }
static const char *kind_path(int k) { return k == BFD_DATASET ? "datasets" : k == BFD_ERRMAP ? "error-maps" : "models"; }

static int is_hex64(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return 0;
    return n == 64;
}

/* The API object: id, name, sha256, size, created, corrupt, then the summary's fields. */
static json_t *item_json(const bfd_item *it, int full)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:o, s:b}", "id", it->id, "name", it->name ? it->name : "", "sha256",
                          it->id, "size", (json_int_t)it->size, "created", bfd_time_json(it->created), "corrupt",
                          it->corrupt);
    json_t *sum = it->summary_json ? json_loads(it->summary_json, 0, NULL) : NULL;
    if (j && sum) {
        if (!full) {   /* lists stay small: the per-node and per-tensor detail is one GET away */
            json_object_del(sum, "layers");
            json_object_del(sum, "params");
        }
        json_object_update(j, sum);
    }
    json_decref(sum);
    return j;
}

/* --- upload: finish the blob (thread pool: fsync and rename), check it with
 * the engine (a child process, work/check.h), record, reply --------------- */

typedef struct upload_work {
    uv_work_t req;
    bfd *d;
    bfd_req *r;
    int kind;
    bfd_upload *up;
    char sha[65];
    int64_t size;
    bf_error err;
    bf_status st;             /* of storing (a 500 if it fails) */
} upload_work;

static void upload_run(uv_work_t *w)
{
    upload_work *u = w->data;
    u->size = bfd_upload_size(u->up);
    u->st = bfd_upload_finish(u->up, u->sha, &u->err);
    u->up = NULL;
}

/* A file the engine refuses is not kept (unless someone else's copy is fine). */
static void drop_blob(bfd *d, const char *sha)
{
    int64_t refs = 0;
    if (bfd_blob_refs(d->store, sha, &refs, NULL) == BF_OK && refs == 0) bfd_blob_remove(d->blobs, sha, NULL);
}

static void checked(void *user, bfd_check_result *res)
{
    upload_work *u = user;
    bfd *d = u->d;
    bfd_req *r = u->r;
    bf_error err = {0};
    r->work = NULL;
    if (res->st != BF_OK) {
        drop_blob(d, u->sha);
        if (!res->refused) {
            bf_error_set(&err, res->st, "%s", res->why);
            bfd_reply_internal(r, "checking the upload", &err);
        } else {
            /* the upload by its id and the name it came as; the child has
             * taken the blob's path out of its message (bfd_blob_scrub) */
            const char *as = bfd_req_arg(r, "name");
            bfd_reply_problem(r, 422, NULL, "not a %s bitflip can use: upload %s%s%.200s%s: %s",
                              u->kind == BFD_MODEL    ? "valid ONNX model"
                              : u->kind == BFD_ERRMAP ? "valid error map (.bfmap, docs/CAMPAIGNS.md)"
                                                      : "valid safetensors eval set",
                              u->sha, as && *as ? " (uploaded as \"" : "", as && *as ? as : "", as && *as ? "\")" : "",
                              res->why);
        }
        goto out;
    }
    const char *name = bfd_req_arg(r, "name");
    bfd_item it = {.tenant = r->tenant, .name = (char *)(name ? name : ""), .size = u->size, .summary_json = res->summary,
                   .created = bfd_now()};
    snprintf(it.id, sizeof it.id, "%s", u->sha);
    int existed = 0;
    if (bfd_item_put(d->store, u->kind, &it, &existed, &err) != BF_OK) { bfd_reply_internal(r, "recording the upload", &err); goto out; }
    /* a delete of the same bytes by someone else may have removed the blob
     * between the upload's rename and now: then the record would be hollow */
    char *path = bfd_blob_path(d->blobs, u->sha);
    int present = path && access(path, R_OK) == 0;
    free(path);
    if (!present) {
        if (!existed) bfd_item_delete(d->store, u->kind, r->tenant, u->sha, NULL);
        bfd_reply_header(r, "Retry-After", "1");
        bfd_reply_problem(r, 503, NULL, "the upload raced with a delete of the same file; send it again");
        goto out;
    }
    bfd_item got = {0};
    if (bfd_item_get(d->store, u->kind, r->tenant, u->sha, &got, &err) != BF_OK) { bfd_reply_internal(r, "reading back", &err); goto out; }
    char loc[128];
    snprintf(loc, sizeof loc, "/v1/%s/%s", kind_path(u->kind), u->sha);
    bfd_reply_header(r, "Location", loc);
    bfd_reply_json(r, existed ? 200 : 201, item_json(&got, 1));
    bfd_item_clear(&got);
out:
    bfd_req_resume(r);
    free(u);
}

static void upload_done(uv_work_t *w, int status)
{
    (void)status;
    upload_work *u = w->data;
    bfd *d = u->d;
    bfd_req *r = u->r;
    if (u->st != BF_OK) {
        r->work = NULL;
        bfd_reply_internal(r, "storing the upload", &u->err);
        bfd_req_resume(r);
        free(u);
        return;
    }
    char *path = bfd_blob_path(d->blobs, u->sha);
    bf_status st = path ? bfd_check_start(d, u->kind, path, checked, u, &u->err)
                        : bf_error_set(&u->err, BF_ENOMEM, "out of memory");
    free(path);
    if (st != BF_OK) {
        r->work = NULL;
        drop_blob(d, u->sha);
        bfd_reply_header(r, "Retry-After", "1");
        bfd_reply_problem(r, 503, NULL, "cannot check the upload now (%s); retry", u->err.msg);
        bfd_req_resume(r);
        free(u);
    }
}

void bfd_h_item_upload(bfd *d, bfd_req *r)
{
    upload_work *u = calloc(1, sizeof *u);
    if (!u) { bfd_reply_problem(r, 500, NULL, "out of memory"); return; }
    const char *name = bfd_req_arg(r, "name");
    if (name && strlen(name) > 256) { free(u); bfd_reply_problem(r, 400, NULL, "name is longer than 256 bytes"); return; }
    u->d = d;
    u->r = r;
    u->kind = bfd_req_kind(r);
    u->up = r->upload;
    r->upload = NULL;
    u->req.data = u;
    r->work = u;
    bfd_req_suspend(r);
    if (uv_queue_work(d->loop, &u->req, upload_run, upload_done) != 0) {
        r->work = NULL;
        bfd_upload_abort(u->up);
        free(u);
        bfd_reply_problem(r, 503, NULL, "cannot check the upload now; retry");
        bfd_req_resume(r);
    }
}

/* --- list, get, delete ------------------------------------------------------- */

void bfd_h_item_list(bfd *d, bfd_req *r)
{
    int limit, more = 0;
    int64_t after;
    if (bfd_paging(r, &limit, &after) != 0) return;
    bfd_item *items = NULL;
    size_t n = 0;
    bf_error err = {0};
    int k = bfd_req_kind(r);
    if (bfd_item_list(d->store, k, r->tenant, after, limit, &items, &n, &more, &err) != BF_OK) {
        bfd_reply_internal(r, "listing", &err);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, item_json(&items[i], 0));
    char tok[32];
    snprintf(tok, sizeof tok, "%lld", n ? (long long)items[n - 1].seq : 0LL);
    bfd_reply_json(r, 200, json_pack("{s:o, s:s?}", "items", arr, "next_page_token", more ? tok : NULL));
    bfd_item_list_free(items, n);
}

/* Looks the item up for the request's tenant; replies 404 and returns -1 if
 * it is not there (or not theirs, or not an id at all). */
static int find_item(bfd *d, bfd_req *r, int k, bfd_item *it)
{
    if (!is_hex64(r->id)) {
        bfd_reply_problem(r, 404, NULL, "'%s' is not a %s id (ids are 64 lower-case hex digits, the sha256 of the file)",
                          r->id, kind_word(k));
        return -1;
    }
    bf_error err = {0};
    bf_status st = bfd_item_get(d->store, k, r->tenant, r->id, it, &err);
    if (st == BF_ENOTFOUND) {
        bfd_reply_problem(r, 404, NULL, "no %s %s (list yours with GET /v1/%s)", kind_word(k), r->id, kind_path(k));
        return -1;
    }
    if (st != BF_OK) { bfd_reply_internal(r, "reading", &err); return -1; }
    return 0;
}

void bfd_h_item_get(bfd *d, bfd_req *r)
{
    bfd_item it = {0};
    int k = bfd_req_kind(r);
    if (find_item(d, r, k, &it) != 0) return;
    bfd_reply_json(r, 200, item_json(&it, 1));
    bfd_item_clear(&it);
}

void bfd_h_item_delete(bfd *d, bfd_req *r)
{
    bfd_item it = {0};
    int k = bfd_req_kind(r);
    bf_error err = {0};
    if (find_item(d, r, k, &it) != 0) return;
    bfd_item_clear(&it);
    int64_t using = 0;
    if (bfd_campaign_using(d->store, r->tenant, k, r->id, &using, &err) != BF_OK) { bfd_reply_internal(r, "checking use", &err); return; }
    if (using > 0) {
        bfd_reply_problem(r, 409, NULL, "%lld queued or running campaign%s use%s this %s; cancel %s first", (long long)using,
                          using == 1 ? "" : "s", using == 1 ? "s" : "", kind_word(k), using == 1 ? "it" : "them");
        return;
    }
    if (bfd_item_delete(d->store, k, r->tenant, r->id, &err) != BF_OK) { bfd_reply_internal(r, "deleting", &err); return; }
    int64_t refs = 0;
    if (bfd_blob_refs(d->store, r->id, &refs, &err) == BF_OK && refs == 0) bfd_blob_remove(d->blobs, r->id, NULL);
    bfd_reply_data(r, 204, NULL, NULL, 0);
}
