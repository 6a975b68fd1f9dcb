/* The linear-algebra family: Gemm and MatMul here, Conv and the pools in
 * linalg_conv*.c and linalg_pool.c (their window geometry in linalg_window.c), BatchNormalization and LayerNormalization in
 * linalg_norm.c. Gemm and MatMul products go through bf__sgemm (sgemm.h),
 * a small batched MatMul through bf__smatmul_plain (PyTorch's bmm loop);
 * neither's elements depend on the product's shape, so that a campaign
 * can recompute a row or a column alone; nothing here keeps pointers to input data between runs,
 * since faults rewrite parameter buffers in place (a weight packed once is
 * the model's, and the plan passes it only while B is the model's own
 * tensor: bf__ctx.packed). */
#include <assert.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "base/wpack.h"
#include "exec/op.h"
#include "linalg_impl.h"
#include "sgemm.h"
#include "exec/step_access.h"


/* bf__sgemm takes int sizes. */
static bf_status blas_size(const bf__prep *p, const char *what, int64_t v, bf_error *err)
{
    if (v > INT_MAX)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "%s = %lld exceeds the matrix product's limit %d", what,
                              (long long)v, INT_MAX);
    return BF_OK;
}

/* ---- Gemm: Y = alpha * A' B' + beta * C ---- */

typedef struct gemm_params {
    int m, n, k, trans_a, trans_b;
    float alpha, beta;
    int use_c;              /* C present and beta != 0 */
    int64_t c_rs, c_cs;     /* C's strides after broadcasting to [M, N] (0 = repeated) */
    size_t work;            /* floats of scratch for op(B) packed whole (0: none) */
    int wpack;              /* op(B) the model's weight: its copy packed once is passed (bf__linalg_packed) */
} gemm_params;
static_assert(sizeof(gemm_params) <= BF__OP_SUBPARAMS_MAX, "gemm params too large (ABFT keeps them inside its own)");

static bf_status gemm_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    gemm_params *g = (gemm_params *)p->params;
    int64_t ta, tb;
    bf_status st;
    if ((st = bf__attr_float(nd, "alpha", 1.0f, &g->alpha, err)) ||
        (st = bf__attr_float(nd, "beta", 1.0f, &g->beta, err)) ||
        (st = bf__attr_int(nd, "transA", 0, &ta, err)) ||
        (st = bf__attr_int(nd, "transB", 0, &tb, err)))
        return st;
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
        return bf__node_error(err, nd, BF_EFORMAT, "transA = %lld, transB = %lld; each must be 0 or 1",
                              (long long)ta, (long long)tb);
    const bf_tensor *a = p->in[0], *b = p->in[1];
    const bf_tensor *c = p->n_in > 2 ? p->in[2] : NULL;
    if ((st = bf__want_f32(p, 0, "A", err)) || (st = bf__want_f32(p, 1, "B", err))) return st;
    if (c && (st = bf__want_f32(p, 2, "C", err))) return st;
    char sa[96], sb[96];
    if (a->ndim != 2 || b->ndim != 2)
        return bf__node_error(err, nd, BF_ESHAPE, "inputs A %s and B %s must both be 2-D",
                              bf_shape_str(a->dims, a->ndim, sa, sizeof sa),
                              bf_shape_str(b->dims, b->ndim, sb, sizeof sb));
    int64_t m = ta ? a->dims[1] : a->dims[0], k = ta ? a->dims[0] : a->dims[1];
    int64_t kb = tb ? b->dims[1] : b->dims[0], n = tb ? b->dims[0] : b->dims[1];
    if (kb != k)
        return bf__node_error(err, nd, BF_ESHAPE,
                              "input B has shape %s; expected %s with K = %lld from input A %s "
                              "(transA = %lld, transB = %lld)",
                              bf_shape_str(b->dims, 2, sb, sizeof sb), tb ? "[N, K]" : "[K, N]",
                              (long long)k, bf_shape_str(a->dims, 2, sa, sizeof sa), (long long)ta,
                              (long long)tb);
    if ((st = blas_size(p, "M", m, err)) || (st = blas_size(p, "N", n, err)) ||
        (st = blas_size(p, "K", k, err)))
        return st;
    g->m = (int)m, g->n = (int)n, g->k = (int)k, g->trans_a = (int)ta, g->trans_b = (int)tb;
    g->use_c = c && g->beta != 0.0f;
    if (c) {
        /* Unidirectional broadcast of C to [M, N]. */
        int64_t cr = c->ndim >= 2 ? c->dims[c->ndim - 2] : 1;
        int64_t cc = c->ndim >= 1 ? c->dims[c->ndim - 1] : 1;
        if (c->ndim > 2 || (cr != 1 && cr != m) || (cc != 1 && cc != n))
            return bf__node_error(err, nd, BF_ESHAPE,
                                  "input C has shape %s; it must broadcast to [M, N] = [%lld, %lld] "
                                  "(a scalar, [N], [1, N], [M, 1] or [M, N])",
                                  bf_shape_str(c->dims, c->ndim, sa, sizeof sa), (long long)m,
                                  (long long)n);
        g->c_rs = cr == 1 ? 0 : cc;
        g->c_cs = cc == 1 ? 0 : 1;
    }
    int64_t dims[2] = {m, n};
    bf__set_shape(p->out[0], BF_F32, 2, dims);
    /* op(B) packed whole into the scratch (sgemm.h, bf__sgemm_work) */
    g->work = ta ? 0 : bf__sgemm_work_floats(g->m, g->n, g->k, g->trans_b, g->trans_b ? g->k : g->n);
    p->scratch = g->work ? g->work * sizeof(float) + 64 : 0;
    /* the model's packed copy wherever the product packs op(B): packed
     * whole into the scratch, or (B transposed) panel by panel at every
     * call, also over one or two blocks of rows (a classifier at a small
     * batch: 4 x 1280 by 1280 x 1000 transposed, 5 MB repacked a call) or
     * past the scratch's BF_SGEMM_WORK_MAX, up to BF_SGEMM_PACK_MAX */
    g->wpack = !ta && g->n > 1 && g->k > 0 &&
               (g->work || (tb && (size_t)g->n * (size_t)g->k <= BF_SGEMM_PACK_MAX));
    return BF_OK;
}

/* The scratch as 64-byte aligned floats for bf__sgemm_work (NULL when the
 * step asked for none, or a caller ran it without). */
static float *work_of(const bf__ctx *c, size_t floats)
{
    if (!floats || !c->scratch) return NULL;
    return (float *)(((uintptr_t)c->scratch + 63) & ~(uintptr_t)63);
}

static bf_status gemm_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const gemm_params *g = c->params;
    const float *a = c->in[0]->data, *b = c->in[1]->data;
    float *restrict y = c->out[0]->data;
    int m = g->m, n = g->n;
    if (m == 0 || n == 0) return BF_OK;
    /* beta * C goes into Y first and sgemm adds onto it (beta = 1), the way
     * addmm does; beta = 0 ignores C, NaN included, as PyTorch and ORT do.
     * C a row (a Linear's bias) with beta 1: the product adds onto it
     * directly (bf__sgemm_work's crow), y written once; 1 * c is c, so the
     * same bits (n = 1 keeps the one-column kernel, which reads y). */
    const float *crow = NULL;
    if (g->use_c && g->beta == 1.0f && g->c_rs == 0 && g->c_cs == 1 && g->k > 0 && !g->trans_a && n > 1)
        crow = c->in[2]->data;
    else if (g->use_c) {
        const float *restrict cd = c->in[2]->data;
        float beta = g->beta;
        for (int i = 0; i < m; i++) {
            const float *restrict cr = cd + i * g->c_rs;
            float *restrict yrow = y + (int64_t)i * n;
            if (g->c_cs)
                for (int j = 0; j < n; j++) yrow[j] = beta * cr[j];
            else
                for (int j = 0; j < n; j++) yrow[j] = beta * cr[0];
        }
    }
    /* c->act: a Relu or Clip fused after it (plan_build.c), applied to each
     * element as the last thing, in the product's epilogue where it can */
    const bf__act *act = c->act;
    if (g->k == 0) {
        if (!g->use_c) memset(y, 0, sizeof(float) * (size_t)m * (size_t)n);
    } else if (!g->trans_a) {
        /* c->packed: B as the model holds it, packed once (plan.c) */
        bf__sgemm_prepacked(bf__sgemm_best(), g->trans_b, m, n, g->k, g->alpha, a, g->k, b, g->trans_b ? g->k : n,
                            g->use_c, y, n, work_of(c, g->work), c->packed, act, crow);
        act = NULL;   /* applied */
    } else {
        bf__sgemm(g->trans_a, g->trans_b, m, n, g->k, g->alpha, a, m, b, g->trans_b ? g->k : n, g->use_c, y, n);
    }
    for (int64_t i = 0; act && i < (int64_t)m * n; i++) y[i] = bf__act_apply(act, y[i]);
    return BF_OK;
}

int bf__gemm_step(const bf__step *s) { return s->node->op->run == gemm_run; }

/* For the differential executor (diff.h): a Gemm step's parameters. */
int bf__gemm_params(const bf__step *s, bf__gemm_info *out)
{
    if (s->node->op->run != gemm_run) return 0;
    const gemm_params *g = s->params;
    *out = (bf__gemm_info){.m = g->m, .n = g->n, .k = g->k, .trans_a = g->trans_a, .trans_b = g->trans_b,
                           .alpha = g->alpha, .beta = g->beta, .use_c = g->use_c, .c_rs = g->c_rs, .c_cs = g->c_cs};
    return 1;
}

/* ---- MatMul: numpy matmul, batch dims broadcast ---- */

typedef struct matmul_params {
    int m, n, k;
    int nb;                     /* output batch rank */
    int fold;                   /* B has one matrix: fold A's batch into M, one sgemm */
    int plain;                  /* a small bmm: PyTorch's plain loop (matmul_plain.c) */
    int64_t batch;              /* output matrices */
    size_t work;                /* fold: floats of scratch for B packed whole (0: none) */
    int64_t bdims[BF_MAX_DIMS]; /* output batch dims */
    int64_t sa[BF_MAX_DIMS], sb[BF_MAX_DIMS];  /* per batch dim, elements to step A, B (0: broadcast) */
} matmul_params;
static_assert(sizeof(matmul_params) <= BF__OP_SUBPARAMS_MAX, "matmul params too large (ABFT keeps them inside its own)");

static bf_status matmul_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    matmul_params *mp = (matmul_params *)p->params;
    const bf_tensor *a = p->in[0], *b = p->in[1];
    bf_status st;
    if ((st = bf__want_f32(p, 0, "A", err)) || (st = bf__want_f32(p, 1, "B", err))) return st;
    char sa[96], sb[96];
    if (a->ndim == 0 || b->ndim == 0)
        return bf__node_error(err, nd, BF_ESHAPE, "inputs A %s and B %s must have rank >= 1",
                              bf_shape_str(a->dims, a->ndim, sa, sizeof sa),
                              bf_shape_str(b->dims, b->ndim, sb, sizeof sb));
    /* 1-D operands are promoted to [1, K] and [K, 1]; the added dim is dropped from Y. */
    int64_t m = a->ndim == 1 ? 1 : a->dims[a->ndim - 2];
    int64_t k = a->dims[a->ndim - 1];
    int64_t kb = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2];
    int64_t n = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
    if (kb != k)
        return bf__node_error(err, nd, BF_ESHAPE,
                              "input B has shape %s; expected [..., K, N] with K = %lld from input A %s",
                              bf_shape_str(b->dims, b->ndim, sb, sizeof sb), (long long)k,
                              bf_shape_str(a->dims, a->ndim, sa, sizeof sa));
    if ((st = blas_size(p, "M", m, err)) || (st = blas_size(p, "N", n, err)) ||
        (st = blas_size(p, "K", k, err)))
        return st;
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    int nb = na > nbb ? na : nbb;
    int64_t odims[BF_MAX_DIMS];
    int64_t batch = 1, batch_a = 1, batch_b = 1, step_a = m * k, step_b = k * n;
    /* Walk batch dims from the innermost out, so strides come out right. */
    for (int i = nb - 1; i >= 0; i--) {
        int ia = i - (nb - na), ib = i - (nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return bf__node_error(err, nd, BF_ESHAPE,
                                  "batch dims of A %s and B %s do not broadcast (%lld vs %lld)",
                                  bf_shape_str(a->dims, a->ndim, sa, sizeof sa),
                                  bf_shape_str(b->dims, b->ndim, sb, sizeof sb), (long long)da,
                                  (long long)db);
        odims[i] = da == 1 ? db : da;
        mp->bdims[i] = odims[i];
        mp->sa[i] = da == 1 ? 0 : step_a;
        mp->sb[i] = db == 1 ? 0 : step_b;
        step_a *= da, step_b *= db;
        batch *= odims[i], batch_a *= da, batch_b *= db;
    }
    mp->m = (int)m, mp->n = (int)n, mp->k = (int)k, mp->nb = nb, mp->batch = batch;
    mp->fold = batch_b == 1 && batch_a * m <= INT_MAX;
    /* PyTorch's matmul with both operands of rank 3 or more is a bmm, and a
     * bmm under 400 multiply-adds per matrix runs ATen's plain loop (each
     * product rounded, then added: matmul_plain.c); everything else goes to
     * BLAS, whose OpenBLAS kernels are bf__sgemm's fma chain at these sizes
     * (docs/NUMERICS.md, "Softmax and attention"). A weight's product (B one
     * [K, N] matrix), which the differential engine recomputes in parts, is
     * never plain. */
    mp->plain = a->ndim >= 3 && b->ndim >= 3 && k <= BF_BMM_PLAIN_MAX && m <= BF_BMM_PLAIN_MAX &&
                n <= BF_BMM_PLAIN_MAX && k * m * n < BF_BMM_PLAIN_MAX;
    mp->work = mp->fold && !mp->plain ? bf__sgemm_work_floats((int)(batch_a * m), (int)n, (int)k, 0, (int)n) : 0;
    p->scratch = mp->work ? mp->work * sizeof(float) + 64 : 0;
    int nd_out = nb;
    if (a->ndim > 1) odims[nd_out++] = m;
    if (b->ndim > 1) odims[nd_out++] = n;
    bf__set_shape(p->out[0], BF_F32, nd_out, odims);
    return BF_OK;
}

static bf_status matmul_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const matmul_params *mp = c->params;
    const float *a = c->in[0]->data, *b = c->in[1]->data;
    float *y = c->out[0]->data;
    int m = mp->m, n = mp->n, k = mp->k;
    int64_t mn = (int64_t)m * n;
    if (mp->batch == 0 || mn == 0) return BF_OK;
    if (k == 0) {
        memset(y, 0, sizeof(float) * (size_t)(mp->batch * mn));
        return BF_OK;
    }
    if (mp->fold) {
        /* [..., M, K] @ [K, N]: A's rows are contiguous across the batch. */
        float *work = work_of(c, mp->work);
        if (c->act)   /* a bias Add (and Gelu) fused in (plan_build.c; op.h, bf__act) */
            bf__sgemm_colepi(bf__sgemm_best(), (int)(mp->batch * m), n, k, a, k, b, n, c->act, y, n, work, c->packed);
        else if (mp->plain)
            bf__smatmul_plain(bf__sgemm_best(), (int)(mp->batch * m), n, k, a, k, b, n, y, n);
        else if (work || c->packed)
            bf__sgemm_prepacked(bf__sgemm_best(), 0, (int)(mp->batch * m), n, k, 1.0f, a, k, b, n, 0, y, n, work,
                                c->packed, NULL, NULL);
        else
            bf__sgemm(0, 0, (int)(mp->batch * m), n, k, 1.0f, a, k, b, n, 0, y, n);
        return BF_OK;
    }
    int64_t idx[BF_MAX_DIMS] = {0}, off_a = 0, off_b = 0;
    /* the path once for the whole batch, not per slice: bf__sgemm reads the
     * environment each call, which took 3.4% of DLRM's pass (its interaction
     * product is 256 small slices a batch; perf, 2026-11-29) */
    int level = bf__sgemm_best();
    /* c->bt: B's matrices read transposed from X ([.., N, K], the same
     * elements at the same offsets per matrix): the product packs op(B)'s
     * panels from X's rows, the same floats (bf__matmul_tfold) */
    const float *bx = c->bt ? c->bt->data : NULL;
    /* c->rowmap: a Softmax fused in (plan_fuse.c; op.h), run on each
     * matrix's rows right after its product, while they are in cache (a
     * ViT-S/16 head's 197 x 197 scores: 155 KiB, in L2, where the whole
     * [24, 197, 197] of a batch of 4 was 3.7 MiB) */
    void (*rows)(float *, int64_t, int64_t) = c->rowmap;
    for (int64_t t = 0; t < mp->batch; t++) {
        if (mp->plain)
            bf__smatmul_plain(level, m, n, k, a + off_a, k, b + off_b, n, y + t * mn, n);
        else if (bx)
            bf__sgemm_level(level, 0, 1, m, n, k, 1.0f, a + off_a, k, bx + off_b, k, 0, y + t * mn, n);
        else
            bf__sgemm_level(level, 0, 0, m, n, k, 1.0f, a + off_a, k, b + off_b, n, 0, y + t * mn, n);
        if (rows) rows(y + t * mn, m, n);
        /* Odometer over the output batch index, moving A and B offsets along. */
        for (int d = mp->nb - 1; d >= 0; d--) {
            off_a += mp->sa[d], off_b += mp->sb[d];
            if (++idx[d] < mp->bdims[d]) break;
            off_a -= mp->sa[d] * mp->bdims[d], off_b -= mp->sb[d] * mp->bdims[d];
            idx[d] = 0;
        }
    }
    return BF_OK;
}

/* For the differential executor (diff.h): a MatMul whose B is one matrix
 * runs as one product [batch x M, K] @ [K, N] (matmul_run's fold), the
 * same call a Gemm with these parameters makes, so its columns can be
 * recomputed or updated as a Gemm's. 0 for any other MatMul, and for a
 * small bmm (its chain is not bf__sgemm's). */
int bf__matmul_fold_params(const bf__step *s, bf__gemm_info *out)
{
    if (s->node->op->run != matmul_run) return 0;
    const matmul_params *mp = s->params;
    if (!mp->fold || mp->plain || mp->k == 0 || mp->batch * mp->m > INT_MAX) return 0;
    *out = (bf__gemm_info){.m = (int)(mp->batch * mp->m), .n = mp->n, .k = mp->k, .alpha = 1.0f, .beta = 0.0f};
    return 1;
}

int bf__matmul_tfold(const bf__step *s)
{
    if (s->node->op->run != matmul_run || s->n_in != 2) return 0;
    const matmul_params *mp = s->params;
    const bf_tensor *a = s->in[0], *b = s->in[1];
    if (mp->fold || mp->plain || mp->k == 0 || a->ndim < 3 || b->ndim != a->ndim) return 0;
    for (int d = 0; d < a->ndim - 2; d++)   /* one B matrix per A matrix: no broadcast */
        if (a->dims[d] != b->dims[d]) return 0;
    return 1;
}

int bf__matmul_rows_epi(const bf__step *s)
{
    if (s->node->op->run != matmul_run || s->n_in != 2) return 0;
    const matmul_params *mp = s->params;
    return !mp->fold && !mp->plain && mp->k > 0 && mp->batch > 0;
}

int bf__matmul_epi(const bf__step *s)
{
    if (s->node->op->run != matmul_run || s->n_in != 2 || s->in[1]->ndim != 2) return 0;
    const matmul_params *mp = s->params;
    return mp->fold && !mp->plain && mp->k > 0 && mp->batch * mp->m <= INT_MAX;
}

typedef struct pack_job {
    int trans, n, k;
    const float *b;
} pack_job;

static int pack_fill(const void *ctx, float *out)
{
    const pack_job *j = ctx;
    return bf__sgemm_pack(j->trans, j->n, j->k, j->b, j->trans ? j->k : j->n, out);
}

/* The product's shape as packed once (base/wpack.h): 0 if step s does not
 * pack its B whole (not a Gemm or MatMul, A transposed, a plain batched
 * product, B not float). Shared by the packing and by the plan's estimate
 * of what packing holds, so the two cannot disagree. */
static int pack_shape(const bf__step *s, int *trans, int *n, int *k)
{
    if (s->node->op->run == gemm_run) {
        const gemm_params *g = s->params;
        if (!g->wpack) return 0;
        *trans = g->trans_b, *n = g->n, *k = g->k;
    } else if (s->node->op->run == matmul_run) {
        const matmul_params *mp = s->params;
        if (!mp->work) return 0;   /* (a fold's, never a plain bmm's) */
        *trans = 0, *n = mp->n, *k = mp->k;
    } else {
        return 0;
    }
    return s->n_in >= 2 && s->in[1] && s->in[1]->dtype == BF_F32;
}

size_t bf__linalg_pack_bytes(const bf__step *s)
{
    if (s->node->op->run == bf__conv_run) return bf__conv_pack_bytes(s);
    int trans, n, k;
    return pack_shape(s, &trans, &n, &k) ? bf__sgemm_pack_floats(n, k) * sizeof(float) : 0;
}

const float *bf__linalg_packed(const bf__step *s, bf__wpack *w)
{
    if (s->node->op->run == bf__conv_run) return bf__conv_wpacked(s, w);
    int trans, n, k;
    if (!pack_shape(s, &trans, &n, &k) || !s->in[1]->data) return NULL;
    pack_job j = {trans, n, k, s->in[1]->data};
    /* the layout: n and k are at most BF_SGEMM_PACK_MAX (2^22) where a copy is asked for */
    uint64_t tag = (uint64_t)trans | (uint64_t)n << 1 | (uint64_t)k << 32;
    return bf__wpack_get(w, j.b, tag, bf__sgemm_pack_floats(n, k), pack_fill, &j);
}

const bf__op bf__ops_linalg[] = {
    {"Gemm", 2, 3, 1, 1, 0, gemm_prepare, gemm_run},
    {"MatMul", 2, 2, 1, 1, 0, matmul_prepare, matmul_run},
    {"Conv", 2, 3, 1, 1, 0, bf__conv_prepare, bf__conv_run},
    {"MaxPool", 1, 1, 1, 2, 0, bf__maxpool_prepare, bf__pool_run},
    {"AveragePool", 1, 1, 1, 1, 0, bf__avgpool_prepare, bf__pool_run},
    {"GlobalAveragePool", 1, 1, 1, 1, 0, bf__gap_prepare, bf__gap_run},
    {"BatchNormalization", 5, 5, 1, 5, 0, bf__batchnorm_prepare, bf__batchnorm_run},
    {"LayerNormalization", 2, 3, 1, 3, 0, bf__layernorm_prepare, bf__layernorm_run},
    {0},
};
