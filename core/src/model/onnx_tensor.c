/* TensorProto -> bf_tensor. Every count and size read from the file is
 * checked before use: an initializer's dims, its declared type, and the length
 * of whichever field carries its data must agree. */
#include <errno.h>
#include <string.h>
#if defined(__unix__)
#include <sys/types.h>
#include <unistd.h>
#endif

#include "base/alloc.h"
#include "base/warena.h"
#include "model/onnx_load.h"

/* Elements per tensor we accept: 2^34 (64 GiB of fp32) is beyond any model
 * this engine will meet and keeps every size computation far from overflow. */
#define MAX_NUMEL (INT64_C(1) << 34)

enum onnx_dtype {
    ONNX_FLOAT = 1, ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_UINT16 = 4, ONNX_INT16 = 5,
    ONNX_INT32 = 6, ONNX_INT64 = 7, ONNX_STRING = 8, ONNX_BOOL = 9, ONNX_FLOAT16 = 10,
    ONNX_DOUBLE = 11, ONNX_UINT32 = 12, ONNX_UINT64 = 13, ONNX_BFLOAT16 = 16
};

bf_dtype bf__onnx_dtype(int32_t t)
{
    switch (t) {
    case ONNX_FLOAT: case ONNX_DOUBLE: case ONNX_FLOAT16: case ONNX_BFLOAT16: return BF_F32;
    case ONNX_INT64: case ONNX_UINT32: case ONNX_INT16: case ONNX_UINT16: return BF_I64;
    case ONNX_INT32: return BF_I32;
    case ONNX_BOOL: return BF_BOOL;
    case ONNX_UINT8: return BF_U8;
    case ONNX_INT8: return BF_I8;
    default: return BF_DTYPE_INVALID;
    }
}

const char *bf__onnx_dtype_name(int32_t t)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16",
                                        "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
                                        "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    return t >= 0 && t < (int32_t)(sizeof names / sizeof names[0]) ? names[t] : "UNKNOWN";
}

/* Bytes per element in raw_data for an ONNX type (0: not readable). */
static size_t raw_size(int32_t t)
{
    switch (t) {
    case ONNX_FLOAT: case ONNX_INT32: case ONNX_UINT32: return 4;
    case ONNX_DOUBLE: case ONNX_INT64: case ONNX_UINT64: return 8;
    case ONNX_FLOAT16: case ONNX_BFLOAT16: case ONNX_INT16: case ONNX_UINT16: return 2;
    case ONNX_UINT8: case ONNX_INT8: case ONNX_BOOL: return 1;
    default: return 0;
    }
}

/* Converts element i of raw little-endian data of ONNX type t into dst[i] of
 * our dtype. x86-64 and aarch64 are little-endian, as ONNX raw_data is. */
static void raw_elem(void *dst, bf_dtype dt, const uint8_t *src, int32_t t, int64_t i)
{
    size_t sz = raw_size(t);
    const uint8_t *p = src + (size_t)i * sz;
    double v = 0;
    int64_t iv = 0;
    int is_int = 1;
    switch (t) {
    case ONNX_FLOAT: { float f; memcpy(&f, p, 4); v = f; is_int = 0; break; }
    case ONNX_DOUBLE: { double d; memcpy(&d, p, 8); v = d; is_int = 0; break; }
    case ONNX_FLOAT16: { uint16_t h; memcpy(&h, p, 2); v = bf_f16_to_f32(h); is_int = 0; break; }
    case ONNX_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); v = bf_bf16_to_f32(h); is_int = 0; break; }
    case ONNX_INT32: { int32_t x; memcpy(&x, p, 4); iv = x; break; }
    case ONNX_UINT32: { uint32_t x; memcpy(&x, p, 4); iv = x; break; }
    case ONNX_INT64: memcpy(&iv, p, 8); break;
    case ONNX_UINT64: { uint64_t x; memcpy(&x, p, 8); iv = (int64_t)x; break; }
    case ONNX_INT16: { int16_t x; memcpy(&x, p, 2); iv = x; break; }
    case ONNX_UINT16: { uint16_t x; memcpy(&x, p, 2); iv = x; break; }
    case ONNX_INT8: iv = (int8_t)p[0]; break;
    case ONNX_UINT8: case ONNX_BOOL: iv = p[0]; break;
    default: break;
    }
    switch (dt) {
    case BF_F32: ((float *)dst)[i] = is_int ? (float)iv : (float)v; break;
    case BF_I64: ((int64_t *)dst)[i] = iv; break;
    case BF_I32: ((int32_t *)dst)[i] = (int32_t)iv; break;
    case BF_BOOL: ((uint8_t *)dst)[i] = iv != 0; break;
    case BF_U8: ((uint8_t *)dst)[i] = (uint8_t)iv; break;
    case BF_I8: ((int8_t *)dst)[i] = (int8_t)iv; break;
    default: break;
    }
}

/* Copies from a read-only file mapping in chunks, giving each chunk's pages
 * back once copied: a 128 MiB table then never has its file pages resident
 * beside its converted copy. */
static void copy_dropping(void *dst, const uint8_t *src, size_t n)
{
    const size_t chunk = (size_t)16 << 20, pg = bf__warena_page();
    for (size_t done = 0; done < n;) {
        size_t k = n - done < chunk ? n - done : chunk;
        memcpy((uint8_t *)dst + done, src + done, k);
        done += k;
        uintptr_t lo = ((uintptr_t)src + done - k + pg - 1) / pg * pg, hi = ((uintptr_t)src + done) / pg * pg;
        if (hi > lo) bf__pages_drop((void *)lo, hi - lo);
    }
}

/* A mapped file's tensor read with pread: the kernel copies from the page
 * cache, so the file's pages are never mapped into the process (a fault a
 * 16 pages, then given back: copy_dropping) and the tensor is written once.
 * On this project's AMD VM, where each newly mapped page traps to the host,
 * loading SSDlite320's 14 MB took 90-110 ms of CPU with the mapping's
 * copy and 52-66 with pread into pages populated beforehand (a probe,
 * docs/perf/detectors.md, h24-ssd). A short read or an error (the file
 * shrank): the rest copied from the mapping, as before. */
static void read_file(void *dst, const uint8_t *src, const bf__raw_range *cut, size_t n)
{
#if defined(__unix__)
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(cut->fd, (uint8_t *)dst + done, n - done, (off_t)(cut->off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        done += (size_t)k;
    }
    if (done < n) copy_dropping((uint8_t *)dst + done, src + done, n - done);
#else
    copy_dropping(dst, src, n);
#endif
}

static bf_status count_error(bf_error *err, const char *what, const char *field, size_t got,
                             int64_t want)
{
    return bf_error_set(err, BF_EFORMAT, "%s: %s holds %zu values but its dims need %lld", what,
                        field, got, (long long)want);
}

/* Checks what a TensorProto declares against the data it carries (raw_len:
 * the raw_data's length, when it has one); its element count in *numel. */
static bf_status check(const Onnx__TensorProto *tp, const char *what, int has_raw, size_t raw_len,
                       int64_t *numel_out, bf_error *err)
{
    int32_t ot = tp->has_data_type ? tp->data_type : 0;
    bf_dtype dt = bf__onnx_dtype(ot);

    /* external data comes here as a cut range (has_raw) once onnx_init.c has
     * read it from the file beside the model; a model loaded from a buffer
     * has no such file */
    if (!has_raw && bf__tensor_is_external(tp)) {
        const char *loc = "?";
        for (size_t i = 0; i < tp->n_external_data; i++)
            if (tp->external_data[i]->key && strcmp(tp->external_data[i]->key, "location") == 0)
                loc = tp->external_data[i]->value ? tp->external_data[i]->value : "?";
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "%s keeps its data in an external file ('%s'); load the model from its file "
                            "path (the data is read from beside it), or save it with all tensors inside "
                            "(onnx.save_model(m, path, save_as_external_data=False))",
                            what, loc);
    }
    if (dt == BF_DTYPE_INVALID)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s has data type %s (%d), which bitflip does not read",
                            what, bf__onnx_dtype_name(ot), ot);
    if (tp->n_dims > BF_MAX_DIMS)
        return bf_error_set(err, BF_EUNSUPPORTED, "%s has rank %zu; at most %d supported", what,
                            tp->n_dims, BF_MAX_DIMS);
    int64_t numel = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0 || (tp->dims[i] > 0 && numel > MAX_NUMEL / tp->dims[i]))
            return bf_error_set(err, BF_EFORMAT, "%s: dim %zu is %lld, which is negative or too large",
                                what, i, (long long)tp->dims[i]);
        numel *= tp->dims[i];
    }

    /* The data must be there before we allocate for it: dims alone are a few
     * bytes of file and could ask for gigabytes. */
    if (has_raw) {
        size_t sz = raw_size(ot);
        if (raw_len != (size_t)numel * sz)
            return bf_error_set(err, BF_EFORMAT, "%s: raw_data has %zu bytes but %lld elements of %s need %zu",
                                what, raw_len, (long long)numel, bf__onnx_dtype_name(ot),
                                (size_t)numel * sz);
    } else {
        size_t have;
        const char *field;
        switch (ot) {
        case ONNX_FLOAT: have = tp->n_float_data; field = "float_data"; break;
        case ONNX_DOUBLE: have = tp->n_double_data; field = "double_data"; break;
        case ONNX_INT64: have = tp->n_int64_data; field = "int64_data"; break;
        case ONNX_UINT32: case ONNX_UINT64: have = tp->n_uint64_data; field = "uint64_data"; break;
        default: have = tp->n_int32_data; field = "int32_data"; break;
        }
        if (have != (size_t)numel) return count_error(err, what, field, have, numel);
    }
    *numel_out = numel;
    return BF_OK;
}

size_t bf__tensor_proto_nbytes(const Onnx__TensorProto *tp, const bf__raw_range *raw)
{
    bf_error e;
    int64_t numel;
    int has_raw = raw && raw->cut ? 1 : tp->has_raw_data;
    size_t raw_len = raw && raw->cut ? raw->len : tp->raw_data.len;
    if (check(tp, "", has_raw, raw_len, &numel, &e) != BF_OK) return 0;
    return (size_t)numel * bf_dtype_size(bf__onnx_dtype(tp->data_type));
}

bf_status bf__tensor_from_proto(const Onnx__TensorProto *tp, const char *what, bf_tensor **out,
                                bf_error *err)
{
    return bf__tensor_from_proto_at(tp, what, NULL, NULL, out, err);
}

bf_status bf__tensor_from_proto_at(const Onnx__TensorProto *tp, const char *what, const bf__raw_range *cut,
                                   bf__warena *arena, bf_tensor **out, bf_error *err)
{
    bf_tensor *t = NULL;
    bf_status st = BF_OK;
    int32_t ot = tp->has_data_type ? tp->data_type : 0;
    bf_dtype dt = bf__onnx_dtype(ot);
    /* cut: the raw_data the loader cut out before unpacking (onnx_strip.c) */
    if (cut && !cut->cut) cut = NULL;
    int has_raw = cut ? 1 : tp->has_raw_data;
    const uint8_t *raw = cut ? cut->data : tp->raw_data.data;
    size_t raw_len = cut ? cut->len : tp->raw_data.len;
    int64_t numel;

    if ((st = check(tp, what, has_raw, raw_len, &numel, err)) != BF_OK) return st;

    t = bf__calloc(1, sizeof *t);
    if (!t) return bf_error_set(err, BF_ENOMEM, "out of memory reading %s", what);
    t->dtype = dt;
    t->ndim = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++) t->dims[i] = tp->dims[i];
    size_t nbytes = (size_t)numel * bf_dtype_size(dt);
    /* large tensors in the weights arena (shared by every plan, copied a
     * page at a time where faults land); the heap when it has no room */
    t->data = nbytes >= BF__WARENA_MIN_BYTES ? bf__warena_take(arena, nbytes) : NULL;
    if (!t->data) t->data = bf__aligned_alloc(nbytes);
    if (!t->data) { st = bf_error_set(err, BF_ENOMEM, "out of memory for %s (%lld elements)", what, (long long)numel); goto out; }

    if (has_raw) {
        /* little-endian fp32 as stored: one copy (x86-64 and aarch64 are
         * little-endian, as ONNX raw_data is) */
        if (ot == ONNX_FLOAT && cut && cut->droppable) read_file(t->data, raw, cut, (size_t)numel * 4);
        else if (ot == ONNX_FLOAT && numel) memcpy(t->data, raw, (size_t)numel * 4);
        else for (int64_t i = 0; i < numel; i++) raw_elem(t->data, dt, raw, ot, i);
        goto out;
    }
    /* Typed fields, as the ONNX spec assigns them to each type. */
    switch (ot) {
    case ONNX_FLOAT:
        if (tp->n_float_data != (size_t)numel) { st = count_error(err, what, "float_data", tp->n_float_data, numel); goto out; }
        /* an empty tensor's field is NULL, which memcpy may not be given */
        if (numel) memcpy(t->data, tp->float_data, (size_t)numel * 4);
        break;
    case ONNX_DOUBLE:
        if (tp->n_double_data != (size_t)numel) { st = count_error(err, what, "double_data", tp->n_double_data, numel); goto out; }
        for (int64_t i = 0; i < numel; i++) ((float *)t->data)[i] = (float)tp->double_data[i];
        break;
    case ONNX_INT64:
        if (tp->n_int64_data != (size_t)numel) { st = count_error(err, what, "int64_data", tp->n_int64_data, numel); goto out; }
        if (numel) memcpy(t->data, tp->int64_data, (size_t)numel * 8);
        break;
    case ONNX_UINT32: case ONNX_UINT64:
        if (tp->n_uint64_data != (size_t)numel) { st = count_error(err, what, "uint64_data", tp->n_uint64_data, numel); goto out; }
        for (int64_t i = 0; i < numel; i++) ((int64_t *)t->data)[i] = (int64_t)tp->uint64_data[i];
        break;
    default:
        /* INT32, INT16, UINT16, INT8, UINT8, BOOL, FLOAT16 and BFLOAT16 (as bits) */
        if (tp->n_int32_data != (size_t)numel) { st = count_error(err, what, "int32_data", tp->n_int32_data, numel); goto out; }
        for (int64_t i = 0; i < numel; i++) {
            int32_t x = tp->int32_data[i];
            if (ot == ONNX_FLOAT16) ((float *)t->data)[i] = bf_f16_to_f32((uint16_t)x);
            else if (ot == ONNX_BFLOAT16) ((float *)t->data)[i] = bf_bf16_to_f32((uint16_t)x);
            else {
                int64_t v = x;
                switch (dt) {
                case BF_I64: ((int64_t *)t->data)[i] = v; break;
                case BF_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
                case BF_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
                case BF_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
                case BF_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
                default: break;
                }
            }
        }
        break;
    }
out:
    if (st != BF_OK) {
        if (t && bf__warena_owns(arena, t->data)) t->data = NULL;   /* the arena's: freed with it */
        bf__tensor_free(t);
        return st;
    }
    *out = t;
    return BF_OK;
}

void bf__tensor_free(bf_tensor *t)
{
    if (!t) return;
    bf__free(t->data);
    bf__free(t);
}
