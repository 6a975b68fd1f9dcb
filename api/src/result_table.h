/* Parts of the result's table (bf_result_print_table) in files of their own. */
#ifndef BF_API_RESULT_TABLE_H
#define BF_API_RESULT_TABLE_H

#include <jansson.h>
#include <stdio.h>

/* result_table_mit.c: the paired comparison of protections, one row per
 * configuration with its critical and DUE rates side by side; for a BER
 * sweep, both and the recovery at each rate */
void bf__print_mitigations(FILE *f, const json_t *mits, double conf);

#endif
