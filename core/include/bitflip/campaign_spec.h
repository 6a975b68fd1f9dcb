/* bitflip — a campaign's spec (bitflip/campaign.h runs it and holds its
 * results): the engine's form of the JSON campaign spec, which api/ parses
 * and validates into it; its targets, fault models, sampling, metrics and
 * outcome classes, and the limits of its lists.
 *
 * Targets, sites and persistence:
 *
 * - weights: the sites are the parameter tensors (float initializers) the
 *   patterns select; a site's `elements` are the tensor's. The golden model is
 *   the model with every weight stored in the representation (rounded to it;
 *   int8 with per-tensor or per-channel scales), and a fault changes stored
 *   bits of one element for the whole pass. Only permanent.
 *
 * - activations: the sites are node outputs computed per sample at run time:
 *   float32, with the sample on dim 0 (checked by building plans for batches
 *   1 and 2: dim 0 follows the batch, the other dims do not move), and not
 *   folded when the plan is built (shape arithmetic, values computed from
 *   constants alone are not activations). Patterns match output names (exact
 *   or glob), or "op:Conv" selects the outputs of every Conv node. A value a
 *   dynamic step computes (its shape is data: boxes after NMS) is a site too
 *   (bf_site.dynamic): its element is drawn in the run it strikes.
 *
 * - inputs: the sites are the float32 graph inputs (with the sample on dim
 *   0); patterns match input names, or "op:Gemm" selects the inputs a Gemm
 *   node reads. Integer inputs (indices, such as a DLRM's sparse ids) are not
 *   fault sites: a pattern matching only those is an error that says so.
 *
 *   For activations and inputs a site's `elements` are per sample (numel of
 *   the batch tensor / batch), a fault's `index` is the flat row-major index
 *   within one sample's slice, and the golden model is the model exactly as
 *   given (fp32 weights, fp32 activations). The representation is the format
 *   the faulted element is held in when the fault strikes: the element alone
 *   is encoded to it (rounded; fp16/bf16 to nearest even), its bits are
 *   faulted and it is decoded back; a fault that changes no bit (stuck-at on
 *   a bit already at that value) leaves the element exactly as computed.
 *   int8 uses one symmetric scale per site, max |value| over the golden pass
 *   on the eval set / 127 (values past that range saturate at +-127 when a
 *   fault hits them). A fault on a value applies right after the node
 *   computes it (inputs: when the batch is fed), before any node reads it.
 *
 *   permanent: the fault hits element `index` of the site in every sample of
 *   the pass, a stuck or corrupted buffer cell (a bit flip flips that bit of
 *   each sample's computed value). transient: it hits one sample's element
 *   once, the sample drawn uniformly over the eval set by the trial's
 *   generator (before the element and bits), or given by a list entry's
 *   `sample` (required there for transient, refused for permanent). Either
 *   way every sample is evaluated and compared with golden, so a transient
 *   fault changes at most the rows of the sample it hits.
 *
 *   BER on activations and inputs: the population is the bits of one sample
 *   of every selected site (elements per sample x allowed bits); a trial's
 *   drawn flips apply at those positions in every sample (permanent) or in
 *   one drawn sample (transient).
 *
 * Outcome classes and metrics are the same for every target. */
#ifndef BITFLIP_CAMPAIGN_SPEC_H
#define BITFLIP_CAMPAIGN_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/errmap.h"
#include "bitflip/mitigate.h"
#include "bitflip/repr.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bf_target {
    BF_TARGET_WEIGHTS = 0,    /* parameter tensors */
    BF_TARGET_ACTIVATIONS,    /* node outputs */
    BF_TARGET_INPUTS,         /* graph inputs */
    BF_TARGET_KV_CACHE        /* the KV cache's entries (bitflip/sites.h k_cache.K, v_cache.K),
                               * chosen by bf_campaign_spec.kv; value faults as on activations */
} bf_target;

typedef enum bf_persistence {
    BF_PERSIST_PERMANENT = 0, /* stays for the whole pass: memory errors */
    BF_PERSIST_TRANSIENT      /* one element of one sample, once: compute errors */
} bf_persistence;

typedef enum bf_sampling {
    BF_SAMPLE_UNIFORM = 0,    /* uniform over every bit of the selected tensors */
    BF_SAMPLE_PER_TENSOR,     /* equal trials per tensor, uniform within */
    BF_SAMPLE_PER_BIT,        /* equal trials per bit position, uniform within */
    BF_SAMPLE_LIST,           /* exactly the faults of `list`, in order */
    BF_SAMPLE_EXHAUSTIVE,     /* every candidate fault once (at most BF_EXHAUSTIVE_MAX) */
    BF_SAMPLE_ADAPTIVE        /* (tensor, bit) strata: a pilot, then Neyman-allocated rounds */
} bf_sampling;

/* "exhaustive": the largest fault population it enumerates (trials). */
#define BF_EXHAUSTIVE_MAX (INT64_C(1) << 26)

typedef enum bf_metric_id {
    BF_METRIC_ACCURACY = 0,
    BF_METRIC_TOP1_MISMATCH,  /* fraction of samples whose prediction differs from golden
                               * (language_model: of labelled positions whose arg-max does) */
    BF_METRIC_AUC,
    BF_METRIC_LOGLOSS,
    BF_METRIC_NE,             /* normalized entropy: logloss / entropy of the label rate */
    BF_METRIC_MSE,            /* mean squared deviation of outputs from golden */
    BF_METRIC_MAX_ABS,        /* max absolute deviation from golden */
    BF_METRIC_PERPLEXITY,     /* language_model: exp of the mean cross-entropy (higher is worse) */
    BF_METRIC_TOKEN_ACCURACY, /* language_model: labelled positions whose arg-max is the label */
    BF_METRIC_CHOICE_ACCURACY,/* language_model with mc_item/mc_answer: items whose best choice is right */
    /* language_model with spec.gen_new_tokens: each trial's greedy generations
     * against golden's (bitflip/generate.h, bf_gen_metrics) */
    BF_METRIC_GENERATION_MATCH,   /* share of prompts whose new tokens all equal golden's */
    BF_METRIC_FIRST_DIVERGENCE,   /* mean first position that differs (new_tokens if none) */
    BF_METRIC_EDIT_DISTANCE,      /* mean token Levenshtein distance to golden's tokens */
    BF_METRIC_MIOU,           /* segmentation: mean IoU over classes (bf_eval_result.miou) */
    BF_METRIC_PIXEL_ACCURACY, /* segmentation: labelled pixels whose arg-max is the label */
    BF_METRIC_MAP,            /* detection: COCO mAP@[.5:.95] (bf_eval_result.map) */
    BF_METRIC_MAP50,          /* detection: AP at IoU 0.5 */
    BF_METRIC_RECALL,         /* detection: COCO average recall over IoU .5:.95 */
    BF_METRIC_COUNT
} bf_metric_id;

const char *bf_metric_name(bf_metric_id m);   /* "accuracy", "top1_mismatch", ... */
int bf_metric_parse(const char *name);        /* -1 if unknown */

typedef enum bf_outcome {
    BF_OUTCOME_MASKED = 0,    /* outputs bit-identical to golden (same batching) */
    BF_OUTCOME_TOLERABLE,     /* outputs differ, no prediction changes */
    BF_OUTCOME_CRITICAL,      /* a prediction changes, or a metric moves past its threshold
                               * (segmentation: an image's arg-max changes at more than
                               * critical_pixels of its pixels) */
    BF_OUTCOME_DUE,           /* NaN or Inf in an output, or a mitigation's detector fired
                               * (language_model: or a non-finite perplexity) */
    BF_OUTCOME_COUNT
} bf_outcome;

const char *bf_outcome_name(bf_outcome o);

/* One entry of an explicit fault list: flip `bit` of element `index` of the
 * tensor named `tensor` (a parameter, node output or graph input, per the
 * campaign's target; for node outputs and inputs, `index` is within one
 * sample). `sample` is the eval-set sample a transient fault hits (required
 * for transient faults); -1 for permanent ones. */
typedef struct bf_fault_entry {
    char *tensor;
    int64_t index;
    int bit;
    int64_t sample;
} bf_fault_entry;

/* Target kv_cache: which entries faults land in. Each list holds distinct
 * indices (layers as bitflip info numbers k_cache.K; key/value heads,
 * grouped-query repetition undone; key positions of the pass, past ones
 * first in a past_key_values export); n_* 0 = every one. kinds: 1 keys,
 * 2 values, 3 or 0 both. */
typedef struct bf_kv_filter {
    int64_t *layers, *heads, *positions;
    size_t n_layers, n_heads, n_positions;
    unsigned kinds;
} bf_kv_filter;

/* Entries a kv_cache filter list may hold (bf_kv_filter). */
#define BF_KV_FILTER_MAX 65536

/* bf_campaign_spec.burst: the burst lies in one 64-bit storage word. */
#define BF_BURST_WORD 2
/* The most neighbouring words a column upset strikes (bf_campaign_spec.words). */
#define BF_MBU_WORDS_MAX 64

/* Fault groups (docs/CAMPAIGNS.md, "Fault groups"): a spec's faults may
 * be several groups, each drawn by its own model in every trial. Group 0 is
 * the spec's own fault fields, on weights (its representation makes the
 * golden model); groups 1.. are bf_campaign_spec.groups, on weights (in
 * group 0's representation) and then on activations, each drawn from its
 * own random stream (seed, group). In a trial the groups strike in order:
 * a later group's fault finds what an earlier one left. At most this many
 * groups in all, group 0 included. */
#define BF_FAULT_GROUPS_MAX 4

typedef struct bf_fault_group {
    bf_target target;         /* weights or activations */
    char **tensors;           /* as bf_campaign_spec.tensors; at least one */
    size_t n_tensors;
    bf_fault_model model_kind;/* bitflip, stuck_at_0, stuck_at_1, random_value, ber */
    int bits;                 /* as bf_campaign_spec.bits (0: 1) */
    int positions[64];        /* as bf_campaign_spec.positions */
    int n_positions;
    int burst;                /* 0 or 1: adjacent bits of one element */
    double rate;              /* ber: the bit error rate, (0, 1]; else 0 */
    bf_repr repr;             /* activations: the computed values' format, fp32, fp16,
                               * bf16; weights: group 0's (the weights as stored) */
    bf_persistence persistence;
} bf_fault_group;

/* The largest group_size a campaign takes. */
#define BF_GROUP_SIZE_MAX (INT64_C(1) << 20)

/* Segmentation's default critical_pixels: more than 1% of an image's
 * pixels changing class (docs/CAMPAIGNS.md says why). */
#define BF_CRITICAL_PIXELS_DEFAULT 0.01
/* Detection's default critical_score (exec/metrics_det.h's
 * BF_DET_SCORE_THRESHOLD_DEFAULT). */
#define BF_CRITICAL_SCORE_DEFAULT 0.5

typedef struct bf_campaign_spec {
    char *model;              /* path (or, in the daemon, an id) */
    char *dataset;
    uint64_t seed;
    int64_t trials;           /* for BER: ignored, rates x repeats trials */

    /* faults */
    bf_target target;
    bf_kv_filter kv;          /* target kv_cache */
    char **tensors;           /* patterns: exact names, globs (*, ?), or "op:Gemm"; for
                               * weights a name is the ONNX one or the PyTorch one
                               * (bf_param_info.torch_name) */
    size_t n_tensors;
    bf_fault_model model_kind;
    int bits;                 /* distinct bits per fault (bitflip, stuck_at_*) */
    int positions[64];        /* allowed bit positions; n_positions 0 = every bit */
    int n_positions;
    /* the `bits` bits are adjacent: 1 within one element (its bits);
     * BF_BURST_WORD within one 64-bit word of a weight tensor's storage, so
     * a burst may span neighbouring elements (a multi-bit upset). */
    int burst;
    /* > 1: a column upset: the same bit of `words` neighbouring 64-bit words
     * of a weight tensor's storage (docs/CAMPAIGNS.md, "Multi-bit upsets");
     * 0: off. 2..BF_MBU_WORDS_MAX. */
    int words;
    double *rates;            /* BER rates (one or a sweep) */
    size_t n_rates;
    int64_t repeats;          /* BER draws per rate; profiled: offsets (trials) */
    bf_repr repr;
    int per_channel;          /* fixed point (int<m>, uint<m>): a scale per slice along axis 0 */
    /* Fixed point on weights: > 0 clips the quantization range of the
     * selected tensors to [-w_max, w_max] (Stutz et al.'s weight clipping;
     * train with the same clip); the rest of the model, and every tensor
     * with 0, is quantized in its own (or its slices') range. */
    double w_max;
    /* Fixed point on weights: > 0 gives each weight tensor one scale (and
     * for uint<m> one offset) per group_size consecutive elements along its
     * input dimension, stored as fp16 (GPTQ/AWQ's layout; bitflip/repr.h,
     * docs/CAMPAIGNS.md say which dimension per op); 0: per tensor or per
     * channel. 1..BF_GROUP_SIZE_MAX. */
    int64_t group_size;
    /* With group_size: the faults strike the group scales (their fp16 bits,
     * 16 per scale) instead of the weights; a fault moves every weight of
     * its group. Sites keep their tensors' names; their elements are the
     * scales. Not with mitigations or model "profiled". */
    int fault_scales;
    /* Model "profiled": the error map's path as the spec gives it, and the
     * map itself, loaded by the caller (bf_errmap_load_file) before the
     * campaign is created and kept until it is freed; bf_campaign_spec_free
     * (bitflip/api/spec.h) frees both. Trials are `repeats`, each at its own random offset. */
    char *error_map;
    bf_errmap *errmap;
    /* Quantized models (int8/uint8 weights stored as integers): the zero
     * points are fault sites too. Off by default: a zero point is one value
     * per tensor or channel, shared by every weight it offsets. */
    int zero_points;
    bf_persistence persistence;
    /* Fault groups 1.. (BF_FAULT_GROUPS_MAX): drawn in the same trials as
     * the fields above (group 0); sampling "uniform" only. */
    bf_fault_group *groups;
    size_t n_groups;

    bf_sampling sampling;
    bf_fault_entry *list;     /* BF_SAMPLE_LIST */
    size_t n_list;

    unsigned metrics;         /* bitmask over bf_metric_id to report; 0 = every one that applies */
    /* A trial is critical if the metric moves against the model by more than
     * this (absolute); < 0: only prediction changes count. */
    int critical_metric;      /* bf_metric_id, or -1 */
    double critical_delta;
    /* Segmentation: an image is critical when its arg-max changes at more
     * than this share of its pixels (critical_pixels_set 0:
     * BF_CRITICAL_PIXELS_DEFAULT); with critical_metric miou or
     * pixel_accuracy, images are not judged, only the metric. */
    double critical_pixels;
    int critical_pixels_set;
    /* Detection: a detection counts when its score is over this
     * (critical_score_set 0: BF_CRITICAL_SCORE_DEFAULT); see
     * docs/CAMPAIGNS.md for the outcome rule. */
    double critical_score;
    int critical_score_set;

    /* Mitigation configurations to compare on the same faults (paired):
     * api/ and the CLI run the campaign once per entry; each run is a
     * bf_campaign_create_mitigated with one of them. */
    bf_mitigation *mitigations;
    size_t n_mitigations;

    /* Generation (language_model only): > 0 makes every trial also decode
     * this many tokens greedily from each eval-set prompt (its `input_ids`)
     * with the trial's faults, and score the tokens against the golden
     * decoding (generation_match, first_divergence, edit_distance). Weight
     * faults hold for every step; activation faults strike step 0's run
     * (the prompt's pass, whose shapes are the eval pass's). Each trial's
     * decoding is a full re-run (exact). Not with target inputs or
     * mitigations. 0 .. BF_GEN_MAX_NEW_TOKENS (bitflip/generate.h). */
    int64_t gen_new_tokens;

    double stop_margin;       /* 0: run every trial */
    double stop_confidence;   /* e.g. 0.95 */
    /* Each tensor's and each bit position's rates must be within these too
     * (0: not a target; they need stop_margin); the campaign stops when
     * every target holds. */
    double stop_tensor_margin, stop_bit_margin;
    int64_t batch;            /* 0: BF_CAMPAIGN_BATCH_DEFAULT (or the eval set, if smaller) */
} bf_campaign_spec;

#ifdef __cplusplus
}
#endif
#endif
