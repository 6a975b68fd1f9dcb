/* The timing clock and random inputs the standalone kernel benchmarks
 * (conv_bcast.c, conv_kernels.c, seg_kernels.c) share. Define BENCH_PROG,
 * the program's name for its out-of-memory message, before including. */
#ifndef BITFLIP_BENCH_UTIL_H
#define BITFLIP_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* the thread's CPU time, not wall time: on a shared, loaded machine a
 * descheduled thread would otherwise count the other processes' turns */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* n floats in [-0.5, 0.5) from rand(), 64-byte aligned (free() frees them);
 * exits on out of memory: a benchmark has nothing to fall back to */
static float *rand_floats(int64_t n)
{
    float *p = aligned_alloc(64, ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", BENCH_PROG);
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

#endif
