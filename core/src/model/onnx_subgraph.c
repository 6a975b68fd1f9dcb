/* The graph attributes of an ONNX model's nodes (If, Loop, Scan) converted
 * into bf__subgraphs (graph.h): each subgraph's own values as locals, its
 * reads of the graphs around it as references, nested ones recursively. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "model/graph.h"
#include "model/onnx_convert.h"
#include "model/onnx_load.h"

static bf_status add_local(bf_model *m, const Onnx__NodeProto *np, bf__subgraph *g, bf__name_map *lm, bf__value *lv,
                           const char *name, int *idx, bf_error *err)
{
    if (bf__name_find(lm, name) >= 0)
        return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s): its subgraph defines '%s' twice (ONNX values "
                            "are assigned once)", m->label, np->name ? np->name : "", np->op_type, name);
    g->names[g->n_locals] = bf__strdup(name);
    if (!g->names[g->n_locals]) return bf__load_oom(err, m);
    lv[g->n_locals].name = g->names[g->n_locals];
    *idx = (int)g->n_locals++;
    bf__name_insert(lm, g->names[*idx], *idx);
    return BF_OK;
}

/* The subgraph being converted's parent (a subgraph too) and its names:
 * what the nested one reads of it becomes an implicit local (graph.h). */
typedef struct sub_parent {
    const bf__name_map *lm;
} sub_parent;

/* A reference (graph.h) to the value a subgraph reads as `name`: its own
 * first, then its parent subgraph's (as an implicit local), then the main
 * graph's. */
static bf_status sub_ref(bf_model *m, const Onnx__NodeProto *np, bf__name_map *lm, const bf__name_map *outer,
                         const sub_parent *par, bf__subgraph *g, const char *name, int *ref, bf_error *err)
{
    if (!name[0]) { *ref = -1; return BF_OK; }
    int v = bf__name_find(lm, name);
    if (v >= 0) { *ref = BF__SUB_REF(v); return BF_OK; }
    int pv = par ? bf__name_find(par->lm, name) : -1;
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
    v = bf__name_find(outer, name);
    if (v >= 0) { *ref = v; return BF_OK; }
    return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s): its subgraph reads '%s', which neither the subgraph "
                        "nor the graph around it defines", m->label, np->name ? np->name : "", np->op_type, name);
}

static bf_status convert_subgraph(bf_model *m, const Onnx__NodeProto *np, const Onnx__GraphProto *gp,
                                  const bf__name_map *outer, const sub_parent *par, bf__subgraph *g, bf_error *err);

/* The graph attributes of subgraph g's nodes (sp's), once g's own values
 * all exist: nested subgraphs, their reads of g as implicit locals. */
static bf_status convert_nested(bf_model *m, const Onnx__GraphProto *gp, bf__subgraph *g, bf__name_map *lm,
                                const bf__name_map *outer, bf_error *err)
{
    sub_parent par = {.lm = lm};
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *sp = gp->node[i];
        for (size_t j = 0; j < sp->n_attribute && j < g->nodes[i].n_attrs; j++) {
            const Onnx__AttributeProto *ap = sp->attribute[j];
            bf__attr *a = &g->nodes[i].attrs[j];
            if (ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !ap->g) continue;
            a->g = bf__calloc(1, sizeof *a->g);
            if (!a->g) return bf__load_oom(err, m);
            a->type = BF__ATTR_GRAPH;
            bf_status st = convert_subgraph(m, sp, ap->g, outer, &par, a->g, err);
            if (st != BF_OK) return st;
        }
    }
    return BF_OK;
}

static bf_status convert_subgraph(bf_model *m, const Onnx__NodeProto *np, const Onnx__GraphProto *gp,
                                  const bf__name_map *outer, const sub_parent *par, bf__subgraph *g, bf_error *err)
{
    bf_status st = BF_OK;
    size_t max_locals = gp->n_input + gp->n_initializer + gp->n_output;
    /* outputs, and implicit locals (at most one per reference) */
    for (size_t i = 0; i < gp->n_node; i++) max_locals += gp->node[i]->n_output + gp->node[i]->n_input;
    bf__name_map lm = {.cap = 16};
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
        !g->implicit_ref) { st = bf__load_oom(err, m); goto out; }
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
        n->name = bf__dup_or_empty(sp->name);
        /* an op of another domain keeps its domain in the name, so that no
         * pattern takes it for the standard op */
        if (sp->domain && sp->domain[0] && strcmp(sp->domain, "ai.onnx") != 0) {
            size_t len = strlen(sp->domain) + strlen(sp->op_type ? sp->op_type : "") + 2;
            n->op_type = bf__malloc(len);
            if (n->op_type) snprintf(n->op_type, len, "%s:%s", sp->domain, sp->op_type ? sp->op_type : "");
        } else {
            n->op_type = bf__dup_or_empty(sp->op_type);
        }
        n->in = bf__malloc((sp->n_input + 1) * sizeof *n->in);
        n->out = bf__malloc((sp->n_output + 1) * sizeof *n->out);
        n->attrs = bf__calloc(sp->n_attribute + 1, sizeof *n->attrs);
        if (!n->name || !n->op_type || !n->in || !n->out || !n->attrs) { st = bf__load_oom(err, m); goto out; }
        if (sp->n_input > BF__MAX_IO || sp->n_output > BF__MAX_IO) {
            st = bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' (%s) in the subgraph of node '%s' has %zu inputs and "
                              "%zu outputs; at most %d each supported", m->label, n->name, n->op_type,
                              np->name ? np->name : "", sp->n_input, sp->n_output, BF__MAX_IO);
            goto out;
        }
        for (size_t j = 0; j < sp->n_attribute; j++) {
            n->n_attrs = j + 1;
            if ((st = bf__convert_attr(m, sp, sp->attribute[j], &n->attrs[j], err)) != BF_OK) goto out;
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
 * (theirs nested through convert_nested). */
bf_status bf__convert_subgraphs(const Onnx__GraphProto *gp, bf_model *m, const bf__name_map *outer, bf_error *err)
{
    for (size_t i = 0; i < m->n_nodes; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        for (size_t j = 0; j < np->n_attribute && j < m->nodes[i].n_attrs; j++) {
            const Onnx__AttributeProto *ap = np->attribute[j];
            bf__attr *a = &m->nodes[i].attrs[j];
            if (ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !ap->g) continue;
            a->g = bf__calloc(1, sizeof *a->g);
            if (!a->g) return bf__load_oom(err, m);
            a->type = BF__ATTR_GRAPH;
            bf_status st = convert_subgraph(m, np, ap->g, outer, NULL, a->g, err);
            if (st != BF_OK) return st;
        }
    }
    return BF_OK;
}
