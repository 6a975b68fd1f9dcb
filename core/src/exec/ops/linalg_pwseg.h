/* linalg_conv_pwseg.c: the 1x1 Conv over maps of BF__PWS_NMIN ..
 * BF__PWS_NMAX positions (a multiple of 32; lraspp_mobilenet_v3_large's
 * 16x16 and 32x32 layers) with what follows it (a BatchNormalization, a
 * residual Add, the activation) in the product's epilogue, on AVX-512,
 * whole steps only: the bits of the 1x1 path followed by linalg_conv.c's
 * pass (docs/ENGINE.md, "The convolution path"). */
#ifndef BF_LINALG_PWSEG_H
#define BF_LINALG_PWSEG_H

#include "exec/op.h"
#include "linalg_window.h"

#define BF__PWS_NMIN 256
#define BF__PWS_NMAX 1024

/* What follows the product, per output channel i and element: v = 1 * s,
 * + bias[i] (NULL: none), fmaf(v, bna[i], bnb[i]) (NULL: no BN), the
 * residual Add of res (laid out as y; res_a: res is the Add's A; NULL:
 * none), then HardSwish (hswish) or max(lo, v) then min(hi, v) (clamp). */
typedef struct bf__pws_epi {
    const float *bias, *bna, *bnb, *res;
    int res_a, hswish, clamp;
    float lo, hi;
} bf__pws_epi;

/* 1: the shape and level the path takes (a group of one, 16 to 1024
 * output channels, K of 16 or more, the map as above, stride 1) */
int bf__conv_pws_ok(const bf__conv_params *cp);
/* every output channel of every image, the epilogue e in registers; 0,
 * y untouched, when the packed weights (mg x kc floats) found no memory */
int bf__conv_pws(const bf__conv_params *cp, const float *x, const float *wt, const bf__pws_epi *e, float *y);
/* the whole step (c: its inputs, bn, res, act): 0, nothing written, where
 * bf__conv_pws_ok says no */
int bf__conv_pws_step(const bf__conv_params *cp, const bf__ctx *c);

#endif
