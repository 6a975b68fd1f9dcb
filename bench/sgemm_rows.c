/* How much a bigger product would save: bf__sgemm's time per output row
 * against the product's row count, on the Gemm shapes of the benchmark
 * models.
 *
 * Why: a trial's dense remainder (the rows it changed, recomputed exactly)
 * is a product of at most a batch's or a chain's 64 rows. Stacking the rows
 * of many trials into one product (for a layer whose weights every one of
 * them leaves golden) is worth doing only if rows are much cheaper in a
 * product of 1,024 than in one of 64. This prints the time per row at each
 * row count and its ratio to the 1,024-row product's.
 *
 *   build/bitflip-bench-sgemm            (make bench-sgemm)
 *
 * One thread, each product repeated for about 40 ms, the fastest of five
 * such runs kept (the machine is shared and noisy). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "exec/ops/sgemm.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds per call of an m x n x k product (B as k x n rows, as chain mode
 * and the plans read it), the fastest of five runs of about 40 ms. */
static double per_call(int m, int n, int k, const float *a, const float *b, float *y)
{
    double best = 1e30;
    for (int run = 0; run < 5; run++) {
        int reps = 1;
        for (;;) {
            double t0 = now();
            for (int i = 0; i < reps; i++) bf__sgemm(0, 0, m, n, k, 1.0f, a, k, b, n, 0, y, n);
            double dt = now() - t0;
            if (dt > 0.04) {
                if (dt / reps < best) best = dt / reps;
                break;
            }
            reps *= 2;
        }
    }
    return best;
}

int main(void)
{
    static const struct {
        const char *layer;
        int k, n;
    } shapes[] = {
        {"digits MLP net.0 (64 -> 128)", 64, 128},  {"digits MLP net.2 (128 -> 64)", 128, 64},
        {"digits MLP net.4 (64 -> 10)", 64, 10},    {"digits CNN fc (256 -> 10)", 256, 10},
        {"dlrm_small top.0 (52 -> 64)", 52, 64},    {"dlrm_small top.2 (64 -> 32)", 64, 32},
        {"dlrm_large top.0 (52 -> 256)", 52, 256},  {"dlrm_large top.2 (256 -> 128)", 256, 128},
    };
    static const int rows[] = {1, 16, 64, 256, 1024};
    enum { MMAX = 1024, KMAX = 256, NMAX = 256 };
    float *a = malloc(sizeof(float) * MMAX * KMAX), *b = malloc(sizeof(float) * KMAX * NMAX);
    float *y = malloc(sizeof(float) * MMAX * NMAX);
    if (!a || !b || !y) {
        fprintf(stderr, "bitflip-bench-sgemm: out of memory\n");
        return 1;
    }
    uint32_t s = 1;
    for (int i = 0; i < MMAX * KMAX; i++) a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
    for (int i = 0; i < KMAX * NMAX; i++) b[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
    printf("bf__sgemm, one thread (%s): ns per output row, and per-row time / the 1,024-row product's\n\n",
           bf__sgemm_simd() ? "AVX2" : "reference loop");
    printf("| layer (K -> N) |");
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) printf(" %d rows |", rows[r]);
    printf("\n|---|");
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) printf("---|");
    printf("\n");
    for (size_t q = 0; q < sizeof shapes / sizeof *shapes; q++) {
        double ns[sizeof rows / sizeof *rows];
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
            ns[r] = 1e9 * per_call(rows[r], shapes[q].n, shapes[q].k, a, b, y) / rows[r];
        printf("| %s |", shapes[q].layer);
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) printf(" %.0f (%.2f×) |", ns[r], ns[r] / ns[4]);
        printf("\n");
    }
    free(a);
    free(b);
    free(y);
    return 0;
}
