/* Parameter-only values: run-time values computed from parameters and
 * constants alone (GPT-2's logits read its tied token table through
 * Transpose(wte), 154 MB at vocabulary 50,257). A plan computes them in
 * every batch of every pass; they are the same for every batch, so the
 * differential engine computes each once per campaign, holds it outside
 * the golden cache's budget (they are weight-sized, and the cache filled
 * with activations left the tied table's transpose out, so every trial
 * re-ran it), and neither the golden pass nor a trial runs their steps.
 *
 * A fault in the parameter one of them is moved from (Transpose, Reshape,
 * ...) changes one element of it: the trial writes that element into a
 * private view of the value's pages (base/warena.h: the kernel copies the
 * one page written) and gives the page back after the trial, instead of
 * running the whole step. Any other step reading a faulty parameter runs
 * in the trial as before, into its own buffer.
 *
 * One the campaign does not hold (past the limit, or no arena) is the same
 * in every batch too: each worker computes it once, when it is made, into
 * a copy of its own (per plan: the partial batch's may differ), within the
 * same limit, and points its plan at that copy at each batch's start;
 * before, a worker fetched it at each batch's start, re-running its steps
 * whenever the golden cache did not hold it. */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/grow.h"
#include "base/warena.h"
#include "diff/diff_impl.h"
#include "exec/step_access.h"

struct bf__pvals {
    size_t n_values;
    void **data;                 /* per value: its bytes (in the arena), NULL: not parameter-only */
    size_t *bytes;
    int *from;                   /* per value: the parameter its step moves elements of, -1: none */
    int *perm;                   /* per value with from >= 0: Transpose's permutation ([BF_MAX_DIMS]), or
                                  * perm[0] -1: the same flat index (Reshape and the like) */
    int *step;                   /* per value: the step computing it */
    int *held;                   /* the values held (data non-NULL), in value order */
    int *left;                   /* the values computed from parameters and constants alone that are not held
                                  * (over the limit, no arena): a worker fetches them at each batch's start */
    size_t n_held, n_left;
    bf__warena *arena;
    size_t total, limit;
};

void bf__pvals_free(bf__pvals *pv)
{
    if (!pv) return;
    bf__warena_free(pv->arena);
    bf__free(pv->data);
    bf__free(pv->bytes);
    bf__free(pv->from);
    bf__free(pv->perm);
    bf__free(pv->step);
    bf__free(pv->held);
    bf__free(pv->left);
    bf__free(pv);
}

/* Ops that draw on no state: a parameter-only value computed once is what
 * every pass computes. */
static int deterministic(const char *op)
{
    return strncmp(op, "Random", 6) != 0 && strcmp(op, "Bernoulli") != 0 && strcmp(op, "Multinomial") != 0 &&
           strcmp(op, "Dropout") != 0;
}

/* Input v of a step is fixed for every batch: a parameter, a constant, a
 * parameter-only value, or a value the plans folded to the same bytes. */
static int fixed_input(const bf__pvals *pv, bf_plan *const plan[2], int v, int *reads_param)
{
    const bf_model *m = plan[0]->model;
    if (v < 0) return 1;
    if (m->values[v].kind == BF__VAL_PARAM) { *reads_param = 1; return 1; }
    if (m->values[v].kind == BF__VAL_CONST) return 1;
    if (pv->data[v]) { *reads_param = 1; return 1; }
    if (plan[0]->val_step[v] != BF__VAL_NOT_RUN || !plan[0]->known[v]) return 0;
    if (!plan[1]) return 1;
    const bf_tensor *a = &plan[0]->vals[v], *b = &plan[1]->vals[v];
    size_t n = bf_tensor_nbytes(a);
    return plan[1]->known[v] && n == bf_tensor_nbytes(b) && (!n || memcmp(a->data, b->data, n) == 0);
}

/* Whether step s's output moves elements of a parameter, one to one: which
 * one (-1: none) and how (perm). */
static int moved_param(const bf_plan *p, const bf__step *s, int *perm)
{
    static const char *const same[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "bf.SqueezeIfOne"};
    const bf_model *m = p->model;
    int x = s->node->in[0];
    if (s->n_out != 1 || x < 0 || m->values[x].kind != BF__VAL_PARAM) return -1;
    for (int j = 1; j < s->n_in; j++)
        if (s->node->in[j] >= 0 && m->values[s->node->in[j]].kind == BF__VAL_PARAM) return -1;
    const char *op = s->node->op->name;
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        if (strcmp(op, same[i]) == 0) {
            perm[0] = -1;
            return m->values[x].index;
        }
    if (strcmp(op, "Transpose") != 0) return -1;
    int64_t pm[BF_MAX_DIMS];
    int np, r = p->vals[x].ndim;
    bf_error e;
    if (bf__attr_ints(s->node, "perm", pm, BF_MAX_DIMS, &np, &e) != BF_OK) return -1;
    if (np < 0) {
        for (int d = 0; d < r; d++) pm[d] = r - 1 - d;
        np = r;
    }
    if (np != r) return -1;
    for (int d = 0; d < BF_MAX_DIMS; d++) perm[d] = d < r ? (int)pm[d] : 0;
    return m->values[x].index;
}

/* Which values are parameter-only, in step order (a chain of them too),
 * while their total stays within `limit` bytes; 0 when none. */
static size_t choose(bf__pvals *pv, bf_plan *const plan[2], size_t limit)
{
    const bf_plan *p = plan[0];
    size_t total = 0, pg = bf__warena_page();
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int reads = 0, ok = deterministic(s->node->op->name) && !p->step_hit[i] && (!plan[1] || !plan[1]->step_hit[i]);
        for (int j = 0; j < s->n_in && ok; j++) ok = fixed_input(pv, plan, s->node->in[j], &reads);
        if (!ok || !reads) continue;
        size_t need = 0;
        for (int j = 0; j < s->n_out && ok; j++) {
            int v = s->node->out[j];
            if (v < 0) continue;
            size_t n = bf_tensor_nbytes(&p->vals[v]);
            ok = p->val_step[v] == (int)i && (!plan[1] || bf_tensor_nbytes(&plan[1]->vals[v]) == n);
            need += (n + pg - 1) / pg * pg + pg;
        }
        if (!ok || total + need > limit) continue;
        for (int j = 0; j < s->n_out; j++) {
            int v = s->node->out[j];
            if (v < 0) continue;
            pv->bytes[v] = bf_tensor_nbytes(&p->vals[v]);
            pv->data[v] = pv;   /* marked: placed below */
            pv->step[v] = (int)i;
            pv->from[v] = s->n_out == 1 ? moved_param(p, s, &pv->perm[(size_t)v * BF_MAX_DIMS]) : -1;
        }
        total += need;
    }
    return total;
}

/* The values held, and those left: every run-time value whose step reads
 * only parameters, constants and values of the same kind (as held values'
 * steps do) that is not held. */
static bf_status lists(bf__pvals *pv, const bf_plan *p, bf_error *err)
{
    const bf_model *m = p->model;
    unsigned char *fixed = bf__calloc(m->n_values + 1, 1);
    pv->held = bf__malloc((m->n_values + 1) * sizeof *pv->held);
    pv->left = bf__malloc((m->n_values + 1) * sizeof *pv->left);
    if (!fixed || !pv->held || !pv->left) {
        bf__free(fixed);
        return bf__dx_oom(err);
    }
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int ok = 1;
        for (int j = 0; j < s->n_in && ok; j++) {
            int x = s->node->in[j];
            ok = x < 0 || p->val_step[x] == BF__VAL_NOT_RUN || fixed[x];
        }
        for (int j = 0; j < s->n_out && ok; j++)
            if (s->node->out[j] >= 0) fixed[s->node->out[j]] = 1;
    }
    for (size_t v = 0; v < m->n_values; v++) {
        if (pv->data[v]) pv->held[pv->n_held++] = (int)v;
        else if (fixed[v]) pv->left[pv->n_left++] = (int)v;
    }
    bf__free(fixed);
    return BF_OK;
}

bf_status bf__pvals_build(bf_plan *const plan[2], size_t limit, bf__pvals **out, bf_error *err)
{
    bf_plan *p = plan[0];
    const bf_model *m = p->model;
    bf_status st = BF_OK;
    *out = NULL;
    bf__pvals *pv = bf__calloc(1, sizeof *pv);
    if (!pv) return bf__dx_oom(err);
    pv->n_values = m->n_values;
    pv->limit = limit;
    pv->data = bf__calloc(m->n_values + 1, sizeof *pv->data);
    pv->bytes = bf__calloc(m->n_values + 1, sizeof *pv->bytes);
    pv->from = bf__malloc((m->n_values + 1) * sizeof *pv->from);
    pv->step = bf__malloc((m->n_values + 1) * sizeof *pv->step);
    pv->perm = bf__calloc((m->n_values + 1) * BF_MAX_DIMS, sizeof *pv->perm);
    void **home = bf__calloc(m->n_values + 1, sizeof *home);
    if (!pv->data || !pv->bytes || !pv->from || !pv->step || !pv->perm || !home) { st = bf__dx_oom(err); goto out; }
    for (size_t v = 0; v < m->n_values; v++) pv->from[v] = pv->step[v] = -1;
    pv->total = choose(pv, plan, limit);
    /* no arena (not Linux, no memory): none held, every such value left to
     * the workers' fetch (bf__pv_batch), as the steps ran before */
    if (pv->total && !(pv->arena = bf__warena_create(pv->total))) {
        for (size_t v = 0; v < m->n_values; v++) pv->data[v] = NULL, pv->from[v] = pv->step[v] = -1;
        pv->total = 0;
    }
    for (size_t v = 0; pv->arena && v < m->n_values; v++) {
        home[v] = p->vals[v].data;
        if (!pv->data[v]) continue;
        p->vals[v].data = pv->data[v] = bf__warena_take(pv->arena, pv->bytes[v] ? pv->bytes[v] : 1);
        bf__pages_written(pv->data[v], pv->bytes[v], BF__WRITE_NOW);   /* written whole just below */
    }
    /* computed in step order by plan 0's own steps: the bytes its pass
     * computes (no fault is written while a campaign is set up) */
    for (size_t i = 0; pv->arena && i < p->n_steps && st == BF_OK; i++) {
        const bf__step *s = &p->steps[i];
        int mine = 0;
        for (int j = 0; j < s->n_out; j++) mine |= s->node->out[j] >= 0 && pv->step[s->node->out[j]] == (int)i;
        if (mine) st = bf__plan_run_step(p, i, err);
    }
    for (size_t v = 0; pv->arena && v < m->n_values; v++) p->vals[v].data = home[v];
    if (st == BF_OK && pv->arena) bf__warena_seal(pv->arena);
    if (st == BF_OK) st = lists(pv, p, err);
out:
    bf__free(home);
    if (st == BF_OK) {
        *out = pv;
        return BF_OK;
    }
    bf__pvals_free(pv);
    return st;
}

const void *bf__pvals_data(const bf__pvals *pv, int v) { return pv && v >= 0 ? pv->data[v] : NULL; }
size_t bf__pvals_bytes(const bf__pvals *pv) { return pv ? pv->total : 0; }
size_t bf__pvals_limit(const bf__pvals *pv) { return pv ? pv->limit : 0; }
const int *bf__pvals_left(const bf__pvals *pv, size_t *n)
{
    *n = pv ? pv->n_left : 0;
    return pv ? pv->left : NULL;
}
int bf__pvals_step(const bf__pvals *pv, size_t i, const bf_plan *p)
{
    if (!pv) return 0;
    const bf__step *s = &p->steps[i];
    for (int j = 0; j < s->n_out; j++)
        if (s->node->out[j] >= 0 && pv->step[s->node->out[j]] == (int)i) return 1;
    return 0;
}

/* --- a trial */

/* Element `index` of parameter q moved into value v: its flat index there. */
static int64_t moved_index(const bf__pvals *pv, const bf_plan *p, int v, int64_t index)
{
    const int *perm = &pv->perm[(size_t)v * BF_MAX_DIMS];
    if (perm[0] < 0) return index;
    const bf_tensor *x = &p->vals[p->model->param_vals[pv->from[v]]], *y = &p->vals[v];
    int64_t at[BF_MAX_DIMS], r = x->ndim, o = 0;
    for (int64_t d = r - 1; d >= 0; d--) {
        at[d] = index % x->dims[d];
        index /= x->dims[d];
    }
    for (int64_t d = 0; d < r; d++) o = o * y->dims[d] + at[perm[d]];
    return o;
}

bf_status bf__pv_trial_begin(bf__dx *dx, const bf__dx_weight *w, size_t n_w, int *last_entry, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf__pvals *pv = sh->pv;
    dx->pv.n_w = 0;
    if (!pv) return BF_OK;
    bf_plan *p = dx->plan[0];
    for (size_t h = 0; h < pv->n_held; h++) {
        int v = pv->held[h];
        if (pv->from[v] < 0 || !dx->pfaults[pv->from[v]]) continue;
        if (!dx->pv.view[v] && !(dx->pv.view[v] = bf__wview_create(pv->arena, pv->data[v], pv->bytes[v]))) continue;
        /* its step reads the faulty parameter: not run, the view is the value */
        dx->param_hit[pv->step[v]] = 0;
        dx->pv.hit[v] = 1;
        if (sh->last_use[v] > *last_entry) *last_entry = sh->last_use[v];
    }
    size_t es;
    for (size_t k = 0; k < n_w; k++) {
        int pq = sh->m->param_vals[w[k].param];
        es = bf_dtype_size(p->vals[pq].dtype);
        for (size_t h = 0; h < pv->n_held; h++) {
            int v = pv->held[h];
            if (!dx->pv.hit[v] || pv->from[v] != (int)w[k].param) continue;
            if (!bf__grow(&dx->pv.w, &dx->pv.w_cap, dx->pv.n_w + 1, sizeof *dx->pv.w, 16)) return bf__dx_oom(err);
            /* the faulty element's bits, as the plan stores the parameter */
            int64_t j = moved_index(pv, p, v, w[k].index);
            memcpy((char *)dx->pv.view[v] + (size_t)j * es, (const char *)p->vals[pq].data + (size_t)w[k].index * es, es);
            dx->pv.w[dx->pv.n_w++] = (bf__pv_write){.value = v, .at = (size_t)j * es, .size = es};
        }
    }
    return BF_OK;
}

void bf__pv_golden(bf__dx *dx)
{
    const bf__pvals *pv = dx->sh->pv;
    for (int t = 0; pv && t < 2; t++)
        for (size_t h = 0; dx->plan[t] && h < pv->n_held; h++) dx->plan[t]->vals[pv->held[h]].data = pv->data[pv->held[h]];
}

bf_status bf__pv_batch(bf__dx *dx, bf_plan *p, int64_t b, bf_error *err)
{
    const bf__pvals *pv = dx->sh->pv;
    for (size_t h = 0; pv && h < pv->n_held; h++) {
        int v = pv->held[h];
        p->vals[v].data = dx->pv.hit[v] ? dx->pv.view[v] : pv->data[v];
        if (dx->pv.hit[v]) dx->state[v] = DIRTY;
    }
    /* a left one whose step reads the trial's faulty parameter runs at its
     * step, as before; one the worker copied is read there (golden even
     * when a step upstream of it reads the faulty parameter: that step runs
     * at its place, and the copy's readers after it) */
    void **copy = dx->pv.copy[p == dx->plan[1]];
    for (size_t k = 0; pv && k < pv->n_left; k++) {
        int v = pv->left[k], s = p->val_step[v];
        if (s >= 0 && dx->param_hit[s]) continue;
        if (copy && copy[v]) {
            p->vals[v].data = copy[v];   /* read only: a step that writes v owns its slot first */
            dx->state[v] = GOLDEN;
            continue;
        }
        bf_status st = bf__dx_fetch(dx, p, b, v, err);
        if (st != BF_OK) return st;
    }
    return BF_OK;
}

void bf__pv_trial_end(bf__dx *dx)
{
    const bf__pvals *pv = dx->sh->pv;
    if (!pv) return;
    size_t pg = bf__warena_page();
    /* the golden bits back, then the written pages given back to the
     * arena's (a view's other pages stay mapped for the next trial) */
    for (size_t k = 0; k < dx->pv.n_w; k++) {
        const bf__pv_write *x = &dx->pv.w[k];
        memcpy((char *)dx->pv.view[x->value] + x->at, (const char *)pv->data[x->value] + x->at, x->size);
    }
    for (size_t k = 0; k < dx->pv.n_w; k++) {
        const bf__pv_write *x = &dx->pv.w[k];
        size_t at = x->at / pg * pg, end = x->at + x->size;
        bf__wview_drop((char *)dx->pv.view[x->value] + at, (end - at + pg - 1) / pg * pg);
    }
    dx->pv.n_w = 0;
    for (size_t h = 0; h < pv->n_held; h++) dx->pv.hit[pv->held[h]] = 0;
}

/* --- a worker's own copies of the values left */

/* Whether plan p's value v, left, may be computed once into the worker's
 * copy t: its step's one output, deterministic, not dynamic (that step
 * sizes v when it runs), not one the cache serves (read there in place,
 * at no cost) nor the graph's output, and each run-time input held or
 * copied before it (in step order). */
enum { LEFT = 1, CHOSEN = 2 };   /* copies()'s marks, per value */

static int copyable(const bf__dx *dx, const unsigned char *mark, const bf_plan *p, int v)
{
    const bf__dx_shared *sh = dx->sh;
    int s = p->val_step[v];
    if (s < 0 || p->dyn_val[v] || v == sh->out_val || bf__gcache_has(sh->gc, v)) return 0;
    const bf__step *st = &p->steps[s];
    if (st->n_out != 1 || !deterministic(st->node->op->name)) return 0;
    for (int j = 0; j < st->n_in; j++) {
        int x = st->node->in[j];
        if (x >= 0 && bf__runtime(p, x) && !sh->pv->data[x] && mark[x] != CHOSEN) return 0;
    }
    return 1;
}

/* Plan t's copies: chosen in step order while the worker's copies stay
 * within the campaign's limit, then computed by the plan's own steps from
 * the golden parameters (no fault is written while a worker is made),
 * and the plan pointed back at its own slots. */
static bf_status copies(bf__dx *dx, int t, bf_error *err)
{
    const bf__dx_shared *sh = dx->sh;
    const bf__pvals *pv = sh->pv;
    bf_plan *p = dx->plan[t];
    size_t nv = sh->m->n_values, total = 0;
    unsigned char *mark = bf__calloc(nv + 1, 1);
    size_t *off = bf__malloc((nv + 1) * sizeof *off);
    if (!mark || !off || !(dx->pv.copy[t] = bf__calloc(nv + 1, sizeof *dx->pv.copy[t]))) {
        bf__free(mark), bf__free(off);
        return bf__dx_oom(err);
    }
    for (size_t k = 0; k < pv->n_left; k++) mark[pv->left[k]] = LEFT;
    for (size_t i = 0; i < p->n_steps; i++) {
        int v = p->steps[i].n_out == 1 ? p->steps[i].node->out[0] : -1;
        if (v < 0 || mark[v] != LEFT || !copyable(dx, mark, p, v)) continue;
        size_t need = (bf_tensor_nbytes(&p->vals[v]) + 63) / 64 * 64;
        if (dx->pv.copy_bytes + total + need > pv->limit) continue;
        off[v] = total;
        total += need;
        mark[v] = CHOSEN;   /* placed below */
    }
    bf_status st = BF_OK;
    if (total && !(dx->pv.mem[t] = bf__malloc(total + 64))) st = bf__dx_oom(err);
    char *base = dx->pv.mem[t] ? (char *)(((uintptr_t)dx->pv.mem[t] + 63) & ~(uintptr_t)63) : NULL;
    for (size_t i = 0; i < p->n_steps && st == BF_OK && base; i++) {
        int v = p->steps[i].n_out == 1 ? p->steps[i].node->out[0] : -1;
        if (v < 0 || mark[v] != CHOSEN) continue;
        p->vals[v].data = dx->pv.copy[t][v] = base + off[v];   /* its copied inputs point at theirs already */
        st = bf__plan_run_step(p, i, err);
        dx->pv.once++;
    }
    for (size_t v = 0; v < nv; v++)
        if (dx->pv.copy[t][v]) {
            p->vals[v].data = dx->arena[t][v];
            if (st != BF_OK || !base) dx->pv.copy[t][v] = NULL;
        }
    if (st == BF_OK) dx->pv.copy_bytes += total;
    bf__free(mark), bf__free(off);
    return st;
}

bf_status bf__pv_init(bf__dx *dx, bf_error *err)
{
    size_t n = dx->sh->m->n_values + 1;
    dx->pv.view = bf__calloc(n, sizeof *dx->pv.view);
    dx->pv.hit = bf__calloc(n, 1);
    if (!dx->pv.view || !dx->pv.hit) return bf__dx_oom(err);
    bf_status st = BF_OK;
    for (int t = 0; t < 2 && st == BF_OK && dx->sh->pv && dx->sh->pv->n_left; t++)
        if (dx->plan[t]) st = copies(dx, t, err);
    return st;
}

void bf__pv_free(bf__dx *dx)
{
    const bf__pvals *pv = dx->sh->pv;
    for (size_t h = 0; pv && dx->pv.view && h < pv->n_held; h++)
        bf__wview_free(dx->pv.view[pv->held[h]], pv->bytes[pv->held[h]]);
    bf__free(dx->pv.view);
    bf__free(dx->pv.hit);
    bf__free(dx->pv.w);
    for (int t = 0; t < 2; t++) {
        bf__free(dx->pv.copy[t]);
        bf__free(dx->pv.mem[t]);
    }
}
