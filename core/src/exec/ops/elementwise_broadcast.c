/* The ops that walk tensors through broadcast strides: binary arithmetic
 * (Add, Sub, Mul, Div, Pow), Where, and the reductions (ReduceSum,
 * ReduceMean, ReduceMax), which are broadcasting in reverse: the accumulator
 * is the operand repeated (stride 0) along the reduced axes.
 *
 * Prepare plans the walk once. Every operand gets an element stride per
 * output dim (0 where it is broadcast); size-1 dims are dropped and adjacent
 * dims that step alike in every operand are merged. What remains is an outer
 * odometer over rows and an innermost loop in which each operand is either
 * contiguous (stride 1) or one repeated value (stride 0). Same-shape, scalar,
 * row-vector ([M, N] + [N]) and per-channel ([B, C, H, W] + [C, 1, 1])
 * operands all collapse to one or two such loops, and the row kernels are
 * written so that the compiler vectorises each stride pattern. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exec/op.h"
#include "elementwise_impl.h"

enum { MAX_OPERANDS = 3 };

typedef struct bcast {
    int nd;                                  /* >= 1 after planning */
    int n_ops;
    int64_t dims[BF_MAX_DIMS];
    int64_t st[MAX_OPERANDS][BF_MAX_DIMS];   /* element strides; 0 = repeated */
} bcast;

/* `shape` is the iteration space; each operand's shape broadcasts to it. */
static void bcast_plan(bcast *b, const bf_tensor *shape, const bf_tensor *const *ops, int n_ops)
{
    int nd = shape->ndim;
    int64_t st[MAX_OPERANDS][BF_MAX_DIMS];
    for (int k = 0; k < n_ops; k++) {
        int64_t s = 1;
        for (int i = nd - 1; i >= 0; i--) {
            int j = i - (nd - ops[k]->ndim);
            int64_t d = j >= 0 ? ops[k]->dims[j] : 1;
            st[k][i] = d == 1 ? 0 : s;
            s *= d;
        }
    }
    b->n_ops = n_ops;
    b->nd = 0;
    for (int i = 0; i < nd; i++) {
        int64_t d = shape->dims[i];
        if (d == 1) continue;
        int p = b->nd - 1, merge = p >= 0;
        for (int k = 0; k < n_ops && merge; k++) merge = b->st[k][p] == st[k][i] * d;
        if (!merge) { p = b->nd++; b->dims[p] = 1; }
        b->dims[p] *= d;
        for (int k = 0; k < n_ops; k++) b->st[k][p] = st[k][i];
    }
    if (b->nd == 0) {
        b->nd = 1;
        b->dims[0] = 1;
        for (int k = 0; k < n_ops; k++) b->st[k][0] = 0;
    }
}

static int64_t bcast_rows(const bcast *b)
{
    int64_t rows = 1;
    for (int d = 0; d < b->nd - 1; d++) rows *= b->dims[d];
    return rows;
}

/* Advances the odometer over all dims but the innermost, updating each
 * operand's element offset. */
static void bcast_next(const bcast *b, int64_t *idx, int64_t *off)
{
    for (int d = b->nd - 2; d >= 0; d--) {
        for (int k = 0; k < b->n_ops; k++) off[k] += b->st[k][d];
        if (++idx[d] < b->dims[d]) return;
        for (int k = 0; k < b->n_ops; k++) off[k] -= b->st[k][d] * b->dims[d];
        idx[d] = 0;
    }
}

/* ---- binary arithmetic ------------------------------------------------- */

/* A row kernel: o[i] = a[i*sa] OP b[i*sb] for i < n, strides 0 or 1.
 * Returns nonzero on integer division by zero. */
typedef int (*row_fn)(void *o, const void *a, int64_t sa, const void *b, int64_t sb, int64_t n);

/* One loop per stride pattern, so each is a plain vectorisable loop. */
#define BIN_LOOP(TO, TA, TB, EXPR)                                                   \
    TO *o = o_;                                                                      \
    const TA *a = a_;                                                                \
    const TB *b = b_;                                                                \
    if (sa && sb) {                                                                  \
        for (int64_t i = 0; i < n; i++) { TA x = a[i]; TB y = b[i]; o[i] = (EXPR); } \
    } else if (sa) {                                                                 \
        TB y = b[0];                                                                 \
        for (int64_t i = 0; i < n; i++) { TA x = a[i]; o[i] = (EXPR); }              \
    } else if (sb) {                                                                 \
        TA x = a[0];                                                                 \
        for (int64_t i = 0; i < n; i++) { TB y = b[i]; o[i] = (EXPR); }              \
    } else {                                                                         \
        TA x = a[0]; TB y = b[0]; TO v = (EXPR);                                     \
        for (int64_t i = 0; i < n; i++) o[i] = v;                                    \
    }                                                                                \
    return 0

#define ROW_FN(NAME) static int NAME(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb, int64_t n)

ROW_FN(add_f32) { BIN_LOOP(float, float, float, x + y); }
ROW_FN(sub_f32) { BIN_LOOP(float, float, float, x - y); }
ROW_FN(mul_f32) { BIN_LOOP(float, float, float, x * y); }
ROW_FN(div_f32) { BIN_LOOP(float, float, float, x / y); }

/* Integers wrap on overflow as PyTorch's do; going through unsigned keeps
 * that free of C undefined behaviour. */
#define WRAP(T, U, OP) (T)((U)x OP (U)y)
ROW_FN(add_i64) { BIN_LOOP(int64_t, int64_t, int64_t, WRAP(int64_t, uint64_t, +)); }
ROW_FN(sub_i64) { BIN_LOOP(int64_t, int64_t, int64_t, WRAP(int64_t, uint64_t, -)); }
ROW_FN(mul_i64) { BIN_LOOP(int64_t, int64_t, int64_t, WRAP(int64_t, uint64_t, *)); }
ROW_FN(add_i32) { BIN_LOOP(int32_t, int32_t, int32_t, WRAP(int32_t, uint32_t, +)); }
ROW_FN(sub_i32) { BIN_LOOP(int32_t, int32_t, int32_t, WRAP(int32_t, uint32_t, -)); }
ROW_FN(mul_i32) { BIN_LOOP(int32_t, int32_t, int32_t, WRAP(int32_t, uint32_t, *)); }

/* Integer division truncates toward zero (C, ONNX Runtime). MIN / -1 wraps to
 * MIN instead of trapping. Division does not vectorise, so one loop serves
 * every stride pattern. */
#define INT_DIV(T, U)                                            \
    T *o = o_;                                                   \
    const T *a = a_, *b = b_;                                    \
    for (int64_t i = 0; i < n; i++) {                            \
        T x = a[i * sa], y = b[i * sb];                          \
        if (y == 0) return 1;                                    \
        o[i] = y == -1 ? (T)((U)0 - (U)x) : x / y;               \
    }                                                            \
    return 0
ROW_FN(div_i64) { INT_DIV(int64_t, uint64_t); }
ROW_FN(div_i32) { INT_DIV(int32_t, uint32_t); }

/* Exponent 2 is x*x, as PyTorch computes it; everything else is powf. */
ROW_FN(pow_f32)
{
    if (!sb && *(const float *)b_ == 2.0f) {
        float *o = o_;
        const float *a = a_;
        if (!sa) { float v = a[0] * a[0]; for (int64_t i = 0; i < n; i++) o[i] = v; }
        else for (int64_t i = 0; i < n; i++) o[i] = a[i] * a[i];
        return 0;
    }
    BIN_LOOP(float, float, float, y == 2.0f ? x * x : powf(x, y));
}
ROW_FN(pow_f32_i64) { BIN_LOOP(float, float, int64_t, y == 2 ? x * x : powf(x, (float)y)); }
ROW_FN(pow_f32_i32) { BIN_LOOP(float, float, int32_t, y == 2 ? x * x : powf(x, (float)y)); }

typedef struct binary_params {
    bcast b;
    row_fn fn;
    size_t esz[3];      /* element bytes of output, A, B */
} binary_params;
static_assert(sizeof(binary_params) <= BF__OP_PARAMS_MAX, "binary params too large");

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW };

static row_fn pick_arith(int op, bf_dtype dt)
{
    static const row_fn f32[] = {add_f32, sub_f32, mul_f32, div_f32};
    static const row_fn i64[] = {add_i64, sub_i64, mul_i64, div_i64};
    static const row_fn i32[] = {add_i32, sub_i32, mul_i32, div_i32};
    switch (dt) {
    case BF_F32: return f32[op];
    case BF_I64: return i64[op];
    case BF_I32: return i32[op];
    default: return NULL;
    }
}

static row_fn pick_pow(bf_dtype exp_dt)
{
    switch (exp_dt) {
    case BF_F32: return pow_f32;
    case BF_I64: return pow_f32_i64;
    case BF_I32: return pow_f32_i32;
    default: return NULL;
    }
}

bf_status bf__binary_prepare(bf__prep *p, bf_error *err)
{
    static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Pow"};
    int op = 0;
    while (op < OP_POW && strcmp(names[op], p->node->op_type) != 0) op++;
    const char *an = op == OP_POW ? "X" : "A", *bn = op == OP_POW ? "Y" : "B";
    const bf_tensor *a = p->in[0], *b = p->n_in > 1 ? p->in[1] : NULL;
    if (!a || !b)
        return bf__node_error(err, p->node, BF_EFORMAT, "inputs %s and %s are both required", an, bn);

    binary_params *q = (binary_params *)p->params;
    if (op == OP_POW) {
        if (a->dtype != BF_F32)
            return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                                  "input X is %s; Pow supports a float32 base",
                                  bf_dtype_name(a->dtype));
        q->fn = pick_pow(b->dtype);
        if (!q->fn)
            return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                                  "input Y is %s; the exponent must be float32, int64 or int32",
                                  bf_dtype_name(b->dtype));
    } else {
        if (a->dtype != b->dtype)
            return bf__node_error(err, p->node, BF_EFORMAT, "inputs A (%s) and B (%s) must have the same dtype",
                                  bf_dtype_name(a->dtype), bf_dtype_name(b->dtype));
        q->fn = pick_arith(op, a->dtype);
        if (!q->fn)
            return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                                  "inputs are %s; %s supports float32, int64 and int32",
                                  bf_dtype_name(a->dtype), names[op]);
    }
    bf_tensor shape = {0};
    bf_status st = bf__broadcast_shape(p->node, a, b, &shape, err);
    if (st != BF_OK) return st;
    bf__set_shape(p->out[0], a->dtype, shape.ndim, shape.dims);
    const bf_tensor *ops[2] = {a, b};
    bcast_plan(&q->b, &shape, ops, 2);
    q->esz[0] = q->esz[1] = bf_dtype_size(a->dtype);
    q->esz[2] = bf_dtype_size(b->dtype);
    p->scratch = 0;
    return BF_OK;
}

bf_status bf__binary_run(const bf__ctx *c, bf_error *err)
{
    const binary_params *q = c->params;
    const bcast *b = &q->b;
    char *o = c->out[0]->data;
    const char *x = c->in[0]->data, *y = c->in[1]->data;
    int64_t inner = b->dims[b->nd - 1], rows = bcast_rows(b);
    int64_t sa = b->st[0][b->nd - 1], sb = b->st[1][b->nd - 1];
    int64_t idx[BF_MAX_DIMS] = {0}, off[2] = {0, 0};
    for (int64_t r = 0; r < rows; r++) {
        if (q->fn(o + (size_t)(r * inner) * q->esz[0], x + (size_t)off[0] * q->esz[1], sa,
                  y + (size_t)off[1] * q->esz[2], sb, inner))
            return bf__node_error(err, c->node, BF_ERANGE,
                                  "integer division by zero: input B contains 0");
        bcast_next(b, idx, off);
    }
    return BF_OK;
}

/* ---- Where ------------------------------------------------------------- */

/* Blends bit patterns with a mask, so NaN payloads pass through untouched and
 * the loop has no branch (a `c ? x[i] : y[i]` would load conditionally and
 * not vectorise). Each call site passes constant strides, which the compiler
 * folds into a plain loop per pattern. */
#define WHERE_FN(NAME, T)                                                                    \
    static inline void NAME##_k(T *o, const uint8_t *cd, int64_t sc, const T *x, int64_t sx, \
                                const T *y, int64_t sy, int64_t n)                           \
    {                                                                                        \
        for (int64_t i = 0; i < n; i++) {                                                    \
            T m = (T)0 - (T)(cd[i * sc] != 0);                                               \
            o[i] = (x[i * sx] & m) | (y[i * sy] & (T)~m);                                    \
        }                                                                                    \
    }                                                                                        \
    static void NAME(void *o_, const uint8_t *cd, int64_t sc, const void *x_, int64_t sx,    \
                     const void *y_, int64_t sy, int64_t n)                                  \
    {                                                                                        \
        T *o = o_;                                                                           \
        const T *x = x_, *y = y_;                                                            \
        switch ((sc ? 4 : 0) | (sx ? 2 : 0) | (sy ? 1 : 0)) {                                \
        case 7: NAME##_k(o, cd, 1, x, 1, y, 1, n); break;                                    \
        case 6: NAME##_k(o, cd, 1, x, 1, y, 0, n); break;                                    \
        case 5: NAME##_k(o, cd, 1, x, 0, y, 1, n); break;                                    \
        case 4: NAME##_k(o, cd, 1, x, 0, y, 0, n); break;                                    \
        case 3: NAME##_k(o, cd, 0, x, 1, y, 1, n); break;                                    \
        case 2: NAME##_k(o, cd, 0, x, 1, y, 0, n); break;                                    \
        case 1: NAME##_k(o, cd, 0, x, 0, y, 1, n); break;                                    \
        default: NAME##_k(o, cd, 0, x, 0, y, 0, n); break;                                   \
        }                                                                                    \
    }
WHERE_FN(where8, uint8_t)
WHERE_FN(where32, uint32_t)
WHERE_FN(where64, uint64_t)

typedef void (*where_fn)(void *o, const uint8_t *cd, int64_t sc, const void *x, int64_t sx,
                         const void *y, int64_t sy, int64_t n);

typedef struct where_params {
    bcast b;
    where_fn fn;
    size_t esz;
} where_params;
static_assert(sizeof(where_params) <= BF__OP_PARAMS_MAX, "Where params too large");

bf_status bf__where_prepare(bf__prep *p, bf_error *err)
{
    const bf_tensor *cd = p->in[0], *x = p->n_in > 1 ? p->in[1] : NULL,
                    *y = p->n_in > 2 ? p->in[2] : NULL;
    if (!cd || !x || !y)
        return bf__node_error(err, p->node, BF_EFORMAT, "inputs condition, X and Y are all required");
    if (cd->dtype != BF_BOOL)
        return bf__node_error(err, p->node, BF_EFORMAT, "input condition is %s; it must be bool",
                              bf_dtype_name(cd->dtype));
    if (x->dtype != y->dtype)
        return bf__node_error(err, p->node, BF_EFORMAT, "inputs X (%s) and Y (%s) must have the same dtype",
                              bf_dtype_name(x->dtype), bf_dtype_name(y->dtype));
    where_params *q = (where_params *)p->params;
    q->esz = bf_dtype_size(x->dtype);
    switch (q->esz) {
    case 1: q->fn = where8; break;
    case 4: q->fn = where32; break;
    case 8: q->fn = where64; break;
    default:
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "inputs X and Y are %s; not supported",
                              bf_dtype_name(x->dtype));
    }
    bf_tensor cx = {0}, shape = {0};
    bf_status st = bf__broadcast_shape(p->node, cd, x, &cx, err);
    if (st == BF_OK) st = bf__broadcast_shape(p->node, &cx, y, &shape, err);
    if (st != BF_OK) return st;
    bf__set_shape(p->out[0], x->dtype, shape.ndim, shape.dims);
    const bf_tensor *ops[3] = {cd, x, y};
    bcast_plan(&q->b, &shape, ops, 3);
    p->scratch = 0;
    return BF_OK;
}

bf_status bf__where_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const where_params *q = c->params;
    const bcast *b = &q->b;
    int last = b->nd - 1;
    char *o = c->out[0]->data;
    const uint8_t *cd = c->in[0]->data;
    const char *x = c->in[1]->data, *y = c->in[2]->data;
    int64_t inner = b->dims[last], rows = bcast_rows(b);
    int64_t idx[BF_MAX_DIMS] = {0}, off[3] = {0, 0, 0};
    for (int64_t r = 0; r < rows; r++) {
        q->fn(o + (size_t)(r * inner) * q->esz, cd + off[0], b->st[0][last],
              x + (size_t)off[1] * q->esz, b->st[1][last], y + (size_t)off[2] * q->esz,
              b->st[2][last], inner);
        bcast_next(b, idx, off);
    }
    return BF_OK;
}

/* ---- reductions -------------------------------------------------------- */

/* The walk is over the input in memory order; the accumulator (one slot per
 * output element) is operand 1, with stride 0 on reduced axes. The innermost
 * loop then either folds a contiguous row into one slot (reduced innermost
 * axes) or folds a row into a row of slots (a reduced middle axis, as in
 * [B, K, D] summed over K: vectorised over D).
 *
 * Float sums accumulate in double. PyTorch sums in float with cascade
 * (pairwise-like) summation; double is at least as close to the exact sum,
 * so results agree to float rounding. One visible difference: a float
 * partial sum that PyTorch overflows to Inf (1e38 + 1e38 - 1e38) stays
 * finite here when the exact result is finite. */

enum { RED_SUM, RED_MEAN, RED_MAX };

typedef struct reduce_params {
    bcast b;                /* operand 0: input, operand 1: accumulator */
    int kind;
    int noop;               /* noop_with_empty_axes with no axes: copy */
    bf_dtype dtype;
    int64_t count;          /* input elements per output element */
    int64_t out_n;
} reduce_params;
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

/* NaN is sticky: once m is NaN, neither test picks x, and a NaN x is always
 * picked (`|`, not `||`: no branch, so loops using it vectorise). Between +0
 * and -0 the first seen is kept. */
#define MAX_NAN(m, x) ((((x) > (m)) | ((x) != (x))) ? (x) : (m))

static inline void max_into(float *m, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) m[i] = MAX_NAN(m[i], x[i]);
}

/* Max of init and x[0..n), NaN if any is NaN; in 32 lanes, each a plain
 * elementwise max that vectorises. */
float bf__max_f32(const float *x, int64_t n, float init)
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

static void reduce_f32(const reduce_params *q, const float *x, float *out, double *acc)
{
    const bcast *b = &q->b;
    int last = b->nd - 1;
    int64_t inner = b->dims[last], rows = bcast_rows(b), so = b->st[1][last];
    int64_t idx[BF_MAX_DIMS] = {0}, off[2] = {0, 0};
    if (q->kind == RED_MAX) {
        for (int64_t i = 0; i < q->out_n; i++) out[i] = -INFINITY;
        for (int64_t r = 0; r < rows; r++, bcast_next(b, idx, off)) {
            const float *xr = x + off[0];
            float *m = out + off[1];
            if (!so) m[0] = bf__max_f32(xr, inner, m[0]);
            else max_into(m, xr, inner);
        }
        return;
    }
    memset(acc, 0, (size_t)q->out_n * sizeof *acc);
    for (int64_t r = 0; r < rows; r++, bcast_next(b, idx, off)) {
        const float *xr = x + off[0];
        double *s = acc + off[1];
        if (!so) s[0] += bf__sum_f32_dacc(xr, inner);
        else for (int64_t i = 0; i < inner; i++) s[i] += xr[i];
    }
    double scale = q->kind == RED_MEAN ? 1.0 / (double)q->count : 1.0;
    if (q->kind == RED_MEAN && q->count == 0) scale = NAN;     /* mean of nothing */
    for (int64_t i = 0; i < q->out_n; i++) out[i] = (float)(acc[i] * scale);
}

static void reduce_i64(const reduce_params *q, const int64_t *x, int64_t *out)
{
    const bcast *b = &q->b;
    int last = b->nd - 1;
    int64_t inner = b->dims[last], rows = bcast_rows(b), so = b->st[1][last];
    int64_t idx[BF_MAX_DIMS] = {0}, off[2] = {0, 0};
    int max = q->kind == RED_MAX;
    for (int64_t i = 0; i < q->out_n; i++) out[i] = max ? INT64_MIN : 0;
    for (int64_t r = 0; r < rows; r++, bcast_next(b, idx, off)) {
        const int64_t *xr = x + off[0];
        int64_t *a = out + off[1];
        for (int64_t i = 0; i < inner; i++) {
            int64_t *s = a + i * so, v = xr[i];
            *s = max ? (v > *s ? v : *s) : (int64_t)((uint64_t)*s + (uint64_t)v);
        }
    }
    /* integer mean truncates toward zero, as integer Div does */
    if (q->kind == RED_MEAN)
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
    q->kind = strcmp(op, "ReduceSum") == 0 ? RED_SUM : strcmp(op, "ReduceMean") == 0 ? RED_MEAN : RED_MAX;
    q->dtype = x->dtype;
    if (x->dtype != BF_F32 && x->dtype != BF_I64)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "input data is %s; %s supports float32 and int64",
                              bf_dtype_name(x->dtype), op);
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
    const bf_tensor *ops[2] = {x, &acc};
    bcast_plan(&q->b, x, ops, 2);
    p->scratch = x->dtype == BF_F32 && q->kind != RED_MAX ? (size_t)q->out_n * sizeof(double) : 0;
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
