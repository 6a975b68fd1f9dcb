/* bitflip-conformance's matching of computed outputs against a reference's
 * JSON rows (conformance.c's header comment; tests/fixtures/README.md,
 * "Matching for detection" and "Ties at the cut"). */
#ifndef BF_CONF_MATCH_H
#define BF_CONF_MATCH_H

#include <jansson.h>
#include <stdint.h>

#include "bitflip/eval.h"

#define ATOL 1e-5
#define RTOL 1e-4
/* The outputs of a one-image graph whose checked and unverifiable values are
 * counted one by one (a detector has at most five: Keypoint R-CNN's); those
 * past it share the last count. */
#define CONF_OUTS 8
/* Defaults of --max-widen and --max-unverifiable (tests/fixtures/README.md,
 * "Values no rounding decides"): a reference's scale may widen a value's
 * tolerance up to 100 times its row's (torchvision's BoxCoder clamps dw at
 * log(1000/16), so a proposal corner's rounding reaches a decoded corner at
 * most ~62.5 times: Keypoint R-CNN's sliver measured 63); past that the value
 * is unverifiable, and an output with more than 1% of its values so is not
 * verified. */
#define CONF_MAX_WIDEN 100.0
#define CONF_MAX_UNVERIFIABLE 0.01

typedef struct cmp {
    int64_t bad;          /* values out of tolerance */
    double worst;         /* max |a-b| / max(ATOL, RTOL|b|) */
    int64_t first_bad;    /* flat index of the first bad value, or -1 */
    double first_got, first_want;
    int format_error;
    int64_t tied, unverified;   /* rows under the reference's "ties"; of those, boxes not found in ours */
    int ties_malformed;         /* its "ties" field is not of the README's shape */
    int64_t inferred;           /* of tied: rows under the rule without "ties" (the group ending a full list) */
    int64_t nms_images, nms_rows;   /* images cut at an NMS near tie (conf_ties.cut), rows after the cuts unverifiable */
    int64_t nms_checked;            /* rows after the cuts matched outside the near ties' regions */
    int64_t cut_at[4][2];           /* the first four cuts: image, row */
    int scale_malformed;            /* its "golden_scale" / a fault's "scale" is not of the README's shape */
    int64_t scaled;                 /* values whose tolerance the reference's scale widened past the row's */
    int64_t rescued;                /* of those, values past the row's own tolerance and within the scale's */
    double gain;                    /* the largest widening of a checked value's tolerance by its scale */
    /* Values compared in place or in a matched row (checked), and values whose
     * scale widened their tolerance past conf_limits.max_widen (unverifiable:
     * not compared), in all and per output (in the graph's order) */
    int64_t checked, unverif;
    int64_t out_checked[CONF_OUTS], out_unverif[CONF_OUTS];
    int not_verified;               /* an output's unverifiable share is over conf_limits.max_share (its index + 1) */
} cmp;

/* What says which rows of a one-image graph tie: the reference's "ties"
 * (golden only), or, where it has none, the group of equal scores that ends
 * a full list (tests/fixtures/README.md, "Ties at the cut"). */
/* nms_cuts' result per image (tests/fixtures/README.md, "NMS near-ties"). */
typedef struct nms_cut {
    int64_t row;          /* rows before it checked in place; -1: no cut */
    int fine;             /* the rows after it: those outside the region matched as a set (1), or all unverifiable (0) */
    int64_t n_region;     /* the scores of the candidates whose fate another engine may decide otherwise */
    float *region;        /* (bf_nms_ties_region), copied */
} nms_cut;

/* What a value's scale may widen and how much of an output may stay
 * unverifiable (--max-widen, --max-unverifiable): the run's, one place
 * (bitflip-conformance's main) that every conf_ties points at. */
typedef struct conf_limits {
    /* Past this widening of its tolerance (the scale's over the row's) a
     * value is unverifiable, counted and not compared; 0: no limit. And the
     * share of an output's values past which the list is not verified. */
    double max_widen, max_share;
} conf_limits;

typedef struct conf_ties {
    const json_t *ties;   /* the reference's "ties", or NULL */
    const char *score;    /* the graph's one float32 [K] output (the scores), or NULL: no inferred ties */
    int64_t cap;          /* the most rows any image has anywhere in the reference (a full list) */
    /* per image, the row where our NMS took a decision within rounding
     * (nms_cuts): rows before it are checked in place, the rest of the
     * image (ours and the reference's) is unverifiable; -1 none. NULL: no
     * image has one. */
    const nms_cut *cut;
    /* The reference's per-value scales for the list compared ("golden_scale",
     * a fault's "scale": a list per image of {output: rows}, each value the
     * magnitude its tolerance is taken of where larger than its row's;
     * tests/fixtures/README.md, "Scales from the decode"), or NULL: the
     * rows' own scale alone. */
    const json_t *scale;
    const conf_limits *lim;   /* the run's limits; never NULL */
} conf_ties;

/* A JSON number, or one of the strings standing for non-finite values. */
int json_to_double(const json_t *j, double *out);

/* Rows [0, rows) of ours (cols each) against ref's rows; stride as in
 * conf_match.c. */
cmp compare_rows(const float *ours, int64_t cols, const json_t *ref, int64_t rows, int64_t stride);

/* A one-image graph's outputs against the reference's list of per-image
 * objects; *rows_bad is the first image whose row count differs (or -1). */
cmp compare_ragged(const bf_ragged_output *outs, size_t n_outs, const json_t *ref, int64_t n, int64_t *rows_bad,
                   const char **out_bad, const conf_ties *tc);

/* Per image of a one-image graph's run, where its rows stop being
 * verifiable in place (docs/OPS.md, "NMS near-ties"): the record says our
 * last NMS took a decision within rounding at score T (the first in score
 * order): the first row, ours or the reference's (each in output order),
 * whose score (output `score`) is <= T plus the score tolerance, and the
 * rows after it are matched outside the record's region (fine); an earlier
 * NMS (a detector's proposals), or no score output: row 0, every row
 * unverifiable. *out: NULL when no image has one, else n cuts (row -1:
 * none; nms_cuts_free). Returns 0 out of memory. */
struct bf_nms_ties;
int nms_cuts(const struct bf_nms_ties *t, const bf_ragged_output *outs, size_t n_outs, const json_t *ref, int64_t n,
             const char *score, nms_cut **out);
void nms_cuts_free(nms_cut *c, int64_t n);

/* print_cmp_ragged prints the outputs' names from outs (the run compared). */
void print_cmp_ragged(const cmp *c, int64_t rows_bad, const char *out_bad, const bf_ragged_output *outs, size_t n_outs,
                      const conf_ties *tc);
void print_cmp(const cmp *c, int64_t cols);

/* The name of m's one float32 output of rank 1 (a detector's scores), or
 * NULL when it has none or several. */
struct bf_model;
const char *score_output(const struct bf_model *m);

/* The most rows of output `name` any image has in the golden list or in a
 * fault's outputs (the first n_ref images). */
int64_t ref_row_cap(const json_t *ref, const char *name);

#endif
