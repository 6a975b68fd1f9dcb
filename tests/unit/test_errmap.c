/* Profiled error maps (bitflip/errmap.h): a well-formed map loads as
 * written; every malformed one (truncated, trailing bytes, unsorted, outside
 * the memory, a cell of two kinds, nested or unknown header fields, bombs
 * past each limit) is refused with a message naming what is wrong, without
 * allocating what it claims; every allocation failure is a clean error.
 * The values laid over weights are checked against numpy in
 * tests/conformance/stutz_check.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <unistd.h>

#include "alloc_fail.h"
#include "bitflip/errmap.h"

typedef struct buf {
    unsigned char b[4096];
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    assert_true(b->n + n <= sizeof b->b);
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

static void put64(buf *b, uint64_t v)
{
    unsigned char x[8];
    for (int i = 0; i < 8; i++) x[i] = (unsigned char)(v >> (8 * i));
    put(b, x, 8);
}

/* magic, header length, header text, then `n` cells */
static buf make(const char *header, const uint64_t *cells, size_t n)
{
    buf b = {.n = 0};
    put(&b, "BFERRMAP", 8);
    put64(&b, strlen(header));
    put(&b, header, strlen(header));
    for (size_t i = 0; i < n; i++) put64(&b, cells[i]);
    return b;
}

#define HDR(rows, cols, f, s0, s1) \
    "{\"format\": 1, \"rows\": " #rows ", \"cols\": " #cols ", \"flip\": " #f ", \"stuck_at_0\": " #s0 \
    ", \"stuck_at_1\": " #s1 "}"

static void refused(buf b, const bf_errmap_limits *lim, bf_status want, const char *part)
{
    bf_errmap *m = (bf_errmap *)1;
    bf_error err = {0};
    bf_status st = bf_errmap_load_memory(b.b, b.n, lim, &m, &err);
    if (st != want || !strstr(err.msg, part)) fprintf(stderr, "status %d, message: %s (wanted '%s')\n", st, err.msg, part);
    assert_int_equal(st, want);
    assert_null(m);
    assert_non_null(strstr(err.msg, part));
}

static void loads_as_written(void **state)
{
    (void)state;
    uint64_t cells[] = {0, 5, 31, 3, 7, 8};
    buf b = make("{\"format\": 1, \"rows\": 4, \"cols\": 8, \"flip\": 3, \"stuck_at_0\": 1, \"stuck_at_1\": 2, "
                 "\"voltage\": 0.7, \"chip\": \"c1\", \"note\": \"n\"}",
                 cells, 6);
    bf_errmap *m = NULL;
    bf_error err = {0};
    assert_int_equal(bf_errmap_load_memory(b.b, b.n, NULL, &m, &err), BF_OK);
    assert_int_equal(m->rows, 4);
    assert_int_equal(m->cols, 8);
    assert_int_equal(m->n[BF_CELL_FLIP], 3);
    assert_int_equal(m->n[BF_CELL_STUCK_AT_0], 1);
    assert_int_equal(m->n[BF_CELL_STUCK_AT_1], 2);
    assert_true(m->cells[BF_CELL_FLIP][2] == 31 && m->cells[BF_CELL_STUCK_AT_0][0] == 3 &&
                m->cells[BF_CELL_STUCK_AT_1][1] == 8);
    assert_true(m->voltage == 0.7);
    assert_string_equal(m->chip, "c1");
    assert_int_equal(bf_errmap_cells(m), 6);
    bf_errmap_free(m);

    /* no failing cell at all is a map too */
    b = make(HDR(1, 1, 0, 0, 0), NULL, 0);
    assert_int_equal(bf_errmap_load_memory(b.b, b.n, NULL, &m, &err), BF_OK);
    assert_int_equal(bf_errmap_cells(m), 0);
    assert_true(m->voltage != m->voltage);   /* NaN: none given */
    bf_errmap_free(m);

    /* the same through a file */
    char path[] = "/tmp/test_errmap_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    b = make(HDR(4, 8, 3, 1, 2), cells, 6);
    assert_int_equal(write(fd, b.b, b.n), (ssize_t)b.n);
    close(fd);
    assert_int_equal(bf_errmap_load_file(path, NULL, &m, &err), BF_OK);
    assert_int_equal(bf_errmap_cells(m), 6);
    bf_errmap_free(m);
    unlink(path);
    assert_int_equal(bf_errmap_load_file(path, NULL, &m, &err), BF_EIO);
    assert_non_null(strstr(err.msg, path));
}

static void hostile(void **state)
{
    (void)state;
    uint64_t c[] = {3, 1};
    refused(make(HDR(2, 2, 2, 0, 0), c, 2), NULL, BF_EFORMAT, "not above the one before it");
    uint64_t same[] = {1, 1};
    refused(make(HDR(2, 2, 1, 1, 0), same, 2), NULL, BF_EFORMAT, "cell 1 is both flip and stuck_at_0");
    uint64_t out[] = {4};
    refused(make(HDR(2, 2, 1, 0, 0), out, 1), NULL, BF_EFORMAT, "past the memory's 4 cells");
    refused(make(HDR(2, 2, 3, 0, 0), c, 2), NULL, BF_EFORMAT, "truncated");
    refused(make(HDR(2, 2, 1, 0, 0), c, 2), NULL, BF_EFORMAT, "trailing bytes");
    refused(make(HDR(2, 2, 5, 0, 0), NULL, 0), NULL, BF_EFORMAT, "5 failing cells in a memory of 4");
    refused(make("{\"format\": 1, \"chip\": {\"a\": [1]}}", NULL, 0), NULL, BF_EFORMAT, "one flat JSON object");
    refused(make("{\"format\": 1, \"rows\": 1, \"cols\": 1, \"flip\": 0, \"stuck_at_0\": 0, \"stuck_at_1\": 0, "
                 "\"colour\": 1}", NULL, 0), NULL, BF_EFORMAT, "unknown field \"colour\"");
    refused(make("{\"format\": 2}", NULL, 0), NULL, BF_EUNSUPPORTED, "format 2");
    refused(make("{\"format\": 1, \"rows\": 2, \"cols\": 2, \"flip\": 0, \"stuck_at_0\": 0}", NULL, 0), NULL, BF_EFORMAT,
            "\"stuck_at_1\" is required");
    refused(make("{\"format\": 1, \"rows\": -2, \"cols\": 2}", NULL, 0), NULL, BF_EFORMAT, "\"rows\" must be an integer");
    refused(make("{\"format\": 1, \"rows\": 0, \"cols\": 2, \"flip\": 0, \"stuck_at_0\": 0, \"stuck_at_1\": 0}", NULL, 0),
            NULL, BF_EFORMAT, "at least 1");
    refused(make("{\"format\": 1, \"rows\": 1, \"cols\": 1, \"flip\": 0, \"stuck_at_0\": 0, \"stuck_at_1\": 0, "
                 "\"voltage\": \"low\"}", NULL, 0), NULL, BF_EFORMAT, "\"voltage\" must be a number");
    refused(make("[1, 2]", NULL, 0), NULL, BF_EFORMAT, "must be a JSON object");
    refused(make("{\"format\": 1, \"format\": 1}", NULL, 0), NULL, BF_EFORMAT, "not JSON");
    refused(make("{\"format\": 1", NULL, 0), NULL, BF_EFORMAT, "not JSON");
    buf b = make(HDR(1, 1, 0, 0, 0), NULL, 0);
    b.b[0] = 'X';
    refused(b, NULL, BF_EFORMAT, "not a bitflip error map");
    b = make(HDR(1, 1, 0, 0, 0), NULL, 0);
    refused((buf){.n = 7}, NULL, BF_EFORMAT, "not a bitflip error map");
    b.n = 20;   /* the header cut short */
    refused(b, NULL, BF_EFORMAT, "truncated");
}

static void limits(void **state)
{
    (void)state;
    /* bombs: the claims are refused before anything is allocated for them */
    bf_test_alloc_track_largest(1);
    refused(make(HDR(1048576, 1048576, 1099511627776, 0, 0), NULL, 0), NULL, BF_ELIMIT, "(errmap.cells)");
    refused(make(HDR(1048576, 1048576, 1000, 0, 0), NULL, 0), NULL, BF_EFORMAT, "truncated");
    assert_true(bf_test_alloc_largest() < 4096);
    bf_test_alloc_track_largest(0);
    refused(make(HDR(2097152, 1048576, 0, 0, 0), NULL, 0), NULL, BF_ELIMIT, "(errmap.bits)");
    buf b = make(HDR(1, 1, 0, 0, 0), NULL, 0);
    memset(b.b + 8, 0xff, 8);   /* a header of 2^64 - 1 bytes */
    refused(b, NULL, BF_ELIMIT, "(errmap.header-bytes)");

    uint64_t c[] = {0, 1, 2};
    bf_errmap_limits lim = {.max_cells = 2};
    refused(make(HDR(2, 2, 1, 1, 1), c, 3), &lim, BF_ELIMIT, "the limit is 2 (errmap.cells)");
    lim = (bf_errmap_limits){.max_bits = 3};
    refused(make(HDR(2, 2, 0, 0, 0), NULL, 0), &lim, BF_ELIMIT, "at most 3 bits");
    lim = (bf_errmap_limits){.max_header_bytes = 10};
    refused(make(HDR(2, 2, 0, 0, 0), NULL, 0), &lim, BF_ELIMIT, "at most 10 are accepted");
}

static void allocation_failures(void **state)
{
    (void)state;
    uint64_t cells[] = {0, 5, 31, 3, 7, 8};
    buf b = make("{\"format\": 1, \"rows\": 4, \"cols\": 8, \"flip\": 3, \"stuck_at_0\": 1, \"stuck_at_1\": 2, "
                 "\"chip\": \"c1\"}",
                 cells, 6);
    for (long n = 0;; n++) {
        bf_errmap *m = NULL;
        bf_error err = {0};
        bf_test_alloc_fail_after(n);
        bf_status st = bf_errmap_load_memory(b.b, b.n, NULL, &m, &err);
        long failed = bf_test_alloc_failures();
        bf_test_alloc_fail_after(-1);
        if (!failed) {
            assert_int_equal(st, BF_OK);
            bf_errmap_free(m);
            break;
        }
        assert_int_equal(st, BF_ENOMEM);
        assert_null(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loads_as_written),
        cmocka_unit_test(hostile),
        cmocka_unit_test(limits),
        cmocka_unit_test(allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
