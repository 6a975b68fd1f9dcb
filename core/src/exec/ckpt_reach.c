/* What a trial's faults can reach in a one-sample graph's pass, and the
 * golden values kept so that a trial need not run what they cannot
 * (ckpt.h, ckpt_impl.h; docs/ENGINE.md "One image per call").
 *
 * A step none of whose inputs depends on a fault (a faulted parameter, a
 * faulted value, or a value such a step computed) computes its golden
 * values. From the restored cut on, a trial runs the steps the faults
 * reach, and, walking back from them and from the graph outputs, the steps
 * computing what those read, unless the store holds that value: then the
 * step is skipped and the value is put back where and when the step would
 * write it. Every value a step that runs reads is then what the full
 * faulty run gives it: the run writes a subset of the full run's writes, at
 * the same points and with the same bytes (the arena's sharing of bytes
 * between values whose lives do not overlap is the full run's too).
 *
 * The store holds, of the values a step computes, those read by a step a
 * fault landing later reaches (another feature level's head, say): found
 * by walking each step where faults land, and kept when the trials save
 * more than recording them costs the golden pass (ck->byte_s, ckpt.c's
 * rule) and they fit the budget left by the cuts. */
#include <string.h>

#include "base/alloc.h"
#include "exec/ckpt_impl.h"

/* what putting a stored byte back costs a trial (a copy from memory not in
 * cache): an estimate, it only weighs the store's saving */
#define FILL_SECONDS 0.3e-9

bf_status bf__ckpt_graph(bf__ckpt *ck, const bf_plan *p)
{
    const bf_model *m = p->model;
    size_t n = p->n_steps, ni = 0, no = 0;
    for (size_t i = 0; i < n; i++) ni += (size_t)p->steps[i].node->n_in, no += (size_t)p->steps[i].node->n_out;
    ck->in_first = bf__malloc((n + 1) * sizeof *ck->in_first);
    ck->in_val = bf__malloc((ni + 1) * sizeof *ck->in_val);
    ck->out_first = bf__malloc((n + 1) * sizeof *ck->out_first);
    ck->out_val = bf__malloc((no + 1) * sizeof *ck->out_val);
    ck->val_param = bf__malloc((m->n_values + 1) * sizeof *ck->val_param);
    ck->store_of = bf__malloc((m->n_values + 1) * sizeof *ck->store_of);
    ck->dyn = bf__calloc(n + 1, 1);
    ck->post = bf__calloc(n + 1, 1);
    ck->st_first = bf__calloc(n + 1, sizeof *ck->st_first);
    ck->outputs = bf__malloc((m->n_outputs + 1) * sizeof *ck->outputs);
    if (!ck->in_first || !ck->in_val || !ck->out_first || !ck->out_val || !ck->val_param || !ck->store_of ||
        !ck->dyn || !ck->post || !ck->st_first || !ck->outputs)
        return BF_ENOMEM;
    ni = no = 0;
    for (size_t i = 0; i < n; i++) {
        const bf__node *nd = p->steps[i].node;
        ck->in_first[i] = (int)ni, ck->out_first[i] = (int)no;
        for (int j = 0; j < nd->n_in; j++)
            if (nd->in[j] >= 0) ck->in_val[ni++] = nd->in[j];
        for (int j = 0; j < nd->n_out; j++)
            if (nd->out[j] >= 0) ck->out_val[no++] = nd->out[j];
        ck->dyn[i] = p->steps[i].dyn != 0;
    }
    ck->in_first[n] = (int)ni, ck->out_first[n] = (int)no;
    for (size_t v = 0; v < m->n_values; v++) {
        ck->val_param[v] = m->values[v].kind == BF__VAL_PARAM ? (int)m->values[v].index : -1;
        ck->store_of[v] = -1;
    }
    ck->n_outputs = m->n_outputs;
    for (size_t k = 0; k < m->n_outputs; k++) ck->outputs[k] = m->output_vals[k];
    return BF_OK;
}

bf_status bf__ckpt_trial_alloc(const bf__ckpt *ck, bf__ckpt_trial *tr)
{
    size_t n = ck->n_steps;
    memset(tr, 0, sizeof *tr);
    tr->origin = bf__calloc(n + 1, 1);
    tr->taint = bf__calloc(ck->n_values + 1, 1);
    tr->step_taint = bf__calloc(n + 1, 1);
    tr->req = bf__calloc(n + 1, 1);
    tr->act = bf__calloc(n + 1, 1);
    tr->run_pre = bf__calloc(n + 1, sizeof *tr->run_pre);
    tr->skip_pre = bf__calloc(n + 1, sizeof *tr->skip_pre);
    tr->read = bf__calloc(ck->n_values + 1, 1);
    tr->tail_in = bf__calloc((size_t)ck->tail.n_in + 1, 1);
    tr->tail_cols = ck->tail.cols;
    tr->tail_rows_cap = ck->tail.map_rows;
    tr->tail_rows = bf__malloc(((size_t)ck->tail.map_rows + 1) * sizeof *tr->tail_rows);
    tr->tail_map = -1;
    bf__ckpt_trial_clear(tr);
    if (!tr->origin || !tr->taint || !tr->step_taint || !tr->req || !tr->act || !tr->run_pre || !tr->skip_pre ||
        !tr->read || !tr->tail_in || !tr->tail_rows)
        return BF_ENOMEM;
    return BF_OK;
}

void bf__ckpt_trial_release(bf__ckpt_trial *tr)
{
    bf__free(tr->origin);
    bf__free(tr->taint);
    bf__free(tr->step_taint);
    bf__free(tr->req);
    bf__free(tr->act);
    bf__free(tr->run_pre);
    bf__free(tr->skip_pre);
    bf__free(tr->read);
    bf__free(tr->tail_in);
    bf__free(tr->tail_rows);
}

bf_status bf__ckpt_trial_new(const bf__ckpt *ck, bf__ckpt_trial **out, bf_error *err)
{
    *out = NULL;
    bf__ckpt_trial *tr = bf__malloc(sizeof *tr);
    if (!tr || bf__ckpt_trial_alloc(ck, tr) != BF_OK) {
        if (tr) bf__ckpt_trial_release(tr);
        bf__free(tr);
        return bf_error_set(err, BF_ENOMEM, "out of memory for a trial's reach");
    }
    *out = tr;
    return BF_OK;
}

void bf__ckpt_trial_free(bf__ckpt_trial *tr)
{
    if (!tr) return;
    bf__ckpt_trial_release(tr);
    bf__free(tr);
}

void bf__ckpt_trial_clear(bf__ckpt_trial *tr)
{
    tr->lo = tr->hi = -1;
    tr->all = 1;
    tr->from = -1;
    tr->chan_step = -1;
    tr->tail = 0;
}

void bf__ckpt_trial_begin(const bf__ckpt *ck, bf__ckpt_trial *tr)
{
    bf__ckpt_trial_clear(tr);
    tr->all = 0;
    memset(tr->origin, 0, ck->n_steps);
    memset(tr->taint, 0, ck->n_values);
}

/* the window of every fault: from the first step any touches to the last */
static void widen(bf__ckpt_trial *tr, int a, int b)
{
    if (tr->lo < 0 || a < tr->lo) tr->lo = a;
    if (b > tr->hi) tr->hi = b;
}

void bf__ckpt_trial_param(const bf__ckpt *ck, bf__ckpt_trial *tr, size_t q)
{
    int a, b;
    bf__ckpt_param_steps(ck, q, &a, &b);
    widen(tr, a, b);
    if (q >= ck->n_params || ck->param_lo[q] > ck->param_hi[q]) {   /* read only where this cannot follow */
        tr->all = 1;
        return;
    }
    for (size_t v = 0; v < ck->n_values; v++)
        if (ck->val_param[v] == (int)q) tr->taint[v] = 1;
}

void bf__ckpt_trial_value(const bf__ckpt *ck, bf__ckpt_trial *tr, int64_t v)
{
    int a, b;
    bf__ckpt_value_step(ck, v, &a, &b);
    widen(tr, a, b);
    int at = ck->val_step[v];
    if (at < 0) tr->all = 1;   /* a graph input, or a value no step computes */
    else tr->origin[at] = 1;
    tr->chan_step = -2;
}

/* the values a step reads that another computed, from step f on */
static void need(const bf__ckpt *ck, bf__ckpt_trial *tr, int v, int f, int min_store)
{
    int at = ck->val_step[v];
    if (at < f || tr->req[at]) return;   /* restored at the cut (or not computed by a step), or run */
    int j = ck->store_of[v];
    if (!tr->taint[v] && j >= 0 && at > min_store) {
        tr->act[at] |= BF__STEP_FILL;
        if (tr->used) tr->used[v] = 1;
    } else {
        tr->req[at] = 1;
    }
}

void bf__ckpt_reach(const bf__ckpt *ck, bf__ckpt_trial *tr, int min_store)
{
    size_t n = ck->n_steps;
    int f = tr->from >= 0 ? ck->cut[tr->from] : 0;
    for (size_t i = 0; i < n; i++) {   /* what the faults reach */
        int t = tr->origin[i];
        for (int j = ck->in_first[i]; !t && j < ck->in_first[i + 1]; j++) t = tr->taint[ck->in_val[j]];
        tr->step_taint[i] = (unsigned char)t;
        for (int j = ck->out_first[i]; t && j < ck->out_first[i + 1]; j++) tr->taint[ck->out_val[j]] = 1;
    }
    for (size_t i = 0; i < n; i++) tr->req[i] = (int)i >= f && tr->step_taint[i], tr->act[i] = 0;
    for (size_t k = 0; k < ck->n_outputs; k++) need(ck, tr, ck->outputs[k], f, min_store);
    for (size_t i = n; i-- > (size_t)f;) {   /* what those read, back to the cut */
        if (!tr->req[i]) continue;
        for (int j = ck->in_first[i]; j < ck->in_first[i + 1]; j++) need(ck, tr, ck->in_val[j], f, min_store);
    }
    tr->run_pre[0] = tr->skip_pre[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (tr->req[i] || (int)i < f) tr->act[i] = 0;
        else tr->act[i] |= BF__STEP_SKIP;
        int skip = tr->act[i] & BF__STEP_SKIP;
        tr->run_pre[i + 1] = tr->run_pre[i] + (skip ? 0 : ck->pre_ns[i + 1] - ck->pre_ns[i]);
        tr->skip_pre[i + 1] = tr->skip_pre[i] + (skip ? 1 : 0);
    }
    /* The cut's values the run reads: those a step it runs takes as input
     * (a step run on one channel, or following one, reads its inputs as
     * the whole step would), and the graph outputs. The others are not
     * restored: no step that runs reads them, and their bytes, shared with
     * other values, are written before those are read. A class-head fault
     * of SSDlite320 resumes at a cut holding the backbone's values that its
     * head, its regression twin and the next stage read, and runs the one
     * head's Convs alone. */
    memset(tr->read, 0, ck->n_values);
    for (size_t i = (size_t)f; i < n; i++)
        if (!(tr->act[i] & BF__STEP_SKIP))
            for (int j = ck->in_first[i]; j < ck->in_first[i + 1]; j++) tr->read[ck->in_val[j]] = 1;
    for (size_t k = 0; k < ck->n_outputs; k++) tr->read[ck->outputs[k]] = 1;
}

/* the outputs of step k, as the store would hold them */
static void mark_outputs(const bf__ckpt *ck, int k, unsigned char *used)
{
    for (int j = ck->out_first[k]; k >= 0 && (size_t)k < ck->n_steps && j < ck->out_first[k + 1]; j++)
        used[ck->out_val[j]] = 1;
}

/* choosing the store (bf__ckpt_store_drawn): what a trial run on one
 * channel puts back (ckpt_chan.c, golden_back): its chain's last output,
 * and each following step's */
static void mark_chan(const bf__ckpt *ck, bf__ckpt_trial *tr)
{
    int i = tr->chan_step;
    if (i < 0) return;
    mark_outputs(ck, ck->chan_chain[3 * i], tr->used);
    for (int f = ck->chan_next[i]; f > 0; f = ck->chan_next[f]) mark_outputs(ck, ck->chan_chain[3 * f], tr->used);
}

/* what a trial's run costs on one sample, as choose_reach weighs it: the
 * golden time of the steps it runs from its cut, and the stored bytes it
 * puts back (of values the store still holds) */
static double trial_seconds(const bf__ckpt *ck, const bf__ckpt_trial *tr)
{
    size_t n = ck->n_steps;
    int f = tr->from >= 0 ? ck->cut[tr->from] : 0;
    double s = (double)(tr->run_pre[n] - tr->run_pre[f]) * 1e-9;
    for (size_t i = (size_t)f; i < n; i++)
        if (tr->act[i] & BF__STEP_FILL)
            for (int j = ck->out_first[i]; j < ck->out_first[i + 1]; j++) {
                int k = ck->store_of[ck->out_val[j]];
                if (k >= 0) s += FILL_SECONDS * (double)ck->st_bytes[k];
            }
    return s;
}

void bf__ckpt_trial_end(const bf__ckpt *ck, bf__ckpt_trial *tr)
{
    if (tr->lo < 0) {   /* no fault: from step 0, in full */
        tr->all = 1;
        return;
    }
    tr->from = ck->n_steps ? ck->cut_of[(size_t)tr->lo < ck->n_steps ? (size_t)tr->lo : ck->n_steps - 1] : -1;
    if (tr->from < 0) tr->all = 1;
    if (!tr->all) bf__ckpt_reach(ck, tr, -1);
    bf__ckpt_tail_trial(ck, tr);
    bf__ckpt_chan_mark(ck, tr);
    if (tr->used) mark_chan(ck, tr);
    if (tr->used && tr->sig) {
        uint64_t t = (uint64_t)++tr->seen;
        for (size_t v = 0; v < ck->n_values; v++)
            if (tr->used[v] == 1) tr->sig[v] = (tr->sig[v] ^ t) * UINT64_C(0x100000001b3), tr->used[v] = 2;
    }
    if (tr->price && !tr->all) tr->cost += trial_seconds(ck, tr);
}

size_t bf__ckpt_num_stored(const bf__ckpt *ck) { return ck ? ck->n_store : 0; }
uint64_t bf__ckpt_store_bytes(const bf__ckpt *ck)
{
    uint64_t b = 0;
    for (size_t j = 0; ck && j < ck->n_store; j++) b += (ck->st_bytes[j] + 63) & ~(size_t)63;
    return ck ? b * (uint64_t)ck->slots : 0;
}

/* a value the store may hold: computed by a step of fixed shapes into the
 * arena, and not a Conv's output that its activation's fused epilogue
 * computes instead, nor a residual Add's fused in between (never written
 * then) */
static size_t storable(const bf__ckpt *ck, const bf_plan *p, int v)
{
    int at = ck->val_step[v];
    if (at < 0 || ck->dyn[at] || p->fuse_to[at] > at || p->fuse_mid[at] || !bf__ckpt_in_arena(p, p->vals[v].data))
        return 0;
    return bf_tensor_nbytes(&p->vals[v]);
}

/* one step's faults alone: the steps a trial with them runs, storing only
 * values computed after min_store */
static void reach_of(const bf__ckpt *ck, bf__ckpt_trial *tr, size_t o, int min_store)
{
    memset(tr->origin, 0, ck->n_steps);
    memset(tr->taint, 0, ck->n_values);
    tr->origin[o] = 1;
    tr->lo = tr->hi = (int)o;
    tr->from = ck->cut_of[o];
    tr->all = 0;
    bf__ckpt_reach(ck, tr, min_store);
}

static void lay_out_store(bf__ckpt *ck, const bf_plan *p, const unsigned char *used, size_t *off)
{
    size_t k = 0;
    for (size_t i = 0; i < ck->n_steps; i++) {
        ck->st_first[i] = (int)k;
        for (int j = ck->out_first[i]; j < ck->out_first[i + 1]; j++) {
            int v = ck->out_val[j];
            if (!used[v]) continue;
            ck->st_val[k] = v;
            ck->st_bytes[k] = bf_tensor_nbytes(&p->vals[v]);
            ck->st_off[k] = *off;
            *off += (ck->st_bytes[k] + 63) & ~(size_t)63;
            ck->store_of[v] = (int)k;
            ck->post[i] = BF__STEP_POST;
            k++;
        }
    }
    ck->st_first[ck->n_steps] = (int)k;
    ck->n_store = k;
}

/* The store's tables for count values (any earlier ones freed). */
static bf_status store_alloc(bf__ckpt *ck, size_t count)
{
    bf__free(ck->st_val);
    bf__free(ck->st_off);
    bf__free(ck->st_bytes);
    ck->st_val = bf__malloc(count * sizeof *ck->st_val);
    ck->st_off = bf__malloc(count * sizeof *ck->st_off);
    ck->st_bytes = bf__malloc(count * sizeof *ck->st_bytes);
    return ck->st_val && ck->st_off && ck->st_bytes ? BF_OK : BF_ENOMEM;
}

static bf_status choose_reach(bf__ckpt *ck, const bf_plan *p, const double *mass, double mtotal, uint64_t room,
                              int64_t trials, size_t *off)
{
    size_t n = ck->n_steps, nv = ck->n_values, count = 0;
    bf__ckpt_trial tr;
    bf_status st = bf__ckpt_trial_alloc(ck, &tr);
    unsigned char *used = bf__calloc(nv + 1, 1);
    if (!used) st = BF_ENOMEM;
    if (st != BF_OK) goto out;
    for (size_t v = 0; v < nv; v++) ck->store_of[v] = storable(ck, p, (int)v) ? 0 : -1;
    /* the values a fault's trial would read from steps after its own that
     * it does not reach (so may skip), over every step where faults land */
    tr.used = used;
    for (size_t o = 0; o < n && mtotal > 0; o++)
        if (mass[o] > 0 && ck->cut_of[o] >= 0) reach_of(ck, &tr, o, (int)o);
    uint64_t bytes = 0;
    for (size_t v = 0; v < nv; v++) {
        ck->store_of[v] = -1;
        if (used[v]) bytes += (bf_tensor_nbytes(&p->vals[v]) + 63) & ~(size_t)63, count++;
    }
    if (count == 0 || bytes * (uint64_t)ck->samples > room) goto out;
    if ((st = store_alloc(ck, count)) != BF_OK) goto out;
    size_t end = *off;
    lay_out_store(ck, p, used, &end);
    /* what it saves each trial on each image, against what recording costs */
    double gain = 0, run = 0, total = (double)ck->pre_ns[n] * 1e-9;
    tr.used = NULL;
    for (size_t o = 0; o < n && mtotal > 0; o++) {
        if (!(mass[o] > 0) || ck->cut_of[o] < 0) continue;
        reach_of(ck, &tr, o, -1);
        int f = ck->cut[ck->cut_of[o]];
        double with = (double)(tr.run_pre[n] - tr.run_pre[f]) * 1e-9;
        for (size_t i = (size_t)f; i < n; i++)
            if (tr.act[i] & BF__STEP_FILL)
                for (int j = ck->st_first[i]; j < ck->st_first[i + 1]; j++) with += FILL_SECONDS * (double)ck->st_bytes[j];
        gain += mass[o] / mtotal * ((double)(ck->pre_ns[n] - ck->pre_ns[f]) * 1e-9 - with);
        run += mass[o] / mtotal * with;
    }
    if (gain <= 0 || (trials > 0 && gain * (double)trials < ck->byte_s * (double)bytes)) {
        for (size_t v = 0; v < nv; v++) ck->store_of[v] = -1;
        memset(ck->post, 0, n);
        memset(ck->st_first, 0, (n + 1) * sizeof *ck->st_first);
        ck->n_store = 0;
        goto out;
    }
    *off = end;
    /* faults landing before every cut run in full: their share stays unsaved */
    double cut_mass = 0;
    for (size_t o = 0; o < n; o++)
        if (mass[o] > 0 && ck->cut_of[o] >= 0) cut_mass += mass[o] / mtotal;
    if (total > 0) ck->saved = cut_mass - run / total;
out:
    bf__ckpt_trial_release(&tr);
    bf__free(used);
    return st;
}

/* The store: the values trials that skip their producers read (choose_reach),
 * then the outputs of the channel-local Convs (ckpt_chan.c) in the room
 * left, laid out together by producing step. */
bf_status bf__ckpt_choose_store(bf__ckpt *ck, const bf_plan *p, const double *mass, double mtotal,
                                uint64_t room, int64_t trials, size_t *off)
{
    size_t off0 = *off, nv = ck->n_values, count = 0;
    bf_status st = choose_reach(ck, p, mass, mtotal, room, trials, off);
    unsigned char *used = st == BF_OK ? bf__calloc(nv + 1, 1) : NULL;
    if (st == BF_OK && !used) st = BF_ENOMEM;
    if (st != BF_OK) goto out;
    for (size_t v = 0; v < nv; v++) used[v] = ck->store_of[v] >= 0;
    uint64_t kept = (uint64_t)(*off - off0) * (uint64_t)ck->samples;
    if ((st = bf__ckpt_choose_chan(ck, p, mass, mtotal, room > kept ? room - kept : 0, trials, used, storable)) != BF_OK)
        goto out;
    for (size_t v = 0; v < nv; v++) count += used[v] && ck->store_of[v] < 0;
    if (count == 0) goto out;   /* no Conv chosen: the store as choose_reach left it */
    count += ck->n_store;
    if ((st = store_alloc(ck, count)) != BF_OK) goto out;
    for (size_t v = 0; v < nv; v++) ck->store_of[v] = -1;
    memset(ck->post, 0, ck->n_steps);
    *off = off0;
    lay_out_store(ck, p, used, off);
out:
    bf__free(used);
    return st;
}

/* The output a chain from step i puts back (golden_back's), stored or not */
static int chain_kept(const bf__ckpt *ck, int i)
{
    int k = ck->chan_chain[3 * i];
    if (k < 0 || (size_t)k >= ck->n_steps || ck->out_first[k] == ck->out_first[k + 1]) return 0;
    return ck->store_of[ck->out_val[ck->out_first[k]]] >= 0;
}

/* Pricing the store value by value against the drawn trials (price_store):
 * at most PRICE_GROUPS groups (the largest by bytes) are tried, and only
 * while the trials' reaches to walk, trials x steps x (groups + 2), stay
 * within PRICE_WORK (a campaign of many trials then keeps what the
 * mass-weighted choice kept: with many trials, most stored values pay). */
#define PRICE_GROUPS 64
#define PRICE_WORK (INT64_C(1) << 24)

/* the store again, from the values store_of still holds, after the cuts' values */
static void relay_store(bf__ckpt *ck, const bf_plan *p, unsigned char *used)
{
    size_t nl = ck->lv_first[ck->n_cuts], off = nl ? ck->lv_off[nl - 1] + ((ck->lv_bytes[nl - 1] + 63) & ~(size_t)63) : 0;
    for (size_t v = 0; v < ck->n_values; v++) {
        used[v] = ck->store_of[v] >= 0;
        ck->store_of[v] = -1;
    }
    memset(ck->post, 0, ck->n_steps);
    lay_out_store(ck, p, used, &off);
    ck->sample_bytes = off;
}

/* one run of the drawn trials' reaches with the store as store_of has it:
 * the sum of their runs' golden seconds on one sample (trial_seconds) */
static bf_status drawn_cost(const bf__ckpt *ck, bf__ckpt_trial *tr, bf__ckpt_drawn drawn, void *user, double *cost,
                            bf_error *err)
{
    tr->price = 1;
    tr->cost = 0;
    bf_status st = drawn(user, ck, tr, err);
    *cost = tr->cost;
    return st;
}

/* The store choose_reach kept is all or nothing, weighed by where faults
 * may land; with the trials drawn, each value is worth what those trials
 * save by putting it back. Values put back by the same trials form a
 * group (sig); a group goes when recording it (byte_s a byte, every
 * sample) costs more than the trials' runs grow without it (every
 * sample: the steps that computed it run again, and what they read). On
 * SSDlite320's 20 trials, one box-head fault put back 180 per-class
 * score slices, 2.3 MB an image, 37 MiB of the golden pass's fresh pages
 * to save that one trial about 0.3 ms an image. A Conv's channel-local
 * outputs stay (ckpt_chan.c priced them). The groups are tried one at a
 * time against the whole store; those that pay go together if that pays
 * more than the best alone. Without memory to price, the store as it is. */
static bf_status price_store(bf__ckpt *ck, const bf_plan *p, bf__ckpt_drawn drawn, void *user, const uint64_t *sig,
                             double base, int64_t seen, bf_error *err)
{
    size_t nv = ck->n_values, n = ck->n_steps, ng = 0;
    bf__ckpt_trial tr;
    bf_status st = bf__ckpt_trial_alloc(ck, &tr);
    uint64_t *gbytes = bf__calloc(nv + 1, sizeof *gbytes);
    unsigned char *used = bf__calloc(nv + 1, 1), *fixed = bf__calloc(nv + 1, 1);
    int *grp = bf__malloc((nv + 1) * sizeof *grp), *was = bf__malloc((nv + 1) * sizeof *was);
    double *gain = bf__calloc(nv + 1, sizeof *gain);
    if (st != BF_OK || !gbytes || !used || !fixed || !grp || !was || !gain) {
        st = BF_OK;
        goto out;
    }
    for (size_t i = 0; ck->chan_m && i < n; i++) {   /* the channel-local Convs' outputs (mark_chan's) */
        if (ck->chan_m[i] <= 0) continue;
        mark_outputs(ck, ck->chan_chain[3 * i], fixed);
        for (int f = ck->chan_next[i]; f > 0; f = ck->chan_next[f]) mark_outputs(ck, ck->chan_chain[3 * f], fixed);
    }
    double cost;
    /* the groups, largest first: grp[v] its group (-1: not priced) */
    for (size_t v = 0; v < nv; v++) {
        was[v] = ck->store_of[v];
        grp[v] = -1;
        if (was[v] < 0 || fixed[v] || !sig[v]) continue;
        for (size_t u = 0; u < v && grp[v] < 0; u++)
            if (grp[u] >= 0 && sig[u] == sig[v]) grp[v] = grp[u];
        if (grp[v] < 0) grp[v] = (int)ng++;
        gbytes[grp[v]] += (ck->st_bytes[was[v]] + 63) & ~(size_t)63;
    }
    if (ng == 0 || (double)seen * (double)n * (double)((ng < PRICE_GROUPS ? ng : PRICE_GROUPS) + 2) > (double)PRICE_WORK)
        goto out;
    double byte_s = ck->byte_s, best = 0, all = 0, all_bytes = 0;
    int best_g = -1;
    for (size_t tries = 0; tries < ng && tries < PRICE_GROUPS; tries++) {
        size_t g = 0;   /* the largest group not yet tried */
        for (size_t k = 1; k < ng; k++)
            if (gbytes[k] > gbytes[g]) g = k;
        if (gbytes[g] == 0) break;
        for (size_t v = 0; v < nv; v++)
            if (grp[v] == (int)g) ck->store_of[v] = -1;
        st = drawn_cost(ck, &tr, drawn, user, &cost, err);
        for (size_t v = 0; v < nv; v++)
            if (grp[v] == (int)g) ck->store_of[v] = was[v];
        if (st != BF_OK) goto out;
        gain[g] = byte_s * (double)gbytes[g] - (cost - base);
        all_bytes += gain[g] > 0 ? (double)gbytes[g] : 0;
        if (gain[g] > best) best = gain[g], best_g = (int)g;
        gbytes[g] = 0;   /* tried */
    }
    if (best_g < 0) goto out;
    for (size_t v = 0; v < nv; v++)   /* every group that paid alone, together */
        if (grp[v] >= 0 && gain[grp[v]] > 0) ck->store_of[v] = -1;
    if ((st = drawn_cost(ck, &tr, drawn, user, &cost, err)) != BF_OK) goto out;
    all = byte_s * all_bytes - (cost - base);
    for (size_t v = 0; v < nv; v++) {
        int go = grp[v] >= 0 && (all >= best ? gain[grp[v]] > 0 : grp[v] == best_g);
        ck->store_of[v] = go ? -1 : was[v];
        ck->priced_out += go != 0;
        ck->priced_bytes += go ? (ck->st_bytes[was[v]] + 63) & ~(size_t)63 : 0;
    }
    relay_store(ck, p, used);
out:
    bf__ckpt_trial_release(&tr);
    bf__free(gbytes);
    bf__free(used);
    bf__free(fixed);
    bf__free(grp);
    bf__free(was);
    bf__free(gain);
    return st;
}

bf_status bf__ckpt_store_drawn(bf__ckpt *ck, const bf_plan *p, bf__ckpt_drawn drawn, void *user, bf_error *err)
{
    size_t nv = ck->n_values, n = ck->n_steps;
    bf__ckpt_trial tr;
    unsigned char *used = bf__calloc(nv + 1, 1);
    bf_status st = bf__ckpt_trial_alloc(ck, &tr);
    if (st != BF_OK || !used) {   /* the whole store: the trials run as they would have */
        bf__ckpt_trial_release(&tr);
        bf__free(used);
        return BF_OK;
    }
    /* what each trial's reach puts back (need) and its channel's walk
     * reads; which trials put each value back (sig) and their runs' cost
     * for price_store (without memory for sig, the store is not priced) */
    uint64_t *sig = bf__calloc(nv + 1, sizeof *sig);
    tr.used = used, tr.sig = sig, tr.price = 1;
    st = drawn(user, ck, &tr, err);
    double base = tr.cost;
    int64_t seen = tr.seen;
    tr.sig = NULL;
    bf__ckpt_trial_release(&tr);
    if (st != BF_OK) {
        bf__free(used);
        bf__free(sig);
        return st;
    }
    /* laid out again after the cuts' values, in the same tables (fewer) */
    size_t nl = ck->lv_first[ck->n_cuts], off = nl ? ck->lv_off[nl - 1] + ((ck->lv_bytes[nl - 1] + 63) & ~(size_t)63) : 0;
    for (size_t v = 0; v < nv; v++) {
        used[v] = used[v] && ck->store_of[v] >= 0;
        ck->store_of[v] = -1;
    }
    memset(ck->post, 0, n);
    lay_out_store(ck, p, used, &off);
    ck->sample_bytes = off;
    bf__free(used);
    /* a Conv whose output went runs whole; a channel's walk ends before a
     * step whose output went (no drawn trial reaches either) */
    for (size_t i = 0; ck->chan_m && i < n; i++) {
        if (ck->chan_m[i] <= 0) continue;
        if (!chain_kept(ck, (int)i)) {
            ck->chan_m[i] = 0;
            continue;
        }
        for (int at = (int)i, f = ck->chan_next[at]; f > 0; at = f, f = ck->chan_next[f])
            if (!chain_kept(ck, f)) {
                ck->chan_next[at] = 0;
                break;
            }
    }
    st = sig ? price_store(ck, p, drawn, user, sig, base, seen, err) : BF_OK;
    bf__free(sig);
    return st;
}
