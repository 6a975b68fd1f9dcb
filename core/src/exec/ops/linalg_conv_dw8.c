/* The depthwise plane as one run of outputs on AVX2 (issue 33): what
 * linalg_conv_direct.c's dw_flat does on 16 lanes with mask registers, on
 * 8 lanes with vector masks, for the CPUs that stop at AVX2; stride 2
 * through the input's four phases (below, dw8_phases). Row by row (dw2d_avx2), mobilenet_v2's 14x14 maps ran at 4-5
 * GFLOP/s, a third of ONNX Runtime's speed and a fifth on the 7x7 ones
 * (docs/perf/mobilenet/h41.md): every row of 14 or 7 outputs is two scalar
 * edges around a short inside, and dw2d_masked's one chunk a row waits on
 * its chain of nine dependent adds.
 *
 * When both strides are 1 and the output rows are as wide as the input's,
 * output o = oh OW + ow reads, for tap (kh, kw), input o + (kh dh - pb_h) IW
 * + (kw dw - pb_w): one offset per tap for the whole plane. A plane runs 8
 * outputs at a time straight across the row ends. A chunk whose every lane
 * is an output and whose every tap lands inside the input for every lane
 * (full) takes plain loads; the others (partial: an edge row or column, or
 * the plane's last outputs) load each tap under the mask of the lanes where
 * it lands inside and keep the sum only in those lanes (a blend: the other
 * lanes' sum stays exactly as it is, as a skipped tap leaves it; an Inf
 * weight times the masked-out zero would give NaN there, and -0 + 0 is +0).
 * Either way every lane runs the scalar sequence of dw2d_impl: bias, then
 * v = v + w * x over the taps in (kh, kw) order, the padding's taps
 * skipped, a rounded product and a rounded sum each (no FMA: the target
 * lacks it). Four chunks run at a time, full with full and partial with
 * partial, so that four chains of dependent adds overlap (one chain left
 * the adder waiting: dw2d_masked's 86 cycles a chunk of 7 outputs).
 *
 * The masks depend on the geometry alone: the chunks' kinds and the
 * partial chunks' masks are worked once a call, for every channel and image
 * of it, into a buffer of the heap (BF__DW8_TABLE_MAX bytes at most; past
 * that, or when it cannot be had, the rows path runs instead). */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/alloc.h"
#include "exec/op.h"
#include "linalg_window.h"
#include "sgemm.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define DW8_MAXTAPS (BF__DW_MAXKH * BF__DW_MAXKW)

/* The plane's chunks sorted by kind, and the partial ones' masks:
 * mask[(i * taps) + t] for partial chunk part[i]'s tap t. Tap t reads
 * input plane pl[t] (stride 1: the input itself; stride 2: one of the four
 * phases) at output index + off[t]. */
typedef struct dw8_table {
    int64_t off[DW8_MAXTAPS];
    unsigned char pl[DW8_MAXTAPS];
    int32_t *full, *part;
    int64_t n_full, n_part, taps, osp;
    __m256i *mask;
    float *phase;          /* stride 2: the four phases of one plane, phase_floats apart */
    int64_t phase_floats;
    void *buf;
} dw8_table;

/* floor(a / 2) and a's parity (0 or 1), a of either sign */
static int64_t dw8_half(int64_t a) { return (a - (a & 1)) / 2; }

int bf__dw8_ok(const bf__window *w)
{
    const int64_t lim = (int64_t)1 << 20;   /* the lanes' rows and columns in 32 bits */
    int64_t s = w->s[2];
    if (!(w->in[0] == 1 && w->k[0] == 1 && w->out[0] == 1 && w->out[1] > 0 && w->out[2] > 0 &&
          w->k[1] <= BF__DW_MAXKH && w->k[2] <= BF__DW_MAXKW && w->s[1] == s && (s == 1 || s == 2) &&
          w->in[1] < lim && w->in[2] < lim && w->out[1] < lim && w->pb[1] < lim && w->pb[2] < lim &&
          w->d[1] * (w->k[1] - 1) < lim && w->d[2] * (w->k[2] - 1) < lim && w->out[1] * w->out[2] < lim))
        return 0;
    if (s == 1) return w->out[2] == w->in[2];
    /* stride 2: a phase's rows are OW floats apart, so every column a tap
     * reads inside the input must lie within OW of them */
    for (int64_t kw = 0; kw < w->k[2]; kw++) {
        int64_t lo, hi;
        bf__valid_range(w->in[2], w->out[2], 2, w->pb[2], kw, w->d[2], &lo, &hi);
        if (hi > lo && hi - 1 + dw8_half(kw * w->d[2] - w->pb[2]) >= w->out[2]) return 0;
    }
    return 1;
}

/* lanes l with 0 <= a_l + k < hi, as 0 / -1 */
__attribute__((target("avx2"))) static inline __m256i dw8_inside(__m256i a, int64_t k, int64_t hi)
{
    __m256i v = _mm256_add_epi32(a, _mm256_set1_epi32((int32_t)k));
    return _mm256_and_si256(_mm256_cmpgt_epi32(v, _mm256_set1_epi32(-1)),
                            _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)hi), v));
}

/* The chunks' kinds and the partial ones' masks (and, at stride 2, room
 * for the phases); 0 (t->buf NULL) when that would pass BF__DW8_TABLE_MAX
 * bytes or memory runs out. The lanes' output rows and columns carried
 * from chunk to chunk as dw_flat_masks carries them (+8 % OW columns,
 * + 8 / OW rows, one wrap at most); a lane's tap (kh, kw) reads input row
 * s row + kh dh - pb_h and column s col + kw dw - pb_w. */
__attribute__((target("avx2"))) static int dw8_table_make(const bf__window *w, dw8_table *t)
{
    const int64_t IH = w->in[1], IW = w->in[2], OW = w->out[2], osp = w->out[1] * OW, s = w->s[2];
    const int64_t KH = w->k[1], KW = w->k[2], taps = KH * KW, chunks = (osp + 7) / 8;
    t->buf = NULL;
    t->taps = taps, t->osp = osp;
    /* 8 floats past a phase's last row: dw8_phases stores whole vectors */
    t->phase_floats = s == 2 ? (((IH + 1) / 2 * OW + 8 + 15) & ~(int64_t)15) : 0;
    for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++) {
            int64_t dh = kh * w->d[1] - w->pb[1], dw = kw * w->d[2] - w->pb[2], k = kh * KW + kw;
            if (s == 1) {
                t->off[k] = dh * IW + dw, t->pl[k] = 0;
                continue;
            }
            /* input (2 oh + dh, 2 ow + dw) is phase (dh & 1, dw & 1)'s (oh + floor(dh / 2), ow + floor(dw / 2)) */
            t->off[k] = dw8_half(dh) * OW + dw8_half(dw), t->pl[k] = (unsigned char)(2 * (dh & 1) + (dw & 1));
        }
    __m256i rv[BF__DW_MAXKH], cv[BF__DW_MAXKW];
    int32_t r0[8], c0[8];
    for (int l = 0; l < 8; l++) r0[l] = (int32_t)(l / OW), c0[l] = (int32_t)(l % OW);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i dr = _mm256_set1_epi32((int32_t)(8 / OW)), dc = _mm256_set1_epi32((int32_t)(8 % OW));
    const __m256i ow = _mm256_set1_epi32((int32_t)OW), one = _mm256_set1_epi32(1);
    /* first the partial chunks' count, so that the buffer is asked for once;
     * then their masks */
    for (int pass = 0; pass < 2; pass++) {
        __m256i row = _mm256_loadu_si256((const __m256i *)r0), col = _mm256_loadu_si256((const __m256i *)c0);
        int64_t nf = 0, np = 0;
        for (int64_t c = 0; c < chunks; c++) {
            __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(osp - 8 * c)), lane);
            __m256i rs = s == 2 ? _mm256_add_epi32(row, row) : row, cs = s == 2 ? _mm256_add_epi32(col, col) : col;
            /* full: the first and last kernel rows and columns inside for
             * every lane (a tap's row and column move one way as kh and kw
             * grow, so then every tap is) */
            __m256i all = _mm256_and_si256(_mm256_and_si256(in, dw8_inside(rs, -w->pb[1], IH)),
                                           dw8_inside(rs, (KH - 1) * w->d[1] - w->pb[1], IH));
            all = _mm256_and_si256(_mm256_and_si256(all, dw8_inside(cs, -w->pb[2], IW)),
                                   dw8_inside(cs, (KW - 1) * w->d[2] - w->pb[2], IW));
            int full = _mm256_movemask_ps(_mm256_castsi256_ps(all)) == 0xFF;
            if (pass == 1) {
                if (full) {
                    t->full[nf] = (int32_t)c;
                } else {
                    __m256i *m = t->mask + np * taps;
                    t->part[np] = (int32_t)c;
                    for (int64_t kh = 0; kh < KH; kh++) rv[kh] = dw8_inside(rs, kh * w->d[1] - w->pb[1], IH);
                    for (int64_t kw = 0; kw < KW; kw++) cv[kw] = dw8_inside(cs, kw * w->d[2] - w->pb[2], IW);
                    for (int64_t kh = 0; kh < KH; kh++)
                        for (int64_t kw = 0; kw < KW; kw++)
                            m[kh * KW + kw] = _mm256_and_si256(in, _mm256_and_si256(rv[kh], cv[kw]));
                }
            }
            nf += full, np += !full;
            row = _mm256_add_epi32(row, dr);
            col = _mm256_add_epi32(col, dc);
            __m256i wrap = _mm256_cmpgt_epi32(col, _mm256_sub_epi32(ow, one));
            col = _mm256_sub_epi32(col, _mm256_and_si256(wrap, ow));
            row = _mm256_add_epi32(row, _mm256_and_si256(wrap, one));
        }
        if (pass == 1) break;
        size_t n_part = (size_t)np;
        size_t mask_bytes = n_part * (size_t)taps * sizeof(__m256i);
        size_t phase_bytes = 4 * (size_t)t->phase_floats * sizeof(float);
        size_t bytes = mask_bytes + phase_bytes + (size_t)chunks * sizeof(int32_t);
        if (bytes > BF__DW8_TABLE_MAX) return 0;
        t->buf = bf__aligned_alloc(bytes + 64);   /* 64-byte aligned: the masks, then the phases */
        if (!t->buf) return 0;
        t->mask = t->buf;
        t->phase = (float *)((char *)t->buf + mask_bytes);
        t->full = (int32_t *)((char *)t->buf + mask_bytes + phase_bytes);
        t->part = t->full + (chunks - (int64_t)n_part);
        t->n_full = chunks - (int64_t)n_part, t->n_part = (int64_t)n_part;
    }
    return 1;
}

/* Stride 2: input plane x as its four phases, phase (r, c) holding input
 * (2 i + r, 2 j + c) at i OW + j, for the j < OW a tap can read (bf__dw8_ok);
 * the rest is never read (a chunk's lane reads only where its tap lands
 * inside the input). A row's phases are written 8 floats at a time, the
 * input's lanes past its row neither read nor kept: the last vector's
 * lanes past OW land on the phase's next row, written after it, or on the
 * 8 floats past its last (the rows of x in order). */
__attribute__((target("avx2"))) static void dw8_phases(const bf__window *w, const dw8_table *t, const float *x)
{
    const int64_t IH = w->in[1], IW = w->in[2], OW = w->out[2];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), lane8 = _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15);
    for (int64_t r = 0; r < IH; r++) {
        const float *xr = x + r * IW;
        float *e = t->phase + (2 * (r & 1)) * t->phase_floats + (r / 2) * OW, *o = e + t->phase_floats;
        for (int64_t j = 0; j < OW; j += 8) {
            __m256 lo, hi;
            if (2 * j + 16 <= IW) {
                lo = _mm256_loadu_ps(xr + 2 * j), hi = _mm256_loadu_ps(xr + 2 * j + 8);
            } else {
                __m256i rem = _mm256_set1_epi32((int32_t)(IW - 2 * j));
                lo = _mm256_maskload_ps(xr + 2 * j, _mm256_cmpgt_epi32(rem, lane));
                hi = _mm256_maskload_ps(xr + 2 * j + 8, _mm256_cmpgt_epi32(rem, lane8));
            }
            __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88), od = _mm256_shuffle_ps(lo, hi, 0xDD);
            _mm256_storeu_ps(e + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
            _mm256_storeu_ps(o + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
        }
    }
}

__attribute__((target("avx2"))) static inline __m256 dw8_act(__m256 v, const bf__act *act)
{
    return act ? _mm256_min_ps(_mm256_set1_ps(act->hi), _mm256_max_ps(_mm256_set1_ps(act->lo), v)) : v;
}

/* chunk c's 8 outputs into y; past the plane's end (its last chunk) only
 * the outputs there are (a masked store is microcoded on AMD's cores) */
__attribute__((target("avx2"))) static inline void dw8_store(float *y, int64_t c, int64_t osp, __m256 v)
{
    if (8 * c + 8 <= osp) {
        _mm256_storeu_ps(y + 8 * c, v);
        return;
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    memcpy(y + 8 * c, tmp, sizeof(float) * (size_t)(osp - 8 * c));
}

/* One channel's plane, tap k reading xt[k] + the output index: the full
 * chunks four at a time, then the partial ones; each lane the chain
 * described above. A last group of one to three chunks is made four by
 * repeating its last chunk (the same outputs computed and stored twice),
 * so that it too runs four chains at once: mobilenet_v2's 7x7 planes are 7
 * chunks. taps: the table's, a constant where inlined (dw8_plane). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
dw8_plane_body(int64_t taps, const dw8_table *t, const float *const *xt, const float *wk, float bv,
               const bf__act *act, float *y)
{
    const int64_t osp = t->osp;
    const __m256 b = _mm256_set1_ps(bv);
#define DW8_AT(list, n, i) (8 * (int64_t)(list)[(i) < (n) ? (i) : (n) - 1])
    for (int64_t i = 0; i < t->n_full; i += 4) {
        const int64_t n = t->n_full;
        int64_t o0 = DW8_AT(t->full, n, i), o1 = DW8_AT(t->full, n, i + 1);
        int64_t o2 = DW8_AT(t->full, n, i + 2), o3 = DW8_AT(t->full, n, i + 3);
        __m256 v0 = b, v1 = b, v2 = b, v3 = b;
        for (int64_t k = 0; k < taps; k++) {
            __m256 wv = _mm256_set1_ps(wk[k]);
            const float *xk = xt[k];
            v0 = _mm256_add_ps(v0, _mm256_mul_ps(wv, _mm256_loadu_ps(xk + o0)));
            v1 = _mm256_add_ps(v1, _mm256_mul_ps(wv, _mm256_loadu_ps(xk + o1)));
            v2 = _mm256_add_ps(v2, _mm256_mul_ps(wv, _mm256_loadu_ps(xk + o2)));
            v3 = _mm256_add_ps(v3, _mm256_mul_ps(wv, _mm256_loadu_ps(xk + o3)));
        }
        _mm256_storeu_ps(y + o0, dw8_act(v0, act));
        _mm256_storeu_ps(y + o1, dw8_act(v1, act));
        _mm256_storeu_ps(y + o2, dw8_act(v2, act));
        _mm256_storeu_ps(y + o3, dw8_act(v3, act));
    }
    /* a masked lane's load reads nothing: its address may lie outside x */
#define DW8_TAP(v, m, o)                                                                        \
    do {                                                                                        \
        __m256i mk_ = _mm256_load_si256(m + k);                                                 \
        __m256 s_ = _mm256_add_ps(v, _mm256_mul_ps(wv, _mm256_maskload_ps(xk + (o), mk_)));     \
        v = _mm256_blendv_ps(v, s_, _mm256_castsi256_ps(mk_));                                  \
    } while (0)
    for (int64_t j = 0; j < t->n_part; j += 4) {
        const int64_t n = t->n_part;
        const int64_t j1 = j + 1 < n ? j + 1 : n - 1, j2 = j + 2 < n ? j + 2 : n - 1, j3 = j + 3 < n ? j + 3 : n - 1;
        const __m256i *m0 = t->mask + j * taps, *m1 = t->mask + j1 * taps, *m2 = t->mask + j2 * taps,
                      *m3 = t->mask + j3 * taps;
        int64_t o0 = DW8_AT(t->part, n, j), o1 = DW8_AT(t->part, n, j1);
        int64_t o2 = DW8_AT(t->part, n, j2), o3 = DW8_AT(t->part, n, j3);
        __m256 v0 = b, v1 = b, v2 = b, v3 = b;
        for (int64_t k = 0; k < taps; k++) {
            __m256 wv = _mm256_set1_ps(wk[k]);
            const float *xk = xt[k];
            DW8_TAP(v0, m0, o0);
            DW8_TAP(v1, m1, o1);
            DW8_TAP(v2, m2, o2);
            DW8_TAP(v3, m3, o3);
        }
        dw8_store(y, o0 / 8, osp, dw8_act(v0, act));
        dw8_store(y, o1 / 8, osp, dw8_act(v1, act));
        dw8_store(y, o2 / 8, osp, dw8_act(v2, act));
        dw8_store(y, o3 / 8, osp, dw8_act(v3, act));
    }
#undef DW8_TAP
#undef DW8_AT
}

/* A kernel of nine taps (3x3) unrolled (their weights and pointers held
 * across the chunks; the same operations per lane in the same order),
 * any other through the loop: dw8_plane was 17.8% of mobilenet_v2's eval
 * with the taps a variable (docs/perf/mobilenet/h41.md, h41-3x3). */
__attribute__((target("avx2"))) static void dw8_plane_3x3(const dw8_table *t, const float *const *xt, const float *wk,
                                                          float bv, const bf__act *act, float *y)
{
    dw8_plane_body(9, t, xt, wk, bv, act, y);
}

__attribute__((target("avx2"))) static void dw8_plane_any(const dw8_table *t, const float *const *xt, const float *wk,
                                                          float bv, const bf__act *act, float *y)
{
    dw8_plane_body(t->taps, t, xt, wk, bv, act, y);
}

static void dw8_plane(const dw8_table *t, const float *const *xt, const float *wk, float bv, const bf__act *act,
                      float *y)
{
    if (t->taps == 9) dw8_plane_3x3(t, xt, wk, bv, act, y);
    else dw8_plane_any(t, xt, wk, bv, act, y);
}

int bf__dw8_run(const bf__conv_params *cp, const float *x, const float *wt, const float *bias, const bf__act *act,
                float *y, int64_t g0, int64_t g1)
{
    if (cp->path != BF__CONV_DEPTHWISE || cp->simd != BF_SGEMM_AVX2 || !bf__dw8_ok(&cp->w)) return 0;
    dw8_table t;
    if (!dw8_table_make(&cp->w, &t)) return 0;
    const float *xt[DW8_MAXTAPS];
    for (int64_t n = 0; n < cp->n; n++)
        for (int64_t g = g0; g < g1; g++) {
            const float *xg = x + (n * cp->c + g) * cp->isp;
            if (t.phase_floats) dw8_phases(&cp->w, &t, xg);
            for (int64_t k = 0; k < t.taps; k++)
                xt[k] = (t.phase_floats ? t.phase + t.pl[k] * t.phase_floats : xg) + t.off[k];
            dw8_plane(&t, xt, wt + g * cp->kc, bias ? bias[g] : 0.0f, act, y + (n * cp->m + g) * cp->osp);
        }
    bf__free(t.buf);
    return 1;
}

#else

int bf__dw8_ok(const bf__window *w)
{
    (void)w;
    return 0;
}

int bf__dw8_run(const bf__conv_params *cp, const float *x, const float *wt, const float *bias, const bf__act *act,
                float *y, int64_t g0, int64_t g1)
{
    (void)cp, (void)x, (void)wt, (void)bias, (void)act, (void)y, (void)g0, (void)g1;
    return 0;
}

#endif
