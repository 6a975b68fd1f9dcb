/* Detection metrics as a library (exec/metrics_det.h): COCO mAP, AP50 and
 * AR, and the per-image outcome against golden detections, by hand
 * arithmetic and against a numpy reference written from the COCO
 * definitions (tests/fixtures/dettask/make_det_refs.py). */
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
#include "bitflip/dataset.h"
#include "exec/metrics_det.h"
#include "model/dataset_det.h"

#define assert_near(a, b, tol) near_((a), (b), (tol), __LINE__)
static void near_(double a, double b, double tol, int line)
{
    if (fabs(a - b) <= tol) return;
    fail_msg("line %d: %.17g != %.17g (tolerance %g)", line, a, b, tol);
}

static void iou_cases(void **state)
{
    (void)state;
    const float a[4] = {0, 0, 2, 1}, b[4] = {0, 0, 1, 1}, c[4] = {1, 0, 3, 1}, d[4] = {2, 0, 4, 1};
    assert_true(bf__det_iou(a, b) == 0.5);          /* exactly one half */
    assert_true(bf__det_iou(a, c) == 1.0 / 3.0);    /* overlap 1, union 3 */
    assert_true(bf__det_iou(a, d) == 0);            /* touching: no overlap */
    assert_true(bf__det_iou(a, a) == 1);
    const float e[4] = {0, NAN, 2, 1};
    assert_true(isnan(bf__det_iou(a, e)));
    const float f[4] = {2, 1, 0, 0};                 /* x2 < x1: overlaps nothing */
    assert_true(bf__det_iou(a, f) == 0);
}

/* Image 0: ground truth A (class 1); detections a1 = A (0.9), a2 = A (0.8,
 * a duplicate: a false positive at every threshold). Image 1: ground truth
 * B (class 1), detection b (0.7) of IoU exactly 0.5 with B: a match at
 * t = 0.5 only. Ranked a1, a2, b. At t = 0.5: precision 1, 1/2, 2/3 at
 * recall 1/2, 1/2, 1, made 1, 2/3, 2/3: the 51 recall points up to 0.5 read
 * 1, the 50 above 2/3, AP50 = (51 + 100/3) / 101 = 253/303. At t > 0.5: b
 * misses, recall stops at 1/2, AP = 51/101. mAP = (253/303 + 9 x 51/101) /
 * 10 = 163/303; recall (AR) = (1 + 9 x 0.5) / 10 = 0.55. */
static void hand_cases(void **state)
{
    (void)state;
    const float gb[] = {0, 0, 10, 10, 0, 0, 2, 1};
    const int64_t gl[] = {1, 1}, go[] = {0, 1, 2};
    const float pb[] = {0, 0, 10, 10, 0, 0, 10, 10, 0, 0, 1, 1};
    const float ps[] = {0.9f, 0.8f, 0.7f};
    const int64_t pl[] = {1, 1, 1}, po[] = {0, 2, 3};
    bf__dets p = {2, po, pb, ps, pl}, g = {2, go, gb, NULL, gl};
    bf__det_metrics r;
    bf_error err = {0};
    assert_int_equal(bf__det_evaluate(&p, &g, &r, &err), BF_OK);
    assert_near(r.map50, 253.0 / 303.0, 1e-15);
    assert_near(r.map, 163.0 / 303.0, 1e-15);
    assert_near(r.recall, 0.55, 1e-15);

    /* a detection of a class without ground truth changes nothing */
    const float pb2[] = {0, 0, 10, 10, 0, 0, 10, 10, 5, 5, 6, 6, 0, 0, 1, 1};
    const float ps2[] = {0.9f, 0.8f, 0.95f, 0.7f};
    const int64_t pl2[] = {1, 1, 7, 1}, po2[] = {0, 3, 4};
    bf__dets p2 = {2, po2, pb2, ps2, pl2};
    assert_int_equal(bf__det_evaluate(&p2, &g, &r, &err), BF_OK);
    assert_near(r.map, 163.0 / 303.0, 1e-15);

    /* a class with ground truth and no detection: AP and recall 0, halving the means */
    const float gb3[] = {0, 0, 10, 10, 0, 0, 2, 1, 3, 3, 4, 4};
    const int64_t gl3[] = {1, 1, 3}, go3[] = {0, 1, 3};
    bf__dets g3 = {2, go3, gb3, NULL, gl3};
    assert_int_equal(bf__det_evaluate(&p, &g3, &r, &err), BF_OK);
    assert_near(r.map, 163.0 / 606.0, 1e-15);
    assert_near(r.map50, 253.0 / 606.0, 1e-15);
    assert_near(r.recall, 0.275, 1e-15);

    /* no ground truth: NaN; no detections: 0 */
    const int64_t none[] = {0, 0, 0};
    bf__dets g0 = {2, none, gb, NULL, gl}, p0 = {2, none, pb, ps, pl};
    assert_int_equal(bf__det_evaluate(&p, &g0, &r, &err), BF_OK);
    assert_true(isnan(r.map) && isnan(r.map50) && isnan(r.recall));
    assert_int_equal(bf__det_evaluate(&p0, &g, &r, &err), BF_OK);
    assert_true(r.map == 0 && r.map50 == 0 && r.recall == 0);

    /* a NaN score ranks last: b first (0.7), then the NaN-scored a1, which
     * still matches A: at t = 0.5 precision 1, 1 at recall 1/2, 1: AP50 1 */
    const float ps4[] = {NAN, 0.7f};
    const float pb4[] = {0, 0, 10, 10, 0, 0, 1, 1};
    const int64_t pl4[] = {1, 1}, po4[] = {0, 1, 2};
    bf__dets p4 = {2, po4, pb4, ps4, pl4};
    assert_int_equal(bf__det_evaluate(&p4, &g, &r, &err), BF_OK);
    assert_near(r.map50, 1, 1e-15);
    /* the images must agree */
    bf__dets p5 = {1, po4, pb4, ps4, pl4};
    assert_int_equal(bf__det_evaluate(&p5, &g, &r, &err), BF_EINVAL);
}

static int critical_of(const bf__dets *g, const bf__dets *f, double thr)
{
    int c = -1;
    bf_error err = {0};
    assert_int_equal(bf__det_image_critical(g, f, 0, thr, &c, &err), BF_OK);
    return c;
}

static void outcome_cases(void **state)
{
    (void)state;
    /* golden: two boxes over 0.5, one under */
    const float gb[] = {0, 0, 10, 10, 20, 20, 30, 30, 40, 40, 45, 45};
    const float gs[] = {0.9f, 0.6f, 0.2f};
    const int64_t gl[] = {1, 2, 1}, go[] = {0, 3};
    bf__dets g = {1, go, gb, gs, gl};
    /* the same, in another order, moved a little, scores changed: tolerable */
    float fb[16] = {20.5f, 20, 30, 30.5f, 0, 0.5f, 10, 10, 40, 40, 45, 45};
    float fs[4] = {0.7f, 0.99f, 0.1f};
    int64_t fl[4] = {2, 1, 1}, fo[2] = {0, 3};
    bf__dets f = {1, fo, fb, fs, fl};
    assert_int_equal(critical_of(&g, &f, 0.5), 0);
    /* relabelled: critical */
    fl[0] = 1;
    assert_int_equal(critical_of(&g, &f, 0.5), 1);
    fl[0] = 2;
    /* the box under the threshold gone, or moved anywhere: tolerable */
    fo[1] = 2;
    assert_int_equal(critical_of(&g, &f, 0.5), 0);
    /* a golden box dropped below the threshold: missed, critical */
    fo[1] = 3;
    fs[0] = 0.4f;
    assert_int_equal(critical_of(&g, &f, 0.5), 1);
    /* ... but at a threshold of 0.3 both count: tolerable */
    assert_int_equal(critical_of(&g, &f, 0.3), 0);
    fs[0] = 0.7f;
    /* an extra box over the threshold: critical; its score NaN: critical too */
    fs[2] = 0.8f;
    assert_int_equal(critical_of(&g, &f, 0.5), 1);
    fs[2] = NAN;
    assert_int_equal(critical_of(&g, &f, 0.5), 1);
    fs[2] = 0.1f;
    /* a box moved so that IoU < 0.5: critical; a NaN coordinate: critical */
    fb[1] = 6;
    assert_int_equal(critical_of(&g, &f, 0.5), 1);
    fb[1] = NAN;
    assert_int_equal(critical_of(&g, &f, 0.5), 1);
    fb[1] = 20;
    assert_int_equal(critical_of(&g, &f, 0.5), 0);

    /* a matching a first-fit pairing misses: faulty f1 overlaps both golden
     * boxes at IoU 0.6, f2 only g1 (0.9); g1 -> f1 first would leave g2
     * nothing, the maximum matching pairs g1-f2, g2-f1: tolerable */
    const float hb[] = {0, 0, 10, 10, 5, 0, 15, 10};
    const float hs[] = {0.9f, 0.9f};
    const int64_t hl[] = {0, 0}, ho[] = {0, 2};
    bf__dets h = {1, ho, hb, hs, hl};
    const float kb[] = {2.5f, 0, 12.5f, 10, 0, 0, 9, 10};
    bf__dets k = {1, ho, kb, hs, hl};
    assert_int_equal(critical_of(&h, &k, 0.5), 0);
    /* and when no perfect matching exists: both faulty boxes only fit g1 */
    const float kb2[] = {0, 0, 9, 10, 1, 0, 10, 10};
    bf__dets k2 = {1, ho, kb2, hs, hl};
    assert_int_equal(critical_of(&h, &k2, 0.5), 1);
    /* nothing on either side: tolerable */
    const int64_t zo[] = {0, 0};
    bf__dets z = {1, zo, hb, hs, hl};
    assert_int_equal(critical_of(&z, &z, 0.5), 0);
}

/* A list of numbers (null: NaN) into a malloc'd array. */
static float *floats(json_t *a)
{
    size_t n = json_array_size(a);
    float *x = malloc(n * sizeof *x + 1);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        x[i] = json_is_null(v) ? NAN : (float)json_number_value(v);
    }
    return x;
}

static int64_t *ints(json_t *a)
{
    size_t n = json_array_size(a);
    int64_t *x = malloc(n * sizeof *x + 1);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = (int64_t)json_integer_value(json_array_get(a, i));
    return x;
}

static void against_reference(void **state)
{
    (void)state;
    json_error_t jerr;
    json_t *ref = json_load_file(BF_FIXTURES "/dettask/cases.json", 0, &jerr);
    if (!ref) fail_msg("%s", jerr.text);
    const char *key;
    json_t *c;
    int cases = 0;
    json_object_foreach(ref, key, c) {
        if (!strcmp(key, "blas")) continue;   /* the generator's BLAS (tests/fixtures/refjson.py), not a case */
        float *b = floats(json_object_get(c, "boxes")), *s = floats(json_object_get(c, "scores"));
        float *gb = floats(json_object_get(c, "gt_boxes")), *fb = floats(json_object_get(c, "f_boxes"));
        float *fs = floats(json_object_get(c, "f_scores"));
        int64_t *l = ints(json_object_get(c, "labels")), *o = ints(json_object_get(c, "offsets"));
        int64_t *gl = ints(json_object_get(c, "gt_labels")), *go = ints(json_object_get(c, "gt_offsets"));
        int64_t *fl = ints(json_object_get(c, "f_labels")), *fo = ints(json_object_get(c, "f_offsets"));
        int64_t n = (int64_t)json_array_size(json_object_get(c, "offsets")) - 1;
        bf__dets p = {n, o, b, s, l}, g = {n, go, gb, NULL, gl}, f = {n, fo, fb, fs, fl};
        bf__det_metrics r;
        bf_error err = {0};
        assert_int_equal(bf__det_evaluate(&p, &g, &r, &err), BF_OK);
        printf("case %s: map %.17g map50 %.17g recall %.17g\n", key, r.map, r.map50, r.recall);
        assert_near(r.map, json_real_value(json_object_get(c, "map")), 1e-12);
        assert_near(r.map50, json_real_value(json_object_get(c, "map50")), 1e-12);
        assert_near(r.recall, json_real_value(json_object_get(c, "recall")), 1e-12);
        json_t *crit = json_object_get(c, "critical");
        int64_t total = 0, want = 0;
        for (int64_t i = 0; i < n; i++) {
            int ci;
            assert_int_equal(bf__det_image_critical(&p, &f, i, BF_DET_SCORE_THRESHOLD_DEFAULT, &ci, &err), BF_OK);
            if (ci != json_integer_value(json_array_get(crit, (size_t)i)))
                fail_msg("case %s image %lld: critical %d, the reference says %lld", key, (long long)i, ci,
                         (long long)json_integer_value(json_array_get(crit, (size_t)i)));
            want += ci;
        }
        assert_int_equal(bf__det_critical_images(&p, &f, BF_DET_SCORE_THRESHOLD_DEFAULT, &total, &err), BF_OK);
        assert_int_equal(total, want);
        assert_true(want > 0 && want < n);
        free(b), free(s), free(gb), free(fb), free(fs), free(l), free(o), free(gl), free(go), free(fl), free(fo);
        cases++;
    }
    assert_int_equal(cases, 4);
    json_decref(ref);
}

/* --- the ground truth's layout in an eval set: safetensors built here */


/* Loading these tensors gives `want`, and a message holding `needle`. */
static void load_gives(const th_st_tensor *t, int n, bf_status want, const char *needle)
{
    size_t len;
    uint8_t *buf = th_st_build(t, n, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    bf_status st = bf_dataset_load_buffer(buf, len, "hostile", &ds, &err);
    if (st != want || (needle && !strstr(err.msg, needle)))
        fail_msg("wanted status %d with '%s', got %d: %s", want, needle ? needle : "", st, err.msg);
    if (st != BF_OK) printf("refused: %s\n", err.msg);
    bf_dataset_free(ds);
    free(buf);
}

static void ground_truth_layout(void **state)
{
    (void)state;
    /* 3 images of 2x2, 4 boxes: image 0 owns rows 0-1, image 1 none, image 2 rows 2-3 */
    static float img[3 * 3 * 2 * 2];
    float boxes[16] = {0, 0, 1, 1, 0.5f, 0.5f, 2, 2, 1, 1, 1, 1, 0, 0, 2, 2};
    int64_t labels[4] = {1, 2, 0, 7}, offsets[4] = {0, 2, 2, 4};
    int32_t labels32[4] = {1, 2, 0, 7};
    th_st_tensor in = {"images", "F32", 4, {3, 3, 2, 2}, img, sizeof img};
    th_st_tensor gb = {"gt_boxes", "F32", 2, {4, 4}, boxes, sizeof boxes};
    th_st_tensor gl = {"gt_labels", "I64", 1, {4}, labels, sizeof labels};
    th_st_tensor go = {"gt_offsets", "I64", 1, {4}, offsets, sizeof offsets};

    th_st_tensor ok[] = {gb, gl, go, in};   /* the ground truth first: the samples come from 'images' */
    size_t len;
    uint8_t *buf = th_st_build(ok, 4, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, len, "ok", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_dataset_num_samples(ds), 3);
    bf__det_gt gt;
    assert_int_equal(bf__dataset_det_gt(ds, &gt, &err), BF_OK);
    assert_true(gt.n == 3 && gt.k == 4 && gt.offsets[3] == 4 && gt.labels[3] == 7 && gt.boxes[5] == 0.5f);
    bf_dataset_free(ds);
    free(buf);
    /* no ground truth: not found */
    th_st_tensor plain[] = {in};
    buf = th_st_build(plain, 1, &len);
    if (bf_dataset_load_buffer(buf, len, "plain", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf__dataset_det_gt(ds, &gt, &err), BF_ENOTFOUND);
    bf_dataset_free(ds);
    free(buf);
    /* a detection set of ground truth alone: its offsets count the images */
    th_st_tensor alone[] = {gb, gl, go};
    load_gives(alone, 3, BF_OK, NULL);

    /* one of the three missing */
    th_st_tensor t1[] = {in, gb, go};
    load_gives(t1, 3, BF_EFORMAT, "'gt_labels' is missing");
    /* dtypes and shapes */
    th_st_tensor t2[] = {in, gb, {"gt_labels", "I32", 1, {4}, labels32, sizeof labels32}, go};
    load_gives(t2, 4, BF_EFORMAT, "tensor 'gt_labels' is int32; it must be int64");
    th_st_tensor t3[] = {in, {"gt_boxes", "F32", 2, {4, 4}, boxes, sizeof boxes}, {"gt_labels", "I64", 1, {3}, labels, 24}, go};
    load_gives(t3, 4, BF_ESHAPE, "'gt_labels' has shape [3]; it must be [4]");
    th_st_tensor t4[] = {in, {"gt_boxes", "F32", 2, {8, 2}, boxes, sizeof boxes}, gl, go};
    load_gives(t4, 4, BF_ESHAPE, "'gt_boxes' has shape [8, 2]; it must be [K, 4]");
    /* N + 1 offsets, N the input's samples */
    th_st_tensor t5[] = {in, gb, gl, {"gt_offsets", "I64", 1, {3}, offsets, 24}};
    load_gives(t5, 4, BF_ESHAPE, "'gt_offsets' has shape [3]; it must be [4], one more than the 3 samples");
    /* offsets: not from 0, decreasing, not ending at K */
    offsets[0] = 1;
    load_gives(ok, 4, BF_ERANGE, "gt_offsets[0] is 1");
    offsets[0] = 0, offsets[2] = 1;
    load_gives(ok, 4, BF_ERANGE, "gt_offsets[2] is 1, below gt_offsets[1] = 2");
    offsets[2] = 2, offsets[3] = 3;
    load_gives(ok, 4, BF_ERANGE, "gt_offsets[3] is 3; the last offset must be 4");
    offsets[3] = 5;
    load_gives(ok, 4, BF_ERANGE, "gt_offsets[3] is 5");
    offsets[3] = -1;
    load_gives(ok, 4, BF_ERANGE, "gt_offsets[3] is -1, below");
    offsets[3] = 4;
    /* boxes: negative, NaN, infinite, x2 < x1; labels negative */
    boxes[9] = -1;
    load_gives(ok, 4, BF_ERANGE, "gt_boxes[2] is [1, -1, 1, 1]: a coordinate is negative");
    boxes[9] = NAN;
    load_gives(ok, 4, BF_ERANGE, "gt_boxes[2] is [1, nan, 1, 1]: a coordinate is not finite");
    boxes[9] = INFINITY;
    load_gives(ok, 4, BF_ERANGE, "not finite");
    boxes[9] = 1;
    boxes[6] = 0.25f;
    load_gives(ok, 4, BF_ERANGE, "gt_boxes[1] is [0.5, 0.5, 0.25, 2]: x2 < x1");
    boxes[6] = 2;
    labels[1] = -3;
    load_gives(ok, 4, BF_ERANGE, "gt_labels[1] is -3");
    labels[1] = 2;
    /* the input tensors' own rule still holds among themselves */
    th_st_tensor t6[] = {in, gb, gl, go, {"other", "F32", 1, {2}, img, 8}};
    load_gives(t6, 5, BF_EFORMAT, "first dimension is the sample");
    load_gives(ok, 4, BF_OK, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(iou_cases),
        cmocka_unit_test(hand_cases),
        cmocka_unit_test(outcome_cases),
        cmocka_unit_test(against_reference),
        cmocka_unit_test(ground_truth_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
