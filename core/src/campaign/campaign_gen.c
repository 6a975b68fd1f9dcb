/* Campaigns that generate (bf_campaign_spec.gen_new_tokens, docs/LM.md):
 * each trial, besides its pass over the eval set, decodes M tokens greedily
 * from every prompt of the eval set with its faults, through the same
 * generator `bitflip generate` uses (bitflip/generate.h), and scores the
 * tokens against the golden decoding, made once here. Weight faults are
 * written into every step's plan for the whole decoding (as --flip);
 * activation faults strike step 0, the prompt's own pass, whose shapes are
 * the eval pass's, so a site's element index means the same element (as
 * --act-flip VALUE:0:INDEX:BIT). A trial's decoding is always a full re-run
 * (exact): the differential engine serves the eval pass only. */
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"
#include "diff/diff.h"
#include "model/graph.h"
#include "exec/gen_impl.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The prompts: the eval-set tensor of the model's `input_ids` input, else of
 * its first integer input (the graph input a language model's tokens feed). */
const bf_tensor *bf__campaign_gen_prompts(const bf_model *m, const bf_dataset *ds)
{
    const bf_tensor *t = bf_dataset_find(ds, "input_ids");
    for (size_t i = 0; !t && i < m->n_inputs; i++) {
        const bf_tensor *x = bf_dataset_find(ds, m->inputs[i].name);
        if (x && (x->dtype == BF_I64 || x->dtype == BF_I32)) t = x;
    }
    return t;
}

static const bf_tensor *find_prompts(const bf_campaign *c) { return bf__campaign_gen_prompts(c->model, c->ds); }

/* The model a generator decodes with: a language model's sequence axis is
 * bound to the eval set's length for the campaign's passes
 * (bf_model_bind_dims), and every step of a decoding has a length of its
 * own, so the model before binding; a bound model shares its base's values
 * and parameters, index for index (model_dims.c). */
const bf_model *bf__campaign_gen_model(const bf_model *m)
{
    while (m->base && m->base->n_values == m->n_values && m->base->n_params == m->n_params) m = m->base;
    return m;
}

static const bf_model *gen_model(const bf_campaign *c) { return bf__campaign_gen_model(c->model); }

/* A generator with the campaign's stored weights (the golden model as the
 * representation holds it). */
static bf_status make_generator(const bf_campaign *c, bf_generator **out, bf_error *err)
{
    bf_gen_opts o = {.new_tokens = c->gen.m};
    bf_status st = bf_generator_create(gen_model(c), find_prompts(c), &o, out, err);
    if (st != BF_OK) return bf_error_prefix(err, "generate");
    for (size_t p = 0; st == BF_OK && p < c->model->n_params; p++)
        if (c->store.values[p]) st = bf__generator_set_param(*out, p, c->store.values[p], err);
    if (st != BF_OK) {
        bf_generator_free(*out);
        *out = NULL;
    }
    return st;
}

/* Activation sites must hold at step 0 the elements they hold in the eval
 * pass: a KV-cache export evaluated with a past in its eval set runs step 0
 * over an empty past, so its attention values have other shapes there. */
static bf_status check_sites(const bf_campaign *c, bf_error *err)
{
    if (c->faults.target != BF_TARGET_ACTIVATIONS) return BF_OK;
    const bf_plan *p0 = c->gen.g->steps[0].plan;
    int64_t b = bf_generator_batch(c->gen.g);
    for (size_t s = 0; s < c->surface.n_sites; s++) {
        const bf_tensor *v = bf_plan_value(p0, c->surface.site_value[s]);
        int64_t per = v ? bf_tensor_numel(v) / b : -1;
        if (per != c->surface.sites[s].elements)
            return bf_error_set(err, BF_EUNSUPPORTED,
                                "generate: activation '%s' holds %lld elements per prompt at the decoding's first step "
                                "and %lld in the eval pass, so a fault's index would not name the same element (a "
                                "KV-cache export whose eval set holds a past: generate from an eval set without one, "
                                "or fault its weights)",
                                c->surface.sites[s].name, (long long)per, (long long)c->surface.sites[s].elements);
    }
    return BF_OK;
}

bf_status bf__campaign_gen_golden(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    if (spec->gen_new_tokens <= 0) return BF_OK;
    if (c->golden.task != BF_TASK_LANGUAGE_MODEL)
        return bf_error_set(err, BF_EINVAL,
                            "generate.new_tokens: generation applies to a language_model task (an eval set with "
                            "input_ids and labels int64 [N, T]); this eval set makes the task %s",
                            bf_task_name(c->golden.task));
    if (!find_prompts(c))
        return bf_error_set(err, BF_EINVAL, "generate: the eval set has no integer token ids ('input_ids') to start from");
    double t0 = now_s();
    c->gen.m = spec->gen_new_tokens;
    bf_status st = make_generator(c, &c->gen.g, err);
    if (st != BF_OK) return st;
    c->gen.n = bf_generator_prompts(c->gen.g);
    if ((st = check_sites(c, err)) != BF_OK) return st;
    if (!(c->gen.golden = bf__malloc((size_t)(c->gen.n * c->gen.m) * sizeof *c->gen.golden)))
        return bf_error_set(err, BF_ENOMEM, "out of memory for the golden generation");
    if ((st = bf_generator_run(c->gen.g, NULL, c->gen.golden, err)) != BF_OK) return bf_error_prefix(err, "generate (golden)");
    c->gen.seconds = now_s() - t0;
    return BF_OK;
}

bf_status bf__campaign_gen_worker(const bf_campaign *c, int idx, bf_generator **out, bf_error *err)
{
    *out = NULL;
    if (!c->gen.m) return BF_OK;
    if (idx == 0) {
        *out = c->gen.g;
        return BF_OK;
    }
    return make_generator(c, out, err);
}

bf_status bf__campaign_gen_trial(const bf_campaign *c, bf_generator *g, const bf__dx_weight *dw, size_t n_dw,
                                 const bf_value_fault *vf, size_t n_vf, int64_t *tokens, double gen[3], bf_error *err)
{
    bf_status st = BF_OK;
    size_t written = 0;
    bf_gen_value_fault *gv = NULL;
    if (n_vf && !(gv = bf__malloc(n_vf * sizeof *gv))) return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's faults");
    for (size_t i = 0; i < n_vf; i++) gv[i] = (bf_gen_value_fault){.step = 0, .fault = vf[i]};
    for (; written < n_dw && st == BF_OK; written++)
        st = bf__generator_write_param(g, dw[written].param, dw[written].index, dw[written].new_value, err);
    if (st == BF_OK) {
        bf_gen_faults f = {.values = gv, .n_values = n_vf};
        st = bf_generator_run(g, &f, tokens, err);
        if (st != BF_OK) bf_error_prefix(err, "generate");
    }
    /* the stored values back, in reverse, whatever happened (a write to a
     * copy made already allocates nothing) */
    for (size_t i = written; i-- > 0;) bf__generator_write_param(g, dw[i].param, dw[i].index, dw[i].old_value, NULL);
    for (size_t i = 0; i < written; i++)
        if (i == 0 || dw[i].param != dw[i - 1].param) bf__generator_param_golden(g, dw[i].param);
    bf__free(gv);
    if (st != BF_OK) return st;
    bf_gen_metrics gm;
    if ((st = bf_gen_compare(c->gen.golden, tokens, c->gen.n, c->gen.m, NULL, &gm, err)) != BF_OK) return st;
    gen[0] = gm.generation_match;
    gen[1] = gm.first_divergence;
    gen[2] = gm.edit_distance;
    return BF_OK;
}

void bf__campaign_gen_free(bf_campaign *c)
{
    bf_generator_free(c->gen.g);
    bf__free(c->gen.golden);
    c->gen.g = NULL;
    c->gen.golden = NULL;
}
