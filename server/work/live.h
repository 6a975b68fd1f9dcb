/* bitflipd — campaigns in memory: the ones queued or running, and finished
 * ones while an event stream still reads them. Each has its progress, the
 * merged results of its finished chunks, and its event log: what an SSE
 * client replays from its Last-Event-ID. The log keeps every event but
 * progress, of which only the latest is kept (progress is a snapshot, and a
 * long campaign would otherwise pile up thousands). Loop thread only. */
#ifndef BFD_LIVE_H
#define BFD_LIVE_H

#include <jansson.h>

#include "bitflip/api/gate.h"
#include "bitflip/campaign.h"
#include "daemon.h"
#include "work/outbox.h"

typedef struct bfd_event {
    int64_t seq;
    char type[12];            /* state, progress, result, end */
    char *data;               /* compact JSON, one line */
} bfd_event;

typedef struct bfd_sub bfd_sub;

typedef struct bfd_camp {
    char id[33];
    char *tenant;
    bfd_state state;
    int n_chunks;
    int64_t planned;
    unsigned char *chunk_done;
    int64_t (*chunk_prog)[1 + BF_OUTCOME_COUNT];   /* per chunk: trials done, outcomes */
    int chunks_left;
    bf_campaign_result acc;   /* finished chunks merged */
    int have_acc;
    json_t *header;           /* {bitflip, campaign, golden} of the first finished chunk */
    bf_gate *gates;
    size_t n_gates;
    double last_progress;     /* monotonic time of the last progress event */
    bfd_intervals iv;         /* a one-chunk campaign's estimates so far (a chunk's alone say nothing of the whole) */
    char prefix[24];          /* of event ids: the boot number, or "f" for a replay of a finished campaign */
    bfd_event *ev;
    size_t n_ev, cap_ev;
    int64_t next_seq;
    bfd_sub *subs;            /* SSE streams reading this campaign */
    int registered;           /* in the registry (else owned by one stream) */
    struct bfd_camp *next;
} bfd_camp;

struct bfd_live {
    bfd_camp *head;           /* registered campaigns */
    bfd_sub *streams;         /* every SSE stream, for heartbeats and shutdown */
};

bf_status bfd_live_new(bfd_live **out, bf_error *err);
void bfd_live_free(bfd_live *l);
bfd_camp *bfd_live_find(bfd_live *l, const char *id);
/* A campaign from its row (queued or running), registered. */
bfd_camp *bfd_live_add(bfd_live *l, const bfd_campaign_row *row, const char *prefix);
/* An unregistered copy of a finished campaign, its events made from the row
 * (state, result, end), for one stream to replay. */
bfd_camp *bfd_camp_replay(const bfd_campaign_row *row);
/* Unregisters; frees now if no stream reads it, else when the last one goes. */
void bfd_live_drop(bfd *d, bfd_camp *c);
void bfd_camp_free(bfd_camp *c);

/* Appends an event (data stolen) and wakes the campaign's streams. */
void bfd_camp_event(bfd *d, bfd_camp *c, const char *type, json_t *data);
/* {trials_done, trials_planned, fraction, outcomes{...}} */
json_t *bfd_camp_progress(const bfd_camp *c);

#endif
