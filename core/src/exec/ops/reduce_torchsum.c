/* Float sums in PyTorch's order, vectorised as ATen's are (ReduceSum and
 * ReduceMean over one run of axes; elementwise_reduce.c's torch_sum).
 *
 * torch.sum and torch.mean of a contiguous float tensor accumulate in float
 * in the cascade of ATen/native/cpu/SumKernel.cpp (docs/NUMERICS.md,
 * "ReduceMean and ReduceSum"), so a partial sum past 3.4e38 is Inf where
 * PyTorch's is only if the order is PyTorch's. ATen runs that cascade on
 * 8-float vectors (4 of them side by side, 4 levels); so does this file,
 * through GCC's vector extensions: a vector add is 8 independent float adds,
 * each lane rounding as a scalar add would, and nothing here multiplies, so
 * no contraction can enter. The same code is compiled twice: for the build's
 * baseline (SSE: each 8-float vector is two 4-float halves) and under
 * target("avx2") (one register), picked by the caller's bf__cpu_avx2()
 * (BITFLIP_SIMD=ref forces the baseline). Both give the bits of the plain
 * scalar loops this replaced, which tests/unit/test_reduce_torchsum.c keeps
 * as its reference, on every shape and at each level the CPU has. */
#include <stdint.h>
#include <string.h>

#include "elementwise_impl.h"
#include "fastmath_impl.h"

typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

/* unaligned loads and stores; macros, not functions, so that no vector
 * crosses a call (a 32-byte vector argument changes the ABI without AVX) */
#define LD8(v, p) memcpy(&(v), (p), sizeof(v8f))
#define ST8(p, v) memcpy((p), &(v), sizeof(v8f))

/* c10's CeilLog2 */
static int64_t ceil_log2(int64_t x)
{
    if (x <= 2) return 1;
    int64_t r = 0;
    for (uint64_t v = (uint64_t)(x - 1); v; v >>= 1) r++;
    return r;
}

/* ATen's multi_row_sum's level width: every 2^lp rows level j - 1 folds
 * into level j (4 levels); at least 16 rows. */
static int64_t level_power(int64_t size)
{
    int64_t lp = ceil_log2(size) / 4;
    return lp < 4 ? 4 : lp;
}

/* multi_row_sum on 4 vectors of 8 lanes: `size` rows, vector k of row i at
 * x + i * rs + k * cs; the 32 sums into a[0..3]. The level folds are
 * written out (acc[j] += acc[j - 1], acc[j - 1] = 0, stop unless the row
 * count is a multiple of the next level's width). */
BF__ALWAYS_INLINE void cascade32(const float *x, int64_t rs, int64_t cs, int64_t size, v8f *a)
{
    v8f l0[4] = {0}, l1[4] = {0}, l2[4] = {0}, l3[4] = {0}, t;
    int64_t lp = level_power(size), step = (int64_t)1 << lp, mask = step - 1, i = 0;
    while (i + step <= size) {
        for (int64_t j = 0; j < step; j++, i++)
            for (int k = 0; k < 4; k++) {
                LD8(t, x + i * rs + k * cs);
                l0[k] += t;
            }
        for (int k = 0; k < 4; k++) l1[k] += l0[k], l0[k] = (v8f){0};
        if (i & (mask << lp)) continue;
        for (int k = 0; k < 4; k++) l2[k] += l1[k], l1[k] = (v8f){0};
        if (i & (mask << 2 * lp)) continue;
        for (int k = 0; k < 4; k++) l3[k] += l2[k], l2[k] = (v8f){0};
    }
    for (; i < size; i++)
        for (int k = 0; k < 4; k++) {
            LD8(t, x + i * rs + k * cs);
            l0[k] += t;
        }
    for (int k = 0; k < 4; k++) a[k] = ((l0[k] + l1[k]) + l2[k]) + l3[k];
}

/* Row i's 4 scalar lanes, element k at p + k * cs, as one vector. */
#define LD4(p, cs) ((v4f){(p)[0], (p)[(cs)], (p)[2 * (cs)], (p)[3 * (cs)]})

/* multi_row_sum on 4 scalar lanes (element k of row i at x + i * rs +
 * k * cs), held as one 4-float vector. */
BF__ALWAYS_INLINE v4f cascade4(const float *x, int64_t rs, int64_t cs, int64_t size)
{
    v4f l0 = {0}, l1 = {0}, l2 = {0}, l3 = {0};
    int64_t lp = level_power(size), step = (int64_t)1 << lp, mask = step - 1, i = 0;
    while (i + step <= size) {
        for (int64_t j = 0; j < step; j++, i++) l0 += LD4(x + i * rs, cs);
        l1 += l0, l0 = (v4f){0};
        if (i & (mask << lp)) continue;
        l2 += l1, l1 = (v4f){0};
        if (i & (mask << 2 * lp)) continue;
        l3 += l2, l2 = (v4f){0};
    }
    for (; i < size; i++) l0 += LD4(x + i * rs, cs);
    return ((l0 + l1) + l2) + l3;
}

/* ATen's row_sum on 8 lanes: `size` vectors at x + e * es as 4
 * interleaved cascades, the leftover vectors into the first, then the four
 * added in order; into *s. */
BF__ALWAYS_INLINE void row_sum8(const float *x, int64_t es, int64_t size, v8f *s)
{
    v8f a[4], t;
    int64_t n4 = size / 4;
    cascade32(x, 4 * es, es, n4, a);
    for (int64_t i = n4 * 4; i < size; i++) {
        LD8(t, x + i * es);
        a[0] += t;
    }
    *s = ((a[0] + a[1]) + a[2]) + a[3];
}

/* row_sum on one lane: `size` floats at x + e * es. */
BF__ALWAYS_INLINE float row_sum1(const float *x, int64_t es, int64_t size)
{
    int64_t n4 = size / 4;
    v4f a = cascade4(x, 4 * es, es, n4);
    float s = a[0];
    for (int64_t i = n4 * 4; i < size; i++) s += x[i * es];
    return ((s + a[1]) + a[2]) + a[3];
}

/* A contiguous row (vectorized_inner_sum; scalar_inner_sum below 8). */
BF__ALWAYS_INLINE float inner_sum(const float *x, int64_t n)
{
    if (n < 8) return row_sum1(x, 1, n);
    int64_t nv = n / 8;
    v8f lanes;
    row_sum8(x, 8, nv, &lanes);
    float s = 0.0f;
    for (int64_t k = nv * 8; k < n; k++) s += x[k];
    for (int l = 0; l < 8; l++) s += lanes[l];
    return s;
}

/* [n, inner] summed over n into out[inner] (vectorized_outer_sum; below 8
 * columns scalar_outer_sum): blocks of 32 columns (of 4 below 8 columns)
 * as one cascade, the rest through row_sum. */
BF__ALWAYS_INLINE void outer_sum(const float *x, int64_t n, int64_t inner, float *out)
{
    int64_t j = 0;
    if (inner >= 8) {
        for (; j + 32 <= inner; j += 32) {
            v8f a[4];
            cascade32(x + j, inner, 8, n, a);
            for (int k = 0; k < 4; k++) ST8(out + j + 8 * k, a[k]);
        }
        for (; j + 8 <= inner; j += 8) {
            v8f s;
            row_sum8(x + j, inner, n, &s);
            ST8(out + j, s);
        }
    } else {
        for (; j + 4 <= inner; j += 4) {
            v4f a = cascade4(x + j, inner, 1, n);
            memcpy(out + j, &a, sizeof a);
        }
    }
    for (; j < inner; j++) out[j] = row_sum1(x + j, inner, n);
}

BF__ALWAYS_INLINE void torch_sum_body(const float *x, int64_t outer, int64_t n, int64_t inner, float *out)
{
    if (inner == 1)
        for (int64_t r = 0; r < outer; r++) out[r] = inner_sum(x + r * n, n);
    else
        for (int64_t o = 0; o < outer; o++) outer_sum(x + o * n * inner, n, inner, out + o * inner);
}

#ifdef BF__HAVE_AVX2_COPY
BF__AVX2 static void torch_sum_avx2(const float *x, int64_t outer, int64_t n, int64_t inner, float *out)
{
    torch_sum_body(x, outer, n, inner, out);
}
#endif

static void torch_sum_plain(const float *x, int64_t outer, int64_t n, int64_t inner, float *out)
{
    torch_sum_body(x, outer, n, inner, out);
}

void bf__torch_sum_f32(const float *x, int64_t outer, int64_t n, int64_t inner, float *out, int simd)
{
#ifdef BF__HAVE_AVX2_COPY
    if (simd) {
        torch_sum_avx2(x, outer, n, inner, out);
        return;
    }
#else
    (void)simd;
#endif
    torch_sum_plain(x, outer, n, inner, out);
}
