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
 *
 * K counts sites of one kind in the graph's topological order (0, 1, ...:
 * in a stack of layers, the layer). Each site is a node output, so it takes
 * value faults (bitflip/fault.h) as any activation does. */
#ifndef BITFLIP_SITES_H
#define BITFLIP_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bf_named_site_kind {
    BF_SITE_ATTN_SCORES = 1,
    BF_SITE_ATTN_PROBS,
    BF_SITE_ROUTER_LOGITS
} bf_named_site_kind;

/* "attn_scores", "attn_probs", "router_logits"; NULL for another number. */
const char *bf_named_site_kind_name(bf_named_site_kind kind);

typedef struct bf_named_site {
    bf_named_site_kind kind;
    int index;                /* K */
    int64_t value;            /* the node output (bf_model_find_value's id) */
    const char *value_name;   /* its ONNX name */
    const char *node, *op;    /* the node computing it */
} bf_named_site;

/* The model's sites, attention ones first (scores and probabilities of
 * each Softmax in turn), then routers: up to `max` into out (NULL with max
 * 0: just count); returns how many there are. Allocates nothing. */
size_t bf_model_named_sites(const bf_model *model, bf_named_site *out, size_t max);
/* "attn_probs.3" as in bf_model_named_sites: its value id, or -1. */
int64_t bf_model_named_site_value(const bf_model *model, const char *name);

#ifdef __cplusplus
}
#endif
#endif
