/* Conv's direct paths (linalg_window.h): depthwise (one input and one output
 * channel per group), as direct loops over rows, with stride-2 3x3 rows
 * vectorised, each body compiled for the baseline and for AVX2 with the
 * same operations in the same order; and 1x1 (pointwise), where the input
 * already is the column matrix of bf__sgemm. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "exec/op.h"
#include "linalg_window.h"
#include "sgemm.h"

/* The direct depthwise path. Per kernel column kw, the output columns whose
 * tap lands inside the input; all kw taps land inside for the interior
 * columns [ilo, ihi). */
typedef struct dw_cols {
    int64_t lo[BF__DW_MAXKW], hi[BF__DW_MAXKW], ilo, ihi;
    int avx2;                 /* dw_row's 8-lane build: asked once per run, not per row */
    int avx512;               /* dw2d's 16-lane build */
} dw_cols;

static void dw_cols_init(const bf__window *w, int simd, dw_cols *dc)
{
    int64_t kw_n = w->k[2];
    for (int64_t kw = 0; kw < kw_n; kw++)
        bf__valid_range(w->in[2], w->out[2], w->s[2], w->pb[2], kw, w->d[2], &dc->lo[kw], &dc->hi[kw]);
    /* taps move right as kw grows: the first bounds the left, the last the right */
    dc->ilo = dc->lo[0];
    dc->ihi = dc->hi[kw_n - 1] > dc->ilo ? dc->hi[kw_n - 1] : dc->ilo;
    dc->avx2 = simd >= BF_SGEMM_AVX2;
    dc->avx512 = simd >= BF_SGEMM_AVX512;
}

/* yr += the taps of one kernel row (weights wrow) over input row xr, in kw
 * order for every output: the same sums as tap-by-tap, fused for 3-wide
 * kernels so the output row is loaded once.
 *
 * The body is compiled twice (dw_row_base: the baseline's 4 lanes;
 * dw_row_avx2: 8, where the CPU has AVX2): the same multiplies and adds in
 * the same order per element, so the same bits. Chosen at run time as
 * sgemm.c does (bf__sgemm_simd), not with target_clones: its ifunc resolver
 * runs before ThreadSanitizer's runtime starts, and every binary of the TSan
 * build died at start. */
static inline __attribute__((always_inline)) void dw_row_impl(const bf__window *w, const dw_cols *dc,
                                                              const float *restrict xr, const float *restrict wrow,
                                                              float *restrict yr)
{
    int64_t kw_n = w->k[2], s = w->s[2], d = w->d[2], pb = w->pb[2], ilo = dc->ilo, ihi = dc->ihi;
    for (int64_t kw = 0; kw < kw_n; kw++) {
        float wv = wrow[kw];
        int64_t o = kw * d - pb;
        int64_t e1 = dc->hi[kw] < ilo ? dc->hi[kw] : ilo, e2 = dc->lo[kw] > ihi ? dc->lo[kw] : ihi;
        for (int64_t ow = dc->lo[kw]; ow < e1; ow++) yr[ow] += wv * xr[ow * s + o];
        for (int64_t ow = e2; ow < dc->hi[kw]; ow++) yr[ow] += wv * xr[ow * s + o];
    }
    if (kw_n == 3) {
        float w0 = wrow[0], w1 = wrow[1], w2 = wrow[2];
        int64_t o0 = -pb, o1 = d - pb, o2 = 2 * d - pb;
        if (s == 1)
            for (int64_t ow = ilo; ow < ihi; ow++)
                yr[ow] = ((yr[ow] + w0 * xr[ow + o0]) + w1 * xr[ow + o1]) + w2 * xr[ow + o2];
        else
            for (int64_t ow = ilo; ow < ihi; ow++)
                yr[ow] = ((yr[ow] + w0 * xr[ow * s + o0]) + w1 * xr[ow * s + o1]) + w2 * xr[ow * s + o2];
        return;
    }
    for (int64_t kw = 0; kw < kw_n; kw++) {
        float wv = wrow[kw];
        int64_t o = kw * d - pb;
        if (s == 1)
            for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] += wv * xr[ow + o];
        else
            for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] += wv * xr[ow * s + o];
    }
}

static void dw_row_base(const bf__window *w, const dw_cols *dc, const float *restrict xr, const float *restrict wrow,
                        float *restrict yr)
{
    dw_row_impl(w, dc, xr, wrow, yr);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void dw_row_avx2(const bf__window *w, const dw_cols *dc, const float *restrict xr,
                                                        const float *restrict wrow, float *restrict yr)
{
    dw_row_impl(w, dc, xr, wrow, yr);
}
#endif

static void dw_row(const bf__window *w, const dw_cols *dc, const float *restrict xr, const float *restrict wrow,
                   float *restrict yr)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (dc->avx2) {
        dw_row_avx2(w, dc, xr, wrow, yr);
        return;
    }
#endif
    dw_row_base(w, dc, xr, wrow, yr);
}

/* The input rows output row oh reads and the kernel rows that read them,
 * in kh order (rows in the padding left out): their count */
static inline __attribute__((always_inline)) int dw_rows(const bf__window *w, const float *x, const float *wk,
                                                         int64_t oh, const float **xr, const float **wr)
{
    int64_t IH = w->in[1], IW = w->in[2], kh_n = w->k[1], kw_n = w->k[2];
    int nv = 0;
    for (int64_t kh = 0; kh < kh_n; kh++) {
        int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
        if (ih < 0 || ih >= IH) continue;
        xr[nv] = x + ih * IW, wr[nv] = wk + kh * kw_n, nv++;
    }
    return nv;
}

/* One depthwise channel of a 2-D convolution, output row by output row:
 * each output starts at the bias and takes the kernel rows whose input row
 * exists, in kh order, each row's taps in kw order, exactly the sums of
 * depthwise_channel (which goes kernel row by kernel row over the whole
 * plane) element by element; but an output row is loaded and stored once
 * instead of once per kernel row, and the bias is not a pass of its own.
 * Compiled twice, as dw_row is (no FMA in either build: each tap stays a
 * rounded product then a rounded sum). */
/* The inside of a stride-2, undilated 3x3 output row, 8 outputs at a time
 * (the compiler leaves the strided loop scalar): the even and odd taps
 * split out of two loads, the same products and sums per element as the
 * scalar loop in dw2d_impl, which finishes the row from the index
 * returned. Without AVX2 it returns ilo: the loop does it all. */
#if defined(__x86_64__) && defined(__GNUC__)
#define DW_S2_VECTOR 1
#endif

#ifdef DW_S2_VECTOR
__attribute__((target("avx2"))) static int64_t dw_s2(const float *r0, const float *r1, const float *r2,
                                                     const float *const *wr, float bv, float *yr, int64_t ilo,
                                                     int64_t ihi, int64_t o0)
{
    const float *rows[3] = {r0, r1, r2};
    const __m256i upto7 = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0);
    int64_t ow = ilo;
    for (; ow + 8 <= ihi; ow += 8) {
        __m256 v = _mm256_set1_ps(bv);
        for (int r = 0; r < 3; r++) {
            const float *base = rows[r] + 2 * ow + o0;
            __m256 lo = _mm256_loadu_ps(base), hi = _mm256_loadu_ps(base + 8);
            /* x[2 ow + o0 + 16], the last even tap, without reading x[.. + 17] past the row */
            __m256 hi2 = _mm256_maskload_ps(base + 10, upto7), lo2 = _mm256_loadu_ps(base + 2);
            __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88), od = _mm256_shuffle_ps(lo, hi, 0xDD);
            __m256 e2 = _mm256_shuffle_ps(lo2, hi2, 0x88);
            ev = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8));
            od = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8));
            e2 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e2), 0xD8));
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(wr[r][0]), ev));
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(wr[r][1]), od));
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(wr[r][2]), e2));
        }
        _mm256_storeu_ps(yr + ow, v);
    }
    return ow;
}

/* dw_s2 16 outputs at a time (AVX-512): the even and odd taps picked out
 * of two 16-lane loads by one permute each, the same products and sums per
 * element in the same order; dw_s2 then takes what is left. */
__attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl"))) static int64_t
dw_s2_512(const float *r0, const float *r1, const float *r2, const float *const *wr, float bv, float *yr,
          int64_t ilo, int64_t ihi, int64_t o0)
{
    const float *rows[3] = {r0, r1, r2};
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    int64_t ow = ilo;
    for (; ow + 16 <= ihi; ow += 16) {
        __m512 v = _mm512_set1_ps(bv);
        for (int r = 0; r < 3; r++) {
            const float *base = rows[r] + 2 * ow + o0;
            __m512 lo = _mm512_loadu_ps(base), hi = _mm512_loadu_ps(base + 16);
            /* x[2 ow + o0 + 32], the last even tap, without reading x[.. + 33] past the row */
            __m512 lo2 = _mm512_loadu_ps(base + 2), hi2 = _mm512_maskz_loadu_ps((__mmask16)0x7FFF, base + 18);
            __m512 ev = _mm512_permutex2var_ps(lo, even, hi), od = _mm512_permutex2var_ps(lo, odd, hi);
            __m512 e2 = _mm512_permutex2var_ps(lo2, even, hi2);
            v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(wr[r][0]), ev));
            v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(wr[r][1]), od));
            v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(wr[r][2]), e2));
        }
        _mm512_storeu_ps(yr + ow, v);
    }
    return ow;
}

/* The vector part of a stride-2 row at dw2d_impl's level (vec: 1 AVX2,
 * 2 AVX-512): where the scalar loop starts. */
static inline __attribute__((always_inline)) int64_t dw_s2_at(int vec, const float *r0, const float *r1,
                                                              const float *r2, const float *const *wr, float bv,
                                                              float *yr, int64_t ilo, int64_t ihi, int64_t o0)
{
    if (vec >= 2) ilo = dw_s2_512(r0, r1, r2, wr, bv, yr, ilo, ihi, o0);
    return dw_s2(r0, r1, r2, wr, bv, yr, ilo, ihi, o0);
}
#else
static int64_t dw_s2(const float *r0, const float *r1, const float *r2, const float *const *wr, float bv, float *yr,
                     int64_t ilo, int64_t ihi, int64_t o0)
{
    (void)r0, (void)r1, (void)r2, (void)wr, (void)bv, (void)yr, (void)ihi, (void)o0;
    return ilo;
}
static int64_t dw_s2_at(int vec, const float *r0, const float *r1, const float *r2, const float *const *wr, float bv,
                        float *yr, int64_t ilo, int64_t ihi, int64_t o0)
{
    (void)vec;
    return dw_s2(r0, r1, r2, wr, bv, yr, ilo, ihi, o0);
}
#endif

#ifdef DW_S2_VECTOR
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256
dw_act(__m256 v, const bf__act *act)
{
    return act ? _mm256_min_ps(_mm256_set1_ps(act->hi), _mm256_max_ps(_mm256_set1_ps(act->lo), v)) : v;
}

/* One chunk of 8 outputs from column c0 of a stride-1 row, lanes past
 * c_hi not stored: each lane runs the scalar loop's sequence, v = bv,
 * then v = v + w * x over the valid kernel rows (xr, wr: nv of them) and
 * their taps in kw order, a tap in the padding skipped. Each tap is loaded
 * under the mask of the lanes where it lands inside: the masked lanes'
 * inputs are never read, and their sum is discarded (blend), so they keep
 * v exactly as the skipped tap does (an Inf weight times the padding
 * would give NaN there). No FMA: this file's AVX2 target lacks it, so
 * every product and sum rounds as the scalar loop's do. act: applied
 * before the store, as the sgemm epilogue does (min(hi, max(lo, v)):
 * bf__act_apply's bits). */
__attribute__((target("avx2"))) static void dw_chunk(const bf__window *w, const dw_cols *dc, int nv,
                                                     const float *const *xr, const float *const *wr, float bv,
                                                     const bf__act *act, float *yr, int64_t c0, int64_t c_hi)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int64_t kw_n = w->k[2], d = w->d[2], pb = w->pb[2];
    __m256 v = _mm256_set1_ps(bv);
    int64_t left = c_hi - c0 < 8 ? c_hi - c0 : 8;
    __m256i mk[BF__DW_MAXKW];
    int full = 1;
    for (int64_t kw = 0; kw < kw_n; kw++) {
        /* lanes l with lo[kw] <= c0 + l < min(hi[kw], c_hi) */
        int64_t h = dc->hi[kw] < c_hi ? dc->hi[kw] : c_hi;
        __m256i a = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)(dc->lo[kw] - c0 - 1)));
        mk[kw] = _mm256_and_si256(a, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(h - c0)), lane));
        full &= _mm256_movemask_ps(_mm256_castsi256_ps(mk[kw])) == (1 << left) - 1;
    }
    for (int r = 0; r < nv; r++)
        for (int64_t kw = 0; kw < kw_n; kw++) {
            if (_mm256_testz_si256(mk[kw], mk[kw])) continue;
            __m256 t = _mm256_maskload_ps(xr[r] + c0 + kw * d - pb, mk[kw]);
            __m256 sum = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(wr[r][kw]), t));
            /* every stored lane takes the tap: the others are never stored */
            v = full ? sum : _mm256_blendv_ps(v, sum, _mm256_castsi256_ps(mk[kw]));
        }
    v = dw_act(v, act);
    float t[8];   /* not vmaskmovps: a masked store is microcoded on AMD's cores, tens of cycles */
    _mm256_storeu_ps(t, v);
    for (int64_t l = 0; l < left; l++) yr[c0 + l] = t[l];
}

/* A whole stride-1 2-D depthwise channel of output rows no wider than 8
 * (mobilenet_v2's 7x7 maps: every column an edge or left over from the
 * 8-wide inside, so dw2d_impl's were all scalar), a chunk per row, the
 * activation applied on the way (AVX2 only; dw2d_impl is the reference).
 * Wider rows stay in dw2d_impl: this chunk's masks and a 2-chunk inside
 * measured no faster there, the loop being bound by memory on the larger
 * maps (2026-11-29, loaded machine, thread CPU time). */
__attribute__((target("avx2"))) static void dw2d_masked(const bf__window *w, const dw_cols *dc, const float *x,
                                                        const float *wk, float bv, const bf__act *act, float *y)
{
    int64_t OH = w->out[1], OW = w->out[2];
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *xr[BF__DW_MAXKH], *wr[BF__DW_MAXKH];
        int nv = dw_rows(w, x, wk, oh, xr, wr);
        dw_chunk(w, dc, nv, xr, wr, bv, act, y + oh * OW, 0, OW);
    }
}
#endif

static inline __attribute__((always_inline)) void dw2d_impl(const bf__window *w, const dw_cols *dc,
                                                            const float *restrict x, const float *restrict wk, float bv,
                                                            float *restrict y, int vec)
{
    int64_t OH = w->out[1], OW = w->out[2];
    int64_t kw_n = w->k[2], s = w->s[2], d = w->d[2], pb = w->pb[2], ilo = dc->ilo, ihi = dc->ihi;
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *xr[BF__DW_MAXKH], *wr[BF__DW_MAXKH];
        int nv = dw_rows(w, x, wk, oh, xr, wr);
        float *restrict yr = y + oh * OW;
        /* the edge columns, where some taps fall in the padding */
        for (int64_t ow = 0; ow < OW; ow++) {
            if (ow == ilo) ow = ihi;
            if (ow >= OW) break;
            float v = bv;
            for (int r = 0; r < nv; r++)
                for (int64_t kw = 0; kw < kw_n; kw++)
                    if (ow >= dc->lo[kw] && ow < dc->hi[kw]) v = v + wr[r][kw] * xr[r][ow * s + kw * d - pb];
            yr[ow] = v;
        }
        if (ilo >= ihi) continue;
        int64_t o0 = -pb, o1 = d - pb, o2 = 2 * d - pb;
        if (nv == 3 && kw_n == 3) {
            const float *restrict r0 = xr[0], *restrict r1 = xr[1], *restrict r2 = xr[2];
            float a0 = wr[0][0], a1 = wr[0][1], a2 = wr[0][2], b0 = wr[1][0], b1 = wr[1][1], b2 = wr[1][2];
            float c0 = wr[2][0], c1 = wr[2][1], c2 = wr[2][2];
            if (s == 1)
                for (int64_t ow = ilo; ow < ihi; ow++) {
                    float v = ((bv + a0 * r0[ow + o0]) + a1 * r0[ow + o1]) + a2 * r0[ow + o2];
                    v = ((v + b0 * r1[ow + o0]) + b1 * r1[ow + o1]) + b2 * r1[ow + o2];
                    yr[ow] = ((v + c0 * r2[ow + o0]) + c1 * r2[ow + o1]) + c2 * r2[ow + o2];
                }
            else
                for (int64_t ow = vec && s == 2 && d == 1 ? dw_s2_at(vec, r0, r1, r2, wr, bv, yr, ilo, ihi, o0) : ilo; ow < ihi;
                     ow++) {
                    float v = ((bv + a0 * r0[ow * s + o0]) + a1 * r0[ow * s + o1]) + a2 * r0[ow * s + o2];
                    v = ((v + b0 * r1[ow * s + o0]) + b1 * r1[ow * s + o1]) + b2 * r1[ow * s + o2];
                    yr[ow] = ((v + c0 * r2[ow * s + o0]) + c1 * r2[ow * s + o1]) + c2 * r2[ow * s + o2];
                }
            continue;
        }
        for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] = bv;
        for (int r = 0; r < nv; r++) {
            if (kw_n == 3) {
                const float *restrict xs = xr[r];
                float w0 = wr[r][0], w1 = wr[r][1], w2 = wr[r][2];
                for (int64_t ow = ilo; ow < ihi; ow++)
                    yr[ow] = ((yr[ow] + w0 * xs[ow * s + o0]) + w1 * xs[ow * s + o1]) + w2 * xs[ow * s + o2];
                continue;
            }
            for (int64_t kw = 0; kw < kw_n; kw++) {
                const float *restrict xs = xr[r] + kw * d - pb;
                float wv = wr[r][kw];
                for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] += wv * xs[ow * s];
            }
        }
    }
}

static void dw2d_base(const bf__window *w, const dw_cols *dc, const float *x, const float *wk, float bv, float *y)
{
    dw2d_impl(w, dc, x, wk, bv, y, 0);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void dw2d_avx2(const bf__window *w, const dw_cols *dc, const float *x,
                                                      const float *wk, float bv, float *y)
{
    dw2d_impl(w, dc, x, wk, bv, y, 1);
}

/* The same on 16 lanes: the compiler's vector loops over a row's inside
 * and dw_s2_512 (the file's targets have no FMA: each tap stays a rounded
 * product then a rounded sum, -std=c11 contracting nothing). */
__attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl"))) static void
dw2d_avx512(const bf__window *w, const dw_cols *dc, const float *x, const float *wk, float bv, float *y)
{
    dw2d_impl(w, dc, x, wk, bv, y, 2);
}
#endif

/* Whether dw2d takes the shape: one spatial plane, kernels of up to
 * BF__DW_MAXKH rows. */
static int dw2d_ok(const bf__window *w) { return w->in[0] == 1 && w->k[0] == 1 && w->out[0] == 1 && w->k[1] <= BF__DW_MAXKH; }

#ifdef DW_S2_VECTOR
/* Whether dw2d_masked takes a dw2d shape: stride 1, rows of up to 8. */
static int dw_masked_ok(const bf__window *w)
{
    return w->s[2] == 1 && w->out[2] <= 8;
}

/* ---- The AVX-512 stride-1 plane as one run of outputs ----
 * When both strides are 1 and the output rows are as wide as the input's
 * (padding that keeps the size: mobilenet_v2's every stride-1 depthwise
 * layer), output o = oh OW + ow reads, for tap (kh, kw), input
 * o + (kh dh - pb_h) IW + (kw dw - pb_w): one offset per tap for the whole
 * plane. So a plane runs 16 outputs at a time straight across the row ends
 * (a 7x7 plane: 4 chunks instead of 7 rows of 7 lanes; a 14x14 one 13
 * instead of 14 rows of two scalar edges and a 12-wide inside), each tap
 * loaded under the mask of the lanes where it lands inside the input and
 * added in those lanes only (a masked add keeps the others' sum as it is,
 * as dw_chunk's blend does): every lane runs the scalar sequence, bias,
 * then v = v + w * x over the taps in (kh, kw) order, the padding's taps
 * skipped, a rounded product and a rounded sum each (no FMA: the target
 * lacks it). The masks depend on the geometry alone: a table built once per
 * call serves every channel and image. */
#define DW_FLAT_MASKS BF__DW_FLAT_MASKS /* the table's entries (linalg_window.h, bf__dw_flat: 16 KiB on the stack) */
#define AVX512_DW __attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl")))

static int dw_flat_ok(const bf__window *w)
{
    int64_t chunks = (w->out[1] * w->out[2] + 15) / 16, taps = w->k[1] * w->k[2];
    /* the lanes' rows and columns, and each tap's shift, in 32 bits */
    const int64_t lim = (int64_t)1 << 20;
    return w->s[1] == 1 && w->s[2] == 1 && w->out[2] == w->in[2] && chunks * taps <= DW_FLAT_MASKS &&
           w->in[1] < lim && w->in[2] < lim && w->out[1] < lim && w->pb[1] < lim && w->pb[2] < lim &&
           w->d[1] * (w->k[1] - 1) < lim && w->d[2] * (w->k[2] - 1) < lim;
}

/* tab[c * taps + kh * KW + kw]: the lanes of chunk c (outputs 16 c ..
 * 16 c + 15 of the plane) that are outputs and whose tap (kh, kw) lands
 * inside the input; off[kh * KW + kw], that tap's input offset. The rows
 * and columns of the 16 lanes are carried from chunk to chunk (+16 % OW
 * columns, + 16 / OW rows, one wrap at most). */
AVX512_DW static void dw_flat_masks(const bf__window *w, __mmask16 *tab, int64_t *off)
{
    const int64_t IH = w->in[1], IW = w->in[2], OW = w->out[2], osp = w->out[1] * OW;
    const int64_t KH = w->k[1], KW = w->k[2], taps = KH * KW, chunks = (osp + 15) / 16;
    for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++)
            off[kh * KW + kw] = (kh * w->d[1] - w->pb[1]) * IW + kw * w->d[2] - w->pb[2];
    int32_t r0[16], c0[16];
    for (int l = 0; l < 16; l++) r0[l] = (int32_t)(l / OW), c0[l] = (int32_t)(l % OW);
    __m512i row = _mm512_loadu_si512(r0), col = _mm512_loadu_si512(c0);
    const __m512i dr = _mm512_set1_epi32((int32_t)(16 / OW)), dc = _mm512_set1_epi32((int32_t)(16 % OW));
    const __m512i ow = _mm512_set1_epi32((int32_t)OW), one = _mm512_set1_epi32(1);
    const __m512i ih = _mm512_set1_epi32((int32_t)IH), iw = _mm512_set1_epi32((int32_t)IW);
    for (int64_t c = 0; c < chunks; c++) {
        int64_t left = osp - 16 * c;
        __mmask16 in = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        __mmask16 rv[BF__DW_MAXKH], cv[BF__DW_MAXKW];
        /* unsigned compares: a row or column before the first is a huge index */
        for (int64_t kh = 0; kh < KH; kh++)
            rv[kh] = _mm512_cmplt_epu32_mask(_mm512_add_epi32(row, _mm512_set1_epi32((int32_t)(kh * w->d[1] - w->pb[1]))), ih);
        for (int64_t kw = 0; kw < KW; kw++)
            cv[kw] = _mm512_cmplt_epu32_mask(_mm512_add_epi32(col, _mm512_set1_epi32((int32_t)(kw * w->d[2] - w->pb[2]))), iw);
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++) tab[c * taps + kh * KW + kw] = (__mmask16)(rv[kh] & cv[kw] & in);
        row = _mm512_add_epi32(row, dr);
        col = _mm512_add_epi32(col, dc);
        __mmask16 wrap = _mm512_cmpge_epi32_mask(col, ow);
        col = _mm512_mask_sub_epi32(col, wrap, col, ow);
        row = _mm512_mask_add_epi32(row, wrap, row, one);
    }
}

/* One channel's plane through the table (taps: constant where inlined, so
 * a 3x3 kernel's nine taps unroll); the activation before the store, as
 * dw_chunk applies it. */
AVX512_DW static inline __attribute__((always_inline)) void dw_flat_body(int64_t taps, const __mmask16 *tab,
                                                                       const int64_t *off, int64_t osp,
                                                                       const float *x, const float *wk, float bv,
                                                                       const bf__act *act, float *y)
{
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    const int64_t chunks = (osp + 15) / 16;
    for (int64_t c = 0; c < chunks; c++) {
        const __mmask16 *m = tab + c * taps;
        const float *xc = x + 16 * c;
        __m512 v = _mm512_set1_ps(bv);
        for (int64_t t = 0; t < taps; t++) {
            __m512 xv = _mm512_maskz_loadu_ps(m[t], xc + off[t]);
            v = _mm512_mask_add_ps(v, m[t], v, _mm512_mul_ps(_mm512_set1_ps(wk[t]), xv));
        }
        if (act) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        int64_t left = osp - 16 * c;
        _mm512_mask_storeu_ps(y + 16 * c, left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u), v);
    }
}

/* v + w * x in v's lanes of k (the others as they are), x a masked load
 * of the same lanes: vmulps with x as its first source, vaddps with v as
 * its first (the operands dw_flat_body's build gives them, pinned: the one
 * x86 returns when both are NaN) */
#define DW_TAP(v, k, w, p)                                                                   \
    do {                                                                                     \
        __mmask16 k_ = _load_mask16(k);                                                      \
        __m512 x_ = _mm512_maskz_loadu_ps(k_, p), t_;                                        \
        __asm__("vmulps %2, %1, %0" : "=v"(t_) : "v"(x_), "v"(w));                           \
        __asm__("vaddps %2, %1, %0%{%3%}" : "+v"(v) : "v"(v), "v"(t_), "Yk"(k_));            \
    } while (0)

/* dw_flat_body for a 3x3 kernel undilated across (taps kw = 0, 1, 2 of a
 * row at +0, +1, +2 from the row's first): the nine weights in registers,
 * each kernel row one pointer, a tap's mask one load into a mask register
 * (dw_flat_body's build spent two moves and a reload of the tap's offset
 * on each, about twice the vector work: 24 cycles a chunk of 16 outputs on
 * a 14x14 plane). The same operations in the same order on each lane. */
AVX512_DW static void dw_flat_3x3(const __mmask16 *tab, const int64_t *off, int64_t osp, const float *x,
                                  const float *wk, float bv, const bf__act *act, float *y)
{
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    const __m512 w0 = _mm512_set1_ps(wk[0]), w1 = _mm512_set1_ps(wk[1]), w2 = _mm512_set1_ps(wk[2]);
    const __m512 w3 = _mm512_set1_ps(wk[3]), w4 = _mm512_set1_ps(wk[4]), w5 = _mm512_set1_ps(wk[5]);
    const __m512 w6 = _mm512_set1_ps(wk[6]), w7 = _mm512_set1_ps(wk[7]), w8 = _mm512_set1_ps(wk[8]);
    const __m512 b = _mm512_set1_ps(bv);
    const int64_t o0 = off[0], o1 = off[3], o2 = off[6], chunks = (osp + 15) / 16;
    int64_t c = 0;
    /* the nine taps, (kh, kw) order: T(tap, weight, kernel row, shift) */
#define DW_NINE(T)                                                                                            \
    T(0, w0, r0, 0) T(1, w1, r0, 1) T(2, w2, r0, 2) T(3, w3, r1, 0) T(4, w4, r1, 1) T(5, w5, r1, 2) T(6, w6, r2, 0) \
        T(7, w7, r2, 1) T(8, w8, r2, 2)
    /* two chunks at a time: each sum is a chain of nine dependent adds, and
     * two chains interleaved keep the adder busy where one left it waiting */
#define DW_TWO(t, w, r, q) DW_TAP(v, m + t, w, r + q); DW_TAP(u, n + t, w, r + 16 + q);
#define DW_ONE(t, w, r, q) DW_TAP(v, m + t, w, r + q);
    for (; c + 2 <= chunks; c += 2) {
        __mmask16 *m = (__mmask16 *)(tab + c * 9), *n = m + 9;
        const float *xc = x + 16 * c, *r0 = xc + o0, *r1 = xc + o1, *r2 = xc + o2;
        __m512 v = b, u = b;
        DW_NINE(DW_TWO)
        if (act) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v)), u = _mm512_min_ps(hi, _mm512_max_ps(lo, u));
        int64_t left = osp - 16 * c - 16;
        _mm512_storeu_ps(y + 16 * c, v);
        _mm512_mask_storeu_ps(y + 16 * c + 16, left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u), u);
    }
    for (; c < chunks; c++) {
        __mmask16 *m = (__mmask16 *)(tab + c * 9);
        const float *xc = x + 16 * c, *r0 = xc + o0, *r1 = xc + o1, *r2 = xc + o2;
        __m512 v = b;
        DW_NINE(DW_ONE)
        if (act) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        int64_t left = osp - 16 * c;
        _mm512_mask_storeu_ps(y + 16 * c, left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u), v);
    }
#undef DW_ONE
#undef DW_TWO
#undef DW_NINE
}

AVX512_DW static void dw_flat_any(int64_t taps, const __mmask16 *tab, const int64_t *off, int64_t osp,
                                  const float *x, const float *wk, float bv, const bf__act *act, float *y)
{
    dw_flat_body(taps, tab, off, osp, x, wk, bv, act, y);
}

/* ---- AVX-512 stride-2 rows, kernels up to 7 wide, edges and narrow rows included ----
 * dw_s2_512 takes the inside of 3-wide rows of at least 16 outputs and
 * leaves the edges and what is left (a 7-wide row of mobilenet_v2's 14 -> 7
 * layer: all of it; every 5-wide row of mobilenet_v3) to the scalar loop.
 * Here every chunk of 16 outputs of a row takes its inputs as pairs of
 * masked loads, 16 apart, at even shifts 0, 2, 4, 6 (lanes outside the
 * input row never read); a pair at shift 2q gives tap 2q as its even lanes
 * and tap 2q + 1 as its odd ones, each picked out by one permute (for a
 * 3-wide kernel the values dw_s2_512 picks). Each tap is added in the lanes
 * where it lands inside the row only, so the padding's taps are skipped
 * lane by lane, in kw order; the rows of the kernel whose input row exists
 * in kh order (dw_rows), as the scalar loop. The masks depend on the chunk
 * alone (not the row): one set per chunk, built once per call. */
#define DW_S2M_CHUNKS 128 /* rows up to 2,048 outputs */
#define DW_S2M_KW 7       /* the widest kernel taken */

typedef struct dw_s2m {
    __mmask16 ld[DW_S2M_KW + 1], tap[DW_S2M_KW], st;
} dw_s2m;

static int dw_s2m_ok(const bf__window *w)
{
    return w->s[2] == 2 && w->d[2] == 1 && w->k[2] <= DW_S2M_KW && w->out[2] <= 16 * DW_S2M_CHUNKS &&
           w->in[2] < ((int64_t)1 << 20) && w->pb[2] < ((int64_t)1 << 20);
}

static void dw_s2m_masks(const bf__window *w, dw_s2m *cm)
{
    const int64_t IW = w->in[2], OW = w->out[2], pb = w->pb[2], KW = w->k[2], nld = 2 * ((KW + 1) / 2);
    for (int64_t c = 0; c < (OW + 15) / 16; c++) {
        dw_s2m m;
        memset(&m, 0, sizeof m);
        int64_t base = 32 * c - pb;   /* input index of lane 0's first tap */
        for (int l = 0; l < 16; l++) {
            for (int64_t q = 0; q < nld; q++) {   /* load q: shift 2 (q / 2), + 16 for odd q */
                int64_t i = base + 2 * (q / 2) + 16 * (q % 2) + l;
                if (i >= 0 && i < IW) m.ld[q] |= (__mmask16)(1u << l);
            }
            int64_t ow = 16 * c + l;
            if (ow >= OW) continue;
            m.st |= (__mmask16)(1u << l);
            for (int64_t kw = 0; kw < KW; kw++) {
                int64_t i = 2 * ow + kw - pb;
                if (i >= 0 && i < IW) m.tap[kw] |= (__mmask16)(1u << l);
            }
        }
        cm[c] = m;
    }
}

/* KW constant where inlined (3: mobilenet_v2's, 5: mobilenet_v3's), so the
 * pairs unroll */
AVX512_DW static inline __attribute__((always_inline)) void dw_s2m_body(int64_t KW, const bf__window *w,
                                                                      const dw_s2m *cm, const float *x,
                                                                      const float *wk, float bv,
                                                                      const bf__act *act, float *y)
{
    const int64_t OH = w->out[1], OW = w->out[2], pb = w->pb[2], chunks = (OW + 15) / 16;
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *xr[BF__DW_MAXKH], *wr[BF__DW_MAXKH];
        int nv = dw_rows(w, x, wk, oh, xr, wr);
        float *yr = y + oh * OW;
        for (int64_t c = 0; c < chunks; c++) {
            const dw_s2m *m = &cm[c];
            __m512 v = _mm512_set1_ps(bv);
            for (int r = 0; r < nv; r++) {
                const float *p = xr[r] + 32 * c - pb;
                for (int64_t kw = 0; kw < KW; kw += 2) {
                    __m512 a = _mm512_maskz_loadu_ps(m->ld[kw], p + kw);
                    __m512 b = _mm512_maskz_loadu_ps(m->ld[kw + 1], p + kw + 16);
                    __m512 t = _mm512_permutex2var_ps(a, even, b);
                    v = _mm512_mask_add_ps(v, m->tap[kw], v, _mm512_mul_ps(_mm512_set1_ps(wr[r][kw]), t));
                    if (kw + 1 < KW) {
                        t = _mm512_permutex2var_ps(a, odd, b);
                        v = _mm512_mask_add_ps(v, m->tap[kw + 1], v, _mm512_mul_ps(_mm512_set1_ps(wr[r][kw + 1]), t));
                    }
                }
            }
            if (act) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
            _mm512_mask_storeu_ps(yr + 16 * c, m->st, v);
        }
    }
}

AVX512_DW static void dw_s2m_3(const bf__window *w, const dw_s2m *cm, const float *x, const float *wk, float bv,
                               const bf__act *act, float *y)
{
    dw_s2m_body(3, w, cm, x, wk, bv, act, y);
}

AVX512_DW static void dw_s2m_5(const bf__window *w, const dw_s2m *cm, const float *x, const float *wk, float bv,
                               const bf__act *act, float *y)
{
    dw_s2m_body(5, w, cm, x, wk, bv, act, y);
}

AVX512_DW static void dw_s2m_any(const bf__window *w, const dw_s2m *cm, const float *x, const float *wk, float bv,
                                 const bf__act *act, float *y)
{
    dw_s2m_body(w->k[2], w, cm, x, wk, bv, act, y);
}

static void dw_s2m_run(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                       const bf__act *act, float *y, int64_t g0, int64_t g1)
{
    dw_s2m cm[DW_S2M_CHUNKS];
    dw_s2m_masks(&cp->w, cm);
    int64_t KW = cp->w.k[2];
    for (int64_t n = 0; n < cp->n; n++)
        for (int64_t g = g0; g < g1; g++) {
            const float *xg = x + (n * cp->c + g) * cp->isp, *wg = wt + g * cp->kc;
            float *yg = y + (n * cp->m + g) * cp->osp, bv = bias ? bias[g] : 0.0f;
            if (KW == 3) dw_s2m_3(&cp->w, cm, xg, wg, bv, act, yg);
            else if (KW == 5) dw_s2m_5(&cp->w, cm, xg, wg, bv, act, yg);
            else dw_s2m_any(&cp->w, cm, xg, wg, bv, act, yg);
        }
}

/* Whether cp's depthwise Conv runs on dw_flat (bf__conv_direct's first
 * depthwise path, bf__dw_flat_table's) */
static int dw_flat_takes(const bf__conv_params *cp)
{
    return cp->path == BF__CONV_DEPTHWISE && cp->simd >= BF_SGEMM_AVX512 && dw2d_ok(&cp->w) && dw_flat_ok(&cp->w);
}

/* bf__conv_direct's depthwise loops on dw_flat: images n, groups
 * [g0, g1), channels [j0, j0 + nj) of each (depthwise: mg = 1), through
 * table t (dw_flat_masks of cp's window) */
static void dw_flat_run(const bf__conv_params *cp, const bf__dw_flat *t, const float *x, const float *wt,
                        const float *bias, const bf__act *act, float *y, int64_t g0, int64_t g1)
{
    const __mmask16 *tab = t->tab;
    const int64_t *off = t->off;
    const bf__window *w = &cp->w;
    int64_t taps = w->k[1] * w->k[2];
    int r16 = taps == 25 && bf__dw_row16_ok(w);   /* linalg_conv_flat5.c */
    for (int64_t n = 0; n < cp->n; n++)
        for (int64_t g = g0; g < g1; g++) {
            const float *xg = x + (n * cp->c + g) * cp->isp, *wg = wt + g * cp->kc;
            float *yg = y + (n * cp->m + g) * cp->osp;
            float bv = bias ? bias[g] : 0.0f;
            if (taps == 9 && w->d[2] == 1) dw_flat_3x3(tab, off, cp->osp, xg, wg, bv, act, yg);
            else if (r16) bf__dw_row16_5x5(w, xg, wg, bv, act, yg);
            else if (taps == 25) bf__dw_flat_5x5(tab, off, cp->osp, xg, wg, bv, act, yg);
            else dw_flat_any(taps, tab, off, cp->osp, xg, wg, bv, act, yg);
        }
}
#endif

static void dw2d(const bf__window *w, const dw_cols *dc, const float *x, const float *wk, float bv, float *y)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (dc->avx512) {
        dw2d_avx512(w, dc, x, wk, bv, y);
        return;
    }
    if (dc->avx2) {
        dw2d_avx2(w, dc, x, wk, bv, y);
        return;
    }
#endif
    dw2d_base(w, dc, x, wk, bv, y);
}

int bf__dw_flat_table(const bf__conv_params *cp, bf__dw_flat *t)
{
#ifdef DW_S2_VECTOR
    if (!dw_flat_takes(cp)) return 0;
    dw_flat_masks(&cp->w, t->tab, t->off);
    return 1;
#else
    (void)cp, (void)t;
    return 0;
#endif
}

void bf__conv_direct_dw(const bf__conv_params *cp, const bf__dw_flat *t, const float *x, const float *wt,
                        const float *bias, const bf__act *act, float *y)
{
#ifdef DW_S2_VECTOR
    if (t) {
        dw_flat_run(cp, t, x, wt, bias, act, y, 0, cp->group);
        return;
    }
#endif
    bf__conv_direct(cp, x, wt, bias, act, y, -1, NULL);
}

/* One depthwise channel: y (bias-filled) += taps of x.
 * Padding taps are skipped rather than multiplied by 0, so an Inf weight
 * does not turn border outputs into NaN. */
static void depthwise_channel(const bf__window *w, const dw_cols *dc, const float *restrict x,
                              const float *restrict wk, float *restrict y)
{
    int64_t ID = w->in[0], IH = w->in[1], IW = w->in[2];
    int64_t OD = w->out[0], OH = w->out[1], OW = w->out[2];
    for (int64_t kd = 0; kd < w->k[0]; kd++)
        for (int64_t kh = 0; kh < w->k[1]; kh++) {
            const float *wrow = wk + (kd * w->k[1] + kh) * w->k[2];
            for (int64_t od = 0; od < OD; od++) {
                int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
                if (id < 0 || id >= ID) continue;
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
                    if (ih < 0 || ih >= IH) continue;
                    dw_row(w, dc, x + (id * IH + ih) * IW, wrow, y + (od * OH + oh) * OW);
                }
            }
        }
}

int bf__conv_res_direct(const bf__conv_params *cp)
{
    return cp->path == BF__CONV_POINTWISE && cp->has_bias && cp->kc > 0 && cp->simd >= BF_SGEMM_AVX2;
}

/* Output channels [j0, j0 + nj) of each group of the direct and 1x1 paths
 * (every channel: j0 = 0, nj = mg; one: its group only). */
void bf__conv_direct(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                        const bf__act *act, float *y, int64_t ch, void *scratch)
{
    int osp = (int)cp->osp, kc = (int)cp->kc;
    int64_t g0 = ch < 0 ? 0 : ch / cp->mg, g1 = ch < 0 ? cp->group : g0 + 1;
    int64_t j0 = ch < 0 ? 0 : ch % cp->mg, nj = ch < 0 ? cp->mg : 1;
    dw_cols dc = {0};
    if (cp->path == BF__CONV_DEPTHWISE) dw_cols_init(&cp->w, cp->simd, &dc);
#ifdef DW_S2_VECTOR
    if (dw_flat_takes(cp)) {
        bf__dw_flat t;   /* the masks once a call: every channel and image of it */
        dw_flat_masks(&cp->w, t.tab, t.off);
        dw_flat_run(cp, &t, x, wt, bias, act, y, g0, g1);
        return;
    }
    if (cp->path == BF__CONV_DEPTHWISE && dc.avx512 && bf__dw_pair_ok(cp)) {   /* rows of up to 7, two a vector */
        bf__dw_pair(cp, x, wt, bias, act, y, g0, g1);
        return;
    }
    if (cp->path == BF__CONV_DEPTHWISE && dw2d_ok(&cp->w) && dc.avx512 && dw_s2m_ok(&cp->w)) {
        dw_s2m_run(cp, x, wt, bias, act, y, g0, g1);
        return;
    }
#endif
    /* AVX2, small maps: 8 channels in the lanes (linalg_conv_dwc8.c), then
     * the channels it leaves as below */
    if (cp->path == BF__CONV_DEPTHWISE) {
        g0 = bf__dwc8_run(cp, x, wt, bias, act, y, g0, g1);
        if (g0 == g1) return;
    }
    /* AVX2: the plane as one run of 8-lane chunks, stride 1 or 2 (linalg_conv_dw8.c: at that level only) */
    if (cp->path == BF__CONV_DEPTHWISE && bf__dw8_run(cp, x, wt, bias, act, y, g0, g1)) return;
    /* small maps: the images side by side in one product (whole steps;
     * the output channels in the lanes were tried first: linalg_conv.c,
     * conv_channels) */
    if (cp->path == BF__CONV_POINTWISE && ch < 0 && bf__conv_pw_batched(cp, x, wt, bias, act, y, scratch)) return;
    for (int64_t n = 0; n < cp->n; n++)
        for (int64_t g = g0; g < g1; g++) {
            const float *xg = x + (n * cp->c + g * cp->cg) * cp->isp;
            float *yg = y + (n * cp->m + g * cp->mg + j0) * cp->osp;
            const float *wg = wt + (g * cp->mg + j0) * cp->kc;
#ifdef DW_S2_VECTOR
            if (cp->path == BF__CONV_DEPTHWISE && dw2d_ok(&cp->w) && dc.avx2 && dw_masked_ok(&cp->w)) {
                for (int64_t j = 0; j < nj; j++)
                    dw2d_masked(&cp->w, &dc, xg, wg + j * cp->kc, bias ? bias[g * cp->mg + j0 + j] : 0.0f, act,
                                yg + j * cp->osp);
                continue;
            }
#endif
            if (cp->path == BF__CONV_DEPTHWISE && dw2d_ok(&cp->w)) {
                for (int64_t j = 0; j < nj; j++)
                    dw2d(&cp->w, &dc, xg, wg + j * cp->kc, bias ? bias[g * cp->mg + j0 + j] : 0.0f, yg + j * cp->osp);
                bf__act_pass(act, yg, nj * cp->osp);
                continue;
            }
            if (cp->path == BF__CONV_DEPTHWISE) {
                /* Bias first; the direct loop accumulates onto it. */
                for (int64_t j = 0; j < nj; j++) {
                    float bv = bias ? bias[g * cp->mg + j0 + j] : 0.0f;
                    for (int64_t o = 0; o < cp->osp; o++) yg[j * cp->osp + o] = bv;
                }
                depthwise_channel(&cp->w, &dc, xg, wg, yg);
                bf__act_pass(act, yg, nj * cp->osp);
                continue;
            }
            /* 1x1: X is already the column matrix. Bias after the product,
             * as in the im2col path, added in the kernel's epilogue (the
             * same y = s + bias, without another pass over y). */
            if (nj == 0) continue;
            if (kc > 0 && bias) {
                bf__act ka;
                const bf__act *kact = bf__act_res_at(act, yg - y, &ka);
                if (bf__conv_pw_inplace_ok(cp, nj)) {   /* few rows over a large map: B in place */
                    bf__conv_pw_inplace((int)nj, osp, kc, wg, kc, xg, osp, bias + g * cp->mg + j0, kact, yg, osp);
                    continue;
                }
                bf__sgemm_bias(cp->simd, (int)nj, osp, kc, wg, kc, xg, osp, bias + g * cp->mg + j0, kact, yg, osp);
                continue;
            }
            if (kc == 0) memset(yg, 0, sizeof(float) * (size_t)(nj * cp->osp));
            else bf__sgemm_level(cp->simd, 0, 0, (int)nj, osp, kc, 1.0f, wg, kc, xg, osp, 0, yg, osp);
            if (bias)
                for (int64_t j = 0; j < nj; j++) {
                    float bv = bias[g * cp->mg + j0 + j];
                    for (int64_t o = 0; o < cp->osp; o++) yg[j * cp->osp + o] += bv;
                }
            bf__act_pass(act, yg, nj * cp->osp);
        }
}
