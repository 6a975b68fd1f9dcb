/* Region checks for the kernels whose blocks run uninstrumented under
 * AddressSanitizer (sgemm.c, linalg_conv_bcast.c, linalg_conv_pwseg.c:
 * each says what its blocks touch and why). In build-asan (GCC defines
 * __SANITIZE_ADDRESS__) NO_ASAN marks a block no_sanitize_address, and
 * bf__asan_bytes checks every byte of a span the block will read or write
 * before it runs: __asan_region_is_poisoned looks at every byte, as the
 * per-access checks did, and a poisoned one is read through instrumented
 * code (bf__asan_touch), so the report is ASan's usual one
 * (heap-buffer-overflow, the allocation, the stack through the kernel), a
 * read of 1 byte at the first bad address. Elsewhere (the release build,
 * TSan, clang's fuzz build, which does not define the macro) NO_ASAN is
 * empty and there is nothing else. */
#ifndef BF_ASAN_REGION_H
#define BF_ASAN_REGION_H

#if defined(__SANITIZE_ADDRESS__)
#include <stddef.h>
#include <stdint.h>
#include <sanitizer/asan_interface.h>
/* UBSan's checks left out of these blocks too (no_sanitize "undefined"):
 * what they checked there is what the region checks and the callers
 * bound. Their pointers (A's rows, the panels, y's, the epilogue's) are
 * each inside a span checked before the block; their index products are
 * int64 (a row times its stride, within such a span); their small arrays
 * (sums, row pointers, a store's stack row) are indexed by a block's rows
 * and lanes, constants where the block is inlined (switch on mr, nr <= 16
 * lanes). In the unrolled blocks UBSan's traps were a branch at every
 * pointer step and index: sgemm.c alone took 36 CPU-s to compile with them
 * (-O2), 14 without; tests/history/round24-h28-suite.md. Outside these
 * blocks (everywhere else, and the rows' callers) UBSan is as before. */
#define NO_ASAN __attribute__((no_sanitize("address,undefined")))

__attribute__((noinline, unused)) static void bf__asan_touch(const volatile char *p) { (void)*p; }

/* bytes from p (NULL or 0 bytes: nothing) */
static inline void bf__asan_bytes(const void *p, size_t bytes)
{
    const void *bad = p && bytes ? __asan_region_is_poisoned((void *)(uintptr_t)p, bytes) : NULL;
    if (bad) bf__asan_touch(bad);
}
#else
#define NO_ASAN
#endif

#endif
