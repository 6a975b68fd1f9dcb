/* test_ops_elementwise's shared fixtures (in test_ops_elementwise.c, with the runner) and the tests
 * of its parts, one subject each (the house's 900 lines: tests/arch/size_check.py). */
#ifndef BF_TESTS_UNIT_TEST_OPS_ELEMENTWISE_H
#define BF_TESTS_UNIT_TEST_OPS_ELEMENTWISE_H

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

/* the fixtures */
typedef struct shp { int nd; int64_t d[4]; } shp;

/* Broadcast pairs covering every fast path and the general walk. */
static const shp pairs[][2] = {
    {{2, {3, 4}}, {2, {3, 4}}},                 /* same shape */
    {{3, {2, 3, 5}}, {0, {0}}},                 /* scalar B */
    {{0, {0}}, {2, {4, 6}}},                    /* scalar A */
    {{1, {1}}, {3, {2, 2, 9}}},                 /* [1] */
    {{3, {2, 3, 17}}, {1, {17}}},               /* row vector */
    {{2, {17, 1}}, {2, {17, 5}}},               /* column vector */
    {{4, {2, 3, 4, 5}}, {4, {1, 3, 1, 1}}},     /* per channel */
    {{3, {3, 1, 4}}, {2, {5, 1}}},              /* both broadcast */
    {{4, {2, 1, 3, 1}}, {3, {4, 1, 6}}},        /* interleaved */
    {{3, {1, 1, 1}}, {2, {1, 1}}},              /* all ones */
    {{2, {0, 3}}, {1, {3}}},                    /* empty */
    {{1, {40}}, {1, {40}}},                     /* longer than a vector */
};
enum { N_PAIRS = sizeof pairs / sizeof pairs[0] };
bf_tensor mk(bf_dtype dt, int ndim, const int64_t *dims, const void *data);
uint64_t rnd(void);
int64_t rnd_int(int64_t lo, int64_t hi);
bf_tensor rand_int(bf_dtype dt, int ndim, const int64_t *dims, int64_t lo, int64_t hi, int nonzero);
bf_tensor rand_f32(int ndim, const int64_t *dims, float scale);
float *F(const bf_tensor *t);
int64_t *I64(const bf_tensor *t);
void run_ok(const char *op, int64_t opset, bf__attr *attrs, size_t n_attrs, const bf_tensor *const *in, int n_in, bf_tensor *out);
void run_fail(const char *op, int64_t opset, bf__attr *attrs, size_t n_attrs, const bf_tensor *const *in, int n_in, bf_status status, ...);
void expect_close(const bf_tensor *got, const bf_tensor *want, double atol, double rtol);
int64_t bidx(const bf_tensor *t, const int64_t *oidx, int ond);
void unravel(int64_t f, const int64_t *dims, int nd, int64_t *idx);
int bshape(const bf_tensor *a, const bf_tensor *b, int64_t *dims);
double get(const bf_tensor *t, int64_t i);
void set(bf_tensor *t, int64_t i, double v);

/* maps.c: unary and binary maps (Relu, ..., Add, ..., Pow) */
void unary_random(void **state);
void unary_special(void **state);
void math_sweep(void **state);
void neg_int(void **state);
void unary_errors(void **state);
void binary_random(void **state);
void binary_hand(void **state);
void pow_random(void **state);
void binary_errors(void **state);

/* select.c: Where, Clip, Softmax and Cast */
void where_random(void **state);
void where_hand(void **state);
void where_errors(void **state);
void clip_all(void **state);
void softmax_random(void **state);
void softmax_hand(void **state);
void cast_all(void **state);

/* reduce.c: the reductions and zero-size tensors */
void reduce_random(void **state);
void reduce_hand(void **state);
void reduce_middle_axis(void **state);
void reduce_errors(void **state);
void empty_tensors(void **state);

#endif
