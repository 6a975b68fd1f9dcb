/* ASan build only: a planted use after free must still be reported under the
 * ASan options `make test` runs the suite with (the Makefile's
 * ASAN_RUN_OPTIONS, quarantine_size_mb=16; tests/README.md, "The eighteenth
 * round").
 *
 * ASan finds a use after free while the freed block waits in its quarantine
 * (a FIFO of the last N MB freed) and has not been handed out again. This
 * frees a 4 KB block, then frees 8 MB of other 4 KB blocks, then keeps 256
 * new 4 KB blocks live, and reads the first block. With the quarantine at 16
 * MB (or ASan's default 256) the block is still held: ASan reports a
 * heap-use-after-free (the test's PASS_REGULAR_EXPRESSION). With it at 8 MB
 * or less the block was recycled into one of the live ones and the read is
 * silent: the program prints the value and exits 0, and the test fails
 * (measured: quarantine_size_mb=4 and 8 silent, 16 and 256 reported). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK = 4096, CHURN_MB = 8, LIVE = 256 };

int main(void)
{
    char *volatile p = malloc(BLOCK);
    if (!p) return 2;
    memset(p, 1, BLOCK);
    free(p);
    for (size_t i = 0; i < (size_t)CHURN_MB * (1048576 / BLOCK); i++) {
        char *q = malloc(BLOCK);
        if (!q) return 2;
        memset(q, 2, BLOCK);
        free(q);
    }
    static char *live[LIVE];
    for (int i = 0; i < LIVE; i++) {
        live[i] = malloc(BLOCK);
        if (!live[i]) return 2;
        memset(live[i], 3, BLOCK);
    }
    printf("read %d after free: not reported\n", p[BLOCK / 2]);
    for (int i = 0; i < LIVE; i++) free(live[i]);
    return 0;
}
