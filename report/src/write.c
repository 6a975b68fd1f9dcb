/* Reports as files: one self-contained HTML page (figures inline as SVG,
 * CSS inline, no script, no network), or Markdown with the figures as SVG
 * files beside it (for a pull-request comment). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/bitflip.h"
#include "report_impl.h"

static const char css[] =
    "body{margin:0;background:#f6f6f4;color:#222;font:15px/1.45 'DejaVu Sans',Helvetica,Arial,sans-serif}"
    "main{max-width:820px;margin:0 auto;padding:24px 16px 48px}"
    "h1{font-size:24px;margin:0 0 12px}h2{font-size:18px;margin:0 0 8px}"
    ".headline{font-size:18px;background:#fff;border-left:5px solid #D55E00;padding:12px 16px;margin:0 0 20px}"
    "table{border-collapse:collapse;margin:0 0 24px;font-size:13px;background:#fff;width:100%}"
    "th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}"
    "td.path{overflow-wrap:anywhere}"
    "td.num{text-align:right;white-space:nowrap}"
    "figure{background:#fff;margin:0 0 24px;padding:8px;border:1px solid #e2e2e2}"
    "figure svg{display:block;max-width:100%;height:auto}"
    "figcaption{font-size:13px;color:#555;padding:6px 4px 0}"
    "footer{font-size:13px;color:#555}"
    "dt{font-weight:bold}dd{margin:0 0 6px 16px}";

static const char xmlns[] = " xmlns=\"http://www.w3.org/2000/svg\"";

/* A model or dataset as the result names it: a path, or a daemon's id (a
 * long hash) cut to 12 characters as bitflipd's listings show it */
static void name_or_id(bfr__buf *b, const char *s)
{
    if (s && strlen(s) >= 32 && strspn(s, "0123456789abcdef") == strlen(s)) {
        bfr__printf(b, "%.12s\xe2\x80\xa6", s);
        return;
    }
    bfr__xml(b, s, 0);
}

/* One row per result: what ran, so a reader knows what the figures are of */
static void inputs_html(bfr__buf *b, const bfr__set *set)
{
    bfr__puts(b, "<table><thead><tr><th>result</th><th>model</th><th>dataset</th><th>faults</th><th>trials</th>"
                "<th>seed</th></tr></thead><tbody>\n");
    for (size_t i = 0; i < set->n_docs; i++) {
        const json_t *c = set->docs[i].campaign, *s = json_object_get(set->docs[i].root, "summary");
        char tc[32], faults[200];
        const char *fm = json_string_value(json_object_get(c, "fault_model"));
        const char *tg = json_string_value(json_object_get(c, "target"));
        const char *rp = json_string_value(json_object_get(c, "representation"));
        bfr__count(tc, sizeof tc, json_integer_value(json_object_get(s, "trials")));
        snprintf(faults, sizeof faults, "%.40s in %.20s (%.10s)", fm ? fm : "?", tg ? tg : "?", rp ? rp : "?");
        bfr__puts(b, "<tr><td>");
        bfr__xml(b, set->docs[i].label, 0);
        bfr__puts(b, "</td><td class=\"path\">");
        name_or_id(b, json_string_value(json_object_get(c, "model")));
        bfr__puts(b, "</td><td class=\"path\">");
        name_or_id(b, json_string_value(json_object_get(c, "dataset")));
        bfr__puts(b, "</td><td>");
        bfr__xml(b, faults, 0);
        bfr__printf(b, "</td><td class=\"num\">%s</td><td class=\"num\">%lld</td></tr>\n", tc,
                   (long long)json_integer_value(json_object_get(c, "seed")));
    }
    bfr__puts(b, "</tbody></table>\n");
}

static const char metrics_title[] = "Metrics: golden, and the mean under faults with its interval";
static const char metrics_note[] =
    "A mean is over the trials that gave a finite value (a perplexity that overflowed is left out: that trial is "
    "DUE). generation_match, first_divergence and edit_distance compare each trial's greedy decoding of every "
    "prompt with the golden one (docs/LM.md).";

/* The task metrics (metrics.c), when the results have any */
static void metrics_html(bfr__buf *b, const bfr__set *set)
{
    bfr__metric_row rows[BFR__MAX_METRIC_ROWS];
    int n = bfr__metric_rows(set, rows, BFR__MAX_METRIC_ROWS);
    if (!n) return;
    bfr__printf(b, "<h2>%s</h2>\n<table id=\"metrics\"><thead><tr><th>result</th><th>metric</th><th>golden</th>"
                   "<th>under faults</th><th>interval</th><th>trials</th></tr></thead><tbody>\n", metrics_title);
    for (int i = 0; i < n; i++) {
        bfr__puts(b, "<tr><td>");
        bfr__xml(b, set->docs[rows[i].doc].label, 0);
        bfr__printf(b, "</td><td>%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
                       "<td class=\"num\">%s</td></tr>\n",
                    rows[i].name, rows[i].golden, rows[i].mean, rows[i].ci, rows[i].over);
    }
    bfr__printf(b, "</tbody></table>\n<p>%s</p>\n", metrics_note);
}

static void md_text(bfr__buf *b, const char *s);

static void metrics_md(bfr__buf *b, const bfr__set *set)
{
    bfr__metric_row rows[BFR__MAX_METRIC_ROWS];
    int n = bfr__metric_rows(set, rows, BFR__MAX_METRIC_ROWS);
    if (!n) return;
    bfr__printf(b, "\n## %s\n\n| result | metric | golden | under faults | interval | trials |\n|---|---|---:|---:|---:|---:|\n",
                metrics_title);
    for (int i = 0; i < n; i++) {
        bfr__puts(b, "| ");
        md_text(b, set->docs[rows[i].doc].label);
        bfr__puts(b, " | ");
        md_text(b, rows[i].name);
        bfr__printf(b, " | %s | %s | %s | %s |\n", rows[i].golden, rows[i].mean, rows[i].ci, rows[i].over);
    }
    bfr__puts(b, "\n");
    md_text(b, metrics_note);
    bfr__puts(b, "\n");
}

static const char glossary[] =
    "masked: the outputs are bit-identical to the fault-free run; tolerable: outputs differ but no prediction changes; "
    "critical: a prediction changes (or the task metric moves past the campaign's threshold); DUE (detected "
    "unrecoverable error): an output is NaN or Inf, or a protection's check fired. Intervals are 95% unless the "
    "campaign set another confidence: Wilson score intervals for rates, Student t for means, a paired bootstrap for "
    "recovery.";

static bf_status html(const bfr__set *set, const json_t *figs, const char *headline, const char *title, FILE *out, bf_error *err)
{
    bfr__buf b = {0};
    bfr__puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
                 "<meta name=\"generator\" content=\"bitflip " BITFLIP_VERSION "\"/>\n<title>");
    bfr__xml(&b, title, 0);
    bfr__printf(&b, "</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n<h1>", css);
    bfr__xml(&b, title, 0);
    bfr__puts(&b, "</h1>\n<p class=\"headline\">");
    bfr__xml(&b, headline, 0);
    bfr__puts(&b, "</p>\n");
    inputs_html(&b, set);
    metrics_html(&b, set);
    size_t i;
    const json_t *f;
    json_array_foreach(figs, i, f) {
        const char *svg = json_string_value(json_object_get(f, "svg")), *x = strstr(svg, xmlns);
        bfr__puts(&b, "<figure id=\"fig-");
        bfr__xml(&b, json_string_value(json_object_get(f, "name")), 0);
        bfr__puts(&b, "\">\n");
        /* inline SVG takes its namespace from HTML: the attribute (a URL,
         * though never fetched) is left out so the page names no address */
        if (x) {
            bfr__put(&b, svg, (size_t)(x - svg));
            bfr__puts(&b, x + strlen(xmlns));
        } else {
            bfr__puts(&b, svg);
        }
        bfr__puts(&b, "<figcaption>");
        bfr__xml(&b, json_string_value(json_object_get(f, "alt")), 0);
        bfr__puts(&b, "</figcaption>\n</figure>\n");
    }
    bfr__puts(&b, "<footer><p>");
    bfr__xml(&b, glossary, 0);
    bfr__puts(&b, "</p><p>Written by <code>bitflip report</code>, bitflip " BITFLIP_VERSION
                 ". Hover over a bar, point or cell for its counts.</p></footer>\n</main>\n</body>\n</html>\n");
    char *text = bfr__buf_take(&b);
    if (!text) return bf_error_set(err, BF_ENOMEM, "report: out of memory writing the HTML");
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, out) == n;
    free(text);
    if (!ok || fflush(out) != 0) return bf_error_set(err, BF_EIO, "report: writing the HTML failed: %s", strerror(errno));
    return BF_OK;
}

/* Markdown text: HTML-special characters as entities (GitHub renders
 * HTML in Markdown) and Markdown's own escaped, lines joined */
static void md_text(bfr__buf *b, const char *s)
{
    bfr__buf t = {0};
    bfr__xml(&t, s, 0);
    for (const char *p = t.p ? t.p : ""; *p; p++) {
        if (*p == '&') {   /* an entity bfr__xml wrote: kept whole, or Markdown would show it */
            const char *e = strchr(p, ';');
            size_t n = e ? (size_t)(e - p) + 1 : 1;
            bfr__put(b, p, n);
            p += n - 1;
            continue;
        }
        if (*p == '\n' || *p == '\r') { bfr__puts(b, " "); continue; }
        if (strchr("\\`*_[]()#|!~{}+-", *p)) bfr__put(b, "\\", 1);
        bfr__put(b, p, 1);
    }
    if (t.oom) b->oom = 1;
    bfr__buf_free(&t);
}

/* a relative link: characters that would end or break a Markdown link,
 * percent-encoded */
static void md_link(bfr__buf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || strchr("()<>[]\"'%\\", *p) || *p >= 0x7f) bfr__printf(b, "%%%02X", *p);
        else bfr__put(b, (const char *)p, 1);
    }
}

static bf_status markdown(const bfr__set *set, const json_t *figs, const char *headline, const char *title, FILE *out,
                          const char *figdir, const char *figlink, bf_error *err)
{
    if (!figdir) return bf_error_set(err, BF_EINVAL, "report: Markdown needs a directory for its SVG files");
    bfr__buf b = {0};
    bfr__puts(&b, "# ");
    md_text(&b, title);
    bfr__puts(&b, "\n\n**");
    md_text(&b, headline);
    bfr__puts(&b, "**\n\n| result | model | dataset | faults | trials |\n|---|---|---|---|---:|\n");
    for (size_t i = 0; i < set->n_docs; i++) {
        const json_t *c = set->docs[i].campaign;
        char tc[32];
        bfr__count(tc, sizeof tc, json_integer_value(json_object_get(json_object_get(set->docs[i].root, "summary"), "trials")));
        bfr__puts(&b, "| ");
        md_text(&b, set->docs[i].label);
        bfr__puts(&b, " | ");
        md_text(&b, json_string_value(json_object_get(c, "model")));
        bfr__puts(&b, " | ");
        md_text(&b, json_string_value(json_object_get(c, "dataset")));
        bfr__puts(&b, " | ");
        md_text(&b, json_string_value(json_object_get(c, "fault_model")));
        bfr__printf(&b, " | %s |\n", tc);
    }
    metrics_md(&b, set);
    size_t i;
    const json_t *f;
    json_array_foreach(figs, i, f) {
        const char *name = json_string_value(json_object_get(f, "name")), *svg = json_string_value(json_object_get(f, "svg"));
        size_t pl = strlen(figdir) + strlen(name) + 8;
        char *path = malloc(pl);
        if (!path) { bfr__buf_free(&b); return bf_error_set(err, BF_ENOMEM, "report: out of memory"); }
        snprintf(path, pl, "%s/%s.svg", figdir, name);
        FILE *fp = fopen(path, "wb");
        int ok = fp && fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", fp) >= 0 && fputs(svg, fp) >= 0;
        if (fp && fclose(fp) != 0) ok = 0;
        if (!ok) {
            bf_status st = bf_error_set(err, BF_EIO, "report: cannot write %s: %s (does the directory exist?)", path, strerror(errno));
            free(path);
            bfr__buf_free(&b);
            return st;
        }
        free(path);
        bfr__puts(&b, "\n## ");
        md_text(&b, json_string_value(json_object_get(f, "title")));
        bfr__puts(&b, "\n\n![");
        md_text(&b, json_string_value(json_object_get(f, "alt")));
        bfr__puts(&b, "](");
        if (figlink && *figlink) {
            md_link(&b, figlink);
            bfr__puts(&b, "/");
        }
        md_link(&b, name);
        bfr__puts(&b, ".svg)\n");
    }
    bfr__puts(&b, "\n");
    md_text(&b, glossary);
    bfr__puts(&b, "\n\n*Written by `bitflip report`, bitflip " BITFLIP_VERSION ".*\n");
    char *text = bfr__buf_take(&b);
    if (!text) return bf_error_set(err, BF_ENOMEM, "report: out of memory writing the Markdown");
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, out) == n;
    free(text);
    if (!ok || fflush(out) != 0) return bf_error_set(err, BF_EIO, "report: writing the Markdown failed: %s", strerror(errno));
    return BF_OK;
}

bf_status bfr_write_opts(const bfr_input *in, size_t n, bfr_format fmt, const bfr_options *opt, FILE *out, const char *figdir,
                         const char *figlink, bf_error *err)
{
    json_t *figs = bfr_figures_opts(in, n, opt, err);
    if (!figs) return err && err->status ? err->status : BF_ENOMEM;
    bfr__set set;
    const char *title = opt ? opt->title : NULL;
    bf_status st = bfr__set_read(in, n, opt, &set, err);
    if (st == BF_OK) {
        const char *headline = json_string_value(json_object_get(figs, "headline"));
        const json_t *list = json_object_get(figs, "figures");
        if (!title || !*title) title = "Fault-injection report";
        st = fmt == BFR_MARKDOWN ? markdown(&set, list, headline, title, out, figdir, figlink, err)
                                 : html(&set, list, headline, title, out, err);
        bfr__set_free(&set);
    }
    json_decref(figs);
    return st;
}

bf_status bfr_write(const bfr_input *in, size_t n, bfr_format fmt, FILE *out, const char *figdir, const char *figlink,
                    bf_error *err)
{
    return bfr_write_opts(in, n, fmt, NULL, out, figdir, figlink, err);
}
