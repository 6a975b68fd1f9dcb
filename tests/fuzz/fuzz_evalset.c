/* libFuzzer target: the eval-set layouts the task issues added, as a model
 * reads them. The first byte picks a fixture model; the rest is a
 * safetensors eval set for it, loaded (bf_dataset_load_buffer_opts: a
 * detection set's gt_boxes / gt_labels / gt_offsets are checked there,
 * model/dataset_det.c), the model sized to it (bf_model_bind_dims), the
 * evaluator made (the labels bound to the task: exec/eval_labels.c's
 * classification, segmentation labels [N, H, W] with 255 ignored, a language
 * model's [N, T] with -100 and multiple choice's mc_item / mc_answer; the
 * detection ground truth, exec/eval_det.c) and, for a set of at most 4
 * samples, run once and scored.
 *
 *   0  onesample/onesample_dyn.onnx      detection (one image per call)
 *   1  segtask/tiny_seg.onnx             segmentation
 *   2  lmtask/tiny_lm.onnx               language model, multiple choice
 *   3  lm/lm_gpt2_kv_op15.onnx           language model fed a KV cache
 *   4  conformance/demo_digits.onnx      classification
 *
 * Seeds: each fixture's own eval set cut to its first samples, behind its
 * byte (tests/fuzz/corpus/fuzz_evalset). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/bitflip.h"

#ifndef BF_FIXTURES
#define BF_FIXTURES "tests/fixtures"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const models[] = {"onesample/onesample_dyn.onnx", "segtask/tiny_seg.onnx", "lmtask/tiny_lm.onnx",
                                     "lm/lm_gpt2_kv_op15.onnx", "conformance/demo_digits.onnx"};
#define N_MODELS (sizeof models / sizeof models[0])

/* The models' bytes, read once, and each model loaded once and kept while
 * inputs leave it as it is: the evaluator only reads it (const bf_model *),
 * and loading a fixed fixture again for every input was a quarter of the
 * target's time (perf), for no new coverage. An input whose set has
 * bf_model_bind_dims make a new model (the GPT-2's symbolic sequence and
 * past lengths) hands it the kept one, which it frees: the next input of
 * that model loads it again. */
static struct { unsigned char *buf; size_t len; bf_model *kept; } files[N_MODELS];

static void load_files(void)
{
    static int done;
    if (done) return;
    done = 1;
    const char *dir = getenv("BF_FUZZ_FIXTURES");
    for (size_t i = 0; i < N_MODELS; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir ? dir : BF_FIXTURES, models[i]);
        FILE *f = fopen(p, "rb");
        if (!f || fseek(f, 0, SEEK_END) != 0) { fprintf(stderr, "fuzz_evalset: cannot read %s (set BF_FUZZ_FIXTURES)\n", p); abort(); }
        long n = ftell(f);
        rewind(f);
        files[i].buf = malloc((size_t)n + 1);
        if (n < 0 || !files[i].buf || fread(files[i].buf, 1, (size_t)n, f) != (size_t)n) abort();
        files[i].len = (size_t)n;
        fclose(f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    load_files();
    size_t which = data[0] % N_MODELS;
    bf_dataset_limits dl = {.max_bytes = (int64_t)1 << 20, .max_tensors = 16};
    bf_dataset *ds = NULL;
    bf_model *m = NULL;
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_status st;
    if (bf_dataset_load_buffer_opts(data + 1, size - 1, "fuzz.eval.safetensors", &dl, &ds, &err) != BF_OK) goto out;
    if (!files[which].kept &&
        bf_model_load_buffer(files[which].buf, files[which].len, models[which], &files[which].kept, &err) != BF_OK) {
        fprintf(stderr, "fuzz_evalset: %s\n", err.msg);
        abort();
    }
    m = files[which].kept;
    st = bf_model_bind_dims(&m, ds, &err);
    if (m != files[which].kept) files[which].kept = NULL;   /* m owns it now */
    else m = NULL;                                           /* kept, not freed below */
    if (st != BF_OK) goto out;
    const bf_model *use = m ? m : files[which].kept;
    /* shapes are data here: a set that asks for much is refused before
     * anything is allocated, as the daemon's check does */
    bf_eval_opts o = {.batch = 4, .threads = 1, .max_run_bytes = (uint64_t)64 << 20};
    bf_job_budget b = {0};
    if (bf_eval_estimate(use, ds, &o, &b, &err) != BF_OK) {
        if (!err.msg[0]) abort();
        goto out;
    }
    if (b.total_bytes > ((uint64_t)256 << 20)) goto out;
    if (bf_evaluator_create(use, ds, &o, &ev, &err) != BF_OK) {
        if (!err.msg[0]) abort();   /* a refusal says why */
        goto out;
    }
    if (bf_dataset_num_samples(ds) <= 4) {
        bf_eval_result res = {0};
        if (bf_evaluator_run(ev, NULL, 0, &res, &err) == BF_OK && res.samples != bf_dataset_num_samples(ds)) abort();
    }
out:
    /* FUZZ_VERBOSE=1: what became of each input (to check that seeds get far) */
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz_evalset: model %zu: %s\n", which, err.msg[0] ? err.msg : "ran");
    bf_evaluator_free(ev);
    bf_model_free(m);
    bf_dataset_free(ds);
    return 0;
}
