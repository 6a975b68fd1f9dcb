/* The quant family: conversions between float32 and int8/uint8 here, the
 * integer products in quant_linear.c.
 *
 * Arithmetic is ONNX Runtime's, which the spec's formulas leave open in two
 * places: x / scale is a float32 division (not a multiplication by 1/scale),
 * and rounding is half to even on that float32 quotient. NaN quantizes to the
 * type's lowest value (ONNX leaves it undefined; ONNX Runtime on x86 does
 * this); +-Inf saturates. DynamicQuantizeLinear
 * of an all-zero input uses scale 1, as ONNX Runtime does, where the spec's
 * formula would divide by zero; NaN elements do not take part in its min/max. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exec/op.h"
#include "quant_impl.h"

bf_status bf__want_q8(const bf__prep *p, int i, const char *what, int also_i32, bf_error *err)
{
    if (i >= p->n_in || !p->in[i])
        return bf__node_error(err, p->node, BF_EFORMAT, "input %s is required but omitted", what);
    bf_dtype dt = p->in[i]->dtype;
    if (bf__is_q8(dt) || (also_i32 && dt == BF_I32)) return BF_OK;
    return bf__node_error(err, p->node, BF_EUNSUPPORTED, "input %s is %s; expected int8 or uint8%s", what,
                          bf_dtype_name(dt), also_i32 ? " (or int32)" : "");
}

bf_status bf__want_qparam(const bf__prep *p, int i, const char *what, int64_t per, const char *per_what,
                          int64_t *n, bf_error *err)
{
    const bf_tensor *t = p->in[i];
    char s[96];
    int64_t k = bf_tensor_numel(t);
    if (t->ndim <= 1 && (k == 1 || (per > 0 && t->ndim == 1 && k == per))) { *n = k; return BF_OK; }
    if (per > 0)
        return bf__node_error(err, p->node, BF_ESHAPE,
                              "input %s has shape %s; expected a scalar (per tensor) or [%lld] (one per %s)", what,
                              bf_shape_str(t->dims, t->ndim, s, sizeof s), (long long)per, per_what);
    return bf__node_error(err, p->node, BF_ESHAPE, "input %s has shape %s; expected a scalar (one per tensor)", what,
                          bf_shape_str(t->dims, t->ndim, s, sizeof s));
}

bf_status bf__want_zp_of(const bf__prep *p, int i, const char *what, bf_dtype dt, const char *of, bf_error *err)
{
    if (i >= p->n_in || !p->in[i]) return BF_OK;
    if (p->in[i]->dtype == dt) return BF_OK;
    return bf__node_error(err, p->node, BF_EFORMAT, "input %s is %s but %s is %s; a zero point has its data's type",
                          what, bf_dtype_name(p->in[i]->dtype), of, bf_dtype_name(dt));
}

/* ---- QuantizeLinear, DequantizeLinear: per tensor or along `axis` ---- */

typedef struct qdq_params {
    int64_t outer, ch, inner;   /* x as [outer, ch, inner]; ch = 1 per tensor */
    int per_axis, has_zp;
    bf_dtype xt, yt;
} qdq_params;
static_assert(sizeof(qdq_params) <= BF__OP_PARAMS_MAX, "qdq params too large");

/* Scale (input 1) and zero point (input 2) against x: per tensor, or per
 * slice along `axis` (opset 13). */
static bf_status qdq_axis(bf__prep *p, qdq_params *q, bf_error *err)
{
    const bf_tensor *x = p->in[0], *s = p->in[1], *zp = p->n_in > 2 ? p->in[2] : NULL;
    int64_t axis = 1;
    int ax = 0;
    bf_status st;
    char sx[96], ss[96];
    if (bf_tensor_numel(s) != 1 || s->ndim > 1) {
        if (p->opset < 13)
            return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                                  "scale has shape %s: per-axis scales need opset 13 (the model has %lld)",
                                  bf_shape_str(s->dims, s->ndim, ss, sizeof ss), (long long)p->opset);
        if ((st = bf__attr_int(p->node, "axis", 1, &axis, err))) return st;
        if ((st = bf__norm_axis(p->node, axis, x->ndim, &ax, err))) return st;
        if (s->ndim != 1 || x->ndim == 0 || s->dims[0] != x->dims[ax])
            return bf__node_error(err, p->node, BF_ESHAPE,
                                  "scale has shape %s; expected a scalar or [%lld], one per slice of X %s along axis %lld",
                                  bf_shape_str(s->dims, s->ndim, ss, sizeof ss), x->ndim ? (long long)x->dims[ax] : 1LL,
                                  bf_shape_str(x->dims, x->ndim, sx, sizeof sx), (long long)axis);
        q->per_axis = 1;
    }
    if (zp && (zp->ndim != s->ndim || bf_tensor_numel(zp) != bf_tensor_numel(s)))
        return bf__node_error(err, p->node, BF_ESHAPE, "zero point has shape %s but scale has %s; they must match",
                              bf_shape_str(zp->dims, zp->ndim, sx, sizeof sx), bf_shape_str(s->dims, s->ndim, ss, sizeof ss));
    q->outer = 1, q->ch = 1, q->inner = bf_tensor_numel(x);
    if (q->per_axis) {
        q->inner = 1;
        for (int i = 0; i < ax; i++) q->outer *= x->dims[i];
        q->ch = x->dims[ax];
        for (int i = ax + 1; i < x->ndim; i++) q->inner *= x->dims[i];
    }
    q->has_zp = zp != NULL;
    return BF_OK;
}

static bf_status quantize_prepare(bf__prep *p, bf_error *err)
{
    qdq_params *q = (qdq_params *)p->params;
    bf_status st;
    if ((st = bf__want_f32(p, 0, "x", err)) || (st = bf__want_f32(p, 1, "y_scale", err))) return st;
    const bf_tensor *zp = p->n_in > 2 ? p->in[2] : NULL;
    if (zp && !bf__is_q8(zp->dtype))
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "y_zero_point is %s; expected int8 or uint8 (it sets y's type)",
                              bf_dtype_name(zp->dtype));
    if ((st = qdq_axis(p, q, err))) return st;
    q->xt = BF_F32;
    q->yt = zp ? zp->dtype : BF_U8;   /* the spec's default without a zero point */
    bf__set_shape(p->out[0], q->yt, p->in[0]->ndim, p->in[0]->dims);
    return BF_OK;
}

static bf_status quantize_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const qdq_params *q = c->params;
    const float *x = c->in[0]->data, *s = c->in[1]->data;
    const void *zp = q->has_zp ? c->in[2]->data : NULL;
    void *y = c->out[0]->data;
    int64_t i = 0;
    for (int64_t o = 0; o < q->outer; o++)
        for (int64_t ch = 0; ch < q->ch; ch++) {
            float sc = s[ch];
            int32_t z = zp ? bf__q_at(zp, q->yt, ch) : 0;
            for (int64_t k = 0; k < q->inner; k++, i++)
                bf__q_store(y, q->yt, i, nearbyintf(x[i] / sc) + (float)z);
        }
    return BF_OK;
}

static bf_status dequantize_prepare(bf__prep *p, bf_error *err)
{
    qdq_params *q = (qdq_params *)p->params;
    bf_status st;
    if ((st = bf__want_q8(p, 0, "x", 1, err)) || (st = bf__want_f32(p, 1, "x_scale", err)) ||
        (st = bf__want_zp_of(p, 2, "x_zero_point", p->in[0]->dtype, "x", err)))
        return st;
    if ((st = qdq_axis(p, q, err))) return st;
    q->xt = p->in[0]->dtype;
    q->yt = BF_F32;
    bf__set_shape(p->out[0], BF_F32, p->in[0]->ndim, p->in[0]->dims);
    return BF_OK;
}

static bf_status dequantize_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const qdq_params *q = c->params;
    const void *x = c->in[0]->data, *zp = q->has_zp ? c->in[2]->data : NULL;
    const float *s = c->in[1]->data;
    float *y = c->out[0]->data;
    int64_t i = 0;
    /* (x - zp) in int32 first, then one float product, as ONNX Runtime:
     * exact for every int8 pair, and the only rounding is the product's. */
    for (int64_t o = 0; o < q->outer; o++)
        for (int64_t ch = 0; ch < q->ch; ch++) {
            float sc = s[ch];
            int32_t z = zp ? bf__q_at(zp, q->xt, ch) : 0;
            for (int64_t k = 0; k < q->inner; k++, i++) y[i] = (float)(bf__q_at(x, q->xt, i) - z) * sc;
        }
    return BF_OK;
}

/* ---- DynamicQuantizeLinear: uint8 with a scale and zero point from x's range ---- */

static bf_status dynq_prepare(bf__prep *p, bf_error *err)
{
    bf_status st = bf__want_f32(p, 0, "x", err);
    if (st) return st;
    bf__set_shape(p->out[0], BF_U8, p->in[0]->ndim, p->in[0]->dims);
    if (p->n_out > 1 && p->out[1]) bf__set_shape(p->out[1], BF_F32, 0, NULL);
    if (p->n_out > 2 && p->out[2]) bf__set_shape(p->out[2], BF_U8, 0, NULL);
    return BF_OK;
}

static bf_status dynq_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const float *x = c->in[0]->data;
    int64_t n = bf_tensor_numel(c->in[0]);
    /* the range always holds 0, so that 0 is exactly representable */
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float zf = nearbyintf(0.0f - lo / scale);
    int32_t z = zf <= 0 ? 0 : zf >= 255 ? 255 : (int32_t)zf;
    uint8_t *y = c->out[0]->data;
    for (int64_t i = 0; i < n; i++) bf__q_store(y, BF_U8, i, nearbyintf(x[i] / scale) + (float)z);
    if (c->n_out > 1 && c->out[1] && c->out[1]->data) *(float *)c->out[1]->data = scale;
    if (c->n_out > 2 && c->out[2] && c->out[2]->data) *(uint8_t *)c->out[2]->data = (uint8_t)z;
    return BF_OK;
}

const bf__op bf__ops_quant[] = {
    {"QuantizeLinear", 2, 3, 1, 1, 0, quantize_prepare, quantize_run},
    {"DequantizeLinear", 2, 3, 1, 1, 0, dequantize_prepare, dequantize_run},
    {"DynamicQuantizeLinear", 1, 1, 1, 3, 0, dynq_prepare, dynq_run},
    {"MatMulInteger", 2, 4, 1, 1, 0, bf__matmul_integer_prepare, bf__qmatmul_run},
    {"QLinearMatMul", 8, 8, 1, 1, 0, bf__qlinear_matmul_prepare, bf__qmatmul_run},
    {"ConvInteger", 2, 4, 1, 1, 0, bf__conv_integer_prepare, bf__qconv_run},
    {"QLinearConv", 8, 9, 1, 1, 0, bf__qlinear_conv_prepare, bf__qconv_run},
    {0},
};
