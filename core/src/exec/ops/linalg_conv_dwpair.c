/* A depthwise 3-wide stride-2 Conv whose output rows are at most 7 wide
 * (mobilenet_v2's features.14: 576 channels, 14x14 -> 7x7), two output
 * rows to a 16-lane vector (AVX-512). linalg_conv_direct.c's stride-2
 * rows run one 16-lane chunk a row, so a 7-wide row used 7 lanes of 16
 * and paid the row's setup for them: 2.6x ONNX Runtime's time on that
 * layer (docs/perf/mobilenet.md, h14-mbv2 and h15-dw).
 *
 * Lanes 0 .. OW of a vector are output row oh, lanes 8 .. 8 + OW row
 * oh + 1. Per kernel row kh, one masked load of 16 floats from each of
 * the two input rows (oh s - pb + kh d and the one s rows below) at the
 * row's first tap, and one permute picks tap kw's floats for both rows
 * (lane ow: column 2 ow + kw of its row; kw 0 and 1 from one pair of
 * loads, kw 2 from a second pair two floats on: 2 (OW - 1) + 2 <= 15, so
 * no lane needs a float past its load). Each tap is multiplied and added
 * in the lanes where it lands inside the input only (a masked add keeps
 * the other lanes' sums), kernel rows in kh order, taps in kw order, the
 * sum from the bias: every lane runs the scalar loop's sequence (v = bias,
 * then v = v + w * x per tap inside the input; a rounded product and a
 * rounded sum, no FMA), vmulps with the input as its first source and
 * vaddps with the sum as its first, as linalg_conv_direct.c's kernels
 * have them, so the same bits, NaN payloads included. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "linalg_window.h"
#include "sgemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define DP512 1
#define AVX512_DP __attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define DP512 0
#endif

int bf__dw_pair_ok(const bf__conv_params *cp)
{
    const bf__window *w = &cp->w;
    return DP512 && cp->simd >= BF_SGEMM_AVX512 && cp->path == BF__CONV_DEPTHWISE && w->in[0] == 1 &&
           w->k[0] == 1 && w->out[0] == 1 && w->k[2] == 3 && w->s[2] == 2 && w->d[2] == 1 && w->out[2] >= 1 &&
           w->out[2] <= 7 && w->k[1] <= BF__DW_MAXKH && w->in[2] < ((int64_t)1 << 20) && w->pb[2] < 16;
}

#if DP512
/* v + w * t in v's lanes of k (the operands pinned as the direct kernels
 * have them: t first in vmulps, v first in vaddps) */
#define DP_MADD(v, k, w, t)                                                                  \
    do {                                                                                     \
        __m512 p_;                                                                           \
        __asm__("vmulps %2, %1, %0" : "=v"(p_) : "v"(t), "v"(w));                            \
        __asm__("vaddps %2, %1, %0%{%3%}" : "+v"(v) : "v"(v), "v"(p_), "Yk"(k));             \
    } while (0)

/* One channel's plane. ld0, ld2: the lanes of a row's loads at its first
 * tap and two floats on that lie inside the input row; col[kw]: the output
 * columns whose tap kw lies inside it (bit ow). */
AVX512_DP static void dw_pair(const bf__window *w, const float *x, const float *wk, float bv, const bf__act *act,
                              float *y, __mmask16 ld0, __mmask16 ld2, const __mmask16 *col)
{
    const int64_t IH = w->in[1], IW = w->in[2], OH = w->out[1], OW = w->out[2], pb = w->pb[2];
    const __m512i i0 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i i1 = _mm512_add_epi32(i0, _mm512_set1_epi32(1));
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    const __mmask16 rowl = (__mmask16)((1u << OW) - 1u);
    for (int64_t oh = 0; oh < OH; oh += 2) {
        __m512 v = _mm512_set1_ps(bv);
        int two = oh + 1 < OH;
        for (int64_t kh = 0; kh < w->k[1]; kh++) {
            int64_t ia = oh * w->s[1] - w->pb[1] + kh * w->d[1], ib = ia + w->s[1];
            int va = ia >= 0 && ia < IH, vb = two && ib >= 0 && ib < IH;
            if (!va && !vb) continue;
            /* a row outside the input is never read: its loads masked off, from row 0 */
            const float *pa = x + (va ? ia : 0) * IW - pb, *pbr = x + (vb ? ib : 0) * IW - pb;
            __mmask16 ka0 = va ? ld0 : 0, kb0 = vb ? ld0 : 0, ka2 = va ? ld2 : 0, kb2 = vb ? ld2 : 0;
            __mmask16 rows = (__mmask16)((va ? 0x00FFu : 0u) | (vb ? 0xFF00u : 0u));
            __m512 a = _mm512_maskz_loadu_ps(ka0, pa), b = _mm512_maskz_loadu_ps(kb0, pbr);
            __m512 t = _mm512_permutex2var_ps(a, i0, b);
            __mmask16 k = (__mmask16)(rows & (col[0] | col[0] << 8));
            DP_MADD(v, k, _mm512_set1_ps(wk[kh * 3]), t);
            t = _mm512_permutex2var_ps(a, i1, b);
            k = (__mmask16)(rows & (col[1] | col[1] << 8));
            DP_MADD(v, k, _mm512_set1_ps(wk[kh * 3 + 1]), t);
            a = _mm512_maskz_loadu_ps(ka2, pa + 2), b = _mm512_maskz_loadu_ps(kb2, pbr + 2);
            t = _mm512_permutex2var_ps(a, i0, b);
            k = (__mmask16)(rows & (col[2] | col[2] << 8));
            DP_MADD(v, k, _mm512_set1_ps(wk[kh * 3 + 2]), t);
        }
        if (act) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        _mm512_mask_storeu_ps(y + oh * OW, rowl, v);
        if (two) _mm256_mask_storeu_ps(y + (oh + 1) * OW, (__mmask8)rowl, _mm512_extractf32x8_ps(v, 1));
    }
}
#endif

void bf__dw_pair(const bf__conv_params *cp, const float *x, const float *wt, const float *bias, const bf__act *act,
                 float *y, int64_t g0, int64_t g1)
{
#if DP512
    const bf__window *w = &cp->w;
    const int64_t IW = w->in[2], OW = w->out[2], pb = w->pb[2];
    __mmask16 ld0 = 0, ld2 = 0, col[3] = {0, 0, 0};
    for (int64_t l = 0; l < 16; l++) {
        if (l - pb >= 0 && l - pb < IW) ld0 |= (__mmask16)(1u << l);
        if (l + 2 - pb >= 0 && l + 2 - pb < IW) ld2 |= (__mmask16)(1u << l);
    }
    for (int64_t ow = 0; ow < OW; ow++)
        for (int kw = 0; kw < 3; kw++)
            if (2 * ow + kw - pb >= 0 && 2 * ow + kw - pb < IW) col[kw] |= (__mmask16)(1u << ow);
    for (int64_t n = 0; n < cp->n; n++)
        for (int64_t g = g0; g < g1; g++)
            dw_pair(w, x + (n * cp->c + g) * cp->isp, wt + g * cp->kc, bias ? bias[g] : 0.0f, act,
                    y + (n * cp->m + g) * cp->osp, ld0, ld2, col);
#else
    (void)cp, (void)x, (void)wt, (void)bias, (void)act, (void)y, (void)g0, (void)g1;
#endif
}
