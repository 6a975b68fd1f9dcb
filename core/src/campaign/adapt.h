/* A campaign's part for sampling "adaptive" (campaign_adapt.c): the current
 * round's allocation over the strata (faults.h's n_strata), the pilot's
 * view of each stratum, and a sharded campaign's schedule of rounds
 * (campaign_adapt_shard.c). Every field is zero for other samplings. The
 * runner sets them between rounds while no worker draws. */
#ifndef BF_CAMPAIGN_ADAPT_H
#define BF_CAMPAIGN_ADAPT_H

#include <stdint.h>

typedef struct bf__frac bf__frac;

typedef struct bf__adapt {
    /* the current round: trials ad_first + [ad_prefix[h], ad_prefix[h+1])
     * fall in stratum h */
    int64_t *ad_prefix;       /* n_strata + 1 */
    int64_t ad_first;
    int64_t ad_pilot;         /* trials per stratum in the pilot round */
    double *ad_w;             /* scratch, n_strata each: Neyman weights, */
    int64_t *ad_n;            /* ... trials so far, */
    struct bf__frac { double fr; int64_t h; } *ad_frac;   /* ... the rounding's fractions */
    /* a sharded adaptive campaign's rounds after the pilot, all planned
     * at the pilot's end (campaign_adapt_shard.c): round k's trials start
     * at sched_first[k], its prefix sums at sched_prefix + k (n_strata + 1) */
    int64_t *sched_first, *sched_prefix;
    int64_t sched_n;
    double *ad_p;             /* ... each stratum's rate as the pilot sees it, */
    double *ad_alloc;         /* ... and the trials the stop targets need of it */
    double ad_need;           /* trials after the pilot the targets need (0: no target) */
} bf__adapt;

#endif
