/* Growth by doubling for the arrays core appends to an element at a time
 * (a kernel's table, a walk's ranges, a model edit's owned blocks), written
 * once here: each of those places had its own copy of the same five lines,
 * and the copies differed only in their first capacity. */
#ifndef BF_GROW_H
#define BF_GROW_H

#include <stddef.h>

/* Makes the array *arr (arr is the address of a pointer to elements of
 * `size` bytes) hold at least `need` elements: when *cap is short, to the
 * larger of need, twice *cap and `first`. 1 on success; 0 when the byte
 * count overflows or the allocation is refused, with *arr and *cap
 * untouched, so the caller's array stays whole and its error path frees it
 * as before. */
int bf__grow(void *arr, size_t *cap, size_t need, size_t size, size_t first);

#endif
