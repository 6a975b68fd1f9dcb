/* test_campaign_act's shared fixtures (in test_campaign_act.c, with the runner) and the tests
 * of its parts, one subject each (the house's 900 lines: tests/arch/size_check.py). */
#ifndef BF_TESTS_UNIT_TEST_CAMPAIGN_ACT_H
#define BF_TESTS_UNIT_TEST_CAMPAIGN_ACT_H

#include <math.h>
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
#include "../alloc_fail.h"
#include "../campaign_check.h"

/* the fixtures */
extern char *all_tensors[1];   /* a spec's tensors: every one */

#define FIX BF_FIXTURES "/conformance/"
#define BATCH 64          /* digits: 360 samples, five full batches and one of 40 */

typedef struct fx {
    bf_model *digits, *dlrm;
    bf_dataset *digits_ds, *dlrm_ds;
} fx;

/* Every trial's record and outputs, by trial number. */
typedef struct capture {
    int64_t n, samples, cols;
    bf_trial_record *rec;
    float *out;               /* n x samples x cols */
    int64_t trials, outputs;  /* calls */
    int64_t last_trial;       /* on_trial's trial, which on_outputs must repeat */
    int paired;               /* every on_outputs came right after its on_trial */
} capture;

/* A change dataset_with makes to a float tensor's samples x row floats. */
typedef void (*mod_fn)(float *x, int64_t samples, int64_t row, void *ctx);

/* What a fault does to one element, per representation, written here. */
typedef struct elem_fault {
    int64_t sample;           /* -1: every sample */
    int64_t index;
    uint32_t mask;
    bf_repr repr;
    float scale;
} elem_fault;

int setup(void **state);
int teardown(void **state);
bf_campaign_spec base_spec(bf_target target, bf_persistence persistence);
void cap_trial(void *user, const bf_trial_record *rec);
void cap_outputs(void *user, int64_t trial, const float *out, int64_t samples, int64_t cols);
void capture_init(capture *c, int64_t n);
void capture_free(capture *c);
const float *trial_out(const capture *c, int64_t t);
void run(bf_campaign *c, int threads, int64_t si, int64_t sn, capture *cap, bf_campaign_result *res);
float *plain_pass(const bf_model *m, const bf_dataset *ds, int threads, int64_t *n_out);
bf_dataset *dataset_with(const bf_dataset *ds, const char *name, mod_fn mod, void *ctx);
uint32_t bits_of(float x);
float float_of(uint32_t u);
int8_t my_q(float x, float scale);
float my_corrupt(const elem_fault *e, float x);
void mod_elem(float *x, int64_t samples, int64_t row, void *ctx);
float max_abs(const float *x, int64_t n);

/* inputs.c: input faults as a changed eval set, and faults on the logits and inner activations */
void input_faults_match_changed_dataset(void **state);
void logit_faults_change_one_value(void **state);
void inner_activation_faults(void **state);

/* transient.c: transient faults, BER on activations, threads and shards, DLRM's inputs */
void transient_hits_one_sample(void **state);
void ber_on_activations(void **state);
void dlrm_inputs(void **state);

/* patterns.c: fault patterns and the errors they must give */
void patterns_and_errors(void **state);

/* evaluator.c: the evaluator's value faults, weight outputs and failed allocations */
void evaluator_value_faults(void **state);
void weight_outputs(void **state);
void allocation_failures(void **state);

#endif
