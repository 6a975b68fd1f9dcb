/* bitflipd — the deep check of an upload, in a child process (proc.h):
 * the engine loads the stored file and summarises it, under the job memory
 * limit, so that a file crafted to crash or exhaust the parser costs that
 * child and the upload gets a 422. A submitted campaign is checked the same
 * way before it is queued: what running it will hold, from shapes, against
 * the job memory limit. Loop thread only. */
#ifndef BFD_CHECK_H
#define BFD_CHECK_H

#include "daemon.h"

typedef struct bfd_check_result {
    bf_status st;             /* BF_OK: summary; else why says what is wrong */
    char *summary;            /* JSON text, malloc'd, the callback's to keep or free */
    int refused;              /* the engine or the limit refused the file (a 422), vs. the check could not run */
    int over_limit;           /* a campaign that needs more than the job memory limit (why says how much, and where) */
    int out_of_range;         /* a picture's trial or image out of range (a 400) */
    char why[768];            /* for the reply: the engine's message, or what happened to the parser */
} bfd_check_result;

typedef void (*bfd_check_done)(void *user, bfd_check_result *res);

/* Starts checking the model, dataset or error map (kind: BFD_MODEL,
 * BFD_DATASET, BFD_ERRMAP; res->summary the bf_*_summary object) at
 * `path`; `done` is called once, later, on the loop. */
bf_status bfd_check_start(bfd *d, int kind, const char *path, bfd_check_done done, void *user, bf_error *err);

/* Starts checking a campaign: the spec (JSON text, as stored) against the
 * model and eval set at these blob paths (and the error map of a profiled
 * campaign; NULL otherwise), and bf_campaign_estimate's total
 * for one worker against --job-memory. On success res->summary is
 * {"bytes": N} (N: the estimate; null when the model's shapes cannot be
 * sized up front); a campaign over the limit is refused with over_limit
 * set and why naming the bytes and the largest buffer's node and op. */
bf_status bfd_check_campaign_start(bfd *d, const char *model_path, const char *dataset_path, const char *errmap_path,
                                   const char *spec_json, bfd_check_done done, void *user, bf_error *err);

/* Starts drawing a trial's picture (libbitflip-report's bfr_trial_picture)
 * in a child: the campaign of spec_json (as stored) on the model and eval
 * set at these blob paths, trial `trial` run again and drawn on image
 * `image`; `trials` is the result's trial count. On success res->summary is
 * the figure {name, title, alt, svg}; out_of_range set for a trial or image
 * out of range, refused for a campaign it cannot draw (why says why). */
bf_status bfd_picture_start(bfd *d, const char *model_path, const char *dataset_path, const char *spec_json, int64_t trial,
                            int64_t image, int64_t trials, bfd_check_done done, void *user, bf_error *err);

#endif
