/* The shape family: ops that produce shapes or move bytes without arithmetic
 * (Shape, Constant, Reshape, Transpose, Gather, Slice, ...). Every one is
 * dtype-generic (see shape_impl.h). This file holds the ops whose output is
 * the input's bytes unchanged or a constant, and the family's table; strided
 * copies live in shape_copy.c, Gather and Concat in shape_gather.c. */
#include <assert.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include "shape_impl.h"
#include "index_impl.h"
#include "exec/step_access.h"

bf_status bf__run_copy(const bf__ctx *c, bf_error *err)
{
    (void)err;
    size_t nb = bf_tensor_nbytes(c->out[0]);
    /* a plan may alias a reshape's output to its input: nothing to move then */
    if (nb && c->out[0]->data != c->in[0]->data) memcpy(c->out[0]->data, c->in[0]->data, nb);
    return BF_OK;
}

/* a Reshape, Squeeze, ... or a Split into one output of the whole input
 * (SSDlite's of its [1, 3234, 91] class scores: 1.2 MB moved an image) */
int bf__copy_step(const bf__step *s)
{
    if (s->n_in < 1 || s->n_out != 1) return 0;
    return s->node->op->run == bf__run_copy || (s->node->op->run == bf__split_run && s->params && bf__split_one(s->params));
}

/* ---- Shape ---- */

typedef struct shape_params {
    int n;
    int64_t v[BF_MAX_DIMS];
} shape_params;
static_assert(sizeof(shape_params) <= BF__OP_PARAMS_MAX, "shape_params must fit in params");

static bf_status shape_prepare(bf__prep *p, bf_error *err)
{
    bf_status st = bf__need_inputs(p, 1, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int64_t r = x->ndim, start = 0, end = r;
    /* start/end exist from opset 15; before, they are absent and the defaults apply */
    if ((st = bf__attr_int(p->node, "start", 0, &start, err))) return st;
    if ((st = bf__attr_int(p->node, "end", r, &end, err))) return st;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    shape_params *sp = (shape_params *)p->params;
    sp->n = end > start ? (int)(end - start) : 0;
    for (int i = 0; i < sp->n; i++) sp->v[i] = x->dims[start + i];
    int64_t n = sp->n;
    bf__set_shape(p->out[0], BF_I64, 1, &n);
    return BF_OK;
}

static bf_status shape_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const shape_params *sp = c->params;
    if (sp->n) memcpy(c->out[0]->data, sp->v, sizeof(int64_t) * (size_t)sp->n);
    return BF_OK;
}

/* ---- Size: the element count, like Shape known from the shape alone ---- */

static bf_status size_prepare(bf__prep *p, bf_error *err)
{
    bf_status st = bf__need_inputs(p, 1, err);
    if (st) return st;
    shape_params *sp = (shape_params *)p->params;
    sp->n = 1;
    sp->v[0] = bf_tensor_numel(p->in[0]);
    bf__set_shape(p->out[0], BF_I64, 0, NULL);
    return BF_OK;
}

/* ---- Constant ---- */

typedef struct const_params {
    size_t attr;          /* index of the value attribute in the node; it outlives the plan */
} const_params;
static_assert(sizeof(const_params) <= BF__OP_PARAMS_MAX, "const_params must fit in params");

static const char *const const_value_attrs[] = {"value", "value_float", "value_floats", "value_int",
                                                "value_ints", "sparse_value", "value_string",
                                                "value_strings"};

static bf_status const_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    const bf__attr *a = NULL;
    for (size_t i = 0; i < n->n_attrs; i++) {
        for (size_t k = 0; k < sizeof const_value_attrs / sizeof *const_value_attrs; k++) {
            if (strcmp(n->attrs[i].name, const_value_attrs[k]) != 0) continue;
            if (a)
                return bf__node_error(err, n, BF_EINVAL, "has both '%s' and '%s'; exactly one value "
                                      "attribute is allowed", a->name, n->attrs[i].name);
            a = &n->attrs[i];
            ((const_params *)p->params)->attr = i;
        }
    }
    if (!a)
        return bf__node_error(err, n, BF_EINVAL, "has no value attribute (one of value, value_float, "
                              "value_floats, value_int, value_ints)");
    bf_tensor *y = p->out[0];
    int64_t len = (int64_t)a->n;
    if (strcmp(a->name, "value") == 0) {
        const bf_tensor *t = a->t;
        if (a->type != BF__ATTR_TENSOR || !t)
            return bf__node_error(err, n, BF_EFORMAT, "attribute 'value' must be a tensor");
        if (bf_dtype_size(t->dtype) == 0 || (bf_tensor_nbytes(t) && !t->data))
            return bf__node_error(err, n, BF_EFORMAT, "attribute 'value' has no usable data");
        bf__set_shape(y, t->dtype, t->ndim, t->dims);
    } else if (strcmp(a->name, "value_float") == 0 && a->type == BF__ATTR_FLOAT) {
        bf__set_shape(y, BF_F32, 0, NULL);
    } else if (strcmp(a->name, "value_floats") == 0 && a->type == BF__ATTR_FLOATS) {
        bf__set_shape(y, BF_F32, 1, &len);
    } else if (strcmp(a->name, "value_int") == 0 && a->type == BF__ATTR_INT) {
        bf__set_shape(y, BF_I64, 0, NULL);
    } else if (strcmp(a->name, "value_ints") == 0 && a->type == BF__ATTR_INTS) {
        bf__set_shape(y, BF_I64, 1, &len);
    } else if (strncmp(a->name, "value_string", 12) == 0 || strcmp(a->name, "sparse_value") == 0) {
        return bf__node_error(err, n, BF_EUNSUPPORTED, "attribute '%s' is not supported: bitflip "
                              "handles dense numeric constants only", a->name);
    } else {
        return bf__node_error(err, n, BF_EFORMAT, "attribute '%s' has the wrong type", a->name);
    }
    return BF_OK;
}

static bf_status const_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const bf__attr *a = &c->node->attrs[((const const_params *)c->params)->attr];
    const void *src;
    switch (a->type) {
    case BF__ATTR_TENSOR: src = a->t->data; break;
    case BF__ATTR_FLOAT: src = &a->f; break;
    case BF__ATTR_FLOATS: src = a->floats; break;
    case BF__ATTR_INT: src = &a->i; break;
    default: src = a->ints; break;
    }
    size_t nb = bf_tensor_nbytes(c->out[0]);
    if (nb) memcpy(c->out[0]->data, src, nb);
    return BF_OK;
}

/* ---- ConstantOfShape ---- */

typedef struct cos_params {
    size_t esize;
    unsigned char value[8];
} cos_params;
static_assert(sizeof(cos_params) <= BF__OP_PARAMS_MAX, "cos_params must fit in params");

static bf_status cos_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    cos_params *cp = (cos_params *)p->params;
    int64_t dims[BF_MAX_DIMS];
    int nd;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = bf__read_ints(n, "input", p->in[0], dims, BF_MAX_DIMS, &nd, err);
    if (st) return st;
    if ((st = bf__check_dims(n, "shape", nd, dims, err))) return st;
    bf_dtype dt = BF_F32;
    memset(cp->value, 0, sizeof cp->value);
    const bf__attr *a = bf__node_attr(n, "value");
    if (a) {
        const bf_tensor *t = a->t;
        if (a->type != BF__ATTR_TENSOR || !t)
            return bf__node_error(err, n, BF_EFORMAT, "attribute 'value' must be a tensor");
        if (bf_tensor_numel(t) != 1)
            return bf__node_error(err, n, BF_EINVAL, "attribute 'value' must hold one element, has %lld",
                                  (long long)bf_tensor_numel(t));
        size_t es = bf_dtype_size(t->dtype);
        if (es == 0 || es > sizeof cp->value || !t->data)
            return bf__node_error(err, n, BF_EFORMAT, "attribute 'value' has no usable data");
        dt = t->dtype;
        memcpy(cp->value, t->data, es);
    }
    cp->esize = bf_dtype_size(dt);
    bf__set_shape(p->out[0], dt, nd, dims);
    return BF_OK;
}

static inline void fill(unsigned char *restrict o, const unsigned char *restrict v, int64_t count,
                        size_t es)
{
    for (int64_t k = 0; k < count; k++) memcpy(o + (size_t)k * es, v, es);
}

static bf_status cos_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const cos_params *cp = c->params;
    unsigned char *o = c->out[0]->data;
    int64_t count = bf_tensor_numel(c->out[0]);
    switch (cp->esize) {
    case 1: memset(o, cp->value[0], (size_t)count); break;
    case 2: fill(o, cp->value, count, 2); break;
    case 4: fill(o, cp->value, count, 4); break;
    default: fill(o, cp->value, count, 8); break;
    }
    return BF_OK;
}

/* ---- Identity, Dropout ---- */

static bf_status identity_prepare(bf__prep *p, bf_error *err)
{
    bf_status st = bf__need_inputs(p, 1, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
    return BF_OK;
}

static int dropout_has_mask(int n_out, bf_tensor *const *out)
{
    return n_out > 1 && out[1] != NULL;
}

/* In training mode Dropout draws a random mask, and a fault campaign needs
 * a deterministic model; with a ratio of 0 it keeps every element and scales
 * by 1 / (1 - 0): the identity. torchvision 0.14's Swin calls F.dropout
 * without training=, so its export has training_mode true with ratio 0. */
static bf_status training_error(const bf__node *n, float ratio, bf_error *err)
{
    return bf__node_error(err, n, BF_EUNSUPPORTED,
                          "training_mode is true with ratio %g: the output would be random, and a fault "
                          "campaign needs a deterministic model (training mode is accepted only with ratio "
                          "0, where Dropout is the identity); export the model in eval mode "
                          "(model.eval() before torch.onnx.export)", (double)ratio);
}

/* The ratio input if present (opset 12 on), else the attribute's `def`;
 * NaN when it is not known (computed at run time, or not one float32). */
static float dropout_ratio(const bf_tensor *r, float def)
{
    if (!r) return def;
    if (!r->data || r->dtype != BF_F32 || bf_tensor_numel(r) != 1) return NAN;
    return *(const float *)r->data;
}

static bf_status dropout_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    float ratio;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = bf__attr_float(n, "ratio", 0.5f, &ratio, err);   /* before opset 12 */
    if (st) return st;
    const bf_tensor *tm = p->n_in > 2 ? p->in[2] : NULL;
    if (tm) {
        if (tm->dtype != BF_BOOL || bf_tensor_numel(tm) != 1)
            return bf__node_error(err, n, BF_EFORMAT, "input 'training_mode' must be one bool, got %s "
                                  "with %lld elements", bf_dtype_name(tm->dtype),
                                  (long long)bf_tensor_numel(tm));
        /* unknown now: checked again on every run */
        if (tm->data && *(const unsigned char *)tm->data) {
            const bf_tensor *r = p->n_in > 1 ? p->in[1] : NULL;
            float rv = dropout_ratio(r, 0.5f);
            if (r && r->data && (r->dtype != BF_F32 || bf_tensor_numel(r) != 1))
                return bf__node_error(err, n, BF_EUNSUPPORTED, "training_mode is true and input 'ratio' is %s "
                                      "with %lld elements; only one float32 ratio of 0 is accepted in training mode",
                                      bf_dtype_name(r->dtype), (long long)bf_tensor_numel(r));
            if (rv != 0.0f && rv == rv) return training_error(n, rv, err);
        }
    }
    const bf_tensor *x = p->in[0];
    bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
    if (dropout_has_mask(p->n_out, p->out)) bf__set_shape(p->out[1], BF_BOOL, x->ndim, x->dims);
    return BF_OK;
}

static bf_status dropout_run(const bf__ctx *c, bf_error *err)
{
    const bf_tensor *tm = c->n_in > 2 ? c->in[2] : NULL;
    if (tm && *(const unsigned char *)tm->data) {
        float rv = dropout_ratio(c->n_in > 1 ? c->in[1] : NULL, 0.5f);
        if (rv != 0.0f) return training_error(c->node, rv, err);
    }
    bf__run_copy(c, err);
    if (dropout_has_mask(c->n_out, c->out)) {
        size_t nb = bf_tensor_nbytes(c->out[1]);
        if (nb) memset(c->out[1]->data, 1, nb);
    }
    return BF_OK;
}

/* ---- Flatten, Reshape ---- */

static bf_status flatten_prepare(bf__prep *p, bf_error *err)
{
    int64_t axis;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = bf__attr_int(p->node, "axis", 1, &axis, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int r = x->ndim;
    if (axis < -r || axis > r)
        return bf__node_error(err, p->node, BF_ERANGE, "axis %lld out of range for rank %d "
                              "(valid: %d..%d)", (long long)axis, r, -r, r);
    if (axis < 0) axis += r;
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < r; d++) dims[d >= axis] *= x->dims[d];
    bf__set_shape(p->out[0], x->dtype, 2, dims);
    return BF_OK;
}

static bf_status reshape_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    int64_t req[BF_MAX_DIMS], dims[BF_MAX_DIMS], allowzero = 0;
    int nd;
    bf_status st = bf__need_inputs(p, 2, err);
    if (!st) st = bf__read_ints(n, "shape", p->in[1], req, BF_MAX_DIMS, &nd, err);
    if (!st && p->opset >= 14) st = bf__attr_int(n, "allowzero", 0, &allowzero, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];

    char rs[96], xs[96];
    bf_shape_str(req, nd, rs, sizeof rs);
    bf_shape_str(x->dims, x->ndim, xs, sizeof xs);
    int64_t numel = bf_tensor_numel(x), known = 1;
    int infer = -1, zero = 0;
    for (int i = 0; i < nd; i++) {
        dims[i] = req[i];
        if (req[i] == -1) {
            if (infer >= 0)
                return bf__node_error(err, n, BF_EINVAL, "requested shape %s has more than one -1", rs);
            infer = i;
            continue;
        }
        if (req[i] < -1)
            return bf__node_error(err, n, BF_EINVAL, "requested shape %s has invalid dim %lld", rs,
                                  (long long)req[i]);
        if (req[i] == 0 && !allowzero) {
            if (i >= x->ndim)
                return bf__node_error(err, n, BF_ESHAPE, "requested shape %s copies dim %d (0) but the "
                                      "input %s has rank %d", rs, i, xs, x->ndim);
            dims[i] = x->dims[i];
        }
        zero |= req[i] == 0;
        if (dims[i] > 0 && known > INT64_MAX / dims[i])
            return bf__node_error(err, n, BF_ESHAPE, "requested shape %s is too large for input of "
                                  "shape %s", rs, xs);
        known *= dims[i];
    }
    if (allowzero && zero && infer >= 0)
        return bf__node_error(err, n, BF_EINVAL, "requested shape %s has both 0 and -1, which "
                              "allowzero=1 forbids", rs);
    if (infer >= 0 && known == 0 && numel == 0) {
        /* -1 beside a 0 on an empty input can be anything (the spec leaves
         * it open; PyTorch's view and ONNX Runtime refuse it): 0. An
         * exported detector reaches it when a fault leaves no proposals,
         * the branch PyTorch's eager code skips (torchvision's BoxCoder
         * reshapes only if there are boxes), and an empty result follows */
        dims[infer] = 0;
    } else if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            return bf__node_error(err, n, BF_ESHAPE, "cannot reshape input of shape %s (%lld elements) "
                                  "to requested shape %s", xs, (long long)numel, rs);
        dims[infer] = numel / known;
        known = numel;
    }
    if (known != numel)
        return bf__node_error(err, n, BF_ESHAPE, "cannot reshape input of shape %s (%lld elements) to "
                              "requested shape %s (%lld elements)", xs, (long long)numel, rs,
                              (long long)known);
    bf__set_shape(p->out[0], x->dtype, nd, dims);
    return BF_OK;
}

/* ---- Squeeze, Unsqueeze ---- */

/* Axes come from the attribute before opset 13 and from input 1 after.
 * *count = -1 when absent. */
static bf_status read_axes(bf__prep *p, int64_t *axes, int max, int *count, bf_error *err)
{
    const bf__node *n = p->node;
    *count = -1;
    bf_status st = bf__need_inputs(p, 1, err);
    if (st) return st;
    if (p->opset < 13) return bf__attr_ints(n, "axes", axes, max, count, err);
    if (bf__node_attr(n, "axes"))
        return bf__node_error(err, n, BF_EINVAL, "attribute 'axes' was replaced by input 'axes' in "
                              "opset 13 (this model is opset %lld)", (long long)p->opset);
    if (p->n_in > 1 && p->in[1]) return bf__read_ints(n, "axes", p->in[1], axes, max, count, err);
    return BF_OK;
}

static bf_status squeeze_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    int64_t axes[BF_MAX_DIMS], dims[BF_MAX_DIMS];
    int na, drop[BF_MAX_DIMS] = {0};
    bf_status st = read_axes(p, axes, BF_MAX_DIMS, &na, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int r = x->ndim;
    if (na == 0) na = -1;   /* as ONNX Runtime does: empty axes squeeze every 1-dim */
    char xs[96];
    for (int i = 0; i < na; i++) {
        int axis;
        if (r == 0)
            return bf__node_error(err, n, BF_ERANGE, "axis %lld out of range for a scalar input",
                                  (long long)axes[i]);
        if ((st = bf__norm_axis(n, axes[i], r, &axis, err))) return st;
        if (x->dims[axis] != 1)
            return bf__node_error(err, n, BF_ESHAPE, "cannot squeeze axis %d: its dim is %lld, not 1 "
                                  "(input shape %s)", axis, (long long)x->dims[axis],
                                  bf_shape_str(x->dims, r, xs, sizeof xs));
        drop[axis] = 1;
    }
    int k = 0;
    for (int d = 0; d < r; d++)
        if (!(na < 0 ? x->dims[d] == 1 : drop[d])) dims[k++] = x->dims[d];
    bf__set_shape(p->out[0], x->dtype, k, dims);
    return BF_OK;
}

/* bf.SqueezeIfOne (exec/fuse_if.c): torch.squeeze(x, axis), which squeezes
 * the axis when its dim is 1 and is the identity otherwise; the exporter
 * writes it as an If on Shape(x)[axis] == 1 wherever it cannot tell the dim's
 * size. A plan knows every shape, so the choice is made here. */
bf_status bf__squeeze_if_one_prepare(bf__prep *p, bf_error *err)
{
    int64_t a, dims[BF_MAX_DIMS];
    int axis;
    bf_status st = bf__need_inputs(p, 1, err);
    if (st || (st = bf__attr_int(p->node, "axis", 0, &a, err))) return st;
    const bf_tensor *x = p->in[0];
    if (x->ndim == 0) return bf__node_error(err, p->node, BF_ERANGE, "axis %lld out of range for a scalar input", (long long)a);
    if ((st = bf__norm_axis(p->node, a, x->ndim, &axis, err))) return st;
    int k = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != axis || x->dims[d] != 1) dims[k++] = x->dims[d];
    bf__set_shape(p->out[0], x->dtype, k, dims);
    return BF_OK;
}

static bf_status unsqueeze_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    int64_t axes[BF_MAX_DIMS], dims[BF_MAX_DIMS];
    int na, add[BF_MAX_DIMS] = {0};
    bf_status st = read_axes(p, axes, BF_MAX_DIMS, &na, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int r = x->ndim;
    if (na < 0)
        return bf__node_error(err, n, BF_EINVAL, p->opset < 13 ? "attribute 'axes' is required"
                                                              : "input 'axes' is required");
    int R = r + na;
    if (R > BF_MAX_DIMS)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "output rank %d exceeds the supported %d", R,
                              BF_MAX_DIMS);
    for (int i = 0; i < na; i++) {
        int axis;
        if ((st = bf__norm_axis(n, axes[i], R, &axis, err))) return st;
        if (add[axis]++)
            return bf__node_error(err, n, BF_EINVAL, "axis %d appears more than once in axes", axis);
    }
    for (int d = 0, k = 0; d < R; d++) dims[d] = add[d] ? 1 : x->dims[k++];
    bf__set_shape(p->out[0], x->dtype, R, dims);
    return BF_OK;
}

const bf__op bf__ops_shape[] = {
    {"Shape", 1, 1, 1, 1, 1, shape_prepare, shape_run},
    {"Size", 1, 1, 1, 1, 1, size_prepare, shape_run},
    {"Constant", 0, 0, 1, 1, 0, const_prepare, const_run},
    {"ConstantOfShape", 1, 1, 1, 1, 0, cos_prepare, cos_run},
    {"Identity", 1, 1, 1, 1, 0, identity_prepare, bf__run_copy},
    {"Dropout", 1, 3, 1, 2, 0, dropout_prepare, dropout_run},
    {"Flatten", 1, 1, 1, 1, 0, flatten_prepare, bf__run_copy},
    {"Reshape", 2, 2, 1, 1, 0, reshape_prepare, bf__run_copy},
    {"Squeeze", 1, 2, 1, 1, 0, squeeze_prepare, bf__run_copy},
    {"Unsqueeze", 1, 2, 1, 1, 0, unsqueeze_prepare, bf__run_copy},
    {"Transpose", 1, 1, 1, 1, 0, bf__transpose_prepare, bf__strided_run},
    {"Slice", 1, 5, 1, 1, 0, bf__slice_prepare, bf__strided_run},
    {"Expand", 2, 2, 1, 1, 0, bf__expand_prepare, bf__strided_run},
    {"Gather", 2, 2, 1, 1, 0, bf__gather_prepare, bf__gather_run},
    {"Concat", 1, -1, 1, 1, 0, bf__concat_prepare, bf__concat_run},
    {0},
};
