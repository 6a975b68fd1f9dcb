/* bitflip-conformance's matching (conf_match.h): values within
 * max(ATOL, RTOL |ref|), a detection's box or mask as one row, and the rows
 * of a one-image graph tied at a cut among equal scores matched as a set
 * (tests/fixtures/README.md, "Ties at the cut"). */
#include "conf_match.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/bitflip.h"

/* A JSON number, or one of the strings standing for non-finite values. */
int json_to_double(const json_t *j, double *out)
{
    if (json_is_number(j)) { *out = json_number_value(j); return 1; }
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        if (!strcmp(s, "NaN")) { *out = NAN; return 1; }
        if (!strcmp(s, "Infinity")) { *out = INFINITY; return 1; }
        if (!strcmp(s, "-Infinity")) { *out = -INFINITY; return 1; }
    }
    return 0;
}

/* Compares rows [0, rows) of ours (cols per row) with ref, a JSON array of
 * rows (arrays) or of numbers when cols == 1. stride: 0, each value's
 * relative tolerance is of the value itself; k > 0, of the largest finite
 * magnitude among the row's values whose index is the same modulo k. 1 makes
 * the whole row one object (a detection's box or mask: see compare_ragged);
 * H·W makes each pixel's C class logits one (a segmenter's [C, H, W] row:
 * see seg_plane). */
static cmp rows_scaled(const float *ours, int64_t cols, const json_t *ref, int64_t rows, int64_t stride,
                       const json_t *scales, double max_widen);

cmp compare_rows(const float *ours, int64_t cols, const json_t *ref, int64_t rows, int64_t stride)
{
    return rows_scaled(ours, cols, ref, rows, stride, NULL, 0);
}

/* The scale of value j of a row of the reference's scales (a row of cols
 * values, or one number when cols == 1; scale_ok checked its shape), or 0. */
static double scale_at(const json_t *srow, int64_t j)
{
    double s = 0;
    if (!srow || !json_to_double(json_is_array(srow) ? json_array_get(srow, (size_t)j) : srow, &s) || !(s > 0)) return 0;
    return s;
}

/* compare_rows, each value's magnitude raised to its scale where the
 * reference gives one larger (scale: the rows of per-value scales, or
 * NULL; tests/fixtures/README.md, "Scales from the decode"): the value is
 * computed from inputs known to their own tolerance through a computation
 * whose gain the row's magnitude does not show (a sliver proposal's width
 * multiplied by the box decode's exp(dw)). Counts in c.scaled the values
 * the scale widened, in c.rescued those it alone passed. A value whose
 * tolerance the scale widens more than max_widen times (when > 0) is
 * checked against its row's own tolerance alone (within it, it agrees as
 * any value without a scale does); outside it, it is counted in c.unverif,
 * neither passed nor failed: its reference moves that far when its
 * inputs move within their own tolerance, which is a jump (an arg-max among
 * flat maxima, a pasted mask's edge pixel), not a rounding carried through a
 * smooth computation, so no engine's value can be told right or wrong
 * there (tests/fixtures/README.md, "Values no rounding decides"). */
static cmp rows_scaled(const float *ours, int64_t cols, const json_t *ref, int64_t rows, int64_t stride,
                       const json_t *scales, double max_widen)
{
    cmp c = {.first_bad = -1};
    if (!json_is_array(ref) || (int64_t)json_array_size(ref) < rows) { c.format_error = 1; return c; }
    if (stride < 0 || stride > cols) stride = 0;
    double *scale = stride ? calloc((size_t)stride, sizeof *scale) : NULL;
    if (stride && !scale) { c.format_error = 1; return c; }
    for (int64_t i = 0; i < rows && !c.format_error; i++) {
        const json_t *row = json_array_get(ref, (size_t)i), *srow = scales ? json_array_get(scales, (size_t)i) : NULL;
        int is_row = json_is_array(row);
        if ((is_row && (int64_t)json_array_size(row) != cols) || (!is_row && cols != 1)) { c.format_error = 1; break; }
        for (int64_t j = 0; j < stride; j++) scale[j] = 0;
        for (int64_t j = 0; stride && j < cols; j++) {
            double want;
            if (!json_to_double(is_row ? json_array_get(row, (size_t)j) : row, &want)) { c.format_error = 1; break; }
            if (isfinite(want) && fabs(want) > scale[j % stride]) scale[j % stride] = fabs(want);
        }
        for (int64_t j = 0; j < cols && !c.format_error; j++) {
            double want, got = ours[i * cols + j];
            if (!json_to_double(is_row ? json_array_get(row, (size_t)j) : row, &want)) { c.format_error = 1; break; }
            double r;
            if (isnan(want) || isnan(got) || isinf(want) || isinf(got))
                r = (isnan(want) && isnan(got)) || (want == got) ? 0 : INFINITY;
            else {
                double mag = stride && scale[j % stride] > fabs(want) ? scale[j % stride] : fabs(want);
                double tol = mag * RTOL > ATOL ? mag * RTOL : ATOL;
                double s = scale_at(srow, j);
                r = fabs(got - want) / tol;
                if (s > mag) {   /* the decode's conditioning: the tolerance of what the value is computed from */
                    double t = s * RTOL > ATOL ? s * RTOL : ATOL;
                    if (max_widen > 0 && t > max_widen * tol) {
                        /* within its row's own tolerance it is checked as
                         * any value without a scale is (and passes); past
                         * it, no tolerance short of the jump's can judge it */
                        if (r > 1) { c.unverif++; continue; }
                    } else {
                        c.scaled++;
                        if (t / tol > c.gain) c.gain = t / tol;
                        if (r > 1 && fabs(got - want) <= t) c.rescued++;
                        r = fabs(got - want) / t;
                    }
                }
            }
            c.checked++;
            if (r > c.worst) c.worst = r;
            if (r > 1) {
                if (c.first_bad < 0) { c.first_bad = i * cols + j; c.first_got = got; c.first_want = want; }
                c.bad++;
            }
        }
    }
    free(scale);
    return c;
}

/* One row of ours against one reference row, as compare_rows checks rows;
 * srow its row of scales (rows_scaled, with tc's max_widen), or NULL. */
static cmp row_cmp(const float *ours, int64_t cols, const json_t *want, const json_t *srow, const conf_ties *tc)
{
    cmp c = {.first_bad = -1};
    json_t *one = json_array(), *sone = srow ? json_array() : NULL;
    if (!one || json_array_append(one, (json_t *)want) || (srow && (!sone || json_array_append(sone, (json_t *)srow)))) {
        json_decref(one);
        json_decref(sone);
        c.format_error = 1;
        return c;
    }
    c = rows_scaled(ours, cols, one, 1, cols > 1 ? 1 : 0, sone, tc ? tc->lim->max_widen : 0);
    json_decref(one);
    json_decref(sone);
    return c;
}

/* Output name's rows of scales for sample i (conf_ties.scale), or NULL. */
static const json_t *scale_rows(const conf_ties *tc, int64_t i, const char *name)
{
    return tc && tc->scale ? json_object_get(json_array_get(tc->scale, (size_t)i), name) : NULL;
}

/* Row r of output name's scales for sample i, or NULL. */
static const json_t *scale_row(const conf_ties *tc, int64_t i, const char *name, int64_t r)
{
    const json_t *s = scale_rows(tc, i, name);
    return s ? json_array_get(s, (size_t)r) : NULL;
}

/* Sample i's scales (tests/fixtures/README.md, "Scales from the decode"):
 * an object whose every key names an output of ours, each a list with a
 * row per reference row of that output, a row as long as ours (one number
 * for a row of one value), every scale a finite number >= 0. Another shape
 * is the reference's error, never read as no scales. */
static int scale_ok(const json_t *sobj, const json_t *obj, const bf_ragged_output *outs, size_t n_outs)
{
    const char *key;
    const json_t *rows;
    if (!json_is_object(sobj)) return 0;
    json_object_foreach((json_t *)sobj, key, rows) {
        const bf_ragged_output *o = NULL;
        for (size_t k = 0; k < n_outs && !o; k++)
            if (!strcmp(outs[k].name, key)) o = &outs[k];
        const json_t *want = json_object_get(obj, key);
        if (!o || !json_is_array(rows) || !json_is_array(want) || json_array_size(rows) != json_array_size(want)) return 0;
        for (size_t r = 0; r < json_array_size(rows); r++) {
            const json_t *row = json_array_get(rows, r);
            size_t m = json_is_array(row) ? json_array_size(row) : 1;
            if ((o->row_elems > 1) != json_is_array(row) || (int64_t)m != o->row_elems) return 0;
            for (size_t j = 0; j < m; j++) {
                const json_t *v = json_is_array(row) ? json_array_get(row, j) : row;
                if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0) return 0;
            }
        }
    }
    return 1;
}

/* c's counts of values the reference's scales widened, and of values
 * checked and unverifiable, into all; k: the output c compared (its
 * per-output counts), or -1 when c holds them already. */
static void add_scaled(cmp *all, const cmp *c, int64_t k)
{
    all->scaled += c->scaled;
    all->rescued += c->rescued;
    if (c->gain > all->gain) all->gain = c->gain;
    all->checked += c->checked;
    all->unverif += c->unverif;
    if (k >= 0) {
        int64_t at = k < CONF_OUTS ? k : CONF_OUTS - 1;
        all->out_checked[at] += c->checked;
        all->out_unverif[at] += c->unverif;
    } else {
        for (int j = 0; j < CONF_OUTS; j++) {
            all->out_checked[j] += c->out_checked[j];
            all->out_unverif[j] += c->out_unverif[j];
        }
    }
}

/* Our row q of sample i and the reference's row g, matched as a set (ties,
 * rows after an NMS cut): their values' checked and unverifiable counts into
 * all, per output, as the rows checked in place give theirs; which: 'f' the
 * reference's "ties" free outputs alone (the others are checked in place),
 * 'a' every output. */
static int is_free(const json_t *ties, const char *name);
static void count_row(const bf_ragged_output *outs, size_t n_outs, const json_t *obj, int64_t i, int64_t g, int64_t q,
                      const conf_ties *tc, char which, cmp *all)
{
    for (size_t k = 0; k < n_outs; k++) {
        const bf_ragged_output *o = &outs[k];
        if (which == 'f' && !is_free(tc->ties, o->name)) continue;
        cmp c = row_cmp(o->data + o->offsets[i] + q * o->row_elems, o->row_elems,
                        json_array_get(json_object_get(obj, o->name), (size_t)g), scale_row(tc, i, o->name, g), tc);
        c.scaled = c.rescued = 0;   /* counted as values checked, not again as widened */
        add_scaled(all, &c, (int64_t)k);
    }
}

/* The reference's "ties" (tests/fixtures/README.md, "Ties at the cut"):
 * tie[r] = 1 for golden row r of sample obj whose score (the output
 * ties.score_output) equals, as float32, one of ties.tied_scores[i]: a
 * score PyTorch had more boxes of than it kept (the same score past its
 * detections-per-image cut), so which of them it kept was its sort's
 * tie-break. Returns how many rows. */
static int64_t tie_rows(const json_t *ties, const json_t *obj, int64_t i, int64_t rows, int32_t *tie)
{
    memset(tie, 0, (size_t)rows * sizeof *tie);
    const char *so = json_string_value(json_object_get(ties, "score_output"));
    const json_t *ts = json_array_get(json_object_get(ties, "tied_scores"), (size_t)i);
    const json_t *gs = so ? json_object_get(obj, so) : NULL;
    int64_t n = 0;
    for (int64_t r = 0; json_is_array(ts) && json_is_array(gs) && r < rows && r < (int64_t)json_array_size(gs); r++) {
        double g, v;
        if (!json_to_double(json_array_get(gs, (size_t)r), &g)) continue;
        for (size_t t = 0; t < json_array_size(ts) && !tie[r]; t++)
            if (json_to_double(json_array_get(ts, t), &v) && (float)v == (float)g) tie[r] = 1;
        n += tie[r];
    }
    return n;
}

/* ties.free_outputs names o: its tied rows are matched as a set */
static int is_free(const json_t *ties, const char *name)
{
    const json_t *f = json_object_get(ties, "free_outputs");
    for (size_t j = 0; j < json_array_size(f); j++) {
        const char *s = json_string_value(json_array_get(f, j));
        if (s && !strcmp(s, name)) return 1;
    }
    return 0;
}

/* "ties" as the README writes it: an object with a string score_output,
 * a list of output names free_outputs and a list per sample of scores
 * tied_scores. A field of another shape is the reference's error, said so
 * ("ties" malformed), never read as no ties at all. */
static int ties_well_formed(const json_t *ties, int64_t n)
{
    const json_t *f = json_object_get(ties, "free_outputs"), *ts = json_object_get(ties, "tied_scores");
    if (!json_is_object(ties) || !json_is_string(json_object_get(ties, "score_output")) || !json_is_array(f) ||
        !json_is_array(ts) || (int64_t)json_array_size(ts) < n)
        return 0;
    for (size_t j = 0; j < json_array_size(f); j++)
        if (!json_is_string(json_array_get(f, j))) return 0;
    for (size_t i = 0; i < json_array_size(ts); i++) {
        const json_t *row = json_array_get(ts, i);
        if (!json_is_array(row)) return 0;
        for (size_t t = 0; t < json_array_size(row); t++)
            if (!json_is_number(json_array_get(row, t))) return 0;
    }
    return 1;
}

/* Two scores the runner cannot order: within the tolerance of a value
 * (compare_rows), as float32 (the outputs' type). */
static int near(float a, float b)
{
    double tol = RTOL * fabs((double)b) > ATOL ? RTOL * fabs((double)b) : ATOL;
    return fabs((double)a - (double)b) <= tol;
}

/* Without "ties" in the reference (one written by someone else), sample
 * i's tied rows are inferred from the lists alone. The golden scores (`gs`)
 * and ours (output s) must each be a ranked list (non-increasing, no NaN);
 * then each run of G >= 2 golden rows whose neighbours' scores are equal
 * within the tolerance is a group: grp[r] = its number (1, 2, ...), negated
 * when the golden scores are not all bit for bit one value (a near tie), 0
 * for a row in no group, which is checked in place. Equal within the tolerance,
 * not bit for bit: PyTorch's exactly equal scores (an untrained head's) come
 * out of another summation order a last bit apart, and the sort then orders
 * them by that bit (measured on fasterrcnn_mobilenet_v3_large_fpn under a
 * fault: 65 rows of one score in PyTorch, 9 and 56 a bit apart in ours).
 * The same rows of ours must pair with the group's (match_ties), so a group
 * of another count fails there. Returns how many rows are in groups. */
static int64_t score_groups(const bf_ragged_output *s, const json_t *gs, int64_t i, int32_t *grp)
{
    int64_t a = s->offsets[i], k = s->offsets[i + 1] - a, n = 0;
    int32_t id = 0;
    if (s->row_elems != 1 || k < 2 || !json_is_array(gs) || (int64_t)json_array_size(gs) != k) return 0;
    const float *o = s->data + a;
    float *g = malloc((size_t)k * sizeof *g);
    if (!g) return 0;
    for (int64_t r = 0; r < k; r++) {
        double v;
        if (!json_to_double(json_array_get(gs, (size_t)r), &v) || isnan(v) || isnan(o[r]) ||
            (r && ((float)v > g[r - 1] || o[r] > o[r - 1]))) { free(g); return 0; }
        g[r] = (float)v;
    }
    for (int64_t t = 0, e; t < k; t = e) {
        for (e = t + 1; e < k && near(g[e], g[e - 1]);) e++;
        if (e - t < 2) continue;
        int exact = 1;
        for (int64_t r = t; r < e; r++) exact &= g[r] == g[t];
        id++;
        for (int64_t r = t; r < e; r++) grp[r] = exact ? id : -id;
        n += e - t;
    }
    free(g);
    return n;
}

/* Which outputs of a tied row are not checked in place: those "ties" names,
 * or (inferred) every output: the order among equal scores is the sort's,
 * so the group's labels are a multiset and its boxes a set (match_ties). */
static int free_output(const conf_ties *tc, const bf_ragged_output *o)
{
    return tc->ties ? is_free(tc->ties, o->name) : 1;
}

/* Whether our row q of sample i equals golden row g (of obj) in the outputs
 * `which` selects: 'f' the free ones ("ties"), 'v' the single values (a
 * label, a score), 'a' every output. */
static int same_row(const bf_ragged_output *outs, size_t n_outs, const json_t *obj, int64_t i, int64_t g, int64_t q,
                    const conf_ties *tc, char which)
{
    for (size_t k = 0; k < n_outs; k++) {
        const bf_ragged_output *o = &outs[k];
        if ((which == 'f' && !is_free(tc->ties, o->name)) || (which == 'v' && o->row_elems != 1)) continue;
        cmp c = row_cmp(o->data + o->offsets[i] + q * o->row_elems, o->row_elems,
                        json_array_get(json_object_get(obj, o->name), (size_t)g), scale_row(tc, i, o->name, g), tc);
        if (c.bad || c.format_error) return 0;
    }
    return 1;
}

/* Pairs each tied golden row with an unused tied row of ours that
 * same_row(which) accepts; returns how many golden rows found none (the
 * first in *first). */
static int64_t pair_rows(const bf_ragged_output *outs, size_t n_outs, const json_t *obj, int64_t i, const conf_ties *tc,
                         const int32_t *tie, int32_t id, unsigned char *used, int64_t rows, char which, int64_t *first,
                         cmp *all)
{
    int64_t missing = 0;
    memset(used, 0, (size_t)rows);
    *first = -1;
    for (int64_t g = 0; g < rows; g++) {
        if (abs(tie[g]) != id) continue;
        int64_t found = -1;
        for (int64_t q = 0; q < rows && found < 0; q++)
            if (abs(tie[q]) == id && !used[q] && same_row(outs, n_outs, obj, i, g, q, tc, which)) found = q;
        if (found >= 0) {
            used[found] = 1;
            if (all) count_row(outs, n_outs, obj, i, g, found, tc, which, all);   /* the pair's values, checked */
        } else if (!missing++) *first = g;
    }
    return missing;
}

/* Whether group id's golden scores are one value bit for bit (score_groups) */
static int exact_group(const int32_t *tie, int64_t rows, int32_t id)
{
    for (int64_t r = 0; r < rows; r++)
        if (tie[r] == -id) return 0;
    return 1;
}

/* Sample i's tied rows, group by group. With "ties": each golden row is
 * matched to an unused tied row of ours equal in every free output.
 * Inferred: a group's single values (label, score) must be the same
 * multiset in both, else a mismatch (a relabelled row); then each golden
 * row is matched to an unused row of its group in ours equal in every
 * output, so a box is found only under its own label and score. A golden
 * row with no match is counted unverifiable where PyTorch may have chosen
 * among equal scores (the reference's "ties" says so, or the group's golden
 * scores are one value bit for bit and the image has as many rows as any in
 * the reference: a full list, cut at its detections-per-image cap, whose
 * NMS also kept some of many equal boxes), never passed silently (the
 * runner prints the count). In a shorter list nothing was cut, and scores
 * only near each other are ordered by their values' last bits, so there a
 * group is the same rows in another order and one not found is a mismatch.
 * Untied rows are checked in place by the caller. */
static void match_ties(const bf_ragged_output *outs, size_t n_outs, const json_t *obj, int64_t i, const conf_ties *tc,
                       const int32_t *tie, unsigned char *used, int64_t rows, cmp *all, const char **out_bad)
{
    int64_t n = 0, first = -1, bad = 0;
    int32_t groups = 0;
    for (int64_t r = 0; r < rows; r++) {
        n += tie[r] != 0;
        if (abs(tie[r]) > groups) groups = abs(tie[r]);
    }
    all->tied += n;
    all->inferred += tc->ties ? 0 : n;
    for (int32_t id = 1; id <= groups && !bad; id++) {
        if (!tc->ties) bad = pair_rows(outs, n_outs, obj, i, tc, tie, id, used, rows, 'v', &first, NULL);
        if (!bad) {   /* the same labels and scores: the boxes */
            int64_t lost = pair_rows(outs, n_outs, obj, i, tc, tie, id, used, rows, tc->ties ? 'f' : 'a', &first, all);
            if (tc->ties || (rows >= tc->cap && exact_group(tie, rows, id))) all->unverified += lost;
            else bad = lost;
        }
    }
    if (!bad) return;
    all->bad += bad;
    for (size_t k = 0; k < n_outs && all->first_bad < 0; k++) {
        const bf_ragged_output *o = &outs[k];
        const json_t *w = json_array_get(json_object_get(obj, o->name), (size_t)first);
        if (json_is_array(w)) w = json_array_get(w, 0);
        all->first_bad = i;
        all->first_got = o->data[o->offsets[i] + first * o->row_elems];
        if (!json_to_double(w, &all->first_want)) all->first_want = NAN;
        *out_bad = o->name;
    }
}

/* Sample i's tied rows into tie[0..rows) (a group number, 0: none): the
 * reference's "ties" (one group), else the inferred groups (score_groups).
 * Returns how many rows. */
static int64_t tied_rows(const bf_ragged_output *outs, size_t n_outs, const json_t *obj, int64_t i, const conf_ties *tc,
                         int64_t rows, int32_t *tie)
{
    if (tc->ties) return tie_rows(tc->ties, obj, i, rows, tie);
    memset(tie, 0, (size_t)rows * sizeof *tie);
    for (size_t k = 0; tc->score && k < n_outs; k++) {
        if (strcmp(outs[k].name, tc->score)) continue;
        if (outs[k].offsets[i + 1] - outs[k].offsets[i] != rows) return 0;
        return score_groups(&outs[k], json_object_get(obj, tc->score), i, tie);
    }
    return 0;
}

/* Whether score v is within the value tolerance of one of the region's. */
static int in_region(const nms_cut *nc, double v)
{
    for (int64_t k = 0; k < nc->n_region; k++) {
        double a = nc->region[k], mag = fabs(a) > fabs(v) ? fabs(a) : fabs(v);
        if (fabs(v - a) <= (mag * RTOL > ATOL ? mag * RTOL : ATOL)) return 1;
    }
    return 0;
}

/* Whether our row r and the reference's row q of sample i are equal in
 * every output (as compare_rows checks a row); *worst the larger. */
static int rows_equal(const bf_ragged_output *outs, size_t n_outs, const json_t *obj, int64_t i, int64_t r, int64_t q,
                      const conf_ties *tc, double *worst)
{
    double w = 0;
    for (size_t k = 0; k < n_outs; k++) {
        const bf_ragged_output *o = &outs[k];
        cmp rc = row_cmp(o->data + o->offsets[i] + r * o->row_elems, o->row_elems,
                         json_array_get(json_object_get(obj, o->name), (size_t)q), scale_row(tc, i, o->name, q), tc);
        if (rc.bad || rc.format_error) return 0;
        if (rc.worst > w) w = rc.worst;
    }
    if (w > *worst) *worst = w;
    return 1;
}

/* The rows after an NMS near tie's cut, finer (tests/fixtures/README.md,
 * "NMS near-ties"): every candidate outside the record's region is kept or
 * suppressed by any engine within the margins as by ours, so each of our
 * rows whose score is not within the tolerance of a region's score must be
 * among the reference's rows after the cut (equal in every output; as a
 * set: scores within rounding of each other may come in either order), and
 * each reference row not matched must be within the tolerance of a region
 * score: a box another engine kept there. A row either list may have lost
 * to the other's detections-per-image cap is unverifiable, as are the
 * region's rows: the other list as long as any image's in the reference
 * (tc->cap) and as this one or longer, the row at or below its last score,
 * and no more such rows than the other list has more rows in the region. Returns the rows unverifiable (the more of ours and
 * the reference's), or -1 when the outputs' row counts disagree (the
 * caller's fallback: every row after the cut unverifiable). */
static int64_t match_after_cut(const bf_ragged_output *outs, size_t n_outs, const json_t *obj, int64_t i, int64_t cut,
                               const nms_cut *nc, const conf_ties *tc, cmp *all, const char **out_bad)
{
    const char *score = tc->score;
    const bf_ragged_output *s = NULL;
    for (size_t k = 0; score && k < n_outs; k++)
        if (!strcmp(outs[k].name, score) && outs[k].row_elems == 1) s = &outs[k];
    const json_t *want = s ? json_object_get(obj, s->name) : NULL;
    if (!s || !json_is_array(want)) return -1;
    int64_t rows = s->offsets[i + 1] - s->offsets[i], ref_rows = (int64_t)json_array_size(want);
    for (size_t k = 0; k < n_outs; k++)
        if ((outs[k].offsets[i + 1] - outs[k].offsets[i]) / outs[k].row_elems != rows ||
            (int64_t)json_array_size(json_object_get(obj, outs[k].name)) != ref_rows)
            return -1;
    const float *ours = s->data + s->offsets[i];
    double last = rows ? ours[rows - 1] : -INFINITY, ref_last = -INFINITY;
    if (ref_rows && !json_to_double(json_array_get(want, (size_t)ref_rows - 1), &ref_last)) return -1;
    /* used: per reference row, matched; state: per row of ours, 0 in the
     * region, 1 matched, 2 not found */
    unsigned char *used = calloc((size_t)(ref_rows > 0 ? ref_rows : 1) + (size_t)(rows > 0 ? rows : 1), 1);
    if (!used) return -1;
    unsigned char *state = used + (ref_rows > 0 ? ref_rows : 1);
    int64_t lost = 0, lost_ref = 0, bad = 0, bad_at = -1;
    for (int64_t r = cut; r < rows; r++) {
        if (in_region(nc, ours[r])) { lost++; continue; }
        int64_t q = cut;
        while (q < ref_rows && (used[q] || !rows_equal(outs, n_outs, obj, i, r, q, tc, &all->worst))) q++;
        if (q < ref_rows) { used[q] = 1; state[r] = 1; all->nms_checked++; count_row(outs, n_outs, obj, i, q, r, tc, 'a', all); }
        else state[r] = 2;
    }
    for (int64_t q = cut; q < ref_rows; q++) {   /* the reference's rows left: a box kept in the region? */
        double v;
        if (!used[q] && json_to_double(json_array_get(want, (size_t)q), &v) && in_region(nc, v)) used[q] = 2, lost_ref++;
    }
    /* A detections-per-image cap after the NMS (a list as long as any in
     * the reference) drops the lowest rows outside the region when that
     * list kept more in the region than the other: at most that many, each
     * at or below the capped list's last score. */
    int64_t room = ref_rows >= tc->cap && ref_rows >= rows && lost_ref > lost ? lost_ref - lost : 0;
    double below = ref_last + (fabs(ref_last) * RTOL > ATOL ? fabs(ref_last) * RTOL : ATOL);
    for (int64_t r = rows - 1; r >= cut; r--) {
        if (state[r] != 2) continue;
        if (room > 0 && ours[r] <= below) { room--; lost++; }
        else { bad++; bad_at = r; }
    }
    room = rows >= tc->cap && rows >= ref_rows && lost > lost_ref ? lost - lost_ref : 0;
    below = last + (fabs(last) * RTOL > ATOL ? fabs(last) * RTOL : ATOL);
    for (int64_t q = ref_rows - 1; q >= cut; q--) {
        double v;
        if (used[q]) continue;
        if (!json_to_double(json_array_get(want, (size_t)q), &v)) v = NAN;
        if (room > 0 && v <= below) { room--; lost_ref++; }
        else if (bad++ == 0 || bad_at < 0) bad_at = q;
    }
    free(used);
    if (bad) {
        all->bad += bad;
        if (all->first_bad < 0) {
            double w = NAN;
            all->first_bad = i;
            all->first_got = bad_at < rows ? ours[bad_at] : NAN;
            if (bad_at < ref_rows) json_to_double(json_array_get(want, (size_t)bad_at), &w);
            all->first_want = w;
            *out_bad = s->name;
        }
    }
    return lost > lost_ref ? lost : lost_ref;
}

/* Sample i cut at an NMS near tie (conf_ties.cut): each output's rows
 * [0, cut) in place, as compare_rows checks rows; the rows after the cut
 * outside the near tie's region matched (match_after_cut), the rest
 * counted unverifiable, not passed as matching nor failed: which boxes NMS
 * kept there followed rounding (docs/OPS.md, "NMS near-ties"). Both must
 * have the cut's rows. */
static void compare_cut(const bf_ragged_output *outs, size_t n_outs, const json_t *obj, int64_t i, const nms_cut *nc,
                        const conf_ties *tc, cmp *all, const char **out_bad)
{
    int64_t after = 0, cut = nc->row, bad0 = all->bad;
    for (size_t k = 0; k < n_outs && !all->format_error; k++) {
        const bf_ragged_output *o = &outs[k];
        const json_t *want = json_object_get(obj, o->name);
        int64_t a = o->offsets[i], rows = (o->offsets[i + 1] - a) / o->row_elems;
        if (!json_is_array(want)) { all->format_error = 1; return; }
        int64_t ref_rows = (int64_t)json_array_size(want);
        if (rows < cut || ref_rows < cut) {   /* not the cut's rows: the outputs disagree on their counts */
            if (all->first_bad < 0) { all->first_bad = i; all->first_got = (double)rows; all->first_want = (double)ref_rows; *out_bad = o->name; }
            all->bad++;
            continue;
        }
        int64_t more = (rows > ref_rows ? rows : ref_rows) - cut;
        if (more > after) after = more;
        cmp c = rows_scaled(o->data + a, o->row_elems, want, cut, o->row_elems > 1 ? 1 : 0, scale_rows(tc, i, o->name),
                            tc->lim->max_widen);
        if (c.format_error) { all->format_error = 1; return; }
        add_scaled(all, &c, (int64_t)k);
        if (c.worst > all->worst) all->worst = c.worst;
        if (c.bad && all->first_bad < 0) {
            all->first_bad = i;
            all->first_got = c.first_got;
            all->first_want = c.first_want;
            *out_bad = o->name;
        }
        all->bad += c.bad;
    }
    if (nc->fine && all->bad == bad0) {   /* the rows before the cut agree: the rows after it */
        int64_t lost = match_after_cut(outs, n_outs, obj, i, cut, nc, tc, all, out_bad);
        if (lost >= 0) after = lost;
    }
    if (all->nms_images < 4) { all->cut_at[all->nms_images][0] = i; all->cut_at[all->nms_images][1] = cut; }
    all->nms_images++;
    all->nms_rows += after;
}

cmp compare_ragged(const bf_ragged_output *outs, size_t n_outs, const json_t *ref, int64_t n, int64_t *rows_bad,
                   const char **out_bad, const conf_ties *tc)
{
    cmp all = {.first_bad = -1};
    *rows_bad = -1;
    *out_bad = NULL;
    if (!json_is_array(ref) || (int64_t)json_array_size(ref) < n) { all.format_error = 1; return all; }
    if (tc->ties && !ties_well_formed(tc->ties, n)) { all.format_error = all.ties_malformed = 1; return all; }
    if (tc->scale && (!json_is_array(tc->scale) || (int64_t)json_array_size(tc->scale) < n))
        { all.format_error = all.scale_malformed = 1; return all; }
    int may_tie = tc->ties || tc->score;
    for (int64_t i = 0; i < n; i++) {
        const json_t *obj = json_array_get(ref, (size_t)i);
        if (!json_is_object(obj)) { all.format_error = 1; return all; }
        if (tc->scale && !scale_ok(json_array_get(tc->scale, (size_t)i), obj, outs, n_outs))
            { all.format_error = all.scale_malformed = 1; return all; }
        /* an NMS near tie: rows [0, cut) in place alone, the rest unverifiable */
        const nms_cut *nc = tc->cut ? &tc->cut[i] : NULL;
        if (nc && nc->row >= 0) { compare_cut(outs, n_outs, obj, i, nc, tc, &all, out_bad); continue; }
        /* the tied rows, and each free output's untied rows in place */
        int64_t k_rows = n_outs ? (outs[0].offsets[i + 1] - outs[0].offsets[i]) / outs[0].row_elems : 0;
        int32_t *tie = may_tie && k_rows ? calloc((size_t)k_rows, sizeof *tie) : NULL;
        unsigned char *used = tie ? malloc((size_t)k_rows) : NULL;
        if (may_tie && k_rows && !used) { free(tie); all.format_error = 1; return all; }
        int64_t n_tied = tie ? tied_rows(outs, n_outs, obj, i, tc, k_rows, tie) : 0;
        for (size_t k = 0; k < n_outs; k++) {
            const bf_ragged_output *o = &outs[k];
            const json_t *want = json_object_get(obj, o->name);
            int64_t a = o->offsets[i], rows = (o->offsets[i + 1] - a) / o->row_elems;
            if (!json_is_array(want)) { free(tie); free(used); all.format_error = 1; return all; }
            if ((int64_t)json_array_size(want) != rows) {
                if (*rows_bad < 0) { *rows_bad = i; *out_bad = o->name; }
                all.bad++;
                continue;
            }
            /* A row of several values (a box's four corners, a mask, a set of
             * keypoints) is one object: its values are checked against the
             * row's scale. A corner near 0 is the difference of a centre and a
             * half-size of tens of pixels, so a last-bit difference in those
             * (summation order upstream) moves it by 1e-5..4e-4 px: 2.5x the
             * 1e-5 absolute floor for bitflip, 2.1x for ONNX Runtime, on
             * torchvision's SSD300 and SSDlite (docs/OPS.md, make det-exports). */
            cmp c = {.first_bad = -1};
            if (n_tied && rows == k_rows && free_output(tc, o)) {
                for (int64_t r = 0; r < rows && !c.format_error; r++) {
                    if (tie[r]) continue;
                    cmp rc = row_cmp(o->data + a + r * o->row_elems, o->row_elems, json_array_get(want, (size_t)r),
                                     scale_row(tc, i, o->name, r), tc);
                    add_scaled(&c, &rc, -1);
                    if (rc.bad && c.first_bad < 0) { c.first_bad = r; c.first_got = rc.first_got; c.first_want = rc.first_want; }
                    c.bad += rc.bad;
                    c.format_error |= rc.format_error;
                    if (rc.worst > c.worst) c.worst = rc.worst;
                }
            } else {
                c = rows_scaled(o->data + a, o->row_elems, want, rows, o->row_elems > 1 ? 1 : 0, scale_rows(tc, i, o->name),
                                tc->lim->max_widen);
            }
            if (c.format_error) { free(tie); free(used); all.format_error = 1; return all; }
            add_scaled(&all, &c, (int64_t)k);
            if (c.worst > all.worst) all.worst = c.worst;
            if (c.bad && all.first_bad < 0) {
                all.first_bad = i;
                all.first_got = c.first_got;
                all.first_want = c.first_want;
                *out_bad = o->name;
            }
            all.bad += c.bad;
        }
        if (n_tied) match_ties(outs, n_outs, obj, i, tc, tie, used, k_rows, &all, out_bad);
        free(tie);
        free(used);
    }
    for (size_t k = 0; k < n_outs && k < CONF_OUTS && !all.not_verified; k++) {
        int64_t u = all.out_unverif[k], t = u + all.out_checked[k];
        if (u && (double)u > tc->lim->max_share * (double)t) all.not_verified = (int)k + 1;
    }
    return all;
}

/* An output's name for the counts: outs[k], or the last counted for those past CONF_OUTS. */
static const char *out_label(const bf_ragged_output *outs, size_t n_outs, size_t k)
{
    return k + 1 == CONF_OUTS && n_outs > CONF_OUTS ? "(the rest)" : outs[k].name;
}

/* The values a list's scales left unverifiable (rows_scaled), per output,
 * and the verdict they give (tests/fixtures/README.md, "Values no rounding
 * decides"). */
static void print_unverifiable(const cmp *c, const bf_ragged_output *outs, size_t n_outs, const conf_ties *tc)
{
    printf("values: %lld checked, %lld unverifiable (their scale widens the tolerance past %g times their row's",
           (long long)c->checked, (long long)c->unverif, tc->lim->max_widen);
    for (size_t k = 0, sep = 0; k < n_outs && k < CONF_OUTS; k++) {
        int64_t u = c->out_unverif[k], t = u + c->out_checked[k];
        if (!u) continue;
        printf("%s'%s' %lld of %lld", sep++ ? ", " : ": ", out_label(outs, n_outs, k), (long long)u, (long long)t);
    }
    printf("); ");
}

void print_cmp_ragged(const cmp *c, int64_t rows_bad, const char *out_bad, const bf_ragged_output *outs, size_t n_outs,
                      const conf_ties *tc)
{
    if (c->format_error && c->scale_malformed) {
        printf("reference malformed: its \"golden_scale\" or a fault's \"scale\" is not [{output: [row of scales per "
               "reference row]} per sample] (tests/fixtures/README.md, \"Scales from the decode\")");
        return;
    }
    if (c->format_error) {
        printf(c->ties_malformed ? "reference malformed: its \"ties\" is not {score_output: name, free_outputs: [names], "
                                   "tied_scores: [[scores] per sample]} (tests/fixtures/README.md, \"Ties at the cut\")"
                                 : "reference malformed");
        return;
    }
    if (c->tied && !c->inferred)
        printf("ties: %lld rows at a score PyTorch kept only some of, %lld of their boxes unverifiable "
               "(not among ours; PyTorch chose among equal scores); ", (long long)c->tied, (long long)c->unverified);
    else if (c->tied)
        printf("ties: %lld rows in groups of equal scores (no \"ties\" in the reference: matched as a set), %lld of "
               "their boxes unverifiable (not among ours, in a full list: PyTorch chose among equal scores); ",
               (long long)c->tied, (long long)c->unverified);
    if (c->nms_images) {
        printf("NMS near-ties: %lld images cut (", (long long)c->nms_images);
        for (int64_t k = 0; k < c->nms_images && k < 4; k++)
            printf("%simage %lld from row %lld", k ? ", " : "", (long long)c->cut_at[k][0], (long long)c->cut_at[k][1]);
        printf("%s), %lld rows after the cuts checked outside the near ties' reach, %lld unverifiable (our NMS chose "
               "within rounding); ", c->nms_images > 4 ? ", ..." : "", (long long)c->nms_checked, (long long)c->nms_rows);
    }
    if (c->scaled)
        printf("decode scales: %lld values' tolerance taken of the reference's scale (up to %.3g times their row's), "
               "%lld of them past their row's own; ", (long long)c->scaled, c->gain, (long long)c->rescued);
    if (tc->scale || c->unverif) print_unverifiable(c, outs, n_outs, tc);
    if (!c->bad && c->not_verified) {
        size_t k = (size_t)c->not_verified - 1;
        int64_t u = c->out_unverif[k], t = u + c->out_checked[k];
        printf("NOT VERIFIED: %.3g%% of '%s' unverifiable, over the %g%% a verified output may have "
               "(--max-unverifiable; worst %.3g of tolerance among the checked)", 100.0 * (double)u / (double)t,
               out_label(outs, n_outs, k), 100.0 * tc->lim->max_share, c->worst);
        return;
    }
    if (!c->bad) { printf("ok (worst %.3g of tolerance)", c->worst); return; }
    if (rows_bad >= 0) printf("MISMATCH: sample %lld has another number of rows of '%s'", (long long)rows_bad, out_bad);
    else printf("MISMATCH: %lld values, first in sample %lld '%s': got %.9g, want %.9g", (long long)c->bad,
                (long long)c->first_bad, out_bad, c->first_got, c->first_want);
}

void print_cmp(const cmp *c, int64_t cols)
{
    if (c->format_error) { printf("reference malformed"); return; }
    if (!c->bad) { printf("ok (worst %.3g of tolerance)", c->worst); return; }
    printf("MISMATCH: %lld values, first at sample %lld col %lld: got %.9g, want %.9g", (long long)c->bad,
           (long long)(c->first_bad / cols), (long long)(c->first_bad % cols), c->first_got, c->first_want);
}

const char *score_output(const bf_model *m)
{
    const char *name = NULL;
    for (size_t k = 0; k < bf_model_num_outputs(m); k++) {
        const bf_value_info *v = bf_model_output(m, k);
        if (v->dtype != BF_F32 || v->ndim != 1) continue;
        if (name) return NULL;
        name = v->name;
    }
    return name;
}

/* One list of per-image objects' most rows of name. */
static int64_t list_cap(const json_t *list, const char *name)
{
    int64_t cap = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        int64_t k = (int64_t)json_array_size(json_object_get(json_array_get(list, i), name));
        if (k > cap) cap = k;
    }
    return cap;
}

int64_t ref_row_cap(const json_t *ref, const char *name)
{
    int64_t cap = name ? list_cap(json_object_get(ref, "golden"), name) : 0;
    const json_t *faults = json_object_get(ref, "faults");
    for (size_t f = 0; name && f < json_array_size(faults); f++) {
        int64_t k = list_cap(json_object_get(json_array_get(faults, f), "outputs"), name);
        if (k > cap) cap = k;
    }
    return cap;
}

/* The first row of a list of scores (ours, or a JSON array) at or below thr
 * (its row count when none is); a NaN score counts as below. */
static int64_t first_at_or_below(const float *ours, const json_t *ref, int64_t rows, double thr)
{
    for (int64_t r = 0; r < rows; r++) {
        double v;
        if (ours) v = ours[r];
        else if (!json_to_double(json_array_get(ref, (size_t)r), &v)) return r;
        if (!(v > thr)) return r;
    }
    return rows;
}

int nms_cuts(const struct bf_nms_ties *t, const bf_ragged_output *outs, size_t n_outs, const json_t *ref, int64_t n,
             const char *score, nms_cut **out)
{
    *out = NULL;
    const bf_ragged_output *s = NULL;
    for (size_t k = 0; score && k < n_outs; k++)
        if (!strcmp(outs[k].name, score) && outs[k].row_elems == 1) s = &outs[k];
    nms_cut *cut = NULL;
    for (int64_t i = 0; t && i < n; i++) {
        float at;
        int kind = bf_nms_ties_at(t, i, &at);
        if (!kind) continue;
        if (!cut) {
            if (!(cut = calloc((size_t)n, sizeof *cut))) return 0;
            for (int64_t j = 0; j < n; j++) cut[j].row = -1;
        }
        const json_t *want = s ? json_object_get(json_array_get(ref, (size_t)i), s->name) : NULL;
        if (kind == 2 || !s || !json_is_array(want)) { cut[i].row = 0; continue; }
        double tol = fabs(at) * RTOL > ATOL ? fabs(at) * RTOL : ATOL, thr = at + tol;
        int64_t a = s->offsets[i], ours = first_at_or_below(s->data + a, NULL, s->offsets[i + 1] - a, thr);
        int64_t theirs = first_at_or_below(NULL, want, (int64_t)json_array_size(want), thr);
        cut[i].row = ours < theirs ? ours : theirs;
        const float *reg;
        int64_t k = bf_nms_ties_region(t, i, &reg);
        if (k && !(cut[i].region = malloc((size_t)k * sizeof *reg))) { nms_cuts_free(cut, n); return 0; }
        if (k) memcpy(cut[i].region, reg, (size_t)k * sizeof *reg);
        cut[i].n_region = k;
        cut[i].fine = 1;
    }
    *out = cut;
    return 1;
}

void nms_cuts_free(nms_cut *c, int64_t n)
{
    for (int64_t i = 0; c && i < n; i++) free(c[i].region);
    free(c);
}
