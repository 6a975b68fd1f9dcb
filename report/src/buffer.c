/* A growable text buffer and XML escaping. Escaping is hand-written: it is
 * five entities and a check that each byte is allowed in XML 1.0, and the
 * libraries that do it (libxml2) would be a dependency for one function. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

static int grow(bfr__buf *b, size_t need)
{
    if (b->oom) return 0;
    if (b->len + need + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need + 1) {
        if (cap > ((size_t)-1) / 2) { b->oom = 1; return 0; }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return 0; }
    b->p = p;
    b->cap = cap;
    return 1;
}

void bfr__put(bfr__buf *b, const char *s, size_t n)
{
    if (!grow(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void bfr__puts(bfr__buf *b, const char *s) { bfr__put(b, s, strlen(s)); }

void bfr__printf(bfr__buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) { bfr__put(b, small, (size_t)n); return; }
    if (!grow(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the UTF-8 sequence at s if it is well formed and allowed in
 * XML 1.0; 0 if not. (jansson hands out valid UTF-8, but the report may be
 * given strings from elsewhere.) */
static size_t xml_char(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x20) return c == '\t' || c == '\n' || c == '\r';
    if (c < 0x80) return c == 0x7f ? 0 : 1;
    size_t n = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (!n) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && c == 0xe0 && s[1] < 0xa0) return 0;                   /* overlong */
    if (n == 3 && c == 0xed && s[1] >= 0xa0) return 0;                  /* surrogates */
    if (n == 3 && c == 0xef && s[1] == 0xbf && s[2] >= 0xbe) return 0;  /* U+FFFE, U+FFFF */
    if (n == 4 && c == 0xf0 && s[1] < 0x90) return 0;
    if (n == 4 && c == 0xf4 && s[1] >= 0x90) return 0;
    return n;
}

void bfr__xml(bfr__buf *b, const char *s, size_t max_chars)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t chars = 0;
    while (*p) {
        if (max_chars && chars == max_chars - 1 && p[xml_char(p) ? xml_char(p) : 1]) {
            bfr__puts(b, "\xe2\x80\xa6");   /* … */
            return;
        }
        size_t n = xml_char(p);
        chars++;
        if (!n) {
            /* one U+FFFD for the whole sequence (a forbidden character, an
             * overlong form), or for the one stray byte */
            size_t k = 1, want = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : *p >= 0xc0 ? 2 : 1;
            while (k < want && (p[k] & 0xc0) == 0x80) k++;
            bfr__puts(b, "\xef\xbf\xbd");
            p += k == want ? want : 1;
            continue;
        }
        switch (*p) {
        case '&': bfr__puts(b, "&amp;"); break;
        case '<': bfr__puts(b, "&lt;"); break;
        case '>': bfr__puts(b, "&gt;"); break;
        case '"': bfr__puts(b, "&quot;"); break;
        case '\'': bfr__puts(b, "&#39;"); break;
        default: bfr__put(b, (const char *)p, n);
        }
        p += n;
    }
}

void bfr__coord(bfr__buf *b, double v)
{
    if (!isfinite(v)) v = 0;
    if (v > 1e5) v = 1e5;
    if (v < -1e5) v = -1e5;
    bfr__printf(b, "%.1f", v);
}

char *bfr__buf_take(bfr__buf *b)
{
    if (b->oom) { bfr__buf_free(b); return NULL; }
    if (!b->p && !grow(b, 0)) return NULL;
    if (b->len == 0) b->p[0] = '\0';
    char *p = b->p;
    memset(b, 0, sizeof *b);
    return p;
}

void bfr__buf_free(bfr__buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
