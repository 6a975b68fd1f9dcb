#ifndef BF_TEST_ALLOC_FAIL_H
#define BF_TEST_ALLOC_FAIL_H
#include <stddef.h>
/* n >= 0: the next n allocations succeed, then all fail; n < 0: never fail. */
void bf_test_alloc_fail_after(long n);
/* Allocations refused since the last bf_test_alloc_fail_after. */
long bf_test_alloc_failures(void);
/* on: record the largest size asked for from now (resets it); single-threaded tests only. */
void bf_test_alloc_track_largest(int on);
size_t bf_test_alloc_largest(void);
/* Bytes core holds now, and the most it has held since the last reset
 * (which starts the peak at what it holds then); any thread. */
size_t bf_test_alloc_live(void);
void bf_test_alloc_peak_reset(void);
size_t bf_test_alloc_peak(void);
#endif
