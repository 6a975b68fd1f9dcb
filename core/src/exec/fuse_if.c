/* The If that torch.onnx.export writes for torch.squeeze(x, d), run as one
 * bf.SqueezeIfOne node.
 *
 * Where the exporter cannot tell the size of x's dim d (a dynamic axis, or a
 * shape its shape inference lost), it writes squeeze as a choice made on the
 * data (torch/onnx/symbolic_opset11.py, used from opset 11 on):
 *
 *   cond = Equal(Gather(Shape(x), [d], axis 0), [1])
 *   If(cond) then_branch: Squeeze(x, axes [d])     (axes an input from opset 13)
 *            else_branch: Identity(x)
 *
 * An If is a dynamic step in bitflip (its outputs' shapes are data), so
 * everything after it would be prepared on every run and the evaluator could
 * not read the graph's output: a CTR model's `.squeeze(1)` exported at opset
 * 11 with dynamic axes would not run. But a plan knows x's shape, and so the
 * branch: bf.SqueezeIfOne(x, axis d) (ops/shape.c) drops dim d when it is 1
 * and is the identity otherwise, which is what both the If and torch.squeeze
 * compute. Only exactly that If is taken: the condition must be made of
 * those nodes from the same x and d, and each branch must be that one node
 * (Constant nodes of its axes aside). The If node keeps its name and its
 * output, so what reads it and the activation fault site on it are unchanged;
 * the nodes of the condition stay in the graph, read by nothing, and no plan
 * computes them. */
#include <string.h>

#include "base/alloc.h"
#include "exec/fuse_loop.h"

/* The tensor a reference of subgraph g (NULL: of the main graph) holds when
 * it is a constant: an initializer that is no parameter, or a Constant
 * node's value; NULL otherwise. */
static const bf_tensor *const_of(const bf_model *m, const bf__subgraph *g, int ref)
{
    const bf__node *n = NULL;
    if (ref <= -2 && g) {
        int local = BF__SUB_LOCAL(ref);
        if ((size_t)local < g->n_locals && g->inits[local]) return g->inits[local];
        for (size_t i = 0; i < g->n_nodes && !n; i++)
            if (g->nodes[i].n_out == 1 && g->nodes[i].out[0] == ref) n = &g->nodes[i];
    } else if (ref >= 0 && (size_t)ref < m->n_values) {
        const bf__value *v = &m->values[ref];
        if (v->kind == BF__VAL_CONST) return v->init;
        if (v->kind == BF__VAL_NODE && v->producer >= 0) n = &m->nodes[v->producer];
    }
    if (!n || strcmp(n->op_type, "Constant") != 0 || n->n_in != 0 || n->n_attrs != 1) return NULL;
    const bf__attr *a = bf__node_attr(n, "value");
    return a && a->type == BF__ATTR_TENSOR ? a->t : NULL;
}

/* Whether a reference is a constant holding one integer (rank 0 or 1); *v its value. */
static int const_int(const bf_model *m, const bf__subgraph *g, int ref, int64_t *v)
{
    const bf_tensor *t = const_of(m, g, ref);
    if (!t || !t->data || bf_tensor_numel(t) != 1 || t->ndim > 1) return 0;
    if (t->dtype == BF_I64) *v = ((const int64_t *)t->data)[0];
    else if (t->dtype == BF_I32) *v = ((const int32_t *)t->data)[0];
    else return 0;
    return 1;
}

/* The main-graph node that computes value v with op `op`, or NULL. */
static const bf__node *made_by(const bf_model *m, int v, const char *op)
{
    if (v < 0 || (size_t)v >= m->n_values || m->values[v].kind != BF__VAL_NODE || m->values[v].producer < 0)
        return NULL;
    const bf__node *n = &m->nodes[m->values[v].producer];
    return strcmp(n->op_type, op) == 0 ? n : NULL;
}

/* The one node of branch g that is not a Constant, when it has op `op`, one
 * output and that output is the branch's one output; else NULL. */
static const bf__node *only_node(const bf__subgraph *g, const char *op)
{
    const bf__node *found = NULL;
    if (!g || g->n_in != 0 || g->n_out != 1) return NULL;
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (strcmp(g->nodes[i].op_type, "Constant") == 0) continue;
        if (found) return NULL;
        found = &g->nodes[i];
    }
    if (!found || strcmp(found->op_type, op) != 0 || found->n_out != 1 || found->out[0] != g->out[0]) return NULL;
    return found;
}

static const bf__subgraph *graph_attr(const bf__node *n, const char *name)
{
    const bf__attr *a = bf__node_attr(n, name);
    return a && a->type == BF__ATTR_GRAPH ? a->g : NULL;
}

/* Whether If node n is the exported torch.squeeze: x its input, *axis its d. */
static int is_squeeze_if(const bf_model *m, const bf__node *n, int *x, int64_t *axis)
{
    if (n->n_in != 1 || n->n_out != 1 || n->in[0] < 0 || n->out[0] < 0 || n->n_attrs != 2) return 0;
    const bf__subgraph *then_g = graph_attr(n, "then_branch"), *else_g = graph_attr(n, "else_branch");
    const bf__node *sq = only_node(then_g, "Squeeze"), *id = only_node(else_g, "Identity");
    if (!sq || !id || sq->n_in < 1 || sq->in[0] < 0 || id->n_in != 1 || id->in[0] != sq->in[0] || id->n_attrs) return 0;
    /* the axes: one, as the opset writes them */
    int64_t d;
    const bf__attr *axes = bf__node_attr(sq, "axes");
    if (m->opset < 13) {
        if (sq->n_in != 1 || sq->n_attrs != 1 || !axes || axes->type != BF__ATTR_INTS || axes->n != 1) return 0;
        d = axes->ints[0];
    } else if (sq->n_in != 2 || sq->n_attrs || !const_int(m, then_g, sq->in[1], &d)) {
        return 0;
    }
    /* cond = Equal(Gather(Shape(x), [d], axis 0), [1]), either way round */
    static const char *const gather_ok[] = {"axis", NULL};
    const bf__node *eq = made_by(m, n->in[0], "Equal");
    if (!eq || eq->n_in != 2 || eq->n_attrs) return 0;
    int64_t one;
    int side = -1;   /* the input that is not the constant 1 */
    if (const_int(m, NULL, eq->in[1], &one) && one == 1) side = 0;
    else if (const_int(m, NULL, eq->in[0], &one) && one == 1) side = 1;
    if (side < 0) return 0;
    const bf__node *ga = made_by(m, eq->in[side], "Gather");
    int64_t gd;
    if (!ga || ga->n_in != 2 || !bf__attrs_within(ga, gather_ok) || bf__int_attr(ga, "axis", 0, -1) != 0 ||
        !const_int(m, NULL, ga->in[1], &gd) || gd != d)
        return 0;
    const bf__node *sh = made_by(m, ga->in[0], "Shape");
    if (!sh || sh->n_in != 1 || sh->n_attrs || sh->in[0] != sq->in[0]) return 0;
    *x = sq->in[0];
    *axis = d;
    return 1;
}

static bf_status rewrite(bf_model *m, bf__node *n, int x, int64_t axis, bf_error *err)
{
    char *op_type = bf__strdup("bf.SqueezeIfOne"), *name = bf__strdup("axis");
    int *in = bf__malloc(sizeof *in);
    bf__attr *attrs = bf__calloc(1, sizeof *attrs);
    if (!op_type || !name || !in || !attrs) {
        bf__free(op_type), bf__free(name), bf__free(in), bf__free(attrs);
        return bf_error_set(err, BF_ENOMEM, "%s: out of memory while rewriting squeeze If nodes", m->label);
    }
    in[0] = x;
    attrs[0] = (bf__attr){.name = name, .type = BF__ATTR_INT, .i = axis};
    bf__node_replace(n, op_type, in, 1, attrs, 1);
    return BF_OK;
}

bf_status bf__fuse_squeeze_ifs(bf_model *m, bf_error *err)
{
    for (size_t i = 0; i < m->n_nodes; i++) {
        bf__node *n = &m->nodes[i];
        int x;
        int64_t axis;
        if (strcmp(n->op_type, "If") != 0 || !is_squeeze_if(m, n, &x, &axis)) continue;
        bf_status st = rewrite(m, n, x, axis, err);
        if (st != BF_OK) return st;
    }
    return BF_OK;
}
