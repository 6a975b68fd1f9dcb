/* bitflip — plan: a model compiled for one batch size.
 *
 * Building a plan fixes every tensor's shape, orders the nodes, folds the
 * shape arithmetic that dynamic-batch exports compute at run time (Shape ->
 * Gather -> Unsqueeze -> Concat -> Reshape) and any other node whose inputs are
 * all known when the plan is built, and allocates one arena for every
 * activation. Running a plan allocates nothing.
 *
 * A plan is used by one thread at a time. It reads the model's parameters in
 * place until a fault writes to one; that tensor is then copied into the plan,
 * so a plan's faults never reach the model or other plans. A plan runs on
 * the thread that calls it: parallelism is across plans. */
#ifndef BITFLIP_PLAN_H
#define BITFLIP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/model.h"
#include "bitflip/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bf_plan bf_plan;

/* Symbolic dimension 0 of every graph input becomes `batch`; a fixed dim 0
 * must equal it. Other symbolic dimensions are not supported. */
bf_status bf_plan_create(const bf_model *model, int64_t batch, bf_plan **out, bf_error *err);
void bf_plan_free(bf_plan *plan);

const bf_model *bf_plan_model(const bf_plan *plan);
int64_t bf_plan_batch(const bf_plan *plan);

/* Buffers with concrete shapes: fill the inputs, run, read the outputs. The
 * pointers stay valid for the plan's life. */
bf_tensor *bf_plan_input(bf_plan *plan, size_t i);
const bf_tensor *bf_plan_output(const bf_plan *plan, size_t i);

bf_status bf_plan_run(bf_plan *plan, bf_error *err);

/* Any value of the plan by id (bf_model_find_value): a graph input, a
 * parameter, a folded constant or an activation as the last run left it.
 * NULL for an id out of range; data NULL for a value the plan never computes
 * (it reaches no graph output). */
const bf_tensor *bf_plan_value(const bf_plan *plan, int64_t value);

/* Bytes in the activation arena (for reports). */
size_t bf_plan_arena_bytes(const bf_plan *plan);
/* Number of nodes executed per run, after folding. */
size_t bf_plan_num_steps(const bf_plan *plan);

/* The plan's writable copy of parameter `param` (copied from the model on the
 * first call; allocation happens here, never in bf_plan_run). */
bf_status bf_plan_param_mut(bf_plan *plan, size_t param, float **data, bf_error *err);

#ifdef __cplusplus
}
#endif
#endif
