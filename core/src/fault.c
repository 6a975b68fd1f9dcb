#include <string.h>

#include "bitflip/fault.h"
#include "graph.h"

float bf_flip_f32(float value, int bit)
{
    uint32_t u;
    memcpy(&u, &value, 4);
    u ^= UINT32_C(1) << bit;
    memcpy(&value, &u, 4);
    return value;
}

bf_status bf_bitflip_check(const bf_model *m, const bf_bitflip *f, bf_error *err)
{
    if (f->param >= m->n_params)
        return bf_error_set(err, BF_ERANGE, "parameter %zu does not exist (the model has %zu)", f->param, m->n_params);
    const bf_tensor *t = m->params[f->param].tensor;
    int64_t n = bf_tensor_numel(t);
    if (f->index < 0 || f->index >= n)
        return bf_error_set(err, BF_ERANGE, "element %lld of '%s' does not exist (it has %lld elements)",
                            (long long)f->index, t->name, (long long)n);
    if (f->bit < 0 || f->bit > 31)
        return bf_error_set(err, BF_ERANGE, "bit %d of an fp32 value does not exist (0..31)", f->bit);
    return BF_OK;
}

bf_status bf_plan_flip_bit(bf_plan *plan, const bf_bitflip *f, float *old_value, float *new_value,
                           bf_error *err)
{
    float *data;
    bf_status st = bf_bitflip_check(bf_plan_model(plan), f, err);
    if (st != BF_OK) return st;
    if ((st = bf_plan_param_mut(plan, f->param, &data, err)) != BF_OK) return st;
    if (old_value) *old_value = data[f->index];
    data[f->index] = bf_flip_f32(data[f->index], f->bit);
    if (new_value) *new_value = data[f->index];
    return BF_OK;
}
