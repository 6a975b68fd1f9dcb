/* The reduce family: the Reduce* ops beyond Sum/Mean/Max (their kernels
 * share the broadcast walk, in elementwise_reduce.c), ArgMax, ArgMin,
 * Hardmax, CumSum and TopK. Each works on the input viewed as [outer, n, inner], n the
 * reduced axis. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bitflip/limits.h"
#include "exec/op.h"
#include "elementwise_impl.h"
#include "torch_order.h"

/* [outer, n, inner] around axis (all trailing dims from axis when flat). */
static void split_at(const bf_tensor *x, int axis, int flat, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = *n = *inner = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i < axis) *outer *= x->dims[i];
        else if (i == axis || flat) *n *= x->dims[i];
        else *inner *= x->dims[i];
    }
}

static int supported_value_dtype(bf_dtype d) { return d == BF_F32 || d == BF_I64 || d == BF_I32; }

static double value_at(const void *x, bf_dtype d, int64_t i)
{
    switch (d) {
    case BF_F32: return ((const float *)x)[i];
    case BF_I64: return (double)((const int64_t *)x)[i];
    default: return ((const int32_t *)x)[i];
    }
}

/* ---- ArgMax, ArgMin, Hardmax ------------------------------------------- */

/* NaN counts as the extreme for both ArgMax and ArgMin, as torch.argmax
 * and torch.argmin treat it: the first NaN wins (the last one with
 * select_last_index). Ties: the first index, or the last with
 * select_last_index. Integers are compared as integers (int64 values past
 * 2^53 included). */
typedef struct arg_params {
    int64_t outer, n, inner;
    int min, last;
    bf_dtype dtype;
} arg_params;
static_assert(sizeof(arg_params) <= BF__OP_PARAMS_MAX, "ArgMax params too large");

#define ARG_SCAN(T, ISNAN)                                                       \
    do {                                                                         \
        const T *s = (const T *)x + base;                                        \
        T b = s[0];                                                              \
        int64_t bi = 0;                                                          \
        for (int64_t k = 1; k < q->n; k++) {                                     \
            T v = s[k * q->inner];                                               \
            int vn = ISNAN(v), bn = ISNAN(b);                                    \
            int better = q->min ? v < b : v > b, tie = v == b;                   \
            int take = q->last ? vn || (!bn && (better || tie)) : !bn && (vn || better); \
            if (take) { b = v; bi = k; }                                         \
        }                                                                        \
        return bi;                                                               \
    } while (0)
#define NAN_F(v) ((v) != (v))
#define NAN_NONE(v) ((void)(v), 0)

static int64_t arg_slice(const arg_params *q, const void *x, int64_t base)
{
    switch (q->dtype) {
    case BF_F32: ARG_SCAN(float, NAN_F);
    case BF_I64: ARG_SCAN(int64_t, NAN_NONE);
    default: ARG_SCAN(int32_t, NAN_NONE);
    }
}

static bf_status arg_setup(bf__prep *p, arg_params *q, int64_t axis_def, int flat, bf_error *err)
{
    const bf_tensor *x = p->in[0];
    const char *op = p->node->op_type;
    if (!x) return bf__node_error(err, p->node, BF_EFORMAT, "input data is required");
    if (!supported_value_dtype(x->dtype))
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "input is %s; %s supports float32, int64 and int32",
                              bf_dtype_name(x->dtype), op);
    int64_t a, last;
    int axis;
    bf_status st = bf__attr_int(p->node, "axis", axis_def, &a, err);
    if (st == BF_OK) st = bf__attr_int(p->node, "select_last_index", 0, &last, err);
    if (st == BF_OK) st = bf__norm_axis(p->node, a, x->ndim, &axis, err);
    if (st != BF_OK) return st;
    split_at(x, axis, flat, &q->outer, &q->n, &q->inner);
    if (q->n == 0 && q->outer * q->inner > 0)
        return bf__node_error(err, p->node, BF_ESHAPE, "axis %lld has size 0; there is no element to pick",
                              (long long)a);
    q->min = strcmp(op, "ArgMin") == 0;
    q->last = last != 0;
    q->dtype = x->dtype;
    p->scratch = 0;
    return BF_OK;
}

static bf_status argmax_prepare(bf__prep *p, bf_error *err)
{
    arg_params *q = (arg_params *)p->params;
    int64_t keepdims, a;
    bf_status st = arg_setup(p, q, 0, 0, err);
    if (st == BF_OK) st = bf__attr_int(p->node, "keepdims", 1, &keepdims, err);
    if (st == BF_OK) st = bf__attr_int(p->node, "axis", 0, &a, err);
    if (st != BF_OK) return st;
    const bf_tensor *x = p->in[0];
    int axis = (int)(a < 0 ? a + x->ndim : a), nd = 0;
    int64_t dims[BF_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        if (i != axis) dims[nd++] = x->dims[i];
        else if (keepdims) dims[nd++] = 1;
    }
    bf__set_shape(p->out[0], BF_I64, nd, dims);
    return BF_OK;
}

static bf_status argmax_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const arg_params *q = c->params;
    int64_t *y = c->out[0]->data;
    for (int64_t o = 0; o < q->outer; o++)
        for (int64_t j = 0; j < q->inner; j++)
            y[o * q->inner + j] = arg_slice(q, c->in[0]->data, o * q->n * q->inner + j);
    return BF_OK;
}

/* Hardmax: 1 at ArgMax's pick (first index, NaN as the max), 0 elsewhere.
 * Opset < 13 flattens at `axis` (default 1), as Softmax does. */
static bf_status hardmax_prepare(bf__prep *p, bf_error *err)
{
    arg_params *q = (arg_params *)p->params;
    bf_status st = bf__want_f32(p, 0, "'input'", err);
    if (st == BF_OK) st = arg_setup(p, q, p->opset < 13 ? 1 : -1, p->opset < 13, err);
    if (st != BF_OK) return st;
    q->last = 0;
    bf__set_shape(p->out[0], BF_F32, p->in[0]->ndim, p->in[0]->dims);
    return BF_OK;
}

static bf_status hardmax_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const arg_params *q = c->params;
    float *y = c->out[0]->data;
    int64_t n = bf_tensor_numel(c->out[0]);
    for (int64_t i = 0; i < n; i++) y[i] = 0.0f;
    for (int64_t o = 0; o < q->outer; o++)
        for (int64_t j = 0; j < q->inner; j++) {
            int64_t base = o * q->n * q->inner + j;
            y[base + arg_slice(q, c->in[0]->data, base) * q->inner] = 1.0f;
        }
    return BF_OK;
}

/* ---- CumSum ------------------------------------------------------------ */

/* The axis input (a scalar, or one value in 1-D) is read when the op runs,
 * so it need not be a constant. Float sums accumulate in double and round
 * at each output, as torch.cumsum does on CPU; integers wrap. */
typedef struct cumsum_params {
    int exclusive, reverse;
    bf_dtype dtype;
} cumsum_params;
static_assert(sizeof(cumsum_params) <= BF__OP_PARAMS_MAX, "CumSum params too large");

static bf_status cumsum_axis(const bf__node *node, const bf_tensor *x, const bf_tensor *t, int *axis,
                             bf_error *err)
{
    if (t->dtype != BF_I64 && t->dtype != BF_I32)
        return bf__node_error(err, node, BF_EFORMAT, "input axis is %s; it must be int64 or int32",
                              bf_dtype_name(t->dtype));
    if (t->ndim > 1 || bf_tensor_numel(t) != 1)
        return bf__node_error(err, node, BF_ESHAPE, "input axis must hold one value (a scalar or [1])");
    if (!t->data) return BF_OK;     /* prepare: known at run time only */
    int64_t a = t->dtype == BF_I64 ? *(const int64_t *)t->data : *(const int32_t *)t->data;
    return bf__norm_axis(node, a, x->ndim, axis, err);
}

static bf_status cumsum_prepare(bf__prep *p, bf_error *err)
{
    cumsum_params *q = (cumsum_params *)p->params;
    const bf_tensor *x = p->in[0], *t = p->n_in > 1 ? p->in[1] : NULL;
    if (!x || !t) return bf__node_error(err, p->node, BF_EFORMAT, "inputs x and axis are both required");
    if (!supported_value_dtype(x->dtype))
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "input x is %s; CumSum supports float32, int64 and int32",
                              bf_dtype_name(x->dtype));
    if (x->ndim == 0)
        return bf__node_error(err, p->node, BF_ESHAPE, "input x is a scalar; CumSum needs rank 1 or more");
    int64_t ex, rev;
    int axis;
    bf_status st = bf__attr_int(p->node, "exclusive", 0, &ex, err);
    if (st == BF_OK) st = bf__attr_int(p->node, "reverse", 0, &rev, err);
    if (st == BF_OK) st = cumsum_axis(p->node, x, t, &axis, err);
    if (st != BF_OK) return st;
    q->exclusive = ex != 0;
    q->reverse = rev != 0;
    q->dtype = x->dtype;
    bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
    p->scratch = 0;
    return BF_OK;
}

#define CUMSUM_LOOP(T, ACC, ADD)                                                    \
    do {                                                                            \
        const T *xs = xv;                                                           \
        T *ys = yv;                                                                 \
        for (int64_t o = 0; o < outer; o++)                                         \
            for (int64_t j = 0; j < inner; j++) {                                   \
                ACC s = 0;                                                          \
                for (int64_t t = 0; t < n; t++) {                                   \
                    int64_t k = q->reverse ? n - 1 - t : t;                         \
                    int64_t i = (o * n + k) * inner + j;                            \
                    T v = xs[i];                                                    \
                    if (q->exclusive) { ys[i] = (T)s; s = ADD(s, v); }              \
                    else { s = ADD(s, v); ys[i] = (T)s; }                           \
                }                                                                   \
            }                                                                       \
    } while (0)
#define ADD_F(s, v) ((s) + (double)(v))
#define ADD_W(s, v) ((s) + (uint64_t)(v))     /* wraps, then truncates to T */

static bf_status cumsum_run(const bf__ctx *c, bf_error *err)
{
    const cumsum_params *q = c->params;
    const bf_tensor *x = c->in[0];
    int axis;
    bf_status st = cumsum_axis(c->node, x, c->in[1], &axis, err);
    if (st != BF_OK) return st;
    int64_t outer, n, inner;
    split_at(x, axis, 0, &outer, &n, &inner);
    const void *xv = x->data;
    void *yv = c->out[0]->data;
    switch (q->dtype) {
    case BF_F32: CUMSUM_LOOP(float, double, ADD_F); break;
    case BF_I64: CUMSUM_LOOP(int64_t, uint64_t, ADD_W); break;
    default: CUMSUM_LOOP(int32_t, uint64_t, ADD_W); break;
    }
    return BF_OK;
}

/* ---- TopK -------------------------------------------------------------- */

/* K must be known when the plan is built (the output shape depends on it;
 * exports pass a constant). Each slice is merge-sorted by index in scratch
 * (stable, so equal values keep the lower index first, as ONNX specifies;
 * torch.topk on CPU does not promise an order among ties). NaN sorts as the
 * largest value, as in torch.topk: first when largest = 1, last otherwise.
 * sorted = 0 returns the same sorted order, which the spec allows.
 * --tie-order pytorch (p->tie_order): torch.topk's own order instead, ties
 * and sorted = 0 included, by the algorithms PyTorch runs (torch_order.c). */
typedef struct topk_params {
    int64_t outer, n, inner, k;
    int largest, sorted, torch;
    bf_dtype dtype;
} topk_params;
static_assert(sizeof(topk_params) <= BF__OP_PARAMS_MAX, "TopK params too large");

static bf_status topk_prepare(bf__prep *p, bf_error *err)
{
    topk_params *q = (topk_params *)p->params;
    const bf_tensor *x = p->in[0], *kt = p->n_in > 1 ? p->in[1] : NULL;
    if (!x || !kt) return bf__node_error(err, p->node, BF_EFORMAT, "inputs X and K are both required");
    if (!supported_value_dtype(x->dtype))
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "input X is %s; TopK supports float32, int64 and int32",
                              bf_dtype_name(x->dtype));
    int64_t a, largest, kv[1];
    int axis, nk;
    bf_status st = bf__attr_int(p->node, "axis", -1, &a, err);
    int64_t sorted;
    if (st == BF_OK) st = bf__attr_int(p->node, "largest", 1, &largest, err);
    if (st == BF_OK) st = bf__attr_int(p->node, "sorted", 1, &sorted, err);
    if (st == BF_OK) st = bf__norm_axis(p->node, a, x->ndim, &axis, err);
    if (st == BF_OK) st = bf__read_ints(p->node, "K", kt, kv, 1, &nk, err);
    if (st != BF_OK) return st;
    if (x->ndim == 0)
        return bf__node_error(err, p->node, BF_ESHAPE, "input X is a scalar; TopK needs rank 1 or more");
    if (nk != 1)
        return bf__node_error(err, p->node, BF_ESHAPE, "input K must hold one value, it has %d", nk);
    if (kv[0] < 0 || kv[0] > x->dims[axis])
        return bf__node_error(err, p->node, BF_ERANGE, "K = %lld, but axis %d has %lld elements; K must be in [0, %lld]",
                              (long long)kv[0], axis, (long long)x->dims[axis], (long long)x->dims[axis]);
    split_at(x, axis, 0, &q->outer, &q->n, &q->inner);
    q->k = kv[0];
    q->largest = largest != 0;
    q->sorted = sorted != 0;
    q->torch = p->tie_order == BF_TIE_ORDER_PYTORCH;
    q->dtype = x->dtype;
    int64_t dims[BF_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = q->k;
    bf__set_shape(p->out[0], x->dtype, x->ndim, dims);
    if (p->n_out > 1 && p->out[1]) bf__set_shape(p->out[1], BF_I64, x->ndim, dims);
    p->scratch = q->torch ? (size_t)q->n * sizeof(bf__kv)
                          : (size_t)(2 * q->n) * sizeof(int64_t) + (size_t)q->n * sizeof(double);
    return BF_OK;
}

/* a before b: a strictly better (NaN the largest of all) */
static inline int topk_before(double a, double b, int largest)
{
    int an = a != a, bn = b != b;
    if (an || bn) return largest ? an && !bn : bn && !an;
    return largest ? a > b : a < b;
}

/* Stable bottom-up merge sort of idx[0..n) by keys v[idx]; tmp holds n. */
static int64_t *merge_sort(int64_t *idx, int64_t *tmp, const double *v, int64_t n, int largest)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, t = lo;
            while (i < mid && j < hi) tmp[t++] = topk_before(v[idx[j]], v[idx[i]], largest) ? idx[j++] : idx[i++];
            while (i < mid) tmp[t++] = idx[i++];
            while (j < hi) tmp[t++] = idx[j++];
        }
        int64_t *s = idx;
        idx = tmp;
        tmp = s;
    }
    return idx;
}

/* torch.topk's order: each row's (value, index) pairs in index order, then
 * the libstdc++ algorithms PyTorch's CPU kernel runs on them */
static void topk_run_torch(const topk_params *q, const void *x, void *vals, int64_t *inds, bf__kv *a)
{
    size_t esz = bf_dtype_size(q->dtype);
    int is_int = q->dtype != BF_F32;
    for (int64_t o = 0; o < q->outer; o++)
        for (int64_t j = 0; j < q->inner; j++) {
            int64_t base = o * q->n * q->inner + j, obase = o * q->k * q->inner + j;
            for (int64_t t = 0; t < q->n; t++) {
                int64_t e = base + t * q->inner;
                a[t].i = t;
                a[t].is_int = is_int;
                a[t].v = value_at(x, q->dtype, e);
                a[t].iv = q->dtype == BF_I64 ? ((const int64_t *)x)[e] : q->dtype == BF_I32 ? ((const int32_t *)x)[e] : 0;
            }
            bf__torch_topk(a, q->n, q->k, q->largest, q->sorted);
            for (int64_t t = 0; t < q->k; t++) {
                int64_t src = base + a[t].i * q->inner, dst = obase + t * q->inner;
                memcpy((char *)vals + (size_t)dst * esz, (const char *)x + (size_t)src * esz, esz);
                if (inds) inds[dst] = a[t].i;
            }
        }
}

static bf_status topk_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const topk_params *q = c->params;
    const void *x = c->in[0]->data;
    void *vals = c->out[0]->data;
    int64_t *inds = c->n_out > 1 && c->out[1] ? c->out[1]->data : NULL;
    if (q->torch) {
        topk_run_torch(q, x, vals, inds, c->scratch);
        return BF_OK;
    }
    int64_t *idx = c->scratch, *tmp = idx + q->n;
    double *v = (double *)(tmp + q->n);
    size_t esz = bf_dtype_size(q->dtype);
    for (int64_t o = 0; o < q->outer; o++)
        for (int64_t j = 0; j < q->inner; j++) {
            int64_t base = o * q->n * q->inner + j, obase = o * q->k * q->inner + j;
            for (int64_t t = 0; t < q->n; t++) {
                idx[t] = t;
                v[t] = value_at(x, q->dtype, base + t * q->inner);
            }
            /* int64 beyond 2^53 may tie in double; the sort is still stable */
            const int64_t *s = merge_sort(idx, tmp, v, q->n, q->largest);
            for (int64_t t = 0; t < q->k; t++) {
                int64_t src = base + s[t] * q->inner, dst = obase + t * q->inner;
                memcpy((char *)vals + (size_t)dst * esz, (const char *)x + (size_t)src * esz, esz);
                if (inds) inds[dst] = s[t];
            }
        }
    return BF_OK;
}

/* ---- the table --------------------------------------------------------- */

#define REDUCE(NAME) {NAME, 1, 2, 1, 1, 0, bf__reduce_prepare, bf__reduce_run}

const bf__op bf__ops_reduce[] = {
    REDUCE("ReduceMin"), REDUCE("ReduceProd"), REDUCE("ReduceL1"), REDUCE("ReduceL2"),
    REDUCE("ReduceSumSquare"), REDUCE("ReduceLogSum"), REDUCE("ReduceLogSumExp"),
    {"ArgMax", 1, 1, 1, 1, 0, argmax_prepare, argmax_run},
    {"ArgMin", 1, 1, 1, 1, 0, argmax_prepare, argmax_run},
    {"Hardmax", 1, 1, 1, 1, 0, hardmax_prepare, hardmax_run},
    {"CumSum", 2, 2, 1, 1, 0, cumsum_prepare, cumsum_run},
    {"TopK", 2, 2, 1, 2, 0, topk_prepare, topk_run},
    {0},
};
