/* test_spec: core's rules through JSON (fault groups, the rules table, kv_cache). */
#include "test_spec.h"

/* -------------------------------------------- core's rules, through JSON */

#define LIST1 "\"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0, \"bit\": 1}]}"

#define GROUPS2 "\"faults\": [{}, {\"target\": \"activations\"}], "

/* Each of core's rules (bitflip/spec_rules.h) that a document can break:
 * a spec breaking it alone, and the one problem it must give. json NULL:
 * the sweep of 1001 rates built in rules_table. */
static const struct {
    const char *rule, *json, *pointer, *message;
} RULE_ROWS[] = {
    {"transient-not-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"persistence\": \"transient\"}}",
     "/faults/persistence",
     "'transient' applies only to targets 'activations', 'inputs' and 'kv_cache' (a weight fault is a memory error: 'permanent')"},
    {"tensors-not-with-list", "{" HEAD "\"faults\": {\"tensors\": [\"*\"]}, " LIST1 "}", "/faults/tensors",
     "not used with an explicit fault list (each entry of /sampling/list names its tensor)"},
    {"tensors-not-kv-cache", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"kv_cache\", \"tensors\": [\"*\"]}}",
     "/faults/tensors", "not used with target 'kv_cache' (faults.kv chooses the layers, kinds, heads and positions)"},
    {"kv-kv-cache-only", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"activations\", \"kv\": {\"heads\": [0]}}}",
     "/faults/kv", "applies only to target 'kv_cache' (the layers, kinds, heads and positions of the KV cache's entries)"},
    {"bits-chosen-models", "{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.1, \"bits\": 2}}", "/faults/bits",
     "applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1', not 'ber'"},
    {"bits-not-with-list", "{" HEAD "\"faults\": {\"bits\": 1}, " LIST1 "}", "/faults/bits",
     "not used with an explicit fault list (each entry flips one bit)"},
    {"positions-not-random-value", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"random_value\", \"positions\": [1]}}",
     "/faults/positions", "does not apply to model 'random_value' (it replaces every bit)"},
    {"positions-not-profiled", "{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\", \"positions\": [1]}}",
     "/faults/positions", "does not apply to model 'profiled' (the map covers every stored bit)"},
    {"positions-not-with-list", "{" HEAD "\"faults\": {\"positions\": [1]}, " LIST1 "}", "/faults/positions",
     "not used with an explicit fault list (each entry gives its bit)"},
    {"burst-chosen-models", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"random_value\", \"burst\": true}}",
     "/faults/burst", "applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1', not 'random_value'"},
    {"burst-not-with-list", "{" HEAD "\"faults\": {\"burst\": false}, " LIST1 "}", "/faults/burst",
     "not used with an explicit fault list (each entry flips one bit)"},
    {"bits-within-positions", "{" HEAD "\"trials\": 1, \"faults\": {\"bits\": 3, \"positions\": [1, 2]}}",
     "/faults/bits", "must be at most 2, the number of allowed positions, got 3"},
    {"burst-two-bits", "{" HEAD "\"trials\": 1, \"faults\": {\"burst\": true}}", "/faults/burst",
     "needs bits >= 2 (a burst is that many adjacent bits), bits is 1"},
    {"burst-fits-positions", "{" HEAD "\"trials\": 1, \"faults\": {\"burst\": true, \"bits\": 3, \"positions\": [5, 1, 4, 2]}}",
     "/faults/bits",
     "a burst of 3 adjacent bits needs 3 consecutive allowed positions; the longest run in /faults/positions is 2"},
    {"burst-word-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"activations\", \"burst\": \"word\", \"bits\": 4}}",
     "/faults/burst", "'word' applies only to target 'weights' (a burst inside a 64-bit word of a tensor's storage)"},
    {"burst-word-repr", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int6\", \"burst\": \"word\", \"bits\": 4}}",
     "/faults/burst",
     "needs a representation whose width divides 64 (fp32, fp16, bf16, int8, uint8, int4, uint4, int2, uint2), so "
     "that a 64-bit word holds whole values; 'int6' is 6 bits"},
    {"burst-word-positions", "{" HEAD "\"trials\": 1, \"faults\": {\"burst\": \"word\", \"bits\": 40, \"positions\": [3]}}",
     "/faults/positions", "does not apply with burst 'word' (the burst may start at any bit of its 64-bit word)"},
    {"words-chosen-models", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"random_value\", \"words\": 2}}", "/faults/words",
     "applies only to models 'bitflip', 'stuck_at_0', 'stuck_at_1' and 'ber', not 'random_value'"},
    {"words-not-burst", "{" HEAD "\"trials\": 1, \"faults\": {\"words\": 2, \"burst\": true, \"bits\": 2}}", "/faults/words",
     "and burst are two multi-bit upsets: give one (words: the same bit of neighbouring words; burst: adjacent bits)"},
    {"words-one-bit", "{" HEAD "\"trials\": 1, \"faults\": {\"words\": 2, \"bits\": 2}}", "/faults/words",
     "a column upset strikes one bit, the same in each word: bits must be 1, got 2"},
    {"words-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"inputs\", \"words\": 2}}", "/faults/words",
     "applies only to target 'weights' (neighbouring 64-bit words of a tensor's storage)"},
    {"words-repr", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"uint3\", \"words\": 3}}", "/faults/words",
     "needs a representation whose width divides 64 (fp32, fp16, bf16, int8, uint8, int4, uint4, int2, uint2), so "
     "that a 64-bit word holds whole values; 'uint3' is 3 bits"},
    {"mbu-uniform", "{" HEAD "\"trials\": 1, \"faults\": {\"burst\": \"word\", \"bits\": 3}, \"sampling\": \"per_bit\"}",
     "/sampling",
     "must be 'uniform' with a multi-bit upset in 64-bit words (faults.burst 'word'): its population is (word, bit) "
     "pairs, not (tensor, bit position) strata or listed bits"},
    {"rate-ber-only", "{" HEAD "\"trials\": 1, \"faults\": {\"rate\": 0.1}}", "/faults/rate",
     "applies only to model 'ber', not 'bitflip'"},
    {"rates-ber-only", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"stuck_at_1\", \"rates\": [0.1]}}",
     "/faults/rates", "applies only to model 'ber', not 'stuck_at_1'"},
    {"repeats-ber-profiled", "{" HEAD "\"trials\": 1, \"faults\": {\"repeats\": 3}}", "/faults/repeats",
     "applies only to models 'ber' and 'profiled', not 'bitflip'"},
    {"error-map-profiled-only", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"stuck_at_0\", \"error_map\": \"x.bfmap\"}}",
     "/faults/error_map", "applies only to model 'profiled', not 'stuck_at_0'"},
    {"profiled-needs-map", "{" HEAD "\"faults\": {\"model\": \"profiled\"}}", "/faults/error_map",
     "required for model 'profiled': the path of a chip's error map (a .bfmap file; docs/CAMPAIGNS.md, Profiled error "
     "maps)"},
    {"profiled-weights", "{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\", \"target\": \"inputs\"}}",
     "/faults/target", "model 'profiled' lays a memory's error map over the weights: it takes target 'weights' only"},
    {"per-channel-fixed-point", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"bf16\", \"per_channel\": false}}",
     "/faults/per_channel", "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'bf16'"},
    {"per-channel-weights",
     "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int8\", \"per_channel\": true, \"target\": \"activations\"}}",
     "/faults/per_channel", "applies only to target 'weights' (a scale per slice along a weight's axis 0)"},
    {"w-max-fixed-point", "{" HEAD "\"trials\": 1, \"faults\": {\"w_max\": 0.1}}", "/faults/w_max",
     "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'fp32'"},
    {"w-max-weights",
     "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int8\", \"w_max\": 0.1, \"target\": \"inputs\"}}",
     "/faults/w_max", "applies only to target 'weights' (the clipped range they are quantized in)"},
    {"w-max-positive", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"w_max\": -0.25}}",
     "/faults/w_max", "must be a positive number (the weights' range is [-w_max, w_max]), got -0.25"},
    {"fault-scales-groups", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"fault_scales\": false}}",
     "/faults/fault_scales", "applies only with group_size (the per-group scales it puts the faults in)"},
    {"fault-scales-models",
     "{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\", \"representation\": \"int4\", "
     "\"group_size\": 32, \"fault_scales\": true}}",
     "/faults/fault_scales", "does not apply to model 'profiled' (its map lies over the stored weights)"},
    {"group-size-fixed-point", "{" HEAD "\"trials\": 1, \"faults\": {\"group_size\": 32}}", "/faults/group_size",
     "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'fp32'"},
    {"group-size-weights",
     "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int8\", \"group_size\": 64, \"target\": \"inputs\"}}",
     "/faults/group_size", "applies only to target 'weights' (a scale per group of a weight's input dimension)"},
    {"group-size-not-per-channel",
     "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"group_size\": 128, \"per_channel\": true}}",
     "/faults/group_size",
     "and per_channel are two scale layouts: give one (group_size: a scale per group of the input dimension; "
     "per_channel: one per output channel)"},
    {"fixed-point-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"uint4\", \"target\": \"activations\"}}",
     "/faults/representation",
     "'uint4' applies only to target 'weights'; activations and inputs take fp32, fp16, bf16 or int8"},
    {"zero-points-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"activations\", \"zero_points\": false}}",
     "/faults/zero_points", "applies only to target 'weights' (a quantized model's stored zero points)"},
    {"ber-needs-rates", "{" HEAD "\"faults\": {\"model\": \"ber\"}}", "/faults/rate",
     "required for model 'ber': the probability that each bit flips (or 'rates' for a sweep)"},
    {"ber-sweep-limit", NULL, "/faults/repeats",
     "a sweep of 1001 rates x 1000000 repeats is 1001000000 trials; the limit is 1000000000"},
    {"list-needs-chosen-bits", "{" HEAD "\"faults\": {\"model\": \"random_value\"}, " LIST1 "}", "/sampling",
     "an explicit list flips the listed bits: it needs faults.model 'bitflip', 'stuck_at_0' or 'stuck_at_1', not "
     "'random_value'"},
    {"ber-uniform", "{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.5}, \"sampling\": \"per_tensor\"}", "/sampling",
     "must be 'uniform' with model 'ber' (every bit of the selected tensors may flip)"},
    {"profiled-uniform", "{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\"}, \"sampling\": \"per_bit\"}",
     "/sampling", "must be 'uniform' with model 'profiled' (the map covers every bit of the selected tensors)"},
    {"per-bit-needs-bits", "{" HEAD "\"trials\": 1, \"sampling\": \"per_bit\", \"faults\": {\"model\": \"random_value\"}}",
     "/sampling",
     "'per_bit' needs a model that touches chosen bits ('bitflip', 'stuck_at_0', 'stuck_at_1'), not 'random_value'"},
    {"strata-need-bits", "{" HEAD "\"trials\": 1, \"sampling\": \"adaptive\", \"faults\": {\"model\": \"random_value\"}}",
     "/sampling", "'adaptive' strata are (tensor, bit position) cells: it needs model 'bitflip', 'stuck_at_0' or "
     "'stuck_at_1', not 'random_value'"},
    {"exhaustive-single-faults", "{" HEAD "\"sampling\": \"exhaustive\", \"faults\": {\"bits\": 2}}", "/sampling",
     "'exhaustive' enumerates single-bit faults (or bursts): 2 scattered bits per fault have too many combinations; "
     "use bits 1, a burst, or sampling 'adaptive'"},
    {"exhaustive-permanent",
     "{" HEAD "\"sampling\": \"exhaustive\", \"faults\": {\"target\": \"activations\", \"persistence\": \"transient\"}}",
     "/sampling", "'exhaustive' takes permanent faults: a transient fault's population also spans the eval set's "
     "samples; use sampling 'adaptive' or 'uniform'"},
    {"per-bit-margin-needs-bits",
     "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"random_value\"}, \"stop\": {\"margin\": 0.1, \"per_bit_margin\": 0.1}}",
     "/stop/per_bit_margin",
     "needs a model that touches chosen bits ('bitflip', 'stuck_at_0', 'stuck_at_1'), not 'random_value'"},
    {"trials-not-with-exhaustive", "{" HEADF "\"trials\": 5, \"sampling\": \"exhaustive\"}", "/trials",
     "not used with sampling 'exhaustive': it runs every candidate fault once (bitflip plan counts them)"},
    {"stop-not-with-exhaustive", "{" HEADF "\"sampling\": \"exhaustive\", \"stop\": {\"margin\": 0.1}}", "/stop",
     "not used with sampling 'exhaustive': it runs every fault and reports the exact rates"},
    {"trials-not-with-list", "{" HEADF "\"trials\": 3, " LIST1 "}", "/trials",
     "not used with an explicit fault list: each entry of /sampling/list is one trial"},
    {"trials-not-with-ber", "{" HEAD "\"trials\": 10, \"faults\": {\"model\": \"ber\", \"rate\": 0.5}}", "/trials",
     "not used with model 'ber': a sweep runs len(rates) x repeats trials"},
    {"trials-not-with-profiled", "{" HEAD "\"trials\": 4, \"faults\": {\"model\": \"profiled\", \"error_map\": \"x\"}}",
     "/trials", "not used with model 'profiled': it runs 'repeats' trials, one per offset"},
    {"trials-needed", "{" HEADF "\"seed\": 1}", "/trials",
     "required: how many faults to inject, 1..1000000000 (not needed for model 'ber' or an explicit list)"},
    {"stop-not-with-list", "{" HEADF LIST1 ", \"stop\": {\"margin\": 0.1}}", "/stop",
     "not used with an explicit fault list (every listed fault runs)"},
    {"stop-not-with-ber", "{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.5}, \"stop\": {\"margin\": 0.1}}", "/stop",
     "not used with model 'ber' (a sweep runs every rate x repeats)"},
    {"stop-not-with-mitigations", "{" HEADF "\"trials\": 1, \"stop\": {\"margin\": 0.1}, \"mitigations\": [\"clip\"]}",
     "/stop", "not used with mitigations: every configuration runs every trial, so that they compare on the same faults"},
    {"generate-not-inputs", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"inputs\"}, \"generate\": {\"new_tokens\": 4}}",
     "/generate/new_tokens",
     "generation takes weight and activation faults, not target 'inputs' (an eval set's inputs are the prompts the "
     "decoding starts from; a campaign strikes value faults in the first step only); a KV-cache entry during "
     "generation: bitflip generate --kv-flip (docs/LM.md)"},
    {"generate-not-mitigations", "{" HEADF "\"trials\": 1, \"mitigations\": [\"clip\"], \"generate\": {\"new_tokens\": 4}}",
     "/generate/new_tokens", "generation runs the model as given, without protections: not used with mitigations"},
    {"generation-metrics-need-generate", "{" HEADF "\"trials\": 1, \"metrics\": [\"perplexity\", \"edit_distance\"]}",
     "/metrics",
     "generation_match, first_divergence and edit_distance need \"generate\": {\"new_tokens\": M} (greedy decoding "
     "of M tokens per prompt in every trial)"},
    {"critical-generation-needs-generate",
     "{" HEADF "\"trials\": 1, \"critical\": {\"metric\": \"first_divergence\", \"delta\": 2}}", "/critical/metric",
     "'first_divergence' needs \"generate\": {\"new_tokens\": M}"},
    {"groups-base", "{" HEAD "\"trials\": 1, \"faults\": [{\"target\": \"activations\"}, {}]}", "/faults/0/target",
     "must be 'weights' with fault groups, not 'activations' (group 0's representation makes the golden model; the "
     "other groups strike activations)"},
    {"groups-target", "{" HEAD "\"trials\": 1, \"faults\": [{}, {}, {\"target\": \"weights\"}]}", "/faults/2/target",
     "the weights groups come before the activations groups (a trial writes the weights, then computes): move this "
     "group up to just after group 0"},
    {"groups-model", "{" HEAD "\"trials\": 1, \"faults\": [{}, {\"model\": \"profiled\"}]}", "/faults/1/model",
     "a fault group takes bitflip, stuck_at_0, stuck_at_1, random_value or ber, not 'profiled'"},
    {"groups-bits", "{" HEAD "\"trials\": 1, \"faults\": [{}, {\"bits\": 2, \"positions\": [3]}]}", "/faults/1/bits",
     "must be 1..1 (the allowed bit positions), got 2"},
    {"groups-uniform", "{" HEAD "\"trials\": 1, " GROUPS2 "\"sampling\": \"per_tensor\"}", "/sampling",
     "must be 'uniform' with fault groups (faults is a list of 2): the stratified samplings and 'list' enumerate one "
     "group's (tensor, bit) strata or faults, and another group has none"},
    {"groups-sbp-random", "{" HEAD "\"trials\": 1, \"faults\": [{}, {\"target\": \"activations\", \"model\": "
     "\"random_value\"}], \"mitigations\": [\"ecc\", \"sbp\", \"range\"]}", "/faults/1/model",
     "'random_value' on activations does not combine with mitigation 'sbp': the value a fault replaces is not known "
     "until the pass runs, nor its protected bits"},
    {"groups-not-generate", "{" HEAD "\"trials\": 1, " GROUPS2 "\"generate\": {\"new_tokens\": 4}}",
     "/generate/new_tokens", "does not combine with fault groups (a trial's decoding takes one group's faults)"},
    {"groups-stop-margins",
     "{" HEAD "\"trials\": 1, " GROUPS2 "\"stop\": {\"margin\": 0.1, \"per_tensor_margin\": 0.1}}", "/stop",
     "the per-tensor and per-bit margins do not apply with fault groups (a trial's faults lie in several tensors and "
     "bits); give only 'margin'"},
};

/* Rules no document can break: enum values and ranges the JSON fields
 * already hold to (more tightly), and the loaded map of a C struct. */
static const char *const STRUCT_ONLY_RULES[] = {
    "target-known", "persistence-known", "representation-known", "model-known", "sampling-known",
    "batch-not-negative", "critical-metric-known", "stop-margin-range", "stop-confidence-range",
    "stop-tensor-margin-range", "stop-bit-margin-range", /* a document's margins are (0, 0.5) before the rules */
    "stop-margins-need-margin",                         /* ... and its stop requires a margin */
    "profiled-map-loaded", "ber-rates-probabilities", "ber-trials-count",
    "group-size-range",   /* a document's group_size is 1..2^20 before the rules */
    "kv-kinds-known",     /* a document's kinds are 'k' and 'v' */
    "generate-range",     /* a document's new_tokens is 1..max_new_tokens before the rules */
    "burst-word-bits",    /* a document's bits are 1..64 with burst 'word' before the rules */
    "words-range",        /* a document's words are 2..64 before the rules */
    "groups-count",       /* a document's list holds at most BF_FAULT_GROUPS_MAX groups before the rules */
};

/* "faults" as a list of fault groups (docs/CAMPAIGNS.md, "Fault groups"):
 * hostile lists, each one problem naming the field; a valid one. */
void fault_groups_hostile(void **state)
{
    (void)state;
    only_problem("{" HEAD "\"trials\": 1, \"faults\": []}", "/faults", "an empty list of fault groups");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {}, {}, {}, {}]}", "/faults", "5 fault groups; at most 4");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [[{}]]}", "/faults/0", "must be an object (a fault group), got an array");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, [{}]]}", "/faults/1", "must be an object (a fault group), got an array");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, 5]}", "/faults/1", "must be an object (a fault group), got 5");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, null]}", "/faults/1", "must be an object (a fault group)");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"colour\": 1}]}", "/faults/1/colour", "unknown");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"bits\": \"two\"}]}", "/faults/1/bits", "must be an integer");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"model\": \"ber\", \"rates\": [0.1]}]}", "/faults/1/rates",
                 "does not apply here: a group after the first takes one 'rate'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"words\": 2}]}", "/faults/1/words", "does not apply here");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"kv\": {}}]}", "/faults/1/kv", "does not apply here");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"burst\": \"word\", \"bits\": 2}]}", "/faults/1/burst",
                 "'word' is group 0's to draw");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"model\": \"ber\"}]}", "/faults/1/rate",
                 "model 'ber' needs a rate in (0, 1], got 0");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"rate\": 0.5}]}", "/faults/1/rate", "applies only to model 'ber'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"rate\": 2, \"model\": \"ber\"}]}", "/faults/1/rate",
                 "must be a probability in (0, 1]");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"representation\": \"int8\"}]}", "/faults/1/representation",
                 "a fault group's activations take fp32, fp16 or bf16, not 'int8'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"target\": \"kv_cache\"}]}", "/faults/1/target",
                 "strikes 'weights' or 'activations', not 'kv_cache'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"target\": \"weights\", \"persistence\": \"transient\"}]}",
                 "/faults/1/persistence", "'transient' applies only to activations");
    /* a weights group: group 0's representation (its own when not given), before the activation groups, no ECC */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{\"representation\": \"fp16\"}, {\"target\": \"weights\", "
                 "\"representation\": \"bf16\"}]}", "/faults/1/representation",
                 "a weights group strikes the weights as group 0 stores them, 'fp16', not 'bf16'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"target\": \"activations\"}, {\"target\": \"weights\"}]}",
                 "/faults/2/target", "the weights groups come before the activations groups");
    /* every mitigation with a second weights group (they protect the model, whichever group faulted it) */
    parsed *eg = ok("{" HEAD "\"faults\": [{\"model\": \"ber\", \"rate\": 1e-6}, {\"target\": \"weights\", \"bits\": 2, "
                    "\"burst\": true}, {\"target\": \"activations\"}], \"mitigations\": [\"ecc\", \"sbp\", \"range\"]}");
    assert_int_equal(eg->spec.n_groups, 2);
    assert_int_equal(eg->spec.n_mitigations, 4);   /* "none" first */
    done(eg);
    parsed *wg = ok("{" HEAD "\"faults\": [{\"model\": \"ber\", \"rate\": 1e-6, \"representation\": \"fp16\"}, "
                    "{\"target\": \"weights\", \"bits\": 2, \"burst\": true}, {\"target\": \"activations\"}, "
                    "{\"target\": \"activations\", \"model\": \"stuck_at_1\"}], \"mitigations\": [\"clip\"]}");
    assert_int_equal(wg->spec.n_groups, 3);
    assert_int_equal(wg->spec.groups[0].target, BF_TARGET_WEIGHTS);
    assert_int_equal(wg->spec.groups[0].repr, BF_REPR_FP16);   /* group 0's */
    assert_int_equal(wg->spec.groups[1].target, BF_TARGET_ACTIVATIONS);
    assert_int_equal(wg->spec.groups[1].repr, BF_REPR_FP32);
    done(wg);
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"tensors\": []}]}", "/faults/1/tensors", "must not be empty");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"positions\": [3, 3]}]}", "/faults/1/positions/1",
                 "already listed");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"model\": \"random_value\", \"bits\": 2}]}", "/faults/1/bits",
                 "applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1'");
    /* group 0's own fields and rules, at /faults/0 */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{\"bits\": 0}, {}]}", "/faults/0/bits", "must be");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{\"rate\": 0.1}, {}]}", "/faults/0/rate", "applies only to model 'ber'");
    only_problem("{" HEAD "\"faults\": [{\"model\": \"profiled\", \"error_map\": \"x\"}, {}]}",
                 "/faults/0/model", "'profiled' does not combine with other fault groups");
    only_problem("{" HEAD "\"faults\": [{}, {}], " LIST1 "}", "/sampling", "must be 'uniform' with fault groups");
    only_problem("{" HEAD "\"faults\": [{}, {}], \"sampling\": \"exhaustive\"}", "/sampling",
                 "must be 'uniform' with fault groups");
    only_problem("{" HEAD "\"trials\": 5, \"faults\": [{}, {}], \"sampling\": \"adaptive\"}", "/sampling",
                 "must be 'uniform' with fault groups");
    only_problem("{" HEAD "\"trials\": 5, \"faults\": [{}, {}], \"sampling\": \"per_bit\"}", "/sampling",
                 "must be 'uniform' with fault groups");

    parsed *e = ok("{" HEAD "\"faults\": [{\"model\": \"ber\", \"rate\": 1e-6}, {}], \"mitigations\": [\"none\", \"ecc\"]}");
    assert_int_equal(e->spec.n_mitigations, 2);
    done(e);
    /* a valid list: group 0 a BER sweep on weights, group 1 transient flips in fp16 activations */
    parsed *p = ok("{" HEAD "\"seed\": 7, \"faults\": [{\"model\": \"ber\", \"rates\": [1e-6, 1e-5], \"repeats\": 3}, "
                   "{\"tensors\": [\"relu*\"], \"bits\": 2, \"positions\": [3, 4, 9], \"representation\": \"fp16\", "
                   "\"persistence\": \"transient\"}]}");
    assert_int_equal(p->spec.model_kind, BF_FAULT_BER);
    assert_int_equal(p->spec.trials, 6);
    assert_int_equal(p->spec.n_groups, 1);
    const bf_fault_group *g = &p->spec.groups[0];
    assert_int_equal(g->target, BF_TARGET_ACTIVATIONS);
    assert_int_equal(g->model_kind, BF_FAULT_BITFLIP);
    assert_int_equal(g->bits, 2);
    assert_int_equal(g->n_positions, 3);
    assert_int_equal(g->positions[2], 9);
    assert_int_equal(g->repr, BF_REPR_FP16);
    assert_int_equal(g->persistence, BF_PERSIST_TRANSIENT);
    assert_int_equal(g->n_tensors, 1);
    assert_string_equal(g->tensors[0], "relu*");
    assert_true(g->rate == 0);
    done(p);
    p = ok("{" HEAD "\"trials\": 2, \"faults\": [{}, {\"model\": \"ber\", \"rate\": 0.001}]}");
    assert_true(p->spec.groups[0].rate == 0.001);
    assert_string_equal(p->spec.groups[0].tensors[0], "*");   /* every tensor, as group 0's default */
    done(p);
    /* one group as a list is the object form exactly */
    parsed *a = ok("{" HEAD "\"trials\": 9, \"seed\": 3, \"faults\": [{\"bits\": 2, \"positions\": [30, 31]}]}");
    parsed *b = ok("{" HEAD "\"trials\": 9, \"seed\": 3, \"faults\": {\"bits\": 2, \"positions\": [30, 31]}}");
    assert_int_equal(a->spec.n_groups, 0);
    assert_null(a->spec.groups);
    assert_int_equal(a->spec.bits, b->spec.bits);
    assert_int_equal(a->spec.n_positions, b->spec.n_positions);
    assert_memory_equal(a->spec.positions, b->spec.positions, sizeof a->spec.positions);
    assert_int_equal(a->spec.target, b->spec.target);
    assert_int_equal(a->spec.model_kind, b->spec.model_kind);
    assert_int_equal(a->spec.trials, b->spec.trials);
    assert_int_equal(a->spec.seed, b->spec.seed);
    assert_string_equal(a->spec.tensors[0], b->spec.tensors[0]);
    done(a);
    done(b);
}

void rules_table(void **state)
{
    (void)state;
    size_t n_rows = sizeof RULE_ROWS / sizeof RULE_ROWS[0], n_struct = COUNT_OF(STRUCT_ONLY_RULES);
    for (size_t i = 0; i < n_rows; i++) {
        char *sweep = NULL;
        const char *json = RULE_ROWS[i].json;
        if (!json) {
            sweep = malloc(8192);
            assert_non_null(sweep);
            size_t o = (size_t)sprintf(sweep, "{" HEAD "\"faults\": {\"model\": \"ber\", \"repeats\": 1000000, \"rates\": [");
            for (int k = 0; k < 1001; k++) o += (size_t)sprintf(sweep + o, "%s0.5", k ? "," : "");
            strcpy(sweep + o, "]}}");
            json = sweep;
        }
        parsed *p = parse(json);
        if (p->st != BF_EINVAL || p->pr.count != 1) {
            dump(p);
            fail_msg("%s: expected 1 problem, got %zu", RULE_ROWS[i].rule, p->pr.count);
        }
        assert_string_equal(p->pr.items[0].pointer, RULE_ROWS[i].pointer);
        assert_string_equal(p->pr.items[0].message, RULE_ROWS[i].message);
        done(p);
        free(sweep);
    }
    /* every rule of core's is a row here or one no document can break */
    for (size_t r = 0; r < bf_spec_rule_count(); r++) {
        const char *name = bf_spec_rule_name(r);
        size_t k = 0, j = 0;
        while (k < n_rows && strcmp(RULE_ROWS[k].rule, name) != 0) k++;
        while (j < n_struct && strcmp(STRUCT_ONLY_RULES[j], name) != 0) j++;
        if (k == n_rows && j == n_struct) fail_msg("core's rule '%s' has no row in rules_table", name);
        if (k < n_rows && j < n_struct) fail_msg("rule '%s' is both a row and a struct-only rule", name);
    }
    assert_int_equal(n_rows + n_struct, bf_spec_rule_count());
}

/* Target kv_cache: faults.kv's filters, transient by default, and every
 * malformed filter reported at its pointer (hostile input included). */
void kv_cache_target(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"trials\": 10, \"faults\": {\"target\": \"kv_cache\", \"positions\": [30], \"kv\": "
                   "{\"layers\": [1, 0], \"kinds\": [\"v\"], \"heads\": [3], \"positions\": [7, 2, 5]}}}");
    const bf_campaign_spec *s = &p->spec;
    assert_int_equal(s->target, BF_TARGET_KV_CACHE);
    assert_int_equal(s->persistence, BF_PERSIST_TRANSIENT);
    assert_int_equal(s->kv.n_layers, 2);
    assert_int_equal(s->kv.layers[0], 1);
    assert_int_equal(s->kv.layers[1], 0);
    assert_int_equal(s->kv.kinds, 2);
    assert_int_equal(s->kv.n_heads, 1);
    assert_int_equal(s->kv.heads[0], 3);
    assert_int_equal(s->kv.n_positions, 3);
    assert_int_equal(s->kv.positions[2], 5);
    assert_int_equal(s->n_positions, 1);           /* faults.positions stays the bits */
    assert_int_equal(s->positions[0], 30);
    done(p);
    p = ok("{" HEAD "\"trials\": 10, \"faults\": {\"target\": \"kv_cache\", \"persistence\": \"permanent\"}}");
    assert_int_equal(p->spec.persistence, BF_PERSIST_PERMANENT);
    assert_int_equal(p->spec.kv.n_heads, 0);
    assert_int_equal(p->spec.kv.kinds, 0);
    done(p);
#define KV(x) "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"kv_cache\", \"kv\": " x "}}"
    only_problem(KV("[0]"), "/faults/kv", "must be an object");
    only_problem(KV("{\"head\": [0]}"), "/faults/kv/head", "unknown field");
    only_problem(KV("{\"heads\": []}"), "/faults/kv/heads", "must not be empty");
    only_problem(KV("{\"heads\": 1}"), "/faults/kv/heads", "must be an array");
    only_problem(KV("{\"heads\": [-1]}"), "/faults/kv/heads/0", "-1");
    only_problem(KV("{\"positions\": [1099511627776]}"), "/faults/kv/positions/0", "1099511627776");
    only_problem(KV("{\"positions\": [0.5]}"), "/faults/kv/positions/0", "integer");
    only_problem(KV("{\"layers\": [1, 2, 1]}"), "/faults/kv/layers/2", "1 is already listed");
    only_problem(KV("{\"kinds\": [\"key\"]}"), "/faults/kv/kinds/0", "'k'");
    only_problem(KV("{\"kinds\": [\"k\", \"k\"]}"), "/faults/kv/kinds/1", "'k' is already listed");
    only_problem(KV("{\"kinds\": []}"), "/faults/kv/kinds", "must not be empty");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"kv\": {\"heads\": [0]}}}", "/faults/kv",
                 "applies only to target 'kv_cache'");
#undef KV
    /* a long list: past the limit, one problem, not one per entry */
    size_t cap = 16 + 8 * (BF_KV_FILTER_MAX + 2);
    char *big = malloc(cap + 256);
    assert_non_null(big);
    size_t o = (size_t)sprintf(big, "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"kv_cache\", \"kv\": {\"positions\": [");
    for (int k = 0; k <= BF_KV_FILTER_MAX; k++) o += (size_t)sprintf(big + o, "%s%d", k ? "," : "", k);
    strcpy(big + o, "]}}}");
    only_problem(big, "/faults/kv/positions", "65537 entries; at most 65536");
    free(big);
}
