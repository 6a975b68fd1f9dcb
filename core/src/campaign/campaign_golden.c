/* A campaign's golden model and pass: the parameters stored in the
 * campaign's representation, the golden pass every trial is compared to
 * (exact, or the differential engine's, caching values on the way), the
 * metrics' grids, and for int8 activations and inputs their profiled
 * scales. campaign.c calls these once its sites are resolved. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/simd.h"
#include "base/warena.h"
#include "bitflip/metrics.h"
#include "campaign/campaign_impl.h"
#include "diff/diff.h"
#include "exec/metrics_impl.h"
#include "exec/metrics_seg.h"
#include "exec/plan_impl.h"

/* Parameter p as [outer, K, inner] with K its input dimension, as the
 * first node reading it uses it: MatMul's B [..., K, N] groups along K
 * (rows of one column), Gemm's B along K (transB = 0: [K, N]; 1: [N, K],
 * contiguous), Conv's W [M, C/g, k...] along C/g x k... flattened
 * (contiguous per output channel, as GPTQ quantizes a conv's reshaped
 * [M, C/g * k...]); any other tensor (biases, embedding tables, ...) along
 * its last axis. */
bf_qgroups bf__group_layout(const bf_model *m, size_t p, int64_t group)
{
    const bf_tensor *t = m->params[p].tensor;
    int64_t n = bf_tensor_numel(t), r = t->ndim;
    bf_qgroups g = {.outer = 1, .k = r > 0 ? t->dims[r - 1] : 1, .inner = 1, .group = group};
    int v = m->param_vals[p];
    for (size_t o = 0; o < m->n_nodes; o++) {
        const bf__node *nd = &m->nodes[m->order[o]];
        int slot = -1;
        for (int j = 0; j < nd->n_in && slot < 0; j++)
            if (nd->in[j] == v) slot = j;
        if (slot < 0) continue;
        int64_t tb = 0;
        if (slot == 1 && r >= 2 && strcmp(nd->op_type, "MatMul") == 0) {
            g.k = t->dims[r - 2];
            g.inner = t->dims[r - 1];
        } else if (slot == 1 && r == 2 && strcmp(nd->op_type, "Gemm") == 0) {
            const bf__attr *a = bf__node_attr(nd, "transB");
            tb = a ? a->i : 0;
            g.k = tb ? t->dims[1] : t->dims[0];
            g.inner = tb ? 1 : t->dims[1];
        } else if (slot == 1 && r >= 3 && strcmp(nd->op_type, "Conv") == 0) {
            g.k = t->dims[0] > 0 ? n / t->dims[0] : 0;
        }
        break;
    }
    g.outer = g.k > 0 && g.inner > 0 ? n / (g.k * g.inner) : 0;
    return g;
}

/* Per-group scales of parameter p (group_size): its layout in store.groups,
 * its scales and offsets allocated and computed, its golden values
 * rounded with them. */
static bf_status group_scales(bf_campaign *c, const bf_campaign_spec *spec, size_t p, float w_max, bf_error *err)
{
    const bf_tensor *t = c->model->params[p].tensor;
    bf_qgroups *g = &c->store.groups[p];
    *g = bf__group_layout(c->model, p, spec->group_size);
    int64_t n_scale = bf_repr_group_count(g);
    if (n_scale <= 0 || g->outer * g->k * g->inner != bf_tensor_numel(t))
        return bf_error_set(err, BF_EINVAL, "'%s': no per-group layout for its shape", t->name);
    c->store.scale[p] = bf__malloc((size_t)n_scale * sizeof(float));
    if (bf_repr_is_unsigned(c->store.repr) && c->store.scale[p]) c->store.lo[p] = bf__malloc((size_t)n_scale * sizeof(float));
    if (!c->store.scale[p] || (bf_repr_is_unsigned(c->store.repr) && !c->store.lo[p]))
        return bf_error_set(err, BF_ENOMEM, "out of memory quantizing '%s'", t->name);
    bf_repr_group_scales(c->store.repr, t->data, g, w_max, c->store.scale[p], c->store.lo[p]);
    c->store.slice[p] = 1;
    bf_repr_quantize_groups(c->store.repr, t->data, c->store.values[p], g, c->store.scale[p], c->store.lo[p]);
    return BF_OK;
}

bf_status bf__campaign_quantize(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    const bf_model *m = c->model;
    c->store.values = bf__calloc(m->n_params + 1, sizeof *c->store.values);
    c->store.scale = bf__calloc(m->n_params + 1, sizeof *c->store.scale);
    c->store.lo = bf__calloc(m->n_params + 1, sizeof *c->store.lo);
    c->store.slice = bf__calloc(m->n_params + 1, sizeof *c->store.slice);
    if (!c->store.values || !c->store.scale || !c->store.lo || !c->store.slice) return bf_error_set(err, BF_ENOMEM, "out of memory");
    /* faults on activations and inputs round only the element they hit:
     * the weights stay as the model has them */
    if (c->store.native) {
        /* the stored integers as floats, for the trials' bookkeeping; they
         * are the model's own values, so the golden model is the model */
        for (size_t p = 0; p < m->n_params; p++) {
            const bf_tensor *t = m->params[p].tensor;
            int64_t n = bf_tensor_numel(t);
            if (m->params[p].dtype == BF_F32) continue;
            c->store.values[p] = bf__malloc((size_t)n * sizeof(float) + 1);
            if (!c->store.values[p]) return bf_error_set(err, BF_ENOMEM, "out of memory copying '%s'", t->name);
            bf_status st = bf_convert(c->store.values[p], BF_F32, t->data, t->dtype, (size_t)n, err);
            if (st != BF_OK) return st;
        }
        return BF_OK;
    }
    if (c->store.repr == BF_REPR_FP32 || c->faults.target != BF_TARGET_WEIGHTS) return BF_OK;
    if (spec->group_size > 0 && !(c->store.groups = bf__calloc(m->n_params + 1, sizeof *c->store.groups)))
        return bf_error_set(err, BF_ENOMEM, "out of memory");
    /* w_max clips the tensors the campaign selects (the weights a user
     * trained clipped); the rest of the model (constants an export adds,
     * such as InstanceNormalization's ones) keeps its own range */
    unsigned char *site = bf__calloc(m->n_params + 1, 1);
    if (!site) return bf_error_set(err, BF_ENOMEM, "out of memory");
    for (size_t s = 0; s < c->surface.n_sites; s++) site[c->surface.site_param[s]] = 1;
    for (size_t p = 0; p < m->n_params; p++) {
        const bf_tensor *t = m->params[p].tensor;
        if (m->params[p].dtype != BF_F32) continue;   /* a quantized model's integers are already stored */
        int64_t n = bf_tensor_numel(t);
        int64_t dim0 = t->ndim > 0 ? t->dims[0] : 1;
        c->store.values[p] = bf__malloc((size_t)n * sizeof(float) + 1);
        if (!c->store.values[p]) {
            bf__free(site);
            return bf_error_set(err, BF_ENOMEM, "out of memory quantizing '%s'", t->name);
        }
        bf_qscale q = {0};
        if (spec->group_size > 0 && bf_repr_is_fixed(c->store.repr) && n > 0) {
            bf_status st = group_scales(c, spec, p, site[p] ? (float)spec->w_max : 0.0f, err);
            if (st != BF_OK) {
                bf__free(site);
                return st;
            }
            continue;
        } else if (bf_repr_is_fixed(c->store.repr) && n > 0) {
            int64_t n_scale = spec->per_channel && dim0 > 0 ? dim0 : 1;
            c->store.scale[p] = bf__malloc((size_t)n_scale * sizeof(float));
            if (bf_repr_is_unsigned(c->store.repr) && c->store.scale[p]) c->store.lo[p] = bf__malloc((size_t)n_scale * sizeof(float));
            if (!c->store.scale[p] || (bf_repr_is_unsigned(c->store.repr) && !c->store.lo[p])) {
                bf__free(site);
                return bf_error_set(err, BF_ENOMEM, "out of memory quantizing '%s'", t->name);
            }
            /* per layer (or channel), as Stutz et al. quantize */
            bf_repr_fixed_scales(c->store.repr, t->data, n, dim0, spec->per_channel, site[p] ? (float)spec->w_max : 0.0f,
                                 c->store.scale[p], c->store.lo[p]);
            c->store.slice[p] = n / n_scale;
            q = (bf_qscale){.scale = c->store.scale[p], .n_scale = n_scale, .slice = c->store.slice[p], .lo = c->store.lo[p]};
        }
        bf_repr_quantize(c->store.repr, t->data, c->store.values[p], n, &q);
    }
    bf__free(site);
    return BF_OK;
}

int64_t bf__prediction(const bf_campaign *c, const float *row, int simd)
{
    if (c->golden.out_cols > 1) return bf__argmax_at(row, c->golden.out_cols, simd);
    return c->golden.logits ? row[0] > 0 : row[0] >= 0.5f;
}

int64_t bf__lm_changed(const bf_campaign *c, const float *row, int64_t s, int simd)
{
    int64_t T = c->golden.lm_T, V = c->golden.lm_V, n = 0;
    const int64_t *g = c->golden.lm_pred + s * T;
    for (int64_t t = 0; t < T; t++) n += g[t] >= 0 && bf__argmax_at(row + t * V, V, simd) != g[t];
    return n;
}

int bf__seg_image_critical(const bf_campaign *c, const float *row, int64_t s, int64_t moved)
{
    int64_t HW = c->golden.seg_HW;
    if (moved < 0) moved = bf__seg_changed(row, c->golden.seg_pred + s * HW, c->golden.seg_C, HW);
    return (double)moved > c->judge.critical_pixels * (double)HW;
}

/* segmentation: the golden arg-max at every pixel (kept by the golden
 * pass's scoring already, golden_differential: not computed again). */
static bf_status golden_seg(bf_campaign *c, bf_evaluator *ev, bf_error *err)
{
    const bf__seg *seg = bf__evaluator_seg(ev);
    c->golden.seg_C = seg->C;
    c->golden.seg_HW = seg->HW;
    if (c->golden.seg_pred) return BF_OK;
    c->golden.seg_pred = bf__malloc((size_t)(c->golden.samples * seg->HW) * sizeof(int32_t) + 1);
    if (!c->golden.seg_pred) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden predictions");
    for (int64_t i = 0; i < c->golden.samples; i++)
        bf__seg_argmax(c->golden.out + i * c->golden.out_cols, seg->C, seg->HW, c->golden.seg_pred + i * seg->HW);
    return BF_OK;
}

/* language_model: the labels and golden arg-max per labelled position. */
static bf_status golden_lm(bf_campaign *c, bf_evaluator *ev, bf_error *err)
{
    bf__lm_layout lm;
    bf__evaluator_lm(ev, &lm);
    size_t cells = (size_t)(c->golden.samples * lm.T);
    c->golden.lm_T = lm.T;
    c->golden.lm_V = lm.V;
    c->golden.lm_labelled = lm.labelled;
    c->golden.lm_labels = bf__malloc(cells * sizeof(int64_t) + 1);
    c->golden.lm_pred = bf__malloc(cells * sizeof(int64_t) + 1);
    if (!c->golden.lm_labels || !c->golden.lm_pred) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden predictions");
    memcpy(c->golden.lm_labels, lm.labels, cells * sizeof(int64_t));
    int simd = bf__simd_avx2();
    for (size_t i = 0; i < cells; i++)
        c->golden.lm_pred[i] = lm.labels[i] == BF_LM_IGNORE ? -1 : bf__argmax_at(c->golden.out + (int64_t)i * lm.V, lm.V, simd);
    return BF_OK;
}

/* The largest finite |x[i]| (0 if none). On the bits: a float's
 * magnitude (its bits less the sign) orders as the unsigned integer it
 * is, infinities and NaNs above every finite one, so the max is an integer
 * max over the finite ones, which the compiler vectorizes (a float max
 * with a NaN test it does not) and which is exact in any order. A
 * segmenter's golden outputs are large (LRASPP's 16 images, 22M floats):
 * the scalar loop in double was 2% of its campaign's CPU. */
static double finite_absmax(const float *x, int64_t n)
{
    int32_t m = 0;   /* signed: the compares SSE2 has */
    for (int64_t i = 0; i < n; i++) {
        int32_t u;
        memcpy(&u, &x[i], sizeof u);
        u &= 0x7fffffff;
        u = u < 0x7f800000 ? u : 0;
        m = u > m ? u : m;
    }
    float r;
    memcpy(&r, &m, sizeof r);
    return r;
}

/* The grid of each metric's sums (see campaign_stats.c): the campaign's sum
 * stays below 2^52 units for n_trials values of at most `bound`. */
static void set_grids(bf_campaign *c)
{
    double gmax = finite_absmax(c->golden.out, c->golden.samples * c->golden.out_cols);
    /* deviations past 16x the largest golden output saturate in the sums */
    double out_bound = 16 * exp2(ceil(log2(gmax > 1 ? gmax : 1)));
    double ll = 32;   /* log loss clips probabilities at 1e-7: at most 16.12 */
    for (int m = 0; m < BF_METRIC_COUNT; m++) c->judge.bound[m] = 1;
    c->judge.bound[BF_METRIC_LOGLOSS] = ll;
    if (c->golden.label_entropy > 0) c->judge.bound[BF_METRIC_NE] = exp2(ceil(log2(ll / c->golden.label_entropy)));
    c->judge.bound[BF_METRIC_MAX_ABS] = out_bound;
    c->judge.bound[BF_METRIC_MSE] = out_bound * out_bound;
    /* Perplexity has no upper bound (a fault can make it overflow to Inf,
     * and such a trial is DUE). Its sums saturate at 16 x the larger of
     * the vocabulary (a uniform guess's perplexity) and the golden one,
     * as a power of two: a trial worse than that adds the bound, so the
     * mean over trials is a lower bound once any trial reaches it; the
     * records keep every trial's value. */
    if (c->golden.task == BF_TASK_LANGUAGE_MODEL) {
        double ppl = c->golden.metric[BF_METRIC_PERPLEXITY], v = (double)c->golden.lm_V;
        double top = isfinite(ppl) && ppl > v ? ppl : v;
        c->judge.bound[BF_METRIC_PERPLEXITY] = 16 * exp2(ceil(log2(top > 1 ? top : 1)));
    }
    /* generation: positions and edits are at most the new tokens */
    if (!isnan(c->golden.metric[BF_METRIC_FIRST_DIVERGENCE])) {
        double m = exp2(ceil(log2(c->golden.metric[BF_METRIC_FIRST_DIVERGENCE])));
        c->judge.bound[BF_METRIC_FIRST_DIVERGENCE] = c->judge.bound[BF_METRIC_EDIT_DISTANCE] = m;
    }
    int lg = (int)ceil(log2((double)c->faults.n_trials + 1));
    for (int m = 0; m < BF_METRIC_COUNT; m++) {
        int lb = (int)log2(c->judge.bound[m]);
        c->judge.fsum[m] = 52 - lg - lb;
        c->judge.fsq[m] = 52 - lg - 2 * lb;
    }
}

static unsigned applicable_metrics(bf_task task, int choice, int gen)
{
    unsigned a = 1u << BF_METRIC_TOP1_MISMATCH | 1u << BF_METRIC_MSE | 1u << BF_METRIC_MAX_ABS;
    if (task == BF_TASK_CLASSIFICATION) a |= 1u << BF_METRIC_ACCURACY;
    if (task == BF_TASK_BINARY) a |= 1u << BF_METRIC_AUC | 1u << BF_METRIC_LOGLOSS | 1u << BF_METRIC_NE;
    if (task == BF_TASK_LANGUAGE_MODEL) a |= 1u << BF_METRIC_PERPLEXITY | 1u << BF_METRIC_TOKEN_ACCURACY;
    if (task == BF_TASK_LANGUAGE_MODEL && choice) a |= 1u << BF_METRIC_CHOICE_ACCURACY;
    if (task == BF_TASK_SEGMENTATION) a |= 1u << BF_METRIC_MIOU | 1u << BF_METRIC_PIXEL_ACCURACY;
    if (task == BF_TASK_DETECTION) a |= 1u << BF_METRIC_MAP | 1u << BF_METRIC_MAP50 | 1u << BF_METRIC_RECALL;
    if (task == BF_TASK_LANGUAGE_MODEL && gen)
        a |= 1u << BF_METRIC_GENERATION_MATCH | 1u << BF_METRIC_FIRST_DIVERGENCE | 1u << BF_METRIC_EDIT_DISTANCE;
    return a;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The process's CPU time, all threads: on a shared machine the golden
 * pass's wall time says as much about the other processes as about it. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An evaluator of the golden model as stored, one thread, the campaign's batch. */
static bf_status golden_evaluator(const bf_campaign *c, bf_evaluator **ev, bf_error *err)
{
    /* a one-sample graph's golden evaluator may become worker 0 of the
     * first run (campaign_ckpt.c): its Conv activations fused, as the exact
     * engine's workers run them, and its arena shared by lifetime as
     * `bitflip eval`'s (the checkpoints hold what a trial reads across a
     * cut, and the store what it reads of a skipped step, so nothing reads
     * a value after its last reader: exec/ckpt.h). SSDlite320's pass wrote
     * every value to a place of its own, about 150 MB an image: its Convs
     * wrote past the caches, and the golden pass took 1.4x the CPU of an
     * eval pass (docs/BENCHMARKS.md, h14-det). */
    int one = bf__eval_set_unbatched(c->model, c->ds);
    bf_eval_opts eo = {.batch = c->batch, .threads = 1, .max_run_bytes = c->max_run_bytes, .fuse_activations = one,
                       .share_buffers = one};
    bf_status st = bf_evaluator_create(c->model, c->ds, &eo, ev, err);
    for (size_t p = 0; st == BF_OK && p < c->model->n_params; p++)
        if (c->store.values[p]) st = bf_evaluator_set_param(*ev, p, c->store.values[p], err);
    return st;
}

/* Trials whose faults bf__dx_shared_golden is told of, at most: drawing
 * them is a few tenths of a microsecond each, and beyond this many the
 * faults of a uniform campaign strike nearly every tensor anyway. */
#define ROOTS_DRAWS_MAX (INT64_C(1) << 18)

/* 1 when prep names one shard of several (one that does not exist is
 * bf_campaign_run's error to report: here it draws every trial) */
static int shard_of(const bf_campaign_prep *prep)
{
    return prep->shard_count > 1 && prep->shard_index >= 0 && prep->shard_index < prep->shard_count;
}

/* Per value of c->model: 1 where one of the campaign's trials puts a
 * fault (a parameter's value, an activation or input), drawn now, before
 * the golden pass, exactly as the trials will draw them (bf__campaign_draw
 * is a function of the seed and the trial's number): the cache then keeps
 * only what those trials read (diff.h, bf__dx_shared_golden). *out NULL
 * (keep every value, as before) where the trials' faults are not known
 * here: fault groups (drawn after the pass), mitigations (they add
 * nodes, or faults: ecc), BER and profiled maps (faults everywhere),
 * adaptive sampling (its strata follow the results), dynamic and
 * kv_cache sites, more than ROOTS_DRAWS_MAX trials, near-exact runs
 * (whose chains' bounds come from what the cache holds). */
static bf_status drawn_roots(const bf_campaign *c, const bf_campaign_spec *spec, const bf_campaign_prep *prep,
                             unsigned char **out, bf__root_chans *rc, bf_error *err)
{
    const bf__faults *f = &c->faults;
    const bf_model *m = c->model;
    *out = NULL;
    *rc = (bf__root_chans){0};
    if (prep->near_exact || spec->n_groups || c->protect.own_model || c->protect.ecc || c->protect.sbp_mask ||
        c->protect.range_lo || c->protect.range_plo || f->kind == BF_FAULT_BER || f->kind == BF_FAULT_PROFILED ||
        f->sampling == BF_SAMPLE_ADAPTIVE || f->target == BF_TARGET_KV_CACHE || c->surface.site_kv ||
        f->n_trials > ROOTS_DRAWS_MAX || (f->target == BF_TARGET_WEIGHTS ? !c->surface.site_param : !c->surface.site_value))
        return BF_OK;
    for (size_t s = 0; s < c->surface.n_sites; s++)
        if (c->surface.sites[s].dynamic) return BF_OK;
    unsigned char *roots = bf__calloc(m->n_values + 1, 1);
    if (!roots) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache");
    bf__draw d = {0};
    bf_status st = BF_OK;
    /* a shard's run reads only its own trials' values (t % N == I, as
     * bf__run_trial_of deals them; sampling here is never adaptive, whose
     * pilot every shard runs) */
    int sharded = shard_of(prep);
    int64_t first = sharded ? prep->shard_index : 0, step = sharded ? prep->shard_count : 1;
    /* each weight fault's value and channel (diff.h, bf__root_chans): which
     * partial-sum checkpoints its trial resumes from */
    int64_t *val = NULL, *ch = NULL;
    size_t n = 0, cap = 0;
    for (int64_t t = first; t < f->n_trials && st == BF_OK; t += step) {
        if ((st = bf__campaign_draw(c, t, &d, err)) != BF_OK) break;
        for (size_t k = 0; k < d.n && st == BF_OK; k++) {
            int weights = f->target == BF_TARGET_WEIGHTS;
            size_t q = weights ? c->surface.site_param[d.f[k].site] : 0;
            int64_t v = weights ? m->param_vals[q] : c->surface.site_value[d.f[k].site];
            if (v < 0 || (size_t)v >= m->n_values) continue;
            roots[v] = 1;
            const bf_tensor *w = weights ? bf_model_param(m, q)->tensor : NULL;
            int64_t per = w && w->ndim >= 1 && w->dims[0] > 0 ? bf_tensor_numel(w) / w->dims[0] : 0;
            if (per <= 0) continue;
            if (n == cap) {
                cap = 2 * cap + 16;
                int64_t *a = bf__realloc(val, cap * sizeof *val);
                if (a) val = a;
                int64_t *b = a ? bf__realloc(ch, cap * sizeof *ch) : NULL;
                if (b) ch = b;
                if (!a || !b) {
                    st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden cache");
                    break;
                }
            }
            val[n] = v;
            ch[n++] = d.f[k].index / per;
        }
    }
    bf__draw_free(&d);
    if (st != BF_OK) {
        bf__free(roots);
        bf__free(val);
        bf__free(ch);
        return st;
    }
    *out = roots;
    *rc = (bf__root_chans){n, val, ch};
    return BF_OK;
}

/* The golden cache's pages (bf__dx_shared_golden): 2 MiB ones where
 * this host's measurement says its 4 KiB fresh pages are dear and its
 * 2 MiB ones cheap (bf__campaign_host), asked only when the cache may hold
 * GOLDEN_HUGE_BYTES or more (one arena a batch bounds it, as
 * bf__gcache_build's budget for the partial sums says): below that a
 * measurement of the host would cost more than the pages. On the AMD VM
 * of docs/perf/trials.md (h22-camp) resnet18's 190 MiB cache and 61 MiB
 * of partial sums so took 53,000 fewer page faults (129,100 to 76,000 in
 * the whole process) and the golden pass 0.6 s less CPU of 3.4 (mean of 7
 * loaded pairs). */
#define GOLDEN_HUGE_BYTES ((size_t)8 << 20)
static unsigned cache_pages(bf_campaign *c, bf_evaluator *ev, const bf_campaign_prep *prep)
{
    size_t batches = (size_t)((bf_dataset_num_samples(c->ds) + bf_evaluator_batch(ev) - 1) / bf_evaluator_batch(ev));
    size_t bound = bf_plan_arena_bytes(bf__evaluator_plan(ev, 0)) * batches;
    if (bound > (size_t)c->golden.gdx_budget) bound = (size_t)c->golden.gdx_budget;
    return bound >= GOLDEN_HUGE_BYTES && bf__campaign_host(c, prep)->huge ? BF__WRITE_HUGE : 0;
}

/* The golden pass as the differential engine makes it: on prep->threads
 * threads, one evaluator each (which the first run adopts as its workers'),
 * the values cached on the way, the outputs into c->golden.out, r as
 * bf_evaluator_run would give it. ev is the first evaluator, made already
 * (it fixed the batch). */
static bf_status golden_differential(bf_campaign *c, const bf_campaign_spec *spec, bf_evaluator *ev,
                                     const bf_campaign_prep *prep, bf_eval_result *r, bf_error *err)
{
    const bf_tensor *o = bf_plan_output(bf__evaluator_plan(ev, 0), 0);
    int64_t samples = bf_dataset_num_samples(c->ds), cols = bf_tensor_numel(o) / bf_evaluator_batch(ev);
    int n = prep->threads > 1 ? prep->threads : 1;
    if (n > BF__CAMPAIGN_THREADS_MAX) n = BF__CAMPAIGN_THREADS_MAX;
    c->golden.out = bf__malloc((size_t)(samples * cols) * sizeof(float) + 1);
    c->golden.gev = bf__calloc((size_t)n, sizeof *c->golden.gev);
    if (!c->golden.out || !c->golden.gev) return bf_error_set(err, BF_ENOMEM, "out of memory for the golden outputs");
    c->golden.gev[0] = ev;
    c->golden.n_gev = 1;
    /* one after another: plans share the model's weights arena; each is
     * cheap now (its arena is only touched where a step writes it) */
    double t0 = now_s();
    bf_status st = BF_OK;
    for (; c->golden.n_gev < n && st == BF_OK; c->golden.n_gev++)
        if ((st = golden_evaluator(c, &c->golden.gev[c->golden.n_gev], err)) != BF_OK) break;
    if (st != BF_OK) return st;
    double t1 = now_s();
    c->setup.plans += t1 - t0;
    c->golden.gdx_budget = prep->cache_budget > 0 ? prep->cache_budget : BF_CACHE_BUDGET_DEFAULT;
    unsigned char *roots = NULL;
    bf__root_chans rc;
    double cpu = cpu_s();
    if ((st = drawn_roots(c, spec, prep, &roots, &rc, err)) != BF_OK) return st;
    c->golden.gdx_shard_index = roots && shard_of(prep) ? prep->shard_index : 0;
    c->golden.gdx_shard_count = roots && shard_of(prep) ? prep->shard_count : 1;
    st = bf__dx_shared_golden(c->golden.gev, c->golden.n_gev, samples, cols, (size_t)c->golden.gdx_budget, roots,
                                    roots ? &rc : NULL, c->golden.out, cache_pages(c, ev, prep), &c->golden.gdx, err);
    bf__free(roots);
    bf__free((void *)rc.val);
    bf__free((void *)rc.chan);
    c->setup.golden = now_s() - t1;
    c->setup.golden_cpu = cpu_s() - cpu;
    if (st != BF_OK) return st;
    if (prep->near_exact) bf__dx_shared_near_exact(c->golden.gdx);
    int64_t batches = bf__gcache_batches(bf__dx_shared_cache(c->golden.gdx));
    c->setup.golden_threads = c->golden.n_gev < batches ? c->golden.n_gev : (int)batches;
    /* a segmenter's metrics take each image's arg-max, which its trials
     * are judged against (golden_seg, the trials' scorer): kept, not
     * computed again (LRASPP: 22M logits read per arg-max of the set) */
    const bf__seg *seg = bf__evaluator_seg(ev);
    if (seg && bf_evaluator_task(ev) == BF_TASK_SEGMENTATION && seg->n == samples && !c->golden.seg_pred &&
        !(c->golden.seg_pred = bf__malloc((size_t)(samples * seg->HW) * sizeof(int32_t) + 1)))
        return bf_error_set(err, BF_ENOMEM, "out of memory for the golden predictions");
    bf__evaluator_score_keep(ev, c->golden.out, c->golden.seg_pred, r);
    return BF_OK;
}

/* An image-major sweep (campaign_imaj.c) on ev and, past one thread, an
 * evaluator more a thread, made as ev was (its plans fit the checkpoints),
 * freed after it. */
static bf_status golden_imaj(bf_campaign *c, bf_evaluator *ev, const bf_campaign_prep *prep, bf_eval_result *r,
                             bf_error *err)
{
    bf_evaluator *evs[BF__IMAJ_THREADS_MAX] = {ev};
    int n = bf__campaign_imaj_threads(c, prep), made = 1;
    bf_status st = BF_OK;
    for (; made < n && st == BF_OK; made++) st = golden_evaluator(c, &evs[made], err);
    if (st == BF_OK) st = bf__campaign_imaj_sweep(c, evs, n, prep, r, err);
    for (int i = 1; i < made; i++) bf_evaluator_free(evs[i]);
    return st;
}

/* The golden pass as the exact engine makes it, one evaluator; a
 * one-sample graph's checkpoints recorded on the way when prep asks for
 * the differential engine (trials resume each image from them:
 * campaign_ckpt.c). */
static bf_status golden_full(bf_campaign *c, bf_evaluator *ev, const bf_campaign_prep *prep, bf_eval_result *r,
                             bf_error *err)
{
    double t1 = now_s(), cpu = cpu_s();
    bf_status st = bf__campaign_ckpt_prepare(c, ev, prep, err);
    if (st != BF_OK) return st;
    if (c->golden.ckpt) c->golden.full_reason = NULL;
    if (c->golden.ckpt && !c->golden.imaj_off) st = golden_imaj(c, ev, prep, r, err);
    else st = bf_evaluator_run(ev, NULL, 0, r, err);
    bf_status u = bf__evaluator_ckpt(ev, NULL, NULL, NULL, err);
    if (st != BF_OK) return st;
    if (u != BF_OK) return u;
    /* the evaluator that made the checkpoints is the first run's worker 0,
     * its pass that worker's golden check */
    if (c->golden.ckpt && !c->golden.gev) {
        if (!(c->golden.gev = bf__calloc(1, sizeof *c->golden.gev)))
            return bf_error_set(err, BF_ENOMEM, "out of memory for the golden evaluator");
        c->golden.gev[0] = ev;
        c->golden.n_gev = 1;
    }
    c->setup.golden = now_s() - t1;
    c->setup.golden_cpu = cpu_s() - cpu;
    c->setup.golden_threads = c->golden.imaj ? bf__campaign_imaj_threads(c, prep) : 1;
    return BF_OK;
}

bf_status bf__campaign_golden(bf_campaign *c, const bf_campaign_spec *spec, const bf_campaign_prep *prep, bf_error *err)
{
    bf_status st;
    bf_evaluator *ev = NULL;
    float *lab = NULL;
    double t0 = now_s();
    if ((st = golden_evaluator(c, &ev, err)) != BF_OK) goto out;
    c->batch = bf_evaluator_batch(ev);   /* fixed now: every worker uses it */
    c->setup.plans = now_s() - t0;
    /* The differential engine's steps slice values by the batch on dim 0,
     * and re-run steps whose shapes are fixed: a one-sample graph has no
     * batch dim (its value [K, 4] is K boxes of one image), and a dynamic
     * step's shapes are data */
    if (bf_evaluator_unbatched(ev))
        c->golden.full_reason = "the graph takes one sample per call (its inputs have no batch dimension): every trial "
                                "runs in full";
    else if (bf__evaluator_plan(ev, 0)->n_dyn > 0)
        c->golden.full_reason = "shapes that are data (dynamic steps): every trial runs in full";
    bf_eval_result r;
    if (prep && prep->differential && !c->golden.full_reason) {
        if ((st = golden_differential(c, spec, ev, prep, &r, err)) != BF_OK) goto out;
    } else if ((st = golden_full(c, ev, prep, &r, err)) != BF_OK) {
        goto out;
    }
    if (r.n_ragged && (st = bf__ragcopy_set(&c->golden.rag, r.ragged, r.n_ragged, r.samples, err)) != BF_OK) goto out;
    c->golden.task = r.task;
    c->golden.samples = r.samples;
    c->golden.out_cols = r.out_cols;
    size_t n = (size_t)(r.samples * r.out_cols);
    if (!c->golden.out) c->golden.out = bf__malloc(n * sizeof(float) + 1);
    c->golden.pred = bf__malloc((size_t)r.samples * sizeof(int64_t) + 1);
    if (!c->golden.out || !c->golden.pred) { st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden outputs"); goto out; }
    if (r.outputs != c->golden.out) memcpy(c->golden.out, r.outputs, n * sizeof(float));
    if (c->golden.out_cols == 1)
        for (int64_t i = 0; i < c->golden.samples; i++) c->golden.logits |= c->golden.out[i] < 0 || c->golden.out[i] > 1;
    int simd = bf__simd_avx2();
    /* a segmenter's images are judged pixel by pixel (seg_pred): the arg-max
     * of a whole image's logits (1.4M for LRASPP's) is read by nothing */
    for (int64_t i = 0; i < c->golden.samples; i++)
        c->golden.pred[i] = c->golden.out_cols && r.task != BF_TASK_SEGMENTATION
                                ? bf__prediction(c, c->golden.out + i * c->golden.out_cols, simd)
                                : 0;
    if (c->golden.task == BF_TASK_DETECTION) {   /* the golden detections, as the judge reads them */
        c->golden.det.task = *bf__evaluator_det(ev);
        if ((st = bf__det_view(&c->golden.det.task, c->golden.rag.view, r.samples, &c->golden.det.labels, &c->golden.det.cap,
                               &c->golden.det.view, err)) != BF_OK)
            goto out;
    }

    if (c->golden.task == BF_TASK_BINARY) {
        const bf_tensor *l = bf_dataset_find(c->ds, "labels");
        lab = bf__malloc((size_t)c->golden.samples * sizeof(float) + 1);
        if (!lab) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
        if ((st = bf_convert(lab, BF_F32, l->data, l->dtype, (size_t)c->golden.samples, err)) != BF_OK) goto out;
        double pos = 0;
        for (int64_t i = 0; i < c->golden.samples; i++) pos += lab[i] > 0.5f;
        double p = pos / (double)c->golden.samples;
        c->golden.label_entropy = p > 0 && p < 1 ? -(p * log(p) + (1 - p) * log(1 - p)) : 0;
    }
    for (int m = 0; m < BF_METRIC_COUNT; m++) c->golden.metric[m] = NAN;
    c->golden.metric[BF_METRIC_ACCURACY] = r.accuracy;
    c->golden.metric[BF_METRIC_AUC] = r.auc;
    c->golden.metric[BF_METRIC_LOGLOSS] = r.logloss;
    if (c->golden.label_entropy > 0) c->golden.metric[BF_METRIC_NE] = r.logloss / c->golden.label_entropy;
    c->golden.metric[BF_METRIC_TOP1_MISMATCH] = 0;
    c->golden.metric[BF_METRIC_MSE] = 0;
    c->golden.metric[BF_METRIC_MAX_ABS] = 0;
    c->golden.metric[BF_METRIC_PERPLEXITY] = r.perplexity;
    c->golden.metric[BF_METRIC_TOKEN_ACCURACY] = r.token_accuracy;
    c->golden.metric[BF_METRIC_CHOICE_ACCURACY] = r.choice_accuracy;
    c->golden.metric[BF_METRIC_MIOU] = r.miou;
    c->golden.metric[BF_METRIC_PIXEL_ACCURACY] = r.pixel_accuracy;
    c->golden.metric[BF_METRIC_MAP] = r.map;
    c->golden.metric[BF_METRIC_MAP50] = r.map50;
    c->golden.metric[BF_METRIC_RECALL] = r.recall;
    if (c->golden.task == BF_TASK_LANGUAGE_MODEL && (st = golden_lm(c, ev, err)) != BF_OK) goto out;
    if (c->golden.task == BF_TASK_SEGMENTATION && (st = golden_seg(c, ev, err)) != BF_OK) goto out;
    if (spec->critical_score_set && c->golden.task != BF_TASK_DETECTION) {
        st = bf_error_set(err, BF_EINVAL, "critical.score_threshold applies to a detection task (gt_boxes, gt_labels, gt_offsets "
                                          "against outputs boxes, labels, scores); this eval set makes the task %s",
                          bf_task_name(c->golden.task));
        goto out;
    }
    if (spec->critical_pixels_set && c->golden.task != BF_TASK_SEGMENTATION) {
        st = bf_error_set(err, BF_EINVAL, "critical.pixels applies to a segmentation task (labels [N, H, W] against an output "
                                          "[N, C, H, W]); this eval set makes the task %s", bf_task_name(c->golden.task));
        goto out;
    }

    if (spec->gen_new_tokens > 0 && c->golden.task != BF_TASK_LANGUAGE_MODEL) {
        st = bf_error_set(err, BF_EINVAL,
                          "generate.new_tokens: generation applies to a language_model task (an eval set with input_ids "
                          "and labels int64 [N, T]); this eval set makes the task %s", bf_task_name(c->golden.task));
        goto out;
    }
    if (spec->gen_new_tokens > 0) {
        /* the golden decoding against itself (campaign_gen.c makes it) */
        c->golden.metric[BF_METRIC_GENERATION_MATCH] = 1;
        c->golden.metric[BF_METRIC_FIRST_DIVERGENCE] = (double)spec->gen_new_tokens;
        c->golden.metric[BF_METRIC_EDIT_DISTANCE] = 0;
    }
    unsigned app = applicable_metrics(c->golden.task, !isnan(r.choice_accuracy), spec->gen_new_tokens > 0);
    if (c->judge.critical_metric >= 0 && !(app >> c->judge.critical_metric & 1)) {
        st = bf_error_set(err, BF_EINVAL, "critical metric '%s' does not apply to a %s task", bf_metric_name(c->judge.critical_metric),
                          bf_task_name(c->golden.task));
        goto out;
    }
    c->judge.metrics = (spec->metrics ? spec->metrics : app) & app;
    if (c->judge.critical_metric >= 0) c->judge.metrics |= 1u << c->judge.critical_metric;
    set_grids(c);
    if (c->golden.gdx) {
        double t1 = now_s();
        if ((st = bf__dx_shared_finish(c->golden.gdx, ev, c->golden.out, err)) != BF_OK) goto out;
        c->setup.index = now_s() - t1;
    }
out:
    bf__free(lab);
    if (!c->golden.gev || c->golden.gev[0] != ev) bf_evaluator_free(ev);   /* else the first run's worker 0 */
    return st;
}

/* int8 activations and inputs: scale = max |value| / 127 over the eval set,
 * per site, from a pass of the golden model (fp32) with the campaign's
 * batch. */
bf_status bf__campaign_profile_scales(bf_campaign *c, bf_error *err)
{
    const bf_model *m = c->model;
    bf_plan *full = NULL, *rest = NULL;
    float *mx = NULL;
    bf_status st = BF_OK;
    if (c->faults.target == BF_TARGET_WEIGHTS || c->store.repr != BF_REPR_INT8) return BF_OK;
    int64_t n_rest = c->golden.samples % c->batch;
    mx = bf__calloc(c->surface.n_sites + 1, sizeof *mx);
    if (!mx) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
    int one = bf__eval_set_unbatched(m, c->ds);
    bf_plan_opts po = {.unbatched = one, .max_run_bytes = c->max_run_bytes};
    if ((st = bf_plan_create_opts(m, c->batch, &po, &full, err)) != BF_OK) goto out;
    if (n_rest && (st = bf_plan_create_opts(m, n_rest, &po, &rest, err)) != BF_OK) goto out;
    for (int64_t start = 0; start < c->golden.samples; start += c->batch) {
        bf_plan *p = c->golden.samples - start < c->batch ? rest : full;
        for (size_t i = 0; i < m->n_inputs; i++) {
            const bf_tensor *src = bf_dataset_find(c->ds, m->inputs[i].name);
            st = one ? bf__eval_feed_sample(src, start, bf_plan_input(p, i), err)
                     : bf_dataset_copy_rows(src, start, bf_plan_batch(p), bf_plan_input(p, i), err);
            if (st != BF_OK) goto out;
        }
        if ((st = bf_plan_run(p, err)) != BF_OK) goto out;
        for (size_t s = 0; s < c->surface.n_sites; s++) {
            const bf_tensor *t = bf_plan_value(p, c->surface.site_value[s]);
            const float *x = t->data;
            for (int64_t k = 0, n = bf_tensor_numel(t); k < n; k++)
                if (fabsf(x[k]) > mx[s]) mx[s] = fabsf(x[k]);   /* NaN never compares greater */
        }
    }
    for (size_t s = 0; s < c->surface.n_sites; s++) bf_repr_int8_scales(&mx[s], 1, 1, 0, &c->surface.site_scale[s]);
out:
    bf_plan_free(full);
    bf_plan_free(rest);
    bf__free(mx);
    return st;
}
