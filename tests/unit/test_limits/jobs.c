/* test_limits: a job's and a campaign's estimates. */
#include "test_limits.h"

/* --- jobs: the sum of their plans, outputs, cache and inputs */

void job_estimates_add_up(void **state)
{
    (void)state;
    wb m = small_plan_model();
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(load(&m, NULL, &mod, &err), BF_OK);
    /* 10 samples of x[3] */
    const char *hdr = "{\"x\": {\"dtype\": \"F32\", \"shape\": [10, 3], \"data_offsets\": [0, 120]}}";
    size_t len;
    unsigned char *f = st_file(hdr, 120, &len);
    bf_dataset *ds = NULL;
    assert_int_equal(bf_dataset_load_buffer(f, len, "d", &ds, &err), BF_OK);
    bf_plan_budget p4, p2;
    assert_int_equal(bf_plan_estimate(mod, 4, &p4, &err), BF_OK);
    assert_int_equal(bf_plan_estimate(mod, 2, &p2, &err), BF_OK);

    /* eval at batch 4 on one thread: batches of 4, 4 and 2 */
    bf_job_budget b;
    bf_eval_opts eo = {.batch = 4, .threads = 1};
    assert_int_equal(bf_eval_estimate(mod, ds, &eo, &b, &err), BF_OK);
    assert_int_equal(b.batch, 4);
    assert_int_equal(b.rest, 2);
    assert_int_equal(b.model_bytes, 12 + 8);          /* c: 3 floats; shp: one int64 */
    assert_int_equal(b.dataset_bytes, 120);
    assert_int_equal(b.plans_bytes, p4.total_bytes + p2.total_bytes);
    assert_int_equal(b.outputs_bytes, 10 * 3 * 4);    /* y over the set */
    assert_int_equal(b.cache_bytes, 0);
    assert_int_equal(b.total_bytes, 20 + 120 + p4.total_bytes + p2.total_bytes + 120);

    /* a campaign on 2 threads: each worker holds both plans and the
     * outputs, and the campaign the golden outputs (the golden pass's
     * evaluators become the workers'); the cache is the smaller of its
     * budget and an arena per batch (3 batches of p4's arena) */
    bf_campaign_spec spec = {.batch = 4, .target = BF_TARGET_WEIGHTS, .repr = BF_REPR_FP16};
    bf_campaign_opts co = {.threads = 2, .cache_budget = 100};
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.plans_bytes, 2 * (p4.total_bytes + p2.total_bytes));
    assert_int_equal(b.outputs_bytes, 3 * 10 * 3 * 4);
    assert_int_equal(b.cache_bytes, 100);
    assert_int_equal(b.weights_bytes, 12 + 1);        /* c as stored in fp16 (a float buffer, +1) */
    co.cache_budget = (int64_t)1 << 30;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.cache_bytes, 3 * p4.arena_bytes);
    co.exact = 1;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.cache_bytes, 0);
    assert_int_equal(b.total_bytes, 20 + 120 + 13 + 2 * (p4.total_bytes + p2.total_bytes) + 360);
    bf_dataset_free(ds);
    free(f);
    bf_model_free(mod);
    free(m.p);
}

/* x[batch, 3] -> MatMul [3, 512] -> Relu -> MatMul [512, 1]: activations
 * of 4 KiB a sample against an output of 4 bytes, so a plan outweighs the
 * run's bookkeeping (its trial slots, about 420 KiB a thread, and a few
 * bytes a sample) many times over. */
static wb wide_mlp_model(void)
{
    enum { H = 512 };
    static float w1[3 * H], w2[H];
    for (int i = 0; i < 3 * H; i++) w1[i] = (float)(i % 7) * 0.125f - 0.375f;
    for (int i = 0; i < H; i++) w2[i] = (float)(i % 5) * 0.25f - 0.5f;
    wb g = {0};
    int64_t d1[2] = {3, H}, d2[2] = {H, 1}, x[2] = {-1, 3}, y[2] = {-1, 1};
    tensor(&g, 5, "w1", 1, 2, d1, w1, sizeof w1);
    tensor(&g, 5, "w2", 1, 2, d2, w2, sizeof w2);
    node(&g, (nodespec){"MatMul", "fc1", {"x", "w1"}, "h"}, NULL);
    node(&g, (nodespec){"Relu", "act", {"h"}, "r"}, NULL);
    node(&g, (nodespec){"MatMul", "fc2", {"r", "w2"}, "y"}, NULL);
    value_info(&g, 11, "x", 2, x);
    value_info(&g, 12, "y", 2, y);
    return model(&g);
}

/* x [?, 300] -> MatMul(w [300, 20]) (300 deep, so the product packs w
 * whole, exec/ops/sgemm.c: past KDIRECT, once per model, base/wpack.h), or
 * with transposed: MatMul(x, Transpose(w [20, 300])), whose Transpose(w)
 * is a parameter-only value (diff/dxparam.c), 24,000 bytes. */
static wb x300_model(int transposed)
{
    static float w[300 * 20];
    for (int i = 0; i < 300 * 20; i++) w[i] = (float)(i % 9) * 0.125f - 0.5f;
    wb g = {0};
    int64_t dw[2] = {300, 20}, dt[2] = {20, 300}, x[2] = {-1, 300}, y[2] = {-1, 20};
    tensor(&g, 5, "w", 1, 2, transposed ? dt : dw, w, sizeof w);
    if (transposed) node(&g, (nodespec){"Transpose", "t", {"w"}, "wt"}, NULL);
    node(&g, (nodespec){"MatMul", "fc", {"x", transposed ? "wt" : "w"}, "y"}, NULL);
    value_info(&g, 11, "x", 2, x);
    value_info(&g, 12, "y", 2, y);
    return model(&g);
}

/* The model and `samples` rows of x [300] (small integers) as an eval set. */
static bf_model *x300_job(int transposed, int samples, wb *m, unsigned char **f, bf_dataset **ds)
{
    bf_model *mod = NULL;
    bf_error err = {0};
    *m = x300_model(transposed);
    assert_int_equal(load(m, NULL, &mod, &err), BF_OK);
    char hdr[128];
    snprintf(hdr, sizeof hdr, "{\"x\": {\"dtype\": \"F32\", \"shape\": [%d, 300], \"data_offsets\": [0, %d]}}",
             samples, samples * 1200);
    size_t len;
    *f = st_file(hdr, (size_t)samples * 1200, &len);
    for (int i = 0; i < samples * 300; i++) {
        float v = (float)(i % 7) - 3.0f;
        memcpy(*f + len - (size_t)samples * 1200 + (size_t)i * 4, &v, 4);
    }
    assert_int_equal(bf_dataset_load_buffer(*f, len, "d", ds, &err), BF_OK);
    return mod;
}

/* The packed weights in a job's estimate: w packed in 16-column panels,
 * 300 x 32 floats (38,400 bytes), counted once for the model whatever the
 * threads (the copy is shared), not in any plan's total. */
void packed_weights_counted_once(void **state)
{
    (void)state;
    enum { SAMPLES = 64, PACKED = 300 * 32 * 4 };
    wb m;
    unsigned char *f;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    bf_model *mod = x300_job(0, SAMPLES, &m, &f, &ds);
    bf_plan_budget p32;
    assert_int_equal(bf_plan_estimate(mod, 32, &p32, &err), BF_OK);
    assert_int_equal(p32.packed_bytes, PACKED);
    assert_int_equal(p32.total_bytes,
                     p32.arena_bytes + p32.folded_bytes + p32.scratch_bytes + p32.param_copy_bytes + p32.overhead_bytes);
    for (int threads = 1; threads <= 2; threads++) {
        bf_job_budget b;
        bf_eval_opts eo = {.batch = 32, .threads = threads};
        assert_int_equal(bf_eval_estimate(mod, ds, &eo, &b, &err), BF_OK);
        assert_int_equal(b.packed_bytes, PACKED);
        assert_int_equal(b.plans_bytes, (uint64_t)threads * p32.total_bytes);
        assert_int_equal(b.total_bytes, b.model_bytes + b.dataset_bytes + b.plans_bytes + b.outputs_bytes + PACKED);
        bf_campaign_spec spec = {.batch = 32, .target = BF_TARGET_WEIGHTS, .repr = BF_REPR_FP32};
        bf_campaign_opts co = {.threads = threads, .exact = 1};
        assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
        assert_int_equal(b.packed_bytes, PACKED);
        assert_int_equal(b.total_bytes, b.model_bytes + b.dataset_bytes + b.plans_bytes + b.outputs_bytes + PACKED);
    }
    /* a job that cannot hold them is refused, naming them */
    bf_job_budget b;
    bf_eval_opts eo = {.batch = 32, .threads = 1};
    assert_int_equal(bf_eval_estimate(mod, ds, &eo, &b, &err), BF_OK);
    assert_int_equal(bf_job_budget_check(&b, b.total_bytes - 1, "evaluation", NULL, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "packed weights 37.5 KiB"));
    bf_dataset_free(ds);
    free(f);
    bf_model_free(mod);
    free(m.p);
}

/* A differential campaign's estimate counts the parameter-only values it
 * computes once (a page-rounded buffer and a page each: hand arithmetic),
 * what the run then reports holding; an exact campaign holds none. */
void param_only_values_counted(void **state)
{
    (void)state;
    enum { SAMPLES = 64 };
    wb m;
    unsigned char *f;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    bf_model *mod = x300_job(1, SAMPLES, &m, &f, &ds);
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), want = (24000 + pg - 1) / pg * pg + pg;
    bf_campaign_spec spec = {.seed = 3, .trials = 8, .tensors = (char *[]){"*"}, .n_tensors = 1,
                             .model_kind = BF_FAULT_BITFLIP, .bits = 1, .repr = BF_REPR_FP32,
                             .sampling = BF_SAMPLE_UNIFORM, .critical_metric = -1, .batch = 32};
    bf_campaign_opts co = {.threads = 1};
    bf_job_budget b;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.param_only_bytes, want);
    assert_int_equal(b.total_bytes, b.model_bytes + b.dataset_bytes + b.plans_bytes + b.outputs_bytes + b.cache_bytes +
                                        b.packed_bytes + want);
    bf_campaign *c = NULL;
    if (bf_campaign_create(mod, ds, &spec, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    bf_campaign_result res;
    if (bf_campaign_run(c, &co, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(res.param_bytes, want);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    co.exact = 1;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.param_only_bytes, 0);
    bf_dataset_free(ds);
    free(f);
    bf_model_free(mod);
    free(m.p);
}

/* The campaign estimate against what core really holds at its peak (the
 * test allocator's count, not the estimate's arithmetic) over loading, the
 * golden pass and an exact run on 2 workers (64 trials: 4 chunks of 16, so
 * both run): within a quarter of one worker's plan, so a plan counted too
 * many (the golden pass's, which became the workers') or too few fails. */
void campaign_estimate_is_the_peak(void **state)
{
    (void)state;
    enum { SAMPLES = 2048 };
    wb m = wide_mlp_model();
    char hdr[128];
    snprintf(hdr, sizeof hdr, "{\"x\": {\"dtype\": \"F32\", \"shape\": [%d, 3], \"data_offsets\": [0, %d]}}", SAMPLES,
             SAMPLES * 12);
    size_t len;
    unsigned char *f = st_file(hdr, SAMPLES * 12, &len);
    for (int i = 0; i < SAMPLES * 3; i++) {
        float v = (float)(i % 11) - 5.0f;
        memcpy(f + len - (size_t)SAMPLES * 12 + (size_t)i * 4, &v, 4);
    }
    bf_model *mod = NULL;
    bf_dataset *ds = NULL;
    bf_campaign *c = NULL;
    bf_error err = {0};
    size_t before = bf_test_alloc_live();
    bf_test_alloc_peak_reset();
    assert_int_equal(load(&m, NULL, &mod, &err), BF_OK);
    assert_int_equal(bf_dataset_load_buffer(f, len, "d", &ds, &err), BF_OK);
    bf_campaign_spec spec = {.seed = 1, .trials = 64, .tensors = (char *[]){"*"}, .n_tensors = 1,
                             .model_kind = BF_FAULT_BITFLIP, .bits = 1, .repr = BF_REPR_FP32,
                             .sampling = BF_SAMPLE_UNIFORM, .critical_metric = -1, .batch = SAMPLES};
    bf_campaign_opts co = {.threads = 2, .exact = 1};
    bf_job_budget b;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.plans_bytes, 2 * b.plan.total_bytes);
    assert_true(b.plan.total_bytes > 8u << 20);
    c = NULL;
    if (bf_campaign_create(mod, ds, &spec, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    bf_campaign_result res;
    if (bf_campaign_run(c, &co, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(res.trials_done, 64);
    size_t peak = bf_test_alloc_peak() - before;
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    bf_dataset_free(ds);
    bf_model_free(mod);
    double off = (double)peak - (double)b.total_bytes, plan = (double)b.plan.total_bytes;
    print_message("estimate %llu, peak %zu: %+.2f of a plan (%llu)\n", (unsigned long long)b.total_bytes, peak,
                  off / plan, (unsigned long long)b.plan.total_bytes);
    assert_true(off > -0.25 * plan && off < 0.25 * plan);
    free(f);
    free(m.p);
}
