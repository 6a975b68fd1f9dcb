/* Cheaper forms of a Gemm step for the differential executor.
 *
 * Column block (exact). A corrupted element of B (or of a [N] bias C)
 * changes one output column, recomputed alone: bf__sgemm gives an element
 * the same bits whatever the product's shape (sgemm.h), which
 * bf__gemm_col_blocks still checks on the golden pass, column by column
 * (a column no block reproduces takes the whole product).
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
#include <math.h>
#include <string.h>

#include "diff/diff.h"
#include "exec/ops/sgemm.h"

/* A row's change counts as clear beyond CLEAR_CHANGE of the golden value:
 * far above the few-ulp (2^-23) disagreement between update and product.
 * A change that cancels the golden value to within CLEAR_CHANGE of it is
 * refused too: the exact product may then be exactly zero (a row of A gone
 * to zero past a dead ReLU, a weight flipped to zero under a one-hot
 * input), where the update leaves the golden product's own rounding error,
 * and a classifier's zeros are a tie that a few ulps of noise decide.
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
    bf__sgemm(0, g->trans_b, g->m, w, g->k, g->alpha, a, g->k, bp, g->trans_b ? g->k : g->n, g->use_c, blk, w);
}

static int block_matches(const bf__gemm_info *g, const float *blk, int c0, int w, const float *y)
{
    for (int i = 0; i < g->m; i++)
        if (memcmp(blk + (int64_t)i * w, y + (int64_t)i * g->n + c0, (size_t)w * sizeof *y) != 0) return 0;
    return 1;
}

/* A block is trusted for its columns only if it reproduces them bit for bit
 * on the golden pass. bf__sgemm computes an element from its row and column
 * only (sgemm.h), so a single column always does and the search ends at
 * width 1; the search stays, as the check of that promise, and for a kernel
 * that picks its code path by the block's shape and place (OpenBLAS's Zen
 * kernels reproduced no narrower tiling of a 128-column product, yet did at
 * 8 columns at most offsets): blocks are tried column by column, narrowest
 * first, sliding one column at a time past a mismatch (widths up to 8) or a
 * quarter of the width (wider ones, to bound the search), and tiling on
 * from a match. */
/* A wide product's columns are checked on a sample: every column, one at a
 * time, costs the product again at a single column's speed (GPT-2's logits
 * MatMul, 50,257 columns: about 38 s on the benchmark machine, once its
 * transposed table was at hand). The sample is the first and last
 * SAMPLE_EDGE columns (a kernel's edge tiles) and SAMPLE_N spread between;
 * all of them reproduced at width 1, every column is trusted at width 1,
 * as the kernel promises; one that did not, the full search below. */
#define SAMPLE_FROM 512
#define SAMPLE_EDGE 16
#define SAMPLE_N 256
static int sampled_columns(const bf__gemm_info *g, const float *a, const float *b, const float *c, const float *y,
                           float *scratch)
{
    int stride = g->n / SAMPLE_N;
    /* and of each, the first and last SAMPLE_EDGE rows (rows are chains of
     * their own too): a column of every row costs the product's depth for
     * every row */
    bf__gemm_info part = *g;
    int rows = g->m > 2 * SAMPLE_EDGE && !g->use_c ? SAMPLE_EDGE : g->m;
    part.m = rows;
    for (int j = 0; j < g->n; j++) {
        if (j >= SAMPLE_EDGE && j < g->n - SAMPLE_EDGE && j % stride != 0) continue;
        for (int top = 0; top < (rows < g->m ? 2 : 1); top++) {
            int r0 = top ? g->m - rows : 0;
            block(&part, a + (int64_t)r0 * g->k, b, c, j, 1, scratch);
            if (!block_matches(&part, scratch, j, 1, y + (int64_t)r0 * g->n)) return 0;
        }
    }
    return 1;
}

int bf__gemm_col_blocks(const bf__gemm_info *g, const float *a, const float *b, const float *c, const float *y,
                        float *scratch, bf__colblk *blk)
{
    if (g->trans_a || g->k == 0 || g->m == 0) return 0;
    int left = g->n;
    if (g->n >= SAMPLE_FROM && sampled_columns(g, a, b, c, y, scratch)) {
        for (int j = 0; j < g->n; j++) blk[j] = (bf__colblk){j, 1};
        return 1;
    }
    for (int j = 0; j < g->n; j++) blk[j] = (bf__colblk){0, 0};
    for (int w = 1; w < g->n && left > 0; w *= 2) {
        int step = w <= 8 ? 1 : w / 4;
        for (int c0 = 0; c0 + w <= g->n && left > 0;) {
            int todo = 0;
            for (int j = c0; j < c0 + w && !todo; j++) todo = blk[j].w == 0;
            if (!todo) {
                c0 += step;
                continue;
            }
            block(g, a, b, c, c0, w, scratch);
            if (!block_matches(g, scratch, c0, w, y)) {
                c0 += step;
                continue;
            }
            for (int j = c0; j < c0 + w; j++)
                if (blk[j].w == 0) blk[j] = (bf__colblk){c0, w}, left--;
            c0 += w;
        }
    }
    return 1;
}

void bf__gemm_column(const bf__gemm_info *g, bf__colblk blk, const float *a, const float *b, const float *c, int j,
                     float *y, float *scratch)
{
    int c0 = blk.w ? blk.c0 : 0, w = blk.w ? blk.w : g->n;
    block(g, a, b, c, c0, w, scratch);
    for (int i = 0; i < g->m; i++) y[(int64_t)i * g->n + j] = scratch[(int64_t)i * w + (j - c0)];
}

/* A corrupted B[k][j] (k >= 0) or C[j] (k < 0) moves column j of y by
 * A[:, k] alpha dB, or beta dC: applied if every row that moves moves
 * clearly (see diffgemm.c), else left for the exact column block (y may be
 * partly written then). See diff.h. */
int bf__gemm_column_delta(const bf__gemm_info *g, const float *a, int k, float old, float now, int j, float *y)
{
    if (!isfinite(now) || !isfinite(old)) return 0;
    double dw = (double)now - (double)old;
    for (int i = 0; i < g->m; i++) {
        double d = k >= 0 ? (double)a[(int64_t)i * g->k + k] * g->alpha * dw : (double)g->beta * dw;
        if (d == 0) continue;   /* a zero input: the product adds exactly nothing either way */
        float *e = &y[(int64_t)i * g->n + j];
        if (!isfinite(*e) || !(*e == 0 || fabs(d) >= CLEAR_CHANGE * fabs(*e))) return 0;
        if (fabs(d) > HUGE_CHANGE * fmax(1.0, fabs(*e))) return 0;
        if (fabs((double)*e + d) < CLEAR_CHANGE * fabs(*e)) return 0;   /* cancels: see CLEAR_CHANGE */
        float v = (float)((double)*e + d);
        if (!isfinite(v)) return 0;
        *e = v;
    }
    return 1;
}

static int same_bits(float x, float y) { return memcmp(&x, &y, sizeof x) == 0; }

int bf__gemm_rank(const bf__gemm_info *g, const float *a, const float *ag, const float *b, const float *yg, float *y,
                  int max_cols, int *cols, double *bc)
{
    const int K = g->k, N = g->n;
    int n_cols = 0;
    if (g->trans_a) return 0;
    /* the columns in which A changed, over every row */
    for (int i = 0; i < g->m; i++) {
        const float *ar = a + (int64_t)i * K, *gr = ag + (int64_t)i * K;
        if (memcmp(ar, gr, (size_t)K * sizeof *ar) == 0) continue;
        for (int k = 0; k < K; k++) {
            /* skip equal stretches with memcmp (vectorised), then find the element */
            if (memcmp(ar + k, gr + k, (size_t)(K - k) * sizeof *ar) == 0) break;
            while (K - k > 16 && memcmp(ar + k, gr + k, 16 * sizeof *ar) == 0) k += 16;
            while (same_bits(ar[k], gr[k])) k++;
            if (!isfinite(ar[k])) return 0;
            int seen = 0;
            for (int t = 0; t < n_cols && !seen; t++) seen = cols[t] == k;
            if (seen) continue;
            if (n_cols == max_cols) return 0;
            cols[n_cols++] = k;
        }
    }
    /* the changed columns' rows of alpha B', contiguous */
    for (int t = 0; t < n_cols; t++)
        for (int n = 0; n < N; n++)
            bc[(int64_t)t * N + n] = g->alpha * (double)(g->trans_b ? b[(int64_t)n * K + cols[t]] : b[(int64_t)cols[t] * N + n]);
    for (int i = 0; i < g->m; i++) {
        const float *ar = a + (int64_t)i * K, *gr = ag + (int64_t)i * K;
        double d[64];
        int dirty = 0;
        for (int t = 0; t < n_cols; t++) {
            d[t] = (double)ar[cols[t]] - (double)gr[cols[t]];
            dirty |= !same_bits(ar[cols[t]], gr[cols[t]]);
        }
        if (!dirty) continue;
        const float *ygr = yg + (int64_t)i * N;
        float *yr = y + (int64_t)i * N;
        double *acc = bc + (int64_t)n_cols * N;
        for (int n = 0; n < N; n++) acc[n] = ygr[n];
        for (int t = 0; t < n_cols; t++) {
            const double *bt = bc + (int64_t)t * N;
            for (int n = 0; n < N; n++) acc[n] += d[t] * bt[n];
        }
        /* branch-free checks, so the loop vectorises */
        int clear = 0, unchanged = 1, refuse = 0;
        for (int n = 0; n < N; n++) {
            double delta = acc[n] - ygr[n], mag = fabs(ygr[n]), ad = fabs(delta);
            float v = (float)acc[n];
            refuse |= !isfinite(v) | (ad > HUGE_CHANGE * (mag > 1 ? mag : 1));
            refuse |= (delta != 0) & (fabs(acc[n]) < CLEAR_CHANGE * mag);   /* cancels: see CLEAR_CHANGE */
            unchanged &= delta == 0;
            clear |= (delta != 0) & ((mag == 0) | (ad >= CLEAR_CHANGE * mag));
            yr[n] = v;
        }
        if (refuse) return 0;
        if (!clear && !unchanged) return 0;
    }
    return 1;
}

/* Rows: the product over a subset of A's rows, gathered into chunks of r
 * rows. Trusted for a shape only if every chunk of the golden product and
 * a chunk of rows gathered out of order reproduce it bit for bit. */
static void row_block(const bf__gemm_info *g, const float *a, const float *b, const float *c, int r, float *yb)
{
    bf__gemm_info h = *g;
    h.m = r;
    init_block(&h, c, 0, g->n, yb);
    bf__sgemm(0, g->trans_b, r, g->n, g->k, g->alpha, a, g->k, b, g->trans_b ? g->k : g->n, g->use_c, yb, g->n);
}

static int rows_match(const bf__gemm_info *g, const float *a, const float *b, const float *c, const float *y, int r,
                      const int *rows, float *scratch)
{
    float *ab = scratch, *yb = scratch + (int64_t)r * g->k;
    for (int t = 0; t < r; t++) memcpy(ab + (int64_t)t * g->k, a + (int64_t)rows[t] * g->k, (size_t)g->k * sizeof *a);
    row_block(g, ab, b, c, r, yb);
    for (int t = 0; t < r; t++)
        if (memcmp(yb + (int64_t)t * g->n, y + (int64_t)rows[t] * g->n, (size_t)g->n * sizeof *y) != 0) return 0;
    return 1;
}

int bf__gemm_row_one(const bf__gemm_info *g, const float *a, const float *b, const float *c, const float *y,
                     float *scratch, int *rows)
{
    if (g->trans_a || g->k == 0 || g->m < 2 || g->c_rs) return 0;
    int n = g->m / 2 < 8 ? g->m / 2 : 8;
    rows[0] = 0;
    if (!rows_match(g, a, b, c, y, 1, rows, scratch)) return 0;
    rows[0] = g->m - 1;
    if (!rows_match(g, a, b, c, y, 1, rows, scratch)) return 0;
    for (int t = 0; t < n; t++) rows[t] = (int)(((int64_t)t * 7919 + 13) % g->m);   /* out of order */
    return rows_match(g, a, b, c, y, n, rows, scratch);
}

int bf__gemm_row_width(const bf__gemm_info *g, const float *a, const float *b, const float *c, const float *y,
                       float *scratch, int *rows)
{
    if (g->trans_a || g->k == 0 || g->m < 2 || g->c_rs) return 0;
    for (int r = 1; 2 * r <= g->m; r *= 2) {
        int ok = 1;
        for (int r0 = 0; ok && r0 < g->m; r0 += r) {
            for (int t = 0; t < r; t++) rows[t] = r0 + r > g->m ? g->m - r + t : r0 + t;
            ok = rows_match(g, a, b, c, y, r, rows, scratch);
        }
        for (int t = 0; ok && t < r; t++) rows[t] = (int)(((int64_t)t * 7919 + 13) % g->m);   /* out of order */
        if (ok && rows_match(g, a, b, c, y, r, rows, scratch)) return r;
    }
    return 0;
}

/* The product for n rows of A (row t: a's row rows[t], or row t when rows
 * is NULL) into the same rows of y, in chunks of exactly r rows; a short
 * last chunk is padded with copies of its first row, whose results are
 * dropped. */
static void chunks(const bf__gemm_info *g, int r, const float *a, const int *rows, int n, const float *b, const float *c,
                   float *y, float *scratch)
{
    const int K = g->k, N = g->n;
    /* Single rows reproduce: bf__sgemm's elements depend on their own row
     * only (sgemm.h), so all n rows go in one product. The scratch holds a
     * batch of A rows and of Y rows. */
    if (r == 1) r = n;
    float *ab = scratch, *yb = scratch + (int64_t)r * K;
    for (int c0 = 0; c0 < n; c0 += r) {
        int m = n - c0 < r ? n - c0 : r;
        for (int t = 0; t < r; t++) {
            int i = c0 + (t < m ? t : 0);
            memcpy(ab + (int64_t)t * K, a + (int64_t)(rows ? rows[i] : i) * K, (size_t)K * sizeof *a);
        }
        row_block(g, ab, b, c, r, yb);
        for (int t = 0; t < m; t++) {
            int i = c0 + t;
            memcpy(y + (int64_t)(rows ? rows[i] : i) * N, yb + (int64_t)t * N, (size_t)N * sizeof *y);
        }
    }
}

int bf__gemm_rows(const bf__gemm_info *g, int r, const float *a, const float *ag, const float *b, const float *c,
                  float *y, float *scratch, int *rows)
{
    const int K = g->k;
    int n = 0;
    for (int i = 0; i < g->m; i++)
        if (memcmp(a + (int64_t)i * K, ag + (int64_t)i * K, (size_t)K * sizeof *a) != 0) {
            if (2 * (n + 1) > g->m) return 0;   /* most rows: the full product is as cheap */
            rows[n++] = i;
        }
    chunks(g, r, a, rows, n, b, c, y, scratch);
    return 1;
}

int bf__gemm_rows_changed(const bf__gemm_info *g, const float *a, const float *ag, int *rows)
{
    const int K = g->k;
    int n = 0;
    for (int i = 0; i < g->m; i++)
        if (memcmp(a + (int64_t)i * K, ag + (int64_t)i * K, (size_t)K * sizeof *a) != 0) rows[n++] = i;
    return n;
}

void bf__gemm_rows_at(const bf__gemm_info *g, int r, const float *a, const int *rows, int n, const float *b,
                      const float *c, float *y, float *scratch)
{
    chunks(g, r, a, rows, n, b, c, y, scratch);
}

void bf__gemm_rows_compact(const bf__gemm_info *g, int r, const float *a, int n, const float *b, const float *c, float *y,
                           float *scratch)
{
    chunks(g, r, a, NULL, n, b, c, y, scratch);
}

void bf__gemm_product(const bf__gemm_info *g, const float *a, const float *b, const float *c, float *y)
{
    init_block(g, c, 0, g->n, y);
    bf__sgemm(0, g->trans_b, g->m, g->n, g->k, g->alpha, a, g->k, b, g->trans_b ? g->k : g->n, g->use_c, y, g->n);
}
