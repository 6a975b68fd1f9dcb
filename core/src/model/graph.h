/* The model's graph after conversion from ONNX: our own values, nodes and
 * attributes. Built once by onnx_load.c (converting with onnx_convert.c,
 * onnx_init.c and onnx_subgraph.c), read-only afterwards. */
#ifndef BF_GRAPH_H
#define BF_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/model.h"

struct bf__op;

#define BF__MAX_IO 128         /* inputs or outputs per node: Concat may have many (SSD and SSDlite concatenate the 90 classes of COCO) */

typedef enum bf__attr_type {
    BF__ATTR_FLOAT = 1,
    BF__ATTR_INT,
    BF__ATTR_STRING,
    BF__ATTR_TENSOR,
    BF__ATTR_FLOATS,
    BF__ATTR_INTS,
    BF__ATTR_STRINGS,
    BF__ATTR_OTHER,      /* sparse tensors, type protos, graphs inside subgraphs: kept for
                          * the error only */
    BF__ATTR_GRAPH       /* a subgraph of a main-graph node (a Loop's body): see bf__subgraph */
} bf__attr_type;

struct bf__subgraph;

typedef struct bf__attr {
    char *name;
    bf__attr_type type;
    float f;
    int64_t i;
    char *s;             /* STRING */
    size_t n;            /* count of ints / floats / strings */
    int64_t *ints;
    float *floats;
    char **strings;
    bf_tensor *t;        /* TENSOR: owned, data owned */
    struct bf__subgraph *g;   /* GRAPH: owned */
} bf__attr;

typedef enum bf__value_kind {
    BF__VAL_INPUT = 1,   /* graph input fed by the caller */
    BF__VAL_PARAM,       /* the fault surface: a float initializer, or an int8/uint8
                          * one read as the weights or zero point of a quant op */
    BF__VAL_CONST,       /* any other initializer */
    BF__VAL_NODE         /* produced by a node */
} bf__value_kind;

typedef struct bf__value {
    char *name;
    bf__value_kind kind;
    int producer;        /* node index for BF__VAL_NODE, else -1 */
    int64_t index;       /* graph input index, param index or const index */
    bf_tensor *init;     /* PARAM / CONST: the tensor (data owned by the model) */
    /* exec/fuse.c: 1 + the value whose node now computes this one inside a
     * fused op (its producer removed: producer -1); 0 for every other value */
    int fused_into;
    /* an initializer stored as FLOAT16, BFLOAT16 or DOUBLE: that type's name
     * (bf_param_info.stored), else NULL */
    const char *stored;
} bf__value;

typedef struct bf__node {
    char *name;
    char *op_type;
    const struct bf__op *op;
    int n_in, n_out;
    int *in;             /* value indices; -1 for an omitted optional input */
    int *out;            /* value indices; -1 for an omitted optional output */
    size_t n_attrs;
    bf__attr *attrs;
} bf__node;

/* The exported patterns exec/fuse.c runs as one op (bf_model_fusion). */
#define BF__FUSE_KINDS 5
#define BF__KERNELS_KEY "bitflip.kernels"
#define BF__KERNELS_MAX (1 << 20)   /* bytes of that record: 1 MiB */
#define BF__KERNELS_LINES 65536     /* kernel calls in it */
enum { BF__FUSE_RULE_OFF, BF__FUSE_RULE_PATTERN, BF__FUSE_RULE_RECORD };
/* A graph-valued attribute of a node of the main graph (a Loop's body), kept
 * so that exec/fuse_loop.c can recognise the loops bitflip runs as one op,
 * and exec/plan_sub.c can run If and Loop.
 * Its nodes are bf__nodes (op NULL) whose in/out hold references: r >= 0 is
 * value r of the main graph, read from the enclosing scope; r <= -2 is the
 * subgraph's own value BF__SUB_LOCAL(r); -1 an omitted input. Graph
 * attributes of its nodes are kept too (see n_implicit below), as deep as
 * the loader's graph-depth limit (bf_load_limits.max_graph_depth) allows,
 * which bounds every walk over them. */
typedef struct bf__subgraph {
    size_t n_locals;
    char **names;            /* per own value: its name (inputs, node outputs, initializers) */
    bf_tensor **inits;       /* per own value: its initializer, or NULL */
    int n_in, n_out;
    int *in;                 /* own values fed by the op each iteration (a Loop: iteration, cond, ...) */
    int *out;                /* references (either kind) of its outputs */
    size_t n_nodes;
    bf__node *nodes;         /* in file order */
    /* A subgraph of a subgraph's node (an If in an If's branch, as
     * torchvision's batched_nms exports): its nodes' graph attributes are
     * kept too, and what such a nested subgraph reads of its parent
     * subgraph's own values are its implicit locals: implicit_local[k] is
     * set, before it runs, from the parent's value implicit_ref[k] (a
     * reference in the parent's terms). Values of the main graph are read
     * directly (r >= 0) at any depth; those of a grandparent are not kept. */
    int n_implicit;
    int *implicit_local, *implicit_ref;
} bf__subgraph;

#define BF__SUB_REF(local) (-(local) - 2)
#define BF__SUB_LOCAL(ref) (-(ref) - 2)

struct bf_model {
    char *label;
    char *producer;
    int64_t opset;
    /* the large initializers' data (base/warena.h); NULL: all on the heap.
     * Read-only once loaded. A derived model uses its base's. */
    struct bf__warena *warena;
    /* the products' weights packed once (base/wpack.h), shared by every
     * plan; NULL: none kept. A derived model uses its base's. */
    struct bf__wpack *wpack;

    size_t n_values;
    bf__value *values;

    size_t n_nodes;
    bf__node *nodes;
    int *order;          /* topological order of node indices */

    size_t n_inputs, n_outputs;
    bf_value_info *inputs, *outputs;
    int *input_vals, *output_vals;   /* value index of each graph input / output */

    size_t n_params;
    bf_param_info *params;
    int *param_vals;
    int64_t param_elements;
    /* per parameter: 1 for a zero point (an integer read only as a quant op's
     * zero point), which campaigns leave out unless asked */
    unsigned char *param_zp;

    /* exec/fuse.c: per pattern kind, how many were fused and the fewest and
     * most nodes (Constant feeders aside) one of them had */
    size_t fused[BF__FUSE_KINDS], fused_min[BF__FUSE_KINDS], fused_max[BF__FUSE_KINDS];
    /* model/onnx_meta.c: metadata_props "bitflip.kernels" as stored, NULL if
     * absent; exec/fuse.c: which rule decided (BF__FUSE_RULE_*), how many
     * patterns the record left unfused, and the record's kernel calls */
    char *kernels;
    int fuse_rule;
    size_t fuse_unrecorded, n_kernel_calls;

    /* A model derived from `base` by mitigate.c (nodes inserted): it shares
     * the base's names, attributes, tensors and parameter tables and owns
     * only its arrays and what `owned` lists. The base outlives it. */
    const struct bf_model *base;
    int owns_base;       /* bf_model_bind_dims: freeing this model frees its base */
    /* bf__model_per_call: every input's dim 0 is a batch of one, and the
     * graph takes one eval-set sample per call, fed as that batch of one (a
     * detector exported as [1, 3, H, W] whose outputs' sizes are data) */
    int per_call;
    /* bf_load_limits.tie_order: BF_TIE_ORDER_ONNX or _PYTORCH */
    int tie_order;
    void **owned;
    size_t n_owned, cap_owned;
};

/* model_dims.c: a derived model (see `base`) sharing everything with base,
 * with no tables of its own yet (values, nodes, order, output_vals NULL,
 * nothing owned), for the caller to fill; NULL for memory. Freed with
 * bf_model_free at any point of the filling. */
bf_model *bf__model_derive_shell(const bf_model *base);

/* *data = 1 when a graph output depends on a selection whose size is data
 * (NonZero, NonMaxSuppression, Unique, Compress, or an If or Loop holding
 * one), as a detector's boxes do. */
bf_status bf__model_data_shaped(const bf_model *m, int *data, bf_error *err);
/* A model like base (derived: base must outlive it) whose inputs' dim 0 is
 * 1, symbolic or not, with per_call set: an evaluator feeds it one eval-set
 * sample per run, as [1, ...]. */
bf_status bf__model_per_call(const bf_model *base, bf_model **out, bf_error *err);

/* Whether parameter p is a zero point (see param_zp). */
int bf__param_is_zero_point(const bf_model *m, size_t p);
/* 1: parameter p's data lives in the weights arena (its model's, or its
 * base's): plans fault it through private views, not whole copies. */
int bf__param_in_arena(const bf_model *m, size_t p);

const bf__attr *bf__node_attr(const bf__node *node, const char *name);

/* model_free.c: frees what an attribute owns (not the attribute), a subgraph
 * included; for exec/fuse_loop.c, which replaces a Loop's attributes. */
void bf__attr_free(bf__attr *a);

/* onnx_load.c: an ONNX model converted into our graph, nodes sorted and
 * parameters indexed, but with no op bound to a node (node->op NULL): the
 * ops belong to the layer above (exec/bind.c binds them and is what
 * bf_model_load_* call). */
bf_status bf__model_parse(const void *buf, size_t len, const char *label, const bf_load_limits *lim,
                          bf_model **out, bf_error *err);
/* torch_names.c: each parameter's torch_name and torch_note (bitflip/model.h),
 * once its readers are indexed; the strings belong to the model. */
bf_status bf__torch_names(bf_model *m, bf_error *err);

/* model_free.c: frees what a node owns (not the node). */
void bf__node_clear(bf__node *n);
/* graph_index.c, on a graph just converted: the nodes' topological order
 * (m->order; a cycle is an error naming its nodes), then the parameter
 * table (m->params) with each parameter's readers. */
bf_status bf__graph_sort(bf_model *m, bf_error *err);
bf_status bf__graph_index_params(bf_model *m, bf_error *err);
/* graph_index.c: sets each parameter's reader_op/reader_node/is_embedding
 * from the nodes in order (run again by exec/fuse.c after it rewrites
 * nodes). */
void bf__index_param_readers(bf_model *m);

bf_status bf__model_parse_file(const char *path, const bf_load_limits *lim, bf_model **out,
                               bf_error *err);

#endif
