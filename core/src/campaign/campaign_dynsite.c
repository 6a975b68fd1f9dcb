/* Sites a dynamic step computes (faults after NMS: a detector's boxes and
 * scores, a Gather after TopK). Their elements are data: each sample, each
 * run has its own count, zero for an image with no detection. A drawn
 * fault's element is therefore drawn when it applies, uniformly over the
 * elements the value has in that run for that sample (bf_value_fault.drawn,
 * exec/plan.c); what the campaign needs here is each such site's weight in
 * the population (its share of uniform draws and of the population size):
 * the golden pass's elements per sample, their mean over the eval set,
 * rounded to the nearest, at least 1 when any sample has one. The golden
 * pass is the one the campaign made; this one only counts, on a plan of
 * its own, batch by batch (docs/CAMPAIGNS.md "Faults after NMS"). */
#include <string.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"

static bf_status count_pass(bf_campaign *c, double *sum, bf_error *err)
{
    const bf_model *m = c->model;
    bf_plan *full = NULL, *rest = NULL;
    int64_t n_rest = c->golden.samples % c->batch;
    int one = bf__eval_set_unbatched(m, c->ds);
    bf_plan_opts po = {.unbatched = one, .max_run_bytes = c->max_run_bytes};
    bf_status st = bf_plan_create_opts(m, c->batch, &po, &full, err);
    if (st == BF_OK && n_rest) st = bf_plan_create_opts(m, n_rest, &po, &rest, err);
    for (int64_t start = 0; st == BF_OK && start < c->golden.samples; start += c->batch) {
        bf_plan *p = c->golden.samples - start < c->batch ? rest : full;
        for (size_t i = 0; st == BF_OK && i < m->n_inputs; i++) {
            const bf_tensor *src = bf_dataset_find(c->ds, m->inputs[i].name);
            st = one ? bf__eval_feed_sample(src, start, bf_plan_input(p, i), err)
                     : bf_dataset_copy_rows(src, start, bf_plan_batch(p), bf_plan_input(p, i), err);
        }
        if (st == BF_OK) st = bf_plan_run(p, err);
        for (size_t s = 0; st == BF_OK && s < c->surface.n_sites; s++)
            if (c->surface.sites[s].dynamic)
                sum[s] += (double)bf__plan_run_row(p, c->surface.site_value[s]) * (double)bf_plan_batch(p);
    }
    bf_plan_free(full);
    bf_plan_free(rest);
    return st;
}

bf_status bf__campaign_dyn_sites(bf_campaign *c, bf_error *err)
{
    size_t n_dyn = 0;
    for (size_t s = 0; s < c->surface.n_sites; s++) n_dyn += c->surface.sites[s].dynamic;
    if (!n_dyn) return BF_OK;
    double *sum = bf__calloc(c->surface.n_sites, sizeof *sum);
    if (!sum) return bf_error_set(err, BF_ENOMEM, "out of memory");
    bf_status st = count_pass(c, sum, err);
    if (st != BF_OK) {
        bf__free(sum);
        return bf_error_prefix(err, "counting the elements of the sites dynamic steps compute");
    }
    for (size_t s = 0; s < c->surface.n_sites; s++) {
        bf_site *site = &c->surface.sites[s];
        if (site->dynamic) {
            double mean = sum[s] / (double)c->golden.samples;
            site->elements = (int64_t)(mean + 0.5);
            if (site->elements == 0 && sum[s] > 0) site->elements = 1;
        }
        c->surface.prefix[s + 1] = c->surface.prefix[s] + site->elements;
    }
    c->surface.elements = c->surface.prefix[c->surface.n_sites];
    bf__free(sum);
    /* uniform draws need a population; per_tensor and list sampling pick
     * sites themselves (a fault on an empty value does nothing) */
    if (c->surface.elements == 0 && (c->faults.sampling == BF_SAMPLE_UNIFORM || c->faults.sampling == BF_SAMPLE_PER_BIT))
        return bf_error_set(err, BF_EINVAL,
                            "the selected sites hold no elements in the golden pass ('%s' is computed by a dynamic step "
                            "and is empty for every sample): nothing to draw faults from",
                            c->surface.sites[0].name);
    return BF_OK;
}
