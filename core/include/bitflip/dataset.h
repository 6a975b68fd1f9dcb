/* bitflip — dataset: an eval set read from a safetensors file.
 *
 * One tensor per graph input, named like the input, plus `labels`: int64 (or
 * other integer) class ids for classification, float 0/1 for binary tasks
 * (integer 0/1 too, when the model outputs one score per sample).
 * Every tensor's first dimension is the sample, but for a detection eval
 * set's ground truth: `gt_boxes` float32 [K, 4] (x1, y1, x2, y2 pixels),
 * `gt_labels` int64 [K] and `gt_offsets` int64 [N + 1] (image i owns rows
 * gt_offsets[i] .. gt_offsets[i + 1] - 1), checked at load, values too
 * (docs/GUIDE.md, "Detectors"). The header is parsed with
 * jansson and every offset is checked against the file before use. F32, F16,
 * BF16, I64, I32 and U8 are read; tensors keep their stored dtype. */
#ifndef BITFLIP_DATASET_H
#define BITFLIP_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/limits.h"
#include "bitflip/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bf_dataset bf_dataset;

bf_status bf_dataset_load_file(const char *path, bf_dataset **out, bf_error *err);
bf_status bf_dataset_load_buffer(const void *buf, size_t len, const char *label,
                                 bf_dataset **out, bf_error *err);
/* The same with the limits of `lim` (NULL or 0 fields: defaults;
 * bitflip/limits.h): header bytes, its JSON nesting, tensor count and the
 * bytes of data loaded. Past one: BF_ELIMIT, before the allocation. */
bf_status bf_dataset_load_file_opts(const char *path, const bf_dataset_limits *lim, bf_dataset **out,
                                    bf_error *err);
bf_status bf_dataset_load_buffer_opts(const void *buf, size_t len, const char *label,
                                      const bf_dataset_limits *lim, bf_dataset **out, bf_error *err);
void bf_dataset_free(bf_dataset *ds);

size_t bf_dataset_num_tensors(const bf_dataset *ds);
const bf_tensor *bf_dataset_tensor(const bf_dataset *ds, size_t i);
/* The tensor called `name`, or NULL. */
const bf_tensor *bf_dataset_find(const bf_dataset *ds, const char *name);
/* Samples: dim 0 shared by every tensor (checked at load). */
int64_t bf_dataset_num_samples(const bf_dataset *ds);

/* Copies samples [start, start+count) of `src` into `dst` (whose dim 0 is at
 * least count and whose other dims match src's), converting dtype. */
bf_status bf_dataset_copy_rows(const bf_tensor *src, int64_t start, int64_t count,
                               bf_tensor *dst, bf_error *err);

#ifdef __cplusplus
}
#endif
#endif
