/* Which nodes normalise with the statistics of the batch they are given
 * (bf_model_batch_statistics): a BatchNormalization exported in training
 * mode. Its outputs depend on which samples share a batch, so bitflip eval
 * and the CLI say so (the same rule as the op's, exec/ops/linalg_norm.c). */
#include <string.h>

#include "bitflip/model.h"
#include "model/graph.h"

size_t bf_model_batch_statistics(const bf_model *m)
{
    size_t count = 0;
    for (size_t i = 0; i < m->n_nodes; i++) {
        const bf__node *n = &m->nodes[i];
        if (strcmp(n->op_type, "BatchNormalization") != 0) continue;
        int training = 0;
        if (m->opset >= 14) {
            const bf__attr *a = bf__node_attr(n, "training_mode");
            training = a && a->i != 0;
        } else {
            for (int j = 1; j < n->n_out; j++) training |= n->out[j] >= 0;
        }
        count += (size_t)training;
    }
    return count;
}
