/* test_store: campaigns (insert, idempotency, lists, lifecycle, cancel) and executor jobs. */
#include "test_store.h"

/* --- campaigns */

void test_state_names(void **state)
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

void test_campaign_insert_get(void **state)
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

void test_campaign_idempotency(void **state)
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

void test_campaign_list(void **state)
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

void test_campaign_lifecycle(void **state)
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

void test_cancel_queued_and_delete_running(void **state)
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

/* --- executor jobs */

void test_executor_job(void **state)
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

void test_unopenable_path(void **state)
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
