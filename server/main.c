/* bitflipd: the REST daemon. `bitflipd --help` says what it takes. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/auth.h"
#include "work/campaigns.h"
#include "daemon.h"
#include "work/live.h"
#include "work/proc.h"
#include "work/scheduler.h"
#include "work/worker.h"
#include "http/sse.h"

static const char usage[] =
    "usage: bitflipd [--listen HOST:PORT] [--data-dir DIR] [--workers N] [--job-memory SIZE]\n"
    "                [--config FILE]\n"
    "                [--log-format text|json] [--tokens-file FILE] [--port-file FILE]\n"
    "       bitflipd token create --tenant NAME [--data-dir DIR]\n"
    "       bitflipd --help | --version\n"
    "\n"
    "bitflip's fault-injection service: upload an ONNX model and an eval set, submit\n"
    "campaigns, follow them live (Server-Sent Events), fetch results. The REST API is\n"
    "described at GET /v1/openapi.yaml; docs/SERVICE.md walks through it with curl.\n"
    "\n"
    "  --listen HOST:PORT   address to serve (default 127.0.0.1:8080; port 0 = any free port).\n"
    "                       Without tokens the daemon serves loopback only.\n"
    "  --data-dir DIR       where models, datasets, campaigns and results live\n"
    "                       (default ./bitflip-data): bitflip.db (SQLite) and blobs/\n"
    "  --workers N          worker processes running trials (default: every core)\n"
    "  --job-memory SIZE    each worker's memory limit, e.g. 512M, 4G (default 4G); a\n"
    "                       campaign over it fails with that reason, the daemon stays up\n"
    "  --config FILE        JSON settings: listen, data_dir, workers, job_memory, log_format, tokens_file,\n"
    "                       max_upload_bytes, max_json_bytes, max_trials, max_connections,\n"
    "                       tenant_running, tenant_queued, heartbeat_seconds (flags win)\n"
    "  --log-format F       'text' (default) or 'json': one line per request\n"
    "  --tokens-file FILE   'tenant:token' lines, added to the daemon's tokens at start\n"
    "  --port-file FILE     write the port actually bound (for --listen HOST:0)\n"
    "\n"
    "  token create         make a bearer token for a tenant; it is printed once and only\n"
    "                       its hash is stored. With any token, every /v1 call needs one,\n"
    "                       and each tenant sees only its own models, datasets, campaigns.\n"
    "\n"
    "SIGTERM or SIGINT: stop accepting, stop running chunks, exit; queued and running\n"
    "campaigns continue at the next start from their last finished chunk.\n";

static int fail(const char *fmt, const char *a, const char *b)
{
    fputs("bitflipd: ", stderr);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 2;
}

static bf_status make_dirs(const char *dir, bf_error *err)
{
    char path[4096];
    if (mkdir(dir, 0750) != 0 && errno != EEXIST) return bf_error_set(err, BF_EIO, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/trials", dir);
    if (mkdir(path, 0750) != 0 && errno != EEXIST) return bf_error_set(err, BF_EIO, "cannot create %s: %s", path, strerror(errno));
    return BF_OK;
}

static bf_status open_store(const char *dir, bfd_store **s, bf_error *err)
{
    char path[4096];
    bf_status st = make_dirs(dir, err);
    if (st != BF_OK) return st;
    snprintf(path, sizeof path, "%s/bitflip.db", dir);
    return bfd_store_open(path, s, err);
}

static int cmd_token(int argc, char **argv)
{
    const char *tenant = NULL, *dir = "bitflip-data";
    if (argc < 3 || strcmp(argv[2], "create"))
        return fail("%s%s", "usage: bitflipd token create --tenant NAME [--data-dir DIR]", "");
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--tenant") && i + 1 < argc) tenant = argv[++i];
        else if (!strcmp(argv[i], "--data-dir") && i + 1 < argc) dir = argv[++i];
        else return fail("token create: unknown or incomplete option '%s'%s", argv[i], "");
    }
    if (!tenant) return fail("token create: which tenant? add --tenant NAME%s%s", "", "");
    if (!bfd_tenant_valid(tenant)) return fail("token create: tenant '%s' must be 1..64 of A-Z a-z 0-9 . _ -%s", tenant, "");
    bf_error err = {0};
    bfd_store *s = NULL;
    char tok[BFD_TOKEN_LEN + 1], hash[65];
    if (open_store(dir, &s, &err) != BF_OK || bfd_token_new(tok, &err) != BF_OK) {
        bfd_store_close(s);
        return fail("token create: %s%s", err.msg, "");
    }
    bfd_token_hash(tok, hash);
    bf_status st = bfd_token_put(s, hash, tenant, &err);
    bfd_store_close(s);
    if (st != BF_OK) return fail("token create: %s%s", err.msg, "");
    printf("%s\n", tok);
    fprintf(stderr, "bitflipd: token for tenant '%s' stored (hashed) in %s; it is shown only this once.\n"
                    "Use it as: curl -H 'Authorization: Bearer %.8s...' ...\n", tenant, dir, tok);
    return 0;
}

static bf_status load_tokens_file(bfd *d, const char *path, bf_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f) return bf_error_set(err, BF_EIO, "--tokens-file %s: %s", path, strerror(errno));
    char line[512];
    int n = 0, lineno = 0;
    bf_status st = BF_OK;
    while (st == BF_OK && fgets(line, sizeof line, f)) {
        lineno++;
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r' || line[l - 1] == ' ')) line[--l] = '\0';
        if (!l || line[0] == '#') continue;
        char *colon = strchr(line, ':');
        if (!colon) { st = bf_error_set(err, BF_EFORMAT, "%s:%d: want 'tenant:token'", path, lineno); break; }
        *colon = '\0';
        const char *tok = colon + 1;
        if (!bfd_tenant_valid(line)) { st = bf_error_set(err, BF_EFORMAT, "%s:%d: tenant '%s' must be 1..64 of A-Z a-z 0-9 . _ -", path, lineno, line); break; }
        if (strlen(tok) < 16) { st = bf_error_set(err, BF_EFORMAT, "%s:%d: token shorter than 16 characters", path, lineno); break; }
        char hash[65], *have = NULL;
        bfd_token_hash(tok, hash);
        /* the file is read at every start: a token already stored is fine, one
         * stored for another tenant is a mistake worth stopping for */
        st = bfd_token_lookup(d->store, hash, &have, err);
        if (st == BF_OK && strcmp(have, line))
            st = bf_error_set(err, BF_EINVAL, "%s:%d: this token already belongs to tenant '%s'", path, lineno, have);
        else if (st == BF_ENOTFOUND)
            st = bfd_token_put(d->store, hash, line, err);
        free(have);
        n++;
    }
    fclose(f);
    if (st == BF_OK) bfd_log(d, "info", "%d tokens from %s", n, path);
    return st;
}

static int is_loopback(const char *host)
{
    return !strncmp(host, "127.", 4) || !strcmp(host, "::1") || !strcmp(host, "[::1]") || !strcmp(host, "localhost");
}

/* --- shutdown ---------------------------------------------------------- */

static void on_close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void on_drained(uv_timer_t *t)
{
    bfd *d = t->data;
    /* libmicrohttpd must not stop with a connection suspended: let uploads
     * being checked finish (a few seconds at most) */
    if (d->suspended > 0 && bfd_mono() - d->drain_started < d->cfg.drain_seconds) {
        uv_timer_start(&d->drain_timer, on_drained, 100, 0);
        return;
    }
    bfd_http_stop(d);
    uv_walk(d->loop, on_close_walk, NULL);
}

static void on_signal(uv_signal_t *s, int signum)
{
    bfd *d = s->data;
    if (d->draining) return;
    d->draining = 1;
    d->drain_started = bfd_mono();
    bfd_log(d, "info", "signal %d: draining (no new connections; running chunks stop; campaigns resume at next start)", signum);
    bfd_http_quiesce(d);
    bfd_campaigns_on_wake(&d->wake);   /* checkpoints of chunks that finished just now */
    /* the workers are killed; their chunks are redone at the next start */
    bfd_sched_free(d->sched);
    d->sched = NULL;
    bfd_sse_heartbeat(d, 1);           /* event streams end; clients reconnect elsewhere */
    bfd_http_kick(d);
    uv_timer_start(&d->drain_timer, on_drained, 300, 0);
}

static void on_heartbeat(uv_timer_t *t)
{
    bfd_sse_heartbeat(t->data, 0);
}

static void on_wake(uv_async_t *a)
{
    bfd *d = a->data;
    if (d->sched) bfd_campaigns_on_wake(a);
}

static int parse_flags(int argc, char **argv, bfd_config *c)
{
    bf_error err = {0};
    /* the config file first, so flags win whatever their order */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--config") && bfd_config_load(c, argv[i + 1], &err) != BF_OK) return fail("%s%s", err.msg, "");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage, stdout); return -1; }
        if (!strcmp(a, "--version")) { printf("bitflipd %s (%s)\n", BF_VERSION, BFD_COMMIT); return -1; }
        if (!v) return fail("%s needs a value (see --help)%s", a, "");
        char **dst = NULL;
        if (!strcmp(a, "--config")) { i++; continue; }
        else if (!strcmp(a, "--listen")) { if (bfd_parse_listen(c, v, &err) != BF_OK) return fail("%s%s", err.msg, ""); }
        else if (!strcmp(a, "--data-dir")) dst = &c->data_dir;
        else if (!strcmp(a, "--tokens-file")) dst = &c->tokens_file;
        else if (!strcmp(a, "--port-file")) dst = &c->port_file;
        else if (!strcmp(a, "--workers")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 0 || n > 1024) return fail("--workers wants 0..1024 (0: every core), got '%s'%s", v, "");
            c->workers = (int)n;
        } else if (!strcmp(a, "--job-memory")) {
            int64_t m = 0;
            if (bfd_parse_size(v, &m, &err) != BF_OK || m < BFD_JOB_MEMORY_MIN)
                return fail("--job-memory wants a size of at least 128M (e.g. 512M, 4G), got '%s'%s", v, "");
            c->job_memory = m;
        } else if (!strcmp(a, "--log-format")) {
            if (strcmp(v, "text") && strcmp(v, "json")) return fail("--log-format is 'text' or 'json', got '%s'%s", v, "");
            c->log_json = !strcmp(v, "json");
        } else return fail("unknown option '%s' (see --help)%s", a, "");
        if (dst) {
            free(*dst);
            if (!(*dst = strdup(v))) return fail("out of memory%s%s", "", "");
        }
        i++;
    }
    if (!c->data_dir && !(c->data_dir = strdup("bitflip-data"))) return fail("out of memory%s%s", "", "");
    if (c->workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c->workers = n > 0 ? (int)n : 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 2 && !strcmp(argv[1], "token")) return cmd_token(argc, argv);
    /* the hidden modes of the daemon's own children (work/proc.h) */
    if (argc >= 2 && !strcmp(argv[1], "--worker")) return bfd_worker_main(argc, argv);
    if (argc >= 3 && (!strcmp(argv[1], "--check-model") || !strcmp(argv[1], "--check-dataset"))) return bfd_check_main(argc, argv);

    bfd d = {0};
    uv_loop_t loop;
    bf_error err = {0};
    int rc = 3, loop_ok = 0;
    bfd_config_defaults(&d.cfg);
    int pr = parse_flags(argc, argv, &d.cfg);
    if (pr != 0) { bfd_config_free(&d.cfg); return pr < 0 ? 0 : pr; }

    d.started = bfd_now();
    int64_t ntok = 0;
    if (open_store(d.cfg.data_dir, &d.store, &err) != BF_OK || bfd_store_boot(d.store, &d.boot, &err) != BF_OK) goto fail;
    if (bfd_blobs_open(d.cfg.data_dir, &d.blobs, &err) != BF_OK) goto fail;
    if (d.cfg.tokens_file && load_tokens_file(&d, d.cfg.tokens_file, &err) != BF_OK) goto fail;
    if (bfd_token_count(d.store, &ntok, &err) != BF_OK) goto fail;
    d.auth = ntok > 0;
    if (!d.auth && !is_loopback(d.cfg.host)) {
        bf_error_set(&err, BF_EINVAL, "refusing to serve %s without tokens: anyone could reach every tenant's data. "
                     "Create one (bitflipd token create --tenant NAME --data-dir %s) or listen on 127.0.0.1",
                     d.cfg.host, d.cfg.data_dir);
        rc = 2;
        goto fail;
    }
    d.on_event = bfd_sse_notify;
    if (bfd_metrics_new(&d.metrics, &err) != BF_OK || bfd_live_new(&d.live, &err) != BF_OK) goto fail;
    if (uv_loop_init(&loop) != 0) { bf_error_set(&err, BF_EIO, "cannot start the event loop"); goto fail; }
    loop_ok = 1;
    d.loop = &loop;
    uv_async_init(d.loop, &d.wake, on_wake);
    d.wake.data = &d;
    if (bfd_sched_new(&d, &d.sched, &err) != BF_OK) goto fail;
    if (bfd_campaigns_resume(&d, &err) != BF_OK) goto fail;
    if (bfd_http_start(&d, &err) != BF_OK) goto fail;

    uv_signal_init(d.loop, &d.sig_term);
    uv_signal_init(d.loop, &d.sig_int);
    d.sig_term.data = d.sig_int.data = &d;
    uv_signal_start(&d.sig_term, on_signal, SIGTERM);
    uv_signal_start(&d.sig_int, on_signal, SIGINT);
    uv_timer_init(d.loop, &d.heartbeat);
    d.heartbeat.data = &d;
    uint64_t hb = (uint64_t)(d.cfg.heartbeat_seconds * 1000);
    uv_timer_start(&d.heartbeat, on_heartbeat, hb, hb);
    uv_timer_init(d.loop, &d.drain_timer);
    d.drain_timer.data = &d;

    if (d.cfg.port_file) {
        FILE *f = fopen(d.cfg.port_file, "w");
        if (!f || fprintf(f, "%d\n", d.port) < 0 || fclose(f) != 0) {
            bf_error_set(&err, BF_EIO, "cannot write --port-file %s", d.cfg.port_file);
            goto fail;
        }
    }
    char jm[32];
    bfd_size_text(d.cfg.job_memory, jm, sizeof jm);
    bfd_log(&d, "info", "bitflipd %s listening on http://%s%s%s:%d (%d workers of %s each, data %s, %s)", BF_VERSION,
            strchr(d.cfg.host, ':') && d.cfg.host[0] != '[' ? "[" : "", d.cfg.host,
            strchr(d.cfg.host, ':') && d.cfg.host[0] != '[' ? "]" : "", d.port, d.cfg.workers, jm, d.cfg.data_dir,
            d.auth ? "bearer tokens required" : "no tokens: loopback only, one tenant 'default'");
    uv_run(d.loop, UV_RUN_DEFAULT);
    bfd_log(&d, "info", "stopped");
    rc = 0;
    goto out;
fail:
    bfd_log(&d, "error", "%s", err.msg[0] ? err.msg : "cannot start");
    if (rc == 3 && err.status == BF_EINVAL) rc = 2;
out:
    bfd_sched_free(d.sched);
    d.sched = NULL;
    bfd_http_stop(&d);
    if (loop_ok) {
        uv_walk(d.loop, on_close_walk, NULL);
        uv_run(d.loop, UV_RUN_DEFAULT);
        uv_loop_close(d.loop);
    }
    bfd_live_free(d.live);
    bfd_metrics_free(d.metrics);
    bfd_blobs_close(d.blobs);
    bfd_store_close(d.store);
    bfd_config_free(&d.cfg);
    return rc;
}
