/* bitflipd — counters and histograms for /metrics, rendered in the
 * Prometheus text exposition format (version 0.0.4). Every function may be
 * called from any thread (one mutex inside; each call is a few adds). */
#ifndef BFD_METRICS_H
#define BFD_METRICS_H

#include <stdint.h>

#include "bitflip/campaign.h"
#include "bitflip/error.h"

typedef struct bfd_metrics bfd_metrics;

bf_status bfd_metrics_new(bfd_metrics **out, bf_error *err);
void bfd_metrics_free(bfd_metrics *m);

/* One finished HTTP request; `route` is the route template
 * ("/v1/campaigns/{id}"; "other" for unrouted paths) so label sets stay few. */
void bfd_metrics_http(bfd_metrics *m, const char *route, int code);
/* Trials finished, by outcome (adds). */
void bfd_metrics_outcomes(bfd_metrics *m, const int64_t n[BF_OUTCOME_COUNT]);
/* `count` trials that took `seconds_each` each (a chunk's mean). */
void bfd_metrics_trial_seconds(bfd_metrics *m, double seconds_each, int64_t count);
/* A campaign waited this long from submission to its first chunk. */
void bfd_metrics_queue_wait(bfd_metrics *m, double seconds);
/* SSE clients connected now: +1 on open, -1 on close. */
void bfd_metrics_sse(bfd_metrics *m, int delta);
/* A worker process died while running a chunk. */
void bfd_metrics_worker_death(bfd_metrics *m);

/* The whole exposition (malloc'd; NULL when out of memory):
 *   bitflip_campaigns{state}            gauge, from `campaigns` (by bfd_state)
 *   bitflip_trials_total{outcome}       counter
 *   bitflip_trial_duration_seconds      histogram
 *   bitflip_queue_wait_seconds          histogram
 *   bitflip_http_requests_total{route,code}  counter
 *   bitflip_sse_clients                 gauge
 *   bitflip_worker_deaths_total         counter
 *   bitflip_build_info{version,commit}  gauge, always 1
 * with # HELP and # TYPE lines; label values escaped as the format says. */
char *bfd_metrics_render(bfd_metrics *m, const int64_t campaigns[5], const char *version, const char *commit);

#endif
