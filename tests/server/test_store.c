/* The metadata store: items with paging and tenant isolation, campaigns
 * through their life (idempotency keys, listing by state, the first final
 * state winning, chunks dropped on finish), tokens and the auth helpers,
 * persistence across reopen, the boot counter, and databases that are not
 * ours (garbage, a newer schema) refused with a message naming the file. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include <sqlite3.h>

#include "http/auth.h"
#include "store/store.h"

/* 64-hex ids: distinct and easy to read back */
#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define ID_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

typedef struct fx {
    char dir[64];
    char db[128];
    bfd_store *s;
} fx;

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        remove_tree(sub);
    }
    closedir(d);
    rmdir(path);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    bf_error err = {0};
    if (!f) return -1;
    strcpy(f->dir, "/tmp/bfd-store-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    snprintf(f->db, sizeof f->db, "%s/bitflip.db", f->dir);
    if (bfd_store_open(f->db, &f->s, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    bfd_store_close(f->s);
    remove_tree(f->dir);
    free(f);
    return 0;
}

static void reopen(fx *f)
{
    bf_error err = {0};
    bfd_store_close(f->s);
    f->s = NULL;
    assert_int_equal(bfd_store_open(f->db, &f->s, &err), BF_OK);
}

static void put_item(bfd_store *s, bfd_kind k, const char *tenant, const char *id, const char *name, int *existed)
{
    bf_error err = {0};
    bfd_item it = {.size = 1234, .created = 1700000000.25};
    strcpy(it.id, id);
    it.tenant = (char *)tenant;
    it.name = (char *)name;
    it.summary_json = (char *)"{\"layers\":3}";
    assert_int_equal(bfd_item_put(s, k, &it, existed, &err), BF_OK);
}

/* A queued campaign; strings point at literals, so never *_clear it. */
static bfd_campaign_row campaign(const char *id, const char *tenant)
{
    bfd_campaign_row r = {.state = BFD_QUEUED, .created = 1700000100.5, .trials_planned = 3000, .n_chunks = 3};
    strcpy(r.id, id);
    r.tenant = (char *)tenant;
    r.spec_json = (char *)"{\"trials\":3000}";
    strcpy(r.model_id, ID_A);
    strcpy(r.dataset_id, ID_B);
    return r;
}

static void insert(bfd_store *s, bfd_campaign_row *r)
{
    bf_error err = {0};
    assert_int_equal(bfd_campaign_insert(s, r, &err), BF_OK);
    assert_true(r->seq > 0);
}

static bfd_state state_of(bfd_store *s, const char *id)
{
    bfd_campaign_row r;
    bf_error err = {0};
    assert_int_equal(bfd_campaign_get(s, NULL, id, &r, &err), BF_OK);
    bfd_state st = r.state;
    bfd_campaign_row_clear(&r);
    return st;
}

static size_t chunk_count(bfd_store *s, const char *id)
{
    int *idx = NULL;
    char **json = NULL;
    size_t n = 99;
    bf_error err = {0};
    assert_int_equal(bfd_chunk_list(s, id, &idx, &json, &n, &err), BF_OK);
    bfd_chunk_list_free(idx, json, n);
    return n;
}

/* --- items */

static void test_item_put_get(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    int existed = -1;
    bfd_item it;
    put_item(f->s, BFD_MODEL, "alice", ID_A, "resnet.onnx", &existed);
    assert_int_equal(existed, 0);
    put_item(f->s, BFD_MODEL, "alice", ID_A, "other name", &existed);
    assert_int_equal(existed, 1);
    /* the same bytes as a dataset are a different item */
    put_item(f->s, BFD_DATASET, "alice", ID_A, "eval", &existed);
    assert_int_equal(existed, 0);

    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "alice", ID_A, &it, &err), BF_OK);
    assert_true(it.seq > 0);
    assert_string_equal(it.id, ID_A);
    assert_string_equal(it.tenant, "alice");
    assert_string_equal(it.name, "resnet.onnx");   /* the second put left the first alone */
    assert_int_equal(it.size, 1234);
    assert_string_equal(it.summary_json, "{\"layers\":3}");
    assert_true(it.created == 1700000000.25);
    bfd_item_clear(&it);
    assert_int_equal(bfd_item_get(f->s, BFD_DATASET, "alice", ID_A, &it, &err), BF_OK);
    assert_string_equal(it.name, "eval");
    bfd_item_clear(&it);

    /* a NULL name is stored as "" */
    bfd_item noname = {.size = 1};
    strcpy(noname.id, ID_B);
    noname.tenant = (char *)"alice";
    noname.summary_json = (char *)"{}";
    assert_int_equal(bfd_item_put(f->s, BFD_MODEL, &noname, NULL, &err), BF_OK);
    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "alice", ID_B, &it, &err), BF_OK);
    assert_string_equal(it.name, "");
    bfd_item_clear(&it);

    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "alice", ID_C, &it, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, ID_C));
}

static void test_item_paging(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_item *items = NULL;
    size_t n = 0;
    int more = -1;
    char ids[5][65];
    for (int i = 0; i < 5; i++) {
        memset(ids[i], '0' + i, 64);
        ids[i][64] = '\0';
        put_item(f->s, BFD_MODEL, "alice", ids[i], "m", NULL);
        if (i % 2 == 0) put_item(f->s, BFD_MODEL, "bob", ids[i], "b", NULL);   /* interleaved */
    }
    put_item(f->s, BFD_DATASET, "alice", ID_A, "d", NULL);   /* another kind: not listed */

    /* three pages of 2, 2, 1, following the last seq of each */
    int64_t after = 0;
    int seen = 0;
    for (int page = 0; page < 3; page++) {
        assert_int_equal(bfd_item_list(f->s, BFD_MODEL, "alice", after, 2, &items, &n, &more, &err), BF_OK);
        assert_int_equal(n, page < 2 ? 2 : 1);
        assert_int_equal(more, page < 2);
        for (size_t i = 0; i < n; i++) {
            assert_string_equal(items[i].id, ids[seen]);   /* oldest first */
            assert_string_equal(items[i].tenant, "alice");
            assert_true(items[i].seq > after);
            after = items[i].seq;
            seen++;
        }
        bfd_item_list_free(items, n);
    }
    assert_int_equal(seen, 5);

    /* a page exactly as large as what is left has no more */
    assert_int_equal(bfd_item_list(f->s, BFD_MODEL, "alice", 0, 5, &items, &n, &more, &err), BF_OK);
    assert_int_equal(n, 5);
    assert_int_equal(more, 0);
    bfd_item_list_free(items, n);
    /* past the end */
    assert_int_equal(bfd_item_list(f->s, BFD_MODEL, "alice", after, 10, &items, &n, &more, &err), BF_OK);
    assert_int_equal(n, 0);
    assert_null(items);
    assert_int_equal(more, 0);

    assert_int_equal(bfd_item_list(f->s, BFD_MODEL, "bob", 0, 100, &items, &n, &more, &err), BF_OK);
    assert_int_equal(n, 3);
    assert_string_equal(items[0].id, ids[0]);
    assert_string_equal(items[2].id, ids[4]);
    bfd_item_list_free(items, n);

    assert_int_equal(bfd_item_list(f->s, BFD_MODEL, "alice", 0, 0, &items, &n, &more, &err), BF_EINVAL);
}

static void test_item_seq_not_reused(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_item it;
    put_item(f->s, BFD_MODEL, "alice", ID_A, "a", NULL);
    put_item(f->s, BFD_MODEL, "alice", ID_B, "b", NULL);
    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "alice", ID_B, &it, &err), BF_OK);
    int64_t last = it.seq;
    bfd_item_clear(&it);
    /* a client paging "after `last`" must still see what comes later */
    assert_int_equal(bfd_item_delete(f->s, BFD_MODEL, "alice", ID_B, &err), BF_OK);
    put_item(f->s, BFD_MODEL, "alice", ID_C, "c", NULL);
    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "alice", ID_C, &it, &err), BF_OK);
    assert_true(it.seq > last);
    bfd_item_clear(&it);
}

static void test_tenant_isolation(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_item it;
    bfd_item *items = NULL;
    size_t n = 9;
    int more = -1;
    put_item(f->s, BFD_MODEL, "alice", ID_A, "secret", NULL);
    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "bob", ID_A, &it, &err), BF_ENOTFOUND);
    assert_int_equal(bfd_item_delete(f->s, BFD_MODEL, "bob", ID_A, &err), BF_ENOTFOUND);
    assert_int_equal(bfd_item_list(f->s, BFD_MODEL, "bob", 0, 10, &items, &n, &more, &err), BF_OK);
    assert_int_equal(n, 0);
    assert_int_equal(more, 0);
    /* still alice's */
    assert_int_equal(bfd_item_get(f->s, BFD_MODEL, "alice", ID_A, &it, &err), BF_OK);
    bfd_item_clear(&it);
}

static void test_item_delete_and_blob_refs(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    int64_t refs = -1;
    assert_int_equal(bfd_blob_refs(f->s, ID_A, &refs, &err), BF_OK);
    assert_int_equal(refs, 0);
    put_item(f->s, BFD_MODEL, "alice", ID_A, "a", NULL);
    put_item(f->s, BFD_MODEL, "bob", ID_A, "a", NULL);
    put_item(f->s, BFD_DATASET, "alice", ID_A, "a", NULL);
    put_item(f->s, BFD_MODEL, "alice", ID_B, "b", NULL);
    assert_int_equal(bfd_blob_refs(f->s, ID_A, &refs, &err), BF_OK);
    assert_int_equal(refs, 3);

    assert_int_equal(bfd_item_delete(f->s, BFD_MODEL, "alice", ID_A, &err), BF_OK);
    assert_int_equal(bfd_item_delete(f->s, BFD_MODEL, "alice", ID_A, &err), BF_ENOTFOUND);
    assert_int_equal(bfd_blob_refs(f->s, ID_A, &refs, &err), BF_OK);
    assert_int_equal(refs, 2);
    assert_int_equal(bfd_item_delete(f->s, BFD_MODEL, "bob", ID_A, &err), BF_OK);
    assert_int_equal(bfd_item_delete(f->s, BFD_DATASET, "alice", ID_A, &err), BF_OK);
    assert_int_equal(bfd_blob_refs(f->s, ID_A, &refs, &err), BF_OK);
    assert_int_equal(refs, 0);   /* the blob may go now */
    assert_int_equal(bfd_blob_refs(f->s, ID_B, &refs, &err), BF_OK);
    assert_int_equal(refs, 1);
}

/* --- campaigns */

static void test_state_names(void **state)
{
    (void)state;
    static const char *names[] = {"queued", "running", "succeeded", "failed", "canceled"};
    for (int i = 0; i < BFD_STATE_COUNT; i++) {
        assert_string_equal(bfd_state_name((bfd_state)i), names[i]);
        assert_int_equal(bfd_state_parse(names[i]), i);
    }
    assert_int_equal(bfd_state_parse("done"), -1);
    assert_int_equal(bfd_state_parse("Queued"), -1);
    assert_int_equal(bfd_state_parse(""), -1);
    assert_int_equal(bfd_state_parse(NULL), -1);
}

static void test_campaign_insert_get(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_campaign_row r = campaign("c0123456789abcdef", "alice"), got;
    r.gates_json = (char *)"[\"top1_drop < 0.01\"]";
    insert(f->s, &r);

    assert_int_equal(bfd_campaign_get(f->s, "alice", "c0123456789abcdef", &got, &err), BF_OK);
    assert_int_equal(got.seq, r.seq);
    assert_string_equal(got.id, "c0123456789abcdef");
    assert_string_equal(got.tenant, "alice");
    assert_int_equal(got.state, BFD_QUEUED);
    assert_string_equal(got.spec_json, "{\"trials\":3000}");
    assert_string_equal(got.gates_json, "[\"top1_drop < 0.01\"]");
    assert_string_equal(got.model_id, ID_A);
    assert_string_equal(got.dataset_id, ID_B);
    assert_null(got.idem_key);
    assert_string_equal(got.idem_hash, "");
    assert_true(got.created == 1700000100.5);
    assert_true(got.started == 0 && got.finished == 0);
    assert_int_equal(got.trials_planned, 3000);
    assert_int_equal(got.n_chunks, 3);
    assert_null(got.result_json);
    assert_null(got.error);
    assert_null(got.verdict);
    bfd_campaign_row_clear(&got);

    /* NULL tenant: the scheduler's view, any tenant */
    assert_int_equal(bfd_campaign_get(f->s, NULL, "c0123456789abcdef", &got, &err), BF_OK);
    bfd_campaign_row_clear(&got);
    assert_int_equal(bfd_campaign_get(f->s, "bob", "c0123456789abcdef", &got, &err), BF_ENOTFOUND);
    assert_int_equal(bfd_campaign_get(f->s, NULL, "cffffffffffffffff", &got, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "cffffffffffffffff"));

    /* ids are unique across tenants */
    bfd_campaign_row dup = campaign("c0123456789abcdef", "bob");
    assert_int_equal(bfd_campaign_insert(f->s, &dup, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "c0123456789abcdef"));
}

static void test_campaign_idempotency(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_campaign_row r = campaign("c1111111111111111", "alice"), got;
    r.idem_key = (char *)"key-1";
    memset(r.idem_hash, '7', 64);
    insert(f->s, &r);

    assert_int_equal(bfd_campaign_find_idem(f->s, "alice", "key-1", &got, &err), BF_OK);
    assert_string_equal(got.id, "c1111111111111111");
    assert_string_equal(got.idem_key, "key-1");
    assert_int_equal(strlen(got.idem_hash), 64);
    assert_int_equal(got.idem_hash[0], '7');
    bfd_campaign_row_clear(&got);
    assert_int_equal(bfd_campaign_find_idem(f->s, "alice", "key-2", &got, &err), BF_ENOTFOUND);
    assert_int_equal(bfd_campaign_find_idem(f->s, "bob", "key-1", &got, &err), BF_ENOTFOUND);

    /* the key is per tenant: alice cannot reuse it, bob can */
    bfd_campaign_row again = campaign("c2222222222222222", "alice");
    again.idem_key = (char *)"key-1";
    assert_int_equal(bfd_campaign_insert(f->s, &again, &err), BF_EINVAL);
    bfd_campaign_row bobs = campaign("c3333333333333333", "bob");
    bobs.idem_key = (char *)"key-1";
    insert(f->s, &bobs);
    /* and campaigns without a key never collide */
    bfd_campaign_row k1 = campaign("c4444444444444444", "alice"), k2 = campaign("c5555555555555555", "alice");
    insert(f->s, &k1);
    insert(f->s, &k2);
}

static void test_campaign_list(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_campaign_row *rows = NULL;
    size_t n = 0;
    int more = -1;
    char ids[6][20];
    for (int i = 0; i < 6; i++) {
        snprintf(ids[i], sizeof ids[i], "c%016d", i);
        bfd_campaign_row r = campaign(ids[i], "alice");
        insert(f->s, &r);
        if (i == 2) {
            bfd_campaign_row b = campaign("cb0000000000000000", "bob");
            insert(f->s, &b);
        }
    }
    /* states: 0 queued, 1 running, 2 succeeded, 3 running, 4 failed, 5 queued */
    assert_int_equal(bfd_campaign_set_running(f->s, ids[1], 1700000200, &err), BF_OK);
    assert_int_equal(bfd_campaign_set_running(f->s, ids[2], 1700000200, &err), BF_OK);
    assert_int_equal(bfd_campaign_finish(f->s, ids[2], BFD_SUCCEEDED, 1700000300, "{\"big\":[1,2,3],\"summary\":{\"trials\":240,\"planned\":300,"
                                         "\"outcomes\":{\"masked\":200,\"critical\":40}}}",
                                         NULL, "pass",
                                         &err),
                     BF_OK);
    assert_int_equal(bfd_campaign_set_running(f->s, ids[3], 1700000200, &err), BF_OK);
    assert_int_equal(bfd_campaign_finish(f->s, ids[4], BFD_FAILED, 1700000300, NULL, "model vanished", NULL, &err),
                     BF_OK);

    /* any state, pages of 4 then 2 */
    assert_int_equal(bfd_campaign_list(f->s, "alice", -1, 0, 4, &rows, &n, &more, &err), BF_OK);
    assert_int_equal(n, 4);
    assert_int_equal(more, 1);
    for (size_t i = 0; i < n; i++) assert_string_equal(rows[i].id, ids[i]);
    assert_int_equal(rows[2].state, BFD_SUCCEEDED);
    /* listings leave the result out but for what progress shows */
    json_t *listed = json_loads(rows[2].result_json, 0, NULL);
    assert_non_null(listed);
    assert_null(json_object_get(listed, "big"));
    json_t *sum = json_object_get(listed, "summary");
    assert_int_equal(json_object_size(sum), 2);
    assert_int_equal(json_integer_value(json_object_get(sum, "trials")), 240);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sum, "outcomes"), "critical")), 40);
    json_decref(listed);
    assert_null(rows[0].result_json);   /* no result yet: none listed */
    assert_string_equal(rows[2].verdict, "pass");
    int64_t after = rows[3].seq;
    bfd_campaign_rows_free(rows, n);
    assert_int_equal(bfd_campaign_list(f->s, "alice", -1, after, 4, &rows, &n, &more, &err), BF_OK);
    assert_int_equal(n, 2);
    assert_int_equal(more, 0);
    assert_string_equal(rows[0].id, ids[4]);
    assert_string_equal(rows[0].error, "model vanished");
    assert_string_equal(rows[1].id, ids[5]);
    bfd_campaign_rows_free(rows, n);

    /* by state, paged */
    assert_int_equal(bfd_campaign_list(f->s, "alice", BFD_RUNNING, 0, 1, &rows, &n, &more, &err), BF_OK);
    assert_int_equal(n, 1);
    assert_int_equal(more, 1);
    assert_string_equal(rows[0].id, ids[1]);
    after = rows[0].seq;
    bfd_campaign_rows_free(rows, n);
    assert_int_equal(bfd_campaign_list(f->s, "alice", BFD_RUNNING, after, 1, &rows, &n, &more, &err), BF_OK);
    assert_int_equal(n, 1);
    assert_int_equal(more, 0);
    assert_string_equal(rows[0].id, ids[3]);
    bfd_campaign_rows_free(rows, n);
    assert_int_equal(bfd_campaign_list(f->s, "alice", BFD_QUEUED, 0, 10, &rows, &n, &more, &err), BF_OK);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].id, ids[0]);
    assert_string_equal(rows[1].id, ids[5]);
    bfd_campaign_rows_free(rows, n);
    assert_int_equal(bfd_campaign_list(f->s, "alice", BFD_CANCELED, 0, 10, &rows, &n, &more, &err), BF_OK);
    assert_int_equal(n, 0);
    assert_null(rows);

    /* bob sees only his */
    assert_int_equal(bfd_campaign_list(f->s, "bob", -1, 0, 10, &rows, &n, &more, &err), BF_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].id, "cb0000000000000000");
    bfd_campaign_rows_free(rows, n);

    assert_int_equal(bfd_campaign_list(f->s, "alice", -1, 0, 0, &rows, &n, &more, &err), BF_EINVAL);
    assert_int_equal(bfd_campaign_list(f->s, "alice", BFD_STATE_COUNT, 0, 10, &rows, &n, &more, &err), BF_EINVAL);

    /* unfinished: every tenant's queued and running, oldest first, with all fields */
    assert_int_equal(bfd_campaign_unfinished(f->s, &rows, &n, &err), BF_OK);
    assert_int_equal(n, 5);
    assert_string_equal(rows[0].id, ids[0]);
    assert_string_equal(rows[1].id, ids[1]);
    assert_int_equal(rows[1].state, BFD_RUNNING);
    assert_true(rows[1].started == 1700000200);
    assert_string_equal(rows[2].id, "cb0000000000000000");
    assert_string_equal(rows[3].id, ids[3]);
    assert_string_equal(rows[4].id, ids[5]);
    assert_string_equal(rows[4].spec_json, "{\"trials\":3000}");
    bfd_campaign_rows_free(rows, n);

    int64_t counts[BFD_STATE_COUNT];
    assert_int_equal(bfd_campaign_counts(f->s, counts, &err), BF_OK);
    assert_int_equal(counts[BFD_QUEUED], 3);   /* alice's 0 and 5, bob's */
    assert_int_equal(counts[BFD_RUNNING], 2);
    assert_int_equal(counts[BFD_SUCCEEDED], 1);
    assert_int_equal(counts[BFD_FAILED], 1);
    assert_int_equal(counts[BFD_CANCELED], 0);
}

static void test_campaign_lifecycle(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_campaign_row r = campaign("cabcdefabcdefabcd", "alice"), got;
    int64_t count = -1;
    int *idx = NULL;
    char **json = NULL;
    size_t n = 0;
    insert(f->s, &r);

    /* queued campaigns hold their model and dataset */
    assert_int_equal(bfd_campaign_using(f->s, "alice", BFD_MODEL, ID_A, &count, &err), BF_OK);
    assert_int_equal(count, 1);
    assert_int_equal(bfd_campaign_using(f->s, "alice", BFD_DATASET, ID_B, &count, &err), BF_OK);
    assert_int_equal(count, 1);
    assert_int_equal(bfd_campaign_using(f->s, "alice", BFD_MODEL, ID_B, &count, &err), BF_OK);
    assert_int_equal(count, 0);   /* ID_B is its dataset, not its model */
    assert_int_equal(bfd_campaign_using(f->s, "bob", BFD_MODEL, ID_A, &count, &err), BF_OK);
    assert_int_equal(count, 0);

    assert_int_equal(bfd_campaign_set_running(f->s, r.id, 1700000200.75, &err), BF_OK);
    assert_int_equal(bfd_campaign_get(f->s, "alice", r.id, &got, &err), BF_OK);
    assert_int_equal(got.state, BFD_RUNNING);
    assert_true(got.started == 1700000200.75);
    bfd_campaign_row_clear(&got);
    assert_int_equal(bfd_campaign_set_running(f->s, r.id, 1700000201, &err), BF_OK);   /* a restart resumes */

    /* checkpoints: out of order, listed by index, a repeat replaces */
    assert_int_equal(bfd_chunk_put(f->s, r.id, 2, "{\"c\":2}", &err), BF_OK);
    assert_int_equal(bfd_chunk_put(f->s, r.id, 0, "{\"c\":0}", &err), BF_OK);
    assert_int_equal(bfd_chunk_put(f->s, r.id, 0, "{\"c\":\"zero\"}", &err), BF_OK);
    assert_int_equal(bfd_chunk_put(f->s, r.id, 3, "{}", &err), BF_ERANGE);   /* n_chunks is 3 */
    assert_int_equal(bfd_chunk_put(f->s, r.id, -1, "{}", &err), BF_ERANGE);
    assert_int_equal(bfd_chunk_put(f->s, "cnothere00000000", 0, "{}", &err), BF_ENOTFOUND);
    assert_int_equal(bfd_chunk_list(f->s, r.id, &idx, &json, &n, &err), BF_OK);
    assert_int_equal(n, 2);
    assert_int_equal(idx[0], 0);
    assert_string_equal(json[0], "{\"c\":\"zero\"}");
    assert_int_equal(idx[1], 2);
    assert_string_equal(json[1], "{\"c\":2}");
    bfd_chunk_list_free(idx, json, n);

    assert_int_equal(bfd_campaign_finish(f->s, r.id, BFD_RUNNING, 1, NULL, NULL, NULL, &err), BF_EINVAL);
    assert_int_equal(bfd_campaign_finish(f->s, r.id, BFD_SUCCEEDED, 1700000300.5, "{\"top1\":0.9}", NULL, "fail",
                                         &err),
                     BF_OK);
    assert_int_equal(chunk_count(f->s, r.id), 0);   /* dropped with the finish */
    assert_int_equal(bfd_campaign_get(f->s, "alice", r.id, &got, &err), BF_OK);
    assert_int_equal(got.state, BFD_SUCCEEDED);
    assert_true(got.finished == 1700000300.5);
    assert_true(got.started == 1700000201);
    assert_string_equal(got.result_json, "{\"top1\":0.9}");
    assert_null(got.error);
    assert_string_equal(got.verdict, "fail");
    bfd_campaign_row_clear(&got);

    /* finished is final: a late cancel, a late start or a late chunk changes nothing */
    assert_int_equal(bfd_campaign_finish(f->s, r.id, BFD_CANCELED, 1700000400, NULL, NULL, NULL, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "succeeded"));
    assert_int_equal(bfd_campaign_set_running(f->s, r.id, 1700000400, &err), BF_EINVAL);
    assert_int_equal(bfd_chunk_put(f->s, r.id, 1, "{}", &err), BF_EINVAL);
    assert_int_equal(state_of(f->s, r.id), BFD_SUCCEEDED);
    assert_int_equal(chunk_count(f->s, r.id), 0);
    assert_int_equal(bfd_campaign_using(f->s, "alice", BFD_MODEL, ID_A, &count, &err), BF_OK);
    assert_int_equal(count, 0);   /* finished campaigns no longer pin their model */

    assert_int_equal(bfd_campaign_set_running(f->s, "cnothere00000000", 1, &err), BF_ENOTFOUND);
    assert_int_equal(bfd_campaign_finish(f->s, "cnothere00000000", BFD_FAILED, 1, NULL, NULL, NULL, &err),
                     BF_ENOTFOUND);

    assert_int_equal(bfd_campaign_delete(f->s, r.id, &err), BF_OK);
    assert_int_equal(bfd_campaign_get(f->s, NULL, r.id, &got, &err), BF_ENOTFOUND);
    assert_int_equal(bfd_campaign_delete(f->s, r.id, &err), BF_ENOTFOUND);
}

static void test_cancel_queued_and_delete_running(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_campaign_row q = campaign("cqueued0000000000", "alice"), r = campaign("crunning000000000", "alice");
    insert(f->s, &q);
    insert(f->s, &r);
    assert_int_equal(bfd_campaign_finish(f->s, q.id, BFD_CANCELED, 1700000500, NULL, NULL, NULL, &err), BF_OK);
    assert_int_equal(state_of(f->s, q.id), BFD_CANCELED);

    assert_int_equal(bfd_campaign_set_running(f->s, r.id, 1700000200, &err), BF_OK);
    assert_int_equal(bfd_chunk_put(f->s, r.id, 1, "{\"c\":1}", &err), BF_OK);
    assert_int_equal(bfd_campaign_delete(f->s, r.id, &err), BF_OK);
    assert_int_equal(chunk_count(f->s, r.id), 0);
    /* a new campaign under the old id starts with no checkpoints */
    bfd_campaign_row again = campaign("crunning000000000", "alice");
    insert(f->s, &again);
    assert_int_equal(chunk_count(f->s, again.id), 0);
}

/* --- tokens and auth */

static void test_tokens(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    char t1[BFD_TOKEN_LEN + 1], t2[BFD_TOKEN_LEN + 1], h1[65], h2[65];
    char *tenant = NULL;
    int64_t count = -1;
    assert_int_equal(bfd_token_new(t1, &err), BF_OK);
    assert_int_equal(bfd_token_new(t2, &err), BF_OK);
    assert_int_equal(strlen(t1), 68);
    assert_memory_equal(t1, "bft_", 4);
    for (int i = 4; i < 68; i++) assert_non_null(strchr("0123456789abcdef", t1[i]));
    assert_string_not_equal(t1, t2);

    /* the hash is sha256 of the token text (digest from Python's hashlib) */
    char known[] = "bft_0000000000000000000000000000000000000000000000000000000000000000";
    assert_int_equal(bfd_token_hash(known, h1, &err), BF_OK);
    assert_string_equal(h1, "3c1d0a93187a12329af53bc922b575f0e195daa52ee4fafc257172e52bf63abd");

    assert_int_equal(bfd_token_hash(t1, h1, &err), BF_OK);
    assert_int_equal(bfd_token_hash(t2, h2, &err), BF_OK);
    assert_int_equal(bfd_token_count(f->s, &count, &err), BF_OK);
    assert_int_equal(count, 0);
    assert_int_equal(bfd_token_put(f->s, h1, "alice", &err), BF_OK);
    assert_int_equal(bfd_token_put(f->s, h2, "bob", &err), BF_OK);
    assert_int_equal(bfd_token_count(f->s, &count, &err), BF_OK);
    assert_int_equal(count, 2);
    assert_int_equal(bfd_token_lookup(f->s, h1, &tenant, &err), BF_OK);
    assert_string_equal(tenant, "alice");
    free(tenant);
    assert_int_equal(bfd_token_lookup(f->s, h2, &tenant, &err), BF_OK);
    assert_string_equal(tenant, "bob");
    free(tenant);
    /* the token itself is not what is stored */
    assert_int_equal(bfd_token_lookup(f->s, t1, &tenant, &err), BF_ENOTFOUND);
    assert_null(tenant);
    assert_null(strstr(err.msg, t1));
    assert_int_equal(bfd_token_put(f->s, h1, "mallory", &err), BF_EINVAL);

    /* hashes sharing the leading digits the index narrows by are told apart
     * by the whole (constant-time) compare */
    char near[65];
    memcpy(near, h1, sizeof near);
    near[63] = near[63] == '0' ? '1' : '0';
    assert_int_equal(bfd_token_lookup(f->s, near, &tenant, &err), BF_ENOTFOUND);
    assert_int_equal(bfd_token_put(f->s, near, "carol", &err), BF_OK);
    assert_int_equal(bfd_token_lookup(f->s, near, &tenant, &err), BF_OK);
    assert_string_equal(tenant, "carol");
    free(tenant);
    assert_int_equal(bfd_token_lookup(f->s, h1, &tenant, &err), BF_OK);
    assert_string_equal(tenant, "alice");
    free(tenant);
    assert_int_equal(bfd_token_lookup(f->s, "abc", &tenant, &err), BF_ENOTFOUND);
}

static void test_tenant_names_and_random_hex(void **state)
{
    (void)state;
    char name[80];
    assert_true(bfd_tenant_valid("a"));
    assert_true(bfd_tenant_valid("Team-7_ml.prod"));
    memset(name, 'x', 64);
    name[64] = '\0';
    assert_true(bfd_tenant_valid(name));
    name[64] = 'x';
    name[65] = '\0';
    assert_false(bfd_tenant_valid(name));
    assert_false(bfd_tenant_valid(""));
    assert_false(bfd_tenant_valid(NULL));
    assert_false(bfd_tenant_valid("a b"));
    assert_false(bfd_tenant_valid("a/b"));
    assert_false(bfd_tenant_valid("a\nb"));
    assert_false(bfd_tenant_valid("caf\xc3\xa9"));
    assert_false(bfd_tenant_valid("x\""));

    bf_error err = {0};
    char hex[81];
    memset(hex, '#', sizeof hex);
    assert_int_equal(bfd_random_hex(hex, 40, &err), BF_OK);   /* more than one internal piece */
    assert_int_equal(strlen(hex), 80);
    for (int i = 0; i < 80; i++) assert_non_null(strchr("0123456789abcdef", hex[i]));
    assert_int_equal(bfd_random_hex(hex, 8, &err), BF_OK);
    assert_int_equal(strlen(hex), 16);
    assert_int_equal(bfd_random_hex(hex, 0, &err), BF_OK);
    assert_string_equal(hex, "");
}

/* --- the database file */

static void test_persists_across_reopen(void **state)
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

static void test_garbage_file_refused(void **state)
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

static void test_newer_schema_refused(void **state)
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

static void test_corrupt_mark_and_heal(void **state)
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

static void test_finish_marks_corrupt(void **state)
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
static void test_schema_1_upgraded(void **state)
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
static void test_schema_3_takes_error_maps(void **state)
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
static void test_campaign_uses_error_map(void **state)
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

/* --- executor jobs */

static void test_executor_job(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    char job[64];
    bfd_campaign_row r = campaign("c0000000000000001", "alice");
    insert(f->s, &r);
    assert_int_equal(bfd_campaign_job(f->s, r.id, job, sizeof job, &err), BF_OK);
    assert_string_equal(job, "");
    assert_int_equal(bfd_campaign_set_job(f->s, r.id, "812", &err), BF_OK);
    reopen(f);   /* durable */
    assert_int_equal(bfd_campaign_job(f->s, r.id, job, sizeof job, &err), BF_OK);
    assert_string_equal(job, "812");
    assert_int_equal(bfd_campaign_set_job(f->s, r.id, "813", &err), BF_OK);
    char small[3];   /* a short buffer gets a cut, terminated id */
    assert_int_equal(bfd_campaign_job(f->s, r.id, small, sizeof small, &err), BF_OK);
    assert_string_equal(small, "81");
    assert_int_equal(bfd_campaign_set_job(f->s, "c0000000000000009", "1", &err), BF_ENOTFOUND);
    assert_int_equal(bfd_campaign_job(f->s, "c0000000000000009", job, sizeof job, &err), BF_ENOTFOUND);
    char longer[80];
    memset(longer, '7', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    assert_int_equal(bfd_campaign_set_job(f->s, r.id, longer, &err), BF_EINVAL);
}

static void test_unopenable_path(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bfd_store *s = NULL;
    char path[160];
    snprintf(path, sizeof path, "%s/no/such/dir/bitflip.db", f->dir);
    assert_int_not_equal(bfd_store_open(path, &s, &err), BF_OK);
    assert_null(s);
    assert_non_null(strstr(err.msg, path));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_item_put_get),
        T(test_item_paging),
        T(test_item_seq_not_reused),
        T(test_tenant_isolation),
        T(test_item_delete_and_blob_refs),
        cmocka_unit_test(test_state_names),
        T(test_campaign_insert_get),
        T(test_campaign_idempotency),
        T(test_campaign_list),
        T(test_campaign_lifecycle),
        T(test_cancel_queued_and_delete_running),
        T(test_tokens),
        cmocka_unit_test(test_tenant_names_and_random_hex),
        T(test_persists_across_reopen),
        T(test_garbage_file_refused),
        T(test_newer_schema_refused),
        T(test_executor_job),
        T(test_unopenable_path),
        T(test_corrupt_mark_and_heal),
        T(test_finish_marks_corrupt),
        T(test_schema_1_upgraded),
        T(test_schema_3_takes_error_maps),
        T(test_campaign_uses_error_map),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
