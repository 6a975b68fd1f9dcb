/* The metadata store: items with paging and tenant isolation, campaigns
 * through their life (idempotency keys, listing by state, the first final
 * state winning, chunks dropped on finish), tokens and the auth helpers,
 * persistence across reopen, the boot counter, and databases that are not
 * ours (garbage, a newer schema) refused with a message naming the file. */
#include "test_store/test_store.h"

void remove_tree(const char *path)
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

int setup(void **state)
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

int teardown(void **state)
{
    fx *f = *state;
    bfd_store_close(f->s);
    remove_tree(f->dir);
    free(f);
    return 0;
}

void reopen(fx *f)
{
    bf_error err = {0};
    bfd_store_close(f->s);
    f->s = NULL;
    assert_int_equal(bfd_store_open(f->db, &f->s, &err), BF_OK);
}

void put_item(bfd_store *s, bfd_kind k, const char *tenant, const char *id, const char *name, int *existed)
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
bfd_campaign_row campaign(const char *id, const char *tenant)
{
    bfd_campaign_row r = {.state = BFD_QUEUED, .created = 1700000100.5, .trials_planned = 3000, .n_chunks = 3};
    strcpy(r.id, id);
    r.tenant = (char *)tenant;
    r.spec_json = (char *)"{\"trials\":3000}";
    strcpy(r.model_id, ID_A);
    strcpy(r.dataset_id, ID_B);
    return r;
}

void insert(bfd_store *s, bfd_campaign_row *r)
{
    bf_error err = {0};
    assert_int_equal(bfd_campaign_insert(s, r, &err), BF_OK);
    assert_true(r->seq > 0);
}

bfd_state state_of(bfd_store *s, const char *id)
{
    bfd_campaign_row r;
    bf_error err = {0};
    assert_int_equal(bfd_campaign_get(s, NULL, id, &r, &err), BF_OK);
    bfd_state st = r.state;
    bfd_campaign_row_clear(&r);
    return st;
}

size_t chunk_count(bfd_store *s, const char *id)
{
    int *idx = NULL;
    char **json = NULL;
    size_t n = 99;
    bf_error err = {0};
    assert_int_equal(bfd_chunk_list(s, id, &idx, &json, &n, &err), BF_OK);
    bfd_chunk_list_free(idx, json, n);
    return n;
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
