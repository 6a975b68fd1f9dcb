/* The elementwise family's entry points defined in elementwise_broadcast.c,
 * shared with elementwise.c, which holds the table that registers them. */
#ifndef BF_ELEMENTWISE_IMPL_H
#define BF_ELEMENTWISE_IMPL_H

#include "exec/op.h"

bf_status bf__binary_prepare(bf__prep *p, bf_error *err);
bf_status bf__binary_run(const bf__ctx *c, bf_error *err);
bf_status bf__where_prepare(bf__prep *p, bf_error *err);
bf_status bf__where_run(const bf__ctx *c, bf_error *err);
bf_status bf__reduce_prepare(bf__prep *p, bf_error *err);
bf_status bf__reduce_run(const bf__ctx *c, bf_error *err);
/* Sum of floats accumulated in double (reductions, softmax denominators). */
double bf__sum_f32_dacc(const float *x, int64_t n);
float bf__max_f32(const float *x, int64_t n, float init);

#endif
