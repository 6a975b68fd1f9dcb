/* Which CPU path the engine's vectorised kernels take.
 *
 * Every kernel with an AVX2 copy (the product, the Conv paths, the pools, the
 * elementwise and softmax maps, the recurrent packer, transposes, argmax,
 * the differential engine's scans) asks bf__simd_avx2() before taking it,
 * so that one switch moves the whole engine from one CPU path to the other:
 * the environment variable BITFLIP_SIMD=ref forces the scalar reference
 * everywhere (BITFLIP_SIMD=avx2 the AVX2 copies on an AVX-512 CPU) (tests/conformance/simd_levels.sh runs the fixtures and a
 * campaign under each level and compares the bits). Each AVX2 copy computes
 * the reference's operations in the reference's order, so the choice moves
 * speed only, never a result: which is why bitflip's results are the same
 * bits on every x86-64 CPU (docs/ENGINE.md, "Same bits on every CPU").
 *
 * No state is kept: the CPU's features come from libgcc's CPUID table
 * (__builtin_cpu_supports) and the variable is read on each call (a getenv
 * is about 15 ns); callers in loops read it once before the loop. */
#ifndef BF_SIMD_H
#define BF_SIMD_H

/* The CPU paths, lowest first. AVX-512 is a superset of the AVX2 path:
 * the kernels with a 16-lane copy (the product's panel kernel, the
 * depthwise rows, the float maps and Softmax's rows) take it, every other kernel keeps its AVX2 copy, so
 * bf__simd_avx2() holds at this level too. */
enum { BF__SIMD_REF = 0, BF__SIMD_AVX2 = 1, BF__SIMD_AVX512 = 2 };

/* The highest path this CPU runs: AVX2 needs the avx2 and fma features;
 * AVX-512 those and avx512f, avx512bw, avx512dq and avx512vl (libgcc's
 * table reports these only where the OS saves the zmm state: it checks
 * XCR0 before setting them). */
int bf__simd_cpu(void);
/* The path the kernels take: the CPU's highest, lowered to BITFLIP_SIMD's
 * ("ref", "avx2" or "avx512"; any other value is ignored, and a level
 * above the CPU's gives the CPU's). */
int bf__simd_level(void);
/* bf__simd_level() >= BF__SIMD_AVX2. */
int bf__simd_avx2(void);
/* The name of a level ("ref", "avx2", "avx512"). */
const char *bf__simd_name(int level);

#endif
