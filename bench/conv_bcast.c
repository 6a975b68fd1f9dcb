/* The Conv op's product with the output channels in the vector lanes and
 * the input broadcast (linalg_conv_bcast.c) against the path it would
 * take otherwise (bf__conv_packed's panels gathered from the padded
 * planes, or for stride 1 the direct kernel of linalg_conv_planes.c), on
 * resnet18's and mobilenet_v2's Conv shapes, one call over a few images
 * (docs/BENCHMARKS.md, "Output channels in the lanes"); and where
 * bf__conv_stem_want holds (the stems), linalg_conv_stem.c's kernel
 * against bf__conv_packed's panels (docs/perf/conv.md, "The stem, the max
 * pool and the downsamples"). On a CPU without AVX-512 both at AVX2
 * (docs/perf/conv/h42.md, h42-stem; docs/perf/conv/h43.md, h43-bcast8:
 * linalg_conv_bcast8.c's blocks). Each shape is checked to give the same bits
 * both ways before it is timed. For the shapes the kernel is chosen for,
 * also W packed at every call against the copy packed once (docs/perf/
 * conv.md, "resnet18's weights read once per call"), warm and cold.
 *
 *   build/bitflip-bench-bcast [IMAGES [ROUNDS [NAME]]]  (IMAGES 4, ROUNDS 5;
 *                                                       NAME: the shapes whose name has it)
 *
 * Thread CPU time, best of ROUNDS, each round repeated for about 0.2 s;
 * GFLOP/s count the outputs' multiply-adds. Not part of the tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ops/linalg_window.h"
#include "exec/ops/sgemm.h"

#define BENCH_PROG "bitflip-bench-bcast"
#include "bench_util.h"

typedef struct shape {
    const char *name;
    int c, m, h, k, s, pad;
} shape;

/* The Conv of cp (today's path) and of cq (the path measured) on the same
 * random data: the same bits first (1, with a message, if not), then each
 * timed for 0.2 s at a time, rounds times, alternating; best[] the best
 * seconds a call of each. */
static int race(const bf__conv_params *cp, const bf__conv_params *cq, int imgs, int rounds, unsigned seed,
                const char *name, const char *what, double best[2])
{
    srand(seed);
    int64_t ny = imgs * cp->m * cp->osp;
    float *x = rand_floats(imgs * cp->c * cp->isp), *wt = rand_floats(cp->m * cp->kc), *bias = rand_floats(cp->m);
    float *y0 = rand_floats(ny), *y1 = rand_floats(ny), *scratch = rand_floats((int64_t)cp->scratch_floats);
    memset(y1, 0xff, sizeof(float) * (size_t)ny);
    int bad = !bf__conv_packed(cp, x, wt, bias, NULL, y0, scratch, -1, NULL) ||
              !bf__conv_packed(cq, x, wt, bias, NULL, y1, scratch, -1, NULL) || memcmp(y0, y1, sizeof(float) * (size_t)ny);
    if (bad) fprintf(stderr, "bitflip-bench-bcast: %s: %s not taken or not the same bits\n", name, what);
    best[0] = best[1] = 1e9;
    for (int r = 0; r < rounds && !bad; r++)
        for (int kx = 0; kx < 2; kx++) {
            double t0 = now();
            int it = 0;
            do {
                bf__conv_packed(kx ? cq : cp, x, wt, bias, NULL, kx ? y1 : y0, scratch, -1, NULL);
                it++;
            } while (now() - t0 < 0.2);
            double t = (now() - t0) / it;
            if (t < best[kx]) best[kx] = t;
        }
    free(x), free(wt), free(bias), free(y0), free(y1), free(scratch);
    return bad;
}

/* The bcast kernel with W packed per call (a plan whose W holds a fault)
 * against the model's copy packed once (bf__conv_bcast_pack, as plans take
 * it), the same bits first; cold: each call after a 64 MiB read, so W
 * comes from memory or L3 as in a pass, each call timed alone (the read
 * not counted); warm: calls back to back for 0.2 s. best[]: seconds a call. */
static int race_wpk(const bf__conv_params *cq, int imgs, int rounds, unsigned seed, const char *name, int cold,
                    double best[2])
{
    srand(seed);
    int64_t ny = imgs * cq->m * cq->osp;
    float *x = rand_floats(imgs * cq->c * cq->isp), *wt = rand_floats(cq->m * cq->kc), *bias = rand_floats(cq->m);
    float *y0 = rand_floats(ny), *y1 = rand_floats(ny), *scratch = rand_floats((int64_t)cq->scratch_floats);
    float *wpk = rand_floats(cq->m * cq->kc), *flush = cold ? rand_floats(1 << 24) : NULL;
    memset(y1, 0xff, sizeof(float) * (size_t)ny);
    int bad = !bf__conv_bcast_pack(cq, wt, wpk) || !bf__conv_packed(cq, x, wt, bias, NULL, y0, scratch, -1, NULL) ||
              !bf__conv_packed_wpk(cq, x, wt, wpk, bias, NULL, y1, scratch, -1, NULL, NULL) || memcmp(y0, y1, sizeof(float) * (size_t)ny);
    if (bad) fprintf(stderr, "bitflip-bench-bcast: %s: W packed once not taken or not the same bits\n", name);
    best[0] = best[1] = 1e9;
    volatile float sink = 0;
    for (int r = 0; r < rounds && !bad; r++)
        for (int kx = 0; kx < 2; kx++) {
            double t = 0;
            int it = 0;
            do {
                if (cold) {
                    float acc = 0;
                    for (int64_t i = 0; i < (1 << 24); i += 16) acc += flush[i];
                    sink += acc;
                }
                double t0 = now();
                bf__conv_packed_wpk(cq, x, wt, kx ? wpk : NULL, bias, NULL, kx ? y1 : y0, scratch, -1, NULL, NULL);
                t += now() - t0;
                it++;
            } while (t < 0.2);
            if (t / it < best[kx]) best[kx] = t / it;
        }
    free(x), free(wt), free(bias), free(y0), free(y1), free(scratch), free(wpk), free(flush);
    return bad;
}

int main(int argc, char **argv)
{
    int imgs = argc > 1 ? atoi(argv[1]) : 4, rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (imgs < 1 || rounds < 1) {
        fprintf(stderr, "usage: bitflip-bench-bcast [IMAGES [ROUNDS [NAME]]]\n");
        return 2;
    }
    /* both kernels run on AVX2 too (8 channels a vector) */
    int level = bf__sgemm_best();
    if (level < BF_SGEMM_AVX2) {
        fprintf(stderr, "bitflip-bench-bcast: this CPU path has neither AVX2 nor AVX-512 (the kernels' levels)\n");
        return 0;
    }
    static const shape shapes[] = {
        {"conv1 7x7/2 3->64 224", 3, 64, 224, 7, 2, 3},
        {"layer1 3x3 64->64 56", 64, 64, 56, 3, 1, 1},
        {"layer2.0.conv1 3x3/2 64->128 56", 64, 128, 56, 3, 2, 1},
        {"layer2.0 downsample 1x1/2 64->128 56", 64, 128, 56, 1, 2, 0},
        {"layer2 3x3 128->128 28", 128, 128, 28, 3, 1, 1},
        {"layer3.0.conv1 3x3/2 128->256 28", 128, 256, 28, 3, 2, 1},
        {"layer3.0 downsample 1x1/2 128->256 28", 128, 256, 28, 1, 2, 0},
        {"layer3 3x3 256->256 14", 256, 256, 14, 3, 1, 1},
        {"layer4.0.conv1 3x3/2 256->512 14", 256, 512, 14, 3, 2, 1},
        {"layer4.0 downsample 1x1/2 256->512 14", 256, 512, 14, 1, 2, 0},
        {"layer4 3x3 512->512 7", 512, 512, 7, 3, 1, 1},
        {"mobilenet_v2 stem 3x3/2 3->32 224", 3, 32, 224, 3, 2, 1},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        if (argc > 3 && !strstr(sh->name, argv[3])) continue;
        bf__conv_params cp;
        memset(&cp, 0, sizeof cp);
        bf__window *w = &cp.w;
        w->rank = 2;
        int oh = (sh->h + 2 * sh->pad - sh->k) / sh->s + 1;
        for (int d = 0; d < 3; d++) {
            w->in[d] = d ? sh->h : 1, w->out[d] = d ? oh : 1, w->k[d] = d ? sh->k : 1, w->s[d] = d ? sh->s : 1;
            w->d[d] = 1, w->pb[d] = w->pe[d] = d ? sh->pad : 0;
        }
        cp.n = imgs, cp.c = cp.cg = sh->c, cp.m = cp.mg = sh->m, cp.group = 1;
        cp.isp = (int64_t)sh->h * sh->h, cp.osp = (int64_t)oh * oh, cp.ksp = (int64_t)sh->k * sh->k;
        cp.kc = cp.ksp * sh->c, cp.nb = 1, cp.has_bias = 1, cp.simd = level, cp.stem = 0;
        cp.off_cols = ((size_t)(cp.m * cp.kc) + 15) & ~(size_t)15;
        /* room for one image's columns and its product's row of zeros, should a path fall back to im2col */
        cp.off_tmp = level >= BF_SGEMM_AVX512 ? cp.off_cols : cp.off_cols + (size_t)(cp.kc * cp.osp);
        int64_t pi = bf__conv_packed_images(&cp);
        cp.scratch_floats = cp.off_cols + bf__conv_packed_floats(&cp, pi + bf__conv_bcast_images(&cp)) + bf__conv_bcast_floats(&cp) +
                            bf__conv_planes_floats(&cp) + 4096;
        cp.scratch_floats += cp.cg * bf__conv_padded_plane(w) + bf__conv_stem_floats(&cp);
        if (level < BF_SGEMM_AVX512) cp.scratch_floats += (size_t)(cp.kc * cp.osp + cp.mg);
        if (bf__conv_stem_want(&cp)) {
            /* a first Conv (linalg_conv_stem.c) against bf__conv_packed's panels */
            bf__conv_params cq = cp;
            cp.stem = 0, cq.stem = 1;
            double best[2];
            if (race(&cp, &cq, imgs, rounds, (unsigned)s + 1, sh->name, "stem", best)) return 1;
            double flop = 2.0 * (double)imgs * (double)cp.m * (double)cp.osp * (double)cp.kc;
            printf("%s, %d images: packed %.3f ms %.1f GFLOP/s | stem %.3f ms %.1f GFLOP/s (%.2fx)\n", sh->name, imgs,
                   best[0] * 1e3, flop / best[0] * 1e-9, best[1] * 1e3, flop / best[1] * 1e-9, best[0] / best[1]);
            fflush(stdout);
        }
        if (!bf__conv_bcast_ok(&cp)) {
            printf("%s: not taken by bf__conv_bcast\n", sh->name);
            continue;
        }
        bf__conv_params cq = cp;
        cp.bcast = 0, cq.bcast = 1;
        double best[2];
        if (race(&cp, &cq, imgs, rounds, (unsigned)s + 1, sh->name, "bcast", best)) return 1;
        double flop = 2.0 * (double)imgs * (double)cp.m * (double)cp.osp * (double)cp.kc;
        printf("%s, %d images: today's %.3f ms %.1f GFLOP/s | bcast %.3f ms %.1f GFLOP/s (%.2fx)%s\n", sh->name, imgs,
               best[0] * 1e3, flop / best[0] * 1e-9, best[1] * 1e3, flop / best[1] * 1e-9, best[0] / best[1],
               bf__conv_bcast_want(&cp) ? " [chosen]" : "");
        fflush(stdout);
        if (!bf__conv_bcast_want(&cp)) continue;
        for (int cold = 0; cold < 2; cold++) {
            if (race_wpk(&cq, imgs, rounds, (unsigned)s + 1, sh->name, cold, best)) return 1;
            printf("%s, %d images, %s: W packed a call %.3f ms %.1f GFLOP/s | packed once %.3f ms %.1f GFLOP/s (%.2fx)\n",
                   sh->name, imgs, cold ? "cold" : "warm", best[0] * 1e3, flop / best[0] * 1e-9, best[1] * 1e3,
                   flop / best[1] * 1e-9, best[0] / best[1]);
            fflush(stdout);
        }
    }
    return 0;
}
