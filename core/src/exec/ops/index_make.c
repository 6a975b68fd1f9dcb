/* Ops that make index tensors and masks: Range (torch.arange), OneHot,
 * NonZero (torch.nonzero, masks turned into indices) and Trilu (causal
 * masks, torch.triu / tril). Range and NonZero have output shapes that
 * depend on their inputs' values: a NonZero of a value computed at run time
 * is a dynamic step (plan_dyn.c), prepared on every run; a Range reading
 * one is too, as every step reading a dynamic step's value. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "index_impl.h"

/* ---- Range ---- */

typedef struct range_params {
    int64_t count;
    bf_dtype dtype;
} range_params;
static_assert(sizeof(range_params) <= BF__OP_PARAMS_MAX, "range_params must fit in params");

static double scalar_f64(const bf_tensor *t)
{
    switch (t->dtype) {
    case BF_F32: return ((const float *)t->data)[0];
    case BF_I32: return ((const int32_t *)t->data)[0];
    default: return (double)((const int64_t *)t->data)[0];
    }
}

bf_status bf__range_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    range_params *rp = (range_params *)p->params;
    static const char *const names[] = {"start", "limit", "delta"};
    bf_status st = bf__need_inputs(p, 3, err);
    if (st) return st;
    bf_dtype dt = p->in[0]->dtype;
    if (dt != BF_F32 && dt != BF_I64 && dt != BF_I32)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "input 'start' is %s; float32, int64 and int32 are "
                              "supported", bf_dtype_name(dt));
    for (int i = 0; i < 3; i++) {
        const bf_tensor *t = p->in[i];
        if (t->dtype != dt)
            return bf__node_error(err, n, BF_EFORMAT, "input '%s' is %s but 'start' is %s; all three must "
                                  "have one dtype", names[i], bf_dtype_name(t->dtype), bf_dtype_name(dt));
        if (bf_tensor_numel(t) != 1)
            return bf__node_error(err, n, BF_ESHAPE, "input '%s' must be a scalar, has %lld elements",
                                  names[i], (long long)bf_tensor_numel(t));
        if (!t->data)
            return bf__node_error(err, n, BF_EUNSUPPORTED, "input '%s' must be known when the plan is built "
                                  "(a constant or shape arithmetic): Range's output length depends on it",
                                  names[i]);
    }
    /* count = max(ceil((limit - start) / delta), 0), exactly for integers */
    int64_t count;
    if (dt == BF_F32) {
        double s = scalar_f64(p->in[0]), l = scalar_f64(p->in[1]), d = scalar_f64(p->in[2]);
        if (d == 0 || !isfinite(s) || !isfinite(l) || !isfinite(d))
            return bf__node_error(err, n, BF_EINVAL, "start %g, limit %g, delta %g: delta must be non-zero "
                                  "and all three finite", s, l, d);
        double c = ceil((l - s) / d);
        if (c > (double)(INT64_MAX / 16))
            return bf__node_error(err, n, BF_EUNSUPPORTED, "start %g, limit %g, delta %g make %g elements, "
                                  "too many", s, l, d, c);
        count = c > 0 ? (int64_t)c : 0;
    } else {
        int64_t s = bf__index_at(p->in[0], 0), l = bf__index_at(p->in[1], 0), d = bf__index_at(p->in[2], 0);
        if (d == 0)
            return bf__node_error(err, n, BF_EINVAL, "delta is 0; it must be non-zero");
        /* the span in unsigned arithmetic: limit - start may not fit in int64 */
        uint64_t span;
        if (d > 0) span = l > s ? (uint64_t)l - (uint64_t)s : 0;
        else span = s > l ? (uint64_t)s - (uint64_t)l : 0;
        uint64_t step = d > 0 ? (uint64_t)d : (uint64_t)0 - (uint64_t)d;
        uint64_t c = span / step + (span % step != 0);
        if (c > (uint64_t)(INT64_MAX / 16))
            return bf__node_error(err, n, BF_EUNSUPPORTED, "start %lld, limit %lld, delta %lld make %llu "
                                  "elements, too many", (long long)s, (long long)l, (long long)d,
                                  (unsigned long long)c);
        count = (int64_t)c;
    }
    rp->count = count;
    rp->dtype = dt;
    bf__set_shape(p->out[0], dt, 1, &count);
    return BF_OK;
}

bf_status bf__range_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const range_params *rp = c->params;
    void *o = c->out[0]->data;
    if (rp->dtype == BF_F32) {
        /* start + i * delta in double, rounded once: no drift from a running sum */
        double s = scalar_f64(c->in[0]), d = scalar_f64(c->in[2]);
        for (int64_t i = 0; i < rp->count; i++) ((float *)o)[i] = (float)(s + (double)i * d);
    } else if (rp->dtype == BF_I64) {
        uint64_t s = (uint64_t)bf__index_at(c->in[0], 0), d = (uint64_t)bf__index_at(c->in[2], 0);
        for (int64_t i = 0; i < rp->count; i++) ((int64_t *)o)[i] = (int64_t)(s + (uint64_t)i * d);
    } else {
        int64_t s = bf__index_at(c->in[0], 0), d = bf__index_at(c->in[2], 0);
        for (int64_t i = 0; i < rp->count; i++) ((int32_t *)o)[i] = (int32_t)(s + i * d);
    }
    return BF_OK;
}

/* ---- OneHot ---- */

typedef struct onehot_params {
    int64_t outer, depth, inner;  /* output viewed as [outer, depth, inner] */
    bf_dtype idtype, vdtype;
} onehot_params;
static_assert(sizeof(onehot_params) <= BF__OP_PARAMS_MAX, "onehot_params must fit in params");

bf_status bf__onehot_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    onehot_params *q = (onehot_params *)p->params;
    int64_t axis;
    bf_status st = bf__need_inputs(p, 3, err);
    if (!st) st = bf__attr_int(n, "axis", -1, &axis, err);
    if (st) return st;
    const bf_tensor *ind = p->in[0], *dep = p->in[1], *val = p->in[2];
    if (ind->dtype != BF_I64 && ind->dtype != BF_I32 && ind->dtype != BF_F32)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "input 'indices' is %s; int64, int32 and float32 are "
                              "supported", bf_dtype_name(ind->dtype));
    if (bf_tensor_numel(dep) != 1 || (dep->dtype != BF_I64 && dep->dtype != BF_I32 && dep->dtype != BF_F32))
        return bf__node_error(err, n, BF_EFORMAT, "input 'depth' must be one int64, int32 or float32 value, "
                              "got %s with %lld elements", bf_dtype_name(dep->dtype), (long long)bf_tensor_numel(dep));
    if (!dep->data)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "input 'depth' must be known when the plan is built "
                              "(a constant): the output shape depends on it");
    double dd = dep->dtype == BF_F32 ? (double)((const float *)dep->data)[0] : (double)bf__index_at(dep, 0);
    if (!(dd >= 1))
        return bf__node_error(err, n, BF_EINVAL, "depth %g must be at least 1", dd);
    if (dd > (double)(INT64_MAX / 16))
        return bf__node_error(err, n, BF_EUNSUPPORTED, "depth %g is too large", dd);
    if (bf_tensor_numel(val) != 2 || bf_dtype_size(val->dtype) == 0)
        return bf__node_error(err, n, BF_ESHAPE, "input 'values' must hold two elements [off, on], has %lld",
                              (long long)bf_tensor_numel(val));
    int r = ind->ndim;
    if (r + 1 > BF_MAX_DIMS)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "output rank %d exceeds the supported %d", r + 1,
                              BF_MAX_DIMS);
    int ax;
    if ((st = bf__norm_axis(n, axis, r + 1, &ax, err))) return st;
    q->depth = (int64_t)dd;   /* a float depth is truncated, as ONNX Runtime does */
    int64_t dims[BF_MAX_DIMS];
    q->outer = q->inner = 1;
    for (int d = 0, k = 0; d <= r; d++) {
        if (d == ax) { dims[d] = q->depth; continue; }
        dims[d] = ind->dims[k++];
        if (d < ax) q->outer *= dims[d];
        else q->inner *= dims[d];
    }
    if ((st = bf__check_dims(n, "output shape", r + 1, dims, err))) return st;
    q->idtype = ind->dtype;
    q->vdtype = val->dtype;
    bf__set_shape(p->out[0], val->dtype, r + 1, dims);
    return BF_OK;
}

bf_status bf__onehot_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const onehot_params *q = c->params;
    const bf_tensor *ind = c->in[0];
    size_t es = bf_dtype_size(q->vdtype);
    const unsigned char *off = c->in[2]->data, *on = off + es;
    unsigned char *o = c->out[0]->data;
    int64_t total = q->outer * q->depth * q->inner;
    for (int64_t i = 0; i < total; i++) memcpy(o + (size_t)i * es, off, es);
    for (int64_t a = 0; a < q->outer; a++)
        for (int64_t b = 0; b < q->inner; b++) {
            int64_t j = a * q->inner + b, v;
            if (q->idtype == BF_F32) {
                float f = ((const float *)ind->data)[j];
                /* out of range (or NaN): the row stays all 'off', per the spec */
                if (!(f > -(float)q->depth - 1 && f < (float)q->depth + 1)) continue;
                v = (int64_t)f;
            } else {
                v = bf__index_at(ind, j);
            }
            if (v < 0) v += q->depth;
            if (v < 0 || v >= q->depth) continue;
            memcpy(o + (size_t)((a * q->depth + v) * q->inner + b) * es, on, es);
        }
    return BF_OK;
}

/* ---- NonZero ---- */

typedef struct nonzero_params {
    int64_t count;
} nonzero_params;
static_assert(sizeof(nonzero_params) <= BF__OP_PARAMS_MAX, "nonzero_params must fit in params");

/* The flat positions of x's non-zero elements, in order, into pos (if not
 * NULL, room for `room`); returns how many there are. One loop per dtype:
 * a detector's tail runs two NonZero per class on its score masks (180 on
 * SSDlite's 91 classes), and a switch per element made them a fifth of a
 * trial. Bytes (bool, uint8, int8) are skipped 8 at a time where all are 0:
 * a score mask is mostly zeros. */
#define SCAN(T, NZ)                                                                                                 \
    do {                                                                                                            \
        const T *v = x->data;                                                                                       \
        for (int64_t i = 0; i < total; i++)                                                                         \
            if (NZ) {                                                                                               \
                if (pos && k < room) pos[k] = i;                                                                    \
                k++;                                                                                                \
            }                                                                                                       \
    } while (0)
static int64_t nonzero_scan(const bf_tensor *x, int64_t *pos, int64_t room)
{
    int64_t total = bf_tensor_numel(x), k = 0;
    switch (x->dtype) {
    case BF_F32: SCAN(float, v[i] != 0.0f); break;   /* NaN counts; -0 does not */
    case BF_I64: SCAN(int64_t, v[i] != 0); break;
    case BF_I32: SCAN(int32_t, v[i] != 0); break;
    default: {
        const uint8_t *b = x->data;
        int64_t i = 0;
        while (i < total) {
            uint64_t w;
            if (i + 8 <= total && (memcpy(&w, b + i, 8), w == 0)) {
                i += 8;
                continue;
            }
            if (b[i]) {
                if (pos && k < room) pos[k] = i;
                k++;
            }
            i++;
        }
        break;
    }
    }
    return k;
}
#undef SCAN

bf_status bf__nonzero_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    bf_status st = bf__need_inputs(p, 1, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    bf_dtype dt = x->dtype;
    if (dt != BF_F32 && dt != BF_I64 && dt != BF_I32 && dt != BF_BOOL && dt != BF_U8 && dt != BF_I8)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "input is %s; not supported", bf_dtype_name(dt));
    if (!x->data) {
        /* the output's length is the data's: prepared again on every run
         * (plan_dyn.c), when x is there */
        p->data_dependent = 1;
        return BF_OK;
    }
    int64_t count = nonzero_scan(x, NULL, 0);
    ((nonzero_params *)p->params)->count = count;
    int64_t dims[2] = {x->ndim, count};
    bf__set_shape(p->out[0], BF_I64, 2, dims);
    return BF_OK;
}

bf_status bf__nonzero_run(const bf__ctx *c, bf_error *err)
{
    const bf_tensor *x = c->in[0];
    int64_t count = ((const nonzero_params *)c->params)->count;
    int64_t *o = c->out[0]->data;
    int r = x->ndim;
    /* positions into the last row of the output (dim r - 1's indices are
     * the flat position's remainders), then spread over the dims */
    int64_t *pos = o + (r > 0 ? (int64_t)(r - 1) * count : 0);
    int64_t k = r > 0 ? nonzero_scan(x, pos, count) : nonzero_scan(x, NULL, 0);
    /* prepare counted them from the same data; a mismatch means the data changed */
    if (k > count)
        return bf__node_error(err, c->node, BF_EINVAL, "the input changed since the plan was built "
                              "(more than %lld non-zero elements)", (long long)count);
    if (k != count)
        return bf__node_error(err, c->node, BF_EINVAL, "the input changed since the plan was built (%lld "
                              "non-zero elements, %lld when built)", (long long)k, (long long)count);
    for (int64_t j = 0; j < count && r > 1; j++) {
        int64_t f = pos[j];
        for (int d = r - 1; d >= 0; d--) {
            o[d * count + j] = f % x->dims[d];
            f /= x->dims[d];
        }
    }
    return BF_OK;
}

/* ---- Trilu ---- */

typedef struct trilu_params {
    int upper;
    int64_t batch, rows, cols;
    size_t esize;
} trilu_params;
static_assert(sizeof(trilu_params) <= BF__OP_PARAMS_MAX, "trilu_params must fit in params");

bf_status bf__trilu_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    trilu_params *q = (trilu_params *)p->params;
    int64_t upper;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = bf__attr_int(n, "upper", 1, &upper, err);
    if (st) return st;
    const bf_tensor *x = p->in[0], *k = p->n_in > 1 ? p->in[1] : NULL;
    if (x->ndim < 2)
        return bf__node_error(err, n, BF_ESHAPE, "input has rank %d; Trilu needs rank >= 2", x->ndim);
    if (bf_dtype_size(x->dtype) == 0)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "input is %s; not supported", bf_dtype_name(x->dtype));
    if (k && ((k->dtype != BF_I64 && k->dtype != BF_I32) || bf_tensor_numel(k) != 1))
        return bf__node_error(err, n, BF_EFORMAT, "input 'k' must be one int64, got %s with %lld elements",
                              bf_dtype_name(k->dtype), (long long)bf_tensor_numel(k));
    q->upper = upper != 0;
    q->rows = x->dims[x->ndim - 2];
    q->cols = x->dims[x->ndim - 1];
    q->batch = 1;
    for (int d = 0; d < x->ndim - 2; d++) q->batch *= x->dims[d];
    q->esize = bf_dtype_size(x->dtype);
    bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
    return BF_OK;
}

bf_status bf__trilu_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const trilu_params *q = c->params;
    /* k is data (it may change per run); it bounds which diagonal is kept */
    int64_t k = c->n_in > 1 && c->in[1] ? bf__index_at(c->in[1], 0) : 0;
    size_t es = q->esize, row = (size_t)q->cols * es;
    const unsigned char *x = c->in[0]->data;
    unsigned char *o = c->out[0]->data;
    for (int64_t b = 0; b < q->batch; b++)
        for (int64_t i = 0; i < q->rows; i++, x += row, o += row) {
            /* upper keeps j >= i + k; lower keeps j <= i + k */
            int64_t edge = k > 0 && i > INT64_MAX - k ? INT64_MAX : i + k;   /* k may be huge */
            /* the first column kept (upper) or zeroed (lower) */
            int64_t cut = q->upper || edge == INT64_MAX ? edge : edge + 1;
            cut = cut < 0 ? 0 : cut > q->cols ? q->cols : cut;
            size_t z = (size_t)cut * es;
            if (q->upper) {
                memset(o, 0, z);
                memcpy(o + z, x + z, row - z);
            } else {
                memcpy(o, x, z);
                memset(o + z, 0, row - z);
            }
        }
    return BF_OK;
}
