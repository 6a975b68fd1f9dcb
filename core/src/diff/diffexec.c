/* The differential executor: a trial computed from the golden pass instead
 * of from scratch.
 *
 * A fault can change only the batches that read it (an embedding row: the
 * batches that look that row up; a transient value fault: its sample's
 * batch; anything else: every batch) and, in those, only the steps
 * downstream of it. So for each such batch the executor starts at the first
 * step that reads a faulty parameter or value, runs a step only when one of
 * its inputs differs from the golden pass (or it reads a faulty parameter),
 * compares each output it computes with the cached golden one, and stops as
 * soon as no difference is left to propagate: a masked fault costs the steps
 * up to where it vanished. Steps run through the plan's own kernels with the
 * plan's own batch, so what they compute is what the full pass computes,
 * bit for bit; so do a Gemm's column or rows and a Conv's channel computed
 * alone (the project's own kernel, ops/sgemm.h). Only the sparse updates
 * (a Gemm column or rank-k update, a Conv output channel: diffgemm.c,
 * bf__conv_delta) round differently, and only where the change is clear:
 * they run only when the campaign asks for them (bf__dx_near_exact);
 * otherwise every record is the full pass's, bit for bit.
 *
 * A value changed in one channel alone (a Conv's moved channel) is followed
 * through the steps that keep it there on that channel only (diffchan.c).
 *
 * Inputs of a step that the trial has not touched are read from the golden
 * cache, or recomputed from the nearest cached ancestor when the cache's
 * budget left them out. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "diff/diff_impl.h"

/* --- a batch */

/* Golden values are read in place from the cache: a value's data pointer
 * is set to its cache block, and back to the plan's own buffer before a
 * step writes it (own) or a fault changes it (writable).
 *
 * The graph's output is the exception (run_batch sets dx->out_here): its
 * steps write it straight into the trial's outputs, which hold the golden
 * ones until then, so a changed batch is not copied there afterwards (a
 * segmenter's are 88 MB a trial: LRASPP's 16 images of 21 x 256 x 256).
 * The batch goes on the list to be restored as soon as it is written,
 * whatever the trial then does (a detector firing ends it early). */
static void *mine(bf__dx *dx, bf_plan *p, int v)
{
    if (v == dx->sh->out_val && dx->out_here) {
        if (!dx->out_wrote) dx->touched[dx->n_touched++] = dx->out_b;
        dx->out_wrote = 1;
        return dx->out_here;
    }
    return dx->arena[p == dx->plan[1]][v];
}

static void own(bf__dx *dx, bf_plan *p, int v)
{
    if (v == dx->sh->out_val) dx->orow_ok = 0;   /* its changed rows, if known, were the old values' */
    p->vals[v].data = mine(dx, p, v);
}

static void own_outputs(bf__dx *dx, bf_plan *p, size_t i)
{
    const bf__step *s = &p->steps[i];
    for (int j = 0; j < s->n_out; j++)
        if (s->node->out[j] >= 0) own(dx, p, s->node->out[j]);
}

/* A value the worker's places shared by lifetime counted on the cache for
 * (bf__dx_arena_assumed) that the cache gives no block for: recomputing or
 * reading it in its place could read bytes another value wrote since. */
static bf_status not_cached(int v, int64_t b, bf_error *err)
{
    return bf_error_set(err, BF_EUNSUPPORTED, "internal error: value %d not in the golden cache of batch %lld", v,
                        (long long)b);
}

/* Puts value v's golden tensor of batch b into the plan: from the dataset,
 * the cache, or by running its producer on golden inputs. */
static bf_status fetch(bf__dx *dx, bf_plan *p, int64_t b, int v, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    bf_tensor *t = &p->vals[v];
    int s = p->val_step[v];
    if (dx->state[v] == GOLDEN && bf__dx_fetch_from_cache(p, sh->out_val, v)) {
        /* computed by the trial and found golden (differs: the cache's very
         * bytes), or read from the cache already: read from the cache, so
         * that the place the trial computed it into need not outlive its
         * own readers for fetch's (diffarena.c: a held value's life is not
         * widened to the moments fetch runs its readers) */
        const void *g = bf__dx_golden(sh, v, b);
        if (g) t->data = (void *)g;
        else if (bf__dx_arena_assumed(dx, p, v)) return not_cached(v, b, err);
        return BF_OK;
    }
    if (dx->state[v] != UNLOADED) return BF_OK;
    bf_status st = BF_OK;
    const void *blk = s >= 0 ? bf__dx_golden(sh, v, b) : NULL;
    if (s < 0) {
        size_t i = (size_t)sh->m->values[v].index;
        own(dx, p, v);
        st = bf_dataset_copy_rows(bf__evaluator_feed(dx->ev, i), b * sh->batch, bf_plan_batch(p), t, err);
    } else if (blk) {
        t->data = (void *)blk;   /* read only: steps never write their inputs */
    } else {
        /* Not cached: its producer reads no faulty parameter (those steps
         * have run already) and only golden inputs, so it reproduces the
         * golden value. */
        if (bf__dx_arena_assumed(dx, p, v)) return not_cached(v, b, err);
        const bf__step *ps = &p->steps[s];
        for (int j = 0; j < ps->n_in && st == BF_OK; j++)
            if (bf__runtime(p, ps->node->in[j])) st = fetch(dx, p, b, ps->node->in[j], err);
        own_outputs(dx, p, (size_t)s);
        if (st == BF_OK) st = bf__plan_run_step(p, (size_t)s, err);
        dx->work[s] += 1.0;
        for (int j = 0; j < ps->n_out && st == BF_OK; j++)
            if (ps->node->out[j] >= 0) dx->state[ps->node->out[j]] = GOLDEN;
    }
    if (st == BF_OK) dx->state[v] = GOLDEN;
    return st;
}

bf_status bf__dx_fetch(bf__dx *dx, bf_plan *p, int64_t b, int v, bf_error *err) { return fetch(dx, p, b, v, err); }
void bf__dx_own(bf__dx *dx, bf_plan *p, int v) { own(dx, p, v); }
void bf__dx_own_outputs(bf__dx *dx, bf_plan *p, size_t i) { own_outputs(dx, p, i); }

/* fetch, into the plan's own buffer (to be changed in place). */
static bf_status fetch_writable(bf__dx *dx, bf_plan *p, int64_t b, int v, bf_error *err)
{
    bf_status st = fetch(dx, p, b, v, err);
    void *buf = st == BF_OK ? mine(dx, p, v) : NULL;
    if (buf && p->vals[v].data != buf) {
        memcpy(buf, p->vals[v].data, bf_tensor_nbytes(&p->vals[v]));
        p->vals[v].data = buf;
    }
    return st;
}

static int differs(const bf__dx *dx, const bf_plan *p, int64_t b, int v)
{
    const void *g = bf__dx_golden(dx->sh, v, b);
    return !g || memcmp(p->vals[v].data, g, bf_tensor_nbytes(&p->vals[v])) != 0;
}

/* differs for the graph's output of batch b, row by row against the
 * campaign's golden outputs: the changed rows kept in dx->orow for the end
 * of run_batch, which then need not compare them again. */
static int out_differs(bf__dx *dx, const bf_plan *p, int64_t b, int v)
{
    const bf__dx_shared *sh = dx->sh;
    int64_t rows = bf_plan_batch(p);
    if (bf_tensor_nbytes(&p->vals[v]) != (size_t)(rows * sh->out_cols) * sizeof(float)) return differs(dx, p, b, v);
    const float *o = p->vals[v].data, *g = sh->golden + b * sh->batch * sh->out_cols;
    size_t row = (size_t)sh->out_cols * sizeof(float);
    dx->n_orow = 0;
    for (int64_t r = 0; r < rows; r++)
        if (memcmp(o + r * sh->out_cols, g + r * sh->out_cols, row) != 0) dx->orow[dx->n_orow++] = r;
    dx->orow_ok = 1;
    return dx->n_orow > 0;
}

/* Every output element within a few ulps of the golden one, an ulp being
 * that of its row's largest output: a small logit that nearly cancels moves
 * by the ulps of the terms it was summed from, not by its own. */
#define TINY_CHANGE 0x1p-18
static int tiny_rows(const float *o, const float *g, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++, o += cols, g += cols) {
        if (memcmp(o, g, (size_t)cols * sizeof *o) == 0) continue;
        float scale = 0;
        for (int64_t i = 0; i < cols; i++) {
            if (!isfinite(o[i]) || !isfinite(g[i])) return 0;
            if (fabsf(g[i]) > scale) scale = fabsf(g[i]);
        }
        for (int64_t i = 0; i < cols; i++)
            if (fabsf(o[i] - g[i]) > TINY_CHANGE * scale) return 0;
    }
    return 1;
}

static int tiny_change(const bf__dx *dx, const bf_plan *p, int64_t b)
{
    const bf__dx_shared *sh = dx->sh;
    return tiny_rows(p->vals[sh->out_val].data, sh->golden + b * sh->batch * sh->out_cols, bf_plan_batch(p),
                     sh->out_cols);
}

int bf__dx_hit_values(bf__dx *dx, bf_plan *p, size_t nb, unsigned char *state, int horizon)
{
    const bf__dx_shared *sh = dx->sh;
    for (size_t k = 0; k < nb; k++) {   /* each step's faults once */
        int s = p->vf[k].step;
        if (dx->step_mark[s + 1]) continue;
        dx->step_mark[s + 1] = 1;
        bf__plan_apply_value_faults(p, s);
    }
    for (size_t k = 0; k < nb; k++) {
        int v = (int)dx->vfb[k].value;
        dx->step_mark[p->vf[k].step + 1] = 0;
        state[v] = DIRTY;
        if (sh->last_use[v] > horizon) horizon = sh->last_use[v];
    }
    return horizon;
}

/* The output in place (own) for batch b on plan p: exact trials only (a
 * batch redone after an update would find the first run's channels around
 * a lazy one), and not where row mode gave some of its samples' outputs
 * (run_tied). */
static void out_begin(bf__dx *dx, const bf_plan *p, int64_t b)
{
    const bf__dx_shared *sh = dx->sh;
    int ov = sh->out_val;
    int64_t rows = bf_plan_batch(p);
    dx->out_here = ov >= 0 && dx->no_approx && !dx->n_reached && p->vals[ov].dtype == BF_F32 &&
                           bf_tensor_nbytes(&p->vals[ov]) == (size_t)(rows * sh->out_cols) * sizeof(float)
                       ? dx->out + b * sh->batch * sh->out_cols
                       : NULL;
    dx->out_b = b;
    dx->out_wrote = dx->orow_ok = 0;
}

/* Batch b's changed output (DIRTY) into the trial's outputs, unless it is
 * there already (here: written in place, chan: on one channel), and its
 * changed rows into dx->rows, from the compare made as it was written
 * when there was one. */
static void out_end(bf__dx *dx, const bf_plan *p, int64_t b, int here, int chan)
{
    const bf__dx_shared *sh = dx->sh;
    int64_t start = b * sh->batch, rows = bf_plan_batch(p);
    const float *o = p->vals[sh->out_val].data;
    size_t row_bytes = (size_t)sh->out_cols * sizeof(float);
    /* samples row mode gave already (a tied table's lookups: run_tied)
     * keep those outputs */
    const unsigned char *kept = dx->n_reached ? dx->reached + start : NULL;
    if (here) dx->n_in_place[0]++, dx->n_in_place[1] += chan;
    else if (!kept) memcpy(dx->out + start * sh->out_cols, o, (size_t)rows * row_bytes);
    if (!dx->out_wrote) dx->touched[dx->n_touched++] = b;
    if (dx->orow_ok && !kept) {   /* compared already (out_differs, bf__chan_rows) */
        for (int64_t k = 0; k < dx->n_orow; k++) dx->rows[dx->n_rows++] = start + dx->orow[k];
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        if (kept && kept[r]) continue;
        if (memcmp(o + r * sh->out_cols, sh->golden + (start + r) * sh->out_cols, row_bytes) == 0) continue;
        if (kept) memcpy(dx->out + (start + r) * sh->out_cols, o + r * sh->out_cols, row_bytes);
        dx->rows[dx->n_rows++] = start + r;
    }
}

static bf_status run_batch(bf__dx *dx, int64_t b, const bf_value_fault *vf, size_t n_vf, int first, int last_entry,
                           float *vf_old, float *vf_new, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    int tail = b == sh->samples / sh->batch;
    bf_plan *p = dx->plan[tail];
    int64_t start = b * sh->batch, rows = bf_plan_batch(p);
    bf_status st;
    memset(dx->state, UNLOADED, m->n_values);
    memset(dx->dch, 0, m->n_values * sizeof *dx->dch);
    p->psum = NULL;   /* a resume an error cut short */
    p->cpos = NULL;   /* ... or a run on positions (diffpos.c) */
    memset(dx->dlazy, 0, m->n_values);
    memset(dx->dsrc, 0, m->n_values * sizeof *dx->dsrc);
    if ((st = bf__pv_batch(dx, p, b, err)) != BF_OK) return st;
    dx->approx = 0;
    int ov = sh->out_val;
    out_begin(dx, p, b);

    /* this batch's value faults, rows relative to it */
    size_t nb = 0;
    for (size_t k = 0; k < n_vf; k++) {
        if (vf[k].sample >= 0 && (vf[k].sample < start || vf[k].sample >= start + rows)) continue;
        dx->vfb[nb] = vf[k];
        if (vf[k].sample >= 0) dx->vfb[nb].sample -= start;
        dx->vfb_of[nb++] = k;
    }
    if ((nb || p->n_vf) && (st = bf_plan_set_value_faults(p, dx->vfb, nb, err)) != BF_OK) return st;
    int horizon = last_entry;
    if (nb) {
        /* the faulted values start from golden and are hit once, here;
         * a producer that runs again below hits its output again */
        for (size_t k = 0; k < nb; k++)
            if ((st = fetch_writable(dx, p, b, (int)dx->vfb[k].value, err)) != BF_OK) return st;
        horizon = bf__dx_hit_values(dx, p, nb, dx->state, horizon);
        bf__chan_value_faults(dx, p, nb);
    }

    memset(dx->fdone, 0, sh->n_steps);
    for (int i = first; i >= 0 && i < (int)sh->n_steps && i <= horizon; i++) {
        const bf__step *s = &p->steps[i];
        int fused = dx->fdone[i], unwritten = fused == FUSED_MID;   /* computed by a Conv above */
        int needed = dx->param_hit[i] || fused;
        for (int j = 0; j < s->n_in && !needed; j++) needed = s->node->in[j] >= 0 && dx->state[s->node->in[j]] == DIRTY;
        if (!needed) continue;
        int done = fused;
        if (!done && (st = bf__chan_try(dx, p, b, (size_t)i, &done, err)) != BF_OK) return st;
        /* what follows reads its inputs whole */
        if (!done && (st = bf__chan_fill_inputs(dx, p, b, (size_t)i, err)) != BF_OK) return st;
        if (!done && (st = bf__plane_try(dx, p, b, (size_t)i, &horizon, &done, err)) != BF_OK) return st;
        if (done == PLANE_DONE) continue;   /* on the planes that moved (diffplane.c) */
        if (!done && (st = bf__out_defer(dx, p, b, (size_t)i, &done, err)) != BF_OK) return st;
        if (done == OUT_DEFERRED) {   /* run over every batch at once, after them (diffout.c) */
            dx->state[s->node->out[0]] = GOLDEN;
            continue;
        }
        if (!done && (st = bf__dx_try_gemm(dx, p, tail, b, (size_t)i, &done, err)) != BF_OK) return st;
        if (!done && (st = bf__dx_try_matmul(dx, p, tail, b, (size_t)i, &done, err)) != BF_OK) return st;
        if (!done && dx->param_hit[i] && (st = bf__dx_try_conv(dx, p, b, (size_t)i, &done, err)) != BF_OK) return st;
        bf__psum_run pr = {0};   /* a Conv whose input moved in one channel: resumed (diffpsum.c) */
        if (!done) bf__psum_try(dx, p, b, (size_t)i, &pr);
        bf__pos_run qr = {0};   /* ... at the output positions its moved input reaches (diffpos.c) */
        if (!done && (st = bf__pos_try(dx, p, b, (size_t)i, &qr, err)) != BF_OK) return st;
        if (!done && (st = bf__dx_run_fused(dx, p, b, (size_t)i, &done, err)) != BF_OK) return st;
        if (done == CHAN_DONE || done == FUSED_CHAN) {   /* one channel of its one output (diffchan.c) */
            int o = s->node->out[0];
            int c = done == CHAN_DONE ? dx->chan_c : dx->fchan_c;
            if (bf__chan_settle(dx, p, b, o, c) && sh->last_use[o] > horizon) horizon = sh->last_use[o];
            continue;
        }
        if (done == FUSED_CONV) unwritten = 1;   /* its own output never written */
        if (!done) {
            for (int j = 0; j < s->n_in; j++)
                if (bf__runtime(p, s->node->in[j]) && (st = fetch(dx, p, b, s->node->in[j], err)) != BF_OK) return st;
            own_outputs(dx, p, (size_t)i);
            if ((st = bf__plan_run_step(p, (size_t)i, err)) != BF_OK) return st;
            dx->work[i] += 1.0;
        }
        bf__psum_done(dx, p, (size_t)i, &pr);
        bf__pos_done(dx, p, (size_t)i, &qr, &pr);
        if (p->step_hit[i]) bf__plan_apply_value_faults(p, i);
        for (int j = 0; j < s->n_out; j++) {
            int o = s->node->out[j];
            if (o < 0) continue;
            int moved = unwritten || (o == ov && !dx->n_reached ? out_differs(dx, p, b, o) : differs(dx, p, b, o));
            dx->state[o] = moved ? DIRTY : GOLDEN;
            dx->dch[o] = 0;
            if (dx->state[o] == DIRTY && sh->last_use[o] > horizon) horizon = sh->last_use[o];
        }
    }
    /* the output in place holds golden bits around a lazy channel: its
     * changed rows are those whose channel moved, and nothing is filled */
    int here = ov >= 0 && dx->out_here && p->vals[ov].data == dx->out_here;
    int chan_rows = here && dx->state[ov] == DIRTY && dx->dlazy[ov];
    if (chan_rows) {
        dx->n_orow = bf__chan_rows(dx, p, b, ov, dx->orow);
        dx->orow_ok = 1;
        dx->dlazy[ov] = 0;
    }
    dx->out_here = NULL;
    if ((st = bf__chan_fill(dx, p, b, sh->out_val, err)) != BF_OK) return st;
    for (size_t k = 0; k < nb; k++) {
        size_t f = dx->vfb_of[k];
        if ((vf[f].sample >= 0 || b == 0) && vf_old) bf_plan_value_fault_seen(p, k, &vf_old[f], &vf_new[f]);
    }
    if (dx->approx && !dx->no_approx && dx->state[sh->out_val] == DIRTY && tiny_change(dx, p, b)) {
        /* the outputs moved by about an ulp: whether they moved at all is
         * the rank-k update's rounding, so the batch is redone exactly */
        dx->no_approx = 1;
        st = run_batch(dx, b, vf, n_vf, first, last_entry, vf_old, vf_new, err);
        dx->no_approx = 0;
        return st;
    }
    if (dx->state[sh->out_val] == DIRTY) out_end(dx, p, b, here, chan_rows);
    return BF_OK;
}

static bf_status reserve_vf(bf__dx *dx, size_t n, bf_error *err)
{
    if (n <= dx->vfb_cap) return BF_OK;
    bf_value_fault *v = bf__realloc(dx->vfb, n * sizeof *v);
    if (!v) return bf__dx_oom(err);
    dx->vfb = v;
    size_t *o = bf__realloc(dx->vfb_of, n * sizeof *o);
    if (!o) return bf__dx_oom(err);
    dx->vfb_of = o;
    dx->vfb_cap = n;
    return BF_OK;
}

/* Whether a full pass costs less than this trial's differential run, which
 * re-runs, in every batch it reaches, the steps downstream of its faults,
 * and on top of a full pass's work compares each output with the golden
 * one (and reads that from the cache). Only for a trial with more faults
 * than a batch has samples, which row mode never takes (reached_rows,
 * diffrows.c): BER at a high rate, whose faults leave next to nothing
 * unreached and next to no batch where they all vanish. A single fault
 * reaching every step (the first Conv of a CNN) stays differential: a
 * column update, a ReLU that masks it, a chain, early stopping save it
 * most of the pass. The steps downstream are found on the graph (a step
 * reading a faulty parameter or a value one of them changed), weighed by
 * step_cost, and the pass is run when they are at least FULL_SHARE of it
 * (over the batches reached); state is the scratch. Why 0.8: the steps a
 * BER trial leaves unreached are mostly index plumbing (a recommender's
 * per-field Gathers of its sparse input: 15% of FM's elements moved, much
 * less of its time), and each reached step costs the differential run its
 * compare and cache reads besides; at 0.95 FM at BER 1e-3 stayed
 * differential and took 1.15-1.5x an exact pass, at 0.8 it runs in full,
 * as fast as --exact (docs/ENGINE.md). */
#define FULL_SHARE 0.8
static int full_pass_cheaper(bf__dx *dx, size_t n_w, const bf_value_fault *vf, size_t n_vf, int first, int every,
                             int64_t marked)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_plan *p = dx->plan[0];
    if (dx->no_full || n_w + n_vf <= (size_t)sh->batch || (!every && n_w <= (size_t)sh->batch && dx->n_sub > 0)) return 0;
    if (sh->pass_cost <= 0 || (double)marked < FULL_SHARE * (double)sh->n_batches) return 0;
    memset(dx->state, 0, sh->m->n_values);
    for (size_t k = 0; k < n_vf; k++) dx->state[vf[k].value] = 1;
    double reached = 0;
    for (int i = first; i >= 0 && i < (int)sh->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int hit = dx->param_hit[i];
        for (int j = 0; j < s->n_in && !hit; j++) hit = s->node->in[j] >= 0 && dx->state[s->node->in[j]];
        if (!hit) continue;
        reached += sh->step_cost[i];
        for (int j = 0; j < s->n_out; j++)
            if (s->node->out[j] >= 0) dx->state[s->node->out[j]] = 1;
    }
    return reached * (double)marked >= FULL_SHARE * sh->pass_cost * (double)sh->n_batches;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t sort_unique(int64_t *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (k == 0 || v[i] != v[k - 1]) v[k++] = v[i];
    return k;
}

/* Faults in tied tables alone (GPT-2's wte, read by its Gather and, through
 * a Transpose, by the logits), at most one a sample of a batch: the samples
 * that look a faulty row up run in row mode (all of their steps), and every
 * batch then runs from the transpose alone, its lookups not re-run (their
 * other samples read golden rows): one logit column, the other samples'
 * outputs, the looked-up samples' kept from row mode. *done 0: nothing
 * written, the caller runs the marked batches whole. */
static bf_status run_tied(bf__dx *dx, const bf__dx_weight *w, size_t n_w, int first, int last_entry, int64_t marked,
                          int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    bf_status st = BF_OK;
    int rows_done = marked == 0;
    *done = 0;
    if (!rows_done) {
        if (dx->n_sub == 0) return BF_OK;
        if ((st = bf__rows_params(dx, w, n_w, err)) != BF_OK) return st;
        dx->mark_reached = 1;
        st = bf__rows_all(dx, w, n_w, NULL, 0, first, last_entry, NULL, NULL, &rows_done, err);
        dx->mark_reached = 0;
        if (st != BF_OK || !rows_done) return st;
    }
    int col_first = (int)sh->n_steps;
    for (size_t i = 0; i < n_w; i++)
        for (int t = sh->pc_off[w[i].param]; t < sh->pc_off[w[i].param + 1]; t++) {
            int s = sh->pc_step[t];
            if (bf__dx_lookup_step(sh, dx->plan[0], w[i].param, s)) dx->param_hit[s] = 0;
            else if (s < col_first) col_first = s;
        }
    for (int64_t b = 0; b < sh->n_batches && st == BF_OK; b++)
        st = run_batch(dx, b, NULL, 0, col_first, last_entry, NULL, NULL, err);
    for (size_t i = 0; i < n_w; i++)   /* bf__dx_run clears them all after the trial */
        for (int t = sh->pc_off[w[i].param]; t < sh->pc_off[w[i].param + 1]; t++) dx->param_hit[sh->pc_step[t]] = 1;
    for (int64_t k = 0; k < dx->n_reached; k++) dx->reached[dx->rall[k]] = 0;
    dx->n_reached = 0;
    dx->n_rows = sort_unique(dx->rows, dx->n_rows);
    dx->n_touched = sort_unique(dx->touched, dx->n_touched);
    *done = st == BF_OK;
    return st;
}

bf_status bf__dx_run(bf__dx *dx, const bf__dx_weight *w, size_t n_w, const bf_value_fault *vf, size_t n_vf,
                     const float **outputs, const int64_t **rows, int64_t *n_rows, float *vf_old, float *vf_new,
                     int *full, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    bf_status st = BF_OK;
    *full = 0;
    if ((st = reserve_vf(dx, n_vf, err)) != BF_OK) return st;
    /* value faults are written at a batch's start, into any value: on the
     * plans' own slots (diffarena.c) */
    bf__dx_arena_use(dx, n_vf > 0);
    bf__out_restore(dx);   /* the last trial's (diffplane.c) */
    dx->n_touched = dx->n_rows = 0;
    dx->out_here = NULL;
    bf__out_off(dx);
    for (size_t k = 0; vf_old && k < n_vf; k++) vf_old[k] = vf_new[k] = (float)NAN;
    if (n_w == 1 && n_vf == 0) {
        int done;
        if ((st = bf__chain_run(dx, w, &done, err)) != BF_OK) return st;
        if (done) {
            *outputs = dx->out;
            *rows = dx->rows;
            *n_rows = dx->n_rows;
            return BF_OK;
        }
    }

    int first = (int)sh->n_steps, last_entry = -1, every = 0, tied = 0;
    int64_t marked = 0;   /* batches marked so far: once all are, a BER trial's other faults mark none */
    for (size_t i = 0; i < n_w; i++) {
        size_t q = w[i].param;
        dx->pfault[q] = &w[i];
        if (dx->pfaults[q]++ == 0)   /* a tensor's readers once, not once per fault (BER: thousands) */
            for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) {
                int s = sh->pc_step[t];
                dx->param_hit[s] = 1;
                if (s < first) first = s;
                if (s > last_entry) last_entry = s;
            }
        const bf__emb_index *e = &sh->emb[q];
        if (!e->rows) { every = 1; continue; }
        tied |= e->tied;
        if (every || marked == sh->n_batches) continue;
        int64_t nb;
        const int32_t *rb = bf__emb_batches(e, w[i].index / e->row_elems, &nb);
        for (int64_t k = 0; k < nb; k++) {
            marked += !dx->bmark[rb[k]];
            dx->bmark[rb[k]] = 1;
        }
    }
    for (size_t k = 0; k < n_vf; k++) {
        int u = sh->first_use[vf[k].value];
        if (u >= 0 && u < first) first = u;
        if (vf[k].sample < 0) { every = 1; continue; }
        marked += !dx->bmark[vf[k].sample / sh->batch];
        dx->bmark[vf[k].sample / sh->batch] = 1;
    }
    /* written into the views (before the tied table's rows and column read
     * its transpose's), given back by bf__pv_trial_end below whatever happens */
    if (n_w && (st = bf__pv_trial_begin(dx, w, n_w, &last_entry, err)) != BF_OK) goto finish;
    if (tied && !every && n_vf == 0 && n_w <= (size_t)sh->batch) {
        int done;
        if ((st = run_tied(dx, w, n_w, first, last_entry, marked, &done, err)) != BF_OK || done) goto finish;
    }
    if (every || tied) {   /* a tied table's transpose reaches every batch */
        for (int64_t b = 0; b < sh->n_batches; b++) dx->bmark[b] = 1;
        marked = sh->n_batches;
        every = 1;
    }
    if (st == BF_OK && full_pass_cheaper(dx, n_w, vf, n_vf, first, every, marked)) {
        /* nothing run: the caller runs the pass, which --stats counts as
         * every step of every batch re-run */
        *full = 1;
        dx->n_full++;
        for (size_t i = 0; i < sh->n_steps; i++) dx->work[i] += (double)bf__gcache_batches(sh->gc);
        marked = 0;
        for (int64_t b = 0; b < sh->n_batches; b++) dx->bmark[b] = 0;
    }
    /* row mode only for faults that reach some rows of a batch: embedding
     * rows and transient value faults */
    int rowable = dx->n_sub > 0 && !every && marked > 0;
    if (rowable && st == BF_OK) st = bf__rows_params(dx, w, n_w, err);
    /* the reached samples of every batch in one row-mode run, or batch by batch */
    int all = 0;
    if (rowable && st == BF_OK) st = bf__rows_all(dx, w, n_w, vf, n_vf, first, last_entry, vf_old, vf_new, &all, err);
    if (st == BF_OK && !all) bf__out_begin(dx, n_vf, rowable);
    for (int64_t b = 0; b < sh->n_batches && st == BF_OK && !all; b++) {
        if (!dx->bmark[b]) continue;
        int done = 0;
        if (rowable) st = bf__rows_batch(dx, b, w, n_w, vf, n_vf, first, last_entry, vf_old, vf_new, &done, err);
        if (st == BF_OK && !done) st = run_batch(dx, b, vf, n_vf, first, last_entry, vf_old, vf_new, err);
    }
    if (st == BF_OK) bf__out_flush(dx);
    bf__out_off(dx);
finish:

    for (int64_t b = 0; b < sh->n_batches; b++) dx->bmark[b] = 0;
    bf__pv_trial_end(dx);
    for (size_t i = 0; i < n_w; i++) {
        size_t q = w[i].param;
        if (!dx->pfaults[q]) continue;   /* its tensor done already */
        dx->pfaults[q] = 0;
        for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) dx->param_hit[sh->pc_step[t]] = 0;
        /* the row-mode plans read the faulty parameter from plan[0] for this
         * trial only (bf__rows_params): the model's tensor again after it,
         * not plan[0]'s view of the weights arena (exec/plan.c) */
        int v = sh->m->param_vals[q];
        for (int k = 0; k < dx->n_sub; k++)
            if (dx->sub[k])
                dx->sub[k]->vals[v].data = bf__plan_param_is_golden(dx->plan[0], q)
                                               ? bf_model_param(sh->m, q)->tensor->data
                                               : dx->plan[0]->vals[v].data;
    }
    for (int t = 0; t < 2; t++)
        for (size_t v = 0; dx->plan[t] && v < sh->m->n_values; v++)
            if (bf__runtime(dx->plan[t], (int)v)) dx->plan[t]->vals[v].data = dx->arena[t][v];
    *outputs = dx->out;
    *rows = dx->rows;
    *n_rows = dx->n_rows;
    return st;
}
