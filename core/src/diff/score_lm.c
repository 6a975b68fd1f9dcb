/* language_model trial metrics from the golden pass's (see diff.h): each
 * labelled position's cross-entropy, hit and arg-max and each sequence's
 * sum are kept from the golden pass; a trial redoes the sequences (rows) it
 * changed, recomputing only their positions whose logits differ (a fault
 * in an embedding row reaches the positions of that token; the others add
 * their golden terms, in the same order, so the same sum), and the
 * perplexity's total is the golden pairwise tree with the
 * changed leaves' paths redone (exec/metrics_lm.c): the same bits as a full
 * recomputation, at the cost of the changed rows plus O(k log n). Multiple
 * choice redoes the items of the changed rows. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/simd.h"
#include "bitflip/metrics.h"
#include "diff/diff.h"
#include "exec/metrics_impl.h"
#include "exec/step_access.h"

struct bf__lm_scorer {
    int64_t n, cols;
    bf__lm_layout lm;
    int simd;
    const float *golden;     /* the golden outputs [n, T, V] */
    double *ce;              /* golden per sequence */
    double *pce;             /* ... per position (labelled ones) */
    unsigned char *phit;     /* ... the position's arg-max is its label */
    double *tree;            /* golden pairwise sums (bf__lm_tree_build) */
    int64_t *hits, hits_sum; /* golden per sequence, and in all */
    int64_t *pred;           /* golden arg-max per position (-1: unlabelled) */
    int64_t *item_start, *item_rows;   /* multiple choice: each item's rows, in order */
    unsigned char *right;    /* ... golden: the item's winner is its correct row */
    int64_t right_sum, items;
};

void bf__lm_scorer_free(bf__lm_scorer *sc)
{
    if (!sc) return;
    bf__free(sc->ce);
    bf__free(sc->pce);
    bf__free(sc->phit);
    bf__free(sc->tree);
    bf__free(sc->hits);
    bf__free(sc->pred);
    bf__free(sc->item_start);
    bf__free(sc->item_rows);
    bf__free(sc->right);
    bf__free(sc);
}

/* The item's winning row with row `rows[j]`'s value taken from val where
 * it is among the k changed rows (ascending), golden elsewhere. */
static int64_t winner(const bf__lm_scorer *sc, int64_t item, const int64_t *rows, const double *val, int64_t k)
{
    int64_t best = -1;
    double best_ce = NAN;
    for (int64_t j = sc->item_start[item]; j < sc->item_start[item + 1]; j++) {
        int64_t r = sc->item_rows[j], lo = 0, hi = k;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (rows[mid] < r) lo = mid + 1;
            else hi = mid;
        }
        double ce = lo < k && rows[lo] == r ? val[lo] : sc->ce[r];
        if (best < 0 || bf__lm_better(ce, best_ce)) best = r, best_ce = ce;
    }
    return best;
}

static bf_status items_index(bf__lm_scorer *sc)
{
    int64_t n = sc->n;
    sc->item_start = bf__calloc((size_t)n + 2, sizeof(int64_t));
    sc->item_rows = bf__malloc(((size_t)n + 1) * sizeof(int64_t));
    sc->right = bf__calloc((size_t)n + 1, 1);
    if (!sc->item_start || !sc->item_rows || !sc->right) return BF_ENOMEM;
    for (int64_t r = 0; r < n; r++) sc->item_start[sc->lm.item[r] + 1]++;
    for (int64_t i = 0; i < n; i++) {
        sc->items += sc->item_start[i + 1] > 0;
        sc->item_start[i + 1] += sc->item_start[i];
    }
    /* rows in order within each item: fill from the front with a cursor
     * per item, the start array shifted back after */
    for (int64_t r = 0; r < n; r++) sc->item_rows[sc->item_start[sc->lm.item[r]]++] = r;
    for (int64_t i = n; i > 0; i--) sc->item_start[i] = sc->item_start[i - 1];
    sc->item_start[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (sc->item_start[i] == sc->item_start[i + 1]) continue;
        sc->right[i] = sc->lm.answer[winner(sc, i, NULL, NULL, 0)] == 1;
        sc->right_sum += sc->right[i];
    }
    return BF_OK;
}

bf_status bf__lm_scorer_create(bf_evaluator *ev, const float *golden, int64_t samples, int64_t cols, bf__lm_scorer **out,
                               bf_error *err)
{
    bf__lm_scorer *sc = bf__calloc(1, sizeof *sc);
    *out = NULL;
    if (!sc) return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
    sc->n = samples;
    sc->cols = cols;
    sc->simd = bf__simd_avx2();
    bf__evaluator_lm(ev, &sc->lm);
    int64_t T = sc->lm.T, V = sc->lm.V, leaves = bf__lm_tree_leaves(samples);
    sc->golden = golden;
    sc->ce = bf__malloc(((size_t)samples + 1) * sizeof *sc->ce);
    sc->pce = bf__malloc(((size_t)(samples * T) + 1) * sizeof *sc->pce);
    sc->phit = bf__malloc((size_t)(samples * T) + 1);
    sc->tree = bf__malloc(2 * (size_t)leaves * sizeof *sc->tree);
    sc->hits = bf__malloc(((size_t)samples + 1) * sizeof *sc->hits);
    sc->pred = bf__malloc(((size_t)(samples * T) + 1) * sizeof *sc->pred);
    if (!sc->ce || !sc->pce || !sc->phit || !sc->tree || !sc->hits || !sc->pred) goto oom;
    /* as bf__lm_row sums them: positions in order from 0 */
    for (int64_t i = 0; i < samples; i++) {
        sc->ce[i] = 0;
        sc->hits[i] = 0;
        for (int64_t t = 0, at = i * T; t < T; t++, at++) {
            sc->pred[at] = -1;
            if (sc->lm.labels[at] == BF_LM_IGNORE) continue;
            const float *row = golden + i * cols + t * V;
            sc->pce[at] = bf__lm_position_ce(row, V, sc->lm.labels[at], sc->simd);
            sc->pred[at] = bf__argmax_at(row, V, sc->simd);
            sc->phit[at] = sc->pred[at] == sc->lm.labels[at];
            sc->ce[i] += sc->pce[at];
            sc->hits[i] += sc->phit[at];
        }
        sc->hits_sum += sc->hits[i];
    }
    bf__lm_tree_build(sc->tree, sc->ce, samples);
    if (sc->lm.item && items_index(sc) != BF_OK) goto oom;
    *out = sc;
    return BF_OK;
oom:
    bf__lm_scorer_free(sc);
    return bf_error_set(err, BF_ENOMEM, "out of memory for trial scoring");
}

/* Row i's cross-entropy as bf__lm_row sums it, its hits and its positions
 * whose arg-max left golden's, the positions whose logits are golden's
 * taken from the golden pass. */
static double row_moved(const bf__lm_scorer *sc, const float *outputs, int64_t i, int64_t *hits, int64_t *changed)
{
    int64_t T = sc->lm.T, V = sc->lm.V, h = 0, moved = 0;
    double ce = 0;
    for (int64_t t = 0, at = i * T; t < T; t++, at++) {
        int64_t y = sc->lm.labels[at];
        if (y == BF_LM_IGNORE) continue;
        const float *row = outputs + i * sc->cols + t * V;
        if (memcmp(row, sc->golden + i * sc->cols + t * V, (size_t)V * sizeof *row) == 0) {
            ce += sc->pce[at];
            h += sc->phit[at];
            continue;
        }
        ce += bf__lm_position_ce(row, V, y, sc->simd);
        int64_t top = bf__argmax_at(row, V, sc->simd);
        h += top == y;
        moved += top != sc->pred[at];
    }
    *hits = h;
    *changed = moved;
    return ce;
}

void bf__lm_score(const bf__lm_scorer *sc, bf__score_scratch *s, const float *outputs, const int64_t *rows, int64_t n_rows,
                  bf_eval_result *res)
{
    int64_t hits = sc->hits_sum;
    bf__eval_result_clear(res);
    res->task = BF_TASK_LANGUAGE_MODEL;
    res->samples = sc->n;
    res->out_cols = sc->cols;
    res->outputs = (float *)outputs;
    for (int64_t t = 0; t < n_rows; t++) {
        int64_t i = rows[t], h;
        s->lm_val[t] = row_moved(sc, outputs, i, &h, &s->pred[t]);   /* pred: the row's changed positions, for the trial's class */
        s->lm_idx[t] = i;
        hits += h - sc->hits[i];
    }
    s->has_pred = 1;
    res->token_accuracy = (double)hits / (double)sc->lm.labelled;
    if (sc->lm.item) {
        /* each changed row's item once: the first changed row of it marks it */
        int64_t right = sc->right_sum;
        for (int64_t t = 0; t < n_rows; t++) {
            int64_t it = sc->lm.item[rows[t]];
            if (s->in_rows[it]) continue;
            s->in_rows[it] = 1;
            right += (sc->lm.answer[winner(sc, it, rows, s->lm_val, n_rows)] == 1) - sc->right[it];
        }
        for (int64_t t = 0; t < n_rows; t++) s->in_rows[sc->lm.item[rows[t]]] = 0;
        res->choice_accuracy = (double)right / (double)sc->items;
    }
    res->perplexity = bf__lm_perplexity(bf__lm_tree_update(sc->tree, sc->n, s->lm_idx, s->lm_val, n_rows), sc->lm.labelled);
}
