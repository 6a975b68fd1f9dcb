/* The ops that walk tensors through broadcast strides: binary arithmetic
 * (Add, Sub, Mul, Div, Pow; and through bf__binary_setup the comparisons,
 * logic, Mod and PRelu of other tables), Where, variadic Min/Max/Sum/Mean,
 * and the reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ...),
 * which are broadcasting in reverse: the accumulator is the operand repeated
 * (stride 0) along the reduced axes.
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
#include "exec/step_access.h"
#include "elementwise_impl.h"
#include "fastmath_impl.h"

/* `shape` is the iteration space; each operand's shape broadcasts to it. */
void bf__bcast_plan(bf__bcast *b, const bf_tensor *shape, const bf_tensor *const *ops, int n_ops)
{
    int nd = shape->ndim;
    int64_t st[BF__BCAST_MAX_OPERANDS][BF_MAX_DIMS];
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

/* ---- binary arithmetic ------------------------------------------------- */

#define BIN_LOOP BF__BIN_LOOP
#define ROW_FN BF__ROW_FN
typedef bf__row_fn row_fn;

/* Float arithmetic in the plain and AVX2 copies of one loop (the same bits:
 * fastmath_impl.h); a ViT's bias and residual adds were 3% of its time. The
 * copy is picked when the plan is built (F32_PICK), not per row: asking
 * bf__cpu_avx2 reads BITFLIP_SIMD, and per row that was 9% of a ViT's pass. */
#ifdef BF__HAVE_AVX2_COPY
#define F32_ROW_FN(NAME, EXPR)                                                                          \
    BF__AVX2 static int NAME##_avx2(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb, \
                                    int64_t n)                                                        \
    {                                                                                                 \
        BIN_LOOP(float, float, float, EXPR);                                                          \
    }                                                                                                 \
    ROW_FN(NAME) { BIN_LOOP(float, float, float, EXPR); }
#define F32_PICK(NAME, simd) ((simd) ? NAME##_avx2 : NAME)
#else
#define F32_ROW_FN(NAME, EXPR) \
    ROW_FN(NAME) { BIN_LOOP(float, float, float, EXPR); }
#define F32_PICK(NAME, simd) ((void)(simd), NAME)
#endif
F32_ROW_FN(add_f32, x + y)
F32_ROW_FN(sub_f32, x - y)
F32_ROW_FN(mul_f32, x * y)
F32_ROW_FN(div_f32, x / y)

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
    bf__bcast b;
    row_fn fn;
    size_t esz[3];      /* element bytes of output, A, B */
} binary_params;
static_assert(sizeof(binary_params) <= BF__OP_PARAMS_MAX, "binary params too large");

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW };

static row_fn pick_arith(int op, bf_dtype dt)
{
    int simd = bf__cpu_avx2();   /* once, when the plan is built */
    const row_fn f32[] = {F32_PICK(add_f32, simd), F32_PICK(sub_f32, simd), F32_PICK(mul_f32, simd),
                          F32_PICK(div_f32, simd)};
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
    return bf__binary_setup(p, q->fn, a->dtype, err);
}

bf_status bf__binary_setup(bf__prep *p, row_fn fn, bf_dtype out, bf_error *err)
{
    binary_params *q = (binary_params *)p->params;
    const bf_tensor *a = p->in[0], *b = p->in[1];
    bf_tensor shape = {0};
    bf_status st = bf__broadcast_shape(p->node, a, b, &shape, err);
    if (st != BF_OK) return st;
    bf__set_shape(p->out[0], out, shape.ndim, shape.dims);
    const bf_tensor *ops[2] = {a, b};
    bf__bcast_plan(&q->b, &shape, ops, 2);
    q->fn = fn;
    q->esz[0] = bf_dtype_size(out);
    q->esz[1] = bf_dtype_size(a->dtype);
    q->esz[2] = bf_dtype_size(b->dtype);
    p->scratch = 0;
    return BF_OK;
}

bf_status bf__binary_run(const bf__ctx *c, bf_error *err)
{
    const binary_params *q = c->params;
    const bf__bcast *b = &q->b;
    char *o = c->out[0]->data;
    const char *x = c->in[0]->data, *y = c->in[1]->data;
    int64_t inner = b->dims[b->nd - 1], rows = bf__bcast_rows(b);
    int64_t sa = b->st[0][b->nd - 1], sb = b->st[1][b->nd - 1];
    int64_t idx[BF_MAX_DIMS] = {0}, off[2] = {0, 0};
    for (int64_t r = 0; r < rows; r++) {
        if (q->fn(o + (size_t)(r * inner) * q->esz[0], x + (size_t)off[0] * q->esz[1], sa,
                  y + (size_t)off[1] * q->esz[2], sb, inner))
            return bf__node_error(err, c->node, BF_ERANGE,
                                  "integer division by zero: input B contains 0");
        bf__bcast_next(b, idx, off);
    }
    return BF_OK;
}

static int arith_f32(row_fn f)
{
#ifdef BF__HAVE_AVX2_COPY
    if (f == add_f32_avx2 || f == sub_f32_avx2 || f == mul_f32_avx2 || f == div_f32_avx2) return 1;
#endif
    return f == add_f32 || f == sub_f32 || f == mul_f32 || f == div_f32;
}

int bf__binary_f32(const bf__step *s)
{
    return s->node->op->run == bf__binary_run && s->n_out == 1 && arith_f32(((const binary_params *)s->params)->fn);
}

/* bf__binary_run's walk from output element off instead of 0: each
 * operand's offset unravelled from off over the planned dims, then the
 * same row function on the rest of each row the span covers (an element is
 * one IEEE operation on its two operands, wherever its row starts). */
void bf__binary_span(const bf__step *s, int64_t off, int64_t n)
{
    const binary_params *q = s->params;
    const bf__bcast *b = &q->b;
    char *o = s->out[0]->data;
    const char *x = s->in[0]->data, *y = s->in[1]->data;
    int64_t inner = b->dims[b->nd - 1], sa = b->st[0][b->nd - 1], sb = b->st[1][b->nd - 1];
    while (n > 0) {
        int64_t rem = off, oa = 0, ob = 0;
        for (int d = b->nd - 1; d >= 0; d--) {
            int64_t i = rem % b->dims[d];
            rem /= b->dims[d];
            oa += i * b->st[0][d];
            ob += i * b->st[1][d];
        }
        int64_t len = inner - off % inner;
        if (len > n) len = n;
        q->fn(o + (size_t)off * q->esz[0], x + (size_t)oa * q->esz[1], sa, y + (size_t)ob * q->esz[2], sb, len);
        off += len;
        n -= len;
    }
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
    bf__bcast b;
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
    bf__bcast_plan(&q->b, &shape, ops, 3);
    p->scratch = 0;
    return BF_OK;
}

bf_status bf__where_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const where_params *q = c->params;
    const bf__bcast *b = &q->b;
    int last = b->nd - 1;
    char *o = c->out[0]->data;
    const uint8_t *cd = c->in[0]->data;
    const char *x = c->in[1]->data, *y = c->in[2]->data;
    int64_t inner = b->dims[last], rows = bf__bcast_rows(b);
    int64_t idx[BF_MAX_DIMS] = {0}, off[3] = {0, 0, 0};
    for (int64_t r = 0; r < rows; r++) {
        q->fn(o + (size_t)(r * inner) * q->esz, cd + off[0], b->st[0][last],
              x + (size_t)off[1] * q->esz, b->st[1][last], y + (size_t)off[2] * q->esz,
              b->st[2][last], inner);
        bf__bcast_next(b, idx, off);
    }
    return BF_OK;
}

/* ---- variadic Min, Max, Sum, Mean ------------------------------------- */

/* The output is the broadcast of all inputs. It starts as input 0 broadcast,
 * then folds in each further input as a binary op whose A operand is the
 * output itself, read and written at the same element (in place is safe).
 * The fold is left to right in float, as numpy's a + b + c; Mean divides
 * the sum by the count at the end (the ONNX reference). Min and Max
 * propagate NaN from either side, as torch.minimum/maximum do (fminf and
 * fmaxf would drop it). Each input's plan is made at run time on the stack:
 * a few dozen integer steps, no allocation. */

enum { VAR_MIN, VAR_MAX, VAR_SUM, VAR_MEAN };

#define VAR_MAX_F(x, y) ((((x) > (y)) | ((x) != (x))) ? (x) : (y))
#define VAR_MIN_F(x, y) ((((x) < (y)) | ((x) != (x))) ? (x) : (y))
ROW_FN(copy_f32) { BIN_LOOP(float, float, float, ((void)x, y)); }
ROW_FN(max_f32) { BIN_LOOP(float, float, float, VAR_MAX_F(x, y)); }
ROW_FN(min_f32) { BIN_LOOP(float, float, float, VAR_MIN_F(x, y)); }
ROW_FN(copy_i64) { BIN_LOOP(int64_t, int64_t, int64_t, ((void)x, y)); }
ROW_FN(max_i64) { BIN_LOOP(int64_t, int64_t, int64_t, x > y ? x : y); }
ROW_FN(min_i64) { BIN_LOOP(int64_t, int64_t, int64_t, x < y ? x : y); }
ROW_FN(copy_i32) { BIN_LOOP(int32_t, int32_t, int32_t, ((void)x, y)); }
ROW_FN(max_i32) { BIN_LOOP(int32_t, int32_t, int32_t, x > y ? x : y); }
ROW_FN(min_i32) { BIN_LOOP(int32_t, int32_t, int32_t, x < y ? x : y); }

typedef struct variadic_params {
    row_fn copy, fold;
    int kind;
    size_t esz;
} variadic_params;
static_assert(sizeof(variadic_params) <= BF__OP_PARAMS_MAX, "variadic params too large");

bf_status bf__variadic_prepare(bf__prep *p, bf_error *err)
{
    static const char *const names[] = {"Min", "Max", "Sum", "Mean"};
    variadic_params *q = (variadic_params *)p->params;
    int kind = 0;
    while (kind < VAR_MEAN && strcmp(names[kind], p->node->op_type) != 0) kind++;
    q->kind = kind;
    if (p->n_in < 1)
        return bf__node_error(err, p->node, BF_EFORMAT, "needs at least one input");
    bf_tensor shape = {0};
    for (int i = 0; i < p->n_in; i++) {
        const bf_tensor *t = p->in[i];
        if (!t)
            return bf__node_error(err, p->node, BF_EFORMAT, "input %d is omitted; every input of %s is required",
                                  i, names[kind]);
        if (t->dtype != p->in[0]->dtype)
            return bf__node_error(err, p->node, BF_EFORMAT, "input %d is %s and input 0 is %s; all must have one dtype",
                                  i, bf_dtype_name(t->dtype), bf_dtype_name(p->in[0]->dtype));
        bf_tensor next = {0};
        if (i == 0) {
            bf__set_shape(&shape, t->dtype, t->ndim, t->dims);
            continue;
        }
        bf_status st = bf__broadcast_shape(p->node, &shape, t, &next, err);
        if (st != BF_OK) return st;
        bf__set_shape(&shape, t->dtype, next.ndim, next.dims);
    }
    bf_dtype dt = p->in[0]->dtype;
    int simd = bf__cpu_avx2();   /* once, when the plan is built */
    const row_fn f32[] = {min_f32, max_f32, F32_PICK(add_f32, simd), F32_PICK(add_f32, simd)};
    static const row_fn i64[] = {min_i64, max_i64, add_i64};
    static const row_fn i32[] = {min_i32, max_i32, add_i32};
    if (dt == BF_F32) { q->copy = copy_f32; q->fold = f32[kind]; }
    else if (dt == BF_I64 && kind != VAR_MEAN) { q->copy = copy_i64; q->fold = i64[kind]; }
    else if (dt == BF_I32 && kind != VAR_MEAN) { q->copy = copy_i32; q->fold = i32[kind]; }
    else
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "inputs are %s; %s supports %s", bf_dtype_name(dt),
                              names[kind], kind == VAR_MEAN ? "float32" : "float32, int64 and int32");
    q->esz = bf_dtype_size(dt);
    bf__set_shape(p->out[0], dt, shape.ndim, shape.dims);
    p->scratch = 0;
    return BF_OK;
}

bf_status bf__variadic_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const variadic_params *q = c->params;
    bf_tensor *out = c->out[0];
    char *o = out->data;
    int64_t n = bf_tensor_numel(out);
    if (n == 0) return BF_OK;       /* buffers may be NULL */
    for (int k = 0; k < c->n_in; k++) {
        bf__bcast b;
        const bf_tensor *ops[2] = {out, c->in[k]};
        bf__bcast_plan(&b, out, ops, 2);
        row_fn fn = k == 0 ? q->copy : q->fold;
        const char *y = c->in[k]->data;
        int64_t inner = b.dims[b.nd - 1], rows = bf__bcast_rows(&b), sb = b.st[1][b.nd - 1];
        int64_t idx[BF_MAX_DIMS] = {0}, off[2] = {0, 0};
        for (int64_t r = 0; r < rows; r++) {
            char *orow = o + (size_t)(r * inner) * q->esz;
            const char *yrow = y + (size_t)off[1] * q->esz;
            if (k == 0) fn(orow, yrow, sb, yrow, sb, inner);    /* the output is not yet written */
            else fn(orow, orow, 1, yrow, sb, inner);
            bf__bcast_next(&b, idx, off);
        }
    }
    if (q->kind == VAR_MEAN) {
        float *y = (float *)o, d = (float)c->n_in;
        for (int64_t i = 0; i < n; i++) y[i] /= d;
    }
    return BF_OK;
}

