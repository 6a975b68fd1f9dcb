/* mobilenet_v2's 1x1 and depthwise convolutions, kernel by kernel, one image
 * at 224x224: the time of each shape, so a change to either kernel can be
 * compared with the build before it in the same run (docs/BENCHMARKS.md,
 * "Convolutions against ONNX Runtime").
 *
 *   build/bitflip-bench-conv          per shape, microseconds (x the layers of that shape)
 *   build/bitflip-bench-conv --hash   a hash of each depthwise output instead (two builds must agree)
 *   build/bitflip-bench-conv --pw     the 1x1 shapes of a batch of 4, inputs out of cache as in a
 *                                     pass: the general product (bf__sgemm_bias per image) against
 *                                     linalg_conv_pointwise.c's and linalg_conv_pwlanes.c's paths,
 *                                     the bits compared (PW_HOT=1: the inputs left in cache;
 *                                     PW_N=49: the shapes of 49 positions only)
 *   build/bitflip-bench-conv --fuse   the expansion (1x1) and the depthwise Conv after it at batch 4,
 *                                     apart (the expansion's whole output written, then read back)
 *                                     against a block of channels of one image at a time
 *                                     (linalg_conv_pwdw.c's loop; FUSE_BLK=16,32: the block sizes, 1-64)
 *
 * Timed in the thread's CPU time, not wall time: on a shared, loaded
 * machine a descheduled thread would otherwise count the other processes'
 * turns. Each shape repeated for about 10-20 ms, the fastest of five kept. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ops/linalg_window.h"
#include "exec/ops/sgemm.h"

#define BENCH_PROG "bitflip-bench-conv"
#include "bench_util.h"

/* 1x1 convolutions: bf__sgemm_bias with ReLU6, K input channels, M output, N positions */
static double pointwise(void)
{
    static const int sh[][3] = {{32, 16, 12544}, {16, 96, 12544}, {24, 144, 3136}, {144, 24, 3136}, {32, 192, 784},
                                {192, 32, 784},  {64, 384, 196},  {384, 64, 196},  {96, 576, 196},  {576, 96, 196},
                                {160, 960, 49},  {960, 160, 49},  {320, 1280, 49}};
    double tot = 0;
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int k = sh[s][0], m = sh[s][1], n = sh[s][2];
        float *a = rand_floats((int64_t)m * k), *b = rand_floats((int64_t)k * n), *y = rand_floats((int64_t)m * n);
        float *bias = rand_floats(m);
        bf__act act = {.lo = 0.0f, .hi = 6.0f};
        double best = 1e9;
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            int it = 0;
            do {
                bf__sgemm_bias(bf__sgemm_best(), m, n, k, a, k, b, n, bias, &act, y, n);
                it++;
            } while (now() - t0 < 0.02);
            double t = (now() - t0) / it;
            if (t < best) best = t;
        }
        printf("pointwise K=%d M=%d N=%d %.1f us %.1f GFLOP/s\n", k, m, n, best * 1e6, 2.0 * m * n * k / best * 1e-9);
        tot += best;
        free(a), free(b), free(y), free(bias);
    }
    return tot;
}

/* depthwise 3x3, pad 1: channels, input size, stride, layers of that shape */
static double depthwise(int hash)
{
    static const int sh[][4] = {{32, 112, 1, 1}, {96, 112, 2, 1}, {144, 56, 1, 2}, {144, 56, 2, 1}, {192, 28, 1, 2},
                                {192, 28, 2, 1}, {384, 14, 1, 4}, {576, 14, 1, 2}, {576, 14, 2, 1}, {960, 7, 1, 3}};
    double tot = 0;
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int c = sh[s][0], h = sh[s][1], st = sh[s][2], o = (h + 2 - 3) / st + 1;
        bf__conv_params cp;
        memset(&cp, 0, sizeof cp);
        bf__window *w = &cp.w;
        w->rank = 2;
        for (int d = 0; d < 3; d++) {
            w->in[d] = d ? h : 1, w->out[d] = d ? o : 1, w->k[d] = d ? 3 : 1, w->s[d] = d ? st : 1;
            w->d[d] = 1, w->pb[d] = w->pe[d] = d ? 1 : 0;
        }
        cp.n = 1, cp.c = cp.m = cp.group = c, cp.cg = cp.mg = 1;
        cp.isp = (int64_t)h * h, cp.osp = (int64_t)o * o, cp.ksp = cp.kc = 9;
        cp.has_bias = 1, cp.path = BF__CONV_DEPTHWISE, cp.simd = bf__sgemm_best();
        srand((unsigned)s);
        float *x = rand_floats((int64_t)c * h * h), *wt = rand_floats((int64_t)c * 9), *b = rand_floats(c);
        float *y = rand_floats((int64_t)c * o * o);
        bf__act act = {.lo = 0.0f, .hi = 6.0f};
        double best = 1e9;
        for (int r = 0; r < (hash ? 1 : 5); r++) {
            double t0 = now();
            int it = 0;
            do {
                bf__conv_direct(&cp, x, wt, b, &act, y, -1, NULL);
                it++;
            } while (!hash && now() - t0 < 0.01);
            double t = (now() - t0) / it;
            if (t < best) best = t;
        }
        if (hash) {
            uint64_t hv = 1469598103934665603u;
            for (int64_t i = 0; i < (int64_t)c * o * o; i++) {
                uint32_t u;
                memcpy(&u, &y[i], 4);
                hv = (hv ^ u) * 1099511628211u;
            }
            printf("depthwise C=%d H=%d stride %d hash %016llx\n", c, h, st, (unsigned long long)hv);
        } else {
            printf("depthwise C=%d H=%d stride %d x%d %.1f us\n", c, h, st, sh[s][3], best * sh[s][3] * 1e6);
        }
        tot += best * sh[s][3];
        free(x), free(wt), free(b), free(y);
    }
    return tot;
}

/* mobilenet_v2's 1x1 shapes at batch 4 as a pass meets them: the 4 images'
 * input (written by the step before for the whole batch) out of L2, so 8
 * MiB of other memory is written between calls. Per shape, the product one
 * image at a time (bf__sgemm_bias, the 1x1 path before h14-mbv2) against
 * B read in place (bf__conv_pw_inplace: M <= 32) or the images side by side
 * (bf__conv_pw_batched: maps under 96 positions), and against the output
 * channels in the lanes (bf__conv_pwl: M a multiple of 16; h15-dw), thread
 * CPU, best of 7 rounds of 5 calls; "same bits" compares the outputs. */
static void pointwise_paths(void)
{
    static const int sh[][3] = {{32, 16, 12544}, {96, 24, 3136}, {144, 24, 3136}, {24, 144, 3136}, {144, 32, 784},
                                {192, 32, 784},  {32, 192, 784}, {192, 64, 196},  {384, 64, 196},  {64, 384, 196},
                                {384, 96, 196},  {576, 96, 196}, {96, 576, 196},  {576, 160, 49},  {160, 960, 49},
                                {960, 160, 49},  {960, 320, 49}, {320, 1280, 49}};
    enum { NI = 4, JUNK = 1 << 21 };
    float *junk = rand_floats(JUNK);
    int hot = getenv("PW_HOT") != NULL;   /* the inputs left in cache: the kernels alone */
    int only = getenv("PW_N") ? atoi(getenv("PW_N")) : 0;   /* the shapes of this many positions only */
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int k = sh[s][0], m = sh[s][1], n = sh[s][2];
        if (only && n != only) continue;
        bf__conv_params cp;
        memset(&cp, 0, sizeof cp);
        bf__window *w = &cp.w;
        w->rank = 2;
        int side = 1;
        while (side * side < n) side++;   /* square maps */
        for (int d = 0; d < 3; d++) {
            w->in[d] = w->out[d] = d ? side : 1;
            w->k[d] = w->s[d] = w->d[d] = 1;
        }
        cp.n = NI, cp.c = k, cp.m = m, cp.group = 1, cp.cg = k, cp.mg = m, cp.isp = cp.osp = n, cp.ksp = 1, cp.kc = k;
        cp.has_bias = 1, cp.path = BF__CONV_POINTWISE, cp.simd = bf__sgemm_best();
        int inplace = bf__conv_pw_inplace_ok(&cp, m), batched = bf__conv_pw_images(&cp) > 1;
        int lanes = bf__conv_pwl_ok(&cp);
        size_t fl = bf__conv_pw_floats(&cp), fl2 = bf__conv_pwl_floats(&cp);
        cp.scratch_floats = fl > fl2 ? fl : fl2;
        float *a = rand_floats((int64_t)m * k), *x = rand_floats((int64_t)NI * k * n), *bias = rand_floats(m);
        float *y[3];
        for (int v = 0; v < 3; v++) y[v] = rand_floats((int64_t)NI * m * n);
        float *scratch = rand_floats((int64_t)cp.scratch_floats + 1);
        bf__act act = {.lo = 0.0f, .hi = 6.0f};
        double best[3] = {1e9, 1e9, 1e9};
        for (int r = 0; r < 7; r++)
            for (int v = 0; v < 3; v++) {
                if ((v == 1 && !inplace && !batched) || (v == 2 && !lanes)) continue;
                double t = 0;
                for (int it = 0; it < 5; it++) {
                    for (int64_t i = 0; i < JUNK && !hot; i += 16) junk[i] += 1.0f;
                    double t0 = now();
                    if (v == 0)
                        for (int i = 0; i < NI; i++)
                            bf__sgemm_bias(cp.simd, m, n, k, a, k, x + (int64_t)i * k * n, n, bias, &act,
                                           y[0] + (int64_t)i * m * n, n);
                    else if (v == 2)
                        bf__conv_pwl(&cp, x, a, NULL, bias, &act, y[2], scratch, NULL);
                    else if (batched)
                        bf__conv_pw_batched(&cp, x, a, bias, &act, y[1], scratch);
                    else
                        for (int i = 0; i < NI; i++)
                            bf__conv_pw_inplace(m, n, k, a, k, x + (int64_t)i * k * n, n, bias, &act,
                                                y[1] + (int64_t)i * m * n, n);
                    t += now() - t0;
                }
                if (t / 5 < best[v]) best[v] = t / 5;
            }
        size_t bytes = sizeof(float) * (size_t)NI * m * n;
        int same1 = !(inplace || batched) || memcmp(y[0], y[1], bytes) == 0, same2 = !lanes || memcmp(y[0], y[2], bytes) == 0;
        double f = 2.0 * NI * m * n * k * 1e-9;
        printf("K=%4d M=%4d N=%5d x%d: product %7.1f us (%5.1f GFLOP/s)", k, m, n, NI, best[0] * 1e6, f / best[0]);
        if (inplace || batched)
            printf(", %s %7.1f us (%.2fx)", batched ? "side by side" : "in place", best[1] * 1e6, best[1] / best[0]);
        if (lanes) printf(", lanes %7.1f us (%5.1f GFLOP/s, %.2fx)", best[2] * 1e6, f / best[2], best[2] / best[0]);
        printf("%s%s\n", bf__conv_pwl_want(&cp) ? " [lanes wired]" : "", same1 && same2 ? ", same bits" : ", BITS DIFFER");
        free(a), free(x), free(bias), free(y[0]), free(y[1]), free(y[2]), free(scratch);
    }
    free(junk);
}


/* The expansion (1x1, K -> M, ReLU6) and the depthwise 3x3 after it at
 * batch 4, as a pass runs them (the whole expansion written, 4 images, then
 * the depthwise step reads it back: 8 MiB of other memory written between
 * calls) against the pair run a block of channels at a time per image
 * (the block's expansion planes written to a buffer that stays in L2, the
 * depthwise run on them at once). Each element's chain is the same either
 * way (the product's per-element K order does not depend on how many rows a
 * call takes); "same bits" compares the depthwise outputs. FUSE_BLK: block
 * sizes to try (default 8,16,32). */
#define FUSE_BLKMAX 64   /* the largest FUSE_BLK block: the block buffer's rows */
static void fuse_pairs(void)
{
    static const int sh[][4] = {{16, 96, 112, 2}, {24, 144, 56, 1}, {24, 144, 56, 2},
                                {32, 192, 28, 1}, {32, 192, 28, 2}, {64, 384, 14, 1},
                                {96, 576, 14, 1}, {96, 576, 14, 2}, {160, 960, 7, 1}};
    enum { NI = 4, JUNK = 1 << 21 };
    float *junk = rand_floats(JUNK);
    int blks[8] = {8, 16, 32}, nb = 3;
    if (getenv("FUSE_BLK")) {
        nb = 0;
        for (char *q = getenv("FUSE_BLK"); *q && nb < 8; q++) {
            blks[nb++] = atoi(q);
            while (q[1] && q[1] != ',') q++;
            if (q[1]) q++;
        }
        for (int v = 0; v < nb; v++)
            if (blks[v] < 1 || blks[v] > FUSE_BLKMAX) {
                fprintf(stderr, BENCH_PROG ": FUSE_BLK: a block of %d channels; give 1-%d (the block buffer's rows)\n",
                        blks[v], FUSE_BLKMAX);
                exit(2);
            }
    }
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int k = sh[s][0], m = sh[s][1], h = sh[s][2], st = sh[s][3], o = (h + 2 - 3) / st + 1, n = h * h;
        bf__conv_params dw;
        memset(&dw, 0, sizeof dw);
        bf__window *w = &dw.w;
        w->rank = 2;
        for (int d = 0; d < 3; d++) {
            w->in[d] = d ? h : 1, w->out[d] = d ? o : 1, w->k[d] = d ? 3 : 1, w->s[d] = d ? st : 1;
            w->d[d] = 1, w->pb[d] = w->pe[d] = d ? 1 : 0;
        }
        dw.n = NI, dw.c = dw.m = dw.group = m, dw.cg = dw.mg = 1;
        dw.isp = (int64_t)n, dw.osp = (int64_t)o * o, dw.ksp = dw.kc = 9;
        dw.has_bias = 1, dw.path = BF__CONV_DEPTHWISE, dw.simd = bf__sgemm_best();
        float *a = rand_floats((int64_t)m * k), *x = rand_floats((int64_t)NI * k * n), *b1 = rand_floats(m);
        float *wt = rand_floats((int64_t)m * 9), *b2 = rand_floats(m);
        float *e = rand_floats((int64_t)NI * m * n), *y0 = rand_floats((int64_t)NI * m * o * o);
        float *y1 = rand_floats((int64_t)NI * m * o * o), *eb = rand_floats((int64_t)FUSE_BLKMAX * n);
        bf__act act = {.lo = 0.0f, .hi = 6.0f};
        double best[9];
        for (int v = 0; v < 9; v++) best[v] = 1e9;
        int same[9] = {0};
        for (int r = 0; r < 5; r++)
            for (int v = 0; v <= nb; v++) {
                double t = 0;
                for (int it = 0; it < 3; it++) {
                    for (int64_t i = 0; i < JUNK; i += 16) junk[i] += 1.0f;
                    double t0 = now();
                    if (v == 0) {
                        for (int i = 0; i < NI; i++)
                            bf__sgemm_bias(dw.simd, m, n, k, a, k, x + (int64_t)i * k * n, n, b1, &act,
                                           e + (int64_t)i * m * n, n);
                        bf__conv_direct(&dw, e, wt, b2, &act, y0, -1, NULL);
                    } else {
                        int bl = blks[v - 1];
                        bf__conv_params db = dw, pw = {.simd = dw.simd, .kc = k, .osp = n};   /* the 1x1's rule */
                        for (int i = 0; i < NI; i++)
                            for (int c0 = 0; c0 < m; c0 += bl) {
                                int cb = m - c0 < bl ? m - c0 : bl;
                                const float *xi = x + (int64_t)i * k * n;
                                if (bf__conv_pw_inplace_ok(&pw, cb))
                                    bf__conv_pw_inplace(cb, n, k, a + (int64_t)c0 * k, k, xi, n, b1 + c0, &act, eb, n);
                                else
                                    bf__sgemm_bias(dw.simd, cb, n, k, a + (int64_t)c0 * k, k, xi, n, b1 + c0, &act, eb, n);
                                db.n = 1, db.c = db.m = db.group = cb;
                                bf__conv_direct(&db, eb, wt + (int64_t)c0 * 9, b2 + c0, &act,
                                                y1 + ((int64_t)i * m + c0) * o * o, -1, NULL);
                            }
                    }
                    t += now() - t0;
                }
                if (t / 3 < best[v]) best[v] = t / 3;
                if (v) same[v] = memcmp(y0, y1, sizeof(float) * (size_t)NI * m * o * o) == 0;
            }
        printf("K=%3d M=%3d %3dx%-3d s%d x%d: apart %7.1f us", k, m, h, h, st, NI, best[0] * 1e6);
        for (int v = 1; v <= nb; v++)
            printf(", blk %d %7.1f us (%.2fx%s)", blks[v - 1], best[v] * 1e6, best[v] / best[0],
                   same[v] ? "" : " BITS DIFFER");
        printf("\n");
        free(a), free(x), free(b1), free(wt), free(b2), free(e), free(y0), free(y1), free(eb);
    }
    free(junk);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--fuse") == 0) {
        fuse_pairs();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--pw") == 0) {
        pointwise_paths();
        return 0;
    }
    int hash = argc > 1 && strcmp(argv[1], "--hash") == 0;
    if (hash) {
        depthwise(1);
        return 0;
    }
    double p = pointwise(), d = depthwise(0);
    printf("total pointwise %.1f us, depthwise %.1f us\n", p * 1e6, d * 1e6);
    return 0;
}
