/* The detection tail's early end (exec/ckpt_tail.c): a trial whose faults
 * moved only rows of the class logits, whose Softmax scores select the
 * golden (row, class) pairs with the golden scores, ends the image before
 * the logits' Concat with the golden outputs. Checked on a small graph of
 * SSD's pattern (two levels' logits concatenated, Softmax, the scores
 * squeezed, five class columns gathered and thresholded, the selected
 * scores and boxes gathered) against a plain plan's full run (no fusion,
 * no checkpoints) of the same faulty weights:
 *
 * - decided both ways at the threshold: a logit whose score is the last
 *   float at or under it ends the image (the full run is golden), the next
 *   float up selects and must run the tail (checking no row, or only the
 *   kept ones, gives the golden outputs instead of the full run's);
 * - a kept selection's score moved with its mask the same (not comparing
 *   the scores ends it wrongly), a selection lost, a row far under, NaN
 *   and Inf rows (the Softmax makes them NaN: they select nothing), the
 *   other level's rows, the background raised, a fault reaching the boxes
 *   (the faults cross to the tail otherwise than through the logits:
 *   ignoring that ends it wrongly);
 * - a graph whose scores are also an output: the rule off, with the
 *   reason, and the trials' outputs still the full run's;
 * - every allocation of the checkpoints refused in turn: a clean
 *   BF_ENOMEM, or the same early end;
 * - a block that is a 1x1 Conv's output moved by Reshape, Transpose and
 *   Reshape as SSD's heads move theirs: a fault in one output channel
 *   makes the check compute that channel's rows alone (its anchor's, each
 *   position's), found by hand from the layout; decided both ways at the
 *   threshold on those rows, a moved selected score, a row that selects
 *   (mapping the channel to the wrong anchor's rows, or ignoring the
 *   Transpose, ends it wrongly: planted, it fails). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "alloc_fail.h"
#include "exec/ckpt_impl.h"
#include "exec/step_access.h"
#include "onnx_graph.h"

enum { NA = 8, NB = 8, N = NA + NB, C = 6 };
#define THR 0.3f

/* The pattern: la = Add(Relu(xa), wa), lb = Add(xb, wb) [1, 8, 6] each,
 * L = Concat(la, lb) on rows, S = Softmax(L), T = Squeeze(S) [16, 6];
 * classes 1..5: X = Gather(T, c, axis 1), M = Greater(X, thr), the
 * GatherND of X and of the boxes (Add(boxes, bw)) at NonZero(M); the
 * outputs the selected scores and boxes, concatenated. scores_out: S is a
 * graph output too (the rule must be off). */
/* conv: La is instead the Conv of Relu(xa) [1, 1, 2, 2] with wc [A C, 1,
 * 1, 1] and bc [A C] (A = 2 anchors a position), Reshape [1, A, C, 2, 2],
 * Transpose [0, 3, 4, 1, 2], Reshape [1, 8, C]: channel a C + c at
 * position q is row q A + a's class c, as in torchvision's SSD heads. */
enum { A = 2, HW = 4 };
static const float XA[HW] = {0.0f, 1.0f, 0.25f, 0.0f};   /* the Conv's input, fed */

static void conv_block(tg_graph *g)
{
    static const int64_t dw[] = {A * C, 1, 1, 1}, db1[] = {A * C};
    float wc[A * C] = {0}, bc[A * C];
    for (int k = 0; k < A * C; k++) bc[k] = k % C ? -8.0f : 0.0f;   /* the background's column the max */
    wc[0 * C + 2] = 11.0f;   /* anchor 0, class 2: 3 at position 1 (row 2), -5.25 at 2 (row 4) */
    tg_init_f32(g, "wc", 4, dw, wc);
    tg_init_f32(g, "bc", 1, db1, bc);
    tg_init_i64(g, "s5", 1, (int64_t[]){5}, (int64_t[]){1, A, C, 2, 2});
    tg_init_i64(g, "s3", 1, (int64_t[]){3}, (int64_t[]){1, NA, C});
    tg_node(g, "Relu", "pre", (const char *[]){"xa"}, 1, "pa");
    tg_node(g, "Conv", "head", (const char *[]){"pa", "wc", "bc"}, 3, "hc");
    tg_node(g, "Reshape", "r5", (const char *[]){"hc", "s5"}, 2, "h5");
    tg_attr_ints(g, tg_node(g, "Transpose", "tp", (const char *[]){"h5"}, 1, "ht"), "perm", 5,
                 (int64_t[]){0, 3, 4, 1, 2});
    tg_node(g, "Reshape", "r3", (const char *[]){"ht", "s3"}, 2, "La");
}

static bf_model *tail_model(tg_graph *g, int scores_out, int conv)
{
    static const int64_t da[] = {1, NA, C}, db[] = {1, NB, C}, dbx[] = {N, 4};
    g->ins[g->n_ins++] = conv ? tg_value_info(g, "xa", 1, 4, (int64_t[]){1, 1, 2, 2}) : tg_value_info(g, "xa", 1, 3, da);
    g->ins[g->n_ins++] = tg_value_info(g, "xb", 1, 3, db);
    g->ins[g->n_ins++] = tg_value_info(g, "boxes", 1, 2, dbx);
    g->outs[g->n_outs++] = tg_value_info(g, "out_s", 1, -1, NULL);
    g->outs[g->n_outs++] = tg_value_info(g, "out_b", 1, -1, NULL);
    if (scores_out) g->outs[g->n_outs++] = tg_value_info(g, "S", 1, 3, (int64_t[]){1, N, C});
    float wa[NA * C], wb[NB * C], bw[N * 4];
    for (int i = 0; i < NA * C; i++) wa[i] = i % C ? -8.0f : 0.0f;   /* the background's column 0 the max */
    for (int i = 0; i < NB * C; i++) wb[i] = i % C ? -8.0f : 0.0f;
    wa[2 * C + 2] = 3.0f;    /* A's row 2 selects class 2 */
    wb[1 * C + 1] = 2.0f;    /* B's row 1 (L's 9) class 1 */
    /* B's row 3 (L's 11): class 3 just under the threshold (selects nothing) */
    wb[3 * C + 3] = (float)(log(THR / (1.0 - THR)) - 0x1p-8);
    for (int i = 0; i < N * 4; i++) bw[i] = (float)(i % 7) * 0.5f;
    tg_init_f32(g, "wa", 3, da, wa);
    tg_init_f32(g, "wb", 3, db, wb);
    tg_init_f32(g, "bw", 2, dbx, bw);
    tg_init_f32(g, "thr", 0, NULL, (float[]){THR});
    tg_init_i64(g, "ax0", 1, (int64_t[]){1}, (int64_t[]){0});
    if (conv) {
        conv_block(g);
        tg_node(g, "Add", "lb", (const char *[]){"xb", "wb"}, 2, "Lb");
        tg_node(g, "Add", "bxs", (const char *[]){"boxes", "bw"}, 2, "B");
    } else {
        tg_node(g, "Relu", "pre", (const char *[]){"xa"}, 1, "pa");
        tg_node(g, "Add", "lb", (const char *[]){"xb", "wb"}, 2, "Lb");
        tg_node(g, "Add", "bxs", (const char *[]){"boxes", "bw"}, 2, "B");
        tg_node(g, "Add", "la", (const char *[]){"pa", "wa"}, 2, "La");
    }
    tg_attr_int(g, tg_node(g, "Concat", "cat", (const char *[]){"La", "Lb"}, 2, "L"), "axis", 1);
    tg_attr_int(g, tg_node(g, "Softmax", "sm", (const char *[]){"L"}, 1, "S"), "axis", -1);
    tg_node(g, "Squeeze", "sq", (const char *[]){"S", "ax0"}, 2, "T");
    const char *scs[C], *bxs[C];
    char nm[32], x[16], m[16], z[16], t[16], ic[16];
    for (int c = 1; c < C; c++) {
        snprintf(ic, sizeof ic, "ic%d", c), snprintf(x, sizeof x, "X%d", c), snprintf(m, sizeof m, "M%d", c);
        snprintf(z, sizeof z, "Z%d", c), snprintf(t, sizeof t, "I%d", c);
        tg_init_i64(g, ic, 0, NULL, (int64_t[]){c});
        snprintf(nm, sizeof nm, "col%d", c);
        tg_attr_int(g, tg_node(g, "Gather", nm, (const char *[]){"T", ic}, 2, x), "axis", 1);
        snprintf(nm, sizeof nm, "gt%d", c);
        tg_node(g, "Greater", nm, (const char *[]){x, "thr"}, 2, m);
        snprintf(nm, sizeof nm, "nz%d", c);
        tg_node(g, "NonZero", nm, (const char *[]){m}, 1, z);
        snprintf(nm, sizeof nm, "tr%d", c);
        tg_attr_ints(g, tg_node(g, "Transpose", nm, (const char *[]){z}, 1, t), "perm", 2, (int64_t[]){1, 0});
        snprintf(nm, sizeof nm, "sc%d", c);
        scs[c] = tg_str(g, nm);
        tg_node(g, "GatherND", nm, (const char *[]){x, t}, 2, scs[c]);
        snprintf(nm, sizeof nm, "bx%d", c);
        bxs[c] = tg_str(g, nm);
        tg_node(g, "GatherND", nm, (const char *[]){"B", t}, 2, bxs[c]);
    }
    tg_attr_int(g, tg_node(g, "Concat", "cat_s", scs + 1, C - 1, "out_s"), "axis", 0);
    tg_attr_int(g, tg_node(g, "Concat", "cat_b", bxs + 1, C - 1, "out_b"), "axis", 0);
    return tg_load(g, scores_out ? "tail_scores_out" : conv ? "tail_conv" : "tail");
}

/* a plan's outputs as bytes: each one's rank, dims and elements */
typedef struct outs {
    unsigned char b[4096];
    size_t n;
} outs;

static outs outputs_of(const bf_plan *p)
{
    outs o = {0};
    for (size_t k = 0; k < 2; k++) {
        const bf_tensor *t = bf_plan_output(p, k);
        size_t nb = bf_tensor_nbytes(t);
        assert_true(o.n + sizeof t->ndim + (size_t)t->ndim * sizeof t->dims[0] + nb <= sizeof o.b);
        memcpy(o.b + o.n, &t->ndim, sizeof t->ndim), o.n += sizeof t->ndim;
        memcpy(o.b + o.n, t->dims, (size_t)t->ndim * sizeof t->dims[0]), o.n += (size_t)t->ndim * sizeof t->dims[0];
        if (nb) memcpy(o.b + o.n, t->data, nb);
        o.n += nb;
    }
    return o;
}

static int same(const outs *a, const outs *b) { return a->n == b->n && memcmp(a->b, b->b, a->n) == 0; }

static void feed(bf_plan *p)
{
    float boxes[N * 4];
    for (int i = 0; i < N * 4; i++) boxes[i] = (float)(i / 4) * 10.0f + (float)(i % 4);
    bf_tensor *xa = bf_plan_input(p, 0);
    if (bf_tensor_numel(xa) == HW) memcpy(xa->data, XA, sizeof XA);
    else memset(xa->data, 0, NA * C * sizeof(float));
    memset(bf_plan_input(p, 1)->data, 0, NB * C * sizeof(float));
    memcpy(bf_plan_input(p, 2)->data, boxes, sizeof boxes);
}

typedef struct rig {
    tg_graph g;
    bf_model *m;
    bf_plan *p, *u;     /* the checkpointed plan (fused, shared arena) and the plain reference */
    bf__ckpt *ck;
    bf__ckpt_trial *tr;
    outs golden;
} rig;

static void rig_open(rig *r, int scores_out, int conv)
{
    memset(r, 0, sizeof *r);
    r->m = tail_model(&r->g, scores_out, conv);
    bf_error err = {0};
    bf_plan_opts fo = {.unbatched = 1, .fuse_activations = 1, .share_buffers = 1}, po = {.unbatched = 1};
    if (bf_plan_create_opts(r->m, 1, &fo, &r->p, &err) != BF_OK || bf_plan_create_opts(r->m, 1, &po, &r->u, &err) != BF_OK)
        fail_msg("%s", err.msg);
    size_t n = bf_plan_num_steps(r->p);
    double *cost = calloc(n + 1, sizeof *cost), *pm = calloc(r->m->n_params + 1, sizeof *pm);
    assert_true(cost && pm);
    /* the Relu dear, so that a cut after it pays for the faults after it */
    for (size_t i = 0; i < n; i++) cost[i] = strcmp(r->p->steps[i].node->name, "pre") ? 1e-9 : 1e-3;
    for (size_t q = 0; q < r->m->n_params; q++) pm[q] = 1;
    if (bf__ckpt_create(r->p, 1, 8, cost, pm, NULL, (size_t)1 << 30, NULL, &r->ck, &err) != BF_OK)
        fail_msg("%s", err.msg);
    free(cost);
    free(pm);
    assert_true(bf__ckpt_num_cuts(r->ck) > 0);
    if (bf__ckpt_trial_new(r->ck, &r->tr, &err) != BF_OK) fail_msg("%s", err.msg);
    feed(r->p);
    if (bf__ckpt_record(r->ck, r->p, 0, &err) != BF_OK) fail_msg("%s", err.msg);
    feed(r->u);
    if (bf_plan_run(r->u, &err) != BF_OK) fail_msg("%s", err.msg);
    r->golden = outputs_of(r->u);
}

static void rig_close(rig *r)
{
    bf__ckpt_trial_free(r->tr);
    bf__ckpt_free(r->ck);
    bf_plan_free(r->p);
    bf_plan_free(r->u);
    bf_model_free(r->m);
    tg_free(&r->g);
}

/* parameter `name`'s element i set to v in both plans (the old value back
 * in *old), the trial told so; the checkpointed run against the full one.
 * Returns whether the tail's check ended the image; *moved: the full run's
 * outputs differ from golden. */
static int trial(rig *r, const char *name, int64_t i, float v, int *moved)
{
    bf_error err = {0};
    int64_t q = bf_model_find_param(r->m, name);
    assert_true(q >= 0);
    float *dp = NULL, *du = NULL;
    if (bf_plan_param_mut(r->p, (size_t)q, &dp, &err) != BF_OK || bf_plan_param_mut(r->u, (size_t)q, &du, &err) != BF_OK)
        fail_msg("%s", err.msg);
    float old = dp[i];
    dp[i] = du[i] = v;
    feed(r->u);
    if (bf_plan_run(r->u, &err) != BF_OK) fail_msg("%s", err.msg);
    outs ref = outputs_of(r->u);
    bf__ckpt_trial_begin(r->ck, r->tr);
    bf__ckpt_trial_param(r->ck, r->tr, (size_t)q);
    bf__ckpt_trial_element(r->ck, r->tr, (size_t)q, i);
    bf__ckpt_trial_end(r->ck, r->tr);
    assert_true(r->tr->from >= 0);   /* resumed at a cut: the run is watched */
    feed(r->p);
    int golden = 0;
    int64_t work = 0, skipped = 0, chan[5] = {0};
    float *ty = malloc((bf__ckpt_tail_scratch(r->ck) + 1) * sizeof *ty);   /* the tail check's scores: the caller's */
    assert_non_null(ty);
    bf_status st = bf__ckpt_run(r->ck, r->tr, ty, r->p, 0, &golden, &work, &skipped, chan, &err);
    free(ty);
    if (st != BF_OK) fail_msg("%s", err.msg);
    outs got = golden ? r->golden : outputs_of(r->p);
    if (!same(&got, &ref)) fail_msg("%s[%lld] = %g: the outputs differ from the full run's (ended %d)", name, (long long)i, (double)v, golden);
    assert_int_equal(chan[4], golden);   /* only the tail ends this graph's images (no cut past the faults) */
    *moved = !same(&ref, &r->golden);
    dp[i] = du[i] = old;
    bf__ckpt_trial_clear(r->tr);
    return golden;
}

/* B's row 5 (L's 13) with class 2's logit d: the engine's score of it */
static float score_at(float d)
{
    float x[C] = {0.0f, -8.0f, d, -8.0f, -8.0f, -8.0f}, y[C];
    bf__softmax_rows_run(y, x, 1, C);
    return y[2];
}

/* the rig on the graph (conv: its first level from a Conv), the rule on */
static const bf__ckpt_tail *rig_on(rig *r, int conv)
{
    rig_open(r, 0, conv);
    const bf__ckpt_tail *t = &r->ck->tail;
    if (!t->node) fail_msg("the rule is off: %s", t->why);
    return t;
}

/* the last class-2 logit whose score is not over the threshold, and the next float up */
static void edge(float *under, float *over)
{
    *under = *over = (float)(log(THR / (1.0 - THR)) - 0.05);
    while (!(score_at(*over) > THR)) *under = *over, *over = nextafterf(*over, INFINITY);
}

static void ends_where_the_moved_rows_select_as_golden(void **state)
{
    (void)state;
    rig r;
    const bf__ckpt_tail *t = rig_on(&r, 0);
    assert_string_equal(t->node->name, "cat");   /* checked at the Concat, its two inputs the blocks */
    assert_int_equal(t->n_in, 2);
    assert_true(t->thr[0] == INFINITY);          /* the background's column: read by nothing */
    for (int c = 1; c < C; c++) assert_true(t->thr[c] == THR);
    /* the golden selections: A's row 2 class 2, B's row 1 (L's 9) class 1 */
    assert_int_equal(t->golden[0].n, 2);
    assert_int_equal(t->golden[0].at[0], 2 * C + 2);
    assert_int_equal(t->golden[0].at[1], (NA + 1) * C + 1);
    /* the edge: the last logit whose score is not over the threshold, and the next */
    float under, over;
    edge(&under, &over);
    int moved;
    assert_int_equal(trial(&r, "wb", 5 * C + 2, under, &moved), 1);
    assert_false(moved);
    assert_int_equal(trial(&r, "wb", 5 * C + 2, over, &moved), 0);
    assert_true(moved);
    /* far under */
    assert_int_equal(trial(&r, "wb", 5 * C + 2, -3.0f, &moved), 1);
    assert_false(moved);
    /* a kept selection, another class's logit moved: the same mask, its score moves */
    assert_int_equal(trial(&r, "wb", 1 * C + 4, -7.5f, &moved), 0);
    assert_true(moved);
    /* a kept selection lost */
    assert_int_equal(trial(&r, "wb", 1 * C + 1, -3.0f, &moved), 0);
    assert_true(moved);
    /* the row just under the threshold moved further under */
    assert_int_equal(trial(&r, "wb", 3 * C + 3, -3.0f, &moved), 1);
    assert_false(moved);
    /* not finite: the Softmax makes the row NaN, which selects nothing */
    assert_int_equal(trial(&r, "wb", 6 * C + 0, NAN, &moved), 1);
    assert_false(moved);
    assert_int_equal(trial(&r, "wb", 6 * C + 4, INFINITY, &moved), 1);
    assert_false(moved);
    /* the other block's rows: under, and over */
    assert_int_equal(trial(&r, "wa", 4 * C + 3, -2.0f, &moved), 1);
    assert_false(moved);
    assert_int_equal(trial(&r, "wa", 4 * C + 3, 5.0f, &moved), 0);
    assert_true(moved);
    /* the background raised: the row's classes fall further under */
    assert_int_equal(trial(&r, "wa", 5 * C + 0, 4.0f, &moved), 1);
    /* the boxes: the faults reach the tail otherwise than through L */
    assert_int_equal(trial(&r, "bw", 2 * 4 + 0, 100.0f, &moved), 0);
    assert_true(moved);
    rig_close(&r);
}

/* the scores a graph output: the rule off with the reason; the trials run
 * the tail and their outputs are still the full run's */
static void off_where_the_scores_are_read_elsewhere(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, 1, 0);
    assert_null(r.ck->tail.node);
    assert_non_null(r.ck->tail.why);
    assert_non_null(strstr(bf__ckpt_tail_off(r.ck), "graph output"));
    int moved;
    assert_int_equal(trial(&r, "wb", 5 * C + 2, -3.0f, &moved), 0);
    rig_close(&r);
}

/* every allocation of the checkpoints (the tail's pattern, its golden
 * selections, a trial's buffers) refused in turn: a clean BF_ENOMEM, or a
 * run that ends the far-moved row's image as without the refusal */
static void refused_allocations_fail_cleanly(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, 0, 0);
    bf__ckpt_trial_free(r.tr);
    bf__ckpt_free(r.ck);
    r.tr = NULL, r.ck = NULL;
    size_t n = bf_plan_num_steps(r.p);
    double *cost = calloc(n + 1, sizeof *cost), *pm = calloc(r.m->n_params + 1, sizeof *pm);
    assert_true(cost && pm);
    for (size_t i = 0; i < n; i++) cost[i] = strcmp(r.p->steps[i].node->name, "pre") ? 1e-9 : 1e-3;
    for (size_t q = 0; q < r.m->n_params; q++) pm[q] = 1;
    long refused = 0;
    for (long k = 0;; k++) {
        bf_error err = {0};
        bf_test_alloc_fail_after(k);
        feed(r.p);
        bf_status st = bf__ckpt_create(r.p, 1, 8, cost, pm, NULL, (size_t)1 << 30, NULL, &r.ck, &err);
        if (st == BF_OK) st = bf__ckpt_record(r.ck, r.p, 0, &err);
        if (st == BF_OK) st = bf__ckpt_trial_new(r.ck, &r.tr, &err);
        long failed = bf_test_alloc_failures();
        bf_test_alloc_fail_after(-1);
        if (st != BF_OK && st != BF_ENOMEM) fail_msg("refusal %ld: status %d: %s", k, (int)st, err.msg);
        if (st == BF_OK) {
            int moved;
            assert_non_null(r.ck->tail.node);
            assert_int_equal(trial(&r, "wb", 5 * C + 2, -3.0f, &moved), 1);
        } else {
            refused++;
        }
        bf__ckpt_trial_free(r.tr);
        bf__ckpt_free(r.ck);
        r.tr = NULL, r.ck = NULL;
        if (st == BF_OK && failed == 0) break;
    }
    assert_true(refused > 0);
    free(cost);
    free(pm);
    rig_close(&r);
}

/* the Conv's channel a C + c: its rows, as the layout puts them (position q's row q A + a) */
static void assert_rows_of_anchor(const rig *r, int a)
{
    assert_int_equal(r->tr->tail_map, 0);   /* La, the Concat's first block */
    assert_int_equal(r->tr->tail_nrows, HW);
    for (int q = 0; q < HW; q++) assert_int_equal(r->tr->tail_rows[q], q * A + a);
}

static void one_channel_checks_its_rows_alone(void **state)
{
    (void)state;
    rig r;
    const bf__ckpt_tail *t = rig_on(&r, 1);
    assert_int_equal(t->map[0].hw, HW);
    assert_int_equal(t->map[1].conv, -1);   /* Lb: an Add's output */
    /* golden: row 2 (position 1, anchor 0) class 2; B's row 1 (L's 9) class 1 */
    assert_int_equal(t->golden[0].n, 2);
    assert_int_equal(t->golden[0].at[0], 2 * C + 2);
    int moved;
    /* anchor 1, class 3's weight: rows 3 and 5 (positions 1 and 2) move.
     * Over: row 3 selects class 3, the tail must run (the rows of anchor
     * 0, or row 6 read without the Transpose, hold only golden logits, so
     * checking those ends it wrongly); under: ends */
    assert_int_equal(trial(&r, "wc", 1 * C + 3, 11.0f, &moved), 0);
    assert_true(moved);
    assert_rows_of_anchor(&r, 1);
    assert_int_equal(trial(&r, "wc", 1 * C + 3, 2.0f, &moved), 1);
    assert_false(moved);
    assert_rows_of_anchor(&r, 1);
    /* anchor 1, class 2's bias: every position's row of anchor 1 at logit
     * d; the edge of the threshold on them, as the plain Softmax puts it */
    float under, over;
    edge(&under, &over);
    assert_int_equal(trial(&r, "bc", 1 * C + 2, under, &moved), 1);
    assert_false(moved);
    assert_rows_of_anchor(&r, 1);
    assert_int_equal(trial(&r, "bc", 1 * C + 2, over, &moved), 0);
    assert_true(moved);
    /* anchor 0, class 2's weight: the selected score at row 2 moves, its mask the same */
    assert_int_equal(trial(&r, "wc", 0 * C + 2, 10.5f, &moved), 0);
    assert_true(moved);
    assert_rows_of_anchor(&r, 0);
    /* anchor 0, class 4's weight far under: row 2's class 4 selects
     * nothing either way, but its selected class 2 score moves with the
     * Softmax's sum: the tail must run */
    assert_int_equal(trial(&r, "wc", 0 * C + 4, -20.0f, &moved), 0);
    assert_true(moved);
    assert_rows_of_anchor(&r, 0);
    /* anchor 1, class 4's weight far under: its rows select nothing: ends */
    assert_int_equal(trial(&r, "wc", 1 * C + 4, -20.0f, &moved), 1);
    assert_false(moved);
    assert_rows_of_anchor(&r, 1);
    /* B's rows: no Conv to map them from; every row of the block checked */
    assert_int_equal(trial(&r, "wb", 5 * C + 2, -3.0f, &moved), 1);
    assert_int_equal(r.tr->tail_map, -1);
    rig_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ends_where_the_moved_rows_select_as_golden),
        cmocka_unit_test(off_where_the_scores_are_read_elsewhere),
        cmocka_unit_test(refused_allocations_fail_cleanly),
        cmocka_unit_test(one_channel_checks_its_rows_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
