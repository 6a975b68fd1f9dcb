/* Plane-local Resize: a Resize of [N, C, ...] keeping dims 0 and 1 (a
 * segmenter's final upsampling) whose input changed on some planes (n, c)
 * alone recomputes those planes of its output, nothing else.
 *
 * LRASPP's head sums its two classifiers' logits at 1/8 of the image and
 * upsamples the sum 8x to 256x256 (the graph's output, 88 MB for 16
 * images). Most backbone faults that reach the head move the high branch's
 * logits by a few ulps, which the Add with the low branch mostly rounds
 * away: in `make bench-det`'s campaign the trials that reached the output
 * changed 1 to 505 of the Add's 344,064 elements, on 1 to 68 of its 336
 * planes, yet the whole Resize ran (12 ms, a tenth of such a trial), its
 * output was compared with golden whole, and the next trial copied the
 * whole 88 MB back to golden.
 *
 * Exact: output plane (n, c) of such a Resize reads input plane (n, c)
 * alone (bf__resize_planes: one tap at its own index on dims 0 and 1), so a
 * plane whose input plane is golden is golden; a changed one is computed by
 * the run's own row function on its rows (bf__resize_plane_list), the bits
 * the whole step gives it. The output holds golden bits everywhere else:
 * the trial's outputs in place (restored after every trial, the planes
 * written listed so that only they are), or the golden value copied into
 * the step's own buffer. The changed samples are those with a recomputed
 * plane that differs from golden, so the output's compare reads only
 * those planes. Past half the planes, the whole step runs as before. */
#include <string.h>

#include "base/alloc.h"
#include "diff/diff_impl.h"

static int grow(int64_t **v, int64_t *cap, int64_t need)
{
    if (need <= *cap) return 1;
    int64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    int64_t *n = bf__realloc(*v, (size_t)c * sizeof *n);
    if (!n) return 0;
    *v = n;
    *cap = c;
    return 1;
}

void bf__plane_free(bf__dx *dx)
{
    bf__free(dx->plane.pl);
    bf__free(dx->plane.opl);
    bf__free(dx->plane.opl_b);
}

bf_status bf__plane_try(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *horizon, int *done, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf__step *s = &p->steps[i];
    bf__dx_plane *pl = &dx->plane;
    *done = 0;
    if (s->n_out != 1 || dx->param_hit[i] || p->step_hit[i] || !bf__resize_planes(s)) return BF_OK;
    int xv = s->node->in[0], yv = s->node->out[0];
    if (xv < 0 || yv < 0 || dx->state[xv] != DIRTY || dx->dlazy[xv]) return BF_OK;
    for (int j = 1; j < s->n_in; j++)
        if (s->node->in[j] >= 0 && dx->state[s->node->in[j]] == DIRTY) return BF_OK;
    const bf_tensor *x = &p->vals[xv], *y = &p->vals[yv];
    const float *xg = bf__dx_golden(sh, xv, b), *yg = bf__dx_golden(sh, yv, b);
    int64_t c = x->dims[1], planes = x->dims[0] * c;
    if (!xg || !yg || planes <= 0 || y->dims[0] * y->dims[1] != planes) return BF_OK;
    int64_t ip = bf_tensor_numel(x) / planes, op = bf_tensor_numel(y) / planes, n = 0;
    if (!grow(&pl->pl, &pl->pl_cap, planes)) return bf__dx_oom(err);
    const float *xd = x->data;
    for (int64_t k = 0; k < planes; k++)
        if (memcmp(xd + k * ip, xg + k * ip, (size_t)ip * sizeof *xd) != 0) pl->pl[n++] = k;
    if (2 * n > planes) return BF_OK;   /* most of it: the whole step, as before */
    for (int j = 1; j < s->n_in; j++) {
        bf_status st = bf__runtime(p, s->node->in[j]) ? bf__dx_fetch(dx, p, b, s->node->in[j], err) : BF_OK;
        if (st != BF_OK) return st;
    }
    /* the trial's outputs of batch b hold golden bits until written (the
     * last trial's planes restored by bf__dx_run) */
    int here = yv == sh->out_val && dx->out_here;
    bf__dx_own(dx, p, yv);
    here = here && p->vals[yv].data == dx->out_here;
    float *yd = p->vals[yv].data;
    if (!here) memcpy(yd, yg, bf_tensor_nbytes(y));
    else if (!pl->opl_b && !(pl->opl_b = bf__calloc((size_t)sh->n_batches + 1, 1))) return bf__dx_oom(err);
    if (here && !grow(&pl->opl, &pl->opl_cap, pl->n_opl + n)) return bf__dx_oom(err);
    bf__resize_plane_list(s, pl->pl, n, p->scratch);
    int64_t moved = 0, last = -1;
    if (here) dx->n_orow = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t at = pl->pl[k] * op;
        if (here) pl->opl[pl->n_opl++] = (int64_t)(yd - dx->out) + at;
        if (memcmp(yd + at, yg + at, (size_t)op * sizeof *yd) == 0) continue;
        moved++;
        if (here && pl->pl[k] / c != last) dx->orow[dx->n_orow++] = last = pl->pl[k] / c;
    }
    if (here) {
        pl->opl_len = op;
        pl->opl_b[b] = 1;
        dx->orow_ok = 1;   /* the changed samples, ascending: out_end reads them */
    }
    dx->work[i] += (double)n / (double)planes;
    pl->n_steps++;
    pl->n_planes += n;
    dx->state[yv] = moved ? DIRTY : GOLDEN;
    dx->dch[yv] = 0;
    if (moved && sh->last_use[yv] > *horizon) *horizon = sh->last_use[yv];
    *done = PLANE_DONE;
    return BF_OK;
}

/* Batch b's output planes written by the Resize above back to golden, and
 * 1; 0 if b's output was not written so alone. */
static int plane_restore(bf__dx *dx, int64_t b)
{
    bf__dx_plane *pl = &dx->plane;
    if (!pl->opl_b || !pl->opl_b[b]) return 0;
    const bf__dx_shared *sh = dx->sh;
    int64_t lo = b * sh->batch * sh->out_cols, hi = lo + sh->batch * sh->out_cols;
    size_t len = (size_t)pl->opl_len * sizeof(float);
    pl->opl_b[b] = 0;
    for (int64_t k = 0; k < pl->n_opl; k++)
        if (pl->opl[k] >= lo && pl->opl[k] < hi) memcpy(dx->out + pl->opl[k], sh->golden + pl->opl[k], len);
    return 1;
}

void bf__out_restore(bf__dx *dx)
{
    const bf__dx_shared *sh = dx->sh;
    for (int64_t t = 0; t < dx->n_touched; t++) {
        int64_t b = dx->touched[t], rows = b == sh->n_batches - 1 ? sh->samples - b * sh->batch : sh->batch;
        if (plane_restore(dx, b)) continue;
        size_t off = (size_t)(b * sh->batch * sh->out_cols);
        memcpy(dx->out + off, sh->golden + off, (size_t)(rows * sh->out_cols) * sizeof(float));
    }
    dx->plane.n_opl = 0;
}

int64_t bf__dx_plane_steps(const bf__dx *dx, int64_t *planes)
{
    *planes = dx->plane.n_planes;
    return dx->plane.n_steps;
}
