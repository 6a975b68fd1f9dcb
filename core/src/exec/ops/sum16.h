/* The float sum over 16 independent lanes (op.h, bf__sum16_f32) as an inline
 * body, for the kernels compiled again for 8 and 16 lanes (linalg_norm.c's
 * LayerNorm rows) to inline into each copy: the lanes and their tree are the
 * same at any vector width, so every copy has the plain one's bits; and the
 * same sum in AVX2 and AVX-512 intrinsics (linalg_pool.c's planes). */
#ifndef BF_OPS_SUM16_H
#define BF_OPS_SUM16_H

#include <stdint.h>

static inline __attribute__((always_inline)) float bf__sum16_body(const float *restrict x, int64_t n)
{
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += x[i + j];
    for (int j = 0; i < n; i++, j++) acc[j] += x[i];
    for (int h = 8; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) acc[j] += acc[j + h];
    return acc[0];
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The same sum written with intrinsics, for callers summing many short
 * runs (GlobalAveragePool's planes): compiled for wider vectors the body
 * above keeps its 16 accumulators on the stack and its tail and tree go
 * through memory, about 20 ns a run at any width (docs/perf/mobilenet/
 * h32.md). Lane j adds x[j], x[16 + j], ... from +0; the tail's r < 16
 * floats go to lanes 0 .. r - 1 by a masked add (the other lanes left as
 * they are, as the loop above leaves them); then acc[j] + acc[j + h] for
 * h = 8, 4, 2, 1 as halves of the register added. The same additions of
 * the same operands in the same order: the body's bits (test_ops_linalg,
 * gap_levels_match_reference). Callers are compiled for the target and
 * choose by bf__simd_level. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) float
bf__sum16_avx512(const float *x, int64_t n)
{
    int64_t body = n / 16 * 16;
    __mmask16 tail = (__mmask16)((1u << (n - body)) - 1u);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < body; i += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + i));
    if (tail) acc = _mm512_mask_add_ps(acc, tail, acc, _mm512_maskz_loadu_ps(tail, x + body));
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(acc), hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/* the same with the 16 lanes as two registers of 8 */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) float bf__sum16_avx2(const float *x,
                                                                                                 int64_t n)
{
    int64_t body = n / 16 * 16;
    int r = (int)(n - body);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < body; i += 16) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
    }
    if (r) {   /* masked-off lanes load +0 and are put back as they were */
        __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(r), lane);
        __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(r - 8), lane);
        a0 = _mm256_blendv_ps(a0, _mm256_add_ps(a0, _mm256_maskload_ps(x + body, m0)), _mm256_castsi256_ps(m0));
        a1 = _mm256_blendv_ps(a1, _mm256_add_ps(a1, _mm256_maskload_ps(x + body + 8, m1)), _mm256_castsi256_ps(m1));
    }
    __m256 s8 = _mm256_add_ps(a0, a1);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}
#endif

#endif
