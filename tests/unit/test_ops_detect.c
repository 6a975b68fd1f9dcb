/* NonMaxSuppression and RoiAlign (core/src/exec/ops/detect*.c) run as a plan
 * runs a step whose output shape is data: prepare with at_run = 1 and every
 * input's data, then run. Checked against cases worked out by hand (IoU
 * exactly at the threshold, score threshold, classes and batches, the
 * per-class cut, centre-size boxes, flipped corners, NaN scores and
 * coordinates, ties), against plain references written here from the spec
 * on random inputs and from torchvision's kernel loop on thousands of boxes
 * of offset classes with faulty coordinates (what the op's index by x must
 * equal), and on hostile inputs (rois with NaN, Inf, 1e30
 * coordinates, negative sizes, batch indices out of range, mismatched
 * shapes), which must give a clear error or the defined output, never a
 * crash. tests/ops/cases/detect.py compares both ops with torchvision. And
 * the differential engine through RoiAlign (tests/fixtures/detect/roi_head_op13,
 * made by tests/fixtures/make_detect_models.py: Conv, ReLU, two exported
 * torchvision roi_aligns, Linear) against full re-execution, as test_diff_nn.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "campaign_check.h"
#include "op_harness.h"

/* ---- running one op as a step prepared at run time ---- */

typedef struct run_out {
    bf_status st;
    bf_tensor y;
    bf_error err;
    int data_dependent;
} run_out;

/* prepare (at_run given) and, if it set the output, run. */
static run_out run_op(const char *op_name, int64_t opset, bf__attr *attrs, size_t n_attrs, const bf_tensor *const *in,
                      int n_in, int at_run)
{
    run_out r;
    memset(&r, 0, sizeof r);
    const bf__op *op = bf__op_find(op_name);
    assert_non_null(op);
    bf__node node = {0};
    node.name = (char *)"det";
    node.op_type = (char *)op_name;
    node.op = op;
    node.n_in = n_in;
    node.n_out = 1;
    node.n_attrs = n_attrs;
    node.attrs = attrs;
    bf__prep *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->node = &node;
    p->opset = opset;
    p->n_in = n_in;
    p->n_out = 1;
    p->at_run = at_run;
    for (int i = 0; i < n_in; i++) p->in[i] = in[i];
    p->out[0] = &r.y;
    r.st = op->prepare(p, &r.err);
    r.data_dependent = p->data_dependent;
    if (r.st != BF_OK || p->data_dependent) { free(p); return r; }
    size_t nb = bf_tensor_nbytes(&r.y);
    r.y.data = calloc(1, nb ? nb : 1);
    void *scratch = calloc(1, p->scratch ? p->scratch : 1);
    assert_true(r.y.data && scratch);
    bf_tensor *outs[1] = {&r.y};
    bf__ctx c = {.node = &node, .params = p->params, .n_in = n_in, .n_out = 1, .in = in, .out = outs,
                 .scratch = scratch};
    r.st = op->run(&c, &r.err);
    free(scratch);
    free(p);
    return r;
}

static void run_free(run_out *r) { free(r->y.data); r->y.data = NULL; }

/* ---- NonMaxSuppression ---- */

typedef struct nms_case {
    int64_t nb, ncls, nbox;
    const float *boxes, *scores;
    int64_t max_out;        /* -1000: input absent */
    float iou;              /* NAN: absent */
    float score;            /* NAN: absent */
    int center;
} nms_case;

static run_out nms(const nms_case *k)
{
    int64_t bd[3] = {k->nb, k->nbox, 4}, sd[3] = {k->nb, k->ncls, k->nbox}, one[1] = {1};
    bf_tensor b = th_tensor_f32(k->boxes, 3, bd), s = th_tensor_f32(k->scores, 3, sd);
    bf_tensor m = th_tensor_i64(&k->max_out, 1, one), io = th_tensor_f32(&k->iou, 0, one),
              sc = th_tensor_f32(&k->score, 0, one);
    const bf_tensor *in[5] = {&b, &s, k->max_out == -1000 ? NULL : &m, isnan(k->iou) ? NULL : &io,
                              isnan(k->score) ? NULL : &sc};
    bf__attr a = th_attr_int("center_point_box", k->center);
    run_out r = run_op("NonMaxSuppression", 13, &a, 1, in, 5, 1);
    th_tensor_free(&b); th_tensor_free(&s); th_tensor_free(&m); th_tensor_free(&io); th_tensor_free(&sc);
    return r;
}

/* The selection is exactly `want` (rows of batch, class, box). */
static void want_rows(const nms_case *k, const int64_t *want, int64_t rows)
{
    run_out r = nms(k);
    if (r.st != BF_OK) fail_msg("%s", r.err.msg);
    assert_int_equal(r.y.dtype, BF_I64);
    assert_int_equal(r.y.ndim, 2);
    assert_int_equal(r.y.dims[1], 3);
    if (r.y.dims[0] != rows) {
        const int64_t *g = r.y.data;
        for (int64_t i = 0; i < r.y.dims[0]; i++) print_message("got %lld %lld %lld\n", (long long)g[3 * i],
                                                               (long long)g[3 * i + 1], (long long)g[3 * i + 2]);
        fail_msg("%lld rows, want %lld", (long long)r.y.dims[0], (long long)rows);
    }
    if (rows) assert_memory_equal(r.y.data, want, (size_t)rows * 3 * sizeof(int64_t));
    run_free(&r);
}

static void nms_overlap(void **state)
{
    (void)state;
    /* A and B overlap with IoU 81/119, C is apart */
    const float boxes[] = {0, 0, 10, 10, 1, 1, 11, 11, 20, 20, 30, 30};
    const float scores[] = {0.9f, 0.8f, 0.7f};
    nms_case k = {1, 1, 3, boxes, scores, 10, 0.5f, NAN, 0};
    const int64_t w1[] = {0, 0, 0, 0, 0, 2};
    want_rows(&k, w1, 2);
    /* above 81/119 = 0.6807 nothing overlaps enough */
    k.iou = 0.69f;
    const int64_t w2[] = {0, 0, 0, 0, 0, 1, 0, 0, 2};
    want_rows(&k, w2, 3);
    /* iou_threshold absent is 0: any overlap suppresses, touching does not */
    const float touch[] = {0, 0, 1, 1, 1, 0, 2, 1, 0.5f, 0.5f, 1.5f, 1.5f};
    nms_case t = {1, 1, 3, touch, scores, 10, NAN, NAN, 0};
    const int64_t w3[] = {0, 0, 0, 0, 0, 1};
    want_rows(&t, w3, 2);
}

static void nms_iou_at_threshold(void **state)
{
    (void)state;
    /* inter 2, union 4: IoU exactly 0.5, which is not > 0.5 */
    const float boxes[] = {0, 0, 3, 1, 1, 0, 4, 1};
    const float scores[] = {0.9f, 0.8f};
    nms_case k = {1, 1, 2, boxes, scores, 10, 0.5f, NAN, 0};
    const int64_t both[] = {0, 0, 0, 0, 0, 1};
    want_rows(&k, both, 2);
    k.iou = 0.49f;
    want_rows(&k, both, 1);
}

static void nms_score_threshold(void **state)
{
    (void)state;
    const float boxes[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7};
    const float scores[] = {0.5f, 0.7f, 0.51f, NAN};
    /* > 0.5 strictly; a NaN score is never > it */
    nms_case k = {1, 1, 4, boxes, scores, 10, 0.5f, 0.5f, 0};
    const int64_t w[] = {0, 0, 1, 0, 0, 2};
    want_rows(&k, w, 2);
    /* without a threshold NaN counts as the largest score (torch.sort) */
    k.score = NAN;
    const int64_t w2[] = {0, 0, 3, 0, 0, 1, 0, 0, 2, 0, 0, 0};
    want_rows(&k, w2, 4);
}

static void nms_classes_batches(void **state)
{
    (void)state;
    /* 2 batches of 3 boxes, 2 classes: box 0 and 1 overlap (IoU 81/119) */
    const float boxes[] = {0, 0, 10, 10, 1, 1, 11, 11, 20, 20, 30, 30,
                           0, 0, 10, 10, 50, 50, 60, 60, 0, 0, 10, 9};
    const float scores[] = {0.9f, 0.8f, 0.7f,  0.1f, 0.95f, 0.2f,
                            0.3f, 0.6f, 0.9f,  0.5f, 0.4f, 0.45f};
    nms_case k = {2, 2, 3, boxes, scores, 10, 0.5f, NAN, 0};
    const int64_t w[] = {0, 0, 0, 0, 0, 2,
                         0, 1, 1, 0, 1, 2,
                         1, 0, 2, 1, 0, 1,
                         1, 1, 0, 1, 1, 1};
    want_rows(&k, w, 8);
    /* at most one per batch and class: the best of each */
    k.max_out = 1;
    const int64_t w1[] = {0, 0, 0, 0, 1, 1, 1, 0, 2, 1, 1, 0};
    want_rows(&k, w1, 4);
}

static void nms_center_and_flipped(void **state)
{
    (void)state;
    /* [x_c, y_c, w, h]: the boxes of nms_overlap */
    const float cb[] = {5, 5, 10, 10, 6, 6, 10, 10, 25, 25, 10, 10};
    const float scores[] = {0.9f, 0.8f, 0.7f};
    nms_case k = {1, 1, 3, cb, scores, 10, 0.5f, NAN, 1};
    const int64_t w[] = {0, 0, 0, 0, 0, 2};
    want_rows(&k, w, 2);
    /* corners in either order are put in order (the spec): the same box */
    const float fb[] = {10, 10, 0, 0, 0, 10, 10, 0, 20, 20, 30, 30};
    nms_case f = {1, 1, 3, fb, scores, 10, 0.5f, NAN, 0};
    want_rows(&f, w, 2);
}

static void nms_ties_and_cut(void **state)
{
    (void)state;
    /* equal scores: lower index first; identical boxes: the lower index is kept */
    const float boxes[] = {0, 0, 1, 1, 5, 5, 6, 6, 5, 5, 6, 6, 9, 9, 10, 10};
    const float scores[] = {0.5f, 0.5f, 0.5f, 0.5f};
    nms_case k = {1, 1, 4, boxes, scores, 10, 0.5f, NAN, 0};
    const int64_t w[] = {0, 0, 0, 0, 0, 1, 0, 0, 3};
    want_rows(&k, w, 3);
    k.max_out = 2;
    want_rows(&k, w, 2);
    /* absent, 0 or negative: no box at all (the spec; ONNX Runtime) */
    k.max_out = 0;
    want_rows(&k, w, 0);
    k.max_out = -5;
    want_rows(&k, w, 0);
    k.max_out = -1000;
    want_rows(&k, w, 0);
}

static void nms_empty_and_nan_boxes(void **state)
{
    (void)state;
    nms_case e = {1, 1, 0, NULL, NULL, 10, 0.5f, NAN, 0};
    want_rows(&e, NULL, 0);
    /* a box with a NaN corner neither suppresses nor is suppressed (its area is NaN);
     * one with Inf corners has an IoU of 0 with finite boxes */
    const float boxes[] = {0, 0, 10, 10, NAN, 0, 10, 10, 0, 0, 10, 10, 0, 0, INFINITY, INFINITY};
    const float scores[] = {0.9f, 0.8f, 0.7f, 0.6f};
    nms_case k = {1, 1, 4, boxes, scores, 10, 0.5f, NAN, 0};
    const int64_t w[] = {0, 0, 0, 0, 0, 1, 0, 0, 3};
    want_rows(&k, w, 3);
}

/* A plain reference, shaped as ONNX Runtime's kernel: per batch and class,
 * repeatedly take the best remaining candidate (NaN first, then score, then
 * index) and keep it unless it overlaps a kept one too much. */
static int ref_suppress(const float *a, const float *b, float thr)
{
    float ax1 = fminf(a[0], a[2]), ax2 = fmaxf(a[0], a[2]), ay1 = fminf(a[1], a[3]), ay2 = fmaxf(a[1], a[3]);
    float bx1 = fminf(b[0], b[2]), bx2 = fmaxf(b[0], b[2]), by1 = fminf(b[1], b[3]), by2 = fmaxf(b[1], b[3]);
    float iw = fminf(ax2, bx2) - fmaxf(ax1, bx1), ih = fminf(ay2, by2) - fmaxf(ay1, by1);
    if (iw <= 0 || ih <= 0) return 0;
    float inter = iw * ih, ua = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter;
    return inter / ua > thr;
}

static int64_t ref_nms(const nms_case *k, int64_t *out)
{
    int64_t rows = 0;
    char *used = calloc((size_t)k->nbox + 1, 1);
    int64_t *kept = calloc((size_t)k->nbox + 1, sizeof *kept);
    for (int64_t b = 0; b < k->nb; b++)
        for (int64_t c = 0; c < k->ncls; c++) {
            const float *s = k->scores + (b * k->ncls + c) * k->nbox, *bx = k->boxes + b * k->nbox * 4;
            int64_t nk = 0;
            memset(used, 0, (size_t)k->nbox);
            for (;;) {
                int64_t best = -1;
                for (int64_t i = 0; i < k->nbox; i++) {
                    if (used[i] || (!isnan(k->score) && !(s[i] > k->score))) continue;
                    if (best < 0 || (isnan(s[i]) && !isnan(s[best])) || (!isnan(s[best]) && s[i] > s[best])) best = i;
                }
                if (best < 0 || nk == k->max_out) break;
                used[best] = 1;
                int ok = 1;
                for (int64_t j = 0; j < nk && ok; j++) ok = !ref_suppress(bx + 4 * kept[j], bx + 4 * best, k->iou);
                if (!ok) continue;
                kept[nk++] = best;
                out[3 * rows] = b; out[3 * rows + 1] = c; out[3 * rows + 2] = best;
                rows++;
            }
        }
    free(used);
    free(kept);
    return rows;
}

static float frand(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0);
}

static void nms_random_vs_reference(void **state)
{
    (void)state;
    uint64_t seed = 12345;
    for (int trial = 0; trial < 40; trial++) {
        int64_t nb = 1 + trial % 3, ncls = 1 + trial % 4, nbox = 1 + (trial * 7) % 60;
        float *boxes = malloc(sizeof(float) * (size_t)(nb * nbox * 4));
        float *scores = malloc(sizeof(float) * (size_t)(nb * ncls * nbox));
        int64_t *want = malloc(sizeof(int64_t) * 3 * (size_t)(nb * ncls * nbox + 1));
        for (int64_t i = 0; i < nb * nbox; i++) {
            float x = frand(&seed) * 50, y = frand(&seed) * 50, w = 1 + frand(&seed) * 20, h = 1 + frand(&seed) * 20;
            float *o = boxes + 4 * i;
            o[0] = x; o[1] = y; o[2] = x + w; o[3] = y + h;
            if (trial % 5 == 4 && i % 3 == 0) { o[0] = x + w; o[2] = x; }   /* flipped */
        }
        for (int64_t i = 0; i < nb * ncls * nbox; i++)
            scores[i] = trial % 2 ? (float)(int)(frand(&seed) * 4) / 4 : frand(&seed);   /* odd trials: many ties */
        nms_case k = {nb, ncls, nbox, boxes, scores, 1 + trial % 9, 0.1f + 0.05f * (float)(trial % 12),
                      trial % 3 == 0 ? 0.3f : NAN, 0};
        int64_t rows = ref_nms(&k, want);
        want_rows(&k, want, rows);
        free(boxes); free(scores); free(want);
    }
}

/* The kernel's own loop, written plainly (torchvision's CPU nms: candidates
 * in score order, NaN first and ties by index; each kept box suppresses
 * every later one whose IoU, in its std::max/std::min expressions, is > the
 * threshold), for one batch and class with corners already in order. The op
 * finds the boxes a kept box may suppress through an index by x (detect.c,
 * x_index) instead of looking at all; this is the loop it must equal. */
static float k_max(float a, float b) { return a < b ? b : a; }
static float k_min(float a, float b) { return b < a ? b : a; }

static int64_t kernel_nms(const float *c, const float *s, int64_t n, float thr, int64_t *keep)
{
    int64_t *order = malloc(sizeof *order * (size_t)(n + 1)), m = 0, kept = 0;
    char *supp = calloc((size_t)n + 1, 1);
    for (int64_t i = 0; i < n; i++) order[m++] = i;
    for (int64_t a = 1; a < m; a++)   /* insertion sort: stable */
        for (int64_t b = a; b > 0; b--) {
            float x = s[order[b]], y = s[order[b - 1]];
            int before = isnan(x) ? !isnan(y) : (!isnan(y) && x > y);
            if (!before) break;
            int64_t t = order[b]; order[b] = order[b - 1]; order[b - 1] = t;
        }
    for (int64_t ii = 0; ii < m; ii++) {
        int64_t i = order[ii];
        if (supp[i]) continue;
        keep[kept++] = i;
        const float *ci = c + 4 * i;
        float ai = (ci[2] - ci[0]) * (ci[3] - ci[1]);
        for (int64_t jj = ii + 1; jj < m; jj++) {
            int64_t j = order[jj];
            if (supp[j]) continue;
            const float *cj = c + 4 * j;
            float w = k_max(0.0f, k_min(ci[2], cj[2]) - k_max(ci[0], cj[0]));
            float h = k_max(0.0f, k_min(ci[3], cj[3]) - k_max(ci[1], cj[1]));
            float inter = w * h, aj = (cj[2] - cj[0]) * (cj[3] - cj[1]);
            if (inter / (ai + aj - inter) > thr) supp[j] = 1;
        }
    }
    free(order);
    free(supp);
    return kept;
}

/* What the exported detectors give it: thousands of boxes of many classes,
 * each class offset apart (batched_nms when tracing), untrained scores full
 * of ties, and the boxes faults make (NaN, infinities, 1e30, a box as wide
 * as every class); against kernel_nms. */
static void nms_many_boxes_vs_kernel(void **state)
{
    (void)state;
    uint64_t seed = 777;
    const float thr[] = {0.0f, 0.45f, 0.5f, 1.0f};
    for (int trial = 0; trial < 8; trial++) {
        int64_t nbox = 500 + 400 * trial, classes = 1 + trial * 5;
        float *boxes = malloc(sizeof(float) * (size_t)(nbox * 4)), *scores = malloc(sizeof(float) * (size_t)nbox);
        int64_t *want = malloc(sizeof(int64_t) * (size_t)(nbox + 1)), *rows = malloc(sizeof(int64_t) * 3 * (size_t)(nbox + 1));
        for (int64_t i = 0; i < nbox; i++) {
            float off = (float)(i % classes) * 321.0f;
            float x = frand(&seed) * 300, y = frand(&seed) * 300, w = 1 + frand(&seed) * 60, h = 1 + frand(&seed) * 60;
            float *o = boxes + 4 * i;
            o[0] = off + x; o[1] = off + y; o[2] = off + x + w; o[3] = off + y + h;
            float u = frand(&seed);
            if (trial >= 2 && u < 0.01f) o[(int)(frand(&seed) * 4) & 3] = NAN;
            else if (trial >= 2 && u < 0.02f) o[2] = INFINITY;
            else if (trial >= 2 && u < 0.03f) o[0] = -INFINITY;
            else if (trial >= 2 && u < 0.04f) o[2] = 1e30f;
            else if (trial >= 2 && u < 0.045f) { o[0] = -5; o[2] = (float)classes * 321.0f; }   /* spans every class */
            scores[i] = trial % 2 ? (float)(int)(frand(&seed) * 8) / 8 : frand(&seed);
            if (trial >= 4 && u > 0.99f) scores[i] = NAN;
        }
        /* corners as the op puts them in order (min_max: NaN leaves the pair) */
        float *c = malloc(sizeof(float) * (size_t)(nbox * 4));
        for (int64_t i = 0; i < nbox; i++) {
            const float *v = boxes + 4 * i;
            float *o = c + 4 * i;
            if (v[0] >= v[2]) { o[0] = v[2]; o[2] = v[0]; } else { o[0] = v[0]; o[2] = v[2]; }
            if (v[1] >= v[3]) { o[1] = v[3]; o[3] = v[1]; } else { o[1] = v[1]; o[3] = v[3]; }
        }
        float t = thr[trial % 4];
        int64_t n = kernel_nms(c, scores, nbox, t, want);
        for (int64_t r = 0; r < n; r++) rows[3 * r] = 0, rows[3 * r + 1] = 0, rows[3 * r + 2] = want[r];
        nms_case k = {1, 1, nbox, boxes, scores, nbox, t, NAN, 0};
        want_rows(&k, rows, n);
        free(boxes); free(scores); free(want); free(rows); free(c);
    }
}

static void nms_errors_and_data_dependence(void **state)
{
    (void)state;
    const float boxes[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
    const float scores[] = {0.1f, 0.2f, 0.3f, 0.4f};
    int64_t bd[3] = {1, 3, 4}, sd[3] = {1, 1, 4}, one[1] = {1};
    bf_tensor b = th_tensor_f32(boxes, 3, bd), s = th_tensor_f32(scores, 3, sd);
    const bf_tensor *in[2] = {&b, &s};
    run_out r = run_op("NonMaxSuppression", 13, NULL, 0, in, 2, 1);
    assert_int_not_equal(r.st, BF_OK);
    assert_non_null(strstr(r.err.msg, "scores are [1, 1, 4] with boxes [1, 3, 4]"));
    assert_non_null(strstr(r.err.msg, "'det'"));
    th_tensor_free(&s);
    sd[2] = 3;
    s = th_tensor_f32(scores, 3, sd);
    float bad = 1.5f;
    int64_t mx = 5;
    bf_tensor io = th_tensor_f32(&bad, 0, one), m = th_tensor_i64(&mx, 1, one);
    const bf_tensor *in4[4] = {&b, &s, &m, &io};
    r = run_op("NonMaxSuppression", 13, NULL, 0, in4, 4, 1);
    assert_int_not_equal(r.st, BF_OK);
    assert_non_null(strstr(r.err.msg, "iou_threshold is 1.5"));
    bf__attr a = th_attr_int("center_point_box", 2);
    r = run_op("NonMaxSuppression", 13, &a, 1, in, 2, 1);
    assert_non_null(strstr(r.err.msg, "center_point_box is 2"));
    /* at plan time with run-time boxes: data-dependent, no output shape yet */
    bf_tensor nodata = b;
    nodata.data = NULL;
    const bf_tensor *in_nd[2] = {&nodata, &s};
    r = run_op("NonMaxSuppression", 13, NULL, 0, in_nd, 2, 0);
    assert_int_equal(r.st, BF_OK);
    assert_int_equal(r.data_dependent, 1);
    assert_int_equal(r.y.ndim, 0);
    /* every input known at plan time: the shape is exact then */
    th_tensor_free(&io);
    io = th_tensor_f32(&(float){0.5f}, 0, one);
    r = run_op("NonMaxSuppression", 13, NULL, 0, in4, 4, 0);
    assert_int_equal(r.st, BF_OK);
    assert_int_equal(r.data_dependent, 0);
    assert_int_equal(r.y.dims[0], 3);
    run_free(&r);
    th_tensor_free(&b); th_tensor_free(&s); th_tensor_free(&io); th_tensor_free(&m);
}

/* ---- RoiAlign ---- */

typedef struct ra_case {
    int64_t n, c, h, w, r;
    const float *x, *rois;
    const int64_t *bi;
    int64_t oh, ow, sr;
    float scale;
    const char *mode, *ctm;   /* NULL: the attribute absent */
    int64_t opset;
} ra_case;

static run_out roialign(const ra_case *k)
{
    int64_t xd[4] = {k->n, k->c, k->h, k->w}, rd[2] = {k->r, 4}, bd[1] = {k->r};
    bf_tensor x = th_tensor_f32(k->x, 4, xd), r = th_tensor_f32(k->rois, 2, rd), b = th_tensor_i64(k->bi, 1, bd);
    const bf_tensor *in[3] = {&x, &r, &b};
    bf__attr a[6];
    size_t na = 0;
    a[na++] = th_attr_int("output_height", k->oh);
    a[na++] = th_attr_int("output_width", k->ow);
    a[na++] = th_attr_int("sampling_ratio", k->sr);
    a[na++] = th_attr_float("spatial_scale", k->scale);
    if (k->mode) a[na++] = th_attr_string("mode", k->mode);
    if (k->ctm) a[na++] = th_attr_string("coordinate_transformation_mode", k->ctm);
    run_out o = run_op("RoiAlign", k->opset, a, na, in, 3, 1);
    th_tensor_free(&x); th_tensor_free(&r); th_tensor_free(&b);
    return o;
}

/* The spec's RoiAlign, one output element at a time, in double. */
static double ref_bilinear(const float *x, int64_t H, int64_t W, double y, double xx, int max_mode, int *empty)
{
    if (!(y >= -1.0 && y <= (double)H && xx >= -1.0 && xx <= (double)W)) { *empty = 1; return 0; }
    if (y <= 0) y = 0;
    if (xx <= 0) xx = 0;
    int64_t y0 = (int64_t)y, x0 = (int64_t)xx, y1, x1;
    if (y0 >= H - 1) { y0 = y1 = H - 1; y = (double)y0; } else y1 = y0 + 1;
    if (x0 >= W - 1) { x0 = x1 = W - 1; xx = (double)x0; } else x1 = x0 + 1;
    double ly = y - (double)y0, lx = xx - (double)x0, hy = 1 - ly, hx = 1 - lx;
    double v[4] = {hy * hx * x[y0 * W + x0], hy * lx * x[y0 * W + x1], ly * hx * x[y1 * W + x0], ly * lx * x[y1 * W + x1]};
    if (!max_mode) return v[0] + v[1] + v[2] + v[3];
    double m = v[0];
    for (int i = 1; i < 4; i++) if (v[i] > m) m = v[i];
    return m;
}

static void ref_roialign(const ra_case *k, int half, int max_mode, float *out)
{
    for (int64_t r = 0; r < k->r; r++) {
        const float *roi = k->rois + 4 * r;
        double off = half ? 0.5 : 0, sw = roi[0] * (double)k->scale - off, sh = roi[1] * (double)k->scale - off;
        double rw = roi[2] * (double)k->scale - off - sw, rh = roi[3] * (double)k->scale - off - sh;
        if (!half) { rw = rw < 1 ? 1 : rw; rh = rh < 1 ? 1 : rh; }
        double bh = rh / (double)k->oh, bw = rw / (double)k->ow;
        int64_t gh = k->sr ? k->sr : (int64_t)ceil(bh), gw = k->sr ? k->sr : (int64_t)ceil(bw);
        for (int64_t c = 0; c < k->c; c++) {
            const float *x = k->x + (k->bi[r] * k->c + c) * k->h * k->w;
            for (int64_t ph = 0; ph < k->oh; ph++)
                for (int64_t pw = 0; pw < k->ow; pw++) {
                    double acc = max_mode ? -INFINITY : 0;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double y = sh + ph * bh + (iy + 0.5) * bh / gh, xx = sw + pw * bw + (ix + 0.5) * bw / gw;
                            int empty = 0;
                            double v = ref_bilinear(x, k->h, k->w, y, xx, max_mode, &empty);
                            if (max_mode) acc = v > acc ? v : acc;
                            else acc += v;
                        }
                    if (gh <= 0 || gw <= 0) acc = 0;
                    else if (!max_mode) acc /= (double)(gh * gw);
                    out[((r * k->c + c) * k->oh + ph) * k->ow + pw] = (float)acc;
                }
        }
    }
}

static void want_close(const run_out *o, const float *want, int64_t n, double atol)
{
    if (o->st != BF_OK) fail_msg("%s", o->err.msg);
    assert_int_equal(bf_tensor_numel(&o->y), n);
    const float *g = o->y.data;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i]) || isnan(g[i])) {
            if (isnan(want[i]) != isnan(g[i])) fail_msg("element %lld: got %g, want %g", (long long)i, g[i], want[i]);
            continue;
        }
        if (!(fabs((double)g[i] - (double)want[i]) <= atol + 1e-5 * fabs((double)want[i])))
            fail_msg("element %lld: got %.9g, want %.9g", (long long)i, g[i], want[i]);
    }
}

static void roialign_by_hand(void **state)
{
    (void)state;
    const float x[] = {1, 2, 3, 4};
    const float roi[] = {0, 0, 1, 1};
    const int64_t bi[] = {0};
    /* output_half_pixel (opset 10's form): one sample at (0.5, 0.5), the mean of the four pixels */
    ra_case k = {1, 1, 2, 2, 1, x, roi, bi, 1, 1, 1, 1.0f, NULL, NULL, 13};
    run_out o = roialign(&k);
    want_close(&o, (const float[]){2.5f}, 1, 0);
    run_free(&o);
    /* half_pixel (opset 16's default): shifted by half a pixel, the sample lands on pixel (0, 0) */
    k.opset = 16;
    o = roialign(&k);
    want_close(&o, (const float[]){1.0f}, 1, 0);
    run_free(&o);
    k.ctm = "output_half_pixel";
    o = roialign(&k);
    want_close(&o, (const float[]){2.5f}, 1, 0);
    run_free(&o);
    /* max: the largest weighted corner, 0.25 * 4 */
    k.mode = "max";
    o = roialign(&k);
    want_close(&o, (const float[]){1.0f}, 1, 0);
    run_free(&o);
    /* 2x2 output of a 2x2 roi at scale 0.5 of a [0, 0, 4, 4] box, 2 samples per axis: each bin
     * averages 4 points spaced half a pixel, e.g. bin (0, 0) at y, x in {0.25, 0.75} */
    k.mode = NULL; k.ctm = NULL; k.opset = 13;
    k.rois = (const float[]){0, 0, 4, 4};
    k.oh = k.ow = 2; k.sr = 2; k.scale = 0.5f;
    o = roialign(&k);
    /* bin (0,0): bilinear at (0.25|0.75, 0.25|0.75) of [[1,2],[3,4]]: 1 + 2*0.5 + 1*0.5 = 2.5;
     * bins further right/down clamp at the last pixel */
    float want[4];
    ref_roialign(&k, 0, 0, want);
    assert_true(fabsf(want[0] - 2.5f) < 1e-6f);
    want_close(&o, want, 4, 1e-6);
    run_free(&o);
}

static void roialign_random_vs_reference(void **state)
{
    (void)state;
    uint64_t seed = 777;
    for (int trial = 0; trial < 24; trial++) {
        int64_t n = 2, c = 3, h = 5 + trial % 4, w = 6 + trial % 3, r = 5;
        float *x = malloc(sizeof(float) * (size_t)(n * c * h * w)), rois[20], *want = NULL;
        int64_t bi[5];
        for (int64_t i = 0; i < n * c * h * w; i++) x[i] = frand(&seed) * 2 - 1;
        for (int64_t i = 0; i < r; i++) {
            float x1 = frand(&seed) * 14 - 2, y1 = frand(&seed) * 14 - 2;
            rois[4 * i] = x1; rois[4 * i + 1] = y1;
            rois[4 * i + 2] = x1 + frand(&seed) * 10 - (trial % 4 == 3 ? 3 : 0);
            rois[4 * i + 3] = y1 + frand(&seed) * 10;
            bi[i] = i % 2;
        }
        int half = trial % 2, max_mode = (trial / 2) % 3 == 2;
        ra_case k = {n, c, h, w, r, x, rois, bi, 1 + trial % 3, 2 + trial % 2, trial % 3, 0.5f,
                     max_mode ? "max" : "avg", half ? "half_pixel" : "output_half_pixel", 16};
        int64_t total = r * c * k.oh * k.ow;
        want = malloc(sizeof(float) * (size_t)total);
        ref_roialign(&k, half, max_mode, want);
        run_out o = roialign(&k);
        want_close(&o, want, total, 1e-6);
        run_free(&o);
        free(x); free(want);
    }
}

static void roialign_hostile(void **state)
{
    (void)state;
    float x[2 * 2 * 4 * 4];
    for (int i = 0; i < 64; i++) x[i] = (float)(i % 7) - 3;
    const int64_t bi2[] = {0, 1};
    /* NaN, Inf and 1e30 corners, a negative size: defined, finite outputs, adaptive grid or not */
    const float bad[] = {NAN, 0, 2, 2, 0, 0, INFINITY, 2, -1e30f, -1e30f, 1e30f, 1e30f, 3, 3, 1, 1};
    const int64_t bi4[] = {0, 1, 0, 1};
    for (int sr = 0; sr <= 2; sr += 2)
        for (int half = 0; half <= 1; half++) {
            ra_case k = {2, 2, 4, 4, 4, x, bad, bi4, 3, 3, sr, 1.0f, NULL, half ? "half_pixel" : "output_half_pixel", 16};
            run_out o = roialign(&k);
            if (o.st != BF_OK) fail_msg("%s", o.err.msg);
            const float *y = o.y.data;
            for (int64_t i = 0; i < bf_tensor_numel(&o.y); i++)
                if (!isfinite(y[i])) fail_msg("sr %d half %d: element %lld is %g", sr, half, (long long)i, y[i]);
            /* NaN corner: every sample empty, 0 (x[0] is finite) */
            for (int64_t i = 0; i < 2 * 9; i++) assert_true(y[i] == 0.0f);
            /* a negative size under half_pixel: no samples (the grid is empty), 0 */
            if (half && sr == 0)
                for (int64_t i = 3 * 18; i < 4 * 18; i++) assert_true(y[i] == 0.0f);
            run_free(&o);
        }
    /* x[0] is Inf: a bin with an empty sample adds 0 * Inf, NaN, as torchvision does; others stay finite */
    float xi[16];
    for (int i = 0; i < 16; i++) xi[i] = (float)i;
    xi[0] = INFINITY;
    ra_case k = {1, 1, 4, 4, 1, xi, (const float[]){2, 2, 6, 6}, bi2, 2, 2, 2, 1.0f, NULL, NULL, 13};
    run_out o = roialign(&k);
    if (o.st != BF_OK) fail_msg("%s", o.err.msg);
    const float *y = o.y.data;
    assert_true(isfinite(y[0]));     /* bin (0, 0): samples at 2.5 and 3.5, inside */
    assert_true(isnan(y[3]));        /* bin (1, 1): samples at 4.5 and 5.5, outside */
    run_free(&o);
    /* batch index out of range: an error naming the node, the roi and the range */
    const int64_t bad_bi[] = {0, 2};
    ra_case e = {2, 2, 4, 4, 2, x, (const float[]){0, 0, 1, 1, 0, 0, 1, 1}, bad_bi, 1, 1, 1, 1.0f, NULL, NULL, 13};
    o = roialign(&e);
    assert_int_not_equal(o.st, BF_OK);
    assert_non_null(strstr(o.err.msg, "'det'"));
    assert_non_null(strstr(o.err.msg, "batch_indices[1] is 2; X holds 2 images (0..1)"));
    run_free(&o);
    const int64_t neg_bi[] = {-1, 0};
    e.bi = neg_bi;
    o = roialign(&e);
    assert_non_null(strstr(o.err.msg, "batch_indices[0] is -1"));
    run_free(&o);
    /* attributes and shapes */
    e.bi = bi2;
    e.mode = "median";
    o = roialign(&e);
    assert_non_null(strstr(o.err.msg, "mode 'median'"));
    e.mode = NULL;
    e.sr = 100000;
    o = roialign(&e);
    assert_non_null(strstr(o.err.msg, "sampling_ratio 100000"));
    e.sr = 1;
    e.ctm = "asymmetric";
    o = roialign(&e);
    assert_non_null(strstr(o.err.msg, "coordinate_transformation_mode 'asymmetric'"));
    int64_t xd[4] = {2, 2, 4, 4}, rd[2] = {2, 5}, bd[1] = {3};
    bf_tensor tx = th_tensor_f32(x, 4, xd), tr = th_tensor_f32(NULL, 2, rd), tb = th_tensor_i64(NULL, 1, bd);
    const bf_tensor *in[3] = {&tx, &tr, &tb};
    o = run_op("RoiAlign", 16, NULL, 0, in, 3, 1);
    assert_non_null(strstr(o.err.msg, "rois are [2, 5]"));
    th_tensor_free(&tr);
    rd[1] = 4;
    tr = th_tensor_f32(NULL, 2, rd);
    o = run_op("RoiAlign", 16, NULL, 0, in, 3, 1);
    assert_non_null(strstr(o.err.msg, "batch_indices are [3] with rois [2, 4]"));
    th_tensor_free(&tx); th_tensor_free(&tr); th_tensor_free(&tb);
}

/* No rois at all: an empty output, nothing read. */
static void roialign_empty(void **state)
{
    (void)state;
    float x[16] = {0};
    ra_case k = {1, 1, 4, 4, 0, x, NULL, NULL, 7, 7, 2, 0.25f, NULL, NULL, 13};
    run_out o = roialign(&k);
    if (o.st != BF_OK) fail_msg("%s", o.err.msg);
    assert_int_equal(o.y.ndim, 4);
    assert_int_equal(o.y.dims[0], 0);
    assert_int_equal(o.y.dims[2], 7);
    run_free(&o);
}

/* Every bit pattern as a coordinate or score (NaN, Inf, subnormals, 1e38):
 * both ops give an output, no crash, no undefined behaviour (the sanitizer
 * build runs this too), and RoiAlign's adaptive grid stays bounded. */
static void random_bits(void **state)
{
    (void)state;
    uint64_t seed = 99;
    for (int trial = 0; trial < 30; trial++) {
        float boxes[4 * 16], scores[2 * 16], rois[4 * 6], x[2 * 3 * 5 * 5];
        for (int i = 0; i < 64; i++) {
            uint32_t u = (uint32_t)(frand(&seed) * 4294967295.0);
            memcpy(&boxes[i], &u, 4);
        }
        for (int i = 0; i < 32; i++) scores[i] = i % 5 ? frand(&seed) : boxes[i];
        for (int i = 0; i < 24; i++) rois[i] = i % 3 ? boxes[i + 7] : frand(&seed) * 8;
        for (int i = 0; i < 150; i++) x[i] = i % 37 ? frand(&seed) : boxes[i % 64];
        nms_case k = {1, 2, 16, boxes, scores, 16, 0.5f, trial % 2 ? 0.1f : NAN, trial % 3 == 0};
        run_out o = nms(&k);
        if (o.st != BF_OK) fail_msg("%s", o.err.msg);
        assert_true(o.y.dims[0] <= 32);
        run_free(&o);
        const int64_t bi[] = {0, 1, 0, 1, 0, 1};
        ra_case r = {2, 3, 5, 5, 6, x, rois, bi, 2, 3, trial % 2 ? 0 : 2, 1.0f, trial % 4 == 3 ? "max" : NULL,
                     trial % 3 ? "half_pixel" : "output_half_pixel", 16};
        o = roialign(&r);
        if (o.st != BF_OK) fail_msg("%s", o.err.msg);
        run_free(&o);
    }
}

/* Faults before, in and after RoiAlign: differential trials agree with whole passes. */
static void roialign_faults_match_exact(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    double scale = tc_load(BF_FIXTURES "/detect/roi_head_op13", &m, &ds);
    static char *weights[] = {"*"}, *acts[] = {"*"};
    static double rates[] = {1e-3};
    tc_tally t = {0};
    for (int k = 0; k < 4; k++) {
        bf_campaign_spec s = tc_base_spec(k % 2 ? 7 : 8);
        s.seed = 40 + (uint64_t)k;
        s.trials = 200;
        s.tensors = k < 2 ? weights : acts;
        s.n_tensors = 1;
        if (k == 1) {   /* many faults at once */
            s.model_kind = BF_FAULT_BER;
            s.rates = rates;
            s.n_rates = 1;
            s.repeats = 40;
        }
        if (k >= 2) {
            s.target = BF_TARGET_ACTIVATIONS;
            s.persistence = BF_PERSIST_TRANSIENT;
        }
        char label[64];
        snprintf(label, sizeof label, "config %d", k);
        tc_both(m, ds, scale, "roi_head_op13", &s, label, &t, NULL);
    }
    tc_assert_agree("faults through RoiAlign, differential vs exact", &t, 600);
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nms_overlap),          cmocka_unit_test(nms_iou_at_threshold),
        cmocka_unit_test(nms_score_threshold),  cmocka_unit_test(nms_classes_batches),
        cmocka_unit_test(nms_center_and_flipped), cmocka_unit_test(nms_ties_and_cut),
        cmocka_unit_test(nms_empty_and_nan_boxes), cmocka_unit_test(nms_random_vs_reference),
        cmocka_unit_test(nms_errors_and_data_dependence), cmocka_unit_test(nms_many_boxes_vs_kernel),
        cmocka_unit_test(roialign_by_hand),     cmocka_unit_test(roialign_random_vs_reference),
        cmocka_unit_test(roialign_hostile),     cmocka_unit_test(roialign_empty),
        cmocka_unit_test(random_bits),          cmocka_unit_test(roialign_faults_match_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
