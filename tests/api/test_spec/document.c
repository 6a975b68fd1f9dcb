/* test_spec: the document (syntax, limits, generate, truncations and mutations, problems as JSON, sizes). */
#include "test_spec.h"

/* ------------------------------------------------------ the document */

void syntax_errors(void **state)
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

void limits(void **state)
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
void generate_field(void **state)
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
void truncations_and_mutations(void **state)
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

void problems_as_json(void **state)
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

/* Size limits on arrays and strings, and the limits set by the caller: each
 * problem at the pointer of the value, naming the limit; nothing else is
 * validated past one. */
void size_limits(void **state)
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
