/* bitflip — task metrics over a model's outputs.
 *
 * Classification: outputs are [n, classes] scores, labels int64 class ids;
 * accuracy is the fraction whose first arg-max equals the label.
 * Binary: outputs are one score per sample, labels 0/1. AUC-ROC counts ties
 * as one half (the Mann-Whitney statistic, as sklearn's roc_auc_score).
 * Log loss treats scores in [0, 1] as probabilities and anything else as
 * logits; probabilities are clipped to [1e-7, 1 - 1e-7]. */
#ifndef BITFLIP_METRICS_H
#define BITFLIP_METRICS_H

#include <stdint.h>

#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Index of the first maximum of row[0..n); NaN never wins over a number. */
int64_t bf_argmax(const float *row, int64_t n);

double bf_metric_accuracy(const float *scores, int64_t n, int64_t classes,
                          const int64_t *labels);

/* AUC needs scratch: `order` holds n int64 entries. Fails with BF_EINVAL when
 * only one class is present (AUC is undefined then). */
bf_status bf_metric_auc(const float *scores, const float *labels, int64_t n, int64_t *order,
                        double *auc, bf_error *err);

double bf_metric_logloss(const float *scores, const float *labels, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
