/* The batch of a spec without "batch" (core/src/campaign/campaign_batch.c):
 * 64, halved while a batch's plan passes 64 MiB, down to 4; 64 for a model
 * that normalises with batch statistics.
 *
 * The graphs are built here so that a sample's bytes are known by
 * arithmetic: x [N, 16] times w [16], tiled R times ([N, 16R]), Relu,
 * reshaped to [N, R, 16] and averaged over R (a 16-class output). Tile's
 * and Relu's outputs take 64R bytes a sample each (Reshape's a third where
 * it copies), so a sample takes between 128R and 192R bytes plus a few
 * hundred:
 *   - R = 16: under 4 KiB a sample, so 64;
 *   - R = 8192: between 1 and 1.5 MiB, so 64 x that passes 64 MiB and 32
 *     x that does not: 32;
 *   - R = 65536: more than 8 MiB, so 4 (8 x 8 MiB passes 64 MiB).
 * With a BatchNormalization in training mode after the Reshape (R = 65536),
 * 64, capped at the eval set's 8 samples: 8, where the size alone says 4.
 *
 * A model whose second axis is symbolic (x [N, S] times w, tiled 64 times
 * to [N, 64S], Relu, averaged to 16 classes: 512S to 768S bytes a sample,
 * the shape of a language model's sequence axis) is sized at the S its eval
 * set binds (bf_model_bind_dims, as the CLI and the daemon call it before
 * the campaign): S = 16 gives 64, S = 32768 (16-24 MiB a sample) gives 4.
 *
 * What the default must not change: the records. The R = 65536 model's
 * 16 weight faults run at the default (4) and at "batch": 8 (the whole
 * eval set): every record the same bits. And `bf_campaign_estimate`, which
 * sizes the job before it runs, takes the same batch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"
#include "campaign_check.h"
#include "onnx_graph.h"
#include "st_build.h"

#define D 16

static bf_model *tiled(int64_t r, int batch_stats)
{
    tg_graph g = {0};
    g.opset = 14;   /* BatchNormalization's training_mode */
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, D});
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, (int64_t[]){-1, D});
    float w[D];
    for (int i = 0; i < D; i++) w[i] = 0.5f + 0.0625f * (float)i;
    tg_init_f32(&g, "w", 1, (int64_t[]){D}, w);
    tg_init_i64(&g, "reps", 1, (int64_t[]){2}, (int64_t[]){1, r});
    tg_node(&g, "Mul", "mul", (const char *[]){"x", "w"}, 2, "xw");
    tg_node(&g, "Tile", "tile", (const char *[]){"xw", "reps"}, 2, "t");
    tg_node(&g, "Relu", "relu", (const char *[]){"t"}, 1, "h");
    if (!batch_stats) {
        tg_init_i64(&g, "shape", 1, (int64_t[]){3}, (int64_t[]){0, r, D});
        tg_node(&g, "Reshape", "reshape", (const char *[]){"h", "shape"}, 2, "h3");
        Onnx__NodeProto *m = tg_node(&g, "ReduceMean", "mean", (const char *[]){"h3"}, 1, "y");
        tg_attr_ints(&g, m, "axes", 1, (int64_t[]){1});
        tg_attr_int(&g, m, "keepdims", 0);
    } else {   /* channels first for the BatchNormalization: [N, 16, R] */
        float one[D], zero[D];
        for (int i = 0; i < D; i++) one[i] = 1.0f, zero[i] = 0.0f;
        tg_init_f32(&g, "scale", 1, (int64_t[]){D}, one);
        tg_init_f32(&g, "bias", 1, (int64_t[]){D}, zero);
        tg_init_f32(&g, "mean", 1, (int64_t[]){D}, zero);
        tg_init_f32(&g, "var", 1, (int64_t[]){D}, one);
        tg_init_i64(&g, "shape", 1, (int64_t[]){3}, (int64_t[]){0, D, r});
        tg_node(&g, "Reshape", "reshape", (const char *[]){"h", "shape"}, 2, "h3");
        Onnx__NodeProto *bn =
            tg_node(&g, "BatchNormalization", "bn", (const char *[]){"h3", "scale", "bias", "mean", "var"}, 5, "b");
        tg_attr_int(&g, bn, "training_mode", 1);
        Onnx__NodeProto *m = tg_node(&g, "ReduceMean", "mean", (const char *[]){"b"}, 1, "y");
        tg_attr_ints(&g, m, "axes", 1, (int64_t[]){2});
        tg_attr_int(&g, m, "keepdims", 0);
    }
    return tg_load(&g, "tiled");
}

/* x [N, S] (S symbolic) times w [1], tiled to [N, 64 S], Relu, reshaped to
 * [N, 4 S, 16] and averaged over its middle axis */
static bf_model *tiled_seq(void)
{
    tg_graph g = {0};
    g.opset = 14;
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, -2});
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, (int64_t[]){-1, D});
    tg_init_f32(&g, "w", 1, (int64_t[]){1}, (float[]){0.75f});
    tg_init_i64(&g, "reps", 1, (int64_t[]){2}, (int64_t[]){1, 64});
    tg_init_i64(&g, "shape", 1, (int64_t[]){3}, (int64_t[]){0, -1, D});
    tg_node(&g, "Mul", "mul", (const char *[]){"x", "w"}, 2, "xw");
    tg_node(&g, "Tile", "tile", (const char *[]){"xw", "reps"}, 2, "t");
    tg_node(&g, "Relu", "relu", (const char *[]){"t"}, 1, "h");
    tg_node(&g, "Reshape", "reshape", (const char *[]){"h", "shape"}, 2, "h3");
    Onnx__NodeProto *m = tg_node(&g, "ReduceMean", "mean", (const char *[]){"h3"}, 1, "y");
    tg_attr_ints(&g, m, "axes", 1, (int64_t[]){1});
    tg_attr_int(&g, m, "keepdims", 0);
    return tg_load(&g, "tiled_seq");
}

/* n samples of x [n, d] (varied, some negative so the Relu masks) and labels */
static bf_dataset *eval_set_d(int64_t n, int64_t d)
{
    float *x = malloc((size_t)(n * d) * sizeof *x);
    int64_t *lab = malloc((size_t)n * sizeof *lab);
    assert_non_null(x);
    assert_non_null(lab);
    for (int64_t i = 0; i < n * d; i++) x[i] = (float)((i * 37) % 23) * 0.125f - 1.0f;
    for (int64_t i = 0; i < n; i++) lab[i] = (i * 5) % D;
    th_st_tensor t[] = {{"x", "F32", 2, {n, d}, x, (size_t)(n * d) * sizeof *x},
                        {"labels", "I64", 1, {n}, lab, (size_t)n * sizeof *lab}};
    size_t len;
    uint8_t *buf = th_st_build(t, 2, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, len, "tiled", &ds, &err) != BF_OK) fail_msg("eval set: %s", err.msg);
    free(buf);
    free(lab);
    free(x);
    return ds;
}

/* n samples of x (varied, some negative so the Relu masks) and labels */
static bf_dataset *eval_set(int64_t n) { return eval_set_d(n, D); }

/* the batch a campaign of spec s settles on, checked against the job
 * estimate's */
static int64_t settled(const bf_model *m, const bf_dataset *ds, bf_campaign_spec s)
{
    bf_job_budget jb;
    bf_error err = {0};
    if (bf_campaign_estimate(m, ds, &s, NULL, &jb, &err) != BF_OK) fail_msg("estimate: %s", err.msg);
    bf_campaign *c = tc_make(m, ds, &s);
    int64_t b = bf_campaign_batch(c);
    assert_int_equal(jb.batch, b);
    bf_campaign_free(c);
    return b;
}

static bf_campaign_spec spec(int64_t batch)
{
    bf_campaign_spec s = tc_uniform_spec(batch);
    s.trials = 16;
    return s;
}

static void default_follows_sample_size(void **state)
{
    (void)state;
    bf_dataset *ds = eval_set(64);
    bf_model *small = tiled(16, 0), *mid = tiled(8192, 0);
    assert_int_equal(settled(small, ds, spec(0)), 64);
    assert_int_equal(settled(mid, ds, spec(0)), 32);
    assert_int_equal(settled(mid, ds, spec(64)), 64);   /* the spec's batch is kept */
    bf_model_free(mid);
    bf_model_free(small);
    bf_dataset_free(ds);
}

/* the rule sizes a symbolic axis at the eval set's length */
static void default_follows_bound_dims(void **state)
{
    (void)state;
    int64_t lens[] = {16, 32768}, want[] = {64, 4};
    for (int k = 0; k < 2; k++) {
        bf_dataset *ds = eval_set_d(64, lens[k]);
        bf_model *m = tiled_seq();
        bf_error err = {0};
        if (bf_model_bind_dims(&m, ds, &err) != BF_OK) fail_msg("bind: %s", err.msg);
        assert_int_equal(settled(m, ds, spec(0)), want[k]);
        bf_model_free(m);
        bf_dataset_free(ds);
    }
}

static void batch_statistics_keep_64(void **state)
{
    (void)state;
    bf_dataset *ds = eval_set(8);
    bf_model *big = tiled(65536, 0), *bn = tiled(65536, 1);
    assert_int_equal(bf_model_batch_statistics(bn), 1);
    assert_int_equal(settled(big, ds, spec(0)), 4);
    assert_int_equal(settled(bn, ds, spec(0)), 8);   /* 64, capped at the eval set */
    bf_model_free(bn);
    bf_model_free(big);
    bf_dataset_free(ds);
}

static void run(const bf_model *m, const bf_dataset *ds, int64_t batch, int64_t want_batch, tc_recs *out)
{
    bf_campaign_spec s = spec(batch);
    bf_campaign *c = tc_make(m, ds, &s);
    assert_int_equal(bf_campaign_batch(c), want_batch);
    out->r = calloc((size_t)s.trials, sizeof *out->r);
    assert_non_null(out->r);
    out->n = 0;
    bf_error err = {0};
    bf_campaign_result res;
    bf_campaign_opts o = {.threads = 1, .on_trial = tc_keep, .user = out};
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(out->n, s.trials);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
}

static void default_same_records(void **state)
{
    (void)state;
    bf_dataset *ds = eval_set(8);
    bf_model *big = tiled(65536, 0);
    tc_recs a = {0}, b = {0};
    run(big, ds, 0, 4, &a);
    run(big, ds, 8, 8, &b);
    int changed = 0;
    for (int64_t t = 0; t < a.n; t++) {
        tc_assert_same_record(&a.r[t], &b.r[t]);
        changed += a.r[t].outcome != BF_OUTCOME_MASKED;
    }
    assert_true(changed > 0);   /* some fault moved an output: the records compare something */
    free(a.r);
    free(b.r);
    bf_model_free(big);
    bf_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_follows_sample_size),
        cmocka_unit_test(default_follows_bound_dims),
        cmocka_unit_test(batch_statistics_keep_64),
        cmocka_unit_test(default_same_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
