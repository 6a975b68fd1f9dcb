/* The ONNX Loop that torch.onnx.export writes for nn.EmbeddingBag (and
 * F.embedding_bag: DLRM, Wide & Deep), run as one bf.EmbeddingBag node.
 *
 * bitflip runs no Loop in general (a plan has static shapes and no control
 * flow), but this one is a fixed computation over a trip count the graph
 * derives from input shapes, known when a plan is built. Its body, bag i:
 *
 *   s = Gather(S, i); e = Gather(E, i)             S, E: starts and ends
 *   Slice(X, Unsqueeze(s, [0]), Unsqueeze(e, [0]), axes [0])   X: flat indices
 *   Gather(T, that)                                 T: the table
 *   ReduceSum | ReduceMean | ReduceMax, axes [0], keepdims 0   the scan output
 *   cond out: Cast(true, to bool)                   (or the cond input itself)
 *
 * S, E, X and T are values of the main graph that the body reads from the
 * enclosing scope; the Loop's own inputs are the trip count and a constant
 * true condition, with nothing carried. Only exactly that is taken, in the
 * opset's form of each op (Unsqueeze's and ReduceSum's axes as an input from
 * opset 13, ReduceMean's and ReduceMax's from 18), with its axes and Slice
 * steps constants of the values above; a Loop with any other body is left as
 * it is and binding names it unsupported. The body with a Mul by a slice of
 * weights before the reduction is per_sample_weights, which bf.EmbeddingBag
 * does not compute: refused here with a message that says so.
 *
 * The Loop node becomes bf.EmbeddingBag (T, X, S, E, trip count) with its
 * name and its output (the scan output [bags, dim]), so the activation fault
 * site on the output and everything reading it are unchanged, and T is the
 * same initializer, so weight faults land in the same table. The table's
 * readers in the parameter index (read by no node of the main graph until
 * now) are set to the new node, an embedding lookup. */
#include <string.h>

#include "base/alloc.h"
#include "exec/fuse_loop.h"

#define MAX_BODY 24   /* nodes of a body worth looking at: the pattern has 7 and its Constants */

typedef struct body {
    const bf_model *m;
    const bf__subgraph *g;
    unsigned char used[MAX_BODY];   /* per body node: matched */
} body;

int bf__attrs_within(const bf__node *n, const char *const *names)
{
    for (size_t i = 0; i < n->n_attrs; i++) {
        int ok = 0;
        for (const char *const *k = names; *k && !ok; k++) ok = n->attrs[i].name && strcmp(n->attrs[i].name, *k) == 0;
        if (!ok) return 0;
    }
    return 1;
}

int64_t bf__int_attr(const bf__node *n, const char *name, int64_t def, int64_t bad)
{
    const bf__attr *a = bf__node_attr(n, name);
    if (!a) return def;
    return a->type == BF__ATTR_INT ? a->i : bad;
}

void bf__node_replace(bf__node *n, char *op_type, int *in, int n_in, bf__attr *attrs, size_t n_attrs)
{
    for (size_t i = 0; i < n->n_attrs; i++) bf__attr_free(&n->attrs[i]);
    bf__free(n->attrs);
    bf__free(n->in);
    bf__free(n->op_type);
    n->op_type = op_type;
    n->in = in;
    n->n_in = n_in;
    n->attrs = attrs;
    n->n_attrs = n_attrs;
}

/* The body node that writes reference ref, with op `op` and one output;
 * marked used. NULL if none (or an outer value, or already used). */
static const bf__node *made_by(body *b, int ref, const char *op)
{
    if (ref > -2) return NULL;
    for (size_t i = 0; i < b->g->n_nodes; i++) {
        const bf__node *n = &b->g->nodes[i];
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] == ref) {
                if (b->used[i] || strcmp(n->op_type, op) != 0 || n->n_out != 1) return NULL;
                b->used[i] = 1;
                return n;
            }
    }
    return NULL;
}

/* The tensor a reference holds when it is a constant: a Constant node's
 * value (of the body or of the main graph), or an initializer that is no
 * parameter (of either). NULL otherwise. */
static const bf_tensor *const_of(const body *b, int ref)
{
    const bf__node *n = NULL;
    if (ref <= -2) {
        int local = BF__SUB_LOCAL(ref);
        if ((size_t)local < b->g->n_locals && b->g->inits[local]) return b->g->inits[local];
        for (size_t i = 0; i < b->g->n_nodes && !n; i++)
            if (b->g->nodes[i].n_out == 1 && b->g->nodes[i].out[0] == ref) n = &b->g->nodes[i];
    } else if (ref >= 0) {
        const bf__value *v = &b->m->values[ref];
        if (v->kind == BF__VAL_CONST) return v->init;
        if (v->kind == BF__VAL_NODE && v->producer >= 0) n = &b->m->nodes[v->producer];
    }
    if (!n || strcmp(n->op_type, "Constant") != 0 || n->n_in != 0 || n->n_attrs != 1) return NULL;
    const bf__attr *a = bf__node_attr(n, "value");
    return a && a->type == BF__ATTR_TENSOR ? a->t : NULL;
}

/* Whether a reference is the constant integer list {want} (one value). */
static int const_is(const body *b, int ref, int64_t want)
{
    const bf_tensor *t = const_of(b, ref);
    if (!t || !t->data || bf_tensor_numel(t) != 1 || t->ndim > 1) return 0;
    if (t->dtype == BF_I64) return ((const int64_t *)t->data)[0] == want;
    if (t->dtype == BF_I32) return ((const int32_t *)t->data)[0] == want;
    return 0;
}

/* A constant true: a bool constant, or (in the main graph) Cast(to BOOL) of a
 * constant nonzero integer, which torch.onnx.export leaves unfolded with
 * do_constant_folding=False. */
static int const_true(const body *b, int ref)
{
    const bf_tensor *t = const_of(b, ref);
    if (t) return t->data && t->dtype == BF_BOOL && bf_tensor_numel(t) == 1 && ((const unsigned char *)t->data)[0];
    if (ref < 0) return 0;
    const bf__value *v = &b->m->values[ref];
    if (v->kind != BF__VAL_NODE || v->producer < 0) return 0;
    static const char *const ok[] = {"to", NULL};
    const bf__node *c = &b->m->nodes[v->producer];
    if (strcmp(c->op_type, "Cast") != 0 || c->n_in != 1 || c->n_out != 1 || !bf__attrs_within(c, ok) ||
        bf__int_attr(c, "to", -1, -1) != 9 /* BOOL */)
        return 0;
    int64_t x;
    t = const_of(b, c->in[0]);
    if (!t || !t->data || bf_tensor_numel(t) != 1 || t->ndim > 1) return 0;
    if (t->dtype == BF_I64) x = ((const int64_t *)t->data)[0];
    else if (t->dtype == BF_I32) x = ((const int32_t *)t->data)[0];
    else if (t->dtype == BF_BOOL) x = ((const unsigned char *)t->data)[0];
    else return 0;
    return x != 0;
}

/* axes [0], as an attribute or as input 1 (by the opset's form). */
static int axes_zero(const body *b, const bf__node *n, int as_input)
{
    const bf__attr *a = bf__node_attr(n, "axes");
    if (as_input) return !a && n->n_in == 2 && const_is(b, n->in[1], 0);
    return n->n_in == 1 && a && a->type == BF__ATTR_INTS && a->n == 1 && a->ints[0] == 0;
}

/* Gather(outer value, iteration) on axis 0: the outer value, or -1. */
static int gather_by_iter(body *b, int ref, int iter)
{
    static const char *const ok[] = {"axis", NULL};
    const bf__node *n = made_by(b, ref, "Gather");
    if (!n || n->n_in != 2 || !bf__attrs_within(n, ok) || bf__int_attr(n, "axis", 0, -1) != 0) return -1;
    return n->in[0] >= 0 && n->in[1] == iter ? n->in[0] : -1;
}

/* Unsqueeze(Gather(outer value, iteration), axes [0]): the outer value, or -1. */
static int bound(body *b, int ref, int iter)
{
    static const char *const ok[] = {"axes", NULL};
    const bf__node *n = made_by(b, ref, "Unsqueeze");
    if (!n || !bf__attrs_within(n, ok) || !axes_zero(b, n, b->m->opset >= 13)) return -1;
    return gather_by_iter(b, n->in[0], iter);
}

typedef struct match {
    int table, indices, starts, ends;
    int mode;            /* 0 sum, 1 mean, 2 max */
    int weighted;        /* a Mul by per-sample weights before the reduction */
} match;

static const char *const mode_name[] = {"sum", "mean", "max"};

/* Gather(T, Slice(X, start, end [, axes [0] [, steps [1]]])) from the body
 * value ref: fills T, X, S, E; 0 if it is not that. */
static int lookup(body *b, int ref, int iter, match *mt)
{
    static const char *const gather_ok[] = {"axis", NULL};
    const bf__node *g = made_by(b, ref, "Gather");
    if (!g || g->n_in != 2 || !bf__attrs_within(g, gather_ok) || bf__int_attr(g, "axis", 0, -1) != 0 || g->in[0] < 0) return 0;
    const bf__node *s = made_by(b, g->in[1], "Slice");
    if (!s || s->n_attrs || s->n_in < 3 || s->in[0] < 0) return 0;
    /* axes and steps: omitted (-1), or the constants of one plain slice of axis 0 */
    if (s->n_in > 3 && s->in[3] != -1 && !const_is(b, s->in[3], 0)) return 0;
    if (s->n_in > 4 && s->in[4] != -1 && !const_is(b, s->in[4], 1)) return 0;
    if (s->n_in > 5) return 0;
    mt->table = g->in[0];
    mt->indices = s->in[0];
    mt->starts = bound(b, s->in[1], iter);
    mt->ends = bound(b, s->in[2], iter);
    return mt->starts >= 0 && mt->ends >= 0;
}

/* The scan output: the reduction of the lookup, or of the lookup times
 * per-sample weights (Mul(lookup, Unsqueeze(Slice(weights, ...), [1]))). */
static int reduction(body *b, int ref, int iter, match *mt)
{
    static const char *const ops[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
    static const char *const ok[] = {"axes", "keepdims", "noop_with_empty_axes", NULL};
    const bf__node *r = NULL;
    for (int k = 0; k < 3 && !r; k++)
        if ((r = made_by(b, ref, ops[k])) != NULL) mt->mode = k;
    if (!r || !bf__attrs_within(r, ok) || bf__int_attr(r, "keepdims", 1, 1) != 0 || bf__int_attr(r, "noop_with_empty_axes", 0, 1) != 0)
        return 0;
    int axes_input = mt->mode == 0 ? b->m->opset >= 13 : b->m->opset >= 18;
    if (!axes_zero(b, r, axes_input)) return 0;
    if (lookup(b, r->in[0], iter, mt)) return 1;
    const bf__node *mul = made_by(b, r->in[0], "Mul");
    if (!mul || mul->n_in != 2 || mul->n_attrs || !lookup(b, mul->in[0], iter, mt)) return 0;
    mt->weighted = 1;
    return 1;
}

/* Whether Loop node n is the exported EmbeddingBag; fills mt. */
static int is_embedding_bag(const bf_model *m, const bf__node *n, match *mt)
{
    if (n->n_in != 2 || n->n_out != 1 || n->in[0] < 0 || n->out[0] < 0 || n->n_attrs != 1) return 0;
    const bf__attr *a = bf__node_attr(n, "body");
    if (!a || a->type != BF__ATTR_GRAPH || !a->g) return 0;
    body b = {.m = m, .g = a->g};
    const bf__subgraph *g = a->g;
    if (g->n_nodes > MAX_BODY || g->n_in != 2 || g->n_out != 2 || g->in[0] < 0 || g->in[1] < 0) return 0;
    /* the condition: true going in, true coming out, nothing carried */
    if (n->in[1] >= 0 && !const_true(&b, n->in[1])) return 0;
    int iter = BF__SUB_REF(g->in[0]), cond_in = BF__SUB_REF(g->in[1]);
    if (g->out[0] != cond_in) {
        static const char *const ok[] = {"to", NULL};
        const bf__node *c = made_by(&b, g->out[0], "Cast");
        if (!c || c->n_in != 1 || !bf__attrs_within(c, ok) || bf__int_attr(c, "to", -1, -1) != 9 /* BOOL */ ||
            !const_true(&b, c->in[0]))
            return 0;
    }
    if (!reduction(&b, g->out[1], iter, mt)) return 0;
    /* every body node is the pattern's, or a Constant (of its axes); with
     * per-sample weights, also the weights' Slice and Unsqueeze */
    int others = 0;
    for (size_t i = 0; i < g->n_nodes; i++) others += !b.used[i] && strcmp(g->nodes[i].op_type, "Constant") != 0;
    return others <= (mt->weighted ? 2 : 0);
}

static bf_status oom(const bf_model *m, bf_error *err)
{
    return bf_error_set(err, BF_ENOMEM, "%s: out of memory while fusing EmbeddingBag loops", m->label);
}

static bf_status rewrite(bf_model *m, bf__node *n, const match *mt, bf_error *err)
{
    char *op_type = bf__strdup("bf.EmbeddingBag");
    int *in = bf__malloc(6 * sizeof *in);
    bf__attr *attrs = bf__calloc(2, sizeof *attrs);
    char *name = bf__strdup("mode"), *mode = bf__strdup(mode_name[mt->mode]);
    if (!op_type || !in || !attrs || !name || !mode) {
        bf__free(op_type), bf__free(in), bf__free(attrs), bf__free(name), bf__free(mode);
        return oom(m, err);
    }
    in[0] = mt->table;
    in[1] = mt->indices;
    in[2] = mt->starts;
    in[3] = mt->ends;
    in[4] = n->in[0];
    attrs[0] = (bf__attr){.name = name, .type = BF__ATTR_STRING, .s = mode};
    bf__node_replace(n, op_type, in, 5, attrs, 1);
    /* the table was read only inside the body: now by this node */
    const bf__value *tv = &m->values[mt->table];
    if (tv->kind == BF__VAL_PARAM) {
        bf_param_info *pi = &m->params[tv->index];
        if (!pi->reader_op) {
            pi->reader_op = n->op_type;
            pi->reader_node = n->name;
        }
        pi->is_embedding = 1;
    }
    return BF_OK;
}

bf_status bf__fuse_loops(bf_model *m, bf_error *err)
{
    for (size_t o = 0; o < m->n_nodes; o++) {
        bf__node *n = &m->nodes[m->order[o]];
        match mt = {.table = -1};
        if (strcmp(n->op_type, "Loop") != 0 || !is_embedding_bag(m, n, &mt)) continue;
        if (mt.weighted)
            return bf_error_set(err, BF_EUNSUPPORTED,
                                "%s: node '%s' (Loop) is an exported EmbeddingBag (mode %s) with per_sample_weights, "
                                "which bitflip does not support; bitflip runs exported nn.EmbeddingBag and "
                                "F.embedding_bag without per_sample_weights (sum, mean and max; docs/OPS.md)",
                                m->label, n->name, mode_name[mt.mode]);
        bf_status st = rewrite(m, n, &mt, err);
        if (st != BF_OK) return st;
    }
    bf_status st = bf__fuse_repeat_interleave(m, err);
    if (st == BF_OK) st = bf__fuse_sequence_ops(m, err);
    if (st == BF_OK) st = bf__fuse_moe_index(m, err);
    return st == BF_OK ? bf__fuse_squeeze_ifs(m, err) : st;
}
