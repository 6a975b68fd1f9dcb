#include "op_harness.h"

#include "exec/plan_impl.h"
#include "exec/step_access.h"
#include "base/wpack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bf_status th_run_op(const char *op_name, int64_t opset, bf__attr *attrs, size_t n_attrs,
                    const bf_tensor *const *inputs, int n_in, bf_tensor *outputs, int n_out,
                    bf_error *err)
{
    return th_run_op_act(op_name, opset, attrs, n_attrs, inputs, n_in, outputs, n_out, NULL, err);
}

/* channels: a Conv's outputs one channel at a time (bf__conv_channel) */
static bf_status run_op(const char *op_name, int64_t opset, bf__attr *attrs, size_t n_attrs,
                        const bf_tensor *const *inputs, int n_in, bf_tensor *outputs, int n_out, const bf__act *act,
                        const float *res, int res_a, const bf__bnorm *bn, int channels, int *packed, bf__cpos *cpos, bf_error *err);

bf_status th_run_op_act(const char *op_name, int64_t opset, bf__attr *attrs, size_t n_attrs,
                        const bf_tensor *const *inputs, int n_in, bf_tensor *outputs, int n_out, const bf__act *act,
                        bf_error *err)
{
    return run_op(op_name, opset, attrs, n_attrs, inputs, n_in, outputs, n_out, act, NULL, 0, NULL, 0, NULL, NULL, err);
}

bf_status th_run_conv_res(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in, bf_tensor *out,
                          const bf__act *act, const float *res, int res_a, bf_error *err)
{
    return run_op("Conv", 13, attrs, n_attrs, inputs, n_in, out, 1, act, res, res_a, NULL, 0, NULL, NULL, err);
}

bf_status th_run_conv_bn(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in, bf_tensor *out,
                         const bf__act *act, const bf__bnorm *bn, const float *res, int res_a, bf_error *err)
{
    return run_op("Conv", 13, attrs, n_attrs, inputs, n_in, out, 1, act, res, res_a, bn, 0, NULL, NULL, err);
}

bf_status th_run_conv_wpk(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in, bf_tensor *out,
                          const bf__act *act, const float *res, int res_a, int *packed, bf_error *err)
{
    return run_op("Conv", 13, attrs, n_attrs, inputs, n_in, out, 1, act, res, res_a, NULL, 0, packed, NULL, err);
}

bf_status th_run_conv_pos(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in, bf_tensor *out,
                          const bf__act *act, const float *res, int res_a, int *packed, bf__cpos *cpos, bf_error *err)
{
    return run_op("Conv", 13, attrs, n_attrs, inputs, n_in, out, 1, act, res, res_a, NULL, 0, packed, cpos, err);
}

bf_status th_run_conv_channels(bf__attr *attrs, size_t n_attrs, const bf_tensor *const *inputs, int n_in,
                               bf_tensor *out, bf_error *err)
{
    return run_op("Conv", 13, attrs, n_attrs, inputs, n_in, out, 1, NULL, NULL, 0, NULL, 1, NULL, NULL, err);
}

static bf_status run_op(const char *op_name, int64_t opset, bf__attr *attrs, size_t n_attrs,
                        const bf_tensor *const *inputs, int n_in, bf_tensor *outputs, int n_out, const bf__act *act,
                        const float *res, int res_a, const bf__bnorm *bn, int channels, int *packed, bf__cpos *cpos, bf_error *err)
{
    const bf__op *op = bf__op_find(op_name);
    if (!op) return bf_error_set(err, BF_EUNSUPPORTED, "no op %s", op_name);
    bf__node node = {0};
    node.name = (char *)"test";
    node.op_type = (char *)op_name;
    node.op = op;
    node.n_in = n_in;
    node.n_out = n_out;
    node.n_attrs = n_attrs;
    node.attrs = attrs;

    bf__prep *p = calloc(1, sizeof *p);
    if (!p) return BF_ENOMEM;
    p->node = &node;
    p->opset = opset;
    p->n_in = n_in;
    p->n_out = n_out;
    for (int i = 0; i < n_in; i++) p->in[i] = inputs[i];
    for (int i = 0; i < n_out; i++) {
        memset(&outputs[i], 0, sizeof outputs[i]);
        p->out[i] = &outputs[i];
    }
    bf_status st = op->prepare(p, err);
    if (st != BF_OK) { free(p); return st; }
    for (int i = 0; i < n_out; i++) {
        size_t nb = bf_tensor_nbytes(&outputs[i]);
        outputs[i].data = calloc(1, nb ? nb : 1);
        /* a list of positions: the others keep what the caller filled in */
        if (cpos && outputs[i].data) memset(outputs[i].data, POS_FILL, nb);
    }
    void *scratch = calloc(1, p->scratch ? p->scratch : 1);
    bf__ctx c = {.node = &node, .params = p->params, .n_in = n_in, .n_out = n_out,
                 .in = inputs, .out = p->out, .scratch = scratch, .act = act, .res = res, .res_a = res_a, .bn = bn,
                 .cpos = cpos};
    bf__wpack *wp = NULL;
    if (packed) {   /* W packed once, as plan_build.c's find_packed asks for it */
        bf__step step = {.node = &node, .n_in = n_in, .n_out = n_out, .in = (const bf_tensor **)inputs,
                         .params = p->params};
        wp = bf__wpack_create();
        c.packed = wp ? bf__linalg_packed(&step, wp) : NULL;
        *packed = c.packed != NULL;
    }
    if (channels) {   /* as the differential engine recomputes one output channel */
        bf__step step = {.node = &node, .n_in = n_in, .n_out = n_out, .params = p->params};
        for (int64_t ch = 0; st == BF_OK && ch < outputs[0].dims[1]; ch++)
            if (!bf__conv_channel(&step, 2, ch, inputs[0]->data, inputs[1]->data, n_in > 2 && inputs[2] ? inputs[2]->data : NULL,
                                  outputs[0].data, scratch))
                st = bf_error_set(err, BF_EINVAL, "bf__conv_channel refused channel %lld", (long long)ch);
    } else {
        st = op->run(&c, err);
    }
    free(scratch);
    bf__wpack_free(wp);
    free(p);
    if (st != BF_OK) th_free(outputs, n_out);
    return st;
}

void th_free(bf_tensor *outputs, int n_out)
{
    for (int i = 0; i < n_out; i++) { free(outputs[i].data); outputs[i].data = NULL; }
}

bf_tensor th_tensor(bf_dtype dt, const void *data, int ndim, const int64_t *dims)
{
    bf_tensor t = {0};
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    size_t nb = bf_tensor_nbytes(&t);
    t.data = calloc(1, nb ? nb : 1);
    if (data && t.data) memcpy(t.data, data, nb);
    return t;
}

bf_tensor th_tensor_f32(const float *data, int ndim, const int64_t *dims) { return th_tensor(BF_F32, data, ndim, dims); }
bf_tensor th_tensor_i64(const int64_t *data, int ndim, const int64_t *dims) { return th_tensor(BF_I64, data, ndim, dims); }

bf_tensor th_tensor_rand(uint64_t seed, int ndim, const int64_t *dims)
{
    bf_tensor t = th_tensor(BF_F32, NULL, ndim, dims);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    float *d = t.data;
    for (int64_t i = 0; i < bf_tensor_numel(&t); i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;    /* xorshift64 */
        d[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return t;
}

void th_tensor_free(bf_tensor *t) { free(t->data); t->data = NULL; }

static double elem(const bf_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case BF_F32: return ((const float *)t->data)[i];
    case BF_I64: return (double)((const int64_t *)t->data)[i];
    case BF_I32: return ((const int32_t *)t->data)[i];
    case BF_BOOL: case BF_U8: return ((const uint8_t *)t->data)[i];
    default: return NAN;
    }
}

double th_compare(const bf_tensor *got, const bf_tensor *want, double atol, double rtol)
{
    if (got->dtype != want->dtype || got->ndim != want->ndim) return INFINITY;
    for (int i = 0; i < got->ndim; i++)
        if (got->dims[i] != want->dims[i]) return INFINITY;
    double worst = 0;
    for (int64_t i = 0; i < bf_tensor_numel(want); i++) {
        double a = elem(got, i), b = elem(want, i);
        if (isnan(a) || isnan(b)) { if (isnan(a) != isnan(b)) return INFINITY; continue; }
        if (isinf(a) || isinf(b)) { if (a != b) return INFINITY; continue; }
        double r = fabs(a - b) / (atol + rtol * fabs(b));
        if (r > worst) worst = r;
    }
    return worst;
}

bf__attr th_attr_int(const char *name, int64_t v) { return (bf__attr){.name = (char *)name, .type = BF__ATTR_INT, .i = v}; }
bf__attr th_attr_float(const char *name, float v) { return (bf__attr){.name = (char *)name, .type = BF__ATTR_FLOAT, .f = v}; }
bf__attr th_attr_string(const char *name, const char *s) { return (bf__attr){.name = (char *)name, .type = BF__ATTR_STRING, .s = (char *)s}; }
bf__attr th_attr_ints(const char *name, const int64_t *v, size_t n)
{
    return (bf__attr){.name = (char *)name, .type = BF__ATTR_INTS, .ints = (int64_t *)v, .n = n};
}

size_t th_count_op(const bf_model *m, const char *op)
{
    size_t k = 0;
    for (size_t i = 0; i < bf_model_num_nodes(m); i++) k += strcmp(bf_model_node_op(m, i), op) == 0;
    return k;
}

bf_status th_plan_for(const bf_model *m, const int64_t *dims, int ndim, bf_plan **p, bf_error *err)
{
    const int64_t *shapes[1] = {dims};
    int nd[1] = {ndim};
    const char *names[8];
    int64_t sizes[8];
    size_t n = 0;
    bf_status st = bf_plan_dims_from(m, shapes, nd, names, sizes, 8, &n, err);
    if (st != BF_OK) return st;
    bf_plan_opts o = {.n_dims = n, .dim_names = names, .dim_sizes = sizes};
    return bf_plan_create_opts(m, dims[0], &o, p, err);
}
