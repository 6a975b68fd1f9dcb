/* Packed copies of a model's weights, made once and shared by every plan.
 *
 * A matrix product whose B is a weight repacks B into the kernel's panels
 * at every call (exec/ops/sgemm.h, bf__sgemm_work): on the Criteo-shaped
 * DLRM, whose MLP weights are exported transposed (nn.Linear as Gemm with
 * transB = 1), 3.7% of a pass went to packing the same bytes again. A
 * model's tensors never change once loaded (plans write faults into views
 * or copies of their own, exec/plan.c), so a copy made from the model's
 * own tensor stays right for as long as a plan reads that tensor: the plan
 * passes the copy to the product only while the step's B is the model's
 * tensor itself (exec/plan.c, packed_of), and a plan holding a fault in
 * the weight packs its faulty B at every call as before. So a fault still
 * costs a page, and nothing here is ever written after it is made.
 *
 * The copies hold the products' weights once more (each at most
 * BF_SGEMM_WORK_MAX floats, 4 MiB, padded to 16 columns); they are made by
 * the first plan that needs them, under a mutex (workers build plans at
 * once), and freed with the model. They lie one after the other in slabs
 * of 2 MiB pages (wpack.c says why: a pass streams every copy, and in 4 KiB
 * pages the page walks cost ViT-S/16's products a quarter of their time). */
#ifndef BF_WPACK_H
#define BF_WPACK_H

#include <stddef.h>
#include <stdint.h>

typedef struct bf__wpack bf__wpack;

/* NULL when out of memory: then nothing is kept (products pack per call). */
bf__wpack *bf__wpack_create(void);
void bf__wpack_free(bf__wpack *w);
/* The copy of `src` keyed by `tag` (the layout: transposed, shape), of
 * `floats` floats, made by fill(ctx, out) the first time it is asked for;
 * NULL when fill returns 0 (nothing to pack: this CPU's kernel packs per
 * call, or the kernel refuses these weights, as the Conv kernel does a W
 * with an Inf or NaN) or no memory. */
const float *bf__wpack_get(bf__wpack *w, const void *src, uint64_t tag, size_t floats,
                           int (*fill)(const void *ctx, float *out), const void *ctx);
/* Bytes held in copies. */
size_t bf__wpack_bytes(bf__wpack *w);

#endif
