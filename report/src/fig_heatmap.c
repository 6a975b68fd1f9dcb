/* Figure: tensor x bit position. Each cell the critical rate of the faults
 * whose lowest flipped bit is that bit, in that tensor (by_tensor[].by_bit);
 * rows in the order of the tensor bars, the bits of the number format
 * labelled (sign, exponent, mantissa) most significant first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

#define W 760
#define L 270
#define T 96
#define RH 18

/* light to dark: a sequential scale that prints in grey too */
static void color_of(double t, char *out, size_t n)
{
    static const double stops[3][3] = {{255, 247, 236}, {252, 141, 89}, {127, 0, 0}};
    if (!(t >= 0)) t = 0;
    if (t > 1) t = 1;
    int k = t < 0.5 ? 0 : 1;
    double u = t < 0.5 ? t * 2 : (t - 0.5) * 2;
    int c[3];
    for (int i = 0; i < 3; i++) c[i] = (int)lround(stops[k][i] + u * (stops[k + 1][i] - stops[k][i]));
    snprintf(out, n, "#%02x%02x%02x", c[0], c[1], c[2]);
}

/* The fields of a float format, most significant bit first */
typedef struct field {
    const char *name;
    int hi, lo;
} field;

static int fields_of(const char *repr, int bits, field *f)
{
    if (repr && !strcmp(repr, "fp32") && bits == 32) {
        f[0] = (field){"sign", 31, 31}, f[1] = (field){"exponent", 30, 23}, f[2] = (field){"mantissa", 22, 0};
        return 3;
    }
    if (repr && !strcmp(repr, "fp16") && bits == 16) {
        f[0] = (field){"sign", 15, 15}, f[1] = (field){"exponent", 14, 10}, f[2] = (field){"mantissa", 9, 0};
        return 3;
    }
    if (repr && !strcmp(repr, "bf16") && bits == 16) {
        f[0] = (field){"sign", 15, 15}, f[1] = (field){"exponent", 14, 7}, f[2] = (field){"mantissa", 6, 0};
        return 3;
    }
    return 0;
}

static int one(const bfr__set *set, size_t d, json_t *figs)
{
    int oom = 0;
    size_t n = 0;
    bfr__tensor_row *rows = bfr__tensor_rows(set, d, &n, &oom);
    if (!rows) return oom;
    size_t shown = n > set->max_tensors ? set->max_tensors : n;
    /* cells[row][bit]: trials and critical */
    long long (*cells)[64][2] = calloc(shown, sizeof *cells);
    if (!cells) { free(rows); return 1; }
    int bits = 0, any = 0;
    size_t i, j;
    const json_t *g;
    json_array_foreach(json_object_get(set->docs[d].campaign, "sites"), i, g) {
        json_int_t sb = json_integer_value(json_object_get(g, "bits"));
        if (sb > bits && sb <= 64) bits = (int)sb;
    }
    double vmax = 0;
    for (size_t r = 0; r < shown; r++)
        json_array_foreach(json_object_get(rows[r].group, "by_bit"), j, g) {
            json_int_t bit = json_integer_value(json_object_get(g, "bit")), t = json_integer_value(json_object_get(g, "trials"));
            json_int_t c = json_integer_value(json_object_get(json_object_get(g, "outcomes"), "critical"));
            if (bit < 0 || bit >= 64 || t <= 0 || t > (1LL << 40) || c < 0 || c > t) continue;   /* 2^40 trials a cell: no sum of a document's cells overflows */
            cells[r][bit][0] += t, cells[r][bit][1] += c;
            if (bit + 1 > bits) bits = (int)bit + 1;
            any = 1;
        }
    for (size_t r = 0; r < shown; r++)
        for (int k = 0; k < 64; k++)
            if (cells[r][k][0]) vmax = fmax(vmax, (double)cells[r][k][1] / (double)cells[r][k][0]);
    if (!any) { free(rows); free(cells); return 0; }
    double lo = 0, hi = vmax > 0 ? vmax : 1, ticks[8];
    int nt = bfr__ticks(&lo, &hi, 0, ticks, 6);
    vmax = hi;
    const char *repr = json_string_value(json_object_get(set->docs[d].campaign, "representation"));
    field f[3];
    int nf = fields_of(repr, bits, f);
    double cw = fmin(22, (W - L - 24.0) / bits);
    int plot = (int)shown * RH, h = T + plot + 96;
    char title[160], sub[256], alt[512], name[32];
    if (set->n_docs > 1) snprintf(title, sizeof title, "Tensor x bit: %.80s", set->docs[d].label);
    else snprintf(title, sizeof title, "Which bits matter, in which tensor");
    snprintf(sub, sizeof sub, "critical rate of the faults at each bit position (the lowest flipped bit) of each tensor; grey: no fault there");
    snprintf(alt, sizeof alt, "Heatmap of the critical rate by tensor (%zu rows) and bit position (%d columns)", shown, bits);
    bfr__buf b = {0};
    bfr__svg_open(&b, W, h, title, sub);
    bfr__svg_text(&b, 16, 24, "start", "t", title, 0);
    bfr__svg_text(&b, 16, 44, "start", "s", sub, 0);
    /* column k is bit bits-1-k: the most significant bit on the left, as a number is written */
#define XB(bit) (L + (bits - 1 - (bit)) * cw)
    for (int k = 0; k < nf; k++) {
        double x0 = XB(f[k].hi), x1 = XB(f[k].lo) + cw;
        bfr__printf(&b, "<path stroke=\"#666\" fill=\"none\" d=\"M%.1f %dV%dH%.1fV%d\"/>\n", x0 + 1, T - 26, T - 30, x1 - 1, T - 26);
        bfr__svg_text(&b, (x0 + x1) / 2, T - 34, "middle", "tk", x1 - x0 > 40 ? f[k].name : f[k].name[0] == 's' ? "s" : "e",
                     0);
    }
    for (int bit = bits - 1; bit >= 0; bit--)
        if (bit % 4 == 0 || bit == bits - 1) {
            char t[16];
            snprintf(t, sizeof t, "%d", bit);
            bfr__svg_text(&b, XB(bit) + cw / 2, T - 6, "middle", "tk", t, 0);
        }
    for (size_t r = 0; r < shown; r++) {
        char gl[160];
        const char *tn = bfr__tensor_name(rows[r].group, gl, sizeof gl);
        double y = T + (double)r * RH;
        bfr__svg_text(&b, L - 8, y + RH / 2.0 + 4, "end", "lb", tn, BFR_LABEL_CHARS);
        for (int bit = bits - 1; bit >= 0; bit--) {
            long long t = cells[r][bit][0], c = cells[r][bit][1];
            char col[16], tip[300], kc[32], nc[32], v[32];
            if (t) color_of((double)c / (double)t / vmax, col, sizeof col);
            else snprintf(col, sizeof col, "#eeeeee");
            bfr__printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.5\"><title>",
                       XB(bit), y, cw, RH, col);
            bfr__count(kc, sizeof kc, c), bfr__count(nc, sizeof nc, t);
            bfr__pct(v, sizeof v, t ? (double)c / (double)t : 0, 1, 1);
            if (t) snprintf(tip, sizeof tip, "%.120s, bit %d: %s of %s faults critical (%s)", tn, bit, kc, nc, v);
            else snprintf(tip, sizeof tip, "%.120s, bit %d: no fault", tn, bit);
            bfr__xml(&b, tip, 0);
            bfr__puts(&b, "</title></rect>\n");
        }
    }
    bfr__svg_text(&b, L + bits * cw / 2, T + plot + 20, "middle", "lb", "bit position (most significant on the left)", 0);
    /* the colour scale: ten steps and its ticks */
    double lx = L, ly = T + plot + 44, lw = fmin(300, bits * cw);
    for (int k = 0; k < 10; k++) {
        char col[16];
        color_of((k + 0.5) / 10, col, sizeof col);
        bfr__printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" fill=\"%s\"/>\n", lx + k * lw / 10, ly, lw / 10 + 0.5, col);
    }
    bfr__scale sc = {0, vmax, lx, lx + lw, 0};
    bfr__axis_x(&b, &sc, ly + 12, ticks, nt, 'p', "critical rate (% of the faults in the cell)", ly + 12);
    bfr__svg_text(&b, L - 8, ly + 10, "end", "lb", "colour scale", 0);
    if (n > shown) {
        char note[96];
        snprintf(note, sizeof note, "the %zu most vulnerable of %zu tensors (as in the bars)", shown, n);
        bfr__svg_text(&b, W - 16, h - 8, "end", "n", note, 0);
    }
    bfr__svg_close(&b);
    free(rows);
    free(cells);
    char *svg = bfr__buf_take(&b);
    if (!svg) return 1;
    if (d == 0) snprintf(name, sizeof name, "heatmap");
    else snprintf(name, sizeof name, "heatmap_%zu", d + 1);
    return bfr__fig_add(figs, name, title, alt, svg);
#undef XB
}

int bfr__fig_heatmap(const bfr__set *set, json_t *figs)
{
    for (size_t d = 0; d < set->n_docs; d++)
        if (one(set, d, figs)) return 1;
    return 0;
}
