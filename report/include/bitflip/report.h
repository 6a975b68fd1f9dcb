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
 * mitigation: a paired comparison). Returns a new reference, or NULL with
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
} bfr_options;
#define BFR_MAX_TENSORS_DEFAULT 20
#define BFR_MAX_TENSORS_LIMIT 500

json_t *bfr_figures_opts(const bfr_input *in, size_t n, const bfr_options *opt, bf_error *err);
bf_status bfr_write_opts(const bfr_input *in, size_t n, bfr_format fmt, const bfr_options *opt, FILE *out,
                         const char *figdir, const char *figlink, bf_error *err);

#ifdef __cplusplus
}
#endif

#endif
