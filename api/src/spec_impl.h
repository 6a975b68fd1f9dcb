/* The campaign-spec parser's internals, shared by its files: spec_fields.c
 * (problems, pointers, typed getters), spec.c (the document, its top-level
 * fields, the rules between fields), spec_faults.c ("faults") and
 * spec_mitigations.c ("mitigations"). Each field reports
 * its problems through a ctx, with its JSON Pointer. */
#ifndef BF_SPEC_IMPL_H
#define BF_SPEC_IMPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bitflip/api/spec.h"
#include "bitflip/spec_rules.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

typedef struct ctx {
    bf_spec_problems *pr;   /* NULL: count only */
    size_t found;           /* problems found, kept or not */
    bool nomem;
    int64_t max_new_tokens; /* the limit on "generate": {"new_tokens"} */
    const char *faults_at;  /* the fault fields' object: NULL "/faults", else "/faults/<i>" */
    bool faults_list;       /* "faults" is a list of groups: the rules' group-0 fields are at /faults/0 */
} ctx;

/* Fixed pointers are short: "/mitigations/<index>/clip/at/<index>" at most. */
typedef struct { char s[128]; } ptrbuf;

/* 'text' in single quotes, control characters escaped, cut (at a UTF-8
 * character boundary) after about 40 bytes: messages stay short and valid. */
typedef struct { char s[256]; } textbuf;

typedef struct fieldset {
    const char *const *names;
    size_t n;
    /* a neighbouring object's fields, to say "'bits' belongs in 'faults'" */
    const char *const *elsewhere;
    size_t n_elsewhere;
    const char *elsewhere_where;
} fieldset;

typedef struct faults_info {
    bool target_ok, model_ok, repr_ok, persist_ok;
    int repr_bits;            /* of the representation; 32 if it is invalid */
    char for_repr[16];        /* " for fp16" after a range; "" for fp32 */
} faults_info;

/* Keeps `message` (owned: freed on failure) at `pointer`; false, with
 * c->nomem set, when out of memory. Counts nothing (bf__spec_problem does). */
bool bf__spec_push(ctx *c, const char *pointer, char *message);
/* Records a problem at `pointer` (kept up to BF_SPEC_MAX_PROBLEMS, counted after). */
void bf__spec_problem(ctx *c, const char *pointer, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
ptrbuf bf__spec_ptr_at(const char *base, const char *field);   /* base + "/" + field */
ptrbuf bf__spec_ptr_index(const char *base, size_t i);         /* base + "/" + i */
textbuf bf__spec_describe(const json_t *v);                    /* a value, briefly, for messages */
void bf__spec_wrong_type(ctx *c, const char *ptr, const char *expected, const json_t *v);
/* Reports unknown keys of obj (at `base`); slots[i] = the value of names[i], or NULL. */
void bf__spec_take_fields(ctx *c, json_t *obj, const char *base, const fieldset *fs, json_t **slots);
/* Each returns true with the value stored, or false with a problem reported. */
bool bf__spec_dup_string(ctx *c, const json_t *v, const char *ptr, char **out);
bool bf__spec_get_bool(ctx *c, const json_t *v, const char *ptr, int *out);
bool bf__spec_get_int(ctx *c, const json_t *v, const char *ptr, int64_t lo, int64_t hi, const char *what, int64_t *out);
bool bf__spec_get_number(ctx *c, const json_t *v, const char *ptr, double *out);
int bf__spec_get_enum(ctx *c, const json_t *v, const char *ptr, const char *const *names, size_t n);   /* -1: bad */
bool bf__spec_get_array(ctx *c, const json_t *v, const char *ptr, const char *of, size_t *n);

/* The top level's and "faults"' field names (spec.c), for the unknown
 * fields that belong in the other ("'bits' belongs in 'faults'"). */
extern const char *const bf__spec_root_names[];
extern const char *const bf__spec_fault_names[];
#define BF__SPEC_N_ROOT_NAMES 12
#define BF__SPEC_N_FAULT_NAMES 19

/* spec_faults.c: "faults" into s, each field's type and range; records in
 * facts what it states and which fields are invalid, for the rules (run
 * later, on the whole spec). */
void bf__spec_faults(ctx *c, json_t *obj, bool is_list, bf_campaign_spec *s, faults_info *fi,
                     bf_spec_facts *facts);

/* spec_faults.c: "faults" as a list of fault groups (docs/CAMPAIGNS.md,
 * "Fault groups"): element 0 into s's own fields as bf__spec_faults reads
 * an object, the others into s->groups. */
void bf__spec_fault_groups(ctx *c, json_t *arr, bool is_list, bf_campaign_spec *s, faults_info *fi,
                           bf_spec_facts *facts);

/* spec_mitigations.c: "mitigations" into s->mitigations ("none" first). */
void bf__spec_mitigations(ctx *c, json_t *v, bf_campaign_spec *s, const faults_info *fi);

#endif
