/* Pieces of metrics.c that trial scoring (score.c) reuses to update a
 * metric from the golden pass's instead of recomputing it. */
#ifndef BF_METRICS_IMPL_H
#define BF_METRICS_IMPL_H

#include <stdint.h>

/* A key whose unsigned order is the order of the scores (NaN lowest, -0 =
 * +0); AUC sorts key << 32 | sample. */
uint32_t bf__score_key(float s);
/* qsort order of uint64_t keys. */
int bf__u64_cmp(const void *a, const void *b);
/* AUC from keys sorted ascending, `pos` positives among n (both classes present). */
double bf__auc_sorted(const uint64_t *keys, const float *labels, int64_t n, int64_t pos);
/* One sample's log loss; logits: the scores are logits, not probabilities. */
double bf__logloss_term(float score, float label, int logits);
/* bf_argmax with the CPU path decided by the caller (simd: bf__simd_avx2(),
 * asked once before a loop over rows, not per row: it reads the
 * environment). Same answer either way. */
int64_t bf__argmax_at(const float *row, int64_t n, int simd);

/* Language model (metrics_lm.c): one position's cross-entropy in double;
 * one sequence's sum over its labelled positions, (into *hits) how many of
 * them the first arg-max gets right and, given the golden arg-max at each
 * position (NULL: not counted), (into *changed) how many it differs from. */
double bf__lm_position_ce(const float *row, int64_t V, int64_t label);
double bf__lm_row(const float *logits, const int64_t *labels, int64_t T, int64_t V, int simd, const int64_t *golden,
                  int64_t *hits, int64_t *changed);
/* The sequences' sums added as a perfect binary tree of
 * bf__lm_tree_leaves(n) leaves (a power of two; missing ones 0): _sum
 * computes its root; _build stores it heap-ordered (tree: 2 x leaves
 * doubles, root at 1, leaf i at leaves + i); _update returns the root with
 * the k leaves idx[] (ascending) set to val[] (both k entries, used as
 * scratch), the same bits as building it again. */
int64_t bf__lm_tree_leaves(int64_t n);
double bf__lm_tree_sum(const double *x, int64_t n);
void bf__lm_tree_build(double *tree, const double *x, int64_t n);
double bf__lm_tree_update(const double *tree, int64_t n, int64_t *idx, double *val, int64_t k);
/* exp(total / labelled); NaN with none labelled. */
double bf__lm_perplexity(double total, int64_t labelled);
/* Multiple choice: row cross-entropy ce beats the best so far (lower; a
 * NaN never beats a number). */
int bf__lm_better(double ce, double best);

#endif
