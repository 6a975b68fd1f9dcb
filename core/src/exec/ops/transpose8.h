/* An 8 x 8 float transpose in AVX2 registers, shared by the matrix
 * product (sgemm.c, packing panels) and the strided copy (shape_copy.c,
 * Transpose tiles). Callers compile it under target("avx2") and call it
 * only when bf__sgemm_simd() says the CPU has AVX2. */
#ifndef BF_TRANSPOSE8_H
#define BF_TRANSPOSE8_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>

/* dst[q * ldd + j] = src[j * lds + q] for j, q < 8. */
__attribute__((target("avx2"))) static inline void bf__transpose8(const float *src, int64_t lds, float *dst,
                                                                  int64_t ldd)
{
    __m256 r[8], t[8];
    for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(src + j * lds);
    for (int j = 0; j < 8; j += 2) {
        t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
        t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
    }
    for (int j = 0; j < 8; j += 4) {
        r[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
        r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
        r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
        r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(dst + j * ldd, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
        _mm256_storeu_ps(dst + (j + 4) * ldd, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
    }
}
#endif

#endif
