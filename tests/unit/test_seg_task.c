/* The segmentation task: mIoU and pixel accuracy by hand arithmetic and
 * against a reference written from the VOC / torchvision definitions
 * (torch.argmax, sklearn's confusion_matrix: tests/fixtures/segtask/
 * make_segtask.py), the eval-set layout's hostile inputs, and campaigns:
 * every trial's metrics equal a recomputation over its outputs bit for bit,
 * its critical images and outcome follow the rule (docs/CAMPAIGNS.md), and
 * the differential engine agrees with the exact one. */
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

#define DIR BF_FIXTURES "/segtask/"

#define assert_near(a, b, tol) near_((a), (b), (tol), __LINE__)
static void near_(double a, double b, double tol, int line)
{
    if (fabs(a - b) <= tol) return;
    fail_msg("line %d: %.17g != %.17g (tolerance %g)", line, a, b, tol);
}

/* torch.argmax's rule at pixel p of an image [C, HW], written out here
 * apart from the library's: the first NaN, else the first maximum. */
static int64_t torch_argmax(const float *x, int64_t C, int64_t HW, int64_t p)
{
    int64_t best = 0;
    for (int64_t c = 0; c < C; c++) {
        if (isnan(x[c * HW + p])) return c;
        if (x[c * HW + p] > x[best * HW + p]) best = c;
    }
    return best;
}

/* Two 2x2 images, 4 classes (docs in the comments: label -> prediction):
 * image 0: 0->0, 1->1, ignored (predicted 3), 1->0 (a tie of four: 0);
 * image 1: 1->1 (a tie of 1 and 2: the first), 2->1, 0->0 (a NaN in class 0
 * beats +inf in class 2), ignored. Confusion: (0,0) 2, (1,1) 2, (1,0) 1,
 * (2,1) 1. IoU: class 0 2/3, class 1 2/4, class 2 0/1; class 3 is never
 * labelled and only predicted at an ignored pixel: left out. mIoU 7/18,
 * pixel accuracy 4/6. */
static void hand_cases(void **state)
{
    (void)state;
    enum { C = 4, HW = 4 };
    float x[2 * C * HW] = {0};
#define L(img, c, p) x[(img) * C * HW + (c) * HW + (p)]
    L(0, 0, 0) = 1;
    L(0, 1, 1) = 1;
    L(0, 3, 2) = 1;
    L(1, 1, 0) = 2, L(1, 2, 0) = 2, L(1, 3, 0) = -INFINITY;
    L(1, 1, 1) = 5;
    L(1, 0, 2) = NAN, L(1, 2, 2) = INFINITY;
    L(1, 3, 3) = NAN;
#undef L
    const int64_t labels[2 * HW] = {0, 1, 255, 1, 1, 2, 0, 255};
    int64_t cm[C * C];
    int32_t pred[HW];
    double miou, pa;
    bf_metric_segmentation(x, labels, 2, C, HW, cm, pred, &miou, &pa);
    assert_near(miou, 7.0 / 18.0, 1e-15);
    assert_near(pa, 4.0 / 6.0, 1e-15);
    assert_true(cm[0 * C + 0] == 2 && cm[1 * C + 1] == 2 && cm[1 * C + 0] == 1 && cm[2 * C + 1] == 1);
    /* one image alone: classes 0 and 1, 1/2 each; class 2 neither labelled nor predicted */
    bf_metric_segmentation(x, labels, 1, C, HW, cm, pred, &miou, &pa);
    assert_near(miou, 0.5, 1e-15);
    assert_near(pa, 2.0 / 3.0, 1e-15);
    /* nothing labelled: NaN */
    const int64_t none[HW] = {255, 255, 255, 255};
    bf_metric_segmentation(x, none, 1, C, HW, cm, pred, &miou, &pa);
    assert_true(isnan(miou) && isnan(pa));
    /* changed pixels: image 1's NaN pixel made a number, its tie broken the other way */
    float y[2 * C * HW];
    memcpy(y, x, sizeof x);
    assert_int_equal(bf_metric_seg_changed(x, y, 2, C, HW), 0);
    y[C * HW + 0 * HW + 2] = 0;       /* class 2's +inf wins now */
    y[C * HW + 2 * HW + 0] = 2.5f;    /* pixel 0: class 2 */
    assert_int_equal(bf_metric_seg_changed(x, y, 2, C, HW), 2);
}

/* The metric cases against make_segtask.py's reference. */
static void against_reference(void **state)
{
    (void)state;
    json_error_t jerr;
    json_t *ref = json_load_file(DIR "metric_cases.ref.json", 0, &jerr);
    assert_non_null(ref);
    for (int k = 0; k < 3; k++) {
        char path[512], key[16];
        snprintf(path, sizeof path, DIR "metric_case_%d.safetensors", k);
        snprintf(key, sizeof key, "%d", k);
        bf_dataset *ds = NULL;
        bf_error err = {0};
        if (bf_dataset_load_file(path, &ds, &err) != BF_OK) fail_msg("%s", err.msg);
        const bf_tensor *lg = bf_dataset_find(ds, "logits"), *lb = bf_dataset_find(ds, "labels");
        int64_t n = lg->dims[0], C = lg->dims[1], HW = lg->dims[2] * lg->dims[3];
        int64_t *cm = malloc((size_t)(C * C) * sizeof *cm);
        int32_t *pred = malloc((size_t)HW * sizeof *pred);
        assert_non_null(cm);
        assert_non_null(pred);
        double miou, pa;
        bf_metric_segmentation(lg->data, lb->data, n, C, HW, cm, pred, &miou, &pa);
        json_t *r = json_object_get(ref, key);
        printf("case %d: miou %.17g (reference %.17g), pixel_accuracy %.17g\n", k, miou,
               json_real_value(json_object_get(r, "miou")), pa);
        assert_near(miou, json_real_value(json_object_get(r, "miou")), 1e-14);
        assert_near(pa, json_real_value(json_object_get(r, "pixel_accuracy")), 1e-15);
        free(cm);
        free(pred);
        bf_dataset_free(ds);
    }
    json_decref(ref);
}

static void eval_tiny_seg(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    tc_open_files(DIR "tiny_seg.onnx", DIR "tiny_seg.eval.safetensors", &m, &ds);
    json_error_t jerr;
    json_t *ref = json_load_file(DIR "tiny_seg.ref.json", 0, &jerr);
    assert_non_null(ref);
    /* every batch split and thread count gives the same metrics */
    int64_t batches[] = {0, 3, 10};
    for (int b = 0; b < 3; b++) {
        bf_eval_opts o = {.batch = batches[b], .threads = b + 1};
        bf_eval_result r;
        if (bf_evaluator_create(m, ds, &o, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
        assert_int_equal(bf_evaluator_task(ev), BF_TASK_SEGMENTATION);
        if (bf_evaluator_run(ev, NULL, 0, &r, &err) != BF_OK) fail_msg("%s", err.msg);
        assert_int_equal(r.task, BF_TASK_SEGMENTATION);
        assert_string_equal(bf_task_name(r.task), "segmentation");
        assert_near(r.miou, json_real_value(json_object_get(ref, "miou")), 1e-14);
        assert_near(r.pixel_accuracy, json_real_value(json_object_get(ref, "pixel_accuracy")), 1e-15);
        assert_true(isnan(r.accuracy) && isnan(r.perplexity) && isnan(r.map) && isnan(r.map50) && isnan(r.recall));
        bf_evaluator_free(ev);
    }
    json_decref(ref);
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* --- hostile eval sets: safetensors built here */


/* Creating an evaluator on these tensors gives `want` and a message holding `needle`. */
static void outcome_of(const bf_model *m, const th_st_tensor *t, int n, bf_status want, const char *needle)
{
    int task = th_st_outcome(m, t, n, want, needle);
    if (want == BF_OK) assert_int_equal(task, BF_TASK_SEGMENTATION);
}

#define N 2
#define HH 12
#define WW 12

static void hostile_layouts(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_file(DIR "tiny_seg.onnx", &m, &err) != BF_OK) fail_msg("%s", err.msg);
    static float img[N * 3 * HH * WW], flab[N * HH * WW];
    static int64_t lab[N * HH * WW];
    static int32_t lab32[N * HH * WW];
    static uint8_t lab8[N * HH * WW];
    for (int i = 0; i < N * HH * WW; i++) lab[i] = lab32[i] = lab8[i] = (uint8_t)(i % 4), flab[i] = 1;
    th_st_tensor in = {"input", "F32", 4, {N, 3, HH, WW}, img, sizeof img};
    th_st_tensor l = {"labels", "I64", 3, {N, HH, WW}, lab, sizeof lab};

    /* fine: int64, int32 and uint8 labels */
    th_st_tensor ok[] = {in, l};
    outcome_of(m, ok, 2, BF_OK, NULL);
    th_st_tensor ok32[] = {in, {"labels", "I32", 3, {N, HH, WW}, lab32, sizeof lab32}};
    outcome_of(m, ok32, 2, BF_OK, NULL);
    th_st_tensor ok8[] = {in, {"labels", "U8", 3, {N, HH, WW}, lab8, sizeof lab8}};
    outcome_of(m, ok8, 2, BF_OK, NULL);
    /* float labels */
    th_st_tensor t1[] = {in, {"labels", "F32", 3, {N, HH, WW}, flab, sizeof flab}};
    outcome_of(m, t1, 2, BF_EFORMAT, "labels are class ids");
    /* H, W other than the output's */
    th_st_tensor t2[] = {in, {"labels", "I64", 3, {N, WW * 2, HH / 2}, lab, sizeof lab}};
    outcome_of(m, t2, 2, BF_ESHAPE, "with the labels' H and W");
    /* a class past C, a negative one, a 254 */
    lab[1 * HH * WW + 3 * WW + 5] = 5;
    outcome_of(m, ok, 2, BF_ERANGE, "labels[1, 3, 5] is class 5 but output 'out' scores 5 classes");
    lab[1 * HH * WW + 3 * WW + 5] = -1;
    outcome_of(m, ok, 2, BF_ERANGE, "labels[1, 3, 5] is class -1");
    lab[1 * HH * WW + 3 * WW + 5] = 254;
    outcome_of(m, ok, 2, BF_ERANGE, "is class 254");
    /* every pixel ignored */
    for (int i = 0; i < N * HH * WW; i++) lab[i] = 255;
    outcome_of(m, ok, 2, BF_EINVAL, "labels no pixel");
    /* a sample count the labels do not share: the loader's rule */
    th_st_tensor t3[] = {in, {"labels", "I64", 3, {N - 1, HH, WW}, lab, sizeof lab / 2}};
    outcome_of(m, t3, 2, BF_EFORMAT, "first dimension is the sample");
    bf_model_free(m);
}

/* --- campaigns */

/* Every trial's record against the definitions, over its own outputs. */
static void check_records(const char *what, const tc_kept *k, const bf_dataset *ds, const float *golden,
                          const bf_campaign_spec *s, const double golden_metric[BF_METRIC_COUNT], int64_t count[BF_OUTCOME_COUNT])
{
    const bf_tensor *lt = bf_dataset_find(ds, "labels");
    int64_t n = k->samples, HW = lt->dims[1] * lt->dims[2], C = k->cols / HW;
    double share = s->critical_pixels_set ? s->critical_pixels : BF_CRITICAL_PIXELS_DEFAULT;
    int by_metric = s->critical_metric == BF_METRIC_MIOU || s->critical_metric == BF_METRIC_PIXEL_ACCURACY;
    int64_t *cm = malloc((size_t)(C * C) * sizeof *cm);
    int32_t *pred = malloc((size_t)HW * sizeof *pred);
    assert_non_null(cm);
    assert_non_null(pred);
    for (int64_t j = 0; j < k->n; j++) {
        const bf_trial_record *r = &k->rec[j];
        const float *o = k->out + (size_t)j * (size_t)(n * k->cols);
        double miou, pa;
        bf_metric_segmentation(o, lt->data, n, C, HW, cm, pred, &miou, &pa);
        int64_t critical_images = 0, bad = 0, same = memcmp(o, golden, (size_t)(n * k->cols) * sizeof *o) == 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t moved = 0;
            for (int64_t p = 0; p < HW; p++)
                moved += torch_argmax(o + i * k->cols, C, HW, p) != torch_argmax(golden + i * k->cols, C, HW, p);
            critical_images += (double)moved / (double)HW > share;
        }
        for (int64_t i = 0; i < n * k->cols; i++) bad |= !isfinite(o[i]) && isfinite(golden[i]);
        if (memcmp(&r->metrics[BF_METRIC_MIOU], &miou, sizeof miou) != 0 && !(isnan(miou) && isnan(r->metrics[BF_METRIC_MIOU])))
            fail_msg("%s trial %lld: miou %.17g, recomputed from its outputs %.17g", what, (long long)r->trial,
                     r->metrics[BF_METRIC_MIOU], miou);
        assert_memory_equal(&r->metrics[BF_METRIC_PIXEL_ACCURACY], &pa, sizeof pa);
        assert_true(isnan(r->metrics[BF_METRIC_ACCURACY]));
        assert_int_equal(r->changed, critical_images);
        assert_true(r->metrics[BF_METRIC_TOP1_MISMATCH] == (double)critical_images / (double)n);
        int critical = by_metric ? golden_metric[s->critical_metric] - (s->critical_metric == BF_METRIC_MIOU ? miou : pa) > s->critical_delta
                                 : critical_images > 0;
        bf_outcome want = same ? BF_OUTCOME_MASKED : bad ? BF_OUTCOME_DUE : critical ? BF_OUTCOME_CRITICAL : BF_OUTCOME_TOLERABLE;
        if (r->outcome != want)
            fail_msg("%s trial %lld: %s, by the definitions %s (miou %g, critical images %lld)", what, (long long)r->trial,
                     bf_outcome_name(r->outcome), bf_outcome_name(want), miou, (long long)critical_images);
        count[r->outcome]++;
    }
    free(cm);
    free(pred);
}

static void seg_campaign(bf_target target, bf_persistence p, int critical_miou, double pixels, int64_t trials, int64_t batch,
                         int want_critical)
{
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_open_files(DIR "tiny_seg.onnx", DIR "tiny_seg.eval.safetensors", &m, &ds);
    bf_campaign_spec s = tc_base_spec(batch);
    s.trials = trials;
    s.seed = 31;
    s.target = target;
    s.persistence = p;
    s.sampling = BF_SAMPLE_UNIFORM;
    if (critical_miou) {
        s.critical_metric = BF_METRIC_MIOU;
        s.critical_delta = 0.002;
    }
    if (pixels >= 0) s.critical_pixels = pixels, s.critical_pixels_set = 1;
    int64_t samples, cols;
    float *golden = tc_golden_copy(m, ds, &s, &samples, &cols);

    bf_campaign_result rx, rd;
    tc_kept ex = tc_run_kept(m, ds, &s, 1, &rx), df = tc_run_kept(m, ds, &s, 0, &rd);
    assert_int_equal(rx.task, BF_TASK_SEGMENTATION);
    json_error_t jerr;
    json_t *ref = json_load_file(DIR "tiny_seg.ref.json", 0, &jerr);
    assert_near(rx.golden[BF_METRIC_MIOU], json_real_value(json_object_get(ref, "miou")), 1e-14);
    assert_near(rx.golden[BF_METRIC_PIXEL_ACCURACY], json_real_value(json_object_get(ref, "pixel_accuracy")), 1e-15);
    json_decref(ref);
    /* the differential run's golden metrics are the exact run's bits */
    assert_memory_equal(&rd.golden[BF_METRIC_MIOU], &rx.golden[BF_METRIC_MIOU], sizeof(double));
    assert_memory_equal(&rd.golden[BF_METRIC_PIXEL_ACCURACY], &rx.golden[BF_METRIC_PIXEL_ACCURACY], sizeof(double));
    int64_t cx[BF_OUTCOME_COUNT] = {0}, cd[BF_OUTCOME_COUNT] = {0};
    check_records("exact", &ex, ds, golden, &s, rx.golden, cx);
    check_records("differential", &df, ds, golden, &s, rx.golden, cd);
    /* the rule: every differential trial is the full run, its outputs and
     * its record bit for bit */
    int64_t same = 0;
    assert_int_equal(df.n, ex.n);
    for (int64_t j = 0; j < ex.n; j++) {
        size_t cells = (size_t)(samples * cols);
        if (memcmp(ex.out + j * cells, df.out + j * cells, cells * sizeof(float)) != 0)
            fail_msg("trial %lld: the differential engine's outputs differ from the exact engine's", (long long)j);
        same++;
        tc_assert_same_record(&ex.rec[j], &df.rec[j]);
    }
    printf("tiny_seg %s%s: %lld trials, %lld bit-identical in both engines; masked %lld tolerable %lld critical %lld due %lld; "
           "differential full passes %lld\n",
           target == BF_TARGET_WEIGHTS ? "weights" : "activations", critical_miou ? " (critical: miou)" : "", (long long)ex.n,
           (long long)same, (long long)cx[0], (long long)cx[1], (long long)cx[2], (long long)cx[3], (long long)rd.full_trials);
    assert_int_equal(same, ex.n);
    assert_true(cx[BF_OUTCOME_TOLERABLE] > 0);
    if (want_critical) assert_true(cx[BF_OUTCOME_CRITICAL] > 0);
    tc_kept_free(&ex);
    tc_kept_free(&df);
    bf_campaign_result_free(&rx);
    bf_campaign_result_free(&rd);
    tc_tally tally = {0};
    tc_both(m, ds, tc_out_scale(m, ds), "tiny_seg", &s, "seg", &tally, NULL);
    tc_assert_agree("segmentation", &tally, trials);
    free(golden);
    bf_dataset_free(ds);
    bf_model_free(m);
}

static void campaign_weights(void **state)
{
    (void)state;
    seg_campaign(BF_TARGET_WEIGHTS, BF_PERSIST_PERMANENT, 0, -1, 300, 4, 1);
    seg_campaign(BF_TARGET_WEIGHTS, BF_PERSIST_PERMANENT, 0, 0.2, 200, 4, 1);
}

static void campaign_miou(void **state)
{
    (void)state;
    seg_campaign(BF_TARGET_WEIGHTS, BF_PERSIST_PERMANENT, 1, -1, 300, 3, 1);
}

static void campaign_activations(void **state)
{
    (void)state;
    /* one element of one image: under 1% of its pixels move, none critical by default */
    seg_campaign(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT, 0, -1, 300, 4, 0);
    seg_campaign(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT, 0, 0, 300, 4, 1);
    seg_campaign(BF_TARGET_ACTIVATIONS, BF_PERSIST_PERMANENT, 0, 0, 200, 5, 1);
}

/* The spec's rules: pixels in [0, 1), for a segmentation task only; the
 * task's metrics apply to it only. */
static void spec_rules(void **state)
{
    (void)state;
    assert_int_equal(bf_metric_parse("miou"), BF_METRIC_MIOU);
    assert_int_equal(bf_metric_parse("pixel_accuracy"), BF_METRIC_PIXEL_ACCURACY);
    assert_int_equal(bf_metric_parse("map"), BF_METRIC_MAP);
    assert_int_equal(bf_metric_parse("map50"), BF_METRIC_MAP50);
    assert_int_equal(bf_metric_parse("recall"), BF_METRIC_RECALL);
    bf_model *m = NULL, *lm = NULL;
    bf_dataset *ds = NULL, *lds = NULL;
    bf_error err = {0};
    tc_open_files(DIR "tiny_seg.onnx", DIR "tiny_seg.eval.safetensors", &m, &ds);
    bf_campaign_spec s = tc_base_spec(4);
    s.trials = 4;
    bf_campaign *c = NULL;
    s.critical_pixels = 1, s.critical_pixels_set = 1;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "critical.pixels is 1"));
    s.critical_pixels_set = 0;
    s.critical_metric = BF_METRIC_ACCURACY;
    s.critical_delta = 0.1;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'accuracy' does not apply to a segmentation task"));
    s.critical_metric = BF_METRIC_MAP;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_EINVAL);
    /* pixels on a language model */
    tc_open_files(BF_FIXTURES "/lmtask/tiny_lm.onnx", BF_FIXTURES "/lmtask/tiny_lm.eval.safetensors", &lm, &lds);
    s.critical_metric = -1;
    s.critical_pixels = 0.1, s.critical_pixels_set = 1;
    assert_int_equal(bf_campaign_create(lm, lds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "critical.pixels applies to a segmentation task"));
    /* and detection's score threshold on a segmenter */
    s.critical_pixels_set = 0;
    s.critical_score = 0.3, s.critical_score_set = 1;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "critical.score_threshold applies to a detection task"));
    bf_dataset_free(lds);
    bf_model_free(lm);
    bf_dataset_free(ds);
    bf_model_free(m);
}

static void allocation_failures(void **state)
{
    (void)state;
    tc_task_alloc_failures(DIR "tiny_seg.onnx", DIR "tiny_seg.eval.safetensors");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_cases),
        cmocka_unit_test(against_reference),
        cmocka_unit_test(eval_tiny_seg),
        cmocka_unit_test(hostile_layouts),
        cmocka_unit_test(spec_rules),
        cmocka_unit_test(allocation_failures),
        cmocka_unit_test(campaign_weights),
        cmocka_unit_test(campaign_miou),
        cmocka_unit_test(campaign_activations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
