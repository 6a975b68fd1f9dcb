/* Running a plan built by plan_build.c, and what a plan serves between
 * runs: its values, its inputs and outputs, its parameters (copied or
 * viewed on first write, so that faults rewrite the plan's, never the
 * model's), and its freeing. Run time only calls kernels. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "exec/step_access.h"
#include "exec/plan_impl.h"

void bf_plan_free(bf_plan *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n_owned; i++) bf__free(p->owned[i]);
    bf__free(p->owned);
    for (size_t i = 0; p->param_copy && i < p->model->n_params; i++) {
        if (p->param_view && p->param_view[i]) bf__wview_free(p->param_copy[i], p->param_view[i]);
        else bf__free(p->param_copy[i]);
    }
    bf__free(p->param_copy);
    bf__free(p->param_view);
    bf__free(p->param_rewritten);
    for (size_t i = 0; p->param_dirty && i < p->model->n_params; i++) bf__free(p->param_dirty[i]);
    bf__free(p->param_dirty);
    bf__free(p->param_untracked);
    for (size_t i = 0; i < p->n_steps; i++) {
        bf__free(p->steps[i].in);
        bf__free(p->steps[i].out);
        bf__free(p->steps[i].params);
    }
    bf__free(p->steps);
    bf__plan_tables_free(p);
    bf__free(p->dummies);
    bf__free(p->vals);
    bf__free(p->known);
    bf__free(p->arena_mem);
    bf__free(p->scratch);
    bf__free(p->val_step);
    bf__free(p->step_hit);
    bf__free(p->warm);
    bf__free(p->fuse_to);
    bf__free(p->fuse_add);
    bf__free(p->fuse_bn);
    bf__free(p->fuse_mid);
    bf__free(p->fused_skip);
    bf__free(p->vf);
    bf__dyn_free(p);
    bf__free(p->dyn_val);
    bf__free(p);
}


/* A dynamic step's value's elements per sample in this run (plan_dyn.c):
 * all of them in a one-sample graph's plan (bf_plan_opts.unbatched, the
 * rule bf__plan_fault_site applies to static values), else numel / batch
 * when dim 0 is the batch; 0 (no fault applies) otherwise, or when not
 * float32. */
static int64_t dyn_row(const bf_plan *p, const bf_tensor *t)
{
    if (t->dtype != BF_F32) return 0;
    if (p->unbatched) return bf_tensor_numel(t);
    return t->ndim >= 1 && t->dims[0] == p->batch ? bf_tensor_numel(t) / p->batch : 0;
}

int64_t bf__plan_run_row(const bf_plan *p, int64_t v) { return dyn_row(p, &p->vals[v]); }

/* floor(a * b / 2^64), exactly, in 32-bit halves */
static uint64_t mul_hi(uint64_t a, uint64_t b)
{
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    return a1 * b1 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* The element a fault strikes in a row of `row` elements: its index, or
 * (drawn) the draw scaled to the row; -1 when the row has no such element. */
static int64_t fault_element(const bf_value_fault *f, int64_t row)
{
    if (!f->drawn) return f->index < row ? f->index : -1;
    return row > 0 ? (int64_t)mul_hi((uint64_t)f->index << 2, (uint64_t)row) : -1;
}

/* The value faults that apply after `step` (-1: to the graph inputs). */
void bf__plan_apply_value_faults(bf_plan *p, int step)
{
    for (size_t k = 0; k < p->n_vf; k++) {
        bf__vfault *v = &p->vf[k];
        if (v->step != step) continue;
        float *x = p->vals[v->f.value].data;
        int64_t r0 = v->f.sample < 0 ? 0 : v->f.sample, r1 = v->f.sample < 0 ? p->batch : v->f.sample + 1;
        int64_t row = v->row_elems;
        if (row == BF__ROW_PER_RUN) row = dyn_row(p, &p->vals[v->f.value]);
        int64_t at = fault_element(&v->f, row);
        v->at = at;
        v->at_n = row;
        if (at < 0) continue;
        for (int64_t r = r0; r < r1; r++) {
            float *e = x + r * row + at, was, now;
            *e = bf_value_fault_apply(&v->f, *e, &was, &now);
            if (r == r0) v->old_value = was, v->new_value = now;
        }
    }
}

void bf__plan_value_fault_at(const bf_plan *p, size_t i, int64_t *index, int64_t *elements)
{
    *index = i < p->n_vf ? p->vf[i].at : -1;
    *elements = i < p->n_vf ? p->vf[i].at_n : 0;
}

/* For a row lookup whose table is the plan's view holding a trial's
 * faults (and nothing else written to it unseen): which rows to read
 * where (op.h). NULL otherwise. */
static const bf__rowsrc *rowsrc(const bf_plan *p, const bf__step *s, bf__rowsrc *buf)
{
    if (p->tab.row_step && !p->tab.row_step[s - p->steps]) return NULL;
    int v = s->n_in > 0 ? s->node->in[0] : -1;
    if (v < 0 || p->model->values[v].kind != BF__VAL_PARAM) return NULL;
    size_t q = (size_t)p->model->values[v].index;
    const bf_plan *own = p->views_of && p->vals[v].data == p->views_of->param_copy[q] ? p->views_of : p;
    if (!own->param_dirty[q] || own->param_untracked[q] || p->vals[v].data != own->param_copy[q] || !bf__row_lookup(s))
        return NULL;
    size_t pg = bf__warena_page();
    unsigned shift = 0;
    while (((size_t)1 << shift) < pg) shift++;
    *buf = (bf__rowsrc){.golden = p->model->params[q].tensor->data, .dirty = own->param_dirty[q], .page_shift = shift};
    return buf;
}

/* Step i's B packed once (plan_impl.h, packed), while the plan reads the
 * model's own tensor as B: a plan whose fault is in B reads its view or
 * copy there instead (param_data), and packs that at every call; once the
 * fault is undone and the view given back (bf__plan_param_golden) the
 * model's tensor, and so the copy, serve again. */
static const float *packed_of(const bf_plan *p, size_t i)
{
    const float *w = p->tab.packed ? p->tab.packed[i] : NULL;
    if (!w) return NULL;
    const bf__step *s = &p->steps[i];
    size_t q = (size_t)p->model->values[s->node->in[1]].index;
    return s->in[1]->data == p->model->params[q].tensor->data ? w : NULL;
}

/* the differential engine's partial sums (plan_impl.h, psum) if step i is theirs */
static bf__psum *psum_of(const bf_plan *p, size_t i) { return p->psum && p->psum_step == i ? p->psum : NULL; }
/* ... and its output positions (plan_impl.h, cpos) */
static bf__cpos *cpos_of(const bf_plan *p, size_t i) { return p->cpos && p->cpos_step == i ? p->cpos : NULL; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bf_status bf_plan_run(bf_plan *p, bf_error *err) { return bf__plan_run_from(p, 0, NULL, NULL, err); }

int bf__plan_fused_last(const bf_plan *p, size_t i, int *bn, int *add)
{
    int r = p->fuse_to[i], a = r ? p->fuse_add[i] : 0, n = r ? p->fuse_bn[i] : 0;
    *add = *bn = 0;
    /* a fault on the Conv's output (or a BN's or residual Add's before the
     * last step) needs that output: the chain runs unfused */
    if (!r || p->step_hit[i] || (a && a != r && p->step_hit[a]) || (n && n != r && p->step_hit[n])) return 0;
    *add = a, *bn = n;
    return r;
}

/* c set up for Conv step i computing steps up to r too (bf__plan_fused_last):
 * act and bnorm the caller's, to live as long as c */
static void fused_ctx(const bf_plan *p, size_t i, int r, int n, int a, bf__ctx *c, bf__act *act, bf__bnorm *bnorm)
{
    const bf__step *s = &p->steps[i];
    if (bf__matmul_rows_epi(s)) {   /* batched MatMul -> Softmax (plan_fuse.c, matmul_softmax) */
        c->rowmap = bf__softmax_inplace;
        c->out = p->steps[r].out;
        return;
    }
    if (bf__matmul_epi(s)) {   /* MatMul -> Add(bias) [-> Gelu or a residual Add]: which operand is A keeps the Add's expression */
        const bf__step *t = &p->steps[a], *q = &p->steps[r];
        int mm_is_a = t->node->in[0] == s->node->out[0];
        int res = r != a && !bf__unary_gelu(q), w_is_a = q->node->in[0] == t->node->out[0];
        *act = (bf__act){.lo = -INFINITY, .hi = INFINITY, .cbias = t->in[mm_is_a ? 1 : 0]->data,
                         .cbias_a = !mm_is_a, .map = r != a && !res ? bf__gelu_kernel() : NULL,
                         .res = res ? q->in[w_is_a ? 1 : 0]->data : NULL, .res_a = res && !w_is_a};
        c->out = p->steps[r].out;
        c->act = act;
        return;
    }
    if (r == a || r == n) *act = (bf__act){.lo = -INFINITY, .hi = INFINITY};   /* an Add or BN last: no activation */
    else bf__act_of(&p->steps[r], act);
    c->out = p->steps[r].out;
    c->act = act;
    if (n) {
        bf__bnorm_of(&p->steps[n], bnorm);
        c->bn = bnorm;
    }
    if (a) {   /* the Add's other operand; which one is A keeps its expression */
        const bf__step *t = &p->steps[a];
        int into = n ? p->steps[n].node->out[0] : s->node->out[0];   /* what reaches the Add */
        int conv_is_a = t->node->in[0] == into;
        c->res = t->in[conv_is_a ? 1 : 0]->data;
        c->res_a = !conv_is_a;
    }
}

/* A differential worker's trials write their changed values into its
 * plans' arenas, which the golden pass left untouched (it writes the cache
 * and its pool, diff/gcache.c): a trial's first full run of a step faulted
 * in its slot a page at a time (ViT-S/16 at batch 4: 166,000 of a worker's
 * 184,000 arena pages in 10 trials). One MADV_POPULATE_WRITE call a slot
 * instead: 80% fewer page-fault traps on ViT-S/16, half on resnet18 and
 * mobilenet_v2, a little less system time (docs/perf/vit.md, h16-vit2).
 * Only slots written whole: the rows and channels that other paths write
 * stay faulted by the page, so a campaign holds no page it would not have
 * touched (the whole arena populated at a worker's start more than doubled
 * resnet18's resident memory). 2 MiB pages for the arena and the scratch
 * (as a shared eval arena has) were measured and dropped: the trials'
 * re-runs took 1-3% less CPU, the process no less, its resident
 * memory 24-38 MiB more (docs/perf/trials.md, h17-mbc). */
void bf__plan_warm_slots(bf_plan *p)
{
    if (!p->warm) p->warm = bf__calloc(p->model->n_values + 1, 1);
}

static void warm_one(bf_plan *p, int v, const bf_tensor *t)
{
    const char *a = p->arena, *e = a ? a + p->arena_bytes : NULL;
    const char *d = t ? t->data : NULL;
    if (v < 0 || p->warm[v] || !d || d < a || d >= e) return;
    p->warm[v] = 1;
    bf__pages_written(t->data, bf_tensor_nbytes(t), BF__WRITE_NOW);
}

static void warm(bf_plan *p, const bf__step *s, bf_tensor *const *out, int n_out)
{
    for (int j = 0; j < n_out && j < s->node->n_out; j++) warm_one(p, s->node->out[j], out[j]);
}

void bf__plan_warm_value(bf_plan *p, int v)
{
    if (p->warm && v >= 0 && (size_t)v < p->model->n_values) warm_one(p, v, &p->vals[v]);
}

bf_status bf__plan_run_fused(bf_plan *p, size_t i, bf_error *err)
{
    const bf__step *s = &p->steps[i];
    bf__act act;
    bf__bnorm bnorm;
    int a, n, r = bf__plan_fused_last(p, i, &n, &a);
    bf__ctx c = {.node = s->node, .params = s->params, .n_in = s->n_in, .n_out = s->n_out,
                 .in = s->in, .out = s->out, .scratch = p->scratch, .packed = packed_of(p, i),
                 .psum = psum_of(p, i), .cpos = cpos_of(p, i)};
    if (r) fused_ctx(p, i, r, n, a, &c, &act, &bnorm);
    if (p->warm) warm(p, r ? &p->steps[r] : s, c.out, c.n_out);
    return s->node->op->run(&c, err);
}

int bf__plan_chain_channel(bf_plan *p, size_t i, int64_t ch)
{
    const bf__step *s = &p->steps[i];
    bf__act act;
    bf__bnorm bnorm;
    int a, n, r = bf__plan_fused_last(p, i, &n, &a);
    if (!r) return 0;
    bf__ctx c = {.node = s->node, .params = s->params, .n_in = s->n_in, .n_out = s->n_out,
                 .in = s->in, .out = s->out, .scratch = p->scratch};
    fused_ctx(p, i, r, n, a, &c, &act, &bnorm);
    return bf__conv_channel_epi(s, &c, ch, p->scratch) ? r : 0;
}

int bf__plan_fused_channel(bf_plan *p, size_t i, int64_t ch)
{
    int a, n, r = p->fuse ? bf__plan_fused_last(p, i, &n, &a) : 0;
    if (!r || !bf__plan_chain_channel(p, i, ch)) return 0;
    p->fused_skip[r] = 1;   /* as run_one marks a fused run's steps */
    if (a) p->fused_skip[a] = 1;
    if (n) p->fused_skip[n] = 1;
    p->n_fused++;
    return r;
}

/* 1x1 Conv step i and depthwise Conv step d = p->tab.pwdw[i] together
 * (plan_impl.h, pwdw), each with the epilogue a run gives it now, the
 * pair's block in buf (floats of it), or a first Conv i and MaxPool step d
 * (linalg_conv_stpool.c); 1 when done (the activation r between them, d
 * and d's chain marked computed), 0 when a value fault needs r's output or
 * the kernel does not take the pair (nothing written) */
int bf__plan_run_pwdw(bf_plan *p, size_t i, float *buf, size_t floats)
{
    int d = p->tab.pwdw[i], a, n, r = bf__plan_fused_last(p, i, &n, &a);
    if (!r || r != p->fuse_to[i] || a || n || p->step_hit[r] || p->step_hit[d]) return 0;
    int a2 = 0, n2 = 0, r2 = bf__conv_step(&p->steps[d]) ? bf__plan_fused_last(p, (size_t)d, &n2, &a2) : 0;
    const bf__step *s = &p->steps[i], *t = &p->steps[d];
    bf__act act, act2;
    bf__bnorm bn, bn2;
    bf__ctx c = {.node = s->node, .params = s->params, .n_in = s->n_in, .n_out = s->n_out, .in = s->in, .out = s->out};
    bf__ctx c2 = {.node = t->node, .params = t->params, .n_in = t->n_in, .n_out = t->n_out, .in = t->in, .out = t->out};
    fused_ctx(p, i, r, 0, 0, &c, &act, &bn);
    if (!bf__conv_step(t)) {   /* a first Conv -> MaxPool pair (linalg_conv_stpool.c) */
        if (!bf__conv_stpool(&c, t, buf, floats)) return 0;
        p->fused_skip[r] = p->fused_skip[d] = 1;
        p->n_fused++, p->tab.n_stpool++;
        return 1;
    }
    if (r2) fused_ctx(p, (size_t)d, r2, n2, a2, &c2, &act2, &bn2);
    if (!bf__conv_pwdw(&c, &c2, buf, floats)) return 0;
    p->fused_skip[r] = p->fused_skip[d] = 1;
    p->n_fused++, p->tab.n_pwdw++;
    if (r2) {
        p->fused_skip[r2] = 1;
        if (a2) p->fused_skip[a2] = 1;
        if (n2) p->fused_skip[n2] = 1;
        p->n_fused++;
    }
    return 1;
}

/* step i of a run: a dynamic step, an activation its Conv computed, a Conv
 * computing its activation too, a 1x1 Conv with the depthwise one after it
 * (pair: a whole run's p->tab.pwdw), or any other; then the value faults that
 * apply after it */
static bf_status run_one(bf_plan *p, size_t i, int tfold, int pair, bf_error *err)
{
    const bf__step *s = &p->steps[i];
    bf__rowsrc rs;
    bf__act act;
    bf__bnorm bnorm;
    /* a folded Transpose (plan_impl.h, tfold): skipped, its MatMul reads
     * its input transposed; both run as steps when a fault lands on it */
    const bf_tensor *bt = NULL;
    if (tfold && p->tab.tfold[i]) {
        size_t t = (size_t)p->tab.tfold[i] - 1;
        if (t > i && !p->step_hit[i]) return BF_OK;   /* the Transpose */
        if (t < i && !p->step_hit[t]) bt = p->steps[t].in[0];
    }
    if (s->dyn) {
        bf_status st;
        if (p->tab.csel && bf__plan_csel_emit(p, i, &st, err)) return st;   /* computed with the others */
        st = bf__dyn_run_step(p, i, err);
        if (st != BF_OK) return st;
        if (p->step_hit[i]) bf__plan_apply_value_faults(p, (int)i);
        return BF_OK;
    }
    if (p->fused_skip[i]) {
        /* computed inside its Conv; a fault on its output still lands here */
        p->fused_skip[i] = 0;
        if (p->step_hit[i]) bf__plan_apply_value_faults(p, (int)i);
        return BF_OK;
    }
    /* no fault after i: checked */
    if (pair && p->tab.pwdw[i] && bf__plan_run_pwdw(p, i, p->scratch, p->scratch_bytes / sizeof(float))) return BF_OK;
    bf__ctx c = {.node = s->node, .params = s->params, .n_in = s->n_in, .n_out = s->n_out,
                 .in = s->in, .out = s->out, .scratch = p->scratch, .rows = rowsrc(p, s, &rs),
                 .packed = packed_of(p, i), .bt = bt, .psum = psum_of(p, i), .cpos = cpos_of(p, i)};
    int a = 0, n = 0, r = p->fuse ? bf__plan_fused_last(p, i, &n, &a) : 0;
    if (r) fused_ctx(p, i, r, n, a, &c, &act, &bnorm);
    bf_status st = s->node->op->run(&c, err);
    if (st != BF_OK) {
        memset(p->fused_skip, 0, p->n_steps);
        return st;
    }
    if (r) {
        p->fused_skip[r] = 1;
        if (a) p->fused_skip[a] = 1;
        if (n) p->fused_skip[n] = 1;
        p->n_fused++;
    }
    if (p->step_hit[i]) bf__plan_apply_value_faults(p, (int)i);
    return BF_OK;
}

/* Gather group i..gcol[i] (plan_impl.h) run together, the others marked
 * as run; 0 when a watch acts on one of them (skips, fills, runs on a
 * channel), a value fault strikes one or an index is out of range: then
 * each runs as a step. */
static int gcols(bf_plan *p, size_t i, const unsigned char *act)
{
    size_t last = (size_t)p->tab.gcol[i];
    bf__step *s[256];
    if (last - i + 1 > sizeof s / sizeof *s) return 0;
    for (size_t k = i; k <= last; k++) {
        if (p->step_hit[k] || p->fused_skip[k] || (act && (act[k] & (BF__STEP_SKIP | BF__STEP_FILL | BF__STEP_CHAN))))
            return 0;
        s[k - i] = &p->steps[k];
    }
    if (!bf__gather_columns(s, (int)(last - i + 1))) return 0;
    for (size_t k = i + 1; k <= last; k++) p->fused_skip[k] = 1;
    return 1;
}

bf_status bf__plan_run_from(bf_plan *p, size_t from, const bf__plan_watch *w, int *stopped, bf_error *err)
{
    for (size_t k = 0; k < p->n_vf; k++) p->vf[k].old_value = p->vf[k].new_value = NAN, p->vf[k].at = -1, p->vf[k].at_n = 0;
    if (p->inputs_hit && from == 0) bf__plan_apply_value_faults(p, -1);
    p->n_fused = p->tab.n_pwdw = p->tab.n_stpool = 0;
    if (stopped) *stopped = 0;
    if (p->n_dyn) bf__dyn_reset(p);
    if (p->tab.csel) bf__plan_csel_off(p);
    double t = w && w->step_time ? now_s() : 0;
    const unsigned char *act = w ? w->act : NULL;
    /* folded Transposes only in whole runs nobody watches: a watch may
     * stop a run in between, record the skipped value or resume later */
    int tfold = p->tab.tfold && p->fuse && from == 0 && !w;
    int pair = p->tab.pwdw && p->fuse && !w;   /* the same for the 1x1 -> depthwise pairs */
    for (size_t i = from; i < p->n_steps; i++) {
        if (w && w->step_time && i > from) {
            double u = now_s();
            w->step_time[i - 1] += u - t;
            t = u;
        }
        if (w && w->mark && w->mark[i] && w->at(w->user, p, i)) {
            if (stopped) *stopped = 1;
            memset(p->fused_skip, 0, p->n_steps);
            return BF_OK;
        }
        if (act && (act[i] & BF__STEP_SKIP)) {   /* golden: its values, if read, put back */
            p->fused_skip[i] = 0;
            if (act[i] & BF__STEP_FILL) w->fill(w->user, p, i);
            continue;
        }
        if (act && (act[i] & BF__STEP_CHAN)) {
            int done = w->chan(w->user, p, i);
            if (done == 2) {   /* its changed channel came back golden: so is the rest */
                if (stopped) *stopped = 1;
                memset(p->fused_skip, 0, p->n_steps);
                return BF_OK;
            }
            if (done) continue;
        }
        if (p->tab.csel && i == bf__plan_csel_first(p)) bf__plan_csel_start(p, act, w ? w->mark : NULL);
        int grouped = p->tab.gcol && p->tab.gcol[i] > (int)i && gcols(p, i, act);
        bf_status st = grouped ? BF_OK : run_one(p, i, tfold, pair, err);
        if (st != BF_OK) return st;
        if (act && (act[i] & BF__STEP_POST)) w->post(w->user, p, i);
    }
    if (w && w->step_time && p->n_steps > from) w->step_time[p->n_steps - 1] += now_s() - t;
    return BF_OK;
}

bf_status bf__plan_run_step(bf_plan *p, size_t i, bf_error *err)
{
    const bf__step *s = &p->steps[i];
    bf__rowsrc rs;
    if (s->dyn) return bf__dyn_run_step(p, i, err);
    bf__ctx c = {.node = s->node, .params = s->params, .n_in = s->n_in, .n_out = s->n_out,
                 .in = s->in, .out = s->out, .scratch = p->scratch, .rows = rowsrc(p, s, &rs),
                 .packed = packed_of(p, i), .psum = psum_of(p, i), .cpos = cpos_of(p, i)};
    if (p->warm) warm(p, s, c.out, c.n_out);
    return s->node->op->run(&c, err);
}

const bf_model *bf_plan_model(const bf_plan *p) { return p->model; }
int64_t bf_plan_batch(const bf_plan *p) { return p->batch; }
size_t bf_plan_arena_bytes(const bf_plan *p) { return p->arena_bytes; }
size_t bf_plan_num_steps(const bf_plan *p) { return p->n_steps; }

size_t bf_plan_num_fused(const bf_plan *p, size_t *sites)
{
    if (sites) *sites = p->n_fusable;
    return p->n_fused;
}

const bf_tensor *bf_plan_value(const bf_plan *p, int64_t value)
{
    return value >= 0 && (size_t)value < p->model->n_values ? &p->vals[value] : NULL;
}

bf_tensor *bf_plan_input(bf_plan *p, size_t i)
{
    return i < p->model->n_inputs ? &p->vals[p->model->input_vals[i]] : NULL;
}

int bf__plan_input_view(bf_plan *p, size_t i, const bf_tensor *src, int64_t start, void **home)
{
    if (p->unbatched || p->inputs_hit || i >= p->model->n_inputs || !src || !src->data) return 0;
    bf_tensor *t = &p->vals[p->model->input_vals[i]];
    if (src->dtype != t->dtype || src->ndim != t->ndim || t->ndim < 1 || t->dims[0] != p->batch) return 0;
    if (memcmp(src->dims + 1, t->dims + 1, (size_t)(t->ndim - 1) * sizeof t->dims[0]) != 0) return 0;
    if (start < 0 || start > src->dims[0] || p->batch > src->dims[0] - start) return 0;
    size_t row = bf_tensor_nbytes(t) / (size_t)p->batch;
    const char *from = (const char *)src->data + (size_t)start * row;
    if ((uintptr_t)from % 64 != 0) return 0;
    *home = t->data;
    t->data = (void *)(uintptr_t)from;   /* read only: see plan_impl.h */
    p->n_input_views++;
    return 1;
}

void bf__plan_input_home(bf_plan *p, size_t i, void *home) { p->vals[p->model->input_vals[i]].data = home; }

const bf_tensor *bf_plan_output(const bf_plan *p, size_t i)
{
    return i < p->model->n_outputs ? &p->vals[p->model->output_vals[i]] : NULL;
}

int bf__plan_output_static(const bf_plan *p, size_t k)
{
    if (k >= p->model->n_outputs) return 0;
    int st = p->val_step[p->model->output_vals[k]];   /* -1: a graph input; BF__VAL_NOT_RUN: folded */
    return st < 0 || !p->steps[st].dyn;
}

bf_status bf_plan_param_mut(bf_plan *p, size_t param, float **data, bf_error *err)
{
    const bf_model *m = p->model;
    if (param < m->n_params && m->params[param].dtype != BF_F32)
        return bf_error_set(err, BF_EINVAL, "parameter '%s' is %s, not float32", m->params[param].tensor->name,
                            bf_dtype_name(m->params[param].dtype));
    void *d = NULL;
    bf_status st = bf_plan_param_data(p, param, &d, err);
    *data = d;
    return st;
}

/* The weights arena a model's tensors live in: a derived model's is its base's. */
static bf__warena *root_arena(const bf_model *m)
{
    while (m->base) m = m->base;
    return m->warena;
}

/* The plan reads the model's own tensor again and the view's pages (the
 * ones faults wrote, and the ones read through it) go back: a page of the
 * arena read through two mappings counts twice in the process's resident
 * memory, so views are only read while they hold faults. */
static size_t dirty_words(size_t view_bytes)
{
    size_t pg = bf__warena_page();
    return ((view_bytes + pg - 1) / pg + 63) / 64;
}

static void param_golden(bf_plan *p, size_t param, int drop)
{
    if (param >= p->model->n_params || !p->param_view[param] || p->param_rewritten[param]) return;
    if (drop) bf__wview_drop(p->param_copy[param], p->param_view[param]);
    p->vals[p->model->param_vals[param]].data = p->model->params[param].tensor->data;
    if (p->param_dirty[param]) memset(p->param_dirty[param], 0, dirty_words(p->param_view[param]) * sizeof(uint64_t));
    p->param_untracked[param] = 0;
}

void bf__plan_param_golden(bf_plan *p, size_t param) { param_golden(p, param, 1); }
void bf__plan_param_golden_kept(bf_plan *p, size_t param) { param_golden(p, param, 0); }

void bf__plan_param_rewritten(bf_plan *p, size_t param)
{
    if (param < p->model->n_params) p->param_rewritten[param] = p->param_untracked[param] = 1;
}

int bf__plan_param_is_golden(const bf_plan *p, size_t param)
{
    return param < p->model->n_params && !p->param_rewritten[param];
}

/* bf_plan_param_data without saying which pages the caller writes. */
static bf_status param_data(bf_plan *p, size_t param, void **data, bf_error *err)
{
    const bf_model *m = p->model;
    if (param >= m->n_params)
        return bf_error_set(err, BF_ERANGE, "parameter %zu does not exist (the model has %zu)", param, m->n_params);
    if (!p->param_copy[param]) {
        const bf_tensor *src = m->params[param].tensor;
        size_t nb = bf_tensor_nbytes(src);
        /* a tensor of the weights arena: a private view, whose pages are
         * copied only where written (a fault: one page, not the table) */
        void *copy = bf__wview_create(root_arena(m), src->data, nb);
        if (copy) {
            /* a bit a page: 4 KiB for a 122 MiB table */
            uint64_t *dirty = bf__calloc(dirty_words(nb) + 1, sizeof *dirty);
            if (!dirty) {
                bf__wview_free(copy, nb);
                return bf_error_set(err, BF_ENOMEM, "out of memory viewing parameter '%s'", src->name);
            }
            p->param_dirty[param] = dirty;
            p->param_view[param] = nb;
        } else {
            copy = bf__aligned_alloc(nb + 1);
            if (!copy) return bf_error_set(err, BF_ENOMEM, "out of memory copying parameter '%s'", src->name);
            memcpy(copy, src->data, nb);
        }
        p->param_copy[param] = copy;
        p->vals[m->param_vals[param]].data = copy;
    }
    /* in use again after bf__plan_param_golden */
    p->vals[m->param_vals[param]].data = p->param_copy[param];
    *data = p->param_copy[param];
    return BF_OK;
}

bf_status bf_plan_param_data(bf_plan *p, size_t param, void **data, bf_error *err)
{
    bf_status st = param_data(p, param, data, err);
    if (st == BF_OK) p->param_untracked[param] = 1;   /* the caller may write anywhere */
    return st;
}

bf_status bf__plan_param_write(bf_plan *p, size_t param, int64_t index, float value, bf_error *err)
{
    void *data = NULL;
    bf_status st = param_data(p, param, &data, err);
    if (st != BF_OK) return st;
    bf_dtype dt = p->model->params[param].dtype;
    if (dt == BF_F32) ((float *)data)[index] = value;
    else bf__param_int_set(data, dt, index, value);
    if (p->param_dirty[param]) {
        size_t pg = (size_t)index * bf_dtype_size(dt) / bf__warena_page();
        p->param_dirty[param][pg / 64] |= (uint64_t)1 << (pg % 64);
        /* an element of fewer bits than a byte, or a stored type other
         * than the tensor's: the page is not known for sure */
        if (bf_dtype_size(dt) != bf_dtype_size(p->model->params[param].tensor->dtype) || bf_dtype_size(dt) == 0)
            p->param_untracked[param] = 1;
    }
    return BF_OK;
}

/* Records name = size in names[]/sizes[] (*n so far), or checks it against
 * the size recorded already. */
static bf_status note_dim(const bf_model *m, const bf_value_info *vi, int d, int64_t size, const char **names,
                          int64_t *sizes, size_t max, size_t *n, bf_error *err)
{
    const char *name = vi->dim_names[d];
    for (size_t k = 0; k < *n; k++)
        if (strcmp(names[k], name) == 0) {
            if (sizes[k] == size) return BF_OK;
            return bf_error_set(err, BF_ESHAPE,
                                "%s: graph input '%s' dim %d ('%s') is fed %lld, but another input's '%s' is %lld",
                                m->label, vi->name, d, name, (long long)size, name, (long long)sizes[k]);
        }
    if (*n >= max)
        return bf_error_set(err, BF_ELIMIT, "%s: more than %zu symbolic dimensions", m->label, max);
    names[*n] = name;
    sizes[(*n)++] = size;
    return BF_OK;
}

bf_status bf_plan_dims_from(const bf_model *model, const int64_t *const *shapes, const int *ndims,
                            const char **names, int64_t *sizes, size_t max, size_t *n, bf_error *err)
{
    *n = 0;
    for (size_t i = 0; i < model->n_inputs; i++) {
        const bf_value_info *vi = &model->inputs[i];
        if (ndims[i] != vi->ndim)
            return bf_error_set(err, BF_ESHAPE, "%s: graph input '%s' has rank %d, fed rank %d", model->label,
                                vi->name, vi->ndim, ndims[i]);
        for (int d = 1; d < vi->ndim; d++) {
            int64_t size = shapes[i][d];
            if (vi->dims[d] >= 0 && vi->dims[d] != size)
                return bf_error_set(err, BF_ESHAPE, "%s: graph input '%s' dim %d is %lld, fed %lld", model->label,
                                    vi->name, d, (long long)vi->dims[d], (long long)size);
            if (vi->dims[d] >= 0) continue;
            if (size < 0 || !vi->dim_names[d])
                return bf_error_set(err, BF_ESHAPE, "%s: graph input '%s' dim %d: %s", model->label, vi->name, d,
                                    size < 0 ? "negative size" : "symbolic without a name; re-export naming it");
            bf_status st = note_dim(model, vi, d, size, names, sizes, max, n, err);
            if (st != BF_OK) return st;
        }
    }
    return BF_OK;
}
