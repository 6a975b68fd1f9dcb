/* Chain mode: one corrupted Gemm or Conv weight whose effect runs down a
 * chain of per-sample steps to the model's output, computed over the whole
 * eval set at once on the changed elements only.
 *
 * Where it applies: the faulty parameter is B or C of one Gemm, or the
 * weight or bias of one Conv, and from that step's output to the graph
 * output every value has exactly one reader: a Gemm (input A; B and C
 * parameters), a float unary map (Relu, Sigmoid, ...), a MaxPool or
 * AveragePool, or a step that only renames a sample's elements (Reshape,
 * Flatten, Squeeze, Unsqueeze, Identity keeping dimension 0): the tail of
 * an MLP, a CNN's last Conv and classifier, a DLRM's top MLP. Every step of
 * such a chain computes a sample's output from that sample's input alone,
 * and bf__sgemm (and the Conv built on it) gives an element the same bits
 * whatever the product's shape (ops/sgemm.h), so rows, columns and
 * channels can be computed apart from their batch.
 *
 * What it saves over diffexec.c's batch by batch: no golden tensor is
 * copied or compared in full. The corrupted Gemm recomputes its one output
 * column (exact); the corrupted Conv moves its one channel as an update; a
 * unary map runs on the changed elements, a pooling step on the changed
 * planes; a Gemm whose input changed in a few columns applies the change
 * as a rank-k update (near-exact: a few ulps), else recomputes the changed
 * rows (exact); rows whose values come back golden drop out.
 *
 * Exactness. An update rounds differently from the product by a few ulps
 * of the values it moves, whatever the size of the change (huge changes,
 * which could overflow one way and not the other, are computed exactly).
 * That can change an outcome only where the question is whether an output
 * moved at all (masked or not): a prediction or metric moves by ulps. So a
 * trial that took an update needs an exact witness: the samples whose
 * outputs moved most are recomputed exactly, one at a time, through the
 * whole chain, and the first whose outputs still move proves the trial not
 * masked (its exact outputs replace the update's). Without one (or if the
 * updates left no output moved) the whole chain is recomputed exactly, and
 * the trial is what a full pass gives. */
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/alloc.h"
#include "diff/diff_impl.h"
#include "exec/ops/sgemm.h"

#define CHAIN_ROWS 64            /* rows per exact product */
#define CHAIN_MAX_FLOATS (1 << 24)   /* per buffer: the eval set times the widest value */
#define COLUMN_COPY_FLOATS (1 << 22) /* column-major copies of chain-start Gemms' values, in all */
#define WITNESSES 3              /* samples tried exactly before the whole chain is */
#define UPDATE_MAX_COLS 64       /* a Gemm input changed in more columns: exact rows */
/* A sample whose outputs an update moved by this much (relative) is all
 * but sure to move when computed exactly (an update rounds by a few ulps
 * of the terms): the witness scan takes the first such one instead of
 * ranking every changed sample. Should it not move after all, the other
 * candidates, then the exact rerun, still decide. */
#define WITNESS_CLEAR 0x1p-14

/* The changed rows of a value: rows ascending, each with its `ncol` changed
 * columns col[] (the others golden), or its whole row (ncol 0). */
typedef struct cval {
    int64_t n;
    int64_t *row;
    float *v;
    int ncol;
    int *col;                    /* ascending */
    int width;
} cval;

/* --- shared: which steps start a chain (diffshared.c calls this) */

static int64_t width_of(const bf_plan *p, int v) { return bf_tensor_numel(&p->vals[v]) / bf_plan_batch(p); }

/* Golden row r of value v (width floats). The cache keeps a value's batches
 * one after the other, so its rows are contiguous over the whole eval set,
 * as a graph input's are in the dataset: chain_rows has row 0 of each. */
static const float *gold_row(const bf__dx_shared *sh, int v, int64_t r, int64_t width)
{
    return sh->chain_rows[v] + r * width;
}

static int cached_everywhere(const bf__dx_shared *sh, int v) { return bf__gcache_has(sh->gc, v); }

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
    static const char *const ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
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
static int handoff_ok(const bf__dx_shared *sh, bf_plan *plan[2], int o)
{
    for (int t = 0; t < 2; t++) {
        if (!plan[t]) continue;
        const bf_tensor *v = &plan[t]->vals[o];
        if (v->dtype != BF_F32 || v->ndim < 1 || v->dims[0] != bf_plan_batch(plan[t])) return 0;
    }
    return sh->first_use[o] >= 0 && cached_everywhere(sh, o);
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
            const float *a = gold_row(sh, av, r, w);
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
        const float *rows = gold_row(sh, v, r0, width);
        for (int64_t c = 0; c < width; c++)
            for (int64_t r = r0; r < r1; r++) t[c * sh->samples + r] = rows[(r - r0) * width + c];
    }
    return t;
}

/* The corrupted Gemm's column update reads one input column and one
 * output column over the eval set: from rows a cache line apart each;
 * from these copies, one line per 16 samples, and in vectors. At most
 * COLUMN_COPY_FLOATS in all (16 MiB: on dlrm_large, the first Gemms in
 * parameter order), beyond which faulty_column reads the rows. */
static bf_status column_copies(bf__dx_shared *sh, const bf_plan *p, bf_error *err)
{
    const bf_model *m = sh->m;
    sh->chain_cols_in = bf__calloc(sh->n_steps + 1, sizeof *sh->chain_cols_in);
    sh->chain_cols_out = bf__calloc(sh->n_steps + 1, sizeof *sh->chain_cols_out);
    if (!sh->chain_cols_in || !sh->chain_cols_out) return bf__dx_oom(err);
    int64_t room = COLUMN_COPY_FLOATS;
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

bf_status bf__chain_setup(bf__dx_shared *sh, bf_evaluator *ev, bf_plan *plan[2], bf_error *err)
{
    const bf_model *m = sh->m;
    const bf_plan *p = plan[0];
    sh->chain_next = bf__malloc((sh->n_steps + 1) * sizeof *sh->chain_next);
    sh->chain_at = bf__malloc((m->n_params + 1) * sizeof *sh->chain_at);
    sh->chain_rows = bf__calloc(m->n_values + 1, sizeof *sh->chain_rows);
    if (!sh->chain_next || !sh->chain_at || !sh->chain_rows) return bf__dx_oom(err);
    for (size_t v = 0; v < m->n_values; v++)
        if (p->val_step[v] >= 0 && bf__gcache_stored(sh->gc, (int64_t)v)) sh->chain_rows[v] = bf__gcache_block(sh->gc, (int64_t)v, 0);
    sh->chain_rows[sh->out_val] = sh->golden;
    for (size_t q = 0; q < m->n_params; q++) sh->chain_at[q] = -1;
    const bf_tensor *out = &p->vals[sh->out_val];
    int out_ok = out->ndim >= 1 && out->dims[0] == sh->batch && width_of(p, sh->out_val) == sh->out_cols &&
                 out->dtype == BF_F32;
    int64_t widest = 0, isp, osp, c, mm;
    for (size_t k = sh->n_steps; k-- > 0;) {
        const bf__step *s = &p->steps[k];
        bf__gemm_info g;
        sh->chain_next[k] = NOT_CHAIN;
        int gemm = gemm_link(sh, plan, k, &g), conv = bf__conv_shape(s, &c, &mm, &isp, &osp);
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
                    cached_everywhere(sh, o))
                    sh->chain_next[k] = j;
            }
            if (sh->chain_next[k] == NOT_CHAIN && handoff_ok(sh, plan, o)) sh->chain_next[k] = HANDOFF;
            if (sh->chain_next[k] == NOT_CHAIN) continue;
        }
        int64_t w = width_of(p, o), wi = s->node->in[0] >= 0 ? width_of(p, s->node->in[0]) : 0;
        if (w > widest) widest = w;
        if ((gemm || conv || pool) && wi > widest) widest = wi;
    }
    if (widest * sh->samples > CHAIN_MAX_FLOATS) return BF_OK;   /* no chains: buffers too large */
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
    bf_status st = rounding_bounds(sh, p, err);
    if (st == BF_OK) st = b_copies(sh, p, err);
    if (st == BF_OK) st = bf__lin_setup(sh, p, err);
    return st == BF_OK ? column_copies(sh, p, err) : st;
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
    dx->ca = bf__aligned_alloc(2 * CHAIN_ROWS * w * sizeof(float) + 64);
    dx->cb = bf__aligned_alloc(UPDATE_MAX_COLS * (w + CHAIN_ROWS) * sizeof(float) + 64);
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

/* --- a trial */

typedef struct pass {
    bf__dx *dx;
    const bf__dx_weight *w;      /* the trial's fault */
    float *v[3];                 /* three buffers of changed rows (a witness: two) */
    int64_t *row[3];
    int *col[3];
    int exact;                   /* no updates: every step computed exactly */
    int approx;                  /* an update was used */
} pass;

static float c_term(const bf__gemm_info *g, const float *c, int j)
{
    return g->use_c ? g->beta * c[(int64_t)j * g->c_cs] : 0.0f;
}

/* c ? a : b by the bits, with no branch (compilers turn the conditional
 * into one, which mispredicts on data). */
static inline float pick(int c, float a, float b)
{
    uint32_t x, y, m = 0u - (uint32_t)(c != 0);
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    x = (x & m) | (y & ~m);
    memcpy(&a, &x, sizeof a);
    return a;
}

/* Whether a ReLU certainly clamps the exact value whose update gave v, so
 * that its output is golden's: v is below zero by more than the rounding of
 * the update and of the product can move it (`terms`: that of the
 * product's terms, from a bound on the sum of their magnitudes), and the
 * golden value's ReLU is +0 (a golden -0 passes as -0). Then whether that
 * element moved at all no longer rests on the update. */
static int relu_certain(float v, float yg, double terms)
{
    const double u = 0x1p-24;
    double bound = terms + 4 * u * (fabs((double)v) + fabs((double)yg));
    return ((double)v + bound < 0) & ((yg < 0) | ((yg == 0) & !signbit(yg)));   /* no branches: see faulty_column */
}

/* The rounding of a chain of k fused multiply-adds (and a bias) from
 * golden terms and faulty ones, each of magnitudes summing to at most s:
 * gamma_{k+1} (s + s), with room for gamma's denominator. */
static double chain_rounding(int64_t k, double s) { return 2.02 * (double)(k + 1) * 0x1p-24 * s; }

static int relu_next(const bf__dx_shared *sh, const bf_plan *p, size_t k)
{
    return sh->chain_next[k] >= 0 && bf__unary_relu(&p->steps[sh->chain_next[k]]);
}

/* Drops the rows of x that equal golden value v's. Whether a row came
 * back golden is data: the rows are kept by index arithmetic, not by a
 * branch that mispredicts. */
static void drop_golden(const bf__dx_shared *sh, int v, cval *x)
{
    int64_t kept = 0, w = x->ncol ? x->ncol : x->width;
    for (int64_t t = 0; t < x->n; t++) {
        const float *g = gold_row(sh, v, x->row[t], x->width), *e = x->v + t * w;
        int same = 1;
        if (x->ncol)
            for (int c = 0; c < x->ncol; c++) same &= bf__same_bits(&e[c], &g[x->col[c]], 1);
        else
            same = bf__same_bits(e, g, w);
        x->row[kept] = x->row[t];
        if (kept != t) memcpy(x->v + kept * w, e, (size_t)w * sizeof *e);   /* rows apart: no overlap */
        kept += !same;
    }
    x->n = kept;
}

/* The corrupted Gemm's column j, for every sample (only < 0) or sample
 * `only`, into x, recomputed exactly. */
static void exact_column(pass *ps, size_t k, int j, int64_t only, cval *x)
{
    bf__dx *dx = ps->dx;
    const bf__dx_shared *sh = dx->sh;
    const bf__step *s = &dx->plan[0]->steps[k];
    bf__gemm_info g;
    bf__gemm_params(s, &g);
    int av = s->node->in[0], o = s->node->out[0];
    const float *b = dx->plan[0]->vals[s->node->in[1]].data;
    const float *c = s->n_in > 2 && s->node->in[2] >= 0 ? dx->plan[0]->vals[s->node->in[2]].data : NULL;
    const float *bp = g.trans_b ? b + (int64_t)j * g.k : b + j;
    int ldb = g.trans_b ? g.k : g.n;
    float ct = c_term(&g, c, j);
    int64_t lo = only < 0 ? 0 : only, hi = only < 0 ? sh->samples : only + 1;
    /* Runs of rows, read in place (a value's golden rows are contiguous
     * over the eval set): every row, the ones whose input at the weight is
     * zero too (they come out golden and drop), which costs less than
     * copying the others out. */
    float *col = dx->ca;
    for (int64_t r0 = lo; r0 < hi; r0 += CHAIN_ROWS) {
        int m = hi - r0 < CHAIN_ROWS ? (int)(hi - r0) : CHAIN_ROWS;
        for (int i = 0; i < m; i++) col[i] = ct;
        bf__sgemm(0, g.trans_b, m, 1, g.k, g.alpha, gold_row(sh, av, r0, g.k), g.k, bp, ldb, g.use_c, col, 1);
        const float *yg = gold_row(sh, o, r0, g.n) + j;
        for (int i = 0; i < m; i++) {
            x->v[x->n] = col[i];
            x->row[x->n] = r0 + i;
            x->n += !bf__same_bits(&col[i], &yg[(int64_t)i * g.n], 1);
        }
    }
}

/* One row of the column update: e = yg + d, d = dw a, unless d is 0 or
 * huge against yg (HUGE_CHANGE max(|yg|, 1), NaN too: *huge, and e stays
 * yg for now); *unsure where d underflowed to 0 from a nonzero input (the
 * product may still move an ulp). Flags and a bitwise select, no
 * branches. */
/* |d| > HUGE_CHANGE max(|yg|, 1), NaN too, as two flags (a conditional
 * here compiles to a branch that mispredicts). */
static inline int huge_change(float d, float yg)
{
    return !(fabsf(d) <= (float)HUGE_CHANGE * fabsf(yg)) & !(fabsf(d) <= (float)HUGE_CHANGE);
}

static inline void update_one(float a, float yg, float dw, float *e, float *gv, int *huge, int *unsure)
{
    float d = dw * a;
    int big = huge_change(d, yg);
    int moved = (d != 0.0f) & !big;
    *e = pick(moved, yg + d, yg);
    *gv = yg;
    *huge = big;
    *unsure = (d == 0.0f) & (a != 0.0f);
}

/* update_one over n rows of unit stride; returns whether any was huge. */
static int column_update(const float *a, const float *yg, float dw, int64_t n, float *e, float *gv, int *unsure)
{
    int huge = 0, u = 0;
    for (int64_t r = 0; r < n; r++) {
        int h, q;
        update_one(a[r], yg[r], dw, &e[r], &gv[r], &h, &q);
        huge |= h;
        u |= q;
    }
    *unsure |= u;
    return huge;
}

/* The corrupted Gemm's column j over the eval set as an update: row r
 * moves by alpha A[r][kk] dB (beta dC for the bias), one multiply-add
 * instead of a product of depth K (near-exact; see the top of this file).
 * A row whose change is huge against its value, and a change that is not
 * finite, are computed exactly. Where a ReLU reads the column, a change it
 * certainly clamps is no change (the bound of relu_certain, with the
 * faulty weight's magnitude added to the column's). *relu_done: the ReLU
 * that reads the column was applied too (the update's rows compared with
 * the golden column's ReLU, as relu_link would, without reading the
 * ReLU's golden rows, one cache line per sample). */
static void faulty_column(pass *ps, size_t k, int j, int kk, int64_t only, cval *x, int *relu_done)
{
    bf__dx *dx = ps->dx;
    const bf__dx_shared *sh = dx->sh;
    const bf__step *s = &dx->plan[0]->steps[k];
    const bf__dx_weight *w = ps->w;
    bf__gemm_info g;
    bf__gemm_params(s, &g);
    x->n = 0;
    x->ncol = 1;
    x->col[0] = j;
    x->width = g.n;
    *relu_done = 0;
    double dw = (double)w->new_value - (double)w->old_value;
    float dwf = (float)(dw * (kk >= 0 ? g.alpha : g.beta));
    if (ps->exact || only >= 0 || !isfinite(dwf)) {
        exact_column(ps, k, j, only, x);
        return;
    }
    int av = s->node->in[0], o = s->node->out[0];
    const float *c = s->n_in > 2 && s->node->in[2] >= 0 ? dx->plan[0]->vals[s->node->in[2]].data : NULL;
    const float *am = sh->chain_amax[av], *cs = sh->chain_colabs[k];
    int relu_after = relu_next(sh, dx->plan[0], k), relu = relu_after && am && cs;
    double ct = fabs((double)c_term(&g, c, j)), dabs = fabs((double)dwf);
    int approx0 = ps->approx;
    /* a zero input, or a zero's sign flipped: the product's zero term may
     * carry the other sign, which only the product tells */
    ps->approx |= signbit(w->new_value) != signbit(w->old_value);
    /* relu_certain's bound for row r: lead * |input|max(r) + rest */
    double lead = (double)(cs ? cs[j] : 0) + (kk >= 0 ? dabs : 0), rest = ct + (kk >= 0 ? 0 : dabs);
    float *e = x->v, *gv = ps->v[1];   /* each row's value, and its golden one */
    int huge = 0, unsure = 0;
    /* the input column (1 for the bias) and the output column: from their
     * copies, or strided through the rows */
    static const float one = 1.0f;
    const float *ap = kk < 0 ? &one : sh->chain_cols_in[k] ? sh->chain_cols_in[k] + (int64_t)kk * sh->samples
                                                           : gold_row(sh, av, 0, g.k) + kk;
    const float *yp = sh->chain_cols_out[k] ? sh->chain_cols_out[k] + (int64_t)j * sh->samples : gold_row(sh, o, 0, g.n) + j;
    int64_t as = kk < 0 ? 0 : sh->chain_cols_in[k] ? 1 : g.k, ys = sh->chain_cols_out[k] ? 1 : g.n;
    /* The update, branch-free over the eval set (whether an input is zero
     * or a change huge is data: a branch on it mispredicts), in vectors
     * with unit strides; the flags after. */
    if (as == 1 && ys == 1)
        huge = column_update(ap, yp, dwf, sh->samples, e, gv, &unsure);
    else
        for (int64_t r = 0; r < sh->samples; r++) {
            int h, u;
            update_one(ap[r * as], yp[r * ys], dwf, &e[r], &gv[r], &h, &u);
            huge |= h;
            unsure |= u;
        }
    /* Where a ReLU reads the column, a change it certainly clamps is no
     * change (its output is golden's +0 either way): the trial rests on
     * the update only from the first change that is not certainly
     * clamped, which ends the scan. */
    for (int64_t r = 0; r < sh->samples && !unsure; r++) {
        /* a change the sum absorbed (e == yg) counts: the product may not */
        float d = dwf * ap[r * as];
        if (d == 0.0f || d != d) continue;   /* nothing moved; NaN: huge, computed exactly */
        unsure = !relu || !relu_certain(e[r], gv[r], chain_rounding(g.k, (double)am[r] * lead + rest));
    }
    ps->approx |= unsure;
    if (huge) {
        /* the huge rows exactly: a few one by one, more as the whole
         * column (a large exponent flip makes every row huge) */
        int64_t nh = 0, at[WITNESSES];
        for (int64_t r = 0; r < sh->samples && nh <= WITNESSES; r++)
            if (huge_change(dwf * ap[r * as], gv[r]) && nh++ < WITNESSES) at[nh - 1] = r;
        if (nh > WITNESSES) {
            ps->approx = approx0 | (signbit(w->new_value) != signbit(w->old_value));
            exact_column(ps, k, j, -1, x);
            return;
        }
        for (int64_t t = 0; t < nh; t++) {
            cval one = {.row = x->row, .v = dx->wv[0], .col = dx->wcol[0]};
            exact_column(ps, k, j, at[t], &one);
            e[at[t]] = one.n ? one.v[0] : gv[at[t]];
        }
    }
    /* the rows that moved, in place (n <= r), through the ReLU if one
     * reads the column (ops/elementwise.c's, x < 0 ? +0 : x) */
    int fuse = *relu_done = relu_after;
    int64_t n = 0;
    for (int64_t r = 0; r < sh->samples; r++) {
        float y = pick(fuse & (e[r] < 0.0f), 0.0f, e[r]), yg = pick(fuse & (gv[r] < 0.0f), 0.0f, gv[r]);
        x->v[n] = y;
        x->row[n] = r;
        n += !bf__same_bits(&y, &yg, 1);
    }
    x->n = n;
}

/* A ReLU on the changed rows of x, fused with drop_golden: each row's
 * ReLU written to where it is kept, compared with the golden output as it
 * goes. The ReLU is ops/elementwise.c's, x < 0 ? +0 : x, element for
 * element (NaN and -0 pass through). */
static void relu_link(const bf__dx_shared *sh, int v, cval *x)
{
    int64_t kept = 0, w = x->ncol ? x->ncol : x->width;
    for (int64_t t = 0; t < x->n; t++) {
        const float *g = gold_row(sh, v, x->row[t], x->width), *e = x->v + t * w;
        float *o = x->v + kept * w;
        uint32_t diff = 0;
        for (int64_t i = 0; i < w; i++) {
            float y = e[i] < 0.0f ? 0.0f : e[i], gi = g[x->ncol ? x->col[i] : i];
            uint32_t a, b;
            memcpy(&a, &y, sizeof a);
            memcpy(&b, &gi, sizeof b);
            diff |= a ^ b;
            o[i] = y;   /* kept <= t: row t is read before it is overwritten */
        }
        x->row[kept] = x->row[t];
        kept += diff != 0;
    }
    x->n = kept;
}

static void unary_link(pass *ps, size_t k, cval *x)
{
    const bf__step *s = &ps->dx->plan[0]->steps[k];
    if (bf__unary_relu(s)) {
        relu_link(ps->dx->sh, s->node->out[0], x);
        return;
    }
    int64_t n = x->n * (x->ncol ? x->ncol : x->width);
    bf_tensor t = {.dtype = BF_F32, .ndim = 1, .dims = {n}, .data = x->v};
    const bf_tensor *in[1] = {&t};
    bf_tensor *out[1] = {&t};
    bf__ctx c = {.node = s->node, .params = s->params, .n_in = 1, .n_out = 1, .in = in, .out = out};
    if (n) s->node->op->run(&c, NULL);   /* elementwise: in place is safe */
    drop_golden(ps->dx->sh, s->node->out[0], x);
}

/* Row t of x as a whole input row of width K, into a. */
static void input_row(const bf__dx_shared *sh, int v, const cval *x, int64_t t, float *a)
{
    if (!x->ncol) {
        memcpy(a, x->v + t * x->width, (size_t)x->width * sizeof *a);
        return;
    }
    memcpy(a, gold_row(sh, v, x->row[t], x->width), (size_t)x->width * sizeof *a);
    for (int c = 0; c < x->ncol; c++) a[x->col[c]] = x->v[t * x->ncol + c];
}

/* Exact rows todo[0..nt) of a Gemm (input rows from x) into y, gathered
 * into one product. */
static void exact_rows(bf__dx *dx, const bf__gemm_info *g, const float *b, int tb, const float *c, int av,
                       const cval *x, const int64_t *todo, int nt, cval *y)
{
    const bf__dx_shared *sh = dx->sh;
    const int K = g->k, N = g->n;
    float *ab = dx->ca, *yb = dx->ca + (int64_t)CHAIN_ROWS * sh->chain_width, *cr = dx->cbias;
    for (int n = 0; n < N; n++) cr[n] = c_term(g, c, n);
    if (!x->ncol && todo[nt - 1] - todo[0] == nt - 1) {
        /* whole rows, one after the other: the product reads and writes
         * them in place */
        float *yr = y->v + todo[0] * N;
        for (int i = 0; i < nt; i++) memcpy(yr + (int64_t)i * N, cr, (size_t)N * sizeof *cr);
        bf__sgemm(0, tb, nt, N, K, g->alpha, x->v + todo[0] * K, K, b, tb ? K : N, g->use_c, yr, N);
        return;
    }
    for (int i = 0; i < nt; i++) {
        input_row(sh, av, x, todo[i], ab + (int64_t)i * K);
        memcpy(yb + (int64_t)i * N, cr, (size_t)N * sizeof *cr);
    }
    bf__sgemm(0, tb, nt, N, K, g->alpha, ab, K, b, tb ? K : N, g->use_c, yb, N);
    for (int i = 0; i < nt; i++) memcpy(y->v + todo[i] * N, yb + (int64_t)i * N, (size_t)N * sizeof *yb);
}

/* Row t of a Gemm's output y (its update, n values), where a ReLU reads
 * it: each element the ReLU certainly clamps goes back to golden. 1 if
 * every element did (the row then rests on no update), 0 otherwise (or
 * with no ReLU). */
static int clamped(const bf__dx_shared *sh, size_t step, int relu, int k, int av, int o, const cval *x, int64_t t,
                   float *y, int n, const bf__gemm_info *g, const float *c)
{
    const float *am = sh->chain_amax[av], *cs = sh->chain_colabs[step];
    if (!relu || !am || !cs) return 0;
    const float *yg = gold_row(sh, o, x->row[t], n);
    int maybe = 1;
    for (int j = 0; j < n; j++)   /* cheap first: every element clamped by the ReLU, as far as y shows */
        maybe &= bf__same_bits(&y[j], &yg[j], 1) | ((y[j] < 0) & (yg[j] <= 0));
    if (!maybe) return 0;
    float amax = am[x->row[t]];
    for (int q = 0; q < (x->ncol ? x->ncol : x->width); q++) {
        float a = fabsf(x->v[t * (x->ncol ? x->ncol : x->width) + q]);
        amax = a > amax || a != a ? a : amax;
    }
    int all = 1;
    for (int j = 0; j < n; j++) {
        double cj = g ? fabs((double)c_term(g, c, j)) : 0;
        if (relu_certain(y[j], yg[j], chain_rounding(k, (double)amax * cs[j] + cj))) y[j] = yg[j];
        else all = 0;
    }
    return all;
}

/* A Gemm reading the changed value x: its changed rows into y. An input
 * changed in a few columns moves each row by alpha D B[cols, :], applied
 * to the golden rows as one product of inner dimension ncol (near-exact;
 * see the top of this file); a row whose change moves some output by more
 * than HUGE_CHANGE (in absolute terms, so at least as strict as against
 * the values' scale: a float product could then overflow where the update
 * does not) and every row of a dense change are computed exactly. */
static void gemm_link_run(pass *ps, size_t k, const cval *x, cval *y)
{
    bf__dx *dx = ps->dx;
    const bf__dx_shared *sh = dx->sh;
    const bf__step *s = &dx->plan[0]->steps[k];
    bf__gemm_info g;
    bf__gemm_params(s, &g);
    const int K = g.k, N = g.n, nc = x->ncol;
    int av = s->node->in[0], o = s->node->out[0];
    const float *b = dx->plan[0]->vals[s->node->in[1]].data;
    const float *c = s->n_in > 2 && s->node->in[2] >= 0 ? dx->plan[0]->vals[s->node->in[2]].data : NULL;
    const float *bx = sh->chain_bt[k] ? sh->chain_bt[k] : b;   /* for exact rows */
    int tb = sh->chain_bt[k] ? 0 : g.trans_b;
    y->n = x->n;
    y->ncol = 0;
    y->width = N;
    memcpy(y->row, x->row, (size_t)x->n * sizeof *y->row);
    int64_t todo[CHAIN_ROWS];
    int nt = 0;
    /* the update reads ncol of K inputs: worth it below a quarter */
    if (!ps->exact && nc && nc <= UPDATE_MAX_COLS && 4 * nc <= K) {
        float *bc = dx->cb, *d = bc + (int64_t)nc * N;   /* B's changed rows; D, a chunk's */
        double most = 0;
        for (int t = 0; t < nc; t++)
            for (int n = 0; n < N; n++) {
                float e = g.trans_b ? b[(int64_t)n * K + x->col[t]] : b[(int64_t)x->col[t] * N + n];
                bc[(int64_t)t * N + n] = e;
                if (fabsf(e) > most) most = fabsf(e);
            }
        most *= fabs(g.alpha);
        int relu = relu_next(sh, dx->plan[0], k);
        for (int64_t t0 = 0; t0 < x->n; t0 += CHAIN_ROWS) {
            int m = x->n - t0 < CHAIN_ROWS ? (int)(x->n - t0) : CHAIN_ROWS;
            for (int i = 0; i < m; i++) {
                int64_t t = t0 + i;
                const float *ag = gold_row(sh, av, x->row[t], K);
                memcpy(y->v + t * N, gold_row(sh, o, x->row[t], N), (size_t)N * sizeof(float));
                int huge = 0;
                for (int q = 0; q < nc; q++) {
                    double dd = (double)x->v[t * nc + q] - (double)ag[x->col[q]];
                    huge |= !(fabs(dd) * most <= HUGE_CHANGE);   /* NaN too */
                    d[(int64_t)i * nc + q] = huge ? 0.0f : (float)dd;
                }
                if (huge) todo[nt++] = t;
            }
            bf__sgemm(0, 0, m, N, nc, g.alpha, d, nc, bc, N, 1, y->v + t0 * N, N);
            for (int i = 0, h = 0; i < m; i++) {
                int64_t t = t0 + i;
                if (h < nt && todo[h] == t) { h++; continue; }   /* huge: exact below */
                /* once the trial rests on an update, clamping proves nothing more */
                ps->approx = ps->approx || !clamped(sh, k, relu, K, av, o, x, t, y->v + t * N, N, c ? &g : NULL, c);
            }
            if (nt) exact_rows(dx, &g, bx, tb, c, av, x, todo, nt, y);
            nt = 0;
        }
    } else {
        for (int64_t t = 0; t < x->n; t++) {
            todo[nt++] = t;
            if (nt == CHAIN_ROWS || t == x->n - 1) {
                exact_rows(dx, &g, bx, tb, c, av, x, todo, nt, y);
                nt = 0;
            }
        }
    }
    /* a unary map next drops the rows that came back golden anyway, on
     * its own output: one pass over the rows fewer */
    int next = sh->chain_next[k];
    if (next < 0 || !bf__unary_f32(&dx->plan[0]->steps[next])) drop_golden(sh, o, y);
}

/* bf__conv_update (diff_impl.h), written once for both copies. */
static inline __attribute__((always_inline)) int conv_update_body(const float *x, const int32_t *tap,
                                                                  const float *tapm, const float *yg, float dw,
                                                                  int64_t n, float *e, int *moved)
{
    int mv = 0, huge = 0;
    for (int64_t p = 0; p < n; p++) {
        float d = dw * (x[tap[p]] * tapm[p]), mag = fabsf(yg[p]), lim = (float)HUGE_CHANGE * (mag > 1.0f ? mag : 1.0f);
        huge |= (fabsf(d) > lim) | (d != d);
        mv |= d != 0.0f;
        e[p] = d != 0.0f ? yg[p] + d : yg[p];
    }
    *moved = mv;
    return huge;
}

static int conv_update_ref(const float *x, const int32_t *tap, const float *tapm, const float *yg, float dw, int64_t n,
                           float *e, int *moved)
{
    return conv_update_body(x, tap, tapm, yg, dw, n, e, moved);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static int conv_update_avx2(const float *x, const int32_t *tap, const float *tapm,
                                                            const float *yg, float dw, int64_t n, float *e, int *moved)
{
    const __m256 vdw = _mm256_set1_ps(dw), one = _mm256_set1_ps(1.0f), hc = _mm256_set1_ps((float)HUGE_CHANGE);
    const __m256 zero = _mm256_setzero_ps(), abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 huge = zero, mv = zero;
    int64_t p = 0;
    for (; p + 8 <= n; p += 8) {   /* conv_update_body, eight lanes at a time */
        __m256i idx = _mm256_loadu_si256((const __m256i *)(tap + p));
        __m256 d = _mm256_mul_ps(vdw, _mm256_mul_ps(_mm256_i32gather_ps(x, idx, 4), _mm256_loadu_ps(tapm + p)));
        __m256 y = _mm256_loadu_ps(yg + p);
        __m256 lim = _mm256_mul_ps(hc, _mm256_max_ps(_mm256_and_ps(y, abs), one));   /* NaN |yg|: 1, as mag > 1 ? mag : 1 */
        huge = _mm256_or_ps(huge, _mm256_cmp_ps(_mm256_and_ps(d, abs), lim, _CMP_GT_OQ));
        huge = _mm256_or_ps(huge, _mm256_cmp_ps(d, d, _CMP_UNORD_Q));
        __m256 nz = _mm256_cmp_ps(d, zero, _CMP_NEQ_UQ);
        mv = _mm256_or_ps(mv, nz);
        _mm256_storeu_ps(e + p, _mm256_blendv_ps(y, _mm256_add_ps(y, d), nz));
    }
    int tail_moved, h = conv_update_body(x, tap + p, tapm + p, yg + p, dw, n - p, e + p, &tail_moved);
    *moved = tail_moved | (_mm256_movemask_ps(mv) != 0);
    return h | (_mm256_movemask_ps(huge) != 0);
}
#endif

int bf__conv_update(int simd, const float *x, const int32_t *tap, const float *tapm, const float *yg, float dw,
                    int64_t n, float *e, int *moved)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (simd && bf__sgemm_simd()) return conv_update_avx2(x, tap, tapm, yg, dw, n, e, moved);
#else
    (void)simd;
#endif
    return conv_update_ref(x, tap, tapm, yg, dw, n, e, moved);
}

/* The corrupted Conv's output channel, for every sample (only < 0) or
 * sample `only`, into x (its positions as the changed columns). Each
 * output position moves by the weight's change times the one input its tap
 * reads (a zero input: not at all), applied as an update; exactly, the
 * channel is recomputed (bf__conv_channel_n), as it is for a sample whose
 * change is huge against the values (HUGE_CHANGE). */
static void faulty_conv(pass *ps, size_t k, int64_t only, cval *x)
{
    bf__dx *dx = ps->dx;
    const bf__dx_shared *sh = dx->sh;
    const bf__step *s = &dx->plan[0]->steps[k];
    const bf__dx_weight *w = ps->w;
    int64_t C, M, isp, osp, oc, ic;
    int32_t *tap = dx->ctap;
    int slot = s->node->in[1] == sh->m->param_vals[w->param] ? 1 : 2;
    bf__conv_shape(s, &C, &M, &isp, &osp);
    bf__conv_taps(s, slot, w->index, &oc, &ic, tap);
    /* padding reads element 0 times 0 (a bias: element 0 of `one`
     * times 1): no branch in conv_update */
    float *tapm = dx->ctapm;
    static const float one[1] = {1.0f};
    for (int64_t p = 0; p < osp; p++) tapm[p] = tap[p] >= 0 ? 1.0f : 0.0f, tap[p] = tap[p] >= 0 ? tap[p] : 0;
    int av = s->node->in[0], o = s->node->out[0];
    const float *wt = dx->plan[0]->vals[s->node->in[1]].data;
    const float *bias = s->n_in > 2 && s->node->in[2] >= 0 ? dx->plan[0]->vals[s->node->in[2]].data : NULL;
    double dw = (double)w->new_value - (double)w->old_value;
    float dwf = (float)dw;
    int exact = ps->exact || !isfinite(dwf);
    /* a zero input adds the same zero for either weight of one sign: exact */
    int sign = signbit(w->new_value) != signbit(w->old_value);
    /* where a ReLU reads the channel: the magnitudes its terms sum to are
     * at most max|x| times those of its weights, and its bias */
    int relu = relu_next(sh, dx->plan[0], k);
    const float *am = sh->chain_amax[av];
    int64_t kc = bf_tensor_numel(&dx->plan[0]->vals[s->node->in[1]]) / M;
    double wabs = slot == 1 ? fabs(dw) : 0, babs = (bias ? fabs((double)bias[oc]) : 0) + (slot == 2 ? fabs(dw) : 0);
    for (int64_t i = 0; relu && i < kc; i++) wabs += fabs((double)wt[oc * kc + i]);
    x->n = 0;
    x->ncol = (int)osp;
    x->width = (int)(M * osp);
    for (int64_t p = 0; p < osp; p++) x->col[p] = (int)(oc * osp + p);
    float *yb = dx->ca;   /* CHAIN_ROWS samples of the step's output */
    int64_t lo = only < 0 ? 0 : only, hi = only < 0 ? sh->samples : only + 1;
    for (int64_t r0 = lo; r0 < hi;) {
        /* samples in one run: contiguous in the cache (one batch), at most CHAIN_ROWS */
        int64_t r1 = exact ? (r0 / sh->batch + 1) * sh->batch : r0 + 1;
        if (r1 > hi) r1 = hi;
        if (r1 - r0 > CHAIN_ROWS) r1 = r0 + CHAIN_ROWS;
        const float *xin = gold_row(sh, av, r0, C * isp);
        float *e = x->v + x->n * osp;
        int run = exact;
        if (!exact) {   /* the update, for sample r0 alone */
            const float *xc = slot == 1 ? xin + ic * isp : NULL, *yg = gold_row(sh, o, r0, M * osp) + oc * osp;
            int moved, huge = bf__conv_update(1, slot == 1 ? xc : one, tap, tapm, yg, dwf, osp, e, &moved);
            run |= huge;
            /* where a ReLU reads the channel, a change it certainly clamps
             * is no change; once the trial rests on an update, that proves
             * nothing more */
            if (moved && !huge && relu && am && !ps->approx) {
                double terms = chain_rounding(kc, (double)am[r0] * wabs + babs);
                moved = 0;
                const float *xs = slot == 1 ? xc : one;
                for (int64_t p = 0; p < osp; p++) {
                    /* no change at all: exact; a change the sum's rounding
                     * absorbed is not (the product may round the other way) */
                    if (dwf * (xs[tap[p]] * tapm[p]) == 0.0f) continue;
                    if (relu_certain(e[p], yg[p], terms)) e[p] = yg[p];
                    else moved = 1;
                }
            }
            ps->approx |= moved | sign;
        }
        if (run) {
            bf__conv_channel_n(s, oc, r1 - r0, xin, wt, bias, yb, dx->plan[0]->scratch);
            for (int64_t i = 0; i < r1 - r0; i++) memcpy(e + i * osp, yb + (i * M + oc) * osp, (size_t)osp * sizeof *e);
        }
        for (int64_t i = 0; i < r1 - r0; i++) {
            if (bf__same_bits(e + i * osp, gold_row(sh, o, r0 + i, M * osp) + oc * osp, osp)) continue;
            if (x->v + x->n * osp != e + i * osp) memmove(x->v + x->n * osp, e + i * osp, (size_t)osp * sizeof *e);
            x->row[x->n++] = r0 + i;
        }
        r0 = r1;
    }
}

/* A MaxPool or AveragePool reading the changed value x: the planes (one
 * sample's channel) x changed, pooled, into y. */
static void pool_link(pass *ps, size_t k, const cval *x, cval *y)
{
    bf__dx *dx = ps->dx;
    const bf__dx_shared *sh = dx->sh;
    const bf__step *s = &dx->plan[0]->steps[k];
    int64_t isp, osp;
    bf__pool_shape(s, &isp, &osp);
    int iv = s->node->in[0], o = s->node->out[0];
    int64_t planes = x->width / isp;
    /* the changed planes: the planes of x's columns (ascending), or all */
    int np = 0, *pl = y->col;   /* the plane list first, in y's column room */
    for (int c = 0; c < x->ncol; c++)
        if (np == 0 || x->col[c] >= (int64_t)(pl[np - 1] + 1) * isp) pl[np++] = (int)(x->col[c] / isp);
    if (!x->ncol)
        for (int64_t q = 0; q < planes; q++) pl[np++] = (int)q;
    y->n = x->n;
    y->width = (int)(planes * osp);
    y->ncol = x->ncol ? (int)(np * osp) : 0;
    memcpy(y->row, x->row, (size_t)x->n * sizeof *y->row);
    float *plane = dx->ca;
    int64_t yw = x->ncol ? np * osp : y->width;
    for (int64_t t = 0; t < x->n; t++) {
        const float *g = gold_row(sh, iv, x->row[t], x->width);
        int c = 0;
        for (int q = 0; q < np; q++) {
            const float *in;
            if (x->ncol) {
                int64_t base = (int64_t)pl[q] * isp;
                memcpy(plane, g + base, (size_t)isp * sizeof *plane);
                for (; c < x->ncol && x->col[c] < base + isp; c++) plane[x->col[c] - base] = x->v[t * x->ncol + c];
                in = plane;
            } else {
                in = x->v + t * x->width + (int64_t)pl[q] * isp;
            }
            bf__pool_plane(s, in, y->v + t * yw + (int64_t)q * osp, dx->plan[0]->scratch);
        }
    }
    if (x->ncol)   /* the plane list becomes the column list: each plane's positions */
        for (int q = np; q-- > 0;)
            for (int64_t u = osp; u-- > 0;) y->col[q * osp + u] = (int)(pl[q] * osp + u);
    drop_golden(sh, o, y);
}

/* Link i of a chain on the changed rows x: 1 if its output went to y, 0 if
 * it stayed in x (a unary map works in place; a step that only renames
 * elements does nothing). */
static int run_link(pass *ps, int i, cval *x, cval *y)
{
    const bf__step *ls = &ps->dx->plan[0]->steps[i];
    bf__gemm_info lg;
    int64_t isp, osp;
    if (bf__unary_f32(ls)) {
        unary_link(ps, (size_t)i, x);
        return 0;
    }
    if (bf__pool_shape(ls, &isp, &osp)) {
        pool_link(ps, (size_t)i, x, y);
        return 1;
    }
    if (bf__gemm_params(ls, &lg)) {
        gemm_link_run(ps, (size_t)i, x, y);
        return 1;
    }
    return 0;   /* the same elements under another shape */
}

/* Linear segment L from Gemm link i (difflinear.c) on x's changed rows:
 * each row the change keeps in the golden activation region goes to the
 * segment's end at once, into y (rows that come back golden dropped); the
 * others stay in x, in order, for the links. */
static void linear_link(pass *ps, const bf__lin *L, int i, cval *x, cval *y)
{
    const bf__dx_shared *sh = ps->dx->sh;
    const bf_plan *p = ps->dx->plan[0];
    int av = p->steps[i].node->in[0], o = p->steps[L->last].node->out[0];
    int64_t left;
    y->ncol = 0;
    y->width = L->n;
    y->n = bf__lin_rows(1, L, sh->samples, x->n, x->row, x->v, x->col, x->ncol, gold_row(sh, av, 0, L->k),
                        gold_row(sh, o, 0, L->n), y->row, y->v, &left);
    ps->approx |= left < x->n;   /* some row took the segment */
    ps->dx->n_linear += x->n - left;
    x->n = left;
}

/* a and b's rows (whole, width w, each ascending, none in both) into c. */
static void merge_rows(const cval *a, const cval *b, cval *c)
{
    int64_t i = 0, j = 0, n = 0, w = a->width;
    c->ncol = 0;
    c->width = a->width;
    while (i < a->n || j < b->n) {
        int from_a = j == b->n || (i < a->n && a->row[i] < b->row[j]);
        const cval *s = from_a ? a : b;
        int64_t t = from_a ? i++ : j++;
        c->row[n] = s->row[t];
        memcpy(c->v + n * w, s->v + t * w, (size_t)w * sizeof *c->v);
        n++;
    }
    c->n = n;
}

/* The chain from Gemm step k with fault w, for every sample (only < 0) or
 * one; the result (the output's changed rows) in ps->v[*at]. */
static void run_chain(pass *ps, size_t k, const bf__dx_weight *w, int64_t only, cval *x, int *at)
{
    const bf__dx_shared *sh = ps->dx->sh;
    const bf__step *s = &ps->dx->plan[0]->steps[k];
    bf__gemm_info g;
    int cur = 0, nb = ps->v[2] ? 3 : 2, first = sh->chain_next[k];
    cval xs[3];
    for (int t = 0; t < nb; t++) xs[t] = (cval){.row = ps->row[t], .v = ps->v[t], .col = ps->col[t]};
    ps->w = w;
    if (bf__gemm_params(s, &g)) {
        int in_b = s->node->in[1] == sh->m->param_vals[w->param];
        int j = (int)(in_b ? (g.trans_b ? w->index / g.k : w->index % g.n) : w->index);
        int kk = in_b ? (int)(g.trans_b ? w->index % g.k : w->index / g.n) : -1;
        int relu_done;
        faulty_column(ps, k, j, kk, only, &xs[0], &relu_done);
        first = relu_done ? sh->chain_next[first] : first;
    } else {
        faulty_conv(ps, k, only, &xs[0]);
    }
    for (int i = first; i >= 0; i = sh->chain_next[i]) {
        const bf__lin *L = sh->chain_lin ? sh->chain_lin[i] : NULL;
        int b = (cur + 1) % nb;
        if (L && nb == 3 && !ps->exact && only < 0 && xs[cur].ncol && xs[cur].ncol <= BF__LIN_MAX_COLS) {
            /* the rows it takes into b; the rest through the links from
             * cur, with the third buffer, then merged with b's */
            int f = cur, spare = (cur + 2) % 3;
            linear_link(ps, L, i, &xs[cur], &xs[b]);
            if (xs[f].n) {
                for (int q = i;; q = sh->chain_next[q]) {
                    if (run_link(ps, q, &xs[f], &xs[spare])) {
                        int t = f;
                        f = spare, spare = t;
                    }
                    if (q == L->last) break;
                }
                merge_rows(&xs[b], &xs[f], &xs[spare]);
                cur = spare;
            } else {
                cur = b;
            }
            i = L->last;
            continue;
        }
        if (run_link(ps, i, &xs[cur], &xs[b])) cur = b;
    }
    *x = xs[cur];
    *at = cur;
}

/* How far row t of x moved from golden, relative: which sample most likely
 * still moves when computed exactly. */
static double moved(const bf__dx_shared *sh, const cval *x, int64_t t)
{
    int64_t w = x->ncol ? x->ncol : x->width;
    const float *o = x->v + t * w, *g = sh->golden + x->row[t] * sh->out_cols;
    float dev = 0, scale = 0;
    int nan = 0;
    for (int64_t i = 0; i < w; i++) {   /* branch-free */
        float gi = x->ncol ? g[x->col[i]] : g[i];
        float d = fabsf(o[i] - gi), a = fabsf(gi);
        nan |= d != d;
        dev = d > dev ? d : dev;
        scale = a > scale ? a : scale;
    }
    return nan ? INFINITY : (double)dev / fmax((double)scale, 1e-30);   /* NaN counts as the most */
}

#if defined(__x86_64__) && defined(__GNUC__)
/* moved() of a whole row at most 16 wide, in two masked blocks of eight
 * lanes: the same maxima (a NaN difference is flagged apart, as there),
 * so the same value. The witness scan runs it on every changed output row
 * of most trials (those whose outputs move by less than WITNESS_CLEAR). */
__attribute__((target("avx2"))) static double moved_narrow(const float *o, const float *g, int w)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), lane), m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(w - 8), lane);
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 g0 = _mm256_maskload_ps(g, m0), g1 = _mm256_maskload_ps(g + 8, m1);
    __m256 d0 = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(o, m0), g0), abs);
    __m256 d1 = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(o + 8, m1), g1), abs);
    __m256 nan = _mm256_or_ps(_mm256_cmp_ps(d0, d0, _CMP_UNORD_Q), _mm256_cmp_ps(d1, d1, _CMP_UNORD_Q));
    /* max_ps(a, b) is b when a is NaN: a NaN golden element is no scale */
    __m256 dev = _mm256_max_ps(d1, d0), scale = _mm256_max_ps(_mm256_and_ps(g1, abs), _mm256_and_ps(g0, abs));
    float dv[8], sv[8];
    _mm256_storeu_ps(dv, dev);
    _mm256_storeu_ps(sv, _mm256_max_ps(scale, _mm256_setzero_ps()));
    float most = 0, big = 0;
    for (int i = 0; i < 8; i++) {
        most = dv[i] > most ? dv[i] : most;
        big = sv[i] > big ? sv[i] : big;
    }
    return _mm256_movemask_ps(nan) ? INFINITY : (double)most / ((double)big > 1e-30 ? (double)big : 1e-30);
}
#endif

/* Replaces x's outputs of its most moved samples by exact ones until one
 * still moves; 1 if one did. */
static int witness(bf__dx *dx, size_t k, const bf__dx_weight *w, cval *x)
{
    const bf__dx_shared *sh = dx->sh;
    int64_t cand[WITNESSES];
    double score[WITNESSES];
    int nc = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    int narrow = !x->ncol && x->width <= 16 && bf__sgemm_simd();
#endif
    for (int64_t t = 0; t < x->n; t++) {
        double d;
#if defined(__x86_64__) && defined(__GNUC__)
        if (narrow) d = moved_narrow(x->v + t * x->width, sh->golden + x->row[t] * sh->out_cols, x->width);
        else
#endif
            d = moved(sh, x, t);
        if (d >= WITNESS_CLEAR) {   /* tried first, and the scan stops */
            cand[0] = t;
            nc = 1;
            break;
        }
        int at = nc < WITNESSES ? nc++ : WITNESSES;
        while (at > 0 && !(score[at - 1] >= d)) {
            if (at < WITNESSES) cand[at] = cand[at - 1], score[at] = score[at - 1];
            at--;
        }
        if (at < WITNESSES) cand[at] = t, score[at] = d;
    }
    int64_t one[2];
    pass ws = {.dx = dx, .v = {dx->wv[0], dx->wv[1], NULL}, .row = {&one[0], &one[1]},
               .col = {dx->wcol[0], dx->wcol[1]}, .exact = 1};
    for (int i = 0; i < nc; i++) {
        cval e;
        int at;
        run_chain(&ws, k, w, x->row[cand[i]], &e, &at);
        if (e.n == 0) continue;
        int64_t ew = e.ncol ? e.ncol : e.width;   /* the same columns as x's: the same steps ran */
        memcpy(x->v + cand[i] * ew, e.v, (size_t)ew * sizeof *e.v);
        return 1;
    }
    return 0;
}

/* The value a chain from step k ends in, and whether row mode takes it on
 * from there (HANDOFF) rather than it being the graph's output. */
static int chain_tail(const bf__dx_shared *sh, int k, int *handoff)
{
    while (sh->chain_next[k] >= 0) k = sh->chain_next[k];
    *handoff = sh->chain_next[k] == HANDOFF;
    return k;
}

/* The changed rows of a chain that ends in a handoff, run on by row mode:
 * x's rows made whole (golden elsewhere) in `full`. */
static bf_status hand_off(bf__dx *dx, int v, const cval *x, float *full, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    for (int64_t t = 0; t < x->n; t++) input_row(sh, v, x, t, full + t * x->width);
    return bf__rows_seeded(dx, v, x->row, full, x->n, done, err);
}

bf_status bf__chain_run(bf__dx *dx, const bf__dx_weight *w, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    int k = sh->chain_width ? sh->chain_at[w->param] : -1;
    *done = 0;
    if (k < 0) return BF_OK;
    int handoff, last = chain_tail(sh, k, &handoff), o = dx->plan[0]->steps[last].node->out[0];
    if (handoff) {
        int can;
        bf_status st = bf__rows_can_seed(dx, o, w, 1, &can, err);
        if (st != BF_OK || !can) return st;
    }
    /* row mode compares bits: a chain it takes on from is computed exactly */
    pass ps = {.dx = dx, .v = {dx->cv[0], dx->cv[1], dx->cv[2]}, .row = {dx->crow[0], dx->crow[1], dx->crow[2]},
               .col = {dx->ccol[0], dx->ccol[1], dx->ccol[2]}, .exact = handoff};
    cval x;
    int at;
    run_chain(&ps, (size_t)k, w, -1, &x, &at);
    if (handoff) {
        bf_status st = hand_off(dx, o, &x, ps.v[(at + 1) % 3], done, err);
        if (st == BF_OK && *done) dx->n_chain++, dx->n_chain_exact++;
        return st;
    }
    dx->n_chain++;
    if (ps.approx && !witness(dx, (size_t)k, w, &x)) {
        dx->n_chain_exact++;
        ps.exact = 1;
        run_chain(&ps, (size_t)k, w, -1, &x, &at);
    }
    int64_t prev = -1, cols = sh->out_cols;
    for (int64_t t = 0; t < x.n; t++) {
        int64_t r = x.row[t];
        if (x.ncol)
            for (int c = 0; c < x.ncol; c++) dx->out[r * cols + x.col[c]] = x.v[t * x.ncol + c];
        else
            memcpy(dx->out + r * cols, x.v + t * cols, (size_t)cols * sizeof(float));
        dx->rows[dx->n_rows++] = r;
        if (bf__batch_of(sh, r) != prev) dx->touched[dx->n_touched++] = prev = bf__batch_of(sh, r);
    }
    *done = 1;
    return BF_OK;
}
