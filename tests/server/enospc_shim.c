/* A disk that fills up, for tests: LD_PRELOAD this library and writes to
 * regular files (not stdin/out/err, not sockets or pipes) succeed until
 * BFD_ENOSPC_BUDGET bytes have been written, then fail with ENOSPC, as a
 * full filesystem does: the write that crosses the line is cut short, the
 * next fails, and so does fsync. With BFD_ENOSPC_ARM=PATH the budget only
 * counts while PATH exists, so a test can start the daemon normally and
 * "fill the disk" later (touch PATH) and free it again (rm PATH).
 *
 * Interposes write, pwrite, pwrite64, writev, fsync and fdatasync: what
 * blob.c (write, fsync) and SQLite's unix VFS (pwrite64, fsync/fdatasync)
 * call. stdio's internal writes bypass it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long long used;        /* bytes counted so far (atomic) */

static long long budget(void)
{
    const char *b = getenv("BFD_ENOSPC_BUDGET");
    return b ? atoll(b) : 0;
}

static int armed(void)
{
    const char *arm = getenv("BFD_ENOSPC_ARM");
    return !arm || access(arm, F_OK) == 0;
}

static int counted(int fd)
{
    struct stat sb;
    return fd > 2 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && armed();
}

/* How many of `len` bytes may be written now: len, fewer, or -1 (ENOSPC). */
static ssize_t allow(int fd, size_t len)
{
    if (!counted(fd) || len == 0) return (ssize_t)len;
    long long left = budget() - __atomic_load_n(&used, __ATOMIC_SEQ_CST);
    if (left <= 0) {
        errno = ENOSPC;
        return -1;
    }
    size_t take = (long long)len > left ? (size_t)left : len;
    __atomic_add_fetch(&used, (long long)take, __ATOMIC_SEQ_CST);
    return (ssize_t)take;
}

static int full_now(int fd)
{
    if (counted(fd) && __atomic_load_n(&used, __ATOMIC_SEQ_CST) >= budget()) {
        errno = ENOSPC;
        return 1;
    }
    return 0;
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*pwrite64_fn)(int, const void *, size_t, off64_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef int (*sync_fn)(int);

/* The next definition of `name` (libc's), looked up once. */
#define REAL(name, type) \
    static type real_##name; \
    if (!real_##name) real_##name = (type)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t len)
{
    REAL(write, write_fn);
    ssize_t n = allow(fd, len);
    return n < 0 ? -1 : real_write(fd, buf, (size_t)n);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    REAL(pwrite, pwrite_fn);
    ssize_t n = allow(fd, len);
    return n < 0 ? -1 : real_pwrite(fd, buf, (size_t)n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
    REAL(pwrite64, pwrite64_fn);
    ssize_t n = allow(fd, len);
    return n < 0 ? -1 : real_pwrite64(fd, buf, (size_t)n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    REAL(writev, writev_fn);
    REAL(write, write_fn);
    size_t len = 0;
    for (int i = 0; i < cnt; i++) len += iov[i].iov_len;
    ssize_t n = allow(fd, len);
    if (n < 0) return -1;
    if ((size_t)n == len) return real_writev(fd, iov, cnt);
    /* cut short: the first buffer's share, as a short write */
    return real_write(fd, iov[0].iov_base, (size_t)n < iov[0].iov_len ? (size_t)n : iov[0].iov_len);
}

int fsync(int fd)
{
    REAL(fsync, sync_fn);
    return full_now(fd) ? -1 : real_fsync(fd);
}

int fdatasync(int fd)
{
    REAL(fdatasync, sync_fn);
    return full_now(fd) ? -1 : real_fdatasync(fd);
}
