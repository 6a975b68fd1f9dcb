/* Internals of the shape op family (shape.c, shape_copy.c, shape_gather.c).
 *
 * These ops move bytes and never do arithmetic on them, so every kernel works
 * on elements of bf_dtype_size bytes: one implementation serves float32,
 * int64, int32 and bool alike. */
#ifndef BF_OPS_SHAPE_IMPL_H
#define BF_OPS_SHAPE_IMPL_H

#include "exec/op.h"

/* A copy whose output is contiguous and whose input is read with arbitrary
 * per-dim strides: Transpose, Slice and Expand (stride 0 broadcasts) are all
 * this. bf__strided_init drops 1-dims and merges dims the input reads
 * contiguously, so the copy loops over as few, as long rows as possible. */
typedef struct bf__strided {
    int ndim;                       /* -1: the output is empty */
    size_t esize;                   /* bytes per element */
    int64_t offset;                 /* input element read for output element 0 */
    int64_t dims[BF_MAX_DIMS];      /* output dims, row-major */
    int64_t stride[BF_MAX_DIMS];    /* input stride of each output dim, in elements */
} bf__strided;

void bf__strided_init(bf__strided *s, size_t esize, int ndim, const int64_t *dims,
                      const int64_t *stride, int64_t offset);
void bf__strided_copy(const bf__strided *s, void *out, const void *in);
/* Errors unless inputs 0..count-1 are present (an empty name in a required
 * slot reaches prepare as NULL). */
bf_status bf__need_inputs(const bf__prep *p, int count, bf_error *err);
/* Checks dims are non-negative and their product fits comfortably in
 * int64; errors name `what` and the dims. */
bf_status bf__check_dims(const bf__node *n, const char *what, int nd, const int64_t *dims,
                         bf_error *err);
/* Row-major strides of dims, in elements. */
void bf__row_strides(int ndim, const int64_t *dims, int64_t *stride);

bf_status bf__transpose_prepare(bf__prep *p, bf_error *err);
bf_status bf__slice_prepare(bf__prep *p, bf_error *err);
bf_status bf__expand_prepare(bf__prep *p, bf_error *err);
bf_status bf__strided_run(const bf__ctx *c, bf_error *err);

bf_status bf__gather_prepare(bf__prep *p, bf_error *err);
bf_status bf__gather_run(const bf__ctx *c, bf_error *err);
bf_status bf__concat_prepare(bf__prep *p, bf_error *err);
bf_status bf__concat_run(const bf__ctx *c, bf_error *err);
/* bf.RepeatInterleave (repeat_interleave.c), listed in embedding_bag.c's table of fused ops */
bf_status bf__repeat_interleave_prepare(bf__prep *p, bf_error *err);
bf_status bf__repeat_interleave_run(const bf__ctx *c, bf_error *err);
/* bf.MoEIndexAdd (moe_index_add.c), listed there too */
bf_status bf__moe_index_add_prepare(bf__prep *p, bf_error *err);
bf_status bf__moe_index_add_run(const bf__ctx *c, bf_error *err);
/* bf.SqueezeIfOne (shape.c: exec/fuse_if.c's torch.squeeze), listed there too; its run is
 * bf__run_copy, the output being the input's bytes */
bf_status bf__squeeze_if_one_prepare(bf__prep *p, bf_error *err);
bf_status bf__run_copy(const bf__ctx *c, bf_error *err);
/* bf.SplitAt, bf.SequenceLength, bf.Stack (sequence.c), listed there too */
bf_status bf__split_at_prepare(bf__prep *p, bf_error *err);
bf_status bf__split_at_run(const bf__ctx *c, bf_error *err);
bf_status bf__seq_length_prepare(bf__prep *p, bf_error *err);
bf_status bf__seq_length_run(const bf__ctx *c, bf_error *err);
bf_status bf__stack_prepare(bf__prep *p, bf_error *err);
bf_status bf__stack_run(const bf__ctx *c, bf_error *err);

#endif
