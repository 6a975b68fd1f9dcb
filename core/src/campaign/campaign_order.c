/* The order workers take a campaign's last chunks in.
 *
 * Workers take chunks in trial order, and under the differential engine
 * trials differ in cost by 10-100x: a weight fault re-runs the steps from
 * the first one that reads the weight to the output, a fault in resnet18's
 * layer1 most of a pass, one in its classifier almost nothing. The worker
 * that takes the last long trial runs alone at the end while the others
 * idle: in resnet18's 40-trial benchmark campaign one draw (of layer1.1's
 * conv1) is a fifth of the campaign's work, and had it been drawn last,
 * two threads would have run about 1.6x one. So the last few chunks (four
 * a worker; every chunk of a campaign of at most 64 trials a worker) are handed
 * out most expensive first, by the share of the pass their faults can
 * reach (bf__dx_param_reach): the longest-first rule that leaves the short
 * ones to fill in at the end.
 *
 * What a campaign computes does not change: records are folded in trial
 * order whatever order they were computed in. Only where no trial would be
 * computed in vain: not under adaptive sampling (a round's trials are drawn
 * from the counts of the rounds before) and not across a stop-rule
 * boundary (the caller's `not_before`), and only for weight faults under
 * the differential engine at two threads or more, where the costs are
 * known before a trial runs. The price: the trials of the window are folded
 * (and reported in progress) once the window's first trial in trial order
 * is done. */
#include <stdlib.h>

#include "base/alloc.h"
#include "campaign/run.h"

typedef struct chunk_cost {
    int64_t chunk;
    double cost;
} chunk_cost;

/* most expensive first; equal costs in trial order (the sort is not stable) */
static int by_cost(const void *a, const void *b)
{
    const chunk_cost *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? 1 : -1;
    return (x->chunk > y->chunk) - (x->chunk < y->chunk);
}

/* The share of the pass trial t's faults can reach: the furthest reach of
 * any of them (their re-runs overlap from the earliest step on). */
static bf_status trial_cost(const runner *rn, int64_t t, bf__draw *d, double *cost, bf_error *err)
{
    const bf_campaign *c = rn->c;
    bf_status st = bf__campaign_draw(c, t, d, err);
    if (st != BF_OK) return st;
    *cost = 0;
    for (size_t i = 0; i < d->n; i++) {
        double r = bf__dx_param_reach(rn->dxs, c->surface.site_param[d->f[i].site]);
        if (r > *cost) *cost = r;
    }
    return BF_OK;
}

bf_status bf__run_order_tail(runner *rn, int64_t not_before, bf_error *err)
{
    const bf_campaign *c = rn->c;
    rn->tail_from = rn->n_chunks;
    if (rn->n_workers < 2 || rn->exact || !rn->dxs || rn->adaptive || c->faults.target != BF_TARGET_WEIGHTS ||
        c->faults.kind == BF_FAULT_BER)
        return BF_OK;
    /* a small campaign (at most 64 trials a worker: the benchmarks' 20 and
     * 40) ordered whole: a replay of measured trial costs put the window
     * of the last 4 chunks a worker at 1.96x one thread on mobilenet_v2, a
     * whole campaign so ordered at 2.00x (docs/perf/trials.md, h17-camp);
     * a larger one keeps the window short, since nothing is folded (or
     * reported in progress) until the window's first trial in trial order
     * is done, and a window of thousands of trials would show none for long */
    int64_t w = rn->n <= 64 * (int64_t)rn->n_workers ? rn->n_chunks : 4 * (int64_t)rn->n_workers;
    if (w > rn->ring_n) w = rn->ring_n;   /* every chunk of the window within the ring of the fold */
    int64_t from = rn->n_chunks - w > not_before ? rn->n_chunks - w : not_before;
    if (from < 0) from = 0;
    if (rn->n_chunks - from < 2) return BF_OK;
    int64_t n = rn->n_chunks - from;
    chunk_cost *cc = bf__calloc((size_t)n, sizeof *cc);
    rn->tail_order = bf__calloc((size_t)n, sizeof *rn->tail_order);
    if (!cc || !rn->tail_order) {
        bf__free(cc);
        return bf_error_set(err, BF_ENOMEM, "out of memory for the campaign's hand-out order");
    }
    bf__draw d = {0};
    bf_status st = BF_OK;
    for (int64_t j = 0; j < n && st == BF_OK; j++) {
        cc[j].chunk = from + j;
        for (int64_t k = (from + j) * rn->chunk; k < (from + j + 1) * rn->chunk && k < rn->n && st == BF_OK; k++) {
            double cost = 0;
            st = trial_cost(rn, bf__run_trial_of(rn, k), &d, &cost, err);
            cc[j].cost += cost;
        }
    }
    bf__draw_free(&d);
    if (st == BF_OK) {
        qsort(cc, (size_t)n, sizeof *cc, by_cost);
        for (int64_t j = 0; j < n; j++) rn->tail_order[j] = cc[j].chunk;
        rn->tail_from = from;
    }
    bf__free(cc);
    return st;
}
