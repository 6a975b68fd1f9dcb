/* libFuzzer target: a profiled bit-error map (bitflip/errmap.h) through the
 * loader, then the invariants every loaded map keeps: cells ascend, lie in
 * the memory, and no cell has two kinds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "bitflip/errmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* small limits, so that the fuzzer reaches them too */
    bf_errmap_limits lim = {.max_header_bytes = 4096, .max_cells = 1 << 16, .max_bits = (int64_t)1 << 32};
    bf_errmap *m = NULL;
    bf_error err = {0};
    if (bf_errmap_load_memory(data, size, &lim, &m, &err) != BF_OK) {
        if (m) abort();                       /* a failed load leaves nothing behind */
        return 0;
    }
    uint64_t n = (uint64_t)m->rows * (uint64_t)m->cols;
    if (bf_errmap_cells(m) > lim.max_cells || n > (uint64_t)lim.max_bits) abort();
    for (int k = 0; k < BF_CELL_KINDS; k++)
        for (int64_t i = 0; i < m->n[k]; i++)
            if (m->cells[k][i] >= n || (i && m->cells[k][i] <= m->cells[k][i - 1])) abort();
    bf_errmap_free(m);
    return 0;
}
