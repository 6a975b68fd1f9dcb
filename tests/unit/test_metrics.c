/* Metrics: hand-worked cases, a pairwise reference for AUC, and values
 * computed by scikit-learn on data both sides generate from the same LCG. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/metrics.h"

/* cmocka 1.1.5 compares only floats; metrics are doubles. */
#define assert_near(a, b, tol) near_((a), (b), (tol), __LINE__)
static void near_(double a, double b, double tol, int line)
{
    if (fabs(a - b) <= tol) return;
    fail_msg("line %d: %.17g != %.17g (tolerance %g)", line, a, b, tol);
}

static double auc_of(const float *s, const float *y, int64_t n)
{
    int64_t order[64];
    double auc = -1;
    bf_error err = {0};
    assert_true(n <= 64);
    assert_int_equal(bf_metric_auc(s, y, n, order, &auc, &err), BF_OK);
    return auc;
}

static void argmax_cases(void **state)
{
    (void)state;
    const float a[] = {1, 3, 3, 2};
    assert_int_equal(bf_argmax(a, 4), 1);                 /* first of the tied maxima */
    const float b[] = {NAN, 1, NAN, 2};
    assert_int_equal(bf_argmax(b, 4), 3);                 /* NaN never wins */
    const float c[] = {NAN, NAN};
    assert_int_equal(bf_argmax(c, 2), 0);                 /* all NaN: 0 */
    const float d[] = {NAN, -INFINITY};
    assert_int_equal(bf_argmax(d, 2), 1);
    const float e[] = {-INFINITY, -INFINITY, 1e38f, INFINITY};
    assert_int_equal(bf_argmax(e, 4), 3);
    assert_int_equal(bf_argmax(a, 0), 0);
}

/* The two arg-max rules (bitflip/metrics.h) against PyTorch: on rows with
 * NaN, ties, infinities and signed zeros (tests/fixtures/argmax/argmax.json,
 * torch.argmax's answers, made by make_argmax.py), bf_argmax_nan_wins is
 * torch.argmax, and bf_argmax is torch.argmax over the row's numbers alone
 * (NaN never wins; 0 with none); and bf_argmax_changed counts the rows whose
 * bf_argmax differs, here each row against itself with its NaNs replaced. */
static void argmax_rules_match_torch(void **state)
{
    (void)state;
    json_error_t je;
    json_t *doc = json_load_file(BF_FIXTURES "/argmax/argmax.json", 0, &je);
    if (!doc) fail_msg("argmax.json: %s", je.text);
    json_t *rows = json_object_get(doc, "rows");
    size_t i, n_nan = 0, differ = 0;
    json_t *r;
    float *all = calloc(json_array_size(rows) * 100, sizeof *all), *clean = calloc(json_array_size(rows) * 100, sizeof *clean);
    assert_true(all && clean);
    json_array_foreach(rows, i, r) {
        float row[100];
        size_t n = json_array_size(r), k;
        json_t *x;
        assert_true(n <= 100);
        int has_nan = 0;
        json_array_foreach(r, k, x) {
            const char *t = json_string_value(x);
            row[k] = !t ? (float)json_number_value(x) : !strcmp(t, "nan") ? NAN : !strcmp(t, "inf") ? INFINITY : -INFINITY;
            has_nan |= isnan(row[k]);
        }
        int64_t want = json_integer_value(json_array_get(json_object_get(doc, "argmax"), i));
        int64_t want_num = json_integer_value(json_array_get(json_object_get(doc, "argmax_without_nan"), i));
        if (bf_argmax_nan_wins(row, (int64_t)n) != want)
            fail_msg("row %zu: bf_argmax_nan_wins %lld, torch.argmax %lld", i, (long long)bf_argmax_nan_wins(row, (int64_t)n), (long long)want);
        if (bf_argmax(row, (int64_t)n) != want_num)
            fail_msg("row %zu: bf_argmax %lld, torch.argmax of its numbers %lld", i, (long long)bf_argmax(row, (int64_t)n), (long long)want_num);
        n_nan += (size_t)has_nan;
        /* rows of 5 for bf_argmax_changed: the row's first five, and the same with NaN made 7 */
        for (k = 0; k < 5; k++) {
            all[i * 5 + k] = k < n ? row[k] : -1.0f;
            clean[i * 5 + k] = isnan(all[i * 5 + k]) ? 7.0f : all[i * 5 + k];
        }
        differ += bf_argmax(all + i * 5, 5) != bf_argmax(clean + i * 5, 5);
    }
    assert_true(n_nan >= 10);   /* the rules do differ on these rows */
    assert_int_equal(bf_argmax_changed(all, clean, (int64_t)json_array_size(rows), 5), (int64_t)differ);
    assert_true(differ > 0);
    assert_int_equal(bf_argmax_changed(all, all, (int64_t)json_array_size(rows), 5), 0);
    /* by hand: the rules side by side */
    const float b[] = {1, NAN, 3};
    assert_int_equal(bf_argmax(b, 3), 2);
    assert_int_equal(bf_argmax_nan_wins(b, 3), 1);
    const float c[] = {INFINITY, NAN};
    assert_int_equal(bf_argmax(c, 2), 0);
    assert_int_equal(bf_argmax_nan_wins(c, 2), 1);
    assert_int_equal(bf_argmax_nan_wins(c, 0), 0);
    free(all);
    free(clean);
    json_decref(doc);
}

/* bf_argmax (a vector path for rows of at most 16 on CPUs with AVX2, a
 * loop otherwise) against its definition, the first index of the largest
 * number (NaN never one; -0 and +0 equal; 0 with none), on random rows of
 * 0 to 20 full of ties, signed zeros, infinities and NaN. */
static int64_t argmax_by_definition(const float *row, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (isnan(row[i])) continue;
        int largest = 1;
        for (int64_t j = 0; j < n; j++) largest &= isnan(row[j]) || !(row[j] > row[i]);
        int first = 1;
        for (int64_t j = 0; j < i; j++) first &= isnan(row[j]) || row[j] != row[i];
        if (largest && first) return i;
    }
    return 0;
}

static void argmax_random(void **state)
{
    (void)state;
    static const float pool[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.5f, INFINITY, -INFINITY, NAN, 1e-40f, 3e38f};
    uint32_t seed = 2026;
    for (int round = 0; round < 20000; round++) {
        int n = (int)(round % 21);
        float row[20];
        for (int i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            row[i] = pool[(seed >> 8) % (sizeof pool / sizeof *pool)];
        }
        int64_t want = argmax_by_definition(row, n), got = bf_argmax(row, n);
        if (got != want) fail_msg("round %d, n %d: bf_argmax %lld, by definition %lld", round, n, (long long)got, (long long)want);
    }
}

static void accuracy_cases(void **state)
{
    (void)state;
    /* row 0: max 0.7 at 1 = label 1, hit; row 1: tie 0.5/0.5 -> first, 0 != 1,
     * miss; row 2: NaN ignored, max at 2 = label 2, hit. 2 of 3. */
    const float s[] = {0.1f, 0.7f, 0.2f, 0.5f, 0.5f, 0, NAN, 0, 1};
    const int64_t y[] = {1, 1, 2};
    assert_near(bf_metric_accuracy(s, 3, 3, y), 2.0 / 3.0, 1e-15);
    assert_true(isnan(bf_metric_accuracy(s, 0, 3, y)));
}

static void auc_hand_worked(void **state)
{
    (void)state;
    /* sorted: 0.1(-) rank 1, 0.35(+) 2, 0.4(-) 3, 0.8(+) 4; positive rank sum
     * 6, minus P(P+1)/2 = 3, over P*N = 4: 0.75 */
    const float s1[] = {0.1f, 0.4f, 0.35f, 0.8f}, y1[] = {0, 0, 1, 1};
    assert_near(auc_of(s1, y1, 4), 0.75, 1e-15);
    /* tie: 0.2(-) rank 1, 0.5(+) and 0.5(-) share 2.5, 0.9(+) 4; positives
     * 2.5 + 4 = 6.5, minus 3, over 4: 0.875 (pairwise: .5 + 1 + 1 + 1 = 3.5 of 4) */
    const float s2[] = {0.5f, 0.5f, 0.2f, 0.9f}, y2[] = {1, 0, 0, 1};
    assert_near(auc_of(s2, y2, 4), 0.875, 1e-15);
    /* labels above 0.5 are positive: the same case with soft labels */
    const float y2b[] = {0.9f, 0.1f, 0.5f, 0.7f};
    assert_near(auc_of(s2, y2b, 4), 0.875, 1e-15);
}

static void auc_extremes(void **state)
{
    (void)state;
    const float s[] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    const float up[] = {0, 0, 0, 1, 1, 1}, down[] = {1, 1, 1, 0, 0, 0};
    assert_near(auc_of(s, up, 6), 1.0, 0);
    assert_near(auc_of(s, down, 6), 0.0, 0);
    const float same[] = {0.3f, 0.3f, 0.3f, 0.3f, 0.3f, 0.3f};
    assert_near(auc_of(same, up, 6), 0.5, 0);
    /* -0 and +0 are the same score */
    const float zeros[] = {-0.0f, 0.0f}, y[] = {1, 0};
    assert_near(auc_of(zeros, y, 2), 0.5, 0);
    /* infinities and huge values order as numbers */
    const float big[] = {INFINITY, -INFINITY, 1e38f, -1e38f}, yb[] = {1, 0, 1, 0};
    assert_near(auc_of(big, yb, 4), 1.0, 0);
}

static void auc_nan_ranks_lowest(void **state)
{
    (void)state;
    /* NaN(+) rank 1, 0.1(-) 2, 0.2(+) 3: positives 4, minus 3, over 2: 0.5 */
    const float s[] = {NAN, 0.1f, 0.2f}, y[] = {1, 0, 1};
    assert_near(auc_of(s, y, 3), 0.5, 1e-15);
    /* NaNs tie with each other */
    const float s2[] = {NAN, NAN}, y2[] = {1, 0};
    assert_near(auc_of(s2, y2, 2), 0.5, 0);
    /* below -inf */
    const float s3[] = {NAN, -INFINITY}, y3[] = {0, 1};
    assert_near(auc_of(s3, y3, 2), 1.0, 0);
}

static void auc_single_class(void **state)
{
    (void)state;
    const float s[] = {0.1f, 0.2f, 0.3f}, zeros[] = {0, 0, 0}, ones[] = {1, 1, 1};
    int64_t order[3];
    double auc = 0;
    bf_error err = {0};
    assert_int_equal(bf_metric_auc(s, zeros, 3, order, &auc, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "all 3 labels are negative"));
    assert_int_equal(bf_metric_auc(s, ones, 3, order, &auc, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "all 3 labels are positive"));
    assert_int_equal(bf_metric_auc(s, ones, 0, order, &auc, NULL), BF_EINVAL);
}

/* Pairs (positive, negative): 1 when the positive scores higher, 1/2 on a
 * tie; NaN below every number and equal to NaN. Straight from the definition. */
static double auc_pairwise(const float *s, const float *y, int n)
{
    double wins = 0, pairs = 0;
    for (int i = 0; i < n; i++) {
        if (!(y[i] > 0.5f)) continue;
        for (int j = 0; j < n; j++) {
            if (y[j] > 0.5f) continue;
            float a = s[i], b = s[j];
            int an = isnan(a), bn = isnan(b);
            pairs += 1;
            if (an && bn) wins += 0.5;
            else if (an) wins += 0;
            else if (bn) wins += 1;
            else wins += a > b ? 1 : a == b ? 0.5 : 0;
        }
    }
    return wins / pairs;
}

static uint64_t lcg_state;
/* The same generator as the Python that produced the sklearn numbers below. */
static uint32_t lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg_state >> 33);
}

static void auc_matches_pairwise(void **state)
{
    (void)state;
    lcg_state = 7;
    float s[64], y[64];
    int64_t order[64];
    for (int trial = 0; trial < 200; trial++) {
        int n = 2 + (int)(lcg() % 60);
        for (int i = 0; i < n; i++) {
            uint32_t r = lcg();
            /* few distinct values so ties are common, and some NaN/inf */
            switch (r % 16) {
            case 0: s[i] = NAN; break;
            case 1: s[i] = INFINITY; break;
            case 2: s[i] = -INFINITY; break;
            default: s[i] = (float)((r >> 8) % 7) - 3; break;
            }
            y[i] = (float)((r >> 16) & 1);
        }
        y[0] = 0;
        y[1] = 1;
        double auc = -1;
        assert_int_equal(bf_metric_auc(s, y, n, order, &auc, NULL), BF_OK);
        assert_near(auc, auc_pairwise(s, y, n), 1e-12);
    }
}

#define BIG 1000
/* Produced by /usr/bin/python3 with scikit-learn 1.2.1 and numpy 1.24.2:
 *   x = 12345; next: x = (x*6364136223846793005 + 1442695040888963407) % 2**64,
 *   return x >> 33; per sample r1 = next(), r2 = next(), then the same
 *   formulas as fill_big; roc_auc_score(y, s) and log_loss(y, p, eps=1e-7),
 *   with p = 1/(1+exp(-logit)) in float64 for the logit case. */
#define SK_AUC_TIED 0.6548105718018289
#define SK_AUC_CONT 0.6382455634569799
#define SK_LOGLOSS_PROB 0.797763642216559
#define SK_LOGLOSS_LOGIT 1.5313453109804644

static void fill_big(float *tied_s, float *tied_y, float *cont_s, float *cont_y, float *logit_s)
{
    lcg_state = 12345;
    for (int i = 0; i < BIG; i++) {
        uint32_t r1 = lcg(), r2 = lcg(), lvl = r1 % 50;
        tied_s[i] = (float)lvl / 64.0f;                                  /* exact */
        tied_y[i] = (r2 % 100) + lvl > 70 ? 1.0f : 0.0f;
        cont_s[i] = (float)(r1 >> 7) / 16777216.0f;                      /* exact */
        cont_y[i] = (r2 % 1024) < 256 + ((r1 >> 7) >> 15) ? 1.0f : 0.0f;
        logit_s[i] = (float)(r1 >> 7) / 1048576.0f - 8.0f;               /* exact */
    }
}

static void matches_sklearn(void **state)
{
    (void)state;
    static float tied_s[BIG], tied_y[BIG], cont_s[BIG], cont_y[BIG], logit_s[BIG];
    static int64_t order[BIG];
    fill_big(tied_s, tied_y, cont_s, cont_y, logit_s);
    double auc = -1;
    assert_int_equal(bf_metric_auc(tied_s, tied_y, BIG, order, &auc, NULL), BF_OK);
    assert_near(auc, SK_AUC_TIED, 1e-12);
    assert_int_equal(bf_metric_auc(cont_s, cont_y, BIG, order, &auc, NULL), BF_OK);
    assert_near(auc, SK_AUC_CONT, 1e-12);
    /* a monotonic map of the scores (logits) ranks the same */
    assert_int_equal(bf_metric_auc(logit_s, cont_y, BIG, order, &auc, NULL), BF_OK);
    assert_near(auc, SK_AUC_CONT, 1e-12);
    assert_near(bf_metric_logloss(cont_s, cont_y, BIG), SK_LOGLOSS_PROB, 1e-12);
    assert_near(bf_metric_logloss(logit_s, cont_y, BIG), SK_LOGLOSS_LOGIT, 1e-12);
    /* the AUC comes from scores and labels only: reversing the input order
     * changes nothing */
    for (int i = 0; i < BIG / 2; i++) {
        float t = tied_s[i]; tied_s[i] = tied_s[BIG - 1 - i]; tied_s[BIG - 1 - i] = t;
        t = tied_y[i]; tied_y[i] = tied_y[BIG - 1 - i]; tied_y[BIG - 1 - i] = t;
    }
    assert_int_equal(bf_metric_auc(tied_s, tied_y, BIG, order, &auc, NULL), BF_OK);
    assert_near(auc, SK_AUC_TIED, 1e-12);
}

static void logloss_cases(void **state)
{
    (void)state;
    /* probabilities: -(log 0.8 + log(1 - 0.3)) / 2 */
    const float p[] = {0.8f, 0.3f}, y[] = {1, 0};
    assert_near(bf_metric_logloss(p, y, 2),
                        -(log((double)0.8f) + log(1 - (double)0.3f)) / 2, 1e-15);
    /* 2 is outside [0, 1], so both are logits: sigmoid(0) = 0.5 for label 1
     * costs log 2; sigmoid(2) for label 0 costs -log(1 - sigmoid(2)) = log(1 + e^2) */
    const float l[] = {0, 2};
    assert_near(bf_metric_logloss(l, y, 2), (log(2.0) + log1p(exp(2.0))) / 2, 1e-12);
    /* clipping: certain and wrong costs -log(1e-7) = 16.118..., not infinity */
    const float wrong[] = {0, 1};
    assert_near(bf_metric_logloss(wrong, y, 2), -log(1e-7), 1e-8);
    /* infinite logits saturate to the clip too */
    const float inf[] = {-INFINITY, INFINITY};
    assert_near(bf_metric_logloss(inf, y, 2), -log(1e-7), 1e-8);
    /* a NaN score makes the loss NaN: clipping must not hide it */
    const float nan[] = {NAN, 0.3f};
    assert_true(isnan(bf_metric_logloss(nan, y, 2)));
    assert_true(isnan(bf_metric_logloss(p, y, 0)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(argmax_cases), cmocka_unit_test(argmax_rules_match_torch),
        cmocka_unit_test(argmax_random),
        cmocka_unit_test(accuracy_cases),
        cmocka_unit_test(auc_hand_worked),
        cmocka_unit_test(auc_extremes),
        cmocka_unit_test(auc_nan_ranks_lowest),
        cmocka_unit_test(auc_single_class),
        cmocka_unit_test(auc_matches_pairwise),
        cmocka_unit_test(matches_sklearn),
        cmocka_unit_test(logloss_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
