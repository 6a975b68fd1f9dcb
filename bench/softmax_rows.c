/* Softmax's rows as a Softmax step and a MatMul with its Softmax fused run
 * them (bf__softmax_rows_run: the CPU's level, or BITFLIP_SIMD's), on
 * ViT-S/16's attention rows (24 x 197 rows of 197 at batch 4), a detector's
 * class rows (SSDlite320: 3234 of 91) or any shape given; thread CPU time
 * an element, best of 30 calls. Logits uniform in [-6, 6):
 *
 *   build/bitflip-bench-softmax [N ROWS]
 *
 * Link it against two builds' libbitflip-core.a for a same-run A/B
 * (docs/perf/vit.md, h45-sm8). Not part of the tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bitflip/plan.h"
#include "exec/step_access.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void run(int64_t n, int64_t rows)
{
    float *x = malloc(sizeof(float) * (size_t)(n * rows)), *y = malloc(sizeof(float) * (size_t)(n * rows));
    if (!x || !y) {
        fprintf(stderr, "bitflip-bench-softmax: no memory for %lld rows of %lld\n", (long long)rows, (long long)n);
        exit(1);
    }
    uint64_t s = 88172645463325252u;
    for (int64_t i = 0; i < n * rows; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)(int32_t)(s >> 32) * (6.0f / 2147483648.0f);
    }
    double best = 1e30;
    for (int r = 0; r < 30; r++) {
        double t = cpu_now();
        bf__softmax_rows_run(y, x, rows, n);
        t = cpu_now() - t;
        if (t < best) best = t;
    }
    printf("%s: %lld rows of %lld: %.3f ms, %.3f ns an element\n", bf_cpu_path(), (long long)rows, (long long)n,
           best * 1e3, best * 1e9 / (double)(n * rows));
    free(x), free(y);
}

int main(int argc, char **argv)
{
    if (argc == 3) {
        int64_t n = atoll(argv[1]), rows = atoll(argv[2]);
        if (n < 1 || rows < 1 || n > (1 << 20) || rows > (1 << 20)) {
            fprintf(stderr, "usage: bitflip-bench-softmax [N ROWS] (each 1 .. 1048576)\n");
            return 2;
        }
        run(n, rows);
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: bitflip-bench-softmax [N ROWS]\n");
        return 2;
    }
    run(197, 24 * 197);
    run(91, 3234);
    return 0;
}
