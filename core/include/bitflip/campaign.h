/* bitflip — campaigns: a seeded, deterministic list of trials, each a fault
 * (or, for BER, a set of faults) applied for one pass over the eval set,
 * classified against the golden pass and aggregated.
 *
 * The spec here is the engine's form of the JSON campaign spec (api/ parses
 * and validates the JSON into it). Trial t's faults depend only on (seed, t)
 * (see rng.h): results are the same for any thread count, chunking or shard.
 * Aggregates are sums, so shards merge exactly. */
#ifndef BITFLIP_CAMPAIGN_H
#define BITFLIP_CAMPAIGN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bitflip/dataset.h"
#include "bitflip/error.h"
#include "bitflip/eval.h"
#include "bitflip/model.h"
#include "bitflip/repr.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bf_target {
    BF_TARGET_WEIGHTS = 0,    /* parameter tensors */
    BF_TARGET_ACTIVATIONS,    /* node outputs */
    BF_TARGET_INPUTS          /* graph inputs */
} bf_target;

typedef enum bf_persistence {
    BF_PERSIST_PERMANENT = 0, /* stays for the whole pass: memory errors */
    BF_PERSIST_TRANSIENT      /* one element of one sample, once: compute errors */
} bf_persistence;

typedef enum bf_sampling {
    BF_SAMPLE_UNIFORM = 0,    /* uniform over every bit of the selected tensors */
    BF_SAMPLE_PER_TENSOR,     /* equal trials per tensor, uniform within */
    BF_SAMPLE_PER_BIT,        /* equal trials per bit position, uniform within */
    BF_SAMPLE_LIST            /* exactly the faults of `list`, in order */
} bf_sampling;

typedef enum bf_metric_id {
    BF_METRIC_ACCURACY = 0,
    BF_METRIC_TOP1_MISMATCH,  /* fraction of samples whose prediction differs from golden */
    BF_METRIC_AUC,
    BF_METRIC_LOGLOSS,
    BF_METRIC_NE,             /* normalized entropy: logloss / entropy of the label rate */
    BF_METRIC_MSE,            /* mean squared deviation of outputs from golden */
    BF_METRIC_MAX_ABS,        /* max absolute deviation from golden */
    BF_METRIC_COUNT
} bf_metric_id;

const char *bf_metric_name(bf_metric_id m);   /* "accuracy", "top1_mismatch", ... */
int bf_metric_parse(const char *name);        /* -1 if unknown */

typedef enum bf_outcome {
    BF_OUTCOME_MASKED = 0,    /* outputs bit-identical to golden (same batching) */
    BF_OUTCOME_TOLERABLE,     /* outputs differ, no prediction changes */
    BF_OUTCOME_CRITICAL,      /* a prediction changes, or a metric moves past its threshold */
    BF_OUTCOME_DUE,           /* NaN or Inf in an output */
    BF_OUTCOME_COUNT
} bf_outcome;

const char *bf_outcome_name(bf_outcome o);

/* One entry of an explicit fault list: flip `bit` of element `index` of the
 * tensor named `tensor` (a parameter, node output or graph input, per the
 * campaign's target). For activations and inputs, `sample` is the eval-set
 * sample a transient fault hits (-1: every sample, permanent). */
typedef struct bf_fault_entry {
    char *tensor;
    int64_t index;
    int bit;
    int64_t sample;
} bf_fault_entry;

typedef struct bf_campaign_spec {
    char *model;              /* path (or, in the daemon, an id) */
    char *dataset;
    uint64_t seed;
    int64_t trials;           /* for BER: ignored, rates x repeats trials */

    /* faults */
    bf_target target;
    char **tensors;           /* patterns: exact names, globs (*, ?), or "op:Gemm" */
    size_t n_tensors;
    bf_fault_model model_kind;
    int bits;                 /* distinct bits per fault (bitflip, stuck_at_*) */
    int positions[64];        /* allowed bit positions; n_positions 0 = every bit */
    int n_positions;
    int burst;                /* the `bits` bits are adjacent */
    double *rates;            /* BER rates (one or a sweep) */
    size_t n_rates;
    int64_t repeats;          /* BER draws per rate */
    bf_repr repr;
    int per_channel;          /* int8: a scale per slice along axis 0 */
    bf_persistence persistence;

    bf_sampling sampling;
    bf_fault_entry *list;     /* BF_SAMPLE_LIST */
    size_t n_list;

    unsigned metrics;         /* bitmask over bf_metric_id to report; 0 = every one that applies */
    /* A trial is critical if the metric moves against the model by more than
     * this (absolute); < 0: only prediction changes count. */
    int critical_metric;      /* bf_metric_id, or -1 */
    double critical_delta;

    double stop_margin;       /* 0: run every trial */
    double stop_confidence;   /* e.g. 0.95 */
    int64_t batch;            /* 0: the evaluator's default */
} bf_campaign_spec;

/* Frees the members (malloc'd), not the struct. Defined by libbitflip-api,
 * which is what builds specs from JSON. */
void bf_campaign_spec_free(bf_campaign_spec *spec);

/* --- results ---------------------------------------------------------- */

/* One fault of a trial as applied: where, which bits (`mask` in the
 * representation's bits), the stored value before and after (decoded). */
typedef struct bf_applied_fault {
    int64_t site;             /* index into bf_campaign_sites() */
    int64_t index;            /* flat element index in the tensor */
    int64_t sample;           /* transient: eval sample hit; -1 otherwise */
    uint32_t mask;
    float old_value, new_value;
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
    int64_t changed;          /* samples whose prediction changed */
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

typedef struct bf_campaign_result {
    int64_t trials_planned;   /* in this shard */
    int64_t trials_done;
    int stopped_early;        /* the stop rule ended the campaign */
    bf_outcome_counts total;
    bf_outcome_counts *by_site;          /* n_sites */
    size_t n_sites;
    bf_outcome_counts by_bit[64];        /* by bit position of the first fault bit */
    bf_metric_sums metric[BF_METRIC_COUNT];               /* over all trials */
    bf_metric_sums *rate_metric;         /* BER: [n_rates][BF_METRIC_COUNT] */
    bf_outcome_counts *by_rate;          /* BER: n_rates */
    size_t n_rates;
    /* golden pass */
    double golden[BF_METRIC_COUNT];
    bf_task task;
    int64_t samples;
    double seconds;
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
    const char *op;           /* op reading it (weights) or producing it (activations) */
    int64_t elements;
    int bits;                 /* bits per element in the representation */
} bf_site;

typedef struct bf_campaign_opts {
    int threads;              /* 0 = 1 */
    int64_t shard_index, shard_count;    /* trials t with t % count == index; count 0 = 1 */
    /* Both are called only on the thread that called bf_campaign_run, never
     * at the same time: on_trial once per trial, in trial order; progress
     * with the partial result at most about every 100 ms. May be NULL. */
    void (*on_trial)(void *user, const bf_trial_record *rec);
    void (*progress)(void *user, const bf_campaign_result *partial);
    void *user;
    const atomic_int *cancel;
} bf_campaign_opts;

/* Resolves the spec against the model (tensor patterns, bit positions,
 * representation), runs the golden pass, and prepares the trial list. */
bf_status bf_campaign_create(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                             bf_campaign **out, bf_error *err);
void bf_campaign_free(bf_campaign *c);

size_t bf_campaign_num_sites(const bf_campaign *c);
const bf_site *bf_campaign_site(const bf_campaign *c, size_t i);
/* Faults in the population (elements x bits over the sites), for plan sizes. */
double bf_campaign_population(const bf_campaign *c);
/* Trials the spec asks for (BER: rates x repeats; list: its length). */
int64_t bf_campaign_num_trials(const bf_campaign *c);

/* Runs this shard's trials; fills `out` (free with bf_campaign_result_free). */
bf_status bf_campaign_run(bf_campaign *c, const bf_campaign_opts *opts, bf_campaign_result *out,
                          bf_error *err);

#ifdef __cplusplus
}
#endif
#endif
