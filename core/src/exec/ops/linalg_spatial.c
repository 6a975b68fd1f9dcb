/* Sliding-window ops over NC<spatial> tensors: Conv, MaxPool, AveragePool,
 * GlobalAveragePool, GlobalMaxPool. Spatial ranks 1 to 3 all run as 3-D, with the missing
 * leading dims of size 1, so each kernel is written once. */
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "exec/op.h"
#include "linalg_impl.h"
#include "exec/step_access.h"
#include "sgemm.h"

/* ---- window geometry, shared by Conv and the pools ---- */

typedef struct window {
    int rank;                               /* spatial rank of the model's tensors */
    /* Always 3-D here: dims of a lower rank are padded in front with 1s. */
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
} window;

enum { WIN_CONV, WIN_MAXPOOL, WIN_AVGPOOL };

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* Reads kernel_shape, strides, dilations, pads, auto_pad (and ceil_mode for
 * the pools) against input X of shape [N, C, spatial...]; `wkernel` is the
 * kernel from W's shape for Conv, NULL for the pools. Output sizes follow the
 * ONNX formulas; with ceil_mode a last window that would start in the right
 * padding is dropped, as PyTorch does. */
static bf_status parse_window(const bf__prep *p, int kind, const int64_t *wkernel, window *w,
                              bf_error *err)
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
    if (kind != WIN_CONV && (st = bf__attr_int(nd, "ceil_mode", 0, &ceil_mode, err))) return st;
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
        if (kind == WIN_AVGPOOL && d != 1)
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
            out = ceil_div(in, s);
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
            out = (ceil_mode ? ceil_div(span, s) : span / s) + 1;
            if (ceil_mode && (out - 1) * s >= in + pb) out--;
        }
        /* A pool window lying wholly in the padding has no elements. */
        if (kind != WIN_CONV && (pb >= ext || pe >= ext))
            return bf__node_error(err, nd, BF_EUNSUPPORTED,
                                  "spatial dim %d: pads %lld, %lld must be smaller than the kernel extent %lld",
                                  i, (long long)pb, (long long)pe, (long long)ext);
        w->in[j] = in, w->out[j] = out, w->k[j] = k, w->s[j] = s, w->d[j] = d;
        w->pb[j] = pb, w->pe[j] = pe;
    }
    return BF_OK;
}

static int64_t win_in(const window *w) { return w->in[0] * w->in[1] * w->in[2]; }
static int64_t win_out(const window *w) { return w->out[0] * w->out[1] * w->out[2]; }
static int64_t win_k(const window *w) { return w->k[0] * w->k[1] * w->k[2]; }

/* Output positions o in [*lo, *hi) whose input o*s - pb + kk*d lies in [0, in). */
static void valid_range(int64_t in, int64_t out, int64_t s, int64_t pb, int64_t kk, int64_t d,
                        int64_t *lo, int64_t *hi)
{
    int64_t off = kk * d - pb;                  /* input index = o*s + off */
    int64_t l = off >= 0 ? 0 : ceil_div(-off, s);
    int64_t h = in - off <= 0 ? 0 : ceil_div(in - off, s);
    if (h > out) h = out;
    if (l > h) l = h;
    *lo = l, *hi = h;
}

/* ---- Conv ---- */

enum { CONV_IM2COL, CONV_POINTWISE, CONV_DEPTHWISE };
#define DW_MAXKW 16             /* widest kernel the direct path takes */
#define DW_MAXKH 16             /* tallest kernel its row-at-a-time form takes (dw2d) */

typedef struct conv_params {
    window w;
    int64_t n, c, m, group, cg, mg;
    int64_t isp, osp, ksp, kc;          /* input, output, kernel positions; kc = cg * ksp */
    int64_t nb;                         /* im2col: images per sgemm */
    size_t off_cols, off_tmp;           /* im2col: scratch offsets (floats) past the weights */
    size_t scratch_floats;              /* im2col: the scratch prepare asked for, in floats */
    int has_bias, path;
    int simd;                           /* bf__sgemm path (BF_SGEMM_*), fixed when the plan is built */
} conv_params;
static_assert(sizeof(conv_params) <= BF__OP_SUBPARAMS_MAX, "conv params too large (ABFT keeps them inside its own)");

/* A stride-1, undilated 2-D Conv whose outputs span its zero-padded
 * planes: conv_packed multiplies panels gathered from those planes. */
static int padded_ok(const window *w)
{
    int64_t hp = w->in[1] + w->pb[1] + w->pe[1], wp = w->in[2] + w->pb[2] + w->pe[2];
    return w->in[0] == 1 && w->k[0] == 1 && w->out[0] == 1 && w->s[1] == 1 && w->s[2] == 1 && w->d[1] == 1 &&
           w->d[2] == 1 && w->out[1] == hp - w->k[1] + 1 && w->out[2] == wp - w->k[2] + 1;
}

static int64_t padded_plane(const window *w)
{
    return (w->in[1] + w->pb[1] + w->pe[1]) * (w->in[2] + w->pb[2] + w->pe[2]);
}

bf_status bf__conv_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    conv_params *cp = (conv_params *)p->params;
    const bf_tensor *x = p->in[0], *wt = p->in[1];
    const bf_tensor *b = p->n_in > 2 ? p->in[2] : NULL;
    bf_status st;
    if ((st = bf__want_f32(p, 0, "X", err)) || (st = bf__want_f32(p, 1, "W", err))) return st;
    if (b && (st = bf__want_f32(p, 2, "B", err))) return st;
    char sx[96], sw[96];
    if (wt->ndim != x->ndim || x->ndim < 3)
        return bf__node_error(err, nd, BF_ESHAPE,
                              "input W has shape %s; expected [M, C/group, k1, ...] of the same rank as X %s",
                              bf_shape_str(wt->dims, wt->ndim, sw, sizeof sw),
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    if ((st = parse_window(p, WIN_CONV, wt->dims + 2, &cp->w, err))) return st;
    int64_t group;
    if ((st = bf__attr_int(nd, "group", 1, &group, err))) return st;
    int64_t c = x->dims[1], m = wt->dims[0];
    if (group < 1 || c % group != 0 || m % group != 0)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'group' is %lld; it must be >= 1 and divide both C = %lld and M = %lld",
                              (long long)group, (long long)c, (long long)m);
    if (wt->dims[1] != c / group)
        return bf__node_error(err, nd, BF_ESHAPE,
                              "input W has shape %s; expected dim 1 = C/group = %lld (C = %lld from X %s, group %lld)",
                              bf_shape_str(wt->dims, wt->ndim, sw, sizeof sw), (long long)(c / group),
                              (long long)c, bf_shape_str(x->dims, x->ndim, sx, sizeof sx), (long long)group);
    if (b && (b->ndim != 1 || b->dims[0] != m))
        return bf__node_error(err, nd, BF_ESHAPE, "input B has shape %s; expected [M] = [%lld]",
                              bf_shape_str(b->dims, b->ndim, sw, sizeof sw), (long long)m);
    const window *w = &cp->w;
    cp->n = x->dims[0], cp->c = c, cp->m = m, cp->group = group;
    cp->cg = c / group, cp->mg = m / group;
    cp->isp = win_in(w), cp->osp = win_out(w), cp->ksp = win_k(w), cp->kc = cp->cg * cp->ksp;
    cp->has_bias = b != NULL;
    cp->simd = bf__sgemm_chosen();
    if (cp->mg > INT_MAX || cp->osp > INT_MAX || cp->kc > INT_MAX)
        return bf__node_error(err, nd, BF_EUNSUPPORTED, "conv too large (M/group %lld, "
                              "output positions %lld, C/group * kernel %lld)", (long long)cp->mg,
                              (long long)cp->osp, (long long)cp->kc);
    int unit = 1;
    for (int i = 0; i < 3; i++)
        unit &= w->k[i] == 1 && w->s[i] == 1 && w->pb[i] == 0 && w->pe[i] == 0;
    /* Depthwise (one input and one output channel per group): sgemm would
     * have one row and K = kernel size; a direct loop is faster and needs no
     * scratch. With more output channels per input channel (a first layer on
     * one channel), im2col + sgemm wins again. */
    int depthwise = cp->cg == 1 && cp->mg == 1 && w->k[2] <= DW_MAXKW;
    cp->path = unit ? CONV_POINTWISE : depthwise ? CONV_DEPTHWISE : CONV_IM2COL;
    if (cp->path == CONV_IM2COL) {
        /* Several images per sgemm: small feature maps give tiny GEMMs
         * otherwise, dominated by call overhead. About 256 KiB of columns and
         * products, so both stay in L2 (measured: 4 MiB was 20% slower). */
        double per_image = (double)(cp->kc + cp->mg) * (double)cp->osp;
        int64_t nb = (int64_t)((double)(1 << 16) / (per_image > 1 ? per_image : 1));
        cp->nb = nb < 1 ? 1 : nb > cp->n ? (cp->n > 0 ? cp->n : 1) : nb;
        if ((double)cp->kc * (double)cp->osp * (double)cp->nb > (double)INT_MAX)
            cp->nb = 1;
        double floats = (double)cp->m * (double)cp->kc + per_image * (double)cp->nb + 64;
        if (floats * sizeof(float) > (double)((size_t)1 << 36) || (double)cp->nb * (double)cp->osp > (double)INT_MAX)
            return bf__node_error(err, nd, BF_EUNSUPPORTED, "im2col scratch of %.0f bytes is too large",
                                  floats * sizeof(float));
        cp->off_cols = ((size_t)(cp->m * cp->kc) + 15) & ~(size_t)15;
        cp->off_tmp = cp->off_cols + (((size_t)(cp->kc * cp->osp * cp->nb) + 15) & ~(size_t)15);
        cp->scratch_floats = cp->off_tmp + (size_t)(cp->mg * cp->osp * cp->nb);
        /* One image per product on the AVX2 kernel (conv_packed): no
         * product buffer, and for a stride-1 2-D Conv no column matrix
         * either, only the padded planes (a 3x3 layer of resnet18's layer1:
         * 1.0 MB with the weights instead of 8.2 MB, each page of which a
         * plan's first run touches).
         * A panel deeper than the kernel's stack one may find no memory,
         * and then the column matrix is needed after all: kept there. */
        if (cp->nb == 1 && cp->simd >= BF_SGEMM_AVX2 && cp->kc <= BF_SGEMM_KSTACK) {
            size_t need;
            if (padded_ok(w)) {
                size_t planes = (size_t)(cp->cg * padded_plane(w));
                size_t packed = ((planes + 15) & ~(size_t)15) + (size_t)cp->mg + 16;
                /* and one channel alone (conv_channel_windows, the differential engine's) */
                size_t windows = planes + 2 * (size_t)cp->kc + (size_t)cp->osp + 16;
                need = cp->off_cols + (packed > windows ? packed : windows);
            } else {
                need = cp->off_tmp + (size_t)cp->mg;   /* one image's columns, then the bias of zeros */
            }
            if (need < cp->scratch_floats) cp->scratch_floats = need;
        }
        p->scratch = cp->scratch_floats * sizeof(float);
    }
    int64_t dims[5] = {cp->n, m};
    for (int i = 0; i < w->rank; i++) dims[2 + i] = w->out[3 - w->rank + i];
    bf__set_shape(p->out[0], BF_F32, 2 + w->rank, dims);
    return BF_OK;
}

/* Summation order. Rows of the column matrix, and columns of the reordered
 * weights, run tap-major within blocks of 16 channels: (channel block, kd,
 * kh, kw, channel in block). sgemm accumulates along K in that order, which is
 * the order of PyTorch's oneDNN direct convolution on this class of CPU, so
 * results (and the rounding that huge faulty values amplify) agree with
 * PyTorch's bit for bit where it matters most. Any order is a valid sum. */
#define CONV_CBLOCK 16

static int64_t conv_krow(const conv_params *cp, int64_t c, int64_t tap)
{
    int64_t cb = c / CONV_CBLOCK, base = cb * CONV_CBLOCK;
    int64_t width = cp->cg - base < CONV_CBLOCK ? cp->cg - base : CONV_CBLOCK;
    return base * cp->ksp + tap * width + (c - base);
}

/* Writes the input windows of one group of one image into the column matrix
 * `cols` (leading dimension ld): row conv_krow(c, tap), osp columns from
 * `col0`, in (od, oh, ow) order; padding reads 0. */
/* The common case of stride 1, no dilation, output as wide as the input
 * (same padding), one spatial plane: a tap's row is the input plane shifted
 * by a constant, so it is one contiguous copy plus zeros where a row or a
 * column falls into the padding. */
static int im2col_shift_ok(const window *w)
{
    return w->in[0] == 1 && w->k[0] == 1 && w->s[1] == 1 && w->s[2] == 1 && w->d[1] == 1 &&
           w->d[2] == 1 && w->out[2] == w->in[2];
}

static void im2col_shift(const conv_params *cp, const float *restrict x, float *restrict cols,
                         int64_t col0, int64_t ld)
{
    const window *w = &cp->w;
    int64_t IH = w->in[1], W = w->in[2], OH = w->out[1];
    for (int64_t c = 0; c < cp->cg; c++) {
        const float *xc = x + c * cp->isp;
        for (int64_t kh = 0; kh < w->k[1]; kh++) {
            int64_t dh = kh - w->pb[1];
            /* output rows whose input row exists: 0 <= oh + dh < IH */
            int64_t oh0 = dh < 0 ? -dh : 0, oh1 = IH - dh < OH ? IH - dh : OH;
            if (oh1 < oh0) oh1 = oh0;
            for (int64_t kw = 0; kw < w->k[2]; kw++) {
                int64_t dw = kw - w->pb[2];
                float *restrict col = cols + conv_krow(cp, c, kh * w->k[2] + kw) * ld + col0;
                for (int64_t i = 0; i < oh0 * W; i++) col[i] = 0.0f;
                if (oh1 > oh0) {
                    const float *restrict src = xc + (oh0 + dh) * W + dw;
                    float *restrict dst = col + oh0 * W;
                    int64_t n = (oh1 - oh0) * W;
                    /* the run may start before or end past the plane by |dw|:
                     * those positions are padding columns, zeroed below */
                    int64_t lo = oh0 + dh == 0 && dw < 0 ? -dw : 0;
                    int64_t hi = oh1 + dh == IH && dw > 0 ? n - dw : n;
                    for (int64_t i = 0; i < lo; i++) dst[i] = 0.0f;
                    memcpy(dst + lo, src + lo, sizeof(float) * (size_t)(hi - lo));
                    for (int64_t i = hi; i < n; i++) dst[i] = 0.0f;
                    /* columns that wrapped into the neighbouring row */
                    if (dw < 0)
                        for (int64_t r = 0; r < oh1 - oh0; r++)
                            for (int64_t k = 0; k < -dw; k++) dst[r * W + k] = 0.0f;
                    else if (dw > 0)
                        for (int64_t r = 0; r < oh1 - oh0; r++)
                            for (int64_t k = W - dw; k < W; k++) dst[r * W + k] = 0.0f;
                }
                for (int64_t i = oh1 * W; i < OH * W; i++) col[i] = 0.0f;
            }
        }
    }
}

static void im2col(const conv_params *cp, const float *restrict x, float *restrict cols, int64_t col0,
                   int64_t ld)
{
    const window *w = &cp->w;
    if (im2col_shift_ok(w)) {
        im2col_shift(cp, x, cols, col0, ld);
        return;
    }
    int64_t ID = w->in[0], IH = w->in[1], IW = w->in[2];
    int64_t OD = w->out[0], OH = w->out[1], OW = w->out[2];
    for (int64_t c = 0; c < cp->cg; c++) {
        const float *xc = x + c * cp->isp;
        for (int64_t kd = 0; kd < w->k[0]; kd++)
            for (int64_t kh = 0; kh < w->k[1]; kh++)
                for (int64_t kw = 0; kw < w->k[2]; kw++) {
                    int64_t tap = (kd * w->k[1] + kh) * w->k[2] + kw;
                    float *restrict col = cols + conv_krow(cp, c, tap) * ld + col0;
                    int64_t lo, hi;
                    valid_range(IW, OW, w->s[2], w->pb[2], kw, w->d[2], &lo, &hi);
                    int64_t offw = kw * w->d[2] - w->pb[2], sw = w->s[2];
                    for (int64_t od = 0; od < OD; od++) {
                        int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
                        for (int64_t oh = 0; oh < OH; oh++, col += OW) {
                            int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
                            /* plain loops, not memcpy/memset: rows are often
                             * a few floats, where a call costs more than the copy */
                            if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
                                for (int64_t ow = 0; ow < OW; ow++) col[ow] = 0.0f;
                                continue;
                            }
                            const float *restrict xr = xc + (id * IH + ih) * IW;
                            for (int64_t ow = 0; ow < lo; ow++) col[ow] = 0.0f;
                            if (sw == 1) {
                                const float *restrict xs = xr + offw;
                                for (int64_t ow = lo; ow < hi; ow++) col[ow] = xs[ow];
                            } else {
                                for (int64_t ow = lo; ow < hi; ow++) col[ow] = xr[ow * sw + offw];
                            }
                            for (int64_t ow = hi; ow < OW; ow++) col[ow] = 0.0f;
                        }
                    }
                }
    }
}

/* The weights, [M, C/group, taps] as stored, with each row's K reordered to
 * the rows of im2col. Done every run: faults rewrite W between runs. */
static void reorder_weights(const conv_params *cp, const float *restrict wt, float *restrict wr)
{
    for (int64_t j = 0; j < cp->m; j++) {
        const float *src = wt + j * cp->kc;
        float *dst = wr + j * cp->kc;
        for (int64_t c = 0; c < cp->cg; c++)
            for (int64_t tap = 0; tap < cp->ksp; tap++) dst[conv_krow(cp, c, tap)] = src[c * cp->ksp + tap];
    }
}

/* A fused activation (op.h) over n outputs just written, while they are in
 * cache: for the paths whose last pass is not the product's epilogue. */
static void act_pass(const bf__act *act, float *y, int64_t n)
{
    if (!act) return;
    for (int64_t i = 0; i < n; i++) y[i] = bf__act_apply(act, y[i]);
}

/* Im2col for nb images at a time, one sgemm per group, then bias added last
 * (as oneDNN does) while scattering into NCHW. ch >= 0: output channel ch
 * only, its row of the product alone (bf__sgemm gives it the same bits). */
static void conv_im2col(const conv_params *cp, const float *x, const float *wt, const float *bias,
                        const bf__act *act, float *y, void *scratch, int64_t ch)
{
    float *wr = scratch, *cols = wr + cp->off_cols, *tmp = wr + cp->off_tmp;
    int kc = (int)cp->kc;
    reorder_weights(cp, wt, wr);
    int64_t g0 = ch < 0 ? 0 : ch / cp->mg, g1 = ch < 0 ? cp->group : g0 + 1;
    int64_t j0 = ch < 0 ? 0 : ch % cp->mg, nj = ch < 0 ? cp->mg : 1;
    for (int64_t n0 = 0; n0 < cp->n; n0 += cp->nb) {
        int64_t nb = cp->n - n0 < cp->nb ? cp->n - n0 : cp->nb, ld = nb * cp->osp;
        for (int64_t g = g0; g < g1; g++) {
            for (int64_t i = 0; i < nb; i++)
                im2col(cp, x + ((n0 + i) * cp->c + g * cp->cg) * cp->isp, cols, i * cp->osp, ld);
            bf__sgemm_level(cp->simd, 0, 0, (int)nj, (int)ld, kc, 1.0f, wr + (g * cp->mg + j0) * cp->kc, kc, cols,
                            (int)ld, 0, tmp, (int)ld);
            for (int64_t j = j0; j < j0 + nj; j++) {
                float bv = bias ? bias[g * cp->mg + j] : 0.0f;
                for (int64_t i = 0; i < nb; i++) {
                    const float *restrict src = tmp + (j - j0) * ld + i * cp->osp;
                    float *restrict dst = y + ((n0 + i) * cp->m + g * cp->mg + j) * cp->osp;
                    for (int64_t o = 0; o < cp->osp; o++) dst[o] = src[o] + bv;
                    act_pass(act, dst, cp->osp);
                }
            }
        }
    }
}

/* The im2col product of one image, without the column matrix where it can
 * (bf__sgemm_packed): for a stride-1, undilated 2-D convolution, each image's
 * input planes are zero-padded once, and a panel's row for input channel c
 * and tap (kh, kw) is then 16 consecutive floats of the padded plane
 * (columns of one output row), or a few such runs side by side where the
 * panel's 16 output positions wrap to the next output row. The product
 * never writes the column matrix out (for a 3x3 layer of resnet18, 7 MB per
 * image, written, read back and packed) yet multiplies the very same
 * panels, so every output keeps the chain the column matrix gave it. */
typedef struct conv_pack {
    const float *xp;            /* the image's padded planes of the group */
    int64_t plane, wp;          /* floats per padded plane, per padded row */
    int64_t cg, ksp, kw_n, ow_n;
} conv_pack;

#if defined(__x86_64__) && defined(__GNUC__)
/* panel row (c, kh, kw) = xp[c * plane + kh * wp + kw + shift(j) + j] for
 * the panel's columns j, where shift is the run's: its first output
 * position's offset in the padded plane, less its first column. Columns of
 * run q are loaded with run q's mask; masked lanes are neither read nor
 * kept (a masked load gives 0), so no run reads outside the planes. */
__attribute__((target("avx2"))) static void conv_pack_panel(const void *ctx, int j0, int nr, int k, float *panel)
{
    enum { NR = 16 };
    const conv_pack *pk = ctx;
    int64_t shift[NR];
    __m256i m0[NR], m1[NR];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), eight = _mm256_set1_epi32(8);
    int ns = 0;
    for (int j = 0; j < nr;) {
        int64_t o = j0 + j, ow = o % pk->ow_n, oh = o / pk->ow_n;
        int len = pk->ow_n - ow < nr - j ? (int)(pk->ow_n - ow) : nr - j;
        shift[ns] = oh * pk->wp + ow - j;
        __m256i lo = _mm256_set1_epi32(j - 1), hi = _mm256_set1_epi32(j + len);
        m0[ns] = _mm256_and_si256(_mm256_cmpgt_epi32(lane, lo), _mm256_cmpgt_epi32(hi, lane));
        __m256i l8 = _mm256_add_epi32(lane, eight);
        m1[ns] = _mm256_and_si256(_mm256_cmpgt_epi32(l8, lo), _mm256_cmpgt_epi32(hi, l8));
        ns++;
        j += len;
    }
    int whole = ns == 1 && nr == NR;
    float *row = panel;
    for (int64_t cb = 0; cb < pk->cg; cb += CONV_CBLOCK) {
        int64_t width = pk->cg - cb < CONV_CBLOCK ? pk->cg - cb : CONV_CBLOCK;
        for (int64_t tap = 0; tap < pk->ksp; tap++) {
            const float *base = pk->xp + cb * pk->plane + tap / pk->kw_n * pk->wp + tap % pk->kw_n;
            for (int64_t c = 0; c < width; c++, row += NR) {
                const float *src = base + c * pk->plane;
                if (whole) {
                    _mm256_storeu_ps(row, _mm256_loadu_ps(src + shift[0]));
                    _mm256_storeu_ps(row + 8, _mm256_loadu_ps(src + shift[0] + 8));
                    continue;
                }
                __m256 v0 = _mm256_setzero_ps(), v1 = _mm256_setzero_ps();
                for (int q = 0; q < ns; q++) {
                    v0 = _mm256_or_ps(v0, _mm256_maskload_ps(src + shift[q], m0[q]));
                    v1 = _mm256_or_ps(v1, _mm256_maskload_ps(src + shift[q] + 8, m1[q]));
                }
                _mm256_storeu_ps(row, v0);
                _mm256_storeu_ps(row + 8, v1);
            }
        }
    }
    (void)k;
    assert(row == panel + (int64_t)k * NR);
}
#endif

/* The product of one image (nb = 1) written straight into y, the bias
 * added in the kernel's epilogue: y = s + bias, the old scatter's
 * expression (+ 0 without a bias, as there, which turns a -0 sum into
 * +0). Panels from the padded planes where the shape allows, from the
 * column matrix otherwise. 0 when bf__sgemm has no kernel for it: the
 * caller then runs conv_im2col, which gives the same bits. */
static int conv_packed(const conv_params *cp, const float *x, const float *wt, const float *bias,
                       const bf__act *act, float *y, void *scratch, int64_t ch)
{
    const window *w = &cp->w;
    if (cp->simd < BF_SGEMM_AVX2 || cp->nb != 1) return 0;
    int64_t wp = w->in[2] + w->pb[2] + w->pe[2], plane = padded_plane(w);
    size_t room = cp->scratch_floats - cp->off_cols;
    int padded = padded_ok(w) && (size_t)(cp->cg * plane) + (size_t)cp->mg + 16 <= room;
#if !(defined(__x86_64__) && defined(__GNUC__))
    padded = 0;
#endif
    float *wr = scratch, *buf = wr + cp->off_cols;
    float *zeros = padded ? buf + ((cp->cg * plane + 15) & ~(int64_t)15) : wr + cp->off_tmp;
    reorder_weights(cp, wt, wr);
    if (!bias) memset(zeros, 0, sizeof(float) * (size_t)cp->mg);
    if (padded) memset(buf, 0, sizeof(float) * (size_t)(cp->cg * plane));
    int64_t g0 = ch < 0 ? 0 : ch / cp->mg, g1 = ch < 0 ? cp->group : g0 + 1;
    int64_t j0 = ch < 0 ? 0 : ch % cp->mg, nj = ch < 0 ? cp->mg : 1;
    int kc = (int)cp->kc, osp = (int)cp->osp;
    for (int64_t n = 0; n < cp->n; n++)
        for (int64_t g = g0; g < g1; g++) {
            const float *xg = x + (n * cp->c + g * cp->cg) * cp->isp;
            const float *a = wr + (g * cp->mg + j0) * cp->kc, *bv = bias ? bias + g * cp->mg + j0 : zeros;
            float *yg = y + (n * cp->m + g * cp->mg + j0) * cp->osp;
            if (!padded) {
                im2col(cp, xg, buf, 0, osp);
                bf__sgemm_bias(cp->simd, (int)nj, osp, kc, a, kc, buf, osp, bv, act, yg, osp);
                continue;
            }
#if defined(__x86_64__) && defined(__GNUC__)
            /* the borders stay zero from the memset: only the inside changes per image */
            for (int64_t c = 0; c < cp->cg; c++)
                for (int64_t ih = 0; ih < w->in[1]; ih++)
                    memcpy(buf + c * plane + (ih + w->pb[1]) * wp + w->pb[2], xg + c * cp->isp + ih * w->in[2],
                           sizeof(float) * (size_t)w->in[2]);
            conv_pack pk = {buf, plane, wp, cp->cg, cp->ksp, w->k[2], w->out[2]};
            if (!bf__sgemm_packed(cp->simd, (int)nj, osp, kc, a, kc, conv_pack_panel, &pk, bv, act, yg, osp)) return 0;
#endif
        }
    return 1;
}

/* The direct depthwise path. Per kernel column kw, the output columns whose
 * tap lands inside the input; all kw taps land inside for the interior
 * columns [ilo, ihi). */
typedef struct dw_cols {
    int64_t lo[DW_MAXKW], hi[DW_MAXKW], ilo, ihi;
    int avx2;                 /* dw_row's 8-lane build: asked once per run, not per row */
} dw_cols;

static void dw_cols_init(const window *w, int simd, dw_cols *dc)
{
    int64_t kw_n = w->k[2];
    for (int64_t kw = 0; kw < kw_n; kw++)
        valid_range(w->in[2], w->out[2], w->s[2], w->pb[2], kw, w->d[2], &dc->lo[kw], &dc->hi[kw]);
    /* taps move right as kw grows: the first bounds the left, the last the right */
    dc->ilo = dc->lo[0];
    dc->ihi = dc->hi[kw_n - 1] > dc->ilo ? dc->hi[kw_n - 1] : dc->ilo;
    dc->avx2 = simd >= BF_SGEMM_AVX2;
}

/* yr += the taps of one kernel row (weights wrow) over input row xr, in kw
 * order for every output: the same sums as tap-by-tap, fused for 3-wide
 * kernels so the output row is loaded once.
 *
 * The body is compiled twice (dw_row_base: the baseline's 4 lanes;
 * dw_row_avx2: 8, where the CPU has AVX2): the same multiplies and adds in
 * the same order per element, so the same bits. Chosen at run time as
 * sgemm.c does (bf__sgemm_simd), not with target_clones: its ifunc resolver
 * runs before ThreadSanitizer's runtime starts, and every binary of the TSan
 * build died at start. */
static inline __attribute__((always_inline)) void dw_row_impl(const window *w, const dw_cols *dc,
                                                              const float *restrict xr, const float *restrict wrow,
                                                              float *restrict yr)
{
    int64_t kw_n = w->k[2], s = w->s[2], d = w->d[2], pb = w->pb[2], ilo = dc->ilo, ihi = dc->ihi;
    for (int64_t kw = 0; kw < kw_n; kw++) {
        float wv = wrow[kw];
        int64_t o = kw * d - pb;
        int64_t e1 = dc->hi[kw] < ilo ? dc->hi[kw] : ilo, e2 = dc->lo[kw] > ihi ? dc->lo[kw] : ihi;
        for (int64_t ow = dc->lo[kw]; ow < e1; ow++) yr[ow] += wv * xr[ow * s + o];
        for (int64_t ow = e2; ow < dc->hi[kw]; ow++) yr[ow] += wv * xr[ow * s + o];
    }
    if (kw_n == 3) {
        float w0 = wrow[0], w1 = wrow[1], w2 = wrow[2];
        int64_t o0 = -pb, o1 = d - pb, o2 = 2 * d - pb;
        if (s == 1)
            for (int64_t ow = ilo; ow < ihi; ow++)
                yr[ow] = ((yr[ow] + w0 * xr[ow + o0]) + w1 * xr[ow + o1]) + w2 * xr[ow + o2];
        else
            for (int64_t ow = ilo; ow < ihi; ow++)
                yr[ow] = ((yr[ow] + w0 * xr[ow * s + o0]) + w1 * xr[ow * s + o1]) + w2 * xr[ow * s + o2];
        return;
    }
    for (int64_t kw = 0; kw < kw_n; kw++) {
        float wv = wrow[kw];
        int64_t o = kw * d - pb;
        if (s == 1)
            for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] += wv * xr[ow + o];
        else
            for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] += wv * xr[ow * s + o];
    }
}

static void dw_row_base(const window *w, const dw_cols *dc, const float *restrict xr, const float *restrict wrow,
                        float *restrict yr)
{
    dw_row_impl(w, dc, xr, wrow, yr);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void dw_row_avx2(const window *w, const dw_cols *dc, const float *restrict xr,
                                                        const float *restrict wrow, float *restrict yr)
{
    dw_row_impl(w, dc, xr, wrow, yr);
}
#endif

static void dw_row(const window *w, const dw_cols *dc, const float *restrict xr, const float *restrict wrow,
                   float *restrict yr)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (dc->avx2) {
        dw_row_avx2(w, dc, xr, wrow, yr);
        return;
    }
#endif
    dw_row_base(w, dc, xr, wrow, yr);
}

/* One depthwise channel of a 2-D convolution, output row by output row:
 * each output starts at the bias and takes the kernel rows whose input row
 * exists, in kh order, each row's taps in kw order, exactly the sums of
 * depthwise_channel (which goes kernel row by kernel row over the whole
 * plane) element by element; but an output row is loaded and stored once
 * instead of once per kernel row, and the bias is not a pass of its own.
 * Compiled twice, as dw_row is (no FMA in either build: each tap stays a
 * rounded product then a rounded sum). */
/* The inside of a stride-2, undilated 3x3 output row, 8 outputs at a time
 * (the compiler leaves the strided loop scalar): the even and odd taps
 * split out of two loads, the same products and sums per element as the
 * scalar loop in dw2d_impl, which finishes the row from the index
 * returned. Without AVX2 it returns ilo: the loop does it all. */
#if defined(__x86_64__) && defined(__GNUC__)
#define DW_S2_VECTOR 1
#endif

#ifdef DW_S2_VECTOR
__attribute__((target("avx2"))) static int64_t dw_s2(const float *r0, const float *r1, const float *r2,
                                                     const float *const *wr, float bv, float *yr, int64_t ilo,
                                                     int64_t ihi, int64_t o0)
{
    const float *rows[3] = {r0, r1, r2};
    const __m256i upto7 = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0);
    int64_t ow = ilo;
    for (; ow + 8 <= ihi; ow += 8) {
        __m256 v = _mm256_set1_ps(bv);
        for (int r = 0; r < 3; r++) {
            const float *base = rows[r] + 2 * ow + o0;
            __m256 lo = _mm256_loadu_ps(base), hi = _mm256_loadu_ps(base + 8);
            /* x[2 ow + o0 + 16], the last even tap, without reading x[.. + 17] past the row */
            __m256 hi2 = _mm256_maskload_ps(base + 10, upto7), lo2 = _mm256_loadu_ps(base + 2);
            __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88), od = _mm256_shuffle_ps(lo, hi, 0xDD);
            __m256 e2 = _mm256_shuffle_ps(lo2, hi2, 0x88);
            ev = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8));
            od = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8));
            e2 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e2), 0xD8));
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(wr[r][0]), ev));
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(wr[r][1]), od));
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(wr[r][2]), e2));
        }
        _mm256_storeu_ps(yr + ow, v);
    }
    return ow;
}
#else
static int64_t dw_s2(const float *r0, const float *r1, const float *r2, const float *const *wr, float bv, float *yr,
                     int64_t ilo, int64_t ihi, int64_t o0)
{
    (void)r0, (void)r1, (void)r2, (void)wr, (void)bv, (void)yr, (void)ihi, (void)o0;
    return ilo;
}
#endif

static inline __attribute__((always_inline)) void dw2d_impl(const window *w, const dw_cols *dc,
                                                            const float *restrict x, const float *restrict wk, float bv,
                                                            float *restrict y, int vec)
{
    int64_t IH = w->in[1], IW = w->in[2], OH = w->out[1], OW = w->out[2];
    int64_t kh_n = w->k[1], kw_n = w->k[2], s = w->s[2], d = w->d[2], pb = w->pb[2], ilo = dc->ilo, ihi = dc->ihi;
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *xr[DW_MAXKH], *wr[DW_MAXKH];
        int nv = 0;
        for (int64_t kh = 0; kh < kh_n; kh++) {
            int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
            if (ih < 0 || ih >= IH) continue;
            xr[nv] = x + ih * IW, wr[nv] = wk + kh * kw_n, nv++;
        }
        float *restrict yr = y + oh * OW;
        /* the edge columns, where some taps fall in the padding */
        for (int64_t ow = 0; ow < OW; ow++) {
            if (ow == ilo) ow = ihi;
            if (ow >= OW) break;
            float v = bv;
            for (int r = 0; r < nv; r++)
                for (int64_t kw = 0; kw < kw_n; kw++)
                    if (ow >= dc->lo[kw] && ow < dc->hi[kw]) v = v + wr[r][kw] * xr[r][ow * s + kw * d - pb];
            yr[ow] = v;
        }
        if (ilo >= ihi) continue;
        int64_t o0 = -pb, o1 = d - pb, o2 = 2 * d - pb;
        if (nv == 3 && kw_n == 3) {
            const float *restrict r0 = xr[0], *restrict r1 = xr[1], *restrict r2 = xr[2];
            float a0 = wr[0][0], a1 = wr[0][1], a2 = wr[0][2], b0 = wr[1][0], b1 = wr[1][1], b2 = wr[1][2];
            float c0 = wr[2][0], c1 = wr[2][1], c2 = wr[2][2];
            if (s == 1)
                for (int64_t ow = ilo; ow < ihi; ow++) {
                    float v = ((bv + a0 * r0[ow + o0]) + a1 * r0[ow + o1]) + a2 * r0[ow + o2];
                    v = ((v + b0 * r1[ow + o0]) + b1 * r1[ow + o1]) + b2 * r1[ow + o2];
                    yr[ow] = ((v + c0 * r2[ow + o0]) + c1 * r2[ow + o1]) + c2 * r2[ow + o2];
                }
            else
                for (int64_t ow = vec && s == 2 && d == 1 ? dw_s2(r0, r1, r2, wr, bv, yr, ilo, ihi, o0) : ilo; ow < ihi;
                     ow++) {
                    float v = ((bv + a0 * r0[ow * s + o0]) + a1 * r0[ow * s + o1]) + a2 * r0[ow * s + o2];
                    v = ((v + b0 * r1[ow * s + o0]) + b1 * r1[ow * s + o1]) + b2 * r1[ow * s + o2];
                    yr[ow] = ((v + c0 * r2[ow * s + o0]) + c1 * r2[ow * s + o1]) + c2 * r2[ow * s + o2];
                }
            continue;
        }
        for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] = bv;
        for (int r = 0; r < nv; r++) {
            if (kw_n == 3) {
                const float *restrict xs = xr[r];
                float w0 = wr[r][0], w1 = wr[r][1], w2 = wr[r][2];
                for (int64_t ow = ilo; ow < ihi; ow++)
                    yr[ow] = ((yr[ow] + w0 * xs[ow * s + o0]) + w1 * xs[ow * s + o1]) + w2 * xs[ow * s + o2];
                continue;
            }
            for (int64_t kw = 0; kw < kw_n; kw++) {
                const float *restrict xs = xr[r] + kw * d - pb;
                float wv = wr[r][kw];
                for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] += wv * xs[ow * s];
            }
        }
    }
}

static void dw2d_base(const window *w, const dw_cols *dc, const float *x, const float *wk, float bv, float *y)
{
    dw2d_impl(w, dc, x, wk, bv, y, 0);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void dw2d_avx2(const window *w, const dw_cols *dc, const float *x,
                                                      const float *wk, float bv, float *y)
{
    dw2d_impl(w, dc, x, wk, bv, y, 1);
}
#endif

/* Whether dw2d takes the shape: one spatial plane, kernels of up to
 * DW_MAXKH rows. */
static int dw2d_ok(const window *w) { return w->in[0] == 1 && w->k[0] == 1 && w->out[0] == 1 && w->k[1] <= DW_MAXKH; }

static void dw2d(const window *w, const dw_cols *dc, const float *x, const float *wk, float bv, float *y)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (dc->avx2) {
        dw2d_avx2(w, dc, x, wk, bv, y);
        return;
    }
#endif
    dw2d_base(w, dc, x, wk, bv, y);
}

/* One depthwise channel: y (bias-filled) += taps of x.
 * Padding taps are skipped rather than multiplied by 0, so an Inf weight
 * does not turn border outputs into NaN. */
static void depthwise_channel(const window *w, const dw_cols *dc, const float *restrict x,
                              const float *restrict wk, float *restrict y)
{
    int64_t ID = w->in[0], IH = w->in[1], IW = w->in[2];
    int64_t OD = w->out[0], OH = w->out[1], OW = w->out[2];
    for (int64_t kd = 0; kd < w->k[0]; kd++)
        for (int64_t kh = 0; kh < w->k[1]; kh++) {
            const float *wrow = wk + (kd * w->k[1] + kh) * w->k[2];
            for (int64_t od = 0; od < OD; od++) {
                int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
                if (id < 0 || id >= ID) continue;
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
                    if (ih < 0 || ih >= IH) continue;
                    dw_row(w, dc, x + (id * IH + ih) * IW, wrow, y + (od * OH + oh) * OW);
                }
            }
        }
}

/* Output channels [j0, j0 + nj) of each group of the direct and 1x1 paths
 * (every channel: j0 = 0, nj = mg; one: its group only). */
static void conv_direct(const conv_params *cp, const float *x, const float *wt, const float *bias,
                        const bf__act *act, float *y, int64_t ch)
{
    int osp = (int)cp->osp, kc = (int)cp->kc;
    int64_t g0 = ch < 0 ? 0 : ch / cp->mg, g1 = ch < 0 ? cp->group : g0 + 1;
    int64_t j0 = ch < 0 ? 0 : ch % cp->mg, nj = ch < 0 ? cp->mg : 1;
    dw_cols dc = {0};
    if (cp->path == CONV_DEPTHWISE) dw_cols_init(&cp->w, cp->simd, &dc);
    for (int64_t n = 0; n < cp->n; n++)
        for (int64_t g = g0; g < g1; g++) {
            const float *xg = x + (n * cp->c + g * cp->cg) * cp->isp;
            float *yg = y + (n * cp->m + g * cp->mg + j0) * cp->osp;
            const float *wg = wt + (g * cp->mg + j0) * cp->kc;
            if (cp->path == CONV_DEPTHWISE && dw2d_ok(&cp->w)) {
                for (int64_t j = 0; j < nj; j++)
                    dw2d(&cp->w, &dc, xg, wg + j * cp->kc, bias ? bias[g * cp->mg + j0 + j] : 0.0f, yg + j * cp->osp);
                act_pass(act, yg, nj * cp->osp);
                continue;
            }
            if (cp->path == CONV_DEPTHWISE) {
                /* Bias first; the direct loop accumulates onto it. */
                for (int64_t j = 0; j < nj; j++) {
                    float bv = bias ? bias[g * cp->mg + j0 + j] : 0.0f;
                    for (int64_t o = 0; o < cp->osp; o++) yg[j * cp->osp + o] = bv;
                }
                depthwise_channel(&cp->w, &dc, xg, wg, yg);
                act_pass(act, yg, nj * cp->osp);
                continue;
            }
            /* 1x1: X is already the column matrix. Bias after the product,
             * as in the im2col path, added in the kernel's epilogue (the
             * same y = s + bias, without another pass over y). */
            if (nj == 0) continue;
            if (kc > 0 && bias) {
                bf__sgemm_bias(cp->simd, (int)nj, osp, kc, wg, kc, xg, osp, bias + g * cp->mg + j0, act, yg, osp);
                continue;
            }
            if (kc == 0) memset(yg, 0, sizeof(float) * (size_t)(nj * cp->osp));
            else bf__sgemm_level(cp->simd, 0, 0, (int)nj, osp, kc, 1.0f, wg, kc, xg, osp, 0, yg, osp);
            if (bias)
                for (int64_t j = 0; j < nj; j++) {
                    float bv = bias[g * cp->mg + j0 + j];
                    for (int64_t o = 0; o < cp->osp; o++) yg[j * cp->osp + o] += bv;
                }
            act_pass(act, yg, nj * cp->osp);
        }
}

/* One output channel of a stride-1, undilated 2-D convolution without the
 * column matrix: each image's input planes zero-padded once, then the
 * taps' windows of them summed in the column matrix's row order
 * (bf__fma_windows), which is the chain bf__sgemm gives the channel's row
 * of the im2col product, padding zeros included. Far less memory traffic
 * than im2col for one channel's sake. 0 when the shape does not qualify or
 * the scratch is too small. */
static int conv_channel_windows(const conv_params *cp, const float *x, const float *wt, const float *bias, float *y,
                                void *scratch, int64_t ch)
{
    const window *w = &cp->w;
    if (w->in[0] != 1 || w->k[0] != 1 || w->out[0] != 1) return 0;
    for (int d = 1; d < 3; d++)
        if (w->s[d] != 1 || w->d[d] != 1) return 0;
    int64_t hp = w->in[1] + w->pb[1] + w->pe[1], wp = w->in[2] + w->pb[2] + w->pe[2], plane = hp * wp;
    if (w->out[1] != hp - w->k[1] + 1 || w->out[2] != wp - w->k[2] + 1) return 0;
    size_t need = cp->off_cols + (size_t)(cp->cg * plane) + 2 * (size_t)cp->kc + (size_t)cp->osp + 16;
    if (need > cp->scratch_floats) return 0;
    float *wr = scratch, *xp = wr + cp->off_cols, *acc = xp + cp->cg * plane;
    int64_t *off = (int64_t *)(acc + cp->osp + (((uintptr_t)(acc + cp->osp) & 7) ? 1 : 0));
    int64_t g = ch / cp->mg;
    const float *wrow = wt + ch * cp->kc;
    float *wk = wr;   /* the channel's weights in the column matrix's row order */
    for (int64_t c = 0; c < cp->cg; c++)
        for (int64_t kh = 0; kh < w->k[1]; kh++)
            for (int64_t kw = 0; kw < w->k[2]; kw++) {
                int64_t tap = kh * w->k[2] + kw, p = conv_krow(cp, c, tap);
                wk[p] = wrow[c * cp->ksp + tap];
                off[p] = c * plane + kh * wp + kw;
            }
    memset(xp, 0, sizeof(float) * (size_t)(cp->cg * plane));
    float bv = bias ? bias[ch] : 0.0f;
    for (int64_t n = 0; n < cp->n; n++) {
        for (int64_t c = 0; c < cp->cg; c++) {
            const float *src = x + (n * cp->c + g * cp->cg + c) * cp->isp;
            /* plain loops: rows of a few floats, where a memcpy call costs more */
            for (int64_t ih = 0; ih < w->in[1]; ih++) {
                float *restrict dst = xp + c * plane + (ih + w->pb[1]) * wp + w->pb[2];
                const float *restrict row = src + ih * w->in[2];
                for (int64_t iw = 0; iw < w->in[2]; iw++) dst[iw] = row[iw];
            }
        }
        memset(acc, 0, sizeof(float) * (size_t)cp->osp);
        bf__fma_windows(wk, off, (int)cp->kc, xp, (int)w->out[1], (int)w->out[2], wp, acc);
        float *dst = y + (n * cp->m + ch) * cp->osp;
        for (int64_t o = 0; o < cp->osp; o++) dst[o] = acc[o] + bv;
    }
    return 1;
}

/* act: a fused activation (whole steps only, ch < 0). */
static void conv_channels(const conv_params *cp, const float *x, const float *wt, const float *bias,
                          const bf__act *act, float *y, void *scratch, int64_t ch)
{
    if (cp->osp == 0 || cp->mg == 0) return;
    if (cp->path != CONV_IM2COL) {
        conv_direct(cp, x, wt, bias, act, y, ch);
        return;
    }
    if (cp->kc == 0) {
        for (int64_t i = 0; i < cp->n * cp->m; i++)
            if (ch < 0 || i % cp->m == ch) {
                for (int64_t o = 0; o < cp->osp; o++) y[i * cp->osp + o] = bias ? bias[i % cp->m] : 0.0f;
                act_pass(act, y + i * cp->osp, cp->osp);
            }
        return;
    }
    if (ch >= 0 && conv_channel_windows(cp, x, wt, bias, y, scratch, ch)) return;
    if (conv_packed(cp, x, wt, bias, act, y, scratch, ch)) return;
    conv_im2col(cp, x, wt, bias, act, y, scratch, ch);
}

int bf__conv_step(const bf__step *st) { return st->node->op->run == bf__conv_run; }

bf_status bf__conv_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const conv_params *cp = c->params;
    conv_channels(cp, c->in[0]->data, c->in[1]->data, cp->has_bias ? c->in[2]->data : NULL, c->act,
                  c->out[0]->data, c->scratch, -1);
    return BF_OK;
}

int bf__conv_channel(const bf__step *st, int slot, int64_t index, const float *x, const float *wt, const float *bias,
                     float *y, void *scratch)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const conv_params *cp = st->params;
    int64_t ch = slot == 2 ? index : cp->kc ? index / cp->kc : -1;
    if (ch < 0 || ch >= cp->m) return 0;
    conv_channels(cp, x, wt, cp->has_bias ? bias : NULL, NULL, y, scratch, ch);
    return 1;
}

int bf__conv_shape(const bf__step *st, int64_t *c, int64_t *m, int64_t *isp, int64_t *osp)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const conv_params *cp = st->params;
    *c = cp->c, *m = cp->m, *isp = cp->isp, *osp = cp->osp;
    return 1;
}

int bf__conv_taps(const bf__step *st, int slot, int64_t index, int64_t *oc, int64_t *ic, int32_t *tap)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const conv_params *cp = st->params;
    const window *w = &cp->w;
    int64_t kk[3] = {0, 0, 0};
    *ic = -1;
    if (slot == 2) {
        *oc = index;
    } else {
        *oc = index / cp->kc;
        int64_t rem = index % cp->kc, kpos = rem % cp->ksp;
        *ic = *oc / cp->mg * cp->cg + rem / cp->ksp;
        kk[2] = kpos % w->k[2], kk[1] = kpos / w->k[2] % w->k[1], kk[0] = kpos / (w->k[2] * w->k[1]);
    }
    int64_t o = 0;
    for (int64_t o0 = 0; o0 < w->out[0]; o0++)
        for (int64_t o1 = 0; o1 < w->out[1]; o1++)
            for (int64_t o2 = 0; o2 < w->out[2]; o2++, o++) {
                int64_t i0 = o0 * w->s[0] - w->pb[0] + kk[0] * w->d[0];
                int64_t i1 = o1 * w->s[1] - w->pb[1] + kk[1] * w->d[1];
                int64_t i2 = o2 * w->s[2] - w->pb[2] + kk[2] * w->d[2];
                int in = i0 >= 0 && i0 < w->in[0] && i1 >= 0 && i1 < w->in[1] && i2 >= 0 && i2 < w->in[2];
                tap[o] = slot == 2 ? 0 : in ? (int32_t)((i0 * w->in[1] + i1) * w->in[2] + i2) : -1;
            }
    return 1;
}

int bf__conv_channel_n(const bf__step *st, int64_t oc, int64_t n, const float *x, const float *wt, const float *bias,
                       float *y, void *scratch)
{
    if (st->node->op->run != bf__conv_run) return 0;
    conv_params cp = *(const conv_params *)st->params;
    if (n > cp.n) return 0;   /* the scratch is the step's */
    cp.n = n;
    conv_channels(&cp, x, wt, cp.has_bias ? bias : NULL, NULL, y, scratch, oc);
    return 1;
}

/* ---- MaxPool, AveragePool ---- */

typedef struct pool_params {
    window w;
    int64_t planes;             /* N * C */
    int64_t ilo, ihi;           /* output columns whose whole window is inside the input */
    int is_max, count_include_pad;
} pool_params;
static_assert(sizeof(pool_params) <= BF__OP_PARAMS_MAX, "pool params too large");

static bf_status pool_prepare(bf__prep *p, int kind, bf_error *err)
{
    const bf__node *nd = p->node;
    pool_params *pp = (pool_params *)p->params;
    bf_status st;
    if ((st = bf__want_f32(p, 0, "X", err))) return st;
    if (kind == WIN_MAXPOOL && bf__output_wanted(p, 1))
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "output Indices is not supported; only the values output Y");
    int64_t cip = 0;
    if (kind == WIN_AVGPOOL && (st = bf__attr_int(nd, "count_include_pad", 0, &cip, err))) return st;
    if (cip != 0 && cip != 1)
        return bf__node_error(err, nd, BF_EFORMAT, "attribute 'count_include_pad' is %lld; must be 0 or 1",
                              (long long)cip);
    if ((st = parse_window(p, kind, NULL, &pp->w, err))) return st;
    const bf_tensor *x = p->in[0];
    pp->planes = x->dims[0] * x->dims[1];
    pp->is_max = kind == WIN_MAXPOOL;
    pp->count_include_pad = (int)cip;
    p->scratch = sizeof(float) * (size_t)pp->w.in[2];
    const window *w = &pp->w;
    int64_t lo, hi, unused;
    valid_range(w->in[2], w->out[2], w->s[2], w->pb[2], 0, w->d[2], &pp->ilo, &unused);
    valid_range(w->in[2], w->out[2], w->s[2], w->pb[2], w->k[2] - 1, w->d[2], &lo, &hi);
    pp->ihi = hi > pp->ilo ? hi : pp->ilo;
    int64_t dims[5] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < pp->w.rank; i++) dims[2 + i] = pp->w.out[3 - pp->w.rank + i];
    bf__set_shape(p->out[0], BF_F32, 2 + pp->w.rank, dims);
    return BF_OK;
}

bf_status bf__maxpool_prepare(bf__prep *p, bf_error *err) { return pool_prepare(p, WIN_MAXPOOL, err); }
bf_status bf__avgpool_prepare(bf__prep *p, bf_error *err) { return pool_prepare(p, WIN_AVGPOOL, err); }

/* Max that propagates NaN: once the running max is NaN it stays NaN. */
static inline float max_nan(float m, float v) { return (v > m || v != v) ? v : m; }

/* Window [*lo, *hi) of input positions (step d) for output o, clipped to the
 * input; *full is its size clipped to the padded input instead (the
 * count_include_pad divisor, as in PyTorch and ONNX Runtime). */
static void window_at(const window *w, int i, int64_t o, int64_t *lo, int64_t *hi, int64_t *full)
{
    int64_t start = o * w->s[i] - w->pb[i];
    int64_t end = start + (w->k[i] - 1) * w->d[i] + 1;
    int64_t pend = end < w->in[i] + w->pe[i] ? end : w->in[i] + w->pe[i];
    *full = pend - start;                   /* dilation is 1 where this is used */
    /* first tap at or after 0, on the dilation grid */
    int64_t l = start >= 0 ? start : start + ceil_div(-start, w->d[i]) * w->d[i];
    *lo = l;
    *hi = end < w->in[i] ? end : w->in[i];
}

/* Reduces one row along its width: outputs [ilo, ihi) have every tap
 * inside the row and go tap by tap over the whole range (vectorisable);
 * the few edge outputs clip their windows one at a time. `rows` is the
 * divisor's factor from the outer dims. */
static void pool_row(const pool_params *pp, const float *restrict src, float *restrict yr, int64_t rows)
{
    const window *w = &pp->w;
    int64_t k = w->k[2], s = w->s[2], d = w->d[2], pb = w->pb[2], ilo = pp->ilo, ihi = pp->ihi;
    for (int64_t ow = 0; ow < w->out[2]; ow++) {
        if (ow == ilo) ow = ihi;
        if (ow >= w->out[2]) break;
        int64_t w0, w1, wfull;
        window_at(w, 2, ow, &w0, &w1, &wfull);
        if (pp->is_max) {
            float m = -INFINITY;
            for (int64_t iw = w0; iw < w1; iw += d) m = max_nan(m, src[iw]);
            yr[ow] = m;
        } else {
            float sum = 0.0f;
            for (int64_t iw = w0; iw < w1; iw++) sum += src[iw];
            yr[ow] = sum / (float)(rows * (pp->count_include_pad ? wfull : w1 - w0));
        }
    }
    if (ilo >= ihi) return;
    for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] = src[ow * s - pb];
    for (int64_t j = 1; j < k; j++) {
        int64_t o = j * d - pb;
        if (pp->is_max)
            for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] = max_nan(yr[ow], src[ow * s + o]);
        else
            for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] += src[ow * s + o];
    }
    if (!pp->is_max) {
        float count = (float)(rows * k);        /* an inside window: clipped or not, k wide */
        for (int64_t ow = ilo; ow < ihi; ow++) yr[ow] /= count;
    }
}

/* Pools one plane separably: for each output row, reduce the window's input
 * rows into a row of width IW (contiguous, vectorisable), then reduce along
 * the row. Max and sum are both separable over a box. */
static void pool_plane(const pool_params *pp, const float *restrict x, float *restrict y,
                       float *restrict row)
{
    const window *w = &pp->w;
    int64_t IH = w->in[1], IW = w->in[2];
    for (int64_t od = 0; od < w->out[0]; od++) {
        int64_t d0, d1, dfull;
        window_at(w, 0, od, &d0, &d1, &dfull);
        for (int64_t oh = 0; oh < w->out[1]; oh++) {
            int64_t h0, h1, hfull;
            window_at(w, 1, oh, &h0, &h1, &hfull);
            int64_t rows = 0;
            const float *src = row;
            for (int64_t id = d0; id < d1; id += w->d[0])
                for (int64_t ih = h0; ih < h1; ih += w->d[1]) {
                    const float *restrict xr = x + (id * IH + ih) * IW;
                    if (rows++ == 0) {
                        src = xr;
                        continue;
                    }
                    if (rows == 2) memcpy(row, src, sizeof(float) * (size_t)IW), src = row;
                    if (pp->is_max)
                        for (int64_t i = 0; i < IW; i++) row[i] = max_nan(row[i], xr[i]);
                    else
                        for (int64_t i = 0; i < IW; i++) row[i] += xr[i];
                }
            float *restrict yr = y + (od * w->out[1] + oh) * w->out[2];
            if (rows == 0) {
                /* only when dilated taps all miss the input: an empty max */
                for (int64_t ow = 0; ow < w->out[2]; ow++) yr[ow] = -INFINITY;
                continue;
            }
            int64_t nd_ = (d1 - d0 + w->d[0] - 1) / w->d[0], nh = (h1 - h0 + w->d[1] - 1) / w->d[1];
            pool_row(pp, src, yr, pp->count_include_pad ? dfull * hfull : nd_ * nh);
        }
    }
}

/* The most common pool of all, 2x2 max with stride 2 and every window
 * inside the input, gets a direct loop: max is exact, so any order gives the
 * same result as the separable path. */
static int pool_is_max2x2(const pool_params *pp)
{
    const window *w = &pp->w;
    return pp->is_max && w->in[0] == 1 && w->k[0] == 1 && w->k[1] == 2 && w->k[2] == 2 && w->s[1] == 2 &&
           w->s[2] == 2 && w->d[1] == 1 && w->d[2] == 1 && w->pb[1] == 0 && w->pb[2] == 0 &&
           w->out[1] * 2 <= w->in[1] && w->out[2] * 2 <= w->in[2];
}

static void maxpool2x2_plane(const window *w, const float *restrict x, float *restrict y)
{
    int64_t IW = w->in[2], OH = w->out[1], OW = w->out[2];
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *restrict r0 = x + 2 * oh * IW, *restrict r1 = r0 + IW;
        float *restrict yr = y + oh * OW;
        for (int64_t ow = 0; ow < OW; ow++)
            yr[ow] = max_nan(max_nan(r0[2 * ow], r0[2 * ow + 1]), max_nan(r1[2 * ow], r1[2 * ow + 1]));
    }
}

int bf__pool_plane(const bf__step *st, const float *x, float *y, void *scratch)
{
    if (st->node->op->run != bf__pool_run) return 0;
    const pool_params *pp = st->params;
    if (pool_is_max2x2(pp)) maxpool2x2_plane(&pp->w, x, y);
    else pool_plane(pp, x, y, scratch);
    return 1;
}

int bf__pool_shape(const bf__step *st, int64_t *isp, int64_t *osp)
{
    if (st->node->op->run != bf__pool_run) return 0;
    const pool_params *pp = st->params;
    *isp = win_in(&pp->w), *osp = win_out(&pp->w);
    return 1;
}

bf_status bf__pool_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const pool_params *pp = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    int64_t isp = win_in(&pp->w), osp = win_out(&pp->w);
    if (pool_is_max2x2(pp)) {
        for (int64_t pl = 0; pl < pp->planes; pl++) maxpool2x2_plane(&pp->w, x + pl * isp, y + pl * osp);
        return BF_OK;
    }
    for (int64_t pl = 0; pl < pp->planes; pl++) pool_plane(pp, x + pl * isp, y + pl * osp, c->scratch);
    return BF_OK;
}

/* ---- GlobalAveragePool ---- */

typedef struct gap_params {
    int64_t planes, size;
} gap_params;
static_assert(sizeof(gap_params) <= BF__OP_PARAMS_MAX, "gap params too large");

bf_status bf__gap_prepare(bf__prep *p, bf_error *err)
{
    gap_params *gp = (gap_params *)p->params;
    const bf_tensor *x = p->in[0];
    bf_status st;
    if ((st = bf__want_f32(p, 0, "X", err))) return st;
    char sx[96];
    if (x->ndim < 3)
        return bf__node_error(err, p->node, BF_ESHAPE,
                              "input X has shape %s; expected [N, C, D1, ...] with at least one spatial dim",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    int64_t dims[BF_MAX_DIMS];
    gp->planes = x->dims[0] * x->dims[1];
    gp->size = 1;
    for (int i = 0; i < x->ndim; i++) {
        dims[i] = i < 2 ? x->dims[i] : 1;
        if (i >= 2) gp->size *= x->dims[i];
    }
    if (gp->size == 0)
        return bf__node_error(err, p->node, BF_ESHAPE, "input X has shape %s; the spatial dims are empty",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    bf__set_shape(p->out[0], BF_F32, x->ndim, dims);
    return BF_OK;
}

bf_status bf__gap_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const gap_params *gp = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    for (int64_t pl = 0; pl < gp->planes; pl++) y[pl] = bf__sum16_f32(x + pl * gp->size, gp->size) / (float)gp->size;
    return BF_OK;
}

/* GlobalMaxPool: GlobalAveragePool's shapes, the max of each plane, NaN if
 * the plane has one (torch.amax, adaptive_max_pool). */
bf_status bf__gmp_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const gap_params *gp = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    for (int64_t pl = 0; pl < gp->planes; pl++) {
        const float *restrict xp = x + pl * gp->size;
        float m = -INFINITY;
        for (int64_t i = 0; i < gp->size; i++) m = max_nan(m, xp[i]);
        y[pl] = m;
    }
    return BF_OK;
}

/* For the differential executor (diff.h): one corrupted element of W (slot
 * 1) or B (slot 2) moves one output channel by X * dW (or dB), applied to
 * the golden output y where every change is clear. */
int bf__conv_delta(const bf__step *st, int slot, const float *x, int64_t index, float old, float now, float *y)
{
    if (st->node->op->run != bf__conv_run) return -1;
    const conv_params *cp = st->params;
    const window *w = &cp->w;
    if (!isfinite(old) || !isfinite(now)) return 0;
    double dw = (double)now - (double)old;
    int64_t oc, ic = 0, kk[3] = {0, 0, 0};
    if (slot == 2) {
        oc = index;
    } else {
        oc = index / cp->kc;
        int64_t rem = index % cp->kc, kpos = rem % cp->ksp;
        ic = oc / cp->mg * cp->cg + rem / cp->ksp;
        kk[2] = kpos % w->k[2], kk[1] = kpos / w->k[2] % w->k[1], kk[0] = kpos / (w->k[2] * w->k[1]);
    }
    int64_t lo[3], hi[3];
    for (int d = 0; d < 3; d++) {
        if (slot == 2) lo[d] = 0, hi[d] = w->out[d];
        else valid_range(w->in[d], w->out[d], w->s[d], w->pb[d], kk[d], w->d[d], &lo[d], &hi[d]);
    }
    for (int64_t n = 0; n < cp->n; n++) {
        const float *xc = x + (n * cp->c + ic) * cp->isp;
        float *yc = y + (n * cp->m + oc) * cp->osp;
        for (int64_t o0 = lo[0]; o0 < hi[0]; o0++)
            for (int64_t o1 = lo[1]; o1 < hi[1]; o1++)
                for (int64_t o2 = lo[2]; o2 < hi[2]; o2++) {
                    double d = dw;
                    if (slot != 2) {
                        int64_t i0 = o0 * w->s[0] - w->pb[0] + kk[0] * w->d[0];
                        int64_t i1 = o1 * w->s[1] - w->pb[1] + kk[1] * w->d[1];
                        int64_t i2 = o2 * w->s[2] - w->pb[2] + kk[2] * w->d[2];
                        d *= xc[(i0 * w->in[1] + i1) * w->in[2] + i2];
                    }
                    if (d == 0) continue;
                    float *e = &yc[(o0 * w->out[1] + o1) * w->out[2] + o2];
                    if (!isfinite(*e) || !(*e == 0 || fabs(d) >= CLEAR_CHANGE * fabs(*e))) return 0;
                    if (fabs(d) > HUGE_CHANGE * fmax(1.0, fabs(*e))) return 0;
                    if (fabs((double)*e + d) < CLEAR_CHANGE * fabs(*e)) return 0;   /* cancels (diffgemm.c) */
                    float v = (float)((double)*e + d);
                    if (!isfinite(v)) return 0;
                    *e = v;
                }
    }
    return 1;
}
