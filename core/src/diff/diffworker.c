/* A differential worker (diff.h, bf__dx): its state made for a shared
 * golden pass and an evaluator, and freed; its counts for --stats. Its
 * trials run in diffexec.c. Split from diffexec.c (one file, one job). */
#include <string.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "diff/diff_impl.h"
#include "exec/ops/sgemm.h"

void bf__dx_free(bf__dx *dx)
{
    if (!dx) return;
    bf__rows_free(dx);
    bf__out_free(dx);
    bf__chain_free(dx);
    bf__pv_free(dx);
    bf__plane_free(dx);
    bf__pos_free(dx);
    bf__free(dx->state);
    bf__free(dx->param_hit);
    bf__free(dx->step_mark);
    bf__free(dx->fdone);
    bf__free(dx->dch);
    bf__free(dx->dlazy);
    bf__free(dx->dsrc);
    bf__free(dx->pfaults);
    bf__free(dx->pfault);
    bf__free(dx->bmark);
    bf__free(dx->touched);
    bf__free(dx->work);
    bf__free(dx->psum_skip);
    bf__free(dx->out);
    bf__free(dx->rows);
    bf__free(dx->orow);
    bf__free(dx->rowbuf);
    bf__free(dx->bc);
    bf__dx_arena_free(dx);
    bf__free(dx->scratch);
    bf__free(dx->vfb);
    bf__free(dx->vfb_of);
    bf__free(dx);
}

bf_status bf__dx_create(const bf__dx_shared *sh, bf_evaluator *ev, bf__dx **out, bf_error *err)
{
    const bf_model *m = sh->m;
    bf__dx *dx = bf__calloc(1, sizeof *dx);
    *out = NULL;
    if (!dx) return bf__dx_oom(err);
    dx->sh = sh;
    dx->ev = ev;
    dx->simd = bf__sgemm_simd();
    dx->no_approx = 1;   /* exact unless bf__dx_near_exact */
    dx->plan[0] = bf__evaluator_plan(ev, 0);
    dx->plan[1] = bf__evaluator_plan(ev, 1);
    size_t n_out = (size_t)(sh->samples * sh->out_cols);
    dx->state = bf__calloc(m->n_values + 1, 1);
    dx->param_hit = bf__calloc(sh->n_steps + 1, 1);
    dx->step_mark = bf__calloc(sh->n_steps + 2, 1);
    dx->fdone = bf__calloc(sh->n_steps + 1, 1);
    dx->dch = bf__calloc(m->n_values + 1, sizeof *dx->dch);
    dx->dlazy = bf__calloc(m->n_values + 1, 1);
    dx->dsrc = bf__calloc(m->n_values + 1, sizeof *dx->dsrc);
    dx->pfaults = bf__calloc(m->n_params + 1, sizeof *dx->pfaults);
    dx->pfault = bf__calloc(m->n_params + 1, sizeof *dx->pfault);
    dx->bmark = bf__calloc((size_t)sh->n_batches + 1, 1);
    /* twice: a tied table's trial lists row mode's batches, then every batch (run_tied) */
    dx->touched = bf__malloc((2 * (size_t)sh->n_batches + 1) * sizeof *dx->touched);
    /* written whole just below, and again by every trial (warena.h) */
    dx->out = bf__alloc_written(n_out * sizeof(float), BF__WRITE_NOW | BF__WRITE_AGAIN);
    dx->rows = bf__malloc(((size_t)sh->samples + 1) * sizeof *dx->rows);
    dx->orow = bf__malloc(((size_t)sh->batch + 1) * sizeof *dx->orow);
    dx->scratch = bf__aligned_alloc(2 * sh->scratch_floats * sizeof(float) + 64);
    dx->work = bf__calloc(sh->n_steps + 1, sizeof *dx->work);
    dx->psum_skip = bf__calloc(sh->n_steps + 1, sizeof *dx->psum_skip);
    dx->rowbuf = bf__malloc(((size_t)sh->max_m + 1) * sizeof *dx->rowbuf);
    dx->bc = bf__malloc(((size_t)(RANK_MAX_COLS + 1) * (size_t)sh->max_n + 1) * sizeof *dx->bc);
    for (int t = 0; t < 2; t++) {
        dx->arena[t] = bf__calloc(m->n_values + 1, sizeof(void *));
        if (!dx->arena[t]) { bf__dx_free(dx); return bf__dx_oom(err); }
        for (size_t v = 0; dx->plan[t] && v < m->n_values; v++) dx->arena[t][v] = dx->plan[t]->vals[v].data;
    }
    if (!dx->state || !dx->param_hit || !dx->step_mark || !dx->fdone || !dx->dch || !dx->dlazy || !dx->dsrc || !dx->pfaults ||
        !dx->pfault || !dx->bmark || !dx->touched || !dx->out || !dx->rows || !dx->orow || !dx->rowbuf || !dx->bc || !dx->scratch || !dx->work || !dx->psum_skip) {
        bf__dx_free(dx);
        return bf__dx_oom(err);
    }
    memcpy(dx->out, sh->golden, n_out * sizeof(float));
    bf_status st = bf__dx_arena_init(dx, err);
    if (st == BF_OK) st = bf__rows_init(dx, err);
    if (st == BF_OK) st = bf__chain_init(dx, err);
    if (st == BF_OK) st = bf__pv_init(dx, err);
    if (st == BF_OK) st = bf__out_init(dx, err);
    if (st != BF_OK) {
        bf__dx_free(dx);
        return st;
    }
    *out = dx;
    return BF_OK;
}


int64_t bf__dx_full_passes(const bf__dx *dx) { return dx->n_full; }
size_t bf__dx_pv_copy_bytes(const bf__dx *dx) { return dx->pv.copy_bytes; }
int64_t bf__dx_fused_runs(const bf__dx *dx) { return dx->n_fused; }
int64_t bf__dx_chan_steps(const bf__dx *dx) { return dx->n_chan; }
int64_t bf__dx_out_batched(const bf__dx *dx) { return bf__out_batched(dx); }
int64_t bf__dx_out_in_place(const bf__dx *dx, int chan) { return dx->n_in_place[chan != 0]; }
void bf__dx_chan_kinds(const bf__dx *dx, int64_t kinds[5]) { memcpy(kinds, dx->n_chan_kind, sizeof dx->n_chan_kind); }

void bf__dx_no_full_pass(bf__dx *dx) { dx->no_full = 1; }

void bf__dx_near_exact(bf__dx *dx)
{
    dx->near_exact = 1;
    dx->no_approx = 0;
}
