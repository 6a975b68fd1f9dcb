/* The ops exec/fuse_seqops.c puts in place of ONNX sequence ops whose
 * sequence is known in structure when the model loads (the count then
 * follows from shapes when the plan is built). A plan holds tensors only:
 * each op here reads the tensors the sequence was made of. Never read from a
 * model file (the loader refuses "bf." ops).
 *
 * bf.SplitAt (X, split?, I) -> Y, attributes axis, keepdims: element I of
 *   SplitToSequence(X, split, axis, keepdims), i.e. SequenceAt of it. split
 *   (absent: pieces of 1, keepdims applies; a scalar s: pieces of s, the
 *   last shorter; a list: their sizes, which must add up to X's axis) and I
 *   (negative counts from the end) must be known when the plan is built.
 * bf.SequenceLength (X?, split?) -> int64 scalar, attributes count, axis:
 *   count when >= 0 (a list of tensors known at load); else the number of
 *   pieces SplitToSequence(X, split, axis) makes.
 * bf.Stack (T1..Tn) -> Y, attribute axis: ConcatFromSequence with
 *   new_axis 1 over SequenceConstruct(T1..Tn): the tensors, of one shape,
 *   stacked along a new axis (numpy.stack). With new_axis 0 the rewrite uses
 *   Concat itself.
 *
 * The ONNX sequence ops themselves are listed too (bitflip ops), since they
 * run in those forms; a plan that meets one in any other form refuses it,
 * naming the node and why (below). */
#include <assert.h>
#include <string.h>

#include "shape_impl.h"

typedef struct split_params {
    int64_t outer, n, start, len;
    size_t inner;               /* bytes of X after the axis */
} split_params;
static_assert(sizeof(split_params) <= BF__OP_PARAMS_MAX, "split_params must fit in params");

static int64_t int_of(const bf_tensor *t, int64_t i)
{
    return t->dtype == BF_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* The pieces SplitToSequence(X, split) makes along an axis of n: *count,
 * and piece k's start and length if k is in range (k >= 0). */
static bf_status pieces(const bf__node *nd, const bf_tensor *split, int64_t n, int64_t k, int64_t *count,
                        int64_t *start, int64_t *len, bf_error *err)
{
    if (!split) {
        *count = n, *start = k, *len = 1;
        return BF_OK;
    }
    if (!split->data || (split->dtype != BF_I64 && split->dtype != BF_I32) || split->ndim > 1)
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "split must be an integer scalar or list known when the plan is built");
    int64_t m = bf_tensor_numel(split);
    if (split->ndim == 0) {
        int64_t s = int_of(split, 0);
        if (s <= 0) return bf__node_error(err, nd, BF_ESHAPE, "split %lld must be positive", (long long)s);
        *count = n / s + (n % s != 0);
        *start = k * s;
        *len = k >= 0 && k * s + s > n ? n - k * s : s;
        return BF_OK;
    }
    int64_t sum = 0;
    for (int64_t j = 0; j < m; j++) {
        int64_t s = int_of(split, j);
        if (s < 0 || s > INT64_MAX / 4 - sum)
            return bf__node_error(err, nd, BF_ESHAPE, "split entry %lld is %lld", (long long)j, (long long)s);
        if (j == k) *start = sum, *len = s;
        sum += s;
    }
    if (sum != n)
        return bf__node_error(err, nd, BF_ESHAPE, "the split sizes add up to %lld, but the axis has %lld",
                              (long long)sum, (long long)n);
    *count = m;
    return BF_OK;
}

bf_status bf__split_at_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    split_params *q = (split_params *)p->params;
    int64_t axis_attr, keepdims, count, i;
    int axis;
    bf_status st = bf__attr_int(nd, "axis", 0, &axis_attr, err);
    if (!st) st = bf__attr_int(nd, "keepdims", 1, &keepdims, err);
    if (st) return st;
    const bf_tensor *x = p->in[0], *split = p->n_in > 1 ? p->in[1] : NULL, *it = p->n_in > 2 ? p->in[2] : NULL;
    if (!x || !it) return bf__node_error(err, nd, BF_EFORMAT, "inputs X and the position are required");
    if (x->ndim == 0) return bf__node_error(err, nd, BF_ESHAPE, "SplitToSequence of a scalar");
    if ((st = bf__norm_axis(nd, axis_attr, x->ndim, &axis, err))) return st;
    if (!it->data || (it->dtype != BF_I64 && it->dtype != BF_I32) || bf_tensor_numel(it) != 1)
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "the position must be one integer known when the plan is built");
    q->n = x->dims[axis];
    if ((st = pieces(nd, split, q->n, -1, &count, &q->start, &q->len, err))) return st;
    i = int_of(it, 0);
    if (i < -count || i >= count)
        return bf__node_error(err, nd, BF_ERANGE, "position %lld is outside the sequence of %lld tensors",
                              (long long)i, (long long)count);
    if (i < 0) i += count;
    if ((st = pieces(nd, split, q->n, i, &count, &q->start, &q->len, err))) return st;
    int64_t dims[BF_MAX_DIMS];
    int r = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d == axis && !split && !keepdims) continue;
        dims[r++] = d == axis ? q->len : x->dims[d];
    }
    bf__set_shape(p->out[0], x->dtype, r, dims);
    q->outer = 1;
    for (int d = 0; d < axis; d++) q->outer *= x->dims[d];
    q->inner = bf_dtype_size(x->dtype);
    for (int d = axis + 1; d < x->ndim; d++) q->inner *= (size_t)x->dims[d];
    return BF_OK;
}

bf_status bf__split_at_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const split_params *q = c->params;
    const unsigned char *x = c->in[0]->data;
    unsigned char *y = c->out[0]->data;
    size_t piece = (size_t)q->len * q->inner;
    for (int64_t o = 0; o < q->outer; o++, y += piece)
        if (piece) memcpy(y, x + ((size_t)(o * q->n + q->start)) * q->inner, piece);
    return BF_OK;
}

bf_status bf__seq_length_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    int64_t count, axis_attr, start, len;
    int axis;
    bf_status st = bf__attr_int(nd, "count", -1, &count, err);
    if (!st) st = bf__attr_int(nd, "axis", 0, &axis_attr, err);
    if (st) return st;
    if (count < 0) {
        const bf_tensor *x = p->n_in > 0 ? p->in[0] : NULL;
        if (!x || x->ndim == 0) return bf__node_error(err, nd, BF_EFORMAT, "input X is missing or a scalar");
        if ((st = bf__norm_axis(nd, axis_attr, x->ndim, &axis, err))) return st;
        if ((st = pieces(nd, p->n_in > 1 ? p->in[1] : NULL, x->dims[axis], -1, &count, &start, &len, err))) return st;
    }
    memcpy(p->params, &count, sizeof count);
    bf__set_shape(p->out[0], BF_I64, 0, NULL);
    return BF_OK;
}

bf_status bf__seq_length_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    memcpy(c->out[0]->data, c->params, sizeof(int64_t));
    return BF_OK;
}

typedef struct stack_params {
    int64_t outer;
    size_t inner;               /* bytes of one input after the new axis */
} stack_params;

bf_status bf__stack_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    stack_params *q = (stack_params *)p->params;
    int64_t axis_attr;
    int axis;
    bf_status st = bf__attr_int(nd, "axis", 0, &axis_attr, err);
    if (st) return st;
    if ((st = bf__need_inputs(p, p->n_in, err))) return st;
    const bf_tensor *a = p->in[0];
    if (a->ndim + 1 > BF_MAX_DIMS) return bf__node_error(err, nd, BF_EUNSUPPORTED, "rank %d is too large", a->ndim);
    for (int k = 1; k < p->n_in; k++) {
        const bf_tensor *b = p->in[k];
        int same = b->dtype == a->dtype && b->ndim == a->ndim;
        for (int d = 0; same && d < a->ndim; d++) same = a->dims[d] == b->dims[d];
        if (!same) return bf__node_error(err, nd, BF_ESHAPE, "tensor %d of the sequence differs in type or shape from "
                                         "tensor 0; ConcatFromSequence with new_axis 1 stacks tensors of one shape", k);
    }
    if ((st = bf__norm_axis(nd, axis_attr, a->ndim + 1, &axis, err))) return st;
    int64_t dims[BF_MAX_DIMS];
    for (int d = 0, s = 0; d <= a->ndim; d++) dims[d] = d == axis ? p->n_in : a->dims[s++];
    bf__set_shape(p->out[0], a->dtype, a->ndim + 1, dims);
    q->outer = 1;
    for (int d = 0; d < axis; d++) q->outer *= a->dims[d];
    q->inner = bf_dtype_size(a->dtype);
    for (int d = axis; d < a->ndim; d++) q->inner *= (size_t)a->dims[d];
    return BF_OK;
}

bf_status bf__stack_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const stack_params *q = c->params;
    unsigned char *y = c->out[0]->data;
    for (int64_t o = 0; o < q->outer; o++)
        for (int k = 0; k < c->n_in; k++, y += q->inner)
            if (q->inner) memcpy(y, (const unsigned char *)c->in[k]->data + (size_t)o * q->inner, q->inner);
    return BF_OK;
}


/* The ONNX sequence ops themselves. fuse_seqops.c has rewritten every
 * reader whose sequence it could follow, and removed the producers nothing
 * reads then; a plan that still needs one of these meets a sequence that is
 * not known in structure (carried by a Loop, read at a position that is no
 * constant, ConcatFromSequence of a split, ...): refused, naming the node. */
static bf_status seq_refuse(bf__prep *p, bf_error *err)
{
    return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                          "a plan holds tensors only, so bitflip runs sequence ops only where the sequence is known "
                          "in structure when the model loads: made in the main graph by SequenceConstruct, "
                          "SequenceEmpty, SequenceInsert or SequenceErase at constant positions, or by "
                          "SplitToSequence, and read by SequenceAt, SequenceLength or ConcatFromSequence (docs/OPS.md, "
                          "sequences); this node's sequence is not (a Loop's, a non-constant position, or "
                          "ConcatFromSequence of a split)");
}

/* A reader (or Insert / Erase) reaches prepare only when its input 0 is a
 * tensor: a sequence made by a node bitflip cannot follow refuses in that
 * node's own prepare, which comes first, and a Loop is refused at load. */
static bf_status seq_reader_refuse(bf__prep *p, bf_error *err)
{
    const bf_tensor *t = p->in[0];
    if (!t) return seq_refuse(p, err);
    char shape[96];
    bf_shape_str(t->dims, t->ndim, shape, sizeof shape);
    return bf__node_error(err, p->node, BF_EFORMAT, "input 0 is a tensor (%s %s), not a sequence",
                          bf_dtype_name(t->dtype), shape);
}

static bf_status seq_never(const bf__ctx *c, bf_error *err)
{
    return bf__node_error(err, c->node, BF_EUNSUPPORTED, "sequence op run as a step (internal error)");
}

const bf__op bf__ops_sequence[] = {
    {"ConcatFromSequence", 1, 1, 1, 1, 0, seq_reader_refuse, seq_never},
    {"SequenceAt", 2, 2, 1, 1, 0, seq_reader_refuse, seq_never},
    {"SequenceConstruct", 1, -1, 1, 1, 0, seq_refuse, seq_never},
    {"SequenceEmpty", 0, 0, 1, 1, 0, seq_refuse, seq_never},
    {"SequenceErase", 1, 2, 1, 1, 0, seq_reader_refuse, seq_never},
    {"SequenceInsert", 2, 3, 1, 1, 0, seq_reader_refuse, seq_never},
    {"SequenceLength", 1, 1, 1, 1, 0, seq_reader_refuse, seq_never},
    {"SplitToSequence", 1, 2, 1, 1, 0, seq_refuse, seq_never},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL},
};
