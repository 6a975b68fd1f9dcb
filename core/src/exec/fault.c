#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/fault.h"
#include "exec/plan_impl.h"

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

/* --- value faults */

float bf_value_fault_apply(const bf_value_fault *f, float value, float *old_stored, float *new_stored)
{
    uint32_t b = bf_repr_encode(f->repr, value, f->scale);
    uint32_t nb = bf_repr_fault_bits(f->repr, b, f->model, f->mask);
    *old_stored = bf_repr_decode(f->repr, b, f->scale);
    if (nb == b) {
        *new_stored = *old_stored;
        return value;
    }
    *new_stored = bf_repr_decode(f->repr, nb, f->scale);
    return *new_stored;
}

bf_status bf__plan_fault_site(const bf_plan *p, int64_t value, int64_t *row_elems, bf_error *err)
{
    const bf_model *m = p->model;
    if (value < 0 || (size_t)value >= m->n_values)
        return bf_error_set(err, BF_ERANGE, "value %lld does not exist (the model has %zu)", (long long)value, m->n_values);
    const bf__value *val = &m->values[value];
    const bf_tensor *t = &p->vals[value];
    const char *name = val->name ? val->name : "";
    if (p->val_step[value] == BF__VAL_NOT_RUN) {
        if (val->kind == BF__VAL_PARAM || val->kind == BF__VAL_CONST)
            return bf_error_set(err, BF_EINVAL, "'%s' is an initializer (%s), not a value computed at run time", name,
                                val->kind == BF__VAL_PARAM ? "a weight" : "a constant");
        if (p->known[value])
            return bf_error_set(err, BF_EINVAL,
                                "'%s' is computed once when the plan is built (from constants and shapes only), "
                                "not per sample at run time", name);
        return bf_error_set(err, BF_EINVAL, "'%s' reaches no graph output, so it is never computed", name);
    }
    const char *what = val->kind == BF__VAL_INPUT ? "graph input" : "node output";
    if (t->dtype != BF_F32)
        return bf_error_set(err, BF_EINVAL, "%s '%s' is %s; only float32 values are fault sites", what, name,
                            bf_dtype_name(t->dtype));
    if (t->ndim < 1 || t->dims[0] != p->batch) {
        char s[96];
        return bf_error_set(err, BF_EINVAL, "%s '%s' has shape %s for a batch of %lld: dim 0 is not the sample", what,
                            name, bf_shape_str(t->dims, t->ndim, s, sizeof s), (long long)p->batch);
    }
    int64_t row = bf_tensor_numel(t) / p->batch;
    if (row < 1) return bf_error_set(err, BF_EINVAL, "%s '%s' has no elements", what, name);
    *row_elems = row;
    return BF_OK;
}

bf_status bf__plan_reserve_value_faults(bf_plan *p, size_t n, bf_error *err)
{
    if (n <= p->vf_cap) return BF_OK;
    bf__vfault *vf = bf__realloc(p->vf, n * sizeof *vf);
    if (!vf) return bf_error_set(err, BF_ENOMEM, "out of memory for %zu value faults", n);
    p->vf = vf;
    p->vf_cap = n;
    return BF_OK;
}

bf_status bf_plan_set_value_faults(bf_plan *p, const bf_value_fault *faults, size_t n, bf_error *err)
{
    bf_status st;
    memset(p->step_hit, 0, p->n_steps);
    p->inputs_hit = 0;
    p->n_vf = 0;
    if ((st = bf__plan_reserve_value_faults(p, n, err)) != BF_OK) return st;
    for (size_t k = 0; k < n; k++) {
        const bf_value_fault *f = &faults[k];
        int64_t row;
        if ((st = bf__plan_fault_site(p, f->value, &row, err)) != BF_OK) goto fail;
        const char *name = p->model->values[f->value].name;
        if (f->sample < -1 || f->sample >= p->batch) {
            st = bf_error_set(err, BF_ERANGE, "value fault %zu on '%s': row %lld does not exist in a batch of %lld", k, name,
                              (long long)f->sample, (long long)p->batch);
            goto fail;
        }
        if (f->index < 0 || f->index >= row) {
            st = bf_error_set(err, BF_ERANGE, "value fault %zu on '%s': element %lld does not exist (%lld per sample)", k,
                              name, (long long)f->index, (long long)row);
            goto fail;
        }
        if (bf_repr_bits(f->repr) == 0 || (int)f->model < 0 || f->model > BF_FAULT_BER) {
            st = bf_error_set(err, BF_EINVAL, "value fault %zu on '%s': unknown representation or fault model", k, name);
            goto fail;
        }
        if (f->repr == BF_REPR_INT8 && !(f->scale > 0 && isfinite(f->scale))) {
            st = bf_error_set(err, BF_EINVAL, "value fault %zu on '%s': an int8 scale must be positive and finite, got %g", k,
                              name, f->scale);
            goto fail;
        }
        int step = p->val_step[f->value];
        p->vf[k] = (bf__vfault){.f = *f, .step = step, .row_elems = row, .old_value = NAN, .new_value = NAN};
        if (step < 0) p->inputs_hit = 1;
        else p->step_hit[step] = 1;
    }
    p->n_vf = n;
    return BF_OK;
fail:
    memset(p->step_hit, 0, p->n_steps);
    p->inputs_hit = 0;
    return st;
}

void bf_plan_value_fault_seen(const bf_plan *p, size_t i, float *old_value, float *new_value)
{
    *old_value = i < p->n_vf ? p->vf[i].old_value : NAN;
    *new_value = i < p->n_vf ? p->vf[i].new_value : NAN;
}
