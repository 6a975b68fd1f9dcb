/* The evaluator on a real model (the demo digits CNN): results independent
 * of the thread count, faults gone after their pass, progress reported,
 * cancellation honoured, and a dataset that does not fit the model refused
 * with a message naming what is wrong. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"

#define MODEL BF_FIXTURES "/conformance/demo_digits.onnx"
#define DATA BF_FIXTURES "/conformance/demo_digits.eval.safetensors"

typedef struct fx {
    bf_model *m;
    bf_dataset *ds;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    bf_error err = {0};
    if (!f || bf_model_load_file(MODEL, &f->m, &err) || bf_dataset_load_file(DATA, &f->ds, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    bf_model_free(f->m);
    bf_dataset_free(f->ds);
    free(f);
    return 0;
}

static float *run_copy(bf_evaluator *ev, const bf_bitflip *flips, size_t n, bf_eval_result *r)
{
    bf_error err = {0};
    if (bf_evaluator_run(ev, flips, n, r, &err) != BF_OK) fail_msg("%s", err.msg);
    size_t bytes = (size_t)(r->samples * r->out_cols) * sizeof(float);
    float *copy = malloc(bytes);
    memcpy(copy, r->outputs, bytes);
    return copy;
}

static void threads_do_not_change_results(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bf_evaluator *e1 = NULL, *e2 = NULL;
    bf_eval_opts o1 = {.batch = 50, .threads = 1}, o2 = {.batch = 50, .threads = 2};
    assert_int_equal(bf_evaluator_create(f->m, f->ds, &o1, &e1, &err), BF_OK);
    assert_int_equal(bf_evaluator_create(f->m, f->ds, &o2, &e2, &err), BF_OK);
    assert_int_equal(bf_evaluator_task(e1), BF_TASK_CLASSIFICATION);
    bf_eval_result r1, r2;
    float *a = run_copy(e1, NULL, 0, &r1), *b = run_copy(e2, NULL, 0, &r2);
    assert_int_equal(r1.samples, 360);   /* 360 = 7 batches of 50 + 10: the partial-batch plan runs */
    assert_memory_equal(a, b, (size_t)(r1.samples * r1.out_cols) * sizeof(float));
    assert_true(r1.accuracy == r2.accuracy);
    assert_true(r1.accuracy > 0.9);
    free(a);
    free(b);
    bf_evaluator_free(e1);
    bf_evaluator_free(e2);
}

/* Plans that reuse an activation's memory after its last reader give the
 * very outputs of plans that keep every value, with faults too, on models
 * with branches and long-lived values (a residual network, a transformer
 * with masks, a bidirectional LSTM), and need less arena. */
static void shared_buffers_change_nothing(void **state)
{
    (void)state;
    static const char *const models[] = {"conformance/demo_digits", "real/resnet_basic", "real/transformer_full",
                                         "real/lstm", "real/densenet", "real/dlrm"};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        char mp[512], dp[512];
        snprintf(mp, sizeof mp, "%s/%s.onnx", BF_FIXTURES, models[k]);
        snprintf(dp, sizeof dp, "%s/%s.eval.safetensors", BF_FIXTURES, models[k]);
        bf_error err = {0};
        bf_model *m = NULL;
        bf_dataset *ds = NULL;
        if (bf_model_load_file(mp, &m, &err) || bf_dataset_load_file(dp, &ds, &err)) fail_msg("%s: %s", mp, err.msg);
        bf_evaluator *e1 = NULL, *e2 = NULL;
        bf_eval_opts o1 = {.batch = 7, .threads = 1}, o2 = {.batch = 7, .threads = 2, .share_buffers = 1};
        assert_int_equal(bf_evaluator_create(m, ds, &o1, &e1, &err), BF_OK);
        if (bf_evaluator_create(m, ds, &o2, &e2, &err) != BF_OK) fail_msg("%s: %s", mp, err.msg);
        bf_bitflip flip = {.param = 0, .index = 0, .bit = 30};
        for (int f = 0; f < 2; f++) {
            bf_eval_result r1, r2;
            float *a = run_copy(e1, f ? &flip : NULL, (size_t)f, &r1), *b = run_copy(e2, f ? &flip : NULL, (size_t)f, &r2);
            if (memcmp(a, b, (size_t)(r1.samples * r1.out_cols) * sizeof(float)) != 0)
                fail_msg("%s: shared plans give other outputs%s", models[k], f ? " under a fault" : "");
            free(a);
            free(b);
        }
        bf_job_budget j1, j2;
        assert_int_equal(bf_eval_estimate(m, ds, &o1, &j1, &err), BF_OK);
        o1.share_buffers = 1;
        assert_int_equal(bf_eval_estimate(m, ds, &o1, &j2, &err), BF_OK);
        assert_true(j2.plan.arena_bytes <= j1.plan.arena_bytes);
        if (k == 1) assert_true(j2.plan.arena_bytes * 2 < j1.plan.arena_bytes);   /* a deep CNN: far less */
        bf_evaluator_free(e1);
        bf_evaluator_free(e2);
        bf_model_free(m);
        bf_dataset_free(ds);
    }
}

/* Accuracy recomputed here from the outputs and the labels, independently
 * of bf_metric_accuracy. */
static void accuracy_matches_outputs(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bf_evaluator *ev = NULL;
    assert_int_equal(bf_evaluator_create(f->m, f->ds, NULL, &ev, &err), BF_OK);
    bf_eval_result r;
    float *out = run_copy(ev, NULL, 0, &r);
    const bf_tensor *labels = bf_dataset_find(f->ds, "labels");
    assert_int_equal(labels->dtype, BF_I64);
    int64_t right = 0;
    for (int64_t i = 0; i < r.samples; i++) {
        int64_t best = 0;
        for (int64_t j = 1; j < r.out_cols; j++)
            if (out[i * r.out_cols + j] > out[i * r.out_cols + best]) best = j;
        right += best == ((const int64_t *)labels->data)[i];
    }
    assert_true(fabs(r.accuracy - (double)right / (double)r.samples) < 1e-12);
    free(out);
    bf_evaluator_free(ev);
}

static void faults_last_one_pass(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bf_evaluator *ev = NULL;
    bf_eval_opts o = {.batch = 64, .threads = 2};
    assert_int_equal(bf_evaluator_create(f->m, f->ds, &o, &ev, &err), BF_OK);
    bf_eval_result r;
    float *golden = run_copy(ev, NULL, 0, &r);
    size_t bytes = (size_t)(r.samples * r.out_cols) * sizeof(float);
    /* the classifier bias: a fault there reaches every sample (a weight may
     * meet a feature that is always 0 and be masked) */
    int64_t fc = bf_model_find_param(f->m, "fc.bias");
    assert_true(fc >= 0);
    const float *model_fc = bf_model_param(f->m, (size_t)fc)->tensor->data;
    const float orig = model_fc[5];
    /* two exponent bits of one element: outputs must change */
    bf_bitflip flips[2] = {{.param = (size_t)fc, .index = 5, .bit = 30}, {.param = (size_t)fc, .index = 5, .bit = 29}};
    float *faulty = run_copy(ev, flips, 2, &r);
    assert_true(memcmp(golden, faulty, bytes) != 0);
    float *again = run_copy(ev, NULL, 0, &r);
    assert_memory_equal(golden, again, bytes);
    /* faults live in the plans: the shared model never changes */
    assert_true(model_fc[5] == orig);
    bf_bitflip bad = {.param = (size_t)fc, .index = 10, .bit = 3};   /* fc.bias has 10 elements */
    assert_int_equal(bf_evaluator_run(ev, &bad, 1, &r, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "fc.bias"));
    free(golden);
    free(faulty);
    free(again);
    bf_evaluator_free(ev);
}

typedef struct seen {
    int64_t calls, last, total;
    int *cancel_at_first;
} seen;

static void on_progress(void *user, int64_t done, int64_t total)
{
    seen *s = user;
    assert_true(done > s->last);
    s->calls++;
    s->last = done;
    s->total = total;
    if (s->cancel_at_first) bf_cancel_request(s->cancel_at_first);
}

static void progress_and_cancel(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    bf_evaluator *ev = NULL;
    seen s = {0};
    int cancel = 0;
    bf_eval_opts o = {.batch = 40, .threads = 1, .progress = on_progress, .progress_user = &s, .cancel = &cancel};
    assert_int_equal(bf_evaluator_create(f->m, f->ds, &o, &ev, &err), BF_OK);
    bf_eval_result r;
    assert_int_equal(bf_evaluator_run(ev, NULL, 0, &r, &err), BF_OK);
    assert_int_equal(s.calls, 9);          /* 360 samples / 40 */
    assert_int_equal(s.last, 360);
    assert_int_equal(s.total, 360);
    s = (seen){.cancel_at_first = &cancel};
    assert_int_equal(bf_evaluator_run(ev, NULL, 0, &r, &err), BF_ECANCELED);
    assert_int_equal(s.calls, 1);
    bf_evaluator_free(ev);
}

/* A dataset built in memory that lacks the model's input. */
static void dataset_mismatch_is_named(void **state)
{
    fx *f = *state;
    const char header[] = "{\"pixels\":{\"dtype\":\"F32\",\"shape\":[2,1,8,8],\"data_offsets\":[0,512]}}";
    size_t hl = sizeof header - 1, len = 8 + hl + 512;
    unsigned char *buf = calloc(1, len);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    bf_dataset *ds = NULL;
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    assert_int_equal(bf_dataset_load_buffer(buf, len, "mem.safetensors", &ds, &err), BF_OK);
    assert_int_equal(bf_evaluator_create(f->m, ds, NULL, &ev, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "'input'"));
    assert_non_null(strstr(err.msg, "'pixels'"));
    assert_null(ev);
    bf_dataset_free(ds);
    free(buf);
}

/* Writes tensors as safetensors into a malloc'ed buffer. */
static unsigned char *safetensors(const bf_tensor *const *ts, const char *const *names, const char *const *dtypes,
                                  int n, size_t *len)
{
    char header[2048];
    size_t off = 0, hl = 0, data = 0;
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "{");
    for (int i = 0; i < n; i++) {
        size_t nb = bf_tensor_nbytes(ts[i]);
        hl += (size_t)snprintf(header + hl, sizeof header - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
                               names[i], dtypes[i]);
        for (int d = 0; d < ts[i]->ndim; d++)
            hl += (size_t)snprintf(header + hl, sizeof header - hl, "%s%lld", d ? "," : "", (long long)ts[i]->dims[d]);
        hl += (size_t)snprintf(header + hl, sizeof header - hl, "],\"data_offsets\":[%zu,%zu]}", data, data + nb);
        data += nb;
    }
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "}");
    unsigned char *buf = calloc(1, 8 + hl + data);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    off = 8 + hl;
    for (int i = 0; i < n; i++) {
        memcpy(buf + off, ts[i]->data, bf_tensor_nbytes(ts[i]));
        off += bf_tensor_nbytes(ts[i]);
    }
    *len = off;
    return buf;
}

/* Integer 0/1 labels with a one-score model are a binary task: the same AUC
 * as with the float labels the fixture ships. */
static void integer_binary_labels(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL, *ds_int = NULL;
    bf_evaluator *e1 = NULL, *e2 = NULL;
    bf_error err = {0};
    assert_int_equal(bf_model_load_file(BF_FIXTURES "/conformance/dlrm_ops_op13.onnx", &m, &err), BF_OK);
    assert_int_equal(bf_dataset_load_file(BF_FIXTURES "/conformance/dlrm_ops_op13.eval.safetensors", &ds, &err), BF_OK);
    const bf_tensor *dense = bf_dataset_find(ds, "dense"), *sparse = bf_dataset_find(ds, "sparse");
    const bf_tensor *lf = bf_dataset_find(ds, "labels");
    assert_int_equal(lf->dtype, BF_F32);
    bf_tensor li = *lf;
    li.dtype = BF_I64;
    li.data = malloc((size_t)bf_tensor_numel(lf) * sizeof(int64_t));
    for (int64_t i = 0; i < bf_tensor_numel(lf); i++) ((int64_t *)li.data)[i] = (int64_t)((const float *)lf->data)[i];
    const bf_tensor *ts[3] = {dense, sparse, &li};
    const char *names[3] = {"dense", "sparse", "labels"}, *dts[3] = {"F32", "I64", "I64"};
    size_t len;
    unsigned char *buf = safetensors(ts, names, dts, 3, &len);
    assert_int_equal(bf_dataset_load_buffer(buf, len, "int-labels.safetensors", &ds_int, &err), BF_OK);
    assert_int_equal(bf_evaluator_create(m, ds, NULL, &e1, &err), BF_OK);
    if (bf_evaluator_create(m, ds_int, NULL, &e2, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_evaluator_task(e2), BF_TASK_BINARY);
    bf_eval_result r1, r2;
    assert_int_equal(bf_evaluator_run(e1, NULL, 0, &r1, &err), BF_OK);
    assert_int_equal(bf_evaluator_run(e2, NULL, 0, &r2, &err), BF_OK);
    assert_true(r1.auc == r2.auc && r1.logloss == r2.logloss);
    assert_true(r1.auc > 0.5);
    /* a label 2 with one score per sample is refused, naming it */
    ((int64_t *)li.data)[3] = 2;
    free(buf);
    buf = safetensors(ts, names, dts, 3, &len);
    bf_dataset_free(ds_int);
    ds_int = NULL;
    bf_evaluator_free(e2);
    e2 = NULL;
    assert_int_equal(bf_dataset_load_buffer(buf, len, "bad-labels.safetensors", &ds_int, &err), BF_OK);
    assert_int_equal(bf_evaluator_create(m, ds_int, NULL, &e2, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "labels[3] is 2"));
    free(buf);
    free(li.data);
    bf_evaluator_free(e1);
    bf_dataset_free(ds_int);
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_do_not_change_results),
        cmocka_unit_test(shared_buffers_change_nothing),
        cmocka_unit_test(accuracy_matches_outputs),
        cmocka_unit_test(faults_last_one_pass),
        cmocka_unit_test(progress_and_cancel),
        cmocka_unit_test(dataset_mismatch_is_named),
        cmocka_unit_test(integer_binary_labels),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
