/* Helpers for the task tests (test_lm_task.c, test_seg_task.c) that check
 * each trial's record against its own outputs: a run that keeps every
 * record and every trial's outputs, golden's outputs kept past the
 * campaign, and the task's allocation-failure round. */
#ifndef BF_TEST_CAMPAIGN_KEPT_H
#define BF_TEST_CAMPAIGN_KEPT_H

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"

/* A run's records, in the order on_trial gave them, and each trial's
 * outputs (samples x cols floats a trial, in the same order). */
typedef struct tc_kept {
    int64_t n, samples, cols;
    bf_trial_record *rec;
    float *out;
} tc_kept;

/* Runs spec s on m/ds (2 threads, the exact engine or the differential
 * one), keeping every record and every trial's outputs; fails the test if
 * the run fails or keeps fewer records than the campaign's trials. res is
 * the caller's to free, and the tc_kept's arrays (tc_kept_free). */
tc_kept tc_run_kept(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int exact, bf_campaign_result *res);
void tc_kept_free(tc_kept *k);

/* Golden's outputs of spec s's campaign on m/ds (samples x cols floats,
 * malloc'd: the caller frees them), kept after the campaign is freed. */
float *tc_golden_copy(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s, int64_t *samples, int64_t *cols);

/* Loads model and data (their paths), then fails core's allocations one at
 * a time over a 6-trial, batch-4 differential campaign (tc_alloc_failures):
 * prints how many allocations the clean run made and asserts more than 10. */
void tc_task_alloc_failures(const char *model, const char *data);

/* A one-sample graph's run (test_ckpt.c, test_ckpt_imaj.c): each record
 * in the order on_trial gave it, and by trial each one's per-image outputs
 * (on_ragged: every output's offsets and elements, end to end), to compare
 * byte for byte. _for: its arrays for a campaign of `trials` trials. */
typedef struct tc_ragkept {
    int64_t n;
    bf_trial_record *rec;
    size_t *bytes;
    unsigned char **blob;
} tc_ragkept;
tc_ragkept tc_ragkept_for(int64_t trials);
void tc_ragkept_rec(void *user, const bf_trial_record *rec);
void tc_ragkept_rag(void *user, int64_t trial, const bf_ragged_output *outs, size_t n_out, int64_t samples);
void tc_ragkept_free(tc_ragkept *k);

#endif
