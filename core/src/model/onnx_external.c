/* An initializer whose data lives in a file beside the model (ONNX's
 * external data: TensorProto.data_location EXTERNAL, written by
 * onnx.save_model(..., save_as_external_data=True) and by torch.onnx.export
 * for models past protobuf's 2 GiB). Its external_data entries say where:
 * "location" (a path relative to the model's directory), "offset" and
 * "length" (bytes; default 0 and the rest of the file), "checksum" (not
 * verified: the length and the tensor's dims are). The bytes are read into
 * a buffer the caller frees, and then converted exactly as raw_data is
 * (onnx_tensor.c's check insists they are numel * element size).
 *
 * Nothing in the file is trusted: the location must stay inside the model's
 * directory (relative, no ".." component: the ONNX checker's own rule), the
 * file must be a regular file, and offset + length must lie within it, all
 * before anything is allocated (the length is then bounded by a file that
 * exists). A model loaded from a caller's buffer has no directory, and its
 * external tensors are refused with onnx_tensor.c's error. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "model/onnx_load.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* A decimal count of bytes, the whole string and nothing else. */
static int parse_size(const char *s, unsigned long long *out)
{
    if (!s || !*s || *s < '0' || *s > '9') return 0;
    errno = 0;
    char *end = NULL;
    *out = strtoull(s, &end, 10);
    return errno == 0 && end && !*end;
}

/* Whether loc stays in the model's directory: not absolute, no ".."
 * component, no backslash (a Windows separator that could hide one). */
static int inside(const char *loc)
{
    if (!loc[0] || loc[0] == '/' || strchr(loc, '\\')) return 0;
    for (const char *p = loc; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
        p += n + (e ? 1 : 0);
    }
    return 1;
}

int bf__tensor_is_external(const Onnx__TensorProto *tp)
{
    return tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

bf_status bf__external_read(const Onnx__TensorProto *tp, const char *dir, const char *what, uint8_t **data,
                            size_t *len, bf_error *err)
{
    const char *loc = NULL, *off_s = NULL, *len_s = NULL;
    unsigned long long off = 0, want = 0;
    *data = NULL;
    *len = 0;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e || !e->key) continue;
        if (!strcmp(e->key, "location")) loc = e->value;
        else if (!strcmp(e->key, "offset")) off_s = e->value;
        else if (!strcmp(e->key, "length")) len_s = e->value;
    }
    if (!loc) return bf_error_set(err, BF_EFORMAT, "%s keeps its data in an external file but names none (no 'location')", what);
    if (!inside(loc))
        return bf_error_set(err, BF_EFORMAT, "%s: external data location '%.200s' is not a path inside the model's directory "
                            "(absolute, or with a '..' component)", what, loc);
    if ((off_s && !parse_size(off_s, &off)) || (len_s && !parse_size(len_s, &want)))
        return bf_error_set(err, BF_EFORMAT, "%s: external data offset '%.40s' or length '%.40s' is not a count of bytes",
                            what, off_s ? off_s : "", len_s ? len_s : "");
    char path[PATH_MAX];
    int w = snprintf(path, sizeof path, "%s/%s", dir, loc);
    if (w < 0 || (size_t)w >= sizeof path)
        return bf_error_set(err, BF_EINVAL, "%s: external data path '%.200s/%.200s' is too long", what, dir, loc);
    FILE *f = fopen(path, "rb");
    if (!f)
        return bf_error_set(err, errno == ENOENT ? BF_ENOTFOUND : BF_EIO, "%s: cannot open its external data file %s: %s",
                            what, path, strerror(errno));
    bf_status st = BF_OK;
    struct stat sb;
    uint8_t *buf = NULL;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 0) {
        st = bf_error_set(err, BF_EIO, "%s: its external data %s is not a regular file", what, path);
        goto out;
    }
    unsigned long long size = (unsigned long long)sb.st_size;
    if (off > size || (len_s && want > size - off)) {
        st = bf_error_set(err, BF_EFORMAT, "%s: external data at offset %llu, %llu bytes, lies past the end of %s (%llu bytes)",
                          what, off, len_s ? want : 0ULL, path, size);
        goto out;
    }
    if (!len_s) want = size - off;
    if (want > (unsigned long long)SIZE_MAX - 1 || want > (unsigned long long)LONG_MAX) {
        st = bf_error_set(err, BF_EUNSUPPORTED, "%s: external data of %llu bytes is too large to read", what, want);
        goto out;
    }
    buf = bf__malloc((size_t)want + 1);   /* + 1: a zero-length tensor still gets a buffer */
    if (!buf) { st = bf_error_set(err, BF_ENOMEM, "%s: out of memory for %llu bytes of external data", what, want); goto out; }
    if (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, (size_t)want, f) != (size_t)want) {
        st = bf_error_set(err, BF_EIO, "%s: reading %llu bytes of %s at offset %llu failed", what, want, path, off);
        goto out;
    }
    *data = buf;
    *len = (size_t)want;
    buf = NULL;
out:
    bf__free(buf);
    fclose(f);
    return st;
}
