/* Target kv_cache: the sites are the model's KV-cache values (bitflip/sites.h:
 * k_cache.K, v_cache.K, found by structure), one per selected layer and
 * kind, and each site's population is its selected entries (heads x
 * positions x dims of bf_campaign_spec.kv), so a uniform draw is uniform
 * over the selected (layer, kind, head, position, dim, bit) cells. A drawn
 * cell becomes an element index of the value (bf__kv_cell_index) and from
 * there on it is a value fault like any activation's: in one pass over a
 * sequence, the entry every later position reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/sites.h"
#include "campaign/campaign_impl.h"

void bf_site_kv_entry(const bf_site *s, int64_t index, int64_t *head, int64_t *position, int64_t *dim)
{
    const bf_kv_site_layout *l = &s->kv;
    *head = l->stride_head ? index / l->stride_head % l->heads : 0;
    *position = l->stride_pos ? index / l->stride_pos % l->positions : 0;
    *dim = l->stride_dim ? index / l->stride_dim % l->dim : 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* faults.kv.<field>: each index in [0, limit) and listed once. */
static bf_status check_list(const int64_t *v, size_t n, int64_t limit, const char *field, const char *what,
                            const char *owner, bf_error *err)
{
    if (n > BF_KV_FILTER_MAX)
        return bf_error_set(err, BF_ELIMIT, "faults.kv.%s: %zu entries; at most %d", field, n, BF_KV_FILTER_MAX);
    for (size_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= limit)
            return limit > 0 ? bf_error_set(err, BF_ERANGE, "faults.kv.%s.%zu: %s %lld does not exist (%s has %lld: 0..%lld)",
                                            field, i, what, (long long)v[i], owner, (long long)limit, (long long)limit - 1)
                             : bf_error_set(err, BF_ERANGE, "faults.kv.%s.%zu: %s %lld does not exist (%s has none)", field,
                                            i, what, (long long)v[i], owner);
        for (size_t j = 0; j < i; j++)
            if (v[j] == v[i])
                return bf_error_set(err, BF_EINVAL, "faults.kv.%s.%zu: %s %lld is already listed at faults.kv.%s.%zu", field,
                                    i, what, (long long)v[i], field, j);
    }
    return BF_OK;
}

/* The model's KV sites (bf_model_named_sites), and its attention layers. */
static bf_status kv_named(const bf_model *m, bf_named_site **out, size_t *n, int *layers, bf_error *err)
{
    size_t all = bf_model_named_sites(m, NULL, 0);
    bf_named_site *ns = bf__calloc(all + 1, sizeof *ns);
    if (!ns) return bf_error_set(err, BF_ENOMEM, "out of memory");
    bf_model_named_sites(m, ns, all);
    size_t k = 0;
    *layers = 0;
    for (size_t i = 0; i < all; i++)
        if (ns[i].kind == BF_SITE_K_CACHE || ns[i].kind == BF_SITE_V_CACHE) {
            if (ns[i].index + 1 > *layers) *layers = ns[i].index + 1;
            ns[k++] = ns[i];
        }
    *out = ns;
    *n = k;
    if (k) return BF_OK;
    bf__free(ns);
    *out = NULL;
    return bf_error_set(err, BF_EINVAL, "faults.target: 'kv_cache' needs attention layers whose keys and values can be "
                        "traced (bitflip info lists them as k_cache.K and v_cache.K); this model has none");
}

/* Site s's cells: heads, positions and dims by decreasing stride. */
static void make_sel(bf__kv_sel *sel, const bf_kv_site_layout *l, const bf_kv_filter *f, const int64_t *heads,
                     const int64_t *positions)
{
    int64_t n[3] = {f->n_heads ? (int64_t)f->n_heads : l->heads, f->n_positions ? (int64_t)f->n_positions : l->positions, l->dim};
    int64_t st[3] = {l->stride_head, l->stride_pos, l->stride_dim};
    const int64_t *idx[3] = {f->n_heads ? heads : NULL, f->n_positions ? positions : NULL, NULL};
    int order[3] = {0, 1, 2};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (st[order[j]] > st[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    for (int k = 0; k < 3; k++) {
        sel->n[k] = n[order[k]];
        sel->stride[k] = st[order[k]];
        sel->idx[k] = idx[order[k]];
    }
}

int64_t bf__kv_cell_index(const bf_campaign *c, int64_t site, int64_t cell)
{
    const bf__kv_sel *s = &c->surface.site_kv[site];
    int64_t index = 0;
    for (int k = 2; k >= 0; k--) {
        int64_t i = cell % s->n[k];
        cell /= s->n[k];
        index += (s->idx[k] ? s->idx[k][i] : i) * s->stride[k];
    }
    return index;
}

static int listed(const int64_t *v, size_t n, int64_t x)
{
    if (!n) return 1;
    return bsearch(&x, v, n, sizeof *v, cmp_i64) != NULL;
}

bf_status bf__kv_list_check(const bf_campaign *c, int64_t site, int64_t index, size_t entry, bf_error *err)
{
    const bf_site *s = &c->surface.sites[site];
    if (index < 0 || index >= s->kv.elements)
        return bf_error_set(err, BF_ERANGE, "list entry %zu: '%s' (%s) has %lld elements per sample, index %lld is out of "
                            "range", entry, s->name, s->site, (long long)s->kv.elements, (long long)index);
    int64_t h, p, d;
    bf_site_kv_entry(s, index, &h, &p, &d);
    size_t nh = c->surface.kv_n_heads, np = c->surface.kv_n_positions;
    const int64_t *heads = c->surface.kv_lists, *positions = c->surface.kv_lists + nh;
    if (!listed(heads, nh, h))
        return bf_error_set(err, BF_EINVAL, "list entry %zu: index %lld of %s is head %lld, which faults.kv.heads leaves out",
                            entry, (long long)index, s->site, (long long)h);
    if (!listed(positions, np, p))
        return bf_error_set(err, BF_EINVAL, "list entry %zu: index %lld of %s is position %lld, which faults.kv.positions "
                            "leaves out", entry, (long long)index, s->site, (long long)p);
    return BF_OK;
}

/* Fills site s from named site ns in plans a, b. */
static bf_status one_site(bf_campaign *c, const bf_campaign_spec *spec, const bf_plan *a, const bf_plan *b,
                          const bf_named_site *ns, size_t s, bf_error *err)
{
    bf_kv_site_layout l;
    bf_status st = bf_plan_kv_site_layout(a, ns, &l, err);
    if (st != BF_OK) return st;
    char label[BF__SITE_LABEL];
    snprintf(label, sizeof label, "%s.%d", bf_named_site_kind_name(ns->kind), ns->index);
    int64_t row;
    bf_error why = {0};
    if (bf__campaign_probe_site(a, b, ns->value, &row, &why) != BF_OK || row != l.elements)
        return bf_error_set(err, BF_EINVAL, "faults.target: %s ('%s') cannot take value faults: %s", label, ns->value_name,
                            why.msg[0] ? why.msg : "its elements per sample are not its entries");
    const bf_kv_filter *f = &spec->kv;
    if ((st = check_list(f->heads, f->n_heads, l.heads, "heads", "head", label, err)) != BF_OK) return st;
    if ((st = check_list(f->positions, f->n_positions, l.positions, "positions", "position", label, err)) != BF_OK) return st;
    if (l.dim == 0 || l.heads == 0 || l.positions == 0)
        return bf_error_set(err, BF_EINVAL, "faults.kv: %s holds no entries in this eval set (%lld heads x %lld positions x "
                            "%lld dims)", label, (long long)l.heads, (long long)l.positions, (long long)l.dim);
    const int64_t *heads = c->surface.kv_lists, *positions = c->surface.kv_lists + f->n_heads;
    make_sel(&c->surface.site_kv[s], &l, f, heads, positions);
    const bf__kv_sel *sel = &c->surface.site_kv[s];
    memcpy(c->surface.site_label[s], label, sizeof label);
    c->surface.sites[s] = (bf_site){.name = ns->value_name ? ns->value_name : "", .op = ns->op ? ns->op : "",
                                    .elements = sel->n[0] * sel->n[1] * sel->n[2], .bits = c->store.repr_bits,
                                    .site = c->surface.site_label[s], .kv_layer = ns->index,
                                    .kv_kind = ns->kind == BF_SITE_K_CACHE ? 'k' : 'v', .kv = l};
    c->surface.site_value[s] = ns->value;
    c->surface.site_scale[s] = 1.0f;
    c->surface.prefix[s + 1] = c->surface.prefix[s] + c->surface.sites[s].elements;
    return BF_OK;
}

/* The layers and kinds chosen, as a mask over the named sites. */
static bf_status choose(const bf_kv_filter *f, const bf_named_site *ns, size_t n, int layers, unsigned char *on,
                        size_t *count, bf_error *err)
{
    char owner[48];
    snprintf(owner, sizeof owner, "the model's attention");
    bf_status st = check_list(f->layers, f->n_layers, layers, "layers", "layer", owner, err);
    if (st != BF_OK) return st;
    if (f->kinds > 3) return bf_error_set(err, BF_EINVAL, "faults.kv.kinds: unknown kinds %u (1 keys, 2 values)", f->kinds);
    unsigned kinds = f->kinds ? f->kinds : 3;
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned bit = ns[i].kind == BF_SITE_K_CACHE ? 1u : 2u;
        int layer_on = f->n_layers == 0;
        for (size_t j = 0; j < f->n_layers; j++) layer_on |= f->layers[j] == ns[i].index;
        on[i] = layer_on && (kinds & bit);
        *count += on[i];
    }
    return BF_OK;
}

bf_status bf__campaign_kv_sites(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    const bf_kv_filter *f = &spec->kv;
    bf_named_site *ns = NULL;
    unsigned char *on = NULL;
    bf_plan *a = NULL, *b = NULL;
    size_t n = 0, count = 0;
    int layers = 0;
    bf_status st;
    if ((f->n_heads && !f->heads) || (f->n_positions && !f->positions) || (f->n_layers && !f->layers))
        return bf_error_set(err, BF_EINVAL, "faults.kv: a list with a count and no entries");
    if (f->n_heads > BF_KV_FILTER_MAX || f->n_positions > BF_KV_FILTER_MAX)
        return bf_error_set(err, BF_ELIMIT, "faults.kv.%s: more than %d entries", f->n_heads > BF_KV_FILTER_MAX ? "heads" : "positions",
                            BF_KV_FILTER_MAX);
    if ((st = kv_named(c->model, &ns, &n, &layers, err)) != BF_OK) goto out;
    if (!(on = bf__calloc(n + 1, 1))) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
    if ((st = choose(f, ns, n, layers, on, &count, err)) != BF_OK) goto out;
    if (!count) { st = bf_error_set(err, BF_EINVAL, "faults.kv: the layers and kinds chosen select no KV-cache site"); goto out; }
    c->surface.n_sites = count;
    c->surface.sites = bf__calloc(count, sizeof *c->surface.sites);
    c->surface.site_value = bf__calloc(count, sizeof *c->surface.site_value);
    c->surface.site_scale = bf__calloc(count, sizeof *c->surface.site_scale);
    c->surface.prefix = bf__calloc(count + 1, sizeof *c->surface.prefix);
    c->surface.site_label = bf__calloc(count + 1, sizeof *c->surface.site_label);
    c->surface.site_kv = bf__calloc(count, sizeof *c->surface.site_kv);
    c->surface.kv_lists = bf__calloc(f->n_heads + f->n_positions + 1, sizeof *c->surface.kv_lists);
    if (!c->surface.sites || !c->surface.site_value || !c->surface.site_scale || !c->surface.prefix ||
        !c->surface.site_label || !c->surface.site_kv || !c->surface.kv_lists) {
        st = bf_error_set(err, BF_ENOMEM, "out of memory");
        goto out;
    }
    if (f->n_heads) memcpy(c->surface.kv_lists, f->heads, f->n_heads * sizeof *f->heads);
    if (f->n_positions) memcpy(c->surface.kv_lists + f->n_heads, f->positions, f->n_positions * sizeof *f->positions);
    c->surface.kv_n_heads = f->n_heads;
    c->surface.kv_n_positions = f->n_positions;
    qsort(c->surface.kv_lists, f->n_heads, sizeof *c->surface.kv_lists, cmp_i64);
    qsort(c->surface.kv_lists + f->n_heads, f->n_positions, sizeof *c->surface.kv_lists, cmp_i64);
    if ((st = bf__campaign_probe_plans(c->model, c->ds, &a, &b, err)) != BF_OK) goto out;
    for (size_t i = 0, s = 0; i < n; i++)
        if (on[i] && (st = one_site(c, spec, a, b, &ns[i], s++, err)) != BF_OK) goto out;
    c->surface.elements = c->surface.prefix[count];
out:
    bf_plan_free(a);
    bf_plan_free(b);
    bf__free(on);
    bf__free(ns);
    return st;
}
