/* An upload's deep check in a child: the child's side (bfd_check_main) and
 * the daemon's (spawn, read its one frame, explain how it ended). */
#include "work/check.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bitflip/api/summary.h"
#include "bitflip/bitflip.h"
#include "work/proc.h"
#include "work/worker.h"

/* A parser that loops forever on a crafted file is stopped after this. */
#define CHECK_SECONDS 300

/* --- the child */

int bfd_check_main(int argc, char **argv)
{
    int64_t job_memory = bfd_proc_arg_memory(argc, argv);
    bf_error err = {0};
    if (argc < 3) return 2;
    int model = !strcmp(argv[1], "--check-model");
    if (bfd_proc_child_init(job_memory, &err) != BF_OK) {
        fprintf(stderr, "bitflipd check %d: %s\n", (int)getpid(), err.msg);
        return 3;
    }
    json_t *sum = NULL, *out = NULL;
    bf_status st;
    if (model) {
        bf_model *m = NULL;
        st = bf_model_load_file(argv[2], &m, &err);
        if (st == BF_OK && !(sum = bf_model_summary(m))) st = bf_error_set(&err, BF_ENOMEM, "out of memory summarising");
        bf_model_free(m);
    } else {
        bf_dataset *ds = NULL;
        st = bf_dataset_load_file(argv[2], &ds, &err);
        if (st == BF_OK && !(sum = bf_dataset_summary(ds))) st = bf_error_set(&err, BF_ENOMEM, "out of memory summarising");
        bf_dataset_free(ds);
    }
    if (st == BF_OK) {
        out = json_pack("{s:o}", "summary", sum);
    } else {
        char why[BF_ERROR_MSG_MAX + 128];
        if (st == BF_ENOMEM) bfd_oom_reason(job_memory, err.msg, why, sizeof why);
        else snprintf(why, sizeof why, "%s", err.msg[0] ? err.msg : bf_strerror(st));
        out = json_pack("{s:s, s:b}", "error", why, "oom", st == BF_ENOMEM);
    }
    char *s = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    int rc = s && bfd_frame_write_fd(1, s, strlen(s), &err) == BF_OK ? 0 : 3;
    free(s);
    return rc;
}

/* --- the daemon's side */

typedef struct check {
    bfd *d;
    int kind;
    uv_process_t proc;
    uv_pipe_t out;
    uv_timer_t timer;
    int open;                 /* handles not yet closed */
    int exited, eof, reported, bad, timed_out;
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
    free(c);
}

static void close_all(check *c)
{
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
    const char *what = c->kind == BFD_MODEL ? "model" : "eval set";
    char how[256];
    res->st = BF_EFORMAT;
    res->refused = 1;
    if (c->bad) {
        snprintf(res->why, sizeof res->why, "the %s could not be parsed: the parser's reply was malformed", what);
        return;
    }
    if (c->timed_out) {
        snprintf(res->why, sizeof res->why, "the %s could not be parsed within %d s: the parser was stopped", what,
                 CHECK_SECONDS);
        return;
    }
    if (c->signal || c->status != 0) {
        /* "the parser was killed by SIGSEGV", "the parser exited with status 1" */
        bfd_exit_reason(c->status, c->signal, c->d->cfg.job_memory, how, sizeof how);
        snprintf(res->why, sizeof res->why, "the %s could not be parsed: the parser %s%s", what, c->signal ? "was " : "",
                 how);
        return;
    }
    json_t *doc = c->payload ? json_loadb(c->payload, c->payload_len, 0, NULL) : NULL;
    json_t *sum = json_object_get(doc, "summary");
    const char *e = json_string_value(json_object_get(doc, "error"));
    if (json_is_object(sum)) {
        res->summary = json_dumps(sum, JSON_COMPACT);
        res->refused = 0;
        res->st = res->summary ? BF_OK : BF_ENOMEM;
        if (!res->summary) snprintf(res->why, sizeof res->why, "out of memory");
    } else if (e) {
        snprintf(res->why, sizeof res->why, "%s", e);
    } else {
        snprintf(res->why, sizeof res->why, "the %s could not be parsed: the parser ended without an answer", what);
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

bf_status bfd_check_start(bfd *d, int kind, const char *path, bfd_check_done done, void *user, bf_error *err)
{
    check *c = calloc(1, sizeof *c);
    if (!c) return bf_error_set(err, BF_ENOMEM, "out of memory");
    c->d = d;
    c->kind = kind;
    c->done = done;
    c->user = user;
    c->rd.max = BFD_FRAME_MAX;
    c->proc.data = c->out.data = c->timer.data = c;
    uv_pipe_init(d->loop, &c->out, 0);
    uv_timer_init(d->loop, &c->timer);
    c->open = 3;
    const char *args[] = {kind == BFD_MODEL ? "--check-model" : "--check-dataset", path, NULL};
    bf_status st = bfd_proc_spawn(d->loop, &c->proc, on_exit_cb, args, NULL, &c->out, d->cfg.job_memory, err);
    if (st == BF_OK && uv_read_start((uv_stream_t *)&c->out, on_alloc, on_read) != 0) {
        uv_process_kill(&c->proc, SIGKILL);
        st = bf_error_set(err, BF_EIO, "cannot read from the upload's parser");
    }
    if (st != BF_OK) {
        c->reported = 1;   /* nothing will be reported: the caller replies now */
        close_all(c);
        return st;
    }
    uv_timer_start(&c->timer, on_timeout, (uint64_t)CHECK_SECONDS * 1000, 0);
    return BF_OK;
}
