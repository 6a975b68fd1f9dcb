/* The golden-activation cache: every value a trial may need to read back,
 * computed once per campaign.
 *
 * A trial re-executes only the steps downstream of its faults; every other
 * input those steps read, and every output they are compared against, is a
 * golden value of the same batch. Keeping them all would cost the sum of
 * every activation over the eval set, so the cache holds what fits in its
 * budget and the executor recomputes the rest from the nearest cached
 * ancestor (diffexec.c): slower, never different. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "diff/diff.h"

struct bf__gcache {
    int64_t samples, batch, n_batches;
    size_t n_values;
    unsigned char **blk;      /* per value: NULL, or its blocks, batch b at b * full[v] */
    size_t *full;             /* bytes of value v in a full batch */
    size_t bytes;
    double *step_s;           /* per plan step: seconds a full batch took, averaged over the pass */
    size_t n_steps;
};

void bf__gcache_free(bf__gcache *gc)
{
    if (!gc) return;
    for (size_t v = 0; gc->blk && v < gc->n_values; v++) bf__free(gc->blk[v]);
    bf__free(gc->blk);
    bf__free(gc->full);
    bf__free(gc->step_s);
    bf__free(gc);
}

typedef struct cand {
    size_t v, bytes;
    int must;
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->must != y->must) return y->must - x->must;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* bf_plan_run, each step timed (full batches: what a trial's step costs,
 * for --stats); a plan with value faults runs as bf_plan_run does. */
static bf_status run_timed(bf__gcache *gc, bf_plan *p, int time_it, bf_error *err)
{
    if (!time_it || p->n_vf || p->inputs_hit) return bf_plan_run(p, err);
    for (size_t i = 0; i < p->n_steps; i++) {
        double t0 = now_s();
        bf_status st = bf__plan_run_step(p, i, err);
        if (st != BF_OK) return st;
        gc->step_s[i] += now_s() - t0;
    }
    return BF_OK;
}

bf_status bf__gcache_build(bf_plan *full, bf_plan *rest, const bf_tensor *const *feeds, int64_t samples,
                           size_t budget, const unsigned char *must, const float *golden, float *golden_out,
                           bf__gcache **out, bf_error *err)
{
    const bf_model *m = bf_plan_model(full);
    bf_status st = BF_OK;
    cand *cs = NULL;
    size_t n_c = 0;
    bf__gcache *gc = bf__calloc(1, sizeof *gc);
    *out = NULL;
    if (!gc) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache");
    gc->samples = samples;
    gc->batch = bf_plan_batch(full);
    gc->n_batches = (samples + gc->batch - 1) / gc->batch;
    gc->n_values = m->n_values;
    gc->blk = bf__calloc(m->n_values + 1, sizeof *gc->blk);
    gc->full = bf__calloc(m->n_values + 1, sizeof *gc->full);
    cs = bf__calloc(m->n_values + 1, sizeof *cs);
    gc->n_steps = full->n_steps;
    gc->step_s = bf__calloc(full->n_steps + 1, sizeof *gc->step_s);
    if (!gc->blk || !gc->full || !cs || !gc->step_s) { st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache"); goto out; }

    int64_t n_full = samples / gc->batch;
    for (size_t v = 0; v < m->n_values; v++) {
        if (full->val_step[v] < 0) continue;     /* graph inputs and values no step computes */
        size_t fb = bf_tensor_nbytes(&full->vals[v]);
        size_t tb = rest ? bf_tensor_nbytes(&rest->vals[v]) : 0;
        gc->full[v] = fb;
        cs[n_c++] = (cand){.v = v, .bytes = fb * (size_t)n_full + tb, .must = must && must[v]};
    }
    qsort(cs, n_c, sizeof *cs, cand_cmp);
    for (size_t i = 0; i < n_c; i++) {
        if (!cs[i].must && gc->bytes + cs[i].bytes > budget) continue;
        gc->blk[cs[i].v] = bf__malloc(cs[i].bytes + 1);
        if (!gc->blk[cs[i].v]) {
            if (cs[i].must) { st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache"); goto out; }
            continue;   /* the budget was more than the machine has: recompute this one */
        }
        gc->bytes += cs[i].bytes;
    }

    for (int64_t b = 0; b < gc->n_batches; b++) {
        bf_plan *p = b < n_full ? full : rest;
        for (size_t i = 0; i < m->n_inputs; i++)
            if ((st = bf_dataset_copy_rows(feeds[i], b * gc->batch, bf_plan_batch(p), bf_plan_input(p, i), err)) != BF_OK)
                goto out;
        if ((st = run_timed(gc, p, b < n_full, err)) != BF_OK) goto out;
        /* This pass runs other plans than the campaign's golden pass did:
         * if the model does not evaluate deterministically, no trial could
         * be told from golden. (The workers' evaluators used to check it
         * with a golden pass each.) */
        const bf_tensor *o = bf_plan_output(p, 0);
        size_t at = (size_t)(b * gc->batch) * (size_t)(bf_tensor_numel(o) / bf_plan_batch(p));
        if (golden_out) memcpy(golden_out + at, o->data, bf_tensor_nbytes(o));
        if (golden && memcmp(o->data, golden + at, bf_tensor_nbytes(o)) != 0) {
            st = bf_error_set(err, BF_EUNSUPPORTED,
                              "the golden pass of batch %lld differs from the campaign's: this model does not "
                              "evaluate deterministically, so outcomes cannot be classified", (long long)b);
            goto out;
        }
        for (size_t v = 0; v < m->n_values; v++)
            if (gc->blk[v]) memcpy(gc->blk[v] + (size_t)b * gc->full[v], p->vals[v].data, bf_tensor_nbytes(&p->vals[v]));
    }
    for (size_t i = 0; n_full > 0 && i < gc->n_steps; i++) gc->step_s[i] /= (double)n_full;
    *out = gc;
    gc = NULL;
out:
    bf__free(cs);
    bf__gcache_free(gc);
    return st;
}

const void *bf__gcache_block(const bf__gcache *gc, int64_t v, int64_t b)
{
    return gc->blk[v] ? gc->blk[v] + (size_t)b * gc->full[v] : NULL;
}

size_t bf__gcache_bytes(const bf__gcache *gc) { return gc->bytes; }
const double *bf__gcache_step_seconds(const bf__gcache *gc) { return gc->step_s; }
int64_t bf__gcache_batches(const bf__gcache *gc) { return gc->n_batches; }
