/* Float math the compiler can vectorise: exp, sigmoid, tanh and erf as
 * inline, branch-free fp32 code, shared by the elementwise ops and the
 * recurrent ones (whose gates are sigmoids and tanhs). */
#ifndef BF_FASTMATH_IMPL_H
#define BF_FASTMATH_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/simd.h"

/* ---- float math the compiler can vectorise ----------------------------
 *
 * libm's expf, tanhf and erff are scalar calls, ten times slower than the
 * vector code PyTorch runs. These are branch-free: clamps and selects are
 * integer-mask blends (GCC keeps `c ? a : b` on floats as a branch around
 * the arithmetic, since that might trap, and so would not vectorise the loop);
 * everything else is plain arithmetic, evaluated in the order written (no
 * contraction under -std=c11), so results are the same on every machine.
 * Against the exact functions, over all float inputs: exp within 1 ulp,
 * sigmoid 3 ulp, tanh and erf within 5e-7 (ONNX Runtime's MLAS and XLA use
 * these same tanh and erf rational approximations). NaN in, NaN out; +-Inf
 * and huge inputs give the limits (exp: Inf and 0, tanh/erf: +-1). */

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* c ? a : b, with both a and b evaluated */
static inline float select_f32(int c, float a, float b)
{
    uint32_t m = 0u - (uint32_t)c;
    return bits_f32((f32_bits(a) & m) | (f32_bits(b) & ~m));
}

/* Clamps to [lo, hi]; comparisons are false for NaN, so NaN passes. */
static inline float clamp_f32(float x, float lo, float hi)
{
    x = select_f32(x < lo, lo, x);
    return select_f32(x > hi, hi, x);
}

/* HardSwish as torch computes it, x * clamp(x + 3, 0, 6) / 6 (docs/NUMERICS.md):
 * the HardSwish op's kernel (elementwise.c) and a Conv's fused epilogue
 * (linalg_conv.c) both call this one. */
static inline float hard_swish_f32(float x) { return x * clamp_f32(x + 3.0f, 0.0f, 6.0f) / 6.0f; }

/* exp(x) = 2^n * e^r with n = round(x / ln 2), |r| <= ln 2 / 2: r by
 * Cody-Waite reduction (ln 2 split so n * LN2_HI is exact), e^r by Cephes'
 * degree-6 polynomial. 2^n is applied as two factors so that results that
 * are subnormal (n < -126) or overflow (n = 128) round once, correctly.
 * Beyond the clamp the result is 0 or Inf anyway. */
static inline float exp_f32(float x)
{
    x = clamp_f32(x, -104.0f, 89.0f);
    /* adding 1.5 * 2^23 rounds to an integer and leaves it in the low bits */
    float t = x * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    int32_t ni = (int32_t)(f32_bits(t) - 0x4B400000u);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t n1 = ni / 2, n2 = ni - n1;      /* NaN: garbage n, but p is NaN */
    return p * bits_f32((uint32_t)(n1 + 127) << 23) * bits_f32((uint32_t)(n2 + 127) << 23);
}

/* exp of -|x| only: no Inf / Inf for large |x|, no cancellation for very
 * negative x (sigmoid(-100) is 3.7e-44, not 0). */
static inline float sigmoid_f32(float x)
{
    float e = exp_f32(-fabsf(x));
    return select_f32(x < 0.0f, e, 1.0f) / (1.0f + e);
}

/* tanh: odd rational minimax p(x)/q(x) of degree 13/6 on [-9, 9] (tanh is
 * +-1 in float beyond); below 4e-4, tanh(x) = x to float precision. */
static inline float tanh_f32(float x0)
{
    float x = clamp_f32(x0, -9.0f, 9.0f), x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    float y = clamp_f32(x * (p / q), -1.0f, 1.0f);
    return select_f32(fabsf(x0) < 4e-4f, x0, y);
}

/* erf: odd rational p(x)/q(x) of degree 13/8 on [-4, 4] (erf is +-1 in float
 * beyond). x * (p/q) rather than (x*p)/q keeps subnormal x accurate. */
static inline float erf_f32(float x0)
{
    float x = clamp_f32(x0, -4.0f, 4.0f), x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    float q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return clamp_f32(x * (p / q), -1.0f, 1.0f);
}

/* ---- AVX2 copies -------------------------------------------------------
 *
 * The build targets plain x86-64 (4-wide SSE vectors). A loop over the
 * functions above compiled a second time under target("avx2") runs 8 wide
 * with the very same operations: that target has no FMA, so nothing is
 * contracted and each lane rounds as the plain copy does, bit for bit
 * (tests/unit/test_fastmath_avx2.c). Callers pick the copy with
 * bf__cpu_avx2(), which BITFLIP_SIMD=ref turns off (base/simd.h). */
#if defined(__x86_64__) && defined(__GNUC__)
#define BF__HAVE_AVX2_COPY 1
#define BF__AVX2 __attribute__((target("avx2")))
/* The 16-lane copy (BITFLIP_SIMD=avx512's path): the same loop again under
 * AVX-512, whose target has no FMA either; GCC is asked for 512-bit vectors
 * (its tuning may prefer 256). Same operations lane for lane: the same bits
 * (tests/unit/test_fastmath_avx2.c). */
#if defined(__clang__)   /* the fuzz build: clang has no prefer-vector-width target, but this attribute */
#define BF__AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"), min_vector_width(512)))
#else
#define BF__AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,prefer-vector-width=512")))
#endif
static inline int bf__cpu_avx2(void) { return bf__simd_avx2(); }
#else
static inline int bf__cpu_avx2(void) { return 0; }
#endif
#define BF__ALWAYS_INLINE static inline __attribute__((always_inline))

/* static void NAME(float *y, const float *x, int64_t n): y[i] = F(x[i]),
 * the AVX-512 copy where the CPU has it (and BITFLIP_SIMD allows it), the
 * AVX2 copy where it has that: GELU, Erf and Softmax's exp over a ViT's
 * activations ran 8 lanes wide where its products ran 16. */
#ifdef BF__HAVE_AVX2_COPY
#define BF__MAP_VEC(NAME, F)                                                                           \
    BF__ALWAYS_INLINE void NAME##_body(float *y, const float *x, int64_t n)                            \
    {                                                                                                  \
        for (int64_t i = 0; i < n; i++) y[i] = F(x[i]);                                                \
    }                                                                                                  \
    BF__AVX2 static void NAME##_avx2(float *y, const float *x, int64_t n) { NAME##_body(y, x, n); }    \
    BF__AVX512 static void NAME##_avx512(float *y, const float *x, int64_t n) { NAME##_body(y, x, n); } \
    static void NAME##_plain(float *y, const float *x, int64_t n) { NAME##_body(y, x, n); }            \
    static void NAME(float *y, const float *x, int64_t n)                                              \
    {                                                                                                  \
        int level = bf__simd_level();                                                                  \
        if (level >= BF__SIMD_AVX512) NAME##_avx512(y, x, n);                                          \
        else if (level >= BF__SIMD_AVX2) NAME##_avx2(y, x, n);                                         \
        else NAME##_plain(y, x, n);                                                                    \
    }
#else
#define BF__MAP_VEC(NAME, F)                                                                           \
    static void NAME(float *y, const float *x, int64_t n)                                              \
    {                                                                                                  \
        for (int64_t i = 0; i < n; i++) y[i] = F(x[i]);                                                \
    }
#endif

#endif
