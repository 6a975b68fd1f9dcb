/* Publishing a file atomically (bitflip/api/atomic_file.h). */
#include "bitflip/api/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Trial records arrive a few hundred bytes at a time, thousands a second:
 * a write(2) each would cost more than making them. */
#define BUF_SIZE 65536

struct bf_afile {
    int fd;
    char *tmp;                /* the temp file's path; NULL once renamed */
    char *dest;               /* the target given at open, or NULL */
    unsigned mode;
    int failed;               /* a write failed: the content is not what was given */
    int unbuffered;
    size_t used;
    char buf[BUF_SIZE];
};

/* The message prefix for a failed write: disk full or not. */
static const char *full(int e)
{
    return e == ENOSPC || e == EDQUOT ? BF_DISK_FULL : "";
}

/* The directory part of `path` (malloc'd): "." for a bare name, "/" for a file at the root. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (!slash) memcpy(d, ".", 1);
    else if (slash == path) memcpy(d, "/", 1);
    else memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

bf_status bf_sync_dir(const char *dir, bf_error *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return bf_error_set(err, BF_EIO, "%s: cannot open directory to sync: %s", dir, strerror(errno));
    bf_status st = BF_OK;
    if (fsync(fd) != 0 && errno != EINVAL)
        st = bf_error_set(err, BF_EIO, "%s: cannot sync directory: %s", dir, strerror(errno));
    close(fd);
    return st;
}

/* Makes f's temp file from the template f->tmp (ending in XXXXXX). */
static bf_status make_temp(bf_afile *f, bf_error *err)
{
    f->fd = mkstemp(f->tmp);
    if (f->fd < 0) {
        /* named by the target too: the caller knows that name, not the temp's */
        bf_status st = f->dest ? bf_error_set(err, BF_EIO, "%s: cannot create temp file %s: %s", f->dest, f->tmp, strerror(errno))
                               : bf_error_set(err, BF_EIO, "%s: cannot create temp file: %s", f->tmp, strerror(errno));
        free(f->tmp);   /* nothing was created: nothing to unlink */
        f->tmp = NULL;
        return st;
    }
    /* the daemon runs helpers (sbatch, workers): they must not inherit it */
    if (fcntl(f->fd, F_SETFD, FD_CLOEXEC) != 0)
        return bf_error_set(err, BF_EIO, "%s: cannot set close-on-exec: %s", f->tmp, strerror(errno));
    /* mkstemp makes 0600, whatever the umask */
    if (f->mode != 0600 && fchmod(f->fd, (mode_t)f->mode) != 0)
        return bf_error_set(err, BF_EIO, "%s: cannot set its mode: %s", f->tmp, strerror(errno));
    return BF_OK;
}

static bf_status start(const char *templ_dir, const char *templ_name, const char *dest, unsigned mode, bf_afile **out,
                       bf_error *err)
{
    bf_status st = BF_OK;
    bf_afile *f = NULL;
    *out = NULL;
    if (!(f = calloc(1, sizeof *f))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory writing", dest ? dest : templ_dir);
        goto out;
    }
    f->fd = -1;
    f->mode = mode;
    size_t n = strlen(templ_dir) + strlen(templ_name) + sizeof "/.tmp-XXXXXX";
    if ((dest && !(f->dest = strdup(dest))) || !(f->tmp = malloc(n))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory writing", dest ? dest : templ_dir);
        goto out;
    }
    snprintf(f->tmp, n, "%s/%s", templ_dir, templ_name);
    if ((st = make_temp(f, err))) goto out;
    *out = f;
    f = NULL;
out:
    bf_afile_abort(f);
    return st;
}

bf_status bf_afile_open(const char *path, unsigned mode, bf_afile **out, bf_error *err)
{
    *out = NULL;
    if (!path || !*path) return bf_error_set(err, BF_EINVAL, "cannot write a file with an empty path");
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return bf_error_set(err, BF_EINVAL, "%s: names a directory, not a file", path);
    char *dir = dir_of(path), *name = malloc(strlen(base) + sizeof ".tmp-XXXXXX" + 1);
    bf_status st = BF_OK;
    if (!dir || !name) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory writing", path);
        goto out;
    }
    sprintf(name, ".%s.tmp-XXXXXX", base);
    st = start(dir, name, path, mode, out, err);
out:
    free(dir);
    free(name);
    return st;
}

bf_status bf_afile_open_in(const char *tmp_dir, unsigned mode, bf_afile **out, bf_error *err)
{
    return start(tmp_dir, "upload-XXXXXX", NULL, mode, out, err);
}

static bf_status flush_buf(bf_afile *f, bf_error *err)
{
    const char *p = f->buf;
    size_t len = f->used;
    while (len > 0) {   /* write(2) may take less than asked, or be interrupted */
        ssize_t w = write(f->fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            f->failed = 1;
            return bf_error_set(err, BF_EIO, "%s%s: cannot write: %s", full(errno), f->tmp, strerror(errno));
        }
        p += w;
        len -= (size_t)w;
    }
    f->used = 0;
    return BF_OK;
}

void bf_afile_unbuffered(bf_afile *f)
{
    f->unbuffered = 1;
}

bf_status bf_afile_write(bf_afile *f, const void *data, size_t len, bf_error *err)
{
    if (f->failed) return bf_error_set(err, BF_EIO, "%s: an earlier write failed", f->tmp);
    const char *p = data;
    while (len > 0) {
        size_t take = BUF_SIZE - f->used < len ? BUF_SIZE - f->used : len;
        memcpy(f->buf + f->used, p, take);
        f->used += take;
        p += take;
        len -= take;
        bf_status st;
        if ((f->used == BUF_SIZE || f->unbuffered) && (st = flush_buf(f, err))) return st;
    }
    return BF_OK;
}

bf_status bf_afile_commit(bf_afile *f, const char *path, bf_error *err)
{
    bf_status st = BF_OK;
    char *dir = NULL;
    const char *dest = path ? path : f->dest;
    if (!dest) {
        st = bf_error_set(err, BF_EINVAL, "%s: committed without a name", f->tmp);
        goto out;
    }
    if (f->failed) {
        st = bf_error_set(err, BF_EIO, "%s: an earlier write failed", f->tmp);
        goto out;
    }
    if ((st = flush_buf(f, err))) goto out;
    int fd = f->fd;
    f->fd = -1;
    if (fsync(fd) != 0) st = bf_error_set(err, BF_EIO, "%s%s: cannot sync: %s", full(errno), f->tmp, strerror(errno));
    /* close can report a write that failed late (NFS, a full disk) */
    if (close(fd) != 0 && !st)
        st = bf_error_set(err, BF_EIO, "%s%s: cannot close: %s", full(errno), f->tmp, strerror(errno));
    if (st) goto out;
    if (!(dir = dir_of(dest))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory writing", dest);
        goto out;
    }
    if (rename(f->tmp, dest) != 0) {
        st = bf_error_set(err, BF_EIO, "%s: cannot replace with %s: %s", dest, f->tmp, strerror(errno));
        goto out;
    }
    /* the temp name is free now and another writer may draw it: never unlink it */
    free(f->tmp);
    f->tmp = NULL;
    st = bf_sync_dir(dir, err);
out:
    free(dir);
    bf_afile_abort(f);
    return st;
}

void bf_afile_abort(bf_afile *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) {
        unlink(f->tmp);
        free(f->tmp);
    }
    free(f->dest);
    free(f);
}

bf_status bf_write_atomic(const char *path, const void *data, size_t len, unsigned mode, bf_error *err)
{
    bf_afile *f = NULL;
    bf_status st = bf_afile_open(path, mode, &f, err);
    if (st) return st;
    if ((st = bf_afile_write(f, data, len, err))) {
        bf_afile_abort(f);
        return st;
    }
    return bf_afile_commit(f, NULL, err);
}
