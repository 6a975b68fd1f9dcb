/* Horizontal bars with interval whiskers and a value beside each: the
 * shape of the outcome, tensor and mitigation figures. */
#include <math.h>

#include "report_impl.h"

void bfr__hbar(bfr__buf *b, const bfr__scale *sx, double y, double h, double v, double lo, double hi, const char *color,
              const char *tip, const char *value_text, double text_x)
{
    double x0 = bfr__map(sx, sx->d0 < 0 && sx->d1 > 0 ? 0 : sx->d0), x1 = bfr__map(sx, fmin(fmax(v, sx->d0), sx->d1));
    bfr__puts(b, "<g class=\"bfr-bar\"><rect x=\"");
    bfr__coord(b, fmin(x0, x1));
    bfr__puts(b, "\" y=\"");
    bfr__coord(b, y);
    bfr__puts(b, "\" width=\"");
    bfr__coord(b, fabs(x1 - x0));
    bfr__puts(b, "\" height=\"");
    bfr__coord(b, h);
    bfr__printf(b, "\" fill=\"%s\" fill-opacity=\"0.85\"><title>", color);
    bfr__xml(b, tip, 0);
    bfr__puts(b, "</title></rect>\n");
    if (isfinite(lo) && isfinite(hi) && hi > lo) {
        double a = bfr__map(sx, fmax(lo, sx->d0)), c = bfr__map(sx, fmin(hi, sx->d1)), m = y + h / 2;
        bfr__puts(b, "<path stroke=\"#222\" stroke-width=\"1.3\" fill=\"none\" d=\"M");
        bfr__coord(b, a);
        bfr__puts(b, " ");
        bfr__coord(b, m);
        bfr__puts(b, "H");
        bfr__coord(b, c);
        bfr__puts(b, "M");
        bfr__coord(b, a);
        bfr__puts(b, " ");
        bfr__coord(b, y + 2);
        bfr__puts(b, "V");
        bfr__coord(b, y + h - 2);
        bfr__puts(b, "M");
        bfr__coord(b, c);
        bfr__puts(b, " ");
        bfr__coord(b, y + 2);
        bfr__puts(b, "V");
        bfr__coord(b, y + h - 2);
        bfr__puts(b, "\"/>\n");
    }
    if (value_text) bfr__svg_text(b, text_x, y + h / 2 + 4, "start", "v", value_text, 0);
    bfr__puts(b, "</g>\n");
}
