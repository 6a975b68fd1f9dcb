/* How close to the machine's limit each matrix product runs: this core's
 * measured fp32 peak, then bf__sgemm's GFLOP/s on the convolution shapes of
 * resnet18 (one image per product, as the Conv op runs them: M output
 * channels, N output positions, K = input channels x taps), on each CPU path
 * this machine has, and OpenBLAS's cblas_sgemm on the same shapes if its
 * shared library is installed (it is loaded with dlopen: the project links
 * no BLAS, and Debian ships libopenblas without a -dev package by default).
 *
 *   build/bitflip-bench-peak             (make bench-peak; about a minute)
 *   build/bitflip-bench-peak --peak-only (the peak lines alone, a second:
 *                                         bench/real_bench.py's percent of the peak)
 *   build/bitflip-bench-peak --vit       (ViT-S/16's products at batch 4 instead:
 *                                         M tokens x N outputs x K, B a weight or,
 *                                         per head, the keys and values)
 *
 * The peak is timed on chains of independent fused multiply-adds held in
 * registers (enough of them to cover the FMA latency on both pipes), 8-wide
 * (AVX2) and 16-wide (AVX-512) where the CPU has them. One thread; each
 * figure is the fastest of five runs of about 40 ms of the thread's CPU
 * time (the machine is shared: CPU time leaves out the time other processes
 * had the core, and the fastest run is the one least disturbed otherwise).
 *
 * --peak-only also times fresh memory: 64 MiB the process never touched
 * before, written a page at a time (each write a page fault), then written
 * again (no faults), wall time. On a bare machine the first is a few GB/s;
 * on a virtual machine whose host backs guest memory lazily or takes freed
 * pages back (virtio-balloon free page reporting) it can be a hundred times
 * slower, and every campaign's setup (the golden cache, the arenas: fresh
 * memory) pays it while PyTorch's timed loop, which allocates before its
 * timer starts, does not: bench/real_bench.py prints it beside the peak so a
 * reader can tell the host's memory from the code. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <dlfcn.h>
#include <stdint.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ops/sgemm.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef void (*work_fn)(void *ctx, long reps);

/* Wall seconds: a page fault's wait for the host is not this thread's CPU time */
static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* GB/s of the first and the second write of 64 MiB of fresh anonymous memory
 * (the file's opening comment says why) */
static void fresh_memory(void)
{
    const size_t n = (size_t)64 << 20;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    double t0 = wall();
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    double t1 = wall();
    memset(p, 2, n);
    double t2 = wall();
    printf("fresh memory, first touch: %.2f GB/s; written again: %.2f GB/s\n", n / (t1 - t0) * 1e-9,
           n / (t2 - t1) * 1e-9);
    munmap(p, n);
}

/* Seconds per rep of fn, the fastest of five runs of about 40 ms. */
static double per_rep(work_fn fn, void *ctx)
{
    double best = 1e30;
    for (int run = 0; run < 5; run++) {
        for (long reps = 1;; reps *= 2) {
            double t0 = now();
            fn(ctx, reps);
            double dt = now() - t0;
            if (dt > 0.04) {
                if (dt / (double)reps < best) best = dt / (double)reps;
                break;
            }
        }
    }
    return best;
}

#define PEAK_ITERS 100000
#define CHAINS 10   /* 2 pipes x 4-cycle latency, plus slack */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static void peak_ymm(void *ctx, long reps)
{
    __m256 s[CHAINS], a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
    for (int i = 0; i < CHAINS; i++) s[i] = _mm256_set1_ps((float)i);
    for (long r = 0; r < reps * PEAK_ITERS; r++)
        for (int i = 0; i < CHAINS; i++) s[i] = _mm256_fmadd_ps(s[i], a, b);
    __m256 t = s[0];
    for (int i = 1; i < CHAINS; i++) t = _mm256_add_ps(t, s[i]);
    _mm256_storeu_ps(ctx, t);
}

__attribute__((target("avx512f"))) static void peak_zmm(void *ctx, long reps)
{
    __m512 s[CHAINS], a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < CHAINS; i++) s[i] = _mm512_set1_ps((float)i);
    for (long r = 0; r < reps * PEAK_ITERS; r++)
        for (int i = 0; i < CHAINS; i++) s[i] = _mm512_fmadd_ps(s[i], a, b);
    __m512 t = s[0];
    for (int i = 1; i < CHAINS; i++) t = _mm512_add_ps(t, s[i]);
    _mm512_storeu_ps(ctx, t);
}
#endif

typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                               const float *b, int ldb, float beta, float *c, int ldc);

typedef struct prod {
    int m, n, k, level, tb;
    const float *a, *b;
    float *y;
    cblas_sgemm_fn blas;
} prod;

static void run_bf(void *ctx, long reps)
{
    prod *p = ctx;
    for (long r = 0; r < reps; r++)
        bf__sgemm_level(p->level, 0, p->tb, p->m, p->n, p->k, 1.0f, p->a, p->k, p->b, p->tb ? p->k : p->n, 0, p->y,
                        p->n);
}

static void run_blas(void *ctx, long reps)
{
    prod *p = ctx;
    /* 101 = CblasRowMajor, 111 = CblasNoTrans */
    for (long r = 0; r < reps; r++)
        p->blas(101, 111, p->tb ? 112 : 111, p->m, p->n, p->k, 1.0f, p->a, p->k, p->b, p->tb ? p->k : p->n, 0.0f,
                p->y, p->n);
}

int main(int argc, char **argv)
{
    int peak_only = argc > 1 && !strcmp(argv[1], "--peak-only"), vit = argc > 1 && !strcmp(argv[1], "--vit");
    if (argc > 1 && !peak_only && !vit) {
        fprintf(stderr, "usage: bitflip-bench-peak [--peak-only | --vit]\n");
        return 2;
    }
    typedef struct shape {
        const char *layer;
        int m, n, k, tb;
    } shape;
    static const shape r18[] = {
        {"conv1 (7x7/2, 3 -> 64)", 64, 12544, 147, 0},     {"layer1 3x3 (64 -> 64)", 64, 3136, 576, 0},
        {"layer2.0.conv1 3x3/2 (64 -> 128)", 128, 784, 576, 0}, {"layer2 3x3 (128 -> 128)", 128, 784, 1152, 0},
        {"layer2.0 downsample 1x1/2", 128, 784, 64, 0},    {"layer3 3x3 (256 -> 256)", 256, 196, 2304, 0},
        {"layer4 3x3 (512 -> 512)", 512, 49, 4608, 0},
    };
    /* ViT-S/16 at batch 4 (197 tokens an image): the weight products on the
     * 788 tokens of the batch, the attention's per head and image; the
     * out-projection's weight is a Gemm's transposed B */
    static const shape vits[] = {
        {"QKV (MatMul)", 788, 1152, 384, 0},        {"out_proj (Gemm, transB)", 788, 384, 384, 1},
        {"mlp.0 (MatMul)", 788, 1536, 384, 0},      {"mlp.3 (MatMul)", 788, 384, 1536, 0},
        {"scores q k^T (per head)", 197, 197, 64, 0}, {"attention x v (per head)", 197, 64, 197, 0},
        {"conv_proj (per image)", 384, 196, 768, 0},
    };
    const shape *shapes = vit ? vits : r18;
    const int NSHAPES = vit ? (int)(sizeof vits / sizeof *vits) : (int)(sizeof r18 / sizeof *r18);
    size_t amax = 0, bmax = 0, ymax = 0;
    for (int q = 0; q < NSHAPES; q++) {
        size_t a = (size_t)shapes[q].m * shapes[q].k, b = (size_t)shapes[q].k * shapes[q].n;
        size_t y = (size_t)shapes[q].m * shapes[q].n;
        amax = a > amax ? a : amax, bmax = b > bmax ? b : bmax, ymax = y > ymax ? y : ymax;
    }
    float *a = malloc(sizeof(float) * amax), *b = malloc(sizeof(float) * bmax), *y = malloc(sizeof(float) * ymax);
    if (!a || !b || !y) {
        fprintf(stderr, "bitflip-bench-peak: out of memory\n");
        return 1;
    }
    uint32_t s = 1;
    for (size_t i = 0; i < amax; i++) a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
    for (size_t i = 0; i < bmax; i++) b[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;

    int top = bf__sgemm_best();
    float sink[16];
    printf("One core, fp32 GFLOP/s (2 flops per multiply-add), fastest of 5 runs of ~40 ms each.\n\n");
#if defined(__x86_64__) && defined(__GNUC__)
    double peak = 0;
    if (top >= BF_SGEMM_AVX2) {
        double g = 2.0 * 8 * CHAINS * PEAK_ITERS / per_rep(peak_ymm, sink) * 1e-9;
        printf("peak, %d chains of 8-wide FMA (ymm):  %.1f\n", CHAINS, g);
        peak = g;
    }
    if (__builtin_cpu_supports("avx512f")) {   /* the machine's peak: bf__sgemm's 16-lane kernel's */
        double g = 2.0 * 16 * CHAINS * PEAK_ITERS / per_rep(peak_zmm, sink) * 1e-9;
        printf("peak, %d chains of 16-wide FMA (zmm): %.1f\n", CHAINS, g);
        peak = g > peak ? g : peak;
    }
#else
    double peak = 0;
    (void)sink;
#endif
    if (peak_only) {
        free(a), free(b), free(y);
        fresh_memory();
        return 0;
    }
    void *lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    cblas_sgemm_fn blas = lib ? (cblas_sgemm_fn)dlsym(lib, "cblas_sgemm") : NULL;
    void (*set_threads)(int) = lib ? (void (*)(int))dlsym(lib, "openblas_set_num_threads") : NULL;
    if (set_threads) set_threads(1);
    if (!blas) printf("OpenBLAS: libopenblas.so.0 not found (apt-get install libopenblas0 to compare)\n");

    printf("\n| %s (M x N x K) | bf__sgemm AVX2 |%s%s\n|---|---|%s%s\n", vit ? "ViT-S/16 product" : "resnet18 conv",
           top >= BF_SGEMM_AVX512 ? " bf__sgemm AVX-512 |" : "", blas ? " OpenBLAS |" : "",
           top >= BF_SGEMM_AVX512 ? "---|" : "", blas ? "---|" : "");
    double flops_all = 0, t_all[3] = {0, 0, 0};
    for (int q = 0; q < NSHAPES; q++) {
        prod p = {shapes[q].m, shapes[q].n, shapes[q].k, BF_SGEMM_AVX2, shapes[q].tb, a, b, y, blas};
        double flops = 2.0 * p.m * p.n * p.k;
        flops_all += flops;
        printf("| %s, %d x %d x %d |", shapes[q].layer, p.m, p.n, p.k);
        for (int lv = BF_SGEMM_AVX2; lv <= top; lv++) {
            p.level = lv;
            double t = per_rep(run_bf, &p);
            t_all[lv - BF_SGEMM_AVX2] += t;
            printf(" %.1f |", flops / t * 1e-9);
        }
        if (blas) {
            double t = per_rep(run_blas, &p);
            t_all[2] += t;
            printf(" %.1f |", flops / t * 1e-9);
        }
        printf("\n");
    }
    printf("| all shapes, once each |");
    for (int lv = BF_SGEMM_AVX2; lv <= top; lv++) printf(" %.1f |", flops_all / t_all[lv - BF_SGEMM_AVX2] * 1e-9);
    if (blas) printf(" %.1f |", flops_all / t_all[2] * 1e-9);
    printf("\n");
    if (peak > 0) {
        printf("\nof the peak (%.1f):", peak);
        for (int lv = BF_SGEMM_AVX2; lv <= top; lv++)
            printf(" %s %.0f%%", lv >= BF_SGEMM_AVX512 ? "AVX-512" : "AVX2", 100.0 * flops_all / t_all[lv - BF_SGEMM_AVX2] * 1e-9 / peak);
        if (blas) printf(" OpenBLAS %.0f%%", 100.0 * flops_all / t_all[2] * 1e-9 / peak);
        printf("\n");
    }
    free(a);
    free(b);
    free(y);
    return 0;
}
