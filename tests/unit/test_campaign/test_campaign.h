/* test_campaign's shared fixtures (in test_campaign.c, with the runner) and the tests
 * of its parts, one subject each (the house's 900 lines: tests/arch/size_check.py). */
#ifndef BF_TESTS_UNIT_TEST_CAMPAIGN_H
#define BF_TESTS_UNIT_TEST_CAMPAIGN_H

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"
#include "../campaign_check.h"

/* the fixtures */
extern char *all_tensors[1];   /* a spec's tensors: every one */

#define FIX BF_FIXTURES "/conformance/"

typedef struct fx {
    bf_model *digits, *dlrm, *mlp;
    bf_dataset *digits_ds, *dlrm_ds, *mlp_ds;
} fx;

/* Per-trial records collected by trial number, and the thread they came on. */
typedef struct records {
    bf_trial_record *r;
    int64_t n;
    int64_t calls;
    int64_t last;            /* previous trial seen: on_trial comes in order */
    int in_order;
    int off_thread;
    pthread_t caller;
} records;

int setup(void **state);
int teardown(void **state);
bf_campaign_spec base_spec(void);
void on_trial(void *user, const bf_trial_record *rec);
void records_init(records *rs, int64_t n);
void run(bf_campaign *c, int threads, int64_t si, int64_t sn, records *rs, bf_campaign_result *res);
int64_t outcomes(const bf_outcome_counts *c);
const float *param_data(const bf_model *m, const char *name, int64_t *numel);
bf_dataset *subset(const bf_dataset *ds, int64_t n);
void allocation_failures(void **state);

/* reference.c: PyTorch's reference faults, threads and shards, and fp16, bf16 and int8 values */
void reference_faults_classified(void **state);
void threads_and_shards_agree(void **state);
void reduced_precision_values(void **state);

/* ber.c: BER rates and counts, binary metrics */
void ber_rates_and_counts(void **state);
void binary_metrics(void **state);

/* rules.c: errors that name the culprit, the stop rule, statistics */
void errors_name_the_culprit(void **state);
void stop_rule_is_deterministic(void **state);
void statistics(void **state);

/* sampling.c: sampling strata, bit choice and the seed */
void strata_are_equal(void **state);
void seed_matters(void **state);

#endif
