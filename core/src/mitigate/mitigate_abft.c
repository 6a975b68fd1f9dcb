/* ABFT in the graph: after each Gemm, MatMul with stored weights and Conv,
 * the checksum products (the op applied to its input with the golden
 * weights' channel sums, weighted sums and |sums|) and a bf.AbftCheck node
 * (ops/mitigate_ops.c) that compares them with the output. */
#include <math.h>
#include <string.h>

#include "mitigate/mitigate_edit.h"

/* The stored golden values of value v (a parameter: the campaign's stored
 * copy if it has one), or NULL if v is not a stored tensor. */
static const float *golden_data(const bf_model *m, const float *const *stored, int v)
{
    if (v < 0) return NULL;
    const bf__value *val = &m->values[v];
    if (val->kind == BF__VAL_PARAM) {
        if (stored && stored[val->index]) return stored[val->index];
        return val->init && val->init->dtype == BF_F32 ? val->init->data : NULL;
    }
    if (val->kind == BF__VAL_CONST && val->init && val->init->dtype == BF_F32) return val->init->data;
    return NULL;
}

static int64_t attr_i(const bf__node *n, const char *name, int64_t def)
{
    const bf__attr *a = bf__node_attr(n, name);
    return a && a->type == BF__ATTR_INT ? a->i : def;
}

static float attr_f(const bf__node *n, const char *name, float def)
{
    const bf__attr *a = bf__node_attr(n, name);
    return a && a->type == BF__ATTR_FLOAT ? a->f : def;
}

/* The checksum weights of a linear op, laid out as the op's own weights
 * with one output channel per group: column sums, sums weighted by
 * channel + 1, sums of magnitudes; the bias likewise. */
typedef struct sums {
    int kind;               /* 0 Gemm, 1 MatMul, 2 Conv */
    int64_t kdim, groups, cg;
    int ndim;
    int64_t wdims[BF_MAX_DIMS];
    float *w[3], *b[3];
    int wv[3], bv[3];
} sums;

/* Sets up s for node n if ABFT can protect it: 1 yes, 0 no. */
static int linear_shape(const bf_model *m, const float *const *stored, const bf__node *n, sums *s)
{
    memset(s, 0, sizeof *s);
    if (n->n_in < 2 || n->n_out < 1 || n->out[0] < 0) return 0;
    int wv = n->in[1];
    const bf__value *w = wv >= 0 ? &m->values[wv] : NULL;
    if (!w || !w->init || !golden_data(m, stored, wv)) return 0;
    const bf_tensor *wt = w->init;
    int bv = n->n_in > 2 ? n->in[2] : -1;
    if (bv >= 0 && !golden_data(m, stored, bv)) return 0;   /* a bias computed at run time */
    if (strcmp(n->op_type, "Gemm") == 0) {
        if (wt->ndim != 2) return 0;
        int tb = attr_i(n, "transB", 0) != 0;
        s->kind = 0;
        s->kdim = tb ? wt->dims[1] : wt->dims[0];
        s->groups = 1;
        s->cg = tb ? wt->dims[0] : wt->dims[1];
        if (bv >= 0) {
            const bf_tensor *bt = m->values[bv].init;
            int64_t bn = bf_tensor_numel(bt);
            /* a bias per column, or one for all; not one per row */
            if (!(bn == 1 || (bn == s->cg && (bt->ndim == 1 || (bt->ndim == 2 && bt->dims[0] == 1))))) return 0;
        }
        s->ndim = 2;
        s->wdims[0] = s->kdim;
        s->wdims[1] = 1;
        return 1;
    }
    if (strcmp(n->op_type, "MatMul") == 0) {
        if (wt->ndim != 2 || n->n_in != 2) return 0;
        s->kind = 1;
        s->kdim = wt->dims[0];
        s->groups = 1;
        s->cg = wt->dims[1];
        s->ndim = 2;
        s->wdims[0] = s->kdim;
        s->wdims[1] = 1;
        return 1;
    }
    if (strcmp(n->op_type, "Conv") == 0) {
        if (wt->ndim < 3) return 0;
        int64_t g = attr_i(n, "group", 1);
        if (g < 1 || wt->dims[0] % g) return 0;
        s->kind = 2;
        s->groups = g;
        s->cg = wt->dims[0] / g;
        s->kdim = 1;
        for (int d = 1; d < wt->ndim; d++) s->kdim *= wt->dims[d];
        s->ndim = wt->ndim;
        memcpy(s->wdims, wt->dims, (size_t)wt->ndim * sizeof *wt->dims);
        s->wdims[0] = g;
        return 1;
    }
    return 0;
}

static void fill_sums(const bf_model *m, const float *const *stored, const bf__node *n, sums *s)
{
    const float *w = golden_data(m, stored, n->in[1]);
    const float *b = n->n_in > 2 ? golden_data(m, stored, n->in[2]) : NULL;
    int64_t bn = b ? bf_tensor_numel(m->values[n->in[2]].init) : 0;
    int tb = s->kind == 0 && attr_i(n, "transB", 0) != 0;
    for (int64_t g = 0; g < s->groups; g++) {
        for (int64_t k = 0; k < s->kdim; k++) {
            double a = 0, aw = 0, aa = 0;
            for (int64_t c = 0; c < s->cg; c++) {
                int64_t ch = g * s->cg + c;
                double v = s->kind == 2 ? w[ch * s->kdim + k] : tb ? w[ch * s->kdim + k] : w[k * s->cg + ch];
                a += v;
                aw += (double)(c + 1) * v;
                aa += fabs(v);
            }
            s->w[0][g * s->kdim + k] = (float)a;
            s->w[1][g * s->kdim + k] = (float)aw;
            s->w[2][g * s->kdim + k] = (float)aa;
        }
        if (!b) continue;
        double a = 0, aw = 0, aa = 0;
        for (int64_t c = 0; c < s->cg; c++) {
            double v = bn == 1 ? b[0] : b[g * s->cg + c];
            a += v;
            aw += (double)(c + 1) * v;
            aa += fabs(v);
        }
        s->b[0][g] = (float)a;
        s->b[1][g] = (float)aw;
        s->b[2][g] = (float)aa;
    }
}

bf_status bf__abft_insert(bf__edit *e, const float *const *stored, int ni, const bf_abft_opts *o, bf_error *err)
{
    const bf_model *base = e->m->base;
    const bf__node node = e->m->nodes[ni], *n = &node;   /* its inputs as rewired so far (a copy: nodes grow) */
    sums s;
    if (!linear_shape(e->m, stored, n, &s)) return BF_OK;   /* the derived model: inputs may be inserted values */
    int has_b = n->n_in > 2 && n->in[2] >= 0;
    static const char *const tag[3] = {"#abft_sum", "#abft_wsum", "#abft_abs"};
    const char *yname = base->values[n->out[0]].name;
    const char *nm = n->name && *n->name ? n->name : yname;
    for (int i = 0; i < 3; i++) {
        s.wv[i] = bf__edit_add_const(e, bf__edit_own_str(e, nm, tag[i]), s.ndim, s.wdims, &s.w[i]);
        int64_t gd = s.groups;
        s.bv[i] = has_b ? bf__edit_add_const(e, bf__edit_own_str(e, nm, i == 0 ? "#abft_bsum" : i == 1 ? "#abft_bwsum" : "#abft_babs"), 1,
                                    &gd, &s.b[i])
                        : -1;
        if (s.wv[i] < 0 || (has_b && s.bv[i] < 0)) return bf__edit_oom(err);
    }
    fill_sums(e->m, stored, n, &s);
    int x = n->in[0], y = n->out[0];
    size_t first = e->m->n_nodes;
    int absx = bf__edit_add_node(e, ni, bf__edit_own_str(e, nm, "#abft_absx"), "Abs", bf__op_find("Abs"), &x, 1, NULL, 0,
                        bf__edit_own_str(e, nm, "#abft_absx"));
    if (absx < 0) return bf__edit_oom(err);
    int chk[3];
    for (int i = 0; i < 3; i++) {
        size_t na = n->n_attrs;
        bf__attr *a = bf__edit_attrs_copy(e, n, 2);
        if (!a) return bf__edit_oom(err);
        if (s.kind == 0) {
            bf__edit_attr_set_int(a, &na, "transB", 0);
            if (i == 2) {
                bf__edit_attr_set_float(a, &na, "alpha", fabsf(attr_f(n, "alpha", 1)));
                bf__edit_attr_set_float(a, &na, "beta", fabsf(attr_f(n, "beta", 1)));
            }
        }
        int in[3] = {i == 2 ? absx : x, s.wv[i], s.bv[i]};
        chk[i] = bf__edit_add_node(e, ni, bf__edit_own_str(e, nm, tag[i]), n->op_type, n->op, in, has_b ? 3 : 2, a, na,
                          bf__edit_own_str(e, nm, tag[i]));
        if (chk[i] < 0) return bf__edit_oom(err);
    }
    size_t na = n->n_attrs;
    bf__attr *a = bf__edit_attrs_copy(e, n, 6);
    if (!a) return bf__edit_oom(err);
    bf__edit_attr_set_int(a, &na, "bf_axis", s.kind == 2 ? 1 : -1);
    bf__edit_attr_set_int(a, &na, "bf_groups", s.groups);
    bf__edit_attr_set_int(a, &na, "bf_inner", s.kdim);
    bf__edit_attr_set_int(a, &na, "bf_correct", o->correct);
    bf__edit_attr_set_float(a, &na, "bf_k", (float)(o->k > 0 ? o->k : BF_ABFT_K_DEFAULT));
    bf__edit_attr_set_string(a, &na, "bf_op", n->op_type);
    int in[7] = {y, chk[0], chk[1], chk[2]};
    for (int j = 0; j < n->n_in; j++) in[4 + j] = n->in[j];
    int z = bf__edit_add_node(e, ni, bf__edit_own_str(e, nm, "#abft"), "bf.AbftCheck", bf__op_find_internal("bf.AbftCheck"), in,
                     4 + n->n_in, a, na, bf__edit_own_str(e, yname, "#abft"));
    if (z < 0) return bf__edit_oom(err);
    /* every reader of y but the nodes just inserted */
    bf__edit_rewire(e, y, z, first, e->m->n_nodes);
    e->cur[y] = z;
    return BF_OK;
}
