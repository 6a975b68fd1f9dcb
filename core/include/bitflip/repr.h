/* bitflip — number representations and what a fault does to a stored value.
 *
 * A campaign's representation is the format the model is stored in: the
 * golden model is the fp32 model rounded to that format (bf_repr_quantize),
 * and faults change bits of the stored format (bf_repr_corrupt), after which
 * the value is decoded back to fp32 for compute.
 *
 *   fp32  32 bits: bit 31 sign, 30..23 exponent, 22..0 mantissa
 *   fp16  16 bits: bit 15 sign, 14..10 exponent, 9..0 mantissa (IEEE binary16)
 *   bf16  16 bits: bit 15 sign, 14..7 exponent, 6..0 mantissa
 *   int8   8 bits: two's complement q, value = q * scale, symmetric:
 *          scale = max|w| / 127 over the tensor (per-tensor) or over each
 *          slice along axis 0 (per-channel), q = round-half-even(w / scale)
 *          clamped to [-127, 127]; a zero range gives scale 1.
 *
 * Fixed point at m = 8 down to 2 bits, as Stutz et al. (MLSys 2021) store
 * weights; int8 is the symmetric one at m = 8:
 *
 *   int<m>  symmetric: m-bit two's complement q, value = q * scale,
 *           scale = R / (2^(m-1) - 1), q = round-half-even(w / scale) clamped
 *           to [-(2^(m-1) - 1), 2^(m-1) - 1]. R is max|w| over the tensor (per
 *           layer) or slice (per channel), or w_max when the range is clipped.
 *   uint<m> asymmetric: m-bit unsigned u, value = u * scale + lo, with
 *           lo = min w, scale = (max w - min w) / (2^m - 1), u =
 *           round-half-even((w - lo) / scale) clamped to [0, 2^m - 1]; with a
 *           clipped range lo = -w_max and max w = w_max.
 *
 * Every m-bit pattern decodes (the symmetric -2^(m-1) too, which only a
 * fault can make); a fault only ever touches the m stored bits.
 *
 * Per-group scales (weight-only quantization as GPTQ and AWQ store LLM
 * weights): the tensor seen as [outer, K, inner] with K its input
 * dimension, one scale (and for uint<m> one offset) per `group` consecutive
 * elements along K; a row's last group is shorter when group does not
 * divide K. Group scales are stored as fp16, as GPTQ/AWQ store them: the
 * scale (offset) above is rounded to fp16 before the weights are rounded
 * with it, and a scale fp16 cannot hold (0 or past 65504) is 1 (65504). */
#ifndef BITFLIP_REPR_H
#define BITFLIP_REPR_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bf_repr {
    BF_REPR_FP32 = 0,
    BF_REPR_FP16,
    BF_REPR_BF16,
    BF_REPR_INT8,
    /* fixed point: symmetric int7..int2, asymmetric uint8..uint2 */
    BF_REPR_INT7, BF_REPR_INT6, BF_REPR_INT5, BF_REPR_INT4, BF_REPR_INT3, BF_REPR_INT2,
    BF_REPR_UINT8, BF_REPR_UINT7, BF_REPR_UINT6, BF_REPR_UINT5, BF_REPR_UINT4, BF_REPR_UINT3, BF_REPR_UINT2,
    BF_REPR_COUNT
} bf_repr;

/* Bits per stored value: 32, 16, 16, m for int<m> and uint<m>; 0 if unknown. */
int bf_repr_bits(bf_repr repr);
const char *bf_repr_name(bf_repr repr);          /* "fp32", "fp16", "bf16", "int8", "int4", "uint4", ... */
/* Parses a name; returns -1 if unknown. */
int bf_repr_parse(const char *name);

typedef enum bf_fault_model {
    BF_FAULT_BITFLIP = 0,     /* XOR the mask */
    BF_FAULT_STUCK_AT_0,      /* clear the mask's bits */
    BF_FAULT_STUCK_AT_1,      /* set the mask's bits */
    BF_FAULT_RANDOM_VALUE,    /* replace every bit with a random one */
    BF_FAULT_BER,             /* independent flips; a bitflip mask per element */
    BF_FAULT_PROFILED         /* a chip's measured map of failing cells (errmap.h); campaigns on weights only */
} bf_fault_model;

const char *bf_fault_model_name(bf_fault_model m);  /* "bitflip", "stuck_at_0", ... "ber" */
int bf_fault_model_parse(const char *name);          /* -1 if unknown */

/* A fixed-point representation (int<m> or uint<m>, int8 included): 1. */
int bf_repr_is_fixed(bf_repr repr);
/* An asymmetric one (uint<m>), whose values carry an offset `lo`: 1. */
int bf_repr_is_unsigned(bf_repr repr);

/* Fixed-point scales: one (per-tensor) or one per slice along axis 0. */
/* A per-group layout: a tensor of outer * k * inner elements, grouped
 * along k by `group` (> 0). */
typedef struct bf_qgroups {
    int64_t outer, k, inner, group;
} bf_qgroups;

/* Scales of a grouped tensor: outer * ceil(k / group) * inner; 0 when the
 * layout is not valid (a size < 1 or the count past INT64_MAX). */
int64_t bf_repr_group_count(const bf_qgroups *g);
/* The scale of element `index` (row-major over [outer, k, inner]):
 * (o * ceil(k / group) + kk / group) * inner + i. */
int64_t bf_repr_group_of(const bf_qgroups *g, int64_t index);
/* The elements scale `s` covers: first + j * stride for j < the count
 * returned (the row's last group may be shorter than g->group). */
int64_t bf_repr_group_members(const bf_qgroups *g, int64_t s, int64_t *first, int64_t *stride);
/* Per-group scales (and for uint<m> offsets into `lo`) of a fixed-point
 * representation into bf_repr_group_count(g) floats each, rounded to fp16
 * (see the top). w_max as bf_repr_fixed_scales. */
void bf_repr_group_scales(bf_repr repr, const float *w, const bf_qgroups *g, float w_max, float *scale, float *lo);

typedef struct bf_qscale {
    const float *scale;       /* n_scale values */
    int64_t n_scale;
    int64_t slice;            /* elements per scale: numel / n_scale */
    const float *lo;          /* uint<m>: n_scale offsets (NULL: 0) */
} bf_qscale;

/* Scales for int8: writes n_scale values into `scale` (per_channel: dims[0]
 * values, else 1). */
void bf_repr_int8_scales(const float *w, int64_t numel, int64_t dim0, int per_channel, float *scale);

/* Scales (and for uint<m> offsets into `lo`, else `lo` may be NULL) of any
 * fixed-point representation, per tensor or per slice along axis 0. w_max > 0
 * clips: the range is [-w_max, w_max] whatever the weights are; 0 takes the
 * weights' own range. A zero or non-finite range gives scale 1. */
void bf_repr_fixed_scales(bf_repr repr, const float *w, int64_t numel, int64_t dim0, int per_channel, float w_max,
                          float *scale, float *lo);

/* The golden stored values: dst[i] = decode(encode(src[i])). For int8, `q`
 * gives the scales (ignored otherwise). src and dst may be the same. */
void bf_repr_quantize(bf_repr repr, const float *src, float *dst, int64_t n, const bf_qscale *q);

/* The same with per-group scales (and uint<m> offsets, else NULL), as
 * bf_repr_group_scales made them; n = outer * k * inner elements. */
void bf_repr_quantize_groups(bf_repr repr, const float *src, float *dst, const bf_qgroups *g, const float *scale,
                             const float *lo);

/* Encodes one value to its stored bits, rounding to nearest even (int8:
 * clamped to [-127, 127], NaN to 0), and back. Every pattern decodes,
 * including int8 0x80 = -128, which only a fault can produce. */
uint32_t bf_repr_encode(bf_repr repr, float value, float scale);
float bf_repr_decode(bf_repr repr, uint32_t bits, float scale);

/* The same with the asymmetric offset `lo` (ignored by every other
 * representation; the functions above pass 0). */
uint32_t bf_repr_encode_lo(bf_repr repr, float value, float scale, float lo);
float bf_repr_decode_lo(bf_repr repr, uint32_t bits, float scale, float lo);

/* What the fault does to stored bits: `model` with `mask` (cut to the
 * representation's width) applied to `bits`. */
uint32_t bf_repr_fault_bits(bf_repr repr, uint32_t bits, bf_fault_model model, uint32_t mask);

/* What the fault does to one stored value: encode, apply `model` with `mask`
 * (bits within bf_repr_bits; for RANDOM_VALUE, `mask` holds the random
 * bits), decode. For BER use BF_FAULT_BITFLIP with the drawn mask. */
float bf_repr_corrupt(bf_repr repr, float value, float scale, bf_fault_model model, uint32_t mask);
float bf_repr_corrupt_lo(bf_repr repr, float value, float scale, float lo, bf_fault_model model, uint32_t mask);

#ifdef __cplusplus
}
#endif
#endif
