/* The recurrent family: ONNX LSTM, GRU and RNN (opsets 7 to 22 share one
 * form; opset 14 added `layout`), as torch.onnx.export writes them for
 * nn.LSTM, nn.GRU and nn.RNN: one node per layer, both directions in one
 * node when bidirectional.
 *
 * The time loop is split the way cuDNN and PyTorch split it: the input
 * projection X W^T + Wb of every timestep is one product before the loop
 * (it does not depend on the state), and each step is then one product
 * H R^T + Rb over the batch plus the gates. Products go through bf__sgemm,
 * so that they have the same bits however the rows are batched (a campaign
 * recomputes parts of a batch; see sgemm.h); the step's product reads R^T
 * packed once per direction per run (recurrent_step.c). Biases are put
 * into the product's output first and the product added onto them, as
 * addmm does (the fused LSTM cell adds them itself: the same sums).
 *
 * Parameters are read from the inputs on every run, never cached: faults
 * rewrite W, R and B in place.
 *
 * Where the spec is silent we do what ONNX Runtime does: clip bounds the
 * gates' inputs, not the cell state before h; a sequence of length 0 has
 * zero outputs and zero final states. sequence_lens may be int64 as well as
 * int32. Scratch is a [seq x batch, gates x hidden] copy of the projection
 * and the packed R^T, reused by each direction. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "exec/op.h"
#include "fastmath_impl.h"
#include "recurrent_impl.h"
#include "sgemm.h"

enum { K_RNN, K_GRU, K_LSTM };
enum {
    A_SIGMOID, A_TANH, A_RELU, A_AFFINE, A_LEAKY_RELU, A_THRESHOLDED_RELU, A_SCALED_TANH, A_HARD_SIGMOID, A_ELU,
    A_SOFTSIGN, A_SOFTPLUS, A_COUNT
};
enum { IN_X, IN_W, IN_R, IN_B, IN_LENS, IN_H0, IN_C0, IN_P };

typedef struct rnn_params {
    int kind, gates, dirs, reverse, layout;
    int linear_before_reset, input_forget, has_clip;
    float clip;
    int act[2][3];                  /* per direction: f, g, h */
    float alpha[2][3], beta[2][3];
    int64_t seq, batch, in, hid;
    int want_y, want_h, want_c;     /* outputs the graph reads (an omitted one is not computed) */
    int lens_i64;                   /* sequence_lens is int64 (ONNX says int32; both read) */
    int cell;                       /* LSTM with the default activations and no clip, peepholes or
                                     * input_forget: one fused pass per row (recurrent_step.c) */
    int level;                      /* CPU path (sgemm.h's BF_SGEMM_*): the step product's, the fused
                                     * cell's; act_k's AVX2 copy from BF_SGEMM_AVX2 on */
    size_t s_g, s_rec, s_h, s_c, s_tmp;   /* scratch offsets, in floats */
    size_t s_rt, s_rt2, s_zero;     /* R^T packed (GRU: the z, r rows, then the h rows); zero biases */
} rnn_params;

static const char *const kind_name[] = {"RNN", "GRU", "LSTM"};
/* The activations ONNX lists, whether each reads a value from
 * activation_alpha / activation_beta, and the value it takes when the list
 * has run out: "the same as of corresponding ONNX operators" (Affine and
 * ThresholdedRelu's 1.0 there; ONNX Runtime uses 0). ScaledTanh's operator
 * had no defaults, so its values are required (NAN). */
static const struct {
    const char *name;
    int takes_alpha, takes_beta;
    float alpha, beta;
} act_info[A_COUNT] = {
    [A_SIGMOID] = {"Sigmoid", 0, 0, 0, 0},
    [A_TANH] = {"Tanh", 0, 0, 0, 0},
    [A_RELU] = {"Relu", 0, 0, 0, 0},
    [A_AFFINE] = {"Affine", 1, 1, 1.0f, 0.0f},
    [A_LEAKY_RELU] = {"LeakyRelu", 1, 0, 0.01f, 0},
    [A_THRESHOLDED_RELU] = {"ThresholdedRelu", 1, 0, 1.0f, 0},
    [A_SCALED_TANH] = {"ScaledTanh", 1, 1, NAN, NAN},
    [A_HARD_SIGMOID] = {"HardSigmoid", 1, 1, 0.2f, 0.5f},
    [A_ELU] = {"Elu", 1, 0, 1.0f, 0},
    [A_SOFTSIGN] = {"Softsign", 0, 0, 0, 0},
    [A_SOFTPLUS] = {"Softplus", 0, 0, 0, 0},
};

static int same_name(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y) return 0;
    }
    return *a == *b;
}

/* An optional list-of-floats attribute; *n = 0 when absent. */
static bf_status read_floats(const bf__node *nd, const char *name, const float **v, size_t *n, bf_error *err)
{
    const bf__attr *a = bf__node_attr(nd, name);
    *v = NULL, *n = 0;
    if (!a) return BF_OK;
    if (a->type == BF__ATTR_FLOAT) *v = &a->f, *n = 1;
    else if (a->type == BF__ATTR_FLOATS) *v = a->floats, *n = a->n;
    else return bf__node_error(err, nd, BF_EFORMAT, "attribute '%s' must be a list of floats", name);
    return BF_OK;
}

/* The `activations` attribute: n per direction, forward's first. Each
 * activation that takes an alpha (beta) reads the next value of
 * activation_alpha (activation_beta), in the order of the activations, as
 * ONNX Runtime reads them. */
static bf_status read_activations(const bf__prep *p, rnn_params *q, int n, bf_error *err)
{
    static const int defaults[3][3] = {{A_TANH}, {A_SIGMOID, A_TANH}, {A_SIGMOID, A_TANH, A_TANH}};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++) q->act[d][k] = defaults[q->kind][k];
    const bf__attr *a = bf__node_attr(p->node, "activations");
    if (!a) return BF_OK;
    if (a->type != BF__ATTR_STRINGS && !(a->type == BF__ATTR_STRING && n * q->dirs == 1))
        return bf__node_error(err, p->node, BF_EFORMAT, "attribute 'activations' must be a list of strings");
    size_t count = a->type == BF__ATTR_STRING ? 1 : a->n;
    if (count != (size_t)(n * q->dirs))
        return bf__node_error(err, p->node, BF_EFORMAT,
                              "attribute 'activations' has %zu names; %s with %d direction%s takes %d (%d per "
                              "direction, forward's first)",
                              count, kind_name[q->kind], q->dirs, q->dirs > 1 ? "s" : "", n * q->dirs, n);
    const float *alphas, *betas;
    size_t n_alpha, n_beta, ia = 0, ib = 0;
    bf_status st;
    if ((st = read_floats(p->node, "activation_alpha", &alphas, &n_alpha, err)) ||
        (st = read_floats(p->node, "activation_beta", &betas, &n_beta, err)))
        return st;
    for (int i = 0; i < n * q->dirs; i++) {
        const char *s = a->type == BF__ATTR_STRING ? a->s : a->strings[i];
        int k = 0;
        while (k < A_COUNT && !same_name(s, act_info[k].name)) k++;
        if (k == A_COUNT)
            return bf__node_error(err, p->node, BF_EUNSUPPORTED,
                                  "activation '%.40s' is not one of ONNX's: Sigmoid, Tanh, Relu, Affine, LeakyRelu, "
                                  "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus",
                                  s);
        float al = act_info[k].alpha, be = act_info[k].beta;
        if (act_info[k].takes_alpha && ia < n_alpha) al = alphas[ia++];
        if (act_info[k].takes_beta && ib < n_beta) be = betas[ib++];
        if (isnan(al) || isnan(be))
            return bf__node_error(err, p->node, BF_EFORMAT,
                                  "activation %s needs an alpha and a beta (activation_alpha and activation_beta "
                                  "give one per activation that takes them, in order)",
                                  act_info[k].name);
        q->act[i / n][i % n] = k;
        q->alpha[i / n][i % n] = al;
        q->beta[i / n][i % n] = be;
    }
    return BF_OK;
}

/* Input i, if present, has exactly the dims given; what names it. */
static bf_status want_dims(const bf__prep *p, int i, const char *what, int ndim, const int64_t *dims, bf_error *err)
{
    const bf_tensor *t = p->in[i];
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++) ok = t->dims[d] == dims[d];
    if (ok) return BF_OK;
    char got[96], want[96];
    return bf__node_error(err, p->node, BF_ESHAPE, "input %s has shape %s; expected %s", what,
                          bf_shape_str(t->dims, t->ndim, got, sizeof got), bf_shape_str(dims, ndim, want, sizeof want));
}

static int present(const bf__prep *p, int i) { return i < p->n_in && p->in[i]; }

/* rnn_prepare's attributes: direction, hidden_size (*hidden, -1 when
 * absent), layout, linear_before_reset, input_forget, clip, activations. */
static bf_status rnn_attrs(bf__prep *p, rnn_params *q, int kind, int64_t *hidden, bf_error *err)
{
    const bf__node *nd = p->node;
    bf_status st;
    const char *dir;
    int64_t layout, lbr, input_forget;
    if ((st = bf__attr_string(nd, "direction", "forward", &dir, err)) ||
        (st = bf__attr_int(nd, "hidden_size", -1, hidden, err)) ||
        (st = bf__attr_int(nd, "layout", 0, &layout, err)) ||
        (st = bf__attr_int(nd, "linear_before_reset", 0, &lbr, err)) ||
        (st = bf__attr_int(nd, "input_forget", 0, &input_forget, err)))
        return st;
    if (strcmp(dir, "forward") == 0) q->dirs = 1;
    else if (strcmp(dir, "reverse") == 0) q->dirs = 1, q->reverse = 1;
    else if (strcmp(dir, "bidirectional") == 0) q->dirs = 2;
    else
        return bf__node_error(err, nd, BF_EFORMAT,
                              "direction '%.40s' is not one of forward, reverse, bidirectional", dir);
    if (layout != 0 && layout != 1)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "layout = %lld; it must be 0 (X is [seq, batch, input]) or 1 ([batch, seq, input])",
                              (long long)layout);
    if (layout == 1 && p->opset < 14)
        return bf__node_error(err, nd, BF_EFORMAT, "attribute 'layout' needs opset 14 or later (the model has %lld)",
                              (long long)p->opset);
    q->layout = (int)layout;
    q->linear_before_reset = kind == K_GRU && lbr != 0;
    q->input_forget = kind == K_LSTM && input_forget != 0;
    if (bf__node_attr(nd, "clip")) {
        if ((st = bf__attr_float(nd, "clip", 0.0f, &q->clip, err))) return st;
        if (!(q->clip > 0.0f))
            return bf__node_error(err, nd, BF_EFORMAT, "clip = %g; it must be a positive threshold", (double)q->clip);
        q->has_clip = 1;
    }
    if ((st = read_activations(p, q, q->gates == 4 ? 3 : q->gates == 3 ? 2 : 1, err))) return st;
    return BF_OK;
}

/* rnn_prepare's inputs: X, W, R, and B, sequence_lens, initial_h,
 * initial_c and P where present, each checked against the sizes X and R
 * give (seq, batch, input, hidden). */
static bf_status rnn_inputs(bf__prep *p, rnn_params *q, int kind, int64_t hidden, bf_error *err)
{
    const bf__node *nd = p->node;
    int64_t layout = q->layout;
    bf_status st;
    if ((st = bf__want_f32(p, IN_X, "X", err)) || (st = bf__want_f32(p, IN_W, "W", err)) ||
        (st = bf__want_f32(p, IN_R, "R", err)))
        return st;
    const bf_tensor *x = p->in[IN_X], *r = p->in[IN_R];
    char s1[96];
    if (x->ndim != 3)
        return bf__node_error(err, nd, BF_ESHAPE, "input X has shape %s; expected 3-D %s",
                              bf_shape_str(x->dims, x->ndim, s1, sizeof s1),
                              layout ? "[batch, seq_length, input_size]" : "[seq_length, batch, input_size]");
    q->seq = x->dims[layout ? 1 : 0];
    q->batch = x->dims[layout ? 0 : 1];
    q->in = x->dims[2];
    if (r->ndim != 3)
        return bf__node_error(err, nd, BF_ESHAPE, "input R has shape %s; expected [num_directions, %d x hidden, hidden]",
                              bf_shape_str(r->dims, r->ndim, s1, sizeof s1), q->gates);
    q->hid = hidden >= 0 ? hidden : r->dims[2];
    int64_t D = q->dirs, G = q->gates, H = q->hid;
    if (H < 1)
        return bf__node_error(err, nd, BF_EFORMAT, "hidden_size = %lld; it must be at least 1", (long long)H);
    int64_t wd[3] = {D, G * H, q->in}, rd[3] = {D, G * H, H}, bd[2] = {D, 2 * G * H};
    if ((st = want_dims(p, IN_W, "W", 3, wd, err)) || (st = want_dims(p, IN_R, "R", 3, rd, err))) return st;
    if (present(p, IN_B) &&
        ((st = bf__want_f32(p, IN_B, "B", err)) || (st = want_dims(p, IN_B, "B", 2, bd, err))))
        return st;
    if (present(p, IN_LENS)) {
        const bf_tensor *l = p->in[IN_LENS];
        if (l->dtype != BF_I32 && l->dtype != BF_I64)
            return bf__node_error(err, nd, BF_EUNSUPPORTED, "input sequence_lens is %s; it must be int32 (or int64)",
                                  bf_dtype_name(l->dtype));
        int64_t ld[1] = {q->batch};
        if ((st = want_dims(p, IN_LENS, "sequence_lens", 1, ld, err))) return st;
        q->lens_i64 = l->dtype == BF_I64;
    }
    int64_t hd[3] = {layout ? q->batch : D, layout ? D : q->batch, H};
    if (present(p, IN_H0) &&
        ((st = bf__want_f32(p, IN_H0, "initial_h", err)) || (st = want_dims(p, IN_H0, "initial_h", 3, hd, err))))
        return st;
    if (kind == K_LSTM) {
        int64_t pd[2] = {D, 3 * H};
        if (present(p, IN_C0) &&
            ((st = bf__want_f32(p, IN_C0, "initial_c", err)) || (st = want_dims(p, IN_C0, "initial_c", 3, hd, err))))
            return st;
        if (present(p, IN_P) && ((st = bf__want_f32(p, IN_P, "P", err)) || (st = want_dims(p, IN_P, "P", 2, pd, err))))
            return st;
    }
    /* bf__sgemm takes int sizes: the largest product is [seq x batch, G x H] */
    if (q->seq * q->batch > INT_MAX || G * H > INT_MAX || q->in > INT_MAX)
        return bf__node_error(err, nd, BF_EUNSUPPORTED,
                              "seq_length x batch = %lld or %d x hidden = %lld exceeds the matrix product's limit %d",
                              (long long)(q->seq * q->batch), q->gates, (long long)(G * H), INT_MAX);

    return BF_OK;
}

/* rnn_prepare's outputs and scratch, and which kernel runs (the LSTM cell
 * of recurrent_step.c where it applies). */
static void rnn_layout(bf__prep *p, rnn_params *q, int kind)
{
    int64_t layout = q->layout, D = q->dirs, G = q->gates, H = q->hid;
    int64_t yd[4], shd[3];
    if (layout) {
        yd[0] = q->batch, yd[1] = q->seq, yd[2] = D, yd[3] = H;
        shd[0] = q->batch, shd[1] = D, shd[2] = H;
    } else {
        yd[0] = q->seq, yd[1] = D, yd[2] = q->batch, yd[3] = H;
        shd[0] = D, shd[1] = q->batch, shd[2] = H;
    }
    for (int o = 0; o < p->n_out; o++) bf__set_shape(p->out[o], BF_F32, o ? 3 : 4, o ? shd : yd);
    q->want_y = bf__output_wanted(p, 0);
    q->want_h = bf__output_wanted(p, 1);
    q->want_c = kind == K_LSTM && bf__output_wanted(p, 2);

    /* scratch: the input projection of every step, one step's recurrent
     * product, the state (h, and c for LSTM), and r (.) h for GRU's
     * linear_before_reset = 0 */
    size_t rows = (size_t)q->seq * (size_t)q->batch, gh = (size_t)(G * H), bh = (size_t)q->batch * (size_t)H;
    q->s_g = 0;
    q->s_rec = q->s_g + rows * gh;
    q->s_h = q->s_rec + (size_t)q->batch * gh;
    q->s_c = q->s_h + bh;
    q->s_tmp = q->s_c + (kind == K_LSTM ? bh : 0);
    q->s_rt = q->s_tmp + (kind == K_GRU ? bh : 0);
    if (kind == K_GRU && !q->linear_before_reset) {
        q->s_rt2 = q->s_rt + (size_t)bf__rnn_panels_size(2 * H, H);
        q->s_zero = q->s_rt2 + (size_t)bf__rnn_panels_size(H, H);
    } else {
        q->s_rt2 = q->s_rt;
        q->s_zero = q->s_rt + (size_t)bf__rnn_panels_size(G * H, H);
    }
    p->scratch = (q->s_zero + 2 * gh) * sizeof(float);
    q->cell = kind == K_LSTM && !present(p, IN_P) && !q->has_clip && !q->input_forget;
    for (int d = 0; d < q->dirs; d++)
        q->cell = q->cell && q->act[d][0] == A_SIGMOID && q->act[d][1] == A_TANH && q->act[d][2] == A_TANH;
    q->level = bf__rnn_avx2() ? bf__sgemm_best() : BF_SGEMM_REF;
}

static bf_status rnn_prepare(bf__prep *p, int kind, bf_error *err)
{
    rnn_params *q = (rnn_params *)p->params;
    memset(q, 0, sizeof *q);
    q->kind = kind;
    q->gates = kind == K_LSTM ? 4 : kind == K_GRU ? 3 : 1;
    bf_status st;
    int64_t hidden;
    if ((st = rnn_attrs(p, q, kind, &hidden, err)) || (st = rnn_inputs(p, q, kind, hidden, err))) return st;
    rnn_layout(p, q, kind);
    return BF_OK;
}

static bf_status lstm_prepare(bf__prep *p, bf_error *err) { return rnn_prepare(p, K_LSTM, err); }
static bf_status gru_prepare(bf__prep *p, bf_error *err) { return rnn_prepare(p, K_GRU, err); }
static bf_status plain_prepare(bf__prep *p, bf_error *err) { return rnn_prepare(p, K_RNN, err); }

/* ---- run ---- */

/* In place over a vector, the switch outside the loop so that the loop
 * vectorises (fastmath_impl.h: libm's expf and tanhf are scalar calls, and
 * were half an LSTM's time). NaN stays NaN, as in PyTorch. */
BF__ALWAYS_INLINE void act_body(int a, float al, float be, float *x, int64_t n)
{
    switch (a) {
    case A_SIGMOID: for (int64_t i = 0; i < n; i++) x[i] = sigmoid_f32(x[i]); break;
    case A_TANH: for (int64_t i = 0; i < n; i++) x[i] = tanh_f32(x[i]); break;
    case A_RELU: for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0.0f ? 0.0f : x[i]; break;
    case A_AFFINE: for (int64_t i = 0; i < n; i++) x[i] = al * x[i] + be; break;
    case A_LEAKY_RELU: for (int64_t i = 0; i < n; i++) x[i] = select_f32(x[i] < 0.0f, al * x[i], x[i]); break;
    case A_THRESHOLDED_RELU: for (int64_t i = 0; i < n; i++) x[i] = x[i] < al ? 0.0f : x[i]; break;
    case A_SCALED_TANH: for (int64_t i = 0; i < n; i++) x[i] = al * tanh_f32(be * x[i]); break;
    case A_HARD_SIGMOID: for (int64_t i = 0; i < n; i++) x[i] = clamp_f32(al * x[i] + be, 0.0f, 1.0f); break;
    case A_ELU:
        for (int64_t i = 0; i < n; i++) x[i] = select_f32(x[i] < 0.0f, al * (exp_f32(x[i]) - 1.0f), x[i]);
        break;
    case A_SOFTSIGN: for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + fabsf(x[i])); break;
    default:
        /* log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x */
        for (int64_t i = 0; i < n; i++) x[i] = (x[i] > 0.0f ? x[i] : 0.0f) + log1pf(exp_f32(-fabsf(x[i])));
        break;
    }
}

/* The same source twice: the AVX2 copy only widens the vectors, with the
 * same bits (fastmath_impl.h). */
static void act_plain(int a, float al, float be, float *x, int64_t n) { act_body(a, al, be, x, n); }
#ifdef BF__HAVE_AVX2_COPY
BF__AVX2 static void act_avx2(int a, float al, float be, float *x, int64_t n)
{
    act_body(a, al, be, x, n);
}
#endif

/* Activation k (f, g, h) of direction d. */
static void act_k(const rnn_params *q, int d, int k, float *x, int64_t n)
{
#ifdef BF__HAVE_AVX2_COPY
    if (q->level >= BF_SGEMM_AVX2) {
        act_avx2(q->act[d][k], q->alpha[d][k], q->beta[d][k], x, n);
        return;
    }
#endif
    act_plain(q->act[d][k], q->alpha[d][k], q->beta[d][k], x, n);
}

/* The clip attribute bounds the input of every gate's activation (not the
 * cell state's before h); NaN passes. */
static void clip_vec(const rnn_params *q, float *x, int64_t n)
{
    if (!q->has_clip) return;
    float lim = q->clip;
    for (int64_t i = 0; i < n; i++) x[i] = clamp_f32(x[i], -lim, lim);
}

static void add_vec(float *restrict y, const float *restrict x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

/* Offsets of row (t, b) of X (in rows of input_size) and of (b, direction
 * d) in the state tensors (in rows of hidden), and of Y's (t, d, b). */
static inline int64_t x_row(const rnn_params *q, int64_t t, int64_t b)
{
    return q->layout ? b * q->seq + t : t * q->batch + b;
}
static inline int64_t state_row(const rnn_params *q, int64_t d, int64_t b)
{
    return q->layout ? b * q->dirs + d : d * q->batch + b;
}
static inline int64_t y_row(const rnn_params *q, int64_t t, int64_t d, int64_t b)
{
    return q->layout ? (b * q->seq + t) * q->dirs + d : (t * q->dirs + d) * q->batch + b;
}

/* One step of one row. g: the input projection (with Wb), r: the recurrent
 * product (with Rb), both [gates x hidden] in ONNX's gate order; r is
 * overwritten with the gates. h and c: the state, updated. */
static void lstm_row(const rnn_params *q, int d, const float *g, float *r, const float *peep, float *h,
                     float *c)
{
    int64_t H = q->hid;
    /* ONNX order i, o, f, c */
    float *ri = r, *ro = r + H, *rf = r + 2 * H, *rc = r + 3 * H;
    add_vec(r, g, 4 * H);
    if (peep) {
        for (int64_t j = 0; j < H; j++) ri[j] += peep[j] * c[j], rf[j] += peep[2 * H + j] * c[j];
        clip_vec(q, ri, H);
        clip_vec(q, rf, H);
        clip_vec(q, rc, H);
        act_k(q, d, 0, ri, H);
        act_k(q, d, 0, rf, H);
    } else {
        clip_vec(q, r, 4 * H);
        act_k(q, d, 0, r, 3 * H);    /* i, o, f */
    }
    act_k(q, d, 1, rc, H);
    if (q->input_forget)
        for (int64_t j = 0; j < H; j++) rf[j] = 1.0f - ri[j];
    for (int64_t j = 0; j < H; j++) c[j] = rf[j] * c[j] + ri[j] * rc[j];
    if (peep) {
        /* the output gate's peephole reads the new cell state */
        for (int64_t j = 0; j < H; j++) ro[j] += peep[H + j] * c[j];
        clip_vec(q, ro, H);
        act_k(q, d, 0, ro, H);
    }
    memcpy(rc, c, sizeof(float) * (size_t)H);
    act_k(q, d, 2, rc, H);
    for (int64_t j = 0; j < H; j++) h[j] = ro[j] * rc[j];
}

/* GRU, ONNX order z, r, h: the update and reset gates over [2 x hidden]. */
static void gru_zr(const rnn_params *q, int d, const float *g, float *r, int64_t n)
{
    add_vec(r, g, n);
    clip_vec(q, r, n);
    act_k(q, d, 0, r, n);
}

/* With linear_before_reset, rn is H R_h^T + Rbh, which the reset gate
 * multiplies; without, rn is (r (.) H) R_h^T + Rbh. */
static void gru_row(const rnn_params *q, int d, const float *g, float *zr, float *rn, float *h)
{
    int64_t H = q->hid;
    const float *z = zr, *rr = zr + H, *gn = g + 2 * H;
    if (q->linear_before_reset)
        for (int64_t j = 0; j < H; j++) rn[j] = gn[j] + rr[j] * rn[j];
    else
        add_vec(rn, gn, H);
    clip_vec(q, rn, H);
    act_k(q, d, 1, rn, H);
    /* PyTorch's form of (1 - z) n + z h */
    for (int64_t j = 0; j < H; j++) h[j] = (h[j] - rn[j]) * z[j] + rn[j];
}

static void rnn_row(const rnn_params *q, int d, const float *g, float *r, float *h)
{
    add_vec(r, g, q->hid);
    clip_vec(q, r, q->hid);
    act_k(q, d, 0, r, q->hid);
    memcpy(h, r, sizeof(float) * (size_t)q->hid);
}

static int64_t seq_len(const rnn_params *q, const bf_tensor *lens, int64_t b)
{
    if (!lens) return q->seq;
    return q->lens_i64 ? ((const int64_t *)lens->data)[b] : ((const int32_t *)lens->data)[b];
}

/* Fills a [gates x hidden] row of every product output with a bias row
 * (or zeros), which the product is then added onto. */
static void fill_rows(float *y, int64_t rows, int64_t n, const float *bias)
{
    for (int64_t i = 0; i < rows; i++) {
        if (bias) memcpy(y + i * n, bias, sizeof(float) * (size_t)n);
        else memset(y + i * n, 0, sizeof(float) * (size_t)n);
    }
}

static bf_status rnn_run(const bf__ctx *c, bf_error *err)
{
    const rnn_params *q = c->params;
    const bf_tensor *in_b = c->n_in > IN_B ? c->in[IN_B] : NULL;
    const bf_tensor *in_lens = c->n_in > IN_LENS ? c->in[IN_LENS] : NULL;
    const bf_tensor *in_h0 = c->n_in > IN_H0 ? c->in[IN_H0] : NULL;
    const bf_tensor *in_c0 = q->kind == K_LSTM && c->n_in > IN_C0 ? c->in[IN_C0] : NULL;
    const bf_tensor *in_p = q->kind == K_LSTM && c->n_in > IN_P ? c->in[IN_P] : NULL;
    bf_tensor *out_y = q->want_y ? c->out[0] : NULL;
    bf_tensor *out_h = q->want_h ? c->out[1] : NULL, *out_c = q->want_c ? c->out[2] : NULL;
    const int64_t T = q->seq, B = q->batch, H = q->hid, D = q->dirs, GH = q->gates * q->hid, I = q->in;
    const float *x = c->in[IN_X]->data;
    float *sc = c->scratch, *gx = sc + q->s_g, *rec = sc + q->s_rec, *h = sc + q->s_h, *cs = sc + q->s_c;
    float *tmp = sc + q->s_tmp, *rt = sc + q->s_rt, *rt2 = sc + q->s_rt2, *zero = sc + q->s_zero;
    float *y = out_y ? out_y->data : NULL;

    for (int64_t b = 0; b < B; b++) {
        int64_t len = seq_len(q, in_lens, b);
        if (len < 0 || len > T)
            return bf__node_error(err, c->node, BF_ERANGE,
                                  "sequence_lens[%lld] = %lld; each length must be between 0 and seq_length = %lld",
                                  (long long)b, (long long)len, (long long)T);
        /* ONNX: outputs past a sequence's end are zero */
        if (y)
            for (int64_t t = len; t < T; t++)
                for (int64_t d = 0; d < D; d++) memset(y + y_row(q, t, d, b) * H, 0, sizeof(float) * (size_t)H);
    }
    for (int64_t d = 0; d < D; d++) {
        int rev = q->reverse || d == 1;
        const float *w = (const float *)c->in[IN_W]->data + d * GH * I;
        const float *r = (const float *)c->in[IN_R]->data + d * GH * H;
        const float *wb = in_b ? (const float *)in_b->data + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
        const float *peep = in_p ? (const float *)in_p->data + d * 3 * H : NULL;
        /* The fused LSTM cell adds the biases itself, in the order the
         * general path's accumulating products do (fma(1, s, b) = s + b). */
        if (q->cell) {
            memset(zero, 0, sizeof(float) * 2 * (size_t)GH);
            if (!wb) wb = zero, rb = zero + GH;
        }
        if (!q->cell) fill_rows(gx, T * B, GH, wb);
        if (T * B > 0 && I > 0)
            bf__sgemm(0, 1, (int)(T * B), (int)GH, (int)I, 1.0f, x, (int)I, w, (int)I, !q->cell, gx, (int)GH);
        else if (q->cell)
            memset(gx, 0, sizeof(float) * (size_t)(T * B * GH));
        if (q->kind == K_GRU && !q->linear_before_reset) {
            bf__rnn_pack(r, 2 * H, H, rt);
            bf__rnn_pack(r + 2 * H * H, H, H, rt2);
        } else {
            bf__rnn_pack(r, GH, H, rt);
        }
        for (int64_t b = 0; b < B; b++) {
            int64_t sr = state_row(q, d, b);
            if (in_h0) memcpy(h + b * H, (const float *)in_h0->data + sr * H, sizeof(float) * (size_t)H);
            else memset(h + b * H, 0, sizeof(float) * (size_t)H);
            if (q->kind == K_LSTM) {
                if (in_c0) memcpy(cs + b * H, (const float *)in_c0->data + sr * H, sizeof(float) * (size_t)H);
                else memset(cs + b * H, 0, sizeof(float) * (size_t)H);
            }
        }
        for (int64_t s = 0; s < T && B > 0; s++) {
            /* the recurrent product of every row, a finished sequence's too
             * (its state no longer moves): one product beats per-row ones */
            if (q->kind == K_GRU && !q->linear_before_reset) {
                fill_rows(rec, B, GH, rb);
                bf__rnn_product(q->level, h, (int)B, (int)H, r, rt, (int)(2 * H), 1, rec, (int)GH);
                for (int64_t b = 0; b < B; b++) {
                    int64_t len = seq_len(q, in_lens, b);
                    if (s >= len) {
                        memset(tmp + b * H, 0, sizeof(float) * (size_t)H);
                        continue;
                    }
                    int64_t t = rev ? len - 1 - s : s;
                    float *zr = rec + b * GH;
                    gru_zr(q, (int)d, gx + x_row(q, t, b) * GH, zr, 2 * H);
                    for (int64_t j = 0; j < H; j++) tmp[b * H + j] = zr[H + j] * h[b * H + j];
                }
                bf__rnn_product(q->level, tmp, (int)B, (int)H, r + 2 * H * H, rt2, (int)H, 1, rec + 2 * H,
                                (int)GH);
            } else {
                if (!q->cell) fill_rows(rec, B, GH, rb);
                bf__rnn_product(q->level, h, (int)B, (int)H, r, rt, (int)GH, !q->cell, rec, (int)GH);
            }
            for (int64_t b = 0; b < B; b++) {
                int64_t len = seq_len(q, in_lens, b);
                if (s >= len) continue;
                int64_t t = rev ? len - 1 - s : s;
                const float *g = gx + x_row(q, t, b) * GH;
                float *rr = rec + b * GH, *hb = h + b * H;
                if (q->cell) {
                    bf__lstm_cell(q->level, H, rr, rb, g, wb, hb, cs + b * H);
                } else if (q->kind == K_LSTM) {
                    lstm_row(q, (int)d, g, rr, peep, hb, cs + b * H);
                } else if (q->kind == K_GRU) {
                    if (q->linear_before_reset) gru_zr(q, (int)d, g, rr, 2 * H);
                    gru_row(q, (int)d, g, rr, rr + 2 * H, hb);
                } else {
                    rnn_row(q, (int)d, g, rr, hb);
                }
                if (y) memcpy(y + y_row(q, t, d, b) * H, hb, sizeof(float) * (size_t)H);
            }
        }
        for (int64_t b = 0; b < B; b++) {
            int64_t sr = state_row(q, d, b);
            /* an empty sequence has zero final states (as ONNX Runtime
             * gives; the spec does not say) */
            if (seq_len(q, in_lens, b) == 0) {
                memset(h + b * H, 0, sizeof(float) * (size_t)H);
                if (q->kind == K_LSTM) memset(cs + b * H, 0, sizeof(float) * (size_t)H);
            }
            if (out_h) memcpy((float *)out_h->data + sr * H, h + b * H, sizeof(float) * (size_t)H);
            if (out_c)
                memcpy((float *)out_c->data + sr * H, cs + b * H, sizeof(float) * (size_t)H);
        }
    }
    return BF_OK;
}

const bf__op bf__ops_recurrent[] = {
    {"LSTM", 3, 8, 0, 3, 0, lstm_prepare, rnn_run},
    {"GRU", 3, 6, 0, 2, 0, gru_prepare, rnn_run},
    {"RNN", 3, 6, 0, 2, 0, plain_prepare, rnn_run},
    {0},
};
