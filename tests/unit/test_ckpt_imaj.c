/* Image-major trials (campaign/campaign_imaj.c; docs/engine/checkpoints.md,
 * "Image-major"): the golden pass image by image, every trial run on each
 * image right after its golden run from that image's checkpoints alone
 * (one block a thread), the records made when the run reaches them. The
 * rule: every record and every image's outputs of every trial bit for bit
 * those of the trial-major run (every image's checkpoints, test_ckpt.c)
 * and of the exact engine (each image in full), on the seven detector
 * fixtures (tests/fixtures/det, each matching PyTorch in conformance_det),
 * one- and two-bit weight faults, on 1 and 2 threads; the checkpoints held
 * one image's block a thread where trial-major held every image's; and a
 * campaign image-major cannot run (a BER) runs trial-major and says why. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "campaign/campaign_pin.h"
#include "campaign_check.h"
#include "campaign_kept.h"

#ifndef BF_FIXTURES
#error BF_FIXTURES must be defined
#endif

/* every trial's record and per-image outputs, by trial (campaign_kept.h) */
typedef tc_ragkept kept;

/* mode 0: exact; 1: trial-major checkpoints; 2: image-major, blocks of
 * `block` images a thread (0: the default). The price pinned at 1 ns a
 * byte (campaign_pin.h): the same cuts on any host. */
static kept run_bytes(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int mode, int threads,
                      int64_t block, uint64_t block_bytes, bf_campaign_result *res)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_campaign_prep prep = {.differential = mode > 0, .threads = threads, .image_major = mode == 2,
                             .image_block = block, .image_block_bytes = block_bytes};
    bf__campaign_pin pin = {.ckpt_byte_price = 1e-9};
    if (bf__campaign_create_pinned(m, ds, s, NULL, &prep, &pin, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    int64_t n = bf_campaign_num_trials(c);
    kept k = tc_ragkept_for(n);
    bf_campaign_opts o = {.threads = threads, .exact = mode == 0, .on_trial = tc_ragkept_rec, .on_ragged = tc_ragkept_rag,
                          .user = &k};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(k.n, n);
    bf_campaign_free(c);
    return k;
}

/* A run's kept records and its result, freed together. */
static void release(kept *k, bf_campaign_result *res)
{
    tc_ragkept_free(k);
    bf_campaign_result_free(res);
}

static kept run_block(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int mode, int threads,
                      int64_t block, bf_campaign_result *res)
{
    return run_bytes(m, ds, s, mode, threads, block, 0, res);
}

static kept run(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int mode, int threads,
                bf_campaign_result *res)
{
    return run_block(m, ds, s, mode, threads, 0, res);
}

static void same(const char *what, const kept *a, const kept *b)
{
    assert_int_equal(a->n, b->n);
    for (int64_t i = 0; i < a->n; i++) {
        tc_assert_same_record(&a->rec[i], &b->rec[i]);
        if (a->bytes[i] != b->bytes[i] || memcmp(a->blob[i], b->blob[i], a->bytes[i]) != 0)
            fail_msg("%s: trial %lld: the per-image outputs differ", what, (long long)i);
    }
}

static const char *const DETECTORS[] = {"ssd", "ssdlite", "retinanet", "fcos", "fasterrcnn", "maskrcnn", "yolo"};
#define N_DET (sizeof DETECTORS / sizeof *DETECTORS)

static void det_load(const char *name, bf_model **m, bf_dataset **ds)
{
    char stem[512];
    snprintf(stem, sizeof stem, "%s/det/%s", BF_FIXTURES, name);
    tc_load(stem, m, ds);
}

/* uniform single-bit weight faults (bits set by the caller) */
static bf_campaign_spec weights(int trials, uint64_t seed)
{
    bf_campaign_spec s = tc_base_spec(1);
    s.target = BF_TARGET_WEIGHTS;
    s.trials = trials;
    s.seed = seed;
    return s;
}

static void detectors_as_trial_major(void **state)
{
    (void)state;
#ifdef BF_TEST_TSAN
    skip();   /* minutes under TSan; tail_checks_on_two_threads runs the threads */
#endif
    int64_t changed = 0, early = 0;
    for (size_t f = 0; f < N_DET; f++) {
        bf_model *m = NULL;
        bf_dataset *ds = NULL;
        det_load(DETECTORS[f], &m, &ds);
        int64_t samples = bf_dataset_num_samples(ds);
        for (int bits = 1; bits <= 2; bits++)
            for (int th = 1; th <= 2; th++) {
                bf_campaign_spec s = weights(12, 90 + (uint64_t)(bits * 2 + th) + 10 * (uint64_t)f);
                s.bits = bits;
                bf_campaign_result rx, rt, ri;
                kept ex = run(m, ds, &s, 0, th, &rx), tm = run(m, ds, &s, 1, th, &rt);
                kept im = run_block(m, ds, &s, 2, th, 1, &ri);   /* one image a block (the fixtures' default holds all) */
                char what[128];
                snprintf(what, sizeof what, "%s, %d bits, %d threads, image-major against exact", DETECTORS[f], bits,
                         th);
                same(what, &ex, &im);
                snprintf(what, sizeof what, "%s, %d bits, %d threads, image-major against trial-major", DETECTORS[f],
                         bits, th);
                same(what, &tm, &im);
                tc_assert_same_aggregates(&rt, &ri);
                for (int64_t i = 0; i < ex.n; i++) changed += ex.rec[i].outcome != BF_OUTCOME_MASKED;
                /* the checkpoints ran it, image-major; trial-major was not asked to */
                assert_true(ri.ckpt.cuts > 0);
                assert_int_equal(ri.ckpt.image_major, 1);
                assert_null(ri.ckpt.imaj_off);
                assert_int_equal(rt.ckpt.image_major, 0);
                assert_non_null(rt.ckpt.imaj_off);
                /* the same cuts and store, one image's block a thread instead of every image's */
                assert_int_equal(ri.ckpt.cuts, rt.ckpt.cuts);
                int64_t slots = th < samples ? th : samples;
                assert_true(ri.ckpt.bytes * (uint64_t)samples == rt.ckpt.bytes * (uint64_t)slots);
                if (getenv("BF_TEST_VERBOSE"))
                    fprintf(stderr,
                            "%s b%d t%d: early %lld/%lld chan %lld/%lld tail %lld/%lld skipped %lld/%lld work %.4f/%.4f\n",
                            DETECTORS[f], bits, th, (long long)ri.ckpt.early, (long long)rt.ckpt.early,
                            (long long)ri.ckpt.early_chan, (long long)rt.ckpt.early_chan, (long long)ri.ckpt.early_tail,
                            (long long)rt.ckpt.early_tail, (long long)ri.ckpt.skipped, (long long)rt.ckpt.skipped,
                            ri.work_fraction, rt.work_fraction);
                /* the same runs: images ended early at the same points */
                assert_int_equal(ri.ckpt.early, rt.ckpt.early);
                early += ri.ckpt.early;
                release(&ex, &rx);
                release(&tm, &rt);
                release(&im, &ri);
            }
        bf_dataset_free(ds);
        bf_model_free(m);
    }
    /* faults that changed outputs, and images the checkpoints ended early, were among them */
    assert_true(changed > 0);
    assert_true(early > 0);
}

/* Blocks of images (bf_campaign_prep.image_block): each thread's golden
 * runs of B images, then every trial on those B, the checkpoints holding B
 * images a thread. The fixtures' 6 images (maskrcnn's 4): B 4 on 1 thread
 * and B 2 on 2 (3 images each) leave a short last block; B 64 is clamped
 * to a thread's share (trial-major's order, one block); B 0 takes as many
 * as BF_IMAJ_BLOCK_BYTES_DEFAULT holds. The records and per-image outputs
 * are the exact engine's and trial-major's. */
/* The detection tail's check (exec/ckpt_tail.c) on two threads, each
 * running the same trial on its own images at once: the check's scores are
 * each thread's own (bf__ckpt_run's tail_y), not the shared trial state's.
 * When they were the trial's, a thread compared another image's scores
 * with its golden ones now and then: a check missed (an image run to the
 * end, fewer tail ends than trial-major's) or, worse, passed on another
 * image's rows. Here the tail ends counted, run after run, must be
 * trial-major's and the records the same; under ThreadSanitizer this is
 * the test that runs (the others' threads are those of the campaigns it
 * covers elsewhere) and reports the race itself. */
static void tail_checks_on_two_threads(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    det_load("ssdlite", &m, &ds);   /* the fixture with a detection tail */
    int64_t tails = 0;
    for (int r = 0; r < 4; r++) {
        bf_campaign_spec s = weights(10, 700 + (uint64_t)r);
        bf_campaign_result rt, ri;
        kept tm = run(m, ds, &s, 1, 2, &rt), im = run_block(m, ds, &s, 2, 2, 1, &ri);
        char what[96];
        snprintf(what, sizeof what, "ssdlite, round %d, 2 threads, image-major against trial-major", r);
        same(what, &tm, &im);
        assert_int_equal(ri.ckpt.image_major, 1);
        assert_int_equal(ri.ckpt.early_tail, rt.ckpt.early_tail);
        assert_int_equal(ri.ckpt.early, rt.ckpt.early);
        tails += ri.ckpt.early_tail;
        release(&tm, &rt);
        release(&im, &ri);
    }
    assert_true(tails > 0);   /* the check did end images */
    bf_dataset_free(ds);
    bf_model_free(m);
}

static void blocks_as_trial_major(void **state)
{
    (void)state;
#ifdef BF_TEST_TSAN
    skip();
#endif
    /* block -1: B 0 with image_block_bytes 2.5 images' checkpoints (1 thread: 2 images a block; 2: 1) */
    static const struct { int threads; int64_t block; } CASES[] = {{1, 4}, {2, 2}, {1, 64}, {1, 0}, {2, 0}, {1, -1}, {2, -1}};
    for (size_t f = 0; f < N_DET; f++) {
        bf_model *m = NULL;
        bf_dataset *ds = NULL;
        det_load(DETECTORS[f], &m, &ds);
        int64_t samples = bf_dataset_num_samples(ds);
        for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
            int th = CASES[i].threads;
            bf_campaign_spec s = weights(10, 300 + (uint64_t)i + 10 * (uint64_t)f);
            bf_campaign_result rx, rt, ri;
            kept ex = run(m, ds, &s, 0, th, &rx), tm = run(m, ds, &s, 1, th, &rt);
            uint64_t image = rt.ckpt.bytes / (uint64_t)samples, limit = CASES[i].block < 0 ? image * 5 / 2 : 0;
            kept im = run_bytes(m, ds, &s, 2, th, CASES[i].block < 0 ? 0 : CASES[i].block, limit, &ri);
            char what[128];
            snprintf(what, sizeof what, "%s, %d threads, blocks of %lld, image-major against exact", DETECTORS[f], th,
                     (long long)CASES[i].block);
            same(what, &ex, &im);
            snprintf(what, sizeof what, "%s, %d threads, blocks of %lld, image-major against trial-major",
                     DETECTORS[f], th, (long long)CASES[i].block);
            same(what, &tm, &im);
            tc_assert_same_aggregates(&rt, &ri);
            assert_int_equal(ri.ckpt.image_major, 1);
            assert_int_equal(ri.ckpt.early, rt.ckpt.early);
            /* B images' blocks a thread (B at most a thread's share), by hand; B 0:
             * as many as fit in BF_IMAJ_BLOCK_BYTES_DEFAULT over the threads, an
             * image's bytes trial-major's over the images */
            int64_t share = (samples + th - 1) / th, b = CASES[i].block;
            if (b == 0) b = (int64_t)(BF_IMAJ_BLOCK_BYTES_DEFAULT / ((uint64_t)th * image));
            if (b < 0) b = th == 1 ? 2 : 1;   /* 2.5 images' bytes: 2 a block at 1 thread, 1 each at 2 */
            if (b < 1) b = 1;
            if (b > share) b = share;
            assert_int_equal(ri.ckpt.image_block, b);
            int64_t slots = th * b < samples ? th * b : samples;
            assert_true(ri.ckpt.bytes * (uint64_t)samples == rt.ckpt.bytes * (uint64_t)slots);
            release(&ex, &rx);
            release(&tm, &rt);
            release(&im, &ri);
        }
        bf_dataset_free(ds);
        bf_model_free(m);
    }
}

/* A BER campaign's trials are not known before the golden pass: trial-major,
 * with the reason, and the records still the exact engine's. */
static void ber_runs_trial_major(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    det_load("ssdlite", &m, &ds);
    bf_campaign_spec s = weights(6, 5);
    s.model_kind = BF_FAULT_BER;
    double rates[] = {1e-6};
    s.rates = rates;
    s.n_rates = 1;
    bf_campaign_result rx, ri;
    kept ex = run(m, ds, &s, 0, 1, &rx), im = run(m, ds, &s, 2, 1, &ri);
    same("ssdlite, BER, image-major asked for", &ex, &im);
    assert_int_equal(ri.ckpt.image_major, 0);
    assert_non_null(ri.ckpt.imaj_off);
    assert_non_null(strstr(ri.ckpt.imaj_off, "BER"));
    release(&ex, &rx);
    release(&im, &ri);
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* A cancel flag set before the sweep: the create fails with BF_ECANCELED
 * and frees what it made (the sanitizer build checks the leaks). */
static void cancel_stops_the_sweep(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    det_load("ssdlite", &m, &ds);
    bf_campaign_spec s = weights(4, 3);
    int cancel = 1;
    for (int th = 1; th <= 2; th++) {
        bf_campaign *c = NULL;
        bf_error err = {0};
        bf_campaign_prep prep = {.differential = 1, .threads = th, .image_major = 1, .cancel = &cancel};
        bf__campaign_pin pin = {.ckpt_byte_price = 1e-9};
        assert_int_equal(bf__campaign_create_pinned(m, ds, &s, NULL, &prep, &pin, &c, &err), BF_ECANCELED);
        assert_null(c);
        assert_non_null(strstr(err.msg, "image-major"));
    }
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* The sweep's progress (bf_campaign_prep.sweep_progress): on the calling
 * thread, images done never going back, each image once, the last call
 * (images, images) and only once; at 2 threads the calling thread reports
 * the count of both threads' images. */
typedef struct sweep_log {
    pthread_t caller;
    int calls, off_thread, backwards, finals;
    int64_t last, images;
} sweep_log;

static void on_sweep(void *user, int64_t done, int64_t images)
{
    sweep_log *l = user;
    l->calls++;
    if (!pthread_equal(pthread_self(), l->caller)) l->off_thread++;
    if (done <= l->last) l->backwards++;
    if (done == images) l->finals++;
    l->last = done;
    l->images = images;
}

static void sweep_reports_progress(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    det_load("ssdlite", &m, &ds);
    bf_campaign_spec s = weights(4, 3);
    int64_t n = bf_dataset_num_samples(ds);
    for (int th = 1; th <= 2; th++) {
        bf_campaign *c = NULL;
        bf_error err = {0};
        sweep_log l = {.caller = pthread_self()};
        bf_campaign_prep prep = {.differential = 1, .threads = th, .image_major = 1, .sweep_progress = on_sweep,
                                 .sweep_user = &l, .image_block = 1};   /* a report a block: here an image */
        bf__campaign_pin pin = {.ckpt_byte_price = 1e-9};
        assert_int_equal(bf__campaign_create_pinned(m, ds, &s, NULL, &prep, &pin, &c, &err), BF_OK);
        assert_int_equal(l.images, n);
        assert_int_equal(l.last, n);
        assert_int_equal(l.finals, 1);
        assert_int_equal(l.backwards, 0);
        assert_int_equal(l.off_thread, 0);
        /* one thread: every image reported; two: the caller's half at least, and the end */
        assert_true(th == 1 ? l.calls == n : l.calls >= (n + 1) / 2);
        bf_campaign_free(c);
    }
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(detectors_as_trial_major),
        cmocka_unit_test(blocks_as_trial_major),
        cmocka_unit_test(tail_checks_on_two_threads),
        cmocka_unit_test(ber_runs_trial_major),
        cmocka_unit_test(cancel_stops_the_sweep),
        cmocka_unit_test(sweep_reports_progress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
