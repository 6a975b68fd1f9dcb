/* Numbers formatted for people: 4.5%, 12,800 trials, 2.5×10⁻⁵. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_impl.h"

int bfr__pct_decimals(double frac, double lo, double hi)
{
    /* the smallest non-zero of the three decides: an interval [0, 0.3%]
     * around 0% needs the decimals of its upper bound */
    double v = 1;
    if (frac > 0 && frac < v) v = frac;
    if (lo > 0 && lo < v) v = lo;
    if (!(frac > 0) && hi > 0 && hi < v) v = hi;
    return v >= 0.01 ? 1 : v >= 0.001 ? 2 : 3;
}

void bfr__pct(char *out, size_t n, double frac, int decimals, int with_sign)
{
    if (!isfinite(frac)) { snprintf(out, n, "-"); return; }
    double v = 100 * frac;
    if (fabs(v) > 1e9) v = v > 0 ? 1e9 : -1e9;
    snprintf(out, n, "%.*f%s", decimals, v, with_sign ? "%" : "");
    if (!strncmp(out, "-0", 2) && strspn(out + 2, ".0%") == strlen(out + 2)) memmove(out, out + 1, strlen(out));
}

void bfr__pct_ci(char *out, size_t n, double frac, double lo, double hi)
{
    char a[32], l[32], h[32];
    int d = bfr__pct_decimals(frac, lo, hi);
    bfr__pct(a, sizeof a, frac, d, 1);
    if (!isfinite(lo) || !isfinite(hi)) { snprintf(out, n, "%s", a); return; }
    bfr__pct(l, sizeof l, lo, d, 0);
    bfr__pct(h, sizeof h, hi, d, 0);
    snprintf(out, n, "%s [%s, %s]", a, l, h);
}

void bfr__count(char *out, size_t n, long long v)
{
    char digits[32], tmp[48];
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    int len = snprintf(digits, sizeof digits, "%llu", u), k = 0;
    if (v < 0) tmp[k++] = '-';
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) tmp[k++] = ',';
        tmp[k++] = digits[i];
    }
    tmp[k] = '\0';
    snprintf(out, n, "%s", tmp);
}

static const char *const superscript[10] = {"\xe2\x81\xb0", "\xc2\xb9", "\xc2\xb2", "\xc2\xb3", "\xe2\x81\xb4",
                                            "\xe2\x81\xb5", "\xe2\x81\xb6", "\xe2\x81\xb7", "\xe2\x81\xb8", "\xe2\x81\xb9"};

void bfr__sci(char *out, size_t n, double v)
{
    if (!isfinite(v) || v <= 0) { snprintf(out, n, "%s", v == 0 ? "0" : "-"); return; }
    int e = (int)floor(log10(v) + 1e-9);
    double m = v / pow(10, e);
    if (e > -3 && e < 4) { bfr__num(out, n, v, 3); return; }
    char exp[48] = "";
    size_t k = 0;
    if (e < 0) k += (size_t)snprintf(exp + k, sizeof exp - k, "\xe2\x81\xbb");   /* superscript minus */
    char d[16];
    snprintf(d, sizeof d, "%d", e < 0 ? -e : e);
    for (char *c = d; *c && k < sizeof exp - 4; c++) k += (size_t)snprintf(exp + k, sizeof exp - k, "%s", superscript[*c - '0']);
    if (fabs(m - 1) < 1e-6) snprintf(out, n, "10%s", exp);
    else snprintf(out, n, "%.3g\xc3\x97" "10%s", m, exp);   /* × */
}

void bfr__num(char *out, size_t n, double v, int sig)
{
    if (!isfinite(v)) { snprintf(out, n, "-"); return; }
    double a = fabs(v);
    if (a != 0 && (a < 1e-3 || a >= 1e6)) { snprintf(out, n, "%.*g", sig, v); return; }
    /* %g without the exponent: decimals for `sig` significant digits */
    int d = a == 0 ? 0 : sig - 1 - (int)floor(log10(a));
    if (d < 0) d = 0;
    snprintf(out, n, "%.*f", d, v);
    if (strchr(out, '.')) {   /* 0.50 -> 0.5, 2.0 -> 2 */
        char *e = out + strlen(out) - 1;
        while (*e == '0') *e-- = '\0';
        if (*e == '.') *e = '\0';
    }
    if (!strcmp(out, "-0")) snprintf(out, n, "0");
}
