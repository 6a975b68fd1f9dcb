/* What the in-order chain costs ViT-S/16's weight products, against the
 * blocking MLAS and OpenBLAS use (docs/perf/vit.md, h21-eval; a bench
 * tool, not part of the tests).
 *
 *   build/bitflip-bench-kblock [ROUNDS (3)]
 *
 * For each of ViT-S/16's products at batch 4 (788 tokens: QKV, out_proj,
 * mlp.0, mlp.3), B packed once as a plan packs a weight
 * (bf__sgemm_pack), thread CPU per product over 5 runs of about 40 ms a
 * round, each variant alternated within a round, the fastest run and the
 * median of all rounds' runs printed:
 *   chain:   bf__sgemm_prepacked over the whole K, each output the one
 *            in-order chain (what bitflip eval runs);
 *   kb256, kb128: the same kernel over K in blocks of 256 (128) rows of B,
 *            each block's panels packed once, every block after the first
 *            added to y (accumulate, alpha 1: y = s_block + y): MLAS's and
 *            OpenBLAS's scheme, each block's sum started from 0 and added
 *            at its end, a different rounding from the chain. A's slice of
 *            the block (788 x 256 floats, 0.8 MB) stays in L2 across the
 *            panels where the whole K's rows (1.2-4.8 MB) do not;
 *   OpenBLAS: cblas_sgemm (libopenblas.so.0 through dlopen, if installed;
 *            its core is whatever it detects: OPENBLAS_CORETYPE=SkylakeX
 *            gives its AVX-512 kernels on a Zen 5 that OpenBLAS 0.3.21
 *            takes for Haswell);
 *   chain, 12 weights in turn: the chain on twelve packed copies of B
 *            used one after the other (28 MB for mlp.0's), as a pass's
 *            twelve layers read theirs: B from memory, not cache.
 * The blocked variants' outputs are compared with the chain's (max
 * relative difference printed): they are not the chain's bits, which is
 * the point. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/simd.h"
#include "exec/ops/sgemm.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                               const float *b, int ldb, float beta, float *c, int ldc);

typedef struct prod {
    int m, n, k, kb; /* kb: 0 the whole chain, else the K block */
    const float *a, *b;
    float *const *packs; /* one packed B per K block (the whole K's at [0]) */
    int ncopies;         /* > 0: the whole K's chain on ncopies packed Bs in turn (12 layers' weights) */
    long *turn;
    float *y;
    cblas_sgemm_fn blas;
} prod;

static void run_once(const prod *p)
{
    if (p->blas) {   /* 101 = CblasRowMajor, 111 = CblasNoTrans */
        p->blas(101, 111, 111, p->m, p->n, p->k, 1.0f, p->a, p->k, p->b, p->n, 0.0f, p->y, p->n);
        return;
    }
    if (p->ncopies) {
        const float *pk = p->packs[(*p->turn)++ % p->ncopies];
        bf__sgemm_prepacked(bf__sgemm_best(), 0, p->m, p->n, p->k, 1.0f, p->a, p->k, p->b, p->n, 0, p->y, p->n, NULL,
                            pk, NULL, NULL);
        return;
    }
    int kb = p->kb ? p->kb : p->k;
    for (int k0 = 0, q = 0; k0 < p->k; k0 += kb, q++) {
        int kk = p->k - k0 < kb ? p->k - k0 : kb;
        bf__sgemm_prepacked(bf__sgemm_best(), 0, p->m, p->n, kk, 1.0f, p->a + k0, p->k, p->b + (int64_t)k0 * p->n,
                            p->n, k0 > 0, p->y, p->n, NULL, p->packs[q], NULL, NULL);
    }
}

/* Seconds per product of 5 runs of about 40 ms each into t[0 .. 5) */
static void per_rep(const prod *p, double *t)
{
    for (int run = 0; run < 5; run++)
        for (long reps = 1;; reps *= 2) {
            double t0 = now();
            for (long r = 0; r < reps; r++) run_once(p);
            double dt = now() - t0;
            if (dt > 0.04) {
                t[run] = dt / (double)reps;
                break;
            }
        }
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    if (rounds < 1 || rounds > 20) {
        fprintf(stderr, "usage: bitflip-bench-kblock [ROUNDS]\n");
        return 2;
    }
    static const struct {
        const char *name;
        int m, n, k;
    } shapes[] = {{"QKV", 788, 1152, 384}, {"out_proj", 788, 384, 384}, {"mlp.0", 788, 1536, 384},
                  {"mlp.3", 788, 384, 1536}};
    enum { NS = 4, NV = 5, NCOPY = 12 };
    static const char *vname[NV] = {"chain (whole K)", "kb256 (MLAS-style)", "kb128", "OpenBLAS",
                                    "chain, 12 weights in turn"};
    static const int vkb[NV] = {0, 256, 128, 0, 0};
    void *lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    cblas_sgemm_fn blas = lib ? (cblas_sgemm_fn)dlsym(lib, "cblas_sgemm") : NULL;
    void (*set_threads)(int) = lib ? (void (*)(int))dlsym(lib, "openblas_set_num_threads") : NULL;
    char *(*corename)(void) = lib ? (char *(*)(void))dlsym(lib, "openblas_get_corename") : NULL;
    if (set_threads) set_threads(1);
    if (bf__sgemm_best() < BF_SGEMM_AVX512) printf("(no AVX-512 here: the chain runs the AVX2 kernel)\n");
    printf("OpenBLAS: %s\n", blas ? (corename ? corename() : "?") : "not found");
    /* every run's time, all rounds: the fastest (least disturbed) and the median (as a pass's
     * per-step mean sees the machine) */
    static double runs[NS][NV][100];
    for (int s = 0; s < NS; s++) {
        int m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
        float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n);
        float *y[NV];
        float *packs[NV][16];
        float *copies[NCOPY];
        int ok = a && b;
        for (int v = 0; v < NV; v++) {
            y[v] = malloc(sizeof(float) * (size_t)m * n);
            ok = ok && y[v];
            int kb = vkb[v] ? vkb[v] : k, nq = (k + kb - 1) / kb;
            for (int q = 0; q < 16; q++) packs[v][q] = NULL;
            for (int q = 0; ok && q < nq && v < 3; q++) {
                int kk = k - q * kb < kb ? k - q * kb : kb;
                packs[v][q] = malloc(sizeof(float) * bf__sgemm_pack_floats(n, kk));
                ok = ok && packs[v][q];
            }
        }
        for (int c = 0; c < NCOPY; c++) {
            copies[c] = malloc(sizeof(float) * bf__sgemm_pack_floats(n, k));
            ok = ok && copies[c];
        }
        if (!ok) {
            fprintf(stderr, "bitflip-bench-kblock: out of memory\n");
            return 1;
        }
        uint32_t r = 1 + (uint32_t)s;
        for (int64_t i = 0; i < (int64_t)m * k; i++) a[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
        for (int64_t i = 0; i < (int64_t)k * n; i++) b[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
        for (int v = 0; v < 3; v++) {
            int kb = vkb[v] ? vkb[v] : k;
            for (int q = 0; q * kb < k; q++) {
                int kk = k - q * kb < kb ? k - q * kb : kb;
                if (!bf__sgemm_pack(0, n, kk, b + (int64_t)q * kb * n, n, packs[v][q])) {
                    fprintf(stderr, "bitflip-bench-kblock: no packing kernel on this CPU\n");
                    return 1;
                }
            }
        }
        for (int c = 0; c < NCOPY; c++) /* the same weight, twelve places: as far apart as 12 layers' */
            memcpy(copies[c], packs[0][0], sizeof(float) * bf__sgemm_pack_floats(n, k));
        long turn = 0;
        for (int rd = 0; rd < rounds; rd++)
            for (int v = 0; v < NV; v++) {
                if (v == 3 && !blas) continue;
                prod p = {m, n, k, vkb[v], a, b, v == 4 ? copies : packs[v], v == 4 ? NCOPY : 0, &turn, y[v],
                          v == 3 ? blas : NULL};
                per_rep(&p, runs[s][v] + 5 * rd);
            }
        double flops = 2.0 * m * n * k;
        printf("%s %d x %d x %d:", shapes[s].name, m, n, k);
        for (int v = 0; v < NV; v++) {
            if (v == 3 && !blas) continue;
            double rel = 0;
            for (int64_t i = 0; i < (int64_t)m * n; i++) {
                double d = fabs((double)y[v][i] - y[0][i]) / (fabs((double)y[0][i]) + 1e-6);
                rel = d > rel ? d : rel;
            }
            qsort(runs[s][v], (size_t)(5 * rounds), sizeof(double), cmp_double);
            double best = runs[s][v][0], med = runs[s][v][5 * rounds / 2];
            printf(" | %s %.1f GFLOP/s best, %.1f median (%.3f ms; max rel diff %.1e)", vname[v], flops / best * 1e-9,
                   flops / med * 1e-9, best * 1e3, rel);
        }
        printf("\n");
        for (int v = 0; v < NV; v++) {
            free(y[v]);
            for (int q = 0; q < 16; q++) free(packs[v][q]);
        }
        for (int c = 0; c < NCOPY; c++) free(copies[c]);
        free(a), free(b);
    }
    return 0;
}
