/* The weights arena (base/warena.h): anonymous memory (huge pages where the
 * kernel gives them) that moves a range into its memfd when the first private
 * view of it is asked for. What must hold across a move: every pointer into
 * the arena stays valid and reads the bytes the test wrote (the reference is
 * the test's own copy of them), views are private (a write to one is seen
 * neither by the arena nor by another view), only the range asked for moves,
 * readers in another thread see the same bytes throughout, and views asked
 * for at once by two threads move a range once. Fallbacks: no memfd (the
 * process out of descriptors) leaves the arena as it was and gives no view;
 * the move's swap failing (mremap, made to fail here) leaves the range as it
 * was under readers in other threads, and a hole the kernel would leave
 * after a late failure is filled with the file;
 * THP disabled for the process changes nothing else. Whether THP took
 * (AnonHugePages in /proc/self/smaps) is printed, never asserted: it is the
 * host's setting; that an arena made without huge pages (the default for a
 * model's, bf_load_limits.huge_pages) or under BITFLIP_HUGE_PAGES=0 never
 * asks for them (VmFlags "hg") is asserted. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "alloc_loop.h"
#include "base/warena.h"

#define MiB ((size_t)1 << 20)

/* three tensors as a model lays them out: 4 MiB, 64 KiB, 3 MiB + 100 bytes */
static const size_t sizes[3] = {4 * MiB, 64 << 10, 3 * MiB + 100};

typedef struct layout {
    bf__warena *a;
    uint8_t *t[3];
    uint8_t *ref[3];   /* the test's copy of each tensor's bytes */
} layout;

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        p[i] = (uint8_t)(s >> 32);
    }
}

static void make(layout *l)
{
    size_t total = 0, pg = bf__warena_page();
    for (int i = 0; i < 3; i++) total += (sizes[i] + pg - 1) / pg * pg;
    l->a = bf__warena_create(total);
    assert_non_null(l->a);
    for (int i = 0; i < 3; i++) {
        l->t[i] = bf__warena_take(l->a, sizes[i]);
        assert_non_null(l->t[i]);
        l->ref[i] = malloc(sizes[i]);
        assert_non_null(l->ref[i]);
        fill(l->ref[i], sizes[i], (uint64_t)i + 1);
        memcpy(l->t[i], l->ref[i], sizes[i]);
    }
    assert_null(bf__warena_take(l->a, 1));   /* full */
    bf__warena_seal(l->a);
}

static void unmake(layout *l)
{
    bf__warena_free(l->a);
    for (int i = 0; i < 3; i++) free(l->ref[i]);
}

static void same_as_written(const layout *l)
{
    for (int i = 0; i < 3; i++)
        if (memcmp(l->t[i], l->ref[i], sizes[i]) != 0) fail_msg("tensor %d no longer holds what was written", i);
}

/* The line of /proc/self/maps whose range holds p (its name: "" when
 * anonymous), and the kB of AnonHugePages smaps gives it; 0 when not found. */
static int mapping_of(const void *p, char *name, size_t cap, long *huge_kb)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    int in = 0, found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char rest[400] = "";
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %399[^\n]", &lo, &hi, rest) >= 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            if (in) {
                found = 1;
                char *s = rest;
                while (*s == ' ') s++;
                snprintf(name, cap, "%s", s);
                *huge_kb = 0;
            }
        } else if (in && strncmp(line, "AnonHugePages:", 14) == 0) {
            *huge_kb = strtol(line + 14, NULL, 10);
        }
    }
    fclose(f);
    return found;
}

/* A view moves its tensor's range, and only it; the addresses and bytes stay. */
static void a_view_moves_its_range_only(void **state)
{
    (void)state;
    layout l;
    make(&l);
    char name[400];
    long huge = 0;
    assert_true(mapping_of(l.t[0], name, sizeof name, &huge));
    print_message("before any view: tensor 0 mapped '%s', AnonHugePages %ld kB (the host's THP setting)\n", name, huge);
    assert_int_equal(bf__warena_moved(l.a), 0);

    size_t pg = bf__warena_page();
    uint8_t *v = bf__wview_create(l.a, l.t[1], sizes[1]);
    assert_non_null(v);
    assert_ptr_not_equal(v, l.t[1]);
    assert_memory_equal(v, l.ref[1], sizes[1]);
    assert_int_equal(bf__warena_moved(l.a), sizes[1]);   /* 64 KiB: whole pages */
    same_as_written(&l);
    assert_true(mapping_of(l.t[1], name, sizeof name, &huge));
    if (!strstr(name, "memfd:bitflip-weights")) fail_msg("tensor 1 after its view is mapped '%s', not the memfd", name);
    assert_true(mapping_of(l.t[0], name, sizeof name, &huge));
    if (strstr(name, "memfd")) fail_msg("tensor 0 moved with tensor 1's view");

    /* private: a write to the view is not the arena's, nor another view's */
    v[0] ^= 0xff;
    v[sizes[1] - 1] ^= 0x01;
    same_as_written(&l);
    uint8_t *w = bf__wview_create(l.a, l.t[1], sizes[1]);
    assert_non_null(w);
    assert_memory_equal(w, l.ref[1], sizes[1]);
    assert_int_equal(bf__warena_moved(l.a), sizes[1]);   /* moved once */
    w[5] = (uint8_t)~l.ref[1][5];
    assert_int_equal(v[5], l.ref[1][5]);
    /* given back, the view reads the arena's bytes again */
    bf__wview_drop(v, sizes[1]);
    assert_memory_equal(v, l.ref[1], sizes[1]);

    /* the last tensor, not a whole number of pages: its last page moves whole */
    uint8_t *x = bf__wview_create(l.a, l.t[2], sizes[2]);
    assert_non_null(x);
    assert_memory_equal(x, l.ref[2], sizes[2]);
    assert_int_equal(bf__warena_moved(l.a), sizes[1] + (sizes[2] + pg - 1) / pg * pg);
    same_as_written(&l);
    /* not at a page boundary, or outside: no view, nothing moved */
    assert_null(bf__wview_create(l.a, l.t[0] + 8, 64));
    assert_null(bf__wview_create(l.a, l.ref[0], 64));
    assert_int_equal(bf__warena_moved(l.a), sizes[1] + (sizes[2] + pg - 1) / pg * pg);
    bf__wview_free(v, sizes[1]);
    bf__wview_free(w, sizes[1]);
    bf__wview_free(x, sizes[2]);
    same_as_written(&l);
    unmake(&l);
}

typedef struct reader {
    const layout *l;
    atomic_int stop;
    long passes, wrong;
} reader;

static void *read_loop(void *arg)
{
    reader *r = arg;
    while (!atomic_load(&r->stop)) {
        for (int i = 0; i < 3; i++) r->wrong += memcmp(r->l->t[i], r->l->ref[i], sizes[i]) != 0;
        r->passes++;
    }
    return NULL;
}

typedef struct asker {
    bf__warena *a;
    uint8_t *at;
    size_t n;
    uint8_t *view;
} asker;

static void *ask(void *arg)
{
    asker *k = arg;
    k->view = bf__wview_create(k->a, k->at, k->n);
    return NULL;
}

/* Moves while another thread reads the arena, and two threads asking for
 * the same range's view at once. */
static void moves_under_readers(void **state)
{
    (void)state;
    layout l;
    make(&l);
    reader r = {.l = &l};
    pthread_t rt, kt[2];
    assert_int_equal(pthread_create(&rt, NULL, read_loop, &r), 0);
    size_t pg = bf__warena_page();
    /* tensor 0 a 64 KiB piece at a time, each view freed at once */
    for (size_t off = 0; off < sizes[0]; off += 16 * pg) {
        uint8_t *v = bf__wview_create(l.a, l.t[0] + off, 16 * pg);
        assert_non_null(v);
        assert_memory_equal(v, l.ref[0] + off, 16 * pg);
        bf__wview_free(v, 16 * pg);
    }
    asker k[2] = {{l.a, l.t[2], sizes[2], NULL}, {l.a, l.t[2], sizes[2], NULL}};
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&kt[i], NULL, ask, &k[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(kt[i], NULL);
    atomic_store(&r.stop, 1);
    pthread_join(rt, NULL);
    print_message("the reader compared the arena %ld times during the moves\n", r.passes);
    assert_int_equal(r.wrong, 0);
    for (int i = 0; i < 2; i++) {
        assert_non_null(k[i].view);
        assert_memory_equal(k[i].view, l.ref[2], sizes[2]);
        bf__wview_free(k[i].view, sizes[2]);
    }
    assert_int_equal(bf__warena_moved(l.a), sizes[0] + (sizes[2] + pg - 1) / pg * pg);
    same_as_written(&l);
    unmake(&l);
}

/* The process out of descriptors: memfd_create fails, the view is NULL (the
 * callers copy on the heap), the arena unchanged; with descriptors again, a
 * view moves the range as usual. */
static void no_memfd_no_view(void **state)
{
    (void)state;
    layout l;
    make(&l);
    struct rlimit old;
    th_no_free_descriptors(&old);
    uint8_t *v = bf__wview_create(l.a, l.t[1], sizes[1]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_null(v);
    assert_int_equal(bf__warena_moved(l.a), 0);
    same_as_written(&l);
    v = bf__wview_create(l.a, l.t[1], sizes[1]);
    assert_non_null(v);
    assert_memory_equal(v, l.ref[1], sizes[1]);
    bf__wview_free(v, sizes[1]);
    same_as_written(&l);
    unmake(&l);
}

/* The move's swap (warena.c, move_run: mremap of the file's mapping over
 * the range) made to fail: this definition takes the place of libc's for
 * core's objects linked into this test. MREMAP_UNTOUCHED: it fails as the
 * kernel does before unmapping anything (its argument and map-count
 * checks); MREMAP_HOLE: as after it unmapped the destination (ENOMEM from
 * the kernel's own allocations). Either leaves the source mapped. */
enum { MREMAP_REAL, MREMAP_UNTOUCHED, MREMAP_HOLE };
static atomic_int mremap_mode = MREMAP_REAL, mremap_failed = 0;

void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...)
{
    void *to = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        to = va_arg(ap, void *);
        va_end(ap);
    }
    int mode = atomic_load(&mremap_mode);
    if (mode != MREMAP_REAL && (flags & MREMAP_FIXED)) {
        if (mode == MREMAP_HOLE) munmap(to, new_size);
        atomic_fetch_add(&mremap_failed, 1);
        errno = ENOMEM;
        return MAP_FAILED;
    }
    /* libc's, or a sanitizer's interceptor of it: what core calls outside this test */
    static void *(*real)(void *, size_t, size_t, int, ...);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "mremap");
    if (!real) {
        errno = ENOSYS;
        return MAP_FAILED;
    }
    return real(old, old_size, new_size, flags, to);
}

/* The swap failing over and over while a thread compares every byte of the
 * arena: no view, nothing moved, the range anonymous as before and its bytes
 * the same at every pass (the reader would fault in a hole, or see zeros in
 * memory mapped back and refilled); then the same views succeed. */
static void a_failed_move_leaves_the_range_to_its_readers(void **state)
{
    (void)state;
    layout l;
    make(&l);
    reader r = {.l = &l};
    pthread_t rt;
    assert_int_equal(pthread_create(&rt, NULL, read_loop, &r), 0);
    atomic_store(&mremap_failed, 0);
    atomic_store(&mremap_mode, MREMAP_UNTOUCHED);
    for (int round = 0; round < 16; round++)
        for (int i = 0; i < 3; i++) assert_null(bf__wview_create(l.a, l.t[i], sizes[i]));
    atomic_store(&mremap_mode, MREMAP_REAL);
    assert_true(atomic_load(&mremap_failed) >= 48);   /* every attempt reached the swap */
    assert_int_equal(bf__warena_moved(l.a), 0);
    char name[400];
    long huge = 0;
    for (int i = 0; i < 3; i++) {
        assert_true(mapping_of(l.t[i], name, sizeof name, &huge));
        if (strstr(name, "memfd")) fail_msg("tensor %d is mapped '%s' after failed moves", i, name);
    }
    for (int i = 0; i < 3; i++) {
        uint8_t *v = bf__wview_create(l.a, l.t[i], sizes[i]);
        assert_non_null(v);
        assert_memory_equal(v, l.ref[i], sizes[i]);
        bf__wview_free(v, sizes[i]);
    }
    atomic_store(&r.stop, 1);
    pthread_join(rt, NULL);
    print_message("the reader compared the arena %ld times during the failed moves\n", r.passes);
    assert_true(r.passes > 0);
    assert_int_equal(r.wrong, 0);
    same_as_written(&l);
    unmake(&l);
}

/* The swap failing after the kernel unmapped the range (no reader here: it
 * would fault in the hole until it is filled): the file is mapped into the
 * hole, the range has moved, the view is made, the bytes the same. */
static void a_hole_left_by_a_failed_move_is_filled(void **state)
{
    (void)state;
    layout l;
    make(&l);
    atomic_store(&mremap_failed, 0);
    atomic_store(&mremap_mode, MREMAP_HOLE);
    uint8_t *v = bf__wview_create(l.a, l.t[0], sizes[0]);
    atomic_store(&mremap_mode, MREMAP_REAL);
    assert_int_equal(atomic_load(&mremap_failed), 1);
    assert_non_null(v);
    assert_memory_equal(v, l.ref[0], sizes[0]);
    assert_int_equal(bf__warena_moved(l.a), sizes[0]);
    char name[400];
    long huge = 0;
    assert_true(mapping_of(l.t[0], name, sizeof name, &huge));
    if (!strstr(name, "memfd:bitflip-weights")) fail_msg("tensor 0 after the refill is mapped '%s', not the memfd", name);
    v[3] ^= 0x40;   /* still private */
    same_as_written(&l);
    bf__wview_free(v, sizes[0]);
    unmake(&l);
}

/* THP disabled for the process (madvise's hint then has no effect): the
 * same bytes, the same views. */
static void without_huge_pages(void **state)
{
    (void)state;
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) skip();
    layout l;
    make(&l);
    char name[400];
    long huge = 0;
    assert_true(mapping_of(l.t[0], name, sizeof name, &huge));
    print_message("THP disabled: AnonHugePages %ld kB\n", huge);
    uint8_t *v = bf__wview_create(l.a, l.t[0], sizes[0]);
    assert_non_null(v);
    assert_memory_equal(v, l.ref[0], sizes[0]);
    v[7] ^= 0x80;
    same_as_written(&l);
    bf__wview_free(v, sizes[0]);
    unmake(&l);
    assert_int_equal(prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0), 0);
}

/* 1 when the mapping holding p carries the huge-page advice (VmFlags "hg":
 * MADV_HUGEPAGE was applied to it), 0 when not, -1 when smaps says nothing. */
static int advised_huge(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, r = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && strncmp(line, "VmFlags:", 8) == 0) r = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return r;
}

/* Which arenas ask for huge pages (warena.h, bf__warena_create_opts): not
 * one made with huge 0, nor any with BITFLIP_HUGE_PAGES=0; the advice
 * itself may be refused (no THP in the kernel), so where it is asked for
 * its presence is printed, not asserted. */
static void huge_pages_only_where_asked(void **state)
{
    (void)state;
    const char *was = getenv("BITFLIP_HUGE_PAGES");
    char keep[16] = "";
    if (was) snprintf(keep, sizeof keep, "%s", was);
    static const struct { const char *env; int huge, want; } cases[] = {
        {NULL, 0, 0}, {NULL, 1, -1}, {"0", 1, 0}, {"0", 0, 0}, {"1", 0, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].env) setenv("BITFLIP_HUGE_PAGES", cases[i].env, 1);
        else unsetenv("BITFLIP_HUGE_PAGES");
        bf__warena *a = bf__warena_create_opts(4 * MiB, cases[i].huge);
        assert_non_null(a);
        uint8_t *t = bf__warena_take(a, MiB);
        assert_non_null(t);
        int hg = advised_huge(t);
        if (hg < 0) {   /* no smaps (not Linux's procfs): nothing to see */
            bf__warena_free(a);
            continue;
        }
        if (cases[i].want == 0) assert_int_equal(hg, 0);
        else print_message("BITFLIP_HUGE_PAGES=%s huge %d: advice %s\n", cases[i].env ? cases[i].env : "(unset)",
                           cases[i].huge, hg ? "taken" : "refused (no THP)");
        bf__warena_free(a);
    }
    if (was) setenv("BITFLIP_HUGE_PAGES", keep, 1);
    else unsetenv("BITFLIP_HUGE_PAGES");
}

/* A tensor larger than the 16 MiB a move takes at a time (warena.c,
 * MOVE_CHUNK): moved in pieces, the same bytes across their seams, one view. */
static void a_large_range_moves_in_pieces(void **state)
{
    (void)state;
    size_t n = 40 * MiB + 12345;
    bf__warena *a = bf__warena_create(n);
    assert_non_null(a);
    uint8_t *t = bf__warena_take(a, n), *ref = malloc(n);
    assert_non_null(t);
    assert_non_null(ref);
    fill(ref, n, 77);
    memcpy(t, ref, n);
    bf__warena_seal(a);
    uint8_t *v = bf__wview_create(a, t, n);
    assert_non_null(v);
    assert_memory_equal(v, ref, n);
    assert_memory_equal(t, ref, n);
    size_t pg = bf__warena_page();
    assert_int_equal(bf__warena_moved(a), (n + pg - 1) / pg * pg);
    v[16 * MiB] ^= 1;   /* on a seam */
    assert_int_equal(t[16 * MiB], ref[16 * MiB]);
    bf__wview_free(v, n);
    bf__warena_free(a);
    free(ref);
}

static void allocation_failures_make_no_arena(void **state)
{
    (void)state;
    for (long n = 0; n < 2; n++) {
        bf_test_alloc_fail_after(n);
        bf__warena *a = bf__warena_create(MiB);
        bf_test_alloc_fail_after(-1);
        assert_null(a);
    }
    bf__warena *a = bf__warena_create(MiB);
    assert_non_null(a);
    bf__warena_free(a);
    assert_null(bf__warena_create(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_view_moves_its_range_only),
        cmocka_unit_test(moves_under_readers),
        cmocka_unit_test(no_memfd_no_view),
        cmocka_unit_test(a_failed_move_leaves_the_range_to_its_readers),
        cmocka_unit_test(a_hole_left_by_a_failed_move_is_filled),
        cmocka_unit_test(without_huge_pages),
        cmocka_unit_test(huge_pages_only_where_asked),
        cmocka_unit_test(a_large_range_moves_in_pieces),
        cmocka_unit_test(allocation_failures_make_no_arena),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
