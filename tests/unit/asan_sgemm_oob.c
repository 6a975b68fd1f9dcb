/* Built and run in the ASan build only (tests/CMakeLists.txt): a product
 * whose A, B or y buffer is one float short of what it reads or writes
 * must get AddressSanitizer's heap-buffer-overflow report. sgemm.c's rows
 * (the AVX-512 and AVX2 blocks) run uninstrumented there and check each
 * block's memory with region checks instead (sgemm.c says why); this is
 * the proof that an overrun past the last row is still caught, and caught
 * on every CPU path: the level is the argument's, lowered to what the CPU
 * has (the reference path is ASan's own instrumentation). Before the
 * region checks the AVX-512 block caught an A overrun only, and the AVX2
 * block a B or y overrun only (its broadcasts and masked loads went
 * unseen).
 *
 * usage: asan_sgemm_oob a|b|y ref|avx2|avx512 (the test passes on ASan's
 * report; "no report" is printed when the product ran to the end) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ops/sgemm.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: asan_sgemm_oob a|b|y ref|avx2|avx512\n");
        return 2;
    }
    /* two blocks of 12 rows, a pair of 16-column panels, k past a cache line */
    const int m = 24, n = 32, k = 40;
    char which = argv[1][0];
    int level = !strcmp(argv[2], "avx512") ? BF_SGEMM_AVX512 : !strcmp(argv[2], "avx2") ? BF_SGEMM_AVX2 : BF_SGEMM_REF;
    size_t na = (size_t)m * k - (which == 'a'), nb = (size_t)k * n - (which == 'b'), ny = (size_t)m * n - (which == 'y');
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *y = malloc(ny * sizeof *y);
    if (!a || !b || !y) return 2;
    for (size_t i = 0; i < na; i++) a[i] = (float)(i % 7) - 3.0f;
    for (size_t i = 0; i < nb; i++) b[i] = (float)(i % 5) - 2.0f;
    memset(y, 0, ny * sizeof *y);
    bf__sgemm_level(level, 0, 0, m, n, k, 1.0f, a, k, b, n, 0, y, n);
    printf("no report: %c one float short at level %s, and the product ran to the end\n", which, argv[2]);
    free(a), free(b), free(y);
    return 0;
}
