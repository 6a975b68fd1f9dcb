/* bitflip — named fault sites: activations of a model found by their
 * structure and named as people think of them, so that a value fault can
 * say "the attention probabilities of layer 3" instead of an exporter's
 * node name.
 *
 *   attn_scores.K    the input of the K-th attention Softmax: Q·K^T scaled
 *                    and masked (a Softmax fed, through Mul, Div, Add, Sub,
 *                    Where, Cast, Reshape or Identity, by a MatMul or Einsum
 *                    of two activations, and read by a MatMul or Einsum)
 *   attn_probs.K     that Softmax's output, the attention probabilities
 *   router_logits.K  the K-th MoE router's logits: the output of the Linear
 *                    (MatMul or Gemm with a parameter, and its bias Add)
 *                    that feeds a TopK, directly or through Softmax,
 *                    Sigmoid, Cast, Reshape or Identity
 *   k_cache.K        the K-th attention layer's keys as a KV cache holds
 *                    them: from the K operand of its Q·K^T MatMul, back
 *                    through the layout ops (Transpose, Reshape, Expand,
 *                    Unsqueeze, Squeeze, Identity, bf.RepeatInterleave) to
 *                    the value that computes them once per key/value head
 *                    (after RoPE, before grouped-query repetition); in a
 *                    past_key_values export, the Concat of past and new
 *                    keys (present.K.key): every position the pass reads
 *   v_cache.K        the same for the values, from the V operand of its
 *                    probabilities·V MatMul
 *
 * K counts sites of one kind in the graph's topological order (0, 1, ...:
 * in a stack of layers, the layer). Each site is a node output, so it takes
 * value faults (bitflip/fault.h) as any activation does. */
#ifndef BITFLIP_SITES_H
#define BITFLIP_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bf_named_site_kind {
    BF_SITE_ATTN_SCORES = 1,
    BF_SITE_ATTN_PROBS,
    BF_SITE_ROUTER_LOGITS,
    BF_SITE_K_CACHE,
    BF_SITE_V_CACHE
} bf_named_site_kind;

/* "attn_scores", "attn_probs", "router_logits", "k_cache", "v_cache"; NULL
 * for another number. */
const char *bf_named_site_kind_name(bf_named_site_kind kind);

typedef struct bf_named_site {
    bf_named_site_kind kind;
    int index;                /* K */
    int64_t value;            /* the node output (bf_model_find_value's id) */
    const char *value_name;   /* its ONNX name */
    const char *node, *op;    /* the node computing it */
    /* k_cache, v_cache: the attention product's operand the walk back
     * started from (bf_plan_kv_site_layout walks it again); else -1 */
    int64_t operand;
} bf_named_site;

/* The model's sites, attention ones first (scores and probabilities of
 * each Softmax in turn), then routers, then the KV cache (k_cache.K and
 * v_cache.K of each attention layer in turn; a layer whose keys or values
 * the walk cannot trace has neither): up to `max` into out (NULL with max
 * 0: just count); returns how many there are. Allocates nothing. */
size_t bf_model_named_sites(const bf_model *model, bf_named_site *out, size_t max);
/* "attn_probs.3" as in bf_model_named_sites: its value id, or -1. */
int64_t bf_model_named_site_value(const bf_model *model, const char *name);

/* Where a KV-cache site's entries lie in its value, in a plan: entry
 * (head, position, dim) of one sample is element head * stride_head +
 * position * stride_pos + dim * stride_dim of the sample's slice (the value
 * is [batch, ...] with the sample on dim 0; a no-cache export's projection
 * [batch, T, heads * D] and a [batch, heads, T, D] cache alike). heads
 * counts key/value heads (grouped-query repetition undone), positions every
 * key position the pass reads. */
typedef struct bf_kv_site_layout {
    int64_t heads, positions, dim;
    int64_t stride_head, stride_pos, stride_dim;
    int64_t elements;         /* the value's elements per sample */
} bf_kv_site_layout;

/* The layout of k_cache / v_cache site `site` (from bf_model_named_sites
 * of the plan's model) in `plan`; BF_EINVAL naming the op when the walk
 * meets a layout it cannot follow (a head or position axis split across a
 * reshape, a product whose operand is not [batch, heads, ., .]). */
bf_status bf_plan_kv_site_layout(const bf_plan *plan, const bf_named_site *site, bf_kv_site_layout *out,
                                 bf_error *err);

#ifdef __cplusplus
}
#endif
#endif
