/* A Slurm task's run time (bfd_slurm_task_seconds), which a finished chunk
 * turns into trial-duration observations: the difference of the two clock
 * readings the task script writes, by hand; anything else is "not known"
 * (-1), never a made-up 0 (the bug: every Slurm trial recorded 0 s). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "work/slurm.h"

static void readings_subtract(void **state)
{
    (void)state;
    /* what `echo "$s $(date +%s.%N)"` writes */
    assert_float_equal(bfd_slurm_task_seconds("1764000000.250000000 1764000003.750000000\n"), 3.5, 1e-6);
    assert_float_equal(bfd_slurm_task_seconds("1764000000.999999999 1764000001.000000001"), 2e-9, 1e-6);
    assert_float_equal(bfd_slurm_task_seconds("5 5\n"), 0.0, 0.0);   /* a real 0 is kept */
}

static void not_ours_is_unknown(void **state)
{
    (void)state;
    assert_true(bfd_slurm_task_seconds(NULL) < 0);
    assert_true(bfd_slurm_task_seconds("") < 0);
    assert_true(bfd_slurm_task_seconds("1764000000.25\n") < 0);        /* the end never written */
    assert_true(bfd_slurm_task_seconds("10 4") < 0);                    /* the clock stepped back */
    assert_true(bfd_slurm_task_seconds("0 1e12") < 0);                  /* not a task's run */
    assert_true(bfd_slurm_task_seconds("nan nan") < 0);
    assert_true(bfd_slurm_task_seconds("inf inf") < 0);
    assert_true(bfd_slurm_task_seconds("1 2 3") < 0);                   /* trailing junk */
    assert_true(bfd_slurm_task_seconds("{\"summary\": 1}") < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(readings_subtract),
        cmocka_unit_test(not_ours_is_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
