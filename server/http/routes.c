/* The route table, path matching, and the service's own routes: version,
 * probes, metrics, the OpenAPI contract. */
#include "http/routes.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "work/scheduler.h"

static const bfd_route ROUTES[] = {
    {"GET", "/v1", BFD_BODY_NONE, 0, bfd_h_root},
    {"GET", "/v1/openapi.yaml", BFD_BODY_NONE, 0, bfd_h_openapi},
    {"GET", "/v2/health/live", BFD_BODY_NONE, 0, bfd_h_live},
    {"GET", "/v2/health/ready", BFD_BODY_NONE, 0, bfd_h_ready},
    {"GET", "/metrics", BFD_BODY_NONE, 0, bfd_h_metrics},
    {"POST", "/v1/models", BFD_BODY_UPLOAD, 1, bfd_h_item_upload},
    {"GET", "/v1/models", BFD_BODY_NONE, 1, bfd_h_item_list},
    {"GET", "/v1/models/{id}", BFD_BODY_NONE, 1, bfd_h_item_get},
    {"DELETE", "/v1/models/{id}", BFD_BODY_NONE, 1, bfd_h_item_delete},
    {"POST", "/v1/datasets", BFD_BODY_UPLOAD, 1, bfd_h_item_upload},
    {"GET", "/v1/datasets", BFD_BODY_NONE, 1, bfd_h_item_list},
    {"GET", "/v1/datasets/{id}", BFD_BODY_NONE, 1, bfd_h_item_get},
    {"DELETE", "/v1/datasets/{id}", BFD_BODY_NONE, 1, bfd_h_item_delete},
    {"POST", "/v1/error-maps", BFD_BODY_UPLOAD, 1, bfd_h_item_upload},
    {"GET", "/v1/error-maps", BFD_BODY_NONE, 1, bfd_h_item_list},
    {"GET", "/v1/error-maps/{id}", BFD_BODY_NONE, 1, bfd_h_item_get},
    {"DELETE", "/v1/error-maps/{id}", BFD_BODY_NONE, 1, bfd_h_item_delete},
    {"POST", "/v1/campaigns", BFD_BODY_JSON, 1, bfd_h_campaign_submit},
    {"GET", "/v1/campaigns", BFD_BODY_NONE, 1, bfd_h_campaign_list},
    {"GET", "/v1/campaigns/{id}", BFD_BODY_NONE, 1, bfd_h_campaign_get},
    {"DELETE", "/v1/campaigns/{id}", BFD_BODY_NONE, 1, bfd_h_campaign_delete},
    {"GET", "/v1/campaigns/{id}/events", BFD_BODY_NONE, 1, bfd_h_campaign_events},
    {"GET", "/v1/campaigns/{id}/results", BFD_BODY_NONE, 1, bfd_h_campaign_results},
    {"POST", "/v1/campaigns/{id}/cancel", BFD_BODY_NONE, 1, bfd_h_campaign_cancel},
    /* routes_ui.c: the web page (only these paths; the rest stays 404) */
    {"GET", "/", BFD_BODY_NONE, 0, bfd_h_ui_page},
    {"GET", "/ui/app.js", BFD_BODY_NONE, 0, bfd_h_ui_app_js},
    {"GET", "/ui/validate.js", BFD_BODY_NONE, 0, bfd_h_ui_validate_js},
    {"GET", "/ui/sse.js", BFD_BODY_NONE, 0, bfd_h_ui_sse_js},
    {"GET", "/ui/app.css", BFD_BODY_NONE, 0, bfd_h_ui_app_css},
    {"GET", "/v1/campaign.schema.json", BFD_BODY_NONE, 0, bfd_h_campaign_schema},
    {"GET", "/v1/campaigns/{id}/figures", BFD_BODY_NONE, 1, bfd_h_campaign_figures},
    {"GET", "/v1/campaigns/{id}/picture", BFD_BODY_NONE, 1, bfd_h_campaign_picture},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])

/* Matches a template segment by segment; {id} takes one non-empty segment.
 * A trailing slash is forgiven. */
static int path_match(const char *tpl, const char *path, char *id, size_t id_len)
{
    while (*tpl) {
        if (*path != '/' || *tpl != '/') return 0;
        tpl++;
        path++;
        const char *te = strchr(tpl, '/'), *pe = strchr(path, '/');
        size_t tl = te ? (size_t)(te - tpl) : strlen(tpl), pl = pe ? (size_t)(pe - path) : strlen(path);
        if (tl == 4 && !strncmp(tpl, "{id}", 4)) {
            if (pl == 0) return 0;
            if (id) snprintf(id, id_len, "%.*s", (int)(pl < id_len ? pl : id_len - 1), path);
            if (pl >= id_len && id) id[0] = '\0';   /* too long to be any id: matched, but never found */
        } else if (tl != pl || strncmp(tpl, path, tl)) {
            return 0;
        }
        tpl += tl;
        path += pl;
    }
    return *path == '\0' || (path[0] == '/' && path[1] == '\0');
}

/* Judged on the request target as the client sent it, before
 * libmicrohttpd percent-decodes the path: a decoded %00 would end the C
 * string ("/v1/models/ab%00cd" becomes "/v1/models/ab"), a decoded %2F would
 * add a segment, and "//" would be an empty one. None of these has a meaning
 * here (no id contains '/' or a control byte), so rather than guess which
 * resource was meant, as some servers do by merging slashes, the request is
 * refused (Tomcat's and nginx's 400 for %00 and encoded slashes). */
int bfd_target_check(const char *target, char *why, size_t len)
{
    int in_query = 0;
    size_t path_at = 0;
    /* absolute-form ("http://host/v1/models", RFC 9112 3.2.2): its "//" is no
     * empty segment; the path starts after the authority */
    const char *scheme_end = target[0] != '/' ? strstr(target, "://") : NULL;
    if (scheme_end && !memchr(target, '/', (size_t)(scheme_end - target))) {
        const char *path = strchr(scheme_end + 3, '/');
        path_at = path ? (size_t)(path - target) : strlen(target);
    }
    for (size_t i = 0; target[i]; i++) {
        unsigned char c = (unsigned char)target[i];
        const char *part = in_query ? "query" : "path";
        if (c == '?' && !in_query) { in_query = 1; continue; }
        if (c < 0x20 || c == 0x7f) {
            snprintf(why, len, "the %s has a control byte (0x%02X) at byte %zu; URLs carry none (percent-encode data, "
                     "and ids never contain one)", part, c, i);
            return -1;
        }
        if (c == '%' && isxdigit((unsigned char)target[i + 1]) && isxdigit((unsigned char)target[i + 2])) {
            char hex[3] = {target[i + 1], target[i + 2], '\0'};
            unsigned v = (unsigned)strtoul(hex, NULL, 16);
            if (v < 0x20 || v == 0x7f) {
                snprintf(why, len, "the %s has an encoded control byte (%%%s) at byte %zu; no id or argument contains "
                         "one", part, hex, i);
                return -1;
            }
            if (v == '/' && !in_query) {
                snprintf(why, len, "the path has an encoded slash (%%%s) at byte %zu; no id contains '/', so write "
                         "the path with plain slashes", hex, i);
                return -1;
            }
        }
        if (c == '/' && !in_query && i >= path_at && target[i + 1] == '/') {
            snprintf(why, len, "the path has an empty segment ('//') at byte %zu; write each '/' once", i);
            return -1;
        }
    }
    return 0;
}

const bfd_route *bfd_route_match(const char *method, const char *path, bfd_req *r, int *allowed_other)
{
    *allowed_other = 0;
    for (size_t i = 0; i < N_ROUTES; i++) {
        if (!path_match(ROUTES[i].path, path, r ? r->id : NULL, r ? sizeof r->id : 0)) continue;
        if (!strcmp(ROUTES[i].method, method) || (!strcmp(method, "HEAD") && !strcmp(ROUTES[i].method, "GET")))
            return &ROUTES[i];
        *allowed_other = 1;
    }
    return NULL;
}

void bfd_route_allow(const char *path, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_ROUTES && off < len; i++)
        if (path_match(ROUTES[i].path, path, NULL, 0))
            off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "", ROUTES[i].method);
}

const char *bfd_route_label(const bfd_req *r)
{
    return r->route ? r->route->path : "other";
}

int bfd_req_kind(const bfd_req *r)
{
    return !strncmp(r->route->path, "/v1/datasets", 12) ? BFD_DATASET
         : !strncmp(r->route->path, "/v1/error-maps", 14) ? BFD_ERRMAP : BFD_MODEL;
}

int bfd_paging(bfd_req *r, int *limit, int64_t *after)
{
    const char *l = bfd_req_arg(r, "limit"), *t = bfd_req_arg(r, "page_token");
    char *end;
    *limit = 100;
    *after = 0;
    if (l) {
        long v = strtol(l, &end, 10);
        if (end == l || *end || v < 1 || v > 1000) {
            bfd_reply_problem(r, 400, NULL, "limit must be 1..1000, got '%s'", l);
            return -1;
        }
        *limit = (int)v;
    }
    if (t && *t) {
        long long v = strtoll(t, &end, 10);
        if (end == t || *end || v < 0) {
            bfd_reply_problem(r, 400, NULL, "page_token '%s' is not one this daemon gave out", t);
            return -1;
        }
        *after = v;
    }
    return 0;
}

/* --- the service's own routes --------------------------------------------- */

void bfd_h_root(bfd *d, bfd_req *r)
{
    (void)d;
    bfd_reply_json(r, 200, json_pack("{s:s, s:s, s:s, s:s, s:b}", "name", "bitflip", "version", BF_VERSION, "api", "v1",
                                     "openapi", "/v1/openapi.yaml", "auth", d->auth));
}

void bfd_h_live(bfd *d, bfd_req *r)
{
    (void)d;
    bfd_reply_json(r, 200, json_pack("{s:s}", "status", "live"));
}

void bfd_h_ready(bfd *d, bfd_req *r)
{
    int running = 0, queued = 0;
    bfd_sched_load(d->sched, &running, &queued);
    if (d->draining) {
        bfd_reply_json(r, 503, json_pack("{s:s}", "status", "draining"));
        return;
    }
    bfd_reply_json(r, 200, json_pack("{s:s, s:i, s:i, s:i}", "status", "ready", "workers", d->cfg.workers,
                                     "chunks_running", running, "chunks_queued", queued));
}

void bfd_h_metrics(bfd *d, bfd_req *r)
{
    int64_t counts[BFD_STATE_COUNT] = {0};
    bf_error err = {0};
    if (bfd_campaign_counts(d->store, counts, &err) != BF_OK) { bfd_reply_internal(r, "counting campaigns", &err); return; }
    char *text = bfd_metrics_render(d->metrics, counts, BF_VERSION, BFD_COMMIT);
    if (!text) { bfd_reply_problem(r, 500, NULL, "out of memory"); return; }
    bfd_reply_data(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
}

void bfd_h_openapi(bfd *d, bfd_req *r)
{
    (void)d;
    extern const char bfd_openapi_yaml[];
    extern const size_t bfd_openapi_yaml_len;
    bfd_reply_static(r, 200, "application/yaml", bfd_openapi_yaml, bfd_openapi_yaml_len);
}
