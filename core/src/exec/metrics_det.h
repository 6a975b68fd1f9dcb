/* Detection metrics and outcomes (metrics_det.c), on plain arrays: a set
 * of detections per image, rows of image i from offsets[i] to
 * offsets[i + 1] - 1, each a box (x1, y1, x2, y2 in input pixels), a class
 * label and, for predictions, a score. The evaluator and campaigns call
 * these once a detector's ragged outputs (boxes [K, 4], labels [K],
 * scores [K] per image) and the eval set's ground truth (gt_boxes,
 * gt_labels, gt_offsets: model/dataset_det.h) are gathered so.
 *
 * Metrics follow pycocotools' COCOeval for bounding boxes with area range
 * "all" and no crowd annotations (docs/GUIDE.md, "Detectors"):
 * - a class's detections are ranked by score over the whole eval set (a
 *   NaN score below every number, as numpy's sort puts it; ties in the
 *   order of the rows); within an image, each detection in that order
 *   takes the unmatched ground-truth box of its class with the highest IoU
 *   >= t (of equal IoUs the last, as COCOeval's loop does); a NaN
 *   coordinate makes an IoU that matches nothing;
 * - maxDets: none; every detection the model outputs counts (COCO caps at
 *   100 per image; a detector's own post-processing caps its outputs);
 * - precision at the 101 recall points 0, 0.01, ..., 1 (the largest
 *   precision at any recall at least that, 0 past the last), per class
 *   and IoU threshold t in 0.5, 0.55, ..., 0.95 (numpy's linspace);
 * - map: the mean over thresholds, recall points and the classes that have
 *   ground truth (a class with none is left out, its detections with it);
 *   map50 the same at t = 0.5; recall: COCO's AR, the final recall per
 *   class and threshold (0 for a class without detections) averaged the
 *   same way. NaN without any ground truth. */
#ifndef BF_METRICS_DET_H
#define BF_METRICS_DET_H

#include <stdint.h>

#include "bitflip/error.h"

typedef struct bf__dets {
    int64_t n;                /* images */
    const int64_t *offsets;   /* n + 1, offsets[0] = 0, non-decreasing */
    const float *boxes;       /* rows x 4: x1, y1, x2, y2 */
    const float *scores;      /* rows; NULL for ground truth */
    const int64_t *labels;    /* rows */
} bf__dets;

typedef struct bf__det_metrics {
    double map, map50, recall;
} bf__det_metrics;

/* The IoU of two xyxy boxes in double: 0 when they do not overlap, NaN
 * when a coordinate is NaN. */
double bf__det_iou(const float *a, const float *b);

/* COCO mAP@[.5:.95], AP50 and AR of `pred` against `gt` (the same n).
 * Allocates scratch (BF_ENOMEM). */
bf_status bf__det_evaluate(const bf__dets *pred, const bf__dets *gt, bf__det_metrics *out, bf_error *err);

/* Detection outcomes against the golden detections (docs/CAMPAIGNS.md): a
 * detection counts when its score is over `threshold` (a NaN score counts:
 * a corrupted detection the pipeline would pass on is an extra, not a
 * missing one). Image i is tolerable when the golden and the faulty
 * detections that count pair up one to one, each pair of the same label
 * and IoU >= 0.5 (a maximum bipartite matching, not a greedy one), and
 * critical otherwise: a missed, an extra or a relabelled detection. Masked
 * (bit-identical outputs) and DUE (NaN or Inf) are the caller's. */
#define BF_DET_SCORE_THRESHOLD_DEFAULT 0.5
#define BF_DET_MATCH_IOU 0.5
bf_status bf__det_image_critical(const bf__dets *golden, const bf__dets *faulty, int64_t image, double threshold, int *critical,
                                 bf_error *err);
/* The images critical by that rule, into *critical_images: IVMOD is
 * *critical_images / n. */
bf_status bf__det_critical_images(const bf__dets *golden, const bf__dets *faulty, double threshold, int64_t *critical_images,
                                  bf_error *err);

#endif
