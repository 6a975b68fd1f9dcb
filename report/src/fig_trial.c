/* Figure: what one trial's faults did to one image (bfr_trial_figure).
 * Detection: the image twice, the golden boxes on the left and the faulty
 * ones on the right, each labelled "class score". Segmentation: the image,
 * the golden mask and the faulty mask side by side, a colour per class.
 * Each box is a <g class="bfr-box-golden"> or "bfr-box-faulty" (its rect and
 * label, the detection's class and score in data-label and data-score) and each
 * panel says how many it holds, so tests (and people) can count them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

#define PAD 16
#define TOP 80     /* title and two lines under it */
#define CAP 22     /* a panel's caption over it */
#define PANEL 300  /* a panel's side, at most (small images are scaled up) */

/* the image's pixels as RGB bytes, stretched from its min to its max */
static unsigned char *image_rgb(const bfr_trial_view *v)
{
    size_t hw = (size_t)v->height * (size_t)v->width;
    unsigned char *rgb = malloc(hw * 3);
    if (!rgb) return NULL;
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < hw * (size_t)v->channels; i++)
        if (isfinite(v->pixels[i])) lo = fminf(lo, v->pixels[i]), hi = fmaxf(hi, v->pixels[i]);
    float span = hi > lo ? hi - lo : 1;
    for (size_t i = 0; i < hw; i++)
        for (int c = 0; c < 3; c++) {
            float x = v->pixels[(size_t)(v->channels == 3 ? c : 0) * hw + i];
            rgb[i * 3 + (size_t)c] = isfinite(x) ? (unsigned char)lrintf(255 * (x - lo) / span) : 0;
        }
    return rgb;
}

/* a class id's colour: the palette, then hues spread by the golden ratio */
static void class_rgb(int id, unsigned char *o)
{
    if (id == 255) { o[0] = o[1] = o[2] = 0x99; return; }
    if (id == 0) { o[0] = o[1] = o[2] = 0x20; return; }   /* background dark */
    unsigned v = 0;
    if (id > 0 && id <= BFR_MAX_SERIES) sscanf(bfr__palette[id - 1] + 1, "%x", &v);
    else v = (unsigned)(id * 2654435761u) >> 8;
    o[0] = (unsigned char)(v >> 16), o[1] = (unsigned char)(v >> 8), o[2] = (unsigned char)v;
}

static unsigned char *mask_rgb(const int *m, size_t hw)
{
    unsigned char *rgb = malloc(hw * 3);
    if (!rgb) return NULL;
    for (size_t i = 0; i < hw; i++) class_rgb(m[i], rgb + i * 3);
    return rgb;
}

static void put_image(bfr__buf *b, const char *png, double x, double y, double w, double h)
{
    bfr__puts(b, "<image x=\"");
    bfr__coord(b, x);
    bfr__puts(b, "\" y=\"");
    bfr__coord(b, y);
    bfr__puts(b, "\" width=\"");
    bfr__coord(b, w);
    bfr__puts(b, "\" height=\"");
    bfr__coord(b, h);
    bfr__puts(b, "\" preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64,");
    bfr__puts(b, png);
    bfr__puts(b, "\"/>\n");
}

/* the boxes over score_threshold, clipped to the image; their count */
static size_t put_boxes(bfr__buf *b, const bfr_trial_view *v, const bfr_detection *d, size_t n, const char *cls,
                        const char *color, double x0, double y0, double scale)
{
    size_t drawn = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(d[i].score > v->score_threshold)) continue;
        double bx[4];
        for (int k = 0; k < 4; k++) {
            double lim = k % 2 ? v->height : v->width, c = isfinite(d[i].box[k]) ? d[i].box[k] : 0;
            bx[k] = (c < 0 ? 0 : c > lim ? lim : c) * scale;
        }
        char label[64];
        snprintf(label, sizeof label, "%lld %.2f", d[i].label, d[i].score);
        bfr__printf(b, "<g class=\"%s\" data-label=\"%lld\" data-score=\"%.6g\"><rect x=\"", cls, d[i].label,
                    (double)d[i].score);
        bfr__coord(b, x0 + fmin(bx[0], bx[2]));
        bfr__puts(b, "\" y=\"");
        bfr__coord(b, y0 + fmin(bx[1], bx[3]));
        bfr__puts(b, "\" width=\"");
        bfr__coord(b, fabs(bx[2] - bx[0]));
        bfr__puts(b, "\" height=\"");
        bfr__coord(b, fabs(bx[3] - bx[1]));
        bfr__printf(b, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", color);
        bfr__svg_text(b, x0 + fmin(bx[0], bx[2]) + 2, y0 + fmin(bx[1], bx[3]) + 12, "start", "bl", label, 0);
        bfr__puts(b, "</g>\n");
        drawn++;
    }
    return drawn;
}

static size_t count_over(const bfr_detection *d, size_t n, double t)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += d[i].score > t;
    return k;
}

static char *draw(const bfr_trial_view *v, int det, const char *const png[3], char *alt, size_t alt_n, char *title,
                  size_t title_n)
{
    int panels = det ? 2 : 3;
    double scale = fmin(PANEL / (double)v->width, PANEL / (double)v->height);
    if (scale > 1) scale = floor(scale);   /* small images: whole pixels */
    double pw = v->width * scale, ph = v->height * scale;
    int w = (int)ceil(PAD + panels * (pw + PAD)), h = (int)ceil(TOP + CAP + ph + PAD + 18);
    if (w < 640) w = 640;
    char sub[512], what[256], key[160], cap[3][160];
    snprintf(title, title_n, "Trial %lld on image %lld: %s", v->trial, v->image, det ? "golden and faulty detections" : "golden and faulty masks");
    size_t ng = det ? count_over(v->golden, v->n_golden, v->score_threshold) : 0;
    size_t nf = det ? count_over(v->faulty, v->n_faulty, v->score_threshold) : 0;
    size_t changed = 0, hw = (size_t)v->height * (size_t)v->width;
    for (size_t i = 0; !det && i < hw; i++) changed += v->golden_mask[i] != v->faulty_mask[i];
    snprintf(what, sizeof what, "%s%.200s", v->outcome ? v->outcome : "", v->fault ? v->fault : "");
    if (det) {
        snprintf(key, sizeof key, "boxes scoring over %.3g, labelled class and score", v->score_threshold);
        snprintf(cap[0], sizeof cap[0], "golden: %zu detection%s", ng, ng == 1 ? "" : "s");
        snprintf(cap[1], sizeof cap[1], "faulty: %zu detection%s", nf, nf == 1 ? "" : "s");
        snprintf(alt, alt_n, "Image %lld with %zu golden detections beside the same image with %zu detections under trial %lld's faults",
                 v->image, ng, nf, v->trial);
    } else {
        snprintf(key, sizeof key, "a colour per class, grey: ignored (255)");
        snprintf(cap[0], sizeof cap[0], "image %lld", v->image);
        snprintf(cap[1], sizeof cap[1], "golden mask");
        snprintf(cap[2], sizeof cap[2], "faulty mask: %zu pixel%s changed (%.2f%%)", changed, changed == 1 ? "" : "s",
                 100.0 * (double)changed / (double)hw);
        snprintf(alt, alt_n, "Image %lld, its golden mask and its mask under trial %lld's faults: %zu of %zu pixels changed",
                 v->image, v->trial, changed, hw);
    }
    snprintf(sub, sizeof sub, "%s; %s", what, key);
    bfr__buf b = {0};
    bfr__svg_open(&b, w, h, title, sub);
    bfr__puts(&b, "<style>.bfr-bl{font-size:10px;fill:#fff;paint-order:stroke;stroke:#000;stroke-width:2px}</style>\n");
    bfr__svg_text(&b, 16, 24, "start", "t", title, 0);
    bfr__svg_text(&b, 16, 44, "start", "s", what, 0);
    bfr__svg_text(&b, 16, 60, "start", "s", key, 0);
    for (int p = 0; p < panels; p++) {
        double x = PAD + p * (pw + PAD), y = TOP + CAP;
        bfr__printf(&b, "<g class=\"bfr-panel\" data-panel=\"%s\">\n", det ? (p ? "faulty" : "golden") : p == 0 ? "image" : p == 1 ? "golden" : "faulty");
        bfr__svg_text(&b, x, TOP + 14, "start", "lb", cap[p], 0);
        put_image(&b, png[det ? 0 : p], x, y, pw, ph);
        if (det && p == 0) put_boxes(&b, v, v->golden, v->n_golden, "bfr-box-golden", bfr__palette[0], x, y, scale);
        if (det && p == 1) put_boxes(&b, v, v->faulty, v->n_faulty, "bfr-box-faulty", bfr__palette[1], x, y, scale);
        bfr__puts(&b, "</g>\n");
    }
    bfr__svg_close(&b);
    return bfr__buf_take(&b);
}

json_t *bfr_trial_figure(const bfr_trial_view *v, bf_error *err)
{
    int det = v && v->task && !strcmp(v->task, "detection"), seg = v && v->task && !strcmp(v->task, "segmentation");
    if (!det && !seg) {
        bf_error_set(err, BF_EINVAL, "a trial's picture is of detections or masks; this result's task is %s",
                     v && v->task ? v->task : "none");
        return NULL;
    }
    if (!v->pixels || (v->channels != 1 && v->channels != 3) || v->width < 1 || v->height < 1 ||
        v->width > BFR_PICTURE_MAX_SIDE || v->height > BFR_PICTURE_MAX_SIDE) {
        bf_error_set(err, BF_EINVAL, "a trial's picture needs an image of 1 or 3 channels and sides of 1 to %d pixels, got %d x %d x %d",
                     BFR_PICTURE_MAX_SIDE, v->channels, v->height, v->width);
        return NULL;
    }
    if ((det && ((v->n_golden && !v->golden) || (v->n_faulty && !v->faulty))) || (seg && (!v->golden_mask || !v->faulty_mask))) {
        bf_error_set(err, BF_EINVAL, "a trial's picture needs the golden and the faulty %s", det ? "detections" : "masks");
        return NULL;
    }
    size_t hw = (size_t)v->height * (size_t)v->width;
    unsigned char *rgb[3] = {image_rgb(v), seg ? mask_rgb(v->golden_mask, hw) : NULL, seg ? mask_rgb(v->faulty_mask, hw) : NULL};
    char *png[3] = {NULL, NULL, NULL}, *svg = NULL, alt[400], title[160];
    json_t *fig = NULL;
    int ok = rgb[0] && (det || (rgb[1] && rgb[2]));
    for (int i = 0; ok && i < 3; i++)
        if (rgb[i] && !(png[i] = bfr__png_base64(rgb[i], v->width, v->height))) ok = 0;
    if (ok) svg = draw(v, det, (const char *const *)png, alt, sizeof alt, title, sizeof title);
    if (svg) fig = json_pack("{s:s, s:s, s:s, s:s}", "name", "trial", "title", title, "alt", alt, "svg", svg);
    for (int i = 0; i < 3; i++) free(rgb[i]), free(png[i]);
    free(svg);
    if (!fig) bf_error_set(err, BF_ENOMEM, "report: out of memory drawing trial %lld's picture", v->trial);
    return fig;
}
