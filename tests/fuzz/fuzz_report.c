/* libFuzzer target: arbitrary bytes as a result document through
 * libbitflip-report: bfr_figures (one input, and two overlaid with a hostile
 * label) and bfr_write as HTML and as Markdown with its SVG files. Beyond
 * "no crash, no hang, no leak": no figure and no report may ever contain
 * markup that runs (<script, <foreignObject, an on...= attribute inside a tag) whatever
 * the document's strings hold. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include <jansson.h>

#include "bitflip/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char figdir[64];

/* Markup that could run: a script element, or an event handler attribute
 * (inside a tag, where escaping would have turned '<' into &lt;). */
static void assert_inert(const char *s)
{
    if (!s) return;
    /* ("javascript:" as text is inert: no attribute of ours takes a URL) */
    if (strcasestr(s, "<script") || strcasestr(s, "<foreignObject")) abort();
    for (const char *p = strchr(s, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>');
        if (!end) break;
        for (const char *q = p; q + 3 < end; q++)
            if ((q[0] == ' ' || q[0] == '\t' || q[0] == '\n') && (q[1] == 'o' || q[1] == 'O') && (q[2] == 'n' || q[2] == 'N')) {
                /* an attribute name starting "on": ours are none */
                const char *eq = q + 3;
                while (eq < end && ((*eq >= 'a' && *eq <= 'z') || (*eq >= 'A' && *eq <= 'Z'))) eq++;
                if (*eq == '=') abort();
            }
    }
}

static void check_figures(json_t *figs)
{
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(figs, "figures"), i, f) assert_inert(json_string_value(json_object_get(f, "svg")));
    json_decref(figs);
}

/* The Markdown figures' directory goes when the process does */
static void remove_figdir(void)
{
    DIR *d = opendir(figdir);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", figdir, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
    rmdir(figdir);
}

static void write_both(const bfr_input *in, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out) return;
    bfr_options opt = {.title = "</title><script>t</script>", .max_tensors = 3};
    bfr_write_opts(in, n, BFR_HTML, &opt, out, NULL, NULL, NULL);
    fclose(out);
    assert_inert(buf);
    free(buf);
    if (!figdir[0]) {
        snprintf(figdir, sizeof figdir, "/tmp/fuzz_report.XXXXXX");
        if (!mkdtemp(figdir)) { figdir[0] = '\0'; return; }
        atexit(remove_figdir);
    }
    out = open_memstream(&buf, &len);
    if (!out) return;
    bfr_write(in, n, BFR_MARKDOWN, out, figdir, "figs", NULL);
    fclose(out);
    if (buf && strcasestr(buf, "<script")) abort();
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, 0, NULL);
    if (!doc) return 0;
    bf_error err = {0};
    bfr_input one = {doc, NULL};
    check_figures(bfr_figures(&one, 1, &err));
    bfr_input two[2] = {{doc, "<script>alert(1)</script>"}, {doc, "\" onload=\"x"}};
    check_figures(bfr_figures(two, 2, &err));
    if (bfr_check(doc, "fuzz", &err) == BF_OK) write_both(two, 2);
    json_decref(doc);
    return 0;
}
