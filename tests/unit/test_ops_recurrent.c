/* LSTM, GRU and RNN alone: a case worked out by hand, and the errors each
 * must report (naming the input or attribute and what would work). Their
 * values against PyTorch and the ONNX spec are in tests/ops/cases/recurrent.py. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "op_harness.h"

/* h_t = Relu(2 x_t + 0.5 h_{t-1} + 0.1 + 0.2), x = 1, 2, h_0 = 0:
 * h_1 = 2.3, h_2 = 4 + 1.15 + 0.3 = 5.45 */
static void rnn_by_hand(void **state)
{
    (void)state;
    static const float xs[] = {1, 2}, w[] = {2}, r[] = {0.5f}, b[] = {0.1f, 0.2f};
    int64_t xd[] = {2, 1, 1}, wd[] = {1, 1, 1}, bd[] = {1, 2};
    bf_tensor x = th_tensor_f32(xs, 3, xd), tw = th_tensor_f32(w, 3, wd), tr = th_tensor_f32(r, 3, wd),
              tb = th_tensor_f32(b, 2, bd);
    char *acts[] = {"Relu"};
    bf__attr at[] = {{.name = "activations", .type = BF__ATTR_STRINGS, .n = 1, .strings = acts},
                     th_attr_int("hidden_size", 1)};
    const bf_tensor *in[] = {&x, &tw, &tr, &tb};
    bf_tensor out[2];
    bf_error err = {0};
    assert_int_equal(th_run_op("RNN", 13, at, 2, in, 4, out, 2, &err), BF_OK);
    assert_int_equal(out[0].ndim, 4);
    assert_int_equal(out[0].dims[0], 2);
    const float *y = out[0].data, *yh = out[1].data;
    assert_float_equal(y[0], 2.3f, 1e-6);
    assert_float_equal(y[1], 5.45f, 1e-6);
    assert_float_equal(yh[0], 5.45f, 1e-6);
    th_free(out, 2);
    th_tensor_free(&x), th_tensor_free(&tw), th_tensor_free(&tr), th_tensor_free(&tb);
}

/* An LSTM of hidden 3 over X [4, 2, 5], with what each test changes. */
typedef struct lstm_in {
    bf_tensor x, w, r, b, lens, h0;
} lstm_in;

static lstm_in lstm_inputs(void)
{
    int64_t xd[] = {4, 2, 5}, wd[] = {1, 12, 5}, rd[] = {1, 12, 3}, bd[] = {1, 24}, hd[] = {1, 2, 3};
    lstm_in t = {th_tensor_rand(1, 3, xd), th_tensor_rand(2, 3, wd), th_tensor_rand(3, 3, rd),
                 th_tensor_rand(4, 2, bd), {0}, th_tensor_rand(5, 3, hd)};
    int32_t lens[] = {4, 2};
    int64_t ld[] = {2};
    t.lens = th_tensor(BF_I32, lens, 1, ld);
    return t;
}

static void lstm_free(lstm_in *t)
{
    th_tensor_free(&t->x), th_tensor_free(&t->w), th_tensor_free(&t->r), th_tensor_free(&t->b);
    th_tensor_free(&t->lens), th_tensor_free(&t->h0);
}

/* Runs LSTM on t with attributes at; expects status want and, if it
 * fails, every string of `says` in the message. */
static void expect(lstm_in *t, int64_t opset, bf__attr *at, size_t n_at, bf_status want, const char *says1,
                   const char *says2)
{
    const bf_tensor *in[] = {&t->x, &t->w, &t->r, &t->b, &t->lens, &t->h0};
    bf_tensor out[3];
    bf_error err = {0};
    bf_status st = th_run_op("LSTM", opset, at, n_at, in, 6, out, 3, &err);
    if (st == BF_OK) th_free(out, 3);
    if (st != want) fail_msg("status %d, want %d: %s", st, want, err.msg);
    if (says1 && !strstr(err.msg, says1)) fail_msg("'%s' does not say '%s'", err.msg, says1);
    if (says2 && !strstr(err.msg, says2)) fail_msg("'%s' does not say '%s'", err.msg, says2);
}

static void lstm_errors(void **state)
{
    (void)state;
    lstm_in t = lstm_inputs();
    expect(&t, 13, NULL, 0, BF_OK, NULL, NULL);

    bf__attr dir[] = {th_attr_string("direction", "sideways")};
    expect(&t, 13, dir, 1, BF_EFORMAT, "sideways", "forward, reverse, bidirectional");
    bf__attr bidir[] = {th_attr_string("direction", "bidirectional")};
    expect(&t, 13, bidir, 1, BF_ESHAPE, "input W has shape [1, 12, 5]", "[2, 12, 5]");
    bf__attr hid[] = {th_attr_int("hidden_size", 4)};
    expect(&t, 13, hid, 1, BF_ESHAPE, "input W", "[1, 16, 5]");

    char *swish[] = {"Swish", "Tanh", "Tanh"}, *two[] = {"Sigmoid", "Tanh"};
    bf__attr a1[] = {{.name = "activations", .type = BF__ATTR_STRINGS, .n = 3, .strings = swish}};
    expect(&t, 13, a1, 1, BF_EUNSUPPORTED, "Swish", "not one of ONNX's: Sigmoid, Tanh, Relu, Affine");
    /* ScaledTanh has no default alpha and beta: given one alpha (taken by
     * LeakyRelu before it) and no beta, it has neither */
    char *scaled[] = {"LeakyRelu", "ScaledTanh", "Tanh"};
    float one[] = {0.5f};
    bf__attr a3[] = {{.name = "activations", .type = BF__ATTR_STRINGS, .n = 3, .strings = scaled},
                     {.name = "activation_alpha", .type = BF__ATTR_FLOATS, .n = 1, .floats = one}};
    expect(&t, 13, a3, 2, BF_EFORMAT, "ScaledTanh needs an alpha and a beta", NULL);
    bf__attr a2[] = {{.name = "activations", .type = BF__ATTR_STRINGS, .n = 2, .strings = two}};
    expect(&t, 13, a2, 1, BF_EFORMAT, "has 2 names", "takes 3");

    bf__attr layout[] = {th_attr_int("layout", 1)};
    expect(&t, 13, layout, 1, BF_EFORMAT, "opset 14", NULL);
    /* layout 1 at opset 14: X read as [batch 4, seq 2, 5], so sequence_lens must be [4] */
    expect(&t, 14, layout, 1, BF_ESHAPE, "input sequence_lens has shape [2]", "expected [4]");
    bf__attr clip[] = {th_attr_float("clip", -1.0f)};
    expect(&t, 13, clip, 1, BF_EFORMAT, "clip", "positive");

    /* data-dependent: a length past seq_length, or negative, fails at run */
    ((int32_t *)t.lens.data)[1] = 5;
    expect(&t, 13, NULL, 0, BF_ERANGE, "sequence_lens[1] = 5", "between 0 and seq_length = 4");
    ((int32_t *)t.lens.data)[1] = -1;
    expect(&t, 13, NULL, 0, BF_ERANGE, "sequence_lens[1] = -1", NULL);
    lstm_free(&t);

    /* int64 X */
    t = lstm_inputs();
    bf_tensor xi = th_tensor(BF_I64, NULL, t.x.ndim, t.x.dims);
    th_tensor_free(&t.x);
    t.x = xi;
    expect(&t, 13, NULL, 0, BF_EUNSUPPORTED, "input X is int64", "float32");
    lstm_free(&t);
}

/* ONNX's sequence_lens: Y is zero past each sequence's end and Y_h is the
 * state at its last step (a GRU with linear_before_reset = 0, whose rows
 * that finished early still go through each step's products). */
static void gru_lbr0_rows_done_early(void **state)
{
    (void)state;
    int64_t xd[] = {5, 3, 2}, wd[] = {1, 12, 2}, rd[] = {1, 12, 4}, bd[] = {1, 24}, ld[] = {3};
    bf_tensor x = th_tensor_rand(11, 3, xd), w = th_tensor_rand(12, 3, wd), r = th_tensor_rand(13, 3, rd),
              b = th_tensor_rand(14, 2, bd);
    int32_t lens[] = {5, 1, 3};
    bf_tensor tl = th_tensor(BF_I32, lens, 1, ld);
    const bf_tensor *in[] = {&x, &w, &r, &b, &tl};
    bf_tensor o1[2];
    bf_error err = {0};
    assert_int_equal(th_run_op("GRU", 13, NULL, 0, in, 5, o1, 2, &err), BF_OK);
    const float *y = o1[0].data, *yh = o1[1].data;
    for (int64_t t = 0; t < 5; t++)
        for (int64_t bb = 0; bb < 3; bb++)
            for (int j = 0; j < 4; j++) {
                float v = y[(t * 3 + bb) * 4 + j];
                if (t >= lens[bb]) assert_true(v == 0.0f);
                if (t == lens[bb] - 1) assert_true(v == yh[bb * 4 + j]);
            }
    th_free(o1, 2);
    th_tensor_free(&x), th_tensor_free(&w), th_tensor_free(&r), th_tensor_free(&b), th_tensor_free(&tl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rnn_by_hand),
        cmocka_unit_test(lstm_errors),
        cmocka_unit_test(gru_lbr0_rows_done_early),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
