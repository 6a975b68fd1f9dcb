/* Channel-local steps: a value changed in one channel alone, followed
 * through the steps that keep it in that channel.
 *
 * A corrupted Conv weight or bias moves one output channel (try_conv,
 * diffexec.c), and so does a corrupted element of a BatchNormalization's
 * parameters, or a value fault on an [N, C, ...] activation. In a
 * mobilenet the channel then goes through a BatchNormalization, an
 * activation, a depthwise Conv and another activation before a pointwise
 * Conv mixes the channels; each of those steps, given an input changed in
 * channel c alone, changes channel c of its output alone. Such a step here
 * computes that channel only (every sample's plane of it) and compares only
 * it with golden; the other channels of its output are golden and are never
 * written: the output's buffer holds channel c alone (dlazy) until a step
 * that is not channel-local reads the value, and only then are the golden
 * channels copied around it (bf__chan_fill), the copy the old path made
 * at every step. The state stays DIRTY, so every other reader re-runs as
 * before.
 *
 * The channel-local steps, with why each gives the whole step's bits on
 * its channel (the same kernel on the same operands; docs/ENGINE.md):
 * - BatchNormalization, inference: bf__bnorm_channel, the kernel's own
 *   per-channel coefficients and affine_fma call on each sample's plane;
 * - a float unary map (Relu, HardSigmoid, HardSwish, Sigmoid, ...) or
 *   Clip: the step's own run on a view of each plane (bf__map_span): an
 *   element depends on its own input element alone;
 * - Add, Sub, Mul, Div on floats whose inputs are each golden (any
 *   broadcast) or changed in the same channel with the output's rank and
 *   channels (broadcast over the others: an SE block's gate [N, C, 1, 1]):
 *   bf__binary_span, the step's row function on each plane's elements;
 * - a Conv with golden weights whose output channels each read their own
 *   group's input channels alone, one a group (depthwise, or grouped with
 *   mg = 1): input channel c moves output channel c / cg alone, computed by
 *   bf__conv_channel_n as try_conv computes a channel (the bits of the
 *   whole step, test_conv);
 * - MaxPool and AveragePool (bf__pool_plane: plane by plane, as the run),
 *   GlobalAveragePool and GlobalMaxPool (one output element per sample),
 *   ReduceMean and ReduceSum over every axis from 2 on (bf__reduce_plane,
 *   the run's own row sum);
 * - Resize keeping dims 0 and 1 (bilinear, nearest, cubic upsampling of
 *   [N, C, H, W]): bf__resize_channel, the run's own row function on the
 *   rows of that channel's planes;
 * - Concat on axis 1 with one input changed: channel c of input j is
 *   channel (the channels of the inputs before j) + c of the output, a copy.
 * A Conv whose fused chain (BatchNormalization, residual Add, activation)
 * the golden cache keeps no value in between of (gcache.c) computes its
 * channel through the chain into the chain's last output
 * (bf__dx_chain_channel): a corrupted weight's (try_conv) or a depthwise
 * Conv's whose input moved in one channel.
 * Anything else, a step hit by a value fault, a value the cache does not
 * hold, two different channels: the step runs as before. */
#include <string.h>

#include "diff/diff_impl.h"

/* t as [n, c, inner] planes of floats */
static int layout(const bf_tensor *t, int64_t *n, int64_t *c, int64_t *inner)
{
    if (t->dtype != BF_F32 || t->ndim < 2) return 0;
    *n = t->dims[0], *c = t->dims[1], *inner = 1;
    for (int i = 2; i < t->ndim; i++) *inner *= t->dims[i];
    return *n > 0 && *c > 0;
}

static int same_shape(const bf_tensor *a, const bf_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

/* Conv step i's fused chain (the Conv; its BatchNormalization n, residual
 * Add a and last step r where it has them, bf__plan_fused_last) and the
 * run-time operands its steps read from outside it: every input but the
 * values the chain makes itself (v, u, w: what r's readers see is r's
 * output) and those not set at run time. One walk serving chain_whole
 * (each pointed at its held golden) and bf__dx_chain_channel (each checked,
 * then fetched), so that both read the same operands. */
typedef struct chain_ops {
    int ks[4];     /* the chain's places: 0 the Conv i, 1 n, 2 a, 3 r (0: none) */
    int v, u, w;   /* the values made inside the chain before r (-1: none) */
    int k, j;      /* the walk: input j of place k */
} chain_ops;

/* The walk over Conv step i's chain from place `from` (1: the Conv's own
 * inputs left out); returns r */
static int chain_ops_start(chain_ops *c, const bf_plan *p, size_t i, int from)
{
    int a, n, r = bf__plan_fused_last(p, i, &n, &a);
    c->ks[0] = (int)i, c->ks[1] = n, c->ks[2] = a, c->ks[3] = r;
    c->v = p->steps[i].node->out[0];
    c->u = n && n != r ? p->steps[n].node->out[0] : -1;
    c->w = a && a != r ? p->steps[a].node->out[0] : -1;
    c->k = from, c->j = 0;
    return r;
}

/* Whether place k is a step of its own: the Conv always, n and a where the
 * chain has them, r where it is neither of them */
static int chain_has(const chain_ops *c, int k)
{
    return !k || (c->ks[k] && !(k == 3 && (c->ks[3] == c->ks[2] || c->ks[3] == c->ks[1])));
}

/* The walk's next run-time operand into *x (its step's place in c->k); 0
 * when none is left */
static int chain_ops_next(chain_ops *c, const bf_plan *p, int *x)
{
    for (; c->k < 4; c->k++, c->j = 0) {
        if (!chain_has(c, c->k)) continue;
        const bf__step *s = &p->steps[c->ks[c->k]];
        while (c->j < s->n_in) {
            int y = s->node->in[c->j++];
            if (y < 0 || y == c->v || y == c->u || y == c->w || !bf__runtime(p, y)) continue;
            *x = y;
            return 1;
        }
    }
    return 0;
}

/* Value v's lazy channel written by Conv step i's fused chain where no
 * golden of v is held (bf__dx_chain_channel, own_chan): the chain run
 * whole over the same operands. Its one corrupted weight moved channel c
 * alone, so every other channel comes out golden and channel c as the
 * channel's run gave it (bf__plan_chain_channel: the fused run's bits on
 * it). The chain's run-time inputs are held (the cache or the parameter-
 * only values: bf__dx_chain_channel checked), pointed at again: a place
 * a worker shares by lifetime may have been written since. */
static bf_status chain_whole(bf__dx *dx, bf_plan *p, int64_t b, size_t i, bf_error *err)
{
    chain_ops c;
    int x;
    chain_ops_start(&c, p, i, 0);
    while (chain_ops_next(&c, p, &x)) {
        const void *g = bf__dx_golden(dx->sh, x, b);
        if (!g) return bf_error_set(err, BF_EUNSUPPORTED, "internal error: a chain's input %d is not held", x);
        p->vals[x].data = (void *)g;
    }
    dx->work[i] += 1.0;
    return bf__plan_run_fused(p, i, err);
}

bf_status bf__chan_fill(bf__dx *dx, bf_plan *p, int64_t b, int v, bf_error *err)
{
    if (v < 0 || !dx->dlazy[v]) return BF_OK;
    dx->dlazy[v] = 0;
    if (dx->dsrc[v]) {
        size_t i = (size_t)dx->dsrc[v] - 1;
        dx->dsrc[v] = 0;
        return chain_whole(dx, p, b, i, err);
    }
    /* lazy only where the cache holds v (bf__chan_settle) */
    const float *g = bf__dx_golden(dx->sh, v, b);
    float *y = p->vals[v].data;
    int64_t n = 0, c = 0, in = 0, ch = dx->dch[v] - 1;
    layout(&p->vals[v], &n, &c, &in);
    bf__plan_warm_value(p, v);   /* every channel but one: its pages in one call */
    for (int64_t s = 0; s < n; s++) {
        int64_t at = s * c * in;
        memcpy(y + at, g + at, (size_t)(ch * in) * sizeof *y);
        memcpy(y + at + (ch + 1) * in, g + at + (ch + 1) * in, (size_t)((c - ch - 1) * in) * sizeof *y);
    }
    return BF_OK;
}

int64_t bf__chan_rows(const bf__dx *dx, const bf_plan *p, int64_t b, int v, int64_t *row)
{
    const float *g = bf__dx_golden(dx->sh, v, b), *y = p->vals[v].data;
    int64_t n = 0, c = 0, in = 0, ch = dx->dch[v] - 1, k = 0;
    layout(&p->vals[v], &n, &c, &in);
    for (int64_t s = 0; s < n; s++)
        if (memcmp(y + (s * c + ch) * in, g + (s * c + ch) * in, (size_t)in * sizeof *y) != 0) row[k++] = s;
    return k;
}

bf_status bf__chan_fill_inputs(bf__dx *dx, bf_plan *p, int64_t b, size_t i, bf_error *err)
{
    const int ks[4] = {(int)i, p->fuse_to[i], p->fuse_add[i], p->fuse_bn[i]};
    bf_status st = BF_OK;
    for (int k = 0; k < 4 && st == BF_OK; k++) {
        if (k && ks[k] <= 0) continue;
        const bf__step *s = &p->steps[ks[k]];
        for (int j = 0; j < s->n_in && st == BF_OK; j++) st = bf__chan_fill(dx, p, b, s->node->in[j], err);
    }
    return st;
}

int bf__chan_settle(bf__dx *dx, bf_plan *p, int64_t b, int o, int c)
{
    const float *g = bf__dx_golden(dx->sh, o, b);
    const float *y = p->vals[o].data;
    int64_t n = 0, cs = 0, in = 0;
    layout(&p->vals[o], &n, &cs, &in);
    if (!g) {   /* none to compare with (own_chan): moved, its readers compare theirs */
        dx->state[o] = DIRTY;
        dx->dch[o] = c + 1;
        dx->dlazy[o] = 1;
        return 1;
    }
    int moved = 0;
    for (int64_t s = 0; s < n && !moved; s++)
        moved = memcmp(y + (s * cs + c) * in, g + (s * cs + c) * in, (size_t)in * sizeof *y) != 0;
    if (!moved) {   /* golden after all: read from the cache, as fetch leaves it */
        p->vals[o].data = (void *)g;
        dx->state[o] = GOLDEN;
        dx->dch[o] = 0;
        dx->dlazy[o] = 0;
        return 0;
    }
    dx->state[o] = DIRTY;
    dx->dch[o] = c + 1;
    dx->dlazy[o] = 1;
    return 1;
}

void bf__chan_value_faults(bf__dx *dx, const bf_plan *p, size_t nb)
{
    for (size_t k = 0; k < nb; k++) {
        const bf__vfault *f = &p->vf[k];
        int v = (int)f->f.value;
        int64_t n, c, in, ch = -1;
        if (!f->f.drawn && layout(&p->vals[v], &n, &c, &in) && n == bf_plan_batch(p) && f->row_elems == c * in &&
            f->f.index >= 0 && f->f.index < c * in)
            ch = f->f.index / in;
        if (dx->dch[v] == 0) dx->dch[v] = ch >= 0 ? (int32_t)ch + 1 : -1;
        else if (dx->dch[v] != ch + 1) dx->dch[v] = -1;
    }
    for (size_t k = 0; k < nb; k++) {
        int v = (int)p->vf[k].f.value;
        if (dx->dch[v] < 0) dx->dch[v] = 0;
    }
}

/* Conv step i, one corrupted element of its weight or bias in output
 * channel oc, golden input, when the cache does not keep its output (its
 * fused chain's values in between are left out, gcache.c): channel oc of
 * the chain's last output computed through the chain's epilogue
 * (bf__plan_chain_channel, the fused run's bits on that channel:
 * test_conv_fuse's one_channel_of_a_chain), the other channels golden and
 * left unwritten until a reader needs them (bf__chan_settle at the last
 * step, FUSED_CHAN). The chain's other steps must read no corrupted
 * parameter and golden operands (the Add's other one), else other
 * channels would move: *done 0 then, nothing written. */
bf_status bf__dx_chain_channel(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int64_t oc, int64_t cout, int *done,
                               bf_error *err)
{
    chain_ops c;
    int x, r = chain_ops_start(&c, p, i, 0), n = c.ks[1], a = c.ks[2];
    *done = 0;
    if (r <= 0 || p->step_hit[r] || p->steps[r].n_out != 1 || p->steps[r].node->out[0] < 0) return BF_OK;
    int ro = p->steps[r].node->out[0];
    /* No golden of ro: only where its readers are depthwise Convs, which
     * read channel oc alone and compare their own outputs; should one of
     * them read it whole, bf__chan_fill runs the chain whole, from inputs
     * the cache holds (checked below). */
    int held = bf__dx_golden(dx->sh, ro, b) != NULL;
    if (!held && !dx->sh->own_chan[ro]) return BF_OK;
    for (int k = 1; k < 4; k++)
        if (chain_has(&c, k) && dx->param_hit[c.ks[k]]) return BF_OK;
    /* every operand checked first, then fetched; the Conv's own inputs
     * checked only when nothing else is held (the Conv's own are the try's) */
    chain_ops_start(&c, p, i, held);
    while (chain_ops_next(&c, p, &x))
        if (dx->state[x] == DIRTY || (!held && !bf__dx_golden(dx->sh, x, b))) return BF_OK;
    bf_status st;
    chain_ops_start(&c, p, i, 1);
    while (chain_ops_next(&c, p, &x))
        if ((st = bf__dx_fetch(dx, p, b, x, err)) != BF_OK) return st;
    bf__dx_own(dx, p, ro);
    if (!bf__plan_chain_channel(p, i, oc)) return BF_OK;   /* the whole chain then runs over it */
    double share = 1.0 / (double)cout;
    dx->work[i] += share;
    if (n && n != r) dx->fdone[n] = FUSED_MID, dx->work[n] += share;
    if (a && a != r) dx->fdone[a] = FUSED_MID, dx->work[a] += share;
    dx->fdone[r] = FUSED_CHAN;
    dx->work[r] += share;
    dx->fchan_c = (int)oc;
    dx->dsrc[ro] = held ? 0 : (int32_t)i + 1;
    dx->n_chan++;
    *done = FUSED_CONV;
    return BF_OK;
}

enum { K_NONE, K_BN, K_MAP, K_BIN, K_CONV, K_POOL, K_GPOOL, K_REDUCE, K_RESIZE, K_CONCAT };

static int kind_of(const bf__step *s)
{
    int64_t isp, osp;
    if (bf__bnorm_of(s, NULL)) return K_BN;
    if (bf__map_f32(s)) return K_MAP;
    if (bf__binary_f32(s)) return K_BIN;
    if (bf__conv_group_in(s) > 0) return K_CONV;
    if (s->n_out == 1 && bf__pool_shape(s, &isp, &osp)) return K_POOL;
    if (bf__gpool_step(s)) return K_GPOOL;
    if (bf__reduce_planes(s)) return K_REDUCE;
    if (bf__resize_planes(s)) return K_RESIZE;
    if (bf__concat_axis(s) == 1 && s->out[0]->dtype == BF_F32 && s->out[0]->ndim >= 2) return K_CONCAT;
    return K_NONE;
}

int bf__chan_local_step(const bf__step *s) { return !s->dyn && s->n_out == 1 && kind_of(s) != K_NONE; }

/* A changed operand of a binary step that keeps its channel: the output's
 * rank and channels, any other dim the output's or broadcast (1). */
static int keeps_channel(const bf_tensor *v, const bf_tensor *out)
{
    return v->ndim == out->ndim && v->ndim >= 2 && v->dims[1] == out->dims[1];
}

/* The one output channel step i's changed inputs move (-1: none changed;
 * -2: not channel-local: a value changed in more, or two channels, an
 * input other than the first of a step that reads only its first
 * channel-wise, two changed inputs of a Concat, an operand broadcast over
 * the channels) */
static int input_channel(const bf__dx *dx, const bf_plan *p, const bf__step *s, int kind, int *gate)
{
    int ch = -1, base = 0;
    for (int j = 0; j < s->n_in; j++) {
        int v = s->node->in[j];
        if (kind == K_CONCAT && j > 0) base += (int)p->vals[s->node->in[j - 1]].dims[1];
        if (v < 0 || dx->state[v] != DIRTY) continue;
        if (!dx->dch[v] || (j > 0 && kind != K_BIN && kind != K_CONCAT)) return -2;
        if (kind == K_BIN && !same_shape(&p->vals[v], s->out[0])) {
            if (!keeps_channel(&p->vals[v], s->out[0])) return -2;
            *gate = 1;
        }
        int c = dx->dch[v] - 1;
        if (kind == K_CONCAT) {
            if (ch >= 0) return -2;   /* two inputs changed: two channels */
            c += base;
        } else if (kind == K_CONV) {
            c /= (int)bf__conv_group_in(s);
        }
        if (ch >= 0 && ch != c) return -2;
        ch = c;
    }
    return ch;
}

/* A BatchNormalization's corrupted parameter elements: their channel if
 * there is one in one channel, else -2 */
static int param_channel(const bf__dx *dx, const bf__step *s)
{
    const bf_model *m = dx->sh->m;
    int n = 0, c = -2;
    for (int j = 1; j < s->n_in; j++) {
        int v = s->node->in[j];
        if (v < 0 || m->values[v].kind != BF__VAL_PARAM) continue;
        int k = dx->pfaults[m->values[v].index];
        if (k) n += k, c = (int)dx->pfault[m->values[v].index]->index;
    }
    return n == 1 ? c : -2;
}

bf_status bf__chan_try(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err)
{
    const bf__step *s = &p->steps[i];
    *done = 0;
    if (s->dyn || p->step_hit[i] || s->n_out != 1 || s->node->out[0] < 0) return BF_OK;
    int kind = kind_of(s);
    if (kind == K_NONE || (dx->param_hit[i] && kind != K_BN)) return BF_OK;
    int gate = 0, ch = input_channel(dx, p, s, kind, &gate);
    if (ch == -2) return BF_OK;
    if (dx->param_hit[i]) {
        int pc = param_channel(dx, s);
        if (pc < 0 || (ch >= 0 && ch != pc)) return BF_OK;
        ch = pc;
    }
    int o = s->node->out[0];
    int64_t n, c, in;
    if (ch < 0 || !layout(&p->vals[o], &n, &c, &in) || ch >= c) return BF_OK;
    bf_status st;
    if (!bf__dx_golden(dx->sh, o, b)) {
        /* a depthwise Conv whose fused chain's values in between the cache
         * leaves out: the channel through the chain (bf__dx_chain_channel) */
        if (kind != K_CONV || p->step_hit[i]) return BF_OK;
        if (bf__conv_group_in(s) > 1 && (st = bf__chan_fill(dx, p, b, s->node->in[0], err)) != BF_OK) return st;
        if ((st = bf__dx_chain_channel(dx, p, b, i, ch, c, done, err)) != BF_OK) return st;
        if (*done) dx->n_chan_kind[2]++;
        return BF_OK;
    }
    for (int j = 0; j < s->n_in; j++)
        if (bf__runtime(p, s->node->in[j]) && (st = bf__dx_fetch(dx, p, b, s->node->in[j], err)) != BF_OK) return st;
    bf__dx_own(dx, p, o);
    switch (kind) {
    case K_BN: bf__bnorm_channel(s, ch); break;
    case K_MAP:
        for (int64_t k = 0; k < n; k++) bf__map_span(s, (k * c + ch) * in, in);
        break;
    case K_BIN:
        for (int64_t k = 0; k < n; k++) bf__binary_span(s, (k * c + ch) * in, in);
        break;
    case K_CONV: {
        /* a group of several input channels reads the golden ones beside c */
        if (bf__conv_group_in(s) > 1 && (st = bf__chan_fill(dx, p, b, s->node->in[0], err)) != BF_OK) return st;
        const float *bias = s->n_in > 2 && s->in[2] ? s->in[2]->data : NULL;
        bf__conv_channel_n(s, ch, n, s->in[0]->data, s->in[1]->data, bias, s->out[0]->data, p->scratch);
        break;
    }
    case K_RESIZE: bf__resize_channel(s, ch, p->scratch); break;
    case K_REDUCE:
        for (int64_t k = 0; k < n; k++) bf__reduce_plane(s, k * c + ch);
        break;
    case K_CONCAT: {   /* the changed input's channel, copied to its place */
        int base = 0, j = 0;
        while (s->node->in[j] < 0 || dx->state[s->node->in[j]] != DIRTY) base += (int)s->in[j++]->dims[1];
        const float *x = s->in[j]->data;
        int64_t cj = s->in[j]->dims[1];
        float *y = s->out[0]->data;
        for (int64_t k = 0; k < n; k++)
            memcpy(y + (k * c + ch) * in, x + (k * cj + ch - base) * in, (size_t)in * sizeof *y);
        break;
    }
    case K_POOL: {
        int64_t isp, osp;
        bf__pool_shape(s, &isp, &osp);
        const float *xs = s->in[0]->data;
        float *y = s->out[0]->data;
        for (int64_t k = 0; k < n; k++) bf__pool_plane(s, xs + (k * c + ch) * isp, y + (k * c + ch) * osp, p->scratch);
        break;
    }
    default:
        for (int64_t k = 0; k < n; k++) bf__gpool_plane(s, k * c + ch);
        break;
    }
    dx->work[i] += 1.0 / (double)c;
    dx->n_chan++;
    if (kind == K_RESIZE) dx->n_chan_kind[0]++;
    else if (kind == K_CONCAT) dx->n_chan_kind[1]++;
    else if (kind == K_CONV) dx->n_chan_kind[2]++;
    else if (kind == K_BIN && gate) dx->n_chan_kind[3]++;
    else if (kind == K_REDUCE) dx->n_chan_kind[4]++;
    dx->chan_c = ch;
    *done = CHAN_DONE;
    return BF_OK;
}
