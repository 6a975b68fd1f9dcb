/* Horizontal bars with interval whiskers and a value beside each: the
 * shape of the outcome, tensor and mitigation figures. */
#include <math.h>

#include "report_impl.h"

void bfr_hbar(bfr_buf *b, const bfr_scale *sx, double y, double h, double v, double lo, double hi, const char *color,
              const char *tip, const char *value_text, double text_x)
{
    double x0 = bfr_map(sx, sx->d0 < 0 && sx->d1 > 0 ? 0 : sx->d0), x1 = bfr_map(sx, fmin(fmax(v, sx->d0), sx->d1));
    bfr_puts(b, "<g class=\"bar\"><rect x=\"");
    bfr_coord(b, fmin(x0, x1));
    bfr_puts(b, "\" y=\"");
    bfr_coord(b, y);
    bfr_puts(b, "\" width=\"");
    bfr_coord(b, fabs(x1 - x0));
    bfr_puts(b, "\" height=\"");
    bfr_coord(b, h);
    bfr_printf(b, "\" fill=\"%s\" fill-opacity=\"0.85\"><title>", color);
    bfr_xml(b, tip, 0);
    bfr_puts(b, "</title></rect>\n");
    if (isfinite(lo) && isfinite(hi) && hi > lo) {
        double a = bfr_map(sx, fmax(lo, sx->d0)), c = bfr_map(sx, fmin(hi, sx->d1)), m = y + h / 2;
        bfr_puts(b, "<path stroke=\"#222\" stroke-width=\"1.3\" fill=\"none\" d=\"M");
        bfr_coord(b, a);
        bfr_puts(b, " ");
        bfr_coord(b, m);
        bfr_puts(b, "H");
        bfr_coord(b, c);
        bfr_puts(b, "M");
        bfr_coord(b, a);
        bfr_puts(b, " ");
        bfr_coord(b, y + 2);
        bfr_puts(b, "V");
        bfr_coord(b, y + h - 2);
        bfr_puts(b, "M");
        bfr_coord(b, c);
        bfr_puts(b, " ");
        bfr_coord(b, y + 2);
        bfr_puts(b, "V");
        bfr_coord(b, y + h - 2);
        bfr_puts(b, "\"/>\n");
    }
    if (value_text) bfr_svg_text(b, text_x, y + h / 2 + 4, "start", "v", value_text, 0);
    bfr_puts(b, "</g>\n");
}
