/* Two shapes of 1x1 Conv (the pointwise path, linalg_conv_direct.c) that
 * the general product (sgemm.c) serves badly on AVX-512 (the second on
 * AVX2 too: docs/perf/mobilenet/h41.md, h41-pw), each measured
 * against it per shape (docs/BENCHMARKS.md, "mobilenet_v2's pointwise
 * products on this Intel machine", h14-mbv2):
 *
 * - few output channels over a large map (mobilenet_v2's projections
 *   16-32 x 112x112 to 28x28: M <= 32, K 32-192, N 784-12544). The
 *   product packs B (the input map, 1.2 MB an image, read from L3 after the
 *   depthwise step wrote it for the whole batch) into panels for only one
 *   to three blocks of rows, and the packer's loads wait on memory: 96-144
 *   rows of B read 64 bytes at a time, more streams than the prefetchers
 *   follow. Here B's rows are read in place, 32 columns at a time by
 *   blocks of up to 12 rows (two B loads for 24 multiply-adds, the general
 *   product's block shape), each row's lines BF__PW_AHEAD floats further on
 *   asked for in advance (into L2).
 * - small maps (7x7 = 49 positions: 3 full panels and one of a single
 *   column, 23% of the lanes padding): the images side by side in one
 *   product as bf__conv_packed does for the 3x3 path, its panels gathered
 *   from each image's channels, the product in the scratch and then copied
 *   to each image's planes, the residual Add and activation first, plane
 *   by plane, where they are fused (K past 256 only, where the general
 *   product packs its panels anyway, and a product of at most 512 KiB).
 *
 * Both keep every element's chain: s = 0, s = fma(w[p], x[p], s) for the
 * input channels p in order, then (1 * s) + bias, the residual Add with the
 * Add's A as vaddps's first source, then max(lo, v) and min(hi, v): the
 * operations and operands of sgemm.c's block512 epilogue, so the bits of
 * bf__sgemm_bias. Only which elements are computed together, and when
 * memory is read, changes (docs/ENGINE.md, "The convolution path"). */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/simd.h"
#include "exec/op.h"
#include "linalg_impl.h"
#include "linalg_window.h"
#include "sgemm.h"

/* how far ahead of a row's read bf__conv_pw_inplace asks for the row's
 * lines (into L2): 8 lines, 4 blocks of 32 columns, the best or level with
 * the best of 64-512 floats (docs/BENCHMARKS.md, h14-mbv2) */
#ifndef BF__PW_AHEAD
#define BF__PW_AHEAD 128
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define PW512 1
#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define PW512 0
#endif

int bf__conv_pw_inplace_ok(const bf__conv_params *cp, int64_t nj)
{
    return PW512 && cp->simd >= BF_SGEMM_AVX512 && bf__simd_cpu() >= BF_SGEMM_AVX512 && cp->kc > 0 &&
           nj >= BF__PW_MMIN && nj <= BF__PW_MMAX && cp->osp >= BF__PW_NMIN;
}

int64_t bf__conv_pw_images(const bf__conv_params *cp)
{
    /* K past 256, where the general product packs its panels anyway: a
     * shallower B (mobilenet_v2's 160 -> 960 expansions) it reads in place,
     * from L2 where the step before left it, and that measured faster than
     * gathering the images' panels; but maps of one position (a
     * squeeze-excitation block's 1x1 Convs on [N, C, 1, 1]) at any K: one
     * image a product is a product of one column, its weights read once an
     * image, and the images side by side measured 0.13-0.21x its time on
     * lraspp_mobilenet_v3_large's (K 24-960; docs/perf/detectors.md, h16-seg) */
    if (!PW512 || cp->simd < BF_SGEMM_AVX2 || cp->kc > BF_SGEMM_KSTACK) return 1;
    if (cp->simd >= BF_SGEMM_AVX512 && cp->kc <= BF__PW_KMIN && cp->osp != 1) return 1;
    /* AVX2 at any K: one image's 49 columns are four 16-lane panels, the
     * last of one column, and a panel costs the AVX2 block the same however
     * few its columns (docs/perf/mobilenet/h41.md, h41-pw) */
    /* and a product that stays in L2 beside its input: mobilenet_v2's
     * 1280-channel head (1 MB, then copied out) measured level on AVX-512;
     * on AVX2 it and the 960-channel expansions measured 13-20% faster side
     * by side (h41-pw), hence the larger cap there */
    int64_t imgs = bf__conv_packed_images(cp);
    int64_t cap = cp->simd >= BF_SGEMM_AVX512 ? BF__PW_TMPMAX : BF__PW_TMPMAX_AVX2;
    if (cp->simd < BF_SGEMM_AVX512 && imgs == 1 && cp->mg > 0 && cp->osp % 16 && cp->osp < BF__PW_SIDE_AVX2) {
        /* AVX2, a map short of whole panels (mobilenet_v2's 14x14: 196
         * columns, 12 panels and one of 4): as many images as make whole
         * panels (16 / gcd(osp, 16): 4 for 196), fewer where the batch or
         * the cap says so; the pass measured 2-4% faster (docs/perf/
         * mobilenet/h44.md, h44-pw14) */
        int64_t g = cp->osp & -cp->osp, want = g >= 16 ? 1 : 16 / g, fit = cap / (cp->mg * cp->osp);
        imgs = want < cp->n ? want : cp->n;
        if (fit < imgs) imgs = fit;
        return imgs > 1 ? imgs : 1;
    }
    return cp->mg * imgs * cp->osp <= cap ? imgs : 1;
}

size_t bf__conv_pw_floats(const bf__conv_params *cp)
{
    int64_t imgs = bf__conv_pw_images(cp);
    return imgs > 1 ? (size_t)(cp->mg * imgs * cp->osp) + 16 : 0;
}

#if PW512
/* `a` is vaddps's first source: the operand x86 returns when both are NaN
 * (sgemm.c's add_first16; the compiler may not swap them) */
AVX512 static inline __attribute__((always_inline)) __m512 add_first(__m512 a, __m512 b)
{
    __m512 o;
    __asm__("vaddps %2, %1, %0" : "=v"(o) : "v"(a), "v"(b));
    return o;
}

/* Rows 0 .. mr of A (mr <= 12) times B's columns j .. j + 32 (two vectors
 * of 16; lanes past n masked: never loaded nor stored), B read in place,
 * rows ldb apart: per p two loads of B and mr broadcasts of A for 2 mr
 * multiply-adds (sgemm.c's block512 shape, on B's own rows). `ahead`: each
 * row's lines BF__PW_AHEAD floats on are asked for (into L2) as it is read. */
AVX512 static inline __attribute__((always_inline)) void pw_block(int mr, int k, const float *a, int64_t lda,
                                                                  const float *b, int64_t ldb, __mmask16 k0,
                                                                  __mmask16 k1, int ahead, const float *bias,
                                                                  const bf__act *act, const float *res, float *y,
                                                                  int64_t ldy)
{
    __m512 s[12][2];
    _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) s[i][0] = s[i][1] = _mm512_setzero_ps();
    if (res && ahead)
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++)
            _mm_prefetch((const char *)(res + (int64_t)i * ldy + BF__PW_AHEAD), _MM_HINT_T1);
    for (int p = 0; p < k; p++) {
        const float *bp = b + (int64_t)p * ldb;
        if (ahead) {
            _mm_prefetch((const char *)(bp + BF__PW_AHEAD), _MM_HINT_T1);
            _mm_prefetch((const char *)(bp + BF__PW_AHEAD + 16), _MM_HINT_T1);
        }
        __m512 b0 = _mm512_maskz_loadu_ps(k0, bp), b1 = _mm512_maskz_loadu_ps(k1, bp + 16);
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) {
            __m512 av = _mm512_set1_ps(a[(int64_t)i * lda + p]);
            s[i][0] = _mm512_fmadd_ps(av, b0, s[i][0]);
            s[i][1] = _mm512_fmadd_ps(av, b1, s[i][1]);
        }
    }
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++)
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            __mmask16 km = h ? k1 : k0;
            __m512 v = _mm512_mul_ps(one, s[i][h]);   /* block512's alpha */
            v = _mm512_add_ps(v, _mm512_set1_ps(bias[i]));
            if (res) {
                __m512 r = _mm512_maskz_loadu_ps(km, res + (int64_t)i * ldy + 16 * h);
                v = act->res_a ? add_first(r, v) : add_first(v, r);
            }
            if (act) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
            _mm512_mask_storeu_ps(y + (int64_t)i * ldy + 16 * h, km, v);
        }
}

AVX512 static void pw_inplace(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                              const float *bias, const bf__act *act, float *y, int ldy)
{
    /* rows in near-equal blocks of at most 12 (16: 8 and 8, not 12 and 4);
     * the blocks inner, so B's 32 columns come from memory once and from
     * L1 for the next block */
    int nblk = (m + 11) / 12, base = m / nblk, extra = m % nblk;
    const float *res = act && act->res ? act->res : NULL;
    for (int j = 0; j < n; j += 32) {
        int nr = n - j < 32 ? n - j : 32, ahead = j + BF__PW_AHEAD < n;
        __mmask16 k0 = (__mmask16)(nr >= 16 ? 0xffffu : (1u << nr) - 1u);
        __mmask16 k1 = (__mmask16)(nr >= 32 ? 0xffffu : nr > 16 ? (1u << (nr - 16)) - 1u : 0u);
        for (int blk = 0, i0 = 0; blk < nblk; blk++) {
            int mr = base + (blk < extra);
            const float *ab = a + (int64_t)i0 * lda, *bb = bias + i0;
            const float *rb = res ? res + (int64_t)i0 * ldy + j : NULL;
            float *yb = y + (int64_t)i0 * ldy + j;
            int pf = ahead && blk == 0;
            switch (mr) {
#define PW(r) \
    case r: pw_block(r, k, ab, lda, b + j, ldb, k0, k1, pf, bb, act, rb, yb, ldy); break;
                PW(12) PW(11) PW(10) PW(9) PW(8) PW(7) PW(6) PW(5) PW(4) PW(3) PW(2) PW(1)
#undef PW
            default: break;
            }
            i0 += mr;
        }
    }
}

/* The images' columns side by side: column j of the product is position
 * j % osp of image j / osp. */
typedef struct pw_gather {
    const float *x;          /* the first image's channels of the group */
    int64_t osp, img;        /* positions of an image; floats from one image to the next */
} pw_gather;

/* The runs of a panel's columns j0 .. j0 + nr that lie in one image each:
 * run q is lanes first[q] .. first[q] + len[q], lane l of it reading
 * src[q] + l; their count (at most 16). */
static int pw_runs(const pw_gather *g, int j0, int nr, const float **src, int *first, int *len)
{
    int ns = 0;
    for (int j = 0; j < nr; ns++) {
        int64_t im = (j0 + j) / g->osp, o = (j0 + j) % g->osp;
        len[ns] = g->osp - o < nr - j ? (int)(g->osp - o) : nr - j;
        first[ns] = j;
        src[ns] = g->x + im * g->img + o - j;
        j += len[ns];
    }
    return ns;
}

/* panel[p * 16 + l] = column j0 + l's float of input channel p (0 past
 * nr): per run of the panel's columns that lies in one image, a masked
 * load (lanes outside the run neither read nor kept) */
AVX512 static void pw_pack(const void *ctx, int j0, int nr, int k, float *panel)
{
    const pw_gather *g = ctx;
    const float *src[16];
    int first[16], len[16];
    __mmask16 keep[16];
    int ns = pw_runs(g, j0, nr, src, first, len);
    for (int q = 0; q < ns; q++) keep[q] = (__mmask16)(((1u << len[q]) - 1u) << first[q]);
    if (ns == 1 && nr == 16) {
        for (int p = 0; p < k; p++)
            _mm512_storeu_ps(panel + (int64_t)p * 16, _mm512_loadu_ps(src[0] + (int64_t)p * g->osp));
        return;
    }
    for (int p = 0; p < k; p++) {
        __m512 v = _mm512_setzero_ps();
        for (int q = 0; q < ns; q++) v = _mm512_mask_loadu_ps(v, keep[q], src[q] + (int64_t)p * g->osp);
        _mm512_storeu_ps(panel + (int64_t)p * 16, v);
    }
}

/* pw_pack on 8 lanes: each half of the panel's row from the runs' masked
 * loads (a masked-off lane loads +0, so OR-ing the runs' loads gives each
 * lane its own run's float bit for bit; lanes past nr +0) */
__attribute__((target("avx2"))) static void pw_pack_avx2(const void *ctx, int j0, int nr, int k, float *panel)
{
    const pw_gather *g = ctx;
    const float *src[16];
    int first[16], len[16];
    __m256i keep[16][2];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), lane8 = _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15);
    int ns = pw_runs(g, j0, nr, src, first, len);
    for (int q = 0; q < ns; q++) {
        __m256i lo = _mm256_set1_epi32(first[q] - 1), hi = _mm256_set1_epi32(first[q] + len[q]);
        keep[q][0] = _mm256_and_si256(_mm256_cmpgt_epi32(lane, lo), _mm256_cmpgt_epi32(hi, lane));
        keep[q][1] = _mm256_and_si256(_mm256_cmpgt_epi32(lane8, lo), _mm256_cmpgt_epi32(hi, lane8));
    }
    if (ns == 1 && nr == 16) {
        for (int p = 0; p < k; p++) {
            const float *r = src[0] + (int64_t)p * g->osp;
            _mm256_storeu_ps(panel + (int64_t)p * 16, _mm256_loadu_ps(r));
            _mm256_storeu_ps(panel + (int64_t)p * 16 + 8, _mm256_loadu_ps(r + 8));
        }
        return;
    }
    for (int p = 0; p < k; p++) {
        __m256 v0 = _mm256_setzero_ps(), v1 = _mm256_setzero_ps();
        for (int q = 0; q < ns; q++) {
            const float *r = src[q] + (int64_t)p * g->osp;
            v0 = _mm256_or_ps(v0, _mm256_maskload_ps(r, keep[q][0]));
            v1 = _mm256_or_ps(v1, _mm256_maskload_ps(r + 8, keep[q][1]));
        }
        _mm256_storeu_ps(panel + (int64_t)p * 16, v0);
        _mm256_storeu_ps(panel + (int64_t)p * 16 + 8, v1);
    }
}
#endif

void bf__conv_pw_inplace(int m, int n, int k, const float *a, int lda, const float *b, int ldb, const float *bias,
                         const bf__act *act, float *y, int ldy)
{
#if PW512
    pw_inplace(m, n, k, a, lda, b, ldb, bias, act, y, ldy);
#else
    (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)bias, (void)act, (void)y, (void)ldy;
#endif
}

int bf__conv_pw_batched(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                        const bf__act *act, float *y, void *scratch)
{
#if PW512
    int64_t imgs = bf__conv_pw_images(cp);
    if (imgs <= 1 || !bias || !scratch || cp->scratch_floats < bf__conv_pw_floats(cp)) return 0;
    float *tmp = scratch;
    int kc = (int)cp->kc, mg = (int)cp->mg, planes = 1;   /* 0 once the planes' product refused (AVX-512) */
    for (int64_t n = 0; n < cp->n; n += imgs)
        for (int64_t g = 0; g < cp->group; g++) {
            int64_t ni = cp->n - n < imgs ? cp->n - n : imgs, ldt = ni * cp->osp;
            pw_gather pk = {x + (n * cp->c + g * cp->cg) * cp->isp, cp->osp, cp->c * cp->isp};
            int64_t yoff = (n * cp->m + g * cp->mg) * cp->osp;
            /* each image's columns straight into its planes, the residual
             * read there too (AVX2's block; linalg_conv_direct.c's shifted
             * residual): the copy out below measured 2.5% of mobilenet_v2's
             * pass at batch 4 (docs/perf/mobilenet/h46.md, h46-planes) */
            bf__act ka;
            if (planes && bf__sgemm_packed_planes(cp->simd, mg, (int)ldt, kc, wt + g * cp->mg * cp->kc, kc,
                                                  pw_pack_avx2, &pk, bias + g * cp->mg, bf__act_res_at(act, yoff, &ka),
                                                  y + yoff, (int)cp->osp, cp->osp, (cp->m - 1) * cp->osp))
                continue;
            planes = 0;
            /* the residual is laid out as y, not as the product: after it */
            const bf__act *kact = act && act->res ? NULL : act;
            /* 0 never past the first call (the level and K are checked); the
             * caller's path then computes every output, the same bits */
            if (!bf__sgemm_packed(cp->simd, mg, (int)ldt, kc, wt + g * cp->mg * cp->kc, kc,
                                  cp->simd >= BF_SGEMM_AVX512 ? pw_pack : pw_pack_avx2, &pk,
                                  bias + g * cp->mg, kact, tmp, (int)ldt))
                return 0;
            /* row j of the product holds channel j of each image in turn */
            for (int64_t i = 0; i < ni; i++)
                for (int64_t j = 0; j < mg; j++) {
                    float *t = tmp + j * ldt + i * cp->osp;
                    int64_t at = yoff + (i * cp->m + j) * cp->osp;
                    if (act && act->res) bf__conv_res_plane(cp->simd, act, act->res + at, t, cp->osp);
                    memcpy(y + at, t, sizeof(float) * (size_t)cp->osp);
                }
        }
    return 1;
#else
    (void)cp, (void)x, (void)wt, (void)bias, (void)act, (void)y, (void)scratch;
    return 0;
#endif
}
