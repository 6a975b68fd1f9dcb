/* bitflip — the rules of a campaign spec (bf_campaign_spec): which fields
 * apply with which others, and which values they need together.
 *
 * One set of rules, used twice: bf_campaign_create refuses a spec that
 * breaks one (the first, as its bf_error), and libbitflip-api reports every
 * broken one at the JSON Pointer of its field. A rule blames one field, by
 * a path in the spec's own vocabulary ("faults.bits", "trials",
 * "faults.rates.2" for an element): the document's JSON Pointer is the same
 * path with '/' for '.'. What needs the model (tensor names, the bits a
 * stored integer has, which metrics a task has) is checked when the
 * campaign is created, not here; so are a JSON document's own ranges and
 * types (libbitflip-api, before these rules). */
#ifndef BITFLIP_SPEC_RULES_H
#define BITFLIP_SPEC_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/campaign.h"
#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Trials a campaign spec may ask for (libbitflip-api's limit on "trials"
 * and on a BER sweep's rates x repeats). */
#define BF_SPEC_MAX_TRIALS 1000000000LL

/* The fields rules read, as bits of bf_spec_facts. */
typedef enum bf_spec_field {
    BF_SPEC_TARGET = 0,
    BF_SPEC_TENSORS,
    BF_SPEC_MODEL,
    BF_SPEC_BITS,
    BF_SPEC_POSITIONS,
    BF_SPEC_BURST,
    BF_SPEC_RATE,             /* a document's single "rate" */
    BF_SPEC_RATES,
    BF_SPEC_REPEATS,
    BF_SPEC_REPR,
    BF_SPEC_PER_CHANNEL,
    BF_SPEC_PERSISTENCE,
    BF_SPEC_ZERO_POINTS,
    BF_SPEC_W_MAX,
    BF_SPEC_ERROR_MAP,
    BF_SPEC_SAMPLING,
    BF_SPEC_TRIALS,
    BF_SPEC_STOP,
    BF_SPEC_MITIGATIONS,
    BF_SPEC_BATCH,
    BF_SPEC_CRITICAL,
    BF_SPEC_GROUP_SIZE,
    BF_SPEC_FAULT_SCALES,
    BF_SPEC_KV,               /* faults.kv: target kv_cache's filters */
    BF_SPEC_GENERATE,         /* gen_new_tokens */
    BF_SPEC_METRICS,
    BF_SPEC_WORDS,            /* faults.words: a column upset's words */
    BF_SPEC_GROUPS,           /* faults as a list: the fault groups (bf_campaign_spec.groups) */
    BF_SPEC_FIELD_COUNT
} bf_spec_field;

#define BF_SPEC_BIT(f) (1u << (f))

/* What a caller knows about the spec beyond its values. A C struct has no
 * notion of a field left out (0 is also a value), so only a document
 * (document = 1) states fields; its rules that a field does not apply
 * ("'bits' applies only to models ...") fire on a stated field, whatever
 * its value. A document's error map is not loaded yet (the caller loads it
 * after parsing), so the rule that it is loaded is a struct's only. */
typedef struct bf_spec_facts {
    uint32_t stated;          /* BF_SPEC_BIT(field) for each field the document gives */
    uint32_t invalid;         /* fields already reported invalid: the rules reading them are skipped */
    int document;
} bf_spec_facts;

/* One broken rule. `field` and `message` live until the report returns. */
typedef struct bf_spec_rule_problem {
    const char *rule;         /* the rule's name, e.g. "transient-not-weights" */
    const char *field;        /* the field blamed, e.g. "faults.persistence" */
    const char *message;      /* about that field: "'transient' applies only to ..." */
    bf_status status;         /* BF_EINVAL, or BF_ERANGE for a count or value out of range */
} bf_spec_rule_problem;

typedef void (*bf_spec_report_fn)(void *user, const bf_spec_rule_problem *p);

/* Checks spec against every rule (facts NULL: a C struct), calling report
 * (may be NULL) for each broken one, in the rules' order; a field is blamed
 * once, by the first rule it breaks (one mistake, one problem). Rules that
 * read an unknown enum value are skipped once its own rule has reported it.
 * Returns how many were reported. */
size_t bf_spec_check(const bf_campaign_spec *spec, const bf_spec_facts *facts, bf_spec_report_fn report, void *user);

/* The rule between an explicit-list entry's 'sample' and the faults'
 * persistence ('sample' is required for transient faults and applies only
 * to them), for the callers that check entries one by one: libbitflip-api
 * with the entry's JSON Pointer, bf_campaign_create with its index. NULL
 * when the entry keeps it, else the message about the entry's 'sample'. */
const char *bf_spec_list_sample_rule(bf_persistence persistence, int has_sample);

/* The rules' names, in order (for tests that cover each one). */
size_t bf_spec_rule_count(void);
const char *bf_spec_rule_name(size_t i);

#ifdef __cplusplus
}
#endif

#endif
