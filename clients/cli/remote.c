/* bitflip run --server: the same campaign on a bitflipd, over its REST API
 * (libcurl): upload (model, dataset, a profiled spec's error map), submit,
 * follow the event stream, fetch the result. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <dlfcn.h>

#include "bitflip/api/result.h"
#include "campaign_cli.h"
#include "cli.h"

/* Reconnects of the event stream before giving up (each resumes with
 * Last-Event-ID, so nothing is missed or repeated). */
#define SSE_RETRIES 5

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

/* libcurl's functions, looked up when a run goes to a daemon. Why not linked:
 * libcurl brings ~30 libraries (TLS, Kerberos, LDAP, SSH, ...) that the
 * dynamic loader maps and relocates at every start of bitflip, also for the
 * local runs, checks and reports that never make a request: 0.026 CPU-s of a
 * release bitflip's 0.044 to print --version, ~0.03 more under ASan (tests/
 * README.md, "The twentieth round"), and the test suites start bitflip
 * thousands of times. */
typedef struct curl_fns {
    CURLcode (*global_init)(long);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    char *(*easy_escape)(CURL *, const char *, int);
    void (*free)(void *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} curl_fns;

typedef struct remote {
    const char *url;
    const char *token;
    curl_fns c;
    CURL *h;
    char err[CURL_ERROR_SIZE];
} remote;

/* Loads libcurl by its soname (the ABI bitflip is compiled against: 4 since
 * curl 7.16) and finds each function. Never unloaded: libcurl's TLS library
 * may leave exit handlers that would call into unmapped code. Returns 0, or
 * prints why not, naming libcurl and the package to install (cli_test_cli
 * checks both ways with a stub library), and returns -1. */
static int load_curl(curl_fns *c)
{
    void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "bitflip run: --server needs libcurl (libcurl.so.4), which did not load: %s; "
                        "install it (Debian, Ubuntu: apt-get install libcurl4; Fedora: dnf install libcurl), "
                        "or run the campaign here with --local\n", dlerror());
        return -1;
    }
    /* each symbol copied into its function pointer (a void * and a function
     * pointer have one representation on every POSIX system) */
#define BF_CURL_SYM(f)                                                                              \
    do {                                                                                            \
        void *sym = dlsym(lib, "curl_" #f);                                                         \
        if (!sym) {                                                                                 \
            fprintf(stderr, "bitflip run: --server needs libcurl, and this libcurl.so.4 has no curl_" #f \
                            "; install the distribution's libcurl (Debian, Ubuntu: apt-get install "         \
                            "libcurl4; Fedora: dnf install libcurl)\n");                             \
            return -1;                                                                              \
        }                                                                                           \
        memcpy(&c->f, &sym, sizeof sym);                                                            \
    } while (0);
    BF_CURL_SYM(global_init)
    BF_CURL_SYM(global_cleanup)
    BF_CURL_SYM(easy_init)
    BF_CURL_SYM(easy_cleanup)
    BF_CURL_SYM(easy_reset)
    BF_CURL_SYM(easy_setopt)
    BF_CURL_SYM(easy_perform)
    BF_CURL_SYM(easy_getinfo)
    BF_CURL_SYM(easy_strerror)
    BF_CURL_SYM(easy_escape)
    BF_CURL_SYM(free)
    BF_CURL_SYM(slist_append)
    BF_CURL_SYM(slist_free_all)
#undef BF_CURL_SYM
    return 0;
}

static size_t to_buf(char *data, size_t size, size_t nmemb, void *user)
{
    buf *b = user;
    size_t n = size * nmemb;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) return 0;   /* curl reports a write error */
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

/* Prints why a request failed: the problem+json detail and its errors
 * (JSON Pointer: message), else the status. Returns the exit code to use. */
static int report_http(const char *what, long status, const buf *body)
{
    json_t *p = body->p ? json_loads(body->p, 0, NULL) : NULL;
    const char *detail = json_string_value(json_object_get(p, "detail"));
    fprintf(stderr, "bitflip run: %s: HTTP %ld%s%s\n", what, status, detail ? ": " : "", detail ? detail : "");
    const json_t *errs = json_object_get(p, "errors");
    for (size_t i = 0; i < json_array_size(errs); i++) {
        const json_t *e = json_array_get(errs, i);
        fprintf(stderr, "  %s: %s\n", json_string_value(json_object_get(e, "pointer")),
                json_string_value(json_object_get(e, "detail")));
    }
    /* a campaign over the daemon's --job-memory is valid but cannot run there:
     * an infrastructure limit (3), as `run --local` over --job-memory is */
    const char *type = json_string_value(json_object_get(p, "type"));
    int over_memory = type && !strcmp(type, "urn:bitflip:problem:job-memory");
    json_decref(p);
    if (over_memory) return EXIT_INFRA;
    return status == 422 || status == 400 || status == 413 ? EXIT_USAGE : EXIT_INFRA;
}

/* One request. body/len or file/size (or neither) is what is sent. */
static int request(remote *r, const char *method, const char *path, const char *ctype, const char *body, size_t len,
                   FILE *file, curl_off_t size, long *status, buf *out)
{
    char url[2048], auth[256], ct[128];
    snprintf(url, sizeof url, "%s%s", r->url, path);
    struct curl_slist *hdr = r->c.slist_append(NULL, "Expect:");
    if (r->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", r->token);
        hdr = r->c.slist_append(hdr, auth);
    }
    if (ctype) {
        snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
        hdr = r->c.slist_append(hdr, ct);
    }
    r->c.easy_reset(r->h);
    r->c.easy_setopt(r->h, CURLOPT_URL, url);
    r->c.easy_setopt(r->h, CURLOPT_HTTPHEADER, hdr);
    r->c.easy_setopt(r->h, CURLOPT_ERRORBUFFER, r->err);
    r->c.easy_setopt(r->h, CURLOPT_WRITEFUNCTION, to_buf);
    r->c.easy_setopt(r->h, CURLOPT_WRITEDATA, out);
    r->c.easy_setopt(r->h, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        r->c.easy_setopt(r->h, CURLOPT_POSTFIELDS, body);
        r->c.easy_setopt(r->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else if (file) {
        r->c.easy_setopt(r->h, CURLOPT_POST, 1L);
        r->c.easy_setopt(r->h, CURLOPT_READDATA, file);
        r->c.easy_setopt(r->h, CURLOPT_POSTFIELDSIZE_LARGE, size);
    }
    r->err[0] = '\0';
    CURLcode cc = r->c.easy_perform(r->h);
    r->c.slist_free_all(hdr);
    if (cc != CURLE_OK) {
        fprintf(stderr, "bitflip run: cannot reach bitflipd at %s: %s (is it running? or run with --local)\n", r->url,
                r->err[0] ? r->err : r->c.easy_strerror(cc));
        return EXIT_INFRA;
    }
    r->c.easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

/* Uploads a model, dataset or error map (kind: its route); *id gets its id (malloc'd). */
static int upload(remote *r, const char *kind, const char *path, char **id)
{
    buf out = {0};
    long status = 0;
    int rc;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "bitflip run: cannot read %s: %s\n", path, strerror(errno));
        if (f) fclose(f);
        return EXIT_USAGE;
    }
    char *q = r->c.easy_escape(r->h, strrchr(path, '/') ? strrchr(path, '/') + 1 : path, 0);
    char api[600];
    snprintf(api, sizeof api, "/v1/%s?name=%s", kind, q ? q : "");
    r->c.free(q);
    rc = request(r, "POST", api, "application/octet-stream", NULL, 0, f, (curl_off_t)st.st_size, &status, &out);
    fclose(f);
    if (!rc && status != 200 && status != 201) {
        char what[700];
        snprintf(what, sizeof what, "uploading %s", path);
        rc = report_http(what, status, &out);
    }
    if (!rc) {
        json_t *j = json_loads(out.p, 0, NULL);
        const char *s = json_string_value(json_object_get(j, "id"));
        *id = s ? strdup(s) : NULL;
        json_decref(j);
        if (!*id) { fprintf(stderr, "bitflip run: the daemon's reply to an upload has no id\n"); rc = EXIT_INFRA; }
    }
    free(out.p);
    return rc;
}

/* A profiled spec's faults.error_map on its way to the daemon, which takes
 * only its own uploads ("sha256:ID", sent as it is): a path is read as a
 * local run reads it (as given, else beside the spec), uploaded, and
 * replaced by "sha256:" and the upload's id (the daemon's id is the sha256). */
static int upload_error_map(remote *r, const char *spec_path, json_t *spec)
{
    json_t *faults = json_object_get(spec, "faults");
    const char *em = json_string_value(json_object_get(faults, "error_map"));
    if (!em || !strncmp(em, "sha256:", 7)) return 0;
    char *path = resolve_input(spec_path, em), *id = NULL;
    if (!path) { fprintf(stderr, "bitflip run: out of memory\n"); return EXIT_INFRA; }
    int rc = 0;
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "bitflip run: %s: faults.error_map '%s': cannot read %s: %s (give the path of a .bfmap, "
                "from here or from the spec's directory, or \"sha256:ID\" of a map uploaded to the daemon)\n",
                spec_path, em, path, strerror(errno));
        rc = EXIT_USAGE;
    } else if ((rc = upload(r, "error-maps", path, &id)) == 0) {
        size_t n = strlen(id) + 8;
        char *ref = malloc(n);
        if (!ref) { fprintf(stderr, "bitflip run: out of memory\n"); rc = EXIT_INFRA; }
        else {
            snprintf(ref, n, "sha256:%s", id);
            json_object_set_new(faults, "error_map", json_string(ref));
            free(ref);
        }
    }
    free(id);
    free(path);
    return rc;
}

/* --- the event stream -------------------------------------------------- */

typedef struct sse {
    buf line;                 /* the line being read */
    char id[64], event[32];
    buf data;
    char last_id[64];
    int ended;
    cli_progress *out;
    char state[32], verdict[16];
    char *error;
    double start;
} sse;

static void on_event(sse *s)
{
    json_t *j = s->data.p ? json_loads(s->data.p, 0, NULL) : NULL;
    double now = cli_now();
    /* through --progress: a terminal gets a live line, a log (CI) a line every few seconds */
    if (!strcmp(s->event, "progress")) {
        long long done = (long long)json_integer_value(json_object_get(j, "trials_done"));
        long long planned = (long long)json_integer_value(json_object_get(j, "trials_planned"));
        if (cli_progress_due(s->out, done >= planned)) {
            const json_t *o = json_object_get(j, "outcomes");
            double el = now - s->start, rate = el > 0 ? (double)done / el : 0;
            cli_progress_print(s->out, "%lld/%lld trials (%.0f%%)  %.0f trials/s  masked %lld  tolerable %lld  critical %lld  due %lld",
                               done, planned, planned ? 100.0 * (double)done / (double)planned : 100.0, rate,
                               (long long)json_integer_value(json_object_get(o, "masked")),
                               (long long)json_integer_value(json_object_get(o, "tolerable")),
                               (long long)json_integer_value(json_object_get(o, "critical")),
                               (long long)json_integer_value(json_object_get(o, "due")));
        }
    } else if (!strcmp(s->event, "state")) {
        if (s->out->mode != CLI_PROGRESS_NONE) {
            cli_progress_clear(s->out);
            fprintf(stderr, "bitflip run: campaign %s\n", json_string_value(json_object_get(j, "state")));
        }
    } else if (!strcmp(s->event, "end")) {
        s->ended = 1;
        const char *st = json_string_value(json_object_get(j, "state")), *v = json_string_value(json_object_get(j, "verdict"));
        snprintf(s->state, sizeof s->state, "%s", st ? st : "");
        snprintf(s->verdict, sizeof s->verdict, "%s", v ? v : "");
        const char *e = json_string_value(json_object_get(j, "error"));
        free(s->error);
        s->error = e ? strdup(e) : NULL;
    }
    json_decref(j);
}

/* One line of the stream (without its newline). */
static void on_line(sse *s, const char *l)
{
    if (!*l) {   /* a blank line ends an event */
        if (s->event[0]) on_event(s);
        if (s->id[0]) snprintf(s->last_id, sizeof s->last_id, "%s", s->id);
        s->id[0] = s->event[0] = '\0';
        s->data.n = 0;
        if (s->data.p) s->data.p[0] = '\0';
        return;
    }
    if (l[0] == ':') return;   /* a heartbeat */
    const char *v = strchr(l, ':');
    if (!v) return;
    size_t kl = (size_t)(v - l);
    v++;
    if (*v == ' ') v++;
    if (kl == 2 && !strncmp(l, "id", 2)) snprintf(s->id, sizeof s->id, "%s", v);
    else if (kl == 5 && !strncmp(l, "event", 5)) snprintf(s->event, sizeof s->event, "%s", v);
    else if (kl == 4 && !strncmp(l, "data", 4)) to_buf((char *)v, 1, strlen(v), &s->data);
}

static size_t on_sse(char *data, size_t size, size_t nmemb, void *user)
{
    sse *s = user;
    size_t n = size * nmemb;
    for (size_t i = 0; i < n; i++) {
        if (data[i] == '\n') {
            if (s->line.n && s->line.p[s->line.n - 1] == '\r') s->line.p[--s->line.n] = '\0';
            on_line(s, s->line.n ? s->line.p : "");
            s->line.n = 0;
            if (s->line.p) s->line.p[0] = '\0';
        } else if (!to_buf(&data[i], 1, 1, &s->line)) {
            return 0;
        }
    }
    return n;
}

static int follow(remote *r, const char *id, sse *s)
{
    char url[2048], auth[256], last[128];
    snprintf(url, sizeof url, "%s/v1/campaigns/%s/events", r->url, id);
    for (int attempt = 0; attempt <= SSE_RETRIES && !s->ended; attempt++) {
        struct curl_slist *hdr = NULL;
        if (r->token) {
            snprintf(auth, sizeof auth, "Authorization: Bearer %s", r->token);
            hdr = r->c.slist_append(hdr, auth);
        }
        if (s->last_id[0]) {
            snprintf(last, sizeof last, "Last-Event-ID: %s", s->last_id);
            hdr = r->c.slist_append(hdr, last);
        }
        r->c.easy_reset(r->h);
        r->c.easy_setopt(r->h, CURLOPT_URL, url);
        r->c.easy_setopt(r->h, CURLOPT_HTTPHEADER, hdr);
        r->c.easy_setopt(r->h, CURLOPT_ERRORBUFFER, r->err);
        r->c.easy_setopt(r->h, CURLOPT_WRITEFUNCTION, on_sse);
        r->c.easy_setopt(r->h, CURLOPT_WRITEDATA, s);
        /* heartbeats come every 15 s: a minute of silence is a dead connection */
        r->c.easy_setopt(r->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        r->c.easy_setopt(r->h, CURLOPT_LOW_SPEED_TIME, 60L);
        CURLcode cc = r->c.easy_perform(r->h);
        r->c.slist_free_all(hdr);
        long status = 0;
        r->c.easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &status);
        if (cc == CURLE_OK && status != 200) {
            buf none = {0};
            return report_http("following the campaign", status, &none);
        }
        if (!s->ended) {
            cli_progress_clear(s->out);
            fprintf(stderr, "bitflip run: event stream interrupted (%s); reconnecting\n",
                    cc != CURLE_OK ? r->c.easy_strerror(cc) : "closed");
            sleep(1);
        }
    }
    if (!s->ended) {
        fprintf(stderr, "bitflip run: lost the event stream of campaign %s; it may still be running (GET /v1/campaigns/%s)\n",
                id, id);
        return EXIT_INFRA;
    }
    return 0;
}

/* --- the run ------------------------------------------------------------- */

int remote_run(const char *url, const char *token, const char *spec_path, const char *out_path, const char *format,
               const char *trials_path, const gate *gates, size_t n_gates, const char *junit_path, cli_progress *prog)
{
    remote r = {.url = url, .token = token};
    json_t *spec = NULL, *camp = NULL, *doc = NULL, *jg = NULL;
    char *mid = NULL, *did = NULL, *body = NULL, *mpath = NULL, *dpath = NULL, *cid = NULL;
    buf out = {0};
    sse s = {0};
    long status = 0;
    int rc = EXIT_INFRA;
    json_error_t je;
    char path[256];

    /* the spec is checked here first, so that its problems read as they do locally */
    bf_campaign_spec parsed = {0};
    if ((rc = load_spec("run", spec_path, NULL, &parsed)) != 0) return rc;
    bf_campaign_spec_free(&parsed);
    rc = EXIT_INFRA;
    if (load_curl(&r.c) != 0) return EXIT_INFRA;
    if (r.c.global_init(CURL_GLOBAL_DEFAULT) != 0 || !(r.h = r.c.easy_init())) {
        fprintf(stderr, "bitflip run: cannot start libcurl\n");
        return EXIT_INFRA;
    }
    spec = json_load_file(spec_path, 0, &je);
    if (!spec) { fprintf(stderr, "bitflip run: %s: %s\n", spec_path, je.text); rc = EXIT_USAGE; goto out; }
    mpath = resolve_input(spec_path, json_string_value(json_object_get(spec, "model")));
    dpath = resolve_input(spec_path, json_string_value(json_object_get(spec, "dataset")));
    if (!mpath || !dpath) { fprintf(stderr, "bitflip run: out of memory\n"); goto out; }
    /* the map first: a missing or refused one stops the run before the big uploads */
    if ((rc = upload_error_map(&r, spec_path, spec)) != 0) goto out;
    if ((rc = upload(&r, "models", mpath, &mid)) != 0) goto out;
    if ((rc = upload(&r, "datasets", dpath, &did)) != 0) goto out;
    json_object_set_new(spec, "model", json_string(mid));
    json_object_set_new(spec, "dataset", json_string(did));
    if (n_gates) {
        jg = json_array();
        for (size_t i = 0; i < n_gates; i++) json_array_append_new(jg, json_string(gates[i].expr));
        json_object_set(spec, "gates", jg);
    }
    body = json_dumps(spec, JSON_COMPACT);
    if (!body) { fprintf(stderr, "bitflip run: out of memory\n"); rc = EXIT_INFRA; goto out; }
    if ((rc = request(&r, "POST", "/v1/campaigns", "application/json", body, strlen(body), NULL, 0, &status, &out)) != 0) goto out;
    if (status != 202) { rc = report_http("submitting the campaign", status, &out); goto out; }
    camp = json_loads(out.p, 0, NULL);
    cid = strdup(json_string_value(json_object_get(camp, "id")) ? json_string_value(json_object_get(camp, "id")) : "");
    if (!cid || !*cid) { fprintf(stderr, "bitflip run: the daemon's reply has no campaign id\n"); rc = EXIT_INFRA; goto out; }
    fprintf(stderr, "bitflip run: campaign %s on %s (%lld trials)\n", cid, url,
            (long long)json_integer_value(json_object_get(json_object_get(camp, "progress"), "trials_planned")));

    s.out = prog;
    s.start = cli_now();
    rc = follow(&r, cid, &s);
    cli_progress_clear(prog);
    if (rc) goto out;
    if (strcmp(s.state, "succeeded")) {
        fprintf(stderr, "bitflip run: campaign %s %s%s%s\n", cid, s.state, s.error ? ": " : "", s.error ? s.error : "");
        rc = EXIT_INFRA;
        goto out;
    }
    snprintf(path, sizeof path, "/v1/campaigns/%s/results", cid);
    out.n = 0;
    if ((rc = request(&r, "GET", path, NULL, NULL, 0, NULL, 0, &status, &out)) != 0) goto out;
    if (status != 200) { rc = report_http("fetching the result", status, &out); goto out; }
    doc = json_loads(out.p, 0, &je);
    if (!doc) { fprintf(stderr, "bitflip run: the result does not parse: %s\n", je.text); rc = EXIT_INFRA; goto out; }
    if (trials_path) {
        snprintf(path, sizeof path, "/v1/campaigns/%s/results?trials=true", cid);
        out.n = 0;
        if ((rc = request(&r, "GET", path, NULL, NULL, 0, NULL, 0, &status, &out)) != 0) goto out;
        if (status != 200) { rc = report_http("fetching the trial records", status, &out); goto out; }
        if ((rc = write_bytes_atomic("run", trials_path, out.p, out.n)) != 0) goto out;
    }
    if ((rc = emit_result("run", doc, out_path, format)) != 0) goto out;
    rc = gates_check("run", doc, gates, n_gates, junit_path);
out:
    json_decref(spec);
    json_decref(camp);
    json_decref(doc);
    json_decref(jg);
    free(mid);
    free(did);
    free(body);
    free(mpath);
    free(dpath);
    free(cid);
    free(out.p);
    free(s.line.p);
    free(s.data.p);
    free(s.error);
    if (r.h) r.c.easy_cleanup(r.h);
    r.c.global_cleanup();
    return rc;
}
