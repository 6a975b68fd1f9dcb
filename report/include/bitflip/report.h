/* libbitflip-report: campaign results (the JSON documents `bitflip run --out`
 * and bitflipd's GET /v2/campaigns/{id}/result write) turned into figures a
 * reviewer reads without the docs. One renderer serves `bitflip report`
 * (HTML, Markdown) and bitflipd's web page (figures as JSON), so the page and
 * the report always show the same pictures.
 *
 * Input documents are only read; a document that is not a result, or lacks
 * the parts a figure needs, leaves that figure out (never a crash), and a
 * document that is no result at all is an error naming it. */
#ifndef BITFLIP_REPORT_H
#define BITFLIP_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bfr_input {
    const json_t *result;   /* one result document */
    const char *label;      /* its name in legends ("clipping", "resnet18"); NULL: derived from the document */
} bfr_input;

/* The figures of n >= 1 results (several are overlaid where a figure allows):
 *   {"headline": "critical rate 4.5% [3.8, 5.2] at 1 bit per trial; ...",
 *    "figures": [{"name": "ber_curve", "title": "...", "alt": "...", "svg": "<svg ...>...</svg>"}, ...]}
 * Each "svg" is a complete standalone SVG document with every piece of user
 * text escaped, no script and no external reference, safe to show in an
 * <img> or inline (its style and classes are all "bfr-" prefixed, so a page
 * keeps its own). "headline", "title" and "alt" are plain text (UTF-8) that may hold
 * user text (tensor names, labels): escape them where they are shown.
 * A figure is left out when no input has what it needs (ber_curve: by_rate;
 * tensors, heatmap: by_tensor (one each per input: tensors_2, heatmap_2...);
 * ivmod_tensors, ivmod_bits: by_tensor[].ivmod and by_bit[].ivmod, detection and
 * segmentation results; mitigation: a paired comparison). Returns a new reference, or NULL with
 * err set. */
json_t *bfr_figures(const bfr_input *in, size_t n, bf_error *err);

/* BF_OK if doc is a result the report reads: what `bitflip run --out` and
 * GET /v1/campaigns/{id}/results give, or the campaign of GET
 * /v1/campaigns/{id} once it has succeeded; else why not, in a message that
 * names it `name` (a file name). */
bf_status bfr_check(const json_t *doc, const char *name, bf_error *err);

typedef enum bfr_format { BFR_HTML, BFR_MARKDOWN } bfr_format;

/* A whole report. HTML: one self-contained file (figures inline as SVG, no
 * script, no network) written to out. Markdown: the text to out and each
 * figure as FIGDIR/NAME.svg, linked relative to figlink (the path from the
 * Markdown file to FIGDIR). */
bf_status bfr_write(const bfr_input *in, size_t n, bfr_format fmt, FILE *out, const char *figdir,
                    const char *figlink, bf_error *err);
/* What a caller may choose (docs/REPORT.md); zeros give the defaults. */
typedef struct bfr_options {
    const char *title;   /* the report's title; NULL: "Fault-injection report" */
    int max_tensors;     /* tensors in the bars and the heatmap's rows, most vulnerable first;
                          * 0: BFR_MAX_TENSORS_DEFAULT, at most BFR_MAX_TENSORS_LIMIT */
    /* figures drawn elsewhere, appended after the others as they are (an
     * array of {name, title, alt, svg}: bfr_trial_figure's), or NULL */
    const json_t *extra_figures;
} bfr_options;
#define BFR_MAX_TENSORS_DEFAULT 20
#define BFR_MAX_TENSORS_LIMIT 500

json_t *bfr_figures_opts(const bfr_input *in, size_t n, const bfr_options *opt, bf_error *err);
bf_status bfr_write_opts(const bfr_input *in, size_t n, bfr_format fmt, const bfr_options *opt, FILE *out,
                         const char *figdir, const char *figlink, bf_error *err);

/* --- a trial's picture: what a fault did to one image ------------------ */

typedef struct bfr_detection {
    float box[4];        /* x0, y0, x1, y1 in the image's pixels */
    long long label;
    float score;
} bfr_detection;

/* The sides of the largest image a picture draws */
#define BFR_PICTURE_MAX_SIDE 4096

typedef struct bfr_trial_view {
    const char *task;          /* "detection" or "segmentation" */
    long long trial, image;    /* which trial, which image of the eval set */
    const char *outcome;       /* the trial's outcome ("critical", ...), or NULL */
    const char *fault;         /* the trial's faults in words (plain text), or NULL */
    /* the image as the eval set holds it: channels (1 or 3) x height x width
     * floats, drawn stretched from its minimum to its maximum */
    const float *pixels;
    int channels, height, width;
    /* detection: the golden and the faulty detections; those scoring over
     * score_threshold (the campaign's critical.score_threshold) are drawn */
    const bfr_detection *golden, *faulty;
    size_t n_golden, n_faulty;
    double score_threshold;
    /* segmentation: class ids per pixel (height x width); 255 is drawn grey */
    const int *golden_mask, *faulty_mask;
} bfr_trial_view;

/* The picture of a trial on an image, {name: "trial", title, alt, svg}:
 * detection, the image twice, with the golden and with the faulty boxes
 * (each labelled with class and score); segmentation, the image and the
 * golden and faulty masks side by side. An SVG as bfr_figures' are (the
 * image a PNG data: URI inside it). NULL with err set on a view that does
 * not hold together (no image, a side over BFR_PICTURE_MAX_SIDE, a task
 * that has no picture). */
json_t *bfr_trial_figure(const bfr_trial_view *v, bf_error *err);

typedef struct bf_model bf_model;
typedef struct bf_dataset bf_dataset;
struct bf_campaign_spec;

typedef struct bfr_trial_req {
    long long trial, image;
    long long trials;    /* the result's trial count, checked against the spec's; < 0: not checked */
} bfr_trial_req;

/* Runs trial req->trial of the campaign `spec` describes (on model m and
 * eval set ds, which it must name) again and draws it on image req->image
 * (bfr_trial_figure). Its faults are the campaign's trial's: they come from
 * the seed and the trial's index alone. Costs a golden pass and one trial on
 * the exact engine, one thread. NULL with err set: BF_ERANGE for a trial or
 * image out of range, BF_EINVAL for a task other than detection and
 * segmentation, a trial count other than req->trials, or outputs that are
 * not a detector's (boxes, scores, labels) or a segmenter's logits. */
json_t *bfr_trial_picture(const bf_model *m, const bf_dataset *ds, const struct bf_campaign_spec *spec, const bfr_trial_req *req,
                          bf_error *err);

#ifdef __cplusplus
}
#endif

#endif
