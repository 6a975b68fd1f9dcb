/* Judging a trial (judge.h): its outputs against golden's, its metrics
 * (with a generation's, when the campaign generates: campaign_gen.c) and
 * its outcome class. Split from campaign_run.c, which runs the trials. */
#include <math.h>
#include <string.h>

#include "campaign/campaign_impl.h"
#include "exec/ops/sgemm.h"

static int higher_is_better(int m)
{
    return m == BF_METRIC_ACCURACY || m == BF_METRIC_AUC || m == BF_METRIC_TOKEN_ACCURACY || m == BF_METRIC_CHOICE_ACCURACY ||
           m == BF_METRIC_GENERATION_MATCH || m == BF_METRIC_FIRST_DIVERGENCE || m == BF_METRIC_MIOU ||
           m == BF_METRIC_PIXEL_ACCURACY || m == BF_METRIC_MAP || m == BF_METRIC_MAP50 || m == BF_METRIC_RECALL;
}

/* The tail of row_error from element i, and the lanes' merge. */
static double row_error_end(const float *o, const float *g, int64_t i, int64_t cols, double part[4], double top[4],
                            double *most)
{
    for (; i < cols; i++) {
        double d = fabs((double)o[i] - (double)g[i]);
        part[0] += d * d;
        top[0] = d > top[0] ? d : top[0];
    }
    *most = 0;
    for (int q = 0; q < 4; q++) *most = top[q] > *most ? top[q] : *most;
    return (part[0] + part[1]) + (part[2] + part[3]);
}

/* A row's output error against golden: the sum of squared differences,
 * returned, and the largest difference, into *most. In four lanes (lane q
 * takes elements i + q, the tail lane 0), summed (0 + 1) + (2 + 3): no
 * chain of dependent additions through the row, and the same sums from
 * the plain loop and the AVX2 one, which takes four floats at a time. A
 * NaN or Inf shows in the sum. */
static double row_error(const float *o, const float *g, int64_t cols, double *most)
{
    double part[4] = {0, 0, 0, 0}, top[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= cols; i += 4)
        for (int q = 0; q < 4; q++) {
            double d = fabs((double)o[i + q] - (double)g[i + q]);
            part[q] += d * d;
            top[q] = d > top[q] ? d : top[q];
        }
    return row_error_end(o, g, i, cols, part, top, most);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static double row_error_avx2(const float *o, const float *g, int64_t cols, double *most)
{
    const __m256d abs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
    __m256d part = _mm256_setzero_pd(), top = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 4 <= cols; i += 4) {
        __m256d d = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(o + i)), _mm256_cvtps_pd(_mm_loadu_ps(g + i))), abs);
        part = _mm256_add_pd(part, _mm256_mul_pd(d, d));   /* no fma: the plain loop rounds twice */
        top = _mm256_max_pd(d, top);   /* d > top ? d : top, NaN keeps top */
    }
    double p[4], t[4];
    _mm256_storeu_pd(p, part);
    _mm256_storeu_pd(t, top);
    return row_error_end(o, g, i, cols, p, t, most);
}
#endif

static double row_error_of(int simd, const float *o, const float *g, int64_t cols, double *most)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (simd) return row_error_avx2(o, g, cols, most);
#endif
    (void)simd;
    return row_error(o, g, cols, most);
}

/* Masked: bit-identical outputs. DUE: a NaN or Inf where the golden output
 * is finite (a golden pass that already has some does not make every trial
 * DUE), or a language model's perplexity not finite where golden's is (the
 * loss overflowed: finite logits of 1e30 make it Inf). Critical: a
 * prediction changed (language_model: the arg-max at a labelled position),
 * or the critical metric got worse by more than the threshold. Otherwise
 * tolerable. */
void bf__classify(const bf_campaign *c, const bf_eval_result *res, const int64_t *rows, int64_t n_rows, const int64_t *pred,
                  const double *gen, bf_trial_record *rec)
{
    const float *out = res->outputs, *g = c->golden.out;
    int64_t n = c->golden.samples * c->golden.out_cols, cols = c->golden.out_cols;
    /* rows: the samples whose outputs differ, when the differential engine
     * knows them; the others add exactly nothing below */
    int64_t n_scan = rows ? n_rows : c->golden.samples;
    int same = rows ? n_rows == 0 : memcmp(out, g, (size_t)n * sizeof *out) == 0;
    /* a one-sample graph: every output of every sample as golden's */
    for (int64_t s = 0; same && res->n_ragged && s < c->golden.samples; s++)
        same = bf__ragged_sample_same(res->ragged, c->golden.rag.view, res->n_ragged, s);
    int bad = 0;
    double sq = 0, mx = 0;
    int64_t changed = 0;
    int simd = bf__sgemm_simd(), lm = c->golden.task == BF_TASK_LANGUAGE_MODEL, seg = c->golden.task == BF_TASK_SEGMENTATION;
    int det = c->golden.task == BF_TASK_DETECTION;
    for (int64_t t = 0; t < n_scan; t++) {
        int64_t s = rows ? rows[t] : t;
        /* Each row's squares summed apart (row_error), then added: a row
         * left golden adds exactly 0, so any row list gives the same sum.
         * Only a row whose sum is not finite takes the careful loop. */
        const float *o = out + s * cols, *gs = g + s * cols;
        double row_mx, row_sq = row_error_of(simd, o, gs, cols, &row_mx);
        if (isfinite(row_sq)) {
            sq += row_sq;
            mx = row_mx > mx ? row_mx : mx;
        } else {
            for (int64_t i = 0; i < cols; i++) {
                if (!isfinite(o[i])) {
                    bad |= isfinite(gs[i]) != 0;
                    sq = mx = INFINITY;
                    continue;
                }
                double d = fabs((double)o[i] - (double)gs[i]);
                sq += d * d;
                mx = d > mx ? d : mx;
            }
        }
        if (same) continue;
        /* a one-sample graph's other outputs: NaN or Inf where the golden
         * sample had none is DUE, as in output 0 */
        if (res->n_ragged && bf__ragged_sample_nonfinite(res->ragged, res->n_ragged, s) &&
            !bf__ragged_sample_nonfinite(c->golden.rag.view, c->golden.rag.n, s))
            bad = 1;
        if (det) changed += pred ? pred[t] : 0;   /* pred: the image is critical (run_trial, det_judge) */
        else if (cols == 0) continue;   /* outputs whose size is data, no task: no prediction to change */
        else if (lm) changed += pred ? pred[t] : bf__lm_changed(c, out + s * cols, s, simd);   /* pred: the scorer's counts */
        else if (seg) changed += bf__seg_image_critical(c, out + s * cols, s, pred ? pred[t] : -1);   /* pred: changed pixels */
        else changed += (pred ? pred[t] : bf__prediction(c, out + s * cols, simd)) != c->golden.pred[s];
    }
    rec->changed = changed;
    bad |= lm && !same && !isfinite(res->perplexity) && isfinite(c->golden.metric[BF_METRIC_PERPLEXITY]);

    double v[BF_METRIC_COUNT];
    v[BF_METRIC_ACCURACY] = res->accuracy;
    v[BF_METRIC_AUC] = res->auc;
    v[BF_METRIC_LOGLOSS] = res->logloss;
    v[BF_METRIC_NE] = c->golden.label_entropy > 0 ? res->logloss / c->golden.label_entropy : NAN;
    v[BF_METRIC_TOP1_MISMATCH] = (double)changed / (double)(lm ? c->golden.lm_labelled : c->golden.samples);
    v[BF_METRIC_PERPLEXITY] = res->perplexity;
    v[BF_METRIC_TOKEN_ACCURACY] = res->token_accuracy;
    v[BF_METRIC_CHOICE_ACCURACY] = res->choice_accuracy;
    v[BF_METRIC_MSE] = n ? sq / (double)n : 0;
    v[BF_METRIC_MAX_ABS] = mx;
    v[BF_METRIC_GENERATION_MATCH] = gen ? gen[0] : NAN;
    v[BF_METRIC_FIRST_DIVERGENCE] = gen ? gen[1] : NAN;
    v[BF_METRIC_EDIT_DISTANCE] = gen ? gen[2] : NAN;
    v[BF_METRIC_MIOU] = res->miou;
    v[BF_METRIC_PIXEL_ACCURACY] = res->pixel_accuracy;
    v[BF_METRIC_MAP] = res->map;
    v[BF_METRIC_MAP50] = res->map50;
    v[BF_METRIC_RECALL] = res->recall;
    /* A generated token that differs is an arg-max that changed, at a
     * position the eval pass may not have: not masked, whatever the
     * outputs; critical, unless the critical metric is a generation metric,
     * whose delta then says how far a generation may move. */
    int cm = c->judge.critical_metric, gen_differs = gen && gen[0] < 1;
    int gen_changed = gen_differs && cm != BF_METRIC_GENERATION_MATCH && cm != BF_METRIC_FIRST_DIVERGENCE &&
                      cm != BF_METRIC_EDIT_DISTANCE;
    /* one NaN: which payload a NaN carries depends on the order of a sum's
     * operands, which C leaves to the compiler (a trial's record is the
     * same bits from either engine) */
    for (int m = 0; m < BF_METRIC_COUNT; m++) rec->metrics[m] = c->judge.metrics >> m & 1 && !isnan(v[m]) ? v[m] : NAN;

    /* segmentation judged by its metric: the images' changes count in
     * `changed` and top1_mismatch, but only the metric makes a trial
     * critical */
    if (seg && (cm == BF_METRIC_MIOU || cm == BF_METRIC_PIXEL_ACCURACY)) changed = 0;
    int metric_critical = 0;
    if (c->judge.critical_metric >= 0 && c->judge.critical_delta >= 0) {
        int m = c->judge.critical_metric;
        double worse = higher_is_better(m) ? c->golden.metric[m] - v[m] : v[m] - c->golden.metric[m];
        metric_critical = worse > c->judge.critical_delta;
    }
    rec->outcome = same && !gen_differs ? BF_OUTCOME_MASKED
                 : bad ? BF_OUTCOME_DUE
                 : changed > 0 || metric_critical || gen_changed ? BF_OUTCOME_CRITICAL
                 : BF_OUTCOME_TOLERABLE;
}
