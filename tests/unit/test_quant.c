/* Quantized models' stored integers as fault sites (tests/fixtures/quant/).
 *
 * - The parameter table: int8/uint8 weights and zero points read by quant ops
 *   are parameters with their dtype; other integer initializers are not.
 * - Bit flips on them: bits 0..7 of the stored byte, their own inverse.
 * - Campaign sites: the default selection is the stored integer weights
 *   (zero points only with spec.zero_points), 8 bits each; a selection that
 *   also matches float tensors keeps the integers; a float representation is
 *   refused with a reason.
 * - The records: old and new are the integers, new = old with the mask
 *   flipped in two's complement (int8) or plain binary (uint8).
 * - The differential engine against exact re-execution on every fixture,
 *   test_diff.c's rules (campaign_check.h). */
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
#include "bitflip/eval.h"
#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "campaign_check.h"
#include "op_harness.h"

#define FIX BF_FIXTURES "/quant/"

static const char *const fixtures[] = {"qdq_cnn_u8", "qdq_mlp_s8", "qop_cnn_u8", "qint_cnn_u8"};

static void load(const char *name, bf_model **m, bf_dataset **ds)
{
    char mp[512], dp[512];
    snprintf(mp, sizeof mp, FIX "%s.onnx", name);
    snprintf(dp, sizeof dp, FIX "%s.eval.safetensors", name);
    bf_error err = {0};
    if (bf_model_load_file(mp, m, &err) || (ds && bf_dataset_load_file(dp, ds, &err))) fail_msg("%s", err.msg);
}

static const bf_param_info *param(const bf_model *m, const char *name)
{
    int64_t p = bf_model_find_param(m, name);
    if (p < 0) fail_msg("no parameter '%s'", name);
    return bf_model_param(m, (size_t)p);
}

static void params_have_dtypes(void **state)
{
    (void)state;
    bf_model *m = NULL;
    load("qdq_cnn_u8", &m, NULL);
    assert_int_equal(param(m, "conv1.weight_quantized")->dtype, BF_I8);
    assert_string_equal(param(m, "conv1.weight_quantized")->reader_op, "DequantizeLinear");
    assert_int_equal(param(m, "conv1.weight_scale")->dtype, BF_F32);
    assert_int_equal(param(m, "input_zp")->dtype, BF_U8);            /* a zero point: a parameter, not a default site */
    assert_int_equal(param(m, "conv1.weight_zero_point")->dtype, BF_I8);
    assert_int_equal(bf_model_find_param(m, "conv1.bias_quantized"), -1);   /* int32 bias: a constant */
    bf_model_free(m);
    load("qop_cnn_u8", &m, NULL);
    assert_string_equal(param(m, "fc.weight_quantized")->reader_op, "QLinearMatMul");
    assert_string_equal(param(m, "conv2.weight_quantized")->reader_op, "QLinearConv");
    bf_model_free(m);
    load("qint_cnn_u8", &m, NULL);
    assert_string_equal(param(m, "conv1.weight_quantized")->reader_op, "ConvInteger");
    assert_string_equal(param(m, "fc.weight_quantized")->reader_op, "MatMulInteger");
    bf_model_free(m);
}

static void flips_touch_the_stored_byte(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_plan *p = NULL;
    bf_error err = {0};
    load("qdq_mlp_s8", &m, NULL);
    assert_int_equal(bf_plan_create(m, 2, &p, &err), BF_OK);
    size_t q = (size_t)bf_model_find_param(m, "fc1.weight_quantized");
    const int8_t *w = bf_model_param(m, q)->tensor->data;
    int8_t w4 = w[4];
    float o, n;
    for (int bit = 0; bit < 8; bit++) {
        bf_bitflip f = {.param = q, .index = 4, .bit = bit};
        assert_int_equal(bf_plan_flip_bit(p, &f, &o, &n, &err), BF_OK);
        assert_true(o == (float)w4);
        assert_true(n == (float)(int8_t)(uint8_t)((uint8_t)w4 ^ (1u << bit)));
        assert_int_equal(bf_plan_flip_bit(p, &f, &o, &n, &err), BF_OK);   /* its own inverse */
        assert_true(n == (float)w4);
    }
    bf_bitflip f8 = {.param = q, .index = 4, .bit = 8};
    assert_int_equal(bf_bitflip_check(m, &f8, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "0..7"));
    float *fp;
    assert_int_equal(bf_plan_param_mut(p, q, &fp, &err), BF_EINVAL);   /* float access to int8 data refused */
    bf_plan_free(p);
    bf_model_free(m);
}

static bf_campaign_spec base_spec(void)
{
    bf_campaign_spec s = {0};
    s.seed = 7;
    s.trials = 40;
    s.target = BF_TARGET_WEIGHTS;
    s.model_kind = BF_FAULT_BITFLIP;
    s.bits = 1;
    s.critical_metric = -1;
    s.critical_delta = -1;
    s.batch = 7;
    return s;
}

static int has_site(const bf_campaign *c, const char *name)
{
    for (size_t i = 0; i < bf_campaign_num_sites(c); i++)
        if (!strcmp(bf_campaign_site(c, i)->name, name)) return 1;
    return 0;
}

static void campaign_sites(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    load("qdq_cnn_u8", &m, &ds);
    bf_campaign_spec s = base_spec();
    bf_campaign *c = tc_make(m, ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 3);   /* conv1, conv2, fc weights */
    for (size_t i = 0; i < bf_campaign_num_sites(c); i++) {
        assert_int_equal(bf_campaign_site(c, i)->bits, 8);
        assert_non_null(strstr(bf_campaign_site(c, i)->name, "weight_quantized"));
    }
    bf_campaign_free(c);

    s.zero_points = 1;
    c = tc_make(m, ds, &s);
    assert_true(has_site(c, "input_zp") && has_site(c, "act1_zp") && has_site(c, "conv1.weight_zero_point"));
    assert_true(has_site(c, "fc.weight_quantized"));
    bf_campaign_free(c);
    s.zero_points = 0;

    char *zp[] = {"input_zp"};
    s.tensors = zp;
    s.n_tensors = 1;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "zero_points"));

    char *mix[] = {"conv1.*"};   /* the int8 weight and its float scale: the integers win */
    s.tensors = mix;
    c = tc_make(m, ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 1);
    assert_string_equal(bf_campaign_site(c, 0)->name, "conv1.weight_quantized");
    bf_campaign_free(c);

    char *scales[] = {"*_scale"};   /* float tensors alone: 32 bits as before */
    s.tensors = scales;
    c = tc_make(m, ds, &s);
    assert_int_equal(bf_campaign_site(c, 0)->bits, 32);
    bf_campaign_free(c);

    s.tensors = NULL;
    s.n_tensors = 0;
    s.repr = BF_REPR_FP16;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'fp32' or 'int8'"));
    s.repr = BF_REPR_INT8;   /* the same as fp32 here: the stored integers */
    c = tc_make(m, ds, &s);
    bf_campaign_free(c);
    s.repr = BF_REPR_FP32;
    s.positions[0] = 9;
    s.n_positions = 1;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_ERANGE);
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* Every record's new value is the old integer with the mask applied to its
 * byte; per-bit counts cover bits 0..7 only. */
static void records_hold_integers(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    load("qop_cnn_u8", &m, &ds);
    bf_campaign_spec s = base_spec();
    s.sampling = BF_SAMPLE_PER_BIT;
    s.trials = 64;
    bf_campaign *c = tc_make(m, ds, &s);
    tc_recs r = {calloc(65, sizeof *r.r), 0};
    assert_non_null(r.r);
    bf_campaign_opts o = {.threads = 2, .on_trial = tc_keep, .user = &r};
    bf_campaign_result res;
    assert_int_equal(bf_campaign_run(c, &o, &res, &err), BF_OK);
    for (int64_t i = 0; i < r.n; i++) {
        const bf_applied_fault *f = &r.r[i].faults[0];
        assert_int_equal(r.r[i].n_kept, 1);
        float old = f->old_value, now = f->new_value;
        assert_true(old == floorf(old) && old >= -128 && old <= 127);
        assert_true(now == (float)(int8_t)(uint8_t)((uint8_t)(int8_t)old ^ f->mask));
        assert_true(f->mask < 256);
    }
    int64_t sum = 0;
    for (int b = 0; b < 64; b++) {
        int64_t n = 0;
        for (int k = 0; k < BF_OUTCOME_COUNT; k++) n += res.by_bit[b].n[k];
        if (b >= 8) assert_int_equal(n, 0);
        else assert_true(n > 0);
        sum += n;
    }
    assert_int_equal(sum, 64);
    bf_campaign_result_free(&res);
    free(r.r);
    bf_campaign_free(c);
    bf_dataset_free(ds);
    bf_model_free(m);
}

static int run(const char *what, const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int exact,
               tc_recs *out)
{
    bf_campaign *c = tc_make(m, ds, s);
    bf_error err = {0};
    out->r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *out->r);
    out->n = 0;
    assert_non_null(out->r);
    bf_campaign_opts o = {.threads = 2, .exact = exact, .on_trial = tc_keep, .user = out};
    bf_campaign_result res;
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s (%s): %s", what, exact ? "exact" : "differential", err.msg);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    return 1;
}

static void differential_matches_exact(void **state)
{
    (void)state;
    static double rates[] = {2e-3, 1e-2};
    struct { const char *label; bf_target target; bf_fault_model kind; bf_persistence pers; int zp, bits; } cfg[] = {
        {"int8 weights bitflip", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_PERSIST_PERMANENT, 0, 1},
        {"int8 weights 2-bit stuck_at_1", BF_TARGET_WEIGHTS, BF_FAULT_STUCK_AT_1, BF_PERSIST_PERMANENT, 0, 2},
        {"int8 weights random_value", BF_TARGET_WEIGHTS, BF_FAULT_RANDOM_VALUE, BF_PERSIST_PERMANENT, 0, 1},
        {"int8 weights ber", BF_TARGET_WEIGHTS, BF_FAULT_BER, BF_PERSIST_PERMANENT, 0, 1},
        {"int8 weights and zero points bitflip", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_PERSIST_PERMANENT, 1, 1},
        {"float activations bitflip transient", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_PERSIST_TRANSIENT, 0, 1},
    };
    tc_tally t = {0};
    for (size_t f = 0; f < sizeof fixtures / sizeof *fixtures; f++) {
        bf_model *m = NULL;
        bf_dataset *ds = NULL;
        load(fixtures[f], &m, &ds);
        double scale = tc_out_scale(m, ds);
        for (size_t k = 0; k < sizeof cfg / sizeof *cfg; k++) {
            bf_campaign_spec s = base_spec();
            s.trials = 80;
            s.target = cfg[k].target;
            s.model_kind = cfg[k].kind;
            s.persistence = cfg[k].pers;
            s.zero_points = cfg[k].zp;
            s.bits = cfg[k].bits;
            if (cfg[k].kind == BF_FAULT_BER) s.rates = rates, s.n_rates = 2, s.repeats = 40;
            tc_recs a = {0}, b = {0};
            char what[200];
            snprintf(what, sizeof what, "%s, %s", fixtures[f], cfg[k].label);
            run(what, m, ds, &s, 1, &a);
            run(what, m, ds, &s, 0, &b);
            tc_compare(fixtures[f], cfg[k].label, &a, &b, scale, &t);
            for (int64_t i = 0; i < a.n; i++) tc_assert_same_record(&a.r[i], &b.r[i]);
            free(a.r);
            free(b.r);
        }
        bf_dataset_free(ds);
        bf_model_free(m);
    }
    tc_assert_agree("quantized models: differential vs exact", &t, 1500);
    assert_int_equal(t.disagree, 0);   /* integer steps leave no ulp-level ties to round either way */
}

/* The quant ops refuse what they cannot compute with an error that names
 * the node and says what would work. */
static void op_errors(void **state)
{
    (void)state;
    bf_error err = {0};
    bf_tensor out[3];
    int64_t d23[] = {2, 3}, d3[] = {3}, d2[] = {2};
    float xs[6] = {0}, s3[3] = {1, 1, 1}, s1 = 0.5f;
    int8_t z3[3] = {0}, q6[6] = {0};
    uint8_t zu = 0;
    bf_tensor x = th_tensor_f32(xs, 2, d23), sc3 = th_tensor_f32(s3, 1, d3), sc = th_tensor_f32(&s1, 0, NULL);
    bf_tensor zp3 = th_tensor(BF_I8, z3, 1, d3), zpu = th_tensor(BF_U8, &zu, 0, NULL), q = th_tensor(BF_I8, q6, 2, d23);
    bf_tensor sc2 = th_tensor_f32(s3, 1, d2);

    /* per-axis scales came with opset 13 */
    const bf_tensor *in1[] = {&x, &sc3, &zp3};
    assert_int_equal(th_run_op("QuantizeLinear", 11, NULL, 0, in1, 3, out, 1, &err), BF_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "opset 13"));
    /* a scale that fits no axis */
    bf__attr ax0 = th_attr_int("axis", 0);
    const bf_tensor *in2[] = {&x, &sc3};
    assert_int_equal(th_run_op("QuantizeLinear", 13, &ax0, 1, in2, 2, out, 1, &err), BF_ESHAPE);
    assert_non_null(strstr(err.msg, "expected a scalar or [2]"));
    /* a zero point of another type than the data */
    const bf_tensor *in3[] = {&q, &sc, &zpu};
    assert_int_equal(th_run_op("DequantizeLinear", 13, NULL, 0, in3, 3, out, 1, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "x_zero_point is uint8 but x is int8"));
    /* float data into an integer product */
    const bf_tensor *in4[] = {&x, &q};
    assert_int_equal(th_run_op("MatMulInteger", 13, NULL, 0, in4, 2, out, 1, &err), BF_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "expected int8 or uint8"));
    /* per-column b zero point of the wrong length */
    int64_t d32[] = {3, 2};
    bf_tensor b = th_tensor(BF_I8, q6, 2, d32);
    const bf_tensor *in5[] = {&q, &b, NULL, &zp3};
    assert_int_equal(th_run_op("MatMulInteger", 13, NULL, 0, in5, 4, out, 1, &err), BF_ESHAPE);
    assert_non_null(strstr(err.msg, "one per column of B"));
    /* the QLinear forms need their zero points */
    int8_t z2[2] = {1, -1};
    bf_tensor zp2 = th_tensor(BF_I8, z2, 1, d2);
    const bf_tensor *in6[] = {&q, &sc, NULL, &b, &sc, &zp2, &sc, &zpu};
    assert_int_equal(th_run_op("QLinearMatMul", 13, NULL, 0, in6, 8, out, 1, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "required"));
    /* a working per-column product, for contrast */
    const bf_tensor *in7[] = {&q, &sc, &zp3, &b, &sc2, &zp2, &sc, &zpu};
    bf_tensor zs = th_tensor(BF_I8, z3, 0, NULL);
    in7[2] = &zs;
    assert_int_equal(th_run_op("QLinearMatMul", 13, NULL, 0, in7, 8, out, 1, &err), BF_OK);
    assert_int_equal(out[0].dtype, BF_U8);
    th_free(out, 1);
    bf_tensor *all[] = {&x, &sc3, &sc, &zp3, &zpu, &q, &sc2, &b, &zp2, &zs};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) th_tensor_free(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(op_errors),
        cmocka_unit_test(params_have_dtypes),
        cmocka_unit_test(flips_touch_the_stored_byte),
        cmocka_unit_test(campaign_sites),
        cmocka_unit_test(records_hold_integers),
        cmocka_unit_test(differential_matches_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
