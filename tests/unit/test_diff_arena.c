/* A differential worker's places shared by lifetime (core/src/diff/
 * diffarena.c): a value's life is every moment a weight-fault trial may
 * write or read it, out of step order included, and no two values alive at
 * once share a byte.
 *
 * The graph, built here, whose skip connection makes fetch recompute a
 * value long after its producer's step when the cache leaves it out:
 *
 *   step 0  a = Sigmoid(x)        x [N, 4], the graph input
 *   step 1  b = Mul(x, w)         w [4], a parameter
 *   step 2  c = Tanh(b)
 *   step 3  d = Add(c, a)         a's first reader
 *   step 4  y = MatMul(d, W2)     W2 [4, 3]; y [N, 3], the graph output
 *
 * The lives, worked by hand (a step runs at its own moment, -1 is before
 * the first step, 5 after the last; the graph output and the inputs of the
 * step computing it live to 5, diffout.c reading them after every batch):
 *
 * - cache holds a, b, c, d (the default budget): each value from its step
 *   to its last reader: x [-1, 1], a [0, 3], b [1, 2], c [2, 3], d [3, 5],
 *   y [4, 5];
 * - cache holds all but a: step 3 reading a runs step 0 again then,
 *   reading x: x [-1, 3], the others as above;
 * - cache holds nothing (budget 1 byte; y, the golden outputs, aside):
 *   step 4 reading d runs step 3, which fetches c (step 2, then b: step 1,
 *   reading x) and a (step 0, reading x), all at moment 4: x [-1, 4],
 *   a [0, 4], b [1, 4], c [2, 4], d [3, 5], y [4, 5];
 * - cache holds b, c and y (a and d left out): step 3 reading a runs step
 *   0 (x to 3); step 4 reading d runs step 3, which reads c from the cache
 *   (fetch reads a held value there even when the trial computed it and
 *   found it golden: its place need not live to 4) and fetches a again
 *   (step 0, x to 4): x [-1, 4], a [0, 4], b [1, 2], c [2, 3], d [3, 5],
 *   y [4, 5]; before that rule c lived to 4.
 *
 * First fit of the held-all lives at batch 4 (every value 64 bytes, y 48
 * rounded to 64), by hand: x at 0, a at 64, b at 128, c at 0 (x dead
 * after 1), d at 128 (b dead after 2), y at 0 (a and c dead after 3): 192
 * bytes. Under the held-nothing lives x and c are alive at once (2 to 4):
 * the check must refuse that layout (a planted overlap), and the layout of
 * those lives must keep all six apart (384 bytes). That layout is what a
 * worker without the fetch rule would run: a fault in w re-runs steps 1
 * and 2 (c written over x), then step 3 fetches a, recomputing step 0 from
 * x's place, which holds c by then; so the records below, at budget 1,
 * catch it too.
 *
 * The golden cache, when its budget cannot hold every value, keeps the
 * graph's cuts first (gcache.c, cuts_first): a value computed from the
 * input that is, after its step, the only such value a later step reads.
 * By hand: after step 0 x and a cross to later steps, after 1 a and b,
 * after 2 a and c, after 3 d alone, after 4 y alone (the output): d and y
 * are the cuts. Each of a..d is 160 bytes over the 10 samples (two blocks
 * of 4 x 4 floats and one of 2 x 4), y 120; a budget of 280 holds y and
 * d, where smallest first by value index (the rule before) held y and a.
 * With d held, step 4 reads it from the cache and only step 3's fetches
 * recompute: x [-1, 3], a [0, 3], b [1, 3], c [2, 3], d [3, 5], y [4, 5].
 *
 * Then each campaign's records, differential at all three budgets on 1
 * and 2 threads, equal the exact engine's. And the places' pages follow
 * the golden cache's: 2 MiB ones asked for where the cache's blocks are in
 * them (the host's measurement), the same layout either way. */
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
#include "base/warena.h"
#include "campaign_check.h"
#include "diff/diff_impl.h"
#include "exec/plan_impl.h"
#include "diff_graph.h"
#include "dx_worker.h"
#include "onnx_graph.h"

#define SAMPLES 10
#define BATCH 4
#define NV 6

static const char *const names[NV] = {"x", "a", "b", "c", "d", "y"};
/* the hand-worked lives above, per name: held all, all but a, nothing,
 * the cuts d and y, b c and y */
static const int life[5][NV][2] = {
    {{-1, 1}, {0, 3}, {1, 2}, {2, 3}, {3, 5}, {4, 5}},
    {{-1, 3}, {0, 3}, {1, 2}, {2, 3}, {3, 5}, {4, 5}},
    {{-1, 4}, {0, 4}, {1, 4}, {2, 4}, {3, 5}, {4, 5}},
    {{-1, 3}, {0, 3}, {1, 3}, {2, 3}, {3, 5}, {4, 5}},
    {{-1, 4}, {0, 4}, {1, 2}, {2, 3}, {3, 5}, {4, 5}},
};
#define CUTS_BUDGET 280   /* y (120 bytes) and d (160): the cuts */

typedef struct fixture {
    tc_loaded l;   /* first: tc_group_close frees the fixture */
    int v[NV];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    tg_graph g = {0};
    uint64_t rng = 31;
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, 4});
    float *w = tg_alloc(&g, 4 * sizeof(float)), *w2 = tg_alloc(&g, 12 * sizeof(float));
    dg_fill(&rng, w, 4, 1.0);
    dg_fill(&rng, w2, 12, 1.0);
    tg_init_f32(&g, "w", 1, (int64_t[]){4}, w);
    tg_init_f32(&g, "W2", 2, (int64_t[]){4, 3}, w2);
    tg_node(&g, "Sigmoid", "n_a", (const char *const[]){"x"}, 1, "a");
    tg_node(&g, "Mul", "n_b", (const char *const[]){"x", "w"}, 2, "b");
    tg_node(&g, "Tanh", "n_c", (const char *const[]){"b"}, 1, "c");
    tg_node(&g, "Add", "n_d", (const char *const[]){"c", "a"}, 2, "d");
    tg_node(&g, "MatMul", "n_y", (const char *const[]){"d", "W2"}, 2, "y");
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, (int64_t[]){-1, 3});
    size_t dl;
    float x[SAMPLES * 4];
    dg_fill(&rng, x, SAMPLES * 4, 3.0);
    dg_input in = {"x", 2, (int64_t[]){SAMPLES, 4}, x};
    uint8_t *db = dg_eval_set(&in, 1, SAMPLES, 3, &rng, &dl);
    f->l.m = tg_load(&g, "arena");
    dg_load_set(db, dl, "arena", &f->l.ds);
    free(db);
    for (int k = 0; k < NV; k++) {
        f->v[k] = (int)bf_model_find_value(f->l.m, names[k]);
        assert_true(f->v[k] >= 0);
    }
    *state = f;
    return 0;
}

static bf_evaluator *evaluator(const fixture *f)
{
    bf_eval_opts eo = {.batch = BATCH, .threads = 1};
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    if (bf_evaluator_create(f->l.m, f->l.ds, &eo, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
    return ev;
}

/* the plan as the table assumes it: step k computes names[k + 1], nothing fused */
static void plan_as_drawn(const fixture *f, const bf_plan *p)
{
    assert_int_equal(p->n_steps, 5);
    for (int k = 1; k < NV; k++) assert_int_equal(p->val_step[f->v[k]], k - 1);
    for (size_t i = 0; i < p->n_steps; i++) assert_int_equal(p->fuse_to[i], 0);
}

/* bf__dx_lifetimes against table t, held per name */
static void lives_match(const fixture *f, const bf_plan *p, const unsigned char held_of[NV], int t, int *first,
                        int *last)
{
    size_t n = f->l.m->n_values;
    unsigned char *held = calloc(n + 1, 1);
    assert_non_null(held);
    for (int k = 0; k < NV; k++) held[f->v[k]] = held_of[k];
    bf_error err = {0};
    if (bf__dx_lifetimes(p, held, f->v[5], first, last, &err) != BF_OK) fail_msg("%s", err.msg);
    for (int k = 0; k < NV; k++) {
        if (first[f->v[k]] != life[t][k][0] || last[f->v[k]] != life[t][k][1])
            fail_msg("table %d: %s lives [%d, %d], by hand [%d, %d]", t, names[k], first[f->v[k]], last[f->v[k]],
                     life[t][k][0], life[t][k][1]);
    }
    free(held);
}

static void lives_as_worked_by_hand(void **state)
{
    const fixture *f = *state;
    bf_evaluator *ev = evaluator(f);
    const bf_plan *p = bf__evaluator_plan(ev, 0);
    plan_as_drawn(f, p);
    size_t n = f->l.m->n_values;
    int *first = calloc(n + 1, sizeof *first), *last = calloc(n + 1, sizeof *last);
    assert_non_null(first), assert_non_null(last);
    static const unsigned char held[5][NV] = {
        {0, 1, 1, 1, 1, 1}, {0, 0, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 1}, {0, 0, 0, 0, 1, 1}, {0, 0, 1, 1, 0, 1}};
    for (int t = 0; t < 5; t++) lives_match(f, p, held[t], t, first, last);
    free(first), free(last);
    bf_evaluator_free(ev);
}

/* first fit of table t's lives over the six values at batch 4 */
static size_t fit(const fixture *f, int t, unsigned char *place, size_t *bytes, int *first, int *last, size_t *off)
{
    size_t n = f->l.m->n_values, total = 0;
    memset(place, 0, n);
    for (int k = 0; k < NV; k++) {
        int v = f->v[k];
        place[v] = 1;
        bytes[v] = (size_t)BATCH * (k == 5 ? 3 : 4) * sizeof(float);
        first[v] = life[t][k][0], last[v] = life[t][k][1];
    }
    bf_error err = {0};
    if (bf__plan_first_fit(n, place, bytes, first, last, off, &total, &err) != BF_OK) fail_msg("%s", err.msg);
    return total;
}

/* no two values of table t alive at once share a byte, by the table
 * itself (not bf__dx_slots_overlap) */
static void apart_by_hand(const fixture *f, int t, const size_t *bytes, const size_t *off)
{
    for (int i = 0; i < NV; i++)
        for (int j = i + 1; j < NV; j++) {
            int vi = f->v[i], vj = f->v[j];
            int alive = life[t][i][0] <= life[t][j][1] && life[t][j][0] <= life[t][i][1];
            int share = off[vi] < off[vj] + bytes[vj] && off[vj] < off[vi] + bytes[vi];
            if (alive && share) fail_msg("table %d: %s and %s alive at once in the same bytes", t, names[i], names[j]);
        }
}

static void layout_and_planted_overlap(void **state)
{
    const fixture *f = *state;
    size_t n = f->l.m->n_values;
    unsigned char *place = calloc(n + 1, 1);
    size_t *bytes = calloc(n + 1, sizeof *bytes), *off = calloc(n + 1, sizeof *off);
    int *first = calloc(n + 1, sizeof *first), *last = calloc(n + 1, sizeof *last);
    assert_non_null(place), assert_non_null(bytes), assert_non_null(off), assert_non_null(first), assert_non_null(last);
    /* held all: 192 bytes, x, c and y at 0, a at 64, b and d at 128 */
    assert_int_equal(fit(f, 0, place, bytes, first, last, off), 192);
    static const size_t at[NV] = {0, 64, 128, 0, 128, 0};
    for (int k = 0; k < NV; k++) assert_int_equal(off[f->v[k]], at[k]);
    apart_by_hand(f, 0, bytes, off);
    int va = -1, vb = -1;
    assert_int_equal(bf__dx_slots_overlap(n, place, bytes, first, last, off, &va, &vb), 0);
    /* planted: that layout under the lives with the cuts held (x read by
     * step 3's fetches) puts x and c, alive at once, in the same bytes */
    for (int k = 0; k < NV; k++) first[f->v[k]] = life[3][k][0], last[f->v[k]] = life[3][k][1];
    assert_int_equal(bf__dx_slots_overlap(n, place, bytes, first, last, off, &va, &vb), 1);
    assert_true((va == f->v[0] && vb == f->v[3]) || (va == f->v[3] && vb == f->v[0]));
    /* planted: that layout under the held-nothing lives (fetch recomputing
     * x's reader at step 3 and 4) puts x and c, alive at once, in the same
     * bytes (and b and d, c and y) */
    for (int k = 0; k < NV; k++) first[f->v[k]] = life[2][k][0], last[f->v[k]] = life[2][k][1];
    assert_int_equal(bf__dx_slots_overlap(n, place, bytes, first, last, off, &va, &vb), 1);
    assert_true(va != vb && off[va] == off[vb] && first[va] <= last[vb] && first[vb] <= last[va]);
    /* the layout of those lives: all apart, 384 bytes */
    assert_int_equal(fit(f, 2, place, bytes, first, last, off), 384);
    apart_by_hand(f, 2, bytes, off);
    assert_int_equal(bf__dx_slots_overlap(n, place, bytes, first, last, off, &va, &vb), 0);
    free(place), free(bytes), free(off), free(first), free(last);
}

/* A worker made on a real cache (budget 0: the default, every value; 1:
 * nothing) lays its places out as the hand tables say: its places' bytes,
 * and its values apart where the table's lives overlap */
static void worker_places(void **state)
{
    const fixture *f = *state;
    for (int tiny = 0; tiny < 2; tiny++) {
        tdx_worker w;
        tdx_open(&w, evaluator(f), evaluator(f), tiny ? 1 : BF_CACHE_BUDGET_DEFAULT);
        const bf__dx *dx = w.dx;
        const bf__gcache *gc = bf__dx_shared_cache(w.sh);
        for (int k = 1; k < 5; k++) assert_int_equal(bf__gcache_has(gc, f->v[k]), !tiny);
        assert_non_null(dx->lt_tab[0]);
        assert_int_equal(dx->lt_bytes[0], tiny ? 384 : 192);
        size_t bytes[NV + 1] = {0};
        for (int k = 0; k < NV; k++) bytes[k] = (size_t)BATCH * (k == 5 ? 3 : 4) * sizeof(float);
        int t = tiny ? 2 : 0;
        for (int i = 0; i < NV; i++)
            for (int j = i + 1; j < NV; j++) {
                const char *pi = dx->lt_tab[0][f->v[i]], *pj = dx->lt_tab[0][f->v[j]];
                int alive = life[t][i][0] <= life[t][j][1] && life[t][j][0] <= life[t][i][1];
                if (alive && pi < pj + bytes[j] && pj < pi + bytes[i])
                    fail_msg("budget %d: %s and %s share bytes", tiny, names[i], names[j]);
            }
        /* the partial batch's plan (2 samples) has places of its own */
        assert_non_null(dx->lt_tab[1]);
        assert_int_equal(dx->lt_pages[0], 0);
        assert_int_equal(dx->lt_pages[1], 0);
        tdx_close(&w);
    }
}

/* The places' pages follow the golden cache's (diffarena.c): where the
 * campaign put the cache's blocks in 2 MiB pages (the host's measurement:
 * BF__WRITE_HUGE), the worker asks for them over its places too, and the
 * places are laid out the same (each value at the same offset); where the
 * cache's are 4 KiB pages, so are the places' */
static void worker_places_follow_cache_pages(void **state)
{
    const fixture *f = *state;
    ptrdiff_t at[2][NV];
    size_t bytes[2];
    for (int huge = 0; huge < 2; huge++) {
        tdx_worker w;
        tdx_open_pages(&w, evaluator(f), evaluator(f), BF_CACHE_BUDGET_DEFAULT, huge ? BF__WRITE_HUGE : 0);
        const bf__dx *dx = w.dx;
        assert_non_null(dx->lt_tab[0]);
        assert_non_null(dx->lt_tab[1]);
        for (int t = 0; t < 2; t++)
            if (dx->lt_pages[t] != (huge ? (unsigned)BF__WRITE_HUGE : 0u))
                fail_msg("cache pages %s: plan %d's places asked for pages %u", huge ? "2 MiB" : "4 KiB", t,
                         dx->lt_pages[t]);
        bytes[huge] = dx->lt_bytes[0];
        /* offsets from the places' 64-byte-aligned start (diffarena.c) */
        const char *base = (const char *)(((uintptr_t)dx->lt_mem[0] + 63) & ~(uintptr_t)63);
        for (int k = 0; k < NV; k++) at[huge][k] = (const char *)dx->lt_tab[0][f->v[k]] - base;
        tdx_close(&w);
    }
    assert_int_equal(bytes[0], bytes[1]);
    for (int k = 0; k < NV; k++)
        if (at[0][k] != at[1][k]) fail_msg("%s placed at %td, at %td with 2 MiB pages", names[k], at[0][k], at[1][k]);
}

/* The worker lays its places in the golden pass's pools (gcache.c,
 * pool_values; diffarena.c): after the pass each of its plans (the full
 * batch's, the partial batch's) has a pool with room for the plan's whole
 * arena, holding what the pass wrote there; the worker takes both, and its
 * places' bytes are then the pool's as the pass left them (release builds)
 * or NaN in every byte (the sanitizer builds' poison, so that a trial
 * reading a place it did not write shows in their records). A pool no
 * worker takes goes with bf__dx_shared_drop_pools. At budget 1, so that
 * the cache keeps none of a..d and the pass writes them in its pools (a
 * cache holding every value leaves the pass no pool). */
static void worker_places_in_pass_pools(void **state)
{
    const fixture *f = *state;
    tdx_worker w;
    tdx_open_shared(&w, evaluator(f), evaluator(f), 1, 0);
    const bf__gcache *gc = bf__dx_shared_cache(w.sh);
    unsigned char *seen[2];
    for (int t = 0; t < 2; t++) {
        const bf_plan *p = bf__evaluator_plan(w.ev, t);
        size_t bytes = 0;
        const unsigned char *pool = bf__gpools_peek(bf__gcache_pools(gc), p, &bytes);
        if (!pool) fail_msg("plan %d: no pool after the pass", t);
        assert_true(bytes >= bf_plan_arena_bytes(p) + 64);
        assert_non_null(seen[t] = malloc(bytes));
        memcpy(seen[t], pool, bytes);
        int written = 0;
        for (size_t i = 0; i < bytes; i++) written |= seen[t][i] != 0;
        if (!written) fail_msg("plan %d: the pass wrote nothing in its pool", t);
    }
    bf_error err = {0};
    if (bf__dx_create(w.sh, w.ev, &w.dx, &err) != BF_OK) fail_msg("%s", err.msg);
    for (int t = 0; t < 2; t++) {
        size_t bytes = 0;
        if (bf__gpools_peek(bf__gcache_pools(gc), bf__evaluator_plan(w.ev, t), &bytes)) fail_msg("plan %d: its pool left untaken", t);
        const unsigned char *lt = w.dx->lt_mem[t];
        assert_non_null(lt);
        size_t n = w.dx->lt_bytes[t] + 64;
#ifdef NDEBUG
        if (memcmp(lt, seen[t], n) != 0) fail_msg("plan %d: its places are not the pass's pool", t);
#else
        for (size_t i = 0; i < n; i++)
            if (lt[i] != 0xff) fail_msg("plan %d: byte %zu of its places not poisoned", t, i);
#endif
        free(seen[t]);
    }
    tdx_close(&w);
    /* no worker: the pools go when the runner says */
    tdx_open_shared(&w, evaluator(f), evaluator(f), 1, 0);
    gc = bf__dx_shared_cache(w.sh);
    size_t bytes = 0;
    assert_non_null(bf__gpools_peek(bf__gcache_pools(gc), bf__evaluator_plan(w.ev, 0), &bytes));
    bf__dx_shared_drop_pools(w.sh);
    for (int t = 0; t < 2; t++) assert_null(bf__gpools_peek(bf__gcache_pools(gc), bf__evaluator_plan(w.ev, t), &bytes));
    tdx_close(&w);
}

/* A budget short of every value keeps the cuts (d and y, by hand above),
 * not the smallest values in value order (a), and the worker's places keep
 * apart what the lives with d held say is alive at once */
static void cache_keeps_cuts(void **state)
{
    const fixture *f = *state;
    tdx_worker w;
    tdx_open(&w, evaluator(f), evaluator(f), CUTS_BUDGET);
    const bf__dx *dx = w.dx;
    const bf__gcache *gc = bf__dx_shared_cache(w.sh);
    for (int k = 1; k < 5; k++)
        if (bf__gcache_has(gc, f->v[k]) != (k == 4)) fail_msg("budget %d: %s %s", CUTS_BUDGET, names[k],
                                                              k == 4 ? "left out" : "held");
    assert_non_null(dx->lt_tab[0]);
    size_t bytes[NV + 1] = {0};
    for (int k = 0; k < NV; k++) bytes[k] = (size_t)BATCH * (k == 5 ? 3 : 4) * sizeof(float);
    for (int i = 0; i < NV; i++)
        for (int j = i + 1; j < NV; j++) {
            const char *pi = dx->lt_tab[0][f->v[i]], *pj = dx->lt_tab[0][f->v[j]];
            int alive = life[3][i][0] <= life[3][j][1] && life[3][j][0] <= life[3][i][1];
            if (alive && pi < pj + bytes[j] && pj < pi + bytes[i]) fail_msg("%s and %s share bytes", names[i], names[j]);
        }
    tdx_close(&w);
}

/* fetch (diffexec.c) hands a reader a held value from the cache whether the
 * trial left it unloaded or computed it into its place and found it golden
 * (the lives above count on it: c's place is not kept for step 4's fetches
 * of d), and a changed one from its place */
static void fetch_reads_golden_from_cache(void **state)
{
    const fixture *f = *state;
    tdx_worker w;
    tdx_open(&w, evaluator(f), evaluator(f), BF_CACHE_BUDGET_DEFAULT);
    bf__dx *dx = w.dx;
    bf_plan *p = dx->plan[0];
    int c = f->v[3];
    const void *blk = bf__gcache_block(bf__dx_shared_cache(w.sh), c, 1);
    void *place = dx->lt_tab[0][c];
    assert_non_null(blk), assert_non_null(place);
    assert_ptr_not_equal(blk, place);
    static const int states[3] = {UNLOADED, GOLDEN, DIRTY};
    for (int k = 0; k < 3; k++) {
        memset(dx->state, 0, f->l.m->n_values * sizeof *dx->state);
        dx->state[c] = (unsigned char)states[k];
        p->vals[c].data = place;
        bf_error err = {0};
        if (bf__dx_fetch(dx, p, 1, c, &err) != BF_OK) fail_msg("%s", err.msg);
        const void *want = states[k] == DIRTY ? place : blk;
        if (p->vals[c].data != want)
            fail_msg("c %s: read from %s", k == 0 ? "unloaded" : k == 1 ? "computed and golden" : "changed",
                     p->vals[c].data == place ? "its place" : "the cache");
    }
    tdx_close(&w);
}

/* every record of uniform weight faults (w and W2) and of listed ones in
 * w, differential at the three budgets on 1 and 2 threads, the exact
 * engine's */
static void records_match_exact(void **state)
{
    const fixture *f = *state;
    bf_campaign_spec s = tc_base_spec(BATCH);
    s.seed = 13;
    s.trials = 60;
    tc_budgets_match_exact(f->l.m, f->l.ds, &s, CUTS_BUDGET);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lives_as_worked_by_hand),
        cmocka_unit_test(layout_and_planted_overlap),
        cmocka_unit_test(worker_places),
        cmocka_unit_test(worker_places_follow_cache_pages),
        cmocka_unit_test(worker_places_in_pass_pools),
        cmocka_unit_test(cache_keeps_cuts),
        cmocka_unit_test(fetch_reads_golden_from_cache),
        cmocka_unit_test(records_match_exact),
    };
    return cmocka_run_group_tests(tests, setup, tc_group_close);
}
