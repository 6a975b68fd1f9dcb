/* Checks shared by the campaign tests (see campaign_check.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "campaign_check.h"

bf_campaign *tc_make(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s)
{
    bf_campaign *c = NULL;
    bf_error err = {0};
    if (bf_campaign_create(m, ds, s, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    return c;
}

double tc_round_half_even(double x)
{
    double r = floor(x), d = x - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2) != 0)) r += 1;
    return r;
}

void tc_assert_same_aggregates(const bf_campaign_result *a, const bf_campaign_result *b)
{
    assert_int_equal(a->trials_done, b->trials_done);
    assert_int_equal(a->trials_planned, b->trials_planned);
    assert_int_equal(a->stopped_early, b->stopped_early);
    assert_memory_equal(&a->total, &b->total, sizeof a->total);
    assert_int_equal(a->n_sites, b->n_sites);
    assert_memory_equal(a->by_site, b->by_site, a->n_sites * sizeof *a->by_site);
    assert_memory_equal(a->by_bit, b->by_bit, sizeof a->by_bit);
    assert_memory_equal(a->metric, b->metric, sizeof a->metric);
    assert_int_equal(a->n_rates, b->n_rates);
    if (a->n_rates) {
        assert_memory_equal(a->by_rate, b->by_rate, a->n_rates * sizeof *a->by_rate);
        assert_memory_equal(a->rate_metric, b->rate_metric, a->n_rates * BF_METRIC_COUNT * sizeof *a->rate_metric);
    }
}

void tc_assert_same_record(const bf_trial_record *a, const bf_trial_record *b)
{
    assert_int_equal(a->trial, b->trial);
    assert_int_equal(a->outcome, b->outcome);
    assert_int_equal(a->rate_index, b->rate_index);
    assert_int_equal(a->n_faults, b->n_faults);
    assert_int_equal(a->n_kept, b->n_kept);
    assert_int_equal(a->changed, b->changed);
    for (int i = 0; i < a->n_kept; i++) {
        assert_int_equal(a->faults[i].site, b->faults[i].site);
        assert_int_equal(a->faults[i].index, b->faults[i].index);
        assert_int_equal(a->faults[i].sample, b->faults[i].sample);
        assert_int_equal(a->faults[i].mask, b->faults[i].mask);
        assert_memory_equal(&a->faults[i].old_value, &b->faults[i].old_value, sizeof(float));
        assert_memory_equal(&a->faults[i].new_value, &b->faults[i].new_value, sizeof(float));
    }
    assert_memory_equal(a->metrics, b->metrics, sizeof a->metrics);
}

void tc_keep(void *user, const bf_trial_record *rec)
{
    tc_recs *k = user;
    k->r[k->n++] = *rec;
}
