/* bitflipd — Server-Sent Events: one stream per client of a campaign's
 * events. A stream is a suspended connection: when it has sent everything
 * there is, its reader suspends it, and a new event (or a heartbeat) resumes
 * it. Events carry `id: <prefix>-<seq>`; a client reconnecting with
 * Last-Event-ID gets the events after it, or the whole log when the id is
 * from another run of the daemon. The stream ends after the `end` event. */
#ifndef BFD_SSE_H
#define BFD_SSE_H

#include "http/http.h"
#include "work/live.h"

/* Replies to r with the stream of camp (which the stream owns when it is
 * not registered). */
void bfd_sse_open(bfd *d, bfd_req *r, bfd_camp *camp);
/* Wakes the campaign's streams (new events). */
void bfd_sse_notify(bfd *d, bfd_camp *camp);
/* A heartbeat to every stream; with `closing`, the streams end. */
void bfd_sse_heartbeat(bfd *d, int closing);
/* The request is finished: detach its stream. */
void bfd_sse_close(bfd *d, bfd_req *r);

#endif
