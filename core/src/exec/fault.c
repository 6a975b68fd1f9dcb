#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/fault.h"
#include "exec/fuse.h"
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
    int bits = m->params[f->param].dtype == BF_F32 ? 32 : 8;
    if (f->bit < 0 || f->bit >= bits)
        return bf_error_set(err, BF_ERANGE, "bit %d of an %s value does not exist (0..%d)", f->bit,
                            bits == 32 ? "fp32" : bf_dtype_name(m->params[f->param].dtype), bits - 1);
    return BF_OK;
}

/* An int8/uint8 parameter's stored integer, and its bits rewritten. */
float bf__param_int_get(const void *data, bf_dtype dt, int64_t i)
{
    return dt == BF_I8 ? (float)((const int8_t *)data)[i] : (float)((const uint8_t *)data)[i];
}

void bf__param_int_set(void *data, bf_dtype dt, int64_t i, float v)
{
    /* v holds an integer of the type's range (a stored value, or one a fault made) */
    if (dt == BF_I8) ((int8_t *)data)[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
    else ((uint8_t *)data)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* The flip is written as a value through bf__plan_param_write, the one path
 * every weight fault takes into a plan (a campaign's, through
 * bf_evaluator_write_param, is the same call): the dirty-page tracking that row
 * lookups and the golden cache rely on then sees flips as it sees campaigns'. */
bf_status bf_plan_flip_bit(bf_plan *plan, const bf_bitflip *f, float *old_value, float *new_value,
                           bf_error *err)
{
    bf_status st = bf_bitflip_check(bf_plan_model(plan), f, err);
    if (st != BF_OK) return st;
    const bf_model *m = bf_plan_model(plan);
    bf_dtype dt = m->params[f->param].dtype;
    /* what the plan reads now: its copy once written, else the model's tensor */
    const void *cur = plan->vals[m->param_vals[f->param]].data;
    float old, now;
    if (dt != BF_F32) {
        /* the stored byte itself: bit 7 is int8's sign bit, uint8's top bit */
        unsigned char b = ((const unsigned char *)cur)[f->index] ^ (unsigned char)(1u << f->bit);
        old = bf__param_int_get(cur, dt, f->index);
        now = bf__param_int_get(&b, dt, 0);
    } else {
        old = ((const float *)cur)[f->index];
        now = bf_flip_f32(old, f->bit);
    }
    if ((st = bf__plan_param_write(plan, f->param, f->index, now, err)) != BF_OK) return st;
    if (old_value) *old_value = old;
    if (new_value) *new_value = now;
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
        char note[512];
        if (bf__fused_note(m, value, note, sizeof note)) return bf_error_set(err, BF_EINVAL, "%s", note);
        return bf_error_set(err, BF_EINVAL, "'%s' reaches no graph output, so it is never computed", name);
    }
    const char *what = val->kind == BF__VAL_INPUT ? "graph input" : "node output";
    if (p->dyn_val[value]) {
        /* a dynamic step's value (plan_dyn.c): its type and shape are each
         * run's, so the element is checked when the fault applies, and one
         * past this run's elements (or a value that is not float32 this run)
         * is left alone (seen: NaN) */
        if (t->dtype != BF_DTYPE_INVALID && t->dtype != BF_F32)
            return bf_error_set(err, BF_EINVAL, "%s '%s' is %s; only float32 values are fault sites", what, name,
                                bf_dtype_name(t->dtype));
        *row_elems = BF__ROW_PER_RUN;
        return BF_OK;
    }
    if (t->dtype != BF_F32)
        return bf_error_set(err, BF_EINVAL, "%s '%s' is %s; only float32 values are fault sites", what, name,
                            bf_dtype_name(t->dtype));
    if (p->unbatched) {   /* one sample per run: the whole value is its */
        *row_elems = bf_tensor_numel(t);
        if (*row_elems < 1) return bf_error_set(err, BF_EINVAL, "%s '%s' has no elements", what, name);
        return BF_OK;
    }
    /* the sample on dim 0, or (flat_rows) rows of it, batch-major: either
     * way one sample's elements are numel / batch in a row from s times that */
    int flat = p->flat_rows > 0 && t->ndim >= 1 && t->dims[0] == p->batch * p->flat_rows;
    if (t->ndim < 1 || (t->dims[0] != p->batch && !flat)) {
        char s[96];
        if (p->flat_rows > 0)
            return bf_error_set(err, BF_EINVAL,
                                "%s '%s' has shape %s for a batch of %lld sequences of %lld tokens: dim 0 is neither "
                                "the sample nor the batch's tokens flattened (%lld, as a router's [B*T, E] logits)",
                                what, name, bf_shape_str(t->dims, t->ndim, s, sizeof s), (long long)p->batch,
                                (long long)p->flat_rows, (long long)(p->batch * p->flat_rows));
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
        if (f->index < 0 || f->index >= (f->drawn ? BF_VALUE_FAULT_DRAWS : row)) {
            st = f->drawn ? bf_error_set(err, BF_ERANGE, "value fault %zu on '%s': draw %lld is not in [0, 2^62)", k, name,
                                         (long long)f->index)
                          : bf_error_set(err, BF_ERANGE, "value fault %zu on '%s': element %lld does not exist (%lld per sample)",
                                         k, name, (long long)f->index, (long long)row);
            goto fail;
        }
        if (bf_repr_bits(f->repr) == 0 || (int)f->model < 0 || f->model > BF_FAULT_BER) {
            st = bf_error_set(err, BF_EINVAL, "value fault %zu on '%s': unknown representation or fault model", k, name);
            goto fail;
        }
        if (bf_repr_is_fixed(f->repr) && !(f->scale > 0 && isfinite(f->scale))) {
            st = bf_error_set(err, BF_EINVAL, "value fault %zu on '%s': an int8 scale must be positive and finite, got %g", k,
                              name, f->scale);
            goto fail;
        }
        int step = p->val_step[f->value];
        p->vf[k] = (bf__vfault){.f = *f, .step = step, .row_elems = row, .old_value = NAN, .new_value = NAN, .at = -1};
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
