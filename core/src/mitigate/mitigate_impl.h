/* Mitigations inside the engine: the graph ones (mitigate.c) and the fault
 * filters the campaign applies (campaign_run.c). */
#ifndef BF_MITIGATE_IMPL_H
#define BF_MITIGATE_IMPL_H

#include "bitflip/dataset.h"
#include "bitflip/mitigate.h"
#include "bitflip/model.h"
#include "model/graph.h"

/* The model with mit's clipping and ABFT nodes inserted (bitflip/mitigate.h).
 * `stored`: per parameter the golden values as stored (NULL entries, or
 * NULL: the model's own), which the checksums and profiles use; clip
 * bounds are profiled over `ds` with batches of `batch`. The result shares
 * the base's data: free it first. */
bf_status bf__mitigate_model(const bf_model *base, const bf_dataset *ds, const float *const *stored, int64_t batch,
                             const bf_mitigation *mit, bf_model **out, bf_error *err);

#endif
