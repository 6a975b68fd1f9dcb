/* Figures: IVMOD per tensor and per bit (detection and segmentation
 * results). IVMOD is the share of images whose detections (or masks) a
 * fault made critical: by_tensor[].ivmod and by_bit[].ivmod, with the
 * Student-t interval of the mean over trials. One figure of each per result
 * that has them ("ivmod_tensors", "ivmod_bits"; _2, _3... for the others). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

typedef struct row {
    const json_t *group;
    int bit;                   /* ivmod_bits: the bit; else -1 */
    double rate, lo, hi;
    long long critical, images;
} row;

static int by_rate_desc(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->rate != y->rate) return x->rate < y->rate ? 1 : -1;
    if (x->images != y->images) return x->images < y->images ? 1 : -1;
    return strcmp(bfr__tensor_name(x->group, NULL, 0), bfr__tensor_name(y->group, NULL, 0));
}

static int by_bit_desc(const void *a, const void *b)
{
    const row *x = a, *y = b;
    return (x->bit < y->bit) - (x->bit > y->bit);   /* no subtraction: bits come from the document */
}

/* a group that carries an ivmod with images; ctx: whether the groups are
 * bits (by_bit) */
static int ivmod_row(void *row_, const json_t *g, const void *ctx)
{
    const json_t *iv = json_object_get(g, "ivmod"), *ci = json_object_get(iv, "ci");
    json_int_t images = json_integer_value(json_object_get(iv, "images"));
    if (!json_is_object(iv) || images <= 0) return 0;
    row *r = row_;
    r->group = g;
    r->bit = *(const int *)ctx ? (int)json_integer_value(json_object_get(g, "bit")) : -1;
    r->images = images;
    r->critical = json_integer_value(json_object_get(iv, "critical_images"));
    r->rate = (double)r->critical / (double)images;
    r->lo = json_is_number(json_array_get(ci, 0)) ? json_number_value(json_array_get(ci, 0)) : NAN;
    r->hi = json_is_number(json_array_get(ci, 1)) ? json_number_value(json_array_get(ci, 1)) : NAN;
    return 1;
}

static int one(const bfr__set *set, size_t d, int bits, json_t *figs)
{
    int oom = 0;
    size_t n = 0;
    row *rows = bfr__rows(json_object_get(set->docs[d].root, bits ? "by_bit" : "by_tensor"), sizeof(row), ivmod_row, &bits,
                          bits ? by_bit_desc : by_rate_desc, &n, &oom);
    if (!rows) return oom;
    size_t shown = !bits && n > set->max_tensors ? set->max_tensors : n;
    double conf = bfr__confidence(set, d);
    const char *what = bits ? "bit" : "tensor";
    char title[160], sub[256], alt[640], name[32];
    bfr__fig_title(title, sizeof title, set, d, bits ? "IVMOD per bit" : "IVMOD per tensor", "images a fault made critical");
    snprintf(sub, sizeof sub, "critical images over trials x images, faults in each %s%s; whiskers: %.0f%% t interval over trials",
             what, bits ? " (lowest flipped bit), highest bit first" : ", most first", 100 * conf);
    snprintf(alt, sizeof alt, "Bar chart of IVMOD per %s, %zu %s%s; ", what, n, what, n > 1 ? "s" : "");
    double hi = 0;
    for (size_t i = 0; i < shown; i++) hi = bfr__bar_top(hi, rows[i].rate, rows[i].hi);
    bfr__hchart c;
    bfr__hchart_open(&c, shown, n, hi, title, sub, "IVMOD (% of the images, over the trials)");
    for (size_t i = 0; i < shown; i++) {
        const row *r = &rows[i];
        char label[160], v[64], kc[32], nc[32], tip[400], val[120];
        if (bits) snprintf(label, sizeof label, "bit %d", r->bit);
        else snprintf(label, sizeof label, "%s", bfr__tensor_name(r->group, tip, sizeof tip));
        bfr__pct_maybe_ci(v, sizeof v, r->rate, r->lo, r->hi, 1);
        bfr__count(kc, sizeof kc, r->critical), bfr__count(nc, sizeof nc, r->images);
        snprintf(val, sizeof val, "%s of %s", kc, nc);
        snprintf(tip, sizeof tip, "%.120s: %s critical images of %s, IVMOD %s", label, kc, nc, v);
        bfr__printf(&c.b, "<g class=\"bfr-ivmod\" data-critical=\"%lld\" data-images=\"%lld\">\n", r->critical, r->images);
        bfr__hchart_row(&c, i, label, r->rate, r->lo, r->hi, bfr__palette[2], tip, val);
        bfr__puts(&c.b, "</g>\n");
        bfr__hchart_alt(alt, sizeof alt, i, "highest: ", label, v);
    }
    free(rows);
    snprintf(name, sizeof name, "ivmod_%ss", what);
    return bfr__hchart_done(&c, n, "highest", figs, name, d, title, alt);
}

int bfr__fig_ivmod(const bfr__set *set, json_t *figs)
{
    for (size_t d = 0; d < set->n_docs; d++)
        if (one(set, d, 0, figs) || one(set, d, 1, figs)) return 1;
    return 0;
}
