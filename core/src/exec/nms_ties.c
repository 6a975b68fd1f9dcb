/* The NMS near-tie record (bitflip/eval.h, bf_nms_ties; op.h says what a
 * near tie is; NonMaxSuppression writes it, detect.c). */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/eval.h"
#include "exec/op.h"

bf_status bf_nms_ties_new(int64_t samples, double score_rtol, double score_atol, double iou_margin,
                          bf_nms_ties **out, bf_error *err)
{
    *out = NULL;
    if (samples < 0 || !(score_rtol >= 0) || !(score_atol >= 0) || !(iou_margin >= 0))
        return bf_error_set(err, BF_EINVAL, "NMS near-ties: %lld samples, margins %g %g %g: each must be >= 0",
                            (long long)samples, score_rtol, score_atol, iou_margin);
    bf_nms_ties *t = bf__calloc(1, sizeof *t);
    bf__nms_sample *s = t ? bf__calloc((size_t)samples + 1, sizeof *s) : NULL;
    if (!s) {
        bf__free(t);
        return bf_error_set(err, BF_ENOMEM, "out of memory for the NMS near-ties of %lld samples", (long long)samples);
    }
    *t = (bf_nms_ties){.samples = samples, .rtol = score_rtol, .atol = score_atol, .iou = iou_margin, .s = s};
    *out = t;
    return BF_OK;
}

void bf_nms_ties_free(bf_nms_ties *t)
{
    if (!t) return;
    for (int64_t i = 0; i <= t->samples; i++) bf__free(t->s[i].region);
    bf__free(t->s);
    bf__free(t);
}

int bf_nms_ties_at(const bf_nms_ties *t, int64_t s, float *score)
{
    *score = NAN;
    if (!t || s < 0 || s >= t->samples) return 0;
    const bf__nms_sample *r = &t->s[s];
    if (r->earlier) return 2;
    if (!r->last) return 0;
    *score = r->score;
    return 1;
}

int64_t bf_nms_ties_region(const bf_nms_ties *t, int64_t s, const float **scores)
{
    *scores = NULL;
    if (!t || s < 0 || s >= t->samples || t->s[s].earlier || !t->s[s].last) return 0;
    *scores = t->s[s].region;
    return t->s[s].n_region;
}

void bf__nms_sample_reset(bf__nms_sample *r)
{
    float *keep = r->region;
    int64_t cap = r->cap_region;
    *r = (bf__nms_sample){.region = keep, .cap_region = cap};
}
