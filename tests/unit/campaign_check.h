/* Helpers shared by the campaign tests: building a campaign that must
 * succeed, comparing results and records field by field, and rounding as
 * the formats' definitions say (independently of core/src/repr.c). */
#ifndef BF_TEST_CAMPAIGN_CHECK_H
#define BF_TEST_CAMPAIGN_CHECK_H

#include "bitflip/campaign.h"

bf_campaign *tc_make(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *s);
void tc_assert_same_aggregates(const bf_campaign_result *a, const bf_campaign_result *b);
void tc_assert_same_record(const bf_trial_record *a, const bf_trial_record *b);
double tc_round_half_even(double x);

/* Trial records kept in order: pass tc_keep as on_trial, a tc_recs as user
 * (r with room for every trial). */
typedef struct tc_recs {
    bf_trial_record *r;
    int64_t n;
} tc_recs;
void tc_keep(void *user, const bf_trial_record *rec);

#endif
