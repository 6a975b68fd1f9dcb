/* Campaign lifecycle on the loop: start, progress, checkpoints, finish. */
#include "work/campaigns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bitflip/api/result.h"
#include "work/scheduler.h"

/* Progress events at most this often per campaign; workers report every
 * ~100 ms, and a snapshot 4 times a second is plenty for a progress bar. */
#define PROGRESS_EVERY 0.25

json_t *bfd_time_json(double t)
{
    if (t <= 0) return json_null();
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    char buf[64];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, (int)((t - (double)s) * 1000));
    return json_string(buf);
}

char *bfd_trials_dir(const bfd *d, const char *id)
{
    size_t n = strlen(d->cfg.data_dir) + strlen(id) + 16;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/trials/%s", d->cfg.data_dir, id);
    return p;
}

static json_t *progress_from_result(const bfd_campaign_row *row)
{
    json_t *doc = row->result_json ? json_loads(row->result_json, 0, NULL) : NULL;
    json_t *sum = json_object_get(doc, "summary");
    int64_t done = sum ? json_integer_value(json_object_get(sum, "trials")) : 0;
    json_t *oc = sum ? json_deep_copy(json_object_get(sum, "outcomes")) : NULL;
    if (!oc) {
        oc = json_object();
        for (int k = 0; k < BF_OUTCOME_COUNT; k++) json_object_set_new(oc, bf_outcome_name((bf_outcome)k), json_integer(0));
    }
    json_decref(doc);
    return json_pack("{s:I, s:I, s:f, s:o}", "trials_done", (json_int_t)done, "trials_planned",
                     (json_int_t)row->trials_planned, "fraction",
                     row->trials_planned > 0 ? (double)done / (double)row->trials_planned : 0.0, "outcomes", oc);
}

json_t *bfd_campaign_json(bfd *d, const bfd_campaign_row *row, int with_result)
{
    bfd_camp *c = bfd_live_find(d->live, row->id);
    json_t *spec = json_loads(row->spec_json, 0, NULL);
    json_t *gates = row->gates_json ? json_loads(row->gates_json, 0, NULL) : json_array();
    char self[64], ev[80], res[80], can[80];
    snprintf(self, sizeof self, "/v1/campaigns/%s", row->id);
    snprintf(ev, sizeof ev, "%s/events", self);
    snprintf(res, sizeof res, "%s/results", self);
    snprintf(can, sizeof can, "%s/cancel", self);
    json_t *j = json_pack("{s:s, s:s, s:s?, s:o, s:o, s:o, s:s, s:s, s:o, s:o, s:o, s:s?, s:{s:s, s:s, s:s, s:s}}", "id",
                          row->id, "state", bfd_state_name(c ? c->state : row->state), "verdict", row->verdict, "created",
                          bfd_time_json(row->created), "started", bfd_time_json(row->started), "finished",
                          bfd_time_json(row->finished), "model", row->model_id, "dataset", row->dataset_id, "spec",
                          spec ? spec : json_null(), "gates", gates ? gates : json_array(), "progress",
                          c ? bfd_camp_progress(c) : progress_from_result(row), "error", row->error, "links", "self",
                          self, "events", ev, "results", res, "cancel", can);
    if (j && with_result && row->result_json) {
        json_t *doc = json_loads(row->result_json, 0, NULL);
        if (doc) json_object_set_new(j, "result", doc);
    }
    return j;
}

static json_t *state_json(bfd_state st)
{
    return json_pack("{s:s}", "state", bfd_state_name(st));
}

/* Merges one finished chunk's document into the campaign. */
static bf_status absorb(bfd_camp *c, int idx, const char *result_json, bf_error *err)
{
    json_error_t je;
    json_t *doc = json_loads(result_json, 0, &je);
    if (!doc) return bf_error_set(err, BF_EFORMAT, "chunk %d's result does not parse: %s", idx, je.text);
    bf_campaign_result part = {0};
    bf_status st = bf_result_parse(doc, c->have_acc ? &part : &c->acc, err);
    if (st == BF_OK && !c->have_acc) {
        c->have_acc = 1;
        c->header = json_pack("{s:O, s:O, s:O}", "bitflip", json_object_get(doc, "bitflip"), "campaign",
                              json_object_get(doc, "campaign"), "golden", json_object_get(doc, "golden"));
    } else if (st == BF_OK) {
        st = bf_campaign_result_merge(&c->acc, &part, err);
    }
    if (st == BF_OK && idx >= 0 && idx < c->n_chunks) {
        json_t *sum = json_object_get(doc, "summary"), *oc = json_object_get(sum, "outcomes");
        c->chunk_prog[idx][0] = json_integer_value(json_object_get(sum, "trials"));
        for (int k = 0; k < BF_OUTCOME_COUNT; k++)
            c->chunk_prog[idx][1 + k] = json_integer_value(json_object_get(oc, bf_outcome_name((bf_outcome)k)));
        if (!c->chunk_done[idx]) { c->chunk_done[idx] = 1; c->chunks_left--; }
    }
    bf_campaign_result_free(&part);
    json_decref(doc);
    return st;
}

static void finish(bfd *d, bfd_camp *c, bfd_state st, const char *error)
{
    char *result = NULL;
    const char *verdict = NULL;
    char why[600] = "";
    bf_error err = {0};
    if (st == BFD_SUCCEEDED) {
        json_t *doc = bf_result_render(json_deep_copy(c->header), &c->acc, 1);
        if (doc && c->n_gates) {
            double vals[64];
            int ok[64];
            size_t n = c->n_gates < 64 ? c->n_gates : 64;
            if (bf_gates_eval(doc, c->gates, n, vals, ok, &err) == BF_OK) {
                verdict = "pass";
                for (size_t i = 0; i < n; i++)
                    if (!ok[i]) verdict = "fail";
            } else {
                verdict = "fail";   /* a gate the result cannot answer does not pass */
                snprintf(why, sizeof why, "%s", err.msg);
                error = why;
            }
        }
        result = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!result) { st = BFD_FAILED; error = "out of memory rendering the result"; }
    }
    double now = bfd_now();
    if (bfd_campaign_finish(d->store, c->id, st, now, result, error, verdict, &err) != BF_OK)
        bfd_log(d, "error", "campaign %s: recording its end failed: %s", c->id, err.msg);
    c->state = st;
    bfd_camp_event(d, c, "progress", bfd_camp_progress(c));
    bfd_camp_event(d, c, "state", state_json(st));
    if (result) bfd_camp_event(d, c, "result", json_loads(result, 0, NULL));
    bfd_camp_event(d, c, "end", json_pack("{s:s, s:s?, s:s?}", "state", bfd_state_name(st), "verdict", verdict, "error", error));
    bfd_log(d, "info", "campaign %s %s%s%s%s%s", c->id, bfd_state_name(st), verdict ? " verdict=" : "", verdict ? verdict : "",
            error ? ": " : "", error ? error : "");
    free(result);
    bfd_live_drop(d, c);
}

/* A profiled campaign's error map blob, from the "sha256:ID" its stored
 * spec names (the submit route checked it is one of the tenant's uploads);
 * *path stays NULL for other campaigns. */
static bf_status errmap_blob(bfd *d, const bfd_campaign_row *row, char **path, bf_error *err)
{
    json_t *spec = json_loads(row->spec_json, 0, NULL);
    const char *ref = json_string_value(json_object_get(json_object_get(spec, "faults"), "error_map"));
    bf_status st = BF_OK;
    *path = NULL;
    if (ref && !strncmp(ref, "sha256:", 7) && !(*path = bfd_blob_path(d->blobs, ref + 7)))
        st = bf_error_set(err, BF_ENOMEM, "out of memory");
    json_decref(spec);
    return st;
}

static bf_status start(bfd *d, const bfd_campaign_row *row, const int *done, char **done_json, size_t n_done, bf_error *err)
{
    char prefix[24];
    snprintf(prefix, sizeof prefix, "%lld", (long long)d->boot);
    bfd_camp *c = bfd_live_add(d->live, row, prefix);
    if (!c) return bf_error_set(err, BF_ENOMEM, "out of memory");
    for (size_t i = 0; i < n_done; i++)
        if (absorb(c, done[i], done_json[i], err) != BF_OK) {
            /* a checkpoint that does not read back is redone, not trusted */
            bfd_log(d, "warn", "campaign %s: checkpoint of chunk %d unreadable, rerunning it: %s", row->id, done[i], err->msg);
        }
    bfd_camp_event(d, c, "state", state_json(row->state));
    if (c->chunks_left == 0) {   /* every chunk finished before a crash */
        finish(d, c, BFD_SUCCEEDED, NULL);
        return BF_OK;
    }
    int *pending = malloc((size_t)c->n_chunks * sizeof *pending);
    char *model = bfd_blob_path(d->blobs, row->model_id), *dataset = bfd_blob_path(d->blobs, row->dataset_id);
    char *trials = bfd_trials_dir(d, row->id), *errmap = NULL;
    bf_status st = BF_OK;
    if (!pending || !model || !dataset || !trials) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }
    if ((st = errmap_blob(d, row, &errmap, err)) != BF_OK) goto out;
    size_t n = 0;
    for (int i = 0; i < c->n_chunks; i++)
        if (!c->chunk_done[i]) pending[n++] = i;
    bfd_job_spec js = {.id = row->id, .tenant = row->tenant, .spec_json = row->spec_json, .model_path = model,
                       .dataset_path = dataset, .errmap_path = errmap, .trials_dir = trials, .n_chunks = c->n_chunks,
                       .queued_at = row->created};
    st = bfd_sched_add(d->sched, &js, pending, n, row->state == BFD_RUNNING, err);
out:
    if (st != BF_OK) bfd_live_drop(d, c);
    free(pending);
    free(model);
    free(dataset);
    free(errmap);
    free(trials);
    return st;
}

bf_status bfd_campaigns_start(bfd *d, const bfd_campaign_row *row, bf_error *err)
{
    return start(d, row, NULL, NULL, 0, err);
}

/* A campaign that had chunks in flight when the daemon last stopped saw
 * the daemon die (a clean stop clears them): that is one death, as a
 * worker's would be. Returns 1 when the campaign has died twice and was
 * failed here instead of being resumed into a third crash. */
static int poisoned(bfd *d, const bfd_campaign_row *row)
{
    int deaths = 0, inflight = 0;
    char *reasons = NULL;
    bf_error err = {0};
    if (bfd_campaign_deaths(d->store, row->id, &deaths, &inflight, &err) != BF_OK) {
        bfd_log(d, "error", "campaign %s: reading its worker deaths: %s", row->id, err.msg);
        return 0;
    }
    if (inflight > 0 &&
        bfd_campaign_death(d->store, row->id, "the daemon died while chunks of this campaign ran (killed, or out of memory?)",
                           1, &deaths, &reasons, &err) != BF_OK) {
        bfd_log(d, "error", "campaign %s: recording the daemon's death: %s", row->id, err.msg);
        return 0;
    }
    if (deaths < 2) {
        free(reasons);
        return 0;
    }
    static const char twice[] = "crashed twice, so it is not run again";
    size_t n = strlen(reasons ? reasons : "") + sizeof twice + 32;
    char *why = malloc(n);
    if (why) snprintf(why, n, "%s: %s", twice, reasons ? reasons : "(reasons not recorded)");
    if (bfd_campaign_finish(d->store, row->id, BFD_FAILED, bfd_now(), NULL, why ? why : twice, NULL, &err) != BF_OK)
        bfd_log(d, "error", "campaign %s: recording its end failed: %s", row->id, err.msg);
    bfd_log(d, "warn", "campaign %s failed instead of resuming: %s", row->id, why ? why : twice);
    free(why);
    free(reasons);
    return 1;
}

bf_status bfd_campaigns_resume(bfd *d, bf_error *err)
{
    bfd_campaign_row *rows = NULL;
    size_t n = 0;
    bf_status st = bfd_campaign_unfinished(d->store, &rows, &n, err);
    if (st != BF_OK) return st;
    for (size_t i = 0; i < n && st == BF_OK; i++) {
        if (poisoned(d, &rows[i])) continue;
        int *idx = NULL;
        char **json = NULL;
        size_t k = 0;
        if ((st = bfd_chunk_list(d->store, rows[i].id, &idx, &json, &k, err)) != BF_OK) break;
        bfd_log(d, "info", "campaign %s resumes (%s, %zu of %d chunks done)", rows[i].id, bfd_state_name(rows[i].state), k,
                rows[i].n_chunks);
        st = start(d, &rows[i], idx, json, k, err);
        bfd_chunk_list_free(idx, json, k);
    }
    bfd_campaign_rows_free(rows, n);
    return st;
}

void bfd_campaigns_cancel(bfd *d, bfd_camp *c)
{
    bfd_sched_cancel(d->sched, c->id);
    finish(d, c, BFD_CANCELED, NULL);
}

static void on_msg(bfd *d, bfd_msg *m)
{
    bfd_camp *c = bfd_live_find(d->live, m->id);
    if (!c || c->state >= BFD_SUCCEEDED) return;   /* canceled or failed meanwhile: late news */
    bf_error err = {0};
    switch (m->kind) {
    case BFD_MSG_STARTED:
        if (c->state == BFD_QUEUED) {
            c->state = BFD_RUNNING;
            if (bfd_campaign_set_running(d->store, c->id, bfd_now(), &err) != BF_OK)
                bfd_log(d, "error", "campaign %s: %s", c->id, err.msg);
            bfd_camp_event(d, c, "state", state_json(BFD_RUNNING));
        }
        bfd_metrics_queue_wait(d->metrics, m->seconds);
        break;
    case BFD_MSG_PROGRESS:
        if (m->chunk >= 0 && m->chunk < c->n_chunks && !c->chunk_done[m->chunk]) {
            c->chunk_prog[m->chunk][0] = m->done;
            memcpy(&c->chunk_prog[m->chunk][1], m->outcomes, sizeof m->outcomes);
            if (c->n_chunks == 1 && m->iv.set) c->iv = m->iv;
        }
        if (bfd_mono() - c->last_progress >= PROGRESS_EVERY) {
            c->last_progress = bfd_mono();
            bfd_camp_event(d, c, "progress", bfd_camp_progress(c));
        }
        break;
    case BFD_MSG_DONE: {
        /* the checkpoint first: once it is stored, a crash does not redo the chunk */
        if (bfd_chunk_put(d->store, c->id, m->chunk, m->result_json, &err) != BF_OK)
            bfd_log(d, "error", "campaign %s: checkpoint of chunk %d failed: %s", c->id, m->chunk, err.msg);
        if (absorb(c, m->chunk, m->result_json, &err) != BF_OK) {
            bfd_sched_cancel(d->sched, c->id);
            finish(d, c, BFD_FAILED, err.msg);
            return;
        }
        int64_t n = c->chunk_prog[m->chunk][0];
        bfd_metrics_outcomes(d->metrics, &c->chunk_prog[m->chunk][1]);
        /* not known: a Slurm task from before part-i.time; nothing beats a made-up 0 */
        if (n > 0 && m->seconds >= 0) bfd_metrics_trial_seconds(d->metrics, m->seconds / (double)n, n);
        if (c->chunks_left == 0) finish(d, c, BFD_SUCCEEDED, NULL);
        else if (bfd_mono() - c->last_progress >= PROGRESS_EVERY) {
            c->last_progress = bfd_mono();
            bfd_camp_event(d, c, "progress", bfd_camp_progress(c));
        }
        break;
    }
    case BFD_MSG_FAILED:
        bfd_sched_cancel(d->sched, c->id);
        finish(d, c, BFD_FAILED, m->error ? m->error : "a chunk failed");
        break;
    case BFD_MSG_STOPPED:
        break;   /* canceled (already final) or shutting down (resumes at the next start) */
    }
}

void bfd_campaigns_on_wake(uv_async_t *a)
{
    bfd *d = a->data;
    bfd_msg *list = bfd_sched_take(d->sched);
    for (bfd_msg *m = list; m; m = m->next) on_msg(d, m);
    bfd_msg_free(list);
}
