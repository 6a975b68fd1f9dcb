/* A countdown allocator in the manner of SQLite's test_malloc.c: after
 * bf_test_alloc_fail_after(n), the (n+1)th allocation fails, and every one
 * after it, until reset with -1. Linked in place of core/src/base/alloc.c in tests.
 * It also keeps core's live and peak bytes, as glibc's malloc_usable_size
 * sees them (what a block really holds, the same at allocation and at free). */
#include <execinfo.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "alloc_fail.h"
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

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

/* Path mode (bf_test_alloc_fail_new_path_from): allocations are counted
 * from the arming; from index path_from on, the first whose path is new
 * fails, and every one after it. A path is the call stack's return
 * addresses (backtrace) and whether this is that stack's first allocation
 * since the arming or a later one (a loop's first element, or one after
 * others were made: their cleanup differs). Paths failed in earlier rounds
 * are kept in failed_paths until bf_test_alloc_paths_forget. A mutex: a
 * campaign's worker and its fold on the calling thread may both allocate. */
enum { PATH_SLOTS = 1 << 16 };
static pthread_mutex_t path_mu = PTHREAD_MUTEX_INITIALIZER;
static int path_mode = 0;
static long path_from = 0, path_count = 0, path_failed_at = -1;
static uint64_t failed_paths[PATH_SLOTS];              /* 0: empty */
static size_t n_seen = 0;
static uint64_t occ_key[PATH_SLOTS];             /* stacks met in this round */
static uint32_t occ_round[PATH_SLOTS], round_no = 0;
static size_t n_met = 0;                         /* distinct stacks this round */

/* Under ASan the stack is the one ASan records for a probe allocation (its
 * frame-pointer unwinder, which it runs for every malloc anyway): glibc's
 * backtrace unwinds from the DWARF tables, and was about a sixth of
 * test_kv_sites' ASan CPU-s, run for each allocation of each round
 * (tests/history/round22-h26-suite.md). The probe's frames are this
 * function's callers, as backtrace's are. */
static uint64_t stack_key(void)
{
    void *fr[48];
    size_t k = 0;
#ifdef __SANITIZE_ADDRESS__
    void *probe = malloc(1);
    int tid;
    if (probe) k = __asan_get_alloc_stack(probe, fr, 48, &tid);
    free(probe);
    if (k > 48) k = 48;
    if (k == 0)
#endif
        k = (size_t)backtrace(fr, 48);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < k; i++) {
        h ^= (uint64_t)(uintptr_t)fr[i];
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

/* 1 if the stack's key was already met in this round (and records it); a
 * full table (never seen: rounds meet a few hundred stacks) says "met". */
static int met_before(uint64_t k)
{
    if (n_met >= PATH_SLOTS / 2) return 1;
    for (size_t i = k & (PATH_SLOTS - 1);; i = (i + 1) & (PATH_SLOTS - 1)) {
        if (occ_round[i] != round_no) { occ_round[i] = round_no; occ_key[i] = k; n_met++; return 0; }
        if (occ_key[i] == k) return 1;
    }
}

/* 1 if the path is new (and records it); a full table counts every path as
 * new, which fails more allocations, never fewer. */
static int seen_add(uint64_t k)
{
    if (n_seen >= PATH_SLOTS / 2) return 1;
    for (size_t i = k & (PATH_SLOTS - 1);; i = (i + 1) & (PATH_SLOTS - 1)) {
        if (failed_paths[i] == k) return 0;
        if (!failed_paths[i]) { failed_paths[i] = k; n_seen++; return 1; }
    }
}

void bf_test_alloc_fail_after(long n)
{
    countdown = n;
    failures = 0;
    path_mode = 0;
    if (n >= 0) { path_count = 0; path_failed_at = -1; }
}
long bf_test_alloc_failures(void) { return failures; }

void bf_test_alloc_fail_new_path_from(long n)
{
    pthread_mutex_lock(&path_mu);
    countdown = -1;
    failures = 0;
    path_mode = 1;
    path_from = n;
    path_count = 0;
    path_failed_at = -1;
    n_met = 0;
    /* a new round: every occ slot stale at once (round 0 is never used) */
    if (++round_no == 0) { memset(occ_round, 0, sizeof occ_round); round_no = 1; }
    pthread_mutex_unlock(&path_mu);
}
long bf_test_alloc_failed_at(void) { return path_failed_at; }
long bf_test_alloc_count(void) { return path_count; }
void bf_test_alloc_paths_forget(void)
{
    memset(failed_paths, 0, sizeof failed_paths);
    n_seen = 0;
}

static int path_fails(void)
{
    pthread_mutex_lock(&path_mu);
    long i = path_count++;
    int fail = path_failed_at >= 0;
    if (!fail) {
        uint64_t k = stack_key();
        if (met_before(k)) k = (k ^ 0x9e3779b97f4a7c15ull) | 1;
        if (i >= path_from && seen_add(k)) {
            path_failed_at = i;
            fail = 1;
        }
    }
    if (fail) failures++;
    pthread_mutex_unlock(&path_mu);
    return fail;
}

static int should_fail(void)
{
    if (path_mode) return path_fails();
    if (countdown < 0) return 0;
    path_count++;
    if (countdown == 0) {
        if (path_failed_at < 0) path_failed_at = path_count - 1;
        failures++;
        return 1;
    }
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
