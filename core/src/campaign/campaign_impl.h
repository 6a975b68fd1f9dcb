/* Internal layout of a campaign, shared by campaign.c (resolving the spec,
 * the golden pass), campaign_sample.c (drawing each trial's faults),
 * campaign_run.c (workers, outcomes, aggregation) and campaign_stats.c. */
#ifndef BF_CAMPAIGN_IMPL_H
#define BF_CAMPAIGN_IMPL_H

#include "bitflip/campaign.h"
#include "bitflip/eval.h"
#include "bitflip/mitigate.h"
#include "bitflip/rng.h"

/* One corrupted element of a trial: for activations and inputs, `index` is
 * within one sample and `sample` the sample a transient fault hits (-1:
 * every sample, permanent; always -1 for weights). */
typedef struct bf__efault {
    int64_t site, index, sample;
    uint32_t mask;
    /* model "profiled": bits forced to 0 and to 1 (stuck cells); `mask`
     * holds the cells that flip. 0 for every other model. */
    uint32_t set0, set1;
} bf__efault;

/* A trial's faults as drawn from (seed, t). The buffers belong to the worker
 * and are reused from trial to trial. */
typedef struct bf__draw {
    bf__efault *f;
    size_t n, cap;
    uint64_t *pos;            /* BER: flipped bit positions over the population */
    size_t pos_cap;
    int64_t n_faults;         /* bits flipped (BER) or 1 */
    int first_bit;            /* the by_bit stratum; -1 for none (random_value, BER) */
    int rate_index;           /* BER; -1 otherwise */
} bf__draw;

typedef struct bf__list_fault {
    int64_t site, index, sample;
    int bit;
} bf__list_fault;

/* Threads a campaign runs on, at most (the golden pass's and the trials'). */
#define BF__CAMPAIGN_THREADS_MAX 256

/* BER draws at most this many bit errors per trial (memory: 8 bytes each). */
#define BF__BER_MAX_ERRORS (INT64_C(1) << 22)

struct bf_campaign {
    const bf_model *model;
    const bf_dataset *ds;
    uint64_t seed;
    int64_t n_trials;
    bf_target target;
    bf_persistence persistence;
    bf_fault_model kind;
    bf_repr repr;
    int repr_bits;
    /* The sites are a quantized model's stored int8/uint8 integers: repr is
     * int8 with scale 1 and nothing is rounded; a stored byte is the bits. */
    int native;
    int bits, burst;
    int allowed[64];          /* allowed bit positions, ascending */
    int n_allowed;
    int starts[64];           /* burst: first bits whose whole burst is allowed */
    int n_starts;
    double *rates;
    size_t n_rates;
    int64_t repeats;
    bf_sampling sampling;
    bf__list_fault *list;
    size_t n_list;
    unsigned metrics;         /* computed per trial (spec's, plus the critical one) */
    int critical_metric;      /* -1: prediction changes only */
    double critical_delta;
    double stop_margin, stop_confidence;
    int64_t batch;            /* every worker's evaluator uses exactly this */

    bf_site *sites;
    size_t n_sites;
    size_t *site_param;       /* weights: model parameter index of each site */
    int64_t *site_value;      /* activations, inputs: model value id of each site */
    float *site_scale;        /* activations, inputs: int8 scale of each site (else 1) */
    int64_t *prefix;          /* n_sites + 1 running element counts */
    int64_t elements;         /* prefix[n_sites] */

    /* The golden model as stored: per model parameter, the values in the
     * representation (NULL for fp32: the model's own), fixed-point scales,
     * and uint<m> offsets (NULL: none). */
    float **stored;
    float **scale;
    float **lo;
    int64_t *slice;           /* elements per scale */

    /* model "profiled": the map (the spec's, which outlives the campaign)
     * and its size in cells */
    const bf_errmap *errmap;
    uint64_t map_bits;

    /* golden pass */
    bf_task task;
    int64_t samples, out_cols;
    float *golden;            /* samples * out_cols */
    int64_t *golden_pred;     /* per sample: arg-max, or 0/1 for one score */
    int logits;               /* one score per sample, and scores are logits */
    double golden_metric[BF_METRIC_COUNT];
    double label_entropy;     /* binary: entropy of the positive rate (nats) */
    /* A golden pass made by the differential engine (bf_campaign_prep):
     * its evaluators (one per thread it ran on) and shared state, handed to
     * the first bf_campaign_run that can use them (NULL once handed over,
     * or when not prepared). */
    bf_evaluator **gev;
    int n_gev;
    struct bf__dx_shared *gdx;
    int64_t gdx_budget;
    /* where creating the campaign took its time (bf_campaign_result's setup) */
    struct {
        double plans, golden, golden_cpu, index;
        int golden_threads;
    } setup;
    /* Metric sums are kept on a fixed grid so they add exactly (see
     * campaign_stats.c): per metric a bound and the grid exponents. */
    double bound[BF_METRIC_COUNT];
    int fsum[BF_METRIC_COUNT], fsq[BF_METRIC_COUNT];

    /* mitigations (campaign_mitigate.c): the model with clipping and ABFT
     * nodes (model points to it; NULL: none), and the fault filters */
    bf_model *own_model;
    const bf_model *base_model;
    uint32_t *sbp_mask;       /* per site: protected bits (NULL: none) */
    float *range_lo, *range_hi;   /* per site (weights): the allowed range (NULL: no check) */
    int range_flag;           /* out of range: DUE; else the value is zeroed */
};

/* campaign_sample.c: the faults of trial t, a pure function of (seed, t). */
bf_status bf__campaign_draw(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err);
void bf__draw_free(bf__draw *d);

/* The golden stored value of element `index` of a parameter, and its scale. */
static inline float bf__stored(const bf_campaign *c, size_t param, int64_t index)
{
    const float *v = c->stored[param] ? c->stored[param] : (const float *)bf_model_param(c->model, param)->tensor->data;
    return v[index];
}
static inline float bf__scale(const bf_campaign *c, size_t param, int64_t index)
{
    return c->scale[param] ? c->scale[param][index / c->slice[param]] : 1.0f;
}
static inline float bf__lo(const bf_campaign *c, size_t param, int64_t index)
{
    return c->lo[param] ? c->lo[param][index / c->slice[param]] : 0.0f;
}

/* Element `index` of parameter `param`'s stored bits and back: the
 * representation's encoding (with the element's scale and offset), or for a
 * quantized model's own integers the byte itself (uint8 or two's
 * complement). */
static inline uint32_t bf__wencode(const bf_campaign *c, size_t param, int64_t index, float v)
{
    if (c->native) return (uint32_t)(int32_t)v & 0xffu;
    return bf_repr_encode_lo(c->repr, v, bf__scale(c, param, index), bf__lo(c, param, index));
}
static inline float bf__wdecode(const bf_campaign *c, size_t param, int64_t index, uint32_t bits)
{
    if (!c->native) return bf_repr_decode_lo(c->repr, bits, bf__scale(c, param, index), bf__lo(c, param, index));
    return bf_model_param(c->model, param)->dtype == BF_I8 ? (float)(int8_t)(uint8_t)bits : (float)(uint8_t)bits;
}
/* What fault f (of the campaign's `kind`; BER is a bit flip) does to stored
 * bits `b`. */
static inline uint32_t bf__fault_bits(const bf_campaign *c, uint32_t b, bf_fault_model kind, const bf__efault *f)
{
    if (kind == BF_FAULT_PROFILED) return ((b ^ f->mask) & ~f->set0) | f->set1;
    return bf_repr_fault_bits(c->repr, b, kind, f->mask);
}
/* What weight fault f makes of the stored value `old`. */
static inline float bf__wcorrupt(const bf_campaign *c, size_t param, float old, bf_fault_model kind, const bf__efault *f)
{
    return bf__wdecode(c, param, f->index, bf__fault_bits(c, bf__wencode(c, param, f->index, old), kind, f));
}

/* campaign_golden.c, in the order bf_campaign_create calls them (sites,
 * bits and list resolved): the parameters as the representation stores
 * them (c->stored, scales); the golden pass (outputs, predictions, golden
 * metrics, the metrics' grids; the differential engine's cache when
 * prep->differential); int8 activations' and inputs' scales. */
bf_status bf__campaign_quantize(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err);
bf_status bf__campaign_golden(bf_campaign *c, const bf_campaign_spec *spec, const bf_campaign_prep *prep, bf_error *err);
bf_status bf__campaign_profile_scales(bf_campaign *c, bf_error *err);

/* campaign_golden.c: a sample's prediction: its arg-max, or for one score per
 * sample the 0.5 threshold (0 when the golden scores are logits). */
int64_t bf__prediction(const bf_campaign *c, const float *row);

/* campaign_mitigate.c: sets up mit's protections on c (sites resolved,
 * parameters stored, before the golden pass). */
bf_status bf__campaign_mitigate(bf_campaign *c, const bf_mitigation *mit, bf_error *err);
/* What a weight fault leaves after the protections: *now rewritten (SBP
 * restores protected bits, the range check zeroes); 1 if the range check
 * flags it (the trial is DUE). */
int bf__mitigate_weight(const bf_campaign *c, const bf__efault *f, float old, bf_fault_model kind, float *now);
/* The mask of a value fault after SBP. */
uint32_t bf__mitigate_value_mask(const bf_campaign *c, const bf__efault *f);

/* campaign_stats.c */
bf_status bf__result_init(bf_campaign_result *r, size_t n_sites, size_t n_rates, bf_error *err);
/* Adds a finite, non-negative metric value to sums on the metric's grid. */
void bf__sums_add(bf_metric_sums *s, double v, double bound, int fsum, int fsq);

#endif
