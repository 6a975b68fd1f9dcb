/* The differential engine on language models (issue 30, "fast where the
 * structure allows"), fault by fault against a full pass of the same
 * faulty model, bit for bit: every output element of the eval set (a NaN
 * matches a NaN: docs/ENGINE.md, "Same bits on every CPU") and the list of
 * sequences whose outputs changed.
 *
 * - GPT-2 with tied embeddings (tests/fixtures/lm/lm_gpt2_op14: 24
 *   sequences of 16 tokens, vocabulary 64, batches of 4): a fault in a row
 *   of wte reaches the sequences that look the row up, which run in row mode,
 *   and one logit column of every other sequence, through the logits'
 *   Transpose (diffexec.c, run_tied). Rows looked up by no sequence, by one,
 *   by several; sign, exponent and mantissa bits (Inf and NaN included).
 *   Structure: a step inside the network (/h.1/c_attn/MatMul) re-runs only
 *   for the rows that look the row up (a run of 1 or 2 rows a quarter or a
 *   half of a batch), never for a batch that does not, and not at all for
 *   a row no sequence looks up; before, it re-ran every batch reading the
 *   row whole. A row more than half the sequences look up runs whole
 *   batches, as row mode's limit says (docs/ENGINE.md, step 5).
 * - GPT-2's learned positions: row p of wpe at positions 0, 1, T/2, T-1;
 *   every batch is reached, and the logits recompute the rows from p on.
 * - Seeded weight faults on every LM fixture (GPT-2, Llama with additive
 *   and buffer masks, both KV-cache exports).
 * - Activation faults at positions 0, 1, T/2, T-1 of [batch, T, ...] values
 *   across each network (sign, exponent bits giving Inf and NaN, mantissa),
 *   and every position of the KV-cache exports' past_key_values inputs:
 *   where the full pass left the positions before p golden, the logits
 *   recomputed at most the T - p rows from p on (a NaN value row at a
 *   masked position makes earlier rows NaN, in PyTorch too: those trials
 *   are checked for their bits only).
 * The reference is the evaluator's own full pass (what --exact runs), never
 * the differential engine's output. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/dataset.h"
#include "bitflip/eval.h"
#include "bitflip/model.h"
#include "campaign_check.h"
#include "diff/diff.h"
#include "exec/step_access.h"
#include "model/graph.h"

#define LM BF_FIXTURES "/lm/"
#define BATCH 4

typedef struct lmfix {
    bf_model *m;
    bf_dataset *ds;
    bf_evaluator *ev, *ref;
    bf__dx_shared *sh;
    bf__dx *dx;
    float *golden;
    float *last;               /* the full pass's outputs of the last weight_trial */
    int64_t samples, cols;
    size_t n_steps;
    double *work;              /* the executor's per-step work before the trial */
} lmfix;

static void lm_open(const char *name, lmfix *f)
{
    char stem[512];
    snprintf(stem, sizeof stem, LM "%s", name);
    memset(f, 0, sizeof *f);
    bf_error err = {0};
    char path[600];
    snprintf(path, sizeof path, "%s.onnx", stem);
    if (bf_model_load_file(path, &f->m, &err) != BF_OK) fail_msg("%s", err.msg);
    snprintf(path, sizeof path, "%s.eval.safetensors", stem);
    if (bf_dataset_load_file(path, &f->ds, &err) != BF_OK || bf_model_bind_dims(&f->m, f->ds, &err) != BF_OK)
        fail_msg("%s", err.msg);
    bf_eval_opts eo = {.batch = BATCH, .threads = 1};
    bf_eval_result r;
    if (bf_evaluator_create(f->m, f->ds, &eo, &f->ev, &err) != BF_OK ||
        bf_evaluator_create(f->m, f->ds, &eo, &f->ref, &err) != BF_OK || bf_evaluator_run(f->ref, NULL, 0, &r, &err) != BF_OK)
        fail_msg("%s: %s", name, err.msg);
    f->samples = r.samples;
    f->cols = r.out_cols;
    size_t bytes = (size_t)(r.samples * r.out_cols) * sizeof(float);
    f->golden = malloc(bytes + 1);
    assert_non_null(f->golden);
    memcpy(f->golden, r.outputs, bytes);
    f->last = malloc(bytes + 1);
    assert_non_null(f->last);
    if (bf__dx_shared_create(&f->ev, 1, f->samples, f->golden, f->cols, BF_CACHE_BUDGET_DEFAULT, 0, &f->sh, &err) != BF_OK ||
        bf__dx_create(f->sh, f->ev, &f->dx, &err) != BF_OK)
        fail_msg("%s: %s", name, err.msg);
    f->n_steps = bf_plan_num_steps(bf__evaluator_plan(f->ev, 0));
    f->work = calloc(f->n_steps + 1, sizeof *f->work);
    assert_non_null(f->work);
}

static void lm_close(lmfix *f)
{
    bf__dx_free(f->dx);
    bf__dx_shared_free(f->sh);
    bf_evaluator_free(f->ev);
    bf_evaluator_free(f->ref);
    bf_dataset_free(f->ds);
    bf_model_free(f->m);
    free(f->golden);
    free(f->last);
    free(f->work);
}

static int step_of(const lmfix *f, const char *node)
{
    const bf_plan *p = bf__evaluator_plan(f->ev, 0);
    for (size_t i = 0; i < p->n_steps; i++)
        if (strcmp(p->steps[i].node->name, node) == 0) return (int)i;
    fail_msg("no step %s", node);
    return -1;
}

static int same_float(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x == y || (isnan(a) && isnan(b));
}

/* The differential run's outputs and changed rows against the full pass's. */
static void compare(const lmfix *f, const char *what, const float *outs, const int64_t *rows, int64_t n_rows,
                    const float *full)
{
    int64_t k = 0;
    for (int64_t s = 0; s < f->samples; s++) {
        const float *o = outs + s * f->cols, *x = full + s * f->cols, *g = f->golden + s * f->cols;
        int changed = 0;
        for (int64_t c = 0; c < f->cols; c++) {
            if (!same_float(o[c], x[c]))
                fail_msg("%s: sequence %lld, output %lld: differential %a, full pass %a", what, (long long)s,
                         (long long)c, o[c], x[c]);
            uint32_t u, v;
            memcpy(&u, &x[c], sizeof u);
            memcpy(&v, &g[c], sizeof v);
            changed |= u != v;
        }
        int listed = k < n_rows && rows[k] == s;
        if (changed != listed) fail_msg("%s: sequence %lld changed %d, listed %d", what, (long long)s, changed, listed);
        k += listed;
    }
    assert_int_equal(k, n_rows);
}

/* One fault: bit `bit` of element idx of parameter `param`, through the
 * executor and through a full pass; *work (n_steps) gets the work the
 * executor's trial did per step. */
static void weight_trial(lmfix *f, const char *param, int64_t idx, int bit, double *work)
{
    int64_t q = bf_model_find_param(f->m, param);
    assert_true(q >= 0);
    const bf_tensor *t = bf_model_param(f->m, (size_t)q)->tensor;
    assert_int_equal(t->dtype, BF_F32);
    float old = ((const float *)t->data)[idx], now;
    uint32_t u;
    memcpy(&u, &old, sizeof u);
    u ^= 1u << bit;
    memcpy(&now, &u, sizeof now);
    bf_error err = {0};
    if (bf_evaluator_write_param(f->ev, (size_t)q, idx, now, &err) != BF_OK ||
        bf_evaluator_write_param(f->ref, (size_t)q, idx, now, &err) != BF_OK)
        fail_msg("%s", err.msg);
    memcpy(f->work, bf__dx_work(f->dx), f->n_steps * sizeof *f->work);
    bf__dx_weight w = {.param = (size_t)q, .index = idx, .old_value = old, .new_value = now};
    const float *outs;
    const int64_t *rows;
    int64_t n_rows;
    int full = 0;
    if (bf__dx_run(f->dx, &w, 1, NULL, 0, &outs, &rows, &n_rows, NULL, NULL, &full, &err) != BF_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(full, 0);
    const double *after = bf__dx_work(f->dx);
    for (size_t i = 0; i < f->n_steps; i++) work[i] = after[i] - f->work[i];
    bf_eval_result r;
    if (bf_evaluator_run(f->ref, NULL, 0, &r, &err) != BF_OK) fail_msg("%s", err.msg);
    char what[256];
    snprintf(what, sizeof what, "%s[%lld] bit %d", param, (long long)idx, bit);
    compare(f, what, outs, rows, n_rows, r.outputs);
    memcpy(f->last, r.outputs, (size_t)(f->samples * f->cols) * sizeof(float));
    if (bf_evaluator_write_param(f->ev, (size_t)q, idx, old, &err) != BF_OK ||
        bf_evaluator_write_param(f->ref, (size_t)q, idx, old, &err) != BF_OK)
        fail_msg("%s", err.msg);
}

/* How many sequences of input `in` look token r up. */
static int64_t lookups(const lmfix *f, const char *in, int64_t r, int64_t *batches)
{
    const bf_tensor *t = bf_dataset_find(f->ds, in);
    assert_non_null(t);
    int64_t per = bf_tensor_numel(t) / t->dims[0], n = 0, last = -1;
    *batches = 0;
    for (int64_t s = 0; s < t->dims[0]; s++)
        for (int64_t j = 0; j < per; j++)
            if (((const int64_t *)t->data)[s * per + j] == r) {
                n++;
                if (s / BATCH != last) (*batches)++, last = s / BATCH;
                break;
            }
    return n;
}

static const int bits[] = {31, 30, 29, 27, 23, 22, 12, 0};
#define N_BITS (sizeof bits / sizeof *bits)

/* GPT-2's tied wte: rows looked up by no sequence, one, several. */
static void tied_rows_match_full_pass(void **state)
{
    (void)state;
    lmfix f;
    lm_open("lm_gpt2_op14", &f);
    int mid = step_of(&f, "/h.1/c_attn/MatMul");
    const bf_tensor *wte = bf_model_param(f.m, (size_t)bf_model_find_param(f.m, "wte.weight"))->tensor;
    int64_t vocab = wte->dims[0], dim = wte->dims[1];
    double *work = calloc(f.n_steps + 1, sizeof *work);
    assert_non_null(work);
    int seen[4] = {0};   /* rows looked up by 0, 1, 2-3, 4+ sequences */
    /* the row-mode plans are made and checked on first use (work of their
     * own): a first trial, then the counts */
    weight_trial(&f, "wte.weight", 5, 30, work);
    int64_t trials = 0;
    for (int64_t r = 0; r < vocab; r++) {
        int64_t nb, n = lookups(&f, "input_ids", r, &nb);
        int kind = n == 0 ? 0 : n == 1 ? 1 : n < 4 ? 2 : 3;
        if (seen[kind] >= 3) continue;
        seen[kind]++;
        for (size_t b = 0; b < N_BITS; b++) {
            weight_trial(&f, "wte.weight", r * dim + (int64_t)((r + b) % (size_t)dim), bits[b], work);
            trials++;
            /* the step inside the network: only the sequences that look r
             * up, in runs of at most 2 rows of a batch of 4 */
            if (n == 0) assert_true(work[mid] == 0);
            int ok = 2 * n > f.samples ? work[mid] <= (double)nb + 1e-9   /* past half the set: whole batches */
                                       : work[mid] <= (double)(n + 1) / BATCH + 1e-9 && work[mid] < (double)nb;
            if (n && !ok)
                fail_msg("row %lld (%lld sequences in %lld batches), bit %d: %s re-ran %g batches", (long long)r,
                         (long long)n, (long long)nb, bits[b], "/h.1/c_attn/MatMul", work[mid]);
        }
    }
    print_message("wte: %lld faults match the full pass (rows looked up by 0/1/2-3/4+ sequences: %d/%d/%d/%d)\n",
                  (long long)trials, seen[0], seen[1], seen[2], seen[3]);
    assert_true(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    free(work);
    lm_close(&f);
}

static int logits_step(const lmfix *f);

/* GPT-2's learned positions: a fault in row p of wpe reaches every
 * sequence from position p on (every batch: wpe is read through a Range of
 * positions, no sample's lookup), and each MatMul recomputes the rows from
 * p on: where the full pass left every earlier position golden, the logits
 * re-ran at most (T - p) / T of each batch. */
static void position_rows_match_full_pass(void **state)
{
    (void)state;
    lmfix f;
    lm_open("lm_gpt2_op14", &f);
    int lg = logits_step(&f);
    const bf_tensor *wpe = bf_model_param(f.m, (size_t)bf_model_find_param(f.m, "wpe.weight"))->tensor;
    const bf_tensor *ids = bf_dataset_find(f.ds, "input_ids");
    int64_t T = ids->dims[1], dim = wpe->dims[1], batches = (f.samples + BATCH - 1) / BATCH;
    double *work = calloc(f.n_steps + 1, sizeof *work);
    assert_non_null(work);
    const int64_t pos[] = {0, 1, T / 2, T - 1};
    int structural = 0, trials = 0;
    for (size_t q = 0; q < 4; q++)
        for (size_t b = 0; b < N_BITS; b++) {
            weight_trial(&f, "wpe.weight", pos[q] * dim + (int64_t)(b * 5 % (size_t)dim), bits[b], work);
            trials++;
            /* the full pass's outputs before p, in every sequence */
            int64_t per = f.cols / T;
            int golden_before = 1;
            for (int64_t s = 0; s < f.samples && golden_before; s++)
                golden_before = memcmp(f.last + s * f.cols, f.golden + s * f.cols, (size_t)(pos[q] * per) * sizeof(float)) == 0;
            if (!golden_before) continue;
            structural++;
            double most = (double)batches * (double)(T - pos[q]) / (double)T + 1e-9;
            if (work[lg] > most)
                fail_msg("wpe row %lld bit %d: the logits re-ran %g batches, at most %g", (long long)pos[q], bits[b],
                         work[lg], most);
        }
    print_message("wpe: %d faults match the full pass, %d with the earlier positions golden\n", trials, structural);
    assert_true(structural > trials / 2);
    free(work);
    lm_close(&f);
}

/* Seeded faults anywhere in the model's weights, every fixture. */
static void weights_match_full_pass(void **state)
{
    (void)state;
    static const char *const fx[] = {"lm_gpt2_op14", "lm_llama_half_ri_triu_op15", "lm_gpt2_kv_op15", "lm_llama_kv_op17",
                                     "lm_llama_il_expand_buf_op16"};
    uint64_t x = 30;
    for (size_t k = 0; k < sizeof fx / sizeof *fx; k++) {
        lmfix f;
        lm_open(fx[k], &f);
        double *work = calloc(f.n_steps + 1, sizeof *work);
        assert_non_null(work);
        size_t np = bf_model_num_params(f.m);
        int done = 0;
        for (int t = 0; t < 48; t++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t q = (size_t)(x >> 33) % np;
            const bf_param_info *pi = bf_model_param(f.m, q);
            if (pi->tensor->dtype != BF_F32) continue;
            int64_t idx = (int64_t)((x >> 13) % (uint64_t)bf_tensor_numel(pi->tensor));
            weight_trial(&f, pi->tensor->name, idx, bits[(x >> 7) % N_BITS], work);
            done++;
        }
        print_message("%s: %d weight faults match the full pass\n", fx[k], done);
        assert_true(done >= 24);
        free(work);
        lm_close(&f);
    }
}

/* One value fault (an activation or a graph input such as a KV-cache
 * entry): bit `bit` of element idx of sample s's slice, transient, through
 * the executor and through a full pass. *golden_before: the full pass left
 * every output of sequence s before position p golden (causal attention,
 * no NaN spread through a mask). */
static void value_trial(lmfix *f, int64_t v, int64_t s, int64_t idx, int bit, double *work, int64_t p, int64_t T,
                        int *golden_before)
{
    bf_value_fault vf = {.value = v, .sample = s, .index = idx, .model = BF_FAULT_BITFLIP, .mask = 1u << bit,
                         .repr = BF_REPR_FP32};
    bf_error err = {0};
    memcpy(f->work, bf__dx_work(f->dx), f->n_steps * sizeof *f->work);
    const float *outs;
    const int64_t *rows;
    int64_t n_rows;
    int full = 0;
    float o1, n1, o2, n2;
    if (bf__dx_run(f->dx, NULL, 0, &vf, 1, &outs, &rows, &n_rows, &o1, &n1, &full, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(full, 0);
    const double *after = bf__dx_work(f->dx);
    for (size_t i = 0; i < f->n_steps; i++) work[i] = after[i] - f->work[i];
    bf_eval_result r;
    if (bf_evaluator_set_value_faults(f->ref, &vf, 1, &err) != BF_OK || bf_evaluator_run(f->ref, NULL, 0, &r, &err) != BF_OK)
        fail_msg("%s", err.msg);
    bf_evaluator_value_fault_seen(f->ref, 0, &o2, &n2);
    char what[256];
    snprintf(what, sizeof what, "%s sample %lld [%lld] bit %d", f->m->values[v].name, (long long)s, (long long)idx, bit);
    compare(f, what, outs, rows, n_rows, r.outputs);
    if (!same_float(o1, o2) || !same_float(n1, n2)) fail_msg("%s: the fault saw %a -> %a, the full pass %a -> %a", what, o1, n1, o2, n2);
    int64_t per = f->cols / T;   /* outputs per position */
    *golden_before = memcmp(r.outputs + s * f->cols, f->golden + s * f->cols, (size_t)(p * per) * sizeof(float)) == 0;
    if (bf_evaluator_set_value_faults(f->ref, NULL, 0, &err) != BF_OK) fail_msg("%s", err.msg);
}

/* The last MatMul of the plan: the logits. */
static int logits_step(const lmfix *f)
{
    const bf_plan *p = bf__evaluator_plan(f->ev, 0);
    for (size_t i = p->n_steps; i-- > 0;)
        if (strcmp(p->steps[i].node->op->name, "MatMul") == 0) return (int)i;
    fail_msg("no MatMul");
    return -1;
}

/* Activation faults at positions 0, 1, T/2 and T-1 of [batch, T, ...]
 * values across the network (sign, exponent bits giving Inf and NaN,
 * mantissa), on every LM fixture; the KV-cache exports' past_key_values
 * inputs besides. Each against a full pass; and where the full pass left
 * the positions before p golden, the logits MatMul recomputed at most the
 * T - p rows from p on (of the batch x T rows a full run computes). */
static void positions_match_full_pass(void **state)
{
    (void)state;
    static const char *const fx[] = {"lm_gpt2_op14", "lm_llama_half_ri_triu_op15", "lm_llama_il_expand_buf_op16",
                                     "lm_gpt2_kv_op15", "lm_llama_kv_op17"};
    static const int vbits[] = {31, 30, 29, 23, 22, 0};
    for (size_t k = 0; k < sizeof fx / sizeof *fx; k++) {
        lmfix f;
        lm_open(fx[k], &f);
        double *work = calloc(f.n_steps + 1, sizeof *work);
        assert_non_null(work);
        const bf_plan *p = bf__evaluator_plan(f.ev, 0);
        const bf_tensor *ids = bf_dataset_find(f.ds, "input_ids");
        int64_t T = ids->dims[1];
        int lg = logits_step(&f);
        /* [batch, T, ...] float values computed at run time, spread over the graph */
        int64_t cand[512];
        int nc = 0;
        for (size_t v = 0; v < f.m->n_values && nc < 512; v++) {
            const bf_tensor *t = &p->vals[v];
            if (p->val_step[v] < 0 || t->dtype != BF_F32 || t->ndim != 3 || t->dims[0] != BATCH || t->dims[1] != T)
                continue;
            cand[nc++] = (int64_t)v;
        }
        assert_true(nc >= 6);
        int trials = 0, structural = 0, gb;
        value_trial(&f, cand[0], 0, 0, 30, work, 0, T, &gb);   /* the row-mode plans' first use and check */
        for (int c = 0; c < 6; c++) {
            int64_t v = cand[(int64_t)c * (nc - 1) / 5];
            int64_t per = bf_tensor_numel(&p->vals[v]) / (BATCH * T);
            const int64_t pos[] = {0, 1, T / 2, T - 1};
            for (size_t q = 0; q < 4; q++)
                for (size_t b = 0; b < sizeof vbits / sizeof *vbits; b++) {
                    int64_t s = (int64_t)(c * 5 + q * 3 + b) % f.samples, e = (int64_t)(b * 7 + q) % per;
                    int golden_before;
                    value_trial(&f, v, s, pos[q] * per + e, vbits[b], work, pos[q], T, &golden_before);
                    trials++;
                    if (!golden_before) continue;
                    structural++;
                    double most = (double)(T - pos[q]) / (double)(BATCH * T) + 1e-9;
                    if (work[lg] > most)
                        fail_msg("%s: %s position %lld: the logits re-ran %g batches, at most %g", fx[k],
                                 f.m->values[v].name, (long long)pos[q], work[lg], most);
                }
        }
        /* past_key_values: every position of the cache, keys and values */
        int kv = 0;
        for (size_t i = 0; i < 4; i++) {
            char name[64];
            snprintf(name, sizeof name, "past_key_values.%zu.%s", i / 2, i % 2 ? "value" : "key");
            int64_t v = bf_model_find_value(f.m, name);
            if (v < 0) continue;
            const bf_tensor *t = bf_dataset_find(f.ds, name);
            int64_t heads = t->dims[1], past = t->dims[2], d = t->dims[3];
            for (int64_t pp = 0; pp < past; pp++)
                for (size_t b = 0; b < 3; b++) {
                    int64_t s = (int64_t)(pp + i) % f.samples, h = (pp + (int64_t)b) % heads;
                    int golden_before;
                    value_trial(&f, v, s, (h * past + pp) * d + (int64_t)b, vbits[b * 2], work, 0, T, &golden_before);
                    kv++;
                }
        }
        print_message("%s: %d activation faults at positions (%d with the earlier positions golden, the logits "
                      "re-run from p on only), %d KV-cache faults, all match the full pass\n",
                      fx[k], trials, structural, kv);
        assert_true(structural > trials / 2);
        free(work);
        lm_close(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tied_rows_match_full_pass),
        cmocka_unit_test(weights_match_full_pass),
        cmocka_unit_test(positions_match_full_pass),
        cmocka_unit_test(position_rows_match_full_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
