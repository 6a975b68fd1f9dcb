/* The spec's "faults" object: each field's type and range, and what the
 * document states, for the rules between fields (core's
 * bitflip/spec_rules.h, which spec.c runs once the whole document is read). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/spec.h"
#include "spec_impl.h"

#define MAX_REPEATS 1000000LL

static const char *const TARGET_NAMES[] = {"weights", "activations", "inputs", "kv_cache"};
static const char *const PERSIST_NAMES[] = {"permanent", "transient"};

/* faults.* by slot, in FAULT_NAMES' order (spec_impl.h) */
enum { F_TARGET, F_TENSORS, F_MODEL, F_BITS, F_POSITIONS, F_BURST, F_RATE, F_RATES,
       F_REPEATS, F_REPR, F_PER_CHANNEL, F_PERSISTENCE, F_ZERO_POINTS, F_W_MAX, F_ERROR_MAP, F_GROUP_SIZE, F_FAULT_SCALES, F_KV, F_WORDS, F_N };

/* The rules' name for each slot. */
static const bf_spec_field SLOT_FIELD[F_N] = {
    BF_SPEC_TARGET, BF_SPEC_TENSORS, BF_SPEC_MODEL, BF_SPEC_BITS, BF_SPEC_POSITIONS, BF_SPEC_BURST,
    BF_SPEC_RATE, BF_SPEC_RATES, BF_SPEC_REPEATS, BF_SPEC_REPR, BF_SPEC_PER_CHANNEL, BF_SPEC_PERSISTENCE,
    BF_SPEC_ZERO_POINTS, BF_SPEC_W_MAX, BF_SPEC_ERROR_MAP, BF_SPEC_GROUP_SIZE, BF_SPEC_FAULT_SCALES, BF_SPEC_KV,
    BF_SPEC_WORDS,
};

/* Where "faults" is: "/faults", or "/faults/<i>" for group i of a list. */
#define FBASE(c) ((c)->faults_at ? (c)->faults_at : "/faults")
#define FPATH(c, tail) bf__spec_ptr_at(FBASE(c), tail).s

static void invalid(bf_spec_facts *facts, bf_spec_field f) { facts->invalid |= BF_SPEC_BIT(f); }

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* A rate in (0, 1]. */
static bool get_rate(ctx *c, const json_t *v, const char *ptr, double *out)
{
    if (!bf__spec_get_number(c, v, ptr, out)) return false;
    if (!(*out > 0 && *out <= 1)) {
        bf__spec_problem(c, ptr, "must be a probability in (0, 1], got %s", bf__spec_describe(v).s);
        return false;
    }
    return true;
}

/* faults.tensors, or its default ["*"] (none with an explicit list, whose
 * entries name their tensors); false when out of memory. */
static bool fault_tensors(ctx *c, json_t *v, bool is_list, bf_campaign_spec *s, bf_spec_facts *facts)
{
    size_t n;
    if (!v) {
        if (is_list) return true;
        if (!(s->tensors = calloc(1, sizeof *s->tensors)) || !(s->tensors[0] = strdup("*"))) {
            c->nomem = true;
            return false;
        }
        s->n_tensors = 1;
        return true;
    }
    if (!bf__spec_get_array(c, v, FPATH(c, "tensors"), "tensor names, globs or 'op:Type'", &n)) {
        invalid(facts, BF_SPEC_TENSORS);
        return true;
    }
    if (!(s->tensors = calloc(n, sizeof *s->tensors))) {
        c->nomem = true;
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        ptrbuf p = bf__spec_ptr_index(FPATH(c, "tensors"), i);
        char *t = NULL;
        if (!bf__spec_dup_string(c, json_array_get(v, i), p.s, &t)) {
            invalid(facts, BF_SPEC_TENSORS);
        } else if (strcmp(t, "op:") == 0) {
            bf__spec_problem(c, p.s, "'op:' needs an op type, e.g. 'op:Gemm'");
            invalid(facts, BF_SPEC_TENSORS);
            free(t);
        } else {
            s->tensors[s->n_tensors++] = t;
        }
    }
    return true;
}

/* faults.positions: distinct bits of the representation, sorted. */
static void fault_positions(ctx *c, json_t *v, const faults_info *fi, bf_campaign_spec *s, bf_spec_facts *facts)
{
    size_t n;
    int first_at[32];
    if (!bf__spec_get_array(c, v, FPATH(c, "positions"), "bit positions", &n)) {
        invalid(facts, BF_SPEC_POSITIONS);
        return;
    }
    for (int b = 0; b < 32; b++) first_at[b] = -1;
    for (size_t i = 0; i < n; i++) {
        ptrbuf p = bf__spec_ptr_index(FPATH(c, "positions"), i);
        int64_t b;
        if (!bf__spec_get_int(c, json_array_get(v, i), p.s, 0, fi->repr_bits - 1, fi->for_repr, &b)) {
            invalid(facts, BF_SPEC_POSITIONS);
        } else if (first_at[b] >= 0) {
            bf__spec_problem(c, p.s, "bit %d is already listed at /faults/positions/%d", (int)b, first_at[b]);
            invalid(facts, BF_SPEC_POSITIONS);
        } else if (s->n_positions < (int)COUNT(s->positions)) {
            first_at[b] = (int)i;
            s->positions[s->n_positions++] = (int)b;
        }
    }
    qsort(s->positions, (size_t)s->n_positions, sizeof s->positions[0], cmp_int);
}

/* faults.burst: true (adjacent bits of one element), false, or "word"
 * (adjacent bits of one 64-bit storage word, BF_BURST_WORD). */
static void fault_burst(ctx *c, const json_t *v, bf_campaign_spec *s, bf_spec_facts *facts)
{
    if (json_is_string(v) && strcmp(json_string_value(v), "word") == 0) {
        s->burst = BF_BURST_WORD;
    } else if (!json_is_boolean(v)) {
        bf__spec_wrong_type(c, FPATH(c, "burst"), "true, false or \"word\"", v);
        invalid(facts, BF_SPEC_BURST);
    } else {
        s->burst = json_is_true(v);
    }
}

/* faults.rate or rates (one of them); false when out of memory. */
static bool fault_rates(ctx *c, json_t *const *f, const faults_info *fi, bf_campaign_spec *s, bf_spec_facts *facts)
{
    size_t n;
    double r;
    if (f[F_RATE] && f[F_RATES]) {
        /* with another model, both are reported as not applying (a rule) */
        if (fi->model_ok && s->model_kind == BF_FAULT_BER) {
            bf__spec_problem(c, FPATH(c, "rates"), "give either 'rate' or 'rates', not both");
            invalid(facts, BF_SPEC_RATE);
            invalid(facts, BF_SPEC_RATES);
        }
        return true;
    }
    if (f[F_RATE]) {
        if (!get_rate(c, f[F_RATE], FPATH(c, "rate"), &r)) {
            invalid(facts, BF_SPEC_RATE);
            return true;
        }
        if (!(s->rates = malloc(sizeof *s->rates))) {
            c->nomem = true;
            return false;
        }
        s->rates[0] = r;
        s->n_rates = 1;
    } else if (f[F_RATES]) {
        if (!bf__spec_get_array(c, f[F_RATES], FPATH(c, "rates"), "probabilities in (0, 1]", &n)) {
            invalid(facts, BF_SPEC_RATES);
            return true;
        }
        if (!(s->rates = calloc(n, sizeof *s->rates))) {
            c->nomem = true;
            return false;
        }
        for (size_t i = 0; i < n; i++) {
            ptrbuf p = bf__spec_ptr_index(FPATH(c, "rates"), i);
            if (get_rate(c, json_array_get(f[F_RATES], i), p.s, &r)) s->rates[s->n_rates++] = r;
            else invalid(facts, BF_SPEC_RATES);
        }
    }
    return true;
}

/* faults.kv.<name>: a non-empty list (bf__spec_get_array refuses an empty
 * one) of distinct indices 0 .. 2^31-1; false when out of memory. */
static bool kv_indices(ctx *c, json_t *v, const char *name, int64_t **out, size_t *n_out, bf_spec_facts *facts)
{
    ptrbuf ptr = bf__spec_ptr_at(FPATH(c, "kv"), name);
    size_t n;
    if (!bf__spec_get_array(c, v, ptr.s, "indices", &n)) {
        invalid(facts, BF_SPEC_KV);
        return true;
    }
    if (n > BF_KV_FILTER_MAX) {
        bf__spec_problem(c, ptr.s, "%zu entries; at most %d", n, BF_KV_FILTER_MAX);
        invalid(facts, BF_SPEC_KV);
        return true;
    }
    if (!(*out = calloc(n, sizeof **out))) {
        c->nomem = true;
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        ptrbuf p = bf__spec_ptr_index(ptr.s, i);
        int64_t x;
        if (!bf__spec_get_int(c, json_array_get(v, i), p.s, 0, INT32_MAX, "", &x)) {
            invalid(facts, BF_SPEC_KV);
            continue;
        }
        size_t j = 0;
        while (j < *n_out && (*out)[j] != x) j++;
        if (j < *n_out) {
            bf__spec_problem(c, p.s, "%lld is already listed", (long long)x);
            invalid(facts, BF_SPEC_KV);
            continue;
        }
        (*out)[(*n_out)++] = x;
    }
    return true;
}

/* faults.kv: {"layers", "kinds", "heads", "positions"}, each optional;
 * false when out of memory. */
static bool fault_kv(ctx *c, json_t *v, bf_campaign_spec *s, bf_spec_facts *facts)
{
    static const char *const names[] = {"layers", "kinds", "heads", "positions"};
    static const char *const kinds[] = {"k", "v"};
    static const fieldset fs = {names, COUNT(names), NULL, 0, NULL};
    json_t *k[4] = {0};
    if (!json_is_object(v)) {
        bf__spec_wrong_type(c, FPATH(c, "kv"), "an object {\"layers\", \"kinds\", \"heads\", \"positions\"}", v);
        invalid(facts, BF_SPEC_KV);
        return true;
    }
    bf__spec_take_fields(c, v, FPATH(c, "kv"), &fs, k);
    if (k[0] && !kv_indices(c, k[0], "layers", &s->kv.layers, &s->kv.n_layers, facts)) return false;
    if (k[2] && !kv_indices(c, k[2], "heads", &s->kv.heads, &s->kv.n_heads, facts)) return false;
    if (k[3] && !kv_indices(c, k[3], "positions", &s->kv.positions, &s->kv.n_positions, facts)) return false;
    if (k[1]) {
        size_t n;
        if (!bf__spec_get_array(c, k[1], FPATH(c, "kv/kinds"), "'k' or 'v'", &n)) {
            invalid(facts, BF_SPEC_KV);
            return true;
        }
        for (size_t i = 0; i < n; i++) {
            ptrbuf p = bf__spec_ptr_index(FPATH(c, "kv/kinds"), i);
            int e = bf__spec_get_enum(c, json_array_get(k[1], i), p.s, kinds, COUNT(kinds));
            if (e < 0) invalid(facts, BF_SPEC_KV);
            else if (s->kv.kinds & (1u << e)) bf__spec_problem(c, p.s, "'%s' is already listed", kinds[e]), invalid(facts, BF_SPEC_KV);
            else s->kv.kinds |= 1u << e;
        }
    }
    return true;
}

/* target, model, representation, persistence: what the other fields'
 * ranges and the rules depend on. */
static void fault_enums(ctx *c, json_t *const *f, bf_campaign_spec *s, faults_info *fi, bf_spec_facts *facts)
{
    const char *model_names[BF_FAULT_PROFILED + 1], *repr_names[BF_REPR_COUNT];
    int k;
    for (int i = 0; i <= BF_FAULT_PROFILED; i++) model_names[i] = bf_fault_model_name((bf_fault_model)i);
    for (int i = 0; i < BF_REPR_COUNT; i++) repr_names[i] = bf_repr_name((bf_repr)i);
    if (f[F_TARGET]) {
        k = bf__spec_get_enum(c, f[F_TARGET], FPATH(c, "target"), TARGET_NAMES, COUNT(TARGET_NAMES));
        if (k >= 0) s->target = (bf_target)k;
        fi->target_ok = k >= 0;
    }
    if (f[F_MODEL]) {
        k = bf__spec_get_enum(c, f[F_MODEL], FPATH(c, "model"), model_names, COUNT(model_names));
        if (k >= 0) k = bf_fault_model_parse(model_names[k]);
        if (k >= 0) s->model_kind = (bf_fault_model)k;
        fi->model_ok = k >= 0;
    }
    if (f[F_REPR]) {
        k = bf__spec_get_enum(c, f[F_REPR], FPATH(c, "representation"), repr_names, COUNT(repr_names));
        if (k >= 0) k = bf_repr_parse(repr_names[k]);
        if (k >= 0) s->repr = (bf_repr)k;
        fi->repr_ok = k >= 0;
    }
    if (f[F_PERSISTENCE]) {
        k = bf__spec_get_enum(c, f[F_PERSISTENCE], FPATH(c, "persistence"), PERSIST_NAMES, COUNT(PERSIST_NAMES));
        if (k >= 0) s->persistence = (bf_persistence)k;
        fi->persist_ok = k >= 0;
    }
    if (!fi->target_ok) invalid(facts, BF_SPEC_TARGET);
    if (!fi->model_ok) invalid(facts, BF_SPEC_MODEL);
    if (!fi->repr_ok) invalid(facts, BF_SPEC_REPR);
    if (!fi->persist_ok) invalid(facts, BF_SPEC_PERSISTENCE);
    fi->repr_bits = fi->repr_ok ? bf_repr_bits(s->repr) : 32;
    fi->for_repr[0] = '\0';
    if (fi->repr_ok && s->repr != BF_REPR_FP32)
        snprintf(fi->for_repr, sizeof fi->for_repr, " for %s", bf_repr_name(s->repr));
}

void bf__spec_faults(ctx *c, json_t *obj, bool is_list, bf_campaign_spec *s, faults_info *fi, bf_spec_facts *facts)
{
    static const fieldset fs = {bf__spec_fault_names, BF__SPEC_N_FAULT_NAMES, bf__spec_root_names,
                                BF__SPEC_N_ROOT_NAMES, "the top level"};
    json_t *f[F_N];
    int64_t x;
    double w;

    s->target = BF_TARGET_WEIGHTS;
    s->model_kind = BF_FAULT_BITFLIP;
    s->bits = 1;
    s->repeats = 1;
    s->repr = BF_REPR_FP32;
    s->persistence = BF_PERSIST_PERMANENT;
    fi->target_ok = fi->model_ok = fi->repr_ok = fi->persist_ok = true;

    memset(f, 0, sizeof f);
    if (!obj)
        bf__spec_problem(c, FBASE(c), "required: an object saying which faults to inject, "
                                       "e.g. {\"model\": \"bitflip\", \"bits\": 1}");
    else if (!json_is_object(obj))
        bf__spec_wrong_type(c, FBASE(c), c->faults_at ? "an object (a fault group)" : "an object, or a list of fault groups",
                            obj);
    else
        bf__spec_take_fields(c, obj, FBASE(c), &fs, f);
    for (int i = 0; i < F_N; i++)
        if (f[i]) facts->stated |= BF_SPEC_BIT(SLOT_FIELD[i]);

    fault_enums(c, f, s, fi, facts);
    /* faults in the fp16 group scales: bits and positions are theirs, 16 */
    if (f[F_FAULT_SCALES] && !bf__spec_get_bool(c, f[F_FAULT_SCALES], FPATH(c, "fault_scales"), &s->fault_scales))
        invalid(facts, BF_SPEC_FAULT_SCALES);
    if (s->fault_scales && fi->repr_ok && bf_repr_is_fixed(s->repr)) {
        fi->repr_bits = 16;
        snprintf(fi->for_repr, sizeof fi->for_repr, " for fp16");
    }
    if (!fault_tensors(c, f[F_TENSORS], is_list, s, facts)) return;
    if (f[F_BURST]) fault_burst(c, f[F_BURST], s, facts);
    if (f[F_BITS]) {
        /* a burst in a 64-bit word may span elements: up to the word's bits */
        bool word = s->burst == BF_BURST_WORD;
        if (bf__spec_get_int(c, f[F_BITS], FPATH(c, "bits"), 1, word ? 64 : fi->repr_bits,
                             word ? " with burst 'word' (the bits of one 64-bit word)" : fi->for_repr, &x))
            s->bits = (int)x;
        else invalid(facts, BF_SPEC_BITS);
    }
    if (f[F_POSITIONS]) fault_positions(c, f[F_POSITIONS], fi, s, facts);
    if (f[F_WORDS]) {
        if (bf__spec_get_int(c, f[F_WORDS], FPATH(c, "words"), 2, BF_MBU_WORDS_MAX, " (neighbouring 64-bit words)", &x))
            s->words = (int)x;
        else invalid(facts, BF_SPEC_WORDS);
    }
    if (!fault_rates(c, f, fi, s, facts)) return;
    if (f[F_REPEATS] && !bf__spec_get_int(c, f[F_REPEATS], FPATH(c, "repeats"), 1, MAX_REPEATS, "", &s->repeats))
        invalid(facts, BF_SPEC_REPEATS);
    if (f[F_ERROR_MAP] && !bf__spec_dup_string(c, f[F_ERROR_MAP], FPATH(c, "error_map"), &s->error_map))
        invalid(facts, BF_SPEC_ERROR_MAP);
    if (f[F_PER_CHANNEL] && !bf__spec_get_bool(c, f[F_PER_CHANNEL], FPATH(c, "per_channel"), &s->per_channel))
        invalid(facts, BF_SPEC_PER_CHANNEL);
    /* Stutz et al.'s weight clipping as the quantization range; its sign is a rule */
    if (f[F_W_MAX]) {
        if (bf__spec_get_number(c, f[F_W_MAX], FPATH(c, "w_max"), &w)) s->w_max = w;
        else invalid(facts, BF_SPEC_W_MAX);
    }
    /* per-group scales along the input dimension (GPTQ/AWQ); the rules say
     * with which representations */
    if (f[F_GROUP_SIZE] && !bf__spec_get_int(c, f[F_GROUP_SIZE], FPATH(c, "group_size"), 1, BF_GROUP_SIZE_MAX,
                                             " (weights per scale; GPTQ and AWQ use 32, 64 or 128)", &s->group_size))
        invalid(facts, BF_SPEC_GROUP_SIZE);
    if (f[F_ZERO_POINTS] && !bf__spec_get_bool(c, f[F_ZERO_POINTS], FPATH(c, "zero_points"), &s->zero_points))
        invalid(facts, BF_SPEC_ZERO_POINTS);
    if (f[F_KV] && !fault_kv(c, f[F_KV], s, facts)) return;
    /* a KV-cache entry is struck once, in one sample: transient unless said */
    if (fi->target_ok && s->target == BF_TARGET_KV_CACHE && !f[F_PERSISTENCE]) s->persistence = BF_PERSIST_TRANSIENT;
}

/* Fields a group after the first does not take: one representation's
 * layout, one map, one sweep belong to group 0 (docs/CAMPAIGNS.md). */
static const struct { int slot; const char *why; } GROUP_NOT[] = {
    {F_RATES, "a group after the first takes one 'rate' (the rate sweep, and so the trials, are group 0's)"},
    {F_REPEATS, "the trials are group 0's"},
    {F_PER_CHANNEL, "the weights' stored layout is group 0's, for every group (give per_channel there)"},
    {F_ZERO_POINTS, "zero points as fault sites are group 0's to give"},
    {F_W_MAX, "the weights' stored layout is group 0's, for every group (give w_max there)"},
    {F_ERROR_MAP, "model 'profiled' does not combine with other fault groups"},
    {F_GROUP_SIZE, "the weights' stored layout is group 0's, for every group (give group_size there)"},
    {F_FAULT_SCALES, "fault_scales does not combine with other fault groups (its sites are scales, not values)"},
    {F_KV, "a fault group strikes weights or activations, not a KV cache"},
    {F_WORDS, "a column upset is group 0's to draw (it strikes words of the weights as group 0 stores them)"},
};

/* Group i (1..) of a list, parsed as an object of fault fields into a
 * spec of its own and taken from it; false when out of memory. */
static bool fault_group(ctx *c, json_t *obj, size_t i, const bf_campaign_spec *s, bf_fault_group *g, bf_spec_facts *facts)
{
    char at[32];
    snprintf(at, sizeof at, "/faults/%zu", i);
    bf_campaign_spec t = {0};
    faults_info fi;
    bf_spec_facts tf = {.document = 1};
    size_t before = c->found;
    c->faults_at = at;
    bf__spec_faults(c, obj, false, &t, &fi, &tf);
    c->faults_at = NULL;
    if (c->nomem) {
        bf_campaign_spec_free(&t);
        return false;
    }
    json_t *f[F_N] = {0};
    for (size_t k = 0; json_is_object(obj) && k < F_N; k++) f[k] = json_object_get(obj, bf__spec_fault_names[k]);
    for (size_t k = 0; k < COUNT(GROUP_NOT); k++)
        if (f[GROUP_NOT[k].slot])
            bf__spec_problem(c, bf__spec_ptr_at(at, bf__spec_fault_names[GROUP_NOT[k].slot]).s, "does not apply here: %s",
                             GROUP_NOT[k].why);
    if (t.burst == BF_BURST_WORD)
        bf__spec_problem(c, bf__spec_ptr_at(at, "burst").s, "'word' is group 0's to draw (it strikes words of the weights as "
                                                             "group 0 stores them); true or false");
    g->target = f[F_TARGET] ? t.target : BF_TARGET_ACTIVATIONS;   /* what a group after the first strikes */
    g->tensors = t.tensors;
    g->n_tensors = t.n_tensors;
    t.tensors = NULL;
    t.n_tensors = 0;
    g->model_kind = t.model_kind;
    g->bits = t.bits;
    memcpy(g->positions, t.positions, sizeof g->positions);
    g->n_positions = t.n_positions;
    g->burst = t.burst == 1;
    g->rate = f[F_RATE] && t.n_rates == 1 ? t.rates[0] : 0;
    /* a weights group strikes the weights as group 0 stores them: its
     * representation, unless it names one (which the rules then judge) */
    g->repr = g->target == BF_TARGET_WEIGHTS && !f[F_REPR] ? s->repr : t.repr;
    g->persistence = t.persistence;
    bf_campaign_spec_free(&t);
    if (c->found != before || tf.invalid) invalid(facts, BF_SPEC_GROUPS);
    return true;
}

void bf__spec_fault_groups(ctx *c, json_t *arr, bool is_list, bf_campaign_spec *s, faults_info *fi, bf_spec_facts *facts)
{
    size_t n = json_array_size(arr);
    facts->stated |= BF_SPEC_BIT(BF_SPEC_GROUPS);
    c->faults_list = true;
    if (n == 0) {
        bf__spec_problem(c, "/faults", "an empty list of fault groups: give at least one, e.g. [{\"model\": \"ber\", "
                                       "\"rate\": 1e-6}, {\"target\": \"activations\"}], or an object");
        invalid(facts, BF_SPEC_GROUPS);
        json_t *empty = json_object();
        if (!empty) {
            c->nomem = true;
            return;
        }
        bf__spec_faults(c, empty, is_list, s, fi, facts);   /* group 0's defaults, no second problem */
        json_decref(empty);
        return;
    }
    if (n > BF_FAULT_GROUPS_MAX) {
        bf__spec_problem(c, "/faults", "%zu fault groups; at most %d (group 0 on weights, then groups on weights, then "
                         "on activations)", n, BF_FAULT_GROUPS_MAX);
        invalid(facts, BF_SPEC_GROUPS);
        n = 1;   /* group 0 is still read, for its own problems */
    }
    c->faults_at = "/faults/0";
    bf__spec_faults(c, json_array_get(arr, 0), is_list, s, fi, facts);
    c->faults_at = NULL;
    if (c->nomem || n == 1) return;
    if (!(s->groups = calloc(n - 1, sizeof *s->groups))) {
        c->nomem = true;
        return;
    }
    s->n_groups = n - 1;
    for (size_t i = 1; i < n; i++)
        if (!fault_group(c, json_array_get(arr, i), i, s, &s->groups[i - 1], facts)) return;
}
