/* The differential executor's per-campaign facts, built once and shared
 * read-only by every worker: the golden cache, which steps read which
 * values and parameters, each embedding table's row -> batch index, and
 * each Gemm's exact column block and row chunk (see diffexec.c). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "diff/diff_impl.h"

void bf__dx_shared_free(bf__dx_shared *sh)
{
    if (!sh) return;
    bf__gcache_free(sh->gc);
    bf__psum_free(sh->ps);
    bf__pvals_free(sh->pv);
    bf__free(sh->first_use);
    bf__free(sh->last_use);
    bf__free(sh->own_chan);
    bf__free(sh->pc_off);
    bf__free(sh->pc_step);
    bf__free(sh->step_cost);
    for (size_t p = 0; sh->emb && p < sh->m->n_params; p++) {
        bf__free(sh->emb[p].row);
        bf__free(sh->emb[p].off);
        bf__free(sh->emb[p].batch);
    }
    bf__free(sh->emb);
    bf__chain_shared_free(sh);
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; sh->colblk[t] && i < sh->n_steps; i++) bf__free(sh->colblk[t][i]);
        bf__free(sh->colblk[t]);
        bf__free(sh->colw[t]);
        bf__free(sh->roww[t]);
    }
    bf__free(sh);
}

size_t bf__dx_shared_cache_bytes(const bf__dx_shared *sh) { return bf__gcache_bytes(sh->gc); }
size_t bf__dx_shared_param_bytes(const bf__dx_shared *sh) { return bf__pvals_bytes(sh->pv); }

bf_status bf__dx_oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory for the differential executor"); }

/* Which steps read which values and parameters. */
static bf_status use_lists(bf__dx_shared *sh, const bf_plan *p, bf_error *err)
{
    const bf_model *m = sh->m;
    size_t n_links = 0;
    sh->first_use = bf__malloc((m->n_values + 1) * sizeof(int));
    sh->last_use = bf__malloc((m->n_values + 1) * sizeof(int));
    sh->pc_off = bf__calloc(m->n_params + 2, sizeof(int));
    sh->own_chan = bf__calloc(m->n_values + 1, 1);
    if (!sh->first_use || !sh->last_use || !sh->pc_off || !sh->own_chan) return bf__dx_oom(err);
    bf__own_chan_all(p, sh->own_chan);
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
    if (!sh->pc_step || !fill) { bf__free(fill); return bf__dx_oom(err); }
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

/* A 2-D Transpose of parameter vq alone (the swap): how GPT-2's logits
 * read its tied token table. */
static int tied_reader(const bf__dx_shared *sh, const bf_plan *p, const bf__step *s, int vq)
{
    const bf_tensor *w = &p->vals[vq];
    return strcmp(s->node->op->name, "Transpose") == 0 && s->n_in == 1 && s->node->in[0] == vq && s->n_out == 1 &&
           s->node->out[0] >= 0 && w->ndim == 2 && w->dims[0] != w->dims[1] &&
           sh->m->values[vq].kind == BF__VAL_PARAM;
}

int bf__dx_lookup_step(const bf__dx_shared *sh, const bf_plan *p, size_t q, int step)
{
    const bf__step *s = &p->steps[step];
    return bf__row_lookup(s) && s->node->in[0] == sh->m->param_vals[q];
}

/* A parameter every reader of which is a Gather on axis 0 or an
 * EmbeddingBag (bf__row_lookup) with run-time indices: an embedding table,
 * whose row r reaches only the samples that look r up. Its index values must
 * be cached (marked in `must`). A tied table (GPT-2's wte, read by its
 * Gather and, through a 2-D Transpose, by the logits) is one too, with
 * *tied 1: its rows reach the samples that look them up, and its transpose
 * every batch (one logit column, diffexec.c). */
static int embedding_param(const bf__dx_shared *sh, const bf_plan *p, size_t q, unsigned char *must, int *tied)
{
    int vq = sh->m->param_vals[q], lookups = 0, tr = 0;
    if (sh->pc_off[q] == sh->pc_off[q + 1]) return 0;
    for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) {
        const bf__step *s = &p->steps[sh->pc_step[t]];
        if (tied_reader(sh, p, s, vq)) {
            tr = 1;
            continue;
        }
        if (!bf__row_lookup(s) || s->node->in[0] != vq || s->node->in[1] == vq) return 0;
        int iv = s->node->in[1];
        if (p->val_step[iv] == BF__VAL_NOT_RUN) return 0;
        lookups++;
    }
    if (!lookups) return 0;
    if (must)
        for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++)
            if (bf__dx_lookup_step(sh, p, q, sh->pc_step[t])) must[p->steps[sh->pc_step[t]].node->in[1]] = 1;
    if (tied) *tied = tr;
    return 1;
}

static int64_t index_at(bf_dtype dt, const void *data, int64_t i)
{
    return dt == BF_I32 ? ((const int32_t *)data)[i] : ((const int64_t *)data)[i];
}

const void *bf__dx_lookup_indices(const bf__dx_shared *sh, bf_evaluator *ev, const bf_plan *p, int iv, int64_t b,
                                  bf_dtype *dt)
{
    *dt = p->vals[iv].dtype;
    const void *idx = bf__gcache_block(sh->gc, iv, b);
    if (idx || p->val_step[iv] != -1 || sh->m->values[iv].kind != BF__VAL_INPUT) return idx;
    const bf_tensor *feed = bf__evaluator_feed(ev, (size_t)sh->m->values[iv].index);
    if (!feed || (feed->dtype != BF_I64 && feed->dtype != BF_I32)) return NULL;
    int64_t row = bf_tensor_numel(&p->vals[iv]) / bf_plan_batch(p);
    *dt = feed->dtype;
    return (const char *)feed->data + (size_t)(b * sh->batch * row) * bf_dtype_size(feed->dtype);
}

/* Row -> batches for embedding table q, from the cached indices. A table
 * whose indices cannot be read so is left an ordinary parameter (rows 0:
 * every batch), never one that no batch reads. The (row, batch) pairs of
 * every lookup are sorted and made unique: memory follows the eval set's
 * lookups (16 bytes each while building, at most 20 after), never the
 * table's rows. */
typedef struct emb_pair {
    int64_t row, batch;
} emb_pair;

static int pair_cmp(const void *a, const void *b)
{
    const emb_pair *x = a, *y = b;
    if (x->row != y->row) return x->row < y->row ? -1 : 1;
    return (x->batch > y->batch) - (x->batch < y->batch);
}

const int32_t *bf__emb_batches(const bf__emb_index *e, int64_t r, int64_t *n)
{
    int64_t lo = 0, hi = e->n_read;
    while (lo < hi) {   /* the first listed row >= r */
        int64_t mid = lo + (hi - lo) / 2;
        if (e->row[mid] < r) lo = mid + 1;
        else hi = mid;
    }
    if (lo == e->n_read || e->row[lo] != r) {
        *n = 0;
        return NULL;
    }
    *n = e->off[lo + 1] - e->off[lo];
    return e->batch + e->off[lo];
}

static bf_status build_emb(bf__dx_shared *sh, bf_evaluator *ev, bf_plan *plan[2], size_t q, bf_error *err)
{
    bf__emb_index *e = &sh->emb[q];
    const bf_tensor *w = bf_model_param(sh->m, q)->tensor;
    size_t total = 0;
    for (int64_t b = 0; b < sh->n_batches; b++) {
        const bf_plan *p = plan[b == sh->samples / sh->batch];
        for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) {
            bf_dtype dt;
            if (!bf__dx_lookup_step(sh, p, q, sh->pc_step[t])) continue;   /* a tied table's transpose */
            int iv = p->steps[sh->pc_step[t]].node->in[1];
            if (!bf__dx_lookup_indices(sh, ev, p, iv, b, &dt)) return BF_OK;
            total += (size_t)bf_tensor_numel(&p->vals[iv]);
        }
    }
    emb_pair *pairs = bf__malloc((total + 1) * sizeof *pairs);
    if (!pairs) return bf__dx_oom(err);
    int64_t rows = w->dims[0];
    size_t n = 0;
    for (int64_t b = 0; b < sh->n_batches; b++) {
        bf_plan *p = plan[b == sh->samples / sh->batch];
        for (int t = sh->pc_off[q]; t < sh->pc_off[q + 1]; t++) {
            if (!bf__dx_lookup_step(sh, p, q, sh->pc_step[t])) continue;
            int iv = p->steps[sh->pc_step[t]].node->in[1];
            bf_dtype dt;
            const void *idx = bf__dx_lookup_indices(sh, ev, p, iv, b, &dt);
            for (int64_t i = 0, k = bf_tensor_numel(&p->vals[iv]); i < k; i++) {
                int64_t r = index_at(dt, idx, i);
                if (r < 0) r += rows;
                if (r >= 0 && r < rows) pairs[n++] = (emb_pair){r, b};   /* out of range: the op's error */
            }
        }
    }
    qsort(pairs, n, sizeof *pairs, pair_cmp);
    size_t uniq = 0, n_rows = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || pair_cmp(&pairs[i], &pairs[uniq - 1]) != 0) {
            n_rows += uniq == 0 || pairs[i].row != pairs[uniq - 1].row;
            pairs[uniq++] = pairs[i];
        }
    e->row = bf__malloc((n_rows + 1) * sizeof *e->row);
    e->off = bf__malloc((n_rows + 2) * sizeof *e->off);
    e->batch = bf__malloc((uniq + 1) * sizeof *e->batch);
    if (!e->row || !e->off || !e->batch) {
        bf__free(pairs);
        return bf__dx_oom(err);
    }
    int64_t k = -1;
    for (size_t i = 0; i < uniq; i++) {
        if (k < 0 || pairs[i].row != e->row[k]) {
            e->row[++k] = pairs[i].row;
            e->off[k] = (int64_t)i;
        }
        e->batch[i] = (int32_t)pairs[i].batch;
    }
    e->off[n_rows] = (int64_t)uniq;
    bf__free(pairs);
    e->n_read = (int64_t)n_rows;
    e->rows = rows;
    e->row_elems = rows ? bf_tensor_numel(w) / rows : 0;
    return BF_OK;
}

int bf__dx_matmul_weight(const bf_model *m, const bf_plan *p, const bf__step *s, size_t *q, int *tr)
{
    bf__gemm_info g;
    if (!bf__matmul_fold_params(s, &g)) return 0;
    int bv = s->node->in[1];
    const bf_tensor *bt = &p->vals[bv];
    if (bt->ndim != 2) return 0;
    if (m->values[bv].kind == BF__VAL_PARAM) {
        *q = (size_t)m->values[bv].index, *tr = 0;
        return 1;
    }
    /* a Transpose of a [R, C] parameter into [C, R]: with R != C that is the
     * swap, the one permutation of two axes that moves elements */
    int ps = p->val_step[bv];
    if (ps < 0) return 0;
    const bf__step *t = &p->steps[ps];
    int iv = t->node->in[0];
    if (strcmp(t->node->op->name, "Transpose") != 0 || t->n_in != 1 || iv < 0 || m->values[iv].kind != BF__VAL_PARAM)
        return 0;
    const bf_tensor *w = &p->vals[iv];
    if (w->ndim != 2 || w->dims[0] == w->dims[1] || bt->dims[0] != w->dims[1] || bt->dims[1] != w->dims[0]) return 0;
    *q = (size_t)m->values[iv].index, *tr = 1;
    return 1;
}

/* Each Gemm's exact column blocks and row chunks, found on the golden pass. */
static bf_status gemm_widths(bf__dx_shared *sh, bf_evaluator *ev, bf_plan *plan[2], bf_error *err)
{
    const bf_model *m = sh->m;
    for (int t = 0; t < 2; t++) {
        sh->colw[t] = bf__calloc(sh->n_steps + 1, sizeof(int));
        sh->roww[t] = bf__calloc(sh->n_steps + 1, sizeof(int));
        sh->colblk[t] = bf__calloc(sh->n_steps + 1, sizeof *sh->colblk[t]);
        if (!sh->colw[t] || !sh->roww[t] || !sh->colblk[t]) return bf__dx_oom(err);
    }
    /* Row lists (bf__gemm_row_width, bf__gemm_rows) hold up to M / 2 rows
     * of A, and M is the batch only where a row of A is a sample: PyTorch's
     * attention runs its output projection as one Gemm over every token,
     * [seq x batch, E]. */
    sh->max_m = (int)sh->batch;
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; plan[t] && i < plan[t]->n_steps; i++) {
            bf__gemm_info g;
            size_t mq;
            int mtr;
            const bf__step *s = &plan[t]->steps[i];
            int mm = !bf__gemm_params(s, &g) && bf__dx_matmul_weight(m, plan[t], s, &mq, &mtr) &&
                     bf__matmul_fold_params(s, &g);
            if ((mm || bf__gemm_params(s, &g)) && g.m > sh->max_m) sh->max_m = g.m;
        }
    float *scratch = bf__malloc(2 * sh->scratch_floats * sizeof(float) + 64);
    int *rows = bf__malloc(((size_t)sh->max_m + 1) * sizeof *rows);
    if (!scratch || !rows) {
        bf__free(scratch);
        bf__free(rows);
        return bf__dx_oom(err);
    }
    for (int t = 0; t < 2; t++) {
        bf_plan *p = plan[t];
        if (!p) continue;
        int64_t b = t ? sh->n_batches - 1 : 0;
        for (size_t i = 0; i < p->n_steps; i++) {
            bf__gemm_info g;
            const bf__step *s = &p->steps[i];
            size_t mq;
            int mtr = 0, mm = !bf__gemm_params(s, &g);
            if (mm && !bf__dx_matmul_weight(m, p, s, &mq, &mtr)) continue;
            if (mm) bf__matmul_fold_params(s, &g);
            if (g.trans_a) continue;
            int av = s->node->in[0], yv = s->node->out[0];
            int bv = s->node->in[1], cv = mm ? -1 : s->n_in > 2 ? s->node->in[2] : -1;
            /* B and C: parameters, constants (C), or values computed from
             * them that the campaign holds (dxparam.c: a weight's Transpose,
             * a bias behind an Identity), found on the held copies; a trial
             * reads them in place where no fault of it moved them
             * (bf__dx_try_gemm, diffout.c), and runs the step whole where
             * one did. One left unheld is fetched batch by batch: no form. */
            const float *bh = bf__pvals_data(sh->pv, bv), *ch = cv >= 0 ? bf__pvals_data(sh->pv, cv) : NULL;
            if (!mm && m->values[bv].kind != BF__VAL_PARAM && !bh) continue;
            /* a transposed parameter's golden copy, from the cache */
            const float *bg = mtr ? bf__dx_golden(sh, bv, b) : bh ? bh : p->vals[bv].data;
            if (!bg) continue;
            if (cv >= 0 && p->val_step[cv] != BF__VAL_NOT_RUN && !ch) continue;   /* C computed at run time, unheld */
            const void *a = bf__gcache_block(sh->gc, av, b), *y = bf__dx_golden(sh, yv, b);
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
            const float *c = ch ? ch : cv >= 0 ? p->vals[cv].data : NULL;
            if (g.n > sh->max_n) sh->max_n = g.n;
            bf__colblk *blk = bf__malloc(((size_t)g.n + 1) * sizeof *blk);
            if (!blk) {
                bf__free(scratch);
                bf__free(rows);
                return bf__dx_oom(err);
            }
            sh->colblk[t][i] = blk;
            sh->colw[t][i] = bf__gemm_col_blocks(&g, a, bg, c, y, scratch, blk);
            /* a MatMul's rows: those of its input that changed (try_matmul,
             * and row mode's run_rows), never an update */
            sh->roww[t][i] = mm ? bf__gemm_row_one(&g, a, bg, c, y, scratch, rows)
                                : bf__gemm_row_width(&g, a, bg, c, y, scratch, rows);
        }
    }
    bf__free(scratch);
    bf__free(rows);
    return BF_OK;
}

/* Step i's work on a full batch, for weighing what a trial would re-run
 * against a full pass (bf__dx_run): multiply-adds for the products (Gemm,
 * MatMul, Conv), elements read and written for everything else. A count,
 * not the golden pass's timings: those differ from run to run, and the
 * path a trial takes must not (a full pass's metrics are computed in full,
 * the differential engine's from the golden ones, which may differ in the
 * last bits: docs/ENGINE.md). */
double bf__dx_step_work(const bf_plan *p, size_t i, int *product)
{
    const bf__step *s = &p->steps[i];
    const bf_tensor *y = s->n_out > 0 && s->node->out[0] >= 0 ? &p->vals[s->node->out[0]] : NULL;
    bf__gemm_info g;
    int64_t c, m, isp, osp;
    if (product) *product = 1;
    if (bf__gemm_params(s, &g)) return (double)g.m * g.n * g.k;
    if (y && s->n_in > 1 && s->node->in[1] >= 0 && bf__conv_shape(s, &c, &m, &isp, &osp) && m > 0)
        return (double)bf_tensor_numel(y) * (double)(bf_tensor_numel(&p->vals[s->node->in[1]]) / m);
    if (y && s->n_in > 1 && s->node->in[0] >= 0 && strcmp(s->node->op->name, "MatMul") == 0) {
        const bf_tensor *a = &p->vals[s->node->in[0]];
        if (a->ndim > 0) return (double)bf_tensor_numel(y) * (double)a->dims[a->ndim - 1];
    }
    if (product) *product = 0;
    /* a Gather or Slice reads the elements it selects, not its whole data
     * input: its output's worth twice (read, written), and its indices
     * (SSDlite's 91 per-class score columns, a Gather of 3234 of 294,294
     * elements each, counted whole made the checkpoints' store keep them
     * all: ckpt_reach.c's price_store) */
    const char *op = s->node->op->name;
    int gather = strcmp(op, "Gather") == 0;
    if (y && (gather || strcmp(op, "Slice") == 0)) {
        double g = 1 + 2.0 * (double)bf_tensor_numel(y);
        if (gather && s->n_in > 1 && bf__runtime(p, s->node->in[1])) g += (double)bf_tensor_numel(&p->vals[s->node->in[1]]);
        return g;
    }
    double n = 1;   /* a step costs something even when its tensors are empty */
    for (int j = 0; j < s->n_in; j++)
        if (bf__runtime(p, s->node->in[j])) n += (double)bf_tensor_numel(&p->vals[s->node->in[j]]);
    for (int j = 0; j < s->n_out; j++)
        if (s->node->out[j] >= 0) n += (double)bf_tensor_numel(&p->vals[s->node->out[j]]);
    return n;
}

/* Everything but the cache and what is found on it: use lists, and the
 * values the cache must hold whatever its budget (into must). */
static bf_status shared_begin(bf_evaluator *ev, int64_t samples, int64_t out_cols, bf__dx_shared **out,
                              unsigned char **must_out, bf_error *err)
{
    bf_plan *plan0 = bf__evaluator_plan(ev, 0);
    const bf_model *m = bf_plan_model(plan0);
    bf_status st;
    unsigned char *must = NULL;
    bf__dx_shared *sh = bf__calloc(1, sizeof *sh);
    *out = NULL;
    *must_out = NULL;
    if (!sh) return bf__dx_oom(err);
    sh->m = m;
    sh->samples = samples;
    sh->batch = bf_plan_batch(plan0);
    sh->n_batches = (samples + sh->batch - 1) / sh->batch;
    sh->batch_shift = -1;
    for (int q = 0; q < 62 && sh->batch_shift < 0; q++)
        if ((int64_t)1 << q == sh->batch) sh->batch_shift = q;
    sh->out_cols = out_cols;
    sh->out_val = m->output_vals[0];
    sh->n_steps = plan0->n_steps;
    /* room for a value of the full batch, graph inputs included: a Gemm's
     * partial products (diffgemm.c) take at most its A's or its Y's floats,
     * and A may be a graph input (a wide input to a narrow Gemm is the
     * largest value of a logistic regression); row-mode plans (diffrows.c)
     * are never wider than the batch */
    for (size_t v = 0; v < m->n_values; v++)
        if (plan0->val_step[v] != BF__VAL_NOT_RUN) {
            size_t n = (size_t)bf_tensor_numel(&plan0->vals[v]);
            if (n > sh->scratch_floats) sh->scratch_floats = n;
        }
    must = bf__calloc(m->n_values + 1, 1);
    sh->emb = bf__calloc(m->n_params + 1, sizeof *sh->emb);
    sh->step_cost = bf__malloc((plan0->n_steps + 1) * sizeof *sh->step_cost);
    if (!must || !sh->emb || !sh->step_cost) { st = bf__dx_oom(err); goto out; }
    for (size_t i = 0; i < plan0->n_steps; i++) sh->pass_cost += sh->step_cost[i] = bf__dx_step_work(plan0, i, NULL);
    if ((st = use_lists(sh, plan0, err)) != BF_OK) goto out;
    /* Outputs of multi-output steps are cached whatever the budget: a
     * recomputation would overwrite its siblings, which may hold a fault. */
    for (size_t i = 0; i < plan0->n_steps; i++)
        if (plan0->steps[i].n_out > 1)
            for (int j = 0; j < plan0->steps[i].n_out; j++)
                if (plan0->steps[i].node->out[j] >= 0) must[plan0->steps[i].node->out[j]] = 1;
    for (size_t q = 0; q < m->n_params; q++) embedding_param(sh, plan0, q, must, NULL);
    /* parameter-only values: at most twice the weights' size (an export
     * that writes every Linear as MatMul(x, Transpose(W)), GPT-2's, has a
     * transposed copy of nearly every weight) */
    size_t wbytes = 0;
    for (size_t q = 0; q < m->n_params; q++) wbytes += bf_tensor_nbytes(bf_model_param(m, q)->tensor);
    bf_plan *pl[2] = {plan0, bf__evaluator_plan(ev, 1)};
    if ((st = bf__pvals_build(pl, 2 * wbytes, &sh->pv, err)) != BF_OK) goto out;
    *out = sh;
    *must_out = must;
    return BF_OK;
out:
    bf__free(must);
    bf__dx_shared_free(sh);
    return st;
}

/* A parameter whose every reader is a Conv or a BatchNormalization (a
 * fault in it moves one output channel of each: diffpsum.c's candidates
 * say the same), none of them with more than one output: a "channel root"
 * for root_values. */
static int channel_root(const bf_plan *p, int v)
{
    const bf_model *m = p->model;
    if (m->values[v].kind != BF__VAL_PARAM) return 0;
    int readers = 0;
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int reads = 0;
        for (int j = 0; j < s->n_in; j++) reads |= s->node->in[j] == v;
        if (!reads) continue;
        if (s->n_out != 1 || s->dyn || !(bf__conv_step(s) || bf__bnorm_of(s, NULL))) return 0;
        readers++;
    }
    return readers > 0;
}

/* What a trial with a fault in a channel root r reads golden: the
 * run-time inputs of the steps it reaches that it does not reach itself,
 * and, to compare with, the values its fault may have moved in one
 * channel alone (r's Conv's or BatchNormalization's output and what the
 * steps keeping a change in its channel make of it: bf__chan_local_step).
 * Past the first step that mixes channels (a Conv over every channel, a
 * Gemm, a Flatten) it only compares, and leaves those values out: a
 * value the cache lacks compares as changed (diffexec.c, differs), so
 * the trial re-runs what follows as the exact engine would, the same
 * records. What it gives up is stopping where its fault vanished from a
 * whole batch after moving one channel of it, which a mixed change does
 * not do: each moved element moves every output channel at each of its
 * kernel's taps, and the batch compares equal only if every one of those
 * sums rounds back. What it saves is bytes the golden pass writes to
 * fresh memory: resnet18's one layer1 fault of 40 made the cache keep
 * every value after it, 362 MiB, now 190 (docs/perf/trials.md, h19-r18;
 * the same work re-run, step for step). FAR_MIX: the mixing steps past
 * which a trial compares no more. */
#define FAR_MIX 0

void bf__own_chan_all(const bf_plan *p, unsigned char *own)
{
    enum { UNREAD, OWN, NOT };
    memset(own, UNREAD, p->model->n_values);
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int dw = s->n_out == 1 && bf__conv_step(s) && bf__conv_group_in(s) == 1;
        for (int j = 0; j < s->n_in; j++) {
            int v = s->node->in[j];
            if (v >= 0) own[v] = own[v] == NOT || j != 0 || !dw ? NOT : OWN;
        }
    }
    for (size_t k = 0; k < p->model->n_outputs; k++)
        if (p->model->output_vals[k] >= 0) own[p->model->output_vals[k]] = NOT;
    for (size_t v = 0; v < p->model->n_values; v++) own[v] = own[v] == OWN;
}

/* root_values for channel root r, into want; depth: scratch, per value,
 * the mixing steps between r and it (255: not reached) */
static void root_values(const bf_plan *p, int r, const unsigned char *own, unsigned char *depth,
                        unsigned char *want)
{
    const bf_model *m = p->model;
    enum { UNREACHED = 255 };
    memset(depth, UNREACHED, m->n_values);
    int chain_end = -1;   /* the last step of the fused chain of a Conv reading r */
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int d = UNREACHED, root = 0;
        for (int j = 0; j < s->n_in; j++) {
            int v = s->node->in[j];
            if (v < 0) continue;
            if (v == r) root = 1;
            else if (depth[v] < d) d = depth[v];
        }
        if (!root && d == UNREACHED) continue;
        int fn, fa;
        if (root && bf__conv_step(s)) chain_end = bf__plan_fused_last(p, i, &fn, &fa);
        /* the step's output moves in one channel (depth 0) where it reads r
         * (a Conv's or BatchNormalization's) or keeps its input's change in
         * its channels; a step mixing channels adds one */
        int out_d = root ? 0 : bf__chan_local_step(s) ? d : d + 1;
        for (int j = 0; j < s->n_in; j++) {
            int v = s->node->in[j];
            if (v != r && bf__runtime(p, v) && depth[v] == UNREACHED) want[v] = 1;
        }
        for (int j = 0; j < s->n_out; j++) {
            int v = s->node->out[j];
            if (v < 0) continue;
            depth[v] = (unsigned char)(out_d > 254 ? 254 : out_d);
            /* moved in one channel and read only by depthwise Convs:
             * those compute that channel from it and compare their own
             * output, so a trial compares it with nothing (own: bf__own_chan_all;
             * diffchan.c, bf__dx_chain_channel, the one path that writes
             * its channel without golden: the end of the fused chain of
             * the Conv whose weight moved it): mobilenet_v2's expansions,
             * 115 of the 278 MiB its 40-trial cache held */
            if ((int)i == chain_end && s->n_out == 1 && own[v]) continue;
            if (s->n_out > 1 || out_d <= FAR_MIX) want[v] = 1;
        }
    }
}

/* The values a trial may read when its faults strike values in `roots`
 * (per value: a parameter's, or an activation's a value fault lands on):
 * what the faults reach (the roots and every output of a step reading one
 * of them, onwards in step order), which a trial compares with golden, and
 * every run-time input of the steps that compute those, which it reads
 * golden; a root's producer's inputs too. Nothing else: a trial runs no
 * step the faults do not reach. With trim, a channel root's far values
 * are left out (root_values). *out: per value, 1 to keep; NULL when the
 * graph has a subgraph (an If's or a Loop's body reads values of the main
 * graph its node does not list), which keeps every value, as without
 * roots. */
bf_status bf__dx_want_values(const bf_plan *p, const unsigned char *roots, int trim, unsigned char **out,
                             bf_error *err)
{
    const bf_model *m = p->model;
    *out = NULL;
    for (size_t i = 0; i < p->n_steps; i++)
        for (size_t a = 0; a < p->steps[i].node->n_attrs; a++)
            if (p->steps[i].node->attrs[a].type == BF__ATTR_GRAPH) return BF_OK;
    unsigned char *reach = bf__calloc(m->n_values + 1, 1), *want = bf__calloc(m->n_values + 1, 1);
    unsigned char *chan = bf__calloc(m->n_values + 1, 1), *own = bf__calloc(m->n_values + 1, 1);
    if (!reach || !want || !chan || !own) {
        bf__free(reach);
        bf__free(want);
        bf__free(chan);
        bf__free(own);
        return bf__dx_oom(err);
    }
    bf__own_chan_all(p, own);
    for (size_t v = 0; v < m->n_values; v++) {
        chan[v] = trim && roots[v] && channel_root(p, (int)v);
        reach[v] = roots[v] && !chan[v];
    }
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        const bf__node *n = s->node;
        int hit = 0, root_out = 0;
        for (int j = 0; j < n->n_in; j++) hit |= n->in[j] >= 0 && reach[n->in[j]];
        for (int j = 0; j < n->n_out; j++) root_out |= n->out[j] >= 0 && roots[n->out[j]];
        if (!hit && !root_out) continue;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) reach[n->out[j]] = 1;
        for (int j = 0; j < n->n_in; j++)
            if (bf__runtime(p, n->in[j])) want[n->in[j]] = 1;
    }
    for (size_t v = 0; v < m->n_values; v++) want[v] |= reach[v];
    /* reach is the scratch of each channel root's own walk now */
    for (size_t v = 0; v < m->n_values; v++)
        if (chan[v]) root_values(p, (int)v, own, reach, want);
    /* the graph's outputs: the campaign's golden outputs, written anyway */
    for (size_t k = 0; k < m->n_outputs; k++)
        if (m->output_vals[k] >= 0) want[m->output_vals[k]] = 1;
    bf__free(reach);
    bf__free(chan);
    bf__free(own);
    *out = want;
    return BF_OK;
}

/* Whether the pass may run a Conv and its activation alone fused, leaving
 * the Conv's output out of the cache (bf__gcache_build's lean): only where
 * chain mode, which starts at such a Conv's cached output, would make no
 * chain on the values the cache would otherwise hold (mobilenet_v2's and
 * resnet18's wide early maps rule chains out; a small CNN's last Conv
 * starts one). */
static bf_status lean_ok(bf__dx_shared *sh, bf_plan *const *plans, int n_ev, size_t budget,
                         const unsigned char *must, unsigned char *planned, int *lean, bf_error *err)
{
    bf_plan *two[2] = {plans[0], plans[n_ev]};
    int possible = 1;
    bf_status st = bf__gcache_plan(plans, plans[n_ev] ? plans + n_ev : NULL, sh->samples, budget, must, sh->pv,
                                   planned, err);
    if (st == BF_OK) st = bf__chain_possible(sh, two, planned, &possible, err);
    *lean = !possible;
    return st;
}

/* The golden pass over the eval set, into the cache: one thread per
 * evaluator, each on its own plans; want (NULL: every value) limits the
 * values cached to those (want_values). */
static bf_status shared_cache(bf__dx_shared *sh, bf_evaluator *const *evs, int n_ev, size_t budget,
                              const unsigned char *must, const unsigned char *want, const unsigned char *want_trim,
                              const float *golden, float *golden_out, unsigned pages, bf_error *err)
{
    const bf_model *m = sh->m;
    bf_plan **plans = bf__calloc(2 * (size_t)n_ev + 1, sizeof *plans);
    const bf_tensor **feeds = bf__calloc(m->n_inputs + 1, sizeof *feeds);
    unsigned char *planned = NULL;
    bf_status st;
    if (!plans || !feeds) {
        st = bf__dx_oom(err);
        goto out;
    }
    for (int k = 0; k < n_ev; k++) {
        plans[k] = bf__evaluator_plan(evs[k], 0);
        plans[n_ev + k] = bf__evaluator_plan(evs[k], 1);
    }
    for (size_t i = 0; i < m->n_inputs; i++) feeds[i] = bf__evaluator_feed(evs[0], i);
    int lean = 0;
    /* what the budget keeps were every value wanted: said once, read by
     * lean_ok and kept by the cache (bf__gcache_planned) */
    if (want && !(planned = bf__calloc(m->n_values + 1, 1))) {
        st = bf__dx_oom(err);
        goto out;
    }
    if (want && (st = lean_ok(sh, plans, n_ev, budget, must, planned, &lean, err)) != BF_OK) goto out;
    /* the far values left out only where no chain can be made: chain
     * mode starts from cached values on the way to the output (a small
     * CNN's last Conv through its classifier), and must not follow the
     * draw (lean_ok) */
    if (lean && want_trim) want = want_trim;
    st = bf__gcache_build(plans, plans[n_ev] ? plans + n_ev : NULL, n_ev, feeds, sh->samples, budget, must,
                                want, lean, sh->pv, planned, golden, golden_out, sh->ps, pages, &sh->gc, err);
out:
    bf__free(planned);
    bf__free(plans);
    bf__free(feeds);
    return st;
}

const bf__gcache *bf__dx_shared_cache(const bf__dx_shared *sh) { return sh->gc; }
void bf__dx_shared_drop_pools(bf__dx_shared *sh) { bf__gpools_drop(bf__gcache_pools(sh->gc)); }

double bf__dx_param_reach(const bf__dx_shared *sh, size_t param)
{
    if (param >= sh->m->n_params || sh->pc_off[param] == sh->pc_off[param + 1] || !(sh->pass_cost > 0)) return 0;
    int first = (int)sh->n_steps;
    for (int t = sh->pc_off[param]; t < sh->pc_off[param + 1]; t++)
        if (sh->pc_step[t] < first) first = sh->pc_step[t];
    double after = 0;
    for (size_t i = (size_t)first; i < sh->n_steps; i++) after += sh->step_cost[i];
    return after / sh->pass_cost;
}

bf_status bf__dx_shared_finish(bf__dx_shared *sh, bf_evaluator *ev, const float *golden, bf_error *err)
{
    bf_plan *plan[2] = {bf__evaluator_plan(ev, 0), bf__evaluator_plan(ev, 1)};
    bf_status st;
    sh->golden = golden;
    for (size_t q = 0; q < sh->m->n_params; q++) {
        int tied = 0;
        if (embedding_param(sh, plan[0], q, NULL, &tied) && (st = build_emb(sh, ev, plan, q, err)) != BF_OK) return st;
        sh->emb[q].tied = sh->emb[q].rows ? tied : 0;
    }
    if ((st = gemm_widths(sh, ev, plan, err)) != BF_OK) return st;
    return bf__chain_setup(sh, ev, plan, err);
}

size_t bf__dx_shared_psum_bytes(const bf__dx_shared *sh, int *convs) { return bf__psum_bytes(sh->ps, convs); }

bf_status bf__dx_shared_golden(bf_evaluator *const *evs, int n_ev, int64_t samples, int64_t out_cols,
                                     size_t budget, const unsigned char *roots, const bf__root_chans *rc,
                                     float *golden_out, unsigned pages, bf__dx_shared **out, bf_error *err)
{
    unsigned char *must = NULL, *want = NULL, *trim = NULL;
    bf__dx_shared *sh = NULL;
    *out = NULL;
    bf_status st = shared_begin(evs[0], samples, out_cols, &sh, &must, err);
    if (st == BF_OK && roots) st = bf__dx_want_values(bf__evaluator_plan(evs[0], 0), roots, 0, &want, err);
    if (st == BF_OK && roots) st = bf__dx_want_values(bf__evaluator_plan(evs[0], 0), roots, 1, &trim, err);
    if (st == BF_OK && roots)
        st = bf__psum_choose(bf__evaluator_plan(evs[0], 0), roots, rc, sh->n_batches, &sh->ps, err);
    if (st == BF_OK) st = shared_cache(sh, evs, n_ev, budget, must, want, trim, NULL, golden_out, pages, err);
    bf__free(want);
    bf__free(trim);
    bf__free(must);
    if (st != BF_OK) {
        bf__dx_shared_free(sh);
        return st;
    }
    *out = sh;
    return BF_OK;
}

void bf__dx_shared_near_exact(bf__dx_shared *sh) { sh->near_exact = 1; }

int bf__dx_shared_is_near_exact(const bf__dx_shared *sh) { return sh->near_exact; }

bf_status bf__dx_shared_create(bf_evaluator *const *evs, int n_ev, int64_t samples, const float *golden, int64_t out_cols,
                               size_t budget, int near_exact, bf__dx_shared **out, bf_error *err)
{
    unsigned char *must = NULL;
    bf__dx_shared *sh = NULL;
    *out = NULL;
    bf_status st = shared_begin(evs[0], samples, out_cols, &sh, &must, err);
    if (st == BF_OK) sh->near_exact = near_exact != 0;
    if (st == BF_OK) st = shared_cache(sh, evs, n_ev, budget, must, NULL, NULL, golden, NULL, 0, err);
    if (st == BF_OK) st = bf__dx_shared_finish(sh, evs[0], golden, err);
    bf__free(must);
    if (st != BF_OK) {
        bf__dx_shared_free(sh);
        return st;
    }
    *out = sh;
    return BF_OK;
}
