/* segmentation trial metrics from the golden pass's (see diff.h): the
 * golden confusion matrix and arg-max at every pixel are kept; a trial
 * takes each changed image's golden pixels out of the matrix and puts its
 * new arg-max in. The matrix holds integers, so this is the matrix a full
 * recomputation builds, and mIoU and pixel accuracy come out the same bits,
 * at the cost of the changed images. Each changed image's count of pixels
 * whose arg-max moved is left in the scratch's pred for the trial's
 * outcome (campaign_judge.c). */
#include <string.h>

#include "base/alloc.h"
#include "diff/diff.h"
#include "exec/metrics_seg.h"
#include "exec/step_access.h"

struct bf__seg_scorer {
    const bf__seg *seg;      /* the evaluator's layout: labels, C, HW */
    int64_t *cm;             /* golden confusion matrix, C x C */
    const int32_t *pred;     /* golden arg-max, [n, HW]: the caller's, or own */
    int32_t *own;            /* computed here when the caller had none (NULL: the caller's) */
};

void bf__seg_scorer_free(bf__seg_scorer *sc)
{
    if (!sc) return;
    bf__free(sc->cm);
    bf__free(sc->own);
    bf__free(sc);
}

/* golden_pred: the campaign's golden arg-max (campaign_golden.c's seg_pred,
 * the same bf__seg_argmax of the same golden outputs), read in place: a
 * second arg-max of LRASPP's 16 images was 22M logits read and 4 MB of
 * fresh pages, about 1% of its campaign (docs/perf/detectors.md, h19-det). */
bf_status bf__seg_scorer_create(bf_evaluator *ev, const float *golden, const int32_t *golden_pred, int64_t samples,
                                int64_t cols, bf__seg_scorer **out, bf_error *err)
{
    bf__seg_scorer *sc = bf__calloc(1, sizeof *sc);
    *out = NULL;
    if (!sc) return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
    sc->seg = bf__evaluator_seg(ev);
    int64_t C = sc->seg->C, HW = sc->seg->HW;
    sc->cm = bf__calloc((size_t)(C * C), sizeof *sc->cm);
    if (!golden_pred) sc->own = bf__malloc((size_t)(samples * HW) * sizeof *sc->own + 1);
    sc->pred = golden_pred ? golden_pred : sc->own;
    if (!sc->cm || !sc->pred) {
        bf__seg_scorer_free(sc);
        return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
    }
    for (int64_t i = 0; i < samples; i++) {
        if (sc->own) bf__seg_argmax(golden + i * cols, C, HW, sc->own + i * HW);
        bf__seg_confusion(sc->cm, C, sc->seg->labels + i * HW, sc->pred + i * HW, HW, 1);
    }
    *out = sc;
    return BF_OK;
}

bf_status bf__seg_scratch_init(const bf__seg_scorer *sc, bf__score_scratch *s, bf_error *err)
{
    s->seg_cm = bf__malloc((size_t)(sc->seg->C * sc->seg->C) * sizeof *s->seg_cm);
    s->seg_px = bf__malloc((size_t)sc->seg->HW * sizeof *s->seg_px + 1);
    if (!s->seg_cm || !s->seg_px) return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
    return BF_OK;
}

void bf__seg_score_rows(const bf__seg_scorer *sc, bf__score_scratch *s, const float *outputs, const int64_t *rows,
                        int64_t n_rows, bf_eval_result *res)
{
    int64_t C = sc->seg->C, HW = sc->seg->HW, cols = C * HW;
    memcpy(s->seg_cm, sc->cm, (size_t)(C * C) * sizeof *s->seg_cm);
    for (int64_t t = 0; t < n_rows; t++) {
        int64_t i = rows[t], moved = 0;
        const int32_t *g = sc->pred + i * HW;
        const int64_t *labels = sc->seg->labels + i * HW;
        bf__seg_argmax(outputs + i * cols, C, HW, s->seg_px);
        for (int64_t p = 0; p < HW; p++) moved += s->seg_px[p] != g[p];
        if (moved) {
            bf__seg_confusion(s->seg_cm, C, labels, g, HW, -1);
            bf__seg_confusion(s->seg_cm, C, labels, s->seg_px, HW, 1);
        }
        s->pred[t] = moved;
    }
    s->has_pred = 1;
    res->task = BF_TASK_SEGMENTATION;
    res->samples = sc->seg->n;
    res->out_cols = cols;
    res->outputs = (float *)outputs;
    bf__seg_metrics(s->seg_cm, C, &res->miou, &res->pixel_accuracy);
}
