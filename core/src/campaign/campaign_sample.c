/* Drawing a trial's faults. Everything random comes from one generator,
 * bf_rng_make(seed, t), used in a fixed order: for transient faults the
 * sample first, then the element (a dynamic site: the site, then a draw in
 * [0, 2^62) its run scales to an element), then the bits (BER: the flipped
 * bits). So
 * trial t is the same faults on any worker, shard or machine. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "campaign/campaign_impl.h"

void bf__draw_free(bf__draw *d)
{
    bf__free(d->f);
    bf__free(d->pos);
    bf__ecc_scratch_free(d->ecc);
    memset(d, 0, sizeof *d);
}

bf_status bf__draw_reserve(bf__draw *d, size_t n, bf_error *err)
{
    if (n <= d->cap) return BF_OK;
    size_t cap = d->cap ? d->cap : 16;
    while (cap < n) cap *= 2;
    bf__efault *f = bf__realloc(d->f, cap * sizeof *f);
    if (!f) return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's faults");
    d->f = f;
    d->cap = cap;
    return BF_OK;
}

int bf__ber_positions(bf_rng *r, uint64_t n_bits, double rate, uint64_t max, uint64_t **pos, size_t *cap,
                      uint64_t *cnt)
{
    bf_rng from = *r;
    *cnt = bf_rng_ber(r, n_bits, rate, *pos, *cap);
    if (*cnt <= *cap) return 0;
    if (*cnt > max) return 1;
    uint64_t *p = bf__realloc(*pos, (size_t)*cnt * sizeof *p);
    if (!p) return -1;
    *pos = p;
    *cap = (size_t)*cnt;
    *r = from;   /* the same draw again, all of it kept */
    *cnt = bf_rng_ber(r, n_bits, rate, *pos, *cap);
    return 0;
}

/* The site holding population element u (prefix sums, binary search). */
static int64_t site_of(const bf_campaign *c, int64_t u)
{
    size_t lo = 0, hi = c->surface.n_sites;   /* prefix[lo] <= u < prefix[hi] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (c->surface.prefix[mid] <= u) lo = mid;
        else hi = mid;
    }
    return (int64_t)lo;
}

/* `bits` distinct allowed positions (a burst: adjacent ones from an allowed
 * start). stratum >= 0 fixes the first bit (per_bit sampling): the
 * stratum-th allowed position, or burst start. */
static uint32_t draw_mask(const bf_campaign *c, bf_rng *r, int stratum, int *first)
{
    if (c->faults.burst) {
        int start = c->faults.starts[stratum >= 0 ? stratum : (int)bf_rng_below(r, (uint64_t)c->faults.n_starts)];
        *first = start;
        uint64_t run = ((UINT64_C(1) << c->faults.bits) - 1) << start;
        return (uint32_t)run;
    }
    int pool[64];
    memcpy(pool, c->faults.allowed, (size_t)c->faults.n_allowed * sizeof *pool);
    uint32_t mask = 0;
    for (int k = 0; k < c->faults.bits; k++) {
        /* partial Fisher-Yates: pool[k] becomes the k-th chosen bit */
        int j = k == 0 && stratum >= 0 ? stratum : k + (int)bf_rng_below(r, (uint64_t)(c->faults.n_allowed - k));
        int tmp = pool[k];
        pool[k] = pool[j];
        pool[j] = tmp;
        mask |= UINT32_C(1) << pool[k];
    }
    *first = pool[0];
    return mask;
}

static uint32_t random_bits(const bf_campaign *c, bf_rng *r)
{
    uint32_t v = (uint32_t)bf_rng_u64(r);
    return c->store.repr_bits == 32 ? v : v & ((UINT32_C(1) << c->store.repr_bits) - 1);
}

/* Every bit of the selected population flips with the trial's rate; flips
 * on one element are one fault with a multi-bit mask. */
/* The sample a transient fault hits; -1 (every sample) otherwise. */
static int64_t draw_sample(const bf_campaign *c, bf_rng *r)
{
    return c->faults.persistence == BF_PERSIST_TRANSIENT ? (int64_t)bf_rng_below(r, (uint64_t)c->golden.samples) : -1;
}

static bf_status draw_ber(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err)
{
    d->rate_index = (int)(t / c->faults.repeats);
    double rate = c->faults.rates[d->rate_index];
    uint64_t n_bits = (uint64_t)c->surface.elements * (uint64_t)c->faults.n_allowed;
    bf_rng r = bf_rng_make(c->faults.seed, (uint64_t)t);
    int64_t sample = draw_sample(c, &r);
    uint64_t cnt;
    int over = bf__ber_positions(&r, n_bits, rate, (uint64_t)BF__BER_MAX_ERRORS, &d->pos, &d->pos_cap, &cnt);
    if (over > 0)
        return bf_error_set(err, BF_ERANGE,
                            "trial %lld: BER rate %g over %llu bits flips %llu bits; at most %lld per trial are supported",
                            (long long)t, rate, (unsigned long long)n_bits, (unsigned long long)cnt,
                            (long long)BF__BER_MAX_ERRORS);
    if (over < 0) return bf_error_set(err, BF_ENOMEM, "out of memory for %llu bit errors", (unsigned long long)cnt);
    d->n_faults = (int64_t)cnt;
    bf_status st = bf__draw_reserve(d, (size_t)cnt, err);
    if (st != BF_OK) return st;
    int64_t site = 0, last = -1;
    /* positions ascend, so elements and sites do too */
    for (uint64_t k = 0; k < cnt; k++) {
        int64_t e = (int64_t)(d->pos[k] / (uint64_t)c->faults.n_allowed);
        int bit = c->faults.allowed[d->pos[k] % (uint64_t)c->faults.n_allowed];
        if (e != last) {
            while (c->surface.prefix[site + 1] <= e) site++;
            int64_t index = e - c->surface.prefix[site];
            if (c->surface.site_kv) index = bf__kv_cell_index(c, site, index);
            d->f[d->n++] = (bf__efault){.site = site, .index = index, .sample = sample};
            last = e;
        }
        d->f[d->n - 1].mask |= UINT32_C(1) << bit;
    }
    return BF_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int64_t bf_campaign_map_offset(const bf_campaign *c, int64_t t)
{
    if (!c || c->faults.kind != BF_FAULT_PROFILED || t < 0 || t >= c->faults.n_trials) return -1;
    bf_rng r = bf_rng_make(c->faults.seed, (uint64_t)t);
    return (int64_t)bf_rng_below(&r, c->faults.map_bits);
}

/* A profiled map at the trial's offset (bitflip/errmap.h): weight bit j
 * sits in cell (j + offset) mod N, so failing cell x hits bits j0, j0 + N,
 * ... below the population's W bits, j0 = (x - offset) mod N. Work and
 * memory follow the faults: cells x W / N positions, sorted so that one
 * element's cells become one fault. Positions are kept as j * 4 + kind. */
static bf_status draw_profiled(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err)
{
    const bf_errmap *m = c->faults.errmap;
    uint64_t n = c->faults.map_bits, w = (uint64_t)c->surface.elements * (uint64_t)c->faults.n_allowed;
    uint64_t off = (uint64_t)bf_campaign_map_offset(c, t);
    /* positions: per cell, how many times the map repeats over the weights
     * past it; counted first, so the limit is checked before allocating */
    uint64_t full = w / n, rest = w % n, cnt = 0;
    for (int k = 0; k < BF_CELL_KINDS; k++) {
        if (full) cnt += full * (uint64_t)m->n[k];
        for (int64_t i = 0; rest && i < m->n[k]; i++) cnt += (m->cells[k][i] + n - off) % n < rest;
        if (cnt > (uint64_t)BF__BER_MAX_ERRORS)
            return bf_error_set(err, BF_ERANGE,
                                "trial %lld: the error map puts more than %lld failing cells under the weights (%llu "
                                "bits over a memory of %llu); at most %lld per trial are supported",
                                (long long)t, (long long)BF__BER_MAX_ERRORS, (unsigned long long)w,
                                (unsigned long long)n, (long long)BF__BER_MAX_ERRORS);
    }
    if (cnt > d->pos_cap) {
        uint64_t *pos = bf__realloc(d->pos, (size_t)cnt * sizeof *pos);
        if (!pos) return bf_error_set(err, BF_ENOMEM, "out of memory for %llu bit errors", (unsigned long long)cnt);
        d->pos = pos;
        d->pos_cap = (size_t)cnt;
    }
    size_t np = 0;
    for (int k = 0; k < BF_CELL_KINDS; k++)
        for (int64_t i = 0; i < m->n[k]; i++)
            for (uint64_t j = (m->cells[k][i] + n - off) % n; j < w; j += n) {
                d->pos[np++] = j * 4 + (uint64_t)k;
                if (n > w - j) break;   /* j + n would pass w, or wrap */
            }
    qsort(d->pos, np, sizeof *d->pos, cmp_u64);
    d->n_faults = (int64_t)np;
    bf_status st = bf__draw_reserve(d, np, err);
    if (st != BF_OK) return st;
    int64_t site = 0, last = -1;
    for (size_t k = 0; k < np; k++) {
        uint64_t j = d->pos[k] >> 2;
        int kind = (int)(d->pos[k] & 3);
        int64_t e = (int64_t)(j / (uint64_t)c->faults.n_allowed);
        uint32_t bit = UINT32_C(1) << c->faults.allowed[j % (uint64_t)c->faults.n_allowed];
        if (e != last) {
            while (c->surface.prefix[site + 1] <= e) site++;
            d->f[d->n++] = (bf__efault){.site = site, .index = e - c->surface.prefix[site], .sample = -1};
            last = e;
        }
        bf__efault *f = &d->f[d->n - 1];
        if (kind == BF_CELL_FLIP) f->mask |= bit;
        else if (kind == BF_CELL_STUCK_AT_0) f->set0 |= bit;
        else f->set1 |= bit;
    }
    return BF_OK;
}

bf_status bf__campaign_draw(const bf_campaign *c, int64_t t, bf__draw *d, bf_error *err)
{
    d->n = 0;
    d->n_faults = 1;
    d->first_bit = -1;
    d->rate_index = -1;
    if (c->faults.mbu) return bf__campaign_mbu_draw(c, t, d, err);
    if (c->faults.kind == BF_FAULT_BER) return draw_ber(c, t, d, err);
    if (c->faults.kind == BF_FAULT_PROFILED) return draw_profiled(c, t, d, err);

    bf_status st = bf__draw_reserve(d, 1, err);
    if (st != BF_OK) return st;
    bf_rng r = bf_rng_make(c->faults.seed, (uint64_t)t);
    bf__efault *f = &d->f[0];
    d->n = 1;
    f->set0 = f->set1 = 0;
    int stratum = -1;
    f->sample = c->faults.sampling == BF_SAMPLE_LIST ? -1 : draw_sample(c, &r);
    switch (c->faults.sampling) {
    case BF_SAMPLE_LIST: {
        const bf__list_fault *l = &c->faults.list[t];
        f->site = l->site;
        f->index = l->index;
        f->sample = l->sample;
        if (c->faults.kind == BF_FAULT_RANDOM_VALUE) {
            f->mask = random_bits(c, &r);
        } else {
            f->mask = UINT32_C(1) << l->bit;
            d->first_bit = l->bit;
        }
        return BF_OK;
    }
    case BF_SAMPLE_EXHAUSTIVE:
    case BF_SAMPLE_ADAPTIVE: {
        /* exhaustive: t is (sample, element, position), position fastest;
         * adaptive: the round's stratum, the element uniform within it */
        int64_t u, pos;
        if (c->faults.sampling == BF_SAMPLE_EXHAUSTIVE) {
            int64_t per = c->surface.elements * c->faults.n_pos;
            if (f->sample >= 0) f->sample = t / per;
            u = (t % per) / c->faults.n_pos;
            pos = t % c->faults.n_pos;
            f->site = site_of(c, u);
            f->index = u - c->surface.prefix[f->site];
        } else {
            int64_t h = bf__adapt_stratum(c, t);
            f->site = h / c->faults.n_pos;
            pos = h % c->faults.n_pos;
            f->index = (int64_t)bf_rng_below(&r, (uint64_t)c->surface.sites[f->site].elements);
        }
        stratum = (int)pos;
        break;
    }
    case BF_SAMPLE_PER_TENSOR:
        f->site = t % (int64_t)c->surface.n_sites;
        f->index = c->surface.sites[f->site].dynamic ? 0
                                                     : (int64_t)bf_rng_below(&r, (uint64_t)c->surface.sites[f->site].elements);
        break;
    case BF_SAMPLE_PER_BIT:
    case BF_SAMPLE_UNIFORM: {
        /* per_bit: the first bit is the stratum, the element uniform */
        if (c->faults.sampling == BF_SAMPLE_PER_BIT) stratum = (int)(t % (c->faults.burst ? c->faults.n_starts : c->faults.n_allowed));
        int64_t u = (int64_t)bf_rng_below(&r, (uint64_t)c->surface.elements);
        f->site = site_of(c, u);
        f->index = u - c->surface.prefix[f->site];
        break;
    }
    }
    /* kv_cache: the draw numbered the selected entries; the fault is on the element */
    if (c->surface.site_kv) f->index = bf__kv_cell_index(c, f->site, f->index);
    /* a dynamic site: the element is drawn over the elements the value has
     * in the run it strikes, so the draw is a fraction of them, scaled when
     * the fault applies (bf_value_fault.drawn) */
    if (c->surface.sites[f->site].dynamic) f->index = (int64_t)(bf_rng_u64(&r) >> 2);
    if (c->faults.kind == BF_FAULT_RANDOM_VALUE) f->mask = random_bits(c, &r);
    else f->mask = draw_mask(c, &r, stratum, &d->first_bit);
    return BF_OK;
}
