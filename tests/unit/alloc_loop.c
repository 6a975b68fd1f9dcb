/* The allocation-failure loop over loading a model file (see alloc_loop.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "alloc_loop.h"

void th_alloc_failures_loading(const char *path, long max_n, th_alloc_round round)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    static unsigned char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    assert_true(len > 0 && len < sizeof buf);
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int succeeded = 0;
    for (long n = 0; n < max_n && !succeeded; n++) {
        bf_error err = {0};
        bf_test_alloc_fail_after(n);
        bf_status st = round(buf, len, name, &err);
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) succeeded = 1;
        else if (st != BF_ENOMEM) fail_msg("allocation %ld failing gave status %d: %s", n, st, err.msg);
    }
    assert_true(succeeded);
}

void th_no_free_descriptors(struct rlimit *old)
{
    assert_int_equal(getrlimit(RLIMIT_NOFILE, old), 0);
    int lowest = dup(0);
    assert_true(lowest >= 0);
    close(lowest);
    struct rlimit none = *old;
    none.rlim_cur = (rlim_t)lowest;   /* no descriptor free below it */
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &none), 0);
}
