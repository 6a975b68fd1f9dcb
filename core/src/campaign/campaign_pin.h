/* Tests only: a campaign whose host-dependent choices are pinned, so that a
 * test's assertions that a path ran cannot flip with the machine it runs
 * on. Nothing in the product calls this: the choice is internal, out of the
 * public API (bf_campaign_prep), as diff/diff_plant.h keeps the psum
 * plant. */
#ifndef BF_CAMPAIGN_PIN_H
#define BF_CAMPAIGN_PIN_H

#include "bitflip/campaign.h"

/* The pinned choices; all zero: this host's, as the product makes them.
 * - ckpt_byte_price: a recorded checkpoint byte priced at that many
 *   seconds (exec/ckpt.h, bf__ckpt_opts.byte_s) instead of this host's
 *   measured price (bf__ckpt_host_pages: 1 ns, or 2.5 ns where fresh pages
 *   are dear); <= 0: this host's. The same price gives the same
 *   checkpoints on every host (test_ckpt).
 * - ckpt_huge: with a pinned price (> 0), the checkpoints' pages pinned
 *   too: 1, their block in 2 MiB pages whatever this host measures; 0, in
 *   4 KiB ones. The records are the same either way (test_ckpt). */
typedef struct bf__campaign_pin {
    double ckpt_byte_price;
    int ckpt_huge;
} bf__campaign_pin;

/* bf_campaign_create_prepared with the choices pin pins (NULL: none, as
 * bf_campaign_create_prepared). */
bf_status bf__campaign_create_pinned(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                                     const bf_mitigation *mit, const bf_campaign_prep *prep,
                                     const bf__campaign_pin *pin, bf_campaign **out, bf_error *err);

#endif
