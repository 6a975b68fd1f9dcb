/* bitflip — faults.
 *
 * The first primitive: flip bit `bit` (0 = least significant, 31 = sign) of
 * element `index` (row-major) of an fp32 parameter, in one plan's copy. A flip
 * is its own inverse: applying it again restores the value bit for bit. */
#ifndef BITFLIP_FAULT_H
#define BITFLIP_FAULT_H

#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bf_bitflip {
    size_t param;     /* index into bf_model_param() */
    int64_t index;    /* flat element index */
    int bit;          /* 0..31 */
} bf_bitflip;

/* Checks the flip against the model: parameter, index and bit in range. */
bf_status bf_bitflip_check(const bf_model *model, const bf_bitflip *flip, bf_error *err);

/* XORs the bit in the plan's copy; `old_value`/`new_value` may be NULL. */
bf_status bf_plan_flip_bit(bf_plan *plan, const bf_bitflip *flip, float *old_value,
                           float *new_value, bf_error *err);

/* Flips one bit of an fp32 value. */
float bf_flip_f32(float value, int bit);

#ifdef __cplusplus
}
#endif
#endif
