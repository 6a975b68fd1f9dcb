/* The integer products: MatMulInteger and ConvInteger (int32 out) and their
 * requantizing forms QLinearMatMul and QLinearConv.
 *
 * Sums are exact in int32 (wrapping past 2^31, which a real model's sizes do
 * not reach). The QLinear forms then requantize as ONNX Runtime does:
 * y = saturate(round_half_even(float(acc) * M) + y_zp) with the float32
 * multiplier M = x_scale * w_scale / y_scale, evaluated left to right; the
 * spec's own reference computes the product in double and can differ in the
 * last unit of the rounding.
 *
 * Operands are widened with their zero points subtracted into scratch at
 * every run: faults rewrite the weights in place between runs. */
#include <assert.h>
#include <limits.h>
#include <string.h>

#include "exec/op.h"
#include "quant_impl.h"

/* Where each operand sits among the node's inputs: -1 when the form has none. */
typedef struct qslots {
    int a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, bias;
} qslots;

static const qslots MM_INTEGER = {0, -1, 2, 1, -1, 3, -1, -1, -1};
static const qslots MM_QLINEAR = {0, 1, 2, 3, 4, 5, 6, 7, -1};
static const qslots CONV_INTEGER = {0, -1, 2, 1, -1, 3, -1, -1, -1};
static const qslots CONV_QLINEAR = {0, 1, 2, 3, 4, 5, 6, 7, 8};

static const bf_tensor *opt_in(const bf__prep *p, int i) { return i >= 0 && i < p->n_in ? p->in[i] : NULL; }
static const bf_tensor *opt_run(const bf__ctx *c, int i) { return i >= 0 && i < c->n_in ? c->in[i] : NULL; }

/* The QLinear forms' scales (float32; a per tensor or per `a_per`, b per
 * tensor or per `b_per`, y per tensor) and zero points (y's sets the output
 * type). */
static bf_status qlinear_params(bf__prep *p, const qslots *sl, int64_t a_per, const char *a_what, int64_t b_per,
                                const char *b_what, bf_dtype *yt, bf_error *err)
{
    bf_status st;
    int64_t n;
    static const char *const names[] = {"a_scale", "b_scale", "y_scale"};
    const int scales[] = {sl->a_scale, sl->b_scale, sl->y_scale};
    const int64_t per[] = {a_per, b_per, 0};
    const char *const per_what[] = {a_what, b_what, NULL};
    for (int i = 0; i < 3; i++)
        if ((st = bf__want_f32(p, scales[i], names[i], err)) ||
            (st = bf__want_qparam(p, scales[i], names[i], per[i], per_what[i], &n, err)))
            return st;
    if ((st = bf__want_q8(p, sl->y_zp, "y_zero_point", 0, err)) ||
        (st = bf__want_qparam(p, sl->y_zp, "y_zero_point", 0, NULL, &n, err)))
        return st;
    *yt = p->in[sl->y_zp]->dtype;
    return BF_OK;
}

/* Zero point `i` of operand `of` (type dt): omitted, or per tensor, or per `per`. */
static bf_status zero_point(bf__prep *p, int i, const char *what, bf_dtype dt, const char *of, int64_t per,
                            const char *per_what, bf_error *err)
{
    const bf_tensor *z = opt_in(p, i);
    int64_t n;
    if (!z) return BF_OK;
    bf_status st = bf__want_zp_of(p, i, what, dt, of, err);
    if (st) return st;
    return bf__want_qparam(p, i, what, per, per_what, &n, err);
}

/* The value of a per-tensor-or-per-index parameter at index j. */
static inline float f_at(const bf_tensor *t, int64_t j) { return ((const float *)t->data)[bf_tensor_numel(t) == 1 ? 0 : j]; }
static inline int32_t zp_at(const bf_tensor *t, int64_t j)
{
    return t ? bf__q_at(t->data, t->dtype, bf_tensor_numel(t) == 1 ? 0 : j) : 0;
}

/* ---- MatMulInteger, QLinearMatMul: numpy matmul with batch broadcasting ---- */

typedef struct qmm_params {
    qslots sl;
    int qlinear;
    bf_dtype yt;
    int64_t m, n, k;
    int nb;                     /* output batch rank */
    int64_t batch;
    int64_t bdims[BF_MAX_DIMS];
    int64_t sa[BF_MAX_DIMS], sb[BF_MAX_DIMS];   /* per batch dim, elements to step A, B (0: broadcast) */
} qmm_params;
static_assert(sizeof(qmm_params) <= BF__OP_PARAMS_MAX, "qmm params too large");

static bf_status qmm_prepare(bf__prep *p, const qslots *sl, int qlinear, bf_error *err)
{
    const bf__node *nd = p->node;
    qmm_params *q = (qmm_params *)p->params;
    bf_status st;
    memset(q, 0, sizeof *q);
    q->sl = *sl;
    q->qlinear = qlinear;
    if ((st = bf__want_q8(p, sl->a, qlinear ? "a" : "A", 0, err)) || (st = bf__want_q8(p, sl->b, qlinear ? "b" : "B", 0, err)))
        return st;
    const bf_tensor *a = p->in[sl->a], *b = p->in[sl->b];
    char sa[96], sb[96];
    if (a->ndim == 0 || b->ndim == 0)
        return bf__node_error(err, nd, BF_ESHAPE, "inputs A %s and B %s must have rank >= 1",
                              bf_shape_str(a->dims, a->ndim, sa, sizeof sa), bf_shape_str(b->dims, b->ndim, sb, sizeof sb));
    int64_t m = a->ndim == 1 ? 1 : a->dims[a->ndim - 2], k = a->dims[a->ndim - 1];
    int64_t kb = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2], n = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
    if (kb != k)
        return bf__node_error(err, nd, BF_ESHAPE, "input B has shape %s; expected [..., K, N] with K = %lld from input A %s",
                              bf_shape_str(b->dims, b->ndim, sb, sizeof sb), (long long)k,
                              bf_shape_str(a->dims, a->ndim, sa, sizeof sa));
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || (double)k * (double)n + (double)k + (double)n > (double)(1 << 28))
        return bf__node_error(err, nd, BF_EUNSUPPORTED, "product too large (M %lld, K %lld, N %lld)", (long long)m,
                              (long long)k, (long long)n);
    if ((st = zero_point(p, sl->a_zp, qlinear ? "a_zero_point" : "a_zero_point", a->dtype, "A", m, "row of A", err)) ||
        (st = zero_point(p, sl->b_zp, "b_zero_point", b->dtype, "B", n, "column of B", err)))
        return st;
    q->yt = BF_I32;
    if (qlinear) {
        if (!opt_in(p, sl->a_zp) || !opt_in(p, sl->b_zp))
            return bf__node_error(err, nd, BF_EFORMAT, "a_zero_point and b_zero_point are required");
        if ((st = qlinear_params(p, sl, m, "row of a", n, "column of b", &q->yt, err))) return st;
    }
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    int nb = na > nbb ? na : nbb;
    int64_t odims[BF_MAX_DIMS], batch = 1, step_a = m * k, step_b = k * n;
    for (int i = nb - 1; i >= 0; i--) {
        int ia = i - (nb - na), ib = i - (nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return bf__node_error(err, nd, BF_ESHAPE, "batch dims of A %s and B %s do not broadcast (%lld vs %lld)",
                                  bf_shape_str(a->dims, a->ndim, sa, sizeof sa),
                                  bf_shape_str(b->dims, b->ndim, sb, sizeof sb), (long long)da, (long long)db);
        odims[i] = q->bdims[i] = da == 1 ? db : da;
        q->sa[i] = da == 1 ? 0 : step_a;
        q->sb[i] = db == 1 ? 0 : step_b;
        step_a *= da, step_b *= db;
        batch *= odims[i];
    }
    q->m = m, q->n = n, q->k = k, q->nb = nb, q->batch = batch;
    int nd_out = nb;
    if (a->ndim > 1) odims[nd_out++] = m;
    if (b->ndim > 1) odims[nd_out++] = n;
    bf__set_shape(p->out[0], q->yt, nd_out, odims);
    p->scratch = (size_t)(k * n + k + n) * sizeof(int32_t);
    return BF_OK;
}

bf_status bf__matmul_integer_prepare(bf__prep *p, bf_error *err) { return qmm_prepare(p, &MM_INTEGER, 0, err); }
bf_status bf__qlinear_matmul_prepare(bf__prep *p, bf_error *err) { return qmm_prepare(p, &MM_QLINEAR, 1, err); }

/* One output value from an int32 sum: as is, or requantized. */
static inline void put(void *y, bf_dtype yt, int64_t i, uint32_t acc, float mult, int32_t yz)
{
    if (yt == BF_I32) ((int32_t *)y)[i] = (int32_t)acc;
    else bf__q_store(y, yt, i, nearbyintf((float)(int32_t)acc * mult) + (float)yz);
}

bf_status bf__qmatmul_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const qmm_params *q = c->params;
    const qslots *sl = &q->sl;
    const bf_tensor *a = c->in[sl->a], *b = c->in[sl->b];
    const bf_tensor *az = opt_run(c, sl->a_zp), *bzp = opt_run(c, sl->b_zp);
    int64_t m = q->m, n = q->n, k = q->k;
    int32_t *bz = c->scratch, *arow = bz + k * n;
    uint32_t *acc = (uint32_t *)(arow + k);
    float ys = 1;
    int32_t yz = 0;
    if (q->qlinear) ys = f_at(c->in[sl->y_scale], 0), yz = zp_at(c->in[sl->y_zp], 0);
    int64_t idx[BF_MAX_DIMS] = {0}, off_a = 0, off_b = 0, last_b = -1;
    for (int64_t t = 0; t < q->batch; t++) {
        if (off_b != last_b) {
            for (int64_t kk = 0; kk < k; kk++)
                for (int64_t j = 0; j < n; j++)
                    bz[kk * n + j] = bf__q_at(b->data, b->dtype, off_b + kk * n + j) - zp_at(bzp, j);
            last_b = off_b;
        }
        for (int64_t i = 0; i < m; i++) {
            int32_t za = zp_at(az, i);
            for (int64_t kk = 0; kk < k; kk++) arow[kk] = bf__q_at(a->data, a->dtype, off_a + i * k + kk) - za;
            memset(acc, 0, (size_t)n * sizeof *acc);
            for (int64_t kk = 0; kk < k; kk++) {
                int32_t av = arow[kk];
                if (!av) continue;
                const int32_t *brow = bz + kk * n;
                for (int64_t j = 0; j < n; j++) acc[j] += (uint32_t)(av * brow[j]);
            }
            int64_t y0 = (t * m + i) * n;
            for (int64_t j = 0; j < n; j++) {
                float mult = 1;
                if (q->qlinear) mult = f_at(c->in[sl->a_scale], i) * f_at(c->in[sl->b_scale], j) / ys;
                put(c->out[0]->data, q->yt, y0 + j, acc[j], mult, yz);
            }
        }
        for (int d = q->nb - 1; d >= 0; d--) {
            off_a += q->sa[d], off_b += q->sb[d];
            if (++idx[d] < q->bdims[d]) break;
            off_a -= q->sa[d] * q->bdims[d], off_b -= q->sb[d] * q->bdims[d];
            idx[d] = 0;
        }
    }
    return BF_OK;
}

/* ---- ConvInteger, QLinearConv: direct convolution, 1 to 3 spatial dims ---- */

typedef struct qconv_params {
    qslots sl;
    int qlinear;
    bf_dtype yt;
    /* spatial dims, always 3 (missing leading ones are 1) */
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
    int64_t n, c, m, group, cg, mg, isp, osp, ksp;
} qconv_params;
static_assert(sizeof(qconv_params) <= BF__OP_PARAMS_MAX, "qconv params too large");

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* kernel_shape, strides, dilations, pads, auto_pad and group, with the ONNX
 * output-size formulas (ceil_mode does not exist for Conv). */
static bf_status conv_geometry(bf__prep *p, const bf_tensor *x, const bf_tensor *w, qconv_params *q, bf_error *err)
{
    const bf__node *nd = p->node;
    bf_status st;
    char sx[96], sw[96];
    int r = x->ndim - 2;
    if (r < 1 || r > 3 || w->ndim != x->ndim)
        return bf__node_error(err, nd, BF_ESHAPE, "inputs x %s and w %s must be [N, C, D1...] and [M, C/group, k1...] "
                              "with 1 to 3 spatial dims", bf_shape_str(x->dims, x->ndim, sx, sizeof sx),
                              bf_shape_str(w->dims, w->ndim, sw, sizeof sw));
    int64_t ks[3], ss[3], ds[3], pads[6], group;
    int nk, ns, ndl, np;
    const char *ap;
    if ((st = bf__attr_ints(nd, "kernel_shape", ks, 3, &nk, err)) || (st = bf__attr_ints(nd, "strides", ss, 3, &ns, err)) ||
        (st = bf__attr_ints(nd, "dilations", ds, 3, &ndl, err)) || (st = bf__attr_ints(nd, "pads", pads, 6, &np, err)) ||
        (st = bf__attr_string(nd, "auto_pad", "NOTSET", &ap, err)) || (st = bf__attr_int(nd, "group", 1, &group, err)))
        return st;
    if ((nk >= 0 && nk != r) || (ns >= 0 && ns != r) || (ndl >= 0 && ndl != r) || (np >= 0 && np != 2 * r))
        return bf__node_error(err, nd, BF_EFORMAT, "kernel_shape, strides and dilations need %d values and pads %d "
                              "(one per spatial dim, pads begin and end)", r, 2 * r);
    int upper = strcmp(ap, "SAME_UPPER") == 0, lower = strcmp(ap, "SAME_LOWER") == 0, valid = strcmp(ap, "VALID") == 0;
    if (!upper && !lower && !valid && strcmp(ap, "NOTSET") != 0)
        return bf__node_error(err, nd, BF_EFORMAT, "auto_pad is '%.40s'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
    int64_t c = x->dims[1], m = w->dims[0];
    if (group < 1 || c % group || m % group || w->dims[1] != c / group)
        return bf__node_error(err, nd, BF_ESHAPE, "group %lld with x %s and w %s: group must divide C and M, and w's "
                              "dim 1 be C/group", (long long)group, bf_shape_str(x->dims, x->ndim, sx, sizeof sx),
                              bf_shape_str(w->dims, w->ndim, sw, sizeof sw));
    for (int i = 0; i < 3; i++) q->in[i] = q->out[i] = q->k[i] = q->s[i] = q->d[i] = 1, q->pb[i] = 0;
    for (int i = 0; i < r; i++) {
        int j = 3 - r + i;
        int64_t in = x->dims[2 + i], kk = w->dims[2 + i];
        int64_t s = ns >= 0 ? ss[i] : 1, d = ndl >= 0 ? ds[i] : 1;
        int64_t pb = np >= 0 ? pads[i] : 0, pe = np >= 0 ? pads[r + i] : 0;
        if ((nk >= 0 && ks[i] != kk) || s < 1 || d < 1 || pb < 0 || pe < 0 || s > INT_MAX || d > INT_MAX ||
            pb > INT_MAX || pe > INT_MAX)
            return bf__node_error(err, nd, BF_EFORMAT, "spatial dim %d: kernel %lld (w has %lld), stride %lld, dilation "
                                  "%lld, pads %lld %lld; strides and dilations must be >= 1, pads >= 0", i,
                                  (long long)(nk >= 0 ? ks[i] : kk), (long long)kk, (long long)s, (long long)d,
                                  (long long)pb, (long long)pe);
        int64_t ext = (kk - 1) * d + 1, out;
        if (upper || lower) {
            out = ceil_div(in, s);
            int64_t total = (out - 1) * s + ext - in;
            if (total < 0) total = 0;
            pb = upper ? total / 2 : total - total / 2;
        } else {
            if (valid) pb = pe = 0;
            if (in + pb + pe < ext)
                return bf__node_error(err, nd, BF_ESHAPE, "spatial dim %d: input %lld plus pads %lld + %lld is smaller "
                                      "than the kernel extent %lld", i, (long long)in, (long long)pb, (long long)pe,
                                      (long long)ext);
            out = (in + pb + pe - ext) / s + 1;
        }
        q->in[j] = in, q->out[j] = out, q->k[j] = kk, q->s[j] = s, q->d[j] = d, q->pb[j] = pb;
    }
    q->n = x->dims[0], q->c = c, q->m = m, q->group = group, q->cg = c / group, q->mg = m / group;
    q->isp = q->in[0] * q->in[1] * q->in[2];
    q->osp = q->out[0] * q->out[1] * q->out[2];
    q->ksp = q->k[0] * q->k[1] * q->k[2];
    return BF_OK;
}

static bf_status qconv_prepare(bf__prep *p, const qslots *sl, int qlinear, bf_error *err)
{
    qconv_params *q = (qconv_params *)p->params;
    bf_status st;
    memset(q, 0, sizeof *q);
    q->sl = *sl;
    q->qlinear = qlinear;
    if ((st = bf__want_q8(p, sl->a, "x", 0, err)) || (st = bf__want_q8(p, sl->b, "w", 0, err))) return st;
    const bf_tensor *x = p->in[sl->a], *w = p->in[sl->b];
    if ((st = conv_geometry(p, x, w, q, err))) return st;
    if ((st = zero_point(p, sl->a_zp, "x_zero_point", x->dtype, "x", 0, NULL, err)) ||
        (st = zero_point(p, sl->b_zp, "w_zero_point", w->dtype, "w", q->m, "output channel", err)))
        return st;
    q->yt = BF_I32;
    if (qlinear) {
        if (!opt_in(p, sl->a_zp) || !opt_in(p, sl->b_zp))
            return bf__node_error(err, p->node, BF_EFORMAT, "x_zero_point and w_zero_point are required");
        if ((st = qlinear_params(p, sl, 0, NULL, q->m, "output channel", &q->yt, err))) return st;
        const bf_tensor *b = opt_in(p, sl->bias);
        char sb[96];
        if (b && (b->dtype != BF_I32 || b->ndim != 1 || b->dims[0] != q->m))
            return bf__node_error(err, p->node, BF_EFORMAT, "input B is %s %s; expected int32 [M] = [%lld]",
                                  bf_dtype_name(b->dtype), bf_shape_str(b->dims, b->ndim, sb, sizeof sb), (long long)q->m);
    }
    double scratch = (double)q->c * (double)q->isp + (double)q->m * (double)q->cg * (double)q->ksp + (double)q->osp;
    if (scratch > (double)(1 << 28))
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "convolution too large for the integer kernel "
                              "(%.0f scratch values)", scratch);
    p->scratch = (size_t)scratch * sizeof(int32_t);
    int r = x->ndim - 2;
    int64_t dims[5] = {q->n, q->m};
    for (int i = 0; i < r; i++) dims[2 + i] = q->out[3 - r + i];
    bf__set_shape(p->out[0], q->yt, 2 + r, dims);
    return BF_OK;
}

bf_status bf__conv_integer_prepare(bf__prep *p, bf_error *err) { return qconv_prepare(p, &CONV_INTEGER, 0, err); }
bf_status bf__qlinear_conv_prepare(bf__prep *p, bf_error *err) { return qconv_prepare(p, &CONV_QLINEAR, 1, err); }

/* Adds weight value wv times the input window at tap (kd, kh, kw) onto one
 * output channel's sums; taps outside the input read the zero point, so add
 * nothing. */
static void conv_tap(const qconv_params *q, const int32_t *restrict xc, int32_t wv, int64_t kd, int64_t kh, int64_t kw,
                     uint32_t *restrict acc)
{
    for (int64_t od = 0; od < q->out[0]; od++) {
        int64_t id = od * q->s[0] - q->pb[0] + kd * q->d[0];
        if (id < 0 || id >= q->in[0]) continue;
        for (int64_t oh = 0; oh < q->out[1]; oh++) {
            int64_t ih = oh * q->s[1] - q->pb[1] + kh * q->d[1];
            if (ih < 0 || ih >= q->in[1]) continue;
            const int32_t *xr = xc + (id * q->in[1] + ih) * q->in[2];
            uint32_t *ar = acc + (od * q->out[1] + oh) * q->out[2];
            for (int64_t ow = 0; ow < q->out[2]; ow++) {
                int64_t iw = ow * q->s[2] - q->pb[2] + kw * q->d[2];
                if (iw >= 0 && iw < q->in[2]) ar[ow] += (uint32_t)(wv * xr[iw]);
            }
        }
    }
}

bf_status bf__qconv_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const qconv_params *q = c->params;
    const qslots *sl = &q->sl;
    const bf_tensor *x = c->in[sl->a], *w = c->in[sl->b];
    const bf_tensor *xzp = opt_run(c, sl->a_zp), *wzp = opt_run(c, sl->b_zp), *bias = opt_run(c, sl->bias);
    int32_t *xz = c->scratch, *wz = xz + q->c * q->isp;
    uint32_t *acc = (uint32_t *)(wz + q->m * q->cg * q->ksp);
    int64_t wper = q->cg * q->ksp;
    for (int64_t oc = 0; oc < q->m; oc++) {
        int32_t z = zp_at(wzp, oc);
        for (int64_t i = 0; i < wper; i++) wz[oc * wper + i] = bf__q_at(w->data, w->dtype, oc * wper + i) - z;
    }
    float xs = 1, ys = 1;
    int32_t yz = 0, xzv = zp_at(xzp, 0);
    if (q->qlinear) xs = f_at(c->in[sl->a_scale], 0), ys = f_at(c->in[sl->y_scale], 0), yz = zp_at(c->in[sl->y_zp], 0);
    for (int64_t n = 0; n < q->n; n++) {
        int64_t xoff = n * q->c * q->isp;
        for (int64_t i = 0; i < q->c * q->isp; i++) xz[i] = bf__q_at(x->data, x->dtype, xoff + i) - xzv;
        for (int64_t oc = 0; oc < q->m; oc++) {
            int64_t g = oc / q->mg;
            uint32_t b0 = bias ? (uint32_t)((const int32_t *)bias->data)[oc] : 0;
            for (int64_t o = 0; o < q->osp; o++) acc[o] = b0;
            const int32_t *wr = wz + oc * wper;
            for (int64_t ci = 0; ci < q->cg; ci++) {
                const int32_t *xc = xz + (g * q->cg + ci) * q->isp;
                for (int64_t kd = 0, t = 0; kd < q->k[0]; kd++)
                    for (int64_t kh = 0; kh < q->k[1]; kh++)
                        for (int64_t kw = 0; kw < q->k[2]; kw++, t++) {
                            int32_t wv = wr[ci * q->ksp + t];
                            if (wv) conv_tap(q, xc, wv, kd, kh, kw, acc);
                        }
            }
            float mult = q->qlinear ? xs * f_at(c->in[sl->b_scale], oc) / ys : 1;
            int64_t y0 = (n * q->m + oc) * q->osp;
            for (int64_t o = 0; o < q->osp; o++) put(c->out[0]->data, q->yt, y0 + o, acc[o], mult, yz);
        }
    }
    return BF_OK;
}
