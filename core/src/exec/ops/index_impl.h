/* Internals of the index family (index.c, index_nd.c, index_make.c,
 * shape_pad.c, shape_split.c): ops that read or write elements at positions
 * given by data (Gather/ScatterElements, Gather/ScatterND, OneHot, NonZero),
 * or that make, pad, tile and cut tensors.
 *
 * Index tensors are int64 or int32; a position i on an axis of size s is
 * valid in [-s, s-1] and a negative one counts from the end. Every index is
 * checked before it is used: an out-of-range one is a run-time error naming
 * the node, the index and where it sits, never a read or write outside the
 * tensor. */
#ifndef BF_OPS_INDEX_IMPL_H
#define BF_OPS_INDEX_IMPL_H

#include <string.h>

#include "shape_impl.h"

/* Element j of an int64 or int32 tensor. */
static inline int64_t bf__index_at(const bf_tensor *t, int64_t j)
{
    return t->dtype == BF_I32 ? ((const int32_t *)t->data)[j] : ((const int64_t *)t->data)[j];
}

/* One element of es bytes: memcpy with a constant size for the sizes our
 * dtypes have, so that it compiles to a move rather than a call. */
static inline void bf__copy_elem(void *restrict dst, const void *restrict src, size_t es)
{
    switch (es) {
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 1: memcpy(dst, src, 1); break;
    default: memcpy(dst, src, es); break;
    }
}

/* Errors unless input i is int64 or int32; `what` names it. */
bf_status bf__want_index(const bf__prep *p, int i, const char *what, bf_error *err);
/* The run-time error for index v at flat position j of input `t` (named
 * `what`), out of range for an axis of size dim. */
bf_status bf__index_range_error(const bf__node *n, const char *what, const bf_tensor *t, int64_t j,
                                int64_t v, int axis, int64_t dim, bf_error *err);
/* The reductions of the scatter ops (attribute 'reduction'). */
typedef enum bf__reduce { BF__RED_NONE, BF__RED_ADD, BF__RED_MUL, BF__RED_MAX, BF__RED_MIN } bf__reduce;
/* Reads 'reduction' (opset 16+: none, add, mul; 18+: max, min) and checks
 * that dtype has arithmetic for it. */
bf_status bf__read_reduction(const bf__prep *p, bf_dtype dtype, bf__reduce *out, bf_error *err);
/* dst[k] = dst[k] (op) src[k] for k < count, in the dtype's arithmetic. */
void bf__reduce_into(bf__reduce r, bf_dtype dt, void *dst, const void *src, int64_t count);

bf_status bf__pad_prepare(bf__prep *p, bf_error *err);
bf_status bf__pad_run(const bf__ctx *c, bf_error *err);
bf_status bf__tile_prepare(bf__prep *p, bf_error *err);
bf_status bf__tile_run(const bf__ctx *c, bf_error *err);
bf_status bf__split_prepare(bf__prep *p, bf_error *err);
bf_status bf__split_run(const bf__ctx *c, bf_error *err);
/* a Split's params (prepared): one output, the whole input (the same bytes) */
int bf__split_one(const void *params);
bf_status bf__depth_to_space_prepare(bf__prep *p, bf_error *err);
bf_status bf__space_to_depth_prepare(bf__prep *p, bf_error *err);

bf_status bf__gather_nd_prepare(bf__prep *p, bf_error *err);
bf_status bf__gather_nd_run(const bf__ctx *c, bf_error *err);
bf_status bf__scatter_nd_prepare(bf__prep *p, bf_error *err);
bf_status bf__scatter_nd_run(const bf__ctx *c, bf_error *err);

bf_status bf__range_prepare(bf__prep *p, bf_error *err);
bf_status bf__range_run(const bf__ctx *c, bf_error *err);
bf_status bf__onehot_prepare(bf__prep *p, bf_error *err);
bf_status bf__onehot_run(const bf__ctx *c, bf_error *err);
bf_status bf__nonzero_prepare(bf__prep *p, bf_error *err);
bf_status bf__nonzero_run(const bf__ctx *c, bf_error *err);
bf_status bf__trilu_prepare(bf__prep *p, bf_error *err);
bf_status bf__trilu_run(const bf__ctx *c, bf_error *err);

#endif
