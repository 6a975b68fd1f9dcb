/* bitflip eval: golden metrics of a model over an eval set, its speed, and
 * the effect of single-bit faults in its parameters. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "campaign_cli.h"
#include "cli.h"
#include "faults_cli.h"

static const char help[] =
    "usage: bitflip eval [OPTIONS] MODEL.onnx DATA.safetensors\n"
    "\n"
    "Runs the model over the eval set (one tensor per graph input, named like the\n"
    "input, plus 'labels') and prints the golden metrics: accuracy for integer class\n"
    "labels, AUC-ROC and log loss for 0/1 float labels; and samples per second.\n"
    "Integer labels [N, T] against logits [N, T, V] (a language model: the next\n"
    "token at each position, -100 where there is none) give perplexity (exp of\n"
    "the mean cross-entropy over the labelled positions) and token accuracy; with\n"
    "'mc_item' and 'mc_answer' [N] (one row per choice of a multiple-choice item,\n"
    "labels only on the choice's continuation) also choice accuracy, the share of\n"
    "items whose most likely choice is the right one (docs/GUIDE.md).\n"
    "Integer labels [N, H, W] against logits [N, C, H, W] (a segmenter; 255 marks\n"
    "an ignored pixel) give mIoU (from the confusion matrix of the whole eval set)\n"
    "and pixel accuracy; a fault's changed predictions are then pixels.\n"
    "Each --flip (or --random-flips) is then evaluated as its own pass: the bit is\n"
    "flipped in the fp32 parameter for the whole pass and restored afterwards.\n"
    "\n"
    "  --batch N          samples per batch (default 256, or an even split of a\n"
    "                     smaller eval set across threads)\n"
    "  --threads N        worker threads, one plan each (default 1)\n"
    "  --repeat N         time N passes and report the fastest (default 1)\n"
    "  --flip P:I:B       flip bit B (0 = LSB, 31 = sign) of element I (flat,\n"
    "                     row-major) of parameter P (its ONNX name, or the PyTorch\n"
    "                     name 'bitflip info' shows); repeatable\n"
    "  --random-flips N   N single-bit faults drawn uniformly over all parameter bits\n"
    "  --seed S           seed for --random-flips (default 1)\n"
    "  --outputs FILE     write the golden outputs (.json: JSON rows; otherwise CSV); a graph that takes\n"
    "                     one image per call (a detector): every output per image, by name\n"
    "  --json             machine-readable output\n"
    CLI_PROGRESS_HELP
    CLI_LIMITS_HELP
    CLI_RUN_MEMORY_HELP
    "\n"
    "example:\n"
    "  bitflip eval model.onnx eval.safetensors --flip fc1.weight:12:30\n"
    "  bitflip eval tiny_lm.onnx lm_eval.safetensors --json   # perplexity, token_accuracy\n";

typedef struct opts {
    const char *model_path, *data_path, *outputs_path;
    long long batch, threads, repeat, random_flips, seed;
    int json, progress;
    double progress_interval;
    cli_limits lim;
    const char **flip_specs;
    size_t n_flip_specs;
} opts;

/* "name:index:bit"; the name may itself contain ':' (onnx::MatMul_12), so the
 * numbers are read from the right. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A fault uniform over every bit of every parameter. */
static bf_bitflip random_flip(const bf_model *m, uint64_t *state)
{
    uint64_t total = (uint64_t)bf_model_param_elements(m);
    uint64_t e = splitmix64(state) % total;
    size_t p = 0;
    while (e >= (uint64_t)bf_tensor_numel(bf_model_param(m, p)->tensor)) {
        e -= (uint64_t)bf_tensor_numel(bf_model_param(m, p)->tensor);
        p++;
    }
    int bits = bf_model_param(m, p)->dtype == BF_F32 ? 32 : 8;   /* a quantized model's stored bytes: 8 */
    return (bf_bitflip){.param = p, .index = (int64_t)e, .bit = (int)(splitmix64(state) % (uint64_t)bits)};
}

static void put_num(FILE *f, int json, const char *sep, float v)
{
    if (json && !isfinite(v)) fprintf(f, "%s\"%s\"", sep, isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    else fprintf(f, "%s%.9g", sep, v);
}

/* A one-sample graph's outputs, whose sizes may be data (a detector's K
 * boxes per image). JSON: a list with an object per sample, each output by
 * name as a list of rows (a flat list when rows are single numbers), the
 * conformance format's `golden` (tests/fixtures/README.md). CSV: a line per
 * row, `sample,output,row,values...`. */
static void write_ragged(FILE *f, int json, const bf_eval_result *r)
{
    if (json) fputs("[\n", f);
    else fputs("sample,output,row,values\n", f);
    for (int64_t i = 0; i < r->samples; i++) {
        if (json) fputs("  {", f);
        for (size_t k = 0; k < r->n_ragged; k++) {
            const bf_ragged_output *o = &r->ragged[k];
            int64_t w = o->row_elems, a = o->offsets[i], rows = (o->offsets[i + 1] - a) / w;
            if (json) fprintf(f, "%s\"%s\": [", k ? ", " : "", o->name);
            for (int64_t q = 0; q < rows; q++) {
                const float *row = o->data + a + q * w;
                if (json) fputs(q ? (w > 1 ? ", [" : ", ") : (w > 1 ? "[" : ""), f);
                else fprintf(f, "%lld,%s,%lld", (long long)i, o->name, (long long)q);
                for (int64_t j = 0; j < w; j++) put_num(f, json, json ? (j ? ", " : "") : ",", row[j]);
                if (json) fputs(w > 1 ? "]" : "", f);
                else fputc('\n', f);
            }
            if (json) fputc(']', f);
        }
        if (json) fprintf(f, "}%s\n", i + 1 < r->samples ? "," : "");
    }
    if (json) fputs("]\n", f);
}

static int write_outputs(const char *path, const bf_eval_result *r)
{
    /* made in memory (the outputs are there already), then published whole */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) { fprintf(stderr, "bitflip eval: out of memory writing %s\n", path); return EXIT_INFRA; }
    int json = strlen(path) > 5 && !strcmp(path + strlen(path) - 5, ".json");
    if (r->n_ragged) write_ragged(f, json, r);
    if (json && !r->n_ragged) fputs("[\n", f);
    for (int64_t i = 0; i < r->samples && !r->n_ragged; i++) {
        const float *row = r->outputs + i * r->out_cols;
        if (json) fputs(r->out_cols > 1 ? "  [" : "  ", f);
        for (int64_t j = 0; j < r->out_cols; j++) put_num(f, json, j ? (json ? ", " : ",") : "", row[j]);
        if (json) fprintf(f, "%s%s\n", r->out_cols > 1 ? "]" : "", i + 1 < r->samples ? "," : "");
        else fputc('\n', f);
    }
    if (json && !r->n_ragged) fputs("]\n", f);
    if (fclose(f) != 0) {
        free(buf);
        fprintf(stderr, "bitflip eval: out of memory writing %s\n", path);
        return EXIT_INFRA;
    }
    int rc = write_bytes_atomic("eval", path, buf, len);
    free(buf);
    return rc ? EXIT_INFRA : EXIT_OK;
}

/* Samples whose top-1 class (or 0.5-threshold decision) differs from golden. */
/* Samples whose prediction changed; a language model's positions (every
 * one, labelled or not: `vocab` logits each) whose arg-max did; a
 * segmenter's pixels (`vocab` classes each) whose arg-max did. */
static int64_t changed_predictions(const bf_eval_result *golden, const float *gold_out, const bf_eval_result *r, int64_t vocab)
{
    int64_t n = 0;
    if (r->task == BF_TASK_SEGMENTATION && vocab > 0)   /* vocab: the classes; the pixels whose arg-max moved */
        return bf_metric_seg_changed(gold_out, r->outputs, r->samples, vocab, r->out_cols / vocab);
    if (r->task == BF_TASK_LANGUAGE_MODEL && vocab > 0)
        return bf_argmax_changed(gold_out, r->outputs, r->samples * r->out_cols / vocab, vocab);
    if (r->out_cols > 1) return bf_argmax_changed(gold_out, r->outputs, r->samples, r->out_cols);
    for (int64_t i = 0; i < r->samples; i++) {
        const float *a = gold_out + i * r->out_cols, *b = r->outputs + i * r->out_cols;
        n += (a[0] > 0.5f) != (b[0] > 0.5f) || (isnan(a[0]) != isnan(b[0]));
    }
    (void)golden;
    return n;
}

/* A one-sample graph's golden outputs, kept for the faults' passes (the
 * evaluator's are overwritten by the next one): per output, the offsets
 * and data of bf_ragged_output, end to end. */
typedef struct kept_ragged {
    size_t n;
    int64_t samples;
    int64_t *off;   /* n x (samples + 1) */
    float *data;
    int64_t *at;    /* n: where output k's data starts */
} kept_ragged;

static int keep_ragged(kept_ragged *k, const bf_eval_result *r)
{
    size_t total = 0;
    k->n = r->n_ragged;
    k->samples = r->samples;
    for (size_t i = 0; i < r->n_ragged; i++) total += (size_t)r->ragged[i].offsets[r->samples];
    k->off = malloc((r->n_ragged * (size_t)(r->samples + 1) + 1) * sizeof *k->off);
    k->data = malloc((total + 1) * sizeof *k->data);
    k->at = malloc((r->n_ragged + 1) * sizeof *k->at);
    if (!k->off || !k->data || !k->at) return 0;
    for (size_t i = 0, at = 0; i < r->n_ragged; i++) {
        const bf_ragged_output *o = &r->ragged[i];
        memcpy(k->off + i * (size_t)(r->samples + 1), o->offsets, (size_t)(r->samples + 1) * sizeof *k->off);
        memcpy(k->data + at, o->data, (size_t)o->offsets[r->samples] * sizeof *k->data);
        k->at[i] = (int64_t)at;
        at += (size_t)o->offsets[r->samples];
    }
    return 1;
}

static void free_kept(kept_ragged *k)
{
    free(k->off);
    free(k->data);
    free(k->at);
}

/* Samples some output of which differs from golden's (a detector: the
 * images whose detections moved), and the NaNs and infinities in r. */
static int64_t ragged_changed(const kept_ragged *k, const bf_eval_result *r, int64_t *nonfinite)
{
    int64_t n = 0;
    *nonfinite = 0;
    for (int64_t s = 0; s < r->samples; s++) {
        int diff = 0;
        for (size_t i = 0; i < r->n_ragged; i++) {
            const bf_ragged_output *o = &r->ragged[i];
            const int64_t *go = k->off + i * (size_t)(k->samples + 1);
            int64_t a = o->offsets[s], len = o->offsets[s + 1] - a;
            for (int64_t j = 0; j < len; j++) *nonfinite += !isfinite(o->data[a + j]);
            diff |= len != go[s + 1] - go[s] ||
                    (len && memcmp(o->data + a, k->data + k->at[i] + go[s], (size_t)len * sizeof(float)) != 0);
        }
        n += diff;
    }
    return n;
}

/* Progress through --progress: on a bar, passes long enough to wait on
 * (half a second in); on plain, a line per interval across all passes. */
typedef struct progress {
    cli_progress out;
    double pass_start;
    char what[48];   /* "golden pass", "fault 3/100" */
} progress;

static void on_progress(void *user, int64_t done, int64_t total)
{
    progress *p = user;
    double t = cli_now();
    if (p->out.mode == CLI_PROGRESS_BAR && t - p->pass_start < 0.5) return;
    /* a pass's end is final on a bar only: a log need not get one line per --flip */
    if (!cli_progress_due(&p->out, done >= total && p->out.mode == CLI_PROGRESS_BAR)) return;
    cli_progress_print(&p->out, "eval %s: %lld/%lld samples (%.0f%%), %.0f samples/s", p->what, (long long)done,
                       (long long)total, 100.0 * (double)done / (double)total,
                       t > p->pass_start ? (double)done / (t - p->pass_start) : 0.0);
}

static void progress_start(progress *p, const char *fmt, long long a, long long b)
{
    snprintf(p->what, sizeof p->what, fmt, a, b);
    p->pass_start = cli_now();
}
static void progress_end(progress *p) { cli_progress_clear(&p->out); }

static const char *metric_name(bf_task t)
{
    return t == BF_TASK_BINARY ? "auc" : t == BF_TASK_LANGUAGE_MODEL ? "perplexity" : t == BF_TASK_SEGMENTATION ? "miou"
         : t == BF_TASK_DETECTION ? "map" : "accuracy";
}
static double metric_value(const bf_eval_result *r)
{
    return r->task == BF_TASK_BINARY ? r->auc : r->task == BF_TASK_LANGUAGE_MODEL ? r->perplexity
         : r->task == BF_TASK_SEGMENTATION ? r->miou : r->task == BF_TASK_DETECTION ? r->map : r->accuracy;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static int parse_args(int argc, char **argv, opts *o)
{
    enum { OPT_JSON = CLI_OPT_FIRST, OPT_BATCH, OPT_THREADS, OPT_REPEAT, OPT_RANDOM_FLIPS, OPT_SEED, OPT_OUTPUTS, OPT_FLIP,
           OPT_PROGRESS, OPT_PROGRESS_INTERVAL };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"json", no_argument, NULL, OPT_JSON},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"repeat", required_argument, NULL, OPT_REPEAT},
        {"random-flips", required_argument, NULL, OPT_RANDOM_FLIPS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"outputs", required_argument, NULL, OPT_OUTPUTS},
        {"flip", required_argument, NULL, OPT_FLIP},
        {"progress", required_argument, NULL, OPT_PROGRESS},
        {"progress-interval", required_argument, NULL, OPT_PROGRESS_INTERVAL},
        CLI_LIMITS_OPTIONS, CLI_OPTION_RUN_MEMORY,
        {NULL, 0, NULL, 0}};
    cli_parser p;
    const char *v;
    int c, rc = 0;
    cli_parser_init(&p, "eval", argc, argv, "h", longopts);
    while ((c = cli_parser_next(&p, &v)) != CLI_END) {
        switch (c) {
        case 'h': fputs(help, stdout); return -1;
        case OPT_JSON: o->json = 1; break;
        case OPT_BATCH: rc = parse_count("eval", "--batch", v, 1, 1 << 24, &o->batch); break;
        case OPT_THREADS: rc = parse_count("eval", "--threads", v, 1, 64, &o->threads); break;
        case OPT_REPEAT: rc = parse_count("eval", "--repeat", v, 1, 1000000, &o->repeat); break;
        case OPT_RANDOM_FLIPS: rc = parse_count("eval", "--random-flips", v, 0, 1000000, &o->random_flips); break;
        case OPT_SEED: rc = parse_count("eval", "--seed", v, 0, INT64_MAX, &o->seed); break;
        case OPT_OUTPUTS: o->outputs_path = v; break;
        case OPT_FLIP: o->flip_specs[o->n_flip_specs++] = v; break;
        case OPT_PROGRESS: rc = cli_progress_parse("eval", v, &o->progress); break;
        case OPT_PROGRESS_INTERVAL: rc = cli_progress_interval("eval", v, &o->progress_interval); break;
        case CLI_ARG:
            if (!o->model_path) o->model_path = v;
            else if (!o->data_path) o->data_path = v;
            else return usage_error("eval", "unexpected argument '%s'", v);
            break;
        case CLI_BAD: return EXIT_USAGE;
        default:
            if (!cli_limit_option("eval", c, v, &o->lim, &rc)) return EXIT_USAGE;
        }
        if (rc) return rc;
    }
    if (!o->model_path || !o->data_path)
        return usage_error("eval", "needs a model and an eval set: bitflip eval MODEL.onnx DATA.safetensors");
    return 0;
}

/* The golden pass's summary: printed, or (--json) the document's top
 * level, returned (NULL only when out of memory). */
static json_t *report_golden(const opts *o, const bf_model *m, const bf_eval_result *golden, double best, bf_evaluator *ev)
{
    bf_task task = golden->task;
    json_t *root = NULL;
    double sps = (double)golden->samples / best;
    if (o->json) {
        if (!(root = json_object())) return NULL;
        json_object_set_new(root, "model", json_string(o->model_path));
        json_object_set_new(root, "dataset", json_string(o->data_path));
        json_object_set_new(root, "samples", json_integer(golden->samples));
        json_object_set_new(root, "task", json_string(bf_task_name(task)));
        if (task == BF_TASK_CLASSIFICATION) json_object_set_new(root, "accuracy", num(golden->accuracy));
        if (task == BF_TASK_BINARY) {
            json_object_set_new(root, "auc", num(golden->auc));
            json_object_set_new(root, "logloss", num(golden->logloss));
        }
        if (task == BF_TASK_LANGUAGE_MODEL) {
            json_object_set_new(root, "perplexity", num(golden->perplexity));
            json_object_set_new(root, "token_accuracy", num(golden->token_accuracy));
            if (!isnan(golden->choice_accuracy)) json_object_set_new(root, "choice_accuracy", num(golden->choice_accuracy));
        }
        if (task == BF_TASK_SEGMENTATION) {
            json_object_set_new(root, "miou", num(golden->miou));
            json_object_set_new(root, "pixel_accuracy", num(golden->pixel_accuracy));
        }
        if (task == BF_TASK_DETECTION) {
            json_object_set_new(root, "map", num(golden->map));
            json_object_set_new(root, "map50", num(golden->map50));
            json_object_set_new(root, "recall", num(golden->recall));
        }
        json_object_set_new(root, "batch", json_integer(bf_evaluator_batch(ev)));
        json_object_set_new(root, "threads", json_integer(o->threads));
        json_object_set_new(root, "seconds", json_real(best));
        json_object_set_new(root, "samples_per_s", json_real(sps));
        json_object_set_new(root, "fused_activations", json_integer((json_int_t)bf_evaluator_num_fused(ev)));
        json_object_set_new(root, "batch_statistics", json_integer((json_int_t)bf_model_batch_statistics(m)));
        /* --tie-order, where a TopK or NonMaxSuppression makes it matter */
        if (bf_model_tie_order(m)) json_object_set_new(root, "tie_order", json_string(bf_model_tie_order(m)));
    } else {
        printf("model    %s\neval set %s: %lld samples, task %s\n", o->model_path, o->data_path, (long long)golden->samples, bf_task_name(task));
        if (task == BF_TASK_CLASSIFICATION) printf("golden   accuracy %.4f\n", golden->accuracy);
        else if (task == BF_TASK_BINARY) printf("golden   auc %.4f   logloss %.4f\n", golden->auc, golden->logloss);
        else if (task == BF_TASK_LANGUAGE_MODEL) {
            printf("golden   perplexity %.4f   token_accuracy %.4f", golden->perplexity, golden->token_accuracy);
            if (!isnan(golden->choice_accuracy)) printf("   choice_accuracy %.4f", golden->choice_accuracy);
            fputc('\n', stdout);
        } else if (task == BF_TASK_SEGMENTATION) {
            printf("golden   miou %.4f   pixel_accuracy %.4f\n", golden->miou, golden->pixel_accuracy);
        } else if (task == BF_TASK_DETECTION) {
            printf("golden   map %.4f   map50 %.4f   recall %.4f\n", golden->map, golden->map50, golden->recall);
        }
        printf("speed    %.0f samples/s  (%.3f ms per pass, batch %lld, %lld thread%s%s)\n", sps, best * 1e3,
               (long long)bf_evaluator_batch(ev), o->threads, o->threads == 1 ? "" : "s",
               o->repeat > 1 ? ", best of repeats" : "");
        size_t fused = bf_evaluator_num_fused(ev);
        if (fused) printf("fused    %zu activations (Relu, Clip, HardSwish; residual Adds, BatchNorms) run in their Conv's or Gemm's epilogue, or bias Adds, Gelu and Softmax in their MatMul's\n", fused);
        size_t bs = bf_model_batch_statistics(m);
        if (bs)
            printf("batch    %zu BatchNormalization%s in training mode: each batch normalised with its own "
                   "statistics, so results depend on --batch and on which samples share a batch (as in PyTorch "
                   "with the same batches)\n", bs, bs == 1 ? "" : "s");
    }
    return root;
}

/* The stored value a flip changes, before and after, as a float. */
static void flip_values(const bf_param_info *p, const bf_bitflip *f, float *old_v, float *new_v)
{
    if (p->dtype == BF_I8) {   /* a quantized model's stored integer */
        int8_t q = ((const int8_t *)p->tensor->data)[f->index];
        *old_v = q, *new_v = (int8_t)(uint8_t)((uint8_t)q ^ (1u << f->bit));
    } else if (p->dtype == BF_U8) {
        uint8_t q = ((const uint8_t *)p->tensor->data)[f->index];
        *old_v = q, *new_v = (uint8_t)(q ^ (1u << f->bit));
    } else {
        *old_v = ((const float *)p->tensor->data)[f->index];
        *new_v = bf_flip_f32(*old_v, f->bit);
    }
}

/* One --flip's line, or (jfaults not NULL) its entry of the JSON list. */
static void report_fault(const bf_param_info *p, const bf_bitflip *fl, float old_v, float new_v, const bf_eval_result *golden,
                         const bf_eval_result *r, int64_t changed, int64_t nonfinite, json_t *jfaults)
{
    bf_task task = golden->task;
    if (jfaults) {
        json_t *f = json_pack("{s:s, s:I, s:i, s:o, s:o, s:I, s:I}", "param", p->tensor->name, "index", (json_int_t)fl->index,
                              "bit", fl->bit, "old", num(old_v), "new", num(new_v), "changed_predictions", (json_int_t)changed,
                              "nonfinite_outputs", (json_int_t)nonfinite);
        if (task != BF_TASK_NONE) json_object_set_new(f, metric_name(task), num(metric_value(r)));
        if (p->torch_name) json_object_set_new(f, "torch_name", json_string(p->torch_name));
        json_array_append_new(jfaults, f);
        return;
    }
    char where[160];
    snprintf(where, sizeof where, "%s[%lld] bit %d", p->tensor->name, (long long)fl->index, fl->bit);
    printf("  %-36s %13.7g -> %-13.7g", where, old_v, new_v);
    if (task != BF_TASK_NONE) printf("  %s %.4f (%+.4f)", metric_name(task), metric_value(r), metric_value(r) - metric_value(golden));
    printf("  %lld changed%s", (long long)changed, nonfinite ? "  NaN/Inf in outputs" : "");
    if (p->torch_name && strcmp(p->torch_name, p->tensor->name) != 0) printf("  (%s)", p->torch_name);
    fputc('\n', stdout);
}

/* Whether the model's large tensors go in huge pages (bf_load_limits.
 * huge_pages): when the eval reads at least this many samples in all, over
 * its passes. On the benchmark VM a huge page's first touch made loading
 * the Criteo-shaped DLRM (647 MiB of tables) about 1.2 s (0.3-1.3 s) slower
 * in system time, and saved 1-6% of the CPU of its pass over 16,384 samples
 * (0.001-0.008 s; docs/BENCHMARKS.md, "The huge-pages default"): they pay
 * from about 150 to 1,200 such passes, so from 4 million sample-passes. */
#define EVAL_HUGE_PAGES_SAMPLES 4000000LL

static int huge_pages_pay(int64_t samples, long long passes)
{
    return samples > 0 && passes > 0 && samples >= (EVAL_HUGE_PAGES_SAMPLES + passes - 1) / passes;
}

int cmd_eval(int argc, char **argv)
{
    opts o = {.batch = 0, .threads = 1, .repeat = 1, .seed = 1, .progress_interval = CLI_PROGRESS_INTERVAL_DEFAULT};
    cli_limits_init(&o.lim);
    int rc = EXIT_OK;
    bf_error err = {0};
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_evaluator *ev = NULL;
    bf_bitflip *flips = NULL;
    float *golden_out = NULL;
    kept_ragged gr = {0};
    json_t *root = NULL;
    size_t n_flips = 0;

    o.flip_specs = calloc((size_t)argc + 1, sizeof *o.flip_specs);
    if (!o.flip_specs) { fprintf(stderr, "bitflip eval: out of memory\n"); return EXIT_INFRA; }
    rc = parse_args(argc, argv, &o);
    if (rc) { rc = rc < 0 ? EXIT_OK : rc; goto out; }

    /* the eval set first: its size decides the weights' pages */
    if (bf_dataset_load_file_opts(o.data_path, &o.lim.data, &ds, &err) != BF_OK) { rc = report_error("eval", &err); goto out; }
    o.lim.model.huge_pages = huge_pages_pay(bf_dataset_num_samples(ds), o.repeat + (long long)o.n_flip_specs + o.random_flips);
    if (bf_model_load_file_opts(o.model_path, &o.lim.model, &m, &err) != BF_OK) { rc = report_error("eval", &err); goto out; }
    if (bf_model_bind_dims(&m, ds, &err) != BF_OK) { rc = report_error("eval", &err); goto out; }
    flips = calloc(o.n_flip_specs + (size_t)o.random_flips + 1, sizeof *flips);
    if (!flips) { fprintf(stderr, "bitflip eval: out of memory\n"); rc = EXIT_INFRA; goto out; }
    for (size_t i = 0; i < o.n_flip_specs; i++)
        if ((rc = cli_parse_flip("eval", m, o.flip_specs[i], &flips[n_flips++])) != 0) goto out;
    if (o.random_flips && bf_model_num_params(m) == 0) { rc = usage_error("eval", "--random-flips: the model has no parameters"); goto out; }
    uint64_t rng = (uint64_t)o.seed;
    for (long long i = 0; i < o.random_flips; i++) flips[n_flips++] = random_flip(m, &rng);

    progress prog = {0};
    cli_progress_start(&prog.out, "eval", o.progress, o.progress_interval);
    /* whole passes only, reading nothing but the outputs */
    bf_eval_opts eo = {.batch = o.batch, .threads = (int)o.threads, .share_buffers = 1, .fuse_activations = 1,
                       .max_run_bytes = (uint64_t)o.lim.run_memory};
    if (prog.out.mode != CLI_PROGRESS_NONE) {
        eo.progress = on_progress;
        eo.progress_user = &prog;
    }
    bf_job_budget jb;
    if (bf_eval_estimate(m, ds, &eo, &jb, &err) != BF_OK) {
        bf_error_prefix(&err, "%s with %s", o.model_path, o.data_path);
        rc = report_error("eval", &err);
        goto out;
    }
    if ((rc = check_job_memory("eval", "evaluation", &jb, o.lim.job_memory)) != 0) goto out;
    if (bf_evaluator_create(m, ds, &eo, &ev, &err) != BF_OK) {
        bf_error_prefix(&err, "%s with %s", o.model_path, o.data_path);
        rc = report_error("eval", &err);
        goto out;
    }

    bf_eval_result golden, r;
    double best = INFINITY;
    for (long long k = 0; k < o.repeat; k++) {
        progress_start(&prog, "golden pass", 0, 0);
        bf_status st = bf_evaluator_run(ev, NULL, 0, &golden, &err);
        progress_end(&prog);
        if (st != BF_OK) { rc = report_error("eval", &err); goto out; }
        if (golden.seconds < best) best = golden.seconds;
    }
    golden.seconds = best;
    bf_task task = golden.task;
    golden_out = malloc((size_t)(golden.samples * golden.out_cols + 1) * sizeof(float));
    if (!golden_out) { fprintf(stderr, "bitflip eval: out of memory\n"); rc = EXIT_INFRA; goto out; }
    memcpy(golden_out, golden.outputs, (size_t)(golden.samples * golden.out_cols) * sizeof(float));
    if (golden.n_ragged && !keep_ragged(&gr, &golden)) { fprintf(stderr, "bitflip eval: out of memory\n"); rc = EXIT_INFRA; goto out; }
    if (o.outputs_path && (rc = write_outputs(o.outputs_path, &golden)) != EXIT_OK) goto out;

    root = report_golden(&o, m, &golden, best, ev);
    if (o.json && !root) { fprintf(stderr, "bitflip eval: out of memory\n"); rc = EXIT_INFRA; goto out; }

    json_t *jfaults = o.json && n_flips ? json_array() : NULL;
    if (n_flips && !o.json)
        printf("\nsingle-bit faults (each its own pass; %s vs golden, %s changed)\n", task == BF_TASK_NONE ? "outputs" : metric_name(task),
               golden.n_ragged ? "samples whose outputs" : "predictions");
    for (size_t i = 0; i < n_flips; i++) {
        const bf_param_info *p = bf_model_param(m, flips[i].param);
        float old_v, new_v;
        flip_values(p, &flips[i], &old_v, &new_v);
        progress_start(&prog, "fault %lld/%lld", (long long)i + 1, (long long)n_flips);
        bf_status st = bf_evaluator_run(ev, &flips[i], 1, &r, &err);
        progress_end(&prog);
        if (st != BF_OK) { rc = report_error("eval", &err); json_decref(jfaults); goto out; }
        const bf_value_info *lo = bf_model_output(m, 0);
        int64_t changed = changed_predictions(&golden, golden_out, &r, lo->ndim == 3 ? lo->dims[2] : lo->ndim == 4 ? lo->dims[1] : 0);
        int64_t nonfinite = 0;
        /* a one-sample graph: the samples whose outputs moved at all (a
         * detector's images whose detections did) */
        if (r.n_ragged) changed = ragged_changed(&gr, &r, &nonfinite);
        else
            for (int64_t k = 0; k < r.samples * r.out_cols; k++) nonfinite += !isfinite(r.outputs[k]);
        report_fault(p, &flips[i], old_v, new_v, &golden, &r, changed, nonfinite, jfaults);
    }
    if (o.json) {
        if (jfaults) json_object_set_new(root, "faults", jfaults);
        json_dumpf(root, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    }
out:
    json_decref(root);
    free(golden_out);
    free_kept(&gr);
    free(flips);
    free(o.flip_specs);
    bf_evaluator_free(ev);
    bf_dataset_free(ds);
    bf_model_free(m);
    return rc;
}
