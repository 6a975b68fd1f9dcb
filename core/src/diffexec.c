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
 * bit for bit; only the Gemm rank-k update (diffgemm.c) rounds differently,
 * and only where the change is clear.
 *
 * Inputs of a step that the trial has not touched are read from the golden
 * cache, or recomputed from the nearest cached ancestor when the cache's
 * budget left them out. */
#include <math.h>
#include <string.h>

#include "alloc.h"
#include "diff.h"

#define RANK_MAX_COLS 8        /* a rank-k update beyond this runs the product */

enum { UNLOADED = 0, GOLDEN, DIRTY };

typedef struct emb_index {     /* an embedding table: row -> the batches reading it */
    int64_t rows, row_elems;
    int64_t *off;              /* rows + 1 */
    int32_t *batch;
} emb_index;

struct bf__dx_shared {
    const bf_model *m;
    bf__gcache *gc;
    int64_t samples, batch, n_batches, out_cols;
    const float *golden;
    int out_val;
    size_t n_steps;
    int *first_use, *last_use;   /* per value: first and last step reading it; -1 none */
    int *pc_off, *pc_step;       /* per parameter: the steps reading it */
    emb_index *emb;              /* per parameter; rows 0 when not an embedding table */
    int *colw[2];                /* per step, full and tail plan: Gemm column block, 0 none */
    int *roww[2];                /* per step, full and tail plan: Gemm row chunk, 0 none */
    size_t scratch_floats;
    int max_n;                   /* widest Gemm output */
};

struct bf__dx {
    const bf__dx_shared *sh;
    bf_plan *plan[2];
    bf_evaluator *ev;
    unsigned char *state;        /* per value, in the batch at hand */
    unsigned char *param_hit;    /* per step: reads a faulty parameter in this trial */
    unsigned char *step_mark;    /* per step + 1: scratch */
    int *pfaults;                /* per parameter: faults in this trial */
    const bf__dx_weight **pfault;
    unsigned char *bmark;        /* per batch: reached by this trial */
    int64_t *touched;            /* batches whose output rows differ from golden */
    int64_t n_touched;
    int64_t *rows;               /* samples whose outputs differ from golden */
    int64_t n_rows;
    float *out;
    float *scratch;
    int cols[RANK_MAX_COLS];
    int *rowbuf;                 /* a batch's worth of row indices */
    double *bc;                  /* rank-k update scratch */
    void **arena[2];             /* per plan and value: its own buffer (data may point into the cache) */
    int approx;                  /* the batch at hand took a rank-k update */
    int no_approx;               /* ... and is being redone without */
    bf_value_fault *vfb;         /* value faults of the batch at hand */
    size_t *vfb_of, vfb_cap;
};

/* --- shared */

void bf__dx_shared_free(bf__dx_shared *sh)
{
    if (!sh) return;
    bf__gcache_free(sh->gc);
    bf__free(sh->first_use);
    bf__free(sh->last_use);
    bf__free(sh->pc_off);
    bf__free(sh->pc_step);
    for (size_t p = 0; sh->emb && p < sh->m->n_params; p++) {
        bf__free(sh->emb[p].off);
        bf__free(sh->emb[p].batch);
    }
    bf__free(sh->emb);
    for (int t = 0; t < 2; t++) {
        bf__free(sh->colw[t]);
        bf__free(sh->roww[t]);
    }
    bf__free(sh);
}

size_t bf__dx_shared_cache_bytes(const bf__dx_shared *sh) { return bf__gcache_bytes(sh->gc); }

static bf_status oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory for the differential executor"); }

/* Which steps read which values and parameters. */
static bf_status use_lists(bf__dx_shared *sh, const bf_plan *p, bf_error *err)
{
    const bf_model *m = sh->m;
    size_t n_links = 0;
    sh->first_use = bf__malloc((m->n_values + 1) * sizeof(int));
    sh->last_use = bf__malloc((m->n_values + 1) * sizeof(int));
    sh->pc_off = bf__calloc(m->n_params + 2, sizeof(int));
    if (!sh->first_use || !sh->last_use || !sh->pc_off) return oom(err);
    for (size_t v = 0; v < m->n_values; v++) sh->first_use[v] = sh->last_use[v] = -1;
    for (size_t i = 0; i < p->n_steps; i++)
        for (int j = 0; j < p->steps[i].n_in; j++) {
            int v = p->steps[i].node->in[j];
            if (v < 0) continue;
            if (sh->first_use[v] < 0) sh->first_use[v] = (int)i;
            sh->last_use[v] = (int)i;
            if (m->values[v].kind == BF__VAL_PARAM) sh->pc_off[m->values[v].index + 1]++, n_links++;
        }
    for (size_t q = 0; q < m->n_params; q++) sh->pc_off[q + 1] += sh->pc_off[q];
    sh->pc_step = bf__malloc((n_links + 1) * sizeof(int));
    int *fill = bf__calloc(m->n_params + 1, sizeof(int));
    if (!sh->pc_step || !fill) { bf__free(fill); return oom(err); }
    for (size_t i = 0; i < p->n_steps; i++)
        for (int j = 0; j < p->steps[i].n_in; j++) {
            int v = p->steps[i].node->in[j];
            if (v < 0 || m->values[v].kind != BF__VAL_PARAM) continue;
            int64_t q = m->values[v].index;
            sh->pc_step[sh->pc_off[q] + fill[q]++] = (int)i;
        }
    bf__free(fill);
    return BF_OK;
}

/* A parameter every reader of which is a Gather on axis 0 with run-time
 * indices: an embedding table, whose row r reaches only the samples that
 * look r up. Its index values must be cached (marked in `must`). */
static int embedding_param(const bf__dx_shared *sh, const bf_plan *p, size_t q, unsigned char *must)
{
    int vq = sh->m->param_vals[q];
    if (sh->pc_off[q] == sh->pc_off[q + 1]) return 0;
    for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) {
        const bf__step *s = &p->steps[sh->pc_step[t]];
        if (bf__gather_axis(s) != 0 || s->node->in[0] != vq || s->node->in[1] == vq) return 0;
        int iv = s->node->in[1];
        if (p->val_step[iv] == BF__VAL_NOT_RUN) return 0;
    }
    if (must)
        for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) must[p->steps[sh->pc_step[t]].node->in[1]] = 1;
    return 1;
}

static int64_t index_at(const bf_tensor *t, const void *data, int64_t i)
{
    return t->dtype == BF_I32 ? ((const int32_t *)data)[i] : ((const int64_t *)data)[i];
}

/* Row -> batches for embedding table q, from the cached indices. */
static bf_status build_emb(bf__dx_shared *sh, bf_plan *plan[2], size_t q, bf_error *err)
{
    emb_index *e = &sh->emb[q];
    const bf_tensor *w = bf_model_param(sh->m, q)->tensor;
    e->rows = w->dims[0];
    e->row_elems = e->rows ? bf_tensor_numel(w) / e->rows : 0;
    e->off = bf__calloc((size_t)e->rows + 2, sizeof *e->off);
    if (!e->off) return oom(err);
    /* two sweeps: count (row, batch) pairs, then fill; a batch is listed once per row */
    int32_t *last = bf__malloc(((size_t)e->rows + 1) * sizeof *last);
    if (!last) return oom(err);
    for (int sweep = 0; sweep < 2; sweep++) {
        for (int64_t r = 0; r < e->rows; r++) last[r] = -1;
        int64_t *fill = sweep ? bf__calloc((size_t)e->rows + 1, sizeof *fill) : NULL;
        if (sweep && !fill) { bf__free(last); return oom(err); }
        for (int64_t b = 0; b < sh->n_batches; b++) {
            bf_plan *p = plan[b == sh->samples / sh->batch];
            for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) {
                int iv = p->steps[sh->pc_step[t]].node->in[1];
                const bf_tensor *it = &p->vals[iv];
                const void *idx = bf__gcache_block(sh->gc, iv, b);
                for (int64_t i = 0, n = bf_tensor_numel(it); idx && i < n; i++) {
                    int64_t r = index_at(it, idx, i);
                    if (r < 0) r += e->rows;
                    if (r < 0 || r >= e->rows || last[r] == (int32_t)b) continue;
                    last[r] = (int32_t)b;
                    if (sweep) e->batch[e->off[r] + fill[r]++] = (int32_t)b;
                    else e->off[r + 1]++;
                }
            }
        }
        if (!sweep) {
            for (int64_t r = 0; r < e->rows; r++) e->off[r + 1] += e->off[r];
            e->batch = bf__malloc(((size_t)e->off[e->rows] + 1) * sizeof *e->batch);
            if (!e->batch) { bf__free(last); return oom(err); }
        }
        bf__free(fill);
    }
    bf__free(last);
    return BF_OK;
}

/* Each Gemm's narrowest exact column block, found on the golden pass. */
static bf_status gemm_widths(bf__dx_shared *sh, bf_evaluator *ev, bf_plan *plan[2], bf_error *err)
{
    const bf_model *m = sh->m;
    for (int t = 0; t < 2; t++) {
        sh->colw[t] = bf__calloc(sh->n_steps + 1, sizeof(int));
        sh->roww[t] = bf__calloc(sh->n_steps + 1, sizeof(int));
        if (!sh->colw[t] || !sh->roww[t]) return oom(err);
    }
    float *scratch = bf__malloc(2 * sh->scratch_floats * sizeof(float) + 64);
    int *rows = bf__malloc(((size_t)sh->batch + 1) * sizeof *rows);
    if (!scratch || !rows) {
        bf__free(scratch);
        bf__free(rows);
        return oom(err);
    }
    for (int t = 0; t < 2; t++) {
        bf_plan *p = plan[t];
        if (!p) continue;
        int64_t b = t ? sh->n_batches - 1 : 0;
        for (size_t i = 0; i < p->n_steps; i++) {
            bf__gemm_info g;
            const bf__step *s = &p->steps[i];
            if (!bf__gemm_params(s, &g) || g.trans_a) continue;
            int av = s->node->in[0], yv = s->node->out[0];
            int bv = s->node->in[1], cv = s->n_in > 2 ? s->node->in[2] : -1;
            if (m->values[bv].kind != BF__VAL_PARAM) continue;
            if (cv >= 0 && p->val_step[cv] != BF__VAL_NOT_RUN) continue;   /* C computed at run time */
            const void *a = bf__gcache_block(sh->gc, av, b), *y = bf__gcache_block(sh->gc, yv, b);
            if (!a && p->val_step[av] == -1) {   /* a graph input: from the dataset */
                size_t in = (size_t)m->values[av].index;
                bf_status st = bf_dataset_copy_rows(bf__evaluator_feed(ev, in), b * sh->batch, bf_plan_batch(p), &p->vals[av], err);
                if (st != BF_OK) {
                    bf__free(scratch);
                    bf__free(rows);
                    return st;
                }
                a = p->vals[av].data;
            }
            if (!a || !y) continue;
            const float *c = cv >= 0 ? p->vals[cv].data : NULL;
            if (g.n > sh->max_n) sh->max_n = g.n;
            sh->colw[t][i] = bf__gemm_col_width(&g, a, p->vals[bv].data, c, y, scratch);
            sh->roww[t][i] = bf__gemm_row_width(&g, a, p->vals[bv].data, c, y, scratch, rows);
        }
    }
    bf__free(scratch);
    bf__free(rows);
    return BF_OK;
}

bf_status bf__dx_shared_create(bf_evaluator *ev, int64_t samples, const float *golden, int64_t out_cols, size_t budget,
                               bf__dx_shared **out, bf_error *err)
{
    bf_plan *plan[2] = {bf__evaluator_plan(ev, 0), bf__evaluator_plan(ev, 1)};
    const bf_model *m = bf_plan_model(plan[0]);
    bf_status st;
    unsigned char *must = NULL;
    const bf_tensor **feeds = NULL;
    bf__dx_shared *sh = bf__calloc(1, sizeof *sh);
    *out = NULL;
    if (!sh) return oom(err);
    sh->m = m;
    sh->samples = samples;
    sh->batch = bf_plan_batch(plan[0]);
    sh->n_batches = (samples + sh->batch - 1) / sh->batch;
    sh->golden = golden;
    sh->out_cols = out_cols;
    sh->out_val = m->output_vals[0];
    sh->n_steps = plan[0]->n_steps;
    for (size_t v = 0; v < m->n_values; v++)
        if (plan[0]->val_step[v] >= 0) {
            size_t n = (size_t)bf_tensor_numel(&plan[0]->vals[v]);
            if (n > sh->scratch_floats) sh->scratch_floats = n;
        }
    must = bf__calloc(m->n_values + 1, 1);
    feeds = bf__calloc(m->n_inputs + 1, sizeof *feeds);
    sh->emb = bf__calloc(m->n_params + 1, sizeof *sh->emb);
    if (!must || !feeds || !sh->emb) { st = oom(err); goto out; }
    if ((st = use_lists(sh, plan[0], err)) != BF_OK) goto out;
    /* Outputs of multi-output steps are cached whatever the budget: a
     * recomputation would overwrite its siblings, which may hold a fault. */
    for (size_t i = 0; i < plan[0]->n_steps; i++)
        if (plan[0]->steps[i].n_out > 1)
            for (int j = 0; j < plan[0]->steps[i].n_out; j++)
                if (plan[0]->steps[i].node->out[j] >= 0) must[plan[0]->steps[i].node->out[j]] = 1;
    for (size_t q = 0; q < m->n_params; q++) embedding_param(sh, plan[0], q, must);
    for (size_t i = 0; i < m->n_inputs; i++) feeds[i] = bf__evaluator_feed(ev, i);
    if ((st = bf__gcache_build(plan[0], plan[1], feeds, samples, budget, must, &sh->gc, err)) != BF_OK) goto out;
    for (size_t q = 0; q < m->n_params; q++)
        if (embedding_param(sh, plan[0], q, NULL) && (st = build_emb(sh, plan, q, err)) != BF_OK) goto out;
    if ((st = gemm_widths(sh, ev, plan, err)) != BF_OK) goto out;
    *out = sh;
    sh = NULL;
out:
    bf__free(must);
    bf__free(feeds);
    bf__dx_shared_free(sh);
    return st;
}

/* --- per worker */

void bf__dx_free(bf__dx *dx)
{
    if (!dx) return;
    bf__free(dx->state);
    bf__free(dx->param_hit);
    bf__free(dx->step_mark);
    bf__free(dx->pfaults);
    bf__free(dx->pfault);
    bf__free(dx->bmark);
    bf__free(dx->touched);
    bf__free(dx->out);
    bf__free(dx->rows);
    bf__free(dx->rowbuf);
    bf__free(dx->bc);
    bf__free(dx->arena[0]);
    bf__free(dx->arena[1]);
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
    if (!dx) return oom(err);
    dx->sh = sh;
    dx->ev = ev;
    dx->plan[0] = bf__evaluator_plan(ev, 0);
    dx->plan[1] = bf__evaluator_plan(ev, 1);
    size_t n_out = (size_t)(sh->samples * sh->out_cols);
    dx->state = bf__calloc(m->n_values + 1, 1);
    dx->param_hit = bf__calloc(sh->n_steps + 1, 1);
    dx->step_mark = bf__calloc(sh->n_steps + 2, 1);
    dx->pfaults = bf__calloc(m->n_params + 1, sizeof *dx->pfaults);
    dx->pfault = bf__calloc(m->n_params + 1, sizeof *dx->pfault);
    dx->bmark = bf__calloc((size_t)sh->n_batches + 1, 1);
    dx->touched = bf__malloc(((size_t)sh->n_batches + 1) * sizeof *dx->touched);
    dx->out = bf__malloc(n_out * sizeof(float) + 1);
    dx->rows = bf__malloc(((size_t)sh->samples + 1) * sizeof *dx->rows);
    dx->scratch = bf__aligned_alloc(2 * sh->scratch_floats * sizeof(float) + 64);
    dx->rowbuf = bf__malloc(((size_t)sh->batch + 1) * sizeof *dx->rowbuf);
    dx->bc = bf__malloc(((size_t)(RANK_MAX_COLS + 1) * (size_t)sh->max_n + 1) * sizeof *dx->bc);
    for (int t = 0; t < 2; t++) {
        dx->arena[t] = bf__calloc(m->n_values + 1, sizeof(void *));
        if (!dx->arena[t]) { bf__dx_free(dx); return oom(err); }
        for (size_t v = 0; dx->plan[t] && v < m->n_values; v++) dx->arena[t][v] = dx->plan[t]->vals[v].data;
    }
    if (!dx->state || !dx->param_hit || !dx->step_mark || !dx->pfaults || !dx->pfault || !dx->bmark ||
        !dx->touched || !dx->out || !dx->rows || !dx->rowbuf || !dx->bc || !dx->scratch) {
        bf__dx_free(dx);
        return oom(err);
    }
    memcpy(dx->out, sh->golden, n_out * sizeof(float));
    *out = dx;
    return BF_OK;
}

/* --- a batch */

static int runtime(const bf_plan *p, int v) { return v >= 0 && p->val_step[v] != BF__VAL_NOT_RUN; }

/* Puts value v's golden tensor of batch b into the plan: from the dataset,
 * the cache, or by running its producer on golden inputs. */
/* Golden values are read in place from the cache: a value's data pointer
 * is set to its cache block, and back to the plan's own buffer before a
 * step writes it (own) or a fault changes it (writable). */
static void own(bf__dx *dx, bf_plan *p, int v)
{
    p->vals[v].data = dx->arena[p == dx->plan[1]][v];
}

static void own_outputs(bf__dx *dx, bf_plan *p, size_t i)
{
    const bf__step *s = &p->steps[i];
    for (int j = 0; j < s->n_out; j++)
        if (s->node->out[j] >= 0) own(dx, p, s->node->out[j]);
}

/* Puts value v's golden tensor of batch b into the plan: from the dataset,
 * the cache, or by running its producer on golden inputs. */
static bf_status fetch(bf__dx *dx, bf_plan *p, int64_t b, int v, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    if (dx->state[v] != UNLOADED) return BF_OK;
    bf_tensor *t = &p->vals[v];
    int s = p->val_step[v];
    bf_status st = BF_OK;
    const void *blk = s >= 0 ? bf__gcache_block(sh->gc, v, b) : NULL;
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
        const bf__step *ps = &p->steps[s];
        for (int j = 0; j < ps->n_in && st == BF_OK; j++)
            if (runtime(p, ps->node->in[j])) st = fetch(dx, p, b, ps->node->in[j], err);
        own_outputs(dx, p, (size_t)s);
        if (st == BF_OK) st = bf__plan_run_step(p, (size_t)s, err);
        for (int j = 0; j < ps->n_out && st == BF_OK; j++)
            if (ps->node->out[j] >= 0) dx->state[ps->node->out[j]] = GOLDEN;
    }
    if (st == BF_OK) dx->state[v] = GOLDEN;
    return st;
}

/* fetch, into the plan's own buffer (to be changed in place). */
static bf_status fetch_writable(bf__dx *dx, bf_plan *p, int64_t b, int v, bf_error *err)
{
    bf_status st = fetch(dx, p, b, v, err);
    void *mine = dx->arena[p == dx->plan[1]][v];
    if (st == BF_OK && p->vals[v].data != mine) {
        memcpy(mine, p->vals[v].data, bf_tensor_nbytes(&p->vals[v]));
        p->vals[v].data = mine;
    }
    return st;
}

static int differs(const bf__dx *dx, const bf_plan *p, int64_t b, int v)
{
    const void *g = bf__gcache_block(dx->sh->gc, v, b);
    return !g || memcmp(p->vals[v].data, g, bf_tensor_nbytes(&p->vals[v])) != 0;
}

/* The step's output starts as the golden one, whatever an earlier fault
 * left in it (a value fault on it is applied again after the step). */
static void golden_output(bf__dx *dx, bf_plan *p, int yv, const float *yg)
{
    own(dx, p, yv);
    memcpy(p->vals[yv].data, yg, bf_tensor_nbytes(&p->vals[yv]));
}

/* A corrupted B[k][j] (k >= 0) or C[j] (k < 0) moves column j of y by
 * A[:, k] alpha dB, or beta dC: applied if every row that moves moves
 * clearly (see diffgemm.c), else left for the exact column block (y may be
 * partly written then). */
static int column_delta(const bf__gemm_info *g, const float *a, int k, const bf__dx_weight *w, int j, float *y)
{
    if (!isfinite(w->new_value) || !isfinite(w->old_value)) return 0;
    double dw = (double)w->new_value - (double)w->old_value;
    for (int i = 0; i < g->m; i++) {
        double d = k >= 0 ? (double)a[(int64_t)i * g->k + k] * g->alpha * dw : (double)g->beta * dw;
        if (d == 0) continue;   /* a zero input: the product adds exactly nothing either way */
        float *e = &y[(int64_t)i * g->n + j];
        if (!isfinite(*e) || !(*e == 0 || fabs(d) >= CLEAR_CHANGE * fabs(*e))) return 0;
        if (fabs(d) > HUGE_CHANGE * fmax(1.0, fabs(*e))) return 0;
        float v = (float)((double)*e + d);
        if (!isfinite(v)) return 0;
        *e = v;
    }
    return 1;
}

/* A Conv with one corrupted weight or bias element and golden input: the
 * moved output channel as an update. */
static bf_status try_conv(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    const bf__step *s = &p->steps[i];
    *done = 0;
    if (dx->no_approx || s->n_in < 2) return BF_OK;
    int xv = s->node->in[0], yv = s->node->out[0], slot = 0, n = 0;
    for (int j = 1; j < s->n_in && j < 3; j++) {
        int v = s->node->in[j];
        if (v < 0 || m->values[v].kind != BF__VAL_PARAM) continue;
        int k = dx->pfaults[m->values[v].index];
        if (k) n += k, slot = j;
    }
    const float *yg = bf__gcache_block(sh->gc, yv, b);
    if (n != 1 || dx->state[xv] == DIRTY || !yg) return BF_OK;
    const bf__dx_weight *w = dx->pfault[m->values[s->node->in[slot]].index];
    bf_status st = fetch(dx, p, b, xv, err);
    if (st != BF_OK) return st;
    golden_output(dx, p, yv, yg);
    int r = bf__conv_delta(s, slot, p->vals[xv].data, w->index, w->old_value, w->new_value, p->vals[yv].data);
    if (r == 1) *done = dx->approx = 1;
    return BF_OK;
}

/* The cheaper Gemm forms; returns 1 if one computed the output. */
static bf_status try_gemm(bf__dx *dx, bf_plan *p, int tail, int64_t b, size_t i, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    const bf__step *s = &p->steps[i];
    bf__gemm_info g;
    *done = 0;
    if (!sh->colw[tail][i] || !bf__gemm_params(s, &g)) return BF_OK;
    int av = s->node->in[0], bv = s->node->in[1], cv = s->n_in > 2 ? s->node->in[2] : -1, yv = s->node->out[0];
    const float *yg = bf__gcache_block(sh->gc, yv, b);
    size_t qb = (size_t)m->values[bv].index;
    int nb = dx->pfaults[qb], nc = cv >= 0 && m->values[cv].kind == BF__VAL_PARAM ? dx->pfaults[m->values[cv].index] : 0;
    const float *c = cv >= 0 ? p->vals[cv].data : NULL;
    bf_status st;
    if (dx->state[av] != DIRTY && nb + nc == 1) {
        /* one corrupted element of B or C: one output column */
        const bf__dx_weight *w = dx->pfault[nb ? qb : (size_t)m->values[cv].index];
        int j;
        if (nb) j = (int)(g.trans_b ? w->index / g.k : w->index % g.n);
        else if (g.c_cs && !g.c_rs) j = (int)w->index;
        else return BF_OK;
        if ((st = fetch(dx, p, b, av, err)) != BF_OK) return st;
        golden_output(dx, p, yv, yg);
        int k = nb ? (int)(g.trans_b ? w->index % g.k : w->index / g.n) : -1;
        if (!dx->no_approx && column_delta(&g, p->vals[av].data, k, w, j, p->vals[yv].data)) {
            dx->approx = 1;
        } else {
            memcpy(p->vals[yv].data, yg, bf_tensor_nbytes(&p->vals[yv]));
            bf__gemm_column(&g, sh->colw[tail][i], p->vals[av].data, p->vals[bv].data, c, j, p->vals[yv].data, dx->scratch);
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

/* Every output element within a few ulps of the golden one. */
#define TINY_CHANGE 0x1p-18
static int tiny_change(const bf__dx *dx, const bf_plan *p, int64_t b)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_tensor *t = &p->vals[sh->out_val];
    const float *o = t->data, *g = sh->golden + b * sh->batch * sh->out_cols;
    for (int64_t i = 0, n = bf_tensor_numel(t); i < n; i++) {
        if (memcmp(&o[i], &g[i], sizeof *o) == 0) continue;
        if (!isfinite(o[i]) || !isfinite(g[i]) || fabsf(o[i] - g[i]) > TINY_CHANGE * fabsf(g[i])) return 0;
    }
    return 1;
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
    dx->approx = 0;

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
        for (size_t k = 0; k < nb; k++) {
            int s = p->vf[k].step;
            if (dx->step_mark[s + 1]) continue;
            dx->step_mark[s + 1] = 1;
            bf__plan_apply_value_faults(p, s);
        }
        for (size_t k = 0; k < nb; k++) {
            int v = (int)dx->vfb[k].value;
            dx->step_mark[p->vf[k].step + 1] = 0;
            dx->state[v] = DIRTY;
            if (sh->last_use[v] > horizon) horizon = sh->last_use[v];
        }
    }

    for (int i = first; i >= 0 && i < (int)sh->n_steps && i <= horizon; i++) {
        const bf__step *s = &p->steps[i];
        int needed = dx->param_hit[i];
        for (int j = 0; j < s->n_in && !needed; j++) needed = s->node->in[j] >= 0 && dx->state[s->node->in[j]] == DIRTY;
        if (!needed) continue;
        int done = 0;
        if ((st = try_gemm(dx, p, tail, b, (size_t)i, &done, err)) != BF_OK) return st;
        if (!done && dx->param_hit[i] && (st = try_conv(dx, p, b, (size_t)i, &done, err)) != BF_OK) return st;
        if (!done) {
            for (int j = 0; j < s->n_in; j++)
                if (runtime(p, s->node->in[j]) && (st = fetch(dx, p, b, s->node->in[j], err)) != BF_OK) return st;
            own_outputs(dx, p, (size_t)i);
            if ((st = bf__plan_run_step(p, (size_t)i, err)) != BF_OK) return st;
        }
        if (p->step_hit[i]) bf__plan_apply_value_faults(p, i);
        for (int j = 0; j < s->n_out; j++) {
            int o = s->node->out[j];
            if (o < 0) continue;
            dx->state[o] = differs(dx, p, b, o) ? DIRTY : GOLDEN;
            if (dx->state[o] == DIRTY && sh->last_use[o] > horizon) horizon = sh->last_use[o];
        }
    }
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
    if (dx->state[sh->out_val] == DIRTY) {
        const float *o = p->vals[sh->out_val].data;
        size_t row_bytes = (size_t)sh->out_cols * sizeof(float);
        memcpy(dx->out + start * sh->out_cols, o, (size_t)rows * row_bytes);
        dx->touched[dx->n_touched++] = b;
        for (int64_t r = 0; r < rows; r++)
            if (memcmp(o + r * sh->out_cols, sh->golden + (start + r) * sh->out_cols, row_bytes) != 0)
                dx->rows[dx->n_rows++] = start + r;
    }
    return BF_OK;
}

static bf_status reserve_vf(bf__dx *dx, size_t n, bf_error *err)
{
    if (n <= dx->vfb_cap) return BF_OK;
    bf_value_fault *v = bf__realloc(dx->vfb, n * sizeof *v);
    if (!v) return oom(err);
    dx->vfb = v;
    size_t *o = bf__realloc(dx->vfb_of, n * sizeof *o);
    if (!o) return oom(err);
    dx->vfb_of = o;
    dx->vfb_cap = n;
    return BF_OK;
}

bf_status bf__dx_run(bf__dx *dx, const bf__dx_weight *w, size_t n_w, const bf_value_fault *vf, size_t n_vf,
                     const float **outputs, const int64_t **rows, int64_t *n_rows, float *vf_old, float *vf_new,
                     bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    bf_status st = BF_OK;
    if ((st = reserve_vf(dx, n_vf, err)) != BF_OK) return st;
    /* the last trial's changed rows go back to golden */
    for (int64_t t = 0; t < dx->n_touched; t++) {
        int64_t b = dx->touched[t], rows = b == sh->n_batches - 1 ? sh->samples - b * sh->batch : sh->batch;
        size_t off = (size_t)(b * sh->batch * sh->out_cols);
        memcpy(dx->out + off, sh->golden + off, (size_t)(rows * sh->out_cols) * sizeof(float));
    }
    dx->n_touched = dx->n_rows = 0;
    for (size_t k = 0; vf_old && k < n_vf; k++) vf_old[k] = vf_new[k] = (float)NAN;

    int first = (int)sh->n_steps, last_entry = -1, every = 0;
    for (size_t i = 0; i < n_w; i++) {
        size_t q = w[i].param;
        dx->pfaults[q]++;
        dx->pfault[q] = &w[i];
        for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) {
            int s = sh->pc_step[t];
            dx->param_hit[s] = 1;
            if (s < first) first = s;
            if (s > last_entry) last_entry = s;
        }
        const emb_index *e = &sh->emb[q];
        if (!e->rows) { every = 1; continue; }
        int64_t r = w[i].index / e->row_elems;
        for (int64_t k = e->off[r]; k < e->off[r + 1]; k++)
            dx->bmark[e->batch[k]] = 1;
    }
    for (size_t k = 0; k < n_vf; k++) {
        int u = sh->first_use[vf[k].value];
        if (u >= 0 && u < first) first = u;
        if (vf[k].sample < 0) { every = 1; continue; }
        dx->bmark[vf[k].sample / sh->batch] = 1;
    }
    if (every)
        for (int64_t b = 0; b < sh->n_batches; b++) dx->bmark[b] = 1;
    for (int64_t b = 0; b < sh->n_batches && st == BF_OK; b++)
        if (dx->bmark[b]) st = run_batch(dx, b, vf, n_vf, first, last_entry, vf_old, vf_new, err);

    for (int64_t b = 0; b < sh->n_batches; b++) dx->bmark[b] = 0;
    for (size_t i = 0; i < n_w; i++) {
        size_t q = w[i].param;
        dx->pfaults[q] = 0;
        for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) dx->param_hit[sh->pc_step[t]] = 0;
    }
    for (int t = 0; t < 2; t++)
        for (size_t v = 0; dx->plan[t] && v < sh->m->n_values; v++)
            if (runtime(dx->plan[t], (int)v)) dx->plan[t]->vals[v].data = dx->arena[t][v];
    *outputs = dx->out;
    *rows = dx->rows;
    *n_rows = dx->n_rows;
    return st;
}
