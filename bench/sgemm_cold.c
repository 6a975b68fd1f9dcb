/* bf__sgemm_bias on resnet18's 3x3 conv shapes (one image per product, as
 * the Conv op runs them) with the caches flushed between calls, as in a
 * pass where other layers run between two uses of a layer's weights; and
 * the same shapes trimmed to whole blocks (M a multiple of 12, N of 32),
 * which shows what the tails of a product cost (docs/BENCHMARKS.md,
 * "Where the kernel's time goes"). Thread CPU time, best of R calls:
 *
 *   build/bitflip-bench-sgemm-cold [R]      (R: 6 by default)
 *
 * Link it against two builds' libbitflip-core.a for a same-run A/B. Not
 * part of the tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ops/sgemm.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 6;
    if (reps < 1) reps = 1;
    static const struct {
        const char *name;
        int m, n, k;
    } shapes[] = {
        {"layer1 3x3", 64, 3136, 576},        {"layer2 3x3", 128, 784, 1152},
        {"layer3 3x3", 256, 196, 2304},       {"layer4 3x3", 512, 49, 4608},
        {"layer1, whole blocks", 120, 3136, 576}, {"layer2, whole blocks", 132, 768, 1152},
        {"layer3, whole blocks", 252, 192, 2304}, {"layer4, whole blocks", 504, 64, 4608},
    };
    size_t flush_bytes = (size_t)96 << 20;
    char *flush = malloc(flush_bytes);
    if (!flush) return 1;
    int level = bf__sgemm_best();
    printf("| shape (M x N x K) | best ms | GFLOP/s |\n|---|---|---|\n");
    for (size_t q = 0; q < sizeof shapes / sizeof *shapes; q++) {
        int m = shapes[q].m, n = shapes[q].n, k = shapes[q].k;
        float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n);
        float *y = malloc(sizeof(float) * (size_t)m * n), *bias = malloc(sizeof(float) * (size_t)m);
        if (!a || !b || !y || !bias) return 1;
        for (size_t i = 0; i < (size_t)m * k; i++) a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        for (size_t i = 0; i < (size_t)k * n; i++) b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
        for (int i = 0; i < m; i++) bias[i] = 0.1f;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            memset(flush, r, flush_bytes);
            double t0 = cpu_now();
            bf__sgemm_bias(level, m, n, k, a, k, b, n, bias, NULL, y, n);
            double t = cpu_now() - t0;
            if (t < best) best = t;
        }
        printf("| %s, %d x %d x %d | %.3f | %.1f |\n", shapes[q].name, m, n, k, best * 1e3,
               2.0 * m * n * (double)k / best / 1e9);
        free(a), free(b), free(y), free(bias);
    }
    free(flush);
    return 0;
}
