/* Parts of the result in files of their own: result_json.c renders it,
 * result_parse.c parses it back, result_print.c prints its table and CSV
 * and reads its gates, result_table_mit.c and result_groups.c render the
 * protections' comparison and the fault groups. */
#ifndef BF_API_RESULT_TABLE_H
#define BF_API_RESULT_TABLE_H

#include <jansson.h>
#include <stdio.h>

#include "bitflip/campaign.h"

/* result_table_mit.c: the paired comparison of protections, one row per
 * configuration with its critical and DUE rates side by side; for a BER
 * sweep, both and the recovery at each rate */
void bf__print_mitigations(FILE *f, const json_t *mits, double conf);

/* result_groups.c: campaign.fault_groups, groups 1.. of spec's faults with
 * their sites (c's) and what each mitigation does to them */
json_t *bf__result_fault_groups(const bf_campaign_spec *spec, const bf_campaign *c);

/* result_json.c: the outcome classes' keys ("masked", ...), the stopping
 * rule's three targets' keys, and a result header's confidence (0.95 when
 * absent or out of range), shared with result_parse.c and result_print.c */
extern const char *const bf__outcome_keys[BF_OUTCOME_COUNT];
extern const char *const bf__stop_keys[3];
double bf__result_confidence(const json_t *header);

#endif
