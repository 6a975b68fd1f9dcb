/* Derived models (mitigate_edit.h): a copy of the base's tables that shares
 * their contents, grown by inserted nodes and constants, which it owns. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/grow.h"
#include "mitigate/mitigate_edit.h"

/* --- the derived model */

bf_status bf__edit_oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory protecting the model"); }

void *bf__edit_own(bf__edit *e, void *p)
{
    bf_model *m = e->m;
    if (!p) return NULL;
    if (!bf__grow(&m->owned, &m->cap_owned, m->n_owned + 1, sizeof *m->owned, 64)) {
        bf__free(p);
        return NULL;
    }
    m->owned[m->n_owned++] = p;
    return p;
}

char *bf__edit_own_str(bf__edit *e, const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 1;
    char *s = bf__malloc(n);
    if (s) snprintf(s, n, "%s%s", a, b);
    return bf__edit_own(e, s);
}

bf_status bf__edit_derive(const bf_model *base, bf__edit *e, bf_error *err)
{
    memset(e, 0, sizeof *e);
    bf_model *m = bf__model_derive_shell(base);
    if (!m) return bf__edit_oom(err);
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
    if (!m->values || !m->nodes || !m->output_vals || !e->after || !e->cur) return bf__edit_oom(err);
    memcpy(m->values, base->values, base->n_values * sizeof *m->values);
    memcpy(m->output_vals, base->output_vals, base->n_outputs * sizeof *m->output_vals);
    for (size_t i = 0; i < base->n_values; i++) e->cur[i] = (int)i;
    for (size_t i = 0; i < base->n_nodes; i++) {
        bf__node *n = &m->nodes[i];
        *n = base->nodes[i];
        m->n_nodes = i + 1;
        n->in = bf__malloc(((size_t)n->n_in + 1) * sizeof *n->in);
        n->out = bf__malloc(((size_t)n->n_out + 1) * sizeof *n->out);
        if (!n->in || !n->out) return bf__edit_oom(err);
        memcpy(n->in, base->nodes[i].in, (size_t)n->n_in * sizeof *n->in);
        memcpy(n->out, base->nodes[i].out, (size_t)n->n_out * sizeof *n->out);
        e->after[i] = -1;
    }
    return BF_OK;
}

void bf__edit_abort(bf__edit *e)
{
    bf_model_free(e->m);
    bf__free(e->after);
    bf__free(e->cur);
    memset(e, 0, sizeof *e);
}

int bf__edit_add_value(bf__edit *e, const char *name, bf__value_kind kind, bf_tensor *init)
{
    bf_model *m = e->m;
    if (!name) return -1;   /* its bf__edit_own_str failed */
    if (!bf__grow(&m->values, &e->cap_values, m->n_values + 1, sizeof *m->values, 1)) return -1;
    bf__value *v = &m->values[m->n_values];
    *v = (bf__value){.name = (char *)name, .kind = kind, .producer = -1, .index = -1, .init = init};
    return (int)m->n_values++;
}

/* A float constant of the given shape, zeroed; NULL data on failure. */
int bf__edit_add_const(bf__edit *e, const char *name, int ndim, const int64_t *dims, float **data)
{
    bf_tensor *t = bf__edit_own(e, bf__calloc(1, sizeof *t));
    if (!t) return -1;
    t->name = name;
    t->dtype = BF_F32;
    t->ndim = ndim;
    memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    *data = bf__edit_own(e, bf__calloc((size_t)bf_tensor_numel(t) + 1, sizeof(float)));
    if (!*data) return -1;
    t->data = *data;
    return bf__edit_add_value(e, name, BF__VAL_CONST, t);
}

/* A node running right after node `after`; its first output is a new value. */
int bf__edit_add_node(bf__edit *e, int after, const char *name, const char *op_type, const bf__op *op, const int *in,
                    int n_in, bf__attr *attrs, size_t n_attrs, const char *out_name)
{
    bf_model *m = e->m;
    if (!name) return -1;   /* its bf__edit_own_str failed (out_name: bf__edit_add_value checks) */
    if (m->n_nodes == e->cap_nodes) {
        size_t cap = 2 * e->cap_nodes;
        bf__node *n = bf__realloc(m->nodes, cap * sizeof *n);
        int *a = bf__realloc(e->after, cap * sizeof *a);
        if (n) m->nodes = n;
        if (a) e->after = a;
        if (!n || !a) return -1;
        e->cap_nodes = cap;
    }
    int y = bf__edit_add_value(e, out_name, BF__VAL_NODE, NULL);
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
void bf__edit_rewire(bf__edit *e, int from, int to, size_t skip_lo, size_t skip_hi)
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
bf_status bf__edit_finish(bf__edit *e, bf_model **out, bf_error *err)
{
    bf_model *m = e->m;
    m->order = bf__malloc((m->n_nodes + 1) * sizeof *m->order);
    if (!m->order) return bf__edit_oom(err);
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

bf__attr *bf__edit_attrs_copy(bf__edit *e, const bf__node *n, size_t extra)
{
    bf__attr *a = bf__edit_own(e, bf__calloc(n->n_attrs + extra + 1, sizeof *a));
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
void bf__edit_attr_set_int(bf__attr *a, size_t *n, const char *name, int64_t v)
{
    bf__attr *x = attr_find(a, *n, name);
    if (!x) x = &a[(*n)++], memset(x, 0, sizeof *x), x->name = (char *)name;
    x->type = BF__ATTR_INT;
    x->i = v;
}

void bf__edit_attr_set_float(bf__attr *a, size_t *n, const char *name, float v)
{
    bf__attr *x = attr_find(a, *n, name);
    if (!x) x = &a[(*n)++], memset(x, 0, sizeof *x), x->name = (char *)name;
    x->type = BF__ATTR_FLOAT;
    x->f = v;
}

void bf__edit_attr_set_string(bf__attr *a, size_t *n, const char *name, const char *v)
{
    bf__attr *x = attr_find(a, *n, name);
    if (!x) x = &a[(*n)++], memset(x, 0, sizeof *x), x->name = (char *)name;
    x->type = BF__ATTR_STRING;
    x->s = (char *)v;
}
