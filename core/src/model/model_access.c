/* The model's public accessors (bitflip/model.h) and graph.h's
 * parameter queries. */
#include <string.h>

#include "bitflip/limits.h"

#include "base/warena.h"
#include "model/graph.h"

int64_t bf_model_opset(const bf_model *m) { return m->opset; }
const char *bf_model_producer(const bf_model *m) { return m->producer; }
size_t bf_model_num_inputs(const bf_model *m) { return m->n_inputs; }
const bf_value_info *bf_model_input(const bf_model *m, size_t i) { return i < m->n_inputs ? &m->inputs[i] : NULL; }
size_t bf_model_num_outputs(const bf_model *m) { return m->n_outputs; }
const bf_value_info *bf_model_output(const bf_model *m, size_t i) { return i < m->n_outputs ? &m->outputs[i] : NULL; }
size_t bf_model_num_nodes(const bf_model *m) { return m->n_nodes; }
const char *bf_model_node_op(const bf_model *m, size_t i) { return i < m->n_nodes ? m->nodes[m->order[i]].op_type : NULL; }
const char *bf_model_node_name(const bf_model *m, size_t i) { return i < m->n_nodes ? m->nodes[m->order[i]].name : NULL; }
size_t bf_model_num_params(const bf_model *m) { return m->n_params; }
int bf__param_is_zero_point(const bf_model *m, size_t p) { return p < m->n_params && m->param_zp && m->param_zp[p]; }

int bf__param_in_arena(const bf_model *m, size_t p)
{
    const bf_model *root = m;
    while (root->base) root = root->base;
    return p < m->n_params && bf__warena_owns(root->warena, m->params[p].tensor->data);
}
const bf_param_info *bf_model_param(const bf_model *m, size_t i) { return i < m->n_params ? &m->params[i] : NULL; }
int64_t bf_model_param_elements(const bf_model *m) { return m->param_elements; }

int64_t bf_model_find_param(const bf_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].tensor->name, name) == 0) return (int64_t)i;
    return -1;
}

int64_t bf_model_find_value(const bf_model *m, const char *name)
{
    for (size_t i = 0; name && i < m->n_values; i++)
        if (m->values[i].name && strcmp(m->values[i].name, name) == 0) return (int64_t)i;
    return -1;
}

/* whether an op among nodes (and their graph attributes' nodes) picks among
 * equal values, the ops --tie-order changes */
static int picks_ties(const bf__node *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *op = nodes[i].op_type;
        if (op && (!strcmp(op, "TopK") || !strcmp(op, "NonMaxSuppression"))) return 1;
        for (size_t j = 0; j < nodes[i].n_attrs; j++) {
            const bf__subgraph *g = nodes[i].attrs[j].g;
            if (g && picks_ties(g->nodes, g->n_nodes)) return 1;
        }
    }
    return 0;
}

const char *bf_model_tie_order(const bf_model *m)
{
    if (!m || !picks_ties(m->nodes, m->n_nodes)) return NULL;
    return m->tie_order == BF_TIE_ORDER_PYTORCH ? "pytorch" : "onnx";
}
