/* Campaigns over REST: submit, list, get, events, results, cancel, delete. */
#define _GNU_SOURCE   /* open_memstream */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/auth.h"
#include "bitflip/api/gate.h"
#include "bitflip/api/result.h"
#include "bitflip/api/spec.h"
#include "work/campaigns.h"
#include "http/routes.h"
#include "store/sha256.h"
#include "work/check.h"
#include "http/sse.h"

#define TRIALS_PER_CHUNK 256
#define MAX_CHUNKS 256
#define MAX_GATES 64

static int is_campaign_id(const char *s)
{
    if (s[0] != 'c' || strlen(s) != 17) return 0;
    for (int i = 1; i < 17; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int find_campaign(bfd *d, bfd_req *r, bfd_campaign_row *row)
{
    if (!is_campaign_id(r->id)) {
        bfd_reply_problem(r, 404, NULL, "'%s' is not a campaign id (ids look like c0123456789abcdef)", r->id);
        return -1;
    }
    bf_error err = {0};
    bf_status st = bfd_campaign_get(d->store, r->tenant, r->id, row, &err);
    if (st == BF_ENOTFOUND) {
        bfd_reply_problem(r, 404, NULL, "no campaign %s (list yours with GET /v1/campaigns)", r->id);
        return -1;
    }
    if (st != BF_OK) { bfd_reply_internal(r, "reading the campaign", &err); return -1; }
    return 0;
}

static json_t *problem_item(const char *pointer, const char *fmt, const char *a)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a);
    return json_pack("{s:s, s:s}", "pointer", pointer, "detail", msg);
}

/* Whether no result could ever have this gate metric (an empty document
 * tells unknown names, -1, from names a given result may lack, 1). */
static int gate_unknown(const char *name)
{
    json_t *empty = json_object();
    double v;
    int k = bf_result_gate_value(empty, name, &v);
    json_decref(empty);
    return k < 0;
}

/* "gates": an array of "NAME OP NUMBER" strings, taken out of the spec
 * (the engine's spec does not know them). Problems go to `errors`. */
static json_t *take_gates(json_t *doc, json_t *errors)
{
    json_t *g = json_object_get(doc, "gates");
    if (!g) return NULL;
    json_incref(g);
    json_object_del(doc, "gates");
    if (!json_is_array(g) || json_array_size(g) > MAX_GATES) {
        json_array_append_new(errors, problem_item("/gates", "must be an array of at most 64 gates such as %s", "\"critical_rate<=0.05\""));
        json_decref(g);
        return NULL;
    }
    for (size_t i = 0; i < json_array_size(g); i++) {
        const json_t *e = json_array_get(g, i);
        char ptr[32];
        snprintf(ptr, sizeof ptr, "/gates/%zu", i);
        bf_gate gate;
        bf_error err = {0};
        if (!json_is_string(e)) json_array_append_new(errors, problem_item(ptr, "must be a string such as %s", "\"critical_rate<=0.05\""));
        else if (bf_gate_parse(json_string_value(e), &gate, &err) != BF_OK) json_array_append_new(errors, problem_item(ptr, "%s", err.msg));
        else if (gate_unknown(gate.name))
            json_array_append_new(errors, json_pack("{s:s, s:s+}", "pointer", ptr, "detail", "unknown metric; known: ",
                                                    bf_result_gate_names()));
    }
    return g;
}

static int count_queued(bfd *d, const char *tenant)
{
    int n = 0;
    for (bfd_camp *c = d->live->head; c; c = c->next) n += c->state == BFD_QUEUED && !strcmp(c->tenant, tenant);
    return n;
}

/* A submission between its validation and its reply: the campaign's check
 * (work/check.h) runs in a child while the request is suspended. */
typedef struct submit_work {
    bfd *d;
    bfd_req *r;
    char *spec_text, *gates_text, *key;
    char body_hash[65];
    char model_id[65], dataset_id[65];
    int64_t trials;
    int n_chunks;
} submit_work;

static void submit_work_free(submit_work *w)
{
    if (!w) return;
    free(w->spec_text);
    free(w->gates_text);
    free(w->key);
    free(w);
}

/* An earlier submission with the same Idempotency-Key: replays it (1), or
 * refuses a different body (1); 0 when there is none; -1 after an error reply. */
static int idempotent_replay(bfd *d, bfd_req *r, const char *key, const char *body_hash)
{
    bfd_campaign_row old = {0};
    bf_error err = {0};
    int rc = 1;
    bf_status st = bfd_campaign_find_idem(d->store, r->tenant, key, &old, &err);
    if (st == BF_ENOTFOUND) return 0;
    if (st != BF_OK) {
        bfd_reply_internal(r, "looking up the Idempotency-Key", &err);
        return -1;
    }
    if (strcmp(old.idem_hash, body_hash)) {
        bfd_reply_problem(r, 422, NULL, "Idempotency-Key '%s' was used for campaign %s with a different body; "
                          "use a new key for a new campaign", key, old.id);
    } else {
        char loc[64];
        snprintf(loc, sizeof loc, "/v1/campaigns/%s", old.id);
        bfd_reply_header(r, "Location", loc);
        bfd_reply_header(r, "Idempotent-Replayed", "true");
        bfd_reply_json(r, 200, bfd_campaign_json(d, &old, 0));
    }
    bfd_campaign_row_clear(&old);
    return rc;
}

/* The check said the campaign fits: record it, queue it, 202. */
static void submit_queue(bfd *d, bfd_req *r, submit_work *w)
{
    bfd_campaign_row row = {0};
    bf_error err = {0};
    /* the same key may have been taken while this one was checked */
    if (w->key && idempotent_replay(d, r, w->key, w->body_hash) != 0) return;
    if (count_queued(d, r->tenant) >= d->cfg.tenant_queued) {
        bfd_reply_header(r, "Retry-After", "60");
        bfd_reply_problem(r, 429, NULL, "you have %d campaigns queued, the most this daemon holds per tenant; wait for some "
                          "to start, or cancel some", d->cfg.tenant_queued);
        return;
    }
    char hex[17];
    if (bfd_random_hex(hex, 8, &err) != BF_OK) { bfd_reply_internal(r, "making an id", &err); return; }
    snprintf(row.id, sizeof row.id, "c%s", hex);
    row.tenant = r->tenant;
    row.state = BFD_QUEUED;
    row.spec_json = w->spec_text;
    row.gates_json = w->gates_text;
    snprintf(row.model_id, sizeof row.model_id, "%s", w->model_id);
    snprintf(row.dataset_id, sizeof row.dataset_id, "%s", w->dataset_id);
    row.idem_key = w->key;
    if (w->key) snprintf(row.idem_hash, sizeof row.idem_hash, "%s", w->body_hash);
    row.created = bfd_now();
    row.trials_planned = w->trials;
    row.n_chunks = w->n_chunks;
    if (bfd_campaign_insert(d->store, &row, &err) != BF_OK) { bfd_reply_internal(r, "recording the campaign", &err); return; }
    if (bfd_campaigns_start(d, &row, &err) != BF_OK) { bfd_reply_internal(r, "queueing the campaign", &err); return; }
    bfd_log(d, "info", "campaign %s queued: %lld trials in %d chunks, tenant %s", row.id, (long long)w->trials, row.n_chunks,
            r->tenant);
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/campaigns/%s", row.id);
    bfd_reply_header(r, "Location", loc);
    bfd_reply_json(r, 202, bfd_campaign_json(d, &row, 0));
}

static void submit_checked(void *user, bfd_check_result *res)
{
    submit_work *w = user;
    bfd *d = w->d;
    bfd_req *r = w->r;
    r->work = NULL;
    if (res->st == BF_OK) {
        submit_queue(d, r, w);
    } else if (res->over_limit) {
        /* the job memory limit: the campaign cannot run here as it is (the CLI exits 3 on this type) */
        bfd_reply_problem_typed(r, 422, BFD_PROBLEM_JOB_MEMORY, NULL, "%s", res->why);
    } else if (res->refused) {
        bfd_reply_problem(r, 422, NULL, "the campaign cannot run on this model and eval set: %s", res->why);
    } else {
        bfd_reply_header(r, "Retry-After", "1");
        bfd_reply_problem(r, 503, NULL, "cannot check the campaign now (%s); retry", res->why);
    }
    bfd_req_resume(r);
    submit_work_free(w);
}

/* An Idempotency-Key header's form; 0 when it was refused (replied). */
static int idempotency_key_ok(bfd_req *r, const char *key)
{
    size_t kl = strlen(key);
    int ok = kl >= 1 && kl <= 200;
    for (size_t i = 0; ok && i < kl; i++) ok = key[i] >= 0x20 && key[i] < 0x7f;
    if (!ok) bfd_reply_problem(r, 400, NULL, "Idempotency-Key must be 1..200 printable ASCII characters");
    return ok;
}

/* A profiled campaign's map is an upload of the tenant's, named
 * "sha256:ID": a path in a spec must not reach the daemon's disk. *id: the
 * map's id (NULL for other fault models); 0 when refused (replied). */
static int errmap_id_of(bfd_req *r, const bf_campaign_spec *spec, const char **id)
{
    *id = NULL;
    if (spec->model_kind != BF_FAULT_PROFILED) return 1;
    const char *ref = spec->error_map ? spec->error_map : "";
    size_t hex = strncmp(ref, "sha256:", 7) ? 0 : strspn(ref + 7, "0123456789abcdef");
    if (hex != 64 || ref[7 + hex]) {
        char detail[400];
        snprintf(detail, sizeof detail, "'%.80s' is not an error map of this daemon's: upload the .bfmap with POST "
                 "/v1/error-maps and give \"sha256:ID\" with the id it returns ('bitflip run' uploads a path in "
                 "the spec for you)", ref);
        bfd_reply_problem(r, 422, json_pack("[{s:s, s:s}]", "pointer", "/faults/error_map", "detail", detail), "%s",
                          detail);
        return 0;
    }
    *id = ref + 7;
    return 1;
}

/* Model, dataset and error map are ids of this tenant's uploads; 0 when one
 * is not (replied). */
static int uploads_exist(bfd *d, bfd_req *r, const bf_campaign_spec *spec, const char *errmap_id)
{
    bfd_item it = {0};
    bf_error err = {0};
    const char *names[3] = {spec->model, spec->dataset, errmap_id};
    static const char *const pointers[3] = {"/model", "/dataset", "/faults/error_map"};
    static const char *const routes[3] = {"models", "datasets", "error-maps"};
    for (int k = 0; k < 3; k++) {
        if (!names[k]) continue;
        bf_status st = bfd_item_get(d->store, k, r->tenant, names[k], &it, &err);
        bfd_item_clear(&it);
        if (st == BF_ENOTFOUND) {
            char detail[400];
            snprintf(detail, sizeof detail, "no %s with id '%.80s': upload it with POST /v1/%s and use the id it returns",
                     bfd_kind_name(k), names[k], routes[k]);
            bfd_reply_problem(r, 422, json_pack("[{s:s, s:s}]", "pointer", pointers[k], "detail", detail), "%s", detail);
            return 0;
        }
        if (st != BF_OK) { bfd_reply_internal(r, "looking up the uploads", &err); return 0; }
    }
    return 1;
}

/* The daemon's limits on a campaign's trials and a tenant's queue; 0 when
 * over one (replied). */
static int within_limits(bfd *d, bfd_req *r, const bf_campaign_spec *spec)
{
    if (spec->trials > d->cfg.max_trials) {
        char detail[200];
        snprintf(detail, sizeof detail, "%lld trials; this daemon runs at most %lld per campaign", (long long)spec->trials,
                 (long long)d->cfg.max_trials);
        bfd_reply_problem(r, 422, json_pack("[{s:s, s:s}]", "pointer", "/trials", "detail", detail), "%s", detail);
        return 0;
    }
    if (count_queued(d, r->tenant) >= d->cfg.tenant_queued) {
        bfd_reply_header(r, "Retry-After", "60");
        bfd_reply_problem(r, 429, NULL, "you have %d campaigns queued, the most this daemon holds per tenant; wait for some "
                          "to start, or cancel some", d->cfg.tenant_queued);
        return 0;
    }
    return 1;
}

void bfd_h_campaign_submit(bfd *d, bfd_req *r)
{
    json_error_t je;
    json_t *doc = NULL, *errors = json_array(), *gates = NULL;
    char *spec_text = NULL, *model_path = NULL, *dataset_path = NULL, *errmap_path = NULL;
    bf_campaign_spec spec = {0};
    int have_spec = 0;
    bf_spec_problems probs = {0};
    bf_error err = {0};
    char body_hash[65];
    submit_work *w = NULL;

    const char *key = bfd_req_header(r, "Idempotency-Key");
    if (key && !idempotency_key_ok(r, key)) goto out;
    if (bfd_sha256_hex(r->body, r->body_len, body_hash, &err) != BF_OK) { bfd_reply_internal(r, "hashing the body", &err); goto out; }
    if (key && idempotent_replay(d, r, key, body_hash) != 0) goto out;

    doc = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!doc) {
        bfd_reply_problem(r, 400, NULL, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        goto out;
    }
    if (!json_is_object(doc)) { bfd_reply_problem(r, 422, NULL, "a campaign spec is a JSON object"); goto out; }
    gates = take_gates(doc, errors);
    spec_text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    if (!spec_text) { bfd_reply_problem(r, 500, NULL, "out of memory"); goto out; }
    if (bf_spec_parse_opts(spec_text, strlen(spec_text), &d->cfg.limits.spec, &spec, &probs) != BF_OK || json_array_size(errors)) {
        have_spec = probs.count == 0;
        json_t *pj = bf_spec_problems_json(&probs);
        json_array_extend(pj, errors);
        size_t n = json_array_size(pj);
        bfd_reply_problem(r, 422, pj, "the campaign spec has %zu problem%s (see errors; the format is docs/CAMPAIGNS.md)", n,
                          n == 1 ? "" : "s");
        goto out;
    }
    have_spec = 1;
    if (spec.n_mitigations) {
        /* the daemon's chunks are shards of one campaign; a paired comparison
         * is several campaigns on the same faults, which it does not split yet */
        const char *detail = "mitigations run with 'bitflip run --local SPEC.json' for now; this daemon runs the "
                             "unprotected campaign only (drop \"mitigations\")";
        bfd_reply_problem(r, 422, json_pack("[{s:s, s:s}]", "pointer", "/mitigations", "detail", detail), "%s", detail);
        goto out;
    }

    const char *errmap_id = NULL;
    if (!errmap_id_of(r, &spec, &errmap_id) || !uploads_exist(d, r, &spec, errmap_id) || !within_limits(d, r, &spec))
        goto out;

    /* what running it will hold, against --job-memory: in a child, since
     * that loads the model (the request waits, suspended) */
    w = calloc(1, sizeof *w);
    model_path = bfd_blob_path(d->blobs, spec.model);
    dataset_path = bfd_blob_path(d->blobs, spec.dataset);
    errmap_path = errmap_id ? bfd_blob_path(d->blobs, errmap_id) : NULL;
    if (!w || !model_path || !dataset_path || (errmap_id && !errmap_path) || (key && !(w->key = strdup(key))) ||
        (gates && !(w->gates_text = json_dumps(gates, JSON_COMPACT)))) {
        bfd_reply_problem(r, 500, NULL, "out of memory");
        goto out;
    }
    w->d = d;
    w->r = r;
    snprintf(w->body_hash, sizeof w->body_hash, "%s", body_hash);
    snprintf(w->model_id, sizeof w->model_id, "%s", spec.model);
    snprintf(w->dataset_id, sizeof w->dataset_id, "%s", spec.dataset);
    w->trials = spec.trials;
    /* the stop rule looks at trials in order, so a campaign with one is not cut;
     * adaptive's stop rule reads every trial before each round (its shards
     * could not stop early, docs/SCALE.md), and
     * exhaustive learns its trial count only once the model is resolved */
    int64_t chunks = spec.stop_margin > 0 || spec.sampling == BF_SAMPLE_ADAPTIVE || spec.sampling == BF_SAMPLE_EXHAUSTIVE
                         ? 1 : (spec.trials + TRIALS_PER_CHUNK - 1) / TRIALS_PER_CHUNK;
    w->n_chunks = (int)(chunks < 1 ? 1 : chunks > MAX_CHUNKS ? MAX_CHUNKS : chunks);
    if (bfd_check_campaign_start(d, model_path, dataset_path, errmap_path, spec_text, submit_checked, w, &err) != BF_OK) {
        bfd_reply_header(r, "Retry-After", "1");
        bfd_reply_problem(r, 503, NULL, "cannot check the campaign now (%s); retry", err.msg);
        goto out;
    }
    w->spec_text = spec_text;   /* the check's now */
    spec_text = NULL;
    r->work = w;
    w = NULL;
    bfd_req_suspend(r);
out:
    submit_work_free(w);
    json_decref(doc);
    json_decref(errors);
    json_decref(gates);
    free(spec_text);
    free(model_path);
    free(dataset_path);
    free(errmap_path);
    if (have_spec) bf_campaign_spec_free(&spec);
    bf_spec_problems_free(&probs);
}

void bfd_h_campaign_list(bfd *d, bfd_req *r)
{
    int limit, more = 0, state = -1;
    int64_t after;
    if (bfd_paging(r, &limit, &after) != 0) return;
    const char *s = bfd_req_arg(r, "state");
    if (s && *s && (state = bfd_state_parse(s)) < 0) {
        bfd_reply_problem(r, 400, NULL, "state must be queued, running, succeeded, failed or canceled, got '%s'", s);
        return;
    }
    bfd_campaign_row *rows = NULL;
    size_t n = 0;
    bf_error err = {0};
    if (bfd_campaign_list(d->store, r->tenant, state, after, limit, &rows, &n, &more, &err) != BF_OK) {
        bfd_reply_internal(r, "listing campaigns", &err);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, bfd_campaign_json(d, &rows[i], 0));
    char tok[32];
    snprintf(tok, sizeof tok, "%lld", n ? (long long)rows[n - 1].seq : 0LL);
    bfd_reply_json(r, 200, json_pack("{s:o, s:s?}", "items", arr, "next_page_token", more ? tok : NULL));
    bfd_campaign_rows_free(rows, n);
}

void bfd_h_campaign_get(bfd *d, bfd_req *r)
{
    bfd_campaign_row row = {0};
    if (find_campaign(d, r, &row) != 0) return;
    bfd_reply_json(r, 200, bfd_campaign_json(d, &row, 1));
    bfd_campaign_row_clear(&row);
}

void bfd_h_campaign_events(bfd *d, bfd_req *r)
{
    bfd_campaign_row row = {0};
    if (find_campaign(d, r, &row) != 0) return;
    bfd_camp *c = bfd_live_find(d->live, row.id);
    if (!c) c = bfd_camp_replay(&row);
    bfd_campaign_row_clear(&row);
    if (!c) { bfd_reply_problem(r, 500, NULL, "out of memory"); return; }
    bfd_sse_open(d, r, c);
}

typedef struct lines {
    char **v;
    size_t n, cap;
} lines;

static int read_lines(const char *path, lines *ls, size_t *total)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &lcap, f)) > 0) {
        if (ls->n == ls->cap) {
            size_t cap = ls->cap ? ls->cap * 2 : 256;
            char **v = realloc(ls->v, cap * sizeof *v);
            if (!v) { rc = -1; break; }
            ls->v = v;
            ls->cap = cap;
        }
        if (!(ls->v[ls->n] = strdup(line))) { rc = -1; break; }
        ls->n++;
        *total += (size_t)len;
    }
    free(line);
    fclose(f);
    return rc;
}

/* Per-trial records of every chunk, in trial order, as JSON Lines. Chunk i
 * holds trials i, i+K, i+2K, ... in order, so trial t is line t/K of chunk
 * t%K. */
static void reply_trials(bfd *d, bfd_req *r, const bfd_campaign_row *row)
{
    size_t k = (size_t)row->n_chunks, total = 0, pos = 0;
    char *dir = bfd_trials_dir(d, row->id), *out = NULL;
    lines *ls = calloc(k, sizeof *ls);
    if (!dir || !ls) { bfd_reply_problem(r, 500, NULL, "out of memory"); goto out; }
    for (size_t i = 0; i < k; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%zu.jsonl", dir, i);
        if (read_lines(path, &ls[i], &total) != 0) {
            bfd_reply_problem(r, 500, NULL, "the trial records of chunk %zu cannot be read (%s)", i, path);
            goto out;
        }
    }
    out = malloc(total + 1);
    if (!out) { bfd_reply_problem(r, 500, NULL, "out of memory"); goto out; }
    for (size_t t = 0;; t++) {
        lines *l = &ls[t % k];
        if (t / k >= l->n) break;
        size_t n = strlen(l->v[t / k]);
        memcpy(out + pos, l->v[t / k], n);
        pos += n;
    }
    bfd_reply_data(r, 200, "application/x-ndjson", out, pos);
    out = NULL;
out:
    for (size_t i = 0; ls && i < k; i++) {
        for (size_t j = 0; j < ls[i].n; j++) free(ls[i].v[j]);
        free(ls[i].v);
    }
    free(ls);
    free(out);
    free(dir);
}

void bfd_h_campaign_results(bfd *d, bfd_req *r)
{
    bfd_campaign_row row = {0};
    json_t *doc = NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    if (find_campaign(d, r, &row) != 0) return;
    const char *fmt = bfd_req_arg(r, "format"), *trials = bfd_req_arg(r, "trials");
    if (!fmt || !*fmt) fmt = "json";
    if (strcmp(fmt, "json") && strcmp(fmt, "csv") && strcmp(fmt, "junit")) {
        bfd_reply_problem(r, 400, NULL, "format must be json, csv or junit, got '%s'", fmt);
        goto out;
    }
    if (row.state != BFD_SUCCEEDED || !row.result_json) {
        bfd_reply_problem(r, 409, NULL, "campaign %s is %s%s%s; results exist once it has succeeded (follow %s/events)", row.id,
                          bfd_state_name(row.state), row.error ? ": " : "", row.error ? row.error : "", r->path);
        goto out;
    }
    if (trials && (!strcmp(trials, "true") || !strcmp(trials, "1"))) {
        if (strcmp(fmt, "json")) { bfd_reply_problem(r, 400, NULL, "trials=true comes as JSON Lines only (format=json)"); goto out; }
        reply_trials(d, r, &row);
        goto out;
    }
    if (!strcmp(fmt, "json")) {
        size_t n = strlen(row.result_json);
        char *s = malloc(n + 2);
        if (!s) { bfd_reply_problem(r, 500, NULL, "out of memory"); goto out; }
        memcpy(s, row.result_json, n);
        s[n] = '\n';
        s[n + 1] = '\0';
        bfd_reply_data(r, 200, "application/json", s, n + 1);
        goto out;
    }
    doc = json_loads(row.result_json, 0, NULL);
    f = open_memstream(&buf, &len);
    if (!doc || !f) { bfd_reply_problem(r, 500, NULL, "out of memory"); goto out; }
    if (!strcmp(fmt, "csv")) {
        bf_result_print_csv(f, doc);
        fclose(f);
        f = NULL;
        bfd_reply_data(r, 200, "text/csv; charset=utf-8", buf, len);
        buf = NULL;
        goto out;
    }
    /* junit: one testcase per gate */
    json_t *g = row.gates_json ? json_loads(row.gates_json, 0, NULL) : json_array();
    size_t ng = json_array_size(g);
    bf_gate gates[MAX_GATES];
    double vals[MAX_GATES];
    int ok[MAX_GATES];
    size_t k = 0;
    for (size_t i = 0; i < ng && k < MAX_GATES; i++)
        if (bf_gate_parse(json_string_value(json_array_get(g, i)), &gates[k], NULL) == BF_OK) k++;
    json_decref(g);
    bf_error err = {0};
    if (bf_gates_eval(doc, gates, k, vals, ok, &err) != BF_OK) {
        bfd_reply_problem(r, 422, NULL, "%s", err.msg);
        goto out;
    }
    bf_gates_junit(f, gates, k, vals, ok);
    fclose(f);
    f = NULL;
    bfd_reply_data(r, 200, "application/xml", buf, len);
    buf = NULL;
out:
    if (f) fclose(f);
    free(buf);
    json_decref(doc);
    bfd_campaign_row_clear(&row);
}

void bfd_h_campaign_cancel(bfd *d, bfd_req *r)
{
    bfd_campaign_row row = {0};
    bf_error err = {0};
    if (find_campaign(d, r, &row) != 0) return;
    bfd_camp *c = bfd_live_find(d->live, row.id);
    if (!c || c->state >= BFD_SUCCEEDED) {
        bfd_reply_problem(r, 409, NULL, "campaign %s has already %s", row.id, bfd_state_name(c ? c->state : row.state));
        goto out;
    }
    bfd_campaigns_cancel(d, c);
    bfd_campaign_row_clear(&row);
    if (bfd_campaign_get(d->store, r->tenant, r->id, &row, &err) != BF_OK) { bfd_reply_internal(r, "reading back", &err); goto out; }
    bfd_reply_json(r, 202, bfd_campaign_json(d, &row, 0));
out:
    bfd_campaign_row_clear(&row);
}

static void remove_trials(bfd *d, const char *id)
{
    char *dir = bfd_trials_dir(d, id);
    if (!dir) return;
    DIR *dh = opendir(dir);
    if (dh) {
        struct dirent *e;
        while ((e = readdir(dh))) {
            if (e->d_name[0] == '.') continue;
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(dh);
        rmdir(dir);
    }
    free(dir);
}

void bfd_h_campaign_delete(bfd *d, bfd_req *r)
{
    bfd_campaign_row row = {0};
    bf_error err = {0};
    if (find_campaign(d, r, &row) != 0) return;
    if (row.state < BFD_SUCCEEDED) {
        bfd_reply_problem(r, 409, NULL, "campaign %s is %s: cancel it first (POST %s/cancel)", row.id, bfd_state_name(row.state),
                          r->path);
        goto out;
    }
    if (bfd_campaign_delete(d->store, row.id, &err) != BF_OK) { bfd_reply_internal(r, "deleting", &err); goto out; }
    remove_trials(d, row.id);
    bfd_reply_data(r, 204, NULL, NULL, 0);
out:
    bfd_campaign_row_clear(&row);
}

int bfd_req_campaign(bfd *d, bfd_req *r, bfd_campaign_row *row)
{
    return find_campaign(d, r, row);
}
