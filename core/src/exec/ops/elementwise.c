/* The elementwise op family: unary activations and math, Clip and Cast
 * here; Softmax in elementwise_softmax.c; the ops that walk broadcast strides (binary arithmetic,
 * Where, variadic Min/Max/Sum/Mean) in elementwise_broadcast.c, the
 * reductions on the same walk in elementwise_reduce.c.
 * The unary machinery also serves the activation table (activation.c):
 * one kind per op, so the differential engine's chains run any of them on
 * changed elements alone.
 *
 * Float ops compute in fp32 and let IEEE arithmetic carry NaN and Inf: a
 * faulted 1e38 or Inf must reach the output as PyTorch would produce it.
 *
 * Where we differ from the letter of ONNX (each explained where it is done):
 * Cast to DOUBLE stays float32, Cast to FLOAT16/BFLOAT16 rounds but stays
 * float32; Clip without a bound does not clip (torch.clamp, not ONNX
 * Runtime's +-FLT_MAX); float reductions accumulate in double, but for
 * ReduceSum/ReduceMean over one run of axes (PyTorch's float order); integer
 * overflow wraps; integer division by zero is an error, not a crash; the
 * axes of reductions are accepted as attribute or input at any opset. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "exec/op.h"
#include "elementwise_impl.h"
#include "fastmath_impl.h"
#include "exec/step_access.h"


/* The first input of every op here is required; an empty name leaves it NULL. */
static bf_status need_input(const bf__prep *p, bf_error *err)
{
    if (p->n_in > 0 && p->in[0]) return BF_OK;
    return bf__node_error(err, p->node, BF_EFORMAT, "the first input is required");
}

/* ---- unary ------------------------------------------------------------- */

typedef enum unary_kind {
    U_RELU, U_LEAKY_RELU, U_SIGMOID, U_TANH, U_ERF, U_SQRT, U_NEG, U_EXP, U_LOG, U_ABS,
    /* activations (registered in activation.c) */
    U_HARD_SIGMOID, U_HARD_SWISH, U_ELU, U_SELU, U_CELU, U_SOFTPLUS, U_SOFTSIGN, U_MISH,
    U_THRESHOLDED_RELU, U_GELU, U_GELU_TANH,
    /* float math */
    U_RECIPROCAL, U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_SIN, U_COS, U_TAN, U_ASIN, U_ACOS, U_ATAN,
    U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH
} unary_kind;

typedef struct unary_params {
    unary_kind kind;
    bf_dtype dtype;
    float alpha, beta;      /* LeakyRelu, HardSigmoid, Elu, Selu (beta: gamma), Celu, ThresholdedRelu */
} unary_params;
static_assert(sizeof(unary_params) <= BF__OP_PARAMS_MAX, "unary params too large");

static int unary_lookup(const char *name, unary_kind *k)
{
    static const struct { const char *name; unary_kind kind; } map[] = {
        {"Relu", U_RELU}, {"LeakyRelu", U_LEAKY_RELU}, {"Sigmoid", U_SIGMOID},
        {"Tanh", U_TANH}, {"Erf", U_ERF}, {"Sqrt", U_SQRT}, {"Neg", U_NEG},
        {"Exp", U_EXP}, {"Log", U_LOG}, {"Abs", U_ABS},
        {"HardSigmoid", U_HARD_SIGMOID}, {"HardSwish", U_HARD_SWISH}, {"Elu", U_ELU},
        {"Selu", U_SELU}, {"Celu", U_CELU}, {"Softplus", U_SOFTPLUS}, {"Softsign", U_SOFTSIGN},
        {"Mish", U_MISH}, {"ThresholdedRelu", U_THRESHOLDED_RELU}, {"Gelu", U_GELU},
        {"Reciprocal", U_RECIPROCAL}, {"Floor", U_FLOOR}, {"Ceil", U_CEIL}, {"Round", U_ROUND},
        {"Sign", U_SIGN}, {"Sin", U_SIN}, {"Cos", U_COS}, {"Tan", U_TAN}, {"Asin", U_ASIN},
        {"Acos", U_ACOS}, {"Atan", U_ATAN}, {"Sinh", U_SINH}, {"Cosh", U_COSH},
        {"Asinh", U_ASINH}, {"Acosh", U_ACOSH}, {"Atanh", U_ATANH},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].name, name) == 0) { *k = map[i].kind; return 1; }
    return 0;
}

bf_status bf__unary_prepare(bf__prep *p, bf_error *err)
{
    unary_params *q = (unary_params *)p->params;
    bf_status st = need_input(p, err);
    if (st != BF_OK) return st;
    const bf_tensor *x = p->in[0];
    if (!unary_lookup(p->node->op_type, &q->kind))
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "not a unary op");
    q->dtype = x->dtype;
    q->alpha = 0;
    if (q->kind == U_NEG || q->kind == U_ABS || q->kind == U_SIGN) {
        if (x->dtype != BF_F32 && x->dtype != BF_I64 && x->dtype != BF_I32)
            return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                                  "input X is %s; %s supports float32, int64 and int32",
                                  bf_dtype_name(x->dtype), p->node->op_type);
    } else {
        st = bf__want_f32(p, 0, "X", err);
        if (st != BF_OK) return st;
    }
    q->beta = 0;
    switch (q->kind) {
    case U_LEAKY_RELU: st = bf__attr_float(p->node, "alpha", 0.01f, &q->alpha, err); break;
    case U_HARD_SIGMOID:
        st = bf__attr_float(p->node, "alpha", 0.2f, &q->alpha, err);
        if (st == BF_OK) st = bf__attr_float(p->node, "beta", 0.5f, &q->beta, err);
        break;
    case U_ELU: st = bf__attr_float(p->node, "alpha", 1.0f, &q->alpha, err); break;
    case U_SELU:
        st = bf__attr_float(p->node, "alpha", 1.67326319217681884765625f, &q->alpha, err);
        if (st == BF_OK) st = bf__attr_float(p->node, "gamma", 1.05070102214813232421875f, &q->beta, err);
        break;
    case U_CELU:
        st = bf__attr_float(p->node, "alpha", 1.0f, &q->alpha, err);
        if (st == BF_OK && q->alpha == 0.0f)
            return bf__node_error(err, p->node, BF_EFORMAT, "attribute alpha is 0; Celu divides by it, give a nonzero alpha");
        break;
    case U_THRESHOLDED_RELU: st = bf__attr_float(p->node, "alpha", 1.0f, &q->alpha, err); break;
    case U_GELU: {
        const char *approx;
        st = bf__attr_string(p->node, "approximate", "none", &approx, err);
        if (st != BF_OK) return st;
        if (strcmp(approx, "tanh") == 0) q->kind = U_GELU_TANH;
        else if (strcmp(approx, "none") != 0)
            return bf__node_error(err, p->node, BF_EFORMAT,
                                  "attribute approximate is '%s'; it must be 'none' or 'tanh'", approx);
        break;
    }
    default: break;
    }
    if (st != BF_OK) return st;
    bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
    p->scratch = 0;
    return BF_OK;
}

/* x < 0 is false for NaN, so NaN passes through as torch.relu lets it;
 * fmaxf(NaN, 0) would give 0. */
static void relu(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

static void leaky_relu(float *y, const float *x, int64_t n, float alpha)
{
    for (int64_t i = 0; i < n; i++) y[i] = select_f32(x[i] < 0.0f, x[i] * alpha, x[i]);
}

#define MAP_LOOP(NAME, F) \
    static void NAME(float *y, const float *x, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = F(x[i]); }
BF__MAP_VEC(map_sigmoid, sigmoid_f32)
BF__MAP_VEC(map_tanh, tanh_f32)
BF__MAP_VEC(map_erf, erf_f32)
BF__MAP_VEC(map_exp, exp_f32)
BF__MAP_VEC(map_sqrt, sqrtf)
MAP_LOOP(map_log, logf)
BF__MAP_VEC(map_abs, fabsf)

/* ---- activations and float math --------------------------------------
 *
 * Where the exported op is what PyTorch computed, we compute PyTorch's
 * formula, NaN and Inf included (checked against torch 1.13):
 * - HardSwish is torch's x * clamp(x + 3, 0, 6) / 6 (ONNX's x * HardSigmoid
 *   with alpha 1/6 differs in rounding); -Inf gives NaN (-Inf * 0) as in torch.
 * - Softplus is max(x, 0) + log1p(exp(-|x|)): ONNX's log(exp(x) + 1)
 *   overflows to Inf past x = 88, and torch's (x > 20 ? x : log1p(exp(x)))
 *   equals this to float rounding everywhere (past 20 the log1p term is below
 *   half an ulp of x).
 * - Elu, Selu, Celu use expm1, as torch does (exact near 0).
 * - Sign of NaN is 0 (torch.sign; ONNX's reference, np.sign, gives NaN).
 * - ThresholdedRelu lets NaN through (x <= alpha ? 0 : x, as torch.threshold
 *   and the ONNX reference's np.clip do); ONNX Runtime gives 0.
 * - Round is half to even (nearbyint in the default rounding mode).
 * - Gelu (opset 20, also read at any opset since exporters write it as a
 *   function before): 0.5 x (1 + erf(x / sqrt 2)), or with approximate =
 *   tanh, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); -Inf gives NaN
 *   (-Inf * 0) as in torch. */

static inline float softplus_f32(float x)
{
    return (x > 0.0f ? x : 0.0f) + log1pf(exp_f32(-fabsf(x)));
}

/* hard_swish_f32: fastmath_impl.h (a Conv's fused epilogue computes it too) */
static inline float softsign_f32(float x) { return x / (1.0f + fabsf(x)); }
static inline float mish_f32(float x) { return x * tanh_f32(softplus_f32(x)); }
static inline float gelu_f32(float x) { return 0.5f * x * (1.0f + erf_f32(x * 0.70710678118654752f)); }
/* torch's order: x^3 first, so it overflows to Inf where torch's does */
static inline float gelu_tanh_f32(float x)
{
    float x3 = x * x * x;
    float u = 0.79788456080286536f * (x + 0.044715f * x3);
    return 0.5f * x * (1.0f + tanh_f32(u));
}
static inline float reciprocal_f32(float x) { return 1.0f / x; }
/* comparisons are false for NaN: 0 - 0 */
static inline float sign_f32(float x) { return (float)((x > 0.0f) - (x < 0.0f)); }

BF__MAP_VEC(map_hard_swish, hard_swish_f32)
MAP_LOOP(map_softplus, softplus_f32)
BF__MAP_VEC(map_softsign, softsign_f32)
MAP_LOOP(map_mish, mish_f32)
BF__MAP_VEC(map_gelu, gelu_f32)
BF__MAP_VEC(map_gelu_tanh, gelu_tanh_f32)

#ifdef BF__HAVE_AVX2_COPY
/* gelu_f32 on AVX2 in intrinsics, its operations one for one, two vectors
 * at a time. Why not map_gelu_avx2 (the compiler's copy of the loop):
 * clamp_f32's selects are integer masks there (a compare and vpblendvb
 * each, where vmaxps/vminps give the same value: lo > x ? lo : x, a NaN
 * kept, as exp16 and exp8 take them), and its one vector an iteration is a
 * chain of about 30 dependent operations that the core's window holds few
 * of. Measured on a Zen 2 (16,384 floats in L1, thread CPU, best of 40):
 * the compiler's copy 1.04 ns an element, this with one vector 0.83, two
 * 0.74, three 1.37 and four 1.28 (spilled); ViT-S/16's mlp.0 epilogue
 * (docs/perf/vit.md, h45-gelu). The last n % 16 go through the compiler's
 * copy; every value gets gelu_f32's bits (tests/unit/test_fastmath_avx2.c). */
BF__AVX2 static inline void gelu8_step(float *y, const float *x)
{
    const __m256 c1 = _mm256_set1_ps(1.0f);
    __m256 xv[2], e[2], x2[2], p[2], q[2];
    for (int k = 0; k < 2; k++) {
        xv[k] = _mm256_loadu_ps(x + 8 * k);
        e[k] = _mm256_mul_ps(xv[k], _mm256_set1_ps(0.70710678118654752f));
        e[k] = _mm256_min_ps(_mm256_set1_ps(4.0f), _mm256_max_ps(_mm256_set1_ps(-4.0f), e[k]));
        x2[k] = _mm256_mul_ps(e[k], e[k]);
        p[k] = _mm256_set1_ps(-2.72614225801306e-10f);
        q[k] = _mm256_set1_ps(-1.45660718464996e-05f);
    }
#define GELU8_P(c) \
    for (int k = 0; k < 2; k++) p[k] = _mm256_add_ps(_mm256_mul_ps(p[k], x2[k]), _mm256_set1_ps(c));
#define GELU8_Q(c) \
    for (int k = 0; k < 2; k++) q[k] = _mm256_add_ps(_mm256_mul_ps(q[k], x2[k]), _mm256_set1_ps(c));
    GELU8_P(2.77068142495902e-08f) GELU8_Q(-2.13374055278905e-04f)
    GELU8_P(-2.10102402082508e-06f) GELU8_Q(-1.68282697438203e-03f)
    GELU8_P(-5.69250639462346e-05f) GELU8_Q(-7.37332916720468e-03f)
    GELU8_P(-7.34990630326855e-04f) GELU8_Q(-1.42647390514189e-02f)
    GELU8_P(-2.95459980854025e-03f)
    GELU8_P(-1.60960333262415e-02f)
#undef GELU8_P
#undef GELU8_Q
    for (int k = 0; k < 2; k++) {
        __m256 r = _mm256_mul_ps(e[k], _mm256_div_ps(p[k], q[k]));
        r = _mm256_min_ps(c1, _mm256_max_ps(_mm256_set1_ps(-1.0f), r));
        _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), xv[k]), _mm256_add_ps(c1, r)));
    }
}

BF__AVX2 static void gelu8(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) gelu8_step(y + i, x + i);
    if (i < n) map_gelu_avx2(y + i, x + i, n - i);
}
#endif
BF__MAP_VEC(map_reciprocal, reciprocal_f32)
MAP_LOOP(map_floor, floorf)
MAP_LOOP(map_ceil, ceilf)
MAP_LOOP(map_round, nearbyintf)
MAP_LOOP(map_sign, sign_f32)
MAP_LOOP(map_sin, sinf)
MAP_LOOP(map_cos, cosf)
MAP_LOOP(map_tan, tanf)
MAP_LOOP(map_asin, asinf)
MAP_LOOP(map_acos, acosf)
MAP_LOOP(map_atan, atanf)
MAP_LOOP(map_sinh, sinhf)
MAP_LOOP(map_cosh, coshf)
MAP_LOOP(map_asinh, asinhf)
MAP_LOOP(map_acosh, acoshf)
MAP_LOOP(map_atanh, atanhf)

static void hard_sigmoid(float *y, const float *x, int64_t n, float alpha, float beta)
{
    for (int64_t i = 0; i < n; i++) y[i] = clamp_f32(alpha * x[i] + beta, 0.0f, 1.0f);
}

/* Elu, Selu and Celu are scale * (x > 0 ? x : alpha * expm1(x / div)) */
static void elu_like(float *y, const float *x, int64_t n, float alpha, float scale, float div)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = scale * (v > 0.0f ? v : alpha * expm1f(v / div));
    }
}

static void thresholded_relu(float *y, const float *x, int64_t n, float alpha)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i] <= alpha ? 0.0f : x[i];
}

/* Abs and Sign of integers (shape arithmetic); Abs of MIN wraps to MIN, as
 * in torch.abs, through unsigned. */
#define INT_UNARY(T, U)                                                            \
    do {                                                                           \
        const T *a = xv;                                                           \
        T *b = yv;                                                                 \
        if (kind == U_ABS)                                                         \
            for (int64_t i = 0; i < n; i++) b[i] = a[i] < 0 ? (T)(0 - (U)a[i]) : a[i]; \
        else                                                                       \
            for (int64_t i = 0; i < n; i++) b[i] = (T)((a[i] > 0) - (a[i] < 0));   \
    } while (0)

static void int_unary(unary_kind kind, bf_dtype dt, void *yv, const void *xv, int64_t n)
{
    if (dt == BF_I64) INT_UNARY(int64_t, uint64_t);
    else INT_UNARY(int32_t, uint32_t);
}

bf_status bf__unary_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const unary_params *q = c->params;
    int64_t n = bf_tensor_numel(c->in[0]);
    const void *xv = c->in[0]->data;
    void *yv = c->out[0]->data;
    const float *x = xv;
    float *y = yv;
    if (q->dtype != BF_F32 && q->kind != U_NEG) {
        int_unary(q->kind, q->dtype, yv, xv, n);
        return BF_OK;
    }
    switch (q->kind) {
    case U_RELU: relu(y, x, n); break;
    case U_LEAKY_RELU: leaky_relu(y, x, n, q->alpha); break;
    case U_SIGMOID: map_sigmoid(y, x, n); break;
    case U_TANH: map_tanh(y, x, n); break;
    case U_ERF: map_erf(y, x, n); break;
    case U_SQRT: map_sqrt(y, x, n); break;
    case U_EXP: map_exp(y, x, n); break;
    case U_LOG: map_log(y, x, n); break;
    case U_ABS: map_abs(y, x, n); break;
    case U_HARD_SIGMOID: hard_sigmoid(y, x, n, q->alpha, q->beta); break;
    case U_HARD_SWISH: map_hard_swish(y, x, n); break;
    case U_ELU: elu_like(y, x, n, q->alpha, 1.0f, 1.0f); break;
    case U_SELU: elu_like(y, x, n, q->alpha, q->beta, 1.0f); break;
    case U_CELU: elu_like(y, x, n, q->alpha, 1.0f, q->alpha); break;
    case U_SOFTPLUS: map_softplus(y, x, n); break;
    case U_SOFTSIGN: map_softsign(y, x, n); break;
    case U_MISH: map_mish(y, x, n); break;
    case U_THRESHOLDED_RELU: thresholded_relu(y, x, n, q->alpha); break;
    case U_GELU: bf__gelu_kernel()(y, x, n); break;
    case U_GELU_TANH: map_gelu_tanh(y, x, n); break;
    case U_RECIPROCAL: map_reciprocal(y, x, n); break;
    case U_FLOOR: map_floor(y, x, n); break;
    case U_CEIL: map_ceil(y, x, n); break;
    case U_ROUND: map_round(y, x, n); break;
    case U_SIGN: map_sign(y, x, n); break;
    case U_SIN: map_sin(y, x, n); break;
    case U_COS: map_cos(y, x, n); break;
    case U_TAN: map_tan(y, x, n); break;
    case U_ASIN: map_asin(y, x, n); break;
    case U_ACOS: map_acos(y, x, n); break;
    case U_ATAN: map_atan(y, x, n); break;
    case U_SINH: map_sinh(y, x, n); break;
    case U_COSH: map_cosh(y, x, n); break;
    case U_ASINH: map_asinh(y, x, n); break;
    case U_ACOSH: map_acosh(y, x, n); break;
    case U_ATANH: map_atanh(y, x, n); break;
    case U_NEG:
        /* integers negate through unsigned: -INT_MIN wraps instead of being UB */
        if (q->dtype == BF_F32) {
            for (int64_t i = 0; i < n; i++) y[i] = -x[i];
        } else if (q->dtype == BF_I64) {
            const int64_t *a = xv;
            int64_t *b = yv;
            for (int64_t i = 0; i < n; i++) b[i] = (int64_t)(0 - (uint64_t)a[i]);
        } else {
            const int32_t *a = xv;
            int32_t *b = yv;
            for (int64_t i = 0; i < n; i++) b[i] = (int32_t)(0 - (uint32_t)a[i]);
        }
        break;
    }
    return BF_OK;
}

/* diffchain.c runs these on the changed elements alone, gathered: each
 * element's result depends on that element only. */
int bf__unary_f32(const bf__step *s)
{
    return s->node->op->run == bf__unary_run && ((const unary_params *)s->params)->dtype == BF_F32;
}

int bf__unary_gelu(const bf__step *s) { return bf__unary_f32(s) && ((const unary_params *)s->params)->kind == U_GELU; }
/* map_gelu's copy for this CPU and BITFLIP_SIMD (AVX2's: gelu8), picked
 * once by a fused epilogue, which calls it on every block of rows; the
 * Gelu op asks for it each run (map_gelu, which has no gelu8, is then only
 * the build's without the vector copies) */
bf__map_fn bf__gelu_kernel(void)
{
#ifdef BF__HAVE_AVX2_COPY
    (void)map_gelu;
    int level = bf__simd_level();
    return level >= BF__SIMD_AVX512 ? map_gelu_avx512 : level >= BF__SIMD_AVX2 ? gelu8 : map_gelu_plain;
#else
    return map_gelu;
#endif
}
int bf__unary_relu(const bf__step *s) { return bf__unary_f32(s) && ((const unary_params *)s->params)->kind == U_RELU; }

/* ---- Clip -------------------------------------------------------------- */

/* Bounds come from inputs 1 and 2 (opset 11+; read at run time, so they
 * need not be constants) or from the min/max attributes of older exports.
 * An absent bound does not clip, as torch.clamp with one bound; ONNX
 * Runtime clamps to the dtype's lowest/max instead, which differs only for
 * +-Inf inputs (we keep Inf, it would give +-FLT_MAX). */
typedef struct clip_params {
    bf_dtype dtype;
    int has_lo, has_hi;     /* from attributes */
    float lo, hi;
} clip_params;
static_assert(sizeof(clip_params) <= BF__OP_PARAMS_MAX, "Clip params too large");

static bf_status clip_prepare(bf__prep *p, bf_error *err)
{
    clip_params *q = (clip_params *)p->params;
    bf_status st = need_input(p, err);
    if (st != BF_OK) return st;
    const bf_tensor *x = p->in[0];
    q->dtype = x->dtype;
    if (x->dtype != BF_F32 && x->dtype != BF_I64 && x->dtype != BF_I32)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                              "input is %s; Clip supports float32, int64 and int32",
                              bf_dtype_name(x->dtype));
    static const char *const names[] = {NULL, "min", "max"};
    for (int i = 1; i < p->n_in && i <= 2; i++) {
        const bf_tensor *t = p->in[i];
        if (!t) continue;
        if (t->dtype != x->dtype)
            return bf__node_error(err, p->node, BF_EFORMAT, "input %s is %s; it must match input (%s)",
                                  names[i], bf_dtype_name(t->dtype), bf_dtype_name(x->dtype));
        if (bf_tensor_numel(t) != 1) {
            char s[96];
            return bf__node_error(err, p->node, BF_ESHAPE, "input %s has shape %s; it must be a scalar",
                                  names[i], bf_shape_str(t->dims, t->ndim, s, sizeof s));
        }
    }
    q->has_lo = bf__node_attr(p->node, "min") != NULL;
    q->has_hi = bf__node_attr(p->node, "max") != NULL;
    if ((q->has_lo || q->has_hi) && x->dtype != BF_F32)
        return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                              "attributes min/max (opset < 11) apply to float32 only; give the "
                              "bounds as inputs");
    st = bf__attr_float(p->node, "min", -INFINITY, &q->lo, err);
    if (st == BF_OK) st = bf__attr_float(p->node, "max", INFINITY, &q->hi, err);
    if (st != BF_OK) return st;
    bf__set_shape(p->out[0], x->dtype, x->ndim, x->dims);
    p->scratch = 0;
    return BF_OK;
}

/* Comparisons are false for NaN, so NaN passes as torch.clamp lets it. With
 * lo > hi every element becomes hi, as in torch.clamp and ONNX Runtime.
 * Bounds from inputs win over attributes; integer Clip has no attributes. */
#define CLIP_RUN(T)                                                           \
    do {                                                                      \
        const T *x = c->in[0]->data;                                          \
        T *y = c->out[0]->data;                                               \
        int ul = in_lo || q->has_lo, uh = in_hi || q->has_hi;                 \
        T lo = in_lo ? *(const T *)c->in[1]->data : q->has_lo ? (T)q->lo : 0; \
        T hi = in_hi ? *(const T *)c->in[2]->data : q->has_hi ? (T)q->hi : 0; \
        if (ul && uh) {                                                       \
            for (int64_t i = 0; i < n; i++) {                                 \
                T v = x[i] < lo ? lo : x[i];                                  \
                y[i] = v > hi ? hi : v;                                       \
            }                                                                 \
        } else if (ul) {                                                      \
            for (int64_t i = 0; i < n; i++) y[i] = x[i] < lo ? lo : x[i];     \
        } else if (uh) {                                                      \
            for (int64_t i = 0; i < n; i++) y[i] = x[i] > hi ? hi : x[i];     \
        } else {                                                              \
            memmove(y, x, (size_t)n * sizeof(T));                             \
        }                                                                     \
    } while (0)

static bf_status clip_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const clip_params *q = c->params;
    int64_t n = bf_tensor_numel(c->in[0]);
    int in_lo = c->n_in > 1 && c->in[1], in_hi = c->n_in > 2 && c->in[2];
    if (n == 0) return BF_OK;       /* buffers may be NULL */
    switch (q->dtype) {
    case BF_F32: CLIP_RUN(float); break;
    case BF_I64: CLIP_RUN(int64_t); break;
    default: CLIP_RUN(int32_t); break;
    }
    return BF_OK;
}

/* The bounds clip_run would use now, for a Conv that runs a Relu or Clip
 * in its epilogue (plan_build.c): Relu is x < 0 ? 0 : x, the lower bound alone;
 * an absent bound is an infinity, which no comparison passes. A float
 * HardSwish is one too, run by hard_swish_f32 as map_hard_swish does. */
int bf__act_of(const bf__step *s, bf__act *act)
{
    if (bf__unary_relu(s)) {
        if (act) *act = (bf__act){.lo = 0.0f, .hi = INFINITY};
        return 1;
    }
    if (bf__unary_f32(s) && ((const unary_params *)s->params)->kind == U_HARD_SWISH) {
        if (act) *act = (bf__act){.lo = -INFINITY, .hi = INFINITY, .hswish = 1};
        return 1;
    }
    if (s->node->op->run != clip_run || ((const clip_params *)s->params)->dtype != BF_F32) return 0;
    if (!act) return 1;
    const clip_params *q = s->params;
    int in_lo = s->n_in > 1 && s->in[1], in_hi = s->n_in > 2 && s->in[2];
    act->lo = in_lo ? *(const float *)s->in[1]->data : q->has_lo ? q->lo : -INFINITY;
    act->hi = in_hi ? *(const float *)s->in[2]->data : q->has_hi ? q->hi : INFINITY;
    act->hswish = 0;
    act->res = NULL, act->res_a = 0;
    act->cbias = NULL, act->cbias_a = 0, act->map = NULL;
    return 1;
}

int bf__map_f32(const bf__step *s)
{
    return s->n_out == 1 && (bf__unary_f32(s) || (s->node->op->run == clip_run && ((const clip_params *)s->params)->dtype == BF_F32));
}

/* The step's own run on a 1-D view of the elements: every output element of
 * these maps depends on its own input element alone (and Clip's bounds,
 * passed as the step holds them), so a span gives the whole run's bits
 * there, as chain mode's links rely on (diffchain_link.c). */
void bf__map_span(const bf__step *s, int64_t off, int64_t n)
{
    if (n <= 0) return;
    bf_tensor x = {.dtype = BF_F32, .ndim = 1, .dims = {n}, .data = (float *)s->in[0]->data + off};
    bf_tensor y = {.dtype = BF_F32, .ndim = 1, .dims = {n}, .data = (float *)s->out[0]->data + off};
    const bf_tensor *in[3] = {&x, s->n_in > 1 ? s->in[1] : NULL, s->n_in > 2 ? s->in[2] : NULL};
    bf_tensor *out[1] = {&y};
    bf__ctx c = {.node = s->node, .params = s->params, .n_in = s->n_in > 3 ? 3 : s->n_in, .n_out = 1, .in = in, .out = out};
    s->node->op->run(&c, NULL);
}

/* ---- Cast -------------------------------------------------------------- */

/* The engine computes in fp32 and has no float64 or float16 tensors. Cast to
 * DOUBLE (exports put it around some ops) stays float32. Cast to FLOAT16 or
 * BFLOAT16 rounds each value to that format (round to nearest even) and
 * stores it back as float32, so the precision loss the model asks for
 * happens, and a later Cast back to FLOAT is exact. */
typedef enum cast_round { ROUND_NONE, ROUND_F16, ROUND_BF16 } cast_round;

typedef struct cast_params {
    bf_dtype from, to;
    cast_round round;
} cast_params;
static_assert(sizeof(cast_params) <= BF__OP_PARAMS_MAX, "Cast params too large");

static bf_status cast_prepare(bf__prep *p, bf_error *err)
{
    cast_params *q = (cast_params *)p->params;
    bf_status st = need_input(p, err);
    if (st != BF_OK) return st;
    const bf_tensor *x = p->in[0];
    int64_t to;
    st = bf__attr_int(p->node, "to", -1, &to, err);
    if (st != BF_OK) return st;
    q->round = ROUND_NONE;
    switch (to) {
    case 1: case 11: q->to = BF_F32; break;               /* FLOAT, DOUBLE */
    case 10: q->to = BF_F32; q->round = ROUND_F16; break;  /* FLOAT16 */
    case 16: q->to = BF_F32; q->round = ROUND_BF16; break; /* BFLOAT16 */
    case 2: q->to = BF_U8; break;
    case 3: q->to = BF_I8; break;
    case 6: q->to = BF_I32; break;
    case 7: q->to = BF_I64; break;
    case 9: q->to = BF_BOOL; break;
    case -1:
        return bf__node_error(err, p->node, BF_EFORMAT, "attribute 'to' is required");
    default:
        return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                              "attribute 'to' = %lld is not supported; supported: 1 (FLOAT), "
                              "2 (UINT8), 3 (INT8), 6 (INT32), 7 (INT64), 9 (BOOL), 10 (FLOAT16), "
                              "11 (DOUBLE), 16 (BFLOAT16)", (long long)to);
    }
    q->from = x->dtype;
    switch (x->dtype) {
    case BF_F32: case BF_I64: case BF_I32: case BF_BOOL: case BF_U8: case BF_I8: break;
    default:
        return bf__node_error(err, p->node, BF_EUNSUPPORTED, "input is %s; Cast cannot read it",
                              bf_dtype_name(x->dtype));
    }
    bf__set_shape(p->out[0], q->to, x->ndim, x->dims);
    p->scratch = 0;
    return BF_OK;
}

static bf_status cast_run(const bf__ctx *c, bf_error *err)
{
    const cast_params *q = c->params;
    int64_t n = bf_tensor_numel(c->in[0]);
    const void *xv = c->in[0]->data;
    void *yv = c->out[0]->data;
    float *y = yv;
    if (n == 0) return BF_OK;       /* buffers may be NULL */
    /* the common conversions as plain loops; the rest through bf_convert */
    if (q->from == BF_F32 && q->to == BF_F32) {
        memmove(yv, xv, (size_t)n * sizeof(float));
    } else if (q->from == BF_BOOL && q->to == BF_F32) {
        const uint8_t *x = xv;
        for (int64_t i = 0; i < n; i++) y[i] = x[i] != 0;
    } else if (q->from == BF_I64 && q->to == BF_F32) {
        const int64_t *x = xv;
        for (int64_t i = 0; i < n; i++) y[i] = (float)x[i];
    } else if (q->from == BF_F32 && q->to == BF_BOOL) {
        const float *x = xv;
        uint8_t *b = yv;
        for (int64_t i = 0; i < n; i++) b[i] = x[i] != 0.0f;    /* NaN is true */
    } else {
        bf_status st = bf_convert(yv, q->to, xv, q->from, (size_t)n, err);
        if (st != BF_OK) return bf__node_error(err, c->node, st, "%s", err ? err->msg : "");
    }
    if (q->round == ROUND_F16)
        for (int64_t i = 0; i < n; i++) y[i] = bf_f16_to_f32(bf_f32_to_f16(y[i]));
    else if (q->round == ROUND_BF16)
        for (int64_t i = 0; i < n; i++) y[i] = bf_bf16_to_f32(bf_f32_to_bf16(y[i]));
    return BF_OK;
}

/* ---- the table --------------------------------------------------------- */

#define UNARY(NAME) {NAME, 1, 1, 1, 1, 0, bf__unary_prepare, bf__unary_run}
#define BINARY(NAME) {NAME, 2, 2, 1, 1, 0, bf__binary_prepare, bf__binary_run}
#define REDUCE(NAME) {NAME, 1, 2, 1, 1, 0, bf__reduce_prepare, bf__reduce_run}

const bf__op bf__ops_elementwise[] = {
    UNARY("Relu"), UNARY("LeakyRelu"), UNARY("Sigmoid"), UNARY("Tanh"), UNARY("Erf"),
    UNARY("Sqrt"), UNARY("Neg"), UNARY("Exp"), UNARY("Log"), UNARY("Abs"),
    UNARY("Reciprocal"), UNARY("Floor"), UNARY("Ceil"), UNARY("Round"), UNARY("Sign"),
    UNARY("Sin"), UNARY("Cos"), UNARY("Tan"), UNARY("Asin"), UNARY("Acos"), UNARY("Atan"),
    UNARY("Sinh"), UNARY("Cosh"), UNARY("Asinh"), UNARY("Acosh"), UNARY("Atanh"),
    BINARY("Add"), BINARY("Sub"), BINARY("Mul"), BINARY("Div"), BINARY("Pow"),
    REDUCE("ReduceSum"), REDUCE("ReduceMean"), REDUCE("ReduceMax"),
    {"Clip", 1, 3, 1, 1, 0, clip_prepare, clip_run},
    {"Where", 3, 3, 1, 1, 0, bf__where_prepare, bf__where_run},
    {"Softmax", 1, 1, 1, 1, 0, bf__softmax_prepare, bf__softmax_run},
    {"Cast", 1, 1, 1, 1, 0, cast_prepare, cast_run},
    {"Min", 1, -1, 1, 1, 0, bf__variadic_prepare, bf__variadic_run},
    {"Max", 1, -1, 1, 1, 0, bf__variadic_prepare, bf__variadic_run},
    {"Sum", 1, -1, 1, 1, 0, bf__variadic_prepare, bf__variadic_run},
    {"Mean", 1, -1, 1, 1, 0, bf__variadic_prepare, bf__variadic_run},
    {0},
};
