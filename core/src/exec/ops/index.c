/* The index family's table, its shared helpers, and the element-wise
 * indexing ops: GatherElements and ScatterElements (torch.gather and
 * Tensor.scatter / scatter_add as exported). Index rules: index_impl.h. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "index_impl.h"

bf_status bf__want_index(const bf__prep *p, int i, const char *what, bf_error *err)
{
    const bf_tensor *t = p->in[i];
    if (t->dtype != BF_I64 && t->dtype != BF_I32)
        return bf__node_error(err, p->node, BF_EFORMAT, "input '%s' must be int64 or int32, got %s", what,
                              bf_dtype_name(t->dtype));
    return BF_OK;
}

bf_status bf__index_range_error(const bf__node *n, const char *what, const bf_tensor *t, int64_t j,
                                int64_t v, int axis, int64_t dim, bf_error *err)
{
    int64_t pos[BF_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        pos[d] = t->dims[d] ? j % t->dims[d] : 0;
        j = t->dims[d] ? j / t->dims[d] : 0;
    }
    char buf[96];
    return bf__node_error(err, n, BF_ERANGE, "index %lld at %s%s is out of range for axis %d of size %lld "
                          "(valid: %lld..%lld)", (long long)v, what, bf_shape_str(pos, t->ndim, buf, sizeof buf),
                          axis, (long long)dim, (long long)-dim, (long long)dim - 1);
}

bf_status bf__read_reduction(const bf__prep *p, bf_dtype dtype, bf__reduce *out, bf_error *err)
{
    const char *s;
    bf_status st = bf__attr_string(p->node, "reduction", "none", &s, err);
    if (st) return st;
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    int k = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) k = i;
    if (k < 0)
        return bf__node_error(err, p->node, BF_EINVAL, "reduction '%s' is not one of none, add, mul, max, min", s);
    if (k > 0 && p->opset < 16)
        return bf__node_error(err, p->node, BF_EINVAL, "reduction '%s' needs opset 16 (this model is opset %lld)",
                              s, (long long)p->opset);
    if (k >= BF__RED_MAX && p->opset < 18)
        return bf__node_error(err, p->node, BF_EINVAL, "reduction '%s' needs opset 18 (this model is opset %lld)",
                              s, (long long)p->opset);
    if (k > 0 && dtype != BF_F32 && dtype != BF_I64 && dtype != BF_I32)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "reduction '%s' on %s data is not supported "
                              "(float32, int64, int32 are)", s, bf_dtype_name(dtype));
    *out = (bf__reduce)k;
    return BF_OK;
}

#define REDUCE_FN(NAME, T)                                                                   \
    static void NAME(bf__reduce r, T *restrict d, const T *restrict s, int64_t n)            \
    {                                                                                        \
        switch (r) {                                                                         \
        case BF__RED_ADD: for (int64_t k = 0; k < n; k++) d[k] += s[k]; break;               \
        case BF__RED_MUL: for (int64_t k = 0; k < n; k++) d[k] *= s[k]; break;               \
        case BF__RED_MAX: for (int64_t k = 0; k < n; k++) d[k] = s[k] > d[k] ? s[k] : d[k]; break; \
        case BF__RED_MIN: for (int64_t k = 0; k < n; k++) d[k] = s[k] < d[k] ? s[k] : d[k]; break; \
        default: for (int64_t k = 0; k < n; k++) d[k] = s[k]; break;                         \
        }                                                                                    \
    }
REDUCE_FN(reduce_f32, float)
REDUCE_FN(reduce_i32, int32_t)

/* int64 add and mul wrap as two's complement, as PyTorch's do, instead of
 * being undefined behaviour in C. */
static void reduce_i64(bf__reduce r, int64_t *restrict d, const int64_t *restrict s, int64_t n)
{
    switch (r) {
    case BF__RED_ADD: for (int64_t k = 0; k < n; k++) d[k] = (int64_t)((uint64_t)d[k] + (uint64_t)s[k]); break;
    case BF__RED_MUL: for (int64_t k = 0; k < n; k++) d[k] = (int64_t)((uint64_t)d[k] * (uint64_t)s[k]); break;
    case BF__RED_MAX: for (int64_t k = 0; k < n; k++) d[k] = s[k] > d[k] ? s[k] : d[k]; break;
    case BF__RED_MIN: for (int64_t k = 0; k < n; k++) d[k] = s[k] < d[k] ? s[k] : d[k]; break;
    default: for (int64_t k = 0; k < n; k++) d[k] = s[k]; break;
    }
}

void bf__reduce_into(bf__reduce r, bf_dtype dt, void *dst, const void *src, int64_t count)
{
    switch (dt) {
    case BF_F32: reduce_f32(r, dst, src, count); break;
    case BF_I64: reduce_i64(r, dst, src, count); break;
    case BF_I32:
        if (r == BF__RED_ADD || r == BF__RED_MUL) {   /* wrap, as for int64 */
            int32_t *d = dst;
            const int32_t *s = src;
            for (int64_t k = 0; k < count; k++)
                d[k] = (int32_t)(r == BF__RED_ADD ? (uint32_t)d[k] + (uint32_t)s[k] : (uint32_t)d[k] * (uint32_t)s[k]);
        } else {
            reduce_i32(r, dst, src, count);
        }
        break;
    default: memcpy(dst, src, (size_t)count * bf_dtype_size(dt)); break;
    }
}

/* ---- GatherElements, ScatterElements ---- */

/* Both walk the index tensor and address data with it along `axis`, the
 * other dims following the index's own position. */
typedef struct elems_params {
    int axis, rank;
    bf__reduce red;                   /* ScatterElements */
    bf_dtype dtype;
    size_t esize;
    int64_t idims[BF_MAX_DIMS];       /* index (and output of GatherElements) dims */
    int64_t dstride[BF_MAX_DIMS];     /* data strides, elements */
    int64_t axis_dim;
} elems_params;
static_assert(sizeof(elems_params) <= BF__OP_PARAMS_MAX, "elems_params must fit in params");

static bf_status elems_common(bf__prep *p, int idx_in, elems_params *e, bf_error *err)
{
    const bf__node *n = p->node;
    int64_t axis;
    bf_status st = bf__attr_int(n, "axis", 0, &axis, err);
    if (!st) st = bf__want_index(p, idx_in, "indices", err);
    if (st) return st;
    const bf_tensor *x = p->in[0], *ind = p->in[idx_in];
    if (x->ndim == 0)
        return bf__node_error(err, n, BF_ESHAPE, "input 'data' is a scalar; rank >= 1 is needed");
    if ((st = bf__norm_axis(n, axis, x->ndim, &e->axis, err))) return st;
    char xs[96], is[96];
    bf_shape_str(x->dims, x->ndim, xs, sizeof xs);
    bf_shape_str(ind->dims, ind->ndim, is, sizeof is);
    if (ind->ndim != x->ndim)
        return bf__node_error(err, n, BF_ESHAPE, "indices %s and data %s must have the same rank", is, xs);
    /* beyond the axis, an index's position is a data position: it must exist */
    for (int d = 0; d < x->ndim; d++)
        if (d != e->axis && ind->dims[d] > x->dims[d])
            return bf__node_error(err, n, BF_ESHAPE, "indices %s is larger than data %s in dim %d; only "
                                  "axis %d may differ", is, xs, d, e->axis);
    e->rank = x->ndim;
    e->dtype = x->dtype;
    e->esize = bf_dtype_size(x->dtype);
    memcpy(e->idims, ind->dims, sizeof(int64_t) * (size_t)ind->ndim);
    bf__row_strides(x->ndim, x->dims, e->dstride);
    e->axis_dim = x->dims[e->axis];
    return BF_OK;
}

/* Calls body(j, data_offset) for each index element j, after checking it;
 * returns the range error of the first bad one. */
#define ELEMS_WALK(c, e, ind, what, BODY)                                                         \
    do {                                                                                          \
        int64_t idx_[BF_MAX_DIMS] = {0}, base_ = 0, total_ = bf_tensor_numel(ind);                \
        for (int64_t j = 0; j < total_; j++) {                                                    \
            int64_t v_ = bf__index_at(ind, j);                                                    \
            if (v_ < -(e)->axis_dim || v_ >= (e)->axis_dim)                                       \
                return bf__index_range_error((c)->node, what, ind, j, v_, (e)->axis, (e)->axis_dim, err); \
            if (v_ < 0) v_ += (e)->axis_dim;                                                      \
            int64_t off = base_ + v_ * (e)->dstride[(e)->axis];                                   \
            BODY;                                                                                 \
            for (int d_ = (e)->rank - 1; d_ >= 0; d_--) {                                         \
                if (d_ != (e)->axis) base_ += (e)->dstride[d_];                                   \
                if (++idx_[d_] < (e)->idims[d_]) break;                                           \
                if (d_ != (e)->axis) base_ -= (e)->dstride[d_] * (e)->idims[d_];                  \
                idx_[d_] = 0;                                                                     \
            }                                                                                     \
        }                                                                                         \
    } while (0)

static bf_status gather_elements_prepare(bf__prep *p, bf_error *err)
{
    elems_params *e = (elems_params *)p->params;
    bf_status st = bf__need_inputs(p, 2, err);
    if (!st) st = elems_common(p, 1, e, err);
    if (st) return st;
    bf__set_shape(p->out[0], p->in[0]->dtype, p->in[1]->ndim, p->in[1]->dims);
    return BF_OK;
}

static bf_status gather_elements_run(const bf__ctx *c, bf_error *err)
{
    const elems_params *e = c->params;
    const bf_tensor *ind = c->in[1];
    const unsigned char *x = c->in[0]->data;
    unsigned char *o = c->out[0]->data;
    size_t es = e->esize;
    ELEMS_WALK(c, e, ind, "indices", bf__copy_elem(o + (size_t)j * es, x + (size_t)off * es, es));
    return BF_OK;
}

static bf_status scatter_elements_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    elems_params *e = (elems_params *)p->params;
    bf_status st = bf__need_inputs(p, 3, err);
    if (!st) st = elems_common(p, 1, e, err);
    if (!st) st = bf__read_reduction(p, p->in[0]->dtype, &e->red, err);
    if (st) return st;
    const bf_tensor *x = p->in[0], *ind = p->in[1], *u = p->in[2];
    char is[96], us[96];
    if (u->dtype != x->dtype)
        return bf__node_error(err, n, BF_EFORMAT, "updates are %s but data is %s; they must match",
                              bf_dtype_name(u->dtype), bf_dtype_name(x->dtype));
    if (u->ndim != ind->ndim || memcmp(u->dims, ind->dims, sizeof(int64_t) * (size_t)u->ndim) != 0)
        return bf__node_error(err, n, BF_ESHAPE, "updates %s must have the shape of indices %s",
                              bf_shape_str(u->dims, u->ndim, us, sizeof us),
                              bf_shape_str(ind->dims, ind->ndim, is, sizeof is));
    bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
    return BF_OK;
}

static bf_status scatter_elements_run(const bf__ctx *c, bf_error *err)
{
    const elems_params *e = c->params;
    const bf_tensor *ind = c->in[1];
    const unsigned char *u = c->in[2]->data;
    unsigned char *o = c->out[0]->data;
    size_t es = e->esize, nb = bf_tensor_nbytes(c->out[0]);
    if (nb && o != c->in[0]->data) memcpy(o, c->in[0]->data, nb);
    /* duplicates under reduction none: the last one wins, as in ONNX Runtime */
    ELEMS_WALK(c, e, ind, "indices",
               bf__reduce_into(e->red, e->dtype, o + (size_t)off * es, u + (size_t)j * es, 1));
    return BF_OK;
}

const bf__op bf__ops_index[] = {
    {"GatherElements", 2, 2, 1, 1, 0, gather_elements_prepare, gather_elements_run},
    {"ScatterElements", 3, 3, 1, 1, 0, scatter_elements_prepare, scatter_elements_run},
    {"GatherND", 2, 2, 1, 1, 0, bf__gather_nd_prepare, bf__gather_nd_run},
    {"ScatterND", 3, 3, 1, 1, 0, bf__scatter_nd_prepare, bf__scatter_nd_run},
    {"OneHot", 3, 3, 1, 1, 0, bf__onehot_prepare, bf__onehot_run},
    {"NonZero", 1, 1, 1, 1, 0, bf__nonzero_prepare, bf__nonzero_run},
    {"Range", 3, 3, 1, 1, 0, bf__range_prepare, bf__range_run},
    {"Trilu", 1, 2, 1, 1, 0, bf__trilu_prepare, bf__trilu_run},
    {"Pad", 1, 4, 1, 1, 0, bf__pad_prepare, bf__pad_run},
    {"Tile", 2, 2, 1, 1, 0, bf__tile_prepare, bf__tile_run},
    {"Split", 1, 2, 1, BF__MAX_IO, 0, bf__split_prepare, bf__split_run},
    {"DepthToSpace", 1, 1, 1, 1, 0, bf__depth_to_space_prepare, bf__strided_run},
    {"SpaceToDepth", 1, 1, 1, 1, 0, bf__space_to_depth_prepare, bf__strided_run},
    {0},
};
