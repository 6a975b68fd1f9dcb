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
 * the trial is what a full pass gives.
 *
 * This file runs a trial's chain and its witness; diffchain_setup.c finds
 * the chains and makes the buffers, diffchain_link.c computes each link. */
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "diff/diff_impl.h"
#include "diffchain_impl.h"
#include "exec/ops/sgemm.h"

/* a and b's rows (whole, width w, each ascending, none in both) into c. */
static void merge_rows(const bf__cval *a, const bf__cval *b, bf__cval *c)
{
    int64_t i = 0, j = 0, n = 0, w = a->width;
    c->ncol = 0;
    c->width = a->width;
    while (i < a->n || j < b->n) {
        int from_a = j == b->n || (i < a->n && a->row[i] < b->row[j]);
        const bf__cval *s = from_a ? a : b;
        int64_t t = from_a ? i++ : j++;
        c->row[n] = s->row[t];
        memcpy(c->v + n * w, s->v + t * w, (size_t)w * sizeof *c->v);
        n++;
    }
    c->n = n;
}

/* The chain from Gemm step k with fault w, for every sample (only < 0) or
 * one; the result (the output's changed rows) in ps->v[*at]. */
static void run_chain(bf__chain_pass *ps, size_t k, const bf__dx_weight *w, int64_t only, bf__cval *x, int *at)
{
    const bf__dx_shared *sh = ps->dx->sh;
    const bf__step *s = &ps->dx->plan[0]->steps[k];
    bf__gemm_info g;
    int cur = 0, nb = ps->v[2] ? 3 : 2, first = sh->chain_next[k];
    bf__cval xs[3];
    for (int t = 0; t < nb; t++) xs[t] = (bf__cval){.row = ps->row[t], .v = ps->v[t], .col = ps->col[t]};
    ps->w = w;
    if (bf__gemm_params(s, &g)) {
        int in_b = s->node->in[1] == sh->m->param_vals[w->param];
        int j = (int)(in_b ? (g.trans_b ? w->index / g.k : w->index % g.n) : w->index);
        int kk = in_b ? (int)(g.trans_b ? w->index % g.k : w->index / g.n) : -1;
        int relu_done;
        bf__chain_faulty_column(ps, k, j, kk, only, &xs[0], &relu_done);
        first = relu_done ? sh->chain_next[first] : first;
    } else {
        bf__chain_faulty_conv(ps, k, only, &xs[0]);
    }
    for (int i = first; i >= 0; i = sh->chain_next[i]) {
        const bf__lin *L = sh->chain_lin ? sh->chain_lin[i] : NULL;
        int b = (cur + 1) % nb;
        if (L && nb == 3 && !ps->exact && only < 0 && xs[cur].ncol && xs[cur].ncol <= BF__LIN_MAX_COLS) {
            /* the rows it takes into b; the rest through the links from
             * cur, with the third buffer, then merged with b's */
            int f = cur, spare = (cur + 2) % 3;
            bf__chain_linear_link(ps, L, i, &xs[cur], &xs[b]);
            if (xs[f].n) {
                for (int q = i;; q = sh->chain_next[q]) {
                    if (bf__chain_link(ps, q, &xs[f], &xs[spare])) {
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
        if (bf__chain_link(ps, i, &xs[cur], &xs[b])) cur = b;
    }
    *x = xs[cur];
    *at = cur;
}

/* How far row t of x moved from golden, relative: which sample most likely
 * still moves when computed exactly. */
static double moved(const bf__dx_shared *sh, const bf__cval *x, int64_t t)
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
 * of most trials (those whose outputs move by less than BF__WITNESS_CLEAR). */
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
static int witness(bf__dx *dx, size_t k, const bf__dx_weight *w, bf__cval *x)
{
    const bf__dx_shared *sh = dx->sh;
    int64_t cand[BF__WITNESSES];
    double score[BF__WITNESSES];
    int nc = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    int narrow = !x->ncol && x->width <= 16 && dx->simd;
#endif
    for (int64_t t = 0; t < x->n; t++) {
        double d;
#if defined(__x86_64__) && defined(__GNUC__)
        if (narrow) d = moved_narrow(x->v + t * x->width, sh->golden + x->row[t] * sh->out_cols, x->width);
        else
#endif
            d = moved(sh, x, t);
        if (d >= BF__WITNESS_CLEAR) {   /* tried first, and the scan stops */
            cand[0] = t;
            nc = 1;
            break;
        }
        int at = nc < BF__WITNESSES ? nc++ : BF__WITNESSES;
        while (at > 0 && !(score[at - 1] >= d)) {
            if (at < BF__WITNESSES) cand[at] = cand[at - 1], score[at] = score[at - 1];
            at--;
        }
        if (at < BF__WITNESSES) cand[at] = t, score[at] = d;
    }
    int64_t one[2];
    bf__chain_pass ws = {.dx = dx, .v = {dx->wv[0], dx->wv[1], NULL}, .row = {&one[0], &one[1]},
                         .col = {dx->wcol[0], dx->wcol[1]}, .exact = 1};
    for (int i = 0; i < nc; i++) {
        bf__cval e;
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
static bf_status hand_off(bf__dx *dx, int v, const bf__cval *x, float *full, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    for (int64_t t = 0; t < x->n; t++) bf__chain_input_row(sh, v, x, t, full + t * x->width);
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
    /* row mode compares bits: a chain it takes on from is computed exactly;
     * so is every chain unless the campaign asked for the near-exact
     * updates (bf__dx_near_exact) */
    bf__chain_pass ps = {.dx = dx, .v = {dx->cv[0], dx->cv[1], dx->cv[2]},
                         .row = {dx->crow[0], dx->crow[1], dx->crow[2]},
                         .col = {dx->ccol[0], dx->ccol[1], dx->ccol[2]}, .exact = handoff || !dx->near_exact};
    bf__cval x;
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

