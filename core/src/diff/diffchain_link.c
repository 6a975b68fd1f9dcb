/* Chain mode's links (diffchain_impl.h; what chain mode is: diffchain.c):
 * what each step of a chain does to a trial's changed rows. The corrupted
 * Gemm recomputes its one output column, or the corrupted Conv moves its
 * one channel by an update (bf__conv_update, exec's); a unary map runs on
 * the changed elements, a pool on the changed planes, a Gemm reading a
 * changed value applies the change as a rank-k update or recomputes the
 * changed rows exactly, a linear segment (difflinear.c) takes rows to its
 * end at once. */
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "diff/diff_impl.h"
#include "diffchain_impl.h"
#include "exec/ops/sgemm.h"

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
static void drop_golden(const bf__dx_shared *sh, int v, bf__cval *x)
{
    int64_t kept = 0, w = x->ncol ? x->ncol : x->width;
    for (int64_t t = 0; t < x->n; t++) {
        const float *g = bf__chain_gold_row(sh, v, x->row[t], x->width), *e = x->v + t * w;
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

#if defined(__x86_64__) && defined(__GNUC__)
/* Column j of a Gemm over n samples from its input's column-major copy
 * (at[p * n + r], diffchain_setup.c): for each sample the chain of
 * ops/sgemm.h, s = 0, s = fma(a[p], b[p], s) for p in order, then
 * fma(alpha, s, ct) (alpha s without C), eight samples to a vector and four
 * vectors at a time, so the same bits as bf__sgemm's element, at the
 * speed of a product rather than of one column's latency-bound chains. */
__attribute__((target("avx2,fma"))) static void column_t_avx2(const float *at, int64_t n, const float *b, int64_t bs,
                                                               int K, float alpha, int use_c, float ct, float *y)
{
    const __m256 va = _mm256_set1_ps(alpha), vc = _mm256_set1_ps(ct);
    int64_t r = 0;
    for (; r + 32 <= n; r += 32) {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int p = 0; p < K; p++) {
            const float *a = at + (int64_t)p * n + r;
            __m256 w = _mm256_set1_ps(b[(int64_t)p * bs]);
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a), w, s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + 8), w, s1);
            s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + 16), w, s2);
            s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + 24), w, s3);
        }
        __m256 s[4] = {s0, s1, s2, s3};
        for (int q = 0; q < 4; q++)
            _mm256_storeu_ps(y + r + 8 * q, use_c ? _mm256_fmadd_ps(va, s[q], vc) : _mm256_mul_ps(va, s[q]));
    }
    for (; r < n; r++) {
        float acc = 0.0f;
        for (int p = 0; p < K; p++) acc = fmaf(at[(int64_t)p * n + r], b[(int64_t)p * bs], acc);
        y[r] = use_c ? fmaf(alpha, acc, ct) : alpha * acc;
    }
}
#endif

/* The corrupted Gemm's column j over the eval set into x, exactly, from the
 * column-major copies of its input and output: 1 if it could (AVX2, and
 * the copies made). */
static int exact_column_t(bf__chain_pass *ps, size_t k, int j, bf__cval *x)
{
#if defined(__x86_64__) && defined(__GNUC__)
    bf__dx *dx = ps->dx;
    const bf__dx_shared *sh = dx->sh;
    if (!dx->simd || !sh->chain_cols_in[k] || !sh->chain_cols_out[k]) return 0;
    const bf__step *s = &dx->plan[0]->steps[k];
    bf__gemm_info g;
    bf__gemm_params(s, &g);
    const float *b = dx->plan[0]->vals[s->node->in[1]].data;
    const float *c = s->n_in > 2 && s->node->in[2] >= 0 ? dx->plan[0]->vals[s->node->in[2]].data : NULL;
    const float *bp = g.trans_b ? b + (int64_t)j * g.k : b + j;
    int64_t n = sh->samples;
    column_t_avx2(sh->chain_cols_in[k], n, bp, g.trans_b ? 1 : g.n, g.k, g.alpha, g.use_c, c_term(&g, c, j), x->v);
    const float *yg = sh->chain_cols_out[k] + (int64_t)j * n;
    int64_t kept = 0;
    for (int64_t r = 0; r < n; r++) {   /* kept <= r: in place */
        x->v[kept] = x->v[r];
        x->row[kept] = r;
        kept += !bf__same_bits(&x->v[r], &yg[r], 1);
    }
    x->n = kept;
    return 1;
#else
    (void)ps, (void)k, (void)j, (void)x;
    return 0;
#endif
}

/* The corrupted Gemm's column j, for every sample (only < 0) or sample
 * `only`, into x, recomputed exactly. */
static void exact_column(bf__chain_pass *ps, size_t k, int j, int64_t only, bf__cval *x)
{
    if (only < 0 && x->n == 0 && exact_column_t(ps, k, j, x)) return;
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
    for (int64_t r0 = lo; r0 < hi; r0 += BF__CHAIN_ROWS) {
        int m = hi - r0 < BF__CHAIN_ROWS ? (int)(hi - r0) : BF__CHAIN_ROWS;
        for (int i = 0; i < m; i++) col[i] = ct;
        bf__sgemm(0, g.trans_b, m, 1, g.k, g.alpha, bf__chain_gold_row(sh, av, r0, g.k), g.k, bp, ldb, g.use_c, col, 1);
        const float *yg = bf__chain_gold_row(sh, o, r0, g.n) + j;
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
void bf__chain_faulty_column(bf__chain_pass *ps, size_t k, int j, int kk, int64_t only, bf__cval *x, int *relu_done)
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
    /* NULL: the cache was made exact-only (bf__dx_shared_near_exact) */
    const float *am = sh->chain_amax ? sh->chain_amax[av] : NULL;
    const float *cs = sh->chain_colabs ? sh->chain_colabs[k] : NULL;
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
                                                           : bf__chain_gold_row(sh, av, 0, g.k) + kk;
    const float *yp = sh->chain_cols_out[k] ? sh->chain_cols_out[k] + (int64_t)j * sh->samples : bf__chain_gold_row(sh, o, 0, g.n) + j;
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
        int64_t nh = 0, at[BF__WITNESSES];
        for (int64_t r = 0; r < sh->samples && nh <= BF__WITNESSES; r++)
            if (huge_change(dwf * ap[r * as], gv[r]) && nh++ < BF__WITNESSES) at[nh - 1] = r;
        if (nh > BF__WITNESSES) {
            ps->approx = approx0 | (signbit(w->new_value) != signbit(w->old_value));
            exact_column(ps, k, j, -1, x);
            return;
        }
        for (int64_t t = 0; t < nh; t++) {
            bf__cval one = {.row = x->row, .v = dx->wv[0], .col = dx->wcol[0]};
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
static void relu_link(const bf__dx_shared *sh, int v, bf__cval *x)
{
    int64_t kept = 0, w = x->ncol ? x->ncol : x->width;
    for (int64_t t = 0; t < x->n; t++) {
        const float *g = bf__chain_gold_row(sh, v, x->row[t], x->width), *e = x->v + t * w;
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

static void unary_link(bf__chain_pass *ps, size_t k, bf__cval *x)
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
void bf__chain_input_row(const bf__dx_shared *sh, int v, const bf__cval *x, int64_t t, float *a)
{
    if (!x->ncol) {
        memcpy(a, x->v + t * x->width, (size_t)x->width * sizeof *a);
        return;
    }
    memcpy(a, bf__chain_gold_row(sh, v, x->row[t], x->width), (size_t)x->width * sizeof *a);
    for (int c = 0; c < x->ncol; c++) a[x->col[c]] = x->v[t * x->ncol + c];
}

/* Exact rows todo[0..nt) of a Gemm (input rows from x) into y, gathered
 * into one product. */
static void exact_rows(bf__dx *dx, const bf__gemm_info *g, const float *b, int tb, const float *c, int av,
                       const bf__cval *x, const int64_t *todo, int nt, bf__cval *y)
{
    const bf__dx_shared *sh = dx->sh;
    const int K = g->k, N = g->n;
    float *ab = dx->ca, *yb = dx->ca + (int64_t)BF__CHAIN_ROWS * sh->chain_width, *cr = dx->cbias;
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
        bf__chain_input_row(sh, av, x, todo[i], ab + (int64_t)i * K);
        memcpy(yb + (int64_t)i * N, cr, (size_t)N * sizeof *cr);
    }
    bf__sgemm(0, tb, nt, N, K, g->alpha, ab, K, b, tb ? K : N, g->use_c, yb, N);
    for (int i = 0; i < nt; i++) memcpy(y->v + todo[i] * N, yb + (int64_t)i * N, (size_t)N * sizeof *yb);
}

/* Row t of a Gemm's output y (its update, n values), where a ReLU reads
 * it: each element the ReLU certainly clamps goes back to golden. 1 if
 * every element did (the row then rests on no update), 0 otherwise (or
 * with no ReLU). */
static int clamped(const bf__dx_shared *sh, size_t step, int relu, int k, int av, int o, const bf__cval *x, int64_t t,
                   float *y, int n, const bf__gemm_info *g, const float *c)
{
    const float *am = sh->chain_amax ? sh->chain_amax[av] : NULL;
    const float *cs = sh->chain_colabs ? sh->chain_colabs[step] : NULL;
    if (!relu || !am || !cs) return 0;
    const float *yg = bf__chain_gold_row(sh, o, x->row[t], n);
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
static void gemm_link_run(bf__chain_pass *ps, size_t k, const bf__cval *x, bf__cval *y)
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
    int64_t todo[BF__CHAIN_ROWS];
    int nt = 0;
    /* the update reads ncol of K inputs: worth it below a quarter */
    if (!ps->exact && nc && nc <= BF__UPDATE_MAX_COLS && 4 * nc <= K) {
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
        for (int64_t t0 = 0; t0 < x->n; t0 += BF__CHAIN_ROWS) {
            int m = x->n - t0 < BF__CHAIN_ROWS ? (int)(x->n - t0) : BF__CHAIN_ROWS;
            for (int i = 0; i < m; i++) {
                int64_t t = t0 + i;
                const float *ag = bf__chain_gold_row(sh, av, x->row[t], K);
                memcpy(y->v + t * N, bf__chain_gold_row(sh, o, x->row[t], N), (size_t)N * sizeof(float));
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
            if (nt == BF__CHAIN_ROWS || t == x->n - 1) {
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

/* The corrupted Conv's output channel, for every sample (only < 0) or
 * sample `only`, into x (its positions as the changed columns). Each
 * output position moves by the weight's change times the one input its tap
 * reads (a zero input: not at all), applied as an update; exactly, the
 * channel is recomputed (bf__conv_channel_n), as it is for a sample whose
 * change is huge against the values (HUGE_CHANGE). */
void bf__chain_faulty_conv(bf__chain_pass *ps, size_t k, int64_t only, bf__cval *x)
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
    const float *am = sh->chain_amax ? sh->chain_amax[av] : NULL;   /* NULL: made exact-only (bf__dx_shared_near_exact) */
    int64_t kc = bf_tensor_numel(&dx->plan[0]->vals[s->node->in[1]]) / M;
    double wabs = slot == 1 ? fabs(dw) : 0, babs = (bias ? fabs((double)bias[oc]) : 0) + (slot == 2 ? fabs(dw) : 0);
    for (int64_t i = 0; relu && i < kc; i++) wabs += fabs((double)wt[oc * kc + i]);
    x->n = 0;
    x->ncol = (int)osp;
    x->width = (int)(M * osp);
    for (int64_t p = 0; p < osp; p++) x->col[p] = (int)(oc * osp + p);
    float *yb = dx->ca;   /* BF__CHAIN_ROWS samples of the step's output */
    int64_t lo = only < 0 ? 0 : only, hi = only < 0 ? sh->samples : only + 1;
    for (int64_t r0 = lo; r0 < hi;) {
        /* samples in one run: contiguous in the cache (one batch), at most BF__CHAIN_ROWS */
        int64_t r1 = exact ? (r0 / sh->batch + 1) * sh->batch : r0 + 1;
        if (r1 > hi) r1 = hi;
        if (r1 - r0 > BF__CHAIN_ROWS) r1 = r0 + BF__CHAIN_ROWS;
        const float *xin = bf__chain_gold_row(sh, av, r0, C * isp);
        float *e = x->v + x->n * osp;
        int run = exact;
        if (!exact) {   /* the update, for sample r0 alone */
            const float *xc = slot == 1 ? xin + ic * isp : NULL, *yg = bf__chain_gold_row(sh, o, r0, M * osp) + oc * osp;
            int moved, huge = bf__conv_update(dx->simd, slot == 1 ? xc : one, tap, tapm, yg, dwf, osp, e, &moved);
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
            if (bf__same_bits(e + i * osp, bf__chain_gold_row(sh, o, r0 + i, M * osp) + oc * osp, osp)) continue;
            if (x->v + x->n * osp != e + i * osp) memmove(x->v + x->n * osp, e + i * osp, (size_t)osp * sizeof *e);
            x->row[x->n++] = r0 + i;
        }
        r0 = r1;
    }
}

/* A MaxPool or AveragePool reading the changed value x: the planes (one
 * sample's channel) x changed, pooled, into y. */
static void pool_link(bf__chain_pass *ps, size_t k, const bf__cval *x, bf__cval *y)
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
        const float *g = bf__chain_gold_row(sh, iv, x->row[t], x->width);
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
int bf__chain_link(bf__chain_pass *ps, int i, bf__cval *x, bf__cval *y)
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
void bf__chain_linear_link(bf__chain_pass *ps, const bf__lin *L, int i, bf__cval *x, bf__cval *y)
{
    const bf__dx_shared *sh = ps->dx->sh;
    const bf_plan *p = ps->dx->plan[0];
    int av = p->steps[i].node->in[0], o = p->steps[L->last].node->out[0];
    int64_t left;
    y->ncol = 0;
    y->width = L->n;
    y->n = bf__lin_rows(1, L, sh->samples, x->n, x->row, x->v, x->col, x->ncol, bf__chain_gold_row(sh, av, 0, L->k),
                        bf__chain_gold_row(sh, o, 0, L->n), y->row, y->v, &left);
    ps->approx |= left < x->n;   /* some row took the segment */
    ps->dx->n_linear += x->n - left;
    x->n = left;
}

