/* The dispatch by index of a Mixtral-style mixture of experts, as
 * torch.onnx.export (PyTorch 1.13) writes it, run with static shapes
 * (issue 30). The model's loop over experts e,
 *
 *   tok, slot = torch.where(top_i == e)
 *   y = expert(h[tok]) * w[tok, slot].unsqueeze(-1)
 *   out = out.index_add(0, tok, y)
 *
 * exports, per expert, as
 *
 *   tok, slot = Squeeze(Split(Transpose(NonZero(Equal(I, e)), [1, 0]), axis 1), [1])
 *   G = Gather(h, tok)                          (axis 0)
 *   D = the expert, from G                      (row-wise ops: see row_op)
 *   Y = Mul(D, Unsqueeze(Reshape(Reshape(Gather(Flatten(W, 2),
 *             Add(slot, Mul(tok, Gather(Shape(W), 1)))), [-1]), Concat(Shape(..))), -1))
 *   S = ScatterElements(ConstantOfShape(Shape(P), 0),
 *                       Expand(Unsqueeze(tok, 1), Shape(V)),
 *                       V = Expand(Y, Shape(Slice(P, [0, 0], [1, max], [0, 1]))))
 *   out' = Add(P, S)
 *
 * whose NonZero has an output shape that is the data, which a plan (static
 * shapes) cannot hold. The expert's rows are independent (each output
 * element of a MatMul is its own in-order chain, docs/ENGINE.md; the other
 * ops allowed are elementwise), so the expert computed on every row gives,
 * on the rows PyTorch gathers, the very bits PyTorch's gathered rows get.
 * The rewrite: G becomes Identity(h) (same name, now every row), and the
 * Add becomes bf.MoEIndexAdd(P, D, I, W, expert e) (ops/moe_index_add.c),
 * named like the Add and writing its output, which adds D * w to the rows
 * that picked e and copies the others. The expert's weights stay the same
 * initializers, so weight faults land as before; the NonZero, the index
 * arithmetic and the scatter go (their values, named in a fault spec, are
 * told which node computes them now). The expert's own activations now
 * have a row per token rather than per routed token.
 *
 * Anything that differs from this (another op in the expert, a reader of
 * the expert's values outside it, other constants) stays as exported, and
 * binding refuses the NonZero with its own message. */
#include <string.h>

#include "base/alloc.h"
#include "exec/fuse.h"
#include "exec/fuse_loop.h"

#define MAX_PAT 96   /* nodes of one expert's pattern, expert included */

typedef struct moe {
    const bf_model *m;
    int nodes[MAX_PAT];
    int n;
    int fail;
} moe;

static int is_op(const bf__node *n, const char *op) { return n && strcmp(n->op_type, op) == 0; }

/* The node producing value v if its op is `op` and it has n_in inputs
 * (-1: any); recorded as part of the pattern. */
static const bf__node *prod(moe *p, int v, const char *op, int n_in)
{
    const bf_model *m = p->m;
    if (v < 0 || (size_t)v >= m->n_values || m->values[v].kind != BF__VAL_NODE || m->values[v].producer < 0)
        return NULL;
    int i = m->values[v].producer;
    const bf__node *n = &m->nodes[i];
    if (!is_op(n, op) || (n_in >= 0 && n->n_in != n_in)) return NULL;
    if (p->n == MAX_PAT) {
        p->fail = 1;
        return NULL;
    }
    p->nodes[p->n++] = i;
    return n;
}

/* A constant integer tensor (initializer or Constant node) into out; its
 * length, or -1. */
static int ints(const moe *p, int v, int64_t *out, int max)
{
    const bf_model *m = p->m;
    if (v < 0 || (size_t)v >= m->n_values) return -1;
    const bf__value *val = &m->values[v];
    const bf_tensor *t = NULL;
    if (val->kind == BF__VAL_CONST) t = val->init;
    else if (val->kind == BF__VAL_NODE && val->producer >= 0) {
        const bf__node *n = &m->nodes[val->producer];
        const bf__attr *a = is_op(n, "Constant") && n->n_attrs == 1 ? bf__node_attr(n, "value") : NULL;
        t = a && a->type == BF__ATTR_TENSOR ? a->t : NULL;
    }
    if (!t || !t->data || t->ndim > 1 || t->dtype != BF_I64 || bf_tensor_numel(t) > max) return -1;
    int64_t k = bf_tensor_numel(t);
    memcpy(out, t->data, (size_t)k * sizeof *out);
    return (int)k;
}

static int int_is(const moe *p, int v, int64_t want)
{
    int64_t x[1];
    return ints(p, v, x, 1) == 1 && x[0] == want;
}

static int64_t attr_i(const bf__node *n, const char *name, int64_t def)
{
    const bf__attr *a = bf__node_attr(n, name);
    return !a ? def : a->type == BF__ATTR_INT ? a->i : INT64_MIN;
}

/* Unsqueeze(x, [axis]) in either opset's form: x, or -1. */
static int unsqueeze(moe *p, int v, int64_t axis, int64_t alt)
{
    const bf__node *u = prod(p, v, "Unsqueeze", -1);
    int64_t a[1];
    if (!u || u->n_in < 1) return -1;
    if (u->n_in == 2 && u->n_attrs == 0 && ints(p, u->in[1], a, 1) == 1 && (a[0] == axis || a[0] == alt))
        return u->in[0];
    const bf__attr *at = bf__node_attr(u, "axes");
    if (u->n_in == 1 && u->n_attrs == 1 && at && at->type == BF__ATTR_INTS && at->n == 1 &&
        (at->ints[0] == axis || at->ints[0] == alt))
        return u->in[0];
    return -1;
}

/* Shape(x) with no attributes: x, or -1. */
static int shape_of(moe *p, int v)
{
    const bf__node *s = prod(p, v, "Shape", 1);
    return s && s->n_attrs == 0 ? s->in[0] : -1;
}

/* tok or slot (part 0 or 1): Squeeze(Split(Transpose(NonZero(Equal(I, e))))[part], [1]).
 * The Equal into *eq. */
static const bf__node *index_part(moe *p, int v, int part, const bf__node **eq)
{
    const bf__node *sq = prod(p, v, "Squeeze", 2);
    int64_t a[2];
    if (!sq || sq->n_attrs || ints(p, sq->in[1], a, 1) != 1 || (a[0] != 1 && a[0] != -1)) return NULL;
    int sv = sq->in[0];
    const bf__node *sp = prod(p, sv, "Split", 2);
    if (!sp || sp->n_out != 2 || sp->out[part] != sv || attr_i(sp, "axis", 0) != 1 || sp->n_attrs != 1) return NULL;
    if (ints(p, sp->in[1], a, 2) != 2 || a[0] != 1 || a[1] != 1) return NULL;
    const bf__node *tr = prod(p, sp->in[0], "Transpose", 1);
    const bf__attr *perm = tr ? bf__node_attr(tr, "perm") : NULL;
    if (!perm || tr->n_attrs != 1 || perm->type != BF__ATTR_INTS || perm->n != 2 || perm->ints[0] != 1 ||
        perm->ints[1] != 0)
        return NULL;
    const bf__node *nz = prod(p, tr->in[0], "NonZero", 1);
    if (!nz || nz->n_attrs) return NULL;
    *eq = prod(p, nz->in[0], "Equal", 2);
    return *eq && !(*eq)->n_attrs ? sp : NULL;
}

typedef struct match {
    int prev, d, idx, w, g;
    int64_t expert;
} match;

/* Y's weight: Unsqueeze(Reshape(Reshape(Gather(Flatten(W, 2), Add(slot, Mul(tok, K))), [-1]), ..), -1)
 * with K = Gather(Shape(W), 1): W, with tok and slot into *tok, *slot. */
static int weight(moe *p, int v, int *tok, int *slot)
{
    int64_t a[1];
    int r2v = unsqueeze(p, v, -1, 1);
    const bf__node *r2 = prod(p, r2v, "Reshape", 2);
    if (!r2 || attr_i(r2, "allowzero", 0) != 0) return -1;
    const bf__node *r1 = prod(p, r2->in[0], "Reshape", 2);
    if (!r1 || attr_i(r1, "allowzero", 0) != 0 || !int_is(p, r1->in[1], -1)) return -1;
    const bf__node *ga = prod(p, r1->in[0], "Gather", 2);
    if (!ga || attr_i(ga, "axis", 0) != 0) return -1;
    const bf__node *cc = prod(p, r2->in[1], "Concat", 1);
    if (!cc || attr_i(cc, "axis", -1) != 0 || shape_of(p, cc->in[0]) != ga->in[1]) return -1;
    const bf__node *fl = prod(p, ga->in[0], "Flatten", 1);
    const bf__node *ad = prod(p, ga->in[1], "Add", 2);
    if (!fl || attr_i(fl, "axis", 1) != 2 || !ad || ad->n_attrs) return -1;
    const bf__node *mu = prod(p, ad->in[1], "Mul", 2);
    if (!mu || mu->n_attrs) return -1;
    const bf__node *k = prod(p, mu->in[1], "Gather", 2);
    if (!k || attr_i(k, "axis", 0) != 0 || ints(p, k->in[1], a, 1) != 1 || a[0] != 1) return -1;
    if (shape_of(p, k->in[0]) != fl->in[0]) return -1;
    *slot = ad->in[0];
    *tok = mu->in[0];
    return fl->in[0];
}

/* The ops an expert may hold: each output row from the same input row. */
static int row_op(const bf_model *m, const bf__node *n, const unsigned char *in_region, int v_from)
{
    static const char *const unary[] = {"Sigmoid", "Relu", "Tanh", "Erf", "Gelu", "Neg", NULL};
    static const char *const binary[] = {"Mul", "Add", "Sub", "Div", NULL};
    for (const char *const *u = unary; *u; u++)
        if (is_op(n, *u)) return n->n_in == 1 && n->n_out == 1;
    if (is_op(n, "MatMul")) {
        /* the rows' input times a 2-D initializer */
        int w = n->in[1];
        return n->n_in == 2 && n->in[0] == v_from && w >= 0 && m->values[w].init &&
               m->values[w].init->ndim == 2 && !in_region[w];
    }
    for (const char *const *b = binary; *b; b++)
        if (is_op(n, *b)) {
            if (n->n_in != 2 || n->n_attrs) return 0;
            for (int j = 0; j < 2; j++) {
                int x = n->in[j];
                /* both from the rows, or a constant of rank <= 1 */
                if (x < 0 || (!in_region[x] && !(m->values[x].init && m->values[x].init->ndim <= 1))) return 0;
            }
            return 1;
        }
    return 0;
}

/* The expert between G's output and D: row-wise ops only, every value read
 * inside it alone (D by y alone), none a graph output. */
static int expert_ok(const bf_model *m, int g_out, int d, const bf__node *y, unsigned char *in_region)
{
    memset(in_region, 0, m->n_values);
    in_region[g_out] = 1;
    for (size_t o = 0; o < m->n_nodes; o++) {
        const bf__node *n = &m->nodes[m->order[o]];
        int reads = 0;
        for (int j = 0; j < n->n_in; j++) reads |= n->in[j] >= 0 && in_region[n->in[j]];
        if (!reads || n == y) continue;
        int from = -1;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && in_region[n->in[j]]) from = n->in[j];
        if (!row_op(m, n, in_region, from) || n->out[0] < 0) return 0;
        in_region[n->out[0]] = 1;
    }
    if (!in_region[d]) return 0;
    for (size_t i = 0; i < m->n_outputs; i++)
        if (in_region[m->output_vals[i]]) return 0;
    /* only y reads D; everything else the region reads stays within it */
    for (size_t i = 0; i < m->n_nodes; i++) {
        const bf__node *n = &m->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == d && n != y) return 0;
    }
    return 1;
}

/* Whether Add node a is one expert's index_add; fills mt and p's nodes. */
static int is_moe_add(moe *p, const bf__node *a, match *mt, unsigned char *in_region)
{
    const bf_model *m = p->m;
    int64_t st[BF_MAX_DIMS], en[BF_MAX_DIMS], ax[BF_MAX_DIMS];
    if (a->n_in != 2 || a->n_out != 1 || a->n_attrs || a->out[0] < 0) return 0;
    mt->prev = a->in[0];
    const bf__node *s = prod(p, a->in[1], "ScatterElements", 3);
    if (!s || s->n_attrs != 1 || attr_i(s, "axis", -1) != 0) return 0;
    const bf__node *z = prod(p, s->in[0], "ConstantOfShape", 1);
    const bf__attr *zv = z ? bf__node_attr(z, "value") : NULL;
    if (!zv || z->n_attrs != 1 || zv->type != BF__ATTR_TENSOR || !zv->t || !zv->t->data || zv->t->dtype != BF_F32 ||
        bf_tensor_numel(zv->t) != 1 || ((const float *)zv->t->data)[0] != 0.0f)
        return 0;
    if (shape_of(p, z->in[0]) != mt->prev) return 0;
    const bf__node *ix = prod(p, s->in[1], "Expand", 2);
    const bf__node *vx = prod(p, s->in[2], "Expand", 2);
    if (!ix || !vx || shape_of(p, ix->in[1]) != s->in[2]) return 0;
    int tok = unsqueeze(p, ix->in[0], 1, -1);
    const bf__node *sl = prod(p, shape_of(p, vx->in[1]), "Slice", 4);
    if (!sl || sl->in[0] != mt->prev) return 0;
    int r = ints(p, sl->in[3], ax, BF_MAX_DIMS);
    if (r < 1 || ints(p, sl->in[1], st, BF_MAX_DIMS) != r || ints(p, sl->in[2], en, BF_MAX_DIMS) != r) return 0;
    for (int k = 0; k < r; k++)
        if (ax[k] != k || st[k] != 0 || en[k] != (k == 0 ? 1 : INT64_MAX)) return 0;
    const bf__node *y = prod(p, vx->in[0], "Mul", 2);
    if (!y || y->n_attrs) return 0;
    int wtok = -1, wslot = -1;
    mt->w = weight(p, y->in[1], &wtok, &wslot);
    const bf__node *eq0, *eq1;
    const bf__node *sp0 = index_part(p, tok, 0, &eq0);
    const bf__node *sp1 = index_part(p, wslot, 1, &eq1);
    if (mt->w < 0 || tok < 0 || wtok != tok || !sp0 || sp0 != sp1 || eq0 != eq1) return 0;
    if (ints(p, eq0->in[1], &mt->expert, 1) != 1) return 0;
    mt->idx = eq0->in[0];
    /* the expert: G = Gather(h, tok) on axis 0, D = y's first input */
    const bf__node *g = NULL;
    for (size_t i = 0; i < m->n_nodes && !g; i++) {
        const bf__node *n = &m->nodes[i];
        if (is_op(n, "Gather") && n->n_in == 2 && n->in[1] == tok && n->n_out == 1 && n->out[0] >= 0) g = n;
    }
    if (!g || attr_i(g, "axis", 0) != 0 || g->in[0] < 0) return 0;
    mt->g = (int)(g - m->nodes);
    mt->d = y->in[0];
    return !p->fail && expert_ok(m, g->out[0], mt->d, y, in_region);
}

static bf_status oom(const bf_model *m, bf_error *err)
{
    return bf_error_set(err, BF_ENOMEM, "%s: out of memory while fusing an MoE dispatch by index", m->label);
}

/* G becomes Identity(h); the Add becomes bf.MoEIndexAdd(P, D, I, W, expert). */
static bf_status rewrite(bf_model *m, bf__node *a, const match *mt, bf_error *err)
{
    bf__node *g = &m->nodes[mt->g];
    char *ident = bf__strdup("Identity"), *op_type = bf__strdup("bf.MoEIndexAdd"), *name = bf__strdup("expert");
    int *in = bf__malloc(4 * sizeof *in);
    bf__attr *attrs = bf__calloc(1, sizeof *attrs);
    if (!ident || !op_type || !name || !in || !attrs) {
        bf__free(ident), bf__free(op_type), bf__free(name), bf__free(in), bf__free(attrs);
        return oom(m, err);
    }
    for (size_t i = 0; i < g->n_attrs; i++) bf__attr_free(&g->attrs[i]);
    bf__free(g->attrs);
    g->attrs = NULL;
    g->n_attrs = 0;
    bf__free(g->op_type);
    g->op_type = ident;
    g->n_in = 1;
    in[0] = mt->prev;
    in[1] = mt->d;
    in[2] = mt->idx;
    in[3] = mt->w;
    attrs[0] = (bf__attr){.name = name, .type = BF__ATTR_INT, .i = mt->expert};
    bf__node_replace(a, op_type, in, 4, attrs, 1);
    return BF_OK;
}

/* Marks dead, among the pattern's nodes, those no live node or graph output
 * reads any more (repeatedly: the index arithmetic reads itself); their
 * values now computed inside the Add's op. */
static void mark_dead(bf_model *m, const moe *p, int into, unsigned char *dead)
{
    for (int changed = 1; changed;) {
        changed = 0;
        for (int k = 0; k < p->n; k++) {
            int i = p->nodes[k];
            const bf__node *n = &m->nodes[i];
            if (dead[i]) continue;
            int read = 0;
            for (int j = 0; j < n->n_out && !read; j++) {
                int v = n->out[j];
                if (v < 0) continue;
                for (size_t o = 0; o < m->n_outputs; o++) read |= m->output_vals[o] == v;
                for (size_t r = 0; r < m->n_nodes && !read; r++)
                    for (int q = 0; q < m->nodes[r].n_in && !dead[r]; q++) read |= m->nodes[r].in[q] == v;
            }
            if (read) continue;
            dead[i] = 1;
            changed = 1;
            for (int j = 0; j < n->n_out; j++)
                if (n->out[j] >= 0) m->values[n->out[j]].fused_into = into + 1;
        }
    }
}

bf_status bf__fuse_moe_index(bf_model *m, bf_error *err)
{
    unsigned char *dead = NULL, *in_region = NULL;
    moe *p = NULL;
    size_t fused = 0;
    bf_status st = BF_OK;
    for (size_t i = 0; i < m->n_nodes && st == BF_OK; i++) {
        bf__node *a = &m->nodes[i];
        if (!is_op(a, "Add") || (dead && dead[i])) continue;
        if (!p && (!(p = bf__calloc(1, sizeof *p)) || !(dead = bf__calloc(m->n_nodes + 1, 1)) ||
                   !(in_region = bf__calloc(m->n_values + 1, 1)))) {
            st = oom(m, err);
            break;
        }
        match mt;
        *p = (moe){.m = m};
        if (!is_moe_add(p, a, &mt, in_region) || dead[mt.g]) continue;
        int into = a->out[0];
        if ((st = rewrite(m, a, &mt, err)) != BF_OK) break;
        mark_dead(m, p, into, dead);
        fused++;
    }
    if (st == BF_OK && fused) st = bf__remove_nodes(m, dead, err);
    bf__free(p);
    bf__free(dead);
    bf__free(in_region);
    return st;
}
