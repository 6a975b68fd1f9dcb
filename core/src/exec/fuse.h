/* Fusing exported patterns back into the one op PyTorch ran (fuse.c). */
#ifndef BF_FUSE_H
#define BF_FUSE_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"
#include "model/graph.h"

/* Rewrites, in a parsed model whose ops are not bound yet, each exported
 * LayerNorm, GELU (erf and tanh forms), Hardswish and GroupNorm pattern into
 * one node of LayerNormalization, Gelu, HardSwish or GroupNormalization, and
 * removes the nodes only that pattern read; with the exporter's record
 * (m->kernels), only the patterns it names. Fails for memory or a malformed
 * record; the model is then still freeable. */
bf_status bf__fuse(bf_model *m, bf_error *err);

/* Removes the nodes marked in dead[] (one per node) from a parsed model,
 * keeping its order topological and its values' producers; fails only for
 * memory. For the rewrites of fuse.c and fuse_seq.c. */
bf_status bf__remove_nodes(bf_model *m, const unsigned char *dead, bf_error *err);

/* If value v was fused away, writes why it is not computed and what to do
 * instead into buf (naming the node that computes it inside one op) and
 * returns 1; else returns 0 and leaves buf empty. */
int bf__fused_note(const bf_model *m, int64_t v, char *buf, size_t len);

/* fuse_record.c: the exporter's record of the kernels PyTorch ran
 * (metadata_props "bitflip.kernels"; format there), parsed. */
typedef struct bf__kernel_call {
    const char *kernel, *scope;   /* into text */
    int used;                     /* a pattern was fused for it */
    size_t line;                  /* in the record, for a stable order */
} bf__kernel_call;

typedef struct bf__kernels {
    char *text;
    bf__kernel_call *calls;
    size_t n;
} bf__kernels;

/* Parses m->kernels into k (all zero when the model has none); a malformed
 * record is an error naming its line. */
bf_status bf__kernels_parse(const bf_model *m, bf__kernels *k, bf_error *err);
void bf__kernels_free(bf__kernels *k);
/* 1 if a recorded, not yet used call of the kernel for pattern kind `kind`
 * ran in the scope of the nodes `names` (which must share one scope), and
 * marks it used; else 0. */
int bf__kernels_take(bf__kernels *k, int kind, const char *const *names, int n_names);

#endif
