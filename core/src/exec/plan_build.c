/* Building a plan: everything that can be done once, before any run.
 * Which values reach an output, their shapes (each node's prepare), the
 * folding of values known in advance, the fusions a run may take, one arena
 * for every activation, and the budget of all of it, which an estimate
 * (bf_plan_estimate) computes without allocating the arena. plan.c runs a
 * plan and serves its values and parameters. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "exec/step_access.h"
#include "exec/plan_impl.h"

/* Largest activation we lay out: 2^34 elements. */
#define MAX_NUMEL (INT64_C(1) << 34)

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* bf_plan_estimate computes folded values up to this size (later shapes may
 * depend on them: a Reshape's shape), and up to FOLD_REAL_MAX in all; bigger
 * ones are counted and left out. */
#define FOLD_SMALL ((uint64_t)1 << 20)
#define FOLD_REAL_MAX ((uint64_t)64 << 20)

/* How a build counts and allocates: the budget it fills, and which folds it
 * leaves uncomputed ("phantoms": counted, no data; a node reading one is a
 * phantom too, unless it reads only shapes). */
typedef struct budget_ctx {
    int estimate;             /* an estimate (plan_ask): no arena, only small folds */
    int share;                /* values whose lifetimes do not overlap share memory */
    uint64_t max_bytes;       /* 0: no limit */
    bf_plan_budget *b;
    unsigned char *phantom;   /* per value */
    uint64_t real_folded;     /* bytes of folds computed */
    int cut_short;            /* a phantom's consumer could not be prepared */
} budget_ctx;

static void item(bf_plan_budget *b, const char *what, const bf__node *n, const char *value,
                 const bf_tensor *t, uint64_t bytes)
{
    if (bytes <= b->largest.bytes) return;
    bf_plan_item *it = &b->largest;
    memset(it, 0, sizeof *it);
    it->what = what;
    it->node = n ? n->name : NULL;
    it->op = n ? n->op_type : NULL;
    it->value = value;
    it->bytes = bytes;
    if (t) {
        it->dtype = t->dtype;
        it->ndim = t->ndim;
        for (int d = 0; d < t->ndim && d < BF_MAX_DIMS; d++) it->dims[d] = t->dims[d];
    }
}

char *bf_plan_item_str(const bf_plan_item *it, char *buf, size_t len)
{
    char shape[160], size[32];
    bf_bytes_str(it->bytes, size, sizeof size);
    if (!it->what) { snprintf(buf, len, "nothing"); return buf; }
    if (it->dtype == BF_DTYPE_INVALID) {
        snprintf(buf, len, "%s of node '%.100s' %.40s: %s", it->what, it->node ? it->node : "",
                 it->op ? it->op : "?", size);
        return buf;
    }
    bf_shape_str(it->dims, it->ndim, shape, sizeof shape);
    if (it->node)
        snprintf(buf, len, "node '%.100s' %.40s %s %s %s: %s", it->node, it->op ? it->op : "?", it->what,
                 shape, bf_dtype_name(it->dtype), size);
    else
        snprintf(buf, len, "%s '%.100s' %s %s: %s", it->what, it->value ? it->value : "", shape,
                 bf_dtype_name(it->dtype), size);
    return buf;
}

static bf_status oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory building a plan"); }

/* Values that reach a graph output; the rest are never computed. */
static bf_status mark_needed(const bf_model *m, unsigned char *needed, bf_error *err)
{
    for (size_t i = 0; i < m->n_outputs; i++) needed[m->output_vals[i]] = 1;
    for (size_t o = m->n_nodes; o-- > 0;) {
        const bf__node *n = &m->nodes[m->order[o]];
        int used = 0;
        for (int j = 0; j < n->n_out; j++) used |= n->out[j] >= 0 && needed[n->out[j]];
        if (!used) continue;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) needed[n->out[j]] = 1;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) needed[n->in[j]] = 1;
    }
    (void)err;
    return BF_OK;
}

/* The size opts gives the symbolic dimension `name`, or -1. */
static int64_t named_dim(const bf_plan_opts *opts, const char *name)
{
    for (size_t i = 0; name && i < opts->n_dims; i++)
        if (opts->dim_names[i] && strcmp(opts->dim_names[i], name) == 0) return opts->dim_sizes[i];
    return -1;
}

static bf_status set_inputs(bf_plan *p, const bf_plan_opts *opts, bf_error *err)
{
    const bf_model *m = p->model;
    for (size_t i = 0; i < m->n_inputs; i++) {
        const bf_value_info *vi = &m->inputs[i];
        bf_tensor *t = &p->vals[m->input_vals[i]];
        t->dtype = vi->dtype;
        t->ndim = vi->ndim;
        for (int d = 0; d < vi->ndim; d++) {
            if (vi->dims[d] >= 0) t->dims[d] = vi->dims[d];
            else if (d == 0 && !p->unbatched) t->dims[d] = p->batch;
            else if ((t->dims[d] = named_dim(opts, vi->dim_names[d])) < 0)
                return bf_error_set(err, BF_EUNSUPPORTED,
                                    "%s: graph input '%s' dim %d is symbolic ('%s') and no size was given for it; "
                                    "a plan has static shapes, so every symbolic dimension but the batch needs "
                                    "its size (bf_plan_opts dims, from the tensors the plan will be fed)",
                                    m->label, vi->name, d, vi->dim_names[d] ? vi->dim_names[d] : "?");
        }
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->dims[d] > 0 && numel > MAX_NUMEL / t->dims[d])
                return bf_error_set(err, BF_ESHAPE, "%s: graph input '%s' of shape dim %d = %lld is too large",
                                    m->label, vi->name, d, (long long)t->dims[d]);
            numel *= t->dims[d];
        }
        if (!p->unbatched && vi->ndim > 0 && vi->dims[0] >= 0 && vi->dims[0] != p->batch)
            return bf_error_set(err, BF_ESHAPE,
                                "%s: graph input '%s' has a fixed batch of %lld; a plan for batch %lld "
                                "cannot feed it (re-export with a dynamic batch axis, or use batch %lld)",
                                m->label, vi->name, (long long)vi->dims[0], (long long)p->batch,
                                (long long)vi->dims[0]);
    }
    return BF_OK;
}

static bf_status check_output(const bf_model *m, const bf__node *n, const bf_tensor *t, bf_error *err)
{
    if (!bf_dtype_size(t->dtype) || t->ndim < 0 || t->ndim > BF_MAX_DIMS)
        return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s): internal error: output type not set",
                            m->label, n->name, n->op_type);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->dims[d] < 0 || (t->dims[d] > 0 && numel > MAX_NUMEL / t->dims[d]))
            return bf_error_set(err, BF_ESHAPE, "%s: node '%s' (%s): output dim %d is %lld (negative or too large)",
                                m->label, n->name, n->op_type, d, (long long)t->dims[d]);
        numel *= t->dims[d];
    }
    return BF_OK;
}

/* Runs a node whose inputs are all known, now, into freshly owned buffers. */
static bf_status fold(bf_plan *p, const bf__node *n, bf__prep *prep, bf_error *err)
{
    bf_status st = BF_OK;
    void *scratch = NULL;
    const bf_tensor *ins[BF__MAX_IO];
    void **owned = bf__realloc(p->owned, (p->n_owned + (size_t)n->n_out) * sizeof *owned);
    if (!owned) return oom(err);
    p->owned = owned;
    for (int j = 0; j < n->n_out; j++) {
        void *buf = bf__aligned_alloc(bf_tensor_nbytes(prep->out[j]) + 1);
        if (!buf) return oom(err);
        p->owned[p->n_owned++] = buf;
        prep->out[j]->data = buf;
    }
    for (int j = 0; j < n->n_in; j++) ins[j] = n->in[j] >= 0 ? &p->vals[n->in[j]] : NULL;
    scratch = bf__aligned_alloc(prep->scratch + 1);
    if (!scratch) return oom(err);
    bf__ctx c = {.node = n, .params = prep->params, .n_in = n->n_in, .n_out = n->n_out,
                 .in = ins, .out = prep->out, .scratch = scratch};
    st = n->op->run(&c, err);
    bf__free(scratch);
    return st;
}

static bf_status add_step(bf_plan *p, const bf__node *n, bf__prep *prep, bf_error *err)
{
    bf__step *s = &p->steps[p->n_steps];
    s->node = n;
    s->n_in = n->n_in;
    s->n_out = n->n_out;
    s->in = bf__calloc((size_t)n->n_in + 1, sizeof *s->in);
    s->out = bf__calloc((size_t)n->n_out + 1, sizeof *s->out);
    s->params = bf__aligned_alloc(BF__OP_PARAMS_MAX);
    p->n_steps++;
    if (!s->in || !s->out || !s->params) return oom(err);
    memcpy(s->params, prep->params, BF__OP_PARAMS_MAX);
    for (int j = 0; j < n->n_in; j++) s->in[j] = n->in[j] >= 0 ? &p->vals[n->in[j]] : NULL;
    for (int j = 0; j < n->n_out; j++) s->out[j] = prep->out[j];
    if (prep->scratch > p->scratch_bytes) p->scratch_bytes = prep->scratch;
    return BF_OK;
}

/* Whether any input of n is a phantom (Shape-like ops read only shapes). */
static int reads_phantom(const budget_ctx *bc, const bf__node *n)
{
    if (n->op->shape_only) return 0;
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] >= 0 && bc->phantom[n->in[j]]) return 1;
    return 0;
}

/* Arena offsets for plans that only run whole passes (bf_plan_opts
 * share_buffers): a value lives from the step that computes it (graph
 * inputs: from before the first) to its last reader (graph outputs: to the
 * end), and values whose lives do not overlap share bytes; a step's output
 * never shares with its own inputs, whose lives reach that step. First fit
 * over the places in use, in step order. A ViT-S/16 at batch 32 keeps 7.9
 * GiB of activations in separate places and a few hundred MiB so. */
typedef struct live {
    size_t v, off, bytes;
    int first, last;
} live;

static int live_cmp(const void *a, const void *b)
{
    const live *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

static int off_cmp(const void *a, const void *b)
{
    const live *const *x = a, *const *y = b;
    return (*x)->off < (*y)->off ? -1 : (*x)->off > (*y)->off;
}

bf_status bf__plan_first_fit(size_t n, const unsigned char *place, const size_t *bytes, const int *first,
                             const int *last, size_t *off, size_t *total, bf_error *err)
{
    live *ls = bf__calloc(n + 1, sizeof *ls);
    live **act = bf__calloc(n + 1, sizeof *act);
    if (!ls || !act) {
        bf__free(ls), bf__free(act);
        return oom(err);
    }
    size_t nl = 0, n_act = 0, top = 0;
    for (size_t v = 0; v < n; v++)
        if (place[v]) ls[nl++] = (live){.v = v, .bytes = align64(bytes[v]), .first = first[v], .last = last[v]};
    qsort(ls, nl, sizeof *ls, live_cmp);
    for (size_t k = 0; k < nl; k++) {
        /* drop the places whose values died before this one is made */
        size_t w = 0;
        for (size_t a = 0; a < n_act; a++)
            if (act[a]->last >= ls[k].first) act[w++] = act[a];
        n_act = w;
        qsort(act, n_act, sizeof *act, off_cmp);
        size_t at = 0;
        for (size_t a = 0; a < n_act; a++) {
            if (act[a]->off >= at + ls[k].bytes) break;   /* the gap before it fits */
            if (act[a]->off + act[a]->bytes > at) at = act[a]->off + act[a]->bytes;
        }
        ls[k].off = at;
        off[ls[k].v] = at;
        if (at + ls[k].bytes > top) top = at + ls[k].bytes;
        act[n_act++] = &ls[k];
    }
    bf__free(ls), bf__free(act);
    *total = top;
    return BF_OK;
}

/* whether value v gets a place in the arena of the values NEEDED (not a
 * parameter, a constant or a value known when the plan is built) */
static int placed(const bf_plan *p, const unsigned char *needed, int v)
{
    const bf__value *val = &p->model->values[v];
    if (p->known[v] || p->dyn_val[v] || val->kind == BF__VAL_PARAM || val->kind == BF__VAL_CONST) return 0;
    return val->kind != BF__VAL_NODE || needed[v];
}

bf_status bf__plan_share_offsets(const bf_plan *p, const unsigned char *needed, size_t *total, size_t **out,
                                 bf_error *err)
{
    const bf_model *m = p->model;
    int end = (int)p->n_steps;
    int *first = bf__malloc((m->n_values + 1) * sizeof *first), *last = bf__malloc((m->n_values + 1) * sizeof *last);
    int *alias = bf__malloc((m->n_values + 1) * sizeof *alias);
    unsigned char *place = bf__calloc(m->n_values + 1, 1);
    size_t *bytes = bf__calloc(m->n_values + 1, sizeof *bytes);
    size_t *off_of = bf__calloc(m->n_values + 1, sizeof *off_of);
    if (!first || !last || !alias || !place || !bytes || !off_of) {
        bf__free(first), bf__free(last), bf__free(alias), bf__free(place), bf__free(bytes), bf__free(off_of);
        return oom(err);
    }
    for (size_t v = 0; v < m->n_values; v++) first[v] = last[v] = -2;
    for (size_t i = 0; i < m->n_inputs; i++) first[m->input_vals[i]] = last[m->input_vals[i]] = -1;
    for (size_t s = 0; s < p->n_steps; s++) {
        const bf__node *nd = p->steps[s].node;
        for (int j = 0; j < nd->n_out; j++)
            if (nd->out[j] >= 0) first[nd->out[j]] = last[nd->out[j]] = (int)s;
        for (int j = 0; j < nd->n_in; j++)
            if (nd->in[j] >= 0) last[nd->in[j]] = (int)s;
    }
    for (size_t i = 0; i < m->n_outputs; i++) last[m->output_vals[i]] = end;
    /* A fusable pair's two values share their bytes (the activation, run
     * apart, maps each element in place): a fused Conv then writes its
     * activation's output where its own would go, never over its inputs,
     * and the pair needs the memory of one value. */
    for (size_t v = 0; v < m->n_values; v++) alias[v] = -1;
    for (size_t s = 0; s < p->n_steps; s++)
        if (p->fuse_to[s]) {
            int v = p->steps[s].node->out[0], u = p->steps[p->fuse_to[s]].node->out[0];
            if (p->fuse_to[s] == p->fuse_bn[s]) {
                /* Conv -> BN alone: not in place (the BN kernel, run
                 * unfused, must not write over the X it reads: restrict);
                 * the BN's output lives from the Conv on instead, which a
                 * fused run writes it at, never over the Conv's inputs */
                if (placed(p, needed, u) && first[u] > (int)s) first[u] = (int)s;
                continue;
            }
            /* only where both get a place here: a caller's set (the golden
             * cache's pool) may hold one of the pair and not the other */
            if (!placed(p, needed, v) || !placed(p, needed, u)) continue;
            if (last[u] > last[v]) last[v] = last[u];
            alias[u] = v;
        }
    /* A 1x1 -> depthwise pair (plan_impl.h, pwdw) writes the depthwise
     * step's output (its chain's) at the 1x1's step: it lives from there,
     * never over what that step reads */
    for (size_t s = 0; p->tab.pwdw && s < p->n_steps; s++)
        if (p->tab.pwdw[s]) {
            int u = p->steps[p->tab.pwdw[s]].node->out[0];
            int root = alias[u] >= 0 ? alias[u] : u;
            if (placed(p, needed, root) && first[root] > (int)s) first[root] = (int)s;
        }
    /* A Reshape (any copy of the same bytes: bf__copy_step) that is its
     * input's last reader takes the input's place, so its copy moves
     * nothing (3.3% of a ViT-S/16 pass was memmove). Only in plans that
     * fuse (bitflip eval's and the exact engine's passes), where a value is
     * written by its step alone: nothing reads the input after the copy, a
     * value fault on the input lands before the copy reads it, and one on
     * the output after every reader of the input ran. */
    for (size_t s = 0; p->fuse && s < p->n_steps; s++) {
        const bf__step *st = &p->steps[s];
        if (st->dyn || !bf__copy_step(st)) continue;
        int v = st->node->in[0], u = st->node->out[0];
        if (v < 0 || u < 0 || v == u || alias[u] >= 0 || last[v] != (int)s || first[u] != (int)s) continue;
        if (!placed(p, needed, v) || !placed(p, needed, u) || bf_tensor_nbytes(&p->vals[v]) != bf_tensor_nbytes(&p->vals[u]))
            continue;
        int root = alias[v] >= 0 ? alias[v] : v;
        if (first[root] == -2) continue;   /* needed but made by no step: left as it was */
        alias[u] = root;
        if (last[u] > last[root]) last[root] = last[u];
    }
    for (size_t v = 0; v < m->n_values; v++) {
        if (!placed(p, needed, (int)v)) continue;
        if (alias[v] >= 0) continue;
        if (first[v] == -2) first[v] = last[v] = -1;   /* needed but made by no step: as a graph input */
        place[v] = 1;
        bytes[v] = bf_tensor_nbytes(&p->vals[v]);
    }
    bf_status st = bf__plan_first_fit(m->n_values, place, bytes, first, last, off_of, total, err);
    bf__free(place), bf__free(bytes);
    if (st != BF_OK) {
        bf__free(first), bf__free(last), bf__free(alias), bf__free(off_of);
        return st;
    }
    for (size_t v = 0; v < m->n_values; v++)
        if (alias[v] >= 0) off_of[v] = off_of[alias[v]];
    bf__free(first), bf__free(last), bf__free(alias);
    *out = off_of;
    return BF_OK;
}

/* A build's working state beside the budget it fills: what its steps hand
 * on to one another. */
typedef struct build_ctx {
    unsigned char *needed;    /* per value: it reaches a graph output */
    bf__prep *prep;           /* the node being prepared */
    bf_tensor *view;          /* that node's inputs as its prepare sees them */
    size_t n_dummies;         /* unnamed outputs so far, in p->dummies */
    uint64_t scratch_max;     /* the largest scratch of any node, folded or not */
    size_t total;             /* arena bytes */
    size_t dummies_at;        /* where the unnamed outputs start in the arena */
    size_t *off_of;           /* per value, its shared place (bc->share); NULL: one place each */
} build_ctx;

/* Parameters and constants are the model's tensors, seen through the plan;
 * constants are known at build time. */
static void bind_initializers(bf_plan *p)
{
    const bf_model *m = p->model;
    for (size_t v = 0; v < m->n_values; v++) {
        const bf__value *val = &m->values[v];
        bf_tensor *t = &p->vals[v];
        t->name = val->name;
        if (val->kind == BF__VAL_PARAM || val->kind == BF__VAL_CONST) {
            *t = *val->init;
            t->name = val->name;
            p->known[v] = val->kind == BF__VAL_CONST;
        }
    }
}

/* Node n's prepare: its output shapes and dtypes, its parameters, its
 * scratch, into bs->prep; *all_known when every input is known now. A
 * failure on a phantom's account (or any failure, for an estimate) sets
 * bc->cut_short instead and returns BF_OK: the budget so far says enough.
 * A node that reads a value of a dynamic step is not prepared now: it is a
 * dynamic step too (plan_dyn.c), as is one whose prepare says its output
 * shape needs data not known now (prep->data_dependent). */
static bf_status prepare_node(bf_plan *p, budget_ctx *bc, build_ctx *bs, const bf__node *n, int *all_known,
                              bf_error *err)
{
    const bf_model *m = p->model;
    bf__prep *prep = bs->prep;
    bf_status st;
    int dyn = 0;
    *all_known = 1;
    memset(prep, 0, sizeof *prep);
    prep->node = n;
    prep->opset = m->opset;
    prep->producer = m->producer ? m->producer : "";
    prep->tie_order = m->tie_order;
    prep->n_in = n->n_in;
    prep->n_out = n->n_out;
    for (int j = 0; j < n->n_in; j++) {
        if (n->in[j] < 0) { prep->in[j] = NULL; continue; }
        /* Inputs not known at build time are shown without data, so a
         * prepare cannot read (or cache) values that runs will change. */
        bs->view[j] = p->vals[n->in[j]];
        if (!p->known[n->in[j]]) { bs->view[j].data = NULL; *all_known = 0; }
        prep->in[j] = &bs->view[j];
    }
    for (int j = 0; j < n->n_out; j++) {
        if (n->out[j] >= 0) prep->out[j] = &p->vals[n->out[j]];
        else prep->out[j] = &p->dummies[bs->n_dummies++];
    }
    for (int j = 0; j < n->n_in; j++) dyn |= n->in[j] >= 0 && p->dyn_val[n->in[j]];
    if (dyn) prep->data_dependent = 1;
    if (dyn || (st = n->op->prepare(prep, err)) == BF_OK) {
        if (prep->data_dependent) *all_known = 0;
        return BF_OK;
    }
    if (reads_phantom(bc, n) || bc->estimate) {
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && bc->phantom[n->in[j]]) bc->cut_short = 1;
    }
    if (bc->cut_short) return BF_OK;
    if (err && !strstr(err->msg, n->op_type)) bf__node_error(err, n, st, "%s", err->msg);
    bf_error_prefix(err, "%s", m->label);
    return st;
}

/* Node n, prepared: folded now if its inputs are known (or it reads only
 * shapes), else a step of the plan; counted in the budget either way. An
 * estimate folds only what is small (a later shape may read it); what is
 * not folded is a phantom. */
static bf_status place_node(bf_plan *p, budget_ctx *bc, build_ctx *bs, const bf__node *n, int all_known,
                            bf_error *err)
{
    const bf_model *m = p->model;
    bf_plan_budget *b = bc->b;
    bf__prep *prep = bs->prep;
    bf_status st;
    if (prep->data_dependent) {
        /* shapes that are data: prepared on every run (plan_dyn.c), its
         * outputs in the run-time arena, outside this budget */
        for (int j = 0; j < n->n_out; j++) {
            if (n->out[j] >= 0) p->dyn_val[n->out[j]] = 1;
            bf_tensor *t = prep->out[j];
            const char *name = t->name;
            memset(t, 0, sizeof *t);
            t->name = name;
        }
        prep->scratch = 0;
        if ((st = add_step(p, n, prep, err)) != BF_OK) return st;
        p->steps[p->n_steps - 1].dyn = 1;
        p->n_dyn++;
        b->overhead_bytes += BF__OP_PARAMS_MAX + ((size_t)n->n_in + (size_t)n->n_out + 2) * sizeof(void *);
        return BF_OK;
    }
    for (int j = 0; j < n->n_out; j++)
        if ((st = check_output(m, n, prep->out[j], err)) != BF_OK) return st;

    uint64_t sbytes = align64(prep->scratch + 64);
    if (prep->scratch && sbytes > bs->scratch_max) bs->scratch_max = sbytes;
    item(b, "scratch", n, NULL, NULL, prep->scratch ? sbytes : 0);
    if (all_known || n->op->shape_only) {
        uint64_t bytes = 0;
        for (int j = 0; j < n->n_out; j++) {
            uint64_t ob = align64(bf_tensor_nbytes(prep->out[j]) + 1);
            bytes += ob;
            item(b, "folded", n, n->out[j] >= 0 ? m->values[n->out[j]].name : NULL, prep->out[j], ob);
        }
        b->folded_bytes += bytes;
        int make = !reads_phantom(bc, n);
        if (bc->estimate && (bytes > FOLD_SMALL || bc->real_folded + bytes > FOLD_REAL_MAX)) make = 0;
        if (bc->max_bytes && b->folded_bytes + bs->scratch_max > bc->max_bytes) make = 0;
        if (make) {
            if ((st = fold(p, n, prep, err)) != BF_OK) { bf_error_prefix(err, "%s", m->label); return st; }
            bc->real_folded += bytes;
        }
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) {
                p->known[n->out[j]] = 1;
                bc->phantom[n->out[j]] = !make;
            }
        return BF_OK;
    }
    if ((st = add_step(p, n, prep, err)) != BF_OK) return st;
    const bf__step *s = &p->steps[p->n_steps - 1];
    b->overhead_bytes += BF__OP_PARAMS_MAX + ((size_t)s->n_in + (size_t)s->n_out + 2) * sizeof(void *);
    return BF_OK;
}

/* Every node that reaches an output, in topological order, until one
 * cuts the build short. */
static bf_status prepare_nodes(bf_plan *p, budget_ctx *bc, build_ctx *bs, bf_error *err)
{
    const bf_model *m = p->model;
    bf_status st;
    for (size_t o = 0; o < m->n_nodes; o++) {
        const bf__node *n = &m->nodes[m->order[o]];
        int all_known, needs_it = 0;
        for (int j = 0; j < n->n_out; j++) needs_it |= n->out[j] >= 0 && bs->needed[n->out[j]];
        if (!needs_it) continue;
        if ((st = prepare_node(p, bc, bs, n, &all_known, err)) != BF_OK) return st;
        if (bc->cut_short) break;
        if ((st = place_node(p, bc, bs, n, all_known, err)) != BF_OK) return st;
    }
    return BF_OK;
}

/* One arena for graph inputs and every computed activation: each its own
 * place, or (bc->share) places reused once a value's last reader has run;
 * the unnamed outputs after them. Sizes only: allocate_arena places. */
static bf_status lay_out(bf_plan *p, budget_ctx *bc, build_ctx *bs, bf_error *err)
{
    const bf_model *m = p->model;
    bf_plan_budget *b = bc->b;
    bf_status st;
    size_t total = 0;
    if (!bc->cut_short && (st = bf__plan_find_fusions(p, err)) != BF_OK) return st;
    if (!bc->cut_short && bc->share && !p->unbatched && p->fuse) {
        /* the 1x1 -> depthwise pairs' block buffer is the plan's scratch;
         * not in one-sample plans, whose shared arena a campaign's golden
         * pass and exact trials run too (campaign_golden.c, campaign_run.c):
         * batched, a shared arena is bitflip eval's alone */
        size_t floats = 0;
        if ((st = bf__plan_find_pwdw(p, &floats, err)) != BF_OK) return st;
        if (floats * sizeof(float) > p->scratch_bytes) p->scratch_bytes = floats * sizeof(float);
    }
    if (bc->share) {
        if ((st = bf__plan_share_offsets(p, bs->needed, &total, &bs->off_of, err)) != BF_OK) return st;
    } else {
        for (size_t v = 0; v < m->n_values; v++)
            if (placed(p, bs->needed, (int)v)) total += align64(bf_tensor_nbytes(&p->vals[v]));
    }
    bs->dummies_at = total;
    for (size_t i = 0; i < bs->n_dummies; i++) total += align64(bf_tensor_nbytes(&p->dummies[i]));
    for (size_t v = 0; v < m->n_values; v++) {
        const bf__value *val = &m->values[v];
        if (!placed(p, bs->needed, (int)v)) continue;
        item(b, val->kind == BF__VAL_INPUT ? "input" : "output",
             val->kind == BF__VAL_NODE ? &m->nodes[val->producer] : NULL, val->name, &p->vals[v],
             align64(bf_tensor_nbytes(&p->vals[v])));
    }
    bs->total = total;
    p->arena_bytes = total;
    b->arena_bytes = total + 64;
    b->scratch_bytes = align64(p->scratch_bytes + 64) > bs->scratch_max ? align64(p->scratch_bytes + 64)
                                                                         : bs->scratch_max;
    return BF_OK;
}

/* The budget's parameter copies and total, and the refusal of a plan over
 * bc->max_bytes or one that could not be sized. */
/* The parameter-only values a differential campaign will hold (diff/
 * dxparam.c, choose: each a page-rounded buffer and a page), counted as
 * it chooses them but without its finer rules (a step that turns out
 * nondeterministic or folded), so at most what it holds. */
static bf_status count_param_only(const bf_plan *p, bf_plan_budget *b)
{
    const bf_model *m = p->model;
    unsigned char *fixed = bf__calloc(m->n_values + 1, 1);
    if (!fixed) return BF_ENOMEM;
    size_t pg = bf__warena_page();
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int ok = !s->dyn, reads = 0;
        for (int j = 0; j < s->n_in && ok; j++) {
            int v = s->node->in[j];
            if (v < 0) continue;
            reads |= m->values[v].kind == BF__VAL_PARAM || fixed[v];
            ok = m->values[v].kind == BF__VAL_PARAM || m->values[v].kind == BF__VAL_CONST || fixed[v];
        }
        if (!ok || !reads) continue;
        for (int j = 0; j < s->n_out; j++) {
            int v = s->node->out[j];
            if (v < 0) continue;
            fixed[v] = 1;
            b->param_only_bytes += (bf_tensor_nbytes(&p->vals[v]) + pg - 1) / pg * pg + pg;
        }
    }
    bf__free(fixed);
    return BF_OK;
}

static bf_status count_budget(bf_plan *p, budget_ctx *bc, bf_error *err)
{
    const bf_model *m = p->model;
    bf_plan_budget *b = bc->b;
    for (size_t i = 0; i < m->n_params; i++) {
        /* a tensor of the weights arena is faulted through a view: a page
         * per fault for one trial, not a copy (a stored representation
         * rewrites it whole: bf_campaign_estimate counts that) */
        if (bf__param_in_arena(m, i)) continue;
        uint64_t pb = align64(bf_tensor_nbytes(m->params[i].tensor) + 1);
        b->param_copy_bytes += pb;
        item(b, "parameter copy", NULL, m->params[i].tensor->name, m->params[i].tensor, pb);
    }
    b->total_bytes = b->arena_bytes + b->folded_bytes + b->scratch_bytes + b->param_copy_bytes + b->overhead_bytes;
    /* what find_packed's copies will hold (a product reading one weight
     * twice is counted twice: an upper bound) */
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int v = s->n_in > 1 && !s->dyn ? s->node->in[1] : -1;
        if (v >= 0 && m->values[v].kind == BF__VAL_PARAM) b->packed_bytes += align64(bf__linalg_pack_bytes(s));
    }
    if (count_param_only(p, b) != BF_OK) return oom(err);
    if (!bc->cut_short && !(bc->max_bytes && b->total_bytes > bc->max_bytes)) return BF_OK;
    char need[32], lim[32], what[300];
    if (!bc->max_bytes && bc->cut_short)
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "%s: the plan for batch %lld cannot be sized: a node reads a %s value "
                            "whose data it needs to know its shape (%s)",
                            m->label, (long long)p->batch, bf_bytes_str(FOLD_SMALL, need, sizeof need),
                            bf_plan_item_str(&b->largest, what, sizeof what));
    return bf_error_set(err, BF_ELIMIT, "%s: the plan for batch %lld needs %s%s (%s), over the limit of %s",
                        m->label, (long long)p->batch, bc->cut_short ? "at least " : "",
                        bf_bytes_str(b->total_bytes, need, sizeof need),
                        bf_plan_item_str(&b->largest, what, sizeof what),
                        bf_bytes_str(bc->max_bytes, lim, sizeof lim));
}

/* The arena and the scratch, and each placed value's data in the arena. */
static bf_status allocate_arena(bf_plan *p, const build_ctx *bs, bf_error *err)
{
    const bf_model *m = p->model;
    /* zeroed by calloc, not by a memset: a large block is a fresh mapping,
     * zero already, so a page is only touched when a step first writes it,
     * and a campaign's golden pass (which writes the values it caches into
     * the cache, diff/gcache.c) leaves most of a 500 MiB arena untouched */
    p->arena_mem = bf__calloc(1, bs->total + 64);   /* aligning up moves at most 63 bytes */
    p->scratch = bf__aligned_alloc(p->scratch_bytes + 64);
    if (!p->arena_mem || !p->scratch) return oom(err);
    if (bs->off_of) {
        /* a shared arena (`bitflip eval`): every page written again each
         * pass (warena.h: 2 MiB pages, faulted in once, spare the TLB the
         * plane-strided loads of the depthwise and packing loops) */
        bf__pages_written(p->arena_mem, bs->total + 64, BF__WRITE_AGAIN);
        bf__pages_written(p->scratch, p->scratch_bytes + 64, BF__WRITE_AGAIN);
    }
    p->arena = (void *)(((uintptr_t)p->arena_mem + 63) & ~(uintptr_t)63);
    size_t off = 0;
    for (size_t v = 0; v < m->n_values; v++) {
        if (!placed(p, bs->needed, (int)v)) continue;
        if (bs->off_of) {
            p->vals[v].data = (char *)p->arena + bs->off_of[v];
            continue;
        }
        p->vals[v].data = (char *)p->arena + off;
        off += align64(bf_tensor_nbytes(&p->vals[v]));
    }
    off = bs->dummies_at;
    for (size_t i = 0; i < bs->n_dummies; i++) {
        p->dummies[i].data = (char *)p->arena + off;
        off += align64(bf_tensor_nbytes(&p->dummies[i]));
    }
    return BF_OK;
}

/* Builds plan p (its tables allocated by plan_create) in named steps: which
 * values reach an output, the initializers, the graph inputs' shapes, each
 * node prepared and folded or made a step, the arena laid out, the budget
 * counted and checked; then, unless bc->estimate, the arena allocated. */
static bf_status build(bf_plan *p, budget_ctx *bc, const bf_plan_opts *opts, bf_error *err)
{
    const bf_model *m = p->model;
    bf_status st = BF_OK;
    build_ctx bs = {0};
    bs.needed = bf__calloc(m->n_values + 1, 1);
    bs.prep = bf__aligned_alloc(sizeof *bs.prep);
    bs.view = bf__calloc(BF__MAX_IO, sizeof *bs.view);
    if (!bs.needed || !bs.prep || !bs.view) { st = oom(err); goto out; }
    if ((st = mark_needed(m, bs.needed, err)) != BF_OK) goto out;
    bind_initializers(p);
    p->unbatched = opts && opts->unbatched;
    if (p->unbatched && p->batch != 1) {
        st = bf_error_set(err, BF_EINVAL, "a plan of a graph without a batch dimension runs one sample (batch 1), not %lld",
                          (long long)p->batch);
        goto out;
    }
    if ((st = set_inputs(p, opts, err)) != BF_OK) goto out;
    if ((st = prepare_nodes(p, bc, &bs, err)) != BF_OK) goto out;
    if ((st = lay_out(p, bc, &bs, err)) != BF_OK) goto out;
    if ((st = count_budget(p, bc, err)) != BF_OK) goto out;
    if (!bc->estimate) st = allocate_arena(p, &bs, err);   /* an estimate stops at the budget */
out:
    bf__free(bs.off_of);
    bf__free(bs.needed);
    bf__free(bs.prep);
    bf__free(bs.view);
    return st;
}

/* What plan_create is asked for. A plan (bf_plan_create_opts): every fold
 * computed, one arena, the plan returned. An estimate (bf_plan_estimate,
 * bf__plan_estimate_shared): the same build stopped at the budget, no
 * arena, folds computed only while small (a later shape may read them),
 * and no plan returned. */
typedef struct plan_ask {
    bf_plan_opts opts;        /* max_bytes, budget (NULL: a local one), share_buffers, fuse_activations */
    int estimate;
    int64_t *out0_numel;      /* if not NULL: the element count of graph output 0 */
} plan_ask;

static bf_status plan_create(const bf_model *model, int64_t batch, const plan_ask *ask, bf_plan **out,
                             bf_error *err);

bf_status bf_plan_create(const bf_model *model, int64_t batch, bf_plan **out, bf_error *err)
{
    return bf_plan_create_opts(model, batch, NULL, out, err);
}

bf_status bf_plan_create_opts(const bf_model *model, int64_t batch, const bf_plan_opts *opts,
                              bf_plan **out, bf_error *err)
{
    plan_ask ask = {.opts = opts ? *opts : (bf_plan_opts){0}};
    return plan_create(model, batch, &ask, out, err);
}

static bf_status plan_estimate(const bf_model *model, int64_t batch, const plan_ask *ask, bf_error *err)
{
    bf_plan *p = NULL;   /* an estimate's plan is freed inside: this stays NULL */
    return plan_create(model, batch, ask, &p, err);
}

bf_status bf_plan_estimate(const bf_model *model, int64_t batch, bf_plan_budget *out, bf_error *err)
{
    plan_ask ask = {.opts = {.budget = out}, .estimate = 1};
    return plan_estimate(model, batch, &ask, err);
}

bf_status bf_plan_estimate_opts(const bf_model *model, int64_t batch, const bf_plan_opts *opts, bf_plan_budget *out,
                                bf_error *err)
{
    plan_ask ask = {.opts = opts ? *opts : (bf_plan_opts){0}, .estimate = 1};
    ask.opts.budget = out;
    ask.opts.max_bytes = 0;
    return plan_estimate(model, batch, &ask, err);
}

bf_status bf__plan_estimate_shared(const bf_model *model, int64_t batch, int share, bf_plan_budget *out,
                                   int64_t *out0_numel, bf_error *err)
{
    plan_ask ask = {.opts = {.budget = out, .share_buffers = share}, .estimate = 1, .out0_numel = out0_numel};
    return plan_estimate(model, batch, &ask, err);
}

bf_status bf__plan_estimate_opts(const bf_model *model, int64_t batch, const bf_plan_opts *opts, bf_plan_budget *out,
                                 int64_t *out0_numel, bf_error *err)
{
    plan_ask ask = {.opts = *opts, .estimate = 1, .out0_numel = out0_numel};
    ask.opts.budget = out;
    return plan_estimate(model, batch, &ask, err);
}

/* A plan with dynamic steps: their prepare state and the run-time
 * arena's limit (bf_plan_opts.max_run_bytes; docs/LIMITS.md). */
static bf_status dyn_setup(bf_plan *p, const bf_plan_opts *opts, const bf_plan_budget *b, bf_error *err)
{
    p->dyn_prep = bf__aligned_alloc(sizeof *p->dyn_prep);
    p->sub_prep = bf__aligned_alloc(sizeof *p->sub_prep);
    if (!p->dyn_prep || !p->sub_prep) return oom(err);
    /* bf__prep_at_run clears only the in[] and out[] entries the node
     * before it filled */
    memset(p->dyn_prep, 0, sizeof *p->dyn_prep);
    memset(p->sub_prep, 0, sizeof *p->sub_prep);
    if (opts->max_run_bytes) p->dyn.limit = opts->max_run_bytes;
    else if (opts->max_bytes) p->dyn.limit = opts->max_bytes > b->total_bytes ? opts->max_bytes - b->total_bytes : 0;
    else p->dyn.limit = BF_PLAN_RUN_BYTES_DEFAULT;
    return BF_OK;
}

static bf_status plan_create(const bf_model *model, int64_t batch, const plan_ask *ask, bf_plan **out,
                             bf_error *err)
{
    bf_status st;
    bf_plan *p = NULL;
    size_t n_out_slots = 0;
    bf_plan_budget local = {0};
    budget_ctx bc = {.estimate = ask->estimate, .max_bytes = ask->opts.max_bytes, .share = ask->opts.share_buffers,
                     .b = ask->opts.budget ? ask->opts.budget : &local};
    *out = NULL;
    memset(bc.b, 0, sizeof *bc.b);
    bc.b->batch = batch;
    if (batch < 1) return bf_error_set(err, BF_EINVAL, "batch must be at least 1, got %lld", (long long)batch);

    for (size_t i = 0; i < model->n_nodes; i++) n_out_slots += (size_t)model->nodes[i].n_out;
    p = bf__calloc(1, sizeof *p);
    if (!p) return oom(err);
    p->model = model;
    p->batch = batch;
    p->vals = bf__calloc(model->n_values + 1, sizeof *p->vals);
    p->known = bf__calloc(model->n_values + 1, 1);
    p->param_copy = bf__calloc(model->n_params + 1, sizeof *p->param_copy);
    p->param_view = bf__calloc(model->n_params + 1, sizeof *p->param_view);
    p->param_rewritten = bf__calloc(model->n_params + 1, 1);
    p->param_dirty = bf__calloc(model->n_params + 1, sizeof *p->param_dirty);
    p->param_untracked = bf__calloc(model->n_params + 1, 1);
    p->steps = bf__calloc(model->n_nodes + 1, sizeof *p->steps);
    p->dummies = bf__calloc(n_out_slots + 1, sizeof *p->dummies);
    p->val_step = bf__malloc((model->n_values + 1) * sizeof *p->val_step);
    p->step_hit = bf__calloc(model->n_nodes + 1, 1);
    p->fuse_to = bf__calloc(model->n_nodes + 1, sizeof *p->fuse_to);
    p->fused_skip = bf__calloc(model->n_nodes + 1, 1);
    p->fuse_add = bf__calloc(model->n_nodes + 1, sizeof *p->fuse_add);
    p->fuse_bn = bf__calloc(model->n_nodes + 1, sizeof *p->fuse_bn);
    p->fuse_mid = bf__calloc(model->n_nodes + 1, 1);
    p->fuse = ask->opts.fuse_activations != 0;
    p->dyn_val = bf__calloc(model->n_values + 1, 1);
    bc.phantom = bf__calloc(model->n_values + 1, 1);
    if (!p->vals || !p->known || !p->param_copy || !p->param_view || !p->param_rewritten || !p->param_dirty ||
        !p->param_untracked || !p->steps || !p->dummies || !p->val_step || !p->step_hit || !p->fuse_to || !p->fused_skip ||
        !p->fuse_add || !p->fuse_bn || !p->fuse_mid || !bc.phantom || !p->dyn_val) {
        st = oom(err);
        goto fail;
    }
    /* the tables just allocated; build adds each step's */
    bc.b->overhead_bytes = sizeof *p + (model->n_values + 1) * (sizeof *p->vals + 1 + sizeof *p->val_step + 1) +
                           (model->n_params + 1) * (sizeof *p->param_copy + sizeof *p->param_view + 1) +
                           (model->n_nodes + 1) * (sizeof *p->steps + 3 + 3 * sizeof *p->fuse_to) + (n_out_slots + 1) * sizeof *p->dummies;
    st = build(p, &bc, &ask->opts, err);
    bf__free(bc.phantom);
    bc.phantom = NULL;
    if (st == BF_OK && ask->out0_numel) *ask->out0_numel = bf_tensor_numel(&p->vals[model->output_vals[0]]);
    if (st != BF_OK || ask->estimate) goto fail;
    if (p->n_dyn && (st = dyn_setup(p, &ask->opts, bc.b, err)) != BF_OK) goto fail;
    for (size_t v = 0; v < model->n_values; v++) p->val_step[v] = BF__VAL_NOT_RUN;
    for (size_t i = 0; i < model->n_inputs; i++) p->val_step[model->input_vals[i]] = -1;
    for (size_t i = 0; i < p->n_steps; i++)
        for (int j = 0; j < p->steps[i].node->n_out; j++)
            if (p->steps[i].node->out[j] >= 0) p->val_step[p->steps[i].node->out[j]] = (int)i;
    if ((st = bf__plan_tables_find(p, err)) != BF_OK) goto fail;
    *out = p;
    return BF_OK;
fail:
    bf__free(bc.phantom);
    bf_plan_free(p);
    return st;
}
