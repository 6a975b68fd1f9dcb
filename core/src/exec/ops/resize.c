/* Resize (opsets 11 to 18): F.interpolate as exported, in modes nearest,
 * linear (bilinear, trilinear: over every dim whose size or scale changes)
 * and cubic.
 *
 * Every output coordinate maps back to an input coordinate per dim, as the
 * ONNX spec writes it (coordinate_transformation_mode), and becomes taps:
 * one input index for nearest, two for linear, four for cubic, each with a
 * weight. The taps depend only on shapes and scales; run builds their
 * tables in scratch (offsets already scaled by the input strides), then
 * each output element is a weighted sum over the product of its dims' taps.
 *
 * Coordinates are computed in float, as ONNX Runtime does, except for
 * linear in the modes PyTorch writes (half_pixel, pytorch_half_pixel,
 * align_corners): there the taps and the sum are PyTorch's own arithmetic
 * (upsample_bilinear2d's CPU kernel, see pt_taps), which the spec's real-number
 * formulas allow, so an exported F.interpolate gives PyTorch's bits.
 * tf_crop_and_resize, opset 18's antialias and keep_aspect_ratio_policy other
 * than stretch are refused. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/simd.h"
#include "exec/step_access.h"
#include "index_impl.h"

enum { M_NEAREST, M_LINEAR, M_CUBIC };
enum { C_HALF_PIXEL, C_PYTORCH_HALF_PIXEL, C_ALIGN_CORNERS, C_ASYMMETRIC, C_TF_HALF_PIXEL_NN };
enum { N_ROUND_PREFER_FLOOR, N_ROUND_PREFER_CEIL, N_FLOOR, N_CEIL };

/* Products of outer dims' taps per output row: linear over 3 dims (trilinear)
 * or cubic over 2 (bicubic), what F.interpolate writes and ONNX Runtime runs.
 * More would let a 200-byte file ask for 256 taps per output element: a
 * plan within its memory budget that computes for minutes (fuzz_onnx found
 * one: cubic over 4 dims). */
#define MAX_COMBOS 4

typedef struct resize_params {
    int rank, mode, coord, nearest, exclude_outside;
    float cubic_a;
    size_t esize;
    int taps[BF_MAX_DIMS];            /* 1 for a dim that keeps its size and scale */
    int64_t idims[BF_MAX_DIMS], odims[BF_MAX_DIMS], istride[BF_MAX_DIMS];
    float scale[BF_MAX_DIMS];         /* output / input, as the spec's formulas use it */
    float ratio[BF_MAX_DIMS];         /* input / output, as PyTorch's kernel computes it (pt_taps) */
    int pt;                           /* linear in a mode PyTorch writes: its arithmetic */
    size_t table_off[BF_MAX_DIMS];    /* each dim's taps in scratch: offsets then weights */
} resize_params;
static_assert(sizeof(resize_params) <= BF__OP_PARAMS_MAX, "resize_params must fit in params");

static int pick(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

static bf_status read_modes(bf__prep *p, resize_params *q, bf_error *err)
{
    const bf__node *n = p->node;
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                         "tf_half_pixel_for_nn"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const char *mode, *coord, *nearest, *policy = "stretch";
    int64_t exclude = 0, antialias = 0;
    float a = -0.75f;
    bf_status st = bf__attr_string(n, "mode", "nearest", &mode, err);
    if (!st) st = bf__attr_string(n, "coordinate_transformation_mode", "half_pixel", &coord, err);
    if (!st) st = bf__attr_string(n, "nearest_mode", "round_prefer_floor", &nearest, err);
    if (!st) st = bf__attr_float(n, "cubic_coeff_a", -0.75f, &a, err);
    if (!st) st = bf__attr_int(n, "exclude_outside", 0, &exclude, err);
    if (!st && p->opset >= 18) st = bf__attr_int(n, "antialias", 0, &antialias, err);
    if (!st && p->opset >= 18) st = bf__attr_string(n, "keep_aspect_ratio_policy", "stretch", &policy, err);
    if (st) return st;
    if ((q->mode = pick(mode, modes, 3)) < 0)
        return bf__node_error(err, n, BF_EINVAL, "mode '%s' is not one of nearest, linear, cubic", mode);
    if ((q->coord = pick(coord, coords, 5)) < 0)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "coordinate_transformation_mode '%s' is not supported "
                              "(half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn "
                              "are)", coord);
    if ((q->nearest = pick(nearest, nearests, 4)) < 0)
        return bf__node_error(err, n, BF_EINVAL, "nearest_mode '%s' is not one of round_prefer_floor, "
                              "round_prefer_ceil, floor, ceil", nearest);
    if (antialias)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "antialias=1 is not supported");
    if (strcmp(policy, "stretch") != 0)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "keep_aspect_ratio_policy '%s' is not supported "
                              "(stretch is)", policy);
    q->cubic_a = a;
    q->exclude_outside = exclude != 0;
    return BF_OK;
}

/* A float input known at plan time (scales), into out[]. */
static bf_status read_floats(const bf__node *n, const char *what, const bf_tensor *t, float *out, int *count,
                             bf_error *err)
{
    if (!t->data)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "input '%s' must be known when the plan is built (a "
                              "constant or shape arithmetic): the output shape depends on it", what);
    if (t->dtype != BF_F32)
        return bf__node_error(err, n, BF_EFORMAT, "input '%s' must be float32, got %s", what,
                              bf_dtype_name(t->dtype));
    int64_t c = bf_tensor_numel(t);
    if (t->ndim > 1 || c > BF_MAX_DIMS)
        return bf__node_error(err, n, BF_ESHAPE, "input '%s' must be 1-D with at most %d values", what,
                              BF_MAX_DIMS);
    memcpy(out, t->data, sizeof(float) * (size_t)c);
    *count = (int)c;
    return BF_OK;
}

/* Output dims and scales from 'scales' or 'sizes' (and opset 18's axes). */
static bf_status resize_shape(bf__prep *p, resize_params *q, bf_error *err)
{
    const bf__node *n = p->node;
    const bf_tensor *x = p->in[0];
    int r = x->ndim, ns = -1, nz = -1, na = -1;
    float scales[BF_MAX_DIMS];
    int64_t sizes[BF_MAX_DIMS], axes[BF_MAX_DIMS];
    bf_status st = BF_OK;
    /* X, roi, scales, sizes; exporters write empty tensors for the unused one */
    const bf_tensor *ts = p->n_in > 2 ? p->in[2] : NULL, *tz = p->n_in > 3 ? p->in[3] : NULL;
    if (ts && bf_tensor_numel(ts) == 0) ts = NULL;
    if (tz && bf_tensor_numel(tz) == 0) tz = NULL;
    if (ts && tz) return bf__node_error(err, n, BF_EINVAL, "has both 'scales' and 'sizes'; give one");
    if (!ts && !tz) return bf__node_error(err, n, BF_EINVAL, "needs input 'scales' or 'sizes'");
    if (ts) st = read_floats(n, "scales", ts, scales, &ns, err);
    else st = bf__read_ints(n, "sizes", tz, sizes, BF_MAX_DIMS, &nz, err);
    if (st) return st;
    if (p->opset >= 18 && (st = bf__attr_ints(n, "axes", axes, BF_MAX_DIMS, &na, err))) return st;
    int given = ns >= 0 ? ns : nz, ax_of[BF_MAX_DIMS];
    if (na < 0) {
        na = r;
        for (int d = 0; d < r; d++) axes[d] = d;
    }
    if (given != na)
        return bf__node_error(err, n, BF_ESHAPE, "%s has %d values; it needs %d (one per %s)",
                              ns >= 0 ? "scales" : "sizes", given, na, na == r ? "input dim" : "axis");
    for (int d = 0; d < r; d++) ax_of[d] = -1;
    for (int i = 0; i < na; i++) {
        int ax;
        if ((st = bf__norm_axis(n, axes[i], r, &ax, err))) return st;
        if (ax_of[ax] >= 0) return bf__node_error(err, n, BF_EINVAL, "axis %d appears more than once in axes", ax);
        ax_of[ax] = i;
    }
    for (int d = 0; d < r; d++) {
        int64_t in = x->dims[d], out = in;
        float s = 1.0f;
        int i = ax_of[d];
        if (i >= 0 && ns >= 0) {
            s = scales[i];
            if (!(s > 0) || !isfinite(s))
                return bf__node_error(err, n, BF_EINVAL, "scales[%d] is %g; scales must be positive", i, s);
            double o = floor((double)in * (double)s);
            if (o > (double)(INT64_MAX / 16))
                return bf__node_error(err, n, BF_EUNSUPPORTED, "scales[%d] = %g makes dim %d too large", i, s, d);
            out = (int64_t)o;
            /* F.interpolate(scale_factor=s) hands 1 / s to the kernel, rounded to float */
            q->ratio[d] = (float)(1.0 / (double)s);
        } else if (i >= 0) {
            out = sizes[i];
            if (out < 0) return bf__node_error(err, n, BF_EINVAL, "sizes[%d] is %lld; sizes must be >= 0", i,
                                               (long long)out);
            s = in ? (float)out / (float)in : 1.0f;
            /* F.interpolate(size=...) and recompute_scale_factor: the kernel's in / out, in float */
            q->ratio[d] = out ? (float)in / (float)out : 0.0f;
        }
        if (i < 0) q->ratio[d] = 1.0f;
        q->idims[d] = in;
        q->odims[d] = out;
        q->scale[d] = s;
    }
    return bf__check_dims(n, "output shape", r, q->odims, err);
}

static bf_status resize_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    resize_params *q = (resize_params *)p->params;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = read_modes(p, q, err);
    if (!st) st = resize_shape(p, q, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int r = x->ndim;
    if (q->mode != M_NEAREST && x->dtype != BF_F32)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "input is %s; modes linear and cubic need float32",
                              bf_dtype_name(x->dtype));
    q->esize = bf_dtype_size(x->dtype);
    if (q->esize == 0)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "input is %s; not supported", bf_dtype_name(x->dtype));
    char xs[96];
    int64_t combos = 1;
    size_t table = 0;
    for (int d = 0; d < r; d++) {
        int same = q->odims[d] == q->idims[d] && q->scale[d] == 1.0f;
        q->taps[d] = same || q->mode == M_NEAREST ? 1 : q->mode == M_LINEAR ? 2 : 4;
        if (q->odims[d] > 0 && q->idims[d] == 0)
            return bf__node_error(err, n, BF_ESHAPE, "cannot resize empty dim %d of input %s to %lld", d,
                                  bf_shape_str(x->dims, r, xs, sizeof xs), (long long)q->odims[d]);
        if (d < r - 1) combos *= q->taps[d];
        q->table_off[d] = table;
        /* rounded up so that the next dim's offsets stay 8-byte aligned */
        table += ((size_t)q->odims[d] * (size_t)q->taps[d] * (sizeof(int64_t) + sizeof(float)) + 15) & ~(size_t)15;
    }
    if (combos > MAX_COMBOS)
        return bf__node_error(err, n, BF_EUNSUPPORTED,
                              "resizes too many dims at once in mode %s (input %s); bitflip, like PyTorch's "
                              "interpolate and ONNX Runtime, resamples linear over at most 3 dims and cubic over at "
                              "most 2 (the others' scale 1)",
                              q->mode == M_LINEAR ? "linear" : "cubic", bf_shape_str(x->dims, r, xs, sizeof xs));
    q->pt = q->mode == M_LINEAR && q->coord <= C_ALIGN_CORNERS;
    q->rank = r;
    bf__row_strides(r, x->dims, q->istride);
    bf__set_shape(p->out[0], x->dtype, r, q->odims);
    p->scratch = table;
    return BF_OK;
}

/* The input coordinate of output index o on a dim (the spec's formulas). */
static float source_coord(const resize_params *q, int d, int64_t o)
{
    float s = q->scale[d], x = (float)o;
    float in = (float)q->idims[d], out = (float)q->odims[d];
    switch (q->coord) {
    case C_HALF_PIXEL: return (x + 0.5f) / s - 0.5f;
    case C_PYTORCH_HALF_PIXEL: return out > 1 ? (x + 0.5f) / s - 0.5f : 0.0f;
    case C_ALIGN_CORNERS: return out == 1 ? 0.0f : x * (in - 1) / (out - 1);
    case C_TF_HALF_PIXEL_NN: return (x + 0.5f) / s;
    default: return x / s;
    }
}

static int64_t nearest_index(const resize_params *q, int d, float x)
{
    float f = floorf(x);
    int64_t i;
    switch (q->nearest) {
    case N_ROUND_PREFER_FLOOR: i = (int64_t)(x - f == 0.5f ? f : roundf(x)); break;
    case N_ROUND_PREFER_CEIL: i = (int64_t)(x - f == 0.5f ? f + 1 : roundf(x)); break;
    case N_FLOOR: i = (int64_t)f; break;
    default: i = (int64_t)ceilf(x); break;   /* N_CEIL */
    }
    return i < 0 ? 0 : i >= q->idims[d] ? q->idims[d] - 1 : i;
}

static float cubic_weight(float s, float a)
{
    s = fabsf(s);
    if (s <= 1) return ((a + 2) * s - (a + 3)) * s * s + 1;
    if (s < 2) return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
    return 0;
}

/* Linear taps as PyTorch 1.13 to 2.x compute them on the CPU
 * (UpSampleKernel.cpp's HelperInterpLinear::compute_indices_weights with
 * UpSample.h's area_pixel_compute_scale / area_pixel_compute_source_index and
 * compute_source_index_and_lambda): the ratio in float (ratio[]), the source
 * index in double (acc_type<float> on the CPU is double), clamped below at 0
 * only, truncated; the weight rounded to float, its complement 1 - l in float.
 * The spec's (o + 0.5) / (out / in) - 0.5 in float rounds elsewhere: up to
 * 5e-6 apart on a detector's image transform. align_corners: ratio
 * (in - 1) / (out - 1) in float, source ratio * o. */
static void pt_taps(const resize_params *q, int d, int64_t o, int64_t *i0, int64_t *i1, float *w0, float *w1)
{
    int64_t in = q->idims[d], out = q->odims[d];
    double src;
    if (q->coord == C_ALIGN_CORNERS) {
        float r = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
        src = (double)r * (double)o;
    } else if (q->coord == C_PYTORCH_HALF_PIXEL && out <= 1) {
        src = 0;
    } else {
        src = (double)q->ratio[d] * ((double)o + 0.5) - 0.5;
    }
    if (src < 0) src = 0;
    int64_t a = (int64_t)src;
    if (a > in - 1) a = in - 1;      /* never for a ratio from sizes or scales; kept in bounds anyway */
    double l = src - (double)a;
    float lf = (float)(l < 0 ? 0 : l > 1 ? 1 : l);
    *i0 = a;
    *i1 = a + (a < in - 1);
    *w1 = lf;
    *w0 = 1.0f - lf;
}

/* Fills dim d's taps: offsets (input index times stride) and weights. */
static void build_taps(const resize_params *q, int d, int64_t *off, float *w)
{
    int T = q->taps[d];
    int64_t in = q->idims[d], st = q->istride[d];
    for (int64_t o = 0; o < q->odims[d]; o++, off += T, w += T) {
        if (T == 1) {
            off[0] = (q->mode == M_NEAREST && !(q->odims[d] == in && q->scale[d] == 1.0f)
                      ? nearest_index(q, d, source_coord(q, d, o)) : o) * st;
            w[0] = 1.0f;
            continue;
        }
        if (T == 2 && q->pt) {
            int64_t i0, i1;
            pt_taps(q, d, o, &i0, &i1, &w[0], &w[1]);
            off[0] = i0 * st;
            off[1] = i1 * st;
            continue;
        }
        float x = source_coord(q, d, o);
        if (T == 2) {
            /* clamped to the input, as ONNX Runtime and PyTorch do */
            x = x < 0 ? 0 : x > (float)(in - 1) ? (float)(in - 1) : x;
            int64_t i0 = (int64_t)x, i1 = i0 + (i0 < in - 1);
            float l = x - (float)i0;
            off[0] = i0 * st;
            off[1] = i1 * st;
            w[0] = 1.0f - l;
            w[1] = l;
            continue;
        }
        /* cubic: taps at floor(x) - 1 .. floor(x) + 2, clamped to the edge */
        float f = floorf(x), t = x - f, sum = 0;
        for (int k = 0; k < 4; k++) {
            int64_t i = (int64_t)f - 1 + k;
            float wk = cubic_weight(t - (float)(k - 1), q->cubic_a);
            if (q->exclude_outside && (i < 0 || i >= in)) wk = 0;
            off[k] = (i < 0 ? 0 : i >= in ? in - 1 : i) * st;
            w[k] = wk;
            sum += wk;
        }
        if (q->exclude_outside && sum != 0)
            for (int k = 0; k < 4; k++) w[k] /= sum;
    }
}

/* One output row of linear in PyTorch's arithmetic: the kernel's nested sum
 * (Interpolate<n> in UpSampleKernel.cpp), innermost dim first, each level
 * t0 * w0 + t1 * w1 as the compiler contracts it on PyTorch's AVX2 build,
 * fma(t0, w0, t1 * w1). The outer dims' pairs are the combos' offsets in
 * order (the first outer dim most significant); ow holds their weights. The
 * same function twice: the FMA instruction or libm's fmaf, same bits. */
#define PT_ROW(NAME, ATTR)                                                                                          \
    ATTR static void NAME(const float *x, const int64_t *coff, int nc, const float *ow, int nw, const int64_t *ol, \
                          const float *wl, int TL, int64_t len, float *o)                                          \
    {                                                                                                              \
        for (int64_t k = 0; k < len; k++, ol += TL, wl += TL) {                                                    \
            float v[MAX_COMBOS];                                                                                   \
            for (int cc = 0; cc < nc; cc++) {                                                                      \
                const float *xc = x + coff[cc];                                                                    \
                v[cc] = TL == 2 ? fmaf(xc[ol[0]], wl[0], xc[ol[1]] * wl[1]) : xc[ol[0]];                           \
            }                                                                                                      \
            for (int m = nw - 1, n = nc; m >= 0; m--, n /= 2)                                                      \
                for (int j = 0; j < n / 2; j++) v[j] = fmaf(v[2 * j], ow[2 * m], v[2 * j + 1] * ow[2 * m + 1]);    \
            o[k] = v[0];                                                                                           \
        }                                                                                                          \
    }
PT_ROW(pt_row_ref, )
PT_ROW(pt_row_avx2, __attribute__((target("avx2,fma"))))

/* Bilinear over the last two dims in PyTorch's arithmetic (a segmenter's
 * upsampling: LRASPP's 32x32 logits to 256x256) computed separably. In
 * PT_ROW each output element is fmaf(h0, w0, h1 * w1), h0 and h1 the last
 * dim's pair sums fmaf(x[i], wl0, x[i + 1] * wl1) on its two input rows;
 * those depend on the input row and the output column alone, so they are
 * computed once per input row (hrow) and kept for the output rows that
 * read it (8 of them at scale 8), and the output row is one fused
 * multiply-add per element over two contiguous rows (vrow): the same
 * operations on the same operands, so the same bits, at a fraction of the
 * loads. Rows of the last dim longer than PT_SEP_MAX take PT_ROW. */
#define PT_SEP_MAX 2048
#define PT_SEP_H(NAME, ATTR)                                                                                        \
    ATTR static void NAME(const float *x, const int64_t *ol, const float *wl, int64_t len, float *h)              \
    {                                                                                                              \
        for (int64_t k = 0; k < len; k++) h[k] = fmaf(x[ol[2 * k]], wl[2 * k], x[ol[2 * k + 1]] * wl[2 * k + 1]); \
    }
#define PT_SEP_V(NAME, ATTR)                                                                                        \
    ATTR static void NAME(const float *h0, const float *h1, float w0, float w1, int64_t len, float *o)             \
    {                                                                                                              \
        for (int64_t k = 0; k < len; k++) o[k] = fmaf(h0[k], w0, h1[k] * w1);                                     \
    }
PT_SEP_H(pt_sep_ref_h, )
PT_SEP_V(pt_sep_ref_v, )
#if defined(__x86_64__) && defined(__GNUC__)
PT_SEP_H(pt_sep_avx2_h, __attribute__((target("avx2,fma"))))
/* vrow eight lanes at a time: _mm256_fmadd_ps is fmaf lane by lane */
__attribute__((target("avx2,fma"))) static void pt_sep_avx2_v(const float *h0, const float *h1, float w0, float w1,
                                                              int64_t len, float *o)
{
    __m256 a = _mm256_set1_ps(w0), b = _mm256_set1_ps(w1);
    int64_t k = 0;
    for (; k + 8 <= len; k += 8)
        _mm256_storeu_ps(o + k, _mm256_fmadd_ps(_mm256_loadu_ps(h0 + k), a,
                                                _mm256_mul_ps(_mm256_loadu_ps(h1 + k), b)));
    for (; k < len; k++) o[k] = fmaf(h0[k], w0, h1[k] * w1);
}
#else
#define pt_sep_avx2_h pt_sep_ref_h
#define pt_sep_avx2_v pt_sep_ref_v
#endif

/* Whether resize_rows may take the separable form: linear in PyTorch's
 * arithmetic over exactly the last two dims (the others kept: one tap at
 * their own index), a row short enough for the stack. */
static int pt_separable(const resize_params *q)
{
    int r = q->rank;
    if (!q->pt || r < 2 || q->taps[r - 1] != 2 || q->taps[r - 2] != 2 || q->odims[r - 1] > PT_SEP_MAX) return 0;
    for (int d = 0; d < r - 2; d++)
        if (q->taps[d] != 1) return 0;
    return 1;
}

/* Output rows [lo, hi) so (see PT_SEP); the two pair-sum rows last computed
 * are kept by their input offset. */
static void pt_sep_rows(const resize_params *q, const float *x, float *y, int64_t *const *off, float *const *wt,
                        int64_t lo, int64_t hi)
{
    int r = q->rank, last = r - 1;
    int64_t len = q->odims[last], rows_per = q->odims[last - 1];
    float h[2][PT_SEP_MAX];
    int64_t tag[2] = {-1, -1};
    int avx2 = bf__simd_avx2();
    for (int64_t row = lo; row < hi; row++) {
        int64_t plane = row / rows_per, oy = row % rows_per, base = 0;
        for (int d = last - 2; d >= 0; d--) {   /* the kept dims: their own index times their stride */
            base += (plane % q->odims[d]) * q->istride[d];
            plane /= q->odims[d];
        }
        const int64_t *od = off[last - 1] + 2 * oy;
        const float *wd = wt[last - 1] + 2 * oy;
        int64_t a0 = base + od[0], a1 = base + od[1];
        int s0 = tag[0] == a0 ? 0 : tag[1] == a0 ? 1 : -1, s1 = tag[0] == a1 ? 0 : tag[1] == a1 ? 1 : -1;
        if (s0 < 0) {   /* into the slot the other tap does not hold */
            s0 = s1 == 0 ? 1 : 0;
            (avx2 ? pt_sep_avx2_h : pt_sep_ref_h)(x + a0, off[last], wt[last], len, h[s0]);
            tag[s0] = a0;
        }
        if (s1 < 0) {
            s1 = a1 == a0 ? s0 : 1 - s0;
            if (s1 != s0) (avx2 ? pt_sep_avx2_h : pt_sep_ref_h)(x + a1, off[last], wt[last], len, h[s1]);
            tag[s1] = a1;
        }
        const float *hr[2] = {h[s0], h[s1]};
        (avx2 ? pt_sep_avx2_v : pt_sep_ref_v)(hr[0], hr[1], wd[0], wd[1], len, y + row * len);
    }
}

/* Each dim's taps into scratch (offsets then weights), as run builds them. */
static void tables(const resize_params *q, void *scratch, int64_t **off, float **wt)
{
    for (int d = 0; d < q->rank; d++) {
        unsigned char *base = (unsigned char *)scratch + q->table_off[d];
        size_t n = (size_t)q->odims[d] * (size_t)q->taps[d];
        off[d] = (int64_t *)(void *)base;
        wt[d] = (float *)(void *)(base + n * sizeof(int64_t));
        build_taps(q, d, off[d], wt[d]);
    }
}

/* Output rows [lo, hi) (a row: the last dim's outputs for one index of the
 * outer dims, row-major) of input x into the output y, from the taps. */
static void resize_rows(const resize_params *q, const unsigned char *x, unsigned char *y, int64_t *const *off,
                        float *const *wt, int64_t lo, int64_t hi)
{
    int r = q->rank, last = r - 1, TL = q->taps[last];
    size_t es = q->esize;
    int64_t len = q->odims[last], idx[BF_MAX_DIMS] = {0};
    if (pt_separable(q)) {
        pt_sep_rows(q, (const float *)(const void *)x, (float *)(void *)y, off, wt, lo, hi);
        return;
    }
    for (int64_t d = last - 1, at = lo; d >= 0; d--) {
        idx[d] = at % q->odims[d];
        at /= q->odims[d];
    }
    unsigned char *o = y + (size_t)lo * (size_t)len * es;
    int64_t coff[MAX_COMBOS];
    float cw[MAX_COMBOS], ow[2 * BF_MAX_DIMS];
    int avx2 = q->pt && bf__simd_avx2();
    for (int64_t row = lo; row < hi; row++) {
        /* the outer dims' taps for this row, multiplied out */
        int nc = 1, nw = 0;
        coff[0] = 0;
        cw[0] = 1.0f;
        for (int d = 0; d < last; d++) {
            int T = q->taps[d];
            const int64_t *od = off[d] + idx[d] * T;
            const float *wd = wt[d] + idx[d] * T;
            if (T == 1) {
                for (int k = 0; k < nc; k++) coff[k] += od[0];
                continue;
            }
            if (T == 2) {
                ow[2 * nw] = wd[0];
                ow[2 * nw++ + 1] = wd[1];
            }
            for (int k = nc - 1; k >= 0; k--)
                for (int t = T - 1; t >= 0; t--) {
                    coff[k * T + t] = coff[k] + od[t];
                    cw[k * T + t] = cw[k] * wd[t];
                }
            nc *= T;
        }
        if (q->pt) {
            (avx2 ? pt_row_avx2 : pt_row_ref)((const float *)(const void *)x, coff, nc, ow, nw, off[last],
                                               wt[last], TL, len, (float *)(void *)o);
            o += (size_t)len * sizeof(float);
        } else if (q->mode == M_NEAREST) {
            const unsigned char *xr = x + (size_t)coff[0] * es;
            for (int64_t k = 0; k < len; k++) bf__copy_elem(o + (size_t)k * es, xr + (size_t)off[last][k] * es, es);
            o += (size_t)len * es;
        } else {
            const float *xf = (const float *)(const void *)x;
            float *of = (float *)(void *)o;
            if (TL == 2) {   /* bilinear's last dim: the common case, unrolled */
                for (int64_t k = 0; k < len; k++) {
                    const int64_t *ol = off[last] + 2 * k;
                    const float *wl = wt[last] + 2 * k;
                    float acc = 0;
                    for (int cc = 0; cc < nc; cc++) {
                        const float *xc = xf + coff[cc];
                        acc += cw[cc] * (wl[0] * xc[ol[0]] + wl[1] * xc[ol[1]]);
                    }
                    of[k] = acc;
                }
            } else {
                for (int64_t k = 0; k < len; k++) {
                    const int64_t *ol = off[last] + k * TL;
                    const float *wl = wt[last] + k * TL;
                    float acc = 0;
                    for (int cc = 0; cc < nc; cc++) {
                        const float *xc = xf + coff[cc];
                        float s = 0;
                        for (int t = 0; t < TL; t++) s += wl[t] * xc[ol[t]];
                        acc += cw[cc] * s;
                    }
                    of[k] = acc;
                }
            }
            o += (size_t)len * sizeof(float);
        }
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < q->odims[d]) break;
            idx[d] = 0;
        }
    }
}

static bf_status resize_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const resize_params *q = c->params;
    int r = q->rank;
    if (bf_tensor_numel(c->out[0]) == 0) return BF_OK;
    if (r == 0) { memcpy(c->out[0]->data, c->in[0]->data, q->esize); return BF_OK; }
    int64_t *off[BF_MAX_DIMS], rows = 1;
    float *wt[BF_MAX_DIMS];
    tables(q, c->scratch, off, wt);
    for (int d = 0; d < r - 1; d++) rows *= q->odims[d];
    resize_rows(q, c->in[0]->data, c->out[0]->data, off, wt, 0, rows);
    return BF_OK;
}

/* For the differential executor (diffchan.c): a Resize of float [N, C, ...]
 * (rank 3 or more) whose dims 0 and 1 keep their size and scale, so each
 * output plane (n, c) reads input plane (n, c) alone (one tap at its own
 * index on both dims). */
int bf__resize_planes(const bf__step *s)
{
    if (s->node->op->run != resize_run) return 0;
    const resize_params *q = s->params;
    if (q->rank < 3 || q->esize != sizeof(float) || s->in[0]->dtype != BF_F32) return 0;
    for (int d = 0; d < 2; d++)
        if (q->taps[d] != 1 || q->odims[d] != q->idims[d] || q->scale[d] != 1.0f) return 0;
    return 1;
}

/* Channel ch of every sample's output, as the run computes those rows (the
 * same row function on the same taps: rows are independent). */
void bf__resize_channel(const bf__step *s, int64_t ch, void *scratch)
{
    const resize_params *q = s->params;
    int64_t *off[BF_MAX_DIMS], per = 1;
    float *wt[BF_MAX_DIMS];
    if (bf_tensor_numel(s->out[0]) == 0) return;
    tables(q, scratch, off, wt);
    for (int d = 2; d < q->rank - 1; d++) per *= q->odims[d];
    for (int64_t k = 0; k < q->odims[0]; k++) {
        int64_t at = (k * q->odims[1] + ch) * per;
        resize_rows(q, s->in[0]->data, s->out[0]->data, off, wt, at, at + per);
    }
}

/* Planes pl[0..n) of the output ((n, c) of [N, C, ...]: n * C + c), each
 * as the run computes its rows (the same row function on the same taps:
 * rows are independent). */
void bf__resize_plane_list(const bf__step *s, const int64_t *pl, int64_t n, void *scratch)
{
    const resize_params *q = s->params;
    int64_t *off[BF_MAX_DIMS], per = 1;
    float *wt[BF_MAX_DIMS];
    if (bf_tensor_numel(s->out[0]) == 0 || n <= 0) return;
    tables(q, scratch, off, wt);
    for (int d = 2; d < q->rank - 1; d++) per *= q->odims[d];
    for (int64_t k = 0; k < n; k++) resize_rows(q, s->in[0]->data, s->out[0]->data, off, wt, pl[k] * per, pl[k] * per + per);
}

const bf__op bf__ops_resize[] = {
    {"Resize", 1, 4, 1, 1, 0, resize_prepare, resize_run},
    {0},
};
