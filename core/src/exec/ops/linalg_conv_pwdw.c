/* A 1x1 Conv (an inverted residual block's expansion, its activation fused)
 * and the depthwise Conv that is the one reader of its activation's output,
 * run together a block of channels of one image at a time (plan_fuse.c,
 * bf__plan_find_pwdw; plan.c runs the pair in bitflip eval's passes).
 *
 * Why: apart, the expansion writes its whole output (features.2 of
 * mobilenet_v2: 96 x 112x112 floats an image, 19 MB for a batch of 4) and
 * the depthwise step reads it back from memory; together, the block's
 * planes (at most BF__PWDW_FLOATS floats) are written and read while they
 * are in L2, and the expansion's output is never written at all. Measured
 * per shape (bitflip-bench-conv --fuse, docs/perf/mobilenet.md, h16-mb):
 * 0.35-0.41x the pair's time apart at 112x112, 0.43-0.77x at 56x56,
 * 0.63-0.97x at 28x28, 0.92-1.11x at 14x14 on the Intel host; on the AMD
 * EPYC of h18-mbv2 0.67-0.92x at 14x14 and 0.87-0.98x at 7x7 in blocks of
 * 32-64, so those pairs are taken too (BF__PWDW_NMIN, BF__PWDW_BLK_SMALL).
 *
 * The bits: each expansion element is the step's own chain and epilogue
 * (bf__conv_direct's 1x1 loop runs a group's rows in one call; here the
 * same call on a block of those rows: the product's per-element chain
 * over K does not depend on how many rows a call takes, the in-place rows
 * of linalg_conv_pointwise.c where bf__conv_pw_inplace_ok says, as the
 * step would for that many rows), and each depthwise element the step's
 * own kernel on the same input floats (bf__conv_direct on the block's
 * channels: a channel's outputs read only its own plane). test_conv_fuse
 * checks the pair's outputs against the steps run apart. */
#include <limits.h>
#include <stdint.h>

#include "exec/op.h"
#include "exec/step_access.h"
#include "linalg_window.h"
#include "sgemm.h"

/* the whole pair's shape: a 1x1 Conv of one group with a bias (the step's
 * product path; neither the lanes nor the images side by side, which its
 * rule gives maps under 96 positions only), over at least BF__PWDW_NMIN
 * positions, then a depthwise Conv reading all its M channels, on AVX-512
 * (the 1x1 path's in-place rows and the depthwise kernels there) */
static int64_t pair_blk(const bf__conv_params *cp, const bf__conv_params *cq)
{
    if (cp->path != BF__CONV_POINTWISE || cq->path != BF__CONV_DEPTHWISE) return 0;
    if (cp->simd < BF_SGEMM_AVX512 || cq->simd < BF_SGEMM_AVX512) return 0;
    if (cp->group != 1 || !cp->has_bias || cp->kc < 1 || cp->osp < BF__PWDW_NMIN || cp->osp > INT_MAX) return 0;
    if (cq->c != cp->m || cq->m != cp->m || cq->group != cp->m || cq->n != cp->n || cq->isp != cp->osp ||
        cq->osp < 1 || cq->kc < 1)
        return 0;
    if (bf__conv_pwl_want(cp) || bf__conv_pw_images(cp) > 1) return 0;
    int64_t blk = BF__PWDW_FLOATS / cp->osp;
    int64_t cap = cp->osp < BF__PWDW_SMALL ? BF__PWDW_BLK_SMALL : BF__PWDW_BLK;
    if (blk > cap) blk = cap;
    blk &= ~(int64_t)7;
    return blk < 8 ? 0 : blk;
}

int64_t bf__conv_pwdw_pair(const bf__step *pw, const bf__step *dw)
{
    if (!bf__conv_step(pw) || !bf__conv_step(dw)) return 0;
    const bf__conv_params *cp = pw->params, *cq = dw->params;
    int64_t blk = pair_blk(cp, cq);
    return blk ? blk * cp->osp : 0;
}

/* what the fused epilogue of either Conv may hold here: an activation the
 * product or the depthwise kernel applies before its store (Relu, Clip),
 * or none; a BN, a residual Add or HardSwish would run in a pass after
 * the whole step (linalg_conv.c, bare) and is left to the steps */
static int plain_epilogue(const bf__ctx *c) { return !c->res && !c->bn && !(c->act && c->act->hswish); }

int bf__conv_pwdw(const bf__ctx *pw, const bf__ctx *dw, float *buf, size_t buf_floats)
{
    const bf__conv_params *cp = pw->params, *cq = dw->params;
    int64_t blk = pair_blk(cp, cq);
    if (!blk || (size_t)(blk * cp->osp) > buf_floats || !plain_epilogue(pw) || !plain_epilogue(dw)) return 0;
    const float *x = pw->in[0]->data, *wt = pw->in[1]->data, *bias = pw->in[2]->data;
    const float *wq = dw->in[1]->data, *bq = cq->has_bias ? dw->in[2]->data : NULL;
    float *y = dw->out[0]->data;
    int osp = (int)cp->osp, kc = (int)cp->kc;
    /* the depthwise kernel's masks once a step, not once a block and image
     * (0.7% of a mobilenet_v2 pass at batch 4: docs/perf/mobilenet/h32.md) */
    bf__dw_flat table;
    const bf__dw_flat *tab = bf__dw_flat_table(cq, &table) ? &table : NULL;
    for (int64_t n = 0; n < cp->n; n++) {
        const float *xn = x + n * cp->c * cp->isp;
        for (int64_t c0 = 0; c0 < cp->m; c0 += blk) {
            int64_t cb = cp->m - c0 < blk ? cp->m - c0 : blk;
            const float *wg = wt + c0 * kc;
            /* bf__conv_direct's 1x1 loop for rows c0 .. c0 + cb of group 0 */
            if (bf__conv_pw_inplace_ok(cp, cb))
                bf__conv_pw_inplace((int)cb, osp, kc, wg, kc, xn, osp, bias + c0, pw->act, buf, osp);
            else
                bf__sgemm_bias(cp->simd, (int)cb, osp, kc, wg, kc, xn, osp, bias + c0, pw->act, buf, osp);
            bf__conv_params q = *cq;
            q.n = 1, q.c = q.m = q.group = cb;
            bf__conv_direct_dw(&q, tab, buf, wq + c0 * cq->kc, bq ? bq + c0 : NULL, dw->act,
                               y + (n * cq->m + c0) * cq->osp);
        }
    }
    return 1;
}
