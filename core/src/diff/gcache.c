/* The golden-activation cache: every value a trial may need to read back,
 * computed once per campaign.
 *
 * A trial re-executes only the steps downstream of its faults; every other
 * input those steps read, and every output they are compared against, is a
 * golden value of the same batch. Keeping them all would cost the sum of
 * every activation over the eval set, so the cache holds what fits in its
 * budget and the executor recomputes the rest from the nearest cached
 * ancestor (diffexec.c): slower, never different.
 *
 * Filling it costs more than the pass's arithmetic on a network with large
 * activations and little work per byte (mobilenet_v2: about 0.5 s of system
 * time per GiB first touched on this project's VM, a quarter of a pass per
 * 512 MiB), so the pass touches no page it does not have to: the values it
 * keeps are written straight into their slots, and the others share a
 * small pool of places by lifetime (as a plan for whole passes does) instead
 * of each touching its own buffer in the plan, which no trial reads (a
 * trial recomputes into it what the cache left out). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "diff/diff.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"

#define DERIV_IN 3                /* Clip: the value, its min and its max */
#define DERIV_CONST_BYTES 16      /* a bound is a scalar */

/* How a derived value is computed from the stored one: its step, with
 * the shapes, parsed parameters and constant inputs of the plans for a
 * full batch [0] and the last, partial one [1], copied when the cache is
 * built (the plans' values are repointed by the workers that run them). */
typedef struct deriv {
    const bf__node *node;
    int n_in;
    bf_tensor in[2][DERIV_IN], out[2];
    alignas(16) unsigned char params[2][BF__OP_PARAMS_MAX];
    unsigned char konst[2][DERIV_IN][DERIV_CONST_BYTES];
    atomic_uchar *ready;      /* per batch: DV_NONE, DV_BUSY (a thread computes it), DV_READY */
} deriv;

/* A derived block's state: each (value, batch) computed by the first
 * thread to claim it, the others that want that very block waiting for it;
 * blocks of other values or batches are computed in parallel (one mutex
 * for every derivation made two threads' trials queue behind each other's
 * Relu/Clip blocks). */
enum { DV_NONE, DV_BUSY, DV_READY };

struct bf__gcache {
    int64_t samples, batch, n_batches;
    size_t n_values;
    unsigned char **blk;      /* per value: NULL, or its blocks, batch b at b * full[v] */
    size_t *full;             /* bytes of value v in a full batch */
    int *src;                 /* per value: the stored value a derived one is computed from; -1: none */
    deriv **dv;               /* per derived value: how */
    int64_t alias;            /* the graph's output when its blocks are the campaign's golden outputs
                               * (golden_out: bf__gcache_build), not the cache's own; -1 */
    size_t bytes;             /* stored by the golden pass */
    size_t served;            /* stored and derived: what the budget counts */
    atomic_size_t *derived;   /* bytes of derived blocks computed so far */
    unsigned char *planned;   /* per value: held were every value wanted (NULL: want was NULL) */
    double *step_s;           /* per plan step: seconds a full batch took, averaged over the pass */
    size_t n_steps;
    int64_t n_pairs;          /* 1x1 -> depthwise pairs the pass ran together (pass_pairs) */
    unsigned pages;           /* the stored blocks' pages beside BF__WRITE_ONCE (bf__gcache_build) */
    bf__gpools *pools;        /* the pass's pools, kept for the workers' places (gpool.c) */
};

void bf__gcache_free(bf__gcache *gc)
{
    if (!gc) return;
    for (size_t v = 0; gc->blk && v < gc->n_values; v++)
        if ((int64_t)v != gc->alias) bf__free(gc->blk[v]);
    for (size_t v = 0; gc->dv && v < gc->n_values; v++)
        if (gc->dv[v]) {
            bf__free((void *)gc->dv[v]->ready);
            bf__free(gc->dv[v]);
        }
    bf__free((void *)gc->derived);
    bf__free(gc->planned);
    bf__free(gc->dv);
    bf__free(gc->src);
    bf__free(gc->blk);
    bf__free(gc->full);
    bf__free(gc->step_s);
    bf__gpools_free(gc->pools);
    bf__free(gc);
}

/* The output of a Relu or Clip step whose input the cache stores, and
 * whose other inputs (Clip's bounds) are small constants: the cache need
 * not store it, only the step to compute it again, exactly, from the
 * stored input (steps are deterministic; the pass applies no fault). Its
 * snapshot in *d (d->ready not set); 0: not such a value. */
static int derivable(const bf__gcache *gc, bf_plan *const plans[2], size_t v, deriv *d)
{
    const bf_plan *p0 = plans[0];
    int i = p0->val_step[v];
    if (i < 0) return 0;
    const bf__step *s0 = &p0->steps[i];
    const char *op = s0->node->op->name;
    if ((strcmp(op, "Relu") != 0 && strcmp(op, "Clip") != 0) || s0->n_out != 1 || s0->n_in < 1 ||
        s0->n_in > DERIV_IN || s0->node->out[0] != (int)v)
        return 0;
    int x = s0->node->in[0];
    if (x < 0 || p0->val_step[x] < 0 || !gc->blk[x] || gc->src[x] >= 0) return 0;
    memset(d, 0, sizeof *d);
    d->node = s0->node;
    d->n_in = s0->n_in;
    for (int t = 0; t < 2; t++) {
        const bf_plan *p = plans[t];
        if (!p) continue;
        int it = p->val_step[v];
        if (it < 0 || p->steps[it].node != s0->node || p->step_hit[it]) return 0;
        const bf__step *s = &p->steps[it];
        d->in[t][0] = p->vals[x];
        d->out[t] = p->vals[v];
        memcpy(d->params[t], s->params, BF__OP_PARAMS_MAX);
        for (int j = 1; j < s->n_in; j++) {
            int k = s->node->in[j];
            if (k < 0) continue;   /* omitted: a NULL input */
            const bf_tensor *kt = &p->vals[k];
            if (!p->known[k] || p->model->values[k].kind == BF__VAL_PARAM || !kt->data ||
                bf_tensor_nbytes(kt) > DERIV_CONST_BYTES)
                return 0;
            d->in[t][j] = *kt;
            memcpy(d->konst[t][j], kt->data, bf_tensor_nbytes(kt));
            d->in[t][j].data = d->konst[t][j];
        }
    }
    return 1;
}

/* Computes block b of derived value v; 0 on failure (none is known: Relu
 * and Clip check nothing at run time). */
static int derive(const bf__gcache *gc, size_t v, int64_t b)
{
    const deriv *d = gc->dv[v];
    int t = b >= gc->samples / gc->batch;
    bf_tensor in[DERIV_IN], out = d->out[t];
    const bf_tensor *ins[DERIV_IN] = {0};
    bf_tensor *outs[1] = {&out};
    for (int j = 0; j < d->n_in; j++) {
        in[j] = d->in[t][j];
        if (j == 0 || d->node->in[j] >= 0) ins[j] = &in[j];
    }
    in[0].data = gc->blk[gc->src[v]] + (size_t)b * gc->full[gc->src[v]];
    out.data = gc->blk[v] + (size_t)b * gc->full[v];
    /* written whole now, as the pass's blocks are: a fault per page cost
     * about half of deriving a Clip block */
    bf__pages_written(out.data, bf_tensor_nbytes(&out), BF__WRITE_NOW);
    bf__ctx c = {.node = d->node, .params = d->params[t], .n_in = d->n_in, .n_out = 1, .in = ins, .out = outs};
    bf_error e;
    return d->node->op->run(&c, &e) == BF_OK;
}

typedef struct cand {
    size_t v, bytes;
    int must, wanted;
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->must != y->must) return y->must - x->must;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One thread of the pass: its own plans (the campaign's evaluators keep one
 * per worker), its batches taken in turn from a shared counter, its step
 * times apart (summed once every thread is done). */
typedef struct filler {
    bf__gcache *gc;
    bf_plan *full, *rest;
    const bf_tensor *const *feeds;
    const float *golden;
    float *golden_out;
    const bf__pvals *pv;
    bf__psum_store *ps;       /* the partial-sum checkpoints, saved on the way (NULL: none) */
    atomic_llong *next;
    atomic_int *failed;
    double *step_s;           /* n_steps: this thread's sums */
    void **home[2];           /* per value: the plan's own buffer, given back at the end */
    int own_pairs[2];         /* per plan: its pwdw set by pass_pairs, taken off after the pass */
    float *pair_buf;          /* the pairs' block of channels (NULL: the pass runs no pair) */
    size_t pair_floats;
    int64_t n_pairs;
    int64_t bad_batch;        /* the batch that failed; -1: none */
    bf_status st;
    bf_error err;
    pthread_t tid;
    int started;
} filler;

/* Conv step i's fused chain (its activation, residual Add or BN computed in
 * its epilogue: exec/plan.c, bf__plan_run_fused): the last step's index
 * (0: the plan does not fuse step i now), and in v the values the fused run
 * leaves unwritten: the Conv's own output, and a BatchNormalization's or
 * residual Add's before the chain's last step (-1: none). fused_away and
 * fusable_here both ask this, so what the cache leaves out and what the
 * golden pass may run fused cannot drift apart. */
static int chain_mids(const bf_plan *p, size_t i, int v[3], int *bn_or_add)
{
    int a, n, r = bf__plan_fused_last(p, i, &n, &a);
    if (!r || p->steps[i].n_out != 1) return 0;
    v[0] = p->steps[i].node->out[0];
    v[1] = n && n != r ? p->steps[n].node->out[0] : -1;
    v[2] = a && a != r ? p->steps[a].node->out[0] : -1;
    *bn_or_add = n || a;
    return r;
}

/* The values chain_mids names, for a Conv chain with a BatchNormalization
 * or an Add in it, when no fault lands on its last step: the cache does not
 * keep them. A Conv and its activation alone keep the Conv's output, the
 * activation derived from it (derivable): chain mode (diffchain_setup.c)
 * starts a chain at a Conv whose output the cache holds, and a Relu's input
 * is what its rounding reads. A MatMul's bias chain (plan_fuse.c) keeps its
 * product's output, which row mode (diffrows.c) re-runs rows of. */
static int fused_away(const bf_plan *p, size_t i, int v[3], int with_act)
{
    int mid, r;
    if (!bf__conv_step(&p->steps[i]) || !(r = chain_mids(p, i, v, &mid))) return 0;
    return (mid || with_act) && !p->step_hit[r] ? r : 0;
}

/* Conv step i's fused chain's last step when the cache holds none of the
 * values the chain fuses away, so that running it fused leaves every slot as
 * the steps one by one would; else 0. Those values are the ones
 * choose_values leaves out (fused_away: a chain with a BatchNormalization or
 * residual Add, whose trials recompute a channel through it) and the ones
 * too large for the budget (mobilenet_v2's 112x112 and 56x56 Conv outputs at
 * 1 GiB), whose activations run alone cost a read and a write of every
 * element over memory: 17% of a pass at batch 8 (docs/BENCHMARKS.md,
 * "mobilenet_v2's pass against ONNX Runtime's, kind by kind"). A value the
 * cache stores is still written whole: a trial's channel update and its
 * unfused re-runs read it. */
static int fusable_here(const bf__gcache *gc, const bf_plan *p, size_t i)
{
    int v[3], mid, r = chain_mids(p, i, v, &mid);
    if (!r || v[0] < 0 || gc->blk[v[0]]) return 0;
    for (int k = 1; k < 3; k++)
        if (v[k] >= 0 && gc->blk[v[k]]) return 0;
    return r;
}

/* The values step `last` writes that the cache keeps, pointed at their
 * slots of batch b (written whole by the step: their pages in one call) */
static void point_slots(bf__gcache *gc, bf_plan *p, const bf__step *last, int64_t b)
{
    for (int j = 0; j < last->n_out; j++) {
        int v = last->node->out[j];
        if (v >= 0 && gc->blk[v] && gc->src[v] < 0) {
            p->vals[v].data = gc->blk[v] + (size_t)b * gc->full[v];
            bf__pages_written(p->vals[v].data, bf_tensor_nbytes(&p->vals[v]), BF__WRITE_NOW);
        }
    }
}

/* The 1x1 -> depthwise pairs the pass runs together (plan_impl.h, pwdw:
 * bitflip eval's, a block of channels of one image at a time in L2, the
 * expansion's output never written), in a plan with none of its own: those
 * where the cache keeps none of the values a pair leaves unwritten (the
 * 1x1's output and its activation's, the depthwise Conv's own and a BN's or
 * Add's inside its chain), so every slot is written as the steps one by one
 * would write it. mobilenet_v2's 112x112 to 28x28 blocks when the drawn
 * faults lie after them: no trial reads those values. Set before the pool
 * is laid out, which then keeps each depthwise output apart from what its
 * 1x1 step reads (plan_build.c, bf__plan_share_offsets); taken off the plan
 * after the pass: trials and exact runs never pair. *own: set here;
 * *floats: the block's. */
static bf_status pass_pairs(const bf__gcache *gc, bf_plan *p, int *own, size_t *floats, bf_error *err)
{
    size_t need = 0;
    *own = 0;
    if (p->tab.pwdw) return BF_OK;
    bf_status st = bf__plan_find_pwdw(p, &need, err);
    if (st != BF_OK || !p->tab.pwdw) return st;
    int any = 0;
    for (size_t i = 0; i < p->n_steps; i++) {
        int d = p->tab.pwdw[i], v[3], mid;
        if (!d) continue;
        int kept = gc->blk[p->steps[i].node->out[0]] || gc->blk[p->steps[p->fuse_to[i]].node->out[0]];
        if (!kept && chain_mids(p, (size_t)d, v, &mid))
            for (int k = 0; k < 3; k++) kept |= v[k] >= 0 && gc->blk[v[k]];
        if (kept) p->tab.pwdw[i] = 0;
        any |= !kept;
    }
    if (!any) {
        bf__free(p->tab.pwdw);
        p->tab.pwdw = NULL;
        return BF_OK;
    }
    *own = 1;
    *floats = need;
    return BF_OK;
}

/* 1x1 Conv step i of batch b with its depthwise Conv (pass_pairs), the
 * depthwise chain's output into its slot when the cache keeps it; 0 when
 * the pair did not run (nothing written: the steps run as usual) */
static int run_pair(filler *f, bf_plan *p, int64_t b, size_t i, int timed)
{
    int d = p->tab.pwdw[i], n, a, r = bf__plan_fused_last(p, (size_t)d, &n, &a);
    point_slots(f->gc, p, &p->steps[r ? r : d], b);
    double t0 = timed ? now_s() : 0;
    if (!bf__plan_run_pwdw(p, i, f->pair_buf, f->pair_floats)) return 0;
    if (timed) f->step_s[i] += now_s() - t0;
    f->n_pairs++;
    return 1;
}

/* Batch b through plan p, each step writing the values the cache keeps
 * straight into their slot (no copy, and the plan's own buffers for them
 * stay untouched), a Conv with its BatchNormalization, residual Add and
 * activation in one fused run where the cache keeps nothing in between
 * (fusable_here); full batches timed step by step, for --stats (a fused
 * chain's time is its Conv's). */
static bf_status fill_batch(filler *f, bf_plan *p, int64_t b, bf_error *err)
{
    bf__gcache *gc = f->gc;
    int timed = b < gc->samples / gc->batch;
    bf_status st;
    for (size_t i = 0; i < p->model->n_inputs; i++)
        if ((st = bf_dataset_copy_rows(f->feeds[i], b * gc->batch, bf_plan_batch(p), bf_plan_input(p, i), err)) != BF_OK)
            return st;
    for (size_t k = 0; k < p->n_vf; k++) p->vf[k].old_value = p->vf[k].new_value = NAN;
    if (p->inputs_hit) bf__plan_apply_value_faults(p, -1);
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        if (bf__pvals_step(f->pv, i, p)) {   /* computed once, before the pass (dxparam.c) */
            for (int j = 0; j < s->n_out; j++)
                if (s->node->out[j] >= 0) p->vals[s->node->out[j]].data = (void *)bf__pvals_data(f->pv, s->node->out[j]);
            continue;
        }
        if (p->fused_skip[i]) {   /* computed in its Conv's epilogue (below) */
            p->fused_skip[i] = 0;
            if (p->step_hit[i]) bf__plan_apply_value_faults(p, (int)i);
            continue;
        }
        if (f->pair_buf && p->tab.pwdw && p->tab.pwdw[i] && run_pair(f, p, b, i, timed)) continue;
        int r = fusable_here(gc, p, i);
        point_slots(gc, p, r ? &p->steps[r] : s, b);   /* whose outputs this run writes */
        double t0 = timed ? now_s() : 0;
        bf__psum slot;
        int saving = bf__psum_golden_begin(f->ps, p, i, b, &slot);
        st = r ? bf__plan_run_fused(p, i, err) : bf__plan_run_step(p, i, err);
        if (saving) bf__psum_golden_end(f->ps, p, i, b, &slot);
        if (st != BF_OK) {
            memset(p->fused_skip, 0, p->n_steps);
            return st;
        }
        if (timed) f->step_s[i] += now_s() - t0;
        if (r) {
            int a, n;
            (void)bf__plan_fused_last(p, i, &n, &a);
            p->fused_skip[r] = 1;
            if (a) p->fused_skip[a] = 1;
            if (n) p->fused_skip[n] = 1;
        }
        if (p->step_hit[i]) bf__plan_apply_value_faults(p, (int)i);
    }
    /* This pass may run other plans than the campaign's golden pass did:
     * if the model does not evaluate deterministically, no trial could be
     * told from golden. */
    const bf_tensor *o = bf_plan_output(p, 0);
    size_t at = (size_t)(b * gc->batch) * (size_t)(bf_tensor_numel(o) / bf_plan_batch(p));
    if (f->golden_out && o->data != (void *)(f->golden_out + at))   /* else written there (gc->alias) */
        memcpy(f->golden_out + at, o->data, bf_tensor_nbytes(o));
    if (f->golden && memcmp(o->data, f->golden + at, bf_tensor_nbytes(o)) != 0)
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "the golden pass of batch %lld differs from the campaign's: this model does not "
                            "evaluate deterministically, so outcomes cannot be classified", (long long)b);
    return BF_OK;
}

static void *fill_main(void *arg)
{
    filler *f = arg;
    bf__gcache *gc = f->gc;
    int64_t n_full = gc->samples / gc->batch;
    for (;;) {
        int64_t b = atomic_fetch_add(f->next, 1);
        if (b >= gc->n_batches || atomic_load(f->failed)) break;
        if ((f->st = fill_batch(f, b < n_full ? f->full : f->rest, b, &f->err)) != BF_OK) {
            f->bad_batch = b;
            atomic_store(f->failed, 1);
            break;
        }
    }
    /* the plans' values point at their own buffers again */
    for (int t = 0; t < 2; t++) {
        bf_plan *p = t ? f->rest : f->full;
        for (size_t v = 0; p && v < gc->n_values; v++) p->vals[v].data = f->home[t][v];
    }
    return NULL;
}

/* The values of plan p that the pass writes and the cache does not keep
 * (graph inputs too), each pointed at its place in one pool shared by
 * lifetime, the pool kept in gc->pools for p (none when there are no such
 * values): past the pass, for the workers' places (gpool.c) */
static bf_status pool_values(bf__gcache *gc, const bf__pvals *pv, bf_plan *p, bf_error *err)
{
    const bf_model *m = p->model;
    size_t total = 0, *off = NULL, room = 0;
    unsigned char *keep = bf__calloc(m->n_values + 1, 1);
    void *pool = NULL;
    if (!keep) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden pass");
    int any = 0;
    for (size_t v = 0; v < m->n_values; v++) {
        keep[v] = p->val_step[v] >= 0 && (!gc->blk[v] || gc->src[v] >= 0) && !bf__pvals_data(pv, (int)v);
        any |= keep[v];
    }
    bf_status st = any ? bf__plan_share_offsets(p, keep, &total, &off, err) : BF_OK;
    if (st == BF_OK && any) {
        /* not zeroed: every place is written before it is read, as in the
         * plan; with room for a worker's places after the pass */
        pool = bf__gpool_reserve(p, total + 64, &room);
        /* written again by every batch, as a shared plan arena is
         * (plan_build.c, allocate_arena; not the cache's slots, written once) */
        if (pool) bf__pages_written(pool, total + 64, BF__WRITE_AGAIN);
        if (!pool || !bf__gpools_put(gc->pools, p, pool, room)) {
            bf__free(pool);
            st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden pass");
        }
    }
    for (size_t v = 0; st == BF_OK && any && v < m->n_values; v++)
        if (keep[v] || m->values[v].kind == BF__VAL_INPUT) p->vals[v].data = (char *)pool + off[v];
    bf__free(off);
    bf__free(keep);
    return st;
}

/* The candidates for the cache into cs (room for every value), smallest
 * first, and each one's bytes in a full batch into full; -1 when out of
 * memory. What a Conv's fused run leaves unwritten (its own output, a
 * BatchNormalization's or Add's before the activation) is no candidate:
 * the pass then runs the chain fused, as bitflip eval does, instead of
 * writing, and faulting in, each value in between (on LRASPP the Convs'
 * and BatchNorms' outputs were most of the 1 GiB cache, and no trial read
 * most of them); a trial whose fault lies in one channel of such a Conv
 * recomputes that channel through the chain over the chain's golden
 * output (diffstep.c, bf__dx_try_conv), and anything else that reads one
 * recomputes it from its inputs (fetch), as for any value the budget
 * leaves out. A candidate is `wanted` when want (NULL: every value) marks
 * it and, with lean, it is no Conv's output whose activation alone
 * follows (below). */
static int64_t candidates(const bf_plan *p0, const bf_plan *r0, int64_t n_full, const unsigned char *must,
                          const unsigned char *want, int lean, const bf__pvals *pv, cand *cs, size_t *full)
{
    const bf_model *m = p0->model;
    size_t n_c = 0;
    unsigned char *away = bf__calloc(m->n_values + 1, 1);
    if (!away) return -1;
    for (size_t i = 0; i < p0->n_steps; i++) {
        int fv[3];
        if (fused_away(p0, i, fv, 0) && (!r0 || fused_away(r0, i, fv, 0)))
            for (int k = 0; k < 3; k++)
                if (fv[k] >= 0) away[fv[k]] = 1;
        /* lean: a Conv and its activation alone go the same way: the pass
         * runs them fused, storing the activation (no Relu or Clip step of
         * its own reading the Conv's output back, none derived later by a
         * trial), and a trial with a fault in that Conv recomputes its
         * channel through the pair (diffchan.c, bf__dx_chain_channel).
         * Such a Conv's output is kept otherwise for chain mode, which
         * starts at it: lean only where no chain can be made anyway
         * (diffshared.c). Still a candidate, for bf__gcache_planned. */
        if (lean && fused_away(p0, i, fv, 1) && (!r0 || fused_away(r0, i, fv, 1)) && fv[0] >= 0 && !away[fv[0]])
            away[fv[0]] = 2;
    }
    for (size_t v = 0; v < m->n_values; v++) {
        if (p0->val_step[v] < 0) continue;     /* graph inputs and values no step computes */
        if (bf__pvals_data(pv, (int)v)) continue;   /* held apart, once */
        if (away[v] == 1 && !(must && must[v])) continue;
        size_t fb = bf_tensor_nbytes(&p0->vals[v]);
        size_t tb = r0 ? bf_tensor_nbytes(&r0->vals[v]) : 0;
        full[v] = fb;
        int mv = must && must[v];
        cs[n_c++] = (cand){.v = v, .bytes = fb * (size_t)n_full + tb, .must = mv,
                           .wanted = mv || ((!want || want[v]) && !away[v])};
    }
    bf__free(away);
    qsort(cs, n_c, sizeof *cs, cand_cmp);
    return (int64_t)n_c;
}

/* When the wanted candidates do not all fit the budget, the graph's cuts
 * go first (after the `must` ones), smallest first: a value computed from
 * the graph's inputs that is, after its step, the only such value a later
 * step reads (a transformer's residual stream between blocks, a CNN's
 * block outputs). A trial recomputes a value the cache leaves out from its
 * nearest cached ancestors (fetch, diffexec.c), and everything that
 * recomputation writes stays readable to the batch's end; smallest first
 * alone filled ViT-S/16's 1 GiB with its first four layers' small values
 * (equal sizes go by value index), so a trial with a fault in layer 9
 * recomputed layers 4 to 9 golden, and a worker's places shared by
 * lifetime (diffarena.c) had to hold all of them at once: 500 MB a
 * worker. With every cut held a recomputation stops at the block's input.
 * When everything fits the order is left as it was (derived values depend
 * on it: derivable), and bf__gcache_plan (whether chains are made at all,
 * diffshared.c's lean_ok) keeps it too. Only the order changes; whatever
 * is cached, every record is the same (a recomputed golden value is the
 * cached one's bits).
 * -1 when out of memory. */
static int cuts_first(const bf_plan *p, cand *cs, size_t n_c, size_t budget)
{
    size_t need = 0;
    for (size_t i = 0; i < n_c; i++) need += cs[i].must || cs[i].wanted ? cs[i].bytes : 0;
    if (need <= budget) return 0;
    const bf_model *m = p->model;
    int ns = (int)p->n_steps;
    unsigned char *dep = bf__calloc(m->n_values + 1, 1);
    int *lastuse = bf__malloc((m->n_values + 1) * sizeof *lastuse), *cnt = bf__calloc((size_t)ns + 2, sizeof *cnt);
    cand *tmp = bf__malloc((n_c + 1) * sizeof *tmp);
    if (!dep || !lastuse || !cnt || !tmp) {
        bf__free(dep), bf__free(lastuse), bf__free(cnt), bf__free(tmp);
        return -1;
    }
    for (size_t v = 0; v < m->n_values; v++) {
        dep[v] = p->val_step[v] == -1;   /* the graph's inputs */
        lastuse[v] = -1;
    }
    for (int i = 0; i < ns; i++) {
        const bf__node *n = p->steps[i].node;
        int d = 0;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) {
                d |= dep[n->in[j]];
                lastuse[n->in[j]] = i;
            }
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) dep[n->out[j]] = (unsigned char)d;
    }
    for (size_t k = 0; k < m->n_outputs; k++)
        if (m->output_vals[k] >= 0) lastuse[m->output_vals[k]] = ns;
    /* cnt[i + 1]: how many such values cross from step i to step i + 1 */
    for (size_t v = 0; v < m->n_values; v++) {
        int b = p->val_step[v];
        if (!dep[v] || b < -1 || lastuse[v] <= b) continue;
        cnt[b + 1]++;
        cnt[lastuse[v] + 1]--;
    }
    for (int i = 1; i <= ns; i++) cnt[i] += cnt[i - 1];
    size_t k = 0;
    for (int pass = 0; pass < 3; pass++)   /* must, cuts, the rest: each kept smallest first */
        for (size_t i = 0; i < n_c; i++) {
            int b = p->val_step[cs[i].v];
            int cut = !cs[i].must && b >= 0 && dep[cs[i].v] && lastuse[cs[i].v] > b && cnt[b + 1] == 1;
            if ((pass == 0 && cs[i].must) || (pass == 1 && cut) || (pass == 2 && !cs[i].must && !cut)) tmp[k++] = cs[i];
        }
    memcpy(cs, tmp, n_c * sizeof *cs);
    bf__free(dep), bf__free(lastuse), bf__free(cnt), bf__free(tmp);
    return 0;
}

/* The values the budget keeps of the candidates, every one wanted or not
 * (the `must` ones whatever it says), into planned. */
static void plan_values(const cand *cs, size_t n_c, size_t budget, unsigned char *planned)
{
    size_t all = 0;
    for (size_t i = 0; i < n_c; i++)
        if (cs[i].must || all + cs[i].bytes <= budget) {
            all += cs[i].bytes;
            planned[cs[i].v] = 1;
        }
}

bf_status bf__gcache_plan(bf_plan *const *full, bf_plan *const *rest, int64_t samples, size_t budget,
                          const unsigned char *must, const bf__pvals *pv, unsigned char *planned, bf_error *err)
{
    const bf_model *m = bf_plan_model(full[0]);
    cand *cs = bf__calloc(m->n_values + 1, sizeof *cs);
    size_t *fb = bf__calloc(m->n_values + 1, sizeof *fb);
    int64_t n_c = cs && fb ? candidates(full[0], rest ? rest[0] : NULL, samples / bf_plan_batch(full[0]), must,
                                        NULL, 0, pv, cs, fb)
                           : -1;
    memset(planned, 0, m->n_values);
    if (n_c >= 0) plan_values(cs, (size_t)n_c, budget, planned);
    bf__free(cs);
    bf__free(fb);
    return n_c >= 0 ? BF_OK : bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache");
}

/* Which values the cache holds: candidates smallest first (the most values
 * per byte) while they fit the budget, `must` ones whatever it says; each
 * either derived (a Relu or Clip of a stored value, computed when a trial
 * first reads it) or stored, its blocks allocated. cs: room for every
 * value. */
static bf_status choose_values(bf__gcache *gc, bf_plan *const *full, bf_plan *const *rest, size_t budget,
                               const unsigned char *must, const unsigned char *want, int lean, const bf__pvals *pv,
                               const unsigned char *planned, float *golden_out, cand *cs, bf_error *err)
{
    const bf_model *m = bf_plan_model(full[0]);
    const bf_plan *p0 = full[0];
    int64_t n_c = candidates(p0, rest ? rest[0] : NULL, gc->samples / gc->batch, must, want, lean, pv, cs, gc->full);
    if (n_c >= 0 && cuts_first(p0, cs, (size_t)n_c, budget) < 0) n_c = -1;
    if (n_c < 0) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache");
    if (want) {   /* what every value wanted would have kept (bf__gcache_planned) */
        gc->planned = bf__calloc(m->n_values + 1, 1);
        if (!gc->planned) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache");
        /* the caller's bf__gcache_plan (diffshared.c's lean_ok) said it already */
        if (planned) memcpy(gc->planned, planned, m->n_values);
        else plan_values(cs, (size_t)n_c, budget, gc->planned);
    }
    bf_plan *const p2[2] = {full[0], rest ? rest[0] : NULL};
    deriv *d = NULL;
    for (size_t i = 0; i < (size_t)n_c; i++) {
        /* read by none of the drawn trials (bf__dx_shared_golden's roots):
         * the pass runs it through the pool, as one the budget leaves out,
         * and its bytes go to the values they read */
        if (!cs[i].wanted) continue;
        if (!cs[i].must && gc->served + cs[i].bytes > budget) continue;
        /* The graph's output, when this pass writes the campaign's golden
         * outputs: its blocks are those (the same layout, batch b at
         * b * full), written there by its step, so the pass neither stores
         * a second copy nor copies it over (a segmenter's: 88 MB of LRASPP's
         * 1 GiB cache). Chosen as any value is, so the cache holds the same
         * values as before. */
        if (golden_out && (int)cs[i].v == m->output_vals[0] && p0->vals[cs[i].v].dtype == BF_F32) {
            gc->blk[cs[i].v] = (unsigned char *)golden_out;
            gc->alias = (int64_t)cs[i].v;
            gc->bytes += cs[i].bytes;   /* written by the pass, once */
            gc->served += cs[i].bytes;
            continue;
        }
        /* A derived value counts against the budget as a stored one does
         * (the budget bounds what the cache serves, and its memory once
         * every block has been read), but its blocks are computed, and
         * their pages touched, only when a trial first reads them: often
         * never (a value upstream of every fault but few). */
        if (!cs[i].must && (d || (d = bf__malloc(sizeof *d)) != NULL) && derivable(gc, p2, cs[i].v, d)) {
            unsigned char *blk = bf__malloc(cs[i].bytes + 1);
            d->ready = bf__calloc((size_t)gc->n_batches + 1, sizeof *d->ready);
            if (!blk || !d->ready) {
                bf__free(blk);
                bf__free((void *)d->ready);
                continue;   /* no room even for the address space: recompute it */
            }
            gc->blk[cs[i].v] = blk;
            gc->src[cs[i].v] = d->node->in[0];
            gc->dv[cs[i].v] = d;
            d = NULL;
            gc->served += cs[i].bytes;
            continue;
        }
        /* Not zeroed: the pass writes every byte of every slot, and each
         * thread's first write to its slots is what faults their pages in,
         * in parallel (written once, later: warena.h). In 2 MiB pages only
         * where the campaign's measurement of the host says its 4 KiB fresh
         * pages are dear and its 2 MiB ones cheap (gc->pages, BF__WRITE_HUGE;
         * campaign_golden.c), or with BITFLIP_HUGE_PAGES set: on a machine
         * whose memory is fragmented the kernel compacts on each fault, and
         * system time on resnet18 went from 0.7 to 2 s there (docs/perf/
         * trials.md, "Huge pages for the golden cache", h18-r18c; h22-camp
         * for the AMD VM's measured rule). */
        gc->blk[cs[i].v] = bf__alloc_written(cs[i].bytes, BF__WRITE_ONCE | gc->pages);
        if (!gc->blk[cs[i].v]) {
            if (cs[i].must) {
                bf__free(d);
                return bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache");
            }
            continue;   /* the budget was more than the machine has: recompute this one */
        }
        gc->bytes += cs[i].bytes;
        gc->served += cs[i].bytes;
    }
    bf__free(d);
    return BF_OK;
}

/* The pass's fillers, one per pair of plans, each a copy of `proto` (what
 * they share) with its plans: their own value buffers remembered (home),
 * the values the cache does not keep pointed into a pool of the filler's.
 * On failure every plan points at its own buffers again. */
static bf_status make_fillers(bf__gcache *gc, filler *fs, int n_plans, const filler *proto, bf_plan *const *full,
                              bf_plan *const *rest, bf_error *err)
{
    bf_status st = BF_OK;
    for (int k = 0; k < n_plans; k++) {
        filler *f = &fs[k];
        *f = *proto;
        f->full = full[k], f->rest = rest ? rest[k] : NULL;
        f->step_s = bf__calloc(gc->n_steps + 1, sizeof *f->step_s);
        for (int t = 0; t < 2; t++) f->home[t] = bf__calloc(gc->n_values + 1, sizeof *f->home[t]);
        if (!f->step_s || !f->home[0] || !f->home[1]) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden pass");
        for (int t = 0; t < 2; t++) {
            bf_plan *p = t ? f->rest : f->full;
            for (size_t v = 0; p && v < gc->n_values; v++) f->home[t][v] = p->vals[v].data;
        }
    }
    for (int k = 0; k < n_plans && st == BF_OK; k++) {
        for (int t = 0; t < 2 && st == BF_OK; t++) {
            bf_plan *p = t ? fs[k].rest : fs[k].full;
            size_t floats = 0;
            if (p) st = pass_pairs(gc, p, &fs[k].own_pairs[t], &floats, err);
            if (floats > fs[k].pair_floats) fs[k].pair_floats = floats;
            if (p && st == BF_OK) st = pool_values(gc, proto->pv, p, err);
        }
        size_t pb = fs[k].pair_floats * sizeof(float) + 64;
        if (st == BF_OK && fs[k].pair_floats && !(fs[k].pair_buf = bf__aligned_alloc(pb)))
            st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden pass");
    }
    if (st != BF_OK)
        for (int k = 0; k < n_plans; k++)
            for (int t = 0; t < 2; t++) {
                bf_plan *p = t ? fs[k].rest : fs[k].full;
                for (size_t v = 0; p && v < gc->n_values; v++) p->vals[v].data = fs[k].home[t][v];
            }
    return st;
}

/* The pass on n_plans threads, the caller's being filler 0 (a thread the
 * system refuses leaves its batches to the others); the failure of the
 * earliest batch, whichever thread ran it, so the same message for any
 * thread count; else the steps' times per full batch, summed. */
static bf_status run_fillers(bf__gcache *gc, filler *fs, int n_plans, bf_error *err)
{
    bf_status st = BF_OK;
    for (int k = 1; k < n_plans; k++) fs[k].started = pthread_create(&fs[k].tid, NULL, fill_main, &fs[k]) == 0;
    fill_main(&fs[0]);
    for (int k = 1; k < n_plans; k++)
        if (fs[k].started) pthread_join(fs[k].tid, NULL);
    int64_t bad = -1;
    for (int k = 0; k < n_plans; k++)
        if (fs[k].st != BF_OK && (bad < 0 || fs[k].bad_batch < bad)) {
            bad = fs[k].bad_batch;
            st = fs[k].st;
            if (err) *err = fs[k].err;
        }
    if (st != BF_OK) return st;
    int64_t n_full = gc->samples / gc->batch;
    for (int k = 0; k < n_plans; k++) {
        for (size_t i = 0; i < gc->n_steps; i++) gc->step_s[i] += fs[k].step_s[i];
        gc->n_pairs += fs[k].n_pairs;
    }
    for (size_t i = 0; n_full > 0 && i < gc->n_steps; i++) gc->step_s[i] /= (double)n_full;
    return BF_OK;
}

bf_status bf__gcache_build(bf_plan *const *full, bf_plan *const *rest, int n_plans, const bf_tensor *const *feeds,
                                 int64_t samples, size_t budget, const unsigned char *must, const unsigned char *want,
                                 int lean, const bf__pvals *pv, const unsigned char *planned, const float *golden,
                                 float *golden_out, bf__psum_store *ps, unsigned pages, bf__gcache **out,
                                 bf_error *err)
{
    const bf_model *m = bf_plan_model(full[0]);
    bf_status st = BF_OK;
    cand *cs = NULL;
    filler *fs = NULL;
    atomic_llong next = 0;
    atomic_int failed = 0;
    bf__gcache *gc = bf__calloc(1, sizeof *gc);
    *out = NULL;
    if (!gc) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache");
    gc->samples = samples;
    gc->batch = bf_plan_batch(full[0]);
    gc->n_batches = (samples + gc->batch - 1) / gc->batch;
    gc->n_values = m->n_values;
    gc->blk = bf__calloc(m->n_values + 1, sizeof *gc->blk);
    gc->full = bf__calloc(m->n_values + 1, sizeof *gc->full);
    gc->src = bf__malloc((m->n_values + 1) * sizeof *gc->src);
    gc->dv = bf__calloc(m->n_values + 1, sizeof *gc->dv);
    gc->derived = bf__calloc(1, sizeof *gc->derived);
    for (size_t v = 0; gc->src && v < m->n_values; v++) gc->src[v] = -1;
    gc->alias = -1;
    gc->pages = pages & BF__WRITE_HUGE;
    cs = bf__calloc(m->n_values + 1, sizeof *cs);
    gc->n_steps = full[0]->n_steps;
    gc->step_s = bf__calloc(gc->n_steps + 1, sizeof *gc->step_s);
    /* no more threads than batches: a thread without one would only cost its start */
    if (n_plans > gc->n_batches) n_plans = (int)gc->n_batches;
    if (n_plans < 1) n_plans = 1;
    fs = bf__calloc((size_t)n_plans, sizeof *fs);
    if (!gc->blk || !gc->full || !gc->src || !gc->dv || !gc->derived || !cs || !gc->step_s || !fs) { st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache"); goto out; }

    if ((st = choose_values(gc, full, rest, budget, must, want, lean, pv, planned, golden_out, cs, err)) != BF_OK) goto out;
    /* the partial sums from what the cache left of the budget, and of one
     * arena a batch: --job-memory's estimate of the cache (job_budget.c) */
    size_t bound = bf_plan_arena_bytes(full[0]) * (size_t)gc->n_batches;
    bound = bound < budget ? bound : budget;
    (void)bf__psum_alloc(ps, bound > gc->served ? bound - gc->served : 0, gc->pages);
    filler proto = {.gc = gc, .pv = pv, .ps = ps, .feeds = feeds, .golden = golden, .golden_out = golden_out, .next = &next,
                    .failed = &failed, .bad_batch = -1};
    /* a pool a plan (pool_values), outliving the pass for the workers' places */
    if (!(gc->pools = bf__gpools_new(2 * n_plans))) {
        st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden pass");
        goto out;
    }
    if ((st = make_fillers(gc, fs, n_plans, &proto, full, rest, err)) != BF_OK) goto out;
    if ((st = run_fillers(gc, fs, n_plans, err)) != BF_OK) goto out;
    *out = gc;
    gc = NULL;
out:
    for (int k = 0; fs && k < n_plans; k++) {
        bf__free(fs[k].step_s);
        bf__free(fs[k].home[0]);
        bf__free(fs[k].home[1]);
        bf__free(fs[k].pair_buf);
        for (int t = 0; t < 2; t++) {   /* the plans pair no more (pass_pairs) */
            bf_plan *p = t ? fs[k].rest : fs[k].full;
            if (fs[k].own_pairs[t] && p) bf__free(p->tab.pwdw), p->tab.pwdw = NULL;
        }
    }
    bf__free(fs);
    bf__free(cs);
    bf__gcache_free(gc);
    return st;
}

const void *bf__gcache_block(const bf__gcache *gc, int64_t v, int64_t b)
{
    if (!gc->blk[v]) return NULL;
    const void *at = gc->blk[v] + (size_t)b * gc->full[v];
    if (gc->src[v] < 0) return at;
    atomic_uchar *ready = &gc->dv[v]->ready[b];
    for (;;) {
        unsigned char st = atomic_load_explicit(ready, memory_order_acquire);
        if (st == DV_READY) return at;
        if (st == DV_BUSY) {   /* another thread computes this block: a Relu of one batch, short */
            sched_yield();
            continue;
        }
        unsigned char none = DV_NONE;
        if (!atomic_compare_exchange_weak_explicit(ready, &none, DV_BUSY, memory_order_acquire,
                                                   memory_order_relaxed))
            continue;
        if (!derive(gc, (size_t)v, b)) {
            atomic_store_explicit(ready, DV_NONE, memory_order_release);
            return NULL;
        }
        atomic_fetch_add(gc->derived, bf_tensor_nbytes(&gc->dv[v]->out[b >= gc->samples / gc->batch]));
        atomic_store_explicit(ready, DV_READY, memory_order_release);
        return at;
    }
}

int bf__gcache_has(const bf__gcache *gc, int64_t v) { return gc->blk[v] != NULL; }
int bf__gcache_stored(const bf__gcache *gc, int64_t v) { return gc->blk[v] && gc->src[v] < 0; }
int bf__gcache_planned(const bf__gcache *gc, int64_t v) { return gc->planned ? gc->planned[v] : gc->blk[v] != NULL; }

const void *bf__gcache_rows(const bf__gcache *gc, int64_t v)
{
    for (int64_t b = 0; b < gc->n_batches; b++)
        if (!bf__gcache_block(gc, v, b)) return NULL;
    return gc->blk[v];
}

size_t bf__gcache_bytes(const bf__gcache *gc) { return gc->bytes + atomic_load(gc->derived); }
size_t bf__gcache_served(const bf__gcache *gc) { return gc->served; }
const double *bf__gcache_step_seconds(const bf__gcache *gc) { return gc->step_s; }
int64_t bf__gcache_batches(const bf__gcache *gc) { return gc->n_batches; }
int64_t bf__gcache_pairs(const bf__gcache *gc) { return gc->n_pairs; }
unsigned bf__gcache_pages(const bf__gcache *gc) { return gc->pages; }

bf__gpools *bf__gcache_pools(const bf__gcache *gc) { return gc->pools; }
