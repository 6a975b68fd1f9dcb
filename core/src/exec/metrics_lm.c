/* Language-model metrics: perplexity, token accuracy and multiple-choice
 * accuracy over logits [n, T, V] and next-token labels [n, T] (-100: no
 * label at that position).
 *
 * Every path computes them the same way, so that a campaign's trial scored
 * from the golden pass's per-sequence sums (diff/score.c) equals a full
 * recomputation bit for bit:
 *
 * - a sequence's cross-entropy is summed in double over its labelled
 *   positions in order, each term log-sum-exp(row) - row[label] with the
 *   maximum taken out first and the exponentials summed in order;
 * - the sequences' sums are added as a perfect binary tree over the next
 *   power of two of n leaves (missing leaves 0): pairwise summation, which
 *   keeps the rounding error at O(log n), and which a trial updates along
 *   the changed leaves' paths to the root in O(k log n) (bf__lm_tree_*);
 * - perplexity is exp(total / labelled positions); token accuracy counts
 *   the positions whose first arg-max (bf_argmax) is the label, integers.
 *
 * NaN and Inf propagate: a NaN logit in a labelled row makes its sum, and
 * the perplexity, NaN. */
#include <math.h>
#include <stddef.h>

#include "bitflip/metrics.h"
#include "exec/metrics_impl.h"
#include "base/simd.h"

double bf__lm_position_ce(const float *row, int64_t V, int64_t label)
{
    /* the largest logit as double; a NaN anywhere makes the sum NaN below */
    double m = -INFINITY;
    for (int64_t v = 0; v < V; v++) m = (double)row[v] > m ? (double)row[v] : m;
    double s = 0;
    for (int64_t v = 0; v < V; v++) s += exp((double)row[v] - m);
    return m + log(s) - (double)row[label];
}

double bf__lm_row(const float *logits, const int64_t *labels, int64_t T, int64_t V, int simd, const int64_t *golden,
                  int64_t *hits, int64_t *changed)
{
    double ce = 0;
    int64_t h = 0, moved = 0;
    for (int64_t t = 0; t < T; t++) {
        if (labels[t] == BF_LM_IGNORE) continue;
        const float *row = logits + t * V;
        ce += bf__lm_position_ce(row, V, labels[t]);
        int64_t top = bf__argmax_at(row, V, simd);
        h += top == labels[t];
        if (golden) moved += top != golden[t];
    }
    *hits = h;
    if (changed) *changed = moved;
    return ce;
}

/* The node of the tree over [lo, lo + size) (size a power of two): what
 * bf__lm_tree_build stores there. */
static double tree_node(const double *x, int64_t n, int64_t lo, int64_t size)
{
    if (lo >= n) return 0;
    if (size == 1) return x[lo];
    return tree_node(x, n, lo, size / 2) + tree_node(x, n, lo + size / 2, size / 2);
}

int64_t bf__lm_tree_leaves(int64_t n)
{
    int64_t p = 1;
    while (p < n) p *= 2;
    return p;
}

double bf__lm_tree_sum(const double *x, int64_t n)
{
    if (n <= 0) return 0;
    return tree_node(x, n, 0, bf__lm_tree_leaves(n));
}

void bf__lm_tree_build(double *tree, const double *x, int64_t n)
{
    int64_t p = bf__lm_tree_leaves(n);
    for (int64_t i = 0; i < p; i++) tree[p + i] = i < n ? x[i] : 0;
    for (int64_t i = p - 1; i >= 1; i--) tree[i] = tree[2 * i] + tree[2 * i + 1];
}

double bf__lm_tree_update(const double *tree, int64_t n, int64_t *idx, double *val, int64_t k)
{
    int64_t p = bf__lm_tree_leaves(n);
    if (k == 0) return tree[1];
    for (int64_t j = 0; j < k; j++) idx[j] += p;
    /* up one level at a time; entries stay ascending, and a pair of
     * siblings both changed becomes one entry (written at or before the
     * ones being read) */
    while (idx[0] > 1) {
        int64_t out = 0;
        for (int64_t j = 0; j < k;) {
            int64_t a = idx[j];
            double left, right;
            if (!(a & 1) && j + 1 < k && idx[j + 1] == a + 1) {
                left = val[j], right = val[j + 1];
                j += 2;
            } else if (!(a & 1)) {
                left = val[j], right = tree[a + 1];
                j++;
            } else {
                left = tree[a - 1], right = val[j];
                j++;
            }
            idx[out] = a >> 1;
            val[out++] = left + right;
        }
        k = out;
    }
    return val[0];
}

double bf__lm_perplexity(double total, int64_t labelled)
{
    return labelled > 0 ? exp(total / (double)labelled) : NAN;
}

int bf__lm_better(double ce, double best) { return ce < best || (isnan(best) && !isnan(ce)); }

void bf_metric_lm(const float *logits, const int64_t *labels, int64_t n, int64_t T, int64_t V, double *row_ce,
                  double *perplexity, double *token_accuracy)
{
    int64_t labelled = 0, hits = 0;
    int simd = bf__simd_avx2();
    for (int64_t i = 0; i < n * T; i++) labelled += labels[i] != BF_LM_IGNORE;
    for (int64_t i = 0; i < n; i++) {
        int64_t h;
        row_ce[i] = bf__lm_row(logits + i * T * V, labels + i * T, T, V, simd, NULL, &h, NULL);
        hits += h;
    }
    *perplexity = bf__lm_perplexity(bf__lm_tree_sum(row_ce, n), labelled);
    *token_accuracy = labelled > 0 ? (double)hits / (double)labelled : NAN;
}

double bf_metric_choice_accuracy(const double *row_ce, int64_t n, const int64_t *item, const int64_t *answer,
                                 int64_t *best)
{
    int64_t items = 0, right = 0;
    for (int64_t i = 0; i < n; i++) best[i] = -1;
    for (int64_t r = 0; r < n; r++) {
        int64_t it = item[r];
        if (best[it] < 0) items++;
        if (best[it] < 0 || bf__lm_better(row_ce[r], row_ce[best[it]])) best[it] = r;
    }
    for (int64_t i = 0; i < n; i++) right += best[i] >= 0 && answer[best[i]] == 1;
    return items ? (double)right / (double)items : NAN;
}
