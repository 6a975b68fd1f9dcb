/* Every allocation in core goes through these, so that tests can make the Nth
 * one fail (tests link alloc_fail.c in place of alloc.c; core keeps no state). */
#ifndef BF_ALLOC_H
#define BF_ALLOC_H

#include <stddef.h>

void *bf__malloc(size_t size);
void *bf__calloc(size_t count, size_t size);
void *bf__realloc(void *ptr, size_t size);
/* 64-byte aligned, for arenas the kernels vectorise over; free with bf__free. */
void *bf__aligned_alloc(size_t size);
void bf__free(void *ptr);
char *bf__strdup(const char *s);

#endif
