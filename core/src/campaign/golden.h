/* A campaign's golden pass: the outputs and predictions every trial is
 * judged against, the golden metrics, and, when the differential engine made
 * the pass (bf_campaign_prep), its evaluators and shared cache, handed to
 * the first bf_campaign_run that can use them. Filled by campaign.c. */
#ifndef BF_CAMPAIGN_GOLDEN_H
#define BF_CAMPAIGN_GOLDEN_H

#include "bitflip/eval.h"
#include "bitflip/metrics.h"
#include "exec/eval_det.h"
#include "exec/eval_ragged.h"

struct bf__dx_shared;

typedef struct bf__imaj bf__imaj;
typedef struct bf__golden {
    bf_task task;
    int64_t samples, out_cols;
    float *out;               /* samples * out_cols */
    int64_t *pred;            /* per sample: arg-max, or 0/1 for one score */
    int logits;               /* one score per sample, and scores are logits */
    double metric[BF_METRIC_COUNT];
    double label_entropy;     /* binary: entropy of the positive rate (nats) */
    /* language_model: positions per sequence, vocabulary, labelled
     * positions, the labels [samples, T] (-100: none) and the golden
     * arg-max at each labelled position (-1 elsewhere) */
    int64_t lm_T, lm_V, lm_labelled;
    int64_t *lm_labels, *lm_pred;
    /* segmentation: classes, pixels per image and the golden arg-max at
     * every pixel [samples, HW] */
    int64_t seg_C, seg_HW;
    int32_t *seg_pred;
    /* the differential engine's pass: its evaluators (one per thread it ran
     * on) and shared state (NULL once handed over, or when not prepared) */
    bf_evaluator **gev;
    int n_gev;
    struct bf__dx_shared *gdx;
    int64_t gdx_budget;
    /* the shard whose trials' faults gdx was told of (count 1: every
     * trial's, or none drawn): only that shard's run adopts it */
    int64_t gdx_shard_index, gdx_shard_count;
    /* why every trial runs in full whatever the run asks (a graph the
     * differential engine cannot re-run in part: one sample per call, or
     * dynamic steps, exec/plan_dyn.c), or NULL; static text */
    const char *full_reason;
    /* a one-sample graph's golden checkpoints (exec/ckpt.h; campaign_ckpt.c),
     * which its trials resume from unless the run asks for exact; NULL:
     * none */
    struct bf__ckpt *ckpt;
    /* image-major (campaign_imaj.c): the swept trials' outputs (ckpt then
     * holds one image's block: workers run other trials in full), or NULL;
     * imaj_off: why not, for --stats (static text; NULL: image-major) */
    struct bf__imaj *imaj;
    const char *imaj_off;
    /* a one-sample graph's outputs, every one per sample (n 0 otherwise) */
    bf__ragcopy rag;
    /* detection: which outputs are the boxes, scores, labels (task), and
     * the golden detections (view: rag's, the labels as int64 in labels) */
    struct {
        bf__det_task task;
        bf__dets view;
        int64_t *labels;
        size_t cap;
    } det;
} bf__golden;

#endif
