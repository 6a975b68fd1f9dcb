/* bitflip api — campaign results as JSON, CSV and text tables.
 *
 * A result document keeps the raw sums (outcome counts; metric n, sum and
 * sum of squares) next to everything derived from them (rates, means, Wilson
 * intervals). Shards' documents therefore parse back and merge exactly: the
 * merged aggregates are byte-identical to an unsharded run's (the engine
 * sums metrics on a fixed grid, so the order of addition does not matter).
 *
 * Layout: {"bitflip", "campaign": {identity, sites, rates}, "golden",
 * "shards", "summary": {"trials", "planned", "stopped_early", "outcomes":
 * {masked, tolerable, critical, due} counts, "rates": {name: {rate, ci}},
 * "metrics": {name: {n, sum, sumsq, mean, std, ci}}}, "by_tensor",
 * "by_bit", "by_fault_model", "by_rate"}. */
#ifndef BITFLIP_API_RESULT_H
#define BITFLIP_API_RESULT_H

#include <jansson.h>
#include <stdio.h>

#include "bitflip/campaign.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The identity part: what the campaign ran (spec, sites, rates), the golden
 * pass and the interval confidence. Shards of one campaign have equal
 * headers; merge checks that. */
json_t *bf_result_header(const bf_campaign_spec *spec, const bf_campaign *c, const bf_campaign_result *r);

/* The whole document from a header (stolen) and sums. */
json_t *bf_result_render(json_t *header, const bf_campaign_result *r, int64_t shards);

/* Parses a document's sums back (sizes from its header); errors name the
 * JSON Pointer of what is missing or malformed. */
bf_status bf_result_parse(const json_t *doc, bf_campaign_result *out, bf_error *err);

/* One JSON object per trial record (for --trials-out, JSON Lines). */
json_t *bf_trial_to_json(const bf_campaign *c, const bf_campaign_spec *spec, const bf_trial_record *rec);

/* One configuration of a paired mitigation comparison, as run. */
typedef struct bf_mitigation_run {
    const bf_mitigation *mit;
    json_t *doc;              /* its rendered result (bf_result_render) */
    const double *metric;     /* per trial, in trial order: the task metric (AUC, else accuracy) */
    const int *rate;          /* per trial: its BER rate index, -1 */
    const int *outcome;       /* per trial: its bf_outcome */
    int64_t n;                /* trials (the same for every run) */
    double golden_seconds;    /* bf_campaign_golden_seconds */
    double storage;           /* bf_campaign_storage_overhead */
} bf_mitigation_run;

/* The "mitigations" array of a result: per configuration (runs[0] is
 * "none") its protections, golden pass, outcomes and metrics under faults,
 * recovery of the task metric with a paired-bootstrap interval (overall and
 * per BER rate), coverage (of the faults that the unprotected model does
 * not mask: how many this one detects, and how many it leaves harmless),
 * and cost (golden-pass time ratio, storage overhead). */
json_t *bf_mitigations_render(const bf_mitigation_run *runs, size_t n_runs, double conf);

/* Human renderings of a document: a report with the layers and bits that
 * matter most, and CSV rows (section, key, trials, outcome counts, critical
 * rate and interval). */
void bf_result_print_table(FILE *f, const json_t *doc);
void bf_result_print_csv(FILE *f, const json_t *doc);

/* Looks up a gate metric in a document: critical_rate, due_rate,
 * masked_rate, tolerable_rate (and *_upper / *_lower: the interval's
 * bounds), a metric's mean under faults (accuracy, auc, ...), or
 * golden_<metric>. Returns 0 and sets *value if known, -1 if the name is
 * unknown, 1 if known but not available in this result (e.g. auc of a
 * classifier). */
int bf_result_gate_value(const json_t *doc, const char *name, double *value);
/* Every name bf_result_gate_value knows, comma-separated, for messages. */
const char *bf_result_gate_names(void);

#ifdef __cplusplus
}
#endif
#endif
