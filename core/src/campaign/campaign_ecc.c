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
 * same way).
 *
 * Weights fault groups (campaign_groups.c) strike the same stored words:
 * a group's tensor that group 0 covers has group 0's words, one only a
 * later group names gets words of its own after group 0's (xseg). A
 * trial's faults of every weights group land in their words in group order
 * (a later fault finds what an earlier one left) before each word is
 * decoded once: the code corrects or detects what the word holds, whichever
 * group flipped its bits. A value's decoded change goes to the first fault
 * that struck it (a later group's fault on it then changes nothing), a
 * miscorrection to the group of the word's first fault. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/rng.h"
#include "campaign/campaign_impl.h"
#include "mitigate/ecc.h"

/* A stream no trial's draw uses (trials use stream t < 2^52 here). */
#define BF__ECC_STREAM (UINT64_C(0xECC) << 52)

/* A tensor only a weights group names: its words, after group 0's. */
typedef struct ecc_seg {
    int64_t base, elements;   /* first word; values */
    size_t param;
    size_t group, site;       /* the group (1..) that named it first, its site there */
} ecc_seg;

struct bf__ecc {
    bf__ecc_code code;
    int bits;                 /* per stored value */
    int per_word;             /* values per 64-bit word */
    uint32_t vmask;           /* a value's bits */
    int check_faulty;
    uint8_t *on;              /* per site: protected */
    int64_t *word_prefix;     /* n_sites + 1: running word counts (0 for an unprotected site) */
    int64_t words;            /* every protected word: group 0's, then xseg's */
    int64_t *gbase[BF_FAULT_GROUPS_MAX];   /* weights group g (1..): per site, its tensor's first word, -1 unprotected */
    ecc_seg *xseg;
    size_t n_xseg;
};

typedef struct ecc_key {
    int64_t word;             /* word_prefix[site] + the site's word */
    size_t i;                 /* the drawn fault: its place in all groups' faults, in group order */
} ecc_key;

struct bf__ecc_scratch {
    bf__efault *drawn;        /* the trial's faults as drawn: group 0's, then each weights group's */
    size_t gstart[BF_FAULT_GROUPS_MAX + 1];   /* group g's are drawn[gstart[g] .. gstart[g + 1]) */
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
    for (int g = 0; g < BF_FAULT_GROUPS_MAX; g++) bf__free(e->gbase[g]);
    bf__free(e->xseg);
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
    e->words = e->word_prefix[c->surface.n_sites];
    return BF_OK;
}

bf_status bf__ecc_add_group(bf_campaign *c, size_t g, const bf_ecc_opts *o, bf_error *err)
{
    bf__ecc *e = c->protect.ecc;
    const bf_campaign *s = c->groups.sub[g];
    int64_t *base = e->gbase[g + 1] = bf__malloc((s->surface.n_sites + 1) * sizeof *base);
    if (!base) return bf_error_set(err, BF_ENOMEM, "out of memory");
    for (size_t k = 0; k < s->surface.n_sites; k++) {
        const bf_site *site = &s->surface.sites[k];
        size_t p = s->surface.site_param[k];
        int on = o->n_tensors == 0;
        for (size_t i = 0; !on && i < o->n_tensors; i++) on = bf__site_matches(o->tensors[i], site);
        base[k] = -1;
        for (size_t j = 0; on && base[k] < 0 && j < c->surface.n_sites; j++)   /* group 0's words */
            if (e->on[j] && c->surface.site_param[j] == p) base[k] = e->word_prefix[j];
        for (size_t j = 0; on && base[k] < 0 && j < e->n_xseg; j++)             /* an earlier group's */
            if (e->xseg[j].param == p) base[k] = e->xseg[j].base;
        if (!on || base[k] >= 0) continue;
        ecc_seg *x = bf__realloc(e->xseg, (e->n_xseg + 1) * sizeof *x);
        if (!x) return bf_error_set(err, BF_ENOMEM, "out of memory");
        e->xseg = x;
        e->xseg[e->n_xseg++] = (ecc_seg){.base = e->words, .elements = site->elements, .param = p, .group = g + 1, .site = k};
        base[k] = e->words;
        e->words += (site->elements + e->per_word - 1) / e->per_word;
    }
    return BF_OK;
}

int bf__ecc_covers(const bf_campaign *c, size_t g, int64_t site)
{
    const bf__ecc *e = c->protect.ecc;
    if (!e) return 0;
    if (g == 0) return e->on[site];
    return e->gbase[g] && e->gbase[g][site] >= 0;
}

double bf__ecc_storage_bits(const bf_campaign *c)
{
    const bf__ecc *e = c->protect.ecc;
    return e ? (double)BF_ECC_CHECK_BITS * (double)e->words : 0;
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
    uint64_t bits = (uint64_t)e->words * BF_ECC_CHECK_BITS;
    bf_rng r = bf_rng_make(c->faults.seed, BF__ECC_STREAM + (uint64_t)t);
    uint64_t cnt;
    int over = bf__ber_positions(&r, bits, rate, (uint64_t)BF__BER_MAX_ERRORS, &s->pos, &s->pos_cap, &cnt);
    if (over > 0)
        return bf_error_set(err, BF_ERANGE, "trial %lld: BER rate %g over %llu check bits flips %llu; at most %lld per trial are "
                            "supported", (long long)t, rate, (unsigned long long)bits, (unsigned long long)cnt,
                            (long long)BF__BER_MAX_ERRORS);
    if (over < 0) return bf_error_set(err, BF_ENOMEM, "out of memory for %llu check-bit errors", (unsigned long long)cnt);
    *n = (size_t)cnt;
    return BF_OK;
}

/* Group 0's site of global word w < word_prefix[n_sites] (word_prefix
 * ascends; binary search). */
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

/* The campaign whose sites group g's faults name (0: c itself). */
static const bf_campaign *group_of(const bf_campaign *c, size_t g) { return g ? c->groups.sub[g - 1] : c; }

/* What group g's faults do to the bits they strike (BER: flips). */
static bf_fault_model kind_of(const bf_campaign *c, size_t g)
{
    bf_fault_model k = group_of(c, g)->faults.kind;
    return k == BF_FAULT_BER ? BF_FAULT_BITFLIP : k;
}

/* The group of drawn fault i (its place in s->drawn). */
static size_t group_at(const bf__ecc_scratch *s, size_t i, size_t ng)
{
    size_t g = 0;
    while (g + 1 < ng && i >= s->gstart[g + 1]) g++;
    return g;
}

/* The later groups' tensor holding word w (w past group 0's words). */
static const ecc_seg *xseg_of(const bf__ecc *e, int64_t w)
{
    for (size_t j = 0; j < e->n_xseg; j++)
        if (w >= e->xseg[j].base && w < e->xseg[j].base + (e->xseg[j].elements + e->per_word - 1) / e->per_word)
            return &e->xseg[j];
    return &e->xseg[e->n_xseg - 1];   /* not reached: every word is in a tensor */
}

/* One word (global number `word`): the drawn faults keys[a..b) (every
 * group's, in group order) and the check-bit flips `check`; the faults'
 * masks become what the decoder leaves (a value's whole change, on the
 * first later-group fault on it only), and a bit it flips in a value no fault touched is
 * appended to the draw of the word's first fault's group. dr[g]: group g's
 * draw. */
static bf_status decode_word(const bf_campaign *c, bf__draw *const *dr, bf__ecc_scratch *s, int64_t word, size_t a, size_t b,
                             uint8_t check, int *due, bf_error *err)
{
    const bf__ecc *e = c->protect.ecc;
    size_t ng = 1 + c->groups.n, g0, site;
    if (a < b) {
        g0 = group_at(s, s->keys[a].i, ng);
        site = (size_t)s->drawn[s->keys[a].i].site;
    } else if (word < e->word_prefix[c->surface.n_sites]) {   /* check bits alone */
        g0 = 0;
        site = word_site(c, word);
    } else {
        const ecc_seg *x = xseg_of(e, word);
        g0 = x->group;
        site = x->site;
    }
    const bf_campaign *gc = group_of(c, g0);
    size_t p = gc->surface.site_param[site];
    int64_t base = g0 == 0 ? e->word_prefix[site] : e->gbase[g0][site];
    int64_t first = (word - base) * e->per_word;
    int64_t count = gc->surface.sites[site].elements - first;
    if (count > e->per_word) count = e->per_word;
    uint32_t gold[64], cur[64];
    uint64_t touched = 0, data = 0, given = 0;
    for (size_t k = a; k < b; k++) {
        const bf__efault *f = &s->drawn[s->keys[k].i];
        int j = (int)(f->index - first);
        if (!(touched >> j & 1)) gold[j] = cur[j] = bf__wencode(&c->store, p, f->index, bf__stored(&c->store, p, f->index));
        touched |= UINT64_C(1) << j;
        cur[j] = bf__fault_bits(&c->store, cur[j], kind_of(c, group_at(s, s->keys[k].i, ng)), f) & e->vmask;
    }
    for (int j = 0; j < count; j++)
        if (touched >> j & 1) data |= (uint64_t)(cur[j] ^ gold[j]) << (j * e->bits);
    int bit;
    if (bf__ecc_decode(&e->code, &data, &check, &bit) == BF_ECC_DETECTED) {
        *due = 1;
        return BF_OK;
    }
    for (size_t k = a; k < b; k++) {
        size_t i = s->keys[k].i, g = group_at(s, i, ng);
        bf__efault *f = &dr[g]->f[i - s->gstart[g]];
        int j = (int)(f->index - first);
        /* group 0's faults each write stored ^ change (the runner starts
         * every one from the stored value); a later group's strikes what
         * is there, so only the first fault on a value carries the change */
        f->mask = g > 0 && (given >> j & 1) ? 0 : (uint32_t)(data >> (j * e->bits)) & e->vmask;
        f->set0 = f->set1 = 0;
        given |= UINT64_C(1) << j;
    }
    int j = bit >= 0 && bit < BF_ECC_DATA_BITS ? bit / e->bits : -1;
    if (j >= 0 && j < count && !(touched >> j & 1)) {   /* a miscorrection in a value the faults left alone */
        bf__draw *d = dr[g0];
        bf__efault *f = grow(d->f, &d->cap, d->n + 1, sizeof *d->f);
        if (!f) return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's faults");
        d->f = f;
        d->f[d->n++] = (bf__efault){.site = (int64_t)site, .index = first + j, .sample = -1,
                                    .mask = (uint32_t)(data >> (j * e->bits)) & e->vmask};
    }
    return BF_OK;
}

bf_status bf__ecc_apply(const bf_campaign *c, bf__draw *d, bf__draw *dg, int64_t t, bf_trial_record *rec, bf_error *err)
{
    const bf__ecc *e = c->protect.ecc;
    bf__ecc_scratch *s = d->ecc;
    if (!s && !(s = d->ecc = bf__calloc(1, sizeof *s))) return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's faults");
    bf_fault_model kind = kind_of(c, 0);
    /* every weights group's faults after group 0's, in group order */
    size_t ng = 1 + c->groups.n, total = d->n;
    bf__draw *dr[BF_FAULT_GROUPS_MAX + 1] = {d};
    s->gstart[0] = 0;
    s->gstart[1] = d->n;
    for (size_t g = 1; g < ng; g++) {
        dr[g] = dg && e->gbase[g] ? &dg[g - 1] : NULL;
        total += dr[g] ? dr[g]->n : 0;
        s->gstart[g + 1] = total;
    }
    bf__efault *dw = grow(s->drawn, &s->drawn_cap, total + 1, sizeof *dw);
    ecc_key *keys = dw ? grow(s->keys, &s->keys_cap, total + 1, sizeof *keys) : NULL;
    if (dw) s->drawn = dw;
    if (keys) s->keys = keys;
    if (!dw || !keys) return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's faults");
    for (size_t g = 0; g < ng; g++)   /* a draw's f is NULL before its first fault */
        if (dr[g] && dr[g]->n) memcpy(s->drawn + s->gstart[g], dr[g]->f, dr[g]->n * sizeof *d->f);
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
    /* a later group's fault on an unprotected tensor stays as drawn: it
     * strikes what the earlier groups left (campaign_trial.c) */
    for (size_t g = 1; g < ng; g++)
        for (size_t i = 0; dr[g] && i < dr[g]->n; i++) {
            const bf__efault *f = &dr[g]->f[i];
            int64_t base = e->gbase[g][f->site];
            if (base >= 0) s->keys[nk++] = (ecc_key){.word = base + f->index / e->per_word, .i = s->gstart[g] + i};
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
        st = decode_word(c, dr, s, w, a, b, check, &due, err);
        a = b;
    }
    if (st != BF_OK) return st;
    if (!due) return BF_OK;
    /* the later groups' draws back as drawn, for the DUE trial's record */
    for (size_t g = 1; g < ng; g++)
        if (dr[g]) {
            dr[g]->n = s->gstart[g + 1] - s->gstart[g];
            if (dr[g]->n) memcpy(dr[g]->f, s->drawn + s->gstart[g], dr[g]->n * sizeof *d->f);
        }
    return detected(c, s, kind, rec, err);
}

void bf__ecc_record(const bf_campaign *c, const bf__draw *d, bf_trial_record *rec)
{
    const bf__ecc *e = c->protect.ecc;
    const bf__ecc_scratch *s = d->ecc;
    /* each ECC'd group's kept faults (group 0's, the weights groups') back
     * as drawn, in draw order, and the appended ones dropped; the
     * activation groups' (which ECC does not touch) stay */
    size_t ng = 1 + c->groups.n, seen[BF_FAULT_GROUPS_MAX + 1] = {0};
    int n = 0;
    for (int j = 0; j < rec->n_kept; j++) {
        bf_applied_fault a = rec->faults[j];
        size_t g = (size_t)a.group;
        if (g < ng && (g == 0 || e->gbase[g])) {
            size_t k = seen[g]++;
            if (k >= s->gstart[g + 1] - s->gstart[g]) continue;   /* a miscorrection's */
            const bf__efault *f = &s->drawn[s->gstart[g] + k];
            a.mask = f->mask | f->set0 | f->set1;
        }
        rec->faults[n++] = a;
    }
    rec->n_kept = n;
}
