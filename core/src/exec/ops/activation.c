/* The activation family. The float maps (HardSigmoid ... Gelu) are kinds
 * of elementwise.c's unary machinery, so the differential engine recomputes
 * them on changed elements alone (bf__unary_f32); their formulas and NaN/Inf
 * behaviour are described there. Here: PRelu, whose slope broadcasts to X,
 * and LogSoftmax. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exec/op.h"
#include "elementwise_impl.h"

/* ---- PRelu ------------------------------------------------------------- */

/* x < 0 ? x * slope : x. The slope broadcasts to X's shape one way only
 * (torch exports [C, 1, 1] against [N, C, H, W], or a single [1] slope);
 * NaN passes through as in torch.prelu. */
BF__ROW_FN(prelu_f32) { BF__BIN_LOOP(float, float, float, x < 0.0f ? x * y : x); }

static bf_status prelu_prepare(bf__prep *p, bf_error *err)
{
    const bf_tensor *x = p->in[0], *s = p->n_in > 1 ? p->in[1] : NULL;
    if (!x || !s) return bf__node_error(err, p->node, BF_EFORMAT, "inputs X and slope are both required");
    if (x->dtype != BF_F32 || s->dtype != BF_F32)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "inputs X (%s) and slope (%s) must be float32",
                              bf_dtype_name(x->dtype), bf_dtype_name(s->dtype));
    int fits = s->ndim <= x->ndim;
    for (int j = 0; fits && j < s->ndim; j++) {
        int64_t d = s->dims[s->ndim - 1 - j];
        fits = d == 1 || d == x->dims[x->ndim - 1 - j];
    }
    if (!fits) {
        char xs[96], ss[96];
        return bf__node_error(err, p->node, BF_ESHAPE,
                              "slope of shape %s does not broadcast to X of shape %s; it must be "
                              "X's trailing dims or 1s, e.g. [C, 1, 1] for [N, C, H, W]",
                              bf_shape_str(s->dims, s->ndim, ss, sizeof ss),
                              bf_shape_str(x->dims, x->ndim, xs, sizeof xs));
    }
    return bf__binary_setup(p, prelu_f32, BF_F32, err);
}

/* ---- LogSoftmax -------------------------------------------------------- */

/* As torch.log_softmax: x - m - log(sum(exp(x - m))) with m the max along
 * the axis, the sum in double. A NaN in the slice, or +Inf (Inf - Inf),
 * makes the slice NaN; -Inf entries give -Inf; a slice of all -Inf is NaN.
 * Opset < 13 flattens at `axis` (default 1) to 2-D, as Softmax does; opset
 * 13+ takes the one axis (default -1). Layout: [outer, n, inner]. */
typedef struct logsoftmax_params {
    int64_t outer, n, inner;
} logsoftmax_params;
static_assert(sizeof(logsoftmax_params) <= BF__OP_PARAMS_MAX, "LogSoftmax params too large");

static bf_status logsoftmax_prepare(bf__prep *p, bf_error *err)
{
    logsoftmax_params *q = (logsoftmax_params *)p->params;
    bf_status st = bf__softmax_layout(p, &q->outer, &q->n, &q->inner, err);
    if (st != BF_OK) return st;
    p->scratch = 0;
    return BF_OK;
}

/* One slice: n values `stride` apart. y may be x (in place). */
static void logsoftmax_slice(float *y, const float *x, int64_t n, int64_t stride)
{
    if (n == 0) return;
    float m = x[0];
    for (int64_t k = 1; k < n; k++) {
        float v = x[k * stride];
        m = ((v > m) | (v != v)) ? v : m;   /* NaN sticks */
    }
    double s = 0;
    for (int64_t k = 0; k < n; k++) s += exp((double)x[k * stride] - (double)m);
    float l = (float)log(s);
    for (int64_t k = 0; k < n; k++) y[k * stride] = (x[k * stride] - m) - l;
}

static bf_status logsoftmax_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const logsoftmax_params *q = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    for (int64_t o = 0; o < q->outer; o++)
        for (int64_t j = 0; j < q->inner; j++) {
            int64_t base = o * q->n * q->inner + j;
            logsoftmax_slice(y + base, x + base, q->n, q->inner);
        }
    return BF_OK;
}

/* ---- the table --------------------------------------------------------- */

#define UNARY(NAME) {NAME, 1, 1, 1, 1, 0, bf__unary_prepare, bf__unary_run}

const bf__op bf__ops_activation[] = {
    UNARY("HardSigmoid"), UNARY("HardSwish"), UNARY("Elu"), UNARY("Selu"), UNARY("Celu"),
    UNARY("Softplus"), UNARY("Softsign"), UNARY("Mish"), UNARY("ThresholdedRelu"), UNARY("Gelu"),
    {"PRelu", 2, 2, 1, 1, 0, prelu_prepare, bf__binary_run},
    {"LogSoftmax", 1, 1, 1, 1, 0, logsoftmax_prepare, logsoftmax_run},
    {0},
};
