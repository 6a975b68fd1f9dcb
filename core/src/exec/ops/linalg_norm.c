/* Normalisations: BatchNormalization (inference) and LayerNormalization.
 * Per-channel and per-row statistics are read from the inputs at every run:
 * scale, bias, mean and variance are parameters that faults rewrite. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "exec/op.h"
#include "linalg_impl.h"

/* ---- BatchNormalization ---- */

typedef struct bn_params {
    int64_t n, c, inner;        /* X viewed as [N, C, inner] */
    float eps;
} bn_params;
static_assert(sizeof(bn_params) <= BF__OP_PARAMS_MAX, "batchnorm params too large");

bf_status bf__batchnorm_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    bn_params *bp = (bn_params *)p->params;
    bf_status st;
    int64_t training = 0;
    if ((st = bf__attr_float(nd, "epsilon", 1e-5f, &bp->eps, err)) ||
        (st = bf__attr_int(nd, "training_mode", 0, &training, err)))
        return st;
    if (training != 0)
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "training_mode = %lld is not supported; only inference (0)", (long long)training);
    for (int i = 1; i < p->n_out; i++)
        if (bf__output_wanted(p, i))
            return bf__node_error(err, nd, BF_EUNSUPPORTED,
                                  "output %d (running or saved statistics, training only) is not supported; "
                                  "only Y", i);
    static const char *const names[5] = {"X", "scale", "B", "input_mean", "input_var"};
    for (int i = 0; i < 5; i++)
        if ((st = bf__want_f32(p, i, names[i], err))) return st;
    const bf_tensor *x = p->in[0];
    char sx[96], sv[96];
    if (x->ndim < 2)
        return bf__node_error(err, nd, BF_ESHAPE, "input X has shape %s; expected [N, C, ...] (rank >= 2)",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    int64_t c = x->dims[1];
    for (int i = 1; i < 5; i++) {
        const bf_tensor *v = p->in[i];
        if (v->ndim != 1 || v->dims[0] != c)
            return bf__node_error(err, nd, BF_ESHAPE, "input %s has shape %s; expected [C] = [%lld] from X %s",
                                  names[i], bf_shape_str(v->dims, v->ndim, sv, sizeof sv), (long long)c,
                                  bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    }
    bp->n = x->dims[0], bp->c = c, bp->inner = 1;
    for (int i = 2; i < x->ndim; i++) bp->inner *= x->dims[i];
    bf__set_shape(p->out[0], BF_F32, x->ndim, x->dims);
    return BF_OK;
}

bf_status bf__batchnorm_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const bn_params *bp = c->params;
    const float *x = c->in[0]->data, *scale = c->in[1]->data, *bias = c->in[2]->data;
    const float *mean = c->in[3]->data, *var = c->in[4]->data;
    float *y = c->out[0]->data;
    int64_t inner = bp->inner;
    for (int64_t n = 0; n < bp->n; n++)
        for (int64_t ch = 0; ch < bp->c; ch++) {
            /* y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a:
             * the form PyTorch and ONNX Runtime use for inference. */
            float a = scale[ch] / sqrtf(var[ch] + bp->eps);
            float b = bias[ch] - mean[ch] * a;
            const float *restrict xr = x + (n * bp->c + ch) * inner;
            float *restrict yr = y + (n * bp->c + ch) * inner;
            for (int64_t i = 0; i < inner; i++) yr[i] = xr[i] * a + b;
        }
    return BF_OK;
}

/* ---- LayerNormalization ---- */

typedef struct ln_params {
    int64_t rows, d;            /* X viewed as [rows, d], d = product of dims from axis */
    float eps;
    int scale_full, has_bias, bias_full;   /* full: one value per normalised element; else one */
} ln_params;
static_assert(sizeof(ln_params) <= BF__OP_PARAMS_MAX, "layernorm params too large");

/* Scale or B must broadcast to the normalised dims x->dims[axis:]: either
 * equal to them (leading 1s allowed) or a single value. */
static bf_status ln_param_shape(const bf__prep *p, int i, const char *what, int axis, int *full,
                                bf_error *err)
{
    const bf_tensor *x = p->in[0], *t = p->in[i];
    bf_status st;
    if ((st = bf__want_f32(p, i, what, err))) return st;
    if (bf_tensor_numel(t) == 1 && t->ndim <= x->ndim) {
        *full = 0;
        return BF_OK;
    }
    /* every normalised dim must be covered: a Scale of shape [4] for X
     * [2, 3, 4] at axis 1 has 4 values for 12 (found by fuzz_onnx) */
    int tail = x->ndim - axis, ok = t->ndim <= x->ndim && t->ndim >= tail;
    for (int j = 0; ok && j < t->ndim; j++) {
        int xi = x->ndim - t->ndim + j;
        ok = xi >= axis ? t->dims[j] == x->dims[xi] : t->dims[j] == 1;
    }
    if (!ok) {
        char sx[96], st_[96];
        return bf__node_error(err, p->node, BF_ESHAPE,
                              "input %s has shape %s; expected the normalised dims %s of X (axis %d) or a "
                              "single value",
                              what, bf_shape_str(t->dims, t->ndim, st_, sizeof st_),
                              bf_shape_str(x->dims + axis, tail, sx, sizeof sx), axis);
    }
    *full = 1;
    return BF_OK;
}

bf_status bf__layernorm_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    ln_params *lp = (ln_params *)p->params;
    bf_status st;
    int64_t axis64, stash;
    if ((st = bf__attr_int(nd, "axis", -1, &axis64, err)) ||
        (st = bf__attr_float(nd, "epsilon", 1e-5f, &lp->eps, err)) ||
        (st = bf__attr_int(nd, "stash_type", 1, &stash, err)))
        return st;
    (void)stash;                /* statistics are computed in float whatever it asks */
    if (bf__output_wanted(p, 1) || bf__output_wanted(p, 2))
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "outputs Mean and InvStdDev are not supported; only Y");
    if ((st = bf__want_f32(p, 0, "X", err))) return st;
    const bf_tensor *x = p->in[0];
    if (x->ndim == 0)
        return bf__node_error(err, nd, BF_ESHAPE, "input X is a scalar; expected rank >= 1");
    int axis;
    if ((st = bf__norm_axis(nd, axis64, x->ndim, &axis, err))) return st;
    if ((st = ln_param_shape(p, 1, "Scale", axis, &lp->scale_full, err))) return st;
    lp->has_bias = p->n_in > 2 && p->in[2];
    if (lp->has_bias && (st = ln_param_shape(p, 2, "B", axis, &lp->bias_full, err))) return st;
    lp->rows = 1, lp->d = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i < axis) lp->rows *= x->dims[i];
        else lp->d *= x->dims[i];
    }
    bf__set_shape(p->out[0], BF_F32, x->ndim, x->dims);
    return BF_OK;
}

static float sum_sq_dev(const float *restrict x, int64_t n, float mean)
{
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) {
            float t = x[i + j] - mean;
            acc[j] += t * t;
        }
    for (int j = 0; i < n; i++, j++) {
        float t = x[i] - mean;
        acc[j] += t * t;
    }
    for (int h = 8; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) acc[j] += acc[j + h];
    return acc[0];
}

/* Two-pass mean and variance in float (PyTorch accumulates in float too, so
 * a squared deviation that overflows makes the variance Inf and the row B,
 * as there). */
bf_status bf__layernorm_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const ln_params *lp = c->params;
    const float *x = c->in[0]->data, *scale = c->in[1]->data;
    const float *bias = lp->has_bias ? c->in[2]->data : NULL;
    float *y = c->out[0]->data;
    int64_t d = lp->d;
    if (d == 0) return BF_OK;
    for (int64_t r = 0; r < lp->rows; r++) {
        const float *restrict xr = x + r * d;
        float *restrict yr = y + r * d;
        float mean = bf__sum16_f32(xr, d) / (float)d;
        float var = sum_sq_dev(xr, d, mean) / (float)d;
        float rstd = 1.0f / sqrtf(var + lp->eps);
        if (lp->scale_full)
            for (int64_t i = 0; i < d; i++) yr[i] = (xr[i] - mean) * rstd * scale[i];
        else
            for (int64_t i = 0; i < d; i++) yr[i] = (xr[i] - mean) * rstd * scale[0];
        if (bias && lp->bias_full)
            for (int64_t i = 0; i < d; i++) yr[i] += bias[i];
        else if (bias)
            for (int64_t i = 0; i < d; i++) yr[i] += bias[0];
    }
    return BF_OK;
}
