/* test_spec: valid specs and what they set. */
#include "test_spec.h"

/* ---------------------------------------------------------- valid specs */

void defaults(void **state)
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

void issue_example(void **state)
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

void every_field(void **state)
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
void language_model_metrics(void **state)
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
void vision_metrics(void **state)
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
void zero_points(void **state)
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

void ber_sweep(void **state)
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
void fixed_and_profiled(void **state)
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

void fault_list(void **state)
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
