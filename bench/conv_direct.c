/* A direct 3x3 convolution against the product the Conv op runs today
 * (bf__conv_packed: panels gathered from zero-padded planes, the 12 x 32
 * block of sgemm.c), on resnet18's stride-1 3x3 shapes, one call over a
 * few images (docs/BENCHMARKS.md, "A direct 3x3 kernel off the padded planes").
 *
 * The direct kernel packs no input: output positions are counted in the
 * padded plane's own coordinates (q = oh * wp + ow, ow < wp), so tap (kh,
 * kw) of channel c for 16 consecutive q is 16 consecutive floats of the
 * padded plane at q + c * plane + kh * wp + kw, loaded in place; the lanes
 * whose ow falls in the padding columns are computed and dropped (a
 * compress before the store). A block is MR output channels x NV vectors
 * of 16 positions, the weights broadcast as the packed block does, and
 * the k loop runs in the column matrix's order (bf__conv_krow), so every
 * output is the same chain of fused multiply-adds as today's: the bench
 * checks the outputs are the same bits before it times anything.
 *
 *   build/bitflip-bench-direct [IMAGES [ROUNDS]]     (IMAGES 4, ROUNDS 5)
 *
 * Thread CPU time, best of ROUNDS, each round repeated for about 0.2 s.
 * Not part of the tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ops/linalg_window.h"
#include "exec/ops/sgemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "bitflip-bench-direct: out of memory\n");
        exit(1);
    }
    return p;
}

static float *rand_floats(int64_t n)
{
    float *p = xalloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))

typedef struct direct_ctx {
    const float *wr;     /* weights [M][K], K in bf__conv_krow's order */
    const int32_t *off;  /* off[p]: the padded-plane offset of k term p */
    const float *xp;     /* the image's padded planes */
    int k, kchunk;
    int64_t lda, q_n, wp, ow_n, osp;
    float *acc;         /* kb_*: the sums between chunks of K, [M][q_n rounded up] */
} direct_ctx;

/* lanes of positions q0 .. q0 + 16 that are outputs, and the output index
 * of the first of them */
static __mmask16 lanes_of(const direct_ctx *d, int64_t q0, int64_t *first)
{
    __mmask16 m = 0;
    *first = -1;
    for (int l = 0; l < 16; l++) {
        int64_t q = q0 + l;
        if (q >= d->q_n || q % d->wp >= d->ow_n) continue;
        m |= (__mmask16)(1u << l);
        if (*first < 0) *first = q / d->wp * d->ow_n + q % d->wp;
    }
    return m;
}

/* MR rows x NV vectors of positions from q0 */
#define DIRECT_BLOCK(NAME, MRMAX, NV)                                                                              \
    AVX512 static inline __attribute__((always_inline)) void NAME##_blk(int mr, const direct_ctx *d,              \
                                                                        const float *a, int64_t q0,               \
                                                                        const float *bias, float *y,              \
                                                                        const __mmask16 *vm, const int64_t *o0)    \
    {                                                                                                              \
        __m512 s[MRMAX][NV];                                                                                       \
        _Pragma("GCC unroll 16") for (int i = 0; i < mr; i++)                                                      \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = _mm512_setzero_ps();                   \
        const float *xq = d->xp + q0;                                                                              \
        const char *ab[4];                                                                                         \
        const int64_t ldab = d->lda * (int64_t)sizeof(float);                                                      \
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) ab[q] = (const char *)(a + 3 * q * d->lda);           \
        _Pragma("GCC unroll 2") for (int p = 0; p < d->k; p++) {                                                   \
            const float *b = xq + d->off[p];                                                                       \
            __m512 bv[NV];                                                                                         \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(b + 16 * v);             \
            _Pragma("GCC unroll 16") for (int i = 0; i < mr; i++) {                                                \
                __m512 av = _mm512_set1_ps(*(const float *)(ab[i / 3] + (i % 3) * ldab + (int64_t)p * 4));         \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = _mm512_fmadd_ps(av, bv[v], s[i][v]); \
            }                                                                                                      \
        }                                                                                                          \
        const __m512 one = _mm512_set1_ps(1.0f);                                                                   \
        _Pragma("GCC unroll 16") for (int i = 0; i < mr; i++)                                                      \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                                 \
            if (!vm[v]) continue;                                                                                  \
            __m512 t = _mm512_add_ps(_mm512_mul_ps(one, s[i][v]), _mm512_set1_ps(bias[i]));                        \
            __m512 c = _mm512_maskz_compress_ps(vm[v], t);                                                         \
            _mm512_mask_storeu_ps(y + i * d->osp + o0[v], (__mmask16)((1u << __builtin_popcount(vm[v])) - 1u), c); \
        }                                                                                                          \
    }                                                                                                              \
    AVX512 static void NAME(const direct_ctx *d, int m, const float *bias, float *y)                              \
    {                                                                                                              \
        int nblk = (m + MRMAX - 1) / MRMAX, base = m / nblk, extra = m % nblk;                                     \
        for (int64_t q0 = 0; q0 < d->q_n; q0 += 16 * NV) {                                                         \
            __mmask16 vm[NV];                                                                                      \
            int64_t o0[NV];                                                                                        \
            for (int v = 0; v < NV; v++) vm[v] = lanes_of(d, q0 + 16 * v, &o0[v]);                                 \
            for (int b = 0, i0 = 0; b < nblk; b++) {                                                               \
                int mr = base + (b < extra);                                                                       \
                const float *ab = d->wr + i0 * d->lda;                                                             \
                switch (mr) {                                                                                      \
                case MRMAX: NAME##_blk(MRMAX, d, ab, q0, bias + i0, y + i0 * d->osp, vm, o0); break;               \
                case MRMAX - 1: NAME##_blk(MRMAX - 1, d, ab, q0, bias + i0, y + i0 * d->osp, vm, o0); break;       \
                default: NAME##_blk(mr, d, ab, q0, bias + i0, y + i0 * d->osp, vm, o0); break;                     \
                }                                                                                                  \
                i0 += mr;                                                                                          \
            }                                                                                                      \
        }                                                                                                          \
    }

DIRECT_BLOCK(direct_12x2, 12, 2)
DIRECT_BLOCK(direct_8x3, 8, 3)
DIRECT_BLOCK(direct_6x4, 6, 4)


/* The same blocks with K cut at each block of 16 input channels (9 x 16
 * terms): a block of MR rows runs one such chunk over every position
 * before the next, so its 12 x 144 weights stay in L1 (MLAS's NCHWc
 * kernels keep their filter block in L1 so). The sums are stored between
 * chunks in acc (position coordinates) and loaded back: a float stored and
 * loaded is the same float, so every output is still its one chain. */
#define DIRECT_KB(NAME, MRMAX, NV)                                                                                 \
    AVX512 static inline __attribute__((always_inline)) void NAME##_blk(                                           \
        int mr, const direct_ctx *d, const float *a, int p0, int p1, int first, int last, int64_t q0,              \
        const float *bias, float *y, float *acc, int64_t lacc, const __mmask16 *vm, const int64_t *o0)             \
    {                                                                                                              \
        __m512 s[MRMAX][NV];                                                                                       \
        _Pragma("GCC unroll 16") for (int i = 0; i < mr; i++)                                                      \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] =                                         \
            first ? _mm512_setzero_ps() : _mm512_load_ps(acc + i * lacc + q0 + 16 * v);                            \
        const float *xq = d->xp + q0;                                                                              \
        const char *ab[4];                                                                                         \
        const int64_t ldab = d->lda * (int64_t)sizeof(float);                                                      \
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) ab[q] = (const char *)(a + 3 * q * d->lda);           \
        _Pragma("GCC unroll 2") for (int p = p0; p < p1; p++) {                                                    \
            const float *b = xq + d->off[p];                                                                       \
            __m512 bv[NV];                                                                                         \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(b + 16 * v);             \
            _Pragma("GCC unroll 16") for (int i = 0; i < mr; i++) {                                                \
                __m512 av = _mm512_set1_ps(*(const float *)(ab[i / 3] + (i % 3) * ldab + (int64_t)p * 4));         \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = _mm512_fmadd_ps(av, bv[v], s[i][v]); \
            }                                                                                                      \
        }                                                                                                          \
        if (!last) {                                                                                               \
            _Pragma("GCC unroll 16") for (int i = 0; i < mr; i++)                                                  \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) _mm512_store_ps(acc + i * lacc + q0 + 16 * v, s[i][v]); \
            return;                                                                                                \
        }                                                                                                          \
        const __m512 one = _mm512_set1_ps(1.0f);                                                                   \
        _Pragma("GCC unroll 16") for (int i = 0; i < mr; i++)                                                      \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                                 \
            if (!vm[v]) continue;                                                                                  \
            __m512 t = _mm512_add_ps(_mm512_mul_ps(one, s[i][v]), _mm512_set1_ps(bias[i]));                        \
            __m512 c = _mm512_maskz_compress_ps(vm[v], t);                                                         \
            _mm512_mask_storeu_ps(y + i * d->osp + o0[v], (__mmask16)((1u << __builtin_popcount(vm[v])) - 1u), c); \
        }                                                                                                          \
    }                                                                                                              \
    AVX512 static void NAME(const direct_ctx *d, int m, const float *bias, float *y)                              \
    {                                                                                                              \
        int nblk = (m + MRMAX - 1) / MRMAX, base = m / nblk, extra = m % nblk;                                     \
        int64_t lacc = (d->q_n + 16 * NV - 1) / (16 * NV) * (16 * NV);                                             \
        float *acc = d->acc;                                                                                       \
        for (int b = 0, i0 = 0; b < nblk; b++) {                                                                   \
            int mr = base + (b < extra);                                                                           \
            const float *ab = d->wr + i0 * d->lda;                                                                 \
            for (int p0 = 0; p0 < d->k; p0 += d->kchunk) {                                                         \
                int p1 = p0 + d->kchunk < d->k ? p0 + d->kchunk : d->k, first = p0 == 0, last = p1 == d->k;        \
                for (int64_t q0 = 0; q0 < d->q_n; q0 += 16 * NV) {                                                 \
                    __mmask16 vm[NV];                                                                              \
                    int64_t o0[NV];                                                                                \
                    if (last)                                                                                      \
                        for (int v = 0; v < NV; v++) vm[v] = lanes_of(d, q0 + 16 * v, &o0[v]);                     \
                    switch (mr) {                                                                                  \
                    case MRMAX:                                                                                    \
                        NAME##_blk(MRMAX, d, ab, p0, p1, first, last, q0, bias + i0, y + i0 * d->osp, acc, lacc, vm, o0); \
                        break;                                                                                     \
                    case MRMAX - 1:                                                                                \
                        NAME##_blk(MRMAX - 1, d, ab, p0, p1, first, last, q0, bias + i0, y + i0 * d->osp, acc, lacc, vm, o0); \
                        break;                                                                                     \
                    default:                                                                                       \
                        NAME##_blk(mr, d, ab, p0, p1, first, last, q0, bias + i0, y + i0 * d->osp, acc, lacc, vm, o0); \
                        break;                                                                                     \
                    }                                                                                              \
                }                                                                                                  \
            }                                                                                                      \
            i0 += mr;                                                                                              \
        }                                                                                                          \
    }

DIRECT_KB(kb_12x2, 12, 2)
DIRECT_KB(kb_8x3, 8, 3)

typedef void (*direct_fn)(const direct_ctx *, int, const float *, float *);

typedef struct shape {
    const char *name;
    int c, m, h;
} shape;

/* the same reorder as linalg_conv_gemm.c's, every call */
static void reorder(const bf__conv_params *cp, const float *wt, float *wr)
{
    for (int64_t j = 0; j < cp->m; j++)
        for (int64_t c = 0; c < cp->cg; c++)
            for (int64_t tap = 0; tap < cp->ksp; tap++)
                wr[j * cp->kc + bf__conv_krow(cp, c, tap)] = wt[j * cp->kc + c * cp->ksp + tap];
}

/* one call of the direct path over n images: weights reordered, each
 * image's padded planes filled, the blocks run */
static void direct_conv(direct_fn fn, const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                        float *y, float *wr, float *xp, const int32_t *off, float *acc)
{
    const bf__window *w = &cp->w;
    int64_t wp = w->in[2] + 2, plane = bf__conv_padded_plane(w);
    reorder(cp, wt, wr);
    direct_ctx d = {wr, off, xp, (int)cp->kc, 9 * BF__CONV_CBLOCK, cp->kc, w->out[1] * wp, wp, w->out[2], cp->osp, acc};
    for (int64_t n = 0; n < cp->n; n++) {
        for (int64_t c = 0; c < cp->c; c++)
            for (int64_t ih = 0; ih < w->in[1]; ih++)
                memcpy(xp + c * plane + (ih + 1) * wp + 1, x + (n * cp->c + c) * cp->isp + ih * w->in[2],
                       sizeof(float) * (size_t)w->in[2]);
        fn(&d, (int)cp->m, bias, y + n * cp->m * cp->osp);
    }
}

int main(int argc, char **argv)
{
    int imgs = argc > 1 ? atoi(argv[1]) : 4, rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (imgs < 1 || rounds < 1) {
        fprintf(stderr, "usage: bitflip-bench-direct [IMAGES [ROUNDS]]\n");
        return 2;
    }
    if (bf__sgemm_best() < BF_SGEMM_AVX512) {
        fprintf(stderr, "bitflip-bench-direct: this CPU path has no AVX-512 (the prototype's only level)\n");
        return 0;
    }
    static const shape shapes[] = {{"layer1 3x3 64->64 56x56", 64, 64, 56},
                                   {"layer2 3x3 128->128 28x28", 128, 128, 28},
                                   {"layer3 3x3 256->256 14x14", 256, 256, 14}};
    static const struct {
        const char *name;
        direct_fn fn;
    } kernels[] = {{"direct 12x2", direct_12x2}, {"direct 8x3", direct_8x3}, {"direct 6x4", direct_6x4}, {"kb 12x2", kb_12x2}, {"kb 8x3", kb_8x3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        bf__conv_params cp;
        memset(&cp, 0, sizeof cp);
        bf__window *w = &cp.w;
        w->rank = 2;
        for (int d = 0; d < 3; d++) {
            w->in[d] = w->out[d] = d ? sh->h : 1, w->k[d] = d ? 3 : 1, w->s[d] = 1;
            w->d[d] = 1, w->pb[d] = w->pe[d] = d ? 1 : 0;
        }
        cp.n = imgs, cp.c = cp.cg = sh->c, cp.m = cp.mg = sh->m, cp.group = 1;
        cp.isp = cp.osp = (int64_t)sh->h * sh->h, cp.ksp = 9, cp.kc = 9 * (int64_t)sh->c, cp.nb = 1;
        cp.has_bias = 1, cp.simd = BF_SGEMM_AVX512;
        cp.off_cols = ((size_t)(cp.m * cp.kc) + 15) & ~(size_t)15;
        cp.off_tmp = cp.off_cols;
        cp.scratch_floats = cp.off_cols + bf__conv_packed_floats(&cp, 1) + 64;
        srand((unsigned)s + 1);
        float *x = rand_floats(imgs * cp.c * cp.isp), *wt = rand_floats(cp.m * cp.kc), *bias = rand_floats(cp.m);
        float *y0 = rand_floats(imgs * cp.m * cp.osp), *y1 = rand_floats(imgs * cp.m * cp.osp);
        float *scratch = xalloc(sizeof(float) * cp.scratch_floats);
        /* the library's own direct path (linalg_conv_planes.c) takes the
         * shape when the scratch has room for it; the packed one above not */
        bf__conv_params cq = cp;
        cq.scratch_floats = cp.off_cols + bf__conv_planes_floats(&cp) + 64;
        float *scratch_q = xalloc(sizeof(float) * cq.scratch_floats);
        int64_t wp = sh->h + 2, plane = bf__conv_padded_plane(w);
        /* the planes, and slack past the last one: a block's last vectors
         * read up to 64 + 2 wp + 2 floats beyond q_n in dropped lanes */
        size_t xp_n = (size_t)(cp.c * plane + 64 + 4 * wp);
        float *wr = xalloc(sizeof(float) * (size_t)(cp.m * cp.kc)), *xp = xalloc(sizeof(float) * xp_n);
        memset(xp, 0, sizeof(float) * xp_n);
        float *acc = xalloc(sizeof(float) * (size_t)(cp.m * (sh->h * wp + 64)));
        int32_t *off = xalloc(sizeof(int32_t) * (size_t)cp.kc);
        for (int64_t c = 0; c < cp.c; c++)
            for (int64_t t = 0; t < 9; t++) off[bf__conv_krow(&cp, c, t)] = (int32_t)(c * plane + t / 3 * wp + t % 3);
        double flop = 2.0 * (double)imgs * (double)cp.m * (double)cp.osp * (double)cp.kc;
        if (!bf__conv_packed(&cp, x, wt, bias, NULL, y0, scratch, -1, NULL)) {
            fprintf(stderr, "bitflip-bench-direct: bf__conv_packed declined %s\n", sh->name);
            return 1;
        }
        memset(y1, 0xff, sizeof(float) * (size_t)(imgs * cp.m * cp.osp));
        if (!bf__conv_planes_ok(&cq) || !bf__conv_packed(&cq, x, wt, bias, NULL, y1, scratch_q, -1, NULL) ||
            memcmp(y0, y1, sizeof(float) * (size_t)(imgs * cp.m * cp.osp)) != 0) {
            fprintf(stderr, "bitflip-bench-direct: the library's direct path on %s: not taken or not the same bits\n",
                    sh->name);
            return 1;
        }
        /* one output channel alone (the differential engine's ch >= 0, should
         * the channel's own windows path decline): its rows of every image */
        int64_t ch = cp.m / 2 + 1;
        memset(y1, 0xff, sizeof(float) * (size_t)(imgs * cp.m * cp.osp));
        bf__conv_packed(&cq, x, wt, bias, NULL, y1, scratch_q, ch, NULL);
        for (int64_t n = 0; n < imgs; n++)
            if (memcmp(y0 + (n * cp.m + ch) * cp.osp, y1 + (n * cp.m + ch) * cp.osp, sizeof(float) * (size_t)cp.osp)) {
                fprintf(stderr, "bitflip-bench-direct: the library's direct path, channel %lld alone, on %s: not the "
                        "same bits\n", (long long)ch, sh->name);
                return 1;
            }
        for (size_t kx = 0; kx < sizeof kernels / sizeof kernels[0]; kx++) {
            memset(y1, 0xff, sizeof(float) * (size_t)(imgs * cp.m * cp.osp));
            direct_conv(kernels[kx].fn, &cp, x, wt, bias, y1, wr, xp, off, acc);
            if (memcmp(y0, y1, sizeof(float) * (size_t)(imgs * cp.m * cp.osp)) != 0) {
                fprintf(stderr, "bitflip-bench-direct: %s on %s: not the packed path's bits\n", kernels[kx].name,
                        sh->name);
                return 1;
            }
        }
        double best[2 + sizeof kernels / sizeof kernels[0]];
        for (size_t kx = 0; kx <= 1 + sizeof kernels / sizeof kernels[0]; kx++) best[kx] = 1e9;
        for (int r = 0; r < rounds; r++)
            for (size_t kx = 0; kx <= 1 + sizeof kernels / sizeof kernels[0]; kx++) {
                double t0 = now();
                int it = 0;
                do {
                    if (kx == 0) bf__conv_packed(&cp, x, wt, bias, NULL, y0, scratch, -1, NULL);
                    else if (kx == 1) bf__conv_packed(&cq, x, wt, bias, NULL, y1, scratch_q, -1, NULL);
                    else direct_conv(kernels[kx - 2].fn, &cp, x, wt, bias, y1, wr, xp, off, acc);
                    it++;
                } while (now() - t0 < 0.2);
                double t = (now() - t0) / it;
                if (t < best[kx]) best[kx] = t;
            }
        printf("%s, %d images: packed %.2f ms %.1f GFLOP/s | library's direct %.2f ms %.1f GFLOP/s (%.2fx)", sh->name,
               imgs, best[0] * 1e3, flop / best[0] * 1e-9, best[1] * 1e3, flop / best[1] * 1e-9, best[0] / best[1]);
        for (size_t kx = 0; kx < sizeof kernels / sizeof kernels[0]; kx++)
            printf(" | %s %.2f ms %.1f GFLOP/s (%.2fx)", kernels[kx].name, best[kx + 2] * 1e3,
                   flop / best[kx + 2] * 1e-9, best[0] / best[kx + 2]);
        printf("\n");
        fflush(stdout);
        free(x), free(wt), free(bias), free(y0), free(y1), free(scratch), free(wr), free(xp), free(off), free(acc), free(scratch_q);
    }
    return 0;
}
#else
int main(void)
{
    fprintf(stderr, "bitflip-bench-direct: x86-64 only\n");
    return 0;
}
#endif
