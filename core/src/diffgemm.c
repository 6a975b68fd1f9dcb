/* Cheaper forms of a Gemm step for the differential executor.
 *
 * Column block (exact). A corrupted element of B (or of a [N] bias C)
 * changes one output column. Recomputing only a block of columns around it
 * with the same sgemm call shape gives the very bits the full product gives
 * whenever the BLAS computes each output element the same way for either
 * shape, which holds for the blocked kernels and not for the small-matrix
 * paths some CPUs take for tiny products. So the block width is not assumed:
 * bf__gemm_col_width finds, on the golden pass, the narrowest block that
 * reproduces the full product bit for bit at several offsets.
 *
 * Rank-k update (near-exact). When the input A differs from the golden one
 * in only a few columns (one corrupted column upstream, kept sparse through
 * elementwise ops), Y' = Y + (A' - A) B' touches only the changed rows at
 * O(N) per row and column instead of O(K N). Its rounding differs from a
 * full product by a few ulps, which could only turn a difference that a
 * full product would show into none (or the reverse) when the change itself
 * is of that order. So a row is accepted only if it changes by a clear
 * margin somewhere (or is exactly unchanged); otherwise the caller runs the
 * step in full. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "diff.h"

/* A row's change counts as clear beyond CLEAR_CHANGE of the golden value:
 * far above the few-ulp (2^-23) disagreement between update and product.
 * An update beyond HUGE_CHANGE times the golden scale is refused: far
 * beyond the values' range a float product loses the golden part to
 * rounding (or overflows midway) while the update in double does not, and
 * the two would disagree by more than ulps. */

static void init_block(const bf__gemm_info *g, const float *c, int c0, int w, float *blk)
{
    for (int i = 0; i < g->m; i++)
        for (int jj = 0; jj < w; jj++)
            blk[(int64_t)i * w + jj] = g->use_c ? g->beta * c[i * g->c_rs + (c0 + jj) * g->c_cs] : 0.0f;
}

static void block(const bf__gemm_info *g, const float *a, const float *b, const float *c, int c0, int w, float *blk)
{
    init_block(g, c, c0, w, blk);
    const float *bp = g->trans_b ? b + (int64_t)c0 * g->k : b + c0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, g->trans_b ? CblasTrans : CblasNoTrans, g->m, w, g->k, g->alpha, a, g->k, bp,
                g->trans_b ? g->k : g->n, g->use_c ? 1.0f : 0.0f, blk, w);
}

static int block_matches(const bf__gemm_info *g, const float *blk, int c0, int w, const float *y)
{
    for (int i = 0; i < g->m; i++)
        if (memcmp(blk + (int64_t)i * w, y + (int64_t)i * g->n + c0, (size_t)w * sizeof *y) != 0) return 0;
    return 1;
}

int bf__gemm_col_width(const bf__gemm_info *g, const float *a, const float *b, const float *c, const float *y,
                       float *scratch)
{
    if (g->trans_a || g->k == 0 || g->m == 0) return 0;
    for (int w = 4; w < g->n; w *= 2) {
        int offs[3] = {0, g->n - w, (g->n / 2 / w) * w}, ok = 1;
        for (int t = 0; t < 3 && ok; t++) {
            block(g, a, b, c, offs[t], w, scratch);
            ok = block_matches(g, scratch, offs[t], w, y);
        }
        if (ok) return w;
    }
    return g->n;
}

void bf__gemm_column(const bf__gemm_info *g, int w, const float *a, const float *b, const float *c, int j, float *y,
                     float *scratch)
{
    int c0 = j / w * w;
    if (c0 + w > g->n) c0 = g->n - w;
    block(g, a, b, c, c0, w, scratch);
    for (int i = 0; i < g->m; i++) y[(int64_t)i * g->n + j] = scratch[(int64_t)i * w + (j - c0)];
}

static int same_bits(float x, float y) { return memcmp(&x, &y, sizeof x) == 0; }

int bf__gemm_rank(const bf__gemm_info *g, const float *a, const float *ag, const float *b, const float *yg, float *y,
                  int max_cols, int *cols)
{
    const int K = g->k, N = g->n;
    int n_cols = 0;
    if (g->trans_a) return 0;
    /* the columns in which A changed, over every row */
    for (int i = 0; i < g->m; i++) {
        const float *ar = a + (int64_t)i * K, *gr = ag + (int64_t)i * K;
        if (memcmp(ar, gr, (size_t)K * sizeof *ar) == 0) continue;
        for (int k = 0; k < K; k++) {
            if (same_bits(ar[k], gr[k])) continue;
            if (!isfinite(ar[k])) return 0;
            int seen = 0;
            for (int t = 0; t < n_cols && !seen; t++) seen = cols[t] == k;
            if (seen) continue;
            if (n_cols == max_cols) return 0;
            cols[n_cols++] = k;
        }
    }
    for (int i = 0; i < g->m; i++) {
        const float *ar = a + (int64_t)i * K, *gr = ag + (int64_t)i * K;
        int dirty = 0;
        for (int t = 0; t < n_cols && !dirty; t++) dirty = !same_bits(ar[cols[t]], gr[cols[t]]);
        if (!dirty) continue;
        int clear = 0, unchanged = 1;
        const float *ygr = yg + (int64_t)i * N;
        float *yr = y + (int64_t)i * N;
        for (int n = 0; n < N; n++) {
            double acc = ygr[n];
            for (int t = 0; t < n_cols; t++) {
                int k = cols[t];
                double d = (double)ar[k] - (double)gr[k];
                if (d != 0) acc += d * g->alpha * (g->trans_b ? b[(int64_t)n * K + k] : b[(int64_t)k * N + n]);
            }
            double delta = acc - ygr[n];
            float v = (float)acc;
            if (!isfinite(v)) return 0;
            if (fabs(delta) > HUGE_CHANGE * fmax(1.0, fabs(ygr[n]))) return 0;
            if (delta != 0) {
                unchanged = 0;
                if (ygr[n] == 0 || fabs(delta) >= CLEAR_CHANGE * fabs(ygr[n])) clear = 1;
            }
            yr[n] = v;
        }
        if (!clear && !unchanged) return 0;
    }
    return 1;
}
