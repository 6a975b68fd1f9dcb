/* A Conv re-run at the output positions its moved input reaches alone
 * (docs/ENGINE.md, step 4; docs/engine/positions.md).
 *
 * An output position of a Conv reads its input at the taps of its window
 * alone, and its residual operand (a fused Add's) at itself. Where a
 * trial's change has reached only some positions of the input (a small
 * change that most sums rounded away, a ReLU that clamped most of a moved
 * channel back to zero), the other output positions read golden floats at
 * every tap and keep their golden outputs. So the step's output place is
 * filled with the golden output of the batch, and the Conv computes every
 * output channel at the reached positions alone (op.h, bf__cpos), through
 * linalg_conv_bcast.c's own blocks, chunks and epilogue: the same chain
 * over K (from +0, or from the partial-sum checkpoint a resume starts at:
 * diffpsum.c), the same operations after it, so the same bits the whole
 * step gives those positions. Which positions moved is found bit for bit
 * (a compare of the input with its golden floats), never bounded.
 *
 * Why it pays: resnet18's campaign re-runs layer4's Convs whole for most
 * of its trials (layer4 holds 72% of the weights), and a weight fault's
 * change there reaches about three quarters of those Convs' positions
 * (docs/perf/trials/resnet18.md, h52-pos). Why not always: past POS_SHARE
 * of a batch's positions the list saves less than the golden copy and the
 * compares cost. */
#include <string.h>

#include "base/alloc.h"
#include "base/grow.h"
#include "diff/diff_impl.h"

/* The share of a batch's output positions past which the step runs whole */
#define POS_SHARE 0.9

void bf__pos_free(bf__dx *dx)
{
    bf__free(dx->pos.in);
    bf__free(dx->pos.out);
    bf__free(dx->pos.q);
    bf__free(dx->pos.work);
}

/* Marks in mk (one byte a position of each of the n images, hw a map) the
 * positions where value v of batch b differs from its golden bits in any of
 * channels [c0, c1) of its c; 0 where v is no float map of that shape or
 * its golden is not in the cache. */
static int mark_moved(const bf__dx *dx, const bf_plan *p, int64_t b, int v, int64_t n, int64_t c, int64_t c0,
                      int64_t c1, int64_t hw, unsigned char *mk)
{
    const bf_tensor *t = &p->vals[v];
    const uint32_t *x = t->data, *g = bf__dx_golden(dx->sh, v, b);
    if (!g || t->dtype != BF_F32 || bf_tensor_nbytes(t) != (size_t)(n * c * hw) * sizeof(float)) return 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = c0; ch < c1; ch++) {
            const uint32_t *a = x + (i * c + ch) * hw, *e = g + (i * c + ch) * hw;
            unsigned char *m = mk + i * hw;
            for (int64_t k = 0; k < hw; k++) m[k] |= a[k] != e[k];
        }
    return 1;
}

/* The output positions whose window holds a marked input position */
static void reach(const bf__conv_geom *g, const unsigned char *in, unsigned char *out)
{
    for (int64_t i = 0; i < g->n; i++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                unsigned char r = 0;
                for (int64_t ky = 0; ky < g->kh && !r; ky++) {
                    int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                    if (iy < 0 || iy >= g->h) continue;
                    const unsigned char *row = in + (i * g->h + iy) * g->w;
                    for (int64_t kx = 0; kx < g->kw; kx++) {
                        int64_t ix = ox * g->sw - g->pw + kx * g->dw;
                        if (ix >= 0 && ix < g->w) r |= row[ix];
                    }
                }
                out[(i * g->oh + oy) * g->ow + ox] = r;
            }
}

bf_status bf__pos_try(bf__dx *dx, bf_plan *p, int64_t b, size_t i, bf__pos_run *r, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf__step *s = &p->steps[i];
    int x = s->node->in[0];
    bf__conv_geom g;
    int64_t work;   /* the 1x1 product's gather room (floats), 0: none */
    r->on = 0;
    if (dx->param_hit[i] || p->step_hit[i] || s->dyn || x < 0 || dx->state[x] != DIRTY ||
        !bf__conv_pos_ok(s, &g, &work))
        return BF_OK;
    for (int j = 1; j < s->n_in; j++)   /* a weight or bias computed at run time that moved */
        if (s->node->in[j] >= 0 && dx->state[s->node->in[j]] == DIRTY) return BF_OK;
    /* the fused chain (bf__plan_run_fused): its last step writes; a
     * BatchNormalization in it runs as a pass over the whole output, which
     * the op does not run on a list (linalg_conv.c) */
    int bn, add, last = bf__plan_fused_last(p, i, &bn, &add);
    if (bn || (last && (p->step_hit[last] || (add && p->step_hit[add])))) return BF_OK;
    int y = p->steps[last ? (size_t)last : i].node->out[0], res = -1;
    if (y < 0 || y == sh->out_val || !bf__dx_golden(sh, y, b)) return BF_OK;
    if (add) {   /* the Add's other operand: read at each output position alone */
        const bf__step *as = &p->steps[add];
        for (int j = 0; j < as->n_in && j < 2; j++)
            if (as->node->in[j] != s->node->out[0]) res = as->node->in[j];
    }
    int64_t ihw = g.h * g.w, ohw = g.oh * g.ow, all = g.n * ohw;
    if (!bf__grow(&dx->pos.in, &dx->pos.in_cap, (size_t)(g.n * ihw), 1, 0) ||
        !bf__grow(&dx->pos.out, &dx->pos.out_cap, (size_t)all, 1, 0) ||
        !bf__grow(&dx->pos.q, &dx->pos.q_cap, (size_t)all, sizeof(int32_t), 0) ||
        (work && !bf__grow(&dx->pos.work, &dx->pos.work_cap, (size_t)work, sizeof(float), 0)))
        return bf__dx_oom(err);
    memset(dx->pos.in, 0, (size_t)(g.n * ihw));
    /* moved in one channel alone (diffchan.c's dch): the other channels are golden */
    int64_t c0 = dx->dch[x] > 0 ? dx->dch[x] - 1 : 0, c1 = dx->dch[x] > 0 ? c0 + 1 : g.c;
    if (!mark_moved(dx, p, b, x, g.n, g.c, c0, c1, ihw, dx->pos.in)) return BF_OK;
    reach(&g, dx->pos.in, dx->pos.out);
    if (res >= 0 && dx->state[res] == DIRTY &&
        !mark_moved(dx, p, b, res, g.n, g.m, dx->dch[res] > 0 ? dx->dch[res] - 1 : 0,
                    dx->dch[res] > 0 ? dx->dch[res] : g.m, ohw, dx->pos.out))
        return BF_OK;
    int64_t n = 0;
    for (int64_t q = 0; q < all; q++)
        if (dx->pos.out[q]) dx->pos.q[n++] = (int32_t)q;
    if ((double)n > POS_SHARE * (double)all) return BF_OK;
    /* the output's place holds the golden output; the run writes the list */
    bf__dx_own(dx, p, y);
    memcpy(p->vals[y].data, bf__dx_golden(sh, y, b), bf_tensor_nbytes(&p->vals[y]));
    r->slot = (bf__cpos){dx->pos.q, n, 0, work ? dx->pos.work : NULL, work};
    r->all = all;
    r->on = 1, r->add = add, r->last = last;
    p->cpos = &r->slot;
    p->cpos_step = i;
    return BF_OK;
}

void bf__pos_done(bf__dx *dx, bf_plan *p, size_t i, const bf__pos_run *r, const bf__psum_run *pr)
{
    if (!r->on) return;
    p->cpos = NULL;
    if (!r->slot.used) return;   /* the run took another path: every position */
    dx->pos.runs++;
    dx->pos.done += r->slot.n;
    dx->pos.all += r->all;
    /* the work left out: the positions not listed, of what the run (and a
     * resume's share of it, bf__psum_done) counted */
    double skip = pr && pr->on && pr->slot.used ? pr->skip : 0;
    double out = r->all > 0 ? 1 - (double)r->slot.n / (double)r->all : 0;
    dx->work[i] -= out * (1 - skip);
    dx->psum_skip[i] -= out * skip;
    if (r->add && r->add != r->last) dx->work[r->add] -= out;
    if (r->last) dx->work[r->last] -= out;
}

void bf__dx_pos_counts(const bf__dx *dx, int64_t *runs, int64_t *positions, int64_t *of)
{
    *runs = dx->pos.runs, *positions = dx->pos.done, *of = dx->pos.all;
}
