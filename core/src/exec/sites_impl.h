/* Shared by sites.c (the named sites) and sites_kv.c (the KV-cache ones). */
#ifndef BF_EXEC_SITES_IMPL_H
#define BF_EXEC_SITES_IMPL_H

#include "bitflip/model.h"

/* sites_kv.c: the value a KV cache would hold behind an attention product's
 * K or V operand (bitflip/sites.h, k_cache.K), or -1 when the walk back
 * meets a graph input or parameter, or goes on too long. */
int bf__kv_walk(const bf_model *m, int operand);

#endif
