/* The shape op family checked against plain reference implementations
 * written here straight from the ONNX spec (one output element at a time,
 * by multi-index), on random inputs of every dtype, plus tiny cases worked
 * out by hand and the errors each op must report. These ops only move bytes,
 * so results must be bit-identical to the reference. */
#include "test_ops_shape/test_ops_shape.h"

/* ---- helpers ---- */

static uint64_t rng_state = 88172645463325252ull;

uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

int64_t rand_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1)); }

bf_tensor mk(bf_dtype dt, int ndim, const int64_t *dims)
{
    bf_tensor t = th_tensor(dt, NULL, ndim, dims);
    assert_non_null(t.data);
    return t;
}

/* Random contents of any dtype; floats include NaN and Inf now and then,
 * which must travel through unchanged. */
bf_tensor rnd(bf_dtype dt, int ndim, const int64_t *dims)
{
    bf_tensor t = mk(dt, ndim, dims);
    int64_t n = bf_tensor_numel(&t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng();
        switch (dt) {
        case BF_F32: {
            float v = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            if (r % 97 == 0) v = NAN;
            if (r % 89 == 0) v = -INFINITY;
            ((float *)t.data)[i] = v;
            break;
        }
        case BF_I64: ((int64_t *)t.data)[i] = (int64_t)r; break;
        case BF_I32: ((int32_t *)t.data)[i] = (int32_t)r; break;
        default: ((uint8_t *)t.data)[i] = (uint8_t)(r & 1); break;
        }
    }
    return t;
}

bf_tensor ints(int n, const int64_t *v)
{
    int64_t d = n;
    return th_tensor_i64(v, 1, &d);
}

void rand_dims(int ndim, int64_t lo, int64_t hi, int64_t *dims)
{
    for (int i = 0; i < ndim; i++) dims[i] = rand_in(lo, hi);
}

void unravel(int64_t flat, int ndim, const int64_t *dims, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = flat % dims[d];
        flat /= dims[d];
    }
}

int64_t ravel(int ndim, const int64_t *dims, const int64_t *idx)
{
    int64_t flat = 0;
    for (int d = 0; d < ndim; d++) flat = flat * dims[d] + idx[d];
    return flat;
}

void copy_elem(bf_tensor *out, int64_t o, const bf_tensor *in, int64_t i)
{
    size_t es = bf_dtype_size(in->dtype);
    memcpy((char *)out->data + o * (int64_t)es, (const char *)in->data + i * (int64_t)es, es);
}

/* Same dtype, shape and bytes (bit-identical, NaN payloads included). */
void expect_same(const bf_tensor *got, const bf_tensor *want)
{
    assert_int_equal(got->dtype, want->dtype);
    assert_int_equal(got->ndim, want->ndim);
    for (int i = 0; i < want->ndim; i++) assert_int_equal(got->dims[i], want->dims[i]);
    assert_true(th_compare(got, want, 1e-30, 0) == 0.0);
    assert_memory_equal(got->data, want->data, bf_tensor_nbytes(want) ? bf_tensor_nbytes(want) : 1);
}

void expect_dims(const bf_tensor *t, int ndim, const int64_t *dims)
{
    assert_int_equal(t->ndim, ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(t->dims[i], dims[i]);
}

/* Runs an op that must fail; checks the status and that every fragment
 * appears in the message. */
void expect_error(const char *op, int64_t opset, bf__attr *attrs, size_t na,
                         const bf_tensor *const *in, int n_in, int n_out, bf_status want, ...)
{
    bf_tensor out[2];
    bf_error err = {0};
    bf_status st = th_run_op(op, opset, attrs, na, in, n_in, out, n_out, &err);
    if (st != want) print_error("status %d, message: %s\n", st, err.msg);
    assert_int_equal(st, want);
    va_list ap;
    va_start(ap, want);
    for (const char *frag; (frag = va_arg(ap, const char *));) {
        if (!strstr(err.msg, frag)) print_error("'%s' not in: %s\n", frag, err.msg);
        assert_non_null(strstr(err.msg, frag));
    }
    va_end(ap);
}

void run_ok(const char *op, int64_t opset, bf__attr *attrs, size_t na,
                   const bf_tensor *const *in, int n_in, bf_tensor *out, int n_out)
{
    bf_error err = {0};
    bf_status st = th_run_op(op, opset, attrs, na, in, n_in, out, n_out, &err);
    if (st != BF_OK) print_error("%s failed: %s\n", op, err.msg);
    assert_int_equal(st, BF_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shape_op),        cmocka_unit_test(constant_op),
        cmocka_unit_test(constant_of_shape_op), cmocka_unit_test(identity_op),
        cmocka_unit_test(dropout_op),      cmocka_unit_test(flatten_op),
        cmocka_unit_test(reshape_op),      cmocka_unit_test(squeeze_unsqueeze_ops),
        cmocka_unit_test(transpose_op),    cmocka_unit_test(concat_op),
        cmocka_unit_test(gather_op),       cmocka_unit_test(slice_op),
        cmocka_unit_test(expand_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
