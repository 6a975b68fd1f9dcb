/* Campaign spec: JSON -> bf_campaign_spec, reporting every problem.
 *
 * Three passes over each object: its keys (unknown ones reported, known ones
 * kept in slots), then each field on its own (type, range), then the rules
 * between fields. A field whose value is invalid is marked so, and the rules
 * that depend on it are skipped: one mistake gives one problem, not a cascade.
 * The contract is deliberately strict (a field that does not apply is an
 * error, not ignored): relaxing a rule later breaks no spec, tightening would. */
#include "bitflip/api/spec.h"
#include "spec_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRIALS 1000000000LL
#define MAX_REPEATS 1000000LL
#define MAX_BATCH (1LL << 24)


/* ------------------------------------------------------------ the fields */

static const char *const ROOT_NAMES[] = {"model", "dataset", "seed", "trials", "faults",
                                         "sampling", "metrics", "critical", "stop", "batch",
                                         "mitigations"};
enum { R_MODEL, R_DATASET, R_SEED, R_TRIALS, R_FAULTS, R_SAMPLING, R_METRICS, R_CRITICAL,
       R_STOP, R_BATCH, R_MITIGATIONS, R_N };

static const char *const FAULT_NAMES[] = {"target", "tensors", "model", "bits", "positions",
                                          "burst", "rate", "rates", "repeats",
                                          "representation", "per_channel", "persistence", "zero_points",
                                          "w_max", "error_map"};
enum { F_TARGET, F_TENSORS, F_MODEL, F_BITS, F_POSITIONS, F_BURST, F_RATE, F_RATES,
       F_REPEATS, F_REPR, F_PER_CHANNEL, F_PERSISTENCE, F_ZERO_POINTS, F_W_MAX, F_ERROR_MAP, F_N };

static const char *const SAMPLING_OBJ_NAMES[] = {"list"};
static const char *const ENTRY_NAMES[] = {"tensor", "index", "bit", "sample"};
enum { E_TENSOR, E_INDEX, E_BIT, E_SAMPLE, E_N };
static const char *const CRITICAL_NAMES[] = {"metric", "delta"};
static const char *const STOP_NAMES[] = {"margin", "confidence"};

static const char *const TARGET_NAMES[] = {"weights", "activations", "inputs"};
static const char *const PERSIST_NAMES[] = {"permanent", "transient"};
static const char *const SAMPLING_NAMES[] = {"uniform", "per_tensor", "per_bit"};

/* What parse_faults learnt, for the rules between sections. A *_ok flag is
 * false when the field was given but invalid: rules that need it are skipped. */

static bool flips_chosen_bits(bf_fault_model m)
{
    return m == BF_FAULT_BITFLIP || m == BF_FAULT_STUCK_AT_0 || m == BF_FAULT_STUCK_AT_1;
}

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

/* faults.tensors, or its default ["*"]; false when out of memory. */
static bool fault_tensors(ctx *c, json_t *v, bool is_list, bf_campaign_spec *s)
{
    if (v && is_list) {
        bf__spec_problem(c, "/faults/tensors", "not used with an explicit fault list "
                                      "(each entry of /sampling/list names its tensor)");
    } else if (v) {
        size_t n;
        if (bf__spec_get_array(c, v, "/faults/tensors", "tensor names, globs or 'op:Type'", &n)) {
            if (!(s->tensors = calloc(n, sizeof *s->tensors))) {
                c->nomem = true;
                return false;
            }
            for (size_t i = 0; i < n; i++) {
                json_t *e = json_array_get(v, i);
                ptrbuf p = bf__spec_ptr_index("/faults/tensors", i);
                char *t = NULL;
                if (!bf__spec_dup_string(c, e, p.s, &t)) continue;
                if (strcmp(t, "op:") == 0) {
                    bf__spec_problem(c, p.s, "'op:' needs an op type, e.g. 'op:Gemm'");
                    free(t);
                    continue;
                }
                s->tensors[s->n_tensors++] = t;
            }
        }
    } else if (!is_list) {
        if (!(s->tensors = calloc(1, sizeof *s->tensors)) || !(s->tensors[0] = strdup("*"))) {
            c->nomem = true;
            return false;
        }
        s->n_tensors = 1;
    }
    return true;
}

/* faults.bits, positions and burst: which bits a fault touches. */
static void fault_bits(ctx *c, json_t *const *f, const faults_info *fi, bool is_list,
                       bf_campaign_spec *s)
{
    const char *mname = bf_fault_model_name(s->model_kind);
    bool chosen_bits = flips_chosen_bits(s->model_kind);
    int rbits = fi->repr_bits;
    bool bits_ok = true, positions_ok = true;
    if (f[F_BITS]) {
        int64_t b;
        if (fi->model_ok && !chosen_bits) {
            bf__spec_problem(c, "/faults/bits", "applies only to models 'bitflip', 'stuck_at_0' and "
                                       "'stuck_at_1', not '%s'", mname);
            bits_ok = false;
        } else if (is_list) {
            bf__spec_problem(c, "/faults/bits", "not used with an explicit fault list "
                                       "(each entry flips one bit)");
            bits_ok = false;
        } else if ((bits_ok = bf__spec_get_int(c, f[F_BITS], "/faults/bits", 1, rbits, fi->for_repr, &b))) {
            s->bits = (int)b;
        }
    }
    if (f[F_POSITIONS]) {
        size_t n;
        positions_ok = false;
        if (fi->model_ok && s->model_kind == BF_FAULT_RANDOM_VALUE) {
            bf__spec_problem(c, "/faults/positions", "does not apply to model 'random_value' "
                                            "(it replaces every bit)");
        } else if (fi->model_ok && s->model_kind == BF_FAULT_PROFILED) {
            bf__spec_problem(c, "/faults/positions", "does not apply to model 'profiled' "
                                            "(the map covers every stored bit)");
        } else if (is_list) {
            bf__spec_problem(c, "/faults/positions", "not used with an explicit fault list "
                                            "(each entry gives its bit)");
        } else if (bf__spec_get_array(c, f[F_POSITIONS], "/faults/positions", "bit positions", &n)) {
            int first_at[32];
            positions_ok = true;
            for (int b = 0; b < 32; b++) first_at[b] = -1;
            for (size_t i = 0; i < n; i++) {
                ptrbuf p = bf__spec_ptr_index("/faults/positions", i);
                int64_t b;
                if (!bf__spec_get_int(c, json_array_get(f[F_POSITIONS], i), p.s, 0, rbits - 1, fi->for_repr, &b)) {
                    positions_ok = false;
                } else if (first_at[b] >= 0) {
                    bf__spec_problem(c, p.s, "bit %d is already listed at /faults/positions/%d", (int)b,
                            first_at[b]);
                    positions_ok = false;
                } else {
                    first_at[b] = (int)i;
                    s->positions[s->n_positions++] = (int)b;
                }
            }
            qsort(s->positions, (size_t)s->n_positions, sizeof s->positions[0], cmp_int);
        }
    }
    if (f[F_BURST]) {
        if (fi->model_ok && !chosen_bits)
            bf__spec_problem(c, "/faults/burst", "applies only to models 'bitflip', 'stuck_at_0' and "
                                        "'stuck_at_1', not '%s'", mname);
        else if (is_list)
            bf__spec_problem(c, "/faults/burst", "not used with an explicit fault list "
                                        "(each entry flips one bit)");
        else
            bf__spec_get_bool(c, f[F_BURST], "/faults/burst", &s->burst);
    }
    /* bits against the allowed positions (bits against the representation
     * is get_int's range above) */
    if (bits_ok && positions_ok && s->n_positions > 0 && s->bits > s->n_positions) {
        bf__spec_problem(c, "/faults/bits", "must be at most %d, the number of allowed positions, got %d",
                s->n_positions, s->bits);
        bits_ok = false;
    }
    if (s->burst && bits_ok && positions_ok && fi->repr_ok) {
        if (s->bits < 2) {
            bf__spec_problem(c, "/faults/burst", "needs bits >= 2 (a burst is that many adjacent bits), "
                                        "bits is %d", s->bits);
        } else if (s->n_positions > 0) {
            int run = 1, longest = 1;
            for (int i = 1; i < s->n_positions; i++) {
                run = s->positions[i] == s->positions[i - 1] + 1 ? run + 1 : 1;
                if (run > longest) longest = run;
            }
            if (longest < s->bits)
                bf__spec_problem(c, "/faults/bits",
                        "a burst of %d adjacent bits needs %d consecutive allowed positions; "
                        "the longest run in /faults/positions is %d", s->bits, s->bits, longest);
        }
    }

}

/* faults.rate or rates, and repeats; false when out of memory. */
static bool fault_ber(ctx *c, json_t *const *f, const faults_info *fi, bf_campaign_spec *s)
{
    const char *mname = bf_fault_model_name(s->model_kind);
    bool is_ber = s->model_kind == BF_FAULT_BER, is_prof = s->model_kind == BF_FAULT_PROFILED;
    if (f[F_RATE] && fi->model_ok && !is_ber)
        bf__spec_problem(c, "/faults/rate", "applies only to model 'ber', not '%s'", mname);
    if (f[F_RATES] && fi->model_ok && !is_ber)
        bf__spec_problem(c, "/faults/rates", "applies only to model 'ber', not '%s'", mname);
    if (f[F_REPEATS] && fi->model_ok && !is_ber && !is_prof)
        bf__spec_problem(c, "/faults/repeats", "applies only to models 'ber' and 'profiled', not '%s'", mname);
    if (f[F_ERROR_MAP] && fi->model_ok && !is_prof)
        bf__spec_problem(c, "/faults/error_map", "applies only to model 'profiled', not '%s'", mname);
    if (fi->model_ok && is_prof) {
        if (!f[F_ERROR_MAP])
            bf__spec_problem(c, "/faults/error_map", "required for model 'profiled': the path of a chip's error map "
                                                     "(a .bfmap file; docs/CAMPAIGNS.md, Profiled error maps)");
        else
            bf__spec_dup_string(c, f[F_ERROR_MAP], "/faults/error_map", &s->error_map);
        if (fi->target_ok && s->target != BF_TARGET_WEIGHTS)
            bf__spec_problem(c, "/faults/target", "model 'profiled' lays a memory's error map over the weights: "
                                                  "it takes target 'weights' only");
        if (f[F_REPEATS])
            bf__spec_get_int(c, f[F_REPEATS], "/faults/repeats", 1, MAX_REPEATS, "", &s->repeats);
    }
    if (fi->model_ok && is_ber) {
        if (f[F_RATE] && f[F_RATES]) {
            bf__spec_problem(c, "/faults/rates", "give either 'rate' or 'rates', not both");
        } else if (!f[F_RATE] && !f[F_RATES]) {
            bf__spec_problem(c, "/faults/rate", "required for model 'ber': the probability that each "
                                       "bit flips (or 'rates' for a sweep)");
        } else if (f[F_RATE]) {
            double r;
            if (get_rate(c, f[F_RATE], "/faults/rate", &r)) {
                if (!(s->rates = malloc(sizeof *s->rates))) {
                    c->nomem = true;
                    return false;
                }
                s->rates[0] = r;
                s->n_rates = 1;
            }
        } else {
            size_t n;
            if (bf__spec_get_array(c, f[F_RATES], "/faults/rates", "probabilities in (0, 1]", &n)) {
                if (!(s->rates = calloc(n, sizeof *s->rates))) {
                    c->nomem = true;
                    return false;
                }
                for (size_t i = 0; i < n; i++) {
                    ptrbuf p = bf__spec_ptr_index("/faults/rates", i);
                    double r;
                    if (get_rate(c, json_array_get(f[F_RATES], i), p.s, &r))
                        s->rates[s->n_rates++] = r;
                }
            }
        }
        if (f[F_REPEATS])
            bf__spec_get_int(c, f[F_REPEATS], "/faults/repeats", 1, MAX_REPEATS, "", &s->repeats);
    }
    return true;
}

static void parse_faults(ctx *c, json_t *obj, bool is_list, bf_campaign_spec *s, faults_info *fi)
{
    static const fieldset fs = {FAULT_NAMES, COUNT(FAULT_NAMES), ROOT_NAMES, COUNT(ROOT_NAMES),
                                "the top level"};
    const char *model_names[BF_FAULT_PROFILED + 1], *repr_names[BF_REPR_COUNT];
    json_t *f[F_N];

    for (int i = 0; i <= BF_FAULT_PROFILED; i++) model_names[i] = bf_fault_model_name((bf_fault_model)i);
    for (int i = 0; i < BF_REPR_COUNT; i++) repr_names[i] = bf_repr_name((bf_repr)i);

    s->target = BF_TARGET_WEIGHTS;
    s->model_kind = BF_FAULT_BITFLIP;
    s->bits = 1;
    s->repeats = 1;
    s->repr = BF_REPR_FP32;
    s->persistence = BF_PERSIST_PERMANENT;
    fi->target_ok = fi->model_ok = fi->repr_ok = fi->persist_ok = true;

    if (!obj) {
        bf__spec_problem(c, "/faults", "required: an object saying which faults to inject, "
                              "e.g. {\"model\": \"bitflip\", \"bits\": 1}");
        memset(f, 0, sizeof f);
    } else if (!json_is_object(obj)) {
        bf__spec_wrong_type(c, "/faults", "an object", obj);
        memset(f, 0, sizeof f);
    } else {
        bf__spec_take_fields(c, obj, "/faults", &fs, f);
    }

    /* single fields */
    int k;
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
        k = bf__spec_get_enum(c, f[F_PERSISTENCE], "/faults/persistence", PERSIST_NAMES,
                     COUNT(PERSIST_NAMES));
        if (k >= 0) s->persistence = (bf_persistence)k;
        fi->persist_ok = k >= 0;
    }
    fi->repr_bits = fi->repr_ok ? bf_repr_bits(s->repr) : 32;
    fi->for_repr[0] = '\0';
    if (fi->repr_ok && s->repr != BF_REPR_FP32)
        snprintf(fi->for_repr, sizeof fi->for_repr, " for %s", bf_repr_name(s->repr));

    if (!fault_tensors(c, f[F_TENSORS], is_list, s)) return;
    fault_bits(c, f, fi, is_list, s);
    if (!fault_ber(c, f, fi, s)) return;

    /* fixed-point scales */
    if (f[F_PER_CHANNEL]) {
        if (fi->repr_ok && !bf_repr_is_fixed(s->repr))
            bf__spec_problem(c, "/faults/per_channel", "applies only to fixed-point representations (int8 ... "
                                                       "int2, uint8 ... uint2), not '%s'", bf_repr_name(s->repr));
        else if (fi->target_ok && s->target != BF_TARGET_WEIGHTS)
            bf__spec_problem(c, "/faults/per_channel", "applies only to target 'weights' (a scale per "
                                              "slice along a weight's axis 0)");
        else
            bf__spec_get_bool(c, f[F_PER_CHANNEL], "/faults/per_channel", &s->per_channel);
    }

    /* Stutz et al.'s weight clipping as the quantization range */
    if (f[F_W_MAX]) {
        double w;
        if (fi->repr_ok && !bf_repr_is_fixed(s->repr))
            bf__spec_problem(c, "/faults/w_max", "applies only to fixed-point representations (int8 ... int2, "
                                                 "uint8 ... uint2), not '%s'", bf_repr_name(s->repr));
        else if (fi->target_ok && s->target != BF_TARGET_WEIGHTS)
            bf__spec_problem(c, "/faults/w_max", "applies only to target 'weights' (the clipped range they are "
                                                 "quantized in)");
        else if (bf__spec_get_number(c, f[F_W_MAX], "/faults/w_max", &w)) {
            if (!(w > 0 && w <= 3.4e38))
                bf__spec_problem(c, "/faults/w_max", "must be a positive number (the weights' range is [-w_max, "
                                                     "w_max]), got %s", bf__spec_describe(f[F_W_MAX]).s);
            else
                s->w_max = w;
        }
    }
    if (fi->repr_ok && fi->target_ok && s->target != BF_TARGET_WEIGHTS && bf_repr_is_fixed(s->repr) &&
        s->repr != BF_REPR_INT8)
        bf__spec_problem(c, "/faults/representation", "'%s' applies only to target 'weights'; activations and inputs "
                                                      "take fp32, fp16, bf16 or int8", bf_repr_name(s->repr));

    /* quantized models: their zero points as sites too */
    if (f[F_ZERO_POINTS]) {
        if (fi->target_ok && s->target != BF_TARGET_WEIGHTS)
            bf__spec_problem(c, "/faults/zero_points", "applies only to target 'weights' (a quantized model's "
                                                       "stored zero points)");
        else
            bf__spec_get_bool(c, f[F_ZERO_POINTS], "/faults/zero_points", &s->zero_points);
    }

    if (fi->persist_ok && fi->target_ok && s->persistence == BF_PERSIST_TRANSIENT &&
        s->target == BF_TARGET_WEIGHTS)
        bf__spec_problem(c, "/faults/persistence", "'transient' applies only to targets 'activations' "
                                          "and 'inputs' (a weight fault is a memory error: "
                                          "'permanent')");
}

/* Entries of sampling.list, once the faults section is known. */
static void parse_list(ctx *c, json_t *arr, const faults_info *fi, bf_campaign_spec *s)
{
    static const fieldset fs = {ENTRY_NAMES, COUNT(ENTRY_NAMES), NULL, 0, NULL};
    size_t n = json_array_size(arr);
    bool transient = s->persistence == BF_PERSIST_TRANSIENT;

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
        if (v[E_SAMPLE] && fi->persist_ok && !transient) {
            ok = false;
            bf__spec_problem(c, p.s, "applies only to 'transient' faults (a permanent fault hits every sample)");
        } else if (v[E_SAMPLE]) {
            if (bf__spec_get_int(c, v[E_SAMPLE], p.s, 0, INT64_MAX, "", &x)) ent.sample = x;
            else ok = false;
        } else if (fi->persist_ok && transient) {
            ok = false;
            bf__spec_problem(c, p.s, "required for 'transient' faults: the eval-set sample the fault hits");
        }
        if (ok)
            s->list[s->n_list++] = ent;
        else
            free(ent.tensor);
    }
}

static void parse_spec(ctx *c, json_t *root, bf_campaign_spec *s)
{
    static const fieldset root_fs = {ROOT_NAMES, COUNT(ROOT_NAMES), FAULT_NAMES,
                                     COUNT(FAULT_NAMES), "'faults'"};
    static const fieldset sampling_fs = {SAMPLING_OBJ_NAMES, 1, NULL, 0, NULL};
    static const fieldset critical_fs = {CRITICAL_NAMES, COUNT(CRITICAL_NAMES), NULL, 0, NULL};
    static const fieldset stop_fs = {STOP_NAMES, COUNT(STOP_NAMES), NULL, 0, NULL};
    json_t *r[R_N];
    int64_t x;
    double d;

    bf__spec_take_fields(c, root, "", &root_fs, r);

    if (!r[R_MODEL]) bf__spec_problem(c, "/model", "required: the ONNX model (a path, or a model id in the daemon)");
    else bf__spec_dup_string(c, r[R_MODEL], "/model", &s->model);
    if (!r[R_DATASET]) bf__spec_problem(c, "/dataset", "required: the eval set (a safetensors path, or a dataset id in the daemon)");
    else bf__spec_dup_string(c, r[R_DATASET], "/dataset", &s->dataset);
    if (r[R_SEED] && bf__spec_get_int(c, r[R_SEED], "/seed", 0, INT64_MAX, "", &x)) s->seed = (uint64_t)x;

    /* The faults section's rules depend on whether sampling is a list: known
     * from its type alone; its value is checked after faults (schema order). */
    bool is_list = json_is_object(r[R_SAMPLING]);
    faults_info fi;
    parse_faults(c, r[R_FAULTS], is_list, s, &fi);
    if (c->nomem) return;

    bool sampling_ok = true;
    json_t *list = NULL;
    s->sampling = BF_SAMPLE_UNIFORM;
    if (json_is_string(r[R_SAMPLING]) && strcmp(json_string_value(r[R_SAMPLING]), "list") == 0) {
        bf__spec_problem(c, "/sampling", "an explicit list is an object: {\"list\": [{\"tensor\": ..., "
                                "\"index\": ..., \"bit\": ...}]}");
        sampling_ok = false;
    } else if (json_is_string(r[R_SAMPLING])) {
        int k = bf__spec_get_enum(c, r[R_SAMPLING], "/sampling", SAMPLING_NAMES, COUNT(SAMPLING_NAMES));
        if (k >= 0) s->sampling = (bf_sampling)k;
        sampling_ok = k >= 0;
    } else if (r[R_SAMPLING] && !json_is_object(r[R_SAMPLING])) {
        bf__spec_problem(c, "/sampling", "must be 'uniform', 'per_tensor', 'per_bit' or an object "
                                "{\"list\": [...]}, got %s", bf__spec_describe(r[R_SAMPLING]).s);
        sampling_ok = false;
    } else if (r[R_SAMPLING]) {
        json_t *so[1];
        bf__spec_take_fields(c, r[R_SAMPLING], "/sampling", &sampling_fs, so);
        s->sampling = BF_SAMPLE_LIST;
        if (!so[0]) {
            bf__spec_problem(c, "/sampling/list", "required: the faults to inject, "
                                         "[{\"tensor\": ..., \"index\": ..., \"bit\": ...}, ...]");
        } else {
            size_t n;
            if (bf__spec_get_array(c, so[0], "/sampling/list", "faults {\"tensor\", \"index\", \"bit\"}", &n))
                list = so[0];
        }
    }
    bool is_ber = fi.model_ok && s->model_kind == BF_FAULT_BER;
    bool is_prof = fi.model_ok && s->model_kind == BF_FAULT_PROFILED;
    const char *mname = bf_fault_model_name(s->model_kind);

    if (list) parse_list(c, list, &fi, s);
    if (c->nomem) return;
    if (is_list && fi.model_ok && !flips_chosen_bits(s->model_kind))
        bf__spec_problem(c, "/sampling", "an explicit list flips the listed bits: it needs faults.model "
                                "'bitflip', 'stuck_at_0' or 'stuck_at_1', not '%s'", mname);
    else if (sampling_ok && is_ber && s->sampling != BF_SAMPLE_UNIFORM)
        bf__spec_problem(c, "/sampling", "must be 'uniform' with model 'ber' (every bit of the selected "
                                "tensors may flip)");
    else if (sampling_ok && is_prof && s->sampling != BF_SAMPLE_UNIFORM)
        bf__spec_problem(c, "/sampling", "must be 'uniform' with model 'profiled' (the map covers every bit "
                                "of the selected tensors)");
    else if (sampling_ok && fi.model_ok && s->sampling == BF_SAMPLE_PER_BIT &&
             s->model_kind == BF_FAULT_RANDOM_VALUE)
        bf__spec_problem(c, "/sampling", "'per_bit' needs a model that touches chosen bits "
                                "('bitflip', 'stuck_at_0', 'stuck_at_1'), not 'random_value'");

    /* trials: given, or implied by a list or a BER sweep */
    if (r[R_TRIALS] && is_list) {
        bf__spec_problem(c, "/trials", "not used with an explicit fault list: each entry of "
                              "/sampling/list is one trial");
    } else if (r[R_TRIALS] && is_ber) {
        bf__spec_problem(c, "/trials", "not used with model 'ber': a sweep runs len(rates) x repeats trials");
    } else if (r[R_TRIALS] && is_prof) {
        bf__spec_problem(c, "/trials", "not used with model 'profiled': it runs 'repeats' trials, one per offset");
    } else if (r[R_TRIALS]) {
        bf__spec_get_int(c, r[R_TRIALS], "/trials", 1, MAX_TRIALS, "", &s->trials);
    } else if (!is_list && !is_ber && !is_prof && sampling_ok && fi.model_ok) {
        bf__spec_problem(c, "/trials", "required: how many faults to inject, 1..%lld "
                              "(not needed for model 'ber' or an explicit list)", MAX_TRIALS);
    }
    if (is_list) s->trials = (int64_t)s->n_list;
    if (is_prof) s->trials = s->repeats;
    if (is_ber) {
        /* n_rates <= 8 Mi (16 MiB of JSON), repeats <= 10^6: no overflow */
        int64_t t = (int64_t)s->n_rates * s->repeats;
        if (t > MAX_TRIALS)
            bf__spec_problem(c, "/faults/repeats", "a sweep of %zu rates x %" PRId64 " repeats is %" PRId64
                                          " trials; the limit is %lld", s->n_rates, s->repeats,
                    t, MAX_TRIALS);
        s->trials = t;
    }

    /* metrics */
    if (r[R_METRICS]) {
        const char *names[BF_METRIC_COUNT];
        size_t n;
        for (int i = 0; i < BF_METRIC_COUNT; i++) names[i] = bf_metric_name((bf_metric_id)i);
        if (bf__spec_get_array(c, r[R_METRICS], "/metrics", "metric names", &n)) {
            int first_at[BF_METRIC_COUNT];
            for (int i = 0; i < BF_METRIC_COUNT; i++) first_at[i] = -1;
            for (size_t i = 0; i < n; i++) {
                ptrbuf p = bf__spec_ptr_index("/metrics", i);
                int k = bf__spec_get_enum(c, json_array_get(r[R_METRICS], i), p.s, names, BF_METRIC_COUNT);
                if (k >= 0) k = bf_metric_parse(names[k]);
                if (k < 0) continue;
                if (first_at[k] >= 0)
                    bf__spec_problem(c, p.s, "'%s' is already listed at /metrics/%d", names[k], first_at[k]);
                else
                    first_at[k] = (int)i;
                s->metrics |= 1u << k;
            }
        }
    }

    /* critical */
    s->critical_metric = -1;
    if (r[R_CRITICAL] && !json_is_object(r[R_CRITICAL])) {
        bf__spec_wrong_type(c, "/critical", "an object {\"metric\": ..., \"delta\": ...}", r[R_CRITICAL]);
    } else if (r[R_CRITICAL]) {
        json_t *cr[2];
        const char *names[BF_METRIC_COUNT];
        for (int i = 0; i < BF_METRIC_COUNT; i++) names[i] = bf_metric_name((bf_metric_id)i);
        bf__spec_take_fields(c, r[R_CRITICAL], "/critical", &critical_fs, cr);
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

    /* stop */
    s->stop_confidence = 0.95;
    if (r[R_STOP] && !json_is_object(r[R_STOP])) {
        bf__spec_wrong_type(c, "/stop", "an object {\"margin\": ..., \"confidence\": ...}", r[R_STOP]);
    } else if (r[R_STOP] && is_list) {
        bf__spec_problem(c, "/stop", "not used with an explicit fault list (every listed fault runs)");
    } else if (r[R_STOP] && is_ber) {
        bf__spec_problem(c, "/stop", "not used with model 'ber' (a sweep runs every rate x repeats)");
    } else if (r[R_STOP]) {
        json_t *st[2];
        bf__spec_take_fields(c, r[R_STOP], "/stop", &stop_fs, st);
        if (!st[0]) {
            bf__spec_problem(c, "/stop/margin", "required: the interval half-width at which to stop, "
                                       "in (0, 0.5)");
        } else if (bf__spec_get_number(c, st[0], "/stop/margin", &d)) {
            if (d > 0 && d < 0.5) s->stop_margin = d;
            else bf__spec_problem(c, "/stop/margin", "must be in (0, 0.5), got %s", bf__spec_describe(st[0]).s);
        }
        if (st[1] && bf__spec_get_number(c, st[1], "/stop/confidence", &d)) {
            if (d > 0.5 && d < 1) s->stop_confidence = d;
            else bf__spec_problem(c, "/stop/confidence", "must be in (0.5, 1), got %s", bf__spec_describe(st[1]).s);
        }
    }

    if (r[R_BATCH]) bf__spec_get_int(c, r[R_BATCH], "/batch", 1, MAX_BATCH, "", &s->batch);
    if (r[R_MITIGATIONS] && r[R_STOP])
        bf__spec_problem(c, "/stop", "not used with mitigations: every configuration runs every trial, so that they "
                            "compare on the same faults");
    if (r[R_MITIGATIONS]) bf__spec_mitigations(c, r[R_MITIGATIONS], s, &fi);
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
    ctx c = {problems, 0, false};
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
