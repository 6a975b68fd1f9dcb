/* The test graph builder (onnx_graph.h). Lists grow by doubling; a graph
 * owns every string and array its protobuf structs point at, so protobuf-c's
 * pack reads only memory the graph holds until tg_free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "campaign_check.h"
#include "onnx_graph.h"

/* A list of n elements of `size` bytes with room for at least one more,
 * its room doubled when full. */
static void *room(void *list, size_t n, size_t *cap, size_t size)
{
    if (n < *cap) return list;
    size_t c = *cap ? 2 * *cap : 64;
    void *bigger = realloc(list, c * size);
    assert_non_null(bigger);
    *cap = c;
    return bigger;
}

void *tg_alloc(tg_graph *g, size_t size)
{
    void *p = calloc(1, size ? size : 1);
    assert_non_null(p);
    g->allocs = room(g->allocs, g->n, &g->cap, sizeof *g->allocs);
    g->allocs[g->n++] = p;
    return p;
}

char *tg_str(tg_graph *g, const char *s) { return strcpy(tg_alloc(g, strlen(s) + 1), s); }

void tg_free(tg_graph *g)
{
    for (size_t i = 0; i < g->n; i++) free(g->allocs[i]);
    free(g->allocs);
    free(g->nodes);
    free(g->inits);
    memset(g, 0, sizeof *g);
}

Onnx__NodeProto *tg_node(tg_graph *g, const char *op, const char *name, const char *const *in, int n_in,
                         const char *out)
{
    Onnx__NodeProto *n = tg_alloc(g, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = tg_str(g, op);
    n->name = tg_str(g, name);
    n->input = tg_alloc(g, (size_t)(n_in + 1) * sizeof(char *));
    for (int i = 0; i < n_in && in[i]; i++) n->input[n->n_input++] = tg_str(g, in[i]);
    n->output = tg_alloc(g, sizeof(char *));
    n->output[0] = tg_str(g, out);
    n->n_output = 1;
    n->attribute = tg_alloc(g, TG_MAX_ATTRS * sizeof(Onnx__AttributeProto *));
    g->nodes = room(g->nodes, g->n_nodes, &g->cap_nodes, sizeof *g->nodes);
    g->nodes[g->n_nodes++] = n;
    return n;
}

Onnx__AttributeProto *tg_attr(tg_graph *g, Onnx__NodeProto *n, const char *name,
                              Onnx__AttributeProto__AttributeType type)
{
    assert_true(n->n_attribute < TG_MAX_ATTRS);
    Onnx__AttributeProto *a = tg_alloc(g, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = tg_str(g, name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

Onnx__GraphProto *tg_subgraph(tg_graph *g, const tg_graph *body, const char *name)
{
    Onnx__GraphProto *gp = tg_alloc(g, sizeof *gp);
    onnx__graph_proto__init(gp);
    gp->name = tg_str(g, name);
    gp->n_node = body->n_nodes;
    gp->node = (Onnx__NodeProto **)body->nodes;
    gp->n_initializer = body->n_inits;
    gp->initializer = (Onnx__TensorProto **)body->inits;
    gp->n_input = body->n_ins;
    gp->input = (Onnx__ValueInfoProto **)body->ins;
    gp->n_output = body->n_outs;
    gp->output = (Onnx__ValueInfoProto **)body->outs;
    return gp;
}

void tg_attr_graph(tg_graph *g, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *gp)
{
    tg_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = gp;
}

void tg_attr_int(tg_graph *g, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = tg_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void tg_attr_float(tg_graph *g, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = tg_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

void tg_attr_ints(tg_graph *g, Onnx__NodeProto *n, const char *name, int k, const int64_t *v)
{
    Onnx__AttributeProto *a = tg_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = tg_alloc(g, (size_t)k * sizeof *a->ints);
    if (k) memcpy(a->ints, v, (size_t)k * sizeof *a->ints);
    a->n_ints = (size_t)k;
}

Onnx__TensorProto *tg_init(tg_graph *g, const char *name, int type, int ndim, const int64_t *dims)
{
    assert_true(ndim >= 0 && ndim <= TG_MAX_DIMS);
    Onnx__TensorProto *t = tg_alloc(g, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = tg_str(g, name);
    t->has_data_type = 1;
    t->data_type = type;
    t->n_dims = (size_t)ndim;
    t->dims = tg_alloc(g, TG_MAX_DIMS * sizeof(int64_t));
    for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
    g->inits = room(g->inits, g->n_inits, &g->cap_inits, sizeof *g->inits);
    g->inits[g->n_inits++] = t;
    return t;
}

static size_t numel(int ndim, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    return (size_t)n;
}

Onnx__TensorProto *tg_init_f32(tg_graph *g, const char *name, int ndim, const int64_t *dims, const float *data)
{
    Onnx__TensorProto *t = tg_init(g, name, 1, ndim, dims);
    size_t k = numel(ndim, dims);
    t->n_float_data = k;
    t->float_data = tg_alloc(g, k * sizeof(float));
    if (k) memcpy(t->float_data, data, k * sizeof(float));
    return t;
}

Onnx__TensorProto *tg_init_i64(tg_graph *g, const char *name, int ndim, const int64_t *dims, const int64_t *data)
{
    Onnx__TensorProto *t = tg_init(g, name, 7, ndim, dims);
    size_t k = numel(ndim, dims);
    t->n_int64_data = k;
    t->int64_data = tg_alloc(g, k * sizeof(int64_t));
    if (k) memcpy(t->int64_data, data, k * sizeof(int64_t));
    return t;
}

Onnx__ValueInfoProto *tg_value_info(tg_graph *g, const char *name, int elem, int ndim, const int64_t *dims)
{
    Onnx__ValueInfoProto *v = tg_alloc(g, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = tg_str(g, name);
    Onnx__TypeProto *tp = tg_alloc(g, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = tg_alloc(g, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    if (ndim >= 0) {
        assert_true(ndim <= TG_MAX_DIMS);
        Onnx__TensorShapeProto *sh = tg_alloc(g, sizeof *sh);
        onnx__tensor_shape_proto__init(sh);
        sh->dim = tg_alloc(g, TG_MAX_DIMS * sizeof(void *));
        for (int i = 0; i < ndim; i++) {
            Onnx__TensorShapeProto__Dimension *d = tg_alloc(g, sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[i] >= 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            } else {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = tg_str(g, dims[i] == -1 ? "batch" : "sequence");
            }
            sh->dim[sh->n_dim++] = d;
        }
        tt->shape = sh;
    }
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->type = tp;
    return v;
}

uint8_t *tg_pack(const tg_graph *g, const char *name, size_t *len)
{
    Onnx__GraphProto gp;
    onnx__graph_proto__init(&gp);
    gp.name = (char *)name;
    gp.n_node = g->n_nodes;
    gp.node = g->nodes;
    gp.n_initializer = g->n_inits;
    gp.initializer = g->inits;
    gp.n_input = g->n_ins;
    gp.input = (Onnx__ValueInfoProto **)g->ins;
    gp.n_output = g->n_outs;
    gp.output = (Onnx__ValueInfoProto **)g->outs;
    return tc_pack_model(&gp, g->opset ? (int)g->opset : 13, len);
}

bf_status tg_load_opts(tg_graph *g, const char *name, const bf_load_limits *lim, bf_model **m, bf_error *err)
{
    size_t len = 0;
    uint8_t *buf = tg_pack(g, name, &len);
    tg_free(g);
    assert_non_null(buf);
    char file[64];
    snprintf(file, sizeof file, "%s.onnx", name);
    *m = NULL;
    bf_status st = bf_model_load_buffer_opts(buf, len, file, lim, m, err);
    free(buf);
    return st;
}

bf_model *tg_load(tg_graph *g, const char *name)
{
    bf_model *m = NULL;
    bf_error err = {0};
    if (tg_load_opts(g, name, NULL, &m, &err) != BF_OK) fail_msg("%s", err.msg);
    return m;
}

bf_plan *tg_plan(const bf_model *m, int64_t batch, int fuse, int share)
{
    bf_plan_opts o = {.fuse_activations = fuse, .share_buffers = share};
    bf_plan *p = NULL;
    bf_error err = {0};
    if (bf_plan_create_opts(m, batch, &o, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    return p;
}
