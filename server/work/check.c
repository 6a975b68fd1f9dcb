/* An upload's deep check in a child: the child's side (bfd_check_main) and
 * the daemon's (spawn, read its one frame, explain how it ended). */
#include "work/check.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bitflip/api/spec.h"
#include "bitflip/api/summary.h"
#include "bitflip/bitflip.h"
#include "bitflip/report.h"
#include "store/blob.h"
#include "work/proc.h"
#include "work/worker.h"

/* A parser that loops forever on a crafted file is stopped after this. */
#define CHECK_SECONDS 300
/* The kinds after the store's (store.h): a campaign, a trial's picture. */
#define CHECK_CAMPAIGN BFD_KIND_COUNT
#define CHECK_PICTURE (BFD_KIND_COUNT + 1)

/* --- the child */

/* --check-campaign MODEL DATASET [ERRMAP], the spec as one frame on stdin: what the
 * campaign's worker will hold at its peak (as job.c runs it: one thread,
 * the default cache budget) against the limit. */
static json_t *check_campaign(const char *model_path, const char *dataset_path, const char *errmap_path,
                              const char *text, size_t len, int64_t job_memory, const bf_limits *lim, bf_status *st,
                              bf_error *err)
{
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_campaign_spec spec = {0};
    bf_spec_problems probs = {0};
    int have_spec = 0;
    json_t *out = NULL;
    if (!text) { *st = bf_error_set(err, BF_EIO, "no spec on stdin"); goto out; }
    if ((*st = bf_spec_parse_opts(text, len, &lim->spec, &spec, &probs)) != BF_OK) {
        *st = bf_error_set(err, BF_EINVAL, "the spec no longer validates: %s: %s", probs.count ? probs.items[0].pointer : "",
                           probs.count ? probs.items[0].message : "?");
        goto out;
    }
    have_spec = 1;
    if ((*st = bf_model_load_file_opts(model_path, &lim->model, &m, err)) != BF_OK) { bf_error_prefix(err, "model"); goto out; }
    if ((*st = bf_dataset_load_file_opts(dataset_path, &lim->data, &ds, err)) != BF_OK) { bf_error_prefix(err, "dataset"); goto out; }
    if ((*st = bf_model_bind_dims(&m, ds, err)) != BF_OK) goto out;
    if (errmap_path && (*st = bf_errmap_load_file(errmap_path, &lim->errmap, &spec.errmap, err)) != BF_OK) {
        bf_error_prefix(err, "error map");
        goto out;
    }
    bf_campaign_opts co = {.threads = 1};
    bf_job_budget b = {0};
    *st = bf_campaign_estimate(m, ds, &spec, &co, &b, err);
    if (*st == BF_EUNSUPPORTED) {   /* shapes read from data too big to fold here: the worker's limit still holds */
        *st = BF_OK;
        out = json_pack("{s:{s:n}}", "estimate", "bytes");
        goto out;
    }
    if (*st == BF_OK) *st = bf_job_budget_check(&b, (uint64_t)job_memory, "campaign", "--job-memory", err);
    if (*st == BF_OK) out = json_pack("{s:{s:I}}", "estimate", "bytes", (json_int_t)b.total_bytes);
out:
    if (have_spec) bf_campaign_spec_free(&spec);
    bf_spec_problems_free(&probs);
    bf_dataset_free(ds);
    bf_model_free(m);
    return out;
}

/* --picture MODEL DATASET TRIAL,IMAGE,TRIALS, the spec as one frame on
 * stdin: trial TRIAL run again and drawn on image IMAGE (bfr_trial_picture);
 * TRIALS is the result's trial count, which the spec must make. A trial or
 * image out of range, or a campaign with nothing to draw, comes back as
 * {"error", "range": true} (the route's 400 and 422). */
static json_t *picture(char **argv, const char *text, size_t len, const bf_limits *lim, bf_status *st, bf_error *err)
{
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_campaign_spec spec = {0};
    bf_spec_problems probs = {0};
    int have_spec = 0;
    json_t *fig = NULL;
    bfr_trial_req q = {-1, -1, -1};
    if (sscanf(argv[4], "%lld,%lld,%lld", &q.trial, &q.image, &q.trials) != 3) {
        *st = bf_error_set(err, BF_EINVAL, "which trial to draw: '%s' is not TRIAL,IMAGE,TRIALS", argv[4]);
        return NULL;
    }
    if (!text) { *st = bf_error_set(err, BF_EIO, "no spec on stdin"); goto out; }
    if ((*st = bf_spec_parse_opts(text, len, &lim->spec, &spec, &probs)) != BF_OK) {
        *st = bf_error_set(err, BF_EINVAL, "the spec no longer validates: %s: %s", probs.count ? probs.items[0].pointer : "",
                           probs.count ? probs.items[0].message : "?");
        goto out;
    }
    have_spec = 1;
    if ((*st = bf_model_load_file_opts(argv[2], &lim->model, &m, err)) != BF_OK) { bf_error_prefix(err, "model"); goto out; }
    if ((*st = bf_dataset_load_file_opts(argv[3], &lim->data, &ds, err)) != BF_OK) { bf_error_prefix(err, "dataset"); goto out; }
    if ((*st = bf_model_bind_dims(&m, ds, err)) != BF_OK) goto out;
    if (!(fig = bfr_trial_picture(m, ds, &spec, &q, err))) *st = err->status ? err->status : BF_ENOMEM;
out:
    if (have_spec) bf_campaign_spec_free(&spec);
    bf_spec_problems_free(&probs);
    bf_dataset_free(ds);
    bf_model_free(m);
    return fig ? json_pack("{s:o}", "figure", fig) : NULL;
}

/* The check's one frame of JSON (malloc'd; NULL when out of memory): argv
 * as the child gets it (proc.c), `spec` the campaign's spec for
 * --check-campaign and --picture (NULL: none came). */
static char *answer(int argc, char **argv, const char *spec, size_t spec_len, int64_t job_memory, const bf_limits *lim)
{
    bf_error err = {0};
    int model = !strcmp(argv[1], "--check-model"), campaign = !strcmp(argv[1], "--check-campaign");
    int errmap = !strcmp(argv[1], "--check-errmap"), pic = !strcmp(argv[1], "--picture");
    json_t *sum = NULL, *out = NULL;
    bf_status st = BF_OK;
    if (pic) {
        out = picture(argv, spec, spec_len, lim, &st, &err);
    } else if (campaign) {
        /* the map, when there is one, comes before the options (proc.c appends those) */
        const char *em = argc > 4 && strncmp(argv[4], "--", 2) ? argv[4] : NULL;
        out = check_campaign(argv[2], argv[3], em, spec, spec_len, job_memory, lim, &st, &err);
        if (st == BF_OK && !out) st = bf_error_set(&err, BF_ENOMEM, "out of memory");
    } else if (model) {
        bf_model *m = NULL;
        st = bf_model_load_file_opts(argv[2], &lim->model, &m, &err);
        if (st == BF_OK && !(sum = bf_model_summary(m))) st = bf_error_set(&err, BF_ENOMEM, "out of memory summarising");
        bf_model_free(m);
    } else if (errmap) {
        bf_errmap *em = NULL;
        st = bf_errmap_load_file(argv[2], &lim->errmap, &em, &err);
        if (st == BF_OK && !(sum = bf_errmap_summary(em))) st = bf_error_set(&err, BF_ENOMEM, "out of memory summarising");
        bf_errmap_free(em);
    } else {
        bf_dataset *ds = NULL;
        st = bf_dataset_load_file_opts(argv[2], &lim->data, &ds, &err);
        if (st == BF_OK && !(sum = bf_dataset_summary(ds))) st = bf_error_set(&err, BF_ENOMEM, "out of memory summarising");
        bf_dataset_free(ds);
    }
    if (st == BF_OK) {
        if (!campaign && !pic) out = json_pack("{s:o}", "summary", sum);
    } else {
        /* the loaders name the files they read: here those are the daemon's
         * blob paths, which the client never sent (the reply names the upload) */
        for (int i = 2; i < argc && i < 5 && strncmp(argv[i], "--", 2); i++) bfd_blob_scrub(err.msg, argv[i]);
        /* an upload's: the reply puts the upload's id and name first */
        const char *id = strrchr(argv[2], '/');
        size_t n = id ? strlen(++id) : 0;
        if (!campaign && !pic && n && !strncmp(err.msg, id, n) && !strncmp(err.msg + n, ": ", 2))
            memmove(err.msg, err.msg + n + 2, strlen(err.msg + n + 2) + 1);
        char why[BF_ERROR_MSG_MAX + 128];
        if (st == BF_ENOMEM) bfd_oom_reason(job_memory, err.msg, why, sizeof why);
        else snprintf(why, sizeof why, "%s", err.msg[0] ? err.msg : bf_strerror(st));
        out = json_pack("{s:s, s:b, s:b, s:b}", "error", why, "oom", st == BF_ENOMEM, "limit", st == BF_ELIMIT, "range",
                        pic && st == BF_ERANGE);
    }
    char *s = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    return s;
}

int bfd_check_main(int argc, char **argv)
{
    int64_t job_memory = bfd_proc_arg_memory(argc, argv);
    bf_error err = {0};
    if (argc < 3) return 2;
    int campaign = !strcmp(argv[1], "--check-campaign"), pic = !strcmp(argv[1], "--picture");
    if ((campaign && argc < 4) || (pic && argc < 5)) return 2;
    if (bfd_proc_child_init(job_memory, &err) != BF_OK) {
        fprintf(stderr, "bitflipd check %d: %s\n", (int)getpid(), err.msg);
        return 3;
    }
    /* the daemon validated them at start: a bad list here is a daemon bug */
    bf_limits lim;
    if (bfd_proc_arg_limits(argc, argv, &lim, &err) != BF_OK) {
        fprintf(stderr, "bitflipd check %d: %s\n", (int)getpid(), err.msg);
        return 3;
    }
    char *spec = NULL;
    size_t spec_len = 0;
    if ((campaign || pic) && bfd_frame_read_fd(0, &spec, &spec_len, &err) != 1) {
        free(spec);   /* none came, or not one frame: the answer says "no spec" */
        spec = NULL;
    }
    char *s = answer(argc, argv, spec, spec_len, job_memory, &lim);
    free(spec);
    int rc = s && bfd_frame_write_fd(1, s, strlen(s), &err) == BF_OK ? 0 : 3;
    free(s);
    return rc;
}

/* --- the daemon's side */

typedef struct check {
    bfd *d;
    int kind;                 /* BFD_MODEL, BFD_DATASET, CHECK_CAMPAIGN */
    uv_process_t proc;
    uv_pipe_t in;             /* a campaign's spec goes to the child this way */
    uv_write_t wreq;
    char *spec_frame;         /* ... framed, kept until written */
    uv_pipe_t out;
    uv_timer_t timer;
    int open;                 /* handles not yet closed */
    int exited, eof, reported, bad, timed_out;
    int in_process;           /* d->check_in_process: no child, only the timer is open */
    int64_t status;
    int signal;
    bfd_frame_reader rd;
    char *payload;            /* the child's one frame */
    size_t payload_len;
    char rbuf[65536];
    bfd_check_done done;
    void *user;
} check;

static void on_closed(uv_handle_t *h)
{
    check *c = h->data;
    if (--c->open > 0) return;
    bfd_frame_reader_free(&c->rd);
    free(c->payload);
    free(c->spec_frame);
    free(c);
}

static void close_all(check *c)
{
    if (c->in_process) {
        uv_close((uv_handle_t *)&c->timer, on_closed);
        return;
    }
    if ((c->kind == CHECK_CAMPAIGN || c->kind == CHECK_PICTURE) && !uv_is_closing((uv_handle_t *)&c->in)) uv_close((uv_handle_t *)&c->in, on_closed);
    uv_close((uv_handle_t *)&c->proc, on_closed);
    uv_close((uv_handle_t *)&c->out, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
}

static void kill_child(check *c)
{
    if (!c->exited) uv_process_kill(&c->proc, SIGKILL);
}

static void interpret(check *c, bfd_check_result *res)
{
    const char *what = c->kind == BFD_MODEL ? "model" : c->kind == BFD_DATASET ? "eval set"
                     : c->kind == BFD_ERRMAP ? "error map" : c->kind == CHECK_PICTURE ? "trial" : "campaign";
    char how[256];
    /* a picture is drawn, the rest parsed */
    const char *verb = c->kind == CHECK_PICTURE ? "drawn" : "parsed", *who = c->kind == CHECK_PICTURE ? "child" : "parser";
    res->st = BF_EFORMAT;
    res->refused = 1;
    if (c->bad) {
        snprintf(res->why, sizeof res->why, "the %s could not be %s: the %s's reply was malformed", what, verb, who);
        return;
    }
    if (c->timed_out) {
        snprintf(res->why, sizeof res->why, "the %s could not be %s within %d s: the %s was stopped", what, verb,
                 CHECK_SECONDS, who);
        return;
    }
    if (c->signal || c->status != 0) {
        /* "the parser was killed by SIGSEGV", "the parser exited with status 1" */
        bfd_exit_reason(c->status, c->signal, c->d->cfg.job_memory, how, sizeof how);
        snprintf(res->why, sizeof res->why, "the %s could not be %s: the %s %s%s", what, verb, who, c->signal ? "was " : "",
                 how);
        return;
    }
    json_t *doc = c->payload ? json_loadb(c->payload, c->payload_len, 0, NULL) : NULL;
    json_t *sum = json_object_get(doc, c->kind == CHECK_CAMPAIGN ? "estimate" : c->kind == CHECK_PICTURE ? "figure" : "summary");
    const char *e = json_string_value(json_object_get(doc, "error"));
    res->over_limit = json_is_true(json_object_get(doc, "limit"));
    res->out_of_range = json_is_true(json_object_get(doc, "range"));
    if (json_is_object(sum)) {
        res->summary = json_dumps(sum, JSON_COMPACT);
        res->refused = 0;
        res->st = res->summary ? BF_OK : BF_ENOMEM;
        if (!res->summary) snprintf(res->why, sizeof res->why, "out of memory");
    } else if (e) {
        snprintf(res->why, sizeof res->why, "%s", e);
    } else {
        snprintf(res->why, sizeof res->why, "the %s could not be %s: the %s ended without an answer", what, verb, who);
    }
    json_decref(doc);
}

static void maybe_finish(check *c)
{
    if (c->reported || !c->exited || !c->eof) return;
    c->reported = 1;
    bfd_check_result res = {0};
    interpret(c, &res);
    close_all(c);
    c->done(c->user, &res);
    free(res.summary);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    check *c = p->data;
    c->exited = 1;
    c->status = status;
    c->signal = sig;
    uv_timer_stop(&c->timer);
    maybe_finish(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    check *c = h->data;
    buf->base = c->rbuf;
    buf->len = sizeof c->rbuf;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    check *c = s->data;
    if (n == 0) return;
    if (n < 0) {
        uv_read_stop(s);
        c->eof = 1;
        maybe_finish(c);
        return;
    }
    char *p = NULL;
    size_t len = 0;
    if (bfd_frame_feed(&c->rd, buf->base, (size_t)n, NULL) != BF_OK || (c->payload && c->rd.len)) {
        c->bad = 1;   /* too big, or more than the one frame it may send */
    } else if (bfd_frame_next(&c->rd, &p, &len) == 1) {
        c->payload = p;
        c->payload_len = len;
    }
    if (c->bad) {
        uv_read_stop(s);
        kill_child(c);
        c->eof = 1;
        maybe_finish(c);
    }
}

static void on_timeout(uv_timer_t *t)
{
    check *c = t->data;
    c->timed_out = 1;
    kill_child(c);
}

static void on_written(uv_write_t *w, int status)
{
    check *c = w->data;
    (void)status;   /* a child that died before reading says so through its exit */
    if (!uv_is_closing((uv_handle_t *)&c->in)) uv_close((uv_handle_t *)&c->in, on_closed);
}

static void on_answer(uv_timer_t *t)
{
    check *c = t->data;
    c->exited = c->eof = 1;
    maybe_finish(c);
}

/* d->check_in_process (fuzz_http): the child's work done here and now, its
 * frame reported on the next loop turn as a child's would be, so that a check
 * costs no process. No memory limit and no timeout: a fuzz build's choice,
 * never bitflipd's (the child path is the integration tests'). */
static bf_status start_in_process(check *c, const char *const *args, const char *spec_json, bf_error *err)
{
    bfd *d = c->d;
    char *argv[10], mem[32];
    int n = 0;
    argv[n++] = "bitflipd";
    for (size_t i = 0; args[i] && n < 5; i++) argv[n++] = (char *)args[i];
    snprintf(mem, sizeof mem, "%lld", (long long)d->cfg.job_memory);
    argv[n++] = "--job-memory";
    argv[n++] = mem;
    if (d->cfg.limits_arg && *d->cfg.limits_arg) {
        argv[n++] = "--limits";
        argv[n++] = d->cfg.limits_arg;
    }
    argv[n] = NULL;
    bf_limits lim;
    bf_status st = bfd_proc_arg_limits(n, argv, &lim, err);
    if (st != BF_OK) {
        free(c->spec_frame);
        free(c);
        return st;
    }
    c->payload = answer(n, argv, spec_json, spec_json ? strlen(spec_json) : 0, d->cfg.job_memory, &lim);
    c->payload_len = c->payload ? strlen(c->payload) : 0;
    c->bad = !c->payload;
    c->in_process = 1;
    c->timer.data = c;
    uv_timer_init(d->loop, &c->timer);
    c->open = 1;
    uv_timer_start(&c->timer, on_answer, 0, 0);
    return BF_OK;
}

static bf_status start(bfd *d, int kind, const char *const *args, const char *spec_json, bfd_check_done done,
                       void *user, bf_error *err)
{
    check *c = calloc(1, sizeof *c);
    if (!c) return bf_error_set(err, BF_ENOMEM, "out of memory");
    size_t frame_len = 0;
    if (spec_json && !(c->spec_frame = bfd_frame_encode(spec_json, strlen(spec_json), &frame_len))) {
        free(c);
        return bf_error_set(err, BF_ENOMEM, "out of memory");
    }
    c->d = d;
    c->kind = kind;
    c->done = done;
    c->user = user;
    c->rd.max = BFD_FRAME_MAX;
    if (d->check_in_process) return start_in_process(c, args, spec_json, err);
    c->proc.data = c->out.data = c->timer.data = c->in.data = c->wreq.data = c;
    uv_pipe_init(d->loop, &c->out, 0);
    uv_timer_init(d->loop, &c->timer);
    c->open = 3;
    if (spec_json) {
        uv_pipe_init(d->loop, &c->in, 0);
        c->open = 4;
    }
    bf_status st = bfd_proc_spawn(d->loop, &c->proc, on_exit_cb, args, spec_json ? &c->in : NULL, &c->out, d->cfg.job_memory,
                            d->cfg.limits_arg, err);
    if (st == BF_OK && uv_read_start((uv_stream_t *)&c->out, on_alloc, on_read) != 0) {
        uv_process_kill(&c->proc, SIGKILL);
        st = bf_error_set(err, BF_EIO, "cannot read from the checking process");
    }
    if (st == BF_OK && spec_json) {
        uv_buf_t b = uv_buf_init(c->spec_frame, (unsigned)frame_len);
        if (uv_write(&c->wreq, (uv_stream_t *)&c->in, &b, 1, on_written) != 0) {
            uv_process_kill(&c->proc, SIGKILL);
            st = bf_error_set(err, BF_EIO, "cannot send the spec to the checking process");
        }
    }
    if (st != BF_OK) {
        c->reported = 1;   /* nothing will be reported: the caller replies now */
        close_all(c);
        return st;
    }
    uv_timer_start(&c->timer, on_timeout, (uint64_t)CHECK_SECONDS * 1000, 0);
    return BF_OK;
}

bf_status bfd_check_start(bfd *d, int kind, const char *path, bfd_check_done done, void *user, bf_error *err)
{
    const char *args[] = {kind == BFD_MODEL ? "--check-model" : kind == BFD_ERRMAP ? "--check-errmap" : "--check-dataset",
                          path, NULL};
    return start(d, kind, args, NULL, done, user, err);
}

bf_status bfd_check_campaign_start(bfd *d, const char *model_path, const char *dataset_path, const char *errmap_path,
                                   const char *spec_json, bfd_check_done done, void *user, bf_error *err)
{
    const char *args[] = {"--check-campaign", model_path, dataset_path, errmap_path, NULL};
    return start(d, CHECK_CAMPAIGN, args, spec_json, done, user, err);
}

bf_status bfd_picture_start(bfd *d, const char *model_path, const char *dataset_path, const char *spec_json, int64_t trial,
                            int64_t image, int64_t trials, bfd_check_done done, void *user, bf_error *err)
{
    /* one argument: a child takes at most four (proc.c) */
    char which[80];
    snprintf(which, sizeof which, "%lld,%lld,%lld", (long long)trial, (long long)image, (long long)trials);
    const char *args[] = {"--picture", model_path, dataset_path, which, NULL};
    return start(d, CHECK_PICTURE, args, spec_json, done, user, err);
}
