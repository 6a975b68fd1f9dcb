/* The partial-sum resume (docs/ENGINE.md, step 4, "The partial-sum
 * resume"): a Conv re-run because its input moved in one channel c alone
 * starts at the chunk of K that holds c, from the sums the golden pass
 * left after the chunks before it.
 *
 * Why it is exact: linalg_conv_bcast.c computes each output as one chain
 * over K (s = +0, then s = fma(w, x, s) term by term in bf__conv_krow's
 * order), cut into chunks of whole 16-channel blocks whose sums it stores
 * to memory and loads back between chunks (a float stored and loaded is
 * the same float). The terms of the chunks before c's read input channels
 * below c's chunk, which are the golden ones, and golden weights (the
 * Conv's own weights and bias carry no fault here: try_conv takes those).
 * So the sums after them are the golden pass's, bit for bit, and the
 * chunks from c's on, run on the trial's input, finish the same chains
 * the whole run would.
 *
 * Which Convs: those whose whole runs take the bcast path with more than
 * one chunk (bf__conv_psum_of) and whose data input a drawn fault can move
 * in one channel alone: a fault in a Conv's weight or bias, or in a
 * BatchNormalization's parameters, or a value fault, through the steps
 * that keep a change in its channel (bf__chan_local_step). The golden pass
 * saves their checkpoints while the budget left by the cache allows
 * (--cache-budget counts both); nothing is saved without drawn roots (BER,
 * profiled maps, adaptive sampling: faults everywhere). */
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "diff/diff_impl.h"

struct bf__psum_store {
    size_t n_steps;
    int64_t n_batches;
    float **blk;              /* per step: NULL, or n_batches blocks of per[i] floats */
    size_t *per;              /* per step: a full batch's checkpoints, floats */
    int64_t *chan;            /* per step: input channels a chunk */
    size_t *slab;             /* per step: floats a checkpoint (per / slab: chunks - 1) */
    atomic_uchar *ok;         /* [step][batch]: the golden pass saved them (its run took the path) */
    unsigned char **keep;     /* per step: NULL (every checkpoint), or per checkpoint k, 1: saved */
    size_t bytes;
    int convs;
};

void bf__psum_free(bf__psum_store *ps)
{
    if (!ps) return;
    for (size_t i = 0; ps->blk && i < ps->n_steps; i++) bf__free(ps->blk[i]);
    for (size_t i = 0; ps->keep && i < ps->n_steps; i++) bf__free(ps->keep[i]);
    bf__free(ps->keep);
    bf__free(ps->blk);
    bf__free(ps->per);
    bf__free(ps->chan);
    bf__free(ps->slab);
    bf__free((void *)ps->ok);
    bf__free(ps);
}

/* one[v]: value v may differ from golden in one channel alone in a drawn
 * trial; so are the outputs of a step reading a faulty parameter that
 * moves one channel (a Conv's weight or bias, a BatchNormalization's) or
 * a channel-local step reading such a value. A Conv reading one as its
 * data input is a candidate. */
static void candidates(const bf_plan *p, const unsigned char *roots, unsigned char *one, unsigned char *cand)
{
    const bf_model *m = p->model;
    for (size_t v = 0; v < m->n_values; v++) one[v] = roots[v] && m->values[v].kind != BF__VAL_PARAM;
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int moved = 0, root = 0;
        for (int j = 0; j < s->n_in; j++) {
            int v = s->node->in[j];
            if (v < 0) continue;
            if (m->values[v].kind == BF__VAL_PARAM) root |= roots[v];
            else moved |= one[v];
        }
        int64_t ch;
        if (moved && s->node->in[0] >= 0 && one[s->node->in[0]] && bf__conv_psum_of(s, &ch)) cand[i] = 1;
        int local = bf__chan_local_step(s);
        int keeps = (root && (bf__conv_step(s) || bf__bnorm_of(s, NULL))) || (moved && local);
        if (keeps && s->n_out >= 1 && s->node->out[0] >= 0) one[s->node->out[0]] = 1;
    }
}

/* Whether channel-local step s keeps a change's channel index (a Concat
 * moves it by the inputs before; a grouped Conv of several outputs a
 * group spreads it): where it does not, the chunk a fault's channel falls
 * in is not known before the pass. */
static int keeps_index(const bf__step *s)
{
    if (bf__conv_step(s)) return 0;   /* a depthwise Conv's multiplier: not looked into */
    return !(s->node->op && strcmp(s->node->op->name, "Concat") == 0);
}

/* Of the candidates ps chose, the checkpoints trials with faults in root
 * r resume from: for each fault channel c of r that reaches step i's
 * input in that same channel, the one after the chunk before c's (none
 * for c in the first chunk); every checkpoint of a Conv r reaches another
 * way (a channel not known here). one, idx: scratch per value. */
static void keep_root(bf__psum_store *ps, const bf_plan *p, int r, const bf__root_chans *rc, unsigned char *one,
                      unsigned char *idx)
{
    const bf_model *m = p->model;
    int param = m->values[r].kind == BF__VAL_PARAM, listed = 0;
    for (size_t k = 0; param && k < rc->n; k++) listed |= rc->val[k] == r;
    memset(one, 0, m->n_values);
    memset(idx, 0, m->n_values);
    if (!param) one[r] = 1;   /* an activation's fault: its channel not listed */
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int moved = 0, exact = 1, root = 0;
        for (int j = 0; j < s->n_in; j++) {
            int v = s->node->in[j];
            if (v < 0) continue;
            if (v == r && param) root = 1;
            else if (one[v]) moved = 1, exact &= idx[v];
        }
        int x = s->node->in[0];
        if (moved && x >= 0 && one[x] && ps->keep[i]) {
            int64_t chunks = (int64_t)(ps->per[i] / ps->slab[i]) + 1;
            for (int64_t k = 0; k < chunks - 1; k++) ps->keep[i][k] |= !idx[x];
            for (size_t f = 0; idx[x] && f < rc->n; f++) {
                int64_t q = rc->val[f] == r ? rc->chan[f] / ps->chan[i] : 0;
                if (q >= 1 && q < chunks) ps->keep[i][q - 1] = 1;
            }
        }
        int keeps = (root && (bf__conv_step(s) || bf__bnorm_of(s, NULL))) || (moved && bf__chan_local_step(s));
        if (keeps && s->n_out >= 1 && s->node->out[0] >= 0) {
            one[s->node->out[0]] = 1;
            idx[s->node->out[0]] = root ? listed : exact && keeps_index(s);
        }
    }
}

bf_status bf__psum_choose(const bf_plan *p, const unsigned char *roots, const bf__root_chans *rc, int64_t n_batches,
                          bf__psum_store **out, bf_error *err)
{
    const bf_model *m = p->model;
    *out = NULL;
    if (!roots) return BF_OK;
    bf__psum_store *ps = bf__calloc(1, sizeof *ps);
    unsigned char *one = bf__calloc(m->n_values + 1, 1), *cand = bf__calloc(p->n_steps + 1, 1);
    unsigned char *idx = bf__calloc(m->n_values + 1, 1);
    if (ps) {
        ps->n_steps = p->n_steps, ps->n_batches = n_batches;
        ps->blk = bf__calloc(p->n_steps + 1, sizeof *ps->blk);
        ps->per = bf__calloc(p->n_steps + 1, sizeof *ps->per);
        ps->chan = bf__calloc(p->n_steps + 1, sizeof *ps->chan);
        ps->slab = bf__calloc(p->n_steps + 1, sizeof *ps->slab);
        ps->ok = bf__calloc(p->n_steps * (size_t)n_batches + 1, sizeof *ps->ok);
        ps->keep = bf__calloc(p->n_steps + 1, sizeof *ps->keep);
    }
    bf_status st = BF_OK;
    if (!ps || !one || !cand || !idx || !ps->blk || !ps->per || !ps->chan || !ps->slab || !ps->ok || !ps->keep) {
        st = bf__dx_oom(err);
        goto out;
    }
    candidates(p, roots, one, cand);
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf_tensor *x = p->steps[i].in[0];
        if (!cand[i] || !(ps->per[i] = bf__conv_psum_of(&p->steps[i], &ps->chan[i]))) continue;
        int64_t chunks = (x->dims[1] + ps->chan[i] - 1) / ps->chan[i];
        ps->slab[i] = chunks > 1 ? ps->per[i] / (size_t)(chunks - 1) : 0;
        if (!ps->slab[i]) ps->per[i] = 0;
        if (rc && ps->per[i] && !(ps->keep[i] = bf__calloc((size_t)chunks, 1))) {
            st = bf__dx_oom(err);
            goto out;
        }
    }
    /* with the faults' channels: each root's, then a Conv none of them
     * needs a checkpoint of takes no bytes at all */
    for (size_t v = 0; rc && v < m->n_values; v++)
        if (roots[v]) keep_root(ps, p, (int)v, rc, one, idx);
    for (size_t i = 0; rc && i < p->n_steps; i++) {
        int any = 0;
        for (size_t k = 0; ps->keep[i] && k + 1 < ps->per[i] / ps->slab[i] + 1; k++) any |= ps->keep[i][k];
        if (ps->keep[i] && !any) ps->per[i] = 0;
    }
out:
    bf__free(one);
    bf__free(idx);
    bf__free(cand);
    if (st != BF_OK) {
        bf__psum_free(ps);
        return st;
    }
    *out = ps;
    return BF_OK;
}

/* The checkpoints of the candidates, in step order, while their bytes
 * fit in `room` (what --cache-budget leaves after the cache): not zeroed,
 * the golden pass writes each block whole (the checkpoints it keeps) or
 * marks it not saved. The bytes counted are those written. */
size_t bf__psum_alloc(bf__psum_store *ps, size_t room, unsigned pages)
{
    for (size_t i = 0; ps && i < ps->n_steps; i++) {
        size_t bytes = ps->per[i] * sizeof(float) * (size_t)ps->n_batches, kept = bytes;
        if (ps->per[i] && ps->keep[i]) {   /* the checkpoints not kept are never written: no pages */
            size_t n = ps->per[i] / ps->slab[i], k = 0;
            for (size_t q = 0; q < n; q++) k += ps->keep[i][q] != 0;
            kept = bytes / n * k;
        }
        if (!ps->per[i] || kept > room - ps->bytes || ps->bytes > room) continue;
        /* written once by the golden pass, as the cache's blocks (gcache.c),
         * in their pages when every checkpoint of the block is kept (a 2 MiB
         * page would fault in the ones never written too) */
        unsigned how = BF__WRITE_ONCE | (kept == bytes ? pages : 0);
        if (!(ps->blk[i] = bf__alloc_written(bytes, how))) continue;   /* no room: the trials run it whole */
        ps->bytes += kept;
        ps->convs++;
    }
    return ps ? ps->bytes : 0;
}

size_t bf__psum_bytes(const bf__psum_store *ps, int *convs)
{
    if (convs) *convs = ps ? ps->convs : 0;
    return ps ? ps->bytes : 0;
}

int bf__psum_golden_begin(bf__psum_store *ps, bf_plan *p, size_t i, int64_t b, bf__psum *slot)
{
    if (!ps || i >= ps->n_steps || !ps->blk[i]) return 0;
    *slot = (bf__psum){.save = ps->blk[i] + (size_t)b * ps->per[i], .keep = ps->keep[i]};
    p->psum = slot;
    p->psum_step = i;
    return 1;
}

void bf__psum_golden_end(bf__psum_store *ps, bf_plan *p, size_t i, int64_t b, const bf__psum *slot)
{
    p->psum = NULL;
    if (slot->used) atomic_store(&ps->ok[i * (size_t)ps->n_batches + (size_t)b], 1);
}

int64_t bf__psum_resume_begin(const bf__psum_store *ps, bf_plan *p, size_t i, int64_t b, int64_t c, bf__psum *slot,
                              double *skip)
{
    if (!ps || i >= ps->n_steps || !ps->blk[i] || c < 0 ||
        !atomic_load(&ps->ok[i * (size_t)ps->n_batches + (size_t)b]))
        return 0;
    int64_t first = c / ps->chan[i], chunks = ps->per[i] / ps->slab[i] + 1;
    if (first < 1 || first >= chunks) return 0;    /* c in the first chunk: nothing to skip */
    if (ps->keep[i] && !ps->keep[i][first - 1]) return 0;   /* not saved: no drawn fault resumes there */
    *slot = (bf__psum){.load = ps->blk[i] + (size_t)b * ps->per[i], .first = first};
    p->psum = slot;
    p->psum_step = i;
    *skip = (double)(first * ps->chan[i]) / (double)p->steps[i].in[0]->dims[1];
    return first;
}

void bf__psum_try(bf__dx *dx, bf_plan *p, int64_t b, size_t i, bf__psum_run *r)
{
    const bf__step *s = &p->steps[i];
    int x = s->node->in[0];
    r->on = 0;
    if (!dx->sh->ps || dx->param_hit[i] || s->dyn || x < 0 || dx->state[x] != DIRTY || dx->dch[x] <= 0 ||
        !bf__conv_step(s))
        return;
    /* the sums read x and the weights alone: the bias, the fused chain's
     * other operands only come in the epilogue, but any other input that
     * moved (a weight computed at run time) rules it out */
    for (int j = 1; j < s->n_in; j++)
        if (s->node->in[j] >= 0 && dx->state[s->node->in[j]] == DIRTY) return;
    r->on = bf__psum_resume_begin(dx->sh->ps, p, i, b, dx->dch[x] - 1, &r->slot, &r->skip) > 0;
}

void bf__psum_done(bf__dx *dx, bf_plan *p, size_t i, const bf__psum_run *r)
{
    if (!r->on) return;
    p->psum = NULL;
    if (!r->slot.used) return;   /* the run took another path: in full */
    dx->n_psum++;
    dx->work[i] -= r->skip;
    dx->psum_skip[i] += r->skip;
}

float *bf__psum_saved(const bf__psum_store *ps, size_t i, int64_t b, int64_t *n, size_t *slab)
{
    if (!ps || i >= ps->n_steps || b < 0 || b >= ps->n_batches || !ps->blk[i] ||
        !atomic_load(&ps->ok[i * (size_t)ps->n_batches + (size_t)b]))
        return NULL;
    *n = (int64_t)(ps->per[i] / ps->slab[i]);
    *slab = ps->slab[i];
    return ps->blk[i] + (size_t)b * ps->per[i];
}

int64_t bf__dx_psum_resumed(const bf__dx *dx) { return dx->n_psum; }
const double *bf__dx_psum_skipped(const bf__dx *dx) { return dx->psum_skip; }
