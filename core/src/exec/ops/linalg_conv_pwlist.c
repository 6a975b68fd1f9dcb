/* A unit 1x1 Conv at a list of output positions alone (op.h, bf__cpos: the
 * differential engine's re-run of the positions a moved input reaches,
 * core/src/diff/diffpos.c), where the 1x1 lanes do not take it (AVX2, or
 * maps of 96 positions and more): per image, its listed columns of X
 * gathered into a plain B (K x ns, moves only), and the residual's too
 * where one is fused; the product through bf__sgemm_bias with the bias,
 * the residual Add and the activation in its epilogue; the outputs moved
 * back to their places. A 1x1 kernel's column matrix is X itself, and
 * bf__sgemm_bias gives each element its in-order chain over K and the
 * same epilogue whatever the columns beside it (docs/ENGINE.md, "The
 * convolution path"), so each listed output has the bits of the whole
 * step. The gather room is the caller's (cpos->work), so a plan's own
 * scratch, which every golden pass touches, does not grow. */
#include <stdint.h>

#include "exec/op.h"
#include "linalg_pwseg.h"
#include "linalg_window.h"
#include "sgemm.h"

int bf__conv_pw_list_ok(const bf__conv_params *cp)
{
    /* the residual Add in the product's epilogue at cp->simd (AVX2 and
     * AVX-512); pws takes its maps before any list is looked at */
    return cp->path == BF__CONV_POINTWISE && cp->group == 1 && bf__conv_res_direct(cp) && cp->osp > 0 &&
           cp->osp <= BF__PW_LIST_MAXPOS && cp->m <= INT32_MAX && !bf__conv_pws_ok(cp);
}

int64_t bf__conv_pw_list_floats(int64_t c, int64_t m, int64_t osp) { return (c + 2 * m) * osp; }

int bf__conv_pw_list(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                     const bf__act *act, float *y, bf__cpos *cpos)
{
    const int64_t osp = cp->osp, kc = cp->kc, m = cp->m, c = cp->c;
    if (!cpos || !bias || !bf__conv_pw_list_ok(cp) || !cpos->work ||
        cpos->work_floats < bf__conv_pw_list_floats(c, m, osp))
        return 0;
    const int res = act && act->res;
    float *b = cpos->work, *r = b + kc * osp, *o = r + m * osp;
    for (int64_t s = 0; s < cpos->n;) {
        const int64_t img = cpos->q[s] / osp, q0 = img * osp;
        int64_t e = s;
        while (e < cpos->n && cpos->q[e] < q0 + osp) e++;
        const int64_t ns = e - s;
        const int32_t *q = cpos->q + s;
        const float *xi = x + img * c * osp;
        for (int64_t k = 0; k < kc; k++)
            for (int64_t j = 0; j < ns; j++) b[k * ns + j] = xi[k * osp + q[j] - q0];
        bf__act ka;
        const bf__act *kact = act;
        if (res) {
            const float *ri = act->res + img * m * osp;
            for (int64_t ch = 0; ch < m; ch++)
                for (int64_t j = 0; j < ns; j++) r[ch * ns + j] = ri[ch * osp + q[j] - q0];
            ka = *act, ka.res = r, kact = &ka;
        }
        bf__sgemm_bias(cp->simd, (int)m, (int)ns, (int)kc, wt, (int)kc, b, (int)ns, bias, kact, o, (int)ns);
        float *yi = y + img * m * osp;
        for (int64_t ch = 0; ch < m; ch++)
            for (int64_t j = 0; j < ns; j++) yi[ch * osp + q[j] - q0] = o[ch * ns + j];
        s = e;
    }
    cpos->used = 1;
    return 1;
}
