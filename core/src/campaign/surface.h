/* A campaign's fault surface: the sites (tensors) faults may land in, each
 * with the model's parameter or value behind it, and the running element
 * counts that map a uniform draw over the whole surface to a site and an
 * element. Resolved from the spec's tensor selectors by campaign.c. */
#ifndef BF_CAMPAIGN_SURFACE_H
#define BF_CAMPAIGN_SURFACE_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/campaign.h"

/* room for "router_logits.<K>" with K up to 2^20 (bitflip/sites.h) */
#define BF__SITE_LABEL 32

/* kv_cache: a site's selected entries, its cells, numbered in the value's
 * own element order: axis k (heads, positions, dims sorted by decreasing
 * stride) takes n[k] indices idx[k] (ascending; NULL: 0 .. n[k]-1), so cell
 * numbers and element indices rise together (BER's ascending draws stay
 * ascending). */
typedef struct bf__kv_sel {
    int64_t n[3], stride[3];
    const int64_t *idx[3];
} bf__kv_sel;

typedef struct bf__surface {
    bf_site *sites;
    size_t n_sites;
    size_t *site_param;       /* weights: model parameter index of each site */
    int64_t *site_value;      /* activations, inputs: model value id of each site */
    float *site_scale;        /* activations, inputs: int8 scale of each site (else 1) */
    char (*site_label)[BF__SITE_LABEL]; /* activations: named site of each site ("attn_probs.3"), or "" */
    bf__kv_sel *site_kv;      /* kv_cache: each site's cells (kv_sites.c); else NULL */
    int64_t *kv_lists;        /* ... the heads and positions they index (sorted), owned */
    size_t kv_n_heads, kv_n_positions;   /* how many of each (0: every one) */
    int64_t *prefix;          /* n_sites + 1 running element counts */
    int64_t elements;         /* prefix[n_sites] */
} bf__surface;

#endif
