/* The logic family: comparisons (Equal, Less, Greater, LessOrEqual,
 * GreaterOrEqual) and boolean And, Or, Xor, all broadcasting into bool;
 * Not; the float predicates IsNaN and IsInf; the Bitwise ops of opset
 * 18; and Mod, the integer arithmetic that exported index computations use
 * beside them.
 *
 * Comparisons follow IEEE: any comparison with NaN is false (Equal(NaN, NaN)
 * too), as in PyTorch. Bool tensors hold 0 or 1 in a byte. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exec/op.h"
#include "elementwise_impl.h"

/* ---- comparisons and boolean binary ops -------------------------------- */

enum { CMP_EQ, CMP_LT, CMP_GT, CMP_LE, CMP_GE };

#define CMP_FNS(SUF, T)                                                     \
    BF__ROW_FN(eq_##SUF) { BF__BIN_LOOP(uint8_t, T, T, x == y); }           \
    BF__ROW_FN(lt_##SUF) { BF__BIN_LOOP(uint8_t, T, T, x < y); }            \
    BF__ROW_FN(gt_##SUF) { BF__BIN_LOOP(uint8_t, T, T, x > y); }            \
    BF__ROW_FN(le_##SUF) { BF__BIN_LOOP(uint8_t, T, T, x <= y); }           \
    BF__ROW_FN(ge_##SUF) { BF__BIN_LOOP(uint8_t, T, T, x >= y); }           \
    static const bf__row_fn cmp_##SUF[] = {eq_##SUF, lt_##SUF, gt_##SUF, le_##SUF, ge_##SUF};
CMP_FNS(f32, float)
CMP_FNS(i64, int64_t)
CMP_FNS(i32, int32_t)
CMP_FNS(u8, uint8_t)     /* bool; any nonzero byte a model feeds compares as itself */

static bf_status compare_prepare(bf__prep *p, bf_error *err)
{
    static const char *const names[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};
    int op = 0;
    while (op < CMP_GE && strcmp(names[op], p->node->op_type) != 0) op++;
    const bf_tensor *a = p->in[0], *b = p->n_in > 1 ? p->in[1] : NULL;
    if (!a || !b) return bf__node_error(err, p->node, BF_EFORMAT, "inputs A and B are both required");
    if (a->dtype != b->dtype)
        return bf__node_error(err, p->node, BF_EFORMAT, "inputs A (%s) and B (%s) must have the same dtype",
                              bf_dtype_name(a->dtype), bf_dtype_name(b->dtype));
    const bf__row_fn *fns;
    switch (a->dtype) {
    case BF_F32: fns = cmp_f32; break;
    case BF_I64: fns = cmp_i64; break;
    case BF_I32: fns = cmp_i32; break;
    case BF_BOOL: case BF_U8: fns = cmp_u8; break;
    default:
        return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                              "inputs are %s; %s supports float32, int64, int32, uint8 and bool",
                              bf_dtype_name(a->dtype), names[op]);
    }
    return bf__binary_setup(p, fns[op], BF_BOOL, err);
}

/* bools are compared as truth values, so a byte other than 0/1 still works */
BF__ROW_FN(and_b) { BF__BIN_LOOP(uint8_t, uint8_t, uint8_t, (x != 0) & (y != 0)); }
BF__ROW_FN(or_b) { BF__BIN_LOOP(uint8_t, uint8_t, uint8_t, (x != 0) | (y != 0)); }
BF__ROW_FN(xor_b) { BF__BIN_LOOP(uint8_t, uint8_t, uint8_t, (x != 0) ^ (y != 0)); }

static bf_status bool_binary_prepare(bf__prep *p, bf_error *err)
{
    const char *op = p->node->op_type;
    const bf_tensor *a = p->in[0], *b = p->n_in > 1 ? p->in[1] : NULL;
    if (!a || !b) return bf__node_error(err, p->node, BF_EFORMAT, "inputs A and B are both required");
    if (a->dtype != BF_BOOL || b->dtype != BF_BOOL)
        return bf__node_error(err, p->node, BF_EFORMAT, "inputs A (%s) and B (%s) must both be bool",
                              bf_dtype_name(a->dtype), bf_dtype_name(b->dtype));
    bf__row_fn fn = strcmp(op, "And") == 0 ? and_b : strcmp(op, "Or") == 0 ? or_b : xor_b;
    return bf__binary_setup(p, fn, BF_BOOL, err);
}

/* ---- BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot (opset 18) ---------- */

#define BIT_FNS(SUF, T)                                           \
    BF__ROW_FN(band_##SUF) { BF__BIN_LOOP(T, T, T, x & y); }      \
    BF__ROW_FN(bor_##SUF) { BF__BIN_LOOP(T, T, T, x | y); }       \
    BF__ROW_FN(bxor_##SUF) { BF__BIN_LOOP(T, T, T, x ^ y); }
BIT_FNS(u64, uint64_t)
BIT_FNS(u32, uint32_t)
BIT_FNS(u8, uint8_t)

static bf_status bitwise_prepare(bf__prep *p, bf_error *err)
{
    const char *op = p->node->op_type;
    const bf_tensor *a = p->in[0], *b = p->n_in > 1 ? p->in[1] : NULL;
    if (!a || !b) return bf__node_error(err, p->node, BF_EFORMAT, "inputs A and B are both required");
    if (a->dtype != b->dtype)
        return bf__node_error(err, p->node, BF_EFORMAT, "inputs A (%s) and B (%s) must have the same dtype",
                              bf_dtype_name(a->dtype), bf_dtype_name(b->dtype));
    int w = a->dtype == BF_I64 ? 0 : a->dtype == BF_I32 ? 1 : a->dtype == BF_U8 || a->dtype == BF_I8 ? 2 : -1;
    if (w < 0)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "inputs are %s; %s supports int64, int32, int8 and uint8",
                              bf_dtype_name(a->dtype), op);
    static const bf__row_fn fns[3][3] = {{band_u64, bor_u64, bxor_u64}, {band_u32, bor_u32, bxor_u32},
                                         {band_u8, bor_u8, bxor_u8}};
    int k = strcmp(op, "BitwiseAnd") == 0 ? 0 : strcmp(op, "BitwiseOr") == 0 ? 1 : 2;
    return bf__binary_setup(p, fns[w][k], a->dtype, err);
}

/* ---- Mod --------------------------------------------------------------- */

/* fmod = 0 (the default) is Python's %: the result takes the divisor's sign
 * (torch.remainder); integers only, as the spec says. fmod = 1 is C's fmod
 * and %: the result takes the dividend's sign (torch.fmod), for floats and
 * integers. An integer divisor of 0 is an error; MIN % -1 is 0 instead of a
 * trap. */
#define INT_MOD(T, PY)                                  \
    T *o = o_;                                          \
    const T *a = a_, *b = b_;                           \
    for (int64_t i = 0; i < n; i++) {                   \
        T x = a[i * sa], y = b[i * sb];                 \
        if (y == 0) return 1;                           \
        T r = y == -1 ? 0 : x % y;                      \
        if (PY && r != 0 && ((r < 0) != (y < 0))) r += y; \
        o[i] = r;                                       \
    }                                                   \
    return 0
BF__ROW_FN(mod_py_i64) { INT_MOD(int64_t, 1); }
BF__ROW_FN(mod_py_i32) { INT_MOD(int32_t, 1); }
BF__ROW_FN(mod_c_i64) { INT_MOD(int64_t, 0); }
BF__ROW_FN(mod_c_i32) { INT_MOD(int32_t, 0); }
BF__ROW_FN(fmod_f32) { BF__BIN_LOOP(float, float, float, fmodf(x, y)); }

static bf_status mod_prepare(bf__prep *p, bf_error *err)
{
    const bf_tensor *a = p->in[0], *b = p->n_in > 1 ? p->in[1] : NULL;
    if (!a || !b) return bf__node_error(err, p->node, BF_EFORMAT, "inputs A and B are both required");
    if (a->dtype != b->dtype)
        return bf__node_error(err, p->node, BF_EFORMAT, "inputs A (%s) and B (%s) must have the same dtype",
                              bf_dtype_name(a->dtype), bf_dtype_name(b->dtype));
    int64_t fmod;
    bf_status st = bf__attr_int(p->node, "fmod", 0, &fmod, err);
    if (st != BF_OK) return st;
    if (fmod != 0 && fmod != 1)
        return bf__node_error(err, p->node, BF_EFORMAT, "attribute fmod is %lld; it must be 0 or 1", (long long)fmod);
    bf__row_fn fn;
    switch (a->dtype) {
    case BF_F32:
        if (!fmod)
            return bf__node_error(err, p->node, BF_EFORMAT,
                                  "inputs are float32 with fmod = 0; ONNX requires fmod = 1 for floats");
        fn = fmod_f32;
        break;
    case BF_I64: fn = fmod ? mod_c_i64 : mod_py_i64; break;
    case BF_I32: fn = fmod ? mod_c_i32 : mod_py_i32; break;
    default:
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "inputs are %s; Mod supports float32, int64 and int32",
                              bf_dtype_name(a->dtype));
    }
    return bf__binary_setup(p, fn, a->dtype, err);
}

/* ---- Not, IsNaN, IsInf ------------------------------------------------- */

enum { PRED_NOT, PRED_ISNAN, PRED_ISINF, PRED_BITNOT };

typedef struct pred_params {
    int kind;
    int pos, neg;           /* IsInf: detect_positive, detect_negative */
} pred_params;
static_assert(sizeof(pred_params) <= BF__OP_PARAMS_MAX, "predicate params too large");

static bf_status pred_prepare(bf__prep *p, bf_error *err)
{
    pred_params *q = (pred_params *)p->params;
    const bf_tensor *x = p->in[0];
    const char *op = p->node->op_type;
    q->kind = strcmp(op, "Not") == 0 ? PRED_NOT : strcmp(op, "IsNaN") == 0 ? PRED_ISNAN
            : strcmp(op, "IsInf") == 0 ? PRED_ISINF : PRED_BITNOT;
    if (!x) return bf__node_error(err, p->node, BF_EFORMAT, "input X is required");
    if (q->kind == PRED_BITNOT) {
        if (x->dtype != BF_I64 && x->dtype != BF_I32 && x->dtype != BF_U8 && x->dtype != BF_I8)
            return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                                  "input X is %s; BitwiseNot supports int64, int32, int8 and uint8",
                                  bf_dtype_name(x->dtype));
        bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
        p->scratch = 0;
        return BF_OK;
    }
    if (q->kind == PRED_NOT && x->dtype != BF_BOOL)
        return bf__node_error(err, p->node, BF_EFORMAT, "input X is %s; Not takes bool", bf_dtype_name(x->dtype));
    if (q->kind != PRED_NOT && x->dtype != BF_F32)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "input X is %s; %s supports float32",
                              bf_dtype_name(x->dtype), op);
    int64_t pos = 1, neg = 1;
    bf_status st = BF_OK;
    if (q->kind == PRED_ISINF) {
        st = bf__attr_int(p->node, "detect_positive", 1, &pos, err);
        if (st == BF_OK) st = bf__attr_int(p->node, "detect_negative", 1, &neg, err);
    }
    if (st != BF_OK) return st;
    q->pos = pos != 0;
    q->neg = neg != 0;
    bf__set_shape(p->out[0], BF_BOOL, x->ndim, x->dims);
    p->scratch = 0;
    return BF_OK;
}

static bf_status pred_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const pred_params *q = c->params;
    int64_t n = bf_tensor_numel(c->in[0]);
    uint8_t *y = c->out[0]->data;
    if (q->kind == PRED_BITNOT) {
        size_t nb = (size_t)n * bf_dtype_size(c->in[0]->dtype);
        const uint8_t *x = c->in[0]->data;
        for (size_t i = 0; i < nb; i++) y[i] = (uint8_t)~x[i];    /* bytewise: the same for every width */
        return BF_OK;
    }
    if (q->kind == PRED_NOT) {
        const uint8_t *x = c->in[0]->data;
        for (int64_t i = 0; i < n; i++) y[i] = x[i] == 0;
        return BF_OK;
    }
    const float *x = c->in[0]->data;
    if (q->kind == PRED_ISNAN) {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] != x[i];
        return BF_OK;
    }
    for (int64_t i = 0; i < n; i++)
        y[i] = (q->pos && x[i] == INFINITY) | (q->neg && x[i] == -INFINITY);
    return BF_OK;
}

/* ---- the table --------------------------------------------------------- */

#define CMP(NAME) {NAME, 2, 2, 1, 1, 0, compare_prepare, bf__binary_run}
#define BOOL2(NAME) {NAME, 2, 2, 1, 1, 0, bool_binary_prepare, bf__binary_run}
#define PRED(NAME) {NAME, 1, 1, 1, 1, 0, pred_prepare, pred_run}

const bf__op bf__ops_logic[] = {
    CMP("Equal"), CMP("Less"), CMP("Greater"), CMP("LessOrEqual"), CMP("GreaterOrEqual"),
    BOOL2("And"), BOOL2("Or"), BOOL2("Xor"),
    PRED("Not"), PRED("IsNaN"), PRED("IsInf"),
    {"Mod", 2, 2, 1, 1, 0, mod_prepare, bf__binary_run},
    {"BitwiseAnd", 2, 2, 1, 1, 0, bitwise_prepare, bf__binary_run},
    {"BitwiseOr", 2, 2, 1, 1, 0, bitwise_prepare, bf__binary_run},
    {"BitwiseXor", 2, 2, 1, 1, 0, bitwise_prepare, bf__binary_run},
    PRED("BitwiseNot"),
    {0},
};
