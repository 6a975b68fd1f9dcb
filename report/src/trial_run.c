/* bfr_trial_picture: runs one trial of a campaign again and draws what its
 * faults did to one image (bfr_trial_figure). A result keeps counts, not
 * outputs; a trial's faults come from the spec's seed and its index alone,
 * so the campaign made from the spec that ran it, running only trial K (a
 * shard of one trial, exact engine, one thread), gives trial K's outputs:
 * from on_ragged (one-image graphs: the detectors) or on_outputs (batched
 * segmenters), the golden ones from the campaign. Shared by `bitflip report
 * --trial` and bitflipd's picture route. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "report_impl.h"

typedef struct catch {
    int64_t image;
    int got;
    bf_trial_record rec;
    float *out;               /* on_outputs: image's values */
    int64_t cols;
    bfr_detection *dets;      /* on_ragged: image's detections */
    size_t n_dets;
    int oom;
} catch;

static void on_trial(void *user, const bf_trial_record *rec)
{
    catch *k = user;
    k->rec = *rec;
    k->got = 1;
}

static void on_outputs(void *user, int64_t trial, const float *outputs, int64_t samples, int64_t cols)
{
    catch *k = user;
    (void)trial, (void)samples;
    if (cols <= 0 || !(k->out = malloc((size_t)cols * sizeof *k->out))) { k->oom = cols > 0; return; }
    memcpy(k->out, outputs + k->image * cols, (size_t)cols * sizeof *k->out);
    k->cols = cols;
}

static const bf_ragged_output *find(const bf_ragged_output *o, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (o[i].name && !strcmp(o[i].name, name)) return &o[i];
    return NULL;
}

/* image s's detections from outputs boxes [K, 4], scores [K], labels [K];
 * -1 when they are absent or disagree in K, -2 when out of memory */
static int dets_of(const bf_ragged_output *o, size_t n, int64_t s, bfr_detection **out, size_t *n_out)
{
    const bf_ragged_output *b = find(o, n, "boxes"), *sc = find(o, n, "scores"), *l = find(o, n, "labels");
    if (!b || !sc || !l) return -1;
    /* offsets count elements: 4 a box */
    int64_t e = b->offsets[s + 1] - b->offsets[s], k = e / 4;
    if ((e && b->row_elems != 4) || e % 4 || sc->offsets[s + 1] - sc->offsets[s] != k || l->offsets[s + 1] - l->offsets[s] != k)
        return -1;
    *out = malloc(((size_t)k + 1) * sizeof **out);
    if (!*out) return -2;
    for (int64_t i = 0; i < k; i++) {
        const float *bx = b->data + b->offsets[s] + i * 4;
        for (int j = 0; j < 4; j++) (*out)[i].box[j] = bx[j];
        (*out)[i].score = sc->data[sc->offsets[s] + i];
        (*out)[i].label = (long long)l->data[l->offsets[s] + i];
    }
    *n_out = (size_t)k;
    return 0;
}

static void on_ragged(void *user, int64_t trial, const bf_ragged_output *outputs, size_t n, int64_t samples)
{
    catch *k = user;
    (void)trial, (void)samples;
    int r = dets_of(outputs, n, k->image, &k->dets, &k->n_dets);
    k->oom |= r == -2;
    /* a one-image segmenter: its first output, per image */
    if (!k->dets && n && outputs[0].offsets && (k->cols = outputs[0].offsets[k->image + 1] - outputs[0].offsets[k->image]) > 0) {
        if (!(k->out = malloc((size_t)k->cols * sizeof *k->out))) k->oom = 1;
        else memcpy(k->out, outputs[0].data + outputs[0].offsets[k->image], (size_t)k->cols * sizeof *k->out);
    }
}

/* arg-max over classes of [C, hw] logits, first maximum */
static int *argmax_mask(const float *v, int64_t classes, size_t hw)
{
    int *m = malloc(hw * sizeof *m);
    if (!m) return NULL;
    for (size_t p = 0; p < hw; p++) {
        int best = 0;
        for (int64_t c = 1; c < classes; c++)
            if (v[(size_t)c * hw + p] > v[(size_t)best * hw + p]) best = (int)c;
        m[p] = best;
    }
    return m;
}

/* the graph input's tensor in the eval set: the image [N, C, H, W] */
static const bf_tensor *image_tensor(const bf_model *m, const bf_dataset *ds)
{
    const bf_tensor *t = bf_model_num_inputs(m) ? bf_dataset_find(ds, bf_model_input(m, 0)->name) : NULL;
    return t && t->dtype == BF_F32 && t->ndim == 4 && (t->dims[1] == 1 || t->dims[1] == 3) ? t : NULL;
}

/* Runs trial q->trial of c and draws it; NULL with err set */
static json_t *run_and_draw(const bfr_trial_req *q, const char *task, double score_threshold, bf_campaign *c, const bf_model *m,
                            const bf_dataset *ds, bf_error *err)
{
    int det = !strcmp(task, "detection");
    bf_status st = BF_OK;
    json_t *fig = NULL;
    int64_t n_trials = bf_campaign_num_trials(c);
    const bf_tensor *img = image_tensor(m, ds);
    if (!img)
        return bf_error_set(err, BF_EINVAL, "a trial's picture needs an image: the eval set has no tensor [N, 1 or 3, H, W] "
                            "float32 named like the graph input"),
               NULL;
    catch k = {.image = q->image};
    bf_campaign_opts o = {.threads = 1, .exact = 1, .shard_index = q->trial, .shard_count = n_trials, .on_trial = on_trial,
                          .on_outputs = det ? NULL : on_outputs, .on_ragged = on_ragged, .user = &k};
    bf_campaign_result res = {0};
    if ((st = bf_campaign_run(c, &o, &res, err)) != BF_OK) {}
    else if (k.oom || !k.got) st = bf_error_set(err, BF_ENOMEM, "out of memory re-running trial %lld", q->trial);
    bfr_detection *gd = NULL;
    size_t n_gd = 0, n_rag = 0;
    int *gm = NULL, *fm = NULL;
    const bf_ragged_output *grag = bf_campaign_golden_ragged(c, &n_rag);
    int64_t hw = img->dims[2] * img->dims[3];
    if (!st && det && (!k.dets || dets_of(grag, n_rag, q->image, &gd, &n_gd) != 0))
        st = bf_error_set(err, BF_EINVAL, "a trial's picture: the model's outputs are not a detector's boxes [K, 4], scores [K] and labels [K]");
    if (!st && !det) {
        int64_t gs, gc;
        const float *g = bf_campaign_golden(c, &gs, &gc);
        const float *gi = gc > 0 ? g + q->image * gc : NULL;
        if (gc <= 0 && n_rag)
            gi = grag[0].data + grag[0].offsets[q->image], gc = grag[0].offsets[q->image + 1] - grag[0].offsets[q->image];
        if (!k.out || k.cols != gc || gc % hw != 0)
            st = bf_error_set(err, BF_EINVAL, "a trial's picture: the model's output is not logits [C, %lld, %lld] per image",
                              (long long)img->dims[2], (long long)img->dims[3]);
        else if (!(gm = argmax_mask(gi, gc / hw, (size_t)hw)) || !(fm = argmax_mask(k.out, gc / hw, (size_t)hw)))
            st = bf_error_set(err, BF_ENOMEM, "out of memory drawing trial %lld's masks", q->trial);
    }
    if (!st) {
        char fault[200] = "", outcome[48];
        if (k.rec.n_kept > 0) {
            const bf_applied_fault *f = &k.rec.faults[0];
            snprintf(fault, sizeof fault, ", %.80s[%lld] mask 0x%x: %.4g -> %.4g%s", bf_campaign_site(c, (size_t)f->site)->name,
                     (long long)f->index, f->mask, (double)f->old_value, (double)f->new_value, k.rec.n_faults > 1 ? ", ..." : "");
        }
        snprintf(outcome, sizeof outcome, "%s (%lld critical images)", bf_outcome_name(k.rec.outcome), (long long)k.rec.changed);
        bfr_trial_view v = {.task = task, .trial = q->trial, .image = q->image, .outcome = outcome, .fault = fault,
                            .pixels = (const float *)img->data + q->image * img->dims[1] * hw, .channels = (int)img->dims[1],
                            .height = (int)img->dims[2], .width = (int)img->dims[3], .golden = gd, .n_golden = n_gd,
                            .faulty = k.dets, .n_faulty = k.n_dets, .score_threshold = score_threshold,
                            .golden_mask = gm, .faulty_mask = fm};
        fig = bfr_trial_figure(&v, err);
    }
    bf_campaign_result_free(&res);
    free(k.out), free(k.dets), free(gd), free(gm), free(fm);
    return fig;
}

json_t *bfr_trial_picture(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *spec, const bfr_trial_req *q,
                          bf_error *err)
{
    int64_t samples = bf_dataset_num_samples(ds);
    if (q->trial < 0 || q->image < 0)
        return bf_error_set(err, BF_ERANGE, "the trial and the image are indices from 0, got %lld and %lld", q->trial, q->image), NULL;
    if (q->image >= samples)
        return bf_error_set(err, BF_ERANGE, "image %lld is out of range: the eval set has %lld images (0 to %lld)", q->image,
                            (long long)samples, (long long)samples - 1),
               NULL;
    bf_campaign *c = NULL;
    if (bf_campaign_create(m, ds, spec, &c, err) != BF_OK) return NULL;
    json_t *fig = NULL;
    int64_t n_trials = bf_campaign_num_trials(c);
    bf_task t = bf_campaign_task(c);
    if (q->trials >= 0 && q->trials != n_trials)
        bf_error_set(err, BF_EINVAL, "the result has %lld trials, the spec makes %lld: give the spec that made the result", q->trials,
                     (long long)n_trials);
    else if (q->trial >= n_trials)
        bf_error_set(err, BF_ERANGE, "trial %lld is out of range: the campaign has %lld trials (0 to %lld)", q->trial,
                     (long long)n_trials, (long long)n_trials - 1);
    else if (t != BF_TASK_DETECTION && t != BF_TASK_SEGMENTATION)
        bf_error_set(err, BF_EINVAL, "a trial's picture is of detections or masks, but the spec's campaign is a %s task", bf_task_name(t));
    else
        fig = run_and_draw(q, bf_task_name(t), spec->critical_score_set ? spec->critical_score : BF_CRITICAL_SCORE_DEFAULT, c, m,
                           ds, err);
    bf_campaign_free(c);
    return fig;
}
