/* Trial metrics updated from the golden pass's (see diff.h): a trial that
 * changed a few samples' outputs should not pay for a sort of the whole
 * eval set, which would cost more than the re-execution that found them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/simd.h"
#include "bitflip/metrics.h"
#include "diff/diff.h"
#include "exec/metrics_impl.h"

struct bf__scorer {
    bf_task task;
    int64_t n, cols;
    const float *golden;
    const int64_t *classes;
    const float *labels;
    unsigned char *hit;        /* classification: golden prediction right */
    int64_t hits;
    double *loss;              /* binary: golden per-sample loss */
    double *loss_tree;         /* ... summed as bf_metric_logloss sums it (bf__lm_tree_build) */
    int64_t out_of_range;      /* golden scores outside [0, 1]: logits */
    int simd;                  /* bf__argmax_at's path, asked once (base/simd.h) */
    uint64_t *keys;            /* golden AUC keys, sorted */
    int64_t pos;
    uint32_t *kpos, *kneg;     /* golden score keys of the positives and of the negatives, sorted */
    int64_t u2;                /* golden Mann-Whitney U, doubled (an integer) */
    bf__lm_scorer *lm;         /* language_model */
    bf__seg_scorer *seg;       /* segmentation */
};

void bf__scorer_free(bf__scorer *sc)
{
    if (!sc) return;
    bf__free(sc->hit);
    bf__free(sc->loss);
    bf__free(sc->loss_tree);
    bf__free(sc->keys);
    bf__free(sc->kpos);
    bf__free(sc->kneg);
    bf__lm_scorer_free(sc->lm);
    bf__seg_scorer_free(sc->seg);
    bf__free(sc);
}

static int out_of_range(float s) { return s < 0 || s > 1; }

/* Keys of a sorted array below key, and not above it. */
static int64_t below(const uint32_t *a, int64_t n, uint32_t key, int inclusive)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key || (inclusive && a[mid] == key)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* A positive scored a against a negative scored b, in 2U: 2 above, 1 tied. */
static int64_t pair2(uint32_t a, uint32_t b) { return (a > b) + (a >= b); }
/* Against every golden negative, and a negative scored b against every
 * golden positive. */
static int64_t vs_neg(const bf__scorer *sc, uint32_t a)
{
    int64_t q = sc->n - sc->pos;
    return below(sc->kneg, q, a, 0) + below(sc->kneg, q, a, 1);
}

static int64_t vs_pos(const bf__scorer *sc, uint32_t b)
{
    return 2 * sc->pos - below(sc->kpos, sc->pos, b, 1) - below(sc->kpos, sc->pos, b, 0);
}

bf_status bf__scorer_create(bf_evaluator *ev, const float *golden, const int32_t *seg_pred, int64_t samples, int64_t cols,
                            bf__scorer **out, bf_error *err)
{
    bf__scorer *sc = bf__calloc(1, sizeof *sc);
    *out = NULL;
    if (!sc) return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
    sc->task = bf_evaluator_task(ev);
    sc->n = samples;
    sc->cols = cols;
    sc->golden = golden;
    sc->simd = bf__simd_avx2();
    bf__evaluator_labels(ev, &sc->classes, &sc->labels);
    if (sc->task == BF_TASK_LANGUAGE_MODEL) {
        bf_status st = bf__lm_scorer_create(ev, golden, samples, cols, &sc->lm, err);
        if (st != BF_OK) {
            bf__scorer_free(sc);
            return st;
        }
    } else if (sc->task == BF_TASK_SEGMENTATION) {
        bf_status st = bf__seg_scorer_create(ev, golden, seg_pred, samples, cols, &sc->seg, err);
        if (st != BF_OK) {
            bf__scorer_free(sc);
            return st;
        }
    } else if (sc->task == BF_TASK_CLASSIFICATION) {
        sc->hit = bf__malloc((size_t)samples + 1);
        if (!sc->hit) goto oom;
        for (int64_t i = 0; i < samples; i++) {
            sc->hit[i] = bf__argmax_at(golden + i * cols, cols, sc->simd) == sc->classes[i];
            sc->hits += sc->hit[i];
        }
    } else if (sc->task == BF_TASK_BINARY && cols == 1) {
        sc->loss = bf__malloc(((size_t)samples + 1) * sizeof *sc->loss);
        sc->loss_tree = bf__malloc((2 * (size_t)bf__lm_tree_leaves(samples) + 1) * sizeof *sc->loss_tree);
        sc->keys = bf__malloc(((size_t)samples + 1) * sizeof *sc->keys);
        if (!sc->loss || !sc->loss_tree || !sc->keys) goto oom;
        for (int64_t i = 0; i < samples; i++) sc->out_of_range += out_of_range(golden[i]);
        for (int64_t i = 0; i < samples; i++) {
            sc->loss[i] = bf__logloss_term(golden[i], sc->labels[i], sc->out_of_range > 0);
            sc->keys[i] = (uint64_t)bf__score_key(golden[i]) << 32 | (uint64_t)i;
            sc->pos += sc->labels[i] > 0.5f;
        }
        bf__lm_tree_build(sc->loss_tree, sc->loss, samples);
        qsort(sc->keys, (size_t)samples, sizeof *sc->keys, bf__u64_cmp);
        sc->kpos = bf__malloc(((size_t)sc->pos + 1) * sizeof *sc->kpos);
        sc->kneg = bf__malloc(((size_t)(samples - sc->pos) + 1) * sizeof *sc->kneg);
        if (!sc->kpos || !sc->kneg) goto oom;
        for (int64_t i = 0, a = 0, b = 0; i < samples; i++) {
            uint32_t k = (uint32_t)(sc->keys[i] >> 32);
            if (sc->labels[sc->keys[i] & 0xffffffffu] > 0.5f) sc->kpos[a++] = k;
            else sc->kneg[b++] = k;
        }
        for (int64_t i = 0; i < sc->pos; i++) sc->u2 += vs_neg(sc, sc->kpos[i]);
    }
    *out = sc;
    return BF_OK;
oom:
    bf__scorer_free(sc);
    return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
}

bf_status bf__score_scratch_init(bf__score_scratch *s, const bf__scorer *sc, int64_t samples, bf_error *err)
{
    memset(s, 0, sizeof *s);
    if (sc && sc->seg) {
        bf_status st = bf__seg_scratch_init(sc->seg, s, err);
        if (st != BF_OK) return st;
    }
    s->keys = bf__malloc(((size_t)samples + 1) * sizeof *s->keys);
    s->fresh = bf__malloc(((size_t)samples + 1) * sizeof *s->fresh);
    s->in_rows = bf__calloc((size_t)samples + 1, 1);
    s->pred = bf__malloc(((size_t)samples + 1) * sizeof *s->pred);
    s->has_pred = 0;
    s->lm_idx = bf__malloc(((size_t)samples + 1) * sizeof *s->lm_idx);
    s->lm_val = bf__malloc(((size_t)samples + 1) * sizeof *s->lm_val);
    if (!s->keys || !s->fresh || !s->in_rows || !s->pred || !s->lm_idx || !s->lm_val) return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
    return BF_OK;
}

void bf__score_scratch_free(bf__score_scratch *s)
{
    bf__free(s->keys);
    bf__free(s->fresh);
    bf__free(s->in_rows);
    bf__free(s->pred);
    bf__free(s->lm_idx);
    bf__free(s->lm_val);
    bf__free(s->seg_cm);
    bf__free(s->seg_px);
}

/* Sorts a (n keys) by their score half, with tmp (n) as room: a stable
 * LSD radix sort, four passes of a byte, so the keys end back in a. The
 * sample half need not be in order: the AUC takes tied scores as one group
 * (bf__auc_sorted), and the merge below keeps the order by score. No
 * allocation, unlike qsort, which mallocs per call past a few kilobytes. */
static void sort_keys(uint64_t *a, int64_t n, uint64_t *tmp)
{
    uint64_t *src = a, *dst = tmp;
    for (int shift = 32; shift < 64; shift += 8) {
        int64_t count[257] = {0};
        for (int64_t i = 0; i < n; i++) count[(src[i] >> shift & 0xff) + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (int64_t i = 0; i < n; i++) dst[count[src[i] >> shift & 0xff]++] = src[i];
        uint64_t *t = src;
        src = dst, dst = t;
    }
}

/* The AUC as 2U / (2 P Q), 2U moved from the golden one by the pairs a
 * changed sample is in: against every golden sample of the other class
 * (binary searches), corrected for the pairs whose other side changed too.
 * O(k log n + k^2) instead of a pass over the eval set; the same integer
 * 2U as bf__auc_sorted's rank sums, so the same AUC bit for bit. */
#define AUC_PAIRS_MAX 256
static double auc_moved(const bf__scorer *sc, const float *outputs, const int64_t *rows, int64_t k)
{
    uint32_t was[AUC_PAIRS_MAX], now[AUC_PAIRS_MAX];
    unsigned char positive[AUC_PAIRS_MAX];
    int64_t u2 = sc->u2;
    for (int64_t t = 0; t < k; t++) {
        int64_t i = rows[t];
        was[t] = bf__score_key(sc->golden[i]);
        now[t] = bf__score_key(outputs[i]);
        positive[t] = sc->labels[i] > 0.5f;
        u2 += positive[t] ? vs_neg(sc, now[t]) - vs_neg(sc, was[t]) : vs_pos(sc, now[t]) - vs_pos(sc, was[t]);
    }
    for (int64_t a = 0; a < k; a++) {
        if (!positive[a]) continue;
        for (int64_t b = 0; b < k; b++) {
            if (positive[b]) continue;
            /* counted above with the other side golden, twice over: once
             * each way; what the pair really moved by, once */
            u2 -= pair2(now[a], was[b]) - pair2(was[a], was[b]);
            u2 -= pair2(was[a], now[b]) - pair2(was[a], was[b]);
            u2 += pair2(now[a], now[b]) - pair2(was[a], was[b]);
        }
    }
    double p = (double)sc->pos, q = (double)(sc->n - sc->pos);
    return (double)u2 / (2 * p * q);
}

static double auc(const bf__scorer *sc, bf__score_scratch *s, const float *outputs, const int64_t *rows, int64_t k)
{
    if (sc->pos == 0 || sc->pos == sc->n) return NAN;
    if (k <= AUC_PAIRS_MAX) return auc_moved(sc, outputs, rows, k);
    for (int64_t t = 0; t < k; t++) {
        s->in_rows[rows[t]] = 1;
        s->fresh[t] = (uint64_t)bf__score_key(outputs[rows[t]]) << 32 | (uint64_t)rows[t];
    }
    sort_keys(s->fresh, k, s->keys);   /* keys: room until the merge below fills it */
    /* The golden order without the changed rows, at the end of keys, then
     * merged with their new keys from the front: the write never passes
     * the read (o = a + b <= k + a), and once the new keys are all in, the
     * golden ones left are in place already. Whether a row changed, which
     * key is smaller, is data: selects and index arithmetic, no branches
     * that mispredict on every other key. */
    uint64_t *ga = s->keys + k;
    int64_t na = 0;
    for (int64_t i = 0; i < sc->n; i++) {
        uint64_t key = sc->keys[i];
        ga[na] = key;
        na += !s->in_rows[key & 0xffffffffu];
    }
    int64_t a = 0, b = 0, o = 0;
    while (a < na && b < k) {
        uint64_t x = ga[a], y = s->fresh[b];
        int lt = x < y;   /* keys are unique: the sample is in the low half */
        s->keys[o++] = lt ? x : y;
        a += lt;
        b += !lt;
    }
    while (b < k) s->keys[o++] = s->fresh[b++];
    for (int64_t t = 0; t < k; t++) s->in_rows[rows[t]] = 0;
    return bf__auc_sorted(s->keys, sc->labels, sc->n, sc->pos);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The log loss's sum with the changed rows' terms: bf_metric_logloss's tree
 * of terms, its changed leaves' paths to the root redone (O(k log n)), so
 * the same bits as summing every term again. The tree update wants its
 * leaves ascending, which the engine's rows are. */
static double logloss_moved(const bf__scorer *sc, bf__score_scratch *s, const float *outputs, const int64_t *rows,
                            int64_t k, int logits)
{
    int sorted = 1;
    for (int64_t t = 0; t < k; t++) {
        s->lm_idx[t] = rows[t];
        sorted &= t == 0 || rows[t] > rows[t - 1];
    }
    if (!sorted) qsort(s->lm_idx, (size_t)k, sizeof *s->lm_idx, cmp_i64);
    for (int64_t t = 0; t < k; t++) {
        int64_t i = s->lm_idx[t];
        s->lm_val[t] = bf__logloss_term(outputs[i], sc->labels[i], logits);
    }
    return bf__lm_tree_update(sc->loss_tree, sc->n, s->lm_idx, s->lm_val, k);
}

void bf__score(const bf__scorer *sc, bf__score_scratch *s, bf_evaluator *ev, const float *outputs, const int64_t *rows,
               int64_t n_rows, bf_eval_result *res)
{
    s->has_pred = 0;
    if (sc->lm) {
        bf__lm_score(sc->lm, s, outputs, rows, n_rows, res);
        return;
    }
    if (sc->seg) {
        bf__eval_result_clear(res);
        bf__seg_score_rows(sc->seg, s, outputs, rows, n_rows, res);
        return;
    }
    if (sc->task == BF_TASK_CLASSIFICATION) {
        bf__eval_result_clear(res);
        res->task = sc->task;
        res->samples = sc->n;
        res->out_cols = sc->cols;
        res->outputs = (float *)outputs;
        int64_t hits = sc->hits;
        for (int64_t t = 0; t < n_rows; t++) {   /* kept: the trial's classification needs them too */
            int64_t i = rows[t];
            s->pred[t] = bf__argmax_at(outputs + i * sc->cols, sc->cols, sc->simd);
            hits += (s->pred[t] == sc->classes[i]) - sc->hit[i];
        }
        s->has_pred = sc->cols > 1;
        res->accuracy = sc->n ? (double)hits / (double)sc->n : NAN;
        return;
    }
    if (sc->task != BF_TASK_BINARY || sc->cols != 1) {
        bf__evaluator_score(ev, outputs, res);
        return;
    }
    int64_t oor = sc->out_of_range;
    for (int64_t t = 0; t < n_rows; t++) oor += out_of_range(outputs[rows[t]]) - out_of_range(sc->golden[rows[t]]);
    if ((oor > 0) != (sc->out_of_range > 0)) {
        bf__evaluator_score(ev, outputs, res);
        return;
    }
    bf__eval_result_clear(res);
    res->task = sc->task;
    res->samples = sc->n;
    res->out_cols = 1;
    res->outputs = (float *)outputs;
    res->logloss = logloss_moved(sc, s, outputs, rows, n_rows, oor > 0) / (double)sc->n;
    res->auc = auc(sc, s, outputs, rows, n_rows);
}
