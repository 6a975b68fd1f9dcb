/* Campaign specs: valid specs give the right struct (defaults included), every
 * problem of an invalid one is reported at its JSON Pointer, and no input --
 * truncated, mangled, deep or huge -- does more than return problems.
 *
 * `test_spec --check FILE...` validates files instead of running the tests
 * (tests/api/check_schema.py compares its verdicts with the JSON Schema's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/api/spec.h"
#include "bitflip/spec_rules.h"

/* -------------------------------------------------------------- helpers */

typedef struct parsed {
    bf_status st;
    bf_campaign_spec spec;
    bf_spec_problems pr;
} parsed;

static parsed *parse(const char *json)
{
    parsed *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->st = bf_spec_parse(json, strlen(json), &p->spec, &p->pr);
    return p;
}

static void done(parsed *p)
{
    bf_campaign_spec_free(&p->spec);
    bf_spec_problems_free(&p->pr);
    free(p);
}

static void dump(const parsed *p)
{
    for (size_t i = 0; i < p->pr.count; i++)
        print_message("  %s: %s\n", p->pr.items[i].pointer, p->pr.items[i].message);
}

/* The spec parses cleanly. */
static parsed *ok(const char *json)
{
    parsed *p = parse(json);
    if (p->st != BF_OK || p->pr.count != 0) {
        dump(p);
        fail_msg("expected a valid spec: %s", json);
    }
    return p;
}

/* The message at `pointer` (which must be reported exactly once). */
static const char *msg_at(const parsed *p, const char *pointer)
{
    const char *m = NULL;
    for (size_t i = 0; i < p->pr.count; i++) {
        if (strcmp(p->pr.items[i].pointer, pointer) != 0) continue;
        if (m) {
            dump(p);
            fail_msg("%s reported twice", pointer);
        }
        m = p->pr.items[i].message;
    }
    if (!m) {
        dump(p);
        fail_msg("no problem reported at '%s'", pointer);
    }
    return m;
}

#define assert_problem(p, pointer, text) assert_string_equal(msg_at((p), (pointer)), (text))
#define assert_problem_has(p, pointer, part) has_((p), (pointer), (part))
static void has_(const parsed *p, const char *pointer, const char *part)
{
    const char *m = msg_at(p, pointer);
    if (!strstr(m, part)) fail_msg("%s: '%s' does not contain '%s'", pointer, m, part);
}

/* Exactly one problem, at `pointer`, containing `part`. */
static void only_problem(const char *json, const char *pointer, const char *part)
{
    parsed *p = parse(json);
    assert_int_equal(p->st, BF_EINVAL);
    if (p->pr.count != 1) {
        dump(p);
        fail_msg("expected 1 problem (at %s), got %zu: %s", pointer, p->pr.count, json);
    }
    has_(p, pointer, part);
    assert_true(p->spec.model == NULL && p->spec.tensors == NULL);   /* zeroed on failure */
    done(p);
}

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define HEAD "\"model\": \"m.onnx\", \"dataset\": \"d.safetensors\", "
#define HEADF HEAD "\"faults\": {}, "

/* ---------------------------------------------------------- valid specs */

static void defaults(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"trials\": 10, \"faults\": {}}");
    const bf_campaign_spec *s = &p->spec;
    assert_string_equal(s->model, "m.onnx");
    assert_string_equal(s->dataset, "d.safetensors");
    assert_int_equal(s->seed, 0);
    assert_int_equal(s->trials, 10);
    assert_int_equal(s->target, BF_TARGET_WEIGHTS);
    assert_int_equal(s->n_tensors, 1);
    assert_string_equal(s->tensors[0], "*");
    assert_int_equal(s->model_kind, BF_FAULT_BITFLIP);
    assert_int_equal(s->bits, 1);
    assert_int_equal(s->n_positions, 0);
    assert_int_equal(s->burst, 0);
    assert_null(s->rates);
    assert_int_equal(s->n_rates, 0);
    assert_int_equal(s->repeats, 1);
    assert_int_equal(s->repr, BF_REPR_FP32);
    assert_int_equal(s->per_channel, 0);
    assert_int_equal(s->persistence, BF_PERSIST_PERMANENT);
    assert_int_equal(s->sampling, BF_SAMPLE_UNIFORM);
    assert_null(s->list);
    assert_int_equal(s->metrics, 0);
    assert_int_equal(s->critical_metric, -1);
    assert_true(s->stop_margin == 0);
    assert_true(s->stop_confidence == 0.95);
    assert_int_equal(s->batch, 0);
    done(p);
}

static void issue_example(void **state)
{
    (void)state;
    parsed *p = ok("{\n"
                   "  \"model\": \"path/or/id.onnx\", \"dataset\": \"path/or/id.safetensors\",\n"
                   "  \"seed\": 42, \"trials\": 2000,\n"
                   "  \"faults\": {\n"
                   "    \"target\": \"weights\",            \"tensors\": [\"*\"],\n"
                   "    \"model\": \"bitflip\", \"bits\": 1,  \"positions\": [23, 30],\n"
                   "    \"representation\": \"fp32\",       \"persistence\": \"permanent\"\n"
                   "  },\n"
                   "  \"sampling\": \"uniform\",\n"
                   "  \"metrics\": [\"accuracy\", \"top1_mismatch\", \"auc\", \"logloss\"],\n"
                   "  \"stop\": {\"margin\": 0.01, \"confidence\": 0.95}\n"
                   "}\n");
    const bf_campaign_spec *s = &p->spec;
    assert_int_equal(s->seed, 42);
    assert_int_equal(s->trials, 2000);
    assert_int_equal(s->n_positions, 2);
    assert_int_equal(s->positions[0], 23);
    assert_int_equal(s->positions[1], 30);
    assert_int_equal(s->metrics, (1u << BF_METRIC_ACCURACY) | (1u << BF_METRIC_TOP1_MISMATCH) |
                                     (1u << BF_METRIC_AUC) | (1u << BF_METRIC_LOGLOSS));
    assert_true(s->stop_margin == 0.01);
    assert_true(s->stop_confidence == 0.95);
    done(p);
}

static void every_field(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"seed\": 9007199254740993, \"trials\": 1e6, \"batch\": 256,"
                   " \"faults\": {\"target\": \"weights\", \"tensors\": [\"fc*.weight\", \"op:Gemm\","
                   " \"emb.?\"], \"model\": \"stuck_at_1\", \"bits\": 3, \"burst\": true,"
                   " \"positions\": [7, 0, 2, 1, 3], \"representation\": \"int8\", \"per_channel\": true},"
                   " \"sampling\": \"per_bit\", \"metrics\": [\"mse\", \"max_abs\", \"ne\"],"
                   " \"critical\": {\"metric\": \"accuracy\", \"delta\": 0.02},"
                   " \"stop\": {\"margin\": 0.005}}");
    const bf_campaign_spec *s = &p->spec;
    assert_int_equal(s->seed, 9007199254740993ULL);
    assert_int_equal(s->trials, 1000000);          /* 1e6: a number with no fraction */
    assert_int_equal(s->batch, 256);
    assert_int_equal(s->n_tensors, 3);
    assert_string_equal(s->tensors[1], "op:Gemm");
    assert_int_equal(s->model_kind, BF_FAULT_STUCK_AT_1);
    assert_int_equal(s->bits, 3);
    assert_int_equal(s->burst, 1);
    int want[] = {0, 1, 2, 3, 7};                  /* sorted */
    assert_int_equal(s->n_positions, 5);
    for (int i = 0; i < 5; i++) assert_int_equal(s->positions[i], want[i]);
    assert_int_equal(s->repr, BF_REPR_INT8);
    assert_int_equal(s->per_channel, 1);
    assert_int_equal(s->sampling, BF_SAMPLE_PER_BIT);
    assert_int_equal(s->metrics, (1u << BF_METRIC_MSE) | (1u << BF_METRIC_MAX_ABS) | (1u << BF_METRIC_NE));
    assert_int_equal(s->critical_metric, BF_METRIC_ACCURACY);
    assert_true(s->critical_delta == 0.02);
    assert_true(s->stop_margin == 0.005);
    assert_true(s->stop_confidence == 0.95);
    done(p);
    /* multi-bit upsets in 64-bit words: a burst past one fp16 value, a column at a rate */
    p = ok("{" HEAD "\"trials\": 5, \"faults\": {\"representation\": \"fp16\", \"burst\": \"word\", \"bits\": 40}}");
    assert_int_equal(p->spec.burst, BF_BURST_WORD);
    assert_int_equal(p->spec.bits, 40);
    assert_int_equal(p->spec.words, 0);
    done(p);
    p = ok("{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 1e-6, \"words\": 64, \"positions\": [30]}}");
    assert_int_equal(p->spec.words, 64);
    assert_int_equal(p->spec.burst, 0);
    assert_int_equal(p->spec.model_kind, BF_FAULT_BER);
    done(p);
}

/* The language_model task's metrics by name, and one as the critical metric. */
static void language_model_metrics(void **state)
{
    (void)state;
    parsed *p = ok("{" HEADF "\"trials\": 10, \"metrics\": [\"perplexity\", \"token_accuracy\", \"choice_accuracy\", \"top1_mismatch\"],"
                   " \"critical\": {\"metric\": \"perplexity\", \"delta\": 2.5}}");
    assert_int_equal(p->spec.metrics, (1u << BF_METRIC_PERPLEXITY) | (1u << BF_METRIC_TOKEN_ACCURACY) |
                                          (1u << BF_METRIC_CHOICE_ACCURACY) | (1u << BF_METRIC_TOP1_MISMATCH));
    assert_int_equal(p->spec.critical_metric, BF_METRIC_PERPLEXITY);
    assert_true(p->spec.critical_delta == 2.5);
    done(p);
}

/* Segmentation and detection metrics; critical.pixels alone or with a
 * metric, in [0, 1); metric and delta only together. */
static void vision_metrics(void **state)
{
    (void)state;
    parsed *p = ok("{" HEADF "\"trials\": 10, \"metrics\": [\"miou\", \"pixel_accuracy\", \"map\", \"map50\", \"recall\"],"
                   " \"critical\": {\"pixels\": 0.05}}");
    assert_int_equal(p->spec.metrics, (1u << BF_METRIC_MIOU) | (1u << BF_METRIC_PIXEL_ACCURACY) | (1u << BF_METRIC_MAP) |
                                          (1u << BF_METRIC_MAP50) | (1u << BF_METRIC_RECALL));
    assert_int_equal(p->spec.critical_metric, -1);
    assert_true(p->spec.critical_pixels == 0.05 && p->spec.critical_pixels_set == 1);
    done(p);
    p = ok("{" HEADF "\"trials\": 10, \"critical\": {\"metric\": \"miou\", \"delta\": 0.02, \"pixels\": 0}}");
    assert_int_equal(p->spec.critical_metric, BF_METRIC_MIOU);
    assert_true(p->spec.critical_delta == 0.02 && p->spec.critical_pixels == 0 && p->spec.critical_pixels_set == 1);
    done(p);
    p = ok("{" HEADF "\"trials\": 10}");
    assert_int_equal(p->spec.critical_pixels_set, 0);
    done(p);
    only_problem("{" HEADF "\"trials\": 10, \"critical\": {\"pixels\": 1}}", "/critical/pixels", "below 1");
    only_problem("{" HEADF "\"trials\": 10, \"critical\": {\"pixels\": -0.5}}", "/critical/pixels", "at least 0");
    only_problem("{" HEADF "\"trials\": 10, \"critical\": {\"delta\": 0.1, \"pixels\": 0.1}}", "/critical/metric", "required");
    p = ok("{" HEADF "\"trials\": 10, \"critical\": {\"score_threshold\": 0.3}}");
    assert_true(p->spec.critical_score == 0.3 && p->spec.critical_score_set == 1 && p->spec.critical_metric == -1);
    done(p);
}

/* Quantized models: their zero points as sites, for weights only. */
static void zero_points(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"trials\": 5, \"faults\": {\"zero_points\": true}}");
    assert_int_equal(p->spec.zero_points, 1);
    done(p);
    p = ok("{" HEAD "\"trials\": 5, \"faults\": {}}");
    assert_int_equal(p->spec.zero_points, 0);
    done(p);
    only_problem("{" HEAD "\"trials\": 5, \"faults\": {\"target\": \"activations\", \"zero_points\": true}}", "/faults/zero_points",
                 "only to target 'weights'");
    only_problem("{" HEAD "\"trials\": 5, \"faults\": {\"zero_points\": 1}}", "/faults/zero_points", "must be a boolean");
}

static void ber_sweep(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"faults\": {\"model\": \"ber\", \"tensors\": [\"emb.*\"],"
                   " \"rates\": [1e-9, 1e-6, 0.001, 1], \"repeats\": 10, \"representation\": \"bf16\","
                   " \"positions\": [14, 13]}, \"metrics\": [\"auc\"]}");
    const bf_campaign_spec *s = &p->spec;
    assert_int_equal(s->model_kind, BF_FAULT_BER);
    assert_int_equal(s->n_rates, 4);
    assert_true(s->rates[0] == 1e-9 && s->rates[1] == 1e-6 && s->rates[2] == 1e-3 && s->rates[3] == 1);
    assert_int_equal(s->repeats, 10);
    assert_int_equal(s->trials, 40);               /* rates x repeats */
    assert_int_equal(s->repr, BF_REPR_BF16);
    assert_int_equal(s->n_positions, 2);
    assert_int_equal(s->positions[0], 13);
    done(p);

    p = ok("{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 1e-4, \"target\": \"activations\","
           " \"persistence\": \"transient\"}}");
    assert_int_equal(p->spec.n_rates, 1);
    assert_true(p->spec.rates[0] == 1e-4);
    assert_int_equal(p->spec.repeats, 1);
    assert_int_equal(p->spec.trials, 1);
    assert_int_equal(p->spec.target, BF_TARGET_ACTIVATIONS);
    assert_int_equal(p->spec.persistence, BF_PERSIST_TRANSIENT);
    done(p);
}

/* Stutz et al.'s fixed point and profiled maps (issue 21) */
static void fixed_and_profiled(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"faults\": {\"model\": \"ber\", \"rates\": [1e-4, 0.01], \"repeats\": 5,"
                   " \"representation\": \"uint4\", \"w_max\": 0.1, \"per_channel\": true}}");
    assert_int_equal(p->spec.repr, BF_REPR_UINT4);
    assert_true(p->spec.w_max == 0.1);
    assert_int_equal(p->spec.per_channel, 1);
    done(p);
    p = ok("{" HEAD "\"trials\": 3, \"faults\": {\"representation\": \"int4\", \"group_size\": 128}}");
    assert_int_equal(p->spec.group_size, 128);
    done(p);
    /* faults in the fp16 scales: their 16 bits are the positions */
    p = ok("{" HEAD "\"trials\": 3, \"faults\": {\"representation\": \"int4\", \"group_size\": 64, \"fault_scales\": true, "
           "\"positions\": [14, 13, 12, 11, 10], \"bits\": 2}}");
    assert_int_equal(p->spec.fault_scales, 1);
    assert_int_equal(p->spec.n_positions, 5);
    done(p);
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"group_size\": 64, \"fault_scales\": true, "
                 "\"positions\": [16]}}", "/faults/positions/0", "for fp16");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"group_size\": 64, \"fault_scales\": 1}}",
                 "/faults/fault_scales", "boolean");
    /* hostile group sizes: a clear problem at the field, nothing else */
    const char *bad_groups[] = {"0", "-32", "1048577", "9223372036854775807", "1e300", "32.5", "\"32\"", "true", "null"};
    for (size_t i = 0; i < sizeof bad_groups / sizeof bad_groups[0]; i++) {
        char doc[256];
        snprintf(doc, sizeof doc, "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"group_size\": %s}}",
                 bad_groups[i]);
        only_problem(doc, "/faults/group_size", strchr(bad_groups[i], '"') || bad_groups[i][0] == 't' ||
                                                        bad_groups[i][0] == 'n' || strchr(bad_groups[i], '.')
                                                    ? "an integer" : "1..1048576");
    }
    p = ok("{" HEAD "\"trials\": 3, \"faults\": {\"representation\": \"int2\", \"positions\": [1]}}");
    assert_int_equal(p->spec.repr, BF_REPR_INT2);
    done(p);
    p = ok("{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"chip.bfmap\", \"repeats\": 7,"
           " \"representation\": \"int8\"}}");
    assert_int_equal(p->spec.model_kind, BF_FAULT_PROFILED);
    assert_string_equal(p->spec.error_map, "chip.bfmap");
    assert_int_equal(p->spec.trials, 7);            /* one per offset */
    assert_null(p->spec.errmap);                    /* the caller loads it */
    done(p);

    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int3\", \"bits\": 4}}",
                 "/faults/bits", "must be 1..3 for int3");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"w_max\": 0.1}}", "/faults/w_max",
                 "applies only to fixed-point representations");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"w_max\": -1}}",
                 "/faults/w_max", "must be a positive number");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"target\": \"activations\"}}",
                 "/faults/representation", "'int4' applies only to target 'weights'");
    only_problem("{" HEAD "\"faults\": {\"model\": \"profiled\"}}", "/faults/error_map", "required for model 'profiled'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"error_map\": \"x.bfmap\"}}", "/faults/error_map",
                 "applies only to model 'profiled'");
    only_problem("{" HEAD "\"trials\": 4, \"faults\": {\"model\": \"profiled\", \"error_map\": \"x\"}}", "/trials",
                 "not used with model 'profiled'");
    only_problem("{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\", \"positions\": [1]}}",
                 "/faults/positions", "does not apply to model 'profiled'");
    only_problem("{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\", \"target\": \"inputs\"}}",
                 "/faults/target", "target 'weights' only");
}

static void fault_list(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"faults\": {\"representation\": \"fp16\"}, \"sampling\": {\"list\": ["
                   "{\"tensor\": \"fc1.weight\", \"index\": 12, \"bit\": 15},"
                   "{\"tensor\": \"fc1.bias\", \"index\": 0, \"bit\": 0}]}}");
    const bf_campaign_spec *s = &p->spec;
    assert_int_equal(s->sampling, BF_SAMPLE_LIST);
    assert_int_equal(s->n_list, 2);
    assert_int_equal(s->trials, 2);                /* one per entry */
    assert_string_equal(s->list[0].tensor, "fc1.weight");
    assert_int_equal(s->list[0].index, 12);
    assert_int_equal(s->list[0].bit, 15);
    assert_int_equal(s->list[0].sample, -1);
    assert_int_equal(s->list[1].index, 0);
    assert_int_equal(s->n_tensors, 0);             /* entries name their tensors */
    done(p);

    p = ok("{" HEAD "\"faults\": {\"target\": \"inputs\", \"persistence\": \"transient\","
           " \"model\": \"stuck_at_0\"}, \"sampling\": {\"list\": ["
           "{\"tensor\": \"x\", \"index\": 3, \"bit\": 31, \"sample\": 17}]}}");
    assert_int_equal(p->spec.list[0].sample, 17);
    assert_int_equal(p->spec.target, BF_TARGET_INPUTS);
    assert_int_equal(p->spec.model_kind, BF_FAULT_STUCK_AT_0);
    done(p);
}

/* ------------------------------------------------------ invalid specs */

static void many_problems(void **state)
{
    (void)state;
    parsed *p = parse("{\"model\": \"\", \"seed\": -1, \"trials\": 0,"
                      " \"faults\": {\"bits\": 40, \"positions\": [1, 2, 40, 1], \"postions\": [],"
                      " \"representation\": \"FP16\", \"target\": \"weigths\", \"burst\": \"yes\"},"
                      " \"metrics\": [\"auc\", \"acuracy\", \"auc\"],"
                      " \"critical\": {\"metric\": \"auc\", \"delta\": 0},"
                      " \"stop\": {\"margin\": 0.7, \"confidence\": 1, \"extra\": 1},"
                      " \"batch\": 16777217}");
    assert_int_equal(p->st, BF_EINVAL);
    assert_problem(p, "/model", "must not be empty");
    assert_problem_has(p, "/dataset", "required");
    assert_problem(p, "/seed", "must be >= 0, got -1");
    assert_problem(p, "/trials", "must be 1..1000000000, got 0");
    assert_problem(p, "/faults/postions", "unknown field; did you mean 'positions'?");
    assert_problem(p, "/faults/bits", "must be 1..32, got 40");
    assert_problem(p, "/faults/positions/2", "must be 0..31, got 40");
    assert_problem(p, "/faults/positions/3", "bit 1 is already listed at /faults/positions/0");
    assert_problem(p, "/faults/representation",
                   "must be 'fp32', 'fp16', 'bf16', 'int8', 'int7', 'int6', 'int5', 'int4', 'int3', 'int2', 'uint8', 'uint7', 'uint6', 'uint5', 'uint4', 'uint3' or 'uint2', got 'FP16'; did you mean 'fp16'?");
    assert_problem(p, "/faults/target", "must be 'weights', 'activations', 'inputs' or 'kv_cache', got "
                                        "'weigths'; did you mean 'weights'?");
    assert_problem(p, "/faults/burst", "must be true, false or \"word\", got string 'yes'");
    assert_problem_has(p, "/metrics/1", "did you mean 'accuracy'?");
    assert_problem(p, "/metrics/2", "'auc' is already listed at /metrics/0");
    assert_problem(p, "/critical/delta", "must be > 0, got 0");
    assert_problem(p, "/stop/margin", "must be in (0, 0.5), got 0.7");
    assert_problem(p, "/stop/confidence", "must be in (0.5, 1), got 1");
    assert_problem(p, "/stop/extra", "unknown field; the fields here are 'margin', 'confidence', 'per_tensor_margin' or 'per_bit_margin'");
    assert_problem(p, "/batch", "must be 1..16777216, got 16777217");
    assert_int_equal(p->pr.count, 18);
    assert_null(p->spec.model);
    done(p);
}

/* The designs and stop targets of issue 32: hostile values name their field. */
static void adaptive_fields_hostile(void **state)
{
    (void)state;
    only_problem("{" HEADF "\"trials\": 10, \"stop\": {\"margin\": 0.1, \"per_tensor_margin\": \"0.1\"}}",
                 "/stop/per_tensor_margin", "must be a number");
    only_problem("{" HEADF "\"trials\": 10, \"stop\": {\"margin\": 0.1, \"per_bit_margin\": -0.1}}",
                 "/stop/per_bit_margin", "must be in (0, 0.5), got -0.1");
    only_problem("{" HEADF "\"trials\": 10, \"stop\": {\"margin\": 0.1, \"per_tensor_margin\": 1e308}}",
                 "/stop/per_tensor_margin", "must be in (0, 0.5)");
    only_problem("{" HEADF "\"trials\": 10, \"stop\": {\"margin\": 0.1, \"per_bit_margin\": null}}",
                 "/stop/per_bit_margin", "must be a number");
    only_problem("{" HEADF "\"trials\": 10, \"stop\": {\"per_tensor_margin\": 0.1}}", "/stop/margin", "required");
    only_problem("{" HEADF "\"trials\": 10, \"sampling\": \"Adaptive\"}", "/sampling", "did you mean 'adaptive'?");
    only_problem("{" HEADF "\"trials\": 10, \"sampling\": [\"exhaustive\"]}", "/sampling", "'exhaustive', 'adaptive'");
    only_problem("{" HEADF "\"trials\": 99999999999, \"sampling\": \"adaptive\"}", "/trials", "1..1000000000");
}

static void unknown_fields(void **state)
{
    (void)state;
    parsed *p = parse("{" HEAD "\"Seed\": 1, \"bits\": 2, \"x\": 1, \"a/b~c\": 0,"
                      " \"faults\": {\"seed\": 1, \"rat\": 0.1, \"tensor\": [\"a\"]},"
                      " \"sampling\": {\"lst\": []}}");
    assert_problem(p, "/Seed", "unknown field; did you mean 'seed'?");
    assert_problem(p, "/bits", "unknown field here; 'bits' belongs in 'faults'");
    assert_problem_has(p, "/x", "unknown field; the fields here are 'model', 'dataset',");
    assert_problem_has(p, "/a~1b~0c", "unknown field");                     /* RFC 6901 escapes */
    assert_problem(p, "/faults/seed", "unknown field here; 'seed' belongs in the top level");
    assert_problem(p, "/faults/rat", "unknown field; did you mean 'rate'?");
    assert_problem(p, "/faults/tensor", "unknown field; did you mean 'tensors'?");
    assert_problem(p, "/sampling/lst", "unknown field; did you mean 'list'?");
    assert_problem_has(p, "/sampling/list", "required");
    assert_int_equal(p->pr.count, 9);
    done(p);

    only_problem("{" HEADF "\"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0,"
                 " \"bit\": 1, \"idx\": 2}]}}", "/sampling/list/0/idx", "did you mean 'index'?");
    only_problem("{" HEADF "\"trials\": 1, \"critical\": {\"metric\": \"auc\", \"delta\": 1, \"delat\": 1}}",
                 "/critical/delat", "did you mean 'delta'?");
}

static void wrong_types(void **state)
{
    (void)state;
    parsed *p = parse("{\"model\": 1, \"dataset\": null, \"seed\": \"42\", \"trials\": 2.5,"
                      " \"faults\": {\"tensors\": \"*\", \"bits\": true, \"positions\": [\"1\"],"
                      " \"representation\": 16, \"per_channel\": 1},"
                      " \"sampling\": 3, \"metrics\": \"auc\", \"critical\": [], \"stop\": 0.01,"
                      " \"batch\": {}}");
    assert_problem(p, "/model", "must be a string, got 1");
    assert_problem(p, "/dataset", "must be a string, got null");
    assert_problem(p, "/seed", "must be an integer, got string '42'");
    assert_problem(p, "/trials", "must be an integer, got 2.5");
    assert_problem(p, "/faults/tensors", "must be an array of tensor names, globs or 'op:Type', "
                                         "got string '*'");
    assert_problem(p, "/faults/bits", "must be an integer, got true");
    assert_problem(p, "/faults/positions/0", "must be an integer, got string '1'");
    assert_problem(p, "/faults/representation",
                   "must be a string: 'fp32', 'fp16', 'bf16', 'int8', 'int7', 'int6', 'int5', 'int4', 'int3', 'int2', 'uint8', 'uint7', 'uint6', 'uint5', 'uint4', 'uint3' or 'uint2', got 16");
    assert_problem(p, "/faults/per_channel", "must be a boolean (true or false), got 1");
    assert_problem(p, "/sampling", "must be 'uniform', 'per_tensor', 'per_bit', 'exhaustive', 'adaptive' or an object "
                                   "{\"list\": [...]}, got 3");
    assert_problem(p, "/metrics", "must be an array of metric names, got string 'auc'");
    assert_problem(p, "/critical", "must be an object {\"metric\": ..., \"delta\": ...}, got an array");
    assert_problem(p, "/stop", "must be an object {\"margin\": ..., \"confidence\": ...}, got 0.01");
    assert_problem(p, "/batch", "must be an integer, got an object");
    assert_int_equal(p->pr.count, 14);
    done(p);

    only_problem("{" HEAD "\"trials\": 1, \"faults\": \"ber\"}", "/faults",
                 "must be an object, or a list of fault groups, got string 'ber'");
    only_problem("[1, 2]", "", "a campaign spec must be a JSON object, got an array");
    only_problem("\"spec\"", "", "a campaign spec must be a JSON object, got string 'spec'");
    /* long strings are cut in messages, at a UTF-8 boundary */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"\xc3\xa9\xc3\xa9\xc3\xa9"
                 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}}",
                 "/faults/target", "\xc3\xa9...'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"a\\nb\"}}", "/faults/target",
                 "got 'a\\u000ab'");
}

static void cross_field_rules(void **state)
{
    (void)state;
    /* positions and bits against the representation */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"fp16\", \"positions\": [3, 20]}}",
                 "/faults/positions/1", "must be 0..15 for fp16, got 20");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int8\", \"bits\": 9}}",
                 "/faults/bits", "must be 1..8 for int8, got 9");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"bits\": 3, \"positions\": [1, 2]}}",
                 "/faults/bits", "must be at most 2, the number of allowed positions, got 3");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"burst\": true}}",
                 "/faults/burst", "needs bits >= 2");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"burst\": true, \"bits\": 3, \"positions\": [1, 2, 4, 5]}}",
                 "/faults/bits", "the longest run in /faults/positions is 2");
    /* multi-bit upsets in 64-bit words: hostile values at their pointers */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"burst\": \"word\", \"bits\": 65}}",
                 "/faults/bits", "must be 1..64 with burst 'word' (the bits of one 64-bit word), got 65");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"burst\": \"Word\", \"bits\": 4}}",
                 "/faults/burst", "must be true, false or \"word\", got string 'Word'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"burst\": null, \"bits\": 4}}",
                 "/faults/burst", "must be true, false or \"word\"");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"words\": 65}}", "/faults/words",
                 "must be 2..64 (neighbouring 64-bit words), got 65");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"words\": 1}}", "/faults/words", "must be 2..64");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"words\": 2.5}}", "/faults/words", "must be an integer");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"words\": \"3\"}}", "/faults/words", "must be an integer");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"words\": -9223372036854775808}}", "/faults/words", "must be 2..64");
    only_problem("{" HEAD "\"faults\": {\"representation\": \"int8\"}, \"sampling\": {\"list\": ["
                 "{\"tensor\": \"w\", \"index\": 0, \"bit\": 3}, {\"tensor\": \"w\", \"index\": 0, \"bit\": 9}]}}",
                 "/sampling/list/1/bit", "must be 0..7 for int8, got 9");
    /* a rule on an invalid field is skipped: one mistake, one problem */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"fp8\", \"positions\": [31]}}",
                 "/faults/representation", "got 'fp8'");
    only_problem("{" HEAD "\"faults\": {\"model\": \"bitflop\"}}", "/faults/model",
                 "did you mean 'bitflip'?");

    /* fields that do not apply */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"rate\": 0.1}}", "/faults/rate",
                 "applies only to model 'ber', not 'bitflip'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"repeats\": 3}}", "/faults/repeats",
                 "applies only to models 'ber' and 'profiled'");
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.1, \"bits\": 2}}", "/faults/bits",
                 "applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1', not 'ber'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"random_value\", \"positions\": [1]}}",
                 "/faults/positions", "does not apply to model 'random_value'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"per_channel\": false}}", "/faults/per_channel",
                 "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'fp32'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int8\", \"per_channel\": true,"
                 " \"target\": \"activations\"}}", "/faults/per_channel", "applies only to target 'weights'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"persistence\": \"transient\"}}",
                 "/faults/persistence", "'transient' applies only to targets 'activations', 'inputs' and 'kv_cache'");

    /* BER */
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\"}}", "/faults/rate", "required for model 'ber'");
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.1, \"rates\": [0.1]}}",
                 "/faults/rates", "give either 'rate' or 'rates', not both");
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\", \"rates\": [0.1, 0]}}", "/faults/rates/1",
                 "must be a probability in (0, 1], got 0");
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\", \"rates\": []}}", "/faults/rates", "must not be empty");
    only_problem("{" HEAD "\"trials\": 10, \"faults\": {\"model\": \"ber\", \"rate\": 0.5}}", "/trials",
                 "not used with model 'ber'");
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.5}, \"sampling\": \"per_tensor\"}",
                 "/sampling", "must be 'uniform' with model 'ber'");
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.5}, \"stop\": {\"margin\": 0.1}}",
                 "/stop", "not used with model 'ber'");
    parsed *p = parse("{" HEAD "\"faults\": {\"model\": \"ber\", \"rates\": [0.5, 0.1], \"repeats\": 1000000}}");
    assert_int_equal(p->st, BF_OK);               /* 2 x 10^6 trials: within the limit */
    assert_int_equal(p->spec.trials, 2000000);
    done(p);
    char *sweep = malloc(8192);                    /* 1001 x 10^6 is not */
    size_t o = (size_t)sprintf(sweep, "{" HEAD "\"faults\": {\"model\": \"ber\", \"repeats\": 1e6, \"rates\": [");
    for (int i = 0; i < 1001; i++) o += (size_t)sprintf(sweep + o, "%s0.5", i ? "," : "");
    strcpy(sweep + o, "]}}");
    only_problem(sweep, "/faults/repeats", "a sweep of 1001 rates x 1000000 repeats is 1001000000 trials; "
                                           "the limit is 1000000000");
    free(sweep);

    /* trials and the explicit list */
    only_problem("{" HEAD "\"faults\": {}}", "/trials", "required");
    only_problem("{" HEADF "\"trials\": 3, \"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0, \"bit\": 1}]}}",
                 "/trials", "each entry of /sampling/list is one trial");
    only_problem("{" HEAD "\"faults\": {\"bits\": 1}, \"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0, \"bit\": 1}]}}",
                 "/faults/bits", "not used with an explicit fault list");
    only_problem("{" HEAD "\"faults\": {\"tensors\": [\"*\"]}, \"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0, \"bit\": 1}]}}",
                 "/faults/tensors", "not used with an explicit fault list");
    only_problem("{" HEAD "\"faults\": {\"model\": \"random_value\"}, \"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0, \"bit\": 1}]}}",
                 "/sampling", "not 'random_value'");
    only_problem("{" HEADF "\"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0, \"bit\": 1}]},"
                 " \"stop\": {\"margin\": 0.1}}", "/stop", "not used with an explicit fault list");
    only_problem("{" HEADF "\"sampling\": {\"list\": []}}", "/sampling/list", "must not be empty");
    only_problem("{" HEADF "\"sampling\": \"list\"}", "/sampling", "an explicit list is an object");
    only_problem("{" HEAD "\"trials\": 1, \"sampling\": \"per_bit\", \"faults\": {\"model\": \"random_value\"}}",
                 "/sampling", "'per_bit' needs a model that touches chosen bits");
    only_problem("{" HEADF "\"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0, \"bit\": 1, \"sample\": 0}]}}",
                 "/sampling/list/0/sample", "applies only to 'transient' faults");
    only_problem("{" HEAD "\"faults\": {\"target\": \"activations\", \"persistence\": \"transient\"},"
                 " \"sampling\": {\"list\": [{\"tensor\": \"relu1\", \"index\": 0, \"bit\": 1}]}}",
                 "/sampling/list/0/sample", "required for 'transient' faults");

    p = parse("{" HEADF "\"sampling\": {\"list\": [7, {\"index\": -1, \"bit\": 32}, {\"tensor\": \"\", \"index\": 0}]}}");
    assert_problem(p, "/sampling/list/0", "must be an object {\"tensor\": ..., \"index\": ..., \"bit\": ...}, got 7");
    assert_problem_has(p, "/sampling/list/1/tensor", "required");
    assert_problem(p, "/sampling/list/1/index", "must be >= 0, got -1");
    assert_problem(p, "/sampling/list/1/bit", "must be 0..31, got 32");
    assert_problem(p, "/sampling/list/2/tensor", "must not be empty");
    assert_problem_has(p, "/sampling/list/2/bit", "required");
    assert_int_equal(p->pr.count, 6);
    done(p);

    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"tensors\": [\"a\", \"op:\"]}}", "/faults/tensors/1",
                 "'op:' needs an op type");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"tensors\": []}}", "/faults/tensors", "must not be empty");
    only_problem("{" HEADF "\"trials\": 1, \"critical\": {\"delta\": 0.1}}", "/critical/metric", "required");
    only_problem("{" HEADF "\"trials\": 1, \"stop\": {\"confidence\": 0.9}}", "/stop/margin", "required");
    only_problem("{" HEADF "\"trials\": 1, \"metrics\": []}", "/metrics", "must not be empty");
    only_problem("{" HEADF "\"trials\": 1.5e9}", "/trials", "must be 1..1000000000, got 1.5e+09");
    only_problem("{" HEADF "\"trials\": 1e300}", "/trials", "must be 1..1000000000, got 1e+300");
    only_problem("{" HEADF "\"trials\": 1, \"seed\": 9223372036854775808.0}", "/seed", "must be >= 0");
}

/* -------------------------------------------- core's rules, through JSON */

#define LIST1 "\"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0, \"bit\": 1}]}"

#define GROUPS2 "\"faults\": [{}, {\"target\": \"activations\"}], "

/* Each of core's rules (bitflip/spec_rules.h) that a document can break:
 * a spec breaking it alone, and the one problem it must give. json NULL:
 * the sweep of 1001 rates built in rules_table. */
static const struct {
    const char *rule, *json, *pointer, *message;
} RULE_ROWS[] = {
    {"transient-not-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"persistence\": \"transient\"}}",
     "/faults/persistence",
     "'transient' applies only to targets 'activations', 'inputs' and 'kv_cache' (a weight fault is a memory error: 'permanent')"},
    {"tensors-not-with-list", "{" HEAD "\"faults\": {\"tensors\": [\"*\"]}, " LIST1 "}", "/faults/tensors",
     "not used with an explicit fault list (each entry of /sampling/list names its tensor)"},
    {"tensors-not-kv-cache", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"kv_cache\", \"tensors\": [\"*\"]}}",
     "/faults/tensors", "not used with target 'kv_cache' (faults.kv chooses the layers, kinds, heads and positions)"},
    {"kv-kv-cache-only", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"activations\", \"kv\": {\"heads\": [0]}}}",
     "/faults/kv", "applies only to target 'kv_cache' (the layers, kinds, heads and positions of the KV cache's entries)"},
    {"bits-chosen-models", "{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.1, \"bits\": 2}}", "/faults/bits",
     "applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1', not 'ber'"},
    {"bits-not-with-list", "{" HEAD "\"faults\": {\"bits\": 1}, " LIST1 "}", "/faults/bits",
     "not used with an explicit fault list (each entry flips one bit)"},
    {"positions-not-random-value", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"random_value\", \"positions\": [1]}}",
     "/faults/positions", "does not apply to model 'random_value' (it replaces every bit)"},
    {"positions-not-profiled", "{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\", \"positions\": [1]}}",
     "/faults/positions", "does not apply to model 'profiled' (the map covers every stored bit)"},
    {"positions-not-with-list", "{" HEAD "\"faults\": {\"positions\": [1]}, " LIST1 "}", "/faults/positions",
     "not used with an explicit fault list (each entry gives its bit)"},
    {"burst-chosen-models", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"random_value\", \"burst\": true}}",
     "/faults/burst", "applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1', not 'random_value'"},
    {"burst-not-with-list", "{" HEAD "\"faults\": {\"burst\": false}, " LIST1 "}", "/faults/burst",
     "not used with an explicit fault list (each entry flips one bit)"},
    {"bits-within-positions", "{" HEAD "\"trials\": 1, \"faults\": {\"bits\": 3, \"positions\": [1, 2]}}",
     "/faults/bits", "must be at most 2, the number of allowed positions, got 3"},
    {"burst-two-bits", "{" HEAD "\"trials\": 1, \"faults\": {\"burst\": true}}", "/faults/burst",
     "needs bits >= 2 (a burst is that many adjacent bits), bits is 1"},
    {"burst-fits-positions", "{" HEAD "\"trials\": 1, \"faults\": {\"burst\": true, \"bits\": 3, \"positions\": [5, 1, 4, 2]}}",
     "/faults/bits",
     "a burst of 3 adjacent bits needs 3 consecutive allowed positions; the longest run in /faults/positions is 2"},
    {"burst-word-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"activations\", \"burst\": \"word\", \"bits\": 4}}",
     "/faults/burst", "'word' applies only to target 'weights' (a burst inside a 64-bit word of a tensor's storage)"},
    {"burst-word-repr", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int6\", \"burst\": \"word\", \"bits\": 4}}",
     "/faults/burst",
     "needs a representation whose width divides 64 (fp32, fp16, bf16, int8, uint8, int4, uint4, int2, uint2), so "
     "that a 64-bit word holds whole values; 'int6' is 6 bits"},
    {"burst-word-positions", "{" HEAD "\"trials\": 1, \"faults\": {\"burst\": \"word\", \"bits\": 40, \"positions\": [3]}}",
     "/faults/positions", "does not apply with burst 'word' (the burst may start at any bit of its 64-bit word)"},
    {"words-chosen-models", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"random_value\", \"words\": 2}}", "/faults/words",
     "applies only to models 'bitflip', 'stuck_at_0', 'stuck_at_1' and 'ber', not 'random_value'"},
    {"words-not-burst", "{" HEAD "\"trials\": 1, \"faults\": {\"words\": 2, \"burst\": true, \"bits\": 2}}", "/faults/words",
     "and burst are two multi-bit upsets: give one (words: the same bit of neighbouring words; burst: adjacent bits)"},
    {"words-one-bit", "{" HEAD "\"trials\": 1, \"faults\": {\"words\": 2, \"bits\": 2}}", "/faults/words",
     "a column upset strikes one bit, the same in each word: bits must be 1, got 2"},
    {"words-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"inputs\", \"words\": 2}}", "/faults/words",
     "applies only to target 'weights' (neighbouring 64-bit words of a tensor's storage)"},
    {"words-repr", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"uint3\", \"words\": 3}}", "/faults/words",
     "needs a representation whose width divides 64 (fp32, fp16, bf16, int8, uint8, int4, uint4, int2, uint2), so "
     "that a 64-bit word holds whole values; 'uint3' is 3 bits"},
    {"mbu-uniform", "{" HEAD "\"trials\": 1, \"faults\": {\"burst\": \"word\", \"bits\": 3}, \"sampling\": \"per_bit\"}",
     "/sampling",
     "must be 'uniform' with a multi-bit upset in 64-bit words (faults.burst 'word'): its population is (word, bit) "
     "pairs, not (tensor, bit position) strata or listed bits"},
    {"rate-ber-only", "{" HEAD "\"trials\": 1, \"faults\": {\"rate\": 0.1}}", "/faults/rate",
     "applies only to model 'ber', not 'bitflip'"},
    {"rates-ber-only", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"stuck_at_1\", \"rates\": [0.1]}}",
     "/faults/rates", "applies only to model 'ber', not 'stuck_at_1'"},
    {"repeats-ber-profiled", "{" HEAD "\"trials\": 1, \"faults\": {\"repeats\": 3}}", "/faults/repeats",
     "applies only to models 'ber' and 'profiled', not 'bitflip'"},
    {"error-map-profiled-only", "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"stuck_at_0\", \"error_map\": \"x.bfmap\"}}",
     "/faults/error_map", "applies only to model 'profiled', not 'stuck_at_0'"},
    {"profiled-needs-map", "{" HEAD "\"faults\": {\"model\": \"profiled\"}}", "/faults/error_map",
     "required for model 'profiled': the path of a chip's error map (a .bfmap file; docs/CAMPAIGNS.md, Profiled error "
     "maps)"},
    {"profiled-weights", "{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\", \"target\": \"inputs\"}}",
     "/faults/target", "model 'profiled' lays a memory's error map over the weights: it takes target 'weights' only"},
    {"per-channel-fixed-point", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"bf16\", \"per_channel\": false}}",
     "/faults/per_channel", "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'bf16'"},
    {"per-channel-weights",
     "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int8\", \"per_channel\": true, \"target\": \"activations\"}}",
     "/faults/per_channel", "applies only to target 'weights' (a scale per slice along a weight's axis 0)"},
    {"w-max-fixed-point", "{" HEAD "\"trials\": 1, \"faults\": {\"w_max\": 0.1}}", "/faults/w_max",
     "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'fp32'"},
    {"w-max-weights",
     "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int8\", \"w_max\": 0.1, \"target\": \"inputs\"}}",
     "/faults/w_max", "applies only to target 'weights' (the clipped range they are quantized in)"},
    {"w-max-positive", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"w_max\": -0.25}}",
     "/faults/w_max", "must be a positive number (the weights' range is [-w_max, w_max]), got -0.25"},
    {"fault-scales-groups", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"fault_scales\": false}}",
     "/faults/fault_scales", "applies only with group_size (the per-group scales it puts the faults in)"},
    {"fault-scales-models",
     "{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\", \"representation\": \"int4\", "
     "\"group_size\": 32, \"fault_scales\": true}}",
     "/faults/fault_scales", "does not apply to model 'profiled' (its map lies over the stored weights)"},
    {"group-size-fixed-point", "{" HEAD "\"trials\": 1, \"faults\": {\"group_size\": 32}}", "/faults/group_size",
     "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'fp32'"},
    {"group-size-weights",
     "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int8\", \"group_size\": 64, \"target\": \"inputs\"}}",
     "/faults/group_size", "applies only to target 'weights' (a scale per group of a weight's input dimension)"},
    {"group-size-not-per-channel",
     "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int4\", \"group_size\": 128, \"per_channel\": true}}",
     "/faults/group_size",
     "and per_channel are two scale layouts: give one (group_size: a scale per group of the input dimension; "
     "per_channel: one per output channel)"},
    {"fixed-point-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"uint4\", \"target\": \"activations\"}}",
     "/faults/representation",
     "'uint4' applies only to target 'weights'; activations and inputs take fp32, fp16, bf16 or int8"},
    {"zero-points-weights", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"activations\", \"zero_points\": false}}",
     "/faults/zero_points", "applies only to target 'weights' (a quantized model's stored zero points)"},
    {"ber-needs-rates", "{" HEAD "\"faults\": {\"model\": \"ber\"}}", "/faults/rate",
     "required for model 'ber': the probability that each bit flips (or 'rates' for a sweep)"},
    {"ber-sweep-limit", NULL, "/faults/repeats",
     "a sweep of 1001 rates x 1000000 repeats is 1001000000 trials; the limit is 1000000000"},
    {"list-needs-chosen-bits", "{" HEAD "\"faults\": {\"model\": \"random_value\"}, " LIST1 "}", "/sampling",
     "an explicit list flips the listed bits: it needs faults.model 'bitflip', 'stuck_at_0' or 'stuck_at_1', not "
     "'random_value'"},
    {"ber-uniform", "{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.5}, \"sampling\": \"per_tensor\"}", "/sampling",
     "must be 'uniform' with model 'ber' (every bit of the selected tensors may flip)"},
    {"profiled-uniform", "{" HEAD "\"faults\": {\"model\": \"profiled\", \"error_map\": \"x\"}, \"sampling\": \"per_bit\"}",
     "/sampling", "must be 'uniform' with model 'profiled' (the map covers every bit of the selected tensors)"},
    {"per-bit-needs-bits", "{" HEAD "\"trials\": 1, \"sampling\": \"per_bit\", \"faults\": {\"model\": \"random_value\"}}",
     "/sampling",
     "'per_bit' needs a model that touches chosen bits ('bitflip', 'stuck_at_0', 'stuck_at_1'), not 'random_value'"},
    {"strata-need-bits", "{" HEAD "\"trials\": 1, \"sampling\": \"adaptive\", \"faults\": {\"model\": \"random_value\"}}",
     "/sampling", "'adaptive' strata are (tensor, bit position) cells: it needs model 'bitflip', 'stuck_at_0' or "
     "'stuck_at_1', not 'random_value'"},
    {"exhaustive-single-faults", "{" HEAD "\"sampling\": \"exhaustive\", \"faults\": {\"bits\": 2}}", "/sampling",
     "'exhaustive' enumerates single-bit faults (or bursts): 2 scattered bits per fault have too many combinations; "
     "use bits 1, a burst, or sampling 'adaptive'"},
    {"exhaustive-permanent",
     "{" HEAD "\"sampling\": \"exhaustive\", \"faults\": {\"target\": \"activations\", \"persistence\": \"transient\"}}",
     "/sampling", "'exhaustive' takes permanent faults: a transient fault's population also spans the eval set's "
     "samples; use sampling 'adaptive' or 'uniform'"},
    {"per-bit-margin-needs-bits",
     "{" HEAD "\"trials\": 1, \"faults\": {\"model\": \"random_value\"}, \"stop\": {\"margin\": 0.1, \"per_bit_margin\": 0.1}}",
     "/stop/per_bit_margin",
     "needs a model that touches chosen bits ('bitflip', 'stuck_at_0', 'stuck_at_1'), not 'random_value'"},
    {"trials-not-with-exhaustive", "{" HEADF "\"trials\": 5, \"sampling\": \"exhaustive\"}", "/trials",
     "not used with sampling 'exhaustive': it runs every candidate fault once (bitflip plan counts them)"},
    {"stop-not-with-exhaustive", "{" HEADF "\"sampling\": \"exhaustive\", \"stop\": {\"margin\": 0.1}}", "/stop",
     "not used with sampling 'exhaustive': it runs every fault and reports the exact rates"},
    {"trials-not-with-list", "{" HEADF "\"trials\": 3, " LIST1 "}", "/trials",
     "not used with an explicit fault list: each entry of /sampling/list is one trial"},
    {"trials-not-with-ber", "{" HEAD "\"trials\": 10, \"faults\": {\"model\": \"ber\", \"rate\": 0.5}}", "/trials",
     "not used with model 'ber': a sweep runs len(rates) x repeats trials"},
    {"trials-not-with-profiled", "{" HEAD "\"trials\": 4, \"faults\": {\"model\": \"profiled\", \"error_map\": \"x\"}}",
     "/trials", "not used with model 'profiled': it runs 'repeats' trials, one per offset"},
    {"trials-needed", "{" HEADF "\"seed\": 1}", "/trials",
     "required: how many faults to inject, 1..1000000000 (not needed for model 'ber' or an explicit list)"},
    {"stop-not-with-list", "{" HEADF LIST1 ", \"stop\": {\"margin\": 0.1}}", "/stop",
     "not used with an explicit fault list (every listed fault runs)"},
    {"stop-not-with-ber", "{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.5}, \"stop\": {\"margin\": 0.1}}", "/stop",
     "not used with model 'ber' (a sweep runs every rate x repeats)"},
    {"stop-not-with-mitigations", "{" HEADF "\"trials\": 1, \"stop\": {\"margin\": 0.1}, \"mitigations\": [\"clip\"]}",
     "/stop", "not used with mitigations: every configuration runs every trial, so that they compare on the same faults"},
    {"generate-not-inputs", "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"inputs\"}, \"generate\": {\"new_tokens\": 4}}",
     "/generate/new_tokens",
     "generation takes weight and activation faults, not target 'inputs' (an eval set's inputs are the prompts the "
     "decoding starts from; a campaign strikes value faults in the first step only); a KV-cache entry during "
     "generation: bitflip generate --kv-flip (docs/LM.md)"},
    {"generate-not-mitigations", "{" HEADF "\"trials\": 1, \"mitigations\": [\"clip\"], \"generate\": {\"new_tokens\": 4}}",
     "/generate/new_tokens", "generation runs the model as given, without protections: not used with mitigations"},
    {"generation-metrics-need-generate", "{" HEADF "\"trials\": 1, \"metrics\": [\"perplexity\", \"edit_distance\"]}",
     "/metrics",
     "generation_match, first_divergence and edit_distance need \"generate\": {\"new_tokens\": M} (greedy decoding "
     "of M tokens per prompt in every trial)"},
    {"critical-generation-needs-generate",
     "{" HEADF "\"trials\": 1, \"critical\": {\"metric\": \"first_divergence\", \"delta\": 2}}", "/critical/metric",
     "'first_divergence' needs \"generate\": {\"new_tokens\": M}"},
    {"groups-base", "{" HEAD "\"trials\": 1, \"faults\": [{\"target\": \"activations\"}, {}]}", "/faults/0/target",
     "must be 'weights' with fault groups, not 'activations' (group 0's representation makes the golden model; the "
     "other groups strike activations)"},
    {"groups-target", "{" HEAD "\"trials\": 1, \"faults\": [{}, {}, {\"target\": \"weights\"}]}", "/faults/2/target",
     "the weights groups come before the activations groups (a trial writes the weights, then computes): move this "
     "group up to just after group 0"},
    {"groups-model", "{" HEAD "\"trials\": 1, \"faults\": [{}, {\"model\": \"profiled\"}]}", "/faults/1/model",
     "a fault group takes bitflip, stuck_at_0, stuck_at_1, random_value or ber, not 'profiled'"},
    {"groups-bits", "{" HEAD "\"trials\": 1, \"faults\": [{}, {\"bits\": 2, \"positions\": [3]}]}", "/faults/1/bits",
     "must be 1..1 (the allowed bit positions), got 2"},
    {"groups-uniform", "{" HEAD "\"trials\": 1, " GROUPS2 "\"sampling\": \"per_tensor\"}", "/sampling",
     "must be 'uniform' with fault groups (faults is a list of 2): the stratified samplings and 'list' enumerate one "
     "group's (tensor, bit) strata or faults, and another group has none"},
    {"groups-sbp-random", "{" HEAD "\"trials\": 1, \"faults\": [{}, {\"target\": \"activations\", \"model\": "
     "\"random_value\"}], \"mitigations\": [\"ecc\", \"sbp\", \"range\"]}", "/faults/1/model",
     "'random_value' on activations does not combine with mitigation 'sbp': the value a fault replaces is not known "
     "until the pass runs, nor its protected bits"},
    {"groups-not-generate", "{" HEAD "\"trials\": 1, " GROUPS2 "\"generate\": {\"new_tokens\": 4}}",
     "/generate/new_tokens", "does not combine with fault groups (a trial's decoding takes one group's faults)"},
    {"groups-stop-margins",
     "{" HEAD "\"trials\": 1, " GROUPS2 "\"stop\": {\"margin\": 0.1, \"per_tensor_margin\": 0.1}}", "/stop",
     "the per-tensor and per-bit margins do not apply with fault groups (a trial's faults lie in several tensors and "
     "bits); give only 'margin'"},
};

/* Rules no document can break: enum values and ranges the JSON fields
 * already hold to (more tightly), and the loaded map of a C struct. */
static const char *const STRUCT_ONLY_RULES[] = {
    "target-known", "persistence-known", "representation-known", "model-known", "sampling-known",
    "batch-not-negative", "critical-metric-known", "stop-margin-range", "stop-confidence-range",
    "stop-tensor-margin-range", "stop-bit-margin-range", /* a document's margins are (0, 0.5) before the rules */
    "stop-margins-need-margin",                         /* ... and its stop requires a margin */
    "profiled-map-loaded", "ber-rates-probabilities", "ber-trials-count",
    "group-size-range",   /* a document's group_size is 1..2^20 before the rules */
    "kv-kinds-known",     /* a document's kinds are 'k' and 'v' */
    "generate-range",     /* a document's new_tokens is 1..max_new_tokens before the rules */
    "burst-word-bits",    /* a document's bits are 1..64 with burst 'word' before the rules */
    "words-range",        /* a document's words are 2..64 before the rules */
    "groups-count",       /* a document's list holds at most BF_FAULT_GROUPS_MAX groups before the rules */
};

/* "faults" as a list of fault groups (docs/CAMPAIGNS.md, "Fault groups"):
 * hostile lists, each one problem naming the field; a valid one. */
static void fault_groups_hostile(void **state)
{
    (void)state;
    only_problem("{" HEAD "\"trials\": 1, \"faults\": []}", "/faults", "an empty list of fault groups");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {}, {}, {}, {}]}", "/faults", "5 fault groups; at most 4");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [[{}]]}", "/faults/0", "must be an object (a fault group), got an array");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, [{}]]}", "/faults/1", "must be an object (a fault group), got an array");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, 5]}", "/faults/1", "must be an object (a fault group), got 5");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, null]}", "/faults/1", "must be an object (a fault group)");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"colour\": 1}]}", "/faults/1/colour", "unknown");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"bits\": \"two\"}]}", "/faults/1/bits", "must be an integer");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"model\": \"ber\", \"rates\": [0.1]}]}", "/faults/1/rates",
                 "does not apply here: a group after the first takes one 'rate'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"words\": 2}]}", "/faults/1/words", "does not apply here");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"kv\": {}}]}", "/faults/1/kv", "does not apply here");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"burst\": \"word\", \"bits\": 2}]}", "/faults/1/burst",
                 "'word' is group 0's to draw");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"model\": \"ber\"}]}", "/faults/1/rate",
                 "model 'ber' needs a rate in (0, 1], got 0");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"rate\": 0.5}]}", "/faults/1/rate", "applies only to model 'ber'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"rate\": 2, \"model\": \"ber\"}]}", "/faults/1/rate",
                 "must be a probability in (0, 1]");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"representation\": \"int8\"}]}", "/faults/1/representation",
                 "a fault group's activations take fp32, fp16 or bf16, not 'int8'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"target\": \"kv_cache\"}]}", "/faults/1/target",
                 "strikes 'weights' or 'activations', not 'kv_cache'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"target\": \"weights\", \"persistence\": \"transient\"}]}",
                 "/faults/1/persistence", "'transient' applies only to activations");
    /* a weights group: group 0's representation (its own when not given), before the activation groups, no ECC */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{\"representation\": \"fp16\"}, {\"target\": \"weights\", "
                 "\"representation\": \"bf16\"}]}", "/faults/1/representation",
                 "a weights group strikes the weights as group 0 stores them, 'fp16', not 'bf16'");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"target\": \"activations\"}, {\"target\": \"weights\"}]}",
                 "/faults/2/target", "the weights groups come before the activations groups");
    /* every mitigation with a second weights group (they protect the model, whichever group faulted it) */
    parsed *eg = ok("{" HEAD "\"faults\": [{\"model\": \"ber\", \"rate\": 1e-6}, {\"target\": \"weights\", \"bits\": 2, "
                    "\"burst\": true}, {\"target\": \"activations\"}], \"mitigations\": [\"ecc\", \"sbp\", \"range\"]}");
    assert_int_equal(eg->spec.n_groups, 2);
    assert_int_equal(eg->spec.n_mitigations, 4);   /* "none" first */
    done(eg);
    parsed *wg = ok("{" HEAD "\"faults\": [{\"model\": \"ber\", \"rate\": 1e-6, \"representation\": \"fp16\"}, "
                    "{\"target\": \"weights\", \"bits\": 2, \"burst\": true}, {\"target\": \"activations\"}, "
                    "{\"target\": \"activations\", \"model\": \"stuck_at_1\"}], \"mitigations\": [\"clip\"]}");
    assert_int_equal(wg->spec.n_groups, 3);
    assert_int_equal(wg->spec.groups[0].target, BF_TARGET_WEIGHTS);
    assert_int_equal(wg->spec.groups[0].repr, BF_REPR_FP16);   /* group 0's */
    assert_int_equal(wg->spec.groups[1].target, BF_TARGET_ACTIVATIONS);
    assert_int_equal(wg->spec.groups[1].repr, BF_REPR_FP32);
    done(wg);
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"tensors\": []}]}", "/faults/1/tensors", "must not be empty");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"positions\": [3, 3]}]}", "/faults/1/positions/1",
                 "already listed");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{}, {\"model\": \"random_value\", \"bits\": 2}]}", "/faults/1/bits",
                 "applies only to models 'bitflip', 'stuck_at_0' and 'stuck_at_1'");
    /* group 0's own fields and rules, at /faults/0 */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{\"bits\": 0}, {}]}", "/faults/0/bits", "must be");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": [{\"rate\": 0.1}, {}]}", "/faults/0/rate", "applies only to model 'ber'");
    only_problem("{" HEAD "\"faults\": [{\"model\": \"profiled\", \"error_map\": \"x\"}, {}]}",
                 "/faults/0/model", "'profiled' does not combine with other fault groups");
    only_problem("{" HEAD "\"faults\": [{}, {}], " LIST1 "}", "/sampling", "must be 'uniform' with fault groups");
    only_problem("{" HEAD "\"faults\": [{}, {}], \"sampling\": \"exhaustive\"}", "/sampling",
                 "must be 'uniform' with fault groups");
    only_problem("{" HEAD "\"trials\": 5, \"faults\": [{}, {}], \"sampling\": \"adaptive\"}", "/sampling",
                 "must be 'uniform' with fault groups");
    only_problem("{" HEAD "\"trials\": 5, \"faults\": [{}, {}], \"sampling\": \"per_bit\"}", "/sampling",
                 "must be 'uniform' with fault groups");

    parsed *e = ok("{" HEAD "\"faults\": [{\"model\": \"ber\", \"rate\": 1e-6}, {}], \"mitigations\": [\"none\", \"ecc\"]}");
    assert_int_equal(e->spec.n_mitigations, 2);
    done(e);
    /* a valid list: group 0 a BER sweep on weights, group 1 transient flips in fp16 activations */
    parsed *p = ok("{" HEAD "\"seed\": 7, \"faults\": [{\"model\": \"ber\", \"rates\": [1e-6, 1e-5], \"repeats\": 3}, "
                   "{\"tensors\": [\"relu*\"], \"bits\": 2, \"positions\": [3, 4, 9], \"representation\": \"fp16\", "
                   "\"persistence\": \"transient\"}]}");
    assert_int_equal(p->spec.model_kind, BF_FAULT_BER);
    assert_int_equal(p->spec.trials, 6);
    assert_int_equal(p->spec.n_groups, 1);
    const bf_fault_group *g = &p->spec.groups[0];
    assert_int_equal(g->target, BF_TARGET_ACTIVATIONS);
    assert_int_equal(g->model_kind, BF_FAULT_BITFLIP);
    assert_int_equal(g->bits, 2);
    assert_int_equal(g->n_positions, 3);
    assert_int_equal(g->positions[2], 9);
    assert_int_equal(g->repr, BF_REPR_FP16);
    assert_int_equal(g->persistence, BF_PERSIST_TRANSIENT);
    assert_int_equal(g->n_tensors, 1);
    assert_string_equal(g->tensors[0], "relu*");
    assert_true(g->rate == 0);
    done(p);
    p = ok("{" HEAD "\"trials\": 2, \"faults\": [{}, {\"model\": \"ber\", \"rate\": 0.001}]}");
    assert_true(p->spec.groups[0].rate == 0.001);
    assert_string_equal(p->spec.groups[0].tensors[0], "*");   /* every tensor, as group 0's default */
    done(p);
    /* one group as a list is the object form exactly */
    parsed *a = ok("{" HEAD "\"trials\": 9, \"seed\": 3, \"faults\": [{\"bits\": 2, \"positions\": [30, 31]}]}");
    parsed *b = ok("{" HEAD "\"trials\": 9, \"seed\": 3, \"faults\": {\"bits\": 2, \"positions\": [30, 31]}}");
    assert_int_equal(a->spec.n_groups, 0);
    assert_null(a->spec.groups);
    assert_int_equal(a->spec.bits, b->spec.bits);
    assert_int_equal(a->spec.n_positions, b->spec.n_positions);
    assert_memory_equal(a->spec.positions, b->spec.positions, sizeof a->spec.positions);
    assert_int_equal(a->spec.target, b->spec.target);
    assert_int_equal(a->spec.model_kind, b->spec.model_kind);
    assert_int_equal(a->spec.trials, b->spec.trials);
    assert_int_equal(a->spec.seed, b->spec.seed);
    assert_string_equal(a->spec.tensors[0], b->spec.tensors[0]);
    done(a);
    done(b);
}

static void rules_table(void **state)
{
    (void)state;
    size_t n_rows = sizeof RULE_ROWS / sizeof RULE_ROWS[0], n_struct = COUNT_OF(STRUCT_ONLY_RULES);
    for (size_t i = 0; i < n_rows; i++) {
        char *sweep = NULL;
        const char *json = RULE_ROWS[i].json;
        if (!json) {
            sweep = malloc(8192);
            assert_non_null(sweep);
            size_t o = (size_t)sprintf(sweep, "{" HEAD "\"faults\": {\"model\": \"ber\", \"repeats\": 1000000, \"rates\": [");
            for (int k = 0; k < 1001; k++) o += (size_t)sprintf(sweep + o, "%s0.5", k ? "," : "");
            strcpy(sweep + o, "]}}");
            json = sweep;
        }
        parsed *p = parse(json);
        if (p->st != BF_EINVAL || p->pr.count != 1) {
            dump(p);
            fail_msg("%s: expected 1 problem, got %zu", RULE_ROWS[i].rule, p->pr.count);
        }
        assert_string_equal(p->pr.items[0].pointer, RULE_ROWS[i].pointer);
        assert_string_equal(p->pr.items[0].message, RULE_ROWS[i].message);
        done(p);
        free(sweep);
    }
    /* every rule of core's is a row here or one no document can break */
    for (size_t r = 0; r < bf_spec_rule_count(); r++) {
        const char *name = bf_spec_rule_name(r);
        size_t k = 0, j = 0;
        while (k < n_rows && strcmp(RULE_ROWS[k].rule, name) != 0) k++;
        while (j < n_struct && strcmp(STRUCT_ONLY_RULES[j], name) != 0) j++;
        if (k == n_rows && j == n_struct) fail_msg("core's rule '%s' has no row in rules_table", name);
        if (k < n_rows && j < n_struct) fail_msg("rule '%s' is both a row and a struct-only rule", name);
    }
    assert_int_equal(n_rows + n_struct, bf_spec_rule_count());
}

/* Target kv_cache: faults.kv's filters, transient by default, and every
 * malformed filter reported at its pointer (hostile input included). */
static void kv_cache_target(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"trials\": 10, \"faults\": {\"target\": \"kv_cache\", \"positions\": [30], \"kv\": "
                   "{\"layers\": [1, 0], \"kinds\": [\"v\"], \"heads\": [3], \"positions\": [7, 2, 5]}}}");
    const bf_campaign_spec *s = &p->spec;
    assert_int_equal(s->target, BF_TARGET_KV_CACHE);
    assert_int_equal(s->persistence, BF_PERSIST_TRANSIENT);
    assert_int_equal(s->kv.n_layers, 2);
    assert_int_equal(s->kv.layers[0], 1);
    assert_int_equal(s->kv.layers[1], 0);
    assert_int_equal(s->kv.kinds, 2);
    assert_int_equal(s->kv.n_heads, 1);
    assert_int_equal(s->kv.heads[0], 3);
    assert_int_equal(s->kv.n_positions, 3);
    assert_int_equal(s->kv.positions[2], 5);
    assert_int_equal(s->n_positions, 1);           /* faults.positions stays the bits */
    assert_int_equal(s->positions[0], 30);
    done(p);
    p = ok("{" HEAD "\"trials\": 10, \"faults\": {\"target\": \"kv_cache\", \"persistence\": \"permanent\"}}");
    assert_int_equal(p->spec.persistence, BF_PERSIST_PERMANENT);
    assert_int_equal(p->spec.kv.n_heads, 0);
    assert_int_equal(p->spec.kv.kinds, 0);
    done(p);
#define KV(x) "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"kv_cache\", \"kv\": " x "}}"
    only_problem(KV("[0]"), "/faults/kv", "must be an object");
    only_problem(KV("{\"head\": [0]}"), "/faults/kv/head", "unknown field");
    only_problem(KV("{\"heads\": []}"), "/faults/kv/heads", "must not be empty");
    only_problem(KV("{\"heads\": 1}"), "/faults/kv/heads", "must be an array");
    only_problem(KV("{\"heads\": [-1]}"), "/faults/kv/heads/0", "-1");
    only_problem(KV("{\"positions\": [1099511627776]}"), "/faults/kv/positions/0", "1099511627776");
    only_problem(KV("{\"positions\": [0.5]}"), "/faults/kv/positions/0", "integer");
    only_problem(KV("{\"layers\": [1, 2, 1]}"), "/faults/kv/layers/2", "1 is already listed");
    only_problem(KV("{\"kinds\": [\"key\"]}"), "/faults/kv/kinds/0", "'k'");
    only_problem(KV("{\"kinds\": [\"k\", \"k\"]}"), "/faults/kv/kinds/1", "'k' is already listed");
    only_problem(KV("{\"kinds\": []}"), "/faults/kv/kinds", "must not be empty");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"kv\": {\"heads\": [0]}}}", "/faults/kv",
                 "applies only to target 'kv_cache'");
#undef KV
    /* a long list: past the limit, one problem, not one per entry */
    size_t cap = 16 + 8 * (BF_KV_FILTER_MAX + 2);
    char *big = malloc(cap + 256);
    assert_non_null(big);
    size_t o = (size_t)sprintf(big, "{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"kv_cache\", \"kv\": {\"positions\": [");
    for (int k = 0; k <= BF_KV_FILTER_MAX; k++) o += (size_t)sprintf(big + o, "%s%d", k ? "," : "", k);
    strcpy(big + o, "]}}}");
    only_problem(big, "/faults/kv/positions", "65537 entries; at most 65536");
    free(big);
}

/* ------------------------------------------------------ the document */

static void syntax_errors(void **state)
{
    (void)state;
    only_problem("{\n  \"model\": \"m\",\n  \"seed\": ,\n}", "", "invalid JSON at line 3, column");
    only_problem("{\"seed\": 1, \"seed\": 2}", "", "duplicate object key");
    only_problem("", "", "invalid JSON at line 1");
    only_problem("{" HEAD "\"trials\": 1} x", "", "invalid JSON");
    only_problem("{" HEAD "\"trials\": 99999999999999999999}", "", "too big integer");

    /* the length is what counts, not a NUL */
    bf_campaign_spec s;
    bf_spec_problems pr;
    const char json[] = "{\"model\": \"m\"}\0garbage";
    assert_int_equal(bf_spec_parse(json, sizeof json - 1, &s, &pr), BF_EINVAL);
    assert_true(pr.count >= 1 && strstr(pr.items[0].message, "invalid JSON") != NULL);
    bf_spec_problems_free(&pr);
    assert_int_equal(bf_spec_parse(NULL, 0, &s, &pr), BF_EINVAL);
    bf_spec_problems_free(&pr);
}

static char *nested(int depth)
{
    /* {"model": ..., "x": [[[...]]]} : the object is level 1 */
    size_t n = 64 + 2 * (size_t)depth;
    char *s = malloc(n + 64);
    int o = sprintf(s, "{\"model\": \"[{\", \"x\": ");
    for (int i = 1; i < depth; i++) s[o++] = '[';
    for (int i = 1; i < depth; i++) s[o++] = ']';
    strcpy(s + o, "}");
    return s;
}

static void limits(void **state)
{
    (void)state;
    char *s = nested(33);
    only_problem(s, "", "nested deeper than 32 levels at line 1, column 53");
    free(s);
    s = nested(32);                                /* deep enough, but allowed: other problems */
    parsed *p = parse(s);
    assert_problem(p, "/x", "unknown field; the fields here are 'model', 'dataset', 'seed', "
                            "'trials', 'faults', 'sampling', 'metrics', 'critical', 'stop', 'batch', 'mitigations' or "
                            "'generate'");
    done(p);
    free(s);
    s = nested(100000);                            /* never reaches the parser */
    only_problem(s, "", "nested deeper than 32");
    free(s);

    size_t big = BF_SPEC_MAX_BYTES + 1;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    bf_campaign_spec spec;
    bf_spec_problems pr;
    assert_int_equal(bf_spec_parse(huge, big, &spec, &pr), BF_EINVAL);
    assert_int_equal(pr.count, 1);
    assert_string_equal(pr.items[0].message, "the spec is 16777217 bytes; the limit is 16777216 (16.0 MiB, max_bytes)");
    bf_spec_problems_free(&pr);
    free(huge);

    /* 3000 bad entries: 1000 problems kept, then a count of the rest */
    size_t cap = 64 + 3000 * 48;
    char *list = malloc(cap);
    size_t o = (size_t)sprintf(list, "{" HEADF "\"sampling\": {\"list\": [");
    for (int i = 0; i < 3000; i++)
        o += (size_t)sprintf(list + o, "%s{\"tensor\": \"w\", \"index\": %d, \"bit\": 40}", i ? "," : "", i);
    strcpy(list + o, "]}}");
    p = parse(list);
    assert_int_equal(p->st, BF_EINVAL);
    assert_int_equal(p->pr.count, BF_SPEC_MAX_PROBLEMS + 1);
    assert_string_equal(p->pr.items[999].pointer, "/sampling/list/999/bit");
    assert_string_equal(p->pr.items[1000].pointer, "");
    assert_string_equal(p->pr.items[1000].message, "2000 more problems not listed");
    done(p);
    free(list);
}

/* "generate": {"new_tokens": M}, M within the limit spec.new-tokens. */
static void generate_field(void **state)
{
    (void)state;
    parsed *p = ok("{" HEADF "\"trials\": 2, \"generate\": {\"new_tokens\": 16}, \"metrics\": [\"generation_match\", "
                   "\"first_divergence\", \"edit_distance\"], \"critical\": {\"metric\": \"edit_distance\", \"delta\": 1}}");
    assert_int_equal(p->spec.gen_new_tokens, 16);
    assert_int_equal(p->spec.metrics, (1u << BF_METRIC_GENERATION_MATCH) | (1u << BF_METRIC_FIRST_DIVERGENCE) |
                                          (1u << BF_METRIC_EDIT_DISTANCE));
    assert_int_equal(p->spec.critical_metric, BF_METRIC_EDIT_DISTANCE);
    done(p);
    p = ok("{" HEADF "\"trials\": 2}");
    assert_int_equal(p->spec.gen_new_tokens, 0);
    done(p);
    only_problem("{" HEADF "\"trials\": 2, \"generate\": {\"new_tokens\": 257}}", "/generate/new_tokens",
                 "must be 1..256 (the limit spec.new-tokens), got 257");
    only_problem("{" HEADF "\"trials\": 2, \"generate\": {\"new_tokens\": 0}}", "/generate/new_tokens", "must be 1..256");
    only_problem("{" HEADF "\"trials\": 2, \"generate\": {\"new_tokens\": 2.5}}", "/generate/new_tokens", "an integer");
    only_problem("{" HEADF "\"trials\": 2, \"generate\": {}}", "/generate/new_tokens", "required: the tokens each trial");
    only_problem("{" HEADF "\"trials\": 2, \"generate\": 8}", "/generate", "an object {\"new_tokens\": M}");
    only_problem("{" HEADF "\"trials\": 2, \"generate\": {\"new_tokens\": 8, \"steps\": 1}}", "/generate/steps",
                 "unknown field");
    /* a KV entry must persist through the decoding's steps, which a campaign's
     * step-0 value faults do not model: refused, pointing to generate --kv-flip */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"kv_cache\"}, \"generate\": {\"new_tokens\": 4}}",
                 "/generate/new_tokens", "not target 'kv_cache'");
    /* one mistake, one problem: an invalid generate does not also break the metrics rule */
    only_problem("{" HEADF "\"trials\": 2, \"generate\": {\"new_tokens\": -1}, \"metrics\": [\"edit_distance\"]}",
                 "/generate/new_tokens", "must be 1..256");
    /* the limit: lower with spec.new-tokens, never past BF_GEN_MAX_NEW_TOKENS */
    const char *j = "{" HEADF "\"trials\": 2, \"generate\": {\"new_tokens\": 100}}";
    bf_spec_limits lim = {.max_new_tokens = 64};
    bf_campaign_spec spec;
    bf_spec_problems pr;
    assert_int_equal(bf_spec_parse_opts(j, strlen(j), &lim, &spec, &pr), BF_EINVAL);
    assert_string_equal(pr.items[0].message, "must be 1..64 (the limit spec.new-tokens), got 100");
    bf_spec_problems_free(&pr);
    const char *k = "{" HEADF "\"trials\": 2, \"generate\": {\"new_tokens\": 1025}}";
    lim.max_new_tokens = 1 << 20;
    assert_int_equal(bf_spec_parse_opts(k, strlen(k), &lim, &spec, &pr), BF_EINVAL);
    assert_string_equal(pr.items[0].message, "must be 1..1024 (the limit spec.new-tokens), got 1025");
    bf_spec_problems_free(&pr);
    assert_int_equal(bf_spec_parse_opts(j, strlen(j), &lim, &spec, &pr), BF_OK);
    assert_int_equal(spec.gen_new_tokens, 100);
    bf_spec_problems_free(&pr);
    bf_campaign_spec_free(&spec);
}

static const char *const FULL =
    "{\"model\": \"m.onnx\", \"dataset\": \"d.safetensors\", \"seed\": 7,\n"
    " \"faults\": {\"target\": \"activations\", \"model\": \"bitflip\", \"representation\": \"bf16\",\n"
    "            \"persistence\": \"transient\"},\n"
    " \"sampling\": {\"list\": [{\"tensor\": \"relu/1\", \"index\": 4, \"bit\": 14, \"sample\": 2},\n"
    "                         {\"tensor\": \"r\\u00e9lu\", \"index\": 1e3, \"bit\": 0, \"sample\": 0}]},\n"
    " \"metrics\": [\"accuracy\", \"top1_mismatch\"], \"critical\": {\"metric\": \"accuracy\", \"delta\": 0.5},\n"
    " \"batch\": 64}\n";

/* Every prefix of a valid spec is an error, never a crash or a leak (run
 * under ASan); so is every one-byte change to a few troublesome bytes. */
static void truncations_and_mutations(void **state)
{
    (void)state;
    size_t n = strlen(FULL);
    parsed *p = ok(FULL);
    assert_int_equal(p->spec.n_list, 2);
    assert_string_equal(p->spec.list[1].tensor, "r\xc3\xa9lu");
    assert_int_equal(p->spec.list[1].index, 1000);
    done(p);
    for (size_t len = 0; len < n - 1; len++) {     /* n - 1: the trailing newline is optional */
        char *buf = malloc(len ? len : 1);         /* exactly len bytes: ASan sees overreads */
        memcpy(buf, FULL, len);
        bf_campaign_spec s;
        bf_spec_problems pr;
        bf_status st = bf_spec_parse(buf, len, &s, &pr);
        if (st != BF_EINVAL || pr.count == 0) fail_msg("prefix of %zu bytes: status %d", len, st);
        for (size_t i = 0; i < pr.count; i++)
            assert_true(pr.items[i].pointer != NULL && pr.items[i].message[0] != '\0');
        json_t *errors = bf_spec_problems_json(&pr);   /* NULL if a message were not UTF-8 */
        assert_non_null(errors);
        json_decref(errors);
        bf_spec_problems_free(&pr);
        bf_campaign_spec_free(&s);
        free(buf);
    }
    static const char subst[] = "\"{}[],:0-9ae\\ \x80\xc3\t";
    char *buf = malloc(n);
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof subst - 1; k++) {
            memcpy(buf, FULL, n);
            buf[i] = subst[k];
            bf_campaign_spec s;
            bf_spec_problems pr;
            bf_status st = bf_spec_parse(buf, n, &s, &pr);
            assert_true(st == BF_OK || st == BF_EINVAL);
            assert_true((st == BF_OK) == (pr.count == 0));
            json_t *errors = bf_spec_problems_json(&pr);
            assert_non_null(errors);
            json_decref(errors);
            bf_spec_problems_free(&pr);
            bf_campaign_spec_free(&s);
        }
    }
    free(buf);
}

static void problems_as_json(void **state)
{
    (void)state;
    parsed *p = parse("{" HEAD "\"trials\": 1, \"faults\": {\"bits\": 40, \"postions\": [1]}}");
    json_t *errors = bf_spec_problems_json(&p->pr);
    assert_non_null(errors);
    char *text = json_dumps(errors, JSON_COMPACT);
    assert_string_equal(text, "[{\"pointer\":\"/faults/postions\",\"detail\":\"unknown field; did you "
                              "mean 'positions'?\"},{\"pointer\":\"/faults/bits\",\"detail\":\"must "
                              "be 1..32, got 40\"}]");
    free(text);
    json_decref(errors);
    done(p);

    /* problems may be NULL: only the verdict */
    bf_campaign_spec s;
    const char *bad = "{\"model\": 3}";
    assert_int_equal(bf_spec_parse(bad, strlen(bad), &s, NULL), BF_EINVAL);
    const char *good = "{" HEADF "\"trials\": 1}";
    assert_int_equal(bf_spec_parse(good, strlen(good), &s, NULL), BF_OK);
    bf_campaign_spec_free(&s);
    bf_campaign_spec_free(&s);                     /* zeroed: a second free is harmless */
}

/* ------------------------------------------------- the docs' examples */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 4096 > cap) {
            cap = cap ? cap * 2 : 65536;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Every ```json block of docs/CAMPAIGNS.md is a complete, valid spec (other
 * JSON there -- invalid specs, replies -- is fenced as ```jsonc or ```text). */
/* Every ```json block of the file must be a valid spec; counts what kinds
 * into t. Returns the number of blocks. */
typedef struct doc_tally {
    int ber, lists, paired;
} doc_tally;

static int doc_specs(const char *path, doc_tally *t)
{
    size_t len;
    char *md = read_file(path, &len);
    if (!md) fail_msg("cannot read %s", path);
    int examples = 0;
    const char *at = md;
    while ((at = strstr(at, "```json\n")) != NULL) {
        const char *start = at + 8, *end = strstr(start, "```");
        assert_non_null(end);
        bf_campaign_spec s;
        bf_spec_problems pr;
        if (bf_spec_parse(start, (size_t)(end - start), &s, &pr) != BF_OK) {
            for (size_t i = 0; i < pr.count; i++)
                print_message("  %s: %s\n", pr.items[i].pointer, pr.items[i].message);
            fail_msg("%s: example %d is invalid:\n%.*s", path, examples + 1, (int)(end - start), start);
        }
        examples++;
        t->ber += s.model_kind == BF_FAULT_BER && s.n_rates == 7 && s.repeats == 10 && s.rates[0] == 1e-9 &&
                  s.rates[6] == 1e-3;
        t->lists += s.sampling == BF_SAMPLE_LIST;
        t->paired += s.n_mitigations > 1;
        bf_campaign_spec_free(&s);
        bf_spec_problems_free(&pr);
        at = end + 3;
    }
    free(md);
    return examples;
}

static void docs_examples(void **state)
{
    (void)state;
    doc_tally t = {0};
    assert_true(doc_specs(BF_DOCS_DIR "/CAMPAIGNS.md", &t) >= 3);
    assert_true(t.ber >= 1);                       /* the DLRM sweep, 1e-9..1e-3 x 10 */
    assert_true(t.lists >= 1);
    /* docs/MITIGATIONS.md: its example and the specs of its results tables */
    doc_tally m = {0};
    assert_true(doc_specs(BF_DOCS_DIR "/MITIGATIONS.md", &m) >= 1);
    assert_true(m.paired >= 1);
}

static void mitigations(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"trials\": 10, \"faults\": {}, \"mitigations\": [\"clip\", \"abft\", "
                   "{\"name\": \"pytei\", \"clip\": {\"bounds\": [-100, 100], \"nan_to_zero\": true}, "
                   "\"sbp\": {\"bits\": [31, 30]}}, "
                   "{\"name\": \"fix\", \"abft\": {\"mode\": \"correct\", \"k\": 4}}, "
                   "{\"name\": \"p99\", \"clip\": {\"percentile\": 99.9, \"mode\": \"zero\", \"at\": [\"op:Gemm\"]}}, "
                   "{\"name\": \"r\", \"range\": {\"action\": \"flag\"}}]}");
    const bf_campaign_spec *s = &p->spec;
    assert_int_equal(s->n_mitigations, 7);   /* "none" first, added */
    assert_string_equal(s->mitigations[0].name, "none");
    assert_false(s->mitigations[0].clip.enabled || s->mitigations[0].abft.enabled || s->mitigations[0].sbp.enabled);
    assert_true(s->mitigations[1].clip.enabled && s->mitigations[1].clip.bounds == BF_CLIP_PROFILE);
    assert_true(s->mitigations[1].clip.percentile == 100 && !s->mitigations[1].clip.zero);
    assert_true(s->mitigations[2].abft.enabled && !s->mitigations[2].abft.correct);
    const bf_mitigation *t = &s->mitigations[3];
    assert_true(t->clip.bounds == BF_CLIP_FIXED && t->clip.lo == -100 && t->clip.hi == 100 && t->clip.nan_to_zero);
    assert_true(t->sbp.enabled && t->sbp.n_positions == 2 && t->sbp.positions[0] == 31);
    assert_true(s->mitigations[4].abft.correct && s->mitigations[4].abft.k == 4);
    assert_true(s->mitigations[5].clip.percentile == 99.9 && s->mitigations[5].clip.zero);
    assert_int_equal(s->mitigations[5].clip.n_at, 1);
    assert_true(s->mitigations[6].range.enabled && s->mitigations[6].range.flag && !s->mitigations[6].range.declared);
    done(p);

    /* "none" listed explicitly stays first, once */
    p = ok("{" HEAD "\"trials\": 10, \"faults\": {}, \"mitigations\": [\"sbp\", \"none\"]}");
    assert_int_equal(p->spec.n_mitigations, 2);
    assert_string_equal(p->spec.mitigations[1].name, "sbp");
    done(p);

    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [\"clipp\"]}", "/mitigations/0", "did you mean 'clip'?");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [\"clip\", \"clip\"]}", "/mitigations/1", "used twice");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"clip\": true}]}", "/mitigations/0/name", "required");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\"}]}", "/mitigations/0", "names no protection");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"clip\": {\"bounds\": [1, 0]}}]}",
                 "/mitigations/0/clip/bounds", "lo <= hi");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"clip\": {\"percentile\": 40}}]}",
                 "/mitigations/0/clip/percentile", "(50, 100]");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"abft\": {\"mode\": \"fix\"}}]}",
                 "/mitigations/0/abft/mode", "'detect' or 'correct'");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"sbp\": {\"bitz\": [1]}}]}",
                 "/mitigations/0/sbp/bitz", "did you mean 'bits'?");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"activations\"}, \"mitigations\": [\"range\"]}",
                 "/mitigations/0/range", "target 'weights'");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": []}", "/mitigations", "must not be empty");
    only_problem("{" HEADF "\"trials\": 1, \"stop\": {\"margin\": 0.1}, \"mitigations\": [\"clip\"]}", "/stop",
                 "same faults");
}

/* "ecc": true, a bare name, or an object; check_bits_faulty made explicit
 * from the fault model; each bad field named at its pointer. */
static void ecc_mitigation(void **state)
{
    (void)state;
    parsed *p = ok("{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 1e-4}, \"mitigations\": [\"ecc\", "
                   "{\"name\": \"e2\", \"ecc\": {\"check_bits_faulty\": false, \"tensors\": [\"emb*\"]}}, "
                   "{\"name\": \"e3\", \"ecc\": true, \"sbp\": true}]}");
    const bf_campaign_spec *s = &p->spec;
    assert_int_equal(s->n_mitigations, 4);
    assert_true(s->mitigations[1].ecc.enabled && s->mitigations[1].ecc.check_bits_faulty == BF_ECC_CHECK_FAULTY);
    assert_true(s->mitigations[2].ecc.check_bits_faulty == BF_ECC_CHECK_CLEAN && s->mitigations[2].ecc.n_tensors == 1);
    assert_string_equal(s->mitigations[2].ecc.tensors[0], "emb*");
    assert_true(s->mitigations[3].ecc.enabled && s->mitigations[3].sbp.enabled);
    done(p);
    /* single-bit models: the check bits stay clean by default */
    p = ok("{" HEADF "\"trials\": 5, \"mitigations\": [{\"name\": \"e\", \"ecc\": {}}]}");
    assert_int_equal(p->spec.mitigations[1].ecc.check_bits_faulty, BF_ECC_CHECK_CLEAN);
    done(p);

    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [\"ec\"]}", "/mitigations/0", "did you mean 'ecc'?");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"ecc\": 1}]}", "/mitigations/0/ecc",
                 "an object (or true");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"ecc\": false}]}", "/mitigations/0/ecc",
                 "an object (or true");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"ecc\": {\"check_bits\": true}}]}",
                 "/mitigations/0/ecc/check_bits", "'check_bits_faulty' or 'tensors'");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"ecc\": {\"check_bits_faulty\": \"yes\"}}]}",
                 "/mitigations/0/ecc/check_bits_faulty", "boolean");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"ecc\": {\"check_bits_faulty\": true}}]}",
                 "/mitigations/0/ecc/check_bits_faulty", "needs /faults/model 'ber'");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"ecc\": {\"tensors\": \"w\"}}]}",
                 "/mitigations/0/ecc/tensors", "array");
    only_problem("{" HEADF "\"trials\": 1, \"mitigations\": [{\"name\": \"x\", \"ecc\": {\"tensors\": [3]}}]}",
                 "/mitigations/0/ecc/tensors/0", "string");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"target\": \"activations\"}, \"mitigations\": [\"ecc\"]}",
                 "/mitigations/0/ecc", "target 'weights'");
}

/* ------------------------------------------------------------ --check */

static int check_files(int argc, char **argv)
{
    int bad = 0;
    for (int i = 0; i < argc; i++) {
        size_t len;
        char *text = read_file(argv[i], &len);
        if (!text) {
            fprintf(stderr, "%s: cannot read\n", argv[i]);
            return 2;
        }
        bf_campaign_spec s;
        bf_spec_problems pr;
        bf_status st = bf_spec_parse(text, len, &s, &pr);
        printf("%s %s\n", st == BF_OK ? "valid" : "invalid", argv[i]);
        for (size_t k = 0; k < pr.count; k++)
            printf("  %s: %s\n", pr.items[k].pointer, pr.items[k].message);
        bad |= st != BF_OK;
        bf_campaign_spec_free(&s);
        bf_spec_problems_free(&pr);
        free(text);
    }
    return bad;
}


/* Size limits on arrays and strings, and the limits set by the caller: each
 * problem at the pointer of the value, naming the limit; nothing else is
 * validated past one. */
static void size_limits(void **state)
{
    (void)state;
    bf_campaign_spec spec;
    bf_spec_problems pr;
    const char *ok = "{" HEADF "\"trials\": 10, \"sampling\": {\"list\": [{\"tensor\": \"w\", \"index\": 0, \"bit\": 1},"
                     " {\"tensor\": \"w\", \"index\": 1, \"bit\": 2}, {\"tensor\": \"a/b~cdefghijklmnop\", \"index\": 2, \"bit\": 3}]}}";
    bf_spec_limits lim = {.max_array = 2};
    assert_int_equal(bf_spec_parse_opts(ok, strlen(ok), &lim, &spec, &pr), BF_EINVAL);
    assert_int_equal(pr.count, 1);
    assert_string_equal(pr.items[0].pointer, "/sampling/list");
    assert_string_equal(pr.items[0].message, "3 entries; the limit is 2 (max_array)");
    bf_spec_problems_free(&pr);
    /* the string "a/b~cdefghijklmnop" is 18 bytes: a limit of 16 (which every
     * field name meets) finds it at its pointer */
    lim = (bf_spec_limits){.max_string = 16};
    assert_int_equal(bf_spec_parse_opts(ok, strlen(ok), &lim, &spec, &pr), BF_EINVAL);
    assert_int_equal(pr.count, 1);
    assert_string_equal(pr.items[0].pointer, "/sampling/list/2/tensor");
    assert_string_equal(pr.items[0].message, "a string of 18 bytes; the limit is 16 (max_string)");
    bf_spec_problems_free(&pr);
    /* field names are held to it too, and named at their object */
    const char *longkey = "{" HEADF "\"trials\": 10, \"verylongfieldname\": 1}";
    assert_int_equal(bf_spec_parse_opts(longkey, strlen(longkey), &lim, &spec, &pr), BF_EINVAL);
    assert_int_equal(pr.count, 1);
    assert_string_equal(pr.items[0].pointer, "");
    assert_string_equal(pr.items[0].message, "a field name of 17 bytes; the limit is 16 (max_string)");
    bf_spec_problems_free(&pr);
    /* a key with '/' and '~' is escaped in the pointer (RFC 6901) */
    const char *odd = "{" HEADF "\"trials\": 10, \"x/y~z\": [1, 2, 3]}";
    lim = (bf_spec_limits){.max_array = 2};
    assert_int_equal(bf_spec_parse_opts(odd, strlen(odd), &lim, &spec, &pr), BF_EINVAL);
    assert_int_equal(pr.count, 1);
    assert_string_equal(pr.items[0].pointer, "/x~1y~0z");
    bf_spec_problems_free(&pr);
    /* depth and bytes set by the caller */
    lim = (bf_spec_limits){.max_depth = 2};
    assert_int_equal(bf_spec_parse_opts(ok, strlen(ok), &lim, &spec, &pr), BF_EINVAL);
    assert_int_equal(pr.count, 1);
    assert_non_null(strstr(pr.items[0].message, "nested deeper than 2 levels"));
    bf_spec_problems_free(&pr);
    lim = (bf_spec_limits){.max_bytes = 10};
    assert_int_equal(bf_spec_parse_opts(ok, strlen(ok), &lim, &spec, &pr), BF_EINVAL);
    assert_int_equal(pr.count, 1);
    assert_non_null(strstr(pr.items[0].message, "the limit is 10 (10 B, max_bytes)"));
    bf_spec_problems_free(&pr);
    /* within the default limits, it goes on to be validated (and has other problems) */
    bf_spec_parse_opts(ok, strlen(ok), NULL, &spec, &pr);
    for (size_t i = 0; i < pr.count; i++) assert_null(strstr(pr.items[i].message, "(max_"));
    bf_spec_problems_free(&pr);
    bf_campaign_spec_free(&spec);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--check") == 0) return check_files(argc - 2, argv + 2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(fixed_and_profiled),
        cmocka_unit_test(size_limits),
        cmocka_unit_test(issue_example),
        cmocka_unit_test(every_field),
        cmocka_unit_test(language_model_metrics),
        cmocka_unit_test(vision_metrics),
        cmocka_unit_test(ber_sweep),
        cmocka_unit_test(zero_points),
        cmocka_unit_test(fault_list),
        cmocka_unit_test(many_problems),
        cmocka_unit_test(unknown_fields),
        cmocka_unit_test(wrong_types),
        cmocka_unit_test(adaptive_fields_hostile),
        cmocka_unit_test(cross_field_rules),
        cmocka_unit_test(rules_table),
        cmocka_unit_test(fault_groups_hostile),
        cmocka_unit_test(syntax_errors),
        cmocka_unit_test(limits),
        cmocka_unit_test(generate_field),
        cmocka_unit_test(truncations_and_mutations),
        cmocka_unit_test(problems_as_json),
        cmocka_unit_test(docs_examples),
        cmocka_unit_test(mitigations),
        cmocka_unit_test(ecc_mitigation),
        cmocka_unit_test(kv_cache_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
