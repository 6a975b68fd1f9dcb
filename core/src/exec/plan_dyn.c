/* Dynamic steps: the steps of a plan whose shapes are data. A NonZero of a
 * computed value (and NonMaxSuppression) has as many rows as the data says,
 * so it, and every step that reads what it computes, is prepared again on
 * every run (op.h: bf__prep.at_run) on the values its inputs hold then. The
 * outputs and scratch of those steps come from a run-time arena of chunks:
 * emptied at the start of each run and kept, so a run whose shapes are
 * those of an earlier run allocates nothing; capped (bf_plan_opts
 * max_run_bytes), so that data asking for a huge shape fails naming the step.
 * Every other step keeps what plan_build.c gave it (its place in the plan's
 * arena, buffer sharing, fusion). */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "exec/plan_impl.h"

/* As plan_build.c: the largest activation, 2^34 elements. */
#define MAX_NUMEL (INT64_C(1) << 34)
/* The first chunk; each next one at least doubles the arena. */
#define CHUNK_MIN ((size_t)1 << 20)

void bf__dyn_reset(bf_plan *p)
{
    p->dyn.cur = 0;
    p->dyn.used = 0;
    p->dyn.run_bytes = 0;
}

void bf__dyn_free(bf_plan *p)
{
    for (size_t i = 0; i < p->dyn.n; i++) bf__free(p->dyn.chunk[i]);
    bf__free(p->dyn.chunk);
    bf__free(p->dyn.cap);
    memset(&p->dyn, 0, sizeof p->dyn);
    bf__free(p->dyn_prep);
    bf__free(p->sub_prep);
    p->dyn_prep = p->sub_prep = NULL;
}

static bf_status over(bf_plan *p, size_t n, const char *what, bf_error *err)
{
    char a[32], b[32], c[32];
    return bf_error_set(err, BF_ELIMIT,
                        "%s: %s needs %s of run-time memory, %s in this run already: over the run-time limit of %s "
                        "(--run-memory; bf_plan_opts.max_run_bytes; docs/LIMITS.md)",
                        p->model->label, what, bf_bytes_str(n, a, sizeof a),
                        bf_bytes_str(p->dyn.run_bytes, b, sizeof b), bf_bytes_str(p->dyn.limit, c, sizeof c));
}

bf_status bf__dyn_alloc(bf_plan *p, size_t n, const char *what, void **out, bf_error *err)
{
    bf__dynarena *a = &p->dyn;
    n = (n + 64) & ~(size_t)63;   /* one byte more, as the plan's arena: never 0 */
    *out = NULL;
    if (n > a->limit || a->run_bytes > a->limit - n) return over(p, n, what, err);
    /* the chunk being filled, or the next kept one that is big enough */
    while (a->cur < a->n && a->used + n > a->cap[a->cur]) a->cur++, a->used = 0;
    if (a->cur == a->n) {
        size_t want = a->total > CHUNK_MIN ? (size_t)a->total : CHUNK_MIN;
        if (want < n) want = n;
        if (a->total + want > a->limit) want = n;
        if (a->total + want > a->limit) return over(p, n, what, err);
        if (a->n == a->n_cap) {
            size_t nc = a->n_cap ? 2 * a->n_cap : 8;
            unsigned char **ch = bf__realloc(a->chunk, nc * sizeof *ch);
            if (ch) a->chunk = ch;
            size_t *cp = ch ? bf__realloc(a->cap, nc * sizeof *cp) : NULL;
            if (!cp) return bf_error_set(err, BF_ENOMEM, "out of memory growing the run-time arena");
            a->cap = cp;
            a->n_cap = nc;
        }
        unsigned char *c = bf__aligned_alloc(want);
        if (!c) return bf_error_set(err, BF_ENOMEM, "out of memory growing the run-time arena (%zu bytes)", want);
        a->chunk[a->n] = c;
        a->cap[a->n++] = want;
        a->total += want;
        a->used = 0;
    }
    *out = a->chunk[a->cur] + a->used;
    a->used += n;
    a->run_bytes += n;
    return BF_OK;
}

bf_status bf__dyn_alloc_for(bf_plan *p, const bf__node *n, int j, size_t bytes, void **out, bf_error *err)
{
    /* the name is for the error alone: formatting it for every allocation
     * of every run took about 4% of a detector's trials (perf) */
    bf_status st = bf__dyn_alloc(p, bytes, "", out, err);
    if (st != BF_ELIMIT) return st;
    char what[200];
    if (j >= 0) snprintf(what, sizeof what, "node '%.100s' (%.40s) output %d", n->name, n->op_type, j);
    else if (j == -1) snprintf(what, sizeof what, "node '%.100s' (%.40s) scratch", n->name, n->op_type);
    else snprintf(what, sizeof what, "node '%.100s' (%.40s)", n->name, n->op_type);
    return bf__dyn_alloc(p, bytes, what, out, err);
}

/* An output a run-time prepare set: a type, and dims that are neither
 * negative nor too many elements. */
static bf_status check_out(const bf_plan *p, const bf__node *n, int j, const bf_tensor *t, bf_error *err)
{
    if (!bf_dtype_size(t->dtype) || t->ndim < 0 || t->ndim > BF_MAX_DIMS)
        return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s): internal error: output %d's type not set at run time",
                            p->model->label, n->name, n->op_type, j);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->dims[d] < 0 || (t->dims[d] > 0 && numel > MAX_NUMEL / t->dims[d]))
            return bf_error_set(err, BF_ESHAPE, "%s: node '%s' (%s): output %d dim %d is %lld at run time "
                                "(negative or too large)", p->model->label, n->name, n->op_type, j, d,
                                (long long)t->dims[d]);
        numel *= t->dims[d];
    }
    return BF_OK;
}

static bf_status prep_alloc(void *ctx, size_t bytes, const char *what, void **out, bf_error *err)
{
    return bf__dyn_alloc(ctx, bytes, what, out, err);
}

void bf__prep_at_run(bf__prep *prep, bf_plan *p, const bf__node *n, int n_in, int n_out)
{
    /* in[] and out[] are NULL past the counts of the node before (the prep
     * is zeroed when made, and each node fills its own counts' entries
     * alone): clearing those, not all BF__MAX_IO of each, a 2 KB memset
     * that was a third of a dynamic step's dispatch (SSDlite's tail runs
     * 2000 an image, again for every trial that reaches it). params (1.5
     * KB) each op writes what it needs of. */
    memset(prep->in, 0, (size_t)prep->n_in * sizeof *prep->in);
    memset(prep->out, 0, (size_t)prep->n_out * sizeof *prep->out);
    prep->node = n;
    prep->opset = p->model->opset;
    prep->producer = p->model->producer ? p->model->producer : "";
    prep->tie_order = p->model->tie_order;
    prep->n_in = n_in;
    prep->n_out = n_out;
    prep->scratch = 0;
    prep->at_run = 1;
    prep->data_dependent = 0;
    prep->run_alloc = prep_alloc;
    prep->run_ctx = p;
    prep->nms = p->nms;
    prep->nms_at = p->nms ? &p->nms->s[p->nms_sample] : NULL;
}

bf_status bf__dyn_run_step(bf_plan *p, size_t i, bf_error *err)
{
    bf__step *s = &p->steps[i];
    const bf__node *n = s->node;
    bf__prep *prep = p->dyn_prep;
    bf_status st;
    if (bf__op_is_control(n->op)) return bf__sub_run_step(p, i, err);
    bf__prep_at_run(prep, p, n, s->n_in, s->n_out);
    for (int j = 0; j < s->n_in; j++) prep->in[j] = s->in[j];
    for (int j = 0; j < s->n_out; j++) {
        bf_tensor *t = s->out[j];
        const char *name = t->name;
        memset(t, 0, sizeof *t);
        t->name = name;
        prep->out[j] = t;
    }
    if ((st = n->op->prepare(prep, err)) != BF_OK) {
        bf_error_prefix(err, "%s: at run time", p->model->label);
        return st;
    }
    if (prep->data_dependent)
        return bf_error_set(err, BF_EFORMAT, "%s: node '%s' (%s): internal error: data_dependent at run time",
                            p->model->label, n->name, n->op_type);
    for (int j = 0; j < s->n_out; j++) {
        if ((st = check_out(p, n, j, s->out[j], err)) != BF_OK) return st;
        if ((st = bf__dyn_alloc_for(p, n, j, bf_tensor_nbytes(s->out[j]), &s->out[j]->data, err)) != BF_OK) return st;
    }
    void *scratch = NULL;
    if ((st = bf__dyn_alloc_for(p, n, -1, prep->scratch, &scratch, err)) != BF_OK) return st;
    /* the run reads the parameters where the prepare wrote them, as a
     * subgraph's nodes do (plan_sub.c): copying the 1.5 KB into the step
     * was a tenth of SSDlite's tail's dispatch, 2000 dynamic steps an image
     * of every trial; nothing reads a dynamic step's params after its run */
    bf__ctx c = {.node = n, .params = prep->params, .n_in = s->n_in, .n_out = s->n_out,
                 .in = s->in, .out = s->out, .scratch = scratch};
    return n->op->run(&c, err);
}
