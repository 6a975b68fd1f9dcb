/* The fair queue (work/fairq.h), alone: which campaign's chunk a free worker
 * takes next. Every expected order below was worked out by hand from the
 * rules in fairq.h (fewest running per tenant, then served longest ago, then
 * queue order; started campaigns first and exempt from the tenant's limit;
 * chunks in order, a requeued one next). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "work/fairq.h"

static bfd_fairq *mkq(int tenant_running)
{
    bfd_fairq *q = NULL;
    bf_error err = {0};
    assert_int_equal(bfd_fairq_new(tenant_running, &q, &err), BF_OK);
    assert_non_null(q);
    return q;
}

static void add(bfd_fairq *q, const char *id, const char *tenant, const int *chunks, size_t n, int started)
{
    bf_error err = {0};
    bfd_job_spec js = {.id = id, .tenant = tenant, .spec_json = "{}", .model_path = "/m", .dataset_path = "/d",
                       .trials_dir = "/t", .n_chunks = 16};
    assert_int_equal(bfd_fairq_add(q, &js, chunks, n, started, &err), BF_OK);
}

/* Picks and takes; checks it is chunk `chunk` of campaign `id` and whether
 * it was the campaign's first. */
static bfd_fq_job *take(bfd_fairq *q, const char *id, int chunk, int first)
{
    int c = -1;
    bfd_fq_job *j = bfd_fairq_pick(q, &c);
    assert_non_null(j);
    assert_string_equal(j->spec.id, id);
    assert_int_equal(c, chunk);
    assert_int_equal(bfd_fairq_take(q, j), first);
    return j;
}

static void nothing_to_pick(bfd_fairq *q)
{
    int c = -1;
    assert_null(bfd_fairq_pick(q, &c));
    assert_int_equal(c, -1);   /* untouched */
}

static void load_is(bfd_fairq *q, int running, int queued)
{
    int r = -1, w = -1;
    bfd_fairq_load(q, &r, &w);
    assert_int_equal(r, running);
    assert_int_equal(w, queued);
}

static void empty_queue(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(0);   /* 0 is taken as 1 */
    nothing_to_pick(q);
    load_is(q, 0, 0);
    assert_null(bfd_fairq_cancel(q, "nope"));
    bfd_fairq_free(q);
    bfd_fairq_free(NULL);
}

static void one_campaign_in_given_order(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(1);
    const int c[] = {4, 1, 7};
    add(q, "a1", "A", c, 3, 0);
    load_is(q, 0, 3);
    /* a pick alone takes nothing: a hand-over that fails loses no chunk */
    int k = -1;
    assert_non_null(bfd_fairq_pick(q, &k));
    assert_int_equal(k, 4);
    load_is(q, 0, 3);
    bfd_fq_job *j = take(q, "a1", 4, 1);
    take(q, "a1", 1, 0);
    take(q, "a1", 7, 0);
    nothing_to_pick(q);
    load_is(q, 3, 0);
    assert_int_equal(bfd_fairq_settle(q, j, 1, 0), BFD_FQ_EXHAUSTED);
    assert_int_equal(bfd_fairq_settle(q, j, 4, 0), BFD_FQ_EXHAUSTED);
    load_is(q, 1, 0);
    assert_int_equal(bfd_fairq_settle(q, j, 7, 0), BFD_FQ_EXHAUSTED | BFD_FQ_FREED);
    load_is(q, 0, 0);
    bfd_fairq_free(q);
}

/* Tenant A queues 4 chunks before tenant B queues 2; workers free up one at
 * a time. By hand:
 *   1. A 0 running, B 0; neither served: tie, queue order -> a1:0
 *   2. A 1 running, B 0 -> b1:0
 *   3. A 1, B 1; A served at 1, B at 2 -> A, longer ago -> a1:1
 *   b1:0 finishes: A 2, B 0
 *   4. -> b1:1
 *   a1:0 finishes: A 1, B 1; A served at 3, B at 4
 *   5. -> a1:2
 *   6. A 2, B 1 -> B has nothing left -> a1:3 */
static void tenants_take_turns(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(1);
    const int a[] = {0, 1, 2, 3}, b[] = {0, 1};
    add(q, "a1", "A", a, 4, 0);
    add(q, "b1", "B", b, 2, 0);
    bfd_fq_job *a1 = take(q, "a1", 0, 1);
    bfd_fq_job *b1 = take(q, "b1", 0, 1);
    take(q, "a1", 1, 0);
    assert_int_equal(bfd_fairq_settle(q, b1, 0, 0), 0);
    take(q, "b1", 1, 0);
    assert_int_equal(bfd_fairq_settle(q, a1, 0, 0), 0);
    take(q, "a1", 2, 0);
    take(q, "a1", 3, 0);
    nothing_to_pick(q);
    load_is(q, 4, 0);
    bfd_fairq_free(q);
}

/* A tenant with many campaigns does not crowd out one with few: A has
 * three one-chunk campaigns, B one; tenant_running 3 lets A start all.
 *   1. tie, queue order -> a1
 *   2. A 1, B 0 -> b1
 *   3. B has nothing left to take -> a2 (A's oldest with chunks left), then a3 */
static void busy_tenant_does_not_crowd_out(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(3);
    const int one[] = {0};
    add(q, "a1", "A", one, 1, 0);
    add(q, "a2", "A", one, 1, 0);
    add(q, "a3", "A", one, 1, 0);
    add(q, "b1", "B", one, 1, 0);
    take(q, "a1", 0, 1);
    take(q, "b1", 0, 1);
    take(q, "a2", 0, 1);
    take(q, "a3", 0, 1);
    nothing_to_pick(q);
    bfd_fairq_free(q);
}

/* tenant_running 1: a tenant's second campaign waits until its first has
 * nothing running and nothing queued, however many workers are free. */
static void tenant_limit_holds_new_campaigns(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(1);
    const int two[] = {0, 1}, one[] = {0};
    add(q, "a1", "A", two, 2, 0);
    add(q, "a2", "A", one, 1, 0);
    bfd_fq_job *a1 = take(q, "a1", 0, 1);
    take(q, "a1", 1, 0);
    nothing_to_pick(q);   /* a2 waits: a1 started and still runs */
    load_is(q, 2, 1);
    assert_int_equal(bfd_fairq_settle(q, a1, 0, 0), BFD_FQ_EXHAUSTED);
    nothing_to_pick(q);   /* one chunk of a1 still runs */
    assert_int_equal(bfd_fairq_settle(q, a1, 1, 0), BFD_FQ_EXHAUSTED | BFD_FQ_FREED);
    take(q, "a2", 0, 1);
    bfd_fairq_free(q);

    /* with 2, both start at once */
    q = mkq(2);
    add(q, "a1", "A", two, 2, 0);
    add(q, "a2", "A", one, 1, 0);
    take(q, "a1", 0, 1);
    take(q, "a1", 1, 0);   /* started campaigns of a tenant first */
    take(q, "a2", 0, 1);
    bfd_fairq_free(q);
}

/* After a restart: a campaign that ran before goes ahead of an older one
 * that never started, and is not held by the tenant's limit. */
static void started_campaigns_go_first(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(1);
    const int one[] = {0}, two[] = {2, 3};
    add(q, "new", "A", one, 1, 0);
    add(q, "old1", "A", two, 2, 1);
    add(q, "old2", "A", one, 1, 1);
    take(q, "old1", 2, 0);   /* not its first: it started before the restart */
    take(q, "old1", 3, 0);
    take(q, "old2", 0, 0);   /* also started: the limit of 1 does not hold it */
    nothing_to_pick(q);      /* "new" waits for the two started ones */
    bfd_fairq_free(q);
}

/* A chunk whose worker died goes back and is taken next, before the
 * campaign's other chunks. */
static void requeued_chunk_is_next(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(1);
    const int c[] = {5, 7, 9};
    add(q, "a1", "A", c, 3, 0);
    bfd_fq_job *j = take(q, "a1", 5, 1);
    take(q, "a1", 7, 0);
    assert_int_equal(bfd_fairq_settle(q, j, 5, 1), 0);
    load_is(q, 1, 2);
    take(q, "a1", 5, 0);
    take(q, "a1", 9, 0);
    nothing_to_pick(q);
    bfd_fairq_free(q);
}

/* A failed campaign gives no more chunks and puts none back. */
static void failed_campaign_stops_and_leaves(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(1);
    const int c[] = {0, 1, 2}, one[] = {0};
    add(q, "a1", "A", c, 3, 0);
    add(q, "b1", "B", one, 1, 0);
    bfd_fq_job *j = take(q, "a1", 0, 1);
    take(q, "b1", 0, 1);
    take(q, "a1", 1, 0);
    bfd_fairq_fail(q, j);
    assert_int_equal(j->over, 1);
    nothing_to_pick(q);                 /* a1:2 is not given */
    load_is(q, 3, 0);
    assert_int_equal(bfd_fairq_settle(q, j, 0, 1), BFD_FQ_EXHAUSTED);   /* requeue refused */
    nothing_to_pick(q);
    assert_int_equal(bfd_fairq_settle(q, j, 1, 0), BFD_FQ_EXHAUSTED | BFD_FQ_FREED);
    load_is(q, 1, 0);
    bfd_fairq_free(q);
}

static void cancel_queued_and_running(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(2);
    const int c[] = {0, 1}, one[] = {0};
    add(q, "a1", "A", c, 2, 0);
    add(q, "a2", "A", one, 1, 0);
    /* queued only: gone at once */
    assert_null(bfd_fairq_cancel(q, "a2"));
    load_is(q, 0, 2);
    bfd_fq_job *j = take(q, "a1", 0, 1);
    /* running: handed back so its chunks can be stopped; nothing more taken */
    assert_ptr_equal(bfd_fairq_cancel(q, "a1"), j);
    nothing_to_pick(q);
    load_is(q, 1, 0);
    assert_int_equal(bfd_fairq_settle(q, j, 0, 1), BFD_FQ_EXHAUSTED | BFD_FQ_FREED);
    load_is(q, 0, 0);
    assert_null(bfd_fairq_cancel(q, "a1"));   /* twice: nothing there */
    bfd_fairq_free(q);
}

/* The queue owns copies: the caller's strings may go. */
static void spec_is_copied(void **state)
{
    (void)state;
    bfd_fairq *q = mkq(1);
    char id[8] = "x1", tenant[8] = "T";
    const int one[] = {3};
    add(q, id, tenant, one, 1, 0);
    strcpy(id, "zz");
    strcpy(tenant, "U");
    int c = -1;
    bfd_fq_job *j = bfd_fairq_pick(q, &c);
    assert_non_null(j);
    assert_string_equal(j->spec.id, "x1");
    assert_string_equal(j->spec.tenant, "T");
    assert_string_equal(j->spec.errmap_path, "");   /* none: "" */
    assert_int_equal(j->spec.n_chunks, 16);
    bfd_fairq_free(q);   /* frees what is still queued */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_queue),
        cmocka_unit_test(one_campaign_in_given_order),
        cmocka_unit_test(tenants_take_turns),
        cmocka_unit_test(busy_tenant_does_not_crowd_out),
        cmocka_unit_test(tenant_limit_holds_new_campaigns),
        cmocka_unit_test(started_campaigns_go_first),
        cmocka_unit_test(requeued_chunk_is_next),
        cmocka_unit_test(failed_campaign_stops_and_leaves),
        cmocka_unit_test(cancel_queued_and_running),
        cmocka_unit_test(spec_is_copied),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
