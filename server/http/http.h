/* bitflipd — requests and replies: what route handlers see of libmicrohttpd.
 *
 * A request's life: headers arrive → the route is matched, the tenant
 * authenticated and the declared body checked against the route's limit and
 * content type (a 4xx goes out before any body is read) → the body streams
 * into a buffer (JSON) or a blob upload (models, datasets) → the handler
 * runs. A handler replies at once (bfd_reply_*), or suspends the request,
 * does slow work off the loop and replies later followed by bfd_req_resume.
 * When the request completes, one log line and one metrics count. */
#ifndef BFD_HTTP_H
#define BFD_HTTP_H

#include <jansson.h>
#include <stddef.h>

#include "daemon.h"

struct MHD_Connection;
struct MHD_Response;
typedef struct bfd_req bfd_req;
typedef struct bfd_sub bfd_sse;

typedef enum bfd_body { BFD_BODY_NONE = 0, BFD_BODY_JSON, BFD_BODY_UPLOAD } bfd_body;

typedef struct bfd_route {
    const char *method;
    const char *path;         /* template: "/v1/models/{id}" */
    bfd_body body;
    int auth;                 /* needs a tenant (when the daemon has tokens) */
    void (*handler)(bfd *d, bfd_req *r);
} bfd_route;

#define BFD_MAX_HEADERS 6

struct bfd_req {
    bfd *d;
    struct MHD_Connection *conn;
    char method[16];
    char *target;             /* the request target as sent (path?query, not decoded) */
    char *path;               /* the path as libmicrohttpd decoded it */
    const bfd_route *route;
    char id[80];              /* the {id} of the path */
    char sub[32];             /* a path's last segment after {id} ("events", "cancel") */
    char *tenant;
    double t0;
    int status;               /* of the reply, for the log */
    /* body */
    char *body;
    size_t body_len, body_cap;
    bfd_upload *upload;
    int body_failed;          /* a reply is already pending; discard the rest */
    uint64_t discarded;
    /* reply */
    struct MHD_Response *reply;
    int reply_status;
    const char *hdr_name[BFD_MAX_HEADERS];
    char *hdr_value[BFD_MAX_HEADERS];
    int n_hdr;
    int suspended;
    int dispatched;           /* the route's handler has run: never twice for one request */
    bfd_sse *sse;             /* an event stream (sse.c) */
    void *work;               /* a handler's state across a suspension */
};

/* A request header or query argument (NULL if absent). */
const char *bfd_req_header(bfd_req *r, const char *name);
const char *bfd_req_arg(bfd_req *r, const char *name);

/* Adds a header to the reply about to be made (value copied). */
void bfd_reply_header(bfd_req *r, const char *name, const char *value);
/* Replies; `body` is stolen. */
void bfd_reply_json(bfd_req *r, int status, json_t *body);
void bfd_reply_data(bfd_req *r, int status, const char *content_type, char *data, size_t len);   /* data taken (free()) */
void bfd_reply_static(bfd_req *r, int status, const char *content_type, const char *data, size_t len);
/* application/problem+json (RFC 9457); `errors` (stolen, may be NULL) is the
 * errors[] of a validation problem. */
void bfd_reply_problem(bfd_req *r, int status, json_t *errors, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* The same with a problem type other than about:blank: a URI that clients
 * may branch on (api/openapi.yaml lists them). */
#define BFD_PROBLEM_JOB_MEMORY "urn:bitflip:problem:job-memory"   /* over --job-memory: the CLI exits 3 */
void bfd_reply_problem_typed(bfd_req *r, int status, const char *type, json_t *errors, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* 500 with the message, logged; for what should not happen. A full disk
 * (bfd_error_disk_full) is 507 with Retry-After instead. */
void bfd_reply_internal(bfd_req *r, const char *what, const bf_error *err);

/* Suspends the request (its handler will reply later), and resumes it once
 * that reply is made. Only on the loop thread. */
void bfd_req_suspend(bfd_req *r);
void bfd_req_resume(bfd_req *r);

/* routes.c */
const bfd_route *bfd_route_match(const char *method, const char *path, bfd_req *r, int *allowed_other);
void bfd_route_allow(const char *path, char *buf, size_t len);   /* the Allow header for a 405 */
const char *bfd_route_label(const bfd_req *r);   /* the route template, or "other" */
/* 0 if the request target (path and query as sent, before percent-decoding)
 * is one a route may see; -1 with the reason (naming the byte) in `why` for a
 * control byte, raw or encoded, an encoded '/' or an empty path segment. */
int bfd_target_check(const char *target, char *why, size_t len);

#endif
