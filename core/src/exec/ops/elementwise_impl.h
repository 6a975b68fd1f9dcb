/* The elementwise family's entry points shared between its files:
 * elementwise.c (unary maps, Clip, Cast, Softmax; the elementwise table),
 * elementwise_broadcast.c (everything that walks broadcast strides but the
 * reductions), elementwise_reduce.c (those), and the files of the
 * activation, logic and reduce tables, which register ops built on the
 * same machinery. */
#ifndef BF_ELEMENTWISE_IMPL_H
#define BF_ELEMENTWISE_IMPL_H

#include "exec/op.h"

/* Float unary maps (and Neg on integers), one kind per op name. */
bf_status bf__unary_prepare(bf__prep *p, bf_error *err);
bf_status bf__unary_run(const bf__ctx *c, bf_error *err);

/* A row kernel of a broadcasting binary op: o[i] = a[i*sa] OP b[i*sb] for
 * i < n, strides 0 or 1. Returns nonzero on integer division by zero. */
typedef int (*bf__row_fn)(void *o, const void *a, int64_t sa, const void *b, int64_t sb, int64_t n);

/* One loop per stride pattern, so each is a plain vectorisable loop; EXPR
 * reads x (from a) and y (from b). */
#define BF__BIN_LOOP(TO, TA, TB, EXPR)                                               \
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

#define BF__ROW_FN(NAME) \
    static int NAME(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb, int64_t n)

/* The broadcast walk (elementwise_broadcast.c's opening comment says how
 * it is planned): per operand an element stride per dim (0: repeated),
 * size-1 dims dropped, dims that step alike merged. The binary ops, Where
 * and the variadic ops walk their operands with it; the reductions
 * (elementwise_reduce.c) walk the input with the output as an operand of
 * stride 0 along the reduced axes. */
enum { BF__BCAST_MAX_OPERANDS = 3 };

typedef struct bf__bcast {
    int nd;                                           /* >= 1 after planning */
    int n_ops;
    int64_t dims[BF_MAX_DIMS];
    int64_t st[BF__BCAST_MAX_OPERANDS][BF_MAX_DIMS];   /* element strides; 0 = repeated */
} bf__bcast;

/* `shape` is the iteration space; each operand's shape broadcasts to it. */
void bf__bcast_plan(bf__bcast *b, const bf_tensor *shape, const bf_tensor *const *ops, int n_ops);

/* Rows of the walk: every dim but the innermost. */
static inline int64_t bf__bcast_rows(const bf__bcast *b)
{
    int64_t rows = 1;
    for (int d = 0; d < b->nd - 1; d++) rows *= b->dims[d];
    return rows;
}

/* Advances the odometer over all dims but the innermost, updating each
 * operand's element offset. Inline: the run loops call it once per row. */
static inline void bf__bcast_next(const bf__bcast *b, int64_t *idx, int64_t *off)
{
    for (int d = b->nd - 2; d >= 0; d--) {
        for (int k = 0; k < b->n_ops; k++) off[k] += b->st[k][d];
        if (++idx[d] < b->dims[d]) return;
        for (int k = 0; k < b->n_ops; k++) off[k] -= b->st[k][d] * b->dims[d];
        idx[d] = 0;
    }
}

/* Binary arithmetic (Add, Sub, Mul, Div, Pow). */
bf_status bf__binary_prepare(bf__prep *p, bf_error *err);
/* Any broadcasting binary op: plans inputs 0 and 1 broadcast into output 0
 * of dtype `out`, each row computed by fn; bf__binary_run runs it. The
 * caller has checked that both inputs are present and their dtypes. */
bf_status bf__binary_setup(bf__prep *p, bf__row_fn fn, bf_dtype out, bf_error *err);
bf_status bf__binary_run(const bf__ctx *c, bf_error *err);
bf_status bf__where_prepare(bf__prep *p, bf_error *err);
bf_status bf__where_run(const bf__ctx *c, bf_error *err);
/* Variadic Min, Max, Sum, Mean: all inputs broadcast together. */
bf_status bf__variadic_prepare(bf__prep *p, bf_error *err);
bf_status bf__variadic_run(const bf__ctx *c, bf_error *err);
/* elementwise_reduce.c: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum,
 * ReduceLogSumExp. */
bf_status bf__reduce_prepare(bf__prep *p, bf_error *err);
bf_status bf__reduce_run(const bf__ctx *c, bf_error *err);
/* Softmax's and LogSoftmax's view of input 0 (float32) as [outer, n, inner]:
 * opset < 13 flattens at `axis` (default 1), opset 13+ takes the one axis
 * (default -1); sets the output's shape to the input's. */
bf_status bf__softmax_layout(bf__prep *p, int64_t *outer, int64_t *n, int64_t *inner, bf_error *err);
/* the Softmax op (elementwise_softmax.c; registered in elementwise.c's table) */
bf_status bf__softmax_prepare(bf__prep *p, bf_error *err);
bf_status bf__softmax_run(const bf__ctx *c, bf_error *err);
/* Sum of floats accumulated in double (reductions, softmax denominators). */
double bf__sum_f32_dacc(const float *x, int64_t n);
/* one Softmax row of n by one copy of the kernel: 0 the plain one, 1 the
 * AVX2 one, 2 the AVX-512 one (the CPU must have it): the same bits
 * (tests/unit/test_fastmath_avx2.c) */
void bf__softmax_row_copy(float *y, const float *x, int64_t n, int copy);
float bf__max_f32(const float *x, int64_t n, float init);
/* bf__max_f32 on the path the caller asked for once (simd: bf__cpu_avx2(),
 * which reads the environment: not per row; 2: the AVX-512 copy, for a
 * caller already on that path). A max is exact: every copy, the same bits. */
float bf__max_f32_at(const float *x, int64_t n, float init, int simd);
/* x as [outer, n, inner] summed over n into out[outer * inner] in float in
 * PyTorch's order (reduce_torchsum.c): inner == 1 means contiguous rows of
 * n (ATen's inner sum), inner > 1 the middle axis (its outer sum). simd:
 * bf__cpu_avx2(), read once by the caller; every path gives the same bits. */
void bf__torch_sum_f32(const float *x, int64_t outer, int64_t n, int64_t inner, float *out, int simd);

#endif
