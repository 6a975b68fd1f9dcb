/* Blobs by content address. The rename is the commit point: a blob path
 * appears only after its bytes are fsync'd, and the directory holding the new
 * name is fsync'd after, so a power cut leaves either no blob or all of it.
 * Files and directories are private to the daemon (0600/0700): they hold
 * tenants' models and data. */
#include "store/blob.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/sha256.h"

struct bfd_blobs {
    char *blobs;              /* DIR/blobs */
    char *tmp;                /* DIR/tmp */
};

struct bfd_upload {
    bfd_blobs *b;
    int fd;
    char *path;               /* the temp file */
    bfd_sha256 sha;
    int64_t size;
    int failed;               /* a write failed: the content is not what was sent */
};

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int valid_hex64(const char *s)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (i >= 64 || !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return i == 64;
}

/* Flushes a directory's entries: the rename or mkdir in it is durable after. */
static bf_status sync_dir(const char *path, bf_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return bf_error_set(err, BF_EIO, "%s: cannot open directory to sync: %s", path, strerror(errno));
    /* some filesystems cannot fsync a directory (EINVAL): nothing more to do there */
    bf_status st = BF_OK;
    if (fsync(fd) != 0 && errno != EINVAL)
        st = bf_error_set(err, BF_EIO, "%s: cannot sync directory: %s", path, strerror(errno));
    close(fd);
    return st;
}

static bf_status make_dir(const char *path, const char *parent, bf_error *err)
{
    if (mkdir(path, 0700) == 0) return sync_dir(parent, err);   /* the new name must survive a crash */
    if (errno != EEXIST) return bf_error_set(err, BF_EIO, "%s: cannot create directory: %s", path, strerror(errno));
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return bf_error_set(err, BF_EIO, "%s: exists and is not a directory", path);
    return BF_OK;
}

/* The message prefix for a failed write: disk full or not. */
static const char *full(int e)
{
    return e == ENOSPC || e == EDQUOT ? BFD_DISK_FULL : "";
}

static bf_status write_all(int fd, const void *data, size_t len, const char *path, bf_error *err)
{
    const char *p = data;
    while (len > 0) {   /* write(2) may take less than asked, or be interrupted */
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return bf_error_set(err, BF_EIO, "%s%s: cannot write: %s", full(errno), path, strerror(errno));
        }
        p += w;
        len -= (size_t)w;
    }
    return BF_OK;
}

/* fsync then close; both can report a write that failed late (NFS, full disk). */
static bf_status sync_close(int fd, const char *path, bf_error *err)
{
    bf_status st = BF_OK;
    if (fsync(fd) != 0) st = bf_error_set(err, BF_EIO, "%s%s: cannot sync: %s", full(errno), path, strerror(errno));
    if (close(fd) != 0 && !st)
        st = bf_error_set(err, BF_EIO, "%s%s: cannot close: %s", full(errno), path, strerror(errno));
    return st;
}

/* A fresh temp file from `templ` (ending in XXXXXX, rewritten in place). */
static bf_status temp_file(char *templ, int *fd, bf_error *err)
{
    *fd = mkstemp(templ);
    if (*fd < 0) return bf_error_set(err, BF_EIO, "%s: cannot create temp file: %s", templ, strerror(errno));
    /* the daemon may one day run helpers: they must not inherit upload fds */
    if (fcntl(*fd, F_SETFD, FD_CLOEXEC) != 0) {
        bf_status st = bf_error_set(err, BF_EIO, "%s: cannot set close-on-exec: %s", templ, strerror(errno));
        close(*fd);
        unlink(templ);
        *fd = -1;
        return st;
    }
    return BF_OK;
}

/* Removes the files a crash left in DIR/tmp: uploads nobody will finish. */
static bf_status clear_dir(const char *path, bf_error *err)
{
    bf_status st = BF_OK;
    char *file = NULL;
    DIR *d = opendir(path);
    if (!d) return bf_error_set(err, BF_EIO, "%s: cannot open directory: %s", path, strerror(errno));
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno) st = bf_error_set(err, BF_EIO, "%s: cannot read directory: %s", path, strerror(errno));
            break;
        }
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!(file = join(path, e->d_name))) {
            st = bf_error_set(err, BF_ENOMEM, "%s: out of memory", path);
            goto out;
        }
        if (unlink(file) != 0 && errno != ENOENT) {
            st = bf_error_set(err, BF_EIO, "%s: cannot remove stale temp file: %s", file, strerror(errno));
            goto out;
        }
        free(file);
        file = NULL;
    }

out:
    free(file);
    closedir(d);
    return st;
}

bf_status bfd_blobs_open(const char *dir, bfd_blobs **out, bf_error *err)
{
    bf_status st = BF_OK;
    bfd_blobs *b = NULL;
    *out = NULL;
    if (!(b = calloc(1, sizeof *b)) || !(b->blobs = join(dir, "blobs")) || !(b->tmp = join(dir, "tmp"))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory opening the blob store", dir);
        goto out;
    }
    if ((st = make_dir(b->blobs, dir, err))) goto out;
    if ((st = make_dir(b->tmp, dir, err))) goto out;
    if ((st = clear_dir(b->tmp, err))) goto out;
    *out = b;
    b = NULL;

out:
    bfd_blobs_close(b);
    return st;
}

void bfd_blobs_close(bfd_blobs *b)
{
    if (!b) return;
    free(b->blobs);
    free(b->tmp);
    free(b);
}

bf_status bfd_upload_begin(bfd_blobs *b, bfd_upload **out, bf_error *err)
{
    bf_status st = BF_OK;
    bfd_upload *u = NULL;
    *out = NULL;
    if (!(u = calloc(1, sizeof *u)) || !(u->path = join(b->tmp, "upload-XXXXXX"))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory starting an upload", b->tmp);
        goto out;
    }
    u->b = b;
    u->fd = -1;
    if ((st = bfd_sha256_init(&u->sha, err))) goto out;
    if ((st = temp_file(u->path, &u->fd, err))) goto out;
    *out = u;
    u = NULL;

out:
    if (u) {
        bfd_sha256_free(&u->sha);
        free(u->path);
        free(u);
    }
    return st;
}

bf_status bfd_upload_write(bfd_upload *u, const void *data, size_t len, bf_error *err)
{
    if (u->failed) return bf_error_set(err, BF_EIO, "%s: an earlier write failed", u->path);
    bf_status st = write_all(u->fd, data, len, u->path, err);
    if (st) {
        u->failed = 1;
        return st;
    }
    if ((st = bfd_sha256_update(&u->sha, data, len, err))) {
        u->failed = 1;
        return st;
    }
    u->size += (int64_t)len;
    return BF_OK;
}

int64_t bfd_upload_size(const bfd_upload *u)
{
    return u->size;
}

bf_status bfd_upload_finish(bfd_upload *u, char sha_hex[65], bf_error *err)
{
    bf_status st = BF_OK;
    char *sub = NULL, *dest = NULL;
    uint8_t digest[32];
    char prefix[3];
    sha_hex[0] = '\0';
    if (u->failed) {
        st = bf_error_set(err, BF_EIO, "%s: an earlier write failed", u->path);
        goto out;
    }
    st = sync_close(u->fd, u->path, err);
    u->fd = -1;
    if (st) goto out;
    if ((st = bfd_sha256_final(&u->sha, digest, err))) goto out;
    bfd_hex(digest, sizeof digest, sha_hex);
    memcpy(prefix, sha_hex, 2);
    prefix[2] = '\0';
    if (!(sub = join(u->b->blobs, prefix)) || !(dest = join(sub, sha_hex))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory finishing an upload", u->path);
        goto out;
    }
    if ((st = make_dir(sub, u->b->blobs, err))) goto out;
    /* Same bytes already stored: the fresh copy replaces it all the same
     * (rename is atomic, readers keep the file they opened), so uploading a
     * model again repairs a blob that rotted on disk. */
    if (rename(u->path, dest) != 0) {
        st = bf_error_set(err, BF_EIO, "%s: cannot rename to %s: %s", u->path, dest, strerror(errno));
        goto out;
    }
    /* the temp name is free now and a concurrent upload may draw it: never unlink it */
    free(u->path);
    u->path = NULL;
    if ((st = sync_dir(sub, err))) goto out;

out:
    if (st) sha_hex[0] = '\0';
    bfd_upload_abort(u);   /* closes and unlinks what is still ours: after the rename, nothing */
    free(sub);
    free(dest);
    return st;
}

void bfd_upload_abort(bfd_upload *u)
{
    if (!u) return;
    bfd_sha256_free(&u->sha);
    if (u->fd >= 0) close(u->fd);
    if (u->path) {
        unlink(u->path);
        free(u->path);
    }
    free(u);
}

char *bfd_blob_path(const bfd_blobs *b, const char *sha_hex)
{
    /* ids arrive in URLs: never let one reach outside DIR/blobs */
    if (!valid_hex64(sha_hex)) return NULL;
    size_t n = strlen(b->blobs) + 4 + 64 + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%.2s/%s", b->blobs, sha_hex, sha_hex);
    return p;
}

bf_status bfd_blob_remove(bfd_blobs *b, const char *sha_hex, bf_error *err)
{
    if (!valid_hex64(sha_hex))
        return bf_error_set(err, BF_EINVAL, "blob id '%.80s' is not 64 lower-case hex digits", sha_hex);
    char *p = bfd_blob_path(b, sha_hex);
    if (!p) return bf_error_set(err, BF_ENOMEM, "out of memory removing blob %s", sha_hex);
    bf_status st = BF_OK;
    if (unlink(p) != 0 && errno != ENOENT) st = bf_error_set(err, BF_EIO, "%s: cannot remove: %s", p, strerror(errno));
    free(p);
    return st;
}

bf_status bfd_blob_verify(const char *path, const char *what, bf_error *err)
{
    enum { CHUNK = 1 << 16 };
    bf_status st = BF_OK;
    bfd_sha256 sha = {0};
    uint8_t *buf = NULL, digest[32];
    char got[65];
    int fd = -1;
    const char *id = strrchr(path, '/');
    id = id ? id + 1 : path;
    if (!valid_hex64(id)) return bf_error_set(err, BF_EINVAL, "%s: a blob's name is its sha256 (64 hex digits)", path);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        st = bf_error_set(err, errno == ENOENT ? BF_ENOTFOUND : BF_EIO, "%s blob %s: cannot open %s: %s", what, id,
                          path, strerror(errno));
        goto out;
    }
    if (!(buf = malloc(CHUNK))) { st = bf_error_set(err, BF_ENOMEM, "%s blob %s: out of memory", what, id); goto out; }
    if ((st = bfd_sha256_init(&sha, err))) goto out;
    for (;;) {
        ssize_t n = read(fd, buf, CHUNK);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { st = bf_error_set(err, BF_EIO, "%s blob %s: cannot read: %s", what, id, strerror(errno)); goto out; }
        if (n == 0) break;
        if ((st = bfd_sha256_update(&sha, buf, (size_t)n, err))) goto out;
    }
    if ((st = bfd_sha256_final(&sha, digest, err))) goto out;
    bfd_hex(digest, sizeof digest, got);
    if (strcmp(got, id))
        st = bf_error_set(err, BF_EFORMAT, "%s blob %s is corrupt (sha256 mismatch): its bytes hash to %.16s... now; "
                          "upload the %s again to repair it", what, id, got, what);

out:
    bfd_sha256_free(&sha);
    free(buf);
    if (fd >= 0) close(fd);
    return st;
}

int bfd_blob_corrupt_named(const char *msg, char what[16], char id[65])
{
    static const char *const kinds[] = {"model", "dataset", "error map"};
    for (size_t k = 0; msg && k < sizeof kinds / sizeof kinds[0]; k++) {
        char head[24];
        snprintf(head, sizeof head, "%s blob ", kinds[k]);
        for (const char *p = strstr(msg, head); p; p = strstr(p + 1, head)) {
            const char *h = p + strlen(head);
            char cand[65];
            if (strlen(h) < 64) break;
            memcpy(cand, h, 64);
            cand[64] = '\0';
            if (valid_hex64(cand) && !strncmp(h + 64, " is corrupt (sha256 mismatch)", 29)) {
                snprintf(what, 16, "%s", kinds[k]);
                memcpy(id, cand, 65);
                return 1;
            }
        }
    }
    return 0;
}

int bfd_error_disk_full(const bf_error *err)
{
    return err && err->status != BF_OK && strstr(err->msg, BFD_DISK_FULL) != NULL;
}

bf_status bfd_write_atomic(const char *path, const void *data, size_t len, bf_error *err)
{
    bf_status st = BF_OK;
    char *tmp = NULL, *dir = NULL;
    int fd = -1;
    size_t n = strlen(path);
    if (n == 0) return bf_error_set(err, BF_EINVAL, "cannot write a file with an empty path");
    if (!(tmp = malloc(n + sizeof ".tmp-XXXXXX")) || !(dir = strdup(path))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory writing", path);
        goto out;
    }
    /* beside the target, so the rename stays within one filesystem */
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");   /* dir has room: path is at least one byte */
    else if (slash == dir)
        dir[1] = '\0';      /* "/file": the root */
    else
        *slash = '\0';
    if ((st = temp_file(tmp, &fd, err))) goto out;
    if ((st = write_all(fd, data, len, tmp, err))) goto out;
    st = sync_close(fd, tmp, err);
    fd = -1;
    if (st) goto out;
    if (rename(tmp, path) != 0) {
        st = bf_error_set(err, BF_EIO, "%s: cannot replace with %s: %s", path, tmp, strerror(errno));
        goto out;
    }
    free(tmp);   /* renamed: nothing left to unlink */
    tmp = NULL;
    st = sync_dir(dir, err);

out:
    if (fd >= 0) close(fd);
    if (tmp) {
        unlink(tmp);   /* also ENOENT when mkstemp itself failed */
        free(tmp);
    }
    free(dir);
    return st;
}
