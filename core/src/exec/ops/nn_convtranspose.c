/* ConvTranspose (1-D to 3-D): the gradient of Conv with respect to its
 * input, computed as PyTorch's slow_conv_transpose does: per image and
 * group, the column matrix W_g^T X_g (bf__sgemm), scattered back into the
 * output (col2im), then the bias. W and B are read at every run: faults
 * rewrite them between runs. */
#include <assert.h>
#include <limits.h>
#include <string.h>

#include "exec/op.h"
#include "linalg_impl.h"
#include "sgemm.h"

typedef struct convt_params {
    int rank;                               /* spatial rank of the model's tensors */
    /* 3-D always: dims of a lower rank are padded in front with 1s */
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
    int64_t n, c, m, group, cg, mg, isp, osp, ksp;
    int has_bias;
} convt_params;
static_assert(sizeof(convt_params) <= BF__OP_PARAMS_MAX, "convtranspose params too large");

/* Reads the ints attribute `name` into v[0, r) (default def) and, if
 * `given`, whether it was there; a value count other than r (or, for
 * output_shape, r + 2: N and C first) is an error. */
static bf_status spatial_ints(const bf__node *nd, const char *name, int r, int64_t def, int64_t *v, int *given,
                              bf_error *err)
{
    int64_t buf[6];
    int cnt;
    bf_status st = bf__attr_ints(nd, name, buf, 6, &cnt, err);
    if (st) return st;
    if (given) *given = cnt >= 0;
    int skip = strcmp(name, "output_shape") == 0 && cnt == r + 2 ? 2 : 0;
    if (cnt >= 0 && cnt - skip != r)
        return bf__node_error(err, nd, BF_EFORMAT, "attribute '%s' has %d values; expected %d (one per spatial dim)",
                              name, cnt, r);
    for (int i = 0; i < r; i++) v[i] = cnt >= 0 ? buf[skip + i] : def;
    return BF_OK;
}

bf_status bf__convt_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    convt_params *cp = (convt_params *)p->params;
    const bf_tensor *x = p->in[0], *wt = p->in[1];
    const bf_tensor *b = p->n_in > 2 ? p->in[2] : NULL;
    bf_status st;
    if ((st = bf__want_f32(p, 0, "X", err)) || (st = bf__want_f32(p, 1, "W", err))) return st;
    if (b && (st = bf__want_f32(p, 2, "B", err))) return st;
    char sx[96], sw[96];
    int r = x->ndim - 2;
    if (r < 1 || r > 3 || wt->ndim != x->ndim)
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "inputs X %s and W %s: expected X [N, C, D1, ...] with 1 to 3 spatial dims and W "
                              "[C, M/group, k1, ...] of the same rank",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx), bf_shape_str(wt->dims, wt->ndim, sw, sizeof sw));
    int64_t group;
    if ((st = bf__attr_int(nd, "group", 1, &group, err))) return st;
    int64_t c = x->dims[1];
    if (wt->dims[0] != c)
        return bf__node_error(err, nd, BF_ESHAPE, "input W has shape %s; expected dim 0 = C = %lld from X %s",
                              bf_shape_str(wt->dims, wt->ndim, sw, sizeof sw), (long long)c,
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    if (group < 1 || c % group != 0)
        return bf__node_error(err, nd, BF_EFORMAT, "attribute 'group' is %lld; it must be >= 1 and divide C = %lld",
                              (long long)group, (long long)c);
    int64_t m = wt->dims[1] * group;
    if (b && (b->ndim != 1 || b->dims[0] != m))
        return bf__node_error(err, nd, BF_ESHAPE, "input B has shape %s; expected [M] = [W dim 1 * group] = [%lld]",
                              bf_shape_str(b->dims, b->ndim, sw, sizeof sw), (long long)m);
    int64_t ks[3], ss[3], ds[3], ops[3], oshape[3], pads[6];
    int gk, gos, np;
    if ((st = spatial_ints(nd, "kernel_shape", r, 0, ks, &gk, err)) ||
        (st = spatial_ints(nd, "strides", r, 1, ss, NULL, err)) ||
        (st = spatial_ints(nd, "dilations", r, 1, ds, NULL, err)) ||
        (st = spatial_ints(nd, "output_padding", r, 0, ops, NULL, err)) ||
        (st = spatial_ints(nd, "output_shape", r, 0, oshape, &gos, err)) ||
        (st = bf__attr_ints(nd, "pads", pads, 6, &np, err)))
        return st;
    if (np >= 0 && np != 2 * r)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'pads' has %d values; expected %d (begin and end per spatial dim)", np, 2 * r);
    const char *auto_pad;
    if ((st = bf__attr_string(nd, "auto_pad", "NOTSET", &auto_pad, err))) return st;
    int upper = strcmp(auto_pad, "SAME_UPPER") == 0, lower = strcmp(auto_pad, "SAME_LOWER") == 0;
    int valid = strcmp(auto_pad, "VALID") == 0;
    if (!upper && !lower && !valid && strcmp(auto_pad, "NOTSET") != 0)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'auto_pad' is '%.40s'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID", auto_pad);
    if ((upper || lower || valid) && np >= 0)
        return bf__node_error(err, nd, BF_EFORMAT, "attributes 'pads' and auto_pad = %s cannot be used together",
                              auto_pad);
    cp->rank = r;
    for (int i = 0; i < 3; i++) cp->in[i] = cp->out[i] = cp->k[i] = cp->s[i] = cp->d[i] = 1, cp->pb[i] = 0;
    for (int i = 0; i < r; i++) {
        int j = 3 - r + i;
        int64_t in = x->dims[2 + i], k = wt->dims[2 + i], s = ss[i], d = ds[i], op = ops[i];
        if (gk && ks[i] != k)
            return bf__node_error(err, nd, BF_ESHAPE, "attribute 'kernel_shape' says %lld in spatial dim %d but W has %lld",
                                  (long long)ks[i], i, (long long)k);
        if (s < 1 || d < 1 || op < 0 || s > INT_MAX || d > INT_MAX || op > INT_MAX || k > INT_MAX)
            return bf__node_error(err, nd, BF_EFORMAT,
                                  "spatial dim %d: stride %lld, dilation %lld, output_padding %lld; stride and "
                                  "dilation must be >= 1, output_padding >= 0",
                                  i, (long long)s, (long long)d, (long long)op);
        /* sizes come from the file: keep every product below 2^40 before forming it */
        if ((double)s * (double)in + (double)k * (double)d + (double)op > (double)((int64_t)1 << 40) ||
            (gos && (oshape[i] < 0 || oshape[i] > ((int64_t)1 << 40))))
            return bf__node_error(err, nd, BF_EUNSUPPORTED, "spatial dim %d: the output would be too large (input %lld, "
                                  "stride %lld, kernel %lld, dilation %lld)",
                                  i, (long long)in, (long long)s, (long long)k, (long long)d);
        int64_t ext = (k - 1) * d + 1, full = s * (in - 1) + op + ext, out, pb;
        if (gos || upper || lower) {
            /* the spec's total padding, split with the odd one at the end for
             * SAME_UPPER and at the start otherwise */
            out = gos ? oshape[i] : in * s;
            int64_t total = full - out;
            pb = upper ? total / 2 : total - total / 2;
        } else {
            int64_t pe = np >= 0 ? pads[r + i] : 0;
            pb = np >= 0 ? pads[i] : 0;
            if (pb < 0 || pe < 0)
                return bf__node_error(err, nd, BF_EFORMAT, "attribute 'pads' has a negative value in spatial dim %d", i);
            out = full - pb - pe;
        }
        if (out < 0)
            return bf__node_error(err, nd, BF_ESHAPE, "spatial dim %d: output size %lld is negative (input %lld, "
                                  "kernel extent %lld, pads or output_shape too large)",
                                  i, (long long)out, (long long)in, (long long)ext);
        cp->in[j] = in, cp->out[j] = out, cp->k[j] = k, cp->s[j] = s, cp->d[j] = d, cp->pb[j] = pb;
    }
    cp->n = x->dims[0], cp->c = c, cp->m = m, cp->group = group, cp->cg = c / group, cp->mg = m / group;
    cp->isp = cp->in[0] * cp->in[1] * cp->in[2];
    if ((double)cp->out[0] * (double)cp->out[1] * (double)cp->out[2] * (double)cp->n * (double)m > (double)((int64_t)1 << 40))
        return bf__node_error(err, nd, BF_EUNSUPPORTED, "the output [%lld, %lld, ...] would have more than 2^40 elements",
                              (long long)cp->n, (long long)m);
    cp->osp = cp->out[0] * cp->out[1] * cp->out[2];
    cp->ksp = cp->k[0] * cp->k[1] * cp->k[2];
    cp->has_bias = b != NULL;
    if (cp->mg * cp->ksp > INT_MAX || cp->isp > INT_MAX || cp->cg > INT_MAX ||
        (double)cp->mg * (double)cp->ksp * (double)cp->isp * sizeof(float) > (double)((size_t)1 << 36))
        return bf__node_error(err, nd, BF_EUNSUPPORTED, "too large: M/group %lld x kernel %lld x input positions %lld",
                              (long long)cp->mg, (long long)cp->ksp, (long long)cp->isp);
    p->scratch = (size_t)(cp->mg * cp->ksp * cp->isp) * sizeof(float);
    int64_t dims[5] = {cp->n, m};
    for (int i = 0; i < r; i++) dims[2 + i] = cp->out[3 - r + i];
    bf__set_shape(p->out[0], BF_F32, 2 + r, dims);
    return BF_OK;
}

/* Adds the column matrix cols [mg * ksp, isp] into the group's output planes
 * y [mg, osp]: tap (kd, kh, kw) of input position (id, ih, iw) lands on
 * output (id*s - pb + kd*d, ...), if that is inside the output. */
static void col2im(const convt_params *cp, const float *restrict cols, float *restrict y)
{
    const int64_t *in = cp->in, *out = cp->out, *k = cp->k, *s = cp->s, *d = cp->d, *pb = cp->pb;
    for (int64_t j = 0; j < cp->mg; j++)
        for (int64_t kd = 0; kd < k[0]; kd++)
            for (int64_t kh = 0; kh < k[1]; kh++)
                for (int64_t kw = 0; kw < k[2]; kw++) {
                    const float *col = cols + ((j * k[0] + kd) * k[1] * k[2] + kh * k[2] + kw) * cp->isp;
                    float *yj = y + j * cp->osp;
                    for (int64_t id = 0; id < in[0]; id++) {
                        int64_t od = id * s[0] - pb[0] + kd * d[0];
                        if (od < 0 || od >= out[0]) continue;
                        for (int64_t ih = 0; ih < in[1]; ih++) {
                            int64_t oh = ih * s[1] - pb[1] + kh * d[1];
                            if (oh < 0 || oh >= out[1]) continue;
                            const float *cr = col + (id * in[1] + ih) * in[2];
                            float *yr = yj + (od * out[1] + oh) * out[2];
                            for (int64_t iw = 0; iw < in[2]; iw++) {
                                int64_t ow = iw * s[2] - pb[2] + kw * d[2];
                                if (ow >= 0 && ow < out[2]) yr[ow] += cr[iw];
                            }
                        }
                    }
                }
}

bf_status bf__convt_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const convt_params *cp = c->params;
    const float *x = c->in[0]->data, *wt = c->in[1]->data;
    const float *bias = cp->has_bias ? c->in[2]->data : NULL;
    float *y = c->out[0]->data, *cols = c->scratch;
    int rows = (int)(cp->mg * cp->ksp);
    memset(y, 0, sizeof(float) * (size_t)(cp->n * cp->m * cp->osp));
    for (int64_t n = 0; n < cp->n; n++)
        for (int64_t g = 0; g < cp->group; g++) {
            float *yg = y + (n * cp->m + g * cp->mg) * cp->osp;
            if (rows > 0 && cp->isp > 0 && cp->osp > 0) {
                const float *xg = x + (n * cp->c + g * cp->cg) * cp->isp;
                const float *wg = wt + g * cp->cg * cp->mg * cp->ksp;
                if (cp->cg == 0) memset(cols, 0, sizeof(float) * (size_t)rows * (size_t)cp->isp);
                else bf__sgemm(1, 0, rows, (int)cp->isp, (int)cp->cg, 1.0f, wg, rows, xg, (int)cp->isp, 0, cols,
                               (int)cp->isp);
                col2im(cp, cols, yg);
            }
            if (bias)
                for (int64_t j = 0; j < cp->mg; j++) {
                    float bv = bias[g * cp->mg + j];
                    for (int64_t o = 0; o < cp->osp; o++) yg[j * cp->osp + o] += bv;
                }
        }
    return BF_OK;
}
