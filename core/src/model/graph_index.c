/* What the loader derives from a converted graph once every node and value
 * is in place (onnx_load.c converts, then calls these): the nodes'
 * topological order, with a cycle reported by name, and the parameter
 * table (every float initializer, and the stored integers of quant ops)
 * with the first op that reads each parameter. Nothing here reads the
 * ONNX file: only the graph (graph.h). */
#include <string.h>

#include "base/alloc.h"
#include "model/graph.h"

static bf_status oom(bf_error *err, const bf_model *m)
{
    return bf_error_set(err, BF_ENOMEM, "%s: out of memory while loading the model", m->label);
}

/* The main-graph values node n's subgraphs read from the enclosing scope
 * (a Loop's body reading a table), into out unless NULL; how many. */
static size_t captured(const bf__node *n, int *out)
{
    size_t k = 0;
    for (size_t a = 0; a < n->n_attrs; a++) {
        const bf__subgraph *g = n->attrs[a].type == BF__ATTR_GRAPH ? n->attrs[a].g : NULL;
        for (size_t i = 0; g && i < g->n_nodes; i++)
            for (int j = 0; j < g->nodes[i].n_in; j++)
                if (g->nodes[i].in[j] >= 0) {
                    if (out) out[k] = g->nodes[i].in[j];
                    k++;
                }
        for (int j = 0; g && j < g->n_out; j++)
            if (g->out[j] >= 0) {
                if (out) out[k] = g->out[j];
                k++;
            }
    }
    return k;
}

/* Kahn's algorithm; a leftover node means a cycle, reported by name. A
 * node comes after what it reads and what its subgraphs read. */
bf_status bf__graph_sort(bf_model *m, bf_error *err)
{
    bf_status st = BF_OK;
    int *pending = bf__calloc(m->n_nodes + 1, sizeof *pending);
    int *queue = bf__malloc((m->n_nodes + 1) * sizeof *queue);
    int *consumers_start = bf__calloc(m->n_values + 1, sizeof(int));
    int *cap_start = bf__calloc(m->n_nodes + 1, sizeof(int));
    int *consumers = NULL, *cap = NULL;
    size_t n_edges = 0, head = 0, tail = 0;
    m->order = bf__malloc((m->n_nodes + 1) * sizeof *m->order);
    if (!pending || !queue || !consumers_start || !cap_start || !m->order) { st = oom(err, m); goto out; }
    for (size_t i = 0; i < m->n_nodes; i++) cap_start[i + 1] = cap_start[i] + (int)captured(&m->nodes[i], NULL);
    cap = bf__malloc(((size_t)cap_start[m->n_nodes] + 1) * sizeof *cap);
    if (!cap) { st = oom(err, m); goto out; }
    for (size_t i = 0; i < m->n_nodes; i++) captured(&m->nodes[i], cap + cap_start[i]);

    /* CSR list of consuming nodes per value */
    for (size_t i = 0; i < m->n_nodes; i++) {
        for (int j = 0; j < m->nodes[i].n_in; j++)
            if (m->nodes[i].in[j] >= 0) { consumers_start[m->nodes[i].in[j] + 1]++; n_edges++; }
        for (int k = cap_start[i]; k < cap_start[i + 1]; k++) { consumers_start[cap[k] + 1]++; n_edges++; }
    }
    for (size_t v = 0; v < m->n_values; v++) consumers_start[v + 1] += consumers_start[v];
    consumers = bf__malloc((n_edges + 1) * sizeof *consumers);
    int *fill = bf__calloc(m->n_values + 1, sizeof *fill);
    if (!consumers || !fill) { bf__free(fill); st = oom(err, m); goto out; }
    for (size_t i = 0; i < m->n_nodes; i++) {
        int nk = m->nodes[i].n_in + (cap_start[i + 1] - cap_start[i]);
        for (int j = 0; j < nk; j++) {
            int v = j < m->nodes[i].n_in ? m->nodes[i].in[j] : cap[cap_start[i] + j - m->nodes[i].n_in];
            if (v < 0) continue;
            consumers[consumers_start[v] + fill[v]++] = (int)i;
            if (m->values[v].kind == BF__VAL_NODE) pending[i]++;
        }
    }
    bf__free(fill);

    for (size_t i = 0; i < m->n_nodes; i++)
        if (pending[i] == 0) queue[tail++] = (int)i;
    while (head < tail) {
        int n = queue[head];
        m->order[head++] = n;
        for (int j = 0; j < m->nodes[n].n_out; j++) {
            int v = m->nodes[n].out[j];
            if (v < 0) continue;
            for (int k = consumers_start[v]; k < consumers_start[v + 1]; k++)
                if (--pending[consumers[k]] == 0) queue[tail++] = consumers[k];
        }
    }
    if (head < m->n_nodes) {
        for (size_t i = 0; i < m->n_nodes; i++)
            if (pending[i] > 0) {
                st = bf_error_set(err, BF_EFORMAT, "%s: the graph has a cycle through node '%s' (%s)", m->label,
                                  m->nodes[i].name, m->nodes[i].op_type);
                break;
            }
    }
out:
    bf__free(pending);
    bf__free(queue);
    bf__free(consumers_start);
    bf__free(consumers);
    bf__free(cap_start);
    bf__free(cap);
    return st;
}

/* Which inputs of a quant op hold stored integers (bit 0: weights, bit 1:
 * zero points): an int8/uint8 initializer there is a parameter. The
 * requantizing forms' scales are float, so already parameters. */
static unsigned quant_slot(const char *op, int j)
{
    static const struct { const char *op; unsigned weights, zps; } t[] = {
        {"DequantizeLinear", 1u << 0, 1u << 2},
        {"QuantizeLinear", 0, 1u << 2},
        {"MatMulInteger", 1u << 0 | 1u << 1, 1u << 2 | 1u << 3},
        {"ConvInteger", 1u << 0 | 1u << 1, 1u << 2 | 1u << 3},
        {"QLinearMatMul", 1u << 0 | 1u << 3, 1u << 2 | 1u << 5 | 1u << 7},
        {"QLinearConv", 1u << 0 | 1u << 3, 1u << 2 | 1u << 5 | 1u << 7},
        /* ONNX Runtime's int4 weights: packed B, packed zero points */
        {"com.microsoft:MatMulNBits", 1u << 1, 1u << 3},
    };
    if (j < 0 || j >= 32) return 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(t[i].op, op) == 0) return (t[i].weights >> j & 1u) | (t[i].zps >> j & 1u) << 1;
    return 0;
}

/* int8/uint8 initializers read where quant_slot says become parameters; one
 * read as a zero point anywhere and as weights nowhere is a zero point.
 * `role` (per value, zeroed): bit 0 read as weights, bit 1 as a zero point. */
static void promote_quant_params(bf_model *m, unsigned char *role)
{
    for (size_t o = 0; o < m->n_nodes; o++) {
        const bf__node *n = &m->nodes[o];
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j];
            if (v < 0 || m->values[v].kind != BF__VAL_CONST || !m->values[v].init) continue;
            bf_dtype dt = m->values[v].init->dtype;
            if (dt == BF_I8 || dt == BF_U8) role[v] |= (unsigned char)quant_slot(n->op_type, j);
        }
    }
    for (size_t v = 0; v < m->n_values; v++)
        if (role[v]) {
            m->values[v].kind = BF__VAL_PARAM;
            m->n_params++;
        }
}

/* Parameter table: every float initializer and the quant ops' stored
 * integers, with the first op that reads each. */
bf_status bf__graph_index_params(bf_model *m, bf_error *err)
{
    unsigned char *role = bf__calloc(m->n_values + 1, 1);
    if (!role) return oom(err, m);
    promote_quant_params(m, role);
    m->params = bf__calloc(m->n_params + 1, sizeof *m->params);
    m->param_vals = bf__calloc(m->n_params + 1, sizeof *m->param_vals);
    m->param_zp = bf__calloc(m->n_params + 1, 1);
    if (!m->params || !m->param_vals || !m->param_zp) { bf__free(role); return oom(err, m); }
    size_t k = 0;
    for (size_t v = 0; v < m->n_values; v++) {
        if (m->values[v].kind != BF__VAL_PARAM) continue;
        m->values[v].index = (int64_t)k;
        m->param_vals[k] = (int)v;
        m->params[k].tensor = m->values[v].init;
        m->params[k].dtype = m->values[v].init->dtype;
        m->params[k].stored = m->values[v].stored;
        m->param_zp[k] = role[v] == 2;
        m->param_elements += bf_tensor_numel(m->values[v].init);
        k++;
    }
    bf__free(role);
    bf__index_param_readers(m);
    return BF_OK;
}

void bf__index_param_readers(bf_model *m)
{
    for (size_t p = 0; p < m->n_params; p++) {
        m->params[p].reader_op = m->params[p].reader_node = NULL;
        m->params[p].is_embedding = 0;
    }
    for (size_t o = 0; o < m->n_nodes; o++) {
        const bf__node *n = &m->nodes[m->order[o]];
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j];
            if (v < 0 || m->values[v].kind != BF__VAL_PARAM) continue;
            bf_param_info *pi = &m->params[m->values[v].index];
            if (!pi->reader_op) { pi->reader_op = n->op_type; pi->reader_node = n->name; }
            /* bf.EmbeddingBag: what exec/fuse_loop.c makes of an exported
             * EmbeddingBag Loop; named here so that a re-index after it keeps it */
            if (j == 0 && (strcmp(n->op_type, "Gather") == 0 || strcmp(n->op_type, "bf.EmbeddingBag") == 0))
                pi->is_embedding = 1;
        }
    }
}
