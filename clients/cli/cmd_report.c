/* bitflip report: campaign results -> one HTML file a reviewer reads
 * without the docs, or Markdown with SVG figures beside it. The drawing is
 * libbitflip-report's (bitflip/report.h), shared with bitflipd's page. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bitflip/report.h"
#include "campaign_cli.h"
#include "cli.h"
#include "report_trial.h"

static const char help[] =
    "usage: bitflip report [-o FILE] [--format html|md] [--label NAME]... [--title TEXT]\n"
    "                      [--max-tensors N] [--spec SPEC --trial K --image I] RESULT.json...\n"
    "\n"
    "Draws the figures of campaign results: the metric against the bit error rate with\n"
    "confidence bands (BER sweeps), the outcome rates (masked, tolerable, critical, DUE)\n"
    "with intervals, the critical rate of each tensor, a tensor x bit-position heatmap,\n"
    "and what each protection recovers and costs (paired mitigation runs), under a\n"
    "headline sentence. Several results are overlaid (one curve or bar per result).\n"
    "A RESULT is what 'bitflip run --out' writes, or what bitflipd returns for\n"
    "GET /v1/campaigns/{id}/results (or GET /v1/campaigns/{id} once it has succeeded).\n"
    "\n"
    "  -o, --out FILE       where to write (default report.html, or report.md with\n"
    "                       --format md)\n"
    "  -f, --format FMT     html: one self-contained file, figures inline, no script,\n"
    "                       nothing fetched when opened (the default, unless FILE ends\n"
    "                       in .md); md: Markdown, for a pull-request comment, with the\n"
    "                       figures as SVG files in FILE's name + '-figures/' beside it\n"
    "  -l, --label NAME     the name of the next RESULT in legends (repeatable, in\n"
    "                       order; default: the model's file name, or with several\n"
    "                       results the result's file name)\n"
    "  -t, --title TEXT     the report's title (default \"Fault-injection report\")\n"
    "  --max-tensors N      tensors in the bars and the heatmap, most vulnerable first\n"
    "                       (default 20, at most 500)\n"
    "  --spec SPEC          with --trial and --image: the campaign spec that made the\n"
    "  --trial K            (first) RESULT; adds the picture of what trial K's faults\n"
    "  --image I            did to image I of the eval set: the golden and the faulty\n"
    "                       detections (boxes labelled class and score) or masks side\n"
    "                       by side. The result keeps no outputs, so trial K runs again\n"
    "                       (its faults come from the spec's seed; only that trial, one\n"
    "                       thread, exact engine, after the golden pass). Detection and\n"
    "                       segmentation results only\n"
    "  -h, --help           this text\n"
    "\n"
    "example:\n"
    "  bitflip run --local spec.json --out none.json\n"
    "  bitflip report none.json clip.json --label unprotected --label clipping -o report.html\n"
    "docs/REPORT.md shows every figure and how to read it.\n";

/* "dir/name.md" -> "dir/name-figures" and the link "name-figures" */
static int figure_paths(const char *out, char **dir, char **link)
{
    size_t n = strlen(out);
    const char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
    if (dot && (!slash || dot > slash) && dot != out && (!slash || dot > slash + 1)) n = (size_t)(dot - out);
    *dir = malloc(n + 9);
    if (!*dir) return -1;
    memcpy(*dir, out, n);
    memcpy(*dir + n, "-figures", 9);
    const char *base = strrchr(*dir, '/');
    *link = strdup(base ? base + 1 : *dir);
    return *link ? 0 : -1;
}

static const char *file_stem(const char *path, char *buf, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(buf, n, "%s", base);
    size_t l = strlen(buf);
    if (l > 5 && !strcmp(buf + l - 5, ".json")) buf[l - 5] = '\0';
    return buf;
}

/* Reads and checks each RESULT into docs[] and in[]; 0 or an exit code, having said why */
static int load_docs(const char **paths, size_t n, const char **labels, size_t n_labels, json_t **docs, bfr_input *in,
                     char (*stems)[128])
{
    bf_error err = {0};
    for (size_t i = 0; i < n; i++) {
        const char *path = paths[i];
        json_error_t je;
        docs[i] = json_load_file(path, 0, &je);
        if (!docs[i]) {
            FILE *probe = fopen(path, "rb");
            if (!probe) fprintf(stderr, "bitflip report: cannot read %s: %s\n", path, strerror(errno));
            else fprintf(stderr, "bitflip report: %s is not JSON: %s (line %d, column %d)\n", path, je.text, je.line, je.column);
            if (probe) fclose(probe);
            return EXIT_INFRA;
        }
        if (bfr_check(docs[i], path, &err) != BF_OK) {
            fprintf(stderr, "bitflip report: %s\n", err.msg);
            return EXIT_INFRA;
        }
        in[i].result = docs[i];
        /* several results of one model tell apart by their files' names */
        in[i].label = i < n_labels ? labels[i] : n > 1 ? file_stem(path, stems[i], sizeof stems[i]) : NULL;
    }
    return EXIT_OK;
}

int cmd_report(int argc, char **argv)
{
    enum { OPT_MAX_TENSORS = CLI_OPT_FIRST, OPT_SPEC, OPT_TRIAL, OPT_IMAGE };
    static const struct option longopts[] = {
        {"out", required_argument, NULL, 'o'},   {"format", required_argument, NULL, 'f'},
        {"label", required_argument, NULL, 'l'}, {"title", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},        {"max-tensors", required_argument, NULL, OPT_MAX_TENSORS},
        {"spec", required_argument, NULL, OPT_SPEC}, {"trial", required_argument, NULL, OPT_TRIAL},
        {"image", required_argument, NULL, OPT_IMAGE},
        {NULL, 0, NULL, 0},
    };
    const char *out_path = NULL, *format = NULL, *v;
    bfr_options opt = {0};
    long long max_tensors = 0;
    const char **labels = calloc((size_t)argc + 1, sizeof *labels), **paths = calloc((size_t)argc + 1, sizeof *paths);
    size_t n_labels = 0, n = 0;
    bfr_input *in = NULL;
    json_t **docs = NULL;
    char (*stems)[128] = NULL;
    char *figdir = NULL, *figlink = NULL;
    FILE *out = NULL;         /* the report, made in memory and published whole */
    char *text = NULL;
    size_t len = 0;
    int rc = EXIT_OK, c;
    bf_error err = {0};
    report_trial_req trial = {.trial = -1, .image = -1};
    json_t *extra = NULL, *fig = NULL;
    cli_parser p;
    if (!labels || !paths) { fprintf(stderr, "bitflip report: out of memory\n"); rc = EXIT_INFRA; goto done; }
    cli_parser_init(&p, "report", argc, argv, "o:f:l:t:h", longopts);
    while (!rc && (c = cli_parser_next(&p, &v)) != CLI_END) {
        switch (c) {
        case 'o': out_path = v; break;
        case 'f': format = v; break;
        case 'l': labels[n_labels++] = v; break;
        case 't': opt.title = v; break;
        case 'h': fputs(help, stdout); goto done;
        case OPT_MAX_TENSORS:
            rc = parse_count("report", "--max-tensors", v, 1, BFR_MAX_TENSORS_LIMIT, &max_tensors);
            opt.max_tensors = (int)max_tensors;
            break;
        case OPT_SPEC: trial.spec_path = v; break;
        case OPT_TRIAL: rc = parse_count("report", "--trial", v, 0, INT64_MAX - 1, &trial.trial); break;
        case OPT_IMAGE: rc = parse_count("report", "--image", v, 0, INT64_MAX - 1, &trial.image); break;
        case CLI_ARG: paths[n++] = v; break;
        default: rc = EXIT_USAGE; break;   /* CLI_BAD: already explained */
        }
    }
    if (rc) goto done;
    if (!n) { rc = usage_error("report", "which results? usage: bitflip report RESULT.json... -o report.html"); goto done; }
    if (n_labels > n) {
        rc = usage_error("report", "%zu --label for %zu result%s: give one per result, in order", n_labels, n, n > 1 ? "s" : "");
        goto done;
    }
    if ((trial.spec_path || trial.trial >= 0 || trial.image >= 0) && !(trial.spec_path && trial.trial >= 0 && trial.image >= 0)) {
        rc = usage_error("report", "a trial's picture needs --spec, --trial and --image together");
        goto done;
    }
    if (!format) {
        size_t l = out_path ? strlen(out_path) : 0;
        format = l > 3 && !strcmp(out_path + l - 3, ".md") ? "md" : "html";
    }
    if (strcmp(format, "html") && strcmp(format, "md")) {
        rc = usage_error("report", "--format must be html or md, got '%s'", format);
        goto done;
    }
    if (!out_path) out_path = !strcmp(format, "md") ? "report.md" : "report.html";
    in = calloc(n, sizeof *in);
    docs = calloc(n, sizeof *docs);
    stems = calloc(n, sizeof *stems);
    if (!in || !docs || !stems) { fprintf(stderr, "bitflip report: out of memory\n"); rc = EXIT_INFRA; goto done; }
    if ((rc = load_docs(paths, n, labels, n_labels, docs, in, stems)) != 0) goto done;
    if (trial.spec_path) {
        trial.result_path = paths[0];
        if ((rc = report_trial_figure(&trial, docs[0], &fig)) != 0) goto done;
        if (!(extra = json_array()) || json_array_append(extra, fig)) { fprintf(stderr, "bitflip report: out of memory\n"); rc = EXIT_INFRA; goto done; }
        opt.extra_figures = extra;
    }
    if (!strcmp(format, "md")) {
        if (figure_paths(out_path, &figdir, &figlink) != 0) { fprintf(stderr, "bitflip report: out of memory\n"); rc = EXIT_INFRA; goto done; }
        if (mkdir(figdir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "bitflip report: cannot make the figures' directory %s: %s\n", figdir, strerror(errno));
            rc = EXIT_INFRA;
            goto done;
        }
    }
    out = open_memstream(&text, &len);
    if (!out) { fprintf(stderr, "bitflip report: out of memory writing %s\n", out_path); rc = EXIT_INFRA; goto done; }
    if (bfr_write_opts(in, n, !strcmp(format, "md") ? BFR_MARKDOWN : BFR_HTML, &opt, out, figdir, figlink, &err) != BF_OK) {
        rc = report_error("report", &err);
        goto done;
    }
    if (fclose(out) != 0) {
        out = NULL;
        fprintf(stderr, "bitflip report: out of memory writing %s\n", out_path);
        rc = EXIT_INFRA;
        goto done;
    }
    out = NULL;
    if ((rc = write_bytes_atomic("report", out_path, text, len)) != 0) goto done;
    if (figdir) printf("wrote %s (figures in %s/)\n", out_path, figdir);
    else printf("wrote %s: open it in a browser (one file, nothing fetched)\n", out_path);
done:
    if (out) fclose(out);
    free(text);   /* after the fclose: open_memstream owns it until then */
    for (size_t i = 0; docs && i < n; i++) json_decref(docs[i]);
    free(docs);
    free(in);
    free(stems);
    free(labels);
    free(paths);
    free(figdir);
    free(figlink);
    json_decref(fig);
    json_decref(extra);
    return rc;
}
