/* Image-major trials of a one-image-per-call campaign (a detector): the
 * golden pass goes a block of B images at a time (a thread's), and after
 * the block's golden runs, which record those images' checkpoints into B
 * blocks reused block after block (exec/ckpt.h, bf__ckpt_opts.slots), every
 * trial of the campaign runs on those images from them (its faults written
 * once a block), its outputs kept in the trial's own per-image slots. B:
 * bf_campaign_prep.image_block, else as many as fit in image_block_bytes
 * (docs/engine/checkpoints.md, "Image blocks"). After the last image the
 * golden result is made as the golden pass makes it, and each trial's
 * result when bf_campaign_run reaches it (bf__campaign_imaj_result: the
 * same metrics, det_judge and fold as a trial-major pass's). Trial-major (campaign_ckpt.c) keeps every
 * image's checkpoints at once: SSDlite320's 53 MB of fresh pages, which on
 * a host that hands free 8 MiB blocks back cost 0.58 s instead of a few ms
 * (docs/engine/checkpoints.md, "Image-major"). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"
#include "diff/diff.h"
#include "exec/ckpt.h"
#include "exec/eval_ragged.h"
#include "exec/step_access.h"

struct bf__imaj {
    int64_t first, step, n;   /* the trials swept: first + k step, k < n (a shard's) */
    int64_t samples, cols;
    int64_t block;            /* images a thread runs a block of: golden runs, then every trial on them */
    bf__ragged *rag;          /* n: each trial's per-image outputs */
    float *outs;              /* n x samples x cols: output 0's rows (cols 0: none) */
    bf__ckpt_trial **tr;      /* n: each trial's reach, made once */
    bf__dx_weight *dw;        /* every trial's weight writes, trial k's from dw_at[k] to dw_at[k + 1] */
    size_t *dw_at;
    atomic_int *due;          /* n: a detector fired in trial k's run of an image: the run runs it again, in full */
};

void bf__campaign_imaj_free(bf__imaj *x)
{
    if (!x) return;
    for (int64_t k = 0; k < x->n; k++) {
        if (x->rag) bf__ragged_free(&x->rag[k]);
        if (x->tr) bf__ckpt_trial_free(x->tr[k]);
    }
    bf__free(x->rag);
    bf__free(x->outs);
    bf__free(x->tr);
    bf__free(x->dw);
    bf__free(x->dw_at);
    bf__free(x->due);
    bf__free(x);
}

const char *bf__campaign_imaj_off(const bf_campaign *c, const bf_campaign_prep *prep, int drawn_known)
{
    if (!prep || !prep->image_major)
        return "not asked for (image_major 0: the CLI's default at 1 thread, or --trial-major)";
    if (!drawn_known || c->faults.target != BF_TARGET_WEIGHTS)
        return "the trials are not weight faults known before the golden pass (fault groups, mitigations, BER, "
               "adaptive "
               "sampling, activation faults): trial-major";
    int64_t samples = bf_dataset_num_samples(c->ds), n = c->faults.n_trials;
    if (n > BF__IMAJ_SLOTS_MAX / (samples > 0 ? samples : 1))
        return "trials x images over 65,536 (the per-trial, per-image outputs kept through the sweep): trial-major";
    return NULL;
}

/* Trial k's faults drawn and its weight writes listed by run_weight_trial's
 * own listing (bf__campaign_fault_writes; no groups, protections or BER
 * here), its reach marked as a trial-major run's
 * (bf__campaign_ckpt_mark). */
static bf_status draw_trial(const bf_campaign *c, bf__imaj *x, int64_t k, bf__draw *d, size_t *cap, bf_error *err)
{
    const bf__ckpt *ck = c->golden.ckpt;
    bf_status st = bf__campaign_draw(c, x->first + k * x->step, d, err);
    if (st != BF_OK) return st;
    size_t n = x->dw_at[k];
    for (size_t i = 0; i < d->n && st == BF_OK; i++) {
        const bf__efault *f = &d->f[i];
        size_t p = c->surface.site_param[f->site];
        float old = bf__stored(&c->store, p, f->index), now = bf__wcorrupt(&c->store, p, old, c->faults.kind, f);
        st = bf__campaign_fault_writes(c, p, f->index, old, now, &x->dw, cap, &n, err);
    }
    if (st != BF_OK) return st;
    x->dw_at[k + 1] = n;
    if ((st = bf__ckpt_trial_new(ck, &x->tr[k], err)) != BF_OK) return st;
    bf__campaign_ckpt_mark(ck, x->tr[k], x->dw + x->dw_at[k], n - x->dw_at[k]);
    return BF_OK;
}

/* Trial k on a block's images s0, s0 + T, ... (nb of them): its faults
 * written once, each image run from its checkpoints into the trial's
 * slots, the stored values written back in reverse and each tensor given
 * back (as run_weight_trial does), its private pages kept (they hold the
 * stored bits again) until the sweep ends: dropped every (trial, image), a
 * madvise over the whole tensor each, SSDlite320's sweep cost ~0.1 s of
 * CPU more than trial-major. */
static bf_status trial_on(const bf_campaign *c, bf__imaj *x, bf_evaluator *ev, int64_t k, int64_t s0, int64_t T,
                          int64_t nb, bf_error *err)
{
    const bf__dx_weight *dw = x->dw + x->dw_at[k];
    size_t n = x->dw_at[k + 1] - x->dw_at[k], i = 0;
    bf_status st = BF_OK;
    for (; i < n && st == BF_OK; i++) st = bf_evaluator_write_param(ev, dw[i].param, dw[i].index, dw[i].new_value, err);
    for (int64_t b = 0; b < nb && st == BF_OK && !atomic_load(&x->due[k]); b++) {
        st = bf__evaluator_imaj(ev, c->golden.ckpt, NULL, x->tr[k], s0 + T * b, &x->rag[k],
                                x->outs ? x->outs + (size_t)(k * x->samples * x->cols) : NULL, err);
        if (st == BF_EDETECTED) {   /* DUE is the run's to record, from its own pass (bf__run_trial) */
            atomic_store(&x->due[k], 1);
            st = BF_OK;
        }
    }
    while (i-- > 0) {
        bf_status u = bf_evaluator_write_param(ev, dw[i].param, dw[i].index, dw[i].old_value, err);
        if (u != BF_OK && st == BF_OK) st = u;
    }
    for (i = 0; i < n; i++)
        if (i == 0 || dw[i].param != dw[i - 1].param) bf__evaluator_param_golden_kept(ev, dw[i].param);
    return st;
}

int64_t bf__campaign_imaj_block(const bf_campaign *c, const bf_campaign_prep *prep)
{
    int64_t t = bf__campaign_imaj_threads(c, prep), samples = bf_dataset_num_samples(c->ds);
    int64_t per = (samples + t - 1) / t;
    int64_t b = prep && prep->image_block > 0 ? prep->image_block : bf__ckpt_slot_mult(c->golden.ckpt);
    return b < per ? b : per > 0 ? per : 1;
}

int64_t bf__campaign_imaj_block_ran(const bf_campaign *c) { return c->golden.imaj ? c->golden.imaj->block : 0; }

int bf__campaign_imaj_threads(const bf_campaign *c, const bf_campaign_prep *prep)
{
    int64_t t = prep && prep->threads > 1 ? prep->threads : 1, samples = bf_dataset_num_samples(c->ds);
    if (t > samples) t = samples > 0 ? samples : 1;
    return t > BF__IMAJ_THREADS_MAX ? BF__IMAJ_THREADS_MAX : (int)t;
}

/* One thread of the sweep: images i, i + T, ... on its own evaluator
 * (its own plans, its own checkpoint block: s % T), each image's golden
 * run then every trial on it; the trials' slots of those images are its
 * alone. */
typedef struct sweeper {
    bf_campaign *c;
    bf__imaj *x;
    bf_evaluator *ev;
    const int *cancel;
    int i, n;
    atomic_int *failed;
    atomic_llong *done;   /* images swept, every thread's */
    const bf_campaign_prep *prep;   /* its sweep_progress, called by thread 0 alone */
    bf_status st;
    bf_error err;
    pthread_t tid;
    int started;
} sweeper;

static void *sweep_images(void *arg)
{
    sweeper *w = arg;
    const bf_campaign *c = w->c;
    const int64_t S = w->x->samples, T = w->n > 0 ? w->n : 1, B = w->x->block;
    /* this thread's images i, i + T, ... a block of B at a time: image
     * i + T j in block slot (i + T j) % (B T) = i + T (j % B), its own */
    for (int64_t j0 = 0; w->i + T * j0 < S && w->st == BF_OK; j0 += B) {
        int64_t s0 = w->i + T * j0, nb = 0;
        if (atomic_load(w->failed)) break;
        if (w->cancel && bf_cancel_requested(w->cancel)) {
            w->st = bf_error_set(&w->err, BF_ECANCELED, "campaign canceled in its image-major sweep, at image %lld",
                                 (long long)s0);
            break;
        }
        for (int64_t s = s0; nb < B && s < S && w->st == BF_OK; s += T, nb++)
            w->st = bf__evaluator_imaj(w->ev, c->golden.ckpt, c->golden.ckpt, NULL, s, NULL, NULL, &w->err);
        for (int64_t k = 0; k < w->x->n && w->st == BF_OK; k++) w->st = trial_on(c, w->x, w->ev, k, s0, T, nb, &w->err);
        long long done = atomic_fetch_add(w->done, nb) + nb;
        /* thread 0 reports; the last image's report is made once, at the end */
        if (w->i == 0 && w->prep->sweep_progress && w->st == BF_OK && done < S)
            w->prep->sweep_progress(w->prep->sweep_user, done, S);
    }
    if (w->st != BF_OK) atomic_store(w->failed, 1);
    return NULL;
}

bf_status bf__campaign_imaj_sweep(bf_campaign *c, bf_evaluator *const *evs, int n_ev, const bf_campaign_prep *prep,
                                  bf_eval_result *r, bf_error *err)
{
    bf_evaluator *ev = evs[0];
    int sharded = prep->shard_count > 1 && prep->shard_index >= 0 && prep->shard_index < prep->shard_count;
    bf__imaj *x = bf__calloc(1, sizeof *x);
    if (!x) return bf_error_set(err, BF_ENOMEM, "out of memory for the image-major trials");
    x->first = sharded ? prep->shard_index : 0;
    x->step = sharded ? prep->shard_count : 1;
    x->n = x->first < c->faults.n_trials ? (c->faults.n_trials - x->first + x->step - 1) / x->step : 0;
    x->samples = bf_dataset_num_samples(c->ds);
    x->cols = bf__evaluator_out_cols(ev);
    x->block = bf__campaign_imaj_block(c, prep);
    bf__draw d = {0};
    size_t cap = 0;
    bf_status st = BF_OK;
    x->rag = bf__calloc((size_t)x->n + 1, sizeof *x->rag);
    x->tr = bf__calloc((size_t)x->n + 1, sizeof *x->tr);
    x->dw_at = bf__calloc((size_t)x->n + 2, sizeof *x->dw_at);
    x->due = bf__calloc((size_t)x->n + 1, sizeof *x->due);
    if (x->cols > 0) x->outs = bf__malloc((size_t)(x->n * x->samples * x->cols) * sizeof *x->outs + 1);
    if (!x->rag || !x->tr || !x->dw_at || !x->due || (x->cols > 0 && !x->outs)) {
        st = bf_error_set(err, BF_ENOMEM, "out of memory for the image-major trials");
        goto out;
    }
    for (int64_t k = 0; k < x->n && st == BF_OK; k++)
        if ((st = bf__ragged_init(&x->rag[k], c->model, x->samples, err)) == BF_OK)
            st = draw_trial(c, x, k, &d, &cap, err);
    if (st == BF_OK) {
        /* the images split between the threads (s % n_ev); the calling thread is the first */
        sweeper ws[BF__IMAJ_THREADS_MAX];
        atomic_int failed = 0;
        atomic_llong done = 0;
        for (int i = 0; i < n_ev; i++)
            ws[i] = (sweeper){.c = c, .x = x, .ev = evs[i], .cancel = prep->cancel, .i = i, .n = n_ev,
                              .failed = &failed, .done = &done, .prep = prep};
        for (int i = 1; i < n_ev; i++) ws[i].started = pthread_create(&ws[i].tid, NULL, sweep_images, &ws[i]) == 0;
        for (int i = 1; i < n_ev; i++)   /* a thread the system refused: its images on this one */
            if (!ws[i].started) ws[i].n = 0;
        sweep_images(&ws[0]);
        for (int i = 1; i < n_ev; i++) {
            if (ws[i].started) {
                pthread_join(ws[i].tid, NULL);
            } else if (ws[0].st == BF_OK) {
                ws[i].n = n_ev;
                sweep_images(&ws[i]);
            }
        }
        for (int i = 0; i < n_ev && st == BF_OK; i++)
            if (ws[i].st != BF_OK) {
                st = ws[i].st;
                if (err) *err = ws[i].err;
            }
        /* the other threads' golden outputs into the first evaluator's, whose pass's result is the golden one */
        for (int64_t s = 0; s < x->samples && st == BF_OK; s++)
            if (s % n_ev) st = bf__evaluator_imaj_merge(ev, evs[s % n_ev], s, err);
        for (int i = 1; i < n_ev; i++) bf__evaluator_ckpt_add_counts(ev, evs[i]);   /* for --stats */
        for (size_t i = 0; i < x->dw_at[x->n]; i++)   /* the private pages go (the first evaluator is worker 0's) */
            if (i == 0 || x->dw[i].param != x->dw[i - 1].param) bf__evaluator_param_golden(ev, x->dw[i].param);
    }
    if (st == BF_OK) st = bf__evaluator_imaj_finish(ev, NULL, NULL, r, err);
    if (st == BF_OK && prep->sweep_progress) prep->sweep_progress(prep->sweep_user, x->samples, x->samples);
out:
    bf__draw_free(&d);
    if (st != BF_OK) {
        bf__campaign_imaj_free(x);
        return st;
    }
    c->golden.imaj = x;
    return BF_OK;
}

int bf__campaign_imaj_has(const bf_campaign *c, int64_t t)
{
    const bf__imaj *x = c->golden.imaj;
    if (!x || t < x->first || (t - x->first) % x->step) return 0;
    int64_t k = (t - x->first) / x->step;
    return k < x->n && !atomic_load(&x->due[k]);
}

bf_status bf__campaign_imaj_result(const bf_campaign *c, bf_evaluator *ev, int64_t t, bf_eval_result *res,
                                   bf_error *err)
{
    bf__imaj *x = c->golden.imaj;
    int64_t k = (t - x->first) / x->step;
    return bf__evaluator_imaj_finish(ev, &x->rag[k], x->outs ? x->outs + (size_t)(k * x->samples * x->cols) : NULL, res,
                                     err);
}
