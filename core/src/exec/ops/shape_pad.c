/* Pad and Tile: outputs that repeat or surround the input (F.pad in its
 * constant, reflect and replicate modes; Tensor.repeat). Both have output
 * shapes fixed by their pads or repeats, which must be known when the plan
 * is built; hostile values are refused before anything is sized. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "index_impl.h"

/* ---- Pad ---- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE };

typedef struct pad_params {
    int rank, mode;
    int value_input;                  /* the constant comes from input 2 at run time */
    size_t esize;
    unsigned char value[8];           /* the constant otherwise: 0 */
    int64_t begin[BF_MAX_DIMS];       /* may be negative: crops */
    int64_t idims[BF_MAX_DIMS], odims[BF_MAX_DIMS], istride[BF_MAX_DIMS];
} pad_params;
static_assert(sizeof(pad_params) <= BF__OP_PARAMS_MAX, "pad_params must fit in params");

/* The pads of every dim, begins then ends, from the inputs 'pads' and
 * 'axes' (opset 18). */
static bf_status pad_read(bf__prep *p, int r, int64_t *begin, int64_t *end, bf_error *err)
{
    const bf__node *n = p->node;
    int64_t raw[2 * BF_MAX_DIMS], axes[BF_MAX_DIMS];
    int np, na = -1;
    bf_status st;
    if (p->n_in < 2 || !p->in[1]) return bf__node_error(err, n, BF_EINVAL, "input 'pads' is required");
    st = bf__read_ints(n, "pads", p->in[1], raw, 2 * BF_MAX_DIMS, &np, err);
    if (!st && p->n_in > 3 && p->in[3]) st = bf__read_ints(n, "axes", p->in[3], axes, BF_MAX_DIMS, &na, err);
    if (st) return st;
    if (na < 0) {
        na = r;
        for (int d = 0; d < r; d++) axes[d] = d;
    }
    if (np != 2 * na)
        return bf__node_error(err, n, BF_ESHAPE, "pads has %d values; it needs 2 per padded axis (%d)", np,
                              2 * na);
    for (int d = 0; d < r; d++) begin[d] = end[d] = 0;
    int seen[BF_MAX_DIMS] = {0};
    for (int i = 0; i < na; i++) {
        int ax;
        if ((st = bf__norm_axis(n, axes[i], r, &ax, err))) return st;
        if (seen[ax]++) return bf__node_error(err, n, BF_EINVAL, "axis %d appears more than once in axes", ax);
        begin[ax] = raw[i];
        end[ax] = raw[na + i];
    }
    return BF_OK;
}

bf_status bf__pad_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    pad_params *q = (pad_params *)p->params;
    const char *mode;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = bf__attr_string(n, "mode", "constant", &mode, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int r = x->ndim;
    if (!strcmp(mode, "constant")) q->mode = PAD_CONSTANT;
    else if (!strcmp(mode, "reflect")) q->mode = PAD_REFLECT;
    else if (!strcmp(mode, "edge")) q->mode = PAD_EDGE;
    else return bf__node_error(err, n, BF_EINVAL, "mode '%s' is not one of constant, reflect, edge", mode);
    q->esize = bf_dtype_size(x->dtype);
    if (q->esize == 0 || q->esize > sizeof q->value)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "input is %s; not supported", bf_dtype_name(x->dtype));
    int64_t begin[BF_MAX_DIMS], end[BF_MAX_DIMS];
    if ((st = pad_read(p, r, begin, end, err))) return st;

    memset(q->value, 0, sizeof q->value);
    q->value_input = 0;
    if (p->n_in > 2 && p->in[2] && q->mode == PAD_CONSTANT) {
        const bf_tensor *cv = p->in[2];
        if (cv->dtype != x->dtype)
            return bf__node_error(err, n, BF_EFORMAT, "constant_value is %s but data is %s; they must match",
                                  bf_dtype_name(cv->dtype), bf_dtype_name(x->dtype));
        if (bf_tensor_numel(cv) > 1)
            return bf__node_error(err, n, BF_ESHAPE, "constant_value must be a scalar, has %lld elements",
                                  (long long)bf_tensor_numel(cv));
        q->value_input = bf_tensor_numel(cv) == 1;   /* empty: the default 0 */
    }

    char xs[96];
    bf_shape_str(x->dims, r, xs, sizeof xs);
    for (int d = 0; d < r; d++) {
        int64_t dim = x->dims[d], b = begin[d], e = end[d];
        /* the pads are file data: bound them before adding */
        if (b > INT64_MAX / 64 || b < -(INT64_MAX / 64) || e > INT64_MAX / 64 || e < -(INT64_MAX / 64))
            return bf__node_error(err, n, BF_EUNSUPPORTED, "pads %lld, %lld of axis %d are too large",
                                  (long long)b, (long long)e, d);
        int64_t od = dim + b + e;
        if (od < 0)
            return bf__node_error(err, n, BF_ESHAPE, "pads %lld, %lld crop axis %d of input %s below zero",
                                  (long long)b, (long long)e, d, xs);
        if (q->mode == PAD_REFLECT && (b > 0 || e > 0) && (b >= dim || e >= dim))
            return bf__node_error(err, n, BF_EINVAL, "reflect pads %lld, %lld of axis %d must be less than its "
                                  "size %lld (input %s)", (long long)b, (long long)e, d, (long long)dim, xs);
        if (q->mode == PAD_EDGE && (b > 0 || e > 0) && dim == 0)
            return bf__node_error(err, n, BF_EINVAL, "cannot edge-pad axis %d: it is empty (input %s)", d, xs);
        q->begin[d] = b;
        q->idims[d] = dim;
        q->odims[d] = od;
    }
    if ((st = bf__check_dims(n, "output shape", r, q->odims, err))) return st;
    q->rank = r;
    bf__row_strides(r, x->dims, q->istride);
    bf__set_shape(p->out[0], x->dtype, r, q->odims);
    return BF_OK;
}

/* The input index that output index o of dim d reads; -1 for the constant. */
static inline int64_t pad_map(const pad_params *q, int d, int64_t o)
{
    int64_t i = o - q->begin[d], dim = q->idims[d];
    if (i >= 0 && i < dim) return i;
    switch (q->mode) {
    case PAD_REFLECT: return i < 0 ? -i : 2 * (dim - 1) - i;   /* pads < dim: one reflection */
    case PAD_EDGE: return i < 0 ? 0 : dim - 1;
    default: return -1;
    }
}

bf_status bf__pad_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const pad_params *q = c->params;
    size_t es = q->esize;
    unsigned char value[8];
    memcpy(value, q->value, sizeof value);
    if (q->value_input) memcpy(value, c->in[2]->data, es);
    unsigned char *o = c->out[0]->data;
    const unsigned char *x = c->in[0]->data;
    int r = q->rank;
    if (r == 0) { memcpy(o, x, es); return BF_OK; }
    int64_t total = 1, len = q->odims[r - 1], idim = q->idims[r - 1];
    for (int d = 0; d < r; d++) total *= q->odims[d];
    if (total == 0) return BF_OK;
    /* the last dim's middle: output [lo, lo + mid) reads input [ilo, ilo + mid) */
    int64_t lo = q->begin[r - 1] > 0 ? q->begin[r - 1] : 0, ilo = lo - q->begin[r - 1];
    if (lo > len) lo = len;
    int64_t mid = idim - ilo < len - lo ? idim - ilo : len - lo;
    if (mid < 0) mid = 0;
    int64_t idx[BF_MAX_DIMS] = {0};
    for (int64_t row = 0; row < total / len; row++, o += (size_t)len * es) {
        int64_t off = 0;
        int outside = 0;
        for (int d = 0; d < r - 1; d++) {
            int64_t i = pad_map(q, d, idx[d]);
            if (i < 0) { outside = 1; break; }
            off += i * q->istride[d];
        }
        if (outside) {
            for (int64_t k = 0; k < len; k++) memcpy(o + (size_t)k * es, value, es);
        } else {
            const unsigned char *xr = x + (size_t)off * es;
            for (int64_t k = 0; k < lo; k++) {
                int64_t i = pad_map(q, r - 1, k);
                memcpy(o + (size_t)k * es, i < 0 ? value : xr + (size_t)i * es, es);
            }
            if (mid) memcpy(o + (size_t)lo * es, xr + (size_t)ilo * es, (size_t)mid * es);
            for (int64_t k = lo + mid; k < len; k++) {
                int64_t i = pad_map(q, r - 1, k);
                memcpy(o + (size_t)k * es, i < 0 ? value : xr + (size_t)i * es, es);
            }
        }
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < q->odims[d]) break;
            idx[d] = 0;
        }
    }
    return BF_OK;
}

/* ---- Tile ---- */

typedef struct tile_params {
    int rank;
    size_t esize;
    int64_t idims[BF_MAX_DIMS], reps[BF_MAX_DIMS], istride[BF_MAX_DIMS], ostride[BF_MAX_DIMS];
} tile_params;
static_assert(sizeof(tile_params) <= BF__OP_PARAMS_MAX, "tile_params must fit in params");

bf_status bf__tile_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    tile_params *q = (tile_params *)p->params;
    int64_t reps[BF_MAX_DIMS], dims[BF_MAX_DIMS];
    int nr;
    bf_status st = bf__need_inputs(p, 2, err);
    if (!st) st = bf__read_ints(n, "repeats", p->in[1], reps, BF_MAX_DIMS, &nr, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int r = x->ndim;
    char xs[96], rs[96];
    if (nr != r)
        return bf__node_error(err, n, BF_ESHAPE, "repeats %s has %d values; input %s has rank %d",
                              bf_shape_str(reps, nr, rs, sizeof rs), nr, bf_shape_str(x->dims, r, xs, sizeof xs), r);
    for (int d = 0; d < r; d++) {
        if (reps[d] < 0)
            return bf__node_error(err, n, BF_EINVAL, "repeats %s has a negative value",
                                  bf_shape_str(reps, nr, rs, sizeof rs));
        /* overflow-safe: bf__check_dims bounds the product after */
        if (x->dims[d] && reps[d] > INT64_MAX / 16 / x->dims[d])
            return bf__node_error(err, n, BF_EUNSUPPORTED, "repeats %s make axis %d too large",
                                  bf_shape_str(reps, nr, rs, sizeof rs), d);
        dims[d] = x->dims[d] * reps[d];
    }
    if ((st = bf__check_dims(n, "output shape", r, dims, err))) return st;
    q->rank = r;
    q->esize = bf_dtype_size(x->dtype);
    memcpy(q->idims, x->dims, sizeof(int64_t) * (size_t)r);
    memcpy(q->reps, reps, sizeof(int64_t) * (size_t)r);
    bf__row_strides(r, x->dims, q->istride);
    bf__row_strides(r, dims, q->ostride);
    bf__set_shape(p->out[0], x->dtype, r, dims);
    return BF_OK;
}

/* Dim d of the block at out: its input rows placed once, then that block
 * copied reps[d] - 1 times after itself. Depth is the rank, at most 8. */
static void tile_dim(const tile_params *q, int d, unsigned char *o, const unsigned char *x)
{
    size_t es = q->esize;
    size_t block = (size_t)(q->idims[d] * q->ostride[d]) * es;   /* one copy of the input along d */
    if (d == q->rank - 1) {
        memcpy(o, x, block);
    } else {
        for (int64_t i = 0; i < q->idims[d]; i++)
            tile_dim(q, d + 1, o + (size_t)(i * q->ostride[d]) * es, x + (size_t)(i * q->istride[d]) * es);
    }
    for (int64_t k = 1; k < q->reps[d]; k++) memcpy(o + (size_t)k * block, o, block);
}

bf_status bf__tile_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const tile_params *q = c->params;
    if (bf_tensor_numel(c->out[0]) == 0) return BF_OK;
    if (q->rank == 0) { memcpy(c->out[0]->data, c->in[0]->data, q->esize); return BF_OK; }
    tile_dim(q, 0, c->out[0]->data, c->in[0]->data);
    return BF_OK;
}
