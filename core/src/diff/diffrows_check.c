/* Row mode's sub-plans (diffrows.c says what row mode is): made and
 * checked on first use, which steps may run on r rows found by running
 * them on rows of the golden batch 0; the worker's row-mode state made
 * and freed, and the sub-plans pointed at a trial's faulty parameters. */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "diff/diffrows_impl.h"

/* Which steps may run on r rows: tried on rows of golden batch 0. */
static bf_status check_steps(bf__dx *dx, int k, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    bf_plan *full = dx->plan[0], *sp = dx->sub[k];
    int r = 1 << k;
    int64_t sel[1 << (BF__SUB_MAX - 1)];
    for (int t = 0; t < r; t++) sel[t] = (t * 7919 + 13) % bf__rows_of(sh, 0);   /* out of order */
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
                fine = bf__rows_axis(full, sp, s->node->in[j]) >= 0 || bf__rows_same_in_sub(dx, sp, s->node->in[j]);
        for (int j = 0; j < s->n_out && fine; j++)
            fine = s->node->out[j] < 0 || ((bf__rows_axis(full, sp, s->node->out[j]) >= 0 || bf__rows_same_in_sub(dx, sp, s->node->out[j])) &&
                                           (bf__gcache_has(sh->gc, s->node->out[j]) ||
                                            (bf__rows_same_in_sub(dx, sp, s->node->out[j]) &&
                                             bf__pvals_data(sh->pv, s->node->out[j]))));
        if (fine && bf__gemm_params(s, &g))   /* Gemm on rows: the sample on dim 0 of A and Y */
            fine = bf__rows_axis(full, sp, s->node->in[0]) == 0 && bf__rows_axis(full, sp, s->node->out[0]) == 0 &&
                   !g.trans_a && bf__gcache_has(sh->gc, s->node->in[0]);
        if (fine && whole) {
            *ok = 1;
            continue;
        }
        bf_status st = BF_OK;
        for (int j = 0; j < s->n_in && fine; j++)
            if (bf__runtime(full, s->node->in[j])) fine = bf__rows_gather(dx, sp, s->node->in[j], sel, r, err, &st);
        if (st != BF_OK) {
            dx->checking = 0;
            return st;
        }
        if (!fine) continue;
        if (bf__rows_run(dx, sp, 0, sel, i, err) != BF_OK) continue;   /* e.g. an index out of range: not on rows */
        for (int j = 0; j < s->n_out && fine; j++)
            fine = s->node->out[j] < 0 || bf__rows_golden(dx, sp, s->node->out[j], sel, r);
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

bf_status bf__rows_ensure(bf__dx *dx, const bf__dx_weight *w, size_t n_w, bf_error *err)
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
 * them from the cache (bf__rows_gather), so a step that mixes them with sample rows
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
            if (o < 0 || bf__rows_axis(full, sp, o) >= 0) continue;
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
    bf_status st = bf__rows_ensure(dx, w, n_w, err);
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
