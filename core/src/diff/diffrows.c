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
 * (diffexec.c).
 *
 * This file runs a batch's or a trial's reached rows; diffrows_step.c runs
 * one step on rows, diffrows_check.c makes and checks the sub-plans
 * (diffrows_impl.h). */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "diff/diffrows_impl.h"

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

/* The rows of batch b the faults reach, into out (ascending, as samples
 * of the eval set); -1 when some fault reaches every row. */
static int reached_rows(bf__dx *dx, int64_t b, const bf__dx_weight *w, size_t n_w, const bf_value_fault *vf,
                        size_t n_vf, int64_t *out)
{
    const bf__dx_shared *sh = dx->sh;
    bf_plan *full = dx->plan[0];
    int64_t start = b * sh->batch, rows = bf__rows_of(sh, b);
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
        if (!bf__rows_same_in_sub(dx, sp, v)) return BF_OK;   /* shaped by the batch: the batch runs whole */
        if (bf__rows_pv_point(dx, sp, v)) dx->sstate[v] = DIRTY;
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
        if (dx->sstate[v] == UNLOADED && !bf__rows_gather(dx, sp, v, sel, r, err, &st)) return st;
        dx->sstate[v] = GOLDEN;
    }
    horizon = bf__dx_hit_values(dx, sp, nb, dx->sstate, horizon);
    if (sd.v >= 0) {   /* the seeded value's rows, the padding a copy of the first */
        bf_tensor *t = &sp->vals[sd.v];
        size_t rb = bf_tensor_nbytes(t) / (size_t)r;
        for (int i = 0; i < r; i++) bf__rows_copy((char *)t->data + (size_t)i * rb, (const char *)sd.vals + (size_t)(i < n ? i : 0) * rb, rb);
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
        if (!bf__rows_concat(dx, sp, (size_t)i, sel, r, err, &st)) {
            if (st != BF_OK) return st;
            for (int j = 0; j < s->n_in; j++) {
                int u = s->node->in[j];
                if (!bf__runtime(sp, u) || dx->sstate[u] != UNLOADED) continue;
                if (!bf__rows_gather(dx, sp, u, sel, r, err, &st)) return st;
                dx->sstate[u] = GOLDEN;
            }
            if ((st = bf__rows_run(dx, sp, b, sel, (size_t)i, err)) != BF_OK) return st;
        }
        if (sp->step_hit[i]) bf__plan_apply_value_faults(sp, i);
        for (int j = 0; j < s->n_out; j++) {
            int o = s->node->out[j];
            if (o < 0) continue;
            dx->sstate[o] = stays_dirty(dx, s, (size_t)i) || !bf__rows_golden(dx, sp, o, sel, n) ? DIRTY : GOLDEN;
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
        if (bf__rows_same(o + t * sh->out_cols, sh->golden + row * sh->out_cols, rb)) continue;
        bf__rows_copy(dx->out + row * sh->out_cols, o + t * sh->out_cols, rb);
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
    bf_status st = bf__rows_ensure(dx, w, n_w, err);
    if (st != BF_OK) return st;
    for (int k = 0; k < dx->n_sub; k++) {
        if (!dx->rows_from[(size_t)k * sh->m->n_values + (size_t)v]) return BF_OK;
        if (bf__rows_axis(dx->plan[0], dx->sub[k], v) != 0) return BF_OK;
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
