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
 *   maximum taken out first and the exponentials (bf__lm_exp) summed in
 *   four lanes, by the plain loop or its AVX2 copy, the same bits;
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
#include <string.h>

#include "bitflip/metrics.h"
#include "exec/metrics_impl.h"
#include "base/simd.h"

/* exp(r) for r <= 0 (the exponentials of a log-softmax, its maximum taken
 * out), the same bits on both CPU paths below: Cody-Waite reduction to
 * r = k ln 2 + f, |f| <= ln 2 / 2 (k rounded to nearest even), Taylor to degree 13 by Horner (its
 * truncation is below 1e-17 there), times 2^k built in the exponent bits.
 * Within 2 ulp of exp; 0 below -708 (where exp is subnormal, and beside
 * the maximum's own exp(0) = 1 it adds nothing a double can hold). NaN
 * stays NaN. libm's exp costs four times as much and has no AVX2 copy with
 * its bits, and a vocabulary's exponentials are most of a language
 * model's scoring. */
#define LN2_HI 6.93147180369123816490e-01   /* fdlibm's: k * LN2_HI exact for |k| < 2^20 */
#define LN2_LO 1.90821492927058770002e-10
#define INV_LN2 1.44269504088896338700e+00
#define EXP_FLOOR (-708.0)
#define EXP_MAGIC 0x1.8p52                  /* k + it: k in the low bits of the double */
#define EXP_BIAS ((uint64_t)1023 - UINT64_C(0x4338000000000000))
static const double taylor[14] = {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                                  1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600,
                                  1.0 / 6227020800.0};

double bf__lm_exp(double r)
{
    if (r < EXP_FLOOR) return 0;
    /* k = r / ln 2 rounded to nearest even by the magic number (|k| < 2^51),
     * which leaves k in the low bits of t */
    double t = r * INV_LN2 + EXP_MAGIC, kd = t - EXP_MAGIC;
    double f = (r - kd * LN2_HI) - kd * LN2_LO;
    double p = taylor[13];
    for (int i = 12; i >= 0; i--) p = p * f + taylor[i];
    double scale;
    uint64_t b;
    memcpy(&b, &t, sizeof b);
    b = (b + EXP_BIAS) << 52;
    memcpy(&scale, &b, sizeof scale);
    return p * scale;
}

/* The sum of exp(row[v] - m) over v < V in four lanes (lane q takes
 * v = 4j + q; the tail goes to lane 0), added (0 + 1) + (2 + 3): no chain
 * of V dependent additions, and the same sums from the AVX2 copy. */
static double exp_sum_plain(const float *row, int64_t V, double m)
{
    double part[4] = {0, 0, 0, 0};
    int64_t v = 0;
    for (; v + 4 <= V; v += 4)
        for (int q = 0; q < 4; q++) part[q] += bf__lm_exp((double)row[v + q] - m);
    for (; v < V; v++) part[0] += bf__lm_exp((double)row[v] - m);
    return (part[0] + part[1]) + (part[2] + part[3]);
}

static double max_plain(const float *row, int64_t V)
{
    /* a NaN never becomes the maximum; it makes the exponentials' sum NaN */
    double m = -INFINITY;
    for (int64_t v = 0; v < V; v++) m = (double)row[v] > m ? (double)row[v] : m;
    return m;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* bf__lm_exp on four lanes: the same operations (no fma), the same bits. */
__attribute__((target("avx2"))) static __m256d exp4(__m256d r)
{
    __m256d t = _mm256_add_pd(_mm256_mul_pd(r, _mm256_set1_pd(INV_LN2)), _mm256_set1_pd(EXP_MAGIC));
    __m256d kd = _mm256_sub_pd(t, _mm256_set1_pd(EXP_MAGIC));
    __m256d f = _mm256_sub_pd(_mm256_sub_pd(r, _mm256_mul_pd(kd, _mm256_set1_pd(LN2_HI))),
                              _mm256_mul_pd(kd, _mm256_set1_pd(LN2_LO)));
    __m256d p = _mm256_set1_pd(taylor[13]);
    for (int i = 12; i >= 0; i--) p = _mm256_add_pd(_mm256_mul_pd(p, f), _mm256_set1_pd(taylor[i]));
    __m256i b = _mm256_castpd_si256(t);
    b = _mm256_slli_epi64(_mm256_add_epi64(b, _mm256_set1_epi64x((long long)EXP_BIAS)), 52);
    __m256d e = _mm256_mul_pd(p, _mm256_castsi256_pd(b));
    /* r < -708: 0 (false for NaN, which stays) */
    return _mm256_andnot_pd(_mm256_cmp_pd(r, _mm256_set1_pd(EXP_FLOOR), _CMP_LT_OQ), e);
}

__attribute__((target("avx2"))) static double exp_sum_avx2(const float *row, int64_t V, double m)
{
    __m256d acc = _mm256_setzero_pd(), vm = _mm256_set1_pd(m);
    int64_t v = 0;
    for (; v + 4 <= V; v += 4) acc = _mm256_add_pd(acc, exp4(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(row + v)), vm)));
    double part[4];
    _mm256_storeu_pd(part, acc);
    for (; v < V; v++) part[0] += bf__lm_exp((double)row[v] - m);
    return (part[0] + part[1]) + (part[2] + part[3]);
}

/* max_plain's maximum (a maximum is one whatever the order; of -0 and +0
 * either may come out, which changes no result below) */
__attribute__((target("avx2"))) static double max_avx2(const float *row, int64_t V)
{
    __m256d acc = _mm256_set1_pd(-INFINITY);
    int64_t v = 0;
    /* max_pd(x, acc) is acc when x is NaN */
    for (; v + 4 <= V; v += 4) acc = _mm256_max_pd(_mm256_cvtps_pd(_mm_loadu_ps(row + v)), acc);
    double part[4], m = -INFINITY;
    _mm256_storeu_pd(part, acc);
    for (int q = 0; q < 4; q++) m = part[q] > m ? part[q] : m;
    for (; v < V; v++) m = (double)row[v] > m ? (double)row[v] : m;
    return m;
}
#endif

double bf__lm_position_ce(const float *row, int64_t V, int64_t label, int simd)
{
    double m, s;
#if defined(__x86_64__) && defined(__GNUC__)
    if (simd) {
        m = max_avx2(row, V);
        s = exp_sum_avx2(row, V, m);
        return m + log(s) - (double)row[label];
    }
#endif
    (void)simd;
    m = max_plain(row, V);
    s = exp_sum_plain(row, V, m);
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
        ce += bf__lm_position_ce(row, V, labels[t], simd);
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
