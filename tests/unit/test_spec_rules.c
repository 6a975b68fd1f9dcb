/* The spec's rules (bitflip/spec_rules.h), one row each: a valid spec
 * changed to break that rule alone must be reported once, by that rule, at
 * its field, with its message and status. Every rule of the table must have
 * a row here (a rule added without one fails `every_rule_has_a_row`).
 * Then what the rows cannot show: a document-only rule is silent for a C
 * struct, an invalid field silences the rules that read it, a field is
 * blamed once, and bf_campaign_create reports the first broken rule as
 * "field: message". The api's test (tests/api/test_spec.c, rules_table)
 * shows the same rules through JSON, at their JSON Pointers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/errmap.h"
#include "bitflip/spec_rules.h"
#include "campaign_check.h"

/* Weights, single-bit flips, 10 trials, fp32: breaks no rule. */
static bf_campaign_spec base(void)
{
    bf_campaign_spec s = {0};
    s.trials = 10;
    s.bits = 1;
    s.repeats = 1;
    s.critical_metric = -1;
    return s;
}

typedef struct seen {
    int n;
    char rule[64], field[64], message[400];
    bf_status status;
} seen;

static void keep(void *user, const bf_spec_rule_problem *p)
{
    seen *s = user;
    if (s->n++ > 0) return;
    snprintf(s->rule, sizeof s->rule, "%s", p->rule);
    snprintf(s->field, sizeof s->field, "%s", p->field);
    snprintf(s->message, sizeof s->message, "%s", p->message);
    s->status = p->status;
}

static double rates_bad[] = {0.5, 1.5};
static double rates_two[] = {0.1, 0.2};
static char map_path[] = "chip.bfmap";
static bf_errmap fake_map;    /* its rows and cols are not read by the rules */

#define DOC(field) (f->document = 1, f->stated |= BF_SPEC_BIT(BF_SPEC_##field))
#define MUT(name, ...)                                                          \
    static void name(bf_campaign_spec *s, bf_spec_facts *f)                     \
    {                                                                           \
        (void)s, (void)f;                                                       \
        __VA_ARGS__;                                                            \
    }

MUT(m_target, s->target = (bf_target)4)
MUT(m_persistence, s->persistence = (bf_persistence)-1)
MUT(m_repr, s->repr = (bf_repr)BF_REPR_COUNT)
MUT(m_model, s->model_kind = (bf_fault_model)9)
MUT(m_sampling, s->sampling = (bf_sampling)6)
MUT(m_batch, s->batch = -2)
MUT(m_critical, s->critical_metric = BF_METRIC_COUNT)
MUT(m_margin, s->stop_margin = 1)
MUT(m_confidence, s->stop_margin = 0.1; s->stop_confidence = 1.5)
MUT(m_transient, s->persistence = BF_PERSIST_TRANSIENT)
MUT(m_tensors_list, DOC(TENSORS); s->sampling = BF_SAMPLE_LIST)
MUT(m_tensors_kv, DOC(TENSORS); s->target = BF_TARGET_KV_CACHE; s->persistence = BF_PERSIST_TRANSIENT)
MUT(m_kv_target, DOC(KV); s->target = BF_TARGET_ACTIVATIONS)
MUT(m_kv_kinds, s->target = BF_TARGET_KV_CACHE; s->kv.kinds = 4)
MUT(m_bits_models, DOC(BITS); s->model_kind = BF_FAULT_RANDOM_VALUE)
MUT(m_bits_list, DOC(BITS); s->sampling = BF_SAMPLE_LIST)
MUT(m_pos_random, DOC(POSITIONS); s->model_kind = BF_FAULT_RANDOM_VALUE; s->positions[0] = 3; s->n_positions = 1)
MUT(m_pos_profiled, s->model_kind = BF_FAULT_PROFILED; s->errmap = &fake_map; s->positions[0] = 3; s->n_positions = 1)
MUT(m_pos_list, DOC(POSITIONS); s->sampling = BF_SAMPLE_LIST; s->positions[0] = 3; s->n_positions = 1)
MUT(m_burst_models, DOC(BURST); s->model_kind = BF_FAULT_RANDOM_VALUE)
MUT(m_burst_list, DOC(BURST); s->sampling = BF_SAMPLE_LIST)
MUT(m_bits_positions, s->bits = 3; s->positions[0] = 4; s->positions[1] = 9; s->n_positions = 2)
MUT(m_burst_two, f->document = 1; s->burst = 1)
MUT(m_burst_fits, s->burst = 1; s->bits = 3; s->n_positions = 4; s->positions[0] = 5; s->positions[1] = 1;
    s->positions[2] = 4; s->positions[3] = 2)
MUT(m_bw_weights, s->burst = BF_BURST_WORD; s->bits = 4; s->target = BF_TARGET_ACTIVATIONS)
MUT(m_bw_repr, s->burst = BF_BURST_WORD; s->bits = 4; s->repr = BF_REPR_INT6)
MUT(m_bw_positions, s->burst = BF_BURST_WORD; s->bits = 4; s->positions[0] = 3; s->n_positions = 1)
MUT(m_bw_bits, s->burst = BF_BURST_WORD; s->bits = 65)
MUT(m_words_models, s->words = 2; s->model_kind = BF_FAULT_RANDOM_VALUE)
MUT(m_words_range, s->words = 65)
MUT(m_words_burst, s->words = 2; s->burst = 1; s->bits = 2)
MUT(m_words_bit, s->words = 2; s->bits = 2)
MUT(m_words_weights, s->words = 2; s->target = BF_TARGET_INPUTS)
MUT(m_words_repr, s->words = 3; s->repr = BF_REPR_UINT3)
MUT(m_mbu_uniform, s->words = 3; s->sampling = BF_SAMPLE_ADAPTIVE)
MUT(m_rate, DOC(RATE))
MUT(m_rates, DOC(RATES); s->model_kind = BF_FAULT_STUCK_AT_1)
MUT(m_repeats, DOC(REPEATS))
MUT(m_map_only, DOC(ERROR_MAP); s->model_kind = BF_FAULT_STUCK_AT_0)
MUT(m_needs_map, s->model_kind = BF_FAULT_PROFILED)
MUT(m_map_loaded, s->model_kind = BF_FAULT_PROFILED; s->error_map = map_path)
MUT(m_prof_weights, s->model_kind = BF_FAULT_PROFILED; s->errmap = &fake_map; s->target = BF_TARGET_INPUTS)
MUT(m_pc_fixed, s->per_channel = 1; s->repr = BF_REPR_BF16)
MUT(m_pc_weights, s->per_channel = 1; s->repr = BF_REPR_INT8; s->target = BF_TARGET_ACTIVATIONS)
MUT(m_wmax_fixed, s->w_max = 0.5)
MUT(m_wmax_weights, s->w_max = 0.5; s->repr = BF_REPR_INT8; s->target = BF_TARGET_INPUTS)
MUT(m_wmax_positive, s->w_max = -0.25; s->repr = BF_REPR_INT4)
MUT(m_group_range, s->group_size = -3; s->repr = BF_REPR_INT4)
MUT(m_group_fixed, s->group_size = 32; s->repr = BF_REPR_BF16)
MUT(m_group_weights, s->group_size = 32; s->repr = BF_REPR_INT8; s->target = BF_TARGET_ACTIVATIONS)
MUT(m_group_channel, s->group_size = 32; s->repr = BF_REPR_INT4; s->per_channel = 1)
MUT(m_scales_groups, s->fault_scales = 1; s->repr = BF_REPR_INT4)
MUT(m_scales_models, s->fault_scales = 1; s->group_size = 64; s->repr = BF_REPR_INT4; s->n_mitigations = 1)
MUT(m_fixed_weights, s->repr = BF_REPR_UINT4; s->target = BF_TARGET_ACTIVATIONS)
MUT(m_zero_points, DOC(ZERO_POINTS); s->target = BF_TARGET_ACTIVATIONS)
MUT(m_ber_rates, s->model_kind = BF_FAULT_BER)
MUT(m_ber_probability, s->model_kind = BF_FAULT_BER; s->rates = rates_bad; s->n_rates = 2)
MUT(m_sweep_limit, f->document = 1; s->model_kind = BF_FAULT_BER; s->rates = rates_two; s->n_rates = 2;
    s->repeats = 600000000)
MUT(m_ber_count, s->model_kind = BF_FAULT_BER; s->rates = rates_two; s->n_rates = 2; s->repeats = 5000000000000000LL)
MUT(m_list_chosen, f->document = 1; s->sampling = BF_SAMPLE_LIST; s->model_kind = BF_FAULT_RANDOM_VALUE)
MUT(m_ber_uniform, s->model_kind = BF_FAULT_BER; s->rates = rates_two; s->n_rates = 2; s->sampling = BF_SAMPLE_PER_TENSOR)
MUT(m_prof_uniform, s->model_kind = BF_FAULT_PROFILED; s->errmap = &fake_map; s->sampling = BF_SAMPLE_PER_BIT)
MUT(m_per_bit, s->model_kind = BF_FAULT_RANDOM_VALUE; s->sampling = BF_SAMPLE_PER_BIT)
MUT(m_trials_list, DOC(TRIALS); s->sampling = BF_SAMPLE_LIST)
MUT(m_trials_ber, DOC(TRIALS); s->model_kind = BF_FAULT_BER; s->rates = rates_two; s->n_rates = 2)
MUT(m_trials_prof, DOC(TRIALS); s->model_kind = BF_FAULT_PROFILED; s->error_map = map_path)
MUT(m_trials_needed, s->trials = 0)
MUT(m_gen_range, s->gen_new_tokens = 1025)
MUT(m_gen_inputs, s->gen_new_tokens = 4; s->target = BF_TARGET_INPUTS)
MUT(m_gen_mit, s->gen_new_tokens = 4; s->n_mitigations = 1)
MUT(m_gen_metrics, s->metrics = 1u << BF_METRIC_EDIT_DISTANCE)
MUT(m_gen_critical, s->critical_metric = BF_METRIC_GENERATION_MATCH; s->critical_delta = 0.5)

/* fault groups: one extra group on activations, valid as made */
static char *any_tensor[] = {"*"};
static bf_fault_group groups2[BF_FAULT_GROUPS_MAX];
static void one_group(bf_campaign_spec *s, size_t n)
{
    for (size_t i = 0; i < BF_FAULT_GROUPS_MAX; i++)
        groups2[i] = (bf_fault_group){.target = BF_TARGET_ACTIVATIONS, .tensors = any_tensor, .n_tensors = 1, .bits = 1};
    s->groups = groups2;
    s->n_groups = n;
}
MUT(m_groups_count, one_group(s, BF_FAULT_GROUPS_MAX))
MUT(m_groups_base, one_group(s, 1); s->target = BF_TARGET_INPUTS)
MUT(m_groups_target, one_group(s, 2); groups2[1].target = BF_TARGET_WEIGHTS)
MUT(m_groups_model, one_group(s, 1); groups2[0].model_kind = BF_FAULT_PROFILED)
MUT(m_groups_bits, one_group(s, 1); groups2[0].positions[0] = 32; groups2[0].n_positions = 1)
MUT(m_groups_uniform, one_group(s, 1); s->sampling = BF_SAMPLE_PER_TENSOR)
static bf_mitigation sbp_mit[1] = {{.name = "sbp", .sbp = {.enabled = 1}}};   /* every mitigation runs with groups */
MUT(m_groups_mit, one_group(s, 1); groups2[0].model_kind = BF_FAULT_RANDOM_VALUE; s->mitigations = sbp_mit; s->n_mitigations = 1)
MUT(m_groups_gen, one_group(s, 1); s->gen_new_tokens = 4)
MUT(m_groups_stop, one_group(s, 1); s->stop_margin = 0.1; s->stop_bit_margin = 0.1)
MUT(m_stop_list, DOC(STOP); s->sampling = BF_SAMPLE_LIST)
MUT(m_stop_ber, DOC(STOP); s->model_kind = BF_FAULT_BER; s->rates = rates_two; s->n_rates = 2)
MUT(m_stop_mit, DOC(STOP); f->stated |= BF_SPEC_BIT(BF_SPEC_MITIGATIONS))
MUT(m_tmargin, s->stop_margin = 0.1; s->stop_tensor_margin = -1)
MUT(m_bmargin, s->stop_margin = 0.1; s->stop_bit_margin = 2)
MUT(m_margins_need, s->stop_tensor_margin = 0.1)
MUT(m_strata_bits, s->sampling = BF_SAMPLE_ADAPTIVE; s->model_kind = BF_FAULT_RANDOM_VALUE)
MUT(m_exh_single, s->sampling = BF_SAMPLE_EXHAUSTIVE; s->bits = 2)
MUT(m_exh_perm, s->sampling = BF_SAMPLE_EXHAUSTIVE; s->target = BF_TARGET_ACTIVATIONS; s->persistence = BF_PERSIST_TRANSIENT)
MUT(m_bit_margin_bits, s->stop_margin = 0.1; s->stop_bit_margin = 0.1; s->model_kind = BF_FAULT_RANDOM_VALUE)
MUT(m_trials_exh, DOC(TRIALS); s->sampling = BF_SAMPLE_EXHAUSTIVE)
MUT(m_stop_exh, s->stop_margin = 0.1; s->sampling = BF_SAMPLE_EXHAUSTIVE)

typedef struct row {
    const char *rule;
    void (*breaks)(bf_campaign_spec *s, bf_spec_facts *f);
    const char *field, *message;
    bf_status status;
} row;

static const row ROWS[] = {
    {"target-known", m_target, "faults.target", "unknown target 4", BF_EINVAL},
    {"persistence-known", m_persistence, "faults.persistence", "unknown persistence -1", BF_EINVAL},
    {"representation-known", m_repr, "faults.representation", "unknown representation 17", BF_EINVAL},
    {"model-known", m_model, "faults.model", "unknown fault model 9", BF_EINVAL},
    {"sampling-known", m_sampling, "sampling", "unknown sampling 6", BF_EINVAL},
    {"batch-not-negative", m_batch, "batch", "must be positive (or 0 for the default), got -2", BF_EINVAL},
    {"critical-metric-known", m_critical, "critical.metric", "unknown critical metric 18", BF_EINVAL},
    {"stop-margin-range", m_margin, "stop.margin", "must be in [0, 1), got 1", BF_EINVAL},
    {"stop-confidence-range", m_confidence, "stop.confidence", "must be in (0, 1), got 1.5", BF_EINVAL},
    {"stop-tensor-margin-range", m_tmargin, "stop.per_tensor_margin", "must be in [0, 1), got -1", BF_EINVAL},
    {"stop-bit-margin-range", m_bmargin, "stop.per_bit_margin", "must be in [0, 1), got 2", BF_EINVAL},
    {"stop-margins-need-margin", m_margins_need, "stop.margin",
     "required with per_tensor_margin or per_bit_margin: the overall rates' half-width", BF_EINVAL},
    {"transient-not-weights", m_transient, "faults.persistence",
     "'transient' applies only to targets 'activations', 'inputs' and 'kv_cache' (a weight fault is a memory error: 'permanent')",
     BF_EINVAL},
    {"tensors-not-with-list", m_tensors_list, "faults.tensors",
     "not used with an explicit fault list (each entry of /sampling/list names its tensor)", BF_EINVAL},
    {"tensors-not-kv-cache", m_tensors_kv, "faults.tensors",
     "not used with target 'kv_cache' (faults.kv chooses the layers, kinds, heads and positions)", BF_EINVAL},
    {"kv-kv-cache-only", m_kv_target, "faults.kv",
     "applies only to target 'kv_cache' (the layers, kinds, heads and positions of the KV cache's entries)", BF_EINVAL},
    {"kv-kinds-known", m_kv_kinds, "faults.kv.kinds", "unknown kinds 4 (a bit each: 1 keys, 2 values)", BF_EINVAL},
    {"bits-chosen-models", m_bits_models, "faults.bits",
     "applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1', not 'random_value'", BF_EINVAL},
    {"bits-not-with-list", m_bits_list, "faults.bits", "not used with an explicit fault list (each entry flips one bit)",
     BF_EINVAL},
    {"positions-not-random-value", m_pos_random, "faults.positions",
     "does not apply to model 'random_value' (it replaces every bit)", BF_EINVAL},
    {"positions-not-profiled", m_pos_profiled, "faults.positions",
     "does not apply to model 'profiled' (the map covers every stored bit)", BF_EINVAL},
    {"positions-not-with-list", m_pos_list, "faults.positions",
     "not used with an explicit fault list (each entry gives its bit)", BF_EINVAL},
    {"burst-chosen-models", m_burst_models, "faults.burst",
     "applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1', not 'random_value'", BF_EINVAL},
    {"burst-not-with-list", m_burst_list, "faults.burst", "not used with an explicit fault list (each entry flips one bit)",
     BF_EINVAL},
    {"bits-within-positions", m_bits_positions, "faults.bits", "must be at most 2, the number of allowed positions, got 3",
     BF_ERANGE},
    {"burst-two-bits", m_burst_two, "faults.burst", "needs bits >= 2 (a burst is that many adjacent bits), bits is 1",
     BF_EINVAL},
    /* positions unsorted: 1, 2 and 4, 5 are runs of two */
    {"burst-fits-positions", m_burst_fits, "faults.bits",
     "a burst of 3 adjacent bits needs 3 consecutive allowed positions; the longest run in /faults/positions is 2",
     BF_EINVAL},
    {"burst-word-weights", m_bw_weights, "faults.burst",
     "'word' applies only to target 'weights' (a burst inside a 64-bit word of a tensor's storage)", BF_EINVAL},
    {"burst-word-repr", m_bw_repr, "faults.burst",
     "needs a representation whose width divides 64 (fp32, fp16, bf16, int8, uint8, int4, uint4, int2, uint2), so "
     "that a 64-bit word holds whole values; 'int6' is 6 bits", BF_EINVAL},
    {"burst-word-positions", m_bw_positions, "faults.positions",
     "does not apply with burst 'word' (the burst may start at any bit of its 64-bit word)", BF_EINVAL},
    {"burst-word-bits", m_bw_bits, "faults.bits", "must be at most 64 with burst 'word' (the bits of one 64-bit word), got 65",
     BF_ERANGE},
    {"words-chosen-models", m_words_models, "faults.words",
     "applies only to models 'bitflip', 'stuck_at_0', 'stuck_at_1' and 'ber', not 'random_value'", BF_EINVAL},
    {"words-range", m_words_range, "faults.words",
     "must be 2..64 (the neighbouring 64-bit words a column upset strikes), got 65", BF_ERANGE},
    {"words-not-burst", m_words_burst, "faults.words",
     "and burst are two multi-bit upsets: give one (words: the same bit of neighbouring words; burst: adjacent bits)",
     BF_EINVAL},
    {"words-one-bit", m_words_bit, "faults.words",
     "a column upset strikes one bit, the same in each word: bits must be 1, got 2", BF_EINVAL},
    {"words-weights", m_words_weights, "faults.words",
     "applies only to target 'weights' (neighbouring 64-bit words of a tensor's storage)", BF_EINVAL},
    {"words-repr", m_words_repr, "faults.words",
     "needs a representation whose width divides 64 (fp32, fp16, bf16, int8, uint8, int4, uint4, int2, uint2), so "
     "that a 64-bit word holds whole values; 'uint3' is 3 bits", BF_EINVAL},
    {"mbu-uniform", m_mbu_uniform, "sampling",
     "must be 'uniform' with a multi-bit upset in 64-bit words (faults.words): its population is (word, bit) pairs, "
     "not (tensor, bit position) strata or listed bits", BF_EINVAL},
    {"rate-ber-only", m_rate, "faults.rate", "applies only to model 'ber', not 'bitflip'", BF_EINVAL},
    {"rates-ber-only", m_rates, "faults.rates", "applies only to model 'ber', not 'stuck_at_1'", BF_EINVAL},
    {"repeats-ber-profiled", m_repeats, "faults.repeats", "applies only to models 'ber' and 'profiled', not 'bitflip'",
     BF_EINVAL},
    {"error-map-profiled-only", m_map_only, "faults.error_map", "applies only to model 'profiled', not 'stuck_at_0'",
     BF_EINVAL},
    {"profiled-needs-map", m_needs_map, "faults.error_map",
     "required for model 'profiled': the path of a chip's error map (a .bfmap file; docs/CAMPAIGNS.md, Profiled error "
     "maps)", BF_EINVAL},
    {"profiled-map-loaded", m_map_loaded, "faults.error_map",
     "the error map 'chip.bfmap' is not loaded: load it with bf_errmap_load_file before creating the campaign",
     BF_EINVAL},
    {"profiled-weights", m_prof_weights, "faults.target",
     "model 'profiled' lays a memory's error map over the weights: it takes target 'weights' only", BF_EINVAL},
    {"per-channel-fixed-point", m_pc_fixed, "faults.per_channel",
     "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'bf16'", BF_EINVAL},
    {"per-channel-weights", m_pc_weights, "faults.per_channel",
     "applies only to target 'weights' (a scale per slice along a weight's axis 0)", BF_EINVAL},
    {"w-max-fixed-point", m_wmax_fixed, "faults.w_max",
     "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'fp32'", BF_EINVAL},
    {"w-max-weights", m_wmax_weights, "faults.w_max",
     "applies only to target 'weights' (the clipped range they are quantized in)", BF_EINVAL},
    {"w-max-positive", m_wmax_positive, "faults.w_max",
     "must be a positive number (the weights' range is [-w_max, w_max]), got -0.25", BF_EINVAL},
    {"group-size-range", m_group_range, "faults.group_size",
     "must be 1..1048576 (weights per scale along the input dimension; GPTQ and AWQ use 32, 64 or 128), got -3",
     BF_ERANGE},
    {"group-size-fixed-point", m_group_fixed, "faults.group_size",
     "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'bf16'", BF_EINVAL},
    {"group-size-weights", m_group_weights, "faults.group_size",
     "applies only to target 'weights' (a scale per group of a weight's input dimension)", BF_EINVAL},
    {"group-size-not-per-channel", m_group_channel, "faults.group_size",
     "and per_channel are two scale layouts: give one (group_size: a scale per group of the input dimension; "
     "per_channel: one per output channel)", BF_EINVAL},
    {"fault-scales-groups", m_scales_groups, "faults.fault_scales",
     "applies only with group_size (the per-group scales it puts the faults in)", BF_EINVAL},
    {"fault-scales-models", m_scales_models, "faults.fault_scales",
     "does not apply with mitigations (they protect the stored weights, not the scales)", BF_EINVAL},
    {"fixed-point-weights", m_fixed_weights, "faults.representation",
     "'uint4' applies only to target 'weights'; activations and inputs take fp32, fp16, bf16 or int8", BF_EINVAL},
    {"zero-points-weights", m_zero_points, "faults.zero_points",
     "applies only to target 'weights' (a quantized model's stored zero points)", BF_EINVAL},
    {"ber-needs-rates", m_ber_rates, "faults.rate",
     "required for model 'ber': the probability that each bit flips (or 'rates' for a sweep)", BF_EINVAL},
    {"ber-rates-probabilities", m_ber_probability, "faults.rates.1", "must be a probability in [0, 1], got 1.5",
     BF_ERANGE},
    {"ber-sweep-limit", m_sweep_limit, "faults.repeats",
     "a sweep of 2 rates x 600000000 repeats is 1200000000 trials; the limit is 1000000000", BF_ERANGE},
    {"ber-trials-count", m_ber_count, "faults.repeats",
     "a sweep of 2 rates x 5000000000000000 repeats is too many trials", BF_ERANGE},
    {"list-needs-chosen-bits", m_list_chosen, "sampling",
     "an explicit list flips the listed bits: it needs faults.model 'bitflip', 'stuck_at_0' or 'stuck_at_1', not "
     "'random_value'", BF_EINVAL},
    {"ber-uniform", m_ber_uniform, "sampling",
     "must be 'uniform' with model 'ber' (every bit of the selected tensors may flip)", BF_EINVAL},
    {"profiled-uniform", m_prof_uniform, "sampling",
     "must be 'uniform' with model 'profiled' (the map covers every bit of the selected tensors)", BF_EINVAL},
    {"per-bit-needs-bits", m_per_bit, "sampling",
     "'per_bit' needs a model that touches chosen bits ('bitflip', 'stuck_at_0', 'stuck_at_1'), not 'random_value'",
     BF_EINVAL},
    {"strata-need-bits", m_strata_bits, "sampling",
     "'adaptive' strata are (tensor, bit position) cells: it needs model 'bitflip', 'stuck_at_0' or 'stuck_at_1', not "
     "'random_value'", BF_EINVAL},
    {"exhaustive-single-faults", m_exh_single, "sampling",
     "'exhaustive' enumerates single-bit faults (or bursts): 2 scattered bits per fault have too many combinations; "
     "use bits 1, a burst, or sampling 'adaptive'", BF_EINVAL},
    {"exhaustive-permanent", m_exh_perm, "sampling",
     "'exhaustive' takes permanent faults: a transient fault's population also spans the eval set's samples; use "
     "sampling 'adaptive' or 'uniform'", BF_EINVAL},
    {"per-bit-margin-needs-bits", m_bit_margin_bits, "stop.per_bit_margin",
     "needs a model that touches chosen bits ('bitflip', 'stuck_at_0', 'stuck_at_1'), not 'random_value'", BF_EINVAL},
    {"trials-not-with-exhaustive", m_trials_exh, "trials",
     "not used with sampling 'exhaustive': it runs every candidate fault once (bitflip plan counts them)", BF_EINVAL},
    {"stop-not-with-exhaustive", m_stop_exh, "stop",
     "not used with sampling 'exhaustive': it runs every fault and reports the exact rates", BF_EINVAL},
    {"trials-not-with-list", m_trials_list, "trials",
     "not used with an explicit fault list: each entry of /sampling/list is one trial", BF_EINVAL},
    {"trials-not-with-ber", m_trials_ber, "trials", "not used with model 'ber': a sweep runs len(rates) x repeats trials",
     BF_EINVAL},
    {"trials-not-with-profiled", m_trials_prof, "trials",
     "not used with model 'profiled': it runs 'repeats' trials, one per offset", BF_EINVAL},
    {"trials-needed", m_trials_needed, "trials",
     "required: how many faults to inject, 1..1000000000 (not needed for model 'ber' or an explicit list)", BF_EINVAL},
    {"stop-not-with-list", m_stop_list, "stop", "not used with an explicit fault list (every listed fault runs)",
     BF_EINVAL},
    {"stop-not-with-ber", m_stop_ber, "stop", "not used with model 'ber' (a sweep runs every rate x repeats)", BF_EINVAL},
    {"stop-not-with-mitigations", m_stop_mit, "stop",
     "not used with mitigations: every configuration runs every trial, so that they compare on the same faults",
     BF_EINVAL},
    {"generate-range", m_gen_range, "generate.new_tokens", "must be 1..1024 new tokens, got 1025", BF_ERANGE},
    {"generate-not-inputs", m_gen_inputs, "generate.new_tokens",
     "generation takes weight and activation faults, not target 'inputs' (an eval set's inputs are the prompts the "
     "decoding starts from; a campaign strikes value faults in the first step only); a KV-cache entry during "
     "generation: bitflip generate --kv-flip (docs/LM.md)",
     BF_EINVAL},
    {"generate-not-mitigations", m_gen_mit, "generate.new_tokens",
     "generation runs the model as given, without protections: not used with mitigations", BF_EINVAL},
    {"generation-metrics-need-generate", m_gen_metrics, "metrics",
     "generation_match, first_divergence and edit_distance need \"generate\": {\"new_tokens\": M} (greedy "
     "decoding of M tokens per prompt in every trial)", BF_EINVAL},
    {"critical-generation-needs-generate", m_gen_critical, "critical.metric",
     "'generation_match' needs \"generate\": {\"new_tokens\": M}", BF_EINVAL},
    {"groups-count", m_groups_count, "faults", "5 fault groups; at most 4 (group 0 on weights, then groups on weights, then on activations)", BF_ERANGE},
    {"groups-base", m_groups_base, "faults.0.target",
     "must be 'weights' with fault groups, not 'inputs' (group 0's representation makes the golden model; the other "
     "groups strike activations)", BF_EINVAL},
    {"groups-target", m_groups_target, "faults.2.target",
     "the weights groups come before the activations groups (a trial writes the weights, then computes): move this "
     "group up to just after group 0", BF_EINVAL},
    {"groups-model", m_groups_model, "faults.1.model",
     "a fault group takes bitflip, stuck_at_0, stuck_at_1, random_value or ber, not 'profiled'", BF_EINVAL},
    {"groups-bits", m_groups_bits, "faults.1.positions", "bit 32 does not exist in fp32 (bits 0..31)", BF_EINVAL},
    {"groups-uniform", m_groups_uniform, "sampling",
     "must be 'uniform' with fault groups (faults is a list of 2): the stratified samplings and 'list' enumerate one "
     "group's (tensor, bit) strata or faults, and another group has none", BF_EINVAL},
    {"groups-sbp-random", m_groups_mit, "faults.1.model",
     "'random_value' on activations does not combine with mitigation 'sbp': the value a fault replaces is not known "
     "until the pass runs, nor its protected bits", BF_EINVAL},
    {"groups-not-generate", m_groups_gen, "generate.new_tokens",
     "does not combine with fault groups (a trial's decoding takes one group's faults)", BF_EINVAL},
    {"groups-stop-margins", m_groups_stop, "stop",
     "the per-tensor and per-bit margins do not apply with fault groups (a trial's faults lie in several tensors and "
     "bits); give only 'margin'", BF_EINVAL},
};

#define N_ROWS (sizeof ROWS / sizeof ROWS[0])

static void base_breaks_nothing(void **state)
{
    (void)state;
    bf_campaign_spec s = base();
    bf_spec_facts doc = {.document = 1};
    assert_int_equal(bf_spec_check(&s, NULL, NULL, NULL), 0);
    assert_int_equal(bf_spec_check(&s, &doc, NULL, NULL), 0);
}

static void each_rule_alone(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS; i++) {
        const row *r = &ROWS[i];
        bf_campaign_spec s = base();
        bf_spec_facts f = {0};
        seen got = {0};
        r->breaks(&s, &f);
        size_t n = bf_spec_check(&s, &f, keep, &got);
        if (n != 1 || strcmp(got.rule, r->rule) != 0)
            fail_msg("%s: %zu problems, the first from '%s' (%s: %s)", r->rule, n, got.rule, got.field, got.message);
        assert_string_equal(got.field, r->field);
        assert_string_equal(got.message, r->message);
        assert_int_equal(got.status, r->status);
    }
}

static void every_rule_has_a_row(void **state)
{
    (void)state;
    assert_true(bf_spec_rule_count() > 0);
    assert_null(bf_spec_rule_name(bf_spec_rule_count()));
    for (size_t i = 0; i < bf_spec_rule_count(); i++) {
        size_t k = 0;
        while (k < N_ROWS && strcmp(ROWS[k].rule, bf_spec_rule_name(i)) != 0) k++;
        if (k == N_ROWS) fail_msg("rule '%s' has no row in this test", bf_spec_rule_name(i));
    }
    assert_int_equal(N_ROWS, bf_spec_rule_count());
}

/* A C struct states nothing, so "does not apply" rules are a document's;
 * and a document's map is loaded after it is parsed. */
static void scopes(void **state)
{
    (void)state;
    bf_campaign_spec s = base();
    s.model_kind = BF_FAULT_BER;                 /* bits 1 and a list, as bf_campaign_create has always taken */
    s.rates = rates_two;
    s.n_rates = 2;
    s.trials = 0;
    bf_spec_facts f = {.stated = BF_SPEC_BIT(BF_SPEC_BITS) | BF_SPEC_BIT(BF_SPEC_TRIALS)};
    assert_int_equal(bf_spec_check(&s, &f, NULL, NULL), 0);
    f.document = 1;
    assert_int_equal(bf_spec_check(&s, &f, NULL, NULL), 2);   /* bits-chosen-models, trials-not-with-ber */

    s = base();
    s.model_kind = BF_FAULT_PROFILED;
    s.error_map = map_path;
    s.trials = 0;
    assert_int_equal(bf_spec_check(&s, &(bf_spec_facts){.document = 1}, NULL, NULL), 0);
    assert_int_equal(bf_spec_check(&s, NULL, NULL, NULL), 1);  /* profiled-map-loaded */
}

/* One mistake, one problem: an invalid field silences the rules reading
 * it, and a field is blamed by its first broken rule only. */
static void one_mistake_one_problem(void **state)
{
    (void)state;
    bf_campaign_spec s = base();
    seen got = {0};
    s.persistence = BF_PERSIST_TRANSIENT;        /* breaks transient-not-weights ... */
    bf_spec_facts f = {.invalid = BF_SPEC_BIT(BF_SPEC_TARGET)};
    assert_int_equal(bf_spec_check(&s, &f, NULL, NULL), 0);   /* ... unless the target was invalid */

    s = base();
    s.target = BF_TARGET_ACTIVATIONS;
    s.per_channel = 1;                           /* fp32 and activations: both per_channel rules */
    assert_int_equal(bf_spec_check(&s, NULL, keep, &got), 1);
    assert_string_equal(got.rule, "per-channel-fixed-point");

    s = base();
    s.target = (bf_target)9;                     /* unknown: no rule reads it after target-known */
    s.persistence = BF_PERSIST_TRANSIENT;
    s.per_channel = 1;
    s.repr = BF_REPR_INT8;
    memset(&got, 0, sizeof got);
    assert_int_equal(bf_spec_check(&s, NULL, keep, &got), 1);
    assert_string_equal(got.rule, "target-known");
}

/* bf_campaign_create refuses with the first broken rule, "field: message". */
static void campaign_create_reports_the_first(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_campaign *c = NULL;
    bf_error err = {0};
    tc_load(BF_FIXTURES "/stutz/linear", &m, &ds);
    bf_campaign_spec s = base();
    s.w_max = 0.5;
    s.repr = BF_REPR_INT8;
    s.target = BF_TARGET_ACTIVATIONS;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_EINVAL);
    assert_null(c);
    assert_string_equal(err.msg, "faults.w_max: applies only to target 'weights' (the clipped range they are quantized in)");
    s = base();
    s.model_kind = BF_FAULT_BER;
    s.rates = rates_bad;
    s.n_rates = 2;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_ERANGE);
    assert_string_equal(err.msg, "faults.rates.1: must be a probability in [0, 1], got 1.5");
    s = base();
    c = tc_make(m, ds, &s);                      /* and the base spec is a campaign */
    assert_int_equal(bf_campaign_num_trials(c), 10);
    bf_campaign_free(c);
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* An explicit list's 'sample' against the persistence, the rule both the
 * api (per entry, with its pointer) and bf_campaign_create apply: the four
 * combinations by hand. */
static void list_sample_rule(void **state)
{
    (void)state;
    assert_null(bf_spec_list_sample_rule(BF_PERSIST_TRANSIENT, 1));
    assert_null(bf_spec_list_sample_rule(BF_PERSIST_PERMANENT, 0));
    const char *a = bf_spec_list_sample_rule(BF_PERSIST_PERMANENT, 1);
    const char *b = bf_spec_list_sample_rule(BF_PERSIST_TRANSIENT, 0);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, "applies only to 'transient' faults (a permanent fault hits every sample)");
    assert_string_equal(b, "required for 'transient' faults: the eval-set sample the fault hits");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(base_breaks_nothing),
        cmocka_unit_test(each_rule_alone),
        cmocka_unit_test(every_rule_has_a_row),
        cmocka_unit_test(scopes),
        cmocka_unit_test(one_mistake_one_problem),
        cmocka_unit_test(campaign_create_reports_the_first),
        cmocka_unit_test(list_sample_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
