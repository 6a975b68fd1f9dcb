/* Loading an ONNX model: unpack with protobuf-c, convert to our graph, check
 * it, free the protobuf. Nothing in the file is trusted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#if defined(__unix__)
#include <sys/mman.h>
#endif

#include "base/alloc.h"
#include "base/warena.h"
#include "base/wpack.h"
#include "model/graph.h"
#include "model/onnx_load.h"

#define MIN_OPSET 11
#define MAX_OPSET 18
/* protobuf-c keeps the whole message in memory; 2 GiB is protobuf's own limit. */
#define MAX_MODEL_BYTES ((size_t)2 << 30)

/* --- name -> value index, an open-addressing table used only while loading */

typedef struct name_map {
    size_t cap;
    int *slots;           /* value index + 1; 0 = empty */
    const bf__value *values;
} name_map;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static int map_find(const name_map *m, const char *name)
{
    for (size_t i = hash_str(name) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        int v = m->slots[i];
        if (!v) return -1;
        if (strcmp(m->values[v - 1].name, name) == 0) return v - 1;
    }
}

static void map_insert(name_map *m, const char *name, int value)
{
    size_t i = hash_str(name) & (m->cap - 1);
    while (m->slots[i]) i = (i + 1) & (m->cap - 1);
    m->slots[i] = value + 1;
}

/* --- freeing */

static void free_subgraph(bf__subgraph *g);

static void free_attr(bf__attr *a)
{
    bf__free(a->name);
    bf__free(a->s);
    bf__free(a->ints);
    bf__free(a->floats);
    for (size_t i = 0; a->strings && i < a->n; i++) bf__free(a->strings[i]);
    bf__free(a->strings);
    bf__tensor_free(a->t);
    free_subgraph(a->g);
}

void bf__attr_free(bf__attr *a) { free_attr(a); }

/* Nested subgraphs (graph.h) are freed through free_attr, as deep as the
 * loader's graph-depth limit let them be. */
static void free_subgraph(bf__subgraph *g)
{
    if (!g) return;
    bf__free(g->implicit_local);
    bf__free(g->implicit_ref);
    for (size_t i = 0; i < g->n_locals; i++) {
        bf__free(g->names[i]);
        if (g->inits) bf__tensor_free(g->inits[i]);
    }
    bf__free(g->names);
    bf__free(g->inits);
    bf__free(g->in);
    bf__free(g->out);
    for (size_t i = 0; g->nodes && i < g->n_nodes; i++) {
        bf__node *n = &g->nodes[i];
        bf__free(n->name);
        bf__free(n->op_type);
        bf__free(n->in);
        bf__free(n->out);
        for (size_t j = 0; j < n->n_attrs; j++) free_attr(&n->attrs[j]);
        bf__free(n->attrs);
    }
    bf__free(g->nodes);
    bf__free(g);
}

void bf__node_clear(bf__node *n)
{
    bf__free(n->name);
    bf__free(n->op_type);
    bf__free(n->in);
    bf__free(n->out);
    for (size_t j = 0; j < n->n_attrs; j++) free_attr(&n->attrs[j]);
    bf__free(n->attrs);
    memset(n, 0, sizeof *n);
}

void bf_model_free(bf_model *m)
{
    if (!m) return;
    if (m->base) {   /* derived (mitigate.c): only its own arrays */
        for (size_t i = 0; i < m->n_owned; i++) bf__free(m->owned[i]);
        bf__free(m->owned);
        for (size_t i = 0; m->nodes && i < m->n_nodes; i++) {
            bf__free(m->nodes[i].in);
            bf__free(m->nodes[i].out);
        }
        bf__free(m->values);
        bf__free(m->nodes);
        bf__free(m->order);
        bf__free(m->output_vals);
        const bf_model *base = m->owns_base ? m->base : NULL;
        bf__free(m);
        bf_model_free((bf_model *)base);
        return;
    }
    for (size_t i = 0; i < m->n_values; i++) {
        bf__free(m->values[i].name);
        if (m->values[i].init && bf__warena_owns(m->warena, m->values[i].init->data))
            m->values[i].init->data = NULL;   /* the arena's, freed below */
        bf__tensor_free(m->values[i].init);
    }
    bf__warena_free(m->warena);
    bf__wpack_free(m->wpack);
    bf__free(m->values);
    for (size_t i = 0; i < m->n_nodes; i++) bf__node_clear(&m->nodes[i]);
    bf__free(m->nodes);
    bf__free(m->order);
    /* <=: the entry being filled when an error struck may hold names too
     * (both arrays have one spare, zeroed entry) */
    for (size_t i = 0; m->inputs && i <= m->n_inputs; i++)
        for (int d = 0; d < BF_MAX_DIMS; d++) bf__free((char *)m->inputs[i].dim_names[d]);
    for (size_t i = 0; m->outputs && i <= m->n_outputs; i++)
        for (int d = 0; d < BF_MAX_DIMS; d++) bf__free((char *)m->outputs[i].dim_names[d]);
    bf__free(m->inputs);
    bf__free(m->outputs);
    bf__free(m->input_vals);
    bf__free(m->output_vals);
    for (size_t i = 0; m->params && i < m->n_params; i++) {
        bf__free((char *)m->params[i].torch_name);
        bf__free((char *)m->params[i].torch_note);
    }
    bf__free(m->params);
    bf__free(m->param_vals);
    bf__free(m->param_zp);
    bf__free(m->label);
    bf__free(m->producer);
    bf__free(m->kernels);
    bf__free(m);
}

/* --- conversion */

static bf_status oom(bf_error *err, const bf_model *m)
{
    return bf_error_set(err, BF_ENOMEM, "%s: out of memory while loading the model", m->label);
}

static char *dup_or_empty(const char *s) { return bf__strdup(s ? s : ""); }

static bf_status convert_attr(bf_model *m, const Onnx__NodeProto *np, const Onnx__AttributeProto *ap,
                              bf__attr *a, bf_error *err)
{
    a->name = dup_or_empty(ap->name);
    if (!a->name) return oom(err, m);
    switch (ap->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->type = BF__ATTR_FLOAT; a->f = ap->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->type = BF__ATTR_INT; a->i = ap->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->type = BF__ATTR_STRING;
        a->s = bf__malloc(ap->s.len + 1);
        if (!a->s) return oom(err, m);
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
        if (!a->floats) return oom(err, m);
        if (a->n) memcpy(a->floats, ap->floats, a->n * sizeof(float));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->type = BF__ATTR_INTS;
        a->n = ap->n_ints;
        a->ints = bf__malloc(a->n * sizeof(int64_t));
        if (!a->ints) return oom(err, m);
        if (a->n) memcpy(a->ints, ap->ints, a->n * sizeof(int64_t));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        a->type = BF__ATTR_STRINGS;
        a->strings = bf__calloc(ap->n_strings, sizeof(char *));
        if (!a->strings) return oom(err, m);
        a->n = ap->n_strings;
        for (size_t i = 0; i < a->n; i++) {
            a->strings[i] = bf__malloc(ap->strings[i].len + 1);
            if (!a->strings[i]) return oom(err, m);
            if (ap->strings[i].len) memcpy(a->strings[i], ap->strings[i].data, ap->strings[i].len);
            a->strings[i][ap->strings[i].len] = '\0';
        }
        break;
    default:
        /* Graph-valued attributes (If, Loop, Scan): the main graph's become
         * BF__ATTR_GRAPH later (convert_subgraphs), once every value they
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
            if (!out->dim_names[d]) return oom(err, m);
        }
    }
    return BF_OK;
}

/* Adds a value named `name`; fails on a duplicate definition. */
static bf_status add_value(bf_model *m, name_map *map, const char *name, bf__value_kind kind,
                           int producer, int *idx, bf_error *err)
{
    int existing = map_find(map, name);
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
    if (!v->name) return oom(err, m);
    v->kind = kind;
    v->producer = producer;
    v->index = -1;
    *idx = (int)m->n_values++;
    map_insert(map, v->name, *idx);
    return BF_OK;
}

/* --- subgraphs: a main-graph node's graph attribute (graph.h, bf__subgraph) */

static bf_status add_local(bf_model *m, const Onnx__NodeProto *np, bf__subgraph *g, name_map *lm, bf__value *lv,
                           const char *name, int *idx, bf_error *err)
{
    if (map_find(lm, name) >= 0)
        return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s): its subgraph defines '%s' twice (ONNX values "
                            "are assigned once)", m->label, np->name ? np->name : "", np->op_type, name);
    g->names[g->n_locals] = bf__strdup(name);
    if (!g->names[g->n_locals]) return oom(err, m);
    lv[g->n_locals].name = g->names[g->n_locals];
    *idx = (int)g->n_locals++;
    map_insert(lm, g->names[*idx], *idx);
    return BF_OK;
}

/* The subgraph being converted's parent (a subgraph too) and its names:
 * what the nested one reads of it becomes an implicit local (graph.h). */
typedef struct sub_parent {
    const name_map *lm;
} sub_parent;

/* A reference (graph.h) to the value a subgraph reads as `name`: its own
 * first, then its parent subgraph's (as an implicit local), then the main
 * graph's. */
static bf_status sub_ref(bf_model *m, const Onnx__NodeProto *np, name_map *lm, const name_map *outer,
                         const sub_parent *par, bf__subgraph *g, const char *name, int *ref, bf_error *err)
{
    if (!name[0]) { *ref = -1; return BF_OK; }
    int v = map_find(lm, name);
    if (v >= 0) { *ref = BF__SUB_REF(v); return BF_OK; }
    int pv = par ? map_find(par->lm, name) : -1;
    if (pv >= 0) {
        int idx;
        /* lm->values is the converter's own table of g's values (lv) */
        bf_status st = add_local(m, np, g, lm, (bf__value *)lm->values, name, &idx, err);
        if (st != BF_OK) return st;
        g->implicit_local[g->n_implicit] = idx;
        g->implicit_ref[g->n_implicit++] = BF__SUB_REF(pv);
        *ref = BF__SUB_REF(idx);
        return BF_OK;
    }
    v = map_find(outer, name);
    if (v >= 0) { *ref = v; return BF_OK; }
    return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s): its subgraph reads '%s', which neither the subgraph "
                        "nor the graph around it defines", m->label, np->name ? np->name : "", np->op_type, name);
}

static bf_status convert_subgraph(bf_model *m, const Onnx__NodeProto *np, const Onnx__GraphProto *gp,
                                  const name_map *outer, const sub_parent *par, bf__subgraph *g, bf_error *err);

/* The graph attributes of subgraph g's nodes (sp's), once g's own values
 * all exist: nested subgraphs, their reads of g as implicit locals. */
static bf_status convert_nested(bf_model *m, const Onnx__GraphProto *gp, bf__subgraph *g, name_map *lm,
                                const name_map *outer, bf_error *err)
{
    sub_parent par = {.lm = lm};
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *sp = gp->node[i];
        for (size_t j = 0; j < sp->n_attribute && j < g->nodes[i].n_attrs; j++) {
            const Onnx__AttributeProto *ap = sp->attribute[j];
            bf__attr *a = &g->nodes[i].attrs[j];
            if (ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !ap->g) continue;
            a->g = bf__calloc(1, sizeof *a->g);
            if (!a->g) return oom(err, m);
            a->type = BF__ATTR_GRAPH;
            bf_status st = convert_subgraph(m, sp, ap->g, outer, &par, a->g, err);
            if (st != BF_OK) return st;
        }
    }
    return BF_OK;
}

static bf_status convert_subgraph(bf_model *m, const Onnx__NodeProto *np, const Onnx__GraphProto *gp,
                                  const name_map *outer, const sub_parent *par, bf__subgraph *g, bf_error *err)
{
    bf_status st = BF_OK;
    size_t max_locals = gp->n_input + gp->n_initializer + gp->n_output;
    /* outputs, and implicit locals (at most one per reference) */
    for (size_t i = 0; i < gp->n_node; i++) max_locals += gp->node[i]->n_output + gp->node[i]->n_input;
    name_map lm = {.cap = 16};
    while (lm.cap < 2 * (max_locals + 1)) lm.cap <<= 1;
    lm.slots = bf__calloc(lm.cap, sizeof *lm.slots);
    bf__value *lv = bf__calloc(max_locals + 1, sizeof *lv);
    g->names = bf__calloc(max_locals + 1, sizeof *g->names);
    g->inits = bf__calloc(max_locals + 1, sizeof *g->inits);
    g->in = bf__calloc(gp->n_input + 1, sizeof *g->in);
    g->out = bf__calloc(gp->n_output + 1, sizeof *g->out);
    g->nodes = bf__calloc(gp->n_node + 1, sizeof *g->nodes);
    g->implicit_local = bf__calloc(max_locals + 1, sizeof *g->implicit_local);
    g->implicit_ref = bf__calloc(max_locals + 1, sizeof *g->implicit_ref);
    lm.values = lv;
    if (!lm.slots || !lv || !g->names || !g->inits || !g->in || !g->out || !g->nodes || !g->implicit_local ||
        !g->implicit_ref) { st = oom(err, m); goto out; }
    if (gp->n_input > BF__MAX_IO || gp->n_output > BF__MAX_IO) {
        st = bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' (%s): its subgraph has %zu inputs and %zu outputs; at "
                          "most %d each supported", m->label, np->name ? np->name : "", np->op_type, gp->n_input,
                          gp->n_output, BF__MAX_IO);
        goto out;
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        if ((st = add_local(m, np, g, &lm, lv, gp->input[i]->name ? gp->input[i]->name : "", &g->in[i], err)) != BF_OK) goto out;
        g->n_in = (int)i + 1;
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        char what[300];
        int idx;
        if ((st = add_local(m, np, g, &lm, lv, tp->name ? tp->name : "", &idx, err)) != BF_OK) goto out;
        snprintf(what, sizeof what, "node '%.100s' (%.40s) subgraph initializer '%.100s'", np->name ? np->name : "",
                 np->op_type, g->names[idx]);
        if ((st = bf__tensor_from_proto(tp, what, &g->inits[idx], err)) != BF_OK) {
            bf_error_prefix(err, "%s", m->label);
            goto out;
        }
        g->inits[idx]->name = g->names[idx];
    }
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *sp = gp->node[i];
        bf__node *n = &g->nodes[i];
        g->n_nodes = i + 1;
        n->name = dup_or_empty(sp->name);
        /* an op of another domain keeps its domain in the name, so that no
         * pattern takes it for the standard op */
        if (sp->domain && sp->domain[0] && strcmp(sp->domain, "ai.onnx") != 0) {
            size_t len = strlen(sp->domain) + strlen(sp->op_type ? sp->op_type : "") + 2;
            n->op_type = bf__malloc(len);
            if (n->op_type) snprintf(n->op_type, len, "%s:%s", sp->domain, sp->op_type ? sp->op_type : "");
        } else {
            n->op_type = dup_or_empty(sp->op_type);
        }
        n->in = bf__malloc((sp->n_input + 1) * sizeof *n->in);
        n->out = bf__malloc((sp->n_output + 1) * sizeof *n->out);
        n->attrs = bf__calloc(sp->n_attribute + 1, sizeof *n->attrs);
        if (!n->name || !n->op_type || !n->in || !n->out || !n->attrs) { st = oom(err, m); goto out; }
        if (sp->n_input > BF__MAX_IO || sp->n_output > BF__MAX_IO) {
            st = bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' (%s) in the subgraph of node '%s' has %zu inputs and "
                              "%zu outputs; at most %d each supported", m->label, n->name, n->op_type,
                              np->name ? np->name : "", sp->n_input, sp->n_output, BF__MAX_IO);
            goto out;
        }
        for (size_t j = 0; j < sp->n_attribute; j++) {
            n->n_attrs = j + 1;
            if ((st = convert_attr(m, sp, sp->attribute[j], &n->attrs[j], err)) != BF_OK) goto out;
        }
        for (size_t j = 0; j < sp->n_output; j++) {
            const char *name = sp->output[j] ? sp->output[j] : "";
            n->n_out = (int)j + 1;
            if (!name[0]) { n->out[j] = -1; continue; }
            int idx;
            if ((st = add_local(m, np, g, &lm, lv, name, &idx, err)) != BF_OK) goto out;
            n->out[j] = BF__SUB_REF(idx);
        }
    }
    /* inputs once every output exists: the subgraph's order need not be topological */
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *sp = gp->node[i];
        bf__node *n = &g->nodes[i];
        for (size_t j = 0; j < sp->n_input; j++) {
            if ((st = sub_ref(m, np, &lm, outer, par, g, sp->input[j] ? sp->input[j] : "", &n->in[j], err)) != BF_OK)
                goto out;
            n->n_in = (int)j + 1;
        }
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        if ((st = sub_ref(m, np, &lm, outer, par, g, gp->output[i]->name ? gp->output[i]->name : "", &g->out[i], err)) !=
            BF_OK)
            goto out;
        g->n_out = (int)i + 1;
    }
    st = convert_nested(m, gp, g, &lm, outer, err);
out:
    bf__free(lm.slots);
    bf__free(lv);
    return st;
}

/* The graph attributes of the main graph's nodes, kept as bf__subgraphs
 * (those of their own nodes are not: one level). */
static bf_status convert_subgraphs(const Onnx__GraphProto *gp, bf_model *m, const name_map *outer, bf_error *err)
{
    for (size_t i = 0; i < m->n_nodes; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        for (size_t j = 0; j < np->n_attribute && j < m->nodes[i].n_attrs; j++) {
            const Onnx__AttributeProto *ap = np->attribute[j];
            bf__attr *a = &m->nodes[i].attrs[j];
            if (ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !ap->g) continue;
            a->g = bf__calloc(1, sizeof *a->g);
            if (!a->g) return oom(err, m);
            a->type = BF__ATTR_GRAPH;
            bf_status st = convert_subgraph(m, np, ap->g, outer, NULL, a->g, err);
            if (st != BF_OK) return st;
        }
    }
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

/* Where the loader found the initializers' data (onnx_strip.c) and, for a
 * mapped file, how much of it was given back to the kernel already. */
typedef struct raw_src {
    bf__raw_range *ranges;   /* one per main-graph initializer; NULL: unpacked whole */
    uint8_t *map;            /* the file's read-only mapping, or NULL (a caller's buffer) */
    size_t released;         /* map bytes before this were given back */
} raw_src;

/* Once an initializer is converted, the file's pages up to its end are not
 * read again (protobuf-c unpacked the rest before): given back, so that
 * loading holds the model once, not the file beside it. */
static void release_file(raw_src *src, size_t upto)
{
#if defined(__unix__)
    size_t pg = bf__warena_page(), end = upto / pg * pg;
    if (!src->map || end <= src->released) return;
    bf__pages_drop(src->map + src->released, end - src->released);
    src->released = end;
#else
    (void)src; (void)upto;
#endif
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
    if (!m->producer) return oom(err, m);
    bf_status st = bf__onnx_metadata(mp, m, err);
    if (st != BF_OK) return st;
    if (g->n_sparse_initializer)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s: sparse initializers are not supported", m->label);
    return BF_OK;
}

/* Initializers: float ones are parameters, the rest constants. */
static bf_status convert_initializers(const Onnx__GraphProto *g, bf_model *m, name_map *map, raw_src *src,
                                      bf_error *err)
{
    bf_status st;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        const char *name = tp->name ? tp->name : "";
        char what[300];
        int idx = -1;   /* set by add_value; GCC cannot see that an error return is never BF_OK */
        if (!name[0]) return bf_error_set(err, BF_EFORMAT, "%s: initializer #%zu has no name", m->label, i);
        snprintf(what, sizeof what, "initializer '%.250s'", name);
        if ((st = add_value(m, map, name, BF__VAL_CONST, -1, &idx, err)) != BF_OK) return st;
        const bf__raw_range *cut = src->ranges ? &src->ranges[i] : NULL;
        if ((st = bf__tensor_from_proto_at(tp, what, cut, m->warena, &m->values[idx].init, err)) != BF_OK) {
            bf_error_prefix(err, "%s", m->label);
            return st;
        }
        if (cut && cut->cut) release_file(src, cut->off + cut->len);
        m->values[idx].init->name = m->values[idx].name;
        m->values[idx].stored = tp->data_type == 10 ? "float16" : tp->data_type == 16 ? "bfloat16"
                                : tp->data_type == 11 ? "float64" : NULL;   /* ONNX TensorProto types */
        if (m->values[idx].init->dtype == BF_F32) {
            m->values[idx].kind = BF__VAL_PARAM;
            m->n_params++;
        }
    }
    return BF_OK;
}

/* Graph inputs; older exports also list initializers here: those stay initializers. */
static bf_status convert_inputs(const Onnx__GraphProto *g, bf_model *m, name_map *map, bf_error *err)
{
    bf_status st;
    m->inputs = bf__calloc(g->n_input + 1, sizeof *m->inputs);
    m->input_vals = bf__calloc(g->n_input + 1, sizeof *m->input_vals);
    if (!m->inputs || !m->input_vals) return oom(err, m);
    for (size_t i = 0; i < g->n_input; i++) {
        const char *name = g->input[i]->name ? g->input[i]->name : "";
        if (map_find(map, name) >= 0) continue;
        bf_value_info *vi = &m->inputs[m->n_inputs];
        int idx;
        if ((st = convert_value_info(m, g->input[i], "input", vi, err)) != BF_OK) return st;
        if (vi->ndim < 0)
            return bf_error_set(err, BF_EUNSUPPORTED, "%s: graph input '%s' declares no shape; bitflip needs its rank (re-export with input shapes)",
                                m->label, name);
        if ((st = add_value(m, map, name, BF__VAL_INPUT, -1, &idx, err)) != BF_OK) return st;
        vi->name = m->values[idx].name;
        m->values[idx].index = (int64_t)m->n_inputs;
        m->input_vals[m->n_inputs++] = idx;
    }
    if (m->n_inputs == 0) return bf_error_set(err, BF_EFORMAT, "%s: the graph has no inputs to feed", m->label);
    return BF_OK;
}

/* Node i: its name, op, attributes and output values (its inputs are
 * resolved once every output exists: convert_node_inputs). */
static bf_status convert_node(const Onnx__NodeProto *np, size_t i, bf_model *m, name_map *map, bf_error *err)
{
    bf_status st;
    bf__node *n = &m->nodes[i];
    m->n_nodes = i + 1;
    n->name = dup_or_empty(np->name);
    n->op_type = dup_or_empty(np->op_type);
    n->in = bf__malloc((np->n_input + 1) * sizeof *n->in);
    n->out = bf__malloc((np->n_output + 1) * sizeof *n->out);
    n->attrs = bf__calloc(np->n_attribute + 1, sizeof *n->attrs);
    if (!n->name || !n->op_type || !n->in || !n->out || !n->attrs) return oom(err, m);
    if (np->n_input > BF__MAX_IO || np->n_output > BF__MAX_IO)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' (%s) has %zu inputs and %zu outputs; at most %d each supported",
                            m->label, n->name, n->op_type, np->n_input, np->n_output, BF__MAX_IO);
    n->n_in = (int)np->n_input;
    n->n_out = (int)np->n_output;
    for (size_t j = 0; j < np->n_attribute; j++) {
        n->n_attrs = j + 1;
        if ((st = convert_attr(m, np, np->attribute[j], &n->attrs[j], err)) != BF_OK) return st;
    }
    if (np->domain && np->domain[0] && strcmp(np->domain, "ai.onnx") != 0) {
        /* ONNX Runtime's MatMulNBits is how int4 weights ship in ONNX (no
         * int4 type before opset 21): kept with its domain in the name, as
         * a subgraph's ops are, so that no pattern takes it for a standard op */
        if (strcmp(np->domain, "com.microsoft") != 0 || strcmp(n->op_type, "MatMulNBits") != 0)
            return bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' uses op %s from domain '%s'; only standard ONNX ops "
                                "and com.microsoft MatMulNBits are supported", m->label, n->name, n->op_type, np->domain);
        bf__free(n->op_type);
        if (!(n->op_type = bf__strdup("com.microsoft:MatMulNBits"))) return oom(err, m);
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
        if ((st = add_value(m, map, name, BF__VAL_NODE, (int)i, &n->out[j], err)) != BF_OK) return st;
    }
    return BF_OK;
}

/* Inputs are resolved after all outputs exist: the file's node order need
 * not be topological (graph_index.c sorts it). */
static bf_status convert_node_inputs(const Onnx__GraphProto *g, bf_model *m, const name_map *map, bf_error *err)
{
    for (size_t i = 0; i < m->n_nodes; i++) {
        const Onnx__NodeProto *np = g->node[i];
        bf__node *n = &m->nodes[i];
        for (size_t j = 0; j < np->n_input; j++) {
            const char *name = np->input[j] ? np->input[j] : "";
            if (!name[0]) { n->in[j] = -1; continue; }
            n->in[j] = map_find(map, name);
            if (n->in[j] < 0)
                return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s) reads '%s', which no node, graph input or initializer defines",
                                    m->label, n->name, n->op_type, name);
        }
    }
    return BF_OK;
}

static bf_status convert_outputs(const Onnx__GraphProto *g, bf_model *m, const name_map *map, bf_error *err)
{
    bf_status st;
    m->outputs = bf__calloc(g->n_output + 1, sizeof *m->outputs);
    m->output_vals = bf__calloc(g->n_output + 1, sizeof *m->output_vals);
    if (!m->outputs || !m->output_vals) return oom(err, m);
    if (g->n_output == 0) return bf_error_set(err, BF_EFORMAT, "%s: the graph has no outputs", m->label);
    for (size_t i = 0; i < g->n_output; i++) {
        const char *name = g->output[i]->name ? g->output[i]->name : "";
        int idx = map_find(map, name);
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
static bf_status convert(const Onnx__ModelProto *mp, bf_model *m, raw_src *src, bf_error *err)
{
    bf_status st = BF_OK;
    name_map map = {0};
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
    if (!m->values || !m->nodes || !map.slots) { st = oom(err, m); goto out; }

    if ((st = convert_initializers(g, m, &map, src, err)) != BF_OK) goto out;
    if ((st = convert_inputs(g, m, &map, err)) != BF_OK) goto out;
    if ((st = bf__onnx_check_functions(mp, m, err)) != BF_OK) goto out;
    for (size_t i = 0; i < g->n_node; i++)
        if ((st = convert_node(g->node[i], i, m, &map, err)) != BF_OK) goto out;
    if ((st = convert_node_inputs(g, m, &map, err)) != BF_OK) goto out;
    if ((st = convert_subgraphs(g, m, &map, err)) != BF_OK) goto out;
    st = convert_outputs(g, m, &map, err);
out:
    bf__free(map.slots);
    return st;
}

/* The weights arena for mp's large initializers (their sizes known from
 * the unpacked headers and the cut ranges, and only for data that is there:
 * dims alone could ask for gigabytes). NULL when there are none or no arena
 * can be made: the heap then. */
static bf__warena *make_arena(const Onnx__ModelProto *mp, const bf__raw_range *ranges, int huge)
{
    const Onnx__GraphProto *g = mp->graph;
    size_t pg = bf__warena_page(), total = 0;
    for (size_t i = 0; g && i < g->n_initializer; i++) {
        size_t nb = bf__tensor_proto_nbytes(g->initializer[i], ranges ? &ranges[i] : NULL);
        if (nb < BF__WARENA_MIN_BYTES) continue;
        nb = (nb + pg - 1) / pg * pg;
        if (nb > SIZE_MAX - total) return NULL;
        total += nb;
    }
    return total ? bf__warena_create_opts(total, huge) : NULL;
}

static bf_status parse(const uint8_t *buf, size_t len, uint8_t *map, const char *label,
                       const bf_load_limits *lim, bf_model **out, bf_error *err)
{
    bf_status st = BF_OK;
    Onnx__ModelProto *mp = NULL;
    bf_model *m = NULL;
    bf__stripped sp = {0};
    raw_src src = {.map = map};

    *out = NULL;
    m = bf__calloc(1, sizeof *m);
    if (!m) return bf_error_set(err, BF_ENOMEM, "out of memory");
    m->label = bf__strdup(label ? label : "model");
    if (!m->label) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }

    if ((st = bf__onnx_check_limits(buf, len, lim, m->label, err)) != BF_OK) goto out;
    /* the model without its large raw_data, which is then read from buf
     * tensor by tensor; anything unexpected: the whole buffer, as protobuf-c
     * reads it, so that errors read as they always have */
    if ((st = bf__onnx_strip(buf, len, &sp, err)) != BF_OK) goto out;
    if (sp.buf) {
        mp = onnx__model_proto__unpack(NULL, sp.len, sp.buf);
        if (mp && (mp->graph ? mp->graph->n_initializer : 0) == sp.n_ranges) {
            src.ranges = sp.ranges;
            for (size_t i = 0; i < sp.n_ranges; i++) {
                sp.ranges[i].data = buf + sp.ranges[i].off;
                sp.ranges[i].droppable = map != NULL;
            }
        } else if (mp) {
            onnx__model_proto__free_unpacked(mp, NULL);
            mp = NULL;
        }
        bf__free(sp.buf);   /* protobuf-c copied what it kept */
        sp.buf = NULL;
    }
    if (!mp) mp = onnx__model_proto__unpack(NULL, len, buf);
    if (!mp) {
        char why[300];
        bf__onnx_diagnose(buf, len, why, sizeof why);
        st = bf_error_set(err, BF_EFORMAT, "%s: not a valid ONNX model (%zu bytes): %s", m->label, len, why);
        goto out;
    }
    m->warena = make_arena(mp, src.ranges, lim && lim->huge_pages);
    m->tie_order = lim ? lim->tie_order : BF_TIE_ORDER_ONNX;
    if (m->tie_order != BF_TIE_ORDER_ONNX && m->tie_order != BF_TIE_ORDER_PYTORCH) {
        st = bf_error_set(err, BF_EINVAL, "%s: tie_order %d is neither ONNX (0) nor PYTORCH (1)", m->label, m->tie_order);
        goto out;
    }
    if ((st = convert(mp, m, &src, err)) != BF_OK) goto out;
    bf__warena_seal(m->warena);
    m->wpack = bf__wpack_create();   /* NULL (no memory): products pack per call */
    if ((st = bf__graph_sort(m, err)) != BF_OK) goto out;
    if ((st = bf__graph_index_params(m, err)) != BF_OK) goto out;
    if ((st = bf__torch_names(m, err)) != BF_OK) goto out;
    *out = m;
    m = NULL;
out:
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    bf__onnx_stripped_free(&sp);
    bf_model_free(m);
    return st;
}

bf_status bf__model_parse(const void *buf, size_t len, const char *label, const bf_load_limits *lim,
                          bf_model **out, bf_error *err)
{
    return parse(buf, len, NULL, label, lim, out, err);
}

/* The file is mapped read-only, not read into memory: protobuf-c reads the
 * model's structure from it, the initializers are converted from it one by
 * one, and each one's pages are given back once converted (release_file).
 * Peak memory: the model's tensors plus one tensor's pages of file. */
bf_status bf__model_parse_file(const char *path, const bf_load_limits *lim, bf_model **out,
                               bf_error *err)
{
    bf_status st;
    uint8_t *buf = NULL, *map = NULL;
    FILE *f = fopen(path, "rb");
    *out = NULL;
    if (!f) return bf_error_set(err, errno == ENOENT ? BF_ENOTFOUND : BF_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = bf_error_set(err, BF_EIO, "%s: not a regular file (a directory?); give the path of an .onnx file", path);
        goto out;
    }
    if (sb.st_size < 0) { st = bf_error_set(err, BF_EIO, "%s: cannot tell its size", path); goto out; }
    size_t size = (size_t)sb.st_size;
    if (size > MAX_MODEL_BYTES) {
        st = bf_error_set(err, BF_EUNSUPPORTED, "%s: %zu bytes; ONNX protobuf files are limited to 2 GiB", path, size);
        goto out;
    }
#if defined(__unix__)
    if (size > 0) {
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
        if (p != MAP_FAILED) map = p;
    }
#endif
    if (!map) {   /* an empty file, or no mmap: read it */
        buf = bf__malloc(size + 1);
        if (!buf) { st = bf_error_set(err, BF_ENOMEM, "%s: out of memory for %zu bytes", path, size); goto out; }
        if (fread(buf, 1, size, f) != size) {
            st = bf_error_set(err, BF_EIO, "%s: read failed: %s", path, ferror(f) ? strerror(errno) : "short read");
            goto out;
        }
    }
    const char *base = strrchr(path, '/');
    st = parse(map ? map : buf, size, map, base ? base + 1 : path, lim, out, err);
out:
#if defined(__unix__)
    if (map) munmap(map, size);
#endif
    fclose(f);
    bf__free(buf);
    return st;
}

/* --- accessors */

int64_t bf_model_opset(const bf_model *m) { return m->opset; }
const char *bf_model_producer(const bf_model *m) { return m->producer; }
size_t bf_model_num_inputs(const bf_model *m) { return m->n_inputs; }
const bf_value_info *bf_model_input(const bf_model *m, size_t i) { return i < m->n_inputs ? &m->inputs[i] : NULL; }
size_t bf_model_num_outputs(const bf_model *m) { return m->n_outputs; }
const bf_value_info *bf_model_output(const bf_model *m, size_t i) { return i < m->n_outputs ? &m->outputs[i] : NULL; }
size_t bf_model_num_nodes(const bf_model *m) { return m->n_nodes; }
const char *bf_model_node_op(const bf_model *m, size_t i) { return i < m->n_nodes ? m->nodes[m->order[i]].op_type : NULL; }
const char *bf_model_node_name(const bf_model *m, size_t i) { return i < m->n_nodes ? m->nodes[m->order[i]].name : NULL; }
size_t bf_model_num_params(const bf_model *m) { return m->n_params; }
int bf__param_is_zero_point(const bf_model *m, size_t p) { return p < m->n_params && m->param_zp && m->param_zp[p]; }

int bf__param_in_arena(const bf_model *m, size_t p)
{
    const bf_model *root = m;
    while (root->base) root = root->base;
    return p < m->n_params && bf__warena_owns(root->warena, m->params[p].tensor->data);
}
const bf_param_info *bf_model_param(const bf_model *m, size_t i) { return i < m->n_params ? &m->params[i] : NULL; }
int64_t bf_model_param_elements(const bf_model *m) { return m->param_elements; }

int64_t bf_model_find_param(const bf_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].tensor->name, name) == 0) return (int64_t)i;
    return -1;
}

int64_t bf_model_find_value(const bf_model *m, const char *name)
{
    for (size_t i = 0; name && i < m->n_values; i++)
        if (m->values[i].name && strcmp(m->values[i].name, name) == 0) return (int64_t)i;
    return -1;
}
