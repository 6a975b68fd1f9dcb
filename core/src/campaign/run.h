/* The runner's state (campaign_run.c) and its workers', shared with
 * campaign_trial.c, which computes one trial on a worker. */
#ifndef BF_CAMPAIGN_RUN_H
#define BF_CAMPAIGN_RUN_H

#include <pthread.h>
#include <stdatomic.h>

#include "campaign/campaign_impl.h"
#include "diff/diff.h"

#define CHUNK 16            /* trials a worker takes at a time (at most); 64 saved a few
                             * wake-ups at one thread but cost two threads a fifth of their
                             * rate on microsecond trials (docs/BENCHMARKS.md) */
#define CHUNK_OUTPUTS 4     /* ... when each slot holds its trials' outputs */
#define ADAPT_ALIGN 16      /* adaptive rounds are multiples of this many trials (a multiple
                             * of every chunk size), whatever the chunk and the threads */

typedef struct slot {
    int64_t chunk;          /* the chunk it holds; -1: free */
    int done;
    int n;
    bf_trial_record rec[CHUNK];
    bf__first first[CHUNK];
    float *outputs;         /* on_outputs only: CHUNK_OUTPUTS x samples x out_cols */
    bf__ragcopy rag[CHUNK_OUTPUTS];   /* on_ragged only: each trial's per-sample outputs */
} slot;

typedef struct runner runner;

typedef struct worker {
    runner *rn;
    bf_evaluator *ev;
    bf__draw d;
    bf__draw dg[BF_FAULT_GROUPS_MAX - 1];   /* fault groups 1..: their draws */
    float *old;             /* the values a trial overwrote, to restore */
    size_t old_cap;
    bf_value_fault *vf;     /* activations, inputs: the trial's faults */
    float *vf_old, *vf_new; /* what each found and left */
    size_t vf_cap;
    bf__dx *dx;             /* differential executor; NULL: exact mode */
    bf__score_scratch sc;
    const int64_t *rows;    /* the last differential trial's changed samples; NULL: exact */
    int64_t n_rows;
    bf__dx_weight *dw;      /* its weight faults */
    size_t dw_cap, n_dw;
    size_t *dw_at;          /* weights fault groups: dw's entries by (param, index), 1 + entry, 0 free */
    size_t dw_at_cap;       /* ... a power of two */
    int64_t *det_crit;      /* detection: per image, critical (det_judge) */
    int64_t *det_labels;    /* ... the trial's labels as int64 */
    size_t det_cap;
    struct bf_generator *gen;   /* the campaign generates: this worker's decoder */
    int64_t *gen_tokens;        /* ... and its tokens, prompts x new tokens */
    bf_error err;
    pthread_t tid;
    int started;
    /* its own accounting (worker_main; --stats' workers line): thread CPU
     * seconds and page faults (minor and major) over its life, the trials
     * it ran, the wall seconds it waited for room in the ring (or the next
     * adaptive round), and when (now_s) it took no more chunks */
    double cpu, wait, end;
    int64_t faults, trials;
} worker;

struct runner {
    bf_campaign *c;
    const bf_campaign_opts *opts;
    int exact;              /* opts->exact, or a model the differential engine declines */
    int ckpt;               /* ... a one-sample graph's trials resume from golden checkpoints (campaign_ckpt.c) */
    int64_t shard_index, shard_count;
    int64_t pilot;          /* sharded "adaptive": the pilot's trials, 0..pilot-1 in every shard */
    int64_t n;              /* trials in this shard */
    int chunk;              /* trials per chunk */
    int64_t n_chunks;
    slot *ring;
    int64_t ring_n;
    worker *ws;
    int n_workers;
    bf__dx_shared *dxs;     /* the golden cache and graph facts all executors share */
    int adopt;              /* worker 0 and dxs are the campaign's prepared golden pass's */
    bf__scorer *scorer;
    int golden_finite;      /* every golden output finite: classify may skip unchanged rows */

    pthread_mutex_t mu;
    pthread_cond_t room, finished;   /* workers wait for room; the coordinator for chunks */
    int64_t next_chunk, folded;      /* under mu; next_chunk counts hand-outs (bf__run_chunk_at) */
    int64_t tail_from;               /* hand-outs from here take tail_order's chunks (campaign_order.c); */
    int64_t *tail_order;             /* ... n_chunks: the trials' order throughout */
    int adaptive;                    /* sampling "adaptive": chunks are taken a round at a time */
    int64_t limit_chunk;             /* ... the current round's end (else n_chunks), under mu */
    bf_status st;                    /* first failure, under mu */
    bf_error err;
    atomic_int halt;                 /* stop taking or computing trials */
};

/* The trial a shard's k-th trial is (0-based): the pilot's trials are
 * every shard's, the rest dealt round-robin. */
static inline int64_t bf__run_trial_of(const runner *rn, int64_t k)
{
    return k < rn->pilot ? k : rn->pilot + rn->shard_index + (k - rn->pilot) * rn->shard_count;
}

/* The chunk the h-th hand-out takes. */
static inline int64_t bf__run_chunk_at(const runner *rn, int64_t h)
{
    return h < rn->tail_from ? h : rn->tail_order[h - rn->tail_from];
}

/* campaign_order.c: the campaign's last chunks (from chunk not_before on)
 * handed out most expensive first; sets tail_from and tail_order, or
 * leaves tail_from at n_chunks. */
bf_status bf__run_order_tail(runner *rn, int64_t not_before, bf_error *err);

/* campaign_trial.c: trial t on worker w into rec (its first flipped bit
 * in *first_bit); outputs, rag: where its outputs go, or NULL. */
bf_status bf__run_trial(worker *w, int64_t t, bf_trial_record *rec, bf__first *first, float *outputs, bf__ragcopy *rag);

#endif
