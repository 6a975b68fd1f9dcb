/* Evaluation: the eval set through a model in batches, one plan per thread.
 * Threads take batches from a shared counter; each batch's outputs land at
 * its own rows, so the result does not depend on the thread count. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "bitflip/eval.h"
#include "bitflip/metrics.h"
#include "bitflip/plan.h"
#include "exec/eval_det.h"
#include "exec/eval_ckpt.h"
#include "exec/eval_labels.h"
#include "exec/eval_ragged.h"
#include "exec/metrics_seg.h"
#include "exec/step_access.h"
#include "exec/plan_impl.h"

#define DEFAULT_BATCH 256

/* One per thread; worker 0 is the thread that calls bf_evaluator_run. */
typedef struct worker {
    bf_evaluator *ev;
    bf_plan *plan;
    int reports;              /* this worker calls the progress callback */
    bf_value_fault *vf;       /* the value faults of the batch at hand, rows in it */
    size_t *vf_of;            /* which of ev->vf each one is */
    bf_status st;
    bf_error err;
} worker;

struct bf_evaluator {
    const bf_model *model;
    const bf_dataset *ds;
    int64_t batch, samples, out_cols;
    int threads;
    bf_task task;
    bf_progress_fn progress;
    void *progress_user;
    const int *cancel;
    bf_plan **plans;          /* threads full-batch plans, then the remainder's */
    size_t n_plans;
    bf_plan *rest;            /* plan for the last, partial batch (or NULL) */
    int fuse;                 /* the plans fuse Conv activations (bf_eval_opts) */
    const bf_tensor **feeds;  /* dataset tensor per graph input */
    bf__eval_labels lab;      /* what the pass is scored against (eval_labels.h) */
    float *outputs;
    /* one-sample graphs (inputs without the batch dim): batch 1, and every
     * graph output kept per sample (eval_ragged.h); rag_base, if set
     * (bf__evaluator_ragged_base), is what bf_evaluator_run_sample takes the
     * other samples' outputs from */
    int unbatched;
    bf__ragged rag;
    const bf_ragged_output *rag_base;
    bf__eval_ckpt ckp;        /* one-sample graphs: the golden checkpoints (eval_ckpt.h) */
    bf__eval_det det;         /* detection: its outputs, ground truth, a pass's views (eval_det.h) */
    bf_nms_ties *nms;         /* one-sample graphs: NMS near-ties recorded here (bf_eval_opts.nms_ties), or NULL */
    bf_value_fault *vf;       /* value faults, by eval-set sample */
    size_t n_vf, vf_cap;
    float *vf_old, *vf_new;   /* what each saw in the last run */
    int64_t *vf_at;           /* ... and where: element, the value's elements there (pairs) */

    /* Worker threads live as long as the evaluator: a pass over a small eval
     * set takes a fraction of a millisecond, less than creating threads. */
    worker *ws;
    pthread_t *tids;
    int n_started;            /* pool threads running (workers 1..n_started) */
    pthread_mutex_t mu;
    pthread_cond_t go, finished;
    int pool_ready;           /* mu and the conds are initialised */
    uint64_t generation;      /* bumped once per pass */
    int remaining;            /* pool threads still in the current pass */
    int shutdown;
    atomic_llong next, done;  /* next batch to take; samples finished */
    atomic_int failed;        /* set by the first worker to fail: the rest stop */
};

static bf_status start_pool(bf_evaluator *ev, bf_error *err);
static void stop_pool(bf_evaluator *ev);

const char *bf_task_name(bf_task t)
{
    switch (t) {
    case BF_TASK_CLASSIFICATION: return "classification";
    case BF_TASK_BINARY: return "binary";
    case BF_TASK_LANGUAGE_MODEL: return "language_model";
    case BF_TASK_DETECTION: return "detection";
    case BF_TASK_SEGMENTATION: return "segmentation";
    case BF_TASK_NONE: break;
    }
    return "none";
}

void bf_evaluator_free(bf_evaluator *ev)
{
    if (!ev) return;
    stop_pool(ev);
    for (int t = 0; ev->ws && t < ev->threads; t++) {
        bf__free(ev->ws[t].vf);
        bf__free(ev->ws[t].vf_of);
    }
    bf__free(ev->ws);
    bf__free(ev->vf);
    bf__free(ev->vf_old);
    bf__free(ev->vf_new);
    bf__free(ev->vf_at);
    bf__free(ev->tids);
    for (size_t i = 0; i < ev->n_plans; i++) bf_plan_free(ev->plans[i]);
    bf__free(ev->plans);
    bf__free(ev->feeds);
    bf__eval_labels_free(&ev->lab);
    bf__free(ev->outputs);
    bf__ragged_free(&ev->rag);
    bf__eval_det_free(&ev->det);
    bf__eval_ckpt_free(&ev->ckp);
    bf__free(ev);
}

/* The eval tensor t has one dim more than graph input vi, whose dim 0 is
 * fixed: vi takes one sample per call (a graph input whose dim 0 is
 * symbolic takes a batch: [batch, T] against [N, T, X] is a wrong eval set,
 * not one sample per call). The one rule bind_inputs and
 * bf__eval_set_unbatched share. */
static int one_sample_rank(const bf_model *m, const bf_value_info *vi, const bf_tensor *t)
{
    if (m->per_call)   /* fed as a batch of one (bf__model_per_call) */
        return t->ndim == vi->ndim && vi->ndim > 0 && vi->dims[0] == 1;
    return t->ndim == vi->ndim + 1 && (vi->ndim == 0 || vi->dims[0] >= 0);
}

static bf_status bind_inputs(bf_evaluator *ev, bf_error *err)
{
    const bf_model *m = ev->model;
    const bf_dataset *ds = ev->ds;
    ev->samples = bf_dataset_num_samples(ds);
    if (ev->samples < 1) return bf_error_set(err, BF_EINVAL, "the eval set has no samples");
    for (size_t i = 0; i < m->n_inputs; i++) {
        const bf_value_info *vi = &m->inputs[i];
        const bf_tensor *t = bf_dataset_find(ds, vi->name);
        char a[96], b[96];
        if (!t) {
            char names[256] = "";
            for (size_t k = 0, off = 0; k < bf_dataset_num_tensors(ds) && off < sizeof names - 1; k++) {
                int w = snprintf(names + off, sizeof names - off, "%s'%s'", k ? ", " : "", bf_dataset_tensor(ds, k)->name);
                if (w < 0) break;
                off += (size_t)w;
            }
            return bf_error_set(err, BF_ENOTFOUND, "the eval set has no tensor named '%s' for graph input '%s' (it has %s)",
                                vi->name, vi->name, names);
        }
        /* a one-sample graph ([3, H, W] against an eval set's [N, 3, H, W])
         * when every input is one dim short and fits the sample's shape */
        int one = one_sample_rank(m, vi, t) && (i == 0 || ev->unbatched);
        int off = m->per_call ? 0 : 1;   /* the eval tensor's dim that graph dim d faces, less d */
        for (int d = 1 - off; one && d < vi->ndim; d++) one = vi->dims[d] < 0 || vi->dims[d] == t->dims[d + off];
        int ok = t->ndim == vi->ndim && !(i > 0 && ev->unbatched);
        for (int d = 1; ok && d < vi->ndim; d++) ok = vi->dims[d] < 0 || vi->dims[d] == t->dims[d];
        if (one) ok = 1;
        if (i == 0) ev->unbatched = one;
        if (!ok) {
            /* the declared shape, with symbolic dims by name: [batch, 1, 8, 8] */
            size_t off = (size_t)snprintf(b, sizeof b, "[");
            for (int d = 0; d < vi->ndim && off < sizeof b; d++)
                off += vi->dims[d] >= 0 ? (size_t)snprintf(b + off, sizeof b - off, "%s%lld", d ? ", " : "", (long long)vi->dims[d])
                                        : (size_t)snprintf(b + off, sizeof b - off, "%s%s", d ? ", " : "",
                                                           vi->dim_names[d] ? vi->dim_names[d] : "?");
            if (off < sizeof b) snprintf(b + off, sizeof b - off, "]");
            return bf_error_set(err, BF_ESHAPE, "eval tensor '%s' has shape %s; graph input '%s' wants %s (dim 0 is the sample%s)",
                                vi->name, bf_shape_str(t->dims, t->ndim, a, sizeof a), vi->name, b,
                                ev->unbatched ? ", and the first input takes one sample per call, so this one must too"
                                              : "; or one dim more than the graph input, for a graph that takes one sample");
        }
        if ((vi->dtype == BF_I64 || vi->dtype == BF_I32) && (t->dtype == BF_F32 || t->dtype == BF_F16 || t->dtype == BF_BF16))
            return bf_error_set(err, BF_EFORMAT, "eval tensor '%s' is %s but graph input '%s' takes integer indices (%s)",
                                vi->name, bf_dtype_name(t->dtype), vi->name, bf_dtype_name(vi->dtype));
        ev->feeds[i] = t;
    }
    return BF_OK;
}

bf_status bf__eval_check_inputs(const bf_model *m, const bf_dataset *ds, bf_error *err)
{
    bf_evaluator ev = {.model = m, .ds = ds};
    ev.feeds = bf__calloc(m->n_inputs + 1, sizeof *ev.feeds);
    if (!ev.feeds) return bf_error_set(err, BF_ENOMEM, "out of memory");
    bf_status st = bind_inputs(&ev, err);
    bf__free(ev.feeds);
    return st;
}

/* A one-sample graph's outputs: kept per sample; output 0 also as the
 * evaluator's outputs (out_cols a sample) when its size is not data, so
 * the tasks and campaigns that read those work on such graphs too. */
static bf_status bind_unbatched(bf_evaluator *ev, const bf_tensor *o, bf_error *err)
{
    bf_status st = bf__ragged_init(&ev->rag, ev->model, ev->samples, err);
    if (st != BF_OK) return st;
    ev->out_cols = o->dtype == BF_F32 && bf__plan_output_static(ev->plans[0], 0) ? bf_tensor_numel(o) : 0;
    return BF_OK;
}

bf_status bf_evaluator_create(const bf_model *model, const bf_dataset *ds, const bf_eval_opts *opts,
                              bf_evaluator **out, bf_error *err)
{
    bf_status st = BF_OK;
    bf_evaluator *ev = bf__calloc(1, sizeof *ev);
    *out = NULL;
    if (!ev) return bf_error_set(err, BF_ENOMEM, "out of memory");
    ev->model = model;
    ev->ds = ds;
    int auto_batch = !opts || opts->batch <= 0;
    ev->batch = auto_batch ? DEFAULT_BATCH : opts->batch;
    ev->threads = opts && opts->threads > 0 ? opts->threads : 1;
    if (ev->threads > 64) ev->threads = 64;   /* bf_evaluator_run keeps workers on its stack */
    if (opts) {
        ev->progress = opts->progress;
        ev->progress_user = opts->progress_user;
        ev->cancel = opts->cancel;
    }
    ev->feeds = bf__calloc(model->n_inputs + 1, sizeof *ev->feeds);
    if (!ev->feeds) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
    if ((st = bind_inputs(ev, err)) != BF_OK) goto out;

    /* A model with a fixed batch dimension runs with that batch; one that
     * takes a sample per call, one at a time. */
    for (size_t i = 0; i < model->n_inputs && !ev->unbatched; i++)
        if (model->inputs[i].ndim > 0 && model->inputs[i].dims[0] > 0) ev->batch = model->inputs[i].dims[0];
    if (ev->unbatched) ev->batch = 1;
    if (auto_batch && ev->threads > 1 && ev->samples < ev->batch * ev->threads)
        ev->batch = (ev->samples + ev->threads - 1) / ev->threads;
    if (ev->batch > ev->samples) ev->batch = ev->samples;
    int64_t n_batches = (ev->samples + ev->batch - 1) / ev->batch;
    if (ev->threads > n_batches) ev->threads = (int)n_batches;
    int64_t rest = ev->samples % ev->batch;

    ev->fuse = opts && opts->fuse_activations;
    ev->nms = opts ? opts->nms_ties : NULL;
    bf_plan_opts po = {.share_buffers = opts && opts->share_buffers, .fuse_activations = ev->fuse, .unbatched = ev->unbatched,
                       .max_run_bytes = opts ? opts->max_run_bytes : 0};
    ev->plans = bf__calloc((size_t)ev->threads + 2, sizeof *ev->plans);
    if (!ev->plans) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
    for (int t = 0; t < ev->threads; t++) {
        if ((st = bf_plan_create_opts(model, ev->batch, &po, &ev->plans[ev->n_plans], err)) != BF_OK) goto out;
        ev->n_plans++;
    }
    if (rest) {
        for (size_t i = 0; i < model->n_inputs && !ev->unbatched; i++)
            if (model->inputs[i].ndim > 0 && model->inputs[i].dims[0] > 0) {
                st = bf_error_set(err, BF_ESHAPE, "graph input '%s' has a fixed batch of %lld, which does not divide the %lld eval samples",
                                  model->inputs[i].name, (long long)model->inputs[i].dims[0], (long long)ev->samples);
                goto out;
            }
        if ((st = bf_plan_create_opts(model, rest, &po, &ev->plans[ev->n_plans], err)) != BF_OK) goto out;
        ev->rest = ev->plans[ev->n_plans++];
    }

    const bf_tensor *o = bf_plan_output(ev->plans[0], 0);
    if (ev->unbatched) {
        if ((st = bind_unbatched(ev, o, err)) != BF_OK) goto out;
    } else if (!bf__plan_output_static(ev->plans[0], 0)) {
        /* an If or Loop (or a NonZero) bitflip runs as a dynamic step, in a graph that takes
         * whole batches: its output's shape is known only when it has run */
        const bf__step *d = NULL;
        for (size_t i = 0; i < ev->plans[0]->n_steps && !d; i++)
            if (ev->plans[0]->steps[i].dyn) d = &ev->plans[0]->steps[i];
        st = bf_error_set(err, BF_EUNSUPPORTED, "output '%s' has a shape that is data: it depends on node '%s' (%s), which "
                          "runs as a dynamic step (docs/OPS.md, \"Shapes that are data\"), and an evaluation over batches "
                          "needs each output's shape when the plan is built; export without that control flow, or as a graph "
                          "that takes one sample per call (no batch dimension, or a batch of 1: bitflip eval and run feed "
                          "it one sample at a time)",
                          model->outputs[0].name, d ? d->node->name : "?", d ? d->node->op_type : "?");
        goto out;
    } else if (o->dtype != BF_F32) {
        st = bf_error_set(err, BF_EUNSUPPORTED, "output '%s' is %s; evaluation reads float32 outputs",
                          model->outputs[0].name, bf_dtype_name(o->dtype));
        goto out;
    }
    if (!ev->unbatched && (o->ndim < 1 || o->dims[0] != ev->batch)) {
        char s[96];
        st = bf_error_set(err, BF_ESHAPE, "output '%s' has shape %s for a batch of %lld; evaluation needs the sample on dim 0",
                          model->outputs[0].name, bf_shape_str(o->dims, o->ndim, s, sizeof s), (long long)ev->batch);
        goto out;
    }
    if (!ev->unbatched) ev->out_cols = bf_tensor_numel(o) / ev->batch;
    ev->outputs = bf__malloc((size_t)(ev->samples * ev->out_cols + 1) * sizeof(float));
    if (!ev->outputs) { st = bf_error_set(err, BF_ENOMEM, "out of memory for outputs"); goto out; }
    if ((st = bf__eval_labels_bind(&ev->lab, model, ds, ev->samples, ev->out_cols, o, &ev->task, err)) != BF_OK) goto out;
    int det = 0;
    if (ev->task == BF_TASK_NONE && (st = bf__det_task_find(model, ds, ev->unbatched, &ev->det.task, &det, err)) != BF_OK)
        goto out;
    if (det) ev->task = BF_TASK_DETECTION;
    if ((st = start_pool(ev, err)) != BF_OK) goto out;
    *out = ev;
    ev = NULL;
out:
    bf_evaluator_free(ev);
    return st;
}

bf_task bf_evaluator_task(const bf_evaluator *ev) { return ev->task; }
int bf_evaluator_unbatched(const bf_evaluator *ev) { return ev->unbatched; }
const bf__det_task *bf__evaluator_det(const bf_evaluator *ev) { return &ev->det.task; }
int64_t bf_evaluator_batch(const bf_evaluator *ev) { return ev->batch; }

size_t bf_evaluator_num_fused(const bf_evaluator *ev)
{
    size_t sites = 0;
    if (ev->n_plans == 0 || !ev->fuse) return 0;
    bf_plan_num_fused(ev->plans[0], &sites);
    return sites;
}

/* --- a pass */


/* The value faults that hit batch [start, start + n) go to the plan, with
 * their rows in it; the plan keeps no others. */
static bf_status batch_value_faults(bf_evaluator *ev, worker *w, bf_plan *plan, int64_t start, int64_t n,
                                    size_t *count, bf_error *err)
{
    size_t m = 0;
    for (size_t k = 0; k < ev->n_vf; k++) {
        const bf_value_fault *f = &ev->vf[k];
        if (f->sample >= 0 && (f->sample < start || f->sample >= start + n)) continue;
        w->vf[m] = *f;
        if (f->sample >= 0) w->vf[m].sample = f->sample - start;
        w->vf_of[m++] = k;
    }
    *count = m;
    if (m == 0 && plan->n_vf == 0) return BF_OK;
    return bf_plan_set_value_faults(plan, w->vf, m, err);
}

/* Sample `s` of an eval tensor into a one-sample graph's input, which has
 * its shape without dim 0 (bind_inputs checked). */
bf_status bf__eval_feed_sample(const bf_tensor *src, int64_t s, bf_tensor *dst, bf_error *err)
{
    int64_t row = bf_tensor_numel(dst);
    const char *from = (const char *)src->data + (size_t)(s * row) * bf_dtype_size(src->dtype);
    bf_status st = bf_convert(dst->data, dst->dtype, from, src->dtype, (size_t)row, err);
    if (st && err) bf_error_prefix(err, "tensor '%s'", src->name ? src->name : "(unnamed)");
    return st;
}

int bf__eval_set_unbatched(const bf_model *m, const bf_dataset *ds)
{
    if (m->n_inputs == 0) return 0;
    const bf_tensor *t = bf_dataset_find(ds, m->inputs[0].name);
    return t && one_sample_rank(m, &m->inputs[0], t);
}

/* A one-sample graph's run: every output into the sample's slots, and
 * output 0 into the outputs when its size is not data. */
/* Where a sample's output-0 row goes: an image-major trial's own rows
 * (bf__evaluator_imaj), else the pass's outputs. */
static float *rows_to(const bf_evaluator *ev) { return ev->ckp.rag_to ? ev->ckp.out_to : ev->outputs; }

static bf_status keep_sample(bf_evaluator *ev, bf_plan *plan, int64_t s, bf_error *err)
{
    for (size_t k = 0; k < ev->model->n_outputs; k++) {
        bf_status st = bf__ragged_put(ev->ckp.rag_to ? ev->ckp.rag_to : &ev->rag, k, s, bf_plan_output(plan, k), err);
        if (st != BF_OK) return st;
    }
    if (ev->out_cols > 0)
        memcpy(rows_to(ev) + s * ev->out_cols, bf_plan_output(plan, 0)->data, (size_t)ev->out_cols * sizeof(float));
    return BF_OK;
}

/* The batch's run once its inputs are in the plan (run_batch). */
static bf_status run_fed(bf_evaluator *ev, worker *w, bf_plan *plan, int64_t start, size_t n_vf, bf_error *err)
{
    int64_t n = bf_plan_batch(plan);
    bf_status st;
    int golden = 0;
    if (ev->unbatched && ev->nms && start < ev->nms->samples) {
        /* the sample's record starts afresh (a skipped NMS, golden by the
         * checkpoints, records nothing: the runner asks on plain passes) */
        bf__nms_sample_reset(&ev->nms->s[start]);
        plan->nms = ev->nms;
        plan->nms_sample = start;
    } else {
        plan->nms = NULL;
    }
    st = ev->unbatched ? bf__eval_ckpt_run(&ev->ckp, plan, start, &golden, err) : bf_plan_run(plan, err);
    if (st != BF_OK) return st;
    /* each fault's report comes from the one batch that holds its sample
     * (sample 0 for every-sample faults), so one worker writes it */
    for (size_t j = 0; j < n_vf; j++) {
        size_t k = w->vf_of[j];
        if (ev->vf[k].sample < 0 && start != 0) continue;
        bf_plan_value_fault_seen(plan, j, &ev->vf_old[k], &ev->vf_new[k]);
        bf__plan_value_fault_at(plan, j, &ev->vf_at[2 * k], &ev->vf_at[2 * k + 1]);
    }
    if (golden) {   /* the checkpoints showed the rest of the run golden */
        if (ev->out_cols > 0)
            memcpy(rows_to(ev) + start * ev->out_cols, ev->ckp.out + start * ev->out_cols,
                   (size_t)ev->out_cols * sizeof(float));
        return ev->ckp.gold ? bf__ragged_copy_slot(ev->ckp.rag_to, ev->ckp.gold, start, err)
                            : bf__ragged_copy_sample(&ev->rag, ev->rag_base, start, err);
    }
    if (ev->unbatched) return keep_sample(ev, plan, start, err);
    memcpy(ev->outputs + start * ev->out_cols, bf_plan_output(plan, 0)->data,
           (size_t)(n * ev->out_cols) * sizeof(float));
    return BF_OK;
}

/* Up to this many graph inputs of a batch are read where the eval set holds
 * them (bf__plan_input_view); any further ones are copied, as all were, with
 * the same outputs. A bound so that their homes live on run_batch's stack
 * (no allocation a batch); 8 is over what any tested model feeds (one to
 * five inputs): docs/ENGINE.md, "An eval batch's input read in place". */
#define VIEW_INPUTS 8

static bf_status run_batch(bf_evaluator *ev, worker *w, bf_plan *plan, int64_t start, bf_error *err)
{
    const bf_model *m = ev->model;
    int64_t n = bf_plan_batch(plan);
    size_t n_vf = 0;
    /* the faults first: one on a graph input makes its rows a copy */
    bf_status st = batch_value_faults(ev, w, plan, start, n, &n_vf, err);
    if (st != BF_OK) return st;
    void *home[VIEW_INPUTS];
    unsigned char viewed[VIEW_INPUTS] = {0};
    for (size_t i = 0; i < m->n_inputs && st == BF_OK; i++) {
        if (ev->unbatched && bf__eval_ckpt_skips_value(&ev->ckp, m->input_vals[i])) continue;   /* read before the cut */
        if (!ev->unbatched && i < VIEW_INPUTS && (viewed[i] = (unsigned char)bf__plan_input_view(plan, i, ev->feeds[i], start, &home[i])))
            continue;
        st = ev->unbatched ? bf__eval_feed_sample(ev->feeds[i], start, bf_plan_input(plan, i), err)
                           : bf_dataset_copy_rows(ev->feeds[i], start, n, bf_plan_input(plan, i), err);
    }
    if (st == BF_OK) st = run_fed(ev, w, plan, start, n_vf, err);
    for (size_t i = 0; i < m->n_inputs && i < VIEW_INPUTS; i++)
        if (viewed[i]) bf__plan_input_home(plan, i, home[i]);
    return st;
}

static void work(worker *w)
{
    bf_evaluator *ev = w->ev;
    int64_t full = ev->samples / ev->batch;
    for (;;) {
        int64_t b = atomic_fetch_add(&ev->next, 1);
        if (b > full || (b == full && !ev->rest)) break;
        bf_plan *plan = b == full ? ev->rest : w->plan;
        if (atomic_load(&ev->failed)) break;
        if (ev->cancel && bf_cancel_requested(ev->cancel)) {
            w->st = bf_error_set(&w->err, BF_ECANCELED, "evaluation canceled");
            atomic_store(&ev->failed, 1);
            break;
        }
        w->st = run_batch(ev, w, plan, b * ev->batch, &w->err);
        if (w->st != BF_OK) {
            atomic_store(&ev->failed, 1);
            break;
        }
        long long done = atomic_fetch_add(&ev->done, bf_plan_batch(plan)) + bf_plan_batch(plan);
        if (w->reports && ev->progress) ev->progress(ev->progress_user, done, ev->samples);
    }
}

static void *pool_main(void *arg)
{
    worker *w = arg;
    bf_evaluator *ev = w->ev;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&ev->mu);
        while (ev->generation == seen && !ev->shutdown) pthread_cond_wait(&ev->go, &ev->mu);
        if (ev->shutdown) {
            pthread_mutex_unlock(&ev->mu);
            return NULL;
        }
        seen = ev->generation;
        pthread_mutex_unlock(&ev->mu);
        work(w);
        pthread_mutex_lock(&ev->mu);
        if (--ev->remaining == 0) pthread_cond_signal(&ev->finished);
        pthread_mutex_unlock(&ev->mu);
    }
}

/* Starts threads-1 pool threads; if the system refuses some, the pass is
 * shared by those that started. */
static bf_status start_pool(bf_evaluator *ev, bf_error *err)
{
    ev->ws = bf__calloc((size_t)ev->threads, sizeof *ev->ws);
    ev->tids = bf__calloc((size_t)ev->threads, sizeof *ev->tids);
    if (!ev->ws || !ev->tids) return bf_error_set(err, BF_ENOMEM, "out of memory");
    for (int t = 0; t < ev->threads; t++)
        ev->ws[t] = (worker){.ev = ev, .plan = ev->plans[t], .reports = t == 0};
    if (pthread_mutex_init(&ev->mu, NULL) != 0) return bf_error_set(err, BF_ENOMEM, "cannot create a mutex");
    if (pthread_cond_init(&ev->go, NULL) != 0) {
        pthread_mutex_destroy(&ev->mu);
        return bf_error_set(err, BF_ENOMEM, "cannot create a condition variable");
    }
    if (pthread_cond_init(&ev->finished, NULL) != 0) {
        pthread_cond_destroy(&ev->go);
        pthread_mutex_destroy(&ev->mu);
        return bf_error_set(err, BF_ENOMEM, "cannot create a condition variable");
    }
    ev->pool_ready = 1;
    for (int t = 1; t < ev->threads; t++) {
        if (pthread_create(&ev->tids[t], NULL, pool_main, &ev->ws[t]) != 0) break;
        ev->n_started = t;
    }
    return BF_OK;
}

static void stop_pool(bf_evaluator *ev)
{
    if (!ev->pool_ready) return;
    pthread_mutex_lock(&ev->mu);
    ev->shutdown = 1;
    pthread_cond_broadcast(&ev->go);
    pthread_mutex_unlock(&ev->mu);
    for (int t = 1; t <= ev->n_started; t++) pthread_join(ev->tids[t], NULL);
    pthread_cond_destroy(&ev->go);
    pthread_cond_destroy(&ev->finished);
    pthread_mutex_destroy(&ev->mu);
    ev->pool_ready = 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Applies (or, applied again, undoes) the flips on every plan. */
static bf_status apply_flips(bf_evaluator *ev, const bf_bitflip *flips, size_t n, bf_error *err)
{
    for (size_t p = 0; p < ev->n_plans; p++)
        for (size_t i = 0; i < n; i++) {
            bf_status st = bf_plan_flip_bit(ev->plans[p], &flips[i], NULL, NULL, err);
            if (st != BF_OK) return st;
        }
    return BF_OK;
}

void bf__evaluator_score(bf_evaluator *ev, const float *outputs, bf_eval_result *res)
{
    bf__evaluator_score_keep(ev, outputs, NULL, res);
}

void bf__evaluator_score_keep(bf_evaluator *ev, const float *outputs, int32_t *seg_keep, bf_eval_result *res)
{
    bf__eval_result_clear(res);
    res->task = ev->task;
    res->samples = ev->samples;
    res->out_cols = ev->out_cols;
    res->outputs = (float *)outputs;
    if (ev->unbatched) {
        res->n_ragged = ev->rag.n_out;
        res->ragged = ev->rag.view;
    }
    if (ev->task == BF_TASK_CLASSIFICATION) {
        res->accuracy = bf_metric_accuracy(outputs, ev->samples, ev->out_cols, ev->lab.labels_i);
    } else if (ev->task == BF_TASK_BINARY) {
        if (bf_metric_auc(outputs, ev->lab.labels_f, ev->samples, ev->lab.order, &res->auc, NULL) != BF_OK)
            res->auc = NAN;
        res->logloss = bf_metric_logloss(outputs, ev->lab.labels_f, ev->samples);
    } else if (ev->task == BF_TASK_LANGUAGE_MODEL) {
        bf_metric_lm(outputs, ev->lab.labels_i, ev->samples, ev->lab.lm_T, ev->lab.lm_V, ev->lab.row_ce, &res->perplexity,
                     &res->token_accuracy);
        if (ev->lab.mc_item)
            res->choice_accuracy = bf_metric_choice_accuracy(ev->lab.row_ce, ev->samples, ev->lab.mc_item, ev->lab.mc_answer, ev->lab.mc_best);
    } else if (ev->task == BF_TASK_SEGMENTATION) {
        bf__seg_score_keep(ev->lab.seg, outputs, seg_keep, &res->miou, &res->pixel_accuracy);
    }
}

void bf__eval_result_clear(bf_eval_result *res)
{
    memset(res, 0, sizeof *res);
    res->accuracy = res->auc = res->logloss = res->perplexity = res->token_accuracy = res->choice_accuracy = NAN;
    res->miou = res->pixel_accuracy = res->map = res->map50 = res->recall = NAN;
}

const bf__seg *bf__evaluator_seg(const bf_evaluator *ev) { return ev->lab.seg; }

/* The result of a pass whose outputs are in place: metrics over them. */
static bf_status finish(bf_evaluator *ev, bf_eval_result *res, double seconds, bf_error *err)
{
    if (ev->unbatched) {
        bf_status st = bf__ragged_lay_out(&ev->rag, err);
        if (st != BF_OK) return st;
    }
    bf__evaluator_score(ev, ev->outputs, res);
    res->seconds = seconds;
    if (ev->task == BF_TASK_DETECTION) return bf__eval_det_score(&ev->det, ev->rag.view, ev->samples, res, err);
    return BF_OK;
}

void bf__evaluator_labels(const bf_evaluator *ev, const int64_t **classes, const float **binary)
{
    *classes = ev->task == BF_TASK_CLASSIFICATION ? ev->lab.labels_i : NULL;
    *binary = ev->task == BF_TASK_BINARY ? ev->lab.labels_f : NULL;
}

void bf__evaluator_lm(const bf_evaluator *ev, bf__lm_layout *lm)
{
    *lm = (bf__lm_layout){0};
    if (ev->task != BF_TASK_LANGUAGE_MODEL) return;
    *lm = (bf__lm_layout){.labels = ev->lab.labels_i, .T = ev->lab.lm_T, .V = ev->lab.lm_V, .labelled = ev->lab.lm_labelled,
                          .item = ev->lab.mc_item, .answer = ev->lab.mc_answer};
}

void bf__evaluator_set_cancel(bf_evaluator *ev, const int *cancel) { ev->cancel = cancel; }

bf_plan *bf__evaluator_plan(bf_evaluator *ev, int tail) { return tail ? ev->rest : ev->plans[0]; }
const bf_tensor *bf__evaluator_feed(const bf_evaluator *ev, size_t input) { return ev->feeds[input]; }

bf_status bf_evaluator_run(bf_evaluator *ev, const bf_bitflip *flips, size_t n_flips,
                           bf_eval_result *res, bf_error *err)
{
    bf_status st = BF_OK;

    for (size_t i = 0; i < n_flips; i++)
        if ((st = bf_bitflip_check(ev->model, &flips[i], err)) != BF_OK) return st;
    if ((st = apply_flips(ev, flips, n_flips, err)) != BF_OK) return st;

    for (size_t k = 0; k < ev->n_vf; k++) ev->vf_old[k] = ev->vf_new[k] = NAN, ev->vf_at[2 * k] = -1, ev->vf_at[2 * k + 1] = 0;
    double t0 = now_s();
    atomic_store(&ev->next, 0);
    atomic_store(&ev->done, 0);
    atomic_store(&ev->failed, 0);
    for (int t = 0; t < ev->threads; t++) ev->ws[t].st = BF_OK;
    pthread_mutex_lock(&ev->mu);
    ev->generation++;
    ev->remaining = ev->n_started;
    pthread_cond_broadcast(&ev->go);
    pthread_mutex_unlock(&ev->mu);
    work(&ev->ws[0]);   /* the calling thread is worker 0 */
    pthread_mutex_lock(&ev->mu);
    while (ev->remaining > 0) pthread_cond_wait(&ev->finished, &ev->mu);
    pthread_mutex_unlock(&ev->mu);
    double t1 = now_s();
    bf__eval_ckpt_pass_done(&ev->ckp);   /* a trial's reach is the one pass's */

    /* Undo in reverse order so overlapping flips restore exactly. */
    for (size_t i = n_flips; i-- > 0;) {
        bf_status u = apply_flips(ev, &flips[i], 1, err);
        if (u != BF_OK && st == BF_OK) st = u;
    }
    for (int t = 0; t < ev->threads; t++)
        if (ev->ws[t].st != BF_OK) {
            if (err) *err = ev->ws[t].err;
            return ev->ws[t].st;
        }
    if (st != BF_OK) return st;

    return finish(ev, res, t1 - t0, err);
}

bf_status bf_evaluator_run_sample(bf_evaluator *ev, int64_t sample, const float *base, bf_eval_result *res,
                                  bf_error *err)
{
    if (sample < 0 || sample >= ev->samples)
        return bf_error_set(err, BF_ERANGE, "sample %lld does not exist (the eval set has %lld)", (long long)sample,
                            (long long)ev->samples);
    if (ev->cancel && bf_cancel_requested(ev->cancel)) return bf_error_set(err, BF_ECANCELED, "evaluation canceled");
    for (size_t k = 0; k < ev->n_vf; k++) ev->vf_old[k] = ev->vf_new[k] = NAN, ev->vf_at[2 * k] = -1, ev->vf_at[2 * k + 1] = 0;
    double t0 = now_s();
    int64_t b = sample / ev->batch;
    bf_plan *plan = b == ev->samples / ev->batch ? ev->rest : ev->plans[0];
    if (base != ev->outputs) memcpy(ev->outputs, base, (size_t)(ev->samples * ev->out_cols) * sizeof(float));
    for (int64_t s = 0; ev->unbatched && ev->rag_base && s < ev->samples; s++) {
        bf_status st = s == sample ? BF_OK : bf__ragged_copy_sample(&ev->rag, ev->rag_base, s, err);
        if (st != BF_OK) return st;
    }
    bf_status st = run_batch(ev, &ev->ws[0], plan, b * ev->batch, err);
    bf__eval_ckpt_pass_done(&ev->ckp);
    if (st != BF_OK) return st;
    return finish(ev, res, now_s() - t0, err);
}

void bf__evaluator_ragged_base(bf_evaluator *ev, const bf_ragged_output *base) { ev->rag_base = base; }

int64_t bf__evaluator_out_cols(const bf_evaluator *ev) { return ev->out_cols; }

bf_status bf__evaluator_imaj(bf_evaluator *ev, const bf__ckpt *ck, bf__ckpt *rec, bf__ckpt_trial *tr, int64_t s,
                             bf__ragged *into, float *outs, bf_error *err)
{
    if (!ev->unbatched || s < 0 || s >= ev->samples || (!rec && !into))
        return bf_error_set(err, BF_EINVAL, "internal error: an image-major run of sample %lld", (long long)s);
    bf__eval_ckpt *e = &ev->ckp;
    /* the trial's slots take the run's outputs; an image ended early takes the golden ones kept so far */
    e->ck = rec ? NULL : ck, e->rec = rec, e->tr = tr, e->out = ev->outputs, e->gold = into ? &ev->rag : NULL;
    e->rag_to = into, e->out_to = outs;
    bf_status st = run_batch(ev, &ev->ws[0], ev->plans[0], s, err);
    e->ck = NULL, e->rec = NULL, e->tr = NULL, e->out = NULL, e->gold = NULL, e->rag_to = NULL, e->out_to = NULL;
    return st;
}

bf_status bf__evaluator_imaj_merge(bf_evaluator *ev, const bf_evaluator *from, int64_t s, bf_error *err)
{
    size_t n = (size_t)ev->out_cols;
    if (n) memcpy(ev->outputs + (size_t)s * n, from->outputs + (size_t)s * n, n * sizeof(float));
    return bf__ragged_copy_slot(&ev->rag, &from->rag, s, err);
}

void bf__evaluator_ckpt_add_counts(bf_evaluator *ev, const bf_evaluator *from)
{
    bf__ckpt_counts k = bf__eval_ckpt_counts(&from->ckp);
    bf__eval_ckpt_add(&ev->ckp, &k);
}

bf_status bf__evaluator_imaj_finish(bf_evaluator *ev, bf__ragged *from, const float *outs, bf_eval_result *res,
                                    bf_error *err)
{
    if (!from) return finish(ev, res, 0, err);
    size_t n = (size_t)(ev->samples * ev->out_cols);
    if (n) memcpy(ev->outputs, outs, n * sizeof(float));
    bf__ragged keep = ev->rag;
    ev->rag = *from, *from = keep;
    bf_status st = finish(ev, res, 0, err);
    keep = ev->rag, ev->rag = *from, *from = keep;   /* res->ragged: the view the trial's slots laid out */
    return st;
}

bf_status bf__evaluator_ckpt(bf_evaluator *ev, const bf__ckpt *ck, bf__ckpt *record, const float *golden_out,
                             bf_error *err)
{
    int usable = ev->unbatched && ev->rag_base;
    for (size_t i = 0; ck && usable && i < ev->n_plans; i++)   /* a plan they do not fit runs every sample in full */
        if (!bf__ckpt_fits_plan(ck, ev->plans[i])) usable = 0;
    return bf__eval_ckpt_set(&ev->ckp, ck, ev->unbatched ? record : NULL, golden_out, usable, err);
}

bf__ckpt_trial *bf__evaluator_ckpt_trial(bf_evaluator *ev) { return ev->ckp.tr; }
int bf__evaluator_ckpt_on(const bf_evaluator *ev) { return ev->ckp.ck != NULL; }

bf__ckpt_counts bf__evaluator_ckpt_counts(const bf_evaluator *ev) { return bf__eval_ckpt_counts(&ev->ckp); }

bf_status bf_evaluator_set_param(bf_evaluator *ev, size_t param, const float *values, bf_error *err)
{
    if (param >= ev->model->n_params)
        return bf_error_set(err, BF_ERANGE, "parameter %zu does not exist (the model has %zu)", param, ev->model->n_params);
    size_t n = (size_t)bf_tensor_numel(ev->model->params[param].tensor);
    bf_dtype dt = ev->model->params[param].dtype;
    for (size_t p = 0; p < ev->n_plans; p++) {
        void *data;
        bf_status st = bf_plan_param_data(ev->plans[p], param, &data, err);
        if (st != BF_OK) return st;
        if (dt == BF_F32) memcpy(data, values, n * sizeof *values);
        else for (size_t i = 0; i < n; i++) bf__param_int_set(data, dt, (int64_t)i, values[i]);
        bf__plan_param_rewritten(ev->plans[p], param);
    }
    return BF_OK;
}

void bf__evaluator_param_golden(bf_evaluator *ev, size_t param)
{
    for (size_t p = 0; p < ev->n_plans; p++) bf__plan_param_golden(ev->plans[p], param);
}

void bf__evaluator_param_golden_kept(bf_evaluator *ev, size_t param)
{
    for (size_t p = 0; p < ev->n_plans; p++) bf__plan_param_golden_kept(ev->plans[p], param);
}

bf_status bf_evaluator_write_param(bf_evaluator *ev, size_t param, int64_t index, float value,
                                   bf_error *err)
{
    if (param >= ev->model->n_params)
        return bf_error_set(err, BF_ERANGE, "parameter %zu does not exist (the model has %zu)", param, ev->model->n_params);
    const bf_tensor *t = ev->model->params[param].tensor;
    if (index < 0 || index >= bf_tensor_numel(t))
        return bf_error_set(err, BF_ERANGE, "element %lld of '%s' does not exist (it has %lld elements)",
                            (long long)index, t->name, (long long)bf_tensor_numel(t));
    for (size_t p = 0; p < ev->n_plans; p++) {
        bf_status st = bf__plan_param_write(ev->plans[p], param, index, value, err);
        if (st != BF_OK) return st;
    }
    return BF_OK;
}

/* --- value faults */

static bf_status reserve_value_faults(bf_evaluator *ev, size_t n, bf_error *err)
{
    bf_status st;
    if (n <= ev->vf_cap) return BF_OK;
    size_t cap = ev->vf_cap ? ev->vf_cap : 8;
    while (cap < n) cap *= 2;
    for (size_t p = 0; p < ev->n_plans; p++)
        if ((st = bf__plan_reserve_value_faults(ev->plans[p], cap, err)) != BF_OK) return st;
    for (int t = 0; t < ev->threads; t++) {
        worker *w = &ev->ws[t];
        bf_value_fault *vf = bf__realloc(w->vf, cap * sizeof *vf);
        if (!vf) goto oom;
        w->vf = vf;
        size_t *of = bf__realloc(w->vf_of, cap * sizeof *of);
        if (!of) goto oom;
        w->vf_of = of;
    }
    bf_value_fault *vf = bf__realloc(ev->vf, cap * sizeof *vf);
    if (!vf) goto oom;
    ev->vf = vf;
    float *o = bf__realloc(ev->vf_old, cap * sizeof *o);
    if (!o) goto oom;
    ev->vf_old = o;
    o = bf__realloc(ev->vf_new, cap * sizeof *o);
    if (!o) goto oom;
    ev->vf_new = o;
    int64_t *at = bf__realloc(ev->vf_at, 2 * cap * sizeof *at);
    if (!at) goto oom;
    ev->vf_at = at;
    ev->vf_cap = cap;
    return BF_OK;
oom:
    return bf_error_set(err, BF_ENOMEM, "out of memory for %zu value faults", n);
}

bf_status bf_evaluator_set_value_faults(bf_evaluator *ev, const bf_value_fault *faults, size_t n, bf_error *err)
{
    bf_status st;
    ev->n_vf = 0;
    if ((st = reserve_value_faults(ev, n, err)) != BF_OK) return st;
    for (size_t k = 0; k < n; k++) {
        const bf_value_fault *f = &faults[k];
        int64_t row;
        if ((st = bf__plan_fault_site(ev->plans[0], f->value, &row, err)) != BF_OK) return st;
        const char *name = ev->model->values[f->value].name;
        if (f->sample < -1 || f->sample >= ev->samples)
            return bf_error_set(err, BF_ERANGE, "value fault %zu on '%s': sample %lld does not exist (the eval set has %lld)", k,
                                name, (long long)f->sample, (long long)ev->samples);
        if (f->index < 0 || f->index >= (f->drawn ? BF_VALUE_FAULT_DRAWS : row))
            return bf_error_set(err, BF_ERANGE, "value fault %zu on '%s': %s %lld does not exist (%lld per sample)", k, name,
                                f->drawn ? "draw" : "element", (long long)f->index, (long long)row);
        if (bf_repr_bits(f->repr) == 0 || (int)f->model < 0 || f->model > BF_FAULT_BER ||
            (bf_repr_is_fixed(f->repr) && !(f->scale > 0 && isfinite(f->scale))))
            return bf_error_set(err, BF_EINVAL, "value fault %zu on '%s': unknown representation or fault model, or a bad int8 scale",
                                k, name);
    }
    if (n) memcpy(ev->vf, faults, n * sizeof *faults);
    ev->n_vf = n;
    return BF_OK;
}

void bf_evaluator_value_fault_seen(const bf_evaluator *ev, size_t i, float *old_value, float *new_value)
{
    *old_value = i < ev->n_vf ? ev->vf_old[i] : NAN;
    *new_value = i < ev->n_vf ? ev->vf_new[i] : NAN;
}

void bf__evaluator_value_fault_at(const bf_evaluator *ev, size_t i, int64_t *index, int64_t *elements)
{
    *index = i < ev->n_vf ? ev->vf_at[2 * i] : -1;
    *elements = i < ev->n_vf ? ev->vf_at[2 * i + 1] : 0;
}
