/* Building and running a plan. Build time does everything that can be done
 * once: shapes, folding of values known in advance, memory. Run time only
 * calls kernels. */
#include <math.h>
#include <string.h>

#include "alloc.h"
#include "diff.h"
#include "plan_impl.h"

/* Largest activation we lay out: 2^34 elements. */
#define MAX_NUMEL (INT64_C(1) << 34)

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

void bf_plan_free(bf_plan *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n_owned; i++) bf__free(p->owned[i]);
    bf__free(p->owned);
    for (size_t i = 0; p->param_copy && i < p->model->n_params; i++) bf__free(p->param_copy[i]);
    bf__free(p->param_copy);
    for (size_t i = 0; i < p->n_steps; i++) {
        bf__free(p->steps[i].in);
        bf__free(p->steps[i].out);
        bf__free(p->steps[i].params);
    }
    bf__free(p->steps);
    bf__free(p->dummies);
    bf__free(p->vals);
    bf__free(p->known);
    bf__free(p->arena);
    bf__free(p->scratch);
    bf__free(p->val_step);
    bf__free(p->step_hit);
    bf__free(p->vf);
    bf__free(p);
}

static bf_status oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory building a plan"); }

/* Values that reach a graph output; the rest are never computed. */
static bf_status mark_needed(const bf_model *m, unsigned char *needed, bf_error *err)
{
    for (size_t i = 0; i < m->n_outputs; i++) needed[m->output_vals[i]] = 1;
    for (size_t o = m->n_nodes; o-- > 0;) {
        const bf__node *n = &m->nodes[m->order[o]];
        int used = 0;
        for (int j = 0; j < n->n_out; j++) used |= n->out[j] >= 0 && needed[n->out[j]];
        if (!used) continue;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) needed[n->out[j]] = 1;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) needed[n->in[j]] = 1;
    }
    (void)err;
    return BF_OK;
}

static bf_status set_inputs(bf_plan *p, bf_error *err)
{
    const bf_model *m = p->model;
    for (size_t i = 0; i < m->n_inputs; i++) {
        const bf_value_info *vi = &m->inputs[i];
        bf_tensor *t = &p->vals[m->input_vals[i]];
        t->dtype = vi->dtype;
        t->ndim = vi->ndim;
        for (int d = 0; d < vi->ndim; d++) {
            if (vi->dims[d] >= 0) t->dims[d] = vi->dims[d];
            else if (d == 0) t->dims[d] = p->batch;
            else
                return bf_error_set(err, BF_EUNSUPPORTED,
                                    "%s: graph input '%s' dim %d is symbolic ('%s'); only the batch "
                                    "dimension (dim 0) may be symbolic",
                                    m->label, vi->name, d, vi->dim_names[d] ? vi->dim_names[d] : "?");
        }
        if (vi->ndim > 0 && vi->dims[0] >= 0 && vi->dims[0] != p->batch)
            return bf_error_set(err, BF_ESHAPE,
                                "%s: graph input '%s' has a fixed batch of %lld; a plan for batch %lld "
                                "cannot feed it (re-export with a dynamic batch axis, or use batch %lld)",
                                m->label, vi->name, (long long)vi->dims[0], (long long)p->batch,
                                (long long)vi->dims[0]);
    }
    return BF_OK;
}

static bf_status check_output(const bf_model *m, const bf__node *n, const bf_tensor *t, bf_error *err)
{
    if (!bf_dtype_size(t->dtype) || t->ndim < 0 || t->ndim > BF_MAX_DIMS)
        return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s): internal error: output type not set",
                            m->label, n->name, n->op_type);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->dims[d] < 0 || (t->dims[d] > 0 && numel > MAX_NUMEL / t->dims[d]))
            return bf_error_set(err, BF_ESHAPE, "%s: node '%s' (%s): output dim %d is %lld (negative or too large)",
                                m->label, n->name, n->op_type, d, (long long)t->dims[d]);
        numel *= t->dims[d];
    }
    return BF_OK;
}

/* Runs a node whose inputs are all known, now, into freshly owned buffers. */
static bf_status fold(bf_plan *p, const bf__node *n, bf__prep *prep, bf_error *err)
{
    bf_status st = BF_OK;
    void *scratch = NULL;
    const bf_tensor *ins[BF__MAX_IO];
    void **owned = bf__realloc(p->owned, (p->n_owned + (size_t)n->n_out) * sizeof *owned);
    if (!owned) return oom(err);
    p->owned = owned;
    for (int j = 0; j < n->n_out; j++) {
        void *buf = bf__aligned_alloc(bf_tensor_nbytes(prep->out[j]) + 1);
        if (!buf) return oom(err);
        p->owned[p->n_owned++] = buf;
        prep->out[j]->data = buf;
    }
    for (int j = 0; j < n->n_in; j++) ins[j] = n->in[j] >= 0 ? &p->vals[n->in[j]] : NULL;
    scratch = bf__aligned_alloc(prep->scratch + 1);
    if (!scratch) return oom(err);
    bf__ctx c = {.node = n, .params = prep->params, .n_in = n->n_in, .n_out = n->n_out,
                 .in = ins, .out = prep->out, .scratch = scratch};
    st = n->op->run(&c, err);
    bf__free(scratch);
    return st;
}

static bf_status add_step(bf_plan *p, const bf__node *n, bf__prep *prep, bf_error *err)
{
    bf__step *s = &p->steps[p->n_steps];
    s->node = n;
    s->n_in = n->n_in;
    s->n_out = n->n_out;
    s->in = bf__calloc((size_t)n->n_in + 1, sizeof *s->in);
    s->out = bf__calloc((size_t)n->n_out + 1, sizeof *s->out);
    s->params = bf__aligned_alloc(BF__OP_PARAMS_MAX);
    p->n_steps++;
    if (!s->in || !s->out || !s->params) return oom(err);
    memcpy(s->params, prep->params, BF__OP_PARAMS_MAX);
    for (int j = 0; j < n->n_in; j++) s->in[j] = n->in[j] >= 0 ? &p->vals[n->in[j]] : NULL;
    for (int j = 0; j < n->n_out; j++) s->out[j] = prep->out[j];
    if (prep->scratch > p->scratch_bytes) p->scratch_bytes = prep->scratch;
    return BF_OK;
}

static bf_status build(bf_plan *p, bf_error *err)
{
    const bf_model *m = p->model;
    bf_status st = BF_OK;
    unsigned char *needed = bf__calloc(m->n_values + 1, 1);
    bf__prep *prep = bf__aligned_alloc(sizeof *prep);
    bf_tensor *view = bf__calloc(BF__MAX_IO, sizeof *view);
    size_t n_dummies = 0;
    if (!needed || !prep || !view) { st = oom(err); goto out; }
    if ((st = mark_needed(m, needed, err)) != BF_OK) goto out;

    for (size_t v = 0; v < m->n_values; v++) {
        const bf__value *val = &m->values[v];
        bf_tensor *t = &p->vals[v];
        t->name = val->name;
        if (val->kind == BF__VAL_PARAM || val->kind == BF__VAL_CONST) {
            *t = *val->init;
            t->name = val->name;
            p->known[v] = val->kind == BF__VAL_CONST;
        }
    }
    if ((st = set_inputs(p, err)) != BF_OK) goto out;

    for (size_t o = 0; o < m->n_nodes; o++) {
        const bf__node *n = &m->nodes[m->order[o]];
        int all_known = 1, needs_it = 0;
        for (int j = 0; j < n->n_out; j++) needs_it |= n->out[j] >= 0 && needed[n->out[j]];
        if (!needs_it) continue;

        memset(prep, 0, sizeof *prep);
        prep->node = n;
        prep->opset = m->opset;
        prep->n_in = n->n_in;
        prep->n_out = n->n_out;
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] < 0) { prep->in[j] = NULL; continue; }
            /* Inputs not known at build time are shown without data, so a
             * prepare cannot read (or cache) values that runs will change. */
            view[j] = p->vals[n->in[j]];
            if (!p->known[n->in[j]]) { view[j].data = NULL; all_known = 0; }
            prep->in[j] = &view[j];
        }
        for (int j = 0; j < n->n_out; j++) {
            if (n->out[j] >= 0) prep->out[j] = &p->vals[n->out[j]];
            else prep->out[j] = &p->dummies[n_dummies++];
        }
        if ((st = n->op->prepare(prep, err)) != BF_OK) {
            if (err && !strstr(err->msg, n->op_type)) bf__node_error(err, n, st, "%s", err->msg);
            bf_error_prefix(err, "%s", m->label);
            goto out;
        }
        for (int j = 0; j < n->n_out; j++)
            if ((st = check_output(m, n, prep->out[j], err)) != BF_OK) goto out;

        if (all_known || n->op->shape_only) {
            if ((st = fold(p, n, prep, err)) != BF_OK) { bf_error_prefix(err, "%s", m->label); goto out; }
            for (int j = 0; j < n->n_out; j++)
                if (n->out[j] >= 0) p->known[n->out[j]] = 1;
        } else if ((st = add_step(p, n, prep, err)) != BF_OK) {
            goto out;
        }
    }

    /* One arena for graph inputs and every computed activation. */
    size_t total = 0;
    for (size_t v = 0; v < m->n_values; v++) {
        const bf__value *val = &m->values[v];
        if (p->known[v] || val->kind == BF__VAL_PARAM || val->kind == BF__VAL_CONST) continue;
        if (val->kind == BF__VAL_NODE && !needed[v]) continue;
        total += align64(bf_tensor_nbytes(&p->vals[v]));
    }
    for (size_t i = 0; i < n_dummies; i++) total += align64(bf_tensor_nbytes(&p->dummies[i]));
    p->arena_bytes = total;
    p->arena = bf__aligned_alloc(total + 64);
    p->scratch = bf__aligned_alloc(p->scratch_bytes + 64);
    if (!p->arena || !p->scratch) { st = oom(err); goto out; }
    memset(p->arena, 0, total);
    size_t off = 0;
    for (size_t v = 0; v < m->n_values; v++) {
        const bf__value *val = &m->values[v];
        if (p->known[v] || val->kind == BF__VAL_PARAM || val->kind == BF__VAL_CONST) continue;
        if (val->kind == BF__VAL_NODE && !needed[v]) continue;
        p->vals[v].data = (char *)p->arena + off;
        off += align64(bf_tensor_nbytes(&p->vals[v]));
    }
    for (size_t i = 0; i < n_dummies; i++) {
        p->dummies[i].data = (char *)p->arena + off;
        off += align64(bf_tensor_nbytes(&p->dummies[i]));
    }
out:
    bf__free(needed);
    bf__free(prep);
    bf__free(view);
    return st;
}

bf_status bf_plan_create(const bf_model *model, int64_t batch, bf_plan **out, bf_error *err)
{
    bf_status st;
    bf_plan *p = NULL;
    size_t n_out_slots = 0;
    *out = NULL;
    if (batch < 1) return bf_error_set(err, BF_EINVAL, "batch must be at least 1, got %lld", (long long)batch);

    for (size_t i = 0; i < model->n_nodes; i++) n_out_slots += (size_t)model->nodes[i].n_out;
    p = bf__calloc(1, sizeof *p);
    if (!p) return oom(err);
    p->model = model;
    p->batch = batch;
    p->vals = bf__calloc(model->n_values + 1, sizeof *p->vals);
    p->known = bf__calloc(model->n_values + 1, 1);
    p->param_copy = bf__calloc(model->n_params + 1, sizeof *p->param_copy);
    p->steps = bf__calloc(model->n_nodes + 1, sizeof *p->steps);
    p->dummies = bf__calloc(n_out_slots + 1, sizeof *p->dummies);
    p->val_step = bf__malloc((model->n_values + 1) * sizeof *p->val_step);
    p->step_hit = bf__calloc(model->n_nodes + 1, 1);
    if (!p->vals || !p->known || !p->param_copy || !p->steps || !p->dummies || !p->val_step || !p->step_hit) {
        st = oom(err);
        goto fail;
    }
    if ((st = build(p, err)) != BF_OK) goto fail;
    for (size_t v = 0; v < model->n_values; v++) p->val_step[v] = BF__VAL_NOT_RUN;
    for (size_t i = 0; i < model->n_inputs; i++) p->val_step[model->input_vals[i]] = -1;
    for (size_t i = 0; i < p->n_steps; i++)
        for (int j = 0; j < p->steps[i].node->n_out; j++)
            if (p->steps[i].node->out[j] >= 0) p->val_step[p->steps[i].node->out[j]] = (int)i;
    *out = p;
    return BF_OK;
fail:
    bf_plan_free(p);
    return st;
}

/* The value faults that apply after `step` (-1: to the graph inputs). */
void bf__plan_apply_value_faults(bf_plan *p, int step)
{
    for (size_t k = 0; k < p->n_vf; k++) {
        bf__vfault *v = &p->vf[k];
        if (v->step != step) continue;
        float *x = p->vals[v->f.value].data;
        int64_t r0 = v->f.sample < 0 ? 0 : v->f.sample, r1 = v->f.sample < 0 ? p->batch : v->f.sample + 1;
        for (int64_t r = r0; r < r1; r++) {
            float *e = x + r * v->row_elems + v->f.index, was, now;
            *e = bf_value_fault_apply(&v->f, *e, &was, &now);
            if (r == r0) v->old_value = was, v->new_value = now;
        }
    }
}

bf_status bf_plan_run(bf_plan *p, bf_error *err)
{
    for (size_t k = 0; k < p->n_vf; k++) p->vf[k].old_value = p->vf[k].new_value = NAN;
    if (p->inputs_hit) bf__plan_apply_value_faults(p, -1);
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        bf__ctx c = {.node = s->node, .params = s->params, .n_in = s->n_in, .n_out = s->n_out,
                     .in = s->in, .out = s->out, .scratch = p->scratch};
        bf_status st = s->node->op->run(&c, err);
        if (st != BF_OK) return st;
        if (p->step_hit[i]) bf__plan_apply_value_faults(p, (int)i);
    }
    return BF_OK;
}

bf_status bf__plan_run_step(bf_plan *p, size_t i, bf_error *err)
{
    const bf__step *s = &p->steps[i];
    bf__ctx c = {.node = s->node, .params = s->params, .n_in = s->n_in, .n_out = s->n_out,
                 .in = s->in, .out = s->out, .scratch = p->scratch};
    return s->node->op->run(&c, err);
}

const bf_model *bf_plan_model(const bf_plan *p) { return p->model; }
int64_t bf_plan_batch(const bf_plan *p) { return p->batch; }
size_t bf_plan_arena_bytes(const bf_plan *p) { return p->arena_bytes; }
size_t bf_plan_num_steps(const bf_plan *p) { return p->n_steps; }

const bf_tensor *bf_plan_value(const bf_plan *p, int64_t value)
{
    return value >= 0 && (size_t)value < p->model->n_values ? &p->vals[value] : NULL;
}

bf_tensor *bf_plan_input(bf_plan *p, size_t i)
{
    return i < p->model->n_inputs ? &p->vals[p->model->input_vals[i]] : NULL;
}

const bf_tensor *bf_plan_output(const bf_plan *p, size_t i)
{
    return i < p->model->n_outputs ? &p->vals[p->model->output_vals[i]] : NULL;
}

bf_status bf_plan_param_mut(bf_plan *p, size_t param, float **data, bf_error *err)
{
    const bf_model *m = p->model;
    if (param >= m->n_params)
        return bf_error_set(err, BF_ERANGE, "parameter %zu does not exist (the model has %zu)", param, m->n_params);
    if (!p->param_copy[param]) {
        const bf_tensor *src = m->params[param].tensor;
        size_t nb = bf_tensor_nbytes(src);
        float *copy = bf__aligned_alloc(nb + 1);
        if (!copy) return bf_error_set(err, BF_ENOMEM, "out of memory copying parameter '%s'", src->name);
        memcpy(copy, src->data, nb);
        p->param_copy[param] = copy;
        p->vals[m->param_vals[param]].data = copy;
    }
    *data = p->param_copy[param];
    return BF_OK;
}
