/* Parts of the result (its table, bf_result_print_table; its fault groups) in files of their own. */
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

#endif
