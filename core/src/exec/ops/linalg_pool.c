/* The pools: MaxPool and AveragePool (separable over the window, with a
 * direct loop for 2x2 max), GlobalAveragePool and GlobalMaxPool, and the
 * accessors through which the differential engine pools one plane of a
 * step alone (exec/step_access.h). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/simd.h"
#include "exec/op.h"
#include "exec/step_access.h"
#include "linalg_impl.h"
#include "linalg_window.h"
#include "sum16.h"
#include "transpose8.h"

/* ---- MaxPool, AveragePool ---- */

typedef struct pool_params {
    bf__window w;
    int64_t planes;             /* N * C */
    int64_t ilo, ihi;           /* output columns whose whole window is inside the input */
    int is_max, count_include_pad;
} pool_params;
static_assert(sizeof(pool_params) <= BF__OP_PARAMS_MAX, "pool params too large");

static bf_status pool_prepare(bf__prep *p, int kind, bf_error *err)
{
    const bf__node *nd = p->node;
    pool_params *pp = (pool_params *)p->params;
    bf_status st;
    if ((st = bf__want_f32(p, 0, "X", err))) return st;
    if (kind == BF__WIN_MAXPOOL && bf__output_wanted(p, 1))
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "output Indices is not supported; only the values output Y");
    int64_t cip = 0;
    if (kind == BF__WIN_AVGPOOL && (st = bf__attr_int(nd, "count_include_pad", 0, &cip, err))) return st;
    if (cip != 0 && cip != 1)
        return bf__node_error(err, nd, BF_EFORMAT, "attribute 'count_include_pad' is %lld; must be 0 or 1",
                              (long long)cip);
    if ((st = bf__window_parse(p, kind, NULL, &pp->w, err))) return st;
    const bf_tensor *x = p->in[0];
    pp->planes = x->dims[0] * x->dims[1];
    pp->is_max = kind == BF__WIN_MAXPOOL;
    pp->count_include_pad = (int)cip;
    p->scratch = sizeof(float) * (size_t)pp->w.in[2];
    const bf__window *w = &pp->w;
    int64_t lo, hi, unused;
    bf__valid_range(w->in[2], w->out[2], w->s[2], w->pb[2], 0, w->d[2], &pp->ilo, &unused);
    bf__valid_range(w->in[2], w->out[2], w->s[2], w->pb[2], w->k[2] - 1, w->d[2], &lo, &hi);
    pp->ihi = hi > pp->ilo ? hi : pp->ilo;
    int64_t dims[5] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < pp->w.rank; i++) dims[2 + i] = pp->w.out[3 - pp->w.rank + i];
    bf__set_shape(p->out[0], BF_F32, 2 + pp->w.rank, dims);
    return BF_OK;
}

bf_status bf__maxpool_prepare(bf__prep *p, bf_error *err) { return pool_prepare(p, BF__WIN_MAXPOOL, err); }
bf_status bf__avgpool_prepare(bf__prep *p, bf_error *err) { return pool_prepare(p, BF__WIN_AVGPOOL, err); }

/* Max that propagates NaN: once the running max is NaN it stays NaN. */
static inline __attribute__((always_inline)) float max_nan(float m, float v) { return (v > m || v != v) ? v : m; }

/* Window [*lo, *hi) of input positions (step d) for output o, clipped to the
 * input; *full is its size clipped to the padded input instead (the
 * count_include_pad divisor, as in PyTorch and ONNX Runtime). */
static inline __attribute__((always_inline)) void window_at(const bf__window *w, int i, int64_t o, int64_t *lo, int64_t *hi, int64_t *full)
{
    int64_t start = o * w->s[i] - w->pb[i];
    int64_t end = start + (w->k[i] - 1) * w->d[i] + 1;
    int64_t pend = end < w->in[i] + w->pe[i] ? end : w->in[i] + w->pe[i];
    *full = pend - start;                   /* dilation is 1 where this is used */
    /* first tap at or after 0, on the dilation grid */
    int64_t l = start >= 0 ? start : start + bf__ceil_div(-start, w->d[i]) * w->d[i];
    *lo = l;
    *hi = end < w->in[i] ? end : w->in[i];
}

/* Reduces one row along its width: outputs [ilo, ihi) have every tap
 * inside the row and go tap by tap over the whole range (vectorisable);
 * the few edge outputs clip their windows one at a time. `rows` is the
 * divisor's factor from the outer dims. */
static inline __attribute__((always_inline)) void pool_row(const pool_params *pp, const float *restrict src,
                                                            float *restrict yr, int64_t rows)
{
    const bf__window *w = &pp->w;
    int64_t k = w->k[2], s = w->s[2], d = w->d[2], pb = w->pb[2], ilo = pp->ilo, ihi = pp->ihi;
    for (int64_t ow = 0; ow < w->out[2]; ow++) {
        if (ow == ilo) ow = ihi;
        if (ow >= w->out[2]) break;
        int64_t w0, w1, wfull;
        window_at(w, 2, ow, &w0, &w1, &wfull);
        if (pp->is_max) {
            float m = -INFINITY;
            for (int64_t iw = w0; iw < w1; iw += d) m = max_nan(m, src[iw]);
            yr[ow] = m;
        } else {
            float sum = 0.0f;
            for (int64_t iw = w0; iw < w1; iw++) sum += src[iw];
            yr[ow] = sum / (float)(rows * (pp->count_include_pad ? wfull : w1 - w0));
        }
    }
    if (ilo >= ihi) return;
    for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] = src[ow * s - pb];
    for (int64_t j = 1; j < k; j++) {
        int64_t o = j * d - pb;
        if (pp->is_max)
            for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] = max_nan(yr[ow], src[ow * s + o]);
        else
            for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] += src[ow * s + o];
    }
    if (!pp->is_max) {
        float count = (float)(rows * k);        /* an inside window: clipped or not, k wide */
        for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] /= count;
    }
}

/* Pools one plane separably: for each output row, reduce the window's input
 * rows into a row of width IW (contiguous, vectorisable), then reduce along
 * the row. Max and sum are both separable over a box. */
static inline __attribute__((always_inline)) void pool_plane_body(const pool_params *pp, const float *restrict x,
                                                                  float *restrict y, float *restrict row)
{
    const bf__window *w = &pp->w;
    int64_t IH = w->in[1], IW = w->in[2];
    for (int64_t od = 0; od < w->out[0]; od++) {
        int64_t d0, d1, dfull;
        window_at(w, 0, od, &d0, &d1, &dfull);
        for (int64_t oh = 0; oh < w->out[1]; oh++) {
            int64_t h0, h1, hfull;
            window_at(w, 1, oh, &h0, &h1, &hfull);
            int64_t rows = 0;
            const float *src = row;
            for (int64_t id = d0; id < d1; id += w->d[0])
                for (int64_t ih = h0; ih < h1; ih += w->d[1]) {
                    const float *restrict xr = x + (id * IH + ih) * IW;
                    if (rows++ == 0) {
                        src = xr;
                        continue;
                    }
                    if (rows == 2) memcpy(row, src, sizeof(float) * (size_t)IW), src = row;
                    if (pp->is_max)
                        for (int64_t i = 0; i < IW; i++) row[i] = max_nan(row[i], xr[i]);
                    else
                        for (int64_t i = 0; i < IW; i++) row[i] += xr[i];
                }
            float *restrict yr = y + (od * w->out[1] + oh) * w->out[2];
            if (rows == 0) {
                /* only when dilated taps all miss the input: an empty max */
                for (int64_t ow = 0; ow < w->out[2]; ow++) yr[ow] = -INFINITY;
                continue;
            }
            int64_t nd_ = (d1 - d0 + w->d[0] - 1) / w->d[0], nh = (h1 - h0 + w->d[1] - 1) / w->d[1];
            pool_row(pp, src, yr, pp->count_include_pad ? dfull * hfull : nd_ * nh);
        }
    }
}

/* pool_plane_body compiled twice: for the baseline x86-64 (the reference)
 * and for AVX2, where its loops over a row run 8 lanes wide. Each element
 * gets the same operations in the same order either way (max_nan's
 * comparison, or the sums in the rows' order then the division; no FMA to
 * contract under -std=c11), so the two give the same bits. */
static void pool_plane_ref(const pool_params *pp, const float *restrict x, float *restrict y, float *restrict row)
{
    pool_plane_body(pp, x, y, row);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void pool_plane_avx2(const pool_params *pp, const float *restrict x,
                                                            float *restrict y, float *restrict row)
{
    pool_plane_body(pp, x, y, row);
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define POOL512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))

/* max_nan on 16 lanes: each lane the scalar's comparison (v > m ordered,
 * or v a NaN) and choice, so the same bits, NaN payloads and the zeros'
 * signs included */
POOL512 static inline __m512 max_nan16(__m512 m, __m512 v)
{
    __mmask16 k = _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(k, m, v);
}

/* A 2-D MaxPool of horizontal stride 2, undilated across (resnet18's and
 * most CNNs' 3x3/2 stem pool): pool_plane_body's separable order, element
 * for element (the window's rows max_nan'd in order into a row, then the
 * row's taps in order from the first), on 16 lanes. The compiled AVX2 copy
 * reads the taps `ow * s + o` one float at a time (s is a run-time stride);
 * here each tap of 16 outputs is two masked loads and a permute of their
 * even lanes, no float read past the 2 len - 1 its outputs need (the
 * outputs whose windows are clipped keep the scalar loop). */
static int pool_s2_ok(const pool_params *pp)
{
    const bf__window *w = &pp->w;
    return pp->is_max && w->in[0] == 1 && w->k[0] == 1 && w->out[0] == 1 && w->s[2] == 2 && w->d[2] == 1;
}

/* the plane y from the plane x */
POOL512 static void maxpool_s2_plane(const pool_params *pp, const float *restrict x, float *restrict y,
                                     float *restrict row)
{
    const bf__window *w = &pp->w;
    int64_t IW = w->in[2], OW = w->out[2], k = w->k[2], pb = w->pb[2], ilo = pp->ilo, ihi = pp->ihi;
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (int64_t oh = 0; oh < w->out[1]; oh++) {
        int64_t h0, h1, hfull;
        window_at(w, 1, oh, &h0, &h1, &hfull);
        float *restrict yr = y + oh * OW;
        if (h0 >= h1) {
            for (int64_t ow = 0; ow < OW; ow++) yr[ow] = -INFINITY;   /* dilated taps all outside */
            continue;
        }
        const float *src = x + h0 * IW;
        if (h0 + w->d[1] < h1) {
            for (int64_t i = 0; i < IW; i += 16) {
                __mmask16 m = IW - i >= 16 ? (__mmask16)0xffffu : (__mmask16)((1u << (IW - i)) - 1u);
                __m512 v = _mm512_maskz_loadu_ps(m, x + h0 * IW + i);
                for (int64_t ih = h0 + w->d[1]; ih < h1; ih += w->d[1])
                    v = max_nan16(v, _mm512_maskz_loadu_ps(m, x + ih * IW + i));
                _mm512_mask_storeu_ps(row + i, m, v);
            }
            src = row;
        }
        for (int64_t ow = 0; ow < OW; ow++) {
            if (ow == ilo) ow = ihi;
            if (ow >= OW) break;
            int64_t w0, w1, wfull;
            window_at(w, 2, ow, &w0, &w1, &wfull);
            float m = -INFINITY;
            for (int64_t iw = w0; iw < w1; iw++) m = max_nan(m, src[iw]);
            yr[ow] = m;
        }
        for (int64_t ow = ilo; ow < ihi; ow += 16) {
            int len = ihi - ow < 16 ? (int)(ihi - ow) : 16, span = 2 * len - 1;
            __mmask16 lo = (__mmask16)(span >= 16 ? 0xffffu : (1u << span) - 1u);
            __mmask16 hi = (__mmask16)(span > 16 ? (1u << (span - 16)) - 1u : 0u);
            __m512 v = _mm512_setzero_ps();
            for (int64_t j = 0; j < k; j++) {
                const float *s0 = src + 2 * ow + j - pb;
                __m512 t = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(lo, s0), even,
                                                  _mm512_maskz_loadu_ps(hi, s0 + 16));
                v = j ? max_nan16(v, t) : t;
            }
            _mm512_mask_storeu_ps(yr + ow, (__mmask16)((1u << len) - 1u), v);
        }
    }
}
#endif

/* avx2: bf__simd_avx2(), read once per run (2: bf__simd_level() is AVX-512) */
static void pool_plane(const pool_params *pp, int avx2, const float *x, float *y, float *row)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx2 >= 2 && pool_s2_ok(pp)) {
        maxpool_s2_plane(pp, x, y, row);
        return;
    }
    if (avx2) {
        pool_plane_avx2(pp, x, y, row);
        return;
    }
#endif
    (void)avx2;
    pool_plane_ref(pp, x, y, row);
}

/* pool_plane's avx2: 0 the reference, 1 AVX2, 2 AVX-512 (bf__simd_level) */
static int pool_level(void)
{
    int l = bf__simd_level();
    return l >= BF__SIMD_AVX512 ? 2 : l >= BF__SIMD_AVX2 ? 1 : 0;
}

/* The most common pool of all, 2x2 max with stride 2 and every window
 * inside the input, gets a direct loop: max is exact, so any order gives the
 * same result as the separable path. */
static int pool_is_max2x2(const pool_params *pp)
{
    const bf__window *w = &pp->w;
    return pp->is_max && w->in[0] == 1 && w->k[0] == 1 && w->k[1] == 2 && w->k[2] == 2 && w->s[1] == 2 &&
           w->s[2] == 2 && w->d[1] == 1 && w->d[2] == 1 && w->pb[1] == 0 && w->pb[2] == 0 &&
           w->out[1] * 2 <= w->in[1] && w->out[2] * 2 <= w->in[2];
}

static void maxpool2x2_plane(const bf__window *w, const float *restrict x, float *restrict y)
{
    int64_t IW = w->in[2], OH = w->out[1], OW = w->out[2];
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *restrict r0 = x + 2 * oh * IW, *restrict r1 = r0 + IW;
        float *restrict yr = y + oh * OW;
        for (int64_t ow = 0; ow < OW; ow++)
            yr[ow] = max_nan(max_nan(r0[2 * ow], r0[2 * ow + 1]), max_nan(r1[2 * ow], r1[2 * ow + 1]));
    }
}

int bf__pool_plane(const bf__step *st, const float *x, float *y, void *scratch)
{
    if (st->node->op->run != bf__pool_run) return 0;
    const pool_params *pp = st->params;
    if (pool_is_max2x2(pp)) maxpool2x2_plane(&pp->w, x, y);
    else pool_plane(pp, pool_level(), x, y, scratch);
    return 1;
}

int bf__maxpool_band_ok(const bf__step *st)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (st->node->op->run != bf__pool_run) return 0;
    const pool_params *pp = st->params;
    return pool_level() >= 1 && pool_s2_ok(pp) && !pool_is_max2x2(pp) && pp->w.d[1] == 1 && pp->w.in[1] > 0 &&
           pp->w.out[1] > 0;
#else
    (void)st;
    return 0;
#endif
}

void bf__maxpool_band_rows(const bf__step *st, int64_t oh0, int64_t oh1, int64_t *h0, int64_t *h1)
{
    const pool_params *pp = st->params;
    int64_t a0, a1, b0, b1, full;
    window_at(&pp->w, 1, oh0, &a0, &a1, &full);
    window_at(&pp->w, 1, oh1 - 1, &b0, &b1, &full);
    *h0 = a0 < a1 ? a0 : 0, *h1 = b1 > b0 ? b1 : 0;
    if (*h1 < *h0) *h1 = *h0;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* How far ahead (floats) maxpool_cl asks for the lines of y it stores: 4
 * lines. Its outputs go to 16 channel planes at a time (16 streams of a
 * fresh value, in memory), more than the hardware's prefetchers follow;
 * the masked stores held ~30% of its samples. A hint: the same bits (a
 * line past y's end is never read). resnet18, batch 4: maxpool_cl's
 * samples -37% (32, 128 and 256 the same), the pass +0.5%
 * (docs/perf/conv/h34.md) */
#define MP_YPF 64

/* maxpool_s2_plane's order, element for element, on channels-last input
 * (16 channels a vector): each output the window's rows max_nan'd in
 * order from its first row, then those rows' maxima over its columns in
 * order from the first. Where maxpool_s2_plane starts a clipped window at
 * -inf, max_nan(-inf, a) is a, bit for bit (a NaN, -inf and the zeros'
 * signs included), so starting at the first tap is the same. Outputs are
 * gathered 16 positions x 16 channels and stored through a transpose. */
POOL512 static void maxpool_cl(const pool_params *pp, const float *restrict x, int64_t xr0, int64_t oh0, int64_t oh1,
                               int64_t cn, float *restrict y, float *restrict row)
{
    const bf__window *w = &pp->w;
    int64_t IW = w->in[2], OW = w->out[2], osp = w->out[1] * OW;
    for (int64_t oh = oh0; oh < oh1; oh++) {
        int64_t h0, h1, hfull;
        window_at(w, 1, oh, &h0, &h1, &hfull);
        /* the window's rows, whole: one sequential pass over each (a row's
         * channels-last floats are contiguous) */
        if (h0 < h1)
            for (int64_t i = 0; i < IW * cn; i += 16) {
                __m512 v = _mm512_loadu_ps(x + (h0 - xr0) * IW * cn + i);
                for (int64_t ih = h0 + w->d[1]; ih < h1; ih += w->d[1])
                    v = max_nan16(v, _mm512_loadu_ps(x + (ih - xr0) * IW * cn + i));
                _mm512_storeu_ps(row + i, v);
            }
        for (int64_t cb = 0; cb < cn; cb += 16) {
            for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
                int64_t n = OW - ow0 < 16 ? OW - ow0 : 16;
                __m512 r[16];
                for (int64_t j = 0; j < 16; j++) {
                    int64_t w0 = 0, w1 = 0, wfull;
                    if (j < n && h0 < h1) window_at(w, 2, ow0 + j, &w0, &w1, &wfull);
                    if (w0 >= w1) {   /* past the row's end, or no tap inside: an empty max */
                        r[j] = _mm512_set1_ps(j < n ? -INFINITY : 0.0f);
                        continue;
                    }
                    __m512 v = _mm512_loadu_ps(row + w0 * cn + cb);
                    for (int64_t iw = w0 + 1; iw < w1; iw++) v = max_nan16(v, _mm512_loadu_ps(row + iw * cn + cb));
                    r[j] = v;
                }
                bf__transpose16(r);
                __mmask16 m = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
                for (int c = 0; c < 16; c++) {
                    float *yc = y + (cb + c) * osp + oh * OW + ow0;
                    _mm_prefetch((const char *)(yc + MP_YPF), _MM_HINT_T0);
                    _mm512_mask_storeu_ps(yc, m, r[c]);
                }
            }
        }
    }
}

/* maxpool_cl on AVX2: 8 channels a vector, the same operations lane for
 * lane (max_nan8 is max_nan16's comparison and choice), the outputs
 * gathered 8 positions x 8 channels and stored through bf__transpose8 */
__attribute__((target("avx2"))) static inline __m256 max_nan8(__m256 m, __m256 v)
{
    __m256 k = _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_ps(m, v, k);
}

__attribute__((target("avx2"))) static void maxpool_cl8(const pool_params *pp, const float *restrict x, int64_t xr0,
                                                        int64_t oh0, int64_t oh1, int64_t cn, float *restrict y,
                                                        float *restrict row)
{
    const bf__window *w = &pp->w;
    int64_t IW = w->in[2], OW = w->out[2], osp = w->out[1] * OW;
    float t[64], o[64];
    for (int64_t oh = oh0; oh < oh1; oh++) {
        int64_t h0, h1, hfull;
        window_at(w, 1, oh, &h0, &h1, &hfull);
        if (h0 < h1)
            for (int64_t i = 0; i < IW * cn; i += 8) {
                __m256 v = _mm256_loadu_ps(x + (h0 - xr0) * IW * cn + i);
                for (int64_t ih = h0 + w->d[1]; ih < h1; ih += w->d[1])
                    v = max_nan8(v, _mm256_loadu_ps(x + (ih - xr0) * IW * cn + i));
                _mm256_storeu_ps(row + i, v);
            }
        for (int64_t cb = 0; cb < cn; cb += 8)
            for (int64_t ow0 = 0; ow0 < OW; ow0 += 8) {
                int64_t n = OW - ow0 < 8 ? OW - ow0 : 8;
                for (int64_t j = 0; j < 8; j++) {
                    int64_t w0 = 0, w1 = 0, wfull;
                    if (j < n && h0 < h1) window_at(w, 2, ow0 + j, &w0, &w1, &wfull);
                    if (w0 >= w1) {   /* past the row's end, or no tap inside: an empty max */
                        _mm256_storeu_ps(t + 8 * j, _mm256_set1_ps(j < n ? -INFINITY : 0.0f));
                        continue;
                    }
                    __m256 v = _mm256_loadu_ps(row + w0 * cn + cb);
                    for (int64_t iw = w0 + 1; iw < w1; iw++) v = max_nan8(v, _mm256_loadu_ps(row + iw * cn + cb));
                    _mm256_storeu_ps(t + 8 * j, v);
                }
                float *yc = y + cb * osp + oh * OW + ow0;
                for (int c = 0; c < 8; c++) _mm_prefetch((const char *)(yc + c * osp + MP_YPF), _MM_HINT_T0);
                if (n == 8) {
                    bf__transpose8(t, 8, yc, osp);
                    continue;
                }
                bf__transpose8(t, 8, o, 8);
                for (int c = 0; c < 8; c++) memcpy(yc + c * osp, o + 8 * c, sizeof(float) * (size_t)n);
            }
    }
}
#endif

void bf__maxpool_band(const bf__step *st, const float *x, int64_t xr0, int64_t oh0, int64_t oh1, int64_t cn, float *y,
                      float *row)
{
#if defined(__x86_64__) && defined(__GNUC__)
    /* 16 lanes where the channels come in 16s and the CPU has them (the stem's own choice, st_lanes) */
    if (cn % 16 == 0 && pool_level() >= 2) maxpool_cl(st->params, x, xr0, oh0, oh1, cn, y, row);
    else maxpool_cl8(st->params, x, xr0, oh0, oh1, cn, y, row);
#else
    (void)st, (void)x, (void)xr0, (void)oh0, (void)oh1, (void)cn, (void)y, (void)row;
#endif
}

int bf__pool_shape(const bf__step *st, int64_t *isp, int64_t *osp)
{
    if (st->node->op->run != bf__pool_run) return 0;
    const pool_params *pp = st->params;
    *isp = bf__win_in(&pp->w), *osp = bf__win_out(&pp->w);
    return 1;
}

bf_status bf__pool_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const pool_params *pp = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    int64_t isp = bf__win_in(&pp->w), osp = bf__win_out(&pp->w);
    if (pool_is_max2x2(pp)) {
        for (int64_t pl = 0; pl < pp->planes; pl++) maxpool2x2_plane(&pp->w, x + pl * isp, y + pl * osp);
        return BF_OK;
    }
    int level = pool_level();
    for (int64_t pl = 0; pl < pp->planes; pl++) pool_plane(pp, level, x + pl * isp, y + pl * osp, c->scratch);
    return BF_OK;
}

/* ---- GlobalAveragePool ---- */

typedef struct gap_params {
    int64_t planes, size;
} gap_params;
static_assert(sizeof(gap_params) <= BF__OP_PARAMS_MAX, "gap params too large");

bf_status bf__gap_prepare(bf__prep *p, bf_error *err)
{
    gap_params *gp = (gap_params *)p->params;
    const bf_tensor *x = p->in[0];
    bf_status st;
    if ((st = bf__want_f32(p, 0, "X", err))) return st;
    char sx[96];
    if (x->ndim < 3)
        return bf__node_error(err, p->node, BF_ESHAPE,
                              "input X has shape %s; expected [N, C, D1, ...] with at least one spatial dim",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    int64_t dims[BF_MAX_DIMS];
    gp->planes = x->dims[0] * x->dims[1];
    gp->size = 1;
    for (int i = 0; i < x->ndim; i++) {
        dims[i] = i < 2 ? x->dims[i] : 1;
        if (i >= 2) gp->size *= x->dims[i];
    }
    if (gp->size == 0)
        return bf__node_error(err, p->node, BF_ESHAPE, "input X has shape %s; the spatial dims are empty",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    bf__set_shape(p->out[0], BF_F32, x->ndim, dims);
    return BF_OK;
}

/* one plane's mean: bf__gpool_plane's (one plane: the plain build's sum) */
static inline float gap_one(const gap_params *gp, const float *x, int64_t pl)
{
    return bf__sum16_f32(x + pl * gp->size, gp->size) / (float)gp->size;
}

/* Every plane's mean: the plain build's sum, or sum16.h's in AVX2 or
 * AVX-512 intrinsics (the same bits; mobilenet_v2's pool of 4 x 1280
 * planes of 49 took 0.11-0.12 ms a batch of 4 on the plain one against
 * ONNX Runtime's 0.02, 0.03 on AVX-512: docs/perf/mobilenet/h32.md) */
static void gap_planes(const gap_params *gp, const float *x, float *y)
{
    for (int64_t pl = 0; pl < gp->planes; pl++) y[pl] = gap_one(gp, x, pl);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) static void gap_planes_avx512(const gap_params *gp, const float *x, float *y)
{
    for (int64_t pl = 0; pl < gp->planes; pl++) y[pl] = bf__sum16_avx512(x + pl * gp->size, gp->size) / (float)gp->size;
}

__attribute__((target("avx2"))) static void gap_planes_avx2(const gap_params *gp, const float *x, float *y)
{
    for (int64_t pl = 0; pl < gp->planes; pl++) y[pl] = bf__sum16_avx2(x + pl * gp->size, gp->size) / (float)gp->size;
}
#endif

bf_status bf__gap_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const gap_params *gp = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
#if defined(__x86_64__) && defined(__GNUC__)
    int level = bf__simd_level();
    if (level >= BF__SIMD_AVX512) gap_planes_avx512(gp, x, y);
    else if (level >= BF__SIMD_AVX2) gap_planes_avx2(gp, x, y);
    else gap_planes(gp, x, y);
#else
    gap_planes(gp, x, y);
#endif
    return BF_OK;
}

/* GlobalMaxPool: GlobalAveragePool's shapes, the max of each plane, NaN if
 * the plane has one (torch.amax, adaptive_max_pool). */
static inline float gmp_one(const gap_params *gp, const float *x, int64_t pl)
{
    const float *restrict xp = x + pl * gp->size;
    float m = -INFINITY;
    for (int64_t i = 0; i < gp->size; i++) m = max_nan(m, xp[i]);
    return m;
}

bf_status bf__gmp_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const gap_params *gp = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    for (int64_t pl = 0; pl < gp->planes; pl++) y[pl] = gmp_one(gp, x, pl);
    return BF_OK;
}

int bf__gpool_step(const bf__step *st) { return st->node->op->run == bf__gap_run || st->node->op->run == bf__gmp_run; }

void bf__gpool_plane(const bf__step *st, int64_t pl)
{
    const gap_params *gp = st->params;
    const float *x = st->in[0]->data;
    float *y = st->out[0]->data;
    y[pl] = st->node->op->run == bf__gap_run ? gap_one(gp, x, pl) : gmp_one(gp, x, pl);
}
