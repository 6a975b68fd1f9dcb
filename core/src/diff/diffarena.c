/* A differential worker's arena shared by lifetime (issue 33; diff_impl.h,
 * bf__dx_lifetimes). The evaluator's plans give every value a slot of its
 * own (a trial reads and writes values out of step order, which a plan
 * shared by lifetime, as `bitflip eval`'s, does not allow for), so a
 * worker touched every slot a trial re-ran: ViT-S/16 at batch 4 about 650
 * MB a worker, written and read back through DRAM, and each thread's first
 * touch of them paid again at 2 threads (docs/perf/trials.md, h19-mt).
 * Here each value gets a place shared with values whose lives do not
 * overlap, its life being every moment of a batch at which a trial may
 * write or read it, out of order included:
 *
 * - a step's outputs and inputs from the earliest moment it runs (a Conv's
 *   fused epilogue writes its last step's output, and reads the residual
 *   operand, at the Conv: diffstep.c, bf__dx_run_fused; diffchan.c,
 *   bf__dx_chain_channel; a whole run's Gather groups, plan_impl.h gcol) to
 *   its own step;
 * - fetch (diffexec.c) of a value the cache does not hold runs its
 *   producer when a reader needs it, on inputs fetched the same way: every
 *   output of those producers, and every input the cache does not hold,
 *   lives to that reader too (a held one is read from the cache then, even
 *   if the trial computed it and found it golden);
 * - the graph's outputs, and the inputs of the step computing output 0
 *   (diffout.c reads them after every batch), to the end of the batch.
 *
 * Value faults are written at a batch's start, into any value: a trial with
 * any runs on the plans' own slots as before (bf__dx_run switches), so the
 * shared places hold only weight-fault trials' values. A value the cache
 * says it holds but gives no block for (a derived block whose run failed)
 * would be recomputed out of order: fetch refuses that instead
 * (bf__dx_arena_assumed). Where the places are laid out, each pair of
 * overlapping places is checked against the lives (bf__dx_slots_overlap)
 * before a trial runs. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "diff/diff_impl.h"
#include "exec/plan_impl.h"

static int cached(const bf__dx_shared *sh, int v)
{
    return bf__pvals_data(sh->pv, v) || bf__gcache_has(sh->gc, v) || (v == sh->out_val && sh->golden);
}

static void widen(int *first, int *last, int v, int lo, int hi)
{
    if (lo < first[v]) first[v] = lo;
    if (hi > last[v]) last[v] = hi;
}

/* fetch(x) at any moment in [lo, hi]: an uncached x's producer runs then,
 * writing each of its outputs and reading each of its inputs, the uncached
 * ones fetched the same way. A held input is read from the cache, even one
 * the trial computed and found golden (bf__dx_fetch_from_cache: not the
 * graph's output, which fetch leaves where the trial wrote it), so its
 * place lives no longer for it: resnet18's layer1.1.relu, held for the layer1
 * trial, lived to layer3's first step so (every value between them is
 * left out of the cache), 25.7 MB of written places kept apart. */
static void fetch_closure(const unsigned char *held, int out_val, const bf_plan *p, int x, int lo, int hi, int *first,
                          int *last, int *seen, int stamp)
{
    if (seen[x] == stamp) return;
    seen[x] = stamp;
    int s = p->val_step[x];
    if (s < 0 || held[x]) return;
    const bf__step *st = &p->steps[s];
    for (int j = 0; j < st->n_out; j++)
        if (st->node->out[j] >= 0) widen(first, last, st->node->out[j], lo, hi);
    for (int j = 0; j < st->n_in; j++) {
        int z = st->node->in[j];
        if (!bf__runtime(p, z) || (held[z] && bf__dx_fetch_from_cache(p, out_val, z))) continue;
        widen(first, last, z, lo, hi);
        fetch_closure(held, out_val, p, z, lo, hi, first, last, seen, stamp);
    }
}

bf_status bf__dx_lifetimes(const bf_plan *p, const unsigned char *held, int out_val, int *first, int *last,
                           bf_error *err)
{
    const bf_model *m = p->model;
    int ns = (int)p->n_steps;
    int *early = bf__malloc(((size_t)ns + 1) * sizeof *early), *seen = bf__calloc(m->n_values + 1, sizeof *seen);
    if (!early || !seen) {
        bf__free(early), bf__free(seen);
        return bf__dx_oom(err);
    }
    for (size_t v = 0; v < m->n_values; v++) first[v] = last[v] = p->val_step[v] >= 0 ? p->val_step[v] : -1;
    for (int i = 0; i < ns; i++) early[i] = i;
    for (int i = 0; i < ns; i++) {
        const int ks[3] = {p->fuse_to[i], p->fuse_to[i] ? p->fuse_add[i] : 0, p->fuse_to[i] ? p->fuse_bn[i] : 0};
        for (int k = 0; k < 3; k++)
            if (ks[k] > i && early[ks[k]] > i) early[ks[k]] = i;
        for (int k = i + 1; p->tab.gcol && k <= p->tab.gcol[i]; k++)
            if (early[k] > i) early[k] = i;
    }
    int stamp = 0;
    for (int k = 0; k < ns; k++) {
        const bf__step *s = &p->steps[k];
        for (int j = 0; j < s->n_out; j++)
            if (s->node->out[j] >= 0) widen(first, last, s->node->out[j], early[k], k);
        for (int j = 0; j < s->n_in; j++) {
            int x = s->node->in[j];
            if (!bf__runtime(p, x)) continue;
            widen(first, last, x, early[k], k);
            fetch_closure(held, out_val, p, x, early[k], k, first, last, seen, ++stamp);
        }
    }
    for (size_t i = 0; i < m->n_outputs; i++) last[m->output_vals[i]] = ns;
    int os = out_val >= 0 ? p->val_step[out_val] : -1;
    for (int j = 0; os >= 0 && j < p->steps[os].n_in; j++)
        if (bf__runtime(p, p->steps[os].node->in[j])) last[p->steps[os].node->in[j]] = ns;
    bf__free(early), bf__free(seen);
    return BF_OK;
}

typedef struct span {
    size_t v, off, end;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

int bf__dx_slots_overlap(size_t n, const unsigned char *place, const size_t *bytes, const int *first, const int *last,
                         const size_t *off, int *va, int *vb)
{
    size_t k = 0;
    span *sp = bf__malloc((n + 1) * sizeof *sp);
    if (!sp) return -1;
    for (size_t v = 0; v < n; v++)
        if (place[v] && bytes[v]) sp[k++] = (span){.v = v, .off = off[v], .end = off[v] + bytes[v]};
    qsort(sp, k, sizeof *sp, span_cmp);
    int found = 0;
    for (size_t a = 0; a < k && !found; a++)
        for (size_t b = a + 1; b < k && sp[b].off < sp[a].end && !found; b++) {
            size_t x = sp[a].v, y = sp[b].v;
            if (first[x] <= last[y] && first[y] <= last[x]) {
                found = 1;
                *va = (int)x, *vb = (int)y;
            }
        }
    bf__free(sp);
    return found;
}

/* Values computed from parameters and constants alone (dxparam.c) keep
 * their own slots. Those the campaign could not hold (over its limit, or
 * no arena) because a worker fetches them at each batch's start
 * (bf__pv_batch), to be read in place by any step of the batch, so a slot
 * another value wrote since would hand a kernel that value's bytes. The
 * held ones are read from the campaign's copy, their own slot written
 * only when a fault reaches their step; a shared place would be theirs
 * from that step, often among the first (torch's Identity biases), to
 * their last reader, and the layout around such long lives took more
 * bytes: resnet18's workers faulted in about 6 MiB more (1,567 pages,
 * h22-house) when the held ones shared places. */
static void pin_param_only(const bf__pvals *pv, size_t n_values, unsigned char *place)
{
    size_t n;
    const int *left = bf__pvals_left(pv, &n);
    for (size_t k = 0; k < n; k++) place[left[k]] = 0;
    for (size_t v = 0; v < n_values; v++)
        if (bf__pvals_data(pv, (int)v)) place[v] = 0;
}

/* The places of the values a fused Conv computes through (its own output
 * and the Add's or BatchNorm's before the activation: fuse_to, fuse_mid)
 * laid out above all the others, apart: a trial's fused epilogue writes
 * none of them (diffstep.c), so their pages are never touched, and the
 * places that are written lie together at the bottom, which the golden
 * pass's pool has mapped already. Laid out with the rest, resnet18's layer1
 * trial wrote places up to 257 MB up (layer2's values among layer1's
 * unwritten Conv outputs), 79 MB of them past the pool's 88. The lives are
 * the same either way: only addresses move. */
static bf_status lay_out(const bf_plan *p, size_t n, const unsigned char *place, const size_t *bytes, const int *first,
                         const int *last, size_t *off, size_t *total, bf_error *err)
{
    unsigned char *mid = bf__calloc(n + 1, 1), *lo = bf__calloc(n + 1, 1);
    if (!mid || !lo) {
        bf__free(mid), bf__free(lo);
        return bf__dx_oom(err);
    }
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int conv = p->fuse_to && p->fuse_to[i] > (int)i;
        if (!conv && !(p->fuse_mid && p->fuse_mid[i])) continue;
        for (int j = 0; j < s->n_out; j++)
            if (s->node->out[j] >= 0) mid[s->node->out[j]] = 1;
    }
    for (size_t v = 0; v < n; v++) {
        lo[v] = place[v] && !mid[v];
        mid[v] = place[v] && mid[v];
    }
    size_t below = 0, above = 0;
    bf_status st = bf__plan_first_fit(n, lo, bytes, first, last, off, &below, err);
    size_t *up = st == BF_OK ? bf__calloc(n + 1, sizeof *up) : NULL;
    if (st == BF_OK && !up) st = bf__dx_oom(err);
    if (st == BF_OK) st = bf__plan_first_fit(n, mid, bytes, first, last, up, &above, err);
    for (size_t v = 0; st == BF_OK && v < n; v++)
        if (mid[v]) off[v] = below + up[v];
    if (st == BF_OK) *total = below + above;
    bf__free(mid), bf__free(lo), bf__free(up);
    return st;
}

/* Plan t's shared places: lives, layout, the check; NULL tables when the
 * plan keeps its own (a plan that fuses or runs one sample: shared by
 * lifetime already, plan_build.c). */
static bf_status arena_plan(bf__dx *dx, int t, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf_model *m = sh->m;
    bf_plan *p = dx->plan[t];
    size_t pool_bytes = 0;
    void *pool = bf__gpools_take(bf__gcache_pools(sh->gc), p, &pool_bytes);
    if (!p || p->fuse || p->unbatched || p->tab.pwdw || !p->arena) {
        bf__free(pool);
        return BF_OK;
    }
    size_t n = m->n_values;
    int *first = bf__malloc((n + 1) * sizeof *first), *last = bf__malloc((n + 1) * sizeof *last);
    size_t *bytes = bf__calloc(n + 1, sizeof *bytes), *off = bf__calloc(n + 1, sizeof *off), total = 0;
    unsigned char *place = bf__calloc(n + 1, 1), *held = bf__calloc(n + 1, 1);
    void **tab = bf__calloc(n + 1, sizeof *tab);
    bf_status st = first && last && bytes && off && place && held && tab ? BF_OK : bf__dx_oom(err);
    for (size_t v = 0; st == BF_OK && v < n; v++) held[v] = (unsigned char)cached(sh, (int)v);
    if (st == BF_OK) st = bf__dx_lifetimes(p, held, sh->out_val, first, last, err);
    const char *a0 = p->arena, *a1 = a0 + p->arena_bytes;
    for (size_t v = 0; st == BF_OK && v < n; v++) {
        const char *d = dx->arena[t][v];
        /* run-time values in the plan's arena; not a dynamic step's (sized
         * when it runs) */
        place[v] = bf__runtime(p, (int)v) && !p->dyn_val[v] && d && d >= a0 && d < a1;
    }
    if (st == BF_OK) pin_param_only(sh->pv, n, place);
    for (size_t v = 0; st == BF_OK && v < n; v++) bytes[v] = place[v] ? bf_tensor_nbytes(&p->vals[v]) : 0;
    if (st == BF_OK) st = lay_out(p, n, place, bytes, first, last, off, &total, err);
    int va = -1, vb = -1, bad = st == BF_OK ? bf__dx_slots_overlap(n, place, bytes, first, last, off, &va, &vb) : 0;
    if (bad < 0) st = bf__dx_oom(err);
    else if (bad)
        st = bf_error_set(err, BF_EUNSUPPORTED, "internal error: a worker's arena places values %d and %d, alive at once, "
                          "in the same bytes", va, vb);
    /* the golden pass's pool where it has the room: the pages it wrote
     * are mapped already, where a fresh page costs this host's first touch
     * and the guest's zeroing (resnet18's layer1 trial wrote ~150 MB of
     * places, docs/perf/trials/resnet18.md, h38-pool); not zeroed, the
     * pass's values in it: a trial writes a place before it reads it, as
     * it does a place an earlier value of the trial held */
    if (st == BF_OK && pool && pool_bytes >= total + 64) {
        /* the room past the places given back (a mapping's tail: cut in
         * place, nothing moved), not held against RLIMIT_AS for the run */
        void *cut = pool_bytes > total + 64 ? bf__realloc(pool, total + 64) : pool;
        dx->lt_mem[t] = cut ? cut : pool;
        pool = NULL;
    }
    bf__free(pool);
    if (st == BF_OK && !dx->lt_mem[t] && !(dx->lt_mem[t] = bf__calloc(1, total + 64))) st = bf__dx_oom(err);
#ifndef NDEBUG
    /* NaN in every place before any trial: a read of a place no trial
     * step wrote shows in the sanitizer builds' records */
    if (st == BF_OK) memset(dx->lt_mem[t], 0xff, total + 64);
#endif
    if (st == BF_OK) {
        /* the pages not yet written faulted in when first written; in 2
         * MiB pages where the golden cache's are (the host's measurement,
         * bf__gcache_pages): a trial writes these places again and again,
         * and the first trials' first touch of them in 4 KiB pages was
         * resnet18's 37,000 worker page faults, 145 MiB at this host's 0.4
         * GB/s (docs/perf/trials/resnet18.md, h35-arena) */
        dx->lt_pages[t] = bf__gcache_pages(sh->gc) & BF__WRITE_HUGE;
        if (dx->lt_pages[t]) bf__pages_written(dx->lt_mem[t], total + 64, dx->lt_pages[t]);
        char *base = (char *)(((uintptr_t)dx->lt_mem[t] + 63) & ~(uintptr_t)63);
        for (size_t v = 0; v < n; v++) tab[v] = place[v] ? base + off[v] : dx->arena[t][v];
        dx->lt_tab[t] = tab;
        dx->lt_bytes[t] = total;
        tab = NULL;
    }
    bf__free(first), bf__free(last), bf__free(bytes), bf__free(off), bf__free(place), bf__free(held), bf__free(tab);
    return st;
}

bf_status bf__dx_arena_init(bf__dx *dx, bf_error *err)
{
    for (int t = 0; t < 2; t++) {
        dx->own_tab[t] = dx->arena[t];
        bf_status st = arena_plan(dx, t, err);
        if (st != BF_OK) return st;
    }
    bf__dx_arena_use(dx, 0);
    return BF_OK;
}

void bf__dx_arena_use(bf__dx *dx, int own)
{
    for (int t = 0; t < 2; t++) {
        void **tab = own || !dx->lt_tab[t] ? dx->own_tab[t] : dx->lt_tab[t];
        if (!tab || dx->arena[t] == tab) continue;
        dx->arena[t] = tab;
        for (size_t v = 0; dx->plan[t] && v < dx->sh->m->n_values; v++)
            if (bf__runtime(dx->plan[t], (int)v)) dx->plan[t]->vals[v].data = tab[v];
    }
    bf__pv_golden(dx);
}

int bf__dx_arena_assumed(const bf__dx *dx, const bf_plan *p, int v)
{
    return dx->arena[p == dx->plan[1]] == dx->lt_tab[p == dx->plan[1]] && cached(dx->sh, v);
}

void bf__dx_arena_free(bf__dx *dx)
{
    for (int t = 0; t < 2; t++) {
        bf__free(dx->own_tab[t] ? dx->own_tab[t] : dx->arena[t]);
        bf__free(dx->lt_tab[t]);
        bf__free(dx->lt_mem[t]);
        dx->arena[t] = dx->own_tab[t] = dx->lt_tab[t] = NULL;
        dx->lt_mem[t] = NULL;
    }
}
