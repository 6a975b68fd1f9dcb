/* One differential worker over a golden run, as the arena tests build it
 * (test_diff_arena.c, test_diff_arena_pin.c): the reference evaluator's
 * golden pass, the shared state at a cache budget, one worker on `ev`;
 * any failure fails the test with its message. Inline: a header of tests. */
#ifndef BF_TEST_DX_WORKER_H
#define BF_TEST_DX_WORKER_H

#include "diff/diff_impl.h"

typedef struct tdx_worker {
    bf_evaluator *ev, *ref;
    bf__dx_shared *sh;
    bf__dx *dx;
    float *golden;   /* tdx_open_pages' golden outputs (the shared state's: they outlive it) */
} tdx_worker;

/* takes ev and ref (freed by tdx_close) */
static inline void tdx_open(tdx_worker *w, bf_evaluator *ev, bf_evaluator *ref, int64_t budget)
{
    *w = (tdx_worker){.ev = ev, .ref = ref};
    bf_eval_result r;
    bf_error err = {0};
    if (bf_evaluator_run(ref, NULL, 0, &r, &err) != BF_OK) fail_msg("%s", err.msg);
    if (bf__dx_shared_create(&w->ev, 1, r.samples, r.outputs, r.out_cols, budget, 0, &w->sh, &err) != BF_OK ||
        bf__dx_create(w->sh, w->ev, &w->dx, &err) != BF_OK)
        fail_msg("%s", err.msg);
}

/* The shared state as a campaign's golden pass makes it (bf__dx_shared_golden,
 * then bf__dx_shared_finish), the cache's blocks written with `pages`
 * beside BF__WRITE_ONCE (BF__WRITE_HUGE or 0: the campaign's choice from
 * the host's measured pages) */
static inline void tdx_open_shared(tdx_worker *w, bf_evaluator *ev, bf_evaluator *ref, int64_t budget, unsigned pages)
{
    *w = (tdx_worker){.ev = ev, .ref = ref};
    bf_eval_result r;
    bf_error err = {0};
    if (bf_evaluator_run(ref, NULL, 0, &r, &err) != BF_OK) fail_msg("%s", err.msg);
    w->golden = calloc((size_t)(r.samples * r.out_cols) + 1, sizeof(float));
    assert_non_null(w->golden);
    if (bf__dx_shared_golden(&w->ev, 1, r.samples, r.out_cols, budget, NULL, NULL, w->golden, pages, &w->sh, &err) !=
            BF_OK ||
        bf__dx_shared_finish(w->sh, w->ev, w->golden, &err) != BF_OK)
        fail_msg("%s", err.msg);
    /* the pass's outputs are the reference evaluator's */
    assert_memory_equal(w->golden, r.outputs, (size_t)(r.samples * r.out_cols) * sizeof(float));
}

/* tdx_open_shared, then the worker (tdx_open_shared alone: the shared state
 * without it, w->dx NULL) */
static inline void tdx_open_pages(tdx_worker *w, bf_evaluator *ev, bf_evaluator *ref, int64_t budget, unsigned pages)
{
    tdx_open_shared(w, ev, ref, budget, pages);
    bf_error err = {0};
    if (bf__dx_create(w->sh, w->ev, &w->dx, &err) != BF_OK) fail_msg("%s", err.msg);
}

static inline void tdx_close(tdx_worker *w)
{
    bf__dx_free(w->dx);
    bf__dx_shared_free(w->sh);
    bf_evaluator_free(w->ev);
    bf_evaluator_free(w->ref);
    free(w->golden);
}

#endif
