/* safetensors eval sets: files built byte by byte here, every malformed
 * header we could think of, truncations and random header corruption (run
 * under ASan: a bad offset must be an error, never a read out of bounds). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "bitflip/dataset.h"

#define LABEL "t.safetensors"

/* 8-byte little-endian header length, the header, the data. */
static unsigned char *st_bytes(const char *hdr, const void *data, size_t data_len, size_t *len)
{
    size_t h = strlen(hdr);
    *len = 8 + h + data_len;
    unsigned char *b = malloc(*len);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, hdr, h);
    if (data_len) memcpy(b + 8 + h, data, data_len);
    return b;
}

static bf_status load_hdr(const char *hdr, size_t data_len, bf_dataset **ds, bf_error *err)
{
    unsigned char *zeros = calloc(1, data_len + 1), *b;
    size_t len;
    b = st_bytes(hdr, zeros, data_len, &len);
    bf_status st = bf_dataset_load_buffer(b, len, LABEL, ds, err);
    free(b);
    free(zeros);
    return st;
}

/* x: F32 [3, 2] = 0.5 * i; ids: I64 [3] = 10, -20, 1 << 40; labels: U8 [3] = 1, 0, 1.
 * The header's odd length leaves the data section unaligned. */
static const char valid_hdr[] =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"x\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]},"
    "\"ids\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[24,48]},"
    "\"labels\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[48,51]}} ";

static unsigned char *valid_file(size_t *len)
{
    unsigned char data[51];
    float x[6];
    int64_t ids[3] = {10, -20, (int64_t)1 << 40};
    for (int i = 0; i < 6; i++) x[i] = 0.5f * (float)i;
    memcpy(data, x, 24);
    memcpy(data + 24, ids, 24);
    data[48] = 1, data[49] = 0, data[50] = 1;
    assert_true((8 + strlen(valid_hdr)) % 8 != 0);
    return st_bytes(valid_hdr, data, sizeof data, len);
}

static void check_valid(const bf_dataset *ds)
{
    assert_int_equal(bf_dataset_num_tensors(ds), 3);
    assert_int_equal(bf_dataset_num_samples(ds), 3);
    /* file order */
    assert_string_equal(bf_dataset_tensor(ds, 0)->name, "x");
    assert_string_equal(bf_dataset_tensor(ds, 1)->name, "ids");
    assert_string_equal(bf_dataset_tensor(ds, 2)->name, "labels");
    assert_null(bf_dataset_tensor(ds, 3));
    assert_null(bf_dataset_find(ds, "nope"));

    const bf_tensor *x = bf_dataset_find(ds, "x"), *ids = bf_dataset_find(ds, "ids"),
                    *lab = bf_dataset_find(ds, "labels");
    assert_non_null(x);
    assert_int_equal(x->dtype, BF_F32);
    assert_int_equal(x->ndim, 2);
    assert_int_equal(x->dims[0], 3);
    assert_int_equal(x->dims[1], 2);
    for (int i = 0; i < 6; i++) assert_true(((const float *)x->data)[i] == 0.5f * (float)i);
    assert_int_equal(ids->dtype, BF_I64);
    assert_int_equal(((const int64_t *)ids->data)[1], -20);
    assert_int_equal(((const int64_t *)ids->data)[2], (int64_t)1 << 40);
    assert_int_equal(lab->dtype, BF_U8);
    assert_int_equal(((const uint8_t *)lab->data)[2], 1);
    /* copied to aligned storage even though the file's data is not */
    assert_int_equal((uintptr_t)x->data % 64, 0);
    assert_int_equal((uintptr_t)ids->data % 64, 0);
}

static void load_valid_buffer(void **state)
{
    (void)state;
    size_t len;
    unsigned char *b = valid_file(&len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    assert_int_equal(bf_dataset_load_buffer(b, len, LABEL, &ds, &err), BF_OK);
    free(b);    /* the dataset keeps nothing of the caller's buffer */
    check_valid(ds);
    bf_dataset_free(ds);
    bf_dataset_free(NULL);
}

struct bad_case {
    const char *hdr;
    size_t data_len;
    bf_status status;
    const char *msg;
};

#define T(name, body) "\"" name "\":{" body "}"
#define F32_32 "\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]"

static const struct bad_case bad_cases[] = {
    {"{\"x\": ", 0, BF_EFORMAT, "header is not valid JSON"},
    {"{" T("x", F32_32) "} trailing", 24, BF_EFORMAT, "header is not valid JSON"},
    {"[1, 2]", 0, BF_EFORMAT, "header is an array; expected an object"},
    {"{}", 0, BF_EFORMAT, "header lists no tensors"},
    {"{\"__metadata__\":{}}", 0, BF_EFORMAT, "header lists no tensors"},
    {"{\"__metadata__\":3," T("x", F32_32) "}", 24, BF_EFORMAT,
     "__metadata__ is an integer; expected an object of strings"},
    {"{\"__metadata__\":{\"a\":[]}," T("x", F32_32) "}", 24, BF_EFORMAT,
     "__metadata__ field 'a' is an array; expected a string"},
    {"{" T("x", F32_32) "," T("x", F32_32) "}", 24, BF_EFORMAT, "duplicate"},
    {"{\"x\":3}", 0, BF_EFORMAT, "tensor 'x' is an integer; expected an object"},
    {"{" T("", F32_32) "}", 24, BF_EFORMAT, "a tensor has an empty name"},
    {"{" T("x", "\"shape\":[3,2],\"data_offsets\":[0,24]") "}", 24, BF_EFORMAT,
     "tensor 'x': field 'dtype' is missing"},
    {"{" T("x", "\"dtype\":1,\"shape\":[3,2],\"data_offsets\":[0,24]") "}", 24, BF_EFORMAT,
     "tensor 'x': field 'dtype' is an integer; expected a string"},
    {"{" T("x", "\"dtype\":\"F33\",\"shape\":[3,2],\"data_offsets\":[0,24]") "}", 24, BF_EFORMAT,
     "tensor 'x': unknown dtype \"F33\""},
    {"{" T("x", "\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[0,24]") "}", 24,
     BF_EUNSUPPORTED, "tensor 'x' has dtype F64; bitflip reads F32, F16, BF16, I64, I32 and U8"},
    {"{" T("m", "\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]") "}", 3,
     BF_EUNSUPPORTED, "tensor 'm' has dtype BOOL"},
    {"{" T("x", "\"dtype\":\"F32\",\"data_offsets\":[0,24]") "}", 24, BF_EFORMAT,
     "tensor 'x': field 'shape' is missing"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,24]") "}", 24, BF_EFORMAT,
     "tensor 'x': field 'shape' is an object; expected an array"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]") "}", 4, BF_EFORMAT,
     "tensor 'x' is a scalar (shape [])"},
    {"{" T("x", "\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]") "}", 1,
     BF_EUNSUPPORTED, "tensor 'x' has 9 dimensions; at most 8 are supported"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[-3,2],\"data_offsets\":[0,24]") "}", 24, BF_EFORMAT,
     "tensor 'x': shape[0] is negative; expected a non-negative integer"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[3,2.0],\"data_offsets\":[0,24]") "}", 24, BF_EFORMAT,
     "tensor 'x': shape[1] is a real number"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[3,\"2\"],\"data_offsets\":[0,24]") "}", 24,
     BF_EFORMAT, "tensor 'x': shape[1] is a string"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,24]") "}",
     24, BF_EFORMAT, "tensor 'x': shape [4294967296, 4294967296] is too large"},
    /* elements fit in int64, bytes do not */
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,24]") "}",
     24, BF_EFORMAT, "is too large"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[3,2]") "}", 24, BF_EFORMAT,
     "tensor 'x': field 'data_offsets' is missing"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":\"0\"") "}", 24, BF_EFORMAT,
     "field 'data_offsets' is a string; expected [begin, end]"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24,48]") "}", 48,
     BF_EFORMAT, "field 'data_offsets' is an array of the wrong length"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[-1,23]") "}", 24, BF_EFORMAT,
     "data_offsets[0] is negative"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,null]") "}", 24, BF_EFORMAT,
     "data_offsets[1] is null"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[24,0]") "}", 24, BF_EFORMAT,
     "data_offsets [24, 0] end before they begin"},
    {"{" T("x", F32_32) "}", 23, BF_EFORMAT,
     "tensor 'x': data_offsets [0, 24] reach past the end of the data section (23 bytes)"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,20]") "}", 24, BF_EFORMAT,
     "tensor 'x': data_offsets [0, 20] hold 20 bytes but shape [3, 2] of F32 needs 24"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[4611686018427387904,0],\"data_offsets\":[0,24]") "}",
     24, BF_EFORMAT, "hold 24 bytes but shape [4611686018427387904, 0] of F32 needs 0"},
    {"{" T("x", F32_32) "," T("labels", "\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]")
     "}", 40, BF_EFORMAT,
     "tensor 'labels' has shape [4] but tensor 'x' has shape [3, 2]; every tensor's first "
     "dimension is the sample"},
    {"{" T("x", F32_32) "," T("y", "\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[20,32]")
     "}", 32, BF_EFORMAT, "tensors 'x' and 'y' overlap: data_offsets [0, 24] and [20, 32]"},
};

static void bad_headers(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad_case *c = &bad_cases[i];
        bf_dataset *ds = (bf_dataset *)&ds;     /* must be reset to NULL */
        bf_error err = {0};
        bf_status st = load_hdr(c->hdr, c->data_len, &ds, &err);
        if (st != c->status || !strstr(err.msg, c->msg) || !strstr(err.msg, LABEL ": "))
            fail_msg("case %zu (%s): status %d, message \"%s\"; expected %d and \"%s\"", i, c->hdr,
                     st, err.msg, c->status, c->msg);
        assert_int_equal(err.status, st);
        assert_null(ds);
    }
}

static void good_edge_cases(void **state)
{
    (void)state;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    /* zero samples; zero-sized tensors may share offsets; data may leave holes */
    assert_int_equal(load_hdr("{" T("x", "\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]")
                              "," T("y", "\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[4,4]")
                              "}", 16, &ds, &err), BF_OK);
    assert_int_equal(bf_dataset_num_samples(ds), 0);
    bf_dataset_free(ds);
    /* a huge shape with a zero does not overflow */
    assert_int_equal(load_hdr("{" T("x", "\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,"
                                         "4611686018427387904],\"data_offsets\":[0,0]") "}",
                              0, &ds, &err), BF_OK);
    bf_dataset_free(ds);
    /* every supported dtype */
    assert_int_equal(load_hdr("{" T("a", "\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]")
                              "," T("b", "\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]")
                              "," T("c", "\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[8,16]")
                              "," T("d", "\"dtype\":\"U8\",\"shape\":[2,1],\"data_offsets\":[16,18]")
                              "}", 18, &ds, &err), BF_OK);
    assert_int_equal(bf_dataset_find(ds, "a")->dtype, BF_F16);
    assert_int_equal(bf_dataset_find(ds, "b")->dtype, BF_BF16);
    assert_int_equal(bf_dataset_find(ds, "c")->dtype, BF_I32);
    assert_int_equal(bf_dataset_find(ds, "d")->dtype, BF_U8);
    bf_dataset_free(ds);
}

/* An eval set of 8 MiB or more takes its pages from the caller's measurement
 * of the host (bf_dataset_limits.host_pages: 2 MiB pages where .huge, 4 KiB
 * ones where not; left 0, measured at the load): the same values every way,
 * checked against the formula that wrote them, not against another load. */
static void host_pages_from_the_caller(void **state)
{
    (void)state;
    const size_t n = (size_t)5 << 20, rows = n / 4;   /* 20 MiB of F32 [rows, 4] */
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1000) * 0.25f - (float)(i % 7);
    char hdr[160];
    snprintf(hdr, sizeof hdr, "{\"x\":{\"dtype\":\"F32\",\"shape\":[%zu,4],\"data_offsets\":[0,%zu]}}", rows,
             n * sizeof *x);
    size_t len;
    unsigned char *b = st_bytes(hdr, x, n * sizeof *x, &len);
    const bf_host_pages hosts[3] = {{.measured = 1, .huge = 1, .small_cost = 2.6e-9},
                                    {.measured = 1, .huge = 0, .small_cost = 0.35e-9},
                                    {0}};
    for (int h = 0; h < 3; h++) {
        bf_dataset_limits lim = {.host_pages = hosts[h]};
        bf_dataset *ds = NULL;
        bf_error err = {0};
        assert_int_equal(bf_dataset_load_buffer_opts(b, len, LABEL, &lim, &ds, &err), BF_OK);
        assert_int_equal(bf_dataset_num_samples(ds), (int64_t)rows);
        const bf_tensor *t = bf_dataset_find(ds, "x");
        assert_non_null(t);
        const float *got = t->data;
        for (size_t i = 0; i < n; i++)
            if (got[i] != (float)(i % 1000) * 0.25f - (float)(i % 7)) fail_msg("host %d: x[%zu] = %g", h, i, got[i]);
        bf_dataset_free(ds);
    }
    free(b);
    free(x);
}

static void bad_lengths(void **state)
{
    (void)state;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    size_t len;
    unsigned char *b = valid_file(&len);

    assert_int_equal(bf_dataset_load_buffer(b, 5, LABEL, &ds, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, LABEL ": 5 bytes is too short"));
    assert_int_equal(bf_dataset_load_buffer(NULL, 0, NULL, &ds, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "<buffer>: 0 bytes is too short"));
    assert_int_equal(bf_dataset_load_buffer(NULL, 10, LABEL, &ds, &err), BF_EINVAL);
    assert_int_equal(bf_dataset_load_buffer(b, len, LABEL, NULL, &err), BF_EINVAL);

    /* header length past the end: 1234 declared, 100 present */
    unsigned char small[108] = {0xd2, 0x04};
    assert_int_equal(bf_dataset_load_buffer(small, sizeof small, LABEL, &ds, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "header declares 1234 bytes but the file has only 100 after "
                                    "the length prefix"));
    /* an empty header */
    memset(small, 0, 8);
    assert_int_equal(bf_dataset_load_buffer(small, sizeof small, LABEL, &ds, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, LABEL ": header is not valid JSON"));
    /* a length whose top bit is set must not wrap around */
    memset(small, 0xff, 8);
    assert_int_equal(bf_dataset_load_buffer(small, sizeof small, LABEL, &ds, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "header declares 18446744073709551615 bytes"));

    /* over the 100 MiB header limit, with the bytes present (calloc: never touched) */
    size_t big = ((size_t)100 << 20) + 1;
    unsigned char *huge = calloc(1, big + 8);
    assert_non_null(huge);
    for (int i = 0; i < 8; i++) huge[i] = (unsigned char)((uint64_t)big >> (8 * i));
    assert_int_equal(bf_dataset_load_buffer(huge, big + 8, LABEL, &ds, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "header declares 104857601 bytes; at most 104857600"));
    free(huge);
    assert_null(ds);
    free(b);
}

static char *write_temp(const unsigned char *b, size_t len)
{
    char *path = strdup("/tmp/bf_test_dataset_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void load_file(void **state)
{
    (void)state;
    size_t len;
    unsigned char *b = valid_file(&len);
    char *path = write_temp(b, len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    assert_int_equal(bf_dataset_load_file(path, &ds, &err), BF_OK);
    check_valid(ds);
    bf_dataset_free(ds);
    ds = NULL;

    /* the header says 51 data bytes; the file stops 1 short */
    FILE *f = fopen(path, "wb");
    assert_int_equal(fwrite(b, 1, len - 1, f), len - 1);
    fclose(f);
    assert_int_equal(bf_dataset_load_file(path, &ds, &err), BF_EFORMAT);
    /* what the bytes get wrong names the file by its name, not its
     * directory (a daemon's data dir: issue 34), as the model loader does */
    assert_null(strstr(err.msg, "/tmp"));
    assert_int_equal(strncmp(err.msg, strrchr(path, '/') + 1, strlen(strrchr(path, '/') + 1)), 0);
    assert_non_null(strstr(err.msg, "tensor 'labels': data_offsets [48, 51] reach past the end "
                                    "of the data section (50 bytes)"));
    /* and one cut in the header */
    f = fopen(path, "wb");
    assert_int_equal(fwrite(b, 1, 20, f), 20);
    fclose(f);
    assert_int_equal(bf_dataset_load_file(path, &ds, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "but the file has only 12 after the length prefix"));
    f = fopen(path, "wb");
    assert_int_equal(fwrite(b, 1, 3, f), 3);
    fclose(f);
    assert_int_equal(bf_dataset_load_file(path, &ds, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "3 bytes is too short"));
    assert_null(strstr(err.msg, "/tmp"));
    assert_null(ds);

    assert_int_equal(unlink(path), 0);
    assert_int_equal(bf_dataset_load_file(path, &ds, &err), BF_EIO);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, strerror(ENOENT)));
    assert_int_equal(bf_dataset_load_file("/tmp", &ds, &err), BF_EIO);
    assert_non_null(strstr(err.msg, "/tmp: not a regular file"));
    assert_int_equal(bf_dataset_load_file(NULL, &ds, &err), BF_EINVAL);
    assert_null(ds);
    free(path);
    free(b);
}

static void out_of_memory(void **state)
{
    (void)state;
    size_t len;
    unsigned char *b = valid_file(&len);
    char *path = write_temp(b, len);
    for (int from_file = 0; from_file < 2; from_file++) {
        for (long n = 0;; n++) {
            bf_dataset *ds = NULL;
            bf_error err = {0};
            bf_test_alloc_fail_after(n);
            bf_status st = from_file ? bf_dataset_load_file(path, &ds, &err)
                                     : bf_dataset_load_buffer(b, len, LABEL, &ds, &err);
            long refused = bf_test_alloc_failures();
            bf_test_alloc_fail_after(-1);
            if (!refused) {
                assert_int_equal(st, BF_OK);
                check_valid(ds);
                bf_dataset_free(ds);
                break;
            }
            assert_int_equal(st, BF_ENOMEM);
            assert_non_null(strstr(err.msg, from_file ? strrchr(path, '/') + 1 : LABEL));   /* a file by its name */
            assert_null(ds);
        }
    }
    unlink(path);
    free(path);
    free(b);
}

static void copy_rows_converts(void **state)
{
    (void)state;
    /* h: F16 [3, 2] = 1, -2, 0.5, 65504, inf, NaN;
     * b: BF16 [3, 2] = 1, -3, 0.5, 2^100, -inf, 0;  ids: I64 [3] */
    const uint16_t h[6] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x7c00, 0x7e00};
    const uint16_t bb[6] = {0x3f80, 0xc040, 0x3f00, 0x7180, 0xff80, 0x0000};
    const int64_t ids[3] = {7, -1, (int64_t)1 << 40};
    unsigned char data[12 + 12 + 24];
    memcpy(data, h, 12);
    memcpy(data + 12, bb, 12);
    memcpy(data + 24, ids, 24);
    size_t len;
    unsigned char *file = st_bytes(
        "{" T("h", "\"dtype\":\"F16\",\"shape\":[3,2],\"data_offsets\":[0,12]")
        "," T("b", "\"dtype\":\"BF16\",\"shape\":[3,2],\"data_offsets\":[12,24]")
        "," T("ids", "\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[24,48]") "}",
        data, sizeof data, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    assert_int_equal(bf_dataset_load_buffer(file, len, LABEL, &ds, &err), BF_OK);
    free(file);

    /* rows 1..2 of h into a 4-row batch: the last two rows stay untouched */
    float out[8] = {9, 9, 9, 9, 9, 9, 9, 9};
    bf_tensor dst = {.name = "in", .dtype = BF_F32, .ndim = 2, .dims = {4, 2}, .data = out};
    assert_int_equal(bf_dataset_copy_rows(bf_dataset_find(ds, "h"), 1, 2, &dst, &err), BF_OK);
    assert_true(out[0] == 0.5f && out[1] == 65504.0f && isinf(out[2]) && out[2] > 0 &&
                isnan(out[3]) && out[4] == 9 && out[7] == 9);
    assert_int_equal(bf_dataset_copy_rows(bf_dataset_find(ds, "b"), 0, 3, &dst, &err), BF_OK);
    assert_true(out[0] == 1 && out[1] == -3 && out[2] == 0.5f && out[3] == 0x1p100f &&
                isinf(out[4]) && out[4] < 0 && out[5] == 0 && out[6] == 9);
    /* int64 -> int32 and -> f32; count 0 does nothing */
    int32_t i32[3] = {0};
    bf_tensor di = {.dtype = BF_I32, .ndim = 1, .dims = {3}, .data = i32};
    assert_int_equal(bf_dataset_copy_rows(bf_dataset_find(ds, "ids"), 0, 2, &di, &err), BF_OK);
    assert_int_equal(i32[0], 7);
    assert_int_equal(i32[1], -1);
    float f[3] = {0};
    bf_tensor df = {.dtype = BF_F32, .ndim = 1, .dims = {3}, .data = f};
    assert_int_equal(bf_dataset_copy_rows(bf_dataset_find(ds, "ids"), 2, 1, &df, &err), BF_OK);
    assert_true(f[0] == 0x1p40f);
    assert_int_equal(bf_dataset_copy_rows(bf_dataset_find(ds, "ids"), 3, 0, &df, &err), BF_OK);

    /* errors name the tensor */
    const bf_tensor *src = bf_dataset_find(ds, "h");
    assert_int_equal(bf_dataset_copy_rows(src, 2, 2, &dst, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "tensor 'h': cannot copy 2 samples from sample 2; it has 3"));
    assert_int_equal(bf_dataset_copy_rows(src, -1, 1, &dst, &err), BF_ERANGE);
    assert_int_equal(bf_dataset_copy_rows(src, 0, -1, &dst, &err), BF_ERANGE);
    assert_int_equal(bf_dataset_copy_rows(src, 1, INT64_MAX, &dst, &err), BF_ERANGE);
    bf_tensor small = {.dtype = BF_F32, .ndim = 2, .dims = {1, 2}, .data = out};
    assert_int_equal(bf_dataset_copy_rows(src, 0, 2, &small, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "tensor 'h': 2 samples do not fit in a destination of shape "
                                    "[1, 2]"));
    bf_tensor wide = {.dtype = BF_F32, .ndim = 2, .dims = {4, 3}, .data = out};
    assert_int_equal(bf_dataset_copy_rows(src, 0, 1, &wide, &err), BF_ESHAPE);
    assert_non_null(strstr(err.msg, "tensor 'h': rows of shape [3, 2] cannot be copied into "
                                    "shape [4, 3]"));
    bf_tensor flat = {.dtype = BF_F32, .ndim = 1, .dims = {8}, .data = out};
    assert_int_equal(bf_dataset_copy_rows(src, 0, 1, &flat, &err), BF_ESHAPE);
    bf_tensor bad = {.dtype = BF_DTYPE_INVALID, .ndim = 2, .dims = {4, 2}, .data = out};
    assert_int_equal(bf_dataset_copy_rows(src, 0, 1, &bad, &err), BF_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "tensor 'h': cannot convert"));
    assert_int_equal(bf_dataset_copy_rows(NULL, 0, 1, &dst, &err), BF_EINVAL);
    bf_dataset_free(ds);
}

static void conformance_dlrm(void **state)
{
    (void)state;
    const char *path = BF_FIXTURES "/../../../shared/conformance/dlrm_small.eval.safetensors";
    FILE *f = fopen(path, "rb");
    if (!f) skip();
    /* the first dense value, read independently: after the 8-byte length and
     * the header, at data offset 0 */
    unsigned char prefix[8];
    assert_int_equal(fread(prefix, 1, 8, f), 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | prefix[i];
    float first;
    assert_int_equal(fseek(f, (long)(8 + hl), SEEK_SET), 0);
    assert_int_equal(fread(&first, 4, 1, f), 1);
    fclose(f);

    bf_dataset *ds = NULL;
    bf_error err = {0};
    assert_int_equal(bf_dataset_load_file(path, &ds, &err), BF_OK);
    assert_int_equal(bf_dataset_num_samples(ds), 4000);
    const bf_tensor *dense = bf_dataset_find(ds, "dense"), *sparse = bf_dataset_find(ds, "sparse"),
                    *labels = bf_dataset_find(ds, "labels");
    assert_non_null(dense);
    assert_non_null(sparse);
    assert_non_null(labels);
    assert_int_equal(dense->dtype, BF_F32);
    assert_int_equal(dense->ndim, 2);
    assert_int_equal(dense->dims[1], 13);
    assert_int_equal(sparse->dtype, BF_I64);
    assert_int_equal(sparse->ndim, 3);
    assert_int_equal(sparse->dims[0], 4000);
    assert_int_equal(sparse->dims[1], 8);
    assert_int_equal(sparse->dims[2], 2);
    assert_int_equal(labels->dtype, BF_F32);
    assert_int_equal(labels->ndim, 1);
    assert_memory_equal(dense->data, &first, 4);
    const float *y = labels->data;
    for (int i = 0; i < 4000; i++) assert_true(y[i] == 0 || y[i] == 1);
    const int64_t *ids = sparse->data;
    for (int i = 0; i < 4000 * 16; i++) assert_true(ids[i] >= 0);

    /* a last, partial batch of 64 */
    static float batch[64 * 13];
    bf_tensor dst = {.dtype = BF_F32, .ndim = 2, .dims = {64, 13}, .data = batch};
    assert_int_equal(bf_dataset_copy_rows(dense, 3968, 32, &dst, &err), BF_OK);
    assert_memory_equal(batch, (const float *)dense->data + 3968 * 13, 32 * 13 * 4);
    bf_dataset_free(ds);
}

static uint64_t rng = 88172645463325252ull;
static uint32_t xorshift(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static long fuzz_ok, fuzz_failed;

/* Loads a copy of exactly `len` bytes (so ASan sees any read past it) and,
 * when it loads, touches every byte of every tensor. */
static void load_and_touch(const unsigned char *b, size_t len)
{
    unsigned char *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, b, len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    bf_status st = bf_dataset_load_buffer(copy, len, LABEL, &ds, &err);
    if (st == BF_OK) {
        int64_t n = bf_dataset_num_samples(ds);
        unsigned sum = 0;
        for (size_t i = 0; i < bf_dataset_num_tensors(ds); i++) {
            const bf_tensor *t = bf_dataset_tensor(ds, i);
            assert_int_equal(t->dims[0], n);
            const unsigned char *p = t->data;
            for (size_t k = 0; k < bf_tensor_nbytes(t); k++) sum += p[k];
            if (n > 0 && t->ndim == 1) {
                float one;
                bf_tensor dst = {.dtype = BF_F32, .ndim = 1, .dims = {1}, .data = &one};
                assert_int_equal(bf_dataset_copy_rows(t, n - 1, 1, &dst, &err), BF_OK);
            }
        }
        (void)sum;
        bf_dataset_free(ds);
        fuzz_ok++;
    } else {
        assert_true(st == BF_EFORMAT || st == BF_EUNSUPPORTED);
        assert_true(strlen(err.msg) > strlen(LABEL ": "));
        assert_null(ds);
        fuzz_failed++;
    }
    free(copy);
}

static void fuzz_truncate_and_flip(void **state)
{
    (void)state;
    size_t len;
    unsigned char *b = valid_file(&len);
    for (size_t cut = 0; cut <= len; cut++) load_and_touch(b, cut);

    size_t hdr_end = 8 + strlen(valid_hdr);
    static const char junk[] = "0123456789[]{}\",:-.eE \\ufF";
    unsigned char *m = malloc(len);
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(m, b, len);
        int edits = 1 + (int)(xorshift() % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = xorshift() % hdr_end;
            uint32_t how = xorshift();
            if (how % 4 == 0) m[at] ^= (unsigned char)(1u << (how >> 8) % 8);
            else if (how % 4 == 1) m[at] = (unsigned char)junk[(how >> 8) % (sizeof junk - 1)];
            else if (how % 4 == 2) m[at] = (unsigned char)(how >> 8);
            else {  /* a digit for a digit: valid JSON, wrong shapes and offsets */
                while (at < hdr_end && (m[at] < '0' || m[at] > '9')) at++;
                if (at < hdr_end) m[at] = (unsigned char)('0' + (how >> 8) % 10);
            }
        }
        load_and_touch(m, len);
        /* and a truncated mutant */
        load_and_touch(m, xorshift() % (len + 1));
    }
    free(m);
    free(b);
    /* the mutations reach both outcomes, so both paths were exercised */
    print_message("fuzz: %ld loaded, %ld rejected\n", fuzz_ok, fuzz_failed);
    assert_true(fuzz_ok > 100 && fuzz_failed > 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(load_valid_buffer),
        cmocka_unit_test(host_pages_from_the_caller),
        cmocka_unit_test(bad_headers),
        cmocka_unit_test(good_edge_cases),
        cmocka_unit_test(bad_lengths),
        cmocka_unit_test(load_file),
        cmocka_unit_test(out_of_memory),
        cmocka_unit_test(copy_rows_converts),
        cmocka_unit_test(conformance_dlrm),
        cmocka_unit_test(fuzz_truncate_and_flip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
