/* test_ops_linalg's shared fixtures (in test_ops_linalg.c, with the runner) and the tests
 * of its parts, one subject each (the house's 900 lines: tests/arch/size_check.py). */
#ifndef BF_TESTS_UNIT_TEST_OPS_LINALG_H
#define BF_TESTS_UNIT_TEST_OPS_LINALG_H

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
#define TOL_ATOL 1e-5
#define TOL_RTOL 1e-5

typedef struct wcfg {
    int r;                      /* spatial rank */
    int64_t in[3], k[3], s[3], d[3], pads[6];
    const char *auto_pad;       /* NULL: NOTSET */
    int ceil_mode;
} wcfg;

/* Output size and begin pad for spatial dim i, from the ONNX spec formulas. */

int64_t numel(int nd, const int64_t *d);
void expect_close(const char *op, bf__attr *attrs, size_t na, const bf_tensor *const *in, int nin, const bf_tensor *want, double atol, double rtol);
void expect_error(const char *op, bf__attr *attrs, size_t na, const bf_tensor *const *in, int nin, int nout, bf_status status, const char *needle);
void ref_out_size(const wcfg *w, int i, int64_t *out, int64_t *pb, int64_t *pe);
int set_window_attrs(const wcfg *w, bf__attr *at, int with_kernel, int with_dilations);
int next_index(int64_t *idx, const int64_t *dims, int r);

/* matmul.c: Gemm and MatMul */
void gemm_random(void **state);
void gemm_hand(void **state);
void gemm_errors(void **state);
void matmul_random(void **state);
void matmul_hand(void **state);
void matmul_errors(void **state);

/* conv.c: Conv */
void conv_random(void **state);
void conv_hand(void **state);
void conv_errors(void **state);

/* pool.c: MaxPool, AveragePool and GlobalAveragePool */
void pool_levels_same_bits(void **state);
void maxpool_levels_match_reference(void **state);
void maxpool_random(void **state);
void avgpool_random(void **state);
void pool_hand(void **state);
void pool_errors(void **state);
void gap_random(void **state);
void gap_levels_match_reference(void **state);

/* norm.c: BatchNormalization and LayerNormalization */
void bn_random(void **state);
void bn_hand_and_errors(void **state);
void bn_training(void **state);
void ln_random(void **state);
void ln_hand_and_errors(void **state);
void ln_levels_match_reference(void **state);

#endif
