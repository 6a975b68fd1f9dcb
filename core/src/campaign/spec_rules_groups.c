/* The spec's rules for fault groups (docs/CAMPAIGNS.md, "Fault groups"):
 * which groups a trial may combine, and each extra group's own fields. Run
 * after every other rule (spec_rules.c), which check group 0: the spec's
 * own fault fields.
 *
 * What is allowed, and why the rest is refused:
 * - group 0 on weights (its representation makes the golden model: the
 *   weights as stored), then groups on weights, in group 0's
 *   representation (there is one stored copy), then groups on activations.
 *   Several groups may strike one value: they strike in group order, a
 *   later fault finding what an earlier one left (bit flips commute; for
 *   stuck-at and random_value the order is the spec's), and a weights
 *   group's faults are all written before the pass computes activations;
 * - sampling "uniform" only: the stratified samplings (per_tensor,
 *   per_bit, adaptive, exhaustive) and "list" enumerate one group's
 *   (tensor, bit) strata or faults; another group has none;
 * - group 0 a chosen-bit model, random_value or ber, without a profiled
 *   map, fault_scales or generation (a decoding takes one group's faults);
 * - every mitigation: they protect the model, whichever group's fault
 *   reaches what they protect (campaign_mitigate.c): 'ecc' decodes each
 *   stored word with every weights group's faults in it (its check bits
 *   faulting at group 0's BER rate; activations are not stored words),
 *   'sbp' restores its tensors' protected bits, in each group's
 *   representation, 'range' reads each stored value after every weights
 *   group's faults, 'clip' and 'abft' are nodes that see every fault that
 *   reaches the outputs they guard. Only SBP with random_value faults on
 *   activations is refused, as without groups: the value a fault replaces
 *   is not known until the pass runs, so its protected bits are not;
 * - an extra group computes in a float representation of its own (fp32,
 *   fp16, bf16: int8 activations need scales profiled for its sites) and
 *   takes one BER rate, not a sweep (the trials are group 0's). */
#include "spec_rules_impl.h"

#include "bitflip/mitigate.h"
#include "bitflip/repr.h"

static bool grouped(const bf_campaign_spec *s) { return s->n_groups > 0; }

static const char *target_name(bf_target t)
{
    static const char *const names[] = {"weights", "activations", "inputs", "kv_cache"};
    return (unsigned)t < 4 ? names[t] : "?";
}

static bool group_model_ok(bf_fault_model m)
{
    return m == BF_FAULT_BITFLIP || m == BF_FAULT_STUCK_AT_0 || m == BF_FAULT_STUCK_AT_1 || m == BF_FAULT_RANDOM_VALUE ||
           m == BF_FAULT_BER;
}

#define AT(i, name) snprintf(field, FIELD_PATH_MAX, "faults.%zu.%s", (size_t)(i), name)

RULE(groups_count)
{
    (void)f;
    (void)field;
    if (!grouped(s)) return false;
    if (s->n_groups + 1 > BF_FAULT_GROUPS_MAX)
        return SAY("%zu fault groups; at most %d (group 0 on weights, then groups on weights, then on activations)",
                   s->n_groups + 1, BF_FAULT_GROUPS_MAX);
    return !s->groups && SAY("n_groups is %zu but groups is NULL", s->n_groups);
}

/* group 0: what a trial with more than one group can take */
/* group 0: what a trial with more than one group can take */
RULE(groups_base)
{
    (void)f;
    if (!grouped(s)) return false;
    if (s->target != BF_TARGET_WEIGHTS)
        return AT(0, "target"), SAY("must be 'weights' with fault groups, not '%s' (group 0's representation makes the "
                                    "golden model; the other groups strike activations)", target_name(s->target));
    if (!group_model_ok(s->model_kind))
        return AT(0, "model"), SAY("'%s' does not combine with other fault groups (its map is the trial's whole fault "
                                   "set); use bitflip, stuck_at_0, stuck_at_1, random_value or ber", model_name(s));
    if (s->fault_scales)
        return AT(0, "fault_scales"), SAY("does not combine with other fault groups (its sites are scales, not values)");
    return false;
}

RULE(groups_target)
{
    (void)f;
    for (size_t i = 0; grouped(s) && s->groups && i < s->n_groups; i++) {
        const bf_fault_group *g = &s->groups[i];
        if (g->target != BF_TARGET_ACTIVATIONS && g->target != BF_TARGET_WEIGHTS)
            return AT(i + 1, "target"), SAY("a fault group after the first strikes 'weights' or 'activations', not '%s'",
                                            target_name(g->target));
        if (g->target == BF_TARGET_WEIGHTS && i > 0 && s->groups[i - 1].target == BF_TARGET_ACTIVATIONS)
            return AT(i + 1, "target"), SAY("the weights groups come before the activations groups (a trial writes the "
                                            "weights, then computes): move this group up to just after group 0");
        if (g->target == BF_TARGET_WEIGHTS) {
            if (g->repr != s->repr)
                return AT(i + 1, "representation"),
                       SAY("a weights group strikes the weights as group 0 stores them, '%s', not '%s': give group 0's "
                           "representation or none", (unsigned)s->repr < BF_REPR_COUNT ? bf_repr_name(s->repr) : "?",
                           (unsigned)g->repr < BF_REPR_COUNT ? bf_repr_name(g->repr) : "?");
            continue;
        }
        if ((unsigned)g->repr >= BF_REPR_COUNT || bf_repr_is_fixed(g->repr))
            return AT(i + 1, "representation"),
                   SAY("a fault group's activations take fp32, fp16 or bf16, not '%s' (int8 activations need scales "
                       "profiled for the group's sites)", (unsigned)g->repr < BF_REPR_COUNT ? bf_repr_name(g->repr) : "?");
    }
    return false;
}

RULE(groups_model)
{
    (void)f;
    for (size_t i = 0; grouped(s) && s->groups && i < s->n_groups; i++) {
        const bf_fault_group *g = &s->groups[i];
        if (!group_model_ok(g->model_kind))
            return AT(i + 1, "model"), SAY("a fault group takes bitflip, stuck_at_0, stuck_at_1, random_value or ber, not '%s'",
                                            bf_fault_model_name(g->model_kind) ? bf_fault_model_name(g->model_kind) : "?");
        if ((unsigned)g->persistence > BF_PERSIST_TRANSIENT)
            return AT(i + 1, "persistence"), SAY("unknown persistence %d", (int)g->persistence);
        if (g->persistence == BF_PERSIST_TRANSIENT && g->target == BF_TARGET_WEIGHTS)
            return AT(i + 1, "persistence"), SAY("'transient' applies only to activations (weights hold their faults for the pass)");
        if (g->model_kind == BF_FAULT_BER && !(g->rate > 0 && g->rate <= 1))
            return AT(i + 1, "rate"), SAY("model 'ber' needs a rate in (0, 1], got %g", g->rate);
        if (g->model_kind != BF_FAULT_BER && g->rate != 0)
            return AT(i + 1, "rate"), SAY("applies only to model 'ber'");
        if (g->n_tensors == 0 || !g->tensors)
            return AT(i + 1, "tensors"), SAY("a fault group needs at least one tensor pattern ('*': every one)");
        for (size_t k = 0; k < g->n_tensors; k++)
            if (!g->tensors[k] || !g->tensors[k][0])
                return AT(i + 1, "tensors"), SAY("entry %zu is empty", k);
    }
    return false;
}

RULE(groups_bits)
{
    (void)f;
    for (size_t i = 0; grouped(s) && s->groups && i < s->n_groups; i++) {
        const bf_fault_group *g = &s->groups[i];
        int m = bf_repr_bits(g->repr);
        bool chosen = g->model_kind == BF_FAULT_BITFLIP || g->model_kind == BF_FAULT_STUCK_AT_0 ||
                      g->model_kind == BF_FAULT_STUCK_AT_1;
        if (g->n_positions < 0 || g->n_positions > 64)
            return AT(i + 1, "positions"), SAY("%d positions; at most 64", g->n_positions);
        unsigned char on[64] = {0};
        for (int k = 0; k < g->n_positions; k++) {
            int b = g->positions[k];
            if (b < 0 || b >= m) return AT(i + 1, "positions"), SAY("bit %d does not exist in %s (bits 0..%d)", b, bf_repr_name(g->repr), m - 1);
            if (on[b]) return AT(i + 1, "positions"), SAY("bit %d is listed twice", b);
            on[b] = 1;
        }
        if (g->n_positions && g->model_kind == BF_FAULT_RANDOM_VALUE)
            return AT(i + 1, "positions"), SAY("does not apply to model 'random_value' (it replaces every bit)");
        if (g->burst != 0 && g->burst != 1)
            return AT(i + 1, "burst"), SAY("a fault group's burst is true or false (adjacent bits of one element)");
        if (!chosen && (g->bits > 1 || g->burst))
            return AT(i + 1, g->burst ? "burst" : "bits"), SAY("applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1'");
        int allowed = g->n_positions ? g->n_positions : m;
        if (chosen && (g->bits < 0 || g->bits > allowed))
            return AT(i + 1, "bits"), SAY("must be 1..%d (the allowed bit positions), got %d", allowed, g->bits);
        int run = 0, longest = 0;
        for (int b = 0; b < m; b++) {
            run = on[b] || !g->n_positions ? run + 1 : 0;
            if (run > longest) longest = run;
        }
        if (chosen && g->burst && g->bits > longest)
            return AT(i + 1, "bits"), SAY("a burst of %d adjacent bits needs %d consecutive allowed positions; the longest run "
                                          "is %d", g->bits, g->bits, longest);
    }
    return false;
}

RULE(groups_uniform)
{
    (void)f;
    (void)field;
    return grouped(s) && s->sampling != BF_SAMPLE_UNIFORM &&
           SAY("must be 'uniform' with fault groups (faults is a list of %zu): the stratified samplings and 'list' "
               "enumerate one group's (tensor, bit) strata or faults, and another group has none", s->n_groups + 1);
}

RULE(groups_sbp_random)
{
    (void)f;
    int sbp = 0;
    for (size_t i = 0; grouped(s) && s->mitigations && i < s->n_mitigations; i++) sbp |= s->mitigations[i].sbp.enabled;
    for (size_t i = 0; sbp && s->groups && i < s->n_groups; i++)
        if (s->groups[i].target != BF_TARGET_WEIGHTS && s->groups[i].model_kind == BF_FAULT_RANDOM_VALUE)
            return AT(i + 1, "model"), SAY("'random_value' on activations does not combine with mitigation 'sbp': the value "
                                           "a fault replaces is not known until the pass runs, nor its protected bits");
    return false;
}

RULE(groups_not_generate)
{
    (void)f;
    (void)field;
    return grouped(s) && s->gen_new_tokens != 0 &&
           SAY("does not combine with fault groups (a trial's decoding takes one group's faults)");
}

RULE(groups_stop_margins)
{
    (void)f;
    (void)field;
    return grouped(s) && (s->stop_tensor_margin > 0 || s->stop_bit_margin > 0) &&
           SAY("the per-tensor and per-bit margins do not apply with fault groups (a trial's faults lie in several "
               "tensors and bits); give only 'margin'");
}

const rule bf__spec_rules_groups[] = {
    {"groups-count", BF_SPEC_GROUPS, ANY, 0, BF_ERANGE, groups_count},
    {"groups-base", BF_SPEC_GROUPS, ANY, B(TARGET) | B(MODEL) | B(FAULT_SCALES), BF_EINVAL, groups_base},
    {"groups-target", BF_SPEC_GROUPS, ANY, 0, BF_EINVAL, groups_target},
    {"groups-model", BF_SPEC_GROUPS, ANY, 0, BF_EINVAL, groups_model},
    {"groups-bits", BF_SPEC_GROUPS, ANY, 0, BF_EINVAL, groups_bits},
    {"groups-uniform", BF_SPEC_SAMPLING, ANY, B(GROUPS), BF_EINVAL, groups_uniform},
    {"groups-sbp-random", BF_SPEC_GROUPS, ANY, B(MITIGATIONS), BF_EINVAL, groups_sbp_random},
    {"groups-not-generate", BF_SPEC_GENERATE, ANY, B(GROUPS), BF_EINVAL, groups_not_generate},
    {"groups-stop-margins", BF_SPEC_STOP, ANY, B(GROUPS), BF_EINVAL, groups_stop_margins},
};
const size_t bf__spec_rules_groups_n = sizeof bf__spec_rules_groups / sizeof bf__spec_rules_groups[0];
