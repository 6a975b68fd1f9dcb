/* An exact early end inside a detector's post-processing (ckpt_impl.h,
 * bf__ckpt_tail; docs/ENGINE.md "One image per call", item 7).
 *
 * torchvision's SSD and SSDlite end in the class scores' selections:
 *
 *   L = Concat(levels' logits) [1, N, C] -> S = Softmax(L, last axis)
 *   -> Split / Squeeze (S's bytes) -> X_c = Gather(S, c, last axis) [N]
 *   -> M_c = Greater(X_c, t_c) -> NonZero -> Transpose -> GatherND(X_c, ...)
 *   -> TopK, the boxes' Gathers, NMS, the outputs
 *
 * for each class c read (1..90 on SSD: not the background's 0). A fault in
 * a class head moves some rows of L and nothing else the tail reads; the
 * rest of the pass is then golden unless a moved row changes a mask or a
 * selected score. This file decides that, image by image, before L's
 * Concat runs, and ends the image there with the golden outputs.
 *
 * The rule. The golden pass keeps, per image, its selections: each (row,
 * class) whose score passes its class's threshold, and that score's bits (a
 * few hundred on a trained detector's image). A trial whose faults all land
 * before the check step and reach the rest of the pass only through L's
 * blocks (the Concat's inputs, or L itself) computes the scores of every
 * row of the blocks its faults reach with the Softmax's own row kernel
 * (bf__softmax_rows_run: each row's bits the step's, whatever the grouping
 * of rows, elementwise_softmax.c), compares each with its class's
 * threshold as the Greater does (x > t, in float), and asks: the same
 * (row, class) pairs pass as in the golden pass, with the same bits. Then
 * every M_c is golden's (the other rows' logits are golden, and the
 * Softmax is row by row), and every GatherND reads X_c only at rows M_c
 * selects, whose bits are golden's. Every other value the tail reads is
 * golden (the faults do not reach it), and the values that differ (L, S,
 * the copies of S, the X_c) are read by nothing but the steps above
 * (checked when the pattern is found, subgraph reads included): every
 * output is golden's, bit for bit. Nothing is bounded or estimated: the
 * check computes what the steps would and compares it as they would.
 *
 * A bound on the logits alone (a score is at most exp(x_c - max x), so a
 * row whose classes' logits lie more than -ln(t) below its max selects
 * nothing, with no Softmax computed) was measured first (h25-ssd): on
 * SSDlite320's 16 images it cleared 1 to 26 rows of 3234 (the class mass
 * is spread over 91 classes, so the scores lie far under the bound), so
 * it was dropped.
 *
 * The rows a one-channel fault moves (h26-ssd). A block that is a Conv's
 * output moved by copies and Transposes alone (SSD's heads: Reshape
 * [1, A, C, H, W], Transpose to [1, H, W, A, C], Reshape [1, H W A, C]),
 * each value read by the next step alone, holds every element of the
 * Conv's output once, at an index the chain's index arithmetic gives.
 * When a trial's faults all lie in one output channel of that Conv (the
 * one-channel Convs' chan_step, ckpt_chan.c), land in no other step, and
 * the Conv's other inputs are golden, only that channel's elements move:
 * every other row of the block holds golden logits, so its scores are
 * golden's and select what they selected. The check then computes the
 * rows holding that channel's elements alone (on SSDlite320's first level
 * 400 of 2,400), each row by the same kernel and compared the same way.
 *
 * Where the graph is anything else the rule is off and the tail runs as
 * before, the reason in --stats (bf_campaign_result.ckpt.tail_off). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "exec/ckpt_impl.h"
#include "exec/op.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"

/* views of the scores followed (Split, Squeeze, ...: SSDlite has two) */
#define TAIL_VIEWS 16
/* rows a trial's check computes at once (its buffer: ckpt_impl.h) */
#define TAIL_CHUNK BF__CKPT_TAIL_CHUNK

/* ---- the pattern ------------------------------------------------------- */

typedef struct finder {
    const bf_plan *p;
    size_t nv;
    bf__plan_readers r;       /* readers of each value (plan_readers.c) */
    const size_t *first;      /* r's lists */
    const int *step;
    unsigned char *special;   /* a graph output, or read by a subgraph at any depth */
} finder;

static void sub_reads(const bf__subgraph *g, unsigned char *special, int depth)
{
    if (!g || depth > 64) return;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const bf__node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) special[n->in[j]] = 1;
        for (size_t a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].type == BF__ATTR_GRAPH) sub_reads(n->attrs[a].g, special, depth + 1);
    }
    for (int j = 0; j < g->n_out; j++)
        if (g->out[j] >= 0) special[g->out[j]] = 1;
}

static int finder_make(finder *f, const bf_plan *p)
{
    const bf_model *m = p->model;
    f->p = p;
    f->nv = m->n_values;
    f->special = bf__calloc(f->nv + 1, 1);
    if (!f->special || !bf__plan_readers_make(p, &f->r)) return 0;
    f->first = f->r.first;
    f->step = f->r.step;
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__node *n = p->steps[i].node;
        for (size_t a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].type == BF__ATTR_GRAPH) sub_reads(n->attrs[a].g, f->special, 0);
    }
    for (size_t k = 0; k < m->n_outputs; k++) f->special[m->output_vals[k]] = 1;
    return 1;
}

static void finder_free(finder *f)
{
    bf__plan_readers_free(&f->r);
    bf__free(f->special);
}

/* v is read by step s alone (in any number of its input slots), and by no subgraph */
static int read_by_only(const finder *f, int v, int s)
{
    if (v < 0 || f->special[v] || f->first[v] == f->first[v + 1]) return 0;
    for (size_t q = f->first[v]; q < f->first[v + 1]; q++)
        if (f->step[q] != s) return 0;
    return 1;
}

/* input slots of node n holding v */
static int slots(const bf__node *n, int v)
{
    int k = 0;
    for (int j = 0; j < n->n_in; j++) k += n->in[j] == v;
    return k;
}

static int is_op(const bf__node *n, const char *op) { return strcmp(n->op_type, op) == 0; }

/* value v: a float32 tensor of e elements */
static int f32_of(const bf_plan *p, int v, int64_t e)
{
    return v >= 0 && p->vals[v].dtype == BF_F32 && bf_tensor_numel(&p->vals[v]) == e;
}

/* known when the plan was built, one element of an integer type: its value */
static int known_int(const bf_plan *p, int v, int64_t *x)
{
    if (v < 0 || !p->known[v] || !p->vals[v].data || bf_tensor_numel(&p->vals[v]) != 1) return 0;
    if (p->vals[v].dtype == BF_I64) memcpy(x, p->vals[v].data, sizeof *x);
    else if (p->vals[v].dtype == BF_I32) {
        int32_t y;
        memcpy(&y, p->vals[v].data, sizeof y);
        *x = y;
    } else
        return 0;
    return 1;
}

/* the step computing v, or -1 */
static int maker(const bf_plan *p, int v) { return v >= 0 ? p->val_step[v] : -1; }

/* step g reads X (input 0) at the elements mask M selects alone:
 * GatherND(X, Transpose(NonZero(M), perm [1, 0])), batch_dims 0 */
static int gathers_selected(const bf_plan *p, const bf__node *g, int x, int m)
{
    int64_t bd = 0, perm[BF_MAX_DIMS];
    int np = 0;
    if (g->n_in != 2 || g->in[0] != x || g->in[1] == x || bf__attr_int(g, "batch_dims", 0, &bd, NULL) != BF_OK || bd)
        return 0;
    int tq = maker(p, g->in[1]);
    if (tq < 0) return 0;
    const bf__node *t = p->steps[tq].node;
    if (!is_op(t, "Transpose") || t->n_in != 1 ||
        bf__attr_ints(t, "perm", perm, BF_MAX_DIMS, &np, NULL) != BF_OK || np != 2 || perm[0] != 1 || perm[1] != 0)
        return 0;
    int zq = maker(p, t->in[0]);
    if (zq < 0) return 0;
    const bf__node *z = p->steps[zq].node;
    return is_op(z, "NonZero") && z->n_in == 1 && z->in[0] == m;
}

/* score column x (rows elements): read by one Greater with a constant
 * threshold (*thr) and by GatherNDs of what its mask selects alone. NULL,
 * or why not. */
static const char *column(const finder *f, int x, int64_t rows, float *thr)
{
    const bf_plan *p = f->p;
    int m = -1;
    if (f->special[x]) return "a class's score column is a graph output or read by a subgraph";
    for (size_t q = f->first[x]; q < f->first[x + 1]; q++) {
        const bf__step *s = &p->steps[f->step[q]];
        const bf__node *n = s->node;
        if (!is_op(n, "Greater")) continue;
        int t = n->n_in == 2 ? n->in[1] : -1;
        /* a constant, or a parameter (its golden value: a fault in it
         * lands at the Greater, past the check, and turns the rule off) */
        if (s->dyn || n->in[0] != x || t == x || n->n_out != 1 || n->out[0] < 0 || t < 0 ||
            (!p->known[t] && p->model->values[t].kind != BF__VAL_PARAM) || !p->vals[t].data || !f32_of(p, t, 1) ||
            bf_tensor_numel(&p->vals[n->out[0]]) != rows)
            return "a class's score column is compared otherwise than Greater(column, a constant threshold)";
        if (m >= 0) return "a class's score column is compared twice";
        memcpy(thr, p->vals[t].data, sizeof *thr);
        m = n->out[0];
    }
    if (m < 0) return "a class's score column is not compared with a threshold";
    for (size_t q = f->first[x]; q < f->first[x + 1]; q++) {
        const bf__node *n = p->steps[f->step[q]].node;
        if (is_op(n, "Greater")) continue;
        if (!is_op(n, "GatherND") || !gathers_selected(p, n, x, m))
            return "a class's score column is read by a step other than its compare and the GatherND of what it "
                   "selects";
    }
    return NULL;
}

/* The scores S of Softmax step i (rows x cols): followed through copies to
 * the class columns; thr[c] each column's threshold (+Inf: not read).
 * NULL, or why not. */
static const char *scores(const finder *f, int i, int64_t rows, int64_t cols, float *thr)
{
    const bf_plan *p = f->p;
    int view[TAIL_VIEWS], n_view = 1, any = 0;
    const char *why = NULL;
    view[0] = p->steps[i].node->out[0];
    for (int64_t c = 0; c < cols; c++) thr[c] = INFINITY;
    for (int k = 0; k < n_view && !why; k++) {
        int v = view[k];
        if (v < 0 || f->special[v]) return "the class scores are a graph output or read by a subgraph";
        for (size_t q = f->first[v]; q < f->first[v + 1] && !why; q++) {
            const bf__step *s = &p->steps[f->step[q]];
            const bf__node *n = s->node;
            if (s->dyn || slots(n, v) != 1 || n->in[0] != v)
                return "the class scores are read by a step of data-dependent shape or other than as its data";
            if (bf__copy_step(s)) {
                if (n_view == TAIL_VIEWS || !f32_of(p, n->out[0], rows * cols))
                    return "the class scores are reshaped more than 16 times or into another size";
                view[n_view++] = n->out[0];
                continue;
            }
            if (bf__gather_axis(s) < 0) return "the class scores are read by a step other than a reshape or a column's Gather";
            const bf_tensor *t = &p->vals[v];
            int64_t c = 0;
            if (t->ndim < 1 || bf__gather_axis(s) != t->ndim - 1 || t->dims[t->ndim - 1] != cols ||
                !known_int(p, n->in[1], &c) || c < -cols || c >= cols || !f32_of(p, n->out[0], rows))
                return "the class scores are read by a Gather other than of one column";
            c = c < 0 ? c + cols : c;
            float tc = 0;
            why = column(f, n->out[0], rows, &tc);
            if (!why && thr[c] != INFINITY && memcmp(&thr[c], &tc, sizeof tc) != 0)
                why = "a class column is compared with two thresholds";
            thr[c] = tc, any = 1;
        }
    }
    return why ? why : any ? NULL : "no class column is read";
}

static void map_block(bf__ckpt_tail *t, const finder *f, int j);

/* the check at L's Concat along its rows (its inputs row blocks), when it
 * is one; else at the Softmax, L one block */
static bf_status blocks(bf__ckpt_tail *t, const finder *f, int sm, int l, int64_t rows, int64_t cols)
{
    const bf_plan *p = f->p;
    int q = maker(p, l);
    const bf_tensor *lt = &p->vals[l];
    int ax = q >= 0 ? bf__concat_axis(&p->steps[q]) : -1;
    int64_t outer = 1;
    for (int d = 0; ax >= 0 && d < ax; d++) outer *= lt->dims[d];
    const bf__node *n = q >= 0 ? p->steps[q].node : NULL;
    int ok = n && !p->steps[q].dyn && ax >= 0 && ax < lt->ndim - 1 && outer == 1 && n->n_in >= 1;
    int64_t sum = 0;
    for (int j = 0; ok && j < n->n_in; j++) {
        int v = n->in[j];
        ok = v >= 0 && v != l && read_by_only(f, v, q) && p->vals[v].dtype == BF_F32 &&
             bf_tensor_numel(&p->vals[v]) % cols == 0;
        if (ok) sum += bf_tensor_numel(&p->vals[v]);
    }
    ok = ok && sum == rows * cols;
    t->n_in = ok ? n->n_in : 1;
    t->step = ok ? q : sm;
    t->in_val = bf__malloc((size_t)t->n_in * sizeof *t->in_val);
    t->in_row = bf__malloc(((size_t)t->n_in + 1) * sizeof *t->in_row);
    t->map = bf__malloc((size_t)t->n_in * sizeof *t->map);
    if (!t->in_val || !t->in_row || !t->map) return BF_ENOMEM;
    t->in_row[0] = 0;
    for (int j = 0; j < t->n_in; j++) {
        t->in_val[j] = ok ? n->in[j] : l;
        t->in_row[j + 1] = t->in_row[j] + (ok ? bf_tensor_numel(&p->vals[n->in[j]]) / cols : rows);
    }
    for (int j = 0; j < t->n_in; j++) map_block(t, f, j);
    return BF_OK;
}

/* Block j as a Conv's output moved by copies and Transposes alone (t->map[j];
 * conv -1 when it is not) */
static void map_block(bf__ckpt_tail *t, const finder *f, int j)
{
    const bf_plan *p = f->p;
    bf__ckpt_tail_map *mp = &t->map[j], tr = {.conv = -1};
    mp->conv = -1;
    int v = t->in_val[j];
    int64_t numel = bf_tensor_numel(&p->vals[v]);
    for (int hop = 0; hop < 16; hop++) {
        int q = maker(p, v);
        if (q < 0 || p->steps[q].dyn) return;
        const bf__step *s = &p->steps[q];
        const bf__node *n = s->node;
        if (n->n_out != 1 || n->out[0] != v) return;   /* a fused step writing another value */
        if (is_op(n, "Conv")) {
            const bf_tensor *o = &p->vals[v];
            if (o->ndim < 3 || o->dims[0] != 1 || o->dtype != BF_F32 || bf_tensor_numel(o) != numel) return;
            tr.m = o->dims[1], tr.hw = numel / o->dims[1];
            tr.conv = q;
            /* collected from the block back: the Conv side first */
            for (int k = 0; k < tr.n_tr; k++) {
                int b = tr.n_tr - 1 - k;
                mp->nd[k] = tr.nd[b];
                memcpy(mp->dims[k], tr.dims[b], sizeof mp->dims[k]);
                memcpy(mp->perm[k], tr.perm[b], sizeof mp->perm[k]);
            }
            mp->n_tr = tr.n_tr, mp->m = tr.m, mp->hw = tr.hw, mp->conv = q;
            if (tr.hw > t->map_rows) t->map_rows = tr.hw;
            return;
        }
        int x = n->n_in >= 1 ? n->in[0] : -1;
        if (x < 0 || !read_by_only(f, x, q) || slots(n, x) != 1 || bf_tensor_numel(&p->vals[x]) != numel) return;
        if (is_op(n, "Transpose")) {
            const bf_tensor *xt = &p->vals[x];
            int np = 0, k = tr.n_tr, seen = 0;
            if (k == BF__CKPT_TAIL_TR || n->n_in != 1 ||
                bf__attr_ints(n, "perm", tr.perm[k], BF_MAX_DIMS, &np, NULL) != BF_OK || np != xt->ndim || np < 1)
                return;
            for (int a = 0; a < np; a++) {
                if (tr.perm[k][a] < 0 || tr.perm[k][a] >= np || (seen >> tr.perm[k][a]) & 1) return;
                seen |= 1 << tr.perm[k][a];
                tr.dims[k][a] = xt->dims[a];
            }
            tr.nd[k] = np;
            tr.n_tr++;
        } else if (!bf__copy_step(s))
            return;
        v = x;
    }
}

/* element e of transpose k's input: its index in the output */
static int64_t transposed(const bf__ckpt_tail_map *mp, int k, int64_t e)
{
    int nd = mp->nd[k];
    int64_t idx[BF_MAX_DIMS], o = 0;
    for (int a = nd - 1; a >= 0; a--) idx[a] = e % mp->dims[k][a], e /= mp->dims[k][a];
    for (int a = 0; a < nd; a++) o = o * mp->dims[k][mp->perm[k][a]] + idx[mp->perm[k][a]];
    return o;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* the block's rows (of cols) holding channel oc's elements, ascending
 * and each once, into rows (mp->hw room): their count */
static int64_t chan_rows(const bf__ckpt_tail_map *mp, int64_t oc, int64_t cols, int64_t *rows)
{
    int64_t n = 0;
    int sorted = 1;
    for (int64_t pos = 0; pos < mp->hw; pos++) {
        int64_t e = oc * mp->hw + pos;
        for (int k = 0; k < mp->n_tr; k++) e = transposed(mp, k, e);
        rows[n] = e / cols;
        sorted &= n == 0 || rows[n] >= rows[n - 1];
        n++;
    }
    if (!sorted) qsort(rows, (size_t)n, sizeof *rows, cmp_i64);
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++)
        if (u == 0 || rows[i] != rows[u - 1]) rows[u++] = rows[i];
    return u;
}

/* The values computed before the check step that a step at or after it
 * reads (directly or in a subgraph) or that are graph outputs: the only
 * ones through which a trial's faults may reach the rest (and the trial
 * may cross only through L's blocks). */
static bf_status crossing(bf__ckpt_tail *t, const finder *f)
{
    const bf_plan *p = f->p;
    unsigned char *late = bf__calloc(f->nv + 1, 1);
    if (!late) return BF_ENOMEM;
    for (size_t i = (size_t)t->step; i < p->n_steps; i++) {
        const bf__node *n = p->steps[i].node;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) late[n->in[j]] = 1;
        for (size_t a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].type == BF__ATTR_GRAPH) sub_reads(n->attrs[a].g, late, 0);
    }
    for (size_t k = 0; k < p->model->n_outputs; k++) late[p->model->output_vals[k]] = 1;
    size_t n = 0;
    for (size_t v = 0; v < f->nv; v++) n += late[v] && p->val_step[v] < t->step;
    t->cross = bf__malloc((n + 1) * sizeof *t->cross);
    if (!t->cross) {
        bf__free(late);
        return BF_ENOMEM;
    }
    t->n_cross = 0;
    for (size_t v = 0; v < f->nv; v++)
        if (late[v] && p->val_step[v] < t->step) t->cross[t->n_cross++] = (int)v;
    bf__free(late);
    return BF_OK;
}

/* Softmax step i as the pattern's (t's logits, rows, cols, thr), or why not */
static const char *softmax_at(bf__ckpt_tail *t, const finder *f, int i)
{
    const bf_plan *p = f->p;
    const bf__step *s = &p->steps[i];
    int64_t rows, cols;
    if (!bf__softmax_rows(s, &rows, &cols) || s->node->n_in != 1 || s->node->n_out != 1)
        return "the class logits' Softmax is not over contiguous rows of fixed shape";
    int l = s->node->in[0];
    if (l < 0 || !f32_of(p, l, rows * cols) || p->vals[l].dims[p->vals[l].ndim - 1] != cols || rows < 1)
        return "the class logits' Softmax is not over the last axis of float logits";
    if (!read_by_only(f, l, i)) return "the class logits are read by a step other than their Softmax";
    t->thr = bf__malloc((size_t)cols * sizeof *t->thr);
    if (!t->thr) return "out of memory";   /* the rule off; the tail runs as before */
    const char *why = scores(f, i, rows, cols, t->thr);
    if (why) {
        bf__free(t->thr);
        t->thr = NULL;
        return why;
    }
    t->logits = l, t->rows = rows, t->cols = cols;
    return NULL;
}

void bf__ckpt_tail_free(bf__ckpt_tail *t)
{
    bf__free(t->in_val);
    bf__free(t->in_row);
    bf__free(t->map);
    bf__free(t->cross);
    bf__free(t->thr);
    for (int64_t s = 0; t->golden && s < t->samples; s++) bf__free(t->golden[s].at);
    bf__free(t->golden);
    memset(t, 0, sizeof *t);
}

bf_status bf__ckpt_tail_find(bf__ckpt *ck, const bf_plan *p)
{
    bf__ckpt_tail *t = &ck->tail;
    static const char none[] = "no Softmax over class logits";
    memset(t, 0, sizeof *t);
    t->why = none;
    finder f = {0};
    bf_status st = BF_OK;
    if (!finder_make(&f, p)) {
        st = BF_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < p->n_steps; i++) {
        if (!is_op(p->steps[i].node, "Softmax") || p->steps[i].dyn) continue;
        const char *why = softmax_at(t, &f, (int)i);
        if (why) {   /* the first Softmax's reason, if none is the pattern */
            if (t->why == none) t->why = why;
            continue;
        }
        if ((st = blocks(t, &f, (int)i, t->logits, t->rows, t->cols)) != BF_OK) goto out;
        /* a trial's reach (ckpt_reach.c) follows the steps' own inputs:
         * a subgraph's reads before the check would escape it */
        for (int q = 0; q < t->step; q++)
            for (size_t a = 0; a < p->steps[q].node->n_attrs; a++)
                if (p->steps[q].node->attrs[a].type == BF__ATTR_GRAPH) {
                    bf__ckpt_tail_free(t);
                    t->why = "a step before the class logits runs a subgraph (If, Loop)";
                    goto out;
                }
        if ((st = crossing(t, &f)) != BF_OK) goto out;
        t->node = p->steps[t->step].node;
        t->why = NULL;
        t->samples = ck->samples;
        t->golden = bf__calloc((size_t)ck->samples + 1, sizeof *t->golden);
        if (!t->golden) {
            st = BF_ENOMEM;
            goto out;
        }
        for (int64_t s = 0; s < ck->samples; s++) t->golden[s].n = -1;
        break;
    }
out:
    finder_free(&f);
    if (st != BF_OK) bf__ckpt_tail_free(t);
    return st;
}

/* ---- the golden pass and the trials ------------------------------------ */

/* block j's rows as plan p holds them now, or NULL when its value is not
 * what the pattern was found on (a plan otherwise fused: no end then) */
static const float *block(const bf__ckpt_tail *t, const bf_plan *p, int j)
{
    const bf_tensor *v = &p->vals[t->in_val[j]];
    if (v->dtype != BF_F32 || !v->data || bf_tensor_numel(v) != (t->in_row[j + 1] - t->in_row[j]) * t->cols) return NULL;
    return v->data;
}

/* 1 when a score of row y passes its column's threshold, as the Greater
 * compares (a NaN passes none); a loop over every column the compiler
 * keeps in vectors: most rows pass nothing */
static int passes(const float *y, const float *thr, int64_t cols)
{
    int any = 0;
    for (int64_t c = 0; c < cols; c++) any |= y[c] > thr[c];
    return any;
}

/* the (row, class) pairs of a golden image that pass, as a growing list */
typedef struct sel_list {
    int64_t *at;
    float *y;
    int64_t n, cap;
} sel_list;

static int sel_push(sel_list *l, int64_t at, const float *y)
{
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        int64_t *a = bf__realloc(l->at, (size_t)cap * sizeof *a);
        if (!a) return 0;
        l->at = a;
        float *v = bf__realloc(l->y, (size_t)cap * sizeof *v);
        if (!v) return 0;
        l->y = v;
        l->cap = cap;
    }
    l->at[l->n] = at;
    memcpy(&l->y[l->n++], y, sizeof *y);
    return 1;
}

bf_status bf__ckpt_tail_record(bf__ckpt *ck, const bf_plan *p, int64_t s)
{
    bf__ckpt_tail *t = &ck->tail;
    if (!t->node || s < 0 || s >= t->samples) return BF_OK;
    bf__ckpt_tail_sel *g = &t->golden[s];
    bf__free(g->at);
    *g = (bf__ckpt_tail_sel){.n = -1};
    if (p->steps[t->step].node != t->node) return BF_OK;
    int64_t c = t->cols;
    sel_list l = {0};
    bf_status st = BF_OK;
    int whole = 1;
    float *y = bf__malloc((size_t)(TAIL_CHUNK * c) * sizeof *y);
    if (!y) return BF_ENOMEM;
    for (int j = 0; j < t->n_in && whole && st == BF_OK; j++) {
        const float *x = block(t, p, j);
        if (!x) {
            whole = 0;   /* no end for this image */
            break;
        }
        for (int64_t r0 = t->in_row[j]; r0 < t->in_row[j + 1] && st == BF_OK; r0 += TAIL_CHUNK) {
            int64_t nr = t->in_row[j + 1] - r0 < TAIL_CHUNK ? t->in_row[j + 1] - r0 : TAIL_CHUNK;
            bf__softmax_rows_run(y, x + (r0 - t->in_row[j]) * c, nr, c);
            for (int64_t r = 0; r < nr && st == BF_OK; r++) {
                const float *yr = y + r * c;
                if (!passes(yr, t->thr, c)) continue;
                for (int64_t k = 0; k < c; k++)
                    if (yr[k] > t->thr[k] && !sel_push(&l, (r0 + r) * c + k, &yr[k])) {
                        st = BF_ENOMEM;
                        break;
                    }
            }
        }
    }
    bf__free(y);
    if (st == BF_OK && whole) {
        /* one block (ckpt_impl.h: g->at owns it, g->y inside it) */
        size_t ib = ((size_t)l.n * sizeof(int64_t) + 63) & ~(size_t)63;
        unsigned char *b = bf__malloc(ib + (size_t)l.n * sizeof(float) + 1);
        if (!b) st = BF_ENOMEM;
        else {
            g->at = (int64_t *)(void *)b;
            g->y = (float *)(void *)(b + ib);
            if (l.n) {
                memcpy(g->at, l.at, (size_t)l.n * sizeof *l.at);
                memcpy(g->y, l.y, (size_t)l.n * sizeof *l.y);
            }
            g->n = l.n;
        }
    }
    bf__free(l.at);
    bf__free(l.y);
    return st;
}

/* the trial's faults all in one output channel of the Conv block j is
 * mapped from, landing in no other step, its other inputs golden: that
 * channel's rows (tr->tail_rows), else -1 */
static int one_channel(const bf__ckpt *ck, bf__ckpt_trial *tr, int j)
{
    const bf__ckpt_tail_map *mp = &ck->tail.map[j];
    int i = tr->chan_step;
    if (i < 0 || mp->conv != i || tr->chan_oc < 0 || tr->chan_oc >= mp->m || mp->hw > tr->tail_rows_cap)
        return -1;
    for (size_t k = 0; k < ck->n_steps; k++)
        if (tr->origin[k] && (int)k != i) return -1;
    for (int q = ck->in_first[i]; q < ck->in_first[i + 1]; q++)
        if (ck->val_param[ck->in_val[q]] < 0 && tr->taint[ck->in_val[q]]) return -1;
    tr->tail_nrows = chan_rows(mp, tr->chan_oc, ck->tail.cols, tr->tail_rows);
    return j;
}

void bf__ckpt_tail_trial(const bf__ckpt *ck, bf__ckpt_trial *tr)
{
    const bf__ckpt_tail *t = &ck->tail;
    tr->tail = 0;
    tr->tail_map = -1;
    tr->tail_nrows = 0;
    if (!t->node || tr->all || tr->lo < 0 || tr->hi >= t->step || !tr->tail_in || tr->tail_cols != t->cols)
        return;
    memset(tr->tail_in, 0, (size_t)t->n_in);
    for (size_t k = 0; k < t->n_cross; k++) {
        int v = t->cross[k], in = 0;
        if (!tr->taint[v]) continue;
        for (int j = 0; j < t->n_in; j++)
            if (t->in_val[j] == v) tr->tail_in[j] = 1, in = 1;
        if (!in) return;   /* the faults reach the rest otherwise than through L */
    }
    tr->tail = 1;
    int reached = -1, n = 0;
    for (int j = 0; j < t->n_in; j++)
        if (tr->tail_in[j]) reached = j, n++;
    if (n == 1 && t->map && tr->tail_rows) tr->tail_map = one_channel(ck, tr, reached);
}

/* L's row at (row x cols) with scores yr against the golden selections g
 * from *u on (rows in ascending order): 1 when the same (row, class) pairs
 * pass with the same bits */
static int row_golden(const bf__ckpt_tail *t, const bf__ckpt_tail_sel *g, const float *yr, int64_t at, int64_t *u)
{
    int64_t c = t->cols;
    while (*u < g->n && g->at[*u] < at) (*u)++;
    int kept = *u < g->n && g->at[*u] < at + c;
    if (!kept && !passes(yr, t->thr, c)) return 1;   /* selects nothing in either run */
    for (int64_t k = 0; k < c; k++) {
        int here = *u < g->n && g->at[*u] == at + k;
        if ((yr[k] > t->thr[k]) != here) return 0;                       /* a mask moved */
        if (here && memcmp(&yr[k], &g->y[(*u)++], sizeof *yr) != 0) return 0;   /* a selected score moved */
    }
    return 1;
}

size_t bf__ckpt_tail_scratch(const bf__ckpt *ck)
{
    return ck && ck->tail.node ? (size_t)TAIL_CHUNK * (size_t)ck->tail.cols : 0;
}

int bf__ckpt_tail_golden(const bf__ckpt *ck, const bf__ckpt_trial *tr, const bf_plan *p, int64_t s, float *y)
{
    const bf__ckpt_tail *t = &ck->tail;
    if (!tr || !tr->tail || !y || s < 0 || s >= t->samples || p->steps[t->step].node != t->node) return 0;
    const bf__ckpt_tail_sel *g = &t->golden[s];
    if (g->n < 0) return 0;
    int64_t u = 0, c = t->cols;
    for (int j = 0; j < t->n_in; j++) {
        if (!tr->tail_in[j]) continue;   /* golden: its rows are */
        const float *x = block(t, p, j);
        if (!x) return 0;
        if (tr->tail_map == j) {   /* the faulted channel's rows alone: the others hold golden logits */
            for (int64_t i = 0; i < tr->tail_nrows; i++) {
                int64_t r = tr->tail_rows[i];
                bf__softmax_rows_run(y, x + r * c, 1, c);
                if (!row_golden(t, g, y, (t->in_row[j] + r) * c, &u)) return 0;
            }
            continue;
        }
        for (int64_t r0 = t->in_row[j]; r0 < t->in_row[j + 1]; r0 += TAIL_CHUNK) {
            int64_t nr = t->in_row[j + 1] - r0 < TAIL_CHUNK ? t->in_row[j + 1] - r0 : TAIL_CHUNK;
            bf__softmax_rows_run(y, x + (r0 - t->in_row[j]) * c, nr, c);
            for (int64_t r = 0; r < nr; r++)
                if (!row_golden(t, g, y + r * c, (r0 + r) * c, &u)) return 0;
        }
    }
    return 1;
}

const char *bf__ckpt_tail_off(const bf__ckpt *ck) { return ck ? ck->tail.why : NULL; }
