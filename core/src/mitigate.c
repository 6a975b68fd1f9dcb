/* Mitigations that change the graph: a derived model with bf.AbftCheck
 * after each protected linear op and bf.Clip after each clipped output
 * (ops/mitigate_ops.c). The derived model keeps every value and node id of
 * the base, so fault sites resolved on the base stay valid; the inserted
 * nodes only read the protected output and replace it for its readers (and
 * as a graph output), so a fault on that output strikes before the check or
 * the clip sees it, as it would in hardware that checks what was computed. */
#include <float.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bitflip/eval.h"
#include "diff.h"
#include "mitigate_impl.h"
#include "op.h"

void bf_mitigation_free(bf_mitigation *m)
{
    if (!m) return;
    free(m->name);
    for (size_t i = 0; i < m->clip.n_at; i++) free(m->clip.at[i]);
    free(m->clip.at);
    for (size_t i = 0; i < m->sbp.n_tensors; i++) free(m->sbp.tensors[i]);
    free(m->sbp.tensors);
    memset(m, 0, sizeof *m);
}

/* --- the derived model */

typedef struct edit {
    bf_model *m;
    size_t cap_values, cap_nodes;
    int *after;             /* per node: the node it runs right after (-1: base order) */
    int *cur;               /* per base value: what its readers read now */
    size_t base_values, base_nodes;
} edit;

static bf_status oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory protecting the model"); }

static void *own(edit *e, void *p)
{
    bf_model *m = e->m;
    if (!p) return NULL;
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **o = bf__realloc(m->owned, cap * sizeof *o);
        if (!o) {
            bf__free(p);
            return NULL;
        }
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return p;
}

static char *own_str(edit *e, const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 1;
    char *s = bf__malloc(n);
    if (s) snprintf(s, n, "%s%s", a, b);
    return own(e, s);
}

static bf_status derive(const bf_model *base, edit *e, bf_error *err)
{
    memset(e, 0, sizeof *e);
    bf_model *m = bf__calloc(1, sizeof *m);
    if (!m) return oom(err);
    *m = *base;
    m->base = base;
    m->owned = NULL;
    m->n_owned = m->cap_owned = 0;
    m->values = NULL;
    m->nodes = NULL;
    m->order = NULL;
    m->output_vals = NULL;
    e->m = m;
    e->base_values = base->n_values;
    e->base_nodes = base->n_nodes;
    e->cap_values = base->n_values + 16;
    e->cap_nodes = base->n_nodes + 16;
    m->values = bf__calloc(e->cap_values, sizeof *m->values);
    m->nodes = bf__calloc(e->cap_nodes, sizeof *m->nodes);
    m->output_vals = bf__malloc((base->n_outputs + 1) * sizeof *m->output_vals);
    e->after = bf__malloc(e->cap_nodes * sizeof *e->after);
    e->cur = bf__malloc((base->n_values + 1) * sizeof *e->cur);
    if (!m->values || !m->nodes || !m->output_vals || !e->after || !e->cur) return oom(err);
    memcpy(m->values, base->values, base->n_values * sizeof *m->values);
    memcpy(m->output_vals, base->output_vals, base->n_outputs * sizeof *m->output_vals);
    for (size_t i = 0; i < base->n_values; i++) e->cur[i] = (int)i;
    for (size_t i = 0; i < base->n_nodes; i++) {
        bf__node *n = &m->nodes[i];
        *n = base->nodes[i];
        n->in = bf__malloc(((size_t)n->n_in + 1) * sizeof *n->in);
        n->out = bf__malloc(((size_t)n->n_out + 1) * sizeof *n->out);
        if (!n->in || !n->out) {
            m->n_nodes = i + 1;
            return oom(err);
        }
        memcpy(n->in, base->nodes[i].in, (size_t)n->n_in * sizeof *n->in);
        memcpy(n->out, base->nodes[i].out, (size_t)n->n_out * sizeof *n->out);
        e->after[i] = -1;
    }
    return BF_OK;
}

static void edit_abort(edit *e)
{
    bf_model_free(e->m);
    bf__free(e->after);
    bf__free(e->cur);
    memset(e, 0, sizeof *e);
}

static int add_value(edit *e, const char *name, bf__value_kind kind, bf_tensor *init)
{
    bf_model *m = e->m;
    if (m->n_values == e->cap_values) {
        size_t cap = 2 * e->cap_values;
        bf__value *v = bf__realloc(m->values, cap * sizeof *v);
        if (!v) return -1;
        m->values = v;
        e->cap_values = cap;
    }
    bf__value *v = &m->values[m->n_values];
    *v = (bf__value){.name = (char *)name, .kind = kind, .producer = -1, .index = -1, .init = init};
    return (int)m->n_values++;
}

/* A float constant of the given shape, zeroed; NULL data on failure. */
static int add_const(edit *e, const char *name, int ndim, const int64_t *dims, float **data)
{
    bf_tensor *t = own(e, bf__calloc(1, sizeof *t));
    if (!t) return -1;
    t->name = name;
    t->dtype = BF_F32;
    t->ndim = ndim;
    memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    *data = own(e, bf__calloc((size_t)bf_tensor_numel(t) + 1, sizeof(float)));
    if (!*data) return -1;
    t->data = *data;
    return add_value(e, name, BF__VAL_CONST, t);
}

/* A node running right after node `after`; its first output is a new value. */
static int add_node(edit *e, int after, const char *name, const char *op_type, const bf__op *op, const int *in,
                    int n_in, bf__attr *attrs, size_t n_attrs, const char *out_name)
{
    bf_model *m = e->m;
    if (m->n_nodes == e->cap_nodes) {
        size_t cap = 2 * e->cap_nodes;
        bf__node *n = bf__realloc(m->nodes, cap * sizeof *n);
        int *a = bf__realloc(e->after, cap * sizeof *a);
        if (n) m->nodes = n;
        if (a) e->after = a;
        if (!n || !a) return -1;
        e->cap_nodes = cap;
    }
    int y = add_value(e, out_name, BF__VAL_NODE, NULL);
    if (y < 0) return -1;
    bf__node *n = &m->nodes[m->n_nodes];
    memset(n, 0, sizeof *n);
    n->in = bf__malloc((size_t)n_in * sizeof *n->in);
    n->out = bf__malloc(sizeof *n->out);
    if (!n->in || !n->out) {
        bf__free(n->in);
        bf__free(n->out);
        n->in = n->out = NULL;
        return -1;
    }
    m->n_nodes++;
    n->name = (char *)name;
    n->op_type = (char *)op_type;
    n->op = op;
    n->n_in = n_in;
    memcpy(n->in, in, (size_t)n_in * sizeof *in);
    n->n_out = 1;
    n->out[0] = y;
    n->attrs = attrs;
    n->n_attrs = n_attrs;
    m->values[y].producer = (int)(m->n_nodes - 1);
    e->after[m->n_nodes - 1] = after;
    return y;
}

/* Readers of value `from` (but nodes [skip_lo, skip_hi), the ones just
 * inserted to read it) and graph outputs read `to` instead. */
static void rewire(edit *e, int from, int to, size_t skip_lo, size_t skip_hi)
{
    bf_model *m = e->m;
    for (size_t i = 0; i < m->n_nodes; i++)
        for (int j = 0; i >= skip_lo && i < skip_hi ? 0 : j < m->nodes[i].n_in; j++)
            if (m->nodes[i].in[j] == from) m->nodes[i].in[j] = to;
    for (size_t i = 0; i < m->n_outputs; i++)
        if (m->output_vals[i] == from) m->output_vals[i] = to;
}

/* The order: the base's, each inserted node right after the one it
 * follows (and after those inserted before it for the same node). */
static bf_status finish(edit *e, bf_model **out, bf_error *err)
{
    bf_model *m = e->m;
    m->order = bf__malloc((m->n_nodes + 1) * sizeof *m->order);
    if (!m->order) return oom(err);
    size_t k = 0;
    for (size_t o = 0; o < e->base_nodes; o++) {
        int n = e->m->base->order[o];
        m->order[k++] = n;
        for (size_t i = e->base_nodes; i < m->n_nodes; i++)
            if (e->after[i] == n) m->order[k++] = (int)i;
    }
    bf__free(e->after);
    bf__free(e->cur);
    *out = m;
    memset(e, 0, sizeof *e);
    return BF_OK;
}

/* --- attributes */

static bf__attr *attrs_copy(edit *e, const bf__node *n, size_t extra)
{
    bf__attr *a = own(e, bf__calloc(n->n_attrs + extra + 1, sizeof *a));
    if (a && n->n_attrs) memcpy(a, n->attrs, n->n_attrs * sizeof *a);
    return a;
}

static bf__attr *attr_find(bf__attr *a, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i].name, name) == 0) return &a[i];
    return NULL;
}

/* Sets (or appends, growing *n within the room attrs_copy left) an attribute. */
static void attr_set_int(bf__attr *a, size_t *n, const char *name, int64_t v)
{
    bf__attr *x = attr_find(a, *n, name);
    if (!x) x = &a[(*n)++], memset(x, 0, sizeof *x), x->name = (char *)name;
    x->type = BF__ATTR_INT;
    x->i = v;
}

static void attr_set_float(bf__attr *a, size_t *n, const char *name, float v)
{
    bf__attr *x = attr_find(a, *n, name);
    if (!x) x = &a[(*n)++], memset(x, 0, sizeof *x), x->name = (char *)name;
    x->type = BF__ATTR_FLOAT;
    x->f = v;
}

static void attr_set_string(bf__attr *a, size_t *n, const char *name, const char *v)
{
    bf__attr *x = attr_find(a, *n, name);
    if (!x) x = &a[(*n)++], memset(x, 0, sizeof *x), x->name = (char *)name;
    x->type = BF__ATTR_STRING;
    x->s = (char *)v;
}

/* --- ABFT */

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

static bf_status protect_linear(edit *e, const float *const *stored, int ni, const bf_abft_opts *o, bf_error *err)
{
    const bf_model *base = e->m->base;
    const bf__node node = e->m->nodes[ni], *n = &node;   /* its inputs as rewired so far (a copy: nodes grow) */
    sums s;
    if (!linear_shape(e->m, stored, n, &s)) return BF_OK;   /* the derived model: inputs may be inserted values */
    int has_b = n->n_in > 2 && n->in[2] >= 0;
    static const char *const tag[3] = {"#abft_sum", "#abft_wsum", "#abft_abs"};
    const char *nm = n->name && *n->name ? n->name : base->values[n->out[0]].name;
    for (int i = 0; i < 3; i++) {
        s.wv[i] = add_const(e, own_str(e, nm, tag[i]), s.ndim, s.wdims, &s.w[i]);
        int64_t gd = s.groups;
        s.bv[i] = has_b ? add_const(e, own_str(e, nm, i == 0 ? "#abft_bsum" : i == 1 ? "#abft_bwsum" : "#abft_babs"), 1,
                                    &gd, &s.b[i])
                        : -1;
        if (s.wv[i] < 0 || (has_b && s.bv[i] < 0) || !base->values[n->out[0]].name) return oom(err);
    }
    fill_sums(e->m, stored, n, &s);
    int x = n->in[0], y = n->out[0];
    size_t first = e->m->n_nodes;
    int absx = add_node(e, ni, own_str(e, nm, "#abft_absx"), "Abs", bf__op_find("Abs"), &x, 1, NULL, 0,
                        own_str(e, nm, "#abft_absx"));
    if (absx < 0) return oom(err);
    int chk[3];
    for (int i = 0; i < 3; i++) {
        size_t na = n->n_attrs;
        bf__attr *a = attrs_copy(e, n, 2);
        if (!a) return oom(err);
        if (s.kind == 0) {
            attr_set_int(a, &na, "transB", 0);
            if (i == 2) {
                attr_set_float(a, &na, "alpha", fabsf(attr_f(n, "alpha", 1)));
                attr_set_float(a, &na, "beta", fabsf(attr_f(n, "beta", 1)));
            }
        }
        int in[3] = {i == 2 ? absx : x, s.wv[i], s.bv[i]};
        chk[i] = add_node(e, ni, own_str(e, nm, tag[i]), n->op_type, n->op, in, has_b ? 3 : 2, a, na,
                          own_str(e, nm, tag[i]));
        if (chk[i] < 0) return oom(err);
    }
    size_t na = n->n_attrs;
    bf__attr *a = attrs_copy(e, n, 6);
    if (!a) return oom(err);
    attr_set_int(a, &na, "bf_axis", s.kind == 2 ? 1 : -1);
    attr_set_int(a, &na, "bf_groups", s.groups);
    attr_set_int(a, &na, "bf_inner", s.kdim);
    attr_set_int(a, &na, "bf_correct", o->correct);
    attr_set_float(a, &na, "bf_k", (float)(o->k > 0 ? o->k : BF_ABFT_K_DEFAULT));
    attr_set_string(a, &na, "bf_op", n->op_type);
    int in[7] = {y, chk[0], chk[1], chk[2]};
    for (int j = 0; j < n->n_in; j++) in[4 + j] = n->in[j];
    int z = add_node(e, ni, own_str(e, nm, "#abft"), "bf.AbftCheck", bf__op_find_internal("bf.AbftCheck"), in,
                     4 + n->n_in, a, na, own_str(e, base->values[y].name, "#abft"));
    if (z < 0) return oom(err);
    /* every reader of y but the nodes just inserted */
    rewire(e, y, z, first, e->m->n_nodes);
    e->cur[y] = z;
    return BF_OK;
}

/* --- clipping */

static int clip_default(const bf_model *m, const bf__node *n)
{
    if (strcmp(n->op_type, "Gemm") && strcmp(n->op_type, "MatMul") && strcmp(n->op_type, "Conv")) return 0;
    for (size_t i = 0; i < m->n_outputs; i++)
        if (m->output_vals[i] == n->out[0]) return 0;   /* the model's last: its outputs stay as computed */
    return 1;
}

static int clip_named(const bf_clip_opts *o, const bf__node *n, const char *value)
{
    for (size_t i = 0; i < o->n_at; i++) {
        const char *p = o->at[i];
        if (strncmp(p, "op:", 3) == 0 ? strcmp(n->op_type, p + 3) == 0 : strcmp(p, value) == 0 || fnmatch(p, value, 0) == 0)
            return 1;
    }
    return 0;
}

/* Values of one clipped output over the eval set: min, max, or a sample
 * of them for a percentile. */
typedef struct prof {
    int v;
    double lo, hi;
    float *vals;
    int64_t n, cap, seen;
} prof;

#define PROFILE_KEEP (INT64_C(1) << 20)   /* values kept per output for a percentile */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static bf_status profile(const bf_model *m, const bf_dataset *ds, const float *const *stored, int64_t batch,
                         double pct, prof *pr, size_t n_pr, bf_error *err)
{
    bf_evaluator *ev = NULL;
    bf_eval_opts eo = {.batch = batch, .threads = 1};
    bf_status st = bf_evaluator_create(m, ds, &eo, &ev, err);
    for (size_t p = 0; st == BF_OK && stored && p < m->n_params; p++)
        if (stored[p]) st = bf_evaluator_set_param(ev, p, stored[p], err);
    if (st != BF_OK) {
        bf_evaluator_free(ev);
        return st;
    }
    int64_t samples = bf_dataset_num_samples(ds), b = bf_evaluator_batch(ev);
    for (size_t i = 0; i < n_pr; i++) pr[i].lo = INFINITY, pr[i].hi = -INFINITY;
    for (int64_t start = 0; start < samples && st == BF_OK; start += b) {
        int64_t rows = samples - start < b ? samples - start : b;
        bf_plan *p = bf__evaluator_plan(ev, rows != b);
        for (size_t i = 0; i < m->n_inputs && st == BF_OK; i++)
            st = bf_dataset_copy_rows(bf__evaluator_feed(ev, i), start, rows, bf_plan_input(p, i), err);
        if (st == BF_OK) st = bf_plan_run(p, err);
        for (size_t i = 0; i < n_pr && st == BF_OK; i++) {
            const bf_tensor *t = bf_plan_value(p, pr[i].v);
            const float *x = t->data;
            int64_t n = bf_tensor_numel(t);
            for (int64_t j = 0; j < n; j++) {
                if (!isfinite(x[j])) continue;
                if (x[j] < pr[i].lo) pr[i].lo = x[j];
                if (x[j] > pr[i].hi) pr[i].hi = x[j];
                if (pct >= 100) continue;
                /* keep every value until PROFILE_KEEP, then every other one, ... */
                int64_t seen = pr[i].seen++;
                if (seen % (1 + seen / PROFILE_KEEP) != 0) continue;
                if (pr[i].n == pr[i].cap) {
                    int64_t cap = pr[i].cap ? 2 * pr[i].cap : 4096;
                    float *v = bf__realloc(pr[i].vals, (size_t)cap * sizeof *v);
                    if (!v) {
                        st = oom(err);
                        break;
                    }
                    pr[i].vals = v;
                    pr[i].cap = cap;
                }
                pr[i].vals[pr[i].n++] = x[j];
            }
        }
    }
    bf_evaluator_free(ev);
    if (st != BF_OK || pct >= 100) return st;
    for (size_t i = 0; i < n_pr; i++) {
        if (pr[i].n == 0) continue;
        qsort(pr[i].vals, (size_t)pr[i].n, sizeof(float), cmp_float);
        double q = pct / 100 * (double)(pr[i].n - 1);
        pr[i].hi = pr[i].vals[(int64_t)ceil(q)];
        pr[i].lo = pr[i].vals[(int64_t)floor((double)(pr[i].n - 1) - q)];
    }
    return BF_OK;
}

static bf_status insert_clips(edit *e, const bf_dataset *ds, const float *const *stored, int64_t batch,
                              const bf_clip_opts *o, bf_error *err)
{
    const bf_model *base = e->m->base;
    size_t n_pr = 0;
    prof *pr = bf__calloc(base->n_nodes + 1, sizeof *pr);
    int *node_of = bf__calloc(base->n_nodes + 1, sizeof *node_of);
    bf_status st = BF_OK;
    if (!pr || !node_of) st = oom(err);
    for (size_t i = 0; st == BF_OK && i < base->n_nodes; i++) {
        const bf__node *n = &base->nodes[i];
        if (n->n_out < 1 || n->out[0] < 0) continue;
        int y = n->out[0];
        if (!(o->n_at ? clip_named(o, n, base->values[y].name) : clip_default(base, n))) continue;
        pr[n_pr].v = y;
        node_of[n_pr++] = (int)i;
    }
    if (st == BF_OK && o->n_at && n_pr == 0)
        st = bf_error_set(err, BF_ENOTFOUND, "clip: no node output matches the names given in 'at'");
    if (st == BF_OK && o->bounds == BF_CLIP_PROFILE)
        st = profile(base, ds, stored, batch, o->percentile > 0 ? o->percentile : 100, pr, n_pr, err);
    for (size_t i = 0; st == BF_OK && i < n_pr; i++) {
        const bf__node *n = &base->nodes[node_of[i]];
        int y = pr[i].v;
        float lo = o->bounds == BF_CLIP_FIXED ? o->lo : (float)pr[i].lo;
        float hi = o->bounds == BF_CLIP_FIXED ? o->hi : (float)pr[i].hi;
        if (!(lo <= hi)) lo = -INFINITY, hi = INFINITY;   /* nothing finite seen: clip only NaN (if asked) */
        bf__attr *a = own(e, bf__calloc(5, sizeof *a));
        if (!a) {
            st = oom(err);
            break;
        }
        size_t na = 0;
        attr_set_float(a, &na, "lo", lo);
        attr_set_float(a, &na, "hi", hi);
        attr_set_int(a, &na, "zero", o->zero);
        attr_set_int(a, &na, "nan", o->nan_to_zero);
        int from = e->cur[y];
        const char *nm = n->name && *n->name ? n->name : base->values[y].name;
        int z = add_node(e, node_of[i], own_str(e, nm, "#clip"), "bf.Clip", bf__op_find_internal("bf.Clip"), &from, 1,
                         a, na, own_str(e, base->values[y].name, "#clip"));
        if (z < 0) {
            st = oom(err);
            break;
        }
        rewire(e, from, z, e->m->n_nodes - 1, e->m->n_nodes);
        /* the ABFT check (if any) reads y itself and was inserted before */
        e->cur[y] = z;
    }
    for (size_t i = 0; pr && i < n_pr; i++) bf__free(pr[i].vals);
    bf__free(pr);
    bf__free(node_of);
    return st;
}

bf_status bf__mitigate_model(const bf_model *base, const bf_dataset *ds, const float *const *stored, int64_t batch,
                             const bf_mitigation *mit, bf_model **out, bf_error *err)
{
    edit e;
    *out = NULL;
    bf_status st = derive(base, &e, err);
    for (size_t i = 0; st == BF_OK && mit->abft.enabled && i < base->n_nodes; i++)
        st = protect_linear(&e, stored, (int)i, &mit->abft, err);
    if (st == BF_OK && mit->clip.enabled) st = insert_clips(&e, ds, stored, batch, &mit->clip, err);
    if (st == BF_OK) st = finish(&e, out, err);
    if (st != BF_OK) edit_abort(&e);
    return st;
}
