/* Campaign spec: JSON -> bf_campaign_spec, reporting every problem.
 *
 * Three passes: each object's keys (unknown ones reported, known ones kept
 * in slots), then each field on its own (type, range; "faults" in
 * spec_faults.c, "mitigations" in spec_mitigations.c), then, on the whole
 * spec, the rules between fields: core's (bitflip/spec_rules.h, the same
 * ones bf_campaign_create checks), each problem at its field's JSON Pointer.
 * A field whose value is invalid is marked so, and the rules that read it
 * are skipped: one mistake gives one problem, not a cascade.
 * The contract is deliberately strict (a field that does not apply is an
 * error, not ignored): relaxing a rule later breaks no spec, tightening would. */
#include "bitflip/api/spec.h"
#include "spec_impl.h"

#include "bitflip/generate.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRIALS BF_SPEC_MAX_TRIALS
#define MAX_BATCH (1LL << 24)

/* ------------------------------------------------------------ the fields */

const char *const bf__spec_root_names[BF__SPEC_N_ROOT_NAMES] = {
    "model", "dataset", "seed", "trials", "faults", "sampling", "metrics", "critical", "stop", "batch", "mitigations",
    "generate"};
enum { R_MODEL, R_DATASET, R_SEED, R_TRIALS, R_FAULTS, R_SAMPLING, R_METRICS, R_CRITICAL,
       R_STOP, R_BATCH, R_MITIGATIONS, R_GENERATE, R_N };

const char *const bf__spec_fault_names[BF__SPEC_N_FAULT_NAMES] = {
    "target", "tensors", "model", "bits", "positions", "burst", "rate", "rates", "repeats",
    "representation", "per_channel", "persistence", "zero_points", "w_max", "error_map", "group_size", "fault_scales",
    "kv", "words"};

static const char *const SAMPLING_OBJ_NAMES[] = {"list"};
static const char *const ENTRY_NAMES[] = {"tensor", "index", "bit", "sample"};
enum { E_TENSOR, E_INDEX, E_BIT, E_SAMPLE, E_N };
static const char *const CRITICAL_NAMES[] = {"metric", "delta", "pixels", "score_threshold"};
static const char *const STOP_NAMES[] = {"margin", "confidence", "per_tensor_margin", "per_bit_margin"};
static const char *const GENERATE_NAMES[] = {"new_tokens"};
static const char *const SAMPLING_NAMES[] = {"uniform", "per_tensor", "per_bit", "exhaustive", "adaptive"};
static const bf_sampling SAMPLING_VALUES[] = {BF_SAMPLE_UNIFORM, BF_SAMPLE_PER_TENSOR, BF_SAMPLE_PER_BIT,
                                              BF_SAMPLE_EXHAUSTIVE, BF_SAMPLE_ADAPTIVE};

static void invalid(bf_spec_facts *facts, bf_spec_field f) { facts->invalid |= BF_SPEC_BIT(f); }

static void parse_list(ctx *c, json_t *arr, const faults_info *fi, bf_campaign_spec *s)
{
    static const fieldset fs = {ENTRY_NAMES, COUNT(ENTRY_NAMES), NULL, 0, NULL};
    size_t n = json_array_size(arr);

    if (!(s->list = calloc(n, sizeof *s->list))) {
        c->nomem = true;
        return;
    }
    for (size_t i = 0; i < n && !c->nomem; i++) {
        json_t *e = json_array_get(arr, i), *v[E_N];
        ptrbuf base = bf__spec_ptr_index("/sampling/list", i);
        if (!json_is_object(e)) {
            bf__spec_problem(c, base.s, "must be an object {\"tensor\": ..., \"index\": ..., \"bit\": ...}, "
                               "got %s", bf__spec_describe(e).s);
            continue;
        }
        bf__spec_take_fields(c, e, base.s, &fs, v);
        bf_fault_entry ent = {NULL, 0, 0, -1};
        bool ok = true;
        ptrbuf p = bf__spec_ptr_at(base.s, "tensor");
        if (!v[E_TENSOR]) {
            ok = false;
            bf__spec_problem(c, p.s, "required: the tensor's name");
        } else if (!bf__spec_dup_string(c, v[E_TENSOR], p.s, &ent.tensor)) {
            ok = false;
        }

        p = bf__spec_ptr_at(base.s, "index");
        int64_t x;
        if (!v[E_INDEX]) {
            ok = false;
            bf__spec_problem(c, p.s, "required: the element's flat (row-major) index");
        } else if (bf__spec_get_int(c, v[E_INDEX], p.s, 0, INT64_MAX, "", &x)) {
            ent.index = x;
        } else {
            ok = false;
        }

        p = bf__spec_ptr_at(base.s, "bit");
        if (!v[E_BIT]) {
            ok = false;
            bf__spec_problem(c, p.s, "required: the bit to flip (0 = least significant)");
        } else if (bf__spec_get_int(c, v[E_BIT], p.s, 0, fi->repr_bits - 1, fi->for_repr, &x)) {
            ent.bit = (int)x;
        } else {
            ok = false;
        }

        p = bf__spec_ptr_at(base.s, "sample");
        /* core's rule (spec_rules.c), checked here per entry for its pointer */
        const char *why = fi->persist_ok ? bf_spec_list_sample_rule(s->persistence, v[E_SAMPLE] != NULL) : NULL;
        if (why) {
            ok = false;
            bf__spec_problem(c, p.s, "%s", why);
        } else if (v[E_SAMPLE]) {
            if (bf__spec_get_int(c, v[E_SAMPLE], p.s, 0, INT64_MAX, "", &x)) ent.sample = x;
            else ok = false;
        }
        if (ok)
            s->list[s->n_list++] = ent;
        else
            free(ent.tensor);
    }
}


/* "sampling": a design's name, or {"list": [...]}; returns the list's
 * array to parse once the faults are known, or NULL. */
static json_t *parse_sampling(ctx *c, json_t *v, bf_campaign_spec *s, bf_spec_facts *facts)
{
    static const fieldset sampling_fs = {SAMPLING_OBJ_NAMES, 1, NULL, 0, NULL};
    json_t *so[1];
    size_t n;
    s->sampling = BF_SAMPLE_UNIFORM;
    if (!v) return NULL;
    facts->stated |= BF_SPEC_BIT(BF_SPEC_SAMPLING);
    if (json_is_string(v) && strcmp(json_string_value(v), "list") == 0) {
        bf__spec_problem(c, "/sampling", "an explicit list is an object: {\"list\": [{\"tensor\": ..., "
                                         "\"index\": ..., \"bit\": ...}]}");
        invalid(facts, BF_SPEC_SAMPLING);
    } else if (json_is_string(v)) {
        int k = bf__spec_get_enum(c, v, "/sampling", SAMPLING_NAMES, COUNT(SAMPLING_NAMES));
        if (k >= 0) s->sampling = SAMPLING_VALUES[k];
        else invalid(facts, BF_SPEC_SAMPLING);
    } else if (!json_is_object(v)) {
        bf__spec_problem(c, "/sampling", "must be 'uniform', 'per_tensor', 'per_bit', 'exhaustive', 'adaptive' or an object "
                                         "{\"list\": [...]}, got %s", bf__spec_describe(v).s);
        invalid(facts, BF_SPEC_SAMPLING);
    } else {
        bf__spec_take_fields(c, v, "/sampling", &sampling_fs, so);
        s->sampling = BF_SAMPLE_LIST;
        if (!so[0])
            bf__spec_problem(c, "/sampling/list", "required: the faults to inject, "
                                                  "[{\"tensor\": ..., \"index\": ..., \"bit\": ...}, ...]");
        else if (bf__spec_get_array(c, so[0], "/sampling/list", "faults {\"tensor\", \"index\", \"bit\"}", &n))
            return so[0];
    }
    return NULL;
}

static void parse_metrics(ctx *c, json_t *v, bf_campaign_spec *s)
{
    const char *names[BF_METRIC_COUNT];
    int first_at[BF_METRIC_COUNT];
    size_t n;
    for (int i = 0; i < BF_METRIC_COUNT; i++) names[i] = bf_metric_name((bf_metric_id)i), first_at[i] = -1;
    if (!bf__spec_get_array(c, v, "/metrics", "metric names", &n)) return;
    for (size_t i = 0; i < n; i++) {
        ptrbuf p = bf__spec_ptr_index("/metrics", i);
        int k = bf__spec_get_enum(c, json_array_get(v, i), p.s, names, BF_METRIC_COUNT);
        if (k >= 0) k = bf_metric_parse(names[k]);
        if (k < 0) continue;
        if (first_at[k] >= 0)
            bf__spec_problem(c, p.s, "'%s' is already listed at /metrics/%d", names[k], first_at[k]);
        else
            first_at[k] = (int)i;
        s->metrics |= 1u << k;
    }
}

static void parse_critical(ctx *c, json_t *v, bf_campaign_spec *s)
{
    static const fieldset critical_fs = {CRITICAL_NAMES, COUNT(CRITICAL_NAMES), NULL, 0, NULL};
    const char *names[BF_METRIC_COUNT];
    json_t *cr[4];
    double d;
    s->critical_metric = -1;
    if (!v) return;
    if (!json_is_object(v)) {
        bf__spec_wrong_type(c, "/critical", "an object {\"metric\": ..., \"delta\": ...}", v);
        return;
    }
    for (int i = 0; i < BF_METRIC_COUNT; i++) names[i] = bf_metric_name((bf_metric_id)i);
    bf__spec_take_fields(c, v, "/critical", &critical_fs, cr);
    /* segmentation's share of an image's pixels; alone, it needs no metric */
    if (cr[2] && bf__spec_get_number(c, cr[2], "/critical/pixels", &d)) {
        if (d >= 0 && d < 1) s->critical_pixels = d, s->critical_pixels_set = 1;
        else bf__spec_problem(c, "/critical/pixels", "must be at least 0 and below 1 (a share of an image's pixels), got %s",
                              bf__spec_describe(cr[2]).s);
    }
    /* detection's score threshold: any number (scores may be logits) */
    if (cr[3] && bf__spec_get_number(c, cr[3], "/critical/score_threshold", &d)) s->critical_score = d, s->critical_score_set = 1;
    if ((cr[2] || cr[3]) && !cr[0] && !cr[1]) return;
    if (!cr[0]) {
        bf__spec_problem(c, "/critical/metric", "required: the metric whose change makes a trial critical");
    } else {
        int k = bf__spec_get_enum(c, cr[0], "/critical/metric", names, BF_METRIC_COUNT);
        if (k >= 0) s->critical_metric = bf_metric_parse(names[k]);
    }
    if (!cr[1]) {
        bf__spec_problem(c, "/critical/delta", "required: how far the metric may move before a "
                                               "trial is critical (> 0)");
    } else if (bf__spec_get_number(c, cr[1], "/critical/delta", &d)) {
        if (d > 0) s->critical_delta = d;
        else bf__spec_problem(c, "/critical/delta", "must be > 0, got %s", bf__spec_describe(cr[1]).s);
    }
}

/* "stop"; a stop with a problem of its own is invalid for the rules (one
 * mistake, one problem). */
static void parse_stop(ctx *c, json_t *v, bf_campaign_spec *s, bf_spec_facts *facts)
{
    static const fieldset stop_fs = {STOP_NAMES, COUNT(STOP_NAMES), NULL, 0, NULL};
    json_t *st[4];
    double d;
    size_t before = c->found;
    s->stop_confidence = 0.95;
    if (!v) return;
    facts->stated |= BF_SPEC_BIT(BF_SPEC_STOP);
    if (!json_is_object(v)) {
        bf__spec_wrong_type(c, "/stop", "an object {\"margin\": ..., \"confidence\": ...}", v);
    } else {
        bf__spec_take_fields(c, v, "/stop", &stop_fs, st);
        if (!st[0]) {
            bf__spec_problem(c, "/stop/margin", "required: the interval half-width at which to stop, in (0, 0.5)");
        } else if (bf__spec_get_number(c, st[0], "/stop/margin", &d)) {
            if (d > 0 && d < 0.5) s->stop_margin = d;
            else bf__spec_problem(c, "/stop/margin", "must be in (0, 0.5), got %s", bf__spec_describe(st[0]).s);
        }
        if (st[1] && bf__spec_get_number(c, st[1], "/stop/confidence", &d)) {
            if (d > 0.5 && d < 1) s->stop_confidence = d;
            else bf__spec_problem(c, "/stop/confidence", "must be in (0.5, 1), got %s", bf__spec_describe(st[1]).s);
        }
        /* every tensor's and every bit position's rates, beside the overall ones */
        static const char *const ptr[2] = {"/stop/per_tensor_margin", "/stop/per_bit_margin"};
        for (int k = 0; k < 2; k++) {
            if (!st[2 + k] || !bf__spec_get_number(c, st[2 + k], ptr[k], &d)) continue;
            if (d > 0 && d < 0.5) *(k ? &s->stop_bit_margin : &s->stop_tensor_margin) = d;
            else bf__spec_problem(c, ptr[k], "must be in (0, 0.5), got %s", bf__spec_describe(st[2 + k]).s);
        }
    }
    if (c->found != before) invalid(facts, BF_SPEC_STOP);
}

/* "generate": {"new_tokens": M}, M within the limit (max_new_tokens). */
static void parse_generate(ctx *c, json_t *v, bf_campaign_spec *s, bf_spec_facts *facts)
{
    static const fieldset gen_fs = {GENERATE_NAMES, COUNT(GENERATE_NAMES), NULL, 0, NULL};
    json_t *g[1];
    size_t before = c->found;
    if (!v) return;
    facts->stated |= BF_SPEC_BIT(BF_SPEC_GENERATE);
    if (!json_is_object(v)) {
        bf__spec_wrong_type(c, "/generate", "an object {\"new_tokens\": M}", v);
    } else {
        bf__spec_take_fields(c, v, "/generate", &gen_fs, g);
        if (!g[0])
            bf__spec_problem(c, "/generate/new_tokens", "required: the tokens each trial decodes greedily from every "
                                                        "prompt, 1..%lld", (long long)c->max_new_tokens);
        else
            bf__spec_get_int(c, g[0], "/generate/new_tokens", 1, c->max_new_tokens, " (the limit spec.new-tokens)",
                             &s->gen_new_tokens);
    }
    if (c->found != before) invalid(facts, BF_SPEC_GENERATE);
}

/* A broken rule at its JSON Pointer: the rule's field path ("faults.bits",
 * "faults.rates.2") with '/' for '.'. */
static void report_rule(void *user, const bf_spec_rule_problem *p)
{
    ptrbuf ptr;
    size_t o = 0;
    const char *field = p->field;
    ptr.s[o++] = '/';
    /* faults as a list of groups: the rules' "faults.bits" is group 0's, /faults/0/bits */
    if (((ctx *)user)->faults_list && strncmp(field, "faults.", 7) == 0 && !(field[7] >= '0' && field[7] <= '9')) {
        memcpy(ptr.s + o, "faults/0/", 9);
        o += 9;
        field += 7;
    }
    for (const char *k = field; *k && o + 1 < sizeof ptr.s; k++) ptr.s[o++] = *k == '.' ? '/' : *k;
    ptr.s[o] = '\0';
    bf__spec_problem(user, ptr.s, "%s", p->message);
}

/* The trials a campaign runs when a list, a sweep or a map implies them. */
static void implied_trials(bf_campaign_spec *s)
{
    if (s->sampling == BF_SAMPLE_LIST) s->trials = (int64_t)s->n_list;
    else if (s->model_kind == BF_FAULT_PROFILED) s->trials = s->repeats;
    /* n_rates <= 8 Mi (16 MiB of JSON), repeats <= 10^6: no overflow */
    else if (s->model_kind == BF_FAULT_BER) s->trials = (int64_t)s->n_rates * s->repeats;
}

/* Each field on its own, then the rules between them (core's,
 * bitflip/spec_rules.h) on what the document stated. */
static void parse_spec(ctx *c, json_t *root, bf_campaign_spec *s)
{
    static const fieldset root_fs = {bf__spec_root_names, BF__SPEC_N_ROOT_NAMES, bf__spec_fault_names,
                                     BF__SPEC_N_FAULT_NAMES, "'faults'"};
    json_t *r[R_N];
    int64_t x;
    bf_spec_facts facts = {.document = 1};
    faults_info fi;

    bf__spec_take_fields(c, root, "", &root_fs, r);
    if (!r[R_MODEL]) bf__spec_problem(c, "/model", "required: the ONNX model (a path, or a model id in the daemon)");
    else bf__spec_dup_string(c, r[R_MODEL], "/model", &s->model);
    if (!r[R_DATASET]) bf__spec_problem(c, "/dataset", "required: the eval set (a safetensors path, or a dataset id in the daemon)");
    else bf__spec_dup_string(c, r[R_DATASET], "/dataset", &s->dataset);
    if (r[R_SEED] && bf__spec_get_int(c, r[R_SEED], "/seed", 0, INT64_MAX, "", &x)) s->seed = (uint64_t)x;

    /* Whether sampling is a list is known from its type alone; its value
     * is checked after faults (schema order). */
    if (json_is_array(r[R_FAULTS])) bf__spec_fault_groups(c, r[R_FAULTS], json_is_object(r[R_SAMPLING]), s, &fi, &facts);
    else bf__spec_faults(c, r[R_FAULTS], json_is_object(r[R_SAMPLING]), s, &fi, &facts);
    if (c->nomem) return;
    json_t *list = parse_sampling(c, r[R_SAMPLING], s, &facts);
    if (list) parse_list(c, list, &fi, s);
    if (c->nomem) return;
    if (r[R_TRIALS]) {
        facts.stated |= BF_SPEC_BIT(BF_SPEC_TRIALS);
        if (!bf__spec_get_int(c, r[R_TRIALS], "/trials", 1, MAX_TRIALS, "", &s->trials)) invalid(&facts, BF_SPEC_TRIALS);
    }
    if (r[R_METRICS]) parse_metrics(c, r[R_METRICS], s);
    parse_generate(c, r[R_GENERATE], s, &facts);
    parse_critical(c, r[R_CRITICAL], s);
    parse_stop(c, r[R_STOP], s, &facts);
    if (r[R_BATCH]) bf__spec_get_int(c, r[R_BATCH], "/batch", 1, MAX_BATCH, "", &s->batch);
    if (r[R_MITIGATIONS]) {
        facts.stated |= BF_SPEC_BIT(BF_SPEC_MITIGATIONS);
        bf__spec_mitigations(c, r[R_MITIGATIONS], s, &fi);
    }
    if (c->nomem) return;
    bf_spec_check(s, &facts, report_rule, c);
    implied_trials(s);
}

/* ------------------------------------------------------------- the door */

/* The nesting depth limit, checked before jansson parses (its own limit is
 * 2048 and not settable). Brackets inside strings do not count. */
static bool too_deep(const char *json, size_t len, size_t max_depth, size_t *line, size_t *col)
{
    size_t depth = 0, ln = 1, lc = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char ch = json[i];
        if (ch == '\n') ln++, lc = i + 1;
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > max_depth) {
                *line = ln;
                *col = i - lc + 1;
                return true;
            }
        } else if ((ch == ']' || ch == '}') && depth > 0) {
            depth--;
        }
    }
    return false;
}

/* Appends "/" and `key` escaped per RFC 6901 to ptr[0..len); false if it
 * does not fit (then the value is not checked further: its key is already
 * over max_string, or the document is at the depth limit). */
static bool ptr_push(char *ptr, size_t *len, size_t cap, const char *key)
{
    size_t n = *len;
    if (n + 1 >= cap) return false;
    ptr[n++] = '/';
    for (const char *k = key; *k; k++) {
        const char *esc = *k == '~' ? "~0" : *k == '/' ? "~1" : NULL;
        size_t need = esc ? 2 : 1;
        if (n + need >= cap) return false;
        if (esc) memcpy(ptr + n, esc, 2);
        else ptr[n] = *k;
        n += need;
    }
    ptr[n] = '\0';
    *len = n;
    return true;
}

/* Every array's length and every string's (and field name's) bytes against
 * the limits; recursion is bounded by max_depth, checked before. */
static void check_sizes(ctx *c, const json_t *v, char *ptr, size_t len, size_t cap, const bf_spec_limits *lim)
{
    if (json_is_string(v) && json_string_length(v) > lim->max_string) {
        bf__spec_problem(c, ptr, "a string of %zu bytes; the limit is %zu (max_string)", json_string_length(v),
                         lim->max_string);
    } else if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if (n > lim->max_array) {
            bf__spec_problem(c, ptr, "%zu entries; the limit is %zu (max_array)", n, lim->max_array);
            return;
        }
        for (size_t i = 0; i < n; i++) {
            char idx[24];
            size_t l = len;
            snprintf(idx, sizeof idx, "%zu", i);
            if (ptr_push(ptr, &l, cap, idx)) check_sizes(c, json_array_get(v, i), ptr, l, cap, lim);
            ptr[len] = '\0';
        }
    } else if (json_is_object(v)) {
        const char *key;
        json_t *x;
        json_object_foreach((json_t *)v, key, x) {
            size_t kl = strlen(key), l = len;
            if (kl > lim->max_string) {
                bf__spec_problem(c, ptr, "a field name of %zu bytes; the limit is %zu (max_string)", kl,
                                 lim->max_string);
                continue;
            }
            if (ptr_push(ptr, &l, cap, key)) check_sizes(c, x, ptr, l, cap, lim);
            ptr[len] = '\0';
        }
    }
}

bf_status bf_spec_parse(const char *json, size_t len, bf_campaign_spec *out,
                        bf_spec_problems *problems)
{
    return bf_spec_parse_opts(json, len, NULL, out, problems);
}

bf_status bf_spec_parse_opts(const char *json, size_t len, const bf_spec_limits *limits, bf_campaign_spec *out,
                             bf_spec_problems *problems)
{
    ctx c = {problems, 0, false, BF_SPEC_MAX_NEW_TOKENS, NULL, false};
    bf_campaign_spec s;
    json_t *root = NULL;
    json_error_t jerr;
    size_t line, col;
    bf_spec_limits lim = limits ? *limits : (bf_spec_limits){0};
    char *ptr = NULL;
    if (!lim.max_bytes) lim.max_bytes = BF_SPEC_MAX_BYTES;
    if (lim.max_depth <= 0) lim.max_depth = BF_SPEC_MAX_DEPTH;
    if (!lim.max_array) lim.max_array = BF_SPEC_MAX_ARRAY;
    if (!lim.max_string) lim.max_string = BF_SPEC_MAX_STRING;
    if (lim.max_new_tokens <= 0) lim.max_new_tokens = BF_SPEC_MAX_NEW_TOKENS;
    if (lim.max_new_tokens > BF_GEN_MAX_NEW_TOKENS) lim.max_new_tokens = BF_GEN_MAX_NEW_TOKENS;

    c.max_new_tokens = lim.max_new_tokens;
    memset(&s, 0, sizeof s);
    memset(out, 0, sizeof *out);
    if (problems) memset(problems, 0, sizeof *problems);
    if (!json) len = 0;

    if (len > lim.max_bytes) {
        char a[32];
        bf__spec_problem(&c, "", "the spec is %zu bytes; the limit is %zu (%s, max_bytes)", len, lim.max_bytes,
                         bf_bytes_str(lim.max_bytes, a, sizeof a));
        goto out;
    }
    if (too_deep(json, len, (size_t)lim.max_depth, &line, &col)) {
        bf__spec_problem(&c, "", "nested deeper than %d levels at line %zu, column %zu (max_depth)", lim.max_depth,
                line, col);
        goto out;
    }
    root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root) {
        if (json_error_code(&jerr) == json_error_out_of_memory)
            c.nomem = true;
        else {
            /* jansson quotes the input near the error: keep the message ASCII */
            for (char *t = jerr.text; *t; t++)
                if ((unsigned char)*t < 0x20 || (unsigned char)*t >= 0x7f) *t = '?';
            bf__spec_problem(&c, "", "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column,
                    jerr.text);
        }
        goto out;
    }
    if (!json_is_object(root)) {
        bf__spec_problem(&c, "", "a campaign spec must be a JSON object, got %s", bf__spec_describe(root).s);
        goto out;
    }
    /* pointers are at most max_depth keys of at most max_string bytes, escaped */
    size_t cap = (size_t)lim.max_depth * (2 * (lim.max_string < 4096 ? lim.max_string : 4096) + 2) + 1;
    if (!(ptr = malloc(cap))) { c.nomem = true; goto out; }
    ptr[0] = '\0';
    check_sizes(&c, root, ptr, 0, cap, &lim);
    if (c.found) goto out;
    parse_spec(&c, root, &s);

out:
    if (c.found > BF_SPEC_MAX_PROBLEMS && problems && !c.nomem) {
        char msg[64];
        snprintf(msg, sizeof msg, "%zu more problems not listed", c.found - BF_SPEC_MAX_PROBLEMS);
        char *m = strdup(msg);
        if (m) bf__spec_push(&c, "", m);
        else c.nomem = true;
    }
    json_decref(root);
    free(ptr);
    if (c.nomem || c.found > 0) {
        bf_campaign_spec_free(&s);
        return c.nomem ? BF_ENOMEM : BF_EINVAL;
    }
    *out = s;
    return BF_OK;
}
