/* libFuzzer target: a campaign spec through the JSON door (size, depth,
 * array and string limits), jansson and the validator; a spec that
 * validates is then resolved against a fixture model and eval set
 * (FUZZ_SPEC_FIXTURE: demo_digits, its first 4 samples; fuzz_spec_kv: a
 * GPT-2 with its KV cache as inputs, 2 samples): patterns, bit positions, representation, the memory
 * estimate and, when small, the campaign with its golden pass. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/spec.h"
#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"

#ifndef BF_FIXTURES
#define BF_FIXTURES "tests/fixtures"
#endif
/* the fixture the specs resolve against, under BF_FIXTURES; fuzz_spec_kv
 * builds this file with the language model whose KV cache is graph inputs
 * and outputs (faults.kv, target kv_cache: campaign/kv_sites.c) */
#ifndef FUZZ_SPEC_FIXTURE
#define FUZZ_SPEC_FIXTURE "conformance/demo_digits"
#endif
#ifndef FUZZ_SPEC_SAMPLES
#define FUZZ_SPEC_SAMPLES 4
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bf_model *model;
static bf_dataset *dataset;

static const char *st_dtype(bf_dtype d)
{
    switch (d) {
    case BF_F32: return "F32";
    case BF_I64: return "I64";
    case BF_I32: return "I32";
    case BF_U8: return "U8";
    case BF_F16: return "F16";
    case BF_BF16: return "BF16";
    default: return NULL;
    }
}

/* The first `n` samples of `full` as a dataset of their own (written as
 * safetensors and loaded): a golden pass over 4 samples keeps each input
 * that validates to milliseconds. */
static bf_dataset *first_samples(const bf_dataset *full, int64_t n)
{
    char hdr[4096];
    size_t off = 0, data_len = 0, h = 1;
    hdr[0] = '{';
    for (size_t i = 0; i < bf_dataset_num_tensors(full); i++) {
        const bf_tensor *t = bf_dataset_tensor(full, i);
        size_t row = bf_tensor_nbytes(t) / (size_t)t->dims[0];
        char shape[256] = "";
        size_t so = (size_t)snprintf(shape, sizeof shape, "%lld", (long long)n);
        for (int d = 1; d < t->ndim; d++) so += (size_t)snprintf(shape + so, sizeof shape - so, ", %lld", (long long)t->dims[d]);
        h += (size_t)snprintf(hdr + h, sizeof hdr - h, "%s\"%s\": {\"dtype\": \"%s\", \"shape\": [%s], \"data_offsets\": [%zu, %zu]}",
                              i ? ", " : "", t->name, st_dtype(t->dtype), shape, off, off + row * (size_t)n);
        off += row * (size_t)n;
    }
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "}");
    data_len = off;
    unsigned char *buf = calloc(1, 8 + h + data_len);
    if (!buf) abort();
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, hdr, h);
    off = 8 + h;
    for (size_t i = 0; i < bf_dataset_num_tensors(full); i++) {
        const bf_tensor *t = bf_dataset_tensor(full, i);
        size_t bytes = bf_tensor_nbytes(t) / (size_t)t->dims[0] * (size_t)n;
        memcpy(buf + off, t->data, bytes);
        off += bytes;
    }
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_buffer(buf, 8 + h + data_len, "first samples", &ds, &err) != BF_OK) {
        fprintf(stderr, "fuzz_spec: %s\n", err.msg);
        abort();
    }
    free(buf);
    return ds;
}

/* Loaded once: the fixture the specs are checked against. BF_FUZZ_FIXTURES
 * overrides the compiled-in directory. */
static void load_fixture(void)
{
    static int tried;
    if (tried) return;
    tried = 1;
    const char *dir = getenv("BF_FUZZ_FIXTURES");
    char mp[1024], dp[1024];
    bf_error err = {0};
    bf_dataset *full = NULL;
    snprintf(mp, sizeof mp, "%s/" FUZZ_SPEC_FIXTURE ".onnx", dir ? dir : BF_FIXTURES);
    snprintf(dp, sizeof dp, "%s/" FUZZ_SPEC_FIXTURE ".eval.safetensors", dir ? dir : BF_FIXTURES);
    if (bf_model_load_file(mp, &model, &err) != BF_OK || bf_dataset_load_file(dp, &full, &err) != BF_OK) {
        fprintf(stderr, "fuzz_spec: %s (set BF_FUZZ_FIXTURES to tests/fixtures)\n", err.msg);
        abort();
    }
    dataset = first_samples(full, FUZZ_SPEC_SAMPLES);
    bf_dataset_free(full);
    /* a language model's sequence length is the eval set's (a no-op for the digits) */
    if (bf_model_bind_dims(&model, dataset, &err) != BF_OK) {
        fprintf(stderr, "fuzz_spec: %s\n", err.msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bf_campaign_spec spec;
    bf_spec_problems pr;
    bf_spec_limits lim = {.max_bytes = 1 << 20, .max_array = 4096};
    load_fixture();
    bf_status st = bf_spec_parse_opts((const char *)data, size, &lim, &spec, &pr);
    /* every problem names a pointer and says something */
    for (size_t i = 0; i < pr.count; i++)
        if (!pr.items[i].pointer || !pr.items[i].message || !pr.items[i].message[0]) abort();
    if (st == BF_OK && pr.count) abort();
    json_t *j = bf_spec_problems_json(&pr);
    json_decref(j);
    bf_spec_problems_free(&pr);
    if (st != BF_OK) return 0;

    bf_error err = {0};
    bf_job_budget b;
    bf_campaign_opts co = {.threads = 1};
    if (bf_campaign_estimate(model, dataset, &spec, &co, &b, &err) == BF_OK && b.total_bytes < ((uint64_t)256 << 20) &&
        spec.n_mitigations == 0 && spec.trials <= 100000) {
        bf_campaign *c = NULL;
        if (bf_campaign_create(model, dataset, &spec, &c, &err) == BF_OK) {
            (void)bf_campaign_population(c);
            bf_campaign_free(c);
        }
    }
    /* FUZZ_VERBOSE=1: how far a spec that validated got (to check the seeds) */
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz_spec: %s\n", err.msg[0] ? err.msg : "resolved");
    bf_campaign_spec_free(&spec);
    return 0;
}
