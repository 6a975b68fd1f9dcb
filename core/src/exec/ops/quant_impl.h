/* The quant family's shared pieces: quant.c (QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear and the table) and quant_linear.c
 * (the integer products: MatMulInteger, ConvInteger, QLinearMatMul,
 * QLinearConv). */
#ifndef BF_QUANT_IMPL_H
#define BF_QUANT_IMPL_H

#include <math.h>
#include <stdint.h>

#include "exec/op.h"

static inline int bf__is_q8(bf_dtype dt) { return dt == BF_I8 || dt == BF_U8; }

/* Element i of an int8/uint8 (or int32) tensor's data, widened. */
static inline int32_t bf__q_at(const void *data, bf_dtype dt, int64_t i)
{
    if (dt == BF_I8) return ((const int8_t *)data)[i];
    if (dt == BF_U8) return ((const uint8_t *)data)[i];
    return ((const int32_t *)data)[i];
}

/* The stored int8/uint8 value of `r`, an integer-valued float already
 * rounded (and offset by the zero point): saturated to the type's range, as
 * the spec's saturate(). NaN, which ONNX leaves undefined, gives the type's
 * lowest value, as ONNX Runtime's x86 kernels do. */
static inline void bf__q_store(void *data, bf_dtype dt, int64_t i, float r)
{
    float lo = dt == BF_I8 ? -128.0f : 0.0f, hi = dt == BF_I8 ? 127.0f : 255.0f;
    int32_t q = !(r > lo) ? (int32_t)lo : r >= hi ? (int32_t)hi : (int32_t)r;
    if (dt == BF_I8) ((int8_t *)data)[i] = (int8_t)q;
    else ((uint8_t *)data)[i] = (uint8_t)q;
}

/* Input i, if present, is int8 or uint8 (`also_i32`: or int32). */
bf_status bf__want_q8(const bf__prep *p, int i, const char *what, int also_i32, bf_error *err);
/* A scale or zero point that is per tensor (one element) or, when `per` > 0,
 * one per row/column/channel: a scalar or 1-D of 1 or `per` elements. *n gets
 * the element count. */
bf_status bf__want_qparam(const bf__prep *p, int i, const char *what, int64_t per, const char *per_what,
                          int64_t *n, bf_error *err);
/* Zero point i (optional) matches its data's dtype `dt`. */
bf_status bf__want_zp_of(const bf__prep *p, int i, const char *what, bf_dtype dt, const char *of, bf_error *err);

/* quant_linear.c: one run per product kind, the prepare telling the two
 * forms apart (int32 out, or requantized to y_zero_point's type) */
bf_status bf__matmul_integer_prepare(bf__prep *p, bf_error *err);
bf_status bf__qlinear_matmul_prepare(bf__prep *p, bf_error *err);
bf_status bf__qmatmul_run(const bf__ctx *c, bf_error *err);
bf_status bf__conv_integer_prepare(bf__prep *p, bf_error *err);
bf_status bf__qlinear_conv_prepare(bf__prep *p, bf_error *err);
bf_status bf__qconv_run(const bf__ctx *c, bf_error *err);

#endif
