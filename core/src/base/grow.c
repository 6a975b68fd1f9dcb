/* Growth by doubling (grow.h). Through bf__realloc, so the tests' refused
 * allocations reach it as they reach every other. */
#include "base/grow.h"

#include <stdint.h>
#include <string.h>

#include "base/alloc.h"

int bf__grow(void *arr, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap) return 1;
    size_t c = *cap <= SIZE_MAX / 2 ? 2 * *cap : SIZE_MAX;
    if (c < first) c = first;
    if (c < need) c = need;
    if (size && c > SIZE_MAX / size) {
        if (need > SIZE_MAX / size) return 0;
        c = SIZE_MAX / size;   /* doubling overflows, the need does not */
    }
    void *p;   /* arr points at an object pointer: read and written bytewise */
    memcpy(&p, arr, sizeof p);
    void *q = bf__realloc(p, c * size);
    if (!q) return 0;
    memcpy(arr, &q, sizeof q);
    *cap = c;
    return 1;
}
