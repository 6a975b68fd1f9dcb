/* The language_model task: perplexity, token accuracy and multiple-choice
 * accuracy by hand arithmetic and against PyTorch (references made by
 * tests/fixtures/lmtask/make_lmtask.py), the eval-set layout's hostile
 * inputs, and campaigns: every differential trial's metrics equal a full
 * recomputation over its outputs bit for bit, and the differential engine
 * agrees with the exact one. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "st_build.h"
#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/eval.h"
#include "bitflip/metrics.h"
#include "bitflip/model.h"
#include "campaign_check.h"
#include "campaign_kept.h"
#include "exec/metrics_impl.h"

#define DIR BF_FIXTURES "/lmtask/"

#define assert_near(a, b, tol) near_((a), (b), (tol), __LINE__)
static void near_(double a, double b, double tol, int line)
{
    if (fabs(a - b) <= tol) return;
    fail_msg("line %d: %.17g != %.17g (tolerance %g)", line, a, b, tol);
}

static void hand_cases(void **state)
{
    (void)state;
    double ce[4], ppl, acc;
    /* two equal logits, label 0: cross-entropy ln 2, perplexity 2; the
     * first maximum is 0, a hit */
    const float a[] = {0, 0};
    const int64_t la[] = {0};
    bf_metric_lm(a, la, 1, 1, 2, ce, &ppl, &acc);
    assert_near(ppl, 2, 1e-15);
    assert_true(acc == 1);
    /* three equal logits (ln 3), then a position without a label; label 1
     * is not the first maximum: a miss */
    const float b[] = {5, 5, 5, 9, 1, 1};
    const int64_t lb[] = {1, -100};
    bf_metric_lm(b, lb, 1, 2, 3, ce, &ppl, &acc);
    assert_near(ppl, 3, 1e-14);
    assert_true(acc == 0);
    /* two sequences: uniform over 4 (ln 4) and p = 3/6 (ln 2); the mean is
     * ln sqrt(8); sequence 1's label is its arg-max */
    float c[8] = {1, 1, 1, 1, 0, 0, 0, 0};
    c[4] = (float)log(3.0);
    const int64_t lc[] = {2, 0};
    bf_metric_lm(c, lc, 2, 1, 4, ce, &ppl, &acc);
    assert_near(ce[0], log(4.0), 1e-15);
    assert_near(ce[1], log(2.0), 1e-7);
    assert_near(ppl, sqrt(8.0), 1e-6);
    assert_true(acc == 0.5);
    /* nothing labelled: NaN */
    const int64_t ln[] = {-100, -100};
    bf_metric_lm(c, ln, 2, 1, 4, ce, &ppl, &acc);
    assert_true(isnan(ppl) && isnan(acc));
    /* a NaN logit makes its sequence's sum and the perplexity NaN */
    float d[] = {0, NAN};
    bf_metric_lm(d, la, 1, 1, 2, ce, &ppl, &acc);
    assert_true(isnan(ppl));
    assert_true(acc == 1);   /* NaN never wins the arg-max */

    /* multiple choice: item 0's lowest cross-entropy is row 1 (tied with
     * row 2: the first wins), right; item 1's row 3 is NaN and never wins,
     * row 4 is wrong; item 2 has one row, right: 2 of 3 */
    const double rce[] = {1.0, 0.5, 0.5, NAN, 2.0, 3.0};
    const int64_t item[] = {0, 0, 0, 1, 1, 2}, ans[] = {0, 1, 0, 1, 0, 1};
    int64_t best[6];
    assert_near(bf_metric_choice_accuracy(rce, 6, item, ans, best), 2.0 / 3.0, 1e-15);
    const int64_t ans2[] = {0, 0, 1, 0, 1, 1};   /* the tie's second row is the answer: a miss */
    assert_near(bf_metric_choice_accuracy(rce, 6, item, ans2, best), 2.0 / 3.0, 1e-15);
    /* item ids need not be dense: item 5 (rows 0, 1) picks row 1, wrong;
     * item 4 (rows 2, 3: 0.5 and NaN) row 2, wrong; item 0 row 4, right */
    const int64_t item3[] = {5, 5, 4, 4, 0, 0};
    const int64_t ans3[] = {1, 0, 0, 1, 1, 0};
    assert_near(bf_metric_choice_accuracy(rce, 6, item3, ans3, best), 1.0 / 3.0, 1e-15);
}

/* The pairwise tree updated along k changed leaves is the tree built again,
 * bit for bit, for every n up to 70 and random changes. */
static void tree_update_is_rebuild(void **state)
{
    (void)state;
    uint64_t r = 12345;
    double x[70], tree[256], val[70], fresh[70];
    int64_t idx[70];
    for (int64_t n = 1; n <= 70; n++)
        for (int rep = 0; rep < 20; rep++) {
            for (int64_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                x[i] = (double)(r >> 11) * 0x1p-40 * (double)((r >> 3) % 7 + 1);
            }
            bf__lm_tree_build(tree, x, n);
            assert_true(tree[1] == bf__lm_tree_sum(x, n));
            int64_t k = 0;
            memcpy(fresh, x, sizeof x);
            for (int64_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                if ((r >> 33) % 4 != 0) continue;
                idx[k] = i;
                val[k] = fresh[i] = (double)(r >> 20) * 0x1p-30;
                k++;
            }
            double root = bf__lm_tree_update(tree, n, idx, val, k);
            double want = bf__lm_tree_sum(fresh, n);
            assert_memory_equal(&root, &want, sizeof root);
        }
}

/* bf__lm_exp within 2 ulp of libm's exp over [-708, 0] (and 0 below, NaN
 * kept); a position's cross-entropy the same bits on the plain and the AVX2
 * path, on rows of 1 to 70 logits with ties, huge values, -Inf and NaN. */
static void exp_and_paths(void **state)
{
    (void)state;
    uint64_t r = 99;
    for (int i = 0; i < 200000; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double x = -708.0 * (double)(r >> 11) * 0x1p-53;
        if (i < 64) x = -(double)i / 8;   /* near 0 and k's boundaries */
        double e = bf__lm_exp(x), want = exp(x);
        if (!(fabs(e - want) <= 2 * nextafter(want, INFINITY) - 2 * want)) fail_msg("exp(%.17g): %.17g, libm %.17g", x, e, want);
    }
    assert_true(bf__lm_exp(-708.5) == 0 && bf__lm_exp(-INFINITY) == 0 && isnan(bf__lm_exp(NAN)));
    assert_true(bf__lm_exp(0) == 1 && bf__lm_exp(-0.0) == 1);
    float row[70];
    for (int n = 1; n <= 70; n++)
        for (int rep = 0; rep < 30; rep++) {
            for (int v = 0; v < n; v++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                int k = (int)(r >> 58);
                row[v] = k < 4 ? 3.0f : k < 6 ? 1e30f : k == 6 ? -INFINITY : k == 7 && rep == 5 ? NAN
                       : (float)((double)(int64_t)(r >> 20) * 0x1p-40);
            }
            int64_t label = (int64_t)((r >> 8) % (uint64_t)n);
            double a = bf__lm_position_ce(row, n, label, 0), b = bf__lm_position_ce(row, n, label, 1);
            if (memcmp(&a, &b, sizeof a) != 0 && !(isnan(a) && isnan(b))) fail_msg("n %d: plain %.17g, avx2 %.17g", n, a, b);
        }
}

static json_t *load_json(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fail_msg("%s: %s", path, je.text);
    return j;
}

/* bitflip's metrics against torch.nn.functional.cross_entropy (ignore_index
 * -100) and torch.argmax on logits with ties, -100s and large magnitudes:
 * to double rounding against torch in float64, to float32's against torch
 * in float32; token accuracy exactly. */
static void against_torch(void **state)
{
    (void)state;
    json_t *ref = load_json(DIR "metric_cases.ref.json");
    json_t *cases = json_object_get(ref, "cases");
    assert_true(json_array_size(cases) >= 5);
    for (size_t k = 0; k < json_array_size(cases); k++) {
        char path[512];
        snprintf(path, sizeof path, DIR "metric_case_%zu.safetensors", k);
        bf_dataset *ds = NULL;
        bf_error err = {0};
        if (bf_dataset_load_file(path, &ds, &err) != BF_OK) fail_msg("%s", err.msg);
        const bf_tensor *lg = bf_dataset_find(ds, "logits"), *lb = bf_dataset_find(ds, "labels");
        assert_non_null(lg);
        assert_non_null(lb);
        assert_int_equal(lg->ndim, 3);
        int64_t n = lg->dims[0], T = lg->dims[1], V = lg->dims[2];
        double ce[16], ppl, acc;
        assert_true(n <= 16);
        bf_metric_lm(lg->data, lb->data, n, T, V, ce, &ppl, &acc);
        json_t *c = json_array_get(cases, k);
        double p64 = json_real_value(json_object_get(c, "perplexity"));
        double p32 = json_real_value(json_object_get(c, "perplexity_f32"));
        printf("case %zu: perplexity %.17g, torch %.17g (float32 %.17g); token accuracy %.6f\n", k, ppl, p64, p32, acc);
        assert_near(ppl, p64, 1e-12 * p64);
        assert_near(ppl, p32, 2e-6 * p64);
        assert_true(acc == json_real_value(json_object_get(c, "token_accuracy")));
        bf_dataset_free(ds);
    }
    json_decref(ref);
}

static void eval_of(const char *data, bf_eval_result *r, bf_model **m, bf_dataset **ds, bf_evaluator **ev)
{
    bf_error err = {0};
    if (bf_model_load_file(DIR "tiny_lm.onnx", m, &err) != BF_OK) fail_msg("%s", err.msg);
    if (bf_dataset_load_file(data, ds, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_eval_opts o = {.batch = 5, .threads = 2};
    if (bf_evaluator_create(*m, *ds, &o, ev, &err) != BF_OK) fail_msg("%s", err.msg);
    if (bf_evaluator_run(*ev, NULL, 0, r, &err) != BF_OK) fail_msg("%s", err.msg);
}

/* The tiny LM (exported by PyTorch) evaluated by the engine: its
 * perplexity within float32 rounding of torch's, its token and choice
 * accuracies exactly (the reference's margins are far above rounding). */
static void eval_tiny_lm(void **state)
{
    (void)state;
    json_t *ref = load_json(DIR "tiny_lm.ref.json");
    assert_true(json_real_value(json_object_get(ref, "min_top2_gap")) > 1e-3);
    bf_model *m;
    bf_dataset *ds;
    bf_evaluator *ev;
    bf_eval_result r;
    eval_of(DIR "tiny_lm.eval.safetensors", &r, &m, &ds, &ev);
    assert_int_equal(r.task, BF_TASK_LANGUAGE_MODEL);
    assert_string_equal(bf_task_name(r.task), "language_model");
    double p = json_real_value(json_object_get(ref, "perplexity"));
    assert_near(r.perplexity, p, 1e-5 * p);
    assert_true(r.token_accuracy == json_real_value(json_object_get(ref, "token_accuracy")));
    assert_true(isnan(r.choice_accuracy) && isnan(r.accuracy) && isnan(r.auc));
    assert_int_equal(r.out_cols, 6 * 13);
    bf_evaluator_free(ev);
    bf_dataset_free(ds);
    bf_model_free(m);

    /* the GPT-2-style block on the same eval set */
    json_t *gref = load_json(DIR "tiny_gpt.ref.json");
    bf_error err = {0};
    tc_open_files(DIR "tiny_gpt.onnx", DIR "tiny_lm.eval.safetensors", &m, &ds);
    if (bf_evaluator_create(m, ds, NULL, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
    if (bf_evaluator_run(ev, NULL, 0, &r, &err) != BF_OK) fail_msg("%s", err.msg);
    p = json_real_value(json_object_get(gref, "perplexity"));
    assert_near(r.perplexity, p, 1e-5 * p);
    assert_true(json_real_value(json_object_get(gref, "min_top2_gap")) > 1e-3);
    assert_true(r.token_accuracy == json_real_value(json_object_get(gref, "token_accuracy")));
    bf_evaluator_free(ev);
    bf_dataset_free(ds);
    bf_model_free(m);
    json_decref(gref);

    json_t *mc = json_object_get(ref, "mc");
    assert_true(json_real_value(json_object_get(mc, "min_choice_margin")) > 1e-3);
    eval_of(DIR "tiny_lm_mc.eval.safetensors", &r, &m, &ds, &ev);
    p = json_real_value(json_object_get(mc, "perplexity"));
    assert_near(r.perplexity, p, 1e-5 * p);
    assert_true(r.token_accuracy == json_real_value(json_object_get(mc, "token_accuracy")));
    assert_true(r.choice_accuracy == json_real_value(json_object_get(mc, "choice_accuracy")));
    assert_true(r.choice_accuracy > 0 && r.choice_accuracy < 1);
    bf_evaluator_free(ev);
    bf_dataset_free(ds);
    bf_model_free(m);
    json_decref(ref);
}

/* --- hostile eval sets: safetensors built here */


#define N 4
#define T 6
#define V 13

/* Creating an evaluator of the tiny LM on these tensors fails with `want`
 * and a message holding `needle`. */
static void refused(const bf_model *m, const th_st_tensor *t, int n, bf_status want, const char *needle)
{
    th_st_outcome(m, t, n, want, needle);
}

static void hostile_layouts(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_file(DIR "tiny_lm.onnx", &m, &err) != BF_OK) fail_msg("%s", err.msg);
    int64_t ids[N * T], lab[N * T], item[N] = {0, 0, 1, 1}, ans[N] = {1, 0, 0, 1};
    float flab[N * T];
    for (int i = 0; i < N * T; i++) ids[i] = i % V, lab[i] = (i + 1) % V, flab[i] = 1;
    th_st_tensor in = {"input_ids", "I64", 2, {N, T}, ids, sizeof ids};
    th_st_tensor l = {"labels", "I64", 2, {N, T}, lab, sizeof lab};

    /* float labels of the language-model shape */
    th_st_tensor t1[] = {in, {"labels", "F32", 2, {N, T}, flab, sizeof flab}};
    refused(m, t1, 2, BF_EFORMAT, "token ids");
    /* [N, T + 1] against logits [N, T, V]; [N, 2, 3] */
    th_st_tensor t2[] = {in, {"labels", "I64", 2, {N, T - 2}, lab, sizeof(int64_t) * N * (T - 2)}};
    refused(m, t2, 2, BF_ESHAPE, "language_model layout");
    th_st_tensor t3[] = {in, {"labels", "I64", 3, {N, 2, 3}, lab, sizeof lab}};
    refused(m, t3, 2, BF_ESHAPE, "one label per sample");
    /* a token past the vocabulary, and a negative one other than -100 */
    lab[2 * T + 4] = V;
    th_st_tensor t4[] = {in, l};
    refused(m, t4, 2, BF_ERANGE, "labels[2, 4] is token 13");
    lab[2 * T + 4] = -1;
    refused(m, t4, 2, BF_ERANGE, "labels[2, 4] is token -1");
    /* nothing labelled */
    for (int i = 0; i < N * T; i++) lab[i] = -100;
    refused(m, t4, 2, BF_EINVAL, "labels no position");
    for (int i = 0; i < N * T; i++) lab[i] = (i + 1) % V;

    /* multiple choice */
    th_st_tensor it = {"mc_item", "I64", 1, {N}, item, sizeof item}, an = {"mc_answer", "I64", 1, {N}, ans, sizeof ans};
    th_st_tensor t5[] = {in, l, it};
    refused(m, t5, 3, BF_EINVAL, "'mc_answer' is missing");
    th_st_tensor t6[] = {in, l, it, {"mc_answer", "I64", 2, {N, 1}, ans, sizeof ans}};
    refused(m, t6, 4, BF_ESHAPE, "'mc_answer' has shape [4, 1]");
    th_st_tensor t7[] = {in, l, {"mc_item", "F32", 1, {N}, flab, sizeof(float) * N}, an};
    refused(m, t7, 4, BF_EFORMAT, "'mc_item' is float32");
    th_st_tensor t8[] = {in, l, it, an};
    item[3] = N;
    refused(m, t8, 4, BF_ERANGE, "mc_item[3] is 4");
    item[3] = 1;
    ans[1] = 2;
    refused(m, t8, 4, BF_ERANGE, "mc_answer[1] is 2");
    ans[1] = 1;
    refused(m, t8, 4, BF_EINVAL, "item 0 has more than one row");
    ans[0] = ans[1] = 0;
    refused(m, t8, 4, BF_EINVAL, "item 0 has no row with mc_answer 1");
    ans[0] = 1;
    for (int t = 0; t < T; t++) lab[2 * T + t] = -100;
    refused(m, t8, 4, BF_EINVAL, "row 2 (item 1) has no continuation");
    for (int t = 0; t < T; t++) lab[2 * T + t] = 1;
    /* multiple choice without a language-model eval set */
    th_st_tensor t9[] = {in, it, an};
    refused(m, t9, 3, BF_EINVAL, "need 'labels' [n, T]");

    /* sizes whose products overflow: the loader refuses them */
    th_st_tensor t10[] = {in, {"labels", "I64", 2, {(int64_t)1 << 40, (int64_t)1 << 40}, lab, sizeof lab}};
    size_t len;
    uint8_t *buf = th_st_build(t10, 2, &len);
    bf_dataset *ds = NULL;
    assert_int_not_equal(bf_dataset_load_buffer(buf, len, "hostile", &ds, &err), BF_OK);
    printf("refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "labels"));
    free(buf);
    /* and an eval set whose labelled, finished rows are fine: a row of -100s among them */
    for (int t = 0; t < T; t++) lab[1 * T + t] = -100;
    th_st_tensor t11[] = {in, l};
    buf = th_st_build(t11, 2, &len);
    bf_evaluator *ev = NULL;
    assert_int_equal(bf_dataset_load_buffer(buf, len, "ok", &ds, &err), BF_OK);
    assert_int_equal(bf_evaluator_create(m, ds, NULL, &ev, &err), BF_OK);
    assert_int_equal(bf_evaluator_task(ev), BF_TASK_LANGUAGE_MODEL);
    bf_evaluator_free(ev);
    bf_dataset_free(ds);
    free(buf);
    bf_model_free(m);
}

/* --- campaigns */

/* Every trial's record against the definitions, over its own outputs: the
 * metrics a full recomputation gives (bit for bit), the labelled positions
 * whose arg-max moved from golden's, and the outcome rule. */
static void check_records(const char *what, const tc_kept *k, const bf_dataset *ds, const float *golden,
                          const bf_campaign_spec *s, double golden_metric[BF_METRIC_COUNT])
{
    const bf_tensor *lt = bf_dataset_find(ds, "labels");
    const bf_tensor *it = bf_dataset_find(ds, "mc_item"), *at = bf_dataset_find(ds, "mc_answer");
    const int64_t *lab = lt->data;
    int64_t n = k->samples, t = lt->dims[1], v = k->cols / t, labelled = 0;
    for (int64_t i = 0; i < n * t; i++) labelled += lab[i] != -100;
    double *ce = malloc((size_t)n * sizeof *ce);
    int64_t *best = malloc((size_t)n * sizeof *best);
    assert_non_null(ce);
    assert_non_null(best);
    for (int64_t j = 0; j < k->n; j++) {
        const bf_trial_record *r = &k->rec[j];
        const float *o = k->out + (size_t)j * (size_t)(n * k->cols);
        double ppl, acc, cacc = NAN;
        bf_metric_lm(o, lab, n, t, v, ce, &ppl, &acc);
        if (it) cacc = bf_metric_choice_accuracy(ce, n, it->data, at->data, best);
        int64_t changed = 0, bad = 0, same = memcmp(o, golden, (size_t)(n * k->cols) * sizeof *o) == 0;
        for (int64_t i = 0; i < n * t; i++)
            changed += lab[i] != -100 && bf_argmax(o + i * v, v) != bf_argmax(golden + i * v, v);
        for (int64_t i = 0; i < n * k->cols; i++) bad |= !isfinite(o[i]) && isfinite(golden[i]);
        bad |= !isfinite(ppl);
        if (memcmp(&r->metrics[BF_METRIC_PERPLEXITY], &ppl, sizeof ppl) != 0 && !(isnan(ppl) && isnan(r->metrics[BF_METRIC_PERPLEXITY])))
            fail_msg("%s trial %lld: perplexity %.17g, recomputed from its outputs %.17g", what, (long long)r->trial,
                     r->metrics[BF_METRIC_PERPLEXITY], ppl);
        assert_memory_equal(&r->metrics[BF_METRIC_TOKEN_ACCURACY], &acc, sizeof acc);
        if (it) assert_memory_equal(&r->metrics[BF_METRIC_CHOICE_ACCURACY], &cacc, sizeof cacc);
        else assert_true(isnan(r->metrics[BF_METRIC_CHOICE_ACCURACY]));
        assert_int_equal(r->changed, changed);
        assert_true(r->metrics[BF_METRIC_TOP1_MISMATCH] == (double)changed / (double)labelled);
        int critical = changed > 0;
        if (s->critical_metric == BF_METRIC_PERPLEXITY) critical |= ppl - golden_metric[BF_METRIC_PERPLEXITY] > s->critical_delta;
        bf_outcome want = same ? BF_OUTCOME_MASKED : bad ? BF_OUTCOME_DUE : critical ? BF_OUTCOME_CRITICAL : BF_OUTCOME_TOLERABLE;
        if (r->outcome != want)
            fail_msg("trial %lld: %s, by the definitions %s (ppl %g, changed %lld)", (long long)r->trial,
                     bf_outcome_name(r->outcome), bf_outcome_name(want), ppl, (long long)changed);
    }
    free(ce);
    free(best);
}

static void lm_campaign(const char *model, const char *data, bf_target target, bf_persistence p, int critical_ppl, int64_t trials,
                        int64_t batch)
{
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_open_files(model, data, &m, &ds);
    bf_campaign_spec s = tc_base_spec(batch);
    s.trials = trials;
    s.seed = 30;
    s.target = target;
    s.persistence = p;
    s.sampling = BF_SAMPLE_UNIFORM;
    if (critical_ppl) {
        s.critical_metric = BF_METRIC_PERPLEXITY;
        s.critical_delta = 0.05;
    }
    int64_t samples, cols;
    float *golden = tc_golden_copy(m, ds, &s, &samples, &cols);

    bf_campaign_result rx, rd;
    tc_kept ex = tc_run_kept(m, ds, &s, 1, &rx), df = tc_run_kept(m, ds, &s, 0, &rd);
    assert_int_equal(rx.task, BF_TASK_LANGUAGE_MODEL);
    assert_true(isfinite(rx.golden[BF_METRIC_PERPLEXITY]) && isfinite(rx.golden[BF_METRIC_TOKEN_ACCURACY]));
    check_records("exact", &ex, ds, golden, &s, rx.golden);
    check_records("differential", &df, ds, golden, &s, rx.golden);
    /* where both engines computed the same outputs, the same record */
    int64_t same = 0, count[BF_OUTCOME_COUNT] = {0};
    for (int64_t j = 0; j < ex.n; j++) {
        size_t cells = (size_t)(samples * cols);
        count[ex.rec[j].outcome]++;
        if (memcmp(ex.out + j * cells, df.out + j * cells, cells * sizeof(float)) != 0) continue;
        same++;
        tc_assert_same_record(&ex.rec[j], &df.rec[j]);
    }
    printf("%s on %s: %lld trials, %lld with bit-identical outputs in both engines; masked %lld tolerable %lld critical %lld "
           "due %lld\n",
           strrchr(model, '/') + 1, strrchr(data, '/') + 1, (long long)ex.n, (long long)same, (long long)count[0], (long long)count[1], (long long)count[2],
           (long long)count[3]);
    assert_true(same * 100 >= ex.n * 95);
    /* the differential engine scored them from the golden sums (full passes are the exact engine's) */
    printf("differential: %lld of them as full passes\n", (long long)rd.full_trials);
    assert_true(rd.full_trials * 2 < ex.n);
    assert_true(count[BF_OUTCOME_CRITICAL] > 0 && count[BF_OUTCOME_TOLERABLE] + count[BF_OUTCOME_MASKED] > 0);
    tc_kept_free(&ex);
    tc_kept_free(&df);
    bf_campaign_result_free(&rx);
    bf_campaign_result_free(&rd);

    /* and the usual differential-vs-exact comparison (tc_both) */
    tc_tally tally = {0};
    tc_both(m, ds, tc_out_scale(m, ds), data, &s, "lm", &tally, NULL);
    tc_assert_agree("language_model", &tally, trials);
    free(golden);
    bf_dataset_free(ds);
    bf_model_free(m);
}

static void campaign_weights(void **state)
{
    (void)state;
    lm_campaign(DIR "tiny_lm.onnx", DIR "tiny_lm.eval.safetensors", BF_TARGET_WEIGHTS, BF_PERSIST_PERMANENT, 0, 400, 5);
}

static void campaign_weights_mc(void **state)
{
    (void)state;
    lm_campaign(DIR "tiny_lm.onnx", DIR "tiny_lm_mc.eval.safetensors", BF_TARGET_WEIGHTS, BF_PERSIST_PERMANENT, 1, 400, 4);
}

static void campaign_activations_mc(void **state)
{
    (void)state;
    lm_campaign(DIR "tiny_lm.onnx", DIR "tiny_lm_mc.eval.safetensors", BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT, 1, 300, 4);
}

/* A GPT-2-style block: a change at one position reaches the later ones
 * through attention, so a trial changes many positions of a sequence. */
static void campaign_gpt(void **state)
{
    (void)state;
    lm_campaign(DIR "tiny_gpt.onnx", DIR "tiny_lm.eval.safetensors", BF_TARGET_WEIGHTS, BF_PERSIST_PERMANENT, 1, 300, 5);
    lm_campaign(DIR "tiny_gpt.onnx", DIR "tiny_lm.eval.safetensors", BF_TARGET_ACTIVATIONS, BF_PERSIST_PERMANENT, 0, 200, 5);
}

/* Named fault sites (issue 30): `tensors` patterns match the names `bitflip
 * info` shows. The reference for where attn_probs.K and attn_scores.K are is
 * the exporter's own naming of the GPT-2 fixture (tests/fixtures/
 * make_lm_models.py): block K's Softmax is /h.K/Softmax, fed by /h.K/Where
 * (the masked_fill). */
static bf_campaign *named_campaign(const bf_model *m, const bf_dataset *ds, bf_campaign_spec *s, char **pats, size_t n,
                                   bf_status want, const char *needle)
{
    s->tensors = pats;
    s->n_tensors = n;
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_status st = bf_campaign_create(m, ds, s, &c, &err);
    if (st != want) fail_msg("%s: status %d (%s)", pats[0], (int)st, err.msg);
    if (needle && !strstr(err.msg, needle)) fail_msg("%s: '%s' lacks '%s'", pats[0], err.msg, needle);
    return c;
}

static void campaign_named_sites(void **state)
{
    (void)state;
    const char *model = BF_FIXTURES "/lm/lm_gpt2_op14.onnx", *data = BF_FIXTURES "/lm/lm_gpt2_op14.eval.safetensors";
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    tc_open_files(model, data, &m, &ds);
    if (bf_model_bind_dims(&m, ds, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_campaign_spec s = tc_base_spec(4);
    s.trials = 120;
    s.seed = 31;
    s.target = BF_TARGET_ACTIVATIONS;
    s.persistence = BF_PERSIST_TRANSIENT;
    s.sampling = BF_SAMPLE_UNIFORM;
    char *probs[] = {"attn_probs.*"}, *scores[] = {"attn_scores.1"}, *both[] = {"attn_*.0", "/h.1/Softmax_output_0"};
    bf_campaign *c = named_campaign(m, ds, &s, probs, 1, BF_OK, NULL);
    assert_int_equal(bf_campaign_num_sites(c), 2);
    for (size_t i = 0; i < 2; i++) {
        char want[64], site[32];
        snprintf(want, sizeof want, "/h.%zu/Softmax_output_0", i);
        snprintf(site, sizeof site, "attn_probs.%zu", i);
        assert_string_equal(bf_campaign_site(c, i)->name, want);
        assert_string_equal(bf_campaign_site(c, i)->op, "Softmax");
        assert_non_null(bf_campaign_site(c, i)->site);
        assert_string_equal(bf_campaign_site(c, i)->site, site);
    }
    bf_campaign_free(c);
    c = named_campaign(m, ds, &s, scores, 1, BF_OK, NULL);
    assert_int_equal(bf_campaign_num_sites(c), 1);
    assert_string_equal(bf_campaign_site(c, 0)->name, "/h.1/Where_output_0");
    assert_string_equal(bf_campaign_site(c, 0)->site, "attn_scores.1");
    bf_campaign_free(c);
    /* globs over site names and ONNX names together; each value once */
    c = named_campaign(m, ds, &s, both, 2, BF_OK, NULL);
    assert_int_equal(bf_campaign_num_sites(c), 3);
    assert_string_equal(bf_campaign_site(c, 0)->site, "attn_scores.0");
    assert_string_equal(bf_campaign_site(c, 1)->site, "attn_probs.0");
    assert_string_equal(bf_campaign_site(c, 2)->site, "attn_probs.1");
    bf_campaign_free(c);
    /* an ordinary activation has no site name */
    char *ln[] = {"op:MatMul"};
    c = named_campaign(m, ds, &s, ln, 1, BF_OK, NULL);
    assert_true(bf_campaign_num_sites(c) > 4);
    for (size_t i = 0; i < bf_campaign_num_sites(c); i++) assert_null(bf_campaign_site(c, i)->site);
    bf_campaign_free(c);
    /* hostile and absent names: refused, naming the pattern */
    char *none[] = {"router_logits.*"}, *past[] = {"attn_probs.2"}, *neg[] = {"attn_probs.-1"};
    char long_name[300];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    char *lng[] = {long_name};
    named_campaign(m, ds, &s, none, 1, BF_ENOTFOUND,
                   "'router_logits.*' matches no node output (the node outputs that are fault sites: ");
    named_campaign(m, ds, &s, none, 1, BF_ENOTFOUND,
                   "; this model's named fault sites: attn_scores.0, attn_probs.0, attn_scores.1, attn_probs.1");
    named_campaign(m, ds, &s, past, 1, BF_ENOTFOUND, "attn_probs.2");
    named_campaign(m, ds, &s, neg, 1, BF_ENOTFOUND, "attn_probs.-1");
    named_campaign(m, ds, &s, lng, 1, BF_ENOTFOUND, "aaaa");
    /* weights have no named sites */
    s.target = BF_TARGET_WEIGHTS;
    s.persistence = BF_PERSIST_PERMANENT;
    named_campaign(m, ds, &s, probs, 1, BF_ENOTFOUND,
                   "'attn_probs.*' names LM fault sites (docs/LM.md), which are node outputs: they need target 'activations'");
    s.target = BF_TARGET_ACTIVATIONS;
    s.persistence = BF_PERSIST_TRANSIENT;

    /* a fault list may name a site as well */
    bf_fault_entry e = {.tensor = "attn_probs.1", .index = 5, .bit = 30, .sample = 1};
    bf_campaign_spec sl = s;
    sl.sampling = BF_SAMPLE_LIST;
    sl.list = &e;
    sl.n_list = 1;
    sl.tensors = NULL;
    sl.n_tensors = 0;
    c = tc_make(m, ds, &sl);
    int64_t at = -1;
    for (size_t i = 0; i < bf_campaign_num_sites(c); i++)
        if (bf_campaign_site(c, i)->site && !strcmp(bf_campaign_site(c, i)->site, "attn_probs.1")) at = (int64_t)i;
    assert_true(at >= 0);
    assert_string_equal(bf_campaign_site(c, (size_t)at)->name, "/h.1/Softmax_output_0");
    bf_campaign_free(c);
    bf_campaign_result rl;
    tc_kept kl = tc_run_kept(m, ds, &sl, 1, &rl);
    assert_int_equal(kl.n, 1);
    assert_int_equal(kl.rec[0].faults[0].site, at);
    tc_kept_free(&kl);
    bf_campaign_result_free(&rl);

    /* the campaign over the sites: both engines, the records' faults in them */
    s.tensors = probs;
    s.n_tensors = 1;
    bf_campaign_result rx, rd;
    tc_kept ex = tc_run_kept(m, ds, &s, 1, &rx), df = tc_run_kept(m, ds, &s, 0, &rd);
    int64_t cells = ex.samples * ex.cols, same = 0;
    for (int64_t j = 0; j < ex.n; j++) {
        assert_true(ex.rec[j].n_kept > 0);
        assert_true(ex.rec[j].faults[0].site >= 0 && ex.rec[j].faults[0].site < 2);
        if (memcmp(ex.out + j * cells, df.out + j * cells, (size_t)cells * sizeof(float)) != 0) continue;
        same++;
        tc_assert_same_record(&ex.rec[j], &df.rec[j]);
    }
    assert_true(same * 100 >= ex.n * 95);
    tc_kept_free(&ex);
    tc_kept_free(&df);
    bf_campaign_result_free(&rx);
    bf_campaign_result_free(&rd);
    tc_tally tally = {0};
    tc_both(m, ds, tc_out_scale(m, ds), data, &s, "named sites", &tally, NULL);
    tc_assert_agree("named sites", &tally, s.trials);
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* Every allocation of an LM campaign's create and run (the labels, the
 * golden arg-max, the scorer's sums, tree and item index) failing (as
 * campaign_check.h's tc_alloc_plan picks them):
 * BF_ENOMEM, everything freed (ASan), then the whole campaign. */
static void allocation_failures(void **state)
{
    (void)state;
    tc_task_alloc_failures(DIR "tiny_lm.onnx", DIR "tiny_lm_mc.eval.safetensors");
}

/* Metric names parse and print; the task's metrics apply to it only. */
static void metric_names(void **state)
{
    (void)state;
    assert_int_equal(bf_metric_parse("perplexity"), BF_METRIC_PERPLEXITY);
    assert_int_equal(bf_metric_parse("token_accuracy"), BF_METRIC_TOKEN_ACCURACY);
    assert_int_equal(bf_metric_parse("choice_accuracy"), BF_METRIC_CHOICE_ACCURACY);
    assert_string_equal(bf_metric_name(BF_METRIC_CHOICE_ACCURACY), "choice_accuracy");
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    tc_open_files(DIR "tiny_lm.onnx", DIR "tiny_lm.eval.safetensors", &m, &ds);
    bf_campaign_spec s = tc_base_spec(4);
    s.trials = 4;
    s.critical_metric = BF_METRIC_CHOICE_ACCURACY;   /* no mc_item in this eval set */
    s.critical_delta = 0.1;
    bf_campaign *c = NULL;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'choice_accuracy' does not apply to a language_model task"));
    s.critical_metric = BF_METRIC_ACCURACY;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_EINVAL);
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_cases),
        cmocka_unit_test(tree_update_is_rebuild),
        cmocka_unit_test(exp_and_paths),
        cmocka_unit_test(against_torch),
        cmocka_unit_test(eval_tiny_lm),
        cmocka_unit_test(hostile_layouts),
        cmocka_unit_test(metric_names),
        cmocka_unit_test(allocation_failures),
        cmocka_unit_test(campaign_weights),
        cmocka_unit_test(campaign_weights_mc),
        cmocka_unit_test(campaign_activations_mc),
        cmocka_unit_test(campaign_gpt),
        cmocka_unit_test(campaign_named_sites),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
