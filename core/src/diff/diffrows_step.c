/* Row mode's one step on rows (diffrows.c says what row mode is): a
 * value's golden rows gathered into a sub-plan and compared with it, and a
 * step run on the sub-plan's rows, as exact Gemm rows or the batch's own
 * product where rows alone would not give its bits. */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "diff/diffrows_impl.h"

/* The axis that holds the sample in value v: of size batch in the full
 * plan and of the sub-plan's rows in the sub-plan, every other dim alike
 * (dim 0 mostly; DLRM's interaction moves it last for a while). -1: none. */
int bf__rows_axis(const bf_plan *full, const bf_plan *sub, int v)
{
    const bf_tensor *a = &full->vals[v], *b = &sub->vals[v];
    int axis = -1;
    if (a->ndim < 1 || a->ndim != b->ndim) return -1;
    for (int d = 0; d < a->ndim; d++) {
        if (a->dims[d] == b->dims[d]) continue;
        if (axis >= 0 || a->dims[d] != bf_plan_batch(full) || b->dims[d] != bf_plan_batch(sub)) return -1;
        axis = d;
    }
    return axis;
}

/* Value v is the same tensor in sub-plan sp as in the batch's plan, with
 * no sample axis (a causal mask, learned positions, a tied table's
 * transpose): found at start (invariant_values). */
int bf__rows_same_in_sub(const bf__dx *dx, const bf_plan *sp, int v)
{
    int k = 0;
    while ((1 << k) < bf_plan_batch(sp)) k++;
    return dx->inv[(size_t)k * dx->sh->m->n_values + (size_t)v];
}

/* A parameter-only value (dxparam.c) in a row-mode run: the campaign's
 * copy, or in a trial whose fault it moves, the worker's view holding the
 * faulty element. Pointed at, never copied or computed (154 MB for GPT-2's
 * tied table), and never written: its step does not run on rows. */
int bf__rows_pv_point(bf__dx *dx, bf_plan *sp, int v)
{
    const void *g = bf__pvals_data(dx->sh->pv, v);
    if (!g) return 0;
    /* the steps' check (check_steps, with the parameters golden again) on
     * the golden copy, even in the trial whose fault made the view */
    sp->vals[v].data = dx->pv.hit[v] && !dx->checking ? dx->pv.view[v] : (void *)g;
    return 1;
}

/* The rows of batch b: the batch, or fewer in the last one. */
int64_t bf__rows_of(const bf__dx_shared *sh, int64_t b)
{
    int64_t left = sh->samples - b * sh->batch;
    return left < sh->batch ? left : sh->batch;
}

/* Value v as [outer, rows, inner bytes] around its batch axis. */
typedef struct layout {
    int64_t outer, inner;
} layout;

static layout layout_of(const bf_plan *sub, int v, int axis)
{
    const bf_tensor *t = &sub->vals[v];
    layout l = {1, (int64_t)bf_dtype_size(t->dtype)};
    for (int d = 0; d < t->ndim; d++) {
        if (d < axis) l.outer *= t->dims[d];
        if (d > axis) l.inner *= t->dims[d];
    }
    return l;
}

/* Copies the golden rows of samples sel[0..n) (of any batches: the eval
 * set or the cache) into the sub-plan's value v; 0 when a golden value is
 * not at hand. */
int bf__rows_gather(bf__dx *dx, bf_plan *sp, int v, const int64_t *sel, int n, bf_error *err, bf_status *st)
{
    const bf__dx_shared *sh = dx->sh;
    bf_tensor *t = &sp->vals[v];
    *st = BF_OK;
    if (sp->val_step[v] < 0) {   /* graph inputs: the sample on dim 0 (campaign.c checks) */
        int64_t rb = (int64_t)bf_tensor_nbytes(t) / bf_plan_batch(sp);
        const bf_tensor *feed = bf__evaluator_feed(dx->ev, (size_t)sh->m->values[v].index);
        for (int i = 0; i < n; i++) {
            bf_tensor one = *t;
            one.dims[0] = 1;
            one.data = (char *)t->data + i * rb;
            if ((*st = bf_dataset_copy_rows(feed, sel[i], 1, &one, err)) != BF_OK) return 0;
        }
        return 1;
    }
    if (bf__rows_same_in_sub(dx, sp, v)) {   /* the same in every batch and plan: batch 0's */
        if (bf__rows_pv_point(dx, sp, v)) return 1;
        const void *g = bf__dx_golden(sh, v, 0);
        if (!g) return 0;
        memcpy(t->data, g, bf_tensor_nbytes(t));
        return 1;
    }
    int axis = bf__rows_axis(dx->plan[0], sp, v);
    if (axis < 0) return 0;
    layout l = layout_of(sp, v, axis);
    int64_t r = bf_plan_batch(sp);
    for (int i = 0; i < n; i++) {
        int64_t b = bf__batch_of(sh, sel[i]), row = bf__row_in_batch(sh, sel[i]), full = bf__rows_of(sh, b);
        const char *g = bf__gcache_block(sh->gc, v, b);
        if (!g) return 0;
        if (l.inner == sizeof(float)) {   /* the sample moved last: one element per row, no call per copy */
            uint32_t *dst = (uint32_t *)t->data + i;
            const uint32_t *src = (const uint32_t *)g + row;
            for (int64_t o = 0; o < l.outer; o++) dst[o * r] = src[o * full];
            continue;
        }
        for (int64_t o = 0; o < l.outer; o++)
            bf__rows_copy((char *)t->data + (o * r + i) * l.inner, g + (o * full + row) * l.inner, (size_t)l.inner);
    }
    return 1;
}

/* Row i of v in the sub-plan equals the golden row of sample sel[i], for
 * every i < n. */
int bf__rows_golden(const bf__dx *dx, const bf_plan *sp, int v, const int64_t *sel, int n)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_tensor *t = &sp->vals[v];
    if (bf__rows_same_in_sub(dx, sp, v)) {
        const void *g = bf__dx_golden(sh, v, 0);
        return g && (t->data == g || memcmp(t->data, g, bf_tensor_nbytes(t)) == 0);
    }
    int axis = bf__rows_axis(dx->plan[0], sp, v);
    layout l = layout_of(sp, v, axis);
    int64_t r = bf_plan_batch(sp);
    for (int i = 0; i < n; i++) {
        int64_t b = bf__batch_of(sh, sel[i]), row = bf__row_in_batch(sh, sel[i]), full = bf__rows_of(sh, b);
        const char *g = bf__gcache_block(sh->gc, v, b);
        if (l.inner == sizeof(float)) {   /* as in bf__rows_gather: bits compared, no call per element */
            /* each element a cache line of its own (the sample is the last
             * axis): stop at the first that differs, eight at a time */
            const uint32_t *x = (const uint32_t *)t->data + i, *y = (const uint32_t *)g + row;
            for (int64_t o0 = 0; o0 < l.outer; o0 += 8) {
                uint32_t diff = 0;
                for (int64_t o = o0; o < o0 + 8 && o < l.outer; o++) diff |= x[o * r] ^ y[o * full];
                if (diff) return 0;
            }
            continue;
        }
        for (int64_t o = 0; o < l.outer; o++)
            if (!bf__rows_same((const char *)t->data + (o * r + i) * l.inner, g + (o * full + row) * l.inner, (size_t)l.inner))
                return 0;
    }
    return 1;
}

/* A Concat past the sample's axis with some inputs still golden (a DLRM's
 * interaction joins one changed feature to seven golden ones): the golden
 * output's rows gathered whole, one contiguous read a sample instead of
 * one per input, and only the changed inputs' parts written over them.
 * 0 when the step is no such Concat (nothing written). */
int bf__rows_concat(bf__dx *dx, bf_plan *sp, size_t i, const int64_t *sel, int r, bf_error *err, bf_status *st)
{
    const bf__step *s = &sp->steps[i];
    int o = s->node->out[0], golden = 0;
    *st = BF_OK;
    if (bf__concat_axis(s) < 1 || s->n_in > BF__CONCAT_MAX || bf__rows_axis(dx->plan[0], sp, o) != 0) return 0;
    const bf_tensor *in[BF__CONCAT_MAX];
    for (int j = 0; j < s->n_in; j++) {
        int u = s->node->in[j];
        if (!bf__runtime(sp, u) || bf__rows_axis(dx->plan[0], sp, u) != 0) return 0;
        golden += dx->sstate[u] != DIRTY;
        in[j] = &sp->vals[u];
    }
    if (golden < 2 || !bf__rows_gather(dx, sp, o, sel, r, err, st)) return 0;   /* one golden input: no gain */
    for (int j = 0; j < s->n_in; j++)
        if (dx->sstate[s->node->in[j]] == DIRTY) bf__concat_input(s, in, j, sp->vals[o].data);
    return 1;
}

/* A MatMul of one golden B matrix (a parameter or its transpose) whose
 * input A changed in some of its rows (tokens of the sub-plan's sequences:
 * from the fault's position on, under causal attention): the golden output
 * rows, and those rows of A that differ from golden recomputed exactly
 * (bf__gemm_rows_changed and _at, the row width checked on the golden
 * pass). *done 0: the step runs as before (every row changed, or not such
 * a MatMul). Not while checking the steps: the check is of the sub-plan's
 * own product, which runs when every row changed. */
static bf_status matmul_rows(bf__dx *dx, bf_plan *sp, const int64_t *sel, size_t i, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf__step *s = &sp->steps[i];
    bf__gemm_info g, gf;
    size_t q;
    int tr;
    bf_status st = BF_OK;
    *done = 0;
    if (dx->checking || !sh->roww[0][i] || !bf__dx_matmul_weight(sh->m, dx->plan[0], &dx->plan[0]->steps[i], &q, &tr) ||
        !bf__matmul_fold_params(s, &g) || !bf__matmul_fold_params(&dx->plan[0]->steps[i], &gf))
        return BF_OK;
    int av = s->node->in[0], bv = s->node->in[1], yv = s->node->out[0], r = (int)bf_plan_batch(sp);
    if (dx->pfaults[q] || dx->sstate[av] != DIRTY || (tr && dx->sstate[bv] == DIRTY)) return BF_OK;
    if ((size_t)bf_tensor_numel(&sp->vals[av]) > dx->sh->scratch_floats) return BF_OK;
    /* golden A's rows in the scratch's first half, the product's in its second */
    float *ag = dx->scratch, *scr = dx->scratch + sh->scratch_floats;
    void *mine = sp->vals[av].data;
    sp->vals[av].data = ag;
    int ok = bf__rows_gather(dx, sp, av, sel, r, err, &st);
    sp->vals[av].data = mine;
    if (st != BF_OK || !ok) return st;
    int n = bf__gemm_rows_changed(&g, sp->vals[av].data, ag, dx->rowbuf);
    if (n == g.m) return BF_OK;   /* every row: the sub-plan's product */
    if (!bf__rows_gather(dx, sp, yv, sel, r, err, &st)) return st;   /* golden Y, its changed rows rewritten */
    bf__gemm_rows_at(&g, sh->roww[0][i], sp->vals[av].data, dx->rowbuf, n, sp->vals[bv].data, NULL, sp->vals[yv].data,
                     scr);
    dx->work[i] += (double)n / (double)gf.m;
    *done = 1;
    return BF_OK;
}

/* Runs step i on the sub-plan's rows (its inputs in place). A Gemm runs as
 * exact rows, or, when they do not reproduce the batch's product, as that
 * very product: the golden input of batch b (the rows' one batch) with the
 * rows put in, through the full plan, the rows taken back out. */
bf_status bf__rows_run(bf__dx *dx, bf_plan *sp, int64_t b, const int64_t *sel, size_t i, bf_error *err)
{
    bf__gemm_info g;
    const bf__step *s = &sp->steps[i];
    int done = 0;
    int pointed = bf__pvals_step(dx->sh->pv, i, sp);   /* computed once: pointed at (bf__rows_pv_point) */
    for (int j = 0; j < s->n_out && pointed; j++) pointed = s->node->out[j] < 0 || bf__rows_same_in_sub(dx, sp, s->node->out[j]);
    if (pointed) {
        for (int j = 0; j < s->n_out; j++)
            if (s->node->out[j] >= 0) bf__rows_pv_point(dx, sp, s->node->out[j]);
        return BF_OK;
    }
    bf_status st = matmul_rows(dx, sp, sel, i, &done, err);
    if (st != BF_OK || done) return st;
    int any = 0;   /* a step of parameters alone (a tied table's transpose) runs whole */
    for (int j = 0; j < s->n_out; j++) any |= s->node->out[j] >= 0 && !bf__rows_same_in_sub(dx, sp, s->node->out[j]);
    dx->work[i] += any ? (double)bf_plan_batch(sp) / (double)dx->sh->batch : 1.0;
    if (!bf__gemm_params(&dx->plan[0]->steps[i], &g)) return bf__plan_run_step(sp, i, err);
    int av = s->node->in[0], yv = s->node->out[0], cv = s->n_in > 2 ? s->node->in[2] : -1;
    int r = (int)bf_plan_batch(sp);
    if (dx->sh->roww[0][i]) {
        bf__gemm_rows_compact(&g, dx->sh->roww[0][i], sp->vals[av].data, r, sp->vals[s->node->in[1]].data,
                              cv >= 0 ? sp->vals[cv].data : NULL, sp->vals[yv].data, dx->scratch);
        return BF_OK;
    }
    int tail = bf__rows_of(dx->sh, b) != dx->sh->batch;   /* the last batch has a plan of its own */
    bf_plan *fp = dx->plan[tail];
    int64_t start = b * dx->sh->batch;
    size_t ra = bf_tensor_nbytes(&sp->vals[av]) / (size_t)r, ry = bf_tensor_nbytes(&sp->vals[yv]) / (size_t)r;
    char *a = dx->arena[tail][av], *y = dx->arena[tail][yv];
    memcpy(a, bf__gcache_block(dx->sh->gc, av, b), bf_tensor_nbytes(&fp->vals[av]));
    for (int t = 0; t < r; t++)
        memcpy(a + (sel[t] - start) * (int64_t)ra, (char *)sp->vals[av].data + t * (int64_t)ra, ra);
    fp->vals[av].data = a;
    fp->vals[yv].data = y;
    /* a B or C computed at run time the same in every batch (a quantized
     * weight's DequantizeLinear): the sub-plan's, golden or the trial's; the
     * full plan's own buffer holds neither */
    for (int j = 1; j < s->n_in; j++)
        if (bf__runtime(sp, s->node->in[j]) && bf__rows_same_in_sub(dx, sp, s->node->in[j]))
            fp->vals[s->node->in[j]].data = sp->vals[s->node->in[j]].data;
    st = bf__plan_run_step(fp, i, err);
    for (int t = 0; st == BF_OK && t < r; t++)
        memcpy((char *)sp->vals[yv].data + t * (int64_t)ry, y + (sel[t] - start) * (int64_t)ry, ry);
    return st;
}
