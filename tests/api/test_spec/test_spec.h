/* test_spec's shared fixtures (in test_spec.c, with the runner) and the tests
 * of its parts, one subject each (the house's 900 lines: tests/arch/size_check.py). */
#ifndef BF_TESTS_API_TEST_SPEC_H
#define BF_TESTS_API_TEST_SPEC_H

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

/* the fixtures */
typedef struct parsed {
    bf_status st;
    bf_campaign_spec spec;
    bf_spec_problems pr;
} parsed;

#define assert_problem(p, pointer, text) assert_string_equal(msg_at((p), (pointer)), (text))
#define assert_problem_has(p, pointer, part) has_((p), (pointer), (part))
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define HEAD "\"model\": \"m.onnx\", \"dataset\": \"d.safetensors\", "
#define HEADF HEAD "\"faults\": {}, "

parsed *parse(const char *json);
void done(parsed *p);
void dump(const parsed *p);
parsed *ok(const char *json);
const char *msg_at(const parsed *p, const char *pointer);
void has_(const parsed *p, const char *pointer, const char *part);
void only_problem(const char *json, const char *pointer, const char *part);
char *read_file(const char *path, size_t *len);
int check_files(int argc, char **argv);

/* valid.c: valid specs and what they set */
void defaults(void **state);
void issue_example(void **state);
void every_field(void **state);
void language_model_metrics(void **state);
void vision_metrics(void **state);
void zero_points(void **state);
void ber_sweep(void **state);
void fixed_and_profiled(void **state);
void fault_list(void **state);

/* invalid.c: invalid specs and their problems */
void many_problems(void **state);
void adaptive_fields_hostile(void **state);
void unknown_fields(void **state);
void wrong_types(void **state);
void cross_field_rules(void **state);

/* rules.c: core's rules through JSON (fault groups, the rules table, kv_cache) */
void fault_groups_hostile(void **state);
void rules_table(void **state);
void kv_cache_target(void **state);

/* document.c: the document (syntax, limits, generate, truncations and mutations, problems as JSON, sizes) */
void syntax_errors(void **state);
void limits(void **state);
void generate_field(void **state);
void truncations_and_mutations(void **state);
void problems_as_json(void **state);
void size_limits(void **state);

/* examples.c: the docs' examples and mitigations */
void docs_examples(void **state);
void mitigations(void **state);
void ecc_mitigation(void **state);

#endif
