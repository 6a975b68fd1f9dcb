/* NMS near-ties (bitflip/eval.h, bf_nms_ties; docs/OPS.md, "NMS near-ties"):
 * what NonMaxSuppression records, per image, when the evaluator's caller
 * asks. A one-image graph, boxes [1, 4, 4] and scores [1, 1, 4] as its
 * inputs (fed image by image), one NonMaxSuppression (IoU threshold 0.5, at
 * most 10 boxes, score threshold 0.1), its selected indices the output.
 * Hand-worked images (score rtol 1e-5, atol 1e-7, IoU margin 1e-4, the
 * conformance runner's):
 *
 * - image 0: B [0,0,10,10.5] at 0.900005 and A [0,0,10,10] at 0.9, IoU
 *   100/105 > 0.5: B kept, A suppressed, 5e-6 apart, within 1e-5 x 0.900005:
 *   a near tie at B's score (C at 0.95, away, comes first; D at 0.5 after);
 * - image 1: the same with B at 0.8: 0.1 apart, no near tie;
 * - image 2: F [0,0,10,20] at 0.6 against A at 0.9: IoU exactly 100/200 =
 *   0.5, not > the threshold, so F is kept, a decision within the margin:
 *   a near tie at F's score;
 * - image 3: C, A, D and a box at 0.1000005, within 1e-5 x 0.1 of the
 *   score threshold 0.1 (in by rounding): a near tie at that score.
 *
 * With two NonMaxSuppressions in a row (the second on the same inputs, its
 * selection summed into the output), a near tie in the first of an image's
 * runs is reported as an earlier NMS's (2: every row after it), as a
 * detector's proposals are. Recording leaves the outputs as they were; a
 * record's allocation refused fails cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "bitflip/bitflip.h"
#include "onnx_graph.h"
#include "st_build.h"

#define N_IMG 4

static const float BOXES[N_IMG][4][4] = {
    {{20, 20, 30, 30}, {0, 0, 10, 10.5f}, {0, 0, 10, 10}, {40, 40, 50, 50}},
    {{20, 20, 30, 30}, {0, 0, 10, 10.5f}, {0, 0, 10, 10}, {40, 40, 50, 50}},
    {{20, 20, 30, 30}, {0, 0, 10, 10}, {0, 0, 10, 20}, {40, 40, 50, 50}},
    {{20, 20, 30, 30}, {0, 0, 10, 10}, {40, 40, 50, 50}, {60, 60, 70, 70}},
};
static const float SCORES[N_IMG][1][4] = {
    {{0.95f, 0.900005f, 0.9f, 0.5f}},
    {{0.95f, 0.8f, 0.9f, 0.5f}},
    {{0.95f, 0.9f, 0.6f, 0.5f}},
    {{0.95f, 0.9f, 0.5f, 0.1000005f}},
};

/* The graph: y = NonMaxSuppression(boxes, scores, 10, 0.5, 0.1), or with
 * two, y = its selection plus the second's (the same inputs, the same rows) */
static bf_model *nms_model(int two)
{
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "boxes", 1, 3, (int64_t[]){-1, 4, 4});
    g.ins[g.n_ins++] = tg_value_info(&g, "scores", 1, 3, (int64_t[]){-1, 1, 4});
    tg_init_i64(&g, "max_out", 1, (int64_t[]){1}, (int64_t[]){10});
    tg_init_f32(&g, "iou", 1, (int64_t[]){1}, (float[]){0.5f});
    tg_init_f32(&g, "thr", 1, (int64_t[]){1}, (float[]){0.1f});
    const char *in[5] = {"boxes", "scores", "max_out", "iou", "thr"};
    tg_node(&g, "NonMaxSuppression", "nms", in, 5, two ? "s1" : "y");
    if (two) {
        tg_node(&g, "NonMaxSuppression", "nms2", in, 5, "s2");
        tg_node(&g, "Add", "sum", (const char *[]){"s1", "s2"}, 2, "y");
    }
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 7, -1, NULL);
    g.opset = 13;
    bf_model *m = tg_load(&g, "nms_ties");
    return m;
}

static bf_dataset *images(void)
{
    th_st_tensor t[2] = {{"boxes", "F32", 3, {N_IMG, 4, 4}, BOXES, sizeof BOXES},
                         {"scores", "F32", 3, {N_IMG, 1, 4}, SCORES, sizeof SCORES}};
    size_t len;
    uint8_t *buf = th_st_build(t, 2, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, len, "nms.safetensors", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    free(buf);
    return ds;
}

/* Runs m on the images with the record (or none): the output's rows per
 * image into rows[], its values into y (room for 64). */
static void run(bf_model **m, const bf_dataset *ds, bf_nms_ties *t, int64_t rows[N_IMG], float *y)
{
    bf_error err = {0};
    if (bf_model_bind_dims(m, ds, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_evaluator *ev = NULL;
    bf_eval_opts eo = {.threads = 1, .nms_ties = t};
    if (bf_evaluator_create(*m, ds, &eo, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_eval_result r;
    if (bf_evaluator_run(ev, NULL, 0, &r, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(r.n_ragged, 1);
    const bf_ragged_output *o = &r.ragged[0];
    assert_true(o->offsets[N_IMG] <= 64);
    for (int i = 0; i < N_IMG; i++) rows[i] = (o->offsets[i + 1] - o->offsets[i]) / o->row_elems;
    memcpy(y, o->data, (size_t)o->offsets[N_IMG] * sizeof *y);
    bf_evaluator_free(ev);
}

static void one_nms(void **state)
{
    (void)state;
    bf_dataset *ds = images();
    bf_model *m = nms_model(0);
    bf_nms_ties *t = NULL;
    bf_error err = {0};
    if (bf_nms_ties_new(N_IMG, 1e-5, 1e-7, 1e-4, &t, &err) != BF_OK) fail_msg("%s", err.msg);
    int64_t rows[N_IMG], plain_rows[N_IMG];
    float y[64], plain[64];
    run(&m, ds, t, rows, y);
    run(&m, ds, NULL, plain_rows, plain);
    /* recording leaves the outputs as they were */
    assert_memory_equal(rows, plain_rows, sizeof rows);
    int64_t total = 0;
    for (int i = 0; i < N_IMG; i++) total += rows[i];
    assert_memory_equal(y, plain, (size_t)(total * 3) * sizeof *y);
    /* kept: image 0 C, B, D; 1 C, A, D; 2 C, A, F, D; 3 all four */
    assert_int_equal(rows[0], 3);
    assert_int_equal(rows[1], 3);
    assert_int_equal(rows[2], 4);
    assert_int_equal(rows[3], 4);
    float at;
    assert_int_equal(bf_nms_ties_at(t, 0, &at), 1);
    assert_true(at == 0.900005f);   /* B's, the kept one of the two */
    assert_int_equal(bf_nms_ties_at(t, 1, &at), 0);
    assert_int_equal(bf_nms_ties_at(t, 2, &at), 1);
    assert_true(at == 0.6f);       /* F's: its fate was the one within the margin */
    assert_int_equal(bf_nms_ties_at(t, 3, &at), 1);
    assert_true(at == 0.1000005f);  /* in by rounding at the score threshold */
    assert_int_equal(bf_nms_ties_at(t, N_IMG, &at), 0);   /* past the eval set: none */
    /* the near ties' regions (bf_nms_ties_region): the candidates linked to
     * a near decision's boxes by an IoU >= 0.5 - 1e-4, in any order.
     * Image 0: B and A (IoU 100/105); C and D overlap nothing. Image 2: A
     * and F (IoU 0.5). Image 3: the box at the threshold alone (it
     * overlaps nothing). Image 1: no near tie, no region. */
    static const float want_region[N_IMG][2] = {{0.900005f, 0.9f}, {0}, {0.9f, 0.6f}, {0.1000005f}};
    static const int64_t want_n[N_IMG] = {2, 0, 2, 1};
    for (int i = 0; i < N_IMG; i++) {
        const float *reg;
        assert_int_equal(bf_nms_ties_region(t, i, &reg), want_n[i]);
        for (int64_t k = 0; k < want_n[i]; k++) {
            int found = 0;
            for (int64_t q = 0; q < want_n[i]; q++) found += reg[q] == want_region[i][k];
            assert_int_equal(found, 1);
        }
    }
    bf_nms_ties_free(t);

    /* an allocation refused while recording (the per-box flags, the
     * region) fails the run cleanly; some count lets it through */
    int passed = 0;
    for (long n = 0; n < 400 && !passed; n++) {
        if (bf_nms_ties_new(N_IMG, 1e-5, 1e-7, 1e-4, &t, &err) != BF_OK) fail_msg("%s", err.msg);
        bf_evaluator *ev = NULL;
        bf_eval_opts eo = {.threads = 1, .nms_ties = t};
        if (bf_evaluator_create(m, ds, &eo, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
        bf_eval_result r;
        bf_test_alloc_fail_after(n);
        bf_status st = bf_evaluator_run(ev, NULL, 0, &r, &err);
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) {
            passed = 1;
            const float *reg;
            assert_int_equal(bf_nms_ties_region(t, 0, &reg), 2);
        } else {
            assert_int_equal(st, BF_ENOMEM);
        }
        bf_evaluator_free(ev);
        bf_nms_ties_free(t);
    }
    assert_true(passed);

    /* margins of 0: nothing but exact ties is within them (F's IoU is the threshold exactly) */
    if (bf_nms_ties_new(N_IMG, 0, 0, 0, &t, &err) != BF_OK) fail_msg("%s", err.msg);
    run(&m, ds, t, rows, y);
    assert_int_equal(bf_nms_ties_at(t, 0, &at), 0);
    assert_int_equal(bf_nms_ties_at(t, 2, &at), 1);
    assert_true(at == 0.6f);
    assert_int_equal(bf_nms_ties_at(t, 3, &at), 0);
    bf_nms_ties_free(t);
    bf_model_free(m);
    bf_dataset_free(ds);
}

static void two_nms(void **state)
{
    (void)state;
    bf_dataset *ds = images();
    bf_model *m = nms_model(1);
    bf_nms_ties *t = NULL;
    bf_error err = {0};
    if (bf_nms_ties_new(N_IMG, 1e-5, 1e-7, 1e-4, &t, &err) != BF_OK) fail_msg("%s", err.msg);
    int64_t rows[N_IMG];
    float y[64], at;
    run(&m, ds, t, rows, y);
    assert_int_equal(bf_nms_ties_at(t, 0, &at), 2);   /* the first NMS's near tie: every row */
    assert_int_equal(bf_nms_ties_at(t, 1, &at), 0);
    assert_int_equal(bf_nms_ties_at(t, 2, &at), 2);
    bf_nms_ties_free(t);
    bf_model_free(m);
    bf_dataset_free(ds);
}

static void refused(void **state)
{
    (void)state;
    bf_nms_ties *t = NULL;
    bf_error err = {0};
    assert_int_equal(bf_nms_ties_new(-1, 1e-4, 1e-5, 1e-4, &t, &err), BF_EINVAL);
    assert_int_equal(bf_nms_ties_new(4, -1, 1e-5, 1e-4, &t, &err), BF_EINVAL);
    assert_null(t);
    for (long n = 0; n < 2; n++) {   /* the record, then its samples */
        bf_test_alloc_fail_after(n);
        bf_status st = bf_nms_ties_new(4, 1e-4, 1e-5, 1e-4, &t, &err);
        bf_test_alloc_fail_after(-1);
        assert_int_equal(st, BF_ENOMEM);
        assert_null(t);
    }
    bf_nms_ties_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_nms),
        cmocka_unit_test(two_nms),
        cmocka_unit_test(refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
