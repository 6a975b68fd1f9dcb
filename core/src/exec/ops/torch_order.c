/* PyTorch's order among equal values (--tie-order pytorch; docs/OPS.md, TopK).
 *
 * PyTorch 1.13's CPU topk (aten/src/ATen/native/TopKImpl.h) and sort
 * (cpu/SortingKernel.cpp, stable = false, the default of torch.sort) are
 * deterministic but not stable: they run libstdc++'s std::partial_sort,
 * std::nth_element and std::sort on (value, index) pairs laid out in index
 * order, comparing the values only. Which of several equal values comes
 * first is whatever those algorithms' swaps leave, so reproducing it means
 * running the same algorithms step for step: the functions below follow
 * libstdc++'s bits/stl_algo.h and bits/stl_heap.h (GCC 12, unchanged in
 * these parts for many releases): introsort (depth 2·⌊log2 n⌋, median of
 * three moved to the front, an unguarded partition, runs of 16 or fewer
 * left to a final insertion sort, heapsort past the depth), introselect
 * (the same partition, insertion sort at 3 or fewer, heap select past the
 * depth) and heap select / sort_heap (its sift-down to a leaf, then up).
 * tests/ops/torch_order_check.py compares them with torch.topk and
 * torch.sort themselves on thousands of tie-heavy rows. */
#include <math.h>

#include "torch_order.h"

/* PyTorch's comparators: a strictly before b, NaN the largest of all
 * (largest: NaN first; smallest: NaN last); int64 keys compare as integers */
static inline int before(const bf__kv *a, const bf__kv *b, int largest)
{
    if (a->is_int) return largest ? a->iv > b->iv : a->iv < b->iv;
    int an = isnan(a->v), bn = isnan(b->v);
    return largest ? (an && !bn) || a->v > b->v : (!an && bn) || a->v < b->v;
}

static inline void swap(bf__kv *a, bf__kv *b)
{
    bf__kv t = *a;
    *a = *b;
    *b = t;
}

static int64_t lg(int64_t n)
{
    int64_t r = -1;
    while (n) { n >>= 1; r++; }
    return r;
}

/* __unguarded_linear_insert: a[last] moved down while it is before its left neighbour */
static void linear_insert(bf__kv *a, int64_t last, int largest)
{
    bf__kv v = a[last];
    int64_t next = last - 1;
    while (before(&v, &a[next], largest)) {
        a[last] = a[next];
        last = next--;
    }
    a[last] = v;
}

/* __insertion_sort of [f, l) */
static void insertion_sort(bf__kv *a, int64_t f, int64_t l, int largest)
{
    if (f == l) return;
    for (int64_t i = f + 1; i < l; i++) {
        if (before(&a[i], &a[f], largest)) {
            bf__kv v = a[i];
            for (int64_t j = i; j > f; j--) a[j] = a[j - 1];
            a[f] = v;
        } else {
            linear_insert(a, i, largest);
        }
    }
}

/* __move_median_to_first(result, x, y, z) */
static void median_to_first(bf__kv *a, int64_t r, int64_t x, int64_t y, int64_t z, int largest)
{
    int64_t s;
    if (before(&a[x], &a[y], largest)) {
        if (before(&a[y], &a[z], largest)) s = y;
        else if (before(&a[x], &a[z], largest)) s = z;
        else s = x;
    } else if (before(&a[x], &a[z], largest)) {
        s = x;
    } else if (before(&a[y], &a[z], largest)) {
        s = z;
    } else {
        s = y;
    }
    swap(&a[r], &a[s]);
}

/* __unguarded_partition_pivot: the median of a[f + 1], the middle and
 * a[l - 1] moved to a[f], then [f + 1, l) partitioned around it */
static int64_t partition_pivot(bf__kv *a, int64_t f, int64_t l, int largest)
{
    median_to_first(a, f, f + 1, f + (l - f) / 2, l - 1, largest);
    int64_t lo = f + 1, hi = l;
    for (;;) {
        while (before(&a[lo], &a[f], largest)) lo++;
        hi--;
        while (before(&a[f], &a[hi], largest)) hi--;
        if (!(lo < hi)) return lo;
        swap(&a[lo], &a[hi]);
        lo++;
    }
}

/* __push_heap / __adjust_heap on the heap a[0, len) (a = first) */
static void push_heap(bf__kv *a, int64_t hole, int64_t top, bf__kv v, int largest)
{
    int64_t parent = (hole - 1) / 2;
    while (hole > top && before(&a[parent], &v, largest)) {
        a[hole] = a[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    a[hole] = v;
}

static void adjust_heap(bf__kv *a, int64_t hole, int64_t len, bf__kv v, int largest)
{
    int64_t top = hole, child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (before(&a[child], &a[child - 1], largest)) child--;
        a[hole] = a[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        a[hole] = a[child - 1];
        hole = child - 1;
    }
    push_heap(a, hole, top, v, largest);
}

static void make_heap(bf__kv *a, int64_t len, int largest)
{
    if (len < 2) return;
    for (int64_t parent = (len - 2) / 2;; parent--) {
        adjust_heap(a, parent, len, a[parent], largest);
        if (parent == 0) return;
    }
}

/* __pop_heap(first, last, result): a[r] takes the top, its old value sifts in */
static void pop_heap(bf__kv *a, int64_t len, int64_t r, int largest)
{
    bf__kv v = a[r];
    a[r] = a[0];
    adjust_heap(a, 0, len, v, largest);
}

/* __heap_select(f, m, l) then (partial_sort) __sort_heap(f, m) */
static void heap_select(bf__kv *a, int64_t m, int64_t l, int largest)
{
    make_heap(a, m, largest);
    for (int64_t i = m; i < l; i++)
        if (before(&a[i], &a[0], largest)) pop_heap(a, m, i, largest);
}

static void partial_sort(bf__kv *a, int64_t m, int64_t l, int largest)
{
    heap_select(a, m, l, largest);
    for (int64_t last = m; last > 1;) {
        last--;
        pop_heap(a, last, last, largest);
    }
}

/* __introsort_loop: recursion on the right part only, as libstdc++ does;
 * the depth bound (2·log2 n) bounds the recursion */
static void introsort_loop(bf__kv *a, int64_t f, int64_t l, int64_t depth, int largest)
{
    while (l - f > 16) {
        if (depth == 0) {
            partial_sort(a + f, l - f, l - f, largest);
            return;
        }
        depth--;
        int64_t cut = partition_pivot(a, f, l, largest);
        introsort_loop(a, cut, l, depth, largest);
        l = cut;
    }
}

void bf__torch_sort(bf__kv *a, int64_t n, int largest)
{
    if (n <= 1) return;
    introsort_loop(a, 0, n, lg(n) * 2, largest);
    if (n > 16) {
        insertion_sort(a, 0, 16, largest);
        for (int64_t i = 16; i < n; i++) linear_insert(a, i, largest);
    } else {
        insertion_sort(a, 0, n, largest);
    }
}

/* std::nth_element(a, a + nth, a + n): __introselect */
static void nth_element(bf__kv *a, int64_t nth, int64_t n, int largest)
{
    int64_t f = 0, l = n;
    if (nth == n) return;
    int64_t depth = lg(n) * 2;
    while (l - f > 3) {
        if (depth == 0) {
            heap_select(a + f, nth + 1 - f, l - f, largest);
            swap(&a[f], &a[nth]);
            return;
        }
        depth--;
        int64_t cut = partition_pivot(a, f, l, largest);
        if (cut <= nth) f = cut;
        else l = cut;
    }
    insertion_sort(a, f, l, largest);
}

void bf__torch_topk(bf__kv *a, int64_t n, int64_t k, int largest, int sorted)
{
    if (k <= 0 || n <= 0) return;
    if (k * 64 <= n) {
        partial_sort(a, k, n, largest);
    } else {
        nth_element(a, k - 1, n, largest);
        if (sorted) bf__torch_sort(a, k - 1, largest);
    }
}
