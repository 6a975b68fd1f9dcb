/* Counters and histograms for /metrics, rendered as Prometheus text 0.0.4.
 *
 * Histograms keep per-bucket counts and add them up only when rendered, so an
 * observation is one increment. HTTP counters live in a table kept sorted by
 * (route, code): lookups are a binary search and the exposition comes out in
 * a stable order, which scrapers do not need but diffs and tests do.
 * Numbers are printed with printf, whose decimal point is the locale's: the
 * daemon never calls setlocale, so it is ".". */
#include "metrics.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"   /* bfd_state, for the order of `campaigns` */

#define HIST_MAX_BOUNDS 7

typedef struct hist {
    const double *le;                        /* upper bounds, ascending; +Inf implied */
    int n_le;
    int64_t bucket[HIST_MAX_BOUNDS + 1];     /* per bucket, not cumulative; [n_le] is +Inf */
    double sum;
    int64_t count;
} hist;

typedef struct http_series {
    char *route;
    int code;
    int64_t n;
} http_series;

struct bfd_metrics {
    pthread_mutex_t mu;
    int64_t outcomes[BF_OUTCOME_COUNT];
    hist trial, wait;
    http_series *http;                       /* sorted by (route, code) */
    size_t n_http, cap_http;
    int64_t sse;
    int64_t worker_deaths;
};

static const double trial_le[] = {1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10};
static const double wait_le[] = {0.01, 0.1, 1, 10, 60, 600, 3600};
_Static_assert(sizeof trial_le / sizeof trial_le[0] <= HIST_MAX_BOUNDS, "hist.bucket too small");
_Static_assert(sizeof wait_le / sizeof wait_le[0] <= HIST_MAX_BOUNDS, "hist.bucket too small");

/* The API's names (bfd_state_name), indexed by the enum so a reordering of
 * bfd_state cannot mislabel; repeated here so metrics links without the store. */
_Static_assert(BFD_STATE_COUNT == 5, "bfd_metrics_render takes campaigns[5]");
static const char *const state_names[BFD_STATE_COUNT] = {
    [BFD_QUEUED] = "queued",       [BFD_RUNNING] = "running", [BFD_SUCCEEDED] = "succeeded",
    [BFD_FAILED] = "failed",       [BFD_CANCELED] = "canceled",
};

bf_status bfd_metrics_new(bfd_metrics **out, bf_error *err)
{
    bfd_metrics *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m) return bf_error_set(err, BF_ENOMEM, "metrics: out of memory");
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        return bf_error_set(err, BF_ENOMEM, "metrics: cannot create a mutex");
    }
    m->trial.le = trial_le;
    m->trial.n_le = (int)(sizeof trial_le / sizeof trial_le[0]);
    m->wait.le = wait_le;
    m->wait.n_le = (int)(sizeof wait_le / sizeof wait_le[0]);
    *out = m;
    return BF_OK;
}

void bfd_metrics_free(bfd_metrics *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_http; i++) free(m->http[i].route);
    free(m->http);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* --- recording */

static void hist_add(bfd_metrics *m, hist *h, double v, int64_t count)
{
    /* NaN or Inf would poison _sum for good; nothing to learn from them. */
    if (count <= 0 || !isfinite(v)) return;
    /* A negative duration is a clock step; counting it as 0 keeps _sum from
     * decreasing, which Prometheus would read as a counter reset. */
    if (v < 0) v = 0;
    int b = 0;
    while (b < h->n_le && v > h->le[b]) b++;   /* le is inclusive: v <= le */
    pthread_mutex_lock(&m->mu);
    h->bucket[b] += count;
    h->sum += v * (double)count;
    h->count += count;
    pthread_mutex_unlock(&m->mu);
}

void bfd_metrics_trial_seconds(bfd_metrics *m, double seconds_each, int64_t count)
{
    hist_add(m, &m->trial, seconds_each, count);
}

void bfd_metrics_queue_wait(bfd_metrics *m, double seconds)
{
    hist_add(m, &m->wait, seconds, 1);
}

void bfd_metrics_outcomes(bfd_metrics *m, const int64_t n[BF_OUTCOME_COUNT])
{
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < BF_OUTCOME_COUNT; i++) m->outcomes[i] += n[i];
    pthread_mutex_unlock(&m->mu);
}

void bfd_metrics_sse(bfd_metrics *m, int delta)
{
    pthread_mutex_lock(&m->mu);
    m->sse += delta;
    pthread_mutex_unlock(&m->mu);
}

void bfd_metrics_worker_death(bfd_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->worker_deaths++;
    pthread_mutex_unlock(&m->mu);
}

static int series_cmp(const http_series *s, const char *route, int code)
{
    int c = strcmp(s->route, route);
    return c != 0 ? c : (s->code > code) - (s->code < code);
}

/* A request that cannot be counted (no memory for a new series) is dropped:
 * a lost sample is better than failing the request it describes. */
void bfd_metrics_http(bfd_metrics *m, const char *route, int code)
{
    char *copy = NULL;
    if (!route) route = "other";
    pthread_mutex_lock(&m->mu);
    size_t lo = 0, hi = m->n_http;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = series_cmp(&m->http[mid], route, code);
        if (c == 0) {
            m->http[mid].n++;
            goto out;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    if (m->n_http == m->cap_http) {
        size_t cap = m->cap_http ? 2 * m->cap_http : 16;
        http_series *grown = realloc(m->http, cap * sizeof *grown);
        if (!grown) goto out;
        m->http = grown;
        m->cap_http = cap;
    }
    copy = strdup(route);
    if (!copy) goto out;
    memmove(&m->http[lo + 1], &m->http[lo], (m->n_http - lo) * sizeof *m->http);
    m->http[lo] = (http_series){.route = copy, .code = code, .n = 1};
    m->n_http++;
    copy = NULL;
out:
    pthread_mutex_unlock(&m->mu);
    free(copy);
}

/* --- rendering */

typedef struct buf {
    char *p;
    size_t len, cap;
    int oom;           /* sticky: once set, further appends do nothing */
} buf;

static void put(buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void put(buf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len <= (size_t)n) cap *= 2;
        char *grown = realloc(b->p, cap);
        if (!grown) {
            b->oom = 1;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
}

/* A label value between its quotes: the format escapes exactly these three. */
static void put_label_value(buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\') put(b, "\\\\");
        else if (*s == '"') put(b, "\\\"");
        else if (*s == '\n') put(b, "\\n");
        else put(b, "%c", *s);
    }
}

/* The shortest decimal that reads back as the same double, so 3 x 0.002 prints
 * as 0.006 rather than %.17g's 0.0060000000000000001; at least 6 digits of
 * precision so that 10 is "10", not "1e+01" (as Go's client prints bounds). A
 * value exact in P <= 6 digits rounds to the same digits at 6. */
static void put_double(buf *b, double v)
{
    char s[32];
    if (isnan(v)) {
        put(b, "NaN");
        return;
    }
    if (isinf(v)) {
        put(b, "%s", v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v) break;
    }
    put(b, "%s", s);
}

static void family(buf *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_hist(buf *b, const char *name, const char *help, const hist *h)
{
    int64_t cum = 0;
    family(b, name, "histogram", help);
    for (int i = 0; i < h->n_le; i++) {
        cum += h->bucket[i];
        put(b, "%s_bucket{le=\"", name);
        put_double(b, h->le[i]);
        put(b, "\"} %" PRId64 "\n", cum);
    }
    cum += h->bucket[h->n_le];
    put(b, "%s_bucket{le=\"+Inf\"} %" PRId64 "\n", name, cum);
    put(b, "%s_sum ", name);
    put_double(b, h->sum);
    put(b, "\n%s_count %" PRId64 "\n", name, h->count);
}

/* Formats under the lock: a scrape is a few KB of printf, and a consistent
 * snapshot (every _bucket{le="+Inf"} equal to its _count) is worth the
 * microseconds a worker may wait for it. */
char *bfd_metrics_render(bfd_metrics *m, const int64_t campaigns[5], const char *version, const char *commit)
{
    buf b = {0};
    pthread_mutex_lock(&m->mu);

    family(&b, "bitflip_campaigns", "gauge", "Campaigns in the store, by state.");
    for (int i = 0; i < BFD_STATE_COUNT; i++)
        put(&b, "bitflip_campaigns{state=\"%s\"} %" PRId64 "\n", state_names[i], campaigns ? campaigns[i] : 0);

    family(&b, "bitflip_trials_total", "counter", "Trials finished since start, by outcome.");
    for (int i = 0; i < BF_OUTCOME_COUNT; i++)
        put(&b, "bitflip_trials_total{outcome=\"%s\"} %" PRId64 "\n", bf_outcome_name((bf_outcome)i),
            m->outcomes[i]);

    put_hist(&b, "bitflip_trial_duration_seconds", "Wall time of one trial (the mean over its chunk).", &m->trial);
    put_hist(&b, "bitflip_queue_wait_seconds", "Time from a campaign's submission to its first chunk.", &m->wait);

    family(&b, "bitflip_http_requests_total", "counter", "HTTP requests answered, by route template and status code.");
    for (size_t i = 0; i < m->n_http; i++) {
        put(&b, "bitflip_http_requests_total{route=\"");
        put_label_value(&b, m->http[i].route);
        put(&b, "\",code=\"%d\"} %" PRId64 "\n", m->http[i].code, m->http[i].n);
    }

    family(&b, "bitflip_sse_clients", "gauge", "Event streams open now.");
    put(&b, "bitflip_sse_clients %" PRId64 "\n", m->sse);

    family(&b, "bitflip_worker_deaths_total", "counter",
           "Worker processes that died (a signal, or killed for a malformed message) while running a chunk.");
    put(&b, "bitflip_worker_deaths_total %" PRId64 "\n", m->worker_deaths);

    family(&b, "bitflip_build_info", "gauge", "Version and commit of this bitflipd; always 1.");
    put(&b, "bitflip_build_info{version=\"");
    put_label_value(&b, version ? version : "unknown");
    put(&b, "\",commit=\"");
    put_label_value(&b, commit ? commit : "unknown");
    put(&b, "\"} 1\n");

    pthread_mutex_unlock(&m->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
