/* The elementwise op family against plain references written straight from
 * the ONNX spec (naive loops, double precision where it matters), on random
 * inputs across shapes and attributes, plus hand-computed cases and errors. */
#include "test_ops_elementwise/test_ops_elementwise.h"

/* ---- helpers ----------------------------------------------------------- */

bf_tensor mk(bf_dtype dt, int ndim, const int64_t *dims, const void *data)
{
    bf_tensor t = th_tensor(dt, data, ndim, dims);
    assert_non_null(t.data);
    return t;
}

static uint64_t rng_state = 88172645463325252ull;
uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
int64_t rnd_int(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* random ints in [lo, hi], never 0 if nonzero is set */
bf_tensor rand_int(bf_dtype dt, int ndim, const int64_t *dims, int64_t lo, int64_t hi, int nonzero)
{
    bf_tensor t = mk(dt, ndim, dims, NULL);
    for (int64_t i = 0; i < bf_tensor_numel(&t); i++) {
        int64_t v;
        do v = rnd_int(lo, hi); while (nonzero && v == 0);
        if (dt == BF_I64) ((int64_t *)t.data)[i] = v;
        else if (dt == BF_I32) ((int32_t *)t.data)[i] = (int32_t)v;
        else ((uint8_t *)t.data)[i] = (uint8_t)(v != 0);
    }
    return t;
}

bf_tensor rand_f32(int ndim, const int64_t *dims, float scale)
{
    bf_tensor t = th_tensor_rand(rnd(), ndim, dims);
    float *d = t.data;
    for (int64_t i = 0; i < bf_tensor_numel(&t); i++) d[i] *= scale;
    return t;
}

float *F(const bf_tensor *t) { return t->data; }
int64_t *I64(const bf_tensor *t) { return t->data; }

/* Runs an op with one output and asserts success, printing the error if not. */
void run_ok(const char *op, int64_t opset, bf__attr *attrs, size_t n_attrs,
                   const bf_tensor *const *in, int n_in, bf_tensor *out)
{
    bf_error err = {0};
    bf_status st = th_run_op(op, opset, attrs, n_attrs, in, n_in, out, 1, &err);
    if (st != BF_OK) fprintf(stderr, "%s failed: %s\n", op, err.msg);
    assert_int_equal(st, BF_OK);
}

/* Runs an op expecting failure with `status` and a message containing each
 * of the NULL-terminated strings. */
void run_fail(const char *op, int64_t opset, bf__attr *attrs, size_t n_attrs,
                     const bf_tensor *const *in, int n_in, bf_status status, ...)
{
    bf_error err = {0};
    bf_tensor out = {0};
    bf_status st = th_run_op(op, opset, attrs, n_attrs, in, n_in, &out, 1, &err);
    if (st != status) fprintf(stderr, "%s: status %d, want %d (%s)\n", op, st, status, err.msg);
    assert_int_equal(st, status);
    assert_non_null(strstr(err.msg, "'test'"));
    va_list ap;
    va_start(ap, status);
    for (const char *s; (s = va_arg(ap, const char *));) {
        if (!strstr(err.msg, s)) fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, s);
        assert_non_null(strstr(err.msg, s));
    }
    va_end(ap);
}

void expect_close(const bf_tensor *got, const bf_tensor *want, double atol, double rtol)
{
    double r = th_compare(got, want, atol, rtol);
    if (!(r <= 1.0)) fprintf(stderr, "compare ratio %g\n", r);
    assert_true(r <= 1.0);
}

/* Flat index into t of the element that broadcasts to output index oidx. */
int64_t bidx(const bf_tensor *t, const int64_t *oidx, int ond)
{
    int64_t f = 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t d = t->dims[i], k = oidx[i + ond - t->ndim];
        f = f * d + (d == 1 ? 0 : k);
    }
    return f;
}

void unravel(int64_t f, const int64_t *dims, int nd, int64_t *idx)
{
    for (int i = nd - 1; i >= 0; i--) { idx[i] = dims[i] ? f % dims[i] : 0; f = dims[i] ? f / dims[i] : 0; }
}

int bshape(const bf_tensor *a, const bf_tensor *b, int64_t *dims)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        dims[i] = da == 1 ? db : da;
    }
    return nd;
}

double get(const bf_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case BF_F32: return F(t)[i];
    case BF_I64: return (double)I64(t)[i];
    case BF_I32: return ((const int32_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
    }
}

void set(bf_tensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case BF_F32: F(t)[i] = (float)v; break;
    case BF_I64: I64(t)[i] = (int64_t)v; break;
    case BF_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    default: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unary_random),
        cmocka_unit_test(unary_special),
        cmocka_unit_test(math_sweep),
        cmocka_unit_test(neg_int),
        cmocka_unit_test(unary_errors),
        cmocka_unit_test(binary_random),
        cmocka_unit_test(binary_hand),
        cmocka_unit_test(pow_random),
        cmocka_unit_test(binary_errors),
        cmocka_unit_test(where_random),
        cmocka_unit_test(where_hand),
        cmocka_unit_test(where_errors),
        cmocka_unit_test(clip_all),
        cmocka_unit_test(softmax_random),
        cmocka_unit_test(softmax_hand),
        cmocka_unit_test(cast_all),
        cmocka_unit_test(reduce_random),
        cmocka_unit_test(reduce_hand),
        cmocka_unit_test(reduce_middle_axis),
        cmocka_unit_test(reduce_errors),
        cmocka_unit_test(empty_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
