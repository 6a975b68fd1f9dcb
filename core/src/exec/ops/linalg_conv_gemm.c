/* Conv's product paths (linalg_window.h): im2col then bf__sgemm for nb
 * images at a time, the product that packs its panels straight from
 * zero-padded planes (no column matrix: stride 1, and on AVX-512 a
 * horizontal stride of 2; one image, or a few side by side where a map is
 * small), and one output channel of a
 * stride-1 2-D Conv summed over windows of those planes for the
 * differential engine. Every path gives an output element the chain of
 * fused multiply-adds of the im2col product (docs/ENGINE.md, "The
 * convolution path"), so they agree bit for bit. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "exec/op.h"
#include "linalg_window.h"
#include "sgemm.h"

/* Writes the input windows of one group of one image into the column matrix
 * `cols` (leading dimension ld): row bf__conv_krow(c, tap), osp columns from
 * `col0`, in (od, oh, ow) order; padding reads 0. */
/* The common case of stride 1, no dilation, output as wide as the input
 * (same padding), one spatial plane: a tap's row is the input plane shifted
 * by a constant, so it is one contiguous copy plus zeros where a row or a
 * column falls into the padding. */
static int im2col_shift_ok(const bf__window *w)
{
    return w->in[0] == 1 && w->k[0] == 1 && w->s[1] == 1 && w->s[2] == 1 && w->d[1] == 1 &&
           w->d[2] == 1 && w->out[2] == w->in[2];
}

static void im2col_shift(const bf__conv_params *cp, const float *restrict x, float *restrict cols,
                         int64_t col0, int64_t ld)
{
    const bf__window *w = &cp->w;
    int64_t IH = w->in[1], W = w->in[2], OH = w->out[1];
    for (int64_t c = 0; c < cp->cg; c++) {
        const float *xc = x + c * cp->isp;
        for (int64_t kh = 0; kh < w->k[1]; kh++) {
            int64_t dh = kh - w->pb[1];
            /* output rows whose input row exists: 0 <= oh + dh < IH */
            int64_t oh0 = dh < 0 ? -dh : 0, oh1 = IH - dh < OH ? IH - dh : OH;
            if (oh1 < oh0) oh1 = oh0;
            for (int64_t kw = 0; kw < w->k[2]; kw++) {
                int64_t dw = kw - w->pb[2];
                float *restrict col = cols + bf__conv_krow(cp, c, kh * w->k[2] + kw) * ld + col0;
                for (int64_t i = 0; i < oh0 * W; i++) col[i] = 0.0f;
                if (oh1 > oh0) {
                    const float *restrict src = xc + (oh0 + dh) * W + dw;
                    float *restrict dst = col + oh0 * W;
                    int64_t n = (oh1 - oh0) * W;
                    /* the run may start before or end past the plane by |dw|:
                     * those positions are padding columns, zeroed below */
                    int64_t lo = oh0 + dh == 0 && dw < 0 ? -dw : 0;
                    int64_t hi = oh1 + dh == IH && dw > 0 ? n - dw : n;
                    for (int64_t i = 0; i < lo; i++) dst[i] = 0.0f;
                    memcpy(dst + lo, src + lo, sizeof(float) * (size_t)(hi - lo));
                    for (int64_t i = hi; i < n; i++) dst[i] = 0.0f;
                    /* columns that wrapped into the neighbouring row */
                    if (dw < 0)
                        for (int64_t r = 0; r < oh1 - oh0; r++)
                            for (int64_t k = 0; k < -dw; k++) dst[r * W + k] = 0.0f;
                    else if (dw > 0)
                        for (int64_t r = 0; r < oh1 - oh0; r++)
                            for (int64_t k = W - dw; k < W; k++) dst[r * W + k] = 0.0f;
                }
                for (int64_t i = oh1 * W; i < OH * W; i++) col[i] = 0.0f;
            }
        }
    }
}

static void im2col(const bf__conv_params *cp, const float *restrict x, float *restrict cols, int64_t col0,
                   int64_t ld)
{
    const bf__window *w = &cp->w;
    if (im2col_shift_ok(w)) {
        im2col_shift(cp, x, cols, col0, ld);
        return;
    }
    int64_t ID = w->in[0], IH = w->in[1], IW = w->in[2];
    int64_t OD = w->out[0], OH = w->out[1], OW = w->out[2];
    for (int64_t c = 0; c < cp->cg; c++) {
        const float *xc = x + c * cp->isp;
        for (int64_t kd = 0; kd < w->k[0]; kd++)
            for (int64_t kh = 0; kh < w->k[1]; kh++)
                for (int64_t kw = 0; kw < w->k[2]; kw++) {
                    int64_t tap = (kd * w->k[1] + kh) * w->k[2] + kw;
                    float *restrict col = cols + bf__conv_krow(cp, c, tap) * ld + col0;
                    int64_t lo, hi;
                    bf__valid_range(IW, OW, w->s[2], w->pb[2], kw, w->d[2], &lo, &hi);
                    int64_t offw = kw * w->d[2] - w->pb[2], sw = w->s[2];
                    for (int64_t od = 0; od < OD; od++) {
                        int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
                        for (int64_t oh = 0; oh < OH; oh++, col += OW) {
                            int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
                            /* plain loops, not memcpy/memset: rows are often
                             * a few floats, where a call costs more than the copy */
                            if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
                                for (int64_t ow = 0; ow < OW; ow++) col[ow] = 0.0f;
                                continue;
                            }
                            const float *restrict xr = xc + (id * IH + ih) * IW;
                            for (int64_t ow = 0; ow < lo; ow++) col[ow] = 0.0f;
                            if (sw == 1) {
                                const float *restrict xs = xr + offw;
                                for (int64_t ow = lo; ow < hi; ow++) col[ow] = xs[ow];
                            } else {
                                for (int64_t ow = lo; ow < hi; ow++) col[ow] = xr[ow * sw + offw];
                            }
                            for (int64_t ow = hi; ow < OW; ow++) col[ow] = 0.0f;
                        }
                    }
                }
    }
}

/* The weights, [M, C/group, taps] as stored, with each row's K reordered to
 * the rows of im2col (bf__conv_krow). Done every run (faults rewrite W
 * between runs), but on AVX2 where the plan passes the model's copy made
 * once by bf__conv_reorder (docs/perf/conv/h42.md, h42-reorder). A channel block at a time, tap by tap, each tap's channels
 * written side by side (the block's few hundred bytes of W stay in L1), on
 * AVX-512 one gather a tap (reorder_blocks16): against the copy channel
 * by channel, each store 16 floats from the last, that took a quarter off
 * a 512-channel 3x3 Conv at batch 1 and 4.5-6% off at batch 32, the runs a
 * resnet18 campaign's trials re-run most (docs/BENCHMARKS.md, "Where a
 * campaign's time goes on resnet18 and mobilenet_v2"). */
#if defined(__x86_64__) && defined(__GNUC__)
/* reorder_weights' full blocks of 16 channels on AVX-512: each tap's 16
 * channels, ksp floats apart in W, in one gather from the block's few
 * hundred bytes (in L1 after the first), one store: the same floats to the
 * same places as the scalar loop, so the same bits. 0: not taken (no
 * AVX-512, or ksp * 16 past the gather's 32-bit indices). */
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl"))) static int
reorder_blocks16(const bf__conv_params *cp, const float *restrict wt, float *restrict wr, int64_t r0, int64_t r1)
{
    int64_t full = cp->cg / BF__CONV_CBLOCK * BF__CONV_CBLOCK;
    if (cp->simd < BF_SGEMM_AVX512 || cp->ksp > (1 << 20) || full == 0) return 0;
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)cp->ksp));
    for (int64_t j = r0; j < r1; j++) {
        const float *src = wt + j * cp->kc;
        float *dst = wr + j * cp->kc;
        for (int64_t base = 0; base < full; base += BF__CONV_CBLOCK) {
            const float *sb = src + base * cp->ksp;
            float *db = dst + base * cp->ksp;
            for (int64_t tap = 0; tap < cp->ksp; tap++, db += BF__CONV_CBLOCK)
                _mm512_storeu_ps(db, _mm512_i32gather_ps(idx, sb + tap, 4));
        }
        /* the last, narrower block (C not a multiple of 16): as below */
        if (full < cp->cg) {
            int64_t width = cp->cg - full;
            const float *sb = src + full * cp->ksp;
            float *db = dst + full * cp->ksp;
            for (int64_t tap = 0; tap < cp->ksp; tap++, db += width)
                for (int64_t c = 0; c < width; c++) db[c] = sb[c * cp->ksp + tap];
        }
    }
    return 1;
}
#endif

/* output channel ch's row of W, or every row for ch < 0 (the callers' own
 * convention; a one-channel call reads no other row): a call for one
 * channel (the differential engine's) reordered all of a faulted W, 9.4 MB
 * for one of layer4's 512 channels, at every batch of a trial (0.75% of
 * resnet18's campaign at batch 4; docs/perf/trials/resnet18.md, h48-rows) */
static void reorder_weights(const bf__conv_params *cp, const float *restrict wt, float *restrict wr, int64_t ch)
{
    const int64_t r0 = ch < 0 ? 0 : ch, r1 = ch < 0 ? cp->m : ch + 1;
    if (cp->ksp == 1) {   /* one tap: K is the channels in order, W as stored */
        memcpy(wr + r0 * cp->kc, wt + r0 * cp->kc, sizeof(float) * (size_t)((r1 - r0) * cp->kc));
        return;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (reorder_blocks16(cp, wt, wr, r0, r1)) return;
#endif
    for (int64_t j = r0; j < r1; j++) {
        const float *src = wt + j * cp->kc;
        float *dst = wr + j * cp->kc;
        for (int64_t base = 0; base < cp->cg; base += BF__CONV_CBLOCK) {
            int64_t width = cp->cg - base < BF__CONV_CBLOCK ? cp->cg - base : BF__CONV_CBLOCK;
            const float *sb = src + base * cp->ksp;
            float *db = dst + base * cp->ksp;
            for (int64_t tap = 0; tap < cp->ksp; tap++, db += width)
                for (int64_t c = 0; c < width; c++) db[c] = sb[c * cp->ksp + tap];
        }
    }
}

/* Im2col for nb images at a time, one sgemm per group, then bias added last
 * (as oneDNN does) while scattering into NCHW. ch >= 0: output channel ch
 * only, its row of the product alone (bf__sgemm gives it the same bits). */
void bf__conv_im2col(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                        const bf__act *act, float *y, void *scratch, int64_t ch)
{
    float *wr = scratch, *cols = wr + cp->off_cols, *tmp = wr + cp->off_tmp;
    int kc = (int)cp->kc;
    reorder_weights(cp, wt, wr, ch);
    int64_t g0 = ch < 0 ? 0 : ch / cp->mg, g1 = ch < 0 ? cp->group : g0 + 1;
    int64_t j0 = ch < 0 ? 0 : ch % cp->mg, nj = ch < 0 ? cp->mg : 1;
    for (int64_t n0 = 0; n0 < cp->n; n0 += cp->nb) {
        int64_t nb = cp->n - n0 < cp->nb ? cp->n - n0 : cp->nb, ld = nb * cp->osp;
        for (int64_t g = g0; g < g1; g++) {
            for (int64_t i = 0; i < nb; i++)
                im2col(cp, x + ((n0 + i) * cp->c + g * cp->cg) * cp->isp, cols, i * cp->osp, ld);
            bf__sgemm_level(cp->simd, 0, 0, (int)nj, (int)ld, kc, 1.0f, wr + (g * cp->mg + j0) * cp->kc, kc, cols,
                            (int)ld, 0, tmp, (int)ld);
            for (int64_t j = j0; j < j0 + nj; j++) {
                float bv = bias ? bias[g * cp->mg + j] : 0.0f;
                for (int64_t i = 0; i < nb; i++) {
                    const float *restrict src = tmp + (j - j0) * ld + i * cp->osp;
                    float *restrict dst = y + ((n0 + i) * cp->m + g * cp->mg + j) * cp->osp;
                    for (int64_t o = 0; o < cp->osp; o++) dst[o] = src[o] + bv;
                    bf__act_pass(act, dst, cp->osp);
                }
            }
        }
    }
}

/* The im2col product of one image, without the column matrix where it can
 * (bf__sgemm_packed): for a stride-1, undilated 2-D convolution, each image's
 * input planes are zero-padded once, and a panel's row for input channel c
 * and tap (kh, kw) is then 16 consecutive floats of the padded plane
 * (columns of one output row), or a few such runs side by side where the
 * panel's 16 output positions wrap to the next output row. The product
 * never writes the column matrix out (for a 3x3 layer of resnet18, 7 MB per
 * image, written, read back and packed) yet multiplies the very same
 * panels, so every output keeps the chain the column matrix gave it. */
typedef struct conv_pack {
    const float *xp;            /* the image's padded planes of the group */
    int64_t plane, wp;          /* floats per padded plane, per padded row */
    int64_t cg, ksp, kw_n, ow_n;
    int64_t sh, dh, dw;         /* conv_pack_s2's: vertical stride, dilations */
    int64_t osp, img;           /* columns of an image; floats of an image's padded planes */
    int64_t cols, ahead;        /* conv_pack_s2 in place: the product's columns, panels prefetched ahead (0: none) */
} conv_pack;

/* Panels ahead whose input conv_pack_s2 prefetches when it reads x in
 * place: 2 to 8 measured alike and better than none or 16 (the next
 * group's) on resnet18's downsamples of 32 images (docs/perf/conv.md,
 * h22-conv) */
#define S2_AHEAD 4

#if defined(__x86_64__) && defined(__GNUC__)
/* panel row (c, kh, kw) = xp[c * plane + kh * wp + kw + shift(j) + j] for
 * the panel's columns j, where shift is the run's: its first output
 * position's offset in the padded plane, less its first column. Columns of
 * run q are loaded with run q's mask; masked lanes are neither read nor
 * kept (a masked load gives 0), so no run reads outside the planes. */
__attribute__((target("avx2"))) static void conv_pack_panel(const void *ctx, int j0, int nr, int k, float *panel)
{
    enum { NR = 16 };
    const conv_pack *pk = ctx;
    int64_t shift[NR];
    __m256i m0[NR], m1[NR];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), eight = _mm256_set1_epi32(8);
    int ns = 0;
    for (int j = 0; j < nr;) {
        int64_t o = (j0 + j) % pk->osp, ow = o % pk->ow_n, oh = o / pk->ow_n;
        int len = pk->ow_n - ow < nr - j ? (int)(pk->ow_n - ow) : nr - j;
        shift[ns] = (j0 + j) / pk->osp * pk->img + oh * pk->wp + ow - j;
        __m256i lo = _mm256_set1_epi32(j - 1), hi = _mm256_set1_epi32(j + len);
        m0[ns] = _mm256_and_si256(_mm256_cmpgt_epi32(lane, lo), _mm256_cmpgt_epi32(hi, lane));
        __m256i l8 = _mm256_add_epi32(lane, eight);
        m1[ns] = _mm256_and_si256(_mm256_cmpgt_epi32(l8, lo), _mm256_cmpgt_epi32(hi, l8));
        ns++;
        j += len;
    }
    int whole = ns == 1 && nr == NR;
    float *row = panel;
    for (int64_t cb = 0; cb < pk->cg; cb += BF__CONV_CBLOCK) {
        int64_t width = pk->cg - cb < BF__CONV_CBLOCK ? pk->cg - cb : BF__CONV_CBLOCK;
        for (int64_t tap = 0; tap < pk->ksp; tap++) {
            const float *base = pk->xp + cb * pk->plane + tap / pk->kw_n * pk->wp + tap % pk->kw_n;
            for (int64_t c = 0; c < width; c++, row += NR) {
                const float *src = base + c * pk->plane;
                if (whole) {
                    _mm256_storeu_ps(row, _mm256_loadu_ps(src + shift[0]));
                    _mm256_storeu_ps(row + 8, _mm256_loadu_ps(src + shift[0] + 8));
                    continue;
                }
                __m256 v0 = _mm256_setzero_ps(), v1 = _mm256_setzero_ps();
                for (int q = 0; q < ns; q++) {
                    v0 = _mm256_or_ps(v0, _mm256_maskload_ps(src + shift[q], m0[q]));
                    v1 = _mm256_or_ps(v1, _mm256_maskload_ps(src + shift[q] + 8, m1[q]));
                }
                _mm256_storeu_ps(row, v0);
                _mm256_storeu_ps(row + 8, v1);
            }
        }
    }
    (void)k;
    assert(row == panel + (int64_t)k * NR);
}

/* Rows of a product's later panels asked for ahead (x read in place):
 * each run's first and last floats, and the one 16 on, of the panel
 * `ahead` panels on (conv_pack_s2 says why); their offsets from a
 * channel's row to pfo, their count returned */
static int s2_ahead(const conv_pack *pk, int j0, int64_t *pfo)
{
    enum { NR = 16 };
    int npf = 0;
    for (int64_t jp = j0 + pk->ahead * NR, j = 0; pk->ahead > 0 && j < NR && jp + j < pk->cols;) {
        int64_t o = (jp + j) % pk->osp, ow = o % pk->ow_n, oh = o / pk->ow_n;
        int64_t len = pk->ow_n - ow < NR - j ? pk->ow_n - ow : NR - j;
        int64_t at = (jp + j) / pk->osp * pk->img + oh * pk->sh * pk->wp + 2 * ow;
        if (pk->cols - jp - j < len) len = pk->cols - jp - j;
        pfo[npf++] = at, pfo[npf++] = at + 2 * len - 2;
        if (2 * len - 1 > NR) pfo[npf++] = at + NR;
        j += len;
    }
    return npf;
}

/* conv_pack_s2 (below) on AVX2: the same panel, float for float. Run q's
 * lanes l read float 2 l of the 32 from its first input less 2 j (its
 * first lane): four masked loads of 8 that read only the run's 2 len - 1
 * floats (a masked-off float gives +0), the even floats of each pair of
 * loads put in order (a shuffle and a permute: moves only), and the runs
 * OR-ed (each lane is one run's float or +0 from every other). The one
 * run of 16 outputs reads its first 24 floats by plain loads. Without it
 * a stride-2 Conv on AVX2 went through im2col's column matrix
 * (docs/perf/conv/h42.md, h42-s2). */
__attribute__((target("avx2"))) static inline __m256 s2_even(__m256 a, __m256 b)
{
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
}

/* The panel rows' channel rows in the column matrix's K order (blocks of
 * 16 channels, tap-major inside: bf__conv_krow), walked one row at a time:
 * s2_at is row p's (channel c at tap (kh, kw)) first float in the planes */
typedef struct s2_walk {
    int64_t cb, tap, c, width;
    const float *base;   /* the block's first channel at the tap */
} s2_walk;

static inline void s2_tap(const conv_pack *pk, s2_walk *w)
{
    w->width = pk->cg - w->cb < BF__CONV_CBLOCK ? pk->cg - w->cb : BF__CONV_CBLOCK;
    w->base = pk->xp + w->cb * pk->plane + w->tap / pk->kw_n * pk->dh * pk->wp + w->tap % pk->kw_n * pk->dw;
}

static inline const float *s2_at(const conv_pack *pk, const s2_walk *w) { return w->base + w->c * pk->plane; }

static inline void s2_step(const conv_pack *pk, s2_walk *w)
{
    if (++w->c < w->width) return;
    w->c = 0;
    if (++w->tap == pk->ksp) w->tap = 0, w->cb += BF__CONV_CBLOCK;
    if (w->cb < pk->cg) s2_tap(pk, w);
}

__attribute__((target("avx2"))) static void conv_pack_s2_avx2(const void *ctx, int j0, int nr, int k, float *panel)
{
    enum { NR = 16 };
    const conv_pack *pk = ctx;
    int64_t shift[NR];
    __m256i msk[NR][4];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int ns = 0;
    for (int j = 0; j < nr;) {
        int64_t o = (j0 + j) % pk->osp, ow = o % pk->ow_n, oh = o / pk->ow_n;
        int len = pk->ow_n - ow < nr - j ? (int)(pk->ow_n - ow) : nr - j, span = 2 * len - 1;
        shift[ns] = (j0 + j) / pk->osp * pk->img + oh * pk->sh * pk->wp + 2 * ow - 2 * j;
        __m256i lo = _mm256_set1_epi32(2 * j - 1), hi = _mm256_set1_epi32(2 * j + span);
        for (int v = 0; v < 4; v++) {
            __m256i f = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * v));   /* the floats' indices */
            msk[ns][v] = _mm256_and_si256(_mm256_cmpgt_epi32(f, lo), _mm256_cmpgt_epi32(hi, f));
        }
        ns++;
        j += len;
    }
    int whole = ns == 1 && nr == NR;
    int64_t pfo[3 * NR];
    int npf = s2_ahead(pk, j0, pfo);
    s2_walk it = {0};
    s2_tap(pk, &it);
    float *row = panel;
    for (int p = 0; p < k; p++, row += NR, s2_step(pk, &it)) {
        const float *src = s2_at(pk, &it);
        for (int q = 0; q < npf; q++) _mm_prefetch((const char *)(src + pfo[q]), _MM_HINT_T0);
        if (whole) {
            const float *r = src + shift[0];
            _mm256_storeu_ps(row, s2_even(_mm256_loadu_ps(r), _mm256_loadu_ps(r + 8)));
            _mm256_storeu_ps(row + 8, s2_even(_mm256_loadu_ps(r + 16), _mm256_maskload_ps(r + 24, msk[0][3])));
            continue;
        }
        __m256 v0 = _mm256_setzero_ps(), v1 = _mm256_setzero_ps();
        for (int q = 0; q < ns; q++) {
            const float *r = src + shift[q];
            v0 = _mm256_or_ps(v0, s2_even(_mm256_maskload_ps(r, msk[q][0]), _mm256_maskload_ps(r + 8, msk[q][1])));
            v1 = _mm256_or_ps(v1, s2_even(_mm256_maskload_ps(r + 16, msk[q][2]), _mm256_maskload_ps(r + 24, msk[q][3])));
        }
        _mm256_storeu_ps(row, v0);
        _mm256_storeu_ps(row + 8, v1);
    }
    assert(it.cb >= pk->cg);   /* k rows: every channel block's taps */
}

/* conv_pack_panel for a horizontal stride of 2 (AVX-512): panel row (c, kh,
 * kw) holds, in column j, padded input (oh * sh + kh * dh, 2 ow + kw * dw)
 * of channel c for the output (oh, ow) of column j0 + j, the float the
 * column matrix holds there (a tap in the padding: the plane's +0). Run q
 * of the panel's columns (j .. j + len, outputs of one row) needs the
 * 2 len - 1 floats from its first input: two masked loads of 16 (nothing
 * past them is read), then lane l takes float 2 (l - j) of the 32 (a
 * permute, which only moves values); lanes of no run, past nr, are 0. */
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl"))) static void
conv_pack_s2(const void *ctx, int j0, int nr, int k, float *panel)
{
    enum { NR = 16 };
    const conv_pack *pk = ctx;
    int64_t shift[NR];
    __m512i idx[NR];
    __mmask16 keep[NR], lo[NR], hi[NR];
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    int ns = 0;
    for (int j = 0; j < nr;) {
        int64_t o = (j0 + j) % pk->osp, ow = o % pk->ow_n, oh = o / pk->ow_n;
        int len = pk->ow_n - ow < nr - j ? (int)(pk->ow_n - ow) : nr - j, span = 2 * len - 1;
        shift[ns] = (j0 + j) / pk->osp * pk->img + oh * pk->sh * pk->wp + 2 * ow;
        lo[ns] = (__mmask16)(span >= NR ? 0xffffu : (1u << span) - 1u);
        hi[ns] = (__mmask16)(span > NR ? (1u << (span - NR)) - 1u : 0u);
        keep[ns] = (__mmask16)(((1u << len) - 1u) << j);
        idx[ns] = _mm512_sub_epi32(even, _mm512_set1_epi32(2 * j));   /* lanes outside keep: unused */
        ns++;
        j += len;
    }
    /* In place (x itself, which a pass reads from memory) the loads miss
     * nearly every line: each panel row is another channel's plane, more
     * streams than the hardware prefetcher follows, and sgemm_panels
     * gathers a group of panels in one burst, so the misses wait in turn.
     * So each channel's row asks for the lines of the panel `ahead`
     * panels on: each of its runs' first and last floats, and the one 16
     * on (a run spans at most 31 floats: three lines). Hints: no value
     * moves, and none is asked for past the product's columns. */
    int64_t pfo[3 * NR];
    int npf = s2_ahead(pk, j0, pfo);
    float *row = panel;
    for (int64_t cb = 0; cb < pk->cg; cb += BF__CONV_CBLOCK) {
        int64_t width = pk->cg - cb < BF__CONV_CBLOCK ? pk->cg - cb : BF__CONV_CBLOCK;
        for (int64_t tap = 0; tap < pk->ksp; tap++) {
            const float *base = pk->xp + cb * pk->plane + tap / pk->kw_n * pk->dh * pk->wp + tap % pk->kw_n * pk->dw;
            for (int64_t c = 0; c < width; c++, row += NR) {
                const float *src = base + c * pk->plane;
                for (int q = 0; q < npf; q++) _mm_prefetch((const char *)(src + pfo[q]), _MM_HINT_T0);
                __m512 v = _mm512_setzero_ps();
                for (int q = 0; q < ns; q++) {
                    __m512 a = _mm512_maskz_loadu_ps(lo[q], src + shift[q]);
                    __m512 b = _mm512_maskz_loadu_ps(hi[q], src + shift[q] + NR);
                    v = _mm512_or_ps(v, _mm512_maskz_permutex2var_ps(keep[q], a, idx[q], b));
                }
                _mm512_storeu_ps(row, v);
            }
        }
    }
    (void)k;
    assert(row == panel + (int64_t)k * NR);
}
#endif

/* The zero-padded planes of ni images of one group: plane (i, c) at
 * buf + (i cg + c) plane holds channel c of image i of xg (images c_all
 * channels apart) at rows pb[1].., columns pb[2].., +0 everywhere else:
 * the floats a memset of the planes then a memcpy per input row gave, the
 * same bits. That memset wrote every inside float twice, and resnet18's
 * rows of 7-56 floats made a memcpy call each (over 200,000 a pass of 4
 * images). On AVX-512 each padded row is instead written once, 16 floats
 * at a time: a load of the input row (masked where a chunk meets the
 * padding: those lanes read nothing and give +0) and a store, no call;
 * 1.2-1.3x the old copy with the input in memory, as in the pass, 1.4-2.1x
 * with it in cache
 * (docs/perf/conv.md, h16-r18f). Rows of more than 16 x FILL_CHUNKS
 * floats keep the copy below. */
enum { FILL_CHUNKS = 32 };
/* How far ahead (floats) fill_planes_512 asks for its input: 8 lines. The
 * input (the last step's output, in memory at resnet18's sizes) is one
 * sequential stream, yet perf put 46% of the fill's samples on its first
 * load of each row; asked for ahead, the fill's samples fell 35-45% (256
 * and 512 about the same; docs/perf/conv/h33.md, h33-epi). A hint: the
 * same bits, and a line past the input's end is never read */
#ifndef FILL_PF
#define FILL_PF 128
#endif

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl"))) static void
fill_planes_512(const bf__window *w, const float *xg, int64_t ni, int64_t cg, int64_t c_all, int64_t isp, float *buf,
                int64_t plane)
{
    int64_t ih_n = w->in[1], iw_n = w->in[2], pt = w->pb[1], pl = w->pb[2];
    int64_t wp = iw_n + pl + w->pe[2], hp = ih_n + pt + w->pe[1], nch = (wp + 15) / 16;
    __mmask16 ld[FILL_CHUNKS], st[FILL_CHUNKS];
    for (int64_t k = 0; k < nch; k++) {
        int64_t p = 16 * k, lo = pl - p, hi = pl + iw_n - p, end = wp - p;   /* lanes [lo, hi) are input */
        lo = lo < 0 ? 0 : lo > 16 ? 16 : lo;
        hi = hi < 0 ? 0 : hi > 16 ? 16 : hi;
        end = end > 16 ? 16 : end;
        uint32_t mh = (uint32_t)((1ull << hi) - 1), ml = (uint32_t)((1ull << lo) - 1);
        ld[k] = (__mmask16)(hi > lo ? mh & ~ml : 0u);
        st[k] = (__mmask16)((1ull << end) - 1);
    }
    const __m512 z = _mm512_setzero_ps();
    for (int64_t i = 0; i < ni; i++)
        for (int64_t c = 0; c < cg; c++) {
            const float *src = xg + i * c_all * isp + c * isp;
            float *dst = buf + (i * cg + c) * plane;
            for (int64_t r = 0; r < hp; r++, dst += wp) {
                int64_t ih = r - pt;
                if (ih < 0 || ih >= ih_n) {
                    for (int64_t k = 0; k < nch; k++) _mm512_mask_storeu_ps(dst + 16 * k, st[k], z);
                    continue;
                }
                /* lane l of chunk k is input column 16 k + l - pl; a chunk
                 * all inside the row by a plain load: on the AMD Zen 5 host a
                 * masked load off 64-byte alignment (the row read from one
                 * float before it, each load across two lines) ran at about
                 * a third of a plain one's rate, 62 against 24 us an image
                 * of 3 x 224 x 224 (docs/perf/mobilenet.md, h20-conv) */
                const float *row = src + ih * iw_n - pl;
                for (int64_t k = 0; k < nch; k++) {
                    _mm_prefetch((const char *)(row + 16 * k + FILL_PF), _MM_HINT_T0);
                    __m512 v = ld[k] == (__mmask16)0xffffu ? _mm512_loadu_ps(row + 16 * k)
                                                           : _mm512_maskz_loadu_ps(ld[k], row + 16 * k);
                    _mm512_mask_storeu_ps(dst + 16 * k, st[k], v);
                }
            }
        }
}
#endif

/* 1 where bf__conv_fill_planes writes the planes whole, else the caller
 * zeroes them once and copies their insides row by row */
int bf__conv_fill_planes_ok(const bf__conv_params *cp)
{
    const bf__window *w = &cp->w;
#if defined(__x86_64__) && defined(__GNUC__)
    return cp->simd >= BF_SGEMM_AVX512 && w->in[2] + w->pb[2] + w->pe[2] <= 16 * FILL_CHUNKS;
#else
    (void)w;
    return 0;
#endif
}

void bf__conv_copy_planes(const bf__conv_params *cp, const float *xg, int64_t ni, float *buf, int64_t plane)
{
    const bf__window *w = &cp->w;
    int64_t wp = w->in[2] + w->pb[2] + w->pe[2];
    for (int64_t i = 0; i < ni; i++)
        for (int64_t c = 0; c < cp->cg; c++)
            for (int64_t ih = 0; ih < w->in[1]; ih++)
                memcpy(buf + (i * cp->cg + c) * plane + (ih + w->pb[1]) * wp + w->pb[2],
                       xg + i * cp->c * cp->isp + c * cp->isp + ih * w->in[2], sizeof(float) * (size_t)w->in[2]);
}

void bf__conv_fill_planes(const bf__conv_params *cp, const float *xg, int64_t ni, float *buf, int64_t plane)
{
#if defined(__x86_64__) && defined(__GNUC__)
    fill_planes_512(&cp->w, xg, ni, cp->cg, cp->c, cp->isp, buf, plane);
#else
    (void)cp, (void)xg, (void)ni, (void)buf, (void)plane;
#endif
}

size_t bf__conv_reorder_floats(const bf__conv_params *cp)
{
    return cp->path == BF__CONV_IM2COL && cp->simd == BF_SGEMM_AVX2 && cp->ksp > 1 && !cp->bcast && !cp->stem
               ? (size_t)(cp->m * cp->kc)
               : 0;
}

int bf__conv_reorder(const bf__conv_params *cp, const float *wt, float *out)
{
    if (!bf__conv_reorder_floats(cp)) return 0;
    reorder_weights(cp, wt, out, -1);
    return 1;
}

/* The product of one image (nb = 1) written straight into y, the bias
 * added in the kernel's epilogue: y = s + bias, the old scatter's
 * expression (+ 0 without a bias, as there, which turns a -0 sum into
 * +0). Panels from the padded planes where the shape allows, from the
 * column matrix otherwise. 0 when bf__sgemm has no kernel for it: the
 * caller then runs conv_im2col, which gives the same bits (with act->res
 * set, y is then to be computed again bare and the Add done after it).
 * act->res (op.h): a residual Add, laid out as y, added in the kernel's
 * epilogue after the bias (a plane at a time, in cache, where several
 * images share a product), before the activation. */
int bf__conv_packed(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                    const bf__act *act, float *y, void *scratch, int64_t ch, bf__psum *ps)
{
    return bf__conv_packed_wpk(cp, x, wt, NULL, bias, act, y, scratch, ch, ps, NULL);
}

/* A list of positions (bf__cpos), ascending: the end of those from `from`
 * on that lie before output position `end` (a call's images' end) */
static int64_t cpos_end(const bf__cpos *cpos, int64_t from, int64_t end)
{
    while (from < cpos->n && cpos->q[from] < end) from++;
    return from;
}

int bf__conv_packed_wpk(const bf__conv_params *cp, const float *x, const float *wt, const float *wpk,
                        const float *bias, const bf__act *act, float *y, void *scratch, int64_t ch, bf__psum *ps,
                        bf__cpos *cpos)
{
    const bf__window *w = &cp->w;
    if (cp->simd < BF_SGEMM_AVX2 || cp->nb != 1) return 0;
    int64_t wp = w->in[2] + w->pb[2] + w->pe[2], plane = bf__conv_padded_plane(w);
    size_t room = cp->scratch_floats - cp->off_cols;
    /* horizontal stride 2: panels from the padded planes too (conv_pack_s2's
     * permutes, conv_pack_s2_avx2's shuffles), or a first Conv's kernel */
    int s2 = !bf__conv_padded_ok(w) && bf__conv_strided_ok(w);
    int padded = bf__conv_padded_ok(w) || s2;
    /* several images side by side in one product where a map is small:
     * more columns, fewer padding lanes in the last panels */
    int64_t imgs = padded ? bf__conv_packed_images(cp) : 1;
    if (padded && bf__conv_packed_floats(cp, imgs) > room) imgs = 1;
    if (padded && bf__conv_packed_floats(cp, 1) > room) padded = 0;
#if !(defined(__x86_64__) && defined(__GNUC__))
    padded = 0, imgs = 1;
#endif
    /* stride 1, one image a product, AVX-512: no panels at all, the product
     * straight off the planes (linalg_conv_planes.c), the same bits */
    int direct = padded && !s2 && imgs == 1 && bf__conv_planes_ok(cp) && bf__conv_planes_floats(cp) <= room;
    /* the output channels in the lanes, the input broadcast (linalg_conv_bcast.c),
     * where prepare chose it for the shape: whole steps only, its own images a call */
    size_t bfl = (bf__conv_bcast_floats(cp) + 15) & ~(size_t)15;
    int64_t bimgs = bf__conv_bcast_images(cp);
    int bcast = padded && ch < 0 && cp->bcast &&
                (size_t)((bimgs * cp->cg * plane + 15) & ~(int64_t)15) + bfl + (size_t)cp->mg + 16 <= room;
    if (bcast) imgs = bimgs;
    if (!bcast) cpos = NULL;   /* some positions alone (op.h): the bcast kernel's own list */
    /* a first Conv (linalg_conv_stem.c), where prepare chose it: whole steps, one image a call, no residual */
    size_t sfl = (bf__conv_stem_floats(cp) + 15) & ~(size_t)15;
    int stem = padded && !bcast && ch < 0 && cp->stem && !(act && act->res) &&
               (size_t)((cp->cg * plane + 15) & ~(int64_t)15) + sfl + (size_t)cp->mg + 16 <= room;
    if (stem) imgs = 1, direct = 0;
    /* stride 2 and no padding (resnet18's 1x1/2 downsamples): the padded
     * planes would be x's own channels, of which the panels read every
     * other row; so the panels are gathered from x in place, nothing
     * zeroed or copied (the same floats: the same bits). Several images
     * a product only where x lays them out as the planes would (one group). */
    int inplace = s2 && !bcast && !stem && w->pb[1] == 0 && w->pe[1] == 0 && w->pb[2] == 0 && w->pe[2] == 0 &&
                  (imgs == 1 || cp->group == 1);
    float *wr = scratch, *buf = wr + cp->off_cols;
    /* the weights in the panels' K order: W itself for one tap, the copy
     * made once where the plan passed it (bf__conv_reorder: the step's
     * wpk is then that copy), else reordered here into the scratch */
    const float *wa = cp->ksp == 1 ? wt : wpk && bf__conv_reorder_floats(cp) ? wpk : wr;
    int64_t planes = (imgs * cp->cg * plane + 15) & ~(int64_t)15, ldt = imgs * cp->osp;
    float *tmp = buf + planes;   /* the product of several images, before it is spread over y */
    float *zeros = padded ? tmp + (imgs > 1 ? (cp->mg * ldt + 15) & ~(int64_t)15 : 0) : wr + cp->off_tmp;
    if (bcast) direct = 0, zeros = tmp + bfl;
    if (stem) zeros = tmp + sfl;
    if (direct) zeros = bf__conv_planes_zeros(cp, buf);
    if (!bcast && !stem && wa == wr) reorder_weights(cp, wt, wr, ch);   /* bf__conv_bcast packs W as it goes */
    if (!bias) memset(zeros, 0, sizeof(float) * (size_t)cp->mg);
    /* the planes written whole per image where conv_fill_planes can, else
     * zeroed here once and their insides copied (imgs never exceeds the
     * batch, so the first product's planes are all written either way) */
    int filled = padded && !inplace && bf__conv_fill_planes_ok(cp);
    if (padded && !inplace && !filled) memset(buf, 0, sizeof(float) * (size_t)(imgs * cp->cg * plane));
    int64_t g0 = ch < 0 ? 0 : ch / cp->mg, g1 = ch < 0 ? cp->group : g0 + 1, sk = 0;   /* sk: cpos_end */
    int64_t j0 = ch < 0 ? 0 : ch % cp->mg, nj = ch < 0 ? cp->mg : 1;
    int kc = (int)cp->kc, osp = (int)cp->osp;
    for (int64_t n = 0; n < cp->n; n += imgs)
        for (int64_t g = g0; g < g1; g++) {
            const float *xg = x + (n * cp->c + g * cp->cg) * cp->isp;
            const float *a = wa + (g * cp->mg + j0) * cp->kc, *bv = bias ? bias + g * cp->mg + j0 : zeros;
            int64_t yoff = (n * cp->m + g * cp->mg + j0) * cp->osp;
            float *yg = y + yoff;
            bf__act ka;
            const bf__act *kact = bf__act_res_at(act, yoff, &ka);
            if (!padded) {
                im2col(cp, xg, buf, 0, osp);
                bf__sgemm_bias(cp->simd, (int)nj, osp, kc, a, kc, buf, osp, bv, kact, yg, osp);
                continue;
            }
#if defined(__x86_64__) && defined(__GNUC__)
            int64_t ni = cp->n - n < imgs ? cp->n - n : imgs;
            int64_t s0 = sk, s1 = cpos ? cpos_end(cpos, sk, (n + ni) * cp->osp) : sk;
            if (cpos && g + 1 == g1) sk = s1;
            if (cpos && s1 == s0) continue;   /* none in these images: no planes, no call */
            if (filled) bf__conv_fill_planes(cp, xg, ni, buf, plane);
            /* the borders stay zero from the memset: only the inside changes per image */
            if (!inplace && !filled) bf__conv_copy_planes(cp, xg, ni, buf, plane);
            if (direct) {
                bf__conv_planes(cp, a, nj, buf, bv, kact, yg);
                continue;
            }
            if (stem) {
                bf__conv_stem(cp, wt + g * cp->mg * cp->kc, buf, tmp, bv, kact, yg);
                continue;
            }
            if (bcast) {
                bf__conv_bcast(cp, wt + g * cp->mg * cp->kc, wpk ? wpk + g * cp->mg * cp->kc : NULL, ni, buf, tmp, bv,
                               kact, yg, cp->group == 1 ? ps : NULL, n, cpos ? cpos->q + s0 : NULL,
                               cpos ? s1 - s0 : 0);
                continue;
            }
            conv_pack pk = {inplace ? xg : buf, plane, wp, cp->cg, cp->ksp, w->k[2], w->out[2], w->s[1], w->d[1], w->d[2],
                            cp->osp, cp->cg * plane, ni * cp->osp, inplace ? S2_AHEAD : 0};
            float *yo = ni > 1 ? tmp : yg;
            int ldy = ni > 1 ? (int)(ni * osp) : osp;
            /* several images: the residual is laid out as y, not as the product */
            int res_after = ni > 1 && act && act->res;
            if (!bf__sgemm_packed(cp->simd, (int)nj, (int)(ni * osp), kc, a, kc, s2 ? (cp->simd >= BF_SGEMM_AVX512 ? conv_pack_s2 : conv_pack_s2_avx2) : conv_pack_panel, &pk,
                                  bv, res_after ? NULL : kact, yo, ldy))
                return 0;
            /* row j of the product holds channel j of each image in turn:
             * copies only, the residual Add and activation first (the
             * plane in L1) where they are fused */
            for (int64_t i = 0; ni > 1 && i < ni; i++)
                for (int64_t j = 0; j < nj; j++) {
                    float *t = tmp + j * ldy + i * cp->osp;
                    if (res_after) bf__conv_res_plane(cp->simd, act, act->res + yoff + (i * cp->m + j) * cp->osp, t, cp->osp);
                    memcpy(yg + (i * cp->m + j) * cp->osp, t, sizeof(float) * (size_t)cp->osp);
                }
#endif
        }
    if (cpos) cpos->used = 1;
    return 1;
}

/* One output channel of a stride-1, undilated 2-D convolution without the
 * column matrix: each image's input planes zero-padded once, then the
 * taps' windows of them summed in the column matrix's row order
 * (bf__fma_windows), which is the chain bf__sgemm gives the channel's row
 * of the im2col product, padding zeros included. Far less memory traffic
 * than im2col for one channel's sake. 0 when the shape does not qualify or
 * the scratch is too small. */
int bf__conv_channel_windows(const bf__conv_params *cp, const float *x, const float *wt, const float *bias, float *y,
                                void *scratch, int64_t ch)
{
    const bf__window *w = &cp->w;
    if (w->in[0] != 1 || w->k[0] != 1 || w->out[0] != 1) return 0;
    for (int d = 1; d < 3; d++)
        if (w->s[d] != 1 || w->d[d] != 1) return 0;
    int64_t hp = w->in[1] + w->pb[1] + w->pe[1], wp = w->in[2] + w->pb[2] + w->pe[2], plane = hp * wp;
    if (w->out[1] != hp - w->k[1] + 1 || w->out[2] != wp - w->k[2] + 1) return 0;
    size_t need = cp->off_cols + (size_t)(cp->cg * plane) + 2 * (size_t)cp->kc + (size_t)cp->osp + 16;
    if (need > cp->scratch_floats) return 0;
    float *wr = scratch, *xp = wr + cp->off_cols, *acc = xp + cp->cg * plane;
    int64_t *off = (int64_t *)(acc + cp->osp + (((uintptr_t)(acc + cp->osp) & 7) ? 1 : 0));
    int64_t g = ch / cp->mg;
    const float *wrow = wt + ch * cp->kc;
    float *wk = wr;   /* the channel's weights in the column matrix's row order */
    for (int64_t c = 0; c < cp->cg; c++)
        for (int64_t kh = 0; kh < w->k[1]; kh++)
            for (int64_t kw = 0; kw < w->k[2]; kw++) {
                int64_t tap = kh * w->k[2] + kw, p = bf__conv_krow(cp, c, tap);
                wk[p] = wrow[c * cp->ksp + tap];
                off[p] = c * plane + kh * wp + kw;
            }
    memset(xp, 0, sizeof(float) * (size_t)(cp->cg * plane));
    float bv = bias ? bias[ch] : 0.0f;
    for (int64_t n = 0; n < cp->n; n++) {
        for (int64_t c = 0; c < cp->cg; c++) {
            const float *src = x + (n * cp->c + g * cp->cg + c) * cp->isp;
            /* plain loops: rows of a few floats, where a memcpy call costs more */
            for (int64_t ih = 0; ih < w->in[1]; ih++) {
                float *restrict dst = xp + c * plane + (ih + w->pb[1]) * wp + w->pb[2];
                const float *restrict row = src + ih * w->in[2];
                for (int64_t iw = 0; iw < w->in[2]; iw++) dst[iw] = row[iw];
            }
        }
        memset(acc, 0, sizeof(float) * (size_t)cp->osp);
        bf__fma_windows(cp->simd, wk, off, (int)cp->kc, xp, (int)w->out[1], (int)w->out[2], wp, acc);
        float *dst = y + (n * cp->m + ch) * cp->osp;
        for (int64_t o = 0; o < cp->osp; o++) dst[o] = acc[o] + bv;
    }
    return 1;
}
