/* bitflip api — what a model, an eval set or an error map is made of, as
 * JSON: the `bitflip info --json` document and the body of the daemon's
 * model, dataset and error-map objects. */
#ifndef BITFLIP_API_SUMMARY_H
#define BITFLIP_API_SUMMARY_H

#include <jansson.h>

#include "bitflip/dataset.h"
#include "bitflip/errmap.h"
#include "bitflip/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* {opset, producer, inputs, outputs: [{name, dtype, shape}], nodes, ops:
 * {op: count}, layers: [{name, op}], params: [{name, shape, elements,
 * read_by_op, read_by_node, embedding}], param_elements, param_bits}; NULL
 * when out of memory. Dims without a size are their names ("batch"). */
json_t *bf_model_summary(const bf_model *m);

/* {samples, labels: bool, tensors: [{name, dtype, shape}]}. */
json_t *bf_dataset_summary(const bf_dataset *ds);

/* {rows, cols, bits, flip, stuck_at_0, stuck_at_1, cells, and voltage and
 * chip when the map's header has them}; NULL when out of memory. */
json_t *bf_errmap_summary(const bf_errmap *m);

#ifdef __cplusplus
}
#endif
#endif
