/* What the spec's rule tables share (spec_rules.c runs them; each
 * spec_rules_*.c holds one topic's rules): a rule's shape and the helpers
 * the rules read the spec with. */
#ifndef BF_SPEC_RULES_IMPL_H
#define BF_SPEC_RULES_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "bitflip/spec_rules.h"

typedef enum scope { ANY, DOCUMENT, STRUCT } scope;

typedef struct rule {
    const char *name;
    bf_spec_field blame;
    scope scope;
    uint32_t reads;           /* besides `blame` */
    bf_status status;
    /* true if s breaks the rule, with the message in msg; may write an
     * element's path ("faults.rates.2") over the blamed field's in field */
    bool (*broken)(const bf_campaign_spec *s, const bf_spec_facts *f, char *field, char *msg, size_t len);
} rule;

#define FIELD_PATH_MAX 64

#define B(f) BF_SPEC_BIT(BF_SPEC_##f)

static inline bool stated(const bf_spec_facts *f, bf_spec_field x) { return f->stated >> x & 1; }
static inline bool is_list(const bf_campaign_spec *s) { return s->sampling == BF_SAMPLE_LIST; }
static inline bool is_ber(const bf_campaign_spec *s) { return s->model_kind == BF_FAULT_BER; }
static inline bool is_prof(const bf_campaign_spec *s) { return s->model_kind == BF_FAULT_PROFILED; }
static inline bool on_weights(const bf_campaign_spec *s) { return s->target == BF_TARGET_WEIGHTS; }
static inline const char *model_name(const bf_campaign_spec *s) { return bf_fault_model_name(s->model_kind); }

/* Models that touch bits chosen by bits, positions and burst. */
static inline bool chosen_bits(const bf_campaign_spec *s)
{
    return s->model_kind == BF_FAULT_BITFLIP || s->model_kind == BF_FAULT_STUCK_AT_0 ||
           s->model_kind == BF_FAULT_STUCK_AT_1;
}

/* Models a multi-bit upset in 64-bit words takes: one upset a trial, or
 * (ber) every upset of the population at a rate. */
static inline bool mbu_model(const bf_campaign_spec *s) { return chosen_bits(s) || s->model_kind == BF_FAULT_BER; }

#define SAY(...) (snprintf(msg, len, __VA_ARGS__), true)
#define RULE(fn) static bool fn(const bf_campaign_spec *s, const bf_spec_facts *f, char *field, char *msg, size_t len)
#define UNUSED (void)f, (void)field

/* spec_rules_mbu.c: multi-bit upsets in 64-bit storage words; mbu-uniform
 * sits with the sampling rules (spec_rules.c's table order). */
extern const rule bf__spec_rules_mbu[];
extern const size_t bf__spec_rules_mbu_n;
bool bf__rule_mbu_uniform(const bf_campaign_spec *s, const bf_spec_facts *f, char *field, char *msg, size_t len);
/* spec_rules_groups.c: fault groups (bf_campaign_spec.groups), after
 * every other rule (they read group 0's fields as those rules left them). */
extern const rule bf__spec_rules_groups[];
extern const size_t bf__spec_rules_groups_n;

#endif
