/* The reductions that walk the input through broadcast strides in
 * reverse (elementwise_broadcast.c's walk, elementwise_impl.h): ReduceSum,
 * ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
 * ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, registered in the
 * elementwise and reduce tables. The accumulator is the output repeated
 * (stride 0) along the reduced axes; float sums over one run of axes go in
 * PyTorch's order (torch_sum). reduce.c has the rest of the reduce family. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exec/op.h"
#include "exec/step_access.h"
#include "elementwise_impl.h"
#include "fastmath_impl.h"

/* ---- reductions -------------------------------------------------------- */

/* The walk is over the input in memory order; the accumulator (one slot per
 * output element) is operand 1, with stride 0 on reduced axes. The innermost
 * loop then either folds a contiguous row into one slot (reduced innermost
 * axes) or folds a row into a row of slots (a reduced middle axis, as in
 * [B, K, D] summed over K: vectorised over D).
 *
 * ReduceSum and ReduceMean over one run of adjacent axes sum in float in
 * PyTorch's order (torch_sum below), so partial sums overflow to Inf where
 * PyTorch's do. The other float sums (L1, L2, SumSquare, LogSum, LogSumExp,
 * Sum and Mean over separated axes) and products accumulate in double:
 * PyTorch sums in float with cascade summation; double is at least as
 * close to the exact sum, so results agree to float rounding, but a float
 * partial sum that PyTorch overflows to Inf (1e38 + 1e38 - 1e38, or squares
 * past 3e38 in ReduceL2) stays finite here when the exact result is finite.
 *
 * ReduceLogSumExp is torch.logsumexp's m + log(sum(exp(x - m))) with m the
 * max (0 when the max is +-Inf), so large inputs do not overflow as the ONNX
 * reference's log(sum(exp(x))) would; a +Inf gives +Inf, all -Inf give
 * -Inf, NaN gives NaN. Max and Min propagate NaN (torch.amax/amin).
 *
 * noop_with_empty_axes with no axes returns the input unchanged for every
 * kind, as the spec's text says; the ONNX reference instead squares it for
 * ReduceSumSquare (and copies for the others). */

enum { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD, RED_L1, RED_L2, RED_SUMSQ, RED_LOGSUM,
       RED_LOGSUMEXP };

static const char *const red_names[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                        "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                                        "ReduceLogSum", "ReduceLogSumExp"};

typedef struct reduce_params {
    bf__bcast b;                /* operand 0: input, operand 1: accumulator */
    int kind;
    int noop;               /* noop_with_empty_axes with no axes: copy */
    bf_dtype dtype;
    int64_t count;          /* input elements per output element */
    int64_t out_n;
    /* float ReduceSum/ReduceMean over one run of axes, in PyTorch's order:
     * X as [outer, n] (TS_INNER) or [outer, n, inner] (TS_MIDDLE), n summed;
     * TS_ONE: every reduced axis has 1 element (a bag of 1), out = 0 + x */
    int tmode;
    int64_t t_outer, t_n, t_inner;
} reduce_params;

enum { TS_NONE, TS_INNER, TS_MIDDLE, TS_ONE };
static_assert(sizeof(reduce_params) <= BF__OP_PARAMS_MAX, "reduce params too large");

/* Sum in double over 8 lanes: the lanes vectorise, double makes the order
 * of additions irrelevant at float precision. */
double bf__sum_f32_dacc(const float *x, int64_t n)
{
    double s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += x[i + j];
    double t = 0;
    for (; i < n; i++) t += x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}

/* The sums accumulate into an output filled with 0 (0 + -0 is +0). */
static void torch_sum(const reduce_params *q, const float *x, float *out)
{
    if (q->tmode == TS_ONE)
        memcpy(out, x, (size_t)q->out_n * sizeof *out);
    else
        bf__torch_sum_f32(x, q->t_outer, q->t_n, q->tmode == TS_INNER ? 1 : q->t_inner, out, bf__cpu_avx2());
    if (q->kind == RED_MEAN) {
        float c = (float)q->count;
        for (int64_t i = 0; i < q->out_n; i++) out[i] = (0.0f + out[i]) / c;
    } else {
        for (int64_t i = 0; i < q->out_n; i++) out[i] = 0.0f + out[i];
    }
}

/* NaN is sticky: once m is NaN, neither test picks x, and a NaN x is always
 * picked (`|`, not `||`: no branch, so loops using it vectorise). Between +0
 * and -0 the first seen is kept. */
#define MAX_NAN(m, x) ((((x) > (m)) | ((x) != (x))) ? (x) : (m))
#define MIN_NAN(m, x) ((((x) < (m)) | ((x) != (x))) ? (x) : (m))

static inline void max_into(float *m, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) m[i] = MAX_NAN(m[i], x[i]);
}

static inline void min_into(float *m, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) m[i] = MIN_NAN(m[i], x[i]);
}

/* Max of init and x[0..n), NaN if any is NaN; in 32 lanes, each a plain
 * elementwise max that vectorises. */
BF__ALWAYS_INLINE float max_f32_body(const float *x, int64_t n, float init)
{
    enum { LANES = 32 };
    float m[LANES];
    for (int j = 0; j < LANES; j++) m[j] = init;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) max_into(m, x + i, LANES);
    max_into(m, x + i, n - i);
    float r = init;
    for (int j = 0; j < LANES; j++) r = MAX_NAN(r, m[j]);
    return r;
}
#ifdef BF__HAVE_AVX2_COPY
BF__AVX2 static float max_f32_avx2(const float *x, int64_t n, float init) { return max_f32_body(x, n, init); }
BF__AVX512 static float max_f32_avx512(const float *x, int64_t n, float init) { return max_f32_body(x, n, init); }
#endif
float bf__max_f32_at(const float *x, int64_t n, float init, int simd)
{
#ifdef BF__HAVE_AVX2_COPY
    if (simd >= 2) return max_f32_avx512(x, n, init);
    if (simd) return max_f32_avx2(x, n, init);
#else
    (void)simd;
#endif
    return max_f32_body(x, n, init);
}

float bf__max_f32(const float *x, int64_t n, float init) { return bf__max_f32_at(x, n, init, bf__cpu_avx2()); }

static float min_f32_row(const float *x, int64_t n, float init)
{
    enum { LANES = 32 };
    float m[LANES];
    for (int j = 0; j < LANES; j++) m[j] = init;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) min_into(m, x + i, LANES);
    min_into(m, x + i, n - i);
    float r = init;
    for (int j = 0; j < LANES; j++) r = MIN_NAN(r, m[j]);
    return r;
}

/* Max or min into out: the whole reduction for ReduceMax/Min, the shift of
 * ReduceLogSumExp. */
static void extreme_f32(const reduce_params *q, const float *x, float *out, int min)
{
    const bf__bcast *b = &q->b;
    int last = b->nd - 1;
    int64_t inner = b->dims[last], rows = bf__bcast_rows(b), so = b->st[1][last];
    int64_t idx[BF_MAX_DIMS] = {0}, off[2] = {0, 0};
    for (int64_t i = 0; i < q->out_n; i++) out[i] = min ? INFINITY : -INFINITY;
    int simd = bf__cpu_avx2();   /* once, not per row: it reads the environment */
    for (int64_t r = 0; r < rows; r++, bf__bcast_next(b, idx, off)) {
        const float *xr = x + off[0];
        float *m = out + off[1];
        if (min) {
            if (!so) m[0] = min_f32_row(xr, inner, m[0]);
            else min_into(m, xr, inner);
        } else {
            if (!so) m[0] = bf__max_f32_at(xr, inner, m[0], simd);
            else max_into(m, xr, inner);
        }
    }
}

/* The term each input element adds to a float sum; LogSumExp's uses the
 * slot's shift `m`. */
static inline double red_term(int kind, float v, float m)
{
    switch (kind) {
    case RED_L1: return fabs((double)v);
    case RED_L2: case RED_SUMSQ: return (double)v * (double)v;
    case RED_LOGSUMEXP: return exp((double)v - (double)m);
    default: return v;
    }
}

static inline float lse_shift(float m) { return isinf(m) ? 0.0f : m; }

static void reduce_f32(const reduce_params *q, const float *x, float *out, double *acc)
{
    const bf__bcast *b = &q->b;
    int last = b->nd - 1, kind = q->kind;
    int64_t inner = b->dims[last], rows = bf__bcast_rows(b), so = b->st[1][last];
    int64_t idx[BF_MAX_DIMS] = {0}, off[2] = {0, 0};
    if (kind == RED_MAX || kind == RED_MIN) {
        extreme_f32(q, x, out, kind == RED_MIN);
        return;
    }
    if (q->tmode != TS_NONE) {
        torch_sum(q, x, out);
        return;
    }
    if (kind == RED_LOGSUMEXP) {
        extreme_f32(q, x, out, 0);
        for (int64_t i = 0; i < q->out_n; i++) out[i] = lse_shift(out[i]);
    }
    double init = kind == RED_PROD ? 1.0 : 0.0;
    for (int64_t i = 0; i < q->out_n; i++) acc[i] = init;
    for (int64_t r = 0; r < rows; r++, bf__bcast_next(b, idx, off)) {
        const float *xr = x + off[0];
        double *s = acc + off[1];
        const float *m = out + off[1];
        if (kind == RED_PROD) {
            for (int64_t i = 0; i < inner; i++) s[i * so] *= xr[i];
        } else if (!so) {
            if (kind == RED_SUM || kind == RED_MEAN || kind == RED_LOGSUM) {
                s[0] += bf__sum_f32_dacc(xr, inner);
            } else {
                double t = 0;
                for (int64_t i = 0; i < inner; i++) t += red_term(kind, xr[i], m[0]);
                s[0] += t;
            }
        } else {
            for (int64_t i = 0; i < inner; i++) s[i] += red_term(kind, xr[i], m[i]);
        }
    }
    for (int64_t i = 0; i < q->out_n; i++) {
        double v = acc[i];
        switch (kind) {
        case RED_MEAN: v = q->count ? v / (double)q->count : NAN; break;    /* mean of nothing */
        case RED_L2: v = sqrt(v); break;
        case RED_LOGSUM: v = log(v); break;
        case RED_LOGSUMEXP: v = log(v) + out[i]; break;
        default: break;
        }
        out[i] = (float)v;
    }
}

static void reduce_i64(const reduce_params *q, const int64_t *x, int64_t *out)
{
    const bf__bcast *b = &q->b;
    int last = b->nd - 1, kind = q->kind;
    int64_t inner = b->dims[last], rows = bf__bcast_rows(b), so = b->st[1][last];
    int64_t idx[BF_MAX_DIMS] = {0}, off[2] = {0, 0};
    int64_t init = kind == RED_MAX ? INT64_MIN : kind == RED_MIN ? INT64_MAX : kind == RED_PROD ? 1 : 0;
    for (int64_t i = 0; i < q->out_n; i++) out[i] = init;
    /* sums and products wrap, through unsigned (no C undefined behaviour) */
    for (int64_t r = 0; r < rows; r++, bf__bcast_next(b, idx, off)) {
        const int64_t *xr = x + off[0];
        int64_t *a = out + off[1];
        for (int64_t i = 0; i < inner; i++) {
            int64_t *s = a + i * so, v = xr[i];
            switch (kind) {
            case RED_MAX: *s = v > *s ? v : *s; break;
            case RED_MIN: *s = v < *s ? v : *s; break;
            case RED_PROD: *s = (int64_t)((uint64_t)*s * (uint64_t)v); break;
            case RED_SUMSQ: *s = (int64_t)((uint64_t)*s + (uint64_t)v * (uint64_t)v); break;
            case RED_L1: *s = (int64_t)((uint64_t)*s + (v < 0 ? 0 - (uint64_t)v : (uint64_t)v)); break;
            default: *s = (int64_t)((uint64_t)*s + (uint64_t)v); break;
            }
        }
    }
    /* integer mean truncates toward zero, as integer Div does */
    if (kind == RED_MEAN)
        for (int64_t i = 0; i < q->out_n; i++) out[i] = q->count ? out[i] / q->count : 0;
}

/* Reads the axes: the optional second input (ReduceSum from opset 13, the
 * others from 18) or the `axes` attribute (earlier opsets). Either form is
 * accepted at any opset. *n = 0: none given. */
static bf_status reduce_axes(bf__prep *p, int64_t *axes, int *n, bf_error *err)
{
    enum { MAX_AXES = 2 * BF_MAX_DIMS };
    const bf_tensor *t = p->n_in > 1 ? p->in[1] : NULL;
    bf_status st;
    if (t) {
        st = bf__read_ints(p->node, "axes", t, axes, MAX_AXES, n, err);
    } else {
        st = bf__attr_ints(p->node, "axes", axes, MAX_AXES, n, err);
        if (*n < 0) *n = 0;
    }
    return st;
}

bf_status bf__reduce_prepare(bf__prep *p, bf_error *err)
{
    const bf_tensor *x = p->in[0];
    reduce_params *q = (reduce_params *)p->params;
    const char *op = p->node->op_type;
    if (!x) return bf__node_error(err, p->node, BF_EFORMAT, "input data is required");
    q->kind = 0;
    while (q->kind < RED_LOGSUMEXP && strcmp(red_names[q->kind], op) != 0) q->kind++;
    q->dtype = x->dtype;
    int int_ok = q->kind != RED_L2 && q->kind != RED_LOGSUM && q->kind != RED_LOGSUMEXP;
    if (x->dtype != BF_F32 && !(x->dtype == BF_I64 && int_ok))
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "input data is %s; %s supports float32%s",
                              bf_dtype_name(x->dtype), op, int_ok ? " and int64" : "");
    int64_t keepdims, noop_empty, axes[2 * BF_MAX_DIMS];
    int n_axes;
    bf_status st = bf__attr_int(p->node, "keepdims", 1, &keepdims, err);
    if (st == BF_OK) st = bf__attr_int(p->node, "noop_with_empty_axes", 0, &noop_empty, err);
    if (st == BF_OK) st = reduce_axes(p, axes, &n_axes, err);
    if (st != BF_OK) return st;

    q->noop = n_axes == 0 && noop_empty;
    if (q->noop) {
        bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
        p->scratch = 0;
        return BF_OK;
    }
    int reduced[BF_MAX_DIMS] = {0};
    for (int i = 0; i < n_axes; i++) {
        int a;
        st = bf__norm_axis(p->node, axes[i], x->ndim, &a, err);
        if (st != BF_OK) return st;
        if (x->ndim == 0) continue;     /* axis 0 / -1 of a scalar: nothing to reduce */
        if (reduced[a])
            return bf__node_error(err, p->node, BF_EFORMAT, "axis %lld appears twice in axes",
                                  (long long)axes[i]);
        reduced[a] = 1;
    }
    if (n_axes == 0)
        for (int i = 0; i < x->ndim; i++) reduced[i] = 1;

    /* acc: the keepdims shape; out: it without reduced axes unless keepdims */
    bf_tensor acc = {0};
    int64_t out_dims[BF_MAX_DIMS];
    int out_nd = 0;
    acc.ndim = x->ndim;
    q->count = 1;
    for (int i = 0; i < x->ndim; i++) {
        acc.dims[i] = reduced[i] ? 1 : x->dims[i];
        if (reduced[i]) q->count *= x->dims[i];
        if (!reduced[i] || keepdims) out_dims[out_nd++] = acc.dims[i];
    }
    bf__set_shape(p->out[0], x->dtype, out_nd, out_dims);
    q->out_n = bf_tensor_numel(&acc);
    /* One run of reduced axes (dims of 1 aside): PyTorch's float order. */
    q->tmode = TS_NONE;
    if (x->dtype == BF_F32 && (q->kind == RED_SUM || q->kind == RED_MEAN) && bf_tensor_numel(x) > 0) {
        int64_t g[BF_MAX_DIMS];
        int gr[BF_MAX_DIMS], ng = 0, runs = 0;
        for (int i = 0; i < x->ndim; i++) {
            if (x->dims[i] == 1) continue;
            if (ng && gr[ng - 1] == reduced[i]) { g[ng - 1] *= x->dims[i]; continue; }
            g[ng] = x->dims[i];
            gr[ng++] = reduced[i];
            runs += reduced[i];
        }
        if (runs == 0) q->tmode = TS_ONE;   /* count 1: the sum of one element */
        if (runs == 1) {
            q->tmode = gr[ng - 1] ? TS_INNER : TS_MIDDLE;
            q->t_inner = gr[ng - 1] ? 1 : g[ng - 1];
            q->t_n = gr[ng - 1] ? g[ng - 1] : g[ng - 2];
            q->t_outer = bf_tensor_numel(x) / (q->t_n * q->t_inner);
        }
    }
    const bf_tensor *ops[2] = {x, &acc};
    bf__bcast_plan(&q->b, x, ops, 2);
    p->scratch = x->dtype == BF_F32 && q->kind != RED_MAX && q->kind != RED_MIN
                     ? (size_t)q->out_n * sizeof(double) : 0;
    return BF_OK;
}

bf_status bf__reduce_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const reduce_params *q = c->params;
    const bf_tensor *x = c->in[0];
    if (bf_tensor_numel(c->out[0]) == 0) return BF_OK;     /* buffers may be NULL */
    if (q->noop) {
        memmove(c->out[0]->data, x->data, bf_tensor_nbytes(x));
        return BF_OK;
    }
    if (q->dtype == BF_F32) reduce_f32(q, x->data, c->out[0]->data, c->scratch);
    else reduce_i64(q, x->data, c->out[0]->data);
    return BF_OK;
}

/* For the differential executor (diffchan.c): a float ReduceSum or
 * ReduceMean of [N, C, ...] over every axis from 2 on (an SE block's
 * x.mean((2, 3))), one sum per (n, c) plane in PyTorch's order (TS_INNER). */
int bf__reduce_planes(const bf__step *s)
{
    if (s->node->op->run != bf__reduce_run) return 0;
    const reduce_params *q = s->params;
    const bf_tensor *x = s->in[0];
    if (q->dtype != BF_F32 || q->noop || q->tmode != TS_INNER || (q->kind != RED_SUM && q->kind != RED_MEAN) ||
        x->ndim < 3)
        return 0;
    int64_t plane = 1;
    for (int d = 2; d < x->ndim; d++) plane *= x->dims[d];
    return q->t_outer == x->dims[0] * x->dims[1] && q->t_n == plane && q->out_n == q->t_outer;
}

/* Output element pl (plane pl of the input), as torch_sum computes it:
 * rows are summed one by one (torch_sum_body, inner 1), then the mean's
 * division. */
void bf__reduce_plane(const bf__step *s, int64_t pl)
{
    const reduce_params *q = s->params;
    const float *x = s->in[0]->data;
    float *out = s->out[0]->data;
    bf__torch_sum_f32(x + pl * q->t_n, 1, q->t_n, 1, out + pl, bf__cpu_avx2());
    if (q->kind == RED_MEAN) out[pl] = (0.0f + out[pl]) / (float)q->count;
    else out[pl] = 0.0f + out[pl];
}
