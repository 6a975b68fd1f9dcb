/* Defaults, the JSON config file, time and the log line. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "work/proc.h"

#define F(field) offsetof(bfd_config, field)

/* One row per option, in --help order. */
const bfd_option bfd_options[] = {
    {"listen", "HOST:PORT", BFD_OPT_LISTEN, 0, 0, 0, "address to serve (port 0: any free port); a non-loopback address needs tokens, and TLS or --insecure-http"},
    {"data-dir", "DIR", BFD_OPT_STR, F(data_dir), 0, 0, "models, datasets, campaigns, results: bitflip.db (SQLite) and blobs/"},
    {"workers", "N", BFD_OPT_INT, F(workers), 0, 1024, "worker processes running trials, each single-threaded (0: every core)"},
    {"config", "FILE", BFD_OPT_ACTION, 0, 0, 0, "JSON settings: any option below as a key with '_' for '-' (\"max_upload_bytes\": 1000000); flags win"},
    {"log-format", "text|json", BFD_OPT_LOGFMT, 0, 0, 0, "one line per request, as text or JSON"},
    {"tokens-file", "FILE", BFD_OPT_STR, F(tokens_file), 0, 0, "'tenant:token' lines, added to the daemon's tokens at start"},
    {"port-file", "FILE", BFD_OPT_STR, F(port_file), 0, 0, "write the port actually bound (for --listen HOST:0)"},
    {"tls-cert", "FILE", BFD_OPT_STR, F(tls_cert), 0, 0, "serve HTTPS with this PEM certificate (chain); needs --tls-key"},
    {"tls-key", "FILE", BFD_OPT_STR, F(tls_key), 0, 0, "the certificate's PEM private key"},
    {"insecure-http", NULL, BFD_OPT_SWITCH, F(insecure_http), 0, 0, "allow plain HTTP on a non-loopback address (tokens then cross the network in clear text)"},
    {"max-upload-bytes", "N", BFD_OPT_BYTES, F(max_upload_bytes), 1, 9.2e18, "largest model or dataset upload (413 past it); K, M, G suffixes"},
    {"max-json-bytes", "N", BFD_OPT_BYTES, F(max_json_bytes), 1, 16 << 20, "largest campaign spec (413 past it)"},
    {"job-memory", "N", BFD_OPT_BYTES, F(job_memory), BFD_JOB_MEMORY_MIN, 9.2e18, "each worker's and upload check's memory limit (address space); a campaign sized over it at submission is refused (422); K, M, G suffixes"},
    {"limit", "KEY=VALUE", BFD_OPT_LIMITS, F(limits), 0, 0, "a parser limit, as bitflip's --limit: model.graph-depth=16, data.bytes=1G, spec.depth=8 ... (repeatable, or KEY=VALUE,KEY=VALUE; docs/LIMITS.md lists them). Uploads past one are refused (422), and so are specs; workers load with them too. Config file: \"limit\": {\"model.graph-depth\": 16}"},
    {"max-trials", "N", BFD_OPT_I64, F(max_trials), 1, 9.2e18, "most trials in one campaign (422 past it)"},
    {"max-connections", "N", BFD_OPT_INT, F(max_connections), 1, 1000000, "connections open at once (503 past it; lowered to fit the descriptor limit)"},
    {"max-connections-per-ip", "N", BFD_OPT_INT, F(max_connections_per_ip), 0, 1000000, "connections open at once from one address (closed at once past it; 0: no limit)"},
    {"idle-timeout", "SECONDS", BFD_OPT_INT, F(idle_timeout), 1, 86400, "a connection silent this long is closed (event streams send heartbeats)"},
    {"tenant-running", "N", BFD_OPT_INT, F(tenant_running), 1, 1024, "campaigns one tenant runs at once (more wait, queued)"},
    {"tenant-queued", "N", BFD_OPT_INT, F(tenant_queued), 1, 1000000, "campaigns one tenant may have queued (429 past it)"},
    {"heartbeat-seconds", "SECONDS", BFD_OPT_SECONDS, F(heartbeat_seconds), 0.05, 3600, "comment lines on quiet event streams (keep proxies from closing them)"},
    {"drain-seconds", "SECONDS", BFD_OPT_SECONDS, F(drain_seconds), 0, 3600, "SIGTERM: how long uploads being checked may take to finish"},
    {"executor", "local|slurm", BFD_OPT_STR, F(executor), 0, 0, "where campaigns run: local worker processes (none: local), or each as a Slurm array job, one task per chunk (docs/SCALE.md)"},
    {"slurm-partition", "NAME", BFD_OPT_STR, F(slurm_partition), 0, 0, "--executor slurm: the partition the arrays go to (none: the cluster's default)"},
    {"slurm-account", "NAME", BFD_OPT_STR, F(slurm_account), 0, 0, "--executor slurm: the account they are charged to (none: the user's default)"},
    {"slurm-dir", "DIR", BFD_OPT_STR, F(slurm_dir), 0, 0, "--executor slurm: specs, parts and task logs, on a file system the nodes share, as the data dir must be (none: DATA_DIR/slurm)"},
    {"slurm-bitflip", "PATH", BFD_OPT_STR, F(slurm_bitflip), 0, 0, "--executor slurm: the bitflip CLI the tasks run (none: the one beside bitflipd)"},
    {"slurm-poll-seconds", "SECONDS", BFD_OPT_SECONDS, F(slurm_poll_seconds), 0.05, 3600, "--executor slurm: how often finished parts and squeue are looked at"},
    {"check", NULL, BFD_OPT_ACTION, 0, 0, 0, "verify the data dir (SQLite integrity, every blob against its sha256), print what is wrong, exit 0 if clean, 1 if not"},
    {"help", NULL, BFD_OPT_ACTION, 0, 0, 0, "this text"},
    {"version", NULL, BFD_OPT_ACTION, 0, 0, 0, "version and commit"},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};

void bfd_config_defaults(bfd_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 8080;
    c->max_upload_bytes = (int64_t)1 << 30;   /* 1 GiB: models with large embedding tables */
    c->max_json_bytes = (int64_t)16 << 20;    /* the spec parser's own limit */
    c->max_trials = 10000000;
    /* an idle connection costs a descriptor and ~1 KiB: thousands are cheap
     * once the descriptor limit is raised (main.c), and SSE streams hold one each */
    c->max_connections = 4096;
    /* one address (a CI runner, a NAT) may hold a sixteenth: a flood from one
     * machine leaves room for everyone else */
    c->max_connections_per_ip = 256;
    c->idle_timeout = 60;                     /* > heartbeat_seconds: streams never look idle */
    c->tenant_running = 2;
    c->tenant_queued = 100;
    c->heartbeat_seconds = 15;
    c->drain_seconds = 4;
    c->job_memory = BFD_JOB_MEMORY_DEFAULT;   /* a large model's plan and golden cache fit */
    c->slurm_poll_seconds = 2;                /* a task runs minutes; squeue every 2 s is no load on slurmctld */
}

void bfd_config_free(bfd_config *c)
{
    free(c->data_dir);
    free(c->tokens_file);
    free(c->port_file);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->limits_arg);
    c->limits_arg = NULL;
    free(c->executor);
    free(c->slurm_partition);
    free(c->slurm_account);
    free(c->slurm_dir);
    free(c->slurm_bitflip);
    c->executor = c->slurm_partition = c->slurm_account = c->slurm_dir = c->slurm_bitflip = NULL;
    c->data_dir = c->tokens_file = c->port_file = c->tls_cert = c->tls_key = NULL;
}

/* HOST:PORT, [v6]:PORT, or :PORT */
bf_status bfd_parse_listen(bfd_config *c, const char *s, bf_error *err)
{
    const char *colon = strrchr(s, ':');
    if (!colon) return bf_error_set(err, BF_EINVAL, "--listen wants HOST:PORT (e.g. 127.0.0.1:8080), got '%s'", s);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || port < 0 || port > 65535)
        return bf_error_set(err, BF_EINVAL, "--listen: port must be 0..65535 (0: any free port), got '%s'", colon + 1);
    size_t hl = (size_t)(colon - s);
    if (hl >= sizeof c->host) return bf_error_set(err, BF_EINVAL, "--listen: host too long");
    if (hl == 0) snprintf(c->host, sizeof c->host, "127.0.0.1");
    else snprintf(c->host, sizeof c->host, "%.*s", (int)hl, s);
    c->port = (int)port;
    return BF_OK;
}

/* A byte size: the parser the CLI and the children share (bitflip/api/limits.h). */
static int parse_bytes(const char *v, int64_t *out)
{
    return bf_parse_size(v, out);
}

/* Each "k=v" of a comma-separated list into c->limits, and the list onto
 * c->limits_arg for the children; on an error nothing is kept of `v`. */
static bf_status add_limits(bfd_config *c, const char *v, bf_error *err)
{
    bf_limits l = c->limits;
    bf_status st = bfd_limits_parse_list(&l, v, err);
    if (st != BF_OK) return st;
    size_t old = c->limits_arg ? strlen(c->limits_arg) : 0;
    char *s = realloc(c->limits_arg, old + strlen(v) + 2);
    if (!s) return bf_error_set(err, BF_ENOMEM, "out of memory");
    snprintf(s + old, strlen(v) + 2, "%s%s", old ? "," : "", v);
    c->limits_arg = s;
    c->limits = l;
    return BF_OK;
}

bf_status bfd_option_set(bfd_config *c, const bfd_option *o, const char *v, bf_error *err)
{
    char *p = (char *)c + o->off;
    char *end;
    if (o->type == BFD_OPT_SWITCH) {
        *(int *)p = 1;
        return BF_OK;
    }
    if (!v) return bf_error_set(err, BF_EINVAL, "--%s needs a value (%s)", o->name, o->arg);
    switch (o->type) {
    case BFD_OPT_STR: {
        char *s = strdup(v);
        if (!s) return bf_error_set(err, BF_ENOMEM, "out of memory");
        free(*(char **)p);
        *(char **)p = s;
        return BF_OK;
    }
    case BFD_OPT_INT:
    case BFD_OPT_I64:
    case BFD_OPT_BYTES: {
        int64_t n = 0;
        int bad;
        if (o->type == BFD_OPT_BYTES) bad = parse_bytes(v, &n);
        else {
            errno = 0;
            n = strtoll(v, &end, 10);
            bad = end == v || *end || errno;
        }
        if (bad || (double)n < o->lo || (double)n > o->hi)
        {
            char range[64];
            if (o->hi >= 9e18) snprintf(range, sizeof range, "%.0f or more", o->lo);
            else snprintf(range, sizeof range, "%.0f..%.0f", o->lo, o->hi);
            return bf_error_set(err, BF_EINVAL, "--%s wants an integer %s%s, got '%s'", o->name, range,
                                o->type == BFD_OPT_BYTES ? " (K, M, G suffixes allowed)" : "", v);
        }
        if (o->type == BFD_OPT_INT) *(int *)p = (int)n;
        else *(int64_t *)p = n;
        return BF_OK;
    }
    case BFD_OPT_SECONDS: {
        double x = strtod(v, &end);
        if (end == v || *end || !isfinite(x) || x < o->lo || x > o->hi)
            return bf_error_set(err, BF_EINVAL, "--%s wants seconds %g..%g, got '%s'", o->name, o->lo, o->hi, v);
        *(double *)p = x;
        return BF_OK;
    }
    case BFD_OPT_LISTEN:
        return bfd_parse_listen(c, v, err);
    case BFD_OPT_LIMITS:
        return add_limits(c, v, err);
    case BFD_OPT_LOGFMT:
        if (strcmp(v, "text") && strcmp(v, "json"))
            return bf_error_set(err, BF_EINVAL, "--log-format is 'text' or 'json', got '%s'", v);
        c->log_json = !strcmp(v, "json");
        return BF_OK;
    default:
        return bf_error_set(err, BF_EINVAL, "--%s is not a setting", o->name);
    }
}

static void show_bytes(int64_t n, char *buf, size_t len)
{
    static const char suffix[] = "KMGT";
    int i = -1;
    while (i < 3 && n >= 1024 && n % 1024 == 0) { n /= 1024; i++; }
    if (i < 0) snprintf(buf, len, "%lld", (long long)n);
    else snprintf(buf, len, "%lld%c", (long long)n, suffix[i]);
}

void bfd_option_show(const bfd_config *c, const bfd_option *o, char *buf, size_t n)
{
    const char *p = (const char *)c + o->off;
    buf[0] = '\0';
    switch (o->type) {
    case BFD_OPT_STR: snprintf(buf, n, "%s", *(char *const *)p ? *(char *const *)p : "none"); break;
    case BFD_OPT_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case BFD_OPT_I64: snprintf(buf, n, "%lld", (long long)*(const int64_t *)p); break;
    case BFD_OPT_BYTES: show_bytes(*(const int64_t *)p, buf, n); break;
    case BFD_OPT_SECONDS: snprintf(buf, n, "%g", *(const double *)p); break;
    case BFD_OPT_SWITCH: snprintf(buf, n, "%s", *(const int *)p ? "on" : "off"); break;
    case BFD_OPT_LISTEN: snprintf(buf, n, "%s:%d", c->host, c->port); break;
    case BFD_OPT_LOGFMT: snprintf(buf, n, "%s", c->log_json ? "json" : "text"); break;
    case BFD_OPT_LIMITS: snprintf(buf, n, "%s", c->limits_arg ? c->limits_arg : ""); break;   /* "": the defaults */
    default: break;
    }
}

/* "limit": {"model.graph-depth": 16, "data.bytes": "1G"}, or the flag's
 * own form, ["model.graph-depth=16", ...]. */
static bf_status config_limits(bfd_config *c, const char *key, json_t *v, bf_error *err)
{
    char kv[256];
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            if (json_is_integer(x)) snprintf(kv, sizeof kv, "%s=%lld", k, (long long)json_integer_value(x));
            else if (json_is_string(x)) snprintf(kv, sizeof kv, "%s=%s", k, json_string_value(x));
            else return bf_error_set(err, BF_EINVAL, "'%s': the value of '%s' must be an integer or a size string", key, k);
            bf_status st = add_limits(c, kv, err);
            if (st != BF_OK) return st;
        }
        return BF_OK;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            if (!json_is_string(x)) return bf_error_set(err, BF_EINVAL, "'%s': each entry must be a \"KEY=VALUE\" string", key);
            bf_status st = add_limits(c, json_string_value(x), err);
            if (st != BF_OK) return st;
        }
        return BF_OK;
    }
    return bf_error_set(err, BF_EINVAL, "'%s' must be an object ({\"model.graph-depth\": 16}) or an array of \"KEY=VALUE\" strings", key);
}

bf_status bfd_config_load(bfd_config *c, const char *path, bf_error *err)
{
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    bf_status st = BF_OK;
    if (!doc) return bf_error_set(err, BF_EFORMAT, "%s: %s (line %d)", path, je.text, je.line);
    if (!json_is_object(doc)) { json_decref(doc); return bf_error_set(err, BF_EFORMAT, "%s: not a JSON object", path); }
    const char *key;
    json_t *v;
    json_object_foreach(doc, key, v) {
        /* the key is the option's name with '_' for '-' */
        char name[64], text[64];
        snprintf(name, sizeof name, "%s", key);
        for (char *q = name; *q; q++)
            if (*q == '_') *q = '-';
        const bfd_option *o = bfd_options;
        while (o->name && (strcmp(o->name, name) || o->type == BFD_OPT_ACTION)) o++;
        if (!o->name) {
            st = bf_error_set(err, BF_EINVAL, "unknown key '%s' (the keys are the long options of bitflipd --help, "
                              "with '_' for '-': max_upload_bytes, idle_timeout, ...)", key);
            break;
        }
        const char *s = NULL;
        if (o->type == BFD_OPT_LIMITS) {
            if ((st = config_limits(c, key, v, err)) != BF_OK) break;
            continue;
        }
        if (o->type == BFD_OPT_SWITCH) {
            if (!json_is_boolean(v)) { st = bf_error_set(err, BF_EINVAL, "'%s' must be true or false", key); break; }
            *(int *)((char *)c + o->off) = json_is_true(v);
            continue;
        }
        if (json_is_string(v) && o->type != BFD_OPT_INT && o->type != BFD_OPT_I64 && o->type != BFD_OPT_SECONDS)
            s = json_string_value(v);   /* byte sizes may be "1G" */
        else if (json_is_integer(v) && o->type != BFD_OPT_STR && o->type != BFD_OPT_LISTEN && o->type != BFD_OPT_LOGFMT)
            snprintf(text, sizeof text, "%lld", (long long)json_integer_value(v)), s = text;
        else if (json_is_real(v) && o->type == BFD_OPT_SECONDS)
            snprintf(text, sizeof text, "%.17g", json_real_value(v)), s = text;
        if (!s) {
            st = bf_error_set(err, BF_EINVAL, "'%s' must be %s", key,
                              o->type == BFD_OPT_STR || o->type == BFD_OPT_LISTEN || o->type == BFD_OPT_LOGFMT ? "a string"
                              : o->type == BFD_OPT_SECONDS ? "a number" : "an integer");
            break;
        }
        if ((st = bfd_option_set(c, o, s, err)) != BF_OK) break;
    }
    json_decref(doc);
    return st != BF_OK ? bf_error_prefix(err, "%s", path) : BF_OK;
}

double bfd_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bfd_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bfd_log(const bfd *d, const char *level, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    double now = bfd_now();
    if (d && d->cfg.log_json) {
        json_t *j = json_pack("{s:f, s:s, s:s}", "ts", now, "level", level, "msg", msg);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s) fprintf(stderr, "%s\n", s);
        free(s);
        json_decref(j);
        return;
    }
    time_t t = (time_t)now;
    struct tm tm;
    gmtime_r(&t, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02dZ %-5s %s\n", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
            tm.tm_min, tm.tm_sec, level, msg);
}
