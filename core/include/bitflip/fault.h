/* bitflip — faults.
 *
 * The first primitive: flip bit `bit` (0 = least significant, 31 = sign) of
 * element `index` (row-major) of an fp32 parameter, in one plan's copy; of an
 * int8/uint8 parameter (a quantized model's stored integers), bits 0..7 of
 * the stored byte (7 = int8's sign bit), with old and new values the
 * integers. A flip is its own inverse: applying it again restores the value
 * bit for bit.
 *
 * The second: a value fault, a corruption of a value computed at run time —
 * a node output (an activation) or a graph input — applied by the plan
 * during a run, right after the step that computes the value (graph inputs:
 * at the start of the run, after the caller filled them), before any later
 * step reads it. Such a value must be float32 with the sample on dim 0 (dim 0
 * equal to the plan's batch); nodes folded when the plan was built (shape
 * arithmetic, anything computed from constants only) are not run-time values.
 * The fault writes the batch buffer in place, so graph inputs must be filled
 * again before each run (bf_evaluator does). */
#ifndef BITFLIP_FAULT_H
#define BITFLIP_FAULT_H

#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/plan.h"
#include "bitflip/repr.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bf_bitflip {
    size_t param;     /* index into bf_model_param() */
    int64_t index;    /* flat element index */
    int bit;          /* 0..31; 0..7 for an int8/uint8 parameter */
} bf_bitflip;

/* Checks the flip against the model: parameter, index and bit in range. */
bf_status bf_bitflip_check(const bf_model *model, const bf_bitflip *flip, bf_error *err);

/* XORs the bit in the plan's copy; `old_value`/`new_value` may be NULL. */
bf_status bf_plan_flip_bit(bf_plan *plan, const bf_bitflip *flip, float *old_value,
                           float *new_value, bf_error *err);

/* One value fault. The element is held in `repr` where the fault strikes:
 * its bits are encode(value) (rounded to the format; int8 with `scale`,
 * saturating at +-127), the fault applies `model` with `mask` to them (see
 * bf_repr_fault_bits), and, if that changed any bit, the element becomes the
 * decoded result; a fault that changes no bit (a stuck-at on a bit already
 * at that value) leaves the computed fp32 value exactly as it was. */
typedef struct bf_value_fault {
    int64_t value;            /* bf_model_find_value(): a graph input or node output */
    int64_t sample;           /* the sample hit: in a plan, the row of the batch; in an
                               * evaluator, the eval-set sample. -1: every sample */
    int64_t index;            /* flat element index within one sample's slice */
    bf_fault_model model;     /* BF_FAULT_BER is a bit flip of `mask` */
    uint32_t mask;            /* the representation's bits; RANDOM_VALUE: the new bits */
    bf_repr repr;
    float scale;              /* int8 only */
    /* 1: `index` is not an element but a uniform draw in [0, 2^62): the
     * element is floor(index * n / 2^62), n the elements the value has in
     * that run for that sample (a value a dynamic step computes, whose
     * elements are data: docs/ENGINE.md "Dynamic steps"); n = 0 (an empty
     * value) applies nothing. 0: `index` is the element (one past the run's
     * elements of a dynamic value applies nothing). */
    int drawn;
} bf_value_fault;

/* A drawn fault's index: 2^62 draws, the element floor(index * n / 2^62). */
#define BF_VALUE_FAULT_DRAWS (INT64_C(1) << 62)

/* Replaces the plan's value faults with these (n = 0 clears them); they
 * apply in every following run, in order, until replaced. Checks each one
 * (the value is computed at run time, float32, with the batch on dim 0; the
 * row and index exist). Allocates only when n exceeds every earlier n. */
bf_status bf_plan_set_value_faults(bf_plan *plan, const bf_value_fault *faults, size_t n, bf_error *err);
/* Value fault i of the last run, at the first row it hit (row 0 for
 * every-sample faults): the stored value before (the computed value in the
 * fault's representation) and after. Both NaN if it has not been applied. */
void bf_plan_value_fault_seen(const bf_plan *plan, size_t i, float *old_value, float *new_value);

/* What a fault makes of `value` (see bf_value_fault): returns the value to
 * write; *old_stored and *new_stored get the stored value before and after
 * (decode(encode(value)) and the decoded faulty bits; equal if no bit changed). */
float bf_value_fault_apply(const bf_value_fault *f, float value, float *old_stored, float *new_stored);

/* Flips one bit of an fp32 value. */
float bf_flip_f32(float value, int bit);

#ifdef __cplusplus
}
#endif
#endif
