/* The "ecc" mitigation on a campaign (bitflip/mitigate.h; the code itself
 * is mitigate/ecc.c): which words it covers, what a trial's weight faults
 * become once every word they touch is decoded, and its storage.
 *
 * A protected tensor is a run of 64-bit data words in its memory order:
 * with m bits per stored value, k = floor(64 / m) values per word, value j
 * of a word at bits j*m .. j*m + m-1 (fp32: 2, fp16/bf16: 4, int8: 8), the
 * last word of a tensor zero-padded. Each word has 8 check bits.
 *
 * Faults are drawn as without the protection (so a paired comparison sees
 * the same draws) and land on data bits; with check_bits_faulty (model
 * "ber") the check bits of every protected word also flip, each with the
 * trial's rate, drawn by geometric skipping from a stream of their own
 * (seed, BF__ECC_STREAM + t), which no trial's fault draw uses. Then each
 * touched word is decoded (mitigate/ecc.h): corrected or clean words give
 * what the decoder leaves, data bits only; a word the decoder calls
 * uncorrectable makes the whole trial DUE (the read raises an error, as a
 * machine check would; the range check and ABFT report detections the
 * same way). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/rng.h"
#include "campaign/campaign_impl.h"
#include "mitigate/ecc.h"

/* A stream no trial's draw uses (trials use stream t < 2^52 here). */
#define BF__ECC_STREAM (UINT64_C(0xECC) << 52)

struct bf__ecc {
    bf__ecc_code code;
    int bits;                 /* per stored value */
    int per_word;             /* values per 64-bit word */
    uint32_t vmask;           /* a value's bits */
    int check_faulty;
    uint8_t *on;              /* per site: protected */
    int64_t *word_prefix;     /* n_sites + 1: running word counts (0 for an unprotected site) */
};

typedef struct ecc_key {
    int64_t word;             /* word_prefix[site] + the site's word */
    size_t i;                 /* the drawn fault */
} ecc_key;

struct bf__ecc_scratch {
    bf__efault *drawn;        /* the trial's faults as drawn */
    size_t n0, drawn_cap;
    ecc_key *keys;
    size_t keys_cap;
    uint64_t *pos;            /* check-bit flips, over all protected words' check bits */
    size_t pos_cap;
};

void bf__ecc_free(bf__ecc *e)
{
    if (!e) return;
    bf__free(e->on);
    bf__free(e->word_prefix);
    bf__free(e);
}

void bf__ecc_scratch_free(bf__ecc_scratch *s)
{
    if (!s) return;
    bf__free(s->drawn);
    bf__free(s->keys);
    bf__free(s->pos);
    bf__free(s);
}

static int64_t site_words(const bf__ecc *e, const bf_campaign *c, size_t s)
{
    return (c->surface.sites[s].elements + e->per_word - 1) / e->per_word;
}

bf_status bf__ecc_setup(bf_campaign *c, const bf_ecc_opts *o, bf_error *err)
{
    if (c->faults.target != BF_TARGET_WEIGHTS)
        return bf_error_set(err, BF_EUNSUPPORTED, "ecc protects stored weights: it needs faults with target 'weights'");
    if (o->check_bits_faulty == BF_ECC_CHECK_FAULTY && c->faults.kind != BF_FAULT_BER)
        return bf_error_set(err, BF_EINVAL, "ecc: check_bits_faulty needs fault model 'ber' (the check bits flip at its rate); "
                            "a %s fault is drawn in a weight's bits", bf_fault_model_name(c->faults.kind));
    bf__ecc *e = c->protect.ecc = bf__calloc(1, sizeof *e);
    if (!e) return bf_error_set(err, BF_ENOMEM, "out of memory");
    bf__ecc_init(&e->code);
    e->bits = c->store.repr_bits;
    e->per_word = BF_ECC_DATA_BITS / e->bits;
    e->vmask = e->bits == 32 ? 0xffffffffu : (1u << e->bits) - 1;
    e->check_faulty = o->check_bits_faulty == BF_ECC_CHECK_FAULTY ||
                      (o->check_bits_faulty == BF_ECC_CHECK_DEFAULT && c->faults.kind == BF_FAULT_BER);
    e->on = bf__calloc(c->surface.n_sites + 1, 1);
    e->word_prefix = bf__calloc(c->surface.n_sites + 1, sizeof *e->word_prefix);
    if (!e->on || !e->word_prefix) return bf_error_set(err, BF_ENOMEM, "out of memory");
    size_t hit = 0;
    for (size_t s = 0; s < c->surface.n_sites; s++) {
        int on = o->n_tensors == 0;
        for (size_t i = 0; !on && i < o->n_tensors; i++) on = bf__site_matches(o->tensors[i], &c->surface.sites[s]);
        e->on[s] = (uint8_t)on;
        hit += on != 0;
        e->word_prefix[s + 1] = e->word_prefix[s] + (on ? site_words(e, c, s) : 0);
    }
    if (!hit) return bf_error_set(err, BF_ENOTFOUND, "ecc: no fault site matches its 'tensors'");
    return BF_OK;
}

double bf__ecc_storage_bits(const bf_campaign *c)
{
    const bf__ecc *e = c->protect.ecc;
    return e ? (double)BF_ECC_CHECK_BITS * (double)e->word_prefix[c->surface.n_sites] : 0;
}

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap) return p;
    size_t k = *cap ? *cap : 16;
    while (k < n) k *= 2;
    void *q = bf__realloc(p, k * size);
    if (q) *cap = k;
    return q;
}

static int cmp_key(const void *a, const void *b)
{
    const ecc_key *x = a, *y = b;
    if (x->word != y->word) return (x->word > y->word) - (x->word < y->word);
    return (x->i > y->i) - (x->i < y->i);
}

/* The check bits' flips of trial t (BER): ascending positions word * 8 + bit. */
static bf_status draw_check(const bf_campaign *c, bf__ecc_scratch *s, int64_t t, int rate_index, size_t *n, bf_error *err)
{
    const bf__ecc *e = c->protect.ecc;
    double rate = c->faults.rates[rate_index];
    uint64_t bits = (uint64_t)e->word_prefix[c->surface.n_sites] * BF_ECC_CHECK_BITS;
    bf_rng r = bf_rng_make(c->faults.seed, BF__ECC_STREAM + (uint64_t)t);
    uint64_t cnt = bf_rng_ber(&r, bits, rate, s->pos, s->pos_cap);
    if (cnt > s->pos_cap) {
        if (cnt > (uint64_t)BF__BER_MAX_ERRORS)
            return bf_error_set(err, BF_ERANGE, "trial %lld: BER rate %g over %llu check bits flips %llu; at most %lld per trial are "
                                "supported", (long long)t, rate, (unsigned long long)bits, (unsigned long long)cnt,
                                (long long)BF__BER_MAX_ERRORS);
        uint64_t *p = bf__realloc(s->pos, (size_t)cnt * sizeof *p);
        if (!p) return bf_error_set(err, BF_ENOMEM, "out of memory for %llu check-bit errors", (unsigned long long)cnt);
        s->pos = p;
        s->pos_cap = (size_t)cnt;
        r = bf_rng_make(c->faults.seed, BF__ECC_STREAM + (uint64_t)t);
        cnt = bf_rng_ber(&r, bits, rate, s->pos, s->pos_cap);
    }
    *n = (size_t)cnt;
    return BF_OK;
}

/* The site of global word w (word_prefix ascends; binary search). */
static size_t word_site(const bf_campaign *c, int64_t w)
{
    const int64_t *wp = c->protect.ecc->word_prefix;
    size_t lo = 0, hi = c->surface.n_sites;   /* wp[lo] <= w < wp[hi] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (wp[mid] <= w) lo = mid;
        else hi = mid;
    }
    while (lo + 1 < c->surface.n_sites && wp[lo + 1] <= w) lo++;   /* skip unprotected (empty) sites */
    return lo;
}

/* The detected trial's record: its faults as drawn, each with the value it
 * would have left alone. */
static bf_status detected(const bf_campaign *c, const bf__ecc_scratch *s, bf_fault_model kind, bf_trial_record *rec, bf_error *err)
{
    for (size_t j = 0; j < s->n0 && rec->n_kept < BF_TRIAL_FAULTS_MAX; j++) {
        const bf__efault *f = &s->drawn[j];
        size_t p = c->surface.site_param[f->site];
        float old = bf__stored(&c->store, p, f->index);
        rec->faults[rec->n_kept++] = (bf_applied_fault){.site = f->site, .index = f->index, .sample = -1,
                                                        .mask = f->mask | f->set0 | f->set1, .old_value = old,
                                                        .new_value = bf__wcorrupt(&c->store, p, old, kind, f)};
    }
    return bf_error_set(err, BF_EDETECTED, "ecc: a word holds an error the code detects and cannot correct");
}

/* One word (global number `word`): the drawn faults keys[a..b) and the
 * check-bit flips `check`; the faults' masks become what the decoder
 * leaves, and a bit it flips in a value no fault touched is appended. */
static bf_status decode_word(const bf_campaign *c, bf__draw *d, bf__ecc_scratch *s, int64_t word, size_t a, size_t b,
                             uint8_t check, bf_fault_model kind, int *due, bf_error *err)
{
    const bf__ecc *e = c->protect.ecc;
    size_t site = word_site(c, word);
    size_t p = c->surface.site_param[site];
    int64_t first = (word - e->word_prefix[site]) * e->per_word;
    int64_t count = c->surface.sites[site].elements - first;
    if (count > e->per_word) count = e->per_word;
    uint32_t gold[64], cur[64];
    uint64_t touched = 0, data = 0;
    for (size_t k = a; k < b; k++) {
        const bf__efault *f = &s->drawn[s->keys[k].i];
        int j = (int)(f->index - first);
        if (!(touched >> j & 1)) gold[j] = cur[j] = bf__wencode(&c->store, p, f->index, bf__stored(&c->store, p, f->index));
        touched |= UINT64_C(1) << j;
        cur[j] = bf__fault_bits(&c->store, cur[j], kind, f) & e->vmask;
    }
    for (int j = 0; j < count; j++)
        if (touched >> j & 1) data |= (uint64_t)(cur[j] ^ gold[j]) << (j * e->bits);
    int bit;
    if (bf__ecc_decode(&e->code, &data, &check, &bit) == BF_ECC_DETECTED) {
        *due = 1;
        return BF_OK;
    }
    for (size_t k = a; k < b; k++) {
        size_t i = s->keys[k].i;
        d->f[i].mask = (uint32_t)(data >> ((d->f[i].index - first) * e->bits)) & e->vmask;
    }
    int j = bit >= 0 && bit < BF_ECC_DATA_BITS ? bit / e->bits : -1;
    if (j >= 0 && j < count && !(touched >> j & 1)) {   /* a miscorrection in a value the faults left alone */
        bf__efault *f = grow(d->f, &d->cap, d->n + 1, sizeof *d->f);
        if (!f) return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's faults");
        d->f = f;
        d->f[d->n++] = (bf__efault){.site = (int64_t)site, .index = first + j, .sample = -1,
                                    .mask = (uint32_t)(data >> (j * e->bits)) & e->vmask};
    }
    return BF_OK;
}

bf_status bf__ecc_apply(const bf_campaign *c, bf__draw *d, int64_t t, bf_trial_record *rec, bf_error *err)
{
    const bf__ecc *e = c->protect.ecc;
    bf__ecc_scratch *s = d->ecc;
    if (!s && !(s = d->ecc = bf__calloc(1, sizeof *s))) return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's faults");
    bf_fault_model kind = c->faults.kind == BF_FAULT_BER ? BF_FAULT_BITFLIP : c->faults.kind;
    bf__efault *dr = grow(s->drawn, &s->drawn_cap, d->n + 1, sizeof *dr);
    ecc_key *keys = dr ? grow(s->keys, &s->keys_cap, d->n + 1, sizeof *keys) : NULL;
    if (dr) s->drawn = dr;
    if (keys) s->keys = keys;
    if (!dr || !keys) return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's faults");
    if (d->n) memcpy(s->drawn, d->f, d->n * sizeof *d->f);   /* d->f is NULL before a first fault */
    s->n0 = d->n;
    size_t nk = 0, nc = 0;
    for (size_t i = 0; i < d->n; i++) {
        bf__efault *f = &d->f[i];
        size_t p = c->surface.site_param[f->site];
        /* from here on a fault is the bits it flips (the runner applies
         * them as bit flips): an unprotected tensor's as drawn */
        uint32_t ob = bf__wencode(&c->store, p, f->index, bf__stored(&c->store, p, f->index));
        f->mask = (bf__fault_bits(&c->store, ob, kind, f) ^ ob) & e->vmask;
        f->set0 = f->set1 = 0;
        if (e->on[f->site])
            s->keys[nk++] = (ecc_key){.word = e->word_prefix[f->site] + f->index / e->per_word, .i = i};
    }
    qsort(s->keys, nk, sizeof *s->keys, cmp_key);
    bf_status st = BF_OK;
    if (e->check_faulty && d->rate_index >= 0 && (st = draw_check(c, s, t, d->rate_index, &nc, err)) != BF_OK) return st;
    /* the words with a fault, in ascending order: data faults and check flips merged */
    size_t a = 0, q = 0;
    int due = 0;
    while ((a < nk || q < nc) && !due && st == BF_OK) {
        int64_t w = a < nk ? s->keys[a].word : INT64_MAX;
        if (q < nc && (int64_t)(s->pos[q] / BF_ECC_CHECK_BITS) < w) w = (int64_t)(s->pos[q] / BF_ECC_CHECK_BITS);
        size_t b = a;
        while (b < nk && s->keys[b].word == w) b++;
        uint8_t check = 0;
        for (; q < nc && (int64_t)(s->pos[q] / BF_ECC_CHECK_BITS) == w; q++) check |= (uint8_t)(1u << (s->pos[q] % BF_ECC_CHECK_BITS));
        st = decode_word(c, d, s, w, a, b, check, kind, &due, err);
        a = b;
    }
    if (st != BF_OK) return st;
    return due ? detected(c, s, kind, rec, err) : BF_OK;
}

void bf__ecc_record(const bf_campaign *c, const bf__draw *d, bf_trial_record *rec)
{
    (void)c;
    const bf__ecc_scratch *s = d->ecc;
    /* group 0's kept faults come first; the other fault groups' (which ECC
     * does not touch: they strike activations) follow, and stay */
    int n0 = 0;
    while (n0 < rec->n_kept && rec->faults[n0].group == 0) n0++;
    int keep = n0 > (int)s->n0 ? (int)s->n0 : n0;
    for (int j = 0; j < keep; j++) rec->faults[j].mask = s->drawn[j].mask | s->drawn[j].set0 | s->drawn[j].set1;
    memmove(&rec->faults[keep], &rec->faults[n0], (size_t)(rec->n_kept - n0) * sizeof *rec->faults);
    rec->n_kept -= n0 - keep;
}
