/* libFuzzer target: a safetensors eval set through the loader, then every
 * tensor's first sample converted to float32, as an evaluator feeds it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/bitflip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bf_dataset_limits lim = {.max_bytes = (int64_t)64 << 20};
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer_opts(data, size, "fuzz.safetensors", &lim, &ds, &err) != BF_OK) return 0;
    int64_t samples = bf_dataset_num_samples(ds);
    for (size_t i = 0; i < bf_dataset_num_tensors(ds); i++) {
        const bf_tensor *t = bf_dataset_tensor(ds, i);
        if (bf_dataset_find(ds, t->name) == NULL) abort();   /* every tensor is found by its name */
        if (samples < 1) continue;
        bf_tensor dst = *t;
        dst.dtype = BF_F32;
        dst.dims[0] = 1;
        int64_t row = 1;
        for (int d = 1; d < t->ndim; d++) row *= t->dims[d];
        dst.data = malloc((size_t)row * sizeof(float) + 1);
        if (!dst.data) continue;
        (void)bf_dataset_copy_rows(t, samples - 1, 1, &dst, &err);
        free(dst.data);
    }
    bf_dataset_free(ds);
    return 0;
}
