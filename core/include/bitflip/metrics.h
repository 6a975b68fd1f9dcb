/* bitflip — task metrics over a model's outputs.
 *
 * Classification: outputs are [n, classes] scores, labels int64 class ids;
 * accuracy is the fraction whose first arg-max equals the label.
 * Binary: outputs are one score per sample, labels 0/1. AUC-ROC counts ties
 * as one half (the Mann-Whitney statistic, as sklearn's roc_auc_score).
 * Log loss treats scores in [0, 1] as probabilities and anything else as
 * logits; probabilities are clipped to [1e-7, 1 - 1e-7].
 * Language model: outputs are logits [n, T, V], labels int64 [n, T], the
 * next token at each position or BF_LM_IGNORE (-100, PyTorch's
 * ignore_index) where there is none. Perplexity is exp of the mean
 * cross-entropy over the labelled positions (log-softmax and sums in
 * double; per sequence in position order, then the sequences pairwise, so
 * every caller gets the same bits); token accuracy the share of labelled
 * positions whose first arg-max is the label. Multiple choice (the
 * lm-eval-harness way): rows are (item, choice) pairs, the choice whose
 * continuation has the highest summed log-likelihood (the lowest row
 * cross-entropy) wins, the first such row on ties, a NaN never. */
#ifndef BITFLIP_METRICS_H
#define BITFLIP_METRICS_H

#include <stdint.h>

#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Two arg-max rules, for two jobs; they differ only where a row holds a NaN.
 * Both take the first of equal maxima (-0 and +0 equal) and 0 for n = 0.
 *
 * bf_argmax, for scoring (accuracy, token_accuracy, a prediction changed):
 * NaN never wins over a number, so a NaN logit does not count as the class
 * chosen; a row of NaNs gives 0. [1, NaN, 3] -> 2.
 *
 * bf_argmax_nan_wins, for greedy decoding (bitflip/generate.h): torch.argmax's
 * rule, NaN is the largest, so the first NaN wins, ahead of +Inf; the
 * token a PyTorch decoder would feed back. [1, NaN, 3] -> 1.
 *
 * test_metrics checks both against torch.argmax on rows with NaN, ties,
 * infinities and signed zeros (tests/fixtures/argmax, made by PyTorch). */
int64_t bf_argmax(const float *row, int64_t n);
int64_t bf_argmax_nan_wins(const float *row, int64_t n);

/* Rows of n numbers (a[rows][n] and b[rows][n]) whose bf_argmax differs
 * between a and b: a changed prediction per row (a classifier's sample, a
 * language model's position). The CPU path is chosen once for all rows. */
int64_t bf_argmax_changed(const float *a, const float *b, int64_t rows, int64_t n);

double bf_metric_accuracy(const float *scores, int64_t n, int64_t classes,
                          const int64_t *labels);

/* AUC needs scratch: `order` holds n int64 entries. Fails with BF_EINVAL when
 * only one class is present (AUC is undefined then). */
bf_status bf_metric_auc(const float *scores, const float *labels, int64_t n, int64_t *order,
                        double *auc, bf_error *err);

double bf_metric_logloss(const float *scores, const float *labels, int64_t n);

#define BF_LM_IGNORE (-100)

/* row_ce: scratch of n doubles, left holding each sequence's summed
 * cross-entropy. NaN perplexity and token accuracy with no labelled
 * position. */
void bf_metric_lm(const float *logits, const int64_t *labels, int64_t n, int64_t T, int64_t V, double *row_ce,
                  double *perplexity, double *token_accuracy);
/* From each row's summed cross-entropy (bf_metric_lm's row_ce): item[r] in
 * [0, n) is row r's item, answer[r] 1 on each item's correct row, 0 on the
 * others; best: scratch of n entries. The share of items whose winning row
 * is the correct one. */
double bf_metric_choice_accuracy(const double *row_ce, int64_t n, const int64_t *item, const int64_t *answer,
                                 int64_t *best);

/* Segmentation: logits [n, C, HW] (HW pixels per image), labels [n, HW]
 * class ids or BF_SEG_IGNORE. The prediction at a pixel is its arg-max over
 * C by bf_argmax_nan_wins's rule (torch.argmax's: NaN is the largest, the
 * first of equal maxima). From the confusion matrix over every labelled
 * pixel (cm: scratch of C x C, left holding it, row the label, column the
 * prediction): mIoU, the mean of TP / (TP + FP + FN) over the classes whose
 * union is not empty (the VOC devkit's, torchvision's references' mean
 * with empty classes left out), and pixel accuracy, the share of labelled
 * pixels predicted right; NaN with no labelled pixel. pred: scratch of HW
 * entries. Labels outside [0, C) other than BF_SEG_IGNORE must not occur
 * (the evaluator refuses them). */
#define BF_SEG_IGNORE 255
void bf_metric_segmentation(const float *logits, const int64_t *labels, int64_t n, int64_t C, int64_t HW, int64_t *cm,
                            int32_t *pred, double *miou, double *pixel_accuracy);
/* Pixels of n images whose arg-max (the rule above) differs between a and
 * b, both [n, C, HW]. */
int64_t bf_metric_seg_changed(const float *a, const float *b, int64_t n, int64_t C, int64_t HW);

#ifdef __cplusplus
}
#endif
#endif
