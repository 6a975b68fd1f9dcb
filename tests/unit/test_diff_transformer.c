/* The differential engine on the transformer block that overflowed it:
 * tests/fixtures/diff/transformer_encoder_op13 (make_fixtures.py,
 * transformer_encoder_fixture), PyTorch's nn.TransformerEncoder as exported
 * at opset 13 with a dynamic batch. Its packed in-projection weight is an
 * anonymous, transposed onnx::MatMul_N [64, 192], read by both layers'
 * batched 3-D MatMuls; a fault there changes most tokens of the output
 * projection's input, a 2-D Gemm over every token ([seq x batch, 64]), and
 * the engine listed those rows into a buffer with room for a batch's.
 *
 * Listed faults in that weight (two elements, exponent and mantissa
 * bits), in a batch that divides the eval set and in one that does not,
 * then random faults in it and in the output projections, each run exact
 * (opts.exact) and differential; every trial's record must be the same
 * bits, as in test_diff.c. Under ASan
 * (make test-asan) the overflow itself is caught too. */
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

#define FIX BF_FIXTURES "/diff/transformer_encoder_op13"

typedef struct fixture {
    tc_loaded l;   /* first: tc_group_close frees the fixture */
    char *packed;                /* the in-projection's name */
    double scale;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    tc_open(FIX, &f->l.m, &f->l.ds);
    /* found by what it is, not by the exporter's number */
    for (size_t q = 0; q < bf_model_num_params(f->l.m) && !f->packed; q++) {
        const bf_param_info *pi = bf_model_param(f->l.m, q);
        const bf_tensor *t = pi->tensor;
        if (strncmp(t->name, "onnx::MatMul_", 13) == 0 && t->ndim == 2 && t->dims[0] == 64 && t->dims[1] == 192)
            f->packed = strdup(t->name);
    }
    assert_non_null(f->packed);
    f->scale = tc_out_scale(f->l.m, f->l.ds);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    free(f->packed);
    return tc_group_close(state);
}

/* Runs spec s exact and differential and compares them into t. */
static void both(const fixture *f, bf_campaign_spec *s, const char *label, tc_tally *t)
{
    tc_both(f->l.m, f->l.ds, f->scale, "transformer_encoder_op13", s, label, t, NULL);
}

static const int64_t batches[] = {16, 7};   /* 3 batches; 7 with a partial last one */

static void listed_faults_match_exact(void **state)
{
    const fixture *f = *state;
    static const int64_t index[] = {100, 9000};   /* the first row's and a late one's */
    static const int bits[] = {30, 29, 22};
    bf_fault_entry list[sizeof index / sizeof *index * sizeof bits / sizeof *bits];
    size_t n = 0;
    for (size_t i = 0; i < sizeof index / sizeof *index; i++)
        for (size_t k = 0; k < sizeof bits / sizeof *bits; k++)
            list[n++] = (bf_fault_entry){.tensor = f->packed, .index = index[i], .bit = bits[k], .sample = -1};
    tc_tally t = {0};
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
        bf_campaign_spec s = {0};
        s.target = BF_TARGET_WEIGHTS;
        s.model_kind = BF_FAULT_BITFLIP;
        s.bits = 1;
        s.repr = BF_REPR_FP32;
        s.sampling = BF_SAMPLE_LIST;
        s.list = list;
        s.n_list = n;
        s.critical_metric = -1;
        s.critical_delta = -1;
        s.batch = batches[b];
        char label[64];
        snprintf(label, sizeof label, "listed, batch %lld", (long long)batches[b]);
        both(f, &s, label, &t);
    }
    tc_assert_agree("listed in-projection faults, differential vs exact", &t, 2 * (int64_t)n);
}

static void random_faults_match_exact(void **state)
{
    const fixture *f = *state;
    char *tensors[] = {f->packed, "*out_proj.weight"};
    tc_tally t = {0};
    bf_campaign_spec s = tc_all_weights_spec(7, 20);
    s.tensors = tensors;
    s.n_tensors = 2;
    s.batch = 7;
    both(f, &s, "random, batch 7", &t);
    tc_assert_agree("random projection faults, differential vs exact", &t, 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(listed_faults_match_exact),
        cmocka_unit_test(random_faults_match_exact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
