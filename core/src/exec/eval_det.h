/* The detection task of an evaluator (eval_det.c): which graph outputs are
 * the boxes, scores and labels, the eval set's ground truth, and the views
 * that metrics_det.c's functions read, made from a pass's per-sample
 * outputs (eval_ragged.h). */
#ifndef BF_EVAL_DET_H
#define BF_EVAL_DET_H

#include "bitflip/eval.h"
#include "exec/metrics_det.h"
#include "model/dataset_det.h"

typedef struct bf__det_task {
    size_t k_boxes, k_scores, k_labels;   /* graph output indices */
    bf__det_gt gt;
} bf__det_task;

/* A detection eval set (gt_boxes, gt_labels, gt_offsets) for this graph:
 * *found 0 when the eval set has no ground truth (t untouched); otherwise
 * the graph must take one image per call (unbatched) and have outputs
 * named boxes, scores and labels (bitflip.export writes them so), or the
 * error says which is missing. */
bf_status bf__det_task_find(const bf_model *m, const bf_dataset *ds, int unbatched, bf__det_task *t, int *found,
                            bf_error *err);
/* The detections of a pass as metrics_det.c reads them: boxes and scores
 * point into outs, the labels are converted into *scratch (grown as
 * needed, *cap entries; the caller frees it). */
bf_status bf__det_view(const bf__det_task *t, const bf_ragged_output *outs, int64_t samples, int64_t **scratch, size_t *cap,
                       bf__dets *out, bf_error *err);
/* The ground truth as a view. */
void bf__det_gt_view(const bf__det_task *t, bf__dets *out);

/* An evaluator's detection part: the task, and the buffer a pass's labels
 * are converted into (bf__det_view's scratch). */
typedef struct bf__eval_det {
    bf__det_task task;
    int64_t *labels;
    size_t cap;
} bf__eval_det;

/* COCO mAP, AP50 and recall (metrics_det.c) of a pass's detections (outs:
 * its per-sample outputs) into res. */
bf_status bf__eval_det_score(bf__eval_det *d, const bf_ragged_output *outs, int64_t samples, bf_eval_result *res,
                             bf_error *err);
void bf__eval_det_free(bf__eval_det *d);

#endif
