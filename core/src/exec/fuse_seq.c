/* The sequence Loop that torch.onnx.export (PyTorch 1.13, opsets 11 to 17)
 * writes for torch.repeat_interleave(x, repeats, dim) when x's size along
 * dim is not static, run as one bf.RepeatInterleave node
 * (ops/repeat_interleave.c). Llama-style grouped-query attention exports
 * this way whenever the key/value head axis is dynamic (issue 30).
 *
 * What is supported, and what is not. bitflip runs no ONNX Loop and no
 * sequence value in general: a plan has static shapes, fixed steps and
 * tensor values only. The one sequence computation recognised here is
 * exactly the exporter's, in the main graph:
 *
 *   S0 = SplitToSequence(R, ones, axis 0)     R: the repeats, one per index
 *   S1 = SplitToSequence(X, ones, axis d)     ones: ConstantOfShape(.., 1)
 *   Q  = Loop(M, true, SequenceEmpty()) with body (i, cond, seq):
 *          r = SequenceAt(S0, i);  x = SequenceAt(S1, i)
 *          c = Concat(c1, r, c2, axis 0)      c1, c2: constants, c1[d] = 1
 *          w = Where(Equal(c, Mul(ConstantOfShape(Shape(c), 1), -1)),
 *                    ConstantOfShape(..), c)   (-1 entries become 1)
 *          seq' = SequenceInsert(seq, Reshape(Expand(Unsqueeze(x, [d+1]), w), s))
 *          cond' = Cast(true, to bool) (or cond itself)
 *   Y  = ConcatFromSequence(Q, axis d)
 *
 * where S0, S1, Q and the SequenceEmpty are read by nothing else. Each node's
 * attributes are checked against the exporter's, the opset's form of
 * Unsqueeze (axes as input from 13) included. The whole becomes
 * bf.RepeatInterleave(X, R, M, axis d), named like the ConcatFromSequence
 * and writing its output Y, so Y stays a fault site with the same name and
 * its readers are unchanged; the sequences and the Loop's intermediates
 * never were tensors a campaign could name (a fault spec naming one is
 * told which node computes it now). The plan then needs R and M known when
 * it is built (in exported graphs they follow from shapes and constants)
 * and refuses, naming the node, when they are not.
 *
 * The exporter writes the same body unrolled in the main graph when the
 * axis has a static size (one Reshape(Expand(Unsqueeze(X_i, [d+1]), w), s)
 * per index i, then Concat); each of those pieces becomes
 * bf.RepeatInterleave(X_i, R_i) with no trip count.
 *
 * Any other Loop stays as it is, and binding refuses the model naming it;
 * sequence ops outside this pattern are fuse_seqops.c's. The exporter's
 * Reshape `s` is not read: it holds
 * 0 for dynamic dims counted one place off the unsqueezed slice, so that
 * read by the spec it gives another shape than PyTorch when a dim after d
 * is dynamic too; bf.RepeatInterleave gives PyTorch's. */
#include <string.h>

#include "base/alloc.h"
#include "exec/fuse.h"
#include "exec/fuse_loop.h"

#define MAX_BODY 32   /* the pattern has 18 nodes with its Constants */

typedef struct rbody {
    const bf_model *m;
    const bf__subgraph *g;
    unsigned char used[MAX_BODY];
    int iter;
} rbody;

static int is_op(const bf__node *n, const char *op) { return n && strcmp(n->op_type, op) == 0; }



/* The body node writing reference ref as its only output, with op `op`;
 * marked used. NULL if none. */
static bf__node *main_node(const bf_model *m, int v, const char *op);

static const bf__node *body_node(rbody *b, int ref, const char *op)
{
    if (!b->g) return main_node(b->m, ref, op);
    if (ref > -2) return NULL;
    for (size_t i = 0; i < b->g->n_nodes; i++) {
        const bf__node *n = &b->g->nodes[i];
        if (n->n_out == 1 && n->out[0] == ref) {
            if (!is_op(n, op)) return NULL;
            b->used[i] = 1;
            return n;
        }
    }
    return NULL;
}

/* The main-graph node producing value v, if its op is `op`. */
static bf__node *main_node(const bf_model *m, int v, const char *op)
{
    if (v < 0 || (size_t)v >= m->n_values || m->values[v].kind != BF__VAL_NODE || m->values[v].producer < 0)
        return NULL;
    bf__node *n = &m->nodes[m->values[v].producer];
    return is_op(n, op) ? n : NULL;
}

/* A Constant node's value tensor, or NULL. */
static const bf_tensor *constant_value(const bf__node *n)
{
    if (!is_op(n, "Constant") || n->n_in != 0 || n->n_attrs != 1) return NULL;
    const bf__attr *a = bf__node_attr(n, "value");
    return a && a->type == BF__ATTR_TENSOR && a->t && a->t->data ? a->t : NULL;
}

/* The constant a reference holds: a body initializer or Constant, a main
 * graph initializer that is no parameter, or a main graph Constant. */
static const bf_tensor *const_of(const rbody *b, int ref)
{
    if (ref <= -2) {
        if (!b->g) return NULL;
        int local = BF__SUB_LOCAL(ref);
        if ((size_t)local < b->g->n_locals && b->g->inits[local]) return b->g->inits[local];
        for (size_t i = 0; i < b->g->n_nodes; i++)
            if (b->g->nodes[i].n_out == 1 && b->g->nodes[i].out[0] == ref) return constant_value(&b->g->nodes[i]);
        return NULL;
    }
    if (ref < 0 || (size_t)ref >= b->m->n_values) return NULL;
    const bf__value *v = &b->m->values[ref];
    if (v->kind == BF__VAL_CONST) return v->init;
    return v->kind == BF__VAL_NODE && v->producer >= 0 ? constant_value(&b->m->nodes[v->producer]) : NULL;
}

/* A constant integer tensor of rank <= 1 into out (up to max); its length, or -1. */
static int const_ints(const rbody *b, int ref, int64_t *out, int max)
{
    const bf_tensor *t = const_of(b, ref);
    if (!t || t->ndim > 1 || (t->dtype != BF_I64 && t->dtype != BF_I32)) return -1;
    int64_t n = bf_tensor_numel(t);
    if (n > max) return -1;
    for (int64_t i = 0; i < n; i++)
        out[i] = t->dtype == BF_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    return (int)n;
}

static int const_is(const rbody *b, int ref, int64_t want)
{
    int64_t v[1];
    return const_ints(b, ref, v, 1) == 1 && v[0] == want;
}

static int const_true(const rbody *b, int ref)
{
    const bf_tensor *t = const_of(b, ref);
    return t && t->dtype == BF_BOOL && bf_tensor_numel(t) == 1 && ((const unsigned char *)t->data)[0];
}

/* A ConstantOfShape whose value is the integer 1 (int64, the exporter's). */
static int ones_node(const bf__node *n)
{
    if (!is_op(n, "ConstantOfShape") || n->n_in != 1 || n->n_attrs != 1) return 0;
    const bf__attr *a = bf__node_attr(n, "value");
    if (!a || a->type != BF__ATTR_TENSOR || !a->t || !a->t->data || bf_tensor_numel(a->t) != 1) return 0;
    return a->t->dtype == BF_I64 && ((const int64_t *)a->t->data)[0] == 1;
}

/* SequenceAt(outer split, iteration): the outer SplitToSequence's input 0
 * and axis (axis in *axis), or -1. The split must be of ones. */
static int split_at(rbody *b, int ref, int64_t *axis, int *seq)
{
    static const char *const ok[] = {"axis", "keepdims", NULL};
    const bf__node *a = body_node(b, ref, "SequenceAt");
    if (!a || a->n_in != 2 || a->n_attrs || a->in[1] != b->iter) return -1;
    bf__node *s = main_node(b->m, a->in[0], "SplitToSequence");
    if (!s || s->n_in != 2 || s->n_out != 1 || !bf__attrs_within(s, ok) || s->in[0] < 0) return -1;
    if (!ones_node(main_node(b->m, s->in[1], "ConstantOfShape"))) return -1;
    *axis = bf__int_attr(s, "axis", 0, INT64_MIN);
    *seq = a->in[0];
    return s->in[0];
}

typedef struct rmatch {
    int x, r, s0, s1;
    int64_t axis;
} rmatch;

/* Where(Equal(c, Mul(K, -1)), K, c) with K = ConstantOfShape(Shape(c), 1):
 * c, or -1. */
static int minus_ones_to_one(rbody *b, int ref)
{
    const bf__node *w = body_node(b, ref, "Where");
    if (!w || w->n_in != 3 || w->n_attrs) return -1;
    int c = w->in[2], k = w->in[1];
    const bf__node *eq = body_node(b, w->in[0], "Equal");
    const bf__node *kn = body_node(b, k, "ConstantOfShape");
    if (!eq || eq->n_in != 2 || eq->n_attrs || eq->in[0] != c || !ones_node(kn)) return -1;
    const bf__node *sh = body_node(b, kn->in[0], "Shape");
    const bf__node *mul = body_node(b, eq->in[1], "Mul");
    if (!sh || sh->n_in != 1 || sh->n_attrs || sh->in[0] != c) return -1;
    if (!mul || mul->n_in != 2 || mul->n_attrs || mul->in[0] != k || !const_is(b, mul->in[1], -1)) return -1;
    return c;
}

/* Reshape(Expand(Unsqueeze(X, [d+1]), w(Concat(c1, R, c2))), s), the
 * exporter's repeat of one slice X of the input R times (in a Loop body, or
 * unrolled in the main graph when the axis has a static size): X and R into
 * *x and *r, the axis into *axis, and into ex and un (if not NULL) the
 * Expand and Unsqueeze nodes; 0 if it is not that. */
static int piece(rbody *b, int ref, int *x, int *r, int64_t *axis, const bf__node **ex_out, const bf__node **un_out)
{
    static const char *const reshape_ok[] = {"allowzero", NULL};
    static const char *const unsq_ok[] = {"axes", NULL};
    int64_t s[BF_MAX_DIMS + 1], c1[BF_MAX_DIMS + 1], c2[BF_MAX_DIMS + 1], ax[1];
    const bf__node *rs = body_node(b, ref, "Reshape");
    if (!rs || rs->n_in != 2 || !bf__attrs_within(rs, reshape_ok) || bf__int_attr(rs, "allowzero", 0, 1) != 0) return 0;
    int rank = const_ints(b, rs->in[1], s, BF_MAX_DIMS);
    const bf__node *ex = body_node(b, rs->in[0], "Expand");
    if (rank < 1 || !ex || ex->n_in != 2 || ex->n_attrs) return 0;
    const bf__node *un = body_node(b, ex->in[0], "Unsqueeze");
    if (!un || !bf__attrs_within(un, unsq_ok)) return 0;
    if (b->m->opset >= 13) {
        if (un->n_attrs || un->n_in != 2 || const_ints(b, un->in[1], ax, 1) != 1) return 0;
    } else {
        const bf__attr *a = bf__node_attr(un, "axes");
        if (un->n_in != 1 || !a || a->type != BF__ATTR_INTS || a->n != 1) return 0;
        ax[0] = a->ints[0];
    }
    const bf__node *cc = body_node(b, minus_ones_to_one(b, ex->in[1]), "Concat");
    if (!cc || cc->n_in != 3 || bf__int_attr(cc, "axis", -1, -1) != 0 || cc->n_attrs != 1) return 0;
    int n1 = const_ints(b, cc->in[0], c1, BF_MAX_DIMS), n2 = const_ints(b, cc->in[2], c2, BF_MAX_DIMS);
    /* rank + 1 entries: the slice's dims up to d with 1 at d, the repeat, the
     * rest; the Reshape merges d and d + 1 (-1 at d) */
    if (n1 < 1 || n2 < 0 || n1 + 1 + n2 != rank + 1 || c1[n1 - 1] != 1 || s[n1 - 1] != -1) return 0;
    int64_t d = n1 - 1;
    if (ax[0] != d + 1 && ax[0] != d + 1 - (rank + 1)) return 0;
    if (un->in[0] == -1 || cc->in[1] == -1) return 0;
    *x = un->in[0];
    *r = cc->in[1];
    *axis = d;
    if (ex_out) *ex_out = ex;
    if (un_out) *un_out = un;
    return 1;
}

/* The body's scan value: a piece whose X and R are SequenceAt(split, i). */
static int body_matches(rbody *b, int ref, rmatch *mt)
{
    int x, r;
    int64_t d, axis_r, axis_x;
    if (!piece(b, ref, &x, &r, &d, NULL, NULL)) return 0;
    mt->r = split_at(b, r, &axis_r, &mt->s0);
    mt->x = split_at(b, x, &axis_x, &mt->s1);
    if (mt->r < 0 || mt->x < 0 || axis_r != 0 || axis_x != d) return 0;
    mt->axis = d;
    return 1;
}

/* How often value v is read: by main-graph nodes, by the bodies of nodes
 * other than `skip`, and as a graph output (counted high). */
static int reads_of(const bf_model *m, int v, const bf__node *skip, int *in_skip)
{
    int count = 0;
    *in_skip = 0;
    for (size_t i = 0; i < m->n_outputs; i++) count += 100 * (m->output_vals[i] == v);
    for (size_t i = 0; i < m->n_nodes; i++) {
        const bf__node *n = &m->nodes[i];
        for (int j = 0; j < n->n_in; j++) count += n->in[j] == v;
        for (size_t a = 0; a < n->n_attrs; a++) {
            const bf__subgraph *g = n->attrs[a].type == BF__ATTR_GRAPH ? n->attrs[a].g : NULL;
            for (size_t k = 0; g && k < g->n_nodes; k++)
                for (int j = 0; j < g->nodes[k].n_in; j++)
                    if (g->nodes[k].in[j] == v) *(n == skip ? in_skip : &count) += 1;
            for (int j = 0; g && j < g->n_out; j++)
                if (g->out[j] == v) *(n == skip ? in_skip : &count) += 1;
        }
    }
    return count;
}

/* Whether ConcatFromSequence node y is the whole pattern; fills mt and the
 * nodes to remove (loop, its SequenceEmpty, the two splits). */
static int is_repeat_interleave(const bf_model *m, const bf__node *y, rmatch *mt, bf__node **rm)
{
    static const char *const ok[] = {"axis", "new_axis", NULL};
    if (y->n_in != 1 || y->n_out != 1 || y->out[0] < 0 || !bf__attrs_within(y, ok) ||
        bf__int_attr(y, "new_axis", 0, 1) != 0 || !bf__node_attr(y, "axis"))
        return 0;
    bf__node *loop = main_node(m, y->in[0], "Loop");
    if (!loop || loop->n_in != 3 || loop->n_out != 1 || loop->n_attrs != 1 || loop->in[0] < 0) return 0;
    const bf__attr *ba = bf__node_attr(loop, "body");
    bf__node *empty = main_node(m, loop->in[2], "SequenceEmpty");
    if (!ba || ba->type != BF__ATTR_GRAPH || !ba->g || !empty || empty->n_in != 0) return 0;
    const bf__subgraph *g = ba->g;
    rbody b = {.m = m, .g = g};
    if (g->n_nodes > MAX_BODY || g->n_in != 3 || g->n_out != 2 || g->in[0] < 0 || g->in[1] < 0 || g->in[2] < 0) return 0;
    if (!const_true(&b, loop->in[1])) return 0;
    b.iter = BF__SUB_REF(g->in[0]);
    if (g->out[0] != BF__SUB_REF(g->in[1])) {
        static const char *const cast_ok[] = {"to", NULL};
        const bf__node *c = body_node(&b, g->out[0], "Cast");
        if (!c || c->n_in != 1 || !bf__attrs_within(c, cast_ok) || bf__int_attr(c, "to", -1, -1) != 9 /* BOOL */ ||
            !const_true(&b, c->in[0]))
            return 0;
    }
    const bf__node *ins = body_node(&b, g->out[1], "SequenceInsert");
    if (!ins || ins->n_in != 2 || ins->n_attrs || ins->in[0] != BF__SUB_REF(g->in[2])) return 0;
    if (!body_matches(&b, ins->in[1], mt)) return 0;
    if (bf__int_attr(y, "axis", 0, INT64_MIN) != mt->axis) return 0;
    for (size_t i = 0; i < g->n_nodes; i++)
        if (!b.used[i] && !constant_value(&g->nodes[i])) return 0;
    /* the sequences are the pattern's alone */
    int body_reads;
    if (reads_of(m, y->in[0], NULL, &body_reads) != 1 || reads_of(m, loop->in[2], NULL, &body_reads) != 1) return 0;
    if (reads_of(m, mt->s0, loop, &body_reads) != 0 || body_reads != 1) return 0;
    if (reads_of(m, mt->s1, loop, &body_reads) != 0 || body_reads != 1) return 0;
    rm[0] = loop;
    rm[1] = empty;
    rm[2] = &m->nodes[m->values[mt->s0].producer];
    rm[3] = &m->nodes[m->values[mt->s1].producer];
    return rm[2] != rm[3];
}

static bf_status oom(const bf_model *m, bf_error *err)
{
    return bf_error_set(err, BF_ENOMEM, "%s: out of memory while fusing repeat_interleave loops", m->label);
}

/* y becomes bf.RepeatInterleave(X, R, M) (or (X, R) when trips is -1)
 * with attribute axis. */
static bf_status rewrite(bf_model *m, bf__node *y, const rmatch *mt, int trips, bf_error *err)
{
    char *op_type = bf__strdup("bf.RepeatInterleave");
    int *in = bf__malloc(3 * sizeof *in);
    bf__attr *attrs = bf__calloc(1, sizeof *attrs);
    char *name = bf__strdup("axis");
    if (!op_type || !in || !attrs || !name) {
        bf__free(op_type), bf__free(in), bf__free(attrs), bf__free(name);
        return oom(m, err);
    }
    in[0] = mt->x;
    in[1] = mt->r;
    in[2] = trips;   /* -1: the unrolled form, no Loop */
    attrs[0] = (bf__attr){.name = name, .type = BF__ATTR_INT, .i = mt->axis};
    bf__node_replace(y, op_type, in, trips >= 0 ? 3 : 2, attrs, 1);
    return BF_OK;
}

/* The unrolled form in the main graph (the axis has a static size): one
 * piece per index of the axis, Concat'ed. Its Reshape is the exporter's
 * too (0 for dynamic dims, one place off), so each piece is rewritten as
 * bf.RepeatInterleave of its one-index slice; the Expand and Unsqueeze
 * read by the piece alone go. Fills rm (NULL where a node stays). */
static int is_piece(const bf_model *m, bf__node *y, rmatch *mt, bf__node **rm)
{
    rbody b = {.m = m};
    const bf__node *ex, *un;
    int unused;
    if (!piece(&b, y->out[0], &mt->x, &mt->r, &mt->axis, &ex, &un)) return 0;
    rm[0] = rm[1] = rm[2] = rm[3] = NULL;
    if (reads_of(m, ex->out[0], NULL, &unused) == 1) {
        rm[0] = (bf__node *)ex;
        if (reads_of(m, un->out[0], NULL, &unused) == 1) rm[1] = (bf__node *)un;
    }
    return 1;
}

bf_status bf__fuse_repeat_interleave(bf_model *m, bf_error *err)
{
    unsigned char *dead = NULL;
    size_t fused = 0;
    for (size_t i = 0; i < m->n_nodes; i++) {
        bf__node *y = &m->nodes[i];
        rmatch mt;
        bf__node *rm[4];
        int trips;
        if (is_op(y, "ConcatFromSequence") && is_repeat_interleave(m, y, &mt, rm)) trips = rm[0]->in[0];
        else if (is_op(y, "Reshape") && y->n_out == 1 && is_piece(m, y, &mt, rm)) trips = -1;
        else continue;
        if (!dead && !(dead = bf__calloc(m->n_nodes + 1, 1))) return oom(m, err);
        int dup = 0;
        for (int k = 0; k < 4; k++) dup |= rm[k] && dead[rm[k] - m->nodes];
        if (dup) continue;
        bf_status st = rewrite(m, y, &mt, trips, err);
        if (st != BF_OK) {
            bf__free(dead);
            return st;
        }
        for (int k = 0; k < 4; k++) {
            if (!rm[k]) continue;
            dead[rm[k] - m->nodes] = 1;
            for (int j = 0; j < rm[k]->n_out; j++)
                if (rm[k]->out[j] >= 0) m->values[rm[k]->out[j]].fused_into = y->out[0] + 1;
        }
        fused++;
    }
    bf_status st = fused ? bf__remove_nodes(m, dead, err) : BF_OK;
    bf__free(dead);
    return st;
}
