/* Helpers every op family uses: attribute readers, errors, shapes. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "exec/op.h"
#include "sum16.h"

bf_status bf__node_error(bf_error *err, const bf__node *node, bf_status status, const char *fmt,
                         ...)
{
    if (!err) return status;
    char msg[BF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bf_error_set(err, status, "node '%.120s' (%.40s): %.340s", node->name ? node->name : "",
                        node->op_type, msg);
}

const bf__attr *bf__node_attr(const bf__node *node, const char *name)
{
    for (size_t i = 0; i < node->n_attrs; i++)
        if (strcmp(node->attrs[i].name, name) == 0) return &node->attrs[i];
    return NULL;
}

static bf_status wrong_type(const bf__node *n, const char *name, const char *want, bf_error *err)
{
    return bf__node_error(err, n, BF_EFORMAT, "attribute '%s' must be %s", name, want);
}

bf_status bf__attr_int(const bf__node *n, const char *name, int64_t def, int64_t *out,
                       bf_error *err)
{
    const bf__attr *a = bf__node_attr(n, name);
    if (!a) { *out = def; return BF_OK; }
    if (a->type != BF__ATTR_INT) return wrong_type(n, name, "an int", err);
    *out = a->i;
    return BF_OK;
}

bf_status bf__attr_float(const bf__node *n, const char *name, float def, float *out,
                         bf_error *err)
{
    const bf__attr *a = bf__node_attr(n, name);
    if (!a) { *out = def; return BF_OK; }
    if (a->type == BF__ATTR_INT) { *out = (float)a->i; return BF_OK; }
    if (a->type != BF__ATTR_FLOAT) return wrong_type(n, name, "a float", err);
    *out = a->f;
    return BF_OK;
}

bf_status bf__attr_string(const bf__node *n, const char *name, const char *def,
                          const char **out, bf_error *err)
{
    const bf__attr *a = bf__node_attr(n, name);
    if (!a) { *out = def; return BF_OK; }
    if (a->type != BF__ATTR_STRING) return wrong_type(n, name, "a string", err);
    *out = a->s;
    return BF_OK;
}

bf_status bf__attr_ints(const bf__node *n, const char *name, int64_t *out, int max, int *count,
                        bf_error *err)
{
    const bf__attr *a = bf__node_attr(n, name);
    if (!a) { *count = -1; return BF_OK; }
    if (a->type == BF__ATTR_INT && max >= 1) { out[0] = a->i; *count = 1; return BF_OK; }
    if (a->type != BF__ATTR_INTS) return wrong_type(n, name, "a list of ints", err);
    if (a->n > (size_t)max)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "attribute '%s' has %zu values, at most %d supported",
                              name, a->n, max);
    memcpy(out, a->ints, a->n * sizeof *out);
    *count = (int)a->n;
    return BF_OK;
}

void bf__set_shape(bf_tensor *t, bf_dtype dtype, int ndim, const int64_t *dims)
{
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
}

bf_status bf__broadcast_shape(const bf__node *node, const bf_tensor *a, const bf_tensor *b,
                              bf_tensor *out, bf_error *err)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t dims[BF_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            return bf__node_error(err, node, BF_ESHAPE, "shapes %s and %s do not broadcast (dim %d: %lld vs %lld)",
                                  bf_shape_str(a->dims, a->ndim, sa, sizeof sa),
                                  bf_shape_str(b->dims, b->ndim, sb, sizeof sb), i, (long long)da,
                                  (long long)db);
        }
        dims[i] = da == 1 ? db : da;
    }
    out->ndim = nd;
    memcpy(out->dims, dims, sizeof(int64_t) * (size_t)nd);
    return BF_OK;
}

bf_status bf__norm_axis(const bf__node *node, int64_t axis, int rank, int *out, bf_error *err)
{
    if (axis < -rank || axis >= (rank > 0 ? rank : 1))
        return bf__node_error(err, node, BF_ERANGE, "axis %lld out of range for rank %d",
                              (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return BF_OK;
}

bf_status bf__read_ints(const bf__node *node, const char *what, const bf_tensor *t, int64_t *out,
                        int max, int *count, bf_error *err)
{
    if (!t->data)
        return bf__node_error(err, node, BF_EUNSUPPORTED,
                              "input '%s' must be known when the plan is built (a constant or "
                              "shape arithmetic), but it depends on the data", what);
    if (t->dtype != BF_I64 && t->dtype != BF_I32)
        return bf__node_error(err, node, BF_EFORMAT, "input '%s' must be int64 or int32, got %s", what,
                              bf_dtype_name(t->dtype));
    if (t->ndim > 1)
        return bf__node_error(err, node, BF_ESHAPE, "input '%s' must be 1-D, got rank %d", what, t->ndim);
    int64_t n = bf_tensor_numel(t);
    if (n > max)
        return bf__node_error(err, node, BF_EUNSUPPORTED, "input '%s' has %lld values, at most %d supported",
                              what, (long long)n, max);
    for (int64_t i = 0; i < n; i++)
        out[i] = t->dtype == BF_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    *count = (int)n;
    return BF_OK;
}

bf_status bf__want_f32(const bf__prep *p, int i, const char *what, bf_error *err)
{
    if (i >= p->n_in || !p->in[i])
        return bf__node_error(err, p->node, BF_EFORMAT, "input %s is required but omitted", what);
    if (p->in[i]->dtype != BF_F32)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "input %s is %s; only float32 is supported",
                              what, bf_dtype_name(p->in[i]->dtype));
    return BF_OK;
}

int bf__output_wanted(const bf__prep *p, int i)
{
    return i < p->n_out && p->out[i] && (!p->node->out || p->node->out[i] >= 0);
}

float bf__sum16_f32(const float *restrict x, int64_t n) { return bf__sum16_body(x, n); }
