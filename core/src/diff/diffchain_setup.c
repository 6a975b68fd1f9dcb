/* Chain mode's setup (diffchain_impl.h; what chain mode is: diffchain.c):
 * once per campaign, which steps start a chain and where each chain goes,
 * the rounding bounds and the column-major copies of golden values its
 * updates read (diffshared.c calls bf__chain_setup); once per worker, the
 * buffers a trial's changed rows live in. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "diff/diff_impl.h"
#include "diffchain_impl.h"
#include "exec/ops/sgemm.h"

/* --- shared: which steps start a chain (diffshared.c calls this) */

static int64_t width_of(const bf_plan *p, int v) { return bf_tensor_numel(&p->vals[v]) / bf_plan_batch(p); }

/* Which values count as cached when chains are linked: has (per value),
 * or else with planned those the cache would hold were every value wanted
 * (bf__gcache_planned), so that whether chains are made at all does not
 * hang on which faults the campaign drew (bf__chain_setup), or else those
 * it holds. */
typedef struct held {
    const unsigned char *has;
    int planned;
} held;

static int cached_everywhere(const bf__dx_shared *sh, int v, held h)
{
    if (h.has) return h.has[v];
    return h.planned ? bf__gcache_planned(sh->gc, v) : bf__gcache_has(sh->gc, v);
}

/* Value v's golden rows for every sample, in chain_rows[v]: a value the
 * cache derives (gcache.c) is computed for every batch now, once the
 * chains are known to be used. */
static int golden_rows(bf__dx_shared *sh, int v)
{
    if (!sh->chain_rows[v] && bf__gcache_has(sh->gc, v)) sh->chain_rows[v] = bf__gcache_rows(sh->gc, v);
    return sh->chain_rows[v] != NULL;
}

/* A step whose output holds each sample's elements of its input in the same
 * order (other inputs fixed when the plan was built). */
static int same_layout(const bf_plan *p, const bf__step *s)
{
    static const char *const ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "bf.SqueezeIfOne"};
    int known = 0;
    for (size_t i = 0; i < sizeof ops / sizeof *ops && !known; i++) known = strcmp(s->node->op->name, ops[i]) == 0;
    if (!known || s->n_out != 1 || s->node->in[0] < 0) return 0;
    for (int t = 1; t < s->n_in; t++)
        if (bf__runtime(p, s->node->in[t])) return 0;
    const bf_tensor *x = &p->vals[s->node->in[0]], *y = &p->vals[s->node->out[0]];
    return x->ndim >= 1 && y->ndim >= 1 && x->dims[0] == bf_plan_batch(p) && y->dims[0] == bf_plan_batch(p) &&
           bf_tensor_numel(x) == bf_tensor_numel(y);
}

/* Where a chain may end before the output: a value read by steps that are
 * no chain (a DLRM's bottom MLP output, read by the interaction and the
 * top MLP's Concat), whose changed rows row mode takes on from there
 * (diffrows.c, bf__rows_seeded): a float with the sample on dimension 0,
 * cached for every batch. */
static int handoff_ok(const bf__dx_shared *sh, bf_plan *plan[2], int o, held h)
{
    for (int t = 0; t < 2; t++) {
        if (!plan[t]) continue;
        const bf_tensor *v = &plan[t]->vals[o];
        if (v->dtype != BF_F32 || v->ndim < 1 || v->dims[0] != bf_plan_batch(plan[t])) return 0;
    }
    return sh->first_use[o] >= 0 && cached_everywhere(sh, o, h);
}

/* A Gemm whose rows and columns the setup found exact (diffshared.c),
 * and whose rows are the samples: a chain reads its rows as samples (a
 * Gemm over every token of a sequence, [seq x batch, E], is no link; the
 * chain's reshapes and its end keep dim 0 the batch, so none reaches one
 * today, and this says so where the rows are read). */
static int gemm_link(const bf__dx_shared *sh, bf_plan *plan[2], size_t i, bf__gemm_info *g)
{
    const bf__step *s = &plan[0]->steps[i];
    if (!bf__gemm_params(s, g) || g->trans_a || g->c_rs || s->n_out != 1) return 0;
    /* B and C fixed when the plan was built: the exact blocks now found on
     * a held computed B or C too (diffshared.c) are the column and row
     * paths', which guard a moved one; a link's segment reads them at setup */
    for (int j = 1; j < s->n_in; j++)
        if (bf__runtime(plan[0], s->node->in[j])) return 0;
    for (int t = 0; t < 2; t++) {
        bf__gemm_info gt;
        if (!plan[t]) continue;
        if (!bf__gemm_params(&plan[t]->steps[i], &gt) || gt.m != bf_plan_batch(plan[t])) return 0;
        if (sh->roww[t][i] != 1 || !sh->colw[t][i]) return 0;
        for (int j = 0; j < g->n; j++)   /* (a single column is the whole product: width 0) */
            if (sh->colblk[t][i][j].w != 1 && g->n > 1) return 0;
    }
    return 1;
}

/* What the rounding bound of an update needs (see relu_certain): each
 * sample's largest |input| of every chain Gemm and Conv, and each chain
 * Gemm's column sums of |alpha B|. */
static bf_status rounding_bounds(bf__dx_shared *sh, const bf_plan *p, bf_error *err)
{
    const bf_model *m = sh->m;
    sh->chain_amax = bf__calloc(m->n_values + 1, sizeof *sh->chain_amax);
    sh->chain_colabs = bf__calloc(sh->n_steps + 1, sizeof *sh->chain_colabs);
    if (!sh->chain_amax || !sh->chain_colabs) return bf__dx_oom(err);
    for (size_t k = 0; k < sh->n_steps; k++) {
        const bf__step *s = &p->steps[k];
        bf__gemm_info g;
        int64_t c, mm, isp, osp;
        int gemm = bf__gemm_params(s, &g), av = s->node->in[0];
        if (sh->chain_next[k] == NOT_CHAIN || (!gemm && !bf__conv_shape(s, &c, &mm, &isp, &osp))) continue;
        if (gemm) {
            float *cs = sh->chain_colabs[k] = bf__calloc((size_t)g.n + 1, sizeof *cs);
            if (!cs) return bf__dx_oom(err);
            const float *b = p->vals[s->node->in[1]].data;
            for (int kk = 0; kk < g.k; kk++)
                for (int n = 0; n < g.n; n++)
                    cs[n] += fabsf(g.alpha * (g.trans_b ? b[(int64_t)n * g.k + kk] : b[(int64_t)kk * g.n + n]));
        }
        if (sh->chain_amax[av] || !sh->chain_rows[av])
            continue;
        float *am = sh->chain_amax[av] = bf__malloc(((size_t)sh->samples + 1) * sizeof *am);
        if (!am) return bf__dx_oom(err);
        int64_t w = width_of(p, av);
        for (int64_t r = 0; r < sh->samples; r++) {
            const float *a = bf__chain_gold_row(sh, av, r, w);
            float most = 0;
            for (int64_t i = 0; i < w; i++) most = fabsf(a[i]) > most || a[i] != a[i] ? fabsf(a[i]) : most;
            am[r] = most;
        }
    }
    return BF_OK;
}

/* A value's golden rows over the eval set, column by column: 16 rows at a
 * time, so that each column's 16 floats are one cache line written whole
 * (row by row, every write is a line of its own: a tenth of dlrm_large's
 * start-up). */
static float *columns(const bf__dx_shared *sh, int v, int64_t width)
{
    float *t = bf__malloc(((size_t)(width * sh->samples) + 1) * sizeof *t);
    if (!t) return NULL;
    for (int64_t r0 = 0; r0 < sh->samples; r0 += 16) {
        int64_t r1 = r0 + 16 < sh->samples ? r0 + 16 : sh->samples;
        const float *rows = bf__chain_gold_row(sh, v, r0, width);
        for (int64_t c = 0; c < width; c++)
            for (int64_t r = r0; r < r1; r++) t[c * sh->samples + r] = rows[(r - r0) * width + c];
    }
    return t;
}

/* The corrupted Gemm's column update reads one input column and one
 * output column over the eval set: from rows a cache line apart each;
 * from these copies, one line per 16 samples, and in vectors. At most
 * BF__COLUMN_COPY_FLOATS in all (16 MiB: on dlrm_large, the first Gemms in
 * parameter order), beyond which faulty_column reads the rows. */
static bf_status column_copies(bf__dx_shared *sh, const bf_plan *p, bf_error *err)
{
    const bf_model *m = sh->m;
    sh->chain_cols_in = bf__calloc(sh->n_steps + 1, sizeof *sh->chain_cols_in);
    sh->chain_cols_out = bf__calloc(sh->n_steps + 1, sizeof *sh->chain_cols_out);
    if (!sh->chain_cols_in || !sh->chain_cols_out) return bf__dx_oom(err);
    int64_t room = BF__COLUMN_COPY_FLOATS;
    for (size_t q = 0; q < m->n_params; q++) {
        int k = sh->chain_at[q];
        bf__gemm_info g;
        if (k < 0 || sh->chain_cols_out[k] || !bf__gemm_params(&p->steps[k], &g)) continue;
        int64_t need = (int64_t)(g.k + g.n) * sh->samples;
        if (need > room) continue;
        room -= need;
        sh->chain_cols_in[k] = columns(sh, p->steps[k].node->in[0], g.k);
        sh->chain_cols_out[k] = columns(sh, p->steps[k].node->out[0], g.n);
        if (!sh->chain_cols_in[k] || !sh->chain_cols_out[k]) return bf__dx_oom(err);
    }
    return BF_OK;
}

/* A chain Gemm's exact rows read B as K x N rows: with B stored
 * transposed (N x K, as PyTorch exports Linear) the product would pack a
 * transposed panel of it on every call; a copy in the other order, once
 * per campaign, gives the same elements (the same chains of fused
 * multiply-adds) without. A link's B is never the trial's faulty one (a
 * chain's parameter is read by its first step alone). */
static bf_status b_copies(bf__dx_shared *sh, const bf_plan *p, bf_error *err)
{
    sh->chain_bt = bf__calloc(sh->n_steps + 1, sizeof *sh->chain_bt);
    if (!sh->chain_bt) return bf__dx_oom(err);
    for (size_t k = 0; k < sh->n_steps; k++) {
        bf__gemm_info g;
        if (sh->chain_next[k] == NOT_CHAIN || !bf__gemm_params(&p->steps[k], &g) || !g.trans_b) continue;
        const float *b = p->vals[p->steps[k].node->in[1]].data;
        float *bt = sh->chain_bt[k] = bf__malloc(((size_t)g.k * (size_t)g.n + 1) * sizeof *bt);
        if (!bt) return bf__dx_oom(err);
        for (int n = 0; n < g.n; n++)
            for (int q = 0; q < g.k; q++) bt[(int64_t)q * g.n + n] = b[(int64_t)n * g.k + q];
    }
    return BF_OK;
}

/* Whether every operand of step s but its input (a Gemm's B and C, a
 * Conv's weight and bias) is a parameter, a constant, or a value computed
 * from them that the campaign holds (dxparam.c). The links read those in
 * place from the worker's plan (diffchain_link.c), which points at the
 * held copies (bf__pv_golden); a value left unheld (over the limit, no
 * arena) is fetched batch by batch only, so such a step is no link. */
static int operands_fixed(const bf__dx_shared *sh, const bf_plan *p, const bf__step *s)
{
    for (int j = 1; j < s->n_in; j++)
        if (s->node->in[j] >= 0 && bf__runtime(p, s->node->in[j]) && !bf__pvals_data(sh->pv, s->node->in[j])) return 0;
    return 1;
}

/* Which step each chain step hands on to (chain_next), over the values h
 * counts as cached; the widest value the chains read or write. gemms 0:
 * no Gemm is a link (before the exact Gemm blocks gemm_link reads are
 * found): fewer steps are chain steps, so the widest is at most the one
 * found with them. */
static int64_t link_chains(bf__dx_shared *sh, bf_plan *plan[2], held h, int gemms)
{
    const bf_plan *p = plan[0];
    const bf_tensor *out = &p->vals[sh->out_val];
    int out_ok = out->ndim >= 1 && out->dims[0] == sh->batch && width_of(p, sh->out_val) == sh->out_cols &&
                 out->dtype == BF_F32;
    int64_t widest = 0, isp, osp, c, mm;
    for (size_t k = sh->n_steps; k-- > 0;) {
        const bf__step *s = &p->steps[k];
        bf__gemm_info g;
        sh->chain_next[k] = NOT_CHAIN;
        int gemm = gemms && gemm_link(sh, plan, k, &g), conv = bf__conv_shape(s, &c, &mm, &isp, &osp);
        if ((gemm || conv) && !operands_fixed(sh, p, s)) continue;
        int pool = bf__pool_shape(s, &isp, &osp) && width_of(p, s->node->in[0]) % isp == 0;
        if (!gemm && !conv && !pool && !bf__unary_f32(s) && !(same_layout(p, s) && (!plan[1] || same_layout(plan[1], s))))
            continue;
        int o = s->node->out[0];
        if (o < 0 || p->vals[o].dtype != BF_F32) continue;
        if (o == sh->out_val) {
            if (out_ok) sh->chain_next[k] = CHAIN_END;
        } else {
            int j = sh->first_use[o];
            if (j >= 0 && j == sh->last_use[o] && sh->chain_next[j] != NOT_CHAIN) {
                const bf__step *r = &p->steps[j];
                int reads = 0;
                for (int t = 0; t < r->n_in; t++) reads += r->node->in[t] == o;
                /* a Conv starts a chain, never continues one */
                if (!bf__conv_shape(r, &c, &mm, &isp, &osp) && reads == 1 && r->node->in[0] == o &&
                    cached_everywhere(sh, o, h))
                    sh->chain_next[k] = j;
            }
            if (sh->chain_next[k] == NOT_CHAIN && handoff_ok(sh, plan, o, h)) sh->chain_next[k] = HANDOFF;
            if (sh->chain_next[k] == NOT_CHAIN) continue;
        }
        int64_t w = width_of(p, o), wi = s->node->in[0] >= 0 ? width_of(p, s->node->in[0]) : 0;
        if (w > widest) widest = w;
        if ((gemm || conv || pool) && wi > widest) widest = wi;
    }
    return widest;
}

bf_status bf__chain_setup(bf__dx_shared *sh, bf_evaluator *ev, bf_plan *plan[2], bf_error *err)
{
    const bf_model *m = sh->m;
    const bf_plan *p = plan[0];
    int64_t isp, osp, c, mm;
    sh->chain_next = bf__malloc((sh->n_steps + 1) * sizeof *sh->chain_next);
    sh->chain_at = bf__malloc((m->n_params + 1) * sizeof *sh->chain_at);
    sh->chain_rows = bf__calloc(m->n_values + 1, sizeof *sh->chain_rows);
    if (!sh->chain_next || !sh->chain_at || !sh->chain_rows) return bf__dx_oom(err);
    for (size_t v = 0; v < m->n_values; v++)
        if (p->val_step[v] >= 0 && bf__gcache_stored(sh->gc, (int64_t)v)) sh->chain_rows[v] = bf__gcache_block(sh->gc, (int64_t)v, 0);
    sh->chain_rows[sh->out_val] = sh->golden;
    for (size_t q = 0; q < m->n_params; q++) sh->chain_at[q] = -1;
    /* No chains when the values they would read are too wide, judged on
     * what the cache would hold were every value wanted: a cache kept to
     * the drawn trials' values (gcache.c) lacks the wide early maps that
     * ruled chains out on mobilenet_v2, and its chain trials, 11 of 25
     * redone exactly, cost more than they saved. */
    int64_t widest = link_chains(sh, plan, (held){.planned = 1}, 1);
    if (widest * sh->samples <= BF__CHAIN_MAX_FLOATS) widest = link_chains(sh, plan, (held){0}, 1);
    if (widest * sh->samples > BF__CHAIN_MAX_FLOATS) return BF_OK;   /* no chains: buffers too large */
    sh->chain_width = widest;
    for (size_t k = 0; k < sh->n_steps; k++) {
        int o = p->steps[k].node->out[0];
        if (sh->chain_next[k] != NOT_CHAIN && o != sh->out_val && !golden_rows(sh, o))
            return bf_error_set(err, BF_EUNSUPPORTED,
                                "the golden cache could not compute value '%s' from its stored input; "
                                "run the campaign with --exact, and report this as a bug", m->values[o].name);
    }
    /* a corrupted B or C of a chain Gemm, or weight or bias of a chain
     * Conv, read by nothing else, whose input can be read for every sample
     * (cached, or a float graph input) */
    for (size_t q = 0; q < m->n_params; q++) {
        if (sh->pc_off[q + 1] - sh->pc_off[q] != 1) continue;
        int k = sh->pc_step[sh->pc_off[q]];
        const bf__step *s = &p->steps[k];
        bf__gemm_info g;
        int vq = m->param_vals[q], av = s->node->in[0];
        if (sh->chain_next[k] == NOT_CHAIN || av == vq) continue;
        if (bf__gemm_params(s, &g)) {
            if (s->node->in[1] != vq && !(s->n_in > 2 && s->node->in[2] == vq && g.c_cs && !g.c_rs)) continue;
        } else if (!bf__conv_shape(s, &c, &mm, &isp, &osp) ||
                   (s->node->in[1] != vq && !(s->n_in > 2 && s->node->in[2] == vq))) {
            continue;
        }
        if (p->val_step[av] == -1) {
            const bf_tensor *f = bf__evaluator_feed(ev, (size_t)m->values[av].index);
            if (!f || f->dtype != BF_F32 || f->ndim < 1 || f->dims[0] < sh->samples ||
                bf_tensor_numel(f) / f->dims[0] != width_of(p, av))
                continue;
            sh->chain_rows[av] = f->data;
        } else if (!golden_rows(sh, av)) {
            continue;
        }
        sh->chain_at[q] = k;
    }
    /* the rounding bounds and linear segments serve the near-exact updates
     * only (one product per sample for the segments' maps) */
    bf_status st = sh->near_exact ? rounding_bounds(sh, p, err) : BF_OK;
    if (st == BF_OK) st = b_copies(sh, p, err);
    if (st == BF_OK && sh->near_exact) st = bf__lin_setup(sh, p, err);
    return st == BF_OK ? column_copies(sh, p, err) : st;
}

bf_status bf__chain_possible(bf__dx_shared *sh, bf_plan *plan[2], const unsigned char *has, int *possible,
                             bf_error *err)
{
    *possible = 1;
    if (!(sh->chain_next = bf__malloc((sh->n_steps + 1) * sizeof *sh->chain_next))) return bf__dx_oom(err);
    *possible = link_chains(sh, plan, (held){.has = has}, 0) * sh->samples <= BF__CHAIN_MAX_FLOATS;
    bf__free(sh->chain_next);
    sh->chain_next = NULL;
    return BF_OK;
}

void bf__chain_shared_free(bf__dx_shared *sh)
{
    bf__lin_free(sh);
    for (size_t v = 0; sh->chain_amax && v < sh->m->n_values; v++) bf__free(sh->chain_amax[v]);
    for (size_t k = 0; sh->chain_colabs && k < sh->n_steps; k++) bf__free(sh->chain_colabs[k]);
    for (size_t k = 0; sh->chain_bt && k < sh->n_steps; k++) bf__free(sh->chain_bt[k]);
    bf__free(sh->chain_bt);
    for (size_t k = 0; sh->chain_cols_in && k < sh->n_steps; k++) bf__free(sh->chain_cols_in[k]);
    for (size_t k = 0; sh->chain_cols_out && k < sh->n_steps; k++) bf__free(sh->chain_cols_out[k]);
    bf__free(sh->chain_cols_in);
    bf__free(sh->chain_cols_out);
    bf__free(sh->chain_amax);
    bf__free(sh->chain_colabs);
    bf__free(sh->chain_next);
    bf__free(sh->chain_at);
    bf__free(sh->chain_rows);
}

/* --- per worker */

bf_status bf__chain_init(bf__dx *dx, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    if (!sh->chain_width) return BF_OK;
    size_t w = (size_t)sh->chain_width, all = (size_t)sh->samples * w;
    for (int t = 0; t < 3; t++) {
        dx->cv[t] = bf__aligned_alloc(all * sizeof(float) + 64);
        dx->crow[t] = bf__malloc(((size_t)sh->samples + 1) * sizeof(int64_t));
        dx->ccol[t] = bf__malloc((w + 1) * sizeof(int));
        if (!dx->cv[t] || !dx->crow[t] || !dx->ccol[t]) return bf__dx_oom(err);
    }
    for (int t = 0; t < 2; t++) {
        dx->wv[t] = bf__aligned_alloc(w * sizeof(float) + 64);
        dx->wcol[t] = bf__malloc((w + 1) * sizeof(int));
    }
    dx->ca = bf__aligned_alloc(2 * BF__CHAIN_ROWS * w * sizeof(float) + 64);
    dx->cb = bf__aligned_alloc(BF__UPDATE_MAX_COLS * (w + BF__CHAIN_ROWS) * sizeof(float) + 64);
    dx->ctap = bf__malloc((w + 1) * sizeof(int32_t));
    dx->ctapm = bf__malloc((w + 1) * sizeof(float));
    dx->cbias = bf__malloc((w + 1) * sizeof(float));
    for (int t = 0; t < 2; t++)
        if (!dx->wv[t] || !dx->wcol[t]) return bf__dx_oom(err);
    if (!dx->ca || !dx->cb || !dx->ctap || !dx->ctapm || !dx->cbias) return bf__dx_oom(err);
    return BF_OK;
}

void bf__chain_free(bf__dx *dx)
{
    for (int t = 0; t < 3; t++) {
        bf__free(dx->cv[t]);
        bf__free(dx->crow[t]);
        bf__free(dx->ccol[t]);
    }
    for (int t = 0; t < 2; t++) {
        bf__free(dx->wv[t]);
        bf__free(dx->wcol[t]);
    }
    bf__free(dx->ctap);
    bf__free(dx->ctapm);
    bf__free(dx->cbias);
    bf__free(dx->ca);
    bf__free(dx->cb);
}

const double *bf__dx_work(const bf__dx *dx) { return dx->work; }

void bf__dx_chain_counts(const bf__dx *dx, int64_t *trials, int64_t *exact, int64_t *linear)
{
    *trials = dx->n_chain;
    *exact = dx->n_chain_exact;
    *linear = dx->n_linear;
}
