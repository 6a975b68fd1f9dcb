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
    if (!bf__spec_get_array(c, v, "/faults/tensors", "tensor names, globs or 'op:Type'", &n)) {
        invalid(facts, BF_SPEC_TENSORS);
        return true;
    }
    if (!(s->tensors = calloc(n, sizeof *s->tensors))) {
        c->nomem = true;
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        ptrbuf p = bf__spec_ptr_index("/faults/tensors", i);
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
    if (!bf__spec_get_array(c, v, "/faults/positions", "bit positions", &n)) {
        invalid(facts, BF_SPEC_POSITIONS);
        return;
    }
    for (int b = 0; b < 32; b++) first_at[b] = -1;
    for (size_t i = 0; i < n; i++) {
        ptrbuf p = bf__spec_ptr_index("/faults/positions", i);
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
        bf__spec_wrong_type(c, "/faults/burst", "true, false or \"word\"", v);
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
            bf__spec_problem(c, "/faults/rates", "give either 'rate' or 'rates', not both");
            invalid(facts, BF_SPEC_RATE);
            invalid(facts, BF_SPEC_RATES);
        }
        return true;
    }
    if (f[F_RATE]) {
        if (!get_rate(c, f[F_RATE], "/faults/rate", &r)) {
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
        if (!bf__spec_get_array(c, f[F_RATES], "/faults/rates", "probabilities in (0, 1]", &n)) {
            invalid(facts, BF_SPEC_RATES);
            return true;
        }
        if (!(s->rates = calloc(n, sizeof *s->rates))) {
            c->nomem = true;
            return false;
        }
        for (size_t i = 0; i < n; i++) {
            ptrbuf p = bf__spec_ptr_index("/faults/rates", i);
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
    ptrbuf ptr = bf__spec_ptr_at("/faults/kv", name);
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
        bf__spec_wrong_type(c, "/faults/kv", "an object {\"layers\", \"kinds\", \"heads\", \"positions\"}", v);
        invalid(facts, BF_SPEC_KV);
        return true;
    }
    bf__spec_take_fields(c, v, "/faults/kv", &fs, k);
    if (k[0] && !kv_indices(c, k[0], "layers", &s->kv.layers, &s->kv.n_layers, facts)) return false;
    if (k[2] && !kv_indices(c, k[2], "heads", &s->kv.heads, &s->kv.n_heads, facts)) return false;
    if (k[3] && !kv_indices(c, k[3], "positions", &s->kv.positions, &s->kv.n_positions, facts)) return false;
    if (k[1]) {
        size_t n;
        if (!bf__spec_get_array(c, k[1], "/faults/kv/kinds", "'k' or 'v'", &n)) {
            invalid(facts, BF_SPEC_KV);
            return true;
        }
        for (size_t i = 0; i < n; i++) {
            ptrbuf p = bf__spec_ptr_index("/faults/kv/kinds", i);
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
        k = bf__spec_get_enum(c, f[F_TARGET], "/faults/target", TARGET_NAMES, COUNT(TARGET_NAMES));
        if (k >= 0) s->target = (bf_target)k;
        fi->target_ok = k >= 0;
    }
    if (f[F_MODEL]) {
        k = bf__spec_get_enum(c, f[F_MODEL], "/faults/model", model_names, COUNT(model_names));
        if (k >= 0) k = bf_fault_model_parse(model_names[k]);
        if (k >= 0) s->model_kind = (bf_fault_model)k;
        fi->model_ok = k >= 0;
    }
    if (f[F_REPR]) {
        k = bf__spec_get_enum(c, f[F_REPR], "/faults/representation", repr_names, COUNT(repr_names));
        if (k >= 0) k = bf_repr_parse(repr_names[k]);
        if (k >= 0) s->repr = (bf_repr)k;
        fi->repr_ok = k >= 0;
    }
    if (f[F_PERSISTENCE]) {
        k = bf__spec_get_enum(c, f[F_PERSISTENCE], "/faults/persistence", PERSIST_NAMES, COUNT(PERSIST_NAMES));
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
        bf__spec_problem(c, "/faults", "required: an object saying which faults to inject, "
                                       "e.g. {\"model\": \"bitflip\", \"bits\": 1}");
    else if (!json_is_object(obj))
        bf__spec_wrong_type(c, "/faults", "an object", obj);
    else
        bf__spec_take_fields(c, obj, "/faults", &fs, f);
    for (int i = 0; i < F_N; i++)
        if (f[i]) facts->stated |= BF_SPEC_BIT(SLOT_FIELD[i]);

    fault_enums(c, f, s, fi, facts);
    /* faults in the fp16 group scales: bits and positions are theirs, 16 */
    if (f[F_FAULT_SCALES] && !bf__spec_get_bool(c, f[F_FAULT_SCALES], "/faults/fault_scales", &s->fault_scales))
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
        if (bf__spec_get_int(c, f[F_BITS], "/faults/bits", 1, word ? 64 : fi->repr_bits,
                             word ? " with burst 'word' (the bits of one 64-bit word)" : fi->for_repr, &x))
            s->bits = (int)x;
        else invalid(facts, BF_SPEC_BITS);
    }
    if (f[F_POSITIONS]) fault_positions(c, f[F_POSITIONS], fi, s, facts);
    if (f[F_WORDS]) {
        if (bf__spec_get_int(c, f[F_WORDS], "/faults/words", 2, BF_MBU_WORDS_MAX, " (neighbouring 64-bit words)", &x))
            s->words = (int)x;
        else invalid(facts, BF_SPEC_WORDS);
    }
    if (!fault_rates(c, f, fi, s, facts)) return;
    if (f[F_REPEATS] && !bf__spec_get_int(c, f[F_REPEATS], "/faults/repeats", 1, MAX_REPEATS, "", &s->repeats))
        invalid(facts, BF_SPEC_REPEATS);
    if (f[F_ERROR_MAP] && !bf__spec_dup_string(c, f[F_ERROR_MAP], "/faults/error_map", &s->error_map))
        invalid(facts, BF_SPEC_ERROR_MAP);
    if (f[F_PER_CHANNEL] && !bf__spec_get_bool(c, f[F_PER_CHANNEL], "/faults/per_channel", &s->per_channel))
        invalid(facts, BF_SPEC_PER_CHANNEL);
    /* Stutz et al.'s weight clipping as the quantization range; its sign is a rule */
    if (f[F_W_MAX]) {
        if (bf__spec_get_number(c, f[F_W_MAX], "/faults/w_max", &w)) s->w_max = w;
        else invalid(facts, BF_SPEC_W_MAX);
    }
    /* per-group scales along the input dimension (GPTQ/AWQ); the rules say
     * with which representations */
    if (f[F_GROUP_SIZE] && !bf__spec_get_int(c, f[F_GROUP_SIZE], "/faults/group_size", 1, BF_GROUP_SIZE_MAX,
                                             " (weights per scale; GPTQ and AWQ use 32, 64 or 128)", &s->group_size))
        invalid(facts, BF_SPEC_GROUP_SIZE);
    if (f[F_ZERO_POINTS] && !bf__spec_get_bool(c, f[F_ZERO_POINTS], "/faults/zero_points", &s->zero_points))
        invalid(facts, BF_SPEC_ZERO_POINTS);
    if (f[F_KV] && !fault_kv(c, f[F_KV], s, facts)) return;
    /* a KV-cache entry is struck once, in one sample: transient unless said */
    if (fi->target_ok && s->target == BF_TARGET_KV_CACHE && !f[F_PERSISTENCE]) s->persistence = BF_PERSIST_TRANSIENT;
}
