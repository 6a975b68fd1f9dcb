/* Eval sets in safetensors: an 8-byte little-endian header length, a JSON
 * header giving each tensor's dtype, shape and byte range in the data section,
 * then the data. Uploads are hostile, so every header field is checked before
 * a byte of data is touched. The format does not align tensor data, so each
 * tensor is copied to a 64-byte boundary inside one block the dataset owns;
 * files are read header first, then tensor by tensor, never held twice. */
#include "bitflip/dataset.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "bitflip/limits.h"
#include "model/dataset_det.h"

bf_dataset_limits bf_dataset_limits_resolve(const bf_dataset_limits *lim)
{
    bf_dataset_limits r = lim ? *lim : (bf_dataset_limits){0};
    if (r.max_header_bytes <= 0) r.max_header_bytes = BF_LIMIT_ST_HEADER_BYTES_DEFAULT;
    if (r.max_json_depth <= 0) r.max_json_depth = BF_LIMIT_ST_JSON_DEPTH_DEFAULT;
    if (r.max_tensors <= 0) r.max_tensors = BF_LIMIT_ST_TENSORS_DEFAULT;
    if (r.max_bytes <= 0) r.max_bytes = BF_LIMIT_ST_BYTES_DEFAULT;
    return r;
}

/* Nesting depth of JSON text, counted over brackets outside strings, before
 * jansson parses it: jansson recurses up to its own limit of 2048, and a
 * header needs 3. Returns the offset of the first bracket past `max`, or -1. */
static long json_too_deep(const char *s, size_t n, int max)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') in_str = 1;
        else if (c == '[' || c == '{') {
            if (++depth > max) return (long)i;
        } else if ((c == ']' || c == '}') && depth > 0) depth--;
    }
    return -1;
}

#define DATA_ALIGN 64
/* an eval set of this many bytes or more asks whether this host's 2 MiB
 * pages are cheap and its 4 KiB ones dear (the caller's measurement,
 * bf_dataset_limits.host_pages, else bf__pages_huge_cheaper: about 3 ms of
 * CPU where 4 KiB pages are dear, against 20 ms or more for the set's
 * pages there), and takes them then (BF__WRITE_HUGE) */
#define HUGE_MEASURE_BYTES ((size_t)8 << 20)
#define NAME_FMT "%.128s"   /* names come from the file: keep messages readable */

struct bf_dataset {
    bf_tensor *tensors;     /* file order */
    size_t num_tensors;
    int64_t num_samples;
    char *names;            /* every tensor name, NUL-separated */
    void *storage;          /* every tensor's data */
};

/* Where a tensor's bytes are, relative to the start of the data section. */
typedef struct span {
    uint64_t begin, end;
    size_t tensor;
} span;

/* Where the data section comes from: memory, or an open file. */
typedef struct source {
    const unsigned char *mem;
    FILE *file;
    uint64_t file_offset;   /* of the data section */
} source;

static const struct {
    const char *name;
    bf_dtype dtype;         /* BF_DTYPE_INVALID: valid safetensors, not read */
} dtypes[] = {
    {"F32", BF_F32}, {"F16", BF_F16}, {"BF16", BF_BF16}, {"I64", BF_I64}, {"I32", BF_I32},
    {"U8", BF_U8},
    {"F64", BF_DTYPE_INVALID}, {"I8", BF_DTYPE_INVALID}, {"I16", BF_DTYPE_INVALID},
    {"U16", BF_DTYPE_INVALID}, {"U32", BF_DTYPE_INVALID}, {"U64", BF_DTYPE_INVALID},
    {"BOOL", BF_DTYPE_INVALID}, {"F8_E4M3", BF_DTYPE_INVALID}, {"F8_E5M2", BF_DTYPE_INVALID},
};

static bf_status fail(bf_error *err, bf_status status, const char *label, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static bf_status fail(bf_error *err, bf_status status, const char *label, const char *fmt, ...)
{
    char msg[BF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bf_error_set(err, status, "%.200s: %s", label, msg);
}

static const char *json_kind(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: break;
    }
    return "null";
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static size_t round_up(size_t n) { return (n + DATA_ALIGN - 1) / DATA_ALIGN * DATA_ALIGN; }

static bf_status check_length(uint64_t header_len, uint64_t after_prefix, const bf_dataset_limits *lim,
                              const char *label, bf_error *err)
{
    if (header_len > after_prefix)
        return fail(err, BF_EFORMAT, label,
                    "header declares %" PRIu64 " bytes but the file has only %" PRIu64
                    " after the length prefix (truncated, or not a safetensors file)",
                    header_len, after_prefix);
    if (header_len > (uint64_t)lim->max_header_bytes)
        return fail(err, BF_ELIMIT, label,
                    "header declares %" PRIu64 " bytes; at most %" PRId64 " are accepted "
                    "(max_header_bytes)",
                    header_len, lim->max_header_bytes);
    return BF_OK;
}

static bf_status check_metadata(json_t *meta, const char *label, bf_error *err)
{
    const char *key;
    json_t *v;
    if (!json_is_object(meta))
        return fail(err, BF_EFORMAT, label, "__metadata__ is %s; expected an object of strings",
                    json_kind(meta));
    json_object_foreach(meta, key, v) {
        if (!json_is_string(v))
            return fail(err, BF_EFORMAT, label,
                        "__metadata__ field '" NAME_FMT "' is %s; expected a string", key,
                        json_kind(v));
    }
    return BF_OK;
}

static bf_status parse_dtype(const json_t *obj, const char *name, const char *label,
                             bf_dtype *dtype, bf_error *err)
{
    const json_t *j = json_object_get(obj, "dtype");
    if (!j) return fail(err, BF_EFORMAT, label, "tensor '" NAME_FMT "': field 'dtype' is missing", name);
    if (!json_is_string(j))
        return fail(err, BF_EFORMAT, label,
                    "tensor '" NAME_FMT "': field 'dtype' is %s; expected a string", name,
                    json_kind(j));
    const char *s = json_string_value(j);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (strcmp(s, dtypes[i].name) != 0) continue;
        if (dtypes[i].dtype == BF_DTYPE_INVALID)
            return fail(err, BF_EUNSUPPORTED, label,
                        "tensor '" NAME_FMT "' has dtype %s; bitflip reads F32, F16, BF16, I64, "
                        "I32 and U8",
                        name, s);
        *dtype = dtypes[i].dtype;
        return BF_OK;
    }
    return fail(err, BF_EFORMAT, label, "tensor '" NAME_FMT "': unknown dtype \"%.32s\"", name, s);
}

static bf_status parse_shape(const json_t *obj, const char *name, const char *label,
                             bf_tensor *t, bf_error *err)
{
    const json_t *j = json_object_get(obj, "shape");
    if (!j) return fail(err, BF_EFORMAT, label, "tensor '" NAME_FMT "': field 'shape' is missing", name);
    if (!json_is_array(j))
        return fail(err, BF_EFORMAT, label,
                    "tensor '" NAME_FMT "': field 'shape' is %s; expected an array", name,
                    json_kind(j));
    size_t rank = json_array_size(j);
    if (rank == 0)
        return fail(err, BF_EFORMAT, label,
                    "tensor '" NAME_FMT "' is a scalar (shape []); every tensor's first "
                    "dimension is the sample",
                    name);
    if (rank > BF_MAX_DIMS)
        return fail(err, BF_EUNSUPPORTED, label,
                    "tensor '" NAME_FMT "' has %zu dimensions; at most %d are supported", name,
                    rank, BF_MAX_DIMS);
    for (size_t i = 0; i < rank; i++) {
        const json_t *d = json_array_get(j, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return fail(err, BF_EFORMAT, label,
                        "tensor '" NAME_FMT "': shape[%zu] is %s; expected a non-negative integer",
                        name, i, json_is_integer(d) ? "negative" : json_kind(d));
        t->dims[i] = (int64_t)json_integer_value(d);
    }
    t->ndim = (int)rank;
    return BF_OK;
}

/* numel * element size, or an error when it does not fit in 64 bits. */
static bf_status shape_bytes(const bf_tensor *t, const char *name, const char *label,
                             uint64_t *bytes, bf_error *err)
{
    uint64_t n = bf_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++)
        if (t->dims[i] == 0) { *bytes = 0; return BF_OK; }
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d = (uint64_t)t->dims[i];
        if (n > (uint64_t)INT64_MAX / d) {
            char shape[160];
            return fail(err, BF_EFORMAT, label, "tensor '" NAME_FMT "': shape %s is too large",
                        name, bf_shape_str(t->dims, t->ndim, shape, sizeof shape));
        }
        n *= d;
    }
    *bytes = n;
    return BF_OK;
}

static bf_status parse_offsets(const json_t *obj, const char *name, const char *label,
                               const char *dtype_name, uint64_t data_len, const bf_tensor *t,
                               span *sp, bf_error *err)
{
    const json_t *j = json_object_get(obj, "data_offsets");
    if (!j)
        return fail(err, BF_EFORMAT, label, "tensor '" NAME_FMT "': field 'data_offsets' is missing",
                    name);
    if (!json_is_array(j) || json_array_size(j) != 2)
        return fail(err, BF_EFORMAT, label,
                    "tensor '" NAME_FMT "': field 'data_offsets' is %s; expected [begin, end]",
                    name, json_is_array(j) ? "an array of the wrong length" : json_kind(j));
    uint64_t off[2];
    for (size_t i = 0; i < 2; i++) {
        const json_t *o = json_array_get(j, i);
        if (!json_is_integer(o) || json_integer_value(o) < 0)
            return fail(err, BF_EFORMAT, label,
                        "tensor '" NAME_FMT "': data_offsets[%zu] is %s; expected a non-negative "
                        "integer",
                        name, i, json_is_integer(o) ? "negative" : json_kind(o));
        off[i] = (uint64_t)json_integer_value(o);
    }
    if (off[0] > off[1])
        return fail(err, BF_EFORMAT, label,
                    "tensor '" NAME_FMT "': data_offsets [%" PRIu64 ", %" PRIu64 "] end before "
                    "they begin",
                    name, off[0], off[1]);
    if (off[1] > data_len)
        return fail(err, BF_EFORMAT, label,
                    "tensor '" NAME_FMT "': data_offsets [%" PRIu64 ", %" PRIu64 "] reach past "
                    "the end of the data section (%" PRIu64 " bytes)",
                    name, off[0], off[1], data_len);
    uint64_t need = 0;
    bf_status st = shape_bytes(t, name, label, &need, err);
    if (st) return st;
    if (off[1] - off[0] != need) {
        char shape[160];
        return fail(err, BF_EFORMAT, label,
                    "tensor '" NAME_FMT "': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                    " bytes but shape %s of %s needs %" PRIu64,
                    name, off[0], off[1], off[1] - off[0],
                    bf_shape_str(t->dims, t->ndim, shape, sizeof shape), dtype_name, need);
    }
    sp->begin = off[0];
    sp->end = off[1];
    return BF_OK;
}

static bf_status parse_tensor(const char *name, const json_t *obj, uint64_t data_len,
                              const char *label, bf_tensor *t, span *sp, bf_error *err)
{
    if (name[0] == '\0') return fail(err, BF_EFORMAT, label, "a tensor has an empty name");
    if (!json_is_object(obj))
        return fail(err, BF_EFORMAT, label, "tensor '" NAME_FMT "' is %s; expected an object",
                    name, json_kind(obj));
    bf_status st = parse_dtype(obj, name, label, &t->dtype, err);
    if (!st) st = parse_shape(obj, name, label, t, err);
    if (!st)
        st = parse_offsets(obj, name, label, json_string_value(json_object_get(obj, "dtype")),
                           data_len, t, sp, err);
    return st;
}

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Sorts spans by offset; two tensors sharing bytes would alias. */
static bf_status check_overlaps(span *spans, size_t n, const bf_tensor *tensors,
                                const char *label, bf_error *err)
{
    qsort(spans, n, sizeof *spans, span_cmp);
    const span *last = NULL;    /* the non-empty span reaching furthest so far */
    for (size_t i = 0; i < n; i++) {
        if (spans[i].begin == spans[i].end) continue;
        if (last && spans[i].begin < last->end)
            return fail(err, BF_EFORMAT, label,
                        "tensors '" NAME_FMT "' and '" NAME_FMT "' overlap: data_offsets [%" PRIu64
                        ", %" PRIu64 "] and [%" PRIu64 ", %" PRIu64 "]",
                        tensors[last->tensor].name, tensors[spans[i].tensor].name, last->begin,
                        last->end, spans[i].begin, spans[i].end);
        if (!last || spans[i].end > last->end) last = &spans[i];
    }
    return BF_OK;
}

/* The samples: dim 0 of every tensor but detection ground truth's
 * (dataset_det.h), which must agree; -1 when there is no other tensor. */
static bf_status check_samples(const bf_tensor *tensors, size_t n, const char *label, int64_t *samples,
                               bf_error *err)
{
    size_t first = 0;
    while (first < n && bf__dataset_det_name(tensors[first].name)) first++;
    *samples = first < n ? tensors[first].dims[0] : -1;
    for (size_t i = first + 1; i < n; i++) {
        if (bf__dataset_det_name(tensors[i].name) || tensors[i].dims[0] == tensors[first].dims[0]) continue;
        char a[160], b[160];
        return fail(err, BF_EFORMAT, label,
                    "tensor '" NAME_FMT "' has shape %s but tensor '" NAME_FMT "' has shape %s; "
                    "every tensor's first dimension is the sample and must agree",
                    tensors[i].name, bf_shape_str(tensors[i].dims, tensors[i].ndim, a, sizeof a),
                    tensors[first].name, bf_shape_str(tensors[first].dims, tensors[first].ndim, b, sizeof b));
    }
    return BF_OK;
}

static bf_status read_span(const source *src, const span *sp, void *dst, const char *label,
                           bf_error *err)
{
    size_t n = (size_t)(sp->end - sp->begin);
    if (src->mem) {
        memcpy(dst, src->mem + sp->begin, n);
        return BF_OK;
    }
    if (n == 0) return BF_OK;
    if (fseeko(src->file, (off_t)(src->file_offset + sp->begin), SEEK_SET) != 0)
        return fail(err, BF_EIO, label, "cannot seek to byte %" PRIu64 ": %s",
                    src->file_offset + sp->begin, strerror(errno));
    if (fread(dst, 1, n, src->file) != n)
        return fail(err, BF_EIO, label, "reading %zu bytes at byte %" PRIu64 ": %s", n,
                    src->file_offset + sp->begin,
                    ferror(src->file) ? strerror(errno) : "the file ended early");
    return BF_OK;
}

/* Builds a dataset from a header already in memory and a data section of
 * `data_len` bytes that `src` can read. */
static bf_status load(const char *label, const char *hdr, size_t hdr_len, uint64_t data_len,
                      const source *src, const bf_dataset_limits *lim, bf_dataset **out, bf_error *err)
{
    bf_status st = BF_OK;
    json_t *root = NULL;
    bf_dataset *ds = NULL;
    span *spans = NULL;
    json_error_t jerr;
    const char *key;
    json_t *val;

    long deep = json_too_deep(hdr, hdr_len, lim->max_json_depth);
    if (deep >= 0) {
        st = fail(err, BF_ELIMIT, label,
                  "header JSON is nested more than %d deep at header byte %ld; the limit is %d "
                  "(max_json_depth)",
                  lim->max_json_depth, deep, lim->max_json_depth);
        goto out;
    }
    root = json_loadb(hdr, hdr_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        st = fail(err, BF_EFORMAT, label, "header is not valid JSON: %s (at header byte %d)",
                  jerr.text, jerr.position);
        goto out;
    }
    if (!json_is_object(root)) {
        st = fail(err, BF_EFORMAT, label, "header is %s; expected an object", json_kind(root));
        goto out;
    }
    size_t n = json_object_size(root), names_len = 0;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((st = check_metadata(val, label, err))) goto out;
            n--;
        } else {
            names_len += strlen(key) + 1;
        }
    }
    if (n == 0) {
        st = fail(err, BF_EFORMAT, label, "header lists no tensors");
        goto out;
    }
    if (n > (uint64_t)lim->max_tensors) {
        st = fail(err, BF_ELIMIT, label, "header lists %zu tensors; the limit is %" PRId64 " (max_tensors)", n,
                  lim->max_tensors);
        goto out;
    }

    ds = bf__calloc(1, sizeof *ds);
    spans = bf__malloc(n * sizeof *spans);
    if (ds) ds->tensors = bf__calloc(n, sizeof *ds->tensors);
    if (ds) ds->names = bf__malloc(names_len);
    if (!ds || !spans || !ds->tensors || !ds->names) {
        st = fail(err, BF_ENOMEM, label, "out of memory reading the header");
        goto out;
    }

    size_t i = 0, name_off = 0;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) continue;
        bf_tensor *t = &ds->tensors[i];
        t->name = memcpy(ds->names + name_off, key, strlen(key) + 1);
        name_off += strlen(key) + 1;
        spans[i].tensor = i;
        if ((st = parse_tensor(key, val, data_len, label, t, &spans[i], err))) goto out;
        i++;
    }
    ds->num_tensors = n;
    int64_t samples;
    if ((st = check_samples(ds->tensors, n, label, &samples, err))) goto out;
    if ((st = check_overlaps(spans, n, ds->tensors, label, err))) goto out;

    /* Non-overlapping spans inside the data section: the sum is bounded by
     * the file size plus the padding. */
    size_t total = 0;
    for (i = 0; i < n; i++) total += round_up((size_t)(spans[i].end - spans[i].begin));
    if (total > (uint64_t)lim->max_bytes) {
        char a[32], b[32];
        st = fail(err, BF_ELIMIT, label, "its tensors hold %s; the limit is %s (max_bytes)",
                  bf_bytes_str(total, a, sizeof a), bf_bytes_str((uint64_t)lim->max_bytes, b, sizeof b));
        goto out;
    }
    if (!(ds->storage = bf__aligned_alloc(total))) {
        st = fail(err, BF_ENOMEM, label, "cannot allocate %zu bytes for the tensors", total);
        goto out;
    }
    /* 2 MiB pages with BITFLIP_HUGE_PAGES set (BF__WRITE_ONCE: off by
     * default, as for the golden cache, since the host decides which way it
     * goes), or where it measures them cheap (HUGE_MEASURE_BYTES). On the
     * nineteenth session's AMD VM, whose first touch of a 4 KiB page from
     * user space traps to the hypervisor even after the kernel's read()
     * wrote it, SSDlite320's 19.7 MB eval set read and its images copied
     * once took 125-140 ms of CPU in 4 KiB pages, 28-35 ms in 2 MiB ones;
     * the VM of docs/perf/dlrm.md's "The huge-pages default" paid more for
     * a huge page's first touch than it saved (docs/perf/detectors.md,
     * h19-det), which its measurement would say. And BF__WRITE_NOW: the
     * loop below writes every byte at once (each span read or copied in;
     * the padding between spans is under DATA_ALIGN bytes, inside pages the
     * spans write), and read() or memcpy into fresh memory faults it in a
     * page at a time (warena.h). One call for the whole storage, not one a
     * span. */
    int huge = total >= HUGE_MEASURE_BYTES && bf__host_pages_huge(&lim->host_pages);
    bf__pages_written(ds->storage, total, BF__WRITE_ONCE | BF__WRITE_NOW | (huge ? BF__WRITE_HUGE : 0));
    size_t off = 0;
    for (i = 0; i < n; i++) {   /* in file order, so a file is read front to back */
        bf_tensor *t = &ds->tensors[spans[i].tensor];
        t->data = (char *)ds->storage + off;
        if ((st = read_span(src, &spans[i], t->data, label, err))) goto out;
        off += round_up((size_t)(spans[i].end - spans[i].begin));
    }
    if ((st = bf__dataset_det_check(ds->tensors, n, samples, label, err))) goto out;
    /* only ground truth: its offsets count the images */
    ds->num_samples = samples >= 0 ? samples : bf_dataset_find(ds, "gt_offsets")->dims[0] - 1;
    *out = ds;
    ds = NULL;

out:
    bf_dataset_free(ds);
    bf__free(spans);
    json_decref(root);
    return st;
}

bf_status bf_dataset_load_buffer(const void *buf, size_t len, const char *label,
                                 bf_dataset **out, bf_error *err)
{
    return bf_dataset_load_buffer_opts(buf, len, label, NULL, out, err);
}

bf_status bf_dataset_load_buffer_opts(const void *buf, size_t len, const char *label,
                                      const bf_dataset_limits *limits, bf_dataset **out, bf_error *err)
{
    bf_dataset_limits lim = bf_dataset_limits_resolve(limits);
    if (!label) label = "<buffer>";
    if (!out || (!buf && len))
        return fail(err, BF_EINVAL, label, "bf_dataset_load_buffer needs a buffer and an out pointer");
    *out = NULL;
    if (len < 8)
        return fail(err, BF_EFORMAT, label,
                    "%zu bytes is too short: a safetensors file starts with an 8-byte header "
                    "length",
                    len);
    const unsigned char *p = buf;
    uint64_t hdr_len = le64(p);
    bf_status st = check_length(hdr_len, len - 8, &lim, label, err);
    if (st) return st;
    source src = {.mem = p + 8 + hdr_len};
    return load(label, (const char *)p + 8, (size_t)hdr_len, len - 8 - hdr_len, &src, &lim, out, err);
}

static bf_status read_exact(FILE *f, void *dst, size_t n, const char *path, const char *what,
                            bf_error *err)
{
    if (fread(dst, 1, n, f) == n) return BF_OK;
    return fail(err, BF_EIO, path, "reading the %s: %s", what,
                ferror(f) ? strerror(errno) : "the file ended early");
}

bf_status bf_dataset_load_file(const char *path, bf_dataset **out, bf_error *err)
{
    return bf_dataset_load_file_opts(path, NULL, out, err);
}

bf_status bf_dataset_load_file_opts(const char *path, const bf_dataset_limits *limits, bf_dataset **out,
                                    bf_error *err)
{
    bf_dataset_limits lim = bf_dataset_limits_resolve(limits);
    bf_status st;
    FILE *f = NULL;
    char *hdr = NULL;
    unsigned char prefix[8];
    struct stat sb;

    if (!path || !out)
        return bf_error_set(err, BF_EINVAL, "bf_dataset_load_file needs a path and an out pointer");
    *out = NULL;
    if (!(f = fopen(path, "rb")))
        return fail(err, BF_EIO, path, "cannot open: %s", strerror(errno));
    if (fstat(fileno(f), &sb) != 0) {
        st = fail(err, BF_EIO, path, "cannot stat: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = fail(err, BF_EIO, path, "not a regular file");
        goto out;
    }
    /* what the bytes get wrong is named by the file's name alone, as the model
     * loader does: the directory is the machine's business (a daemon's data
     * dir, docs/SERVER.md), and only opening or reading names it */
    const char *slash = strrchr(path, '/');
    const char *name = slash && slash[1] ? slash + 1 : path;
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8) {
        st = fail(err, BF_EFORMAT, name,
                  "%" PRIu64 " bytes is too short: a safetensors file starts with an 8-byte "
                  "header length",
                  size);
        goto out;
    }
    if ((st = read_exact(f, prefix, 8, path, "header length", err))) goto out;
    uint64_t hdr_len = le64(prefix);
    if ((st = check_length(hdr_len, size - 8, &lim, name, err))) goto out;
    if (!(hdr = bf__malloc((size_t)hdr_len))) {
        st = fail(err, BF_ENOMEM, name, "cannot allocate %" PRIu64 " bytes for the header", hdr_len);
        goto out;
    }
    if ((st = read_exact(f, hdr, (size_t)hdr_len, path, "header", err))) goto out;
    source src = {.file = f, .file_offset = 8 + hdr_len};
    st = load(name, hdr, (size_t)hdr_len, size - 8 - hdr_len, &src, &lim, out, err);

out:
    bf__free(hdr);
    fclose(f);
    return st;
}

void bf_dataset_free(bf_dataset *ds)
{
    if (!ds) return;
    bf__free(ds->storage);
    bf__free(ds->names);
    bf__free(ds->tensors);
    bf__free(ds);
}

size_t bf_dataset_num_tensors(const bf_dataset *ds) { return ds->num_tensors; }

const bf_tensor *bf_dataset_tensor(const bf_dataset *ds, size_t i)
{
    return i < ds->num_tensors ? &ds->tensors[i] : NULL;
}

const bf_tensor *bf_dataset_find(const bf_dataset *ds, const char *name)
{
    for (size_t i = 0; i < ds->num_tensors; i++)
        if (strcmp(ds->tensors[i].name, name) == 0) return &ds->tensors[i];
    return NULL;
}

int64_t bf_dataset_num_samples(const bf_dataset *ds) { return ds->num_samples; }

bf_status bf_dataset_copy_rows(const bf_tensor *src, int64_t start, int64_t count,
                               bf_tensor *dst, bf_error *err)
{
    if (!src || !dst)
        return bf_error_set(err, BF_EINVAL, "bf_dataset_copy_rows needs a source and a destination");
    const char *name = src->name ? src->name : "(unnamed)";
    char a[160], b[160];
    if (src->ndim < 1 || src->ndim > BF_MAX_DIMS || dst->ndim != src->ndim ||
        memcmp(src->dims + 1, dst->dims + 1, (size_t)(src->ndim - 1) * sizeof src->dims[0]) != 0)
        return bf_error_set(err, BF_ESHAPE,
                            "tensor '" NAME_FMT "': rows of shape %s cannot be copied into shape "
                            "%s; all but the first dimension must match",
                            name, bf_shape_str(src->dims, src->ndim, a, sizeof a),
                            bf_shape_str(dst->dims, dst->ndim, b, sizeof b));
    if (start < 0 || count < 0 || start > src->dims[0] || count > src->dims[0] - start)
        return bf_error_set(err, BF_ERANGE,
                            "tensor '" NAME_FMT "': cannot copy %" PRId64 " samples from sample "
                            "%" PRId64 "; it has %" PRId64,
                            name, count, start, src->dims[0]);
    if (count > dst->dims[0])
        return bf_error_set(err, BF_ERANGE,
                            "tensor '" NAME_FMT "': %" PRId64 " samples do not fit in a "
                            "destination of shape %s",
                            name, count, bf_shape_str(dst->dims, dst->ndim, b, sizeof b));
    int64_t row = 1;
    for (int i = 1; i < src->ndim; i++) row *= src->dims[i];
    const char *from = (const char *)src->data + (size_t)(start * row) * bf_dtype_size(src->dtype);
    bf_status st = bf_convert(dst->data, dst->dtype, from, src->dtype, (size_t)(count * row), err);
    if (st && err) bf_error_prefix(err, "tensor '" NAME_FMT "'", name);
    return st;
}
