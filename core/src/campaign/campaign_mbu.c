/* Multi-bit upsets in 64-bit storage words (docs/CAMPAIGNS.md, "Multi-bit
 * upsets"): the upsets SECDED ECC is weak against, over the weights as
 * memory holds them. Each selected tensor is its own storage, starting at
 * a word boundary: its elements in row-major order, each element's m bits
 * from bit 0, so 64-bit word k of a tensor holds elements k * (64 / m) ..
 * and bit b of the word is bit b % m of element k * (64 / m) + b / m. A
 * tensor whose elements do not fill its last word leaves that word's high
 * bits unused (padding, never a site).
 *
 *   burst 'word', w bits: w adjacent bits inside one word; the population
 *     is every (word, first bit) with the whole burst inside the word and
 *     on the tensor's bits: a full word has 65 - w, a last word holding V
 *     bits has V - w + 1 (none if V < w).
 *   words n: bit b of n consecutive words k .. k + n - 1, the same b in
 *     each; b ranges over the word bits whose element bit (b % m) is an
 *     allowed position, and must be on the tensor's bits in every word
 *     (only the last word can be partial). A tensor of W words has
 *     W - n + 1 starts k.
 *
 * A trial (sampling 'uniform') draws one member uniformly over the whole
 * population, site-major then word then bit, from bf_rng_make(seed, t): the
 * same upset on any worker or shard. Its faults are the elements struck,
 * ascending, each with the bits of it the upset covers. With model "ber"
 * every member upsets independently at the trial's rate instead. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"

/* Per tensor of E elements: full words, the elements left over, and the
 * bits they occupy in the last, partial word. */
typedef struct words_of {
    int64_t full, rem, epw;
    int m;
} words_of;

static words_of layout(const bf_campaign *c, size_t s)
{
    int m = c->store.repr_bits;
    int64_t epw = 64 / m, e = c->surface.sites[s].elements;
    return (words_of){.full = e / epw, .rem = e % epw, .epw = epw, .m = m};
}

/* Members of site s's population. */
static int64_t site_count(const bf_campaign *c, size_t s)
{
    words_of L = layout(c, s);
    if (c->faults.mbu == BF__MBU_BURST) {
        int64_t w = c->faults.bits, v = L.rem * L.m;
        return L.full * (65 - w) + (v >= w ? v - w + 1 : 0);
    }
    int64_t n = c->faults.words, a = L.epw * c->faults.n_allowed, words = L.full + (L.rem > 0);
    if (words < n) return 0;
    return a * (words - n) + (L.rem > 0 ? L.rem * c->faults.n_allowed : a);
}

bf_status bf__campaign_mbu_setup(bf_campaign *c, const bf_campaign_spec *spec, bf_error *err)
{
    c->faults.mbu = spec->words > 0 ? BF__MBU_COLUMN : BF__MBU_BURST;
    c->faults.words = spec->words;
    c->faults.burst = 0;   /* not the within-an-element burst of draw_mask */
    int m = c->store.repr_bits;
    if (m <= 0 || 64 % m != 0)
        return bf_error_set(err, BF_EINVAL, "faults: a multi-bit upset in 64-bit words needs a representation whose width "
                                            "divides 64; '%s' is %d bits", bf_repr_name(c->store.repr), m);
    if (c->faults.mbu == BF__MBU_BURST && (c->faults.bits < 2 || c->faults.bits > 64))
        return bf_error_set(err, BF_ERANGE, "faults.bits: a burst in a 64-bit word is 2..64 bits, got %d", c->faults.bits);
    if (!(c->faults.mbu_prefix = bf__malloc((c->surface.n_sites + 1) * sizeof *c->faults.mbu_prefix)))
        return bf_error_set(err, BF_ENOMEM, "out of memory");
    double total = 0;
    c->faults.mbu_prefix[0] = 0;
    for (size_t s = 0; s < c->surface.n_sites; s++) {
        int64_t k = site_count(c, s);
        total += (double)k;
        if (total >= 0x1p62) return bf_error_set(err, BF_ERANGE, "faults: the multi-bit upset population is too large");
        c->faults.mbu_prefix[s + 1] = c->faults.mbu_prefix[s] + k;
    }
    if (c->faults.mbu_prefix[c->surface.n_sites] == 0) {
        if (c->faults.mbu == BF__MBU_BURST)
            return bf_error_set(err, BF_EINVAL, "faults.bits: no 64-bit word of the selected tensors holds %d stored bits "
                                                "(a tensor's last word holds only its own elements' bits)", c->faults.bits);
        return bf_error_set(err, BF_EINVAL, "faults.words: no selected tensor spans %d 64-bit words", c->faults.words);
    }
    return BF_OK;
}

int64_t bf__campaign_mbu_population(const bf_campaign *c) { return c->faults.mbu_prefix[c->surface.n_sites]; }

static size_t site_of(const bf_campaign *c, int64_t u)
{
    size_t lo = 0, hi = c->surface.n_sites;   /* prefix[lo] <= u < prefix[hi] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (c->faults.mbu_prefix[mid] <= u) lo = mid;
        else hi = mid;
    }
    return lo;
}

static void add(bf__draw *d, size_t site, int64_t index, uint32_t mask)
{
    d->f[d->n++] = (bf__efault){.site = (int64_t)site, .index = index, .sample = -1, .mask = mask};
}

/* Burst: word k, bits st .. st + w - 1, split over the elements they cover. */
static void burst_faults(const bf_campaign *c, size_t site, int64_t v, bf__draw *d)
{
    words_of L = layout(c, site);
    int64_t w = c->faults.bits, per = 65 - w, k, st;
    if (v < L.full * per) {
        k = v / per;
        st = v % per;
    } else {
        k = L.full;
        st = v - L.full * per;
    }
    d->first_bit = (int)(st % L.m);
    for (int64_t b = st; b < st + w;) {
        int64_t e = b / L.m, hi = (e + 1) * L.m;   /* the element's bits end at hi */
        if (hi > st + w) hi = st + w;
        uint64_t run = ((UINT64_C(1) << (hi - b)) - 1) << (b - e * L.m);
        add(d, site, k * L.epw + e, (uint32_t)run);
        b = hi;
    }
}

/* Column: words k .. k + n - 1, the pi-th allowed word bit of each. */
static void column_faults(const bf_campaign *c, size_t site, int64_t v, bf__draw *d)
{
    words_of L = layout(c, site);
    int64_t n = c->faults.words, na = c->faults.n_allowed, a = L.epw * na, words = L.full + (L.rem > 0), k, pi;
    if (v < a * (words - n)) {
        k = v / a;
        pi = v % a;
    } else {
        k = words - n;
        pi = v - a * (words - n);
    }
    int bit = c->faults.allowed[pi % na];
    d->first_bit = bit;
    for (int64_t i = 0; i < n; i++) add(d, site, (k + i) * L.epw + pi / na, UINT32_C(1) << bit);
}

static int cmp_fault(const void *a, const void *b)
{
    const bf__efault *x = a, *y = b;
    if (x->site != y->site) return (x->site > y->site) - (x->site < y->site);
    return (x->index > y->index) - (x->index < y->index);
}

/* Model "ber": every member upsets independently with the trial's rate;
 * the elements struck, each once, their masks XORed (two upsets over one
 * bit flip it back). */
static bf_status draw_rate(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err)
{
    d->rate_index = (int)(t / c->faults.repeats);
    double rate = c->faults.rates[d->rate_index];
    uint64_t pop = (uint64_t)bf__campaign_mbu_population(c);
    size_t span = c->faults.mbu == BF__MBU_BURST ? (size_t)c->faults.bits : (size_t)c->faults.words;
    bf_rng r = bf_rng_make(c->faults.seed, (uint64_t)t);
    uint64_t cnt;
    int over = bf__ber_positions(&r, pop, rate, (uint64_t)BF__BER_MAX_ERRORS / span, &d->pos, &d->pos_cap, &cnt);
    if (over > 0)
        return bf_error_set(err, BF_ERANGE,
                            "trial %lld: rate %g over %llu multi-bit upsets strikes %llu of them; at most %lld "
                            "struck bits per trial are supported",
                            (long long)t, rate, (unsigned long long)pop, (unsigned long long)cnt,
                            (long long)BF__BER_MAX_ERRORS);
    if (over < 0) return bf_error_set(err, BF_ENOMEM, "out of memory for %llu upsets", (unsigned long long)cnt);
    bf_status st = bf__draw_reserve(d, (size_t)cnt * span, err);
    if (st != BF_OK) return st;
    size_t site = 0;
    for (uint64_t k = 0; k < cnt; k++) {   /* members ascend, so sites do */
        int64_t u = (int64_t)d->pos[k];
        while (c->faults.mbu_prefix[site + 1] <= u) site++;
        if (c->faults.mbu == BF__MBU_BURST) burst_faults(c, site, u - c->faults.mbu_prefix[site], d);
        else column_faults(c, site, u - c->faults.mbu_prefix[site], d);
    }
    /* neighbouring upsets may share elements: one fault each (no upset at
     * all: d->f may still be NULL, which qsort may not be given) */
    if (d->n > 1) qsort(d->f, d->n, sizeof *d->f, cmp_fault);
    size_t n = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (n > 0 && d->f[n - 1].site == d->f[i].site && d->f[n - 1].index == d->f[i].index) d->f[n - 1].mask ^= d->f[i].mask;
        else d->f[n++] = d->f[i];
    }
    d->n = 0;
    for (size_t i = 0; i < n; i++)
        if (d->f[i].mask) d->f[d->n++] = d->f[i];
    d->n_faults = (int64_t)d->n;
    d->first_bit = -1;
    return BF_OK;
}

bf_status bf__campaign_mbu_draw(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err)
{
    if (c->faults.kind == BF_FAULT_BER) return draw_rate(c, t, d, err);
    /* a burst of w <= 64 bits covers at most w elements; a column n */
    bf_status st = bf__draw_reserve(d, c->faults.mbu == BF__MBU_BURST ? (size_t)c->faults.bits : (size_t)c->faults.words, err);
    if (st != BF_OK) return st;
    bf_rng r = bf_rng_make(c->faults.seed, (uint64_t)t);
    int64_t u = (int64_t)bf_rng_below(&r, (uint64_t)bf__campaign_mbu_population(c));
    size_t site = site_of(c, u);
    int64_t v = u - c->faults.mbu_prefix[site];
    if (c->faults.mbu == BF__MBU_BURST) burst_faults(c, site, v, d);
    else column_faults(c, site, v, d);
    d->n_faults = (int64_t)d->n;
    return BF_OK;
}
