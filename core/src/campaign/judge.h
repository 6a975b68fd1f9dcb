/* How a campaign judges a trial: the metrics computed per trial, the
 * critical rule (a prediction change, or a metric moving past a delta), the
 * stop rule, and the fixed grid that metric sums are kept on so that shards
 * add exactly (campaign_stats.c). Set from the spec by campaign.c. */
#ifndef BF_CAMPAIGN_JUDGE_H
#define BF_CAMPAIGN_JUDGE_H

#include "bitflip/campaign.h"
#include "bitflip/eval.h"
#include "bitflip/metrics.h"

typedef struct bf__judge {
    unsigned metrics;         /* computed per trial (spec's, plus the critical one) */
    int critical_metric;      /* -1: prediction changes only */
    double critical_delta;
    double critical_pixels;   /* segmentation: the share of an image's pixels (bf_campaign_spec) */
    double critical_score;    /* detection: the score over which a detection counts */
    double stop_margin, stop_confidence;
    double stop_tensor_margin, stop_bit_margin;   /* 0: not targets */
    /* per metric a bound and the grid exponents of its sums */
    double bound[BF_METRIC_COUNT];
    int fsum[BF_METRIC_COUNT], fsq[BF_METRIC_COUNT];
} bf__judge;

/* campaign_stats.c: adds a finite, non-negative metric value to sums on the
 * metric's grid. */
void bf__sums_add(bf_metric_sums *s, double v, double bound, int fsum, int fsq);

struct bf_campaign;
/* campaign_judge.c: a trial's metrics and outcome from its pass (res; rows:
 * the samples whose outputs differ when known, else NULL; pred: the
 * scorer's per-row prediction counts, or NULL) and, when the campaign
 * generates, its generation metrics (gen: generation_match,
 * first_divergence, edit_distance; NULL otherwise). */
void bf__classify(const struct bf_campaign *c, const bf_eval_result *res, const int64_t *rows, int64_t n_rows,
                  const int64_t *pred, const double *gen, bf_trial_record *rec);

#endif
