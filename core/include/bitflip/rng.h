/* bitflip — counter-based random numbers.
 *
 * Trial t of a campaign draws its faults only from (seed, t): a generator is
 * a key (seed, stream) and a counter, and every value is a pure function of
 * the three (SplitMix64-style mixing of the three words; see rng.c). So any
 * shard of trials, on any machine and thread count, draws exactly the same
 * faults. */
#ifndef BITFLIP_RNG_H
#define BITFLIP_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bf_rng {
    uint64_t seed, stream, counter;
} bf_rng;

/* The generator for stream `stream` (a trial index) of `seed`, counter 0. */
bf_rng bf_rng_make(uint64_t seed, uint64_t stream);
uint64_t bf_rng_u64(bf_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double bf_rng_unit(bf_rng *r);
/* Uniform in [0, n), without modulo bias; n > 0. */
uint64_t bf_rng_below(bf_rng *r, uint64_t n);

/* Bit error rate by geometric skipping: the positions in [0, n_bits) of the
 * bits that flip when each flips independently with probability `rate`,
 * ascending, in time proportional to their number. Writes at most `max`
 * positions to out and returns how many flipped in all (which may exceed
 * max; the caller then knows it needs a larger buffer). rate in [0, 1]. */
uint64_t bf_rng_ber(bf_rng *r, uint64_t n_bits, double rate, uint64_t *out, size_t max);

#ifdef __cplusplus
}
#endif
#endif
