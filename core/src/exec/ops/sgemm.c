/* bf__sgemm: a matrix product whose every element is the in-order chain of
 * fused multiply-adds over its row and column (see sgemm.h for why).
 *
 * The AVX2 path computes blocks of up to 6 rows x 16 columns, a[i][p]
 * broadcast times row p of a k-major panel of op(B)'s 16 columns, one fma
 * per element per p, in order. The panel is packed (transposed, or
 * zero-padded past n), or, for a plain B whose rows stay in cache, is B's
 * own rows in place. A single column runs eight rows at a time off 8 x 8
 * transposed tiles of A instead. Each is the reference's chain element by
 * element, so blocking, edges and strides never change a bit.
 *
 * The panel may also come from the caller's packer (bf__sgemm_packed: a
 * Conv gathers its panels from padded input planes instead of writing a
 * column matrix), and the block's store may add a bias per row
 * (bf__sgemm_bias), the same y = s + bias the caller's own pass computed,
 * and then apply an activation fused into the Conv (op.h, bf__act), or add
 * a MatMul's bias per column and run its Gelu over the block's rows
 * (bf__sgemm_colepi: a transformer's Linear, the steps' bits).
 * The AVX-512 path (BITFLIP_SIMD=avx512, base/simd.h) computes blocks of
 * up to 12 rows x 32 columns (two panels) with the same per-element
 * operations on 16 lanes. An earlier one of 12 rows x one 16-lane register
 * measured 2-7% slower than the AVX2 kernel on Zen 4, where a 16-lane fma
 * is two 8-lane halves; on Zen 5, with full-width FMA units, the zmm peak
 * is twice the ymm one (docs/BENCHMARKS.md).
 *
 * bf__fma_windows, the same chain for a product whose B rows are windows
 * of one buffer, is sgemm_windows.c's. */
#include "sgemm.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "add_first8.h"
#include "base/alloc.h"
#include "asan_region.h"
#include "base/simd.h"
#include "transpose8.h"

#define MR 6
#define NR 16
#define KSTACK BF_SGEMM_KSTACK /* a panel (AVX-512: a pair) up to this deep lives on the stack (128 KiB) */
#define KDIRECT 256   /* a plain B up to this deep ... */
#define LDDIRECT 1024 /* ... and with rows this close is read in place, unpacked */
#define PGROUP 16     /* panels multiplied by a block of rows in turn (sgemm_panels) */
#ifndef PF_INPLACE
/* How far along its row (floats, 8 panels) the AVX2 block asks for B read
 * in place, and for y's rows it stores (any panel: mobilenet_v2's 16 -> 96
 * expansion of 112x112 maps, 96 store streams, 26-27 -> 24 ms a batch of
 * 32): mobilenet_v2's 16-24-row 1x1
 * projections of 112x112 and 56x56 maps read K rows 12-50 KB apart, 32-144
 * streams no prefetcher follows, from memory at batch 32 (the depthwise step before wrote them
 * for all 32 images); asked for ahead, its 112x112 projection ran 9-10 ms
 * instead of 18-19 a batch of 32 (docs/perf/conv/h42.md, h42-pf: 64, 128
 * and 256 within the host's noise). Hints only: the same bits, and a line
 * past B's or y's end is never read (a prefetch does not fault). */
#define PF_INPLACE 128
#endif

/* a + b with a's NaN when both are NaN, as x86's first source gives it
 * (add_first8): spelled out, since the compiler may swap a + b's operands */
static float add_first(float a, float b) { return a != a ? a + a : a + b; }

static float put(float alpha, float s, int accumulate, float y)
{
    return accumulate ? fmaf(alpha, s, y) : alpha * s;
}

/* A fused map (op.h, bf__act's map: a MatMul's Gelu) over the mr x nc
 * block just stored, while it is in L1: each row through a stack copy, so
 * the map's loop never runs in place (its x and y may not alias: a
 * compiler's alias check could then take the scalar loop). The map is the
 * step's own kernel on the same floats, so the bits are the step's. */
static void map_rows(void (*map)(float *, const float *, int64_t), int mr, int nc, float *y, int ldy)
{
    float t[2 * NR];
    for (int i = 0; i < mr; i++) {
        float *yr = y + (int64_t)i * ldy;
        map(t, yr, nc);
        memcpy(yr, t, sizeof(float) * (size_t)nc);
    }
}

void bf__sgemm_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                   const float *b, int ldb, int accumulate, float *y, int ldy)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++) {
                float av = a[trans_a ? (int64_t)p * lda + i : (int64_t)i * lda + p];
                float bv = b[trans_b ? (int64_t)j * ldb + p : (int64_t)p * ldb + j];
                s = fmaf(av, bv, s);
            }
            float *yp = y + (int64_t)i * ldy + j;
            *yp = put(alpha, s, accumulate, *yp);
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1

#define AVX2 __attribute__((target("avx2,fma")))

/* Under AddressSanitizer (build-asan: GCC defines __SANITIZE_ADDRESS__)
 * the rows of the product (rows_avx512 and rows_avx2, with block512 and
 * block inlined) are not instrumented (NO_ASAN: neither ASan's checks nor
 * UBSan's, asan_region.h says why): ASan checked each scalar
 * A broadcast of the AVX-512 block on its own, 12 shadow checks a k step,
 * half of an ASan test's cycles on the digits CNN (tests/README.md, "The
 * fourteenth round"), and it never saw the AVX2 block's broadcasts (a
 * builtin) nor either block's masked loads and stores.
 * Instead every byte a block reads or writes is checked before it runs,
 * one region check a row or panel: the panels' rows once for all blocks
 * of rows (asan_panels: a packed panel as one span, B's own rows a row at
 * a time), then for each block of rows (asan_block) A's rows and the bias,
 * y's rows over the group's columns and the epilogue's inputs (residual
 * rows, the column bias, the accumulated row).
 * asan_region.h's bf__asan_bytes: ASan's usual report for a poisoned byte.
 * The release build compiles none of this: NO_ASAN is empty there and its
 * machine code is unchanged. */
#if defined(__SANITIZE_ADDRESS__)
static void asan_span(const float *p, int64_t floats)
{
    if (floats > 0) bf__asan_bytes(p, (size_t)floats * sizeof(float));
}

/* a block of mr rows of A (k floats each, lda apart) and its bias */
static void asan_rows(const float *a, int64_t lda, int mr, int k, const float *bias)
{
    for (int i = 0; i < mr; i++) asan_span(a + (int64_t)i * lda, k);
    asan_span(bias, mr);
}
#endif

/* the residual's vector r added to v in the Add's operand order */
#define RES_ADD(add, r, v, res_a) ((res_a) ? add((r), (v)) : add((v), (r)))

/* Rows i0 .. i0 + mr of A times a panel of op(B) (k x 16, rows ps apart),
 * into y's columns j0 .. j0 + nr; mr constant where inlined, so the 2 x mr
 * sums stay in registers. The panel is packed (zero-padded past nr), or,
 * `masked`, a plain B narrower than 16 columns read in place: lanes past
 * nr are never loaded (B's last row may end the buffer) nor stored, so a
 * small product (a DLRM interaction's 9 x 16 x 9 per sample) packs
 * nothing.
 * `lean` (a constant where inlined): a full panel, alpha 1, nothing
 * accumulated and no residual or column bias, the epilogue a Conv's
 * y = s + bias and its activation only. The general block decides nr, the
 * accumulation, the residual and the column bias at run time; on a shallow
 * product it spent a third of its time outside the k loop (perf annotate of
 * mobilenet_v2's K 16 expansion, 35%), and this copy of it, without those
 * branches, masks and the multiply by 1, took K 16-32 products 8-15% faster
 * on a Zen 2 core (docs/perf/mobilenet/h47.md, h47-lean). s * 1 is s for
 * every s the chain makes (it starts at +0 and an fma never returns a
 * signaling NaN; no flush-to-zero is set), so skipping it keeps the bits. */
NO_ASAN
AVX2 static inline __attribute__((always_inline)) void block(int mr, int nr, int k, const float *a, int64_t lda,
                                                             const float *panel, int64_t ps, int masked, int pf, int lean,
                                                             float alpha,
                                                             int accumulate, const float *bias, const bf__act *act,
                                                             const float *res, const float *cb, float *y, int ldy,
                                                             const float *crow)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), lim = _mm256_set1_epi32(nr);
    const __m256i m0 = _mm256_cmpgt_epi32(lim, lane), m1 = _mm256_cmpgt_epi32(lim, _mm256_add_epi32(lane, _mm256_set1_epi32(8)));
    __m256 s[MR][2];
    _Pragma("GCC unroll 6") for (int i = 0; i < mr; i++) s[i][0] = s[i][1] = _mm256_setzero_ps();
    const float *ar[MR];
    _Pragma("GCC unroll 6") for (int i = 0; i < mr; i++) ar[i] = a + i * lda;
    const float *bp = panel;
    if (res) {   /* block512's prefetch of the residual */
        _Pragma("GCC unroll 6") for (int i = 0; i < mr; i++) _mm_prefetch((const char *)(res + (int64_t)i * ldy), _MM_HINT_T0);
    }
    _Pragma("GCC unroll 2") for (int p = 0; p < k; p++, bp += ps) {
        if (pf) _mm_prefetch((const char *)(bp + PF_INPLACE), _MM_HINT_T0);
        __m256 b0 = masked ? _mm256_maskload_ps(bp, m0) : _mm256_loadu_ps(bp);
        __m256 b1 = masked ? _mm256_maskload_ps(bp + 8, m1) : _mm256_loadu_ps(bp + 8);
        _Pragma("GCC unroll 6") for (int i = 0; i < mr; i++) {
            __m256 av = _mm256_broadcast_ss(ar[i] + p);
            s[i][0] = _mm256_fmadd_ps(av, b0, s[i][0]);
            s[i][1] = _mm256_fmadd_ps(av, b1, s[i][1]);
        }
    }
    __m256 al = _mm256_set1_ps(alpha);
    /* max(lo, v) is lo > v ? lo : v, min(hi, v) is hi < v ? hi : v (the
     * instructions return their second operand unless the comparison
     * holds): bf__act_apply's expressions, NaN and -0 included */
    __m256 lo = _mm256_set1_ps(act ? act->lo : 0.0f), hi = _mm256_set1_ps(act ? act->hi : 0.0f);
    _Pragma("GCC unroll 6") for (int i = 0; i < mr; i++) {
        float *yr = y + (int64_t)i * ldy;
        _mm_prefetch((const char *)(yr + PF_INPLACE), _MM_HINT_T0);
        __m256 v0 = s[i][0], v1 = s[i][1];
        if (lean) {   /* alpha 1: s * 1 is s */
        } else if (accumulate) {   /* onto y's own values, or crow's (the same for every row), before the
                             * epilogue below (block512's order); lanes past nr never loaded */
            const float *cr = crow ? crow : yr;
            v0 = _mm256_fmadd_ps(al, v0, nr == NR ? _mm256_loadu_ps(cr) : _mm256_maskload_ps(cr, m0));
            v1 = _mm256_fmadd_ps(al, v1, nr == NR ? _mm256_loadu_ps(cr + 8) : _mm256_maskload_ps(cr + 8, m1));
        } else {
            v0 = _mm256_mul_ps(al, v0);
            v1 = _mm256_mul_ps(al, v1);
        }
        if (bias) {
            __m256 bv = _mm256_set1_ps(bias[i]);
            v0 = _mm256_add_ps(v0, bv);
            v1 = _mm256_add_ps(v1, bv);
        }
        if (!lean && cb) {   /* a MatMul's fused bias Add (op.h, bf__act's cbias): column j's cb[j] */
            __m256 c0 = nr == NR ? _mm256_loadu_ps(cb) : _mm256_maskload_ps(cb, m0);
            __m256 c1 = nr == NR ? _mm256_loadu_ps(cb + 8) : _mm256_maskload_ps(cb + 8, m1);
            v0 = RES_ADD(add_first8, c0, v0, act->cbias_a);
            v1 = RES_ADD(add_first8, c1, v1, act->cbias_a);
        }
        if (!lean && res) {   /* a fused residual Add (op.h, bf__act): lanes past nr never loaded */
            const float *rr = res + (int64_t)i * ldy;
            __m256 r0 = nr == NR ? _mm256_loadu_ps(rr) : _mm256_maskload_ps(rr, m0);
            __m256 r1 = nr == NR ? _mm256_loadu_ps(rr + 8) : _mm256_maskload_ps(rr + 8, m1);
            v0 = RES_ADD(add_first8, r0, v0, act->res_a);
            v1 = RES_ADD(add_first8, r1, v1, act->res_a);
        }
        if (act) {
            v0 = _mm256_min_ps(hi, _mm256_max_ps(lo, v0));
            v1 = _mm256_min_ps(hi, _mm256_max_ps(lo, v1));
        }
        if (lean || nr == NR) {
            _mm256_storeu_ps(yr, v0);
            _mm256_storeu_ps(yr + 8, v1);
        } else {
            float t[NR];
            _mm256_storeu_ps(t, v0);
            _mm256_storeu_ps(t + 8, v1);
            for (int j = 0; j < nr; j++) yr[j] = t[j];
        }
    }
}

/* One column (n = 1), eight rows at a time: an 8 x 8 tile of A transposed
 * so that each p is one vector over the rows, times b[p] broadcast; the
 * panel kernel would spend 15 of its 16 lanes on padding. Rows past the
 * last multiple of 8 take the reference chain. */
AVX2 static void column_avx2(int m, int k, float alpha, const float *a, int lda, const float *b, int64_t bs,
                             int accumulate, float *y, int ldy)
{
    int m8 = m & ~7, k8 = k & ~7;
    for (int i0 = 0; i0 < m8; i0 += 8) {
        __m256 s = _mm256_setzero_ps();
        float t[64];
        for (int p0 = 0; p0 < k8; p0 += 8) {
            bf__transpose8(a + (int64_t)i0 * lda + p0, lda, t, 8);
            for (int q = 0; q < 8; q++)
                s = _mm256_fmadd_ps(_mm256_loadu_ps(t + 8 * q), _mm256_set1_ps(b[(int64_t)(p0 + q) * bs]), s);
        }
        for (int p = k8; p < k; p++) {
            for (int r = 0; r < 8; r++) t[r] = a[(int64_t)(i0 + r) * lda + p];
            s = _mm256_fmadd_ps(_mm256_loadu_ps(t), _mm256_set1_ps(b[(int64_t)p * bs]), s);
        }
        _mm256_storeu_ps(t, s);
        for (int r = 0; r < 8; r++) {
            float *yp = y + (int64_t)(i0 + r) * ldy;
            *yp = accumulate ? fmaf(alpha, t[r], *yp) : alpha * t[r];
        }
    }
    for (int i = m8; i < m; i++) {
        float s = 0.0f;
        for (int p = 0; p < k; p++) s = fmaf(a[(int64_t)i * lda + p], b[(int64_t)p * bs], s);
        float *yp = y + (int64_t)i * ldy;
        *yp = accumulate ? fmaf(alpha, s, *yp) : alpha * s;
    }
}

/* Where one panel of op(B) is read from: packed (rows NR apart) or B's own
 * rows in place (rows ps apart, `masked` when narrower than NR). */
typedef struct panel_at {
    const float *pan;
    int64_t ps;
    int masked, nr, j0;
    /* where its columns go in y (ycols): column c at c + (c / seg) *
     * jump of its row; yoff that of j0, split when the panel's columns
     * reach past j0's segment (seg 0: at c, none split) */
    int64_t seg, jump, yoff;
    int split;
} panel_at;

/* y's columns in segments (bf__sgemm_packed_planes): column c of a row at
 * c + (c / seg) * jump. Not op(B)'s business, so not in bf__gemm_b: the
 * panels are marked with it once made (sgemm_panels). */
typedef struct ycols {
    int64_t seg, jump;
} ycols;

/* Where column c of a split panel's row goes (its offset from the row's
 * start in y), and in *end the end of c's piece: its segment's or the
 * panel's end, whichever comes first. */
static inline int64_t piece_at(const panel_at *p, int64_t c, int64_t *end)
{
    int64_t e = (c / p->seg + 1) * p->seg, pe = p->j0 + p->nr;
    *end = e < pe ? e : pe;
    return c + c / p->seg * p->jump;
}

#if defined(__SANITIZE_ADDRESS__)
/* the k rows of a group's panels the blocks read (block reads all 16
 * lanes of a packed panel's rows: avx2 and not masked), once for all
 * blocks of rows, which read the same panels. A packed panel's rows are
 * one span; in B's own rows (ldb apart) a run of panels side by side is
 * checked a row at a time across the run (one span over a panel's rows
 * would scan B's other columns too, for every panel: quadratic in B's
 * width) */
static void asan_panels(const panel_at *pa, int np, int k, int avx2)
{
    for (int q = 0; q < np && k > 0;) {
        const panel_at *p = &pa[q];
        if (p->ps <= NR) {
            asan_span(p->pan, (int64_t)(k - 1) * p->ps + (avx2 && !p->masked ? NR : p->nr));
            q++;
            continue;
        }
        int e = q + 1;
        while (e < np && pa[e].ps == p->ps && pa[e].pan == pa[e - 1].pan + NR) e++;
        const panel_at *l = &pa[e - 1];
        int64_t w = (int64_t)(l->pan - p->pan) + (avx2 && !l->masked ? NR : l->nr);
        for (int r = 0; r < k; r++) asan_span(p->pan + (int64_t)r * p->ps, w);
        q = e;
    }
}

/* the block of mr rows at i0 over the group of np panels: A's rows and
 * the bias it reads (asan_rows), then what it writes and its epilogue
 * reads over the group's nc columns (its panels side by side in y): y's
 * rows, and the residual rows, column bias and accumulated row where the
 * epilogue reads them. rows_avx2 and rows_avx512 check a block so. */
static void asan_block(const panel_at *pa, int np, int i0, int mr, int k, const float *a, int lda,
                       const float *bias, const bf__act *act, const float *y, int ldy, const float *crow)
{
    const int j0 = np ? pa[0].j0 : 0, nc = np ? pa[np - 1].j0 + pa[np - 1].nr - j0 : 0;
    const float *yb = y + (int64_t)i0 * ldy + j0, *res = act && act->res ? act->res + (int64_t)i0 * ldy + j0 : NULL;
    asan_rows(a + (int64_t)i0 * lda, lda, mr, k, bias ? bias + i0 : NULL);
    if (act) bf__asan_bytes(act, sizeof *act);
    for (int q = 0; np && pa[0].seg && q < np; q++)   /* y's columns in segments: each piece where it goes */
        for (int i = 0; i < mr; i++)
            for (int64_t c = pa[q].j0, e; c < pa[q].j0 + pa[q].nr; c = e) {
                int64_t at = (int64_t)(i0 + i) * ldy + piece_at(&pa[q], c, &e);
                asan_span(y + at, e - c);
                if (act && act->res) asan_span(act->res + at, e - c);
            }
    for (int i = 0; !(np && pa[0].seg) && i < mr; i++) {
        asan_span(yb + (int64_t)i * ldy, nc);
        if (res) asan_span(res + (int64_t)i * ldy, nc);
    }
    asan_span(act && act->cbias ? act->cbias + j0 : NULL, nc);
    asan_span(crow ? crow + j0 : NULL, nc);
}
/* the rows functions' checks: nothing at all outside ASan (their machine
 * code is the release build's) */
#define ASAN_PANELS(m, pa, np, k, avx2) ((m) > 0 ? asan_panels(pa, np, k, avx2) : (void)0)
#define ASAN_BLOCK(...) asan_block(__VA_ARGS__)
#else
#define ASAN_PANELS(m, pa, np, k, avx2) ((void)0)
#define ASAN_BLOCK(...) ((void)0)
#endif

/* A split panel's mr rows of the residual (base: row 0's start, ldy
 * apart) into a tile of NR-float rows, piece by piece; split_scatter the
 * block's rows from the tile to y's pieces. Moves only. */
static void split_gather(const panel_at *p, int mr, const float *base, int ldy, float *tile)
{
    for (int i = 0; i < mr; i++)
        for (int64_t c = p->j0, e; c < p->j0 + p->nr; c = e) {
            const float *at = base + (int64_t)i * ldy + piece_at(p, c, &e);
            memcpy(tile + i * NR + (c - p->j0), at, sizeof(float) * (size_t)(e - c));
        }
}

static void split_scatter(const panel_at *p, int mr, const float *tile, float *base, int ldy)
{
    for (int i = 0; i < mr; i++)
        for (int64_t c = p->j0, e; c < p->j0 + p->nr; c = e) {
            float *at = base + (int64_t)i * ldy + piece_at(p, c, &e);
            memcpy(at, tile + i * NR + (c - p->j0), sizeof(float) * (size_t)(e - c));
        }
}

/* The rows of A over a group of panels, a block of rows over every panel
 * of the group before the next block: each block's rows of y are then
 * written left to right, a few streams the prefetcher follows, instead of
 * one 64-byte line of each of the m rows per panel (on mobilenet_v2's 1x1
 * convolutions with a wide output, 96 rows x 12,544 columns, the stores
 * stalled on every line). The order of the blocks changes which elements
 * are computed first, never an element's chain. Not inlined: with y's
 * segments added, GCC inlined it into sgemm_panels, and one profile
 * counted 2% more samples in the pair than with it apart. */
NO_ASAN
AVX2 static __attribute__((noinline)) void rows_avx2(int m, int np, const panel_at *pa, int k, const float *a,
                                                     int lda, float alpha, int accumulate, const float *bias,
                                                     const bf__act *act, float *y, int ldy, const float *crow)
{
    /* near-equal blocks, as rows_avx512 cuts them (64: 10 x 6 and 4 -> 9 x 6 and 2 x 5) */
    int nblk = (m + MR - 1) / MR, base = nblk ? m / nblk : 0, extra = nblk ? m % nblk : 0;
    float yt[MR * NR], rt[MR * NR];   /* a split panel's block of y and of the residual */
    /* block()'s lean copy for full panels: a Conv's own epilogue, nothing else */
    const int lean = alpha == 1.0f && !accumulate && !crow && !(act && (act->res || act->cbias));
    ASAN_PANELS(m, pa, np, k, 1);
    for (int b = 0, i0 = 0; b < nblk; b++) {
        int mr = base + (b < extra);
        const float *ab = a + (int64_t)i0 * lda, *bb = bias ? bias + i0 : NULL;
        ASAN_BLOCK(pa, np, i0, mr, k, a, lda, bias, act, y, ldy, crow);
        for (int q = 0; q < np; q++) {
            const float *pan = pa[q].pan;
            int64_t ps = pa[q].ps;
            int nr = pa[q].nr, ld = ldy;
            float *yb = y + (int64_t)i0 * ldy + pa[q].j0 + pa[q].yoff;
            const float *rb = act && act->res ? act->res + (int64_t)i0 * ldy + pa[q].j0 + pa[q].yoff : NULL;
            const float *cr = crow ? crow + pa[q].j0 : NULL;
            const float *cb = act && act->cbias ? act->cbias + pa[q].j0 : NULL;
            if (pa[q].split) {   /* into tiles, the residual's pieces gathered first, y's scattered after */
                if (rb) split_gather(&pa[q], mr, act->res + (int64_t)i0 * ldy, ldy, rt);
                yb = yt, rb = rb ? rt : NULL, ld = NR;
            }
            switch (mr) {
#define ROWS(r)                                                                                                 \
    case r:                                                                                                     \
        if (pa[q].masked) block(r, nr, k, ab, lda, pan, ps, 1, 0, 0, alpha, accumulate, bb, act, rb, cb, yb, ld, cr); \
        else if (lean && nr == NR && ps != NR)                                                                 \
            block(r, NR, k, ab, lda, pan, ps, 0, 1, 1, 1.0f, 0, bb, act, NULL, NULL, yb, ld, NULL);             \
        else if (lean && nr == NR) block(r, NR, k, ab, lda, pan, NR, 0, 0, 1, 1.0f, 0, bb, act, NULL, NULL, yb, ld, NULL); \
        else if (ps != NR) block(r, nr, k, ab, lda, pan, ps, 0, 1, 0, alpha, accumulate, bb, act, rb, cb, yb, ld, cr); \
        else block(r, nr, k, ab, lda, pan, ps, 0, 0, 0, alpha, accumulate, bb, act, rb, cb, yb, ld, cr);       \
        break;
                ROWS(6) ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
#undef ROWS
            default: break;
            }
            if (act && act->map) map_rows(act->map, mr, nr, yb, ld);
            if (pa[q].split) split_scatter(&pa[q], mr, yt, y + (int64_t)i0 * ldy, ldy);
        }
        i0 += mr;
    }
}

#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
#define MR5 12 /* rows of the 16-lane kernel's block */
/* Steps of k ahead that block512 asks for B's lines when its block has 4
 * rows or fewer: mobilenet_v2's classifier (4 x 1280 times 1280 x 1000,
 * 5 MB of packed weights from memory each batch) took 0.32-0.40 ms a batch
 * of 4 without, 0.14-0.19 with 8, 16, 32 or 64 alike, resnet18's fc
 * 0.12-0.15 -> 0.08-0.09 (ONNX Runtime 0.24 and 0.10; docs/perf/mobilenet/h32.md) */
#define PF_AHEAD 16

AVX512 static inline __attribute__((always_inline)) __m512 add_first16(__m512 a, __m512 b)
{
    __m512 o;
    __asm__("vaddps %2, %1, %0" : "=v"(o) : "v"(a), "v"(b));   /* add_first8's, 16 lanes */
    return o;
}

/* The AVX-512 block: rows i0 .. i0 + mr of A times one or (`two`) two
 * adjacent panels (columns j0 .. j0 + 32), one 16-lane register per row
 * and panel: 24 sums of the 32 registers, each a[i][p] broadcast once per
 * p for 32 columns, each panel row loaded once per p for 12 rows (the
 * AVX2 block: 16 columns, 6 rows). Per element it is the same chain as
 * block(): s = fma(a, b, s) from 0 over p in order, then alpha's multiply
 * (or fma into y), the bias's add, the activation's max and min, with the
 * same instructions on 16 lanes instead of 8. Lanes past a panel's nr are
 * masked: never loaded (a plain B read in place may end there) nor stored. */
NO_ASAN
AVX512 static inline __attribute__((always_inline)) void block512(int mr, int two, const panel_at *p0,
                                                                  const panel_at *p1, int k, const float *a,
                                                                  int64_t lda, float alpha, int accumulate,
                                                                  const float *bias, const bf__act *act,
                                                                  const float *res, const float *cb, float *y, int ldy,
                                                                  const float *crow)
{
    const __mmask16 k0 = (__mmask16)((1u << p0->nr) - 1u), k1 = two ? (__mmask16)((1u << p1->nr) - 1u) : 0;
    const float *b0p = p0->pan, *b1p = two ? p1->pan : p0->pan;
    const int64_t ps0 = p0->ps, ps1 = two ? p1->ps : 0;
    __m512 s[MR5][2];
    _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) s[i][0] = s[i][1] = _mm512_setzero_ps();
    /* A's rows as four bases three rows apart plus 0, 1 or 2 row strides
     * in bytes: the 12 broadcasts address [base + stride * 1 or 2] off 5
     * registers (12 row pointers spilled to the stack) */
    const char *ab[4];
    const int64_t ldab = lda * (int64_t)sizeof(float);
    _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) ab[q] = (const char *)(a + 3 * q * lda);
    /* the residual's lines asked for now, read after the chains: a batch's
     * activations sit in L3, and the epilogue would wait on each */
    if (res) {
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) {
            _mm_prefetch((const char *)(res + (int64_t)i * ldy), _MM_HINT_T0);
            if (two) _mm_prefetch((const char *)(res + (int64_t)i * ldy + NR), _MM_HINT_T0);
        }
    }
    _Pragma("GCC unroll 4") for (int p = 0; p < k; p++, b0p += ps0, b1p += ps1) {
        /* A block of 4 rows or fewer (a classifier's Gemm at a small
         * batch: A the batch's rows, B its weights) reads B faster than the
         * hardware prefetcher brings it: B's lines are asked for PF_AHEAD
         * steps of k on (within the panel; hints only, no value moves) */
        if (mr <= 4 && p + PF_AHEAD < k) {
            _mm_prefetch((const char *)(b0p + PF_AHEAD * ps0), _MM_HINT_T0);
            if (two) _mm_prefetch((const char *)(b1p + PF_AHEAD * ps1), _MM_HINT_T0);
        }
        __m512 b0 = _mm512_maskz_loadu_ps(k0, b0p);
        __m512 b1 = two ? _mm512_maskz_loadu_ps(k1, b1p) : b0;
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) {
            __m512 av = _mm512_set1_ps(*(const float *)(ab[i / 3] + (i % 3) * ldab + (int64_t)p * 4));
            s[i][0] = _mm512_fmadd_ps(av, b0, s[i][0]);
            if (two) s[i][1] = _mm512_fmadd_ps(av, b1, s[i][1]);
        }
    }
    const __m512 al = _mm512_set1_ps(alpha);
    /* max(lo, v), min(hi, v): block()'s operand order, so NaN and -0 give
     * the same lanes (vmaxps/vminps return the second operand unless the
     * comparison holds, at every width) */
    const __m512 lo = _mm512_set1_ps(act ? act->lo : 0.0f), hi = _mm512_set1_ps(act ? act->hi : 0.0f);
    _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) {
        float *yr = y + (int64_t)i * ldy;
        _Pragma("GCC unroll 2") for (int h = 0; h < 1 + two; h++) {
            __mmask16 km = h ? k1 : k0;
            float *yh = yr + h * NR;
            __m512 v = s[i][h];
            v = accumulate ? _mm512_fmadd_ps(al, v, _mm512_maskz_loadu_ps(km, crow ? crow + h * NR : yh))
                           : _mm512_mul_ps(al, v);
            if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[i]));
            if (cb) v = RES_ADD(add_first16, _mm512_maskz_loadu_ps(km, cb + h * NR), v, act->cbias_a);
            if (res) {   /* a fused residual Add (op.h, bf__act) */
                __m512 r = _mm512_maskz_loadu_ps(km, res + (int64_t)i * ldy + h * NR);
                v = RES_ADD(add_first16, r, v, act->res_a);
            }
            if (act) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
            _mm512_mask_storeu_ps(yh, km, v);
        }
    }
}

/* rows_avx2 on the AVX-512 block: the group's panels two at a time (the
 * pair's columns adjacent: sgemm_panels lays them 16 apart). */
NO_ASAN
AVX512 static void rows_avx512(int m, int np, const panel_at *pa, int k, const float *a, int lda, float alpha,
                               int accumulate, const float *bias, const bf__act *act, float *y, int ldy,
                               const float *crow)
{
    /* the rows in blocks of near-equal size (64: 11, 11, 11, 11, 10, 10,
     * not 12 x 5 and 4): a block of 4 rows has 8 chains in flight, which
     * the FMA units' latency leaves idle between */
    int nblk = (m + MR5 - 1) / MR5, base = nblk ? m / nblk : 0, extra = nblk ? m % nblk : 0;
    ASAN_PANELS(m, pa, np, k, 0);
    for (int b = 0, i0 = 0; b < nblk; b++) {
        int mr = base + (b < extra);
        const float *ab = a + (int64_t)i0 * lda, *bb = bias ? bias + i0 : NULL;
        ASAN_BLOCK(pa, np, i0, mr, k, a, lda, bias, act, y, ldy, crow);
        for (int q = 0; q < np; q += 2) {
            const panel_at *p0 = &pa[q], *p1 = q + 1 < np ? &pa[q + 1] : NULL;
            float *yb = y + (int64_t)i0 * ldy + p0->j0;
            const float *rb = act && act->res ? act->res + (int64_t)i0 * ldy + p0->j0 : NULL;
            const float *cr = crow ? crow + p0->j0 : NULL;
            const float *cb = act && act->cbias ? act->cbias + p0->j0 : NULL;
            switch (mr) {
#define ROWS5(r)                                                                                      \
    case r:                                                                                           \
        if (p1) block512(r, 1, p0, p1, k, ab, lda, alpha, accumulate, bb, act, rb, cb, yb, ldy, cr);  \
        else block512(r, 0, p0, p0, k, ab, lda, alpha, accumulate, bb, act, rb, cb, yb, ldy, cr);     \
        break;
                ROWS5(12) ROWS5(11) ROWS5(10) ROWS5(9) ROWS5(8) ROWS5(7) ROWS5(6) ROWS5(5) ROWS5(4) ROWS5(3)
                ROWS5(2) ROWS5(1)
#undef ROWS5
            default: break;
            }
            if (act && act->map) map_rows(act->map, mr, p0->nr + (p1 ? p1->nr : 0), yb, ldy);
        }
        i0 += mr;
    }
}

/* The panel of op(B)'s columns j0 .. j0 + nr: packed k-major into `panel`
 * (from a transposed B, a plain one, or the caller's packer), or a plain
 * B's own rows in place where packing would cost more than it saves.
 * wide: the AVX-512 block's panels (sgemm_panels). */
AVX2 static panel_at panel_of(const bf__gemm_b *src, int m, int j0, int nr, int k, float *panel, int wide)
{
    int mrmax = MR;
    const float *b = src->b;
    int ldb = src->ldb;
    panel_at pa = {panel, NR, 0, nr, j0, 0, 0, 0, 0};
    if (src->packed) {   /* packed whole beforehand (pack_whole) */
        pa.pan = src->packed + (int64_t)(j0 / NR) * k * NR;
    } else if (src->pack) {
        src->pack(src->ctx, j0, nr, k, panel);
    } else if (src->trans) {
        if (nr < NR) memset(panel, 0, sizeof(float) * (size_t)k * NR);
        int j8 = nr & ~7, k8 = k & ~7;
        for (int j = 0; j < j8; j += 8)
            for (int p = 0; p < k8; p += 8)
                bf__transpose8(b + (int64_t)(j0 + j) * ldb + p, ldb, panel + (int64_t)p * NR + j, NR);
        for (int j = 0; j < nr; j++) {
            const float *col = b + (int64_t)(j0 + j) * ldb;
            for (int p = j < j8 ? k8 : 0; p < k; p++) panel[(int64_t)p * NR + j] = col[p];
        }
    } else if (nr < NR && (m <= 2 * mrmax || (k <= KDIRECT && ldb <= LDDIRECT))) {
        pa.masked = 1;   /* B's own rows, read with masks */
        pa.pan = b + j0;
        pa.ps = ldb;
    } else if (nr == NR && (m <= mrmax || (k <= KDIRECT && (ldb <= LDDIRECT || (!wide && m <= 4 * mrmax))))) {
        /* B's own rows serve as the panel, unpacked: for one block of
         * rows packing costs as much as the product, and a shallow
         * panel's rows stay in L1 across the row blocks anyway (unless
         * B's rows lie so far apart that they collide in the cache). On
         * the AVX2 block, up to four blocks of rows over rows of any
         * length too: mobilenet_v2's 16-24-row 1x1 projections of 56x56
         * and 112x112 maps, whose packing (K rows 12-50 KB apart read
         * 64 bytes each) took as long as the product, ran 1.2-1.5x
         * faster on B in place on a Zen 2 core (docs/perf/mobilenet/h41.md,
         * h41-inplace; the AVX-512 path has its own kernel for them,
         * linalg_conv_pointwise.c) */
        pa.pan = b + j0;
        pa.ps = ldb;
    } else {
        for (int p = 0; p < k; p++) {
            float *row = panel + (int64_t)p * NR;
            const float *bs = b + (int64_t)p * ldb + j0;
            if (nr == NR) {
                _mm256_storeu_ps(row, _mm256_loadu_ps(bs));
                _mm256_storeu_ps(row + 8, _mm256_loadu_ps(bs + 8));
                continue;
            }
            for (int j = 0; j < nr; j++) row[j] = bs[j];
            for (int j = nr; j < NR; j++) row[j] = 0.0f;
        }
    }
    return pa;
}

/* Every panel of op(B) into work, as panel_of packs each (bf__sgemm_work):
 * a plain B a row at a time, each row's 16-column pieces to their panels;
 * a transposed B panel by panel, each of its 16 rows of B read in order. */
AVX2 static void pack_whole(const bf__gemm_b *src, int m, int n, int k, float *work)
{
    int full = n / NR, np = (n + NR - 1) / NR;
    if (src->trans) {
        for (int q = 0; q < np; q++) {
            int j0 = q * NR;
            (void)panel_of(src, m, j0, n - j0 < NR ? n - j0 : NR, k, work + (int64_t)q * k * NR, 0);
        }
        return;
    }
    for (int p = 0; p < k; p++) {
        const float *row = src->b + (int64_t)p * src->ldb;
        float *dst = work + (int64_t)p * NR;
        for (int q = 0; q < full; q++, dst += (int64_t)k * NR) {
            _mm256_storeu_ps(dst, _mm256_loadu_ps(row + q * NR));
            _mm256_storeu_ps(dst + 8, _mm256_loadu_ps(row + q * NR + 8));
        }
        if (full < np) {
            int nr = n - full * NR;
            for (int j = 0; j < NR; j++) dst[j] = j < nr ? row[full * NR + j] : 0.0f;
        }
    }
}

/* Groups of up to `group` panels of 16 columns (their packed copies side
 * by side in `panel`, k x 16 floats each), each group multiplied by every
 * row of A. */
AVX2 static void sgemm_panels(const bf__gemm_b *src, int m, int n, int k, float alpha, const float *a,
                              int lda, int accumulate, const float *bias, const bf__act *act, float *y, int ldy,
                              const float *crow, float *panel, int group, int wide,
                              const ycols *yc)
{
    panel_at pa[PGROUP];
    for (int g0 = 0; g0 < n; g0 += group * NR) {
        int np = 0;
        for (int j0 = g0; j0 < n && j0 < g0 + group * NR; j0 += NR, np++) {
            int nr = n - j0 < NR ? n - j0 : NR;
            pa[np] = panel_of(src, m, j0, nr, k, panel + (int64_t)np * k * NR, wide);
            if (yc) {
                pa[np].seg = yc->seg, pa[np].jump = yc->jump, pa[np].yoff = j0 / yc->seg * yc->jump;
                pa[np].split = j0 / yc->seg != (j0 + nr - 1) / yc->seg;
            }
        }
        if (wide) rows_avx512(m, np, pa, k, a, lda, alpha, accumulate, bias, act, y, ldy, crow);
        else rows_avx2(m, np, pa, k, a, lda, alpha, accumulate, bias, act, y, ldy, crow);
    }
}
#endif

int bf__sgemm_simd(void)
{
#ifdef HAVE_AVX2_PATH
    return bf__simd_avx2();
#else
    return 0;
#endif
}

int bf__sgemm_best(void)
{
#ifdef HAVE_AVX2_PATH
    return bf__simd_level();
#else
    return BF_SGEMM_REF;
#endif
}

/* The product's levels are simd.h's: sgemm_at lowers a level with it. */
_Static_assert((int)BF_SGEMM_REF == (int)BF__SIMD_REF && (int)BF_SGEMM_AVX2 == (int)BF__SIMD_AVX2 &&
                   (int)BF_SGEMM_AVX512 == (int)BF__SIMD_AVX512,
               "sgemm levels are simd.h's");

/* The product through `level`'s kernel (lowered to what this CPU has; the
 * caller chose the level, BITFLIP_SIMD included, so it is not read again
 * per product).
 * 0 where there is no kernel (no AVX2, or A transposed: rare in models),
 * or no memory for a panel deeper than the stack one: the caller then
 * computes the same bits another way. */
/* Whether a product packs op(B) panel by panel (panel_of's last two
 * branches for every panel; m past two blocks of rows): what pack_whole may
 * do at once instead. */
static int packs_b(int m, int k, int trans_b, int ldb)
{
    return m > 2 * MR && (trans_b || k > KDIRECT || ldb > LDDIRECT);
}

static int sgemm_at(int level, int trans_a, const bf__gemm_b *src, int m, int n, int k, float alpha, const float *a,
                    int lda, int accumulate, const float *bias, const bf__act *act, float *y, int ldy, float *work,
                    const float *crow, const ycols *yc)
{
    if (m <= 0 || n <= 0) return 1;
    int best = bf__simd_cpu();
    if (level > best) level = best;
#ifdef HAVE_AVX2_PATH
    if (trans_a || level < BF_SGEMM_AVX2) return 0;
    if (n == 1 && !src->pack && !bias && !act && !crow) {
        column_avx2(m, k, alpha, a, lda, src->b, src->trans ? 1 : src->ldb, accumulate, y, ldy);
        return 1;
    }
    bf__gemm_b whole;
    if (work && !src->pack && !src->packed && packs_b(m, k, src->trans, src->ldb)) {
        pack_whole(src, m, n, k, work);
        whole = (bf__gemm_b){.packed = work};
        src = &whole;
    }
    /* the AVX-512 block takes two panels at once: twice the panel memory */
    int wide = level >= BF_SGEMM_AVX512, per = wide ? 2 : 1;
    if (wide && yc) return 0;   /* the AVX-512 block's panel pairs store y's columns as one run */
    _Alignas(64) float stack[2 * NR * KSTACK];
    /* (packed whole: the panels are in work, the stack's go unused) */
    float *panel = k <= KSTACK || src->packed ? stack : bf__malloc(sizeof(float) * (size_t)k * NR * (size_t)per);
    if (!panel) return 0;
    /* as many panels as the stack holds, up to PGROUP, for a shallow
     * product; deeper ones (k 320-576 of mobilenet_v2's 7x7 and 14x14
     * layers) measured 3-7% slower grouped, A's blocks then falling out of
     * L1 between panels (AVX2; the AVX-512 block always takes a pair) */
    int group = k <= KDIRECT ? (k > 0 ? per * KSTACK / k : PGROUP) : per;
    sgemm_panels(src, m, n, k, alpha, a, lda, accumulate, bias, act, y, ldy, crow, panel,
                 group > PGROUP ? PGROUP : group, wide, yc);
    if (panel != stack) bf__free(panel);
    return 1;
#else
    (void)trans_a, (void)src, (void)k, (void)alpha, (void)a, (void)lda, (void)accumulate, (void)bias, (void)act,
        (void)y, (void)ldy, (void)work, (void)crow, (void)yc;
    return 0;
#endif
}

void bf__sgemm_level(int level, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, int accumulate, float *y, int ldy)
{
    bf__gemm_b src = {.b = b, .ldb = ldb, .trans = trans_b};
    if (!sgemm_at(level, trans_a, &src, m, n, k, alpha, a, lda, accumulate, NULL, NULL, y, ldy, NULL, NULL, NULL))
        bf__sgemm_ref(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, accumulate, y, ldy);
}

size_t bf__sgemm_work_floats(int m, int n, int k, int trans_b, int ldb)
{
    if (m <= 0 || n <= 1 || k <= 0 || !packs_b(m, k, trans_b, ldb)) return 0;
    size_t f = (size_t)k * (size_t)((n + NR - 1) / NR) * NR;
    return f <= BF_SGEMM_WORK_MAX ? f : 0;
}

int bf__sgemm_pack(int trans_b, int n, int k, const float *b, int ldb, float *out)
{
#ifdef HAVE_AVX2_PATH
    if (n <= 0 || k <= 0 || bf__simd_cpu() < BF_SGEMM_AVX2) return 0;
    bf__gemm_b src = {.b = b, .ldb = ldb, .trans = trans_b};
    pack_whole(&src, INT_MAX, n, k, out);   /* m: any (a transposed B's panels do not depend on it) */
    return 1;
#else
    (void)trans_b, (void)n, (void)k, (void)b, (void)ldb, (void)out;
    return 0;
#endif
}

void bf__sgemm_work(int level, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                    int ldb, int accumulate, float *y, int ldy, float *work, const bf__act *act, const float *crow)
{
    bf__sgemm_prepacked(level, trans_b, m, n, k, alpha, a, lda, b, ldb, accumulate, y, ldy, work, NULL, act, crow);
}

void bf__sgemm_prepacked(int level, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, int accumulate, float *y, int ldy, float *work, const float *packed,
                         const bf__act *act, const float *crow)
{
    bf__gemm_b src = {.b = b, .ldb = ldb, .trans = trans_b, .packed = packed};
    if (crow && !accumulate) crow = NULL;
    if (sgemm_at(level, 0, &src, m, n, k, alpha, a, lda, accumulate, NULL, act, y, ldy, work, crow, NULL)) return;
    for (int i = 0; crow && i < m; i++) memcpy(y + (int64_t)i * ldy, crow, sizeof(float) * (size_t)n);
    bf__sgemm_ref(0, trans_b, m, n, k, alpha, a, lda, b, ldb, accumulate, y, ldy);
    for (int i = 0; act && i < m; i++) {   /* the blocks' epilogue in their order, after the accumulate */
        float *yr = y + (int64_t)i * ldy;
        const float *cb = act->cbias, *rr = act->res ? act->res + (int64_t)i * ldy : NULL;
        for (int j = 0; cb && j < n; j++) yr[j] = act->cbias_a ? add_first(cb[j], yr[j]) : add_first(yr[j], cb[j]);
        for (int j = 0; rr && j < n; j++) yr[j] = act->res_a ? add_first(rr[j], yr[j]) : add_first(yr[j], rr[j]);
        for (int j = 0; j < n; j++) yr[j] = bf__act_apply(act, yr[j]);
        for (int j = 0; act->map && j < n; j += 2 * NR) map_rows(act->map, 1, n - j < 2 * NR ? n - j : 2 * NR, yr + j, ldy);
    }
}

void bf__sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
               int ldb, int accumulate, float *y, int ldy)
{
    bf__sgemm_level(bf__sgemm_best(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, accumulate, y, ldy);
}

void bf__sgemm_bias(int level, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                    const float *bias, const bf__act *act, float *y, int ldy)
{
    bf__gemm_b src = {.b = b, .ldb = ldb};
    if (sgemm_at(level, 0, &src, m, n, k, 1.0f, a, lda, 0, bias, act, y, ldy, NULL, NULL, NULL)) return;
    bf__sgemm_ref(0, 0, m, n, k, 1.0f, a, lda, b, ldb, 0, y, ldy);
    for (int i = 0; i < m; i++) {
        float *yr = y + (int64_t)i * ldy;
        for (int j = 0; j < n; j++) yr[j] = yr[j] + bias[i];
        const float *rr = act && act->res ? act->res + (int64_t)i * ldy : NULL;
        for (int j = 0; rr && j < n; j++) yr[j] = act->res_a ? add_first(rr[j], yr[j]) : add_first(yr[j], rr[j]);
        if (act)
            for (int j = 0; j < n; j++) yr[j] = bf__act_apply(act, yr[j]);
    }
}

void bf__sgemm_colepi(int level, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                      const bf__act *act, float *y, int ldy, float *work, const float *packed)
{
    bf__gemm_b src = {.b = b, .ldb = ldb, .packed = packed};
    if (sgemm_at(level, 0, &src, m, n, k, 1.0f, a, lda, 0, NULL, act, y, ldy, work, NULL, NULL)) return;
    /* the reference: the steps' own operations, one pass each, in order */
    bf__sgemm_ref(0, 0, m, n, k, 1.0f, a, lda, b, ldb, 0, y, ldy);
    for (int i = 0; i < m; i++) {
        float *yr = y + (int64_t)i * ldy;
        const float *cb = act->cbias, *rr = act->res ? act->res + (int64_t)i * ldy : NULL;
        for (int j = 0; cb && j < n; j++) yr[j] = act->cbias_a ? add_first(cb[j], yr[j]) : add_first(yr[j], cb[j]);
        for (int j = 0; rr && j < n; j++) yr[j] = act->res_a ? add_first(rr[j], yr[j]) : add_first(yr[j], rr[j]);
        for (int j = 0; j < n; j++) yr[j] = bf__act_apply(act, yr[j]);
        for (int j = 0; act->map && j < n; j += 2 * NR) map_rows(act->map, 1, n - j < 2 * NR ? n - j : 2 * NR, yr + j, ldy);
    }
}

int bf__sgemm_packed(int level, int m, int n, int k, const float *a, int lda, bf__pack_fn pack, const void *ctx,
                     const float *bias, const bf__act *act, float *y, int ldy)
{
    bf__gemm_b src = {.pack = pack, .ctx = ctx};
    return sgemm_at(level, 0, &src, m, n, k, 1.0f, a, lda, 0, bias, act, y, ldy, NULL, NULL, NULL);
}

int bf__sgemm_packed_planes(int level, int m, int n, int k, const float *a, int lda, bf__pack_fn pack, const void *ctx,
                            const float *bias, const bf__act *act, float *y, int ldy, int64_t seg, int64_t jump)
{
    if (seg < 1 || jump < 0) return 0;
    bf__gemm_b src = {.pack = pack, .ctx = ctx};
    const ycols yc = {seg, jump};
    return sgemm_at(level, 0, &src, m, n, k, 1.0f, a, lda, 0, bias, act, y, ldy, NULL, NULL, &yc);
}
