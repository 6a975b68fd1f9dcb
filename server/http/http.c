/* libmicrohttpd inside the libuv loop (external epoll), and requests: route,
 * auth, body limits, streaming uploads, replies, the per-request log line. */
#define _GNU_SOURCE   /* strcasestr */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http/auth.h"
#include "http/sse.h"

/* Past the limit a chunked body (no Content-Length) is read and dropped up
 * to this much more before the connection is closed, so that small overruns
 * still get their 413. */
#define DISCARD_MAX ((uint64_t)1 << 20)

static void schedule(bfd *d);

const char *bfd_req_header(bfd_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *bfd_req_arg(bfd_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

void bfd_reply_header(bfd_req *r, const char *name, const char *value)
{
    if (r->n_hdr >= BFD_MAX_HEADERS) return;
    char *v = strdup(value);
    if (!v) return;
    r->hdr_name[r->n_hdr] = name;
    r->hdr_value[r->n_hdr++] = v;
}

static void set_reply(bfd_req *r, int status, struct MHD_Response *resp, const char *content_type)
{
    if (!resp) {   /* out of memory: MHD answers 500 itself when nothing is queued */
        r->reply_status = 500;
        return;
    }
    if (content_type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    for (int i = 0; i < r->n_hdr; i++) {
        MHD_add_response_header(resp, r->hdr_name[i], r->hdr_value[i]);
        free(r->hdr_value[i]);
    }
    r->n_hdr = 0;
    if (r->reply) MHD_destroy_response(r->reply);
    r->reply = resp;
    r->reply_status = status;
}

void bfd_reply_data(bfd_req *r, int status, const char *content_type, char *data, size_t len)
{
    set_reply(r, status, MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE), content_type);
}

void bfd_reply_static(bfd_req *r, int status, const char *content_type, const char *data, size_t len)
{
    set_reply(r, status, MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT), content_type);
}

void bfd_reply_json(bfd_req *r, int status, json_t *body)
{
    char *s = body ? json_dumps(body, JSON_INDENT(2)) : NULL;
    json_decref(body);
    if (!s) { set_reply(r, 500, NULL, NULL); return; }
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);   /* a final newline, for curl in a terminal */
    if (t) { s = t; s[n++] = '\n'; s[n] = '\0'; }
    bfd_reply_data(r, status, "application/json", s, n);
}

static const char *status_title(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 507: return "Insufficient Storage";
    default: return "Error";
    }
}

static void problem(bfd_req *r, int status, const char *type, json_t *errors, const char *fmt, va_list ap)
{
    char detail[2048];   /* an upload's 422: its id, its name (200) and the engine's 768 */
    vsnprintf(detail, sizeof detail, fmt, ap);
    json_t *p = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", status_title(status), "status",
                          status, "detail", detail, "instance", r->path ? r->path : "");
    if (!p) {
        /* a client's bytes in the detail (an upload's ?name=) that are not
         * UTF-8, which JSON strings must be: said as '?', not dropped with
         * the whole reply (fuzz_http found the request it left unanswered) */
        for (char *c = detail; *c; c++)
            if ((unsigned char)*c >= 0x80) *c = '?';
        p = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", status_title(status), "status", status,
                      "detail", detail, "instance", r->path ? r->path : "");
    }
    if (p && errors) json_object_set_new(p, "errors", errors);
    else json_decref(errors);
    char *s = p ? json_dumps(p, JSON_INDENT(2)) : NULL;
    json_decref(p);
    if (!s) { set_reply(r, 500, NULL, NULL); return; }
    bfd_reply_data(r, status, "application/problem+json", s, strlen(s));
}

void bfd_reply_problem(bfd_req *r, int status, json_t *errors, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    problem(r, status, "about:blank", errors, fmt, ap);
    va_end(ap);
}

void bfd_reply_problem_typed(bfd_req *r, int status, const char *type, json_t *errors, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    problem(r, status, type, errors, fmt, ap);
    va_end(ap);
}

void bfd_reply_internal(bfd_req *r, const char *what, const bf_error *err)
{
    bfd_log(r->d, "error", "%s %s: %s: %s", r->method, r->path, what, err && err->msg[0] ? err->msg : "?");
    if (bfd_error_disk_full(err)) {   /* not a bug: the operator's disk, and the client may retry later */
        bfd_reply_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "60");
        bfd_reply_problem(r, 507, NULL, "%s: the daemon's disk is full; nothing already stored was lost, and this "
                          "request changed nothing. Retry once space is freed", what);
        return;
    }
    bfd_reply_problem(r, 500, NULL, "%s: %s", what, err && err->msg[0] ? err->msg : "unexpected failure");
}

void bfd_req_suspend(bfd_req *r)
{
    if (r->suspended) return;
    MHD_suspend_connection(r->conn);
    r->suspended = 1;
    r->d->suspended++;
}

void bfd_req_resume(bfd_req *r)
{
    if (!r->suspended) return;
    r->suspended = 0;
    r->d->suspended--;
    MHD_resume_connection(r->conn);
    bfd_http_kick(r->d);
}

/* --- the request's life ------------------------------------------------- */

static int content_type_is(const char *ct, const char *want)
{
    if (!ct) return 0;
    size_t n = strlen(want);
    return !strncasecmp(ct, want, n) && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* Resolves the bearer token to a tenant; without tokens, everyone is
 * "default" (the daemon then listens on loopback only). Returns 0 or replies. */
static int authenticate(bfd *d, bfd_req *r)
{
    if (!d->auth) {
        r->tenant = strdup("default");
        if (!r->tenant) { bfd_reply_problem(r, 500, NULL, "out of memory"); return -1; }
        return 0;
    }
    const char *h = bfd_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) {
        bfd_reply_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"bitflip\"");
        bfd_reply_problem(r, 401, NULL, "this daemon needs a token: send 'Authorization: Bearer bft_...' "
                                        "(an operator makes one with 'bitflipd token create --tenant NAME')");
        return -1;
    }
    const char *tok = h + 7;
    while (*tok == ' ') tok++;
    char hash[65];
    bf_error err = {0};
    bf_status st = bfd_token_hash(tok, hash, &err);
    if (st == BF_OK) st = bfd_token_lookup(d->store, hash, &r->tenant, &err);
    if (st == BF_ENOTFOUND) {
        bfd_reply_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"bitflip\", error=\"invalid_token\"");
        bfd_reply_problem(r, 401, NULL, "the bearer token is not one this daemon issued (or it was revoked)");
        return -1;
    }
    if (st != BF_OK) { bfd_reply_internal(r, "looking up the token", &err); return -1; }
    return 0;
}

/* Everything known once the headers are in: route, auth, limits. Replies (a
 * 4xx, sent before the body is read) or returns 0. */
static int begin(bfd *d, bfd_req *r)
{
    int other = 0;
    if (d->connections > d->cfg.max_connections) {
        /* libmicrohttpd's own cap sits BFD_CONN_RESERVE higher, so that past
         * ours a client still gets a reason rather than a closed socket */
        bfd_reply_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "5");
        bfd_reply_problem(r, 503, NULL, "too many connections (%d; this daemon serves %d at once); retry shortly",
                          d->connections, d->cfg.max_connections);
        return -1;
    }
    char why[256];
    if (bfd_target_check(r->target, why, sizeof why) != 0) {
        bfd_reply_problem(r, 400, NULL, "%s (in '%s')", why, r->target);
        return -1;
    }
    r->route = bfd_route_match(r->method, r->path, r, &other);
    if (!r->route) {
        if (other) {
            char allow[64];
            bfd_route_allow(r->path, allow, sizeof allow);
            bfd_reply_header(r, MHD_HTTP_HEADER_ALLOW, allow);
            bfd_reply_problem(r, 405, NULL, "%s is not allowed on %s (see Allow)", r->method, r->path);
        } else {
            bfd_reply_problem(r, 404, NULL, "no such resource: %s (the API is described at /v1/openapi.yaml)", r->path);
        }
        return -1;
    }
    if (r->route->auth && authenticate(d, r) != 0) return -1;
    if (d->draining && r->route->body != BFD_BODY_NONE) {
        bfd_reply_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "5");
        bfd_reply_problem(r, 503, NULL, "the daemon is shutting down; retry against the next instance");
        return -1;
    }
    if (r->route->body == BFD_BODY_NONE) return 0;

    const char *ct = bfd_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    int json = r->route->body == BFD_BODY_JSON;
    const char *want = json ? "application/json" : "application/octet-stream";
    if (!content_type_is(ct, want)) {
        bfd_reply_problem(r, 415, NULL, "%s %s takes Content-Type: %s, got %s%s%s", r->method, r->route->path, want,
                          ct ? "'" : "", ct ? ct : "none", ct ? "'" : "");
        return -1;
    }
    int64_t limit = json ? d->cfg.max_json_bytes : d->cfg.max_upload_bytes;
    const char *cl = bfd_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        long long n = strtoll(cl, &end, 10);
        if (end == cl || *end || n < 0) {
            bfd_reply_problem(r, 400, NULL, "Content-Length '%s' is not a byte count", cl);
            return -1;
        }
        if (n > limit) {
            bfd_reply_problem(r, 413, NULL, "the body is %lld bytes; this daemon takes at most %lld for %s %s", n,
                              (long long)limit, r->method, r->route->path);
            return -1;
        }
    }
    if (!json) {
        bf_error err = {0};
        if (bfd_upload_begin(d->blobs, &r->upload, &err) != BF_OK) { bfd_reply_internal(r, "starting the upload", &err); return -1; }
    }
    return 0;
}

/* A piece of the body. A failure makes a reply pending and the rest of the
 * body is dropped; returns MHD_NO to close a connection that keeps sending. */
static enum MHD_Result consume(bfd *d, bfd_req *r, const char *data, size_t n)
{
    if (r->body_failed) {
        r->discarded += n;
        return r->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
    }
    if (r->route->body == BFD_BODY_UPLOAD) {
        bf_error err = {0};
        if (bfd_upload_size(r->upload) + (int64_t)n > d->cfg.max_upload_bytes) {
            bfd_reply_problem(r, 413, NULL, "the body is larger than the %lld bytes this daemon takes for %s %s",
                              (long long)d->cfg.max_upload_bytes, r->method, r->route->path);
            r->body_failed = 1;
        } else if (bfd_upload_write(r->upload, data, n, &err) != BF_OK) {
            bfd_reply_internal(r, "storing the upload", &err);   /* 507 on a full disk */
            r->body_failed = 1;
        }
        if (r->body_failed) { bfd_upload_abort(r->upload); r->upload = NULL; }
        return MHD_YES;
    }
    if (r->route->body == BFD_BODY_NONE) return MHD_YES;   /* a body where none is used: ignored */
    if ((int64_t)(r->body_len + n) > d->cfg.max_json_bytes) {
        bfd_reply_problem(r, 413, NULL, "the JSON body is larger than the %lld bytes this daemon takes",
                          (long long)d->cfg.max_json_bytes);
        r->body_failed = 1;
        return MHD_YES;
    }
    if (r->body_len + n + 1 > r->body_cap) {
        size_t cap = (r->body_len + n + 1) * 2;
        char *b = realloc(r->body, cap);
        if (!b) { bfd_reply_problem(r, 500, NULL, "out of memory reading the body"); r->body_failed = 1; return MHD_YES; }
        r->body = b;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return MHD_YES;
}

static enum MHD_Result queue_reply(bfd_req *r)
{
    struct MHD_Response *resp = r->reply;
    r->reply = NULL;
    r->status = r->reply_status;
    if (!resp) return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)r->reply_status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* The request starts here, the one place libmicrohttpd shows the target as
 * sent: by the time the access handler runs, the path is percent-decoded and
 * a %00 in it has cut it short. Called once per request; on_completed frees. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    bfd_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->d = cls;
    r->conn = conn;
    r->t0 = bfd_mono();
    if (!(r->target = strdup(uri))) {
        free(r);
        return NULL;
    }
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void)version;
    (void)conn;
    bfd *d = cls;
    bfd_req *r = *con_cls;
    if (!r) return MHD_NO;   /* on_uri ran out of memory */
    if (!r->path) {
        snprintf(r->method, sizeof r->method, "%s", method);
        r->path = strdup(url);
        if (!r->path) return MHD_NO;
        if (begin(d, r) != 0) r->body_failed = 1;
        /* a reply now goes out before the body is read (then the connection closes) */
        return r->reply ? queue_reply(r) : MHD_YES;
    }
    if (*upload_data_size) {
        enum MHD_Result ret = consume(d, r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return ret;
    }
    if (!r->reply && !r->body_failed && !r->sse && !r->work && r->dispatched) {
        /* resumed by a handler that lost its reply (out of memory making it) */
        bfd_reply_problem(r, 500, NULL, "the handler for %s %s made no reply", r->method, r->route->path);
    } else if (!r->reply && !r->body_failed && !r->sse && !r->work) {
        r->dispatched = 1;
        if (r->route->body == BFD_BODY_UPLOAD && bfd_upload_size(r->upload) == 0) {
            bfd_upload_abort(r->upload);
            r->upload = NULL;
            bfd_reply_problem(r, 400, NULL, "the body is empty: send the file's bytes (curl --data-binary @FILE)");
        } else if (r->route->body == BFD_BODY_JSON && r->body_len == 0) {
            bfd_reply_problem(r, 400, NULL, "the body is empty: send a JSON document (curl --data-binary @spec.json)");
        } else {
            r->route->handler(d, r);
        }
    }
    if (r->reply) return queue_reply(r);
    if (!r->suspended && !r->sse) {   /* a handler that neither replied nor suspended: a bug, not a hang */
        bfd_reply_problem(r, 500, NULL, "the handler for %s %s made no reply", r->method, r->path);
        return queue_reply(r);
    }
    return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)conn;
    (void)socket_context;
    bfd *d = cls;
    d->connections += toe == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    bfd *d = cls;
    bfd_req *r = *con_cls;
    if (!r) return;
    if (!r->path) {   /* libmicrohttpd refused the request itself before the handler saw it: nothing to log */
        free(r->target);
        free(r);
        *con_cls = NULL;
        return;
    }
    double ms = (bfd_mono() - r->t0) * 1e3;
    int status = r->status ? r->status : (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? 200 : 499);
    const char *route = bfd_route_label(r);
    if (d->cfg.log_json) {
        json_t *j = json_pack("{s:f, s:s, s:s, s:s, s:i, s:f, s:s?}", "ts", bfd_now(), "level", "info", "method",
                              r->method, "path", r->path ? r->path : "", "status", status, "ms", ms, "tenant", r->tenant);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s) fprintf(stderr, "%s\n", s);
        free(s);
        json_decref(j);
    } else {
        bfd_log(d, "info", "%s %s %d %.1fms tenant=%s", r->method, r->path ? r->path : "", status, ms,
                r->tenant ? r->tenant : "-");
    }
    bfd_metrics_http(d->metrics, route, status);
    if (r->sse) bfd_sse_close(d, r);
    bfd_upload_abort(r->upload);
    if (r->reply) MHD_destroy_response(r->reply);
    for (int i = 0; i < r->n_hdr; i++) free(r->hdr_value[i]);
    free(r->body);
    free(r->tenant);
    free(r->path);
    free(r->target);
    free(r);
    *con_cls = NULL;
}

/* --- MHD in the loop ------------------------------------------------------ */

static void on_mhd_timer(uv_timer_t *t)
{
    bfd_http_run(t->data);
}

static void on_mhd_poll(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    bfd_http_run(p->data);
}

static void schedule(bfd *d)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (MHD_get_timeout(d->mhd, &ms) == MHD_YES)
        uv_timer_start(&d->mhd_timer, on_mhd_timer, ms, 0);
    else
        uv_timer_stop(&d->mhd_timer);
}

void bfd_http_run(bfd *d)
{
    if (!d->mhd) return;
    MHD_run(d->mhd);
    schedule(d);
}

static void on_kick(uv_timer_t *t)
{
    bfd_http_run(t->data);
}

void bfd_http_kick(bfd *d)
{
    if (d->mhd) uv_timer_start(&d->kick, on_kick, 0, 0);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n && buf[n - 1] == '\n') buf[--n] = '\0';
    bfd_log(cls, "warn", "http: %s", buf);
}

/* A PEM file's text, NUL-terminated; certificates and keys are small, so
 * anything past 1 MiB is the wrong file. */
static bf_status read_pem(const char *path, const char *what, char **out, bf_error *err)
{
    enum { PEM_MAX = 1 << 20 };
    bf_status st = BF_OK;
    char *buf = NULL;
    size_t n = 0;
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return bf_error_set(err, BF_EIO, "%s %s: %s", what, path, strerror(errno));
    if (!(buf = malloc(PEM_MAX + 1))) { st = bf_error_set(err, BF_ENOMEM, "%s %s: out of memory", what, path); goto out; }
    n = fread(buf, 1, PEM_MAX + 1, f);
    if (ferror(f)) { st = bf_error_set(err, BF_EIO, "%s %s: cannot read: %s", what, path, strerror(errno)); goto out; }
    if (n > PEM_MAX) { st = bf_error_set(err, BF_EINVAL, "%s %s: larger than 1 MiB, not a PEM file", what, path); goto out; }
    buf[n] = '\0';
    if (!strstr(buf, "-----BEGIN ")) { st = bf_error_set(err, BF_EINVAL, "%s %s: not PEM (no -----BEGIN line)", what, path); goto out; }
    *out = buf;
    buf = NULL;
out:
    if (buf) {
        memset(buf, 0, n < PEM_MAX ? n : PEM_MAX);   /* may hold a private key */
        free(buf);
    }
    fclose(f);
    return st;
}

static void free_pem(char **pem)
{
    if (!*pem) return;
    memset(*pem, 0, strlen(*pem));   /* a private key should not linger in freed memory */
    free(*pem);
    *pem = NULL;
}

bf_status bfd_http_start(bfd *d, bf_error *err)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    const char *h = d->cfg.host;
    char host[256];
    snprintf(host, sizeof host, "%s", h[0] == '[' ? h + 1 : h);
    char *rb = strchr(host, ']');
    if (rb) *rb = '\0';
    if (!strcmp(host, "localhost")) snprintf(host, sizeof host, "127.0.0.1");
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)d->cfg.port);
        len = sizeof *s4;
    } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)d->cfg.port);
        len = sizeof *s6;
        flags |= MHD_USE_IPv6;
    } else {
        return bf_error_set(err, BF_EINVAL, "--listen: '%s' is not an IP address (use 127.0.0.1, 0.0.0.0, ::1 ...)", h);
    }
    (void)len;
    /* TLS: libmicrohttpd's GnuTLS support, the certificate and key given as
     * text; with neither, the array is empty */
    struct MHD_OptionItem tls[3] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (d->cfg.tls_cert) {
        bf_status st;
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
            return bf_error_set(err, BF_EUNSUPPORTED, "--tls-cert: this libmicrohttpd was built without TLS (GnuTLS); "
                                "install one that has it (Debian's libmicrohttpd12 does) or terminate TLS in a proxy");
        if ((st = read_pem(d->cfg.tls_cert, "--tls-cert", &d->tls_cert_pem, err)) ||
            (st = read_pem(d->cfg.tls_key, "--tls-key", &d->tls_key_pem, err))) {
            free_pem(&d->tls_cert_pem);
            free_pem(&d->tls_key_pem);
            return st;
        }
        tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, d->tls_cert_pem};
        tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, d->tls_key_pem};
        flags |= MHD_USE_TLS;
    }
    d->mhd = MHD_start_daemon(flags, (uint16_t)d->cfg.port, NULL, NULL, on_request, d, MHD_OPTION_EXTERNAL_LOGGER,
                              mhd_log, d, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED,
                              on_completed, d, MHD_OPTION_URI_LOG_CALLBACK, on_uri, d, MHD_OPTION_NOTIFY_CONNECTION, on_connection, d,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)(d->cfg.max_connections + BFD_CONN_RESERVE),
                              MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)d->cfg.max_connections_per_ip,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)d->cfg.idle_timeout, MHD_OPTION_ARRAY,
                              tls, MHD_OPTION_END);
    if (!d->mhd && d->cfg.tls_cert)
        return bf_error_set(err, BF_EIO, "cannot start HTTPS on %s:%d with --tls-cert %s and --tls-key %s (the port in "
                            "use, or the certificate or key unreadable to GnuTLS, or a key that is not the "
                            "certificate's: see the http: line above)", h, d->cfg.port, d->cfg.tls_cert, d->cfg.tls_key);
    if (!d->mhd)
        return bf_error_set(err, BF_EIO, "cannot listen on %s:%d (in use, or not an address of this machine?)", h,
                            d->cfg.port);
    const union MHD_DaemonInfo *pi = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
    d->port = pi ? pi->port : d->cfg.port;
    const union MHD_DaemonInfo *ei = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!ei) return bf_error_set(err, BF_EIO, "libmicrohttpd gave no epoll descriptor");
    uv_timer_init(d->loop, &d->kick);
    d->kick.data = d;
    uv_timer_init(d->loop, &d->mhd_timer);
    d->mhd_timer.data = d;
    uv_poll_init(d->loop, &d->mhd_poll, ei->epoll_fd);
    d->mhd_poll.data = d;
    uv_poll_start(&d->mhd_poll, UV_READABLE, on_mhd_poll);
    schedule(d);
    return BF_OK;
}

void bfd_http_quiesce(bfd *d)
{
    if (!d->mhd) return;
    MHD_socket fd = MHD_quiesce_daemon(d->mhd);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

void bfd_http_stop(bfd *d)
{
    if (d->mhd) {
        uv_poll_stop(&d->mhd_poll);
        uv_timer_stop(&d->mhd_timer);
        uv_timer_stop(&d->kick);
        MHD_stop_daemon(d->mhd);
        d->mhd = NULL;
    }
    free_pem(&d->tls_cert_pem);
    free_pem(&d->tls_key_pem);
}
