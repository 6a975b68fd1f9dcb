/* ONNX graphs built in tests as protobuf-c structs, packed to bytes and
 * loaded as a user's file would be: for the tests that need a graph no
 * exporter writes (a cycle, an op on hostile shapes, a random architecture).
 * Everything a graph holds lives in its own list of allocations, freed at
 * once by tg_free; an allocation that fails fails the test (cmocka).
 *
 * Graph inputs and outputs are appended by the caller:
 *   g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, 3});
 * Nodes and initializers are appended by tg_node and tg_init*. */
#ifndef BF_TEST_ONNX_GRAPH_H
#define BF_TEST_ONNX_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/limits.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "onnx.pb-c.h"

#define TG_MAX_IO 16    /* graph inputs, and graph outputs */
#define TG_MAX_ATTRS 8  /* attributes per node */
#define TG_MAX_DIMS 8   /* dims of an initializer or a declared shape */

typedef struct tg_graph {
    void **allocs;
    size_t n, cap;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    Onnx__ValueInfoProto *ins[TG_MAX_IO], *outs[TG_MAX_IO];
    size_t n_ins, n_outs;
    int64_t opset;      /* the model's opset import; 0: 13 */
} tg_graph;

/* Zeroed memory the graph owns. */
void *tg_alloc(tg_graph *g, size_t size);
char *tg_str(tg_graph *g, const char *s);
/* Frees everything the graph owns and zeroes it, ready to build again. */
void tg_free(tg_graph *g);

/* A node of `op` named `name` on inputs in[0..n_in) (a NULL entry ends the
 * list early) with one output, appended to the graph; room for
 * TG_MAX_ATTRS attributes. */
Onnx__NodeProto *tg_node(tg_graph *g, const char *op, const char *name, const char *const *in, int n_in,
                         const char *out);
Onnx__AttributeProto *tg_attr(tg_graph *g, Onnx__NodeProto *n, const char *name,
                              Onnx__AttributeProto__AttributeType type);
void tg_attr_int(tg_graph *g, Onnx__NodeProto *n, const char *name, int64_t v);
void tg_attr_float(tg_graph *g, Onnx__NodeProto *n, const char *name, float v);
void tg_attr_ints(tg_graph *g, Onnx__NodeProto *n, const char *name, int k, const int64_t *v);
/* body's nodes, initializers, inputs and outputs as a GraphProto named
 * `name`, allocated in g (body must outlive the packing: the proto points
 * at its arrays); tg_attr_graph hangs it on node n as attribute `name`
 * (If's then_branch / else_branch, Loop's body). */
Onnx__GraphProto *tg_subgraph(tg_graph *g, const tg_graph *body, const char *name);
void tg_attr_graph(tg_graph *g, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *gp);

/* An initializer of ONNX data type `type` (1 float, 7 int64) and the given
 * dims, appended to the graph; tg_init leaves the data to the caller. */
Onnx__TensorProto *tg_init(tg_graph *g, const char *name, int type, int ndim, const int64_t *dims);
Onnx__TensorProto *tg_init_f32(tg_graph *g, const char *name, int ndim, const int64_t *dims, const float *data);
Onnx__TensorProto *tg_init_i64(tg_graph *g, const char *name, int ndim, const int64_t *dims, const int64_t *data);

/* A tensor ValueInfoProto of element type `elem`: a dim of -1 is the
 * symbolic "batch", any other negative one the symbolic "sequence" (a second
 * axis an eval set sizes, as an exported language model's); ndim < 0
 * declares no shape at all. Not appended anywhere. */
Onnx__ValueInfoProto *tg_value_info(tg_graph *g, const char *name, int elem, int ndim, const int64_t *dims);

/* The graph as a packed ModelProto named `name` (malloc'd; the caller frees). */
uint8_t *tg_pack(const tg_graph *g, const char *name, size_t *len);

/* The graph packed (tg_pack, as ModelProto `name`) and loaded as a caller's
 * buffer labelled NAME.onnx under the parser limits `lim` (NULL: the
 * defaults); the buffer and the graph are freed whatever the load says (g
 * zeroed, ready to build again). Returns the load's status, with *m and err
 * as bf_model_load_buffer_opts leaves them: for the tests that expect a
 * refusal or pass limits. */
bf_status tg_load_opts(tg_graph *g, const char *name, const bf_load_limits *lim, bf_model **m, bf_error *err);
/* tg_load_opts with the default limits, for a graph that must load: a
 * refusal fails the test with the loader's message. */
bf_model *tg_load(tg_graph *g, const char *name);

/* A plan of the model at `batch`, fusing activations (fuse) and sharing one
 * arena (share) or not: the fused-against-unfused tests' pair
 * (test_conv_fuse, test_matmul_fuse, test_gemm_fuse). Fails the test with
 * the error's message when the plan cannot be made. */
bf_plan *tg_plan(const bf_model *m, int64_t batch, int fuse, int share);

#endif
