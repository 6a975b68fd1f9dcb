/* Creating a campaign: the spec resolved against the model (tensor patterns
 * to sites, bit positions, fault list), the golden model stored in the
 * campaign's representation, and the golden pass every trial is compared to.
 *
 * This version injects into weights (parameter tensors), permanently for a
 * whole pass. Activations, graph inputs and transient faults are refused
 * with BF_EUNSUPPORTED; they come in a later version. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "bitflip/metrics.h"
#include "campaign_impl.h"
#include "graph.h"

void bf_campaign_free(bf_campaign *c)
{
    if (!c) return;
    for (size_t p = 0; c->stored && p < c->model->n_params; p++) bf__free(c->stored[p]);
    for (size_t p = 0; c->scale && p < c->model->n_params; p++) bf__free(c->scale[p]);
    bf__free(c->stored);
    bf__free(c->scale);
    bf__free(c->slice);
    bf__free(c->rates);
    bf__free(c->list);
    bf__free(c->sites);
    bf__free(c->site_param);
    bf__free(c->prefix);
    bf__free(c->golden);
    bf__free(c->golden_pred);
    bf__free(c);
}

size_t bf_campaign_num_sites(const bf_campaign *c) { return c->n_sites; }
const bf_site *bf_campaign_site(const bf_campaign *c, size_t i) { return i < c->n_sites ? &c->sites[i] : NULL; }
int64_t bf_campaign_num_trials(const bf_campaign *c) { return c->n_trials; }

double bf_campaign_population(const bf_campaign *c)
{
    /* random_value replaces whole values: the population is the elements */
    if (c->kind == BF_FAULT_RANDOM_VALUE) return (double)c->elements;
    return (double)c->elements * (double)c->n_allowed;
}

/* --- tensor patterns */

static int pattern_matches(const char *pat, const bf_param_info *pi)
{
    if (strncmp(pat, "op:", 3) == 0) return pi->reader_op && strcmp(pi->reader_op, pat + 3) == 0;
    const char *name = pi->tensor->name ? pi->tensor->name : "";
    return strcmp(pat, name) == 0 || fnmatch(pat, name, 0) == 0;
}

/* "a, b, c and 5 more": a few names to show what was available. */
static void list_names(const bf_model *m, int ops, char *buf, size_t len)
{
    size_t off = 0, shown = 0, total = 0;
    buf[0] = 0;
    for (size_t p = 0; p < m->n_params; p++) {
        const char *s = ops ? m->params[p].reader_op : m->params[p].tensor->name;
        if (!s) continue;
        int dup = 0;
        for (size_t q = 0; ops && q < p; q++) dup |= m->params[q].reader_op && strcmp(m->params[q].reader_op, s) == 0;
        if (dup) continue;
        total++;
        if (shown < 6 && off < len) {
            int w = snprintf(buf + off, len - off, "%s%s", shown ? ", " : "", s);
            if (w > 0) off += (size_t)w;
            shown++;
        }
    }
    if (total > shown && off < len) snprintf(buf + off, len - off, " and %zu more", total - shown);
}

static bf_status resolve_sites(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    const bf_model *m = c->model;
    unsigned char *sel = bf__calloc(m->n_params + 1, 1);
    if (!sel) return bf_error_set(err, BF_ENOMEM, "out of memory");
    bf_status st = BF_OK;
    for (size_t k = 0; k < spec->n_tensors || (k == 0 && spec->n_tensors == 0); k++) {
        const char *pat = spec->n_tensors ? (spec->tensors && spec->tensors[k] ? spec->tensors[k] : "") : "*";
        int any = 0;
        for (size_t p = 0; p < m->n_params; p++)
            if (pattern_matches(pat, &m->params[p])) sel[p] = 1, any = 1;
        if (!any) {
            char names[256];
            int ops = strncmp(pat, "op:", 3) == 0;
            list_names(m, ops, names, sizeof names);
            st = ops ? bf_error_set(err, BF_ENOTFOUND, "tensor pattern '%s' matches no parameter: no parameter is read by a %s node (parameters are read by %s)",
                                    pat, pat + 3, names[0] ? names : "no node")
                     : bf_error_set(err, BF_ENOTFOUND, "tensor pattern '%s' matches no parameter (the model has %s)",
                                    pat, names[0] ? names : "no parameters");
            goto out;
        }
    }
    for (size_t p = 0; p < m->n_params; p++) c->n_sites += sel[p] && bf_tensor_numel(m->params[p].tensor) > 0;
    if (c->n_sites == 0) { st = bf_error_set(err, BF_EINVAL, "the selected parameters have no elements to corrupt"); goto out; }
    c->sites = bf__calloc(c->n_sites, sizeof *c->sites);
    c->site_param = bf__calloc(c->n_sites, sizeof *c->site_param);
    c->prefix = bf__calloc(c->n_sites + 1, sizeof *c->prefix);
    if (!c->sites || !c->site_param || !c->prefix) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
    size_t s = 0;
    for (size_t p = 0; p < m->n_params; p++) {
        const bf_param_info *pi = &m->params[p];
        if (!sel[p] || bf_tensor_numel(pi->tensor) == 0) continue;
        c->sites[s] = (bf_site){.name = pi->tensor->name ? pi->tensor->name : "",
                                .op = pi->reader_op ? pi->reader_op : "",
                                .elements = bf_tensor_numel(pi->tensor), .bits = c->repr_bits};
        c->site_param[s] = p;
        c->prefix[s + 1] = c->prefix[s] + c->sites[s].elements;
        s++;
    }
    c->elements = c->prefix[c->n_sites];
out:
    bf__free(sel);
    return st;
}

/* --- bits and fault list */

static bf_status resolve_bits(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    unsigned char on[64] = {0};
    if (spec->n_positions < 0 || spec->n_positions > 64)
        return bf_error_set(err, BF_EINVAL, "%d bit positions given; at most 64", spec->n_positions);
    for (int i = 0; i < spec->n_positions; i++) {
        int b = spec->positions[i];
        if (b < 0 || b >= c->repr_bits)
            return bf_error_set(err, BF_ERANGE, "bit position %d does not exist in %s (bits 0..%d)", b,
                                bf_repr_name(c->repr), c->repr_bits - 1);
        on[b] = 1;
    }
    for (int b = 0; b < c->repr_bits; b++)
        if (on[b] || spec->n_positions == 0) c->allowed[c->n_allowed++] = b;

    c->bits = spec->bits > 0 ? spec->bits : 1;
    c->burst = spec->burst != 0;
    if (c->kind == BF_FAULT_BER || c->kind == BF_FAULT_RANDOM_VALUE) return BF_OK;
    if (c->bits > c->n_allowed)
        return bf_error_set(err, BF_ERANGE, "%d bits per fault, but only %d bit positions are allowed", c->bits, c->n_allowed);
    if (c->burst) {
        for (int b = 0; b + c->bits <= c->repr_bits; b++) {
            int ok = 1;
            for (int k = 0; k < c->bits; k++) ok &= spec->n_positions == 0 || on[b + k];
            if (ok) c->starts[c->n_starts++] = b;
        }
        if (c->n_starts == 0)
            return bf_error_set(err, BF_EINVAL, "a burst of %d adjacent bits does not fit in the allowed bit positions", c->bits);
    }
    return BF_OK;
}

static bf_status resolve_list(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    if (spec->n_list == 0) return bf_error_set(err, BF_EINVAL, "the fault list is empty");
    c->list = bf__calloc(spec->n_list, sizeof *c->list);
    if (!c->list) return bf_error_set(err, BF_ENOMEM, "out of memory for the fault list");
    c->n_list = spec->n_list;
    for (size_t i = 0; i < spec->n_list; i++) {
        const bf_fault_entry *e = &spec->list[i];
        const char *name = e->tensor ? e->tensor : "";
        int64_t site = -1;
        for (size_t s = 0; s < c->n_sites; s++)
            if (strcmp(c->sites[s].name, name) == 0) site = (int64_t)s;
        if (site < 0) {
            if (bf_model_find_param(c->model, name) >= 0)
                return bf_error_set(err, BF_EINVAL, "list entry %zu: tensor '%s' is not among the selected tensors", i, name);
            char names[256];
            list_names(c->model, 0, names, sizeof names);
            return bf_error_set(err, BF_ENOTFOUND, "list entry %zu: the model has no parameter named '%s' (it has %s)", i,
                                name, names);
        }
        const bf_site *st = &c->sites[site];
        if (e->index < 0 || e->index >= st->elements)
            return bf_error_set(err, BF_ERANGE, "list entry %zu: tensor '%s' has %lld elements, index %lld is out of range", i,
                                name, (long long)st->elements, (long long)e->index);
        if (e->bit < 0 || e->bit >= c->repr_bits)
            return bf_error_set(err, BF_ERANGE, "list entry %zu: bit %d does not exist in %s (bits 0..%d)", i, e->bit,
                                bf_repr_name(c->repr), c->repr_bits - 1);
        c->list[i] = (bf__list_fault){.site = site, .index = e->index, .bit = e->bit};
    }
    return BF_OK;
}

/* --- checks of the spec that do not need the model */

static bf_status check_spec(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    if (spec->target != BF_TARGET_WEIGHTS)
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "target '%s' comes in a later version; this version injects faults into weights (parameter tensors)",
                            spec->target == BF_TARGET_ACTIVATIONS ? "activations" : spec->target == BF_TARGET_INPUTS ? "inputs" : "?");
    if (spec->persistence != BF_PERSIST_PERMANENT)
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "transient faults come in a later version; this version injects permanent faults (for a whole pass)");
    if (bf_repr_bits(spec->repr) == 0) return bf_error_set(err, BF_EINVAL, "unknown representation %d", (int)spec->repr);
    if ((int)spec->model_kind < 0 || spec->model_kind > BF_FAULT_BER)
        return bf_error_set(err, BF_EINVAL, "unknown fault model %d", (int)spec->model_kind);
    if ((int)spec->sampling < 0 || spec->sampling > BF_SAMPLE_LIST)
        return bf_error_set(err, BF_EINVAL, "unknown sampling %d", (int)spec->sampling);
    if (spec->model_kind == BF_FAULT_BER && spec->sampling != BF_SAMPLE_UNIFORM)
        return bf_error_set(err, BF_EINVAL, "model 'ber' flips bits over the whole population: it takes sampling 'uniform' only");
    if (spec->model_kind == BF_FAULT_RANDOM_VALUE && spec->sampling == BF_SAMPLE_PER_BIT)
        return bf_error_set(err, BF_EINVAL, "sampling 'per_bit' needs bit positions; model 'random_value' replaces every bit");
    if (spec->batch < 0) return bf_error_set(err, BF_EINVAL, "batch must be positive (or 0 for the default), got %lld", (long long)spec->batch);
    if (spec->critical_metric >= BF_METRIC_COUNT || spec->critical_metric < -1)
        return bf_error_set(err, BF_EINVAL, "unknown critical metric %d", spec->critical_metric);
    if (spec->stop_margin < 0 || spec->stop_margin >= 1 || spec->stop_margin != spec->stop_margin)
        return bf_error_set(err, BF_EINVAL, "stop margin must be in [0, 1), got %g", spec->stop_margin);
    if (spec->stop_margin > 0 && spec->stop_confidence != 0 && !(spec->stop_confidence > 0 && spec->stop_confidence < 1))
        return bf_error_set(err, BF_EINVAL, "stop confidence must be in (0, 1), got %g", spec->stop_confidence);

    c->seed = spec->seed;
    c->kind = spec->model_kind;
    c->repr = spec->repr;
    c->repr_bits = bf_repr_bits(spec->repr);
    c->sampling = spec->sampling;
    c->critical_metric = spec->critical_metric;
    c->critical_delta = spec->critical_delta;
    c->stop_margin = spec->stop_margin;
    c->stop_confidence = spec->stop_confidence > 0 ? spec->stop_confidence : 0.95;
    c->batch = spec->batch;

    if (c->kind == BF_FAULT_BER) {
        if (spec->n_rates == 0 || !spec->rates) return bf_error_set(err, BF_EINVAL, "model 'ber' needs at least one rate");
        for (size_t i = 0; i < spec->n_rates; i++)
            if (!(spec->rates[i] >= 0 && spec->rates[i] <= 1))
                return bf_error_set(err, BF_ERANGE, "BER rate %zu is %g; rates are probabilities in [0, 1]", i, spec->rates[i]);
        c->rates = bf__malloc(spec->n_rates * sizeof *c->rates);
        if (!c->rates) return bf_error_set(err, BF_ENOMEM, "out of memory");
        memcpy(c->rates, spec->rates, spec->n_rates * sizeof *c->rates);
        c->n_rates = spec->n_rates;
        c->repeats = spec->repeats > 0 ? spec->repeats : 1;
        if ((double)c->repeats * (double)c->n_rates > 9e15) return bf_error_set(err, BF_ERANGE, "too many BER trials");
        c->n_trials = c->repeats * (int64_t)c->n_rates;
    } else if (c->sampling == BF_SAMPLE_LIST) {
        c->n_trials = (int64_t)spec->n_list;
    } else {
        if (spec->trials < 1) return bf_error_set(err, BF_EINVAL, "trials must be at least 1, got %lld", (long long)spec->trials);
        c->n_trials = spec->trials;
    }
    return BF_OK;
}

/* --- golden model and pass */

static bf_status quantize_params(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    const bf_model *m = c->model;
    c->stored = bf__calloc(m->n_params + 1, sizeof *c->stored);
    c->scale = bf__calloc(m->n_params + 1, sizeof *c->scale);
    c->slice = bf__calloc(m->n_params + 1, sizeof *c->slice);
    if (!c->stored || !c->scale || !c->slice) return bf_error_set(err, BF_ENOMEM, "out of memory");
    if (c->repr == BF_REPR_FP32) return BF_OK;
    for (size_t p = 0; p < m->n_params; p++) {
        const bf_tensor *t = m->params[p].tensor;
        int64_t n = bf_tensor_numel(t);
        int64_t dim0 = t->ndim > 0 ? t->dims[0] : 1;
        c->stored[p] = bf__malloc((size_t)n * sizeof(float) + 1);
        if (!c->stored[p]) return bf_error_set(err, BF_ENOMEM, "out of memory quantizing '%s'", t->name);
        bf_qscale q = {0};
        if (c->repr == BF_REPR_INT8 && n > 0) {
            int64_t n_scale = spec->per_channel && dim0 > 0 ? dim0 : 1;
            c->scale[p] = bf__malloc((size_t)n_scale * sizeof(float));
            if (!c->scale[p]) return bf_error_set(err, BF_ENOMEM, "out of memory quantizing '%s'", t->name);
            bf_repr_int8_scales(t->data, n, dim0, spec->per_channel, c->scale[p]);
            c->slice[p] = n / n_scale;
            q = (bf_qscale){.scale = c->scale[p], .n_scale = n_scale, .slice = c->slice[p]};
        }
        bf_repr_quantize(c->repr, t->data, c->stored[p], n, &q);
    }
    return BF_OK;
}

int64_t bf__prediction(const bf_campaign *c, const float *row)
{
    if (c->out_cols > 1) return bf_argmax(row, c->out_cols);
    return c->logits ? row[0] > 0 : row[0] >= 0.5f;
}

/* The grid of each metric's sums (see campaign_stats.c): the campaign's sum
 * stays below 2^52 units for n_trials values of at most `bound`. */
static void set_grids(bf_campaign *c)
{
    double gmax = 0;
    for (int64_t i = 0; i < c->samples * c->out_cols; i++)
        if (isfinite(c->golden[i]) && fabs(c->golden[i]) > gmax) gmax = fabs(c->golden[i]);
    /* deviations past 16x the largest golden output saturate in the sums */
    double out_bound = 16 * exp2(ceil(log2(gmax > 1 ? gmax : 1)));
    double ll = 32;   /* log loss clips probabilities at 1e-7: at most 16.12 */
    for (int m = 0; m < BF_METRIC_COUNT; m++) c->bound[m] = 1;
    c->bound[BF_METRIC_LOGLOSS] = ll;
    if (c->label_entropy > 0) c->bound[BF_METRIC_NE] = exp2(ceil(log2(ll / c->label_entropy)));
    c->bound[BF_METRIC_MAX_ABS] = out_bound;
    c->bound[BF_METRIC_MSE] = out_bound * out_bound;
    int lg = (int)ceil(log2((double)c->n_trials + 1));
    for (int m = 0; m < BF_METRIC_COUNT; m++) {
        int lb = (int)log2(c->bound[m]);
        c->fsum[m] = 52 - lg - lb;
        c->fsq[m] = 52 - lg - 2 * lb;
    }
}

static unsigned applicable_metrics(bf_task task)
{
    unsigned a = 1u << BF_METRIC_TOP1_MISMATCH | 1u << BF_METRIC_MSE | 1u << BF_METRIC_MAX_ABS;
    if (task == BF_TASK_CLASSIFICATION) a |= 1u << BF_METRIC_ACCURACY;
    if (task == BF_TASK_BINARY) a |= 1u << BF_METRIC_AUC | 1u << BF_METRIC_LOGLOSS | 1u << BF_METRIC_NE;
    return a;
}

static bf_status golden_pass(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    bf_status st;
    bf_evaluator *ev = NULL;
    float *lab = NULL;
    bf_eval_opts eo = {.batch = c->batch, .threads = 1};
    if ((st = bf_evaluator_create(c->model, c->ds, &eo, &ev, err)) != BF_OK) goto out;
    c->batch = bf_evaluator_batch(ev);   /* fixed now: every worker uses it */
    for (size_t p = 0; p < c->model->n_params; p++)
        if (c->stored[p] && (st = bf_evaluator_set_param(ev, p, c->stored[p], err)) != BF_OK) goto out;
    bf_eval_result r;
    if ((st = bf_evaluator_run(ev, NULL, 0, &r, err)) != BF_OK) goto out;
    c->task = r.task;
    c->samples = r.samples;
    c->out_cols = r.out_cols;
    size_t n = (size_t)(r.samples * r.out_cols);
    c->golden = bf__malloc(n * sizeof(float) + 1);
    c->golden_pred = bf__malloc((size_t)r.samples * sizeof(int64_t) + 1);
    if (!c->golden || !c->golden_pred) { st = bf_error_set(err, BF_ENOMEM, "out of memory for the golden outputs"); goto out; }
    memcpy(c->golden, r.outputs, n * sizeof(float));
    if (c->out_cols == 1)
        for (int64_t i = 0; i < c->samples; i++) c->logits |= c->golden[i] < 0 || c->golden[i] > 1;
    for (int64_t i = 0; i < c->samples; i++) c->golden_pred[i] = bf__prediction(c, c->golden + i * c->out_cols);

    if (c->task == BF_TASK_BINARY) {
        const bf_tensor *l = bf_dataset_find(c->ds, "labels");
        lab = bf__malloc((size_t)c->samples * sizeof(float) + 1);
        if (!lab) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
        if ((st = bf_convert(lab, BF_F32, l->data, l->dtype, (size_t)c->samples, err)) != BF_OK) goto out;
        double pos = 0;
        for (int64_t i = 0; i < c->samples; i++) pos += lab[i] > 0.5f;
        double p = pos / (double)c->samples;
        c->label_entropy = p > 0 && p < 1 ? -(p * log(p) + (1 - p) * log(1 - p)) : 0;
    }
    for (int m = 0; m < BF_METRIC_COUNT; m++) c->golden_metric[m] = NAN;
    c->golden_metric[BF_METRIC_ACCURACY] = r.accuracy;
    c->golden_metric[BF_METRIC_AUC] = r.auc;
    c->golden_metric[BF_METRIC_LOGLOSS] = r.logloss;
    if (c->label_entropy > 0) c->golden_metric[BF_METRIC_NE] = r.logloss / c->label_entropy;
    c->golden_metric[BF_METRIC_TOP1_MISMATCH] = 0;
    c->golden_metric[BF_METRIC_MSE] = 0;
    c->golden_metric[BF_METRIC_MAX_ABS] = 0;

    unsigned app = applicable_metrics(c->task);
    if (c->critical_metric >= 0 && !(app >> c->critical_metric & 1)) {
        st = bf_error_set(err, BF_EINVAL, "critical metric '%s' does not apply to a %s task", bf_metric_name(c->critical_metric),
                          bf_task_name(c->task));
        goto out;
    }
    c->metrics = (spec->metrics ? spec->metrics : app) & app;
    if (c->critical_metric >= 0) c->metrics |= 1u << c->critical_metric;
    set_grids(c);
out:
    bf__free(lab);
    bf_evaluator_free(ev);
    return st;
}

bf_status bf_campaign_create(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec, bf_campaign **out,
                             bf_error *err)
{
    bf_status st;
    bf_campaign *c = bf__calloc(1, sizeof *c);
    *out = NULL;
    if (!c) return bf_error_set(err, BF_ENOMEM, "out of memory");
    c->model = model;
    c->ds = ds;
    if ((st = check_spec(c, spec, err)) != BF_OK) goto out;
    if ((st = resolve_sites(c, spec, err)) != BF_OK) goto out;
    if ((st = resolve_bits(c, spec, err)) != BF_OK) goto out;
    if (c->sampling == BF_SAMPLE_LIST && (st = resolve_list(c, spec, err)) != BF_OK) goto out;
    if (c->kind == BF_FAULT_BER && (double)c->elements * c->n_allowed >= 0x1p62) {
        st = bf_error_set(err, BF_ERANGE, "the BER population (%lld elements x %d bits) is too large", (long long)c->elements,
                          c->n_allowed);
        goto out;
    }
    if ((st = quantize_params(c, spec, err)) != BF_OK) goto out;
    if ((st = golden_pass(c, spec, err)) != BF_OK) goto out;
    *out = c;
    c = NULL;
out:
    bf_campaign_free(c);
    return st;
}
