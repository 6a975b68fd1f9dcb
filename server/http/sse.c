/* Event streams: suspended connections fed from a campaign's event log. */
#include "http/sse.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bfd_sub {
    bfd *d;
    bfd_req *r;
    bfd_camp *camp;
    int64_t last_seq;         /* sent up to here */
    char *out;                /* formatted, not yet sent */
    size_t out_len, out_off, out_cap;
    int heartbeat, closing, ended, suspended;
    bfd_sub *next_in_camp;
    bfd_sub *prev, *next;     /* bfd_live.streams */
};

static int out_add(bfd_sub *s, const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c);
    if (s->out_off == s->out_len) s->out_off = s->out_len = 0;
    if (s->out_len + n + 1 > s->out_cap) {
        size_t cap = (s->out_len + n + 1) * 2;
        char *o = realloc(s->out, cap);
        if (!o) return -1;
        s->out = o;
        s->out_cap = cap;
    }
    s->out_len += (size_t)sprintf(s->out + s->out_len, "%s%s%s", a, b, c);
    return 0;
}

/* Formats the events after last_seq (and a pending heartbeat). */
static void refill(bfd_sub *s)
{
    bfd_camp *c = s->camp;
    for (size_t i = 0; i < c->n_ev; i++) {
        const bfd_event *e = &c->ev[i];
        if (e->seq <= s->last_seq) continue;
        char head[96];
        snprintf(head, sizeof head, "id: %s-%lld\nevent: %s\ndata: ", c->prefix, (long long)e->seq, e->type);
        if (out_add(s, head, e->data, "\n\n") != 0) return;
        s->last_seq = e->seq;
        if (!strcmp(e->type, "end")) s->ended = 1;
    }
    if (s->heartbeat && s->out_off == s->out_len) {
        if (out_add(s, ": heartbeat\n\n", "", "") == 0) s->heartbeat = 0;
    } else {
        s->heartbeat = 0;   /* data is going out anyway */
    }
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    bfd_sub *s = cls;
    if (s->out_off == s->out_len && !s->closing) refill(s);
    if (s->out_off < s->out_len) {
        size_t n = s->out_len - s->out_off;
        if (n > max) n = max;
        memcpy(buf, s->out + s->out_off, n);
        s->out_off += n;
        return (ssize_t)n;
    }
    if (s->ended || s->closing) return MHD_CONTENT_READER_END_OF_STREAM;
    /* nothing to say: sleep until an event or a heartbeat resumes us */
    MHD_suspend_connection(s->r->conn);
    s->suspended = 1;
    return 0;
}

static void wake(bfd_sub *s)
{
    if (!s->suspended) return;
    s->suspended = 0;
    MHD_resume_connection(s->r->conn);
    bfd_http_kick(s->d);
}

void bfd_sse_open(bfd *d, bfd_req *r, bfd_camp *camp)
{
    bfd_sub *s = calloc(1, sizeof *s);
    if (!s) {
        if (!camp->registered) bfd_camp_free(camp);
        bfd_reply_problem(r, 500, NULL, "out of memory opening the event stream");
        return;
    }
    s->d = d;
    s->r = r;
    s->camp = camp;
    const char *last = bfd_req_header(r, "Last-Event-ID");
    if (last) {
        /* "<prefix>-<seq>": a position in this log; from another run, replay all */
        const char *dash = strrchr(last, '-');
        size_t pl = strlen(camp->prefix);
        if (dash && (size_t)(dash - last) == pl && !strncmp(last, camp->prefix, pl)) s->last_seq = strtoll(dash + 1, NULL, 10);
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, s, NULL);
    if (!resp) {
        free(s);
        if (!camp->registered) bfd_camp_free(camp);
        bfd_reply_problem(r, 500, NULL, "out of memory opening the event stream");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");   /* proxies: do not hold events back */
    r->reply = resp;
    r->reply_status = 200;
    r->sse = (bfd_sse *)s;
    s->next_in_camp = camp->subs;
    camp->subs = s;
    s->next = d->live->streams;
    if (s->next) s->next->prev = s;
    d->live->streams = s;
    bfd_metrics_sse(d->metrics, +1);
}

void bfd_sse_notify(bfd *d, bfd_camp *camp)
{
    (void)d;
    for (bfd_sub *s = camp->subs; s; s = s->next_in_camp) wake(s);
}

void bfd_sse_heartbeat(bfd *d, int closing)
{
    for (bfd_sub *s = d->live->streams; s; s = s->next) {
        if (closing) s->closing = 1;
        else s->heartbeat = 1;
        wake(s);
    }
}

void bfd_sse_close(bfd *d, bfd_req *r)
{
    bfd_sub *s = (bfd_sub *)r->sse;
    r->sse = NULL;
    if (!s) return;
    bfd_camp *c = s->camp;
    for (bfd_sub **p = &c->subs; *p; p = &(*p)->next_in_camp)
        if (*p == s) { *p = s->next_in_camp; break; }
    if (s->prev) s->prev->next = s->next;
    else d->live->streams = s->next;
    if (s->next) s->next->prev = s->prev;
    if (!c->registered && !c->subs) bfd_camp_free(c);
    bfd_metrics_sse(d->metrics, -1);
    free(s->out);
    free(s);
}
