/* The exporter's record of the kernels PyTorch ran (metadata_props
 * "bitflip.kernels": core/src/model/onnx_meta.c, core/src/exec/fuse_record.c):
 * with it, a pattern is fused only where PyTorch ran the kernel, in the
 * module scope its nodes carry; without it every pattern is fused; hostile
 * records (bad header or fields, a key twice, too large, too many lines) are
 * refused naming the key and the line; records naming nodes the graph does
 * not have fuse nothing. Also: which GroupNorm exports are fused at all
 * (the near misses of tests/ops/cases/norms.py are not). The record is appended to an op-case fixture as a
 * ModelProto field 14 (protobuf merges appended fields), as bitflip.export
 * writes it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/model.h"

#define OPS BF_FIXTURES "/ops/"
enum { K_LAYERNORM = 0, K_GROUPNORM = 4 };

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 64);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static size_t varint(unsigned char *o, uint64_t v)
{
    size_t k = 0;
    do {
        o[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return k;
}

/* buf + a length-delimited field `num` holding data */
static unsigned char *append_field(unsigned char *buf, size_t *len, int num, const void *data, size_t n)
{
    buf = realloc(buf, *len + n + 24);
    assert_non_null(buf);
    *len += varint(buf + *len, (uint64_t)num << 3 | 2);
    *len += varint(buf + *len, n);
    memcpy(buf + *len, data, n);
    *len += n;
    return buf;
}

/* The fixture with metadata_props {key: value} appended (value NULL: none). */
static unsigned char *with_record(const char *path, const char *key, const char *value, size_t vlen, size_t *len)
{
    unsigned char *b = read_all(path, len);
    if (!value) return b;
    size_t klen = strlen(key), elen = 0;
    unsigned char *entry = NULL;
    entry = append_field(entry, &elen, 1, key, klen);
    entry = append_field(entry, &elen, 2, value, vlen);
    b = append_field(b, len, 14, entry, elen);
    free(entry);
    return b;
}

static bf_status load(const char *path, const char *value, bf_model **m, bf_error *err)
{
    size_t len;
    unsigned char *b = with_record(path, "bitflip.kernels", value, value ? strlen(value) : 0, &len);
    *m = NULL;
    bf_status st = bf_model_load_buffer_opts(b, len, "model.onnx", NULL, m, err);
    free(b);
    return st;
}

static size_t fused(const bf_model *m, size_t kind)
{
    size_t c = 0;
    assert_non_null(bf_model_fusion(m, kind, &c, NULL, NULL));
    return c;
}

static void expect(const char *path, const char *record, size_t kind, size_t want_fused, const char *want_rule,
                   size_t want_unrec)
{
    bf_model *m;
    bf_error err = {0};
    if (load(path, record, &m, &err) != BF_OK) fail_msg("%s", err.msg);
    size_t calls, unrec;
    assert_string_equal(bf_model_fusion_rule(m, &calls, &unrec), want_rule);
    assert_int_equal(fused(m, kind), want_fused);
    assert_int_equal(unrec, want_unrec);
    bf_model_free(m);
}

static void test_rule(void **state)
{
    (void)state;
    const char *ln = OPS "fuse_layernorm_op13.onnx", *gn = OPS "norm_groupnorm_1d_op13.onnx";
    expect(ln, NULL, K_LAYERNORM, 1, "pattern", 0);
    expect(gn, NULL, K_GROUPNORM, 1, "pattern", 0);
    /* one detail away from the export (tests/ops/cases/norms.py): not GroupNorm */
    expect(OPS "norm_groupnorm_nearmiss_scale2.onnx", NULL, K_GROUPNORM, 0, "pattern", 0);
    expect(OPS "norm_groupnorm_nearmiss_read_twice.onnx", NULL, K_GROUPNORM, 0, "pattern", 0);
    expect(OPS "norm_groupnorm_noaffine_op13.onnx", NULL, K_GROUPNORM, 1, "pattern", 0);
    expect(OPS "nn_groupnorm_export17.onnx", NULL, K_GROUPNORM, 1, "pattern", 0);
    /* nn.LayerNorm was the top module: scope "" (node names "/ReduceMean", ...) */
    expect(ln, "bitflip.kernels 1\nlayer_norm\t\tnn.LayerNorm\n", K_LAYERNORM, 1, "record", 0);
    expect(gn, "bitflip.kernels 1\ngroup_norm\t/gn\tnn.GroupNorm\n", K_GROUPNORM, 1, "record", 0);
    /* CRLF line ends, no final newline, a later version's kernel names */
    expect(gn, "bitflip.kernels 1\r\nsoftmax\t/gn\tx\r\ngroup_norm\t/gn\tnn.GroupNorm", K_GROUPNORM, 1, "record", 0);
    /* PyTorch ran it op by op: an empty record, another scope, another kernel */
    expect(ln, "bitflip.kernels 1\n", K_LAYERNORM, 0, "record", 1);
    expect(ln, "bitflip.kernels 1\nlayer_norm\t/ln\tnn.LayerNorm\n", K_LAYERNORM, 0, "record", 1);
    expect(gn, "bitflip.kernels 1\nlayer_norm\t/gn\tnn.GroupNorm\n", K_GROUPNORM, 0, "record", 1);
    /* wrong node names: scopes the graph does not have, a prefix of the real one */
    expect(gn, "bitflip.kernels 1\ngroup_norm\t/g\tx\ngroup_norm\t/gn/Reshape\tx\ngroup_norm\t/gn/\tx\n", K_GROUPNORM, 0,
           "record", 1);
    /* one call fuses one pattern */
    expect(gn, "bitflip.kernels 1\ngroup_norm\t/gn\tA\ngroup_norm\t/gn\tB\n", K_GROUPNORM, 1, "record", 0);
    /* --no-fuse */
    bf_load_limits lim = {.no_fuse = 1};
    bf_model *m = NULL;
    bf_error err = {0};
    size_t len;
    unsigned char *b = with_record(gn, "bitflip.kernels", "bitflip.kernels 1\n", 18, &len);
    assert_int_equal(bf_model_load_buffer_opts(b, len, "model.onnx", &lim, &m, &err), BF_OK);
    assert_string_equal(bf_model_fusion_rule(m, NULL, NULL), "off");
    bf_model_free(m);
    free(b);
}

static void refused(const char *record, size_t rlen, bf_status want, const char *msg_part)
{
    size_t len;
    unsigned char *b = with_record(OPS "norm_groupnorm_1d_op13.onnx", "bitflip.kernels", record, rlen, &len);
    bf_model *m = NULL;
    bf_error err = {0};
    assert_int_equal(bf_model_load_buffer_opts(b, len, "model.onnx", NULL, &m, &err), want);
    assert_null(m);
    if (!strstr(err.msg, msg_part) || !strstr(err.msg, "bitflip.kernels") || !strstr(err.msg, "model.onnx"))
        fail_msg("message '%s' does not say '%s'", err.msg, msg_part);
    free(b);
}

static void test_hostile(void **state)
{
    (void)state;
    refused("", 0, BF_EFORMAT, "line 1");
    refused("bitflip.kernels 2\n", 18, BF_EFORMAT, "line 1");
    refused("{\"kernels\": []}", 15, BF_EFORMAT, "line 1");
    refused("bitflip.kernels 1\ngroup_norm /gn nn.GroupNorm\n", 45, BF_EFORMAT, "line 2");
    refused("bitflip.kernels 1\ngroup_norm\t/gn\n", 33, BF_EFORMAT, "line 2");
    refused("bitflip.kernels 1\n\t/gn\tx\n", 25, BF_EFORMAT, "line 2");
    refused("bitflip.kernels 1\ngroup_norm\t/gn\tx\tmore\n", 40, BF_EFORMAT, "line 2");
    /* a NUL inside: the value ends there for a C string; what is left must parse */
    refused("bitflip.kernels 1\ngroup_norm\0\t/gn\tx\n", 35, BF_EFORMAT, "line 2");
    /* too large, too many lines */
    size_t big = (1u << 20) + 1;
    char *s = malloc(big + 1);
    assert_non_null(s);
    memset(s, 'a', big);
    s[big] = '\0';
    refused(s, big, BF_ELIMIT, "bytes");
    strcpy(s, "bitflip.kernels 1\n");
    size_t n = strlen(s);
    memset(s + n, '\n', 70000);
    s[n + 70000] = '\0';
    refused(s, n + 70000, BF_ELIMIT, "lines");
    free(s);
    /* the key twice */
    size_t len;
    unsigned char *b = with_record(OPS "norm_groupnorm_1d_op13.onnx", "bitflip.kernels", "bitflip.kernels 1\n", 18,
                                   &len);
    unsigned char entry[64];
    size_t elen = 0;
    elen += varint(entry, 1 << 3 | 2);
    elen += varint(entry + elen, 15);
    memcpy(entry + elen, "bitflip.kernels", 15);
    elen += 15;
    b = append_field(b, &len, 14, entry, elen);
    bf_model *m = NULL;
    bf_error err = {0};
    assert_int_equal(bf_model_load_buffer_opts(b, len, "model.onnx", NULL, &m, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "twice"));
    free(b);
    /* other keys are the user's */
    b = with_record(OPS "norm_groupnorm_1d_op13.onnx", "bitflip.kernels.v2", "anything", 8, &len);
    assert_int_equal(bf_model_load_buffer_opts(b, len, "model.onnx", NULL, &m, &err), BF_OK);
    assert_string_equal(bf_model_fusion_rule(m, NULL, NULL), "pattern");
    bf_model_free(m);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
