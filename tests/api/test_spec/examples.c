/* test_spec: the docs' examples and mitigations. */
#include "test_spec.h"

/* ------------------------------------------------- the docs' examples */

/* Every ```json block of docs/CAMPAIGNS.md and of the parts split from it
 * (docs/campaigns/: the examples, the results) is a complete, valid spec
 * (other JSON there -- invalid specs, replies -- is fenced as ```jsonc or
 * ```text). */
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

void docs_examples(void **state)
{
    (void)state;
    doc_tally t = {0};
    int n = doc_specs(BF_DOCS_DIR "/CAMPAIGNS.md", &t) + doc_specs(BF_DOCS_DIR "/campaigns/examples.md", &t) +
            doc_specs(BF_DOCS_DIR "/campaigns/results.md", &t);
    assert_true(n >= 3);
    assert_true(t.ber >= 1);                       /* the DLRM sweep, 1e-9..1e-3 x 10 */
    assert_true(t.lists >= 1);
    /* docs/MITIGATIONS.md: its example and the specs of its results tables */
    doc_tally m = {0};
    assert_true(doc_specs(BF_DOCS_DIR "/MITIGATIONS.md", &m) >= 1);
    assert_true(m.paired >= 1);
}

void mitigations(void **state)
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
void ecc_mitigation(void **state)
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
