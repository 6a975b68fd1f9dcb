/* The graph's output Gemm (a classifier) over every batch at once.
 *
 * A trial whose change reaches a CNN's classifier re-ran it in every
 * batch: at batch 8, mobilenet_v2's 1280 x 1000 classifier read (and
 * transposed into panels) all of its 5 MB weight for 8 rows, eight times a
 * trial, about 7% of a trial's time on uniform weight faults. Instead each
 * batch hands the classifier's changed input rows over (bf__out_defer) and
 * leaves its output alone; once the batches are done, one product runs
 * over all of those rows (bf__out_flush), the weight read once, and its
 * rows are compared with the golden outputs and written into dx->out as
 * the end of run_batch does (diffexec.c).
 *
 * Exact: each output element of bf__sgemm is the in-order chain over its
 * row of A and column of B, whatever rows share the product (sgemm.h), and
 * the step's single rows were found at start to give the whole product's
 * bits (roww 1, gemm_widths in diffshared.c; a partial last batch of one
 * row has no second row to check that with, and is a row of the same
 * product); an input row equal to the
 * golden one gives the golden output, and is not computed. Taken only
 * where nothing else touches the outputs: no value fault in the trial, no
 * faulty parameter of the Gemm, no near-exact update (whose batches may be
 * redone), no row mode (whose rows come out batch by batch: the changed
 * rows keep their ascending order, which the metrics' sums follow). */
#include <string.h>

#include "base/alloc.h"
#include "diff/diff_impl.h"

/* A worker's output product: made by bf__out_init whether or not the graph
 * has such a Gemm (step -1 then, and no buffers), so the others need not
 * ask. */
struct bf__dx_out {
    int step;                    /* the output Gemm's step; -1: none */
    int on;                      /* this trial defers it */
    float *a;                    /* the input rows handed over, k floats each */
    float *y;                    /* their outputs, out_cols each */
    int64_t *row;                /* their samples, ascending */
    int64_t n_rows;
    int64_t n_batched;           /* products so run */
};

bf_status bf__out_init(bf__dx *dx, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    bf_plan *p = dx->plan[0];
    bf__dx_out *o = dx->og = bf__calloc(1, sizeof *o);
    if (!o) return bf__dx_oom(err);
    o->step = -1;
    if (!p || sh->out_val < 0 || !sh->roww[0]) return BF_OK;
    int i = p->val_step[sh->out_val];
    bf__gemm_info g;
    if (i < 0 || !bf__gemm_params(&p->steps[i], &g) || g.trans_a || g.c_rs || g.n != sh->out_cols || g.m != sh->batch)
        return BF_OK;
    int bv = p->steps[i].node->in[1];
    /* single rows give the product's bits: found on the full batch, and on
     * the partial last one where it has two rows to check it with */
    /* B a parameter or a computed value the campaign holds (read from its
     * copy: bf__out_defer leaves a trial that moved it to the step) */
    if ((m->values[bv].kind != BF__VAL_PARAM && !bf__pvals_data(sh->pv, bv)) || sh->roww[0][i] != 1 ||
        (dx->plan[1] && sh->roww[1][i] != 1 && bf_plan_batch(dx->plan[1]) >= 2))
        return BF_OK;
    /* every sample's input row: at most the scratch a worker holds anyway
     * (two of the largest values of a batch), so no limit of its own */
    size_t need = (size_t)sh->samples * (size_t)g.k;
    if (need > 2 * sh->scratch_floats) return BF_OK;
    o->a = bf__malloc((need + 1) * sizeof *o->a);
    o->y = bf__malloc(((size_t)sh->samples * (size_t)g.n + 1) * sizeof *o->y);
    o->row = bf__malloc(((size_t)sh->samples + 1) * sizeof *o->row);
    if (!o->a || !o->y || !o->row) return bf__dx_oom(err);
    o->step = i;
    return BF_OK;
}

void bf__out_free(bf__dx *dx)
{
    bf__dx_out *o = dx->og;
    if (!o) return;
    bf__free(o->a);
    bf__free(o->y);
    bf__free(o->row);
    bf__free(o);
    dx->og = NULL;
}

void bf__out_off(bf__dx *dx) { dx->og->on = 0; }
int64_t bf__out_batched(const bf__dx *dx) { return dx->og->n_batched; }

void bf__out_begin(bf__dx *dx, size_t n_vf, int rowable)
{
    bf__dx_out *o = dx->og;
    o->n_rows = 0;
    o->on = o->step >= 0 && n_vf == 0 && !rowable && dx->no_approx && !dx->param_hit[o->step];
}

bf_status bf__out_defer(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    bf__dx_out *o = dx->og;
    const bf__step *s = &p->steps[i];
    *done = 0;
    if (!o->on || (int)i != o->step || dx->n_reached || p->step_hit[i]) return BF_OK;
    int av = s->node->in[0];
    bf__gemm_info g;
    if (dx->state[av] != DIRTY || !bf__gemm_params(s, &g)) return BF_OK;
    /* a computed B or C (held: diffshared.c) a fault of the trial moved:
     * the step runs whole, every batch alike (the trial moved it in each) */
    for (int j = 1; j < s->n_in && j < 3; j++)
        if (s->node->in[j] >= 0 && bf__runtime(p, s->node->in[j]) && dx->state[s->node->in[j]] == DIRTY) return BF_OK;
    bf_status st = bf__dx_fetch(dx, p, b, av, err);
    if (st != BF_OK) return st;
    const float *a = p->vals[av].data, *ag = bf__gcache_block(sh->gc, av, b);
    size_t row = (size_t)g.k * sizeof *a;
    int64_t n0 = o->n_rows;
    for (int r = 0; r < g.m; r++) {
        if (ag && memcmp(a + (int64_t)r * g.k, ag + (int64_t)r * g.k, row) == 0) continue;   /* golden output */
        memcpy(o->a + o->n_rows * g.k, a + (int64_t)r * g.k, row);
        o->row[o->n_rows++] = b * sh->batch + r;
    }
    dx->work[i] += (double)(o->n_rows - n0) / (double)g.m;
    *done = OUT_DEFERRED;
    return BF_OK;
}

void bf__out_flush(bf__dx *dx)
{
    const bf__dx_shared *sh = dx->sh;
    bf__dx_out *o = dx->og;
    int64_t n = o->n_rows;
    o->on = 0;
    o->n_rows = 0;
    if (!n) return;
    const bf_plan *p = dx->plan[0];
    const bf__step *s = &p->steps[o->step];
    bf__gemm_info g;
    bf__gemm_params(s, &g);
    g.m = (int)n;
    /* a computed B or C from the campaign's copy: golden, as the deferred
     * batches read it (the plan's own pointer may be the last batch's) */
    const float *bw = bf__pvals_data(sh->pv, s->node->in[1]), *c = NULL;
    if (!bw) bw = p->vals[s->node->in[1]].data;
    if (s->n_in > 2 && s->node->in[2] >= 0) c = bf__pvals_data(sh->pv, s->node->in[2]);
    if (!c && s->n_in > 2 && s->node->in[2] >= 0) c = p->vals[s->node->in[2]].data;
    bf__gemm_product(&g, o->a, bw, c, o->y);
    o->n_batched++;
    size_t row = (size_t)sh->out_cols * sizeof(float);
    int64_t last = -1;
    for (int64_t t = 0; t < n; t++) {
        int64_t r = o->row[t];
        const float *y = o->y + t * sh->out_cols;
        if (memcmp(y, sh->golden + r * sh->out_cols, row) == 0) continue;
        memcpy(dx->out + r * sh->out_cols, y, row);
        dx->rows[dx->n_rows++] = r;
        int64_t b = bf__batch_of(sh, r);
        if (b != last) dx->touched[dx->n_touched++] = last = b;   /* written: golden again after the trial */
    }
}
