/* com.microsoft MatMulNBits (core/src/exec/ops/quant_nbits.c) against a
 * plain reference written here from ONNX Runtime's definition: 4-bit fields
 * low nibble first, (q - z) * scale per block of block_size along K, the
 * default zero point 8, the last block shorter, Y = A W^T (each output the
 * in-order fma chain over k, the engine's product) + bias; and every
 * inconsistent shape or attribute refused with an error naming it. The
 * model-level checks (numpy and ONNX Runtime, faults in B and the scales)
 * are conformance_nbits and ort_quant. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "campaign_check.h"
#include "onnx_graph.h"
#include "op_harness.h"

#define OP "com.microsoft:MatMulNBits"

/* K 40, N 3, block 16: 3 blocks, the last holds 8 fields of 16 */
enum { K = 40, N = 3, BLK = 16, NB = 3, BLOB = 8, M = 5 };

typedef struct fx {
    uint8_t b[N * NB * BLOB];
    float scales[N * NB];
    uint8_t zp[N * 2];        /* ceil(3 * 4 / 8) = 2 bytes a column */
    float bias[N];
    float a[M * K];
} fx;

static void fill(fx *f)
{
    uint32_t s = 12345;
    for (size_t i = 0; i < sizeof f->b; i++) f->b[i] = (uint8_t)((s = s * 1103515245u + 12345u) >> 16);
    for (int i = 0; i < N * NB; i++) f->scales[i] = 0.01f * (float)(i + 1) * (i % 2 ? -1.0f : 1.0f);
    for (size_t i = 0; i < sizeof f->zp; i++) f->zp[i] = (uint8_t)((s = s * 1103515245u + 12345u) >> 16);
    for (int i = 0; i < N; i++) f->bias[i] = 0.5f - (float)i;
    for (int i = 0; i < M * K; i++) f->a[i] = (float)((int)((s = s * 1103515245u + 12345u) >> 16) % 200 - 100) / 37.0f;
}

/* The reference: W[n][k] from the definition, then the in-order chain. */
static void reference(const fx *f, int with_zp, int with_bias, float *y)
{
    float w[N][K];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            int blk = k / BLK, j = k % BLK;
            uint8_t byte = f->b[(n * NB + blk) * BLOB + j / 2];
            int q = j % 2 ? byte >> 4 : byte & 15;
            int z = 8;
            if (with_zp) {
                uint8_t zb = f->zp[n * 2 + blk / 2];
                z = blk % 2 ? zb >> 4 : zb & 15;
            }
            w[n][k] = (float)(q - z) * f->scales[n * NB + blk];
        }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc = fmaf(f->a[m * K + k], w[n][k], acc);
            y[m * N + n] = with_bias ? acc + f->bias[n] : acc;
        }
}

static bf_status run(const fx *f, int64_t k, int64_t n, int64_t block, int64_t bits, const int64_t *bdims,
                     const bf_tensor *extra_zp, int with_zp, int with_gidx, int with_bias, bf_tensor *out, bf_error *err)
{
    bf__attr at[4] = {th_attr_int("K", k), th_attr_int("N", n), th_attr_int("bits", bits), th_attr_int("block_size", block)};
    bf_tensor a = th_tensor_f32(f->a, 2, (int64_t[]){M, K});
    bf_tensor b = th_tensor(BF_U8, NULL, 3, bdims);
    if (bf_tensor_numel(&b) <= (int64_t)sizeof f->b) memcpy(b.data, f->b, (size_t)bf_tensor_numel(&b));
    bf_tensor s = th_tensor_f32(f->scales, 1, (int64_t[]){N * NB});
    bf_tensor z = th_tensor(BF_U8, f->zp, 1, (int64_t[]){N * 2});
    bf_tensor g = th_tensor(BF_I32, NULL, 1, (int64_t[]){K});
    bf_tensor bias = th_tensor_f32(f->bias, 1, (int64_t[]){N});
    const bf_tensor *in[6] = {&a, &b, &s, extra_zp ? extra_zp : with_zp ? &z : NULL, with_gidx ? &g : NULL,
                              with_bias ? &bias : NULL};
    bf_status st = th_run_op(OP, 13, at, 4, in, 6, out, 1, err);
    th_tensor_free(&a);
    th_tensor_free(&b);
    th_tensor_free(&s);
    th_tensor_free(&z);
    th_tensor_free(&g);
    th_tensor_free(&bias);
    return st;
}

static void matches_the_definition(void **state)
{
    (void)state;
    fx f;
    fill(&f);
    for (int mode = 0; mode < 4; mode++) {
        int with_zp = mode & 1, with_bias = mode >> 1;
        bf_tensor out;
        bf_error err = {0};
        if (run(&f, K, N, BLK, 4, (int64_t[]){N, NB, BLOB}, NULL, with_zp, 0, with_bias, &out, &err) != BF_OK)
            fail_msg("%s", err.msg);
        assert_int_equal(out.ndim, 2);
        assert_int_equal(out.dims[0], M);
        assert_int_equal(out.dims[1], N);
        float want[M * N];
        reference(&f, with_zp, with_bias, want);
        assert_memory_equal(out.data, want, sizeof want);   /* bit for bit: the same chain */
        th_free(&out, 1);
    }
}

/* More columns than the op dequantizes at a time (64), A of rank 3 as a
 * language model's [batch, sequence, K]: the same bits as one product. */
static void many_columns(void **state)
{
    (void)state;
    enum { K2 = 20, N2 = 150, NB2 = 2, BL2 = 8, R = 2, S = 3 };
    static uint8_t b[N2 * NB2 * BL2];
    static float sc[N2 * NB2], a[R * S * K2], want[R * S * N2];
    uint32_t s = 777;
    for (size_t i = 0; i < sizeof b; i++) b[i] = (uint8_t)((s = s * 1103515245u + 12345u) >> 16);
    for (int i = 0; i < N2 * NB2; i++) sc[i] = (float)((int)((s = s * 1103515245u + 12345u) >> 16) % 100 + 1) / 512.0f;
    for (int i = 0; i < R * S * K2; i++) a[i] = (float)((int)((s = s * 1103515245u + 12345u) >> 16) % 200 - 100) / 29.0f;
    for (int m = 0; m < R * S; m++)
        for (int n = 0; n < N2; n++) {
            float acc = 0;
            for (int k = 0; k < K2; k++) {
                uint8_t byte = b[(n * NB2 + k / 16) * BL2 + (k % 16) / 2];
                int q = k % 2 ? byte >> 4 : byte & 15;
                acc = fmaf(a[m * K2 + k], (float)(q - 8) * sc[n * NB2 + k / 16], acc);
            }
            want[m * N2 + n] = acc;
        }
    bf__attr at[4] = {th_attr_int("K", K2), th_attr_int("N", N2), th_attr_int("bits", 4), th_attr_int("block_size", 16)};
    bf_tensor ta = th_tensor_f32(a, 3, (int64_t[]){R, S, K2});
    bf_tensor tb = th_tensor(BF_U8, b, 3, (int64_t[]){N2, NB2, BL2});
    bf_tensor ts = th_tensor_f32(sc, 2, (int64_t[]){N2, NB2});
    const bf_tensor *in[3] = {&ta, &tb, &ts};
    bf_tensor out;
    bf_error err = {0};
    if (th_run_op(OP, 13, at, 4, in, 3, &out, 1, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(out.ndim, 3);
    assert_int_equal(out.dims[2], N2);
    assert_memory_equal(out.data, want, sizeof want);
    th_free(&out, 1);
    th_tensor_free(&ta);
    th_tensor_free(&tb);
    th_tensor_free(&ts);
}

static void hostile_shapes(void **state)
{
    (void)state;
    fx f;
    fill(&f);
    bf_tensor zf = th_tensor_f32(f.scales, 1, (int64_t[]){N * NB});
    bf_tensor zshort = th_tensor(BF_U8, f.zp, 1, (int64_t[]){N});
    struct {
        int64_t k, n, block, bits, bdims[3];
        const bf_tensor *zp;
        int gidx;
        const char *says;
    } cases[] = {
        {K + 1, N, BLK, 4, {N, NB, BLOB}, NULL, 0, "expected [..., K]"},         /* A's K disagrees */
        {K, N + 1, BLK, 4, {N, NB, BLOB}, NULL, 0, "[N, n_blocks, blob_size]"},   /* N disagrees with B */
        {K, N, 32, 4, {N, NB, BLOB}, NULL, 0, "[N, n_blocks, blob_size]"},        /* block_size disagrees with B */
        {K, N, BLK, 4, {N, NB, BLOB + 1}, NULL, 0, "blob_size"},                  /* blob size */
        {K, N, BLK, 4, {N, NB + 1, BLOB}, NULL, 0, "n_blocks"},
        {K, N, 24, 4, {N, NB, BLOB}, NULL, 0, "power of 2"},
        {K, N, 8, 4, {N, NB, BLOB}, NULL, 0, "from 16"},
        {K, N, 0, 4, {N, NB, BLOB}, NULL, 0, "block_size"},
        {K, N, INT64_MAX, 4, {N, NB, BLOB}, NULL, 0, "block_size"},
        {K, N, BLK, 8, {N, NB, BLOB}, NULL, 0, "only 4-bit"},
        {0, N, BLK, 4, {N, NB, BLOB}, NULL, 0, "K and N are required"},
        {K, -3, BLK, 4, {N, NB, BLOB}, NULL, 0, "K and N are required"},
        {K, INT64_MAX, BLK, 4, {N, NB, BLOB}, NULL, 0, "too large"},
        {K, N, BLK, 4, {N, NB, BLOB}, &zf, 0, "only packed uint8 zero points"},
        {K, N, BLK, 4, {N, NB, BLOB}, &zshort, 0, "zero_points"},
        {K, N, BLK, 4, {N, NB, BLOB}, NULL, 1, "g_idx"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bf_tensor out;
        bf_error err = {0};
        bf_status st = run(&f, cases[i].k, cases[i].n, cases[i].block, cases[i].bits, cases[i].bdims, cases[i].zp, 0,
                           cases[i].gidx, 0, &out, &err);
        if (st == BF_OK) {
            th_free(&out, 1);
            fail_msg("case %zu: accepted", i);
        }
        if (!strstr(err.msg, cases[i].says) || !strstr(err.msg, "MatMulNBits"))
            fail_msg("case %zu: '%s' does not say '%s'", i, err.msg, cases[i].says);
    }
    th_tensor_free(&zf);
    th_tensor_free(&zshort);
}

/* The loader takes MatMulNBits from com.microsoft and nothing else from a
 * foreign domain; B becomes a parameter (the fault surface) beside the
 * float scales. */
static void loader_and_parameters(void **state)
{
    (void)state;
    fx f;
    fill(&f);
    for (int foreign = 0; foreign < 2; foreign++) {
        tg_graph g = {0};
        g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, K});
        g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, (int64_t[]){-1, N});
        Onnx__TensorProto *b = tg_init(&g, "B", 2, 3, (int64_t[]){N, NB, BLOB});
        b->has_raw_data = 1;
        b->raw_data.len = sizeof f.b;
        b->raw_data.data = tg_alloc(&g, sizeof f.b);
        memcpy(b->raw_data.data, f.b, sizeof f.b);
        tg_init_f32(&g, "S", 1, (int64_t[]){N * NB}, f.scales);
        Onnx__NodeProto *n = tg_node(&g, foreign ? "FusedMatMul" : "MatMulNBits", "q", (const char *[]){"x", "B", "S"}, 3, "y");
        n->domain = tg_str(&g, "com.microsoft");
        tg_attr_int(&g, n, "K", K);
        tg_attr_int(&g, n, "N", N);
        tg_attr_int(&g, n, "bits", 4);
        tg_attr_int(&g, n, "block_size", BLK);
        bf_model *m = NULL;
        bf_error err = {0};
        bf_status st = tg_load_opts(&g, "nbits", NULL, &m, &err);
        if (foreign) {
            assert_int_equal(st, BF_EUNSUPPORTED);
            assert_non_null(strstr(err.msg, "FusedMatMul"));
            continue;
        }
        if (st != BF_OK) fail_msg("%s", err.msg);
        int64_t pb = bf_model_find_param(m, "B"), ps = bf_model_find_param(m, "S");
        assert_true(pb >= 0 && ps >= 0);
        assert_int_equal(bf_model_param(m, (size_t)pb)->dtype, BF_U8);
        assert_string_equal(bf_model_param(m, (size_t)pb)->reader_op, OP);
        bf_model_free(m);
    }
}

/* Campaigns on the fixtures: the differential engine gives the exact runs'
 * outcomes with faults in the packed bytes (their 8 bits) and in the
 * scales (float32, and fp16 with representation fp16). */
static void differential_matches_exact(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    double scale = tc_load(BF_FIXTURES "/nbits/nbits_mlp", &m, &ds);
    tc_tally t = {0};
    bf_campaign_spec s = tc_base_spec(8);
    s.seed = 5;
    s.trials = 200;
    s.sampling = BF_SAMPLE_UNIFORM;
    s.stop_confidence = 0.95;
    tc_both(m, ds, scale, "nbits_mlp", &s, "bytes of B", &t, NULL);
    bf_campaign *c = tc_make(m, ds, &s);
    assert_int_equal(bf_campaign_site(c, 0)->bits, 8);
    bf_campaign_free(c);
    char *scales[] = {"*scales"};
    s.tensors = scales;
    s.n_tensors = 1;
    tc_both(m, ds, scale, "nbits_mlp", &s, "scales fp32", &t, NULL);
    s.repr = BF_REPR_FP16;
    tc_both(m, ds, scale, "nbits_mlp", &s, "scales fp16", &t, NULL);
    tc_assert_agree("MatMulNBits, differential vs exact", &t, 600);
    bf_model_free(m);
    bf_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_the_definition),
        cmocka_unit_test(many_columns),
        cmocka_unit_test(hostile_shapes),
        cmocka_unit_test(loader_and_parameters),
        cmocka_unit_test(differential_matches_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
