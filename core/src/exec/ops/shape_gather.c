/* Gather and Concat: copies of whole rows, chosen by index or by input. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "shape_impl.h"
#include "sgemm.h"
#include "transpose8.h"
#include "exec/step_access.h"

/* ---- Gather ---- */

typedef struct gather_params {
    int axis;
    int idx_i32;           /* indices are int32 rather than int64 */
    int64_t outer;         /* product of data dims before axis */
    int64_t axis_dim;
    int64_t nidx;          /* number of indices */
    size_t row;            /* bytes of data after axis: the unit copied per index */
} gather_params;
static_assert(sizeof(gather_params) <= BF__OP_PARAMS_MAX, "gather_params must fit in params");

bf_status bf__gather_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    gather_params *g = (gather_params *)p->params;
    int64_t axis_attr;
    bf_status st = bf__need_inputs(p, 2, err);
    if (!st) st = bf__attr_int(n, "axis", 0, &axis_attr, err);
    if (st) return st;
    const bf_tensor *x = p->in[0], *ind = p->in[1];
    if (x->ndim == 0)
        return bf__node_error(err, n, BF_ESHAPE, "input 'data' is a scalar; Gather needs rank >= 1");
    if ((st = bf__norm_axis(n, axis_attr, x->ndim, &g->axis, err))) return st;
    if (ind->dtype != BF_I64 && ind->dtype != BF_I32)
        return bf__node_error(err, n, BF_EFORMAT, "input 'indices' must be int64 or int32, got %s",
                              bf_dtype_name(ind->dtype));
    int r = x->ndim, q = ind->ndim, out_rank = r - 1 + q;
    if (out_rank > BF_MAX_DIMS)
        return bf__node_error(err, n, BF_EUNSUPPORTED, "output rank %d (data rank %d, indices rank %d) "
                              "exceeds the supported %d", out_rank, r, q, BF_MAX_DIMS);
    int64_t dims[BF_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < g->axis; d++) dims[k++] = x->dims[d];
    for (int d = 0; d < q; d++) dims[k++] = ind->dims[d];
    for (int d = g->axis + 1; d < r; d++) dims[k++] = x->dims[d];
    if ((st = bf__check_dims(n, "output shape", out_rank, dims, err))) return st;
    bf__set_shape(p->out[0], x->dtype, out_rank, dims);

    g->idx_i32 = ind->dtype == BF_I32;
    g->outer = 1;
    for (int d = 0; d < g->axis; d++) g->outer *= x->dims[d];
    g->axis_dim = x->dims[g->axis];
    g->nidx = bf_tensor_numel(ind);
    g->row = bf_dtype_size(x->dtype);
    for (int d = g->axis + 1; d < r; d++) g->row *= (size_t)x->dims[d];
    p->scratch = (size_t)g->nidx * sizeof(int64_t);
    return BF_OK;
}

static bf_status index_error(const bf__ctx *c, const gather_params *g, int64_t j, int64_t v,
                             bf_error *err)
{
    /* name the index by its position in the indices tensor, e.g. [1, 3] */
    const bf_tensor *ind = c->in[1];
    int64_t pos[BF_MAX_DIMS];
    for (int d = ind->ndim - 1; d >= 0; d--) {
        pos[d] = j % ind->dims[d];
        j /= ind->dims[d];
    }
    char buf[96];
    return bf__node_error(err, c->node, BF_ERANGE,
                          "index %lld at indices%s is out of range for axis %d of size %lld "
                          "(valid: %lld..%lld)",
                          (long long)v, bf_shape_str(pos, ind->ndim, buf, sizeof buf), g->axis,
                          (long long)g->axis_dim, (long long)-g->axis_dim,
                          (long long)g->axis_dim - 1);
}

static inline void gather_rows(unsigned char *restrict o, const unsigned char *restrict x,
                               const int64_t *restrict idx, const gather_params *g, size_t row)
{
    size_t block = (size_t)g->axis_dim * row;   /* data bytes per outer index */
    for (int64_t b = 0; b < g->outer; b++, x += block)
        for (int64_t j = 0; j < g->nidx; j++, o += row) memcpy(o, x + (size_t)idx[j] * row, row);
}

bf_status bf__gather_run(const bf__ctx *c, bf_error *err)
{
    const gather_params *g = c->params;
    const void *raw = c->in[1]->data;
    int64_t *idx = c->scratch;
    /* check and normalise every index once, before any copy reads data */
    for (int64_t j = 0; j < g->nidx; j++) {
        int64_t v = g->idx_i32 ? ((const int32_t *)raw)[j] : ((const int64_t *)raw)[j];
        if (v < -g->axis_dim || v >= g->axis_dim) return index_error(c, g, j, v, err);
        idx[j] = v < 0 ? v + g->axis_dim : v;
    }
    unsigned char *o = c->out[0]->data;
    const unsigned char *x = c->in[0]->data;
    if (c->rows && g->outer == 1) {   /* a faulty table: clean rows from the model's tensor (op.h) */
        for (int64_t j = 0; j < g->nidx; j++, o += g->row)
            memcpy(o, bf__row_at(c, x, (size_t)idx[j] * g->row, g->row), g->row);
        return BF_OK;
    }
    switch (g->row) {
    case 4: gather_rows(o, x, idx, g, 4); break;
    case 8: gather_rows(o, x, idx, g, 8); break;
    /* 16 floats, a DLRM's embedding row: copied inline, not by a call a row
     * (a row prefetched 8 or 16 lookups ahead measured no faster, with 4
     * KiB pages and with huge ones: docs/BENCHMARKS.md) */
    case 64: gather_rows(o, x, idx, g, 64); break;
    default: gather_rows(o, x, idx, g, g->row); break;
    }
    return BF_OK;
}

/* A static Gather of one constant index (a detector's class column,
 * scores[:, c]) whose rows before the axis (outer) are many and whose unit
 * is small: one element of each row, so a run reads one cache line a
 * row for 4 bytes (plan_impl.h, gcol). */
int bf__gather_column(const bf__step *s)
{
    if (s->dyn || s->node->op->run != bf__gather_run || s->n_in != 2 || s->n_out != 1 || !s->in[0] || !s->in[1] ||
        !s->in[1]->data)
        return 0;
    const gather_params *g = s->params;
    return g->nidx == 1 && g->outer > 1 && g->row <= 16;
}

/* Steps s[0..n) (bf__gather_column, one input, consecutive: plan_fuse.c)
 * run together: each row of the input read once for all of them, each
 * output written in order, the same bytes as n runs. 0 when an index is out
 * of range (nothing written: the steps then run one by one, and the first
 * bad one fails naming itself). */
#if defined(__x86_64__) && defined(__GNUC__)
/* Eight consecutive columns of rows [b0, b0 + nb) (x: the first column's
 * element of row 0, stride floats a row) into o[0 .. 8], eight rows at a
 * time through AVX2 registers (bf__transpose8; moves only): SSDlite's 90
 * class columns took one strided load and store an element. */
__attribute__((target("avx2"))) static void cols8_f32(const float *x, size_t stride, int64_t b0, int64_t nb,
                                                       float *const *o)
{
    float t[64];
    int64_t b = b0, end = b0 + nb;
    for (; b + 8 <= end; b += 8) {
        bf__transpose8(x + (size_t)b * stride, (int64_t)stride, t, 8);
        for (int q = 0; q < 8; q++) memcpy(o[q] + b, t + 8 * q, 8 * sizeof *t);
    }
    for (; b < end; b++)
        for (int q = 0; q < 8; q++) o[q][b] = x[(size_t)b * stride + (size_t)q];
}
#endif

int bf__gather_columns(bf__step *const *s, int n)
{
    enum { MAX = 256 };
    const gather_params *g = s[0]->params;
    size_t off[MAX];
    unsigned char *o[MAX];
    if (n > MAX) return 0;
    for (int k = 0; k < n; k++) {
        const gather_params *q = s[k]->params;
        const void *raw = s[k]->in[1]->data;
        int64_t v = q->idx_i32 ? *(const int32_t *)raw : *(const int64_t *)raw;
        if (v < -q->axis_dim || v >= q->axis_dim) return 0;
        off[k] = (size_t)(v < 0 ? v + q->axis_dim : v) * g->row;
        o[k] = s[k]->out[0]->data;
    }
    const unsigned char *x = s[0]->in[0]->data;
    size_t block = (size_t)g->axis_dim * g->row;
    int aligned = (uintptr_t)x % 4 == 0;   /* a 4-byte unit of bytes may sit anywhere */
    for (int k = 0; k < n; k++) aligned &= (uintptr_t)o[k] % 4 == 0;
    if (g->row == 4 && aligned) {
        /* 64 rows at a time (SSDlite's: 23 KB, in L1), each column's 64
         * elements a strided loop of its own */
        size_t stride = block / 4;
#if defined(__x86_64__) && defined(__GNUC__)
        int simd = bf__sgemm_simd();   /* once a call: it reads the environment */
#endif
        for (int64_t b0 = 0; b0 < g->outer; b0 += 64) {
            int64_t nb = g->outer - b0 < 64 ? g->outer - b0 : 64;
            for (int k = 0; k < n;) {
#if defined(__x86_64__) && defined(__GNUC__)
                int run = 0;   /* columns k .. k + 7 next to each other in a row */
                while (simd && run < 8 && k + run < n && off[k + run] == off[k] + (size_t)run * 4) run++;
                if (run == 8) {
                    float *oc[8];
                    for (int q = 0; q < 8; q++) oc[q] = (float *)(void *)o[k + q];
                    cols8_f32((const float *)(const void *)(x + off[k]), stride, b0, nb, oc);
                    k += 8;
                    continue;
                }
#endif
                const uint32_t *xc = (const uint32_t *)(const void *)(x + (size_t)b0 * block + off[k]);
                uint32_t *ok = (uint32_t *)(void *)o[k] + b0;
                for (int64_t b = 0; b < nb; b++) ok[b] = xc[(size_t)b * stride];
                k++;
            }
        }
        return 1;
    }
    for (int64_t b = 0; b < g->outer; b++, x += block)
        for (int k = 0; k < n; k++) memcpy(o[k] + (size_t)b * g->row, x + off[k], g->row);
    return 1;
}

/* 1 if two bf__gather_column steps read alike: the same axis, rows and unit */
int bf__gather_alike(const bf__step *a, const bf__step *b)
{
    const gather_params *p = a->params, *q = b->params;
    return p->axis == q->axis && p->outer == q->outer && p->axis_dim == q->axis_dim && p->row == q->row;
}

/* For the differential executor (diff.h): a Gather step's axis. */
int bf__gather_axis(const bf__step *s)
{
    if (s->node->op->run != bf__gather_run) return -1;
    return ((const gather_params *)s->params)->axis;
}

/* ---- Concat ---- */

typedef struct concat_params {
    int axis;
    int64_t outer;         /* product of dims before axis */
    size_t unit;           /* bytes of one step along axis: dims after axis times esize */
    size_t out_row;        /* output bytes per outer index */
} concat_params;
static_assert(sizeof(concat_params) <= BF__OP_PARAMS_MAX, "concat_params must fit in params");

bf_status bf__concat_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    concat_params *cp = (concat_params *)p->params;
    int64_t axis_attr;
    bf_status st = bf__need_inputs(p, p->n_in, err);
    if (!st) st = bf__attr_int(n, "axis", 0, &axis_attr, err);
    if (st) return st;
    if (!bf__node_attr(n, "axis"))
        return bf__node_error(err, n, BF_EINVAL, "attribute 'axis' is required");
    const bf_tensor *x0 = p->in[0];
    int r = x0->ndim;
    if (r == 0)
        return bf__node_error(err, n, BF_ESHAPE, "input 0 is a scalar; Concat needs rank >= 1");
    if ((st = bf__norm_axis(n, axis_attr, r, &cp->axis, err))) return st;

    int64_t dims[BF_MAX_DIMS];
    memcpy(dims, x0->dims, sizeof(int64_t) * (size_t)r);
    dims[cp->axis] = 0;
    char s0[96], si[96];
    for (int i = 0; i < p->n_in; i++) {
        const bf_tensor *x = p->in[i];
        if (x->dtype != x0->dtype)
            return bf__node_error(err, n, BF_ESHAPE, "input %d is %s but input 0 is %s; all inputs "
                                  "must have one dtype", i, bf_dtype_name(x->dtype),
                                  bf_dtype_name(x0->dtype));
        int same = x->ndim == r;
        for (int d = 0; same && d < r; d++) same = d == cp->axis || x->dims[d] == x0->dims[d];
        if (!same)
            return bf__node_error(err, n, BF_ESHAPE, "input %d has shape %s, input 0 has shape %s: "
                                  "they must match in every dim but axis %d", i,
                                  bf_shape_str(x->dims, x->ndim, si, sizeof si),
                                  bf_shape_str(x0->dims, r, s0, sizeof s0), cp->axis);
        dims[cp->axis] += x->dims[cp->axis];
    }
    if ((st = bf__check_dims(n, "output shape", r, dims, err))) return st;
    bf__set_shape(p->out[0], x0->dtype, r, dims);
    cp->outer = 1;
    for (int d = 0; d < cp->axis; d++) cp->outer *= dims[d];
    cp->unit = bf_dtype_size(x0->dtype);
    for (int d = cp->axis + 1; d < r; d++) cp->unit *= (size_t)dims[d];
    cp->out_row = (size_t)dims[cp->axis] * cp->unit;
    return BF_OK;
}

int bf__concat_axis(const bf__step *s)
{
    if (s->node->op->run != bf__concat_run) return -1;
    return ((const concat_params *)s->params)->axis;
}

void bf__concat_input(const bf__step *s, const bf_tensor *const *in, int j, void *out)
{
    const concat_params *cp = s->params;
    size_t col = 0, row = (size_t)in[j]->dims[cp->axis] * cp->unit;
    for (int i = 0; i < j; i++) col += (size_t)in[i]->dims[cp->axis] * cp->unit;
    const unsigned char *x = in[j]->data;
    for (int64_t b = 0; row && b < cp->outer; b++)
        memcpy((unsigned char *)out + (size_t)b * cp->out_row + col, x + (size_t)b * row, row);
}

bf_status bf__concat_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const concat_params *cp = c->params;
    unsigned char *out = c->out[0]->data;
    size_t col = 0;   /* byte offset of this input's part within an output row */
    for (int i = 0; i < c->n_in; i++) {
        size_t row = (size_t)c->in[i]->dims[cp->axis] * cp->unit;
        const unsigned char *x = c->in[i]->data;
        if (row)
            for (int64_t b = 0; b < cp->outer; b++)
                memcpy(out + (size_t)b * cp->out_row + col, x + (size_t)b * row, row);
        col += row;
    }
    return BF_OK;
}
