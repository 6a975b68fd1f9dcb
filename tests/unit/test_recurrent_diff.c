/* The differential engine on an exported LSTM: tests/fixtures/rnn/
 * lstm_2layer_bidir_op13 (make_rnn_fixtures.py), a batch-first, 2-layer,
 * bidirectional nn.LSTM whose last step feeds a Linear, exported at opset 13
 * with a dynamic batch. The export transposes the batch to dim 1 for the
 * LSTM nodes and back (Transpose, Reshape), makes the zero initial states
 * from the batch size (Shape, Gather, ConstantOfShape, Slice), and reads the
 * last step with a Gather: samples mix with time steps in the LSTM's
 * tensors, whose dim 0 is time, not the sample.
 *
 * Each campaign runs exact (opts.exact) and differential, and every trial
 * must agree as in test_diff.c (the same outcome but for near ties,
 * metrics within 1e-6): listed single-bit faults in every W, R and B (sign,
 * exponent and mantissa bits, in a batch that divides the eval set and in
 * one that does not), random ones in the LSTMs' parameters, and the other
 * fault models and targets over the whole model; then random weight and
 * transient activation faults in the GRU fixture beside it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "campaign_check.h"

#define FIX BF_FIXTURES "/rnn/lstm_2layer_bidir_op13"
#define MAX_LSTM_PARAMS 6   /* W, R, B of two layers */

typedef struct fixture {
    tc_loaded l;   /* first: tc_group_close frees the fixture */
    const char *label;
    char *lstm[MAX_LSTM_PARAMS];          /* names */
    int64_t numel[MAX_LSTM_PARAMS];
    int n_lstm;
    double scale;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->label = "lstm_2layer_bidir_op13";
    tc_open(FIX, &f->l.m, &f->l.ds);
    /* the LSTMs' W [2, 40, in], R [2, 40, 10] and B [2, 80], found by what they are */
    for (size_t q = 0; q < bf_model_num_params(f->l.m); q++) {
        const bf_param_info *pi = bf_model_param(f->l.m, q);
        if (pi->reader_op && strcmp(pi->reader_op, "LSTM") == 0) {
            assert_true(f->n_lstm < MAX_LSTM_PARAMS);
            assert_int_equal(pi->tensor->dims[0], 2);
            f->numel[f->n_lstm] = bf_tensor_numel(pi->tensor);
            f->lstm[f->n_lstm++] = strdup(pi->tensor->name);
        }
    }
    assert_int_equal(f->n_lstm, MAX_LSTM_PARAMS);
    f->scale = tc_out_scale(f->l.m, f->l.ds);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int q = 0; q < f->n_lstm; q++) free(f->lstm[q]);
    return tc_group_close(state);
}

/* Runs spec s exact and differential and compares them into t. */
static void both(const fixture *f, bf_campaign_spec *s, const char *label, tc_tally *t)
{
    tc_both(f->l.m, f->l.ds, f->scale, f->label, s, label, t, NULL);
}


static void listed_lstm_faults_match_exact(void **state)
{
    const fixture *f = *state;
    static const int bits[] = {31, 30, 26, 22, 3};
    enum { PER_PARAM = 3 };
    bf_fault_entry list[MAX_LSTM_PARAMS * PER_PARAM * sizeof bits / sizeof *bits];
    size_t n = 0;
    for (int q = 0; q < f->n_lstm; q++) {
        int64_t numel = f->numel[q];
        /* the first element, one of the reverse direction's, the last */
        int64_t index[PER_PARAM] = {0, numel / 2 + 7, numel - 1};
        for (int i = 0; i < PER_PARAM; i++)
            for (size_t k = 0; k < sizeof bits / sizeof *bits; k++)
                list[n++] = (bf_fault_entry){.tensor = f->lstm[q], .index = index[i], .bit = bits[k],
                                             .sample = -1};
    }
    static const int64_t batches[] = {16, 7};   /* 96 samples: 6 batches; 7 leaves a partial one */
    tc_tally t = {0};
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
        bf_campaign_spec s = tc_base_spec(batches[b]);
        s.sampling = BF_SAMPLE_LIST;
        s.list = list;
        s.n_list = n;
        char label[64];
        snprintf(label, sizeof label, "listed W/R/B, batch %lld", (long long)batches[b]);
        both(f, &s, label, &t);
    }
    tc_assert_agree("listed LSTM W/R/B faults, differential vs exact", &t, 2 * (int64_t)n);
}

static void random_lstm_faults_match_exact(void **state)
{
    const fixture *f = *state;
    char *tensors[] = {"op:LSTM"};
    tc_tally t = {0};
    bf_campaign_spec s = tc_base_spec(7);
    s.seed = 11;
    s.trials = 60;
    s.tensors = tensors;
    s.n_tensors = 1;
    both(f, &s, "random LSTM bit flips, batch 7", &t);
    tc_assert_agree("random LSTM faults, differential vs exact", &t, 60);
}

static const tc_config configs[] = {
    {"weights 2-bit bitflip fp32", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 2},
    {"weights stuck_at_1 fp16", BF_TARGET_WEIGHTS, BF_FAULT_STUCK_AT_1, BF_REPR_FP16, BF_PERSIST_PERMANENT, 1},
    {"weights random_value int8", BF_TARGET_WEIGHTS, BF_FAULT_RANDOM_VALUE, BF_REPR_INT8, BF_PERSIST_PERMANENT, 1},
    {"weights ber fp32", BF_TARGET_WEIGHTS, BF_FAULT_BER, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
    {"activations bitflip fp32 transient", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32,
     BF_PERSIST_TRANSIENT, 1},
    {"activations bitflip fp16 permanent", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP16,
     BF_PERSIST_PERMANENT, 1},
    {"inputs bitflip fp32 transient", BF_TARGET_INPUTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_TRANSIENT, 1},
};

static void other_fault_models_match_exact(void **state)
{
    const fixture *f = *state;
    static char *all[] = {"*"};
    static double rates[] = {1e-4, 1e-3};
    tc_tally t = {0};
    int64_t trials = 0;
    for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
        const tc_config *cf = &configs[k];
        bf_campaign_spec s = tc_base_spec(7);
        s.seed = 4242;
        s.trials = 30;
        s.target = cf->target;
        s.tensors = all;
        s.n_tensors = 1;
        s.model_kind = cf->kind;
        s.bits = cf->bits;
        s.repr = cf->repr;
        s.persistence = cf->persistence;
        if (cf->kind == BF_FAULT_BER) {
            s.rates = rates;
            s.n_rates = 2;
            s.repeats = 15;
        }
        both(f, &s, cf->label, &t);
        trials += 30;
    }
    tc_assert_agree("other fault models on the LSTM, differential vs exact", &t, trials);
}

/* The same over the GRU of the conformance fixtures (gru_2layer_bidir_op17:
 * opset 17, linear_before_reset = 1). */
static void gru_random_faults_match_exact(void **state)
{
    (void)state;
    fixture f = {.label = "gru_2layer_bidir_op17"};
    f.scale = tc_load(BF_FIXTURES "/rnn/gru_2layer_bidir_op17", &f.l.m, &f.l.ds);
    char *tensors[] = {"op:GRU"};
    tc_tally t = {0};
    bf_campaign_spec s = tc_base_spec(7);
    s.seed = 17;
    s.trials = 60;
    s.tensors = tensors;
    s.n_tensors = 1;
    both(&f, &s, "random GRU bit flips, batch 7", &t);
    s.target = BF_TARGET_ACTIVATIONS;
    s.persistence = BF_PERSIST_TRANSIENT;
    s.tensors = NULL;
    s.n_tensors = 0;
    s.trials = 30;
    both(&f, &s, "transient activation bit flips, batch 7", &t);
    tc_assert_agree("GRU faults, differential vs exact", &t, 90);
    tc_unload(&f.l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(listed_lstm_faults_match_exact),
        cmocka_unit_test(random_lstm_faults_match_exact),
        cmocka_unit_test(other_fault_models_match_exact),
        cmocka_unit_test(gru_random_faults_match_exact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
