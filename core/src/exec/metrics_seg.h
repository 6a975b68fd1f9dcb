/* The segmentation task (metrics_seg.c): its eval-set layout, labels
 * int64 [n, H, W] (class ids, BF_SEG_IGNORE = 255 ignored) against logits
 * [n, C, H, W], and its metrics, mIoU and pixel accuracy, from a confusion
 * matrix over the whole eval set (integers, so any order of images, and a
 * trial that updates the golden matrix by the images it changed, gives
 * the same bits). The prediction at a pixel is the arg-max over C with
 * torch.argmax's rule (bf_argmax_nan_wins: NaN is the largest, the first
 * of equal maxima). */
#ifndef BF_METRICS_SEG_H
#define BF_METRICS_SEG_H

#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/metrics.h"
#include "bitflip/tensor.h"


typedef struct bf__seg {
    int64_t n, C, HW;         /* images, classes, pixels per image */
    const int64_t *labels;    /* n x HW, BF_SEG_IGNORE where ignored: the eval set's own tensor
                               * when it is int64 (the evaluator reads its eval set in place, as
                               * it reads its inputs), else own */
    int64_t *own;             /* the labels converted to int64 (NULL: read in place) */
    int64_t labelled;         /* pixels not ignored */
    int64_t *cm;              /* scratch: C x C (row: label, column: prediction) */
    int32_t *pred;            /* scratch: HW */
} bf__seg;

/* 1 if eval tensor `labels` and output shape `out` (its sample dim 0 the
 * batch) make a segmentation layout: labels of rank 3 against an output of
 * rank 4. */
int bf__seg_layout(const bf_tensor *labels, const bf_tensor *out);
/* Checks the layout (the output's H, W those of the labels; integer
 * labels in [0, C) or 255; at least one labelled pixel) and copies the
 * labels; out_name names the graph output in messages. */
bf_status bf__seg_create(const bf_tensor *labels, const bf_tensor *out, const char *out_name, int64_t n, bf__seg **seg,
                         bf_error *err);
void bf__seg_free(bf__seg *seg);

/* The arg-max over C planes of HW pixels (logits [C, HW]) at every pixel. */
void bf__seg_argmax(const float *logits, int64_t C, int64_t HW, int32_t *pred);
/* Pixels of one image (logits [C, HW]) whose arg-max differs from pred. */
int64_t bf__seg_changed(const float *logits, const int32_t *pred, int64_t C, int64_t HW);
/* Adds (sign 1) or takes away (-1) one image's labelled pixels to the
 * confusion matrix cm [C x C]. */
void bf__seg_confusion(int64_t *cm, int64_t C, const int64_t *labels, const int32_t *pred, int64_t HW, int sign);
/* mIoU (the mean over classes whose union TP + FP + FN is not empty) and
 * pixel accuracy (the diagonal over every entry); NaN when empty. */
void bf__seg_metrics(const int64_t *cm, int64_t C, double *miou, double *pixel_accuracy);
/* The metrics of outputs [n, C, HW], with seg's scratch. */
void bf__seg_score(bf__seg *seg, const float *outputs, double *miou, double *pixel_accuracy);
/* The same, every image's arg-max left in keep [n, HW] (a campaign's golden
 * one, which its trials are judged against); keep NULL: bf__seg_score. */
void bf__seg_score_keep(bf__seg *seg, const float *outputs, int32_t *keep, double *miou, double *pixel_accuracy);

#endif
