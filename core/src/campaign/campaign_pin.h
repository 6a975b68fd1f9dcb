/* Tests only: a campaign whose host-dependent choices are pinned, so that a
 * test's assertions that a path ran cannot flip with the machine it runs
 * on. Nothing in the product calls this: the choice is internal, out of the
 * public API (bf_campaign_prep), as diff/diff_plant.h keeps the psum
 * plant. */
#ifndef BF_CAMPAIGN_PIN_H
#define BF_CAMPAIGN_PIN_H

#include "bitflip/campaign.h"

/* bf_campaign_create_prepared, a recorded checkpoint byte priced at
 * ckpt_byte_price seconds (exec/ckpt.h, bf__ckpt_create_priced) instead of
 * this host's measured price (bf__ckpt_host_pages: 1 ns, or 2.5 ns where
 * fresh pages are dear); <= 0: this host's, as the product does. The same
 * price gives the same checkpoints on every host (test_ckpt). */
bf_status bf__campaign_create_priced(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                                     const bf_mitigation *mit, const bf_campaign_prep *prep, double ckpt_byte_price,
                                     bf_campaign **out, bf_error *err);
/* As bf__campaign_create_priced, with a pinned price (> 0) the
 * checkpoints' pages pinned too: ckpt_huge 1, their block in 2 MiB pages
 * whatever this host measures (bf__ckpt_host_pages), 0 in 4 KiB ones.
 * The records are the same either way (test_ckpt). */
bf_status bf__campaign_create_pinned(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                                     const bf_mitigation *mit, const bf_campaign_prep *prep, double ckpt_byte_price,
                                     int ckpt_huge, bf_campaign **out, bf_error *err);

#endif
