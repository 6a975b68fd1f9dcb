/* GatherND and ScatterND: index tuples address whole slices of data (the
 * exports of x[idx_a, idx_b] and of index_put_ / x[mask] = v). */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "index_impl.h"

typedef struct nd_params {
    int k;                       /* length of an index tuple */
    int batch_dims;
    bf__reduce red;
    bf_dtype dtype;
    int64_t nbatch;              /* product of the batch dims */
    int64_t ntuples;             /* index tuples per batch */
    int64_t slice;               /* elements of the slice one tuple addresses */
    int64_t dbatch;              /* data elements per batch */
    int64_t ddims[BF_MAX_DIMS];  /* data dims addressed by a tuple */
    int64_t dstride[BF_MAX_DIMS];
} nd_params;
static_assert(sizeof(nd_params) <= BF__OP_PARAMS_MAX, "nd_params must fit in params");

static bf_status nd_common(bf__prep *p, nd_params *q, int64_t batch_dims, bf_error *err)
{
    const bf__node *n = p->node;
    bf_status st = bf__want_index(p, 1, "indices", err);
    if (st) return st;
    const bf_tensor *x = p->in[0], *ind = p->in[1];
    int r = x->ndim, qr = ind->ndim;
    /* the shapes are spelled out only for an error: a detector's tail
     * prepares 180 GatherNDs an image at run time, every image of every
     * trial, and formatting them was half of these prepares */
    char xs[96], is[96];
#define ND_SHAPES() (bf_shape_str(x->dims, r, xs, sizeof xs), bf_shape_str(ind->dims, qr, is, sizeof is))
    if (r < 1 || qr < 1) {
        ND_SHAPES();
        return bf__node_error(err, n, BF_ESHAPE, "data %s and indices %s must both have rank >= 1", xs, is);
    }
    if (batch_dims < 0 || batch_dims >= qr || batch_dims >= r) {
        ND_SHAPES();
        return bf__node_error(err, n, BF_EINVAL, "batch_dims %lld must be less than the ranks of data %s and "
                              "indices %s", (long long)batch_dims, xs, is);
    }
    int b = (int)batch_dims;
    int64_t k = ind->dims[qr - 1];
    if (k < 1 || k > r - b) {
        ND_SHAPES();
        return bf__node_error(err, n, BF_ESHAPE, "the last dim of indices %s is %lld; it must be 1..%d "
                              "(data rank %d minus batch_dims %d)", is, (long long)k, r - b, r, b);
    }
    q->nbatch = 1;
    for (int d = 0; d < b; d++) {
        if (ind->dims[d] != x->dims[d]) {
            ND_SHAPES();
            return bf__node_error(err, n, BF_ESHAPE, "batch dim %d differs: indices %s, data %s", d, is, xs);
        }
        q->nbatch *= x->dims[d];
    }
#undef ND_SHAPES
    q->k = (int)k;
    q->batch_dims = b;
    q->dtype = x->dtype;
    q->ntuples = 1;
    for (int d = b; d < qr - 1; d++) q->ntuples *= ind->dims[d];
    q->slice = 1;
    for (int d = b + q->k; d < r; d++) q->slice *= x->dims[d];
    q->dbatch = 1;
    for (int d = b; d < r; d++) q->dbatch *= x->dims[d];
    for (int i = 0; i < q->k; i++) q->ddims[i] = x->dims[b + i];
    int64_t s = q->slice;
    for (int i = q->k - 1; i >= 0; i--) {
        q->dstride[i] = s;
        s *= q->ddims[i];
    }
    return BF_OK;
}

/* The data offset (in elements, within a batch) of tuple t of batch bi, or
 * -1 after setting the range error. */
static int64_t tuple_offset(const bf__ctx *c, const nd_params *q, int64_t bi, int64_t t, bf_error *err)
{
    const bf_tensor *ind = c->in[1];
    int64_t j0 = (bi * q->ntuples + t) * q->k, off = 0;
    for (int i = 0; i < q->k; i++) {
        int64_t v = bf__index_at(ind, j0 + i), dim = q->ddims[i];
        if (v < -dim || v >= dim) {
            bf__index_range_error(c->node, "indices", ind, j0 + i, v, q->batch_dims + i, dim, err);
            return -1;
        }
        off += (v < 0 ? v + dim : v) * q->dstride[i];
    }
    return off;
}

bf_status bf__gather_nd_prepare(bf__prep *p, bf_error *err)
{
    nd_params *q = (nd_params *)p->params;
    int64_t bd;
    bf_status st = bf__need_inputs(p, 2, err);
    if (!st) st = bf__attr_int(p->node, "batch_dims", 0, &bd, err);
    if (!st) st = nd_common(p, q, bd, err);
    if (st) return st;
    const bf_tensor *x = p->in[0], *ind = p->in[1];
    int64_t dims[2 * BF_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < ind->ndim - 1; d++) dims[nd++] = ind->dims[d];
    for (int d = q->batch_dims + q->k; d < x->ndim; d++) dims[nd++] = x->dims[d];
    if (nd > BF_MAX_DIMS)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "output rank %d exceeds the supported %d", nd,
                              BF_MAX_DIMS);
    if ((st = bf__check_dims(p->node, "output shape", nd, dims, err))) return st;
    bf__set_shape(p->out[0], x->dtype, nd, dims);
    return BF_OK;
}

bf_status bf__gather_nd_run(const bf__ctx *c, bf_error *err)
{
    const nd_params *q = c->params;
    size_t es = bf_dtype_size(q->dtype), row = (size_t)q->slice * es;
    const unsigned char *x = c->in[0]->data;
    unsigned char *o = c->out[0]->data;
    for (int64_t bi = 0; bi < q->nbatch; bi++)
        for (int64_t t = 0; t < q->ntuples; t++, o += row) {
            int64_t off = tuple_offset(c, q, bi, t, err);
            if (off < 0) return BF_ERANGE;
            memcpy(o, x + (size_t)(bi * q->dbatch + off) * es, row);
        }
    return BF_OK;
}

bf_status bf__scatter_nd_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    nd_params *q = (nd_params *)p->params;
    bf_status st = bf__need_inputs(p, 3, err);
    if (!st) st = nd_common(p, q, 0, err);
    if (!st) st = bf__read_reduction(p, p->in[0]->dtype, &q->red, err);
    if (st) return st;
    const bf_tensor *x = p->in[0], *ind = p->in[1], *u = p->in[2];
    if (u->dtype != x->dtype)
        return bf__node_error(err, n, BF_EFORMAT, "updates are %s but data is %s; they must match",
                              bf_dtype_name(u->dtype), bf_dtype_name(x->dtype));
    /* updates: indices.shape[:-1] + data.shape[k:] */
    int64_t want[2 * BF_MAX_DIMS];
    int nw = 0;
    for (int d = 0; d < ind->ndim - 1; d++) want[nw++] = ind->dims[d];
    for (int d = q->k; d < x->ndim; d++) want[nw++] = x->dims[d];
    char us[96], ws[96];
    if (u->ndim != nw || memcmp(u->dims, want, sizeof(int64_t) * (size_t)nw) != 0)
        return bf__node_error(err, n, BF_ESHAPE, "updates %s must have shape %s (indices.shape[:-1] + "
                              "data.shape[%d:])", bf_shape_str(u->dims, u->ndim, us, sizeof us),
                              nw <= BF_MAX_DIMS ? bf_shape_str(want, nw, ws, sizeof ws) : "(rank > 8)", q->k);
    bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
    return BF_OK;
}

bf_status bf__scatter_nd_run(const bf__ctx *c, bf_error *err)
{
    const nd_params *q = c->params;
    size_t es = bf_dtype_size(q->dtype), nb = bf_tensor_nbytes(c->out[0]);
    const unsigned char *u = c->in[2]->data;
    unsigned char *o = c->out[0]->data;
    if (nb && o != c->in[0]->data) memcpy(o, c->in[0]->data, nb);
    /* in order: with reduction none, a repeated index keeps the last update */
    for (int64_t t = 0; t < q->ntuples; t++) {
        int64_t off = tuple_offset(c, q, 0, t, err);
        if (off < 0) return BF_ERANGE;
        bf__reduce_into(q->red, q->dtype, o + (size_t)off * es, u + (size_t)(t * q->slice) * es, q->slice);
    }
    return BF_OK;
}
