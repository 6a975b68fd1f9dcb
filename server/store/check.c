/* The data directory, checked: database, blobs, orphans (check.h). */
#include "store/check.h"

#include <dirent.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/blob.h"
#include "store/store.h"

typedef struct ref {
    char id[65];
    const char *what;         /* "model", "dataset" or "error map" */
} ref;

static int ref_cmp(const void *a, const void *b)
{
    return strcmp(((const ref *)a)->id, ((const ref *)b)->id);
}

static void problem(FILE *out, int *n, const char *kind, const char *fmt, const char *a, const char *b)
{
    fprintf(out, "  %-9s ", kind);
    fprintf(out, fmt, a, b);
    fputc('\n', out);
    (*n)++;
}

/* The database's own check, and the blobs it names (sorted, deduplicated). */
static bf_status check_db(const char *db_path, FILE *out, int *n, ref **refs, size_t *n_refs, bf_error *err)
{
    bf_status st = BF_OK;
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    size_t cap = 0;
    int rc;
    struct stat sb;
    *refs = NULL;
    *n_refs = 0;
    if (stat(db_path, &sb) != 0) {
        problem(out, n, "database", "%s: %s", db_path, strerror(errno));
        return BF_OK;
    }
    /* read-only and never created: checking must not change what it checks */
    if ((rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL)) != SQLITE_OK) {
        problem(out, n, "database", "%s: cannot open: %s", db_path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        goto out;
    }
    sqlite3_busy_timeout(db, 5000);
    if ((rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL)) != SQLITE_OK) {
        problem(out, n, "database", "%s: cannot check: %s", db_path, sqlite3_errmsg(db));
        goto out;
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(q, 0);
        if (line && strcmp(line, "ok")) problem(out, n, "database", "%s: %s", db_path, line);
    }
    if (rc != SQLITE_DONE) {
        problem(out, n, "database", "%s: integrity check stopped: %s", db_path, sqlite3_errmsg(db));
        goto out;
    }
    sqlite3_finalize(q);
    q = NULL;
    if ((rc = sqlite3_prepare_v2(db, "SELECT DISTINCT id, kind FROM items ORDER BY id", -1, &q, NULL)) != SQLITE_OK) {
        problem(out, n, "database", "%s: cannot list models, datasets and error maps: %s", db_path, sqlite3_errmsg(db));
        goto out;
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(q, 0);
        if (!id || strlen(id) != 64) {
            problem(out, n, "database", "an item's id '%.80s' is not a sha256%s", id ? id : "(null)", "");
            continue;
        }
        if (*n_refs && !strcmp((*refs)[*n_refs - 1].id, id)) continue;   /* both a model and a dataset */
        if (*n_refs == cap) {
            size_t c = cap ? cap * 2 : 64;
            ref *r = realloc(*refs, c * sizeof *r);
            if (!r) { st = bf_error_set(err, BF_ENOMEM, "--check: out of memory listing blobs"); goto out; }
            *refs = r;
            cap = c;
        }
        memcpy((*refs)[*n_refs].id, id, 65);
        (*refs)[*n_refs].what = bfd_kind_name((bfd_kind)sqlite3_column_int(q, 1));
        (*n_refs)++;
    }
    if (rc != SQLITE_DONE) problem(out, n, "database", "%s: listing stopped: %s", db_path, sqlite3_errmsg(db));

out:
    sqlite3_finalize(q);
    sqlite3_close(db);
    return st;
}

/* Files under blobs/ that no model or dataset names. */
static bf_status check_orphans(const char *blobs, const ref *refs, size_t n_refs, FILE *out, int *n, bf_error *err)
{
    bf_status st = BF_OK;
    DIR *top = opendir(blobs), *sub = NULL;
    char path[4096];
    if (!top) {
        if (errno != ENOENT || n_refs) problem(out, n, "blobs", "%s: %s", blobs, strerror(errno));
        return BF_OK;
    }
    struct dirent *e, *f;
    while ((e = readdir(top))) {
        if (e->d_name[0] == '.') continue;
        if (snprintf(path, sizeof path, "%s/%s", blobs, e->d_name) >= (int)sizeof path) continue;   /* cannot be ours */
        if (!(sub = opendir(path))) {
            problem(out, n, "stray", "%s: not a blob directory%s", path, "");
            continue;
        }
        while ((f = readdir(sub))) {
            if (f->d_name[0] == '.') continue;
            ref key = {{0}, NULL};
            int named = strlen(f->d_name) == 64 && !strncmp(f->d_name, e->d_name, 2);
            if (named) {
                memcpy(key.id, f->d_name, 65);
                named = n_refs && bsearch(&key, refs, n_refs, sizeof *refs, ref_cmp);   /* bsearch wants an array */
            }
            if (!named) problem(out, n, "orphan", "%s/%s: no model or dataset names this file", path, f->d_name);
        }
        closedir(sub);
        sub = NULL;
    }
    closedir(top);
    (void)err;
    return st;
}

bf_status bfd_check_data_dir(const char *dir, FILE *out, int *problems, bf_error *err)
{
    bf_status st = BF_OK;
    ref *refs = NULL;
    size_t n_refs = 0, verified = 0;
    char db_path[4096], blobs[4096], path[4200];
    int n = 0;
    *problems = 0;
    snprintf(db_path, sizeof db_path, "%s/bitflip.db", dir);
    snprintf(blobs, sizeof blobs, "%s/blobs", dir);
    fprintf(out, "bitflipd --check %s\n", dir);
    if ((st = check_db(db_path, out, &n, &refs, &n_refs, err))) goto out;
    for (size_t i = 0; i < n_refs; i++) {
        bf_error e = {0};
        snprintf(path, sizeof path, "%s/%.2s/%s", blobs, refs[i].id, refs[i].id);
        bf_status v = bfd_blob_verify(path, refs[i].what, &e);
        if (v == BF_ENOMEM) { st = bf_error_set(err, BF_ENOMEM, "%s", e.msg); goto out; }
        if (v == BF_OK) verified++;
        else problem(out, &n, v == BF_EFORMAT ? "corrupt" : v == BF_ENOTFOUND ? "missing" : "unreadable", "%s%s",
                     e.msg, "");
    }
    if ((st = check_orphans(blobs, refs, n_refs, out, &n, err))) goto out;
    if (n) fprintf(out, "%d problem%s in %s\n", n, n == 1 ? "" : "s", dir);
    else fprintf(out, "clean: database ok, %zu blob%s verified (sha256 matches the name)\n", verified, verified == 1 ? "" : "s");
    *problems = n;

out:
    free(refs);
    return st;
}
