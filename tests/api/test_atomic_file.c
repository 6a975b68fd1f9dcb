/* Publishing a file atomically (bitflip/api/atomic_file.h): the target holds
 * the old bytes or the whole new ones, never a part; temp files never stay
 * behind; two writers of one name do not share a temp file; every failure
 * is a status and a message naming the file, with the target untouched. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "bitflip/api/atomic_file.h"

static int setup(void **state)
{
    char *dir = strdup("/tmp/bf_afile_XXXXXX");
    if (!dir || !mkdtemp(dir)) return -1;
    *state = dir;
    return 0;
}

static void rm_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) { unlink(path); return; }
    struct dirent *e;
    char sub[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        rm_tree(sub);
    }
    closedir(d);
    chmod(path, 0700);
    rmdir(path);
}

static int teardown(void **state)
{
    rm_tree(*state);
    free(*state);
    return 0;
}

static void sub(char *out, const char *dir, const char *name)
{
    snprintf(out, 4096, "%s/%s", dir, name);
}

/* The file's bytes (NUL-terminated, malloc'd), or NULL if it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    n = fread(buf, 1, cap, f);
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* Entries of a directory, "." and ".." aside (temp files are hidden: counted). */
static int count_entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void writes_whole_file_with_the_mode_asked(void **state)
{
    const char *dir = *state;
    char path[4096];
    bf_error err = {0};
    struct stat sb;
    sub(path, dir, "a.json");
    assert_int_equal(bf_write_atomic(path, "{\"v\":1}\n", 8, 0640, &err), BF_OK);
    char *got = slurp(path, NULL);
    assert_string_equal(got, "{\"v\":1}\n");
    free(got);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0640);   /* exactly: not the temp file's 0600, not masked */
    assert_int_equal(bf_write_atomic(path, "x", 1, 0600, &err), BF_OK);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0600);
    assert_int_equal(count_entries(dir), 1);       /* no temp file beside it */
}

static void replaces_while_a_reader_keeps_the_old_bytes(void **state)
{
    const char *dir = *state;
    char path[4096], buf[16] = {0};
    bf_error err = {0};
    sub(path, dir, "r.txt");
    assert_int_equal(bf_write_atomic(path, "old", 3, 0644, &err), BF_OK);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(bf_write_atomic(path, "new!", 4, 0644, &err), BF_OK);
    /* a rename, not a rewrite in place: the open file is the old one, whole */
    assert_int_equal(read(fd, buf, sizeof buf - 1), 3);
    assert_string_equal(buf, "old");
    close(fd);
    char *got = slurp(path, NULL);
    assert_string_equal(got, "new!");
    free(got);
}

static void streamed_file_appears_only_at_commit(void **state)
{
    const char *dir = *state;
    char path[4096];
    bf_error err = {0};
    bf_afile *f = NULL;
    sub(path, dir, "part-3.json");
    assert_int_equal(bf_write_atomic(path, "before", 6, 0644, &err), BF_OK);
    assert_int_equal(bf_afile_open(path, 0644, &f, &err), BF_OK);
    assert_non_null(f);
    /* 200,000 bytes in 1,000-byte pieces: past the writer's 64 KiB buffer three times */
    char piece[1000];
    for (int i = 0; i < 200; i++) {
        memset(piece, 'a' + i % 26, sizeof piece);
        assert_int_equal(bf_afile_write(f, piece, sizeof piece, &err), BF_OK);
    }
    char *got = slurp(path, NULL);
    assert_string_equal(got, "before");             /* readers still see the old file */
    free(got);
    assert_int_equal(count_entries(dir), 2);         /* the target and one hidden temp file */
    assert_int_equal(bf_afile_commit(f, NULL, &err), BF_OK);
    size_t len = 0;
    got = slurp(path, &len);
    assert_int_equal(len, 200000);
    assert_int_equal(got[0], 'a');
    assert_int_equal(got[999], 'a');
    assert_int_equal(got[1000], 'b');
    assert_int_equal(got[199999], 'a' + 199 % 26);
    free(got);
    assert_int_equal(count_entries(dir), 1);
}

static void abort_leaves_the_target_as_it_was(void **state)
{
    const char *dir = *state;
    char path[4096];
    bf_error err = {0};
    bf_afile *f = NULL;
    sub(path, dir, "keep.txt");
    assert_int_equal(bf_write_atomic(path, "kept", 4, 0644, &err), BF_OK);
    assert_int_equal(bf_afile_open(path, 0644, &f, &err), BF_OK);
    assert_int_equal(bf_afile_write(f, "lost", 4, &err), BF_OK);
    bf_afile_abort(f);
    char *got = slurp(path, NULL);
    assert_string_equal(got, "kept");
    free(got);
    assert_int_equal(count_entries(dir), 1);
    bf_afile_abort(NULL);   /* a no-op, as free(NULL) */
}

static void two_writers_of_one_name_do_not_collide(void **state)
{
    const char *dir = *state;
    char path[4096];
    bf_error err = {0};
    bf_afile *a = NULL, *b = NULL;
    sub(path, dir, "shared.json");
    /* two retries of one Slurm task: each its own temp file, the last commit wins whole */
    assert_int_equal(bf_afile_open(path, 0644, &a, &err), BF_OK);
    assert_int_equal(bf_afile_open(path, 0644, &b, &err), BF_OK);
    assert_int_equal(count_entries(dir), 2);
    assert_int_equal(bf_afile_write(a, "first", 5, &err), BF_OK);
    assert_int_equal(bf_afile_write(b, "second", 6, &err), BF_OK);
    assert_int_equal(bf_afile_commit(a, NULL, &err), BF_OK);
    assert_int_equal(bf_afile_commit(b, NULL, &err), BF_OK);
    char *got = slurp(path, NULL);
    assert_string_equal(got, "second");
    free(got);
    assert_int_equal(count_entries(dir), 1);
}

static void named_at_commit_from_a_temp_dir(void **state)
{
    const char *dir = *state;
    char tmp[4096], dest[4096];
    bf_error err = {0};
    bf_afile *f = NULL;
    sub(tmp, dir, "tmp");
    sub(dest, dir, "blob");
    assert_int_equal(mkdir(tmp, 0700), 0);
    assert_int_equal(bf_afile_open_in(tmp, 0600, &f, &err), BF_OK);
    assert_int_equal(count_entries(tmp), 1);
    bf_afile_unbuffered(f);
    assert_int_equal(bf_afile_write(f, "content", 7, &err), BF_OK);
    assert_int_equal(bf_afile_commit(f, dest, &err), BF_OK);
    char *got = slurp(dest, NULL);
    assert_string_equal(got, "content");
    free(got);
    assert_int_equal(count_entries(tmp), 0);

    /* no name at all: refused, and the temp file goes */
    assert_int_equal(bf_afile_open_in(tmp, 0600, &f, &err), BF_OK);
    memset(&err, 0, sizeof err);
    assert_int_equal(bf_afile_commit(f, NULL, &err), BF_EINVAL);
    assert_int_equal(err.status, BF_EINVAL);
    assert_int_equal(count_entries(tmp), 0);
}

static void bad_paths_fail_naming_the_path(void **state)
{
    const char *dir = *state;
    char file[4096], inside[4096], missing[4096];
    bf_error err = {0};
    bf_afile *f = (bf_afile *)1;
    assert_int_equal(bf_write_atomic("", "x", 1, 0644, &err), BF_EINVAL);
    assert_int_equal(bf_afile_open("/tmp/", 0644, &f, &err), BF_EINVAL);   /* a directory, by its slash */
    assert_null(f);   /* the out-parameter is cleared on failure */

    /* a directory by its name: only the rename can tell, and the directory stays */
    char d2[4096];
    sub(d2, dir, "adir");
    assert_int_equal(mkdir(d2, 0700), 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(bf_write_atomic(d2, "x", 1, 0644, &err), BF_EIO);
    assert_non_null(strstr(err.msg, "cannot replace"));
    struct stat sb;
    assert_int_equal(stat(d2, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(count_entries(dir), 1);   /* no temp file left */

    /* a regular file where a directory should be: fails even for root */
    sub(file, dir, "notadir");
    assert_int_equal(bf_write_atomic(file, "x", 1, 0644, &err), BF_OK);
    sub(inside, dir, "notadir/out.json");
    memset(&err, 0, sizeof err);
    assert_int_equal(bf_write_atomic(inside, "x", 1, 0644, &err), BF_EIO);
    assert_non_null(strstr(err.msg, inside));
    assert_non_null(strstr(err.msg, "Not a directory"));

    sub(missing, dir, "nowhere/out.json");
    memset(&err, 0, sizeof err);
    assert_int_equal(bf_write_atomic(missing, "x", 1, 0644, &err), BF_EIO);
    assert_non_null(strstr(err.msg, missing));
    assert_int_equal(bf_sync_dir(missing, &err), BF_EIO);
}

/* The checks of unwritable_directory_fails: 0 when they hold. */
static int write_into_readonly(const char *ro, const char *path)
{
    bf_error err = {0};
    if (bf_write_atomic(path, "x", 1, 0644, &err) != BF_EIO) return 1;
    if (!strstr(err.msg, path) || !strstr(err.msg, "Permission denied")) return 2;
    if (access(path, F_OK) == 0) return 3;
    (void)ro;
    return 0;
}

static void unwritable_directory_fails(void **state)
{
    const char *dir = *state;
    char ro[4096], path[4096];
    sub(ro, dir, "ro");
    sub(path, dir, "ro/out.json");
    assert_int_equal(mkdir(ro, 0555), 0);
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(chmod(ro, 0555), 0);   /* whatever the umask */
    if (geteuid() != 0) {
        assert_int_equal(write_into_readonly(ro, path), 0);
    } else {
        /* root writes anywhere: the check runs as nobody */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) _exit(setgid(65534) != 0 || setuid(65534) != 0 ? 9 : write_into_readonly(ro, path));
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(count_entries(ro), 0);
}

/* A write that fails half way (here the file-size limit, EFBIG, which root
 * is held to as well): the target keeps its old bytes, the temp file goes,
 * and a spoiled file cannot be committed. */
static void failed_write_leaves_old_file(void **state)
{
    const char *dir = *state;
    char path[4096];
    bf_error err = {0};
    bf_afile *f = NULL;
    struct rlimit old, lim;
    sub(path, dir, "limited.bin");
    assert_int_equal(bf_write_atomic(path, "old", 3, 0644, &err), BF_OK);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_IGN);   /* write(2) says EFBIG instead of the process dying */
    lim = old;
    lim.rlim_cur = 1000;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);

    static char big[100000];
    memset(big, 'z', sizeof big);
    memset(&err, 0, sizeof err);
    bf_status st = bf_write_atomic(path, big, sizeof big, 0644, &err);
    /* streamed: the write that crosses the limit fails, and so does everything after */
    assert_int_equal(bf_afile_open(path, 0644, &f, &err), BF_OK);
    bf_error werr = {0};
    assert_int_equal(bf_afile_write(f, big, sizeof big, &werr), BF_EIO);   /* more than the buffer: written at once */
    bf_error again = {0};
    assert_int_equal(bf_afile_write(f, "x", 1, &again), BF_EIO);
    assert_non_null(strstr(again.msg, "an earlier write failed"));
    bf_error cerr = {0};
    assert_int_equal(bf_afile_commit(f, NULL, &cerr), BF_EIO);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);

    assert_int_equal(st, BF_EIO);
    assert_non_null(strstr(err.msg, "cannot write"));
    assert_non_null(strstr(werr.msg, "cannot write"));
    char *got = slurp(path, NULL);
    assert_string_equal(got, "old");
    free(got);
    assert_int_equal(count_entries(dir), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(writes_whole_file_with_the_mode_asked, setup, teardown),
        cmocka_unit_test_setup_teardown(replaces_while_a_reader_keeps_the_old_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(streamed_file_appears_only_at_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(abort_leaves_the_target_as_it_was, setup, teardown),
        cmocka_unit_test_setup_teardown(two_writers_of_one_name_do_not_collide, setup, teardown),
        cmocka_unit_test_setup_teardown(named_at_commit_from_a_temp_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_paths_fail_naming_the_path, setup, teardown),
        cmocka_unit_test_setup_teardown(unwritable_directory_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_write_leaves_old_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
