/* A campaign's protections (campaign_mitigate.c): the model with clipping
 * and ABFT nodes inserted (the campaign's model then points to it), and the
 * filters weight faults pass through: selective bit protection and weight
 * range checks. */
#ifndef BF_CAMPAIGN_PROTECT_H
#define BF_CAMPAIGN_PROTECT_H

#include <stdint.h>

#include "bitflip/mitigate.h"
#include "faults.h"

typedef struct bf__protect {
    bf_model *own_model;      /* with the inserted nodes (NULL: none) */
    const bf_model *base_model;
    uint32_t *sbp_mask;       /* per site: protected bits (NULL: none) */
    float *range_lo, *range_hi;   /* per site (weights): the allowed range (NULL: no check) */
    int range_flag;           /* out of range: DUE; else the value is zeroed */
} bf__protect;

/* Sets up mit's protections on c (sites resolved, parameters stored, before
 * the golden pass). */
bf_status bf__campaign_mitigate(bf_campaign *c, const bf_mitigation *mit, bf_error *err);
/* What a weight fault leaves after the protections: *now rewritten (SBP
 * restores protected bits, the range check zeroes); 1 if the range check
 * flags it (the trial is DUE). */
int bf__mitigate_weight(const bf_campaign *c, const bf__efault *f, float old, bf_fault_model kind, float *now);
/* The mask of a value fault after SBP. */
uint32_t bf__mitigate_value_mask(const bf_campaign *c, const bf__efault *f);

#endif
