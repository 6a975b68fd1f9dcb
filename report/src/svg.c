/* The SVG every figure shares: the document frame with its style, text,
 * axes with ticks and labels, legends. Hand-written: a chart library would
 * bring script (or a runtime) into a report that must have none. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_impl.h"

/* Okabe & Ito's palette: told apart with every common colour blindness */
const char *const bfr_palette[BFR_MAX_SERIES] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                                                 "#000000", "#F0E442", "#882255", "#44AA99", "#999933", "#AA4499"};

void bfr_svg_open(bfr_buf *b, int w, int h, const char *title, const char *desc)
{
    bfr_printf(b,
               "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
               "role=\"img\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n<title>",
               w, h, w, h);
    bfr_xml(b, title, 0);
    bfr_puts(b, "</title>\n<desc>");
    bfr_xml(b, desc, 0);
    bfr_puts(b, "</desc>\n<style>"
                ".t{font-size:15px;font-weight:bold;fill:#222}.s{font-size:12px;fill:#555}"
                ".ax{stroke:#444;stroke-width:1}.g{stroke:#e4e4e4;stroke-width:1}"
                ".tk{font-size:11px;fill:#333}.lb{font-size:12px;fill:#222}.v{font-size:11px;fill:#222}"
                ".n{font-size:11px;fill:#666;font-style:italic}"
                "</style>\n");
    bfr_printf(b, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", w, h);
}

void bfr_svg_close(bfr_buf *b) { bfr_puts(b, "</svg>\n"); }

void bfr_svg_text(bfr_buf *b, double x, double y, const char *anchor, const char *cls, const char *text, size_t max_chars)
{
    bfr_puts(b, "<text x=\"");
    bfr_coord(b, x);
    bfr_puts(b, "\" y=\"");
    bfr_coord(b, y);
    bfr_printf(b, "\" text-anchor=\"%s\" class=\"%s\">", anchor, cls);
    bfr_xml(b, text, max_chars);
    bfr_puts(b, "</text>\n");
}

static void tick_label(char *out, size_t n, double v, char fmt)
{
    if (fmt == 'p') bfr_pct(out, n, v, fabs(v * 100 - round(v * 100)) < 1e-6 ? 0 : 1, 1);
    else if (fmt == 's') bfr_sci(out, n, v);
    else bfr_num(out, n, v, 3);
}

void bfr_axis_x(bfr_buf *b, const bfr_scale *s, double y, const double *ticks, int nt, char fmt, const char *label,
                double grid_top)
{
    for (int i = 0; i < nt; i++) {
        double x = bfr_map(s, ticks[i]);
        char t[48];
        tick_label(t, sizeof t, ticks[i], fmt);
        if (grid_top < y) {
            bfr_puts(b, "<line class=\"g\" x1=\"");
            bfr_coord(b, x);
            bfr_puts(b, "\" x2=\"");
            bfr_coord(b, x);
            bfr_puts(b, "\" y1=\"");
            bfr_coord(b, grid_top);
            bfr_puts(b, "\" y2=\"");
            bfr_coord(b, y);
            bfr_puts(b, "\"/>\n");
        }
        bfr_puts(b, "<line class=\"ax\" x1=\"");
        bfr_coord(b, x);
        bfr_puts(b, "\" x2=\"");
        bfr_coord(b, x);
        bfr_puts(b, "\" y1=\"");
        bfr_coord(b, y);
        bfr_puts(b, "\" y2=\"");
        bfr_coord(b, y + 5);
        bfr_puts(b, "\"/>\n");
        bfr_svg_text(b, x, y + 18, "middle", "tk", t, 0);
    }
    bfr_puts(b, "<line class=\"ax\" x1=\"");
    bfr_coord(b, s->r0);
    bfr_puts(b, "\" x2=\"");
    bfr_coord(b, s->r1);
    bfr_puts(b, "\" y1=\"");
    bfr_coord(b, y);
    bfr_puts(b, "\" y2=\"");
    bfr_coord(b, y);
    bfr_puts(b, "\"/>\n");
    bfr_svg_text(b, (s->r0 + s->r1) / 2, y + 36, "middle", "lb", label, 0);
}

void bfr_axis_y(bfr_buf *b, const bfr_scale *s, double x, const double *ticks, int nt, char fmt, const char *label,
                double grid_right)
{
    for (int i = 0; i < nt; i++) {
        double y = bfr_map(s, ticks[i]);
        char t[48];
        tick_label(t, sizeof t, ticks[i], fmt);
        if (grid_right > x) {
            bfr_puts(b, "<line class=\"g\" x1=\"");
            bfr_coord(b, x);
            bfr_puts(b, "\" x2=\"");
            bfr_coord(b, grid_right);
            bfr_puts(b, "\" y1=\"");
            bfr_coord(b, y);
            bfr_puts(b, "\" y2=\"");
            bfr_coord(b, y);
            bfr_puts(b, "\"/>\n");
        }
        bfr_puts(b, "<line class=\"ax\" x1=\"");
        bfr_coord(b, x - 5);
        bfr_puts(b, "\" x2=\"");
        bfr_coord(b, x);
        bfr_puts(b, "\" y1=\"");
        bfr_coord(b, y);
        bfr_puts(b, "\" y2=\"");
        bfr_coord(b, y);
        bfr_puts(b, "\"/>\n");
        bfr_svg_text(b, x - 8, y + 4, "end", "tk", t, 0);
    }
    bfr_puts(b, "<line class=\"ax\" x1=\"");
    bfr_coord(b, x);
    bfr_puts(b, "\" x2=\"");
    bfr_coord(b, x);
    bfr_puts(b, "\" y1=\"");
    bfr_coord(b, s->r0);
    bfr_puts(b, "\" y2=\"");
    bfr_coord(b, s->r1);
    bfr_puts(b, "\"/>\n");
    /* the label runs up the left edge */
    double cy = (s->r0 + s->r1) / 2;
    bfr_puts(b, "<text class=\"lb\" text-anchor=\"middle\" transform=\"translate(");
    bfr_coord(b, x - 52);
    bfr_puts(b, ",");
    bfr_coord(b, cy);
    bfr_puts(b, ") rotate(-90)\">");
    bfr_xml(b, label, 0);
    bfr_puts(b, "</text>\n");
}

/* an entry's width: the swatch, and about 7 px a character at 12 px */
static double entry_width(const char *label)
{
    size_t chars = strlen(label);
    if (chars > BFR_LABEL_CHARS) chars = BFR_LABEL_CHARS;
    return 34 + 7.0 * (double)chars;
}

int bfr_legend_rows(char *const *labels, int n, double width)
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

void bfr_legend(bfr_buf *b, double x, double y, double width, char *const *labels, const char *const *colors, int n,
                int dashed_first)
{
    double cx = x, cy = y;
    for (int i = 0; i < n; i++) {
        double w = entry_width(labels[i]);
        if (cx > x && cx + w > x + width) cx = x, cy += 18;
        bfr_printf(b, "<g class=\"legend\"><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"%s/>",
                   cx, cx + 22, cy - 4, cy - 4, colors[i],
                   dashed_first && i == 0 ? " stroke-dasharray=\"6 3\"" : "");
        bfr_svg_text(b, cx + 28, cy, "start", "lb", labels[i], BFR_LABEL_CHARS);
        bfr_puts(b, "</g>\n");
        cx += w;
    }
}
