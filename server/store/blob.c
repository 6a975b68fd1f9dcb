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

#include "bitflip/api/atomic_file.h"
#include "store/sha256.h"

struct bfd_blobs {
    char *blobs;              /* DIR/blobs */
    char *tmp;                /* DIR/tmp */
};

struct bfd_upload {
    bfd_blobs *b;
    bf_afile *f;              /* the temp file in DIR/tmp; NULL once committed */
    bfd_sha256 sha;
    int64_t size;
    int failed;               /* hashing failed: the name would not be the content's */
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

static bf_status make_dir(const char *path, const char *parent, bf_error *err)
{
    if (mkdir(path, 0700) == 0) return bf_sync_dir(parent, err);   /* the new name must survive a crash */
    if (errno != EEXIST) return bf_error_set(err, BF_EIO, "%s: cannot create directory: %s", path, strerror(errno));
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return bf_error_set(err, BF_EIO, "%s: exists and is not a directory", path);
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
    if (!(u = calloc(1, sizeof *u))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory starting an upload", b->tmp);
        goto out;
    }
    u->b = b;
    if ((st = bfd_sha256_init(&u->sha, err))) goto out;
    if ((st = bf_afile_open_in(b->tmp, 0600, &u->f, err))) goto out;
    /* a full disk is refused at the piece of the body that hit it */
    bf_afile_unbuffered(u->f);
    *out = u;
    u = NULL;

out:
    if (u) {
        bfd_sha256_free(&u->sha);
        free(u);
    }
    return st;
}

bf_status bfd_upload_write(bfd_upload *u, const void *data, size_t len, bf_error *err)
{
    if (u->failed) return bf_error_set(err, BF_EIO, "an upload to %s: an earlier write failed", u->b->tmp);
    bf_status st = bf_afile_write(u->f, data, len, err);   /* spoiled for good if it fails */
    if (st) return st;
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
        st = bf_error_set(err, BF_EIO, "an upload to %s: an earlier write failed", u->b->tmp);
        goto out;
    }
    if ((st = bfd_sha256_final(&u->sha, digest, err))) goto out;
    bfd_hex(digest, sizeof digest, sha_hex);
    memcpy(prefix, sha_hex, 2);
    prefix[2] = '\0';
    if (!(sub = join(u->b->blobs, prefix)) || !(dest = join(sub, sha_hex))) {
        st = bf_error_set(err, BF_ENOMEM, "%s: out of memory finishing an upload", u->b->tmp);
        goto out;
    }
    if ((st = make_dir(sub, u->b->blobs, err))) goto out;
    /* Same bytes already stored: the fresh copy replaces it all the same
     * (rename is atomic, readers keep the file they opened), so uploading a
     * model again repairs a blob that rotted on disk. The commit fsyncs the
     * file before and the directory after the rename. */
    st = bf_afile_commit(u->f, dest, err);
    u->f = NULL;   /* committed or dropped: freed either way */

out:
    if (st) sha_hex[0] = '\0';
    bfd_upload_abort(u);
    free(sub);
    free(dest);
    return st;
}

void bfd_upload_abort(bfd_upload *u)
{
    if (!u) return;
    bfd_sha256_free(&u->sha);
    bf_afile_abort(u->f);
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

void bfd_blob_scrub(char *msg, const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!msg || !slash) return;
    size_t dir = (size_t)(slash - path) + 1;
    for (char *at = msg; *at;) {
        if (!strncmp(at, path, dir)) memmove(at, at + dir, strlen(at + dir) + 1);
        else at++;
    }
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
