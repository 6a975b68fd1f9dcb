/* Running a campaign.
 *
 * Workers each own an evaluator (one thread inside, so its plans are
 * private) built with the campaign's one batch size, so a trial's outputs do
 * not depend on the worker that computes it. They take chunks of trials in
 * order from a counter, compute them into a ring of slots, and never call
 * back. The calling thread coordinates: it folds finished chunks into the
 * result strictly in trial order, calls on_trial (in trial order) and
 * progress (at most every 100 ms), and applies the stop rule. Folding in
 * order is what makes the stop point, and everything before it, the same
 * for any thread count. The ring bounds how far workers run ahead.
 *
 * Stop rule: only at every STOP_EVERY-th trial of the shard (counting this
 * shard's trials from 0), over exactly the trials before that boundary: if
 * every outcome rate's Wilson half-width is within the margin, the campaign
 * ends there and trials computed past the boundary are discarded. A sharded
 * campaign applies the rule to each shard on its own.
 *
 * The callbacks never run concurrently and never on a worker: on_trial,
 * on_outputs and progress are called by the thread that called
 * bf_campaign_run, on_trial (then on_outputs) once per folded trial in trial
 * order. Each slot of the ring holds its trials' outputs only when
 * on_outputs is set. On any failure (cancel included)
 * `out` is left empty; progress has seen the partial result. */
#define _GNU_SOURCE   /* RUSAGE_THREAD: a worker's own page faults */
#include <math.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"
#include "campaign/run.h"
#include "diff/diff.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"
#include "exec/ops/sgemm.h"

#define STOP_EVERY 64       /* trials between stop-rule checks */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Trials a worker takes at a time: at most `cap` (fewer hand-offs on
 * microsecond trials), but at least 16 chunks per worker, so the last
 * chunks do not leave a worker idle while another finishes a long one. With
 * a fixed 16, a 20-trial campaign on 2 threads gave one worker 16 trials and
 * the other 4 (ViT-S/16 ran 1.33x its 1-thread rate), and no trial was
 * reported done before the first 16 were. A power of two that divides
 * ADAPT_ALIGN, so adaptive rounds (multiples of ADAPT_ALIGN trials) end on a
 * chunk boundary; what a campaign computes does not depend on it (records
 * are folded in trial order), only how its work is handed out. */
static int chunk_size(int64_t n, int threads, int cap)
{
    int chunk = cap;
    while (chunk > 1 && n < (int64_t)chunk * 16 * threads) chunk /= 2;
    return chunk;
}

/* --- workers */

/* This thread's CPU seconds and page faults (minor and major) so far; 0
 * where the system does not say (RUSAGE_THREAD is Linux's). */
static void thread_usage(double *cpu, int64_t *faults)
{
    struct timespec ts;
    *cpu = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 : 0;
    *faults = 0;
#if defined(RUSAGE_THREAD)
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0) *faults = (int64_t)ru.ru_minflt + (int64_t)ru.ru_majflt;
#endif
}

/* Computes a chunk's trials; *complete is 0 when the run halted first. */
static bf_status run_chunk(worker *w, int64_t j, slot *s, int *complete)
{
    runner *rn = w->rn;
    int64_t first = j * rn->chunk;
    *complete = 0;
    s->n = (int)(rn->n - first < rn->chunk ? rn->n - first : rn->chunk);
    for (int i = 0; i < s->n; i++) {
        if (atomic_load(&rn->halt)) return BF_OK;
        if (rn->opts->cancel && bf_cancel_requested(rn->opts->cancel))
            return bf_error_set(&w->err, BF_ECANCELED, "campaign canceled");
        int64_t t = bf__run_trial_of(rn, first + i);
        float *outs = s->outputs ? s->outputs + (size_t)i * (size_t)(rn->c->golden.samples * rn->c->golden.out_cols) : NULL;
        bf_status st = bf__run_trial(w, t, &s->rec[i], &s->first[i], outs, rn->opts->on_ragged ? &s->rag[i] : NULL);
        if (st != BF_OK) return st;
        w->trials++;
    }
    *complete = 1;
    return BF_OK;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    runner *rn = w->rn;
    double cpu0;
    int64_t faults0;
    thread_usage(&cpu0, &faults0);
    /* a differential trial's steps fault in their plan's slots a call each,
     * not a page at a time (exec/plan.c, bf__plan_warm_slots) */
    for (int t = 0; w->dx && t < 2; t++)
        if (bf__evaluator_plan(w->ev, t)) bf__plan_warm_slots(bf__evaluator_plan(w->ev, t));
    pthread_mutex_lock(&rn->mu);
    for (;;) {
        /* the chunk must have a free slot: at most ring_n past the fold */
        while (!atomic_load(&rn->halt) && rn->next_chunk < rn->n_chunks &&
               (bf__run_chunk_at(rn, rn->next_chunk) >= rn->folded + rn->ring_n || rn->next_chunk >= rn->limit_chunk)) {
            double t0 = now_s();
            pthread_cond_wait(&rn->room, &rn->mu);
            w->wait += now_s() - t0;
        }
        if (atomic_load(&rn->halt) || rn->next_chunk >= rn->n_chunks) break;
        int64_t j = bf__run_chunk_at(rn, rn->next_chunk++);
        slot *s = &rn->ring[j % rn->ring_n];
        s->chunk = j;
        s->done = 0;
        pthread_mutex_unlock(&rn->mu);
        int complete;
        bf_status st = run_chunk(w, j, s, &complete);
        pthread_mutex_lock(&rn->mu);
        if (st != BF_OK) {
            if (rn->st == BF_OK) {
                rn->st = st;
                rn->err = w->err;
            }
            atomic_store(&rn->halt, 1);
            pthread_cond_broadcast(&rn->room);
        }
        s->done = complete;
        /* The coordinator folds what is done when woken, and every 100 ms
         * anyway: woken per chunk, it cost a futex wake and a context switch
         * per 16 microsecond trials, a tenth of one thread's time. So only
         * once the ring is half full, in the last chunks, or on a halt. */
        if (!complete || rn->next_chunk >= rn->limit_chunk || 2 * (rn->next_chunk - rn->folded) >= rn->ring_n)
            pthread_cond_signal(&rn->finished);
    }
    pthread_mutex_unlock(&rn->mu);
    w->end = now_s();
    thread_usage(&w->cpu, &w->faults);
    w->cpu -= cpu0;
    w->faults -= faults0;
    return NULL;
}

/* An evaluator for one worker, loaded with the golden model, whose golden
 * pass must be bit-identical to the campaign's. */
/* Every sample's every output as golden's (a one-sample graph's), bit for bit. */
static int ragged_same(const bf_eval_result *r, const bf_campaign *c)
{
    if (r->n_ragged != c->golden.rag.n) return 0;
    for (int64_t s = 0; s < r->samples && r->n_ragged; s++)
        if (!bf__ragged_sample_same(r->ragged, c->golden.rag.view, r->n_ragged, s)) return 0;
    return 1;
}

static bf_status worker_init(runner *rn, worker *w, int idx, bf_campaign_result *acc, bf_error *err)
{
    bf_campaign *c = rn->c;
    if ((rn->adopt || rn->ckpt) && idx < c->golden.n_gev && c->golden.gev[idx]) {
        /* an evaluator of the campaign's golden pass, whose plans made its
         * share of the golden cache (bf_campaign_prep) */
        w->ev = c->golden.gev[idx];
        c->golden.gev[idx] = NULL;
        bf__evaluator_set_cancel(w->ev, rn->opts->cancel);
        if (rn->ckpt) {   /* a one-sample graph's: it recorded the checkpoints on the campaign's golden pass */
            bf__evaluator_ragged_base(w->ev, c->golden.rag.view);
            /* image-major: the checkpoints hold the last image alone, and a trial the sweep did not run runs in full */
            return bf__evaluator_ckpt(w->ev, c->golden.imaj ? NULL : c->golden.ckpt, NULL, c->golden.out, err);
        }
        return BF_OK;
    }
    double t0 = now_s();
    /* the exact engine reads nothing of a pass but its outputs: a Conv's
     * activation may run in its epilogue (the differential engine runs
     * steps alone and reads every value); a one-sample graph's arena is
     * shared by lifetime, as the golden evaluator's whose checkpoints its
     * plans must fit (campaign_golden.c) */
    bf_eval_opts eo = {.batch = c->batch, .threads = 1, .cancel = rn->opts->cancel,
                       .fuse_activations = rn->exact, .max_run_bytes = c->max_run_bytes,
                       .share_buffers = rn->exact && bf__eval_set_unbatched(c->model, c->ds)};
    bf_status st = bf_evaluator_create(c->model, c->ds, &eo, &w->ev, err);
    if (st != BF_OK) return st;
    for (size_t p = 0; p < bf_model_num_params(c->model); p++)
        if (c->store.values[p] && (st = bf_evaluator_set_param(w->ev, p, c->store.values[p], err)) != BF_OK) return st;
    if (bf_evaluator_batch(w->ev) != c->batch)
        return bf_error_set(err, BF_EUNSUPPORTED, "worker %d's evaluator runs batches of %lld, the campaign's %lld", idx,
                            (long long)bf_evaluator_batch(w->ev), (long long)c->batch);
    if (c->golden.rag.n) bf__evaluator_ragged_base(w->ev, c->golden.rag.view);   /* a transient trial's other samples */
    double t1 = now_s();
    acc->setup.worker_plans += t1 - t0;
    /* The differential engine's golden cache is made on every worker's
     * plans and checked against the campaign's golden outputs as it goes
     * (gcache.c): each batch on one worker, no pass of their own. The
     * exact engine has no cache, so each worker checks its own. */
    if (!rn->exact) return BF_OK;
    bf_eval_result r;
    st = bf_evaluator_run(w->ev, NULL, 0, &r, err);
    acc->setup.checks += now_s() - t1;
    if (st != BF_OK) return st;
    if (r.samples != c->golden.samples || r.out_cols != c->golden.out_cols ||
        memcmp(r.outputs, c->golden.out, (size_t)(c->golden.samples * c->golden.out_cols) * sizeof(float)) != 0 ||
        !ragged_same(&r, c))
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "worker %d's golden pass differs from the campaign's: this model does not evaluate "
                            "deterministically, so outcomes cannot be classified", idx);
    if (!rn->ckpt) return BF_OK;
    if (c->golden.imaj) return bf__evaluator_ckpt(w->ev, NULL, NULL, c->golden.out, err);   /* as worker 0's */
    if ((st = bf__evaluator_ckpt(w->ev, c->golden.ckpt, NULL, c->golden.out, err)) != BF_OK) return st;
    /* made with the golden evaluator's options, its plans hold every value
     * the checkpoints keep in their arena at the same size (ckpt.h,
     * bf__ckpt_fits_plan): a worker that silently ran every image in full
     * would hide plans gone astray (tests/unit/test_ckpt.c, 2 threads) */
    if (c->golden.rag.n && !bf__evaluator_ckpt_on(w->ev))
        return bf_error_set(err, BF_EUNSUPPORTED, "internal error: worker %d's plans do not fit the golden checkpoints", idx);
    return BF_OK;
}

/* A worker's decoder, when the campaign generates (campaign_gen.c). */
static bf_status worker_gen(runner *rn, worker *w, int idx, bf_campaign_result *acc, bf_error *err)
{
    const bf_campaign *c = rn->c;
    if (!c->gen.m) return BF_OK;
    double t0 = now_s();
    bf_status st = bf__campaign_gen_worker(c, idx, &w->gen, err);
    acc->setup.worker_plans += now_s() - t0;
    if (st == BF_OK && !(w->gen_tokens = bf__malloc((size_t)(c->gen.n * c->gen.m) * sizeof *w->gen_tokens)))
        st = bf_error_set(err, BF_ENOMEM, "out of memory for a worker's generation");
    return st;
}

/* What the differential engine re-ran, for --stats: each step's batches
 * re-run (summed over workers) times its golden time per batch, against
 * every trial re-running every batch of every step. */
static void work_summary(runner *rn, bf_campaign_result *acc)
{
    acc->work_fraction = NAN;
    acc->n_top_steps = 0;
    if (!rn->dxs || acc->trials_done == 0) return;
    const double *gs = bf__gcache_step_seconds(bf__dx_shared_cache(rn->dxs));
    const bf_plan *p = bf__evaluator_plan(rn->ws[0].ev, 0);
    size_t n = bf_plan_num_steps(p);
    double full = 0, ran = 0, skipped = 0, conv = 0;
    for (size_t i = 0; i < n; i++) {
        double w = 0, sk = 0;
        for (int k = 0; k < rn->n_workers; k++)
            if (rn->ws[k].dx) w += bf__dx_work(rn->ws[k].dx)[i], sk += bf__dx_psum_skipped(rn->ws[k].dx)[i];
        full += gs[i];
        ran += w * gs[i];
        skipped += sk * gs[i];
        if (bf__conv_step(&p->steps[i])) conv += (w + sk) * gs[i];
        /* keep the five heaviest, heaviest first */
        int at = acc->n_top_steps;
        while (at > 0 && acc->top_steps[at - 1].share < w * gs[i]) at--;
        if (at >= 5 || w == 0) continue;
        int last = acc->n_top_steps < 5 ? acc->n_top_steps : 4;
        for (int j = last; j > at; j--) acc->top_steps[j] = acc->top_steps[j - 1];
        acc->top_steps[at].node = p->steps[i].node->name;
        acc->top_steps[at].op = p->steps[i].node->op_type;
        acc->top_steps[at].share = w * gs[i];
        acc->top_steps[at].per_trial = w / (double)acc->trials_done;
        if (acc->n_top_steps < 5) acc->n_top_steps++;
    }
    int64_t batches = bf__gcache_batches(bf__dx_shared_cache(rn->dxs));
    if (full > 0) acc->work_fraction = ran / (full * (double)batches * (double)acc->trials_done);
    acc->psum.skipped = ran + skipped > 0 ? skipped / (ran + skipped) : 0;
    acc->psum.conv_skipped = conv > 0 ? skipped / conv : 0;
    for (int j = 0; j < acc->n_top_steps; j++) acc->top_steps[j].share = ran > 0 ? acc->top_steps[j].share / ran : 0;
}

static int stop_targets(const bf_campaign *c)
{
    return c->judge.stop_margin > 0 || c->judge.stop_tensor_margin > 0 || c->judge.stop_bit_margin > 0;
}

/* Sampling "adaptive": the next round's allocation once the current one
 * is folded (under mu: every worker waits at the round's end); the stop
 * rule is checked there, between rounds. Returns 1 to stop. */
static int next_round(runner *rn, bf_campaign_result *acc)
{
    int64_t first = rn->folded * rn->chunk, round;
    if (!rn->adaptive || rn->folded != rn->limit_chunk || rn->limit_chunk >= rn->n_chunks) return 0;
    /* the pilot's counts served the allocation: the estimates start after it */
    int after_pilot = acc->adaptive_rounds == 1;
    if (rn->pilot) {   /* sharded: every round planned now, none stops (campaign_adapt_shard.c) */
        int64_t rounds = 0;
        bf_status st = bf__adapt_plan_rounds(rn->c, acc, first, ADAPT_ALIGN, &rounds, &rn->err);
        if (st != BF_OK && rn->st == BF_OK) rn->st = st;
        bf__result_clear_counts(acc);
        rn->limit_chunk = rn->n_chunks;
        acc->adaptive_rounds += rounds;
        return st != BF_OK;
    }
    if (!after_pilot && stop_targets(rn->c) && bf__stop_holds(rn->c, acc)) return 1;
    bf__adapt_next_round(rn->c, acc, first, rn->n - first, ADAPT_ALIGN, &round);
    if (after_pilot) bf__result_clear_counts(acc);
    rn->limit_chunk += (round + rn->chunk - 1) / rn->chunk;
    acc->adaptive_rounds++;
    return 0;
}

/* The stop targets not met yet; sampling "adaptive": the pilot round
 * allocated, workers held at its end. */
static void start_rounds(runner *rn, bf_campaign_result *acc)
{
    bf_campaign *c = rn->c;
    acc->stop_met_at[0] = c->judge.stop_margin > 0 ? -1 : 0;
    acc->stop_met_at[1] = c->judge.stop_tensor_margin > 0 ? -1 : 0;
    acc->stop_met_at[2] = c->judge.stop_bit_margin > 0 ? -1 : 0;
    rn->limit_chunk = rn->n_chunks;
    if (c->faults.sampling != BF_SAMPLE_ADAPTIVE || rn->n == 0) return;
    int64_t round;
    rn->adaptive = 1;
    bf__adapt_next_round(c, acc, 0, rn->shard_count > 1 ? c->faults.n_trials : rn->n, ADAPT_ALIGN, &round);
    if (rn->shard_count > 1 && round < c->faults.n_trials) {
        /* every shard runs the pilot, then its share of the rest; the pilot's
         * trials count in shard 0's plan only, so the parts add up */
        int64_t rest = c->faults.n_trials - round;
        rn->pilot = round;
        /* a shard with no trial after the pilot has nothing to add: it runs none */
        rn->n = rest > rn->shard_index ? round + (rest - rn->shard_index + rn->shard_count - 1) / rn->shard_count : 0;
        rn->n_chunks = (rn->n + rn->chunk - 1) / rn->chunk;
        acc->trials_planned = rn->n > 0 ? rn->n - (rn->shard_index > 0 ? round : 0) : 0;
    }
    rn->limit_chunk = (round + rn->chunk - 1) / rn->chunk;
    acc->adaptive_pilot = round;
    acc->adaptive_rounds = 1;
}

/* Folds every finished chunk that is next in order; returns 1 once the stop
 * rule ends the campaign. */
static int fold_ready(runner *rn, bf_campaign_result *acc)
{
    const bf_campaign *c = rn->c;
    const bf_campaign_opts *o = rn->opts;
    while (rn->folded < rn->n_chunks) {
        slot *s = &rn->ring[rn->folded % rn->ring_n];
        if (s->chunk != rn->folded || !s->done) return 0;
        /* the slot is ours until `folded` moves past it: read it unlocked */
        pthread_mutex_unlock(&rn->mu);
        int stop = 0;
        for (int i = 0; i < s->n && !stop; i++) {
            bf__result_fold(c, acc, &s->rec[i], &s->first[i]);
            if (s->rec[i].trial < rn->pilot && rn->shard_index > 0) continue;   /* shard 0 reports the pilot's records */
            if (o->on_trial) o->on_trial(o->user, &s->rec[i]);
            if (o->on_outputs)
                o->on_outputs(o->user, s->rec[i].trial, s->outputs + (size_t)i * (size_t)(c->golden.samples * c->golden.out_cols),
                              c->golden.samples, c->golden.out_cols);
            if (o->on_ragged) o->on_ragged(o->user, s->rec[i].trial, s->rag[i].view, s->rag[i].n, c->golden.samples);
            stop = !rn->adaptive && stop_targets(c) && acc->trials_done % STOP_EVERY == 0 && acc->trials_done < rn->n &&
                   bf__stop_holds(c, acc);
        }
        pthread_mutex_lock(&rn->mu);
        s->chunk = -1;
        rn->folded++;
        stop = stop || next_round(rn, acc);
        pthread_cond_broadcast(&rn->room);
        if (stop) {
            acc->stopped_early = 1;
            return 1;
        }
    }
    return 0;
}

/* Waits for chunks, folds them, reports progress; returns with mu held. */
static void coordinate(runner *rn, bf_campaign_result *acc)
{
    const bf_campaign_opts *o = rn->opts;
    double last = now_s();
    pthread_mutex_lock(&rn->mu);
    for (;;) {
        if (fold_ready(rn, acc)) break;
        if (rn->folded >= rn->n_chunks || rn->st != BF_OK) break;
        if (o->cancel && bf_cancel_requested(o->cancel)) {
            rn->st = bf_error_set(&rn->err, BF_ECANCELED, "campaign canceled");
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&rn->finished, &rn->mu, &ts);
        double t = now_s();
        if (o->progress && t - last >= 0.1) {
            last = t;
            pthread_mutex_unlock(&rn->mu);
            o->progress(o->user, acc);
            pthread_mutex_lock(&rn->mu);
        }
    }
    atomic_store(&rn->halt, 1);
    pthread_cond_broadcast(&rn->room);
}

static bf_status init_locks(runner *rn, bf_error *err)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) return bf_error_set(err, BF_ENOMEM, "cannot create a condition variable");
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int n = 0;
    if (pthread_mutex_init(&rn->mu, NULL) == 0) n++;
    if (n == 1 && pthread_cond_init(&rn->room, NULL) == 0) n++;
    if (n == 2 && pthread_cond_init(&rn->finished, &ca) == 0) n++;
    pthread_condattr_destroy(&ca);
    if (n == 3) return BF_OK;
    if (n > 1) pthread_cond_destroy(&rn->room);
    if (n > 0) pthread_mutex_destroy(&rn->mu);
    return bf_error_set(err, BF_ENOMEM, "cannot create the campaign's locks");
}

static bf_status start_workers(runner *rn, int n, bf_error *err)
{
    for (int i = 0; i < n; i++) {
        if (pthread_create(&rn->ws[i].tid, NULL, worker_main, &rn->ws[i]) != 0) break;
        rn->ws[i].started = 1;
    }
    if (!rn->ws[0].started) return bf_error_set(err, BF_ENOMEM, "cannot start a worker thread");
    return BF_OK;
}

/* The ring of chunk slots the workers fill ahead of the fold. Workers run
 * ahead by up to ring_n chunks: trials vary in cost by 100x under the
 * differential engine (a fault in the first layer against one in an unused
 * embedding row), and a short ring would stall every worker behind one slow
 * chunk. */
static bf_status ring_alloc(runner *rn, int threads, bf_error *err)
{
    const bf_campaign *c = rn->c;
    rn->ring_n = (rn->opts->on_outputs || rn->opts->on_ragged ? 4 : 64) * (int64_t)threads;
    rn->ring = bf__calloc((size_t)rn->ring_n, sizeof *rn->ring);
    rn->ws = bf__calloc((size_t)threads, sizeof *rn->ws);
    if (!rn->ring || !rn->ws) return bf_error_set(err, BF_ENOMEM, "out of memory for the campaign's workers");
    for (int64_t i = 0; i < rn->ring_n; i++) {
        rn->ring[i].chunk = -1;
        if (!rn->opts->on_outputs) continue;
        rn->ring[i].outputs =
            bf__malloc((size_t)rn->chunk * (size_t)(c->golden.samples * c->golden.out_cols) * sizeof(float) + 1);
        if (!rn->ring[i].outputs) return bf_error_set(err, BF_ENOMEM, "out of memory for the trials' outputs");
    }
    return BF_OK;
}

/* The differential engine's shared state and one executor per worker: the
 * golden pass prepared with the campaign adopted, or made here on the
 * workers' plans. */
static bf_status setup_differential(runner *rn, int threads, int64_t budget, bf_campaign_result *acc, bf_error *err)
{
    bf_campaign *c = rn->c;
    bf_status st;
    if (rn->adopt) {
        rn->dxs = c->golden.gdx;
        c->golden.gdx = NULL;
    } else {
        /* the cache's golden pass on every worker's plans, in parallel */
        double t1 = now_s();
        bf_evaluator **evs = bf__calloc((size_t)threads, sizeof *evs);
        if (!evs) return bf_error_set(err, BF_ENOMEM, "out of memory for the campaign's workers");
        for (int i = 0; i < threads; i++) evs[i] = rn->ws[i].ev;
        st = bf__dx_shared_create(evs, threads, c->golden.samples, c->golden.out, c->golden.out_cols, (size_t)budget,
                                  rn->opts->near_exact, &rn->dxs, err);
        bf__free(evs);
        acc->setup.cache = now_s() - t1;
        if (st != BF_OK) return st;
    }
    acc->cache_bytes = bf__gcache_served(bf__dx_shared_cache(rn->dxs));
    acc->cache_pass_bytes = bf__dx_shared_cache_bytes(rn->dxs);
    acc->param_bytes = bf__dx_shared_param_bytes(rn->dxs);
    acc->psum.bytes = bf__dx_shared_psum_bytes(rn->dxs, &acc->psum.convs);
    double t2 = now_s();
    st = bf__scorer_create(rn->ws[0].ev, c->golden.out, c->golden.seg_pred, c->golden.samples, c->golden.out_cols, &rn->scorer,
                           err);
    if (st != BF_OK) return st;
    for (int i = 0; i < threads; i++) {
        if ((st = bf__dx_create(rn->dxs, rn->ws[i].ev, &rn->ws[i].dx, err)) != BF_OK ||
            (st = bf__score_scratch_init(&rn->ws[i].sc, rn->scorer, c->golden.samples, err)) != BF_OK)
            return st;
        if (rn->opts->no_full_pass) bf__dx_no_full_pass(rn->ws[i].dx);
        if (rn->opts->near_exact) bf__dx_near_exact(rn->ws[i].dx);
    }
    bf__dx_shared_drop_pools(rn->dxs);   /* the golden pass's pools no worker's places took */
    acc->setup.executors = now_s() - t2;
    return BF_OK;
}

/* The workers' accounting, once they are joined. */
static void worker_account(const runner *rn, bf_campaign_result *acc)
{
    double last = 0;
    for (int i = 0; i < rn->n_workers; i++)
        if (rn->ws[i].started && rn->ws[i].end > last) last = rn->ws[i].end;
    for (int i = 0; i < rn->n_workers; i++) {
        const worker *w = &rn->ws[i];
        if (!w->started) continue;
        acc->workers.n++;
        acc->workers.cpu += w->cpu;
        if (w->cpu > acc->workers.cpu_max) acc->workers.cpu_max = w->cpu;
        acc->workers.wait += w->wait;
        acc->workers.idle_end += last - w->end;
        acc->workers.faults += w->faults;
        acc->workers.trials += w->trials;
    }
}

/* Frees the workers and the ring, first adding what their engines counted
 * to acc. */
static void teardown(runner *rn, bf_campaign_result *acc)
{
    if (rn->ws && rn->n_workers > 0 && rn->ws[0].ev && !rn->ws[0].dx)
        acc->fused_activations = (int64_t)bf_evaluator_num_fused(rn->ws[0].ev);
    for (int i = 0; rn->ws && i < rn->n_workers; i++) {
        worker *w = &rn->ws[i];
        if (w->dx) {
            int64_t t, e, l;
            bf__dx_chain_counts(w->dx, &t, &e, &l);
            acc->chain_trials += t;
            acc->chain_exact += e;
            acc->chain_linear += l;
            acc->full_trials += bf__dx_full_passes(w->dx);
            acc->param_copy_bytes += bf__dx_pv_copy_bytes(w->dx);
            acc->fused_activations += bf__dx_fused_runs(w->dx);
            acc->psum.resumed += bf__dx_psum_resumed(w->dx);
            int64_t pr, pp, po;
            bf__dx_pos_counts(w->dx, &pr, &pp, &po);
            acc->pos.runs += pr, acc->pos.positions += pp, acc->pos.of += po;
            acc->chan_steps += bf__dx_chan_steps(w->dx);
            acc->out_batched += bf__dx_out_batched(w->dx);
            acc->out_in_place += bf__dx_out_in_place(w->dx, 0);
            acc->out_in_place_chan += bf__dx_out_in_place(w->dx, 1);
            int64_t pls;
            acc->plane_resizes += bf__dx_plane_steps(w->dx, &pls);
            acc->plane_resize_planes += pls;
            int64_t k[5];
            bf__dx_chan_kinds(w->dx, k);
            acc->chan_kinds.resize += k[0], acc->chan_kinds.concat += k[1];
            acc->chan_kinds.conv += k[2], acc->chan_kinds.gate += k[3], acc->chan_kinds.reduce += k[4];
        }
        bf__dx_free(w->dx);
        bf__score_scratch_free(&w->sc);
        bf_evaluator_free(w->ev);
        if (i > 0) bf_generator_free(w->gen);   /* worker 0's is the campaign's golden one */
        bf__free(w->gen_tokens);
        bf__free(w->det_crit);
        bf__free(w->det_labels);
        bf__draw_free(&w->d);
        for (size_t g = 0; g < BF_FAULT_GROUPS_MAX - 1; g++) bf__draw_free(&w->dg[g]);
        bf__free(w->old);
        bf__free(w->dw);
        bf__free(w->dw_at);
        bf__free(w->vf);
        bf__free(w->vf_old);
    }
    bf__free(rn->ws);
    bf__dx_shared_free(rn->dxs);
    bf__scorer_free(rn->scorer);
    for (int64_t i = 0; rn->ring && i < rn->ring_n; i++) {
        bf__free(rn->ring[i].outputs);
        for (int k = 0; k < CHUNK_OUTPUTS; k++) bf__ragcopy_free(&rn->ring[i].rag[k]);
    }
    bf__free(rn->ring);
    bf__free(rn->tail_order);
}

/* Whether the run starts from the campaign's golden pass and cache: a
 * differential run with the budget it was made with; a cache made without
 * the near-exact updates' tables serves a run that asks for them only
 * exactly (such a run makes its own), and one drawn for a shard's trials
 * serves that shard only. */
static int golden_fits(const bf_campaign *c, const runner *rn, int64_t budget)
{
    const bf__golden *g = &c->golden;
    return g->gdx && g->n_gev > 0 && !rn->exact && g->gdx_budget == budget &&
           (!rn->opts->near_exact || bf__dx_shared_is_near_exact(g->gdx)) &&
           (g->gdx_shard_count <= 1 || (g->gdx_shard_count == rn->shard_count && g->gdx_shard_index == rn->shard_index));
}

/* The golden pass's evaluators no worker took: freed before the trials. */
static void drop_golden_evaluators(bf_campaign *c)
{
    for (int k = 0; c->golden.gev && k < c->golden.n_gev; k++) bf_evaluator_free(c->golden.gev[k]);
    bf__free(c->golden.gev);
    c->golden.gev = NULL;
    c->golden.n_gev = 0;
}

bf_status bf_campaign_run(bf_campaign *c, const bf_campaign_opts *opts, bf_campaign_result *out, bf_error *err)
{
    static const bf_campaign_opts none = {0};
    const bf_campaign_opts *o = opts ? opts : &none;
    /* a one-sample graph's checkpoints: its workers are the exact engine's,
     * each image resumed from a checkpoint */
    runner rn = {.c = c, .opts = o, .ckpt = !o->exact && c->golden.ckpt && !c->groups.n};
    rn.exact = o->exact != 0 || c->golden.full_reason || rn.ckpt;
    bf_campaign_result acc = {0};
    bf_status st;
    int locks = 0;
    double t0 = now_s();
    memset(out, 0, sizeof *out);

    rn.shard_count = o->shard_count > 0 ? o->shard_count : 1;
    rn.shard_index = o->shard_index;
    if (rn.shard_index < 0 || rn.shard_index >= rn.shard_count)
        return bf_error_set(err, BF_EINVAL, "shard %lld of %lld does not exist (0..%lld)", (long long)rn.shard_index,
                            (long long)rn.shard_count, (long long)rn.shard_count - 1);
    rn.n = rn.shard_index < c->faults.n_trials ? (c->faults.n_trials - rn.shard_index + rn.shard_count - 1) / rn.shard_count : 0;
    int threads = o->threads > 0 ? o->threads : 1;
    if (threads > BF__CAMPAIGN_THREADS_MAX) threads = BF__CAMPAIGN_THREADS_MAX;
    if (rn.ckpt && c->golden.imaj) threads = 1;   /* an image-major sweep ran the trials: their fold is left */
    rn.chunk = chunk_size(rn.n, threads, o->on_outputs || o->on_ragged ? CHUNK_OUTPUTS : CHUNK);
    rn.n_chunks = (rn.n + rn.chunk - 1) / rn.chunk;

    if ((st = bf__result_init(&acc, c->surface.n_sites, c->faults.kind == BF_FAULT_BER ? c->faults.n_rates : 0, err)) != BF_OK) return st;
    if ((st = bf__result_init_groups(&acc, c, err)) != BF_OK) {
        bf_campaign_result_free(&acc);
        return st;
    }
    acc.trials_planned = rn.n;
    acc.tail_first = -1;
    memcpy(acc.golden, c->golden.metric, sizeof acc.golden);
    acc.task = c->golden.task;
    acc.samples = c->golden.samples;
    start_rounds(&rn, &acc);   /* a sharded adaptive run's size: its pilot and share */
    rn.tail_from = rn.n_chunks;   /* chunks in trial order (campaign_order.c may change the last ones') */
    if (threads > rn.n_chunks) threads = rn.n_chunks > 0 ? (int)rn.n_chunks : 1;
    if (rn.n == 0) goto out;

    if ((st = ring_alloc(&rn, threads, err)) != BF_OK) goto out;
    rn.n_workers = threads;
    /* A golden pass made for a differential run with this budget is used,
     * not made again; one that cannot be used is freed before the workers
     * allocate theirs. */
    int64_t budget = o->cache_budget > 0 ? o->cache_budget : BF_CACHE_BUDGET_DEFAULT;
    rn.adopt = golden_fits(c, &rn, budget);
    if (!rn.adopt) {
        bf__dx_shared_free(c->golden.gdx);
        c->golden.gdx = NULL;
    }
    if (!rn.adopt && !rn.ckpt) {   /* a one-sample graph's golden evaluator is worker 0 (campaign_ckpt.c) */
        for (int k = 0; c->golden.gev && k < c->golden.n_gev; k++) bf_evaluator_free(c->golden.gev[k]);
        c->golden.n_gev = 0;
    }
    acc.setup.plans = c->setup.plans;
    acc.setup.golden = c->setup.golden;
    acc.setup.golden_cpu = c->setup.golden_cpu;
    acc.setup.index = c->setup.index;
    acc.setup.golden_threads = c->setup.golden_threads;
    /* Evaluators are built here, one after another, before any worker
     * starts. */
    for (int i = 0; i < threads; i++) {
        rn.ws[i].rn = &rn;
        if ((st = worker_init(&rn, &rn.ws[i], i, &acc, err)) != BF_OK) goto out;
        if ((st = worker_gen(&rn, &rn.ws[i], i, &acc, err)) != BF_OK) goto out;
    }
    drop_golden_evaluators(c);
    acc.exact = rn.exact && !rn.ckpt;
    if (!o->exact) acc.full_reason = c->golden.full_reason;
    rn.golden_finite = 1;
    for (int64_t i = 0; i < c->golden.samples * c->golden.out_cols; i++) rn.golden_finite &= isfinite(c->golden.out[i]) != 0;
    if (!rn.exact && (st = setup_differential(&rn, threads, budget, &acc, err)) != BF_OK) goto out;
    /* no trial past the last stop-rule check before the end is computed ahead of it */
    int64_t last_check = stop_targets(c) ? (rn.n - 1) / STOP_EVERY * STOP_EVERY : 0;
    if ((st = bf__run_order_tail(&rn, last_check / rn.chunk, err)) != BF_OK) goto out;
    acc.tail_ordered = rn.n - rn.tail_from * rn.chunk;
    acc.tail_first = acc.tail_ordered > 0 ? bf__run_trial_of(&rn, rn.tail_order[0] * rn.chunk) : -1;
    acc.setup_seconds = now_s() - t0;
    if ((st = init_locks(&rn, err)) != BF_OK) goto out;
    locks = 1;
    if ((st = start_workers(&rn, threads, err)) != BF_OK) goto out;
    coordinate(&rn, &acc);
    pthread_mutex_unlock(&rn.mu);
    for (int i = 0; i < threads; i++)
        if (rn.ws[i].started) pthread_join(rn.ws[i].tid, NULL);
    worker_account(&rn, &acc);
    if ((st = rn.st) != BF_OK) {
        if (st == BF_ECANCELED)
            bf_error_set(err, BF_ECANCELED, "campaign canceled after %lld of %lld trials", (long long)acc.trials_done,
                         (long long)rn.n);
        else if (err)
            *err = rn.err;
    }
out:
    if (st == BF_OK) work_summary(&rn, &acc);
    /* which stop targets the trials run reached, when the rule did not end them */
    if (st == BF_OK && !acc.stopped_early && stop_targets(c) && acc.trials_done > 0) bf__stop_holds(c, &acc);
    if (st == BF_OK && rn.ckpt) {
        bf_evaluator *evs[BF__CAMPAIGN_THREADS_MAX];
        for (int i = 0; i < rn.n_workers && i < BF__CAMPAIGN_THREADS_MAX; i++) evs[i] = rn.ws ? rn.ws[i].ev : NULL;
        bf__campaign_ckpt_summary(c, evs, rn.n_workers, &acc);
    }
    if (locks) {
        pthread_cond_destroy(&rn.room);
        pthread_cond_destroy(&rn.finished);
        pthread_mutex_destroy(&rn.mu);
    }
    teardown(&rn, &acc);
    if (st != BF_OK) {
        bf_campaign_result_free(&acc);
        return st;
    }
    acc.seconds = now_s() - t0;
    *out = acc;
    return BF_OK;
}
