/* The golden cache kept to what a campaign's drawn faults read
 * (core/src/diff/gcache.c, diffshared.c; docs/ENGINE.md step 1).
 *
 * What must hold: told the values its faults strike (roots), the cache
 * holds only values the trials can read, listed here by hand from the
 * fixture's graph (the values downstream of the fault, and the other
 * inputs of the steps computing them), and the golden outputs are still
 * a plain pass's; with lean, a Conv followed by its activation alone is
 * run fused by the pass, the Conv's output left out and the activation
 * stored, its blocks the Relu of the Conv's golden output computed by
 * hand. A campaign prepared for one shard (bf_campaign_prep's shard) caches
 * what the faults of that shard's trials alone read: the same bytes as a
 * cache told those trials' fault tensors here, its records those of the
 * exact engine, and a run of another shard makes its own cache and gives
 * the exact records too; one prepared for every trial serves any shard. That trials on such caches equal full re-runs is asserted by
 * test_diff (every differential campaign is now told its faults) and
 * docs/perf/trials.md (resnet18, mobilenet_v2, LRASPP, ViT records the
 * same bytes as the build before). */
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
#include "campaign_check.h"
#include "bitflip/eval.h"
#include "bitflip/model.h"
#include "diff/diff.h"
#include "diff/diff_impl.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"
#include "model/graph.h"

#define FIX BF_FIXTURES "/conformance/"
#define BATCH 7   /* several batches and a partial last one */

static void load(const char *name, bf_model **m, bf_dataset **ds, bf_eval_result *plain)
{
    char path[512];
    bf_error err = {0};
    snprintf(path, sizeof path, FIX "%s.onnx", name);
    if (bf_model_load_file(path, m, &err) != BF_OK) fail_msg("%s: %s", path, err.msg);
    snprintf(path, sizeof path, FIX "%s.eval.safetensors", name);
    if (bf_dataset_load_file(path, ds, &err) != BF_OK) fail_msg("%s: %s", path, err.msg);
    bf_eval_opts po = {.batch = BATCH, .threads = 1, .share_buffers = 1};
    bf_evaluator *pe = NULL;
    if (bf_evaluator_create(*m, *ds, &po, &pe, &err) != BF_OK || bf_evaluator_run(pe, NULL, 0, plain, &err) != BF_OK)
        fail_msg("%s: %s", name, err.msg);
    /* the result's outputs are the evaluator's: kept by copying */
    size_t n = (size_t)(plain->samples * plain->out_cols) * sizeof(float);
    float *o = malloc(n + 1);
    assert_non_null(o);
    memcpy(o, plain->outputs, n);
    plain->outputs = o;
    bf_evaluator_free(pe);
}

static bf_evaluator *golden_ev(const bf_model *m, const bf_dataset *ds)
{
    bf_eval_opts eo = {.batch = BATCH, .threads = 1};
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    if (bf_evaluator_create(m, ds, &eo, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
    return ev;
}

static int listed(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, list[i]) == 0) return 1;
    return 0;
}

/* cnn_ops_op17 with faults in conv4.weight alone: conv4 reads Add_1 and
 * feeds Relu_3, Flatten_2, the Concat (which reads the two other
 * Flattens), fc1, bn3, Relu_4 and fc2's logits; nothing upstream of
 * conv4 but those inputs is read by such a trial. */
static void roots_keep_what_the_faults_read(void **state)
{
    (void)state;
    static const char *const read[] = {
        "/Add_1_output_0",    "/conv4/Conv_output_0", "/Relu_3_output_0", "/Flatten_2_output_0",
        "/Flatten_output_0",  "/Flatten_1_output_0",  "/Concat_output_0", "/fc1/Gemm_output_0",
        "/bn3/BatchNormalization_output_0", "/Relu_4_output_0", "logits"};
    const size_t n_read = sizeof read / sizeof *read;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_eval_result plain;
    bf_error err = {0};
    load("cnn_ops_op17", &m, &ds, &plain);
    size_t out_bytes = (size_t)(plain.samples * plain.out_cols) * sizeof(float);
    unsigned char *roots = calloc(m->n_values + 1, 1);
    assert_non_null(roots);
    int64_t q = bf_model_find_param(m, "conv4.weight");
    assert_true(q >= 0);
    roots[m->param_vals[q]] = 1;
    bf__dx_shared *sh[2] = {NULL};
    bf_evaluator *ev[2];
    float *gold[2];
    for (int k = 0; k < 2; k++) {   /* told the roots, and not */
        ev[k] = golden_ev(m, ds);
        gold[k] = malloc(out_bytes + 1);
        assert_non_null(gold[k]);
        memset(gold[k], 0xA5, out_bytes);
        if (bf__dx_shared_golden(&ev[k], 1, plain.samples, plain.out_cols, BF_CACHE_BUDGET_DEFAULT, k ? NULL : roots, NULL,
                                 gold[k], 0, &sh[k], &err) != BF_OK)
            fail_msg("%s", err.msg);
        assert_memory_equal(gold[k], plain.outputs, out_bytes);
    }
    const bf__gcache *g = bf__dx_shared_cache(sh[0]), *all = bf__dx_shared_cache(sh[1]);
    size_t held = 0, outside = 0;
    for (size_t v = 0; v < m->n_values; v++) {
        const char *name = m->values[v].name;
        if (bf__gcache_has(g, (int64_t)v)) {
            if (!listed(name, read, n_read)) fail_msg("the cache holds '%s', which no trial of conv4 reads", name);
            held++;
        }
        outside += bf__gcache_has(all, (int64_t)v) && !listed(name, read, n_read);
        /* what it would hold told nothing: the cache without roots */
        assert_int_equal(bf__gcache_planned(g, (int64_t)v), bf__gcache_has(all, (int64_t)v));
    }
    /* conv4's golden input, and the class scores, are read by every such trial */
    assert_true(bf__gcache_has(g, bf_model_find_value(m, "/Add_1_output_0")));
    assert_true(bf__gcache_has(g, bf_model_find_value(m, "logits")));
    assert_int_equal(held, n_read);   /* every one of them fits the default budget */
    assert_true(outside > 0);   /* the values upstream, which the cache holds when told nothing */
    assert_true(bf__gcache_served(g) < bf__gcache_served(all));
    printf("cnn_ops_op17, faults in conv4.weight: %zu values cached (%zu MiB served), %zu more without roots\n", held,
           bf__gcache_served(g) >> 20, outside);
    for (int k = 0; k < 2; k++) {
        bf__dx_shared_free(sh[k]);
        bf_evaluator_free(ev[k]);
        free(gold[k]);
    }
    free(roots);
    free((void *)plain.outputs);
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* cnn_ops_op17, faults in one Conv's weight, what such trials read when
 * the far values are left out (bf__dx_want_values with trim, which the
 * golden pass takes where no chain can be made: resnet18's and
 * mobilenet_v2's wide maps; on this fixture chains start at conv4, so its
 * pass keeps them, above), listed by hand from the graph: the golden
 * inputs of the steps the fault reaches (those the fault does not reach),
 * the values it may move in one channel alone (the Conv's output and what
 * Relu, MaxPool, BatchNormalization and an Add of a golden operand make of
 * it: each keeps the change in its channel), and the class scores (the
 * campaign's golden outputs). Past the first step that mixes channels (a
 * Conv, Flatten, Gemm) a trial only compares with golden: those values
 * are left out. That a trial stays exact on a cache lacking any value is
 * test_diff's tiny_cache_matches_default (a one-byte cache). */
typedef struct roots_case {
    const char *param;
    const char *read[12];
} roots_case;

static const roots_case ROOTS_CASES[] = {
    /* conv4 reads Add_1 and feeds Relu_3; Flatten_2 mixes; the Concat's
     * other inputs are golden; fc1, bn3, Relu_4 compared no more */
    {"conv4.weight",
     {"/Add_1_output_0", "/conv4/Conv_output_0", "/Relu_3_output_0", "/Flatten_output_0", "/Flatten_1_output_0",
      "logits"}},
    /* conv2 reads bn1's output; Relu_1 and the Add of MaxPool's golden
     * output keep the channel; conv3 mixes, and nothing after it is read
     * golden by this trial: every step from conv3 on reads a moved value */
    {"conv2.weight",
     {"/bn1/BatchNormalization_output_0", "/conv2/Conv_output_0", "/Relu_1_output_0", "/MaxPool_output_0",
      "/Add_output_0", "logits"}},
};

static void far_values_left_out(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_eval_result plain;
    bf_error err = {0};
    load("cnn_ops_op17", &m, &ds, &plain);
    bf_evaluator *ev = golden_ev(m, ds);
    const bf_plan *p = bf__evaluator_plan(ev, 0);
    unsigned char *roots = calloc(m->n_values + 1, 1);
    assert_non_null(roots);
    for (size_t c = 0; c < sizeof ROOTS_CASES / sizeof *ROOTS_CASES; c++) {
        const roots_case *rc = &ROOTS_CASES[c];
        size_t n_read = 0;
        while (n_read < 12 && rc->read[n_read]) n_read++;
        int64_t q = bf_model_find_param(m, rc->param);
        assert_true(q >= 0);
        memset(roots, 0, m->n_values);
        roots[m->param_vals[q]] = 1;
        unsigned char *want = NULL, *all = NULL;
        if (bf__dx_want_values(p, roots, 1, &want, &err) != BF_OK || bf__dx_want_values(p, roots, 0, &all, &err) != BF_OK)
            fail_msg("%s", err.msg);
        assert_non_null(want);
        assert_non_null(all);
        size_t kept = 0, more = 0;
        for (size_t v = 0; v < m->n_values; v++) {
            if (p->val_step[v] < 0) continue;   /* inputs, parameters: not the cache's */
            const char *name = m->values[v].name;
            if (want[v] != listed(name, rc->read, n_read))
                fail_msg("%s: '%s' %s", rc->param, name, want[v] ? "kept, which no such trial reads golden"
                                                                : "left out, which such a trial reads");
            assert_true(!want[v] || all[v]);   /* a subset of what it keeps without trim */
            kept += want[v];
            more += all[v] && !want[v];
        }
        assert_int_equal(kept, n_read);
        assert_true(more > 0);
        printf("cnn_ops_op17, faults in %s: %zu values kept with the far ones left out, %zu more without\n", rc->param,
               kept, more);
        free(want);
        free(all);
    }
    free(roots);
    bf_evaluator_free(ev);
    free((void *)plain.outputs);
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* demo_digits (Conv, Relu, Conv, Relu, MaxPool, Flatten, Gemm) built lean
 * with every value wanted: both Convs are followed by their Relu alone, so
 * neither Conv's output is cached, both Relus' are stored by the pass (not
 * derived), and each block is the Relu of the Conv's golden output (a
 * cache built without lean stores that), by hand. */
static void lean_pairs_store_the_activation(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_eval_result plain;
    bf_error err = {0};
    load("demo_digits", &m, &ds, &plain);
    size_t out_bytes = (size_t)(plain.samples * plain.out_cols) * sizeof(float), nv = m->n_values;
    unsigned char *want = malloc(nv + 1);
    assert_non_null(want);
    memset(want, 1, nv);
    bf__gcache *gc[2] = {NULL};
    bf_evaluator *ev[2];
    float *gold[2];
    for (int lean = 0; lean < 2; lean++) {
        ev[lean] = golden_ev(m, ds);
        bf_plan *full = bf__evaluator_plan(ev[lean], 0), *rest = bf__evaluator_plan(ev[lean], 1);
        const bf_tensor *feeds[1] = {bf__evaluator_feed(ev[lean], 0)};
        gold[lean] = malloc(out_bytes + 1);
        assert_non_null(gold[lean]);
        memset(gold[lean], 0xA5, out_bytes);
        if (bf__gcache_build(&full, rest ? &rest : NULL, 1, feeds, plain.samples, BF_CACHE_BUDGET_DEFAULT, NULL, want,
                             lean, NULL, NULL, NULL, gold[lean], NULL, 0, &gc[lean], &err) != BF_OK)
            fail_msg("%s", err.msg);
        assert_memory_equal(gold[lean], plain.outputs, out_bytes);
    }
    static const char *const conv[] = {"/conv1/Conv_output_0", "/conv2/Conv_output_0"};
    static const char *const relu[] = {"/Relu_output_0", "/Relu_1_output_0"};
    int64_t batches = bf__gcache_batches(gc[1]);
    bf_plan *p0 = bf__evaluator_plan(ev[1], 0), *p1 = bf__evaluator_plan(ev[1], 1);
    for (int k = 0; k < 2; k++) {
        int64_t c = bf_model_find_value(m, conv[k]), r = bf_model_find_value(m, relu[k]);
        assert_true(c >= 0 && r >= 0);
        assert_false(bf__gcache_has(gc[1], c));
        assert_true(bf__gcache_stored(gc[1], r));
        assert_true(bf__gcache_stored(gc[0], c));   /* without lean: the Conv's stored, */
        assert_false(bf__gcache_stored(gc[0], r));  /* its Relu derived */
        for (int64_t b = 0; b < batches; b++) {
            const bf_plan *p = b == batches - 1 && p1 ? p1 : p0;
            int64_t n = bf_tensor_numel(bf_plan_value(p, r));
            const float *x = bf__gcache_block(gc[0], c, b), *y = bf__gcache_block(gc[1], r, b);
            assert_non_null(x);
            assert_non_null(y);
            for (int64_t e = 0; e < n; e++) {
                float want_e = x[e] > 0.0f ? x[e] : 0.0f;
                assert_memory_equal(&y[e], &want_e, sizeof want_e);
            }
        }
    }
    /* what lean leaves out, it leaves out of what it serves too */
    assert_true(bf__gcache_served(gc[1]) < bf__gcache_served(gc[0]));
    for (int k = 0; k < 2; k++) {
        bf__gcache_free(gc[k]);
        bf_evaluator_free(ev[k]);
        free(gold[k]);
    }
    free(want);
    free((void *)plain.outputs);
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* The bytes a golden pass on cnn_ops_op17 serves when told the tensors of
 * the faults in records r[0..n) whose trial is `shard` mod `count` (count 0:
 * every one), by name. */
static size_t served_for(const bf_model *m, const bf_dataset *ds, const bf_campaign *c, const bf_trial_record *r,
                         int64_t n, int64_t shard, int64_t count, const bf_eval_result *plain)
{
    unsigned char *roots = calloc(m->n_values + 1, 1);
    float *gold = malloc((size_t)(plain->samples * plain->out_cols) * sizeof(float) + 1);
    assert_true(roots && gold);
    for (int64_t t = 0; t < n; t++) {
        if (count && r[t].trial % count != shard) continue;
        for (int k = 0; k < r[t].n_kept; k++) {
            int64_t q = bf_model_find_param(m, bf_campaign_site(c, (size_t)r[t].faults[k].site)->name);
            assert_true(q >= 0);
            roots[m->param_vals[q]] = 1;
        }
    }
    bf_evaluator *ev = golden_ev(m, ds);
    bf__dx_shared *sh = NULL;
    bf_error err = {0};
    if (bf__dx_shared_golden(&ev, 1, plain->samples, plain->out_cols, BF_CACHE_BUDGET_DEFAULT, roots, NULL, gold, 0, &sh,
                             &err) != BF_OK)
        fail_msg("%s", err.msg);
    size_t b = bf__gcache_served(bf__dx_shared_cache(sh));
    bf__dx_shared_free(sh);
    bf_evaluator_free(ev);
    free(gold);
    free(roots);
    return b;
}

/* cnn_ops_op17, uniform single-bit weight faults, 3 shards: each shard's
 * prepared golden pass holds what its own trials' fault tensors read (a
 * draw of any other trials, all of them or the wrong residue, gives another
 * cache on this draw, checked below), its run adopts it and gives the exact
 * engine's records; the next shard's run on it makes its own cache, exact
 * too. */
static void shard_caches_its_own_trials(void **state)
{
    (void)state;
    enum { TRIALS = 12, SHARDS = 3 };
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_eval_result plain;
    bf_error err = {0};
    load("cnn_ops_op17", &m, &ds, &plain);
    char *all[] = {"*"};
    bf_campaign_spec s = tc_base_spec(BATCH);
    s.seed = 5;
    s.trials = TRIALS;
    s.tensors = all;
    s.n_tensors = 1;
    bf_campaign *ce = tc_make(m, ds, &s);
    bf_trial_record ref[TRIALS];
    tc_recs kr = {ref, 0};
    bf_campaign_result res;
    bf_campaign_opts eo = {.threads = 1, .exact = 1, .on_trial = tc_keep, .user = &kr};
    if (bf_campaign_run(ce, &eo, &res, &err) != BF_OK) fail_msg("%s", err.msg);
    bf_campaign_result_free(&res);
    assert_int_equal(kr.n, TRIALS);
    size_t whole = served_for(m, ds, ce, ref, TRIALS, 0, 0, &plain), parts[SHARDS];
    for (int64_t i = 0; i < SHARDS; i++) {
        parts[i] = served_for(m, ds, ce, ref, TRIALS, i, SHARDS, &plain);
        /* prepared for this shard: its run, then the next shard's; then
         * prepared for every trial (as bitflipd's workers are): this shard's */
        for (int other = 0; other < 3; other++) {
            int64_t run_i = other == 1 ? (i + 1) % SHARDS : i;
            bf_campaign_prep prep = {.differential = 1, .threads = 1, .shard_index = i,
                                     .shard_count = other == 2 ? 0 : SHARDS};
            bf_campaign *c = NULL;
            if (bf_campaign_create_prepared(m, ds, &s, NULL, &prep, &c, &err) != BF_OK) fail_msg("%s", err.msg);
            bf_trial_record got[TRIALS];
            tc_recs kg = {got, 0};
            bf_campaign_opts o = {.threads = 1, .shard_index = run_i, .shard_count = SHARDS, .on_trial = tc_keep,
                                  .user = &kg};
            if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s", err.msg);
            assert_int_equal(kg.n, TRIALS / SHARDS);
            for (int64_t k = 0; k < kg.n; k++) {
                assert_int_equal(got[k].trial, run_i + k * SHARDS);
                tc_assert_same_record(&got[k], &ref[got[k].trial]);
            }
            /* adopted: the cache its own trials' faults read, or every
             * trial's; else made by the run, told of no faults (the cache
             * that holds most) */
            if (other == 0) assert_int_equal(res.cache_bytes, parts[i]);
            else if (other == 1) assert_true(res.cache_bytes >= whole);
            else assert_int_equal(res.cache_bytes, whole);
            bf_campaign_result_free(&res);
            bf_campaign_free(c);
        }
    }
    /* the draw has shards that read less than the whole campaign, and
     * different caches per shard, or the checks above would not tell a
     * shard's draw from another's */
    assert_true(parts[0] != parts[1] || parts[1] != parts[2]);
    assert_true(parts[0] < whole || parts[1] < whole || parts[2] < whole);
    printf("cnn_ops_op17, %d trials: %zu bytes served for all, %zu, %zu, %zu for the shards\n", TRIALS, whole, parts[0],
           parts[1], parts[2]);
    bf_campaign_free(ce);
    free((void *)plain.outputs);
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(roots_keep_what_the_faults_read),
        cmocka_unit_test(far_values_left_out),
        cmocka_unit_test(lean_pairs_store_the_activation),
        cmocka_unit_test(shard_caches_its_own_trials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
