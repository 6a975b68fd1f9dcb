/* Generation: greedy decoding of a language model under faults
 * (bitflip/generate.h). One plan per step, built once: a plan has static
 * shapes, and a step's shapes (its sequence or past length, given to the
 * plan by their ONNX names through bf_plan_dims_from) are its own.
 * Building them all up front costs one plan build per new token once per
 * generator, which every run then reuses (golden, each fault): docs/LM.md
 * has the measured cost. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "exec/gen_impl.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"

static bf_status oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory"); }

/* Step s's shapes: with the cache, the prompt over an empty past, then one
 * token over all before it; without, the whole sequence so far. */
static void step_shape(const bf_generator *g, int64_t s, int64_t *seq, int64_t *past)
{
    if (!g->io.cache) *seq = g->p + s, *past = 0;
    else if (s == 0) *seq = g->p, *past = 0;
    else *seq = 1, *past = g->p + s - 1;
}

/* Scratch for the sizes of the graph inputs' symbolic dims at one step: the
 * shapes the step feeds, and the names and sizes bf_plan_dims_from reads
 * from them (bf_plan_opts' dims). */
typedef struct gen_dims {
    size_t n_in, n;
    int64_t *shape;           /* n_in x BF_MAX_DIMS */
    const int64_t **shapes;   /* per input: its row of shape */
    int *ndims;
    const char **names;
    int64_t *sizes;
} gen_dims;

static bf_status dims_alloc(const bf_model *m, gen_dims *d)
{
    d->n_in = bf_model_num_inputs(m);
    size_t slots = (d->n_in + 1) * BF_MAX_DIMS;
    d->shape = bf__calloc(slots, sizeof *d->shape);
    d->shapes = bf__calloc(d->n_in + 1, sizeof *d->shapes);
    d->ndims = bf__calloc(d->n_in + 1, sizeof *d->ndims);
    d->names = bf__calloc(slots, sizeof *d->names);
    d->sizes = bf__calloc(slots, sizeof *d->sizes);
    if (!d->shape || !d->shapes || !d->ndims || !d->names || !d->sizes) return BF_ENOMEM;
    return BF_OK;
}

static void dims_free(gen_dims *d)
{
    bf__free(d->shape), bf__free(d->shapes), bf__free(d->ndims), bf__free(d->names), bf__free(d->sizes);
}

static void set_shape(gen_dims *d, int i, int nd, int64_t a, int64_t b, int64_t c, int64_t e)
{
    int64_t *row = d->shape + (size_t)i * BF_MAX_DIMS;
    row[0] = a, row[1] = b, row[2] = c, row[3] = e;
    d->ndims[i] = nd;
}

/* The plan options of one step: its symbolic dims sized by name from the
 * shapes it feeds (a fixed dim that differs is refused there, naming it). */
static bf_status step_opts(const bf_generator *g, int64_t seq, int64_t past, gen_dims *d, bf_plan_opts *po,
                           bf_error *err)
{
    const bf__genio *io = &g->io;
    for (size_t i = 0; i < d->n_in; i++) {
        d->shapes[i] = d->shape + i * BF_MAX_DIMS;
        d->ndims[i] = bf_model_input(g->m, i)->ndim;   /* roles checked every rank */
    }
    set_shape(d, io->ids, 2, g->batch, seq, 0, 0);
    if (io->mask >= 0) set_shape(d, io->mask, 2, g->batch, past + seq, 0, 0);
    if (io->pos >= 0) set_shape(d, io->pos, 2, g->batch, seq, 0, 0);
    for (int l = 0; l < io->kv.layers; l++)
        for (int k = 0; k < 2; k++) set_shape(d, io->kv_idx[4 * l + k], 4, g->batch, io->kv.heads, past, io->kv.head_dim);
    bf_status st = bf_plan_dims_from(g->m, d->shapes, d->ndims, d->names, d->sizes, d->n_in * BF_MAX_DIMS, &d->n, err);
    if (st != BF_OK) return st;
    /* whole passes that read the graph outputs only */
    *po = (bf_plan_opts){.share_buffers = 1, .fuse_activations = 1, .n_dims = d->n, .dim_names = d->names,
                         .dim_sizes = d->sizes};
    return BF_OK;
}

static uint64_t held(const bf_plan_budget *b)
{
    return b->arena_bytes + b->folded_bytes + b->scratch_bytes + b->overhead_bytes;
}

/* The plans' memory from shapes, before any is allocated: in all, and the
 * largest step's. */
static bf_status sum_budget(const bf_generator *g, gen_dims *dims, uint64_t *total, uint64_t *top, int64_t *top_step,
                            bf_error *err)
{
    *total = *top = 0;
    *top_step = 0;
    for (int64_t s = 0; s < g->mnew; s++) {
        int64_t seq, past;
        bf_plan_budget b;
        bf_plan_opts po;
        step_shape(g, s, &seq, &past);
        bf_status st = step_opts(g, seq, past, dims, &po, err);
        if (st == BF_OK) st = bf_plan_estimate_opts(g->m, g->batch, &po, &b, err);
        if (st != BF_OK) return bf_error_prefix(err, "step %lld", (long long)s);
        *total += held(&b);
        if (held(&b) > *top) *top = held(&b), *top_step = s;
    }
    return BF_OK;
}

static bf_status check_budget(const bf_generator *g, uint64_t max_bytes, gen_dims *dims, bf_error *err)
{
    uint64_t total, top;
    int64_t top_step;
    bf_status st = sum_budget(g, dims, &total, &top, &top_step, err);
    if (st != BF_OK || total <= max_bytes) return st;
    char a[32], b[32], c[32];
    return bf_error_set(err, BF_ELIMIT,
                        "the generation's %lld plans (one per new token, batch %lld) need %s (the largest, step %lld's: "
                        "%s), over the limit of %s",
                        (long long)g->mnew, (long long)g->batch, bf_bytes_str(total, a, sizeof a), (long long)top_step,
                        bf_bytes_str(top, b, sizeof b), bf_bytes_str(max_bytes, c, sizeof c));
}

/* Graph input i of step s's plan has the shape the step feeds: a dim the
 * export fixed (no dynamic axis) keeps its own size: a guard before any feed. */
static bf_status check_input(bf_generator *g, int64_t s, int i, const int64_t *want, int nd, bf_error *err)
{
    const bf_tensor *t = bf_plan_input(g->steps[s].plan, (size_t)i);
    if (t->ndim == nd && !memcmp(t->dims, want, (size_t)nd * sizeof *want)) return BF_OK;
    char a[96], b[96];
    return bf_error_set(err, BF_ESHAPE,
                        "step %lld: graph input '%s' is %s where the step feeds %s; a generation needs its sequence "
                        "(and past) dimensions symbolic (torch.onnx.export's dynamic_axes)",
                        (long long)s, bf_model_input(g->m, (size_t)i)->name, bf_shape_str(t->dims, t->ndim, a, sizeof a),
                        bf_shape_str(want, nd, b, sizeof b));
}

static bf_status check_inputs(bf_generator *g, int64_t s, bf_error *err)
{
    const bf__gen_step *st = &g->steps[s];
    const bf__genio *io = &g->io;
    int64_t ids[2] = {g->batch, st->seq}, mask[2] = {g->batch, st->past + st->seq};
    int64_t past[4] = {g->batch, io->kv.heads, st->past, io->kv.head_dim};
    bf_status rc = check_input(g, s, io->ids, ids, 2, err);
    if (rc == BF_OK && io->mask >= 0) rc = check_input(g, s, io->mask, mask, 2, err);
    if (rc == BF_OK && io->pos >= 0) rc = check_input(g, s, io->pos, ids, 2, err);
    for (int l = 0; rc == BF_OK && l < io->kv.layers; l++)
        for (int k = 0; rc == BF_OK && k < 2; k++) rc = check_input(g, s, io->kv_idx[4 * l + k], past, 4, err);
    return rc;
}

/* The shapes a plan came out with: logits and, with a cache, the presents
 * (what the next step copies as its past). */
static bf_status check_outputs(bf_generator *g, int64_t s, bf_error *err)
{
    const bf__gen_step *st = &g->steps[s];
    const bf_tensor *lo = bf_plan_output(st->plan, (size_t)g->io.logits);
    char shape[96];
    int ok = lo->ndim == 3 ? lo->dims[0] == g->batch && lo->dims[1] == st->seq
                           : lo->ndim == 2 && lo->dims[0] == g->batch;
    if (!ok || lo->dims[lo->ndim - 1] < 1)
        return bf_error_set(err, BF_ESHAPE, "step %lld: the logits '%s' come out %s; a batch of %lld over %lld tokens "
                            "wants [%lld, %lld, vocab] or [%lld, vocab]",
                            (long long)s, lo->name ? lo->name : "?", bf_shape_str(lo->dims, lo->ndim, shape, sizeof shape),
                            (long long)g->batch, (long long)st->seq, (long long)g->batch, (long long)st->seq,
                            (long long)g->batch);
    int64_t v = lo->dims[lo->ndim - 1];
    if (s == 0) g->vocab = v;
    else if (v != g->vocab)
        return bf_error_set(err, BF_ESHAPE, "step %lld: the logits have %lld columns, step 0's %lld", (long long)s,
                            (long long)v, (long long)g->vocab);
    for (int l = 0; g->io.cache && l < g->io.kv.layers; l++)
        for (int k = 0; k < 2; k++) {
            const bf_tensor *t = bf_plan_output(st->plan, (size_t)g->io.kv_idx[4 * l + 2 + k]);
            int64_t want[4] = {g->batch, g->io.kv.heads, st->past + st->seq, g->io.kv.head_dim};
            if (t->ndim != 4 || memcmp(t->dims, want, sizeof want) != 0) {
                char w[96];
                return bf_error_set(err, BF_ESHAPE, "step %lld: the cache output '%s' comes out %s, not %s (the past "
                                    "and the new tokens)",
                                    (long long)s, bf_model_output(g->m, (size_t)g->io.kv_idx[4 * l + 2 + k])->name,
                                    bf_shape_str(t->dims, t->ndim, shape, sizeof shape), bf_shape_str(want, 4, w, sizeof w));
            }
        }
    return BF_OK;
}

static bf_status build_plans(bf_generator *g, gen_dims *dims, bf_error *err)
{
    for (int64_t s = 0; s < g->mnew; s++) {
        bf__gen_step *st = &g->steps[s];
        bf_plan_budget b;
        bf_plan_opts po;
        step_shape(g, s, &st->seq, &st->past);
        bf_status rc = step_opts(g, st->seq, st->past, dims, &po, err);
        po.budget = &b;
        if (rc == BF_OK) rc = bf_plan_create_opts(g->m, g->batch, &po, &st->plan, err);
        if (rc != BF_OK) return bf_error_prefix(err, "step %lld (%lld tokens over a past of %lld)", (long long)s,
                                                (long long)st->seq, (long long)st->past);
        g->plan_bytes += held(&b);
        st->plan->flat_rows = st->seq;   /* value faults on [B*T, ...] values too (plan_impl.h) */
        if ((rc = check_inputs(g, s, err)) != BF_OK || (rc = check_outputs(g, s, err)) != BF_OK) return rc;
    }
    return BF_OK;
}

static bf_status read_prompts(bf_generator *g, const bf_tensor *t, bf_error *err)
{
    char shape[96];
    if ((t->dtype != BF_I64 && t->dtype != BF_I32) || t->ndim != 2 || t->dims[0] < 1 || t->dims[1] < 1)
        return bf_error_set(err, BF_EFORMAT, "the prompts ('%s') are %s %s; they are int64 [prompts, length] (every "
                            "prompt the same length, at least one token)",
                            t->name ? t->name : "input_ids", bf_dtype_name(t->dtype),
                            bf_shape_str(t->dims, t->ndim, shape, sizeof shape));
    g->n = t->dims[0];
    g->p = t->dims[1];
    if (g->p > INT64_MAX / 2 / g->n) return bf_error_set(err, BF_ERANGE, "the prompts are too large");
    if (!(g->prompts = bf__malloc((size_t)(g->n * g->p) * sizeof *g->prompts))) return oom(err);
    return bf_convert(g->prompts, BF_I64, t->data, t->dtype, (size_t)(g->n * g->p), err);
}

static bf_status check_ids(const bf_generator *g, bf_error *err)
{
    for (int64_t i = 0; i < g->n * g->p; i++)
        if (g->prompts[i] < 0 || g->prompts[i] >= g->vocab)
            return bf_error_set(err, BF_ERANGE,
                                "prompt %lld, position %lld: token id %lld is outside the vocabulary (0 .. %lld: the "
                                "logits' last dimension)",
                                (long long)(i / g->p), (long long)(i % g->p), (long long)g->prompts[i],
                                (long long)g->vocab - 1);
    return BF_OK;
}

bf_status bf_generator_create(const bf_model *model, const bf_tensor *prompts, const bf_gen_opts *opts,
                              bf_generator **out, bf_error *err)
{
    bf_status st;
    gen_dims dims = {0};
    *out = NULL;
    if (opts->new_tokens < 1 || opts->new_tokens > BF_GEN_MAX_NEW_TOKENS)
        return bf_error_set(err, BF_ERANGE, "new tokens must be 1 .. %d, got %lld", BF_GEN_MAX_NEW_TOKENS,
                            (long long)opts->new_tokens);
    if (opts->batch < 0) return bf_error_set(err, BF_EINVAL, "batch must be 0 (all prompts) or more");
    bf_generator *g = bf__calloc(1, sizeof *g);
    if (!g) return oom(err);
    g->m = model;
    g->mnew = opts->new_tokens;
    if ((st = bf__gen_roles(model, !opts->no_cache, &g->io, err)) != BF_OK) goto fail;
    if ((st = read_prompts(g, prompts, err)) != BF_OK) goto fail;
    g->batch = opts->batch ? opts->batch : 64;
    if (g->batch > g->n) g->batch = g->n;
    if (g->p + g->mnew > INT64_MAX / g->batch) {
        st = bf_error_set(err, BF_ERANGE, "the sequences are too long");
        goto fail;
    }
    g->steps = bf__calloc((size_t)g->mnew, sizeof *g->steps);
    g->seq = bf__malloc((size_t)(g->batch * (g->p + g->mnew)) * sizeof *g->seq);
    if (!g->steps || !g->seq || dims_alloc(model, &dims) != BF_OK) {
        st = oom(err);
        goto fail;
    }
    if (opts->max_bytes && (st = check_budget(g, opts->max_bytes, &dims, err)) != BF_OK) goto fail;
    if ((st = build_plans(g, &dims, err)) != BF_OK) goto fail;
    if ((st = check_ids(g, err)) != BF_OK) goto fail;
    dims_free(&dims);
    *out = g;
    return BF_OK;
fail:
    dims_free(&dims);
    bf_generator_free(g);
    return st;
}

bf_status bf__gen_estimate(const bf_model *model, const bf_tensor *prompts, int64_t new_tokens, uint64_t *bytes,
                           bf_error *err)
{
    bf_generator g = {.m = model, .mnew = new_tokens};
    gen_dims dims = {0};
    uint64_t top;
    int64_t top_step;
    *bytes = 0;
    if (new_tokens < 1 || new_tokens > BF_GEN_MAX_NEW_TOKENS)
        return bf_error_set(err, BF_ERANGE, "new tokens must be 1 .. %d, got %lld", BF_GEN_MAX_NEW_TOKENS,
                            (long long)new_tokens);
    bf_status st = bf__gen_roles(model, 1, &g.io, err);
    if (st == BF_OK) st = read_prompts(&g, prompts, err);
    if (st == BF_OK) {
        g.batch = g.n < 64 ? g.n : 64;
        if (dims_alloc(model, &dims) != BF_OK) st = oom(err);
    }
    if (st == BF_OK) st = sum_budget(&g, &dims, bytes, &top, &top_step, err);
    dims_free(&dims);
    bf__free(g.prompts);
    return st;
}

void bf_generator_free(bf_generator *g)
{
    if (!g) return;
    for (int64_t s = 0; g->steps && s < g->mnew; s++) bf_plan_free(g->steps[s].plan);
    bf__free(g->steps);
    bf__free(g->prompts);
    bf__free(g->seq);
    bf__free(g->vf);
    bf__free(g);
}

int64_t bf_generator_prompts(const bf_generator *g) { return g->n; }
int64_t bf_generator_prompt_len(const bf_generator *g) { return g->p; }
int64_t bf_generator_new_tokens(const bf_generator *g) { return g->mnew; }
int64_t bf_generator_vocab(const bf_generator *g) { return g->vocab; }
int64_t bf_generator_batch(const bf_generator *g) { return g->batch; }
uint64_t bf_generator_plan_bytes(const bf_generator *g) { return g->plan_bytes; }

bf_kv_layout bf_generator_kv(const bf_generator *g)
{
    bf_kv_layout none = {0};
    return g->io.cache ? g->io.kv : none;
}

/* --- parameters as a campaign stores and faults them (campaign/campaign_gen.c):
 * the same writes an evaluator makes to its plans (exec/eval.c), to every
 * step's plan. */

bf_status bf__generator_set_param(bf_generator *g, size_t param, const float *values, bf_error *err)
{
    size_t n = (size_t)bf_tensor_numel(g->m->params[param].tensor);
    bf_dtype dt = g->m->params[param].dtype;
    for (int64_t s = 0; s < g->mnew; s++) {
        void *data;
        bf_status st = bf_plan_param_data(g->steps[s].plan, param, &data, err);
        if (st != BF_OK) return st;
        if (dt == BF_F32) memcpy(data, values, n * sizeof *values);
        else for (size_t i = 0; i < n; i++) bf__param_int_set(data, dt, (int64_t)i, values[i]);
        bf__plan_param_rewritten(g->steps[s].plan, param);
    }
    return BF_OK;
}

bf_status bf__generator_write_param(bf_generator *g, size_t param, int64_t index, float value, bf_error *err)
{
    for (int64_t s = 0; s < g->mnew; s++) {
        bf_status st = bf__plan_param_write(g->steps[s].plan, param, index, value, err);
        if (st != BF_OK) return st;
    }
    return BF_OK;
}

void bf__generator_param_golden(bf_generator *g, size_t param)
{
    for (int64_t s = 0; s < g->mnew; s++) bf__plan_param_golden(g->steps[s].plan, param);
}
