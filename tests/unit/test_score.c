/* Trial metrics from the golden ones (core/src/diff/score.c) against the same
 * metrics computed from scratch (bf_metric_auc, bf_metric_logloss): the
 * AUC moved by the changed samples' pairs (up to 256 changed rows) and the
 * merge of a radix-sorted list (past that) must give the AUC of a full
 * sort bit for bit, and so must the log loss (its tree of terms with the
 * changed leaves' paths redone, against bf_metric_logloss). The changed
 * outputs are drawn to make ties (another sample's golden score, the same
 * score, and the eval set is the DLRM fixture's four times over), neighbours
 * one ulp away, the ends of [0, 1], and swaps of positives and negatives;
 * the rows come ascending, as the engine lists them, or backwards. */
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
#include "bitflip/metrics.h"
#include "bitflip/model.h"
#include "diff/diff.h"

#define FIX BF_FIXTURES "/conformance/"

static uint64_t bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* The fixture's eval set `times` over, as a safetensors file in memory: an
 * eval set large enough for more than 256 changed rows, with ties. */
static unsigned char *tiled(const bf_dataset *ds, int times, size_t *len)
{
    char header[4096];
    size_t hl = 0, data = 0, n = bf_dataset_num_tensors(ds);
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "{");
    for (size_t i = 0; i < n; i++) {
        const bf_tensor *t = bf_dataset_tensor(ds, i);
        const char *dt = t->dtype == BF_F32 ? "F32" : t->dtype == BF_I64 ? "I64" : t->dtype == BF_I32 ? "I32" : NULL;
        assert_non_null(dt);
        size_t nb = bf_tensor_nbytes(t) * (size_t)times;
        hl += (size_t)snprintf(header + hl, sizeof header - hl, "%s\"%s\": {\"dtype\": \"%s\", \"shape\": [%lld",
                               i ? ", " : "", t->name, dt, (long long)t->dims[0] * times);
        for (int d = 1; d < t->ndim; d++) hl += (size_t)snprintf(header + hl, sizeof header - hl, ", %lld", (long long)t->dims[d]);
        hl += (size_t)snprintf(header + hl, sizeof header - hl, "], \"data_offsets\": [%zu, %zu]}", data, data + nb);
        data += nb;
    }
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "}");
    assert_true(hl < sizeof header);
    unsigned char *buf = malloc(8 + hl + data);
    assert_non_null(buf);
    uint64_t h = hl;
    for (int b = 0; b < 8; b++) buf[b] = (unsigned char)(h >> (8 * b));
    memcpy(buf + 8, header, hl);
    unsigned char *at = buf + 8 + hl;
    for (size_t i = 0; i < n; i++) {
        const bf_tensor *t = bf_dataset_tensor(ds, i);
        for (int r = 0; r < times; r++, at += bf_tensor_nbytes(t)) memcpy(at, t->data, bf_tensor_nbytes(t));
    }
    *len = 8 + hl + data;
    return buf;
}

static void changed_rows_match_full(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *small = NULL, *ds = NULL;
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_eval_result g;
    bf_eval_opts o = {.batch = 7, .threads = 1};
    if (bf_model_load_file(FIX "dlrm_ops_op13.onnx", &m, &err) ||
        bf_dataset_load_file(FIX "dlrm_ops_op13.eval.safetensors", &small, &err))
        fail_msg("%s", err.msg);
    size_t len;
    unsigned char *buf = tiled(small, 4, &len);
    if (bf_dataset_load_buffer(buf, len, "tiled", &ds, &err) || bf_evaluator_create(m, ds, &o, &ev, &err) ||
        bf_evaluator_run(ev, NULL, 0, &g, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(g.task, BF_TASK_BINARY);
    assert_int_equal(g.out_cols, 1);
    const int64_t n = g.samples;
    assert_true(n > 2 * 300);   /* room for the merge path */
    float *golden = malloc((size_t)n * sizeof *golden), *out = malloc((size_t)n * sizeof *out);
    int64_t *rows = malloc((size_t)n * sizeof *rows), *order = malloc((size_t)n * sizeof *order);
    unsigned char *pick = calloc((size_t)n, 1);
    assert_non_null(golden);
    assert_non_null(out);
    assert_non_null(rows);
    assert_non_null(order);
    assert_non_null(pick);
    memcpy(golden, g.outputs, (size_t)n * sizeof *golden);
    const int64_t *classes;
    const float *labels;
    bf__evaluator_labels(ev, &classes, &labels);
    assert_non_null(labels);

    bf__scorer *sc = NULL;
    bf__score_scratch s;
    if (bf__scorer_create(ev, golden, NULL, n, 1, &sc, &err) || bf__score_scratch_init(&s, sc, n, &err)) fail_msg("%s", err.msg);

    unsigned seed = 99;
#define NEXT() (seed = seed * 1103515245u + 12345u, seed >> 4)
    static const int64_t sizes[] = {1, 2, 3, 8, 40, 255, 256, 257, 300};
    int64_t paths[2] = {0, 0};
    for (int round = 0; round < 400; round++) {
        int64_t k = sizes[round % (int)(sizeof sizes / sizeof *sizes)];
        memcpy(out, golden, (size_t)n * sizeof *out);
        /* every other round listed backwards: the AUC must not depend on
         * the order the changed rows come in */
        int step = round % 2 ? -1 : 1;
        for (int64_t t = 0; t < k;) {   /* k distinct rows */
            int64_t r = (int64_t)(NEXT() % (unsigned)n);
            if (!pick[r]) pick[r] = 1, t++;
        }
        int64_t nk = 0;
        for (int64_t i = 0; i < n; i++) {   /* ascending, as the engine lists them, or not */
            int64_t r = step > 0 ? i : n - 1 - i;
            if (pick[r]) pick[r] = 0, rows[nk++] = r;
        }
        for (int64_t t = 0; t < nk; t++) {
            float *v = &out[rows[t]];
            switch (NEXT() % 6) {
            case 0: *v = golden[NEXT() % (unsigned)n]; break;   /* a tie with some golden score */
            case 1: *v = nextafterf(*v, 2.0f); break;
            case 2: *v = nextafterf(*v, -1.0f); break;
            case 3: *v = (NEXT() % 2) ? 0.0f : 1.0f; break;
            case 4: *v = 1.0f - *v; break;                      /* positives and negatives trade places */
            default: *v = (float)(NEXT() % 1000) / 999.0f; break;
            }
        }
        /* a change that rounded back to golden is no change: the engine lists only rows that differ */
        int64_t kept = 0;
        for (int64_t t = 0; t < nk; t++)
            if (memcmp(&out[rows[t]], &golden[rows[t]], sizeof *out) != 0) rows[kept++] = rows[t];
        bf_eval_result res;
        bf__score(sc, &s, ev, out, rows, kept, &res);
        double full;
        if (bf_metric_auc(out, labels, n, order, &full, &err)) fail_msg("%s", err.msg);
        if (bits(res.auc) != bits(full))
            fail_msg("round %d, %lld changed rows: AUC %.17g from the golden one, %.17g from scratch", round,
                     (long long)kept, res.auc, full);
        double ll = bf_metric_logloss(out, labels, n);
        if (bits(res.logloss) != bits(ll)) fail_msg("round %d: log loss %.17g vs %.17g", round, res.logloss, ll);
        paths[kept > 256]++;
    }
    printf("AUC from changed pairs in %lld rounds, from the merge in %lld\n", (long long)paths[0], (long long)paths[1]);
    assert_true(paths[0] > 100 && paths[1] > 10);   /* both ways were tested */

    bf__score_scratch_free(&s);
    bf__scorer_free(sc);
    free(golden);
    free(out);
    free(rows);
    free(order);
    free(pick);
    bf_evaluator_free(ev);
    bf_dataset_free(ds);
    bf_dataset_free(small);
    free(buf);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(changed_rows_match_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
