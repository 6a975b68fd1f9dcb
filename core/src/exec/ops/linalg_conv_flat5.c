/* A depthwise 5x5 Conv of stride 1 whose output rows are as wide as the
 * input's, on AVX-512 (lraspp_mobilenet_v3_large's 5x5 layers: 32x32, and
 * the last stage's dilated ones at 16x16, most of what its fault campaign
 * re-runs: docs/perf/detectors.md, h16-seg).
 *
 * linalg_conv_direct.c's dw_flat plane (one input offset per tap for the
 * whole plane, each tap loaded and added under the table's mask of the
 * lanes where it lands inside the input) ran these through its any-size
 * body: the tap count unknown at compile time, one chunk of 16 outputs at
 * a time, so each chunk's 25 dependent adds waited on each other (22-27
 * GFLOP/s; 0.7-0.75x that time now). Here the 25 taps are unrolled and four
 * chunks run interleaved (four independent chains), the weight read as a
 * broadcast operand of the multiply, the same table and offsets. Every
 * lane runs dw_flat's sequence: v = bias, then v = v + w * x for each tap
 * in (kh, kw) order under its mask (a masked add keeps the other lanes'
 * sums), a rounded product and a rounded sum (no FMA); vmulps with the
 * input as its first source and vaddps with the sum as its first, as
 * dw_flat pins them (x86 returns the first source's NaN when both are
 * NaN): the same bits, NaN payloads included. */
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "linalg_window.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define AVX512_F5 __attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl")))

/* v + w * x in the lanes of mask k (the others as they are); x a masked
 * load of those lanes, w the tap's weight broadcast from memory */
#define F5_TAP(v, k, wp, p)                                                                  \
    do {                                                                                     \
        __mmask16 k_ = _load_mask16(k);                                                      \
        __m512 x_ = _mm512_maskz_loadu_ps(k_, p), t_;                                        \
        __asm__("vmulps %2%{1to16%}, %1, %0" : "=v"(t_) : "v"(x_), "m"(*(wp)));              \
        __asm__("vaddps %2, %1, %0%{%3%}" : "+v"(v) : "v"(v), "v"(t_), "Yk"(k_));            \
    } while (0)

static inline __mmask16 f5_tail(int64_t left)
{
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

/* the fused Clip/Relu: min(hi, max(lo, v)), operands in the order the
 * plain kernel's NaN rule wants (one spelling for every path below) */
#define F5_CLIP(v) ((v) = _mm512_min_ps(hi, _mm512_max_ps(lo, (v))))

/* Planes whose rows are 16 wide (in and out; stride 1): each output row
 * is one vector, and tap (kh, kw) of output row oh reads input row
 * oh + kh dh - ph at columns ow + kw dw - pw, the lanes where that column
 * is inside the row fixed per kw (cm[kw], five mask registers) and the
 * row inside or not as a whole (a row outside: the tap skipped in every
 * lane, as the table's empty mask skips it). So no mask from memory, the
 * 25 weights in registers, one unaligned load per tap and row, four rows
 * interleaved: per lane the same taps in the same order as above. */
#define R16_TAP(v, k, w, p)                                                                  \
    do {                                                                                     \
        __m512 x_ = _mm512_maskz_loadu_ps(k, p), t_;                                         \
        __asm__("vmulps %2, %1, %0" : "=v"(t_) : "v"(x_), "v"(w));                           \
        __asm__("vaddps %2, %1, %0%{%3%}" : "+v"(v) : "v"(v), "v"(t_), "Yk"(k));             \
    } while (0)

int bf__dw_row16_ok(const bf__window *w)
{
    return w->in[0] == 1 && w->k[0] == 1 && w->out[0] == 1 && w->k[1] == 5 && w->k[2] == 5 && w->s[1] == 1 &&
           w->s[2] == 1 && w->in[2] == 16 && w->out[2] == 16 && w->out[1] == w->in[1] && w->in[1] <= 4096 &&
           w->d[1] <= 64 && w->d[2] <= 64 && w->pb[1] <= 256 && w->pb[2] <= 64;
}

AVX512_F5 void bf__dw_row16_5x5(const bf__window *w, const float *x, const float *wk, float bv, const bf__act *act,
                                float *y)
{
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    const __m512 b = _mm512_set1_ps(bv);
    const int64_t H = w->in[1], dh = w->d[1], ph = w->pb[1];
    __mmask16 cm[5];
    int64_t dx[5];
    __m512 wv[25];
    for (int kw = 0; kw < 5; kw++) {
        dx[kw] = kw * w->d[2] - w->pb[2];
        unsigned m = 0;
        for (int l = 0; l < 16; l++) m |= (unsigned)(l + dx[kw] >= 0 && l + dx[kw] < 16) << l;
        cm[kw] = (__mmask16)m;
    }
#pragma GCC unroll 25
    for (int t = 0; t < 25; t++) wv[t] = _mm512_set1_ps(wk[t]);
    int64_t oh = 0;
    for (; oh + 4 <= H; oh += 4) {
        __m512 v0 = b, v1 = b, v2 = b, v3 = b;
#pragma GCC unroll 5
        for (int kh = 0; kh < 5; kh++) {
            int64_t ih = oh + kh * dh - ph;
            const float *r = x + ih * 16;
            int i0 = ih >= 0 && ih < H, i1 = ih + 1 >= 0 && ih + 1 < H;
            int i2 = ih + 2 >= 0 && ih + 2 < H, i3 = ih + 3 >= 0 && ih + 3 < H;
            if (i0 & i1 & i2 & i3) {
#pragma GCC unroll 5
                for (int kw = 0; kw < 5; kw++) {
                    const float *p = r + dx[kw];
                    R16_TAP(v0, cm[kw], wv[kh * 5 + kw], p);
                    R16_TAP(v1, cm[kw], wv[kh * 5 + kw], p + 16);
                    R16_TAP(v2, cm[kw], wv[kh * 5 + kw], p + 32);
                    R16_TAP(v3, cm[kw], wv[kh * 5 + kw], p + 48);
                }
                continue;
            }
#pragma GCC unroll 5
            for (int kw = 0; kw < 5; kw++) {
                const float *p = r + dx[kw];
                if (i0) R16_TAP(v0, cm[kw], wv[kh * 5 + kw], p);
                if (i1) R16_TAP(v1, cm[kw], wv[kh * 5 + kw], p + 16);
                if (i2) R16_TAP(v2, cm[kw], wv[kh * 5 + kw], p + 32);
                if (i3) R16_TAP(v3, cm[kw], wv[kh * 5 + kw], p + 48);
            }
        }
        if (act) {
            F5_CLIP(v0), F5_CLIP(v1), F5_CLIP(v2), F5_CLIP(v3);
        }
        _mm512_storeu_ps(y + 16 * oh, v0);
        _mm512_storeu_ps(y + 16 * oh + 16, v1);
        _mm512_storeu_ps(y + 16 * oh + 32, v2);
        _mm512_storeu_ps(y + 16 * oh + 48, v3);
    }
    for (; oh < H; oh++) {
        __m512 v = b;
        for (int kh = 0; kh < 5; kh++) {
            int64_t ih = oh + kh * dh - ph;
            if (ih < 0 || ih >= H) continue;
#pragma GCC unroll 5
            for (int kw = 0; kw < 5; kw++) R16_TAP(v, cm[kw], wv[kh * 5 + kw], x + ih * 16 + dx[kw]);
        }
        if (act) F5_CLIP(v);
        _mm512_storeu_ps(y + 16 * oh, v);
    }
}

AVX512_F5 void bf__dw_flat_5x5(const uint16_t *tab, const int64_t *off, int64_t osp, const float *x,
                               const float *wk, float bv, const bf__act *act, float *y)
{
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    const __m512 b = _mm512_set1_ps(bv);
    const int64_t chunks = (osp + 15) / 16;
    int64_t c = 0;
    for (; c + 4 <= chunks; c += 4) {
        __mmask16 *m = (__mmask16 *)(tab + c * 25);
        const float *xc = x + 16 * c;
        __m512 v0 = b, v1 = b, v2 = b, v3 = b;
#pragma GCC unroll 25
        for (int t = 0; t < 25; t++) {
            const float *p = xc + off[t];
            F5_TAP(v0, m + t, wk + t, p);
            F5_TAP(v1, m + 25 + t, wk + t, p + 16);
            F5_TAP(v2, m + 50 + t, wk + t, p + 32);
            F5_TAP(v3, m + 75 + t, wk + t, p + 48);
        }
        if (act) {
            F5_CLIP(v0), F5_CLIP(v1), F5_CLIP(v2), F5_CLIP(v3);
        }
        _mm512_storeu_ps(y + 16 * c, v0);
        _mm512_storeu_ps(y + 16 * c + 16, v1);
        _mm512_storeu_ps(y + 16 * c + 32, v2);
        _mm512_mask_storeu_ps(y + 16 * c + 48, f5_tail(osp - 16 * c - 48), v3);
    }
    for (; c < chunks; c++) {
        __mmask16 *m = (__mmask16 *)(tab + c * 25);
        const float *xc = x + 16 * c;
        __m512 v = b;
#pragma GCC unroll 25
        for (int t = 0; t < 25; t++) F5_TAP(v, m + t, wk + t, xc + off[t]);
        if (act) F5_CLIP(v);
        _mm512_mask_storeu_ps(y + 16 * c, f5_tail(osp - 16 * c), v);
    }
}
#endif
