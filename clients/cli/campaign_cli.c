#include "campaign_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bitflip/api/result.h"
#include "bitflip/api/spec.h"
#include "cli.h"

int gate_parse(const char *cmd, const char *expr, gate *g)
{
    bf_error err = {0};
    if (bf_gate_parse(expr, g, &err) != BF_OK) return usage_error(cmd, "--%s", err.msg);
    return 0;
}

int gates_check(const char *cmd, const json_t *doc, const gate *gates, size_t n, const char *junit_path)
{
    int failed = 0, rc = EXIT_OK;
    bf_error err = {0};
    double *vals = calloc(n + 1, sizeof *vals);
    int *ok = calloc(n + 1, sizeof *ok);
    if (!vals || !ok) { fprintf(stderr, "bitflip %s: out of memory\n", cmd); rc = EXIT_INFRA; goto out; }
    if (bf_gates_eval(doc, gates, n, vals, ok, &err) != BF_OK) { rc = usage_error(cmd, "--%s", err.msg); goto out; }
    for (size_t i = 0; i < n; i++) {
        failed += !ok[i];
        fprintf(stderr, "gate %-30s %s (%s = %.6g)\n", gates[i].expr, ok[i] ? "pass" : "FAIL", gates[i].name, vals[i]);
    }
    if (junit_path) {
        /* made in memory, then published whole: a CI job that reads the
         * report after a crash finds the old one or the new one */
        char *xml = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&xml, &len);
        if (!f) { fprintf(stderr, "bitflip %s: out of memory writing %s\n", cmd, junit_path); rc = EXIT_INFRA; goto out; }
        bf_gates_junit(f, gates, n, vals, ok);
        int bad = fclose(f) != 0;
        if (bad) fprintf(stderr, "bitflip %s: out of memory writing %s\n", cmd, junit_path);
        else bad = write_text_atomic(cmd, junit_path, xml) != 0;
        free(xml);
        if (bad) { rc = EXIT_INFRA; goto out; }
    }
    rc = failed ? EXIT_GATE : EXIT_OK;
out:
    free(vals);
    free(ok);
    return rc;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = (n + 4096 + 1) * 2;
            if (cap > ((size_t)64 << 20)) { free(buf); fclose(f); errno = EFBIG; return NULL; }
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (got < 4096) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); errno = EIO; return NULL; }
    buf[n] = '\0';
    *len = n;
    return buf;
}

int load_spec(const char *cmd, const char *path, const cli_limits *lim, bf_campaign_spec *spec)
{
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text) {
        fprintf(stderr, "bitflip %s: cannot read spec %s: %s\n", cmd, path, strerror(errno));
        return errno == ENOENT ? EXIT_USAGE : EXIT_INFRA;
    }
    bf_spec_problems probs = {0};
    bf_status st = bf_spec_parse_opts(text, len, lim ? &lim->spec : NULL, spec, &probs);
    free(text);
    if (st != BF_OK) {
        fprintf(stderr, "bitflip %s: %s is not a valid campaign spec:\n", cmd, path);
        for (size_t i = 0; i < probs.count; i++)
            fprintf(stderr, "  %s: %s\n", probs.items[i].pointer[0] ? probs.items[i].pointer : "(document)", probs.items[i].message);
        bf_spec_problems_free(&probs);
        return EXIT_USAGE;
    }
    bf_spec_problems_free(&probs);
    return 0;
}

/* `p` as given if it exists, else beside the spec file. */
char *resolve_input(const char *spec_path, const char *p)
{
    if (p[0] == '/' || access(p, F_OK) == 0) return strdup(p);
    const char *slash = strrchr(spec_path, '/');
    if (!slash) return strdup(p);
    size_t dl = (size_t)(slash - spec_path) + 1;
    char *r = malloc(dl + strlen(p) + 1);
    if (!r) return NULL;
    memcpy(r, spec_path, dl);
    strcpy(r + dl, p);
    if (access(r, F_OK) != 0) { free(r); return strdup(p); }
    return r;
}

int load_inputs(const char *cmd, const char *spec_path, bf_campaign_spec *spec, const cli_limits *lim,
                bf_model **m, bf_dataset **ds)
{
    bf_error err = {0};
    char *mp = resolve_input(spec_path, spec->model), *dp = resolve_input(spec_path, spec->dataset);
    char *ep = spec->error_map ? resolve_input(spec_path, spec->error_map) : NULL;
    int rc = 0;
    if (!mp || !dp || (spec->error_map && !ep)) { fprintf(stderr, "bitflip %s: out of memory\n", cmd); rc = EXIT_INFRA; }
    else if (bf_model_load_file_opts(mp, lim ? &lim->model : NULL, m, &err) != BF_OK) rc = report_error(cmd, &err);
    else if (bf_dataset_load_file_opts(dp, lim ? &lim->data : NULL, ds, &err) != BF_OK) rc = report_error(cmd, &err);
    else if (bf_model_bind_dims(m, *ds, &err) != BF_OK) rc = report_error(cmd, &err);
    else if (ep && !spec->errmap && bf_errmap_load_file(ep, lim ? &lim->errmap : NULL, &spec->errmap, &err) != BF_OK)
        rc = report_error(cmd, &err);
    free(mp);
    free(dp);
    free(ep);
    return rc;
}

/* A symbolic link (/dev/stdout), a device, a FIFO: 1. Those are written
 * through, in place: a rename would replace the link or the device node. */
static int not_regular(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode);
}

static unsigned file_mode(void)
{
    mode_t um = umask(0);   /* the CLI is one thread: reading the umask is safe */
    umask(um);
    return 0666 & ~(unsigned)um;
}

int write_json_atomic(const char *cmd, const json_t *doc, const char *path)
{
    if (not_regular(path)) {
        if (json_dump_file(doc, path, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0) {
            fprintf(stderr, "bitflip %s: cannot write %s\n", cmd, path);
            return EXIT_INFRA;
        }
        return 0;
    }
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (!text) { fprintf(stderr, "bitflip %s: out of memory writing %s\n", cmd, path); return EXIT_INFRA; }
    int rc = write_text_atomic(cmd, path, text);
    free(text);
    return rc;
}

int write_text_atomic(const char *cmd, const char *path, const char *text)
{
    return write_bytes_atomic(cmd, path, text, strlen(text));
}

int write_bytes_atomic(const char *cmd, const char *path, const void *data, size_t len)
{
    if (not_regular(path)) {
        FILE *f = fopen(path, "w");
        int bad = !f || fwrite(data, 1, len, f) != len;
        if (f && fclose(f) != 0) bad = 1;
        if (bad) fprintf(stderr, "bitflip %s: cannot write %s: %s\n", cmd, path, strerror(errno));
        return bad ? EXIT_INFRA : 0;
    }
    /* as readable as any file this process creates (a merge job may run as another user) */
    bf_error err = {0};
    if (bf_write_atomic(path, data, len, file_mode(), &err) != BF_OK) {
        fprintf(stderr, "bitflip %s: cannot write %s: %s\n", cmd, path, err.msg);
        return EXIT_INFRA;
    }
    return 0;
}

int pub_open(const char *cmd, const char *path, cli_pub *p)
{
    memset(p, 0, sizeof *p);
    if (not_regular(path)) {
        if (!(p->through = fopen(path, "w"))) {
            fprintf(stderr, "bitflip %s: cannot write %s: %s\n", cmd, path, strerror(errno));
            return EXIT_INFRA;
        }
        return 0;
    }
    bf_error err = {0};
    if (bf_afile_open(path, file_mode(), &p->af, &err) != BF_OK) {
        fprintf(stderr, "bitflip %s: cannot write %s: %s\n", cmd, path, err.msg);
        return EXIT_INFRA;
    }
    return 0;
}

void pub_write(cli_pub *p, const void *data, size_t len)
{
    if (p->failed) return;
    if (p->through) {
        if (fwrite(data, 1, len, p->through) != len) {
            p->failed = 1;
            bf_error_set(&p->err, BF_EIO, "%s", strerror(errno));
        }
    } else if (p->af && bf_afile_write(p->af, data, len, &p->err) != BF_OK) {
        p->failed = 1;
    }
}

int pub_close(const char *cmd, const char *path, cli_pub *p)
{
    int failed = p->failed;
    if (p->through) {
        if (fclose(p->through) != 0 && !failed) {
            failed = 1;
            bf_error_set(&p->err, BF_EIO, "%s", strerror(errno));
        }
        p->through = NULL;
    } else if (p->af) {
        if (failed) bf_afile_abort(p->af);
        else failed = bf_afile_commit(p->af, NULL, &p->err) != BF_OK;
        p->af = NULL;
    }
    if (failed) fprintf(stderr, "bitflip %s: writing %s failed: %s\n", cmd, path, p->err.msg);
    return failed ? EXIT_INFRA : 0;
}

void pub_abort(cli_pub *p)
{
    if (p->through) fclose(p->through);
    bf_afile_abort(p->af);
    p->through = NULL;
    p->af = NULL;
}

int emit_result(const char *cmd, const json_t *doc, const char *out_path, const char *format)
{
    if (out_path && write_json_atomic(cmd, doc, out_path) != 0) return EXIT_INFRA;
    if (!format) format = isatty(STDOUT_FILENO) ? "table" : "json";
    if (!strcmp(format, "table")) bf_result_print_table(stdout, doc);
    else if (!strcmp(format, "csv")) bf_result_print_csv(stdout, doc);
    else {
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        fputc('\n', stdout);
    }
    return fflush(stdout) == 0 ? 0 : EXIT_INFRA;
}
