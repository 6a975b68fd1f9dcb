/* The ops bitflip inserts to protect a model (see bitflip/mitigate.h and
 * mitigate.c, which places them): never read from a model file.
 *
 * bf.Clip (X) -> Y: activation clipping. Attributes lo, hi (float), zero
 *   (int: out-of-range values to 0, else to the bound), nan (int: NaN to 0).
 *
 * bf.AbftCheck (Y, E, Ew, T, then the protected op's inputs) -> Z: the
 *   Huang-Abraham check of a linear op's output Y. Along the channel axis
 *   (bf_axis) Y's channels form bf_groups groups of cg; E, Ew and T have
 *   one channel per group: the op applied to its input with the golden
 *   weights' channel sums (E), with the sums weighted by channel + 1 (Ew),
 *   and to |input| with the sums of |weights| (T, the scale of the rounding
 *   error). Z is Y where every group sum matches E and the weighted sum Ew
 *   within the tolerance bf_k * (2K + cg) * 2^-24 * T (K = bf_inner), and
 *   the weighted one within cg times that. Otherwise, with bf_correct 0, the
 *   check fails with BF_EDETECTED; with bf_correct 1, a mismatch confined to
 *   one channel (located by Ew / E, or as the one non-finite value) is fixed
 *   as E minus the group's other channels, and anything else recomputes the
 *   op (bf_op, with the node's other attributes, run on the inputs after T)
 *   and checks again, BF_EDETECTED if that fails too. The sums are in
 *   double: their own rounding is far below the tolerance. */
#include <float.h>
#include <assert.h>
#include <math.h>
#include <stdalign.h>
#include <string.h>

#include "exec/op.h"

/* ---- bf.Clip ---- */

typedef struct clip_params {
    float lo, hi;
    int zero, nan;
} clip_params;

static bf_status clip_prepare(bf__prep *p, bf_error *err)
{
    clip_params *q = (clip_params *)p->params;
    bf_status st = bf__want_f32(p, 0, "X", err);
    int64_t zero = 0, nan = 0;
    if (st == BF_OK) st = bf__attr_float(p->node, "lo", -INFINITY, &q->lo, err);
    if (st == BF_OK) st = bf__attr_float(p->node, "hi", INFINITY, &q->hi, err);
    if (st == BF_OK) st = bf__attr_int(p->node, "zero", 0, &zero, err);
    if (st == BF_OK) st = bf__attr_int(p->node, "nan", 0, &nan, err);
    if (st != BF_OK) return st;
    q->zero = zero != 0;
    q->nan = nan != 0;
    bf__set_shape(p->out[0], BF_F32, p->in[0]->ndim, p->in[0]->dims);
    p->scratch = 0;
    return BF_OK;
}

static bf_status clip_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const clip_params *q = c->params;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    int64_t n = bf_tensor_numel(c->in[0]);
    float lo_to = q->zero ? 0.0f : q->lo, hi_to = q->zero ? 0.0f : q->hi;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < q->lo ? lo_to : v > q->hi ? hi_to : v;   /* NaN compares false: kept */
        y[i] = q->nan && v != v ? 0.0f : v;
    }
    return BF_OK;
}

/* ---- bf.AbftCheck ---- */

#define ABFT_U 0x1p-24

typedef struct abft_params {
    int64_t outer, c, inner, groups, cg, kdim;
    double k;
    int correct;
    const bf__op *sub_op;
    bf__node sub_node;      /* the protected op: this node's attributes, its inputs after T */
    size_t sub_scratch;
    alignas(16) unsigned char sub[BF__OP_SUBPARAMS_MAX];
} abft_params;
static_assert(sizeof(abft_params) <= BF__OP_PARAMS_MAX, "abft params too large");

static bf_status abft_prepare(bf__prep *p, bf_error *err)
{
    abft_params *q = (abft_params *)p->params;
    const bf__node *nd = p->node;
    bf_status st;
    int64_t axis = 0, groups = 1, inner = 0, correct = 0;
    float k = 2;
    const char *op = NULL;
    if ((st = bf__attr_int(nd, "bf_axis", -1, &axis, err)) || (st = bf__attr_int(nd, "bf_groups", 1, &groups, err)) ||
        (st = bf__attr_int(nd, "bf_inner", 0, &inner, err)) || (st = bf__attr_int(nd, "bf_correct", 0, &correct, err)) ||
        (st = bf__attr_float(nd, "bf_k", 2, &k, err)) || (st = bf__attr_string(nd, "bf_op", NULL, &op, err)))
        return st;
    if (p->n_in < 6 || !op) return bf__node_error(err, nd, BF_EFORMAT, "needs Y, E, Ew, T, the op's inputs and bf_op");
    for (int i = 0; i < 4; i++)
        if ((st = bf__want_f32(p, i, "a checked value", err)) != BF_OK) return st;
    const bf_tensor *y = p->in[0];
    int ax;
    if ((st = bf__norm_axis(nd, axis, y->ndim, &ax, err)) != BF_OK) return st;
    q->c = y->dims[ax];
    if (groups < 1 || q->c % groups) return bf__node_error(err, nd, BF_ESHAPE, "%lld channels in %lld groups", (long long)q->c, (long long)groups);
    q->groups = groups;
    q->cg = q->c / groups;
    q->outer = q->inner = 1;
    for (int d = 0; d < y->ndim; d++) {
        if (d < ax) q->outer *= y->dims[d];
        if (d > ax) q->inner *= y->dims[d];
    }
    for (int i = 1; i < 4; i++) {
        const bf_tensor *e = p->in[i];
        int ok = e->ndim == y->ndim;
        for (int d = 0; ok && d < y->ndim; d++) ok = e->dims[d] == (d == ax ? groups : y->dims[d]);
        if (!ok) return bf__node_error(err, nd, BF_ESHAPE, "checksum %d does not match the output's shape", i);
    }
    q->kdim = inner;
    q->k = k;
    q->correct = correct != 0;
    q->sub_op = bf__op_find(op);
    if (!q->sub_op) return bf__node_error(err, nd, BF_EUNSUPPORTED, "cannot protect op %s", op);
    /* the protected op, prepared on this node's attributes and its inputs */
    q->sub_node = *nd;
    q->sub_node.op_type = (char *)op;
    q->sub_node.op = q->sub_op;
    q->sub_node.in = nd->in + 4;
    q->sub_node.n_in = nd->n_in - 4;
    q->sub_node.n_out = 1;
    bf__prep sp;
    memset(&sp, 0, sizeof sp);
    bf_tensor tmp = {0};
    sp.node = &q->sub_node;
    sp.opset = p->opset;
    sp.producer = p->producer;
    sp.tie_order = p->tie_order;
    sp.n_in = p->n_in - 4;
    sp.n_out = 1;
    for (int i = 0; i < sp.n_in; i++) sp.in[i] = p->in[4 + i];
    sp.out[0] = &tmp;
    if ((st = q->sub_op->prepare(&sp, err)) != BF_OK) return st;
    if (tmp.ndim != y->ndim || memcmp(tmp.dims, y->dims, (size_t)y->ndim * sizeof *y->dims) != 0)
        return bf__node_error(err, nd, BF_ESHAPE, "the recomputed output's shape differs from the checked one");
    memcpy(q->sub, sp.params, sizeof q->sub);
    q->sub_scratch = sp.scratch;
    p->scratch = sp.scratch;
    bf__set_shape(p->out[0], BF_F32, y->ndim, y->dims);
    return BF_OK;
}

typedef struct abft_site {
    int64_t o, g, p;
    double d, tol;
} abft_site;

/* Group g's channel sums at (o, ., p), in double. */
static void group_sums(const abft_params *q, const float *z, int64_t o, int64_t g, int64_t p, double *s, double *sw)
{
    const float *col = z + (o * q->c + g * q->cg) * q->inner + p;
    double a = 0, b = 0;
    for (int64_t c = 0; c < q->cg; c++) {
        double v = col[c * q->inner];
        a += v;
        b += (double)(c + 1) * v;
    }
    *s = a;
    *sw = b;
}

static int holds(double d, double dw, double tol, int64_t cg)
{
    return fabs(d) <= tol && fabs(dw) <= tol * (double)cg;
}

/* One channel of group g at (o, p) is wrong: which, or -1. */
static int64_t locate(const abft_params *q, const float *z, int64_t o, int64_t g, int64_t p, double d, double dw)
{
    const float *col = z + (o * q->c + g * q->cg) * q->inner + p;
    int64_t bad = -1, n_bad = 0;
    for (int64_t c = 0; c < q->cg; c++)
        if (!isfinite(col[c * q->inner])) bad = c, n_bad++;
    if (n_bad) return n_bad == 1 ? bad : -1;
    double r = dw / d;
    if (!isfinite(r)) return -1;
    double c = nearbyint(r) - 1;
    return c >= 0 && c < (double)q->cg && fabs(r - (c + 1)) < 0.25 ? (int64_t)c : -1;
}

/* Checks z (fixing single-channel mismatches if `fix`); returns the number
 * of checks that still fail, the first in *first. */
static int64_t check(const abft_params *q, float *z, const float *e, const float *ew, const float *t, int fix,
                     abft_site *first)
{
    int64_t failed = 0;
    double scale = q->k * (double)(2 * q->kdim + q->cg) * ABFT_U;
    for (int64_t o = 0; o < q->outer; o++)
        for (int64_t g = 0; g < q->groups; g++)
            for (int64_t p = 0; p < q->inner; p++) {
                int64_t ei = (o * q->groups + g) * q->inner + p;
                double tol = scale * fabs((double)t[ei]) + FLT_MIN, s, sw;
                group_sums(q, z, o, g, p, &s, &sw);
                double d = s - e[ei], dw = sw - ew[ei];
                if (holds(d, dw, tol, q->cg)) continue;
                if (fix) {
                    int64_t c = locate(q, z, o, g, p, d, dw);
                    if (c >= 0) {
                        float *el = z + (o * q->c + g * q->cg + c) * q->inner + p;
                        float was = *el;
                        *el = 0;
                        double rest, rest_w;
                        group_sums(q, z, o, g, p, &rest, &rest_w);
                        *el = (float)((double)e[ei] - rest);
                        group_sums(q, z, o, g, p, &s, &sw);
                        if (holds(s - e[ei], sw - ew[ei], tol, q->cg)) continue;
                        *el = was;
                    }
                }
                if (!failed++ && first) *first = (abft_site){o, g, p, d, tol};
            }
    return failed;
}

static bf_status detected(bf_error *err, const bf__node *nd, const abft_params *q, int64_t n, const abft_site *s)
{
    return bf__node_error(err, nd, BF_EDETECTED,
                          "ABFT: %lld of %lld checksums mismatch%s (first: row %lld, group %lld, position %lld: off "
                          "by %.3g, tolerance %.3g)",
                          (long long)n, (long long)(q->outer * q->groups * q->inner), q->correct ? " after correction" : "",
                          (long long)s->o, (long long)s->g, (long long)s->p, s->d, s->tol);
}

static bf_status abft_run(const bf__ctx *c, bf_error *err)
{
    const abft_params *q = c->params;
    const bf_tensor *y = c->in[0];
    float *z = c->out[0]->data;
    const float *e = c->in[1]->data, *ew = c->in[2]->data, *t = c->in[3]->data;
    memcpy(z, y->data, bf_tensor_nbytes(y));
    abft_site first = {0};
    int64_t n = check(q, z, e, ew, t, q->correct, &first);
    if (n == 0) return BF_OK;
    if (!q->correct) return detected(err, c->node, q, n, &first);
    /* more than a channel per check: compute the op again (a transient
     * error goes away; a corrupted stored weight does not) */
    bf__ctx sc = {.node = &q->sub_node, .params = q->sub, .n_in = c->n_in - 4, .n_out = 1, .in = c->in + 4,
                  .out = c->out, .scratch = c->scratch};
    bf_status st = q->sub_op->run(&sc, err);
    if (st != BF_OK) return st;
    if ((n = check(q, z, e, ew, t, 1, &first)) != 0) return detected(err, c->node, q, n, &first);
    return BF_OK;
}

const bf__op bf__ops_mitigate[] = {
    {"bf.Clip", 1, 1, 1, 1, 0, clip_prepare, clip_run},
    {"bf.AbftCheck", 6, 7, 1, 1, 0, abft_prepare, abft_run},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL},
};
