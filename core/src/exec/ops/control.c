/* If and Loop as torch.onnx.export writes them (a detector's batched_nms,
 * a mask's pasting). Which branch runs, and how many times a body runs, is
 * data: both ops are dynamic steps (exec/plan_dyn.c), and their subgraphs
 * run node by node at run time by exec/plan_sub.c, which prepares each node
 * on the values of that run. What is checked here, when the plan is built:
 * the graph attributes are there, the counts of inputs and outputs agree,
 * cond is one bool. Values the subgraphs read from the graph around them
 * are extra inputs of the node, after the ONNX ones (exec/bind.c), so that
 * the plan keeps them until the node has run. */
#include <string.h>

#include "exec/op.h"

/* the node's graph attribute `name`, or NULL with an error naming it; its
 * nodes hold no control flow of their own (subgraphs are kept one level
 * deep: model/graph.h) */
static const bf__subgraph *graph_attr(const bf__prep *p, const char *name, bf_error *err)
{
    const bf__attr *a = bf__node_attr(p->node, name);
    if (!a || a->type != BF__ATTR_GRAPH || !a->g) {
        bf__node_error(err, p->node, BF_EFORMAT,
                       "attribute '%s' %s (a subgraph inside another subgraph is not supported)", name,
                       a ? "is not a graph bitflip keeps" : "is missing");
        return NULL;
    }
    for (size_t i = 0; i < a->g->n_nodes; i++) {
        const char *op = a->g->nodes[i].op_type;
        if (strcmp(op, "Loop") == 0 || strcmp(op, "Scan") == 0) {
            bf__node_error(err, p->node, BF_EUNSUPPORTED,
                           "node '%s' (%s) in its %s: a Loop or Scan inside a subgraph is not supported (an If is)",
                           a->g->nodes[i].name, op, name);
            return NULL;
        }
    }
    return a->g;
}

/* cond: one element, bool (a Loop's may be omitted) */
static bf_status check_cond(const bf__prep *p, int i, const char *what, bf_error *err)
{
    const bf_tensor *c = i < p->n_in ? p->in[i] : NULL;
    if (!c) return BF_OK;
    if (c->dtype != BF_BOOL)
        return bf__node_error(err, p->node, BF_EFORMAT, "%s is %s; it must be bool", what, bf_dtype_name(c->dtype));
    if (bf_tensor_numel(c) != 1)
        return bf__node_error(err, p->node, BF_ESHAPE, "%s has %lld elements; it must have one", what,
                              (long long)bf_tensor_numel(c));
    return BF_OK;
}

static bf_status if_prepare(bf__prep *p, bf_error *err)
{
    const bf__subgraph *then_g = graph_attr(p, "then_branch", err), *else_g = then_g ? graph_attr(p, "else_branch", err) : NULL;
    if (!then_g || !else_g) return err ? err->status : BF_EFORMAT;
    if (!p->in[0]) return bf__node_error(err, p->node, BF_EFORMAT, "input 'cond' is required");
    bf_status st = check_cond(p, 0, "input 'cond'", err);
    if (st) return st;
    if (then_g->n_out != p->n_out || else_g->n_out != p->n_out)
        return bf__node_error(err, p->node, BF_EFORMAT,
                              "the node has %d outputs, its then_branch %d and its else_branch %d: they must agree",
                              p->n_out, then_g->n_out, else_g->n_out);
    if (then_g->n_in || else_g->n_in)
        return bf__node_error(err, p->node, BF_EFORMAT, "a branch has inputs (%d and %d); an If's branches take none",
                              then_g->n_in, else_g->n_in);
    /* which branch, and so every output's shape, is the data's */
    p->data_dependent = 1;
    return BF_OK;
}

static bf_status loop_prepare(bf__prep *p, bf_error *err)
{
    const bf__subgraph *body = graph_attr(p, "body", err);
    if (!body) return err ? err->status : BF_EFORMAT;
    /* ONNX: body inputs (iteration, cond, N carried), outputs (cond, N
     * carried, K scan); the node: inputs (M, cond, N initial), outputs (N
     * final, K scanned) */
    int n_carried = body->n_in - 2;
    if (n_carried < 0 || body->n_out < 1 + n_carried)
        return bf__node_error(err, p->node, BF_EFORMAT, "its body has %d inputs and %d outputs; a Loop body takes the "
                              "iteration number, cond and each carried value, and gives cond and each of them",
                              body->n_in, body->n_out);
    int n_scan = body->n_out - 1 - n_carried;
    if (p->n_out != n_carried + n_scan)
        return bf__node_error(err, p->node, BF_EFORMAT, "the node has %d outputs; its body carries %d values and "
                              "scans %d", p->n_out, n_carried, n_scan);
    if (p->n_in < 2 + n_carried)
        return bf__node_error(err, p->node, BF_EFORMAT, "the node has %d inputs; its body carries %d values, so it "
                              "takes M, cond and %d initial values", p->n_in, n_carried, n_carried);
    for (int j = 0; j < n_carried; j++)
        if (!p->in[2 + j])
            return bf__node_error(err, p->node, BF_EFORMAT, "carried value %d has no initial value", j);
    const bf_tensor *m = p->in[0];
    if (m && (m->dtype != BF_I64 || bf_tensor_numel(m) != 1))
        return bf__node_error(err, p->node, BF_EFORMAT, "input 'M' must be one int64, is %s of %lld elements",
                              bf_dtype_name(m->dtype), (long long)bf_tensor_numel(m));
    bf_status st = check_cond(p, 1, "input 'cond'", err);
    if (st) return st;
    /* how many times, and so the scans' shapes and maybe the carried, is the data's */
    p->data_dependent = 1;
    return BF_OK;
}

/* run through exec/plan_sub.c (plan_dyn.c calls it for these ops) */
static bf_status control_run(const bf__ctx *c, bf_error *err)
{
    return bf__node_error(err, c->node, BF_EFORMAT, "internal error: a control-flow op run outside a plan");
}

int bf__op_is_control(const bf__op *op) { return op && op->run == control_run; }

const bf__op bf__ops_control[] = {
    {"If", 1, -1, 1, BF__MAX_IO, 0, if_prepare, control_run},
    {"Loop", 2, -1, 0, BF__MAX_IO, 0, loop_prepare, control_run},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL},
};
