/* The weights arena (warena.h): a memfd mapped shared for the model, and
 * private views of it for the plans that write faults. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/warena.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

struct bf__warena {
    int fd;
    uint8_t *base;
    size_t len, used;
};

size_t bf__warena_page(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

#if defined(__linux__) && defined(MFD_CLOEXEC)

bf__warena *bf__warena_create(size_t bytes)
{
    size_t pg = bf__warena_page();
    if (bytes == 0 || bytes > SIZE_MAX - pg) return NULL;
    bf__warena *a = bf__calloc(1, sizeof *a);
    if (!a) return NULL;
    a->len = round_up(bytes, pg);
    a->fd = memfd_create("bitflip-weights", MFD_CLOEXEC);
    if (a->fd < 0) goto fail;
    if (ftruncate(a->fd, (off_t)a->len) != 0) goto fail;
    void *p = mmap(NULL, a->len, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
    if (p == MAP_FAILED) goto fail;
    a->base = p;
    return a;
fail:
    if (a->fd >= 0) close(a->fd);
    bf__free(a);
    return NULL;
}

void bf__warena_seal(bf__warena *a)
{
    if (a) (void)mprotect(a->base, a->len, PROT_READ);
}

void bf__warena_free(bf__warena *a)
{
    if (!a) return;
    munmap(a->base, a->len);
    close(a->fd);
    bf__free(a);
}

void *bf__wview_create(const bf__warena *a, const void *data, size_t nbytes)
{
    if (!bf__warena_owns(a, data) || nbytes == 0) return NULL;
    size_t off = (size_t)((const uint8_t *)data - a->base);
    if (off % bf__warena_page() || nbytes > a->len - off) return NULL;
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

void bf__pages_huge(void *addr, size_t len)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)addr + huge - 1) & ~(huge - 1), e = ((uintptr_t)addr + len) & ~(huge - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)addr, (void)len;
#endif
}

void bf__pages_populate(void *addr, size_t len)
{
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14; older kernels refuse it (EINVAL), which is fine */
#endif
    size_t pg = bf__warena_page();
    uintptr_t a = ((uintptr_t)addr + pg - 1) / pg * pg, e = ((uintptr_t)addr + len) / pg * pg;
    if (e > a) (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
}

void bf__wview_drop(void *view, size_t nbytes)
{
    /* MADV_DONTNEED on a private file mapping drops the private copies and
     * unmaps the rest; the next access maps the arena's page again */
    if (view && nbytes) (void)madvise(view, nbytes, MADV_DONTNEED);
}

#else

void bf__pages_drop(void *addr, size_t len) { (void)addr; (void)len; }
void bf__pages_populate(void *addr, size_t len) { (void)addr; (void)len; }
void bf__pages_huge(void *addr, size_t len) { (void)addr; (void)len; }
bf__warena *bf__warena_create(size_t bytes) { (void)bytes; return NULL; }
void bf__warena_seal(bf__warena *a) { (void)a; }
void bf__warena_free(bf__warena *a) { (void)a; }
void *bf__wview_create(const bf__warena *a, const void *data, size_t nbytes)
{
    (void)a; (void)data; (void)nbytes;
    return NULL;
}
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
