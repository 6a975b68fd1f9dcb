/* A worker process (`bitflipd --worker`): reads chunks to run from stdin,
 * runs them with job.c (keeping the campaign loaded between chunks), and
 * writes progress and the outcome to stdout, one frame each (proc.h).
 *
 * Daemon to worker: {"t":"run", id, tenant, spec, model, dataset, trials,
 * n_chunks, chunk} and {"t":"drop"} (forget the loaded campaign). Worker to
 * daemon, about the chunk it runs: {"t":"progress", chunk, done, outcomes:[],
 * iv:[9 numbers or null, bfd_intervals in order]},
 * {"t":"done", chunk, seconds, result}, {"t":"failed", chunk, error, oom},
 * {"t":"stopped", chunk}. SIGUSR1 stops the running chunk within a trial. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "work/proc.h"
#include "work/scheduler.h"
#include "work/worker.h"

static int cancel_flag;   /* bf_cancel_request/clear: atomic, safe in a handler */

static void on_usr1(int sig)
{
    (void)sig;
    bf_cancel_request(&cancel_flag);
}

/* Writes and frees; a daemon that cannot be written to is gone: so are we. */
static void send_json(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    bf_error err = {0};
    if (!s || bfd_frame_write_fd(1, s, strlen(s), &err) != BF_OK) {
        fprintf(stderr, "bitflipd worker %d: cannot report to the daemon: %s\n", (int)getpid(),
                s ? err.msg : "out of memory");
        exit(3);
    }
    free(s);
    json_decref(j);
}

/* a number, or null for NAN (JSON has no NaN) */
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static void on_progress(void *user, int64_t done, const int64_t outcomes[BF_OUTCOME_COUNT], const bfd_intervals *iv)
{
    int chunk = *(int *)user;
    json_t *oc = json_array();
    for (int k = 0; k < BF_OUTCOME_COUNT; k++) json_array_append_new(oc, json_integer(outcomes[k]));
    json_t *j = json_pack("{s:s, s:i, s:I, s:o}", "t", "progress", "chunk", chunk, "done", (json_int_t)done, "outcomes", oc);
    /* iv: [critical rate, lo, hi, due rate, lo, hi, half-width overall, per tensor, per bit] */
    if (j && iv && iv->set) {
        json_t *a = json_array();
        const double *v[3] = {iv->critical, iv->due, iv->half_width};
        for (int k = 0; k < 9; k++) json_array_append_new(a, num(v[k / 3][k % 3]));
        json_object_set_new(j, "iv", a);
    }
    send_json(j);
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *str(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static void run(bfd_worker_cache *wc, json_t *msg, int64_t job_memory)
{
    bfd_job_spec js = {.id = str(msg, "id"), .tenant = str(msg, "tenant"), .spec_json = str(msg, "spec"),
                       .model_path = str(msg, "model"), .dataset_path = str(msg, "dataset"),
                       .errmap_path = str(msg, "errmap"),
                       .trials_dir = str(msg, "trials"), .n_chunks = (int)json_integer_value(json_object_get(msg, "n_chunks"))};
    int chunk = (int)json_integer_value(json_object_get(msg, "chunk"));
    if (js.errmap_path && !js.errmap_path[0]) js.errmap_path = NULL;   /* "": not a profiled campaign */
    if (!js.id || !js.tenant || !js.spec_json || !js.model_path || !js.dataset_path || !js.trials_dir ||
        js.n_chunks <= 0 || chunk < 0 || chunk >= js.n_chunks) {
        send_json(json_pack("{s:s, s:i, s:s, s:b}", "t", "failed", "chunk", chunk, "error",
                            "the daemon sent an incomplete chunk", "oom", 0));
        return;
    }
    char *result = NULL;
    bf_error err = {0};
    double t0 = mono();
    bf_status st = bfd_job_run(wc, &js, chunk, &cancel_flag, on_progress, &chunk, &result, &err);
    double secs = mono() - t0;
    /* cleared before the report, never after: a SIGUSR1 for the next chunk
     * may follow the report at once. One meant for this chunk that arrives
     * late stops the next chunk, which the daemon then simply runs again. */
    bf_cancel_clear(&cancel_flag);
    if (st == BF_OK) {
        send_json(json_pack("{s:s, s:i, s:f, s:s}", "t", "done", "chunk", chunk, "seconds", secs, "result", result));
    } else if (st == BF_ECANCELED) {
        send_json(json_pack("{s:s, s:i}", "t", "stopped", "chunk", chunk));
    } else {
        char why[BF_ERROR_MSG_MAX + 128];
        if (st == BF_ENOMEM) bfd_oom_reason(job_memory, err.msg, why, sizeof why);
        else snprintf(why, sizeof why, "%s", err.msg[0] ? err.msg : bf_strerror(st));
        /* a failed load is not kept: the next chunk of the campaign tries afresh */
        bfd_worker_cache_drop(wc);
        send_json(json_pack("{s:s, s:i, s:s, s:b}", "t", "failed", "chunk", chunk, "error", why, "oom", st == BF_ENOMEM));
    }
    free(result);
}

int bfd_worker_main(int argc, char **argv)
{
    int64_t job_memory = bfd_proc_arg_memory(argc, argv);
    bf_error err = {0};
    if (bfd_proc_child_init(job_memory, &err) != BF_OK) {
        fprintf(stderr, "bitflipd worker %d: %s\n", (int)getpid(), err.msg);
        return 3;
    }
    /* the daemon stops its workers itself (and they die with it): a terminal's
     * ^C or systemd's SIGTERM to the whole group must not look like a crash */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);

    bf_limits lim;
    if (bfd_proc_arg_limits(argc, argv, &lim, &err) != BF_OK) {
        fprintf(stderr, "bitflipd worker %d: %s\n", (int)getpid(), err.msg);
        return 3;
    }
    /* this host's fresh pages, measured once for the worker's life: every
     * job's eval set and campaign take their pages from it (bitflip/
     * limits.h, bf_host_pages) instead of measuring again, ~3 ms each */
    lim.data.host_pages = bf_host_pages_measure();
    bfd_worker_cache *wc = bfd_worker_cache_new(&lim);
    if (!wc) return 3;
    int rc = 0;
    for (;;) {
        char *payload = NULL;
        size_t len = 0;
        int got = bfd_frame_read_fd(0, &payload, &len, &err);
        if (got == 0) break;   /* the daemon closed our stdin: it is stopping */
        if (got < 0) {
            fprintf(stderr, "bitflipd worker %d: %s\n", (int)getpid(), err.msg);
            rc = 3;
            break;
        }
        json_t *msg = json_loadb(payload, len, 0, NULL);
        free(payload);
        const char *t = str(msg, "t");
        if (t && !strcmp(t, "run")) run(wc, msg, job_memory);
        else if (t && !strcmp(t, "drop")) bfd_worker_cache_drop(wc);
        else {
            fprintf(stderr, "bitflipd worker %d: the daemon sent a message it should not have\n", (int)getpid());
            json_decref(msg);
            rc = 3;
            break;
        }
        json_decref(msg);
    }
    bfd_worker_cache_free(wc);
    return rc;
}
