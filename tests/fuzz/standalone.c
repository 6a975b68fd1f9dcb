/* A main for the libFuzzer targets without libFuzzer: runs the target once
 * over every file named (a directory: every file in it), so that the
 * ordinary builds replay the seed corpus and every crash the fuzzer ever
 * found (tests/fuzz/corpus/TARGET) as a regression test, under ASan and
 * UBSan in the sanitizer build. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional, as in libFuzzer: a target with set-up (fuzz_http) defines it. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return 1; }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *b = realloc(buf, cap);
            if (!b) { free(buf); fclose(f); return 1; }
            buf = b;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    /* an exact-size copy, so ASan catches a read one past the end */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) { free(buf); return 1; }
    if (len) memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0;
    long n = 0;
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) { perror(argv[i]); bad = 1; continue; }
        if (!S_ISDIR(sb.st_mode)) { bad |= run_file(argv[i]); n++; continue; }
        DIR *d = opendir(argv[i]);
        if (!d) { perror(argv[i]); bad = 1; continue; }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            bad |= run_file(path);
            n++;
        }
        closedir(d);
    }
    printf("%ld inputs replayed\n", n);
    return bad || n == 0;
}
