#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

void *bf__malloc(size_t size) { return malloc(size ? size : 1); }
void *bf__calloc(size_t count, size_t size) { return calloc(count ? count : 1, size ? size : 1); }
void *bf__realloc(void *ptr, size_t size) { return realloc(ptr, size ? size : 1); }
void bf__free(void *ptr) { free(ptr); }

void *bf__aligned_alloc(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 64) != 0) return NULL;
    return p;
}

char *bf__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = bf__malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}
