/* Freeing a model (bf_model_free): a loaded one, with its values, nodes,
 * attributes, subgraphs and weights arena, or a derived one (mitigate.c),
 * which owns only its own arrays. */
#include <string.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "base/wpack.h"
#include "model/graph.h"
#include "model/onnx_load.h"

static void free_subgraph(bf__subgraph *g);

static void free_attr(bf__attr *a)
{
    bf__free(a->name);
    bf__free(a->s);
    bf__free(a->ints);
    bf__free(a->floats);
    for (size_t i = 0; a->strings && i < a->n; i++) bf__free(a->strings[i]);
    bf__free(a->strings);
    bf__tensor_free(a->t);
    free_subgraph(a->g);
}

void bf__attr_free(bf__attr *a) { free_attr(a); }

/* Nested subgraphs (graph.h) are freed through free_attr, as deep as the
 * loader's graph-depth limit let them be. */
static void free_subgraph(bf__subgraph *g)
{
    if (!g) return;
    bf__free(g->implicit_local);
    bf__free(g->implicit_ref);
    for (size_t i = 0; i < g->n_locals; i++) {
        bf__free(g->names[i]);
        if (g->inits) bf__tensor_free(g->inits[i]);
    }
    bf__free(g->names);
    bf__free(g->inits);
    bf__free(g->in);
    bf__free(g->out);
    for (size_t i = 0; g->nodes && i < g->n_nodes; i++) bf__node_clear(&g->nodes[i]);
    bf__free(g->nodes);
    bf__free(g);
}

void bf__node_clear(bf__node *n)
{
    bf__free(n->name);
    bf__free(n->op_type);
    bf__free(n->in);
    bf__free(n->out);
    for (size_t j = 0; j < n->n_attrs; j++) free_attr(&n->attrs[j]);
    bf__free(n->attrs);
    memset(n, 0, sizeof *n);
}

void bf_model_free(bf_model *m)
{
    if (!m) return;
    if (m->base) {   /* derived (mitigate.c): only its own arrays */
        for (size_t i = 0; i < m->n_owned; i++) bf__free(m->owned[i]);
        bf__free(m->owned);
        for (size_t i = 0; m->nodes && i < m->n_nodes; i++) {
            bf__free(m->nodes[i].in);
            bf__free(m->nodes[i].out);
        }
        bf__free(m->values);
        bf__free(m->nodes);
        bf__free(m->order);
        bf__free(m->output_vals);
        const bf_model *base = m->owns_base ? m->base : NULL;
        bf__free(m);
        bf_model_free((bf_model *)base);
        return;
    }
    for (size_t i = 0; i < m->n_values; i++) {
        bf__free(m->values[i].name);
        if (m->values[i].init && bf__warena_owns(m->warena, m->values[i].init->data))
            m->values[i].init->data = NULL;   /* the arena's, freed below */
        bf__tensor_free(m->values[i].init);
    }
    bf__warena_free(m->warena);
    bf__wpack_free(m->wpack);
    bf__free(m->values);
    for (size_t i = 0; i < m->n_nodes; i++) bf__node_clear(&m->nodes[i]);
    bf__free(m->nodes);
    bf__free(m->order);
    /* <=: the entry being filled when an error struck may hold names too
     * (both arrays have one spare, zeroed entry) */
    for (size_t i = 0; m->inputs && i <= m->n_inputs; i++)
        for (int d = 0; d < BF_MAX_DIMS; d++) bf__free((char *)m->inputs[i].dim_names[d]);
    for (size_t i = 0; m->outputs && i <= m->n_outputs; i++)
        for (int d = 0; d < BF_MAX_DIMS; d++) bf__free((char *)m->outputs[i].dim_names[d]);
    bf__free(m->inputs);
    bf__free(m->outputs);
    bf__free(m->input_vals);
    bf__free(m->output_vals);
    for (size_t i = 0; m->params && i < m->n_params; i++) {
        bf__free((char *)m->params[i].torch_name);
        bf__free((char *)m->params[i].torch_note);
    }
    bf__free(m->params);
    bf__free(m->param_vals);
    bf__free(m->param_zp);
    bf__free(m->label);
    bf__free(m->producer);
    bf__free(m->kernels);
    bf__free(m);
}
