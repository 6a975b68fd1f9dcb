/* A detection eval set's ground truth (dataset_det.c): `gt_boxes` float32
 * [K, 4] (x1, y1, x2, y2 in the input's pixels), `gt_labels` int64 [K] and
 * `gt_offsets` int64 [N + 1] (image i owns rows gt_offsets[i] to
 * gt_offsets[i + 1] - 1), beside the input tensors; their dim 0 is not the
 * sample, so the loader's rule that every tensor's is leaves them out, and
 * checks them here instead, values included, when a file is loaded. */
#ifndef BF_DATASET_DET_H
#define BF_DATASET_DET_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/dataset.h"

typedef struct bf__det_gt {
    int64_t n, k;             /* images, boxes */
    const int64_t *offsets;   /* n + 1 */
    const float *boxes;       /* k x 4 */
    const int64_t *labels;    /* k */
} bf__det_gt;

/* 1 if `name` is one of the three ground-truth tensors. */
int bf__dataset_det_name(const char *name);
/* At load, the tensors read (count of them), n the samples of the others
 * (-1: there are none; then gt_offsets gives them): all three or none,
 * their dtypes and shapes, gt_offsets from 0, non-decreasing, ending at K,
 * boxes finite, x1, y1 >= 0, x2 >= x1, y2 >= y1, labels >= 0. Errors name
 * the tensor and the entry; label prefixes them (the file). */
bf_status bf__dataset_det_check(const bf_tensor *tensors, size_t count, int64_t n, const char *label, bf_error *err);
/* The ground truth of a loaded eval set: BF_ENOTFOUND when it has none. */
bf_status bf__dataset_det_gt(const bf_dataset *ds, bf__det_gt *gt, bf_error *err);

#endif
