/* One image per call: a detector's campaign resumes each image from the
 * golden pass's checkpoints (exec/ckpt.h, docs/ENGINE.md "One image per
 * call"). The rule it must keep: every record, and every per-image output
 * of every trial, bit for bit the exact engine's (which runs each image in
 * full). Checked on the detector fixtures (tests/fixtures/det: SSD, SSDlite,
 * RetinaNet, FCOS, Faster/Mask R-CNN, YOLO; each matches PyTorch, ctest
 * conformance_det) for weight faults (one and two bits of a value, a BER), and
 * activation faults persistent and transient; and that the checkpoints were
 * used (cuts made, part of each pass skipped, images ended early, steps
 * the faults could not reach not run: ckpt_reach.c; a Conv whose faults
 * all lie in one output channel run on that channel alone over its golden
 * output: ckpt_chan.c, counted in chan_steps; with its fused epilogue
 * for the backbones' Convs, counted in chan_kinds.ckpt_fused), that a
 * budget too small for any cut leaves every trial in full with the reason
 * said, that a trial is fed the graph's input unless it resumes past every
 * step reading it, and that every allocation failing in turn is a clean
 * BF_ENOMEM. The golden pass and the workers run on arenas shared by
 * lifetime (campaign_golden.c), so a value a trial reads that no cut or
 * store put back would hold another value's bytes: the comparisons with
 * the exact engine catch it. */
#include <math.h>
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
#include "alloc_fail.h"
#include "base/warena.h"
#include "campaign/campaign_pin.h"
#include "campaign_check.h"
#include "campaign_kept.h"
#include "exec/ckpt_impl.h"
#include "onnx_graph.h"

#ifndef BF_FIXTURES
#error BF_FIXTURES must be defined
#endif

/* every trial's records and per-image outputs, in trial order (campaign_kept.h) */
typedef tc_ragkept kept;

/* spec s on m/ds: exact (each image in full), or prepared for the
 * differential engine with `budget` bytes (the checkpoints'); the cuts and
 * kept values weighed by measured step times (timed) or by counted work,
 * which gives the same choice on any machine, so that the assertions below
 * that a path ran (a cut, an early end, a fused Conv's channel, a followed
 * step) cannot flip on a slow or loaded one */
/* the checkpoints' pages pinned with the price (bf__campaign_pin.ckpt_huge):
 * 1 while checkpoints_in_huge_pages runs */
static int pin_huge;
/* the caller's measurement of the host's pages (bf_campaign_prep.host_pages)
 * while host_pages_from_the_caller runs; not measured otherwise */
static bf_host_pages pin_host;

static kept run(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int exact, int64_t budget,
                int threads, int timed, double price, bf_campaign_result *res)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_campaign_prep prep = {.differential = !exact, .cache_budget = budget, .threads = threads, .timed_costs = timed,
                             .host_pages = pin_host};
    /* the price pinned through the tests-only hook (campaign_pin.h) */
    bf__campaign_pin pin = {.ckpt_byte_price = price, .ckpt_huge = pin_huge};
    if (bf__campaign_create_pinned(m, ds, s, NULL, &prep, &pin, &c, &err) != BF_OK)
        fail_msg("create: %s", err.msg);
    int64_t n = bf_campaign_num_trials(c);
    kept k = tc_ragkept_for(n);
    bf_campaign_opts o = {.threads = threads, .exact = exact, .cache_budget = budget, .on_trial = tc_ragkept_rec,
                          .on_ragged = tc_ragkept_rag, .user = &k};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(k.n, n);
    bf_campaign_free(c);
    return k;
}

typedef struct sums {
    int timed;   /* the differential runs' cuts by measured time (run) */
    /* a recorded byte's price (bf__campaign_pin.ckpt_byte_price): 0, 1 ns,
     * the same choice on every host; < 0, this host's (measured: where its
     * fresh pages are dear, 2.5 ns); else that */
    double price;
    int64_t runs, early, masked, changed, skipped, stored, chan, fused, follow, chan_early, tail;
} sums;

/* the differential run on `threads` threads against exact on 2 */
static void same_as_exact_on(const char *fix, const bf_campaign_spec *s, int64_t budget, int threads, sums *t)
{
    char stem[512];
    if (strchr(fix, '/')) snprintf(stem, sizeof stem, "%s/%s", BF_FIXTURES, fix);   /* another folder's */
    else snprintf(stem, sizeof stem, "%s/det/%s", BF_FIXTURES, fix);
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_load(stem, &m, &ds);
    bf_campaign_result rx, rd;
    double price = t->price < 0 ? 0 : t->price > 0 ? t->price : 1e-9;
    kept ex = run(m, ds, s, 1, 0, 2, 0, 0, &rx), df = run(m, ds, s, 0, budget, threads, t->timed, price, &rd);
    assert_int_equal(ex.n, df.n);
    for (int64_t i = 0; i < ex.n; i++) {
        tc_assert_same_record(&ex.rec[i], &df.rec[i]);
        if (ex.bytes[i] != df.bytes[i] || memcmp(ex.blob[i], df.blob[i], ex.bytes[i]) != 0)
            fail_msg("%s: trial %lld: the per-image outputs differ from the exact engine's", fix, (long long)i);
        t->masked += ex.rec[i].outcome == BF_OUTCOME_MASKED;
        t->changed += ex.rec[i].outcome != BF_OUTCOME_MASKED;
    }
    tc_assert_same_aggregates(&rx, &rd);
    assert_int_equal(rx.ckpt.cuts, 0);
    assert_int_equal(rx.chan_steps, 0);   /* the exact engine runs every step whole */
    assert_int_equal(rx.chan_kinds.ckpt_fused, 0);
    t->chan += rd.chan_steps;
    t->fused += rd.chan_kinds.ckpt_fused;
    t->follow += rd.chan_kinds.ckpt_follow;
    t->chan_early += rd.ckpt.early_chan;
    t->tail += rd.ckpt.early_tail;
    assert_true(rd.chan_kinds.ckpt_fused <= rd.chan_kinds.ckpt_conv);
    assert_true(rd.ckpt.early_chan + rd.ckpt.early_tail <= rd.ckpt.early);
    assert_int_equal(rx.ckpt.early_tail, 0);
    if (pin_huge && rd.ckpt.cuts > 0) assert_int_equal(rd.ckpt.huge_pages, 1);   /* the pin took */
    if (pin_host.measured && rd.ckpt.cuts > 0) {   /* the caller's measurement, not the campaign's own */
        assert_int_equal(rd.ckpt.huge_pages, pin_host.huge);
        assert_true(rd.ckpt.byte_price == (pin_host.small_cost > 1.2e-9 ? 2.5e-9 : 1e-9));
    }
    if (budget == 0 || budget > 1024) {   /* 0: the default budget */
        /* the checkpoints ran it: cuts made, part of each image's pass skipped */
        if (rd.ckpt.cuts == 0) fail_msg("%s: no checkpoint was made", fix);
        assert_false(rd.exact);
        assert_null(rd.full_reason);
        assert_true(rd.work_fraction > 0 && rd.work_fraction < 1);
        t->runs++;
        t->early += rd.ckpt.early;
        t->skipped += rd.ckpt.skipped;
        t->stored += rd.ckpt.stored > 0;
        if (getenv("BF_TEST_VERBOSE"))
            fprintf(stderr, "%s: cuts %zu, stored %zu (%llu bytes), skipped %lld, early %lld, work %.3f\n", fix,
                    rd.ckpt.cuts, rd.ckpt.stored, (unsigned long long)rd.ckpt.store_bytes, (long long)rd.ckpt.skipped,
                    (long long)rd.ckpt.early, rd.work_fraction);
    } else {
        /* no cut fits: every trial in full, and --stats says why */
        assert_int_equal(rd.ckpt.cuts, 0);
        assert_true(rd.exact);
        assert_non_null(rd.full_reason);
    }
    tc_ragkept_free(&ex);
    tc_ragkept_free(&df);
    bf_campaign_result_free(&rx);
    bf_campaign_result_free(&rd);
    bf_dataset_free(ds);
    bf_model_free(m);
}

static void same_as_exact(const char *fix, const bf_campaign_spec *s, int64_t budget, sums *t)
{
    same_as_exact_on(fix, s, budget, 2, t);
}

static bf_campaign_spec spec(bf_target target, int trials, uint64_t seed)
{
    bf_campaign_spec s = tc_base_spec(1);
    s.target = target;
    s.trials = trials;
    s.seed = seed;
    return s;
}

/* Trials a campaign: n, or san under the sanitizers (BF_SANITIZED): each test's counters still
 * hold, the same lines of the checkpoints' code run (gcov: tests/history/round21-h25-trims.md). */
#ifdef BF_SANITIZED
#define SIZED(n, san) (san)
#else
#define SIZED(n, san) (n)
#endif

static const char *const DETECTORS[] = {"ssd", "ssdlite", "retinanet", "fcos", "fasterrcnn", "maskrcnn", "yolo"};
#define N_DET (sizeof DETECTORS / sizeof *DETECTORS)

/* Weight faults confined to the tensors pats[0..np) names, one and two
 * bits, on 1 and 2 threads (same_as_exact_on), `trials` trials each,
 * seeded seed + 2 x bits + threads */
static void bits_and_threads(const char *fix, char **pats, size_t np, int trials, uint64_t seed, sums *t)
{
    for (int bits = 1; bits <= 2; bits++)
        for (int th = 1; th <= 2; th++) {
            bf_campaign_spec s = spec(BF_TARGET_WEIGHTS, trials, seed + (uint64_t)bits * 2 + (uint64_t)th);
            s.tensors = pats;
            s.n_tensors = np;
            s.bits = bits;
            same_as_exact_on(fix, &s, 0, th, t);
        }
}

static void weights_single_bit(void **state)
{
    (void)state;
    sums t = {0};
    for (size_t i = 0; i < N_DET; i++) {
        bf_campaign_spec s = spec(BF_TARGET_WEIGHTS, 24, 11 + i);
        same_as_exact(DETECTORS[i], &s, 0, &t);
    }
    /* not vacuous: faults that changed detections, and ones that did not,
     * some of them ended at a checkpoint */
    assert_int_equal(t.runs, (int64_t)N_DET);
    assert_true(t.changed > 0);
    assert_true(t.masked > 0);
    assert_true(t.early > 0);
    /* steps the faults could not reach were skipped, with golden values
     * kept for them on most detectors (another level's head, another
     * branch), and still every record and output is the exact engine's */
    assert_true(t.skipped > 0);
    assert_true(t.stored >= 4);
}

/* the one test whose cuts are weighed by measured times
 * (bf_campaign_prep.timed_costs; bitflip run's are counted) and whose
 * bytes are priced at this host's measure (bitflip run's are too): its
 * records must equal the exact engine's whatever the cuts */
static void weights_several_and_ber(void **state)
{
    (void)state;
    sums t = {.timed = 1, .price = -1};
    bf_campaign_spec s = spec(BF_TARGET_WEIGHTS, 16, 5);
    s.bits = 2;   /* two bits of one value */
    same_as_exact("ssdlite", &s, 0, &t);
    same_as_exact("fasterrcnn", &s, 0, &t);
    bf_campaign_spec b = spec(BF_TARGET_WEIGHTS, 8, 6);
    b.model_kind = BF_FAULT_BER;
    double rates[] = {1e-6, 1e-5};
    b.rates = rates;
    b.n_rates = 2;
    b.repeats = 4;
    same_as_exact("yolo", &b, 0, &t);
    assert_true(t.skipped > 0);
}

static void activations(void **state)
{
    (void)state;
    sums t = {0};
    for (size_t i = 0; i < N_DET; i += 2) {
        bf_campaign_spec s = spec(BF_TARGET_ACTIVATIONS, SIZED(16, 8), 21 + i);
        same_as_exact(DETECTORS[i], &s, 0, &t);
        s.persistence = BF_PERSIST_TRANSIENT;
        same_as_exact(DETECTORS[i], &s, 0, &t);
    }
    assert_true(t.changed > 0);
    assert_true(t.skipped > 0);
}

/* Faults confined to the detectors' heads (SSDlite's and SSD's last
 * Convs of each level: one reader each, so a fault in one output channel
 * of one runs on that channel alone, ckpt_chan.c; RetinaNet's and FCOS's
 * head Convs are shared by every level, so they run whole), one and two
 * bits, on 1 and 2 threads: every record and per-image output the exact
 * engine's, and the one-channel path taken. */
static void head_convs_on_one_channel(void **state)
{
    (void)state;
    static char *heads[] = {"head.*"};
    static const char *const fixes[] = {"ssdlite", "ssd", "retinanet", "fcos"};
    sums t = {0};
    int64_t chan_ssd = 0, tail_ssd = 0;
    for (size_t f = 0; f < sizeof fixes / sizeof *fixes; f++) {
        int64_t before = t.chan, tb = t.tail;
        bits_and_threads(fixes[f], heads, 1, SIZED(16, 8), 40 + f * 4, &t);
        if (f < 2) chan_ssd += t.chan - before, tail_ssd += t.tail - tb;
    }
    assert_true(chan_ssd > 0);
    /* SSD's and SSDlite's class-head faults ended images before their
     * class scores (ckpt_tail.c), their records still the exact engine's */
    assert_true(tail_ssd > 0);
    assert_true(t.changed > 0);
    assert_true(t.masked > 0);
    if (getenv("BF_TEST_VERBOSE"))
        fprintf(stderr, "heads: %lld Convs run on one channel, %lld images ended before the class scores\n",
                (long long)t.chan, (long long)t.tail);
}

/* Faults confined to the detectors' backbones, whose Convs compute their
 * activation in their epilogue (SSD's, RetinaNet's and FCOS's Relu,
 * SSDlite's HardSwish): a fault in one output channel of one recomputes
 * that channel with the epilogue over the chain's golden output
 * (ckpt_chan.c), and an image whose channel came back golden ends there.
 * One and two bits, 1 and 2 threads, with many trials (the golden pass
 * keeps a Conv's output only when the trials save more than that costs):
 * every record and per-image output the exact engine's, and the fused
 * path taken; and faults in the pointwise Convs before SSDlite's
 * depthwise ones, whose channel is followed through the depthwise Conv
 * (ckpt_chan.c), that path taken too. */
static void fused_convs_on_one_channel(void **state)
{
    (void)state;
    static char *backbone[] = {"backbone.*"};
    static const char *const fixes[] = {"ssdlite", "ssd", "retinanet", "fcos"};
    sums t = {0};
    for (size_t f = 0; f < sizeof fixes / sizeof *fixes; f++)
        bits_and_threads(fixes[f], backbone, 1, SIZED(48, 24), 60 + f * 4, &t);
    /* SSDlite's pointwise Convs before a depthwise one, alone: the trials'
     * mass there keeps the depthwise Conv's output too, and the channel is
     * followed through it (and its HardSwish) */
    static char *pointwise[] = {"backbone.stem.0.0.weight", "backbone.stem.1.1.0.weight"};
    bits_and_threads("ssdlite", pointwise, 2, SIZED(256, 128), 80, &t);
    assert_true(t.fused > 0);
    assert_true(t.follow > 0);
    assert_true(t.changed > 0);
    assert_true(t.masked > 0);
    if (getenv("BF_TEST_VERBOSE"))
        fprintf(stderr, "backbones: %lld steps run on one channel, %lld Convs with their epilogue, %lld steps following "
                "the channel on, %lld images ended there\n", (long long)t.chan, (long long)t.fused, (long long)t.follow,
                (long long)t.chan_early);
}

/* tests/fixtures/ckpt/ckpt_follow (make_ckpt_follow.py): a fault in one
 * output channel of its first Conv is followed through a Sigmoid, a
 * BatchNormalization, a depthwise Conv and a HardSigmoid, each on that
 * channel over its golden output (ckpt_chan.c), ending where the channel
 * comes back golden: every record and per-image output the exact
 * engine's, on 1 and 2 threads, one and two bits, and the steps followed. */
static void channel_followed_through_maps(void **state)
{
    (void)state;
    static char *first[] = {"c1.*"};
    sums t = {0};
    bits_and_threads("ckpt/ckpt_follow", first, 1, 64, 90, &t);
    /* four steps follow each of c1's runs on one channel, but where it
     * came back golden already */
    assert_true(t.chan > 0);
    assert_true(t.follow > 0);
    assert_true(t.changed > 0);
    if (getenv("BF_TEST_VERBOSE"))
        fprintf(stderr, "ckpt_follow: %lld steps on one channel, %lld following, %lld images ended there\n",
                (long long)t.chan, (long long)t.follow, (long long)t.chan_early);
}

static void no_room_for_a_cut(void **state)
{
    (void)state;
    sums t = {0};
    bf_campaign_spec s = spec(BF_TARGET_WEIGHTS, 8, 3);
    same_as_exact("ssdlite", &s, 1, &t);
}

/* A trial's pass does not feed a graph input when it resumes at a cut past
 * every step reading it (bf__ckpt_trial_skips_value; SSDlite's image is
 * read by its first step alone). On a graph that reads its input first and
 * last, x -> Conv -> Relu -> Conv -> Relu -> Conv -> Add(x) -> Conv, whose
 * chains fuse (so cuts fall only at the second and third Conv and the
 * last): a trial starting at a cut before the Add must be fed x, one past
 * it need not, and one before every cut is fed. The Add's step is found
 * here by name, the cuts read from the checkpoints. */
static void input_fed_unless_past_its_readers(void **state)
{
    (void)state;
    tg_graph g = {0};
    static const int64_t xd[] = {1, 4, 6, 6}, wd[] = {4, 4, 1, 1};
    float w[16];
    for (int k = 0; k < 16; k++) w[k] = (float)(k % 5) * 0.25f - 0.5f;
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, xd);
    g.outs[g.n_outs++] = tg_value_info(&g, "out", 1, 4, xd);
    const char *names[] = {"w1", "w2", "w3", "w4"};
    for (int k = 0; k < 4; k++) tg_init_f32(&g, names[k], 4, wd, w);
    tg_node(&g, "Conv", "c1", (const char *[]){"x", "w1"}, 2, "y1");
    tg_node(&g, "Relu", "r1", (const char *[]){"y1"}, 1, "a1");
    tg_node(&g, "Conv", "c2", (const char *[]){"a1", "w2"}, 2, "y2");
    tg_node(&g, "Relu", "r2", (const char *[]){"y2"}, 1, "a2");
    tg_node(&g, "Conv", "c3", (const char *[]){"a2", "w3"}, 2, "y3");
    tg_node(&g, "Add", "add", (const char *[]){"y3", "x"}, 2, "s");
    tg_node(&g, "Conv", "c4", (const char *[]){"s", "w4"}, 2, "out");
    bf_model *m = tg_load(&g, "late_input");
    bf_error err = {0};
    bf_plan *p = tg_plan(m, 1, 1, 1);
    size_t n = bf_plan_num_steps(p);
    int add = -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(p->steps[i].node->name, "add") == 0) add = (int)i;
    assert_true(add > 0);
    double cost[16] = {0}, pm[8] = {0};
    assert_true(n <= 16 && m->n_params <= 8);
    for (size_t i = 0; i < n; i++) cost[i] = 1e-3;
    for (size_t q = 0; q < m->n_params; q++) pm[q] = 16;
    bf__ckpt *ck = NULL;
    if (bf__ckpt_create(p, 2, 1000, cost, pm, NULL, (size_t)1 << 30, NULL, &ck, &err) != BF_OK) fail_msg("%s", err.msg);
    bf__ckpt_trial *tr = NULL;
    if (bf__ckpt_trial_new(ck, &tr, &err) != BF_OK) fail_msg("%s", err.msg);
    int64_t x = bf_model_find_value(m, "x");
    int fed = 0, skipped = 0, before = 0;
    for (int k = 0; k < 4; k++) {
        int64_t q = bf_model_find_param(m, names[k]);
        assert_true(q >= 0);
        bf__ckpt_trial_begin(ck, tr);
        bf__ckpt_trial_param(ck, tr, (size_t)q);
        bf__ckpt_trial_end(ck, tr);
        int from = tr->from >= 0 ? ck->cut[tr->from] : -1, skip = bf__ckpt_trial_skips_value(ck, tr, x);
        if (getenv("BF_TEST_VERBOSE")) fprintf(stderr, "%s: from step %d, the Add at %d: skip %d\n", names[k], from, add, skip);
        assert_int_equal(skip, from > add);
        fed += from >= 0 && !skip, skipped += skip, before += from < 0;
        bf__ckpt_trial_clear(tr);
    }
    /* each case met: a cut before the Add, one after, and a trial before every cut */
    assert_true(fed > 0 && skipped > 0 && before > 0);
    assert_int_equal(bf__ckpt_trial_skips_value(ck, NULL, x), 0);   /* no trial: the golden pass feeds */
    bf__ckpt_trial_free(tr);
    bf__ckpt_free(ck);
    bf_plan_free(p);
    bf_model_free(m);
}

/* Trials given to the chooser as a list (bf__ckpt_drawn), each one
 * weight element: element index[k] of parameter q[k]. */
typedef struct drawn_list {
    int64_t q[8], index[8];
    int n;
} drawn_list;

/* trial k of d on ck: begun, its fault's parameter and element, ended */
static void one_trial(const bf__ckpt *ck, bf__ckpt_trial *tr, const drawn_list *d, int k)
{
    bf__ckpt_trial_begin(ck, tr);
    bf__ckpt_trial_param(ck, tr, (size_t)d->q[k]);
    bf__ckpt_trial_element(ck, tr, (size_t)d->q[k], d->index[k]);
    bf__ckpt_trial_end(ck, tr);
}

static bf_status run_list(void *user, const bf__ckpt *ck, bf__ckpt_trial *tr, bf_error *err)
{
    (void)err;
    const drawn_list *d = user;
    for (int k = 0; k < d->n; k++) one_trial(ck, tr, d, k);
    return BF_OK;
}

/* The SSDlite fixture's one-image plan (as the evaluator's) with a step cost
 * of 1e-6 s for dynamic steps, 1e-4 for the rest, and 1 per parameter: the
 * counted costs the checkpoint-choice tests below give the chooser; and
 * their eight drawn trials, element 0 of every third parameter from the
 * last (the heads' Convs' channels first). */
typedef struct ssd_costs {
    bf_model *m;
    bf_dataset *ds;
    bf_plan *p;
    double *cost, *pm;
    size_t n;   /* steps */
    drawn_list d;
} ssd_costs;

static void ssd_open(ssd_costs *c)
{
    memset(c, 0, sizeof *c);
    tc_load(BF_FIXTURES "/det/ssdlite", &c->m, &c->ds);
    bf_error err = {0};
    bf_plan_opts po = {.fuse_activations = 1, .share_buffers = 1, .unbatched = 1};
    if (bf_plan_create_opts(c->m, 1, &po, &c->p, &err) != BF_OK) fail_msg("%s", err.msg);
    c->n = bf_plan_num_steps(c->p);
    c->cost = calloc(c->n + 1, sizeof *c->cost), c->pm = calloc(c->m->n_params + 1, sizeof *c->pm);
    assert_true(c->cost && c->pm);
    for (size_t i = 0; i < c->n; i++) c->cost[i] = c->p->steps[i].dyn ? 1e-6 : 1e-4;
    for (size_t q = 0; q < c->m->n_params; q++) c->pm[q] = 1;
    for (size_t q = c->m->n_params; q-- > 0 && c->d.n < 8;)
        if (q % 3 == 0) c->d.q[c->d.n] = (int64_t)q, c->d.index[c->d.n++] = 0;
}

static void ssd_close(ssd_costs *c)
{
    free(c->cost);
    free(c->pm);
    bf_plan_free(c->p);
    bf_dataset_free(c->ds);
    bf_model_free(c->m);
}

/* From c's costs, the whole store (bf__ckpt_create) and the one made for
 * c's drawn trials (bf__ckpt_opts.drawn: cut and priced to them), a
 * trial of each; two_trial runs drawn trial k on both. */
typedef struct two_stores {
    bf__ckpt *all, *ck;
    bf__ckpt_trial *ta, *tc;
} two_stores;

static two_stores two_open(ssd_costs *c)
{
    two_stores s = {0};
    bf_error err = {0};
    if (bf__ckpt_create(c->p, 2, 8, c->cost, c->pm, NULL, (size_t)1 << 30, NULL, &s.all, &err) != BF_OK)
        fail_msg("%s", err.msg);
    if (bf__ckpt_create(c->p, 2, 8, c->cost, c->pm, NULL, (size_t)1 << 30, &(bf__ckpt_opts){.drawn = run_list, .user = &c->d}, &s.ck, &err) != BF_OK)
        fail_msg("%s", err.msg);
    if (bf__ckpt_trial_new(s.all, &s.ta, &err) != BF_OK || bf__ckpt_trial_new(s.ck, &s.tc, &err) != BF_OK)
        fail_msg("%s", err.msg);
    return s;
}

static void two_trial(two_stores *s, const ssd_costs *c, int k)
{
    one_trial(s->all, s->ta, &c->d, k);
    one_trial(s->ck, s->tc, &c->d, k);
}

static void two_close(two_stores *s)
{
    bf__ckpt_trial_free(s->ta);
    bf__ckpt_trial_free(s->tc);
    bf__ckpt_free(s->all);
    bf__ckpt_free(s->ck);
}

/* The store cut to the drawn trials (bf__ckpt_opts.drawn): every drawn
 * trial's run takes the same steps, fills, one-channel Convs and restores
 * with the cut store as with the whole one, which holds more. On the
 * SSDlite fixture with every parameter weighed alike, eight trials, one
 * weight element each (a head Conv's channel among them); the whole store
 * made by bf__ckpt_create from the same costs. Marking nothing for the
 * one-channel walks or the fills fails it. */
static void store_cut_to_the_drawn_trials(void **state)
{
    (void)state;
    ssd_costs c;
    ssd_open(&c);
    two_stores s = two_open(&c);
    bf__ckpt *all = s.all, *cut = s.ck;
    bf__ckpt_trial *ta = s.ta, *tc = s.tc;
    bf_error err = {0};
    assert_true(bf__ckpt_num_cuts(all) > 0 && bf__ckpt_num_stored(all) > 0);
    assert_true(bf__ckpt_num_stored(cut) < bf__ckpt_num_stored(all));
    assert_true(bf__ckpt_bytes(cut) < bf__ckpt_bytes(all));
    int fills = 0, chans = 0;
    for (int k = 0; k < c.d.n; k++) {
        two_trial(&s, &c, k);
        assert_int_equal(ta->all, tc->all);
        assert_int_equal(ta->from, tc->from);
        assert_int_equal(ta->chan_step, tc->chan_step);
        chans += ta->chan_step >= 0;
        if (ta->all) continue;
        for (size_t i = 0; i < c.n; i++) {
            if (ta->act[i] != tc->act[i]) fail_msg("trial %d (parameter %lld): step %zu acts %d, cut store %d", k,
                                                   (long long)c.d.q[k], i, ta->act[i], tc->act[i]);
            fills += (ta->act[i] & BF__STEP_FILL) != 0;
        }
        assert_memory_equal(ta->read, tc->read, c.m->n_values);
    }
    if (getenv("BF_TEST_VERBOSE"))
        fprintf(stderr, "store %zu -> %zu values, %llu -> %llu bytes; %d fills, %d channels\n", bf__ckpt_num_stored(all),
                bf__ckpt_num_stored(cut), (unsigned long long)bf__ckpt_bytes(all), (unsigned long long)bf__ckpt_bytes(cut),
                fills, chans);
    assert_true(fills > 0 && chans > 0);   /* both kinds of put-back were there to keep */
    /* every allocation refused in turn, the marks' among them: BF_ENOMEM
     * and nothing held (the ASan build checks the leaks), or checkpoints
     * whose store is the cut one or the whole one */
    int refused = 0;
    for (long k = 0; k < 100000; k++) {
        bf__ckpt *ck = NULL;
        size_t live = bf_test_alloc_live();
        bf_test_alloc_fail_after(k);
        bf_status st = bf__ckpt_create(c.p, 2, 8, c.cost, c.pm, NULL, (size_t)1 << 30, &(bf__ckpt_opts){.drawn = run_list, .user = &c.d}, &ck, &err);
        long failed = bf_test_alloc_failures();
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) {
            size_t ns = bf__ckpt_num_stored(ck);
            assert_true(ns == bf__ckpt_num_stored(cut) || ns == bf__ckpt_num_stored(all));
            bf__ckpt_free(ck);
            if (failed == 0) break;
            continue;
        }
        assert_int_equal(st, BF_ENOMEM);
        assert_null(ck);
        assert_int_equal(bf_test_alloc_live(), live);
        refused++;
    }
    assert_true(refused > 10);
    two_close(&s);
    ssd_close(&c);
}

/* The store priced value by value against the drawn trials (ckpt_reach.c,
 * price_store): on the SSDlite fixture, the eight trials of the test
 * above, every step but the Convs priced at a nanosecond (the Convs at
 * 0.1 ms), bytes at 1 ns. The values a run puts back that only cheap
 * steps make go, and what the runs then do is checked here from the
 * test's own step costs, not the chooser's sums: (1) every value a
 * trial's run reads is restored at its cut, computed by a step it runs,
 * or put back from the store, which holds it; (2) a run skips no step the
 * whole store's run runs; (3) the steps the runs now run instead of
 * putting values back cost them, over both images, less than recording
 * the values taken out would have. Keeping every group (the pricing
 * skipped) fails (0), dropping every group fails (3) or (1). Where a
 * group's saving equals its cost exactly: store_priced_at_the_tie. */
static void store_priced_by_the_drawn_trials(void **state)
{
    (void)state;
    ssd_costs c;
    ssd_open(&c);
    for (size_t i = 0; i < c.n; i++)
        if (!c.p->steps[i].dyn && strcmp(c.p->steps[i].node->op->name, "Conv") != 0) c.cost[i] = 1e-9;
    two_stores s = two_open(&c);
    const bf__ckpt *ck = s.ck;
    bf__ckpt_trial *ta = s.ta, *tc = s.tc;
    if (getenv("BF_TEST_VERBOSE"))
        fprintf(stderr, "priced out %zu values, %llu bytes an image; store %zu values\n", ck->priced_out,
                (unsigned long long)ck->priced_bytes, bf__ckpt_num_stored(ck));
    assert_true(ck->priced_out > 0 && ck->priced_bytes > 0);   /* (0) */
    double extra = 0;
    for (int k = 0; k < c.d.n; k++) {
        two_trial(&s, &c, k);
        assert_int_equal(ta->from, tc->from);
        if (tc->all) continue;
        int f = tc->from >= 0 ? ck->cut[tc->from] : 0;
        for (size_t i = (size_t)f; i < c.n; i++) {
            int runs_c = !(tc->act[i] & BF__STEP_SKIP), runs_a = !(ta->act[i] & BF__STEP_SKIP);
            if (runs_a && !runs_c) fail_msg("trial %d: step %zu skipped with the priced store only", k, i);   /* (2) */
            if (runs_c && !runs_a && (i != (size_t)tc->chan_step || tc->chan_step != ta->chan_step)) extra += c.cost[i];
            if (!runs_c) continue;
            for (int j = ck->in_first[i]; j < ck->in_first[i + 1]; j++) {   /* (1) */
                int v = ck->in_val[j], at = ck->val_step[v];
                if (at < f) continue;   /* restored at the cut, or not a step's */
                int ok = !(tc->act[at] & BF__STEP_SKIP) || ((tc->act[at] & BF__STEP_FILL) && ck->store_of[v] >= 0);
                if (!ok) fail_msg("trial %d: step %zu reads value %d that nothing gives it", k, i, v);
            }
        }
    }
    if (getenv("BF_TEST_VERBOSE")) fprintf(stderr, "the runs' extra steps: %g s an image\n", extra);
    assert_true(extra * 2 < BF__CKPT_BYTE_SECONDS * (double)ck->priced_bytes * 2);   /* (3) */
    two_close(&s);
    ssd_close(&c);
}

/* price_store's boundary, worked by hand: a group goes only when recording
 * it costs more than the trials' runs grow without it; where the two are
 * equal it stays. The graph, one image, no fusion:
 *
 *   step 0  a = Mul(x, w0)      4 u (u = 2^-9 s = 1953125 ns: whole
 *   step 1  c = Mul(a, w2)      1 u  nanoseconds, as the chooser keeps
 *   step 2  b = Sigmoid(a)      2 u  step times, so that the sums below
 *   step 3  y = Add(c, b)       1 u  are exact), every value 16 floats
 *
 * Faults land in w2 only (one drawn trial, element 0; the chooser told of
 * 2 trials). The one cut is at step 1 (holding a). The trial runs steps 1
 * and 3; b, which it does not reach, it takes from the store (64 bytes,
 * put back at FILL_SECONDS = 0.3 ns a byte, ckpt_reach.c) or runs step 2
 * again. Its run, on one image:
 *   with b stored:    2 u + 64 x 0.3 ns = 3906250e-9 s + 19.2e-9 s
 *   without b:        4 u               = 7812500e-9 s
 * so the group {b} saves what recording its 64 bytes costs at a byte
 * price of (without - with) / 64 (64 a power of two: exact both ways).
 * At that price it stays; a price one ulp dearer takes it out, one ulp
 * cheaper keeps it. Every gain taken as positive (a planted `gain = 1`),
 * or `>=` for `>`, takes it out at the tie and fails. */
static void store_priced_at_the_tie(void **state)
{
    (void)state;
    tg_graph g = {0};
    static const int64_t d16[] = {1, 16};
    float w[16];
    for (int k = 0; k < 16; k++) w[k] = 0.5f + 0.125f * (float)(k % 4);
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, d16);
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, d16);
    tg_init_f32(&g, "w0", 2, d16, w);
    tg_init_f32(&g, "w2", 2, d16, w);
    tg_node(&g, "Mul", "s0", (const char *[]){"x", "w0"}, 2, "a");
    tg_node(&g, "Mul", "s1", (const char *[]){"a", "w2"}, 2, "c");
    tg_node(&g, "Sigmoid", "s2", (const char *[]){"a"}, 1, "b");
    tg_node(&g, "Add", "s3", (const char *[]){"c", "b"}, 2, "y");
    bf_model *m = tg_load(&g, "tie");
    bf_error err = {0};
    bf_plan *p = tg_plan(m, 1, 0, 1);
    assert_int_equal(bf_plan_num_steps(p), 4);
    static const char *const order[] = {"s0", "s1", "s2", "s3"};
    for (int i = 0; i < 4; i++) assert_string_equal(p->steps[i].node->name, order[i]);
    const double u = 1.0 / 512;
    double cost[4] = {4 * u, u, 2 * u, u}, pm[2] = {0, 0};
    int64_t w2 = bf_model_find_param(m, "w2"), b = bf_model_find_value(m, "b");
    assert_true(w2 >= 0 && w2 < 2 && b >= 0);
    pm[w2] = 1;
    drawn_list d = {.q = {w2}, .index = {0}, .n = 1};
    const double fill = 0.3e-9 * 64, with = 3906250 * 1e-9 + fill, without = 7812500 * 1e-9;
    const double tie = (without - with) / 64;
    const double prices[3] = {tie, nextafter(tie, 1), nextafter(tie, 0)};
    for (int k = 0; k < 3; k++) {
        bf__ckpt *ck = NULL;
        if (bf__ckpt_create(p, 1, 2, cost, pm, NULL, (size_t)1 << 30, &(bf__ckpt_opts){.drawn = run_list, .user = &d, .byte_s = prices[k]}, &ck, &err) != BF_OK)
            fail_msg("%s", err.msg);
        assert_int_equal(bf__ckpt_num_cuts(ck), 1);
        assert_int_equal(ck->cut[0], 1);
        int goes = k == 1;
        if (getenv("BF_TEST_VERBOSE"))
            fprintf(stderr, "byte price %.17g: priced out %zu (%llu bytes), store %zu\n", prices[k], ck->priced_out,
                    (unsigned long long)ck->priced_bytes, bf__ckpt_num_stored(ck));
        assert_int_equal(ck->priced_out, goes);
        assert_int_equal(ck->priced_bytes, goes ? 64 : 0);
        assert_int_equal(bf__ckpt_num_stored(ck), !goes);
        assert_int_equal(ck->store_of[b] >= 0, !goes);
        bf__ckpt_free(ck);
    }
    bf_plan_free(p);
    bf_model_free(m);
}

/* Bytes priced dear (BF__CKPT_BYTE_SECONDS_DEAR, where a host's fresh
 * pages cost 2.3-2.6 ns a byte, h18-ssd): the choice keeps no more bytes
 * than at the usual 1 ns (and fewer at 1 us: the price is read), the same
 * fixture's costs and faults, and the
 * campaigns' records and outputs are still the exact engine's. And this
 * host's measure of fresh pages is one (bf__pages_fresh_cost: above 0 on
 * Linux, 0 where nothing can be mapped; no timing asserted). */
static void dear_bytes_fewer_checkpoints(void **state)
{
    (void)state;
    ssd_costs c;
    ssd_open(&c);
    bf_error err = {0};
    uint64_t prev = UINT64_MAX, first = 0;
    const double prices[] = {BF__CKPT_BYTE_SECONDS, BF__CKPT_BYTE_SECONDS_DEAR, 1e-6};
    for (int k = 0; k < 3; k++) {
        bf__ckpt *ck = NULL;
        if (bf__ckpt_create(c.p, 2, 8, c.cost, c.pm, NULL, (size_t)1 << 30, &(bf__ckpt_opts){.byte_s = prices[k]}, &ck, &err) != BF_OK)
            fail_msg("%s", err.msg);
        assert_true(bf__ckpt_byte_price(ck) == prices[k]);
        uint64_t b = bf__ckpt_bytes(ck);
        if (getenv("BF_TEST_VERBOSE"))
            fprintf(stderr, "priced %.1f ns: %zu cuts, %llu bytes\n", prices[k] * 1e9, bf__ckpt_num_cuts(ck),
                    (unsigned long long)b);
        assert_true(b <= prev);
        if (k == 0) {
            assert_true(b > 0);
            first = b;
        }
        if (k == 2) assert_true(b < first);   /* a microsecond a byte: the price is read */
        prev = b;
        bf__ckpt_free(ck);
    }
    ssd_close(&c);
    sums t = {.price = BF__CKPT_BYTE_SECONDS_DEAR};
    for (size_t i = 0; i < 3; i++) {
        bf_campaign_spec s = spec(BF_TARGET_WEIGHTS, 16, 31 + i);
        same_as_exact(DETECTORS[i], &s, 0, &t);
    }
    assert_int_equal(t.runs, 3);
    assert_true(t.changed > 0 && t.early > 0);
#if defined(__linux__)
    assert_true(bf__pages_fresh_cost((size_t)1 << 20) > 0);
#endif
}

/* The checkpoints in 2 MiB pages (bf__ckpt_host_pages: bf__pages_huge_cheaper,
 * where 4 KiB fresh pages measure dear and 2 MiB ones cheap): the rule on hand-picked
 * measurements (the AMD host's 2.6 and 0.1 ns a byte: huge; an Intel
 * host's 0.35: not dear, never huge; huge pages not measured, or no
 * cheaper: not), and the three detectors' campaigns with their block so
 * pinned give the exact engine's records and outputs. No timing asserted:
 * the measurement is only run (0 or more). */
static void checkpoints_in_huge_pages(void **state)
{
    (void)state;
    assert_int_equal(bf__pages_huge_rule(2.6e-9, 0.1e-9), 1);
    assert_int_equal(bf__pages_huge_rule(0.35e-9, 0.1e-9), 0);
    assert_int_equal(bf__pages_huge_rule(2.6e-9, 0), 0);
    assert_int_equal(bf__pages_huge_rule(2.6e-9, 2.4e-9), 0);
    assert_int_equal(bf__pages_huge_rule(0, 0), 0);
    double price = 0;
    int huge = bf__ckpt_host_pages(&price);
    assert_true(huge == 0 || huge == 1);
    assert_true(price == BF__CKPT_BYTE_SECONDS || price == BF__CKPT_BYTE_SECONDS_DEAR);
    assert_true(bf__pages_fresh_cost_huge((size_t)2 << 20) >= 0);
    /* BITFLIP_HUGE_PAGES=0 says no huge pages: nothing measured, never huge */
    const char *was = getenv("BITFLIP_HUGE_PAGES");
    char *keep = was ? strdup(was) : NULL;
    assert_true(!was || keep);
    setenv("BITFLIP_HUGE_PAGES", "0", 1);
    assert_true(bf__pages_fresh_cost_huge((size_t)2 << 20) == 0);
    assert_int_equal(bf__pages_huge_cheaper(NULL), 0);
    if (keep) setenv("BITFLIP_HUGE_PAGES", keep, 1);
    else unsetenv("BITFLIP_HUGE_PAGES");
    free(keep);
    sums t = {.price = BF__CKPT_BYTE_SECONDS_DEAR};
    pin_huge = 1;
    for (size_t i = 0; i < 3; i++) {
        bf_campaign_spec s = spec(BF_TARGET_WEIGHTS, 16, 41 + i);
        same_as_exact(DETECTORS[i], &s, 0, &t);
    }
    pin_huge = 0;
    assert_int_equal(t.runs, 3);
    assert_true(t.changed > 0);
}

/* The host's pages as the caller measured them once for its process
 * (bf_campaign_prep.host_pages: the CLI's and the daemon worker's
 * bf_host_pages_measure) are the campaign's: the checkpoints priced and
 * paged by them, never by a measurement of the campaign's own. Two
 * hand-picked measurements, the AMD host's (4 KiB pages at 2.6 ns a byte,
 * 2 MiB ones cheap: 2.5 ns a byte, 2 MiB pages) and an Intel host's (0.35
 * ns: 1 ns, 4 KiB pages), so that a campaign measuring this host instead
 * fails one of them wherever it runs; the records equal the exact
 * engine's either way, the golden cache's pages (BF__WRITE_HUGE where
 * .huge says) included. */
static void host_pages_from_the_caller(void **state)
{
    (void)state;
    sums t = {.price = -1};   /* not pinned: the campaign's host choice runs */
    const bf_host_pages hosts[2] = {{.measured = 1, .huge = 1, .small_cost = 2.6e-9},
                                    {.measured = 1, .huge = 0, .small_cost = 0.35e-9}};
    for (int h = 0; h < 2; h++) {
        pin_host = hosts[h];
        bf_campaign_spec s = spec(BF_TARGET_WEIGHTS, 12, 61 + (uint64_t)h);
        same_as_exact(DETECTORS[h], &s, 0, &t);
    }
    pin_host = (bf_host_pages){0};
    assert_int_equal(t.runs, 2);
    bf_host_pages now = bf_host_pages_measure();   /* only run: no timing asserted */
    assert_int_equal(now.measured, 1);
    assert_true(now.huge == 0 || now.huge == 1);
    assert_true(now.small_cost >= 0);
}

/* a failed assertion ends host_pages_from_the_caller early: the tests
 * after it run unpinned all the same */
static int unpin_host(void **state)
{
    (void)state;
    pin_host = (bf_host_pages){0};
    return 0;
}

/* tests/unit/test_ckpt/alloc.c */
void allocations_fail_cleanly(void **state);

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(weights_single_bit),
        cmocka_unit_test_teardown(host_pages_from_the_caller, unpin_host),
        cmocka_unit_test(weights_several_and_ber),
        cmocka_unit_test(activations),
        cmocka_unit_test(head_convs_on_one_channel),
        cmocka_unit_test(fused_convs_on_one_channel),
        cmocka_unit_test(channel_followed_through_maps),
        cmocka_unit_test(no_room_for_a_cut),
        cmocka_unit_test(input_fed_unless_past_its_readers),
        cmocka_unit_test(store_cut_to_the_drawn_trials),
        cmocka_unit_test(store_priced_by_the_drawn_trials),
        cmocka_unit_test(store_priced_at_the_tie),
        cmocka_unit_test(dear_bytes_fewer_checkpoints),
        cmocka_unit_test(checkpoints_in_huge_pages),
        cmocka_unit_test(allocations_fail_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
