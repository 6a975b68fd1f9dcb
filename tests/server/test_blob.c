/* Blobs: content lands under its sha256 (digests known independently: the
 * FIPS million-'a' message, and "hello world" from Python's hashlib), storing
 * twice keeps one file, nothing is left in tmp/, a crash's leftovers are
 * swept on open, atomic writes replace, and errors name the path at fault;
 * verification finds a flipped bit or a truncation and names the blob, and
 * storing the same bytes again repairs it; disk-full errors are recognisable. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "store/blob.h"

#define HELLO_SHA "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MILLION_A_SHA "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"

/* --- helpers */

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            remove_tree(sub);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* The file's whole content, NUL-terminated (caller frees); NULL if unreadable. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 20 | 1);
    size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    char *dir = strdup("/tmp/bfd-blob-XXXXXX");
    if (!dir || !mkdtemp(dir)) return -1;
    *state = dir;
    return 0;
}

static int teardown(void **state)
{
    remove_tree(*state);
    free(*state);
    return 0;
}

static void sub(char *out, const char *dir, const char *rel)
{
    snprintf(out, 4096, "%s/%s", dir, rel);
}

static void store_text(bfd_blobs *b, const char *text, char sha[65])
{
    bfd_upload *u = NULL;
    bf_error err = {0};
    assert_int_equal(bfd_upload_begin(b, &u, &err), BF_OK);
    assert_int_equal(bfd_upload_write(u, text, strlen(text), &err), BF_OK);
    assert_int_equal(bfd_upload_finish(u, sha, &err), BF_OK);
}

/* --- tests */

static void test_store_bytes(void **state)
{
    const char *dir = *state;
    bfd_blobs *b = NULL;
    bfd_upload *u = NULL;
    bf_error err = {0};
    char sha[65], want[4096], tmp[4096];
    assert_int_equal(bfd_blobs_open(dir, &b, &err), BF_OK);
    assert_int_equal(bfd_upload_begin(b, &u, &err), BF_OK);
    assert_int_equal(bfd_upload_write(u, "hello ", 6, &err), BF_OK);
    assert_int_equal(bfd_upload_write(u, "", 0, &err), BF_OK);
    assert_int_equal(bfd_upload_write(u, "world", 5, &err), BF_OK);
    assert_int_equal(bfd_upload_size(u), 11);
    assert_int_equal(bfd_upload_finish(u, sha, &err), BF_OK);
    assert_string_equal(sha, HELLO_SHA);

    char *path = bfd_blob_path(b, sha);
    assert_non_null(path);
    sub(want, dir, "blobs/b9/" HELLO_SHA);
    assert_string_equal(path, want);
    size_t len = 0;
    char *got = slurp(path, &len);
    assert_non_null(got);
    assert_int_equal(len, 11);
    assert_string_equal(got, "hello world");
    free(got);
    free(path);
    sub(tmp, dir, "tmp");
    assert_int_equal(count_entries(tmp), 0);
    bfd_blobs_close(b);
}

static void test_large_and_empty(void **state)
{
    const char *dir = *state;
    bfd_blobs *b = NULL;
    bfd_upload *u = NULL;
    bf_error err = {0};
    char sha[65], chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    assert_int_equal(bfd_blobs_open(dir, &b, &err), BF_OK);
    assert_int_equal(bfd_upload_begin(b, &u, &err), BF_OK);
    for (int i = 0; i < 1000; i++) assert_int_equal(bfd_upload_write(u, chunk, sizeof chunk, &err), BF_OK);
    assert_int_equal(bfd_upload_size(u), 1000000);
    assert_int_equal(bfd_upload_finish(u, sha, &err), BF_OK);
    assert_string_equal(sha, MILLION_A_SHA);
    char *path = bfd_blob_path(b, sha);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_size, 1000000);
    free(path);

    assert_int_equal(bfd_upload_begin(b, &u, &err), BF_OK);
    assert_int_equal(bfd_upload_size(u), 0);
    assert_int_equal(bfd_upload_finish(u, sha, &err), BF_OK);
    assert_string_equal(sha, EMPTY_SHA);
    path = bfd_blob_path(b, sha);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_size, 0);
    free(path);
    bfd_blobs_close(b);
}

static void test_same_bytes_twice(void **state)
{
    const char *dir = *state;
    bfd_blobs *b = NULL;
    bf_error err = {0};
    char sha1[65], sha2[65], shard[4096], tmp[4096];
    assert_int_equal(bfd_blobs_open(dir, &b, &err), BF_OK);
    store_text(b, "hello world", sha1);
    store_text(b, "hello world", sha2);
    assert_string_equal(sha1, HELLO_SHA);
    assert_string_equal(sha2, HELLO_SHA);
    sub(shard, dir, "blobs/b9");
    assert_int_equal(count_entries(shard), 1);
    sub(tmp, dir, "tmp");
    assert_int_equal(count_entries(tmp), 0);
    bfd_blobs_close(b);
}

static void test_abort_leaves_nothing(void **state)
{
    const char *dir = *state;
    bfd_blobs *b = NULL;
    bfd_upload *u = NULL;
    bf_error err = {0};
    char tmp[4096], blobs[4096];
    assert_int_equal(bfd_blobs_open(dir, &b, &err), BF_OK);
    assert_int_equal(bfd_upload_begin(b, &u, &err), BF_OK);
    assert_int_equal(bfd_upload_write(u, "partial", 7, &err), BF_OK);
    sub(tmp, dir, "tmp");
    assert_int_equal(count_entries(tmp), 1);   /* the upload in flight */
    bfd_upload_abort(u);
    bfd_upload_abort(NULL);
    assert_int_equal(count_entries(tmp), 0);
    sub(blobs, dir, "blobs");
    assert_int_equal(count_entries(blobs), 0);
    bfd_blobs_close(b);
}

static void test_tmp_cleared_on_open(void **state)
{
    const char *dir = *state;
    bfd_blobs *b = NULL;
    bf_error err = {0};
    char tmp[4096], stale[4096], sha[65];
    assert_int_equal(bfd_blobs_open(dir, &b, &err), BF_OK);
    store_text(b, "hello world", sha);
    bfd_blobs_close(b);
    /* what a crash mid-upload leaves behind */
    sub(stale, dir, "tmp/upload-crashed1");
    spit(stale, "half a model");
    sub(stale, dir, "tmp/upload-crashed2");
    spit(stale, "");
    sub(tmp, dir, "tmp");
    assert_int_equal(count_entries(tmp), 2);
    assert_int_equal(bfd_blobs_open(dir, &b, &err), BF_OK);
    assert_int_equal(count_entries(tmp), 0);
    /* finished blobs are untouched */
    char *path = bfd_blob_path(b, HELLO_SHA);
    char *got = slurp(path, NULL);
    assert_non_null(got);
    assert_string_equal(got, "hello world");
    free(got);
    free(path);
    bfd_blobs_close(b);
}

static void test_remove_and_bad_ids(void **state)
{
    const char *dir = *state;
    bfd_blobs *b = NULL;
    bf_error err = {0};
    char sha[65];
    assert_int_equal(bfd_blobs_open(dir, &b, &err), BF_OK);
    store_text(b, "hello world", sha);
    char *path = bfd_blob_path(b, sha);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(bfd_blob_remove(b, sha, &err), BF_OK);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(bfd_blob_remove(b, sha, &err), BF_OK);   /* absent is fine */
    free(path);

    /* ids come from URLs: nothing but 64 lower-case hex digits becomes a path */
    assert_null(bfd_blob_path(b, "../../etc/passwd"));
    assert_null(bfd_blob_path(b, "B94D27B9934D3E08A52E52D7DA7DABFAC484EFE37A5380EE9088F7ACE2EFCDE9"));
    assert_null(bfd_blob_path(b, HELLO_SHA "0"));
    assert_null(bfd_blob_path(b, ""));
    assert_int_equal(bfd_blob_remove(b, "../tmp/x", &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "../tmp/x"));
    bfd_blobs_close(b);
}

static void test_write_atomic_replaces(void **state)
{
    const char *dir = *state;
    bf_error err = {0};
    char path[4096];
    sub(path, dir, "result.json");
    assert_int_equal(bf_write_atomic(path, "{\"v\":1}", 7, 0600, &err), BF_OK);
    char *got = slurp(path, NULL);
    assert_string_equal(got, "{\"v\":1}");
    free(got);
    assert_int_equal(bf_write_atomic(path, "[]", 2, 0600, &err), BF_OK);
    size_t len = 0;
    got = slurp(path, &len);
    assert_int_equal(len, 2);
    assert_string_equal(got, "[]");
    free(got);
    assert_int_equal(count_entries(dir), 1);   /* no temp file left beside it */
    assert_int_equal(bf_write_atomic(path, NULL, 0, 0600, &err), BF_OK);
    got = slurp(path, &len);
    assert_int_equal(len, 0);
    free(got);
}

static void test_errors_name_the_path(void **state)
{
    const char *dir = *state;
    bfd_blobs *b = NULL;
    bf_error err = {0};
    char file[4096], inside[4096];
    /* a regular file where a directory should be: fails even for root, unlike chmod */
    sub(file, dir, "notadir");
    spit(file, "x");
    sub(inside, dir, "notadir/out.json");
    assert_int_equal(bf_write_atomic(inside, "x", 1, 0600, &err), BF_EIO);
    assert_non_null(strstr(err.msg, inside));

    memset(&err, 0, sizeof err);
    assert_int_equal(bfd_blobs_open(file, &b, &err), BF_EIO);
    assert_null(b);
    sub(inside, dir, "notadir/blobs");
    assert_non_null(strstr(err.msg, inside));

    /* DIR/blobs exists but is a file */
    char data[4096], blobs[4096];
    sub(data, dir, "data");
    assert_int_equal(mkdir(data, 0700), 0);
    sub(blobs, dir, "data/blobs");
    spit(blobs, "");
    memset(&err, 0, sizeof err);
    assert_int_equal(bfd_blobs_open(data, &b, &err), BF_EIO);
    assert_non_null(strstr(err.msg, blobs));
}

/* --- verification against the name */

static void flip_bit(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    int c = fgetc(f);
    assert_int_not_equal(c, EOF);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    fputc(c ^ 0x04, f);
    assert_int_equal(fclose(f), 0);
}

static void test_verify(void **state)
{
    const char *dir = *state;
    bfd_blobs *b = NULL;
    bf_error err = {0};
    char sha[65], what[16], id[65], path2[4096];
    assert_int_equal(bfd_blobs_open(dir, &b, &err), BF_OK);
    store_text(b, "hello world", sha);
    char *path = bfd_blob_path(b, sha);
    assert_non_null(path);
    assert_int_equal(bfd_blob_verify(path, "model", &err), BF_OK);

    /* one bit flipped on disk */
    flip_bit(path, 4);
    assert_int_equal(bfd_blob_verify(path, "model", &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "model blob " HELLO_SHA " is corrupt (sha256 mismatch)"));
    /* ... and the store can tell which blob, through any prefix */
    char wrapped[600];
    snprintf(wrapped, sizeof wrapped, "chunk 1: %s", err.msg);
    assert_int_equal(bfd_blob_corrupt_named(wrapped, what, id), 1);
    assert_string_equal(what, "model");
    assert_string_equal(id, HELLO_SHA);

    /* the same bytes uploaded again replace the rotten copy */
    store_text(b, "hello world", sha);
    assert_int_equal(bfd_blob_verify(path, "model", &err), BF_OK);

    /* truncated, missing, not a blob name */
    assert_int_equal(truncate(path, 3), 0);
    assert_int_equal(bfd_blob_verify(path, "dataset", &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "dataset blob " HELLO_SHA " is corrupt (sha256 mismatch)"));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(bfd_blob_verify(path, "model", &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, HELLO_SHA));
    sub(path2, dir, "blobs/b9/not-a-sha");
    assert_int_equal(bfd_blob_verify(path2, "model", &err), BF_EINVAL);
    free(path);
    bfd_blobs_close(b);
}

static void test_corrupt_named(void **state)
{
    (void)state;
    char what[16] = "", id[65] = "";
    assert_int_equal(bfd_blob_corrupt_named(NULL, what, id), 0);
    assert_int_equal(bfd_blob_corrupt_named("model blob " HELLO_SHA " is fine", what, id), 0);
    assert_int_equal(bfd_blob_corrupt_named("model blob b94d is corrupt (sha256 mismatch)", what, id), 0);
    assert_int_equal(bfd_blob_corrupt_named("model blob " HELLO_SHA, what, id), 0);
    assert_int_equal(bfd_blob_corrupt_named("weird blob " HELLO_SHA " is corrupt (sha256 mismatch)", what, id), 0);
    /* a mention before the real one does not hide it */
    assert_int_equal(bfd_blob_corrupt_named("dataset blob x; dataset blob " EMPTY_SHA " is corrupt (sha256 mismatch)",
                                            what, id),
                     1);
    assert_string_equal(what, "dataset");
    assert_string_equal(id, EMPTY_SHA);
    assert_int_equal(bfd_blob_corrupt_named("chunk 0: error map blob " HELLO_SHA " is corrupt (sha256 mismatch)", what,
                                            id),
                     1);
    assert_string_equal(what, "error map");
}

/* bfd_blob_scrub: a message about a blob names it by id, never by path */
static void test_scrub(void **state)
{
    (void)state;
    const char *id = "7026aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    char path[256], msg[1024];
    snprintf(path, sizeof path, "/srv/x/blobs/70/%s", id);
    snprintf(msg, sizeof msg, "%s: header declares 9223372036854775808 bytes", path);
    bfd_blob_scrub(msg, path);
    char want[1024];
    snprintf(want, sizeof want, "%s: header declares 9223372036854775808 bytes", id);
    assert_string_equal(msg, want);
    /* inside a message (a campaign's), each time it occurs */
    snprintf(msg, sizeof msg, "dataset: %s: cannot open: gone (and %s)", path, path);
    bfd_blob_scrub(msg, path);
    snprintf(want, sizeof want, "dataset: %s: cannot open: gone (and %s)", id, id);
    assert_string_equal(msg, want);
    /* nothing to do, and no path */
    snprintf(msg, sizeof msg, "flip cell 1 (byte 108)");
    bfd_blob_scrub(msg, path);
    assert_string_equal(msg, "flip cell 1 (byte 108)");
    bfd_blob_scrub(msg, NULL);
    bfd_blob_scrub(NULL, path);
    assert_string_equal(msg, "flip cell 1 (byte 108)");
}

static void test_disk_full_predicate(void **state)
{
    (void)state;
    bf_error err = {0};
    assert_false(bfd_error_disk_full(NULL));
    assert_false(bfd_error_disk_full(&err));
    bf_error_set(&err, BF_EIO, "x: cannot write: Input/output error");
    assert_false(bfd_error_disk_full(&err));
    bf_error_set(&err, BF_EIO, BFD_DISK_FULL "x: cannot write: No space left on device");
    bf_error_prefix(&err, "storing the upload");
    assert_true(bfd_error_disk_full(&err));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_and_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_bytes_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tmp_cleared_on_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_and_bad_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_atomic_replaces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_name_the_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify, setup, teardown),
        cmocka_unit_test(test_corrupt_named),
        cmocka_unit_test(test_disk_full_predicate),
        cmocka_unit_test(test_scrub),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
