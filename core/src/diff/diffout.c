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

bf_status bf__out_init(bf__dx *dx, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    bf_plan *p = dx->plan[0];
    dx->out_step = -1;
    if (!p || sh->out_val < 0 || !sh->roww[0]) return BF_OK;
    int i = p->val_step[sh->out_val];
    bf__gemm_info g;
    if (i < 0 || !bf__gemm_params(&p->steps[i], &g) || g.trans_a || g.c_rs || g.n != sh->out_cols || g.m != sh->batch)
        return BF_OK;
    int bv = p->steps[i].node->in[1];
    /* single rows give the product's bits: found on the full batch, and on
     * the partial last one where it has two rows to check it with */
    if (m->values[bv].kind != BF__VAL_PARAM || sh->roww[0][i] != 1 ||
        (dx->plan[1] && sh->roww[1][i] != 1 && bf_plan_batch(dx->plan[1]) >= 2))
        return BF_OK;
    /* every sample's input row: at most the scratch a worker holds anyway
     * (two of the largest values of a batch), so no limit of its own */
    size_t need = (size_t)sh->samples * (size_t)g.k;
    if (need > 2 * sh->scratch_floats) return BF_OK;
    dx->out_a = bf__malloc((need + 1) * sizeof *dx->out_a);
    dx->out_y = bf__malloc(((size_t)sh->samples * (size_t)g.n + 1) * sizeof *dx->out_y);
    dx->out_row = bf__malloc(((size_t)sh->samples + 1) * sizeof *dx->out_row);
    if (!dx->out_a || !dx->out_y || !dx->out_row) return bf__dx_oom(err);
    dx->out_step = i;
    return BF_OK;
}

void bf__out_free(bf__dx *dx)
{
    bf__free(dx->out_a);
    bf__free(dx->out_y);
    bf__free(dx->out_row);
}

void bf__out_begin(bf__dx *dx, size_t n_vf, int rowable)
{
    dx->n_out_rows = 0;
    dx->out_on = dx->out_step >= 0 && n_vf == 0 && !rowable && dx->no_approx && !dx->param_hit[dx->out_step];
}

bf_status bf__out_defer(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf__step *s = &p->steps[i];
    *done = 0;
    if (!dx->out_on || (int)i != dx->out_step || dx->n_reached || p->step_hit[i]) return BF_OK;
    int av = s->node->in[0];
    bf__gemm_info g;
    if (dx->state[av] != DIRTY || !bf__gemm_params(s, &g)) return BF_OK;
    bf_status st = bf__dx_fetch(dx, p, b, av, err);
    if (st != BF_OK) return st;
    const float *a = p->vals[av].data, *ag = bf__gcache_block(sh->gc, av, b);
    size_t row = (size_t)g.k * sizeof *a;
    int64_t n0 = dx->n_out_rows;
    for (int r = 0; r < g.m; r++) {
        if (ag && memcmp(a + (int64_t)r * g.k, ag + (int64_t)r * g.k, row) == 0) continue;   /* golden output */
        memcpy(dx->out_a + dx->n_out_rows * g.k, a + (int64_t)r * g.k, row);
        dx->out_row[dx->n_out_rows++] = b * sh->batch + r;
    }
    dx->work[i] += (double)(dx->n_out_rows - n0) / (double)g.m;
    *done = OUT_DEFERRED;
    return BF_OK;
}

void bf__out_flush(bf__dx *dx)
{
    const bf__dx_shared *sh = dx->sh;
    int64_t n = dx->n_out_rows;
    dx->out_on = 0;
    dx->n_out_rows = 0;
    if (!n) return;
    const bf_plan *p = dx->plan[0];
    const bf__step *s = &p->steps[dx->out_step];
    bf__gemm_info g;
    bf__gemm_params(s, &g);
    g.m = (int)n;
    const float *c = s->n_in > 2 && s->node->in[2] >= 0 ? p->vals[s->node->in[2]].data : NULL;
    bf__gemm_product(&g, dx->out_a, p->vals[s->node->in[1]].data, c, dx->out_y);
    dx->n_out_batched++;
    size_t row = (size_t)sh->out_cols * sizeof(float);
    int64_t last = -1;
    for (int64_t t = 0; t < n; t++) {
        int64_t r = dx->out_row[t];
        const float *y = dx->out_y + t * sh->out_cols;
        if (memcmp(y, sh->golden + r * sh->out_cols, row) == 0) continue;
        memcpy(dx->out + r * sh->out_cols, y, row);
        dx->rows[dx->n_rows++] = r;
        int64_t b = bf__batch_of(sh, r);
        if (b != last) dx->touched[dx->n_touched++] = last = b;   /* written: golden again after the trial */
    }
}
