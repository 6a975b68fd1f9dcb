/* Campaign specs: valid specs give the right struct (defaults included), every
 * problem of an invalid one is reported at its JSON Pointer, and no input --
 * truncated, mangled, deep or huge -- does more than return problems.
 *
 * `test_spec --check FILE...` validates files instead of running the tests
 * (tests/api/check_schema.py compares its verdicts with the JSON Schema's). */
#include "test_spec/test_spec.h"

/* -------------------------------------------------------------- helpers */

parsed *parse(const char *json)
{
    parsed *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->st = bf_spec_parse(json, strlen(json), &p->spec, &p->pr);
    return p;
}

void done(parsed *p)
{
    bf_campaign_spec_free(&p->spec);
    bf_spec_problems_free(&p->pr);
    free(p);
}

void dump(const parsed *p)
{
    for (size_t i = 0; i < p->pr.count; i++)
        print_message("  %s: %s\n", p->pr.items[i].pointer, p->pr.items[i].message);
}

/* The spec parses cleanly. */
parsed *ok(const char *json)
{
    parsed *p = parse(json);
    if (p->st != BF_OK || p->pr.count != 0) {
        dump(p);
        fail_msg("expected a valid spec: %s", json);
    }
    return p;
}

/* The message at `pointer` (which must be reported exactly once). */
const char *msg_at(const parsed *p, const char *pointer)
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

void has_(const parsed *p, const char *pointer, const char *part)
{
    const char *m = msg_at(p, pointer);
    if (!strstr(m, part)) fail_msg("%s: '%s' does not contain '%s'", pointer, m, part);
}

/* Exactly one problem, at `pointer`, containing `part`. */
void only_problem(const char *json, const char *pointer, const char *part)
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

char *read_file(const char *path, size_t *len)
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

/* ------------------------------------------------------------ --check */

int check_files(int argc, char **argv)
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
