/* Clipping in the graph: bf.Clip nodes after the chosen outputs, with
 * bounds fixed or profiled on the golden pass over the eval set. */
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/eval.h"
#include "exec/step_access.h"
#include "mitigate/mitigate_edit.h"

static int clip_default(const bf_model *m, const bf__node *n)
{
    if (strcmp(n->op_type, "Gemm") && strcmp(n->op_type, "MatMul") && strcmp(n->op_type, "Conv")) return 0;
    for (size_t i = 0; i < m->n_outputs; i++)
        if (m->output_vals[i] == n->out[0]) return 0;   /* the model's last: its outputs stay as computed */
    return 1;
}

static int clip_named(const bf_clip_opts *o, const bf__node *n, const char *value)
{
    for (size_t i = 0; i < o->n_at; i++) {
        const char *p = o->at[i];
        if (strncmp(p, "op:", 3) == 0 ? strcmp(n->op_type, p + 3) == 0 : strcmp(p, value) == 0 || fnmatch(p, value, 0) == 0)
            return 1;
    }
    return 0;
}

/* Values of one clipped output over the eval set: min, max, or a sample
 * of them for a percentile. */
typedef struct prof {
    int v;
    double lo, hi;
    float *vals;
    int64_t n, cap, seen;
} prof;

#define PROFILE_KEEP (INT64_C(1) << 20)   /* values kept per output for a percentile */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static bf_status profile(const bf_model *m, const bf_dataset *ds, const float *const *stored, int64_t batch,
                         double pct, prof *pr, size_t n_pr, bf_error *err)
{
    bf_evaluator *ev = NULL;
    bf_eval_opts eo = {.batch = batch, .threads = 1};
    bf_status st = bf_evaluator_create(m, ds, &eo, &ev, err);
    for (size_t p = 0; st == BF_OK && stored && p < m->n_params; p++)
        if (stored[p]) st = bf_evaluator_set_param(ev, p, stored[p], err);
    if (st != BF_OK) {
        bf_evaluator_free(ev);
        return st;
    }
    int64_t samples = bf_dataset_num_samples(ds), b = bf_evaluator_batch(ev);
    for (size_t i = 0; i < n_pr; i++) pr[i].lo = INFINITY, pr[i].hi = -INFINITY;
    for (int64_t start = 0; start < samples && st == BF_OK; start += b) {
        int64_t rows = samples - start < b ? samples - start : b;
        bf_plan *p = bf__evaluator_plan(ev, rows != b);
        for (size_t i = 0; i < m->n_inputs && st == BF_OK; i++)
            st = bf_dataset_copy_rows(bf__evaluator_feed(ev, i), start, rows, bf_plan_input(p, i), err);
        if (st == BF_OK) st = bf_plan_run(p, err);
        for (size_t i = 0; i < n_pr && st == BF_OK; i++) {
            const bf_tensor *t = bf_plan_value(p, pr[i].v);
            const float *x = t->data;
            int64_t n = bf_tensor_numel(t);
            for (int64_t j = 0; j < n; j++) {
                if (!isfinite(x[j])) continue;
                if (x[j] < pr[i].lo) pr[i].lo = x[j];
                if (x[j] > pr[i].hi) pr[i].hi = x[j];
                if (pct >= 100) continue;
                /* keep every value until PROFILE_KEEP, then every other one, ... */
                int64_t seen = pr[i].seen++;
                if (seen % (1 + seen / PROFILE_KEEP) != 0) continue;
                if (pr[i].n == pr[i].cap) {
                    int64_t cap = pr[i].cap ? 2 * pr[i].cap : 4096;
                    float *v = bf__realloc(pr[i].vals, (size_t)cap * sizeof *v);
                    if (!v) {
                        st = bf__edit_oom(err);
                        break;
                    }
                    pr[i].vals = v;
                    pr[i].cap = cap;
                }
                pr[i].vals[pr[i].n++] = x[j];
            }
        }
    }
    bf_evaluator_free(ev);
    if (st != BF_OK || pct >= 100) return st;
    for (size_t i = 0; i < n_pr; i++) {
        if (pr[i].n == 0) continue;
        qsort(pr[i].vals, (size_t)pr[i].n, sizeof(float), cmp_float);
        double q = pct / 100 * (double)(pr[i].n - 1);
        pr[i].hi = pr[i].vals[(int64_t)ceil(q)];
        pr[i].lo = pr[i].vals[(int64_t)floor((double)(pr[i].n - 1) - q)];
    }
    return BF_OK;
}

bf_status bf__clip_insert(bf__edit *e, const bf_dataset *ds, const float *const *stored, int64_t batch,
                              const bf_clip_opts *o, bf_error *err)
{
    const bf_model *base = e->m->base;
    size_t n_pr = 0;
    prof *pr = bf__calloc(base->n_nodes + 1, sizeof *pr);
    int *node_of = bf__calloc(base->n_nodes + 1, sizeof *node_of);
    bf_status st = BF_OK;
    if (!pr || !node_of) st = bf__edit_oom(err);
    for (size_t i = 0; st == BF_OK && i < base->n_nodes; i++) {
        const bf__node *n = &base->nodes[i];
        if (n->n_out < 1 || n->out[0] < 0) continue;
        int y = n->out[0];
        if (!(o->n_at ? clip_named(o, n, base->values[y].name) : clip_default(base, n))) continue;
        pr[n_pr].v = y;
        node_of[n_pr++] = (int)i;
    }
    if (st == BF_OK && o->n_at && n_pr == 0)
        st = bf_error_set(err, BF_ENOTFOUND, "clip: no node output matches the names given in 'at'");
    if (st == BF_OK && o->bounds == BF_CLIP_PROFILE)
        st = profile(base, ds, stored, batch, o->percentile > 0 ? o->percentile : 100, pr, n_pr, err);
    for (size_t i = 0; st == BF_OK && i < n_pr; i++) {
        const bf__node *n = &base->nodes[node_of[i]];
        int y = pr[i].v;
        float lo = o->bounds == BF_CLIP_FIXED ? o->lo : (float)pr[i].lo;
        float hi = o->bounds == BF_CLIP_FIXED ? o->hi : (float)pr[i].hi;
        if (!(lo <= hi)) lo = -INFINITY, hi = INFINITY;   /* nothing finite seen: clip only NaN (if asked) */
        bf__attr *a = bf__edit_own(e, bf__calloc(5, sizeof *a));
        if (!a) {
            st = bf__edit_oom(err);
            break;
        }
        size_t na = 0;
        bf__edit_attr_set_float(a, &na, "lo", lo);
        bf__edit_attr_set_float(a, &na, "hi", hi);
        bf__edit_attr_set_int(a, &na, "zero", o->zero);
        bf__edit_attr_set_int(a, &na, "nan", o->nan_to_zero);
        int from = e->cur[y];
        const char *nm = n->name && *n->name ? n->name : base->values[y].name;
        int z = bf__edit_add_node(e, node_of[i], bf__edit_own_str(e, nm, "#clip"), "bf.Clip", bf__op_find_internal("bf.Clip"), &from, 1,
                         a, na, bf__edit_own_str(e, base->values[y].name, "#clip"));
        if (z < 0) {
            st = bf__edit_oom(err);
            break;
        }
        bf__edit_rewire(e, from, z, e->m->n_nodes - 1, e->m->n_nodes);
        /* the ABFT check (if any) reads y itself and was inserted before */
        e->cur[y] = z;
    }
    for (size_t i = 0; pr && i < n_pr; i++) bf__free(pr[i].vals);
    bf__free(pr);
    bf__free(node_of);
    return st;
}
