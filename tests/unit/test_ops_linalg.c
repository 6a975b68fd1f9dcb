/* The linalg family (Gemm, MatMul, Conv, MaxPool, AveragePool,
 * GlobalAveragePool, BatchNormalization, LayerNormalization) against plain
 * references written straight from the ONNX spec, computed in double; plus
 * tiny cases worked out by hand and the errors prepare must report. */
#include "test_ops_linalg/test_ops_linalg.h"

int64_t numel(int nd, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

/* Runs a one-output op, compares with want, frees the output. */
void expect_close(const char *op, bf__attr *attrs, size_t na, const bf_tensor *const *in, int nin,
                         const bf_tensor *want, double atol, double rtol)
{
    bf_tensor out;
    bf_error err = {0};
    bf_status st = th_run_op(op, 17, attrs, na, in, nin, &out, 1, &err);
    if (st != BF_OK) fail_msg("%s failed: %s", op, err.msg);
    double r = th_compare(&out, want, atol, rtol);
    if (!(r <= 1.0)) fail_msg("%s: mismatch, ratio %g", op, r);
    th_free(&out, 1);
}

/* Runs an op expected to fail in prepare with `status` and a message containing `needle`. */
void expect_error(const char *op, bf__attr *attrs, size_t na, const bf_tensor *const *in, int nin,
                         int nout, bf_status status, const char *needle)
{
    bf_tensor out[3];
    bf_error err = {0};
    bf_status st = th_run_op(op, 17, attrs, na, in, nin, out, nout, &err);
    if (st == BF_OK) {
        th_free(out, nout);
        fail_msg("%s: expected an error containing '%s'", op, needle);
    }
    assert_int_equal(st, status);
    if (!strstr(err.msg, needle)) fail_msg("%s: message '%s' lacks '%s'", op, err.msg, needle);
}

/* ------------------------------------------------------- windows (spec) */

void ref_out_size(const wcfg *w, int i, int64_t *out, int64_t *pb, int64_t *pe)
{
    int64_t in = w->in[i], ek = (w->k[i] - 1) * w->d[i] + 1;
    if (w->auto_pad && strncmp(w->auto_pad, "SAME", 4) == 0) {
        *out = (int64_t)ceil((double)in / (double)w->s[i]);
        int64_t total = (*out - 1) * w->s[i] + ek - in;
        if (total < 0) total = 0;
        int upper = strcmp(w->auto_pad, "SAME_UPPER") == 0;
        *pb = upper ? total / 2 : (total + 1) / 2;
        *pe = total - *pb;
        return;
    }
    int valid = w->auto_pad && strcmp(w->auto_pad, "VALID") == 0;
    *pb = valid ? 0 : w->pads[i];
    *pe = valid ? 0 : w->pads[w->r + i];
    double q = (double)(in + *pb + *pe - ek) / (double)w->s[i];
    *out = (int64_t)(w->ceil_mode ? ceil(q) : floor(q)) + 1;
    if (w->ceil_mode && (*out - 1) * w->s[i] >= in + *pb) (*out)--;   /* PyTorch rule */
}

int set_window_attrs(const wcfg *w, bf__attr *at, int with_kernel, int with_dilations)
{
    int n = 0;
    if (with_kernel) at[n++] = th_attr_ints("kernel_shape", w->k, (size_t)w->r);
    at[n++] = th_attr_ints("strides", w->s, (size_t)w->r);
    if (with_dilations) at[n++] = th_attr_ints("dilations", w->d, (size_t)w->r);
    if (w->auto_pad) at[n++] = th_attr_string("auto_pad", w->auto_pad);
    else at[n++] = th_attr_ints("pads", w->pads, (size_t)(2 * w->r));
    return n;
}

/* Iterates a multi-index over dims[0..r): returns 0 when done. */
int next_index(int64_t *idx, const int64_t *dims, int r)
{
    for (int i = r - 1; i >= 0; i--) {
        if (++idx[i] < dims[i]) return 1;
        idx[i] = 0;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_random),     cmocka_unit_test(gemm_hand),
        cmocka_unit_test(gemm_errors),     cmocka_unit_test(matmul_random),
        cmocka_unit_test(matmul_hand),     cmocka_unit_test(matmul_errors),
        cmocka_unit_test(conv_random),     cmocka_unit_test(conv_hand),
        cmocka_unit_test(conv_errors),     cmocka_unit_test(maxpool_random),
        cmocka_unit_test(avgpool_random),  cmocka_unit_test(pool_hand), cmocka_unit_test(pool_levels_same_bits),
        cmocka_unit_test(maxpool_levels_match_reference),
        cmocka_unit_test(pool_errors),     cmocka_unit_test(gap_random), cmocka_unit_test(gap_levels_match_reference),
        cmocka_unit_test(bn_random),       cmocka_unit_test(bn_hand_and_errors),
        cmocka_unit_test(bn_training),
        cmocka_unit_test(ln_random),       cmocka_unit_test(ln_hand_and_errors),
        cmocka_unit_test(ln_levels_match_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
