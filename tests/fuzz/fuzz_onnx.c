/* libFuzzer target: an ONNX file through the door check, protobuf-c, the
 * converter and the graph checks; a model that loads is then sized, planned
 * at batch 1 and 3 under a memory budget, and run once on zeros. Limits are
 * small so that the fuzzer explores structure instead of running out of
 * memory on a legitimately big model. The same plan with shared activation
 * buffers (bitflip eval's) must give the same output bytes: an op that reads
 * memory it did not write, or writes past its output, shows there. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/bitflip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bf_load_limits lim = {.max_graph_depth = 8, .max_type_depth = 8, .max_field_bytes = 1 << 20,
                          .max_nodes = 2000, .max_initializers = 2000, .max_attributes = 64,
                          .max_tensor_elements = 1 << 20};
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_buffer_opts(data, size, "fuzz.onnx", &lim, &m, &err) != BF_OK) return 0;
    /* batch 1 and 3, or the batch a graph input fixes (the op cases' do) */
    int64_t batches[] = {1, 3};
    const bf_value_info *in0 = bf_model_input(m, 0);
    if (in0 && in0->ndim > 0 && in0->dims[0] > 0 && in0->dims[0] <= 64) batches[0] = batches[1] = in0->dims[0];
    for (int k = 0; k < 2; k++) {
        if (k == 1 && batches[1] == batches[0]) break;
        bf_plan_budget b;
        bf_plan *p = NULL;
        if (bf_plan_estimate(m, batches[k], &b, &err) != BF_OK) continue;
        /* a plan within 64 MiB is built and run; its estimate must hold */
        bf_plan_budget built;
        bf_plan_opts o = {.max_bytes = (uint64_t)64 << 20, .budget = &built};
        if (bf_plan_create_opts(m, batches[k], &o, &p, &err) == BF_OK) {
            /* the estimate is what building the plan counted, to the byte */
            if (built.total_bytes != b.total_bytes || bf_plan_arena_bytes(p) + 64 != b.arena_bytes) abort();
            bf_plan *q = NULL;
            bf_plan_opts so = {.max_bytes = (uint64_t)64 << 20, .share_buffers = 1};
            if (bf_plan_run(p, &err) == BF_OK && bf_plan_create_opts(m, batches[k], &so, &q, &err) == BF_OK) {
                if (bf_plan_run(q, &err) == BF_OK)
                    for (size_t i = 0; i < bf_model_num_outputs(m); i++) {
                        const bf_tensor *a = bf_plan_output(p, i), *b2 = bf_plan_output(q, i);
                        if (bf_tensor_nbytes(a) != bf_tensor_nbytes(b2) ||
                            (bf_tensor_nbytes(a) && memcmp(a->data, b2->data, bf_tensor_nbytes(a)) != 0))
                            abort();
                    }
                bf_plan_free(q);
            }
            bf_plan_free(p);
        }
    }
    bf_model_free(m);
    return 0;
}
