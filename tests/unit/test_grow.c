/* bf__grow (base/grow.h): the capacities it picks, worked by hand (the first
 * capacity, doubling, a need past double), no allocation when the array is
 * big enough, the elements kept across a move, and on a refused allocation
 * or a byte count past SIZE_MAX the array and its capacity untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "base/alloc.h"
#include "base/grow.h"

static void picks_first_then_doubles(void **state)
{
    (void)state;
    int *a = NULL;
    size_t cap = 0;
    assert_int_equal(bf__grow(&a, &cap, 1, sizeof *a, 16), 1);
    assert_non_null(a);
    assert_int_equal(cap, 16);   /* the first capacity, not the need */
    for (int i = 0; i < 16; i++) a[i] = 3 * i + 1;
    assert_int_equal(bf__grow(&a, &cap, 17, sizeof *a, 16), 1);
    assert_int_equal(cap, 32);   /* twice 16 covers 17 */
    assert_int_equal(bf__grow(&a, &cap, 100, sizeof *a, 16), 1);
    assert_int_equal(cap, 100);   /* twice 32 does not: the need */
    for (int i = 0; i < 16; i++) assert_int_equal(a[i], 3 * i + 1);
    bf__free(a);
}

static void big_enough_allocates_nothing(void **state)
{
    (void)state;
    double *a = NULL;
    size_t cap = 0;
    assert_int_equal(bf__grow(&a, &cap, 5, sizeof *a, 8), 1);
    double *was = a;
    bf_test_alloc_fail_after(0);   /* any allocation now is refused */
    assert_int_equal(bf__grow(&a, &cap, 8, sizeof *a, 8), 1);
    assert_int_equal(bf__grow(&a, &cap, 0, sizeof *a, 8), 1);
    assert_int_equal(bf_test_alloc_count(), 0);
    bf_test_alloc_fail_after(-1);
    assert_ptr_equal(a, was);
    assert_int_equal(cap, 8);
    bf__free(a);
}

static void refused_leaves_the_array_whole(void **state)
{
    (void)state;
    long *a = NULL;
    size_t cap = 0;
    assert_int_equal(bf__grow(&a, &cap, 4, sizeof *a, 4), 1);
    for (long i = 0; i < 4; i++) a[i] = 100 + i;
    long *was = a;
    bf_test_alloc_fail_after(0);
    assert_int_equal(bf__grow(&a, &cap, 5, sizeof *a, 4), 0);
    bf_test_alloc_fail_after(-1);
    assert_ptr_equal(a, was);
    assert_int_equal(cap, 4);
    for (long i = 0; i < 4; i++) assert_int_equal(a[i], 100 + i);
    bf__free(a);
}

/* need x size past SIZE_MAX: refused before any allocation is asked for */
static void overflowing_need_refused(void **state)
{
    (void)state;
    char *a = bf__malloc(8);
    assert_non_null(a);
    size_t cap = SIZE_MAX / 8;
    bf_test_alloc_fail_after(0);
    assert_int_equal(bf__grow(&a, &cap, SIZE_MAX / 8 + 1, 8, 4), 0);
    assert_int_equal(bf_test_alloc_count(), 0);
    bf_test_alloc_fail_after(-1);
    assert_int_equal(cap, SIZE_MAX / 8);
    bf__free(a);
}

/* twice the capacity overflows, the need does not: it asks for the most
 * elements whose bytes fit (SIZE_MAX / size of them), not a wrapped count */
static void doubling_clamped(void **state)
{
    (void)state;
    char *a = bf__malloc(8);
    assert_non_null(a);
    size_t cap = SIZE_MAX / 32 + 1;
    bf_test_alloc_fail_after(0);
    bf_test_alloc_track_largest(1);
    assert_int_equal(bf__grow(&a, &cap, cap + 1, 16, 4), 0);
    assert_int_equal(bf_test_alloc_largest(), (SIZE_MAX / 16) * 16);
    bf_test_alloc_track_largest(0);
    bf_test_alloc_fail_after(-1);
    assert_int_equal(cap, SIZE_MAX / 32 + 1);
    bf__free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(picks_first_then_doubles),
        cmocka_unit_test(big_enough_allocates_nothing),
        cmocka_unit_test(refused_leaves_the_array_whole),
        cmocka_unit_test(overflowing_need_refused),
        cmocka_unit_test(doubling_clamped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
