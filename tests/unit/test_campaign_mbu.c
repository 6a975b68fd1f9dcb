/* Multi-bit upsets in 64-bit storage words (faults.burst "word",
 * faults.words; docs/CAMPAIGNS.md "Multi-bit upsets"): the populations
 * against a plain enumeration written here from the definition (every
 * word, every first bit, each checked bit by bit against the tensor's
 * end), every drawn upset inside its word (burst) or on one bit of
 * consecutive words (column), the trial equal to the same bits flipped by
 * hand through bf_evaluator_run (as `bitflip eval --flip`), the
 * differential engine equal to exact, and seeds, threads and shards; the
 * same at a rate (model "ber"). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"
#include "bitflip/eval.h"
#include "bitflip/fault.h"
#include "campaign_check.h"

#define FIX BF_FIXTURES "/conformance/"

typedef tc_loaded fx;

static int setup(void **state)
{
    return tc_group_open(state, FIX "mlp_ops_op13");
}

static int teardown(void **state)
{
    return tc_group_close(state);
}

static char *all_tensors[] = {"*"};

static bf_campaign_spec spec(bf_repr repr, int burst_bits, int words)
{
    bf_campaign_spec s = {0};
    s.seed = 7;
    s.trials = 200;
    s.tensors = all_tensors;
    s.n_tensors = 1;
    s.model_kind = BF_FAULT_BITFLIP;
    s.bits = burst_bits ? burst_bits : 1;
    s.burst = burst_bits ? BF_BURST_WORD : 0;
    s.words = words;
    s.repr = repr;
    s.sampling = BF_SAMPLE_UNIFORM;
    s.critical_metric = -1;
    s.batch = 16;
    return s;
}

/* Word bit b of word k of a tensor of e elements of m bits is stored when
 * its element k * (64 / m) + b / m exists. */
static int on_tensor(int64_t e, int m, int64_t k, int b) { return k * (64 / m) + b / m < e; }

/* The population by enumeration: every (word, first bit) whose w bits are
 * all stored; every (first word, bit) whose n words all hold that bit
 * stored, the bit's element bit allowed. */
static int64_t enumerate(const bf_campaign *c, int m, int w, int n, const int *allowed, int n_allowed)
{
    int64_t total = 0;
    for (size_t s = 0; s < bf_campaign_num_sites(c); s++) {
        int64_t e = bf_campaign_site(c, s)->elements, words = (e * m + 63) / 64;
        for (int64_t k = 0; k < words; k++)
            for (int b = 0; b < 64; b++) {
                int ok = 1;
                if (w) {
                    if (b + w > 64) continue;
                    for (int j = 0; j < w; j++) ok &= on_tensor(e, m, k, b + j);
                } else {
                    int a = n_allowed == 0;
                    for (int i = 0; i < n_allowed; i++) a |= allowed[i] == b % m;
                    ok = a && k + n <= words;
                    for (int i = 0; ok && i < n; i++) ok &= on_tensor(e, m, k + i, b);
                }
                total += ok;
            }
    }
    return total;
}

/* Records kept at their trial number (shards deliver theirs only). */
static void keep_at(void *user, const bf_trial_record *rec)
{
    tc_recs *k = user;
    if (rec->trial >= 0 && rec->trial < k->n) k->r[rec->trial] = *rec;
}

static void records_run(bf_campaign *c, int threads, int64_t si, int64_t sn, tc_recs *rs, bf_campaign_result *res)
{
    bf_error err = {0};
    bf_campaign_opts o = {.threads = threads, .shard_index = si, .shard_count = sn, .on_trial = keep_at, .user = rs};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("run: %s", err.msg);
}

/* A record's faults as word bits: all in one site; word and bit of each. */
static void word_bits(const bf_campaign *c, const bf_trial_record *r, int m, int64_t *word, int *bits, int *nb)
{
    int64_t epw = 64 / m;
    *nb = 0;
    assert_int_equal(r->n_kept, r->n_faults);
    for (int i = 0; i < r->n_kept; i++) {
        const bf_applied_fault *a = &r->faults[i];
        assert_int_equal(a->site, r->faults[0].site);
        assert_true(a->index >= 0 && a->index < bf_campaign_site(c, (size_t)a->site)->elements);
        assert_true(a->mask != 0 && (m == 32 || a->mask >> m == 0));
        for (int b = 0; b < m; b++)
            if (a->mask >> b & 1) {
                word[*nb] = a->index / epw;
                bits[*nb] = (int)(a->index % epw) * m + b;
                (*nb)++;
            }
    }
}

/* Bursts: the population by enumeration, and every upset w adjacent bits
 * of one word (so never across a word boundary, though across elements). */
static void word_bursts(void **state)
{
    fx *f = *state;
    const struct { bf_repr repr; int m, w; } cases[] = {
        {BF_REPR_FP32, 32, 2}, {BF_REPR_FP32, 32, 40}, {BF_REPR_FP32, 32, 64}, {BF_REPR_FP16, 16, 5},
        {BF_REPR_INT8, 8, 9}, {BF_REPR_INT4, 4, 7}, {BF_REPR_UINT2, 2, 3},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        bf_campaign_spec s = spec(cases[k].repr, cases[k].w, 0);
        bf_campaign *c = tc_make(f->m, f->ds, &s);
        assert_true(bf_campaign_population(c) == (double)enumerate(c, cases[k].m, cases[k].w, 0, NULL, 0));
        tc_recs rs = {calloc((size_t)s.trials, sizeof *rs.r), s.trials};
        bf_campaign_result res;
        records_run(c, 2, 0, 1, &rs, &res);
        for (int64_t t = 0; t < s.trials; t++) {
            int64_t word[64];
            int bits[64], nb;
            /* w bits of m-bit values: at most ceil(w / m) + 1 <= 8 elements, all kept */
            word_bits(c, &rs.r[t], cases[k].m, word, bits, &nb);
            assert_int_equal(nb, cases[k].w);
            for (int i = 1; i < nb; i++) {
                assert_int_equal(word[i], word[0]);
                assert_int_equal(bits[i], bits[i - 1] + 1);
            }
            /* more bits than a value has: the burst spans elements */
            if (cases[k].w > cases[k].m) assert_true(rs.r[t].n_faults >= 2);
        }
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
        free(rs.r);
    }
}

/* A tiny case by hand: fp32 in 64-bit words is two elements a word. A
 * tensor of 3 elements has one full word and a last word of 32 bits: a
 * burst of 40 bits fits the full word at 65 - 40 = 25 starts, the last
 * word at none; a burst of 8 at 57 + 25 = 82. The mlp's sites' counts in
 * these terms, summed by this formula, must be the population. */
static void burst_counts_by_formula(void **state)
{
    fx *f = *state;
    const int ws[] = {8, 40};
    for (int i = 0; i < 2; i++) {
        bf_campaign_spec s = spec(BF_REPR_FP32, ws[i], 0);
        bf_campaign *c = tc_make(f->m, f->ds, &s);
        double want = 0;
        for (size_t k = 0; k < bf_campaign_num_sites(c); k++) {
            int64_t e = bf_campaign_site(c, k)->elements, full = e / 2, last_bits = (e % 2) * 32;
            want += (double)(full * (65 - ws[i]) + (last_bits >= ws[i] ? last_bits - ws[i] + 1 : 0));
        }
        assert_true(bf_campaign_population(c) == want);
        bf_campaign_free(c);
    }
    /* the 3-element tensor of the comment, by the same formula */
    assert_int_equal(1 * (65 - 40) + 0, 25);
    assert_int_equal(1 * (65 - 8) + (32 - 8 + 1), 82);
}

/* Columns: the population by enumeration (positions restrict the element
 * bit), and every upset one bit, the same, in n consecutive words. */
static void columns(void **state)
{
    fx *f = *state;
    const struct { bf_repr repr; int m, n; } cases[] = {
        {BF_REPR_FP32, 32, 2}, {BF_REPR_FP32, 32, 8}, {BF_REPR_BF16, 16, 3}, {BF_REPR_INT8, 8, 5}, {BF_REPR_INT4, 4, 2},
    };
    int pos[] = {0, 3};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int with_pos = 0; with_pos < 2; with_pos++) {
            bf_campaign_spec s = spec(cases[k].repr, 0, cases[k].n);
            if (with_pos) {
                memcpy(s.positions, pos, sizeof pos);
                s.n_positions = 2;
            }
            bf_campaign *c = tc_make(f->m, f->ds, &s);
            assert_true(bf_campaign_population(c) ==
                        (double)enumerate(c, cases[k].m, 0, cases[k].n, with_pos ? pos : NULL, with_pos ? 2 : 0));
            tc_recs rs = {calloc((size_t)s.trials, sizeof *rs.r), s.trials};
            bf_campaign_result res;
            records_run(c, 1, 0, 1, &rs, &res);
            for (int64_t t = 0; t < s.trials; t++) {
                int64_t word[64];
                int bits[64], nb;
                word_bits(c, &rs.r[t], cases[k].m, word, bits, &nb);
                assert_int_equal(nb, cases[k].n);
                for (int i = 1; i < nb; i++) {
                    assert_int_equal(word[i], word[i - 1] + 1);
                    assert_int_equal(bits[i], bits[0]);
                }
                if (with_pos) assert_true(bits[0] % cases[k].m == 0 || bits[0] % cases[k].m == 3);
            }
            bf_campaign_result_free(&res);
            bf_campaign_free(c);
            free(rs.r);
        }
    }
}

/* The parameter a site names. */
static size_t param_of(const bf_model *m, const char *name)
{
    for (size_t p = 0; p < bf_model_num_params(m); p++)
        if (strcmp(bf_model_param(m, p)->tensor->name, name) == 0) return p;
    fail_msg("no parameter '%s'", name);
    return 0;
}

typedef struct outs {
    float *o;
    int64_t cols, samples, trials;
} outs;

static void keep_outputs(void *user, int64_t trial, const float *o, int64_t samples, int64_t cols)
{
    outs *k = user;
    if (!k->o) {
        k->o = calloc((size_t)(k->trials * samples * cols), sizeof *k->o);
        k->samples = samples;
        k->cols = cols;
    }
    memcpy(k->o + trial * samples * cols, o, (size_t)(samples * cols) * sizeof *o);
}

/* Runs c for its records into rs (2 threads), then again (same trials,
 * same seed) for its outputs into k (1 thread); returns an evaluator of
 * the fixture at the campaign's batch, for the flips by hand. */
static bf_evaluator *records_and_outputs(const fx *f, bf_campaign *c, int64_t batch, tc_recs *rs, outs *k)
{
    bf_campaign_result res;
    bf_error err = {0};
    records_run(c, 2, 0, 1, rs, &res);
    bf_campaign_result_free(&res);
    bf_campaign_opts o2 = {.threads = 1, .on_outputs = keep_outputs, .user = k};
    if (bf_campaign_run(c, &o2, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    bf_campaign_result_free(&res);
    bf_eval_opts eo = {.batch = batch, .threads = 1};
    bf_evaluator *ev;
    if (bf_evaluator_create(f->m, f->ds, &eo, &ev, &err) != BF_OK) fail_msg("evaluator: %s", err.msg);
    return ev;
}

/* Record r's faults as single-bit flips into fl (room for all); their
 * count. */
static size_t record_flips(const fx *f, const bf_campaign *c, const bf_trial_record *r, bf_bitflip *fl)
{
    size_t n = 0;
    for (int i = 0; i < r->n_kept; i++) {
        const bf_applied_fault *a = &r->faults[i];
        size_t p = param_of(f->m, bf_campaign_site(c, (size_t)a->site)->name);
        for (int b = 0; b < 32; b++)
            if (a->mask >> b & 1) fl[n++] = (bf_bitflip){.param = p, .index = a->index, .bit = b};
    }
    return n;
}

/* fp32: each trial's outputs equal one pass with the record's bits flipped
 * one by one (bf_bitflip, as `bitflip eval --flip` applies them) at the
 * campaign's batch, bit for bit. */
static void trial_equals_flips_by_hand(void **state)
{
    fx *f = *state;
    for (int kind = 0; kind < 2; kind++) {
        bf_campaign_spec s = kind ? spec(BF_REPR_FP32, 0, 4) : spec(BF_REPR_FP32, 37, 0);
        s.trials = 24;
        bf_campaign *c = tc_make(f->m, f->ds, &s);
        tc_recs rs = {calloc((size_t)s.trials, sizeof *rs.r), s.trials};
        outs k = {.trials = s.trials};
        bf_error err = {0};
        bf_evaluator *ev = records_and_outputs(f, c, s.batch, &rs, &k);
        for (int64_t t = 0; t < s.trials; t++) {
            bf_bitflip fl[64];
            size_t n = record_flips(f, c, &rs.r[t], fl);
            assert_int_equal(n, kind ? 4 : 37);
            bf_eval_result er;
            if (bf_evaluator_run(ev, fl, n, &er, &err) != BF_OK) fail_msg("eval: %s", err.msg);
            assert_int_equal(er.samples, k.samples);
            assert_int_equal(er.out_cols, k.cols);
            assert_memory_equal(er.outputs, k.o + t * k.samples * k.cols, (size_t)(k.samples * k.cols) * sizeof(float));
        }
        bf_evaluator_free(ev);
        bf_campaign_free(c);
        free(rs.r);
        free(k.o);
    }
}

/* The differential engine equals exact, record for record; the same seed
 * gives the same upsets on 1 or 2 threads and split in shards. */
static void exact_seeds_shards(void **state)
{
    fx *f = *state;
    double scale = tc_out_scale(f->m, f->ds);
    for (int kind = 0; kind < 2; kind++) {
        bf_campaign_spec s = kind ? spec(BF_REPR_INT8, 0, 3) : spec(BF_REPR_FP16, 11, 0);
        s.trials = 60;
        tc_tally tally = {0};
        tc_both(f->m, f->ds, scale, "mlp", &s, kind ? "column int8" : "burst fp16", &tally, NULL);
        tc_assert_agree("multi-bit upsets", &tally, 60);

        bf_campaign *c = tc_make(f->m, f->ds, &s);
        tc_recs one = {calloc((size_t)s.trials, sizeof *one.r), s.trials};
        tc_recs parts = {calloc((size_t)s.trials, sizeof *parts.r), s.trials};
        bf_campaign_result a, b[3];
        records_run(c, 1, 0, 1, &one, &a);
        for (int sh = 0; sh < 3; sh++) records_run(c, 2, sh, 3, &parts, &b[sh]);
        for (int64_t t = 0; t < s.trials; t++) tc_assert_same_record(&one.r[t], &parts.r[t]);
        bf_campaign_result_free(&a);
        for (int sh = 0; sh < 3; sh++) bf_campaign_result_free(&b[sh]);
        bf_campaign_free(c);

        /* another seed, other upsets */
        s.seed = 8;
        c = tc_make(f->m, f->ds, &s);
        tc_recs other = {calloc((size_t)s.trials, sizeof *other.r), s.trials};
        records_run(c, 1, 0, 1, &other, &a);
        int differ = 0;
        for (int64_t t = 0; t < s.trials; t++)
            differ += other.r[t].faults[0].site != one.r[t].faults[0].site ||
                      other.r[t].faults[0].index != one.r[t].faults[0].index;
        assert_true(differ > 0);
        bf_campaign_result_free(&a);
        bf_campaign_free(c);
        free(one.r);
        free(parts.r);
        free(other.r);
    }
}

/* Model "ber": every member of the population upsets at the rate. The
 * faults are distinct elements in ascending order with nonzero masks; at a
 * low rate each trial (all its faults kept) equals its bits flipped by
 * hand; differential equals exact; shards give the same trials. */
static void at_a_rate(void **state)
{
    fx *f = *state;
    static double rates[] = {2e-5, 1e-4};
    double scale = tc_out_scale(f->m, f->ds);
    for (int kind = 0; kind < 2; kind++) {
        bf_campaign_spec s = kind ? spec(BF_REPR_FP32, 0, 2) : spec(BF_REPR_FP32, 3, 0);
        s.model_kind = BF_FAULT_BER;
        s.rates = rates;
        s.n_rates = 2;
        s.repeats = 12;
        s.trials = 0;
        bf_campaign *c = tc_make(f->m, f->ds, &s);
        assert_int_equal(bf_campaign_num_trials(c), 24);
        tc_recs rs = {calloc(24, sizeof *rs.r), 24};
        outs k = {.trials = 24};
        bf_campaign_result res;
        bf_error err = {0};
        bf_evaluator *ev = records_and_outputs(f, c, s.batch, &rs, &k);
        int64_t checked = 0, struck = 0;
        for (int64_t t = 0; t < 24; t++) {
            const bf_trial_record *r = &rs.r[t];
            assert_int_equal(r->rate_index, t / 12);
            struck += r->n_faults;
            for (int i = 0; i < r->n_kept; i++) {
                assert_true(r->faults[i].mask != 0);
                if (i > 0)
                    assert_true(r->faults[i].site > r->faults[i - 1].site ||
                                (r->faults[i].site == r->faults[i - 1].site && r->faults[i].index > r->faults[i - 1].index));
            }
            if (r->n_faults > BF_TRIAL_FAULTS_MAX) continue;
            bf_bitflip fl[8 * 32];
            size_t n = record_flips(f, c, r, fl);
            bf_eval_result er;
            if (bf_evaluator_run(ev, fl, n, &er, &err) != BF_OK) fail_msg("eval: %s", err.msg);
            assert_memory_equal(er.outputs, k.o + t * k.samples * k.cols, (size_t)(k.samples * k.cols) * sizeof(float));
            checked++;
        }
        assert_true(checked >= 12);   /* the low rate's trials at least */
        assert_true(struck > 0);
        bf_evaluator_free(ev);

        tc_recs parts = {calloc(24, sizeof *parts.r), 24};
        for (int sh = 0; sh < 2; sh++) {
            records_run(c, 1, sh, 2, &parts, &res);
            bf_campaign_result_free(&res);
        }
        for (int64_t t = 0; t < 24; t++) tc_assert_same_record(&rs.r[t], &parts.r[t]);
        bf_campaign_free(c);
        tc_tally tally = {0};
        tc_both(f->m, f->ds, scale, "mlp", &s, kind ? "column at a rate" : "burst at a rate", &tally, NULL);
        tc_assert_agree("multi-bit upsets at a rate", &tally, 24);
        free(rs.r);
        free(parts.r);
        free(k.o);
    }
}

/* bf_campaign_create refuses what the rules refuse, naming the field. */
static void refusals(void **state)
{
    fx *f = *state;
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_campaign_spec s = spec(BF_REPR_INT6, 4, 0);
    assert_int_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "faults.burst"));
    s = spec(BF_REPR_FP32, 0, 2);
    s.sampling = BF_SAMPLE_EXHAUSTIVE;
    s.trials = 0;
    assert_int_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "sampling"));
    assert_non_null(strstr(err.msg, "faults.words"));
    assert_null(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(word_bursts),        cmocka_unit_test(burst_counts_by_formula),
        cmocka_unit_test(columns),            cmocka_unit_test(trial_equals_flips_by_hand),
        cmocka_unit_test(exact_seeds_shards), cmocka_unit_test(at_a_rate),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
