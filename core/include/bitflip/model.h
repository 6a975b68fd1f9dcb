/* bitflip — model: an ONNX graph, loaded and checked once, then immutable.
 *
 * Loading unpacks the protobuf (protobuf-c, generated from Debian's onnx.proto),
 * converts it to bitflip's own graph and tensors, checks it (every op supported,
 * every input defined, no cycle, every size and count sane) and frees the
 * protobuf. A model is read-only after loading and may be shared by threads.
 *
 * Parameters are what fault campaigns corrupt: the float initializers (weights,
 * biases, embedding tables, quantization scales) and, in quantized models, the
 * int8/uint8 initializers that quant ops read as stored weights (input x of
 * DequantizeLinear, the A/B and x/w inputs of MatMulInteger, ConvInteger,
 * QLinearMatMul and QLinearConv) or as zero points. Other integer initializers
 * (shapes, indices) are constants, not parameters. */
#ifndef BITFLIP_MODEL_H
#define BITFLIP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/limits.h"
#include "bitflip/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bf_model bf_model;

/* A graph input or output as declared. A dimension that the file leaves
 * symbolic (e.g. "batch") is -1 in dims with its name in dim_names. */
typedef struct bf_value_info {
    const char *name;
    bf_dtype dtype;
    int ndim;
    int64_t dims[BF_MAX_DIMS];
    const char *dim_names[BF_MAX_DIMS];   /* NULL where the dim is fixed */
} bf_value_info;

/* A parameter. Its identity is the ONNX initializer name (tensor->name):
 * faults, specs and results name it so. torch.onnx.export renames what it
 * computes ("onnx::Conv_59" for a Conv weight with a BatchNorm folded in,
 * "onnx::MatMul_308" for a transposed Linear weight), so files whose
 * producer is PyTorch also get the name the user knows, recovered from the
 * module scope in the reading node's name ("/layer1/layer1.0/conv1/Conv")
 * and the input it feeds (docs/EXPORT.md):
 *   torch_name  "layer1.0.conv1.weight"; the state_dict key itself when the
 *               initializer kept it; only the module path ("layers.0.self_attn")
 *               when the input does not say which parameter it is; NULL when
 *               nothing can be recovered (other exporters, a tensor read by
 *               several modules)
 *   torch_note  how the tensor differs from that PyTorch parameter, or NULL:
 *               "a BatchNorm folded in", "transposed", gate reordering ... */
typedef struct bf_param_info {
    const bf_tensor *tensor;     /* name, shape and the model's values (of `dtype`) */
    const char *reader_op;       /* op type of the first node reading it, or NULL */
    const char *reader_node;     /* that node's name (may be empty) */
    int is_embedding;            /* read as the data input of a Gather (or of an exported
                                  * EmbeddingBag, bf.EmbeddingBag): a lookup table */
    bf_dtype dtype;              /* BF_F32, or BF_I8 / BF_U8 for a quantized model's stored integers */
    const char *torch_name;
    const char *torch_note;
    /* the type the file stores a float parameter in when it is not float32:
     * "float16" (a half-precision export), "bfloat16" or "float64"; NULL for
     * float32. bitflip computes in float32 on the same values; a campaign's
     * faults strike fp32 bits unless its spec says "representation": "fp16"
     * (or "bf16"), docs/CAMPAIGNS.md */
    const char *stored;
} bf_param_info;

bf_status bf_model_load_file(const char *path, bf_model **out, bf_error *err);

/* The ONNX ops (default domain) bitflip runs, sorted by name: up to `max`
 * of them into names (static strings); returns how many there are. */
size_t bf_supported_ops(const char **names, size_t max);
/* `label` names the source in error messages (a file name, an upload id). */
bf_status bf_model_load_buffer(const void *buf, size_t len, const char *label, bf_model **out,
                               bf_error *err);
/* The same with the parser limits of `lim` (NULL or 0 fields: defaults;
 * bitflip/limits.h). The functions above use the defaults. A file past a
 * limit is refused with BF_ELIMIT, before protobuf-c unpacks it. */
bf_status bf_model_load_file_opts(const char *path, const bf_load_limits *lim, bf_model **out,
                                  bf_error *err);
bf_status bf_model_load_buffer_opts(const void *buf, size_t len, const char *label,
                                    const bf_load_limits *lim, bf_model **out, bf_error *err);
void bf_model_free(bf_model *model);

/* A model like `base` whose symbolic input dimensions past dim 0 named in
 * names[0..n) (the ONNX dim_param: "sequence", "past_sequence") have the
 * sizes given (>= 0): a language model exported with dynamic sequence axes
 * then plans like any other, at one sequence length, wherever plans are
 * made by batch size alone. bf_plan_dims_from reads the names and sizes
 * from the shapes that will be fed. It shares everything with base, which
 * must outlive it; free it with bf_model_free. A name no input has as a
 * symbolic dimension past dim 0, or a negative size, is an error naming it. */
bf_status bf_model_with_dims(const bf_model *base, const char *const *names, const int64_t *sizes, size_t n,
                             bf_model **out, bf_error *err);

struct bf_dataset;   /* bitflip/dataset.h */

/* What `bitflip eval`, `bitflip run` and bitflipd's workers do with a model
 * and its eval set: when graph inputs have symbolic dims past the batch (a
 * language model's sequence axis, a KV cache's past length), *model becomes
 * bf_model_with_dims of it at the eval set's sizes (bf_plan_dims_from over
 * the eval set's tensors of the inputs' names), which owns the model it
 * replaces: bf_model_free of it frees both. A name shared by several inputs
 * must get one size from all of them (BF_ESHAPE names the input). A graph
 * that takes one sample per call ([3, H, W] against the eval set's
 * [N, 3, H, W]) is sized from the eval tensors' dims past N. Left as
 * it is when nothing is symbolic, or when an input has no tensor of its
 * rank in the eval set (evaluation then names the tensor). */
bf_status bf_model_bind_dims(bf_model **model, const struct bf_dataset *ds, bf_error *err);

int64_t bf_model_opset(const bf_model *model);
const char *bf_model_producer(const bf_model *model);      /* e.g. "pytorch 1.13.0" */

size_t bf_model_num_inputs(const bf_model *model);
const bf_value_info *bf_model_input(const bf_model *model, size_t i);
size_t bf_model_num_outputs(const bf_model *model);
const bf_value_info *bf_model_output(const bf_model *model, size_t i);

size_t bf_model_num_nodes(const bf_model *model);
const char *bf_model_node_op(const bf_model *model, size_t i);
const char *bf_model_node_name(const bf_model *model, size_t i);

/* Exported patterns that loading runs as one op, the way PyTorch computes
 * them (docs/OPS.md, "Fused patterns"): for kind i = 0, 1, ... its name
 * ("LayerNorm", "GELU", "GELU (tanh)", "HardSwish", "GroupNorm"), how many of them the
 * model had, and the fewest and most ONNX nodes (Constant nodes aside) one
 * of them was written with; NULL past the last kind. Loading with
 * bf_load_limits.no_fuse leaves every count 0. */
const char *bf_model_fusion(const bf_model *model, size_t i, size_t *count, size_t *min_nodes,
                            size_t *max_nodes);
/* Which rule chose the patterns fused: "record" (the file carries
 * bitflip.export's record of the kernels PyTorch ran, metadata_props
 * "bitflip.kernels": only those were fused; *calls: its kernel calls,
 * *unrecorded: patterns left as exported because PyTorch ran them op by op),
 * "pattern" (no record: every pattern fused), "off" (no_fuse). */
const char *bf_model_fusion_rule(const bf_model *model, size_t *calls, size_t *unrecorded);
/* How many nodes normalise with the statistics of the batch they are given
 * (a BatchNormalization exported in training mode: opset 14's
 * training_mode = 1, or more than one output before): with any, every
 * sample's outputs depend on which samples share its batch, as in PyTorch
 * with the same batches. */
size_t bf_model_batch_statistics(const bf_model *model);
/* The order among equal values the model was loaded with
 * (bf_load_limits.tie_order), where it decides something: "onnx" or
 * "pytorch" when a node of the model (or of a subgraph) is a TopK or a
 * NonMaxSuppression; NULL when none is, as no output then depends on it.
 * What results, trial records, `bitflip plan` and `bitflip eval --json`
 * record, so that a run can be repeated as it ran (docs/OPS.md, "Ties"). */
const char *bf_model_tie_order(const bf_model *model);

size_t bf_model_num_params(const bf_model *model);
const bf_param_info *bf_model_param(const bf_model *model, size_t i);
/* Index of the parameter called `name`, or -1. */
int64_t bf_model_find_param(const bf_model *model, const char *name);
/* Id of the value (graph input, node output or initializer) called `name`,
 * or -1: what bf_value_fault and bf_plan_value take. */
int64_t bf_model_find_value(const bf_model *model, const char *name);
/* Total number of elements over all parameters (fp32 and integer). */
int64_t bf_model_param_elements(const bf_model *model);

#ifdef __cplusplus
}
#endif
#endif
