/* The SVG every figure shares: the document frame with its style, text,
 * axes with ticks and labels, legends. Hand-written: a chart library would
 * bring script (or a runtime) into a report that must have none. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_impl.h"

/* Okabe & Ito's palette: told apart with every common colour blindness */
const char *const bfr__palette[BFR_MAX_SERIES] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                                                 "#000000", "#F0E442", "#882255", "#44AA99", "#999933", "#AA4499"};

void bfr__svg_open(bfr__buf *b, int w, int h, const char *title, const char *desc)
{
    bfr__printf(b,
               "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
               "role=\"img\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n<title>",
               w, h, w, h);
    bfr__xml(b, title, 0);
    bfr__puts(b, "</title>\n<desc>");
    bfr__xml(b, desc, 0);
    /* classes prefixed: a page that shows several figures inline (bitflipd's)
     * keeps its own .bar or .legend */
    bfr__puts(b, "</desc>\n<style>"
                ".bfr-t{font-size:15px;font-weight:bold;fill:#222}.bfr-s{font-size:12px;fill:#555}"
                ".bfr-ax{stroke:#444;stroke-width:1}.bfr-g{stroke:#e4e4e4;stroke-width:1}"
                ".bfr-tk{font-size:11px;fill:#333}.bfr-lb{font-size:12px;fill:#222}.bfr-v{font-size:11px;fill:#222}"
                ".bfr-n{font-size:11px;fill:#666;font-style:italic}"
                "</style>\n");
    bfr__printf(b, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", w, h);
}

void bfr__svg_close(bfr__buf *b) { bfr__puts(b, "</svg>\n"); }

void bfr__svg_text(bfr__buf *b, double x, double y, const char *anchor, const char *cls, const char *text, size_t max_chars)
{
    bfr__puts(b, "<text x=\"");
    bfr__coord(b, x);
    bfr__puts(b, "\" y=\"");
    bfr__coord(b, y);
    bfr__printf(b, "\" text-anchor=\"%s\" class=\"bfr-%s\">", anchor, cls);
    bfr__xml(b, text, max_chars);
    bfr__puts(b, "</text>\n");
}

static void tick_label(char *out, size_t n, double v, char fmt)
{
    if (fmt == 'p') bfr__pct(out, n, v, fabs(v * 100 - round(v * 100)) < 1e-6 ? 0 : 1, 1);
    else if (fmt == 's') bfr__sci(out, n, v);
    else bfr__num(out, n, v, 3);
}

void bfr__axis_x(bfr__buf *b, const bfr__scale *s, double y, const double *ticks, int nt, char fmt, const char *label,
                double grid_top)
{
    for (int i = 0; i < nt; i++) {
        double x = bfr__map(s, ticks[i]);
        char t[48];
        tick_label(t, sizeof t, ticks[i], fmt);
        if (grid_top < y) {
            bfr__puts(b, "<line class=\"bfr-g\" x1=\"");
            bfr__coord(b, x);
            bfr__puts(b, "\" x2=\"");
            bfr__coord(b, x);
            bfr__puts(b, "\" y1=\"");
            bfr__coord(b, grid_top);
            bfr__puts(b, "\" y2=\"");
            bfr__coord(b, y);
            bfr__puts(b, "\"/>\n");
        }
        bfr__puts(b, "<line class=\"bfr-ax\" x1=\"");
        bfr__coord(b, x);
        bfr__puts(b, "\" x2=\"");
        bfr__coord(b, x);
        bfr__puts(b, "\" y1=\"");
        bfr__coord(b, y);
        bfr__puts(b, "\" y2=\"");
        bfr__coord(b, y + 5);
        bfr__puts(b, "\"/>\n");
        bfr__svg_text(b, x, y + 18, "middle", "tk", t, 0);
    }
    bfr__puts(b, "<line class=\"bfr-ax\" x1=\"");
    bfr__coord(b, s->r0);
    bfr__puts(b, "\" x2=\"");
    bfr__coord(b, s->r1);
    bfr__puts(b, "\" y1=\"");
    bfr__coord(b, y);
    bfr__puts(b, "\" y2=\"");
    bfr__coord(b, y);
    bfr__puts(b, "\"/>\n");
    bfr__svg_text(b, (s->r0 + s->r1) / 2, y + 36, "middle", "lb", label, 0);
}

void bfr__axis_y(bfr__buf *b, const bfr__scale *s, double x, const double *ticks, int nt, char fmt, const char *label,
                double grid_right)
{
    for (int i = 0; i < nt; i++) {
        double y = bfr__map(s, ticks[i]);
        char t[48];
        tick_label(t, sizeof t, ticks[i], fmt);
        if (grid_right > x) {
            bfr__puts(b, "<line class=\"bfr-g\" x1=\"");
            bfr__coord(b, x);
            bfr__puts(b, "\" x2=\"");
            bfr__coord(b, grid_right);
            bfr__puts(b, "\" y1=\"");
            bfr__coord(b, y);
            bfr__puts(b, "\" y2=\"");
            bfr__coord(b, y);
            bfr__puts(b, "\"/>\n");
        }
        bfr__puts(b, "<line class=\"bfr-ax\" x1=\"");
        bfr__coord(b, x - 5);
        bfr__puts(b, "\" x2=\"");
        bfr__coord(b, x);
        bfr__puts(b, "\" y1=\"");
        bfr__coord(b, y);
        bfr__puts(b, "\" y2=\"");
        bfr__coord(b, y);
        bfr__puts(b, "\"/>\n");
        bfr__svg_text(b, x - 8, y + 4, "end", "tk", t, 0);
    }
    bfr__puts(b, "<line class=\"bfr-ax\" x1=\"");
    bfr__coord(b, x);
    bfr__puts(b, "\" x2=\"");
    bfr__coord(b, x);
    bfr__puts(b, "\" y1=\"");
    bfr__coord(b, s->r0);
    bfr__puts(b, "\" y2=\"");
    bfr__coord(b, s->r1);
    bfr__puts(b, "\"/>\n");
    /* the label runs up the left edge */
    double cy = (s->r0 + s->r1) / 2;
    bfr__puts(b, "<text class=\"bfr-lb\" text-anchor=\"middle\" transform=\"translate(");
    bfr__coord(b, x - 52);
    bfr__puts(b, ",");
    bfr__coord(b, cy);
    bfr__puts(b, ") rotate(-90)\">");
    bfr__xml(b, label, 0);
    bfr__puts(b, "</text>\n");
}

/* an entry's width: the swatch, and about 7 px a character at 12 px */
static double entry_width(const char *label)
{
    size_t chars = strlen(label);
    if (chars > BFR_LABEL_CHARS) chars = BFR_LABEL_CHARS;
    return 34 + 7.0 * (double)chars;
}

int bfr__legend_rows(char *const *labels, int n, double width)
{
    double cx = 0;
    int rows = n > 0;
    for (int i = 0; i < n; i++) {
        double w = entry_width(labels[i]);
        if (cx > 0 && cx + w > width) cx = 0, rows++;
        cx += w;
    }
    return rows;
}

void bfr__legend(bfr__buf *b, double x, double y, double width, char *const *labels, const char *const *colors, int n,
                int dashed_first)
{
    double cx = x, cy = y;
    for (int i = 0; i < n; i++) {
        double w = entry_width(labels[i]);
        if (cx > x && cx + w > x + width) cx = x, cy += 18;
        bfr__printf(b, "<g class=\"bfr-legend\"><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"%s/>",
                   cx, cx + 22, cy - 4, cy - 4, colors[i],
                   dashed_first && i == 0 ? " stroke-dasharray=\"6 3\"" : "");
        bfr__svg_text(b, cx + 28, cy, "start", "lb", labels[i], BFR_LABEL_CHARS);
        bfr__puts(b, "</g>\n");
        cx += w;
    }
}
