/* Built and run in the ASan build only (tests/CMakeLists.txt): a 1x1 Conv
 * through linalg_conv_pwseg.c's kernel whose output y (written by the
 * last block's epilogue) or residual (read there) is one float short must
 * get AddressSanitizer's heap-buffer-overflow report. The kernel's blocks
 * run uninstrumented there and ps_asan checks each block's memory with
 * region checks instead (linalg_conv_pwseg.c says why): without them
 * neither overrun is reported (the block's store of the last 16 outputs,
 * its load of the residual's last 16 floats). `none` runs the same Conv
 * on whole buffers: no report, and every output equal to a plain sum
 * (small integers, so any order gives the same float).
 *
 * The kernel is AVX-512 only: at a lower level (the CPU's, or
 * BITFLIP_SIMD's) the test prints "SKIP:" and ctest counts it skipped.
 *
 * usage: asan_pwseg_oob y|res|none */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/simd.h"
#include "exec/ops/linalg_pwseg.h"
#include "exec/ops/sgemm.h"

/* 32 input channels, 16 output channels (one block of 8 and one of 8
 * rows), a 16 x 16 map: 256 positions, eight pairs of panels; the last
 * block's last pair writes y's last float and reads the residual's */
enum { C = 32, M = 16, OSP = 256 };

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "y") && strcmp(argv[1], "res") && strcmp(argv[1], "none"))) {
        fprintf(stderr, "usage: asan_pwseg_oob y|res|none\n");
        return 2;
    }
    if (bf__simd_level() < BF__SIMD_AVX512) {
        printf("asan_pwseg_oob: SKIP: no AVX-512 at this level, so linalg_conv_pwseg.c's kernel does not run\n");
        return 0;
    }
    char which = argv[1][0];
    bf__conv_params cp;
    memset(&cp, 0, sizeof cp);
    for (int d = 0; d < 3; d++) cp.w.in[d] = cp.w.out[d] = cp.w.k[d] = cp.w.s[d] = cp.w.d[d] = 1;
    cp.w.rank = 2, cp.w.in[1] = cp.w.in[2] = cp.w.out[1] = cp.w.out[2] = 16;
    cp.n = 1, cp.c = cp.cg = C, cp.m = cp.mg = M, cp.group = 1;
    cp.isp = cp.osp = OSP, cp.ksp = 1, cp.kc = C, cp.nb = 1, cp.has_bias = 1;
    cp.path = BF__CONV_POINTWISE, cp.simd = BF_SGEMM_AVX512;
    if (!bf__conv_pws_ok(&cp)) {
        fprintf(stderr, "asan_pwseg_oob: the kernel does not take this Conv\n");
        return 2;
    }
    size_t nx = (size_t)C * OSP, nw = (size_t)M * C, ny = (size_t)M * OSP - (which == 'y'),
           nr = (size_t)M * OSP - (which == 'r');
    float *x = malloc(nx * sizeof *x), *wt = malloc(nw * sizeof *wt), *bias = malloc(M * sizeof *bias);
    float *res = malloc(nr * sizeof *res), *y = malloc(ny * sizeof *y);
    if (!x || !wt || !bias || !res || !y) return 2;
    for (size_t i = 0; i < nx; i++) x[i] = (float)(i % 5) - 2.0f;
    for (size_t i = 0; i < nw; i++) wt[i] = (float)(i % 7) - 3.0f;
    for (size_t i = 0; i < nr; i++) res[i] = (float)(i % 3);
    for (int r = 0; r < M; r++) bias[r] = (float)r;
    bf__pws_epi e = {.bias = bias, .res = res, .lo = -INFINITY, .hi = INFINITY};
    if (!bf__conv_pws(&cp, x, wt, &e, y)) return 2;
    if (which != 'n') {
        printf("no report: %s one float short, and the Conv ran to the end\n", argv[1]);
        free(x), free(wt), free(bias), free(res), free(y);
        return 0;
    }
    int bad = 0;
    for (int r = 0; r < M; r++)
        for (int q = 0; q < OSP; q++) {
            float s = 0.0f;
            for (int c = 0; c < C; c++) s += wt[r * C + c] * x[c * OSP + q];
            s = s + bias[r] + res[r * OSP + q];
            if (y[r * OSP + q] != s && bad++ < 5) fprintf(stderr, "y[%d][%d] = %g, the plain sum %g\n", r, q, y[r * OSP + q], s);
        }
    printf("asan_pwseg_oob none: %d of %d outputs differ from the plain sum\n", bad, M * OSP);
    free(x), free(wt), free(bias), free(res), free(y);
    return bad != 0;
}
