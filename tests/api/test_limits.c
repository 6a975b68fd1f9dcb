/* bf_limits_set: every kind of key (an int count, a 64-bit count, a size
 * into int64_t, a size into size_t), and each way a KEY=VALUE is refused,
 * with the messages the CLI and bitflipd print. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/api/limits.h"

static void test_each_kind(void **state)
{
    (void)state;
    bf_limits l = {0};
    bf_error err = {0};
    assert_int_equal(bf_limits_set(&l, "model.graph-depth=16", &err), BF_OK);
    assert_int_equal(l.model.max_graph_depth, 16);
    assert_int_equal(bf_limits_set(&l, "model.nodes=5000000000", &err), BF_OK);
    assert_true(l.model.max_nodes == 5000000000LL);
    assert_int_equal(bf_limits_set(&l, "data.bytes=1G", &err), BF_OK);
    assert_true(l.data.max_bytes == (int64_t)1 << 30);
    assert_int_equal(bf_limits_set(&l, "spec.string=64K", &err), BF_OK);
    assert_true(l.spec.max_string == 65536);
    assert_int_equal(bf_limits_set(&l, "spec.array=7", &err), BF_OK);
    assert_true(l.spec.max_array == 7);
    assert_int_equal(bf_limits_set(&l, "spec.depth=3", &err), BF_OK);
    assert_int_equal(l.spec.max_depth, 3);
    assert_int_equal(bf_limits_set(&l, "spec.new-tokens=64", &err), BF_OK);
    assert_true(l.spec.max_new_tokens == 64);
    assert_int_equal(bf_limits_set(&l, "data.json-depth=4", &err), BF_OK);
    assert_int_equal(l.data.max_json_depth, 4);
    /* the fields not named keep 0: their defaults */
    assert_int_equal(l.model.max_type_depth, 0);
    assert_true(l.data.max_header_bytes == 0);
    /* a later setting of a key wins */
    assert_int_equal(bf_limits_set(&l, "model.graph-depth=2", &err), BF_OK);
    assert_int_equal(l.model.max_graph_depth, 2);
}

static void test_every_key_listed(void **state)
{
    (void)state;
    size_t n = 0;
    while (bf_limits_key(n)) n++;
    assert_int_equal(n, 21);
    assert_string_equal(bf_limits_key(0), "model.graph-depth");
    assert_string_equal(bf_limits_key(16), "spec.string");
    assert_string_equal(bf_limits_key(17), "spec.new-tokens");
    assert_string_equal(bf_limits_key(20), "errmap.bits");
    /* each one is settable: sizes and counts both take a plain 1 */
    for (size_t i = 0; i < n; i++) {
        bf_limits l = {0};
        bf_error err = {0};
        char kv[64];
        snprintf(kv, sizeof kv, "%s=1", bf_limits_key(i));
        assert_int_equal(bf_limits_set(&l, kv, &err), BF_OK);
        bf_limits zero = {0};
        assert_true(memcmp(&l, &zero, sizeof l) != 0);
    }
}

static void refused(const char *kv, const char *msg)
{
    bf_limits l = {0};
    bf_error err = {0};
    assert_int_equal(bf_limits_set(&l, kv, &err), BF_EINVAL);
    if (!strstr(err.msg, msg)) fail_msg("'%s': got '%s', wanted '%s'", kv ? kv : "(null)", err.msg, msg);
    bf_limits zero = {0};
    assert_true(memcmp(&l, &zero, sizeof l) == 0);   /* nothing set on an error */
}

static void test_errors(void **state)
{
    (void)state;
    refused(NULL, "--limit wants KEY=VALUE, e.g. model.graph-depth=16");
    refused("model.graph-depth", "--limit wants KEY=VALUE");
    refused("model.depth=2", "--limit: no limit 'model.depth'; the limits are model.graph-depth, model.type-depth, "
                             "model.field-bytes, model.nodes, model.initializers, model.attributes, model.messages, "
                             "model.rank, model.tensor-elements, data.header-bytes, data.json-depth, data.tensors, "
                             "data.bytes, spec.bytes, spec.depth, spec.array, spec.string");
    refused("=3", "no limit ''");
    refused("model.graph-depth=zero", "model.graph-depth must be an integer from 1 to 1000000000, got 'zero'");
    refused("model.graph-depth=", "model.graph-depth must be an integer from 1 to 1000000000, got ''");
    refused("model.graph-depth=0", "must be an integer from 1 to");
    refused("model.rank=1000000001", "model.rank must be an integer from 1 to 1000000000");
    refused("model.nodes=-5", "model.nodes must be an integer from 1 to 4611686018427387904");
    refused("spec.array=0", "spec.array must be an integer from 1 to");
    refused("data.bytes=lots", "data.bytes wants a size such as 4096, 64M or 2G, got 'lots'");
    refused("data.bytes=-1G", "data.bytes wants a size");
    refused("data.bytes=99999999T", "data.bytes wants a size");
    refused("spec.bytes=0", "spec.bytes must be at least 1");
    refused("spec.bytes=0.1", "spec.bytes must be at least 1");
}

static void test_parse_size(void **state)
{
    (void)state;
    int64_t v = 0;
    assert_int_equal(bf_parse_size("4096", &v), 0);
    assert_true(v == 4096);
    assert_int_equal(bf_parse_size("64M", &v), 0);
    assert_true(v == (int64_t)64 << 20);
    assert_int_equal(bf_parse_size("4GiB", &v), 0);
    assert_true(v == (int64_t)4 << 30);
    assert_int_equal(bf_parse_size("2GB", &v), 0);
    assert_true(v == (int64_t)2 << 30);
    assert_int_equal(bf_parse_size("1.5k", &v), 0);
    assert_true(v == 1536);
    assert_int_equal(bf_parse_size("", &v), -1);
    assert_int_equal(bf_parse_size(NULL, &v), -1);
    assert_int_equal(bf_parse_size("4X", &v), -1);
    assert_int_equal(bf_parse_size("4 G", &v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_kind),
        cmocka_unit_test(test_every_key_listed),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_parse_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
