/* Worker plumbing (work/proc.h): frames survive being cut anywhere and
 * arriving glued together; an oversized length is refused from its header
 * alone; the blocking fd helpers round-trip through a pipe and see EOF and
 * truncation; sizes parse and print; how a child ended reads as words. And
 * the store's death accounting: deaths add up with their reasons, the
 * in-flight count never goes below zero, a clean stop clears it. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "store/store.h"
#include "work/proc.h"

/* --- frames */

static void frames_reassemble_from_any_cut(void **state)
{
    (void)state;
    const char *msgs[] = {"{\"t\":\"progress\",\"chunk\":3}", "", "{\"t\":\"done\"}"};
    char stream[256];
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        size_t fl = 0;
        char *f = bfd_frame_encode(msgs[i], strlen(msgs[i]), &fl);
        assert_non_null(f);
        assert_int_equal(fl, strlen(msgs[i]) + 4);
        memcpy(stream + n, f, fl);
        n += fl;
        free(f);
    }
    /* every split point, and byte by byte */
    for (size_t step = 1; step <= n; step++) {
        bfd_frame_reader r = {0};
        int got = 0;
        for (size_t off = 0; off < n; off += step) {
            size_t k = off + step <= n ? step : n - off;
            assert_int_equal(bfd_frame_feed(&r, stream + off, k, NULL), BF_OK);
            char *p;
            size_t len;
            while (bfd_frame_next(&r, &p, &len) == 1) {
                assert_true(got < 3);
                assert_int_equal(len, strlen(msgs[got]));
                assert_string_equal(p, msgs[got]);
                free(p);
                got++;
            }
        }
        assert_int_equal(got, 3);
        assert_int_equal(r.len, 0);
        bfd_frame_reader_free(&r);
    }
}

static void frames_oversized_refused_by_header(void **state)
{
    (void)state;
    bfd_frame_reader r = {.max = 100};
    bf_error err = {0};
    char head[4] = {0, 0, 0, 101};
    /* three bytes of a header say nothing yet */
    assert_int_equal(bfd_frame_feed(&r, head, 3, &err), BF_OK);
    assert_int_equal(bfd_frame_feed(&r, head + 3, 1, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "101 bytes"));
    bfd_frame_reader_free(&r);
    /* a hostile 4 GiB claim behind a good frame is caught in the same feed */
    char two[4 + 2 + 4] = {0, 0, 0, 2, '{', '}', (char)0xff, (char)0xff, (char)0xff, (char)0xff};
    bfd_frame_reader r2 = {0};
    assert_int_equal(bfd_frame_feed(&r2, two, sizeof two, &err), BF_ERANGE);
    bfd_frame_reader_free(&r2);
    /* and the encoder will not make one */
    size_t fl;
    assert_null(bfd_frame_encode("x", BFD_FRAME_MAX + 1, &fl));
}

static void frames_through_a_pipe(void **state)
{
    (void)state;
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    assert_int_equal(bfd_frame_write_fd(fd[1], "hello", 5, NULL), BF_OK);
    assert_int_equal(bfd_frame_write_fd(fd[1], "", 0, NULL), BF_OK);
    assert_int_equal(write(fd[1], "\0\0\0\x09par", 7), 7);   /* announces 9, sends 3 */
    close(fd[1]);
    char *p = NULL;
    size_t len = 0;
    bf_error err = {0};
    assert_int_equal(bfd_frame_read_fd(fd[0], &p, &len, &err), 1);
    assert_int_equal(len, 5);
    assert_string_equal(p, "hello");
    free(p);
    assert_int_equal(bfd_frame_read_fd(fd[0], &p, &len, &err), 1);
    assert_int_equal(len, 0);
    free(p);
    assert_true(bfd_frame_read_fd(fd[0], &p, &len, &err) < 0);
    assert_non_null(strstr(err.msg, "cut short"));
    assert_int_equal(bfd_frame_read_fd(fd[0], &p, &len, &err), 0);   /* EOF */
    close(fd[0]);
}

/* --- words */

static void sizes_parse_and_print(void **state)
{
    (void)state;
    int64_t v = 0;
    assert_int_equal(bfd_parse_size("512M", &v, NULL), BF_OK);
    assert_int_equal(v, (int64_t)512 << 20);
    assert_int_equal(bfd_parse_size("4G", &v, NULL), BF_OK);
    assert_int_equal(v, (int64_t)4 << 30);
    assert_int_equal(bfd_parse_size("4GiB", &v, NULL), BF_OK);
    assert_int_equal(v, (int64_t)4 << 30);
    assert_int_equal(bfd_parse_size("1.5g", &v, NULL), BF_OK);
    assert_int_equal(v, (int64_t)3 << 29);
    assert_int_equal(bfd_parse_size("1048576", &v, NULL), BF_OK);
    assert_int_equal(v, 1048576);
    bf_error err = {0};
    assert_int_equal(bfd_parse_size("4X", &v, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'4X'"));
    assert_int_equal(bfd_parse_size("-1G", &v, NULL), BF_EINVAL);
    assert_int_equal(bfd_parse_size("", &v, NULL), BF_EINVAL);
    assert_int_equal(bfd_parse_size("99999999T", &v, NULL), BF_EINVAL);

    char b[32];
    bfd_size_text((int64_t)4 << 30, b, sizeof b);
    assert_string_equal(b, "4.0 GiB");
    bfd_size_text((int64_t)512 << 20, b, sizeof b);
    assert_string_equal(b, "512 MiB");
    bfd_size_text((int64_t)3 << 29, b, sizeof b);
    assert_string_equal(b, "1.5 GiB");
    bfd_size_text(12, b, sizeof b);
    assert_string_equal(b, "12 bytes");
}

static void exit_reasons_in_words(void **state)
{
    (void)state;
    char b[200];
    bfd_exit_reason(0, SIGSEGV, (int64_t)4 << 30, b, sizeof b);
    assert_string_equal(b, "killed by SIGSEGV");
    bfd_exit_reason(0, SIGKILL, (int64_t)4 << 30, b, sizeof b);
    assert_string_equal(b, "killed by SIGKILL (out of memory? the job memory limit is 4.0 GiB)");
    bfd_exit_reason(3, 0, (int64_t)4 << 30, b, sizeof b);
    assert_string_equal(b, "exited with status 3");
    bfd_exit_reason(0, SIGABRT, (int64_t)4 << 30, b, sizeof b);
    assert_string_equal(b, "killed by SIGABRT");
    bfd_oom_reason((int64_t)1 << 30, "out of memory building a plan", b, sizeof b);
    assert_string_equal(b, "needs more than the 1.0 GiB job memory limit (--job-memory): out of memory building a plan");
}

/* --- the store's death accounting */

static void deaths_add_up_durably(void **state)
{
    (void)state;
    char path[] = "/tmp/bfd-test-proc-XXXXXX";
    assert_non_null(mkdtemp(path));
    char db[256];
    snprintf(db, sizeof db, "%s/bitflip.db", path);
    bfd_store *s = NULL;
    bf_error err = {0};
    assert_int_equal(bfd_store_open(db, &s, &err), BF_OK);
    bfd_campaign_row r = {.tenant = "t", .spec_json = "{}", .idem_hash = "", .created = 1, .trials_planned = 10,
                          .n_chunks = 2};
    snprintf(r.id, sizeof r.id, "c0123456789abcdef");
    memset(r.model_id, 'a', 64);
    memset(r.dataset_id, 'b', 64);
    assert_int_equal(bfd_campaign_insert(s, &r, &err), BF_OK);

    int deaths = -1, inflight = -1;
    char *reasons = NULL;
    assert_int_equal(bfd_campaign_inflight(s, r.id, +1, &err), BF_OK);
    assert_int_equal(bfd_campaign_inflight(s, r.id, +1, &err), BF_OK);
    assert_int_equal(bfd_campaign_death(s, r.id, "chunk 1: worker killed by SIGSEGV", 0, &deaths, &reasons, &err), BF_OK);
    assert_int_equal(deaths, 1);
    assert_string_equal(reasons, "chunk 1: worker killed by SIGSEGV");
    free(reasons);
    assert_int_equal(bfd_campaign_deaths(s, r.id, &deaths, &inflight, &err), BF_OK);
    assert_int_equal(inflight, 1);
    /* never below zero, whatever the order of reports */
    assert_int_equal(bfd_campaign_inflight(s, r.id, -1, &err), BF_OK);
    assert_int_equal(bfd_campaign_inflight(s, r.id, -1, &err), BF_OK);
    assert_int_equal(bfd_campaign_deaths(s, r.id, &deaths, &inflight, &err), BF_OK);
    assert_int_equal(inflight, 0);
    /* a clean stop clears what is in flight */
    assert_int_equal(bfd_campaign_inflight(s, r.id, +1, &err), BF_OK);
    assert_int_equal(bfd_campaign_inflight_clear(s, &err), BF_OK);
    assert_int_equal(bfd_campaign_deaths(s, r.id, &deaths, &inflight, &err), BF_OK);
    assert_int_equal(inflight, 0);
    /* survives a reopen; the second death lists both reasons */
    bfd_store_close(s);
    assert_int_equal(bfd_store_open(db, &s, &err), BF_OK);
    assert_int_equal(bfd_campaign_inflight(s, r.id, +1, &err), BF_OK);
    assert_int_equal(bfd_campaign_death(s, r.id, "the daemon died", 1, &deaths, &reasons, &err), BF_OK);
    assert_int_equal(deaths, 2);
    assert_string_equal(reasons, "chunk 1: worker killed by SIGSEGV; the daemon died");
    free(reasons);
    assert_int_equal(bfd_campaign_death(s, "cnope", "x", 0, &deaths, &reasons, &err), BF_ENOTFOUND);
    assert_null(reasons);
    bfd_store_close(s);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", path);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frames_reassemble_from_any_cut),
        cmocka_unit_test(frames_oversized_refused_by_header),
        cmocka_unit_test(frames_through_a_pipe),
        cmocka_unit_test(sizes_parse_and_print),
        cmocka_unit_test(exit_reasons_in_words),
        cmocka_unit_test(deaths_add_up_durably),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
