/* test_spec: invalid specs and their problems. */
#include "test_spec.h"

/* ------------------------------------------------------ invalid specs */

void many_problems(void **state)
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
void adaptive_fields_hostile(void **state)
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

void unknown_fields(void **state)
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

void wrong_types(void **state)
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

void cross_field_rules(void **state)
{
    (void)state;
    /* A spec that breaks one of core's rules alone, and its whole message, is
     * a row of rules.c's RULE_ROWS (rules_table); the 18 such cases this test
     * also held (the same JSON and pointer, part of the message) are there
     * only. Here: the field checks around the rules, and inputs the table has
     * not (other representations, positions, numbers written as reals). */
    /* positions and bits against the representation */
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"fp16\", \"positions\": [3, 20]}}",
                 "/faults/positions/1", "must be 0..15 for fp16, got 20");
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"representation\": \"int8\", \"bits\": 9}}",
                 "/faults/bits", "must be 1..8 for int8, got 9");
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
    only_problem("{" HEAD "\"trials\": 1, \"faults\": {\"per_channel\": false}}", "/faults/per_channel",
                 "applies only to fixed-point representations (int8 ... int2, uint8 ... uint2), not 'fp32'");

    /* BER */
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\", \"rate\": 0.1, \"rates\": [0.1]}}",
                 "/faults/rates", "give either 'rate' or 'rates', not both");
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\", \"rates\": [0.1, 0]}}", "/faults/rates/1",
                 "must be a probability in (0, 1], got 0");
    only_problem("{" HEAD "\"faults\": {\"model\": \"ber\", \"rates\": []}}", "/faults/rates", "must not be empty");
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
    only_problem("{" HEADF "\"sampling\": {\"list\": []}}", "/sampling/list", "must not be empty");
    only_problem("{" HEADF "\"sampling\": \"list\"}", "/sampling", "an explicit list is an object");
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
