/* KV-cache fault sites (bitflip/sites.h: k_cache.K, v_cache.K): the value
 * a KV cache would hold, found by walking back from an attention product's
 * K or V operand through the ops that only move or repeat elements, and
 * where its (head, position, dim) entries lie in a plan.
 *
 * The walk is structural (sites.c lists the sites without a plan); the
 * layout needs shapes, so it walks the same path again in a plan, carrying
 * each axis as a list of labelled factors (batch, head, position, dim) from
 * the operand, whose axes are known ([B, H, D, T] for K^T, [B, H, T, D] for
 * V), back to the site: a Transpose permutes the axes, a Reshape, Unsqueeze
 * or Squeeze regroups the factors (splitting one, major part first, where
 * an axis boundary falls inside it), an Expand or a repetition drops the
 * factors it broadcasts (grouped-query attention's copies of a key/value
 * head). Reads the graph only and allocates nothing. */
#include <string.h>

#include "bitflip/sites.h"
#include "exec/sites_impl.h"
#include "model/graph.h"

#define KV_WALK_MAX 12
#define KV_RANK_MAX 8
#define KV_FACTORS_MAX 8

static int op_is(const bf__node *n, const char *op) { return !strcmp(n->op_type, op); }

static const bf__node *producer(const bf_model *m, int v)
{
    if (v < 0 || (size_t)v >= m->n_values || m->values[v].kind != BF__VAL_NODE || m->values[v].producer < 0) return NULL;
    return &m->nodes[m->values[v].producer];
}

static int moves_elements(const bf__node *n)
{
    static const char *const ops[] = {"Transpose", "Reshape", "Expand", "Unsqueeze", "Squeeze", "Identity",
                                      "bf.RepeatInterleave"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (op_is(n, ops[k])) return n->n_in >= 1;
    return 0;
}

/* The unrolled repeat_interleave (exec/fuse_seq.c): Concat of
 * bf.RepeatInterleave(S_i) over the outputs S_0, S_1, ... of one Split, in
 * order: that Split's node, else NULL. */
static const bf__node *unrolled_repeat(const bf_model *m, const bf__node *cat)
{
    const bf__node *split = NULL;
    if (!op_is(cat, "Concat") || cat->n_in < 1) return NULL;
    for (int i = 0; i < cat->n_in; i++) {
        const bf__node *r = producer(m, cat->in[i]);
        if (!r || !op_is(r, "bf.RepeatInterleave") || r->n_in < 1) return NULL;
        const bf__node *s = producer(m, r->in[0]);
        if (!s || !op_is(s, "Split") || s->n_out != cat->n_in || s->out[i] != r->in[0] || (split && s != split)) return NULL;
        split = s;
    }
    /* the pieces are put back along the axis they were split on */
    const bf__attr *a = bf__node_attr(cat, "axis"), *b = bf__node_attr(split, "axis");
    return (a ? a->i : 0) == (b ? b->i : 0) ? split : NULL;
}

/* One step back from value v: the value its producer moved the elements
 * from, or -1 when v is where the walk stops. */
static int step_back(const bf_model *m, int v)
{
    const bf__node *p = producer(m, v);
    if (!p) return -1;
    if (moves_elements(p)) return p->in[0];
    const bf__node *split = unrolled_repeat(m, p);
    return split && split->n_in >= 1 ? split->in[0] : -1;
}

int bf__kv_walk(const bf_model *m, int operand)
{
    int v = operand;
    for (int depth = 0; depth < KV_WALK_MAX; depth++) {
        const bf__node *p = producer(m, v);
        if (!p) return -1;   /* a graph input or a parameter: nothing computes the cache here */
        int back = step_back(m, v);
        if (back < 0) return v;   /* the computation (or the Concat of past and new) that writes it */
        v = back;
    }
    return -1;
}

/* --- the layout, in a plan */

typedef struct factor {
    char label;               /* 'B', 'H', 'T', 'D' */
    int64_t size;
} factor;

typedef struct axes {
    int rank;
    int n[KV_RANK_MAX];
    factor f[KV_RANK_MAX][KV_FACTORS_MAX];
} axes;

static void push(axes *a, int axis, char label, int64_t size, int *ok)
{
    if (size == 1) return;
    if (a->n[axis] >= KV_FACTORS_MAX) { *ok = 0; return; }
    a->f[axis][a->n[axis]++] = (factor){label, size};
}

/* Keep the major part of `axis` (size `keep`), dropping the rest: a
 * repetition of each index, or a broadcast. */
static int keep_major(axes *a, int axis, int64_t keep)
{
    axes t = *a;
    int ok = 1;
    a->n[axis] = 0;
    for (int k = 0; k < t.n[axis] && keep > 1; k++) {
        factor f = t.f[axis][k];
        if (keep % f.size == 0) push(a, axis, f.label, f.size, &ok), keep /= f.size;
        else if (f.size % keep == 0) push(a, axis, f.label, keep, &ok), keep = 1;
        else return 0;
    }
    return ok && keep == 1;
}

/* Reshape back: the same factors, row-major, over the input's dims. */
static int regroup(axes *a, const bf_tensor *in)
{
    factor flat[KV_RANK_MAX * KV_FACTORS_MAX];
    int n = 0, ok = 1;
    if (in->ndim > KV_RANK_MAX) return 0;
    for (int i = 0; i < a->rank; i++)
        for (int k = 0; k < a->n[i]; k++) flat[n++] = a->f[i][k];
    axes b = {.rank = in->ndim};
    int at = 0;
    for (int j = 0; j < in->ndim; j++) {
        int64_t need = in->dims[j];
        while (need > 1) {
            if (at >= n) return 0;
            if (need % flat[at].size == 0) {
                push(&b, j, flat[at].label, flat[at].size, &ok);
                need /= flat[at++].size;
            } else if (flat[at].size % need == 0) {   /* split: the major part here */
                push(&b, j, flat[at].label, need, &ok);
                flat[at].size /= need;
                need = 1;
            } else {
                return 0;
            }
        }
    }
    *a = b;
    return ok && at == n;
}

/* Value `out` of node p back to its input `in`. */
static int back_through(const bf__node *p, const bf_tensor *out, const bf_tensor *in, axes *a)
{
    if (in->ndim > KV_RANK_MAX || out->ndim != a->rank) return 0;
    if (op_is(p, "Identity")) return 1;
    if (op_is(p, "Transpose")) {
        const bf__attr *perm = bf__node_attr(p, "perm");
        axes b = {.rank = in->ndim};
        if (in->ndim != out->ndim || (perm && (int)perm->n != out->ndim)) return 0;
        for (int i = 0; i < out->ndim; i++) {
            int64_t j = perm ? perm->ints[i] : out->ndim - 1 - i;
            if (j < 0 || j >= in->ndim) return 0;
            b.n[j] = a->n[i];
            memcpy(b.f[j], a->f[i], sizeof a->f[i]);
        }
        *a = b;
        return 1;
    }
    if (op_is(p, "Expand")) {   /* right-aligned broadcast */
        int off = out->ndim - in->ndim;
        if (off < 0) return 0;
        axes b = {.rank = in->ndim};
        for (int j = 0; j < in->ndim; j++) {
            if (in->dims[j] == 1 && out->dims[j + off] != 1) continue;
            b.n[j] = a->n[j + off];
            memcpy(b.f[j], a->f[j + off], sizeof a->f[j + off]);
        }
        *a = b;
        return 1;
    }
    int64_t axis;
    if (op_is(p, "bf.RepeatInterleave") || op_is(p, "Concat")) {   /* Concat: the unrolled form */
        const bf__attr *ax = bf__node_attr(p, "axis");
        axis = ax ? ax->i : 0;
        if (axis < 0) axis += out->ndim;
        if (axis < 0 || axis >= out->ndim || in->ndim != out->ndim || in->dims[axis] <= 0 ||
            out->dims[axis] % in->dims[axis])
            return 0;
        return keep_major(a, (int)axis, in->dims[axis]);
    }
    return regroup(a, in);   /* Reshape, Unsqueeze, Squeeze */
}

/* A label's factors in the per-sample slice: one stride, or 0 when split
 * around another label's. */
static int label_stride(const axes *a, const bf_tensor *t, char label, int64_t *size, int64_t *stride)
{
    int64_t s = 1;
    *size = 1, *stride = 0;
    int64_t expect = -1;   /* the stride the next (more major) factor must have */
    for (int i = a->rank - 1; i >= 0; i--) {
        int64_t fs = s;
        for (int k = a->n[i] - 1; k >= 0; k--) {
            if (a->f[i][k].label == label) {
                if (i == 0) return 0;   /* on the batch's dim */
                if (expect >= 0 && fs != expect) return 0;
                if (expect < 0) *stride = fs;
                *size *= a->f[i][k].size;
                expect = fs * a->f[i][k].size;
            }
            fs *= a->f[i][k].size;
        }
        s *= t->dims[i];
    }
    return 1;
}

bf_status bf_plan_kv_site_layout(const bf_plan *plan, const bf_named_site *site, bf_kv_site_layout *out, bf_error *err)
{
    const bf_model *m = bf_plan_model(plan);
    int is_k = site->kind == BF_SITE_K_CACHE;
    if (!is_k && site->kind != BF_SITE_V_CACHE)
        return bf_error_set(err, BF_EINVAL, "'%s' is not a KV-cache site", site->value_name ? site->value_name : "");
    const bf_tensor *t = bf_plan_value(plan, site->operand);
    if (!t || t->ndim != 4)
        return bf_error_set(err, BF_EINVAL, "%s_cache.%d: the attention product's %s operand is not [batch, heads, ., .]",
                            is_k ? "k" : "v", site->index, is_k ? "K" : "V");
    axes a = {.rank = 4, .n = {1, 1, 1, 1}};
    a.f[0][0] = (factor){'B', t->dims[0]};
    a.f[1][0] = (factor){'H', t->dims[1]};
    a.f[2][0] = (factor){is_k ? 'D' : 'T', t->dims[2]};
    a.f[3][0] = (factor){is_k ? 'T' : 'D', t->dims[3]};
    for (int i = 0; i < 4; i++)
        if (t->dims[i] == 1) a.n[i] = 0;
    int v = (int)site->operand;
    for (int depth = 0; v != site->value; depth++) {
        const bf__node *p = producer(m, v);
        int back = step_back(m, v);
        if (!p || back < 0 || depth >= KV_WALK_MAX)
            return bf_error_set(err, BF_EINVAL, "%s_cache.%d: the walk back from the attention product does not reach '%s'",
                                is_k ? "k" : "v", site->index, site->value_name);
        const bf_tensor *to = bf_plan_value(plan, v), *ti = bf_plan_value(plan, back);
        if (!to || !ti || !back_through(p, to, ti, &a))
            return bf_error_set(err, BF_EINVAL, "%s_cache.%d: the %s node '%s' moves the heads, positions or dims in a way "
                                "the KV-cache site cannot follow", is_k ? "k" : "v", site->index, p->op_type,
                                p->name ? p->name : "");
        v = back;
    }
    t = bf_plan_value(plan, v);
    if (!t || t->ndim != a.rank || t->ndim < 1)
        return bf_error_set(err, BF_EINVAL, "'%s' has no shape in the plan", site->value_name);
    *out = (bf_kv_site_layout){0};
    if (!label_stride(&a, t, 'H', &out->heads, &out->stride_head) || !label_stride(&a, t, 'T', &out->positions, &out->stride_pos) ||
        !label_stride(&a, t, 'D', &out->dim, &out->stride_dim))
        return bf_error_set(err, BF_EINVAL, "%s_cache.%d: the heads, positions or dims of '%s' are not each one axis of its "
                            "samples' slices", is_k ? "k" : "v", site->index, site->value_name);
    out->elements = 1;
    for (int i = 1; i < t->ndim; i++) out->elements *= t->dims[i];
    return BF_OK;
}
