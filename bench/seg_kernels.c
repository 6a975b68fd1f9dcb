/* lraspp_mobilenet_v3_large's own Conv shapes, kernel by kernel, 16 images
 * (docs/perf/detectors.md, h16-seg):
 *
 *   build/bitflip-bench-seg --dw   the 5x5 depthwise planes: linalg_conv_flat5.c's
 *                                  table kernel against its 16-wide-row kernel (where
 *                                  the rows are 16 wide), per plane, the inputs hot
 *                                  (one image's planes again and again) and cold (all
 *                                  16 images' planes in turn); the bits compared with
 *                                  a plain loop of the depthwise contract
 *   build/bitflip-bench-seg --se   the squeeze-excitation 1x1 Convs on [16, C, 1, 1]:
 *                                  one image a product (bf__sgemm_bias, the path before),
 *                                  the images side by side (bf__conv_pw_batched) and the
 *                                  output channels in the lanes (bf__conv_pwl, where
 *                                  M is a multiple of 16), the bits compared
 *   build/bitflip-bench-seg --pw   the 1x1 Convs at 16x16 and 32x32 (16 images): the 1x1
 *                                  path before (bf__conv_direct, bare) against
 *                                  linalg_conv_pwseg.c's kernel, the product alone and
 *                                  with a BatchNormalization and HardSwish in its
 *                                  epilogue (GFLOP/s), the bits compared with the path
 *                                  before followed by the steps' scalar expressions
 *
 * Thread CPU time, the fastest of 5 rounds. Not part of the tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ops/fastmath_impl.h"
#include "exec/ops/linalg_pwseg.h"
#include "exec/ops/linalg_window.h"
#include "exec/ops/sgemm.h"

#define BENCH_PROG "bitflip-bench-seg"
#include "bench_util.h"

#if defined(__x86_64__) && defined(__GNUC__)
/* one plane of the depthwise contract: bias, then v + w * x per tap inside */
static void dw_plain(int64_t hh, int64_t ww, int64_t d, int64_t pad, const float *x, const float *wk, float bv,
                     float *y)
{
    for (int64_t i = 0; i < hh; i++)
        for (int64_t j = 0; j < ww; j++) {
            float v = bv;
            for (int64_t a = 0; a < 5; a++)
                for (int64_t e = 0; e < 5; e++) {
                    int64_t ih = i - pad + a * d, iw = j - pad + e * d;
                    if (ih < 0 || ih >= hh || iw < 0 || iw >= ww) continue;
                    float t = wk[a * 5 + e] * x[ih * ww + iw];
                    v = v + t;
                }
            y[i * ww + j] = v;
        }
}

static void depthwise(void)
{
    /* channels, size, dilation: backbone.4-6 (32x32), backbone.13-15 (16x16, dilated) */
    static const int sh[][3] = {{120, 32, 1}, {672, 16, 2}, {960, 16, 2}, {960, 16, 1}};
    enum { NI = 16 };
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int64_t c = sh[s][0], h = sh[s][1], d = sh[s][2], pad = 2 * d, osp = h * h, planes = NI * c;
        bf__window w;
        memset(&w, 0, sizeof w);
        w.rank = 2;
        for (int k = 0; k < 3; k++) {
            w.in[k] = w.out[k] = k ? h : 1, w.k[k] = k ? 5 : 1, w.s[k] = 1, w.d[k] = k ? d : 1;
            w.pb[k] = w.pe[k] = k ? pad : 0;
        }
        uint16_t *tab = malloc(sizeof(uint16_t) * (size_t)(osp + 15) / 16 * 25);
        int64_t off[25];
        if (!tab) exit(1);
        /* the table as dw_flat_masks lays it out: chunk q's lanes whose tap lands inside */
        for (int64_t t = 0; t < 25; t++) {
            int64_t a = t / 5, e = t % 5;
            off[t] = (a * d - pad) * h + e * d - pad;
            for (int64_t q = 0; q < (osp + 15) / 16; q++) {
                unsigned m = 0;
                for (int l = 0; l < 16 && 16 * q + l < osp; l++) {
                    int64_t o = 16 * q + l, ih = o / h + a * d - pad, iw = o % h + e * d - pad;
                    if (ih >= 0 && ih < h && iw >= 0 && iw < h) m |= 1u << l;
                }
                tab[q * 25 + t] = (uint16_t)m;
            }
        }
        float *x = rand_floats(planes * osp), *wt = rand_floats(c * 25), *b = rand_floats(c);
        float *y0 = rand_floats(planes * osp), *y1 = rand_floats(planes * osp), *y2 = rand_floats(planes * osp);
        int row16 = bf__dw_row16_ok(&w);
        for (int64_t p = 0; p < planes; p++) {
            dw_plain(h, h, d, pad, x + p * osp, wt + p % c * 25, b[p % c], y0 + p * osp);
            bf__dw_flat_5x5(tab, off, osp, x + p * osp, wt + p % c * 25, b[p % c], NULL, y1 + p * osp);
            if (row16) bf__dw_row16_5x5(&w, x + p * osp, wt + p % c * 25, b[p % c], NULL, y2 + p * osp);
        }
        size_t bytes = sizeof(float) * (size_t)(planes * osp);
        int same = memcmp(y0, y1, bytes) == 0 && (!row16 || memcmp(y0, y2, bytes) == 0);
        double best[2][2] = {{1e9, 1e9}, {1e9, 1e9}};   /* [kernel][cold] */
        for (int r = 0; r < 5; r++)
            for (int k = 0; k < 1 + row16; k++)
                for (int cold = 0; cold < 2; cold++) {
                    int64_t n = cold ? planes : c;   /* hot: one image's planes, 16 times */
                    double t0 = now();
                    for (int rep = 0; rep < (cold ? 1 : NI); rep++)
                        for (int64_t p = 0; p < n; p++) {
                            const float *xp = x + p * osp, *wp = wt + p % c * 25;
                            if (k) bf__dw_row16_5x5(&w, xp, wp, b[p % c], NULL, y2 + p * osp);
                            else bf__dw_flat_5x5(tab, off, osp, xp, wp, b[p % c], NULL, y1 + p * osp);
                        }
                    double t = (now() - t0) / (double)planes * 1e9;
                    if (t < best[k][cold]) best[k][cold] = t;
                }
        printf("5x5 C=%lld %lldx%lld dilation %lld x%d: table %.0f ns a plane hot, %.0f cold", (long long)c,
               (long long)h, (long long)h, (long long)d, NI, best[0][0], best[0][1]);
        if (row16) printf("; 16-wide rows %.0f hot, %.0f cold", best[1][0], best[1][1]);
        printf("%s\n", same ? ", same bits as the plain loop" : ", BITS DIFFER");
        free(tab), free(x), free(wt), free(b), free(y0), free(y1), free(y2);
    }
}
#endif

static void squeeze(void)
{
    static const int sh[][2] = {{240, 960}, {960, 240}, {168, 672}, {672, 168}, {120, 480}, {480, 120},
                                {960, 128}, {32, 120},  {120, 32},  {24, 72},   {72, 24}};
    enum { NI = 16 };
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int k = sh[s][0], m = sh[s][1];
        bf__conv_params cp;
        memset(&cp, 0, sizeof cp);
        cp.w.rank = 2;
        for (int d = 0; d < 3; d++) cp.w.in[d] = cp.w.out[d] = cp.w.k[d] = cp.w.s[d] = cp.w.d[d] = 1;
        cp.n = NI, cp.c = k, cp.m = m, cp.group = 1, cp.cg = k, cp.mg = m, cp.isp = cp.osp = 1, cp.ksp = 1, cp.kc = k;
        cp.has_bias = 1, cp.path = BF__CONV_POINTWISE, cp.simd = bf__sgemm_best();
        int side = bf__conv_pw_images(&cp) > 1, lanes = bf__conv_pwl_ok(&cp);
        size_t f1 = bf__conv_pw_floats(&cp), f2 = bf__conv_pwl_floats(&cp);
        cp.scratch_floats = f1 > f2 ? f1 : f2;
        float *a = rand_floats((int64_t)m * k), *x = rand_floats((int64_t)NI * k), *bias = rand_floats(m);
        float *scratch = rand_floats((int64_t)cp.scratch_floats + 1), *y[3];
        for (int v = 0; v < 3; v++) y[v] = rand_floats((int64_t)NI * m);
        bf__act act = {.lo = 0.0f, .hi = 1e30f};
        double best[3] = {1e9, 1e9, 1e9};
        for (int r = 0; r < 5; r++)
            for (int v = 0; v < 3; v++) {
                if ((v == 1 && !side) || (v == 2 && !lanes)) continue;
                double t0 = now();
                int it = 0;
                do {
                    if (v == 0)
                        for (int i = 0; i < NI; i++)
                            bf__sgemm_bias(cp.simd, m, 1, k, a, k, x + (int64_t)i * k, 1, bias, &act, y[0] + (int64_t)i * m, 1);
                    else if (v == 1) bf__conv_pw_batched(&cp, x, a, bias, &act, y[1], scratch);
                    else bf__conv_pwl(&cp, x, a, NULL, bias, &act, y[2], scratch, NULL);
                    it++;
                } while (now() - t0 < 0.01);
                double t = (now() - t0) / it;
                if (t < best[v]) best[v] = t;
            }
        size_t bytes = sizeof(float) * (size_t)NI * m;
        int same = (!side || memcmp(y[0], y[1], bytes) == 0) && (!lanes || memcmp(y[0], y[2], bytes) == 0);
        printf("1x1 K=%4d M=%4d on 1x1 maps x%d: one image a product %7.1f us", k, m, NI, best[0] * 1e6);
        if (side) printf(", side by side %6.1f us (%.2fx)", best[1] * 1e6, best[1] / best[0]);
        if (lanes) printf(", lanes %6.1f us (%.2fx)", best[2] * 1e6, best[2] / best[0]);
        printf("%s%s\n", bf__conv_pwl_want(&cp) ? " [lanes wired]" : side ? " [side by side wired]" : "",
               same ? ", same bits" : ", BITS DIFFER");
        free(a), free(x), free(bias), free(scratch), free(y[0]), free(y[1]), free(y[2]);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* linalg_conv.c's pass after a bare Conv (conv_epilogue on the AVX2 copy):
 * per plane, in chunks of 512, the BN's fmaf, then HardSwish */
__attribute__((target("avx2,fma"))) static void bn_hswish_pass(float *y, int64_t planes, int64_t m, int64_t osp,
                                                               const float *bna, const float *bnb)
{
    for (int64_t q = 0; q < planes; q++)
        for (int64_t o = 0; o < osp; o += 512) {
            float *yo = y + q * osp + o, a = bna[q % m], b = bnb[q % m];
            int64_t n = osp - o < 512 ? osp - o : 512;
            for (int64_t i = 0; i < n; i++) yo[i] = fmaf(yo[i], a, b);
            for (int64_t i = 0; i < n; i++) yo[i] = hard_swish_f32(yo[i]);
        }
}
#else
static void bn_hswish_pass(float *y, int64_t planes, int64_t m, int64_t osp, const float *bna, const float *bnb)
{
    for (int64_t q = 0; q < planes * osp; q++) y[q] = hard_swish_f32(fmaf(y[q], bna[q / osp % m], bnb[q / osp % m]));
}
#endif

static void pointwise(void)
{
    /* K, M, side: backbone.7-16 and cbr at 16x16, backbone.4-7 at 32x32 */
    static const int sh[][3] = {{240, 80, 16},  {80, 200, 16},  {200, 80, 16},  {80, 184, 16}, {184, 80, 16},
                                {80, 480, 16},  {480, 112, 16}, {112, 672, 16}, {672, 112, 16}, {672, 160, 16},
                                {160, 960, 16}, {960, 160, 16}, {960, 128, 16}, {72, 40, 32},  {40, 120, 32},
                                {120, 40, 32},  {40, 240, 32}};
    enum { NI = 16 };
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int k = sh[s][0], m = sh[s][1], side = sh[s][2];
        bf__conv_params cp;
        memset(&cp, 0, sizeof cp);
        cp.w.rank = 2;
        for (int d = 0; d < 3; d++) {
            cp.w.in[d] = cp.w.out[d] = d ? side : 1;
            cp.w.k[d] = cp.w.s[d] = cp.w.d[d] = 1;
        }
        int64_t osp = (int64_t)side * side;
        cp.n = NI, cp.c = k, cp.m = m, cp.group = 1, cp.cg = k, cp.mg = m, cp.isp = cp.osp = osp, cp.ksp = 1;
        cp.kc = k, cp.path = BF__CONV_POINTWISE, cp.simd = bf__sgemm_best();
        if (!bf__conv_pws_ok(&cp)) {
            printf("1x1 K=%d M=%d %dx%d: not the path's shape\n", k, m, side, side);
            continue;
        }
        size_t f1 = bf__conv_pw_floats(&cp), f2 = bf__conv_pwl_floats(&cp);
        cp.scratch_floats = f1 > f2 ? f1 : f2;
        int64_t ny = (int64_t)NI * m * osp;
        float *a = rand_floats((int64_t)m * k), *x = rand_floats((int64_t)NI * k * osp);
        float *scratch = rand_floats((int64_t)cp.scratch_floats + 1), *y[4], bna[1024], bnb[1024];
        for (int v = 0; v < 4; v++) y[v] = rand_floats(ny);
        for (int i = 0; i < m; i++) bna[i] = 0.5f + (float)i / (float)m, bnb[i] = (float)(i % 7) - 3.0f;
        bf__pws_epi plain = {.lo = 0.0f, .hi = 0.0f};
        bf__pws_epi bnhs = {.bna = bna, .bnb = bnb, .hswish = 1};
        double best[4] = {1e9, 1e9, 1e9, 1e9};
        for (int r = 0; r < 5; r++)
            for (int v = 0; v < 4; v++) {
                double t0 = now();
                int it = 0;
                do {
                    if (v == 0 || v == 3) bf__conv_direct(&cp, x, a, NULL, NULL, y[v], -1, scratch);
                    else if (!bf__conv_pws(&cp, x, a, v == 1 ? &plain : &bnhs, y[v])) exit(1);
                    if (v == 3) bn_hswish_pass(y[3], NI * m, m, osp, bna, bnb);
                    it++;
                } while (now() - t0 < 0.05);
                double t = (now() - t0) / it;
                if (t < best[v]) best[v] = t;
            }
        int same = memcmp(y[0], y[1], sizeof(float) * (size_t)ny) == 0;
        for (int64_t q = 0; q < ny; q++) {   /* the BN step's fmaf, then HardSwish's kernel */
            int64_t ch = q / osp % m;
            y[0][q] = hard_swish_f32(fmaf(y[0][q], bna[ch], bnb[ch]));
        }
        same = same && memcmp(y[0], y[2], sizeof(float) * (size_t)ny) == 0 &&
               memcmp(y[0], y[3], sizeof(float) * (size_t)ny) == 0;
        double gf = 2.0 * (double)ny * k / 1e9;
        printf("1x1 K=%4d M=%4d %dx%d x%d: before %5.2f ms (%3.0f GFLOP/s), tiles %5.2f ms (%3.0f); "
               "with BN + HardSwish: before + pass %5.2f ms, tiles %5.2f ms (%.2fx)%s\n",
               k, m, side, side, NI, best[0] * 1e3, gf / best[0], best[1] * 1e3, gf / best[1], best[3] * 1e3,
               best[2] * 1e3, best[2] / best[3], same ? ", same bits" : ", BITS DIFFER");
        free(a), free(x), free(scratch), free(y[0]), free(y[1]), free(y[2]), free(y[3]);
    }
}

int main(int argc, char **argv)
{
    int dw = argc < 2 || strcmp(argv[1], "--dw") == 0, se = argc < 2 || strcmp(argv[1], "--se") == 0;
    int pw = argc < 2 || strcmp(argv[1], "--pw") == 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (dw && bf__sgemm_best() >= BF_SGEMM_AVX512) depthwise();
#endif
    if (se) squeeze();
    if (pw) pointwise();
    return 0;
}
