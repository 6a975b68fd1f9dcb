/* What the differential engine's tests that build their graph and eval set
 * here share (test_diff_psum.c, test_diff_random.c, test_diff_stpool.c):
 * a deterministic generator (splitmix64), random weights, a Conv and a
 * classifier head, and the eval set as safetensors (float inputs and random
 * labels) loaded with the model as a user's files would be; and the
 * comparison of two trial records a planted error must break. Inline so that
 * a test using fewer of them builds without unused-function warnings. */
#ifndef BF_TEST_DIFF_GRAPH_H
#define BF_TEST_DIFF_GRAPH_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "onnx_graph.h"

static inline uint64_t dg_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline int dg_pick(uint64_t *s, int n) { return (int)(dg_next(s) % (uint64_t)n); }

/* uniform in [-1, 1) */
static inline float dg_uniform(uint64_t *s) { return (float)((double)(dg_next(s) >> 11) * 0x1p-53 * 2.0 - 1.0); }

static inline void dg_fill(uint64_t *rng, float *v, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)(dg_uniform(rng) * scale);
}

/* A Conv NAME of k x k taps (stride, pads all round) from cin to cout
 * channels, with a bias: weights uniform with the variance of 1/fan_in,
 * the bias within 0.1 (name.weight, name.bias) */
static inline void dg_conv(tg_graph *g, uint64_t *rng, const char *name, const char *x, int64_t cin, int64_t cout,
                           int64_t k, int64_t stride, int64_t pad, const char *out)
{
    char wn[64], bn[64];
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    int64_t wd[4] = {cout, cin, k, k}, bd[1] = {cout}, nw = cout * cin * k * k;
    float *w = tg_alloc(g, sizeof(float) * (size_t)nw), *b = tg_alloc(g, sizeof(float) * (size_t)cout);
    dg_fill(rng, w, (size_t)nw, sqrt(3.0 / (double)(cin * k * k)));
    dg_fill(rng, b, (size_t)cout, 0.1);
    tg_init_f32(g, tg_str(g, wn), 4, wd, w);
    tg_init_f32(g, tg_str(g, bn), 1, bd, b);
    Onnx__NodeProto *n = tg_node(g, "Conv", name, (const char *const[]){x, tg_str(g, wn), tg_str(g, bn)}, 3, out);
    tg_attr_ints(g, n, "kernel_shape", 2, (int64_t[]){k, k});
    tg_attr_ints(g, n, "pads", 4, (int64_t[]){pad, pad, pad, pad});
    if (stride != 1) tg_attr_ints(g, n, "strides", 2, (int64_t[]){stride, stride});
}

/* x [N, c, h, w] -> GlobalAveragePool -> Flatten -> Gemm (fc, transB) to
 * `classes` scores, the graph's output "y" */
static inline void dg_head(tg_graph *g, uint64_t *rng, const char *x, int64_t c, int64_t classes)
{
    tg_node(g, "GlobalAveragePool", "gap", (const char *const[]){x}, 1, "p");
    tg_node(g, "Flatten", "flat", (const char *const[]){"p"}, 1, "f");
    int64_t fd[2] = {classes, c}, fb[1] = {classes};
    float *fw = tg_alloc(g, sizeof(float) * (size_t)(classes * c)), *fbias = tg_alloc(g, sizeof(float) * (size_t)classes);
    dg_fill(rng, fw, (size_t)(classes * c), 0.3);
    dg_fill(rng, fbias, (size_t)classes, 0.1);
    tg_init_f32(g, "fc.weight", 2, fd, fw);
    tg_init_f32(g, "fc.bias", 1, fb, fbias);
    Onnx__NodeProto *gm = tg_node(g, "Gemm", "fc", (const char *const[]){"f", "fc.weight", "fc.bias"}, 3, "y");
    tg_attr_int(g, gm, "transB", 1);
    g->outs[g->n_outs++] = tg_value_info(g, "y", 1, 2, (int64_t[]){-1, classes});
}

/* a graph input's rows in the eval set: its name, shape (dim 0 the
 * samples) and floats */
typedef struct dg_input {
    const char *name;
    int ndim;
    const int64_t *dims;
    const float *data;
} dg_input;

/* The eval set as safetensors: each input's rows, then `samples` labels
 * drawn from rng in [0, classes) */
static inline uint8_t *dg_eval_set(const dg_input *in, size_t n_in, int64_t samples, int classes, uint64_t *rng,
                                   size_t *len)
{
    char header[2048];
    size_t h = 0, off = 0, sizes[TG_MAX_IO];
    assert_true(n_in <= TG_MAX_IO);
    h += (size_t)snprintf(header + h, sizeof header - h, "{");
    for (size_t i = 0; i < n_in; i++) {
        int64_t numel = 1;
        h += (size_t)snprintf(header + h, sizeof header - h, "\"%s\":{\"dtype\":\"F32\",\"shape\":[", in[i].name);
        for (int k = 0; k < in[i].ndim; k++) {
            numel *= in[i].dims[k];
            h += (size_t)snprintf(header + h, sizeof header - h, "%s%lld", k ? "," : "", (long long)in[i].dims[k]);
        }
        sizes[i] = (size_t)numel * sizeof(float);
        h += (size_t)snprintf(header + h, sizeof header - h, "],\"data_offsets\":[%zu,%zu]},", off, off + sizes[i]);
        off += sizes[i];
    }
    h += (size_t)snprintf(header + h, sizeof header - h,
                          "\"labels\":{\"dtype\":\"I64\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}}",
                          (long long)samples, off, off + (size_t)samples * sizeof(int64_t));
    assert_true(h < sizeof header);
    *len = 8 + h + off + (size_t)samples * sizeof(int64_t);
    uint8_t *buf = malloc(*len);
    assert_non_null(buf);
    uint64_t hl = h;
    for (int k = 0; k < 8; k++) buf[k] = (uint8_t)(hl >> (8 * k));
    memcpy(buf + 8, header, h);
    uint8_t *p = buf + 8 + h;
    for (size_t i = 0; i < n_in; i++) {
        memcpy(p, in[i].data, sizes[i]);   /* little-endian host (x86-64, as the engine) */
        p += sizes[i];
    }
    for (int64_t s = 0; s < samples; s++) {
        int64_t label = dg_pick(rng, classes);
        memcpy(p + (size_t)s * sizeof label, &label, sizeof label);
    }
    return buf;
}

/* the eval set (safetensors bytes) loaded as NAME.safetensors, failing the
 * test with the loader's message; does not free the buffer */
static inline void dg_load_set(const uint8_t *db, size_t dl, const char *name, bf_dataset **ds)
{
    char dn[64];
    snprintf(dn, sizeof dn, "%s.safetensors", name);
    bf_error err = {0};
    if (bf_dataset_load_buffer(db, dl, dn, ds, &err) != BF_OK) fail_msg("eval set: %s", err.msg);
}

/* A graph whose one input is images "x" [samples, c, hw, hw], finished:
 * the images uniform in [-1, 1), then random labels of `classes` (both
 * drawn from rng in that order), the model loaded as NAME.onnx (tg_load)
 * and the eval set as NAME.safetensors */
static inline void dg_finish_images(tg_graph *g, uint64_t *rng, int64_t samples, int64_t c, int64_t hw, int classes,
                                    const char *name, bf_model **m, bf_dataset **ds)
{
    size_t dl, n = (size_t)(samples * c * hw * hw);
    float *x = malloc(sizeof(float) * n);
    assert_non_null(x);
    dg_fill(rng, x, n, 1.0);
    dg_input in = {"x", 4, (int64_t[]){samples, c, hw, hw}, x};
    uint8_t *db = dg_eval_set(&in, 1, samples, classes, rng, &dl);
    *m = tg_load(g, name);
    dg_load_set(db, dl, name, ds);
    free(x), free(db);
}

/* the model as ONNX bytes (loaded as NAME.onnx) and its eval set, as a
 * user's files would be, failing the test with the loader's message; frees
 * neither buffer (test_diff_random writes them out first) */
static inline void dg_load(const uint8_t *mb, size_t ml, const uint8_t *db, size_t dl, const char *name, bf_model **m,
                           bf_dataset **ds)
{
    char mn[64];
    snprintf(mn, sizeof mn, "%s.onnx", name);
    bf_error err = {0};
    if (bf_model_load_buffer(mb, ml, mn, m, &err) != BF_OK) fail_msg("model: %s", err.msg);
    dg_load_set(db, dl, name, ds);
}

/* two trial records the same (trial, outcome, changed predictions, every
 * metric's bits): what a planted error must break for some trial */
static inline int dg_same_record(const bf_trial_record *a, const bf_trial_record *b)
{
    return a->trial == b->trial && a->outcome == b->outcome && a->changed == b->changed &&
           memcmp(a->metrics, b->metrics, sizeof a->metrics) == 0;
}

#endif
