/* Task metrics. Faulted models produce NaN and huge scores, so every metric
 * has a defined answer for them: NaN never wins an arg-max, ranks below every
 * number in AUC (all NaNs tie with each other), and propagates into log loss.
 * Metrics over zero samples are NaN: there is nothing to measure. */
#include "bitflip/metrics.h"

#include "exec/metrics_impl.h"
#include "base/simd.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t argmax_plain(const float *row, int64_t n)
{
    /* the first number; after it a NaN never compares greater, so never wins */
    int64_t best = 0;
    while (best < n && isnan(row[best])) best++;
    if (best == n) return 0;
    /* selects, not branches: which logit wins is data, and a campaign
     * takes the argmax of every changed row of every trial */
    float top = row[best];
    for (int64_t i = best + 1; i < n; i++) {
        int up = row[i] > top;
        best = up ? i : best;
        top = up ? row[i] : top;
    }
    return best;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* bf_argmax of at most 16 numbers (a classifier's logits) in two masked
 * blocks of eight lanes: the largest number, then the first lane equal to
 * it, NaN and lanes past n never counted. The same index as argmax_plain:
 * the first of the maxima (-0 and +0 equal), 0 with no number. Its chain
 * of compare-and-selects costs more than the rest of a changed row's
 * scoring. */
__attribute__((target("avx2"))) static int64_t argmax_narrow(const float *row, int n)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane), m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), lane);
    const __m256 x0 = _mm256_maskload_ps(row, m0), x1 = _mm256_maskload_ps(row + 8, m1), low = _mm256_set1_ps(-INFINITY);
    /* the lanes that hold a number */
    __m256 ok0 = _mm256_and_ps(_mm256_castsi256_ps(m0), _mm256_cmp_ps(x0, x0, _CMP_ORD_Q));
    __m256 ok1 = _mm256_and_ps(_mm256_castsi256_ps(m1), _mm256_cmp_ps(x1, x1, _CMP_ORD_Q));
    __m256 t = _mm256_max_ps(_mm256_blendv_ps(low, x0, ok0), _mm256_blendv_ps(low, x1, ok1));
    t = _mm256_max_ps(t, _mm256_permute2f128_ps(t, t, 1));
    t = _mm256_max_ps(t, _mm256_shuffle_ps(t, t, 0x4e));
    t = _mm256_max_ps(t, _mm256_shuffle_ps(t, t, 0xb1));   /* the largest, in every lane */
    unsigned eq = (unsigned)_mm256_movemask_ps(_mm256_and_ps(ok0, _mm256_cmp_ps(x0, t, _CMP_EQ_OQ))) |
                  (unsigned)_mm256_movemask_ps(_mm256_and_ps(ok1, _mm256_cmp_ps(x1, t, _CMP_EQ_OQ))) << 8;
    return eq ? __builtin_ctz(eq) : 0;
}
#endif

int64_t bf__argmax_at(const float *row, int64_t n, int simd)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (n <= 16 && simd) return argmax_narrow(row, (int)n);
#else
    (void)simd;
#endif
    return argmax_plain(row, n);
}

int64_t bf_argmax(const float *row, int64_t n) { return bf__argmax_at(row, n, bf__simd_avx2()); }

int64_t bf_argmax_nan_wins(const float *row, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(row[i])) return i;
        if (row[i] > row[best]) best = i;
    }
    return best;
}

int64_t bf_argmax_changed(const float *a, const float *b, int64_t rows, int64_t n)
{
    int simd = bf__simd_avx2();   /* reads the environment: once, not per row */
    int64_t k = 0;
    for (int64_t r = 0; r < rows; r++) k += bf__argmax_at(a + r * n, n, simd) != bf__argmax_at(b + r * n, n, simd);
    return k;
}

double bf_metric_accuracy(const float *scores, int64_t n, int64_t classes,
                          const int64_t *labels)
{
    if (n <= 0 || classes <= 0) return NAN;
    int64_t hits = 0;
    int simd = bf__simd_avx2();
    for (int64_t i = 0; i < n; i++) hits += bf__argmax_at(scores + i * classes, classes, simd) == labels[i];
    return (double)hits / (double)n;
}

/* A key whose unsigned order is the order of the scores: NaN lowest, -0 equal
 * to +0, then the IEEE bit pattern made monotonic. */
uint32_t bf__score_key(float s)
{
    if (isnan(s)) return 0;
    if (s == 0) s = 0;
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

int bf__u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

double bf__auc_sorted(const uint64_t *keys, const float *labels, int64_t n, int64_t pos)
{
    /* Mann-Whitney: positives' ranks summed, ties sharing their mean rank.
     * Twice the rank sum is an integer per tie group, kept exact as long as
     * the total stays below 2^53. */
    double rank_sum2 = 0;
    for (int64_t i = 0; i < n;) {
        uint32_t k = (uint32_t)(keys[i] >> 32);
        int64_t j = i, group_pos = 0;
        for (; j < n && (uint32_t)(keys[j] >> 32) == k; j++)
            group_pos += labels[keys[j] & 0xffffffffu] > 0.5f;
        /* ranks i+1 .. j, mean (i+1+j)/2 */
        rank_sum2 += (double)group_pos * (double)(i + 1 + j);
        i = j;
    }
    double p = (double)pos, q = (double)(n - pos);
    return (rank_sum2 - p * (p + 1)) / (2 * p * q);
}

bf_status bf_metric_auc(const float *scores, const float *labels, int64_t n, int64_t *order,
                        double *auc, bf_error *err)
{
    if (n <= 0 || (uint64_t)n > UINT32_MAX)
        return bf_error_set(err, BF_EINVAL, "AUC over %" PRId64 " samples: need 1 to %" PRIu32,
                            n, UINT32_MAX);
    /* Key in the high half, index in the low: a context-free sort, and ties
     * come out in index order so the result never depends on qsort. */
    uint64_t *keys = (uint64_t *)order;
    int64_t pos = 0;
    for (int64_t i = 0; i < n; i++) {
        keys[i] = (uint64_t)bf__score_key(scores[i]) << 32 | (uint64_t)i;
        pos += labels[i] > 0.5f;
    }
    int64_t neg = n - pos;
    if (pos == 0 || neg == 0)
        return bf_error_set(err, BF_EINVAL,
                            "AUC is undefined: all %" PRId64 " labels are %s", n,
                            pos ? "positive" : "negative");
    qsort(keys, (size_t)n, sizeof *keys, bf__u64_cmp);

    *auc = bf__auc_sorted(keys, labels, n, pos);
    return BF_OK;
}

double bf__logloss_term(float score, float label, int logits)
{
    const double lo = 1e-7, hi = 1 - 1e-7;
    double p = score, y = label;
    if (logits) p = 1 / (1 + exp(-p));
    /* comparisons, not fmin/fmax, so NaN stays NaN */
    p = p < lo ? lo : p > hi ? hi : p;
    return -(y * log(p) + (1 - y) * log(1 - p));
}

/* The terms are summed as a perfect binary tree (bf__lm_tree_sum's, missing
 * leaves 0), not in order: a differential trial then gets the same bits by
 * redoing its changed samples' paths to the root (diff/score.c), where an
 * in-order sum would have to be redone from the first changed sample on. */
static double logloss_node(const float *scores, const float *labels, int logits, int64_t n, int64_t lo, int64_t size)
{
    if (lo >= n) return 0;
    if (size == 1) return bf__logloss_term(scores[lo], labels[lo], logits);
    return logloss_node(scores, labels, logits, n, lo, size / 2) +
           logloss_node(scores, labels, logits, n, lo + size / 2, size / 2);
}

double bf_metric_logloss(const float *scores, const float *labels, int64_t n)
{
    if (n <= 0) return NAN;
    /* One score outside [0, 1] means the model emits logits; NaN says nothing
     * either way (and makes the loss NaN regardless). */
    int logits = 0;
    for (int64_t i = 0; i < n; i++) logits |= scores[i] < 0 || scores[i] > 1;
    return logloss_node(scores, labels, logits, n, 0, bf__lm_tree_leaves(n)) / (double)n;
}
