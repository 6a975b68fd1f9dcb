/* bf.MoEIndexAdd: the op exec/fuse_moe.c puts in place of one expert's
 * index_add in a Mixtral-style MoE that picks each expert's tokens by index
 * (torch.where(top_i == e) -> h[tok] -> expert -> * w[tok, slot] ->
 * out.index_add(0, tok, y)), which exports a NonZero whose output's shape
 * is the data. Never read from a model file (the loader refuses "bf." ops).
 *
 * bf.MoEIndexAdd (P, D, I, W) -> Y, attribute expert:
 *   P float [N, ...]: the sum so far; D float, P's shape: the expert's output
 *   computed on every row (rows are independent in bitflip: each output
 *   element of a MatMul is its own in-order chain, docs/ENGINE.md, so the
 *   selected rows hold the bits PyTorch's gathered rows get); I int64 [N, k]:
 *   the top-k expert indices; W float [N, k]: their routing weights.
 *   Y[r] = P[r] + D[r] * W[r, s] where I[r, s] == expert (the exported
 *   ScatterElements has no reduction: were a row to pick the expert twice,
 *   the last slot wins, as there), Y[r] = P[r] bit for bit elsewhere (a
 *   select, never a multiply by a 0/1 mask: PyTorch does not touch those
 *   rows, so an Inf or NaN in D on them must not reach Y). One rounded
 *   multiply, then one rounded add: PyTorch's y = expert(h) * w, then
 *   index_add's out[tok] + y (C11 without FP contraction keeps them two). */
#include <assert.h>
#include <string.h>

#include "shape_impl.h"

typedef struct moe_params {
    int64_t n, row, k, expert;
} moe_params;
static_assert(sizeof(moe_params) <= BF__OP_PARAMS_MAX, "moe_params must fit in params");

bf_status bf__moe_index_add_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    moe_params *q = (moe_params *)p->params;
    bf_status st = bf__attr_int(nd, "expert", 0, &q->expert, err);
    if (st) return st;
    const bf_tensor *pp = p->in[0], *d = p->in[1], *i = p->in[2], *w = p->in[3];
    if (!pp || !d || !i || !w) return bf__node_error(err, nd, BF_EFORMAT, "inputs P, D, I and W are required");
    if (pp->dtype != BF_F32 || d->dtype != BF_F32 || w->dtype != BF_F32 || i->dtype != BF_I64)
        return bf__node_error(err, nd, BF_EFORMAT, "P, D and W must be float and I int64");
    if (pp->ndim < 1 || d->ndim != pp->ndim || i->ndim != 2 || w->ndim != 2)
        return bf__node_error(err, nd, BF_ESHAPE, "P and D must have one rank >= 1, I and W rank 2");
    for (int k = 0; k < pp->ndim; k++)
        if (d->dims[k] != pp->dims[k])
            return bf__node_error(err, nd, BF_ESHAPE, "the expert's output D differs in shape from the sum P");
    if (i->dims[0] != pp->dims[0] || w->dims[0] != pp->dims[0] || w->dims[1] != i->dims[1])
        return bf__node_error(err, nd, BF_ESHAPE, "I and W must be [%lld, k] alike (one row per token)",
                              (long long)pp->dims[0]);
    q->n = pp->dims[0];
    q->k = i->dims[1];
    q->row = q->n ? bf_tensor_numel(pp) / q->n : 0;
    bf__set_shape(p->out[0], BF_F32, pp->ndim, pp->dims);
    return BF_OK;
}

bf_status bf__moe_index_add_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const moe_params *q = c->params;
    const float *pp = c->in[0]->data, *d = c->in[1]->data, *w = c->in[3]->data;
    const int64_t *idx = c->in[2]->data;
    float *y = c->out[0]->data;
    for (int64_t r = 0; r < q->n; r++) {
        const float *pr = pp + r * q->row, *dr = d + r * q->row;
        float *yr = y + r * q->row;
        int64_t slot = -1;
        for (int64_t s = 0; s < q->k; s++)
            if (idx[r * q->k + s] == q->expert) slot = s;
        if (slot < 0) {
            if (yr != pr) memmove(yr, pr, (size_t)q->row * sizeof *yr);
            continue;
        }
        float wt = w[r * q->k + slot];
        for (int64_t j = 0; j < q->row; j++) {
            float v = dr[j] * wt;
            yr[j] = pr[j] + v;
        }
    }
    return BF_OK;
}
