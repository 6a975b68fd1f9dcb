/* The 1x1 Conv with 16 output channels to a vector and the input
 * broadcast (AVX-512): ONNX Runtime's NCHWc pointwise kernel's structure
 * over NCHW tensors, for the small maps where the general product's
 * 16-position panels serve badly (mobilenet_v2's 14x14 and 7x7 layers:
 * a 7x7 image is 49 positions, four panels of which the last holds one
 * column; a K of 384-960 makes a panel pair of 49-123 KB, past L1, read
 * again by every block of 12 rows). Measured per shape against the
 * general product and linalg_conv_pointwise.c's paths (docs/perf/
 * mobilenet.md, h15-dw); bf__conv_pwl_want takes the shapes where it won.
 *
 * A block is PL_NP output positions (of any of the tile's images: no lane
 * is padding) x NV vectors of 16 output channels: per k, NV loads of the
 * packed weights, PL_NP broadcasts of x[k][q] read from the NCHW input in
 * place (a position's k-th float is k * osp further on), PL_NP x NV fused
 * multiply-adds, each `fma(w, x, s)` with the weight and the input as the
 * factors the product has them. k runs over the input channels in order
 * (a 1x1 kernel's column-matrix rows are the channels), each sum from +0.
 * K is cut into near-equal chunks of at most PL_KC: a row block's weights
 * for one chunk (up to PL_KC x 16 NV floats, transposed from W's rows as
 * 16 x 16 tiles: moves only) stay in L1 while every position block of the
 * tile runs the chunk,
 * the sums going to `acc` between chunks (a float stored and loaded is
 * the same float), so each output is still one chain over K in order.
 * After the last chunk the row block's sums are transposed back, 16
 * positions of one image x 16 channels at a time (moves only), and each
 * output gets the product's epilogue on positions-in-lanes vectors:
 * (1 * s) + bias with s as vaddps's first source, the residual Add with
 * the Add's A first, then max(lo, v) and min(hi, v): sgemm.c's block512
 * epilogue, so the bits of bf__sgemm_bias (docs/ENGINE.md, "The
 * convolution path"). W is packed a chunk at a time per call (faults
 * rewrite it between runs) unless the plan passes the model's own W packed once
 * (bf__conv_pwl_pack, base/wpack.h), which it does only while the step
 * reads the model's tensor itself (plan.c, packed_of).
 *
 * A list of output positions (op.h, bf__cpos: the differential engine's
 * re-run of the positions a moved input reaches, diffpos.c) takes the
 * same tiles with only their listed positions in the blocks: pin gives
 * each its first float as it gives every position, so each listed output
 * has the same chain, and the epilogue gathers and scatters its lanes by
 * their places in y (pl_epilogue_list: the same operations on the same
 * sums, 16 listed positions at a time). */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/simd.h"
#include "exec/op.h"
#include "linalg_window.h"
#include "sgemm.h"
#include "transpose8.h"

#ifndef PL_NP
#define PL_NP 6        /* positions a block (6 x 4 vectors: 24 sums, 4 weights, 1 broadcast in 29 registers) */
#endif
#ifndef PL_KC
#define PL_KC 192      /* k terms a chunk at most: a row block's weights 48 KiB */
#endif
#ifndef PL_NPROJ
#define PL_NPROJ 256   /* bf__conv_pwl_want: the projections of maps under this many positions ... */
#endif
#ifndef PL_KPROJ
#define PL_KPROJ 128   /* ... with K of at least this */
#endif
#ifndef PL_NSTRIDED
/* bf__conv_pwl_want: the strided 1x1s of maps under this many positions.
 * resnet18's downsamples in bitflip-bench-steps at batch 4 (docs/perf/
 * conv/h33.md): layer4's (49 positions) 0.51 -> 0.385 ms a pass (medians
 * of six alternated rounds), layer3's (196) and layer2's (784) no clear
 * change against the gather and product on that noisy host */
#define PL_NSTRIDED 96
#endif
#ifndef PL_POS
#define PL_POS 400     /* positions a tile at most (whole images): its sums 100 KiB */
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define PL512 1
#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define PL512 0
#endif

/* A 1x1 Conv at a stride, no padding (resnet18's downsamples, 1x1/2):
 * prepare gives it the im2col path, which gathers every strided input
 * float into panels first; the lanes read them in place instead (pl_run's
 * pin: each position's first float at its stride). */
static int pwl_strided(const bf__conv_params *cp)
{
    const bf__window *w = &cp->w;
    if (cp->path != BF__CONV_IM2COL || w->rank != 2 || cp->ksp != 1 || cp->kc != cp->cg) return 0;
    for (int i = 0; i < 3; i++)
        if (w->k[i] != 1 || w->pb[i] != 0 || w->pe[i] != 0) return 0;
    return 1;
}

/* bf__conv_pwl_ok but for this CPU's level (the copy's estimate counts
 * the step on any CPU, as the products' do) */
static int pwl_fits(const bf__conv_params *cp)
{
    if (!PL512 || (cp->path != BF__CONV_POINTWISE && !pwl_strided(cp)) || cp->simd < BF_SGEMM_AVX512 || cp->kc <= 0 || cp->mg <= 0 ||
        cp->mg % 16 || cp->osp <= 0 || !cp->has_bias)
        return 0;
    /* a tile's input offsets in 32 bits */
    return (double)bf__conv_pwl_images(cp) * (double)cp->c * (double)cp->isp < (double)INT32_MAX;
}

static int pwl_shape(const bf__conv_params *cp);   /* the shapes it is given: bf__conv_pwl_want's rule */

int bf__conv_pwl_ok(const bf__conv_params *cp)
{
    return bf__simd_cpu() >= BF_SGEMM_AVX512 && pwl_fits(cp);
}

int64_t bf__conv_pwl_images(const bf__conv_params *cp)
{
    int64_t k = cp->osp > 0 && cp->osp < PL_POS ? PL_POS / cp->osp : 1;
    return k < cp->n ? k : cp->n > 0 ? cp->n : 1;
}

static size_t acc_floats(const bf__conv_params *cp)
{
    /* the tile's positions, rounded up to a block, and 16 rows more for
     * the transposes of the last positions */
    size_t npos = (size_t)(bf__conv_pwl_images(cp) * cp->osp);
    return ((npos + PL_NP - 1) / PL_NP * PL_NP + 16) * 64;
}

size_t bf__conv_pwl_floats(const bf__conv_params *cp)
{
    if (!bf__conv_pwl_ok(cp)) return 0;
    size_t npos = (size_t)(bf__conv_pwl_images(cp) * cp->osp);
    return acc_floats(cp) + (size_t)PL_KC * 64 + ((npos + PL_NP + 15) & ~(size_t)15) + 16;
}

#if PL512
/* `a` is vaddps's first source: the operand x86 returns when both are NaN
 * (sgemm.c's add_first16; the compiler may not swap them) */
AVX512 static inline __attribute__((always_inline)) __m512 add_first(__m512 a, __m512 b)
{
    __m512 o;
    __asm__("vaddps %2, %1, %0" : "=v"(o) : "v"(a), "v"(b));
    return o;
}

/* positions xb[0 .. NP] (each its channel-0 float), k terms 0 .. kn of the
 * chunk, weights wb ([k][16 NV]); acc: the block's sums, [NP][64] */
#define PL_BLOCK(NP, NV)                                                                                            \
    AVX512 static inline __attribute__((always_inline)) void pl_##NP##_##NV(                                        \
        const float *const *xp, int64_t osp, const float *wb, int64_t kn, float *acc, int first)                    \
    {                                                                                                               \
        __m512 s[NP][NV];                                                                                           \
        const float *xb[NP];                                                                                        \
        _Pragma("GCC unroll 8") for (int i = 0; i < NP; i++) {                                                      \
            xb[i] = xp[i];                                                                                          \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] =                                          \
                first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i * 64 + 16 * v);                               \
        }                                                                                                           \
        int64_t o = 0;                                                                                              \
        _Pragma("GCC unroll 2") for (int64_t p = 0; p < kn; p++, o += osp, wb += 16 * NV) {                         \
            __m512 wv[NV];                                                                                          \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) wv[v] = _mm512_loadu_ps(wb + 16 * v);              \
            _Pragma("GCC unroll 8") for (int i = 0; i < NP; i++) {                                                  \
                __m512 xv = _mm512_set1_ps(xb[i][o]);                                                               \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = _mm512_fmadd_ps(wv[v], xv, s[i][v]); \
            }                                                                                                       \
        }                                                                                                           \
        _Pragma("GCC unroll 8") for (int i = 0; i < NP; i++)                                                        \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) _mm512_storeu_ps(acc + i * 64 + 16 * v, s[i][v]);  \
    }

#define PL_NPS(NV) PL_BLOCK(1, NV) PL_BLOCK(2, NV) PL_BLOCK(3, NV) PL_BLOCK(4, NV) PL_BLOCK(5, NV) PL_BLOCK(6, NV)
PL_NPS(1)
PL_NPS(2)
PL_NPS(3)
PL_NPS(4)

#define PL_CASE(NP, NV) \
    case NP: pl_##NP##_##NV(xp, osp, wb, kn, acc, first); break;
#define PL_SWITCH(NV)                                                                                              \
    switch (np) {                                                                                                  \
        PL_CASE(1, NV) PL_CASE(2, NV) PL_CASE(3, NV) PL_CASE(4, NV) PL_CASE(5, NV) default:                        \
        pl_6_##NV(xp, osp, wb, kn, acc, first);                                                                    \
    }

AVX512 __attribute__((noinline)) static void pl_dispatch(int nv, int np, const float *const *xp, int64_t osp,
                                                         const float *wb, int64_t kn, float *acc, int first)
{
    if (nv == 4) PL_SWITCH(4)
    else if (nv == 3) PL_SWITCH(3)
    else if (nv == 2) PL_SWITCH(2)
    else PL_SWITCH(1)
}

/* The weights of rows r0 .. r0 + 16 nv (w: [rows][kc], as stored), k terms
 * k0 .. k0 + kn, into wb as [k][16 nv]: 16 x 16 tiles transposed, one
 * float at a time past the last whole tile of k; moves only. */
AVX512 static void pl_pack(const float *w, int64_t kc, int64_t r0, int nv, int64_t k0, int64_t kn, float *wb)
{
    int64_t k16 = kn & ~(int64_t)15, ld = 16 * nv;
    for (int v = 0; v < nv; v++) {
        const float *wr = w + (r0 + 16 * v) * kc + k0;
        for (int64_t t = 0; t < k16; t += 16) {
            __m512 x[16];
            for (int i = 0; i < 16; i++) x[i] = _mm512_loadu_ps(wr + i * kc + t);
            bf__transpose16(x);
            for (int i = 0; i < 16; i++) _mm512_storeu_ps(wb + (t + i) * ld + 16 * v, x[i]);
        }
        for (int64_t t = k16; t < kn; t++)
            for (int i = 0; i < 16; i++) wb[t * ld + 16 * v + i] = wr[i * kc + t];
    }
}

/* One output channel's 16 lanes after the product: (1 * s) + bias, the
 * residual Add (r, the Add's A first where act->res_a), max(lo, v) and
 * min(hi, v); block512's operations in its order. r: NULL for none. */
AVX512 static inline __attribute__((always_inline)) __m512 pl_finish(__m512 s, float bias, const __m512 *r,
                                                                      const bf__act *act, __m512 lo, __m512 hi)
{
    __m512 u = add_first(_mm512_mul_ps(_mm512_set1_ps(1.0f), s), _mm512_set1_ps(bias));
    if (r) u = act->res_a ? add_first(*r, u) : add_first(u, *r);
    if (act) u = _mm512_min_ps(hi, _mm512_max_ps(lo, u));
    return u;
}

/* The epilogue of rows r0 .. r0 + 16 nv over the tile's ni images: the sums
 * (acc, [position][64]) back to positions in lanes, 16 positions of one
 * image at a time, then block512's operations in its order; act->res laid
 * out as y. yg: the tile's first image's output, channel g * mg. */
AVX512 static void pl_epilogue(const bf__conv_params *cp, const float *acc, int64_t ni, int64_t r0, int nv,
                               const float *bias, const bf__act *act, float *yg, const float *rg)
{
    const int64_t osp = cp->osp, img = cp->m * osp;
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    for (int64_t i = 0; i < ni; i++)
        for (int64_t p0 = 0; p0 < osp; p0 += 16) {
            int np = osp - p0 < 16 ? (int)(osp - p0) : 16;
            __mmask16 km = (__mmask16)(np == 16 ? 0xffffu : (1u << np) - 1u);
            const float *a = acc + (i * osp + p0) * 64;
            for (int v = 0; v < nv; v++) {
                __m512 t[16];
                for (int l = 0; l < 16; l++) t[l] = l < np ? _mm512_loadu_ps(a + l * 64 + 16 * v) : _mm512_setzero_ps();
                bf__transpose16(t);
                for (int c = 0; c < 16; c++) {
                    int64_t ch = r0 + 16 * v + c, at = i * img + ch * osp + p0;
                    __m512 r = rg ? _mm512_maskz_loadu_ps(km, rg + at) : _mm512_setzero_ps();
                    _mm512_mask_storeu_ps(yg + at, km, pl_finish(t[c], bias[ch], rg ? &r : NULL, act, lo, hi));
                }
            }
        }
}

/* pl_epilogue for a tile's npos listed positions (sq: their q, image x osp
 * + position, of the whole step; n0: the tile's first image): the same
 * operations on each, 16 at a time, their lanes read from and written to
 * their own places in y (a gather and a scatter instead of a row's load
 * and store) */
AVX512 static void pl_epilogue_list(const bf__conv_params *cp, const float *acc, int64_t npos, const int32_t *sq,
                                    int64_t n0, int64_t r0, int nv, const float *bias, const bf__act *act,
                                    float *yg, const float *rg)
{
    const int64_t osp = cp->osp, img = cp->m * osp;
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    for (int64_t j0 = 0; j0 < npos; j0 += 16) {
        int np = npos - j0 < 16 ? (int)(npos - j0) : 16;
        __mmask16 km = (__mmask16)(np == 16 ? 0xffffu : (1u << np) - 1u);
        int32_t ix[16] = {0};
        for (int l = 0; l < np; l++) {
            int64_t q = sq[j0 + l] - n0 * osp;
            ix[l] = (int32_t)(q / osp * img + q % osp);   /* pl_list_fits: under 2^31 */
        }
        const __m512i at = _mm512_loadu_si512(ix);
        const float *a = acc + j0 * 64;
        for (int v = 0; v < nv; v++) {
            __m512 t[16];
            for (int l = 0; l < 16; l++) t[l] = l < np ? _mm512_loadu_ps(a + l * 64 + 16 * v) : _mm512_setzero_ps();
            bf__transpose16(t);
            for (int c = 0; c < 16; c++) {
                int64_t ch = r0 + 16 * v + c;
                __m512 r = rg ? _mm512_mask_i32gather_ps(_mm512_setzero_ps(), km, at, rg + ch * osp, 4)
                              : _mm512_setzero_ps();
                _mm512_mask_i32scatter_ps(yg + ch * osp, km, at, pl_finish(t[c], bias[ch], rg ? &r : NULL, act, lo, hi), 4);
            }
        }
    }
}

/* K's chunks: near-equal whole 16s, at most PL_KC (320: 160 and 160) */
static int64_t pl_kstep(int64_t kc)
{
    const int64_t nch = (kc + PL_KC - 1) / PL_KC;
    return ((kc + nch - 1) / nch + 15) / 16 * 16;
}

/* the row blocks near-equal (10 vectors: 4, 3, 3): block b's vectors */
static int pl_nv(int64_t nvec, int64_t b)
{
    const int64_t nblk = (nvec + 3) / 4;
    return (int)(nvec / nblk + (b < nvec % nblk));
}

AVX512 static void pl_run(const bf__conv_params *cp, const float *x, const float *wt, const float *wpk,
                          const float *bias, const bf__act *act, float *y, float *scratch, const bf__cpos *cpos)
{
    float *acc = scratch, *wb = acc + acc_floats(cp);
    int32_t *pin = (int32_t *)(wb + (size_t)PL_KC * 64);
    const int64_t osp = cp->osp, kc = cp->kc, imgs = bf__conv_pwl_images(cp);
    const int64_t nvec = cp->mg / 16, nblk = (nvec + 3) / 4, kstep = pl_kstep(kc);
    /* a k term's floats are isp apart (one input plane); positions at the stride */
    const int64_t isp = cp->isp, ow = cp->w.out[2], iw = cp->w.in[2], sh = cp->w.s[1], sw = cp->w.s[2];
    for (int64_t g = 0; g < cp->group; g++)
        for (int64_t n0 = 0, sk = 0; n0 < cp->n; n0 += imgs) {
            int64_t ni = cp->n - n0 < imgs ? cp->n - n0 : imgs, npos = ni * osp;
            /* a list: the tile's listed positions alone (sk: the next one) */
            const int32_t *sq = NULL;
            if (cpos) {
                int64_t s0 = sk;
                while (sk < cpos->n && cpos->q[sk] < (n0 + ni) * osp) sk++;
                if (sk == s0) continue;
                sq = cpos->q + s0, npos = sk - s0;
            }
            const float *xg = x + (n0 * cp->c + g * cp->cg) * cp->isp;
            /* position q's first float: its image's, then its row and column at
             * the stride (a unit Conv's r itself: its input rows are its output's) */
            for (int64_t j = 0; j < npos; j++) {
                int64_t q = sq ? sq[j] - n0 * osp : j, r = q % osp;
                pin[j] = (int32_t)(q / osp * cp->c * cp->isp + r / ow * sh * iw + r % ow * sw);
            }
            for (int64_t q = npos; q < npos + PL_NP; q++) pin[q] = 0;
            int64_t yoff = (n0 * cp->m + g * cp->mg) * osp;
            const float *wg = wt + g * cp->mg * kc, *bg = bias + g * cp->mg;
            /* the row blocks near-equal (10 vectors: 4, 3, 3) */
            for (int64_t b = 0, v0 = 0; b < nblk; b++) {
                int nv = pl_nv(nvec, b);
                int64_t r0 = 16 * v0;
                for (int64_t k0 = 0; k0 < kc; k0 += kstep) {
                    int64_t kn = kc - k0 < kstep ? kc - k0 : kstep;
                    /* the chunk's weights: the copy packed once (bf__conv_pwl_pack's layout), or packed now */
                    const float *wk = wpk ? wpk + (g * cp->mg + r0) * kc + k0 * 16 * nv : wb;
                    if (!wpk) pl_pack(wg, kc, r0, nv, k0, kn, wb);
                    const float *xk = xg + k0 * isp;
                    for (int64_t q0 = 0; q0 < npos; q0 += PL_NP) {
                        int np = npos - q0 < PL_NP ? (int)(npos - q0) : PL_NP;
                        const float *xp[PL_NP];
                        for (int i = 0; i < PL_NP; i++) xp[i] = xk + pin[q0 + i];
                        pl_dispatch(nv, np, xp, isp, wk, kn, acc + q0 * 64, k0 == 0);
                    }
                }
                const float *rg = act && act->res ? act->res + yoff : NULL;
                if (sq) pl_epilogue_list(cp, acc, npos, sq, n0, r0, nv, bg, act, y + yoff, rg);
                else pl_epilogue(cp, acc, ni, r0, nv, bg, act, y + yoff, rg);
                v0 += nv;
            }
        }
}

/* a list's places in y (pl_epilogue_list's indexes): a tile's outputs in 32 bits */
static int pl_list_fits(const bf__conv_params *cp)
{
    return (double)bf__conv_pwl_images(cp) * (double)cp->m * (double)cp->osp < (double)INT32_MAX;
}
#endif

int bf__conv_pwl(const bf__conv_params *cp, const float *x, const float *wt, const float *wpk, const float *bias,
                 const bf__act *act, float *y, void *scratch, bf__cpos *cpos)
{
#if PL512
    if (!bias || !scratch || !bf__conv_pwl_ok(cp) || cp->scratch_floats < bf__conv_pwl_floats(cp)) return 0;
    if (cpos && !pl_list_fits(cp)) cpos = NULL;   /* every position: the listed ones' bits too */
    pl_run(cp, x, wt, wpk, bias, act, y, scratch, cpos);
    if (cpos) cpos->used = 1;
    return 1;
#else
    (void)cp, (void)x, (void)wt, (void)wpk, (void)bias, (void)act, (void)y, (void)scratch, (void)cpos;
    return 0;
#endif
}

/* All of W in pl_run's layout, so that a pass reads it instead of packing
 * every chunk of every row block at every call (pl_pack was 2% of
 * mobilenet_v2's pass): per group, per row block (r0, nv vectors), its
 * chunks one after the other, each [kn][16 nv] as pl_pack writes it; so
 * row block r0 of group g starts at (g mg + r0) kc and its chunk k0 at
 * k0 16 nv past that: m x kc floats, the same floats moved. */
size_t bf__conv_pwl_pack_floats(const bf__conv_params *cp)
{
    return pwl_fits(cp) && pwl_shape(cp) ? (size_t)(cp->m * cp->kc) : 0;
}

int bf__conv_pwl_pack(const bf__conv_params *cp, const float *wt, float *out)
{
#if PL512
    if (!bf__conv_pwl_want(cp)) return 0;
    const int64_t kc = cp->kc, nvec = cp->mg / 16, nblk = (nvec + 3) / 4, kstep = pl_kstep(kc);
    for (int64_t g = 0; g < cp->group; g++)
        for (int64_t b = 0, v0 = 0; b < nblk; b++) {
            int nv = pl_nv(nvec, b);
            int64_t r0 = 16 * v0;
            for (int64_t k0 = 0; k0 < kc; k0 += kstep)
                pl_pack(wt + g * cp->mg * kc, kc, r0, nv, k0, kc - k0 < kstep ? kc - k0 : kstep,
                        out + (g * cp->mg + r0) * kc + k0 * 16 * nv);
            v0 += nv;
        }
    return 1;
#else
    (void)cp, (void)wt, (void)out;
    return 0;
#endif
}

/* The shapes where it beat the general product and the images side by
 * side (bench/conv_kernels.c --pw, docs/perf/mobilenet.md, h15-dw): maps
 * under 96 positions (bf__conv_packed_images' rule: mobilenet_v2's 7x7)
 * with K past 256, 0.76-0.92x the product's time (the images side by side
 * 0.82-0.88x where they ran); K of 160 (the 160 -> 960 expansions)
 * measured level, and 14x14 maps level to 1.25x slower (the product's
 * 16-position panels are 94% full there), so they keep the product.
 * Maps of one position (a squeeze-excitation block's 1x1 Convs on
 * [N, C, 1, 1]) go to the images side by side instead, which took them
 * at any K and measured 0.7x the lanes' time there (docs/perf/
 * detectors.md, h16-seg). */
static int pwl_shape(const bf__conv_params *cp)
{
    /* and the projections of maps under PL_NPROJ positions (mobilenet_v2's
     * 14x14 ones, K 192-576 -> M 64-96: more input than output channels,
     * K of at least PL_KPROJ): on the AMD EPYC (Zen 5) of h18-mbv2 the
     * lanes took 0.82-0.85x the product's time there, where on the Intel
     * host of h15-dw they measured level or slower on 14x14; the
     * expansions (K < M) stay slower in the lanes on both */
    int proj = cp->osp < PL_NPROJ && cp->kc > cp->mg && cp->kc >= PL_KPROJ;
    /* a strided 1x1 (pwl_strided) on maps under PL_NSTRIDED positions with
     * K of at least 16, where no other lanes kernel took it */
    if (pwl_strided(cp)) return cp->osp < PL_NSTRIDED && cp->kc >= 16 && !cp->bcast && !cp->stem;
    return ((cp->osp < BF__CONV_COLS / 2 && cp->kc > BF__PW_KMIN) || proj) && !(cp->osp == 1 && bf__conv_pw_images(cp) > 1);
}

int bf__conv_pwl_want(const bf__conv_params *cp)
{
    return bf__conv_pwl_ok(cp) && pwl_shape(cp);
}

/* With a list, also the unit 1x1s of maps under BF__CONV_COLS / 2
 * positions that the rule above leaves to the product (mobilenet_v2's
 * 7x7 expansions, K 160: measured level with it, h15-dw): a list's
 * positions are no whole images, which the product's panels take. */
int bf__conv_pwl_list_ok(const bf__conv_params *cp)
{
    return bf__conv_pwl_ok(cp) && (pwl_shape(cp) || (cp->path == BF__CONV_POINTWISE && cp->osp < BF__CONV_COLS / 2));
}
