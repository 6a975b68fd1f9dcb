/* The labels of an evaluator (eval_labels.h): 'labels' read against the
 * model's first output into one of the tasks, with every entry checked
 * (a class id within the scores, a token id within the vocabulary, binary
 * labels 0 or 1, multiple-choice items with one right row), so a pass only
 * reads them. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/metrics.h"
#include "exec/eval_labels.h"
#include "model/graph.h"

/* Multiple choice: 'mc_item' [n] (each row's item, in [0, n)) and
 * 'mc_answer' [n] (1 on each item's correct row, 0 elsewhere), integers. */
static bf_status bind_choices(bf__eval_labels *ev, bf_error *err)
{
    const bf_tensor *it = bf_dataset_find(ev->ds, "mc_item"), *an = bf_dataset_find(ev->ds, "mc_answer");
    int64_t n = ev->samples;
    if (!it && !an) return BF_OK;
    if (!it || !an)
        return bf_error_set(err, BF_EINVAL, "multiple choice needs both eval tensors 'mc_item' and 'mc_answer'; '%s' is missing",
                            it ? "mc_answer" : "mc_item");
    const bf_tensor *ts[2] = {it, an};
    for (int k = 0; k < 2; k++) {
        char a[96];
        if (ts[k]->ndim != 1 || ts[k]->dims[0] != n)
            return bf_error_set(err, BF_ESHAPE, "eval tensor '%s' has shape %s; it must be [%lld], one entry per row",
                                ts[k]->name, bf_shape_str(ts[k]->dims, ts[k]->ndim, a, sizeof a), (long long)n);
        if (ts[k]->dtype != BF_I64 && ts[k]->dtype != BF_I32)
            return bf_error_set(err, BF_EFORMAT, "eval tensor '%s' is %s; it must be int64 (or int32)", ts[k]->name,
                                bf_dtype_name(ts[k]->dtype));
    }
    ev->mc_item = bf__malloc((size_t)n * sizeof(int64_t));
    ev->mc_answer = bf__malloc((size_t)n * sizeof(int64_t));
    ev->mc_best = bf__malloc((size_t)n * sizeof(int64_t));
    if (!ev->mc_item || !ev->mc_answer || !ev->mc_best) return bf_error_set(err, BF_ENOMEM, "out of memory for mc_item");
    bf_status st = bf_convert(ev->mc_item, BF_I64, it->data, it->dtype, (size_t)n, err);
    if (st == BF_OK) st = bf_convert(ev->mc_answer, BF_I64, an->data, an->dtype, (size_t)n, err);
    if (st != BF_OK) return st;
    int64_t *right = ev->mc_best;   /* correct rows per item, until the metric uses it */
    for (int64_t i = 0; i < n; i++) right[i] = -1;
    for (int64_t r = 0; r < n; r++) {
        int64_t k = ev->mc_item[r], a = ev->mc_answer[r];
        if (k < 0 || k >= n)
            return bf_error_set(err, BF_ERANGE, "mc_item[%lld] is %lld; items are numbered 0 to %lld (the rows)", (long long)r,
                                (long long)k, (long long)(n - 1));
        if (a != 0 && a != 1)
            return bf_error_set(err, BF_ERANGE, "mc_answer[%lld] is %lld; it must be 1 (the correct choice) or 0", (long long)r,
                                (long long)a);
        int64_t lab = 0;
        for (int64_t t = 0; t < ev->lm_T; t++) lab += ev->labels_i[r * ev->lm_T + t] != BF_LM_IGNORE;
        if (lab == 0)
            return bf_error_set(err, BF_EINVAL, "row %lld (item %lld) has no continuation: every one of its labels is -100",
                                (long long)r, (long long)k);
        if (right[k] == -1) right[k] = 0;
        if (a == 1 && right[k] >= 0) right[k] = right[k] ? -2 : 1;
        if (a == 1 && right[k] == -2)
            return bf_error_set(err, BF_EINVAL, "item %lld has more than one row with mc_answer 1 (row %lld is another)",
                                (long long)k, (long long)r);
    }
    for (int64_t k = 0; k < n; k++)
        if (right[k] == 0)
            return bf_error_set(err, BF_EINVAL, "item %lld has no row with mc_answer 1 (each item needs exactly one)", (long long)k);
    return BF_OK;
}

/* language_model: 'labels' [n, T] integer, the next token at each position
 * or -100, against logits [n, T, V]. */
static bf_status bind_lm(bf__eval_labels *ev, const bf_tensor *l, const bf_tensor *o, bf_error *err)
{
    int64_t n = ev->samples;
    char a[96], b[96];
    if (o->ndim != 3 || o->dims[1] != l->dims[1])
        return bf_error_set(err, BF_ESHAPE, "eval tensor 'labels' has shape %s, a language_model layout (the next token at each of "
                                            "T positions), which needs logits [n, %lld, vocabulary] as the first output; "
                                            "'%s' has shape %s (other tasks take one label per sample)",
                            bf_shape_str(l->dims, l->ndim, a, sizeof a), (long long)l->dims[1], ev->model->outputs[0].name,
                            bf_shape_str(o->dims, o->ndim, b, sizeof b));
    if (l->dtype != BF_I64 && l->dtype != BF_I32)
        return bf_error_set(err, BF_EFORMAT, "eval tensor 'labels' is %s; language_model labels are token ids, int64 (or int32)",
                            bf_dtype_name(l->dtype));
    ev->lm_T = l->dims[1];
    ev->lm_V = o->dims[2];
    if (ev->lm_V < 1) return bf_error_set(err, BF_ESHAPE, "output '%s' has an empty vocabulary", ev->model->outputs[0].name);
    size_t cells = (size_t)(n * ev->lm_T);
    ev->labels_i = bf__malloc(cells * sizeof(int64_t));
    ev->row_ce = bf__malloc((size_t)n * sizeof(double));
    if (!ev->labels_i || !ev->row_ce) return bf_error_set(err, BF_ENOMEM, "out of memory for labels");
    bf_status st = bf_convert(ev->labels_i, BF_I64, l->data, l->dtype, cells, err);
    if (st != BF_OK) return st;
    ev->lm_labelled = 0;
    for (size_t i = 0; i < cells; i++) {
        int64_t y = ev->labels_i[i];
        if (y != BF_LM_IGNORE && (y < 0 || y >= ev->lm_V))
            return bf_error_set(err, BF_ERANGE, "labels[%lld, %lld] is token %lld but output '%s' has a vocabulary of %lld "
                                                "(-100 marks a position without a label)",
                                (long long)(i / (size_t)ev->lm_T), (long long)(i % (size_t)ev->lm_T), (long long)y,
                                ev->model->outputs[0].name, (long long)ev->lm_V);
        ev->lm_labelled += y != BF_LM_IGNORE;
    }
    if (ev->lm_labelled == 0)
        return bf_error_set(err, BF_EINVAL, "eval tensor 'labels' labels no position: every entry is -100, so there is "
                                            "nothing to measure");
    ev->task = BF_TASK_LANGUAGE_MODEL;
    return bind_choices(ev, err);
}

static bf_status bind_labels(bf__eval_labels *ev, bf_error *err)
{
    const bf_tensor *l = bf_dataset_find(ev->ds, "labels");
    ev->labels = l;
    ev->task = BF_TASK_NONE;
    if (!l) return bf_dataset_find(ev->ds, "mc_item") || bf_dataset_find(ev->ds, "mc_answer")
                       ? bf_error_set(err, BF_EINVAL, "eval tensors 'mc_item' and 'mc_answer' (multiple choice) need "
                                                      "'labels' [n, T] of a language_model eval set")
                       : BF_OK;
    int64_t n = ev->samples;
    const bf_tensor *o = ev->out0;
    if (l->ndim == 2 && (o->ndim == 3 || l->dims[1] > 1)) return bind_lm(ev, l, o, err);
    if (bf__seg_layout(l, o) && !bf_dataset_find(ev->ds, "mc_item") && !bf_dataset_find(ev->ds, "mc_answer")) {
        bf_status st = bf__seg_create(l, o, ev->model->outputs[0].name, n, &ev->seg, err);
        if (st == BF_OK) ev->task = BF_TASK_SEGMENTATION;
        return st;
    }
    if (bf_dataset_find(ev->ds, "mc_item") || bf_dataset_find(ev->ds, "mc_answer"))
        return bf_error_set(err, BF_EINVAL, "eval tensors 'mc_item' and 'mc_answer' (multiple choice) need "
                                            "'labels' [n, T] of a language_model eval set");
    if (bf_tensor_numel(l) != n)
        return bf_error_set(err, BF_ESHAPE, "eval tensor 'labels' must hold one label per sample (%lld), it holds %lld",
                            (long long)n, (long long)bf_tensor_numel(l));
    int is_float = l->dtype == BF_F32 || l->dtype == BF_F16 || l->dtype == BF_BF16;
    /* Integer labels against a single score per sample can only mean a
     * binary task (class ids would need a score per class). */
    if (is_float || ev->out_cols == 1) {
        ev->labels_f = bf__malloc((size_t)n * sizeof(float));
        ev->order = bf__malloc((size_t)n * sizeof(int64_t));
        if (!ev->labels_f || !ev->order) return bf_error_set(err, BF_ENOMEM, "out of memory for labels");
        bf_status st = bf_convert(ev->labels_f, BF_F32, l->data, l->dtype, (size_t)n, err);
        if (st != BF_OK) return st;
        for (int64_t i = 0; i < n; i++)
            if (ev->labels_f[i] != 0.0f && ev->labels_f[i] != 1.0f)
                return bf_error_set(err, BF_EFORMAT, "a binary task (float labels, or one score per sample) needs labels 0 or 1; labels[%lld] is %g",
                                    (long long)i, ev->labels_f[i]);
        if (ev->out_cols != 1)
            return bf_error_set(err, BF_ESHAPE, "binary labels need one score per sample, but output '%s' has %lld values per sample",
                                ev->model->outputs[0].name, (long long)ev->out_cols);
        ev->task = BF_TASK_BINARY;
    } else {
        ev->labels_i = bf__malloc((size_t)n * sizeof(int64_t));
        if (!ev->labels_i) return bf_error_set(err, BF_ENOMEM, "out of memory for labels");
        bf_status st = bf_convert(ev->labels_i, BF_I64, l->data, l->dtype, (size_t)n, err);
        if (st != BF_OK) return st;
        for (int64_t i = 0; i < n; i++)
            if (ev->labels_i[i] < 0 || ev->labels_i[i] >= ev->out_cols)
                return bf_error_set(err, BF_ERANGE, "labels[%lld] is class %lld but output '%s' scores %lld classes",
                                    (long long)i, (long long)ev->labels_i[i], ev->model->outputs[0].name,
                                    (long long)ev->out_cols);
        ev->task = BF_TASK_CLASSIFICATION;
    }
    return BF_OK;
}

bf_status bf__eval_labels_bind(bf__eval_labels *l, const bf_model *m, const bf_dataset *ds, int64_t samples,
                               int64_t out_cols, const bf_tensor *out0, bf_task *task, bf_error *err)
{
    memset(l, 0, sizeof *l);
    l->model = m;
    l->ds = ds;
    l->samples = samples;
    l->out_cols = out_cols;
    l->out0 = out0;
    bf_status st = bind_labels(l, err);
    *task = l->task;
    return st;
}

void bf__eval_labels_free(bf__eval_labels *l)
{
    bf__free(l->labels_f);
    bf__free(l->labels_i);
    bf__free(l->row_ce);
    bf__free(l->mc_item);
    bf__free(l->mc_answer);
    bf__free(l->mc_best);
    bf__seg_free(l->seg);
    bf__free(l->order);
    memset(l, 0, sizeof *l);
}
