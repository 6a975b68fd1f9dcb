#include "bitflip/repr.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "bitflip/tensor.h"

static const char *const repr_names[] = {"fp32",  "fp16",  "bf16",  "int8",  "int7",  "int6",  "int5",
                                         "int4",  "int3",  "int2",  "uint8", "uint7", "uint6", "uint5",
                                         "uint4", "uint3", "uint2"};
static const char *const model_names[] = {"bitflip", "stuck_at_0", "stuck_at_1", "random_value", "ber", "profiled"};
#define N_REPRS (int)(sizeof repr_names / sizeof repr_names[0])
#define N_MODELS (int)(sizeof model_names / sizeof model_names[0])

int bf_repr_bits(bf_repr repr)
{
    if (repr == BF_REPR_FP32) return 32;
    if (repr == BF_REPR_FP16 || repr == BF_REPR_BF16) return 16;
    if (repr >= BF_REPR_INT8 && repr <= BF_REPR_INT2) return 8 - (int)(repr - BF_REPR_INT8);
    if (repr >= BF_REPR_UINT8 && repr <= BF_REPR_UINT2) return 8 - (int)(repr - BF_REPR_UINT8);
    return 0;
}

int bf_repr_is_fixed(bf_repr repr)
{
    return repr >= BF_REPR_INT8 && repr <= BF_REPR_UINT2;
}

int bf_repr_is_unsigned(bf_repr repr)
{
    return repr >= BF_REPR_UINT8 && repr <= BF_REPR_UINT2;
}

const char *bf_repr_name(bf_repr repr)
{
    return (int)repr >= 0 && (int)repr < N_REPRS ? repr_names[repr] : "invalid";
}

int bf_repr_parse(const char *name)
{
    for (int i = 0; name && i < N_REPRS; i++)
        if (strcmp(name, repr_names[i]) == 0) return i;
    return -1;
}

const char *bf_fault_model_name(bf_fault_model m)
{
    return (int)m >= 0 && (int)m < N_MODELS ? model_names[m] : "invalid";
}

int bf_fault_model_parse(const char *name)
{
    for (int i = 0; name && i < N_MODELS; i++)
        if (strcmp(name, model_names[i]) == 0) return i;
    return -1;
}

void bf_repr_int8_scales(const float *w, int64_t numel, int64_t dim0, int per_channel, float *scale)
{
    bf_repr_fixed_scales(BF_REPR_INT8, w, numel, dim0, per_channel, 0, scale, NULL);
}

/* The largest integer of a symmetric m-bit code (2^(m-1) - 1) and of an
 * unsigned one (2^m - 1). */
static float sym_max(int m) { return (float)((1 << (m - 1)) - 1); }
static float uns_max(int m) { return (float)((1 << m) - 1); }

/* The range of the weights one scale covers: min, max and max |w|, NaN left
 * out (it has no place in a range). */
typedef struct range_acc {
    float mn, mx, ab;
    int seen;
} range_acc;

static void range_add(range_acc *r, float v)
{
    if (v != v) return;
    if (!r->seen || v < r->mn) r->mn = v;
    if (!r->seen || v > r->mx) r->mx = v;
    if (fabsf(v) > r->ab) r->ab = fabsf(v);
    r->seen = 1;
}

/* The scale of the range (clipped to [-w_max, w_max] when w_max > 0, which
 * also moves r->mn, the unsigned codes' offset). A zero range, a range so
 * small the scale underflows, or infinite weights would give a scale that
 * decodes every q to 0 or NaN: 1 then. */
static float range_scale(range_acc *r, float w_max, int uns, int m)
{
    if (w_max > 0) {
        r->mn = -w_max;
        r->mx = r->ab = w_max;
    }
    float sc = uns ? (r->mx - r->mn) / uns_max(m) : r->ab / sym_max(m);
    return sc > 0 && sc <= FLT_MAX ? sc : 1.0f;
}

void bf_repr_fixed_scales(bf_repr repr, const float *w, int64_t numel, int64_t dim0, int per_channel, float w_max,
                          float *scale, float *lo)
{
    int64_t n_scale = per_channel && dim0 > 0 ? dim0 : 1;
    int64_t slice = numel / n_scale;
    int m = bf_repr_bits(repr), uns = bf_repr_is_unsigned(repr);
    for (int64_t s = 0; s < n_scale; s++) {
        range_acc r = {0};
        for (int64_t i = s * slice; i < (s + 1) * slice; i++) range_add(&r, w[i]);
        scale[s] = range_scale(&r, w_max, uns, m);
        if (uns && lo) lo[s] = isfinite(r.mn) ? r.mn : 0.0f;
    }
}

int64_t bf_repr_group_count(const bf_qgroups *g)
{
    if (!g || g->outer < 1 || g->k < 1 || g->inner < 1 || g->group < 1) return 0;
    int64_t per_k = g->k / g->group + (g->k % g->group != 0);
    if (per_k > INT64_MAX / g->outer || per_k * g->outer > INT64_MAX / g->inner) return 0;
    return per_k * g->outer * g->inner;
}

int64_t bf_repr_group_of(const bf_qgroups *g, int64_t index)
{
    int64_t per_k = g->k / g->group + (g->k % g->group != 0);
    int64_t row = g->k * g->inner, o = index / row, r = index % row;
    return (o * per_k + r / g->inner / g->group) * g->inner + r % g->inner;
}

int64_t bf_repr_group_members(const bf_qgroups *g, int64_t s, int64_t *first, int64_t *stride)
{
    int64_t per_k = g->k / g->group + (g->k % g->group != 0);
    int64_t o = s / (per_k * g->inner), r = s % (per_k * g->inner), kg = r / g->inner, i = r % g->inner;
    *first = (o * g->k + kg * g->group) * g->inner + i;
    *stride = g->inner;
    return g->k - kg * g->group < g->group ? g->k - kg * g->group : g->group;
}

/* A value as fp16 holds it, past fp16's range its largest (the weights
 * beyond saturate). */
static float as_fp16(float v)
{
    if (v > 65504.0f) v = 65504.0f;
    if (v < -65504.0f) v = -65504.0f;
    return bf_f16_to_f32(bf_f32_to_f16(v));
}

/* A group's scale as fp16: 0 (an underflow) is 1, as a zero range is. */
static float fp16_scale(float sc)
{
    float h = as_fp16(sc);
    return h > 0 ? h : 1.0f;
}

void bf_repr_group_scales(bf_repr repr, const float *w, const bf_qgroups *g, float w_max, float *scale, float *lo)
{
    int64_t per_k = g->k / g->group + (g->k % g->group != 0);
    int m = bf_repr_bits(repr), uns = bf_repr_is_unsigned(repr);
    for (int64_t o = 0; o < g->outer; o++)
        for (int64_t kg = 0; kg < per_k; kg++)
            for (int64_t i = 0; i < g->inner; i++) {
                range_acc r = {0};
                int64_t k_end = (kg + 1) * g->group < g->k ? (kg + 1) * g->group : g->k;
                for (int64_t k = kg * g->group; k < k_end; k++) range_add(&r, w[(o * g->k + k) * g->inner + i]);
                float sc = range_scale(&r, w_max, uns, m);
                int64_t s = (o * per_k + kg) * g->inner + i;
                scale[s] = fp16_scale(sc);
                if (uns && lo) lo[s] = isfinite(r.mn) ? as_fp16(r.mn) : 0.0f;
            }
}

/* Round half to even without depending on the floating-point environment's
 * rounding mode (rintf would); numpy's np.round does the same. In double,
 * x - floor(x) is exact for every float x, so a tie is seen exactly. */
static float round_half_even(float x)
{
    double r = floor((double)x), d = (double)x - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0)) r += 1.0;
    return (float)r;
}

/* m-bit code of value / scale (symmetric) or (value - lo) / scale
 * (unsigned), rounded half to even and clamped to the code's range. */
static uint32_t fixed_encode(int m, int uns, float value, float scale, float lo)
{
    float x = uns ? (value - lo) / scale : value / scale;
    if (x != x) return 0;                     /* NaN: no integer is closer than 0 */
    float hi = uns ? uns_max(m) : sym_max(m), bottom = uns ? 0.0f : -hi;
    /* clamp before rounding so huge values cannot overflow the conversion */
    if (x > hi) x = hi;
    if (x < bottom) x = bottom;
    int32_t q = (int32_t)round_half_even(x);
    return (uint32_t)q & ((UINT32_C(1) << m) - 1);
}

static float fixed_decode(int m, int uns, uint32_t bits, float scale, float lo)
{
    int32_t q = (int32_t)(bits & ((UINT32_C(1) << m) - 1));
    if (uns) {
        /* kept as two statements: the product is rounded before the add,
         * as numpy and PyTorch do it, whether or not the compiler fuses */
        float p = (float)q * scale;
        return p + lo;
    }
    /* two's complement: every pattern decodes, -2^(m-1) too (a flip of the
     * sign bit of 0 makes it) */
    if (q & (INT32_C(1) << (m - 1))) q -= INT32_C(1) << m;
    return (float)q * scale;
}

uint32_t bf_repr_encode_lo(bf_repr repr, float value, float scale, float lo)
{
    uint32_t u;
    switch (repr) {
    case BF_REPR_FP32: memcpy(&u, &value, 4); return u;
    case BF_REPR_FP16: return bf_f32_to_f16(value);
    case BF_REPR_BF16: return bf_f32_to_bf16(value);
    default:
        if (!bf_repr_is_fixed(repr)) return 0;
        return fixed_encode(bf_repr_bits(repr), bf_repr_is_unsigned(repr), value, scale, lo);
    }
}

float bf_repr_decode_lo(bf_repr repr, uint32_t bits, float scale, float lo)
{
    float f;
    switch (repr) {
    case BF_REPR_FP32: memcpy(&f, &bits, 4); return f;
    case BF_REPR_FP16: return bf_f16_to_f32((uint16_t)bits);
    case BF_REPR_BF16: return bf_bf16_to_f32((uint16_t)bits);
    default:
        if (!bf_repr_is_fixed(repr)) return 0;
        return fixed_decode(bf_repr_bits(repr), bf_repr_is_unsigned(repr), bits, scale, lo);
    }
}

uint32_t bf_repr_encode(bf_repr repr, float value, float scale)
{
    return bf_repr_encode_lo(repr, value, scale, 0.0f);
}

float bf_repr_decode(bf_repr repr, uint32_t bits, float scale)
{
    return bf_repr_decode_lo(repr, bits, scale, 0.0f);
}

void bf_repr_quantize(bf_repr repr, const float *src, float *dst, int64_t n, const bf_qscale *q)
{
    if (n <= 0) return;
    if (repr == BF_REPR_FP32) {
        if (dst != src) memmove(dst, src, (size_t)n * sizeof *dst);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float scale = 1.0f, lo = 0.0f;  /* fixed point without scales is outside the contract: stay in bounds */
        if (bf_repr_is_fixed(repr) && q && q->n_scale > 0) {
            int64_t k = q->slice > 0 ? i / q->slice : 0;
            if (k >= q->n_scale) k = q->n_scale - 1;
            scale = q->scale[k];
            if (q->lo) lo = q->lo[k];
        }
        dst[i] = bf_repr_decode_lo(repr, bf_repr_encode_lo(repr, src[i], scale, lo), scale, lo);
    }
}

void bf_repr_quantize_groups(bf_repr repr, const float *src, float *dst, const bf_qgroups *g, const float *scale,
                             const float *lo)
{
    if (!bf_repr_is_fixed(repr) || bf_repr_group_count(g) <= 0) return;
    for (int64_t i = 0, n = g->outer * g->k * g->inner; i < n; i++) {
        int64_t s = bf_repr_group_of(g, i);
        float l = lo ? lo[s] : 0.0f;
        dst[i] = bf_repr_decode_lo(repr, bf_repr_encode_lo(repr, src[i], scale[s], l), scale[s], l);
    }
}

uint32_t bf_repr_fault_bits(bf_repr repr, uint32_t b, bf_fault_model model, uint32_t mask)
{
    int bits = bf_repr_bits(repr);
    uint32_t width = bits == 32 ? 0xffffffffu : (1u << bits) - 1;
    mask &= width;
    switch (model) {
    case BF_FAULT_BITFLIP: case BF_FAULT_BER: b ^= mask; break;
    case BF_FAULT_STUCK_AT_0: b &= ~mask; break;
    case BF_FAULT_STUCK_AT_1: b |= mask; break;
    case BF_FAULT_RANDOM_VALUE: b = mask; break;
    case BF_FAULT_PROFILED: break;    /* per-cell kinds: the campaign applies them (errmap.h) */
    }
    return b;
}

float bf_repr_corrupt_lo(bf_repr repr, float value, float scale, float lo, bf_fault_model model, uint32_t mask)
{
    uint32_t b = bf_repr_fault_bits(repr, bf_repr_encode_lo(repr, value, scale, lo), model, mask);
    return bf_repr_decode_lo(repr, b, scale, lo);
}

float bf_repr_corrupt(bf_repr repr, float value, float scale, bf_fault_model model, uint32_t mask)
{
    return bf_repr_corrupt_lo(repr, value, scale, 0.0f, model, mask);
}
