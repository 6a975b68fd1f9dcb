/* LSTM, GRU and RNN bit for bit against a plain scalar reference of the
 * computation the ops define (core/src/exec/ops/recurrent.c): each product
 * element the in-order fmaf chain over its row and column (sgemm.h's
 * contract) with the bias added after, then the gates in the order the
 * op's comments give, with the same sigmoid_f32 / tanh_f32 (their accuracy
 * against PyTorch is conformance_rnn's and tests/ops' business). The op
 * packs R^T once per run, fuses the LSTM cell into one pass and runs AVX2
 * copies of both: none of that may change a bit, at any size (hidden not
 * a multiple of 8 or 16, above sgemm's in-place depth, batch 1 or more
 * than a 6-row block), direction, layout, initial state or sequence
 * length. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "exec/ops/fastmath_impl.h"
#include "op_harness.h"

enum { RNN, GRU, LSTM };

typedef struct cfg {
    int kind, dirs, reverse, layout, lbr, bias, states, lens, clip;
    int64_t T, B, I, H;
} cfg;

static float chain(const float *a, const float *b, int64_t k)
{
    float s = 0.0f;
    for (int64_t p = 0; p < k; p++) s = fmaf(a[p], b[p], s);
    return s;
}

static int64_t xrow(const cfg *c, int64_t t, int64_t b) { return c->layout ? b * c->T + t : t * c->B + b; }
static int64_t srow(const cfg *c, int64_t d, int64_t b) { return c->layout ? b * c->dirs + d : d * c->B + b; }
static int64_t yrow(const cfg *c, int64_t t, int64_t d, int64_t b)
{
    return c->layout ? (b * c->T + t) * c->dirs + d : (t * c->dirs + d) * c->B + b;
}
static float clipf(const cfg *c, float v) { return c->clip ? clamp_f32(v, -0.75f, 0.75f) : v; }

/* The reference: outputs y, yh, yc zeroed by the caller. */
static void reference(const cfg *c, const float *x, const float *w, const float *r, const float *bias,
                      const int32_t *lens, const float *h0, const float *c0, float *y, float *yh, float *yc)
{
    int64_t G = c->kind == LSTM ? 4 : c->kind == GRU ? 3 : 1, H = c->H, I = c->I, GH = G * H;
    float *h = calloc((size_t)H, 4), *cs = calloc((size_t)H, 4), *pre = calloc((size_t)GH, 4),
          *gx = calloc((size_t)GH, 4), *rh = calloc((size_t)H, 4);
    assert_non_null(h), assert_non_null(cs), assert_non_null(pre), assert_non_null(gx), assert_non_null(rh);
    for (int64_t d = 0; d < c->dirs; d++) {
        const float *wd = w + d * GH * I, *rd = r + d * GH * H;
        const float *wb = bias ? bias + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
        for (int64_t b = 0; b < c->B; b++) {
            int64_t len = lens ? lens[b] : c->T, sr = srow(c, d, b);
            for (int64_t j = 0; j < H; j++) {
                h[j] = h0 ? h0[sr * H + j] : 0.0f;
                cs[j] = c0 ? c0[sr * H + j] : 0.0f;
            }
            for (int64_t s = 0; s < len; s++) {
                int64_t t = c->reverse || d == 1 ? len - 1 - s : s;
                for (int64_t j = 0; j < GH; j++) gx[j] = chain(x + xrow(c, t, b) * I, wd + j * I, I) + (wb ? wb[j] : 0.0f);
                int64_t nrec = c->kind == GRU ? 2 * H : GH;
                for (int64_t j = 0; j < nrec; j++)
                    pre[j] = clipf(c, (chain(h, rd + j * H, H) + (rb ? rb[j] : 0.0f)) + gx[j]);
                if (c->kind == LSTM) {
                    for (int64_t j = 0; j < H; j++) {
                        float i = sigmoid_f32(pre[j]), o = sigmoid_f32(pre[H + j]), f = sigmoid_f32(pre[2 * H + j]),
                              g = tanh_f32(pre[3 * H + j]);
                        cs[j] = f * cs[j] + i * g;
                        h[j] = o * tanh_f32(cs[j]);
                    }
                } else if (c->kind == GRU) {
                    for (int64_t j = 0; j < 2 * H; j++) pre[j] = sigmoid_f32(pre[j]);
                    const float *z = pre, *rr = pre + H;
                    float *n = pre + 2 * H;
                    if (c->lbr) {
                        for (int64_t j = 0; j < H; j++) {
                            float hr = chain(h, rd + (2 * H + j) * H, H) + (rb ? rb[2 * H + j] : 0.0f);
                            n[j] = gx[2 * H + j] + rr[j] * hr;
                        }
                    } else {
                        for (int64_t j = 0; j < H; j++) rh[j] = rr[j] * h[j];
                        for (int64_t j = 0; j < H; j++)
                            n[j] = (chain(rh, rd + (2 * H + j) * H, H) + (rb ? rb[2 * H + j] : 0.0f)) + gx[2 * H + j];
                    }
                    for (int64_t j = 0; j < H; j++) {
                        float nj = tanh_f32(clipf(c, n[j]));
                        h[j] = (h[j] - nj) * z[j] + nj;
                    }
                } else {
                    for (int64_t j = 0; j < H; j++) h[j] = tanh_f32(pre[j]);
                }
                memcpy(y + yrow(c, t, d, b) * H, h, sizeof(float) * (size_t)H);
            }
            if (len == 0) memset(h, 0, sizeof(float) * (size_t)H), memset(cs, 0, sizeof(float) * (size_t)H);
            memcpy(yh + sr * H, h, sizeof(float) * (size_t)H);
            memcpy(yc + sr * H, cs, sizeof(float) * (size_t)H);
        }
    }
    free(h), free(cs), free(pre), free(gx), free(rh);
}

static void check(const cfg *c, uint64_t seed)
{
    int64_t G = c->kind == LSTM ? 4 : c->kind == GRU ? 3 : 1, D = c->dirs, H = c->H;
    int64_t xd[3] = {c->layout ? c->B : c->T, c->layout ? c->T : c->B, c->I}, wd[3] = {D, G * H, c->I},
            rd[3] = {D, G * H, H}, bd[2] = {D, 2 * G * H}, ld[1] = {c->B},
            hd[3] = {c->layout ? c->B : D, c->layout ? D : c->B, H};
    bf_tensor x = th_tensor_rand(seed, 3, xd), w = th_tensor_rand(seed + 1, 3, wd), r = th_tensor_rand(seed + 2, 3, rd),
              b = th_tensor_rand(seed + 3, 2, bd), h0 = th_tensor_rand(seed + 4, 3, hd),
              c0 = th_tensor_rand(seed + 5, 3, hd);
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)c->B);
    assert_non_null(lens);
    for (int64_t i = 0; i < c->B; i++) lens[i] = (int32_t)(c->lens ? (c->T - i % (c->T + 1)) : c->T);
    bf_tensor tl = th_tensor(BF_I32, lens, 1, ld);
    const char *dir = D == 2 ? "bidirectional" : c->reverse ? "reverse" : "forward";
    bf__attr at[5] = {th_attr_int("hidden_size", H), th_attr_string("direction", dir)};
    size_t n_at = 2;
    if (c->layout) at[n_at++] = th_attr_int("layout", 1);
    if (c->kind == GRU) at[n_at++] = th_attr_int("linear_before_reset", c->lbr);
    if (c->clip) at[n_at++] = th_attr_float("clip", 0.75f);
    const bf_tensor *in[7] = {&x, &w, &r, c->bias ? &b : NULL, c->lens ? &tl : NULL, c->states ? &h0 : NULL,
                              c->states ? &c0 : NULL};
    int n_in = c->kind == LSTM ? 7 : 6, n_out = c->kind == LSTM ? 3 : 2;
    static const char *const names[] = {"RNN", "GRU", "LSTM"};
    bf_tensor out[3];
    bf_error err = {0};
    bf_status st = th_run_op(names[c->kind], 14, at, n_at, in, n_in, out, n_out, &err);
    if (st != BF_OK) fail_msg("%s: %s", names[c->kind], err.msg);

    size_t ny = (size_t)(c->T * D * c->B * H), ns = (size_t)(D * c->B * H);
    float *y = calloc(ny + 1, 4), *yh = calloc(ns, 4), *yc = calloc(ns, 4);
    assert_non_null(y), assert_non_null(yh), assert_non_null(yc);
    reference(c, x.data, w.data, r.data, c->bias ? b.data : NULL, c->lens ? lens : NULL, c->states ? h0.data : NULL,
              c->kind == LSTM && c->states ? c0.data : NULL, y, yh, yc);
    const float *want[3] = {y, yh, yc};
    size_t n[3] = {ny, ns, ns};
    for (int o = 0; o < n_out; o++) {
        const float *got = out[o].data;
        for (size_t i = 0; i < n[o]; i++)
            if (memcmp(got + i, want[o] + i, 4) != 0)
                fail_msg("%s T=%lld B=%lld I=%lld H=%lld dirs=%d rev=%d layout=%d lbr=%d bias=%d states=%d lens=%d "
                         "clip=%d: output %d element %zu is %.9g, the reference %.9g",
                         names[c->kind], (long long)c->T, (long long)c->B, (long long)c->I, (long long)H, c->dirs,
                         c->reverse, c->layout, c->lbr, c->bias, c->states, c->lens, c->clip, o, i,
                         (double)got[i], (double)want[o][i]);
    }
    free(y), free(yh), free(yc), free(lens);
    th_free(out, n_out);
    th_tensor_free(&x), th_tensor_free(&w), th_tensor_free(&r), th_tensor_free(&b), th_tensor_free(&h0),
        th_tensor_free(&c0), th_tensor_free(&tl);
}

/* Sizes: H of 1, 5 (under a vector), 17 and 33 (past a 16-column panel),
 * 300 (deeper than sgemm reads in place, so it packs each panel); batch 1,
 * 3, 7, 8 and 14 (the recurrent product's row splits: one call, 4 + 3,
 * 4 + 4, 6 + 4 + 4). */
static void sweep(int kind)
{
    static const int64_t hs[] = {1, 5, 17, 33}, bs[] = {1, 3, 7, 14};
    uint64_t seed = 100;
    for (size_t ih = 0; ih < sizeof hs / sizeof *hs; ih++)
        for (size_t ib = 0; ib < sizeof bs / sizeof *bs; ib++)
            for (int v = 0; v < 6; v++) {
                cfg c = {.kind = kind, .T = 4, .B = bs[ib], .I = 3 + (int64_t)v, .H = hs[ih], .dirs = v & 1 ? 2 : 1,
                         .reverse = v == 2, .layout = v == 3, .bias = v != 4, .states = v >= 3, .lens = v == 1 || v == 5,
                         .lbr = v & 1, .clip = kind != LSTM && v == 5};
                check(&c, seed += 10);
            }
    cfg big = {.kind = kind, .T = 3, .B = 8, .I = 5, .H = 300, .dirs = 2, .bias = 1, .states = 1, .lens = 1};
    check(&big, 7);
}

static void lstm_exact(void **state)
{
    (void)state;
    sweep(LSTM);
    /* clip takes the general (unfused) path, which must agree too */
    cfg c = {.kind = LSTM, .T = 5, .B = 7, .I = 4, .H = 19, .dirs = 2, .bias = 1, .states = 1, .lens = 1, .clip = 1};
    check(&c, 3);
}

static void gru_exact(void **state)
{
    (void)state;
    sweep(GRU);
}

static void rnn_exact(void **state)
{
    (void)state;
    sweep(RNN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lstm_exact),
        cmocka_unit_test(gru_exact),
        cmocka_unit_test(rnn_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
