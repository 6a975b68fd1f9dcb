/* a + b on 8 lanes with a as vaddps's first source, the operand x86
 * returns when both are NaN: a fused Add (a residual, a MatMul's bias)
 * keeps its A operand's payload, as the Add step does. In asm because the
 * compiler may swap the operands of a commutative intrinsic. Shared by the
 * AVX2 kernels that fuse an Add into their epilogue (sgemm.c's block,
 * linalg_conv_bcast8.c's); callers compile it under an AVX2 target and
 * call it only where the CPU has AVX2. */
#ifndef BF_ADD_FIRST8_H
#define BF_ADD_FIRST8_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2"), always_inline)) static inline __m256 add_first8(__m256 a, __m256 b)
{
    __m256 o;
    __asm__("vaddps %2, %1, %0" : "=x"(o) : "x"(a), "x"(b));
    return o;
}
#endif

#endif
