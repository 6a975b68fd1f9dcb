/* libFuzzer target: a fuzzed model sized to a small eval set made for it,
 * through bf_model_bind_dims's per-call decision (a graph whose input takes
 * a batch of one, or a symbolic batch, and whose outputs' sizes are data
 * runs one image per call: exec/bind.c, bind_per_call; the walk over If and
 * Loop subgraphs, model/model_dims.c, bf__model_data_shaped) and its binding
 * of symbolic dims, then evaluated. fuzz_onnx has no eval set and
 * fuzz_evalset binds only fixed fixtures, so neither reaches the decision
 * with a hostile graph.
 *
 * Input: byte 0 gives the samples N (1 + b % 3) and whether each eval
 * tensor is laid out as the graph declares it, [N, dims past 0...] (b & 4
 * clear), or as one sample per graph call, [N, dims...] (set); byte 1 the
 * size given to every symbolic dim past 0 (1 + b % 4); the rest is the ONNX
 * file. The eval set has one tensor per graph input, named like it, float32
 * or int64 as declared, of small values that vary (so that NonZero selects
 * some), and no labels. A model that loads and binds is evaluated once
 * under a memory cap; a run that succeeds must report N samples, and a
 * refusal must say why.
 *
 * Seeds (tests/fuzz/corpus/fuzz_bind): the one-image-per-call fixtures and
 * tests/fixtures/user_det's plain exports behind their two bytes, and the
 * hostile graphs of tests/unit/test_per_call.c (tests/fuzz/make_bind_seeds.py). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/bitflip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_IN 8
#define MAX_ELEMS ((int64_t)1 << 16)   /* per eval tensor: the set stays small */

/* A name that goes into the safetensors header as it is (no escaping). */
static int plain_name(const char *s)
{
    if (!s || !*s || strlen(s) > 200) return 0;
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\') return 0;
    return 1;
}

/* The eval set's bytes for m (malloc'd), or NULL when m's inputs do not
 * fit one (a dtype other than float32 and int64, an odd name, too big). */
static uint8_t *eval_set_for(const bf_model *m, int64_t n, int64_t sym, int one_sample, size_t *len)
{
    size_t k = bf_model_num_inputs(m);
    if (k == 0 || k > MAX_IN) return NULL;
    char header[MAX_IN * 400 + 16];
    size_t off = 0, bytes = 0;
    int64_t elems[MAX_IN];
    off += (size_t)snprintf(header, sizeof header, "{");
    for (size_t i = 0; i < k; i++) {
        const bf_value_info *vi = bf_model_input(m, i);
        if (!plain_name(vi->name) || (vi->dtype != BF_F32 && vi->dtype != BF_I64) || vi->ndim < 0 ||
            vi->ndim + one_sample < 1 || vi->ndim + one_sample > 4)
            return NULL;
        int64_t dims[5], e = n;
        int nd = 0;
        dims[nd++] = n;
        for (int d = one_sample ? 0 : 1; d < vi->ndim; d++) {
            int64_t v = vi->dims[d] < 0 ? sym : vi->dims[d];
            if (v > MAX_ELEMS || (e *= v) > MAX_ELEMS) return NULL;
            dims[nd++] = v;
        }
        elems[i] = e;
        size_t nb = (size_t)e * 4 * (vi->dtype == BF_I64 ? 2 : 1);
        int w = snprintf(header + off, sizeof header - off, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
                         vi->name, vi->dtype == BF_I64 ? "I64" : "F32");
        off += (size_t)w;
        for (int d = 0; d < nd; d++)
            off += (size_t)snprintf(header + off, sizeof header - off, "%s%lld", d ? "," : "", (long long)dims[d]);
        off += (size_t)snprintf(header + off, sizeof header - off, "],\"data_offsets\":[%zu,%zu]}", bytes, bytes + nb);
        bytes += nb;
    }
    off += (size_t)snprintf(header + off, sizeof header - off, "}");
    uint8_t *buf = malloc(8 + off + bytes);
    if (!buf) return NULL;
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)((uint64_t)off >> (8 * b));
    memcpy(buf + 8, header, off);
    uint8_t *p = buf + 8 + off;
    for (size_t i = 0; i < k; i++) {
        int i64 = bf_model_input(m, i)->dtype == BF_I64;
        for (int64_t j = 0; j < elems[i]; j++) {
            /* 0, 1, 2, 0, 1, 2...: some zeros, some not, small indices */
            if (i64) {
                int64_t v = j % 3;
                memcpy(p, &v, 8), p += 8;
            } else {
                float v = (float)(j % 3) * 0.5f;
                memcpy(p, &v, 4), p += 4;
            }
        }
    }
    *len = 8 + off + bytes;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    int64_t n = 1 + data[0] % 3, sym = 1 + data[1] % 4;
    int one_sample = (data[0] & 4) != 0;
    bf_load_limits lim = {.max_field_bytes = 1 << 20, .max_nodes = 2000, .max_initializers = 2000,
                          .max_attributes = 64, .max_tensor_elements = 1 << 20};   /* graph depth: the default, 64 */
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    int ran = 0;
    if (bf_model_load_buffer_opts(data + 2, size - 2, "fuzz.onnx", &lim, &m, &err) != BF_OK) return 0;
    size_t len = 0;
    uint8_t *set = eval_set_for(m, n, sym, one_sample, &len);
    if (!set) goto out;
    bf_status st = bf_dataset_load_buffer(set, len, "fuzz.eval.safetensors", &ds, &err);
    free(set);
    if (st != BF_OK) abort();   /* the set was made well formed here */
    st = bf_model_bind_dims(&m, ds, &err);   /* m: the model to free either way */
    if (st != BF_OK) {
        if (!err.msg[0]) abort();   /* a refusal says why */
        goto out;
    }
    bf_eval_opts o = {.batch = 2, .threads = 1, .max_run_bytes = (uint64_t)64 << 20};
    bf_job_budget b = {0};
    if (bf_eval_estimate(m, ds, &o, &b, &err) != BF_OK) {
        if (!err.msg[0]) abort();
        goto out;
    }
    if (b.total_bytes > ((uint64_t)128 << 20)) goto out;
    if (bf_evaluator_create(m, ds, &o, &ev, &err) != BF_OK) {
        if (!err.msg[0]) abort();
        goto out;
    }
    bf_eval_result res = {0};
    if (bf_evaluator_run(ev, NULL, 0, &res, &err) == BF_OK) {
        if (res.samples != n) abort();
        ran = 1;
    } else if (!err.msg[0]) {
        abort();
    }
out:
    /* FUZZ_VERBOSE=1: what became of each input (to check that seeds get far) */
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "fuzz_bind: %s%s\n", m && bf_model_num_inputs(m) && bf_model_input(m, 0)->ndim > 0 &&
                                                    bf_model_input(m, 0)->dims[0] == 1 ? "[dim 0 = 1] " : "",
                ran ? "ran" : err.msg[0] ? err.msg : "no eval set fits its inputs");
    bf_evaluator_free(ev);
    bf_dataset_free(ds);
    bf_model_free(m);
    return 0;
}
