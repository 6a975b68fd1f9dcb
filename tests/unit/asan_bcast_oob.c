/* Built and run in the ASan build only (tests/CMakeLists.txt): a Conv
 * through linalg_conv_bcast.c's kernel whose padded input planes (x) or
 * packed weights (w) are one float short of what its last block reads
 * must get AddressSanitizer's heap-buffer-overflow report (the planes'
 * borders zero, as bf__conv_packed fills them: where the kernel leaves
 * the padding taps out, bc_asan still checks the whole span). The kernel's
 * blocks run uninstrumented there and bc_asan checks each block's memory
 * with region checks instead (linalg_conv_bcast.c says why): without
 * them neither overrun is reported (the block's broadcast of the last
 * float, its load of the last weights). `none` runs the same Conv on
 * whole buffers: no report, and every output equal to a plain sum
 * (small integers, so any order gives the same float).
 *
 * The kernel runs at the level's blocks (AVX-512's, or on AVX2
 * linalg_conv_bcast8.c's: rows packed in blocks of 16, whose last is the
 * copy's end too); without AVX2 (the CPU's, or BITFLIP_SIMD's) the test
 * prints "SKIP:" and ctest counts it skipped.
 *
 * usage: asan_bcast_oob x|w|none */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/simd.h"
#include "exec/ops/linalg_window.h"
#include "exec/ops/sgemm.h"

enum { C = 32, M = 32, H = 6, KS = 3, HP = H + 2, OSP = H * H, KC = C * KS * KS };

int main(int argc, char **argv)
{
    if (argc != 2 || !strchr("xwn", argv[1][0])) {
        fprintf(stderr, "usage: asan_bcast_oob x|w|none\n");
        return 2;
    }
    int level = bf__simd_level();
    if (level < BF__SIMD_AVX2) {
        printf("asan_bcast_oob: SKIP: no AVX2 at this level, so linalg_conv_bcast.c's kernel does not run\n");
        return 0;
    }
    char which = argv[1][0];
    /* 32 input channels (two blocks of 16) of 6 x 6, padded by 1 to 8 x 8,
     * a 3x3 kernel, stride 1, 32 output channels (two vectors): 36
     * positions, six blocks of six; the last position's last tap reads the
     * planes' last float, the last k term the weights' last 32 */
    bf__conv_params cp;
    memset(&cp, 0, sizeof cp);
    bf__window *w = &cp.w;
    w->rank = 2;
    for (int d = 0; d < 3; d++) w->in[d] = w->out[d] = w->k[d] = w->s[d] = w->d[d] = 1;
    w->in[1] = w->in[2] = w->out[1] = w->out[2] = H;
    w->k[1] = w->k[2] = KS;
    w->pb[1] = w->pb[2] = w->pe[1] = w->pe[2] = 1;
    cp.n = 1, cp.c = cp.cg = C, cp.m = cp.mg = M, cp.group = 1;
    cp.isp = OSP, cp.osp = OSP, cp.ksp = KS * KS, cp.kc = KC, cp.nb = 1, cp.has_bias = 1;
    cp.simd = level >= BF__SIMD_AVX512 ? BF_SGEMM_AVX512 : BF_SGEMM_AVX2, cp.bcast = 1;
    if (!bf__conv_bcast_ok(&cp)) {
        fprintf(stderr, "asan_bcast_oob: the kernel does not take this Conv\n");
        return 2;
    }
    size_t nx = (size_t)C * HP * HP - (which == 'x'), nw = (size_t)M * KC;
    float *xp = malloc(nx * sizeof *xp), *wt = malloc(nw * sizeof *wt), *full = malloc(nw * sizeof *full);
    float *wpk = malloc((nw - (which == 'w')) * sizeof *wpk), *bias = malloc(M * sizeof *bias);
    float *y = malloc((size_t)M * OSP * sizeof *y), *buf = malloc(bf__conv_bcast_floats(&cp) * sizeof *buf);
    if (!xp || !wt || !full || !wpk || !bias || !y || !buf) return 2;
    for (size_t i = 0; i < nx; i++) {
        size_t ih = i % ((size_t)HP * HP) / HP, iw = i % HP;
        xp[i] = ih == 0 || ih == HP - 1 || iw == 0 || iw == HP - 1 ? 0.0f : (float)(i % 5) - 2.0f;
    }
    for (size_t i = 0; i < nw; i++) wt[i] = (float)(i % 7) - 3.0f;
    for (int r = 0; r < M; r++) bias[r] = (float)r;
    /* packed whole (its packing is instrumented code), then copied into
     * the buffer the kernel reads, one float short for `w` */
    if (!bf__conv_bcast_pack(&cp, wt, full)) return 2;
    memcpy(wpk, full, (nw - (which == 'w')) * sizeof *wpk);
    bf__conv_bcast(&cp, wt, wpk, 1, xp, buf, bias, NULL, y, NULL, 0, NULL, 0);
    if (which != 'n') {
        printf("no report: %c one float short, and the Conv ran to the end\n", which);
        free(xp), free(wt), free(full), free(wpk), free(bias), free(y), free(buf);
        return 0;
    }
    int bad = 0;
    for (int r = 0; r < M; r++)
        for (int oh = 0; oh < H; oh++)
            for (int ow = 0; ow < H; ow++) {
                float s = bias[r];
                for (int c = 0; c < C; c++)
                    for (int kh = 0; kh < KS; kh++)
                        for (int kw = 0; kw < KS; kw++)
                            s += wt[(size_t)r * KC + c * KS * KS + kh * KS + kw] * xp[c * HP * HP + (oh + kh) * HP + ow + kw];
                float got = y[r * OSP + oh * H + ow];
                if (got != s && bad++ < 5) fprintf(stderr, "y[%d][%d][%d] = %g, the plain sum %g\n", r, oh, ow, got, s);
            }
    printf("asan_bcast_oob none: %d of %d outputs differ from the plain sum\n", bad, M * OSP);
    free(xp), free(wt), free(full), free(wpk), free(bias), free(y), free(buf);
    return bad != 0;
}
