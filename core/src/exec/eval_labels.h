/* The labels an evaluator scores a pass against (eval_labels.c): which
 * task the eval set's 'labels' (and 'mc_item', 'mc_answer') make with the
 * model's first output, checked and converted once when the evaluator is
 * made: classification, binary, language_model (with multiple choice) or
 * segmentation. Detection's ground truth is eval_det.h's. */
#ifndef BF_EVAL_LABELS_H
#define BF_EVAL_LABELS_H

#include "bitflip/dataset.h"
#include "bitflip/eval.h"
#include "bitflip/model.h"
#include "exec/metrics_seg.h"

typedef struct bf__eval_labels {
    /* what it was bound against */
    const bf_model *model;
    const bf_dataset *ds;
    int64_t samples, out_cols;
    const bf_tensor *out0;    /* the first output's shape, as a plan has it */
    bf_task task;
    /* the labels */
    const bf_tensor *labels;
    float *labels_f;          /* binary labels as float */
    int64_t *labels_i;        /* class labels as int64; language_model: [samples, lm_T] */
    int64_t lm_T, lm_V;       /* language_model: positions per sequence, vocabulary */
    int64_t lm_labelled;      /* ... positions with a label (not -100) */
    double *row_ce;           /* ... scratch: each sequence's cross-entropy */
    int64_t *mc_item, *mc_answer, *mc_best;   /* multiple choice (NULL: none) */
    bf__seg *seg;             /* segmentation (metrics_seg.h; NULL: another task) */
    int64_t *order;           /* AUC scratch */
} bf__eval_labels;

/* Binds the eval set's labels for a model whose first output is out0
 * (out_cols values per sample; 0 for a one-sample graph's output of data
 * size): *task is what they make (BF_TASK_NONE: no labels). Errors name the
 * tensor and what it should be. */
bf_status bf__eval_labels_bind(bf__eval_labels *l, const bf_model *m, const bf_dataset *ds, int64_t samples,
                               int64_t out_cols, const bf_tensor *out0, bf_task *task, bf_error *err);
void bf__eval_labels_free(bf__eval_labels *l);

#endif
