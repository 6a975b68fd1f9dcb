/* Strided copies: Transpose, Slice and Expand each describe their output as a
 * strided view of the input (bf__strided) and share one copy kernel. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "shape_impl.h"
#include "sgemm.h"
#include "transpose8.h"

static_assert(sizeof(bf__strided) <= BF__OP_PARAMS_MAX, "bf__strided must fit in params");

enum { TILE = 32 };   /* 32x32 elements: a tile of input and output stays in L1 */

void bf__row_strides(int ndim, const int64_t *dims, int64_t *stride)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= dims[d];
    }
}

void bf__strided_init(bf__strided *s, size_t esize, int ndim, const int64_t *dims,
                      const int64_t *stride, int64_t offset)
{
    memset(s, 0, sizeof *s);
    s->esize = esize;
    s->offset = offset;
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (dims[d] == 0) { s->ndim = -1; return; }
        if (dims[d] == 1) continue;
        /* the previous dim steps exactly over this whole one: read them as one */
        if (n > 0 && s->stride[n - 1] == stride[d] * dims[d]) {
            s->dims[n - 1] *= dims[d];
            s->stride[n - 1] = stride[d];
            continue;
        }
        s->dims[n] = dims[d];
        s->stride[n] = stride[d];
        n++;
    }
    s->ndim = n;
}

/* es is a constant at every call site, so memcpy(.., es) compiles to a move. */
static inline void row_strided(unsigned char *restrict o, const unsigned char *restrict i,
                               int64_t len, int64_t st, size_t es)
{
    for (int64_t k = 0; k < len; k++) memcpy(o + (size_t)k * es, i + k * st * (int64_t)es, es);
}

static inline void row_fill(unsigned char *restrict o, const unsigned char *restrict i,
                            int64_t len, size_t es)
{
    for (int64_t k = 0; k < len; k++) memcpy(o + (size_t)k * es, i, es);
}

static void row_copy(unsigned char *restrict o, const unsigned char *restrict i, int64_t len,
                     int64_t st, size_t es)
{
    if (st == 1) { memcpy(o, i, (size_t)len * es); return; }
    if (st == 0) {
        switch (es) {
        case 1: memset(o, i[0], (size_t)len); return;
        case 2: row_fill(o, i, len, 2); return;
        case 4: row_fill(o, i, len, 4); return;
        case 8: row_fill(o, i, len, 8); return;
        default: row_fill(o, i, len, es); return;
        }
    }
    switch (es) {
    case 1: row_strided(o, i, len, st, 1); return;
    case 2: row_strided(o, i, len, st, 2); return;
    case 4: row_strided(o, i, len, st, 4); return;
    case 8: row_strided(o, i, len, st, 8); return;
    default: row_strided(o, i, len, st, es); return;
    }
}

/* out[a * oa + b] = in[a + b * sb] for a < A, b < B: a transpose, done in
 * tiles so that neither side walks memory with a cache miss per element. */
static inline void tile_2d(unsigned char *restrict o, const unsigned char *restrict i, int64_t A,
                           int64_t oa, int64_t B, int64_t sb, size_t es)
{
    for (int64_t a0 = 0; a0 < A; a0 += TILE) {
        int64_t a1 = a0 + TILE < A ? a0 + TILE : A;
        for (int64_t b0 = 0; b0 < B; b0 += TILE) {
            int64_t b1 = b0 + TILE < B ? b0 + TILE : B;
            for (int64_t a = a0; a < a1; a++)
                for (int64_t b = b0; b < b1; b++)
                    memcpy(o + (size_t)(a * oa + b) * es, i + (a + b * sb) * (int64_t)es, es);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* tile_2d for floats with AVX2: 8 x 8 blocks through registers (the
 * interaction of a DLRM transposes 16 x 9 and 9 x 64 planes per batch,
 * one element at a time otherwise); the edges as tile_2d. */
__attribute__((target("avx2"))) static void tile_2d_f32(float *restrict o, const float *restrict i, int64_t A,
                                                         int64_t oa, int64_t B, int64_t sb)
{
    int64_t A8 = A & ~(int64_t)7, B8 = B & ~(int64_t)7;
    for (int64_t a0 = 0; a0 < A8; a0 += 8)
        for (int64_t b0 = 0; b0 < B8; b0 += 8) bf__transpose8(i + a0 + b0 * sb, sb, o + a0 * oa + b0, oa);
    for (int64_t a = 0; a < A; a++)
        for (int64_t b = a < A8 ? B8 : 0; b < B; b++) o[a * oa + b] = i[a + b * sb];
}
#endif

static void block_2d(unsigned char *restrict o, const unsigned char *restrict i, int64_t A,
                     int64_t oa, int64_t B, int64_t sb, size_t es, int simd)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (es == 4 && A >= 8 && B >= 8 && simd) {
        tile_2d_f32((float *)(void *)o, (const float *)(const void *)i, A, oa, B, sb);
        return;
    }
#else
    (void)simd;
#endif
    switch (es) {
    case 1: tile_2d(o, i, A, oa, B, sb, 1); return;
    case 2: tile_2d(o, i, A, oa, B, sb, 2); return;
    case 4: tile_2d(o, i, A, oa, B, sb, 4); return;
    case 8: tile_2d(o, i, A, oa, B, sb, 8); return;
    default: tile_2d(o, i, A, oa, B, sb, es); return;
    }
}

/* Rows: the last output dim is read with one stride (contiguous, broadcast or
 * strided); an odometer walks the outer dims. */
static void copy_rows(const bf__strided *s, unsigned char *o, const unsigned char *src)
{
    int n = s->ndim;
    size_t es = s->esize;
    int64_t count = 1, len = s->dims[n - 1], idx[BF_MAX_DIMS] = {0}, off = 0;
    for (int d = 0; d < n - 1; d++) count *= s->dims[d];
    for (int64_t u = 0; u < count; u++, o += (size_t)len * es) {
        row_copy(o, src + off * (int64_t)es, len, s->stride[n - 1], es);
        for (int d = n - 2; d >= 0; d--) {   /* odometer: no division per row */
            off += s->stride[d];
            if (++idx[d] < s->dims[d]) break;
            off -= s->stride[d] * s->dims[d];
            idx[d] = 0;
        }
    }
}

/* Tiles: output dim k is read contiguously but is not the last, so reading
 * rows would stride through the input; copy (k, last) planes in 2-D tiles
 * instead, with an odometer over the remaining dims on both sides. */
static void copy_tiles(const bf__strided *s, int k, unsigned char *o, const unsigned char *src)
{
    int n = s->ndim, m = 0;
    size_t es = s->esize;
    int64_t ostride[BF_MAX_DIMS], dims[BF_MAX_DIMS], istr[BF_MAX_DIMS], ostr[BF_MAX_DIMS];
    bf__row_strides(n, s->dims, ostride);
    for (int d = 0; d < n - 1; d++) {
        if (d == k) continue;
        dims[m] = s->dims[d];
        istr[m] = s->stride[d];
        ostr[m++] = ostride[d];
    }
    int64_t count = 1, idx[BF_MAX_DIMS] = {0}, ioff = 0, ooff = 0;
    for (int d = 0; d < m; d++) count *= dims[d];
    int simd = bf__sgemm_simd();   /* once, not per tile: it reads the environment */
    for (int64_t u = 0; u < count; u++) {
        block_2d(o + ooff * (int64_t)es, src + ioff * (int64_t)es, s->dims[k], ostride[k],
                 s->dims[n - 1], s->stride[n - 1], es, simd);
        for (int d = m - 1; d >= 0; d--) {
            ioff += istr[d];
            ooff += ostr[d];
            if (++idx[d] < dims[d]) break;
            ioff -= istr[d] * dims[d];
            ooff -= ostr[d] * dims[d];
            idx[d] = 0;
        }
    }
}

void bf__strided_copy(const bf__strided *s, void *out, const void *in)
{
    if (s->ndim < 0) return;
    const unsigned char *src = (const unsigned char *)in + s->offset * (int64_t)s->esize;
    int n = s->ndim;
    if (n == 0) { memcpy(out, src, s->esize); return; }
    int k = -1;   /* the output dim the input reads contiguously, when not the last */
    if (s->stride[n - 1] != 1 && s->stride[n - 1] != 0)
        for (int d = n - 2; d >= 0 && k < 0; d--)
            if (s->stride[d] == 1) k = d;
    if (k >= 0) copy_tiles(s, k, out, src);
    else copy_rows(s, out, src);
}

bf_status bf__strided_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    bf__strided_copy(c->params, c->out[0]->data, c->in[0]->data);
    return BF_OK;
}

bf_status bf__need_inputs(const bf__prep *p, int count, bf_error *err)
{
    for (int i = 0; i < count; i++)
        if (i >= p->n_in || !p->in[i])
            return bf__node_error(err, p->node, BF_EINVAL, "input %d is required but missing", i);
    return BF_OK;
}

bf_status bf__check_dims(const bf__node *n, const char *what, int nd, const int64_t *dims,
                         bf_error *err)
{
    char buf[96];
    int64_t total = 1;
    for (int i = 0; i < nd; i++) {
        if (dims[i] < 0)
            return bf__node_error(err, n, BF_EINVAL, "%s %s has a negative dim", what,
                                  bf_shape_str(dims, nd, buf, sizeof buf));
        /* INT64_MAX / 16: room for any element size without overflowing bytes */
        if (dims[i] && total > INT64_MAX / 16 / dims[i])
            return bf__node_error(err, n, BF_EUNSUPPORTED, "%s %s has too many elements", what,
                                  bf_shape_str(dims, nd, buf, sizeof buf));
        total *= dims[i];
    }
    return BF_OK;
}

/* ---- Transpose ---- */

bf_status bf__transpose_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    int64_t perm[BF_MAX_DIMS];
    int np;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = bf__attr_ints(n, "perm", perm, BF_MAX_DIMS, &np, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int r = x->ndim;
    if (np < 0) {
        for (int d = 0; d < r; d++) perm[d] = r - 1 - d;
        np = r;
    }
    char buf[96];
    if (np != r)
        return bf__node_error(err, n, BF_ESHAPE, "perm has %d entries but the input %s has rank %d",
                              np, bf_shape_str(x->dims, r, buf, sizeof buf), r);
    int seen[BF_MAX_DIMS] = {0};
    for (int d = 0; d < r; d++) {
        if (perm[d] < 0 || perm[d] >= r || seen[perm[d]]++)
            return bf__node_error(err, n, BF_EINVAL, "perm %s is not a permutation of 0..%d",
                                  bf_shape_str(perm, r, buf, sizeof buf), r - 1);
    }
    int64_t in_stride[BF_MAX_DIMS], dims[BF_MAX_DIMS], stride[BF_MAX_DIMS];
    bf__row_strides(r, x->dims, in_stride);
    for (int d = 0; d < r; d++) {
        dims[d] = x->dims[perm[d]];
        stride[d] = in_stride[perm[d]];
    }
    bf__set_shape(p->out[0], x->dtype, r, dims);
    bf__strided_init((bf__strided *)p->params, bf_dtype_size(x->dtype), r, dims, stride, 0);
    return BF_OK;
}

/* ---- Slice ---- */

typedef struct slice_args {
    int n;
    int64_t starts[BF_MAX_DIMS], ends[BF_MAX_DIMS], axes[BF_MAX_DIMS], steps[BF_MAX_DIMS];
} slice_args;

/* Counts read from attributes or inputs (-1: absent): they must agree, and
 * absent axes and steps take their defaults (0..n-1, and 1). */
static bf_status slice_finish(const bf__node *n, slice_args *a, int ns, int ne, int na, int nst, bf_error *err)
{
    if (ns != ne)
        return bf__node_error(err, n, BF_ESHAPE, "starts has %d values but ends has %d", ns, ne);
    a->n = ns;
    if (na < 0)
        for (int i = 0; i < ns; i++) a->axes[i] = i;
    else if (na != ns)
        return bf__node_error(err, n, BF_ESHAPE, "axes has %d values but starts has %d", na, ns);
    if (nst < 0)
        for (int i = 0; i < ns; i++) a->steps[i] = 1;
    else if (nst != ns)
        return bf__node_error(err, n, BF_ESHAPE, "steps has %d values but starts has %d", nst, ns);
    return BF_OK;
}

static bf_status slice_read_attrs(bf__prep *p, slice_args *a, bf_error *err)
{
    const bf__node *n = p->node;
    int ns, ne, na;
    if (p->opset >= 10)
        return bf__node_error(err, n, BF_EINVAL, "needs inputs 'starts' and 'ends' (attributes only "
                              "before opset 10; this model is opset %lld)", (long long)p->opset);
    bf_status st = bf__attr_ints(n, "starts", a->starts, BF_MAX_DIMS, &ns, err);
    if (!st) st = bf__attr_ints(n, "ends", a->ends, BF_MAX_DIMS, &ne, err);
    if (!st) st = bf__attr_ints(n, "axes", a->axes, BF_MAX_DIMS, &na, err);
    if (st) return st;
    if (ns < 0 || ne < 0)
        return bf__node_error(err, n, BF_EINVAL, "attributes 'starts' and 'ends' are required");
    return slice_finish(n, a, ns, ne, na, -1, err);
}

static bf_status slice_read_inputs(bf__prep *p, slice_args *a, bf_error *err)
{
    const bf__node *n = p->node;
    if (p->n_in < 3 || !p->in[1] || !p->in[2])
        return bf__node_error(err, n, BF_EINVAL, "needs inputs 'starts' and 'ends'");
    int ns, ne, na = -1, nst = -1;
    bf_status st = bf__read_ints(n, "starts", p->in[1], a->starts, BF_MAX_DIMS, &ns, err);
    if (!st) st = bf__read_ints(n, "ends", p->in[2], a->ends, BF_MAX_DIMS, &ne, err);
    if (!st && p->n_in > 3 && p->in[3])
        st = bf__read_ints(n, "axes", p->in[3], a->axes, BF_MAX_DIMS, &na, err);
    if (!st && p->n_in > 4 && p->in[4])
        st = bf__read_ints(n, "steps", p->in[4], a->steps, BF_MAX_DIMS, &nst, err);
    if (st) return st;
    return slice_finish(n, a, ns, ne, na, nst, err);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* One axis per the ONNX spec: negative indices count from the end, then
 * clamp to [0, dim] (forward) or [-1, dim-1] (backward), so INT64_MAX and
 * INT64_MIN sentinels mean "to the end". */
static void slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                       int64_t *count, int64_t *eff_step)
{
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    /* a step longer than the dim takes at most one element: clamping it keeps
     * the count and stride arithmetic away from overflow */
    int64_t big = dim > 0 ? dim : 1;
    if (step > big) step = big;
    if (step < -big) step = -big;
    *eff_step = step;
    *first = 0;
    *count = 0;
    if (dim == 0) return;
    if (step > 0) {
        start = clamp64(start, 0, dim);
        end = clamp64(end, 0, dim);
        if (end > start) *count = (end - start - 1) / step + 1;
    } else {
        start = clamp64(start, 0, dim - 1);
        end = clamp64(end, -1, dim - 1);
        if (start > end) *count = (start - end - 1) / -step + 1;
    }
    *first = start;
}

bf_status bf__slice_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    slice_args a;
    bf_status st = bf__need_inputs(p, 1, err);
    if (!st) st = p->n_in == 1 ? slice_read_attrs(p, &a, err) : slice_read_inputs(p, &a, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    int r = x->ndim;

    int64_t first[BF_MAX_DIMS], dims[BF_MAX_DIMS], step[BF_MAX_DIMS];
    for (int d = 0; d < r; d++) { first[d] = 0; dims[d] = x->dims[d]; step[d] = 1; }
    int seen[BF_MAX_DIMS] = {0};
    for (int i = 0; i < a.n; i++) {
        int axis;
        if (r == 0)
            return bf__node_error(err, n, BF_ESHAPE, "cannot slice a scalar (axis %lld given)",
                                  (long long)a.axes[i]);
        if ((st = bf__norm_axis(n, a.axes[i], r, &axis, err))) return st;
        if (seen[axis]++)
            return bf__node_error(err, n, BF_EINVAL, "axis %d appears more than once in axes", axis);
        if (a.steps[i] == 0)
            return bf__node_error(err, n, BF_EINVAL, "steps[%d] is 0 (axis %d); steps must be non-zero",
                                  i, axis);
        slice_axis(x->dims[axis], a.starts[i], a.ends[i], a.steps[i], &first[axis], &dims[axis],
                   &step[axis]);
    }
    int64_t in_stride[BF_MAX_DIMS], stride[BF_MAX_DIMS], offset = 0;
    bf__row_strides(r, x->dims, in_stride);
    for (int d = 0; d < r; d++) {
        stride[d] = in_stride[d] * step[d];
        offset += first[d] * in_stride[d];
    }
    bf__set_shape(p->out[0], x->dtype, r, dims);
    bf__strided_init((bf__strided *)p->params, bf_dtype_size(x->dtype), r, dims, stride, offset);
    return BF_OK;
}

/* ---- Expand ---- */

bf_status bf__expand_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    bf_tensor want = {0};
    int cnt;
    bf_status st = bf__need_inputs(p, 2, err);
    if (!st) st = bf__read_ints(n, "shape", p->in[1], want.dims, BF_MAX_DIMS, &cnt, err);
    if (st) return st;
    const bf_tensor *x = p->in[0];
    want.ndim = cnt;
    if ((st = bf__check_dims(n, "shape", cnt, want.dims, err))) return st;
    bf_tensor *y = p->out[0];
    if ((st = bf__broadcast_shape(n, x, &want, y, err))) return st;
    if ((st = bf__check_dims(n, "output shape", y->ndim, y->dims, err))) return st;
    y->dtype = x->dtype;

    int R = y->ndim, lead = R - x->ndim;
    int64_t in_stride[BF_MAX_DIMS], stride[BF_MAX_DIMS];
    bf__row_strides(x->ndim, x->dims, in_stride);
    for (int d = 0; d < R; d++) {
        int id = d - lead;
        stride[d] = id < 0 || x->dims[id] == 1 ? 0 : in_stride[id];
    }
    bf__strided_init((bf__strided *)p->params, bf_dtype_size(x->dtype), R, y->dims, stride, 0);
    return BF_OK;
}
