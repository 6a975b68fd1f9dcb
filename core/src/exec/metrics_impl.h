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

#endif
