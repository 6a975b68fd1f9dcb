#ifndef BF_TEST_ALLOC_FAIL_H
#define BF_TEST_ALLOC_FAIL_H
#include <stddef.h>
/* n >= 0: the next n allocations succeed, then all fail; n < 0: never fail. */
void bf_test_alloc_fail_after(long n);
/* Allocations refused since the last bf_test_alloc_fail_after. */
long bf_test_alloc_failures(void);
/* Path mode, for allocation-failure loops under ASan (campaign_check.h,
 * TC_ALLOC_PATHS): allocations from index n on (0-based, counted from this
 * call) succeed until one whose path no earlier round failed (its call
 * stack, and whether it is the stack's first allocation since this call);
 * that one fails, and every one after it, until bf_test_alloc_fail_after(-1).
 * One thread at a time or several (a mutex). */
void bf_test_alloc_fail_new_path_from(long n);
/* Since the last arming (path mode or a countdown n >= 0): the index of the
 * first allocation refused (-1: none), and how many were asked for. */
long bf_test_alloc_failed_at(void);
long bf_test_alloc_count(void);
/* Path mode forgets the paths it failed: the next loop starts afresh. */
void bf_test_alloc_paths_forget(void);
/* on: record the largest size asked for from now (resets it); single-threaded tests only. */
void bf_test_alloc_track_largest(int on);
size_t bf_test_alloc_largest(void);
/* Bytes core holds now, and the most it has held since the last reset
 * (which starts the peak at what it holds then); any thread. */
size_t bf_test_alloc_live(void);
void bf_test_alloc_peak_reset(void);
size_t bf_test_alloc_peak(void);
#endif
