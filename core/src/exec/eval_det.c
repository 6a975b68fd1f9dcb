/* The detection task's binding and views (eval_det.h). A detector's
 * outputs are per image and their sizes are data (eval_ragged.c keeps
 * them), its ground truth is three tensors of the eval set
 * (model/dataset_det.c checks them); the metrics (metrics_det.c) read both
 * as plain arrays, which is all this file makes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/grow.h"
#include "exec/eval_det.h"
#include "model/graph.h"

static int find_output(const bf_model *m, const char *name, size_t *k)
{
    for (size_t i = 0; i < m->n_outputs; i++)
        if (m->outputs[i].name && strcmp(m->outputs[i].name, name) == 0) {
            *k = i;
            return 1;
        }
    return 0;
}

/* Outputs a user named otherwise (or the exporter numbered), told apart
 * by their declared types as torchvision's dict gives them: the only
 * float32 [K, 4] is the boxes, the only float32 [K] the scores, the only
 * int64 (int32) [K] the labels; other outputs (masks [K, 1, H, W]) are
 * not read. */
static int find_by_type(const bf_model *m, size_t *kb, size_t *ks, size_t *kl)
{
    int nb = 0, ns = 0, nl = 0;
    for (size_t i = 0; i < m->n_outputs; i++) {
        const bf_value_info *vi = &m->outputs[i];
        if (vi->dtype == BF_F32 && vi->ndim == 2 && vi->dims[1] == 4) *kb = i, nb++;
        else if (vi->dtype == BF_F32 && vi->ndim == 1) *ks = i, ns++;
        else if ((vi->dtype == BF_I64 || vi->dtype == BF_I32) && vi->ndim == 1) *kl = i, nl++;
    }
    return nb == 1 && ns == 1 && nl == 1;
}

static void output_list(const bf_model *m, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < m->n_outputs && off + 1 < cap; i++) {
        int w = snprintf(buf + off, cap - off, "%s'%s'", i ? ", " : "", m->outputs[i].name ? m->outputs[i].name : "?");
        if (w < 0) break;
        off += (size_t)w;
    }
}

bf_status bf__det_task_find(const bf_model *m, const bf_dataset *ds, int unbatched, bf__det_task *t, int *found,
                            bf_error *err)
{
    bf__det_task d = {0};
    *found = 0;
    bf_status st = bf__dataset_det_gt(ds, &d.gt, err);
    if (st == BF_ENOTFOUND) return BF_OK;
    if (st != BF_OK) return st;
    if (!unbatched)
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "the eval set holds detection ground truth (gt_boxes, gt_labels, gt_offsets), but graph input '%s' "
                            "takes a batch: a detector takes one image per call, [3, H, W] against the eval set's "
                            "[N, 3, H, W] (bitflip.export writes torchvision's detectors so), or [1, 3, H, W] with "
                            "outputs whose sizes are data",
                            m->n_inputs ? m->inputs[0].name : "?");
    const char *names[3] = {"boxes", "scores", "labels"};
    size_t *ks[3] = {&d.k_boxes, &d.k_scores, &d.k_labels};
    int named = 1;
    for (int i = 0; i < 3; i++) named &= find_output(m, names[i], ks[i]);
    if (!named && !find_by_type(m, &d.k_boxes, &d.k_scores, &d.k_labels)) {
        char list[256];
        output_list(m, list, sizeof list);
        return bf_error_set(err, BF_ENOTFOUND,
                            "the eval set holds detection ground truth, but the graph's outputs (%s) are not named "
                            "boxes, scores and labels, and are not told apart by type (one float32 [K, 4], one float32 "
                            "[K], one int64 [K]): export with output_names=['boxes', 'labels', 'scores'] "
                            "(bitflip.export names them so)", list);
    }
    if (d.gt.n != bf_dataset_num_samples(ds))
        return bf_error_set(err, BF_ESHAPE, "gt_offsets describes %lld images, the eval set has %lld", (long long)d.gt.n,
                            (long long)bf_dataset_num_samples(ds));
    *t = d;
    *found = 1;
    return BF_OK;
}

bf_status bf__det_view(const bf__det_task *t, const bf_ragged_output *outs, int64_t samples, int64_t **scratch, size_t *cap,
                       bf__dets *out, bf_error *err)
{
    const bf_ragged_output *b = &outs[t->k_boxes], *s = &outs[t->k_scores], *l = &outs[t->k_labels];
    int64_t rows = l->offsets[samples];
    if (b->row_elems != 4 && b->offsets[samples] > 0)
        return bf_error_set(err, BF_ESHAPE, "output 'boxes' has rows of %lld values; a detector's boxes are [K, 4]",
                            (long long)b->row_elems);
    for (int64_t i = 0; i < samples; i++) {
        int64_t nb = (b->offsets[i + 1] - b->offsets[i]) / 4, ns = s->offsets[i + 1] - s->offsets[i];
        int64_t nl = l->offsets[i + 1] - l->offsets[i];
        if (nb != ns || nb != nl)
            return bf_error_set(err, BF_ESHAPE, "image %lld has %lld boxes, %lld scores and %lld labels; a detector gives "
                                "as many of each", (long long)i, (long long)nb, (long long)ns, (long long)nl);
    }
    if (!bf__grow(scratch, cap, (size_t)rows + 1, sizeof **scratch, 1))
        return bf_error_set(err, BF_ENOMEM, "out of memory for %lld detections' labels", (long long)rows);
    /* labels reach here as floats (eval_ragged.c): class ids, exact; a value
     * that is no class id (NaN, negative) matches no ground truth */
    for (int64_t r = 0; r < rows; r++) {
        float v = l->data[r];
        (*scratch)[r] = isfinite(v) && v >= 0 && v < 9.2e18f ? (int64_t)v : -1;
    }
    /* the three outputs' rows line up image by image (checked above), so
     * one offsets array, in rows, serves: the labels' */
    *out = (bf__dets){.n = samples, .offsets = l->offsets, .boxes = b->data, .scores = s->data, .labels = *scratch};
    return BF_OK;
}

void bf__det_gt_view(const bf__det_task *t, bf__dets *out)
{
    *out = (bf__dets){.n = t->gt.n, .offsets = t->gt.offsets, .boxes = t->gt.boxes, .scores = NULL, .labels = t->gt.labels};
}

bf_status bf__eval_det_score(bf__eval_det *d, const bf_ragged_output *outs, int64_t samples, bf_eval_result *res,
                             bf_error *err)
{
    bf__dets pred, gt;
    bf__det_metrics dm;
    bf_status st = bf__det_view(&d->task, outs, samples, &d->labels, &d->cap, &pred, err);
    bf__det_gt_view(&d->task, &gt);
    if (st == BF_OK) st = bf__det_evaluate(&pred, &gt, &dm, err);
    if (st != BF_OK) return st;
    res->map = dm.map;
    res->map50 = dm.map50;
    res->recall = dm.recall;
    return BF_OK;
}

void bf__eval_det_free(bf__eval_det *d)
{
    bf__free(d->labels);
    d->labels = NULL;
    d->cap = 0;
}
