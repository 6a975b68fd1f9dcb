/* The 1x1 Conv over maps of 256-1024 positions (a multiple of 32:
 * lraspp_mobilenet_v3_large's 16x16 and 32x32 layers at 256x256), with
 * the BatchNormalization, residual Add and activation after it computed
 * while each block of outputs is in registers (AVX-512; whole steps).
 *
 * Why (docs/perf/detectors.md, h17-seg): the general product ran these at
 * 100-135 GFLOP/s in the pass against a core peak of about 234. Past K 256
 * it packs a pair of 16-column panels K deep (up to 123 KiB at K 960),
 * past L1, and every block of 12 rows reads the pair again from L2; its
 * A rows are read in place, 12 streams K floats apart. Then a separate
 * pass reads the whole output back for the BatchNormalization and the
 * HardSwish (9.5% of the campaign's run).
 *
 * Here A (the weights) is packed once a call, per K block and block of
 * rows, [p][row] (moves only: faults rewrite the weights between runs, so
 * nothing is kept), and K is cut into near-equal blocks of at most PS_KC.
 * Per image and K block B's rows are packed 32 positions at a time (kc x
 * 32 floats a pair of panels); each block of up to 12 output channels
 * then runs its chain over every pair, its packed A in L1. Between K
 * blocks the sums go to y and come back (a float stored and loaded is the
 * same float), so each output is still s = fma(w[p], x[p], s) from +0 over
 * the input channels in order, the chain of bf__sgemm (sgemm.h). After the
 * last block, in registers: v = 1 * s, then + bias (the Conv's, if any),
 * then the BatchNormalization's fmaf(v, a, b) with a and b from
 * bf__bnorm_coef, then the residual Add with the Add's A as vaddps's first
 * source (the NaN x86 keeps), then HardSwish's x * clamp(x + 3, 0, 6) / 6
 * or the clamp max(lo, v), min(hi, v): each the operation the separate
 * steps (linalg_conv.c's conv_epilogue, sgemm.c's block512) perform on
 * the same float, so the bits are theirs (docs/ENGINE.md, "The
 * convolution path"). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/alloc.h"
#include "base/simd.h"
#include "asan_region.h"
#include "exec/op.h"
#include "linalg_pwseg.h"
#include "linalg_window.h"
#include "sgemm.h"

#ifndef PS_KC
#define PS_KC 256      /* deepest K block: a block of rows' packed A 12 KiB, a pair's B 32 KiB */
#endif
#define PS_MMAX 1024   /* output channels at most (the BatchNormalization's a and b on the stack) */

#if defined(__x86_64__) && defined(__GNUC__)
#define PS512 1
#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define PS512 0
#endif

int bf__conv_pws_ok(const bf__conv_params *cp)
{
    return PS512 && cp->path == BF__CONV_POINTWISE && cp->simd >= BF_SGEMM_AVX512 &&
           bf__simd_cpu() >= BF_SGEMM_AVX512 && cp->group == 1 && cp->kc >= 16 && cp->mg >= 16 &&
           cp->mg <= PS_MMAX && cp->osp % 32 == 0 && cp->osp >= BF__PWS_NMIN && cp->osp <= BF__PWS_NMAX &&
           cp->isp == cp->osp;
}

/* K blocks: near-equal, at most PS_KC deep */
static int64_t kstep_of(int64_t k)
{
    int64_t nkb = (k + PS_KC - 1) / PS_KC;
    return (k + nkb - 1) / nkb;
}

#if PS512
/* Under AddressSanitizer (build-asan) the blocks (ps_block, inlined into
 * ps_dispatch) are not instrumented (NO_ASAN), as linalg_conv_bcast.c's
 * and sgemm.c's are not: ASan's inline check of each broadcast, load and
 * store of the unrolled block doubled this file's compile (tests/history/
 * round22-h26-build.md). Instead ps_asan checks, before each block, every
 * byte it reads or writes: its packed weights and pair of panels, y's
 * rows (read and written), the residual's rows and the epilogue's
 * per-channel coefficients, with asan_region.h's bf__asan_bytes: ASan's
 * usual report for a poisoned byte (tests/unit/asan_pwseg_oob.c plants y
 * and the residual one float short). What it no longer sees: an
 * index the block computes wrongly inside those spans. Elsewhere none of
 * this is compiled (NO_ASAN is empty): the release build's machine code is
 * unchanged. */
#if defined(__SANITIZE_ADDRESS__)
/* what ps_block(mr, kc, a, bp, first, last, e, i0, res, y, ldy) touches */
static void ps_asan(int mr, int kc, const float *a, const float *bp, int last, const bf__pws_epi *e, int64_t i0,
                    const float *res, const float *y, int64_t ldy)
{
    bf__asan_bytes(a, sizeof(float) * (size_t)mr * (size_t)kc);
    bf__asan_bytes(bp, sizeof(float) * 32 * (size_t)kc);
    for (int i = 0; i < mr; i++) {
        bf__asan_bytes(y + (int64_t)i * ldy, sizeof(float) * 32);
        if (last && res) bf__asan_bytes(res + (int64_t)i * ldy, sizeof(float) * 32);
    }
    if (!last) return;
    bf__asan_bytes(e, sizeof *e);
    bf__asan_bytes(e->bias ? e->bias + i0 : NULL, sizeof(float) * (size_t)mr);
    bf__asan_bytes(e->bna ? e->bna + i0 : NULL, sizeof(float) * (size_t)mr);
    bf__asan_bytes(e->bnb ? e->bnb + i0 : NULL, sizeof(float) * (size_t)mr);
}
#endif

/* `a` is vaddps's first source: the operand x86 returns when both are NaN
 * (sgemm.c's add_first16; the compiler may not swap them) */
AVX512 static inline __attribute__((always_inline)) __m512 add_first(__m512 a, __m512 b)
{
    __m512 o;
    __asm__("vaddps %2, %1, %0" : "=v"(o) : "v"(a), "v"(b));
    return o;
}

/* Rows 0 .. mr of A (mr <= 12; packed, a[mr * p + i] row i's term p)
 * times a packed pair of B's panels (kc rows of 32 floats): per p two
 * loads of B and mr broadcasts of A for 2 mr multiply-adds. first: the
 * sums start at +0, else at y's; last: the epilogue (e, row i0's on) then
 * y, else the sums to y. */
NO_ASAN AVX512 static inline __attribute__((always_inline)) void ps_block(int mr, int kc, const float *a,
                                                                          const float *bp, int first, int last,
                                                                          const bf__pws_epi *e, int64_t i0,
                                                                          const float *res, float *y, int64_t ldy)
{
    __m512 s[12][2];
    if (first)
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) s[i][0] = s[i][1] = _mm512_setzero_ps();
    else
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) {
            s[i][0] = _mm512_loadu_ps(y + (int64_t)i * ldy);
            s[i][1] = _mm512_loadu_ps(y + (int64_t)i * ldy + 16);
        }
    for (int p = 0; p < kc; p++) {
        __m512 b0 = _mm512_load_ps(bp + 32 * p), b1 = _mm512_load_ps(bp + 32 * p + 16);
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) {
            __m512 av = _mm512_set1_ps(a[mr * p + i]);
            s[i][0] = _mm512_fmadd_ps(av, b0, s[i][0]);
            s[i][1] = _mm512_fmadd_ps(av, b1, s[i][1]);
        }
    }
    if (!last) {
        _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++) {
            _mm512_storeu_ps(y + (int64_t)i * ldy, s[i][0]);
            _mm512_storeu_ps(y + (int64_t)i * ldy + 16, s[i][1]);
        }
        return;
    }
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps(), three = _mm512_set1_ps(3.0f),
                 six = _mm512_set1_ps(6.0f);
    const __m512 lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
    _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++)
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            __m512 v = _mm512_mul_ps(one, s[i][h]);   /* the product's alpha */
            if (e->bias) v = _mm512_add_ps(v, _mm512_set1_ps(e->bias[i0 + i]));
            if (e->bna) v = _mm512_fmadd_ps(v, _mm512_set1_ps(e->bna[i0 + i]), _mm512_set1_ps(e->bnb[i0 + i]));
            if (res) {
                __m512 r = _mm512_loadu_ps(res + (int64_t)i * ldy + 16 * h);
                v = e->res_a ? add_first(r, v) : add_first(v, r);
            }
            if (e->hswish) {
                /* clamp_f32(x + 3, 0, 6): x < 0 ? 0 : x is max(0, x)'s
                 * lanes, x > 6 ? 6 : x min(6, x)'s (NaN passes both) */
                __m512 t = _mm512_min_ps(six, _mm512_max_ps(zero, _mm512_add_ps(v, three)));
                v = _mm512_div_ps(_mm512_mul_ps(v, t), six);
            } else if (e->clamp) {
                v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
            }
            _mm512_storeu_ps(y + (int64_t)i * ldy + 16 * h, v);
        }
}

#define PS_CASES(call)                                                                                 \
    switch (mr) {                                                                                      \
    case 12: call(12); break;                                                                          \
    case 11: call(11); break;                                                                          \
    case 10: call(10); break;                                                                          \
    case 9: call(9); break;                                                                            \
    case 8: call(8); break;                                                                            \
    case 7: call(7); break;                                                                            \
    case 6: call(6); break;                                                                            \
    case 5: call(5); break;                                                                            \
    case 4: call(4); break;                                                                            \
    case 3: call(3); break;                                                                            \
    case 2: call(2); break;                                                                            \
    case 1: call(1); break;                                                                            \
    default: break;                                                                                    \
    }

#if defined(__SANITIZE_ADDRESS__)
/* the block of mr rows (1 .. 12), its size a constant in each case (the
 * release build inlines the same switch in pws_run) */
NO_ASAN AVX512 __attribute__((noinline)) static void ps_dispatch(int mr, int kc, const float *a, const float *bp,
                                                                 int first, int last, const bf__pws_epi *e, int64_t i0,
                                                                 const float *res, float *y, int64_t ldy)
{
#define PS_CALL(r) ps_block(r, kc, a, bp, first, last, e, i0, res, y, ldy)
    PS_CASES(PS_CALL)
#undef PS_CALL
}
#endif

/* B's rows k0 .. k0 + kc, positions j .. j + 32, to dst (kc x 32; moves) */
AVX512 static inline void pack_pair(const float *xn, int64_t osp, int64_t k0, int kc, int64_t j, float *dst)
{
    for (int p = 0; p < kc; p++) {
        const float *src = xn + (k0 + p) * osp + j;
        _mm512_store_ps(dst + 32 * p, _mm512_loadu_ps(src));
        _mm512_store_ps(dst + 32 * p + 16, _mm512_loadu_ps(src + 16));
    }
}

AVX512 static void pws_run(const bf__conv_params *cp, const float *x, const float *wt, const bf__pws_epi *e,
                           float *ap, float *bw, float *y)
{
    int64_t k = cp->kc, m = cp->mg, osp = cp->osp, kstep = kstep_of(k);
    /* rows in near-equal blocks of at most 12 (16: 8 and 8, not 12 and 4) */
    int nblk = (int)((m + 11) / 12), base = (int)(m / nblk), extra = (int)(m % nblk);
    float *o = ap;
    for (int64_t k0 = 0; k0 < k; k0 += kstep) {
        int kc = (int)(k - k0 < kstep ? k - k0 : kstep);
        for (int blk = 0, i0 = 0; blk < nblk; blk++) {
            int mr = base + (blk < extra);
            for (int p = 0; p < kc; p++)
                for (int i = 0; i < mr; i++) *o++ = wt[(int64_t)(i0 + i) * k + k0 + p];
            i0 += mr;
        }
    }
    for (int64_t n = 0; n < cp->n; n++) {
        const float *xn = x + n * cp->c * cp->isp;
        float *yn = y + n * cp->m * osp;
        const float *rn = e->res ? e->res + n * cp->m * osp : NULL;
        /* per K block every pair of B packed (kc x osp floats, in L2),
         * then the blocks of rows, each one's packed A in L1 while the
         * pairs go by (measured 5-25% faster than a pair's B in L1 and A
         * streaming from L2 past it, h17-seg) */
        const float *ab = ap;
        for (int64_t k0 = 0; k0 < k; k0 += kstep) {
            int kc = (int)(k - k0 < kstep ? k - k0 : kstep), first = k0 == 0, last = k0 + kc == k;
            for (int64_t j = 0; j < osp; j += 32) pack_pair(xn, osp, k0, kc, j, bw + j * kc);
            for (int blk = 0, i0 = 0; blk < nblk; blk++) {
                int mr = base + (blk < extra);
                for (int64_t j = 0; j < osp; j += 32) {
                    const float *rb = rn ? rn + (int64_t)i0 * osp + j : NULL;
                    float *yb = yn + (int64_t)i0 * osp + j;
#if defined(__SANITIZE_ADDRESS__)
                    ps_asan(mr, kc, ab, bw + j * kc, last, e, i0, rb, yb, osp);
                    ps_dispatch(mr, kc, ab, bw + j * kc, first, last, e, i0, rb, yb, osp);
#else
#define PS_CALL(r) ps_block(r, kc, ab, bw + j * kc, first, last, e, i0, rb, yb, osp)
                    PS_CASES(PS_CALL)
#undef PS_CALL
#endif
                }
                ab += (int64_t)mr * kc;
                i0 += mr;
            }
        }
    }
}
#endif

int bf__conv_pws(const bf__conv_params *cp, const float *x, const float *wt, const bf__pws_epi *e, float *y)
{
#if PS512
    /* the packed A, then B's packed rows of one K block (64-byte aligned) */
    int64_t na = (cp->mg * cp->kc + 15) & ~(int64_t)15;
    float *buf = bf__malloc(sizeof(float) * (size_t)(na + kstep_of(cp->kc) * cp->osp + 16));
    if (!buf) return 0;
    float *ap = (float *)(((uintptr_t)buf + 63) & ~(uintptr_t)63);
    pws_run(cp, x, wt, e, ap, ap + na, y);
    bf__free(buf);
    return 1;
#else
    (void)cp, (void)x, (void)wt, (void)e, (void)y;
    return 0;
#endif
}

int bf__conv_pws_step(const bf__conv_params *cp, const bf__ctx *c)
{
    if (!bf__conv_pws_ok(cp)) return 0;
    float a[PS_MMAX], b[PS_MMAX];
    const bf__act *act = c->act;
    bf__pws_epi e = {.bias = cp->has_bias ? c->in[2]->data : NULL, .lo = -INFINITY, .hi = INFINITY};
    if (act && act->hswish) e.hswish = 1;
    else if (act) e.clamp = 1, e.lo = act->lo, e.hi = act->hi;
    /* a BatchNormalization and a residual come with an activation only
     * (op.h, bf__ctx) */
    if (act && c->bn) {
        for (int64_t ch = 0; ch < cp->m; ch++) bf__bnorm_coef(c->bn, ch, &a[ch], &b[ch]);
        e.bna = a, e.bnb = b;
    }
    if (act && c->res) e.res = c->res, e.res_a = c->res_a;
    /* 0 (no memory for the packed operands): the 1x1 path then computes
     * the same bits */
    return bf__conv_pws(cp, c->in[0]->data, c->in[1]->data, &e, c->out[0]->data);
}
