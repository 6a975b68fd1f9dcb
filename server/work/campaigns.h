/* bitflipd — the loop's side of campaigns: start (new or resumed after a
 * restart), follow the workers' messages, checkpoint finished chunks,
 * merge them, finish (result, verdict, events), cancel. Loop thread only. */
#ifndef BFD_CAMPAIGNS_H
#define BFD_CAMPAIGNS_H

#include <jansson.h>

#include "daemon.h"
#include "work/live.h"

/* Puts every queued or running campaign of the store back on the
 * scheduler, with the chunks their checkpoints do not cover. */
bf_status bfd_campaigns_resume(bfd *d, bf_error *err);
/* A new campaign (already inserted in the store, queued). */
bf_status bfd_campaigns_start(bfd *d, const bfd_campaign_row *row, bf_error *err);
/* The uv_async callback: drains the scheduler's outbox. */
void bfd_campaigns_on_wake(uv_async_t *a);
/* Cancels a queued or running campaign: state canceled now, its running
 * chunks stop within a trial. */
void bfd_campaigns_cancel(bfd *d, bfd_camp *c);

/* The API's campaign object (see api/openapi.yaml). */
json_t *bfd_campaign_json(bfd *d, const bfd_campaign_row *row, int with_result);
/* RFC 3339 UTC of unix seconds; null for 0. */
json_t *bfd_time_json(double t);
/* DIR/trials/<id> (malloc'd). */
char *bfd_trials_dir(const bfd *d, const char *id);

#endif
