/* A countdown allocator in the manner of SQLite's test_malloc.c: after
 * bf_test_alloc_fail_after(n), the (n+1)th allocation fails, and every one
 * after it, until reset with -1. Linked in place of core/src/base/alloc.c in tests. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "alloc_fail.h"

static long countdown = -1;
static long failures = 0;
/* Largest request since bf_test_alloc_track_largest(1); written only while
 * tracking, which single-threaded tests turn on (threaded ones never do). */
static int tracking = 0;
static size_t largest = 0;

void bf_test_alloc_track_largest(int on) { tracking = on; largest = 0; }
size_t bf_test_alloc_largest(void) { return largest; }

static void seen(size_t size)
{
    if (tracking && size > largest) largest = size;
}

void bf_test_alloc_fail_after(long n) { countdown = n; failures = 0; }
long bf_test_alloc_failures(void) { return failures; }

static int should_fail(void)
{
    if (countdown < 0) return 0;
    if (countdown == 0) { failures++; return 1; }
    countdown--;
    return 0;
}

void *bf__malloc(size_t size) { seen(size); return should_fail() ? NULL : malloc(size ? size : 1); }
void *bf__calloc(size_t c, size_t s)
{
    seen(s && c > SIZE_MAX / s ? SIZE_MAX : c * s);
    return should_fail() ? NULL : calloc(c ? c : 1, s ? s : 1);
}
void *bf__realloc(void *p, size_t size) { seen(size); return should_fail() ? NULL : realloc(p, size ? size : 1); }
void bf__free(void *p) { free(p); }

void *bf__aligned_alloc(size_t size)
{
    void *p = NULL;
    seen(size);
    if (should_fail()) return NULL;
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
