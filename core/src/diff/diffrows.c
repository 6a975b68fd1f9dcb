/* Row mode: a batch whose faults reach only a few of its samples (an
 * embedding row that two samples look up, a transient fault in one sample)
 * runs on those rows alone instead of the whole batch (the last, partial
 * batch included).
 *
 * Each worker keeps plans of 1, 2, 4, ... rows. A step may run on r rows in
 * place of the batch only where that gives the batch's own bits for those
 * rows: found at start by running it on rows of the golden batch 0 and
 * comparing (ops with batch-mixing or shape-dependent kernels fail and are
 * left to the full batch). Gemm steps run as the exact row chunks of
 * diffgemm.c. When a step on the way cannot run on rows, the attempt is
 * dropped before anything is written and the batch runs in full
 * (diffexec.c). */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "diff/diff_impl.h"


/* The axis that holds the sample in value v: of size batch in the full
 * plan and of the sub-plan's rows in the sub-plan, every other dim alike
 * (dim 0 mostly; DLRM's interaction moves it last for a while). -1: none. */
static int batch_axis(const bf_plan *full, const bf_plan *sub, int v)
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
static int same_in_sub(const bf__dx *dx, const bf_plan *sp, int v)
{
    int k = 0;
    while ((1 << k) < bf_plan_batch(sp)) k++;
    return dx->inv[(size_t)k * dx->sh->m->n_values + (size_t)v];
}

/* A parameter-only value (dxparam.c) in a row-mode run: the campaign's
 * copy, or in a trial whose fault it moves, the worker's view holding the
 * faulty element. Pointed at, never copied or computed (154 MB for GPT-2's
 * tied table), and never written: its step does not run on rows. */
static int pv_point(bf__dx *dx, bf_plan *sp, int v)
{
    const void *g = bf__pvals_data(dx->sh->pv, v);
    if (!g) return 0;
    /* the steps' check (check_steps, with the parameters golden again) on
     * the golden copy, even in the trial whose fault made the view */
    sp->vals[v].data = dx->pv.hit[v] && !dx->checking ? dx->pv.view[v] : (void *)g;
    return 1;
}

/* A sample's slice of a value is a few dozen bytes: copied and compared
 * inline, in 16-byte pieces, rather than by a libc call each (row mode
 * makes thousands a trial). Larger ones go to libc. */
static inline void copy_row(void *dst, const void *src, size_t n)
{
    if (n > 256) {
        memcpy(dst, src, n);
        return;
    }
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (; n >= 16; n -= 16, d += 16, s += 16) memcpy(d, s, 16);
    for (; n >= 4; n -= 4, d += 4, s += 4) memcpy(d, s, 4);
    for (; n > 0; n--) *d++ = *s++;
}

static inline int same_row(const void *a, const void *b, size_t n)
{
    if (n > 256) return memcmp(a, b, n) == 0;
    const unsigned char *x = a, *y = b;
    uint64_t diff = 0;
    /* a cache line at a time, stopping at the first that differs: the
     * golden side is rarely in cache, and a changed row differs early */
    for (; n >= 64; n -= 64, x += 64, y += 64) {
        for (int q = 0; q < 64; q += 8) {
            uint64_t u, v;
            memcpy(&u, x + q, 8);
            memcpy(&v, y + q, 8);
            diff |= u ^ v;
        }
        if (diff) return 0;
    }
    for (; n >= 8; n -= 8, x += 8, y += 8) {
        uint64_t u, v;
        memcpy(&u, x, 8);
        memcpy(&v, y, 8);
        diff |= u ^ v;
    }
    for (; n > 0; n--) diff |= (uint64_t)(*x++ ^ *y++);
    return diff == 0;
}

#define BF__CONCAT_MAX 16        /* inputs of a Concat that concat_rows takes */

/* The rows of batch b: the batch, or fewer in the last one. */
static int64_t rows_of(const bf__dx_shared *sh, int64_t b)
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
static int gather(bf__dx *dx, bf_plan *sp, int v, const int64_t *sel, int n, bf_error *err, bf_status *st)
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
    if (same_in_sub(dx, sp, v)) {   /* the same in every batch and plan: batch 0's */
        if (pv_point(dx, sp, v)) return 1;
        const void *g = bf__dx_golden(sh, v, 0);
        if (!g) return 0;
        memcpy(t->data, g, bf_tensor_nbytes(t));
        return 1;
    }
    int axis = batch_axis(dx->plan[0], sp, v);
    if (axis < 0) return 0;
    layout l = layout_of(sp, v, axis);
    int64_t r = bf_plan_batch(sp);
    for (int i = 0; i < n; i++) {
        int64_t b = bf__batch_of(sh, sel[i]), row = bf__row_in_batch(sh, sel[i]), full = rows_of(sh, b);
        const char *g = bf__gcache_block(sh->gc, v, b);
        if (!g) return 0;
        if (l.inner == sizeof(float)) {   /* the sample moved last: one element per row, no call per copy */
            uint32_t *dst = (uint32_t *)t->data + i;
            const uint32_t *src = (const uint32_t *)g + row;
            for (int64_t o = 0; o < l.outer; o++) dst[o * r] = src[o * full];
            continue;
        }
        for (int64_t o = 0; o < l.outer; o++)
            copy_row((char *)t->data + (o * r + i) * l.inner, g + (o * full + row) * l.inner, (size_t)l.inner);
    }
    return 1;
}

/* Row i of v in the sub-plan equals the golden row of sample sel[i], for
 * every i < n. */
static int rows_golden(const bf__dx *dx, const bf_plan *sp, int v, const int64_t *sel, int n)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_tensor *t = &sp->vals[v];
    if (same_in_sub(dx, sp, v)) {
        const void *g = bf__dx_golden(sh, v, 0);
        return g && (t->data == g || memcmp(t->data, g, bf_tensor_nbytes(t)) == 0);
    }
    int axis = batch_axis(dx->plan[0], sp, v);
    layout l = layout_of(sp, v, axis);
    int64_t r = bf_plan_batch(sp);
    for (int i = 0; i < n; i++) {
        int64_t b = bf__batch_of(sh, sel[i]), row = bf__row_in_batch(sh, sel[i]), full = rows_of(sh, b);
        const char *g = bf__gcache_block(sh->gc, v, b);
        if (l.inner == sizeof(float)) {   /* as in gather: bits compared, no call per element */
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
            if (!same_row((const char *)t->data + (o * r + i) * l.inner, g + (o * full + row) * l.inner, (size_t)l.inner))
                return 0;
    }
    return 1;
}

/* A Concat past the sample's axis with some inputs still golden (a DLRM's
 * interaction joins one changed feature to seven golden ones): the golden
 * output's rows gathered whole, one contiguous read a sample instead of
 * one per input, and only the changed inputs' parts written over them.
 * 0 when the step is no such Concat (nothing written). */
static int concat_rows(bf__dx *dx, bf_plan *sp, size_t i, const int64_t *sel, int r, bf_error *err, bf_status *st)
{
    const bf__step *s = &sp->steps[i];
    int o = s->node->out[0], golden = 0;
    *st = BF_OK;
    if (bf__concat_axis(s) < 1 || s->n_in > BF__CONCAT_MAX || batch_axis(dx->plan[0], sp, o) != 0) return 0;
    const bf_tensor *in[BF__CONCAT_MAX];
    for (int j = 0; j < s->n_in; j++) {
        int u = s->node->in[j];
        if (!bf__runtime(sp, u) || batch_axis(dx->plan[0], sp, u) != 0) return 0;
        golden += dx->sstate[u] != DIRTY;
        in[j] = &sp->vals[u];
    }
    if (golden < 2 || !gather(dx, sp, o, sel, r, err, st)) return 0;   /* one golden input: no gain */
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
    int ok = gather(dx, sp, av, sel, r, err, &st);
    sp->vals[av].data = mine;
    if (st != BF_OK || !ok) return st;
    int n = bf__gemm_rows_changed(&g, sp->vals[av].data, ag, dx->rowbuf);
    if (n == g.m) return BF_OK;   /* every row: the sub-plan's product */
    if (!gather(dx, sp, yv, sel, r, err, &st)) return st;   /* golden Y, its changed rows rewritten */
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
static bf_status run_rows(bf__dx *dx, bf_plan *sp, int64_t b, const int64_t *sel, size_t i, bf_error *err)
{
    bf__gemm_info g;
    const bf__step *s = &sp->steps[i];
    int done = 0;
    int pointed = bf__pvals_step(dx->sh->pv, i, sp);   /* computed once: pointed at (pv_point) */
    for (int j = 0; j < s->n_out && pointed; j++) pointed = s->node->out[j] < 0 || same_in_sub(dx, sp, s->node->out[j]);
    if (pointed) {
        for (int j = 0; j < s->n_out; j++)
            if (s->node->out[j] >= 0) pv_point(dx, sp, s->node->out[j]);
        return BF_OK;
    }
    bf_status st = matmul_rows(dx, sp, sel, i, &done, err);
    if (st != BF_OK || done) return st;
    int any = 0;   /* a step of parameters alone (a tied table's transpose) runs whole */
    for (int j = 0; j < s->n_out; j++) any |= s->node->out[j] >= 0 && !same_in_sub(dx, sp, s->node->out[j]);
    dx->work[i] += any ? (double)bf_plan_batch(sp) / (double)dx->sh->batch : 1.0;
    if (!bf__gemm_params(&dx->plan[0]->steps[i], &g)) return bf__plan_run_step(sp, i, err);
    int av = s->node->in[0], yv = s->node->out[0], cv = s->n_in > 2 ? s->node->in[2] : -1;
    int r = (int)bf_plan_batch(sp);
    if (dx->sh->roww[0][i]) {
        bf__gemm_rows_compact(&g, dx->sh->roww[0][i], sp->vals[av].data, r, sp->vals[s->node->in[1]].data,
                              cv >= 0 ? sp->vals[cv].data : NULL, sp->vals[yv].data, dx->scratch);
        return BF_OK;
    }
    int tail = rows_of(dx->sh, b) != dx->sh->batch;   /* the last batch has a plan of its own */
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
        if (bf__runtime(sp, s->node->in[j]) && same_in_sub(dx, sp, s->node->in[j]))
            fp->vals[s->node->in[j]].data = sp->vals[s->node->in[j]].data;
    st = bf__plan_run_step(fp, i, err);
    for (int t = 0; st == BF_OK && t < r; t++)
        memcpy((char *)sp->vals[yv].data + t * (int64_t)ry, y + (sel[t] - start) * (int64_t)ry, ry);
    return st;
}

/* Which steps may run on r rows: tried on rows of golden batch 0. */
static bf_status check_steps(bf__dx *dx, int k, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    bf_plan *full = dx->plan[0], *sp = dx->sub[k];
    int r = 1 << k;
    int64_t sel[1 << (BF__SUB_MAX - 1)];
    for (int t = 0; t < r; t++) sel[t] = (t * 7919 + 13) % rows_of(sh, 0);   /* out of order */
    dx->checking = 1;
    for (size_t i = 0; i < sh->n_steps; i++) {
        const bf__step *s = &full->steps[i];
        unsigned char *ok = &dx->row_ok[(size_t)k * sh->n_steps + i];
        bf__gemm_info g;
        *ok = 0;
        int whole = bf__gemm_params(s, &g) && !sh->roww[0][i];   /* runs as the batch's product */
        /* batch statistics: rows alone would normalise with their own, and
         * the golden batch's rows need not show it (a channel the same in
         * every sample gives B on any rows) */
        int fine = !bf__batchnorm_batch_stats(s);
        for (int j = 0; j < s->n_in && fine; j++)
            if (bf__runtime(full, s->node->in[j]))
                fine = batch_axis(full, sp, s->node->in[j]) >= 0 || same_in_sub(dx, sp, s->node->in[j]);
        for (int j = 0; j < s->n_out && fine; j++)
            fine = s->node->out[j] < 0 || ((batch_axis(full, sp, s->node->out[j]) >= 0 || same_in_sub(dx, sp, s->node->out[j])) &&
                                           (bf__gcache_has(sh->gc, s->node->out[j]) ||
                                            (same_in_sub(dx, sp, s->node->out[j]) &&
                                             bf__pvals_data(sh->pv, s->node->out[j]))));
        if (fine && bf__gemm_params(s, &g))   /* Gemm on rows: the sample on dim 0 of A and Y */
            fine = batch_axis(full, sp, s->node->in[0]) == 0 && batch_axis(full, sp, s->node->out[0]) == 0 &&
                   !g.trans_a && bf__gcache_has(sh->gc, s->node->in[0]);
        if (fine && whole) {
            *ok = 1;
            continue;
        }
        bf_status st = BF_OK;
        for (int j = 0; j < s->n_in && fine; j++)
            if (bf__runtime(full, s->node->in[j])) fine = gather(dx, sp, s->node->in[j], sel, r, err, &st);
        if (st != BF_OK) {
            dx->checking = 0;
            return st;
        }
        if (!fine) continue;
        if (run_rows(dx, sp, 0, sel, i, err) != BF_OK) continue;   /* e.g. an index out of range: not on rows */
        for (int j = 0; j < s->n_out && fine; j++)
            fine = s->node->out[j] < 0 || rows_golden(dx, sp, s->node->out[j], sel, r);
        *ok = (unsigned char)fine;
    }
    dx->checking = 0;
    return BF_OK;
}

/* rows_from: whether a fault in value v can run on rows all the way down,
 * so that a batch is not tried on rows only to fall back half-way. */
static void downstream_ok(bf__dx *dx, int k)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_plan *full = dx->plan[0];
    size_t nv = sh->m->n_values;
    unsigned char *from = &dx->rows_from[(size_t)k * nv];
    const unsigned char *ok = &dx->row_ok[(size_t)k * sh->n_steps];
    memset(from, 1, nv);
    for (size_t i = sh->n_steps; i-- > 0;) {
        const bf__step *s = &full->steps[i];
        int good = ok[i];
        for (int j = 0; j < s->n_out && good; j++) good = s->node->out[j] < 0 || from[s->node->out[j]];
        if (good) continue;
        for (int j = 0; j < s->n_in; j++)
            if (s->node->in[j] >= 0) from[s->node->in[j]] = 0;
    }
}

/* 1: the step's output holds every element of its data input (input 0),
 * only moved; 2: of every input (Concat). */
static int moves_elements(const bf__step *s)
{
    static const char *const ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose",
                                      "bf.SqueezeIfOne"};
    if (s->n_out != 1) return 0;
    if (strcmp(s->node->op->name, "Concat") == 0) return 2;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(s->node->op->name, ops[i]) == 0) return 1;
    return 0;
}

/* Whether step i's output certainly differs from golden in some of the
 * rows: it only moves the elements of an input that does. Then no need to
 * compare the output's rows with the golden ones, which costs a cache miss
 * a row (and one an element for a value whose sample is the last axis). */
static int stays_dirty(const bf__dx *dx, const bf__step *s, size_t i)
{
    int dirty = 0, data = dx->moves[i] == 2 ? s->n_in : dx->moves[i];   /* its data inputs */
    for (int j = 0; j < data; j++)
        dirty |= s->node->in[j] >= 0 && dx->sstate[s->node->in[j]] == DIRTY;
    return dirty;
}

bf_status bf__rows_init(bf__dx *dx, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    dx->n_sub = dx->n_sub_batch = 0;
    dx->rows_ready = 0;
    /* A graph traced without a dynamic batch axis (torch.onnx.export with
     * no dynamic_axes, at the example's batch) takes no plan narrower than
     * that batch: its rows are recomputed a whole batch at a time. */
    for (size_t i = 0; i < m->n_inputs; i++)
        if (m->inputs[i].ndim > 0 && m->inputs[i].dims[0] > 0) return BF_OK;
    while (dx->n_sub_batch < BF__SUB_MAX && 4 * (1 << dx->n_sub_batch) <= sh->batch) dx->n_sub_batch++;
    /* Wider plans pay off only for the rows of several batches at once;
     * below a batch's rows, so that all of them together hold no more than
     * about a batch's worth of values, and because a plan as wide as the
     * batch has no axis that tells the sample (check_steps would find no
     * step it can run). */
    while (dx->n_sub < BF__SUB_MAX &&
           (dx->n_sub < dx->n_sub_batch || ((1 << dx->n_sub) < sh->batch && (1 << dx->n_sub) <= sh->samples / 4)))
        dx->n_sub++;
    if (dx->n_sub == 0) return BF_OK;
    dx->row_ok = bf__calloc((size_t)dx->n_sub * sh->n_steps + 1, 1);
    dx->sstate = bf__calloc(m->n_values + 1, 1);
    dx->rmark = bf__calloc((size_t)sh->batch + 1, 1);
    dx->rsel = bf__malloc(((size_t)sh->batch + (1u << BF__SUB_MAX) + 1) * sizeof *dx->rsel);
    dx->rall = bf__malloc(((size_t)sh->samples + (size_t)sh->batch + 1) * sizeof *dx->rall);
    dx->rows_from = bf__malloc((size_t)dx->n_sub * m->n_values + 1);
    dx->moves = bf__calloc(sh->n_steps + 1, 1);
    dx->shape_only = bf__calloc(m->n_values + 1, 1);
    dx->inv = bf__calloc((size_t)dx->n_sub * m->n_values + 1, 1);
    dx->reached = bf__calloc((size_t)sh->samples + 1, 1);
    if (!dx->row_ok || !dx->sstate || !dx->rmark || !dx->rsel || !dx->rall || !dx->rows_from || !dx->moves ||
        !dx->shape_only || !dx->inv || !dx->reached)
        return bf__dx_oom(err);
    const bf_plan *p = dx->plan[0];
    for (size_t i = 0; i < sh->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        dx->moves[i] = moves_elements(s);
        /* from parameters, initializers and shapes alone: no sample's data */
        int so = strcmp(s->node->op->name, "Shape") == 0 || strcmp(s->node->op->name, "Size") == 0;
        if (!so) {
            so = 1;
            for (int j = 0; j < s->n_in && so; j++)
                if (bf__runtime(p, s->node->in[j])) so = dx->shape_only[s->node->in[j]];
        }
        for (int j = 0; j < s->n_out; j++)
            if (s->node->out[j] >= 0) dx->shape_only[s->node->out[j]] = (unsigned char)so;
    }
    return BF_OK;
}

/* Writes value into element `index` of parameter q in the full plan (the
 * plan the sub-plans read faulty parameters from), in its stored type. */
static bf_status put_param(bf__dx *dx, size_t q, int64_t index, float value, bf_error *err)
{
    return bf__plan_param_write(dx->plan[0], q, index, value, err);
}

/* The sub-plans, made and checked on first use, which may be inside a
 * trial: the evaluator's plan then holds the trial's faults in the
 * parameters of w. The check must see the golden model, or which steps run
 * on rows would depend on which trial came first (a shard's first trial is
 * another than the whole campaign's, and its records then differed from
 * the unsharded run's in the last bits): the trial's stored values are put
 * back for it and its faults written again after. The sub-plans read the
 * parameters of w from the full plan (as bf__rows_params makes them do for
 * good: golden again after the trial); every other parameter is copied
 * golden. */
static bf_status rows_check(bf__dx *dx, const bf__dx_weight *w, size_t n_w, bf_error *err);

static bf_status rows_ensure(bf__dx *dx, const bf__dx_weight *w, size_t n_w, bf_error *err)
{
    if (dx->rows_ready || dx->n_sub == 0) return BF_OK;
    bf_status st = BF_OK;
    size_t undone = 0;
    for (size_t i = n_w; i-- > 0 && st == BF_OK; undone++)   /* reverse: two faults on one element */
        st = put_param(dx, w[i].param, w[i].index, w[i].old_value, err);
    if (st == BF_OK) st = rows_check(dx, w, n_w, err);
    for (size_t i = n_w - undone; i < n_w; i++) {   /* the faults again, whatever happened */
        bf_status u = put_param(dx, w[i].param, w[i].index, w[i].new_value, err);
        if (u != BF_OK && st == BF_OK) st = u;
    }
    return st;
}

/* The values of sub-plan k computed from parameters, initializers and
 * shapes alone (shape_only), with no sample axis, that come out as the
 * batch's golden ones: computed on the sub-plan here and compared. A shape
 * holding the batch size differs, and so does what is computed from it;
 * the sequence length, the same in both, does not. A row-mode run reads
 * them from the cache (gather), so a step that mixes them with sample rows
 * (a broadcast Add of learned positions, a causal mask's Where) runs on
 * rows. */
static bf_status invariant_values(bf__dx *dx, int k, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    bf_plan *full = dx->plan[0], *sp = dx->sub[k];
    unsigned char *inv = &dx->inv[(size_t)k * sh->m->n_values];
    (void)err;
    for (size_t i = 0; i < sh->n_steps; i++) {
        const bf__step *s = &sp->steps[i];
        int so = s->n_out > 0;
        for (int j = 0; j < s->n_out && so; j++) so = s->node->out[j] < 0 || dx->shape_only[s->node->out[j]];
        if (!so) continue;
        bf_error e = {0};
        if (bf__plan_run_step(sp, i, &e) != BF_OK) continue;   /* left to the batch */
        for (int j = 0; j < s->n_out; j++) {
            int o = s->node->out[j];
            if (o < 0 || batch_axis(full, sp, o) >= 0) continue;
            const bf_tensor *a = &full->vals[o], *b = &sp->vals[o];
            const void *g = bf__dx_golden(sh, o, 0);
            int same = g && a->ndim == b->ndim && a->dtype == b->dtype && bf_tensor_nbytes(a) == bf_tensor_nbytes(b);
            for (int d = 0; d < a->ndim && same; d++) same = a->dims[d] == b->dims[d];
            /* and the last batch's, which may have a plan of its own */
            const bf_plan *tp = dx->plan[1] ? dx->plan[1] : full;
            const void *gl = bf_tensor_nbytes(&tp->vals[o]) == bf_tensor_nbytes(b)
                                 ? bf__dx_golden(sh, o, sh->n_batches - 1) : NULL;
            inv[o] = (unsigned char)(same && gl && memcmp(b->data, g, bf_tensor_nbytes(b)) == 0 &&
                                     memcmp(b->data, gl, bf_tensor_nbytes(b)) == 0);
        }
    }
    return BF_OK;
}

static bf_status rows_check(bf__dx *dx, const bf__dx_weight *w, size_t n_w, bf_error *err)
{
    const bf_model *m = dx->sh->m;
    bf_status st;
    for (int k = 0; k < dx->n_sub; k++) {
        if (!dx->sub[k] && (st = bf_plan_create(m, 1 << k, &dx->sub[k], err)) != BF_OK) return st;
        /* its lookups of plan[0]'s faulty tables read clean rows from the model too */
        dx->sub[k]->views_of = dx->plan[0];
        /* the golden model as stored (fp16, int8, ...), as in the evaluator's plans */
        for (size_t q = 0; q < m->n_params; q++) {
            const void *gold = dx->plan[0]->vals[m->param_vals[q]].data;
            /* a copy that holds the model's values (or a trial's faults,
             * read from plan[0] below) needs none of its own */
            if (gold == bf_model_param(m, q)->tensor->data || bf__plan_param_is_golden(dx->plan[0], q)) continue;
            void *mine;
            if ((st = bf_plan_param_data(dx->sub[k], q, &mine, err)) != BF_OK) return st;
            memcpy(mine, gold, bf_tensor_nbytes(bf_model_param(m, q)->tensor));
            bf__plan_param_rewritten(dx->sub[k], q);
        }
        for (size_t i = 0; i < n_w; i++) {
            int v = m->param_vals[w[i].param];
            dx->sub[k]->vals[v].data = dx->plan[0]->vals[v].data;
        }
        if ((st = invariant_values(dx, k, err)) != BF_OK) return st;
        if ((st = check_steps(dx, k, err)) != BF_OK) return st;
        downstream_ok(dx, k);
    }
    dx->rows_ready = 1;
    return BF_OK;
}

void bf__rows_free(bf__dx *dx)
{
    for (int k = 0; k < dx->n_sub; k++) bf_plan_free(dx->sub[k]);
    bf__free(dx->row_ok);
    bf__free(dx->moves);
    bf__free(dx->sstate);
    bf__free(dx->rmark);
    bf__free(dx->rsel);
    bf__free(dx->rall);
    bf__free(dx->rows_from);
    bf__free(dx->shape_only);
    bf__free(dx->inv);
    bf__free(dx->reached);
}

bf_status bf__rows_params(bf__dx *dx, const bf__dx_weight *w, size_t n_w, bf_error *err)
{
    bf_status st = rows_ensure(dx, w, n_w, err);
    if (st != BF_OK) return st;
    /* The sub-plans read a faulty parameter from the evaluator's plan, which
     * holds the trial's faults already (and the golden values again after
     * it): no copy of a whole embedding table per sub-plan (30 MB a worker
     * on dlrm_large, copied inside the timed trials), no second write. */
    const bf_model *m = dx->sh->m;
    for (int k = 0; k < dx->n_sub; k++)
        for (size_t i = 0; i < n_w; i++) {
            int v = m->param_vals[w[i].param];
            dx->sub[k]->vals[v].data = dx->plan[0]->vals[v].data;
        }
    return BF_OK;
}

/* The rows of batch b the faults reach, into out (ascending, as samples
 * of the eval set); -1 when some fault reaches every row. */
static int reached_rows(bf__dx *dx, int64_t b, const bf__dx_weight *w, size_t n_w, const bf_value_fault *vf,
                        size_t n_vf, int64_t *out)
{
    const bf__dx_shared *sh = dx->sh;
    bf_plan *full = dx->plan[0];
    int64_t start = b * sh->batch, rows = rows_of(sh, b);
    /* Each faulty row is looked for among the batch's indices: past one
     * fault per sample of the batch that scan costs more than the batch run
     * whole (a BER sweep on embedding tables: 1e-3 of 7.6e8 bits is 760,000
     * faults, and scanning them batch by batch took 20x an exact pass). */
    int every = n_w > (size_t)rows;
    int64_t marked = 0;
    for (size_t k = 0; k < n_vf && !every; k++) {
        if (vf[k].sample < 0) every = 1;
        else if (vf[k].sample >= start && vf[k].sample < start + rows) dx->rmark[vf[k].sample - start] = 1;
    }
    for (size_t i = 0; i < n_w && !every; i++) {
        const bf__emb_index *e = &sh->emb[w[i].param];
        if (!e->rows) {
            every = 1;
            break;
        }
        int64_t row = w[i].index / e->row_elems;
        for (int t = sh->pc_off[w[i].param]; t < sh->pc_off[w[i].param + 1] && !every; t++) {
            if (!bf__dx_lookup_step(sh, full, w[i].param, sh->pc_step[t])) continue;   /* a tied transpose */
            int iv = full->steps[sh->pc_step[t]].node->in[1];
            const bf_tensor *it = &full->vals[iv];
            bf_dtype dt;
            const void *idx = bf__dx_lookup_indices(sh, dx->ev, full, iv, b, &dt);
            if (!idx || it->ndim < 1 || it->dims[0] != sh->batch) {
                every = 1;
                break;
            }
            int64_t per = bf_tensor_numel(it) / sh->batch;
            for (int64_t j = 0; j < per * rows; j++) {
                int64_t r = dt == BF_I32 ? ((const int32_t *)idx)[j] : ((const int64_t *)idx)[j];
                if ((r == row || r + e->rows == row) && !dx->rmark[j / per]) dx->rmark[j / per] = 1, marked++;
            }
        }
        if (marked == rows) break;   /* every sample reached: the other faults add none */
    }
    int n = 0;
    for (int64_t r = 0; r < rows; r++)
        if (dx->rmark[r]) dx->rmark[r] = 0, out[n++] = start + r;
    return every ? -1 : n;
}

typedef struct seed {
    int v;                       /* a value changed in the rows, -1 none */
    const float *vals;           /* its rows, as the sub-plan's rows */
} seed;

/* The faults' reached samples sel[0..n), of one batch b or of several
 * (b = -1), run on the rows of one sub-plan, from the seeded value's
 * readers on if sd.v >= 0; *done 0 (nothing written) when they cannot. */
static bf_status on_rows(bf__dx *dx, int64_t b, int n, int n_sub, const bf__dx_weight *w, size_t n_w,
                         const bf_value_fault *vf, size_t n_vf, seed sd, int first, int last_entry, float *vf_old,
                         float *vf_new, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    bf_status st = BF_OK;
    int k = 0;
    *done = 0;   /* a later run of several may be the one that cannot */
    while (k < n_sub && (1 << k) < n) k++;
    if (k == n_sub) return BF_OK;
    const unsigned char *from = &dx->rows_from[(size_t)k * m->n_values];
    for (size_t f = 0; f < n_vf; f++)
        if (!from[vf[f].value]) return BF_OK;
    for (size_t i = 0; i < n_w; i++)   /* an embedding table: its lookups' outputs */
        for (int t = sh->pc_off[w[i].param]; t < sh->pc_off[w[i].param + 1]; t++) {
            int st_i = sh->pc_step[t];
            const bf__step *s = &dx->plan[0]->steps[st_i];
            if (!bf__dx_lookup_step(sh, dx->plan[0], w[i].param, st_i)) continue;   /* checked when it runs */
            if (!dx->row_ok[(size_t)k * sh->n_steps + (size_t)st_i] || !from[s->node->out[0]]) return BF_OK;
        }
    bf_plan *sp = dx->sub[k];
    int r = 1 << k;
    for (int t = n; t < r; t++) dx->rsel[t] = dx->rsel[0];   /* padding: a copy of the first row */
    const int64_t *sel = dx->rsel;
    const unsigned char *ok = &dx->row_ok[(size_t)k * sh->n_steps];
    memset(dx->sstate, UNLOADED, m->n_values);
    /* a parameter-only value this trial's fault moved: the worker's view,
     * changed, as bf__pv_batch gives it to a batch */
    for (size_t x = 0; x < dx->pv.n_w; x++) {   /* the values written (bf__pv_trial_begin), not every value */
        int v = dx->pv.w[x].value;
        if (!same_in_sub(dx, sp, v)) return BF_OK;   /* shaped by the batch: the batch runs whole */
        if (pv_point(dx, sp, v)) dx->sstate[v] = DIRTY;
    }

    /* value faults, rows relative to the sub-plan */
    size_t nb = 0;
    for (size_t f = 0; f < n_vf; f++) {
        int pos = 0;
        while (pos < n && sel[pos] != vf[f].sample) pos++;
        if (pos == n) continue;
        dx->vfb[nb] = vf[f];
        dx->vfb[nb].sample = pos;
        dx->vfb_of[nb++] = f;
    }
    if ((nb || sp->n_vf) && (st = bf_plan_set_value_faults(sp, dx->vfb, nb, err)) != BF_OK) return st;
    int horizon = last_entry;
    for (size_t f = 0; f < nb; f++) {
        int v = (int)dx->vfb[f].value;
        if (dx->sstate[v] == UNLOADED && !gather(dx, sp, v, sel, r, err, &st)) return st;
        dx->sstate[v] = GOLDEN;
    }
    horizon = bf__dx_hit_values(dx, sp, nb, dx->sstate, horizon);
    if (sd.v >= 0) {   /* the seeded value's rows, the padding a copy of the first */
        bf_tensor *t = &sp->vals[sd.v];
        size_t rb = bf_tensor_nbytes(t) / (size_t)r;
        for (int i = 0; i < r; i++) copy_row((char *)t->data + (size_t)i * rb, (const char *)sd.vals + (size_t)(i < n ? i : 0) * rb, rb);
        dx->sstate[sd.v] = DIRTY;
        if (sh->last_use[sd.v] > horizon) horizon = sh->last_use[sd.v];
    }

    for (int i = first; i >= 0 && i < (int)sh->n_steps && i <= horizon; i++) {
        const bf__step *s = &sp->steps[i];
        int needed = dx->param_hit[i];
        for (int j = 0; j < s->n_in && !needed; j++) needed = s->node->in[j] >= 0 && dx->sstate[s->node->in[j]] == DIRTY;
        if (!needed) continue;
        if (!ok[i]) return BF_OK;   /* not on rows: the caller runs the batch in full */
        bf__gemm_info g;
        if (b < 0 && bf__gemm_params(s, &g) && !sh->roww[0][i]) return BF_OK;   /* the product of one batch */
        if (!concat_rows(dx, sp, (size_t)i, sel, r, err, &st)) {
            if (st != BF_OK) return st;
            for (int j = 0; j < s->n_in; j++) {
                int u = s->node->in[j];
                if (!bf__runtime(sp, u) || dx->sstate[u] != UNLOADED) continue;
                if (!gather(dx, sp, u, sel, r, err, &st)) return st;
                dx->sstate[u] = GOLDEN;
            }
            if ((st = run_rows(dx, sp, b, sel, (size_t)i, err)) != BF_OK) return st;
        }
        if (sp->step_hit[i]) bf__plan_apply_value_faults(sp, i);
        for (int j = 0; j < s->n_out; j++) {
            int o = s->node->out[j];
            if (o < 0) continue;
            dx->sstate[o] = stays_dirty(dx, s, (size_t)i) || !rows_golden(dx, sp, o, sel, n) ? DIRTY : GOLDEN;
            if (dx->sstate[o] == DIRTY && sh->last_use[o] > horizon) horizon = sh->last_use[o];
        }
    }
    const float *o = sp->vals[sh->out_val].data;
    size_t rb = (size_t)sh->out_cols * sizeof(float);
    *done = 1;
    for (size_t f = 0; f < nb; f++)
        if (vf_old) bf_plan_value_fault_seen(sp, f, &vf_old[dx->vfb_of[f]], &vf_new[dx->vfb_of[f]]);
    if (dx->sstate[sh->out_val] != DIRTY) return BF_OK;
    /* rows ascend, also from one run to the next of bf__rows_all, so each
     * batch is listed once */
    int64_t last = dx->n_touched ? dx->touched[dx->n_touched - 1] : -1;
    for (int t = 0; t < n; t++) {
        int64_t row = sel[t];
        if (same_row(o + t * sh->out_cols, sh->golden + row * sh->out_cols, rb)) continue;
        copy_row(dx->out + row * sh->out_cols, o + t * sh->out_cols, rb);
        dx->rows[dx->n_rows++] = row;
        if (bf__batch_of(sh, row) != last) dx->touched[dx->n_touched++] = last = bf__batch_of(sh, row);
    }
    return BF_OK;
}

bf_status bf__rows_batch(bf__dx *dx, int64_t b, const bf__dx_weight *w, size_t n_w, const bf_value_fault *vf,
                         size_t n_vf, int first, int last_entry, float *vf_old, float *vf_new, int *done, bf_error *err)
{
    *done = 0;
    if (dx->n_sub_batch == 0) return BF_OK;
    int n = reached_rows(dx, b, w, n_w, vf, n_vf, dx->rsel);
    if (n <= 0) return BF_OK;
    return on_rows(dx, b, n, dx->n_sub_batch, w, n_w, vf, n_vf, (seed){-1, NULL}, first, last_entry, vf_old, vf_new,
                   done, err);
}

bf_status bf__rows_all(bf__dx *dx, const bf__dx_weight *w, size_t n_w, const bf_value_fault *vf, size_t n_vf,
                       int first, int last_entry, float *vf_old, float *vf_new, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    *done = 0;
    if (dx->n_sub == 0) return BF_OK;
    int cap = 1 << (dx->n_sub - 1), n = 0, batches = 0;
    /* Past the widest sub-plan, in several runs of it (weight faults only:
     * an embedding row that many samples look up), up to half the eval set:
     * beyond, whole batches cost about as much. */
    int most = n_vf == 0 && sh->samples / 2 > cap ? (int)(sh->samples / 2) : cap;
    int64_t one = -1;
    for (int64_t b = 0; b < sh->n_batches; b++) {
        if (!dx->bmark[b]) continue;
        /* rall has room for a batch past the most */
        int k = reached_rows(dx, b, w, n_w, vf, n_vf, dx->rall + n);
        if (k < 0 || n + k > most) return BF_OK;
        if (k) n += k, batches++, one = b;
    }
    if (n == 0) return BF_OK;   /* batch by batch, as reached_rows did not explain the marks */
    int64_t rows0 = dx->n_rows, touched0 = dx->n_touched;
    for (int c0 = 0; c0 < n; c0 += cap) {
        int m = n - c0 < cap ? n - c0 : cap;
        memcpy(dx->rsel, dx->rall + c0, (size_t)m * sizeof *dx->rsel);
        bf_status st = on_rows(dx, n <= cap && batches == 1 ? one : -1, m, dx->n_sub, w, n_w, vf, n_vf,
                               (seed){-1, NULL}, first, last_entry, vf_old, vf_new, done, err);
        if (st != BF_OK) return st;
        if (!*done) {
            /* a later run could not go on rows after all: the rows written
             * so far back to golden, and batch by batch from scratch */
            for (int64_t t = rows0; t < dx->n_rows; t++) {
                size_t off = (size_t)(dx->rows[t] * sh->out_cols);
                memcpy(dx->out + off, sh->golden + off, (size_t)sh->out_cols * sizeof(float));
            }
            dx->n_rows = rows0;
            dx->n_touched = touched0;
            return BF_OK;
        }
    }
    if (dx->mark_reached)   /* the samples whose outputs these runs gave (a tied table: bf__dx_run) */
        for (int i = 0; i < n; i++) dx->reached[dx->rall[i]] = 1;
    dx->n_reached = dx->mark_reached ? n : 0;
    return BF_OK;
}

/* The sub-plans that may run rows of value v from its readers on: every
 * step below v runs on their rows, and every Gemm as exact rows (runs of
 * rows from several batches have no batch's product to run in). */
/* Whether rows_from could hold for value v on some sub-plan, from what
 * check_steps asks first and needs no sub-plan: every output of a step
 * downstream of v is cached (or a parameter-only value). Where not, no
 * sub-plan can take v on, and making and checking them (about a golden
 * pass of work, and the pages of every plan: 24-39% of the trials' CPU
 * in LRASPP's 20-trial campaign, for no trial) is skipped. dx->sstate is the scratch. */
static int may_run_from(bf__dx *dx, int v)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_plan *full = dx->plan[0];
    unsigned char *reach = dx->sstate;
    memset(reach, 0, sh->m->n_values);
    reach[v] = 1;
    for (size_t i = (size_t)sh->first_use[v]; i < sh->n_steps; i++) {
        const bf__step *s = &full->steps[i];
        int hit = 0;
        for (int j = 0; j < s->n_in && !hit; j++) hit = s->node->in[j] >= 0 && reach[s->node->in[j]];
        for (int j = 0; j < s->n_out && hit; j++) {
            int o = s->node->out[j];
            if (o < 0) continue;
            if (!bf__gcache_has(sh->gc, o) && !bf__pvals_data(sh->pv, o)) return 0;
            reach[o] = 1;
        }
    }
    return 1;
}

bf_status bf__rows_can_seed(bf__dx *dx, int v, const bf__dx_weight *w, size_t n_w, int *can, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    *can = 0;
    if (dx->n_sub == 0 || sh->first_use[v] < 0 || (!dx->rows_ready && !may_run_from(dx, v))) return BF_OK;
    bf_status st = rows_ensure(dx, w, n_w, err);
    if (st != BF_OK) return st;
    for (int k = 0; k < dx->n_sub; k++) {
        if (!dx->rows_from[(size_t)k * sh->m->n_values + (size_t)v]) return BF_OK;
        if (batch_axis(dx->plan[0], dx->sub[k], v) != 0) return BF_OK;
    }
    for (size_t i = (size_t)sh->first_use[v]; i < sh->n_steps; i++) {
        bf__gemm_info g;
        if (bf__gemm_params(&dx->plan[0]->steps[i], &g) && !sh->roww[0][i]) return BF_OK;
    }
    *can = 1;
    return BF_OK;
}

bf_status bf__rows_seeded(bf__dx *dx, int v, const int64_t *rows, const float *vals, int64_t n, int *done,
                          bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    int cap = 1 << (dx->n_sub - 1);
    int64_t width = bf_tensor_numel(&dx->plan[0]->vals[v]) / sh->batch;
    *done = 1;
    for (int64_t c0 = 0; c0 < n; c0 += cap) {
        int m = n - c0 < cap ? (int)(n - c0) : cap;
        memcpy(dx->rsel, rows + c0, (size_t)m * sizeof *dx->rsel);
        bf_status st = on_rows(dx, -1, m, dx->n_sub, NULL, 0, NULL, 0, (seed){v, vals + c0 * width},
                               sh->first_use[v], sh->first_use[v], NULL, NULL, done, err);
        if (st != BF_OK) return st;
        if (!*done) {   /* as in bf__rows_all: the rows written so far back to golden */
            for (int64_t t = 0; t < dx->n_rows; t++) {
                size_t off = (size_t)(dx->rows[t] * sh->out_cols);
                memcpy(dx->out + off, sh->golden + off, (size_t)sh->out_cols * sizeof(float));
            }
            dx->n_rows = dx->n_touched = 0;
            return BF_OK;
        }
    }
    return BF_OK;
}
