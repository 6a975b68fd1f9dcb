/* bitflip-conformance DIR: checks the engine against reference outputs.
 *
 * DIR holds, per model NAME, NAME.onnx, NAME.eval.safetensors and
 * NAME.ref.json (the format of shared/conformance/README.md): golden outputs
 * and metric, and the outputs under single-bit parameter faults, as PyTorch
 * (or a numpy rendition of the ONNX spec) computed them; a fault record with
 * "dtype" "int8" or "uint8" flips a bit of a quantized model's stored integer
 * (tests/fixtures/README.md). Every NAME.ref.json in DIR is checked; a table per model is
 * printed; every fault is checked twice, directly (a bit flip in a plan) and
 * through the campaign path (an explicit fault list from a JSON spec); the
 * exit status is 0 only if everything matches (1: a mismatch, 3: not verified,
 * 2: usage or unreadable input). --only NAME,NAME checks just those models
 * (a set whose other models wait for ops still being written); naming a
 * model DIR does not hold is a usage error, so the list cannot go stale.
 * --no-fuse loads each model as exported, without fusing patterns into
 * the kernels PyTorch ran (docs/NUMERICS.md): for references made from a
 * model PyTorch ran op by op. --tie-order pytorch (the default) or onnx:
 * which of several equal values a TopK or NonMaxSuppression keeps
 * (bf_load_limits.tie_order); PyTorch's, since the references are
 * PyTorch's (an untrained detector's tied scores). --dump FILE writes every output it computed (golden, each fault directly,
 * each trial of the campaign path, in that order, as raw float32 bytes per
 * model) so that two runs can be compared bit for bit: simd_levels.sh does
 * so under each CPU path (BITFLIP_SIMD).
 *
 * Matching: |ours - ref| <= max(1e-5, 1e-4 |ref|), NaN and +-Inf in exactly
 * the same places; the metric to 1e-4. A one-image detector's rows of equal
 * scores are matched as a set, as the reference's "ties" says or, without
 * it, as the rows themselves show (conf_match.c; tests/fixtures/README.md,
 * "Ties at the cut"). Where the engine's own NonMaxSuppression chose within
 * rounding (it records that for this runner alone: bf_eval_opts.nms_ties),
 * an image's rows from that choice on are reported unverifiable and the rows
 * before it checked in place (conf_match.c, nms_cuts; tests/fixtures/
 * README.md, "NMS near-ties"). A reference's "golden_scale" and a fault's
 * "scale" give, per detection row, the magnitude each value's tolerance is
 * taken of where larger than the row's own (the box decode's gain on a
 * sliver proposal: tests/fixtures/README.md, "Scales from the decode").
 * A value whose scale widens its tolerance more than --max-widen G times
 * (default 100) is checked against its row's own tolerance alone, and
 * outside it unverifiable: counted per output, neither passed nor failed; a list
 * (golden, a fault) where more than --max-unverifiable S (default 0.01) of
 * an output's values are is NOT VERIFIED, neither passed nor failed, and a
 * model with one is counted apart: exit status 3 when nothing failed but
 * something was not verified (tests/fixtures/README.md, "Values no rounding
 * decides").
 *
 * A model with symbolic dims past the batch (torch.onnx.export's dynamic
 * sequence axes) is checked at the sizes of the eval set's tensors
 * (bf_plan_dims_from, bf_model_with_dims), directly and in the campaign.
 *
 * Task "language_model" (tests/fixtures/README.md): the output is the logits
 * [n, T, vocab], so "golden" covers only the first n_ref_samples samples (a
 * row of T*vocab values each); golden_perplexity and golden_token_accuracy,
 * measured on the whole eval set, must match the engine's within 1e-4
 * relative, and so must a fault's "perplexity" and "token_accuracy" where
 * the record has them (null: not compared; NaN and Inf in the same places),
 * on the direct path and in the campaign path's trial records. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/spec.h"
#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"
#include "conf_match.h"

#define METRIC_TOL 1e-4
/* NMS decisions within rounding (docs/OPS.md, "NMS near-ties"): a kept and a
 * suppressed box whose scores are within 1e-5 of the larger (1e-7 absolute
 * near 0), an IoU within 1e-4 of the threshold: the margins the project's
 * fixtures are drawn to keep (tests/fixtures/README.md, "No reference sits
 * on a knife's edge"), so those are never cut. The ties seen on held-out
 * detectors were far inside them (scores 7.7e-8 and 2.4e-6 relative apart);
 * the value tolerance (1e-4) would cut decisions the fixtures keep clear of. */
#define NMS_SCORE_RTOL 1e-5
#define NMS_SCORE_ATOL 1e-7
#define NMS_IOU_MARGIN 1e-4

/* A segmenter's row is C·H·W logits (tests/fixtures/README.md, "The format
 * for detection and segmentation"), and a pixel's C logits are one object,
 * as a detection's box is: a logit near 0 is what is left of sums of terms
 * the size of the pixel's largest logits, so the last bits of those (the
 * summation order upstream) move it by 1e-4 of them, not of itself. On an
 * untrained FCN-ResNet50 (docs/OPS.md) 4 of 24,576 logits near 0.08 were
 * 1.3x the value's own tolerance from PyTorch's, as ONNX Runtime's were
 * 0.95x, with the arg-max equal everywhere. H·W comes from the eval set's
 * labels [N, H, W]; 0 (each value its own scale) for any other task or
 * when the row is not C whole planes. */
static int64_t seg_plane(const json_t *ref, const bf_dataset *ds, int64_t cols)
{
    const char *task = json_string_value(json_object_get(ref, "task"));
    const bf_tensor *lab = bf_dataset_find(ds, "labels");
    if (!task || strcmp(task, "segmentation") || !lab || lab->ndim != 3) return 0;
    int64_t plane = lab->dims[1] * lab->dims[2];
    return plane > 0 && cols % plane == 0 ? plane : 0;
}

static cmp compare(const float *ours, int64_t cols, const json_t *ref, int64_t rows, int64_t plane)
{
    return compare_rows(ours, cols, ref, rows, plane);
}

/* The same faults through the campaign path: one explicit-list campaign
 * built from a JSON spec (the public contract), its trials' outputs compared
 * with the reference like the direct path's. */
typedef struct camp_check {
    const json_t *faults;
    int64_t n_ref, cols;
    int64_t bad_trials;
    int64_t first_bad;
    float *kept;          /* --dump: each trial's first n_ref rows, by trial (threads finish in any order) */
    int64_t kept_cols;
    int lm;               /* language_model: each trial's perplexity and token accuracy too */
    int64_t plane;        /* a segmenter's H·W (seg_plane), else 0 */
    int64_t bad_metric_trials, first_bad_metric;
    conf_ties tc;         /* a one-image graph's tie rule (a fault's: inferred, never the golden "ties") */
    int64_t tied, unverified;   /* over every trial */
    nms_cut *const *cuts; /* per fault, the direct path's NMS near-tie cuts (conf_ties.cut), or NULL */
    int64_t nms_images, nms_rows, nms_checked;   /* over every trial */
    int64_t checked, unverif, not_verified;      /* values over every trial; trials NOT VERIFIED */
} camp_check;

/* Appends n floats to the dump; 0 when it cannot (the caller fails). A NaN
 * is written as the one quiet NaN 0x7fc00000: its sign and payload are not
 * results (IEEE 754 and ONNX leave them open, and which operand's NaN an x86
 * instruction passes on depends on the order the compiler gave two
 * commutative operands, which differs between a kernel's scalar and AVX2
 * copies), so runs are compared on everything else. */
static int dump_floats(FILE *dump, const float *v, int64_t n)
{
    if (!dump) return 1;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = 0x7fc00000u;
        if (!isnan(v[i])) memcpy(&bits, &v[i], sizeof bits);
        if (fwrite(&bits, sizeof bits, 1, dump) != 1) return 0;
    }
    return 1;
}

/* A list NOT VERIFIED and nothing worse: a mismatch or a malformed
 * reference wins over it (a model's verdict, the exit status). */
static int only_unverified(const cmp *c) { return c->not_verified && !c->bad && !c->format_error; }

/* A one-sample graph's trial: every output per sample, as the direct path
 * compares them. */
static void on_ragged(void *user, int64_t trial, const bf_ragged_output *outs, size_t n, int64_t samples)
{
    camp_check *cc = user;
    int64_t rows_bad;
    const char *out_bad;
    (void)samples;
    const json_t *f = json_array_get(cc->faults, (size_t)trial);
    /* the direct path's cuts: the campaign path computes the same outputs
     * (the differential engine's records equal full runs), so its NMS took
     * the same decisions */
    conf_ties tc = cc->tc;
    tc.cut = cc->cuts ? cc->cuts[trial] : NULL;
    tc.scale = json_object_get(f, "scale");
    cmp c = compare_ragged(outs, n, json_object_get(f, "outputs"), cc->n_ref, &rows_bad, &out_bad, &tc);
    cc->tied += c.tied;
    cc->unverified += c.unverified;
    cc->nms_images += c.nms_images;
    cc->nms_rows += c.nms_rows;
    cc->nms_checked += c.nms_checked;
    cc->checked += c.checked;
    cc->unverif += c.unverif;
    cc->not_verified += only_unverified(&c);
    if (c.bad || c.format_error) {
        if (cc->first_bad < 0) cc->first_bad = trial;
        cc->bad_trials++;
    }
}

/* A one-sample graph's every output (its row counts are in the data's
 * length) into the dump. */
static int dump_ragged(FILE *dump, const bf_eval_result *r)
{
    for (size_t k = 0; k < r->n_ragged; k++)
        if (!dump_floats(dump, r->ragged[k].data, r->ragged[k].offsets[r->samples])) return 0;
    return 1;
}

static void on_outputs(void *user, int64_t trial, const float *outputs, int64_t samples, int64_t cols)
{
    camp_check *cc = user;
    (void)samples;
    const json_t *f = json_array_get(cc->faults, (size_t)trial);
    cmp c = compare(outputs, cols, json_object_get(f, "outputs"), cc->n_ref, cc->plane);
    if (cc->kept && cols == cc->kept_cols)
        memcpy(cc->kept + trial * cc->n_ref * cols, outputs, (size_t)(cc->n_ref * cols) * sizeof *outputs);
    if (c.bad || c.format_error) {
        if (cc->first_bad < 0) cc->first_bad = trial;
        cc->bad_trials++;
    }
}

/* Whether got matches want within METRIC_TOL relative (NaN and Inf exactly). */
static int metric_matches(double got, double want)
{
    if (isnan(want) || isnan(got) || isinf(want) || isinf(got)) return (isnan(want) && isnan(got)) || want == got;
    return fabs(got - want) <= METRIC_TOL * fabs(want);
}

/* A language model's trial: its perplexity and token accuracy against the
 * fault record's, where it has them (as check_lm_metrics does directly). */
static void on_trial(void *user, const bf_trial_record *rec)
{
    camp_check *cc = user;
    const json_t *f = json_array_get(cc->faults, (size_t)rec->trial);
    /* a detector's fault: the images it makes critical (IVMOD's count) */
    const json_t *ci = json_object_get(f, "critical_images");
    int cut = cc->cuts && cc->cuts[rec->trial];   /* an NMS near tie: whether the images differ is unverifiable */
    if (json_is_integer(ci) && !cut && json_integer_value(ci) != rec->changed) {
        if (cc->first_bad_metric < 0) cc->first_bad_metric = rec->trial;
        cc->bad_metric_trials++;
        return;
    }
    if (!cc->lm) return;
    const char *keys[2] = {"perplexity", "token_accuracy"};
    const double got[2] = {rec->metrics[BF_METRIC_PERPLEXITY], rec->metrics[BF_METRIC_TOKEN_ACCURACY]};
    for (int i = 0; i < 2; i++) {
        const json_t *j = json_object_get(f, keys[i]);
        double want;
        if (!j || json_is_null(j)) continue;
        if (!json_to_double(j, &want) || !metric_matches(got[i], want)) {
            if (cc->first_bad_metric < 0) cc->first_bad_metric = rec->trial;
            cc->bad_metric_trials++;
            return;
        }
    }
}

/* One explicit-list campaign of the faults, its records checked as the
 * faults' own (image_major: bf_campaign_prep.image_major; *ran_imaj: whether
 * the trials did run image-major, a one-image graph's order). */
static int check_campaign_path(const bf_model *m, const bf_dataset *ds, const char *model_path, const char *data_path,
                               const json_t *faults, int64_t n_ref, int64_t cols, int64_t plane, int64_t batch, int lm, int ragged,
                               const conf_ties *tc, nms_cut *const *cuts, FILE *dump, int *not_verified, int image_major,
                               int *ran_imaj)
{
    size_t n = json_array_size(faults), k;
    const json_t *f;
    if (!n) return 0;
    json_t *list = json_array();
    json_array_foreach(faults, k, f)
        json_array_append_new(list, json_pack("{s:O, s:O, s:O}", "tensor", json_object_get(f, "param"), "index",
                                              json_object_get(f, "index"), "bit", json_object_get(f, "bit")));
    json_t *spec_doc = json_pack("{s:s, s:s, s:{}, s:{s:o}, s:I}", "model", model_path, "dataset", data_path, "faults",
                                 "sampling", "list", list, "batch", (json_int_t)batch);
    char *text = json_dumps(spec_doc, JSON_COMPACT);
    json_decref(spec_doc);
    bf_campaign_spec spec = {0};
    bf_spec_problems probs = {0};
    bf_campaign *c = NULL;
    bf_campaign_result res = {0};
    bf_error err = {0};
    camp_check cc = {.faults = faults, .n_ref = n_ref, .first_bad = -1, .kept_cols = cols, .lm = lm, .plane = plane,
                     .first_bad_metric = -1, .tc = *tc, .cuts = cuts};
    int failures = 0;
    if (ran_imaj) *ran_imaj = 0;
    printf("  campaign path    %zu faults as one explicit-list campaign%s: ", n, image_major ? "" : ", trial-major");
    if (!text || bf_spec_parse(text, strlen(text), &spec, &probs) != BF_OK) {
        printf("MISMATCH: the spec was refused: %s %s\n", probs.count ? probs.items[0].pointer : "",
               probs.count ? probs.items[0].message : "");
        failures = 1;
        goto out;
    }
    /* as `bitflip run --threads 2` makes it: a golden pass prepared for the
     * differential engine (a one-image graph's checkpoints, exec/ckpt.h), the
     * trials image-major where the graph takes one image a call */
    bf_campaign_prep prep = {.differential = 1, .threads = 2, .image_major = image_major};
    if (bf_campaign_create_prepared(m, ds, &spec, NULL, &prep, &c, &err) != BF_OK) {
        printf("MISMATCH: %s\n", err.msg);
        failures = 1;
        goto out;
    }
    if (dump && !(cc.kept = calloc(n * (size_t)(n_ref * cols), sizeof *cc.kept))) {
        printf("out of memory for --dump\n");
        failures = 1;
        goto out;
    }
    bf_campaign_opts opts = {.threads = 2, .on_trial = on_trial, .on_outputs = ragged ? NULL : on_outputs,
                             .on_ragged = ragged ? on_ragged : NULL, .user = &cc};
    if (bf_campaign_run(c, &opts, &res, &err) != BF_OK) { printf("MISMATCH: %s\n", err.msg); failures = 1; goto out; }
    if (!dump_floats(dump, cc.kept, (int64_t)n * n_ref * cols)) { printf("cannot write --dump\n"); failures = 1; }
    if (cc.bad_trials) {
        printf("MISMATCH: %lld faults differ, first fault #%lld\n", (long long)cc.bad_trials, (long long)cc.first_bad);
        failures = 1;
    } else if (cc.bad_metric_trials) {
        printf(cc.lm ? "MISMATCH: %lld faults' perplexity or token accuracy differ, first fault #%lld\n"
                     : "MISMATCH: %lld faults' critical images (IVMOD's count) differ, first fault #%lld\n",
               (long long)cc.bad_metric_trials, (long long)cc.first_bad_metric);
        failures = 1;
    } else {
        if (cc.tied)
            printf("ties: %lld rows in groups of equal scores, %lld boxes unverifiable; ", (long long)cc.tied,
                   (long long)cc.unverified);
        if (cc.nms_images)
            printf("NMS near-ties: %lld images cut, %lld rows after the cuts checked, %lld unverifiable; ",
                   (long long)cc.nms_images, (long long)cc.nms_checked, (long long)cc.nms_rows);
        if (cc.unverif)
            printf("values: %lld checked, %lld unverifiable (scale past %g times their row's), %lld faults NOT "
                   "VERIFIED; ", (long long)cc.checked, (long long)cc.unverif, tc->lim->max_widen, (long long)cc.not_verified);
        if (not_verified) *not_verified += cc.not_verified > 0;
        if (ran_imaj) *ran_imaj = res.ckpt.image_major;
        printf("ok (%smasked %lld, tolerable %lld, critical %lld, due %lld)\n", res.ckpt.image_major ? "image-major; " : "",
               (long long)res.total.n[BF_OUTCOME_MASKED],
               (long long)res.total.n[BF_OUTCOME_TOLERABLE], (long long)res.total.n[BF_OUTCOME_CRITICAL],
               (long long)res.total.n[BF_OUTCOME_DUE]);
    }
    bf_campaign_result_free(&res);
out:
    free(cc.kept);
    free(text);
    bf_campaign_free(c);
    bf_campaign_spec_free(&spec);
    bf_spec_problems_free(&probs);
    return failures;
}

/* A language model's perplexity and token accuracy against the fields
 * ppl_key and acc_key of rec (the ref, or a fault record: a missing field
 * there is not compared, a null token accuracy neither); returns the
 * number of failures. */
static int check_lm_metrics(const bf_eval_result *r, const json_t *rec, const char *ppl_key, const char *acc_key,
                            const char *indent)
{
    int failures = 0, is_ref = !strncmp(ppl_key, "golden", 6);
    if (r->task != BF_TASK_LANGUAGE_MODEL) {
        printf("%sMISMATCH: the reference's task is language_model, the engine scored the eval set as %s\n", indent,
               bf_task_name(r->task));
        return 1;
    }
    const char *keys[2] = {ppl_key, acc_key};
    const char *shown[2] = {"perplexity", "token acc"};
    double got[2] = {r->perplexity, r->token_accuracy};
    for (int i = 0; i < 2; i++) {
        const json_t *j = json_object_get(rec, keys[i]);
        double want;
        if (!j || json_is_null(j)) {
            if (is_ref) { printf("%s%-9s reference malformed: no %s\n", indent, shown[i], keys[i]); failures++; }
            continue;
        }
        if (!json_to_double(j, &want)) { printf("%s%-9s reference malformed: %s\n", indent, shown[i], keys[i]); failures++; continue; }
        int ok = metric_matches(got[i], want);
        if (is_ref || !ok)
            printf("%s%-9s ours %.6f  ref %.6f  %s\n", indent, shown[i], got[i], want, ok ? "ok" : "MISMATCH");
        failures += !ok;
    }
    return failures;
}

/* Segmenters' and detectors' metrics, each where rec has it as
 * prefix + name (golden_miou in the ref, map in a fault record), within
 * METRIC_TOL absolute; returns the number of failures. */
static int check_vision_metrics(const bf_eval_result *r, const json_t *rec, const char *prefix, const char *indent,
                                const nms_cut *cut)
{
    const char *names[5] = {"miou", "pixel_accuracy", "map", "map50", "recall"};
    const double got[5] = {r->miou, r->pixel_accuracy, r->map, r->map50, r->recall};
    int failures = 0, is_ref = prefix[0] != 0;
    for (int i = 0; i < 5; i++) {
        char key[64];
        double want;
        snprintf(key, sizeof key, "%s%s", prefix, names[i]);
        const json_t *j = json_object_get(rec, key);
        if (!j || json_is_null(j)) continue;
        if (!json_to_double(j, &want)) { printf("%s%-9s reference malformed: %s\n", indent, names[i], key); failures++; continue; }
        int ok = (isnan(want) && isnan(got[i])) || fabs(got[i] - want) <= METRIC_TOL;
        /* rows after an NMS near tie are unverifiable, and so is a metric of them */
        const char *verdict = ok ? "ok" : cut ? "unverifiable (NMS near-ties)" : "MISMATCH";
        if (is_ref || !ok) printf("%s%-9s ours %.6f  ref %.6f  %s\n", indent, names[i], got[i], want, verdict);
        failures += !ok && !cut;
    }
    return failures;
}

/* Returns the number of failures for this model (or -1 if it could not
 * run); *not_verified = 1 when none failed but a list was NOT VERIFIED. */
static int check_model(const char *dir, const char *name, int64_t batch, int no_fuse, int tie_order, FILE *dump,
                       const conf_limits *lim_v, int *not_verified)
{
    int nv = 0;   /* lists (golden, faults, the campaign path) NOT VERIFIED */
    char path[4096], data_path[4096], ref_path[4096];
    int failures = 0;
    json_error_t jerr;
    bf_error err = {0};
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_evaluator *ev = NULL;
    float *golden = NULL;
    bf_nms_ties *nt = NULL;
    nms_cut *cut = NULL, **fault_cuts = NULL;
    int64_t n_cut_golden = 0, n_cut_ref = 0;   /* their images (nms_cuts_free) */

    snprintf(ref_path, sizeof ref_path, "%s/%s.ref.json", dir, name);
    json_t *ref = json_load_file(ref_path, 0, &jerr);
    if (!ref) { printf("%s: cannot read %s: %s (line %d)\n", name, ref_path, jerr.text, jerr.line); return -1; }
    const char *model_file = json_string_value(json_object_get(ref, "model"));
    snprintf(path, sizeof path, "%s/%s", dir, model_file ? model_file : "");
    if (!model_file) snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    snprintf(data_path, sizeof data_path, "%s/%s.eval.safetensors", dir, name);

    printf("== %s\n", name);
    bf_load_limits lim = {0};
    lim.no_fuse = no_fuse;
    lim.tie_order = tie_order;
    if (bf_model_load_file_opts(path, &lim, &m, &err) != BF_OK) { printf("  load model: %s\n", err.msg); failures = -1; goto out; }
    if (bf_dataset_load_file(data_path, &ds, &err) != BF_OK) { printf("  load eval set: %s\n", err.msg); failures = -1; goto out; }
    if (bf_model_bind_dims(&m, ds, &err) != BF_OK)   /* an LM's "sequence" at the eval set's size */
        { printf("  sequence dims: %s\n", err.msg); failures = -1; goto out; }
    /* our NMS's decisions within rounding, per image (docs/OPS.md, "NMS
     * near-ties"): within the tolerance the rows are checked to */
    if (bf_nms_ties_new(bf_dataset_num_samples(ds), NMS_SCORE_RTOL, NMS_SCORE_ATOL, NMS_IOU_MARGIN, &nt, &err) != BF_OK)
        { printf("  %s\n", err.msg); failures = -1; goto out; }
    bf_eval_opts eo = {.batch = batch > 0 ? batch : INT64_MAX, .threads = 1, .nms_ties = nt};
    if (bf_evaluator_create(m, ds, &eo, &ev, &err) != BF_OK) { printf("  prepare: %s\n", err.msg); failures = -1; goto out; }

    bf_eval_result r;
    if (bf_evaluator_run(ev, NULL, 0, &r, &err) != BF_OK) { printf("  run: %s\n", err.msg); failures = -1; goto out; }
    int64_t n = r.samples, cols = r.out_cols;
    golden = malloc((size_t)(n * cols) * sizeof(float));
    if (!golden) { printf("  out of memory\n"); failures = -1; goto out; }
    memcpy(golden, r.outputs, (size_t)(n * cols) * sizeof(float));
    if (!dump_floats(dump, golden, n * cols) || !dump_ragged(dump, &r)) { printf("  cannot write --dump\n"); failures = -1; goto out; }

    /* a language model's golden logits cover the first n_ref_samples */
    const char *task = json_string_value(json_object_get(ref, "task"));
    int lm = task && !strcmp(task, "language_model");
    int64_t n_ref = json_integer_value(json_object_get(ref, "n_ref_samples"));
    if (n_ref <= 0 || n_ref > n) n_ref = n;
    int64_t n_golden = lm ? n_ref : n;
    n_cut_golden = n_golden;
    n_cut_ref = n_ref;
    int64_t plane = seg_plane(ref, ds, cols);
    /* a one-image detector's rows tied at a cut among equal scores: as the
     * reference's "ties" says (golden), else inferred (conf_match.c) */
    const char *score = score_output(m);
    conf_ties golden_tc = {.ties = json_object_get(ref, "ties"), .lim = lim_v};
    conf_ties fault_tc = {.score = score, .cap = ref_row_cap(ref, score), .lim = lim_v};
    cmp c;
    int64_t rows_bad;
    const char *out_bad;
    if (r.n_ragged) {   /* one image per call: every output, per image */
        if (!nms_cuts(nt, r.ragged, r.n_ragged, json_object_get(ref, "golden"), n_golden, score, &cut))
            { printf("  out of memory\n"); failures = -1; goto out; }
        golden_tc.cut = fault_tc.cut = cut;
        golden_tc.scale = fault_tc.scale = json_object_get(ref, "golden_scale");
        const conf_ties *gtc = json_object_get(ref, "ties") ? &golden_tc : &fault_tc;
        c = compare_ragged(r.ragged, r.n_ragged, json_object_get(ref, "golden"), n_golden, &rows_bad, &out_bad, gtc);
        printf("  golden outputs   %lld samples, %zu outputs each: ", (long long)n_golden, r.n_ragged);
        print_cmp_ragged(&c, rows_bad, out_bad, r.ragged, r.n_ragged, gtc);
        golden_tc.cut = fault_tc.cut = NULL;
        golden_tc.scale = fault_tc.scale = NULL;
        nv += only_unverified(&c);
    } else {
        c = compare(golden, cols, json_object_get(ref, "golden"), n_golden, plane);
        printf("  golden outputs   %lld samples x %lld: ", (long long)n_golden, (long long)cols);
        print_cmp(&c, cols);
    }
    printf("\n");
    failures += c.bad > 0 || c.format_error;

    double want_metric;
    const char *metric = json_object_get(ref, "golden_accuracy") ? "accuracy" : json_object_get(ref, "golden_auc") ? "auc" : NULL;
    if (lm) {
        failures += check_lm_metrics(&r, ref, "golden_perplexity", "golden_token_accuracy", "  golden ");
    } else if (metric) {
        json_to_double(json_object_get(ref, !strcmp(metric, "auc") ? "golden_auc" : "golden_accuracy"), &want_metric);
        double got = !strcmp(metric, "auc") ? r.auc : r.accuracy;
        int ok = fabs(got - want_metric) <= METRIC_TOL;
        printf("  golden %-9s ours %.6f  ref %.6f  %s\n", metric, got, want_metric, ok ? "ok" : "MISMATCH");
        failures += !ok;
    }
    failures += check_vision_metrics(&r, ref, "golden_", "  golden ", cut);

    const json_t *faults = json_object_get(ref, "faults");
    size_t k;
    const json_t *f;
    if (json_array_size(faults) && !(fault_cuts = calloc(json_array_size(faults), sizeof *fault_cuts)))
        { printf("  out of memory\n"); failures = -1; goto out; }
    if (json_array_size(faults))
        printf("  %-4s %-28s %8s %4s %13s %13s  %s\n", "#", "param", "index", "bit", "old", "new", "outputs");
    json_array_foreach(faults, k, f) {
        const char *pname = json_string_value(json_object_get(f, "param"));
        json_int_t index = json_integer_value(json_object_get(f, "index"));
        json_int_t bit = json_integer_value(json_object_get(f, "bit"));
        double ref_old = NAN, ref_new = NAN;
        json_to_double(json_object_get(f, "old"), &ref_old);
        json_to_double(json_object_get(f, "new"), &ref_new);
        printf("  %-4zu %-28.28s %8lld %4lld ", k, pname ? pname : "?", (long long)index, (long long)bit);
        /* int8 fault records (tests/fixtures/README.md) name the stored type;
         * old and new are then the integers */
        const char *want_dt = json_string_value(json_object_get(f, "dtype"));
        if (!want_dt) want_dt = "float32";
        int64_t p = pname ? bf_model_find_param(m, pname) : -1;
        if (p < 0) { printf("MISMATCH: the model has no parameter '%s'\n", pname ? pname : "(null)"); failures++; continue; }
        const bf_param_info *pi = bf_model_param(m, (size_t)p);
        if (strcmp(bf_dtype_name(pi->dtype), want_dt) != 0) {
            printf("MISMATCH: '%s' is %s here, %s in the reference\n", pname, bf_dtype_name(pi->dtype), want_dt);
            failures++;
            continue;
        }
        bf_bitflip flip = {.param = (size_t)p, .index = index, .bit = (int)bit};
        if (bf_bitflip_check(m, &flip, &err) != BF_OK) { printf("MISMATCH: %s\n", err.msg); failures++; continue; }
        float old_v, new_v;
        if (pi->dtype == BF_I8) {
            int8_t q = ((const int8_t *)pi->tensor->data)[index];
            old_v = q, new_v = (int8_t)(uint8_t)((uint8_t)q ^ (1u << bit));
        } else if (pi->dtype == BF_U8) {
            uint8_t q = ((const uint8_t *)pi->tensor->data)[index];
            old_v = q, new_v = (uint8_t)(q ^ (1u << bit));
        } else {
            old_v = ((const float *)pi->tensor->data)[index];
            new_v = bf_flip_f32(old_v, (int)bit);
        }
        printf("%13.6g %13.6g  ", old_v, new_v);
        /* The flipped value itself must agree: it proves index and bit mean
         * the same thing on both sides. */
        if ((float)ref_old != old_v && !(isnan(ref_old) && isnan(old_v))) {
            printf("MISMATCH: the reference says the value before the flip is %.9g\n", ref_old);
            failures++;
            continue;
        }
        if ((float)ref_new != new_v && !(isnan(ref_new) && isnan(new_v))) {
            printf("MISMATCH: the reference says the flipped value is %.9g\n", ref_new);
            failures++;
            continue;
        }
        if (bf_evaluator_run(ev, &flip, 1, &r, &err) != BF_OK) { printf("MISMATCH: run failed: %s\n", err.msg); failures++; continue; }
        if (r.n_ragged) {
            if (!nms_cuts(nt, r.ragged, r.n_ragged, json_object_get(f, "outputs"), n_ref, score, &fault_cuts[k]))
                { printf("out of memory\n"); failures++; continue; }
            conf_ties tc = fault_tc;
            tc.cut = fault_cuts[k];
            tc.scale = json_object_get(f, "scale");
            c = compare_ragged(r.ragged, r.n_ragged, json_object_get(f, "outputs"), n_ref, &rows_bad, &out_bad, &tc);
            print_cmp_ragged(&c, rows_bad, out_bad, r.ragged, r.n_ragged, &tc);
            nv += only_unverified(&c);
        } else {
            c = compare(r.outputs, cols, json_object_get(f, "outputs"), n_ref, plane);
            print_cmp(&c, cols);
        }
        if (!dump_floats(dump, r.outputs, n * cols) || !dump_ragged(dump, &r)) { printf("cannot write --dump\n"); failures++; }
        printf("\n");
        failures += c.bad > 0 || c.format_error;
        if (lm) failures += check_lm_metrics(&r, f, "perplexity", "token_accuracy", "       ");
        failures += check_vision_metrics(&r, f, "", "       ", fault_cuts ? fault_cuts[k] : NULL);
    }
    int imaj = 0;
    failures += check_campaign_path(m, ds, path, data_path, faults, n_ref, cols, plane, bf_evaluator_batch(ev), lm, r.n_ragged > 0,
                                    &fault_tc, fault_cuts, dump, &nv, 1, &imaj);
    /* a one-image graph's trials ran image-major there (bitflip run's order
     * from 2 threads): trial-major (its order at 1 thread) checked too */
    if (imaj)
        failures += check_campaign_path(m, ds, path, data_path, faults, n_ref, cols, plane, bf_evaluator_batch(ev), lm,
                                        r.n_ragged > 0, &fault_tc, fault_cuts, NULL, &nv, 0, NULL);
    printf("  %s: %s\n", name, failures ? "FAILED" : nv ? "NOT VERIFIED (no value differs; too many could not be checked)"
                                                       : "all match");
    if (!failures && nv) *not_verified = 1;
out:
    for (size_t i = 0; fault_cuts && i < json_array_size(json_object_get(ref, "faults")); i++)
        nms_cuts_free(fault_cuts[i], n_cut_ref);
    free(fault_cuts);
    nms_cuts_free(cut, n_cut_golden);
    free(golden);
    bf_evaluator_free(ev);
    bf_nms_ties_free(nt);
    bf_dataset_free(ds);
    bf_model_free(m);
    json_decref(ref);
    return failures;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Whether name is one of the comma-separated names of list. */
static int in_list(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && !strncmp(p, name, n)) return 1;
        p += n + (end != NULL);
    }
    return 0;
}

/* The first name of list that names no model of names[0..n), or NULL; it
 * is copied into buf. */
static const char *missing_name(const char *list, char **names, size_t n, char *buf, size_t cap)
{
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        snprintf(buf, cap, "%.*s", (int)len, p);
        int found = 0;
        for (size_t i = 0; i < n && !found; i++) found = !strcmp(names[i], buf);
        if (!found && len) return buf;
        p += len + (end != NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    /* 0: the whole eval set as one batch, as the references are made. Bit
     * identity under faults depends on batching (BLAS picks kernels by matrix
     * size), and faults with huge values turn last-bit differences into
     * visible ones; --batch N checks other batchings. */
    int64_t batch = 0;
    const char *dir = NULL, *only = NULL, *dump_path = NULL;
    int no_fuse = 0, tie_order = BF_TIE_ORDER_PYTORCH;
    conf_limits lim_v = {CONF_MAX_WIDEN, CONF_MAX_UNVERIFIABLE};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--no-fuse")) no_fuse = 1;
        else if (!strcmp(argv[i], "--tie-order") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "pytorch")) tie_order = BF_TIE_ORDER_PYTORCH;
            else if (!strcmp(v, "onnx")) tie_order = BF_TIE_ORDER_ONNX;
            else {
                fprintf(stderr, "bitflip-conformance: --tie-order must be pytorch or onnx, got '%s'\n", v);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump_path = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if ((!strcmp(argv[i], "--max-widen") || !strcmp(argv[i], "--max-unverifiable")) && i + 1 < argc) {
            char *end;
            int widen = !strcmp(argv[i], "--max-widen");
            double v = strtod(argv[++i], &end);
            if (*end || !(v >= 0) || !isfinite(v) || (!widen && v > 1)) {
                fprintf(stderr, "bitflip-conformance: %s takes %s, got '%s'\n", argv[i - 1],
                        widen ? "a factor >= 0 (0: no limit)" : "a share from 0 to 1", argv[i]);
                return 2;
            }
            *(widen ? &lim_v.max_widen : &lim_v.max_share) = v;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: bitflip-conformance [--batch N] [--only NAME,NAME] [--no-fuse] [--tie-order pytorch|onnx] [--dump FILE]\n"
                   "                           [--max-widen G] [--max-unverifiable S] DIR\n\n"
                   "Checks every DIR/NAME.ref.json against the engine.\n"
                   "--batch N: samples per batch (default: the whole eval set at once)\n"
                   "--only NAME,NAME: check only these models (each must exist in DIR)\n"
                   "--no-fuse: load each model as exported, every node run as written (no fused patterns)\n"
                   "--tie-order ORDER: which of equal values a TopK or NMS keeps: pytorch (the default: the\n"
                   "  references are PyTorch's) or onnx (the spec's, bitflip eval's default)\n"
                   "--dump FILE: write every output computed, as raw float32, to FILE (to compare runs bit for bit)\n"
                   "--max-widen G: a value whose reference scale widens its tolerance more than G times its row's is\n"
                   "  checked against its row's own tolerance alone, and outside it unverifiable: counted, neither\n"
                   "  passed nor failed (default 100; 0: no limit)\n"
                   "--max-unverifiable S: a list where more than this share of an output's values is unverifiable\n"
                   "  is NOT VERIFIED (default 0.01); exit status 3 when that is all that went wrong\n");
            return 0;
        } else dir = argv[i];
    }
    if (!dir || batch < 0) {
        fprintf(stderr, "usage: bitflip-conformance [--batch N] [--only NAME,NAME] [--no-fuse] [--tie-order pytorch|onnx] "
                        "[--dump FILE] [--max-widen G] [--max-unverifiable S] DIR\n");
        return 2;
    }
    FILE *dump = NULL;
    if (dump_path && !(dump = fopen(dump_path, "wb"))) {
        fprintf(stderr, "bitflip-conformance: cannot write --dump %s: %s\n", dump_path, strerror(errno));
        return 2;
    }

    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "bitflip-conformance: cannot open %s: %s\n", dir, strerror(errno)); return 2; }
    char **names = NULL;
    size_t n_names = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 9 && !strcmp(e->d_name + len - 9, ".ref.json")) {
            char **nn = realloc(names, (n_names + 1) * sizeof *names);
            if (!nn) break;
            names = nn;
            names[n_names] = strndup(e->d_name, len - 9);
            if (names[n_names]) n_names++;
        }
    }
    closedir(d);
    if (!n_names) { fprintf(stderr, "bitflip-conformance: no *.ref.json in %s\n", dir); free(names); return 2; }
    qsort(names, n_names, sizeof *names, cmp_str);
    char bad[256];
    if (only && missing_name(only, names, n_names, bad, sizeof bad)) {
        fprintf(stderr, "bitflip-conformance: --only names '%s', but %s has no %s.ref.json; the list takes model names "
                        "separated by commas, as in the file names NAME.ref.json\n", bad, dir, bad);
        for (size_t i = 0; i < n_names; i++) free(names[i]);
        free(names);
        return 2;
    }

    int failed_models = 0, broken = 0, unverified = 0;
    size_t skipped = 0;
    for (size_t i = 0; i < n_names; i++) {
        if (only && !in_list(only, names[i])) {
            skipped++;
            free(names[i]);
            continue;
        }
        int nv = 0, f = check_model(dir, names[i], batch, no_fuse, tie_order, dump, &lim_v, &nv);
        if (f < 0) broken++;
        else if (f > 0) failed_models++;
        else unverified += nv;
        free(names[i]);
    }
    free(names);
    if (dump && fclose(dump) != 0) {
        fprintf(stderr, "bitflip-conformance: cannot write --dump %s: %s\n", dump_path, strerror(errno));
        broken++;
    }
    printf("\n%zu models: %zu passed, %d failed, %d could not run", n_names - skipped,
           n_names - skipped - (size_t)failed_models - (size_t)broken - (size_t)unverified, failed_models, broken);
    if (unverified) printf(", %d not verified (too many values unverifiable)", unverified);
    if (skipped) printf(" (%zu more in %s not selected by --only)", skipped, dir);
    printf("\n");
    return failed_models || broken ? 1 : unverified ? 3 : 0;
}
