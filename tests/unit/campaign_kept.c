/* Runs that keep records and outputs, for the task tests (see
 * campaign_kept.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "campaign_check.h"
#include "campaign_kept.h"

static void keep_rec(void *user, const bf_trial_record *rec)
{
    tc_kept *k = user;
    k->rec[k->n++] = *rec;
}

/* on_outputs follows its trial's on_trial, on the same thread: the outputs
 * go with the record just kept */
static void keep_out(void *user, int64_t trial, const float *outputs, int64_t samples, int64_t cols)
{
    tc_kept *k = user;
    (void)trial;
    k->samples = samples;
    k->cols = cols;
    memcpy(k->out + (size_t)(k->n - 1) * (size_t)(samples * cols), outputs, (size_t)(samples * cols) * sizeof *outputs);
}

tc_kept tc_run_kept(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int exact, bf_campaign_result *res)
{
    bf_campaign *c = tc_make(m, ds, s);
    int64_t n = bf_campaign_num_trials(c), samples, cols;
    bf_campaign_golden(c, &samples, &cols);
    tc_kept k = {0};
    k.rec = calloc((size_t)n + 1, sizeof *k.rec);
    k.out = malloc((size_t)(n * samples * cols) * sizeof(float) + 1);
    assert_non_null(k.rec);
    assert_non_null(k.out);
    bf_campaign_opts o = {.threads = 2, .exact = exact, .on_trial = keep_rec, .on_outputs = keep_out, .user = &k};
    bf_error err = {0};
    if (bf_campaign_run(c, &o, res, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(k.n, n);
    bf_campaign_free(c);
    return k;
}

void tc_kept_free(tc_kept *k)
{
    free(k->rec);
    free(k->out);
}

float *tc_golden_copy(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int64_t *samples, int64_t *cols)
{
    bf_campaign *c = tc_make(m, ds, s);
    const float *g = bf_campaign_golden(c, samples, cols);
    float *golden = malloc((size_t)(*samples * *cols) * sizeof *golden);
    assert_non_null(golden);
    memcpy(golden, g, (size_t)(*samples * *cols) * sizeof *golden);
    bf_campaign_free(c);
    return golden;
}

void tc_task_alloc_failures(const char *model, const char *data)
{
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_open_files(model, data, &m, &ds);
    bf_campaign_spec s = tc_base_spec(4);
    s.trials = 6;
    s.seed = 3;
    bf_campaign_prep prep = {.differential = 1};
    long n = tc_alloc_failures(m, ds, &s, NULL, &prep, 6, 20000);
    printf("%ld allocations in the clean run\n", n);
    assert_true(n > 10);
    bf_dataset_free(ds);
    bf_model_free(m);
}

tc_ragkept tc_ragkept_for(int64_t trials)
{
    tc_ragkept k = {0};
    k.rec = calloc((size_t)trials + 1, sizeof *k.rec);
    k.bytes = calloc((size_t)trials + 1, sizeof *k.bytes);
    k.blob = calloc((size_t)trials + 1, sizeof *k.blob);
    assert_true(k.rec && k.bytes && k.blob);
    return k;
}

void tc_ragkept_rec(void *user, const bf_trial_record *rec)
{
    tc_ragkept *k = user;
    k->rec[k->n++] = *rec;
}

void tc_ragkept_rag(void *user, int64_t trial, const bf_ragged_output *outs, size_t n_out, int64_t samples)
{
    tc_ragkept *k = user;
    size_t total = 0;
    for (size_t o = 0; o < n_out; o++)
        total += (size_t)(samples + 1) * sizeof(int64_t) + (size_t)outs[o].offsets[samples] * sizeof(float);
    unsigned char *b = malloc(total + 1), *at = b;
    assert_non_null(b);
    for (size_t o = 0; o < n_out; o++) {
        memcpy(at, outs[o].offsets, (size_t)(samples + 1) * sizeof(int64_t));
        at += (size_t)(samples + 1) * sizeof(int64_t);
        memcpy(at, outs[o].data, (size_t)outs[o].offsets[samples] * sizeof(float));
        at += (size_t)outs[o].offsets[samples] * sizeof(float);
    }
    assert_true(trial >= 0);
    k->bytes[trial] = total;
    k->blob[trial] = b;
}

void tc_ragkept_free(tc_ragkept *k)
{
    for (int64_t i = 0; i < k->n; i++) free(k->blob[i]);
    free(k->blob);
    free(k->bytes);
    free(k->rec);
}
