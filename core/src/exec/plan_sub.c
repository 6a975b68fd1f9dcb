/* If and Loop at run time: their subgraphs run node by node, each node
 * prepared on the values of this run (op.h, at_run) and its outputs and
 * scratch taken from the plan's run-time arena (plan_dyn.c). A subgraph's
 * own values live in a table of tensors (its locals); what it reads from the
 * graph around it is read from the plan's values (its node's extra inputs,
 * exec/bind.c), parameters included, so weight faults land there too. Its
 * own initializers are constants: no fault reaches them.
 *
 * If: the branch cond picks runs once, its outputs copied into the node's.
 * Loop (ONNX): while the iteration count is below M (if given) and cond
 * (if given) holds, the body runs on (iteration, cond, carried values);
 * its outputs are the next cond, the next carried values and one slice of
 * each scan output; the node's outputs are the last carried values and the
 * scans, stacked on a new axis 0. Every iteration's values stay in the
 * arena until the run ends, so a Loop's memory is the sum over its
 * iterations, capped as the arena is (bf_plan_opts.max_run_bytes); the
 * iterations are capped by BF__LOOP_MAX_ITERS (docs/LIMITS.md). */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "exec/plan_impl.h"

#define MAX_NUMEL (INT64_C(1) << 34)

static bf_status node_err(const bf_plan *p, const bf__node *n, bf_status st, const char *what, bf_error *err)
{
    return bf_error_set(err, st, "%s: node '%s' (%s): %s", p->model->label, n->name, n->op_type, what);
}

/* t's storage: nbytes from the arena, its shape checked first */
static bf_status alloc_tensor(bf_plan *p, const bf__node *n, bf_tensor *t, bf_error *err)
{
    if (!bf_dtype_size(t->dtype) || t->ndim < 0 || t->ndim > BF_MAX_DIMS)
        return node_err(p, n, BF_EFORMAT, "internal error: an output's type not set at run time", err);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->dims[d] < 0 || (t->dims[d] > 0 && numel > MAX_NUMEL / t->dims[d]))
            return node_err(p, n, BF_ESHAPE, "an output dim is negative or too large at run time", err);
        numel *= t->dims[d];
    }
    return bf__dyn_alloc_for(p, n, -2, bf_tensor_nbytes(t), &t->data, err);
}

/* a reference of a subgraph (graph.h): a local, or a value of the plan */
static const bf_tensor *resolve(bf_plan *p, bf_tensor *loc, const unsigned char *set, int r)
{
    if (r >= 0) return &p->vals[r];
    if (r == -1) return NULL;
    return set[BF__SUB_LOCAL(r)] ? &loc[BF__SUB_LOCAL(r)] : NULL;
}

static bf_status sub_run(bf_plan *p, const bf__node *own, const bf__subgraph *g, bf_tensor *loc, unsigned char *set,
                         bf_error *err);
static bf_status sub_locals(bf_plan *p, const bf__subgraph *g, bf_tensor **loc, unsigned char **set, bf_error *err);

/* An If inside a subgraph (torchvision's batched_nms has one in its other
 * branch): cond and the picked branch's implicit locals read from the
 * parent's values (ploc), its outputs set as the parent's. */
static bf_status nested_if(bf_plan *p, const bf__node *n, bf_tensor *ploc, unsigned char *pset, bf_error *err)
{
    const bf_tensor *c = n->n_in > 0 ? resolve(p, ploc, pset, n->in[0]) : NULL;
    if (!c || c->dtype != BF_BOOL || bf_tensor_numel(c) != 1)
        return node_err(p, n, BF_EFORMAT, "input 'cond' must be one bool", err);
    const bf__attr *a = bf__node_attr(n, ((const uint8_t *)c->data)[0] ? "then_branch" : "else_branch");
    const bf__subgraph *g = a && a->type == BF__ATTR_GRAPH ? a->g : NULL;
    if (!g || g->n_out != n->n_out || g->n_in)
        return node_err(p, n, BF_EFORMAT, "its branch is missing, has inputs, or gives another number of outputs", err);
    for (size_t i = 0; i < g->n_nodes; i++)
        if (bf__node_attr(&g->nodes[i], "then_branch") || bf__node_attr(&g->nodes[i], "body"))
            return node_err(p, n, BF_EUNSUPPORTED, "control flow three deep is not supported", err);
    bf_tensor *loc;
    unsigned char *set;
    bf_status st = sub_locals(p, g, &loc, &set, err);
    for (int k = 0; st == BF_OK && k < g->n_implicit; k++) {
        const bf_tensor *v = resolve(p, ploc, pset, g->implicit_ref[k]);
        if (!v) return node_err(p, n, BF_EFORMAT, "its branch reads a value not computed yet", err);
        loc[g->implicit_local[k]] = *v;
        set[g->implicit_local[k]] = 1;
    }
    if (st == BF_OK) st = sub_run(p, n, g, loc, set, err);
    for (int j = 0; st == BF_OK && j < n->n_out; j++) {
        const bf_tensor *v = resolve(p, loc, set, g->out[j]);
        if (!v) return node_err(p, n, BF_EFORMAT, "a branch output is neither computed nor read from around it", err);
        if (n->out[j] == -1) continue;
        int l = BF__SUB_LOCAL(n->out[j]);
        const char *name = ploc[l].name;
        ploc[l] = *v;
        ploc[l].name = name;
        pset[l] = 1;
    }
    return st;
}

/* One pass over subgraph g, owned by node `own`: its nodes in file order
 * (torch.onnx.export writes them in topological order; a node reading a
 * local not computed yet is an error naming both). */
static bf_status sub_run(bf_plan *p, const bf__node *own, const bf__subgraph *g, bf_tensor *loc, unsigned char *set,
                         bf_error *err)
{
    bf__prep *prep = p->sub_prep;
    bf_tensor dummy[BF__MAX_IO];
    bf_status st;
    for (size_t k = 0; k < g->n_nodes; k++) {
        const bf__node *n = &g->nodes[k];
        if (strcmp(n->op_type, "If") == 0) {
            if ((st = nested_if(p, n, loc, set, err)) != BF_OK) return st;
            continue;
        }
        if (!n->op || strcmp(n->op_type, "Loop") == 0)
            return bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' (%s) in the subgraph of node '%s': %s",
                                p->model->label, n->name, n->op_type, own->name,
                                n->op ? "a Loop inside a subgraph is not supported" : "unsupported op");
        bf__prep_at_run(prep, p, n, n->n_in, n->n_out);
        for (int j = 0; j < n->n_in; j++) {
            prep->in[j] = resolve(p, loc, set, n->in[j]);
            if (n->in[j] < -1 && !prep->in[j])
                return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s) in the subgraph of node '%s' reads '%s' before "
                                    "any node computes it (the subgraph is not in topological order)", p->model->label,
                                    n->name, n->op_type, own->name, g->names[BF__SUB_LOCAL(n->in[j])]);
        }
        for (int j = 0; j < n->n_out; j++) {
            bf_tensor *t = n->out[j] == -1 ? &dummy[j] : &loc[BF__SUB_LOCAL(n->out[j])];
            const char *name = n->out[j] == -1 ? NULL : g->names[BF__SUB_LOCAL(n->out[j])];
            memset(t, 0, sizeof *t);
            t->name = name;
            prep->out[j] = t;
        }
        if ((st = n->op->prepare(prep, err)) != BF_OK) {
            bf_error_prefix(err, "%s: at run time, in the subgraph of node '%s'", p->model->label, own->name);
            return st;
        }
        if (prep->data_dependent)
            return node_err(p, n, BF_EFORMAT, "internal error: data_dependent at run time", err);
        for (int j = 0; j < n->n_out; j++)
            if ((st = alloc_tensor(p, n, prep->out[j], err)) != BF_OK) return st;
        void *scratch = NULL;
        if ((st = bf__dyn_alloc(p, prep->scratch, "a subgraph node's scratch", &scratch, err)) != BF_OK) return st;
        bf__ctx c = {.node = n, .params = prep->params, .n_in = n->n_in, .n_out = n->n_out,
                     .in = prep->in, .out = prep->out, .scratch = scratch};
        if ((st = n->op->run(&c, err)) != BF_OK) return st;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] != -1) set[BF__SUB_LOCAL(n->out[j])] = 1;
    }
    return BF_OK;
}

/* The locals of g with its initializers set, from the arena. */
static bf_status sub_locals(bf_plan *p, const bf__subgraph *g, bf_tensor **loc, unsigned char **set, bf_error *err)
{
    void *a = NULL, *b = NULL;
    bf_status st = bf__dyn_alloc(p, (g->n_locals + 1) * sizeof **loc, "a subgraph's values", &a, err);
    if (st == BF_OK) st = bf__dyn_alloc(p, g->n_locals + 1, "a subgraph's values", &b, err);
    if (st != BF_OK) return st;
    *loc = a;
    *set = b;
    memset(*loc, 0, (g->n_locals + 1) * sizeof **loc);
    memset(*set, 0, g->n_locals + 1);
    for (size_t i = 0; i < g->n_locals; i++)
        if (g->inits[i]) (*loc)[i] = *g->inits[i], (*set)[i] = 1;
    return BF_OK;
}

/* out takes src's type, shape and a copy of its data, in the arena */
static bf_status copy_out(bf_plan *p, const bf__node *n, bf_tensor *out, const bf_tensor *src, bf_error *err)
{
    const char *name = out->name;
    *out = *src;
    out->name = name;
    out->data = NULL;
    bf_status st = alloc_tensor(p, n, out, err);
    if (st == BF_OK && bf_tensor_nbytes(src)) memcpy(out->data, src->data, bf_tensor_nbytes(src));
    return st;
}

static const bf__subgraph *graph_of(const bf__node *n, const char *name)
{
    const bf__attr *a = bf__node_attr(n, name);
    return a && a->type == BF__ATTR_GRAPH ? a->g : NULL;
}

static int truth(const bf_tensor *c)
{
    return c->dtype == BF_BOOL && bf_tensor_numel(c) == 1 && ((const uint8_t *)c->data)[0] != 0;
}

static bf_status run_if(bf_plan *p, bf__step *s, bf_error *err)
{
    const bf__node *n = s->node;
    const bf__subgraph *g = graph_of(n, truth(s->in[0]) ? "then_branch" : "else_branch");
    bf_tensor *loc;
    unsigned char *set;
    bf_status st = sub_locals(p, g, &loc, &set, err);
    if (st == BF_OK) st = sub_run(p, n, g, loc, set, err);
    for (int j = 0; st == BF_OK && j < s->n_out; j++) {
        const bf_tensor *src = resolve(p, loc, set, g->out[j]);
        if (!src)
            return node_err(p, n, BF_EFORMAT, "a branch output is neither computed nor read from around it", err);
        st = copy_out(p, n, s->out[j], src, err);
    }
    return st;
}

bf_status bf__sub_run_step(bf_plan *p, size_t i, bf_error *err)
{
    bf__step *s = &p->steps[i];
    const bf__node *n = s->node;
    bf__prep *prep = p->dyn_prep;
    /* the build-time checks, on this run's inputs (cond's type and size) */
    bf__prep_at_run(prep, p, n, s->n_in, s->n_out);
    for (int j = 0; j < s->n_in; j++) prep->in[j] = s->in[j];
    for (int j = 0; j < s->n_out; j++) prep->out[j] = s->out[j];
    bf_status st = n->op->prepare(prep, err);
    if (st != BF_OK) {
        bf_error_prefix(err, "%s: at run time", p->model->label);
        return st;
    }
    if (strcmp(n->op_type, "If") == 0) return run_if(p, s, err);
    return bf__sub_run_loop(p, s, err);
}

/* A Loop's state between iterations: the carried values and each scan
 * output's slices so far (struct copies; their data stays in the arena). */
typedef struct loop_state {
    int n_carried, n_scan;
    bf_tensor carried[BF__MAX_IO];
    bf_tensor *slices;        /* n_scan x cap */
    int64_t cap;
} loop_state;

static bf_status grow_slices(bf_plan *p, loop_state *ls, bf_error *err)
{
    int64_t cap = ls->cap ? 2 * ls->cap : 16;
    void *mem = NULL;
    bf_status st = bf__dyn_alloc(p, (size_t)cap * (size_t)ls->n_scan * sizeof(bf_tensor) + 1, "a Loop's scan outputs",
                                 &mem, err);
    if (st != BF_OK) return st;
    bf_tensor *ns = mem;
    for (int k = 0; k < ls->n_scan && ls->cap; k++)
        memcpy(ns + k * cap, ls->slices + k * ls->cap, (size_t)ls->cap * sizeof *ns);
    ls->slices = ns;
    ls->cap = cap;
    return BF_OK;
}

/* a fresh scalar of dtype dt in the arena, holding v */
static bf_status scalar(bf_plan *p, bf_tensor *t, bf_dtype dt, int64_t v, bf_error *err)
{
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    bf_status st = bf__dyn_alloc(p, 8, "a Loop's iteration number", &t->data, err);
    if (st != BF_OK) return st;
    if (dt == BF_I64) *(int64_t *)t->data = v;
    else *(uint8_t *)t->data = (uint8_t)(v != 0);
    return BF_OK;
}

/* One iteration: the body on (it, cond, carried); the next carried and
 * cond, and this iteration's slices, into ls. */
static bf_status loop_iteration(bf_plan *p, const bf__node *n, const bf__subgraph *g, loop_state *ls, int64_t it,
                                bf_tensor *loc, unsigned char *set, int *cond, bf_error *err)
{
    bf_status st;
    memset(set, 0, g->n_locals + 1);
    for (size_t i = 0; i < g->n_locals; i++)
        if (g->inits[i]) set[i] = 1;
    if ((st = scalar(p, &loc[g->in[0]], BF_I64, it, err)) != BF_OK) return st;
    if ((st = scalar(p, &loc[g->in[1]], BF_BOOL, *cond, err)) != BF_OK) return st;
    loc[g->in[0]].name = g->names[g->in[0]];
    loc[g->in[1]].name = g->names[g->in[1]];
    set[g->in[0]] = set[g->in[1]] = 1;
    for (int j = 0; j < ls->n_carried; j++) {
        loc[g->in[2 + j]] = ls->carried[j];
        loc[g->in[2 + j]].name = g->names[g->in[2 + j]];
        set[g->in[2 + j]] = 1;
    }
    if ((st = sub_run(p, n, g, loc, set, err)) != BF_OK) return st;
    const bf_tensor *c = resolve(p, loc, set, g->out[0]);
    if (!c || c->dtype != BF_BOOL || bf_tensor_numel(c) != 1)
        return node_err(p, n, BF_EFORMAT, "its body's cond output is not one bool", err);
    *cond = truth(c);
    bf_tensor next[BF__MAX_IO];
    for (int j = 0; j < ls->n_carried + ls->n_scan; j++) {
        const bf_tensor *v = resolve(p, loc, set, g->out[1 + j]);
        if (!v) return node_err(p, n, BF_EFORMAT, "a body output is neither computed nor read from around it", err);
        next[j] = *v;
    }
    memcpy(ls->carried, next, (size_t)ls->n_carried * sizeof *next);
    if (ls->n_scan && it >= ls->cap && (st = grow_slices(p, ls, err)) != BF_OK) return st;
    for (int k = 0; k < ls->n_scan; k++) {
        const bf_tensor *v = &next[ls->n_carried + k], *first = &ls->slices[k * ls->cap];
        if (it > 0 && (v->dtype != first->dtype || v->ndim != first->ndim ||
                       memcmp(v->dims, first->dims, (size_t)v->ndim * sizeof v->dims[0]) != 0))
            return node_err(p, n, BF_ESHAPE, "a scan output changes shape from one iteration to the next", err);
        ls->slices[k * ls->cap + it] = *v;
    }
    return BF_OK;
}

/* scan output k of `iters` iterations: the slices stacked on a new axis 0 */
static bf_status stack(bf_plan *p, const bf__node *n, const loop_state *ls, int k, int64_t iters, bf_tensor *out,
                       bf_error *err)
{
    const char *name = out->name;
    memset(out, 0, sizeof *out);
    out->name = name;
    if (iters == 0) {
        /* no slice says the type: an empty float32 [0] */
        out->dtype = BF_F32;
        out->ndim = 1;
        return alloc_tensor(p, n, out, err);
    }
    /* only now: with no iteration there may be no slices array at all */
    const bf_tensor *first = &ls->slices[k * ls->cap];
    if (first->ndim >= BF_MAX_DIMS) return node_err(p, n, BF_ESHAPE, "a scan output has too many dims", err);
    out->dtype = first->dtype;
    out->ndim = first->ndim + 1;
    out->dims[0] = iters;
    for (int d = 0; d < first->ndim; d++) out->dims[d + 1] = first->dims[d];
    bf_status st = alloc_tensor(p, n, out, err);
    size_t nb = bf_tensor_nbytes(first);
    for (int64_t it = 0; st == BF_OK && it < iters && nb; it++)
        memcpy((char *)out->data + (size_t)it * nb, ls->slices[k * ls->cap + it].data, nb);
    return st;
}

bf_status bf__sub_run_loop(bf_plan *p, bf__step *s, bf_error *err)
{
    const bf__node *n = s->node;
    const bf__subgraph *g = graph_of(n, "body");
    loop_state ls = {.n_carried = g->n_in - 2};
    ls.n_scan = g->n_out - 1 - ls.n_carried;
    int64_t trips = s->in[0] ? *(const int64_t *)s->in[0]->data : INT64_MAX, it = 0;
    int cond = s->in[1] ? truth(s->in[1]) : 1;
    for (int j = 0; j < ls.n_carried; j++) ls.carried[j] = *s->in[2 + j];
    bf_tensor *loc;
    unsigned char *set;
    bf_status st = sub_locals(p, g, &loc, &set, err);
    for (; st == BF_OK && it < trips && cond; it++) {
        if (it >= BF__LOOP_MAX_ITERS) {
            char msg[160];
            snprintf(msg, sizeof msg, "more than %lld iterations (trip count %lld): over the limit on a Loop's "
                     "iterations (docs/LIMITS.md)", (long long)BF__LOOP_MAX_ITERS, (long long)trips);
            return node_err(p, n, BF_ELIMIT, msg, err);
        }
        st = loop_iteration(p, n, g, &ls, it, loc, set, &cond, err);
    }
    for (int j = 0; st == BF_OK && j < ls.n_carried; j++) st = copy_out(p, n, s->out[j], &ls.carried[j], err);
    for (int k = 0; st == BF_OK && k < ls.n_scan; k++) st = stack(p, n, &ls, k, it, s->out[ls.n_carried + k], err);
    return st;
}
