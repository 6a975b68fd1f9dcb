/* Exported torch.repeat_interleave, run as one bf.RepeatInterleave op
 * (core/src/exec/fuse_seq.c, core/src/exec/ops/repeat_interleave.c), on the
 * files of tests/fixtures/make_rint_near_misses.py:
 *
 * - the exporter's sequence Loop (dynamic axis; opsets 14 to 17, a scalar
 *   and a tensor of repeats, dim 1 and 2) and its unrolled form (static
 *   axis) load with no Loop or sequence op left and compute
 *   torch.repeat_interleave, checked element by element against the
 *   definition, with the symbolic dims sized through bf_plan_opts;
 * - near misses of the Loop stay unsupported, naming the Loop; the unrolled
 *   form with a Reshape that keeps the repeat apart runs as plain ops;
 * - hostile files: a trip count of 2^40 or -3 is refused when the plan is
 *   built, naming the node; a sequence op on a tensor is refused when
 *   planned, naming it; a body reading a value defined nowhere is a load
 *   error, as are a SequenceAt position
 *   outside its list and a sequence as a graph output; a symbolic dim with
 *   no size is refused naming the input and dim;
 * - the output stays a value fault site, and the sequences the Loop wrote
 *   are refused as sites with the node that computes them now;
 * - campaigns on a classifier with the Loop inside agree, differential and
 *   exact, trial by trial (weights, the repeated keys, any activation);
 * - bf_model_with_dims fixes the symbolic dims so that a plan is made by
 *   batch alone, leaving the base as it was; unknown names and negative
 *   sizes are refused by name;
 * - every allocation failing in turn is a clean BF_ENOMEM. */
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
#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "alloc_loop.h"
#include "campaign_check.h"
#include "op_harness.h"

#define RINT BF_FIXTURES "/rint/"


static bf_model *load(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, RINT "%s.onnx", name);
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_file(path, &m, &err) != BF_OK) fail_msg("%s: %s", name, err.msg);
    return m;
}


/* Runs file `name` on k [dims] (k[i] = i) and checks y against the
 * definition: along `axis`, index i of k repeated reps[i] times. */
static void check_file(const char *name, const int64_t *dims, int axis, const int64_t *reps)
{
    bf_model *m = load(name);
    assert_int_equal(th_count_op(m, "Loop") + th_count_op(m, "SplitToSequence") + th_count_op(m, "ConcatFromSequence") +
                         th_count_op(m, "SequenceEmpty"),
                     0);
    assert_true(th_count_op(m, "bf.RepeatInterleave") >= 1);
    bf_plan *p = NULL;
    bf_error err = {0};
    if (th_plan_for(m, dims, 4, &p, &err) != BF_OK) fail_msg("%s: %s", name, err.msg);
    bf_tensor *k = bf_plan_input(p, 0);
    float *kd = k->data;
    for (int64_t i = 0; i < bf_tensor_numel(k); i++) kd[i] = (float)i;
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s: %s", name, err.msg);
    const bf_tensor *y = bf_plan_output(p, 0);
    int64_t total = 0;
    for (int64_t i = 0; i < dims[axis]; i++) total += reps[i];
    assert_int_equal(y->ndim, 4);
    for (int d = 0; d < 4; d++) assert_int_equal(y->dims[d], d == axis ? total : dims[d]);
    /* the index of k each output index along the axis reads */
    int64_t src[64], at = 0;
    for (int64_t i = 0; i < dims[axis]; i++)
        for (int64_t r = 0; r < reps[i]; r++) src[at++] = i;
    const float *yd = y->data;
    int64_t idx[4];
    for (int64_t e = 0; e < bf_tensor_numel(y); e++) {
        int64_t rest = e, flat = 0;
        for (int d = 3; d >= 0; d--) idx[d] = rest % y->dims[d], rest /= y->dims[d];
        for (int d = 0; d < 4; d++) flat = flat * dims[d] + (d == axis ? src[idx[d]] : idx[d]);
        if (yd[e] != kd[flat]) fail_msg("%s: y[%lld] = %g, want k[%lld] = %g", name, (long long)e, yd[e],
                                        (long long)flat, kd[flat]);
    }
    bf_plan_free(p);
    bf_model_free(m);
}

static void exports_compute_repeat_interleave(void **state)
{
    (void)state;
    static const int64_t two[8] = {2, 2, 2, 2, 2, 2, 2, 2}, three[8] = {3, 3, 3, 3, 3, 3, 3, 3};
    static const int64_t one_three[2] = {1, 3};
    /* heads and seq other than the traced 2 and 5: the Loop's count follows the plan's shapes */
    check_file("ok_loop_op14", (int64_t[]){2, 3, 7, 4}, 1, two);
    check_file("ok_loop_op17", (int64_t[]){1, 5, 1, 4}, 1, two);
    check_file("ok_loop_tensor_op16", (int64_t[]){3, 2, 6, 4}, 1, one_three);
    check_file("ok_loop_dim2_op15", (int64_t[]){2, 2, 4, 4}, 2, three);
    /* the unrolled form: two bf.RepeatInterleave, one per head, then Concat; seq 3, not the traced 5 */
    check_file("ok_static_op14", (int64_t[]){2, 2, 3, 4}, 1, two);
    bf_model *m = load("ok_static_op14");
    assert_int_equal(th_count_op(m, "bf.RepeatInterleave"), 2);
    assert_int_equal(th_count_op(m, "Reshape"), 0);
    bf_model_free(m);
}

static void near_misses_stay_loops(void **state)
{
    (void)state;
    static const char *const files[] = {
        "near_concat_c1", "near_reshape_keeps", "near_mul_minus2", "near_unsqueeze_axis", "near_at_not_iteration",
        "near_extra_op", "near_concat_axis", "near_new_axis", "near_cond_false",
    };
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char path[256];
        snprintf(path, sizeof path, RINT "%s.onnx", files[f]);
        bf_model *m = NULL;
        bf_error err = {0};
        /* not fused: a Loop as any other (exec/plan_sub.c), whose body's sequence ops no plan runs */
        if (bf_model_load_file(path, &m, &err) != BF_OK) fail_msg("%s: %s", files[f], err.msg);
        assert_int_equal(th_count_op(m, "bf.RepeatInterleave"), 0);
        assert_int_equal(th_count_op(m, "Loop"), 1);
        bf_model_free(m);
    }
    /* one piece of the unrolled form with a Reshape that keeps the repeat apart: plain ops */
    bf_model *m = load("near_static_reshape");
    assert_int_equal(th_count_op(m, "bf.RepeatInterleave"), 1);
    assert_int_equal(th_count_op(m, "Reshape"), 1);
    bf_model_free(m);
}

static void hostile_files_say_why(void **state)
{
    (void)state;
    static const struct { const char *file, *needle; } trips[] = {
        {"bad_trips_huge", "runs 1099511627776 times but the repeated axis has 2 indices"},
        {"bad_trips_negative", "runs -3 times but the repeated axis has 2 indices"},
    };
    for (size_t i = 0; i < 2; i++) {
        bf_model *m = load(trips[i].file);
        bf_plan *p = NULL;
        bf_error err = {0};
        assert_int_equal(th_plan_for(m, (int64_t[]){2, 2, 5, 4}, 4, &p, &err), BF_ESHAPE);
        assert_null(p);
        if (!strstr(err.msg, "'/ConcatFromSequence' (bf.RepeatInterleave)") || !strstr(err.msg, trips[i].needle))
            fail_msg("%s: %s", trips[i].file, err.msg);
        bf_model_free(m);
    }
    bf_model *m = NULL;
    bf_error err = {0};
    /* a general Loop now (exec/plan_sub.c): its body's sequence op on a tensor fails the run, naming it */
    m = load("bad_seq_on_tensor");
    {
        bf_plan *pl = NULL;
        bf_status st = th_plan_for(m, (int64_t[]){2, 2, 5, 4}, 4, &pl, &err);
        if (st == BF_OK) {
            for (size_t i = 0; i < bf_model_num_inputs(m); i++) memset(bf_plan_input(pl, i)->data, 0, bf_tensor_nbytes(bf_plan_input(pl, i)));
            st = bf_plan_run(pl, &err);
        }
        if (st == BF_OK || !strstr(err.msg, "Sequence")) fail_msg("status %d: %s", (int)st, err.msg);
        bf_plan_free(pl);
    }
    bf_model_free(m);
    /* a sequence op alone on a tensor: loads (the op is known), refused when planned */
    m = load("bad_seq_op_on_tensor");
    bf_plan *p0 = NULL;
    assert_int_equal(bf_plan_create(m, 2, &p0, &err), BF_EFORMAT);
    assert_null(p0);
    assert_non_null(strstr(err.msg, "node 'cat' (ConcatFromSequence): input 0 is a tensor (float32 [2, 3]), not a sequence"));
    bf_model_free(m);
    assert_int_equal(bf_model_load_file(RINT "bad_body_undefined.onnx", &m, &err), BF_EFORMAT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "'/Loop'"));
    assert_non_null(strstr(err.msg, "reads 'nowhere'"));
    /* sequence ops outside the Loop: a position outside a list; a sequence as a graph output */
    assert_int_equal(bf_model_load_file(RINT "bad_seq_at_outside.onnx", &m, &err), BF_ERANGE);
    assert_null(m);
    assert_non_null(strstr(err.msg, "node 'at' (SequenceAt): position 2 is outside the sequence of 2 tensors"));
    assert_int_not_equal(bf_model_load_file(RINT "bad_seq_graph_output.onnx", &m, &err), BF_OK);
    assert_null(m);
    assert_non_null(strstr(err.msg, "graph output 's' is not a tensor"));
    /* a symbolic dim with no size */
    m = load("ok_loop_op14");
    bf_plan *p = NULL;
    assert_int_equal(bf_plan_create(m, 2, &p, &err), BF_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "graph input 'k' dim 1 is symbolic ('heads')"));
    /* fed two sizes for one name, and a rank that is not the model's */
    const int64_t a[4] = {2, 2, 5, 4}, *shapes[1] = {a};
    const char *names[8];
    int64_t sizes[8];
    size_t n;
    int nd3[1] = {3};
    assert_int_equal(bf_plan_dims_from(m, shapes, nd3, names, sizes, 8, &n, &err), BF_ESHAPE);
    assert_non_null(strstr(err.msg, "rank 4, fed rank 3"));
    bf_model_free(m);
}

static void output_is_a_fault_site(void **state)
{
    (void)state;
    bf_model *m = load("ok_loop_op17");
    bf_plan *p = NULL;
    bf_error err = {0};
    if (th_plan_for(m, (int64_t[]){2, 2, 3, 4}, 4, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_tensor *k = bf_plan_input(p, 0);
    for (int64_t i = 0; i < bf_tensor_numel(k); i++) ((float *)k->data)[i] = 1.0f;
    bf_value_fault f = {.value = bf_model_find_value(m, "y"), .sample = 1, .index = 5, .model = BF_FAULT_BITFLIP,
                        .mask = 1u << 30, .repr = BF_REPR_FP32};
    assert_true(f.value >= 0);
    if (bf_plan_set_value_faults(p, &f, 1, &err) != BF_OK) fail_msg("%s", err.msg);
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
    const bf_tensor *y = bf_plan_output(p, 0);
    int64_t row = bf_tensor_numel(y) / 2;
    /* 1.0f is 0x3f800000; bit 30 flipped: 0x7f800000, +inf, at sample 1's element 5 only */
    for (int64_t i = 0; i < bf_tensor_numel(y); i++)
        if (i != row + 5) assert_true(((const float *)y->data)[i] == 1.0f);
    assert_true(isinf(((const float *)y->data)[row + 5]) && ((const float *)y->data)[row + 5] > 0);
    /* the Loop's sequence is no tensor of the plan: refused, naming the node computing it now */
    f.value = bf_model_find_value(m, "/Loop_output_0");
    assert_true(f.value >= 0);
    assert_int_not_equal(bf_plan_set_value_faults(p, &f, 1, &err), BF_OK);
    assert_non_null(strstr(err.msg, "/ConcatFromSequence"));
    bf_plan_free(p);
    bf_model_free(m);
}

/* bf_model_with_dims: the same model planned by batch size alone */
static void derived_model_fixes_dims(void **state)
{
    (void)state;
    bf_model *m = load("ok_loop_op14"), *d = NULL;
    bf_error err = {0};
    const char *names[2] = {"heads", "seq"};
    const int64_t sizes[2] = {3, 7}, bad[2] = {3, -1};
    if (bf_model_with_dims(m, names, sizes, 2, &d, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_null(bf_model_input(d, 0)->dim_names[1]);
    assert_int_equal(bf_model_input(d, 0)->dims[2], 7);
    assert_true(bf_model_input(m, 0)->dims[2] < 0);   /* the base is untouched */
    bf_plan *p = NULL;
    if (bf_plan_create(d, 2, &p, &err) != BF_OK) fail_msg("%s", err.msg);
    const bf_tensor *y = bf_plan_output(p, 0);
    assert_int_equal(y->dims[1], 6);
    assert_int_equal(y->dims[2], 7);
    bf_plan_free(p);
    bf_model_free(d);
    const char *unknown[1] = {"batch"};   /* dim 0: the plan's batch, not fixed here */
    assert_int_equal(bf_model_with_dims(m, unknown, sizes, 1, &d, &err), BF_EINVAL);
    assert_null(d);
    assert_non_null(strstr(err.msg, "no graph input has a symbolic dimension 'batch' past dim 0"));
    assert_int_equal(bf_model_with_dims(m, names, bad, 2, &d, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'seq' given size -1"));
    bf_model_free(m);
}

/* A campaign on a model with the Loop inside (tests/fixtures/rint/
 * gqa_classifier_op14: keys fed with a dynamic head count and keys from a
 * Linear, each repeated by repeat_interleave, the dynamic axes fixed by
 * bf_model_with_dims at the eval set's sizes): the differential engine agrees with the exact
 * one trial by trial (test_diff.c's rules), for weight faults, faults in
 * the repeated keys (the fused node's output) and transient activation
 * faults anywhere. */
static void campaigns_agree_differential_and_exact(void **state)
{
    (void)state;
    bf_model *base = NULL, *m = NULL;
    bf_dataset *ds = NULL;
    tc_open_fixed(RINT "gqa_classifier_op14", (const char *[]){"seq", "heads"}, (const char *[]){"x", "kv"}, 2, &base, &m,
                  &ds);
    /* the Loop of kv's dynamic heads, and the unrolled form of x's two heads */
    assert_int_equal(th_count_op(m, "bf.RepeatInterleave"), 3);
    assert_int_equal(th_count_op(m, "Loop"), 0);
    double scale = tc_out_scale(m, ds);
    char *keys[] = {"op:bf.RepeatInterleave"};
    tc_tally t = {0};
    bf_campaign_spec s = tc_base_spec(5);
    s.seed = 3;
    s.trials = 80;
    tc_both(m, ds, scale, "gqa_classifier", &s, "weight bit flips, batch 5", &t, NULL);
    s = tc_base_spec(4);
    s.seed = 8;
    s.trials = 60;
    s.target = BF_TARGET_ACTIVATIONS;
    s.persistence = BF_PERSIST_TRANSIENT;
    s.tensors = keys;
    s.n_tensors = 1;
    tc_both(m, ds, scale, "gqa_classifier", &s, "transient faults in the repeated keys, batch 4", &t, NULL);
    s = tc_base_spec(4);
    s.seed = 12;
    s.trials = 60;
    s.target = BF_TARGET_ACTIVATIONS;
    s.persistence = BF_PERSIST_TRANSIENT;
    tc_both(m, ds, scale, "gqa_classifier", &s, "transient activation faults, batch 4", &t, NULL);
    tc_assert_agree("repeat_interleave model faults, differential vs exact", &t, 200);
    bf_model_free(m);
    bf_model_free(base);
    bf_dataset_free(ds);
}

/* Loading the Loop model, a plan and a run of it, and a derived model
 * with its dims fixed and a plan of that. */
static bf_status load_plan_derive(const unsigned char *buf, size_t len, const char *name, bf_error *err)
{
    bf_model *m = NULL, *d = NULL;
    bf_plan *p = NULL, *pd = NULL;
    bf_status st = bf_model_load_buffer(buf, len, name, &m, err);
    if (st == BF_OK) st = th_plan_for(m, (int64_t[]){2, 2, 5, 4}, 4, &p, err);
    if (st == BF_OK) st = bf_plan_run(p, err);
    const char *names[2] = {"heads", "seq"};
    const int64_t sizes[2] = {2, 5};
    if (st == BF_OK) st = bf_model_with_dims(m, names, sizes, 2, &d, err);
    if (st == BF_OK) st = bf_plan_create(d, 2, &pd, err);
    bf_plan_free(pd);
    bf_model_free(d);
    bf_plan_free(p);
    bf_model_free(m);
    return st;
}

static void allocation_failures_are_clean(void **state)
{
    (void)state;
    th_alloc_failures_loading(RINT "ok_loop_op14.onnx", 4000, load_plan_derive);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exports_compute_repeat_interleave),
        cmocka_unit_test(near_misses_stay_loops),
        cmocka_unit_test(hostile_files_say_why),
        cmocka_unit_test(output_is_a_fault_site),
        cmocka_unit_test(derived_model_fixes_dims),
        cmocka_unit_test(campaigns_agree_differential_and_exact),
        cmocka_unit_test(allocation_failures_are_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
