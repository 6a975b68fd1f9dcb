/* What test_conv_pwdw.c and test_conv_stpool.c share: a graph's weights,
 * the graph packed and loaded, the inputs their plans run on, the pairs a
 * plan marked, the bit-for-bit comparison of two plans' outputs (a fused
 * plan against one that fuses nothing), and the same under value faults. Both
 * tests check pairs of steps run together (plan_impl.h, pwdw) against the
 * steps run apart, so both need exactly these; inline so that a test
 * using fewer of them builds without unused-function warnings. */
#ifndef BF_TEST_PLAN_PAIRS_H
#define BF_TEST_PLAN_PAIRS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "exec/plan_impl.h"
#include "onnx_graph.h"

/* pseudo-random weights in [-0.5, 0.5), seeded per tensor */
static inline void pp_weights(tg_graph *g, const char *name, int ndim, const int64_t *dims, uint64_t seed)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= dims[d];
    float *w = tg_alloc(g, sizeof(float) * (size_t)n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        w[i] = (float)((double)(s >> 11) * 0x1p-53 - 0.5);
    }
    tg_init_f32(g, name, ndim, dims, w);
}

/* pseudo-random inputs in [-2, 2), and specials in the first sample: NaNs
 * of two payloads, infinities, -0 (each reaches the outputs through the
 * first Conv's sums). In the first sample only: where a sample is small (a
 * real export's 3 x 40 x 40), a NaN or Inf turns its whole sample's outputs
 * NaN, and would hide any difference in that sample from the comparison. */
static inline void pp_fill(bf_plan *p)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < bf_model_num_inputs(bf_plan_model(p)); i++) {
        bf_tensor *t = bf_plan_input(p, i);
        float *x = t->data;
        for (int64_t k = 0; k < bf_tensor_numel(t); k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            x[k] = (float)((double)(s >> 11) * 0x1p-53 * 4.0 - 2.0);
        }
        int64_t per = bf_tensor_numel(t) / (t->ndim > 0 && t->dims[0] > 0 ? t->dims[0] : 1);
        if (per < 2) continue;
        uint32_t nan_p = 0x7fc00123u, nan_q = 0xffc00456u;
        memcpy(&x[100 % per], &nan_p, 4);
        memcpy(&x[2017 % per], &nan_q, 4);
        x[5000 % per] = INFINITY, x[5001 % per] = -INFINITY, x[7000 % per] = -0.0f;
    }
}

static inline void pp_run(bf_plan *p)
{
    bf_error err = {0};
    pp_fill(p);
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
}

static inline void pp_same_outputs(const bf_plan *a, const bf_plan *b, const char *what)
{
    for (size_t i = 0; i < bf_model_num_outputs(bf_plan_model(a)); i++) {
        const bf_tensor *x = bf_plan_output(a, i), *y = bf_plan_output(b, i);
        assert_int_equal(bf_tensor_nbytes(x), bf_tensor_nbytes(y));
        if (memcmp(x->data, y->data, bf_tensor_nbytes(x)) != 0) fail_msg("%s: output %zu differs", what, i);
    }
}

/* the pairs plan p marked (plan_impl.h, pwdw), each of a shape `pair`
 * (bf__conv_pwdw_pair, bf__conv_stpool_pair) takes */
static inline size_t pp_marked(const bf_plan *p, int64_t (*pair)(const bf__step *, const bf__step *))
{
    size_t n = 0;
    for (size_t i = 0; p->tab.pwdw && i < p->n_steps; i++)
        if (p->tab.pwdw[i]) {
            assert_true(pair(&p->steps[i], &p->steps[p->tab.pwdw[i]]) > 0);
            n++;
        }
    return n;
}

/* a value fault, and the pairs the fused plan still runs under it */
typedef struct pp_vfault {
    const char *value;
    size_t pairs;
} pp_vfault;

/* Each value fault of vf[0..n) in turn (sample 1, element 37, bit 30), on
 * the unfused plan a and the fused plan b: b ran vf[f].pairs pairs (*ran:
 * its count of them, where avx512 says pairs run; none elsewhere) and its
 * outputs are a's bytes. `at` names the CPU path in the messages. */
static inline void pp_faults_match(const bf_model *m, bf_plan *a, bf_plan *b, const pp_vfault *vf, size_t n,
                                   const size_t *ran, int avx512, const char *at)
{
    for (size_t f = 0; f < n; f++) {
        bf_error err = {0};
        bf_value_fault q = {.value = bf_model_find_value(m, vf[f].value), .sample = 1, .index = 37,
                            .model = BF_FAULT_BITFLIP, .mask = 1u << 30, .repr = BF_REPR_FP32};
        if (bf_plan_set_value_faults(a, &q, 1, &err) != BF_OK || bf_plan_set_value_faults(b, &q, 1, &err) != BF_OK)
            fail_msg("%s", err.msg);
        pp_run(a), pp_run(b);
        if (*ran != (avx512 ? vf[f].pairs : 0))
            fail_msg("BITFLIP_SIMD=%s, a fault on '%s': %zu pairs run, expected %zu", at, vf[f].value, *ran,
                     avx512 ? vf[f].pairs : 0);
        char what[96];
        snprintf(what, sizeof what, "BITFLIP_SIMD=%s, a fault on '%s'", at, vf[f].value);
        pp_same_outputs(a, b, what);
        if (bf_plan_set_value_faults(a, NULL, 0, &err) != BF_OK || bf_plan_set_value_faults(b, NULL, 0, &err) != BF_OK)
            fail_msg("%s", err.msg);
    }
}

#endif
