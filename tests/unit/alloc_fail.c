/* A countdown allocator in the manner of SQLite's test_malloc.c: after
 * bf_test_alloc_fail_after(n), the (n+1)th allocation fails, and every one
 * after it, until reset with -1. Linked in place of core/src/base/alloc.c in tests.
 * It also keeps core's live and peak bytes, as glibc's malloc_usable_size
 * sees them (what a block really holds, the same at allocation and at free). */
#include <malloc.h>
#include <stdatomic.h>
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

/* atomic: campaigns allocate on their worker threads */
static atomic_size_t live = 0, peak = 0;

void bf_test_alloc_peak_reset(void) { atomic_store(&peak, atomic_load(&live)); }
size_t bf_test_alloc_peak(void) { return atomic_load(&peak); }
size_t bf_test_alloc_live(void) { return atomic_load(&live); }

static void *held(void *p)
{
    if (!p) return NULL;
    size_t now = atomic_fetch_add(&live, malloc_usable_size(p)) + malloc_usable_size(p);
    size_t was = atomic_load(&peak);
    while (now > was && !atomic_compare_exchange_weak(&peak, &was, now)) {}
    return p;
}

static void released(void *p)
{
    if (p) atomic_fetch_sub(&live, malloc_usable_size(p));
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

void *bf__malloc(size_t size) { seen(size); return should_fail() ? NULL : held(malloc(size ? size : 1)); }
void *bf__calloc(size_t c, size_t s)
{
    seen(s && c > SIZE_MAX / s ? SIZE_MAX : c * s);
    return should_fail() ? NULL : held(calloc(c ? c : 1, s ? s : 1));
}
void *bf__realloc(void *p, size_t size)
{
    seen(size);
    if (should_fail()) return NULL;
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q = realloc(p, size ? size : 1);
    if (!q) return NULL;
    atomic_fetch_sub(&live, old);
    return held(q);
}
void bf__free(void *p) { released(p); free(p); }

void *bf__aligned_alloc(size_t size)
{
    void *p = NULL;
    seen(size);
    if (should_fail()) return NULL;
    if (posix_memalign(&p, 64, size ? size : 64) != 0) return NULL;
    return held(p);
}

char *bf__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = bf__malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}
