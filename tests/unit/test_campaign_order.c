/* The campaign's last trials handed out most expensive first
 * (core/src/campaign/campaign_order.c, docs/ENGINE.md step 9), on
 * demo_digits (conv1 -> conv2 -> fc): a fault in conv1's weights re-runs
 * the whole pass, one in fc's only the last step.
 *
 * - A list of 12 fc faults then 4 conv1 faults, 2 threads: 16 trials in
 *   chunks of 1, at most 64 a worker, so all 16 are reordered and the first
 *   handed out is trial 12, the first of the conv1 faults (equal costs keep
 *   trial order); every record is the 1-thread run's.
 * - One thread, the exact engine: nothing reordered (tail_ordered 0,
 *   tail_first -1). The workers' accounting counts every trial once, on
 *   one of the 1 or 2 workers, and a lone worker never waits for another.
 * - With a stop target, no trial past the last check before the end is
 *   computed ahead of it: 70 trials on 2 threads (chunks of 2) check at
 *   trial 64, so only the last 6 are reordered, where all 70 are without
 *   one; 200 trials on 2 threads (chunks of 4, more than 64 a worker):
 *   the last four chunks a worker, 32 trials.
 *   The margin is one no campaign of 70 trials can meet, so all 70 run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"
#include "campaign_check.h"

#define N_LIST 16

static void run_list(const tc_loaded *l, int threads, int exact, tc_recs *out, bf_campaign_result *res)
{
    bf_fault_entry list[N_LIST];
    for (int i = 0; i < N_LIST; i++)
        list[i] = i < 12 ? (bf_fault_entry){.tensor = "fc.weight", .index = 200 * i, .bit = 22, .sample = -1}
                         : (bf_fault_entry){.tensor = "conv1.weight", .index = 17 * (i - 12), .bit = 22, .sample = -1};
    bf_campaign_spec s = tc_base_spec(64);
    s.sampling = BF_SAMPLE_LIST;
    s.list = list;
    s.n_list = N_LIST;
    bf_campaign *c = tc_make(l->m, l->ds, &s);
    out->r = calloc(N_LIST, sizeof *out->r);
    assert_non_null(out->r);
    out->n = 0;   /* tc_keep appends */
    bf_error err = {0};
    bf_campaign_opts o = {.threads = threads, .exact = exact, .on_trial = tc_keep, .user = out};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(res->trials_done, N_LIST);
    assert_int_equal(out->n, N_LIST);
    bf_campaign_free(c);
}

static void longest_first_same_records(void **state)
{
    const tc_loaded *l = *state;
    tc_recs one = {0}, two = {0}, ex = {0};
    bf_campaign_result r1, r2, rx;
    run_list(l, 1, 0, &one, &r1);
    run_list(l, 2, 0, &two, &r2);
    run_list(l, 2, 1, &ex, &rx);
    assert_int_equal(r1.tail_ordered, 0);
    assert_int_equal(r1.tail_first, -1);
    assert_int_equal(rx.tail_ordered, 0);
    assert_int_equal(rx.tail_first, -1);
    assert_int_equal(r2.tail_ordered, 16);
    assert_int_equal(r2.tail_first, 12);
    for (int i = 0; i < N_LIST; i++) {
        tc_assert_same_record(&one.r[i], &two.r[i]);
        tc_assert_same_record(&ex.r[i], &two.r[i]);
    }
    tc_assert_same_aggregates(&r1, &r2);
    /* the workers' accounting: each trial computed once, by one of them */
    assert_int_equal(r1.workers.n, 1);
    assert_int_equal(r2.workers.n, 2);
    assert_int_equal(rx.workers.n, 2);
    assert_int_equal(r1.workers.trials, N_LIST);
    assert_int_equal(r2.workers.trials, N_LIST);
    assert_int_equal(rx.workers.trials, N_LIST);
    assert_true(r2.workers.cpu_max > 0 && r2.workers.cpu_max <= r2.workers.cpu);
    assert_true(r1.workers.cpu == r1.workers.cpu_max && r1.workers.idle_end == 0);
    assert_true(r2.workers.idle_end >= 0 && r2.workers.wait >= 0 && r2.workers.faults >= 0);
    bf_campaign_result_free(&r1);
    bf_campaign_result_free(&r2);
    bf_campaign_result_free(&rx);
    free(one.r);
    free(two.r);
    free(ex.r);
}

static int64_t ordered_of(const tc_loaded *l, double margin, int64_t trials)
{
    bf_campaign_spec s = tc_all_weights_spec(5, trials);
    s.batch = 64;
    s.stop_margin = margin;
    bf_campaign *c = tc_make(l->m, l->ds, &s);
    bf_campaign_result res;
    bf_error err = {0};
    bf_campaign_opts o = {.threads = 2};
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(res.trials_done, trials);
    assert_false(res.stopped_early);
    int64_t n = res.tail_ordered;
    assert_true(res.tail_first >= trials - n && res.tail_first < trials);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    return n;
}

static void not_past_a_stop_check(void **state)
{
    const tc_loaded *l = *state;
    assert_int_equal(ordered_of(l, 0, 70), 70);       /* at most 64 a worker: all */
    assert_int_equal(ordered_of(l, 1e-9, 70), 6);     /* trials 64..69 only */
    assert_int_equal(ordered_of(l, 0, 200), 32);      /* four chunks of 4 a worker */
}

static int setup(void **state) { return tc_group_open(state, BF_FIXTURES "/conformance/demo_digits"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(longest_first_same_records),
        cmocka_unit_test(not_past_a_stop_check),
    };
    return cmocka_run_group_tests(tests, setup, tc_group_close);
}
