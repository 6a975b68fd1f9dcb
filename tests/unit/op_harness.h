/* Runs one op in isolation, the way a plan would: prepare (with every input's
 * data known), allocate outputs and scratch, run. For kernel tests that check
 * an op against a plain reference implementation. */
#ifndef BF_OP_HARNESS_H
#define BF_OP_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/plan.h"
#include "bitflip/tensor.h"
#include "model/graph.h"
#include "exec/op.h"

/* Runs op `op_name` at `opset` with the given attributes and inputs (NULL
 * entries are omitted optional inputs). On success outputs[0..n_out) have
 * dtype, shape and malloc'ed data (free with th_free). */
bf_status th_run_op(const char *op_name, int64_t opset, bf__attr *attrs, size_t n_attrs,
                    const bf_tensor *const *inputs, int n_in, bf_tensor *outputs, int n_out,
                    bf_error *err);
void th_free(bf_tensor *outputs, int n_out);
/* th_run_op with an activation fused into the op's epilogue (op.h, bf__act;
 * NULL: none), as a plan runs a Conv followed by its only Relu or Clip. */
bf_status th_run_op_act(const char *op_name, int64_t opset, bf__attr *attrs, size_t n_attrs,
                        const bf_tensor *const *inputs, int n_in, bf_tensor *outputs, int n_out, const bf__act *act,
                        bf_error *err);

/* th_run_op_act for a Conv (opset 13) with a residual Add fused too, as a
 * plan runs Conv -> Add(res) -> act (op.h, bf__ctx's res): each output
 * element act(res + v) (res_a) or act(v + res); act must be set (an Add
 * alone: lo -inf, hi +inf). */
bf_status th_run_conv_res(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in, bf_tensor *out,
                          const bf__act *act, const float *res, int res_a, bf_error *err);

/* th_run_conv_res with a BatchNormalization fused right after the Conv
 * too (op.h, bf__ctx's bn: before the Add and the activation); act must
 * be set; res may be NULL. */
bf_status th_run_conv_bn(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in, bf_tensor *out,
                         const bf__act *act, const bf__bnorm *bn, const float *res, int res_a, bf_error *err);

/* th_run_conv_res (res NULL: none, act NULL: none) with W packed once as a
 * plan passes the model's copy (bf__ctx.packed: bf__linalg_packed on the
 * step, base/wpack.h); *packed: 1 if the step took a copy (the Conv's
 * kernel takes W packed on this CPU path), else it ran as without. */
bf_status th_run_conv_wpk(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in, bf_tensor *out,
                          const bf__act *act, const float *res, int res_a, int *packed, bf_error *err);

/* th_run_conv_wpk (packed NULL: no copy) with a list of output positions
 * to compute alone (op.h, bf__cpos, as the differential engine's diffpos.c
 * asks): out's other floats keep the bytes POS_FILL (each byte), the
 * caller's golden output in the engine; cpos->used says whether the step
 * took the list. */
#define POS_FILL 0x7f
bf_status th_run_conv_pos(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in, bf_tensor *out,
                          const bf__act *act, const float *res, int res_a, int *packed, bf__cpos *cpos, bf_error *err);

/* A Conv (opset 13) computed one output channel at a time, as the
 * differential engine recomputes a channel (bf__conv_channel), into out[0]. */
bf_status th_run_conv_channels(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in,
                               bf_tensor *out, bf_error *err);

/* Tensor builders (data is copied into malloc'ed storage; free with th_tensor_free).
 * th_tensor: any dtype; data may be NULL for zeros. */
/* Nodes of the loaded model whose op is `op`. */
size_t th_count_op(const bf_model *m, const char *op);
/* A plan for a model with one graph input fed shape dims[0..ndim) (batch
 * dims[0]), the sizes of its symbolic dims read from that shape
 * (bf_plan_dims_from). */
bf_status th_plan_for(const bf_model *m, const int64_t *dims, int ndim, bf_plan **p, bf_error *err);

bf_tensor th_tensor(bf_dtype dtype, const void *data, int ndim, const int64_t *dims);
bf_tensor th_tensor_f32(const float *data, int ndim, const int64_t *dims);
bf_tensor th_tensor_i64(const int64_t *data, int ndim, const int64_t *dims);
/* Fills with deterministic pseudo-random floats in [-1, 1). */
bf_tensor th_tensor_rand(uint64_t seed, int ndim, const int64_t *dims);
void th_tensor_free(bf_tensor *t);

/* Max |a-b| / (atol + rtol*|b|) over elements: <= 1 means within tolerance. NaNs must
 * match positions; mismatched shapes/dtypes give +inf. */
double th_compare(const bf_tensor *got, const bf_tensor *want, double atol, double rtol);

/* Attribute builders. */
bf__attr th_attr_int(const char *name, int64_t v);
bf__attr th_attr_float(const char *name, float v);
bf__attr th_attr_string(const char *name, const char *s);
/* ints copied into static-lifetime storage owned by the caller's array */
bf__attr th_attr_ints(const char *name, const int64_t *v, size_t n);

#endif
