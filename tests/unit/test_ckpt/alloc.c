/* test_ckpt: the checkpoints' allocations failing (a part of test_ckpt's one
 * executable, apart from its campaigns so that test_ckpt.c stays under the house's 900
 * lines). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "../campaign_check.h"

void allocations_fail_cleanly(void **state);

/* The allocations the checkpoints make (their layout, each image's copy,
 * the timing run's) failing, as campaign_check.h's tc_alloc_plan picks
 * them (each call path once under ASan, every 13th in release), give
 * BF_ENOMEM and free what they made, never a crash or a leak (the ASan
 * build checks the leaks). */
void allocations_fail_cleanly(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    tc_load(BF_FIXTURES "/onesample/onesample_cls", &m, &ds);
    bf_campaign_spec s = tc_base_spec(1);
    s.target = BF_TARGET_WEIGHTS;
    s.trials = 3;
    s.seed = 9;
    bf_campaign_prep prep = {.differential = 1};
    long n = tc_alloc_failures(m, ds, &s, NULL, &prep, 3, 40000);
    assert_true(n > 0);
    bf_dataset_free(ds);
    bf_model_free(m);
}
