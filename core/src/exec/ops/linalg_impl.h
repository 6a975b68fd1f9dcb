/* The linear-algebra family's entry points, shared between its files; the
 * table that registers them is in linalg.c. */
#ifndef BF_LINALG_IMPL_H
#define BF_LINALG_IMPL_H

#include "exec/op.h"

/* linalg_conv.c */
bf_status bf__conv_prepare(bf__prep *p, bf_error *err);
bf_status bf__conv_run(const bf__ctx *c, bf_error *err);
/* linalg_pool.c */
bf_status bf__maxpool_prepare(bf__prep *p, bf_error *err);
bf_status bf__avgpool_prepare(bf__prep *p, bf_error *err);
bf_status bf__pool_run(const bf__ctx *c, bf_error *err);
bf_status bf__gap_prepare(bf__prep *p, bf_error *err);
bf_status bf__gap_run(const bf__ctx *c, bf_error *err);
bf_status bf__gmp_run(const bf__ctx *c, bf_error *err);   /* with bf__gap_prepare */

/* linalg_norm.c */
bf_status bf__batchnorm_prepare(bf__prep *p, bf_error *err);
bf_status bf__batchnorm_run(const bf__ctx *c, bf_error *err);
/* The double a PyTorch module held for a float attribute its exporter
 * wrote (eps, momentum): the shortest decimal that rounds to the float. */
double bf__torch_double(float f);
bf_status bf__layernorm_prepare(bf__prep *p, bf_error *err);
bf_status bf__layernorm_run(const bf__ctx *c, bf_error *err);
/* Mean and (biased) variance of x[0, len), in float, overflowing to Inf
 * and NaN exactly where PyTorch's CPU LayerNorm/GroupNorm statistics do
 * (see linalg_norm.c). */
void bf__row_moments(const float *x, int64_t len, float *mean, float *var);
/* the nn family's normalisations, registered in nn.c */
bf_status bf__instnorm_prepare(bf__prep *p, bf_error *err);
bf_status bf__instnorm_run(const bf__ctx *c, bf_error *err);
bf_status bf__groupnorm_prepare(bf__prep *p, bf_error *err);
bf_status bf__groupnorm_run(const bf__ctx *c, bf_error *err);
bf_status bf__lpnorm_prepare(bf__prep *p, bf_error *err);
bf_status bf__lpnorm_run(const bf__ctx *c, bf_error *err);

/* nn_convtranspose.c */
bf_status bf__convt_prepare(bf__prep *p, bf_error *err);
bf_status bf__convt_run(const bf__ctx *c, bf_error *err);

/* nn_einsum.c */
bf_status bf__einsum_prepare(bf__prep *p, bf_error *err);
bf_status bf__einsum_run(const bf__ctx *c, bf_error *err);

#endif
