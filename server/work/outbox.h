/* bitflipd — the outbox: what an executor has to tell the campaigns (a
 * campaign started, a chunk's progress, a chunk done with its result
 * document, failed or stopped), kept in order until the loop takes it.
 *
 * One outbox, owned by the scheduler (work/scheduler.h) and shared by
 * whichever executor runs: an executor posts from its own callbacks, and
 * the uv_async_send makes the loop take the messages on its next turn,
 * never from inside those callbacks (where the campaign state they change
 * may be half updated). Loop thread only. */
#ifndef BFD_OUTBOX_H
#define BFD_OUTBOX_H

#include <stdint.h>
#include <uv.h>

#include "bitflip/campaign.h"

typedef enum bfd_msg_kind {
    BFD_MSG_STARTED = 0,      /* the campaign's first chunk was taken */
    BFD_MSG_PROGRESS,         /* a chunk's trials so far */
    BFD_MSG_DONE,             /* a chunk finished: result_json */
    BFD_MSG_FAILED,           /* a chunk failed: error (the campaign fails) */
    BFD_MSG_STOPPED           /* a chunk was stopped by cancel or shutdown */
} bfd_msg_kind;

/* A chunk's estimates as its trials come (the progress event's
 * "intervals", docs/SERVICE.md): the critical and DUE rates with their
 * interval (rate, lo, hi), as the result will estimate them, and the
 * largest half-width the stop rule sees overall, over the tensors and over
 * the bits (NAN where that margin is not a stop target). */
typedef struct bfd_intervals {
    int set;
    double critical[3], due[3];
    double half_width[3];   /* overall, per_tensor, per_bit */
} bfd_intervals;

typedef struct bfd_msg {
    bfd_msg_kind kind;
    char id[33];
    int chunk;
    int64_t done;                         /* PROGRESS, DONE: trials of this chunk done */
    int64_t outcomes[BF_OUTCOME_COUNT];   /* ... and their outcomes */
    bfd_intervals iv;                     /* PROGRESS: the chunk's estimates, if the worker sent them */
    char *result_json;                    /* DONE: the chunk's result document */
    char *error;                          /* FAILED */
    double seconds;                       /* DONE: the chunk's run time (-1: not known); STARTED: time queued */
    struct bfd_msg *next;
} bfd_msg;

/* A zeroed message of `kind` for chunk `chunk` of campaign `id` (NULL when
 * out of memory: bfd_outbox_post takes NULL, and the message is lost; the
 * campaign's state is repaired at the next restart). */
bfd_msg *bfd_msg_new(bfd_msg_kind kind, const char *id, int chunk);
/* Frees a list of messages. */
void bfd_msg_free(bfd_msg *list);

typedef struct bfd_outbox {
    bfd_msg *head, *tail;
    uv_async_t *wake;         /* sent at each post */
} bfd_outbox;

void bfd_outbox_init(bfd_outbox *ob, uv_async_t *wake);
/* Appends m (NULL: nothing) and wakes the loop. */
void bfd_outbox_post(bfd_outbox *ob, bfd_msg *m);
/* The messages so far, oldest first; the caller frees them. */
bfd_msg *bfd_outbox_take(bfd_outbox *ob);
/* Frees what was not taken. */
void bfd_outbox_clear(bfd_outbox *ob);

#endif
