/* The rules of a campaign spec (bitflip/spec_rules.h), in tables run in
 * order: this file's, the multi-bit upsets' (spec_rules_mbu.c) and the
 * fault groups' (spec_rules_groups.c).
 *
 * Each rule blames one field and reads that field and the others it names;
 * a rule is skipped when a field it reads is invalid (reported by the caller,
 * or blamed by an earlier rule): one mistake gives one problem, not a
 * cascade. Rules for a document only are its "does not apply" ones: a C
 * struct cannot say a field was left out, and bf_campaign_create ignores
 * such fields as it always has. */
#include "bitflip/spec_rules.h"

#include <float.h>
#include <stdbool.h>
#include <stdio.h>

#include "bitflip/generate.h"
#include "bitflip/repr.h"

#include "spec_rules_impl.h"

static const char *const PATH[BF_SPEC_FIELD_COUNT] = {
    [BF_SPEC_TARGET] = "faults.target", [BF_SPEC_TENSORS] = "faults.tensors", [BF_SPEC_MODEL] = "faults.model",
    [BF_SPEC_BITS] = "faults.bits", [BF_SPEC_POSITIONS] = "faults.positions", [BF_SPEC_BURST] = "faults.burst",
    [BF_SPEC_RATE] = "faults.rate", [BF_SPEC_RATES] = "faults.rates", [BF_SPEC_REPEATS] = "faults.repeats",
    [BF_SPEC_REPR] = "faults.representation", [BF_SPEC_PER_CHANNEL] = "faults.per_channel",
    [BF_SPEC_PERSISTENCE] = "faults.persistence", [BF_SPEC_ZERO_POINTS] = "faults.zero_points",
    [BF_SPEC_W_MAX] = "faults.w_max", [BF_SPEC_ERROR_MAP] = "faults.error_map", [BF_SPEC_SAMPLING] = "sampling",
    [BF_SPEC_TRIALS] = "trials", [BF_SPEC_STOP] = "stop", [BF_SPEC_MITIGATIONS] = "mitigations",
    [BF_SPEC_BATCH] = "batch", [BF_SPEC_CRITICAL] = "critical", [BF_SPEC_GROUP_SIZE] = "faults.group_size",
    [BF_SPEC_FAULT_SCALES] = "faults.fault_scales", [BF_SPEC_KV] = "faults.kv", [BF_SPEC_GENERATE] = "generate.new_tokens",
    [BF_SPEC_METRICS] = "metrics", [BF_SPEC_WORDS] = "faults.words", [BF_SPEC_GROUPS] = "faults",
};

/* --- values a C struct can hold and a document cannot give */

RULE(target_known)
{
    UNUSED;
    return ((int)s->target < 0 || s->target > BF_TARGET_KV_CACHE) && SAY("unknown target %d", (int)s->target);
}

RULE(persistence_known)
{
    UNUSED;
    return ((int)s->persistence < 0 || s->persistence > BF_PERSIST_TRANSIENT) &&
           SAY("unknown persistence %d", (int)s->persistence);
}

RULE(repr_known)
{
    UNUSED;
    return bf_repr_bits(s->repr) == 0 && SAY("unknown representation %d", (int)s->repr);
}

RULE(model_known)
{
    UNUSED;
    return ((int)s->model_kind < 0 || s->model_kind > BF_FAULT_PROFILED) &&
           SAY("unknown fault model %d", (int)s->model_kind);
}

RULE(sampling_known)
{
    UNUSED;
    return ((int)s->sampling < 0 || s->sampling > BF_SAMPLE_ADAPTIVE) && SAY("unknown sampling %d", (int)s->sampling);
}

RULE(batch_not_negative)
{
    UNUSED;
    return s->batch < 0 && SAY("must be positive (or 0 for the default), got %lld", (long long)s->batch);
}

RULE(critical_metric_known)
{
    (void)f;
    snprintf(field, FIELD_PATH_MAX, "critical.metric");
    return (s->critical_metric >= BF_METRIC_COUNT || s->critical_metric < -1) &&
           SAY("unknown critical metric %d", s->critical_metric);
}

RULE(stop_margin_range)
{
    (void)f;
    snprintf(field, FIELD_PATH_MAX, "stop.margin");
    return !(s->stop_margin >= 0 && s->stop_margin < 1) && SAY("must be in [0, 1), got %g", s->stop_margin);
}

RULE(stop_tensor_margin_range)
{
    (void)f;
    snprintf(field, FIELD_PATH_MAX, "stop.per_tensor_margin");
    return !(s->stop_tensor_margin >= 0 && s->stop_tensor_margin < 1) && SAY("must be in [0, 1), got %g", s->stop_tensor_margin);
}

RULE(stop_bit_margin_range)
{
    (void)f;
    snprintf(field, FIELD_PATH_MAX, "stop.per_bit_margin");
    return !(s->stop_bit_margin >= 0 && s->stop_bit_margin < 1) && SAY("must be in [0, 1), got %g", s->stop_bit_margin);
}

RULE(stop_margins_need_margin)
{
    (void)f;
    snprintf(field, FIELD_PATH_MAX, "stop.margin");
    return s->stop_margin == 0 && (s->stop_tensor_margin > 0 || s->stop_bit_margin > 0) &&
           SAY("required with per_tensor_margin or per_bit_margin: the overall rates' half-width");
}

RULE(stop_confidence_range)
{
    (void)f;
    snprintf(field, FIELD_PATH_MAX, "stop.confidence");
    return s->stop_margin > 0 && s->stop_confidence != 0 && !(s->stop_confidence > 0 && s->stop_confidence < 1) &&
           SAY("must be in (0, 1), got %g", s->stop_confidence);
}

/* --- target, persistence, representation */

RULE(transient_not_weights)
{
    UNUSED;
    return s->persistence == BF_PERSIST_TRANSIENT && on_weights(s) &&
           SAY("'transient' applies only to targets 'activations', 'inputs' and 'kv_cache' (a weight fault is a "
               "memory error: 'permanent')");
}

static bool has_kv(const bf_campaign_spec *s, const bf_spec_facts *f)
{
    return stated(f, BF_SPEC_KV) || s->kv.n_layers || s->kv.n_heads || s->kv.n_positions || s->kv.kinds;
}

RULE(kv_kv_cache_only)
{
    UNUSED;
    return has_kv(s, f) && s->target != BF_TARGET_KV_CACHE &&
           SAY("applies only to target 'kv_cache' (the layers, kinds, heads and positions of the KV cache's entries)");
}

RULE(kv_kinds_known)
{
    (void)f;
    snprintf(field, FIELD_PATH_MAX, "faults.kv.kinds");
    return s->kv.kinds > 3 && SAY("unknown kinds %u (a bit each: 1 keys, 2 values)", s->kv.kinds);
}

RULE(tensors_not_kv_cache)
{
    UNUSED;
    return stated(f, BF_SPEC_TENSORS) && s->target == BF_TARGET_KV_CACHE &&
           SAY("not used with target 'kv_cache' (faults.kv chooses the layers, kinds, heads and positions)");
}

RULE(per_channel_fixed_point)
{
    UNUSED;
    return (s->per_channel || stated(f, BF_SPEC_PER_CHANNEL)) && !bf_repr_is_fixed(s->repr) &&
           SAY("applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not '%s'",
               bf_repr_name(s->repr));
}

RULE(per_channel_weights)
{
    UNUSED;
    return (s->per_channel || stated(f, BF_SPEC_PER_CHANNEL)) && !on_weights(s) &&
           SAY("applies only to target 'weights' (a scale per slice along a weight's axis 0)");
}

RULE(w_max_fixed_point)
{
    UNUSED;
    return (s->w_max != 0 || stated(f, BF_SPEC_W_MAX)) && !bf_repr_is_fixed(s->repr) &&
           SAY("applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not '%s'",
               bf_repr_name(s->repr));
}

RULE(w_max_weights)
{
    UNUSED;
    return (s->w_max != 0 || stated(f, BF_SPEC_W_MAX)) && !on_weights(s) &&
           SAY("applies only to target 'weights' (the clipped range they are quantized in)");
}

RULE(w_max_positive)
{
    UNUSED;
    return (s->w_max != 0 || stated(f, BF_SPEC_W_MAX)) && !(s->w_max > 0 && s->w_max <= FLT_MAX) &&
           SAY("must be a positive number (the weights' range is [-w_max, w_max]), got %g", s->w_max);
}

static bool has_groups(const bf_campaign_spec *s, const bf_spec_facts *f)
{
    return s->group_size != 0 || stated(f, BF_SPEC_GROUP_SIZE);
}

RULE(group_size_range)
{
    UNUSED;
    return has_groups(s, f) && !(s->group_size >= 1 && s->group_size <= BF_GROUP_SIZE_MAX) &&
           SAY("must be 1..%lld (weights per scale along the input dimension; GPTQ and AWQ use 32, 64 or 128), got %lld",
               (long long)BF_GROUP_SIZE_MAX, (long long)s->group_size);
}

RULE(group_size_fixed_point)
{
    UNUSED;
    return has_groups(s, f) && !bf_repr_is_fixed(s->repr) &&
           SAY("applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not '%s'",
               bf_repr_name(s->repr));
}

RULE(group_size_weights)
{
    UNUSED;
    return has_groups(s, f) && !on_weights(s) &&
           SAY("applies only to target 'weights' (a scale per group of a weight's input dimension)");
}

RULE(group_size_not_per_channel)
{
    UNUSED;
    return has_groups(s, f) && s->per_channel &&
           SAY("and per_channel are two scale layouts: give one (group_size: a scale per group of the input "
               "dimension; per_channel: one per output channel)");
}

RULE(fault_scales_groups)
{
    UNUSED;
    return (s->fault_scales || stated(f, BF_SPEC_FAULT_SCALES)) && s->group_size <= 0 &&
           SAY("applies only with group_size (the per-group scales it puts the faults in)");
}

RULE(fault_scales_models)
{
    UNUSED;
    return s->fault_scales && (is_prof(s) || s->n_mitigations > 0) &&
           SAY("%s", is_prof(s) ? "does not apply to model 'profiled' (its map lies over the stored weights)"
                                : "does not apply with mitigations (they protect the stored weights, not the scales)");
}

/* Stutz et al.'s fixed point is how weights are stored */
RULE(fixed_point_weights)
{
    UNUSED;
    return !on_weights(s) && bf_repr_is_fixed(s->repr) && s->repr != BF_REPR_INT8 &&
           SAY("'%s' applies only to target 'weights'; activations and inputs take fp32, fp16, bf16 or int8",
               bf_repr_name(s->repr));
}

RULE(zero_points_weights)
{
    UNUSED;
    return stated(f, BF_SPEC_ZERO_POINTS) && !on_weights(s) &&
           SAY("applies only to target 'weights' (a quantized model's stored zero points)");
}

RULE(tensors_not_with_list)
{
    UNUSED;
    return stated(f, BF_SPEC_TENSORS) && is_list(s) &&
           SAY("not used with an explicit fault list (each entry of /sampling/list names its tensor)");
}

/* --- bits, positions, burst */

RULE(bits_chosen_models)
{
    UNUSED;
    return stated(f, BF_SPEC_BITS) && !chosen_bits(s) && !(is_ber(s) && s->burst == BF_BURST_WORD) &&
           SAY("applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1', not '%s'", model_name(s));
}

RULE(bits_not_with_list)
{
    UNUSED;
    return stated(f, BF_SPEC_BITS) && is_list(s) &&
           SAY("not used with an explicit fault list (each entry flips one bit)");
}

/* bits against the representation is the document's range, or (with the
 * model's stored integers) bf_campaign_create's */
RULE(bits_within_positions)
{
    UNUSED;
    return chosen_bits(s) && s->burst != BF_BURST_WORD && s->n_positions > 0 && s->bits > s->n_positions &&
           SAY("must be at most %d, the number of allowed positions, got %d", s->n_positions, s->bits);
}

/* The longest run of adjacent allowed positions; -1 if a position is not
 * a bit of any representation (bf_campaign_create reports it). */
static int longest_run(const bf_campaign_spec *s)
{
    unsigned char on[64] = {0};
    if (s->n_positions < 0 || s->n_positions > 64) return -1;
    for (int i = 0; i < s->n_positions; i++) {
        if (s->positions[i] < 0 || s->positions[i] >= 64) return -1;
        on[s->positions[i]] = 1;
    }
    int run = 0, longest = 0;
    for (int b = 0; b < 64; b++) {
        run = on[b] ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    return longest;
}

RULE(burst_fits_positions)
{
    UNUSED;
    if (!chosen_bits(s) || !s->burst || s->burst == BF_BURST_WORD || s->bits < 2 || s->n_positions == 0) return false;
    int longest = longest_run(s);
    return longest >= 0 && longest < s->bits &&
           SAY("a burst of %d adjacent bits needs %d consecutive allowed positions; the longest run in "
               "/faults/positions is %d", s->bits, s->bits, longest);
}

RULE(positions_not_random_value)
{
    UNUSED;
    return stated(f, BF_SPEC_POSITIONS) && s->model_kind == BF_FAULT_RANDOM_VALUE &&
           SAY("does not apply to model 'random_value' (it replaces every bit)");
}

RULE(positions_not_profiled)
{
    UNUSED;
    return (s->n_positions != 0 || stated(f, BF_SPEC_POSITIONS)) && is_prof(s) &&
           SAY("does not apply to model 'profiled' (the map covers every stored bit)");
}

RULE(positions_not_with_list)
{
    UNUSED;
    return stated(f, BF_SPEC_POSITIONS) && is_list(s) &&
           SAY("not used with an explicit fault list (each entry gives its bit)");
}

RULE(burst_chosen_models)
{
    UNUSED;
    return stated(f, BF_SPEC_BURST) && !chosen_bits(s) && !(is_ber(s) && s->burst == BF_BURST_WORD) &&
           SAY("applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1', not '%s'", model_name(s));
}

RULE(burst_not_with_list)
{
    UNUSED;
    return stated(f, BF_SPEC_BURST) && is_list(s) &&
           SAY("not used with an explicit fault list (each entry flips one bit)");
}

RULE(burst_two_bits)
{
    UNUSED;
    return s->burst && s->bits < 2 && SAY("needs bits >= 2 (a burst is that many adjacent bits), bits is %d", s->bits);
}

/* --- BER and profiled maps */

RULE(rate_ber_only)
{
    UNUSED;
    return stated(f, BF_SPEC_RATE) && !is_ber(s) && SAY("applies only to model 'ber', not '%s'", model_name(s));
}

RULE(rates_ber_only)
{
    UNUSED;
    return stated(f, BF_SPEC_RATES) && !is_ber(s) && SAY("applies only to model 'ber', not '%s'", model_name(s));
}

RULE(ber_needs_rates)
{
    UNUSED;
    return is_ber(s) && (s->n_rates == 0 || !s->rates) && !stated(f, BF_SPEC_RATE) && !stated(f, BF_SPEC_RATES) &&
           SAY("required for model 'ber': the probability that each bit flips (or 'rates' for a sweep)");
}

RULE(ber_rates_probabilities)
{
    (void)f;
    for (size_t i = 0; is_ber(s) && s->rates && i < s->n_rates; i++)
        if (!(s->rates[i] >= 0 && s->rates[i] <= 1)) {
            snprintf(field, FIELD_PATH_MAX, "faults.rates.%zu", i);
            return SAY("must be a probability in [0, 1], got %g", s->rates[i]);
        }
    return false;
}

RULE(repeats_ber_profiled)
{
    UNUSED;
    return stated(f, BF_SPEC_REPEATS) && !is_ber(s) && !is_prof(s) &&
           SAY("applies only to models 'ber' and 'profiled', not '%s'", model_name(s));
}

RULE(ber_sweep_limit)
{
    UNUSED;
    int64_t repeats = s->repeats > 0 ? s->repeats : 1;
    double t = (double)s->n_rates * (double)repeats;
    return is_ber(s) && t > (double)BF_SPEC_MAX_TRIALS &&
           SAY("a sweep of %zu rates x %lld repeats is %.0f trials; the limit is %lld", s->n_rates,
               (long long)repeats, t, BF_SPEC_MAX_TRIALS);
}

/* rates x repeats trials must count in an int64 */
RULE(ber_trials_count)
{
    UNUSED;
    int64_t repeats = s->repeats > 0 ? s->repeats : 1;
    return is_ber(s) && (double)repeats * (double)s->n_rates > 9e15 &&
           SAY("a sweep of %zu rates x %lld repeats is too many trials", s->n_rates, (long long)repeats);
}

RULE(error_map_profiled_only)
{
    UNUSED;
    return stated(f, BF_SPEC_ERROR_MAP) && !is_prof(s) &&
           SAY("applies only to model 'profiled', not '%s'", model_name(s));
}

RULE(profiled_needs_map)
{
    UNUSED;
    return is_prof(s) && !s->error_map && !s->errmap && !stated(f, BF_SPEC_ERROR_MAP) &&
           SAY("required for model 'profiled': the path of a chip's error map (a .bfmap file; docs/CAMPAIGNS.md, "
               "Profiled error maps)");
}

RULE(profiled_map_loaded)
{
    UNUSED;
    return is_prof(s) && s->error_map && !s->errmap &&
           SAY("the error map '%s' is not loaded: load it with bf_errmap_load_file before creating the campaign",
               s->error_map);
}

RULE(profiled_weights)
{
    UNUSED;
    return is_prof(s) && !on_weights(s) &&
           SAY("model 'profiled' lays a memory's error map over the weights: it takes target 'weights' only");
}

/* --- sampling, trials, stop */

RULE(list_needs_chosen_bits)
{
    UNUSED;
    return is_list(s) && !chosen_bits(s) &&
           SAY("an explicit list flips the listed bits: it needs faults.model 'bitflip', 'stuck_at_0' or "
               "'stuck_at_1', not '%s'", model_name(s));
}

RULE(ber_uniform)
{
    UNUSED;
    return is_ber(s) && s->sampling != BF_SAMPLE_UNIFORM &&
           SAY("must be 'uniform' with model 'ber' (every bit of the selected tensors may flip)");
}

RULE(profiled_uniform)
{
    UNUSED;
    return is_prof(s) && s->sampling != BF_SAMPLE_UNIFORM &&
           SAY("must be 'uniform' with model 'profiled' (the map covers every bit of the selected tensors)");
}

RULE(per_bit_needs_bits)
{
    UNUSED;
    return s->sampling == BF_SAMPLE_PER_BIT && s->model_kind == BF_FAULT_RANDOM_VALUE &&
           SAY("'per_bit' needs a model that touches chosen bits ('bitflip', 'stuck_at_0', 'stuck_at_1'), not "
               "'random_value'");
}

static bool enumerated(const bf_campaign_spec *s) { return s->sampling == BF_SAMPLE_EXHAUSTIVE; }

RULE(strata_need_bits)
{
    UNUSED;
    return (s->sampling == BF_SAMPLE_EXHAUSTIVE || s->sampling == BF_SAMPLE_ADAPTIVE) && !chosen_bits(s) &&
           SAY("'%s' strata are (tensor, bit position) cells: it needs model 'bitflip', 'stuck_at_0' or "
               "'stuck_at_1', not '%s'", s->sampling == BF_SAMPLE_EXHAUSTIVE ? "exhaustive" : "adaptive", model_name(s));
}

RULE(exhaustive_single_faults)
{
    UNUSED;
    return enumerated(s) && s->bits > 1 && !s->burst &&
           SAY("'exhaustive' enumerates single-bit faults (or bursts): %d scattered bits per fault have too many "
               "combinations; use bits 1, a burst, or sampling 'adaptive'", s->bits);
}

RULE(exhaustive_permanent)
{
    UNUSED;
    return enumerated(s) && s->persistence == BF_PERSIST_TRANSIENT &&
           SAY("'exhaustive' takes permanent faults: a transient fault's population also spans the eval set's "
               "samples; use sampling 'adaptive' or 'uniform'");
}

RULE(per_bit_margin_needs_bits)
{
    (void)f;
    snprintf(field, FIELD_PATH_MAX, "stop.per_bit_margin");
    return s->stop_bit_margin > 0 && !chosen_bits(s) &&
           SAY("needs a model that touches chosen bits ('bitflip', 'stuck_at_0', 'stuck_at_1'), not '%s'", model_name(s));
}

RULE(trials_not_with_exhaustive)
{
    UNUSED;
    return stated(f, BF_SPEC_TRIALS) && enumerated(s) &&
           SAY("not used with sampling 'exhaustive': it runs every candidate fault once (bitflip plan counts them)");
}

RULE(stop_not_with_exhaustive)
{
    UNUSED;
    return (s->stop_margin > 0 || stated(f, BF_SPEC_STOP)) && enumerated(s) &&
           SAY("not used with sampling 'exhaustive': it runs every fault and reports the exact rates");
}

RULE(trials_not_with_list)
{
    UNUSED;
    return stated(f, BF_SPEC_TRIALS) && is_list(s) &&
           SAY("not used with an explicit fault list: each entry of /sampling/list is one trial");
}

RULE(trials_not_with_ber)
{
    UNUSED;
    return stated(f, BF_SPEC_TRIALS) && is_ber(s) &&
           SAY("not used with model 'ber': a sweep runs len(rates) x repeats trials");
}

RULE(trials_not_with_profiled)
{
    UNUSED;
    return stated(f, BF_SPEC_TRIALS) && is_prof(s) &&
           SAY("not used with model 'profiled': it runs 'repeats' trials, one per offset");
}

RULE(trials_needed)
{
    UNUSED;
    if (is_list(s) || is_ber(s) || is_prof(s) || enumerated(s) || s->trials >= 1) return false;
    if (s->trials < 0) return SAY("must be >= 1, got %lld", (long long)s->trials);
    return SAY("required: how many faults to inject, 1..%lld (not needed for model 'ber' or an explicit list)",
               BF_SPEC_MAX_TRIALS);
}

RULE(stop_not_with_list)
{
    UNUSED;
    return stated(f, BF_SPEC_STOP) && is_list(s) &&
           SAY("not used with an explicit fault list (every listed fault runs)");
}

RULE(stop_not_with_ber)
{
    UNUSED;
    return stated(f, BF_SPEC_STOP) && is_ber(s) &&
           SAY("not used with model 'ber' (a sweep runs every rate x repeats)");
}

RULE(stop_not_with_mitigations)
{
    UNUSED, (void)s;
    return stated(f, BF_SPEC_STOP) && stated(f, BF_SPEC_MITIGATIONS) &&
           SAY("not used with mitigations: every configuration runs every trial, so that they compare on the same "
               "faults");
}

/* --- generation (gen_new_tokens) */

static const unsigned GEN_METRICS = 1u << BF_METRIC_GENERATION_MATCH | 1u << BF_METRIC_FIRST_DIVERGENCE |
                                    1u << BF_METRIC_EDIT_DISTANCE;

RULE(generate_range)
{
    UNUSED;
    return (s->gen_new_tokens < 0 || s->gen_new_tokens > BF_GEN_MAX_NEW_TOKENS) &&
           SAY("must be 1..%d new tokens, got %lld", BF_GEN_MAX_NEW_TOKENS, (long long)s->gen_new_tokens);
}

RULE(generate_not_inputs)
{
    UNUSED;
    /* kv_cache too: a campaign strikes value faults in step 0 only, and a
     * cache entry must persist through every later step, which only the
     * generator's own --kv-flip models */
    return s->gen_new_tokens > 0 && (s->target == BF_TARGET_INPUTS || s->target == BF_TARGET_KV_CACHE) &&
           SAY("generation takes weight and activation faults, not target '%s' (an eval set's inputs are the "
               "prompts the decoding starts from; a campaign strikes value faults in the first step only); a "
               "KV-cache entry during generation: bitflip generate --kv-flip (docs/LM.md)",
               s->target == BF_TARGET_INPUTS ? "inputs" : "kv_cache");
}

RULE(generate_not_mitigations)
{
    UNUSED;
    return s->gen_new_tokens > 0 && s->n_mitigations > 0 &&
           SAY("generation runs the model as given, without protections: not used with mitigations");
}

RULE(generation_metrics_need_generate)
{
    UNUSED;
    return s->gen_new_tokens == 0 && (s->metrics & GEN_METRICS) &&
           SAY("generation_match, first_divergence and edit_distance need \"generate\": {\"new_tokens\": M} "
               "(greedy decoding of M tokens per prompt in every trial)");
}

RULE(critical_generation_needs_generate)
{
    (void)f;
    snprintf(field, FIELD_PATH_MAX, "critical.metric");
    return s->gen_new_tokens == 0 && s->critical_metric >= 0 && s->critical_metric < BF_METRIC_COUNT &&
           (GEN_METRICS >> s->critical_metric & 1) &&
           SAY("'%s' needs \"generate\": {\"new_tokens\": M}", bf_metric_name((bf_metric_id)s->critical_metric));
}

/* In order: the values a struct alone can get wrong first (the rules after
 * them read those fields), then a field's rules in the order a reader asks
 * them ("does this field apply?" before "does its value fit?"). */
static const rule RULES_A[] = {
    {"target-known", BF_SPEC_TARGET, ANY, 0, BF_EINVAL, target_known},
    {"persistence-known", BF_SPEC_PERSISTENCE, ANY, 0, BF_EINVAL, persistence_known},
    {"representation-known", BF_SPEC_REPR, ANY, 0, BF_EINVAL, repr_known},
    {"model-known", BF_SPEC_MODEL, ANY, 0, BF_EINVAL, model_known},
    {"sampling-known", BF_SPEC_SAMPLING, ANY, 0, BF_EINVAL, sampling_known},
    {"batch-not-negative", BF_SPEC_BATCH, ANY, 0, BF_EINVAL, batch_not_negative},
    {"critical-metric-known", BF_SPEC_CRITICAL, ANY, 0, BF_EINVAL, critical_metric_known},
    {"stop-margin-range", BF_SPEC_STOP, ANY, 0, BF_EINVAL, stop_margin_range},
    {"stop-confidence-range", BF_SPEC_STOP, ANY, 0, BF_EINVAL, stop_confidence_range},
    {"stop-tensor-margin-range", BF_SPEC_STOP, ANY, 0, BF_EINVAL, stop_tensor_margin_range},
    {"stop-bit-margin-range", BF_SPEC_STOP, ANY, 0, BF_EINVAL, stop_bit_margin_range},
    {"stop-margins-need-margin", BF_SPEC_STOP, ANY, 0, BF_EINVAL, stop_margins_need_margin},

    {"transient-not-weights", BF_SPEC_PERSISTENCE, ANY, B(TARGET), BF_EINVAL, transient_not_weights},
    {"tensors-not-with-list", BF_SPEC_TENSORS, DOCUMENT, B(SAMPLING), BF_EINVAL, tensors_not_with_list},
    {"tensors-not-kv-cache", BF_SPEC_TENSORS, DOCUMENT, B(TARGET), BF_EINVAL, tensors_not_kv_cache},
    {"kv-kv-cache-only", BF_SPEC_KV, ANY, B(TARGET), BF_EINVAL, kv_kv_cache_only},
    {"kv-kinds-known", BF_SPEC_KV, ANY, 0, BF_EINVAL, kv_kinds_known},
    {"bits-chosen-models", BF_SPEC_BITS, DOCUMENT, B(MODEL), BF_EINVAL, bits_chosen_models},
    {"bits-not-with-list", BF_SPEC_BITS, DOCUMENT, B(SAMPLING), BF_EINVAL, bits_not_with_list},
    {"positions-not-random-value", BF_SPEC_POSITIONS, DOCUMENT, B(MODEL), BF_EINVAL, positions_not_random_value},
    {"positions-not-profiled", BF_SPEC_POSITIONS, ANY, B(MODEL), BF_EINVAL, positions_not_profiled},
    {"positions-not-with-list", BF_SPEC_POSITIONS, DOCUMENT, B(SAMPLING), BF_EINVAL, positions_not_with_list},
    {"burst-chosen-models", BF_SPEC_BURST, DOCUMENT, B(MODEL), BF_EINVAL, burst_chosen_models},
    {"burst-not-with-list", BF_SPEC_BURST, DOCUMENT, B(SAMPLING), BF_EINVAL, burst_not_with_list},
    {"bits-within-positions", BF_SPEC_BITS, ANY, B(MODEL) | B(POSITIONS), BF_ERANGE, bits_within_positions},
    {"burst-two-bits", BF_SPEC_BURST, DOCUMENT, B(BITS) | B(POSITIONS) | B(REPR), BF_EINVAL, burst_two_bits},
    {"burst-fits-positions", BF_SPEC_BITS, ANY, B(MODEL) | B(BURST) | B(POSITIONS) | B(REPR), BF_EINVAL,
     burst_fits_positions},
};

/* ... then the multi-bit upsets' (spec_rules_mbu.c), then these. */
static const rule RULES_B[] = {
    {"rate-ber-only", BF_SPEC_RATE, DOCUMENT, B(MODEL), BF_EINVAL, rate_ber_only},
    {"rates-ber-only", BF_SPEC_RATES, DOCUMENT, B(MODEL), BF_EINVAL, rates_ber_only},
    {"repeats-ber-profiled", BF_SPEC_REPEATS, DOCUMENT, B(MODEL), BF_EINVAL, repeats_ber_profiled},
    {"error-map-profiled-only", BF_SPEC_ERROR_MAP, DOCUMENT, B(MODEL), BF_EINVAL, error_map_profiled_only},
    {"profiled-needs-map", BF_SPEC_ERROR_MAP, ANY, B(MODEL), BF_EINVAL, profiled_needs_map},
    {"profiled-map-loaded", BF_SPEC_ERROR_MAP, STRUCT, B(MODEL), BF_EINVAL, profiled_map_loaded},
    {"profiled-weights", BF_SPEC_TARGET, ANY, B(MODEL), BF_EINVAL, profiled_weights},
    {"per-channel-fixed-point", BF_SPEC_PER_CHANNEL, ANY, B(REPR), BF_EINVAL, per_channel_fixed_point},
    {"per-channel-weights", BF_SPEC_PER_CHANNEL, ANY, B(TARGET), BF_EINVAL, per_channel_weights},
    {"w-max-fixed-point", BF_SPEC_W_MAX, ANY, B(REPR), BF_EINVAL, w_max_fixed_point},
    {"w-max-weights", BF_SPEC_W_MAX, ANY, B(TARGET), BF_EINVAL, w_max_weights},
    {"w-max-positive", BF_SPEC_W_MAX, ANY, 0, BF_EINVAL, w_max_positive},
    {"group-size-range", BF_SPEC_GROUP_SIZE, ANY, 0, BF_ERANGE, group_size_range},
    {"group-size-fixed-point", BF_SPEC_GROUP_SIZE, ANY, B(REPR), BF_EINVAL, group_size_fixed_point},
    {"group-size-weights", BF_SPEC_GROUP_SIZE, ANY, B(TARGET), BF_EINVAL, group_size_weights},
    {"group-size-not-per-channel", BF_SPEC_GROUP_SIZE, ANY, B(PER_CHANNEL), BF_EINVAL, group_size_not_per_channel},
    {"fault-scales-groups", BF_SPEC_FAULT_SCALES, ANY, B(GROUP_SIZE), BF_EINVAL, fault_scales_groups},
    {"fault-scales-models", BF_SPEC_FAULT_SCALES, ANY, B(MODEL) | B(MITIGATIONS), BF_EINVAL, fault_scales_models},
    {"fixed-point-weights", BF_SPEC_REPR, ANY, B(TARGET), BF_EINVAL, fixed_point_weights},
    {"zero-points-weights", BF_SPEC_ZERO_POINTS, DOCUMENT, B(TARGET), BF_EINVAL, zero_points_weights},
    {"ber-needs-rates", BF_SPEC_RATE, ANY, B(MODEL) | B(RATES), BF_EINVAL, ber_needs_rates},
    {"ber-rates-probabilities", BF_SPEC_RATES, ANY, B(MODEL), BF_ERANGE, ber_rates_probabilities},
    {"ber-sweep-limit", BF_SPEC_REPEATS, DOCUMENT, B(MODEL) | B(RATES), BF_ERANGE, ber_sweep_limit},
    {"ber-trials-count", BF_SPEC_REPEATS, ANY, B(MODEL) | B(RATES), BF_ERANGE, ber_trials_count},

    {"list-needs-chosen-bits", BF_SPEC_SAMPLING, DOCUMENT, B(MODEL), BF_EINVAL, list_needs_chosen_bits},
    {"ber-uniform", BF_SPEC_SAMPLING, ANY, B(MODEL), BF_EINVAL, ber_uniform},
    {"profiled-uniform", BF_SPEC_SAMPLING, ANY, B(MODEL), BF_EINVAL, profiled_uniform},
    {"mbu-uniform", BF_SPEC_SAMPLING, ANY, B(MODEL) | B(BURST) | B(WORDS), BF_EINVAL, bf__rule_mbu_uniform},
    {"per-bit-needs-bits", BF_SPEC_SAMPLING, ANY, B(MODEL), BF_EINVAL, per_bit_needs_bits},
    {"strata-need-bits", BF_SPEC_SAMPLING, ANY, B(MODEL), BF_EINVAL, strata_need_bits},
    {"exhaustive-single-faults", BF_SPEC_SAMPLING, ANY, B(BITS) | B(BURST), BF_EINVAL, exhaustive_single_faults},
    {"exhaustive-permanent", BF_SPEC_SAMPLING, ANY, B(PERSISTENCE), BF_EINVAL, exhaustive_permanent},
    {"per-bit-margin-needs-bits", BF_SPEC_STOP, ANY, B(MODEL), BF_EINVAL, per_bit_margin_needs_bits},
    {"trials-not-with-exhaustive", BF_SPEC_TRIALS, DOCUMENT, B(SAMPLING), BF_EINVAL, trials_not_with_exhaustive},
    {"stop-not-with-exhaustive", BF_SPEC_STOP, ANY, B(SAMPLING), BF_EINVAL, stop_not_with_exhaustive},
    {"trials-not-with-list", BF_SPEC_TRIALS, DOCUMENT, B(SAMPLING), BF_EINVAL, trials_not_with_list},
    {"trials-not-with-ber", BF_SPEC_TRIALS, DOCUMENT, B(MODEL), BF_EINVAL, trials_not_with_ber},
    {"trials-not-with-profiled", BF_SPEC_TRIALS, DOCUMENT, B(MODEL), BF_EINVAL, trials_not_with_profiled},
    {"trials-needed", BF_SPEC_TRIALS, ANY, B(MODEL) | B(SAMPLING), BF_EINVAL, trials_needed},
    {"stop-not-with-list", BF_SPEC_STOP, DOCUMENT, B(SAMPLING), BF_EINVAL, stop_not_with_list},
    {"stop-not-with-ber", BF_SPEC_STOP, DOCUMENT, B(MODEL), BF_EINVAL, stop_not_with_ber},
    {"stop-not-with-mitigations", BF_SPEC_STOP, DOCUMENT, B(MITIGATIONS), BF_EINVAL, stop_not_with_mitigations},
    {"generate-range", BF_SPEC_GENERATE, ANY, 0, BF_ERANGE, generate_range},
    {"generate-not-inputs", BF_SPEC_GENERATE, ANY, B(TARGET), BF_EINVAL, generate_not_inputs},
    {"generate-not-mitigations", BF_SPEC_GENERATE, ANY, B(MITIGATIONS), BF_EINVAL, generate_not_mitigations},
    {"generation-metrics-need-generate", BF_SPEC_METRICS, ANY, B(GENERATE), BF_EINVAL, generation_metrics_need_generate},
    {"critical-generation-needs-generate", BF_SPEC_CRITICAL, ANY, B(GENERATE), BF_EINVAL,
     critical_generation_needs_generate},
};

typedef struct segment { const rule *r; size_t n; } segment;

#define SEGMENTS(sg) \
    const segment sg[] = {{RULES_A, sizeof RULES_A / sizeof RULES_A[0]}, \
                          {bf__spec_rules_mbu, bf__spec_rules_mbu_n}, \
                          {RULES_B, sizeof RULES_B / sizeof RULES_B[0]}, \
                          {bf__spec_rules_groups, bf__spec_rules_groups_n}}

/* rule i of the tables in order, or NULL */
static const rule *rule_at(size_t i)
{
    SEGMENTS(sg);
    for (size_t k = 0; k < sizeof sg / sizeof sg[0]; k++) {
        if (i < sg[k].n) return &sg[k].r[i];
        i -= sg[k].n;
    }
    return NULL;
}

size_t bf_spec_rule_count(void)
{
    SEGMENTS(sg);
    size_t n = 0;
    for (size_t k = 0; k < sizeof sg / sizeof sg[0]; k++) n += sg[k].n;
    return n;
}

const char *bf_spec_rule_name(size_t i)
{
    const rule *r = rule_at(i);
    return r ? r->name : NULL;
}

size_t bf_spec_check(const bf_campaign_spec *spec, const bf_spec_facts *facts, bf_spec_report_fn report, void *user)
{
    static const bf_spec_facts of_struct = {0, 0, 0};
    const bf_spec_facts *f = facts ? facts : &of_struct;
    uint32_t skip = f->invalid;
    size_t n = 0, count = bf_spec_rule_count();
    for (size_t i = 0; i < count; i++) {
        const rule *r = rule_at(i);
        if (r->scope == (f->document ? STRUCT : DOCUMENT)) continue;
        if (skip & (r->reads | BF_SPEC_BIT(r->blame))) continue;
        char field[FIELD_PATH_MAX], msg[320];
        snprintf(field, sizeof field, "%s", PATH[r->blame]);
        if (!r->broken(spec, f, field, msg, sizeof msg)) continue;
        skip |= BF_SPEC_BIT(r->blame);
        n++;
        if (report) report(user, &(bf_spec_rule_problem){r->name, field, msg, r->status});
    }
    return n;
}

const char *bf_spec_list_sample_rule(bf_persistence persistence, int has_sample)
{
    if (has_sample && persistence != BF_PERSIST_TRANSIENT)
        return "applies only to 'transient' faults (a permanent fault hits every sample)";
    if (!has_sample && persistence == BF_PERSIST_TRANSIENT)
        return "required for 'transient' faults: the eval-set sample the fault hits";
    return NULL;
}
