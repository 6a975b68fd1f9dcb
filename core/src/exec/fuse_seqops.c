/* ONNX sequence ops whose sequence is known in structure when the model
 * loads, rewritten into tensor ops (ops/sequence.c): a plan holds tensors
 * only, with static shapes, so a sequence value never exists in it; what
 * its readers take from it is worked out here instead.
 *
 * Supported (in the main graph; after fuse_seq.c has taken the exporter's
 * repeat_interleave Loop):
 *
 *   a sequence made by      SequenceConstruct(T1..Tn), SequenceEmpty(), and
 *                           SequenceInsert / SequenceErase of such a
 *                           sequence at a constant (or omitted) position:
 *                           a list of tensors known now;
 *                           SplitToSequence(X, split?, axis, keepdims): its
 *                           count follows from X's shape when the plan is
 *                           built (torch.tensor_split(x, n) exports so);
 *   read by                 SequenceAt(s, i): Identity of the listed tensor
 *                           (i constant), or bf.SplitAt(X, split, i) for a
 *                           split (i known when the plan is built);
 *                           SequenceLength(s): bf.SequenceLength (a constant
 *                           or the split's count, known at plan time);
 *                           ConcatFromSequence(list, axis, new_axis): Concat
 *                           (new_axis 0) or bf.Stack (new_axis 1).
 *
 * Not supported: a sequence that is a graph input or output (the loader
 * refuses those), or that a Loop or If carries or reads (other than the
 * repeat_interleave Loop; binding refuses the Loop), a position that is not
 * a constant for a list, ConcatFromSequence of a split, SequenceInsert or
 * SequenceErase of a split. A reader rewritten leaves the sequence's
 * producers; those that nothing reads any more are removed, the rest stay,
 * and a plan that needs one refuses it, naming the node and why
 * (ops/sequence.c). A position outside a list is a load error naming the
 * node. */
#include <string.h>

#include "base/alloc.h"
#include "exec/fuse.h"
#include "exec/fuse_loop.h"

#define MAX_CHAIN 256   /* SequenceInsert/Erase links followed back from a reader */

typedef struct seqv {
    int split;              /* 1: SplitToSequence(x, sp, axis, keepdims); 0: the list items[0..n) */
    int n;
    int items[BF__MAX_IO];
    int x, sp;
    const bf__node *split_node;
} seqv;

static const bf__node *producer(const bf_model *m, int v)
{
    if (v < 0 || (size_t)v >= m->n_values || m->values[v].kind != BF__VAL_NODE || m->values[v].producer < 0)
        return NULL;
    return &m->nodes[m->values[v].producer];
}

/* A constant integer scalar (or one-element tensor) value: 1 and *out, or 0. */
static int const_int(const bf_model *m, int v, int64_t *out)
{
    const bf_tensor *t = NULL;
    if (v < 0 || (size_t)v >= m->n_values) return 0;
    if (m->values[v].kind == BF__VAL_CONST) t = m->values[v].init;
    const bf__node *n = producer(m, v);
    if (n && strcmp(n->op_type, "Constant") == 0 && n->n_attrs == 1) {
        const bf__attr *a = bf__node_attr(n, "value");
        if (a && a->type == BF__ATTR_TENSOR) t = a->t;
    }
    if (!t || !t->data || bf_tensor_numel(t) != 1 || (t->dtype != BF_I64 && t->dtype != BF_I32)) return 0;
    *out = t->dtype == BF_I64 ? ((const int64_t *)t->data)[0] : ((const int32_t *)t->data)[0];
    return 1;
}

/* What sequence value v holds; 0 if not known in structure. */
static int resolve(const bf_model *m, int v, seqv *s)
{
    /* the chain of Insert/Erase back to its start, then replayed forwards */
    const bf__node *chain[MAX_CHAIN];
    int depth = 0;
    const bf__node *n = producer(m, v);
    while (n && (strcmp(n->op_type, "SequenceInsert") == 0 || strcmp(n->op_type, "SequenceErase") == 0)) {
        if (depth == MAX_CHAIN || n->n_in < 1) return 0;
        chain[depth++] = n;
        n = producer(m, n->in[0]);
    }
    if (!n) return 0;
    memset(s, 0, sizeof *s);
    if (strcmp(n->op_type, "SplitToSequence") == 0) {
        if (depth || n->n_in < 1 || n->in[0] < 0) return 0;
        s->split = 1, s->x = n->in[0], s->sp = n->n_in > 1 ? n->in[1] : -1, s->split_node = n;
        return 1;
    }
    if (strcmp(n->op_type, "SequenceConstruct") == 0) {
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] < 0) return 0;
        memcpy(s->items, n->in, (size_t)n->n_in * sizeof *n->in);
        s->n = n->n_in;
    } else if (strcmp(n->op_type, "SequenceEmpty") != 0) {
        return 0;
    }
    while (depth--) {
        const bf__node *c = chain[depth];
        int insert = strcmp(c->op_type, "SequenceInsert") == 0;
        int64_t pos = insert ? s->n : s->n - 1;
        if (c->n_in > (insert ? 2 : 1) && c->in[insert ? 2 : 1] >= 0 && !const_int(m, c->in[insert ? 2 : 1], &pos))
            return 0;
        if (pos < 0) pos += s->n;
        if (insert) {
            if (c->n_in < 2 || c->in[1] < 0 || pos < 0 || pos > s->n || s->n == BF__MAX_IO) return 0;
            memmove(s->items + pos + 1, s->items + pos, (size_t)(s->n - pos) * sizeof *s->items);
            s->items[pos] = c->in[1];
            s->n++;
        } else {
            if (pos < 0 || pos >= s->n) return 0;
            memmove(s->items + pos, s->items + pos + 1, (size_t)(s->n - pos - 1) * sizeof *s->items);
            s->n--;
        }
    }
    return 1;
}

static bf_status oom(const bf_model *m, bf_error *err)
{
    return bf_error_set(err, BF_ENOMEM, "%s: out of memory while rewriting sequence ops", m->label);
}

/* Node n becomes op `op` over inputs in[0..n_in) with the attributes given
 * (ints; names NULL-terminated). */
static bf_status become(const bf_model *m, bf__node *n, const char *op, const int *in, int n_in,
                        const char *const *names, const int64_t *vals, bf_error *err)
{
    int n_attrs = 0;
    while (names[n_attrs]) n_attrs++;
    char *op_type = bf__strdup(op);
    int *ins = bf__malloc(((size_t)n_in + 1) * sizeof *ins);
    bf__attr *attrs = bf__calloc((size_t)n_attrs + 1, sizeof *attrs);
    int ok = op_type && ins && attrs;
    for (int k = 0; ok && k < n_attrs; k++) {
        attrs[k] = (bf__attr){.name = bf__strdup(names[k]), .type = BF__ATTR_INT, .i = vals[k]};
        ok = attrs[k].name != NULL;
    }
    if (!ok) {
        for (int k = 0; attrs && k < n_attrs; k++) bf__free(attrs[k].name);
        bf__free(op_type), bf__free(ins), bf__free(attrs);
        return oom(m, err);
    }
    if (n_in) memcpy(ins, in, (size_t)n_in * sizeof *in);
    bf__node_replace(n, op_type, ins, n_in, attrs, (size_t)n_attrs);
    return BF_OK;
}


/* Rewrites reader n of a sequence, if it can be; *done says whether it was. */
static bf_status rewrite_reader(bf_model *m, bf__node *n, int *done, bf_error *err)
{
    static const char *const none[] = {NULL};
    static const char *const split_attrs[] = {"axis", "keepdims", NULL};
    static const char *const len_attrs[] = {"count", "axis", NULL};
    static const char *const axis_attr[] = {"axis", NULL};
    seqv s;
    *done = 0;
    int is_at = strcmp(n->op_type, "SequenceAt") == 0, is_len = strcmp(n->op_type, "SequenceLength") == 0;
    int is_cat = strcmp(n->op_type, "ConcatFromSequence") == 0;
    if ((!is_at && !is_len && !is_cat) || n->n_in < 1 || n->n_out != 1 || !resolve(m, n->in[0], &s)) return BF_OK;
    if (is_at) {
        if (n->n_in != 2 || n->in[1] < 0) return BF_OK;
        if (s.split) {
            int in[3] = {s.x, s.sp, n->in[1]};
            int64_t v[2] = {bf__int_attr(s.split_node, "axis", 0, 0), bf__int_attr(s.split_node, "keepdims", 1, 1)};
            *done = 1;
            return become(m, n, "bf.SplitAt", in, 3, split_attrs, v, err);
        }
        int64_t pos;
        if (!const_int(m, n->in[1], &pos)) return BF_OK;
        if (pos < -s.n || pos >= s.n)
            return bf_error_set(err, BF_ERANGE, "%s: node '%s' (SequenceAt): position %lld is outside the sequence of "
                                "%d tensors", m->label, n->name, (long long)pos, s.n);
        int in[1] = {s.items[pos < 0 ? pos + s.n : pos]};
        *done = 1;
        return become(m, n, "Identity", in, 1, none, NULL, err);
    }
    if (is_len) {
        int in[2] = {s.x, s.sp};
        int64_t v[2] = {s.split ? -1 : s.n, s.split ? bf__int_attr(s.split_node, "axis", 0, 0) : 0};
        *done = 1;
        return become(m, n, "bf.SequenceLength", in, s.split ? 2 : 0, len_attrs, v, err);
    }
    if (s.split) return BF_OK;
    if (s.n == 0)
        return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (ConcatFromSequence): the sequence is empty", m->label,
                            n->name);
    int64_t v[1] = {bf__int_attr(n, "axis", 0, 0)};
    *done = 1;
    return become(m, n, bf__int_attr(n, "new_axis", 0, 0) ? "bf.Stack" : "Concat", s.items, s.n, axis_attr, v, err);
}

static int is_seq_op(const char *op)
{
    static const char *const ops[] = {"SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase",
                                      "SplitToSequence", NULL};
    for (const char *const *k = ops; *k; k++)
        if (strcmp(*k, op) == 0) return 1;
    return 0;
}

/* Whether value v is read: by a node, a subgraph, or as a graph output. */
static int is_read(const bf_model *m, int v, const unsigned char *dead)
{
    for (size_t i = 0; i < m->n_outputs; i++)
        if (m->output_vals[i] == v) return 1;
    for (size_t i = 0; i < m->n_nodes; i++) {
        const bf__node *n = &m->nodes[i];
        if (dead[i]) continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v) return 1;
        for (size_t a = 0; a < n->n_attrs; a++) {
            const bf__subgraph *g = n->attrs[a].type == BF__ATTR_GRAPH ? n->attrs[a].g : NULL;
            for (size_t k = 0; g && k < g->n_nodes; k++)
                for (int j = 0; j < g->nodes[k].n_in; j++)
                    if (g->nodes[k].in[j] == v) return 1;
            for (int j = 0; g && j < g->n_out; j++)
                if (g->out[j] == v) return 1;
        }
    }
    return 0;
}

bf_status bf__fuse_sequence_ops(bf_model *m, bf_error *err)
{
    size_t rewritten = 0;
    for (size_t i = 0; i < m->n_nodes; i++) {
        int done;
        bf_status st = rewrite_reader(m, &m->nodes[i], &done, err);
        if (st != BF_OK) return st;
        rewritten += (size_t)done;
    }
    if (!rewritten) return BF_OK;
    /* the producers nothing reads any more, last first (an Insert frees what it read) */
    unsigned char *dead = bf__calloc(m->n_nodes + 1, 1);
    if (!dead) return oom(m, err);
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < m->n_nodes; i++) {
            const bf__node *n = &m->nodes[i];
            if (dead[i] || !is_seq_op(n->op_type) || n->n_out != 1 || n->out[0] < 0 || is_read(m, n->out[0], dead))
                continue;
            dead[i] = 1;
            again = 1;
        }
    }
    bf_status st = bf__remove_nodes(m, dead, err);
    bf__free(dead);
    return st;
}
