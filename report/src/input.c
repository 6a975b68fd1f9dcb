/* Result documents read into series: one per result, or one per
 * configuration of a paired mitigation comparison. Accepts what `bitflip run
 * --out` writes, GET /v1/campaigns/{id}/results (the same document), and GET
 * /v1/campaigns/{id} (the document under "result"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

/* A model path's file name without ".onnx"; a daemon's model id (a long
 * hash) cut to 12 characters, as bitflipd's own listings show it. */
static char *label_of(const json_t *camp, size_t i)
{
    const char *m = json_string_value(json_object_get(camp, "model"));
    char buf[96];
    if (m && *m) {
        const char *base = strrchr(m, '/');
        base = base ? base + 1 : m;
        size_t n = strlen(base);
        if (n > 5 && !strcmp(base + n - 5, ".onnx")) n -= 5;
        if (n >= 32 && strspn(base, "0123456789abcdef") >= 32) n = 12;
        if (n > 60) n = 60;
        snprintf(buf, sizeof buf, "%.*s", (int)n, base);
    }
    if (!m || !*m || !buf[0]) snprintf(buf, sizeof buf, "result %zu", i + 1);
    return dup_str(buf);
}

static bf_status check_as(const json_t *d, const char *who, const json_t **root, bf_error *err)
{
    if (!json_is_object(d)) return bf_error_set(err, BF_EFORMAT, "%s is not a JSON object: give the JSON of 'bitflip run --out' or of GET /v1/campaigns/{id}/results", who);
    const json_t *state = json_object_get(d, "state");
    if (json_is_string(state) && !json_object_get(d, "summary")) {
        /* a campaign as bitflipd lists it: the result once it has succeeded */
        const json_t *r = json_object_get(d, "result");
        if (!json_is_object(r))
            return bf_error_set(err, BF_EINVAL, "%s is a campaign that is %s, with no result yet: report it once it has succeeded", who,
                                json_string_value(state));
        d = r;
    }
    if (!json_is_object(json_object_get(d, "campaign")) || !json_is_object(json_object_get(d, "summary")) ||
        !json_is_object(json_object_get(json_object_get(d, "summary"), "outcomes")))
        return bf_error_set(err, BF_EFORMAT,
                            "%s is not a bitflip campaign result (it lacks \"campaign\" or \"summary\".\"outcomes\"): give the JSON of "
                            "'bitflip run --out' or of GET /v1/campaigns/{id}/results", who);
    *root = d;
    return BF_OK;
}

static bf_status check_doc(const json_t *d, size_t i, const char *label, const json_t **root, bf_error *err)
{
    char who[96];
    if (label) snprintf(who, sizeof who, "result %zu (%.60s)", i + 1, label);
    else snprintf(who, sizeof who, "result %zu", i + 1);
    return check_as(d, who, root, err);
}

bf_status bfr_check(const json_t *doc, const char *name, bf_error *err)
{
    const json_t *root;
    return check_as(doc, name && *name ? name : "the document", &root, err);
}

static bf_status add_series(bfr__set *set, size_t doc, const json_t *src, const char *label, const char *mit, int base)
{
    if (set->n_series >= BFR_MAX_SERIES) {
        set->n_hidden++;
        return BF_OK;
    }
    bfr__series *s = &set->series[set->n_series];
    memset(s, 0, sizeof *s);
    s->label = dup_str(label);
    if (!s->label) return BF_ENOMEM;
    s->summary = json_object_get(src, "summary");
    s->golden = json_object_get(src, "golden");
    s->by_rate = json_is_array(json_object_get(src, "by_rate")) ? json_object_get(src, "by_rate") : NULL;
    if (mit && !base) {
        s->recovery = json_object_get(src, "recovery");
        s->cost = json_object_get(src, "cost");
    }
    s->mitigation = mit;
    s->doc = doc;
    set->n_series++;
    return BF_OK;
}

bf_status bfr__set_read(const bfr_input *in, size_t n, const bfr_options *opt, bfr__set *set, bf_error *err)
{
    memset(set, 0, sizeof *set);
    if (!in || n == 0) return bf_error_set(err, BF_EINVAL, "report: no result given");
    int mt = opt ? opt->max_tensors : 0;
    if (mt < 0 || mt > BFR_MAX_TENSORS_LIMIT)
        return bf_error_set(err, BF_ERANGE, "report: at most %d tensors can be drawn, asked for %d", BFR_MAX_TENSORS_LIMIT, mt);
    set->max_tensors = mt ? (size_t)mt : BFR_MAX_TENSORS_DEFAULT;
    set->docs = calloc(n, sizeof *set->docs);
    set->series = calloc(BFR_MAX_SERIES, sizeof *set->series);
    if (!set->docs || !set->series) goto oom;
    for (size_t i = 0; i < n; i++) {
        const json_t *root = NULL;
        bf_status st = check_doc(in[i].result, i, in[i].label, &root, err);
        if (st != BF_OK) { bfr__set_free(set); return st; }
        bfr__doc *d = &set->docs[set->n_docs++];
        d->root = root;
        d->campaign = json_object_get(root, "campaign");
        d->label = in[i].label ? dup_str(in[i].label) : label_of(d->campaign, i);
        if (!d->label) goto oom;
        /* the same model twice (two protections, two seeds): told apart by position */
        for (size_t j = 0; j < i; j++)
            if (!strcmp(set->docs[j].label, d->label)) {
                char buf[128];
                snprintf(buf, sizeof buf, "%.100s (%zu)", d->label, i + 1);
                free(d->label);
                if (!(d->label = dup_str(buf))) goto oom;
                break;
            }
    }
    for (size_t i = 0; i < set->n_docs; i++) {
        const bfr__doc *d = &set->docs[i];
        const json_t *mits = json_object_get(d->root, "mitigations");
        if (!json_array_size(mits)) {
            if (add_series(set, i, d->root, d->label, NULL, 0) != BF_OK) goto oom;
            continue;
        }
        size_t k;
        const json_t *m;
        json_array_foreach(mits, k, m) {
            const char *name = json_string_value(json_object_get(m, "name"));
            char buf[160];
            if (!name || !*name) name = k == 0 ? "none" : "unnamed";
            if (set->n_docs > 1) {
                /* a legend keeps BFR_LABEL_CHARS: the protection's name must survive, the
                 * result's is cut (on a character boundary) */
                size_t n = strlen(d->label);
                if (n > 24) {
                    n = 22;
                    while (n > 0 && ((unsigned char)d->label[n] & 0xc0) == 0x80) n--;
                    snprintf(buf, sizeof buf, "%.*s\xe2\x80\xa6: %.60s", (int)n, d->label, name);
                } else {
                    snprintf(buf, sizeof buf, "%s: %.60s", d->label, name);
                }
            }
            else snprintf(buf, sizeof buf, "%.60s", name);
            if (!json_is_object(json_object_get(m, "summary"))) continue;
            if (add_series(set, i, m, buf, name, k == 0) != BF_OK) goto oom;
        }
    }
    return BF_OK;
oom:
    bfr__set_free(set);
    return bf_error_set(err, BF_ENOMEM, "report: out of memory reading the results");
}

void bfr__set_free(bfr__set *set)
{
    for (size_t i = 0; set->docs && i < set->n_docs; i++) free(set->docs[i].label);
    for (size_t i = 0; set->series && i < set->n_series; i++) free(set->series[i].label);
    free(set->docs);
    free(set->series);
    memset(set, 0, sizeof *set);
}

const char *bfr__task_metric(const bfr__set *set)
{
    for (size_t i = 0; i < set->n_series; i++)
        if (json_is_number(json_object_get(set->series[i].golden, "auc"))) return "auc";
    for (size_t i = 0; i < set->n_series; i++)
        if (json_is_number(json_object_get(set->series[i].golden, "accuracy"))) return "accuracy";
    return NULL;
}

int bfr__rate(const json_t *rates, const char *outcome, double *rate, double *lo, double *hi)
{
    const json_t *r = json_object_get(rates, outcome), *ci = json_object_get(r, "ci");
    *rate = json_number_value(json_object_get(r, "rate"));
    *lo = json_is_number(json_array_get(ci, 0)) ? json_number_value(json_array_get(ci, 0)) : *rate;
    *hi = json_is_number(json_array_get(ci, 1)) ? json_number_value(json_array_get(ci, 1)) : *rate;
    return json_is_number(json_object_get(r, "rate"));
}

const char *bfr__tensor_name(const json_t *group, char *buf, size_t n)
{
    const char *t = json_string_value(json_object_get(group, "torch_name"));
    if (!t || !*t) t = json_string_value(json_object_get(group, "tensor"));
    if (!t) t = "?";
    json_int_t g = json_integer_value(json_object_get(group, "group"));
    if (g <= 0 || !buf || n == 0) return t;
    snprintf(buf, n, "[group %lld] %s", (long long)g, t);
    return buf;
}
