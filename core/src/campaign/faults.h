/* A campaign's part that says what trials draw: the fault model and its
 * parameters, the bits it may touch, the sampling design, and the draws
 * themselves (campaign_sample.c: trial t's faults are a pure function of
 * (seed, t)). Set from the spec by campaign.c; read by the sampler and by
 * the runner to apply what was drawn. */
#ifndef BF_CAMPAIGN_FAULTS_H
#define BF_CAMPAIGN_FAULTS_H

#include "bitflip/campaign.h"
#include "bitflip/errmap.h"
#include "bitflip/rng.h"

/* One corrupted element of a trial: for activations and inputs, `index` is
 * within one sample and `sample` the sample a transient fault hits (-1:
 * every sample, permanent; always -1 for weights). */
typedef struct bf__efault {
    int64_t site, index, sample;
    uint32_t mask;
    /* model "profiled": bits forced to 0 and to 1 (stuck cells); `mask`
     * holds the cells that flip. 0 for every other model. */
    uint32_t set0, set1;
} bf__efault;

/* A trial's faults as drawn from (seed, t). The buffers belong to the worker
 * and are reused from trial to trial. */
typedef struct bf__ecc_scratch bf__ecc_scratch;   /* campaign_ecc.c */
typedef struct bf__ecc bf__ecc;

typedef struct bf__draw {
    bf__efault *f;
    size_t n, cap;
    uint64_t *pos;            /* BER: flipped bit positions over the population */
    size_t pos_cap;
    int64_t n_faults;         /* bits flipped (BER) or 1 */
    int first_bit;            /* the by_bit stratum; -1 for none (random_value, BER) */
    int rate_index;           /* BER; -1 otherwise */
    bf__ecc_scratch *ecc;     /* the ecc mitigation's, owned (NULL: none yet) */
} bf__draw;

typedef struct bf__list_fault {
    int64_t site, index, sample;
    int bit;
} bf__list_fault;

/* BER draws at most this many bit errors per trial (memory: 8 bytes each). */
#define BF__BER_MAX_ERRORS (INT64_C(1) << 22)

typedef struct bf__faults {
    uint64_t seed;
    int64_t n_trials;
    bf_target target;
    bf_persistence persistence;
    bf_fault_model kind;
    int bits, burst;
    int allowed[64];          /* allowed bit positions, ascending */
    int n_allowed;
    int starts[64];           /* burst: first bits whose whole burst is allowed */
    int n_starts;
    double *rates;            /* BER */
    size_t n_rates;
    int64_t repeats;
    bf_sampling sampling;
    bf__list_fault *list;     /* sampling "list" */
    size_t n_list;
    /* model "profiled": the map (the spec's, which outlives the campaign)
     * and its size in cells */
    const bf_errmap *errmap;
    uint64_t map_bits;
    /* "exhaustive" and "adaptive": fault t's position among the stratum's
     * first bits (allowed, or burst starts), and how many there are. The
     * strata are (site, position), site-major. */
    int n_pos;
    int64_t n_strata;
    /* multi-bit upsets in 64-bit storage words (campaign_mbu.c): mbu 0 off,
     * BF__MBU_BURST (`bits` adjacent bits of one word) or BF__MBU_COLUMN
     * (one bit of `words` neighbouring words); the population's running
     * counts per site */
    int mbu, words;
    int64_t *mbu_prefix;      /* n_sites + 1 */
} bf__faults;

enum { BF__MBU_BURST = 1, BF__MBU_COLUMN = 2 };

/* campaign_sample.c: the faults of trial t, a pure function of (seed, t). */
bf_status bf__campaign_draw(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err);
void bf__draw_free(bf__draw *d);
/* room for n faults in d */
bf_status bf__draw_reserve(bf__draw *d, size_t n, bf_error *err);
/* The positions a bit error rate strikes among n_bits (bf_rng_ber from
 * *r, ascending) into *pos, whose room *cap grows to hold them all (the
 * same draw then made again from the same state, so that a trial's faults
 * do not depend on the room a worker had): 0, *cnt of them; 1, more than
 * max (*cnt, the count, for the caller's message); -1, no memory for them.
 * BER trials, multi-bit upsets and ECC's check bits draw so. */
int bf__ber_positions(bf_rng *r, uint64_t n_bits, double rate, uint64_t max, uint64_t **pos, size_t *cap,
                      uint64_t *cnt);

/* campaign_mbu.c: multi-bit upsets in 64-bit words: the population (after
 * the sites and bits are resolved), its size, and trial t's upset. */
bf_status bf__campaign_mbu_setup(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err);
int64_t bf__campaign_mbu_population(const bf_campaign *c);
bf_status bf__campaign_mbu_draw(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err);
void bf__ecc_scratch_free(bf__ecc_scratch *s);

#endif
