/* bitflip info's language-model part (info_lm.c). */
#ifndef BF_INFO_LM_H
#define BF_INFO_LM_H

#include <jansson.h>

#include "bitflip/bitflip.h"

/* The KV cache's entries and the named fault sites, as text (nothing for a
 * model with neither) or as the "kv_cache" and "sites" members of root. */
void info_lm_print(const bf_model *m);
void info_lm_json(const bf_model *m, json_t *root);

#endif
