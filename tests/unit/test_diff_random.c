/* The differential engine against the exact one on random graphs of the
 * shapes that broke it: what PyTorch exports for attention and for
 * convolutions, built here with protobuf-c, loaded as a user's file.
 *
 * Each graph (a fixed seed each, so the same graphs every run) joins one to
 * three branches, each with a graph input of its own, into a two-Gemm head:
 *   - attention as nn.MultiheadAttention exports it: Q, K and V projected by
 *     one packed weight (an anonymous onnx::MatMul_N, stored transposed as
 *     PyTorch does, or transposed by a Transpose node) in a batched 3-D
 *     MatMul, cut by Slice, Reshape and Transpose into heads, QK^T (a 4-D
 *     MatMul of two run-time values) scaled by a Mul, Softmax, the product
 *     with V, the heads joined back and the output projection as one 2-D
 *     Gemm over every token ([seq x batch, E], rows that are no samples) or
 *     as a 3-D MatMul; one or two such layers sharing the packed weight (as
 *     the exporter's deduplication leaves a TransformerEncoder's identical
 *     layers), a 4-D MatMul of the heads with a 2-D weight transposed by a
 *     Transpose node and read by two MatMuls, residual Add, mean over the
 *     sequence;
 *   - two Convs with groups, dilations, strides and padding, Relu, Flatten;
 *   - a wide input into a Gemm (transB either way), Relu, and a Gemm with
 *     transA (its input transposed), or a plain wide linear model (a graph
 *     input larger than every computed value).
 * The head's Gemms take transA, transB, alpha and beta at random.
 *
 * Every graph runs campaigns of weight faults (bit flips of one and two
 * bits, stuck-at, random values in int8, BER), activation faults (transient
 * and permanent) and input faults, once exact (opts.exact: every trial a
 * whole pass) and once differential, and every trial's record must be the
 * same bits, as in test_diff.c (outcome, changed predictions, every
 * metric).
 * Under ASan, every buffer the differential engine sizes from a graph's
 * shapes is checked on these shapes too. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "campaign_check.h"
#include "diff_graph.h"
#include "onnx_graph.h"

/* BF_RANDOM_GRAPHS=N runs graphs 0..N-1 instead: a soak run. With the
 * near-exact updates (before they became opt-in), 800 graphs (273,840
 * trials) gave no outcome disagreement and two metrics 1.2e-6 apart,
 * relative (an activation fault's max_abs, a BER trial's mse near 1e72):
 * updates' rounding carried to outputs several times the golden scale.
 * Without them (the default), 800 graphs (305,840 trials) gave every
 * record the same bits. */
#define GRAPHS 8
#define SAMPLES 24
#define BATCH 7                  /* several batches and a partial last one */
#define TRIALS 40
#define CLASSES 4

/* --- building ONNX graphs: everything in one arena, freed per graph */

#define MAX_INPUTS 3

/* A graph (onnx_graph.h) and what this test adds: fresh names, PyTorch's
 * anonymous weights, the random stream, and the eval set's rows. */
typedef struct builder {
    tg_graph g;
    int names;                   /* fresh value names so far */
    int anon;                    /* the next onnx::MatMul_N */
    uint64_t rng;
    /* the graph inputs' shapes (dim 0 the batch) and the eval set */
    int64_t in_dims[MAX_INPUTS][5];
    int in_ndim[MAX_INPUTS];
    float *feed[MAX_INPUTS];
} builder;

static void b_free(builder *b)
{
    for (size_t i = 0; i < b->g.n_ins; i++) free(b->feed[i]);
    tg_free(&b->g);
}

static const char *fresh(builder *b, const char *stem)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%d", stem, b->names++);
    return tg_str(&b->g, name);
}

/* A node of `op` on inputs in[0..n_in) (NULL ends the list early), with
 * one fresh output, returned; attributes follow with tg_attr_*. */
static Onnx__NodeProto *node(builder *b, const char *op, int n_in, const char *const *in)
{
    const char *name = fresh(b, op);
    const char *out = fresh(b, "v");
    return tg_node(&b->g, op, name, in, n_in, out);
}

static const char *out_of(const Onnx__NodeProto *n) { return n->output[0]; }

static const char *op1(builder *b, const char *op, const char *x)
{
    return out_of(node(b, op, 1, (const char *const[]){x}));
}

static Onnx__NodeProto *op2(builder *b, const char *op, const char *x, const char *y)
{
    return node(b, op, 2, (const char *const[]){x, y});
}

static Onnx__TensorProto *init(builder *b, const char *name, int type, int ndim, const int64_t *dims)
{
    return tg_init(&b->g, name, type, ndim, dims);
}

/* A float weight, uniform with the variance of 1/fan_in times gain^2. */
static const char *weight(builder *b, const char *name, int ndim, const int64_t *dims, int64_t fan_in, double gain)
{
    Onnx__TensorProto *t = init(b, name, 1, ndim, dims);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= dims[i];
    t->n_float_data = (size_t)numel;
    t->float_data = tg_alloc(&b->g, (size_t)numel * sizeof(float) + 1);
    float a = (float)(gain * sqrt(3.0 / (double)fan_in));
    for (int64_t i = 0; i < numel; i++) t->float_data[i] = a * dg_uniform(&b->rng);
    return t->name;
}

/* PyTorch's name for a MatMul weight it had to transpose: anonymous. */
static const char *anon_weight(builder *b, int ndim, const int64_t *dims, int64_t fan_in)
{
    char name[48];
    snprintf(name, sizeof name, "onnx::MatMul_%d", 100 + b->anon++);
    return weight(b, name, ndim, dims, fan_in, 1.0);
}

static const char *scalar(builder *b, const char *name, float v)
{
    Onnx__TensorProto *t = init(b, name, 1, 0, NULL);
    t->n_float_data = 1;
    t->float_data = tg_alloc(&b->g, sizeof(float));
    t->float_data[0] = v;
    return t->name;
}

static const char *ints(builder *b, int k, const int64_t *v)
{
    int64_t d = k;
    Onnx__TensorProto *t = init(b, fresh(b, "const"), 7, 1, &d);
    t->n_int64_data = (size_t)k;
    t->int64_data = tg_alloc(&b->g, (size_t)k * sizeof(int64_t) + 1);
    memcpy(t->int64_data, v, (size_t)k * sizeof(int64_t));
    return t->name;
}

/* dims[0] < 0: the symbolic batch */
static Onnx__ValueInfoProto *value_info(builder *b, const char *name, int ndim, const int64_t *dims)
{
    return tg_value_info(&b->g, name, 1, ndim, dims);
}

/* A graph input of per-sample shape dims[0..ndim) and its eval-set rows,
 * uniform in [-1, 1). */
static const char *graph_input(builder *b, int ndim, const int64_t *dims)
{
    size_t i = b->g.n_ins;
    assert_true(i < MAX_INPUTS);
    char name[16];
    snprintf(name, sizeof name, "in%zu", i);
    int64_t d[5] = {-1}, per = 1;
    for (int k = 0; k < ndim; k++) d[k + 1] = dims[k], per *= dims[k];
    b->g.ins[b->g.n_ins++] = value_info(b, name, ndim + 1, d);
    b->in_ndim[i] = ndim + 1;
    b->in_dims[i][0] = SAMPLES;
    for (int k = 0; k < ndim; k++) b->in_dims[i][k + 1] = dims[k];
    b->feed[i] = malloc((size_t)(SAMPLES * per) * sizeof(float));
    assert_non_null(b->feed[i]);
    for (int64_t k = 0; k < SAMPLES * per; k++) b->feed[i][k] = dg_uniform(&b->rng);
    return b->g.ins[i]->name;
}

static uint8_t *pack(builder *b, size_t *len) { return tg_pack(&b->g, "random", len); }

/* The eval set as safetensors: each graph input's rows, and random labels. */
static uint8_t *eval_set(builder *b, size_t *len)
{
    dg_input in[MAX_INPUTS];
    for (size_t i = 0; i < b->g.n_ins; i++)
        in[i] = (dg_input){b->g.ins[i]->name, b->in_ndim[i], b->in_dims[i], b->feed[i]};
    return dg_eval_set(in, b->g.n_ins, SAMPLES, CLASSES, &b->rng, len);
}

/* --- the branches */

/* x [B, S, E] -> x @ W: W stored [E, N] under an anonymous name (PyTorch
 * transposes Linear weights for a 3-D MatMul), or [N, E] behind a
 * Transpose node. */
static const char *matmul_weight(builder *b, int64_t e, int64_t n, int via_transpose)
{
    if (!via_transpose) return anon_weight(b, 2, (const int64_t[]){e, n}, e);
    const char *w = anon_weight(b, 2, (const int64_t[]){n, e}, e);
    Onnx__NodeProto *t = node(b, "Transpose", 1, (const char *const[]){w});
    tg_attr_ints(&b->g, t, "perm", 2, (const int64_t[]){1, 0});
    return out_of(t);
}

static const char *slice(builder *b, const char *x, int64_t start, int64_t end, int64_t axis)
{
    const char *in[4] = {x, ints(b, 1, &start), ints(b, 1, &end), ints(b, 1, &axis)};
    return out_of(node(b, "Slice", 4, in));
}

static const char *reshape(builder *b, const char *x, int k, const int64_t *shape)
{
    return out_of(op2(b, "Reshape", x, ints(b, k, shape)));
}

static const char *transpose(builder *b, const char *x, int k, const int64_t *perm)
{
    Onnx__NodeProto *t = node(b, "Transpose", 1, (const char *const[]){x});
    tg_attr_ints(&b->g, t, "perm", k, perm);
    return out_of(t);
}

/* One attention layer on x [B, S, E] (see the top comment); win: the packed
 * [E, 3E] in-projection, shared by the layers; wd: a [D, D] weight behind a
 * Transpose, read by two 4-D MatMuls (NULL: none). */
static const char *attention(builder *b, const char *x, int64_t s, int64_t e, int64_t heads, const char *win,
                             const char *wd)
{
    int64_t d = e / heads;
    const char *qkv = out_of(op2(b, "MatMul", x, win));
    qkv = out_of(op2(b, "Add", qkv, weight(b, fresh(b, "in_proj_bias"), 1, (const int64_t[]){3 * e}, e, 0.5)));
    const char *q = slice(b, qkv, 0, e, 2), *k = slice(b, qkv, e, 2 * e, 2), *v = slice(b, qkv, 2 * e, 3 * e, -1);
    const int64_t split[4] = {dg_pick(&b->rng, 2) ? 0 : -1, s, heads, d};
    q = transpose(b, reshape(b, q, 4, split), 4, (const int64_t[]){0, 2, 1, 3});     /* [B, H, S, D] */
    k = transpose(b, reshape(b, k, 4, split), 4, (const int64_t[]){0, 2, 3, 1});     /* [B, H, D, S] */
    v = transpose(b, reshape(b, v, 4, split), 4, (const int64_t[]){0, 2, 1, 3});
    if (wd) q = out_of(op2(b, "MatMul", q, wd));                                       /* 4-D @ 2-D */
    const char *scores = out_of(op2(b, "MatMul", q, k));                               /* [B, H, S, S] */
    scores = out_of(op2(b, "Mul", scores, scalar(b, fresh(b, "scale"), (float)(1 / sqrt((double)d)))));
    Onnx__NodeProto *sm = node(b, "Softmax", 1, (const char *const[]){scores});
    tg_attr_int(&b->g, sm, "axis", -1);
    const char *ctx = out_of(op2(b, "MatMul", out_of(sm), v));                         /* [B, H, S, D] */
    if (wd) ctx = out_of(op2(b, "MatMul", ctx, wd));
    ctx = transpose(b, ctx, 4, (const int64_t[]){0, 2, 1, 3});                          /* [B, S, H, D] */
    const char *y;
    if (dg_pick(&b->rng, 3)) {
        /* the output projection as PyTorch exports it: one Gemm over every
         * token, its rows no samples */
        const char *tok = reshape(b, ctx, 2, (const int64_t[]){-1, e});
        const char *in[3] = {tok, weight(b, fresh(b, "out_proj.weight"), 2, (const int64_t[]){e, e}, e, 1.0),
                             weight(b, fresh(b, "out_proj.bias"), 1, (const int64_t[]){e}, e, 0.5)};
        Onnx__NodeProto *g = node(b, "Gemm", 3, in);
        tg_attr_int(&b->g, g, "transB", 1);
        y = reshape(b, out_of(g), 3, (const int64_t[]){-1, s, e});
    } else {
        y = reshape(b, ctx, 3, (const int64_t[]){0, s, e});
        y = out_of(op2(b, "MatMul", y, matmul_weight(b, e, e, dg_pick(&b->rng, 2))));
    }
    return out_of(op2(b, "Add", y, x));   /* residual */
}

/* The attention branch: [B, S, E] in, [B, E] out. */
static const char *attention_branch(builder *b, int64_t *width)
{
    int64_t s = 3 + dg_pick(&b->rng, 3), heads = 1 + dg_pick(&b->rng, 2), e = heads * (4 + 2 * dg_pick(&b->rng, 3));
    const char *x = graph_input(b, 2, (const int64_t[]){s, e});
    const char *win = matmul_weight(b, e, 3 * e, dg_pick(&b->rng, 2));
    const char *wd = NULL;
    if (dg_pick(&b->rng, 2)) {
        const char *w = anon_weight(b, 2, (const int64_t[]){e / heads, e / heads}, e / heads);
        wd = transpose(b, w, 2, (const int64_t[]){1, 0});
    }
    int layers = 1 + dg_pick(&b->rng, 2);
    for (int l = 0; l < layers; l++) x = attention(b, x, s, e, heads, win, l == 0 ? wd : NULL);
    if (dg_pick(&b->rng, 2)) x = op1(b, "Relu", x);
    Onnx__NodeProto *mean = node(b, "ReduceMean", 1, (const char *const[]){x});
    tg_attr_ints(&b->g, mean, "axes", 1, (const int64_t[]){1});
    tg_attr_int(&b->g, mean, "keepdims", 0);
    *width = e;
    return out_of(mean);
}

static int64_t conv_out(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil)
{
    return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

/* One Conv with a random group count, dilation, stride and padding on
 * [B, c, h, w]; c, h and w become the output's. */
static const char *conv(builder *b, const char *x, int64_t *c, int64_t *h, int64_t *w)
{
    static const int64_t groups[] = {1, 2, 4};
    for (;;) {
        int64_t g = groups[dg_pick(&b->rng, 3)], m = g * (1 + dg_pick(&b->rng, 3)), k = 2 + dg_pick(&b->rng, 2);
        int64_t dil = 1 + dg_pick(&b->rng, 2), pad = dg_pick(&b->rng, 3), stride = 1 + dg_pick(&b->rng, 2);
        int64_t oh = conv_out(*h, k, pad, stride, dil), ow = conv_out(*w, k, pad, stride, dil);
        int64_t extent = dil * (k - 1) + 1;
        if (*c % g || *h + 2 * pad < extent || *w + 2 * pad < extent) continue;
        const char *in[3] = {x, weight(b, fresh(b, "conv.weight"), 4, (const int64_t[]){m, *c / g, k, k}, *c / g * k * k, 1.4),
                             dg_pick(&b->rng, 3) ? weight(b, fresh(b, "conv.bias"), 1, &m, k * k, 0.3) : NULL};
        Onnx__NodeProto *n = node(b, "Conv", 3, in);
        tg_attr_int(&b->g, n, "group", g);
        tg_attr_ints(&b->g, n, "dilations", 2, (const int64_t[]){dil, dil});
        tg_attr_ints(&b->g, n, "strides", 2, (const int64_t[]){stride, stride});
        tg_attr_ints(&b->g, n, "pads", 4, (const int64_t[]){pad, pad, pad, pad});
        tg_attr_ints(&b->g, n, "kernel_shape", 2, (const int64_t[]){k, k});
        *c = m, *h = oh, *w = ow;
        return out_of(n);
    }
}

/* The convolution branch: [B, 4, H, W] in, [B, features] out. */
static const char *conv_branch(builder *b, int64_t *width)
{
    int64_t c = 4, h = 5 + dg_pick(&b->rng, 4), w = 5 + dg_pick(&b->rng, 4);
    const char *x = graph_input(b, 3, (const int64_t[]){c, h, w});
    x = op1(b, "Relu", conv(b, x, &c, &h, &w));
    x = conv(b, x, &c, &h, &w);
    if (dg_pick(&b->rng, 2)) x = op1(b, "Relu", x);
    *width = c * h * w;
    return op1(b, "Flatten", x);
}

/* A Gemm on a [B, k] value with random transA (the input transposed
 * first), transB, alpha and beta; [B, n] out. */
static const char *gemm(builder *b, const char *x, int64_t k, int64_t n, int allow_trans_a)
{
    int ta = allow_trans_a && dg_pick(&b->rng, 2), tb = dg_pick(&b->rng, 2);
    if (ta) x = transpose(b, x, 2, (const int64_t[]){1, 0});
    const int64_t wd[2] = {tb ? n : k, tb ? k : n};
    const char *in[3] = {x, weight(b, fresh(b, "fc.weight"), 2, wd, k, 1.0),
                         dg_pick(&b->rng, 4) ? weight(b, fresh(b, "fc.bias"), 1, &n, k, 0.5) : NULL};
    Onnx__NodeProto *g = node(b, "Gemm", 3, in);
    if (ta) tg_attr_int(&b->g, g, "transA", 1);
    if (tb) tg_attr_int(&b->g, g, "transB", 1);
    if (!dg_pick(&b->rng, 3)) tg_attr_float(&b->g, g, "alpha", 0.5f);
    if (!dg_pick(&b->rng, 3)) tg_attr_float(&b->g, g, "beta", 2.0f);
    return out_of(g);
}

/* The wide branch: [B, K] in (K wider than any value computed after it),
 * a Gemm, Relu and a Gemm with transA; [B, n] out. */
static const char *wide_branch(builder *b, int64_t *width)
{
    int64_t k = 64 + 32 * dg_pick(&b->rng, 3), n1 = 4 + dg_pick(&b->rng, 5), n2 = 3 + dg_pick(&b->rng, 5);
    const char *x = graph_input(b, 1, &k);
    x = op1(b, "Relu", gemm(b, x, k, n1, 0));
    *width = n2;
    return gemm(b, x, n1, n2, 1);
}

/* Graph number `which`: its branches by the number (0 attention, 1 conv,
 * 2 all three, 3 a wide linear model, then at random), joined by Concat
 * into a two-Gemm head. */
static void build_graph(builder *b, int which)
{
    memset(b, 0, sizeof *b);
    b->rng = 0x5eed0000u + (uint64_t)which;
    const char *out;
    if (which % 4 == 3 && which < 4) {
        /* a logistic regression: the graph input is the largest value */
        int64_t k = 96 + 64 * dg_pick(&b->rng, 2);
        out = gemm(b, graph_input(b, 1, &k), k, CLASSES, 0);
    } else {
        int mask = which == 0 ? 1 : which == 1 ? 2 : which == 2 ? 7 : 1 + dg_pick(&b->rng, 7);
        const char *feat[3];
        int64_t width[3], total = 0;
        int n = 0;
        if (mask & 1) feat[n] = attention_branch(b, &width[n]), n++;
        if (mask & 2) feat[n] = conv_branch(b, &width[n]), n++;
        if (mask & 4) feat[n] = wide_branch(b, &width[n]), n++;
        for (int i = 0; i < n; i++) total += width[i];
        const char *h = feat[0];
        if (n > 1) {
            Onnx__NodeProto *cat = node(b, "Concat", n, feat);
            tg_attr_int(&b->g, cat, "axis", 1);
            h = out_of(cat);
        }
        int64_t hidden = 6 + dg_pick(&b->rng, 8);
        h = op1(b, "Relu", gemm(b, h, total, hidden, 1));
        out = gemm(b, h, hidden, CLASSES, 1);
    }
    b->g.outs[b->g.n_outs++] = value_info(b, out, 2, (const int64_t[]){-1, CLASSES});
}

/* --- the campaigns */

typedef tc_config config;

static const config configs[] = {
    {"weights bitflip fp32", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
    {"weights 2-bit bitflip fp32", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 2},
    {"weights stuck_at_1 fp16", BF_TARGET_WEIGHTS, BF_FAULT_STUCK_AT_1, BF_REPR_FP16, BF_PERSIST_PERMANENT, 1},
    {"weights random_value int8", BF_TARGET_WEIGHTS, BF_FAULT_RANDOM_VALUE, BF_REPR_INT8, BF_PERSIST_PERMANENT, 1},
    {"weights ber fp32", BF_TARGET_WEIGHTS, BF_FAULT_BER, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
    {"activations bitflip fp32 transient", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_TRANSIENT, 1},
    {"activations bitflip fp16 permanent", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP16, BF_PERSIST_PERMANENT, 1},
    {"inputs bitflip fp32 transient", BF_TARGET_INPUTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_TRANSIENT, 1},
};

static char *every[] = {"*"};
static double rates[] = {1e-4, 1e-3};

/* mode: 1 exact, 0 differential, 2 differential never taking a full pass
 * (bf_campaign_opts.no_full_pass: a BER trial's many faults re-run as
 * they would be without the shortcut, checked against exact too). */
static void run(const bf_model *m, const bf_dataset *ds, const config *cf, char **tensors, uint64_t seed, int mode,
                tc_recs *out)
{
    bf_campaign_spec s = tc_config_spec(cf, seed, TRIALS, BATCH, tensors, 1);
    if (cf->kind == BF_FAULT_BER) {
        s.rates = rates;
        s.n_rates = 2;
        s.repeats = TRIALS / 2;
    }
    bf_campaign *c = tc_make(m, ds, &s);
    out->r = calloc((size_t)bf_campaign_num_trials(c) + 1, sizeof *out->r);
    out->n = 0;
    assert_non_null(out->r);
    bf_campaign_opts o = {.threads = 2, .exact = mode == 1, .no_full_pass = mode == 2, .on_trial = tc_keep, .user = out};
    bf_campaign_result res;
    bf_error err = {0};
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("%s: %s", cf->label, err.msg);
    assert_int_equal(res.trials_done, out->n);
    if (mode == 2) assert_int_equal(res.full_trials, 0);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
}

/* With BF_DUMP=DIR, graph i is written to DIR/gI.onnx and its eval set to
 * DIR/gI.eval.safetensors, for a failure to be rerun with `bitflip run`
 * (campaign seeds as in random_graphs_match_exact, batch 7). */
static void dump(int gi, const void *model, size_t ml, const void *data, size_t dl)
{
    const char *dir = getenv("BF_DUMP");
    if (!dir) return;
    char path[512];
    snprintf(path, sizeof path, "%s/g%d.onnx", dir, gi);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(model, 1, ml, f), ml);
    assert_int_equal(fclose(f), 0);
    snprintf(path, sizeof path, "%s/g%d.eval.safetensors", dir, gi);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, dl, f), dl);
    assert_int_equal(fclose(f), 0);
}

static void load(builder *b, int gi, bf_model **m, bf_dataset **ds)
{
    size_t ml, dl;
    uint8_t *mb = pack(b, &ml), *db = eval_set(b, &dl);
    dump(gi, mb, ml, db, dl);
    dg_load(mb, ml, db, dl, "random", m, ds);
    free(mb);
    free(db);
}

static void random_graphs_match_exact(void **state)
{
    (void)state;
    tc_tally t = {0};
    builder *b = malloc(sizeof *b);
    assert_non_null(b);
    int graphs = getenv("BF_RANDOM_GRAPHS") ? atoi(getenv("BF_RANDOM_GRAPHS")) : GRAPHS;
    assert_true(graphs > 0);
    for (int gi = 0; gi < graphs; gi++) {
        bf_model *m = NULL;
        bf_dataset *ds = NULL;
        build_graph(b, gi);
        load(b, gi, &m, &ds);
        double scale = tc_out_scale(m, ds);
        char label[96];
        snprintf(label, sizeof label, "graph %d", gi);
        for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
            tc_recs x = {0}, y = {0};
            run(m, ds, &configs[k], every, 1000 + (uint64_t)gi, 1, &x);
            run(m, ds, &configs[k], every, 1000 + (uint64_t)gi, 0, &y);
            tc_compare(label, configs[k].label, &x, &y, scale, &t);
            if (configs[k].kind == BF_FAULT_BER) {
                tc_recs z = {0};
                run(m, ds, &configs[k], every, 1000 + (uint64_t)gi, 2, &z);
                char l2[128];
                snprintf(l2, sizeof l2, "%s, never a full pass", configs[k].label);
                tc_compare(label, l2, &x, &z, scale, &t);
                free(z.r);
            }
            free(x.r);
            free(y.r);
        }
        /* the packed in-projections alone, where the first fault was */
        if (bf_model_find_param(m, "onnx::MatMul_100") >= 0) {
            static char *anon[] = {"onnx::MatMul_*"};
            tc_recs x = {0}, y = {0};
            run(m, ds, &configs[0], anon, 77 + (uint64_t)gi, 1, &x);
            run(m, ds, &configs[0], anon, 77 + (uint64_t)gi, 0, &y);
            tc_compare(label, "onnx::MatMul_* bitflip fp32", &x, &y, scale, &t);
            free(x.r);
            free(y.r);
        }
        bf_dataset_free(ds);
        bf_model_free(m);
        b_free(b);
    }
    free(b);
    tc_assert_agree("random graphs, differential vs exact", &t, (int64_t)graphs * 8 * TRIALS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_graphs_match_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
