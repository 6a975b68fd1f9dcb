/* The class selections of a detector's post-processing, computed in one
 * loop. torchvision's SSD and SSDlite export them unrolled: for each of the
 * 90 classes c, the anchors whose score passes the threshold, their scores,
 * the top k of them and a label for each, as dynamic steps (plan_dyn.c):
 *
 *   NonZero(M) -> Transpose([1, 0]) -> GatherND(X)       the scores over it
 *   NonZero(M) -> Transpose([1, 0]) [-> GatherND(B)]     (their boxes)
 *   Shape -> Gather(0) -> Unsqueeze([0]) -> Concat([K]) -> ReduceMin -> Reshape([1])
 *                                                         k = min(K, count)
 *   TopK(scores, k) [-> Gather(boxes, indices)]          the best k
 *   Shape(top scores) -> ConstantOfShape(label)          a label each
 *
 * (M [N]: the static mask Greater(X, threshold) wrote; X [N] the class's
 * score column.) The plan orders its steps by level, so the 90 classes'
 * NonZeros are consecutive steps, then their Transposes, and so on; each
 * step's dispatch (its prepare on this run's values, attribute lookups, the
 * generic kernel) was most of the tail's time on SSDlite320: 14 of the 16
 * steps above, 1260 of its 2000 dynamic steps an image, again on every image
 * of every trial that reaches the class scores.
 *
 * A fusing plan finds these steps when it is built (bf__plan_find_csels):
 * every class whose M and X are computed before the first of them. A run
 * computes all of them at that first step (bf__plan_csel_start), into a
 * buffer of the plan's, and each step, at its own turn, takes its outputs
 * and scratch from the run-time arena exactly as plan_dyn.c would (the same
 * sizes in the same order: the same addresses, the same bytes against
 * --run-memory, the same error naming the same node) and copies its bytes
 * there (bf__plan_csel_emit): every value has the shape, type and bytes its
 * step gives it, whoever reads it (the steps after, `bitflip eval
 * --outputs`, a campaign counting a dynamic site's elements). The GatherND
 * and Gather of the boxes (computed after the selections, from the decoded
 * boxes) run as steps. A run computes none of it, and every step runs as a
 * step, when a value fault strikes one of the values, a watch acts on or
 * marks one of the steps, or the buffer cannot grow. test_plan_dyn's
 * class_selections_fused_equal_steps compares every value with a plan that
 * does not fuse, on hostile scores; class_selections_fused_keep_pytorch_tie_order
 * under --tie-order pytorch, where each TopK keeps torch.topk's order among
 * equal scores (torch_order.c) as the TopK step does, not the stable one. */
#include <string.h>

#include "base/alloc.h"
#include "bitflip/limits.h"
#include "exec/ops/torch_order.h"
#include "exec/plan_impl.h"

enum { NZ0, TR0, GND, NZ1, TR1, SHP, GAT, UNS, CAT, RMIN, RSHP, TOPK, SHP2, COS, N_ROLE };

typedef struct csel_class {
    int step[N_ROLE];            /* its steps */
    int mask, x;                 /* values M and X */
    int64_t k;                   /* the Concat's constant K */
    int k_first;                 /* K is the Concat's first input */
    int sorted;                  /* the TopK's attribute (torch.topk's order depends on it) */
    unsigned char value[16];     /* ConstantOfShape's value, one element of value_dtype */
    bf_dtype value_dtype;
    /* this run's */
    int64_t n, kk;               /* the count over the threshold, min(K, count) */
    size_t nz, sc, tv, ti, lab;  /* offsets in buf */
} csel_class;

struct bf__cselset {
    csel_class *cls;
    size_t n_cls;
    size_t start;                /* the first of their steps */
    int *role;                   /* per step: class * N_ROLE + role, -1 none */
    bf_tensor **out;             /* per step from start on: its outputs 0 and 1, in step order */
    size_t n_out;
    int live;                    /* this run computed them (from start on) */
    int torch;                   /* --tie-order pytorch: each TopK in torch.topk's order */
    unsigned char *buf;
    size_t cap;
};

/* ---- finding them ------------------------------------------------------ */

/* the first dynamic step after `after` (-1: any) reading value v with op `op` as input j */
static int reader(const bf_plan *p, const bf__plan_readers *r, int v, const char *op, int j, int after)
{
    if (v < 0) return -1;
    for (size_t q = r->first[v]; q < r->first[v + 1]; q++) {
        int i = r->step[q];
        const bf__step *s = &p->steps[i];
        if (i > after && s->dyn && !bf__op_is_control(s->node->op) && strcmp(s->node->op_type, op) == 0 &&
            j < s->node->n_in && s->node->in[j] == v)
            return i;
    }
    return -1;
}

/* value v: known when the plan was built, int64, one element of rank ndim; *x its value */
static int const_i64(const bf_plan *p, int v, int ndim, int64_t *x)
{
    if (v < 0 || !p->known[v]) return 0;
    const bf_tensor *t = &p->vals[v];
    if (t->dtype != BF_I64 || t->ndim != ndim || bf_tensor_numel(t) != 1 || !t->data) return 0;
    memcpy(x, t->data, sizeof *x);
    return 1;
}

/* attribute `name` absent, or an int equal to want or alt; and no more than max attributes */
static int attr_is(const bf__node *n, const char *name, int64_t want, int64_t alt)
{
    int64_t v;
    if (!bf__node_attr(n, name)) return 1;
    return bf__attr_int(n, name, want, &v, NULL) == BF_OK && (v == want || v == alt);
}

static int perm_10(const bf__node *n)
{
    int64_t perm[BF_MAX_DIMS];
    int np = 0;
    return n->n_attrs == 1 && bf__attr_ints(n, "perm", perm, BF_MAX_DIMS, &np, NULL) == BF_OK && np == 2 &&
           perm[0] == 1 && perm[1] == 0;
}

static const bf__node *nd(const bf_plan *p, int i) { return p->steps[i].node; }

/* the steps of the class whose first NonZero is step i (the file's comment) */
static int match(const bf_plan *p, const bf__plan_readers *r, int i, csel_class *c)
{
    int *s = c->step;
    const bf__node *z = nd(p, i);
    if (z->n_in != 1 || z->n_out != 1 || z->out[0] < 0) return 0;
    int m = z->in[0];
    const bf_tensor *mt = m >= 0 && !p->dyn_val[m] ? &p->vals[m] : NULL;
    if (!mt || mt->dtype != BF_BOOL || mt->ndim != 1) return 0;
    s[NZ0] = i;
    s[NZ1] = reader(p, r, m, "NonZero", 0, i);
    if (s[NZ1] < 0 || nd(p, s[NZ1])->n_in != 1 || nd(p, s[NZ1])->n_out != 1) return 0;
    s[TR0] = reader(p, r, nd(p, s[NZ0])->out[0], "Transpose", 0, -1);
    s[TR1] = reader(p, r, nd(p, s[NZ1])->out[0], "Transpose", 0, -1);
    if (s[TR0] < 0 || s[TR1] < 0 || !perm_10(nd(p, s[TR0])) || !perm_10(nd(p, s[TR1]))) return 0;
    /* the scores: GatherND(X, indices) of the first; (the boxes' of the second run as steps) */
    s[GND] = reader(p, r, nd(p, s[TR0])->out[0], "GatherND", 1, -1);
    if (s[GND] < 0) return 0;
    const bf__node *g = nd(p, s[GND]);
    int x = g->in[0];
    const bf_tensor *xt = x >= 0 && !p->dyn_val[x] ? &p->vals[x] : NULL;
    if (g->n_in != 2 || !xt || xt->dtype != BF_F32 || xt->ndim != 1 || xt->dims[0] != mt->dims[0] ||
        g->n_attrs > 1 || !attr_is(g, "batch_dims", 0, 0))
        return 0;
    /* the count: Shape -> Gather(scalar 0, axis 0) -> Unsqueeze([0]) */
    int64_t v;
    s[SHP] = reader(p, r, g->out[0], "Shape", 0, -1);
    if (s[SHP] < 0 || nd(p, s[SHP])->n_attrs) return 0;
    s[GAT] = reader(p, r, nd(p, s[SHP])->out[0], "Gather", 0, -1);
    if (s[GAT] < 0) return 0;
    const bf__node *q = nd(p, s[GAT]);
    if (q->n_in != 2 || !const_i64(p, q->in[1], 0, &v) || v != 0 || q->n_attrs > 1 || !attr_is(q, "axis", 0, 0))
        return 0;
    s[UNS] = reader(p, r, q->out[0], "Unsqueeze", 0, -1);
    if (s[UNS] < 0) return 0;
    q = nd(p, s[UNS]);
    if (q->n_in != 2 || !const_i64(p, q->in[1], 1, &v) || v != 0 || q->n_attrs) return 0;
    /* k = ReduceMin(Concat([K], count), every axis, keepdims 0), reshaped to [1] */
    int u = q->out[0];
    s[CAT] = reader(p, r, u, "Concat", 1, -1);
    if (s[CAT] >= 0) c->k_first = 1;
    else if ((s[CAT] = reader(p, r, u, "Concat", 0, -1)) >= 0) c->k_first = 0;
    else return 0;
    q = nd(p, s[CAT]);
    if (q->n_in != 2 || q->n_attrs != 1 || !attr_is(q, "axis", 0, 0) ||
        !const_i64(p, q->in[c->k_first ? 0 : 1], 1, &c->k) || c->k < 0)
        return 0;
    s[RMIN] = reader(p, r, q->out[0], "ReduceMin", 0, -1);
    if (s[RMIN] < 0) return 0;
    q = nd(p, s[RMIN]);
    if (q->n_in != 1 || q->n_attrs != 1 || !bf__node_attr(q, "keepdims") || !attr_is(q, "keepdims", 0, 0)) return 0;
    s[RSHP] = reader(p, r, q->out[0], "Reshape", 0, -1);
    if (s[RSHP] < 0) return 0;
    q = nd(p, s[RSHP]);
    if (q->n_in != 2 || !const_i64(p, q->in[1], 1, &v) || (v != 1 && v != -1) || q->n_attrs > 1 ||
        !attr_is(q, "allowzero", 0, 0))
        return 0;
    /* TopK(scores, k): the largest, along its one axis, both outputs */
    s[TOPK] = reader(p, r, q->out[0], "TopK", 1, -1);
    if (s[TOPK] < 0) return 0;
    q = nd(p, s[TOPK]);
    if (q->n_in != 2 || q->n_out != 2 || q->in[0] != g->out[0] || q->out[0] < 0 || q->out[1] < 0) return 0;
    for (size_t a = 0; a < q->n_attrs; a++) {
        const char *an = q->attrs[a].name;
        if (strcmp(an, "axis") && strcmp(an, "largest") && strcmp(an, "sorted")) return 0;
    }
    if (!attr_is(q, "axis", -1, 0) || !attr_is(q, "largest", 1, 1)) return 0;
    c->sorted = bf__node_attr(q, "sorted") ? attr_is(q, "sorted", 1, 1) : 1;
    /* a label for each: ConstantOfShape(Shape(top scores)) */
    s[SHP2] = reader(p, r, q->out[0], "Shape", 0, -1);
    if (s[SHP2] < 0 || nd(p, s[SHP2])->n_attrs) return 0;
    s[COS] = reader(p, r, nd(p, s[SHP2])->out[0], "ConstantOfShape", 0, -1);
    if (s[COS] < 0) return 0;
    q = nd(p, s[COS]);
    memset(c->value, 0, sizeof c->value);
    c->value_dtype = BF_F32;
    if (q->n_attrs) {
        const bf__attr *a = bf__node_attr(q, "value");
        if (q->n_attrs != 1 || !a || a->type != BF__ATTR_TENSOR || !a->t || !a->t->data ||
            bf_tensor_numel(a->t) != 1 || !bf_dtype_size(a->t->dtype) || bf_dtype_size(a->t->dtype) > sizeof c->value)
            return 0;
        c->value_dtype = a->t->dtype;
        memcpy(c->value, a->t->data, bf_dtype_size(a->t->dtype));
    }
    for (int k = 0; k < N_ROLE; k++)
        for (int j = 0; j < nd(p, s[k])->n_out; j++)
            if (nd(p, s[k])->out[j] < 0) return 0;
    c->mask = m;
    c->x = x;
    return 1;
}

void bf__plan_free_csels(bf_plan *p)
{
    if (!p->tab.csel) return;
    bf__free(p->tab.csel->cls);
    bf__free(p->tab.csel->role);
    bf__free(p->tab.csel->out);
    bf__free(p->tab.csel->buf);
    bf__free(p->tab.csel);
    p->tab.csel = NULL;
}

void bf__plan_find_csels(bf_plan *p)
{
    if (!p->fuse || !p->n_dyn) return;
    bf__plan_readers r = {0};
    struct bf__cselset *cs = bf__calloc(1, sizeof *cs);
    int *used = bf__calloc(p->n_steps + 1, sizeof *used);
    if (!cs || !used || !bf__plan_readers_make(p, &r)) goto fail;
    for (size_t i = 0; i < p->n_steps; i++) {
        csel_class c;
        if (used[i] || !p->steps[i].dyn || strcmp(p->steps[i].node->op_type, "NonZero") || !match(p, &r, (int)i, &c))
            continue;
        int clash = 0;
        for (int k = 0; k < N_ROLE; k++) clash |= used[c.step[k]];
        if (clash) continue;
        csel_class *nc = bf__realloc(cs->cls, (cs->n_cls + 1) * sizeof *nc);
        if (!nc) goto fail;
        cs->cls = nc;
        cs->cls[cs->n_cls++] = c;
        for (int k = 0; k < N_ROLE; k++) used[c.step[k]] = 1;
    }
    /* computed at the first of their steps: each class's M and X must be
     * there by then (drop the classes whose are not, until none is) */
    for (int changed = 1; changed && cs->n_cls;) {
        changed = 0;
        cs->start = p->n_steps;
        for (size_t c = 0; c < cs->n_cls; c++)
            for (int k = 0; k < N_ROLE; k++)
                if ((size_t)cs->cls[c].step[k] < cs->start) cs->start = (size_t)cs->cls[c].step[k];
        for (size_t c = 0; c < cs->n_cls;) {
            int pm = p->val_step[cs->cls[c].mask], px = p->val_step[cs->cls[c].x];   /* < 0: inputs, constants */
            if (pm >= (int)cs->start || px >= (int)cs->start) {
                cs->cls[c] = cs->cls[--cs->n_cls];
                changed = 1;
            } else c++;
        }
    }
    if (!cs->n_cls) goto fail;
    if (!(cs->role = bf__malloc(p->n_steps * sizeof *cs->role))) goto fail;
    for (size_t i = 0; i < p->n_steps; i++) cs->role[i] = -1;
    for (size_t c = 0; c < cs->n_cls; c++)
        for (int k = 0; k < N_ROLE; k++) cs->role[cs->cls[c].step[k]] = (int)c * N_ROLE + k;
    cs->n_out = 2 * (p->n_steps - cs->start);
    if (!(cs->out = bf__calloc(cs->n_out, sizeof *cs->out))) goto fail;
    for (size_t i = cs->start; i < p->n_steps; i++)
        for (int j = 0; j < 2 && j < p->steps[i].n_out; j++)
            if (cs->role[i] >= 0) cs->out[2 * (i - cs->start) + (size_t)j] = p->steps[i].out[j];
    /* the model's order among equal scores, as the TopK steps keep it
     * (ops/reduce.c): stable under ONNX's, torch.topk's under PyTorch's */
    cs->torch = p->model->tie_order == BF_TIE_ORDER_PYTORCH;
    p->tab.csel = cs;
    cs = NULL;
fail:   /* none found, or out of memory: the steps run one by one, as before */
    if (cs) {
        bf__free(cs->cls);
        bf__free(cs->role);
        bf__free(cs->out);
        bf__free(cs);
    }
    bf__free(used);
    bf__plan_readers_free(&r);
}

/* ---- running them ------------------------------------------------------ */

/* Stable bottom-up merge sort of idx[0..n) by v[idx], largest first, NaN
 * above everything: TopK's order (ops/reduce.c, topk_before), which any
 * stable sort by the same order reproduces. */
static inline int before(float a, float b)
{
    int an = a != a, bn = b != b;
    if (an || bn) return an && !bn;
    return a > b;
}

static int64_t *sort_desc(int64_t *idx, int64_t *tmp, const float *v, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, t = lo;
            while (a < mid && b < hi) tmp[t++] = before(v[idx[b]], v[idx[a]]) ? idx[b++] : idx[a++];
            while (a < mid) tmp[t++] = idx[a++];
            while (b < hi) tmp[t++] = idx[b++];
        }
        int64_t *s = idx;
        idx = tmp;
        tmp = s;
    }
    return idx;
}

static size_t up8(size_t n) { return (n + 7) & ~(size_t)7; }

/* The anchors mask m[0..N) marks, ascending, into pos (NULL: counted
 * alone); eight zero bytes skipped at a time, as NonZero scans
 * (ops/index_make.c): most of a class's anchors are under the threshold. */
static int64_t scan(const unsigned char *m, int64_t N, int64_t *pos)
{
    int64_t k = 0, a = 0;
    for (; a + 8 <= N; a += 8) {
        uint64_t w;
        memcpy(&w, m + a, 8);
        if (!w) continue;
        for (int64_t b = a; b < a + 8; b++)
            if (m[b]) {
                if (pos) pos[k] = b;
                k++;
            }
    }
    for (; a < N; a++)
        if (m[a]) {
            if (pos) pos[k] = a;
            k++;
        }
    return k;
}

void bf__plan_csel_off(bf_plan *p) { p->tab.csel->live = 0; }

size_t bf__plan_csel_classes(const bf_plan *p, int *computed)
{
    if (computed) *computed = p->tab.csel ? p->tab.csel->live : 0;
    return p->tab.csel ? p->tab.csel->n_cls : 0;
}
size_t bf__plan_csel_first(const bf_plan *p) { return p->tab.csel->start; }

void bf__plan_csel_start(bf_plan *p, const unsigned char *act, const unsigned char *mark)
{
    struct bf__cselset *cs = p->tab.csel;
    cs->live = 0;
    for (size_t c = 0; c < cs->n_cls; c++)
        for (int k = 0; k < N_ROLE; k++) {
            size_t i = (size_t)cs->cls[c].step[k];
            if (p->step_hit[i] || (act && act[i]) || (mark && i > cs->start && mark[i])) return;
        }
    /* the counts, then the buffer: each class's indices, scores, top k and labels */
    size_t total = 0, most = 0;
    for (size_t c = 0; c < cs->n_cls; c++) {
        csel_class *cl = &cs->cls[c];
        const bf_tensor *mt = &p->vals[cl->mask];
        int64_t n = scan(mt->data, mt->dims[0], NULL);
        cl->n = n;
        cl->kk = cl->k < n ? cl->k : n;
        size_t vs = bf_dtype_size(cl->value_dtype);
        cl->nz = total, total += up8((size_t)n * sizeof(int64_t));
        cl->sc = total, total += up8((size_t)n * sizeof(float));
        cl->tv = total, total += up8((size_t)cl->kk * sizeof(float));
        cl->ti = total, total += up8((size_t)cl->kk * sizeof(int64_t));
        cl->lab = total, total += up8((size_t)cl->kk * vs);
        if ((size_t)n > most) most = (size_t)n;
    }
    size_t need = total + 2 * most * sizeof(int64_t) + (cs->torch ? most * sizeof(bf__kv) : 0) + 8;
    if (need > cs->cap) {
        unsigned char *b = bf__realloc(cs->buf, need);
        if (!b) return;   /* the steps run one by one */
        cs->buf = b;
        cs->cap = need;
    }
    int64_t *idx = (int64_t *)(void *)(cs->buf + total), *tmp = idx + most;
    for (size_t c = 0; c < cs->n_cls; c++) {
        csel_class *cl = &cs->cls[c];
        const float *x = p->vals[cl->x].data;
        int64_t *nz = (int64_t *)(void *)(cs->buf + cl->nz);
        float *sc = (float *)(void *)(cs->buf + cl->sc), *tv = (float *)(void *)(cs->buf + cl->tv);
        int64_t *ti = (int64_t *)(void *)(cs->buf + cl->ti);
        scan(p->vals[cl->mask].data, p->vals[cl->mask].dims[0], nz);
        /* the bits: NaN payloads and -0 as GatherND and TopK copy them */
        for (int64_t t = 0; t < cl->n; t++) memcpy(&sc[t], &x[nz[t]], sizeof *sc);
        if (cs->torch) {   /* as topk_run_torch: (value, index) pairs in index order */
            bf__kv *a = (bf__kv *)(void *)(tmp + most);
            for (int64_t t = 0; t < cl->n; t++) a[t] = (bf__kv){.v = sc[t], .i = t};
            bf__torch_topk(a, cl->n, cl->kk, 1, cl->sorted);
            for (int64_t t = 0; t < cl->kk; t++) {
                memcpy(&tv[t], &sc[a[t].i], sizeof *tv);
                ti[t] = a[t].i;
            }
        } else {
            for (int64_t t = 0; t < cl->n; t++) idx[t] = t;
            const int64_t *srt = sort_desc(idx, tmp, sc, cl->n);
            for (int64_t t = 0; t < cl->kk; t++) {
                memcpy(&tv[t], &sc[srt[t]], sizeof *tv);
                ti[t] = srt[t];
            }
        }
        size_t vs = bf_dtype_size(cl->value_dtype);
        for (int64_t t = 0; t < cl->kk; t++) memcpy(cs->buf + cl->lab + (size_t)t * vs, cl->value, vs);
    }
    cs->live = 1;
}

/* output j of step i: shaped, from the run-time arena (plan_dyn.c's order), bytes copied */
static bf_status put(bf_plan *p, size_t i, int j, bf_dtype dt, int ndim, const int64_t *dims, const void *src,
                     bf_error *err)
{
    bf__step *s = &p->steps[i];
    bf_tensor *t = p->tab.csel->out[2 * (i - p->tab.csel->start) + (size_t)j];
    const char *name = t->name;
    memset(t, 0, sizeof *t);
    t->name = name;
    bf__set_shape(t, dt, ndim, dims);
    size_t nb = bf_tensor_nbytes(t);
    bf_status st = bf__dyn_alloc_for(p, s->node, j, nb, &t->data, err);
    if (st == BF_OK && nb) memcpy(t->data, src, nb);
    return st;
}

int bf__plan_csel_emit(bf_plan *p, size_t i, bf_status *st, bf_error *err)
{
    const struct bf__cselset *cs = p->tab.csel;
    int r = cs->live ? cs->role[i] : -1;
    if (r < 0) return 0;
    const csel_class *c = &cs->cls[r / N_ROLE];
    const unsigned char *b = cs->buf;
#if defined(__GNUC__)
    /* the steps' and their outputs' structs are cold by now (the trial's
     * Convs ran over the caches since the last image), and each step
     * writes one: their misses were most of this (perf); the next ones
     * asked for ahead, from a list of them in step order */
    size_t ahead = 2 * (i + 6 - cs->start);
    if (ahead + 1 < cs->n_out) {
        if (cs->out[ahead]) __builtin_prefetch(cs->out[ahead], 1);
        if (cs->out[ahead + 1]) __builtin_prefetch(cs->out[ahead + 1], 1);
    }
#endif
    int64_t n = c->n, kk = c->kk, one = 1, two = 2, d1n[2] = {1, n}, dn1[2] = {n, 1};
    int64_t cat[2] = {c->k_first ? c->k : n, c->k_first ? n : c->k};
    size_t scratch = 0;
    switch (r % N_ROLE) {
    case NZ0: case NZ1: *st = put(p, i, 0, BF_I64, 2, d1n, b + c->nz, err); break;
    case TR0: case TR1: *st = put(p, i, 0, BF_I64, 2, dn1, b + c->nz, err); break;
    case GND: *st = put(p, i, 0, BF_F32, 1, &n, b + c->sc, err); break;
    case SHP: *st = put(p, i, 0, BF_I64, 1, &one, &n, err); break;
    case GAT: *st = put(p, i, 0, BF_I64, 0, NULL, &n, err), scratch = sizeof(int64_t); break;   /* its index */
    case UNS: *st = put(p, i, 0, BF_I64, 1, &one, &n, err); break;
    case CAT: *st = put(p, i, 0, BF_I64, 1, &two, cat, err); break;
    case RMIN: *st = put(p, i, 0, BF_I64, 0, NULL, &kk, err); break;
    case RSHP: *st = put(p, i, 0, BF_I64, 1, &one, &kk, err); break;
    case TOPK:
        *st = put(p, i, 0, BF_F32, 1, &kk, b + c->tv, err);
        if (*st == BF_OK) *st = put(p, i, 1, BF_I64, 1, &kk, b + c->ti, err);
        scratch = (size_t)(3 * n) * sizeof(int64_t);   /* its sort's: indices, merge buffer, doubles */
        break;
    case SHP2: *st = put(p, i, 0, BF_I64, 1, &one, &kk, err); break;
    default: *st = put(p, i, 0, c->value_dtype, 1, &kk, b + c->lab, err); break;
    }
    void *sp;
    if (*st == BF_OK) *st = bf__dyn_alloc_for(p, p->steps[i].node, -1, scratch, &sp, err);
    return 1;
}
