#include "bitflip/repr.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "bitflip/tensor.h"

static const char *const repr_names[] = {"fp32", "fp16", "bf16", "int8"};
static const char *const model_names[] = {"bitflip", "stuck_at_0", "stuck_at_1", "random_value", "ber"};
#define N_REPRS (int)(sizeof repr_names / sizeof repr_names[0])
#define N_MODELS (int)(sizeof model_names / sizeof model_names[0])

int bf_repr_bits(bf_repr repr)
{
    switch (repr) {
    case BF_REPR_FP32: return 32;
    case BF_REPR_FP16: case BF_REPR_BF16: return 16;
    case BF_REPR_INT8: return 8;
    }
    return 0;
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
    int64_t n_scale = per_channel && dim0 > 0 ? dim0 : 1;
    int64_t slice = numel / n_scale;
    for (int64_t s = 0; s < n_scale; s++) {
        float m = 0;
        for (int64_t i = s * slice; i < (s + 1) * slice; i++) {
            float a = fabsf(w[i]);
            if (a > m) m = a;     /* NaN never compares greater: skipped */
        }
        float sc = m / 127.0f;
        /* A zero range, a range so small the scale underflows, or infinite
         * weights would give a scale that decodes every q to 0 or NaN. */
        if (!(sc > 0 && sc <= FLT_MAX)) sc = 1.0f;
        scale[s] = sc;
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

static uint32_t int8_encode(float value, float scale)
{
    float x = value / scale;
    if (x != x) return 0;                     /* NaN: no integer is closer than 0 */
    /* clamp before rounding so huge values cannot overflow the conversion */
    if (x > 128.0f) x = 128.0f;
    if (x < -128.0f) x = -128.0f;
    float q = round_half_even(x);
    if (q > 127.0f) q = 127.0f;
    if (q < -127.0f) q = -127.0f;
    return (uint32_t)(uint8_t)(int8_t)q;
}

uint32_t bf_repr_encode(bf_repr repr, float value, float scale)
{
    uint32_t u;
    switch (repr) {
    case BF_REPR_FP32: memcpy(&u, &value, 4); return u;
    case BF_REPR_FP16: return bf_f32_to_f16(value);
    case BF_REPR_BF16: return bf_f32_to_bf16(value);
    case BF_REPR_INT8: return int8_encode(value, scale);
    }
    return 0;
}

float bf_repr_decode(bf_repr repr, uint32_t bits, float scale)
{
    float f;
    switch (repr) {
    case BF_REPR_FP32: memcpy(&f, &bits, 4); return f;
    case BF_REPR_FP16: return bf_f16_to_f32((uint16_t)bits);
    case BF_REPR_BF16: return bf_bf16_to_f32((uint16_t)bits);
    /* every pattern decodes, 0x80 too: a flip of the sign bit of 0 makes -128 */
    case BF_REPR_INT8: return (float)(int8_t)(uint8_t)bits * scale;
    }
    return 0;
}

void bf_repr_quantize(bf_repr repr, const float *src, float *dst, int64_t n, const bf_qscale *q)
{
    if (n <= 0) return;
    if (repr == BF_REPR_FP32) {
        if (dst != src) memmove(dst, src, (size_t)n * sizeof *dst);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float scale = 1.0f;     /* int8 without scales is outside the contract: stay in bounds */
        if (repr == BF_REPR_INT8 && q && q->n_scale > 0) {
            int64_t k = q->slice > 0 ? i / q->slice : 0;
            scale = q->scale[k < q->n_scale ? k : q->n_scale - 1];
        }
        dst[i] = bf_repr_decode(repr, bf_repr_encode(repr, src[i], scale), scale);
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
    }
    return b;
}

float bf_repr_corrupt(bf_repr repr, float value, float scale, bf_fault_model model, uint32_t mask)
{
    uint32_t b = bf_repr_fault_bits(repr, bf_repr_encode(repr, value, scale), model, mask);
    return bf_repr_decode(repr, b, scale);
}
