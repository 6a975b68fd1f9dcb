/* The worker arena's rule for values computed from parameters alone
 * (core/src/diff/diffarena.c, pin_param_only): such a value (a Conv's bias
 * or weight behind an Identity, as torch exports mobilenet_v2's shared
 * biases) keeps its own slot in a differential worker, never a place
 * shared by lifetime. It is the same in every batch and is read where a
 * trial left it, not fetched again each batch (a Conv's channel through
 * its fused chain, diffchan.c, reads the Conv's inputs in place), so a
 * shared place that another value wrote since would hand the kernel that
 * value's bytes.
 *
 * The graph, built here (x [N, 3, 8, 8], every Conv 3x3 with pads 1):
 *
 *   b1 = Identity(bias)   b2 = Identity(bias)     bias [8], a parameter
 *   y1 = Conv(x, W1, b1)  a1 = Relu(y1)           W1 [8, 3, 3, 3]
 *   y2 = Conv(a1, W2, b2) a2 = Relu(y2)           W2 [8, 8, 3, 3]
 *   p = GlobalAveragePool(a2), f = Flatten(p), y = Gemm(f, fc) [N, 5]
 *
 * b1 and b2 are computed from the parameter alone; y1, a1, y2, a2, p and
 * f from the input. Checked: (1) a worker made on a real golden cache
 * gives b1 and b2 the plan's own slots and shares places for the others
 * (at least one of them off its own slot): removing the rule (the call of
 * pin_param_only in arena_plan) moves b1 into a shared place and fails
 * this, at budget 0; (2) campaigns of weight faults in W1, W2, the bias
 * and fc, differential on 1 and 2 threads at the default cache budget and
 * at 1 byte, give the exact engine's records. (2) also catches a Conv
 * whose bias is such a value read where the plan's slot was never
 * written: before bf__dx_try_conv fetched a run-time weight or bias
 * (diffstep.c) and chain mode left such a Conv out (diffchain_setup.c,
 * operands_fixed), 76 of the 80 one-bit trials at the default budget
 * were not the exact engine's (the bias read as zeros). */
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
#include "campaign_check.h"
#include "diff/diff_impl.h"
#include "exec/plan_impl.h"
#include "diff_graph.h"
#include "dx_worker.h"
#include "onnx_graph.h"

#define SAMPLES 12
#define BATCH 4

typedef struct fixture {
    tc_loaded l;   /* first: tc_group_close frees the fixture */
} fixture;

static void conv(tg_graph *g, uint64_t *rng, const char *name, const char *x, const char *w, const char *b,
                 int64_t cin, const char *out)
{
    int64_t wd[4] = {8, cin, 3, 3}, nw = 8 * cin * 9;
    float *wv = tg_alloc(g, sizeof(float) * (size_t)nw);
    dg_fill(rng, wv, (size_t)nw, 0.5);
    tg_init_f32(g, w, 4, wd, wv);
    Onnx__NodeProto *n = tg_node(g, "Conv", name, (const char *const[]){x, w, b}, 3, out);
    tg_attr_ints(g, n, "kernel_shape", 2, (int64_t[]){3, 3});
    tg_attr_ints(g, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    tg_graph g = {0};
    uint64_t rng = 77;
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){-1, 3, 8, 8});
    float *bias = tg_alloc(&g, 8 * sizeof(float));
    dg_fill(&rng, bias, 8, 0.2);
    tg_init_f32(&g, "bias", 1, (int64_t[]){8}, bias);
    tg_node(&g, "Identity", "id1", (const char *const[]){"bias"}, 1, "b1");
    tg_node(&g, "Identity", "id2", (const char *const[]){"bias"}, 1, "b2");
    conv(&g, &rng, "c1", "x", "W1", "b1", 3, "y1");
    tg_node(&g, "Relu", "r1", (const char *const[]){"y1"}, 1, "a1");
    conv(&g, &rng, "c2", "a1", "W2", "b2", 8, "y2");
    tg_node(&g, "Relu", "r2", (const char *const[]){"y2"}, 1, "a2");
    dg_head(&g, &rng, "a2", 8, 5);
    size_t ml, dl;
    uint8_t *mb = tg_pack(&g, "pin", &ml);
    tg_free(&g);
    float *x = malloc(SAMPLES * 3 * 64 * sizeof *x);
    assert_non_null(x);
    dg_fill(&rng, x, SAMPLES * 3 * 64, 1.0);
    dg_input in = {"x", 4, (int64_t[]){SAMPLES, 3, 8, 8}, x};
    uint8_t *db = dg_eval_set(&in, 1, SAMPLES, 5, &rng, &dl);
    dg_load(mb, ml, db, dl, "pin", &f->l.m, &f->l.ds);
    free(mb), free(db), free(x);
    *state = f;
    return 0;
}

static void param_only_values_keep_their_slots(void **state)
{
    const fixture *f = *state;
    const bf_model *m = f->l.m;
    static const char *const own_names[] = {"b1", "b2"}, *const shared_names[] = {"y1", "a1", "y2", "a2", "p", "f"};
    for (int tiny = 0; tiny < 2; tiny++) {
        bf_eval_opts eo = {.batch = BATCH, .threads = 1};
        bf_evaluator *ev = NULL, *ref = NULL;
        bf_error err = {0};
        if (bf_evaluator_create(m, f->l.ds, &eo, &ev, &err) != BF_OK ||
            bf_evaluator_create(m, f->l.ds, &eo, &ref, &err) != BF_OK)
            fail_msg("%s", err.msg);
        tdx_worker w;
        tdx_open(&w, ev, ref, tiny ? 1 : BF_CACHE_BUDGET_DEFAULT);
        const bf__dx *dx = w.dx;
        assert_non_null(dx->lt_tab[0]);   /* the places are shared */
        for (size_t k = 0; k < 2; k++) {
            int64_t v = bf_model_find_value(m, own_names[k]);
            assert_true(v >= 0);
            if (dx->lt_tab[0][v] != dx->own_tab[0][v])
                fail_msg("budget %d: %s, computed from a parameter alone, sits in a shared place", tiny, own_names[k]);
        }
        int moved = 0;
        for (size_t k = 0; k < sizeof shared_names / sizeof *shared_names; k++) {
            int64_t v = bf_model_find_value(m, shared_names[k]);
            assert_true(v >= 0);
            moved += dx->lt_tab[0][v] != dx->own_tab[0][v];
        }
        assert_true(moved > 0);   /* the rule is the parameter-only values', not every value's */
        tdx_close(&w);
    }
}

/* weight faults (one and two bits) in the Convs' weights, the bias both
 * read through the Identities, and fc: every record the exact engine's,
 * differential on 1 and 2 threads, every value cached and none */
static void records_match_exact(void **state)
{
    const fixture *f = *state;
    static char *pats[] = {"W1", "W2", "bias", "fc.*"};
    for (int bits = 1; bits <= 2; bits++) {
        bf_campaign_spec s = tc_base_spec(BATCH);
        s.seed = 40 + (uint64_t)bits;
        s.trials = 80;
        s.bits = bits;
        s.tensors = pats;
        s.n_tensors = 4;
        tc_budgets_match_exact(f->l.m, f->l.ds, &s, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(param_only_values_keep_their_slots),
        cmocka_unit_test(records_match_exact),
    };
    return cmocka_run_group_tests(tests, setup, tc_group_close);
}
