/* test_ops_shape's shared fixtures (in test_ops_shape.c, with the runner) and the tests
 * of its parts, one subject each (the house's 900 lines: tests/arch/size_check.py). */
#ifndef BF_TESTS_UNIT_TEST_OPS_SHAPE_H
#define BF_TESTS_UNIT_TEST_OPS_SHAPE_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../op_harness.h"

/* the fixtures */
static const bf_dtype all_dtypes[] = {BF_F32, BF_I64, BF_I32, BF_BOOL};
uint64_t rng(void);
int64_t rand_in(int64_t lo, int64_t hi);
bf_tensor mk(bf_dtype dt, int ndim, const int64_t *dims);
bf_tensor rnd(bf_dtype dt, int ndim, const int64_t *dims);
bf_tensor ints(int n, const int64_t *v);
void rand_dims(int ndim, int64_t lo, int64_t hi, int64_t *dims);
void unravel(int64_t flat, int ndim, const int64_t *dims, int64_t *idx);
int64_t ravel(int ndim, const int64_t *dims, const int64_t *idx);
void copy_elem(bf_tensor *out, int64_t o, const bf_tensor *in, int64_t i);
void expect_same(const bf_tensor *got, const bf_tensor *want);
void expect_dims(const bf_tensor *t, int ndim, const int64_t *dims);
void expect_error(const char *op, int64_t opset, bf__attr *attrs, size_t na, const bf_tensor *const *in, int n_in, int n_out, bf_status want, ...);
void run_ok(const char *op, int64_t opset, bf__attr *attrs, size_t na, const bf_tensor *const *in, int n_in, bf_tensor *out, int n_out);

/* values.c: Shape, Constant, ConstantOfShape, Identity and Dropout */
void shape_op(void **state);
void constant_op(void **state);
void constant_of_shape_op(void **state);
void identity_op(void **state);
void dropout_op(void **state);

/* reshape.c: Flatten, Reshape, Squeeze, Unsqueeze and Transpose */
void flatten_op(void **state);
void reshape_op(void **state);
void squeeze_unsqueeze_ops(void **state);
void transpose_op(void **state);

/* select.c: Concat, Gather, Slice and Expand */
void concat_op(void **state);
void gather_op(void **state);
void slice_op(void **state);
void expand_op(void **state);

#endif
