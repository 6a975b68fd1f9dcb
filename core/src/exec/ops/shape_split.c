/* Split (torch.split / chunk) and the block rearrangements DepthToSpace and
 * SpaceToDepth (pixel_shuffle and its inverse), which are a reshape, a
 * transpose and a reshape: a strided copy (shape_copy.c) over a 6-D view. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "index_impl.h"

/* ---- Split ---- */

typedef struct split_params {
    int n;
    int64_t outer;
    size_t unit;                      /* bytes of one step along the axis */
    int64_t dim;                      /* the input's size on the axis */
    int64_t size[BF__MAX_IO];
} split_params;
static_assert(sizeof(split_params) <= BF__OP_PARAMS_MAX, "split_params must fit in params");

bf_status bf__split_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    split_params *q = (split_params *)p->params;
    int64_t axis_attr, num = -1, sizes[BF__MAX_IO];
    int ns = -1, axis;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = bf__attr_int(n, "axis", 0, &axis_attr, err);
    if (!st && p->opset >= 18) st = bf__attr_int(n, "num_outputs", -1, &num, err);
    if (!st && p->opset < 13) st = bf__attr_ints(n, "split", sizes, BF__MAX_IO, &ns, err);
    if (!st && p->opset >= 13 && p->n_in > 1 && p->in[1])
        st = bf__read_ints(n, "split", p->in[1], sizes, BF__MAX_IO, &ns, err);
    if (st) return st;
    if (ns == 0) ns = -1;   /* an empty 'split' is as good as none */
    const bf_tensor *x = p->in[0];
    int r = x->ndim, no = p->n_out;
    if (r == 0) return bf__node_error(err, n, BF_ESHAPE, "input is a scalar; Split needs rank >= 1");
    if ((st = bf__norm_axis(n, axis_attr, r, &axis, err))) return st;
    int64_t dim = x->dims[axis];
    char xs[96];
    bf_shape_str(x->dims, r, xs, sizeof xs);
    if (ns >= 0) {
        if (num >= 0)
            return bf__node_error(err, n, BF_EINVAL, "has both input 'split' and attribute 'num_outputs'; "
                                  "give one");
        if (ns != no)
            return bf__node_error(err, n, BF_ESHAPE, "split has %d values but the node has %d outputs", ns, no);
        int64_t sum = 0;
        for (int i = 0; i < ns; i++) {
            if (sizes[i] < 0 || sizes[i] > dim)
                return bf__node_error(err, n, BF_EINVAL, "split[%d] is %lld; sizes must be 0..%lld (axis %d of "
                                      "input %s)", i, (long long)sizes[i], (long long)dim, axis, xs);
            sum += sizes[i];
        }
        if (sum != dim)
            return bf__node_error(err, n, BF_ESHAPE, "split sizes add up to %lld but axis %d of input %s has "
                                  "%lld", (long long)sum, axis, xs, (long long)dim);
    } else if (num >= 0) {
        /* opset 18: chunks of ceil(dim / n), the last one smaller */
        if (num != no)
            return bf__node_error(err, n, BF_ESHAPE, "num_outputs is %lld but the node has %d outputs",
                                  (long long)num, no);
        int64_t chunk = (dim + no - 1) / no;
        if (chunk * (no - 1) > dim)
            return bf__node_error(err, n, BF_ESHAPE, "cannot split axis %d of size %lld into %d chunks of %lld "
                                  "(input %s)", axis, (long long)dim, no, (long long)chunk, xs);
        for (int i = 0; i < no; i++) sizes[i] = i < no - 1 ? chunk : dim - chunk * (no - 1);
    } else {
        if (dim % no != 0)
            return bf__node_error(err, n, BF_ESHAPE, "axis %d of input %s (size %lld) does not split into %d "
                                  "equal parts; give input 'split'", axis, xs, (long long)dim, no);
        for (int i = 0; i < no; i++) sizes[i] = dim / no;
    }
    q->n = no;
    q->dim = dim;
    q->outer = 1;
    for (int d = 0; d < axis; d++) q->outer *= x->dims[d];
    q->unit = bf_dtype_size(x->dtype);
    for (int d = axis + 1; d < r; d++) q->unit *= (size_t)x->dims[d];
    int64_t dims[BF_MAX_DIMS];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)r);
    for (int i = 0; i < no; i++) {
        q->size[i] = sizes[i];
        dims[axis] = sizes[i];
        bf__set_shape(p->out[i], x->dtype, r, dims);
    }
    return BF_OK;
}

int bf__split_one(const void *params)
{
    const split_params *q = params;
    return q->n == 1 && q->size[0] == q->dim;
}

bf_status bf__split_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const split_params *q = c->params;
    const unsigned char *x = c->in[0]->data;
    size_t in_row = (size_t)q->dim * q->unit, col = 0;
    /* one output of it all: a plan may give it the input's place
     * (bf__copy_step), and then there is nothing to move */
    if (bf__split_one(q) && c->out[0]->data == x) return BF_OK;
    for (int i = 0; i < q->n; i++) {
        size_t row = (size_t)q->size[i] * q->unit;
        unsigned char *o = c->out[i]->data;
        if (row)
            for (int64_t b = 0; b < q->outer; b++) memcpy(o + (size_t)b * row, x + (size_t)b * in_row + col, row);
        col += row;
    }
    return BF_OK;
}

/* ---- DepthToSpace, SpaceToDepth ---- */

static bf_status block_size(bf__prep *p, int64_t *b, bf_error *err)
{
    const bf__node *n = p->node;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = bf__attr_int(n, "blocksize", 0, b, err);
    if (st) return st;
    if (!bf__node_attr(n, "blocksize"))
        return bf__node_error(err, n, BF_EINVAL, "attribute 'blocksize' is required");
    const bf_tensor *x = p->in[0];
    char xs[96];
    if (x->ndim != 4)
        return bf__node_error(err, n, BF_ESHAPE, "input %s must have rank 4 [N, C, H, W]",
                              bf_shape_str(x->dims, x->ndim, xs, sizeof xs));
    /* a block larger than the tensor cannot divide it; bounding it also
     * keeps blocksize^2 from overflowing */
    if (*b < 1 || *b > (int64_t)1 << 31)
        return bf__node_error(err, n, BF_EINVAL, "blocksize %lld must be at least 1", (long long)*b);
    return BF_OK;
}

/* Output 6-D dims and input strides for perm of the input viewed as v6. */
static void block_view(bf__prep *p, const int64_t *v6, const int *perm, const int64_t *out4)
{
    int64_t vs[6], dims[6], stride[6];
    bf__row_strides(6, v6, vs);
    for (int d = 0; d < 6; d++) {
        dims[d] = v6[perm[d]];
        stride[d] = vs[perm[d]];
    }
    const bf_tensor *x = p->in[0];
    bf__set_shape(p->out[0], x->dtype, 4, out4);
    bf__strided_init((bf__strided *)p->params, bf_dtype_size(x->dtype), 6, dims, stride, 0);
}

bf_status bf__depth_to_space_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    int64_t b;
    const char *mode;
    bf_status st = block_size(p, &b, err);
    if (!st) st = bf__attr_string(n, "mode", "DCR", &mode, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int crd = !strcmp(mode, "CRD");
    if (!crd && strcmp(mode, "DCR") != 0)
        return bf__node_error(err, n, BF_EINVAL, "mode '%s' is not DCR or CRD", mode);
    char xs[96];
    if (b > C || C % (b * b) != 0)
        return bf__node_error(err, n, BF_ESHAPE, "channels %lld of input %s do not divide by blocksize^2 = %lld",
                              (long long)C, bf_shape_str(x->dims, 4, xs, sizeof xs), (long long)(b * b));
    int64_t c = C / (b * b), out4[4] = {N, c, H * b, W * b};
    if ((st = bf__check_dims(n, "output shape", 4, out4, err))) return st;
    /* DCR: [N, b, b, c, H, W] -> [N, c, H, b, W, b]; CRD: [N, c, b, b, H, W] -> the same */
    static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crdp[6] = {0, 1, 4, 2, 5, 3};
    int64_t v_dcr[6] = {N, b, b, c, H, W}, v_crd[6] = {N, c, b, b, H, W};
    block_view(p, crd ? v_crd : v_dcr, crd ? crdp : dcr, out4);
    return BF_OK;
}

bf_status bf__space_to_depth_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    int64_t b;
    bf_status st = block_size(p, &b, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    char xs[96];
    if (b > H || b > W || H % b != 0 || W % b != 0)
        return bf__node_error(err, n, BF_ESHAPE, "height and width of input %s do not divide by blocksize %lld",
                              bf_shape_str(x->dims, 4, xs, sizeof xs), (long long)b);
    int64_t out4[4] = {N, C * b * b, H / b, W / b};
    if ((st = bf__check_dims(n, "output shape", 4, out4, err))) return st;
    /* [N, C, H/b, b, W/b, b] -> [N, b, b, C, H/b, W/b] */
    static const int perm[6] = {0, 3, 5, 1, 2, 4};
    int64_t v6[6] = {N, C, H / b, b, W / b, b};
    block_view(p, v6, perm, out4);
    return BF_OK;
}
