/* bf__fma_windows (sgemm.h): the product's chain, acc = fma(w[p], x, acc)
 * for p in order, for a product whose B rows are windows of one buffer (a
 * Conv channel's taps over zero-padded planes, linalg_conv_gemm.c's
 * channel path), computed without writing the column matrix out. Its own
 * file: a different operand layout from sgemm.c's panels, and the same
 * bits as bf__sgemm on the same chain (test_sgemm). Hand-written for the
 * reason sgemm.c gives: no BLAS keeps each output's in-order chain. */
#include <math.h>
#include <stdint.h>

#include "base/simd.h"
#include "sgemm.h"

static void fma_windows_ref(const float *w, const int64_t *off, int k, const float *x, int rows, int cols,
                            int64_t ldx, float *acc)
{
    for (int p = 0; p < k; p++)
        for (int r = 0; r < rows; r++) {
            const float *xr = x + off[p] + r * ldx;
            float *ar = acc + (int64_t)r * cols;
            for (int c = 0; c < cols; c++) ar[c] = fmaf(w[p], xr[c], ar[c]);
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#define AVX2 __attribute__((target("avx2,fma")))
#endif

#ifdef HAVE_AVX2_PATH
/* Blocks of up to 8 rows x 8 columns of acc held in registers across the
 * whole chain over p; columns past a multiple of 8 go through masked loads
 * (the masked-off lanes are computed on zeros and never stored). */
AVX2 static inline __attribute__((always_inline)) void windows_block(int nr, const float *w, const int64_t *off, int k,
                                                                     const float *x, int64_t ldx, __m256i mask,
                                                                     float *acc, int cols)
{
    __m256 s[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) s[r] = _mm256_maskload_ps(acc + (int64_t)r * cols, mask);
    for (int p = 0; p < k; p++) {
        __m256 wv = _mm256_set1_ps(w[p]);
        const float *xp = x + off[p];
        _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
            s[r] = _mm256_fmadd_ps(wv, _mm256_maskload_ps(xp + r * ldx, mask), s[r]);
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) _mm256_maskstore_ps(acc + (int64_t)r * cols, mask, s[r]);
}

AVX2 static void fma_windows_avx2(const float *w, const int64_t *off, int k, const float *x, int rows, int cols,
                                  int64_t ldx, float *acc)
{
    static const int32_t ones[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int c0 = 0; c0 < cols; c0 += 8) {
        int nc = cols - c0 < 8 ? cols - c0 : 8;
        __m256i mask = _mm256_loadu_si256((const __m256i *)(ones + 8 - nc));
        for (int r0 = 0; r0 < rows; r0 += 8) {
            int nr = rows - r0 < 8 ? rows - r0 : 8;
            const float *xb = x + r0 * ldx + c0;
            float *ab = acc + (int64_t)r0 * cols + c0;
            switch (nr) {
#define R(n) \
    case n: windows_block(n, w, off, k, xb, ldx, mask, ab, cols); break;
                R(8) R(7) R(6) R(5) R(4) R(3) R(2) R(1)
#undef R
            default: break;
            }
        }
    }
}
#endif

void bf__fma_windows(int level, const float *w, const int64_t *off, int k, const float *x, int rows, int cols,
                     int64_t ldx, float *acc)
{
#ifdef HAVE_AVX2_PATH
    if (level >= BF_SGEMM_AVX2 && bf__simd_cpu()) {
        fma_windows_avx2(w, off, k, x, rows, cols, ldx, acc);
        return;
    }
#endif
    fma_windows_ref(w, off, k, x, rows, cols, ldx, acc);
}

