/* bf.EmbeddingBag: the op exec/fuse_loop.c puts in place of the ONNX Loop
 * that torch.onnx.export writes for nn.EmbeddingBag / F.embedding_bag. Never
 * read from a model file (the loader refuses "bf." ops).
 *
 * bf.EmbeddingBag (T, X, S, E, M) -> Y, attribute mode (sum, mean, max):
 *   T [R, D] float32, the table; X [N] int64/int32, the flat indices; S and
 *   E [>= M] int64/int32, each bag's start and end in X as the graph
 *   computes them (the offsets, and the offsets shifted by one with the
 *   index count after the last); M the number of bags (the Loop's trip
 *   count), known when the plan is built. Y [M, D]: row b reduces the rows
 *   of T that X[S[b]..E[b]) name.
 *
 * What the Loop body computed, step by step: S[b] and E[b] go through the
 * body's Slice, so a negative bound counts from the end and both are clamped
 * to [0, N], and an end at or before the start is an empty bag; an index
 * goes through its Gather, so -R..R-1 are valid (negative ones count from the
 * end) and anything else is a run-time error naming the index, as for Gather.
 * Where the Loop's ReduceMean and ReduceMax give NaN and -inf for an empty
 * bag, PyTorch gives 0, and a fault campaign has to see what the PyTorch
 * model does: empty bags are 0 in every mode. The arithmetic is PyTorch's
 * CPU kernel's: sums from +0 in index order, a mean is the sum divided by
 * the count, and max takes a bag's first row and then each element only
 * where it is greater (so a NaN sticks only when it comes first). */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "exec/op.h"
#include "shape_impl.h"
#include "exec/step_access.h"

enum { MODE_SUM, MODE_MEAN, MODE_MAX };

typedef struct ebag_params {
    int mode;
    int x_i32, s_i32, e_i32;   /* X, S, E are int32 rather than int64 */
    int64_t bags, rows, dim, n;
} ebag_params;
static_assert(sizeof(ebag_params) <= BF__OP_PARAMS_MAX, "ebag_params must fit in params");

static bf_status want_ints(const bf__prep *p, int i, const char *what, bf_error *err)
{
    const bf_tensor *t = p->in[i];
    if (!t)
        return bf__node_error(err, p->node, BF_EFORMAT, "input %d (%s) is missing", i, what);
    if (t->dtype != BF_I64 && t->dtype != BF_I32)
        return bf__node_error(err, p->node, BF_EFORMAT, "input %d (%s) must be int64 or int32, got %s", i, what,
                              bf_dtype_name(t->dtype));
    if (t->ndim != 1)
        return bf__node_error(err, p->node, BF_ESHAPE, "input %d (%s) must have rank 1, got rank %d", i, what,
                              t->ndim);
    return BF_OK;
}

static bf_status ebag_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    ebag_params *q = (ebag_params *)p->params;
    const char *mode;
    bf_status st = bf__want_f32(p, 0, "table", err);
    if (!st) st = bf__attr_string(n, "mode", "sum", &mode, err);
    if (!st) st = want_ints(p, 1, "indices", err);
    if (!st) st = want_ints(p, 2, "bag starts", err);
    if (!st) st = want_ints(p, 3, "bag ends", err);
    if (st) return st;
    if (strcmp(mode, "sum") == 0) q->mode = MODE_SUM;
    else if (strcmp(mode, "mean") == 0) q->mode = MODE_MEAN;
    else if (strcmp(mode, "max") == 0) q->mode = MODE_MAX;
    else return bf__node_error(err, n, BF_EFORMAT, "mode '%s'; sum, mean or max", mode);
    const bf_tensor *t = p->in[0], *m = p->in[4];
    if (t->ndim != 2)
        return bf__node_error(err, n, BF_ESHAPE, "the table must have rank 2 ([rows, dim]), got rank %d", t->ndim);
    if (!m || !m->data || bf_tensor_numel(m) != 1 || (m->dtype != BF_I64 && m->dtype != BF_I32))
        return bf__node_error(err, n, BF_EUNSUPPORTED,
                              "the number of bags (the exported Loop's trip count) must be one integer known when "
                              "the plan is built, as torch.onnx.export computes it from input shapes");
    int64_t bags = m->dtype == BF_I64 ? *(const int64_t *)m->data : *(const int32_t *)m->data;
    if (bags < 0)
        return bf__node_error(err, n, BF_ESHAPE, "the number of bags is %lld; it cannot be negative", (long long)bags);
    if (p->in[2]->dims[0] < bags || p->in[3]->dims[0] < bags)
        return bf__node_error(err, n, BF_ESHAPE, "%lld bags, but %lld bag starts and %lld bag ends; one of each per "
                              "bag is needed", (long long)bags, (long long)p->in[2]->dims[0],
                              (long long)p->in[3]->dims[0]);
    q->bags = bags;
    q->rows = t->dims[0];
    q->dim = t->dims[1];
    q->n = p->in[1]->dims[0];
    q->x_i32 = p->in[1]->dtype == BF_I32;
    q->s_i32 = p->in[2]->dtype == BF_I32;
    q->e_i32 = p->in[3]->dtype == BF_I32;
    int64_t dims[2] = {bags, q->dim};
    bf__set_shape(p->out[0], BF_F32, 2, dims);
    return BF_OK;
}

static inline int64_t int_at(const void *data, int i32, int64_t i)
{
    return i32 ? ((const int32_t *)data)[i] : ((const int64_t *)data)[i];
}

/* A Slice bound on an axis of n: negative counts from the end, then clamped. */
static inline int64_t slice_bound(int64_t v, int64_t n)
{
    if (v < 0) v += n;
    return v < 0 ? 0 : v > n ? n : v;
}

static bf_status ebag_run(const bf__ctx *c, bf_error *err)
{
    const ebag_params *q = c->params;
    const float *table = c->in[0]->data;
    const void *x = c->in[1]->data, *s = c->in[2]->data, *e = c->in[3]->data;
    float *y = c->out[0]->data;
    const int64_t dim = q->dim;
    for (int64_t b = 0; b < q->bags; b++) {
        float *restrict o = y + b * dim;
        int64_t lo = slice_bound(int_at(s, q->s_i32, b), q->n), hi = slice_bound(int_at(e, q->e_i32, b), q->n);
        for (int64_t d = 0; d < dim; d++) o[d] = 0.0f;
        for (int64_t j = lo; j < hi; j++) {
            int64_t r = int_at(x, q->x_i32, j);
            if (r < -q->rows || r >= q->rows)
                return bf__node_error(err, c->node, BF_ERANGE,
                                      "index %lld at indices[%lld] (bag %lld) is out of range for the table's "
                                      "%lld rows (valid: %lld..%lld)", (long long)r, (long long)j, (long long)b,
                                      (long long)q->rows, (long long)-q->rows, (long long)q->rows - 1);
            if (r < 0) r += q->rows;
            const float *restrict w = (const float *)bf__row_at(c, (const unsigned char *)table,
                                                                (size_t)(r * dim) * sizeof(float),
                                                                (size_t)dim * sizeof(float));
            if (q->mode != MODE_MAX) {
                for (int64_t d = 0; d < dim; d++) o[d] += w[d];
            } else if (j == lo) {
                for (int64_t d = 0; d < dim; d++) o[d] = w[d];
            } else {
                for (int64_t d = 0; d < dim; d++)
                    if (w[d] > o[d]) o[d] = w[d];
            }
        }
        if (q->mode == MODE_MEAN && hi > lo)
            for (int64_t d = 0; d < dim; d++) o[d] /= (float)(hi - lo);
    }
    return BF_OK;
}

int bf__row_lookup(const bf__step *s)
{
    return bf__gather_axis(s) == 0 || s->node->op->run == ebag_run;
}

const bf__op bf__ops_fused[] = {
    {"bf.EmbeddingBag", 5, 5, 1, 1, 0, ebag_prepare, ebag_run},
    /* exec/fuse_seq.c: the exported repeat_interleave over a dynamic axis */
    {"bf.RepeatInterleave", 2, 3, 1, 1, 0, bf__repeat_interleave_prepare, bf__repeat_interleave_run},
    /* exec/fuse_moe.c: an MoE expert's index_add of its tokens picked by NonZero */
    {"bf.MoEIndexAdd", 4, 4, 1, 1, 0, bf__moe_index_add_prepare, bf__moe_index_add_run},
    /* exec/fuse_seqops.c: sequence ops whose sequence is known in structure (ops/sequence.c) */
    {"bf.SplitAt", 3, 3, 1, 1, 0, bf__split_at_prepare, bf__split_at_run},
    {"bf.SequenceLength", 0, 2, 1, 1, 1, bf__seq_length_prepare, bf__seq_length_run},
    {"bf.Stack", 1, -1, 1, 1, 0, bf__stack_prepare, bf__stack_run},
    /* exec/fuse_if.c: torch.squeeze(x, axis) exported as an If on the axis' size */
    {"bf.SqueezeIfOne", 1, 1, 1, 1, 0, bf__squeeze_if_one_prepare, bf__run_copy},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL},
};
