/* bitflip api — campaign specs: the JSON document users write (the public
 * contract: docs/CAMPAIGNS.md, api/campaign.schema.json) turned into the
 * engine's bf_campaign_spec (bitflip/campaign_spec.h).
 *
 * Validation is complete, not first-error: every problem in a spec is
 * reported, each as the JSON Pointer (RFC 6901) of the field at fault and a
 * message saying what would be valid:
 *
 *   /faults/bits         must be 1..32, got 40
 *   /faults/positions/2  must be 0..15 for fp16, got 23
 *   /faults/postions     unknown field; did you mean 'positions'?
 *   /seed                must be an integer, got string '42'
 *   ""                   invalid JSON at line 3, column 14: ...
 *
 * A missing required field is reported at its own pointer ("/trials:
 * required ..."); a problem with the whole document (syntax, size, depth, not
 * an object) at "". The daemon sends the list as the `errors` member of an
 * application/problem+json reply (bf_spec_problems_json); the CLI prints one
 * "POINTER: MESSAGE" line per problem. */
#ifndef BITFLIP_API_SPEC_H
#define BITFLIP_API_SPEC_H

#include <stddef.h>

#include <jansson.h>

#include "bitflip/campaign.h"
#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BF_SPEC_MAX_BYTES (16u << 20) /* 16 MiB */
#define BF_SPEC_MAX_DEPTH 32          /* nested arrays and objects, the document's own included */
#define BF_SPEC_MAX_ARRAY 100000      /* entries of any one array (a fault list, rates, patterns) */
#define BF_SPEC_MAX_STRING 4096       /* bytes of any one string or field name */
/* "generate": new tokens per prompt (each trial decodes that many from every
 * prompt, one plan per token per worker); at most BF_GEN_MAX_NEW_TOKENS */
#define BF_SPEC_MAX_NEW_TOKENS 256
/* Problems kept per spec; past this they are counted, and one last problem
 * at "" says how many more there were (a hostile 16 MiB list could otherwise
 * produce an error reply larger than itself). */
#define BF_SPEC_MAX_PROBLEMS 1000

typedef struct bf_spec_problem {
    char *pointer;            /* RFC 6901, "~" and "/" in names escaped: "/faults/bits"; "" = the document */
    char *message;            /* "must be 1..32, got 40" (UTF-8) */
} bf_spec_problem;

typedef struct bf_spec_problems {
    bf_spec_problem *items;   /* in schema order, roughly: an object's unknown fields, then its
                                 fields, then the rules between them */
    size_t count;
    size_t cap;
} bf_spec_problems;

/* Parses and validates a campaign spec of `len` bytes (need not be
 * NUL-terminated; JSON with duplicate keys is rejected).
 *
 * BF_OK: *out holds the spec, defaults filled in; free it with
 * bf_campaign_spec_free. Beyond the JSON's own fields: `trials` is the number
 * of trials the campaign runs (for an explicit list, one per entry; for BER,
 * len(rates) x repeats), `metrics` is 0 when the spec lists none (every metric
 * that applies to the model's task), `critical_metric` is -1 and `stop_margin`
 * 0 when absent, `stop_confidence` is 0.95 unless given, `sample` of a list
 * entry is -1 unless given, and `positions` is sorted ascending (0 entries:
 * every bit of the representation).
 * BF_EINVAL: the spec is invalid; `problems` lists why. BF_ENOMEM: out of
 * memory (`problems` may be incomplete). On failure *out is zeroed.
 *
 * `problems` may be NULL; otherwise the call initialises it (without freeing
 * what it held) and the caller frees it with bf_spec_problems_free, whatever
 * the result. */
bf_status bf_spec_parse(const char *json, size_t len, bf_campaign_spec *out,
                        bf_spec_problems *problems);

/* Frees a spec's members (malloc'd, as bf_spec_parse and the callers that
 * fill specs by hand allocate them), not the struct; NULL is a no-op. Here
 * and not in core's campaign_spec.h because api/ is what allocates specs: the
 * engine only reads them. */
void bf_campaign_spec_free(bf_campaign_spec *spec);

/* The size limits a spec is held to; a 0 field takes its default
 * (BF_SPEC_MAX_*). Past one, the problem is reported at the JSON Pointer of
 * the value ("" for the whole document), naming the limit:
 *   /faults/list   150000 entries; the limit is 100000 (max_array)
 * and nothing else is validated. */
typedef struct bf_spec_limits {
    size_t max_bytes;
    int max_depth;
    size_t max_array;
    size_t max_string;
    int64_t max_new_tokens;   /* "generate": {"new_tokens"} (1 .. BF_GEN_MAX_NEW_TOKENS) */
} bf_spec_limits;

/* bf_spec_parse with limits (NULL: the defaults, as bf_spec_parse). */
bf_status bf_spec_parse_opts(const char *json, size_t len, const bf_spec_limits *lim, bf_campaign_spec *out,
                             bf_spec_problems *problems);

void bf_spec_problems_free(bf_spec_problems *p);   /* frees the items; p itself is the caller's */

/* The problems as the `errors` member of a problem+json reply (RFC 9457):
 * [{"pointer": "/faults/bits", "detail": "must be 1..32, got 40"}, ...].
 * A new reference, or NULL when out of memory. */
json_t *bf_spec_problems_json(const bf_spec_problems *p);

#ifdef __cplusplus
}
#endif
#endif
