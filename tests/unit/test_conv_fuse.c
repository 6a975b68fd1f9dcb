/* A plan that fuses a Conv's only Relu, Clip or HardSwish (and a BatchNormalization or a
 * residual Add before it) into the Conv's epilogue
 * (bf_plan_opts.fuse_activations, core/src/exec/plan.c) gives the outputs
 * and every other activation of a plan that does not, bit for bit, and
 * fuses exactly the pairs it may:
 *
 *   - tests/fixtures/fuse/conv_fuse.onnx (tests/fixtures/make_conv_fuse.py):
 *     four pairs over the Conv paths (padded-plane product + Relu, 1x1 +
 *     Clip(0, 6), depthwise + Clip(min), stride 2 column matrix without a
 *     bias + Clip(max)), a fifth whose Clip bound is computed at run time
 *     (before the Conv), and two Convs whose output has to exist: read by a
 *     Relu and an Add, and a graph output. The fused Convs' own outputs are
 *     never written (they keep the zeros the arena started with), the other
 *     two are.
 *   - a value fault on a Conv's output makes that pair run unfused (the
 *     fault is seen, the outputs are the unfused plan's under the same
 *     fault); one on the activation's output leaves it fused.
 *   - a shared arena (bitflip eval's plans) with fusion, where a pair's two
 *     values share their bytes: the same outputs, fused and (under a fault
 *     on the Conv's output) unfused.
 *   - tests/fixtures/fuse/conv_residual.onnx (same generator): residual
 *     Adds, Conv -> Add(other) -> Relu/Clip and Conv -> Add alone, with the
 *     Conv's output as the Add's A and as its B, a downsampling block's
 *     order (the first Conv not fused, the second is), and the refusals (a
 *     broadcast Add; an Add output read twice keeps its activation apart);
 *     the same bits on inputs holding NaNs of two payloads, infinities and
 *     -0 (checked to reach the outputs), and under value faults.
 *   - tests/fixtures/fuse/conv_bn.onnx (same generator): BatchNormalization
 *     kept after the Convs: Conv -> BN -> Relu, -> HardSwish (opset 13's
 *     HardSigmoid * x, fused at load), -> Add alone, -> Clip(0, 6), -> Add
 *     -> Relu, and BN alone (its output read twice); the same bits on the
 *     special inputs, under value faults on each value of a chain (those
 *     before its last step make it run unfused), and under weight faults in
 *     the BN's scale, bias, mean and variance and in a Conv's weight, each
 *     moving the outputs (the fused epilogue reads the faulted parameter).
 *   - one output channel of each fused chain of the three fixtures
 *     (bf__plan_fused_channel: the one-channel product, then the epilogue
 *     on that channel, as a detector's checkpoint trials run a Conv whose
 *     faults lie in one channel) over the golden output gives the whole
 *     fused run's bits under the same weight fault, specials included.
 *   - real exports (resnet_basic, mobilenet_v2, mnasnet): as many fusions
 *     as the graphs have Conv -> Relu/Clip edges and Conv -> same-shape Add
 *     (-> Relu) runs with no other reader of the Conv's output and the Add's
 *     other operand computed before the Conv (counted from the ONNX files
 *     with onnx: 4 + 3, 13 + 2 and 35 + 10), same outputs.
 *
 * The Conv paths themselves against a plain reference with each activation:
 * test_conv_exact.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "exec/step_access.h"
#include "model/graph.h"
#include "onnx_graph.h"

#define BATCH 3

static bf_model *load(const char *path)
{
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_file(path, &m, &err) != BF_OK) fail_msg("%s", err.msg);
    return m;
}

/* The same pseudo-random inputs in [-2, 2) for every plan, before every
 * run: a shared arena may reuse an input's bytes once its last reader ran. */
static void fill(const bf_model *m, bf_plan *p)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < bf_model_num_inputs(m); i++) {
        bf_tensor *t = bf_plan_input(p, i);
        assert_int_equal(t->dtype, BF_F32);
        float *x = t->data;
        for (int64_t k = 0; k < bf_tensor_numel(t); k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            x[k] = (float)((double)(s >> 11) * 0x1p-53 * 4.0 - 2.0);
        }
    }
}

static bf_plan *plan(const bf_model *m, int fuse, int share) { return tg_plan(m, BATCH, fuse, share); }

static void run(bf_plan *p)
{
    bf_error err = {0};
    fill(bf_plan_model(p), p);
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
}

static int same(const bf_plan *a, const bf_plan *b, int64_t v)
{
    const bf_tensor *x = bf_plan_value(a, v), *y = bf_plan_value(b, v);
    return bf_tensor_nbytes(x) == bf_tensor_nbytes(y) && memcmp(x->data, y->data, bf_tensor_nbytes(x)) == 0;
}

static void same_outputs(const bf_model *m, const bf_plan *a, const bf_plan *b, const char *what)
{
    for (size_t i = 0; i < bf_model_num_outputs(m); i++) {
        const bf_tensor *x = bf_plan_output(a, i), *y = bf_plan_output(b, i);
        assert_int_equal(bf_tensor_nbytes(x), bf_tensor_nbytes(y));
        if (memcmp(x->data, y->data, bf_tensor_nbytes(x)) != 0) fail_msg("%s: output %zu differs", what, i);
    }
}

static int64_t value(const bf_model *m, const char *name)
{
    int64_t v = bf_model_find_value(m, name);
    if (v < 0) fail_msg("no value '%s'", name);
    return v;
}

static void fixture_pairs(void **state)
{
    (void)state;
    bf_model *m = load(BF_FIXTURES "/fuse/conv_fuse.onnx");
    bf_plan *a = plan(m, 0, 0), *b = plan(m, 1, 0), *c = plan(m, 1, 1);
    run(a), run(b), run(c);
    size_t sites = 0;
    assert_int_equal(bf_plan_num_fused(a, &sites), 0);   /* not asked */
    assert_int_equal(sites, 5);
    assert_int_equal(bf_plan_num_fused(b, &sites), 5);
    assert_int_equal(sites, 5);
    assert_int_equal(bf_plan_num_fused(c, NULL), 5);
    same_outputs(m, a, b, "fused");
    same_outputs(m, a, c, "fused, shared arena");

    /* every value the same but the fused Convs' own outputs, never written */
    static const char *const fused_away[] = {"c1", "c2", "c3", "c4", "c7"};
    for (size_t i = 0; i < m->n_values; i++) {
        const char *name = m->values[i].name;
        int away = 0;
        for (size_t k = 0; k < 5; k++) away |= strcmp(name, fused_away[k]) == 0;
        if (m->values[i].kind != BF__VAL_NODE || !bf_plan_value(a, (int64_t)i)->data) continue;
        if (away) {
            if (same(a, b, (int64_t)i)) fail_msg("'%s' was computed: its Conv did not run fused", name);
        } else if (!same(a, b, (int64_t)i)) {
            fail_msg("'%s' differs between the fused and the unfused plan", name);
        }
    }
    /* the two that must exist: read twice (c5), a graph output (pre) */
    assert_true(same(a, b, value(m, "c5")));
    assert_true(same(a, b, value(m, "pre")));

    /* a fault on a fused Conv's output: that pair runs unfused, the fault lands */
    bf_error err = {0};
    for (int k = 0; k < 2; k++) {
        const char *at = k == 0 ? "c1" : "r1";
        bf_value_fault f = {.value = value(m, at), .sample = 1, .index = 37, .model = BF_FAULT_BITFLIP,
                            .mask = 1u << 30, .repr = BF_REPR_FP32};
        if (bf_plan_set_value_faults(a, &f, 1, &err) != BF_OK || bf_plan_set_value_faults(b, &f, 1, &err) != BF_OK ||
            bf_plan_set_value_faults(c, &f, 1, &err) != BF_OK)
            fail_msg("%s", err.msg);
        run(a), run(b), run(c);
        assert_int_equal(bf_plan_num_fused(b, NULL), k == 0 ? 4 : 5);
        assert_int_equal(bf_plan_num_fused(c, NULL), k == 0 ? 4 : 5);
        same_outputs(m, a, b, at);
        same_outputs(m, a, c, at);   /* shared arena: the unfused Relu runs in place */
        float oa, na, ob, nb;
        bf_plan_value_fault_seen(a, 0, &oa, &na);
        bf_plan_value_fault_seen(b, 0, &ob, &nb);
        assert_false(isnan(oa));
        assert_true(oa == ob && na == nb);
        assert_true(na != oa);
    }
    if (bf_plan_set_value_faults(b, NULL, 0, &err) != BF_OK) fail_msg("%s", err.msg);
    run(b);
    assert_int_equal(bf_plan_num_fused(b, NULL), 5);
    bf_plan_free(a), bf_plan_free(b), bf_plan_free(c);
    bf_model_free(m);
}

/* Input x of conv_residual.onnx with special values placed: NaNs of two
 * payloads (an Add of two NaNs keeps its A's, so the operand order shows),
 * infinities, and one position holding -0 in channel 0 and tiny positive
 * values in the others: d6's weights (-1e-30) give products that round to
 * -0, its bias is -0, so d6 + x there is -0 + -0 and Relu passes -0. */
static void specials(bf_plan *p)
{
    fill(bf_plan_model(p), p);
    bf_tensor *t = bf_plan_input(p, 0);
    float *x = t->data;
    const int64_t plane = 49, img = 4 * plane;
    uint32_t nan_p = 0x7fc00123u, nan_q = 0xffc00456u;
    memcpy(&x[0 * plane + 3], &nan_p, 4);
    memcpy(&x[1 * plane + 3], &nan_q, 4);
    memcpy(&x[2 * plane + 20], &nan_q, 4);
    x[img + 0 * plane + 10] = INFINITY;
    x[img + 1 * plane + 11] = -INFINITY;
    x[img + 2 * plane + 12] = -INFINITY;
    for (int c = 0; c < 4; c++) x[2 * img + c * plane + 30] = c == 0 ? -0.0f : 1e-20f;
    x[2 * img + 3 * plane + 31] = -0.0f;
}

/* Bit 30 of element 37 of sample 1 of value `at` flipped in the unfused plan
 * a and the fused b and c; all three run; b and c fuse `fused` steps (a
 * fault on a chain's inner value runs that chain unfused) and every output
 * is a's, bit for bit. */
static void value_fault_run(const bf_model *m, bf_plan *a, bf_plan *b, bf_plan *c, const char *at, size_t fused)
{
    bf_error err = {0};
    bf_value_fault f = {.value = value(m, at), .sample = 1, .index = 37, .model = BF_FAULT_BITFLIP,
                        .mask = 1u << 30, .repr = BF_REPR_FP32};
    if (bf_plan_set_value_faults(a, &f, 1, &err) != BF_OK || bf_plan_set_value_faults(b, &f, 1, &err) != BF_OK ||
        bf_plan_set_value_faults(c, &f, 1, &err) != BF_OK)
        fail_msg("%s", err.msg);
    run(a), run(b), run(c);
    if (bf_plan_num_fused(b, NULL) != fused || bf_plan_num_fused(c, NULL) != fused)
        fail_msg("a fault on '%s': %zu fused, expected %zu", at, bf_plan_num_fused(b, NULL), fused);
    same_outputs(m, a, b, at);
    same_outputs(m, a, c, at);
}

static void run_specials(bf_plan *p)
{
    bf_error err = {0};
    specials(p);
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
}

/* every value of the unfused plan a in plan b, but those a fused run never
 * writes (and d4, d5: one of the two, checked apart; d6) */
static void same_values(const bf_model *m, const bf_plan *a, const bf_plan *b, const char *const *away, size_t n_away,
                        const char *what)
{
    for (size_t i = 0; i < m->n_values; i++) {
        const char *name = m->values[i].name;
        int skip = 0;
        for (size_t k = 0; k < n_away; k++) skip |= strcmp(name, away[k]) == 0;
        if (m->values[i].kind != BF__VAL_NODE || !bf_plan_value(a, (int64_t)i)->data) continue;
        /* d6 is zeros whether written or not (the arena starts so) */
        if (strcmp(name, "d4") == 0 || strcmp(name, "d5") == 0 || strcmp(name, "d6") == 0) continue;
        if (skip) {
            if (same(a, b, (int64_t)i)) fail_msg("%s: '%s' was computed: its Conv did not run fused", what, name);
        } else if (!same(a, b, (int64_t)i)) {
            fail_msg("%s: '%s' differs between the fused and the unfused plan", what, name);
        }
    }
}

/* The unfused plan a and the fused b and c (c in a shared arena) run
 * golden: a fuses nothing but finds n_sites places to, b and c fuse them
 * all, and every output and every value but those fusion keeps away is
 * a's, bit for bit. */
static void golden_fused(const bf_model *m, bf_plan *a, bf_plan *b, bf_plan *c, size_t n_sites,
                         const char *const *away, size_t n_away, const char *what)
{
    char label[96];
    size_t sites = 0;
    run(a), run(b), run(c);
    assert_int_equal(bf_plan_num_fused(a, &sites), 0);
    assert_int_equal(sites, n_sites);
    assert_int_equal(bf_plan_num_fused(b, NULL), n_sites);
    assert_int_equal(bf_plan_num_fused(c, NULL), n_sites);
    same_outputs(m, a, b, what);
    snprintf(label, sizeof label, "%s, shared arena", what);
    same_outputs(m, a, c, label);
    same_values(m, a, b, away, n_away, what);
}

static void residual_adds(void **state)
{
    (void)state;
    bf_model *m = load(BF_FIXTURES "/fuse/conv_residual.onnx");
    bf_plan *a = plan(m, 0, 0), *b = plan(m, 1, 0), *c = plan(m, 1, 1);
    static const char *const away[] = {"d1", "a1", "d2", "a2", "d3", "a5", "d6", "a6", "d8"};
    const size_t n_away = sizeof away / sizeof *away;
    /* d1, d2, d3 (Add alone), d5, d6, d8 (Add alone); not d4 nor d7 */
    golden_fused(m, a, b, c, 6, away, n_away, "residual");
    /* the Conv not fused wrote its output; of d4 and d5 (the two sides of
     * a5), the one the plan runs first is not fused (the other side is not
     * computed yet then), the second is */
    assert_true(same(a, b, value(m, "d7")));
    assert_int_equal(same(a, b, value(m, "d4")) + same(a, b, value(m, "d5")), 1);

    /* NaN of two payloads, infinities, -0: the same bits; and the unfused
     * plan shows them, so the case tests what it says */
    run_specials(a), run_specials(b), run_specials(c);
    assert_int_equal(bf_plan_num_fused(b, NULL), 6);
    same_outputs(m, a, b, "specials");
    same_outputs(m, a, c, "specials, shared arena");
    same_values(m, a, b, away, n_away, "specials");
    const float *s6 = bf_plan_value(a, value(m, "s6"))->data, *s1 = bf_plan_value(a, value(m, "s1"))->data;
    const bf_tensor *st = bf_plan_value(a, value(m, "s6"));
    int nans = 0, negz = 0, nan_q = 0;
    for (int64_t k = 0; k < bf_tensor_numel(st); k++) {
        uint32_t u;
        memcpy(&u, &s6[k], 4);
        nans += isnan(s6[k]), negz += u == 0x80000000u;
        memcpy(&u, &s1[k], 4);
        nan_q += u == 0xffc00456u;
    }
    print_message("specials: %d NaN and %d -0 in s6, %d NaN of payload Q in s1\n", nans, negz, nan_q);
    assert_true(nans > 0);
    assert_true(negz > 0);
    assert_true(nan_q > 0);

    /* a fault on a fused Conv's output or on the Add between: those three run
     * unfused; on the activation's output or on an Add fused alone: fused */
    static const struct {
        const char *at;
        size_t fused;
    } faults[] = {{"d1", 5}, {"a1", 5}, {"s1", 6}, {"a3", 6}, {"a5", 5}, {"a8", 6}};
    for (size_t k = 0; k < sizeof faults / sizeof *faults; k++) {
        value_fault_run(m, a, b, c, faults[k].at, faults[k].fused);
        float oa, na, ob, nb;
        bf_plan_value_fault_seen(a, 0, &oa, &na);
        bf_plan_value_fault_seen(b, 0, &ob, &nb);
        assert_false(isnan(oa));
        /* bitwise: the flip of bit 30 makes a NaN of a value in [1, 2) */
        if (memcmp(&oa, &ob, 4) != 0 || memcmp(&na, &nb, 4) != 0)
            fail_msg("a fault on '%s': seen %g -> %g unfused, %g -> %g fused", faults[k].at, oa, na, ob, nb);
    }
    bf_plan_free(a), bf_plan_free(b), bf_plan_free(c);
    bf_model_free(m);
}

/* Parameter i of m flipped at element k (bit b) in plan p's own copy. */
static void flip_param(const bf_model *m, bf_plan *p, const char *name, int64_t k, int b)
{
    bf_error err = {0};
    float *d = NULL;
    int64_t i = bf_model_find_param(m, name);
    if (i < 0) fail_msg("no parameter '%s'", name);
    if (bf_plan_param_mut(p, (size_t)i, &d, &err) != BF_OK) fail_msg("%s", err.msg);
    uint32_t u;
    memcpy(&u, &d[k], 4);
    u ^= 1u << b;
    memcpy(&d[k], &u, 4);
}

static void batchnorm_chains(void **state)
{
    (void)state;
    bf_model *m = load(BF_FIXTURES "/fuse/conv_bn.onnx");
    bf_plan *a = plan(m, 0, 0), *b = plan(m, 1, 0), *c = plan(m, 1, 1);
    /* the values a fused run never writes: every Conv's, and the BN's and
     * the Add's before the last step of its chain */
    static const char *const away[] = {"e1", "n1", "e2", "n2", "e3", "n3", "e4", "n4", "e5", "e6", "n6", "a6", "e7"};
    const size_t n_away = sizeof away / sizeof *away;
    /* e1..e7: BN -> Relu, HardSwish, Add alone, Clip, alone, Add -> Relu, alone */
    golden_fused(m, a, b, c, 7, away, n_away, "batchnorm");
    /* a BN last (e5's, e7's: read twice) is written, by its Conv */
    assert_true(same(a, b, value(m, "b5")));
    assert_true(same(a, b, value(m, "n7")));

    /* NaN of two payloads, infinities, -0 in the input: the same bits */
    run_specials(a), run_specials(b), run_specials(c);
    same_outputs(m, a, b, "batchnorm specials");
    same_outputs(m, a, c, "batchnorm specials, shared arena");
    same_values(m, a, b, away, n_away, "batchnorm specials");
    const bf_tensor *h1 = bf_plan_value(a, value(m, "h1"));
    int nans = 0;
    for (int64_t k = 0; k < bf_tensor_numel(h1); k++) nans += isnan(((const float *)h1->data)[k]);
    assert_true(nans > 0);   /* the specials reach the first chain's output */

    /* value faults: on a Conv's output or a BN's or Add's before the last
     * step, that chain runs unfused; on a chain's last output, fused */
    static const struct {
        const char *at;
        size_t fused;
    } faults[] = {{"e1", 6}, {"n1", 6}, {"h1", 7}, {"n2", 6}, {"h2", 7}, {"b5", 7}, {"n6", 6}, {"a6", 6}, {"h6", 7}};
    bf_error err = {0};
    for (size_t k = 0; k < sizeof faults / sizeof *faults; k++) {
        value_fault_run(m, a, b, c, faults[k].at, faults[k].fused);
    }
    if (bf_plan_set_value_faults(a, NULL, 0, &err) != BF_OK || bf_plan_set_value_faults(b, NULL, 0, &err) != BF_OK ||
        bf_plan_set_value_faults(c, NULL, 0, &err) != BF_OK)
        fail_msg("%s", err.msg);

    /* weight faults in the BN's parameters and in a Conv's weight, in each
     * plan's own copy: the fused epilogue reads the faulted values (an
     * exponent bit makes a scale, a bias or a mean huge, a variance huge or
     * its sign negative: sqrt gives NaN), and the outputs move */
    run(a);
    const bf_tensor *o = bf_plan_output(a, 0);
    float *golden = malloc(bf_tensor_nbytes(o));
    assert_non_null(golden);
    memcpy(golden, o->data, bf_tensor_nbytes(o));
    static const struct {
        const char *param;
        int64_t k;
        int bit;
    } wf[] = {{"bn1_s", 2, 30}, {"bn2_v", 1, 31}, {"bn4_m", 3, 30}, {"bn6_b", 0, 29},
              {"bn5_v", 2, 30}, {"bn3_s", 4, 31}, {"w2", 7, 30}};
    for (size_t k = 0; k < sizeof wf / sizeof *wf; k++) {
        flip_param(m, a, wf[k].param, wf[k].k, wf[k].bit);
        flip_param(m, b, wf[k].param, wf[k].k, wf[k].bit);
        flip_param(m, c, wf[k].param, wf[k].k, wf[k].bit);
        run(a), run(b), run(c);
        assert_int_equal(bf_plan_num_fused(b, NULL), 7);
        same_outputs(m, a, b, wf[k].param);
        same_outputs(m, a, c, wf[k].param);
        o = bf_plan_output(a, 0);
        if (memcmp(o->data, golden, bf_tensor_nbytes(o)) == 0) fail_msg("a fault in '%s' moved no output", wf[k].param);
        /* flipped back: the golden outputs again */
        flip_param(m, a, wf[k].param, wf[k].k, wf[k].bit);
        flip_param(m, b, wf[k].param, wf[k].k, wf[k].bit);
        flip_param(m, c, wf[k].param, wf[k].k, wf[k].bit);
    }
    run(b);
    if (memcmp(bf_plan_output(b, 0)->data, golden, bf_tensor_nbytes(o)) != 0) fail_msg("not golden after the flips back");
    free(golden);
    bf_plan_free(a), bf_plan_free(b), bf_plan_free(c);
    bf_model_free(m);
}

/* a and b the same bits, but that where both hold a NaN its payload may
 * differ (loose): which NaN survives where two meet in a sum is the
 * compiler's operand order, which an unoptimised build changes between the
 * whole-step and one-channel loops (the release build gives the same bits) */
static int same_bits(const void *a, const void *b, size_t nb, int loose)
{
    if (!loose) return memcmp(a, b, nb) == 0;
    const float *x = a, *y = b;
    for (size_t e = 0; e < nb / sizeof *x; e++)
        if (memcmp(&x[e], &y[e], sizeof *x) != 0 && !(isnan(x[e]) && isnan(y[e]))) return 0;
    return 1;
}

/* One output channel of a fused chain (bf__plan_fused_channel, the
 * checkpoint trials' path for a Conv whose faults lie in one channel,
 * exec/ckpt_chan.c): with one weight of channel ch flipped, the chain's
 * last output recomputed on that channel over its golden bytes equals the
 * whole fused run's under the same fault, every byte, for every fused Conv
 * of the three fixtures (Relu, Clip, HardSwish, BN, residual Add as A and
 * as B, an Add or a BN last), plain inputs and (conv_residual, conv_bn)
 * NaNs, infinities and -0 (there any NaN for a NaN: same_bits); and the
 * exponent flip moved the channel. */
static void chain_channels(const char *name, int special)
{
    char path[512];
    snprintf(path, sizeof path, "%s/fuse/%s.onnx", BF_FIXTURES, name);
    bf_model *m = load(path);
    bf_plan *b = plan(m, 1, 0);
    bf_error err = {0};
    size_t chains = 0, moved = 0;
    for (size_t i = 0; i < b->n_steps; i++) {
        int bn, add, r = bf__plan_fused_last(b, i, &bn, &add);
        int64_t c, mo, isp, osp;
        if (!r || !bf__conv_shape(&b->steps[i], &c, &mo, &isp, &osp)) continue;
        int wv = b->steps[i].node->in[1];
        assert_int_equal(m->values[wv].kind, BF__VAL_PARAM);
        const char *wname = m->params[m->values[wv].index].tensor->name;
        int64_t kc = bf_tensor_numel(&b->vals[wv]) / mo;
        bf_tensor *y = &b->vals[b->steps[r].node->out[0]];
        size_t nb = bf_tensor_nbytes(y);
        unsigned char *golden = malloc(nb), *whole = malloc(nb);
        assert_true(golden && whole);
        const int64_t chs[] = {0, mo / 2, mo - 1};
        const int bits[] = {30, 22};
        for (int t = 0; t < 3; t++)
            for (int bi = 0; bi < 2; bi++) {
                if (special) specials(b);
                else fill(m, b);
                if (bf_plan_run(b, &err) != BF_OK) fail_msg("%s", err.msg);
                memcpy(golden, y->data, nb);
                int64_t k = chs[t] * kc + (kc > 1 ? kc / 2 : 0);
                flip_param(m, b, wname, k, bits[bi]);
                if (special) specials(b);
                else fill(m, b);
                if (bf_plan_run(b, &err) != BF_OK) fail_msg("%s", err.msg);
                memcpy(whole, y->data, nb);
                memcpy(y->data, golden, nb);
                if (bf__plan_fused_channel(b, i, chs[t]) != r) fail_msg("%s: step %zu ran no channel", name, i);
                if (!same_bits(y->data, whole, nb, special))
                    fail_msg("%s: %s channel %lld: the one-channel chain differs from the whole run", name, wname,
                             (long long)chs[t]);
                moved += memcmp(golden, whole, nb) != 0;
                flip_param(m, b, wname, k, bits[bi]);
            }
        free(golden), free(whole);
        chains++;
    }
    assert_true(chains >= 4);
    assert_true(moved > 0);
    print_message("%s%s: %zu fused Convs, channel by channel the whole run's bits (%zu faults moved them)\n", name,
                  special ? " (specials)" : "", chains, moved);
    bf_plan_free(b);
    bf_model_free(m);
}

static void one_channel_of_a_chain(void **state)
{
    (void)state;
    chain_channels("conv_fuse", 0);
    chain_channels("conv_residual", 0);
    chain_channels("conv_residual", 1);
    chain_channels("conv_bn", 0);
    chain_channels("conv_bn", 1);
}

static void real_exports(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t pairs;
    } nets[] = {{"resnet_basic", 7}, {"mobilenet_v2", 15}, {"mnasnet", 45}};
    for (size_t i = 0; i < sizeof nets / sizeof *nets; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/real/%s.onnx", BF_FIXTURES, nets[i].name);
        bf_model *m = load(path);
        bf_plan *a = plan(m, 0, 0), *b = plan(m, 1, 1);
        run(a), run(b);
        size_t sites = 0;
        if (bf_plan_num_fused(b, &sites) != nets[i].pairs || sites != nets[i].pairs)
            fail_msg("%s: %zu fused of %zu, the graph has %zu pairs", nets[i].name, bf_plan_num_fused(b, NULL), sites,
                     nets[i].pairs);
        same_outputs(m, a, b, nets[i].name);
        print_message("%s: %zu activations fused, outputs the same bits\n", nets[i].name, sites);
        bf_plan_free(a), bf_plan_free(b);
        bf_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixture_pairs),
        cmocka_unit_test(residual_adds),
        cmocka_unit_test(batchnorm_chains),
        cmocka_unit_test(one_channel_of_a_chain),
        cmocka_unit_test(real_exports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
