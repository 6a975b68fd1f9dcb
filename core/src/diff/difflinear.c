/* Chain mode's linear segments: a Gemm, a ReLU and a Gemm, one sample at a
 * time, as the linear map they are while no ReLU input changes sign.
 *
 * A chain Gemm reached by a change in a few input columns (the column a
 * fault moved one link up) moves its output by a rank-k update, which the
 * ReLU passes where the golden input was positive and clamps where it was
 * negative; the next Gemm then recomputes whole rows (its input changed in
 * every column the update reached). For a sample whose change leaves every
 * ReLU input on its golden side, the two Gemms and the ReLU are one linear
 * map of the change: out = golden out + sum_c d_c J[c], J[c] the sum over
 * the golden-active units m of alpha1 B1[c][m] alpha2 B2[m][:]. Kept per
 * sample and column, J turns the first Gemm's update (N1 multiply-adds a
 * changed column), the ReLU and the second Gemm's row (N1 x N2) into N2
 * multiply-adds: on the digits MLP, a first-layer fault's samples cost 10
 * of them instead of about 700.
 *
 * A chain Gemm reached so with no ReLU after it (a classifier) is a segment
 * of its own, J = alpha B[c] for every sample: the same update as the
 * rank-k one, in the same row loop; its radius only keeps the change short
 * of huge (HUGE_CHANGE), as the rank-k update's rule does.
 *
 * Whether a change keeps the signs: ReLU input m moves by sum_c d_c
 * alpha1 B1[c][m], at most sum_c |d_c| |alpha1 B1[c][m]|; with
 * inv_radius[c] = max_m |alpha1 B1[c][m]| / |z_m| (z the golden input),
 * sum_c |d_c| inv_radius[c] <= 1/2 keeps every unit within half its
 * distance from zero. A golden input of zero (either sign) or not finite
 * that column c reaches makes inv_radius infinite: such a sample never
 * takes the segment.
 *
 * Exactness: none. The linear map is what the products compute in real
 * numbers; in floats the two round differently by a few ulps of the terms,
 * as chain mode's updates do (diffchain.c says how a trial that took one
 * is checked: an exact witness, or an exact rerun). */
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/alloc.h"
#include "diff/diff_impl.h"
#include "exec/ops/sgemm.h"

#define LIN_FLOATS (1 << 20)   /* every segment's J and radii, in all (4 MiB) */
#define LIN_WORK (1LL << 28)   /* multiply-adds to build them, in all */

/* The next step of a chain past steps that only rename a sample's
 * elements (see diffchain.c's run_chain); -1 at the chain's end. */
static int next_link(const bf__dx_shared *sh, const bf_plan *p, int k)
{
    int64_t isp, osp;
    bf__gemm_info g;
    for (int q = sh->chain_next[k]; q >= 0; q = sh->chain_next[q]) {
        const bf__step *s = &p->steps[q];
        if (bf__unary_f32(s) || bf__pool_shape(s, &isp, &osp) || bf__gemm_params(s, &g)) return q;
    }
    return -1;
}

/* B as K x N floats, whichever way it is stored (the product below then
 * takes the AVX2 path, which reads A untransposed); NULL if out of memory.
 * *finite: every element of alpha B is. */
static float *b_rows(const bf_plan *p, const bf__step *s, const bf__gemm_info *g, int *finite)
{
    float *a = bf__malloc(((size_t)g->k * (size_t)g->n + 1) * sizeof *a);
    if (!a) return NULL;
    const float *b = p->vals[s->node->in[1]].data;
    for (int c = 0; c < g->k; c++)
        for (int m = 0; m < g->n; m++) {
            float e = g->trans_b ? b[(int64_t)m * g->k + c] : b[(int64_t)c * g->n + m];
            *finite &= isfinite(g->alpha * e);
            a[(int64_t)c * g->n + m] = e;
        }
    return a;
}

/* max_m a |b[m]| iz[m] over the b[m] that are not 0 (iz is never NaN,
 * so neither is a term). */
static float max_ratio_plain(const float *b, const float *iz, int n, float a)
{
    float most = 0;
    for (int m = 0; m < n; m++) {
        float q = b[m] == 0 ? 0.0f : a * fabsf(b[m]) * iz[m];
        most = q > most ? q : most;
    }
    return most;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* max_ratio_plain eight lanes at a time: a setup cost of samples x K x N1
 * (about 0.3 s on dlrm_large's top MLP in the plain loop, which compilers
 * do not vectorise: a float max is not associative for them). */
__attribute__((target("avx2"))) static float max_ratio_avx2(const float *b, const float *iz, int n, float a)
{
    const __m256 va = _mm256_set1_ps(a), abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 most = _mm256_setzero_ps();
    int m = 0;
    for (; m + 8 <= n; m += 8) {
        __m256 bm = _mm256_loadu_ps(b + m);
        __m256 q = _mm256_mul_ps(_mm256_mul_ps(va, _mm256_and_ps(bm, abs)), _mm256_loadu_ps(iz + m));
        q = _mm256_and_ps(q, _mm256_cmp_ps(bm, _mm256_setzero_ps(), _CMP_NEQ_UQ));   /* b 0: 0 */
        most = _mm256_max_ps(most, q);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, most);
    float r = max_ratio_plain(b + m, iz + m, n - m, a);
    for (int i = 0; i < 8; i++) r = lanes[i] > r ? lanes[i] : r;
    return r;
}
#endif

static float max_ratio(int simd, const float *b, const float *iz, int n, float a)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (simd) return max_ratio_avx2(b, iz, n, a);
#else
    (void)simd;
#endif
    return max_ratio_plain(b, iz, n, a);
}

/* J and the radii of segment L from Gemm step i (golden output rows z, n1
 * wide) to Gemm step L->last, sample by sample: J_r = alpha1 alpha2 B1
 * diag(z_r > 0) B2, one product of the second Gemm's B with its inactive
 * rows zeroed. */
static bf_status build(bf__dx_shared *sh, const bf_plan *p, bf__lin *L, int i, const float *z, bf_error *err)
{
    const int64_t S = sh->samples;
    const bf__step *s1 = &p->steps[i], *s2 = &p->steps[L->last];
    bf__gemm_info g1, g2;
    bf__gemm_params(s1, &g1);
    bf__gemm_params(s2, &g2);
    const int K = L->k, N = L->n, n1 = g1.n;
    int finite = 1;
    float *b1 = b_rows(p, s1, &g1, &finite), *b2 = b_rows(p, s2, &g2, &finite);
    float *mb = bf__malloc(((size_t)n1 * (size_t)N + 1) * sizeof *mb), *iz = bf__malloc(((size_t)n1 + 1) * sizeof *iz);
    bf_status st = b1 && b2 && mb && iz ? BF_OK : bf__dx_oom(err);
    const float a1 = fabsf(g1.alpha);
    const int simd = bf__sgemm_simd();
    for (int64_t r = 0; st == BF_OK && r < S; r++) {
        const float *zr = z + r * n1;
        for (int m = 0; m < n1; m++) {
            /* a golden input of 0, or one not finite, has no room */
            iz[m] = zr[m] != 0 && isfinite(zr[m]) ? 1.0f / fabsf(zr[m]) : INFINITY;
            for (int n = 0; n < N; n++) mb[(int64_t)m * N + n] = zr[m] > 0 ? b2[(int64_t)m * N + n] : 0.0f;
        }
        bf__sgemm(0, 0, K, N, n1, g1.alpha * g2.alpha, b1, n1, mb, N, 0, L->jac + r * N, (int)(S * N));
        for (int c = 0; c < K; c++) {
            const float *bc = b1 + (int64_t)c * n1, *j = L->jac + ((int64_t)c * S + r) * N;
            float inv = max_ratio(simd, bc, iz, n1, a1);
            int ok = finite;
            for (int n = 0; n < N; n++) ok &= isfinite(j[n]);
            L->inv_radius[(int64_t)c * S + r] = ok ? inv : INFINITY;
        }
    }
    bf__free(b1);
    bf__free(b2);
    bf__free(mb);
    bf__free(iz);
    return st;
}

/* The change of row t in column q: new - golden, rounded once. */
static float change(const float *v, const int *col, int nc, const float *g, int64_t t, int q)
{
    return (float)((double)v[t * nc + q] - (double)g[col[q]]);
}

/* sum |d_q| inv_radius[col_q] at sample r, within 1/2 (a NaN is not). */
static int keeps_signs(const float *inv, int64_t rcol, const float *d, const int *col, int nc)
{
    float s = 0;
    for (int q = 0; q < nc; q++) {
        float ir = inv[col[q] * rcol];
        s += d[q] != 0.0f ? fabsf(d[q]) * ir : 0.0f;   /* 0 inf would be NaN */
    }
    return s <= 0.5f;
}

/* Row t (sample r) of bf__lin_rows' input: its change into d; 1 if the
 * change keeps the signs (inv: the sample's radii, rcol apart), else 0 and
 * the row moved down to `*left` for the links. The one admission rule of
 * both row loops below. */
static inline int admit(int64_t t, int64_t r, int64_t *row, float *v, const int *col, int nc, const float *g,
                        const float *inv, int64_t rcol, float *d, int64_t *left)
{
    for (int q = 0; q < nc; q++) d[q] = change(v, col, nc, g, t, q);
    if (keeps_signs(inv, rcol, d, col, nc)) return 1;
    if (*left != t) memmove(v + *left * nc, v + t * nc, (size_t)nc * sizeof *v);
    row[(*left)++] = r;
    return 0;
}

/* One row's output, yg + sum_q d_q J_q; 1 if it moved in any bit. */
static int lin_row_plain(const float *const *jr, const float *d, int nc, int n, const float *yg, float *y)
{
    for (int i = 0; i < n; i++) y[i] = yg[i];
    for (int q = 0; q < nc; q++)
        for (int i = 0; i < n; i++) y[i] = y[i] + d[q] * jr[q][i];
    return !bf__same_bits(y, yg, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* lin_row_plain in blocks of eight lanes, the last one masked. */
__attribute__((target("avx2"))) static int lin_row_avx2(const float *const *jr, const float *d, int nc, int n,
                                                        const float *yg, float *y)
{
    __m256i diff = _mm256_setzero_si256();
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int i0 = 0; i0 < n; i0 += 8) {
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i0), lane);
        __m256 g = _mm256_maskload_ps(yg + i0, m), e = g;
        for (int q = 0; q < nc; q++) e = _mm256_add_ps(e, _mm256_mul_ps(_mm256_set1_ps(d[q]), _mm256_maskload_ps(jr[q] + i0, m)));
        _mm256_maskstore_ps(y + i0, m, e);
        /* masked-off lanes are 0 on both sides */
        diff = _mm256_or_si256(diff, _mm256_xor_si256(_mm256_castps_si256(e), _mm256_castps_si256(g)));
    }
    return !_mm256_testz_si256(diff, diff);
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
/* bf__lin_rows for one changed column and at most 16 outputs (a fault's
 * column into a classifier), all in AVX2: lin_row_avx2's two blocks with
 * their masks made once. */
__attribute__((target("avx2"))) static int64_t rows_narrow_avx2(const bf__lin *L, int64_t n, int64_t *row, float *v,
                                                                int col, const float *gin, const float *gout,
                                                                int64_t *yrow, float *yv, const int64_t stride[4],
                                                                int64_t *nleft)
{
    const int N = L->n;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(N), lane), m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(N - 8), lane);
    const float *jc = L->jac + col * stride[0], *ic = L->inv_radius + col * stride[2];
    int64_t kept = 0, left = 0;
    for (int64_t t = 0; t < n; t++) {
        int64_t r = row[t];
        float d;
        if (!admit(t, r, row, v, &col, 1, gin + r * L->k, ic + r * stride[3], 0, &d, &left)) continue;
        const float *j = jc + r * stride[1], *yg = gout + r * N;
        float *y = yv + kept * N;
        const __m256 vd = _mm256_set1_ps(d);
        __m256 g = _mm256_maskload_ps(yg, m0), e = _mm256_add_ps(g, _mm256_mul_ps(vd, _mm256_maskload_ps(j, m0)));
        _mm256_maskstore_ps(y, m0, e);
        __m256i diff = _mm256_xor_si256(_mm256_castps_si256(e), _mm256_castps_si256(g));
        if (N > 8) {
            g = _mm256_maskload_ps(yg + 8, m1);
            e = _mm256_add_ps(g, _mm256_mul_ps(vd, _mm256_maskload_ps(j + 8, m1)));
            _mm256_maskstore_ps(y + 8, m1, e);
            diff = _mm256_or_si256(diff, _mm256_xor_si256(_mm256_castps_si256(e), _mm256_castps_si256(g)));
        }
        yrow[kept] = r;
        kept += !_mm256_testz_si256(diff, diff);
    }
    *nleft = left;
    return kept;
}
#endif

int64_t bf__lin_rows(int simd, const bf__lin *L, int64_t samples, int64_t n, int64_t *row, float *v, const int *col,
                     int nc, const float *gin, const float *gout, int64_t *yrow, float *yv, int64_t *nleft)
{
    const int N = L->n;
    /* strides of a column and of a sample in J and in the radii */
    const int64_t jcol = L->shared ? N : samples * N, jrow = L->shared ? 0 : N;
    const int64_t rcol = L->shared ? 1 : samples, rrow = L->shared ? 0 : 1;
    int64_t kept = 0, left = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (simd && nc == 1 && N <= 16 && bf__sgemm_simd()) {
        const int64_t stride[4] = {jcol, jrow, rcol, rrow};
        return rows_narrow_avx2(L, n, row, v, col[0], gin, gout, yrow, yv, stride, nleft);
    }
#endif
    float d[BF__LIN_MAX_COLS];
    const float *jr[BF__LIN_MAX_COLS];
#if defined(__x86_64__) && defined(__GNUC__)
    simd = simd && bf__sgemm_simd();
#else
    simd = 0;
#endif
    for (int64_t t = 0; t < n; t++) {
        int64_t r = row[t];
        const float *yg = gout + r * N;
        if (!admit(t, r, row, v, col, nc, gin + r * L->k, L->inv_radius + r * rrow, rcol, d, &left)) continue;
        for (int q = 0; q < nc; q++) jr[q] = L->jac + col[q] * jcol + r * jrow;
        float *y = yv + kept * N;
        int moved;
#if defined(__x86_64__) && defined(__GNUC__)
        if (simd) moved = lin_row_avx2(jr, d, nc, N, yg, y);
        else
#endif
            moved = lin_row_plain(jr, d, nc, N, yg, y);
        yrow[kept] = r;
        kept += moved;
    }
    *nleft = left;
    return kept;
}

/* A chain Gemm reached as a link whose output no ReLU reads: its update is
 * one linear map for every sample, y = yg + sum_c d_c alpha B[c]. Its
 * radius keeps the change short of huge, as gemm_link_run's update does
 * (|d| max_n |alpha B[c][n]| <= HUGE_CHANGE; a product could overflow
 * where the update does not): inverse radius max_n |alpha B[c][n]| / (2
 * HUGE_CHANGE), infinite for a column not all finite. */
static bf_status single(const bf_plan *p, const bf__step *s, const bf__gemm_info *g, bf__lin *L, bf_error *err)
{
    int finite = 1;
    L->shared = 1;
    L->jac = b_rows(p, s, g, &finite);
    L->inv_radius = bf__malloc(((size_t)g->k + 1) * sizeof *L->inv_radius);
    if (!L->jac || !L->inv_radius) return bf__dx_oom(err);
    for (int c = 0; c < g->k; c++) {
        float most = 0, *j = L->jac + (int64_t)c * g->n;
        int ok = 1;
        for (int n = 0; n < g->n; n++) {
            j[n] *= g->alpha;
            ok &= isfinite(j[n]);
            most = fabsf(j[n]) > most ? fabsf(j[n]) : most;
        }
        L->inv_radius[c] = ok ? most / (2.0f * (float)HUGE_CHANGE) : INFINITY;
    }
    return BF_OK;
}

bf_status bf__lin_setup(bf__dx_shared *sh, const bf_plan *p, bf_error *err)
{
    sh->chain_lin = bf__calloc(sh->n_steps + 1, sizeof *sh->chain_lin);
    if (!sh->chain_lin) return bf__dx_oom(err);
    int64_t room = LIN_FLOATS, work = LIN_WORK;
    for (size_t i = 0; i < sh->n_steps; i++) {
        bf__gemm_info g1, g2;
        const bf__step *s = &p->steps[i];
        /* a chain handed to row mode runs exactly: no segments */
        if (sh->chain_next[i] == NOT_CHAIN || sh->chain_next[i] == HANDOFF || !bf__gemm_params(s, &g1)) continue;
        /* reached as a link: some chain step hands its output to it */
        int linked = 0;
        for (size_t k = 0; k < sh->n_steps && !linked; k++) linked = sh->chain_next[k] == (int)i;
        int r = next_link(sh, p, (int)i), j = r >= 0 ? next_link(sh, p, r) : -1;
        if (!linked || !sh->chain_rows[s->node->out[0]]) continue;
        bf__lin *L = NULL;
        bf_status st = BF_OK;
        if (r < 0 || !bf__unary_relu(&p->steps[r])) {   /* no ReLU next: the Gemm alone */
            if (!(L = sh->chain_lin[i] = bf__calloc(1, sizeof *L))) return bf__dx_oom(err);
            L->last = (int)i;
            L->k = g1.k;
            L->n = g1.n;
            if ((st = single(p, s, &g1, L, err)) != BF_OK) return st;
            continue;
        }
        if (j < 0 || !bf__gemm_params(&p->steps[j], &g2) || g2.k != g1.n || !sh->chain_rows[p->steps[j].node->out[0]])
            continue;
        int64_t need = sh->samples * g1.k * ((int64_t)g2.n + 1);
        int64_t cost = sh->samples * g1.k * (int64_t)g1.n * g2.n;
        if (need > room || cost > work) continue;
        room -= need;
        work -= cost;
        if (!(L = sh->chain_lin[i] = bf__calloc(1, sizeof *L))) return bf__dx_oom(err);
        L->last = j;
        L->k = g1.k;
        L->n = g2.n;
        L->jac = bf__malloc(((size_t)(sh->samples * g1.k * g2.n) + 1) * sizeof *L->jac);
        L->inv_radius = bf__malloc(((size_t)(sh->samples * g1.k) + 1) * sizeof *L->inv_radius);
        st = L->jac && L->inv_radius ? build(sh, p, L, (int)i, sh->chain_rows[s->node->out[0]], err) : bf__dx_oom(err);
        if (st != BF_OK) return st;
    }
    return BF_OK;
}

void bf__lin_free(bf__dx_shared *sh)
{
    for (size_t i = 0; sh->chain_lin && i < sh->n_steps; i++) {
        if (!sh->chain_lin[i]) continue;
        bf__free(sh->chain_lin[i]->jac);
        bf__free(sh->chain_lin[i]->inv_radius);
        bf__free(sh->chain_lin[i]);
    }
    bf__free(sh->chain_lin);
    sh->chain_lin = NULL;
}
