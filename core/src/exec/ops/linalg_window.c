/* Window geometry, shared by Conv and the pools (linalg_window.h): reads
 * kernel_shape, strides, dilations, pads, auto_pad and ceil_mode into one
 * 3-D window whatever the spatial rank, with the ONNX output-size formulas
 * and the errors that name the attribute at fault. Conv's paths and the
 * pools read only the window this fills, never the attributes. */
#include <limits.h>
#include <string.h>

#include "exec/op.h"
#include "linalg_window.h"

/* linalg_window.h says what it reads and how output sizes follow. */
bf_status bf__window_parse(const bf__prep *p, int kind, const int64_t *wkernel, bf__window *w, bf_error *err)
{
    const bf__node *nd = p->node;
    const bf_tensor *x = p->in[0];
    bf_status st;
    char sx[96];
    int r = x->ndim - 2;
    if (r < 1 || r > 3)
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "input X has shape %s; expected [N, C, D1, ...] with 1 to 3 spatial dims",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    int64_t ks[3], ss[3], ds[3], pads[6];
    int nk, ns, ndil, np;
    if ((st = bf__attr_ints(nd, "kernel_shape", ks, 3, &nk, err)) ||
        (st = bf__attr_ints(nd, "strides", ss, 3, &ns, err)) ||
        (st = bf__attr_ints(nd, "dilations", ds, 3, &ndil, err)) ||
        (st = bf__attr_ints(nd, "pads", pads, 6, &np, err)))
        return st;
    const char *auto_pad;
    if ((st = bf__attr_string(nd, "auto_pad", "NOTSET", &auto_pad, err))) return st;
    int64_t ceil_mode = 0;
    if (kind != BF__WIN_CONV && (st = bf__attr_int(nd, "ceil_mode", 0, &ceil_mode, err))) return st;
    if (ceil_mode != 0 && ceil_mode != 1)
        return bf__node_error(err, nd, BF_EFORMAT, "attribute 'ceil_mode' is %lld; must be 0 or 1",
                              (long long)ceil_mode);

    if (nk < 0 && !wkernel)
        return bf__node_error(err, nd, BF_EFORMAT, "attribute 'kernel_shape' is required");
    if (nk >= 0 && nk != r)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'kernel_shape' has %d values; expected %d (one per spatial dim)",
                              nk, r);
    if (ns >= 0 && ns != r)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'strides' has %d values; expected %d (one per spatial dim)", ns, r);
    if (ndil >= 0 && ndil != r)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'dilations' has %d values; expected %d (one per spatial dim)",
                              ndil, r);
    if (np >= 0 && np != 2 * r)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'pads' has %d values; expected %d (begin and end per spatial dim)",
                              np, 2 * r);
    int same_upper = strcmp(auto_pad, "SAME_UPPER") == 0, same_lower = strcmp(auto_pad, "SAME_LOWER") == 0;
    int valid = strcmp(auto_pad, "VALID") == 0;
    if (!same_upper && !same_lower && !valid && strcmp(auto_pad, "NOTSET") != 0)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'auto_pad' is '%.40s'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID",
                              auto_pad);

    w->rank = r;
    for (int i = 0; i < 3; i++) {
        w->in[i] = w->out[i] = w->k[i] = w->s[i] = w->d[i] = 1;
        w->pb[i] = w->pe[i] = 0;
    }
    for (int i = 0; i < r; i++) {
        int j = 3 - r + i;
        int64_t in = x->dims[2 + i];
        int64_t k = nk >= 0 ? ks[i] : wkernel[i];
        int64_t s = ns >= 0 ? ss[i] : 1, d = ndil >= 0 ? ds[i] : 1;
        int64_t pb = np >= 0 ? pads[i] : 0, pe = np >= 0 ? pads[r + i] : 0;
        if (wkernel && k != wkernel[i])
            return bf__node_error(err, nd, BF_ESHAPE,
                                  "attribute 'kernel_shape' says %lld in spatial dim %d but W has %lld",
                                  (long long)k, i, (long long)wkernel[i]);
        if (k < 1 || s < 1 || d < 1)
            return bf__node_error(err, nd, BF_EFORMAT,
                                  "spatial dim %d: kernel %lld, stride %lld, dilation %lld; each must be >= 1",
                                  i, (long long)k, (long long)s, (long long)d);
        if (kind == BF__WIN_AVGPOOL && d != 1)
            return bf__node_error(err, nd, BF_EUNSUPPORTED,
                                  "attribute 'dilations' must be 1 for AveragePool (dilations came with opset 19)");
        if (pb < 0 || pe < 0)
            return bf__node_error(err, nd, BF_EFORMAT, "attribute 'pads' has a negative value in spatial dim %d", i);
        if ((same_upper || same_lower || valid) && (pb || pe))
            return bf__node_error(err, nd, BF_EFORMAT,
                                  "attributes 'pads' and auto_pad = %s cannot be used together", auto_pad);
        if (k > INT_MAX || d > INT_MAX || s > INT_MAX || pb > INT_MAX || pe > INT_MAX)
            return bf__node_error(err, nd, BF_EUNSUPPORTED, "spatial dim %d: attributes too large", i);
        int64_t ext = (k - 1) * d + 1, out;
        if (same_upper || same_lower) {
            out = bf__ceil_div(in, s);
            int64_t total = (out - 1) * s + ext - in;
            if (total < 0) total = 0;
            pb = same_upper ? total / 2 : total - total / 2;
            pe = total - pb;
        } else {
            int64_t span = in + pb + pe - ext;
            if (span < 0)
                return bf__node_error(err, nd, BF_ESHAPE,
                                      "spatial dim %d: input size %lld plus pads %lld + %lld is smaller than "
                                      "the kernel extent %lld",
                                      i, (long long)in, (long long)pb, (long long)pe, (long long)ext);
            out = (ceil_mode ? bf__ceil_div(span, s) : span / s) + 1;
            if (ceil_mode && (out - 1) * s >= in + pb) out--;
        }
        /* A pool window lying wholly in the padding has no elements. */
        if (kind != BF__WIN_CONV && (pb >= ext || pe >= ext))
            return bf__node_error(err, nd, BF_EUNSUPPORTED,
                                  "spatial dim %d: pads %lld, %lld must be smaller than the kernel extent %lld",
                                  i, (long long)pb, (long long)pe, (long long)ext);
        w->in[j] = in, w->out[j] = out, w->k[j] = k, w->s[j] = s, w->d[j] = d;
        w->pb[j] = pb, w->pe[j] = pe;
    }
    return BF_OK;
}
