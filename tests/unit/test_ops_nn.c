/* The nn family (ConvTranspose, Einsum, InstanceNormalization,
 * GroupNormalization, LpNormalization, GlobalMaxPool): tiny cases worked
 * out by hand, and the errors prepare must report for malformed or hostile
 * nodes (sizes and attributes come from uploaded files). The ops' values
 * against PyTorch are the op cases (tests/ops/cases/nn.py). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "op_harness.h"

/* Runs a one-output op and compares with want exactly. */
static void expect_exact(const char *op, bf__attr *attrs, size_t na, const bf_tensor *const *in, int nin,
                         const bf_tensor *want)
{
    bf_tensor out;
    bf_error err = {0};
    if (th_run_op(op, 17, attrs, na, in, nin, &out, 1, &err) != BF_OK) fail_msg("%s failed: %s", op, err.msg);
    if (!(th_compare(&out, want, 0, 0) <= 1.0)) fail_msg("%s: not the value worked out by hand", op);
    th_free(&out, 1);
}

static void expect_error(const char *op, bf__attr *attrs, size_t na, const bf_tensor *const *in, int nin,
                         bf_status status, const char *needle)
{
    bf_tensor out;
    bf_error err = {0};
    bf_status st = th_run_op(op, 17, attrs, na, in, nin, &out, 1, &err);
    if (st == BF_OK) {
        th_free(&out, 1);
        fail_msg("%s: expected an error containing '%s'", op, needle);
    }
    assert_int_equal(st, status);
    if (!strstr(err.msg, needle)) fail_msg("%s: message '%s' lacks '%s'", op, err.msg, needle);
}

static void convtranspose_hand(void **state)
{
    (void)state;
    /* x = [1, 2], w = [1, 10, 100], stride 2: y[o] = sum over i, k with
     * o = 2i + k of x[i] w[k] = [1, 10, 102, 20, 200], + bias 0.5; with
     * pads [1, 1]: the middle three */
    float xv[] = {1, 2}, wv[] = {1, 10, 100}, bv[] = {0.5f};
    float y0[] = {1.5f, 10.5f, 102.5f, 20.5f, 200.5f}, y1[] = {10.5f, 102.5f, 20.5f};
    int64_t dx[3] = {1, 1, 2}, dw[3] = {1, 1, 3}, db[1] = {1}, dy0[3] = {1, 1, 5}, dy1[3] = {1, 1, 3};
    bf_tensor x = th_tensor_f32(xv, 3, dx), w = th_tensor_f32(wv, 3, dw), b = th_tensor_f32(bv, 1, db);
    bf_tensor want0 = th_tensor_f32(y0, 3, dy0), want1 = th_tensor_f32(y1, 3, dy1);
    const bf_tensor *in[3] = {&x, &w, &b};
    int64_t s2[1] = {2}, p11[2] = {1, 1};
    bf__attr a0[1] = {th_attr_ints("strides", s2, 1)};
    expect_exact("ConvTranspose", a0, 1, in, 3, &want0);
    bf__attr a1[2] = {th_attr_ints("strides", s2, 1), th_attr_ints("pads", p11, 2)};
    expect_exact("ConvTranspose", a1, 2, in, 3, &want1);
    /* output_shape 4 crops total padding 1 at the start (NOTSET: the odd one first) */
    int64_t os4[1] = {4};
    float y2[] = {10.5f, 102.5f, 20.5f, 200.5f};
    int64_t dy2[3] = {1, 1, 4};
    bf_tensor want2 = th_tensor_f32(y2, 3, dy2);
    bf__attr a2[2] = {th_attr_ints("strides", s2, 1), th_attr_ints("output_shape", os4, 1)};
    expect_exact("ConvTranspose", a2, 2, in, 3, &want2);
    th_tensor_free(&x), th_tensor_free(&w), th_tensor_free(&b);
    th_tensor_free(&want0), th_tensor_free(&want1), th_tensor_free(&want2);
}

static void convtranspose_errors(void **state)
{
    (void)state;
    int64_t dx[4] = {1, 4, 3, 3}, dw[4] = {3, 2, 2, 2}, dw4[4] = {4, 2, 2, 2}, dw3[3] = {4, 2, 2};
    bf_tensor x = th_tensor_rand(1, 4, dx), w = th_tensor_rand(2, 4, dw), w4 = th_tensor_rand(3, 4, dw4);
    bf_tensor w3 = th_tensor_rand(4, 3, dw3);
    const bf_tensor *bad_c[2] = {&x, &w}, *ok[2] = {&x, &w4}, *bad_rank[2] = {&x, &w3};
    expect_error("ConvTranspose", NULL, 0, bad_c, 2, BF_ESHAPE, "expected dim 0 = C = 4");
    expect_error("ConvTranspose", NULL, 0, bad_rank, 2, BF_EUNSUPPORTED, "of the same rank");
    bf__attr g3[1] = {th_attr_int("group", 3)};
    expect_error("ConvTranspose", g3, 1, ok, 2, BF_EFORMAT, "'group' is 3");
    int64_t p[4] = {1, 1, 1, 1}, k[2] = {3, 3}, s[2] = {1 << 30, 1 << 30}, one[1] = {1};
    bf__attr both[2] = {th_attr_ints("pads", p, 4), th_attr_string("auto_pad", "SAME_UPPER")};
    expect_error("ConvTranspose", both, 2, ok, 2, BF_EFORMAT, "cannot be used together");
    bf__attr ks[1] = {th_attr_ints("kernel_shape", k, 2)};
    expect_error("ConvTranspose", ks, 1, ok, 2, BF_ESHAPE, "'kernel_shape' says 3");
    bf__attr strides1[1] = {th_attr_ints("strides", one, 1)};
    expect_error("ConvTranspose", strides1, 1, ok, 2, BF_EFORMAT, "'strides' has 1 values; expected 2");
    bf__attr huge[1] = {th_attr_ints("strides", s, 2)};
    expect_error("ConvTranspose", huge, 1, ok, 2, BF_EUNSUPPORTED, "would have more than 2^40 elements");
    int64_t pbig[4] = {5, 5, 5, 5};
    bf__attr pads_big[1] = {th_attr_ints("pads", pbig, 4)};
    expect_error("ConvTranspose", pads_big, 1, ok, 2, BF_ESHAPE, "is negative");
    th_tensor_free(&x), th_tensor_free(&w), th_tensor_free(&w4), th_tensor_free(&w3);
}

static void einsum_hand_and_errors(void **state)
{
    (void)state;
    /* "ij,jk->ik": [[1, 2]] x [[3], [4]] = [[11]]; "ii": trace; "i,j": outer */
    float av[] = {1, 2}, bv[] = {3, 4}, mv[] = {1, 2, 3, 4}, ov[] = {3, 4, 6, 8};
    int64_t da[2] = {1, 2}, db[2] = {2, 1}, d11[2] = {1, 1}, dm[2] = {2, 2}, dv[1] = {2}, d1[1] = {1};
    bf_tensor a = th_tensor_f32(av, 2, da), b = th_tensor_f32(bv, 2, db), m = th_tensor_f32(mv, 2, dm);
    bf_tensor va = th_tensor_f32(av, 1, dv), vb = th_tensor_f32(bv, 1, dv);
    float r11[] = {11}, tr[] = {5};
    bf_tensor want = th_tensor_f32(r11, 2, d11), want_tr = th_tensor_f32(tr, 1, d1), want_outer = th_tensor_f32(ov, 2, dm);
    const bf_tensor *ab[2] = {&a, &b}, *mm[1] = {&m}, *vv[2] = {&va, &vb};
    bf__attr e1[1] = {th_attr_string("equation", "ij,jk->ik")};
    expect_exact("Einsum", e1, 1, ab, 2, &want);
    want_tr.ndim = 0;     /* a scalar */
    bf__attr e2[1] = {th_attr_string("equation", "ii")};
    expect_exact("Einsum", e2, 1, mm, 1, &want_tr);
    bf__attr e3[1] = {th_attr_string("equation", "i,j")};
    expect_exact("Einsum", e3, 1, vv, 2, &want_outer);
    bf__attr bad1[1] = {th_attr_string("equation", "ij,jk,kl->il")};
    expect_error("Einsum", bad1, 1, ab, 2, BF_EFORMAT, "names 3 operands; the node has 2 inputs");
    bf__attr bad2[1] = {th_attr_string("equation", "i1,jk->ik")};
    expect_error("Einsum", bad2, 1, ab, 2, BF_EFORMAT, "operand 0 is not letters");
    bf__attr bad3[1] = {th_attr_string("equation", "ij,ik->jk")};
    expect_error("Einsum", bad3, 1, ab, 2, BF_ESHAPE, "subscript 'i' is 1 in one place and 2 in another");
    bf__attr bad4[1] = {th_attr_string("equation", "ij,jk->iz")};
    expect_error("Einsum", bad4, 1, ab, 2, BF_EFORMAT, "output subscript 'z' is in no operand");
    bf__attr bad5[1] = {th_attr_string("equation", "ijk,jk->ik")};
    expect_error("Einsum", bad5, 1, ab, 2, BF_ESHAPE, "operand 0 has 3 subscripts but shape [1, 2]");
    bf__attr bad6[1] = {th_attr_string("equation", "i..j,jk")};
    expect_error("Einsum", bad6, 1, ab, 2, BF_EFORMAT, "at most one '...'");
    th_tensor_free(&a), th_tensor_free(&b), th_tensor_free(&m), th_tensor_free(&va), th_tensor_free(&vb);
    want_tr.ndim = 1;
    th_tensor_free(&want), th_tensor_free(&want_tr), th_tensor_free(&want_outer);
}

/* The batched-product path (bf__sgemm) gives each element the in-order
 * chain of fused multiply-adds over the contracted subscripts, the bits
 * the plain loop gives: "bhqk" attention scores against that chain. */
static void einsum_gemm_is_the_chain(void **state)
{
    (void)state;
    int64_t dq[4] = {2, 3, 5, 16}, dk[4] = {2, 3, 7, 16};
    bf_tensor q = th_tensor_rand(11, 4, dq), k = th_tensor_rand(12, 4, dk);
    const bf_tensor *in[2] = {&q, &k};
    bf__attr eq[1] = {th_attr_string("equation", "bhqd,bhkd->bhqk")};
    bf_tensor out;
    bf_error err = {0};
    if (th_run_op("Einsum", 13, eq, 1, in, 2, &out, 1, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(out.ndim, 4);
    const float *qv = q.data, *kv = k.data, *y = out.data;
    for (int64_t bh = 0; bh < 6; bh++)
        for (int64_t i = 0; i < 5; i++)
            for (int64_t j = 0; j < 7; j++) {
                float s = 0.0f;
                for (int64_t d = 0; d < 16; d++) s = fmaf(qv[(bh * 5 + i) * 16 + d], kv[(bh * 7 + j) * 16 + d], s);
                if (y[(bh * 5 + i) * 7 + j] != s) fail_msg("element %lld, %lld, %lld: %.9g, the chain gives %.9g",
                                                           (long long)bh, (long long)i, (long long)j,
                                                           y[(bh * 5 + i) * 7 + j], s);
            }
    th_free(&out, 1);
    th_tensor_free(&q), th_tensor_free(&k);
}

static void norms_hand_and_errors(void **state)
{
    (void)state;
    /* InstanceNorm of a plane [1, 3]: mean 2, var 1, eps 0: [-1, 1] * 2 + 1 */
    float xv[] = {1, 3}, sv[] = {2}, bv[] = {1}, yv[] = {-1, 3};
    int64_t dx[3] = {1, 1, 2}, d1[1] = {1};
    bf_tensor x = th_tensor_f32(xv, 3, dx), s = th_tensor_f32(sv, 1, d1), b = th_tensor_f32(bv, 1, d1);
    bf_tensor want = th_tensor_f32(yv, 3, dx);
    const bf_tensor *in[3] = {&x, &s, &b};
    bf__attr eps0[1] = {th_attr_float("epsilon", 0.0f)};
    expect_exact("InstanceNormalization", eps0, 1, in, 3, &want);
    bf__attr eps_g[2] = {th_attr_float("epsilon", 0.0f), th_attr_int("num_groups", 1)};
    expect_exact("GroupNormalization", eps_g, 2, in, 3, &want);
    expect_error("GroupNormalization", NULL, 0, in, 3, BF_EFORMAT, "'num_groups' is -1; it is required");
    /* LpNormalization p = 1 of [1, 3]: [0.25, 0.75]; p = 3 is refused */
    float lv[] = {0.25f, 0.75f};
    bf_tensor want_l = th_tensor_f32(lv, 3, dx);
    bf__attr p1[1] = {th_attr_int("p", 1)}, p3[1] = {th_attr_int("p", 3)};
    expect_exact("LpNormalization", p1, 1, in, 1, &want_l);
    expect_error("LpNormalization", p3, 1, in, 1, BF_EFORMAT, "'p' is 3; must be 1 or 2");
    /* GlobalMaxPool: the max, NaN if the plane has one */
    float mv[] = {3};
    int64_t dm[3] = {1, 1, 1};
    bf_tensor want_m = th_tensor_f32(mv, 3, dm);
    expect_exact("GlobalMaxPool", NULL, 0, in, 1, &want_m);
    ((float *)x.data)[0] = NAN;
    ((float *)want_m.data)[0] = NAN;
    expect_exact("GlobalMaxPool", NULL, 0, in, 1, &want_m);
    int64_t d2[2] = {1, 2};
    bf_tensor x2 = th_tensor_f32(xv, 2, d2);
    const bf_tensor *in2[3] = {&x2, &s, &b};
    expect_error("InstanceNormalization", NULL, 0, in2, 3, BF_ESHAPE, "expected [N, C, D1, ...] (rank >= 3)");
    th_tensor_free(&x), th_tensor_free(&s), th_tensor_free(&b), th_tensor_free(&want), th_tensor_free(&want_l);
    th_tensor_free(&want_m), th_tensor_free(&x2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(convtranspose_hand),
        cmocka_unit_test(convtranspose_errors),
        cmocka_unit_test(einsum_hand_and_errors),
        cmocka_unit_test(einsum_gemm_is_the_chain),
        cmocka_unit_test(norms_hand_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
