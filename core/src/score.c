/* Trial metrics updated from the golden pass's (see diff.h): a trial that
 * changed a few samples' outputs should not pay for a sort of the whole
 * eval set, which would cost more than the re-execution that found them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bitflip/metrics.h"
#include "diff.h"
#include "metrics_impl.h"

struct bf__scorer {
    bf_task task;
    int64_t n, cols;
    const float *golden;
    const int64_t *classes;
    const float *labels;
    unsigned char *hit;        /* classification: golden prediction right */
    int64_t hits;
    double *loss;              /* binary: golden per-sample loss */
    double loss_sum;
    int64_t out_of_range;      /* golden scores outside [0, 1]: logits */
    int incremental_loss;      /* golden loss finite */
    uint64_t *keys;            /* golden AUC keys, sorted */
    int64_t pos;
};

void bf__scorer_free(bf__scorer *sc)
{
    if (!sc) return;
    bf__free(sc->hit);
    bf__free(sc->loss);
    bf__free(sc->keys);
    bf__free(sc);
}

static int out_of_range(float s) { return s < 0 || s > 1; }

bf_status bf__scorer_create(bf_evaluator *ev, const float *golden, int64_t samples, int64_t cols, bf__scorer **out,
                            bf_error *err)
{
    bf__scorer *sc = bf__calloc(1, sizeof *sc);
    *out = NULL;
    if (!sc) return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
    sc->task = bf_evaluator_task(ev);
    sc->n = samples;
    sc->cols = cols;
    sc->golden = golden;
    bf__evaluator_labels(ev, &sc->classes, &sc->labels);
    if (sc->task == BF_TASK_CLASSIFICATION) {
        sc->hit = bf__malloc((size_t)samples + 1);
        if (!sc->hit) goto oom;
        for (int64_t i = 0; i < samples; i++) {
            sc->hit[i] = bf_argmax(golden + i * cols, cols) == sc->classes[i];
            sc->hits += sc->hit[i];
        }
    } else if (sc->task == BF_TASK_BINARY && cols == 1) {
        sc->loss = bf__malloc(((size_t)samples + 1) * sizeof *sc->loss);
        sc->keys = bf__malloc(((size_t)samples + 1) * sizeof *sc->keys);
        if (!sc->loss || !sc->keys) goto oom;
        for (int64_t i = 0; i < samples; i++) sc->out_of_range += out_of_range(golden[i]);
        for (int64_t i = 0; i < samples; i++) {
            sc->loss[i] = bf__logloss_term(golden[i], sc->labels[i], sc->out_of_range > 0);
            sc->loss_sum += sc->loss[i];
            sc->keys[i] = (uint64_t)bf__score_key(golden[i]) << 32 | (uint64_t)i;
            sc->pos += sc->labels[i] > 0.5f;
        }
        sc->incremental_loss = isfinite(sc->loss_sum);
        qsort(sc->keys, (size_t)samples, sizeof *sc->keys, bf__u64_cmp);
    }
    *out = sc;
    return BF_OK;
oom:
    bf__scorer_free(sc);
    return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
}

bf_status bf__score_scratch_init(bf__score_scratch *s, int64_t samples, bf_error *err)
{
    s->keys = bf__malloc(((size_t)samples + 1) * sizeof *s->keys);
    s->fresh = bf__malloc(((size_t)samples + 1) * sizeof *s->fresh);
    s->in_rows = bf__calloc((size_t)samples + 1, 1);
    if (!s->keys || !s->fresh || !s->in_rows) return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
    return BF_OK;
}

void bf__score_scratch_free(bf__score_scratch *s)
{
    bf__free(s->keys);
    bf__free(s->fresh);
    bf__free(s->in_rows);
}

static double auc(const bf__scorer *sc, bf__score_scratch *s, const float *outputs, const int64_t *rows, int64_t k)
{
    if (sc->pos == 0 || sc->pos == sc->n) return NAN;
    for (int64_t t = 0; t < k; t++) {
        s->in_rows[rows[t]] = 1;
        s->fresh[t] = (uint64_t)bf__score_key(outputs[rows[t]]) << 32 | (uint64_t)rows[t];
    }
    qsort(s->fresh, (size_t)k, sizeof *s->fresh, bf__u64_cmp);
    /* golden order without the changed rows, merged with their new keys */
    int64_t a = 0, b = 0, o = 0;
    while (a < sc->n || b < k) {
        if (a < sc->n && s->in_rows[sc->keys[a] & 0xffffffffu]) { a++; continue; }
        if (b >= k || (a < sc->n && sc->keys[a] < s->fresh[b])) s->keys[o++] = sc->keys[a++];
        else s->keys[o++] = s->fresh[b++];
    }
    for (int64_t t = 0; t < k; t++) s->in_rows[rows[t]] = 0;
    return bf__auc_sorted(s->keys, sc->labels, sc->n, sc->pos);
}

void bf__score(const bf__scorer *sc, bf__score_scratch *s, bf_evaluator *ev, const float *outputs, const int64_t *rows,
               int64_t n_rows, bf_eval_result *res)
{
    if (sc->task == BF_TASK_CLASSIFICATION) {
        memset(res, 0, sizeof *res);
        res->task = sc->task;
        res->samples = sc->n;
        res->out_cols = sc->cols;
        res->outputs = (float *)outputs;
        res->auc = res->logloss = NAN;
        int64_t hits = sc->hits;
        for (int64_t t = 0; t < n_rows; t++) {
            int64_t i = rows[t];
            hits += (bf_argmax(outputs + i * sc->cols, sc->cols) == sc->classes[i]) - sc->hit[i];
        }
        res->accuracy = sc->n ? (double)hits / (double)sc->n : NAN;
        return;
    }
    if (sc->task != BF_TASK_BINARY || sc->cols != 1 || !sc->incremental_loss) {
        bf__evaluator_score(ev, outputs, res);
        return;
    }
    int64_t oor = sc->out_of_range;
    for (int64_t t = 0; t < n_rows; t++) oor += out_of_range(outputs[rows[t]]) - out_of_range(sc->golden[rows[t]]);
    if ((oor > 0) != (sc->out_of_range > 0)) {
        bf__evaluator_score(ev, outputs, res);
        return;
    }
    memset(res, 0, sizeof *res);
    res->task = sc->task;
    res->samples = sc->n;
    res->out_cols = 1;
    res->outputs = (float *)outputs;
    res->accuracy = NAN;
    double sum = sc->loss_sum;
    for (int64_t t = 0; t < n_rows; t++) {
        int64_t i = rows[t];
        sum += bf__logloss_term(outputs[i], sc->labels[i], oor > 0) - sc->loss[i];
    }
    res->logloss = sum / (double)sc->n;
    res->auc = auc(sc, s, outputs, rows, n_rows);
}
