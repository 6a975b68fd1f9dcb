/* bf_campaign_spec_free (declared in bitflip/api/spec.h). It lives here
 * because api/ is what allocates specs; the members are plain malloc'd. */
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/spec.h"

void bf_campaign_spec_free(bf_campaign_spec *spec)
{
    if (!spec) return;
    free(spec->model);
    free(spec->dataset);
    for (size_t i = 0; i < spec->n_tensors; i++) free(spec->tensors[i]);
    free(spec->tensors);
    free(spec->rates);
    for (size_t i = 0; i < spec->n_list; i++) free(spec->list[i].tensor);
    free(spec->list);
    for (size_t i = 0; i < spec->n_mitigations; i++) bf_mitigation_free(&spec->mitigations[i]);
    free(spec->mitigations);
    free(spec->kv.layers);
    free(spec->kv.heads);
    free(spec->kv.positions);
    free(spec->error_map);
    bf_errmap_free(spec->errmap);
    for (size_t g = 0; spec->groups && g < spec->n_groups; g++) {
        for (size_t i = 0; i < spec->groups[g].n_tensors; i++) free(spec->groups[g].tensors[i]);
        free(spec->groups[g].tensors);
    }
    free(spec->groups);
    memset(spec, 0, sizeof *spec);
}
