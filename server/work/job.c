/* A worker's side of a campaign: load once, run chunks (shards of the
 * campaign's trials), keep per-trial records, render each chunk's result. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bitflip/api/atomic_file.h"
#include "bitflip/api/result.h"
#include "bitflip/api/spec.h"
#include "bitflip/bitflip.h"
#include "store/blob.h"
#include "work/scheduler.h"

struct bfd_worker_cache {
    char id[33];
    bf_model *m;
    bf_dataset *ds;
    bf_campaign_spec spec;
    int have_spec;
    bf_campaign *c;
    bf_limits lim;            /* bitflipd --limit, kept across cache_clear */
};

bfd_worker_cache *bfd_worker_cache_new(const bf_limits *lim)
{
    bfd_worker_cache *wc = calloc(1, sizeof *wc);
    if (wc && lim) wc->lim = *lim;
    return wc;
}

static void cache_clear(bfd_worker_cache *wc)
{
    bf_campaign_free(wc->c);
    bf_dataset_free(wc->ds);
    bf_model_free(wc->m);
    if (wc->have_spec) bf_campaign_spec_free(&wc->spec);
    bf_limits lim = wc->lim;
    memset(wc, 0, sizeof *wc);
    wc->lim = lim;
}

void bfd_worker_cache_drop(bfd_worker_cache *wc)
{
    cache_clear(wc);
}

void bfd_worker_cache_free(bfd_worker_cache *wc)
{
    if (!wc) return;
    cache_clear(wc);
    free(wc);
}

static bf_status load(bfd_worker_cache *wc, const bfd_job_spec *js, bf_error *err)
{
    cache_clear(wc);
    bf_spec_problems probs = {0};
    bf_status st = bf_spec_parse_opts(js->spec_json, strlen(js->spec_json), &wc->lim.spec, &wc->spec, &probs);
    wc->have_spec = st == BF_OK;
    if (st != BF_OK) {   /* it was valid when submitted: only a newer, stricter daemon gets here */
        st = bf_error_set(err, BF_EINVAL, "the stored spec no longer validates: %s: %s",
                          probs.count ? probs.items[0].pointer : "", probs.count ? probs.items[0].message : "?");
        bf_spec_problems_free(&probs);
        return st;
    }
    /* the bytes on disk must still be the ones uploaded: a flipped bit would
     * silently become the golden model (store/blob.h) */
    if ((st = bfd_blob_verify(js->model_path, "model", err)) != BF_OK) return st;
    if ((st = bfd_blob_verify(js->dataset_path, "dataset", err)) != BF_OK) return st;
    if ((st = bf_model_load_file_opts(js->model_path, &wc->lim.model, &wc->m, err)) != BF_OK) return bf_error_prefix(err, "model");
    if ((st = bf_dataset_load_file_opts(js->dataset_path, &wc->lim.data, &wc->ds, err)) != BF_OK) return bf_error_prefix(err, "dataset");
    if ((st = bf_model_bind_dims(&wc->m, wc->ds, err)) != BF_OK) return st;
    /* a profiled campaign: the spec names the map "sha256:ID", the blob is here */
    if (js->errmap_path) {
        if ((st = bfd_blob_verify(js->errmap_path, "error map", err)) != BF_OK) return st;
        if ((st = bf_errmap_load_file(js->errmap_path, &wc->lim.errmap, &wc->spec.errmap, err)) != BF_OK)
            return bf_error_prefix(err, "error map");
    }
    /* the golden pass made by the differential engine: the first chunk's
     * run starts from its cache instead of making the pass again */
    bf_campaign_prep prep = {.differential = 1, .host_pages = wc->lim.data.host_pages};
    if ((st = bf_campaign_create_prepared(wc->m, wc->ds, &wc->spec, NULL, &prep, &wc->c, err)) != BF_OK) return st;
    snprintf(wc->id, sizeof wc->id, "%s", js->id);
    return BF_OK;
}

typedef struct run_ctx {
    bfd_worker_cache *wc;
    bf_afile *trials;         /* TRIALS_DIR/<chunk>.jsonl, published when the chunk is done */
    int write_failed;
    bf_error write_err;       /* the first failed write's error */
    bfd_progress_fn progress;
    void *user;
} run_ctx;

static void on_trial(void *user, const bf_trial_record *rec)
{
    run_ctx *x = user;
    if (!x->trials || x->write_failed) return;
    json_t *j = bf_trial_to_json(x->wc->c, &x->wc->spec, rec);
    char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!line) {
        x->write_failed = 1;
        bf_error_set(&x->write_err, BF_ENOMEM, "out of memory writing a trial record");
        return;
    }
    if (bf_afile_write(x->trials, line, strlen(line), &x->write_err) != BF_OK ||
        bf_afile_write(x->trials, "\n", 1, &x->write_err) != BF_OK)
        x->write_failed = 1;
    free(line);
}

/* The estimates the result will give, and the half-widths the stop rule
 * compares with its margins (the largest over tensors and bits only when
 * that margin is a target: computing them is a loop over every stratum). */
static void estimates(const bfd_worker_cache *wc, const bf_campaign_result *r, bfd_intervals *iv)
{
    bf_design d;
    bf_estimate e[2];
    double conf = wc->spec.stop_confidence > 0 ? wc->spec.stop_confidence : 0.95;   /* as the result's */
    bf_campaign_design(wc->c, &d);
    bf_rate_estimate(&d, r, -1, -1, BF_OUTCOME_CRITICAL, conf, &e[0]);
    bf_rate_estimate(&d, r, -1, -1, BF_OUTCOME_DUE, conf, &e[1]);
    iv->set = r->trials_done > 0;
    memcpy(iv->critical, (double[3]){e[0].rate, e[0].lo, e[0].hi}, sizeof iv->critical);
    memcpy(iv->due, (double[3]){e[1].rate, e[1].lo, e[1].hi}, sizeof iv->due);
    iv->half_width[0] = fmax(e[0].hi - e[0].lo, e[1].hi - e[1].lo) / 2;
    iv->half_width[1] = iv->half_width[2] = NAN;
    for (int k = 1; k < 3; k++) {
        if (!((k == 1 ? wc->spec.stop_tensor_margin : wc->spec.stop_bit_margin) > 0)) continue;
        double w = 0;
        size_t n = k == 1 ? d.n_sites : (size_t)d.n_pos;
        for (size_t i = 0; i < n; i++)
            for (int o = BF_OUTCOME_CRITICAL; o <= BF_OUTCOME_DUE; o++) {
                bf_rate_estimate(&d, r, k == 1 ? (int64_t)i : -1, k == 1 ? -1 : d.pos[i], (bf_outcome)o, conf, &e[0]);
                w = fmax(w, (e[0].hi - e[0].lo) / 2);
            }
        iv->half_width[k] = w;
    }
}

static void on_progress(void *user, const bf_campaign_result *partial)
{
    run_ctx *x = user;
    bfd_intervals iv = {0};
    estimates(x->wc, partial, &iv);
    if (x->progress) x->progress(x->user, partial->trials_done, partial->total.n, &iv);
}

bf_status bfd_job_run(bfd_worker_cache *wc, const bfd_job_spec *js, int idx, const int *cancel,
                      bfd_progress_fn progress, void *user, char **result_json, bf_error *err)
{
    bf_status st = BF_OK;
    bf_campaign_result res = {0};
    int have_res = 0;
    json_t *doc = NULL;
    char final[4096];
    run_ctx x = {.wc = wc, .progress = progress, .user = user};
    *result_json = NULL;

    if (strcmp(wc->id, js->id) && (st = load(wc, js, err)) != BF_OK) {
        /* the campaign's error is a client's to read: blobs by id, not by path */
        bfd_blob_scrub(err->msg, js->model_path);
        bfd_blob_scrub(err->msg, js->dataset_path);
        bfd_blob_scrub(err->msg, js->errmap_path);
        cache_clear(wc);
        goto out;
    }

    snprintf(final, sizeof final, "%s/%d.jsonl", js->trials_dir, idx);
    if (mkdir(js->trials_dir, 0750) != 0 && errno != EEXIST) {
        st = bf_error_set(err, BF_EIO, "cannot create %s: %s", js->trials_dir, strerror(errno));
        goto out;
    }
    /* readable by the group the directory is open to, as the parts the daemon serves */
    if ((st = bf_afile_open(final, 0640, &x.trials, err)) != BF_OK) goto out;

    bf_campaign_opts co = {.threads = 1, .shard_index = idx, .shard_count = js->n_chunks, .on_trial = on_trial,
                           .progress = on_progress, .user = &x, .cancel = cancel};
    st = bf_campaign_run(wc->c, &co, &res, err);
    have_res = st == BF_OK;
    if (st != BF_OK) goto out;
    if (x.write_failed) {
        if (err) *err = x.write_err;
        st = x.write_err.status ? x.write_err.status : BF_EIO;
        goto out;
    }
    st = bf_afile_commit(x.trials, NULL, err);
    x.trials = NULL;   /* published or dropped: freed either way */
    if (st != BF_OK) goto out;

    doc = bf_result_render(bf_result_header(&wc->spec, wc->c, &res), &res, 1);
    *result_json = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    if (!*result_json) st = bf_error_set(err, BF_ENOMEM, "out of memory rendering the result");
out:
    bf_afile_abort(x.trials);
    json_decref(doc);
    if (have_res) bf_campaign_result_free(&res);
    return st;
}
