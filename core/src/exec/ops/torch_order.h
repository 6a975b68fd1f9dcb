/* PyTorch's order among equal values: its CPU topk and sort as libstdc++'s
 * algorithms leave them (torch_order.c; --tie-order pytorch). */
#ifndef BF_EXEC_OPS_TORCH_ORDER_H
#define BF_EXEC_OPS_TORCH_ORDER_H

#include <stdint.h>

/* a key (double, or int64 compared as integers when is_int) and its index */
typedef struct bf__kv {
    double v;
    int64_t iv;
    int64_t i;
    int is_int;
} bf__kv;

/* torch.sort(stable=False) of a[0, n) laid out in index order: descending
 * when largest, NaN the largest either way (std::sort with PyTorch's
 * comparator) */
void bf__torch_sort(bf__kv *a, int64_t n, int largest);
/* torch.topk: a[0, k) become the k chosen, in torch.topk's order
 * (std::partial_sort when k·64 <= n, else std::nth_element at k - 1 and,
 * when sorted, std::sort of the first k - 1) */
void bf__torch_topk(bf__kv *a, int64_t n, int64_t k, int largest, int sorted);

#endif
