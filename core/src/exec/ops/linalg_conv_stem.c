/* A network's first Conv, few input channels and a short K (resnet18's
 * 7x7/2 3 -> 64, K = 147; mobilenet_v2's 3x3/2 3 -> 32, K = 27), on
 * AVX-512 (and AVX2, 8 lanes: st8_block below) with the output channels
 * in the vector lanes and the input broadcast, as linalg_conv_bcast.c does for the deep Convs, but with the
 * whole K in registers at once and the outputs stored through 16 x 16
 * transposes instead of scattered (docs/perf/conv.md, "The stem and the
 * max pool", h15-r18s).
 *
 * Why: bf__conv_packed gathers the stem's panels (every other float of
 * the padded planes: two loads and a permute per 16 floats) for every
 * 16 positions and runs its 12-row blocks over 64 rows (5 of 12, then 4);
 * linalg_conv_bcast.c scatters each 16 channels of a position to 16
 * planes, which at K = 147 costs more than the chain (0.60-0.77x there).
 * Here a block is NP positions x NV vectors of 16 output channels (12 x 2,
 * or 16 x 1 for a last 16 channels; ST_NV says why not 6 x 4): per k term, NV loads of the packed weights, NP
 * broadcasts of the input float each position reads at that k, NP x NV
 * fused multiply-adds, the whole chain in registers. Tiles of 48
 * consecutive output positions of one image gather the blocks' results
 * as [position][channel]; each 16 x 16 piece is transposed and stored as
 * 16 positions of one channel, contiguous in NCHW.
 *
 * The chain is bf__conv_packed's: s = +0, then s = fma(w, x, s) over the
 * column matrix's rows in their order (bf__conv_krow), the padded planes'
 * zeros included; then (1 * s) + bias, then Relu's or Clip's comparisons
 * (linalg_conv_bcast.c's epilogue, operands in the same order). No
 * residual Add (prepare's dispatcher leaves those to the other paths), and
 * only whole steps. */
#include <stdint.h>
#include <string.h>

#include "linalg_window.h"
#include "sgemm.h"
#include "transpose8.h"

#define ST_TILE 48       /* positions a tile: a multiple of every block's NP and of 16 */
#define ST_KMAX 160      /* the deepest K it takes: a row block's weights (K x 32 floats, 20 KiB) in L1 */
/* Vectors of 16 channels a row block: 2 (12 positions x 2 vectors). With 4
 * (6 x 4, fewer loads per multiply-add) resnet18's stem ran 0.81-0.88x
 * bf__conv_packed's, against 1.32-1.33x with 2 (bench/conv_bcast.c, 4
 * images): its weights, 147 x 64 floats (37 KiB), left L1 to the tile
 * and the input and were read from L2 for every block; 147 x 32 stay. 1
 * (16 x 1): 1.24x there, and 1.15-1.19x on mobilenet_v2's stem against
 * 1.28-1.29x with 2. */
#define ST_NV 2
/* How far ahead (floats) st_store asks for each of its 16 channel planes'
 * next lines: 16 store streams, more than the prefetchers follow (the
 * stores' stalls were most of st_store's samples on mobilenet_v2, whose
 * stem writes NCHW; resnet18's band writes channels-last). Hints only:
 * st_store's samples -30% (docs/perf/conv/h33.md, h33-epi) */
#ifndef ST_YPF
#define ST_YPF 64
#endif
#define ST_TW (16 * ST_NV)   /* floats a tile row: a position's channels of the row block */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))

typedef struct stem_job {
    const float *xp, *bias;  /* the image's padded planes; the row block's bias */
    const bf__act *act;      /* NULL: none (never a residual) */
    const int32_t *off;      /* k term p's offset from a position's first float */
    int64_t kc, osp, ow, sh, sw, wp;
    const float *xlast;      /* the image's last position's first float (st8_block's positions past the end) */
} stem_job;

/* positions q0 .. q0 + NP (those past the image's last read its last one,
 * their rows of the tile never stored), channels of the row block's NV
 * vectors (weights wb: [k][16 NV]); the results to tile rows (q0 - t0).
 * SW 0: any positions, a pointer each; SW 1 or 2: the NP positions in one
 * output row at that horizontal stride, so the broadcasts read one
 * pointer at constant displacements (NP pointers found no registers) */
#define ST_BLOCK(NP, NV, SW)                                                                                         \
    AVX512 static void st_##NP##_##NV##_##SW(const stem_job *j, const float *wb, int64_t q0, float *tile)            \
    {                                                                                                                \
        __m512 s[NP][NV];                                                                                            \
        const float *xb[NP];                                                                                         \
        _Pragma("GCC unroll 16") for (int i = 0; i < NP; i++) {                                                      \
            int64_t q = q0 + i < j->osp ? q0 + i : j->osp - 1;                                                       \
            xb[i] = j->xp + q / j->ow * j->sh * j->wp + q % j->ow * j->sw;                                           \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = _mm512_setzero_ps();                      \
        }                                                                                                            \
        const float *x0 = xb[0];                                                                                     \
        const float *wk = wb;                                                                                        \
        for (int64_t p = 0; p < j->kc; p++, wk += 16 * NV) {                                                         \
            int64_t o = j->off[p];                                                                                   \
            __m512 wv[NV];                                                                                           \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) wv[v] = _mm512_loadu_ps(wk + 16 * v);               \
            _Pragma("GCC unroll 16") for (int i = 0; i < NP; i++) {                                                  \
                __m512 xv = _mm512_set1_ps(SW ? x0[o + i * SW] : xb[i][o]);                                          \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = _mm512_fmadd_ps(wv[v], xv, s[i][v]);  \
            }                                                                                                        \
        }                                                                                                            \
        const bf__act *act = j->act;                                                                                 \
        const __m512 one = _mm512_set1_ps(1.0f);                                                                     \
        const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);           \
        _Pragma("GCC unroll 16") for (int i = 0; i < NP; i++)                                                        \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                                   \
            __m512 t = _mm512_add_ps(_mm512_mul_ps(one, s[i][v]), _mm512_loadu_ps(j->bias + 16 * v));                \
            if (act) t = _mm512_min_ps(hi, _mm512_max_ps(lo, t));                                                    \
            _mm512_storeu_ps(tile + i * ST_TW + 16 * v, t);                                                             \
        }                                                                                                            \
    }
#define ST_BLOCKS(NP, NV) ST_BLOCK(NP, NV, 0) ST_BLOCK(NP, NV, 1) ST_BLOCK(NP, NV, 2)

ST_BLOCKS(12, 2)
ST_BLOCKS(16, 1)

/* one block of positions q0 .. (np of them: its NP): in one output row at
 * stride 1 or 2, the constant-displacement form */
#define ST_CALL(NP, NV) \
    (sw == 1 && row ? st_##NP##_##NV##_1 : sw == 2 && row ? st_##NP##_##NV##_2 : st_##NP##_##NV##_0)(j, wb, q0, tile)
AVX512 static int st_block(const stem_job *j, int nv, const float *wb, int64_t q0, float *tile)
{
    int np = nv == 2 ? 12 : 16;
    int64_t sw = j->sw;
    int row = q0 % j->ow + np <= j->ow && q0 + np <= j->osp;
    if (nv == 2) ST_CALL(12, 2);
    else ST_CALL(16, 1);
    return np;
}

/* tile rows 0 .. n (positions t0 ..), channels 16 v .. 16 v + 16 of the
 * row block: to y's planes (channel c at y + c osp), n <= 16 */
AVX512 static void st_store(const float *tile, int v, int64_t n, float *y, int64_t osp)
{
    __m512 r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(tile + i * ST_TW + 16 * v);
    bf__transpose16(r);
    __mmask16 m = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
    for (int c = 0; c < 16; c++) {
        _mm_prefetch((const char *)(y + (16 * v + c) * osp + ST_YPF), _MM_HINT_T0);
        _mm512_mask_storeu_ps(y + (16 * v + c) * osp, m, r[c]);
    }
}

/* tile rows 0 .. n (positions t0 ..), the row block's nv vectors of
 * channels: to y channels-last, position i's at y + i ps; moves only */
AVX512 static void st_store_cl(const float *tile, int nv, int64_t n, float *y, int64_t ps)
{
    for (int64_t i = 0; i < n; i++)
        for (int v = 0; v < nv; v++) _mm512_storeu_ps(y + i * ps + 16 * v, _mm512_loadu_ps(tile + i * ST_TW + 16 * v));
}

/* The same blocks on AVX2: vectors of 8 output channels, 16 registers. A
 * block of 6 positions x 2 vectors holds 12 sums, 2 weights and a
 * broadcast (15 of the 16): per k 8 loads (2 of weights, 6 broadcasts)
 * for 12 multiply-adds, which two load ports serve in the 6 cycles the two
 * FMA pipes take; 12 x 1 for a last 8 channels. The chain, epilogue and
 * tile layout (a row of ST_TW8 floats: a position's 16 channels) as the
 * 16-lane blocks', so the same bits. Without it an AVX2 machine ran
 * resnet18's 7x7/2 stem through the column matrix and 6-row blocks at
 * about half the FMA pipes' rate (docs/perf/conv/h42.md, h42-stem). */
#define AVX2F __attribute__((target("avx2,fma")))
#define ST_TW8 (8 * ST_NV)

#define ST8_BLOCK(NP, NV, SW)                                                                                        \
    AVX2F static void st8_##NP##_##NV##_##SW(const stem_job *j, const float *wb, int64_t q0, int64_t oh, int64_t ow,  \
                                             float *tile)                                                            \
    {                                                                                                                \
        __m256 s[NP][NV];                                                                                            \
        const float *xb[NP];                                                                                         \
        _Pragma("GCC unroll 16") for (int i = 0; i < NP; i++) {                                                      \
            xb[i] = q0 + i < j->osp ? j->xp + oh * j->sh * j->wp + ow * j->sw : j->xlast;                            \
            if (++ow == j->ow) ow = 0, oh++;                                                                         \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = _mm256_setzero_ps();                      \
        }                                                                                                            \
        const float *x0 = xb[0];                                                                                     \
        const float *wk = wb;                                                                                        \
        for (int64_t p = 0; p < j->kc; p++, wk += 8 * NV) {                                                          \
            int64_t o = j->off[p];                                                                                   \
            __m256 wv[NV];                                                                                           \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) wv[v] = _mm256_loadu_ps(wk + 8 * v);                \
            _Pragma("GCC unroll 16") for (int i = 0; i < NP; i++) {                                                  \
                __m256 xv = _mm256_broadcast_ss(SW ? x0 + o + i * SW : xb[i] + o);                                   \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = _mm256_fmadd_ps(wv[v], xv, s[i][v]);  \
            }                                                                                                        \
        }                                                                                                            \
        const bf__act *act = j->act;                                                                                 \
        const __m256 one = _mm256_set1_ps(1.0f);                                                                     \
        const __m256 lo = _mm256_set1_ps(act ? act->lo : 0.0f), hi = _mm256_set1_ps(act ? act->hi : 0.0f);           \
        _Pragma("GCC unroll 16") for (int i = 0; i < NP; i++)                                                        \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                                   \
            __m256 t = _mm256_add_ps(_mm256_mul_ps(one, s[i][v]), _mm256_loadu_ps(j->bias + 8 * v));                 \
            if (act) t = _mm256_min_ps(hi, _mm256_max_ps(lo, t));                                                    \
            _mm256_storeu_ps(tile + i * ST_TW8 + 8 * v, t);                                                          \
        }                                                                                                            \
    }
#define ST8_BLOCKS(NP, NV) ST8_BLOCK(NP, NV, 0) ST8_BLOCK(NP, NV, 1) ST8_BLOCK(NP, NV, 2)

ST8_BLOCKS(6, 2)
ST8_BLOCKS(12, 1)

/* positions q0 .. q0 + np, q0 at output row oh, column ow: no division
 * (at K = 27, mobilenet_v2's stem, a block's two 64-bit divisions cost
 * about half its multiply-adds' cycles) */
#define ST8_CALL(NP, NV)                                                                                             \
    (sw == 1 && row ? st8_##NP##_##NV##_1 : sw == 2 && row ? st8_##NP##_##NV##_2 : st8_##NP##_##NV##_0)(j, wb, q0, oh, \
                                                                                                       ow, tile)
AVX2F static int st8_block(const stem_job *j, int nv, const float *wb, int64_t q0, int64_t oh, int64_t ow, float *tile)
{
    int np = nv == 2 ? 6 : 12;
    int64_t sw = j->sw;
    int row = ow + np <= j->ow && q0 + np <= j->osp;
    if (nv == 2) ST8_CALL(6, 2);
    else ST8_CALL(12, 1);
    return np;
}

/* tile rows 0 .. n (positions t0 ..), channels 8 v .. 8 v + 8 of the row
 * block: to y's planes (channel c at y + c osp), n <= 8 */
AVX2F static void st8_store(const float *tile, int v, int64_t n, float *y, int64_t osp)
{
    for (int c = 0; c < 8; c++) _mm_prefetch((const char *)(y + (8 * v + c) * osp + ST_YPF), _MM_HINT_T0);
    if (n >= 8) {
        bf__transpose8(tile + 8 * v, ST_TW8, y + 8 * v * osp, osp);
        return;
    }
    float t[64];
    bf__transpose8(tile + 8 * v, ST_TW8, t, 8);
    for (int c = 0; c < 8; c++) memcpy(y + (8 * v + c) * osp, t + 8 * c, sizeof(float) * (size_t)n);
}

/* st_store_cl's moves, 8 channels a vector */
AVX2F static void st8_store_cl(const float *tile, int nv, int64_t n, float *y, int64_t ps)
{
    for (int64_t i = 0; i < n; i++)
        for (int v = 0; v < nv; v++) _mm256_storeu_ps(y + i * ps + 8 * v, _mm256_loadu_ps(tile + i * ST_TW8 + 8 * v));
}
#endif

/* the channels a vector at the product's level */
static int st_lanes(const bf__conv_params *cp)
{
    return cp->simd >= BF_SGEMM_AVX512 ? 16 : 8;
}

int bf__conv_stem_want(const bf__conv_params *cp)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const bf__window *w = &cp->w;
    /* horizontal stride 2 (stride 1 few-channel Convs were not measured) */
    int s2 = !bf__conv_padded_ok(w) && bf__conv_strided_ok(w);
    /* few input channels (under one block of 16: K is then tap-major,
     * channel inner), a short K, whole vectors of channels (16 on
     * AVX-512, 8 on AVX2); int32 offsets */
    return cp->simd >= BF_SGEMM_AVX2 && cp->nb == 1 && cp->kc > 0 && cp->kc <= ST_KMAX && cp->cg < BF__CONV_CBLOCK &&
           cp->mg % st_lanes(cp) == 0 && s2 &&
           (double)cp->cg * (double)bf__conv_padded_plane(w) < (double)INT32_MAX;
#else
    (void)cp;
    return 0;
#endif
}

size_t bf__conv_stem_floats(const bf__conv_params *cp)
{
    return (size_t)(cp->kc * ST_TW) + (size_t)(ST_TILE * ST_TW) + (((size_t)cp->kc + 15) & ~(size_t)15) + 16;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* k term p's offset from a position's first float in the padded planes */
static void st_offsets(const bf__conv_params *cp, int32_t *off)
{
    const bf__window *w = &cp->w;
    int64_t wp = w->in[2] + w->pb[2] + w->pe[2], plane = bf__conv_padded_plane(w);
    for (int64_t c = 0; c < cp->cg; c++)
        for (int64_t tap = 0; tap < cp->ksp; tap++)
            off[bf__conv_krow(cp, c, tap)] = (int32_t)(c * plane + tap / w->k[2] * w->d[1] * wp + tap % w->k[2] * w->d[2]);
}

/* the row block's weights (rows r0 .. r0 + L nv, L st_lanes) as [k][L nv], k in the chain's order: moves only */
static void st_pack(const bf__conv_params *cp, const float *wt, int64_t r0, int nv, float *wb)
{
    int64_t rn = st_lanes(cp) * nv;
    for (int64_t r = 0; r < rn; r++)
        for (int64_t c = 0; c < cp->cg; c++)
            for (int64_t tap = 0; tap < cp->ksp; tap++)
                wb[bf__conv_krow(cp, c, tap) * rn + r] = wt[(r0 + r) * cp->kc + c * cp->ksp + tap];
}

static int st_nv(const bf__conv_params *cp, int64_t r0)
{
    int64_t l = st_lanes(cp);
    return cp->mg - r0 >= l * ST_NV ? ST_NV : (int)((cp->mg - r0) / l);
}

/* positions q0 .. q1 of the row block r0 (weights wb packed by st_pack)
 * into yr + (q - q0) (channel c of the block at yr + c ys), tiles of
 * ST_TILE from q0; cl: channels-last instead, position q's channels of
 * the block at yr + (q - q0) ys */
static void st_rows(const bf__conv_params *cp, const float *xp, const int32_t *off, const float *wb, float *tile,
                    const float *bias, const bf__act *act, int64_t r0, int nv, int64_t q0, int64_t q1, float *yr,
                    int64_t ys, int cl)
{
    const bf__window *w = &cp->w;
    int64_t wp = w->in[2] + w->pb[2] + w->pe[2], ow_n = w->out[2];
    stem_job j = {xp, bias + r0, act, off, cp->kc, cp->osp, ow_n, w->s[1], w->s[2], wp,
                  xp + (cp->osp - 1) / ow_n * w->s[1] * wp + (cp->osp - 1) % ow_n * w->s[2]};
    int wide = st_lanes(cp) == 16;
    int64_t tw = wide ? ST_TW : ST_TW8, l = st_lanes(cp);
    int64_t oh = q0 / ow_n, ow = q0 % ow_n;   /* the next AVX2 block's first position (st8_block) */
    for (int64_t t0 = q0; t0 < q1; t0 += ST_TILE) {
        int64_t n = q1 - t0 < ST_TILE ? q1 - t0 : ST_TILE;
        for (int64_t q = 0; q < n;) {
            if (wide) {
                q += st_block(&j, nv, wb, t0 + q, tile + q * tw);
                continue;
            }
            int np = st8_block(&j, nv, wb, t0 + q, oh, ow, tile + q * tw);
            q += np, ow += np;
            while (ow >= ow_n) ow -= ow_n, oh++;
        }
        if (cl) {
            if (wide) st_store_cl(tile, nv, n, yr + (t0 - q0) * ys, ys);
            else st8_store_cl(tile, nv, n, yr + (t0 - q0) * ys, ys);
            continue;
        }
        for (int64_t q = 0; q < n; q += l)
            for (int v = 0; v < nv; v++) {
                if (wide) st_store(tile + q * tw, v, n - q, yr + (t0 - q0) + q, ys);
                else st8_store(tile + q * tw, v, n - q, yr + (t0 - q0) + q, ys);
            }
    }
}
#endif

void bf__conv_stem(const bf__conv_params *cp, const float *wt, const float *xp, float *buf, const float *bias,
                   const bf__act *act, float *y)
{
#if defined(__x86_64__) && defined(__GNUC__)
    int64_t kc = cp->kc, osp = cp->osp;
    float *wb = buf, *tile = wb + kc * ST_TW;
    int32_t *off = (int32_t *)(tile + ST_TILE * ST_TW);
    st_offsets(cp, off);
    memset(tile, 0, sizeof(float) * ST_TILE * ST_TW);   /* rows past the image's end: stored nowhere, but defined */
    for (int64_t r0 = 0; r0 < cp->mg; r0 += st_lanes(cp) * ST_NV) {
        int nv = st_nv(cp, r0);
        st_pack(cp, wt, r0, nv, wb);
        st_rows(cp, xp, off, wb, tile, bias, act, r0, nv, 0, osp, y + r0 * osp, osp, 0);
    }
#else
    (void)cp, (void)wt, (void)xp, (void)buf, (void)bias, (void)act, (void)y;
#endif
}

/* The same kernel over bands of output rows (linalg_conv_stpool.c): every
 * row block's weights packed once a step into buf, then any rows of any
 * image. Each output is the same block's chain and epilogue on the same
 * floats whichever rows a call takes (a block's positions only choose
 * which registers hold them), so the bits of bf__conv_stem. */
size_t bf__conv_stem_band_floats(const bf__conv_params *cp)
{
    return (size_t)(cp->kc * cp->mg) + (size_t)(ST_TILE * ST_TW) + (((size_t)cp->kc + 15) & ~(size_t)15) + 16;
}

void bf__conv_stem_band_prep(const bf__conv_params *cp, const float *wt, float *buf)
{
#if defined(__x86_64__) && defined(__GNUC__)
    float *tile = buf + cp->kc * cp->mg;
    st_offsets(cp, (int32_t *)(tile + ST_TILE * ST_TW));
    memset(tile, 0, sizeof(float) * ST_TILE * ST_TW);
    for (int64_t r0 = 0; r0 < cp->mg; r0 += st_lanes(cp) * ST_NV) st_pack(cp, wt, r0, st_nv(cp, r0), buf + r0 * cp->kc);
#else
    (void)cp, (void)wt, (void)buf;
#endif
}

void bf__conv_stem_band(const bf__conv_params *cp, const float *xp, float *buf, const float *bias, const bf__act *act,
                        int64_t h0, int64_t h1, float *y, int64_t ps)
{
#if defined(__x86_64__) && defined(__GNUC__)
    float *tile = buf + cp->kc * cp->mg;
    const int32_t *off = (const int32_t *)(tile + ST_TILE * ST_TW);
    int64_t ow = cp->w.out[2];
    for (int64_t r0 = 0; r0 < cp->mg; r0 += st_lanes(cp) * ST_NV)
        st_rows(cp, xp, off, buf + r0 * cp->kc, tile, bias, act, r0, st_nv(cp, r0), h0 * ow, h1 * ow, y + r0, ps, 1);
#else
    (void)cp, (void)xp, (void)buf, (void)bias, (void)act, (void)h0, (void)h1, (void)y, (void)ps;
#endif
}
