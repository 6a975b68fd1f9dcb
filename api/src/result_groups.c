/* campaign.fault_groups of a result (docs/CAMPAIGNS.md, "Fault groups"):
 * groups 1.. of a spec whose faults are a list, each with its own sites
 * (which name its rows of by_tensor; result_json.c renders and parses
 * those) and, with mitigations, what each configuration does to it. */
#include <stdio.h>

#include "bitflip/bitflip.h"
#include "result_table.h"

/* With mitigations: what each configuration does to a group's faults.
 * The protections belong to the model, whichever group's fault reaches
 * what they protect: ECC corrects stored words, with every weights group's
 * faults in them (an activation fault is in none); SBP restores its
 * tensors' protected bits, weights or activations; the range check reads
 * each stored value after every group's faults (an activation is not
 * stored); clip and ABFT are nodes in the graph, which see a fault that
 * reaches the outputs they guard (before they read it). */
static json_t *group_mitigations(const bf_campaign_spec *spec, const bf_fault_group *fg)
{
    json_t *arr = json_array();
    int weights = fg->target == BF_TARGET_WEIGHTS;
    for (size_t i = 0; i < spec->n_mitigations; i++) {
        const bf_mitigation *m = &spec->mitigations[i];
        char what[512] = "";
        size_t n = 0;
        int protects = 0;
#define SAYS(on, text)                                                                                  \
        if (on) {                                                                                       \
            n += (size_t)snprintf(what + n, n < sizeof what ? sizeof what - n : 0, "%s%s", n ? "; " : "", text); \
        }
        protects |= m->clip.enabled || m->abft.enabled || m->sbp.enabled || (weights && (m->ecc.enabled || m->range.enabled));
        SAYS(m->clip.enabled || m->abft.enabled,
             "its clip or ABFT nodes guard the outputs they are placed at, this group's faults included")
        SAYS(m->sbp.enabled, "SBP restores the protected bits of its tensors, whichever group flipped them")
        SAYS(m->ecc.enabled && weights,
             "ECC decodes each stored word with every weights group's faults in it: this group's are corrected or "
             "detected with the others'")
        SAYS(m->ecc.enabled && !weights, "nothing: ECC protects stored weights; this group's faults strike activations")
        SAYS(m->range.enabled && weights,
             "the range check reads each stored value after every group's faults: out of range, zeroed or flagged")
        SAYS(m->range.enabled && !weights, "nothing: the range check reads stored weights; this group's faults strike "
                                           "activations")
#undef SAYS
        json_array_append_new(arr, json_pack("{s:s, s:b, s:s}", "name", m->name ? m->name : "", "protects", protects, "what",
                                             n ? what : "nothing"));
    }
    return arr;
}

json_t *bf__result_fault_groups(const bf_campaign_spec *spec, const bf_campaign *c)
{
    static const char *const targets[] = {"weights", "activations", "inputs", "kv_cache"};
    json_t *gs = json_array();
    for (size_t g = 0; g < spec->n_groups; g++) {
        const bf_fault_group *fg = &spec->groups[g];
        json_t *jg = json_object();
        json_object_set_new(jg, "target", json_string((unsigned)fg->target < 4 ? targets[fg->target] : "?"));
        json_object_set_new(jg, "fault_model", json_string(bf_fault_model_name(fg->model_kind)));
        json_object_set_new(jg, "representation", json_string(bf_repr_name(fg->repr)));
        json_object_set_new(jg, "persistence", json_string(fg->persistence == BF_PERSIST_PERMANENT ? "permanent" : "transient"));
        if (fg->model_kind == BF_FAULT_BER) json_object_set_new(jg, "rate", json_real(fg->rate));
        /* the group's own sites: its rows of by_tensor name them */
        json_t *gsites = json_array();
        for (size_t i = 0; i < bf_campaign_group_num_sites(c, g + 1); i++) {
            const bf_site *s = bf_campaign_group_site(c, g + 1, i);
            json_array_append_new(gsites, json_pack("{s:s, s:s?, s:I}", "name", s->name, "op", s->op, "elements",
                                                    (json_int_t)s->elements));
        }
        json_object_set_new(jg, "sites", gsites);
        if (spec->n_mitigations) json_object_set_new(jg, "mitigations", group_mitigations(spec, fg));
        json_array_append_new(gs, jg);
    }
    return gs;
}
