/* bf_version against the version the top CMakeLists.txt declares in
 * project(bitflip VERSION x.y.z), read here from that file itself: the
 * configured header must carry that number, not one written elsewhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"

/* "x.y.z" from the `project(bitflip VERSION x.y.z ...)` line */
static void cmake_version(char *out, size_t cap)
{
    FILE *f = fopen(BF_SOURCE_DIR "/CMakeLists.txt", "r");
    assert_non_null(f);
    char line[512];
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "project(bitflip VERSION ");
        if (!p) continue;
        p += strlen("project(bitflip VERSION ");
        size_t n = strspn(p, "0123456789.");
        assert_true(n > 0 && n < cap);
        memcpy(out, p, n);
        out[n] = '\0';
        break;
    }
    fclose(f);
    assert_true(out[0] != '\0');
}

static void version_is_the_projects(void **state)
{
    (void)state;
    char want[64];
    cmake_version(want, sizeof want);
    assert_string_equal(bf_version(), want);
    /* the headers a program compiles against say the same as the library */
    assert_string_equal(BITFLIP_VERSION, want);
    char parts[64];
    snprintf(parts, sizeof parts, "%d.%d.%d", BITFLIP_VERSION_MAJOR, BITFLIP_VERSION_MINOR, BITFLIP_VERSION_PATCH);
    assert_string_equal(parts, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(version_is_the_projects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
