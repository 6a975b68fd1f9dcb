/* The small batched product as PyTorch 1.13's CPU bmm computes it: every
 * element the in-order chain of a rounded product added to a float sum,
 *
 *   s = 0;  for p = 0 .. K-1:  s = s + (float)(a[p] * b[p])
 *
 * never a fused multiply-add. torch.matmul with both operands of rank 3 or
 * more is a bmm, and ATen's bmm_out_or_baddbmm_ runs baddbmm_cpu_kernel, this
 * loop (its accumulator is opmath_type<float>, a float), when contraction x
 * rows x columns is below 400; larger ones, and every 2-D or folded product
 * (mm), go to BLAS, which with Debian's OpenBLAS 0.3.21 is bf__sgemm's fma
 * chain at the sizes measured (docs/NUMERICS.md, "Softmax and attention").
 * The difference is the rounding of each product: two products past FLT_MAX
 * of opposite signs are Inf and -Inf here, and their sum NaN, as in PyTorch,
 * where the fma chain adds the exact second product to Inf and keeps Inf.
 *
 * Like bf__sgemm's chain, an element is a fixed function of its row of A and
 * its column of B, whatever the shapes: a partial run (a sub-batch) gives the
 * bits the whole product gave. This file is compiled with -ffp-contract=off
 * (core/CMakeLists.txt): GCC in gnu11 mode contracts a * b + s into an fma
 * wherever the target has one (any -march build). */
#include "sgemm.h"

#include <stdint.h>

#include "base/simd.h"

/* Y[i][j] for i < m, j < n. Row by row, B's rows in turn: y's row is the
 * vector of n sums, each taking its next term in order (the loop over j
 * vectorises without reordering any one sum). */
#define PLAIN_BODY                                                                 \
    for (int i = 0; i < m; i++) {                                                  \
        float *restrict yr = y + (int64_t)i * ldy;                                 \
        for (int j = 0; j < n; j++) yr[j] = 0.0f;                                  \
        for (int p = 0; p < k; p++) {                                              \
            const float ap = a[(int64_t)i * lda + p];                              \
            const float *restrict br = b + (int64_t)p * ldb;                       \
            for (int j = 0; j < n; j++) {                                          \
                float t = ap * br[j];                                              \
                yr[j] = yr[j] + t;                                                 \
            }                                                                      \
        }                                                                          \
    }

static void plain_ref(int m, int n, int k, const float *restrict a, int lda, const float *restrict b, int ldb,
                      float *restrict y, int ldy)
{
    PLAIN_BODY
}

#if defined(__x86_64__) && defined(__GNUC__)
/* avx2 without fma: the target has no fused instruction to contract into
 * (and -ffp-contract=off would forbid it anyway) */
__attribute__((target("avx2"))) static void plain_avx2(int m, int n, int k, const float *restrict a, int lda,
                                                       const float *restrict b, int ldb, float *restrict y, int ldy)
{
    PLAIN_BODY
}
#endif

void bf__smatmul_plain(int level, int m, int n, int k, const float *a, int lda, const float *b, int ldb, float *y,
                       int ldy)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (level >= BF__SIMD_AVX2) {
        plain_avx2(m, n, k, a, lda, b, ldb, y, ldy);
        return;
    }
#else
    (void)level;
#endif
    plain_ref(m, n, k, a, lda, b, ldb, y, ldy);
}

/* One element of the same loop over strided operands, continuing from s:
 * Einsum's contractions that are not a packed batched product (a diagonal
 * subscript) and that PyTorch still sends to its small bmm. */
float bf__sdot_plain(int64_t k, const float *a, int64_t sa, const float *b, int64_t sb, float s)
{
    for (int64_t p = 0; p < k; p++) {
        float t = a[p * sa] * b[p * sb];
        s = s + t;
    }
    return s;
}
