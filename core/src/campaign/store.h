/* The golden model as stored: a weight fault strikes the bits of a value in
 * the campaign's representation (fp16, bf16, int8 with a scale, fixed point,
 * or a quantized model's own integers), not the fp32 the plans compute in.
 * This part holds, per model parameter, the values in that representation
 * and their scales and offsets, and the inline functions that encode a value
 * to its stored bits, apply a fault to them and decode the result: the one
 * place a weight fault's new value is computed (campaign_run.c writes it
 * into the plans, the differential engine and the mitigations read it). */
#ifndef BF_CAMPAIGN_STORE_H
#define BF_CAMPAIGN_STORE_H

#include "bitflip/model.h"
#include "bitflip/repr.h"
#include "faults.h"

typedef struct bf__store {
    const bf_model *model;    /* whose parameters these are (the campaign's model) */
    bf_repr repr;
    int repr_bits;
    /* The sites are a quantized model's stored int8/uint8 integers: repr is
     * int8 with scale 1 and nothing is rounded; a stored byte is the bits. */
    int native;
    /* per model parameter: the values in the representation (NULL for fp32:
     * the model's own), fixed-point scales, and uint<m> offsets (NULL: none) */
    float **values;
    float **scale;
    float **lo;
    int64_t *slice;           /* elements per scale */
    /* per model parameter with group_size: its per-group layout (group 0:
     * none, the scales go by slice); NULL without group_size */
    bf_qgroups *groups;
    /* fault_scales: the sites are the group scales (fp16, 16 bits), not the
     * weights; a fault's `index` is a scale's, and it moves every weight of
     * its group (bf__fault_span, bf__rescaled) */
    int scales;
} bf__store;

/* The golden stored value of element `index` of a parameter, and its scale. */
static inline float bf__stored(const bf__store *s, size_t param, int64_t index)
{
    if (s->scales) return s->scale[param][index];
    const float *v = s->values[param] ? s->values[param] : (const float *)bf_model_param(s->model, param)->tensor->data;
    return v[index];
}
static inline int64_t bf__scale_index(const bf__store *s, size_t param, int64_t index)
{
    if (s->groups && s->groups[param].group) return bf_repr_group_of(&s->groups[param], index);
    return index / s->slice[param];
}
/* Golden weight `index` of a parameter, whatever the sites are. */
static inline float bf__stored_weight(const bf__store *s, size_t param, int64_t index)
{
    const float *v = s->values[param] ? s->values[param] : (const float *)bf_model_param(s->model, param)->tensor->data;
    return v[index];
}
static inline float bf__scale(const bf__store *s, size_t param, int64_t index)
{
    return s->scale[param] ? s->scale[param][bf__scale_index(s, param, index)] : 1.0f;
}
static inline float bf__lo(const bf__store *s, size_t param, int64_t index)
{
    return s->lo[param] ? s->lo[param][bf__scale_index(s, param, index)] : 0.0f;
}

/* Element `index` of parameter `param`'s stored bits and back: the
 * representation's encoding (with the element's scale and offset), or for a
 * quantized model's own integers the byte itself (uint8 or two's
 * complement). */
static inline uint32_t bf__wencode(const bf__store *s, size_t param, int64_t index, float v)
{
    if (s->native) return (uint32_t)(int32_t)v & 0xffu;
    if (s->scales) return bf_f32_to_f16(v);
    return bf_repr_encode_lo(s->repr, v, bf__scale(s, param, index), bf__lo(s, param, index));
}
static inline float bf__wdecode(const bf__store *s, size_t param, int64_t index, uint32_t bits)
{
    if (s->scales) return bf_f16_to_f32((uint16_t)bits);
    if (!s->native) return bf_repr_decode_lo(s->repr, bits, bf__scale(s, param, index), bf__lo(s, param, index));
    return bf_model_param(s->model, param)->dtype == BF_I8 ? (float)(int8_t)(uint8_t)bits : (float)(uint8_t)bits;
}
/* What fault f (of the campaign's `kind`; BER is a bit flip) does to stored
 * bits `b`. */
static inline uint32_t bf__fault_bits(const bf__store *s, uint32_t b, bf_fault_model kind, const bf__efault *f)
{
    if (kind == BF_FAULT_PROFILED) return ((b ^ f->mask) & ~f->set0) | f->set1;
    return bf_repr_fault_bits(s->scales ? BF_REPR_FP16 : s->repr, b, kind, f->mask);
}
/* What weight fault f makes of the stored value `old`. */
static inline float bf__wcorrupt(const bf__store *s, size_t param, float old, bf_fault_model kind, const bf__efault *f)
{
    return bf__wdecode(s, param, f->index, bf__fault_bits(s, bf__wencode(s, param, f->index, old), kind, f));
}

/* The weights fault `index` of parameter p writes: first + j * stride,
 * j < the count returned — the fault's own element, or with fault_scales
 * the group its scale covers. */
static inline int64_t bf__fault_span(const bf__store *s, size_t p, int64_t index, int64_t *first, int64_t *stride)
{
    if (!s->scales) {
        *first = index;
        *stride = 1;
        return 1;
    }
    return bf_repr_group_members(&s->groups[p], index, first, stride);
}
/* fault_scales: golden weight `index` of parameter p stored with `scale`
 * for its group's: the same integer (and offset), the new scale. */
static inline float bf__rescaled(const bf__store *s, size_t p, int64_t index, float scale)
{
    float sc = bf__scale(s, p, index), lo = bf__lo(s, p, index);
    return bf_repr_decode_lo(s->repr, bf_repr_encode_lo(s->repr, s->values[p][index], sc, lo), scale, lo);
}

#endif
