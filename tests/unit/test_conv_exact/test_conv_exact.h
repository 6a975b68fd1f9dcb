/* test_conv_exact's shared fixtures (in test_conv_exact.c, with the runner:
 * the cases, their inputs and reference outputs, the activations) and the
 * tests of its parts, one subject each (the house's 900 lines:
 * tests/arch/size_check.py). */
#ifndef BF_TESTS_UNIT_TEST_CONV_EXACT_H
#define BF_TESTS_UNIT_TEST_CONV_EXACT_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../op_harness.h"

typedef struct conv_case {
    const char *what;
    int64_t n, c, h, w, m, group, kh, kw, s, d, pads[4];  /* pads: top, left, bottom, right */
    int bias;
    /* 1: weight 0 is +Inf (a padding tap skipped keeps the border finite,
     * 0 * Inf would not). 2: the input -1e-30 everywhere and the weights
     * positive and under 1e-19, so every product rounds to -0 (a chain
     * from +0 is -0 only so), every sum of the inside taps is -0 and a
     * padding tap's +0 makes it +0; the bias -0 in every other row (+0 +
     * -0 is +0, -0 + -0 is -0: the one bias for which a kernel that leaves
     * the padding taps out, linalg_conv_bcast.c, would differ). 3: the same
     * with every bias +0 (the taps may be left out: -0 + +0 and +0 + +0 are
     * both +0). */
    int special;
} conv_case;

/* A case's inputs and its reference output (no activation), made once and
 * checked against every CPU path and activation: the reference does not
 * depend on either, and computing it again for each of the 24 was most of
 * this test's time (plain C, and at -O1 under the sanitizers: 40.4 CPU-s
 * under ASan before, 7.8 after; tests/README.md, "The sixth round"). */
typedef struct prepared {
    const conv_case *k;
    bf_tensor x, wt, b;
    float *ref;
    int64_t oh, ow, numel;
} prepared;

/* A case's Conv attributes (kernel_shape, strides, dilations, pads,
 * group) in a, which points into the struct: fill it where it stays. */
typedef struct case_attrs {
    int64_t ks[2], st[2], dl[2];
    bf__attr a[5];
} case_attrs;
void case_attrs_of(const conv_case *k, case_attrs *ca);
/* What a case's runs take: its attributes, its inputs (pointing into *p:
 * fill it where p stays), their count and the output's dims. */
typedef struct case_run {
    case_attrs ca;
    const bf_tensor *in[3];
    int nin;
    int64_t od[4];
} case_run;
void case_run_of(const prepared *p, case_run *cr);

extern const conv_case cases[];
extern const size_t n_cases;
/* case i's inputs and reference, made on first use */
prepared case_get(size_t i);

/* The activations (Relu, Clip(-0.2, 0.3), Clip(min 0.1), Clip(max -0.05),
 * Clip(0.5, -0.5), HardSwish) and the reference's activation of v */
extern const bf__act acts[];
extern const size_t n_acts;
float ref_act(const bf__act *a, float v);
/* under the sanitizers, half of case i's runs at CPU path l and form j */
int half_here(size_t i, int l, int j);

/* the parts' tests */
void conv_packed_weights_match_reference(void **state);   /* packed.c */
void conv_dw8_takes_its_shapes(void **state);             /* dw8.c */
void conv_dw8_without_memory_leaves_y(void **state);      /* dw8.c */
void conv_dwc8_takes_its_shapes(void **state);            /* dw8.c */
void conv_dwc8_runs_whole_blocks(void **state);           /* dw8.c */
void conv_pw_images_by_level(void **state);               /* dw8.c */
void conv_positions_match_reference(void **state);        /* cpos.c */

#endif
