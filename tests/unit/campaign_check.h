/* Helpers shared by the campaign tests: building a campaign that must
 * succeed, comparing results and records field by field, and rounding as
 * the formats' definitions say (independently of core/src/base/repr.c). */
#ifndef BF_TEST_CAMPAIGN_CHECK_H
#define BF_TEST_CAMPAIGN_CHECK_H

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "onnx.pb-c.h"

/* Every trial's record and outputs, by trial number (on_trial / on_outputs
 * of bf_campaign_opts with .user = the capture). */
typedef struct tc_capture {
    int64_t n, samples, cols;
    bf_trial_record *rec;
    float *out;
} tc_capture;
void tc_cap_init(tc_capture *c, int64_t n);
void tc_cap_free(tc_capture *c);
void tc_cap_trial(void *user, const bf_trial_record *rec);
void tc_cap_outputs(void *user, int64_t trial, const float *out, int64_t samples, int64_t cols);
/* a float's bits and back; fails the test naming both when a and b differ in a bit */
uint32_t tc_bits_of(float x);
float tc_float_of(uint32_t u);
void tc_same_bits(float a, float b);

bf_campaign *tc_make(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s);
void tc_assert_same_aggregates(const bf_campaign_result *a, const bf_campaign_result *b);
void tc_assert_same_record(const bf_trial_record *a, const bf_trial_record *b);
double tc_round_half_even(double x);
/* bf16 written from its definition (the top half of the fp32 pattern, the
 * rest rounded to nearest even; x finite) and decoded back: the references
 * the campaign tests check bf16 faults against, never core's repr.c */
uint16_t tc_bf16(float x);
float tc_bf16_decode(uint16_t h);
/* The campaign tests' common spec: single-bit flips anywhere in the weights
 * (tensors "*"), fp32, uniform, seed 42, 32 trials, no critical metric,
 * stop_confidence 0.95, at `batch`. */
bf_campaign_spec tc_uniform_spec(int64_t batch);

/* Trial records kept in order: pass tc_keep as on_trial, a tc_recs as user
 * (r with room for every trial). */
typedef struct tc_recs {
    bf_trial_record *r;
    int64_t n;
} tc_recs;
void tc_keep(void *user, const bf_trial_record *rec);
/* bf_campaign_create_prepared of spec s (prep NULL: for the exact engine),
 * failing the test with its message */
bf_campaign *tc_create_prepared(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s,
                                const bf_campaign_prep *prep);
/* Runs c (exact: the exact engine) on `threads`, as shard `shard` of
 * `shards` (0: whole), its records into out as they come (tc_keep), its
 * result into res, asserting every trial reported; frees c */
void tc_run_keep(bf_campaign *c, int exact, int threads, int64_t shard, int64_t shards, bf_trial_record *out,
                 bf_campaign_result *res);

/* The differential engine against the exact one (test_diff.c's rules, see
 * its top comment): trials compared one by one, every record the same bits
 * (outcome, changed, every metric, the faults). With `near` set, the rules
 * of the near-exact engine (bf_campaign_opts.near_exact) instead: outcomes
 * equal or a near tie (both runs' outputs within ulps of golden, neither
 * masked), metrics within 1e-6 (mse and max_abs relative to `scale`, the
 * largest golden output, at least 1). */
typedef struct tc_tally {
    int64_t trials, disagree, unexplained, metric_off;
    int near;
    int64_t exact_due;   /* tc_both: the exact runs' DUE trials */
} tc_tally;
/* Loads STEM.onnx and STEM.eval.safetensors (the fixtures' naming), failing
 * the test with the loader's message if either does not load; returns
 * tc_out_scale of the pair. */
double tc_load(const char *stem, bf_model **m, bf_dataset **ds);
/* tc_load without the scale (no evaluation pass). */
void tc_open(const char *stem, bf_model **m, bf_dataset **ds);
/* tc_open of tests/fixtures/real/NAME. */
void tc_open_real(const char *name, bf_model **m, bf_dataset **ds);
/* Loads the model and the eval set at those paths, failing the test with
 * the loader's message if either does not load. */
void tc_open_files(const char *model, const char *data, bf_model **m, bf_dataset **ds);
/* tc_open, then *m the model with each symbolic dim names[i] fixed at
 * dimension 1 of eval-set tensor from[i] (bf_model_with_dims: the sequence
 * axis, a head count); *base the model as loaded. The caller frees all
 * three. */
void tc_open_fixed(const char *stem, const char *const *names, const char *const *from, size_t n, bf_model **base,
                   bf_model **m, bf_dataset **ds);
/* A fixture of tests/fixtures/conformance, by name (tc_open). */
typedef struct tc_loaded {
    bf_model *m;
    bf_dataset *ds;
} tc_loaded;
tc_loaded tc_conformance(const char *fx);
void tc_unload(tc_loaded *l);
/* Loads STEM.onnx and STEM.eval.safetensors into *m, *ds without failing
 * the test (for cmocka group setups): the first error's status, err says
 * which file. */
bf_status tc_try_open(const char *stem, bf_model **m, bf_dataset **ds, bf_error *err);
/* A cmocka group setup and teardown over one fixture: *state a malloc'd
 * tc_loaded of STEM (tc_try_open); on failure prints "setup: " and the
 * loader's message and returns -1. tc_group_close is also the teardown of
 * a test's own malloc'd fixture struct whose first member is a tc_loaded
 * (a pointer to a struct, converted, points to its first member: C11
 * 6.7.2.1): it frees the model, the eval set and the struct; a fixture
 * holding more frees that first, then calls it. */
int tc_group_open(void **state, const char *stem);
int tc_group_close(void **state);
/* Single-bit fp32 flips in every weight tensor ("*"), no critical metric. */
bf_campaign_spec tc_all_weights_spec(uint64_t seed, int64_t trials);
/* Creates spec s's campaign on l with mitigation mit (NULL: none) and runs
 * it on 2 threads, exact or differential; with out, every record kept
 * there (out->r the caller's to free). Fails the test if either step
 * fails; the campaign and res are the caller's to free. */
bf_campaign *tc_run_mitigated(const tc_loaded *l, const bf_campaign_spec *s, const bf_mitigation *mit, int exact,
                              tc_recs *out, bf_campaign_result *res);
/* The largest golden output (at least 1), with batch 7. */
double tc_out_scale(const bf_model *m, const bf_dataset *ds);
/* Compares runs a and b trial by trial into t; prints what differs. */
void tc_compare(const char *fix, const char *label, const tc_recs *a, const tc_recs *b, double scale, tc_tally *t);
/* At least min_trials and no record that differs; with t->near, at most
 * two disagreements in 1,000, every one a near tie, no metric outside its
 * tolerance. */
void tc_assert_agree(const char *what, const tc_tally *t, int64_t min_trials);

/* Runs spec s exact and differential (2 threads each) on m/ds and compares
 * them into t (tc_compare, fixture name fix); a BER spec differential a
 * second time, never taking a full pass (bf_campaign_opts.no_full_pass),
 * compared with exact the same way; exact_out (may be NULL) keeps
 * the exact run's records, for the caller to free. */
void tc_both(const bf_model *m, const bf_dataset *ds, double scale, const char *fix, const bf_campaign_spec *s,
             const char *label, tc_tally *t, tc_recs *exact_out);
/* Runs spec s exact into r[1], then differential into r[0] (with
 * no_full_pass, never taking a full pass), 2 threads each, every record
 * kept (r[i].r the caller's to free); fails the test, naming label, if a
 * run fails. Returns the exact run's DUE trials. */
int64_t tc_run_engines(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, const char *label,
                       int no_full_pass, tc_recs r[2]);
/* Spec s run exact on 2 threads, then differential on 2 and 1 threads at
 * the default cache budget and on 1 and 2 at 1 byte (nothing cached):
 * every differential record the exact run's bits (tc_assert_same_record),
 * a mismatch printed with its run's threads and budget first; with
 * extra_budget not 0, differential on 2 and 1 threads at that budget too. */
void tc_budgets_match_exact(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int64_t extra_budget);
/* Single-bit fp32 weight flips, prediction changes only, at `batch`. */
bf_campaign_spec tc_base_spec(int64_t batch);
/* tc_base_spec with seed, trials, one tensor (or value) of `target`,
 * `bits` flips and `persist`: the differential tests' single-site campaigns */
bf_campaign_spec tc_site_spec(int64_t batch, uint64_t seed, int64_t trials, char **tensor, bf_target target, int bits,
                              bf_persistence persist);

/* One kind of fault a differential-vs-exact test sweeps. */
typedef struct tc_config {
    const char *label;
    bf_target target;
    bf_fault_model kind;
    bf_repr repr;
    bf_persistence persistence;
    int bits;
} tc_config;

/* Spec of config cf (target, kind, bits, representation, persistence) over
 * the tensors matching pats[0..n), no critical metric. */
bf_campaign_spec tc_config_spec(const tc_config *cf, uint64_t seed, int64_t trials, int64_t batch, char **pats,
                                size_t n);

/* Fails core's allocations one at a time (alloc_fail.h), the first, then
 * the second, ..., while creating campaign s (bf_campaign_create_prepared
 * with mit and prep, either NULL) and running it on one thread (the
 * countdown is not thread-safe): every failure must come back as BF_ENOMEM
 * with all freed (ASan checks), and the first create and run that meet no
 * failure must do `trials` trials. Fails the test if none does within max_n
 * allocations; returns how many allocations the clean run made. Each
 * failed round must also give back all of core's bytes (alloc_fail.h's
 * live count). Which allocations fail is the build's plan (tc_alloc_plan
 * below): one per call path under ASan, every TC_ALLOC_STEP-th in the
 * release build and under TSan; BF_ALLOC_LOOP=each fails each in turn. */
long tc_alloc_failures(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, const bf_mitigation *mit,
                       const bf_campaign_prep *prep, int64_t trials, long max_n);

/* A ModelProto around `g` (ir_version 7, one opset import of `opset` for
 * the default domain), packed; malloc'd, *len its size. For tests that
 * build graphs with protobuf-c. */
uint8_t *tc_pack_model(Onnx__GraphProto *g, int opset, size_t *len);

/* Which allocations an allocation-failure loop refuses (tc_alloc_failures,
 * test_campaign_act's loop). The loops are there for C's handling of a
 * refused allocation: a clean BF_ENOMEM, no crash, nothing leaked, which is
 * what ASan and LeakSanitizer see; the release build has only the live count
 * (alloc_fail.h). So (tests/README.md, "How long make test takes"):
 * - ASan (BF_TEST_ALLOC_PATHS, build-asan): one allocation per call path
 *   (alloc_fail.h: the call stack, and whether it is the stack's first
 *   allocation of the run): every allocation site, on every way it is
 *   reached, fails once, first and later occurrence, while the rounds no
 *   longer grow with the trials' and nodes' repeated allocations, which made
 *   the loop quadratic (test_kv_sites: 4291 rounds, 67 CPU-s; "The third
 *   round"). gcov of core/: the same lines and branches as failing each in
 *   turn (tests/history/round22-h26-suite.md).
 * - release: every 13th allocation (TC_ALLOC_STEP), from the first: a
 *   sample of the rounds in the optimized build, spread over the whole run;
 *   13 is prime, so a run that repeats its allocations with any period not
 *   a multiple of 13 (per trial, per node) has each position of the period
 *   failed once the loop has gone round 13 periods. Each in turn was 6.6 of
 *   test_kv_sites' 7.0 CPU-s, every 13th 0.5.
 * - TSan (BF_TEST_TSAN, build-tsan): every 8th, spread over all of them and
 *   on the same threads, for the races of the failure paths (they were 120 of
 *   its run's 400 test seconds each in turn).
 * BF_ALLOC_LOOP in the environment overrides the build's plan in any build:
 * `each` fails every allocation in turn (the full loop), `paths` one per call
 * path, a number N every Nth. */
#ifdef BF_TEST_TSAN
#define TC_ALLOC_STEP 8
#else
#define TC_ALLOC_STEP 13
#endif
#ifdef BF_TEST_ALLOC_PATHS
#define TC_ALLOC_PATHS 1
#else
#define TC_ALLOC_PATHS 0
#endif

typedef struct {
    int paths; /* 1: one allocation per call path (alloc_fail.h's path mode) */
    long step; /* else every step-th allocation, from the first (1: each in turn) */
} tc_alloc_plan;

/* The build's plan, or BF_ALLOC_LOOP's (above); a bad BF_ALLOC_LOOP fails the test. */
tc_alloc_plan tc_alloc_plan_get(void);
/* Arms the allocator for the round that starts at allocation n (alloc_fail.h). */
void tc_alloc_arm(const tc_alloc_plan *p, long n);
/* The next round's n after a round armed at n whose first refusal was at. */
long tc_alloc_next(const tc_alloc_plan *p, long n, long at);

#endif
