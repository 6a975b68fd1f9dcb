/* test_limits's shared fixtures (in test_limits.c, with the runner) and the tests
 * of its parts, one subject each (the house's 900 lines: tests/arch/size_check.py). */
#ifndef BF_TESTS_UNIT_TEST_LIMITS_H
#define BF_TESTS_UNIT_TEST_LIMITS_H

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../alloc_fail.h"
#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"

/* the fixtures */
typedef struct wb {
    uint8_t *p;
    size_t n, cap;
} wb;

typedef struct nodespec {
    const char *op, *name, *in[3], *out;
} nodespec;


void wb_put(wb *b, const void *src, size_t n);
size_t varint(uint8_t tmp[10], uint64_t v);
void wb_varint(wb *b, uint64_t v);
void wb_int(wb *b, unsigned field, uint64_t v);
void wb_bytes(wb *b, unsigned field, const void *data, size_t n);
void wb_str(wb *b, unsigned field, const char *s);
void wb_msg(wb *b, unsigned field, wb *sub);
void value_info(wb *g, unsigned field, const char *name, int ndim, const int64_t *dims);
void tensor(wb *out, unsigned field, const char *name, int dtype, int ndim, const int64_t *dims, const void *data, size_t bytes);
void node(wb *g, nodespec s, wb *attrs);
wb model(wb *graph);
bf_status load(const wb *m, const bf_load_limits *lim, bf_model **out, bf_error *err);
wb small_plan_model(void);
unsigned char *st_file(const char *hdr, size_t data_len, size_t *len);

/* model.c: the model loader's limits (nesting, counts, sizes, rank, depth) and its walk under truncation and failed allocations */
void if_nested_10000_deep_is_refused(void **state);
void if_nested_1000_deep_is_refused(void **state);
void if_within_depth_reaches_op_check(void **state);
void tiny_model_loads(void **state);
void too_many_nodes(void **state);
void message_count_limit(void **state);
void too_many_attributes(void **state);
void field_size_limit(void **state);
void huge_dims_refused_before_allocating(void **state);
void rank_limit(void **state);
void type_depth_limit(void **state);
void walk_survives_truncation_and_flips(void **state);
void allocation_failure_in_the_walk(void **state);

/* plans.c: the plan and safetensors estimates */
void estimate_matches_hand_arithmetic(void **state);
void bytes_are_printed_in_binary_units(void **state);
void memory_bomb_is_refused_before_allocating(void **state);
void safetensors_json_depth(void **state);
void safetensors_counts_and_bytes(void **state);

/* jobs.c: a job's and a campaign's estimates */
void job_estimates_add_up(void **state);
void packed_weights_counted_once(void **state);
void param_only_values_counted(void **state);
void campaign_estimate_is_the_peak(void **state);

#endif
