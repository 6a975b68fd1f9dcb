/* bf.RepeatInterleave: the op exec/fuse_seq.c puts in place of the sequence
 * Loop that torch.onnx.export writes for torch.repeat_interleave when the
 * repeated axis has no static size (grouped-query attention's
 * repeat_interleave(k, n_rep, dim=1) on a dynamic head axis). Never read
 * from a model file (the loader refuses "bf." ops).
 *
 * bf.RepeatInterleave (X, R, M) -> Y, attribute axis:
 *   X any dtype; R int64/int32 of rank 0 or 1, one count per index of X's
 *   axis (the exporter expands a scalar repeat to that length; without M,
 *   one count serves every index, as the unrolled form's Expand broadcasts
 *   it), known when
 *   the plan is built, every count >= 0; M (optional: absent in the form
 *   the exporter unrolls when the axis has a static size) the Loop's trip
 *   count, known when the plan is built and equal to R's length. Y is X with index i of the
 *   axis repeated R[i] times, in order: torch.repeat_interleave(X, R, axis).
 *
 * The exported Loop, read by the ONNX spec, gives another shape than
 * PyTorch when a dimension after the axis is dynamic too (its Reshape
 * copies dimension k of the unsqueezed slice, one place off: issue 30);
 * the values are PyTorch's in the same order either way. bitflip computes
 * what the user's PyTorch model computes, which is this op. */
#include <assert.h>
#include <string.h>

#include "shape_impl.h"
#include "exec/step_access.h"

typedef struct rint_params {
    int r_i32;            /* R is int32 rather than int64 */
    int one;              /* R holds one count, for every index */
    int64_t outer;        /* product of X's dims before the axis */
    int64_t n;            /* X's axis length: R's length */
    size_t row;           /* bytes of X after the axis: the unit copied */
} rint_params;
static_assert(sizeof(rint_params) <= BF__OP_PARAMS_MAX, "rint_params must fit in params");

static int64_t count_at(const bf_tensor *r, int i32, int64_t i)
{
    return i32 ? ((const int32_t *)r->data)[i] : ((const int64_t *)r->data)[i];
}

/* The trip count M: known, one integer, equal to n. */
static bf_status check_trips(const bf__prep *p, int64_t n, bf_error *err)
{
    const bf_tensor *m = p->in[2];
    if (!m || !m->data || (m->dtype != BF_I64 && m->dtype != BF_I32) || bf_tensor_numel(m) != 1)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                              "the repeat_interleave Loop's trip count must be one integer known when the plan is "
                              "built (it follows from input shapes in exported graphs)");
    int64_t trips = count_at(m, m->dtype == BF_I32, 0);
    if (trips != n)
        return bf__node_error(err, p->node, BF_ESHAPE,
                              "the repeat_interleave Loop runs %lld times but the repeated axis has %lld indices",
                              (long long)trips, (long long)n);
    return BF_OK;
}

bf_status bf__repeat_interleave_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    rint_params *q = (rint_params *)p->params;
    int64_t axis_attr;
    int axis;
    bf_status st = bf__attr_int(nd, "axis", 0, &axis_attr, err);
    if (st) return st;
    const bf_tensor *x = p->in[0], *r = p->in[1];
    if (!x || !r) return bf__node_error(err, nd, BF_EFORMAT, "inputs X and repeats are required");
    if (x->ndim == 0) return bf__node_error(err, nd, BF_ESHAPE, "input X is a scalar; the repeated axis needs rank >= 1");
    if ((st = bf__norm_axis(nd, axis_attr, x->ndim, &axis, err))) return st;
    if (r->dtype != BF_I64 && r->dtype != BF_I32)
        return bf__node_error(err, nd, BF_EFORMAT, "repeats must be int64 or int32, got %s", bf_dtype_name(r->dtype));
    if (r->ndim > 1) return bf__node_error(err, nd, BF_ESHAPE, "repeats must have rank 0 or 1, got rank %d", r->ndim);
    if (!r->data)
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "repeats must be known when the plan is built (a plan has static shapes, and the "
                              "output's length along axis %d is their sum)", axis);
    q->n = x->dims[axis];
    int looped = p->n_in > 2 && p->in[2];
    /* one repeat for every index: the unrolled form's Expand broadcasts it so */
    q->one = !looped && bf_tensor_numel(r) == 1;
    if (bf_tensor_numel(r) != q->n && !q->one)
        return bf__node_error(err, nd, BF_ESHAPE, "%lld repeats for an axis of %lld indices",
                              (long long)bf_tensor_numel(r), (long long)q->n);
    if (looped && (st = check_trips(p, q->n, err))) return st;
    q->r_i32 = r->dtype == BF_I32;
    int64_t total = 0;
    for (int64_t i = 0; i < q->n; i++) {
        int64_t c = count_at(r, q->r_i32, q->one ? 0 : i);
        if (c < 0 || c > INT64_MAX / 4 - total)
            return bf__node_error(err, nd, BF_ESHAPE, "repeat %lld of index %lld is negative or too large",
                                  (long long)c, (long long)i);
        total += c;
    }
    int64_t dims[BF_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) dims[d] = d == axis ? total : x->dims[d];
    if ((st = bf__check_dims(nd, "output shape", x->ndim, dims, err))) return st;
    bf__set_shape(p->out[0], x->dtype, x->ndim, dims);
    q->outer = 1;
    for (int d = 0; d < axis; d++) q->outer *= x->dims[d];
    q->row = bf_dtype_size(x->dtype);
    for (int d = axis + 1; d < x->ndim; d++) q->row *= (size_t)x->dims[d];
    return BF_OK;
}

bf_status bf__repeat_interleave_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const rint_params *q = c->params;
    const bf_tensor *r = c->in[1];
    const unsigned char *x = c->in[0]->data;
    unsigned char *y = c->out[0]->data;
    for (int64_t o = 0; o < q->outer; o++)
        for (int64_t i = 0; i < q->n; i++, x += q->row)
            for (int64_t k = count_at(r, q->r_i32, q->one ? 0 : i); k > 0; k--, y += q->row) memcpy(y, x, q->row);
    return BF_OK;
}
