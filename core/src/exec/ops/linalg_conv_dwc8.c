/* The depthwise Conv on AVX2 with 8 channels in the lanes, for small maps
 * (issue 33): ONNX Runtime's NCHWc depthwise kernel's structure over NCHW
 * tensors. linalg_conv_dw8.c vectorizes one plane along its outputs, and on
 * mobilenet_v2's 14x14 and 7x7 maps nearly every 8-output chunk crosses a
 * row end, so it loads each tap under a mask and blends the sum (7x7: seven
 * chunks a plane, all of them partial), and a plane's fixed costs (its
 * pointers, its last chunk's store, a 7-chunk plane run as 8) are paid
 * per channel: 0.28-0.31 ms a batch of 4 against ONNX Runtime's 0.19 on the
 * 960-channel 7x7 layers (docs/perf/mobilenet/h44.md, h44-dwc8). Here 8
 * channels' planes are first transposed into one buffer, each input
 * position's 8 channels one vector; every lane (channel) then has the same
 * geometry, so a padding tap is left out by the loop's bounds, not by a
 * mask, and stride 2 needs no phases; the outputs are transposed back into
 * the 8 planes. Moves only, around the arithmetic.
 *
 * Each lane's chain is dw2d_impl's (linalg_conv_direct.c) and
 * linalg_conv_dw8.c's: v = bias, then v = v + w * x over the taps in (kh,
 * kw) order, the padding's taps skipped, a rounded product and a rounded sum
 * each (no FMA: the target has none), then the fused activation's
 * max(lo, v) and min(hi, v); so the bits of either. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/alloc.h"
#include "exec/op.h"
#include "linalg_window.h"
#include "sgemm.h"
#include "transpose8.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define AVX2 __attribute__((target("avx2")))
/* Inside outputs a step at stride 1 (dwc8_3s1): eight chains keep Zen 2's
 * two add pipes busy where four left them a third idle, each add waiting 3
 * cycles on its chain's last; mobilenet_v2's 28x28, 14x14 and 7x7 maps ran
 * 8-13% faster, six and twelve between (docs/perf/mobilenet/h46.md,
 * h46-dwc8). Not at stride 2: eight or six there measured level or slower,
 * and in one function with stride 1 it slowed stride 2 by 3-6%. */
#ifndef DWC8_NB
#define DWC8_NB 8
#endif
#define DWC8_MAXTAPS (BF__DW_MAXKH * BF__DW_MAXKW)

/* Per kernel row kh (column kw), the output rows (columns) whose tap lies
 * inside the input, [rlo, rhi) ([clo, chi)), bf__valid_range's; and the
 * output columns whose every tap does, [c0, c1): their intersection. */
typedef struct dwc8_ranges {
    int64_t rlo[BF__DW_MAXKH], rhi[BF__DW_MAXKH], clo[BF__DW_MAXKW], chi[BF__DW_MAXKW], c0, c1;
} dwc8_ranges;

static void dwc8_ranges_of(const bf__window *g, dwc8_ranges *r)
{
    for (int64_t kh = 0; kh < g->k[1]; kh++)
        bf__valid_range(g->in[1], g->out[1], g->s[1], g->pb[1], kh, g->d[1], &r->rlo[kh], &r->rhi[kh]);
    r->c0 = 0, r->c1 = g->out[2];
    for (int64_t kw = 0; kw < g->k[2]; kw++) {
        bf__valid_range(g->in[2], g->out[2], g->s[2], g->pb[2], kw, g->d[2], &r->clo[kw], &r->chi[kw]);
        if (r->clo[kw] > r->c0) r->c0 = r->clo[kw];
        if (r->chi[kw] < r->c1) r->c1 = r->chi[kw];
    }
}

AVX2 static inline __m256 dwc8_act(__m256 v, const bf__act *act)
{
    return act ? _mm256_min_ps(_mm256_set1_ps(act->hi), _mm256_max_ps(_mm256_set1_ps(act->lo), v)) : v;
}

/* dwc8_body's N outputs from ow of row oh, every tap inside for each: N
 * independent chains (N a constant: the sums in registers), then ow += N.
 * A macro, not a function: the same loop as an always-inlined function
 * with one array for both N lost the stride-1 gain and ran the stride-2
 * maps 2-15% slower (docs/perf/mobilenet/h46.md, h46-dwc8). */
#define DWC8_INSIDE(N)                                                                                  \
    do {                                                                                                \
        __m256 v[N];                                                                                    \
        _Pragma("GCC unroll 8") for (int j = 0; j < (N); j++) v[j] = bias;                            \
        for (int64_t kh = kh0; kh < kh1; kh++) {                                                        \
            const float *r = t + ((oh * sh + kh * dh - ph) * IW + ow * sw - pw) * 8;                    \
            for (int64_t kw = 0; kw < KW; kw++) {                                                       \
                const __m256 wv = w[kh * KW + kw];                                                      \
                const float *p = r + kw * dw * 8;                                                       \
                _Pragma("GCC unroll 8") for (int j = 0; j < (N); j++)                                   \
                    v[j] = _mm256_add_ps(v[j], _mm256_mul_ps(wv, _mm256_loadu_ps(p + j * sw * 8)));     \
            }                                                                                           \
        }                                                                                               \
        _Pragma("GCC unroll 8") for (int j = 0; j < (N); j++)                                           \
            _mm256_storeu_ps(orow + (ow + j) * 8, dwc8_act(v[j], act));                                 \
        ow += (N);                                                                                      \
    } while (0)

/* The outputs of one block of 8 channels, t: its input positions' vectors,
 * w: its taps' vectors, o: its output positions' vectors. Per output row the
 * kernel rows inside the input are one range; the columns whose every tap
 * lies inside ([c0, c1)) run NB outputs at a time where NB is DWC8_NB (at
 * stride 1: dwc8_3s1), then four (independent chains: one left the adder
 * waiting on its latency), the others one at a time over their own range of
 * kernel columns. KW and NB constants where inlined (3x3). */
AVX2 static inline __attribute__((always_inline)) void dwc8_body(int64_t KW, int NB, const bf__window *g, const float *t,
                                                                 const __m256 *w, __m256 bias, const bf__act *act,
                                                                 float *o, const dwc8_ranges *rg)
{
    const int64_t IW = g->in[2], OH = g->out[1], OW = g->out[2], KH = g->k[1];
    const int64_t sh = g->s[1], sw = g->s[2], dh = g->d[1], dw = g->d[2], ph = g->pb[1], pw = g->pb[2];
    for (int64_t oh = 0; oh < OH; oh++) {
        /* the kernel rows inside the input for this output row: one range */
        int64_t kh0 = 0, kh1 = KH;
        while (kh0 < KH && oh < rg->rlo[kh0]) kh0++;
        while (kh1 > kh0 && oh >= rg->rhi[kh1 - 1]) kh1--;
        float *orow = o + oh * OW * 8;
        int64_t ow = 0;
        while (ow < OW) {
            /* at stride 1 eight at a time first (DWC8_NB), then four */
            if (NB && ow >= rg->c0 && ow + NB <= rg->c1) {   /* NB is 0 or DWC8_NB */
                DWC8_INSIDE(DWC8_NB);
                continue;
            }
            if (ow >= rg->c0 && ow + 4 <= rg->c1) {
                DWC8_INSIDE(4);
                continue;
            }
            int64_t kw0 = 0, kw1 = KW;
            while (kw0 < KW && ow < rg->clo[kw0]) kw0++;
            while (kw1 > kw0 && ow >= rg->chi[kw1 - 1]) kw1--;
            __m256 v = bias;
            for (int64_t kh = kh0; kh < kh1; kh++) {
                /* the row's first column may lie left of the input: the
                 * index, not a pointer, goes there */
                const int64_t r = (oh * sh + kh * dh - ph) * IW + ow * sw - pw;
                for (int64_t kw = kw0; kw < kw1; kw++)
                    v = _mm256_add_ps(v, _mm256_mul_ps(w[kh * KW + kw], _mm256_loadu_ps(t + (r + kw * dw) * 8)));
            }
            _mm256_storeu_ps(orow + ow * 8, dwc8_act(v, act));
            ow++;
        }
    }
}

AVX2 static void dwc8_3(const bf__window *g, const float *t, const __m256 *w, __m256 bias, const bf__act *act, float *o,
                        const dwc8_ranges *rg)
{
    dwc8_body(3, 0, g, t, w, bias, act, o, rg);
}

AVX2 static void dwc8_3s1(const bf__window *g, const float *t, const __m256 *w, __m256 bias, const bf__act *act, float *o,
                          const dwc8_ranges *rg)
{
    dwc8_body(3, DWC8_NB, g, t, w, bias, act, o, rg);
}

AVX2 static void dwc8_any(const bf__window *g, const float *t, const __m256 *w, __m256 bias, const bf__act *act,
                          float *o, const dwc8_ranges *rg)
{
    dwc8_body(g->k[2], 0, g, t, w, bias, act, o, rg);
}

/* planes p[c * ld + q] (8 of them) into vectors t[q * 8 + c], q < n */
AVX2 static void dwc8_in(const float *p, int64_t ld, int64_t n, float *t)
{
    int64_t q = 0;
    for (; q + 8 <= n; q += 8) bf__transpose8(p + q, ld, t + q * 8, 8);
    for (; q < n; q++)
        for (int c = 0; c < 8; c++) t[q * 8 + c] = p[c * ld + q];
}

/* vectors o[q * 8 + c] back into planes y[c * ld + q] */
AVX2 static void dwc8_out(const float *o, int64_t n, float *y, int64_t ld)
{
    int64_t q = 0;
    for (; q + 8 <= n; q += 8) bf__transpose8(o + q * 8, 8, y + q, ld);
    for (; q < n; q++)
        for (int c = 0; c < 8; c++) y[c * ld + q] = o[q * 8 + c];
}

int bf__dwc8_want(const bf__conv_params *cp)
{
    const bf__window *g = &cp->w;
    return cp->path == BF__CONV_DEPTHWISE && cp->simd == BF_SGEMM_AVX2 && g->in[0] == 1 &&
           g->k[0] == 1 && g->out[0] == 1 && g->k[1] <= BF__DW_MAXKH && g->k[2] <= BF__DW_MAXKW && g->k[1] > 0 &&
           g->k[2] > 0 && cp->osp > 0 && cp->osp <= BF__DWC8_MAXPOS && cp->n > 0 &&
           cp->isp <= (g->s[1] == 1 && g->s[2] == 1 ? BF__DWC8_MAXPOS1 : BF__DWC8_MAXPOS);
}

/* blocks of 8 channels from ch0, every image (a block's weight and bias
 * vectors gathered once for all images); t: room for 8 input and 8 output
 * planes */
AVX2 static void dwc8_blocks(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                             const bf__act *act, float *y, int64_t ch0, int64_t blocks, float *t)
{
    const bf__window *g = &cp->w;
    const int64_t taps = g->k[1] * g->k[2];
    float *o = t + 8 * cp->isp;
    dwc8_ranges rg;
    dwc8_ranges_of(g, &rg);
    __m256 w[DWC8_MAXTAPS];
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t ch = ch0 + 8 * b;
        float bv[8];
        for (int c = 0; c < 8; c++) bv[c] = bias ? bias[ch + c] : 0.0f;
        for (int64_t k = 0; k < taps; k++) {
            float wv[8];
            for (int c = 0; c < 8; c++) wv[c] = wt[(ch + c) * cp->kc + k];
            w[k] = _mm256_loadu_ps(wv);
        }
        const __m256 bvec = _mm256_loadu_ps(bv);
        for (int64_t n = 0; n < cp->n; n++) {
            dwc8_in(x + (n * cp->c + ch) * cp->isp, cp->isp, cp->isp, t);
            if (g->k[2] == 3 && g->s[2] == 1) dwc8_3s1(g, t, w, bvec, act, o, &rg);
            else if (g->k[2] == 3) dwc8_3(g, t, w, bvec, act, o, &rg);
            else dwc8_any(g, t, w, bvec, act, o, &rg);
            dwc8_out(o, cp->osp, y + (n * cp->m + ch) * cp->osp, cp->osp);
        }
    }
}

int64_t bf__dwc8_run(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                     const bf__act *act, float *y, int64_t g0, int64_t g1)
{
    if (!bf__dwc8_want(cp) || g1 - g0 < 8) return g0;
    const int64_t blocks = (g1 - g0) / 8;
    float *t = bf__aligned_alloc(sizeof(float) * (size_t)(8 * (cp->isp + cp->osp)));
    if (!t) return g0;
    dwc8_blocks(cp, x, wt, bias, act, y, g0, blocks, t);
    bf__free(t);
    return g0 + 8 * blocks;
}

#else

int bf__dwc8_want(const bf__conv_params *cp)
{
    (void)cp;
    return 0;
}

int64_t bf__dwc8_run(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                     const bf__act *act, float *y, int64_t g0, int64_t g1)
{
    (void)cp, (void)x, (void)wt, (void)bias, (void)act, (void)y, (void)g1;
    return g0;
}

#endif
