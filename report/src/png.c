/* PNG for the pictures of a trial (fig_trial.c): 8-bit RGB, every row
 * filter 0, the zlib stream in stored (uncompressed) blocks, so no deflate
 * library is needed; then base64 for a data: URI inside the SVG (an image
 * in the document, not an external reference). A 320 x 320 image is about
 * 410 kB of text: the price of a report that fetches nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n)
{
    /* bitwise, no table: a few megabytes at most, and no global */
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = crc & 1 ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    return crc;
}

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* a chunk: length, type, data, CRC of type and data */
static unsigned char *chunk(unsigned char *o, const char *type, const unsigned char *data, size_t n)
{
    be32(o, (uint32_t)n);
    memcpy(o + 4, type, 4);
    if (n) memcpy(o + 8, data, n);
    be32(o + 8 + n, crc_update(0xFFFFFFFFu, o + 4, n + 4) ^ 0xFFFFFFFFu);
    return o + 12 + n;
}

static char *base64(const unsigned char *p, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = a[v >> 18 & 63];
        *o++ = a[v >> 12 & 63];
        *o++ = i + 1 < n ? a[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? a[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

char *bfr__png_base64(const unsigned char *rgb, int width, int height)
{
    if (width <= 0 || height <= 0 || width > BFR_PICTURE_MAX_SIDE || height > BFR_PICTURE_MAX_SIDE) return NULL;
    size_t row = (size_t)width * 3 + 1, raw = row * (size_t)height;
    size_t blocks = (raw + 65534) / 65535, z = 2 + raw + 5 * blocks + 4;
    unsigned char *zb = malloc(z), *png = malloc(8 + 25 + 12 + z + 12);
    char *out = NULL;
    if (!zb || !png) goto done;
    unsigned char *q = zb;
    *q++ = 0x78, *q++ = 0x01;   /* deflate, 32K window, no dictionary; check bits make it a multiple of 31 */
    uint32_t s1 = 1, s2 = 0;    /* Adler-32 of the raw rows */
    size_t left = raw, y = 0, x = 0;
    while (left) {
        size_t n = left > 65535 ? 65535 : left;
        left -= n;
        *q++ = left ? 0 : 1;   /* BFINAL on the last, BTYPE 00: stored */
        *q++ = (unsigned char)n, *q++ = (unsigned char)(n >> 8);
        *q++ = (unsigned char)~n, *q++ = (unsigned char)(~n >> 8);
        for (size_t i = 0; i < n; i++) {
            /* byte x of row y: the filter byte (0), then the pixels */
            unsigned char v = x == 0 ? 0 : rgb[y * (size_t)width * 3 + x - 1];
            *q++ = v;
            s1 = (s1 + v) % 65521, s2 = (s2 + s1) % 65521;
            if (++x == row) x = 0, y++;
        }
    }
    be32(q, s2 << 16 | s1);
    q += 4;
    unsigned char ihdr[13], *o = png;
    be32(ihdr, (uint32_t)width), be32(ihdr + 4, (uint32_t)height);
    ihdr[8] = 8, ihdr[9] = 2, ihdr[10] = ihdr[11] = ihdr[12] = 0;   /* 8 bits, RGB, deflate, filter 0, no interlace */
    memcpy(o, "\x89PNG\r\n\x1a\n", 8);
    o = chunk(o + 8, "IHDR", ihdr, 13);
    o = chunk(o, "IDAT", zb, (size_t)(q - zb));
    o = chunk(o, "IEND", NULL, 0);
    out = base64(png, (size_t)(o - png));
done:
    free(zb);
    free(png);
    return out;
}
