/* bitflip merge: shards of one campaign into the result of the whole. */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bitflip/api/result.h"
#include "campaign_cli.h"
#include "cli.h"
#include "shard.h"

static const char help[] =
    "usage: bitflip merge [OPTIONS] DIR | 'GLOB' | PART.json...\n"
    "\n"
    "Merges the results of 'bitflip run --shard I/N' (one file per shard, every shard\n"
    "once) into the result the unsharded campaign gives: the same counts, sums and\n"
    "intervals, byte for byte. Gates and JUnit output work as for 'bitflip run'.\n"
    "\n"
    "A directory stands for the parts in it, PREFIX.part-I-of-N.json as 'bitflip run\n"
    "--shard ... --out-dir DIR' writes them; a quoted pattern such as\n"
    "'out/*.part-*.json' for the files it matches. Every part must be of the same\n"
    "campaign (the same spec file, by its SHA-256, the same model and data by the\n"
    "golden metrics) and of the same N; a part of another is refused (exit 2).\n"
    "If shards are missing, it names them and exits 3, so a pipeline can rerun\n"
    "those tasks and merge again (docs/SCALE.md).\n"
    "\n"
    "  --prefix NAME        in a directory, only NAME.part-I-of-N.json (for a\n"
    "                       directory shared by several campaigns)\n"
    "  --out FILE           write the merged result document (JSON), atomically\n"
    "  --format F           table, json or csv on stdout (default: table on a\n"
    "                       terminal, json otherwise)\n"
    "  --gate EXPR          a CI gate, as for 'bitflip run' (repeatable)\n"
    "  --junit FILE         write the gates as JUnit XML\n"
    "\n"
    "Exit codes: 0 merged and every gate holds, 1 a gate failed, 2 usage error or\n"
    "parts that do not belong together, 3 a part is missing or cannot be read.\n";

/* The files to merge, from the arguments: growing array of malloc'd paths. */
typedef struct file_list {
    char **p;
    size_t n, cap;
} file_list;

static int list_add(file_list *l, const char *path)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **np = realloc(l->p, cap * sizeof *np);
        if (!np) return -1;
        l->p = np;
        l->cap = cap;
    }
    if (!(l->p[l->n] = strdup(path))) return -1;
    l->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The parts in a directory (hidden files, e.g. a shard's temporary file, are not). */
static int add_dir(file_list *l, const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "bitflip merge: cannot read directory %s: %s\n", dir, strerror(errno));
        return EXIT_INFRA;
    }
    size_t before = l->n;
    struct dirent *e;
    char pre[512], path[4096];
    long long i, n;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (shard_part_parse(e->d_name, pre, sizeof pre, &i, &n) != 0 || (prefix && strcmp(pre, prefix))) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (list_add(l, path)) { fprintf(stderr, "bitflip merge: out of memory\n"); rc = EXIT_INFRA; }
    }
    closedir(d);
    if (!rc && l->n == before) {
        fprintf(stderr, "bitflip merge: no parts in %s: none is named %s.part-I-of-N.json; the shards have not written "
                        "any yet, or wrote elsewhere (bitflip run --shard ... --out-dir %s)\n",
                dir, prefix ? prefix : "PREFIX", dir);
        rc = EXIT_INFRA;
    }
    /* readdir's order is the file system's: sort, so messages are stable */
    if (!rc) qsort(l->p + before, l->n - before, sizeof *l->p, cmp_str);
    return rc;
}

static int add_arg(file_list *l, const char *a, const char *prefix)
{
    struct stat st;
    if (stat(a, &st) == 0 && S_ISDIR(st.st_mode)) return add_dir(l, a, prefix);
    if (stat(a, &st) != 0 && strpbrk(a, "*?[")) {   /* a pattern the shell did not expand */
        glob_t g;
        int r = glob(a, 0, NULL, &g);
        if (r == GLOB_NOMATCH) {
            fprintf(stderr, "bitflip merge: no file matches '%s'\n", a);
            return EXIT_INFRA;
        }
        if (r != 0) { fprintf(stderr, "bitflip merge: cannot expand '%s'\n", a); return EXIT_INFRA; }
        int rc = 0;
        for (size_t k = 0; !rc && k < g.gl_pathc; k++)
            if (list_add(l, g.gl_pathv[k])) { fprintf(stderr, "bitflip merge: out of memory\n"); rc = EXIT_INFRA; }
        globfree(&g);
        return rc;
    }
    if (list_add(l, a)) { fprintf(stderr, "bitflip merge: out of memory\n"); return EXIT_INFRA; }
    return 0;
}

/* One part: its document while it is checked (only the first one's is
 * kept, for the header: a thousand parts need not fit in memory at once). */
typedef struct part {
    const char *path;
    json_t *doc;
    long long index, count;
} part;

static int cmp_part(const void *a, const void *b)
{
    const part *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

/* What the parts of one campaign share: its header and the spec's hash. */
static int same_campaign(const json_t *a, const json_t *b)
{
    const json_t *ha = json_object_get(json_object_get(a, "shard"), "spec_sha256");
    const json_t *hb = json_object_get(json_object_get(b, "shard"), "spec_sha256");
    return json_equal(json_object_get(a, "campaign"), json_object_get(b, "campaign")) &&
           json_equal(json_object_get(a, "golden"), json_object_get(b, "golden")) &&
           ((!ha && !hb) || (ha && hb && json_equal(ha, hb)));
}

/* Loads and checks a part: its shard, and against its file name if named as a part. */
static int load_part(const char *path, part *p)
{
    json_error_t je;
    p->path = path;
    p->doc = json_load_file(path, 0, &je);
    if (!p->doc) {
        /* a part that cannot be opened is missing; one that does not parse is not a part */
        if (access(path, R_OK) != 0) {
            fprintf(stderr, "bitflip merge: cannot read %s: %s\n", path, strerror(errno));
            return EXIT_INFRA;
        }
        fprintf(stderr, "bitflip merge: %s: %s (line %d)\n", path, je.text, je.line);
        return EXIT_USAGE;
    }
    const json_t *sh = json_object_get(p->doc, "shard");
    p->index = sh ? (long long)json_integer_value(json_object_get(sh, "index")) : 0;
    p->count = sh ? (long long)json_integer_value(json_object_get(sh, "count")) : 1;
    if (!json_is_object(p->doc) || !json_is_object(json_object_get(p->doc, "campaign")) ||
        (sh && (!json_is_integer(json_object_get(sh, "index")) || !json_is_integer(json_object_get(sh, "count")))) ||
        p->count < 1 || p->count > SHARDS_MAX || p->index < 0 || p->index >= p->count) {
        fprintf(stderr, "bitflip merge: %s is not a campaign result with a valid \"shard\" (index < count)\n", path);
        return EXIT_USAGE;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char pre[512];
    long long fi, fn;
    if (shard_part_parse(base, pre, sizeof pre, &fi, &fn) == 0 && (fi != p->index || fn != p->count)) {
        fprintf(stderr, "bitflip merge: %s is named as shard %lld of %lld but holds shard %lld of %lld; was it renamed?\n",
                path, fi, fn, p->index, p->count);
        return EXIT_USAGE;
    }
    return 0;
}

/* Loads every part (the first keeps its document, for the merged header)
 * and checks they are the shards of one campaign, each once, none missing:
 * the message names the files, or lists the missing shards' indexes for a
 * pipeline to rerun. *count: the shard count. */
static int check_parts(part *parts, size_t n, char *const *paths, const char *prefix, long long *count)
{
    unsigned char *seen = NULL;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if ((rc = load_part(paths[i], &parts[i])) != 0) goto out;
        if (i == 0) {
            *count = parts[0].count;
            if (!(seen = calloc((size_t)*count, 1))) { rc = EXIT_INFRA; goto out; }
        }
        if (!same_campaign(parts[i].doc, parts[0].doc)) {
            fprintf(stderr, "bitflip merge: %s is from another campaign than %s (another spec, model, data or engine)%s\n",
                    parts[i].path, parts[0].path, prefix ? "" : "; in a shared directory, choose one with --prefix NAME");
            rc = EXIT_USAGE;
            goto out;
        }
        if (parts[i].count != *count) {
            fprintf(stderr, "bitflip merge: %s is shard %lld of %lld, but %s is one of %lld shards\n", parts[i].path,
                    parts[i].index, parts[i].count, parts[0].path, *count);
            rc = EXIT_USAGE;
            goto out;
        }
        if (seen[parts[i].index]++) {
            fprintf(stderr, "bitflip merge: shard %lld/%lld is given twice (%s)\n", parts[i].index, *count, parts[i].path);
            rc = EXIT_USAGE;
            goto out;
        }
        if (i > 0) {
            json_decref(parts[i].doc);
            parts[i].doc = NULL;
        }
    }
    long long missing = 0;
    for (long long k = 0; k < *count; k++) missing += !seen[k];
    if (missing) {
        /* the indexes, for the pipeline to rerun: all of them up to a screenful */
        fprintf(stderr, "bitflip merge: %lld of %lld shards missing:", missing, *count);
        long long shown = 0;
        for (long long k = 0; k < *count && shown < 200; k++)
            if (!seen[k]) fprintf(stderr, "%s %lld", shown++ ? "," : "", k);
        fprintf(stderr, "%s (shard indexes from 0); rerun them (bitflip run --shard I/%lld ...) and merge again\n",
                shown < missing ? ", ..." : "", *count);
        rc = EXIT_INFRA;
    }
out:
    free(seen);
    return rc;
}

/* The parts' results, read again in shard order and merged into *total. */
static int merge_parts(const part *parts, size_t n, bf_campaign_result *total)
{
    bf_campaign_result one = {0};
    bf_error err = {0};
    for (size_t i = 0; i < n; i++) {
        json_error_t je;
        json_t *d = json_load_file(parts[i].path, 0, &je);
        if (!d) {
            fprintf(stderr, "bitflip merge: %s changed while merging: %s\n", parts[i].path, je.text);
            return EXIT_INFRA;
        }
        bf_status st = bf_result_parse(d, i == 0 ? total : &one, &err);
        json_decref(d);
        if (st == BF_OK && i > 0) st = bf_campaign_result_merge(total, &one, &err);
        if (i > 0) bf_campaign_result_free(&one);   /* also what a failed parse allocated */
        if (st != BF_OK) {
            fprintf(stderr, "bitflip merge: %s: %s\n", parts[i].path, err.msg);
            return EXIT_USAGE;
        }
    }
    return 0;
}

int cmd_merge(int argc, char **argv)
{
    const char *out_path = NULL, *format = NULL, *junit = NULL, *prefix = NULL;
    const char **args = calloc((size_t)argc + 1, sizeof *args);
    gate *gates = calloc((size_t)argc + 1, sizeof *gates);
    size_t n_args = 0, n_gates = 0;
    file_list files = {0};
    part *parts = NULL;
    int rc = EXIT_OK;
    json_t *doc = NULL;
    bf_campaign_result total = {0};
    long long count = 0;
    if (!args || !gates) { rc = EXIT_INFRA; goto out; }

    enum { OPT_OUT = CLI_OPT_FIRST, OPT_FORMAT, OPT_JUNIT, OPT_GATE, OPT_PREFIX };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"out", required_argument, NULL, OPT_OUT},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"junit", required_argument, NULL, OPT_JUNIT},
        {"gate", required_argument, NULL, OPT_GATE},
        {"prefix", required_argument, NULL, OPT_PREFIX},
        {NULL, 0, NULL, 0}};
    cli_parser p;
    const char *v;
    int c;
    cli_parser_init(&p, "merge", argc, argv, "h", longopts);
    while (!rc && (c = cli_parser_next(&p, &v)) != CLI_END) {
        switch (c) {
        case 'h': fputs(help, stdout); goto out;
        case OPT_OUT: out_path = v; break;
        case OPT_FORMAT: format = v; break;
        case OPT_JUNIT: junit = v; break;
        case OPT_PREFIX: prefix = v; break;
        case OPT_GATE: rc = gate_parse("merge", v, &gates[n_gates++]); break;
        case CLI_ARG: args[n_args++] = v; break;
        default: rc = EXIT_USAGE;
        }
    }
    if (rc) goto out;
    if (!n_args) { rc = usage_error("merge", "which results? usage: bitflip merge DIR, or bitflip merge PART.json..."); goto out; }
    if (format && strcmp(format, "table") && strcmp(format, "json") && strcmp(format, "csv")) {
        rc = usage_error("merge", "--format must be table, json or csv, got '%s'", format);
        goto out;
    }
    for (size_t i = 0; i < n_args; i++)
        if ((rc = add_arg(&files, args[i], prefix)) != 0) goto out;

    parts = calloc(files.n, sizeof *parts);
    if (!parts) { rc = EXIT_INFRA; goto out; }
    if ((rc = check_parts(parts, files.n, files.p, prefix, &count)) != 0) goto out;
    /* merged in shard order, whatever order the files came in */
    json_t *first = parts[0].doc;
    parts[0].doc = NULL;
    qsort(parts, files.n, sizeof *parts, cmp_part);
    if ((rc = merge_parts(parts, files.n, &total)) != 0) {
        json_decref(first);
        goto out;
    }
    json_t *header = json_pack("{s:O, s:O, s:O}", "bitflip", json_object_get(first, "bitflip"), "campaign",
                               json_object_get(first, "campaign"), "golden", json_object_get(first, "golden"));
    json_decref(first);
    doc = bf_result_render(header, &total, count);
    if ((rc = emit_result("merge", doc, out_path, format)) != 0) goto out;
    rc = gates_check("merge", doc, gates, n_gates, junit);
out:
    bf_campaign_result_free(&total);
    for (size_t i = 0; parts && i < files.n; i++) json_decref(parts[i].doc);
    free(parts);
    for (size_t i = 0; i < files.n; i++) free(files.p[i]);
    free(files.p);
    json_decref(doc);
    free(args);
    free(gates);
    return rc;
}
