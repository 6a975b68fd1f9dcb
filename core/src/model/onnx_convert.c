/* The main graph of an unpacked ONNX model converted into ours (graph.h):
 * the header, the graph's inputs, its nodes with their attributes, the
 * values they read and write, its outputs; the initializers' data is
 * onnx_init.c's, the graph attributes' subgraphs onnx_subgraph.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "model/graph.h"
#include "model/onnx_convert.h"
#include "model/onnx_load.h"

#define MIN_OPSET 11
#define MAX_OPSET 18

/* --- the name map (onnx_convert.h) */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

int bf__name_find(const bf__name_map *m, const char *name)
{
    for (size_t i = hash_str(name) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        int v = m->slots[i];
        if (!v) return -1;
        if (strcmp(m->values[v - 1].name, name) == 0) return v - 1;
    }
}

void bf__name_insert(bf__name_map *m, const char *name, int value)
{
    size_t i = hash_str(name) & (m->cap - 1);
    while (m->slots[i]) i = (i + 1) & (m->cap - 1);
    m->slots[i] = value + 1;
}

/* --- conversion */

bf_status bf__load_oom(bf_error *err, const bf_model *m)
{
    return bf_error_set(err, BF_ENOMEM, "%s: out of memory while loading the model", m->label);
}

char *bf__dup_or_empty(const char *s) { return bf__strdup(s ? s : ""); }

bf_status bf__convert_attr(bf_model *m, const Onnx__NodeProto *np, const Onnx__AttributeProto *ap, bf__attr *a,
                           bf_error *err)
{
    a->name = bf__dup_or_empty(ap->name);
    if (!a->name) return bf__load_oom(err, m);
    switch (ap->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->type = BF__ATTR_FLOAT; a->f = ap->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->type = BF__ATTR_INT; a->i = ap->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->type = BF__ATTR_STRING;
        a->s = bf__malloc(ap->s.len + 1);
        if (!a->s) return bf__load_oom(err, m);
        if (ap->s.len) memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = '\0';
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        char what[300];
        a->type = BF__ATTR_TENSOR;
        if (!ap->t)
            return bf_error_set(err, BF_EFORMAT, "%s: node '%.100s' (%.40s): attribute '%.60s' has no tensor",
                                m->label, np->name ? np->name : "", np->op_type, a->name);
        snprintf(what, sizeof what, "node '%.100s' (%.40s) attribute '%.60s'", np->name ? np->name : "",
                 np->op_type, a->name);
        bf_status st = bf__tensor_from_proto(ap->t, what, &a->t, err);
        if (st != BF_OK) return bf_error_prefix(err, "%s", m->label);
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a->type = BF__ATTR_FLOATS;
        a->n = ap->n_floats;
        a->floats = bf__malloc(a->n * sizeof(float));
        if (!a->floats) return bf__load_oom(err, m);
        if (a->n) memcpy(a->floats, ap->floats, a->n * sizeof(float));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->type = BF__ATTR_INTS;
        a->n = ap->n_ints;
        a->ints = bf__malloc(a->n * sizeof(int64_t));
        if (!a->ints) return bf__load_oom(err, m);
        if (a->n) memcpy(a->ints, ap->ints, a->n * sizeof(int64_t));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        a->type = BF__ATTR_STRINGS;
        a->strings = bf__calloc(ap->n_strings, sizeof(char *));
        if (!a->strings) return bf__load_oom(err, m);
        a->n = ap->n_strings;
        for (size_t i = 0; i < a->n; i++) {
            a->strings[i] = bf__malloc(ap->strings[i].len + 1);
            if (!a->strings[i]) return bf__load_oom(err, m);
            if (ap->strings[i].len) memcpy(a->strings[i], ap->strings[i].data, ap->strings[i].len);
            a->strings[i][ap->strings[i].len] = '\0';
        }
        break;
    default:
        /* Graph-valued attributes (If, Loop, Scan): the main graph's become
         * BF__ATTR_GRAPH later (bf__convert_subgraphs), once every value they
         * may read from the enclosing scope exists; those inside a subgraph
         * stay here, kept so the op check can name the node. */
        a->type = BF__ATTR_OTHER;
        break;
    }
    return BF_OK;
}

static bf_status convert_value_info(bf_model *m, const Onnx__ValueInfoProto *vi, const char *role,
                                    bf_value_info *out, bf_error *err)
{
    const char *name = vi->name ? vi->name : "";
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s: graph %s '%s' is not a tensor (sequences and maps are not supported)",
                            m->label, role, name);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    int32_t et = tt->has_elem_type ? tt->elem_type : 0;
    out->dtype = bf__onnx_dtype(et);
    if (out->dtype == BF_DTYPE_INVALID)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s: graph %s '%s' has element type %s, which bitflip does not support",
                            m->label, role, name, bf__onnx_dtype_name(et));
    if (!tt->shape) {
        out->ndim = -1;    /* unknown rank: only acceptable for outputs */
        return BF_OK;
    }
    if (tt->shape->n_dim > BF_MAX_DIMS)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s: graph %s '%s' has rank %zu; at most %d supported",
                            m->label, role, name, tt->shape->n_dim, BF_MAX_DIMS);
    out->ndim = (int)tt->shape->n_dim;
    for (int d = 0; d < out->ndim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        out->dims[d] = -1;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dim->dim_value < 0)
                return bf_error_set(err, BF_EFORMAT, "%s: graph %s '%s' dim %d is negative (%lld)", m->label,
                                    role, name, d, (long long)dim->dim_value);
            out->dims[d] = dim->dim_value;
        } else {
            const char *p = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param
                                ? dim->dim_param : "?";
            out->dim_names[d] = bf__strdup(p);
            if (!out->dim_names[d]) return bf__load_oom(err, m);
        }
    }
    return BF_OK;
}

/* Adds a value named `name`; fails on a duplicate definition. */
bf_status bf__add_value(bf_model *m, bf__name_map *map, const char *name, bf__value_kind kind, int producer, int *idx,
                        bf_error *err)
{
    int existing = bf__name_find(map, name);
    if (existing >= 0) {
        const bf__value *v = &m->values[existing];
        const char *what = v->kind == BF__VAL_NODE ? "a node's output" : v->kind == BF__VAL_INPUT ? "a graph input" : "an initializer";
        if (producer >= 0)
            return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s) writes '%s', which is already %s (ONNX values are assigned once)",
                                m->label, m->nodes[producer].name, m->nodes[producer].op_type, name, what);
        return bf_error_set(err, BF_EFORMAT, "%s: '%s' is defined twice (already %s)", m->label, name, what);
    }
    bf__value *v = &m->values[m->n_values];
    v->name = bf__strdup(name);
    if (!v->name) return bf__load_oom(err, m);
    v->kind = kind;
    v->producer = producer;
    v->index = -1;
    *idx = (int)m->n_values++;
    bf__name_insert(map, v->name, *idx);
    return BF_OK;
}

static int64_t find_opset(const Onnx__ModelProto *mp)
{
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!o->domain || o->domain[0] == '\0' || strcmp(o->domain, "ai.onnx") == 0)
            return o->has_version ? o->version : 0;
    }
    return 0;
}

/* convert's first step: the opset, the producer, what the model may not
 * hold. */
static bf_status convert_header(const Onnx__ModelProto *mp, bf_model *m, bf_error *err)
{
    const Onnx__GraphProto *g = mp->graph;
    if (!g) return bf_error_set(err, BF_EFORMAT, "%s: the model has no graph (is this an ONNX model?)", m->label);
    m->opset = find_opset(mp);
    if (m->opset < MIN_OPSET || m->opset > MAX_OPSET)
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "%s: default-domain opset %lld; bitflip supports opsets %d to %d "
                            "(re-export with torch.onnx.export(..., opset_version=13))",
                            m->label, (long long)m->opset, MIN_OPSET, MAX_OPSET);
    char prod[256];
    snprintf(prod, sizeof prod, "%s%s%s", mp->producer_name ? mp->producer_name : "",
             mp->producer_version && mp->producer_version[0] ? " " : "",
             mp->producer_version ? mp->producer_version : "");
    m->producer = bf__strdup(prod);
    if (!m->producer) return bf__load_oom(err, m);
    bf_status st = bf__onnx_metadata(mp, m, err);
    if (st != BF_OK) return st;
    if (g->n_sparse_initializer)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s: sparse initializers are not supported", m->label);
    return BF_OK;
}

/* Graph inputs; older exports also list initializers here: those stay initializers. */
static bf_status convert_inputs(const Onnx__GraphProto *g, bf_model *m, bf__name_map *map, bf_error *err)
{
    bf_status st;
    m->inputs = bf__calloc(g->n_input + 1, sizeof *m->inputs);
    m->input_vals = bf__calloc(g->n_input + 1, sizeof *m->input_vals);
    if (!m->inputs || !m->input_vals) return bf__load_oom(err, m);
    for (size_t i = 0; i < g->n_input; i++) {
        const char *name = g->input[i]->name ? g->input[i]->name : "";
        if (bf__name_find(map, name) >= 0) continue;
        bf_value_info *vi = &m->inputs[m->n_inputs];
        int idx;
        if ((st = convert_value_info(m, g->input[i], "input", vi, err)) != BF_OK) return st;
        if (vi->ndim < 0)
            return bf_error_set(err, BF_EUNSUPPORTED, "%s: graph input '%s' declares no shape; bitflip needs its rank (re-export with input shapes)",
                                m->label, name);
        if ((st = bf__add_value(m, map, name, BF__VAL_INPUT, -1, &idx, err)) != BF_OK) return st;
        vi->name = m->values[idx].name;
        m->values[idx].index = (int64_t)m->n_inputs;
        m->input_vals[m->n_inputs++] = idx;
    }
    if (m->n_inputs == 0) return bf_error_set(err, BF_EFORMAT, "%s: the graph has no inputs to feed", m->label);
    return BF_OK;
}

/* Node i: its name, op, attributes and output values (its inputs are
 * resolved once every output exists: convert_node_inputs). */
static bf_status convert_node(const Onnx__NodeProto *np, size_t i, bf_model *m, bf__name_map *map, bf_error *err)
{
    bf_status st;
    bf__node *n = &m->nodes[i];
    m->n_nodes = i + 1;
    n->name = bf__dup_or_empty(np->name);
    n->op_type = bf__dup_or_empty(np->op_type);
    n->in = bf__malloc((np->n_input + 1) * sizeof *n->in);
    n->out = bf__malloc((np->n_output + 1) * sizeof *n->out);
    n->attrs = bf__calloc(np->n_attribute + 1, sizeof *n->attrs);
    if (!n->name || !n->op_type || !n->in || !n->out || !n->attrs) return bf__load_oom(err, m);
    if (np->n_input > BF__MAX_IO || np->n_output > BF__MAX_IO)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' (%s) has %zu inputs and %zu outputs; at most %d each supported",
                            m->label, n->name, n->op_type, np->n_input, np->n_output, BF__MAX_IO);
    n->n_in = (int)np->n_input;
    n->n_out = (int)np->n_output;
    for (size_t j = 0; j < np->n_attribute; j++) {
        n->n_attrs = j + 1;
        if ((st = bf__convert_attr(m, np, np->attribute[j], &n->attrs[j], err)) != BF_OK) return st;
    }
    if (np->domain && np->domain[0] && strcmp(np->domain, "ai.onnx") != 0) {
        /* ONNX Runtime's MatMulNBits is how int4 weights ship in ONNX (no
         * int4 type before opset 21): kept with its domain in the name, as
         * a subgraph's ops are, so that no pattern takes it for a standard op */
        if (strcmp(np->domain, "com.microsoft") != 0 || strcmp(n->op_type, "MatMulNBits") != 0)
            return bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' uses op %s from domain '%s'; only standard ONNX ops "
                                "and com.microsoft MatMulNBits are supported", m->label, n->name, n->op_type, np->domain);
        bf__free(n->op_type);
        if (!(n->op_type = bf__strdup("com.microsoft:MatMulNBits"))) return bf__load_oom(err, m);
    }
    /* "bf." ops are the ones bitflip puts in place of exported patterns
     * (exec/fuse_loop.c): a file may not name them itself */
    if (strncmp(n->op_type, "bf.", 3) == 0)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' uses op %s; op names starting with 'bf.' are "
                            "bitflip's own and cannot appear in a model file (only standard ONNX ops are supported)",
                            m->label, n->name, n->op_type);
    for (size_t j = 0; j < np->n_output; j++) {
        const char *name = np->output[j] ? np->output[j] : "";
        if (!name[0]) { n->out[j] = -1; continue; }
        if ((st = bf__add_value(m, map, name, BF__VAL_NODE, (int)i, &n->out[j], err)) != BF_OK) return st;
    }
    return BF_OK;
}

/* Inputs are resolved after all outputs exist: the file's node order need
 * not be topological (graph_index.c sorts it). */
static bf_status convert_node_inputs(const Onnx__GraphProto *g, bf_model *m, const bf__name_map *map, bf_error *err)
{
    for (size_t i = 0; i < m->n_nodes; i++) {
        const Onnx__NodeProto *np = g->node[i];
        bf__node *n = &m->nodes[i];
        for (size_t j = 0; j < np->n_input; j++) {
            const char *name = np->input[j] ? np->input[j] : "";
            if (!name[0]) { n->in[j] = -1; continue; }
            n->in[j] = bf__name_find(map, name);
            if (n->in[j] < 0)
                return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s) reads '%s', which no node, graph input or initializer defines",
                                    m->label, n->name, n->op_type, name);
        }
    }
    return BF_OK;
}

static bf_status convert_outputs(const Onnx__GraphProto *g, bf_model *m, const bf__name_map *map, bf_error *err)
{
    bf_status st;
    m->outputs = bf__calloc(g->n_output + 1, sizeof *m->outputs);
    m->output_vals = bf__calloc(g->n_output + 1, sizeof *m->output_vals);
    if (!m->outputs || !m->output_vals) return bf__load_oom(err, m);
    if (g->n_output == 0) return bf_error_set(err, BF_EFORMAT, "%s: the graph has no outputs", m->label);
    for (size_t i = 0; i < g->n_output; i++) {
        const char *name = g->output[i]->name ? g->output[i]->name : "";
        int idx = bf__name_find(map, name);
        if (idx < 0) return bf_error_set(err, BF_EFORMAT, "%s: graph output '%s' is not produced by any node", m->label, name);
        if ((st = convert_value_info(m, g->output[i], "output", &m->outputs[i], err)) != BF_OK) return st;
        if (m->outputs[i].ndim < 0) m->outputs[i].ndim = 0;
        m->outputs[i].name = m->values[idx].name;
        m->output_vals[i] = idx;
        m->n_outputs = i + 1;
    }
    return BF_OK;
}

/* The model's graph into m, step by step, in the order errors are
 * reported: header, initializers, inputs, nodes, their inputs, subgraphs,
 * outputs. The name map lives only while converting. */
bf_status bf__onnx_convert(const Onnx__ModelProto *mp, bf_model *m, bf__raw_src *src, bf_error *err)
{
    bf_status st = BF_OK;
    bf__name_map map = {0};
    const Onnx__GraphProto *g = mp->graph;

    if ((st = convert_header(mp, m, err)) != BF_OK) return st;
    /* Upper bound on values: every initializer, input and node output. */
    size_t max_values = g->n_initializer + g->n_input;
    for (size_t i = 0; i < g->n_node; i++) max_values += g->node[i]->n_output;
    m->values = bf__calloc(max_values + 1, sizeof *m->values);
    m->nodes = bf__calloc(g->n_node + 1, sizeof *m->nodes);
    map.cap = 16;
    while (map.cap < 2 * (max_values + 1)) map.cap <<= 1;
    map.slots = bf__calloc(map.cap, sizeof *map.slots);
    map.values = m->values;
    if (!m->values || !m->nodes || !map.slots) { st = bf__load_oom(err, m); goto out; }

    if ((st = bf__convert_initializers(g, m, &map, src, err)) != BF_OK) goto out;
    if ((st = convert_inputs(g, m, &map, err)) != BF_OK) goto out;
    if ((st = bf__onnx_check_functions(mp, m, err)) != BF_OK) goto out;
    for (size_t i = 0; i < g->n_node; i++)
        if ((st = convert_node(g->node[i], i, m, &map, err)) != BF_OK) goto out;
    if ((st = convert_node_inputs(g, m, &map, err)) != BF_OK) goto out;
    if ((st = bf__convert_subgraphs(g, m, &map, err)) != BF_OK) goto out;
    st = convert_outputs(g, m, &map, err);
out:
    bf__free(map.slots);
    return st;
}
