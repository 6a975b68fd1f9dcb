/* Counter-based generator. Every output is a pure function of (seed, stream,
 * counter), built from the SplitMix64 finaliser `mix` (a bijection of 64-bit
 * words with full avalanche):
 *
 *   key   = mix(mix(seed ^ SEED_SALT) ^ stream)
 *   value = mix(key ^ mix((counter + 1) * GOLDEN))
 *
 * For a fixed seed, key is a bijection of stream, so two streams never share
 * a key; for a fixed key, value is a bijection of counter, so a stream does
 * not repeat within 2^64 draws. Unlike plain SplitMix64 (value = mix(key +
 * counter * GOLDEN)), two streams whose keys differ by a multiple of GOLDEN do
 * not produce shifted copies of one another, because the counter is mixed on
 * its own before the key enters. Nothing is cached in bf_rng, so the struct
 * stays (seed, stream, counter) and can be stored or sent as three numbers. */
#include "bitflip/rng.h"

#include <math.h>

#define GOLDEN 0x9e3779b97f4a7c15u      /* 2^64 / phi, odd: the SplitMix64 gamma */
#define SEED_SALT 0x6a09e667f3bcc909u   /* frac(sqrt 2): seed 0 must not be a fixed point of mix */

/* SplitMix64's output function (Stafford's Mix13 variant). */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

bf_rng bf_rng_make(uint64_t seed, uint64_t stream)
{
    bf_rng r = {seed, stream, 0};
    return r;
}

uint64_t bf_rng_u64(bf_rng *r)
{
    uint64_t key = mix(mix(r->seed ^ SEED_SALT) ^ r->stream);
    uint64_t c = r->counter++;
    return mix(key ^ mix((c + 1) * GOLDEN));
}

double bf_rng_unit(bf_rng *r)
{
    return (double)(bf_rng_u64(r) >> 11) * 0x1p-53;
}

uint64_t bf_rng_below(bf_rng *r, uint64_t n)
{
    /* Rejection: 2^64 mod n values at the bottom of the range would make the
     * low residues more likely; drawing again when we land there leaves a
     * range whose size is a multiple of n. Rejects with probability < n/2^64. */
    if (n == 0) return 0;     /* outside the contract; avoids a division by zero */
    uint64_t threshold = (0 - n) % n;
    uint64_t x;
    do x = bf_rng_u64(r);
    while (x < threshold);
    return x % n;
}

/* -log(U) for U uniform in (0, 1], i.e. an Exp(1) variate. Computed as
 * -log1p(-V) with V = 1 - U in [0, 1) carrying 53 significant bits even when
 * tiny, because small exponentials (U near 1) decide the short gaps, and with
 * U on a fixed 2^-53 grid those would be coarse for rates below ~1e-12. */
static double exp1(bf_rng *r)
{
    double v = (double)bf_rng_u64(r) * 0x1p-64;
    if (v >= 1.0) v = 1.0 - 0x1p-53;    /* the top 2^10 values round up to 1 */
    return -log1p(-v);
}

uint64_t bf_rng_ber(bf_rng *r, uint64_t n_bits, double rate, uint64_t *out, size_t max)
{
    if (!(rate > 0) || n_bits == 0) return 0;     /* also catches NaN */
    if (rate >= 1) {
        for (uint64_t i = 0; i < n_bits && i < max; i++) out[i] = i;
        return n_bits;
    }
    /* The number of bits that survive before the next flip is geometric:
     * P(gap >= k) = (1 - rate)^k, so gap = floor(log U / log(1 - rate)). log1p
     * keeps the denominator exact for tiny rates, where 1 - rate rounds to 1. */
    double denom = -log1p(-rate);
    uint64_t pos = 0, count = 0;
    while (pos < n_bits) {
        double gap = floor(exp1(r) / denom);
        uint64_t left = n_bits - pos;
        /* compare as doubles first: gap may exceed 2^64 (or be inf) */
        if (gap >= (double)left) break;
        uint64_t g = (uint64_t)gap;
        if (g >= left) break;
        if (count < max) out[count] = pos + g;
        count++;
        pos += g + 1;
    }
    return count;
}
