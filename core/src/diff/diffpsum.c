/* The partial-sum resume (docs/ENGINE.md, step 4, "The partial-sum
 * resume"): a Conv re-run because its input moved in one channel c alone
 * starts at the last checkpoint at or before c's block of 16 channels,
 * from the sums the golden pass left there.
 *
 * Why it is exact: linalg_conv_bcast.c computes each output as one chain
 * over K (s = +0, then s = fma(w, x, s) term by term in bf__conv_krow's
 * order, which takes the 16-channel blocks one after the other), cut into
 * chunks of whole blocks whose sums it stores to memory and loads back
 * between chunks, and cut again where a checkpoint falls inside a chunk (a
 * float stored and loaded is the same float). The terms before a
 * checkpoint at channel a <= c read input channels below a, which are the
 * golden ones, and golden weights (the Conv's own weights and bias carry
 * no fault here: try_conv takes those). So the sums there are the golden
 * pass's, bit for bit, and the blocks from a on, run on the trial's input,
 * finish the same chains the whole run would.
 *
 * Where the checkpoints are: with the drawn faults' channels, one in each
 * chunk of K but the first that holds a drawn channel, at the block of the
 * lowest such channel (so every drawn channel of the chunk resumes there,
 * and as many checkpoints as the chunks' boundaries gave before: their
 * bytes are what the pass writes fresh, docs/perf/trials/resnet18.md);
 * where a channel is not known before the pass (an activation's fault),
 * at every chunk's start but the first's.
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
    size_t *per;              /* per step: a full batch's checkpoints, floats (n_ck x slab) */
    size_t *slab;             /* per step: floats a checkpoint */
    int64_t *block, *chunk;   /* per step: input channels a block, a chunk of K */
    int64_t *chans;           /* per step: its input's channels */
    int64_t **at;             /* per step: checkpoint k holds the sums of the channels before at[k] */
    int64_t *n_ck;            /* per step: the checkpoints */
    atomic_uchar *ok;         /* [step][batch]: the golden pass saved them (its run took the path) */
    size_t bytes;
    int convs;
};

void bf__psum_free(bf__psum_store *ps)
{
    if (!ps) return;
    for (size_t i = 0; ps->blk && i < ps->n_steps; i++) bf__free(ps->blk[i]);
    for (size_t i = 0; ps->at && i < ps->n_steps; i++) bf__free(ps->at[i]);
    bf__free(ps->at);
    bf__free(ps->blk);
    bf__free(ps->per);
    bf__free(ps->slab);
    bf__free(ps->block);
    bf__free(ps->chunk);
    bf__free(ps->chans);
    bf__free(ps->n_ck);
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
        int64_t blk, ch;
        if (moved && s->node->in[0] >= 0 && one[s->node->in[0]] && bf__conv_psum_of(s, &blk, &ch)) cand[i] = 1;
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

/* a checkpoint of step i asked for at input channel c's block, in the
 * slot of c's chunk (at[i][q] while choosing: 0, none, or the lowest
 * asked for); none in the first chunk, so no more checkpoints, and no
 * more bytes, than one a chunk boundary as before (docs/perf/trials/
 * resnet18.md, h37-psum: those in the first chunk cost more fresh bytes
 * than their work saves on a host whose fresh pages are dear) */
static void ask(bf__psum_store *ps, size_t i, int64_t c)
{
    int64_t pos = c / ps->block[i] * ps->block[i], q = c / ps->chunk[i];
    if (c < 0 || c >= ps->chans[i] || q < 1) return;
    if (!ps->at[i][q] || pos < ps->at[i][q]) ps->at[i][q] = pos;
}

/* Of the candidates ps chose, the checkpoints trials with faults in root
 * r resume from: for each fault channel c of r that reaches step i's
 * input in that same channel, one at c's block in c's chunk; one at every
 * chunk's start of a Conv r reaches another way (a channel not known
 * here). one, idx: scratch per value. */
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
        if (moved && x >= 0 && one[x] && ps->at[i]) {
            for (int64_t c = ps->chunk[i]; !idx[x] && c < ps->chans[i]; c += ps->chunk[i]) ask(ps, i, c);
            for (size_t f = 0; idx[x] && f < rc->n; f++)
                if (rc->val[f] == r) ask(ps, i, rc->chan[f]);
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
        ps->slab = bf__calloc(p->n_steps + 1, sizeof *ps->slab);
        ps->block = bf__calloc(p->n_steps + 1, sizeof *ps->block);
        ps->chunk = bf__calloc(p->n_steps + 1, sizeof *ps->chunk);
        ps->chans = bf__calloc(p->n_steps + 1, sizeof *ps->chans);
        ps->n_ck = bf__calloc(p->n_steps + 1, sizeof *ps->n_ck);
        ps->ok = bf__calloc(p->n_steps * (size_t)n_batches + 1, sizeof *ps->ok);
        ps->at = bf__calloc(p->n_steps + 1, sizeof *ps->at);
    }
    bf_status st = BF_OK;
    if (!ps || !one || !cand || !idx || !ps->blk || !ps->per || !ps->slab || !ps->block || !ps->chunk || !ps->chans ||
        !ps->n_ck || !ps->ok || !ps->at) {
        st = bf__dx_oom(err);
        goto out;
    }
    candidates(p, roots, one, cand);
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf_tensor *x = p->steps[i].in[0];
        if (!cand[i] || !(ps->slab[i] = bf__conv_psum_of(&p->steps[i], &ps->block[i], &ps->chunk[i]))) continue;
        ps->chans[i] = x->dims[1];
        int64_t chunks = (x->dims[1] + ps->chunk[i] - 1) / ps->chunk[i];
        if (!(ps->at[i] = bf__calloc((size_t)chunks + 1, sizeof *ps->at[i]))) {
            st = bf__dx_oom(err);
            goto out;
        }
        /* without the faults' channels: every chunk's start */
        for (int64_t c = ps->chunk[i]; !rc && c < ps->chans[i]; c += ps->chunk[i]) ask(ps, i, c);
    }
    /* with them: each root's, then a Conv none of them needs a checkpoint
     * of takes no bytes at all */
    for (size_t v = 0; rc && v < m->n_values; v++)
        if (roots[v]) keep_root(ps, p, (int)v, rc, one, idx);
    for (size_t i = 0; i < p->n_steps; i++) {
        int64_t n = 0, chunks = ps->at[i] ? (ps->chans[i] + ps->chunk[i] - 1) / ps->chunk[i] : 0;
        for (int64_t q = 0; q < chunks; q++)   /* the slots asked for, in order: increasing */
            if (ps->at[i][q]) ps->at[i][n++] = ps->at[i][q];
        ps->n_ck[i] = n;
        ps->per[i] = (size_t)n * ps->slab[i];
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
        size_t bytes = ps->per[i] * sizeof(float) * (size_t)ps->n_batches;
        if (!ps->per[i] || bytes > room - ps->bytes || ps->bytes > room) continue;
        /* written once and whole by the golden pass (only the checkpoints
         * kept have places), as the cache's blocks (gcache.c), in their pages */
        if (!(ps->blk[i] = bf__alloc_written(bytes, BF__WRITE_ONCE | pages))) continue;   /* no room: the trials run it whole */
        ps->bytes += bytes;
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
    *slot = (bf__psum){.save = ps->blk[i] + (size_t)b * ps->per[i], .at = ps->at[i], .n = ps->n_ck[i]};
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
    int64_t k = -1;   /* the last checkpoint at or before c: its channels all golden */
    while (k + 1 < ps->n_ck[i] && ps->at[i][k + 1] <= c) k++;
    if (k < 0) return 0;   /* none: c before every one (in the first block, or no drawn fault's there) */
    *slot = (bf__psum){.load = ps->blk[i] + (size_t)b * ps->per[i], .lk = k, .from = ps->at[i][k]};
    p->psum = slot;
    p->psum_step = i;
    *skip = (double)ps->at[i][k] / (double)p->steps[i].in[0]->dims[1];
    return ps->at[i][k];
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
    *n = ps->n_ck[i];
    *slab = ps->slab[i];
    return ps->blk[i] + (size_t)b * ps->per[i];
}

int64_t bf__dx_psum_resumed(const bf__dx *dx) { return dx->n_psum; }
const double *bf__dx_psum_skipped(const bf__dx *dx) { return dx->psum_skip; }
