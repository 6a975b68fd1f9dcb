/* Mitigations that change the graph: a derived model with bf.AbftCheck
 * after each protected linear op and bf.Clip after each clipped output
 * (ops/mitigate_ops.c). The derived model keeps every value and node id of
 * the base, so fault sites resolved on the base stay valid; the inserted
 * nodes only read the protected output and replace it for its readers (and
 * as a graph output), so a fault on that output strikes before the check or
 * the clip sees it, as it would in hardware that checks what was computed. */
#include <stdlib.h>
#include <string.h>

#include "mitigate/mitigate_edit.h"

void bf_mitigation_free(bf_mitigation *m)
{
    if (!m) return;
    free(m->name);
    for (size_t i = 0; i < m->clip.n_at; i++) free(m->clip.at[i]);
    free(m->clip.at);
    for (size_t i = 0; i < m->sbp.n_tensors; i++) free(m->sbp.tensors[i]);
    free(m->sbp.tensors);
    for (size_t i = 0; i < m->ecc.n_tensors; i++) free(m->ecc.tensors[i]);
    free(m->ecc.tensors);
    memset(m, 0, sizeof *m);
}

bf_status bf__mitigate_model(const bf_model *base, const bf_dataset *ds, const float *const *stored, int64_t batch,
                             const bf_mitigation *mit, bf_model **out, bf_error *err)
{
    bf__edit e;
    *out = NULL;
    bf_status st = bf__edit_derive(base, &e, err);
    for (size_t i = 0; st == BF_OK && mit->abft.enabled && i < base->n_nodes; i++)
        st = bf__abft_insert(&e, stored, (int)i, &mit->abft, err);
    if (st == BF_OK && mit->clip.enabled) st = bf__clip_insert(&e, ds, stored, batch, &mit->clip, err);
    if (st == BF_OK) st = bf__edit_finish(&e, out, err);
    if (st != BF_OK) bf__edit_abort(&e);
    return st;
}

