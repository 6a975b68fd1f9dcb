/* Creating a campaign: the spec checked against its rules (spec_rules.c),
 * then resolved against the model (tensor patterns to sites, bit
 * positions, fault list); the golden model, stored in the campaign's
 * representation, and the golden pass every trial is compared to are
 * campaign_golden.c's. */
#include <math.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/sites.h"
#include "bitflip/spec_rules.h"
#include "campaign/campaign_impl.h"
#include "campaign/campaign_pin.h"
#include "exec/ckpt.h"
#include "diff/diff.h"
#include "exec/fuse.h"
#include "exec/plan_impl.h"

void bf_campaign_free(bf_campaign *c)
{
    if (!c) return;
    bf__campaign_gen_free(c);
    bf__campaign_groups_free(c);
    bf__dx_shared_free(c->golden.gdx);
    for (int k = 0; c->golden.gev && k < c->golden.n_gev; k++) bf_evaluator_free(c->golden.gev[k]);
    bf__free(c->golden.gev);
    for (size_t p = 0; c->store.values && p < c->model->n_params; p++) bf__free(c->store.values[p]);
    for (size_t p = 0; c->store.scale && p < c->model->n_params; p++) bf__free(c->store.scale[p]);
    for (size_t p = 0; c->store.lo && p < c->model->n_params; p++) bf__free(c->store.lo[p]);
    bf_model_free(c->protect.own_model);
    bf__free(c->protect.sbp_mask);
    bf__free(c->protect.range_lo);
    bf__free(c->protect.range_hi);
    bf__free(c->protect.range_plo);
    bf__free(c->protect.range_phi);
    bf__ecc_free(c->protect.ecc);
    bf__free(c->store.values);
    bf__free(c->store.scale);
    bf__free(c->store.lo);
    bf__free(c->store.slice);
    bf__free(c->store.groups);
    bf__free(c->faults.rates);
    bf__free(c->faults.list);
    bf__free(c->adapt.ad_prefix);
    bf__free(c->adapt.ad_w);
    bf__free(c->adapt.ad_n);
    bf__free(c->adapt.ad_frac);
    bf__free(c->faults.mbu_prefix);
    bf__free(c->adapt.sched_first);
    bf__free(c->adapt.sched_prefix);
    bf__free(c->adapt.ad_p);
    bf__free(c->adapt.ad_alloc);
    bf__free(c->surface.sites);
    bf__free(c->surface.site_param);
    bf__free(c->surface.site_value);
    bf__free(c->surface.site_scale);
    bf__free(c->surface.site_label);
    bf__free(c->surface.prefix);
    bf__free(c->surface.site_kv);
    bf__free(c->surface.kv_lists);
    bf__free(c->golden.out);
    bf__ragcopy_free(&c->golden.rag);
    bf__ckpt_free(c->golden.ckpt);
    bf__campaign_imaj_free(c->golden.imaj);
    bf__free(c->golden.det.labels);
    bf__free(c->golden.pred);
    bf__free(c->golden.lm_labels);
    bf__free(c->golden.lm_pred);
    bf__free(c->golden.seg_pred);
    bf__free(c);
}

size_t bf_campaign_num_sites(const bf_campaign *c) { return c->surface.n_sites; }
const bf_site *bf_campaign_site(const bf_campaign *c, size_t i) { return i < c->surface.n_sites ? &c->surface.sites[i] : NULL; }
int64_t bf_campaign_num_trials(const bf_campaign *c) { return c->faults.n_trials; }

int64_t bf_campaign_batch(const bf_campaign *c) { return c->batch; }

const float *bf_campaign_golden(const bf_campaign *c, int64_t *samples, int64_t *cols)
{
    *samples = c->golden.samples;
    *cols = c->golden.out_cols;
    return c->golden.out;
}

bf_task bf_campaign_task(const bf_campaign *c) { return c->golden.task; }
const char *bf_campaign_tie_order(const bf_campaign *c) { return bf_model_tie_order(c->model); }

const bf_ragged_output *bf_campaign_golden_ragged(const bf_campaign *c, size_t *n)
{
    *n = c->golden.rag.n;
    return c->golden.rag.n ? c->golden.rag.view : NULL;
}

double bf_campaign_population(const bf_campaign *c)
{
    /* random_value replaces whole values: the population is the elements */
    double pop = c->faults.kind == BF_FAULT_RANDOM_VALUE ? (double)c->surface.elements : (double)c->surface.elements * (double)c->faults.n_allowed;
    /* a multi-bit upset: its (word, bit) members */
    if (c->faults.mbu) pop = (double)bf__campaign_mbu_population(c);
    /* a transient fault also chooses the sample it hits */
    return c->faults.persistence == BF_PERSIST_TRANSIENT ? pop * (double)c->golden.samples : pop;
}

/* --- tensor patterns */

static int name_matches(const char *pat, const char *name)
{
    return name && (strcmp(pat, name) == 0 || fnmatch(pat, name, 0) == 0);
}

/* A pattern matches the ONNX name or the recovered PyTorch name: users
 * write what they know ("layer1.*"), and every ONNX name still selects
 * what it did. */
static int pattern_matches(const char *pat, const bf_param_info *pi)
{
    if (strncmp(pat, "op:", 3) == 0) return pi->reader_op && strcmp(pi->reader_op, pat + 3) == 0;
    return name_matches(pat, pi->tensor->name ? pi->tensor->name : "") || name_matches(pat, pi->torch_name);
}

/* "a, b, c and 5 more": a few names of what was available, for messages. */
typedef struct name_list {
    char *buf;
    size_t len, off, shown, total;
} name_list;

static name_list names_begin(char *buf, size_t len)
{
    buf[0] = 0;
    return (name_list){.buf = buf, .len = len};
}

static void names_add(name_list *nl, const char *s)
{
    nl->total++;
    if (nl->shown < 6 && nl->off < nl->len) {
        int w = snprintf(nl->buf + nl->off, nl->len - nl->off, "%s%s", nl->shown ? ", " : "", s);
        if (w > 0) nl->off += (size_t)w;
        nl->shown++;
    }
}

static void names_end(name_list *nl)
{
    if (nl->total > nl->shown && nl->off < nl->len)
        snprintf(nl->buf + nl->off, nl->len - nl->off, " and %zu more", nl->total - nl->shown);
}

static void list_names(const bf_model *m, int ops, char *buf, size_t len)
{
    name_list nl = names_begin(buf, len);
    for (size_t p = 0; p < m->n_params; p++) {
        const bf_param_info *pi = &m->params[p];
        const char *s = ops ? pi->reader_op : pi->tensor->name;
        if (!s) continue;
        int dup = 0;
        for (size_t q = 0; ops && q < p; q++) dup |= m->params[q].reader_op && strcmp(m->params[q].reader_op, s) == 0;
        char both[160];
        if (!ops && pi->torch_name && strcmp(pi->torch_name, s) != 0) {   /* both names select it */
            snprintf(both, sizeof both, "%s (%s)", s, pi->torch_name);
            s = both;
        }
        if (!dup) names_add(&nl, s);
    }
    names_end(&nl);
}

/* If `name` is a tensor of another target than the campaign's: "; 'x' is a
 * weight: faults on it need target 'weights'" (else ""). */
/* Whether a pattern reads as a named site ("attn_probs.*"): then the hint
 * names the sites the model has, which no ONNX name would show. */
static bool site_hint(const bf_campaign *c, const char *pat, char *buf, size_t len)
{
    bool like = false;
    for (int k = BF_SITE_ATTN_SCORES; k <= BF_SITE_V_CACHE; k++) {
        const char *kn = bf_named_site_kind_name((bf_named_site_kind)k);
        like |= strncmp(pat, kn, strlen(kn)) == 0 && pat[strlen(kn)] == '.';
    }
    if (!like) return false;
    if (c->faults.target != BF_TARGET_ACTIVATIONS) {
        snprintf(buf, len, "; '%s' names LM fault sites (docs/LM.md), which are node outputs: they need target 'activations'", pat);
        return true;
    }
    bf_named_site ns[6];
    size_t n = bf_model_named_sites(c->model, ns, 6), off = 0;
    off = (size_t)snprintf(buf, len, "; this model's named fault sites: %s", n ? "" : "none (bitflip info lists them)");
    for (size_t i = 0; i < n && i < 6 && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s.%d", i ? ", " : "", bf_named_site_kind_name(ns[i].kind), ns[i].index);
    if (n > 6 && off < len) snprintf(buf + off, len - off, " and %zu more", n - 6);
    return true;
}

static void other_target_hint(const bf_campaign *c, const char *name, char *buf, size_t len)
{
    buf[0] = 0;
    if (site_hint(c, name, buf, len)) return;
    int64_t v = bf_model_find_value(c->model, name);
    if (v < 0) return;
    if (bf__fused_note(c->model, v, buf + 2, len > 2 ? len - 2 : 0)) {
        buf[0] = ';', buf[1] = ' ';
        return;
    }
    bf__value_kind kind = c->model->values[v].kind;
    bf_target t = kind == BF__VAL_PARAM ? BF_TARGET_WEIGHTS : kind == BF__VAL_INPUT ? BF_TARGET_INPUTS : BF_TARGET_ACTIVATIONS;
    if (kind == BF__VAL_PARAM && bf__param_is_zero_point(c->model, (size_t)c->model->values[v].index)) {
        snprintf(buf, len, "; '%s' is a zero point: faults on zero points need \"zero_points\": true", name);
        return;
    }
    if (kind == BF__VAL_CONST) {
        snprintf(buf, len, "; '%s' is a constant (an integer initializer), not a fault site", name);
        return;
    }
    if (t == c->faults.target) return;
    static const char *const is[] = {"a weight", "a node output", "a graph input"};
    static const char *const target[] = {"weights", "activations", "inputs"};
    snprintf(buf, len, "; '%s' is %s: faults on it need target '%s'", name, is[t], target[t]);
}

/* One campaign, one bit width. When the selection holds a quantized model's
 * stored integers (int8, uint8: 8 bits) the campaign is about them: float
 * tensors it also matches (the scales beside them, float biases) are left
 * out, and stay reachable by patterns that match only them ("*_scale").
 * Integer sites make the campaign native: their bytes are the bits, nothing
 * is rounded, and the representation must be fp32 (the default) or int8. */
static bf_status choose_width(bf_campaign *c, const bf_campaign_spec *spec, unsigned char *sel, bf_error *err)
{
    const bf_model *m = c->model;
    size_t n_int = 0, first_int = 0;
    for (size_t p = 0; p < m->n_params; p++)
        if (sel[p] && m->params[p].dtype != BF_F32 && !n_int++) first_int = p;
    if (!n_int) return BF_OK;
    for (size_t p = 0; p < m->n_params; p++)
        if (m->params[p].dtype == BF_F32) sel[p] = 0;
    if (spec->repr != BF_REPR_FP32 && spec->repr != BF_REPR_INT8)
        return bf_error_set(err, BF_EINVAL,
                            "'%s' is stored as %s: representation '%s' does not apply to it (give 'fp32' or 'int8'; both "
                            "mean the stored integers, bits 0..7)",
                            m->params[first_int].tensor->name, bf_dtype_name(m->params[first_int].dtype),
                            bf_repr_name(spec->repr));
    if (spec->per_channel)
        return bf_error_set(err, BF_EINVAL, "per_channel chooses scales for simulated int8; '%s' is stored as %s with "
                            "the model's own scales", m->params[first_int].tensor->name,
                            bf_dtype_name(m->params[first_int].dtype));
    if (spec->group_size)
        return bf_error_set(err, BF_EINVAL, "group_size chooses scales for simulated fixed point; '%s' is stored as %s "
                            "with the model's own scales", m->params[first_int].tensor->name,
                            bf_dtype_name(m->params[first_int].dtype));
    c->store.native = 1;
    c->store.repr = BF_REPR_INT8;
    c->store.repr_bits = 8;
    return BF_OK;
}

static bf_status resolve_param_sites(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    const bf_model *m = c->model;
    unsigned char *sel = bf__calloc(m->n_params + 1, 1);
    if (!sel) return bf_error_set(err, BF_ENOMEM, "out of memory");
    bf_status st = BF_OK;
    /* An explicit list (without `tensors`) of float tensors only, in a
     * model with stored integers: the list's tensors are the selection, so
     * that a list of a quantized model's float scales is not taken for its
     * integers (choose_width). Every other list selects every tensor. */
    int listed = 0, listed_int = 0, model_int = 0;
    for (size_t k = 0; spec->sampling == BF_SAMPLE_LIST && spec->n_tensors == 0 && k < spec->n_list; k++)
        for (size_t p = 0; spec->list[k].tensor && p < m->n_params; p++)
            if ((spec->zero_points || !bf__param_is_zero_point(m, p)) && pattern_matches(spec->list[k].tensor, &m->params[p]))
                sel[p] = 1, listed = 1, listed_int |= m->params[p].dtype != BF_F32;
    for (size_t p = 0; p < m->n_params; p++) model_int |= m->params[p].dtype != BF_F32;
    if (!listed || listed_int || !model_int) {
        memset(sel, 0, m->n_params + 1);
        listed = 0;
    }
    for (size_t k = 0; !listed && (k < spec->n_tensors || (k == 0 && spec->n_tensors == 0)); k++) {
        const char *pat = spec->n_tensors ? (spec->tensors && spec->tensors[k] ? spec->tensors[k] : "") : "*";
        int any = 0;
        for (size_t p = 0; p < m->n_params; p++)
            if ((spec->zero_points || !bf__param_is_zero_point(m, p)) && pattern_matches(pat, &m->params[p]))
                sel[p] = 1, any = 1;
        if (!any) {
            char names[256], hint[640];
            int ops = strncmp(pat, "op:", 3) == 0;
            list_names(m, ops, names, sizeof names);
            other_target_hint(c, pat, hint, sizeof hint);
            st = ops ? bf_error_set(err, BF_ENOTFOUND, "tensor pattern '%s' matches no parameter: no parameter is read by a %s node (parameters are read by %s)",
                                    pat, pat + 3, names[0] ? names : "no node")
                     : bf_error_set(err, BF_ENOTFOUND, "tensor pattern '%s' matches no parameter (the model has %s)%s",
                                    pat, names[0] ? names : "no parameters", hint);
            goto out;
        }
    }
    if ((st = choose_width(c, spec, sel, err)) != BF_OK) goto out;
    for (size_t p = 0; p < m->n_params; p++) c->surface.n_sites += sel[p] && bf_tensor_numel(m->params[p].tensor) > 0;
    if (c->surface.n_sites == 0) { st = bf_error_set(err, BF_EINVAL, "the selected parameters have no elements to corrupt"); goto out; }
    c->surface.sites = bf__calloc(c->surface.n_sites, sizeof *c->surface.sites);
    c->surface.site_param = bf__calloc(c->surface.n_sites, sizeof *c->surface.site_param);
    c->surface.prefix = bf__calloc(c->surface.n_sites + 1, sizeof *c->surface.prefix);
    if (!c->surface.sites || !c->surface.site_param || !c->surface.prefix) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
    size_t s = 0;
    for (size_t p = 0; p < m->n_params; p++) {
        const bf_param_info *pi = &m->params[p];
        if (!sel[p] || bf_tensor_numel(pi->tensor) == 0) continue;
        c->surface.sites[s] = (bf_site){.name = pi->tensor->name ? pi->tensor->name : "",
                                .op = pi->reader_op ? pi->reader_op : "",
                                .torch_name = pi->torch_name, .torch_note = pi->torch_note,
                                .elements = bf_tensor_numel(pi->tensor), .bits = c->store.repr_bits};
        if (c->store.scales) {
            bf_qgroups g = bf__group_layout(m, p, spec->group_size);
            c->surface.sites[s].elements = bf_repr_group_count(&g);   /* its scales */
        }
        c->surface.site_param[s] = p;
        c->surface.prefix[s + 1] = c->surface.prefix[s] + c->surface.sites[s].elements;
        s++;
    }
    c->surface.elements = c->surface.prefix[c->surface.n_sites];
out:
    bf__free(sel);
    return st;
}

/* --- activation and input sites
 *
 * A value is a site if a plan computes it at run time, in float32, with the
 * sample on dim 0. Dim 0 equal to the batch could be a coincidence (a
 * sequence of the batch's length), so the shapes are compared in plans for
 * batches 1 and 2: dim 0 must follow the batch and the rest stay put (a
 * model with a fixed batch is probed at that batch only). */

typedef struct vcand {
    int64_t value;
    const char *name, *op;
    int64_t elements;         /* per sample; 0: not a site */
    int dynamic;              /* a dynamic step computes it (elements 1 until counted) */
    char site[BF__SITE_LABEL]; /* its named site (bitflip/sites.h), or "" */
} vcand;

bf_status bf__campaign_probe_site(const bf_plan *a, const bf_plan *b, int64_t v, int64_t *row, bf_error *err)
{
    bf_status st = bf__plan_fault_site(a, v, row, err);
    /* a dynamic step's value (*row BF__ROW_PER_RUN): its elements are each
     * run's, counted by the golden pass (campaign_dynsite.c) */
    if (st != BF_OK || !b || *row == BF__ROW_PER_RUN) return st;
    int64_t rb;
    if ((st = bf__plan_fault_site(b, v, &rb, err)) != BF_OK) return st;
    const bf_tensor *ta = bf_plan_value(a, v), *tb = bf_plan_value(b, v);
    int same = rb == *row && ta->ndim == tb->ndim;
    for (int d = 1; same && d < ta->ndim; d++) same = ta->dims[d] == tb->dims[d];
    if (!same) {
        char sa[96], sb[96];
        return bf_error_set(err, BF_EINVAL, "'%s' does not keep the sample on dim 0 (shape %s for a batch of %lld, %s for %lld)",
                            ta->name ? ta->name : "", bf_shape_str(ta->dims, ta->ndim, sa, sizeof sa), (long long)a->batch,
                            bf_shape_str(tb->dims, tb->ndim, sb, sizeof sb), (long long)b->batch);
    }
    return BF_OK;
}

static int value_matches(const char *pat, const vcand *v)
{
    if (strncmp(pat, "op:", 3) == 0) return v->op && strcmp(v->op, pat + 3) == 0;
    if (strcmp(pat, v->name) == 0 || fnmatch(pat, v->name, 0) == 0) return 1;
    return v->site[0] && (strcmp(pat, v->site) == 0 || fnmatch(pat, v->site, 0) == 0);
}

/* Label each candidate that is a named site (attn_probs.3, ...) so that
 * `tensors` patterns may name it as `bitflip info` shows it. */
static bf_status label_named_sites(const bf_model *m, vcand *v, size_t n, bf_error *err)
{
    size_t k = bf_model_named_sites(m, NULL, 0);
    if (!k) return BF_OK;
    bf_named_site *ns = bf__calloc(k, sizeof *ns);
    if (!ns) return bf_error_set(err, BF_ENOMEM, "out of memory");
    bf_model_named_sites(m, ns, k);
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < n; i++)
            if (v[i].value == ns[j].value && !v[i].site[0])
                snprintf(v[i].site, sizeof v[i].site, "%s.%d", bf_named_site_kind_name(ns[j].kind), ns[j].index);
    bf__free(ns);
    return BF_OK;
}

/* The same over the candidates that are sites (names or ops). */
static void list_sites(const vcand *v, size_t n, int ops, char *buf, size_t len)
{
    name_list nl = names_begin(buf, len);
    for (size_t i = 0; i < n; i++) {
        const char *s = ops ? v[i].op : v[i].name;
        if (!v[i].elements || !s || !s[0]) continue;
        int dup = 0;
        for (size_t q = 0; ops && q < i; q++) dup |= v[q].elements && v[q].op && strcmp(v[q].op, s) == 0;
        if (!dup) names_add(&nl, s);
    }
    names_end(&nl);
}

/* Plans for batches 1 and 2 (or the model's fixed batch, and b NULL; a
 * one-sample graph's one plan, whose values are wholly the sample's). */
bf_status bf__campaign_probe_plans(const bf_model *m, const bf_dataset *ds, bf_plan **a, bf_plan **b, bf_error *err)
{
    if (bf__eval_set_unbatched(m, ds)) {
        bf_plan_opts po = {.unbatched = 1};
        return bf_plan_create_opts(m, 1, &po, a, err);
    }
    int64_t fixed = 0;
    for (size_t i = 0; i < m->n_inputs; i++)
        if (m->inputs[i].ndim > 0 && m->inputs[i].dims[0] > 0) fixed = m->inputs[i].dims[0];
    bf_status st = bf_plan_create(m, fixed ? fixed : 1, a, err);
    if (st == BF_OK && !fixed) st = bf_plan_create(m, 2, b, err);
    return st;
}

/* Every node output (in execution order) or graph input, with whether it is
 * a site. Inputs' op is the op of the first node reading them. */
static bf_status value_candidates(const bf_campaign *c, const bf_plan *a, const bf_plan *b, vcand **out, size_t *n_out,
                                  bf_error *err)
{
    const bf_model *m = c->model;
    size_t n = 0;
    size_t cap = c->faults.target == BF_TARGET_INPUTS ? m->n_inputs : 0;
    for (size_t i = 0; c->faults.target == BF_TARGET_ACTIVATIONS && i < m->n_nodes; i++) cap += (size_t)m->nodes[i].n_out;
    vcand *v = bf__calloc(cap + 1, sizeof *v);
    if (!v) return bf_error_set(err, BF_ENOMEM, "out of memory");
    if (c->faults.target == BF_TARGET_INPUTS) {
        for (size_t i = 0; i < m->n_inputs; i++) {
            const char *op = NULL;
            for (size_t o = 0; o < m->n_nodes && !op; o++) {
                const bf__node *nd = &m->nodes[m->order[o]];
                for (int j = 0; j < nd->n_in && !op; j++)
                    if (nd->in[j] == m->input_vals[i]) op = nd->op_type;
            }
            v[n++] = (vcand){.value = m->input_vals[i], .name = m->inputs[i].name, .op = op};
        }
    } else {
        for (size_t o = 0; o < m->n_nodes; o++) {
            const bf__node *nd = &m->nodes[m->order[o]];
            for (int j = 0; j < nd->n_out; j++)
                if (nd->out[j] >= 0)
                    v[n++] = (vcand){.value = nd->out[j], .name = m->values[nd->out[j]].name, .op = nd->op_type};
        }
    }
    for (size_t i = 0; i < n; i++) {
        int64_t row;
        if (!v[i].name) v[i].name = "";
        if (bf__campaign_probe_site(a, b, v[i].value, &row, NULL) != BF_OK) continue;
        v[i].dynamic = row == BF__ROW_PER_RUN;
        v[i].elements = v[i].dynamic ? 1 : row;
    }
    bf_status st = c->faults.target == BF_TARGET_ACTIVATIONS ? label_named_sites(m, v, n, err) : BF_OK;
    if (st != BF_OK) { bf__free(v); return st; }
    *out = v;
    *n_out = n;
    return BF_OK;
}

static int is_integer(bf_dtype d) { return d == BF_I64 || d == BF_I32 || d == BF_U8 || d == BF_I8 || d == BF_BOOL; }

/* Why a pattern selects nothing, naming what it matched or what exists. */
static bf_status no_value_site(const bf_campaign *c, const char *pat, const vcand *v, size_t n, const bf_plan *a,
                               const bf_plan *b, bf_error *err)
{
    int inputs = c->faults.target == BF_TARGET_INPUTS, ops = strncmp(pat, "op:", 3) == 0;
    const char *what = inputs ? "graph input" : "node output";
    size_t matched = 0, first = 0, integer = 0;
    for (size_t i = 0; i < n; i++) {
        if (!value_matches(pat, &v[i])) continue;
        if (matched++ == 0) first = i;
        integer += inputs && is_integer(bf_plan_value(a, v[i].value)->dtype);
    }
    char names[256], hint[640];
    list_sites(v, n, ops, names, sizeof names);
    if (!matched) {
        if (!ops && bf__fused_note(c->model, bf_model_find_value(c->model, pat), hint, sizeof hint))
            return bf_error_set(err, BF_ENOTFOUND, "tensor pattern '%s' matches no node output: %s", pat, hint);
        if (ops)
            return bf_error_set(err, BF_ENOTFOUND, "tensor pattern '%s' matches no %s: no %s node %s a float32 value (%s: %s)",
                                pat, what, pat + 3, inputs ? "reads" : "computes",
                                inputs ? "float32 inputs are read by" : "float32 activations come from",
                                names[0] ? names : "none");
        other_target_hint(c, pat, hint, sizeof hint);
        return bf_error_set(err, BF_ENOTFOUND, "tensor pattern '%s' matches no %s (the %ss that are fault sites: %s)%s", pat,
                            what, what, names[0] ? names : "none", hint);
    }
    char more[64] = "";
    if (matched > 1) snprintf(more, sizeof more, "%zu %ss, none of which can", matched, what);
    else snprintf(more, sizeof more, "%s '%s', which cannot", what, v[first].name);
    if (integer == matched)
        return bf_error_set(err, BF_EINVAL,
                            "tensor pattern '%s' matches only integer graph inputs ('%s' is %s%s): integer inputs carry "
                            "indices, such as embedding ids, and are not fault sites; only float32 inputs are (%s)",
                            pat, v[first].name, bf_dtype_name(bf_plan_value(a, v[first].value)->dtype),
                            matched > 1 ? ", among others" : "", names[0] ? names : "this model has none");
    bf_error why = {0};
    int64_t row;
    bf__campaign_probe_site(a, b, v[first].value, &row, &why);
    return bf_error_set(err, BF_EINVAL, "tensor pattern '%s' matches %s be faulted: %s", pat, more, why.msg);
}

static bf_status resolve_value_sites(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    vcand *v = NULL;
    size_t n = 0;
    unsigned char *sel = NULL;
    bf_plan *a = NULL, *b = NULL;
    bf_status st;
    if ((st = bf__campaign_probe_plans(c->model, c->ds, &a, &b, err)) != BF_OK) goto out;
    if ((st = value_candidates(c, a, b, &v, &n, err)) != BF_OK) goto out;
    sel = bf__calloc(n + 1, 1);
    if (!sel) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
    for (size_t k = 0; k < spec->n_tensors || (k == 0 && spec->n_tensors == 0); k++) {
        const char *pat = spec->n_tensors ? (spec->tensors && spec->tensors[k] ? spec->tensors[k] : "") : "*";
        int any = 0;
        for (size_t i = 0; i < n; i++)
            if (v[i].elements && value_matches(pat, &v[i])) sel[i] = 1, any = 1;
        if (!any) { st = no_value_site(c, pat, v, n, a, b, err); goto out; }
    }
    for (size_t i = 0; i < n; i++) c->surface.n_sites += sel[i];
    c->surface.sites = bf__calloc(c->surface.n_sites, sizeof *c->surface.sites);
    c->surface.site_value = bf__calloc(c->surface.n_sites, sizeof *c->surface.site_value);
    c->surface.site_scale = bf__calloc(c->surface.n_sites, sizeof *c->surface.site_scale);
    c->surface.prefix = bf__calloc(c->surface.n_sites + 1, sizeof *c->surface.prefix);
    c->surface.site_label = bf__calloc(c->surface.n_sites + 1, sizeof *c->surface.site_label);
    if (!c->surface.sites || !c->surface.site_value || !c->surface.site_scale || !c->surface.prefix || !c->surface.site_label) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
    size_t s = 0;
    for (size_t i = 0; i < n; i++) {
        if (!sel[i]) continue;
        if (v[i].dynamic && c->faults.kind == BF_FAULT_BER) {
            st = bf_error_set(err, BF_EUNSUPPORTED, "'%s': a dynamic step computes it (its elements are data, per sample "
                              "and run), and BER's population is fixed bits: fault it with single faults (bit_flip...)",
                              v[i].name);
            goto out;
        }
        /* a dynamic value's elements: 0 until the golden pass counts them */
        int64_t el = v[i].dynamic ? 0 : v[i].elements;
        c->surface.sites[s] = (bf_site){.name = v[i].name, .op = v[i].op ? v[i].op : "", .elements = el,
                                        .bits = c->store.repr_bits, .dynamic = v[i].dynamic};
        c->surface.site_value[s] = v[i].value;
        c->surface.site_scale[s] = 1.0f;
        if (v[i].site[0]) {
            memcpy(c->surface.site_label[s], v[i].site, sizeof v[i].site);
            c->surface.sites[s].site = c->surface.site_label[s];
        }
        c->surface.prefix[s + 1] = c->surface.prefix[s] + el;
        s++;
    }
    c->surface.elements = c->surface.prefix[c->surface.n_sites];
out:
    bf_plan_free(a);
    bf_plan_free(b);
    bf__free(sel);
    bf__free(v);
    return st;
}

static bf_status resolve_sites(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    if (c->faults.target == BF_TARGET_KV_CACHE) return bf__campaign_kv_sites(c, spec, err);
    return c->faults.target == BF_TARGET_WEIGHTS ? resolve_param_sites(c, spec, err) : resolve_value_sites(c, spec, err);
}

/* --- bits and fault list */

static bf_status resolve_bits(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    unsigned char on[64] = {0};
    if (spec->n_positions < 0 || spec->n_positions > 64)
        return bf_error_set(err, BF_EINVAL, "%d bit positions given; at most 64", spec->n_positions);
    for (int i = 0; i < spec->n_positions; i++) {
        int b = spec->positions[i];
        if (b < 0 || b >= c->store.repr_bits)
            return bf_error_set(err, BF_ERANGE, "bit position %d does not exist in %s (bits 0..%d)", b,
                                bf_repr_name(c->store.repr), c->store.repr_bits - 1);
        on[b] = 1;
    }
    for (int b = 0; b < c->store.repr_bits; b++)
        if (on[b] || spec->n_positions == 0) c->faults.allowed[c->faults.n_allowed++] = b;

    c->faults.bits = spec->bits > 0 ? spec->bits : 1;
    c->faults.burst = spec->burst != 0;
    /* multi-bit upsets in 64-bit words: one at a time, or (ber) at a rate */
    int mbu_kind = c->faults.kind != BF_FAULT_RANDOM_VALUE && c->faults.kind != BF_FAULT_PROFILED;
    if (mbu_kind && (spec->words > 0 || spec->burst == BF_BURST_WORD)) return bf__campaign_mbu_setup(c, spec, err);
    if (c->faults.kind == BF_FAULT_BER || c->faults.kind == BF_FAULT_RANDOM_VALUE || c->faults.kind == BF_FAULT_PROFILED) return BF_OK;
    if (c->faults.bits > c->faults.n_allowed)
        return bf_error_set(err, BF_ERANGE, "%d bits per fault, but only %d bit positions are allowed", c->faults.bits, c->faults.n_allowed);
    if (c->faults.burst) {
        for (int b = 0; b + c->faults.bits <= c->store.repr_bits; b++) {
            int ok = 1;
            for (int k = 0; k < c->faults.bits; k++) ok &= spec->n_positions == 0 || on[b + k];
            if (ok) c->faults.starts[c->faults.n_starts++] = b;
        }
        if (c->faults.n_starts == 0)
            return bf_error_set(err, BF_EINVAL, "a burst of %d adjacent bits does not fit in the allowed bit positions", c->faults.bits);
    }
    return BF_OK;
}

/* "a, b, c and 5 more": names of the target's kind in the model. */
static void list_target_names(const bf_campaign *c, char *buf, size_t len)
{
    const bf_model *m = c->model;
    if (c->faults.target == BF_TARGET_WEIGHTS) {
        list_names(m, 0, buf, len);
        return;
    }
    size_t off = 0, shown = 0, total = 0;
    buf[0] = 0;
    for (size_t s = 0; s < c->surface.n_sites; s++) {
        total++;
        if (shown < 6 && off < len) {
            int w = snprintf(buf + off, len - off, "%s%s", shown ? ", " : "", c->surface.sites[s].name);
            if (w > 0) off += (size_t)w;
            shown++;
        }
    }
    if (total > shown && off < len) snprintf(buf + off, len - off, " and %zu more", total - shown);
}

static bf_status resolve_list(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    if (spec->n_list == 0) return bf_error_set(err, BF_EINVAL, "the fault list is empty");
    c->faults.list = bf__calloc(spec->n_list, sizeof *c->faults.list);
    if (!c->faults.list) return bf_error_set(err, BF_ENOMEM, "out of memory for the fault list");
    c->faults.n_list = spec->n_list;
    int64_t samples = bf_dataset_num_samples(c->ds);
    for (size_t i = 0; i < spec->n_list; i++) {
        const bf_fault_entry *e = &spec->list[i];
        const char *name = e->tensor ? e->tensor : "";
        int64_t site = -1;
        for (size_t s = 0; s < c->surface.n_sites; s++)
            if (strcmp(c->surface.sites[s].name, name) == 0) site = (int64_t)s;
        /* or a named site (attn_probs.3) */
        for (size_t s = 0; site < 0 && s < c->surface.n_sites; s++)
            if (c->surface.sites[s].site && strcmp(c->surface.sites[s].site, name) == 0) site = (int64_t)s;
        /* or a PyTorch name, when it names one site */
        size_t by_torch = 0;
        for (size_t s = 0; site < 0 && s < c->surface.n_sites; s++)
            if (c->surface.sites[s].torch_name && strcmp(c->surface.sites[s].torch_name, name) == 0 && by_torch++ == 0) site = (int64_t)s;
        if (by_torch > 1)
            return bf_error_set(err, BF_EINVAL, "list entry %zu: '%s' is the PyTorch name of %zu tensors (the first is '%s'); "
                                "name the one meant by its ONNX name (bitflip info lists both)", i, name, by_torch,
                                c->surface.sites[site].name);
        if (site < 0) {
            int known = c->faults.target == BF_TARGET_WEIGHTS ? bf_model_find_param(c->model, name) >= 0
                                                       : bf_model_find_value(c->model, name) >= 0;
            for (size_t p = 0; c->faults.target == BF_TARGET_WEIGHTS && p < c->model->n_params; p++)
                known |= c->model->params[p].torch_name && strcmp(c->model->params[p].torch_name, name) == 0;
            char names[256], hint[640];
            other_target_hint(c, name, hint, sizeof hint);
            if (hint[0])
                return bf_error_set(err, BF_EINVAL, "list entry %zu: tensor '%s' is not a fault site of this campaign%s", i,
                                    name, hint);
            if (known)
                return bf_error_set(err, BF_EINVAL, "list entry %zu: tensor '%s' is not among the selected tensors%s", i, name,
                                    c->faults.target == BF_TARGET_WEIGHTS ? "" : " (or cannot be faulted: see the target's rules)");
            list_target_names(c, names, sizeof names);
            const char *what = c->faults.target == BF_TARGET_WEIGHTS ? "parameter" : c->faults.target == BF_TARGET_INPUTS ? "graph input" : "node output";
            return bf_error_set(err, BF_ENOTFOUND, "list entry %zu: the model has no %s named '%s' (%s %s)", i, what, name,
                                c->faults.target == BF_TARGET_WEIGHTS ? "it has" : "the fault sites are", names);
        }
        const bf_site *st = &c->surface.sites[site];
        if (c->surface.site_kv) {
            bf_status ks = bf__kv_list_check(c, site, e->index, i, err);
            if (ks != BF_OK) return ks;
        } else if (e->index < 0 || (e->index >= st->elements && !st->dynamic))   /* dynamic: checked per run */
            return bf_error_set(err, BF_ERANGE, "list entry %zu: tensor '%s' has %lld elements%s, index %lld is out of range", i,
                                name, (long long)st->elements, c->faults.target == BF_TARGET_WEIGHTS ? "" : " per sample",
                                (long long)e->index);
        if (e->bit < 0 || e->bit >= c->store.repr_bits)
            return bf_error_set(err, BF_ERANGE, "list entry %zu: bit %d does not exist in %s (bits 0..%d)", i, e->bit,
                                bf_repr_name(c->store.repr), c->store.repr_bits - 1);
        int64_t sample = -1;
        const char *why = bf_spec_list_sample_rule(c->faults.persistence, e->sample >= 0);
        if (why) return bf_error_set(err, BF_EINVAL, "list entry %zu: 'sample' %s", i, why);
        if (c->faults.persistence == BF_PERSIST_TRANSIENT) {
            if (e->sample >= samples)
                return bf_error_set(err, BF_ERANGE, "list entry %zu: sample %lld does not exist (the eval set has %lld samples)", i,
                                    (long long)e->sample, (long long)samples);
            sample = e->sample;
        }
        c->faults.list[i] = (bf__list_fault){.site = site, .index = e->index, .sample = sample, .bit = e->bit};
    }
    return BF_OK;
}

/* --- the spec's rules (spec_rules.c), then the campaign's fields from it */

static void first_problem(void *user, const bf_spec_rule_problem *p)
{
    bf_error *first = user;
    if (first->status == BF_OK) bf_error_set(first, p->status, "%s: %s", p->field, p->message);
}

static bf_status check_spec(const bf_campaign_spec *spec, bf_error *err)
{
    bf_error first = {0};
    if (bf_spec_check(spec, NULL, first_problem, &first) == 0) return BF_OK;
    return bf_error_set(err, first.status, "%s", first.msg);
}

/* The fields a valid spec sets directly; BER and profiled campaigns own
 * their trial counts. */
static bf_status apply_spec(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    c->faults.seed = spec->seed;
    c->faults.target = spec->target;
    c->faults.persistence = spec->persistence;
    c->faults.kind = spec->model_kind;
    c->store.repr = spec->repr;
    c->store.repr_bits = bf_repr_bits(spec->repr);
    /* fault_scales: the sites are the group scales, stored as fp16 */
    if ((c->store.scales = spec->fault_scales && spec->group_size > 0)) c->store.repr_bits = 16;
    c->faults.sampling = spec->sampling;
    c->judge.critical_metric = spec->critical_metric;
    c->judge.critical_delta = spec->critical_delta;
    c->judge.critical_pixels = spec->critical_pixels_set ? spec->critical_pixels : BF_CRITICAL_PIXELS_DEFAULT;
    c->judge.critical_score = spec->critical_score_set ? spec->critical_score : BF_CRITICAL_SCORE_DEFAULT;
    if (!isfinite(c->judge.critical_score))
        return bf_error_set(err, BF_EINVAL, "critical.score_threshold is %g; it must be a finite number", c->judge.critical_score);
    if (!(c->judge.critical_pixels >= 0 && c->judge.critical_pixels < 1))
        return bf_error_set(err, BF_EINVAL, "critical.pixels is %g; it must be at least 0 and below 1 (a share of an image's "
                                            "pixels)", c->judge.critical_pixels);
    c->judge.stop_margin = spec->stop_margin;
    c->judge.stop_confidence = spec->stop_confidence > 0 ? spec->stop_confidence : 0.95;
    c->judge.stop_tensor_margin = spec->stop_tensor_margin;
    c->judge.stop_bit_margin = spec->stop_bit_margin;
    /* Trials re-execute whole batches of the golden pass (docs/ENGINE.md);
     * the default depends on a sample's size (campaign_batch.c) */
    c->batch = spec->batch ? spec->batch : bf_campaign_default_batch(c->model);

    if (c->faults.kind == BF_FAULT_BER) {
        c->faults.rates = bf__malloc(spec->n_rates * sizeof *c->faults.rates);
        if (!c->faults.rates) return bf_error_set(err, BF_ENOMEM, "out of memory");
        memcpy(c->faults.rates, spec->rates, spec->n_rates * sizeof *c->faults.rates);
        c->faults.n_rates = spec->n_rates;
        c->faults.repeats = spec->repeats > 0 ? spec->repeats : 1;
        c->faults.n_trials = c->faults.repeats * (int64_t)c->faults.n_rates;
    } else if (c->faults.kind == BF_FAULT_PROFILED) {
        c->faults.errmap = spec->errmap;
        c->faults.map_bits = (uint64_t)spec->errmap->rows * (uint64_t)spec->errmap->cols;
        c->faults.repeats = spec->repeats > 0 ? spec->repeats : 1;
        c->faults.n_trials = c->faults.repeats;
    } else if (c->faults.sampling == BF_SAMPLE_LIST) {
        c->faults.n_trials = (int64_t)spec->n_list;
    } else {
        c->faults.n_trials = spec->trials;
    }
    return BF_OK;
}

bf_status bf__campaign_draws(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    bf_status st;
    if ((st = apply_spec(c, spec, err)) != BF_OK) return st;
    if ((st = resolve_sites(c, spec, err)) != BF_OK) return st;
    if ((st = resolve_bits(c, spec, err)) != BF_OK) return st;
    if (c->faults.sampling == BF_SAMPLE_LIST && (st = resolve_list(c, spec, err)) != BF_OK) return st;
    if ((st = bf__campaign_strata(c, spec, err)) != BF_OK) return st;
    if ((c->faults.kind == BF_FAULT_BER || c->faults.kind == BF_FAULT_PROFILED) && (double)c->surface.elements * c->faults.n_allowed >= 0x1p62)
        return bf_error_set(err, BF_ERANGE, "the BER population (%lld elements x %d bits) is too large", (long long)c->surface.elements,
                            c->faults.n_allowed);
    return BF_OK;
}

bf_status bf_campaign_create(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec, bf_campaign **out,
                             bf_error *err)
{
    return bf_campaign_create_mitigated(model, ds, spec, NULL, out, err);
}

bf_status bf_campaign_create_mitigated(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                                       const bf_mitigation *mit, bf_campaign **out, bf_error *err)
{
    return bf_campaign_create_prepared(model, ds, spec, mit, NULL, out, err);
}

bf_status bf_campaign_create_prepared(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                                      const bf_mitigation *mit, const bf_campaign_prep *prep, bf_campaign **out,
                                      bf_error *err)
{
    return bf__campaign_create_pinned(model, ds, spec, mit, prep, NULL, out, err);
}

/* campaign_pin.h; pin NULL or zero: this host's choices, as the product's */
bf_status bf__campaign_create_pinned(const bf_model *model, const bf_dataset *ds, const bf_campaign_spec *spec,
                                     const bf_mitigation *mit, const bf_campaign_prep *prep,
                                     const bf__campaign_pin *pin, bf_campaign **out, bf_error *err)
{
    bf_status st;
    bf_campaign *c = bf__calloc(1, sizeof *c);
    *out = NULL;
    if (!c) return bf_error_set(err, BF_ENOMEM, "out of memory");
    c->model = c->store.model = model;
    c->ds = ds;
    c->max_run_bytes = prep ? prep->max_run_bytes : 0;
    c->ckpt_price = pin && pin->ckpt_byte_price > 0 ? pin->ckpt_byte_price : 0;
    c->ckpt_huge = c->ckpt_price > 0 && pin->ckpt_huge;
    if ((st = check_spec(spec, err)) != BF_OK) goto out;
    if ((st = bf__campaign_draws(c, spec, err)) != BF_OK) goto out;
    if ((st = bf__campaign_quantize(c, spec, err)) != BF_OK) goto out;
    c->protect.base_model = model;
    if (mit && c->store.scales) {
        st = bf_error_set(err, BF_EINVAL, "fault_scales: mitigations protect stored weights, not their scales; run "
                          "the comparison without fault_scales");
        goto out;
    }
    if (mit && (st = bf__campaign_mitigate(c, mit, err)) != BF_OK) goto out;
    if ((st = bf__campaign_golden(c, spec, prep, err)) != BF_OK) goto out;
    if ((st = bf__campaign_profile_scales(c, err)) != BF_OK) goto out;
    if ((st = bf__campaign_dyn_sites(c, err)) != BF_OK) goto out;
    if ((st = bf__campaign_gen_golden(c, spec, err)) != BF_OK) goto out;
    if ((st = bf__campaign_groups(c, spec, err)) != BF_OK) goto out;
    if (mit && spec->n_groups && (st = bf__campaign_groups_mitigate(c, mit, err)) != BF_OK) goto out;
    *out = c;
    c = NULL;
out:
    bf_campaign_free(c);
    return st;
}
