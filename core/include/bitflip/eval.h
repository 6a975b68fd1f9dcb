/* bitflip — evaluation: a model over a whole eval set, in batches, on threads.
 *
 * An evaluator holds one plan per thread (and one for the last, partial
 * batch), built once; each run feeds every sample through and gathers the
 * first graph output and the task metric. Runs may apply bit flips: each is
 * applied to every plan before the pass and undone after, so the fault is
 * permanent for the pass and gone afterwards. They may also apply value
 * faults (activations, graph inputs): see bf_evaluator_set_value_faults. */
#ifndef BITFLIP_EVAL_H
#define BITFLIP_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/dataset.h"
#include "bitflip/error.h"
#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bf_task {
    BF_TASK_NONE = 0,        /* no labels: outputs only */
    BF_TASK_CLASSIFICATION,  /* integer labels, [n, classes] output */
    BF_TASK_BINARY,          /* float 0/1 labels, one score per sample */
    BF_TASK_LANGUAGE_MODEL,  /* int64 labels [n, T]: the next token at each position
                              * (-100: none), logits [n, T, vocab]; optionally
                              * mc_item, mc_answer [n]: multiple-choice rows
                              * (docs/GUIDE.md, "Language models") */
    BF_TASK_DETECTION,       /* gt_boxes float32 [K, 4], gt_labels int64 [K], gt_offsets
                              * int64 [n + 1] against outputs boxes, labels, scores
                              * (docs/GUIDE.md, "Detectors") */
    BF_TASK_SEGMENTATION     /* int64 labels [n, H, W] (255: ignored) against logits
                              * [n, C, H, W] (docs/GUIDE.md, "Segmenters") */
} bf_task;

const char *bf_task_name(bf_task task);

/* Cancellation flags: a plain int the caller owns (0: go on), so that the
 * options structs stay usable from C++, which has no atomic_int; these three
 * read and write it atomically, from any thread or a signal handler. */
void bf_cancel_request(int *flag);
void bf_cancel_clear(int *flag);
int bf_cancel_requested(const int *flag);

/* Called on the thread that called bf_evaluator_run, after each of its
 * batches, with the samples finished so far by all threads. */
typedef void (*bf_progress_fn)(void *user, int64_t done, int64_t total);

typedef struct bf_eval_opts {
    int64_t batch;           /* samples per plan run; 0 = 256, or less so that
                              * a small eval set still splits across threads */
    int threads;             /* worker threads; 0 = 1 */
    bf_progress_fn progress; /* optional */
    void *progress_user;
    /* Optional: a flag set with bf_cancel_request (from any thread) to
     * stop a run between batches; the run then fails with BF_ECANCELED. */
    const int *cancel;
    /* 1: the plans reuse an activation's memory once its last reader has
     * run (bf_plan_opts.share_buffers): far less memory and cache traffic,
     * for evaluators that only run whole passes; the differential engine's
     * and a campaign's need every value kept, so they leave it 0. */
    int share_buffers;
    /* 1: the plans fuse a Conv's only Relu or Clip, or residual Add (and
     * its Relu or Clip), into it (bf_plan_opts.fuse_activations): the same outputs, for evaluators
     * that read no activation but the graph outputs. */
    int fuse_activations;
    /* The plans' cap on a run's memory for shapes that are data
     * (bf_plan_opts.max_run_bytes; 0: its default). The CLI's --run-memory. */
    uint64_t max_run_bytes;
    /* Optional (the conformance runner; NULL for everyone else, which costs
     * nothing): a record, per eval-set sample of a one-sample graph, of the
     * decisions its NonMaxSuppression took within rounding (bf_nms_ties_new
     * below). Each run rewrites the record of every sample it computes;
     * outputs are unchanged. */
    struct bf_nms_ties *nms_ties;
} bf_eval_opts;

/* NMS near-ties (docs/OPS.md, "NMS near-ties"). Another engine's scores
 * differ from ours in the last bits, so where NMS chose between two boxes
 * whose scores are within rounding of each other (a kept box and one it
 * suppressed), or an IoU lay within rounding of the threshold, it may have
 * kept the other box, and every box after it may differ. A record holds,
 * per sample, whether its pass took such a decision: scores a and b are
 * within rounding when |a - b| <= max(score_atol, score_rtol max(|a|, |b|)),
 * an IoU when within iou_margin of the threshold, a candidate's score when
 * within rounding of NonMaxSuppression's score_threshold. */
typedef struct bf_nms_ties bf_nms_ties;
bf_status bf_nms_ties_new(int64_t samples, double score_rtol, double score_atol, double iou_margin,
                          bf_nms_ties **out, bf_error *err);
void bf_nms_ties_free(bf_nms_ties *t);
/* Sample s's record from its last run: 0 no near tie; 1 the last
 * NonMaxSuppression of the pass took one, *score its highest score involved
 * (its first such decision in score order); 2 an earlier one did (a
 * detector's proposals: every box after it may differ). */
int bf_nms_ties_at(const bf_nms_ties *t, int64_t s, float *score);
/* Where bf_nms_ties_at says 1: the scores of every candidate of that last
 * NonMaxSuppression whose fate another engine may decide otherwise (each
 * candidate overlapping a near decision's boxes, directly or through a
 * chain of boxes overlapping past the IoU threshold less the margin; every
 * candidate of a class whose max_output_boxes_per_class was reached);
 * every other candidate is kept or suppressed as here by any engine within
 * the margins (docs/OPS.md, "NMS near-ties"). Returns how many, *scores
 * valid until the sample's next run; 0 and NULL otherwise. */
int64_t bf_nms_ties_region(const bf_nms_ties *t, int64_t s, const float **scores);

/* What bf_evaluator_create and a run of it will hold (bitflip/plan.h),
 * computed without allocating it. */
bf_status bf_eval_estimate(const bf_model *model, const bf_dataset *ds, const bf_eval_opts *opts,
                           bf_job_budget *out, bf_error *err);

/* A graph output of a one-sample graph (its inputs have no batch dim; the
 * eval set's tensors have one more dim than they), whose size may be data:
 * a detector's boxes [K, 4], labels [K] and scores [K], K per image. Every
 * sample's elements as float (int64 class ids and bools exactly), in eval
 * order: sample i owns data[offsets[i] .. offsets[i + 1] - 1], rows of
 * row_elems elements (the product of the value's dims past dim 0; 1 for a
 * scalar or a 1-D value). */
typedef struct bf_ragged_output {
    const char *name;
    int64_t row_elems;
    const int64_t *offsets;  /* samples + 1 */
    const float *data;
} bf_ragged_output;

typedef struct bf_eval_result {
    bf_task task;
    int64_t samples;
    int64_t out_cols;        /* elements of the first output per sample */
    float *outputs;          /* samples * out_cols, owned by the evaluator */
    double accuracy;         /* classification */
    double auc, logloss;     /* binary (auc is NaN if only one class) */
    /* language_model: exp of the mean cross-entropy over the labelled
     * positions (accumulated in double), and the share of them whose
     * arg-max is the label; NaN for other tasks */
    double perplexity, token_accuracy;
    /* language_model with multiple-choice rows (eval tensors mc_item and
     * mc_answer): the share of items whose highest-likelihood choice is
     * the correct one; NaN otherwise */
    double choice_accuracy;
    /* segmentation: the mean over classes of IoU = TP / (TP + FP + FN) from
     * the confusion matrix of the whole eval set (classes no label and no
     * prediction has left out), and the share of labelled (not 255)
     * pixels whose arg-max is the label; NaN for other tasks */
    double miou, pixel_accuracy;
    /* detection: COCO mAP@[.5:.95] (101-point interpolation, every
     * detection ranked by score), AP at IoU 0.5, and COCO's average recall
     * over the same IoU thresholds; NaN for other tasks */
    double map, map50, recall;
    double seconds;          /* wall time of the pass */
    /* One-sample graphs: every graph output, per sample (bf_ragged_output),
     * owned by the evaluator; outputs/out_cols then hold output 0 only when
     * its size is the same for every sample (else NULL, 0). n_ragged 0,
     * ragged NULL for batched graphs. */
    size_t n_ragged;
    const bf_ragged_output *ragged;
} bf_eval_result;

typedef struct bf_evaluator bf_evaluator;

/* Checks the dataset against the model (every input present, shapes fit,
 * labels usable) and builds the plans. */
bf_status bf_evaluator_create(const bf_model *model, const bf_dataset *ds,
                              const bf_eval_opts *opts, bf_evaluator **out, bf_error *err);
void bf_evaluator_free(bf_evaluator *ev);

bf_task bf_evaluator_task(const bf_evaluator *ev);
/* 1: the graph takes one sample per call (its inputs have no batch dim),
 * so the eval set runs a sample at a time and results carry `ragged`. */
int bf_evaluator_unbatched(const bf_evaluator *ev);
/* The batch size in use (results are bit-identical across runs and thread
 * counts for the same batch size; see plan.h). */
int64_t bf_evaluator_batch(const bf_evaluator *ev);
/* The Conv + activation pairs the evaluator's plans fuse (0 unless made
 * with fuse_activations): every pass fuses them all, but for a pair whose
 * Conv output a value fault hits (bf_plan_num_fused counts a plan's run). */
size_t bf_evaluator_num_fused(const bf_evaluator *ev);

/* One pass over the eval set with `n_flips` flips applied. The result's
 * outputs point into the evaluator and are overwritten by the next run. */
bf_status bf_evaluator_run(bf_evaluator *ev, const bf_bitflip *flips, size_t n_flips,
                           bf_eval_result *res, bf_error *err);

/* A pass that computes only the batch holding eval-set sample `sample` and
 * takes every other sample's outputs from `base` (samples x out_cols floats,
 * e.g. this evaluator's own fault-free outputs, which the other batches
 * would reproduce bit for bit): for faults that can change that sample only
 * (transient value faults), a pass at the cost of one batch. Runs on the
 * calling thread; the value faults of that batch apply; no progress calls. */
bf_status bf_evaluator_run_sample(bf_evaluator *ev, int64_t sample, const float *base, bf_eval_result *res,
                                  bf_error *err);

/* --- parameters in every plan (for fault campaigns) ---------------------
 * An evaluator's plans each hold their own copy of a parameter once it is
 * written (see plan.h); these write the same values into all of them, so a
 * run sees them whichever plan computes a batch. The model is untouched. */

/* Replaces parameter `param` with `values` (its element count of floats) in
 * every plan: e.g. the model rounded to fp16, as the golden model of a
 * campaign. Allocates each plan's copy if it has none yet. An int8/uint8
 * parameter takes its integers as floats (saturated to the type's range). */
bf_status bf_evaluator_set_param(bf_evaluator *ev, size_t param, const float *values, bf_error *err);
/* Writes element `index` of parameter `param` in every plan. Allocates
 * nothing once the parameter has been set or written before. */
bf_status bf_evaluator_write_param(bf_evaluator *ev, size_t param, int64_t index, float value,
                                   bf_error *err);

/* --- value faults (activations and graph inputs) ----------------------
 * Faults on values computed at run time (see bf_value_fault in fault.h),
 * with `sample` an eval-set sample: the fault hits that sample's row of the
 * batch that holds it, in whichever plan runs that batch, once per pass
 * (a transient fault). sample -1: every row of every batch, so every sample
 * of the pass (a permanent fault). `index` is the element within one
 * sample's slice. They apply in every run until replaced; n = 0 clears. On
 * failure none are set. Allocates only when n exceeds every earlier n. */
bf_status bf_evaluator_set_value_faults(bf_evaluator *ev, const bf_value_fault *faults, size_t n, bf_error *err);
/* Value fault i in the last run: the stored value it found and left (see
 * bf_plan_value_fault_seen) in its sample, or in sample 0 for an
 * every-sample fault. NaN if it was not applied. */
void bf_evaluator_value_fault_seen(const bf_evaluator *ev, size_t i, float *old_value, float *new_value);

#ifdef __cplusplus
}
#endif
#endif
