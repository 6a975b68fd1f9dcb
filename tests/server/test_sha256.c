/* The libcrypto wrapper (store/sha256.c) against the FIPS 180-2 example
 * messages (NIST's published digests: "abc", the empty string, the
 * million 'a's), the padding edges 55/56/64 bytes (digests from Python's
 * hashlib), streaming in awkward pieces, and the constant-time compare. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store/sha256.h"

static void check(const void *msg, size_t len, const char *want)
{
    char hex[65];
    assert_int_equal(bfd_sha256_hex(msg, len, hex, NULL), BF_OK);
    assert_string_equal(hex, want);
}

static void test_nist_vectors(void **state)
{
    (void)state;
    check("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check(m448, strlen(m448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                       "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    assert_int_equal(strlen(m896), 112);
    check(m896, strlen(m896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a(void **state)
{
    (void)state;
    /* fed 1000 bytes at a time, as the FIPS example suggests; one-shot below */
    char chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    bfd_sha256 s;
    uint8_t d[32];
    char hex[65];
    assert_int_equal(bfd_sha256_init(&s, NULL), BF_OK);
    for (int i = 0; i < 1000; i++) assert_int_equal(bfd_sha256_update(&s, chunk, sizeof chunk, NULL), BF_OK);
    assert_int_equal(bfd_sha256_final(&s, d, NULL), BF_OK);
    assert_null(s.ctx);
    bfd_hex(d, sizeof d, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

    char *all = malloc(1000000);
    assert_non_null(all);
    memset(all, 'a', 1000000);
    check(all, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(all);
}

static void test_padding_edges(void **state)
{
    (void)state;
    char a[64];
    memset(a, 'a', sizeof a);
    /* 55 bytes: the 0x80 and length just fit one block; 56: they do not */
    check(a, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    check(a, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    check(a, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

static void test_streaming_equals_one_shot(void **state)
{
    (void)state;
    enum { N = 4099 };
    static const size_t pieces[] = {1, 3, 7, 63, 64, 65, 127, 128, 129, 1000, 0, 5};
    uint8_t *buf = malloc(N);
    assert_non_null(buf);
    uint32_t x = 12345;   /* any bytes will do; an LCG keeps them reproducible */
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 24);
    }
    for (size_t len = 0; len <= N; len += len < 200 ? 1 : 389) {
        char want[65], got[65];
        uint8_t d[32];
        assert_int_equal(bfd_sha256_hex(buf, len, want, NULL), BF_OK);
        bfd_sha256 s;
        assert_int_equal(bfd_sha256_init(&s, NULL), BF_OK);
        size_t off = 0;
        for (size_t p = 0; off < len; p++) {
            size_t take = pieces[p % (sizeof pieces / sizeof pieces[0])];
            if (take > len - off) take = len - off;
            assert_int_equal(bfd_sha256_update(&s, buf + off, take, NULL), BF_OK);
            off += take;
        }
        assert_int_equal(bfd_sha256_final(&s, d, NULL), BF_OK);
        bfd_hex(d, sizeof d, got);
        assert_string_equal(got, want);
    }
    free(buf);
}

static void test_hex(void **state)
{
    (void)state;
    const uint8_t b[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
    char out[13];
    memset(out, 'x', sizeof out);
    bfd_hex(b, sizeof b, out);
    assert_string_equal(out, "00017f80abff");
    bfd_hex(b, 0, out);
    assert_string_equal(out, "");
}

static void test_unfinished_and_equal(void **state)
{
    (void)state;
    bfd_sha256 s = {0};
    bf_error err = {0};
    uint8_t d[32];
    bfd_sha256_free(&s);   /* a zeroed digest frees fine */
    assert_int_equal(bfd_sha256_final(&s, d, &err), BF_EINVAL);
    assert_int_equal(bfd_sha256_init(&s, NULL), BF_OK);
    assert_int_equal(bfd_sha256_update(&s, "abc", 3, NULL), BF_OK);
    bfd_sha256_free(&s);   /* abandoned midway (an aborted upload): no leak under ASan */
    assert_null(s.ctx);

    char a[65], b[65];
    assert_int_equal(bfd_sha256_hex("abc", 3, a, NULL), BF_OK);
    memcpy(b, a, sizeof b);
    assert_true(bfd_digest_equal(a, b));
    b[0] = b[0] == '0' ? '1' : '0';
    assert_false(bfd_digest_equal(a, b));
    memcpy(b, a, sizeof b);
    b[63] = b[63] == '0' ? '1' : '0';
    assert_false(bfd_digest_equal(a, b));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nist_vectors),
        cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_padding_edges),
        cmocka_unit_test(test_streaming_equals_one_shot),
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_unfinished_and_equal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
