/* test_store: items (put, get, paging, sequence numbers, tenants, deletes and blob references). */
#include "test_store.h"

/* --- items */

void test_item_put_get(void **state)
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

void test_item_paging(void **state)
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

void test_item_seq_not_reused(void **state)
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

void test_tenant_isolation(void **state)
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

void test_item_delete_and_blob_refs(void **state)
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
