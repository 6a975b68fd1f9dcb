/* Which steps a plan may fuse (bf_plan_opts.fuse_activations; the plan's
 * fuse_to, fuse_add, fuse_bn, fuse_mid): a Conv with what follows it
 * (docs/ENGINE.md, "Activations fused into the Conv" and the sections after
 * it), a MatMul with its bias Add and Gelu ("A bias and Gelu fused into the
 * MatMul"). Apart from plan_build.c, which calls it once its steps are
 * made, to keep that file to one job. And the plan's other per-step tables
 * (plan_impl.h, bf__plan_tables): found and freed here, all together. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "exec/step_access.h"
#include "exec/plan_impl.h"

static bf_status oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory building a plan"); }

static int same_f32_shape(const bf_tensor *x, const bf_tensor *y)
{
    if (x->dtype != BF_F32 || y->dtype != BF_F32 || x->ndim != y->ndim) return 0;
    for (int d = 0; d < x->ndim; d++)
        if (x->dims[d] != y->dims[d]) return 0;
    return 1;
}

/* Whether step a, the one reader of Conv i's output v, is a residual Add
 * the Conv may compute too: a float Add of v and another value of v's very
 * shape (no broadcast), that value ready when the Conv runs (a parameter,
 * a constant, an input or a value of a step before i). *r gets the one
 * reader of the Add's output, if it has one and is no graph output; else -1. */
static int residual_add(const bf_plan *p, int i, int a, int v, const int *readers, const int *reader,
                        const int *made_at, int *r)
{
    const bf__step *t = &p->steps[a];
    if (a <= i || t->dyn || strcmp(t->node->op_type, "Add") != 0 || t->node->n_in != 2 || t->n_out != 1) return 0;
    int x0 = t->node->in[0], x1 = t->node->in[1], w = t->node->out[0];
    int o = x0 == v ? x1 : x0;
    if ((x0 == v) == (x1 == v) || o < 0 || w < 0 || made_at[o] > i) return 0;
    if (!same_f32_shape(&p->vals[v], &p->vals[o]) || !same_f32_shape(&p->vals[v], &p->vals[w])) return 0;
    *r = readers[w] == 1 ? reader[w] : -1;
    return 1;
}

/* Whether step r may run in the epilogue of Conv i as its activation, reading
 * value x: a float Relu or Clip of x alone whose bounds are ready when the
 * Conv runs (a Clip's bounds may be values not computed yet: only its kind
 * is asked here) */
static int act_after(const bf_plan *p, int i, int r, int x, const int *made_at)
{
    if (r <= i) return 0;
    const bf__step *t = &p->steps[r];
    if (t->dyn || t->n_in < 1 || t->node->in[0] != x || t->n_out != 1 || t->node->out[0] < 0 || !bf__act_of(t, NULL))
        return 0;
    for (int j = 1; j < t->node->n_in; j++)
        if (t->node->in[j] >= 0 && made_at[t->node->in[j]] > i) return 0;
    return 1;
}

/* Whether step t, the one reader of Conv i's output v, is a
 * BatchNormalization the Conv may compute too: inference, one output, X
 * v, its four parameters ready when the Conv runs (parameters or
 * constants, as exports write them; values of steps before i would do). */
static int bn_after(const bf_plan *p, int i, int t, int v, const int *made_at)
{
    const bf__step *s = &p->steps[t];
    if (t <= i || s->dyn || s->node->in[0] != v || s->node->out[0] < 0 || !bf__bnorm_of(s, NULL)) return 0;
    for (int j = 1; j < 5; j++)
        if (made_at[s->node->in[j]] > i) return 0;
    return same_f32_shape(&p->vals[v], &p->vals[s->node->out[0]]);
}

/* Whether step a, the one reader of MatMul i's output v, is a bias Add the
 * MatMul may compute in its product's epilogue (op.h, bf__act's cbias): a
 * float Add of v and a value b of N floats broadcast along v's last axis
 * (b's dims all 1 but its last, N, its rank at most v's: a Linear's bias),
 * b ready when the MatMul runs; the Add's output of v's very shape. */
static int bias_add(const bf_plan *p, int i, int a, int v, const int *made_at)
{
    const bf__step *t = &p->steps[a];
    if (a <= i || t->dyn || strcmp(t->node->op_type, "Add") != 0 || t->node->n_in != 2 || t->n_out != 1 ||
        !bf__binary_f32(t))
        return 0;
    int x0 = t->node->in[0], x1 = t->node->in[1], w = t->node->out[0];
    int o = x0 == v ? x1 : x0;
    if ((x0 == v) == (x1 == v) || o < 0 || w < 0 || made_at[o] > i) return 0;
    const bf_tensor *b = &p->vals[o], *y = &p->vals[v];
    if (b->dtype != BF_F32 || y->ndim < 1 || b->ndim < 1 || b->ndim > y->ndim ||
        b->dims[b->ndim - 1] != y->dims[y->ndim - 1])
        return 0;
    for (int d = 0; d < b->ndim - 1; d++)
        if (b->dims[d] != 1) return 0;
    return same_f32_shape(y, &p->vals[w]);
}

/* The MatMul -> Add(bias) [-> Gelu] chains (docs/ENGINE.md, "A bias and
 * Gelu fused into the MatMul"): step i a MatMul of one weight matrix whose
 * output only a bias Add reads, then that Add's one reader if it is a Gelu
 * of it (erf form; no graph output), else the Add alone (a ViT's QKV
 * product, whose Add output its Slices read). In plans that fuse (p->fuse:
 * not the differential engine's, whose row mode re-runs a chain's steps
 * from its product), a residual Add as the bias Add's one reader joins the
 * chain instead of a Gelu (residual_add's rules: a ViT's mlp.3, x + (h @ W
 * + b)), added in the epilogue after the bias (op.h, bf__act's res). 1 when
 * step i fuses. */
static int matmul_chain(bf_plan *p, int i, int v, const int *readers, const int *reader, const int *made_at)
{
    const bf__step *s = &p->steps[i];
    if (!bf__matmul_epi(s) || !bias_add(p, i, reader[v], v, made_at)) return 0;
    int a = reader[v], w = p->steps[a].node->out[0], r = a;
    if (readers[w] == 1 && reader[w] > a) {
        const bf__step *g = &p->steps[reader[w]];
        int rr;
        if (!g->dyn && bf__unary_gelu(g) && g->node->in[0] == w && g->n_out == 1 && g->node->out[0] >= 0)
            r = reader[w];
        else if (p->fuse && residual_add(p, i, reader[w], w, readers, reader, made_at, &rr))
            r = reader[w];
    }
    p->fuse_to[i] = r;
    p->fuse_add[i] = a;
    p->fuse_bn[i] = 0;
    if (r != a) p->fuse_mid[a] = 1;
    p->n_fusable++;
    return 1;
}

/* A batched MatMul -> Softmax (a transformer's attention scores, ViT-S/16's
 * [24, 197, 197] at batch 4), in plans that fuse (p->fuse: eval, exact
 * campaigns; not the differential engine's, which recompute a MatMul's
 * rows from its own output): step r, the one reader of MatMul i's output
 * v, a float Softmax of v over its last axis (contiguous rows of v's last
 * dim). The MatMul then runs the Softmax's row kernel on each output
 * matrix right after its product (op.h, bf__ctx's rowmap), while the matrix
 * is in cache, in place in the Softmax's output (the pair's values share
 * their bytes, plan_build.c): each row the Softmax step's own function of
 * the same floats, so the same bits. 1 when step i fuses. */
static int matmul_softmax(bf_plan *p, int i, int v, const int *reader)
{
    int r = reader[v];
    int64_t rows, n;
    const bf_tensor *y = &p->vals[v];
    if (!p->fuse || r <= i || !bf__matmul_rows_epi(&p->steps[i]) || p->steps[r].dyn ||
        !bf__softmax_rows(&p->steps[r], &rows, &n) || p->steps[r].node->in[0] != v ||
        p->steps[r].node->out[0] < 0 || y->ndim < 1 || n != y->dims[y->ndim - 1] ||
        rows * n != bf_tensor_numel(y) || !same_f32_shape(y, &p->vals[p->steps[r].node->out[0]]))
        return 0;
    p->fuse_to[i] = r;
    p->fuse_add[i] = p->fuse_bn[i] = 0;
    p->n_fusable++;
    return 1;
}

/* Per value: readers[v] its readers (a graph output counts 2 more, so it
 * is never a value only one step reads), reader[v] the last step reading
 * it, made_at[v] its step + 1 (0: made by no step). BF_ENOMEM, nothing
 * left allocated, when the tables cannot be had. */
static bf_status reader_tables(const bf_plan *p, int **readers_out, int **reader_out, int **made_at_out)
{
    const bf_model *m = p->model;
    int *readers = bf__calloc(m->n_values + 1, sizeof *readers), *reader = bf__calloc(m->n_values + 1, sizeof *reader);
    int *made_at = bf__calloc(m->n_values + 1, sizeof *made_at);
    if (!readers || !reader || !made_at) {
        bf__free(readers), bf__free(reader), bf__free(made_at);
        return BF_ENOMEM;
    }
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__node *nd = p->steps[i].node;
        for (int j = 0; j < nd->n_in; j++)
            if (nd->in[j] >= 0) readers[nd->in[j]]++, reader[nd->in[j]] = (int)i;
        for (int j = 0; j < nd->n_out; j++)
            if (nd->out[j] >= 0) made_at[nd->out[j]] = (int)i + 1;
    }
    for (size_t i = 0; i < m->n_outputs; i++) readers[m->output_vals[i]] += 2;
    *readers_out = readers, *reader_out = reader, *made_at_out = made_at;
    return BF_OK;
}

/* The Conv + activation pairs a run may fuse (bf_plan_opts.fuse_activations)
 * and, in plans that fuse, Gemm + Relu or Clip pairs (the same rules, no BN
 * or residual Add), and the Conv + residual Add (+ activation) runs of residual_add, where
 * "its output" below is the Add's:
 * step i a Conv, a later step r a float Relu or Clip reading its output,
 * which no other input slot of any step reads and which is no graph
 * output. Nothing else may need the Conv's own output, which a fused run
 * never writes; value faults are the one reader that comes and goes, and
 * bf_plan_run checks for them each run. The steps between i and r read
 * neither the Conv's output (r alone does) nor r's (computed at r in graph
 * order), but a Clip's bounds must be ready at step i already: constants,
 * parameters, graph inputs or values of steps before i. */
bf_status bf__plan_find_fusions(bf_plan *p, bf_error *err)
{
    int *readers, *reader, *made_at;
    if (reader_tables(p, &readers, &reader, &made_at) != BF_OK) return oom(err);
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int v = s->n_out == 1 ? s->node->out[0] : -1;
        if (s->dyn || v < 0 || readers[v] != 1 || matmul_chain(p, (int)i, v, readers, reader, made_at) ||
            matmul_softmax(p, (int)i, v, reader))
            continue;
        if (!bf__conv_step(s)) {
            /* Gemm -> Relu or Clip (an MLP's layers), in passes that fuse
             * (p->fuse: eval, exact campaigns) and not in the differential
             * engine's plans, which recompute a Gemm's rows and columns
             * and read its own output */
            int r = reader[v];
            /* Relu or Clip (an act_after that is no unary map but Relu:
             * Clip), never HardSwish, which only the Conv's own pass applies */
            if (p->fuse && bf__gemm_step(s) && act_after(p, (int)i, r, v, made_at) &&
                (bf__unary_relu(&p->steps[r]) || !bf__unary_f32(&p->steps[r]))) {
                p->fuse_to[i] = r;
                p->n_fusable++;
            }
            continue;
        }
        int r = reader[v], a = 0, bn = 0, rr;
        if (bn_after(p, (int)i, r, v, made_at)) {
            /* Conv -> BatchNormalization (exports that keep the BN, as a
             * fault campaign on its parameters wants): the chain goes on
             * from the BN's output, or ends there (its output then written
             * by the Conv) */
            bn = r;
            v = p->steps[bn].node->out[0];
            if (readers[v] != 1) {
                p->fuse_to[i] = p->fuse_bn[i] = bn;
                p->n_fusable++;
                continue;
            }
            r = reader[v];
        }
        if (residual_add(p, (int)i, r, v, readers, reader, made_at, &rr)) {
            /* Conv -> Add -> activation, or Conv -> Add alone (the Add's
             * output then written by the Conv: mobilenet's bottlenecks) */
            a = r;
            r = rr >= 0 && act_after(p, (int)i, rr, p->steps[a].node->out[0], made_at) ? rr : a;
        } else if (!act_after(p, (int)i, r, v, made_at)) {
            if (!bn) continue;
            r = bn;   /* Conv -> BN alone */
        }
        p->fuse_to[i] = r;
        p->fuse_add[i] = a;
        p->fuse_bn[i] = bn;
        if (a && r != a) p->fuse_mid[a] = 1;
        if (bn && r != bn) p->fuse_mid[bn] = 1;
        p->n_fusable++;
    }
    bf__free(readers), bf__free(reader), bf__free(made_at);
    return BF_OK;
}

/* A Transpose swapping the last two dims of X (rank 3 or more) whose only
 * reader is a batched MatMul taking it as B with X as A (a DLRM's
 * interaction, X @ X^T): the MatMul can read X transposed instead, the same
 * floats into the same chains, and the Transpose's copy ([1024, 27, 16],
 * 3.1% of the Criteo-shaped DLRM's pass) need not run. X is alive at the
 * MatMul (its A). Only in plans that fuse (plan_impl.h, tfold). */
void bf__plan_find_tfolds(bf_plan *p)
{
    const bf_model *m = p->model;
    for (size_t t = 0; p->fuse && t < p->n_steps; t++) {
        const bf__step *s = &p->steps[t];
        if (s->dyn || strcmp(s->node->op_type, "Transpose") != 0 || s->n_in != 1 || s->n_out != 1) continue;
        const bf_tensor *x = s->in[0];
        int r = x ? x->ndim : 0, n_perm = 0;
        int64_t perm[BF_MAX_DIMS];
        if (r < 3 || x->dtype != BF_F32 ||
            bf__attr_ints(s->node, "perm", perm, BF_MAX_DIMS, &n_perm, NULL) != BF_OK || n_perm != r)
            continue;
        int swap = perm[r - 1] == r - 2 && perm[r - 2] == r - 1;
        for (int d = 0; swap && d < r - 2; d++) swap = perm[d] == d;
        int v = s->node->out[0], readers = 0;
        size_t j = 0;
        for (size_t i = 0; swap && i < m->n_outputs; i++) swap = m->output_vals[i] != v;
        for (size_t i = t + 1; swap && i < p->n_steps; i++)
            for (int q = 0; q < p->steps[i].node->n_in; q++)
                if (p->steps[i].node->in[q] == v) readers++, j = i;
        if (!swap || readers != 1) continue;
        const bf__step *mm = &p->steps[j];
        if (mm->dyn || mm->node->in[1] != v || mm->node->in[0] != s->node->in[0] || !bf__matmul_tfold(mm)) continue;
        if (!p->tab.tfold && !(p->tab.tfold = bf__calloc(p->n_steps + 1, sizeof *p->tab.tfold))) return;
        p->tab.tfold[t] = (int)j + 1;
        p->tab.tfold[j] = (int)t + 1;
    }
}

/* Consecutive static Gathers of one constant index each from one input
 * (bf__gather_column: a detector's per-class score columns) grouped, so a
 * run reads each row of the input once for all of them (plan_impl.h,
 * gcol). Each writes its own output, at a step before its own: the bytes
 * must be free then, which they are when the outputs overlap neither each
 * other nor the input (a value live between the first step and a later one
 * is read at or after the later one, since only the group's steps run in
 * between and they read the input and constants alone, so the arena keeps
 * it apart). Only in plans that fuse. */
void bf__plan_find_gcols(bf_plan *p)
{
    for (size_t i = 0; p->fuse && i < p->n_steps;) {
        const bf__step *a = &p->steps[i];
        size_t j = i;
        if (bf__gather_column(a))
            while (j + 1 < p->n_steps && j + 1 - i < 256) {
                const bf__step *b = &p->steps[j + 1];
                if (!bf__gather_column(b) || b->node->in[0] != a->node->in[0] || !bf__gather_alike(a, b)) break;
                const char *bo = b->out[0]->data, *x = a->in[0]->data;
                size_t nb = bf_tensor_nbytes(b->out[0]), nx = bf_tensor_nbytes(a->in[0]);
                int apart = bo && x && (bo + nb <= x || x + nx <= bo);
                for (size_t k = i; apart && k <= j; k++) {
                    const char *ko = p->steps[k].out[0]->data;
                    apart = ko && (bo + nb <= ko || ko + bf_tensor_nbytes(p->steps[k].out[0]) <= bo);
                }
                if (!apart) break;
                j++;
            }
        if (j > i) {
            if (!p->tab.gcol && !(p->tab.gcol = bf__calloc(p->n_steps + 1, sizeof *p->tab.gcol))) return;
            p->tab.gcol[i] = (int)j;
        }
        i = j + 1;
    }
}

/* The 1x1 -> depthwise pairs (plan_impl.h, pwdw; linalg_conv_pwdw.c), and
 * the first Conv -> MaxPool pairs (linalg_conv_stpool.c) the same way: in
 * batched plans that fuse and share one arena (bitflip eval's; plan_build.c
 * asks in no other) and, for its pass alone, a campaign's golden pass
 * (diff/gcache.c, pass_pairs; a differential plan fuses its Conv chains
 * when its caller runs them so, not by p->fuse), a 1x1 Conv step i
 * whose output only its activation r reads (a Relu or Clip fused into it:
 * fuse_to, no BN or residual Add), r's output read by a depthwise Conv
 * step d alone (no graph output), d's weight and bias ready at step i, no
 * dynamic step from i to d, the shapes the pair's (bf__conv_pwdw_pair;
 * for a MaxPool d, bf__conv_stpool_pair).
 * The steps between i and d (other branches of the graph) read neither
 * r's output nor d's, so d's output may be written at i once the arena
 * keeps it apart from what lives then (plan_build.c extends its life). */
bf_status bf__plan_find_pwdw(bf_plan *p, size_t *floats, bf_error *err)
{
    *floats = 0;
    if (p->n_steps < 3) return BF_OK;
    int *readers, *reader, *made_at;
    if (reader_tables(p, &readers, &reader, &made_at) != BF_OK) return oom(err);
    bf_status st = BF_OK;
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int r = p->fuse_to[i];
        if (s->dyn || r <= (int)i || p->fuse_add[i] || p->fuse_bn[i] || p->steps[r].n_out != 1) continue;
        int w = p->steps[r].node->out[0];
        if (w < 0 || readers[w] != 1 || reader[w] <= r) continue;
        int d = reader[w], ok = 1;
        const bf__step *t = &p->steps[d];
        if (t->node->n_in < 1 || t->node->in[0] != w || t->n_out != 1) continue;
        for (int k = (int)i + 1; k <= d; k++) ok &= !p->steps[k].dyn;
        for (int j = 1; j < t->node->n_in; j++)
            if (t->node->in[j] >= 0 && made_at[t->node->in[j]] > (int)i) ok = 0;
        /* a depthwise Conv, or a MaxPool after a first Conv (linalg_conv_stpool.c) */
        int64_t need = !ok ? 0 : t->node->n_in < 2 ? bf__conv_stpool_pair(s, t) : bf__conv_pwdw_pair(s, t);
        if (!need) continue;
        if (!p->tab.pwdw && !(p->tab.pwdw = bf__calloc(p->n_steps + 1, sizeof *p->tab.pwdw))) {
            st = oom(err);
            break;
        }
        p->tab.pwdw[i] = d;
        if ((size_t)need > *floats) *floats = (size_t)need;
    }
    bf__free(readers), bf__free(reader), bf__free(made_at);
    return st;
}

/* Each Gemm or MatMul step whose product packs a weight B whole at every
 * call: the model's copy of it packed once (base/wpack.h), shared by the
 * model's plans. Best effort: without memory for it a step packs per call
 * as before. */
static void find_packed(bf_plan *p)
{
    const bf_model *root = p->model;
    while (root->base) root = root->base;
    if (!root->wpack) return;
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int v = s->n_in > 1 && !s->dyn ? s->node->in[1] : -1;
        if (v < 0 || !s->in[1] || p->model->values[v].kind != BF__VAL_PARAM) continue;
        size_t q = (size_t)p->model->values[v].index;
        if (s->in[1]->data != p->model->params[q].tensor->data) continue;
        const float *w = bf__linalg_packed(s, root->wpack);
        if (!w) continue;
        if (!p->tab.packed && !(p->tab.packed = bf__calloc(p->n_steps + 1, sizeof *p->tab.packed))) return;
        p->tab.packed[i] = w;
    }
}

/* plan_impl.h, bf__plan_tables: row_step first, then the tables whose
 * lack only costs speed (packed, tfold, gcol, csel: csel needs val_step),
 * so a refused allocation among those leaves a plan that runs as steps
 * (test_matmul_fuse and test_plan_dyn count on it). */
bf_status bf__plan_tables_find(bf_plan *p, bf_error *err)
{
    if (!(p->tab.row_step = bf__calloc(p->n_steps + 1, 1))) return oom(err);
    for (size_t i = 0; i < p->n_steps; i++) {
        const bf__step *s = &p->steps[i];
        int v = s->n_in > 0 ? s->node->in[0] : -1;
        p->tab.row_step[i] = !s->dyn && v >= 0 && p->model->values[v].kind == BF__VAL_PARAM && bf__row_lookup(s);
    }
    find_packed(p);
    bf__plan_find_tfolds(p);
    bf__plan_find_gcols(p);
    bf__plan_find_csels(p);
    return BF_OK;
}

void bf__plan_tables_free(bf_plan *p)
{
    bf__free(p->tab.packed);
    bf__free(p->tab.tfold);
    bf__free(p->tab.gcol);
    bf__free(p->tab.pwdw);
    bf__free(p->tab.row_step);
    bf__plan_free_csels(p);
    p->tab = (bf__plan_tables){0};
}
