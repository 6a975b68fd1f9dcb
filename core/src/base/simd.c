/* The one place that decides the engine's CPU path (simd.h says why). */
#include "simd.h"

#include "bitflip/plan.h"

#include <stdlib.h>
#include <string.h>

int bf__simd_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return BF__SIMD_REF;
    /* libgcc sets the avx512 bits only when XCR0 shows the OS saving the
     * opmask and zmm state, so these also say the OS supports them */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return BF__SIMD_AVX512;
    return BF__SIMD_AVX2;
#else
    return BF__SIMD_REF;
#endif
}

int bf__simd_level(void)
{
    int cpu = bf__simd_cpu();
    const char *want = getenv("BITFLIP_SIMD");
    if (want && strcmp(want, "ref") == 0) return BF__SIMD_REF;
    if (want && strcmp(want, "avx2") == 0 && cpu > BF__SIMD_AVX2) return BF__SIMD_AVX2;
    return cpu;
}

int bf__simd_avx2(void) { return bf__simd_level() >= BF__SIMD_AVX2; }

const char *bf__simd_name(int level)
{
    return level >= BF__SIMD_AVX512 ? "avx512" : level >= BF__SIMD_AVX2 ? "avx2" : "ref";
}

const char *bf_cpu_path(void) { return bf__simd_name(bf__simd_level()); }
