/* A job's memory from shapes: the plans its workers will build (each
 * estimated, never built), the outputs they keep, the golden cache and the
 * shared model and eval set. Mirrors what bf_evaluator_create and
 * bf_campaign_create/run allocate; what they add beyond this is per-node
 * bookkeeping, small next to the buffers counted here. */
#include "bitflip/campaign.h"
#include "bitflip/eval.h"

#include "model/graph.h"
#include "exec/plan_impl.h"
#include "campaign/campaign_impl.h"
#include "exec/gen_impl.h"
#include "exec/step_access.h"

#define EVAL_BATCH_DEFAULT 256   /* eval.c's default */

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b) { return b && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

static uint64_t model_bytes(const bf_model *m)
{
    uint64_t n = 0;
    for (size_t v = 0; v < m->n_values; v++)
        if (m->values[v].init) n += bf_tensor_nbytes(m->values[v].init);
    return n;
}

static uint64_t dataset_bytes(const bf_dataset *ds)
{
    uint64_t n = 0;
    for (size_t i = 0; ds && i < bf_dataset_num_tensors(ds); i++) n += bf_tensor_nbytes(bf_dataset_tensor(ds, i));
    return n;
}

/* Fills the plan and output terms for `workers` evaluators over `samples`
 * at `batch` (already settled); `extra` more sets of outputs (a campaign's
 * golden outputs, kept beside its workers'). */
static bf_status plans(const bf_model *m, int64_t samples, int workers, int extra, int share, int one, bf_job_budget *b,
                       bf_error *err)
{
    bf_status st;
    int64_t out_numel = 0;
    if (one) b->batch = 1;   /* a one-sample graph: a sample per run, output 0 a sample's */
    if (b->batch > samples && samples > 0) b->batch = samples;
    if (b->batch < 1) b->batch = 1;
    b->rest = samples > 0 ? samples % b->batch : 0;
    bf_plan_opts po = {.share_buffers = share, .unbatched = one};
    if ((st = bf__plan_estimate_opts(m, b->batch, &po, &b->plan, &out_numel, err)) != BF_OK) return st;
    b->packed_bytes = b->plan.packed_bytes;   /* once: the model's, shared by every plan */
    uint64_t per = b->plan.total_bytes;
    if (b->rest) {
        bf_plan_budget r;
        if ((st = bf__plan_estimate_shared(m, b->rest, share, &r, NULL, err)) != BF_OK) return st;
        per = sat_add(per, r.total_bytes);
    }
    b->plans_bytes = sat_mul(per, (uint64_t)workers);
    uint64_t cols = b->batch > 0 ? (uint64_t)out_numel / (uint64_t)b->batch : 0;
    b->outputs_bytes = sat_mul(sat_mul(cols, (uint64_t)samples), 4 * ((uint64_t)workers + (uint64_t)extra));
    return BF_OK;
}

static void total(bf_job_budget *b)
{
    uint64_t t = b->model_bytes;
    t = sat_add(t, b->dataset_bytes);
    t = sat_add(t, b->weights_bytes);
    t = sat_add(t, b->packed_bytes);
    t = sat_add(t, b->param_only_bytes);
    t = sat_add(t, b->plans_bytes);
    t = sat_add(t, b->outputs_bytes);
    t = sat_add(t, b->cache_bytes);
    b->total_bytes = t;
}

int64_t bf__model_fixed_batch(const bf_model *m)
{
    for (size_t i = 0; i < m->n_inputs; i++)
        if (m->inputs[i].ndim > 0 && m->inputs[i].dims[0] > 0) return m->inputs[i].dims[0];
    return 0;
}

bf_status bf_eval_estimate(const bf_model *model, const bf_dataset *ds, const bf_eval_opts *opts,
                           bf_job_budget *out, bf_error *err)
{
    bf_job_budget b = {0};
    int64_t samples = ds ? bf_dataset_num_samples(ds) : 1;
    int auto_batch = !opts || opts->batch <= 0;
    b.threads = opts && opts->threads > 0 ? opts->threads : 1;
    if (b.threads > 64) b.threads = 64;
    b.batch = auto_batch ? EVAL_BATCH_DEFAULT : opts->batch;
    int64_t fixed = bf__model_fixed_batch(model);
    if (fixed) b.batch = fixed;
    if (auto_batch && b.threads > 1 && samples < b.batch * b.threads) b.batch = (samples + b.threads - 1) / b.threads;
    if (b.batch > 0 && samples > 0 && b.threads > (samples + b.batch - 1) / b.batch)
        b.threads = (int)((samples + b.batch - 1) / b.batch);
    b.model_bytes = model_bytes(model);
    b.dataset_bytes = dataset_bytes(ds);
    /* the eval set's tensors against the graph inputs first: a shape that
     * fits neither layout is named as the evaluator would name it */
    bf_status st = ds ? bf__eval_check_inputs(model, ds, err) : BF_OK;
    if (st != BF_OK) return st;
    /* one evaluator: a plan per thread, one set of outputs */
    st = plans(model, samples, b.threads, 0, opts && opts->share_buffers, ds && bf__eval_set_unbatched(model, ds), &b, err);
    if (st != BF_OK) return st;
    if (b.rest) {   /* one rest plan in all, not one per thread */
        uint64_t per_full = b.plan.total_bytes;
        uint64_t per_rest = b.plans_bytes / (uint64_t)b.threads - per_full;
        b.plans_bytes = sat_add(sat_mul(per_full, (uint64_t)b.threads), per_rest);
    }
    b.outputs_bytes /= (uint64_t)b.threads;
    total(&b);
    *out = b;
    return BF_OK;
}

bf_status bf_campaign_estimate(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                               const bf_campaign_opts *opts, bf_job_budget *out, bf_error *err)
{
    bf_job_budget b = {0};
    int64_t samples = ds ? bf_dataset_num_samples(ds) : 1;
    if (spec->batch < 0)
        return bf_error_set(err, BF_EINVAL, "batch must be positive (or 0 for the default), got %lld",
                            (long long)spec->batch);
    b.threads = opts && opts->threads > 0 ? opts->threads : 1;
    if (b.threads > 256) b.threads = 256;
    b.batch = spec->batch ? spec->batch : bf_campaign_default_batch(model);
    int64_t fixed = bf__model_fixed_batch(model);
    if (fixed) b.batch = fixed;
    b.model_bytes = model_bytes(model);
    b.dataset_bytes = dataset_bytes(ds);
    /* the stored golden weights, as floats: the rounded fp32 ones, or a
     * quantized model's integers (4 bytes each, whatever the representation) */
    for (size_t p = 0; spec->target == BF_TARGET_WEIGHTS && p < model->n_params; p++)
        if (spec->repr != BF_REPR_FP32 || model->params[p].dtype != BF_F32)
            b.weights_bytes = sat_add(b.weights_bytes,
                                      (uint64_t)bf_tensor_numel(model->params[p].tensor) * sizeof(float) + 1);
    /* each worker has an evaluator (its plans, its outputs), and the
     * campaign keeps the golden outputs; the golden pass's evaluators are
     * not more: they become the workers' (campaign_run.c adopts them) or
     * are freed before the workers make theirs */
    bf_status st = plans(model, samples, b.threads, 1, 0, ds && bf__eval_set_unbatched(model, ds), &b, err);
    if (st != BF_OK) return st;
    /* a stored representation is written whole into every plan's view of the
     * weights arena (bf_evaluator_set_param): a private copy per plan, which
     * the plan estimate leaves out for arena tensors */
    for (size_t p = 0; spec->target == BF_TARGET_WEIGHTS && spec->repr != BF_REPR_FP32 && p < model->n_params; p++)
        if (bf__param_in_arena(model, p))
            b.plans_bytes = sat_add(b.plans_bytes, sat_mul(bf_tensor_nbytes(model->params[p].tensor),
                                                           (uint64_t)b.threads * (b.rest ? 2u : 1u)));
    /* a generating campaign: each worker's generator, M plans (campaign_gen.c);
     * a model that cannot generate is refused when the campaign is created */
    const bf_tensor *prompts = spec->gen_new_tokens > 0 && ds ? bf__campaign_gen_prompts(model, ds) : NULL;
    uint64_t gen = 0;
    if (prompts && bf__gen_estimate(bf__campaign_gen_model(model), prompts, spec->gen_new_tokens, &gen, NULL) == BF_OK)
        b.plans_bytes = sat_add(b.plans_bytes, sat_mul(gen, (uint64_t)b.threads));
    if (!opts || !opts->exact) {
        uint64_t budget = opts && opts->cache_budget > 0 ? (uint64_t)opts->cache_budget : (uint64_t)BF_CACHE_BUDGET_DEFAULT;
        /* the cache holds golden activations: at most one arena per batch */
        uint64_t batches = (uint64_t)((samples + b.batch - 1) / b.batch);
        uint64_t all = sat_mul(b.plan.arena_bytes, batches);
        b.cache_bytes = all < budget ? all : budget;
        /* the parameter-only values, once for every worker, within twice the
         * weights' bytes (diff/diffshared.c), and those left past that
         * limit, a copy in each worker within the same limit (diff/dxparam.c,
         * bf__pv_init; the cache may serve some, so at most this) */
        uint64_t wbytes = 0;
        for (size_t p = 0; p < model->n_params; p++) wbytes = sat_add(wbytes, bf_tensor_nbytes(model->params[p].tensor));
        uint64_t lim = sat_mul(wbytes, 2), pv = b.plan.param_only_bytes, held = pv < lim ? pv : lim;
        uint64_t left = pv - held < lim ? pv - held : lim;
        b.param_only_bytes = sat_add(held, sat_mul(left, (uint64_t)b.threads));
    }
    total(&b);
    *out = b;
    return BF_OK;
}

bf_status bf_job_budget_check(const bf_job_budget *b, uint64_t limit, const char *job, const char *limit_name,
                              bf_error *err)
{
    char need[32], lim[32], what[320];
    if (limit == 0 || b->total_bytes <= limit) return BF_OK;
    bf_bytes_str(limit, lim, sizeof lim);
    bf_plan_item_str(&b->plan.largest, what, sizeof what);
    if (!limit_name) limit_name = "job memory limit";
    if (b->plan.total_bytes > limit)
        return bf_error_set(err, BF_ELIMIT, "the plan needs %s (%s), over the %s job memory limit (%s)",
                            bf_bytes_str(b->plan.total_bytes, need, sizeof need), what, lim, limit_name);
    char plans[32], cache[32], outs[32], data[32], model[32], weights[32], packed[32], pvals[32];
    return bf_error_set(err, BF_ELIMIT,
                        "the %s needs %s (plans %s for %d thread%s at batch %lld, golden cache %s, outputs %s, "
                        "stored weights %s, packed weights %s, parameter-only values %s, eval set %s, model %s; the largest "
                        "buffer: %s), over the %s job "
                        "memory limit (%s)",
                        job ? job : "job", bf_bytes_str(b->total_bytes, need, sizeof need),
                        bf_bytes_str(b->plans_bytes, plans, sizeof plans), b->threads, b->threads == 1 ? "" : "s",
                        (long long)b->batch, bf_bytes_str(b->cache_bytes, cache, sizeof cache),
                        bf_bytes_str(b->outputs_bytes, outs, sizeof outs),
                        bf_bytes_str(b->weights_bytes, weights, sizeof weights),
                        bf_bytes_str(b->packed_bytes, packed, sizeof packed),
                        bf_bytes_str(b->param_only_bytes, pvals, sizeof pvals),
                        bf_bytes_str(b->dataset_bytes, data, sizeof data), bf_bytes_str(b->model_bytes, model, sizeof model),
                        what, lim, limit_name);
}
