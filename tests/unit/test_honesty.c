/* Do the intervals keep their promise? An exhaustive campaign gives the
 * truth (every single-bit fault of the selected tensors once); then many
 * seeded campaigns of each design (uniform, per_tensor, per_bit, adaptive)
 * estimate it. Each design's 95% intervals must cover the truth, for the
 * overall critical rate and for every tensor's, in at least 93% of the
 * campaigns, and the estimator's mean over them must sit within three of
 * its standard errors of the truth (no bias: one standard error would fail
 * an unbiased estimator a third of the time; docs/STATISTICS.md).
 *
 * Sizes: BF_HONESTY_RUNS campaigns per design (default 400: an honest
 * 95% interval covers in 400 runs at 0.95 +- 0.011, so 0.93 is two
 * standard errors of Monte Carlo noise below; at 200 runs it is barely
 * more than one),
 * BF_HONESTY_TRIALS trials each (default 600), BF_HONESTY_TENSORS "all"
 * for every tensor of the model (default: three small ones, so that the
 * whole test stays well under a minute). bench/honesty.sh runs the full
 * version; its table is in docs/STATISTICS.md. The steered adaptive design
 * (stop targets shaping the allocation) runs BF_HONESTY_STEERED_RUNS
 * campaigns: by default 200, issue 32's minimum ("at least 200 seeded
 * adaptive campaigns ... coverage >= 93%"), as it adds no new estimator to
 * the plain adaptive design's 400, only another allocation, and at 400
 * its campaigns were over half of this test's time (about 11 of 19.8
 * CPU-s in release; 14.4 in all at 200, tests/README.md); or
 * BF_HONESTY_RUNS when that is given (bench/honesty.sh). Under the sanitizers
 * (BF_SANITIZED) 10 campaigns per design run every path, printing their
 * coverage without judging it: 10 runs cannot tell 0.93 from 0.95 (nor
 * could the 40 run there before: 20.6 CPU-s under ASan, 7.0 at 10, for
 * another 30 seeds of the same code; tests/README.md, "The sixth round"). */
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
#include "campaign/campaign_impl.h"   /* the adaptive need (adapt.h), to check a test's premise */
#include "onnx_graph.h"

#define FIX BF_FIXTURES "/conformance/"
#define MAX_SITES 16
/* adaptive_rounds_do_not_follow_the_chunk's campaign: a seed and an overall
 * margin whose need ends a round off a multiple of 4 (the test checks it) */
#define HONESTY_CHUNK_SEED 7
#define HONESTY_CHUNK_MARGIN 0.057   /* need 208.45: 209 trials, 212 rounded to 4, 224 to 16 */

static char *small_tensors[] = {"net.2.bias", "net.4.weight", "net.4.bias"};
static char *all_tensors[] = {"*"};

typedef struct fx {
    bf_model *m;
    bf_dataset *ds;
    int runs, steered_runs;
    int64_t trials;
    int all;
    size_t n_sites;
    double truth[MAX_SITES + 1];   /* per site, then overall: the critical rate */
} fx;

static int64_t env_int(const char *name, int64_t dflt)
{
    const char *v = getenv(name);
    return v && atoll(v) > 0 ? atoll(v) : dflt;
}

static bf_campaign_spec spec_of(const fx *f, bf_sampling design, uint64_t seed)
{
    bf_campaign_spec s = {0};
    s.seed = seed;
    s.trials = design == BF_SAMPLE_EXHAUSTIVE ? 0 : f->trials;
    s.tensors = f->all ? all_tensors : small_tensors;
    s.n_tensors = f->all ? 1 : 3;
    s.model_kind = BF_FAULT_BITFLIP;
    s.bits = 1;
    s.repr = BF_REPR_FP32;
    s.sampling = design;
    s.critical_metric = -1;
    s.stop_confidence = 0.95;
    s.batch = 64;
    return s;
}

static void run_one(const fx *f, const bf_campaign_spec *s, bf_campaign **c, bf_campaign_result *r)
{
    bf_error err = {0};
    if (bf_campaign_create(f->m, f->ds, s, c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    bf_campaign_opts o = {.threads = 2};
    if (bf_campaign_run(*c, &o, r, &err) != BF_OK) fail_msg("run: %s", err.msg);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    bf_error err = {0};
    if (!f || bf_model_load_file(FIX "digits_mlp.onnx", &f->m, &err) ||
        bf_dataset_load_file(FIX "digits_mlp.eval.safetensors", &f->ds, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
#ifdef BF_SANITIZED
    f->runs = (int)env_int("BF_HONESTY_RUNS", 10);   /* the paths, not the statistics (tests/CMakeLists.txt) */
#else
    f->runs = (int)env_int("BF_HONESTY_RUNS", 400);
#endif
    f->steered_runs = (int)env_int("BF_HONESTY_STEERED_RUNS", getenv("BF_HONESTY_RUNS") || f->runs < 200 ? f->runs : 200);
    f->trials = env_int("BF_HONESTY_TRIALS", 600);
    f->all = getenv("BF_HONESTY_TENSORS") && strcmp(getenv("BF_HONESTY_TENSORS"), "all") == 0;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    bf_model_free(f->m);
    bf_dataset_free(f->ds);
    free(f);
    return 0;
}

/* The truth: every fault once; its rates are exact (zero-width intervals). */
static void exhaustive_truth(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = spec_of(f, BF_SAMPLE_EXHAUSTIVE, 1);
    bf_campaign *c;
    bf_campaign_result r;
    run_one(f, &s, &c, &r);
    f->n_sites = bf_campaign_num_sites(c);
    assert_true(f->n_sites <= MAX_SITES);
    int64_t pop = 0;
    for (size_t i = 0; i < f->n_sites; i++) pop += bf_campaign_site(c, i)->elements * 32;
    assert_int_equal(r.trials_done, pop);
    assert_int_equal(bf_campaign_num_trials(c), pop);
    /* every (element, bit) once: each tensor-bit cell holds its elements */
    for (size_t i = 0; i < f->n_sites; i++)
        for (int b = 0; b < 32; b++) {
            int64_t n = 0;
            for (int o = 0; o < BF_OUTCOME_COUNT; o++) n += r.by_site_bit[i * 64 + (size_t)b].n[o];
            assert_int_equal(n, bf_campaign_site(c, i)->elements);
        }
    bf_design d;
    bf_campaign_design(c, &d);
    for (size_t i = 0; i <= f->n_sites; i++) {
        int64_t site = i < f->n_sites ? (int64_t)i : -1;
        const bf_outcome_counts *k = site >= 0 ? &r.by_site[i] : &r.total;
        int64_t n = 0;
        for (int o = 0; o < BF_OUTCOME_COUNT; o++) n += k->n[o];
        f->truth[i] = (double)k->n[BF_OUTCOME_CRITICAL] / (double)n;
        bf_estimate e;
        bf_rate_estimate(&d, &r, site, -1, BF_OUTCOME_CRITICAL, 0.95, &e);
        assert_true(e.rate == f->truth[i] && e.lo == e.rate && e.hi == e.rate && e.se == 0);
    }
    bf_campaign_result_free(&r);
    bf_campaign_free(c);
}

static const char *design_name(bf_sampling s)
{
    return s == BF_SAMPLE_UNIFORM ? "uniform" : s == BF_SAMPLE_PER_TENSOR ? "per_tensor" : s == BF_SAMPLE_PER_BIT ? "per_bit" : "adaptive";
}

/* steered: adaptive with stop targets it cannot reach in f->trials, so
 * that the targets shape the allocation (campaign_adapt.c, steer) and
 * every campaign still runs its full size */
static void honest(fx *f, bf_sampling design, int steered)
{
    assert_true(f->n_sites > 0);   /* exhaustive_truth ran */
    size_t n = f->n_sites + 1;
    int covered[MAX_SITES + 1] = {0};
    double sum[MAX_SITES + 1] = {0}, sumsq[MAX_SITES + 1] = {0}, width[MAX_SITES + 1] = {0};
    int counted[MAX_SITES + 1] = {0};
    int runs = steered ? f->steered_runs : f->runs;
    for (int run = 0; run < runs; run++) {
        bf_campaign_spec s = spec_of(f, design, 1000 + (uint64_t)run);
        if (steered) {
            s.stop_margin = 0.002;
            s.stop_tensor_margin = 0.005;
        }
        bf_campaign *c;
        bf_campaign_result r;
        run_one(f, &s, &c, &r);
        bf_design d;
        bf_campaign_design(c, &d);
        for (size_t i = 0; i < n; i++) {
            bf_estimate e;
            bf_rate_estimate(&d, &r, i < f->n_sites ? (int64_t)i : -1, -1, BF_OUTCOME_CRITICAL, 0.95, &e);
            if (!isfinite(e.rate)) {   /* a tensor no trial landed on: its interval is [0, 1] */
                covered[i]++;
                continue;
            }
            covered[i] += e.lo <= f->truth[i] && f->truth[i] <= e.hi;
            sum[i] += e.rate;
            sumsq[i] += e.rate * e.rate;
            width[i] += (e.hi - e.lo) / 2;
            counted[i]++;
        }
        bf_campaign_result_free(&r);
        bf_campaign_free(c);
    }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double cov = (double)covered[i] / runs, k = counted[i] > 1 ? counted[i] : 2;
        double mean = sum[i] / k, sd = sqrt(fmax(0, (sumsq[i] - k * mean * mean) / (k - 1))), se = sd / sqrt(k);
        printf("%-10s%s %-14s truth %.5f  mean %.5f  sd %.5f  (mean-truth)/se %+.2f  coverage %.3f  mean half-width %.5f\n",
               design_name(design), steered ? "+targets" : "", i < f->n_sites ? "tensor" : "overall", f->truth[i], mean, sd,
               se > 0 ? (mean - f->truth[i]) / se : 0.0, cov, width[i] / k);
        bad += cov < 0.93 || (counted[i] > 1 && fabs(mean - f->truth[i]) > 3 * se + 1e-12);
    }
#ifdef BF_SANITIZED
    bad = 0;   /* 10 runs: coverage is known to +-0.07, too coarse to judge 0.93 */
#endif
    if (bad) fail_msg("%s%s: %d rates with coverage under 0.93 or a mean over 3 standard errors from the truth", design_name(design), steered ? " with targets" : "", bad);
}

/* Adaptive draws the same faults on any number of threads (each round's
 * allocation rests on the folded trials before it); it refuses shards and a
 * budget the pilot cannot fit, naming why. */
static void ignore_outputs(void *user, int64_t trial, const float *outputs, int64_t samples, int64_t cols)
{
    (void)user, (void)trial, (void)outputs, (void)samples, (void)cols;
}

static void adaptive_deterministic_and_refusals(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = spec_of(f, BF_SAMPLE_ADAPTIVE, 7);
    s.trials = 2000;
    s.stop_margin = 0.02;
    s.stop_tensor_margin = 0.3;
    bf_campaign *c;
    bf_error err = {0};
    assert_int_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_OK);
    bf_campaign_result a, b;
    bf_campaign_opts o1 = {.threads = 1}, o3 = {.threads = 3};
    assert_int_equal(bf_campaign_run(c, &o1, &a, &err), BF_OK);
    assert_int_equal(bf_campaign_run(c, &o3, &b, &err), BF_OK);
    assert_int_equal(a.trials_done, b.trials_done);
    assert_int_equal(a.adaptive_rounds, b.adaptive_rounds);
    assert_true(a.adaptive_pilot > 0 && a.adaptive_rounds > 1);
    for (size_t i = 0; i < a.n_sites * 64; i++) assert_memory_equal(&a.by_site_bit[i], &b.by_site_bit[i], sizeof a.by_site_bit[i]);
    /* the targets' record: met after a number of trials, or -1 */
    for (int k = 0; k < 2; k++) assert_true(a.stop_met_at[k] == -1 || (a.stop_met_at[k] > 0 && a.stop_met_at[k] <= a.trials_done));
    assert_int_equal(a.stop_met_at[2], 0);   /* not a target */
    int64_t pilot = a.adaptive_pilot;
    bf_campaign_result_free(&a);
    bf_campaign_result_free(&b);
    /* a shard runs the whole pilot, then every other trial after it, with no
     * early stop (cli_test_shard merges shards into the unsharded result) */
    bf_campaign_opts sh = {.threads = 1, .shard_index = 1, .shard_count = 2};
    assert_int_equal(bf_campaign_run(c, &sh, &a, &err), BF_OK);
    assert_int_equal(a.adaptive_pilot, pilot);
    assert_int_equal(a.trials_done, (s.trials - pilot) / 2);
    assert_int_equal(a.trials_planned, (s.trials - pilot) / 2);
    bf_campaign_result_free(&a);
    bf_campaign_free(c);
    s.trials = 100;   /* 3 tensors x 32 bits: the pilot and the next round need 288 */
    assert_int_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "the pilot round needs 2 trials in each of 96 strata"));
}

/* Keeping each trial's outputs hands trials out 4 at a time (CHUNK_OUTPUTS),
 * not 16: adaptive rounds are multiples of ADAPT_ALIGN (16) trials whatever
 * the hand-out, so the same trials are drawn and folded either way. The
 * targets here put the end of the first round after the pilot where they
 * are predicted to hold (campaign_adapt.c: ad_need, between the floor of one
 * trial a stratum and ROUND_MIN), at a trial count that is not a multiple of
 * 4, so that rounding it up to the chunk (4) and to 16 give different rounds:
 * with rounds aligned to the chunk, as before, this test fails (checked by
 * putting rn->chunk back in campaign_run.c's next_round and start_rounds). */
static void adaptive_rounds_do_not_follow_the_chunk(void **state)
{
    fx *f = *state;
    if (f->all) skip();   /* the need below is the three small tensors' */
    bf_campaign_spec s = spec_of(f, BF_SAMPLE_ADAPTIVE, HONESTY_CHUNK_SEED);
    s.trials = 2000;
    s.stop_margin = HONESTY_CHUNK_MARGIN;
    bf_campaign *c;
    bf_error err = {0};
    assert_int_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_OK);
    bf_campaign_result a, b;
    bf_campaign_opts one = {.threads = 1}, kept = {.threads = 2, .on_outputs = ignore_outputs};
    assert_int_equal(bf_campaign_run(c, &one, &a, &err), BF_OK);
    /* the premise: the first round after the pilot ends at the need, off a
     * multiple of 4 and short of a multiple of 16 by more than 3 */
    double need = c->adapt.ad_need;
    int64_t strata = c->faults.n_strata, end = (int64_t)ceil(need);
    printf("adaptive, kept outputs: need %.2f trials after the pilot (%lld strata), %lld trials in %d rounds\n", need,
           (long long)strata, (long long)a.trials_done, (int)a.adaptive_rounds);
    assert_true(need > (double)strata && need < 256);
    assert_true(end % 4 != 0 && (end + 3) / 4 * 4 != (end + 15) / 16 * 16);
    assert_int_equal(bf_campaign_run(c, &kept, &b, &err), BF_OK);
    assert_int_equal(a.trials_done, b.trials_done);
    assert_int_equal(a.adaptive_rounds, b.adaptive_rounds);
    for (size_t i = 0; i < a.n_sites * 64; i++) assert_memory_equal(&a.by_site_bit[i], &b.by_site_bit[i], sizeof a.by_site_bit[i]);
    bf_campaign_result_free(&a);
    bf_campaign_result_free(&b);
    bf_campaign_free(c);
}

/* Stop targets steer adaptive's allocation: with +-2% asked of every
 * tensor, the smallest (net.4.bias, 10 of the 714 elements: 1.4% of the
 * population, and of a uniform campaign's trials) gets the trials its own
 * interval needs, several times that share, and the campaign stops with
 * every target met, well before its budget. */
static void adaptive_targets_steer(void **state)
{
    fx *f = *state;
    if (f->all) skip();   /* the sizes below are the three small tensors' */
    bf_campaign_spec s = spec_of(f, BF_SAMPLE_ADAPTIVE, 11);
    s.trials = 400000;
    s.stop_margin = 0.005;
    s.stop_tensor_margin = 0.02;
    bf_campaign *c;
    bf_campaign_result r;
    run_one(f, &s, &c, &r);
    assert_true(r.stop_met_at[0] > 0 && r.stop_met_at[1] > 0);
    assert_true(r.trials_done < s.trials / 4);
    size_t small = 2;   /* net.4.bias */
    assert_int_equal(bf_campaign_site(c, small)->elements, 10);
    int64_t n = 0;
    for (int o = 0; o < BF_OUTCOME_COUNT; o++) n += r.by_site[small].n[o];
    printf("adaptive with targets: %lld trials, %lld on net.4.bias\n", (long long)r.trials_done, (long long)n);
    assert_true((double)n > 3 * 10.0 / 714.0 * (double)r.trials_done);   /* 3x its population share (7% seen) */
    bf_campaign_result_free(&r);
    bf_campaign_free(c);
}

/* The exhaustive population's limit, 2^26 faults (BF_EXHAUSTIVE_MAX): a
 * model built here, not committed (8 MiB of weights), y = x W with W
 * [1024, 2049] and a bias of 16: 2,098,192 elements. All 32 bits are
 * 67,142,144 faults, over the limit: refused, naming the population and
 * its largest tensor; 31 bits (65,043,952) are accepted, every fault a
 * trial. */
static void exhaustive_limit(void **state)
{
    (void)state;
    enum { K = 1024, N = 2049, S = 2 };
    float *w = calloc((size_t)K * N, sizeof *w), bias[16] = {0}, x[S * K];
    assert_non_null(w);
    for (int i = 0; i < K * N; i++) w[i] = (float)((int)((unsigned)i * 7919u % 2003u) - 1001) / 1001.0f;
    for (int i = 0; i < S * K; i++) x[i] = (float)(i % 17) / 17.0f;
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, K});
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, (int64_t[]){-1, N});
    tg_init_f32(&g, "big_weight", 2, (int64_t[]){K, N}, w);
    tg_init_f32(&g, "small_bias", 1, (int64_t[]){16}, bias);
    tg_node(&g, "MatMul", "mm", (const char *[]){"x", "big_weight"}, 2, "y");
    bf_model *m = tg_load(&g, "big");
    free(w);
    bf_dataset *ds;
    bf_error err = {0};
    int64_t lab[S] = {3, 5};
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "{\"x\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[0,%zu]},"
                      "\"labels\":{\"dtype\":\"I64\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}}",
                      S, K, sizeof x, S, sizeof x, sizeof x + sizeof lab);
    size_t total = 8 + (size_t)hl + sizeof x + sizeof lab;
    unsigned char *st = malloc(total);
    assert_non_null(st);
    for (int k = 0; k < 8; k++) st[k] = (unsigned char)((uint64_t)hl >> (8 * k));
    memcpy(st + 8, head, (size_t)hl);
    memcpy(st + 8 + hl, x, sizeof x);
    memcpy(st + 8 + hl + sizeof x, lab, sizeof lab);
    assert_int_equal(bf_dataset_load_buffer(st, total, "big", &ds, &err), BF_OK);
    free(st);
    char *both[] = {"big_weight", "small_bias"};
    bf_campaign_spec s = {0};
    s.seed = 1;
    s.tensors = both;
    s.n_tensors = 2;
    s.model_kind = BF_FAULT_BITFLIP;
    s.bits = 1;
    s.repr = BF_REPR_FP32;
    s.sampling = BF_SAMPLE_EXHAUSTIVE;
    s.critical_metric = -1;
    s.batch = 64;
    bf_campaign *c;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "the population is 67142144 faults (2098192 elements x 32 bit positions"));
    assert_non_null(strstr(err.msg, "the largest tensor, 'big_weight', has 2098176 elements"));
    assert_non_null(strstr(err.msg, "over the limit of 67108864"));
    for (int b = 0; b < 31; b++) s.positions[b] = b;
    s.n_positions = 31;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_OK);
    assert_int_equal(bf_campaign_num_trials(c), (int64_t)2098192 * 31);
    bf_campaign_free(c);
    bf_model_free(m);
    bf_dataset_free(ds);
}

static void uniform_is_honest(void **state) { honest(*state, BF_SAMPLE_UNIFORM, 0); }
static void per_tensor_is_honest(void **state) { honest(*state, BF_SAMPLE_PER_TENSOR, 0); }
static void per_bit_is_honest(void **state) { honest(*state, BF_SAMPLE_PER_BIT, 0); }
static void adaptive_is_honest(void **state) { honest(*state, BF_SAMPLE_ADAPTIVE, 0); }
static void adaptive_steered_is_honest(void **state) { honest(*state, BF_SAMPLE_ADAPTIVE, 1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exhaustive_truth),
        cmocka_unit_test(adaptive_deterministic_and_refusals),
        cmocka_unit_test(adaptive_rounds_do_not_follow_the_chunk),
        cmocka_unit_test(exhaustive_limit),
        cmocka_unit_test(adaptive_targets_steer),
        cmocka_unit_test(uniform_is_honest),
        cmocka_unit_test(per_tensor_is_honest),
        cmocka_unit_test(per_bit_is_honest),
        cmocka_unit_test(adaptive_is_honest),
        cmocka_unit_test(adaptive_steered_is_honest),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
