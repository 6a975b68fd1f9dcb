/* External data (model/onnx_external.c): a model whose weight lives in a
 * file beside it, as onnx.save_model(..., save_as_external_data=True)
 * writes it, loads from its path and computes what a hand calculation says
 * (the weight read from the offset the entry names, junk before it); the
 * same model from a buffer is refused, saying to load it from its path; a
 * location outside the model's directory (absolute, '..'), a missing file,
 * a range past the file's end, a length that is not the dims', an offset
 * that is not a number are each refused with the initializer named, and a
 * failed allocation at every point fails cleanly. */
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
#include "bitflip/bitflip.h"
#include "onnx_graph.h"

/* x[batch,3] -> Gemm(W[2,3], bias[2], transB) -> y[batch,2]; W external */
static const float W[6] = {1, 2, 3, -1, 0.5f, 0.25f};
static const float BIAS[2] = {0.5f, -4};

typedef struct ext_case {
    char dir[64];
    char model[96];
    char data[96];
} ext_case;

/* A temporary directory holding w.bin (8 junk bytes, then W) and m.onnx,
 * whose fc.weight names the given location, offset and length (NULL: the
 * entry left out). */
static void write_case(ext_case *c, const char *loc, const char *off, const char *len)
{
    snprintf(c->dir, sizeof c->dir, "/tmp/bf_test_ext_XXXXXX");
    assert_non_null(mkdtemp(c->dir));
    snprintf(c->data, sizeof c->data, "%s/w.bin", c->dir);
    snprintf(c->model, sizeof c->model, "%s/m.onnx", c->dir);
    FILE *f = fopen(c->data, "wb");
    assert_non_null(f);
    const float junk[2] = {1e30f, -1e30f};
    assert_int_equal(fwrite(junk, sizeof junk, 1, f), 1);
    assert_int_equal(fwrite(W, sizeof W, 1, f), 1);
    fclose(f);

    tg_graph b = {0};
    int64_t xd[2] = {-1, 3}, yd[2] = {-1, 2}, wd[2] = {2, 3}, bd[1] = {2};
    b.ins[b.n_ins++] = tg_value_info(&b, "x", 1, 2, xd);
    b.outs[b.n_outs++] = tg_value_info(&b, "y", 1, 2, yd);
    Onnx__TensorProto *t = tg_init(&b, "fc.weight", 1, 2, wd);
    tg_init_f32(&b, "fc.bias", 1, bd, BIAS);
    const char *ins[3] = {"x", "fc.weight", "fc.bias"};
    Onnx__NodeProto *g = tg_node(&b, "Gemm", "fc", ins, 3, "y");
    tg_attr_int(&b, g, "transB", 1);
    const char *keys[3] = {"location", "offset", "length"}, *vals[3] = {loc, off, len};
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    t->external_data = tg_alloc(&b, 3 * sizeof *t->external_data);
    for (int i = 0; i < 3; i++) {
        if (!vals[i]) continue;
        Onnx__StringStringEntryProto *e = tg_alloc(&b, sizeof *e);
        onnx__string_string_entry_proto__init(e);
        e->key = tg_str(&b, keys[i]);
        e->value = tg_str(&b, vals[i]);
        t->external_data[t->n_external_data++] = e;
    }
    size_t n;
    uint8_t *buf = tg_pack(&b, "ext", &n);
    f = fopen(c->model, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    /* the buffer, loaded as a caller's bytes: no directory to read from */
    bf_model *m = NULL;
    bf_error err = {0};
    assert_int_equal(bf_model_load_buffer(buf, n, "m.onnx", &m, &err), BF_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "external"));
    assert_non_null(strstr(err.msg, "file path"));
    free(buf);
    tg_free(&b);
}

static void remove_case(ext_case *c)
{
    unlink(c->model);
    unlink(c->data);
    rmdir(c->dir);
}

static void external_weight_loads_and_computes(void **state)
{
    (void)state;
    ext_case c;
    write_case(&c, "w.bin", "8", "24");
    bf_model *m = NULL;
    bf_plan *p = NULL;
    bf_error err = {0};
    if (bf_model_load_file(c.model, &m, &err) != BF_OK) fail_msg("%s", err.msg);
    const bf_tensor *w = bf_model_param(m, (size_t)bf_model_find_param(m, "fc.weight"))->tensor;
    assert_memory_equal(w->data, W, sizeof W);
    assert_int_equal(bf_plan_create(m, 2, &p, &err), BF_OK);
    /* x = (1, 1, 1): y = (1+2+3+0.5, -1+0.5+0.25-4) = (6.5, -4.25);
     * x = (0, 2, -1): y = (4-3+0.5, 1-0.25-4) = (1.5, -3.25) */
    const float xs[6] = {1, 1, 1, 0, 2, -1};
    memcpy(bf_plan_input(p, 0)->data, xs, sizeof xs);
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    const float *y = bf_plan_output(p, 0)->data;
    assert_float_equal(y[0], 6.5f, 1e-6);
    assert_float_equal(y[1], -4.25f, 1e-6);
    assert_float_equal(y[2], 1.5f, 1e-6);
    assert_float_equal(y[3], -3.25f, 1e-6);
    /* a fault in an external weight is a fault like any other: bit 30 of
     * W[0][0] (1.0 -> inf) */
    bf_bitflip f = {.param = (int64_t)bf_model_find_param(m, "fc.weight"), .index = 0, .bit = 30};
    assert_int_equal(bf_plan_flip_bit(p, &f, NULL, NULL, &err), BF_OK);
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    assert_true(y[0] > 1e38f);
    bf_plan_free(p);
    bf_model_free(m);
    remove_case(&c);
}

static void expect_refused(const char *loc, const char *off, const char *len, bf_status want, const char *needle)
{
    ext_case c;
    write_case(&c, loc, off, len);
    bf_model *m = NULL;
    bf_error err = {0};
    bf_status st = bf_model_load_file(c.model, &m, &err);
    if (st != want || !strstr(err.msg, needle) || !strstr(err.msg, "fc.weight"))
        fail_msg("location '%s' offset '%s' length '%s': status %d, message: %s (wanted %d with '%s')", loc,
                 off ? off : "-", len ? len : "-", st, err.msg, want, needle);
    assert_null(m);
    remove_case(&c);
}

static void hostile_entries_are_refused(void **state)
{
    (void)state;
    expect_refused("/etc/passwd", "0", NULL, BF_EFORMAT, "inside the model's directory");
    expect_refused("../w.bin", "8", "24", BF_EFORMAT, "inside the model's directory");
    expect_refused("sub/../../w.bin", "8", "24", BF_EFORMAT, "inside the model's directory");
    expect_refused("nothere.bin", "8", "24", BF_ENOTFOUND, "nothere.bin");
    expect_refused("w.bin", "16", "24", BF_EFORMAT, "past the end");        /* 16 + 24 > 32 bytes */
    expect_refused("w.bin", "40", NULL, BF_EFORMAT, "past the end");
    expect_refused("w.bin", "8", "20", BF_EFORMAT, "raw_data has 20 bytes");   /* dims need 24 */
    expect_refused("w.bin", NULL, NULL, BF_EFORMAT, "raw_data has 32 bytes");   /* the whole file */
    expect_refused("w.bin", "8x", "24", BF_EFORMAT, "not a count of bytes");
    expect_refused("w.bin", "-8", "24", BF_EFORMAT, "not a count of bytes");
}

static void allocation_failures_are_clean(void **state)
{
    (void)state;
    ext_case c;
    write_case(&c, "w.bin", "8", "24");
    int ok = 0;
    for (int n = 0; n < 200 && !ok; n++) {
        bf_model *m = NULL;
        bf_error err = {0};
        bf_test_alloc_fail_after(n);
        bf_status st = bf_model_load_file(c.model, &m, &err);
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) {
            ok = 1;
            const bf_tensor *w = bf_model_param(m, (size_t)bf_model_find_param(m, "fc.weight"))->tensor;
            assert_memory_equal(w->data, W, sizeof W);
        } else if (st != BF_ENOMEM) {
            fail_msg("allocation %d refused: status %d (%s), not BF_ENOMEM", n, st, err.msg);
        }
        bf_model_free(m);
    }
    assert_true(ok);
    remove_case(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(external_weight_loads_and_computes),
        cmocka_unit_test(hostile_entries_are_refused),
        cmocka_unit_test(allocation_failures_are_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
