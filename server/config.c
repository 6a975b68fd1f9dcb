/* Defaults, the JSON config file, time and the log line. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "work/proc.h"

void bfd_config_defaults(bfd_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 8080;
    c->max_upload_bytes = (int64_t)1 << 30;   /* 1 GiB: models with large embedding tables */
    c->max_json_bytes = (int64_t)16 << 20;    /* the spec parser's own limit */
    c->max_trials = 10000000;
    c->max_connections = 1024;                /* SSE streams hold one each */
    c->tenant_running = 2;
    c->tenant_queued = 100;
    c->heartbeat_seconds = 15;
    c->drain_seconds = 4;
    c->job_memory = BFD_JOB_MEMORY_DEFAULT;   /* a large model's plan and golden cache fit */
}

void bfd_config_free(bfd_config *c)
{
    free(c->data_dir);
    free(c->tokens_file);
    free(c->port_file);
    c->data_dir = c->tokens_file = c->port_file = NULL;
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

static bf_status set_str(char **dst, const json_t *v, const char *key, bf_error *err)
{
    if (!json_is_string(v)) return bf_error_set(err, BF_EINVAL, "'%s' must be a string", key);
    char *s = strdup(json_string_value(v));
    if (!s) return bf_error_set(err, BF_ENOMEM, "out of memory");
    free(*dst);
    *dst = s;
    return BF_OK;
}

static bf_status set_int(int64_t *dst, const json_t *v, const char *key, int64_t lo, int64_t hi, bf_error *err)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return bf_error_set(err, BF_EINVAL, "'%s' must be an integer %lld..%lld", key, (long long)lo, (long long)hi);
    *dst = json_integer_value(v);
    return BF_OK;
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
        int64_t x = 0;
        if (!strcmp(key, "listen")) {
            if (!json_is_string(v)) st = bf_error_set(err, BF_EINVAL, "'listen' must be a string");
            else st = bfd_parse_listen(c, json_string_value(v), err);
        } else if (!strcmp(key, "data_dir")) st = set_str(&c->data_dir, v, key, err);
        else if (!strcmp(key, "tokens_file")) st = set_str(&c->tokens_file, v, key, err);
        else if (!strcmp(key, "workers")) { if ((st = set_int(&x, v, key, 0, 1024, err)) == BF_OK) c->workers = (int)x; }
        else if (!strcmp(key, "log_format")) {
            const char *f = json_string_value(v);
            if (!f || (strcmp(f, "text") && strcmp(f, "json"))) st = bf_error_set(err, BF_EINVAL, "'log_format' must be \"text\" or \"json\"");
            else c->log_json = !strcmp(f, "json");
        } else if (!strcmp(key, "max_upload_bytes")) st = set_int(&c->max_upload_bytes, v, key, 1, INT64_MAX, err);
        else if (!strcmp(key, "max_json_bytes")) st = set_int(&c->max_json_bytes, v, key, 1, (int64_t)16 << 20, err);
        else if (!strcmp(key, "job_memory")) {
            if (json_is_string(v)) st = bfd_parse_size(json_string_value(v), &x, err);
            else st = set_int(&x, v, key, BFD_JOB_MEMORY_MIN, INT64_MAX, err);
            if (st == BF_OK && x < BFD_JOB_MEMORY_MIN)
                st = bf_error_set(err, BF_EINVAL, "'job_memory' must be at least 128M");
            if (st == BF_OK) c->job_memory = x;
        }
        else if (!strcmp(key, "max_trials")) st = set_int(&c->max_trials, v, key, 1, INT64_MAX, err);
        else if (!strcmp(key, "max_connections")) { if ((st = set_int(&x, v, key, 1, 65536, err)) == BF_OK) c->max_connections = (int)x; }
        else if (!strcmp(key, "tenant_running")) { if ((st = set_int(&x, v, key, 1, 1024, err)) == BF_OK) c->tenant_running = (int)x; }
        else if (!strcmp(key, "tenant_queued")) { if ((st = set_int(&x, v, key, 1, 1000000, err)) == BF_OK) c->tenant_queued = (int)x; }
        else if (!strcmp(key, "heartbeat_seconds")) {
            if (!json_is_number(v) || json_number_value(v) <= 0) st = bf_error_set(err, BF_EINVAL, "'heartbeat_seconds' must be a positive number");
            else c->heartbeat_seconds = json_number_value(v);
        } else {
            st = bf_error_set(err, BF_EINVAL, "unknown key '%s' (known: listen, data_dir, workers, job_memory, log_format, tokens_file, "
                              "max_upload_bytes, max_json_bytes, max_trials, max_connections, tenant_running, "
                              "tenant_queued, heartbeat_seconds)", key);
        }
        if (st != BF_OK) break;
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
