/* The weights arena (warena.h): anonymous memory (in huge pages where the
 * loader asks for them) for the model, moved a range at a time into a memfd when a plan that writes faults
 * asks for a private view of it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "bitflip/limits.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

struct bf__warena {
    int fd;                 /* the memfd, -1 until the first view moves a range into it */
    uint8_t *base;
    size_t len, used;
    int sealed;
    uint64_t *moved;        /* a bit a page: in the memfd */
    size_t n_moved;         /* pages */
    pthread_mutex_t mu;
};

size_t bf__warena_page(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

#if defined(__linux__) && defined(MFD_CLOEXEC)

/* The size of a transparent huge page on x86-64 and arm64 (4 KiB base
 * pages); an arena at this alignment gets whole huge pages from its start. */
#define HUGE_ALIGN ((size_t)2 << 20)

/* Anonymous private memory of `len` bytes at a HUGE_ALIGN boundary when
 * len is at least that: the mapping is made HUGE_ALIGN larger and trimmed. */
static uint8_t *map_aligned(size_t len)
{
    size_t extra = len >= HUGE_ALIGN && len <= SIZE_MAX - HUGE_ALIGN ? HUGE_ALIGN : 0;
    uint8_t *p = mmap(NULL, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (!extra) return p;
    uint8_t *a = (uint8_t *)round_up((uintptr_t)p, HUGE_ALIGN);
    if (a > p) munmap(p, (size_t)(a - p));
    if (a + len < p + len + extra) munmap(a + len, (size_t)(p + len + extra - (a + len)));
    return a;
}

/* BITFLIP_HUGE_PAGES=0 in the environment: no MADV_HUGEPAGE anywhere (the
 * weights arena, BF__WRITE_AGAIN's), for a machine where a huge page's first
 * touch costs more than a run saves (bf__warena_create_opts says why); any
 * other value: huge pages wherever they may be asked for; unset: `dflt`,
 * the caller's choice */
static int huge_pages_wanted(int dflt)
{
    const char *hp = getenv("BITFLIP_HUGE_PAGES");
    return hp ? strcmp(hp, "0") != 0 : dflt;
}

static void pages_populate(void *addr, size_t len);

bf__warena *bf__warena_create(size_t bytes) { return bf__warena_create_opts(bytes, 1); }

bf__warena *bf__warena_create_opts(size_t bytes, int huge)
{
    size_t pg = bf__warena_page();
    if (bytes == 0 || bytes > SIZE_MAX - pg) return NULL;
    bf__warena *a = bf__calloc(1, sizeof *a);
    if (!a) return NULL;
    a->fd = -1;
    a->len = round_up(bytes, pg);
    a->moved = bf__calloc(a->len / pg / 64 + 1, sizeof *a->moved);
    if (!a->moved) goto fail;
    if (pthread_mutex_init(&a->mu, NULL) != 0) goto fail;
    if (!(a->base = map_aligned(a->len))) {
        pthread_mutex_destroy(&a->mu);
        goto fail;
    }
    /* best effort: refused (no THP, THP disabled for the process), the
     * arena works with 4 KiB pages. Not asked for unless `huge` or
     * BITFLIP_HUGE_PAGES=1: on a VM that hands free 2 MiB blocks back to
     * its host (free page reporting), each huge page costs a host fault a
     * 4 KiB page when first touched, and loading the Criteo-shaped DLRM
     * (647 MiB of tables) took 0.4-1.4 s more system time, more than a
     * one-pass eval saves (docs/BENCHMARKS.md, "The Criteo-shaped DLRM with
     * huge pages", and the section after it, which set `bitflip eval`'s
     * default by the work) */
    if (huge_pages_wanted(huge)) (void)madvise(a->base, a->len, MADV_HUGEPAGE);
    /* the loader writes the whole arena right away (each large initializer
     * into its pages): faulted in with one call rather than a trap a page
     * inside its copies (BF__WRITE_NOW; SSDlite320's 14 MB: 3,500 faults) */
    pages_populate(a->base, a->len);
    return a;
fail:
    bf__free(a->moved);
    bf__free(a);
    return NULL;
}

void bf__warena_seal(bf__warena *a)
{
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->sealed = 1;
    (void)mprotect(a->base, a->len, PROT_READ);
    pthread_mutex_unlock(&a->mu);
}

void bf__warena_free(bf__warena *a)
{
    if (!a) return;
    munmap(a->base, a->len);
    if (a->fd >= 0) close(a->fd);
    pthread_mutex_destroy(&a->mu);
    bf__free(a->moved);
    bf__free(a);
}

static int is_moved(const bf__warena *a, size_t page) { return (int)(a->moved[page / 64] >> (page % 64) & 1); }

static int write_all(int fd, const uint8_t *p, size_t n, size_t off)
{
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
        off += (size_t)w;
    }
    return 0;
}

/* Moves [off, off + n) (pages, none moved yet) into the memfd while other
 * threads may be reading it: written to the file, the file mapped at a fresh
 * address (its pages mapped at once, MAP_POPULATE: no fault a page in the
 * next pass), then that mapping moved over the range in one call, mremap
 * with MREMAP_FIXED. Called locked.
 *
 * Why not mmap(MAP_FIXED) of the file straight over the range: neither call
 * promises to leave the range as it was when it fails (mmap(2), mremap(2)),
 * and a failed mmap(MAP_FIXED) may have unmapped it: a reader faults there
 * until something is mapped back. Here what a process can run out of (a
 * descriptor, RLIMIT_AS, the memfd's pages) fails the first mmap, before
 * the range is touched. What holds for the mremap (mm/mremap.c, mremap_to,
 * Linux 3.x to 6.x): its argument and map-count checks come before it
 * unmaps the destination, and the unmap and the moved mapping's insertion
 * happen under the mmap lock held for writing, so a reader's fault waits
 * and then finds the file's page, the same bytes. After the unmap only the
 * kernel's own small allocations can fail (the vma copy, page tables:
 * ENOMEM, the kernel itself out of memory); the source is then moved back
 * and the range is a hole, in which a reader faults (nothing in user space
 * can close that window). It is filled with the file where nothing else
 * took it (MAP_FIXED_NOREPLACE maps over nothing), and the range has moved
 * after all.
 *
 * ThreadSanitizer reported the MAP_FIXED swap as a write to the range (its
 * mmap interceptor), racing with every reader, so TSan builds moved the
 * whole arena at creation; the mremap swap is reported as nothing (the old
 * swap fails test_warena and cli_test_lm_diff under TSan, this one passes),
 * and TSan builds move ranges as the others do. */
static int move_run(bf__warena *a, size_t off, size_t n)
{
    uint8_t *at = a->base + off;
    int prot = a->sealed ? PROT_READ : PROT_READ | PROT_WRITE;
    if (write_all(a->fd, at, n, off) != 0) return -1;
    void *f = mmap(NULL, n, prot, MAP_SHARED | MAP_POPULATE, a->fd, (off_t)off);
    if (f == MAP_FAILED) return -1;                 /* the range untouched */
    if (mremap(f, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, at) == at) return 0;
    munmap(f, n);                                   /* a failed move leaves its source */
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000   /* Linux 4.17; before, a hint: checked below */
#endif
    void *p = mmap(at, n, prot, MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_POPULATE, a->fd, (off_t)off);
    if (p == at) return 0;                          /* the hole filled with the file */
    if (p != MAP_FAILED) munmap(p, n);              /* an older kernel put it elsewhere */
    return -1;                                      /* EEXIST: the range as it was */
}

#define MOVE_CHUNK ((size_t)16 << 20)

/* Every page of [off, off + n) in the memfd; 0 when they are. */
static int move_range(bf__warena *a, size_t off, size_t n)
{
    size_t pg = bf__warena_page(), first = off / pg, last = (off + n + pg - 1) / pg;
    if (a->fd < 0) {
        int fd = memfd_create("bitflip-weights", MFD_CLOEXEC);
        if (fd < 0) return -1;
        if (ftruncate(fd, (off_t)a->len) != 0) {   /* sparse: pages only where written */
            close(fd);
            return -1;
        }
        a->fd = fd;
    }
    for (size_t i = first; i < last;) {
        if (is_moved(a, i)) { i++; continue; }
        /* a run of unmoved pages, at most MOVE_CHUNK: while a chunk moves
         * its bytes are held twice (the anonymous pages and the file's),
         * so a 647 MiB table costs 16 MiB more at its first view, not 647 */
        size_t j = i;
        while (j < last && !is_moved(a, j) && (j - i) * pg < MOVE_CHUNK) j++;
        if (move_run(a, i * pg, (j - i) * pg) != 0) return -1;
        for (size_t k = i; k < j; k++) a->moved[k / 64] |= (uint64_t)1 << (k % 64);
        a->n_moved += j - i;
        i = j;
    }
    return 0;
}

size_t bf__warena_moved(bf__warena *a)
{
    if (!a) return 0;
    pthread_mutex_lock(&a->mu);
    size_t n = a->n_moved * bf__warena_page();
    pthread_mutex_unlock(&a->mu);
    return n;
}

void *bf__wview_create(bf__warena *a, const void *data, size_t nbytes)
{
    if (!bf__warena_owns(a, data) || nbytes == 0) return NULL;
    size_t off = (size_t)((const uint8_t *)data - a->base);
    if (off % bf__warena_page() || nbytes > a->len - off) return NULL;
    pthread_mutex_lock(&a->mu);
    int ok = move_range(a, off, nbytes) == 0;
    pthread_mutex_unlock(&a->mu);
    if (!ok) return NULL;
    void *p = mmap(NULL, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, a->fd, (off_t)off);
    return p == MAP_FAILED ? NULL : p;
}

void bf__wview_free(void *view, size_t nbytes)
{
    if (view) munmap(view, nbytes);
}

void bf__pages_drop(void *addr, size_t len)
{
    if (len) (void)madvise(addr, len, MADV_DONTNEED);
}

/* MADV_HUGEPAGE over the whole 2 MiB pages inside [addr, addr + len) */
static void pages_huge(void *addr, size_t len)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)addr + huge - 1) & ~(huge - 1), e = ((uintptr_t)addr + len) & ~(huge - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)addr, (void)len;
#endif
}

/* the whole pages of [addr, addr + len) faulted in for writing, one call */
static void pages_populate(void *addr, size_t len)
{
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14; older kernels refuse it (EINVAL), which is fine */
#endif
    size_t pg = bf__warena_page();
    uintptr_t a = ((uintptr_t)addr + pg - 1) / pg * pg, e = ((uintptr_t)addr + len) / pg * pg;
    if (e > a) (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
}

/* warena.h: the huge pages first, so that the populate faults them in */
void bf__pages_written(void *addr, size_t len, unsigned how)
{
    if (!addr || !len) return;
    if ((how & (BF__WRITE_AGAIN | BF__WRITE_HUGE)) ? huge_pages_wanted(1)
                                                   : (how & BF__WRITE_ONCE) && huge_pages_wanted(0))
        pages_huge(addr, len);
    if (how & BF__WRITE_NOW) pages_populate(addr, len);
}

/* mapped, populated (huge pages asked for first when `huge`) and written
 * once, timed in thread CPU: seconds a byte */
static double fresh_cost(size_t len, int huge)
{
    struct timespec t0, t1;
    const size_t two = (size_t)2 << 20;
    size_t map = huge ? round_up(len, two) + two : len;
    if (len == 0 || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0) != 0) return 0;
    void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0;
    void *a = huge ? (void *)round_up((uintptr_t)p, two) : p;
    if (huge) pages_huge(a, round_up(len, two));
    pages_populate(a, len);
    memset(a, 1, len);   /* as the golden pass's copies write them */
    int ok = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1) == 0;
    (void)munmap(p, map);
    if (!ok) return 0;
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return s > 0 ? s / (double)len : 0;
}

double bf__pages_fresh_cost(size_t len) { return fresh_cost(len, 0); }

double bf__pages_fresh_cost_huge(size_t len)
{
#ifdef MADV_HUGEPAGE
    return huge_pages_wanted(1) ? fresh_cost(len, 1) : 0;
#else
    (void)len;
    return 0;
#endif
}

int bf__pages_huge_rule(double small_cost, double huge_cost)
{
    return small_cost > BF__PAGES_DEAR && huge_cost > 0 && huge_cost < BF__PAGES_HUGE_CHEAP;
}

int bf__pages_huge_cheaper(double *small)
{
    double c = bf__pages_fresh_cost((size_t)1 << 20);
    if (small) *small = c;
    /* one huge page, measured only where the small ones are dear: the
     * least of three (0.2 ms each there), since the host's steal lands in
     * thread CPU and one preemption makes a 2 MiB page look dear */
    double h = 0;
    for (int k = 0; k < 3 && c > BF__PAGES_DEAR; k++) {
        double t = bf__pages_fresh_cost_huge((size_t)2 << 20);
        if (t > 0 && (h == 0 || t < h)) h = t;
    }
    return bf__pages_huge_rule(c, h);
}

void bf__wview_drop(void *view, size_t nbytes)
{
    /* MADV_DONTNEED on a private file mapping drops the private copies and
     * unmaps the rest; the next access maps the arena's page again */
    if (view && nbytes) (void)madvise(view, nbytes, MADV_DONTNEED);
}

#else

void bf__pages_drop(void *addr, size_t len) { (void)addr; (void)len; }
void bf__pages_written(void *addr, size_t len, unsigned how) { (void)addr, (void)len, (void)how; }
double bf__pages_fresh_cost(size_t len) { (void)len; return 0; }
double bf__pages_fresh_cost_huge(size_t len) { (void)len; return 0; }
int bf__pages_huge_rule(double small_cost, double huge_cost) { (void)small_cost, (void)huge_cost; return 0; }
int bf__pages_huge_cheaper(double *small)
{
    if (small) *small = 0;
    return 0;
}
bf__warena *bf__warena_create(size_t bytes) { (void)bytes; return NULL; }
bf__warena *bf__warena_create_opts(size_t bytes, int huge) { (void)bytes, (void)huge; return NULL; }
void bf__warena_seal(bf__warena *a) { (void)a; }
void bf__warena_free(bf__warena *a) { (void)a; }
void *bf__wview_create(bf__warena *a, const void *data, size_t nbytes)
{
    (void)a; (void)data; (void)nbytes;
    return NULL;
}
size_t bf__warena_moved(bf__warena *a) { (void)a; return 0; }
void bf__wview_free(void *view, size_t nbytes) { (void)view; (void)nbytes; }
void bf__wview_drop(void *view, size_t nbytes) { (void)view; (void)nbytes; }

#endif

void *bf__warena_take(bf__warena *a, size_t nbytes)
{
    if (!a || nbytes == 0) return NULL;
    size_t need = round_up(nbytes, bf__warena_page());
    if (need > a->len - a->used) return NULL;
    void *p = a->base + a->used;
    a->used += need;
    return p;
}

int bf__warena_owns(const bf__warena *a, const void *p)
{
    return a && p && (const uint8_t *)p >= a->base && (const uint8_t *)p < a->base + a->len;
}

/* limits.h: one measurement, for the caller to hand to every load and
 * campaign of its process */
bf_host_pages bf_host_pages_measure(void)
{
    bf_host_pages hp = {.measured = 1};
    hp.huge = bf__pages_huge_cheaper(&hp.small_cost);
    return hp;
}

int bf__host_pages_huge(const bf_host_pages *hp)
{
    return hp && hp->measured ? hp->huge : bf__pages_huge_cheaper(NULL);
}

void *bf__alloc_written(size_t len, unsigned how)
{
    void *p = len < SIZE_MAX ? bf__malloc(len + 1) : NULL;
    bf__pages_written(p, len, how);
    return p;
}
