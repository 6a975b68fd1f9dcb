/* The counter-based generator: pinned outputs, determinism, uniformity by
 * chi-square against 99.9% critical values (scipy.stats.chi2.ppf(0.999, df)),
 * and BER draws against the binomial distribution they must follow. Every
 * test uses fixed seeds, so a pass or failure is reproducible. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "bitflip/rng.h"

#define CHI2_999_DF2 13.8155
#define CHI2_999_DF9 27.8772
#define CHI2_999_DF21 46.7970

static double chi_square(const uint64_t *observed, const double *expected, int n)
{
    double x = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)observed[i] - expected[i];
        x += d * d / expected[i];
    }
    return x;
}

/* The construction is part of the contract (a campaign's faults must not
 * change between versions), so its first outputs are pinned. Computed by an
 * independent Python transcription of the formula in rng.c:
 *   M = 2**64 - 1
 *   def mix(z):
 *       z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
 *       z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
 *       return z ^ (z >> 31)
 *   def val(seed, stream, c):
 *       key = mix(mix(seed ^ 0x6a09e667f3bcc909) ^ stream)
 *       return mix(key ^ mix(((c + 1) * 0x9e3779b97f4a7c15) & M)) */
static void known_values(void **state)
{
    (void)state;
    static const struct { uint64_t seed, stream, v[3]; } cases[] = {
        {0, 0, {0xd364c7ca22490ab6u, 0x5d33418a37e3c31fu, 0x95c14a7ba8d955b7u}},
        {0, 1, {0xda550fb746f9066fu, 0xac87660deb32e7dfu, 0x5c13501c465d48bdu}},
        {42, 7, {0x6fb3955b9d8ebe65u, 0xfd3076510b8f97b5u, 0x9fc467072dfd2695u}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bf_rng r = bf_rng_make(cases[i].seed, cases[i].stream);
        for (int j = 0; j < 3; j++) assert_int_equal(bf_rng_u64(&r), cases[i].v[j]);
        assert_int_equal(r.counter, 3);
    }
}

static void deterministic(void **state)
{
    (void)state;
    bf_rng a = bf_rng_make(1234, 5), b = bf_rng_make(1234, 5);
    bf_rng c = bf_rng_make(1234, 6), d = bf_rng_make(1235, 5);
    int same_c = 0, same_d = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = bf_rng_u64(&a);
        assert_int_equal(x, bf_rng_u64(&b));
        same_c += x == bf_rng_u64(&c);
        same_d += x == bf_rng_u64(&d);
    }
    assert_int_equal(same_c, 0);
    assert_int_equal(same_d, 0);

    /* a value depends only on (seed, stream, counter): jumping the counter
     * lands on the same value as drawing up to it */
    bf_rng e = bf_rng_make(99, 3), f = bf_rng_make(99, 3);
    for (int i = 0; i < 10; i++) bf_rng_u64(&e);
    f.counter = 10;
    assert_int_equal(bf_rng_u64(&e), bf_rng_u64(&f));
}

/* Each output bit of the first draw of consecutive streams is a fair coin:
 * this is where a weak mix of small, adjacent stream numbers would show. */
static void bits_balanced_across_streams(void **state)
{
    (void)state;
    enum { N = 100000 };
    uint64_t ones[64] = {0};
    for (uint64_t s = 0; s < N; s++) {
        bf_rng r = bf_rng_make(7, s);
        uint64_t x = bf_rng_u64(&r);
        for (int b = 0; b < 64; b++) ones[b] += (x >> b) & 1;
    }
    for (int b = 0; b < 64; b++) {
        double z = ((double)ones[b] - N / 2.0) / sqrt(N / 4.0);
        assert_true(fabs(z) < 4.5);   /* two-sided p ~ 7e-6 per bit */
    }
}

static void below_uniform(void **state)
{
    (void)state;
    enum { N = 100000, K = 10 };
    uint64_t obs[K] = {0};
    double exp[K];
    bf_rng r = bf_rng_make(2024, 0);
    for (int i = 0; i < N; i++) {
        uint64_t x = bf_rng_below(&r, K);
        assert_true(x < K);
        obs[x]++;
    }
    for (int i = 0; i < K; i++) exp[i] = (double)N / K;
    assert_true(chi_square(obs, exp, K) < CHI2_999_DF9);
}

/* n = 3 * 2^62: plain x % n would put [0, 2^62) twice as often as the rest
 * (2^64 mod n = 2^62), so the first third would get half the draws. */
static void below_no_modulo_bias(void **state)
{
    (void)state;
    enum { N = 30000 };
    const uint64_t third = (uint64_t)1 << 62, n = 3 * third;
    uint64_t obs[3] = {0};
    double exp[3] = {N / 3.0, N / 3.0, N / 3.0};
    bf_rng r = bf_rng_make(5, 5);
    for (int i = 0; i < N; i++) {
        uint64_t x = bf_rng_below(&r, n);
        assert_true(x < n);
        obs[x / third]++;
    }
    assert_true(chi_square(obs, exp, 3) < CHI2_999_DF2);

    /* n = 1 is always 0; n = 2^64 - 1 stays below n */
    assert_int_equal(bf_rng_below(&r, 1), 0);
    for (int i = 0; i < 100; i++) assert_true(bf_rng_below(&r, UINT64_MAX) < UINT64_MAX);
}

static void unit_range(void **state)
{
    (void)state;
    enum { N = 100000, K = 10 };
    uint64_t obs[K] = {0};
    double exp[K], sum = 0;
    bf_rng r = bf_rng_make(11, 12);
    for (int i = 0; i < N; i++) {
        double u = bf_rng_unit(&r);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
        obs[(int)(u * K)]++;
    }
    for (int i = 0; i < K; i++) exp[i] = (double)N / K;
    assert_true(chi_square(obs, exp, K) < CHI2_999_DF9);
    assert_true(fabs(sum / N - 0.5) < 0.005);   /* sd of the mean: 0.0009 */
}

static double binom_pmf(int k, double n, double p)
{
    return exp(lgamma(n + 1) - lgamma(k + 1.0) - lgamma(n - k + 1) + k * log(p) + (n - k) * log1p(-p));
}

/* 20000 independent draws of n_bits = 10000 at rate 1e-3: the counts follow
 * Binomial(10000, 1e-3) (mean 10), and the positions are uniform over the
 * bits, ascending and distinct. Count buckets: "0 or 1", 2 .. 21, "22 or
 * more"; the ends are merged so that every bucket expects at least 5
 * (checked below), which leaves 22 buckets, df = 21. */
static void ber_binomial(void **state)
{
    (void)state;
    enum { STREAMS = 20000, NB = 22, POSB = 10 };
    const uint64_t n_bits = 10000;
    const double rate = 1e-3;
    uint64_t counts[NB] = {0}, pos_obs[POSB] = {0}, total = 0;
    double counts_exp[NB], pos_exp[POSB];
    uint64_t out[64];

    for (uint64_t s = 0; s < STREAMS; s++) {
        bf_rng r = bf_rng_make(31337, s);
        uint64_t n = bf_rng_ber(&r, n_bits, rate, out, 64);
        assert_true(n <= 64);
        for (uint64_t i = 0; i < n; i++) {
            assert_true(out[i] < n_bits);
            if (i) assert_true(out[i] > out[i - 1]);
            pos_obs[out[i] * POSB / n_bits]++;
        }
        total += n;
        counts[n <= 1 ? 0 : n >= 22 ? NB - 1 : n - 1]++;
    }

    double p_lo = binom_pmf(0, 10000, rate) + binom_pmf(1, 10000, rate), p_mid = 0;
    counts_exp[0] = STREAMS * p_lo;
    for (int k = 2; k <= 21; k++) {
        double p = binom_pmf(k, 10000, rate);
        counts_exp[k - 1] = STREAMS * p;
        p_mid += p;
    }
    counts_exp[NB - 1] = STREAMS * (1 - p_lo - p_mid);
    for (int i = 0; i < NB; i++) assert_true(counts_exp[i] >= 5);
    assert_true(chi_square(counts, counts_exp, NB) < CHI2_999_DF21);

    for (int i = 0; i < POSB; i++) pos_exp[i] = (double)total / POSB;
    assert_true(chi_square(pos_obs, pos_exp, POSB) < CHI2_999_DF9);
}

static void ber_rate_edges(void **state)
{
    (void)state;
    uint64_t out[200];
    bf_rng r = bf_rng_make(1, 1);

    assert_int_equal(bf_rng_ber(&r, 1000000, 0.0, out, 200), 0);
    assert_int_equal(bf_rng_ber(&r, 0, 0.5, out, 200), 0);

    assert_int_equal(bf_rng_ber(&r, 100, 1.0, out, 200), 100);
    for (uint64_t i = 0; i < 100; i++) assert_int_equal(out[i], i);

    /* rate 1 over more bits than the buffer: the buffer fills, the total is exact */
    assert_int_equal(bf_rng_ber(&r, 1000000000000u, 1.0, out, 200), 1000000000000u);
    assert_int_equal(out[199], 199);

    /* a tiny rate, where 1 - rate == 1 in double: nothing over 10^6 bits
     * (expected 1e-294 flips) */
    assert_int_equal(bf_rng_ber(&r, 1000000, 1e-300, out, 200), 0);
}

/* When more bits flip than the buffer holds, the total is still counted and
 * the buffer holds the first (lowest) positions of the same draw. */
static void ber_total_beyond_max(void **state)
{
    (void)state;
    uint64_t full[2000], part[10];
    bf_rng a = bf_rng_make(77, 0), b = bf_rng_make(77, 0);
    uint64_t n_full = bf_rng_ber(&a, 2000, 0.5, full, 2000);
    uint64_t n_part = bf_rng_ber(&b, 2000, 0.5, part, 10);
    assert_int_equal(n_part, n_full);
    assert_true(n_full > 900 && n_full < 1100);   /* mean 1000, sd 22 */
    for (int i = 0; i < 10; i++) assert_int_equal(part[i], full[i]);
    assert_int_equal(a.counter, b.counter);
    /* max 0 with a NULL buffer only counts */
    bf_rng c = bf_rng_make(77, 0);
    assert_int_equal(bf_rng_ber(&c, 2000, 0.5, NULL, 0), n_full);
}

/* 10^12 bits at 1e-10: 100 flips expected (sd 10). Time is proportional to
 * the flips, so this returns at once; a bit-by-bit draw would take hours. */
static void ber_huge_tensor(void **state)
{
    (void)state;
    uint64_t out[1000];
    const uint64_t n_bits = 1000000000000u;
    for (uint64_t s = 0; s < 5; s++) {
        bf_rng r = bf_rng_make(8, s);
        uint64_t n = bf_rng_ber(&r, n_bits, 1e-10, out, 1000);
        assert_true(n >= 50 && n <= 150);
        for (uint64_t i = 0; i < n; i++) {
            assert_true(out[i] < n_bits);
            if (i) assert_true(out[i] > out[i - 1]);
        }
        /* positions spread over the whole range, not bunched at the start */
        assert_true(out[n - 1] > n_bits / 2);
    }

    /* the largest possible range: no overflow in the position arithmetic;
     * 2^64 * 1e-17 = 184 expected */
    bf_rng r = bf_rng_make(9, 9);
    uint64_t n = bf_rng_ber(&r, UINT64_MAX, 1e-17, out, 1000);
    assert_true(n >= 100 && n <= 280);
    for (uint64_t i = 1; i < n; i++) assert_true(out[i] > out[i - 1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_values),
        cmocka_unit_test(deterministic),
        cmocka_unit_test(bits_balanced_across_streams),
        cmocka_unit_test(below_uniform),
        cmocka_unit_test(below_no_modulo_bias),
        cmocka_unit_test(unit_range),
        cmocka_unit_test(ber_binomial),
        cmocka_unit_test(ber_rate_edges),
        cmocka_unit_test(ber_total_beyond_max),
        cmocka_unit_test(ber_huge_tensor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
