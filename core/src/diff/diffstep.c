/* One step of a trial computed for less than its whole run (diffexec.c's
 * run_batch tries these in turn, diff_impl.h): a Conv with its fused
 * activation, residual Add or BatchNormalization in its epilogue; a Conv,
 * Gemm or MatMul with one corrupted weight as its one moved output
 * channel or column (an update where its change is clear, else exact); a
 * Gemm or MatMul whose input moved in a few rows, those rows. Split from
 * diffexec.c (one file, one job). */
#include <string.h>

#include "diff/diff_impl.h"
#include "exec/ops/sgemm.h"

/* The step's output starts as the golden one, whatever an earlier fault
 * left in it (a value fault on it is applied again after the step). */
static void golden_output(bf__dx *dx, bf_plan *p, int yv, const float *yg)
{
    bf__dx_own(dx, p, yv);
    memcpy(p->vals[yv].data, yg, bf_tensor_nbytes(&p->vals[yv]));
}

/* dx->fdone's marks and run_fused's *done: FUSED_LAST, FUSED_MID,
 * FUSED_CONV, FUSED_CHAN (diff_impl.h) */

/* A Conv step that computes its activation, a residual Add or a
 * BatchNormalization (and what follows them), in its epilogue as the exact
 * engine's passes do
 * (exec/plan.c, bf__plan_run_fused): the same bits as the steps one by one,
 * without writing and comparing the values in between. *done: 0 when step
 * i fuses nothing now (a value fault needs a value in between); else the
 * steps it computed are marked in dx->fdone for run_batch to skip, and
 * *done is FUSED_CONV: its own output is then marked DIRTY (never written,
 * and only the fused step reads it). */
bf_status bf__dx_run_fused(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err)
{
    int a, n, r = bf__plan_fused_last(p, i, &n, &a);
    *done = 0;
    if (!r) return BF_OK;
    /* the values fused away: the Conv's, and the BN's when more follows */
    int v = p->steps[i].node->out[0], u = n && n != r ? p->steps[n].node->out[0] : -1;
    int w = a && a != r ? p->steps[a].node->out[0] : -1;
    const int ks[4] = {(int)i, n, a, r};
    bf_status st;
    for (int k = 0; k < 4; k++) {   /* the runtime inputs of the steps, but the values fused away */
        if (k && (!ks[k] || (k == 3 && (r == a || r == n)))) continue;
        const bf__step *s = &p->steps[ks[k]];
        for (int j = 0; j < s->n_in; j++) {
            int x = s->node->in[j];
            if (x != v && x != u && x != w && bf__runtime(p, x) && (st = bf__dx_fetch(dx, p, b, x, err)) != BF_OK) return st;
        }
    }
    bf__dx_own_outputs(dx, p, (size_t)r);
    if ((st = bf__plan_run_fused(p, i, err)) != BF_OK) return st;
    dx->work[i] += 1.0;
    if (n && n != r) dx->fdone[n] = FUSED_MID, dx->work[n] += 1.0;
    if (a && a != r) dx->fdone[a] = FUSED_MID, dx->work[a] += 1.0;
    dx->fdone[r] = FUSED_LAST;
    dx->work[r] += 1.0;
    dx->n_fused++;
    *done = FUSED_CONV;
    return BF_OK;
}

/* A Conv with one corrupted weight or bias element and golden input: the
 * moved output channel as an update where its change is clear, else that
 * channel recomputed alone (exact); or through its fused chain when the
 * cache leaves the Conv's output out (bf__dx_chain_channel). */
bf_status bf__dx_try_conv(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    const bf__step *s = &p->steps[i];
    *done = 0;
    /* X read from a parameter (a quantized model's DequantizeLinear of its
     * stored weights, with a faulty zero point): no Conv, and fetch only
     * loads run-time values */
    if (s->n_in < 2 || !bf__runtime(p, s->node->in[0])) return BF_OK;
    int xv = s->node->in[0], yv = s->node->out[0], slot = 0, n = 0;
    for (int j = 1; j < s->n_in && j < 3; j++) {
        int v = s->node->in[j];
        if (v < 0 || m->values[v].kind != BF__VAL_PARAM) continue;
        int k = dx->pfaults[m->values[v].index];
        if (k) n += k, slot = j;
    }
    const float *yg = bf__dx_golden(sh, yv, b);
    if (n != 1 || dx->state[xv] == DIRTY) return BF_OK;
    /* A weight or bias computed at run time (a bias behind an Identity, as
     * torch exports mobilenet_v2's shared ones) is read in place below, by
     * bf__conv_channel or the fused chain: golden there (bf__pv_batch)
     * unless another fault of the trial moved it, when more than one
     * channel may move and the step runs whole */
    for (int j = 1; j < s->n_in && j < 3; j++)
        if (s->node->in[j] >= 0 && dx->state[s->node->in[j]] == DIRTY) return BF_OK;
    const bf__dx_weight *w = dx->pfault[m->values[s->node->in[slot]].index];
    if (!yg) {
        int64_t cin, cout, isp, osp, wn = bf_tensor_numel(&p->vals[s->node->in[1]]);
        if (p->step_hit[i] || !bf__conv_shape(s, &cin, &cout, &isp, &osp) || cout <= 0 || wn < cout) return BF_OK;
        int64_t oc = slot == 2 ? w->index : w->index / (wn / cout);
        if (oc < 0 || oc >= cout) return BF_OK;
        bf_status st = bf__dx_fetch(dx, p, b, xv, err);
        if (st != BF_OK) return st;
        return bf__dx_chain_channel(dx, p, b, (size_t)i, oc, cout, done, err);
    }
    bf_status st = bf__dx_fetch(dx, p, b, xv, err);
    if (st != BF_OK) return st;
    /* the moved channel: the output holds it alone (diffchan.c), unless a
     * value fault on the output needs the whole of it */
    int64_t cin, cout, isp, osp, oc = -1, wn = bf_tensor_numel(&p->vals[s->node->in[1]]);
    int lazy = !p->step_hit[i] && bf__conv_shape(s, &cin, &cout, &isp, &osp) && wn >= cout && cout > 0;
    if (lazy) oc = slot == 2 ? w->index : w->index / (wn / cout);
    lazy = lazy && oc >= 0 && oc < cout;
    if (!lazy) {
        golden_output(dx, p, yv, yg);
    } else {
        bf__dx_own(dx, p, yv);
        float *y = p->vals[yv].data;
        for (int64_t k = 0, nb = bf_plan_batch(p); k < nb && !dx->no_approx; k++)   /* what an update moves */
            memcpy(y + (k * cout + oc) * osp, yg + (k * cout + oc) * osp, (size_t)osp * sizeof *yg);
    }
    const float *x = p->vals[xv].data;
    if (!dx->no_approx && bf__conv_delta(s, slot, x, w->index, w->old_value, w->new_value, p->vals[yv].data) == 1) {
        *done = dx->approx = 1;
    } else {
        /* the channel rewritten whole: the only one the update touched */
        const float *bias = s->n_in > 2 && s->node->in[2] >= 0 ? p->vals[s->node->in[2]].data : NULL;
        *done = bf__conv_channel(s, slot, w->index, x, p->vals[s->node->in[1]].data, bias, p->vals[yv].data, p->scratch);
    }
    if (*done && lazy) {
        *done = CHAN_DONE;
        dx->chan_c = (int)oc;
    }
    return BF_OK;
}

/* The cheaper Gemm forms; returns 1 if one computed the output. */
bf_status bf__dx_try_gemm(bf__dx *dx, bf_plan *p, int tail, int64_t b, size_t i, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    const bf__step *s = &p->steps[i];
    bf__gemm_info g;
    *done = 0;
    if (!sh->colw[tail][i] || !bf__gemm_params(s, &g)) return BF_OK;
    int av = s->node->in[0], bv = s->node->in[1], cv = s->n_in > 2 ? s->node->in[2] : -1, yv = s->node->out[0];
    /* A B or C computed at run time is one the campaign holds (the setup
     * takes no other, diffshared.c), read in place: golden (bf__pv_batch)
     * unless a fault of the trial moved it (its view written, or its step
     * run on a faulty parameter: changed either way), when every column
     * and row may move and the step runs whole */
    int bp = m->values[bv].kind == BF__VAL_PARAM, cp = cv >= 0 && m->values[cv].kind == BF__VAL_PARAM;
    if ((!bp && dx->state[bv] == DIRTY) || (cv >= 0 && !cp && dx->state[cv] == DIRTY)) return BF_OK;
    const float *yg = bf__dx_golden(sh, yv, b);
    size_t qb = (size_t)m->values[bv].index;
    int nb = bp ? dx->pfaults[qb] : 0, nc = cp ? dx->pfaults[m->values[cv].index] : 0;
    const float *c = cv >= 0 ? p->vals[cv].data : NULL;
    bf_status st;
    if (dx->state[av] != DIRTY && nb + nc == 1 && bf__runtime(p, av)) {
        /* one corrupted element of B or C: one output column */
        const bf__dx_weight *w = dx->pfault[nb ? qb : (size_t)m->values[cv].index];
        int j;
        if (nb) j = (int)(g.trans_b ? w->index / g.k : w->index % g.n);
        else if (g.c_cs && !g.c_rs) j = (int)w->index;
        else return BF_OK;
        if ((st = bf__dx_fetch(dx, p, b, av, err)) != BF_OK) return st;
        golden_output(dx, p, yv, yg);
        int k = nb ? (int)(g.trans_b ? w->index % g.k : w->index / g.n) : -1;
        if (!dx->no_approx && bf__gemm_column_delta(&g, p->vals[av].data, k, w->old_value, w->new_value, j, p->vals[yv].data)) {
            dx->approx = 1;
        } else {   /* the block rewrites all of column j, the only one the update touched */
            bf__gemm_column(&g, sh->colblk[tail][i][j], p->vals[av].data, p->vals[bv].data, c, j, p->vals[yv].data,
                            dx->scratch);
        }
        *done = 1;
    } else if (dx->state[av] == DIRTY && nb + nc == 0) {
        const float *ag = bf__gcache_block(sh->gc, av, b);
        if (!ag) return BF_OK;
        golden_output(dx, p, yv, yg);
        if (!dx->no_approx) {
            *done = bf__gemm_rank(&g, p->vals[av].data, ag, p->vals[bv].data, yg, p->vals[yv].data, RANK_MAX_COLS, dx->cols, dx->bc);
            if (*done) dx->approx = 1;
            else memcpy(p->vals[yv].data, yg, bf_tensor_nbytes(&p->vals[yv]));
        }
        if (!*done && sh->roww[tail][i])
            *done = bf__gemm_rows(&g, sh->roww[tail][i], p->vals[av].data, ag, p->vals[bv].data, c, p->vals[yv].data,
                                  dx->scratch, dx->rowbuf);
    }
    return BF_OK;
}

/* A MatMul of one B matrix with one corrupted element of its parameter B,
 * or of the parameter B is a Transpose of (tied embeddings: GPT-2's logits
 * read the token table through one), and golden A: one output column, as
 * try_gemm does for a Gemm. B holds the faulty element: the Transpose is
 * a parameter-only value whose view the trial wrote it into (dxparam.c),
 * or, where no view could be made, it ran on the faulty parameter. The column is
 * recomputed exactly, never updated: a language model's metrics
 * (perplexity) read every logit's bits, which an update's rounding moves. */
bf_status bf__dx_try_matmul(bf__dx *dx, bf_plan *p, int tail, int64_t b, size_t i, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    const bf__step *s = &p->steps[i];
    bf__gemm_info g;
    size_t q;
    int tr;
    *done = 0;
    if (!sh->colw[tail][i] || !bf__dx_matmul_weight(m, p, s, &q, &tr) || !bf__matmul_fold_params(s, &g)) return BF_OK;
    int av = s->node->in[0], bv = s->node->in[1], yv = s->node->out[0];
    if (!bf__runtime(p, av)) return BF_OK;
    if (dx->pfaults[q] == 0 && dx->state[av] == DIRTY && (!tr || dx->state[bv] != DIRTY) && sh->roww[tail][i]) {
        /* golden B, A changed in some rows (tokens): those rows alone, exactly;
         * a fault at position p of a causal LM leaves the rows before p golden */
        const float *ag = bf__gcache_block(sh->gc, av, b), *yg = bf__gcache_block(sh->gc, yv, b);
        if (!ag || !yg) return BF_OK;
        int n = bf__gemm_rows_changed(&g, p->vals[av].data, ag, dx->rowbuf);
        if (n == g.m) return BF_OK;   /* every row: the step runs in full */
        bf_status st = tr ? bf__dx_fetch(dx, p, b, bv, err) : BF_OK;
        if (st != BF_OK) return st;
        golden_output(dx, p, yv, yg);
        bf__gemm_rows_at(&g, sh->roww[tail][i], p->vals[av].data, dx->rowbuf, n, p->vals[bv].data, NULL,
                         p->vals[yv].data, dx->scratch);
        dx->work[i] += (double)n / (double)g.m;
        *done = 1;
        return BF_OK;
    }
    if (dx->pfaults[q] != 1 || dx->state[av] == DIRTY) return BF_OK;
    if (tr && dx->state[bv] != DIRTY) return BF_OK;   /* the Transpose came out golden (a NaN payload, ...) */
    const float *yg = bf__dx_golden(sh, yv, b);
    if (!yg) return BF_OK;
    const bf__dx_weight *w = dx->pfault[q];
    /* element [r][c] of a [R, C] parameter is B[c][r] of its transpose */
    int64_t cols = tr ? bf_tensor_numel(&p->vals[bv]) / g.k : g.n;
    int j = (int)(tr ? w->index / g.k : w->index % g.n);
    if (cols != g.n) return BF_OK;
    bf_status st = bf__dx_fetch(dx, p, b, av, err);
    if (st != BF_OK) return st;
    golden_output(dx, p, yv, yg);
    bf__gemm_column(&g, sh->colblk[tail][i][j], p->vals[av].data, p->vals[bv].data, NULL, j, p->vals[yv].data,
                    dx->scratch);
    *done = 1;
    return BF_OK;
}
