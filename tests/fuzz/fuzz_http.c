/* libFuzzer target: the daemon's own request handling — route matching,
 * headers (Authorization, Idempotency-Key, Content-Type, Content-Length,
 * Last-Event-ID), query arguments, body limits and validation, handlers —
 * driven through the real libmicrohttpd daemon and libuv loop that bitflipd
 * runs (http.c), not a copy of them.
 *
 * Each input is one HTTP request: its head up to the first blank line, and
 * the body after it. So that mutations reach the handlers rather than stall
 * in a body of the wrong length, Content-Length is recomputed from the body
 * (unless the head says chunked). The request goes over a socketpair handed
 * to libmicrohttpd with MHD_add_connection (from 127.0.0.1, as loopback
 * would), and the loop runs until the reply is complete or 300 ms pass (an
 * event stream never completes on its own).
 *
 * The daemon has a temp data dir with one token (tenant "fuzz", token
 * FUZZ_TOKEN, which the seeds use), the digits model and eval set uploaded
 * (so campaign specs in the seeds can name them), a finished campaign with
 * a known id (FUZZ_CAMPAIGN: for events, results, cancel, delete), one
 * worker, and small limits so that campaigns stay quick. Uploads and
 * campaign submissions are checked in-process (bfd.check_in_process; set
 * BF_FUZZ_CHECK_CHILD=1 for the daemon's child per check). The daemon logs
 * a line per request on stderr: run with -close_fd_mask=2 to keep only
 * libFuzzer's (and the sanitizers') output. */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bitflip/api/summary.h"
#include "bitflip/bitflip.h"
#include "daemon.h"
#include "http/auth.h"
#include "http/sse.h"
#include "store/sha256.h"
#include "work/campaigns.h"
#include "work/live.h"
#include "work/worker.h"
#include "work/scheduler.h"

#ifndef BF_FIXTURES
#error "BF_FIXTURES: the tests/fixtures directory"
#endif

#define FUZZ_TOKEN "bft_fuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzz"
#define FUZZ_CAMPAIGN "c0123456789abcdef"
#define MAX_REQUEST (256 * 1024)

static bfd d;
static uv_loop_t loop;
static char data_dir[] = "/tmp/bfd-fuzz-http-XXXXXX";

static void die(const char *what, const bf_error *err)
{
    fprintf(stderr, "fuzz_http: %s: %s\n", what, err && err->msg[0] ? err->msg : "failed");
    abort();
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

/* libFuzzer ends with exit(): the temp data dir goes with it (the daemon's
 * threads are not joined, so only files are touched here). */
static void remove_data_dir(void)
{
    nftw(data_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void on_wake(uv_async_t *a)
{
    bfd *dd = a->data;
    if (dd->sched) bfd_campaigns_on_wake(a);
}

/* Stores a fixture as tenant "fuzz"'s model or dataset, as an upload would;
 * its id goes to sha_out. */
static void put_fixture(const char *file, bfd_kind k, char sha_out[65])
{
    bf_error err = {0};
    char path[4096], sha[65];
    snprintf(path, sizeof path, "%s/conformance/%s", BF_FIXTURES, file);
    FILE *f = fopen(path, "rb");
    if (!f) die(path, NULL);
    bfd_upload *u = NULL;
    if (bfd_upload_begin(d.blobs, &u, &err) != BF_OK) die("upload", &err);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        if (bfd_upload_write(u, buf, n, &err) != BF_OK) die("upload", &err);
    fclose(f);
    int64_t size = bfd_upload_size(u);
    if (bfd_upload_finish(u, sha, &err) != BF_OK) die("upload", &err);
    json_t *sum = NULL;
    if (k == BFD_MODEL) {
        bf_model *m = NULL;
        if (bf_model_load_file(path, &m, &err) != BF_OK) die(path, &err);
        sum = bf_model_summary(m);
        bf_model_free(m);
    } else {
        bf_dataset *ds = NULL;
        if (bf_dataset_load_file(path, &ds, &err) != BF_OK) die(path, &err);
        sum = bf_dataset_summary(ds);
        bf_dataset_free(ds);
    }
    char *text = json_dumps(sum, JSON_COMPACT);
    json_decref(sum);
    bfd_item it = {.tenant = (char *)"fuzz", .name = (char *)file, .size = size, .summary_json = text, .created = 1.0};
    snprintf(it.id, sizeof it.id, "%s", sha);
    if (!text || bfd_item_put(d.store, k, &it, NULL, &err) != BF_OK) die("item", &err);
    free(text);
    memcpy(sha_out, sha, 65);
}

static bfd_campaign_row done_row;   /* FUZZ_CAMPAIGN as it finished */

/* FUZZ_CAMPAIGN, submitted as the route would and run to its end. */
static void finished_campaign(const char *model, const char *dataset)
{
    bf_error err = {0};
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"model\":\"%s\",\"dataset\":\"%s\",\"seed\":7,\"trials\":16,\"faults\":{\"target\":\"weights\","
             "\"tensors\":[\"*\"],\"model\":\"bitflip\",\"bits\":1,\"representation\":\"fp32\"},\"sampling\":\"uniform\"}",
             model, dataset);
    bfd_campaign_row row = {.tenant = (char *)"fuzz", .state = BFD_QUEUED, .spec_json = spec, .created = bfd_now(),
                            .trials_planned = 16, .n_chunks = 1};
    snprintf(row.id, sizeof row.id, "%s", FUZZ_CAMPAIGN);
    snprintf(row.model_id, sizeof row.model_id, "%s", model);
    snprintf(row.dataset_id, sizeof row.dataset_id, "%s", dataset);
    if (bfd_campaign_insert(d.store, &row, &err) || bfd_campaigns_start(&d, &row, &err)) die("campaign", &err);
    for (int i = 0; i < 3000; i++) {   /* at most ~30 s */
        bfd_campaign_row got = {0};
        if (bfd_campaign_get(d.store, NULL, FUZZ_CAMPAIGN, &got, &err)) die("campaign", &err);
        if (got.state >= BFD_SUCCEEDED) {
            done_row = got;   /* kept, to put it back after an input deletes it */
            return;
        }
        bfd_campaign_row_clear(&got);
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(10000);
    }
    die("campaign never finished", NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* The daemon's workers and upload checks are this binary run again
     * (/proc/self/exe) in a hidden mode: serve that mode, as main.c does. */
    int child = bfd_child_main(*argc, *argv);
    if (child >= 0) exit(child);
    bf_error err = {0};
    char path[4096], hash[65];
    if (!mkdtemp(data_dir)) die("mkdtemp", NULL);
    atexit(remove_data_dir);
    bfd_config_defaults(&d.cfg);
    d.cfg.port = 0;
    d.cfg.workers = 1;
    d.cfg.max_upload_bytes = MAX_REQUEST;
    d.cfg.max_json_bytes = 64 * 1024;
    d.cfg.max_trials = 64;
    d.cfg.max_connections_per_ip = 0;
    d.cfg.tenant_queued = 8;
    if (!(d.cfg.data_dir = strdup(data_dir))) die("strdup", NULL);
    snprintf(path, sizeof path, "%s/trials", data_dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/bitflip.db", data_dir);
    if (bfd_store_open(path, &d.store, &err) || bfd_store_boot(d.store, &d.boot, &err)) die("store", &err);
    if (bfd_blobs_open(data_dir, &d.blobs, &err)) die("blobs", &err);
    if (bfd_token_hash(FUZZ_TOKEN, hash, &err) || bfd_token_put(d.store, hash, "fuzz", &err)) die("token", &err);
    d.auth = 1;
    /* uploads and submissions are checked on the loop, not in a child per
     * input (work/check.c): about 85 inputs a second otherwise; the child
     * path is the daemon integration tests' (daemon_test_upload_paths, ...) */
    d.check_in_process = getenv("BF_FUZZ_CHECK_CHILD") == NULL;
    char model[65], dataset[65];
    put_fixture("demo_digits.onnx", BFD_MODEL, model);
    put_fixture("demo_digits.eval.safetensors", BFD_DATASET, dataset);
    d.on_event = bfd_sse_notify;
    d.started = bfd_now();
    if (bfd_metrics_new(&d.metrics, &err) || bfd_live_new(&d.live, &err)) die("metrics", &err);
    if (uv_loop_init(&loop) != 0) die("uv_loop_init", NULL);
    d.loop = &loop;
    uv_async_init(d.loop, &d.wake, on_wake);
    d.wake.data = &d;
    if (bfd_sched_new(&d, &d.sched, &err)) die("scheduler", &err);
    if (bfd_http_start(&d, &err)) die("http", &err);
    finished_campaign(model, dataset);
    return 0;
}

/* An input may delete FUZZ_CAMPAIGN: the next one finds it again, so that
 * no input's outcome depends on the ones before it. */
static void restore_campaign(void)
{
    bf_error err = {0};
    bfd_campaign_row got = {0}, row = done_row;
    bf_status st = bfd_campaign_get(d.store, NULL, FUZZ_CAMPAIGN, &got, &err);
    bfd_campaign_row_clear(&got);
    if (st == BF_OK) return;
    if (st != BF_ENOTFOUND) die("campaign", &err);
    row.state = BFD_QUEUED;
    if (bfd_campaign_insert(d.store, &row, &err) ||
        bfd_campaign_finish(d.store, row.id, done_row.state, done_row.finished, done_row.result_json, done_row.error,
                            done_row.verdict, &err))
        die("restoring the campaign", &err);
}

/* The input as a request with a Content-Length that matches its body. */
static size_t build_request(const uint8_t *in, size_t n, char *out, size_t cap)
{
    const uint8_t *sep = NULL;
    size_t head_len = n, body_off = n;
    for (size_t i = 0; i + 1 < n; i++) {
        if (in[i] == '\n' && in[i + 1] == '\n') { sep = in + i; head_len = i + 1; body_off = i + 2; break; }
        if (i + 3 < n && !memcmp(in + i, "\r\n\r\n", 4)) { sep = in + i; head_len = i + 2; body_off = i + 4; break; }
    }
    size_t body_len = sep ? n - body_off : 0, o = 0;
    int chunked = memmem(in, head_len, "chunked", 7) != NULL;
    /* the head, line by line, less any Content-Length */
    for (size_t i = 0; i < head_len;) {
        const uint8_t *nl = memchr(in + i, '\n', head_len - i);
        size_t end = nl ? (size_t)(nl - in) + 1 : head_len;
        int drop = !chunked && end - i >= 15 && !strncasecmp((const char *)in + i, "content-length:", 15);
        if (!drop) {
            if (o + (end - i) > cap) return 0;
            memcpy(out + o, in + i, end - i);
            o += end - i;
        }
        i = end;
    }
    if (o && out[o - 1] != '\n') {   /* a head that does not end its last line */
        if (o + 2 > cap) return 0;
        out[o++] = '\r';
        out[o++] = '\n';
    }
    if (!chunked) o += (size_t)snprintf(out + o, cap - o, "Content-Length: %zu\r\n", body_len);
    if (o + 2 + body_len > cap) return 0;
    out[o++] = '\r';
    out[o++] = '\n';
    memcpy(out + o, in + body_off, body_len);
    return o + body_len;
}

/* Runs the loop once, briefly waiting for the client socket or the loop.
 * Not when a loop timer is due: an in-process check reports on a 0 ms timer
 * (work/check.c), which no fd announces, and a fixed 1 ms wait there cost
 * each upload and submission a sleep and, on a busy machine, a wait for the
 * CPU after it (about one of each per input, measured with strace). */
static int turn(int fd)
{
    struct pollfd p[2] = {{fd, POLLIN, 0}, {uv_backend_fd(&loop), POLLIN, 0}};
    int wait_ms = uv_backend_timeout(&loop);
    poll(p, 2, wait_ms < 0 || wait_ms > 1 ? 1 : wait_ms);
    uv_run(&loop, UV_RUN_NOWAIT);
    bfd_http_run(&d);
    char buf[16384];
    ssize_t r = read(fd, buf, sizeof buf);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);   /* 1: the daemon closed */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char req[MAX_REQUEST + 4096];
    if (size > MAX_REQUEST) return -1;
    size_t len = build_request(data, size, req, sizeof req);
    if (!len) return -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) die("socketpair", NULL);
    struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = htons(40000)};
    from.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (MHD_add_connection(d.mhd, sv[0], (struct sockaddr *)&from, sizeof from) != MHD_YES) {
        close(sv[0]);   /* refused (a limit): not this input's fault */
        close(sv[1]);
        return 0;
    }
    double t0 = bfd_mono();
    size_t sent = 0;
    int closed = 0;
    /* bounded: 300 ms, also for event streams that would never end */
    while (!closed && bfd_mono() - t0 < 0.3) {
        if (sent < len) {
            ssize_t w = write(sv[1], req + sent, len - sent);
            if (w > 0) sent += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR) break;
            if (sent == len) shutdown(sv[1], SHUT_WR);
        }
        closed = turn(sv[1]);
    }
    close(sv[1]);
    /* let the daemon see the close and free the connection */
    for (int i = 0; i < 5; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        bfd_http_run(&d);
    }
    restore_campaign();
    return 0;
}
