/* Checkpoints of a one-sample graph's golden pass (ckpt.h says what and
 * why). Hand-written: the cuts, the values live across them and the
 * restore are facts of this project's plans (their steps, their arena), so
 * no library knows them.
 *
 * The values saved at cut k are those a step before k computed into the
 * plan's arena and a step at or after k reads (or the graph outputs): with
 * them back in place, running steps k.. computes what the whole run would,
 * because every step reads only its inputs. A value outside the arena (a
 * parameter, a folded constant, a Reshape aliasing either, a graph input
 * fed before each run) is already in place. The cuts are chosen greedily by
 * the golden time they save per byte, weighted by where trials' faults
 * land (mass), until the samples' checkpoints fill the budget or a cut
 * would save the campaign's trials less time than recording it costs
 * (the byte price, ck->byte_s: ckpt_impl.h). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "exec/ckpt_impl.h"

void bf__ckpt_free(bf__ckpt *ck)
{
    if (!ck) return;
    bf__free(ck->param_lo);
    bf__free(ck->param_hi);
    bf__free(ck->val_step);
    bf__free(ck->val_last);
    bf__free(ck->pre_ns);
    bf__free(ck->cut);
    bf__free(ck->cut_of);
    bf__free(ck->mark);
    bf__free(ck->lv_first);
    bf__free(ck->lv);
    bf__free(ck->lv_off);
    bf__free(ck->lv_bytes);
    bf__free(ck->in_first);
    bf__free(ck->in_val);
    bf__free(ck->out_first);
    bf__free(ck->out_val);
    bf__free(ck->val_param);
    bf__free(ck->dyn);
    bf__free(ck->outputs);
    bf__free(ck->st_first);
    bf__free(ck->st_val);
    bf__free(ck->st_off);
    bf__free(ck->st_bytes);
    bf__free(ck->store_of);
    bf__free(ck->post);
    bf__free(ck->chan_m);
    bf__free(ck->chan_div);
    bf__free(ck->chan_chain);
    bf__free(ck->chan_next);
    bf__free(ck->data);
    bf__ckpt_tail_free(&ck->tail);
    bf__free(ck);
}

static bf_status oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory for the golden checkpoints"); }

int bf__ckpt_in_arena(const bf_plan *p, const void *data)
{
    const char *a = p->arena, *d = data;
    return d && a && d >= a && d < a + p->arena_bytes;
}

/* The values live across cut k: computed before k into the arena, read at
 * or after k (last[v]). Counted into *n and *bytes; listed if lv != NULL. */
static void live_at(const bf_plan *p, const int *last, int k, int64_t *lv, size_t *n, size_t *bytes)
{
    *n = *bytes = 0;
    for (size_t v = 0; v < p->model->n_values; v++) {
        int at = p->val_step[v];
        if (at < 0 || at >= k || last[v] < k || !bf__ckpt_in_arena(p, p->vals[v].data)) continue;
        if (lv) lv[*n] = (int64_t)v;
        (*n)++;
        *bytes += bf_tensor_nbytes(&p->vals[v]);
    }
}

/* Where cuts may go: after step 0, at or before the first dynamic step
 * (the run-time arena is emptied when a run starts), never between a Conv
 * and the activation its epilogue may compute (its own output is then
 * never written). */
static void allowed_cuts(const bf_plan *p, unsigned char *ok)
{
    size_t end = p->n_steps;
    for (size_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].dyn) { end = i; break; }
    for (size_t k = 1; k <= end && k < p->n_steps; k++) ok[k] = 1;
    for (size_t i = 0; i < p->n_steps; i++)
        for (int k = (int)i + 1; p->fuse_to[i] > (int)i && k <= p->fuse_to[i]; k++) ok[k] = 0;
}

/* Greedy: the allowed cut that saves the most mass-weighted golden time
 * per byte, while the samples' checkpoints fit the budget and the trials
 * gain more than the recording costs. pre[k]: the time of steps before k;
 * msum[k]: the share of the faults landing before step k (of 1). */
static void choose(const double *pre, const double *msum, const size_t *bytes, const unsigned char *ok, size_t n,
                   uint64_t budget, int64_t samples, int64_t trials, double byte_s, unsigned char *chosen, int *prev,
                   int *next)
{
    /* seconds saved per image per trial, per byte of each image's checkpoints */
    double floor_ratio = trials > 0 ? byte_s / (double)trials : 0;
    uint64_t used = 0;
    for (;;) {
        int pc = 0;
        for (size_t k = 0; k < n; k++) {
            prev[k] = pc;
            if (chosen[k]) pc = (int)k;
        }
        int nc = (int)n;
        for (size_t k = n; k-- > 0;) {
            next[k] = nc;
            if (chosen[k]) nc = (int)k;
        }
        double best = 0;
        size_t at = 0;
        for (size_t k = 1; k < n; k++) {
            if (!ok[k] || chosen[k] || bytes[k] == 0) continue;
            uint64_t b = (uint64_t)bytes[k] * (uint64_t)samples;
            if (b > budget - used) continue;
            /* trials starting in [k, next) start at k instead of prev */
            double gain = (msum[next[k]] - msum[k]) * (pre[k] - pre[prev[k]]);
            if (gain / (double)b > best) best = gain / (double)b, at = k;
        }
        if (at == 0 || best < floor_ratio) return;
        chosen[at] = 1;
        used += (uint64_t)bytes[at] * (uint64_t)samples;
    }
}

static bf_status windows(bf__ckpt *ck, const bf_plan *p, int *last)
{
    const bf_model *m = p->model;
    for (size_t q = 0; q < m->n_params; q++) ck->param_lo[q] = (int)p->n_steps, ck->param_hi[q] = -1;
    for (size_t v = 0; v < m->n_values; v++) last[v] = -1, ck->val_step[v] = p->val_step[v];
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__node *nd = p->steps[i].node;
        for (int j = 0; j < nd->n_in; j++) {
            int v = nd->in[j];
            if (v < 0) continue;
            last[v] = (int)i;
            if (m->values[v].kind != BF__VAL_PARAM) continue;
            size_t q = (size_t)m->values[v].index;
            if (ck->param_lo[q] > (int)i) ck->param_lo[q] = (int)i;
            ck->param_hi[q] = (int)i;
        }
    }
    for (size_t k = 0; k < m->n_outputs; k++) last[m->output_vals[k]] = (int)p->n_steps;
    memcpy(ck->val_last, last, m->n_values * sizeof *last);
    return BF_OK;
}

static bf_status lay_out(bf__ckpt *ck, const bf_plan *p, const int *last, const unsigned char *chosen, bf_error *err)
{
    size_t n_lv = 0, bytes = 0, n, b;
    for (size_t k = 0; k < p->n_steps; k++) {
        if (!chosen[k]) continue;
        live_at(p, last, (int)k, NULL, &n, &b);
        ck->n_cuts++, n_lv += n, bytes += b;
    }
    ck->cut = bf__malloc((ck->n_cuts + 1) * sizeof *ck->cut);
    ck->lv_first = bf__malloc((ck->n_cuts + 1) * sizeof *ck->lv_first);
    ck->lv = bf__malloc((n_lv + 1) * sizeof *ck->lv);
    ck->lv_off = bf__malloc((n_lv + 1) * sizeof *ck->lv_off);
    ck->lv_bytes = bf__malloc((n_lv + 1) * sizeof *ck->lv_bytes);
    if (!ck->cut || !ck->lv_first || !ck->lv || !ck->lv_off || !ck->lv_bytes) return oom(err);
    size_t c = 0, at = 0, off = 0;
    ck->lv_first[0] = 0;
    for (size_t k = 0; k < p->n_steps; k++) {
        if (chosen[k]) {
            live_at(p, last, (int)k, ck->lv + at, &n, &b);
            for (size_t j = at; j < at + n; j++) {
                ck->lv_bytes[j] = bf_tensor_nbytes(&p->vals[ck->lv[j]]);
                ck->lv_off[j] = off;
                off += (ck->lv_bytes[j] + 63) & ~(size_t)63;
            }
            at += n;
            ck->cut[c++] = (int)k;
            ck->lv_first[c] = at;
            ck->mark[k] = 1;
        }
        ck->cut_of[k] = (int)c - 1;
    }
    ck->sample_bytes = off;
    return BF_OK;
}

bf_status bf__ckpt_create(const bf_plan *p, int64_t samples, int64_t trials, const double *step_cost,
                          const double *param_mass, const double *value_mass, size_t budget, const bf__ckpt_opts *opts,
                          bf__ckpt **out, bf_error *err)
{
    const bf__ckpt_opts none = {0}, *o = opts ? opts : &none;
    double byte_s = o->byte_s;
    int huge = o->huge;
    bf__ckpt_drawn drawn = o->drawn;
    void *user = o->user;
    const bf_model *m = p->model;
    size_t n = p->n_steps;
    *out = NULL;
    bf__ckpt *ck = bf__calloc(1, sizeof *ck);
    int *last = bf__malloc((m->n_values + 1) * sizeof *last), *prev = bf__malloc((n + 1) * sizeof *prev);
    int *next = bf__malloc((n + 1) * sizeof *next);
    double *pre = bf__malloc((n + 1) * sizeof *pre), *msum = bf__malloc((n + 1) * sizeof *msum);
    double *mass = bf__calloc(n + 1, sizeof *mass);
    size_t *bytes = bf__calloc(n + 1, sizeof *bytes);
    unsigned char *ok = bf__calloc(n + 1, 1), *chosen = bf__calloc(n + 1, 1);
    bf_status st = BF_OK;
    if (!ck || !last || !prev || !next || !pre || !msum || !mass || !bytes || !ok || !chosen) { st = oom(err); goto out; }
    ck->n_steps = n;
    ck->n_params = m->n_params;
    ck->n_values = m->n_values;
    ck->samples = samples;
    ck->byte_s = byte_s > 0 ? byte_s : BF__CKPT_BYTE_SECONDS;
    ck->param_lo = bf__malloc((m->n_params + 1) * sizeof *ck->param_lo);
    ck->param_hi = bf__malloc((m->n_params + 1) * sizeof *ck->param_hi);
    ck->val_step = bf__malloc((m->n_values + 1) * sizeof *ck->val_step);
    ck->val_last = bf__malloc((m->n_values + 1) * sizeof *ck->val_last);
    ck->pre_ns = bf__malloc((n + 1) * sizeof *ck->pre_ns);
    ck->cut_of = bf__malloc((n + 1) * sizeof *ck->cut_of);
    ck->mark = bf__calloc(n + 1, 1);
    if (!ck->param_lo || !ck->param_hi || !ck->val_step || !ck->val_last || !ck->pre_ns || !ck->cut_of || !ck->mark) {
        st = oom(err);
        goto out;
    }
    windows(ck, p, last);
    if (bf__ckpt_graph(ck, p) != BF_OK) {
        st = oom(err);
        goto out;
    }
    allowed_cuts(p, ok);
    for (size_t q = 0; param_mass && q < m->n_params; q++) {
        int lo, hi;
        bf__ckpt_param_steps(ck, q, &lo, &hi);
        if (param_mass[q] > 0) mass[lo < (int)n ? lo : 0] += param_mass[q];
    }
    for (size_t v = 0; value_mass && v < m->n_values; v++) {
        int lo, hi;
        bf__ckpt_value_step(ck, (int64_t)v, &lo, &hi);
        if (value_mass[v] > 0) mass[lo < (int)n ? lo : 0] += value_mass[v];
    }
    pre[0] = msum[0] = 0;
    double total = 0, mtotal = 0;
    for (size_t i = 0; i < n; i++) {
        pre[i + 1] = pre[i] + (step_cost[i] > 0 ? step_cost[i] : 0);
        msum[i + 1] = msum[i] + (mass[i] > 0 ? mass[i] : 0);
    }
    total = pre[n], mtotal = msum[n];
    for (size_t i = 0; i <= n && mtotal > 0; i++) msum[i] /= mtotal;
    for (size_t i = 0; i <= n; i++) ck->pre_ns[i] = (int64_t)(pre[i] * 1e9);
    for (size_t k = 1; k < n; k++) {
        size_t nv;
        if (ok[k]) live_at(p, last, (int)k, NULL, &nv, &bytes[k]);
    }
    if (samples > 0) choose(pre, msum, bytes, ok, n, (uint64_t)budget, samples, trials, ck->byte_s, chosen, prev, next);
    if ((st = lay_out(ck, p, last, chosen, err)) != BF_OK) goto out;
    for (size_t i = 0; i < n && total > 0 && mtotal > 0; i++)
        if (mass[i] > 0 && ck->cut_of[i] >= 0) ck->saved += mass[i] / mtotal * pre[ck->cut[ck->cut_of[i]]] / total;
    if (ck->n_cuts > 0) {   /* the store: what trials would run again only to feed the steps they reach */
        uint64_t used = (uint64_t)ck->sample_bytes * (uint64_t)samples, room = budget > used ? budget - used : 0;
        if ((st = bf__ckpt_choose_store(ck, p, mass, mtotal, room, trials, &ck->sample_bytes)) != BF_OK) {
            st = oom(err);
            goto out;
        }
    }
    if (drawn && ck->n_store && (st = bf__ckpt_store_drawn(ck, p, drawn, user, err)) != BF_OK) goto out;
    if (bf__ckpt_tail_find(ck, p) != BF_OK) {
        st = oom(err);
        goto out;
    }
    if (ck->tail.node) ck->mark[ck->tail.step] = 1;   /* the run calls at_cut there too */
    /* the golden pass writes every byte of it (each cut's values and each
     * stored value, every image): BF__WRITE_NOW, its pages in one call
     * rather than a fault a page inside the pass's copies (SSDlite320:
     * 91 MiB, 23k faults, a tenth of the golden pass on a loaded machine);
     * in 2 MiB pages where the host measured them cheap (`huge`) */
    ck->huge = huge != 0;
    /* an image-major sweep's blocks of m images a thread: as many as fit in slot_bytes */
    ck->slot_mult = 1;
    if (o->slots > 0 && o->slot_bytes > 0 && ck->sample_bytes > 0)
        ck->slot_mult = (int64_t)(o->slot_bytes / ((uint64_t)o->slots * ck->sample_bytes));
    if (ck->slot_mult < 1) ck->slot_mult = 1;
    if (o->slots > 0 && ck->slot_mult > samples / o->slots + 1) ck->slot_mult = samples / o->slots + 1;
    int64_t slots = o->slots > 0 ? o->slots * ck->slot_mult : 0;
    ck->slots = slots > 0 && slots < samples ? slots : samples;
    if (samples > 0 && ck->sample_bytes > 0 &&
        !(ck->data =
              bf__alloc_written((size_t)ck->slots * ck->sample_bytes, BF__WRITE_NOW | (huge ? BF__WRITE_HUGE : 0)))) {
        st = oom(err);
        goto out;
    }
    *out = ck;
    ck = NULL;
out:
    bf__ckpt_free(ck);
    bf__free(last);
    bf__free(prev);
    bf__free(next);
    bf__free(pre);
    bf__free(msum);
    bf__free(mass);
    bf__free(bytes);
    bf__free(ok);
    bf__free(chosen);
    return st;
}

size_t bf__ckpt_num_cuts(const bf__ckpt *ck) { return ck ? ck->n_cuts : 0; }
double bf__ckpt_byte_price(const bf__ckpt *ck) { return ck ? ck->byte_s : 0; }

double bf__ckpt_price_for(double small_cost)
{
    return small_cost > BF__CKPT_DEAR_PAGES ? BF__CKPT_BYTE_SECONDS_DEAR : BF__CKPT_BYTE_SECONDS;
}

int bf__ckpt_host_pages(double *byte_s)
{
    /* 4 KiB pages timed over 1 MiB (256 pages, 0.3-0.4 ms where they are
     * cheap, 2.5 where dear), 2 MiB ones only where those are dear */
    double c = 0;
    int huge = bf__pages_huge_cheaper(&c);
    *byte_s = bf__ckpt_price_for(c);
    return huge;
}

int bf__ckpt_huge(const bf__ckpt *ck) { return ck ? ck->huge : 0; }
int64_t bf__ckpt_slot_mult(const bf__ckpt *ck) { return ck && ck->slot_mult > 0 ? ck->slot_mult : 1; }
uint64_t bf__ckpt_bytes(const bf__ckpt *ck) { return ck ? (uint64_t)ck->sample_bytes * (uint64_t)ck->slots : 0; }
double bf__ckpt_saved_share(const bf__ckpt *ck) { return ck ? ck->saved : 0; }

void bf__ckpt_param_steps(const bf__ckpt *ck, size_t q, int *lo, int *hi)
{
    *lo = q < ck->n_params ? ck->param_lo[q] : 0;
    *hi = q < ck->n_params ? ck->param_hi[q] : (int)ck->n_steps;
    if (*lo > *hi) *lo = 0, *hi = (int)ck->n_steps;
}

void bf__ckpt_value_step(const bf__ckpt *ck, int64_t v, int *lo, int *hi)
{
    int at = ck->val_step[v];
    *lo = at < 0 ? 0 : at;
    *hi = at == BF__VAL_NOT_RUN ? (int)ck->n_steps : at;   /* no step computes it: from the start, to the end */
}

/* A plan the checkpoints fit: the same values in its arena with the same
 * sizes at every cut (plans of one model with one batch do; a check, since
 * fusion or sharing options may differ from the recording plan's). */
static int fits(const bf__ckpt *ck, const bf_plan *p, size_t c)
{
    if (p->n_steps != ck->n_steps) return 0;
    for (size_t j = ck->lv_first[c]; j < ck->lv_first[c + 1]; j++) {
        const bf_tensor *t = &p->vals[ck->lv[j]];
        if (!bf__ckpt_in_arena(p, t->data) || bf_tensor_nbytes(t) != ck->lv_bytes[j]) return 0;
    }
    return 1;
}

int bf__ckpt_fits_plan(const bf__ckpt *ck, const bf_plan *p)
{
    for (size_t c = 0; c < ck->n_cuts; c++)
        if (!fits(ck, p, c)) return 0;
    for (size_t j = 0; j < ck->n_store; j++) {
        const bf_tensor *t = &p->vals[ck->st_val[j]];
        if (!bf__ckpt_in_arena(p, t->data) || bf_tensor_nbytes(t) != ck->st_bytes[j]) return 0;
    }
    return p->n_steps == ck->n_steps;
}

typedef struct watch_ctx {
    const bf__ckpt *ck;
    bf__ckpt *rec;            /* the golden pass's (its tail rows recorded) */
    const bf__ckpt_trial *tr;
    float *tail_y;            /* the caller's buffer for the tail's check (bf__ckpt_tail_scratch) */
    unsigned char *block;     /* the sample's checkpoints */
    int64_t s;                /* the sample */
    int record, hi;
    bf_status st;             /* the golden pass's recording */
    size_t stopped_at;
    int64_t chan[5];          /* Convs run on one channel (ckpt_chan.c), of them fused, runs ended so;
                               * steps following the channel on; runs the tail's check ended */
    bf__chan_walk walk;
} watch_ctx;

/* past the faults' last step, at cut c: the values they reach equal
 * golden's (the others are golden and may not have been computed: their
 * steps were skipped) */
static int cut_golden(const watch_ctx *w, const bf_plan *p, size_t c)
{
    const bf__ckpt *ck = w->ck;
    const unsigned char *taint = w->tr && !w->tr->all ? w->tr->taint : NULL;
    for (size_t j = ck->lv_first[c]; j < ck->lv_first[c + 1]; j++)
        if ((!taint || taint[ck->lv[j]]) && memcmp(w->block + ck->lv_off[j], p->vals[ck->lv[j]].data, ck->lv_bytes[j]) != 0)
            return 0;
    return 1;
}

/* before a cut: record its values (the golden pass), or past the faults'
 * last step compare those they reach with golden's; before the detection
 * tail's check step (ckpt_tail.c): record its golden rows, or check the
 * rows the faults reach */
static int at_cut(void *user, bf_plan *p, size_t step)
{
    watch_ctx *w = user;
    const bf__ckpt *ck = w->ck;
    int cut = ck->cut_of[step] >= 0 && ck->cut[ck->cut_of[step]] == (int)step;
    int tail = ck->tail.node && (int)step == ck->tail.step;
    size_t c = cut ? (size_t)ck->cut_of[step] : 0;
    if (w->record) {
        for (size_t j = cut ? ck->lv_first[c] : 0; cut && j < ck->lv_first[c + 1]; j++)
            memcpy(w->block + ck->lv_off[j], p->vals[ck->lv[j]].data, ck->lv_bytes[j]);
        if (tail && w->st == BF_OK) w->st = bf__ckpt_tail_record(w->rec, p, w->s);
        return 0;
    }
    if (w->hi < 0 || (int)step <= w->hi) return 0;
    if (cut && cut_golden(w, p, c)) {
        w->stopped_at = step;
        return 1;
    }
    if (tail && bf__ckpt_tail_golden(ck, w->tr, p, w->s, w->tail_y)) {
        w->stopped_at = step;
        w->chan[4]++;
        return 1;
    }
    return 0;
}

/* after a step computing stored values (the golden pass): keep them */
static void keep(void *user, bf_plan *p, size_t step)
{
    watch_ctx *w = user;
    const bf__ckpt *ck = w->ck;
    for (int j = ck->st_first[step]; j < ck->st_first[step + 1]; j++)
        memcpy(w->block + ck->st_off[j], p->vals[ck->st_val[j]].data, ck->st_bytes[j]);
}

/* instead of a skipped step: its stored values back where it would write them */
static void fill(void *user, bf_plan *p, size_t step)
{
    watch_ctx *w = user;
    const bf__ckpt *ck = w->ck;
    for (int j = ck->st_first[step]; j < ck->st_first[step + 1]; j++)
        memcpy(p->vals[ck->st_val[j]].data, w->block + ck->st_off[j], ck->st_bytes[j]);
}

/* instead of a trial's channel-local Conv: its golden output, one channel recomputed */
static int chan(void *user, bf_plan *p, size_t step)
{
    watch_ctx *w = user;
    int fused, origin = w->tr && (int)step == w->tr->chan_step;
    int done = bf__ckpt_chan_run(w->ck, w->tr, w->block, p, step, &fused, &w->walk);
    w->chan[origin ? 0 : 3] += done != 0;
    w->chan[1] += origin && done && fused;
    if (done == 2) {   /* golden from here: the work ends with this step */
        w->chan[2]++;
        w->stopped_at = step + 1;
    }
    return done;
}

bf_status bf__ckpt_record(bf__ckpt *ck, bf_plan *p, int64_t s, bf_error *err)
{
    if (s < 0 || s >= ck->samples) return bf_error_set(err, BF_ERANGE, "internal error: checkpoint of sample %lld", (long long)s);
    if (!bf__ckpt_fits_plan(ck, p))
        return bf_error_set(err, BF_EINVAL, "internal error: the golden checkpoints do not fit this plan");
    watch_ctx w = {.ck = ck, .rec = ck, .block = ck->data + (size_t)(s % ck->slots) * ck->sample_bytes, .s = s,
                   .record = 1};
    bf__plan_watch pw = {.mark = ck->mark, .at = at_cut, .act = ck->n_store ? ck->post : NULL, .post = keep, .user = &w};
    bf_status st = bf__plan_run_from(p, 0, ck->n_cuts ? &pw : NULL, NULL, err);
    if (st == BF_OK && w.st != BF_OK) st = oom(err);
    return st;
}

int64_t bf__ckpt_pass_ns(const bf__ckpt *ck) { return ck ? ck->pre_ns[ck->n_steps] : 0; }

/* as bf__ckpt_run picks its start: the cut before the faults' first step */
int bf__ckpt_trial_skips_value(const bf__ckpt *ck, const bf__ckpt_trial *tr, int64_t v)
{
    if (!ck || !tr || tr->lo < 0 || tr->from < 0 || v < 0 || (size_t)v >= ck->n_values) return 0;
    return ck->cut[tr->from] > ck->val_last[v];
}

bf_status bf__ckpt_run(const bf__ckpt *ck, const bf__ckpt_trial *tr, float *tail_y, bf_plan *p, int64_t s, int *golden,
                       int64_t *work, int64_t *skipped, int64_t chans[5], bf_error *err)
{
    *golden = 0;
    if (s < 0 || s >= ck->samples || p->n_steps != ck->n_steps)
        return bf_error_set(err, BF_ERANGE, "internal error: checkpoint of sample %lld", (long long)s);
    int lo = tr ? tr->lo : -1, hi = tr ? tr->hi : -1;
    watch_ctx w = {.ck = ck, .tr = tr, .tail_y = tail_y, .block = ck->data + (size_t)(s % ck->slots) * ck->sample_bytes, .s = s, .hi = hi,
                   .stopped_at = p->n_steps, .walk = {.next = 0, .ch = -1}};
    int c = lo >= 0 ? tr->from : -1;
    size_t from = 0;
    int reach = c >= 0 && !tr->all;
    if (c >= 0) {   /* the plan fits (bf__ckpt_fits_plan, checked when it was given them) */
        for (size_t j = ck->lv_first[c]; j < ck->lv_first[c + 1]; j++)   /* what the run reads (ckpt_reach.c) */
            if (!reach || tr->read[ck->lv[j]]) memcpy(p->vals[ck->lv[j]].data, w.block + ck->lv_off[j], ck->lv_bytes[j]);
        from = (size_t)ck->cut[c];
    }
    bf__plan_watch pw = {.mark = ck->mark, .at = at_cut, .act = reach ? tr->act : NULL, .fill = fill, .chan = chan,
                         .user = &w};
    int stopped = 0;
    bf_status st = bf__plan_run_from(p, from, (hi >= 0 && ck->n_cuts) || reach ? &pw : NULL, &stopped, err);
    if (st != BF_OK) return st;
    *golden = stopped;
    for (int k = 0; chans && k < 5; k++) chans[k] += w.chan[k];
    size_t end = stopped ? w.stopped_at : p->n_steps;
    if (reach) {
        if (work) *work += tr->run_pre[end] - tr->run_pre[from];
        if (skipped) *skipped += tr->skip_pre[end] - tr->skip_pre[from];
    } else if (work) {
        *work += ck->pre_ns[end] - ck->pre_ns[from];
    }
    return BF_OK;
}
