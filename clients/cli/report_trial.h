/* bitflip report --trial: a trial's picture (report_trial.c). */
#ifndef BF_REPORT_TRIAL_H
#define BF_REPORT_TRIAL_H

#include <jansson.h>

typedef struct report_trial_req {
    const char *spec_path, *result_path;
    long long trial, image;
} report_trial_req;

/* The figure of trial q->trial on image q->image (bfr_trial_figure's);
 * 0, or an exit code having printed why. */
int report_trial_figure(const report_trial_req *q, const json_t *result, json_t **fig);

#endif
