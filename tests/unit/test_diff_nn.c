/* The differential engine on ops it has no special path for: faults in the
 * weights and bias of ConvTranspose (tests/fixtures/diff/convtranspose_op13,
 * made by tests/fixtures/make_diff_nn.py: Conv, ReLU, ConvTranspose with
 * stride, padding and output_padding, ReLU, a grouped ConvTranspose without
 * bias, Gemm). Each fault kind runs exact (opts.exact: every trial a whole
 * pass) and differential, in a batch that divides the eval set and in one
 * that does not; every trial's record must be the same bits, as in
 * test_diff.c (outcome, changed predictions, every metric). Exponent flips reach 1e38 and
 * Inf, so NaN/Inf outputs (DUE) are among the outcomes compared.
 *
 * And the Convs whose trials run their activation or residual Add in the
 * Conv's epilogue (diffstep.c, bf__dx_run_fused): the real exports resnet_basic
 * (Conv -> Relu, Conv -> Add -> Relu, a downsampling block),
 * mobilenet_v2 (Conv -> Clip(0, 6), Conv -> Add alone) and resnet_stem
 * (torchvision's 7x7/2 stem -> Relu, re-run by trials with the stem
 * kernel on AVX-512, linalg_conv_stem.c), differential
 * against exact: single-bit weight faults and transient activation faults
 * (chain and row mode take most of these), and BER weight faults and
 * permanent activation faults, whose batch re-runs run the fused Convs (a
 * fault on a Conv's output or a fused Add's runs that Conv unfused); and
 * the same on tests/fixtures/fuse/conv_bn, whose Convs compute a kept
 * BatchNormalization (and a HardSwish, Relu, Clip or Add after it) in
 * their epilogue, faults in the BN's parameters included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "campaign_check.h"

#define FIX BF_FIXTURES "/diff/convtranspose_op13"

static const tc_config configs[] = {
    {"weights bitflip fp32", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
    {"weights 2-bit bitflip fp32", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 2},
    {"weights stuck_at_1 fp16", BF_TARGET_WEIGHTS, BF_FAULT_STUCK_AT_1, BF_REPR_FP16, BF_PERSIST_PERMANENT, 1},
    {"weights random_value int8", BF_TARGET_WEIGHTS, BF_FAULT_RANDOM_VALUE, BF_REPR_INT8, BF_PERSIST_PERMANENT, 1},
    {"weights ber fp32", BF_TARGET_WEIGHTS, BF_FAULT_BER, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
    {"activations bitflip fp32 transient", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_TRANSIENT, 1},
};

static char *up[] = {"up.*", "up2.*"}, *acts[] = {"*ConvTranspose*"};
static double rates[] = {1e-3, 1e-2};

static void convtranspose_faults_match_exact(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_open(FIX, &m, &ds);
    double scale = tc_out_scale(m, ds);
    static const int64_t batches[] = {8, 7};
    tc_tally t = {0};
    for (size_t k = 0; k < sizeof configs / sizeof *configs; k++)
        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
            const tc_config *cf = &configs[k];
            bf_campaign_spec s = cf->target == BF_TARGET_WEIGHTS ? tc_config_spec(cf, 99, 150, batches[b], up, 2)
                                                                 : tc_config_spec(cf, 99, 150, batches[b], acts, 1);
            if (cf->kind == BF_FAULT_BER) {
                s.rates = rates;
                s.n_rates = 2;
                s.repeats = 40;
            }
            /* tc_both: exact against differential, for BER also against a
             * differential run that never takes a full pass (the many faults
             * re-run differentially) */
            char label[96];
            snprintf(label, sizeof label, "%s, batch %lld", cf->label, (long long)batches[b]);
            tc_both(m, ds, scale, "convtranspose_op13", &s, label, &t, NULL);
        }
    printf("convtranspose_op13: %lld trials compared, %lld DUE (exact)\n", (long long)t.trials, (long long)t.exact_due);
    assert_true(t.exact_due > 0);   /* the extreme faults were among them */
    tc_assert_agree("ConvTranspose faults, differential vs exact", &t, 1500);
    bf_dataset_free(ds);
    bf_model_free(m);
}

static void fused_convs_match_exact(void **state)
{
    (void)state;
    static const char *const nets[] = {"resnet_basic", "mobilenet_v2", "resnet_stem"};
    static char *all[] = {"*"};
    static const tc_config cfs[] = {
        {"weights bitflip fp32", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
        {"activations bitflip fp32 transient", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32,
         BF_PERSIST_TRANSIENT, 1},
        {"weights ber fp32", BF_TARGET_WEIGHTS, BF_FAULT_BER, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
        {"activations bitflip fp32 permanent", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32,
         BF_PERSIST_PERMANENT, 1},
    };
    static double ber[] = {1e-4};
    tc_tally t = {0};
    for (size_t n = 0; n < sizeof nets / sizeof *nets; n++) {
        bf_model *m = NULL;
        bf_dataset *ds = NULL;
        tc_open_real(nets[n], &m, &ds);
        double scale = tc_out_scale(m, ds);
        for (size_t k = 0; k < sizeof cfs / sizeof *cfs; k++) {
            bf_campaign_spec s = tc_config_spec(&cfs[k], 17, 60, 5, all, 1);   /* batch 5: a partial last batch too */
            if (cfs[k].kind == BF_FAULT_BER) {
                s.rates = ber;
                s.n_rates = 1;
                s.repeats = 30;
            }
            tc_recs r[2] = {{0}};
            tc_run_engines(m, ds, &s, cfs[k].label, 1, r);
            tc_compare(nets[n], cfs[k].label, &r[1], &r[0], scale, &t);
            free(r[0].r);
            free(r[1].r);
        }
        bf_dataset_free(ds);
        bf_model_free(m);
    }
    printf("fused convs: %lld trials compared\n", (long long)t.trials);
    tc_assert_agree("fused Conv epilogues, differential vs exact", &t, 240);
}

/* BatchNormalization kept after the Convs (tests/fixtures/fuse/conv_bn:
 * Conv -> BN -> Relu, HardSwish, Clip, Add alone, Add -> Relu, BN alone),
 * whose trials' re-runs compute the BN (and what follows) in the Conv's
 * epilogue: differential against exact, on faults in every weight, in the
 * BN's parameters alone (scale, bias, mean, variance: 2-bit flips, reaching
 * NaN and huge values), and on activations. */
static void bn_convs_match_exact(void **state)
{
    (void)state;
    static char *all[] = {"*"}, *bn[] = {"bn*"};
    static const tc_config cfs[] = {
        {"weights bitflip fp32", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
        {"BN parameters 2-bit bitflip fp32", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT,
         2},
        {"weights ber fp32", BF_TARGET_WEIGHTS, BF_FAULT_BER, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
        {"activations bitflip fp32 transient", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32,
         BF_PERSIST_TRANSIENT, 1},
        {"activations bitflip fp32 permanent", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32,
         BF_PERSIST_PERMANENT, 1},
    };
    static double ber[] = {1e-3};
    tc_tally t = {0};
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_open(BF_FIXTURES "/fuse/conv_bn", &m, &ds);
    double scale = tc_out_scale(m, ds);
    for (size_t k = 0; k < sizeof cfs / sizeof *cfs; k++) {
        /* batch 5: a partial last batch too */
        bf_campaign_spec s = tc_config_spec(&cfs[k], 23, 80, 5, k == 1 ? bn : all, 1);
        if (cfs[k].kind == BF_FAULT_BER) {
            s.rates = ber;
            s.n_rates = 1;
            s.repeats = 30;
        }
        tc_both(m, ds, scale, "conv_bn", &s, cfs[k].label, &t, NULL);
    }
    bf_dataset_free(ds);
    bf_model_free(m);
    printf("conv_bn: %lld trials compared, %lld DUE (exact)\n", (long long)t.trials, (long long)t.exact_due);
    assert_true(t.exact_due > 0);   /* NaN from a variance's sign bit, among others */
    tc_assert_agree("Conv -> BatchNormalization epilogues, differential vs exact", &t, 360);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(convtranspose_faults_match_exact),
        cmocka_unit_test(fused_convs_match_exact),
        cmocka_unit_test(bn_convs_match_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
