/* The detection ground truth's layout (dataset_det.h). Uploads are hostile:
 * every offset and box is checked once, at load, so that the metrics
 * (exec/metrics_det.c) can index with them unchecked. */
#include "model/dataset_det.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static const char *const NAMES[3] = {"gt_boxes", "gt_labels", "gt_offsets"};

int bf__dataset_det_name(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, NAMES[i]) == 0) return 1;
    return 0;
}

static const bf_tensor *find(const bf_tensor *tensors, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(tensors[i].name, name) == 0) return &tensors[i];
    return NULL;
}

/* Shapes and dtypes: [K, 4] F32, [K] I64, [n + 1] I64. */
static bf_status check_shapes(const bf_tensor *const t[3], int64_t n, const char *label, bf_error *err)
{
    char s[96];
    static const bf_dtype want[3] = {BF_F32, BF_I64, BF_I64};
    for (int i = 0; i < 3; i++)
        if (t[i]->dtype != want[i])
            return bf_error_set(err, BF_EFORMAT, "%.200s: tensor '%s' is %s; it must be %s", label, NAMES[i],
                                bf_dtype_name(t[i]->dtype), bf_dtype_name(want[i]));
    if (t[0]->ndim != 2 || t[0]->dims[1] != 4)
        return bf_error_set(err, BF_ESHAPE, "%.200s: tensor 'gt_boxes' has shape %s; it must be [K, 4] (x1, y1, x2, y2 per box)",
                            label, bf_shape_str(t[0]->dims, t[0]->ndim, s, sizeof s));
    if (t[1]->ndim != 1 || t[1]->dims[0] != t[0]->dims[0])
        return bf_error_set(err, BF_ESHAPE, "%.200s: tensor 'gt_labels' has shape %s; it must be [%" PRId64 "], a label per row of "
                            "'gt_boxes'", label, bf_shape_str(t[1]->dims, t[1]->ndim, s, sizeof s), t[0]->dims[0]);
    if (t[2]->ndim != 1 || (n >= 0 && t[2]->dims[0] != n + 1) || t[2]->dims[0] < 1)
        return bf_error_set(err, BF_ESHAPE, "%.200s: tensor 'gt_offsets' has shape %s; it must be [%" PRId64 "], one more than the "
                            "%" PRId64 " samples of the input tensors", label, bf_shape_str(t[2]->dims, t[2]->ndim, s, sizeof s),
                            n + 1, n);
    return BF_OK;
}

bf_status bf__dataset_det_check(const bf_tensor *tensors, size_t count, int64_t n, const char *label, bf_error *err)
{
    const bf_tensor *t[3];
    int present = 0;
    for (int i = 0; i < 3; i++) present += (t[i] = find(tensors, count, NAMES[i])) != NULL;
    if (present == 0) return BF_OK;
    if (present < 3) {
        int miss = !t[0] ? 0 : !t[1] ? 1 : 2;
        return bf_error_set(err, BF_EFORMAT, "%.200s: detection ground truth needs 'gt_boxes', 'gt_labels' and 'gt_offsets'; "
                            "'%s' is missing", label, NAMES[miss]);
    }
    bf_status st = check_shapes(t, n, label, err);
    if (st != BF_OK) return st;
    const float *b = t[0]->data;
    const int64_t *lab = t[1]->data, *off = t[2]->data;
    int64_t k = t[0]->dims[0], images = t[2]->dims[0] - 1;
    if (off[0] != 0)
        return bf_error_set(err, BF_ERANGE, "%.200s: gt_offsets[0] is %" PRId64 "; it must be 0 (image 0's first box)", label, off[0]);
    for (int64_t i = 0; i < images; i++)
        if (off[i + 1] < off[i])
            return bf_error_set(err, BF_ERANGE, "%.200s: gt_offsets[%" PRId64 "] is %" PRId64 ", below gt_offsets[%" PRId64 "] = %"
                                PRId64 "; offsets never decrease", label, i + 1, off[i + 1], i, off[i]);
    if (off[images] != k)
        return bf_error_set(err, BF_ERANGE, "%.200s: gt_offsets[%" PRId64 "] is %" PRId64 "; the last offset must be %" PRId64
                            ", the rows of 'gt_boxes'", label, images, off[images], k);
    for (int64_t r = 0; r < k; r++) {
        const float *x = b + 4 * r;
        int finite = isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2]) && isfinite(x[3]);
        const char *why = !finite ? "a coordinate is not finite"
                        : x[0] < 0 || x[1] < 0 ? "a coordinate is negative"
                        : x[2] < x[0] || x[3] < x[1] ? "x2 < x1 or y2 < y1 (boxes are x1, y1, x2, y2)" : NULL;
        if (why)
            return bf_error_set(err, BF_ERANGE, "%.200s: gt_boxes[%" PRId64 "] is [%g, %g, %g, %g]: %s", label, r, x[0], x[1], x[2],
                                x[3], why);
        if (lab[r] < 0)
            return bf_error_set(err, BF_ERANGE, "%.200s: gt_labels[%" PRId64 "] is %" PRId64 "; class labels are >= 0", label, r,
                                lab[r]);
    }
    return BF_OK;
}

bf_status bf__dataset_det_gt(const bf_dataset *ds, bf__det_gt *gt, bf_error *err)
{
    const bf_tensor *b = bf_dataset_find(ds, "gt_boxes"), *l = bf_dataset_find(ds, "gt_labels"), *o = bf_dataset_find(ds, "gt_offsets");
    memset(gt, 0, sizeof *gt);
    if (!b || !l || !o)
        return bf_error_set(err, BF_ENOTFOUND, "the eval set has no detection ground truth ('gt_boxes', 'gt_labels', 'gt_offsets')");
    *gt = (bf__det_gt){.n = o->dims[0] - 1, .k = b->dims[0], .offsets = o->data, .boxes = b->data, .labels = l->data};
    return BF_OK;
}
