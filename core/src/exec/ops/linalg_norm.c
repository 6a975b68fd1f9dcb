/* Normalisations: BatchNormalization (inference and training mode), LayerNormalization,
 * InstanceNormalization, GroupNormalization, LpNormalization. Statistics
 * are read from the inputs at every run: scale, bias, mean and variance are
 * parameters that faults rewrite. Each computes its statistics the way
 * PyTorch's CPU kernel for the op does, so that huge or Inf inputs give
 * NaN and Inf where PyTorch gives them (docs/NUMERICS.md). */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/simd.h"
#include "exec/op.h"
#include "exec/step_access.h"
#include "fastmath_impl.h"
#include "linalg_impl.h"
#include "sum16.h"

/* ---- PyTorch's batch_norm kernel (1.13, CPU) ----
 *
 * Shared by BatchNormalization (inference and training mode) and
 * InstanceNormalization, which PyTorch runs as a training-mode batch_norm
 * over [1, N*C, ...]. The statistics follow
 * batch_norm_cpu_collect_stats_contiguous_impl and
 * batch_norm_cpu_update_stats_template; the transform,
 * batch_norm_cpu_collect_linear_and_constant_terms and
 * batch_norm_cpu_contiguous_impl, whose `bias - mean * alpha` and
 * `x * alpha + beta` GCC contracts into fused multiply-adds in the AVX2
 * kernel (measured: every output bit for bit with the fma, 54-70% without). */

/* One channel's mean and sum of squared deviations over x[o * stride + i],
 * o < outer, i < inner: the sum in double, the mean rounded to float, each
 * deviation and its square in float (one beyond ~1.8e19 is Inf), the squares
 * summed in double and the sum rounded to float (past FLT_MAX: Inf). */
static void torch_stats(const float *x, int64_t outer, int64_t stride, int64_t inner, float *mean, float *var_sum)
{
    if (inner == 1) {
        /* [N, C] (or [N, C, 1, ...]): "NC11 is also channels last", and
         * batch_norm_cpu_collect_stats_channels_last_impl sums in float, in
         * sample order (one thread), and accumulates the squares as
         * fma(d, d, acc) in float (measured: every output bit for bit) */
        float sf = 0.0f, acc = 0.0f;
        for (int64_t o = 0; o < outer; o++) sf += x[o * stride];
        float m = (float)((double)sf / (double)outer);
        for (int64_t o = 0; o < outer; o++) {
            float d = x[o * stride] - m;
            acc = fmaf(d, d, acc);
        }
        *mean = m;
        *var_sum = acc;
        return;
    }
    double sum = 0.0, vs = 0.0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) sum += x[o * stride + i];
    float m = (float)(sum / (double)(outer * inner));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            float d = x[o * stride + i] - m;
            vs += d * d;
        }
    *mean = m;
    *var_sum = (float)vs;
}

/* The biased variance var_sum / n (a float division, as ATen's float / int64
 * is) and InvStd: 1 / sqrt(var + eps) in double, rounded to float; 0 when
 * both are 0. eps is the double PyTorch was given (bf__torch_double). */
static float torch_invstd(float var_sum, int64_t n, double eps, float *var)
{
    *var = var_sum / (float)n;
    if (*var == 0.0f && eps == 0.0) return 0.0f;
    return (float)(1.0 / sqrt((double)*var + eps));
}

/* The double a PyTorch module held for a float attribute the exporter wrote
 * (eps 1e-5, momentum 0.9): the shortest decimal that rounds to it. */
double bf__torch_double(float f)
{
    char buf[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

/* y[i] = fma(x[i], a, b): the AVX2 copy's fmaf is the instruction, the
 * reference's the C library's; the same bits either way. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void affine_fma_avx2(const float *restrict x, float a, float b,
                                                                float *restrict y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(x[i], a, b);
}
#endif

static void affine_fma(int avx2, const float *restrict x, float a, float b, float *restrict y, int64_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx2) {
        affine_fma_avx2(x, a, b, y, n);
        return;
    }
#else
    (void)avx2;
#endif
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(x[i], a, b);
}

/* ---- BatchNormalization ---- */

typedef struct bn_params {
    int64_t n, c, inner;        /* X viewed as [N, C, inner] */
    float eps;
    double eps_torch;           /* the double eps PyTorch used (training mode) */
    int training;               /* normalise with the batch's own statistics */
    float momentum_torch;       /* PyTorch's momentum, 1 - ONNX's */
} bn_params;
static_assert(sizeof(bn_params) <= BF__OP_PARAMS_MAX, "batchnorm params too large");

/* Training mode: opset 14's training_mode = 1, or, before, more than one
 * output (BatchNormalization-9's "output case #1", which PyTorch's exporter
 * writes for TrainingMode.TRAINING at opsets 9 to 13). */
static int bn_training(const bf__prep *p, int64_t mode)
{
    if (p->opset >= 14) return mode != 0;
    for (int i = 1; i < p->n_out; i++)
        if (bf__output_wanted(p, i)) return 1;
    return 0;
}

bf_status bf__batchnorm_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    bn_params *bp = (bn_params *)p->params;
    bf_status st;
    int64_t training = 0;
    float momentum;
    if ((st = bf__attr_float(nd, "epsilon", 1e-5f, &bp->eps, err)) ||
        (st = bf__attr_float(nd, "momentum", 0.9f, &momentum, err)) ||
        (st = bf__attr_int(nd, "training_mode", 0, &training, err)))
        return st;
    if (training != 0 && training != 1)
        return bf__node_error(err, nd, BF_EFORMAT, "training_mode = %lld; it must be 0 or 1", (long long)training);
    bp->training = bn_training(p, training);
    int max_out = p->opset >= 14 ? 3 : 5;
    if (p->n_out > max_out)
        return bf__node_error(err, nd, BF_EFORMAT, "%d outputs; BatchNormalization-%s has at most %d", p->n_out,
                              p->opset >= 14 ? "14" : "9", max_out);
    if (!bp->training)
        for (int i = 1; i < p->n_out; i++)
            if (bf__output_wanted(p, i))
                return bf__node_error(err, nd, BF_EFORMAT,
                                      "output %d (running statistics) is read, but training_mode = 0: in "
                                      "inference the node has Y alone", i);
    static const char *const names[5] = {"X", "scale", "B", "input_mean", "input_var"};
    for (int i = 0; i < 5; i++)
        if ((st = bf__want_f32(p, i, names[i], err))) return st;
    const bf_tensor *x = p->in[0];
    char sx[96], sv[96];
    if (x->ndim < 2)
        return bf__node_error(err, nd, BF_ESHAPE, "input X has shape %s; expected [N, C, ...] (rank >= 2)",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    int64_t c = x->dims[1];
    for (int i = 1; i < 5; i++) {
        const bf_tensor *v = p->in[i];
        if (v->ndim != 1 || v->dims[0] != c)
            return bf__node_error(err, nd, BF_ESHAPE, "input %s has shape %s; expected [C] = [%lld] from X %s",
                                  names[i], bf_shape_str(v->dims, v->ndim, sv, sizeof sv), (long long)c,
                                  bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    }
    bp->n = x->dims[0], bp->c = c, bp->inner = 1;
    for (int i = 2; i < x->ndim; i++) bp->inner *= x->dims[i];
    /* F.batch_norm refuses this too ("Expected more than 1 value per
     * channel when training"): the unbiased variance would divide by 0 */
    if (bp->training && bp->n * bp->inner == 1)
        return bf__node_error(err, nd, BF_ESHAPE,
                              "training mode (batch statistics) on input X %s: one value per channel; PyTorch "
                              "refuses it too (a batch of 1: choose a batch size that leaves none)",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    bp->eps_torch = bf__torch_double(bp->eps);
    bp->momentum_torch = (float)(1.0 - bf__torch_double(momentum));
    bf__set_shape(p->out[0], BF_F32, x->ndim, x->dims);
    for (int i = 1; i < p->n_out; i++) bf__set_shape(p->out[i], BF_F32, 1, &c);
    return BF_OK;
}

/* Training mode's extra outputs, as PyTorch updates its buffers (in float;
 * the running variance from the unbiased variance, var_sum / (n - 1)), and,
 * before opset 14, the batch's mean and biased variance. */
static void bn_running(const bf__ctx *c, const bn_params *bp, int64_t ch, float mean, float var_sum, float var)
{
    const float *rmean = c->in[3]->data, *rvar = c->in[4]->data;
    float mt = bp->momentum_torch;
    int64_t n = bp->n * bp->inner;
    if (c->n_out > 1 && c->out[1] && c->out[1]->data)
        ((float *)c->out[1]->data)[ch] = mt * mean + (1 - mt) * rmean[ch];
    if (c->n_out > 2 && c->out[2] && c->out[2]->data) {
        double unbiased = var_sum / (float)(n - 1);
        ((float *)c->out[2]->data)[ch] = (float)(mt * unbiased + (1 - mt) * rvar[ch]);
    }
    if (c->n_out > 3 && c->out[3] && c->out[3]->data) ((float *)c->out[3]->data)[ch] = mean;
    if (c->n_out > 4 && c->out[4] && c->out[4]->data) ((float *)c->out[4]->data)[ch] = var;
}

bf_status bf__batchnorm_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const bn_params *bp = c->params;
    const float *x = c->in[0]->data, *scale = c->in[1]->data, *bias = c->in[2]->data;
    const float *mean = c->in[3]->data, *var = c->in[4]->data;
    float *y = c->out[0]->data;
    int64_t inner = bp->inner, stride = bp->c * inner;
    int avx2 = bf__simd_avx2();
    const bf__bnorm bn = {scale, bias, mean, var, bp->eps};
    for (int64_t ch = 0; ch < bp->c; ch++) {
        float a, b;
        if (bp->training) {
            /* the batch's own statistics: every sample's output depends on
             * the whole batch (bf__batchnorm_batch_stats) */
            float var_sum = 0.0f, v = 0.0f, m = 0.0f, invstd = 0.0f;
            if (bp->n * inner > 0) {
                torch_stats(x + ch * inner, bp->n, stride, inner, &m, &var_sum);
                invstd = torch_invstd(var_sum, bp->n * inner, bp->eps_torch, &v);
            }
            bn_running(c, bp, ch, m, var_sum, v);
            a = invstd * scale[ch], b = fmaf(-m, a, bias[ch]);
        } else {
            /* the running statistics: the same a and b as a Conv computing
             * this step in its epilogue (op.h) */
            bf__bnorm_coef(&bn, ch, &a, &b);
        }
        for (int64_t n = 0; n < bp->n; n++) affine_fma(avx2, x + n * stride + ch * inner, a, b, y + n * stride + ch * inner, inner);
    }
    return BF_OK;
}

/* For the differential executor: a BatchNormalization in training mode
 * normalises each sample with statistics of the whole batch. */
int bf__batchnorm_batch_stats(const bf__step *s)
{
    return s->node->op->run == bf__batchnorm_run && ((const bn_params *)s->params)->training;
}

int bf__bnorm_of(const bf__step *s, bf__bnorm *bn)
{
    /* training mode: statistics of the whole batch, never an epilogue */
    if (s->node->op->run != bf__batchnorm_run || s->n_in != 5 || s->n_out != 1 ||
        ((const bn_params *)s->params)->training)
        return 0;
    for (int i = 1; i < 5; i++)
        if (!s->in[i]) return 0;
    if (bn)
        *bn = (bf__bnorm){s->in[1]->data, s->in[2]->data, s->in[3]->data, s->in[4]->data,
                          ((const bn_params *)s->params)->eps};
    return 1;
}

int bf__bnorm_channel(const bf__step *s, int64_t ch)
{
    bf__bnorm bn;
    if (!bf__bnorm_of(s, &bn)) return 0;
    const bn_params *bp = s->params;
    if (ch < 0 || ch >= bp->c) return 0;
    const float *x = s->in[0]->data;
    float *y = s->out[0]->data;
    int64_t inner = bp->inner, stride = bp->c * inner;
    int avx2 = bf__simd_avx2();
    float a, b;
    /* bf__batchnorm_run's inference branch for this one channel: the same
     * coefficients, the same affine_fma call on each sample's plane */
    bf__bnorm_coef(&bn, ch, &a, &b);
    for (int64_t n = 0; n < bp->n; n++) affine_fma(avx2, x + n * stride + ch * inner, a, b, y + n * stride + ch * inner, inner);
    return 1;
}

/* ---- LayerNormalization ---- */

typedef struct ln_params {
    int64_t rows, d;            /* X viewed as [rows, d], d = product of dims from axis */
    float eps;
    int scale_full, has_bias, bias_full;   /* full: one value per normalised element; else one */
} ln_params;
static_assert(sizeof(ln_params) <= BF__OP_PARAMS_MAX, "layernorm params too large");

/* Scale or B must broadcast to the normalised dims x->dims[axis:]: either
 * equal to them (leading 1s allowed) or a single value. */
static bf_status ln_param_shape(const bf__prep *p, int i, const char *what, int axis, int *full,
                                bf_error *err)
{
    const bf_tensor *x = p->in[0], *t = p->in[i];
    bf_status st;
    if ((st = bf__want_f32(p, i, what, err))) return st;
    if (bf_tensor_numel(t) == 1 && t->ndim <= x->ndim) {
        *full = 0;
        return BF_OK;
    }
    /* every normalised dim must be covered: a Scale of shape [4] for X
     * [2, 3, 4] at axis 1 has 4 values for 12 (found by fuzz_onnx) */
    int tail = x->ndim - axis, ok = t->ndim <= x->ndim && t->ndim >= tail;
    for (int j = 0; ok && j < t->ndim; j++) {
        int xi = x->ndim - t->ndim + j;
        ok = xi >= axis ? t->dims[j] == x->dims[xi] : t->dims[j] == 1;
    }
    if (!ok) {
        char sx[96], st_[96];
        return bf__node_error(err, p->node, BF_ESHAPE,
                              "input %s has shape %s; expected the normalised dims %s of X (axis %d) or a "
                              "single value",
                              what, bf_shape_str(t->dims, t->ndim, st_, sizeof st_),
                              bf_shape_str(x->dims + axis, tail, sx, sizeof sx), axis);
    }
    *full = 1;
    return BF_OK;
}

bf_status bf__layernorm_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    ln_params *lp = (ln_params *)p->params;
    bf_status st;
    int64_t axis64, stash;
    if ((st = bf__attr_int(nd, "axis", -1, &axis64, err)) ||
        (st = bf__attr_float(nd, "epsilon", 1e-5f, &lp->eps, err)) ||
        (st = bf__attr_int(nd, "stash_type", 1, &stash, err)))
        return st;
    (void)stash;                /* statistics in float whatever it asks, as PyTorch computes them */
    if (bf__output_wanted(p, 1) || bf__output_wanted(p, 2))
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "outputs Mean and InvStdDev are not supported; only Y");
    if ((st = bf__want_f32(p, 0, "X", err))) return st;
    const bf_tensor *x = p->in[0];
    if (x->ndim == 0)
        return bf__node_error(err, nd, BF_ESHAPE, "input X is a scalar; expected rank >= 1");
    int axis;
    if ((st = bf__norm_axis(nd, axis64, x->ndim, &axis, err))) return st;
    if ((st = ln_param_shape(p, 1, "Scale", axis, &lp->scale_full, err))) return st;
    lp->has_bias = p->n_in > 2 && p->in[2];
    if (lp->has_bias && (st = ln_param_shape(p, 2, "B", axis, &lp->bias_full, err))) return st;
    lp->rows = 1, lp->d = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i < axis) lp->rows *= x->dims[i];
        else lp->d *= x->dims[i];
    }
    bf__set_shape(p->out[0], BF_F32, x->ndim, x->dims);
    return BF_OK;
}

/* PyTorch's row moments (ATen's RowwiseMoments on CPU), reproduced step for
 * step because under faults its NaN/Inf pattern is what users see: Welford
 * in 8 float lanes over chunks of 16 vectors, the chunks merged in a binary
 * cascade, the leftover tail in a scalar Welford, the lanes merged into it
 * last. A merge into an empty state multiplies delta^2 by 0, so a lane mean
 * beyond ~1.8e19 makes delta^2 Inf and the row NaN, where a plain two-pass
 * variance would give Inf and a row of B (docs/NUMERICS.md). 8 lanes: the
 * AVX2 build PyTorch runs on x86-64 (Debian's, and the wheels without
 * AVX-512 dispatch). */
enum { MOM_LANES = 8, MOM_CHUNK = 16, MOM_DEPTH = 64 };

static void mom_merge(int64_t add_n, const float *add_m1, const float *add_m2, int64_t *n, float *m1,
                      float *m2, int lanes)
{
    int64_t tot = *n + add_n;
    float c = tot == 0 ? 0.0f : (float)add_n / (float)tot, n0 = (float)*n;
    for (int l = 0; l < lanes; l++) {
        float d = add_m1[l] - m1[l];
        m1[l] += c * d;
        m2[l] += add_m2[l] + d * d * c * n0;
    }
    *n = tot;
}

static void welford_moments(const float *restrict x, int64_t len, float *mean, float *var)
{
    int64_t nv = len / MOM_LANES, chunks = (nv + MOM_CHUNK - 1) / MOM_CHUNK;
    int depth = 1;
    while (depth < MOM_DEPTH - 1 && ((int64_t)1 << depth) < chunks) depth++;
    int64_t cnt[MOM_DEPTH] = {0};
    float s1[MOM_DEPTH][MOM_LANES] = {{0}}, s2[MOM_DEPTH][MOM_LANES] = {{0}};
    for (int64_t i = 0; i < chunks; i++) {
        const float *xc = x + i * MOM_CHUNK * MOM_LANES;
        int64_t k = nv - i * MOM_CHUNK < MOM_CHUNK ? nv - i * MOM_CHUNK : MOM_CHUNK;
        float a1[MOM_LANES] = {0}, a2[MOM_LANES] = {0};
        for (int64_t j = 0; j < k; j++) {
            float r = 1.0f / (float)(j + 1);
            for (int l = 0; l < MOM_LANES; l++) {
                float v = xc[j * MOM_LANES + l], d = v - a1[l];
                a1[l] += d * r;
                a2[l] += d * (v - a1[l]);
            }
        }
        mom_merge(k, a1, a2, &cnt[0], s1[0], s2[0], MOM_LANES);
        int64_t mask = i + 1;
        for (int j = 1; j < depth && (mask & 1) == 0; j++, mask >>= 1) {
            mom_merge(cnt[j - 1], s1[j - 1], s2[j - 1], &cnt[j], s1[j], s2[j], MOM_LANES);
            cnt[j - 1] = 0;
            memset(s1[j - 1], 0, sizeof s1[j - 1]);
            memset(s2[j - 1], 0, sizeof s2[j - 1]);
        }
    }
    for (int j = 1; j < depth; j++) mom_merge(cnt[j], s1[j], s2[j], &cnt[0], s1[0], s2[0], MOM_LANES);
    int64_t n = 0;
    float m1 = 0.0f, m2 = 0.0f;
    for (int64_t i = nv * MOM_LANES; i < len; i++) {
        float d = x[i] - m1;
        n++;
        m1 += d / (float)n;
        m2 += d * (x[i] - m1);
    }
    for (int l = 0; l < MOM_LANES; l++) mom_merge(nv, &s1[0][l], &s2[0][l], &n, &m1, &m2, 1);
    *mean = m1;
    *var = m2 / (float)len;
}

/* Two-pass mean and variance, vectorised: 16 lanes of float sums (the
 * lanes keep the rounding of a blocked sum). */
BF__ALWAYS_INLINE float sum_sq_dev(const float *restrict x, int64_t n, float mean)
{
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) {
            float t = x[i + j] - mean;
            acc[j] += t * t;
        }
    for (int j = 0; i < n; i++, j++) {
        float t = x[i] - mean;
        acc[j] += t * t;
    }
    for (int h = 8; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) acc[j] += acc[j + h];
    return acc[0];
}

/* Largest |x| (NaN ignored: the row's sum catches it). */
BF__ALWAYS_INLINE float max_abs(const float *restrict x, int64_t n)
{
    float m[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) {
            float a = fabsf(x[i + j]);
            m[j] = a > m[j] ? a : m[j];
        }
    for (int j = 0; i < n; i++, j++) {
        float a = fabsf(x[i]);
        m[j] = a > m[j] ? a : m[j];
    }
    float r = 0.0f;
    for (int j = 0; j < 16; j++) r = m[j] > r ? m[j] : r;
    return r;
}

/* The Welford order is latency-bound, several times slower than two
 * passes, and only its overflows matter: when every |x| is below
 * sqrt(1e37 / (4 len)), no intermediate of either method can reach 3.4e38
 * (lane means, deltas, m2 and their merges stay under 1e37), so both give
 * finite statistics that differ by rounding only, and the fast two-pass
 * form is used. Rows with larger values, Inf or NaN take PyTorch's order. */
BF__ALWAYS_INLINE void row_moments(const float *restrict x, int64_t len, float *mean, float *var)
{
    float m = bf__sum16_body(x, len) / (float)len;
    double safe = sqrt(1e37 / (4.0 * (double)len));
    if (m == m && (double)max_abs(x, len) < safe) {
        *mean = m;
        *var = sum_sq_dev(x, len, m) / (float)len;
        return;
    }
    welford_moments(x, len, mean, var);
}

void bf__row_moments(const float *restrict x, int64_t len, float *mean, float *var) { row_moments(x, len, mean, var); }

/* y = (x * rstd - rstd * mean) * scale + B: PyTorch's CPU kernel, term for
 * term, so that a scale of 1e38 overflows (or not) where it does there. */
BF__ALWAYS_INLINE void ln_rows(const ln_params *lp, const float *x, const float *scale, const float *bias, float *y)
{
    int64_t d = lp->d;
    for (int64_t r = 0; r < lp->rows; r++) {
        const float *restrict xr = x + r * d;
        float *restrict yr = y + r * d;
        float mean, var;
        row_moments(xr, d, &mean, &var);
        float rstd = 1.0f / sqrtf(var + lp->eps), shift = -rstd * mean;
        /* one plain loop per parameter shape, so each vectorises */
        if (lp->scale_full)
            for (int64_t i = 0; i < d; i++) yr[i] = (xr[i] * rstd + shift) * scale[i];
        else
            for (int64_t i = 0; i < d; i++) yr[i] = (xr[i] * rstd + shift) * scale[0];
        if (bias && lp->bias_full)
            for (int64_t i = 0; i < d; i++) yr[i] += bias[i];
        else if (bias)
            for (int64_t i = 0; i < d; i++) yr[i] += bias[0];
    }
}

/* The rows compiled again for 8 and 16 lanes, as the float maps are
 * (fastmath_impl.h): the same operations lane for lane, nothing contracted
 * (-std=c11), the sums' 16 accumulators and their tree the same at any width,
 * so the same bits (test_ops_linalg, ln_levels_match_reference). Built for
 * plain x86-64 the rows ran 4 lanes wide: ViT-S/16's 25 LayerNorms of 788 x
 * 384 took 0.6-0.7 ns an element, 1.6x ONNX Runtime's with their affine
 * terms (docs/perf/vit.md, h27-vit). */
#ifdef BF__HAVE_AVX2_COPY
BF__AVX2 static void ln_rows_avx2(const ln_params *lp, const float *x, const float *scale, const float *bias, float *y)
{
    ln_rows(lp, x, scale, bias, y);
}
BF__AVX512 static void ln_rows_avx512(const ln_params *lp, const float *x, const float *scale, const float *bias,
                                      float *y)
{
    ln_rows(lp, x, scale, bias, y);
}
#endif

bf_status bf__layernorm_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const ln_params *lp = c->params;
    const float *x = c->in[0]->data, *scale = c->in[1]->data;
    const float *bias = lp->has_bias ? c->in[2]->data : NULL;
    float *y = c->out[0]->data;
    if (lp->d == 0) return BF_OK;
#ifdef BF__HAVE_AVX2_COPY
    int level = bf__simd_level();
    if (level >= BF__SIMD_AVX512) ln_rows_avx512(lp, x, scale, bias, y);
    else if (level >= BF__SIMD_AVX2) ln_rows_avx2(lp, x, scale, bias, y);
    else ln_rows(lp, x, scale, bias, y);
#else
    ln_rows(lp, x, scale, bias, y);
#endif
    return BF_OK;
}

/* ---- InstanceNormalization ---- */

typedef struct in_params {
    int64_t n, c, inner;        /* X viewed as [N, C, inner] */
    float eps;
} in_params;
static_assert(sizeof(in_params) <= BF__OP_PARAMS_MAX, "instancenorm params too large");

bf_status bf__instnorm_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    in_params *ip = (in_params *)p->params;
    bf_status st;
    if ((st = bf__attr_float(nd, "epsilon", 1e-5f, &ip->eps, err))) return st;
    static const char *const names[3] = {"input", "scale", "B"};
    for (int i = 0; i < 3; i++)
        if ((st = bf__want_f32(p, i, names[i], err))) return st;
    const bf_tensor *x = p->in[0];
    char sx[96], sv[96];
    if (x->ndim < 3)
        return bf__node_error(err, nd, BF_ESHAPE, "input has shape %s; expected [N, C, D1, ...] (rank >= 3)",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    for (int i = 1; i < 3; i++) {
        const bf_tensor *v = p->in[i];
        if (v->ndim != 1 || v->dims[0] != x->dims[1])
            return bf__node_error(err, nd, BF_ESHAPE, "input %s has shape %s; expected [C] = [%lld] from input %s",
                                  names[i], bf_shape_str(v->dims, v->ndim, sv, sizeof sv), (long long)x->dims[1],
                                  bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    }
    ip->n = x->dims[0], ip->c = x->dims[1], ip->inner = 1;
    for (int i = 2; i < x->ndim; i++) ip->inner *= x->dims[i];
    bf__set_shape(p->out[0], BF_F32, x->ndim, x->dims);
    return BF_OK;
}

/* PyTorch runs instance_norm as a training-mode batch_norm over [1, N*C,
 * ...]: its statistics and transform above (torch_stats: a plane with a
 * value beyond ~1.8e19, or squares summing past FLT_MAX, has an Inf
 * variance and becomes B; one holding Inf, NaN). */
bf_status bf__instnorm_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const in_params *ip = c->params;
    const float *x = c->in[0]->data, *scale = c->in[1]->data, *bias = c->in[2]->data;
    float *y = c->out[0]->data;
    int64_t inner = ip->inner;
    if (inner == 0) return BF_OK;
    double eps = bf__torch_double(ip->eps);
    int avx2 = bf__simd_avx2();
    for (int64_t pl = 0; pl < ip->n * ip->c; pl++) {
        int64_t ch = pl % ip->c;
        float mean, var_sum, var;
        torch_stats(x + pl * inner, 1, 0, inner, &mean, &var_sum);
        float invstd = torch_invstd(var_sum, inner, eps, &var);
        float a = invstd * scale[ch], b = fmaf(-mean, a, bias[ch]);
        affine_fma(avx2, x + pl * inner, a, b, y + pl * inner, inner);
    }
    return BF_OK;
}

/* ---- GroupNormalization (opset 18: scale and bias per group; 21: per channel) ---- */

typedef struct gn_params {
    int64_t n, c, groups, inner;  /* X viewed as [N, groups, C/groups, inner] */
    float eps;
    int per_channel;
    int scale_one, bias_one;      /* one value for all channels (fused exports only) */
    int no_affine;                /* fused export of GroupNorm(affine=False): (x - mean) * rstd */
} gn_params;
static_assert(sizeof(gn_params) <= BF__OP_PARAMS_MAX, "groupnorm params too large");

/* A GroupNorm export fused at load (exec/fuse.c): scale and bias are what
 * the pattern's Mul and Add broadcast against [N, C, ...], so each must be
 * [C, 1, ...] of the input's rank - 1, or one value. */
static bf_status gn_fused_params(const bf__prep *p, gn_params *gp, bf_error *err)
{
    const bf_tensor *x = p->in[0];
    static const char *const names[2] = {"scale (the pattern's Mul)", "bias (the pattern's Add)"};
    int *one[2] = {&gp->scale_one, &gp->bias_one};
    for (int i = 0; i < 2; i++) {
        const bf_tensor *t = p->in[1 + i];
        int ok = t->ndim <= x->ndim;
        *one[i] = bf_tensor_numel(t) == 1;
        if (!*one[i]) {
            ok = t->ndim == x->ndim - 1 && t->dims[0] == gp->c;
            for (int d = 1; d < t->ndim && ok; d++) ok = t->dims[d] == 1;
        }
        if (!ok) {
            char sx[96], sv[96];
            return bf__node_error(err, p->node, BF_ESHAPE,
                                  "fused GroupNorm: %s has shape %s; for input %s expected [C, 1, ...] = [%lld] "
                                  "followed by %d ones, or one value (load with --no-fuse to run the nodes as "
                                  "exported)",
                                  names[i], bf_shape_str(t->dims, t->ndim, sv, sizeof sv),
                                  bf_shape_str(x->dims, x->ndim, sx, sizeof sx), (long long)gp->c, x->ndim - 2);
        }
    }
    gp->per_channel = 1;
    return BF_OK;
}

bf_status bf__groupnorm_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    gn_params *gp = (gn_params *)p->params;
    bf_status st;
    int64_t groups;
    if ((st = bf__attr_float(nd, "epsilon", 1e-5f, &gp->eps, err)) ||
        (st = bf__attr_int(nd, "num_groups", -1, &groups, err)))
        return st;
    static const char *const names[3] = {"X", "scale", "bias"};
    for (int i = 0; i < 3; i++)
        if ((st = bf__want_f32(p, i, names[i], err))) return st;
    const bf_tensor *x = p->in[0];
    char sx[96], sv[96];
    if (x->ndim < 2)
        return bf__node_error(err, nd, BF_ESHAPE, "input X has shape %s; expected [N, C, ...] (rank >= 2)",
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    int64_t c = x->dims[1];
    if (groups < 1 || c % groups != 0)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'num_groups' is %lld; it is required and must be >= 1 and divide C = %lld",
                              (long long)groups, (long long)c);
    const bf_tensor *s = p->in[1], *b = p->in[2];
    gp->n = x->dims[0], gp->c = c, gp->groups = groups, gp->inner = 1, gp->scale_one = gp->bias_one = 0;
    for (int i = 2; i < x->ndim; i++) gp->inner *= x->dims[i];
    bf__set_shape(p->out[0], BF_F32, x->ndim, x->dims);
    int64_t fused;
    if ((st = bf__attr_int(nd, "bitflip_per_channel", 0, &fused, err))) return st;
    gp->no_affine = fused == 2;
    if (fused) return gn_fused_params(p, gp, err);
    int64_t len = s->ndim == 1 ? s->dims[0] : -1;
    if ((len != groups && len != c) || b->ndim != 1 || b->dims[0] != len)
        return bf__node_error(err, nd, BF_ESHAPE,
                              "inputs scale %s and bias %s must both be [num_groups] = [%lld] (opset 18) or "
                              "[C] = [%lld] (opset 21)",
                              bf_shape_str(s->dims, s->ndim, sx, sizeof sx), bf_shape_str(b->dims, b->ndim, sv, sizeof sv),
                              (long long)groups, (long long)c);
    gp->per_channel = len == c && (len != groups || p->opset >= 21);
    return BF_OK;
}

/* PyTorch's group_norm kernel: the group's moments as LayerNorm's
 * (bf__row_moments), then per channel y = x * a + b with a = rstd * scale,
 * b = -a * mean + bias. */
bf_status bf__groupnorm_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const gn_params *gp = c->params;
    const float *x = c->in[0]->data, *scale = c->in[1]->data, *bias = c->in[2]->data;
    float *y = c->out[0]->data;
    int64_t cg = gp->c / gp->groups, len = cg * gp->inner;
    if (len == 0) return BF_OK;
    for (int64_t r = 0; r < gp->n * gp->groups; r++) {
        int64_t g = r % gp->groups;
        float mean, var;
        bf__row_moments(x + r * len, len, &mean, &var);
        float rstd = 1.0f / sqrtf((var > 0.0f || var != var ? var : 0.0f) + gp->eps);
        if (gp->no_affine) {
            const float *restrict xr = x + r * len;
            float *restrict yr = y + r * len;
            for (int64_t i = 0; i < len; i++) yr[i] = (xr[i] - mean) * rstd;
            continue;
        }
        for (int64_t j = 0; j < cg; j++) {
            int64_t k = gp->per_channel ? g * cg + j : g;
            float a = rstd * scale[gp->scale_one ? 0 : k], b = -a * mean + bias[gp->bias_one ? 0 : k];
            const float *restrict xr = x + r * len + j * gp->inner;
            float *restrict yr = y + r * len + j * gp->inner;
            for (int64_t i = 0; i < gp->inner; i++) yr[i] = xr[i] * a + b;
        }
    }
    return BF_OK;
}

/* ---- LpNormalization ---- */

typedef struct lp_params {
    int64_t outer, n, inner;    /* normalised along n */
    int p;
} lp_params;
static_assert(sizeof(lp_params) <= BF__OP_PARAMS_MAX, "lpnorm params too large");

bf_status bf__lpnorm_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    lp_params *lp = (lp_params *)p->params;
    bf_status st;
    int64_t axis64, pp;
    if ((st = bf__attr_int(nd, "axis", -1, &axis64, err)) || (st = bf__attr_int(nd, "p", 2, &pp, err))) return st;
    if (pp != 1 && pp != 2)
        return bf__node_error(err, nd, BF_EFORMAT, "attribute 'p' is %lld; must be 1 or 2", (long long)pp);
    if ((st = bf__want_f32(p, 0, "input", err))) return st;
    const bf_tensor *x = p->in[0];
    if (x->ndim == 0) return bf__node_error(err, nd, BF_ESHAPE, "input is a scalar; expected rank >= 1");
    int axis;
    if ((st = bf__norm_axis(nd, axis64, x->ndim, &axis, err))) return st;
    lp->p = (int)pp, lp->outer = lp->n = lp->inner = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i < axis) lp->outer *= x->dims[i];
        else if (i == axis) lp->n = x->dims[i];
        else lp->inner *= x->dims[i];
    }
    bf__set_shape(p->out[0], BF_F32, x->ndim, x->dims);
    return BF_OK;
}

/* x / ||x||_p along the axis, the norm in float as torch.linalg.vector_norm
 * computes it (a sum of squares beyond 3.4e38 is Inf, and the row 0); no
 * epsilon, as the spec says: a zero vector gives 0/0 = NaN. */
bf_status bf__lpnorm_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const lp_params *lp = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    int64_t n = lp->n, inner = lp->inner;
    for (int64_t o = 0; o < lp->outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xr = x + o * n * inner + i;
            float *yr = y + o * n * inner + i;
            float s = 0.0f;
            if (lp->p == 2)
                for (int64_t k = 0; k < n; k++) s += xr[k * inner] * xr[k * inner];
            else
                for (int64_t k = 0; k < n; k++) s += fabsf(xr[k * inner]);
            float norm = lp->p == 2 ? sqrtf(s) : s;
            for (int64_t k = 0; k < n; k++) yr[k * inner] = xr[k * inner] / norm;
        }
    return BF_OK;
}
