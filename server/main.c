/* bitflipd: the REST daemon. `bitflipd --help` says what it takes. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/auth.h"
#include "store/check.h"
#include "work/campaigns.h"
#include "daemon.h"
#include "work/live.h"
#include "work/proc.h"
#include "work/scheduler.h"
#include "work/worker.h"
#include "http/sse.h"

static const char usage_head[] =
    "usage: bitflipd [OPTION]...\n"
    "       bitflipd --check [--data-dir DIR]\n"
    "       bitflipd token create --tenant NAME [--data-dir DIR]\n"
    "\n"
    "bitflip's fault-injection service: upload an ONNX model and an eval set, submit\n"
    "campaigns, follow them live (Server-Sent Events), fetch results. The REST API is\n"
    "described at GET /v1/openapi.yaml; docs/SERVICE.md walks through it with curl,\n"
    "docs/LIMITS.md lists every limit. Options take '--opt VALUE' or '--opt=VALUE'.\n"
    "\n";
static const char usage_tail[] =
    "\n"
    "  token create         make a bearer token for a tenant; it is printed once and only\n"
    "                       its hash is stored. With any token, every /v1 call needs one,\n"
    "                       and each tenant sees only its own models, datasets, campaigns.\n"
    "\n"
    "SIGTERM or SIGINT: stop accepting, stop running chunks, exit; queued and running\n"
    "campaigns continue at the next start from their last finished chunk.\n";

/* --help from the option table, each with its default, wrapped to 80 columns. */
static void print_usage(void)
{
    bfd_config def;
    bfd_config_defaults(&def);
    fputs(usage_head, stdout);
    for (const bfd_option *o = bfd_options; o->name; o++) {
        char left[64], val[64], text[512];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        bfd_option_show(&def, o, val, sizeof val);
        if (!strcmp(o->name, "data-dir")) snprintf(val, sizeof val, "./bitflip-data");
        if (o->type == BFD_OPT_ACTION || !val[0]) snprintf(text, sizeof text, "%s", o->help);
        else snprintf(text, sizeof text, "%s (default %s)", o->help, val);
        printf("  %-26s", left);
        int col = 28;
        if (strlen(left) > 25) { printf("\n%28s", ""); }
        for (char *w = strtok(text, " "); w; w = strtok(NULL, " ")) {
            int n = (int)strlen(w);
            if (col > 28 && col + 1 + n > 79) { printf("\n%28s", ""); col = 28; }
            printf("%s%s", col > 28 ? " " : "", w);
            col += n + (col > 28);
        }
        putchar('\n');
    }
    fputs(usage_tail, stdout);
    bfd_config_free(&def);
}

static int fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bitflipd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
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
    static const struct option opts[] = {
        {"tenant", required_argument, NULL, 't'},
        {"data-dir", required_argument, NULL, 'd'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 3 || strcmp(argv[2], "create"))
        return fail("usage: bitflipd token create --tenant NAME [--data-dir DIR]");
    /* argv[2] ("create") stands in for the program name */
    int c, sub_argc = argc - 2;
    char **sub_argv = argv + 2;
    opterr = 0;
    optind = 0;
    while ((c = getopt_long(sub_argc, sub_argv, "", opts, NULL)) != -1) {
        if (c == 't') tenant = optarg;
        else if (c == 'd') dir = optarg;
        else return fail("token create: unknown or incomplete option '%s'", sub_argv[optind - 1]);
    }
    if (optind < sub_argc) return fail("token create: unexpected argument '%s'", sub_argv[optind]);
    if (!tenant) return fail("token create: which tenant? add --tenant NAME");
    if (!bfd_tenant_valid(tenant)) return fail("token create: tenant '%s' must be 1..64 of A-Z a-z 0-9 . _ -", tenant);
    bf_error err = {0};
    bfd_store *s = NULL;
    char tok[BFD_TOKEN_LEN + 1], hash[65];
    if (open_store(dir, &s, &err) != BF_OK || bfd_token_new(tok, &err) != BF_OK ||
        bfd_token_hash(tok, hash, &err) != BF_OK) {
        bfd_store_close(s);
        return fail("token create: %s", err.msg);
    }
    bf_status st = bfd_token_put(s, hash, tenant, &err);
    bfd_store_close(s);
    if (st != BF_OK) return fail("token create: %s", err.msg);
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
        if ((st = bfd_token_hash(tok, hash, err)) != BF_OK) break;
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

/* Raises the soft descriptor limit to the hard one (as nginx's
 * worker_rlimit_nofile does): the default soft 1024 would cap connections
 * far below what the loop can serve. Then fits max_connections under it,
 * with room for the reserve that still gets a 503 and for everything else
 * the daemon opens (BFD_FD_HEADROOM). */
static void fit_fd_limit(bfd *d)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        bfd_log(d, "warn", "cannot read the descriptor limit: %s", strerror(errno));
        return;
    }
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            bfd_log(d, "warn", "cannot raise the descriptor limit from %llu to %llu: %s", (unsigned long long)was,
                    (unsigned long long)want, strerror(errno));
            rl.rlim_cur = was;
        }
    }
    long long have = rl.rlim_cur == RLIM_INFINITY ? (long long)1 << 30 : (long long)rl.rlim_cur;
    long long other = BFD_CONN_RESERVE + BFD_FD_HEADROOM + 4LL * d->cfg.workers;
    long long fit = have - other;
    bfd_log(d, "info", "descriptor limit %lld (was %llu, hard %llu): room for %lld connections", have,
            (unsigned long long)was, (unsigned long long)rl.rlim_max, fit > 0 ? fit : 0);
    if (d->cfg.max_connections > fit) {
        int lowered = fit > 1 ? (int)fit : 1;
        bfd_log(d, "warn", "--max-connections %d does not fit under the descriptor limit %lld (%lld kept for files, "
                "workers and the 503 reserve): serving %d; raise the hard limit (ulimit -Hn, LimitNOFILE=, "
                "docker --ulimit nofile=) for more", d->cfg.max_connections, have, other, lowered);
        d->cfg.max_connections = lowered;
    }
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

#define OPT_BASE 256   /* getopt_long's val for bfd_options[i] is OPT_BASE + i */

/* getopt_long's table from bfd_options (at most `cap` rows with the end). */
static void long_options(struct option *lo, size_t cap)
{
    size_t n = 0;
    for (const bfd_option *o = bfd_options; o->name && n + 1 < cap; o++, n++)
        lo[n] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL, OPT_BASE + (int)n};
    lo[n] = (struct option){NULL, 0, NULL, 0};
}

/* Returns 0 to run, -1 when done (--help, --version), 2 on a usage error. */
static int parse_flags(int argc, char **argv, bfd_config *c, int *check)
{
    bf_error err = {0};
    struct option lo[64];
    long_options(lo, sizeof lo / sizeof lo[0]);
    int ch, idx;
    /* two passes: the config file first, so flags win whatever their order */
    opterr = 0;
    optind = 0;
    while ((ch = getopt_long(argc, argv, "h", lo, &idx)) != -1) {
        if (ch >= OPT_BASE && !strcmp(bfd_options[ch - OPT_BASE].name, "config") &&
            bfd_config_load(c, optarg, &err) != BF_OK)
            return fail("%s", err.msg);
    }
    optind = 0;
    while ((ch = getopt_long(argc, argv, "h", lo, &idx)) != -1) {
        if (ch == 'h') { print_usage(); return -1; }
        if (ch < OPT_BASE) {   /* '?': unknown, or a value missing */
            const char *a = argv[optind - 1];
            for (const bfd_option *o = bfd_options; o->name; o++)
                if (o->arg && !strncmp(a, "--", 2) && !strcmp(a + 2, o->name))
                    return fail("%s needs a value (see --help)", a);
            return fail("unknown option '%s' (see --help)", a);
        }
        const bfd_option *o = &bfd_options[ch - OPT_BASE];
        if (o->type != BFD_OPT_ACTION) {
            if (bfd_option_set(c, o, optarg, &err) != BF_OK) return fail("%s", err.msg);
        } else if (!strcmp(o->name, "help")) {
            print_usage();
            return -1;
        } else if (!strcmp(o->name, "version")) {
            printf("bitflipd %s (%s)\n", BF_VERSION, BFD_COMMIT);
            return -1;
        } else if (!strcmp(o->name, "check")) {
            *check = 1;
        }   /* --config: done above */
    }
    if (optind < argc) return fail("unexpected argument '%s' (see --help)", argv[optind]);
    if (!c->data_dir && !(c->data_dir = strdup("bitflip-data"))) return fail("out of memory");
    if (!c->tls_cert != !c->tls_key)
        return fail("%s needs %s too (a certificate and its private key)", c->tls_cert ? "--tls-cert" : "--tls-key",
                    c->tls_cert ? "--tls-key" : "--tls-cert");
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
    int child = bfd_child_main(argc, argv);
    if (child >= 0) return child;

    bfd d = {0};
    uv_loop_t loop;
    bf_error err = {0};
    int rc = 3, loop_ok = 0, check = 0;
    bfd_config_defaults(&d.cfg);
    int pr = parse_flags(argc, argv, &d.cfg, &check);
    if (pr != 0) { bfd_config_free(&d.cfg); return pr < 0 ? 0 : pr; }
    if (check) {   /* before anything opens (and so creates) the data dir */
        int problems = 0;
        if (bfd_check_data_dir(d.cfg.data_dir, stdout, &problems, &err) != BF_OK) {
            fprintf(stderr, "bitflipd --check: %s\n", err.msg);
            problems = 1;
        }
        bfd_config_free(&d.cfg);
        return problems ? 1 : 0;
    }

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
    if (!is_loopback(d.cfg.host) && !d.cfg.tls_cert && !d.cfg.insecure_http) {
        bf_error_set(&err, BF_EINVAL, "refusing to serve %s over plain HTTP: bearer tokens would cross the network in "
                     "clear text. Give --tls-cert FILE --tls-key FILE, or --insecure-http when TLS is terminated in "
                     "front of the daemon or the network is trusted", d.cfg.host);
        rc = 2;
        goto fail;
    }
    if (!is_loopback(d.cfg.host) && !d.cfg.tls_cert)
        bfd_log(&d, "warn", "--insecure-http: serving %s over plain HTTP; bearer tokens, models and results cross the "
                "network in clear text, readable and reusable by anyone on the path", d.cfg.host);
    d.on_event = bfd_sse_notify;
    if (bfd_metrics_new(&d.metrics, &err) != BF_OK || bfd_live_new(&d.live, &err) != BF_OK) goto fail;
    if (uv_loop_init(&loop) != 0) { bf_error_set(&err, BF_EIO, "cannot start the event loop"); goto fail; }
    loop_ok = 1;
    d.loop = &loop;
    uv_async_init(d.loop, &d.wake, on_wake);
    d.wake.data = &d;
    if (bfd_sched_new(&d, &d.sched, &err) != BF_OK) goto fail;
    if (bfd_campaigns_resume(&d, &err) != BF_OK) goto fail;
    fit_fd_limit(&d);
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

    if (d.cfg.port_file) {   /* atomically: a script polling the file never reads half a number */
        char text[16];
        int n = snprintf(text, sizeof text, "%d\n", d.port);
        if (bf_write_atomic(d.cfg.port_file, text, (size_t)n, 0600, &err) != BF_OK) {
            bf_error_prefix(&err, "--port-file");
            goto fail;
        }
    }
    char jm[32];
    bfd_size_text(d.cfg.job_memory, jm, sizeof jm);
    if (d.cfg.idle_timeout <= d.cfg.heartbeat_seconds)
        bfd_log(&d, "warn", "--idle-timeout %d is not longer than --heartbeat-seconds %g: a proxy that times out "
                "like the daemon would cut event streams between heartbeats", d.cfg.idle_timeout, d.cfg.heartbeat_seconds);
    bfd_log(&d, "info", "connections: at most %d (%d per address%s), idle ones closed after %d s",
            d.cfg.max_connections, d.cfg.max_connections_per_ip, d.cfg.max_connections_per_ip ? "" : ": no limit",
            d.cfg.idle_timeout);
    bfd_log(&d, "info", "bitflipd %s listening on %s://%s%s%s:%d (%d workers of %s each, data %s, %s)", BF_VERSION,
            d.cfg.tls_cert ? "https" : "http",
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
