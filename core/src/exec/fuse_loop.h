/* The ONNX Loops bitflip runs as one op (fuse_loop.c). */
#ifndef BF_FUSE_LOOP_H
#define BF_FUSE_LOOP_H

#include "bitflip/error.h"
#include "model/graph.h"

/* Rewrites, in a parsed model whose ops are not bound yet, each Loop that is
 * exactly torch.onnx.export's nn.EmbeddingBag into one bf.EmbeddingBag node
 * (ops/embedding_bag.c). Other Loops stay as they are (binding then names
 * them unsupported). Fails for memory, and for an exported EmbeddingBag with
 * per_sample_weights, which it names. */
bf_status bf__fuse_loops(bf_model *m, bf_error *err);

/* For the pattern matchers here: whether n's attributes are all among the
 * names given (NULL-terminated), and an int attribute (absent: def; present
 * with another type: `bad`, never a valid value where it is used). */
int bf__attrs_within(const bf__node *n, const char *const *names);
int64_t bf__int_attr(const bf__node *n, const char *name, int64_t def, int64_t bad);
/* For the rewriters here: n becomes op_type with inputs in[0..n_in) and
 * attributes attrs[0..n_attrs), all three now owned by n; what n owned
 * before (its op type, inputs and attributes, subgraphs included) is freed. */
void bf__node_replace(bf__node *n, char *op_type, int *in, int n_in, bf__attr *attrs, size_t n_attrs);

/* fuse_seq.c, called by bf__fuse_loops: rewrites each sequence Loop that
 * is exactly torch.onnx.export's repeat_interleave over an axis of no static
 * size into one bf.RepeatInterleave node (ops/repeat_interleave.c). Fails
 * only for memory. */
bf_status bf__fuse_repeat_interleave(bf_model *m, bf_error *err);

/* fuse_seqops.c, called by bf__fuse_loops after the above: rewrites the
 * readers of sequences known in structure (SequenceAt, SequenceLength,
 * ConcatFromSequence) into tensor ops and removes the sequence ops nothing
 * reads then. Fails for memory and for a position outside a known list. */
bf_status bf__fuse_sequence_ops(bf_model *m, bf_error *err);

/* exec/fuse_moe.c: each expert's dispatch by index (NonZero, Gather,
 * index_add) of a Mixtral-style MoE as bf.MoEIndexAdd; fails only for memory. */
bf_status bf__fuse_moe_index(bf_model *m, bf_error *err);

/* exec/fuse_if.c: each If that is exactly torch.onnx.export's torch.squeeze(x, d)
 * on a dim of unknown size (Squeeze or Identity by Shape(x)[d] == 1) as one
 * bf.SqueezeIfOne node (ops/shape.c); fails only for memory. */
bf_status bf__fuse_squeeze_ifs(bf_model *m, bf_error *err);

#endif
