/* Scales (data to pixels, linear or log10) and ticks at round values. */
#include <math.h>

#include "report_impl.h"

double bfr__map(const bfr__scale *s, double v)
{
    double a = s->d0, b = s->d1;
    if (s->log) {
        if (!(v > 0) || !(a > 0) || !(b > 0)) return s->r0;
        v = log10(v), a = log10(a), b = log10(b);
    }
    if (!(b != a) || !isfinite(v)) return (s->r0 + s->r1) / 2;
    return s->r0 + (v - a) / (b - a) * (s->r1 - s->r0);
}

int bfr__ticks(double *lo, double *hi, int log, double *ticks, int max)
{
    double a = *lo, b = *hi;
    if (!isfinite(a) || !isfinite(b) || fabs(a) > 1e100 || fabs(b) > 1e100) a = 0, b = 1;   /* fuzzed documents */
    if (max < 2) max = 2;
    if (a > b) { double t = a; a = b; b = t; }
    if (log) {
        if (!(a > 0)) a = b > 0 ? b / 10 : 1e-6;
        if (!(b > 0)) b = a * 10;
        int e0 = (int)floor(log10(a) + 1e-9), e1 = (int)ceil(log10(b) - 1e-9);
        if (e1 <= e0) e1 = e0 + 1;
        int step = (e1 - e0 + max - 2) / (max - 1);
        if (step < 1) step = 1;
        int n = 0;
        for (int e = e0; e <= e1 + step - 1 && n < max; e += step) ticks[n++] = pow(10, e);
        *lo = ticks[0];
        *hi = ticks[n - 1];
        return n;
    }
    if (b - a < 1e-12 * (fabs(a) + fabs(b)) || b == a) {
        double pad = a == 0 ? 1 : fabs(a) * 0.1;
        a -= pad, b += pad;
    }
    double raw = (b - a) / (max > 6 ? 5 : max - 1), mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
    double t0 = floor(a / step + 1e-9) * step, t1 = ceil(b / step - 1e-9) * step;
    int n = 0;
    for (double t = t0; t <= t1 + step / 2 && n < max; t += step) ticks[n++] = fabs(t) < step * 1e-9 ? 0 : t;
    if (n < 2) {   /* a range below the doubles' resolution: its ends, unrounded */
        ticks[0] = a, ticks[1] = b;
        n = 2;
    }
    *lo = ticks[0];
    *hi = ticks[n - 1];
    return n;
}
