/* A model whose symbolic input dimensions past the batch are fixed
 * (bf_model_with_dims): a language model exported with dynamic sequence
 * axes, planned by code that knows only batch sizes (an evaluator, a
 * campaign, the differential engine). The derived model shares everything
 * with its base (mitigate_edit.c's kind of derived model: bf_model_free
 * frees only its own tables) and owns a copy of the input table with those
 * dims set, which is all a plan reads of them. */
#include <string.h>

#include "base/alloc.h"
#include "bitflip/model.h"
#include "model/graph.h"

bf_model *bf__model_derive_shell(const bf_model *base)
{
    bf_model *m = bf__calloc(1, sizeof *m);
    if (!m) return NULL;
    *m = *base;
    m->base = base;
    m->owns_base = 0;   /* the base's own base, if it owns one, stays the base's */
    m->owned = NULL;
    m->n_owned = m->cap_owned = 0;
    m->values = NULL;
    m->nodes = NULL;
    m->order = NULL;
    m->output_vals = NULL;
    m->n_nodes = 0;     /* the nodes copied so far: what a failure frees */
    return m;
}

static bf_status oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory fixing input dimensions"); }

/* The derived model's copies of the base's tables (bf_model_free frees them). */
static bf_status copy_tables(const bf_model *base, bf_model *m, bf_error *err)
{
    m->values = bf__malloc((base->n_values + 1) * sizeof *m->values);
    m->nodes = bf__calloc(base->n_nodes + 1, sizeof *m->nodes);
    m->order = bf__malloc((base->n_nodes + 1) * sizeof *m->order);
    m->output_vals = bf__malloc((base->n_outputs + 1) * sizeof *m->output_vals);
    m->owned = bf__calloc(1, sizeof *m->owned);
    if (!m->values || !m->nodes || !m->order || !m->output_vals || !m->owned) return oom(err);
    m->cap_owned = 1;
    memcpy(m->values, base->values, base->n_values * sizeof *m->values);
    memcpy(m->order, base->order, base->n_nodes * sizeof *m->order);
    memcpy(m->output_vals, base->output_vals, base->n_outputs * sizeof *m->output_vals);
    for (size_t i = 0; i < base->n_nodes; i++) {
        bf__node *n = &m->nodes[i];
        *n = base->nodes[i];
        n->in = bf__malloc(((size_t)n->n_in + 1) * sizeof *n->in);
        n->out = bf__malloc(((size_t)n->n_out + 1) * sizeof *n->out);
        m->n_nodes = i + 1;   /* what a failure frees */
        if (!n->in || !n->out) return oom(err);
        memcpy(n->in, base->nodes[i].in, (size_t)n->n_in * sizeof *n->in);
        memcpy(n->out, base->nodes[i].out, (size_t)n->n_out * sizeof *n->out);
    }
    return BF_OK;
}

/* A model sharing base's arrays with tables and inputs of its own: *in,
 * a copy of base's inputs, for the caller to edit and set as m->inputs. */
static bf_status derive_inputs(const bf_model *base, bf_model **out, bf_value_info **in_out, bf_error *err)
{
    bf_model *m = bf__model_derive_shell(base);
    if (!m) return oom(err);
    bf_status st = copy_tables(base, m, err);
    bf_value_info *in = st == BF_OK ? bf__malloc((base->n_inputs + 1) * sizeof *in) : NULL;
    if (st == BF_OK && !in) st = oom(err);
    if (st != BF_OK) {
        bf_model_free(m);
        return st;
    }
    m->owned[m->n_owned++] = in;
    memcpy(in, base->inputs, base->n_inputs * sizeof *in);
    *out = m;
    *in_out = in;
    return BF_OK;
}

bf_status bf_model_with_dims(const bf_model *base, const char *const *names, const int64_t *sizes, size_t n,
                             bf_model **out, bf_error *err)
{
    *out = NULL;
    for (size_t k = 0; k < n; k++) {
        int found = 0;
        for (size_t i = 0; i < base->n_inputs && !found; i++)
            for (int d = 1; d < base->inputs[i].ndim && !found; d++)
                found = base->inputs[i].dims[d] < 0 && base->inputs[i].dim_names[d] && names[k] &&
                        strcmp(base->inputs[i].dim_names[d], names[k]) == 0;
        if (!found)
            return bf_error_set(err, BF_EINVAL, "%s: no graph input has a symbolic dimension '%s' past dim 0",
                                base->label, names[k] ? names[k] : "(null)");
        if (sizes[k] < 0)
            return bf_error_set(err, BF_EINVAL, "%s: dimension '%s' given size %lld", base->label, names[k],
                                (long long)sizes[k]);
    }
    bf_model *m;
    bf_value_info *in;
    bf_status st = derive_inputs(base, &m, &in, err);
    if (st != BF_OK) return st;
    for (size_t i = 0; i < base->n_inputs; i++)
        for (int d = 1; d < in[i].ndim; d++)
            for (size_t k = 0; k < n && in[i].dims[d] < 0; k++)
                if (in[i].dim_names[d] && strcmp(in[i].dim_names[d], names[k]) == 0) {
                    in[i].dims[d] = sizes[k];
                    in[i].dim_names[d] = NULL;   /* fixed dims have no name */
                }
    m->inputs = in;
    *out = m;
    return BF_OK;
}

/* A selection whose size is data, as a detector's boxes have: NonZero (a
 * score threshold), NonMaxSuppression, Unique, Compress, or an If or Loop
 * whose subgraphs hold one at any depth (torchvision's batched_nms is an If
 * in an If). An If on a shape alone (a squeeze of a dim the exporter could
 * not size) is not one: such a graph is no detector, and stays batched.
 * The recursion goes one frame per nesting level, as deep as the loader let
 * the file nest (bf_load_limits.max_graph_depth, `model.graph-depth`, 64 by
 * default: a file nested deeper is refused at load, naming the limit), the
 * bound of every walk over subgraphs (graph.h); protobuf-c's unpacking
 * recursed deeper, with larger frames, before this runs. No cut-off of its
 * own: one below the loader's limit (8, before) missed a selection nested
 * deeper and ran such a detector batched (tests/unit/test_per_call.c). */
static int data_shape_node(const bf__node *n)
{
    static const char *const ops[] = {"NonZero", "NonMaxSuppression", "Unique", "Compress"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (n->op_type && strcmp(n->op_type, ops[i]) == 0) return 1;
    for (size_t a = 0; a < n->n_attrs; a++) {
        const bf__subgraph *g = n->attrs[a].g;
        for (size_t k = 0; g && k < g->n_nodes; k++)
            if (data_shape_node(&g->nodes[k])) return 1;
    }
    return 0;
}

bf_status bf__model_data_shaped(const bf_model *m, int *data, bf_error *err)
{
    *data = 0;
    unsigned char *seen = bf__calloc(m->n_values + 1, 1);
    int *stack = bf__malloc((m->n_values + 1) * sizeof *stack);
    if (!seen || !stack) {
        bf__free(seen);
        bf__free(stack);
        return oom(err);
    }
    size_t top = 0;
    for (size_t i = 0; i < m->n_outputs; i++) {
        int v = m->output_vals[i];
        if (v >= 0 && !seen[v]) { seen[v] = 1; stack[top++] = v; }
    }
    while (top > 0 && !*data) {   /* back from the outputs, through each value's producer */
        const bf__value *val = &m->values[stack[--top]];
        if (val->kind != BF__VAL_NODE || val->producer < 0) continue;
        const bf__node *n = &m->nodes[val->producer];
        if (data_shape_node(n)) *data = 1;
        for (int j = 0; j < n->n_in; j++) {
            int u = n->in[j];
            if (u >= 0 && !seen[u]) { seen[u] = 1; stack[top++] = u; }
        }
    }
    bf__free(seen);
    bf__free(stack);
    return BF_OK;
}

bf_status bf__model_per_call(const bf_model *base, bf_model **out, bf_error *err)
{
    *out = NULL;
    bf_model *m;
    bf_value_info *in;
    bf_status st = derive_inputs(base, &m, &in, err);
    if (st != BF_OK) return st;
    for (size_t i = 0; i < base->n_inputs; i++)
        if (in[i].ndim > 0) {
            in[i].dims[0] = 1;
            in[i].dim_names[0] = NULL;   /* fixed dims have no name */
        }
    m->inputs = in;
    m->per_call = 1;
    *out = m;
    return BF_OK;
}
