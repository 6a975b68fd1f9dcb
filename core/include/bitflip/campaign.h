/* bitflip — campaigns: a seeded, deterministic list of trials, each a fault
 * (or, for BER, a set of faults) applied for one pass over the eval set,
 * classified against the golden pass and aggregated.
 *
 * The spec, the engine's form of the JSON campaign spec (api/ parses and
 * validates the JSON into it), with its targets, sites and persistence, is
 * in bitflip/campaign_spec.h, which this header includes. Trial t's faults
 * depend only on (seed, t) (see rng.h): results are the same for any thread
 * count, chunking or shard. Aggregates are sums, so shards merge exactly. */
#ifndef BITFLIP_CAMPAIGN_H
#define BITFLIP_CAMPAIGN_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/campaign_spec.h"
#include "bitflip/dataset.h"
#include "bitflip/errmap.h"
#include "bitflip/error.h"
#include "bitflip/eval.h"
#include "bitflip/mitigate.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "bitflip/repr.h"
#include "bitflip/sites.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- results ---------------------------------------------------------- */

/* One fault of a trial as applied: where, which bits (`mask` in the
 * representation's bits), the stored value before and after (decoded). For
 * activations and inputs these are the values in the sample hit (permanent:
 * in sample 0): the computed value as held in the representation, and what
 * the fault made of it. */
typedef struct bf_applied_fault {
    int64_t site;             /* index into its group's sites (bf_campaign_group_site; group 0: bf_campaign_site) */
    int64_t index;            /* flat element index in the tensor (activations, inputs: within a sample) */
    int64_t sample;           /* transient: eval sample hit; -1 otherwise */
    uint32_t mask;
    float old_value, new_value;
    /* a dynamic site (bf_site.dynamic): the elements the value had in the
     * sample hit (permanent: sample 0), and `index` the element struck
     * there; 0 elements (an empty value: no detection) or an explicit index
     * past them: the fault did nothing, index -1, old and new NaN. 0 for
     * every other site. */
    int64_t run_elements;
    /* the fault group it came from (bf_campaign_spec.groups: 0 the spec's
     * own); `site` indexes that group's sites (bf_campaign_group_site) */
    int group;
} bf_applied_fault;

#define BF_TRIAL_FAULTS_MAX 8 /* faults kept per trial record (BER may apply more) */

typedef struct bf_trial_record {
    int64_t trial;
    bf_outcome outcome;
    int rate_index;           /* BER: index into spec rates; else -1 */
    int64_t n_faults;         /* faults applied (BER: may exceed the kept ones) */
    int n_kept;
    bf_applied_fault faults[BF_TRIAL_FAULTS_MAX];
    double metrics[BF_METRIC_COUNT];   /* NaN where not applicable */
    int64_t changed;          /* samples whose prediction changed (language_model:
                               * labelled positions whose arg-max changed) */
} bf_trial_record;

/* Counts of outcomes: the unit every aggregate is made of. */
typedef struct bf_outcome_counts {
    int64_t n[BF_OUTCOME_COUNT];
} bf_outcome_counts;

/* Running sums of a metric, for mean, std and interval; merge by adding. */
typedef struct bf_metric_sums {
    int64_t n;
    double sum, sumsq;
} bf_metric_sums;

/* IVMOD's parts (detection and segmentation tasks) over a group of trials:
 * the trials, the images their faults made critical (bf_trial_record.changed)
 * summed, and the sum of each trial's count squared (for the interval of the
 * mean over trials). IVMOD = critical / (trials x samples). Integers, so
 * shards merge exactly. */
typedef struct bf_ivmod_sums {
    int64_t trials, critical, critical_sq;
} bf_ivmod_sums;

typedef struct bf_campaign_result {
    int64_t trials_planned;   /* in this shard */
    int64_t trials_done;
    int stopped_early;        /* the stop rule ended the campaign */
    /* The stop targets (overall, per tensor, per bit): trials_done when each
     * first held at a check; 0: not a target, or not met (-1). */
    int64_t stop_met_at[3];
    /* sampling "adaptive": the pilot's trials and the rounds run */
    int64_t adaptive_pilot, adaptive_rounds;
    bf_outcome_counts total;
    bf_outcome_counts *by_site;          /* n_sites */
    size_t n_sites;
    bf_outcome_counts by_bit[64];        /* by bit position of the first fault bit */
    bf_outcome_counts *by_site_bit;      /* [n_sites][64]: by_site split by that bit (the
                                          * tensor x bit heatmap); single faults only */
    /* Fault groups 1.. (docs/CAMPAIGNS.md, "Fault groups"): what by_site
     * and by_bit are for group 0, for each other group: a trial counts
     * under that group's first fault (its site, its first bit) when the
     * group is not a BER one (a BER trial is its rate's). group_by_site
     * holds the groups' sites one after another, group g's from
     * group_site0[g - 1] (n_group_sites in all); group_by_bit[g - 1][b]. */
    bf_outcome_counts *group_by_site;
    size_t n_group_sites;
    size_t n_extra_groups;                          /* groups after group 0 */
    size_t group_site0[BF_FAULT_GROUPS_MAX];
    bf_outcome_counts group_by_bit[BF_FAULT_GROUPS_MAX - 1][64];
    /* detection, segmentation: IVMOD's parts per site, per bit (the first
     * fault bit) and per site x bit, grouped as by_site, by_bit and
     * by_site_bit; all zeros for other tasks */
    bf_ivmod_sums *ivmod_by_site;        /* n_sites */
    bf_ivmod_sums ivmod_by_bit[64];
    bf_ivmod_sums *ivmod_by_site_bit;    /* [n_sites][64] */
    bf_metric_sums metric[BF_METRIC_COUNT];               /* over all trials */
    bf_metric_sums *rate_metric;         /* BER: [n_rates][BF_METRIC_COUNT] */
    bf_outcome_counts *by_rate;          /* BER: n_rates */
    size_t n_rates;
    /* golden pass */
    double golden[BF_METRIC_COUNT];
    bf_task task;
    int64_t samples;
    double seconds;
    /* how it ran (not part of the result proper: shards and modes agree on
     * everything above) */
    int exact;                /* every trial a full pass */
    /* why every trial was a full pass though bf_campaign_opts.exact was 0
     * (the differential engine declined the model: a one-sample graph, or
     * shapes that are data), for --stats; NULL:
     * it was not declined */
    const char *full_reason;
    double setup_seconds;     /* of `seconds`: workers' plans and golden checks, the cache */
    /* Where the setup went, in seconds. Creating the campaign (before
     * `seconds`): the golden evaluators' plans built, the golden pass (with
     * the cache when prepared differential) on golden_threads threads (and
     * the process's CPU time during it, golden_cpu), what
     * the differential engine finds on it (embedding index, exact Gemm
     * blocks, chains). Of setup_seconds: the workers' plans this run built,
     * their golden checks (the exact engine), the cache when the run had to
     * make it, the executors' state. */
    struct {
        double plans, golden, golden_cpu, index;
        int golden_threads;
        double worker_plans, checks, cache, executors;
    } setup;
    size_t cache_bytes;       /* the golden-activation cache: every value it serves, its memory once
                               * trials have read them all (at most the budget) */
    size_t cache_pass_bytes;  /* ... of which the golden pass wrote (the rest is computed from a
                               * stored value when a trial first reads it, docs/ENGINE.md) */
    /* The partial-sum resume (docs/ENGINE.md, step 4): the golden pass's
     * checkpoints (bytes, within --cache-budget, and Convs), the trials'
     * whole Conv re-runs that resumed from one, and the Conv work they
     * skipped, weighted as work_fraction: as a share of all the trials'
     * re-run work (skipped included), and of their Convs' alone. 0: none. */
    struct {
        size_t bytes;
        int convs;
        int64_t resumed;
        double skipped, conv_skipped;
    } psum;
    /* Conv re-runs at the output positions their moved input reaches
     * alone (docs/ENGINE.md, step 4): the re-runs, the positions they
     * computed, and the positions of the batches they ran on. 0: none. */
    struct {
        int64_t runs, positions, of;
    } pos;
    size_t param_bytes;       /* parameter-only values (a weight's Transpose, ...) computed once and
                               * held outside the cache's budget: weight-sized, docs/ENGINE.md */
    size_t param_copy_bytes;  /* ... and those left past its limit that the cache does not serve,
                               * copied once into each worker (all workers together) */
    int64_t chain_trials;     /* trials the differential engine ran in chain mode (a corrupted Gemm
                               * on a chain of per-sample steps, docs/ENGINE.md) */
    int64_t chain_exact;      /* ... of which, with no witness among the samples tried, exactly */
    int64_t chain_linear;     /* samples those trials ran through a linear segment (a Gemm, ReLU
                               * and Gemm as one map per sample, docs/ENGINE.md) */
    int64_t full_trials;      /* trials the differential engine ran as full passes, as the exact
                               * engine does: more faults than a batch has samples, reaching at
                               * least 80% of the pass's work (docs/ENGINE.md); 0 with
                               * bf_campaign_opts.no_full_pass */
    /* the exact engine: the activations (Relu, Clip, HardSwish),
     * BatchNormalizations and residual Adds each pass runs in their Conv's
     * epilogue, a chain counted once (bf_evaluator_num_fused; a trial
     * faulting a Conv's output runs that chain unfused); the differential
     * engine: how many times its trials re-ran such a Conv (a batch each)
     * with its chain in the epilogue, summed over the trials */
    int64_t fused_activations;
    /* the differential engine: how many steps its trials ran on one channel
     * of their output alone (a batch each, summed over the trials): the
     * channel-local steps after a Conv whose one corrupted weight moved one
     * channel, or after a fault in one channel (BatchNormalization,
     * activations, depthwise Conv, Add or Mul with a golden operand,
     * pooling, Resize, Concat; docs/ENGINE.md); one image per call (a
     * detector's checkpoints): the images whose faulted Conv ran on its one
     * moved channel over its golden output (exec/ckpt_chan.c); 0 when exact */
    int64_t chan_steps;
    /* the differential engine: how many times its trials ran the graph's
     * output Gemm (a classifier) once over the changed input rows of every
     * batch instead of once per batch (the weight read once a trial;
     * docs/ENGINE.md, step 4); 0 when exact */
    int64_t out_batched;
    /* the differential engine: batches whose changed graph output a trial's
     * re-run steps wrote straight into the trial's outputs, compared with
     * golden row by row as they were written (or on the one channel that
     * moved) and not copied afterwards (docs/ENGINE.md, step 5); 0 when
     * exact */
    int64_t out_in_place;
    /* ... of them, written on the one channel that moved (a channel-local
     * step computing the output: the changed samples found on that channel
     * alone) */
    int64_t out_in_place_chan;
    /* the differential engine: Resize steps (keeping dims 0 and 1: a
     * segmenter's upsampling) that a trial ran on the [N, C] planes whose
     * input changed alone, over golden bits, and how many planes in all
     * (docs/ENGINE.md, step 4, "Plane-local Resize"); 0 when exact */
    int64_t plane_resizes, plane_resize_planes;
    /* of chan_steps, those of a Resize, a Concat, a Conv with golden weights
     * (depthwise, or grouped with one output channel a group), an Add, Sub,
     * Mul or Div with a changed operand broadcast over the planes (a
     * squeeze-excitation gate), a ReduceMean or ReduceSum over each plane,
     * and the checkpoints' Convs above (ckpt_fused: those of them whose
     * fused epilogue, a BatchNormalization, residual Add or activation, ran
     * on the one channel too; ckpt_follow: the steps after such a Conv
     * that followed its channel on, a unary map, a BatchNormalization or a
     * depthwise Conv reading its output alone) */
    struct {
        int64_t resize, concat, conv, gate, reduce, ckpt_conv, ckpt_fused, ckpt_follow;
    } chan_kinds;
    /* The campaign's last trials (four chunks a worker, every trial of a
     * campaign of at most 64 trials a worker; after the last
     * stop-rule check) handed out most expensive first, by the share of the
     * pass their weight faults reach, so that no worker is left with a long
     * trial at the end (docs/ENGINE.md, step 9): how many, and the
     * trial handed out first among them; 0 and -1 when they ran in order (one
     * thread, the exact engine, adaptive sampling, activation or BER faults).
     * Results do not depend on it: records are folded in trial order. */
    int64_t tail_ordered, tail_first;
    /* The workers' own accounting (--stats' workers line): how many ran,
     * the trials they computed (summed: trials_done, and more when a stop
     * rule discarded some computed ahead), their threads' CPU seconds
     * summed and the busiest one's (their plans' first touches, the trials,
     * the hand-offs), their page faults summed (minor: first touches of
     * their plans' slots; Linux, else 0), the wall seconds they waited for
     * room in the ring of trials ahead of the fold, or (sampling
     * "adaptive") for the next round (summed), and those each
     * waited from its last trial to the end of the last worker's (idle_end,
     * summed: the hand-out's imbalance). Zeros when no worker ran. */
    struct {
        int n;
        int64_t trials, faults;
        double cpu, cpu_max, wait, idle_end;
    } workers;
    /* What the differential engine saved: the work of the steps it re-ran in
     * full or on rows (weighted by each step's time on the golden pass),
     * over what re-running every trial in full would cost; NaN when exact.
     * Chain-mode trials and Gemm/Conv updates count as no re-run. And the
     * steps that took most of that work (node names are the model's). */
    double work_fraction;
    struct {
        const char *node, *op;
        double share;         /* of the trials' re-run work */
        double per_trial;     /* batches of it re-run per trial */
    } top_steps[5];
    int n_top_steps;
    /* A one-sample graph's campaign (a detector's; docs/ENGINE.md, "One
     * image per call"): the golden pass's checkpoints (cuts, bytes over
     * every sample), the share of each image's pass they were expected to
     * skip (weighted by where the faults land), and the images a trial
     * ended early at a checkpoint whose values came back golden. cuts 0:
     * not used (work_fraction is then the differential engine's, or NaN).
     * skipped: the steps, summed over the images the trials ran, that came
     * after the restored cut and that the trial's faults could not reach,
     * so did not run; stored, store_bytes: the golden values the golden
     * pass kept for them (those that steps a fault reaches read; bytes over
     * every sample, within --cache-budget, counted in bytes too).
     * early_chan: of early, the images that ended at a Conv run on its one
     * channel (chan_kinds.ckpt_conv), or a step following it on, whose
     * channel came back golden. byte_price: the seconds a recorded byte
     * was priced at when they were chosen, 1e-9 or, where this host's
     * fresh pages measured dear, 2.5e-9 (docs/perf/detectors.md, h18-ssd);
     * huge_pages: 1 when they were recorded in 2 MiB pages, this host's 4
     * KiB ones measured dear and 2 MiB ones cheap (h21-ssd). early_tail:
     * of early, the images that ended before the detection tail's class
     * scores because the rows of class logits the faults moved select,
     * by their Softmax scores and thresholds, the golden (row, class)
     * pairs with the golden scores (docs/ENGINE.md, "One image per call",
     * item 7); tail_off: why that check is off for this graph (a static
     * sentence), NULL when it is on. */
    struct {
        size_t cuts;
        uint64_t bytes;
        double expected_skip;
        int64_t early, early_chan, early_tail;
        const char *tail_off;
        int64_t skipped;
        size_t stored;
        uint64_t store_bytes;
        double byte_price;
        int huge_pages;
        /* image_major: the trials ran image-major (bf_campaign_prep.
         * image_major; the golden pass image by image, every trial on each
         * image after it, one image's checkpoints held); else imaj_off says
         * why not (static text) */
        int image_major;
        const char *imaj_off;
        /* image-major's block: the images each thread ran every trial on
         * at a time (bf_campaign_prep.image_block; 0: trial-major) */
        int64_t image_block;
    } ckpt;
} bf_campaign_result;

void bf_campaign_result_free(bf_campaign_result *r);   /* frees members */
/* Adds b into a (same campaign, another shard); fails if shapes differ. */
bf_status bf_campaign_result_merge(bf_campaign_result *a, const bf_campaign_result *b, bf_error *err);

/* --- statistics -------------------------------------------------------- */

/* Wilson score interval for k successes in n trials at `confidence`. */
void bf_wilson(int64_t k, int64_t n, double confidence, double *lo, double *hi);
/* Two-sided normal quantile z for a confidence (0.95 -> 1.95996...). */
double bf_z_for_confidence(double confidence);
/* Leveugle et al. (DATE 2009): trials for `margin` at `confidence` over a
 * population of N faults, with p = 0.5 (the worst case). */
int64_t bf_leveugle_trials(double population, double margin, double confidence);

/* --- running ----------------------------------------------------------- */

typedef struct bf_campaign bf_campaign;

/* A fault site: a tensor the spec selected, with its element count. */
typedef struct bf_site {
    const char *name;
    const char *op;           /* op reading it (weights, inputs) or producing it (activations) */
    const char *torch_name;   /* weights: the PyTorch name (bf_param_info), or NULL */
    const char *torch_note;   /* ... and how the tensor differs from it, or NULL */
    int64_t elements;         /* activations, inputs: per sample */
    int bits;                 /* bits per element in the representation */
    /* activations: 1 when a dynamic step computes the value (its shape is
     * data: boxes after NMS). Its elements differ per sample and run, so
     * `elements` is its weight: the golden pass's elements per sample over
     * the eval set (their mean, rounded; at least 1 if any sample has
     * one), and a drawn fault's element is drawn uniformly over the
     * elements it has in the run it strikes (bf_value_fault.drawn;
     * docs/CAMPAIGNS.md "Faults after NMS") */
    int dynamic;
    /* activations: the named site this node output is (bitflip/sites.h:
     * "attn_probs.3"), or NULL; `tensors` patterns match it as well as name */
    const char *site;
    /* kv_cache: the layer, 'k' or 'v' (0 for every other site), and where
     * its entries lie in the value (bitflip/sites.h) */
    int kv_layer;
    char kv_kind;
    bf_kv_site_layout kv;
} bf_site;

/* A kv_cache site's entry at element `index` of a sample's slice. */
void bf_site_kv_entry(const bf_site *site, int64_t index, int64_t *head, int64_t *position, int64_t *dim);

/* Default batch of a campaign's passes (bf_campaign_spec.batch 0), for a
 * model whose sample's activations take at most 1 MiB (campaign_batch.c). */
#define BF_CAMPAIGN_BATCH_DEFAULT 64

/* Default bytes of an image-major sweep's checkpoint blocks, every
 * thread's (bf_campaign_prep.image_block 0): blocks of as many images as
 * fit, at least one. SSDlite320's 3.3 MB an image: 2 images at 1 thread,
 * 1 at 2; under the 8 MiB this guest hands back to the host once free
 * (blocks of 1 and 2 measured level, of 16 dearer by their fresh pages:
 * docs/engine/checkpoints.md, "Image blocks"). */
#define BF_IMAJ_BLOCK_BYTES_DEFAULT ((uint64_t)8 << 20)

/* Default golden-activation cache budget (bf_campaign_opts.cache_budget). */
#define BF_CACHE_BUDGET_DEFAULT ((int64_t)1 << 30)

typedef struct bf_campaign_opts {
    int threads;              /* 0 = 1 */
    /* exact: every trial re-runs the whole eval set (the reference the
     * differential path is tested against). Otherwise trials recompute only
     * what their faults reach, from a cache of the golden pass's values of
     * at most cache_budget bytes (0: BF_CACHE_BUDGET_DEFAULT; values beyond
     * it are recomputed when needed). Records are the same bits; see
     * docs/ENGINE.md. */
    int exact;
    int64_t cache_budget;
    /* For tests only (no flag or spec field sets it): the differential
     * engine runs even the trials it would run as full passes (more faults
     * than a batch has samples, reaching most of the pass: full_trials
     * below), so that a BER campaign's many-fault differential paths (row
     * mode, batch re-runs, chains) are checked against exact. Records are
     * the same either way; only the time differs. 0: the shortcut is on. */
    int no_full_pass;
    /* 1: the differential engine may apply a fault's change to the golden
     * values as a sparse update (a Gemm column or rank-k update, a Conv
     * channel update, chain mode's updates and linear segments) instead of
     * recomputing what it changed: faster, but an update rounds otherwise
     * than the product, so a record's metrics may differ from a full
     * pass's in their last bits (mse, max_abs, logloss: about 1e-8), and
     * its outcome at a near tie; masked is still decided exactly
     * (docs/ENGINE.md, "How exact it is"). 0 (the default): every record is
     * the full pass's, bit for bit. CLI: `bitflip run --near-exact`. */
    int near_exact;
    int64_t shard_index, shard_count;    /* trials t with t % count == index; count 0 = 1 */
    /* These are called only on the thread that called bf_campaign_run, never
     * at the same time: on_trial once per trial, in trial order; on_outputs
     * right after on_trial for the same trial, with the trial's outputs
     * (samples x cols floats, the first graph output over the whole eval
     * set, valid during the call); progress with the partial result at most
     * about every 100 ms. May be NULL. Only with on_outputs set does the run
     * keep each computed trial's outputs until it is folded in order (up to
     * 16 x threads trials' worth). */
    void (*on_trial)(void *user, const bf_trial_record *rec);
    void (*on_outputs)(void *user, int64_t trial, const float *outputs, int64_t samples, int64_t cols);
    /* Like on_outputs, for a one-sample graph (bf_eval_result.ragged): every
     * graph output of the trial, per sample. */
    void (*on_ragged)(void *user, int64_t trial, const bf_ragged_output *outputs, size_t n, int64_t samples);
    void (*progress)(void *user, const bf_campaign_result *partial);
    void *user;
    const int *cancel;        /* bf_cancel_request (bitflip/eval.h); NULL: none */
} bf_campaign_opts;

/* What creating and running this campaign will hold at its peak
 * (bitflip/plan.h): the model and eval set, the weights as stored in the
 * representation, each worker's plans and outputs (opts->threads; NULL: 1)
 * and the golden outputs, and the golden-activation cache (opts->cache_budget,
 * none with opts->exact). Computed from shapes, before anything big is
 * allocated, so a daemon can refuse the campaign at submission. */
bf_status bf_campaign_estimate(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                               const bf_campaign_opts *opts, bf_job_budget *out, bf_error *err);

/* Resolves the spec against the model (tensor patterns, bit positions,
 * representation), runs the golden pass, and prepares the trial list. */
bf_status bf_campaign_create(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                             bf_campaign **out, bf_error *err);
/* The same with the protections of `mit` (NULL: none; bitflip/mitigate.h)
 * on the model and the faults. Trial t draws the same faults whatever
 * `mit` is, so campaigns that differ only in it are paired trial by trial.
 * The golden pass is the protected model's. An ABFT check that fires on
 * the golden pass is an error (a tolerance too tight for this model). */
bf_status bf_campaign_create_mitigated(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                                       const bf_mitigation *mit, bf_campaign **out, bf_error *err);
/* How bf_campaign_create_prepared readies the campaign for bf_campaign_run. */
typedef struct bf_campaign_prep {
    /* 1: the golden pass is the differential engine's, caching every value
     * it can within cache_budget (0: BF_CACHE_BUDGET_DEFAULT). A run that is
     * not exact and has the same budget then starts from it instead of
     * running the golden pass a second time (on resnet18 at 224x224 that is
     * a third of the time before the first trial). */
    int differential;
    int64_t cache_budget;
    /* Threads the differential golden pass runs on (0: one), each with an
     * evaluator of its own; a run on as many threads adopts them as its
     * workers'. The cache and the golden outputs are the same for any
     * number. */
    int threads;
    /* Every plan's cap on a run's memory for shapes that are data
     * (bf_plan_opts.max_run_bytes; 0: its default): the golden pass's, the
     * workers', the counting passes'. The CLI's --run-memory. */
    uint64_t max_run_bytes;
    /* 1: make what bf_campaign_opts.near_exact's updates read too (chain
     * mode's rounding bounds and linear segments: a product per sample);
     * a near-exact run of a campaign prepared without makes its own cache. */
    int near_exact;
    /* 0 (the default): a one-image graph's checkpoints (docs/ENGINE.md, "One
     * image per call") weigh each step by its counted work (multiply-adds of
     * a Conv, Gemm or MatMul, elements read and written by anything else, at
     * fixed nanoseconds each): the same cuts and kept values on any machine,
     * however loaded, and no timed runs. 1: by its time on two timed runs of
     * image 0 instead, which fit the machine's real costs (the tail's dynamic
     * steps above all) when it is quiet, but move with the load: on
     * SSDlite320 the timed choice kept 70-134 MiB from one run to the next
     * and cost 0.04 s of CPU (docs/perf/detectors.md, h17-ssd). */
    int timed_costs;
    /* The shard bf_campaign_run will run (bf_campaign_opts' shard_index and
     * shard_count; count 0 or 1: every trial). The differential golden
     * pass then caches only what that shard's trials read (drawn before
     * it: docs/ENGINE.md, "Only what the drawn trials read"); a run of
     * another shard makes its own cache instead of using this one. */
    int64_t shard_index, shard_count;
    /* This host's fresh pages as the caller measured them once for its
     * process (bitflip/limits.h, bf_host_pages_measure); not measured: the
     * campaign measures them itself where it writes many MiB once (its
     * golden cache, one-image graphs' checkpoints), about 3 ms. Where .huge
     * says so the golden cache and the checkpoints go in 2 MiB pages: the
     * same records, fewer page faults. */
    bf_host_pages host_pages;
    /* 1: a one-image-per-call campaign whose trials are weight faults known
     * before the golden pass runs them image-major (the CLI's default from
     * 2 threads, --image-major): each image's golden run, then every trial
     * of the shard on that image, from that image's checkpoints alone (one
     * block a thread, reused: not every image's at once; the images split
     * between `threads` evaluators), the trials' records made when the run
     * reaches them. Other campaigns run trial-major, with the reason in
     * --stats. 0: trial-major. The same
     * records either way (docs/engine/checkpoints.md, "Image-major"). The
     * trials then run inside bf_campaign_create_prepared: `cancel` (as
     * bf_campaign_opts.cancel; NULL: none) is polled before each image, and
     * a set flag makes it fail with BF_ECANCELED. `sweep_progress` (NULL:
     * none) is called on the calling thread as the sweep goes, with the
     * images whose golden run and trials are done and the eval set's
     * images (the last call: images, images), for a progress line while
     * the trials run inside the create. */
    int image_major;
    /* image-major's blocks: each thread runs the golden runs of this many
     * of its images, then every trial on them (its faults written once a
     * block), before the next block; the checkpoints hold that many images
     * a thread (at most a thread's share of the eval set). 0: as many as
     * fit in image_block_bytes of checkpoints over every thread, at least
     * 1 (docs/engine/checkpoints.md, "Image blocks"). image_block_bytes 0:
     * BF_IMAJ_BLOCK_BYTES_DEFAULT. */
    int64_t image_block;
    uint64_t image_block_bytes;
    const int *cancel;
    void (*sweep_progress)(void *user, int64_t images_done, int64_t images);
    void *sweep_user;
} bf_campaign_prep;
/* bf_campaign_create_mitigated, readied as prep says (NULL: as it). */
bf_status bf_campaign_create_prepared(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                                      const bf_mitigation *mit, const bf_campaign_prep *prep, bf_campaign **out,
                                      bf_error *err);
void bf_campaign_free(bf_campaign *c);

/* What the campaign's protections cost: extra storage (protected bits,
 * checksums, bounds) over the bits of every parameter as stored; and the
 * golden pass's time, single-threaded, best of `repeats` (compare with the
 * unprotected campaign's). */
double bf_campaign_storage_overhead(const bf_campaign *c);
bf_status bf_campaign_golden_seconds(const bf_campaign *c, int repeats, double *seconds, bf_error *err);

size_t bf_campaign_num_sites(const bf_campaign *c);
const bf_site *bf_campaign_site(const bf_campaign *c, size_t i);
/* Fault groups: how many (1 + bf_campaign_spec.n_groups), and group g's
 * sites (g 0: bf_campaign_site's); NULL past the end. A record's fault
 * names its group's site (bf_applied_fault.group, .site). */
size_t bf_campaign_num_groups(const bf_campaign *c);
size_t bf_campaign_group_num_sites(const bf_campaign *c, size_t g);
const bf_site *bf_campaign_group_site(const bf_campaign *c, size_t g, size_t i);
/* Faults in the population (elements x bits over the sites; random_value:
 * elements; transient: also x samples), for plan sizes. */
double bf_campaign_population(const bf_campaign *c);
/* The golden pass's outputs (samples x cols; with a mitigation, the
 * protected model's), valid for the campaign's life. */
const float *bf_campaign_golden(const bf_campaign *c, int64_t *samples, int64_t *cols);
/* A one-sample graph's golden outputs, every one per sample (as
 * bf_campaign_opts.on_ragged gives a trial's); NULL with *n = 0 for a
 * batched graph. Valid for the campaign's life. */
const bf_ragged_output *bf_campaign_golden_ragged(const bf_campaign *c, size_t *n);
/* Model "profiled": the offset of the error map in trial t (weight bit j
 * sits in cell (j + offset) mod rows * cols; bitflip/errmap.h), drawn from
 * (seed, t) alone; -1 for other models or t out of range. */
int64_t bf_campaign_map_offset(const bf_campaign *c, int64_t t);

/* The task of the campaign's eval set (from its labels). */
bf_task bf_campaign_task(const bf_campaign *c);
/* The campaign model's bf_model_tie_order: NULL when no TopK or
 * NonMaxSuppression makes the order matter. */
const char *bf_campaign_tie_order(const bf_campaign *c);

/* Trials the spec asks for (BER: rates x repeats; list: its length). */
int64_t bf_campaign_num_trials(const bf_campaign *c);

/* The samples a pass runs at once: the spec's "batch", or the default for
 * this model (BF_CAMPAIGN_BATCH_DEFAULT, less where a sample's activations
 * are large: docs/CAMPAIGNS.md), settled by the golden pass (at most the
 * eval set, 1 for a one-sample graph). */
int64_t bf_campaign_batch(const bf_campaign *c);

/* The batch a campaign of `model` runs at when its spec has no "batch"
 * (before the eval set caps it): BF_CAMPAIGN_BATCH_DEFAULT, halved while a
 * batch's plan passes 64 MiB, down to 4; BF_CAMPAIGN_BATCH_DEFAULT for a
 * model with batch statistics, a fixed batch dimension, or shapes the
 * estimate cannot size (campaign_batch.c says why). */
int64_t bf_campaign_default_batch(const bf_model *model);

/* --- population estimates (docs/STATISTICS.md) ----------------------- */

/* What an estimate needs to know of the design: the sampling, each site's
 * elements (its share of the population), and the first-bit positions the
 * population has (allowed bits, or burst starts; n_pos 0: none, e.g.
 * random_value). Pointers borrowed. */
typedef struct bf_design {
    bf_sampling sampling;
    size_t n_sites;
    const int64_t *prefix;    /* n_sites + 1 running element counts: site i has prefix[i+1] - prefix[i] */
    int n_pos;
    const int *pos;
    int64_t draws;            /* draws per element and position: transient faults' samples, else 1 */
} bf_design;

/* A rate of the fault population: the design's estimator (stratified for
 * per_tensor, per_bit, adaptive), its standard error, the effective sample
 * size (p(1-p)/se^2, Korn and Graubard's) and the Wilson interval on it.
 * exhaustive: the rate itself, se 0, lo = hi = rate. NaN when no trial
 * says anything about it. */
typedef struct bf_estimate {
    double rate, se, n_eff, lo, hi;
    int64_t trials;
} bf_estimate;

/* The campaign's design; valid while c lives. */
void bf_campaign_design(const bf_campaign *c, bf_design *d);
/* Outcome o's rate over the population's domain: site (-1: every site) x
 * bit (-1: every position), from r's by_site_bit counts. */
void bf_rate_estimate(const bf_design *d, const bf_campaign_result *r, int64_t site, int bit, bf_outcome o,
                      double confidence, bf_estimate *e);
/* ... of any of several outcomes (a bit mask over bf_outcome): e.g.
 * critical | due, a tensor's parameter vulnerability factor (PVF,
 * docs/STATISTICS.md) */
void bf_rate_estimate_any(const bf_design *d, const bf_campaign_result *r, int64_t site, int bit, unsigned outcomes,
                          double confidence, bf_estimate *e);
/* Wilson's interval on a (possibly fractional) effective sample: rate p
 * from n trials. */
void bf_wilson_eff(double p, double n, double confidence, double *lo, double *hi);

/* Runs this shard's trials; fills `out` (free with bf_campaign_result_free). */
bf_status bf_campaign_run(bf_campaign *c, const bf_campaign_opts *opts, bf_campaign_result *out,
                          bf_error *err);

#ifdef __cplusplus
}
#endif
#endif
