/* A campaign's protections (campaign_mitigate.c): the model with clipping
 * and ABFT nodes inserted (the campaign's model then points to it), and the
 * filters weight faults pass through: ECC over 64-bit words
 * (campaign_ecc.c), selective bit protection and weight range checks. */
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
    /* with weights fault groups the range check reads each value after
     * every group's faults (range_late): the bounds per parameter (NULL:
     * none; lo > hi: not a site of any group) */
    float *range_plo, *range_phi;
    int range_late;
    bf__ecc *ecc;             /* SECDED over 64-bit words (NULL: none) */
} bf__protect;

/* As the campaign's own patterns: pattern `pat` (a name or glob, ONNX or
 * PyTorch, or "op:Type") matches site s. */
int bf__site_matches(const char *pat, const bf_site *s);

/* campaign_ecc.c: sets up ecc on c (sites resolved, parameters stored);
 * its check bits over the parameters' bits (storage); a trial's draw d
 * rewritten as the decoder leaves it (before the runner applies it: every
 * fault then a bit flip of its mask, with the values a miscorrection
 * changed appended; BF_EDETECTED, the trial is DUE, with rec holding the
 * faults as drawn); after the run, rec's faults put back as drawn (their
 * masks; the appended ones dropped), so that records pair with the
 * unprotected model's. */
bf_status bf__ecc_setup(bf_campaign *c, const bf_ecc_opts *o, bf_error *err);
void bf__ecc_free(bf__ecc *e);
double bf__ecc_storage_bits(const bf_campaign *c);
bf_status bf__ecc_apply(const bf_campaign *c, bf__draw *d, bf__draw *dg, int64_t t, bf_trial_record *rec, bf_error *err);
/* ECC over weights group g's (0-based: c->groups.sub[g]) tensors: group
 * 0's words where group 0 covers the tensor, words of their own after
 * them where not. bf__ecc_apply then decodes every weights group's faults
 * with group 0's (dg: the groups' draws, c->groups.n of them, rewritten as
 * d is; a later group's fault on an unprotected tensor stays as drawn).
 * bf__ecc_covers: group g's (0: the campaign's own; 1..: fault group g)
 * site is protected, so its faults were rewritten as bit flips. */
bf_status bf__ecc_add_group(bf_campaign *c, size_t g, const bf_ecc_opts *o, bf_error *err);
int bf__ecc_covers(const bf_campaign *c, size_t g, int64_t site);
void bf__ecc_record(const bf_campaign *c, const bf__draw *d, bf_trial_record *rec);

/* Sets up mit's protections on c (sites resolved, parameters stored, before
 * the golden pass). */
bf_status bf__campaign_mitigate(bf_campaign *c, const bf_mitigation *mit, bf_error *err);
/* What a weight fault leaves after the protections: *now rewritten (SBP
 * restores protected bits, the range check zeroes); 1 if the range check
 * flags it (the trial is DUE). */
int bf__mitigate_weight(const bf_campaign *c, const bf__efault *f, float old, bf_fault_model kind, float *now);
/* The mask of a value fault after SBP. */
uint32_t bf__mitigate_value_mask(const bf_campaign *c, const bf__efault *f);
/* Sets up mit's filters on c's fault groups 1.. (after bf__campaign_groups):
 * SBP's masks on each group's sites, in the group's representation; the
 * range check's bounds per parameter (range_late); ECC's words for a weights
 * group's tensors that group 0 does not cover. The protections belong to
 * the model, whichever group's fault reaches a protected tensor. */
bf_status bf__campaign_groups_mitigate(bf_campaign *c, const bf_mitigation *mit, bf_error *err);
/* A weights group's fault (s: the group's campaign; c: the parent, whose
 * store holds the weights): SBP restores the protected bits of *now from
 * old (the value the fault struck). */
void bf__mitigate_group_weight(const bf_campaign *c, const bf_campaign *s, const bf__efault *f, float old, float *now);

#endif
