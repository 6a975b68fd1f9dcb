#ifndef BF_TEST_ALLOC_FAIL_H
#define BF_TEST_ALLOC_FAIL_H
/* n >= 0: the next n allocations succeed, then all fail; n < 0: never fail. */
void bf_test_alloc_fail_after(long n);
/* Allocations refused since the last bf_test_alloc_fail_after. */
long bf_test_alloc_failures(void);
#endif
