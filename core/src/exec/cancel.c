/* Cancellation flags (bitflip/eval.h): the caller's plain int, read and
 * written atomically. The public option structs hold `const int *` rather
 * than `const atomic_int *` so that C++ can include the headers (it has no
 * atomic_int); GCC's and Clang's __atomic builtins give a plain int the
 * same atomicity, and they are lock-free on int, so a signal handler may
 * call bf_cancel_request. */
#include "bitflip/eval.h"

void bf_cancel_request(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST); }

void bf_cancel_clear(int *flag) { __atomic_store_n(flag, 0, __ATOMIC_SEQ_CST); }

int bf_cancel_requested(const int *flag) { return __atomic_load_n(flag, __ATOMIC_SEQ_CST); }
