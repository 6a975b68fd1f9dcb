/* RoiAlign: the pooling of Faster / Mask R-CNN's second stage
 * (torchvision.ops.roi_align, MultiScaleRoIAlign), opsets 10 and 16.
 *
 * Average mode computes what torchvision's CPU kernel computes, bit for bit:
 * the same float expressions for each sample's position, its bilinear
 * weights and corner pixels (found once per roi and used for every channel,
 * as that kernel does), and the same summation order,
 * out = (((0 + s_1) + s_2) + ...) / count, each s = w1 v1 + w2 v2 + w3 v3 + w4 v4
 * left to right. coordinate_transformation_mode output_half_pixel (opset 10's
 * only form, 16's non-default) is torchvision's aligned=False: rois smaller
 * than a pixel are stretched to one; half_pixel is aligned=True. Max mode
 * has no torchvision counterpart and follows the spec (ONNX Runtime's
 * kernel): the largest over the bin's samples of the largest of the four
 * weighted corners, NaN winning.
 *
 * A sample outside [-1, size] on either axis, or at a NaN position, is
 * empty: torchvision adds 0 * x[0] four times for it, which changes nothing
 * unless x[0] is Inf or NaN. This kernel lists only each axis' samples
 * inside and marks bins with an empty sample, which gives the same bits at
 * a cost bounded by the feature map's size whatever the roi's (a corrupted
 * box 1e30 pixels wide). sampling_ratio 0 samples ceil(roi size / output size)
 * points per axis and bin, as torchvision, up to BF__ROIALIGN_GRID_MAX
 * (docs/OPS.md). */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "detect_impl.h"
#include "shape_impl.h"

/* Samples per axis and bin at most: an attribute sampling_ratio above it is
 * refused, an adaptive grid above it (a roi more than this many output bins'
 * worth of feature pixels: only corrupted boxes) is cut to it. */
#define BF__ROIALIGN_GRID_MAX 1024
/* Sample entries per pass over the channels. */
#define CHUNK 1024

typedef struct roialign_params {
    int max_mode, half_pixel;
    int64_t oh, ow, sr;     /* sr 0: adaptive */
    float scale;
    int64_t gmax;           /* samples per axis and bin at most */
} roialign_params;
static_assert(sizeof(roialign_params) <= BF__OP_PARAMS_MAX, "roialign_params must fit in params");

/* One axis' sample inside the map: its two pixel rows (or columns) and weights. */
typedef struct axis_sample {
    int64_t lo, hi;
    float l, h;
} axis_sample;

/* One sample of one bin, for every channel. */
typedef struct sample {
    int64_t bin, pos[4];
    float w[4];
} sample;

typedef struct roi_scratch {
    axis_sample *ys, *xs;   /* [oh * gmax], [ow * gmax] */
    int64_t *ny, *nx;       /* samples inside, per output row and column */
    unsigned char *empty;   /* [oh * ow]: the bin has an empty sample */
    sample *chunk;          /* [CHUNK] */
} roi_scratch;

static size_t scratch_layout(const roialign_params *q, void *base, roi_scratch *s)
{
    unsigned char *p = base;
    size_t off = 0;
#define TAKE(field, count)                                               \
    do {                                                                 \
        if (s) s->field = (void *)(p + off);                             \
        off += ((size_t)(count) * sizeof *s->field + 63) & ~(size_t)63; \
    } while (0)
    TAKE(ys, q->oh * q->gmax);
    TAKE(xs, q->ow * q->gmax);
    TAKE(ny, q->oh);
    TAKE(nx, q->ow);
    TAKE(empty, q->oh * q->ow);
    TAKE(chunk, CHUNK);
#undef TAKE
    return off;
}

static inline float std_max(float a, float b) { return a < b ? b : a; }
static inline float max_nan(float a, float b) { return isnan(a) || isnan(b) ? NAN : (b > a ? b : a); }

/* The samples of one axis inside [-1, size], per output position, in
 * torchvision's order and arithmetic; count[p]: how many for position p. */
static void axis_samples(float start, float bin, int64_t g, int64_t nout, int64_t size, axis_sample *tab,
                        int64_t gmax, int64_t *count)
{
    for (int64_t p = 0; p < nout; p++) {
        int64_t k = 0;
        for (int64_t i = 0; i < g; i++) {
            float v = start + (float)p * bin + ((float)i + .5f) * bin / (float)g;
            if (!(v >= -1.0f && v <= (float)size)) continue;
            if (v <= 0) v = 0;
            int64_t lo = (int64_t)v, hi;
            if (lo >= size - 1) {
                hi = lo = size - 1;
                v = (float)lo;
            } else {
                hi = lo + 1;
            }
            axis_sample *a = &tab[p * gmax + k++];
            a->lo = lo;
            a->hi = hi;
            a->l = v - (float)lo;
            a->h = (float)(1.0 - (double)a->l);
        }
        count[p] = k;
    }
}

/* Samples per axis and bin: the attribute, or ceil(size / out) as torchvision. */
static int64_t grid(const roialign_params *q, float size, int64_t nout)
{
    if (q->sr > 0) return q->sr;
    float g = ceilf(size / (float)nout);
    if (isnan(g)) return 1;   /* its samples are at NaN positions: empty */
    if (g > (float)q->gmax) return q->gmax;
    if (g < -(float)q->gmax) return -q->gmax;
    return (int64_t)g;
}

/* The chunk's samples into every channel's running value. */
static void flush(const roialign_params *q, const sample *ch, int64_t n, const float *x, float *y, int64_t C,
                  int64_t hw)
{
    int64_t bins = q->oh * q->ow;
    for (int64_t c = 0; c < C; c++) {
        const float *v = x + c * hw;
        float *o = y + c * bins;
        if (q->max_mode) {
            for (int64_t e = 0; e < n; e++) {
                const sample *s = &ch[e];
                float m = max_nan(max_nan(s->w[0] * v[s->pos[0]], s->w[1] * v[s->pos[1]]),
                                  max_nan(s->w[2] * v[s->pos[2]], s->w[3] * v[s->pos[3]]));
                o[s->bin] = max_nan(o[s->bin], m);
            }
        } else {
            for (int64_t e = 0; e < n; e++) {
                const sample *s = &ch[e];
                o[s->bin] += s->w[0] * v[s->pos[0]] + s->w[1] * v[s->pos[1]] + s->w[2] * v[s->pos[2]] +
                             s->w[3] * v[s->pos[3]];
            }
        }
    }
}

/* One roi: y [C, oh, ow] from the image x [C, H, W]. */
static void one_roi(const roialign_params *q, const roi_scratch *s, const float *roi, const float *x, float *y,
                    int64_t C, int64_t H, int64_t W)
{
    float off = q->half_pixel ? 0.5f : 0.0f;
    float sw = roi[0] * q->scale - off, sh = roi[1] * q->scale - off;
    float ew = roi[2] * q->scale - off, eh = roi[3] * q->scale - off;
    float rw = ew - sw, rh = eh - sh;
    if (!q->half_pixel) {   /* torchvision: "force malformed ROIs to be 1x1" */
        rw = std_max(rw, 1.0f);
        rh = std_max(rh, 1.0f);
    }
    float bh = rh / (float)q->oh, bw = rw / (float)q->ow;
    int64_t gh = grid(q, rh, q->oh), gw = grid(q, rw, q->ow), bins = q->oh * q->ow;
    int64_t prod = gh * gw;
    float count = (float)(prod > 1 ? prod : 1);
    axis_samples(sh, bh, gh, q->oh, H, s->ys, q->gmax, s->ny);
    axis_samples(sw, bw, gw, q->ow, W, s->xs, q->gmax, s->nx);
    for (int64_t ph = 0; ph < q->oh; ph++)
        for (int64_t pw = 0; pw < q->ow; pw++)
            s->empty[ph * q->ow + pw] = (unsigned char)(gh > 0 && gw > 0 && (s->ny[ph] < gh || s->nx[pw] < gw));
    float init = q->max_mode ? -INFINITY : 0.0f;
    for (int64_t i = 0; i < C * bins; i++) y[i] = init;

    int64_t n = 0;
    for (int64_t ph = 0; ph < q->oh; ph++)
        for (int64_t pw = 0; pw < q->ow; pw++)
            for (int64_t iy = 0; iy < s->ny[ph]; iy++) {
                const axis_sample *a = &s->ys[ph * q->gmax + iy];
                for (int64_t ix = 0; ix < s->nx[pw]; ix++) {
                    const axis_sample *b = &s->xs[pw * q->gmax + ix];
                    sample *e = &s->chunk[n++];
                    e->bin = ph * q->ow + pw;
                    e->pos[0] = a->lo * W + b->lo;
                    e->pos[1] = a->lo * W + b->hi;
                    e->pos[2] = a->hi * W + b->lo;
                    e->pos[3] = a->hi * W + b->hi;
                    e->w[0] = a->h * b->h;
                    e->w[1] = a->h * b->l;
                    e->w[2] = a->l * b->h;
                    e->w[3] = a->l * b->l;
                    if (n == CHUNK) { flush(q, s->chunk, n, x, y, C, H * W); n = 0; }
                }
            }
    if (n) flush(q, s->chunk, n, x, y, C, H * W);

    for (int64_t c = 0; c < C; c++) {
        float *o = y + c * bins, x0 = x[c * H * W];
        for (int64_t b = 0; b < bins; b++) {
            /* an empty sample: + 0 * x[0], four times */
            if (q->max_mode) {
                if (gh <= 0 || gw <= 0) o[b] = 0.0f;
                else if (s->empty[b]) o[b] = max_nan(o[b], 0.0f * x0);
            } else {
                if (s->empty[b] && !isfinite(x0)) o[b] = NAN;
                o[b] /= count;
            }
        }
    }
}

bf_status bf__roialign_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    roialign_params *q = (roialign_params *)p->params;
    char a[64], b[64];
    bf_status st;
    if ((st = bf__need_inputs(p, 3, err)) || (st = bf__want_f32(p, 0, "X", err)) ||
        (st = bf__want_f32(p, 1, "rois", err)))
        return st;
    const bf_tensor *x = p->in[0], *r = p->in[1], *bi = p->in[2];
    if (x->ndim != 4)
        return bf__node_error(err, n, BF_ESHAPE, "X is %s; it must be [N, C, H, W]",
                              bf_shape_str(x->dims, x->ndim, a, sizeof a));
    if (r->ndim != 2 || r->dims[1] != 4)
        return bf__node_error(err, n, BF_ESHAPE, "rois are %s; they must be [num_rois, 4]",
                              bf_shape_str(r->dims, r->ndim, a, sizeof a));
    if (bi->dtype != BF_I64 && bi->dtype != BF_I32)
        return bf__node_error(err, n, BF_EFORMAT, "batch_indices are %s; they must be int64",
                              bf_dtype_name(bi->dtype));
    if (bi->ndim != 1 || bi->dims[0] != r->dims[0])
        return bf__node_error(err, n, BF_ESHAPE, "batch_indices are %s with rois %s; they must be [num_rois]",
                              bf_shape_str(bi->dims, bi->ndim, a, sizeof a), bf_shape_str(r->dims, r->ndim, b, sizeof b));
    const char *mode, *ctm;
    int64_t oh, ow, sr;
    float scale;
    /* Opset 16's default is half_pixel (aligned=True). torchvision up to 0.14
     * (PyTorch 1.x) writes every roi_align, at any opset, with its opset-11
     * symbolic, which has no such attribute and computes aligned=False; a
     * detector exported at opset 16 or 17 by PyTorch 1.x means
     * output_half_pixel (docs/OPS.md, RoiAlign). torchvision 0.15 and later
     * write the attribute. */
    int torch1 = p->producer && strncmp(p->producer, "pytorch 1.", 10) == 0;
    if ((st = bf__attr_string(n, "mode", "avg", &mode, err)) ||
        (st = bf__attr_string(n, "coordinate_transformation_mode",
                              p->opset >= 16 && !torch1 ? "half_pixel" : "output_half_pixel", &ctm, err)) ||
        (st = bf__attr_int(n, "output_height", 1, &oh, err)) || (st = bf__attr_int(n, "output_width", 1, &ow, err)) ||
        (st = bf__attr_int(n, "sampling_ratio", 0, &sr, err)) ||
        (st = bf__attr_float(n, "spatial_scale", 1.0f, &scale, err)))
        return st;
    if (strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "mode '%s'; avg and max are supported", mode);
    if (strcmp(ctm, "half_pixel") != 0 && strcmp(ctm, "output_half_pixel") != 0)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "coordinate_transformation_mode '%s'; half_pixel and "
                              "output_half_pixel are supported", ctm);
    if (oh < 1 || ow < 1 || oh > 65536 || ow > 65536)
        return bf__node_error(err, n, BF_EINVAL, "output_height %lld, output_width %lld; each must be in 1..65536",
                              (long long)oh, (long long)ow);
    if (sr < 0 || sr > BF__ROIALIGN_GRID_MAX)
        return bf__node_error(err, n, BF_EINVAL, "sampling_ratio %lld; it must be in 0..%d (0: adaptive)",
                              (long long)sr, BF__ROIALIGN_GRID_MAX);
    int64_t R = r->dims[0], C = x->dims[1];
    if ((x->dims[2] < 1 || x->dims[3] < 1) && R > 0 && C > 0)
        return bf__node_error(err, n, BF_ESHAPE, "X is %s; rois need H and W of at least 1",
                              bf_shape_str(x->dims, x->ndim, a, sizeof a));
    memset(q, 0, sizeof *q);
    q->max_mode = strcmp(mode, "max") == 0;
    q->half_pixel = strcmp(ctm, "half_pixel") == 0;
    q->oh = oh;
    q->ow = ow;
    q->sr = sr;
    q->scale = scale;
    q->gmax = sr > 0 ? sr : BF__ROIALIGN_GRID_MAX;
    p->scratch = scratch_layout(q, NULL, NULL);
    int64_t dims[4] = {R, C, oh, ow};
    if ((st = bf__check_dims(n, "the output", 4, dims, err))) return st;
    bf__set_shape(p->out[0], BF_F32, 4, dims);
    return BF_OK;
}

bf_status bf__roialign_run(const bf__ctx *c, bf_error *err)
{
    const roialign_params *q = c->params;
    const bf_tensor *x = c->in[0], *bi = c->in[2];
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = c->in[1]->dims[0];
    const float *rois = c->in[1]->data, *xd = x->data;
    float *y = c->out[0]->data;
    if (C == 0) return BF_OK;
    roi_scratch s;
    scratch_layout(q, c->scratch, &s);
    for (int64_t r = 0; r < R; r++) {
        int64_t b = bi->dtype == BF_I32 ? ((const int32_t *)bi->data)[r] : ((const int64_t *)bi->data)[r];
        if (b < 0 || b >= N)
            return bf__node_error(err, c->node, BF_EINVAL, "batch_indices[%lld] is %lld; X holds %lld images "
                                  "(0..%lld)", (long long)r, (long long)b, (long long)N, (long long)N - 1);
        one_roi(q, &s, rois + 4 * r, xd + b * C * H * W, y + r * C * q->oh * q->ow, C, H, W);
    }
    return BF_OK;
}
