/* Internal layout of a campaign: a few owned parts, each in its own header
 * with the functions that work on it, shared by campaign.c (the spec's
 * rules, spec_rules.c, applied and its selectors resolved), campaign_golden.c
 * (the stored model and the golden pass), campaign_sample.c (drawing each
 * trial's faults), campaign_run.c (workers, outcomes, aggregation),
 * campaign_mitigate.c and campaign_stats.c:
 *
 *   faults.h   what trials draw: fault model, bits, rates, sampling design
 *   adapt.h    sampling "adaptive": the rounds' allocations and a shard's plan
 *   surface.h  where faults may land: the sites and their element counts
 *   store.h    the golden model as stored, and what a fault makes of a value
 *   golden.h   the golden pass and the differential engine's hand-off
 *   judge.h    per-trial metrics, the critical and stop rules, exact sums
 *   protect.h  the protections and the filters weight faults pass through */
#ifndef BF_CAMPAIGN_IMPL_H
#define BF_CAMPAIGN_IMPL_H

#include "bitflip/campaign.h"
#include "bitflip/eval.h"
#include "bitflip/generate.h"
#include "bitflip/mitigate.h"
#include "bitflip/rng.h"
#include "adapt.h"
#include "faults.h"
#include "golden.h"
#include "judge.h"
#include "protect.h"
#include "store.h"
#include "surface.h"

/* A campaign that generates (bf_campaign_spec.gen_new_tokens; campaign_gen.c):
 * the golden decoding, done once, and its generator, which the first worker
 * of a run uses (the others build their own: a generator's plans are one
 * thread's). */
typedef struct bf__cgen {
    int64_t m;                /* new tokens; 0: the campaign does not generate */
    int64_t n;                /* prompts: the eval set's samples */
    struct bf_generator *g;   /* the golden decoding's */
    int64_t *golden;          /* n x m */
    double seconds;           /* the golden decoding's plans and run */
} bf__cgen;

/* Fault groups 1.. (bf_campaign_spec.groups; campaign_groups.c): each a
 * campaign of its own that only draws (its faults, surface and
 * representation resolved from the group, its seed derived from the
 * spec's and the group's index); the trials run on the parent. */
typedef struct bf__groups {
    size_t n;                 /* extra groups; 0: the spec's faults alone */
    struct bf_campaign **sub; /* n, owned */
} bf__groups;

/* Threads a campaign runs on, at most (the golden pass's and the trials'). */
#define BF__CAMPAIGN_THREADS_MAX 256

struct bf_campaign {
    const bf_model *model;    /* what the plans run: the model, or protect.own_model */
    const bf_dataset *ds;
    int64_t batch;            /* every worker's evaluator uses exactly this */
    bf__faults faults;
    bf__adapt adapt;          /* sampling "adaptive" only */
    bf__surface surface;
    bf__store store;
    bf__golden golden;
    bf__judge judge;
    bf__protect protect;
    bf__cgen gen;
    bf__groups groups;
    uint64_t max_run_bytes;   /* every plan's (bf_campaign_prep; 0: the default) */
    /* What recording a checkpoint byte costs the golden pass, in seconds,
     * for the checkpoints' choice (exec/ckpt.h): 0 until the choice asks,
     * then this host's price (bf__ckpt_host_pages: 1e-9, or 2.5e-9 where
     * fresh pages measure dearer than 1.2 ns a byte; 1 MiB mapped and
     * written, timed: docs/perf/detectors.md, h18-ssd), measured once and
     * kept; set before by a test (campaign_pin.h) to have the same choice
     * on every host. */
    double ckpt_price;
    /* the checkpoints in 2 MiB pages (bf__ckpt_host_pages), measured with
     * the price; 0 when a test pinned the price (the same records either way) */
    int ckpt_huge;
    /* this host's fresh pages (bf__campaign_host): the caller's measurement
     * (bf_campaign_prep.host_pages) or the campaign's own, taken once */
    bf_host_pages host;
    /* where creating the campaign took its time (bf_campaign_result's setup) */
    struct {
        double plans, golden, golden_cpu, index;
        int golden_threads;
    } setup;
};

/* campaign_ckpt.c: this host's fresh pages, prep's measurement when it
 * brings one (prep may be NULL), else measured here, once a campaign */
const bf_host_pages *bf__campaign_host(bf_campaign *c, const bf_campaign_prep *prep);

/* campaign.c: what a campaign draws from spec (checked): its fault model,
 * sites, bits, list and strata, as bf_campaign_create sets them before the
 * golden pass; a fault group's draw-only campaign is made with it too. */
bf_status bf__campaign_draws(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err);
/* campaign_groups.c: the extra fault groups' draw-only campaigns (after
 * the golden pass: they read its sample count); their draws of trial t
 * into d[0 .. n-1]; freeing them. */
bf_status bf__campaign_groups(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err);
bf_status bf__campaign_groups_draw(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err);
void bf__campaign_groups_free(bf_campaign *c);

/* campaign_golden.c, in the order bf_campaign_create calls them (sites,
 * bits and list resolved): the parameters as the representation stores
 * them (c->store); the golden pass (outputs, predictions, golden metrics,
 * the metrics' grids; the differential engine's cache when
 * prep->differential); int8 activations' and inputs' scales. */
bf_status bf__campaign_quantize(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err);
/* campaign_golden.c: parameter p as [outer, K, inner] along its input
 * dimension, in groups of `group` (group_size; docs/CAMPAIGNS.md). */
bf_qgroups bf__group_layout(const bf_model *m, size_t p, int64_t group);
bf_status bf__campaign_golden(bf_campaign *c, const bf_campaign_spec *spec, const bf_campaign_prep *prep, bf_error *err);
bf_status bf__campaign_profile_scales(bf_campaign *c, bf_error *err);
/* campaign_dynsite.c: the weights of sites a dynamic step computes. */
bf_status bf__campaign_dyn_sites(bf_campaign *c, bf_error *err);

/* campaign_golden.c: a sample's prediction: its arg-max, or for one score per
 * sample the 0.5 threshold (0 when the golden scores are logits); simd:
 * bf__simd_avx2(), asked once by the caller's loop. */
int64_t bf__prediction(const bf_campaign *c, const float *row, int simd);
/* campaign_golden.c: language_model: the labelled positions of sample s
 * whose arg-max in `row` (its T x V logits) differs from golden's. */
int64_t bf__lm_changed(const bf_campaign *c, const float *row, int64_t s, int simd);

/* campaign_golden.c: segmentation: whether sample s, its logits in `row`,
 * is a critical image (its arg-max changed at more than the critical share
 * of its pixels); moved: the pixels that changed, or -1 to count them
 * here. */
int bf__seg_image_critical(const bf_campaign *c, const float *row, int64_t s, int64_t moved);

/* campaign.c: plans for batches 1 and 2 (or the model's fixed batch, and b
 * NULL), and whether value v is a fault site in them: its elements per
 * sample in *row, else an error saying why. */
bf_status bf__campaign_probe_plans(const bf_model *m, const bf_dataset *ds, bf_plan **a, bf_plan **b, bf_error *err);
bf_status bf__campaign_probe_site(const bf_plan *a, const bf_plan *b, int64_t v, int64_t *row, bf_error *err);

/* kv_sites.c: target kv_cache's sites (bf_campaign_spec.kv over the
 * model's k_cache.K / v_cache.K); a cell number of site s to its element
 * index; list entry i's element checked against the selection. */
bf_status bf__campaign_kv_sites(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err);
int64_t bf__kv_cell_index(const bf_campaign *c, int64_t site, int64_t cell);
bf_status bf__kv_list_check(const bf_campaign *c, int64_t site, int64_t index, size_t entry, bf_error *err);
/* campaign_gen.c: the golden decoding (after bf__campaign_golden: needs the
 * task); a worker's generator (idx 0: the golden one, borrowed; else made
 * with the stored weights); one trial's decoding with the weights written
 * (dw, each with its stored and faulty value: written, run, restored) or
 * the value faults (struck at step 0), scored against golden into
 * gen[3]; tokens: n x m scratch. */
bf_status bf__campaign_gen_golden(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err);
/* ... the eval set's prompts (its input_ids, else the tensor of the model's
 * first integer input; NULL: none), and the model a generator decodes with
 * (before bf_model_bind_dims fixed its sequence axis) */
const bf_tensor *bf__campaign_gen_prompts(const bf_model *m, const bf_dataset *ds);
const bf_model *bf__campaign_gen_model(const bf_model *m);
/* job_budget.c: the batch a model with a fixed batch dimension forces (its
 * first input's dim 0), or 0; what the estimates and the default batch
 * (campaign_batch.c) defer to */
int64_t bf__model_fixed_batch(const bf_model *m);
bf_status bf__campaign_gen_worker(const bf_campaign *c, int idx, struct bf_generator **out, bf_error *err);
struct bf__dx_weight;
bf_status bf__campaign_gen_trial(const bf_campaign *c, struct bf_generator *g, const struct bf__dx_weight *dw, size_t n_dw,
                                 const bf_value_fault *vf, size_t n_vf, int64_t *tokens, double gen[3], bf_error *err);
void bf__campaign_gen_free(bf_campaign *c);

/* campaign_ckpt.c: a one-sample graph's golden checkpoints (exec/ckpt.h),
 * made before the golden pass on its evaluator ev (which then records
 * them) when prep asks for the differential engine: c->golden.ckpt, or
 * left NULL (no cut fits; another task). _weights / _values: a trial's
 * window into the worker's evaluator before its pass. _summary: the
 * checkpoints and the trials' re-run share (work_fraction) into acc. */
bf_status bf__campaign_ckpt_prepare(bf_campaign *c, bf_evaluator *ev, const bf_campaign_prep *prep, bf_error *err);
void bf__campaign_ckpt_weights(const bf_campaign *c, bf_evaluator *ev, const struct bf__dx_weight *dw, size_t n);
/* the reach of weight writes dw[0..n) marked on tr (begin, each parameter
 * and element, end): bf__campaign_ckpt_weights' on a worker's evaluator,
 * the image-major draw's on each trial's own */
struct bf__ckpt_trial;
void bf__campaign_ckpt_mark(const struct bf__ckpt *ck, struct bf__ckpt_trial *tr, const struct bf__dx_weight *dw, size_t n);
/* The weight writes of one fault (parameter p's element `index`, its stored
 * value old corrupted to now): that element, or a scaled store's whole
 * group rescaled (store.h, bf__fault_span), appended to *dw from *n (grown
 * through *cap). run_weight_trial and the image-major draw list them here
 * alike, so both write the same values. */
bf_status bf__campaign_fault_writes(const bf_campaign *c, size_t p, int64_t index, float old, float now,
                                   struct bf__dx_weight **dw, size_t *cap, size_t *n, bf_error *err);
void bf__campaign_ckpt_values(const bf_campaign *c, bf_evaluator *ev, const bf_value_fault *vf, size_t n);
void bf__campaign_ckpt_summary(const bf_campaign *c, bf_evaluator *const *evs, int n, bf_campaign_result *acc);

/* campaign_imaj.c: image-major trials (docs/engine/checkpoints.md,
 * "Image-major"). _off: why a campaign's trials run trial-major (NULL:
 * image-major; drawn_known: its trials are known before the golden pass,
 * campaign_ckpt.c). _sweep: the golden pass image by image on ev (its
 * checkpoints made with a block an image of a block, ev set to record
 * them), every trial of prep's shard run on each block of images after
 * their golden runs; r the golden pass's result; c->golden.imaj the
 * trials' outputs. _has: trial t's outputs are there; _result: its pass's
 * result from them, on a worker's evaluator ev, as bf_evaluator_run would
 * give it.
 * BF__IMAJ_SLOTS_MAX: the (trial, image) pairs a sweep keeps outputs for
 * until the fold, each a slot per graph output grown to its largest value
 * plus its rows (SSDlite320's ~330 bytes a pair: ~21 MB at the limit,
 * against trial-major's fold holding one trial's at a time); past it the
 * campaign runs trial-major and --stats says so (bf__campaign_imaj_off).
 * BF__IMAJ_THREADS_MAX: the sweep's evaluators, one a thread. */
#define BF__IMAJ_SLOTS_MAX 65536
#define BF__IMAJ_THREADS_MAX 64
const char *bf__campaign_imaj_off(const bf_campaign *c, const bf_campaign_prep *prep, int drawn_known);
/* the sweep's threads (prep->threads, at most the images and
 * BF__IMAJ_THREADS_MAX): the images split between them, each on an
 * evaluator of its own (evs[i], evs[0] the golden one) with a checkpoint
 * block of its own */
int bf__campaign_imaj_threads(const bf_campaign *c, const bf_campaign_prep *prep);
/* the images a thread's block holds (prep->image_block, else as many as
 * the checkpoints' blocks fit in prep->image_block_bytes, once they are
 * made; at most a thread's share of the images): the checkpoint blocks
 * are threads x this */
int64_t bf__campaign_imaj_block(const bf_campaign *c, const bf_campaign_prep *prep);
/* the block the sweep ran (0: no sweep) */
int64_t bf__campaign_imaj_block_ran(const bf_campaign *c);
bf_status bf__campaign_imaj_sweep(bf_campaign *c, bf_evaluator *const *evs, int n_ev, const bf_campaign_prep *prep,
                                  bf_eval_result *r, bf_error *err);
int bf__campaign_imaj_has(const bf_campaign *c, int64_t t);
bf_status bf__campaign_imaj_result(const bf_campaign *c, bf_evaluator *ev, int64_t t, bf_eval_result *res,
                                   bf_error *err);
void bf__campaign_imaj_free(struct bf__imaj *x);

/* campaign_adapt.c: "exhaustive" and "adaptive": the strata, the
 * population's size checked (exhaustive: its trials), after the sites and
 * bits are resolved; a trial's stratum in the current round; the next
 * round's allocation from what acc counted, its size in *round (a
 * multiple of `align` unless it is the last). */
bf_status bf__campaign_strata(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err);
int64_t bf__adapt_stratum(const bf_campaign *c, int64_t t);
void bf__adapt_next_round(bf_campaign *c, const bf_campaign_result *acc, int64_t first, int64_t left, int align, int64_t *round);
/* campaign_adapt_shard.c: a sharded adaptive campaign's rounds, every
 * one planned at the pilot's end from the pilot's outcomes in acc (the
 * same plan in every shard); their number in *rounds. A trial's stratum
 * in that plan. */
bf_status bf__adapt_plan_rounds(bf_campaign *c, const bf_campaign_result *acc, int64_t first, int align, int64_t *rounds,
                                bf_error *err);
int64_t bf__adapt_plan_stratum(const bf_campaign *c, int64_t t);
/* campaign_stats.c: every count and sum the trials folded into r, zeroed
 * (adaptive: the pilot's, once it has made the allocation) */
void bf__result_clear_counts(bf_campaign_result *r);
/* Where a trial counts in by_bit and, for fault groups 1.., in their
 * by_site and by_bit (bf_campaign_result.group_by_*): group 0's first
 * flipped bit, and each other group's first fault's site and bit (-1:
 * none, or a BER group). Group 0's site is its record's first fault's. */
typedef struct bf__first {
    int bit;
    int64_t gsite[BF_FAULT_GROUPS_MAX - 1];
    int gbit[BF_FAULT_GROUPS_MAX - 1];
} bf__first;
/* campaign_stats.c: one trial's record, where it counts, into acc */
void bf__result_fold(const bf_campaign *c, bf_campaign_result *acc, const bf_trial_record *rec, const bf__first *first);
/* campaign_stats.c: r's counts for c's fault groups 1.. (after bf__result_init) */
bf_status bf__result_init_groups(bf_campaign_result *r, const bf_campaign *c, bf_error *err);
/* ... for n extra groups, group g's sites from site0[g - 1], n_sites in all */
bf_status bf__result_shape_groups(bf_campaign_result *r, size_t n, const size_t *site0, size_t n_sites, bf_error *err);
/* campaign_estimate.c: whether every stop target holds over acc's trials
 * (marking in acc->stop_met_at when each first did). */
int bf__stop_holds(const bf_campaign *c, bf_campaign_result *acc);

/* campaign_stats.c */
bf_status bf__result_init(bf_campaign_result *r, size_t n_sites, size_t n_rates, bf_error *err);
/* Adds trials, critical images and their squares' sum into an IVMOD group. */
void bf__ivmod_add(bf_ivmod_sums *a, int64_t trials, int64_t critical, int64_t critical_sq);

#endif
